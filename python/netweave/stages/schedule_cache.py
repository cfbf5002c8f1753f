"""The executor's schedule cache (paper 004 §6.2's remedy for scheduling time at scale).

A contention-free schedule depends only on the operation, the message size, the host set, the
fabric's link values and the scheduler's options; repeated collectives with the same key reuse
the DAG instead of scheduling again. Entries are ordinary binary DAG files (``.nws``) that the
executors run as they are, named ``<operation>-<bytes>-<fingerprint>.nws`` so a program that
cannot hash a topology (the MPI runtime) can still list and pick them; the fingerprint covers
the host set, the fabric and the options. Each entry's summary (``<name>.json``) records the
SHA-256 of its DAG file: an entry whose DAG no longer matches (edited, truncated, swapped) is
not served but scheduled again and replaced, and the summary says so (``cache_rejected``).

>>> import tempfile
>>> from netweave import topology
>>> scratch = tempfile.TemporaryDirectory()
>>> cache = ScheduleCache(scratch.name)
>>> tree = topology.multi_cluster("a:3,b:3")
>>> dag, summary, hit = cache.contention_free(tree, "alltoall", 4096)
>>> hit, cache.contention_free(tree, "alltoall", 4096)[2]
(False, True)
>>> scratch.cleanup()
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from netweave import _core
from netweave._core import NetweaveError, TaskGraph, Topology
from netweave.stages import traffic
from netweave.support import files

#: Bumped whenever the scheduler's output for the same inputs may change, so old entries miss
#: (2: entries carry the checksum of their DAG file).
SCHEDULER_VERSION = 2


class ScheduleCache:
    """A directory of contention-free schedules keyed by (operation, size, host set, fabric,
    options)."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise NetweaveError(f"{self.directory}: the schedule cache must be a directory")

    def key(self, topology: Topology, operation: str, bytes: int, **options: Any) -> str:
        """The entry name (without ``.nws``) for these inputs."""
        fabric = json.loads(topology.to_text("json"))
        hosts = [n["label"] for n in fabric.get("nodes", []) if n.get("kind") == "host"]
        material = json.dumps({"version": SCHEDULER_VERSION, "hosts": hosts, "fabric": fabric,
                               "options": options}, sort_keys=True)
        fingerprint = hashlib.sha256(material.encode()).hexdigest()[:20]
        return f"{operation}-{bytes}-{fingerprint}"

    def contention_free(self, topology: Topology, operation: str, bytes: int,
                        tasks: list[tuple[int, int, int]] | None = None,
                        **options: Any) -> tuple[TaskGraph, dict[str, Any], bool]:
        """:func:`traffic.contention_free` through the cache: ``(graph, summary, hit)``.
        On a hit the summary is the one stored with the entry (``scheduling_seconds`` is the
        original run's) plus ``cache_seconds``, the time the lookup took."""
        started = time.perf_counter()
        keyed = dict(options, tasks=tasks) if tasks is not None else options
        name = self.key(topology, operation, bytes, **keyed)
        dag_path = self.directory / f"{name}.nws"
        meta_path = self.directory / f"{name}.json"
        rejected = None
        if dag_path.exists() and meta_path.exists():
            served, rejected = self._verified(dag_path, meta_path)
            if served is not None:
                graph, summary = served
                summary["cache_seconds"] = time.perf_counter() - started
                return graph, summary, True
        graph, summary = traffic.contention_free(topology, operation, bytes, tasks=tasks, **options)
        files.ensure_dir(self.directory)
        # The DAG first, then the summary naming its checksum, each renamed into place whole: a
        # concurrent reader sees the old entry, a new one, or a DAG whose summary does not match
        # yet (rejected, never served half-written).
        files.write_with(dag_path, graph.save)
        stored = dict(summary, dag_sha256=_sha256(dag_path))
        files.write_text(meta_path, json.dumps(stored, sort_keys=True))
        if rejected is not None:
            summary["cache_rejected"] = rejected
        return graph, summary, False

    @staticmethod
    def _verified(dag_path: Path, meta_path: Path) -> tuple[tuple[TaskGraph, dict[str, Any]] | None, str | None]:
        """``((graph, summary), None)`` for an entry whose DAG matches the checksum its summary
        records, else ``(None, why it was rejected)``."""
        try:
            summary = json.loads(_core.read_text_file(str(meta_path)))
        except (NetweaveError, ValueError) as e:
            return None, f"{meta_path.name}: unreadable ({e})"
        want = summary.pop("dag_sha256", None) if isinstance(summary, dict) else None
        if not isinstance(want, str):
            return None, f"{meta_path.name}: no checksum of its DAG"
        if _sha256(dag_path) != want:
            return None, f"{dag_path.name}: does not match the checksum in {meta_path.name} (changed since it was cached)"
        try:
            return (TaskGraph.load(dag_path), summary), None
        except NetweaveError as e:
            return None, f"{dag_path.name}: {e}"

    def entries(self) -> list[str]:
        """The cached entries' names, sorted."""
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.nws"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
