"""Calibrating the flow model on the emulated cluster (``netweave emulate calibrate``).

Brings the fabric up once (:mod:`netweave.run.emulate`, root) and measures with the TCP executor
what the flow model takes as parameters:

- **per-message host overhead** (``overhead_s``): a chain of 1-byte tasks bouncing between two
  hosts, each started when the previous arrived (no sync message); the time per task beyond the
  model's own is the overhead a message costs its sender.
- **sync cost** (``sync_s``): the same chain over four hosts, so that every task waits for a
  1-byte sync message from the previous task's receiver; the time per task beyond the plain
  chain's is what one sync costs.
- **loss behaviour at the port buffer** (``tcp``, Ethernet only): an incast sweep — ``k``
  senders (hosts 1..k) each sending ``bytes`` to host 0 at once, ``repeats`` times each — and
  the TCP model's parameters (timeout, window per flow, survivor fraction; see
  docs/flowsim.md) that the flow model needs to predict the sweep's median times, found by a
  grid search over what the literature and Linux make plausible.
- **the tail-loss probe** (``tcp.probe_s``, Ethernet only): incasts of short messages
  (``PROBE_BYTES`` from the most senders of the sweep), whose bursts overflow the port but
  drain within a few milliseconds — whether they pay a timeout is what the probe decides.
- **steady many-flow sharing** (``tcp.steady_free_segments``, ``tcp.steady_segments_per_timeout``,
  Ethernet only): Concurrent all-to-all among the first ``STEADY_HOSTS`` hosts (every send at
  once, so every port carries many long-lived flows) at ``STEADY_BYTES`` per pair.

Each group is fitted with the ones before it fixed (incast, then probe, then steady sharing):
the 1 MB incasts outlast any probe and carry no steady charge (their port is overloaded by a
burst), the short incasts carry none either, so the fits do not pull against each other.

The result is a calibration file (:data:`netweave.stages.flowsim.CALIBRATION_FORMAT`, version
:data:`netweave.stages.flowsim.CALIBRATION_VERSION`) naming the fabric it was measured on (link
layer, port buffer, scale, host link rate): ``simulate flow --calibration F`` and ``plan
--calibration F`` take it and refuse it for a fabric of another kind.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import socket
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netweave._core import NetweaveError, RoutingTable, TaskGraph, Topology
from netweave.run import emulate, processes
from netweave.stages import flowsim

#: Incast sweep: senders per point, bytes each sender sends, runs per point.
DEFAULT_SENDERS = (2, 4, 8, 16, 24)
DEFAULT_INCAST_BYTES = 1_000_000
DEFAULT_REPEATS = 2
#: Tasks in each overhead chain.
CHAIN_TASKS = 200
#: The grid the TCP parameters are fitted on: timeouts as multiples of Linux's RTO_min (a
#: timed-out flow also ran for a few round trips before its loss was detected), windows per
#: flow in segments, survivor fractions.
TIMEOUT_FACTORS = (1.0, 1.025, 1.05, 1.075, 1.1, 1.15)
WINDOW_SEGMENTS = (4, 6, 8, 10, 12, 14, 16, 20, 24, 32)
SURVIVOR_FRACTIONS = tuple(round(0.15 + 0.05 * i, 2) for i in range(12))
#: Short incasts that test the tail-loss probe, bytes per sender; the grid of its fixed part.
PROBE_BYTES = (16_384, 65_536)
PROBE_SECONDS = (0.0, 0.002, 0.004, 0.007, 0.01, 0.015, 0.02, 0.03)
#: Steady sharing: Concurrent all-to-all among this many hosts (at most), bytes per pair; and the
#: grid of segments streamed before timeouts and segments per timeout.
STEADY_HOSTS = 16
STEADY_BYTES = (65_536, 262_144)
STEADY_FREE_SEGMENTS = (0.0, 10.0, 20.0, 40.0, 70.0, 100.0, 150.0)
STEADY_SEGMENTS_PER_TIMEOUT = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 40.0, 80.0)


def chain(hosts: list[int], tasks: int, num_ranks: int) -> TaskGraph:
    """`tasks` 1-byte tasks in a chain: task i goes from ``hosts[2i mod h]`` to the next host
    in the list and starts after task i − 1. Over two hosts every receiver sends next (no sync
    message); over four, every task needs a sync from the previous receiver."""
    h = len(hosts)
    rows: list[tuple[int, int, int, list[int], int | None]] = []
    for i in range(tasks):
        src, dst = hosts[(2 * i) % h], hosts[(2 * i + 1) % h]
        rows.append((src, dst, 1, [i - 1] if i else [], None))
    return TaskGraph(f"chain{h}", num_ranks, rows)


def incast(senders: int, nbytes: int, num_ranks: int) -> TaskGraph:
    """Hosts 1..senders each send `nbytes` to host 0, all at once."""
    return TaskGraph(f"incast{senders}", num_ranks, [(s, 0, nbytes, [], None) for s in range(1, senders + 1)])


def concurrent_alltoall(hosts: int, nbytes: int, num_ranks: int) -> TaskGraph:
    """Hosts 0..hosts-1 each send `nbytes` to every other one of them, all at once."""
    rows: list[tuple[int, int, int, list[int], int | None]] = [
        (s, d, nbytes, [], None) for s in range(hosts) for d in range(hosts) if s != d]
    return TaskGraph(f"concurrent{hosts}", num_ranks, rows)


def _checked(topo: Topology, scale: float, buffer: int | None, senders: tuple[int, ...], nbytes: int,
             repeats: int) -> int | None:
    if not scale > 0:
        raise NetweaveError(f"--scale {scale} must be positive (a fraction of each link's bandwidth)")
    if buffer is not None and buffer <= 0:
        raise NetweaveError(f"--buffer {buffer}: a port buffer must be a positive number of bytes")
    if buffer is not None and topo.link_layer != "ethernet":
        raise NetweaveError(f"--buffer on a {topo.link_layer} fabric: a lossless fabric has no drop-tail buffer "
                            "(state link_layer ethernet in the topology to model one)")
    if topo.num_hosts < 4:
        raise NetweaveError(f"calibration needs at least 4 hosts (the sync chain uses four); the topology has {topo.num_hosts}")
    if not senders or min(senders) < 1 or max(senders) >= topo.num_hosts:
        raise NetweaveError(f"--senders {','.join(map(str, senders))}: each count must lie in 1..{topo.num_hosts - 1}")
    if nbytes < 1 or repeats < 1:
        raise NetweaveError("--bytes and --repeats must be at least 1")
    return emulate.port_buffer(topo, buffer)


def _graph(point: dict[str, Any], num_ranks: int) -> tuple[TaskGraph, int]:
    """A sweep point's task graph and the sends each host runs at once (the model's nct)."""
    if point.get("kind") == "concurrent":
        return concurrent_alltoall(point["hosts"], point["bytes"], num_ranks), max(point["hosts"] - 1, 1)
    return incast(point["senders"], point["bytes"], num_ranks), 1


def _grid_fit(scaled_routes: RoutingTable, points: list[dict[str, Any]], grid: list[dict[str, float]],
              fixed: dict[str, float], overhead_s: float, sync_s: float) -> tuple[dict[str, float], float]:
    """The grid entry (on top of `fixed`) whose predictions of `points` (each with ``median_s``)
    are closest in squared log ratio summed over the points; and that error."""
    graphs = [(*_graph(p, scaled_routes.topology.num_hosts), p["median_s"]) for p in points]
    best: tuple[float, dict[str, float]] = (math.inf, {})
    for entry in grid:
        tcp = {**fixed, **entry}
        error = 0.0
        for graph, nct, measured in graphs:
            predicted = flowsim.simulate(scaled_routes, graph, executor="dag", nct=nct, overhead_s=overhead_s,
                                         sync_s=sync_s, tcp=tcp)["makespan_s"]
            error += math.log(predicted / measured) ** 2
        if error < best[0]:
            best = (error, tcp)
    return best[1], best[0]


def fit_tcp(topo: Topology, routes: RoutingTable, points: list[dict[str, Any]], scale: float, buffer: int | None,
            overhead_s: float, sync_s: float) -> tuple[dict[str, float], float]:
    """The TCP parameters whose predictions of the sweep `points` (``kind`` incast with
    ``senders``, or concurrent with ``hosts``; ``bytes``, ``median_s``) are closest, in squared
    log ratio summed over the points; and that error. Fitted in three steps, each with the
    earlier ones fixed (module doc): the 1 MB incasts (timeout, window, survivor fraction), the
    short incasts (probe), the concurrent all-to-alls (steady sharing). A step without points
    keeps the defaults."""
    scaled = emulate.predicted_topology(topo, scale, buffer)
    scaled_routes = emulate.scaled_routes(routes, scaled)
    rto = flowsim.TCP_DEFAULTS["timeout_s"]
    # The short incasts: the probe's points; the longest bytes per sender are the incast sweep's.
    longest = max((p["bytes"] for p in points if p.get("kind", "incast") == "incast"), default=0)
    probe_points = [p for p in points if p.get("kind", "incast") == "incast" and p["bytes"] < longest]
    groups = {
        "incast": [p for p in points if p.get("kind", "incast") == "incast" and p not in probe_points],
        "probe": [p for p in points if p.get("kind", "incast") == "incast" and p in probe_points],
        "concurrent": [p for p in points if p.get("kind") == "concurrent"],
    }
    grids: dict[str, list[dict[str, float]]] = {
        "incast": [{"timeout_s": rto * factor, "window_segments": float(window), "survivor_fraction": fraction}
                   for factor in TIMEOUT_FACTORS for window in WINDOW_SEGMENTS for fraction in SURVIVOR_FRACTIONS],
        "probe": [{"probe_s": probe} for probe in PROBE_SECONDS],
        "concurrent": [{"steady_free_segments": free, "steady_segments_per_timeout": per}
                       for free in STEADY_FREE_SEGMENTS for per in STEADY_SEGMENTS_PER_TIMEOUT],
    }
    tcp: dict[str, float] = {}
    total = 0.0
    for group, group_points in groups.items():
        if group_points:
            tcp, error = _grid_fit(scaled_routes, group_points, grids[group], tcp, overhead_s, sync_s)
            total += error
    return tcp, total


def calibrate(topo: Topology, routes: RoutingTable, name: str, scale: float = 1.0, buffer: int | None = None,
              senders: tuple[int, ...] = DEFAULT_SENDERS, nbytes: int = DEFAULT_INCAST_BYTES,
              repeats: int = DEFAULT_REPEATS, progress: Callable[[str], None] | None = None,
              steady: bool = True) -> dict[str, Any]:
    """Measure the flow model's parameters on the emulated `topo` (see the module doc) and return
    the calibration document. Root only; the fabric is torn down however this ends. `steady`
    False leaves out the short-incast and Concurrent all-to-all points (probe and steady sharing
    keep their defaults)."""
    note = progress or (lambda _msg: None)
    queue = _checked(topo, scale, buffer, senders, nbytes, repeats)
    lossy = topo.link_layer == "ethernet"
    n = topo.num_hosts
    measured: dict[str, Any] = {}
    with processes.Job() as job:  # killed netweave: the guardian takes the fabric down
        job.on_parent_death([sys.executable, "-c", f"from netweave.run import emulate; emulate.down({name!r})"])
        fabric = emulate.up(topo, routes, name, scale=scale, buffer=buffer)
        try:
            for label, graph in (("plain", chain([0, 1], CHAIN_TASKS, n)), ("sync", chain([0, 1, 2, 3], CHAIN_TASKS, n))):
                note(f"chain of {CHAIN_TASKS} 1-byte tasks ({label})")
                measured[f"chain_{label}_s"] = _run(fabric, graph)
            sweep: list[dict[str, Any]] = []
            for k in (senders if lossy else ()):
                times = []
                for r in range(repeats):
                    note(f"incast: {k} senders x {nbytes:,} B ({r + 1}/{repeats})")
                    times.append(_run(fabric, incast(k, nbytes, n)))
                sweep.append({"kind": "incast", "senders": k, "bytes": nbytes, "measured_s": times,
                              "median_s": statistics.median(times)})
            # The probe's and steady sharing's points (module doc), measured like the sweep's.
            extra: dict[str, list[dict[str, Any]]] = {"probe": [], "steady": []}
            if lossy and steady:
                extra["probe"] = [{"kind": "incast", "senders": max(senders), "bytes": b} for b in PROBE_BYTES if b < nbytes]
                extra["steady"] = [{"kind": "concurrent", "hosts": min(n, STEADY_HOSTS), "bytes": b} for b in STEADY_BYTES]
            for points in extra.values():
                for point in points:
                    graph, _nct = _graph(point, n)
                    times = []
                    for r in range(repeats):
                        note(f"{graph.name}: {point['bytes']:,} B ({r + 1}/{repeats})")
                        times.append(_run(fabric, graph))
                    point.update(measured_s=times, median_s=statistics.median(times))
        finally:
            emulate.down(name)
    # Overhead and sync cost: what the chains took beyond the model's own time for them.
    model = {label: emulate.predict(topo, routes, chain(hosts, CHAIN_TASKS, n), scale, buffer)["makespan_s"]
             for label, hosts in (("plain", [0, 1]), ("sync", [0, 1, 2, 3]))}
    overhead = max(0.0, (measured["chain_plain_s"] - model["plain"]) / CHAIN_TASKS)
    # In the sync chain every task but the first also waits for one sync message, which the
    # model charges the per-message overhead again.
    sync_extra = (measured["chain_sync_s"] - measured["chain_plain_s"]) - (model["sync"] - model["plain"])
    sync = max(0.0, sync_extra / (CHAIN_TASKS - 1) + overhead)
    params: dict[str, Any] = {"overhead_s": overhead, "sync_s": sync}
    fit_error = None
    if lossy:
        note("fitting the TCP model to the incast sweep")
        tcp, fit_error = fit_tcp(topo, routes, sweep + extra["probe"] + extra["steady"], scale, buffer, overhead, sync)
        params["tcp"] = {**{k: v for k, v in flowsim.TCP_DEFAULTS.items() if k == "segment_bytes"}, **tcp}
        for point in sweep + extra["probe"] + extra["steady"]:
            graph, nct = _graph(point, n)
            point["predicted_s"] = emulate.predict(topo, routes, graph, scale, buffer,
                                                   _document(topo, scale, queue, params, {}, None), nct=nct)["makespan_s"]
    return _document(topo, scale, queue, params, {"chains": measured, "chain_tasks": CHAIN_TASKS,
                                                  "incast": sweep if lossy else [], **extra}, fit_error)


def _run(fabric: emulate.EmulatedCluster, graph: TaskGraph) -> float:
    result = emulate.run(fabric, graph)
    if not result["ok"] or result["makespan_s"] is None:
        raise NetweaveError(f"calibration run {graph.name} failed: {result['cause']}")
    return float(result["makespan_s"])


def _document(topo: Topology, scale: float, queue: int | None, params: dict[str, Any],
              measurements: dict[str, Any], fit_error: float | None) -> dict[str, Any]:
    specs = topo.link_specs()
    host_links = sorted({float(b) for b, _lat in specs.tolist()}) if len(specs) else []
    return {
        "format": flowsim.CALIBRATION_FORMAT, "version": flowsim.CALIBRATION_VERSION,
        "fabric": {"topology": topo.name, "family": topo.family, "hosts": topo.num_hosts,
                   "link_layer": topo.link_layer, "port_buffer_bytes": topo.port_buffer_bytes if queue is None else queue,
                   "scale": scale, "link_gbps": host_links},
        "machine": socket.gethostname(),
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "parameters": params,
        "fit_error": fit_error,
        "measurements": measurements,
    }


def write(document: dict[str, Any], path: Path) -> None:
    """Write the calibration file whole or not at all (a temporary file renamed over `path`)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(document, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
