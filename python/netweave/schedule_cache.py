"""The executor's schedule cache (paper 004 §6.2's remedy for scheduling time at scale).

A contention-free schedule depends only on the operation, the message size, the host set, the
fabric's link values and the scheduler's options; repeated collectives with the same key reuse
the DAG instead of scheduling again. Entries are ordinary binary DAG files (``.nws``) that the
executors run as they are, named ``<operation>-<bytes>-<fingerprint>.nws`` so a program that
cannot hash a topology (the MPI runtime) can still list and pick them; the fingerprint covers
the host set, the fabric and the options.

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
import os
import time
from pathlib import Path
from typing import Any, Optional

from netweave import traffic
from netweave._core import NetweaveError, TaskGraph, Topology

#: Bumped whenever the scheduler's output for the same inputs may change, so old entries miss.
SCHEDULER_VERSION = 1


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
                        tasks: Optional[list[tuple[int, int, int]]] = None,
                        **options: Any) -> tuple[TaskGraph, dict[str, Any], bool]:
        """:func:`traffic.contention_free` through the cache: ``(graph, summary, hit)``.
        On a hit the summary is the one stored with the entry (``scheduling_seconds`` is the
        original run's) plus ``cache_seconds``, the time the lookup took."""
        started = time.perf_counter()
        keyed = dict(options, tasks=tasks) if tasks is not None else options
        name = self.key(topology, operation, bytes, **keyed)
        dag_path = self.directory / f"{name}.nws"
        meta_path = self.directory / f"{name}.json"
        if dag_path.exists() and meta_path.exists():
            graph = TaskGraph.load(dag_path)
            summary = json.loads(meta_path.read_text())
            summary["cache_seconds"] = time.perf_counter() - started
            return graph, summary, True
        graph, summary = traffic.contention_free(topology, operation, bytes, tasks=tasks, **options)
        self.directory.mkdir(parents=True, exist_ok=True)
        # Write under temporary names, then rename: a concurrent reader never sees half an entry.
        for path, write in ((dag_path, lambda p: graph.save(p)),
                            (meta_path, lambda p: p.write_text(json.dumps(summary, sort_keys=True)))):
            partial = path.with_name(f".partial-{os.getpid()}-{path.name}")  # keeps the suffix that picks the format
            try:
                write(partial)
                os.replace(partial, path)
            finally:
                partial.unlink(missing_ok=True)
        return graph, summary, False

    def entries(self) -> list[str]:
        """The cached entries' names, sorted."""
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.nws"))
