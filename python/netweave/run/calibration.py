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
  the TCP model's parameters (timeout, window per flow, survival per segment; see
  docs/flowsim.md) that the flow model needs to predict the sweep's median times, found by a
  grid search over what the literature and Linux make plausible.
- **the tail-loss probe** (``tcp.probe_s``, Ethernet only): incasts of short messages
  (``PROBE_SEGMENTS`` per sender, from the most senders of the sweep), whose bursts overflow the
  port but drain within milliseconds — whether they pay a timeout is what the probe decides.
  ``tcp.lone_tail_probability`` keeps its default: at the calibration's slow links these points
  cannot measure it (docs/flowsim.md, "A lone lost tail, charged as its mean").
  Where the points cannot tell grid values apart — their errors differ by less than the spread
  of the points' own repeats — the fit keeps the one nearest Linux's default.
- **host streams and steady many-flow sharing** (``host_streams``; ``tcp.steady_free_segments``,
  ``tcp.steady_segments_per_timeout``, Ethernet only): Concurrent all-to-all among the first
  ``STEADY_HOSTS`` hosts (every send at once, so every port carries many long-lived flows) at
  ``STEADY_BYTES`` per pair, each host posting its sends in an order of its own
  (:func:`netweave.stages.traffic.concurrent`). How many of its posted sends a host's TCP
  streams at once (``host_streams``, :data:`HOST_STREAMS`) decides how often unrelated orders
  meet at one receiver while their senders' links idle: the emulated hosts stream about two, and
  Concurrent all-to-all on a lossless star measures 1.7× its bound where the flow model
  sharing every posted send at once predicts the bound (docs/flowsim.md, "Host streams"). On a
  lossless fabric the points fit it alone; on Ethernet with the steady pair.

- **the native MPIs' host cost** (the ``native`` section, :func:`measure_natives`,
  :func:`fit_native`): each library's own ``MPI_Gather`` and ``MPI_Alltoall`` through ``nwbench``
  (as ``plan --verify`` runs them) on every host of the fabric at :data:`NATIVE_SIZES` per
  pair (gathers also on links :data:`NATIVE_SCALE_FACTORS` times faster), against the native
  model's prediction of the same call. What the model misses is what the library costs the
  hosts here, fitted per library and collective as a per-message cost on the critical path —
  one below the library's eager limit (``eager_s``), one above (``rendezvous_s``, its handshake
  waits for the receiver), plus ``byte_s`` per byte of the message (a polling rank moves data
  only while the scheduler runs it) — for a job of the calibration's ranks, paid by a gather's
  receivers and an all-to-all's senders (:func:`native_charges`); ``plan`` charges it ∝ the
  job's ranks (:func:`native_overhead`). Each library's ``host_streams`` is fitted on its
  calls too: its transport, not netweave's executor, decides how many posted sends move at once
  (:func:`native_streams`).

Every point is timed as ``plan --verify`` times a candidate (:func:`timed`): one warm-up call
over the same connections, then the slowest rank's mean over :data:`TIMED_CALLS` calls, and
over more where those were short.

Each group is fitted with the ones before it fixed (incast, then probe, then steady sharing):
the 1 MB incasts outlast any probe and carry no steady charge (their port is overloaded by a
burst), the short incasts carry none either, so the fits do not pull against each other. The
survival per segment is fitted twice: with the 1 MB incasts, then again with the probe on the
short and long incasts together — at a slow link the long flows keep the same few flows for any
survival near 1, and the first fit's pick among them decided whether every short burst timed out.

The result is a calibration file (:data:`netweave.stages.flowsim.CALIBRATION_FORMAT`, version
:data:`netweave.stages.flowsim.CALIBRATION_VERSION`) naming the fabric it was measured on (link
layer, port buffer, scale, host link rate): ``simulate flow --calibration F`` and ``plan
--calibration F`` take it and refuse it for a fabric of another kind.
"""

from __future__ import annotations

import datetime
import functools
import itertools
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

import numpy as np

from netweave import _core
from netweave._core import NetweaveError, RoutingTable, TaskGraph, Topology
from netweave.run import emulate, mpi, processes
from netweave.stages import flowsim, traffic

#: Incast sweep: senders per point, bytes each sender sends, runs per point.
DEFAULT_SENDERS = (2, 4, 8, 16, 24)
DEFAULT_INCAST_BYTES = 1_000_000
DEFAULT_REPEATS = 2
#: Tasks in each overhead chain.
CHAIN_TASKS = 200
#: The grid the TCP parameters are fitted on: timeouts as multiples of Linux's RTO_min (a
#: timed-out flow also ran for a few round trips before its loss was detected), windows per
#: flow in segments, survival per segment (a burst keeps survival^S of its flows, S the segments each
#: has left: long flows barely tell these apart, and ties keep the default).
TIMEOUT_FACTORS = (1.0, 1.025, 1.05, 1.075, 1.1, 1.15)
WINDOW_SEGMENTS = (4, 6, 8, 10, 12, 14, 16, 20, 24, 32)
SURVIVAL_PER_SEGMENT = (0.95, 0.97, 0.98, 0.985, 0.99, 0.993, 0.995, 0.997, 0.998, 0.9985, 0.9988, 0.999)
#: Short incasts that test the tail-loss probe, from the most senders: segments per sender, and
#: the grid of the probe's fixed part. Each flow outlasts its initial window (10 segments):
#: bursts of 7–8 segments per flow never timed out in 24 warm calls at links × 0.05 and × 0.353
#: however long they drained, so they cannot measure the probe; bursts of 10–16 did in 13 of 48
#: (docs/flowsim.md, the probe across link rates).
PROBE_SEGMENTS = (11, 16)
PROBE_SECONDS = (0.0, 0.002, 0.004, 0.007, 0.01, 0.015, 0.02, 0.03)
#: Steady sharing: Concurrent all-to-all among this many hosts (at most), bytes per pair; and the
#: grid of segments streamed before timeouts and segments per timeout.
STEADY_HOSTS = 16
STEADY_BYTES = (16_384, 131_072, 1_048_576)
#: The seed of the hosts' posting orders in the steady points (stored with each point).
STEADY_SEED = 0
STEADY_FREE_SEGMENTS = (0.0, 5.0, 10.0, 20.0, 40.0, 70.0, 100.0, 150.0)
STEADY_SEGMENTS_PER_TIMEOUT = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 40.0, 80.0)
#: The grid of sends a host streams at once, fitted on the steady points; None: every send it
#: posts (the flow model's default), first, so that an exact tie keeps it.
HOST_STREAMS = (None, 1, 2, 3, 4, 6, 8)
#: The native MPIs' host cost: the libraries measured, the collectives and bytes per pair each
#: is timed at (a size below both libraries' eager limits, two above), and nwbench's timed calls.
NATIVE_LIBRARIES = mpi.IMPLEMENTATIONS
NATIVE_COLLECTIVES = ("gather", "alltoall")
#: The entries a library's ``collectives`` may hold: a collective's costs, and an all-to-all's
#: whose ranks pair by XOR, named with :data:`XOR_PAIRED` (:func:`cost_key`).
XOR_PAIRED = "_xor"
NATIVE_COST_KEYS = NATIVE_COLLECTIVES + ("alltoall" + XOR_PAIRED,)
NATIVE_SIZES = (16_384, 131_072, 1_048_576)
#: Timed calls per measurement, after one warm-up call: every point (chains, incasts, the
#: native MPIs) is timed as ``plan --verify`` times a candidate — warm connections, the slowest
#: rank's mean. Warm calls are what a program's collectives see, and their losses differ from a
#: first call's: its senders start scattered, so its short bursts escape timeouts that warm ones
#: pay (docs/flowsim.md, the probe).
TIMED_CALLS = 3
#: Short calls are timed more, as IMB and the OSU benchmarks repeat short messages more: as many
#: calls as fit in :data:`TIMED_SECONDS` at the first calls' pace, up to :data:`MAX_TIMED_CALLS`.
#: A short burst stalls about an RTO (200 ms) in some calls and not in others (a lone lost tail,
#: docs/flowsim.md), so the mean of three calls of a 10 ms gather is 10 ms or 75 ms by chance;
#: a hundred calls measure the mean a program's repeated collective pays.
TIMED_SECONDS = 2.0
MAX_TIMED_CALLS = 100
#: Blocks above this many bytes run each library's rendezvous protocol: Open MPI's TCP eager limit
#: (``btl_tcp_eager_limit``, 64 KiB); MPICH's UCX chooses its threshold itself (``UCX_RNDV_THRESH``
#: ``auto``) — its 128 KiB messages on the emulated fabric wait for the receiver (docs/plan.md), its
#: 16 KiB ones are taken as eager, and 64 KiB is where this calibration draws the line.
NATIVE_EAGER_LIMITS = {"openmpi": 65_536, "mpich": 65_536}
#: A collective's cost parameters: seconds per message below / above its library's eager limit,
#: per byte of the message.
NATIVE_COSTS = ("eager_s", "rendezvous_s", "byte_s")
#: The link scales each collective's native calls are measured at, as multiples of the
#: calibration's (capped at 1). ``plan --verify`` runs a gather on links 4–7× faster than an
#: all-to-all (its root's link alone carries the load), and what MPICH's gather costs per byte
#: shows only there: its 1 MiB gather on the 16-host star took 0.41 s over the link-bound time at
#: links × 0.05, 0.6 s at × 0.1 and 0.8–1.0 s at × 0.2–0.7 (docs/flowsim.md, "Calibration").
NATIVE_SCALE_FACTORS = {"gather": (1.0, 5.0), "alltoall": (1.0,)}
#: The per-message cost at which the model's sensitivity to it is first taken (:func:`fit_natives`),
#: the rounds that take it again at each point's fitted cost (with streams fewer than the sends a
#: rank posts, a message's cost also delays the sends queued behind it, so the sensitivity moves
#: with the cost), and the reweighting rounds of :func:`fit_native` (its weights settle in a few).
NATIVE_PROBE_S = 0.01
NATIVE_SECANT_ROUNDS = 4
NATIVE_FIT_ROUNDS = 20


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


def concurrent_alltoall(hosts: int, nbytes: int, topo: Topology, seed: int = STEADY_SEED) -> TaskGraph:
    """Hosts 0..hosts-1 of `topo` each send `nbytes` to every other one of them, all at once,
    each posting its sends in its own order drawn with `seed` (paper 004's Concurrent)."""
    tasks = [(s, d, nbytes) for s in range(hosts) for d in range(hosts) if s != d]
    return traffic.concurrent(topo, "tasks", 0, tasks=tasks, seed=seed)


def _checked(topo: Topology, scale: float, buffer: int | None, senders: tuple[int, ...], nbytes: int,
             repeats: int, natives: tuple[str, ...] = ()) -> int | None:
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
    unknown = [c for c in natives if c not in NATIVE_COLLECTIVES]
    if unknown:
        raise NetweaveError(f"--native {unknown[0]}: the native MPIs are timed on {', '.join(NATIVE_COLLECTIVES)}")
    for library in NATIVE_LIBRARIES if natives else ():
        mpi.program_path("nwbench", library)  # both MPIs' nwbench, before the fabric comes up
    return emulate.port_buffer(topo, buffer)


def _graph(point: dict[str, Any], topo: Topology) -> tuple[TaskGraph, int]:
    """A sweep point's task graph on `topo`'s hosts and the sends each host runs at once (the
    model's nct)."""
    if point.get("kind") == "concurrent":
        graph = concurrent_alltoall(point["hosts"], point["bytes"], topo, point.get("seed", STEADY_SEED))
        return graph, max(point["hosts"] - 1, 1)
    return incast(point["senders"], point["bytes"], topo.num_hosts), 1


def _timed_graphs(scaled_routes: RoutingTable, points: list[dict[str, Any]]) -> list[tuple[TaskGraph, int, float]]:
    """Each point's task graph, sends at once (the model's nct) and measured median, for :func:`_error`."""
    return [(*_graph(p, scaled_routes.topology), p["median_s"]) for p in points]


def _error(scaled_routes: RoutingTable, graphs: list[tuple[TaskGraph, int, float]], fit: dict[str, Any],
           overhead_s: float, sync_s: float) -> float:
    """Squared log ratio of predicted over measured, summed over `graphs` ((graph, nct, measured_s)),
    with the TCP parameters in `fit` on the emulated hosts, and its ``host_streams`` if any."""
    tcp = {k: v for k, v in fit.items() if k != "host_streams"}
    on_hosts = {**tcp, **emulate.HOST_TCP}
    error = 0.0
    for graph, nct, measured in graphs:
        predicted = flowsim.simulate(scaled_routes, graph, executor="dag", nct=nct, overhead_s=overhead_s,
                                     sync_s=sync_s, tcp=on_hosts, host_streams=fit.get("host_streams"))["makespan_s"]
        error += math.log(predicted / measured) ** 2
    return error


def _distance(entry: dict[str, Any]) -> float:
    """How far a grid entry departs from the model's defaults, in summed log ratios: TCP's
    defaults, and for ``host_streams`` every send a steady point's host posts."""
    distance = 0.0
    for key, value in entry.items():
        if key == "host_streams":
            distance += 0.0 if value is None else abs(math.log(value / (STEADY_HOSTS - 1)))
        else:
            distance += abs(math.log((value + 1e-3) / (flowsim.TCP_DEFAULTS[key] + 1e-3)))
    return distance


def _noise(points: list[dict[str, Any]]) -> float:
    """How far the points' own repeats stray from their medians: the squared log ratio of each
    repeat (``measured_s``) to its point's median, averaged per point and summed over the points
    — what a fit's error cannot be told from. Points without repeats add nothing."""
    total = 0.0
    for p in points:
        repeats = [t for t in p.get("measured_s", []) if t > 0]
        if repeats:
            total += sum(math.log(t / p["median_s"]) ** 2 for t in repeats) / len(repeats)
    return total


def _grid_fit(scaled_routes: RoutingTable, points: list[dict[str, Any]], grid: list[dict[str, Any]],
              fixed: dict[str, Any], overhead_s: float, sync_s: float) -> tuple[dict[str, Any], float]:
    """The grid entry (on top of `fixed`) nearest the defaults among those whose predictions of
    `points` (each with ``median_s``) are within the points' noise (:func:`_noise`) of the closest,
    in squared log ratio summed over the points; and its error. Parameters fitted to one
    fabric are used on others, so a departure from Linux's values must be worth more than the
    repeats' own spread (the one-standard-error rule of model selection): with two repeats of
    five 1 MB incasts on star16, the closest window (24 segments against the default 14) was
    closer by less than that spread, and predicted a 1 MiB gather on 2 × 14 hosts at 4× its
    measured time."""
    graphs = _timed_graphs(scaled_routes, points)
    scored = []
    for entry in grid:
        tcp = {**fixed, **entry}
        scored.append((_error(scaled_routes, graphs, tcp, overhead_s, sync_s), _distance(entry), tcp))
    least = min(error for error, _far, _tcp in scored)
    tolerance = least * 1e-9 + _noise(points)
    error, _far, tcp = min((s for s in scored if s[0] <= least + tolerance), key=lambda s: (s[1], s[0]))
    return tcp, error


def fit_tcp(topo: Topology, routes: RoutingTable, points: list[dict[str, Any]], scale: float, buffer: int | None,
            overhead_s: float, sync_s: float) -> tuple[dict[str, Any], float]:
    """The TCP parameters and ``host_streams`` whose predictions of the sweep `points` (``kind``
    incast with ``senders``, or concurrent with ``hosts``; ``bytes``, ``median_s``) are closest,
    in squared log ratio summed over the points; and that error. Fitted in three steps, each with
    the earlier ones fixed (module doc): the 1 MB incasts (timeout, window, survival per segment),
    the short incasts with the 1 MB ones (survival per segment again, and the probe), the
    concurrent all-to-alls (host streams with steady sharing; host streams alone on a lossless
    fabric, which has no TCP parameters). A step without points keeps the defaults; a
    ``host_streams`` of None (every send posted) is left out of the result."""
    scaled = emulate.predicted_topology(topo, scale, buffer)
    scaled_routes = emulate.scaled_routes(routes, scaled)
    rto = flowsim.TCP_DEFAULTS["timeout_s"]
    # The short incasts: the probe's points; the longest bytes per sender are the incast sweep's.
    longest = max((p["bytes"] for p in points if p.get("kind", "incast") == "incast"), default=0)
    incasts = [p for p in points if p.get("kind", "incast") == "incast"]
    probe_points = [p for p in incasts if p["bytes"] < longest]
    long_incasts = [p for p in incasts if p not in probe_points]
    # Long incasts at a slow link barely tell survival apart (each flow is hundreds of segments
    # long, so a burst keeps the same few flows for any survival near 1): the short ones decide it,
    # fitted with the long ones so that neither group is given up for the other.
    groups = {
        "incast": long_incasts,
        "probe": incasts if probe_points else [],
        "concurrent": [p for p in points if p.get("kind") == "concurrent"],
    }
    grids: dict[str, list[dict[str, Any]]] = {
        "incast": [{"timeout_s": rto * factor, "window_segments": float(window), "survival_per_segment": survival}
                   for factor in TIMEOUT_FACTORS for window in WINDOW_SEGMENTS for survival in SURVIVAL_PER_SEGMENT],
        "probe": [{"survival_per_segment": survival, "probe_s": probe}
                  for survival in SURVIVAL_PER_SEGMENT for probe in PROBE_SECONDS],
        "concurrent": [{"host_streams": streams, "steady_free_segments": free, "steady_segments_per_timeout": per}
                       for streams in HOST_STREAMS for free in STEADY_FREE_SEGMENTS
                       for per in STEADY_SEGMENTS_PER_TIMEOUT]
        if topo.link_layer == "ethernet" else [{"host_streams": streams} for streams in HOST_STREAMS],
    }
    fit: dict[str, Any] = {}
    for group, group_points in groups.items():
        if group_points:
            fit, _group_error = _grid_fit(scaled_routes, group_points, grids[group], fit, overhead_s, sync_s)
    error = _error(scaled_routes, _timed_graphs(scaled_routes, points), fit, overhead_s, sync_s)
    return {k: v for k, v in fit.items() if not (k == "host_streams" and v is None)}, error


def calibrate(topo: Topology, routes: RoutingTable, name: str, scale: float = 1.0, buffer: int | None = None,
              senders: tuple[int, ...] = DEFAULT_SENDERS, nbytes: int = DEFAULT_INCAST_BYTES,
              repeats: int = DEFAULT_REPEATS, progress: Callable[[str], None] | None = None,
              steady: bool = True, natives: tuple[str, ...] = NATIVE_COLLECTIVES,
              timed_seconds: float = TIMED_SECONDS) -> dict[str, Any]:
    """Measure the flow model's parameters on the emulated `topo` (see the module doc) and return
    the calibration document. Root only; the fabric is torn down however this ends. `steady`
    False leaves out the short-incast and Concurrent all-to-all points (probe, host streams and
    steady sharing keep their defaults); `natives` are the collectives the native MPIs' host
    cost is measured on (none: the file has no ``native`` section); `timed_seconds` how long a
    short point is timed (:func:`timed`; 0: :data:`TIMED_CALLS` calls each)."""
    note = progress or (lambda _msg: None)
    queue = _checked(topo, scale, buffer, senders, nbytes, repeats, natives)
    if not (math.isfinite(timed_seconds) and timed_seconds >= 0):
        raise NetweaveError(f"--timed-seconds {timed_seconds} must be a non-negative number of seconds")
    lossy = topo.link_layer == "ethernet"
    n = topo.num_hosts
    measured: dict[str, Any] = {}
    with processes.Job() as job:  # killed netweave: the guardian takes the fabric down
        job.on_parent_death([sys.executable, "-c", f"from netweave.run import emulate; emulate.down({name!r})"])
        fabric = emulate.up(topo, routes, name, scale=scale, buffer=buffer)
        try:
            for label, graph in (("plain", chain([0, 1], CHAIN_TASKS, n)), ("sync", chain([0, 1, 2, 3], CHAIN_TASKS, n))):
                note(f"chain of {CHAIN_TASKS} 1-byte tasks ({label})")
                measured[f"chain_{label}_s"] = _run(fabric, graph, timed_seconds)
            sweep: list[dict[str, Any]] = []
            for k in (senders if lossy else ()):
                times = []
                for r in range(repeats):
                    note(f"incast: {k} senders x {nbytes:,} B ({r + 1}/{repeats})")
                    times.append(_run(fabric, incast(k, nbytes, n), timed_seconds))
                sweep.append({"kind": "incast", "senders": k, "bytes": nbytes, "measured_s": times,
                              "median_s": statistics.median(times)})
            # The probe's and steady sharing's points (module doc), measured like the sweep's.
            extra: dict[str, list[dict[str, Any]]] = {"probe": [], "steady": []}
            if steady:
                mss = flowsim.TCP_DEFAULTS["segment_bytes"]
                extra["probe"] = [{"kind": "incast", "senders": max(senders), "bytes": k * mss}
                                  for k in PROBE_SEGMENTS if lossy and k * mss < nbytes]
                extra["steady"] = [{"kind": "concurrent", "hosts": min(n, STEADY_HOSTS), "bytes": b, "seed": STEADY_SEED}
                                   for b in STEADY_BYTES]
            for points in extra.values():
                for point in points:
                    graph, _nct = _graph(point, topo)
                    times = []
                    for r in range(repeats):
                        note(f"{graph.name}: {point['bytes']:,} B ({r + 1}/{repeats})")
                        times.append(_run(fabric, graph, timed_seconds))
                    point.update(measured_s=times, median_s=statistics.median(times))
            native_runs = measure_natives(fabric, n, natives, note, scale, seconds=timed_seconds) if natives else []
        finally:
            emulate.down(name)
        for faster, collectives in _faster_native_scales(scale, natives):
            fabric = emulate.up(topo, routes, name, scale=faster, buffer=buffer)
            try:
                native_runs += measure_natives(fabric, n, collectives, note, faster, seconds=timed_seconds)
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
    if sweep or extra["steady"]:
        note("fitting the TCP model to the incast sweep" if lossy else "fitting the host streams")
        fit, fit_error = fit_tcp(topo, routes, sweep + extra["probe"] + extra["steady"], scale, buffer, overhead, sync)
        if "host_streams" in fit:
            params["host_streams"] = fit.pop("host_streams")
        if lossy:
            params["tcp"] = {**{k: v for k, v in flowsim.TCP_DEFAULTS.items() if k == "segment_bytes"}, **fit}
        for point in sweep + extra["probe"] + extra["steady"]:
            graph, nct = _graph(point, topo)
            point["predicted_s"] = emulate.predict(topo, routes, graph, scale, buffer,
                                                   _document(topo, scale, queue, params, {}, None), nct=nct)["makespan_s"]
    native = {}
    if native_runs:
        note("fitting the native MPIs' host cost")
        native = fit_natives(topo, routes, scale, buffer, _document(topo, scale, queue, params, {}, None), native_runs)
    return _document(topo, scale, queue, params, {"chains": measured, "chain_tasks": CHAIN_TASKS, "timed_seconds": timed_seconds,
                                                  "incast": sweep if lossy else [], **extra}, fit_error, native)


def timed(measure: Callable[[int], float], seconds: float = TIMED_SECONDS) -> tuple[float, int]:
    """Time a call with `measure(reps)` (a run of one warm-up and `reps` timed calls that returns
    their mean, seconds): :data:`TIMED_CALLS` calls, then, if they were short, a second run of
    as many more as `seconds` hold at their pace (at most :data:`MAX_TIMED_CALLS` in all). The
    mean over every timed call, and how many there were.

    >>> timed(lambda reps: 0.8)
    (0.8, 3)
    >>> timed(lambda reps: 0.1)
    (0.1, 20)
    """
    first = measure(TIMED_CALLS)
    calls = min(MAX_TIMED_CALLS, int(seconds / first)) if first > 0 else MAX_TIMED_CALLS
    more = calls - TIMED_CALLS
    if more <= 0:
        return first, TIMED_CALLS
    return (first * TIMED_CALLS + measure(more) * more) / calls, calls


def _run(fabric: emulate.EmulatedCluster, graph: TaskGraph, seconds: float) -> float:
    """`graph`'s time on the fabric: the slowest rank's mean over warm calls, as many as
    `seconds` hold (:func:`timed`)."""
    def measure(reps: int) -> float:
        result = emulate.run(fabric, graph, warmup=1, reps=reps)
        if not result["ok"] or result["makespan_s"] is None:
            raise NetweaveError(f"calibration run {graph.name} failed: {result['cause']}")
        return float(result["makespan_s"])
    return timed(measure, seconds)[0]


def _document(topo: Topology, scale: float, queue: int | None, params: dict[str, Any],
              measurements: dict[str, Any], fit_error: float | None,
              native: dict[str, Any] | None = None) -> dict[str, Any]:
    specs = topo.link_specs()
    host_links = sorted({float(b) for b, _lat in specs.tolist()}) if len(specs) else []
    # A file without native measurements has no section at all (as files written before it).
    return {**({"native": native} if native else {}),
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


# The native MPIs' host cost (module doc; docs/flowsim.md, "Calibration").


def run_native(fabric: emulate.EmulatedCluster, library: str, collective: str, nbytes: int, ranks: int,
               placed: list[int], reps: int = TIMED_CALLS) -> float:
    """One nwbench run of `library`'s own `collective` on the fabric's `placed` hosts: the slowest
    rank's mean over `reps` calls after a warm-up, seconds — what ``plan --verify`` measures."""
    program = mpi.nwbench_program(library, collective, [nbytes], reps=reps, warmup=1, check=False)
    # MPICH over UCX can hang in MPI_Finalize on these fabrics after all its work: the run
    # counts as finished once nwbench has printed its whole report (see docs/emulate.md).
    proc = emulate.mpirun(fabric, library, ranks, program, hosts=placed,
                          done_when=lambda text: text.rstrip().endswith("]}"))
    if proc.returncode == 0 and not proc.stdout.strip():
        raise NetweaveError(f"nwbench ({library}, emulated) printed no report: {proc.stderr.strip()[-300:]}")
    try:
        return float(mpi.nwbench_report(proc, f" ({library}, emulated)")["results"][0]["max_s"])
    except json.JSONDecodeError as e:
        raise NetweaveError(f"nwbench ({library}, emulated) printed no JSON report ({e})") from None


def _faster_native_scales(scale: float, collectives: tuple[str, ...]) -> list[tuple[float, tuple[str, ...]]]:
    """The link scales beyond the calibration's `scale` at which some of `collectives` are measured
    again (:data:`NATIVE_SCALE_FACTORS`), each with those collectives.

    >>> _faster_native_scales(0.05, ("gather", "alltoall"))
    [(0.25, ('gather',))]
    """
    scales: dict[float, tuple[str, ...]] = {}
    for collective in collectives:
        for factor in NATIVE_SCALE_FACTORS[collective]:
            faster = round(min(1.0, scale * factor), 12)
            if faster > scale:
                scales[faster] = scales.get(faster, ()) + (collective,)
    return sorted(scales.items())


def measure_natives(fabric: emulate.EmulatedCluster, ranks: int, collectives: tuple[str, ...],
                    note: Callable[[str], None], scale: float,
                    sizes: tuple[int, ...] = NATIVE_SIZES, seconds: float = TIMED_SECONDS) -> list[dict[str, Any]]:
    """Each library's own `collectives` at `sizes` bytes per pair on hosts 0..ranks-1 of the fabric,
    whose links run at `scale` (gathers to rank 0): ``{library, collective, bytes, ranks, scale,
    measured_s}`` per run.

    A call whose ranks pair by XOR (:func:`cost_key`; MPICH's all-to-all on a power-of-two
    `ranks`) is measured on one rank fewer too, where they pair by shift as on every other job
    size: the two pairings cost the hosts differently."""
    runs = []
    for library in NATIVE_LIBRARIES:
        for collective in collectives:
            for nbytes in sizes:
                paired_by_xor = ranks > 2 and cost_key(library, collective, ranks, nbytes) != collective
                for job in (ranks, ranks - 1) if paired_by_xor else (ranks,):
                    note(f"{library}'s own {collective}, {nbytes:,} B per pair on {job} ranks, links x {scale:g}")
                    mean, _calls = timed(functools.partial(run_native, fabric, library, collective, nbytes, job,
                                                           list(range(job))), seconds)
                    runs.append({"library": library, "collective": collective, "bytes": nbytes, "ranks": job,
                                 "scale": scale, "measured_s": mean})
    return runs


def _native_prediction(scaled_routes: RoutingTable, run: dict[str, Any], document: dict[str, Any],
                       costs: tuple[float, float], streams: int | None, ranks: int) -> float:
    """The native model's time for `run`'s call on the scaled fabric, as ``plan`` predicts it, every
    message charged ``costs`` (seconds per message, per byte; :func:`native_charges`) for a job
    of `ranks` ranks — ∝ the run's ranks, as :func:`native_overhead` charges them — `streams`
    of a rank's sends streaming at once (None: every one it posts)."""
    # Imported here: netweave.plan reads calibrations through this module.
    from netweave import plan as plan_mod
    sched, info = plan_mod.native_workload(run["library"], run["collective"], list(range(run["ranks"])), run["bytes"])
    nct = info["concurrent_sends"]
    share = run["ranks"] / ranks
    charged = (costs[0] * share, costs[1] * share)
    return float(flowsim.simulate(scaled_routes, sched, executor=info["executor"], nct=nct, calibration=document,
                                  tcp=emulate.HOST_TCP, host_streams=streams or nct,
                                  **native_charges(run["collective"], run["bytes"], charged))["makespan_s"])


#: Collectives whose native host cost their receivers pay: a gather's data converges on its root,
#: which must be scheduled to take in and copy every block, one message after another (its tree
#: forwards whole subtrees, so a message costs per byte of its own payload). An all-to-all's
#: ranks send and receive alike, and its cost is charged to each message's sender.
RECEIVER_PAYS = ("gather",)


def native_charges(collective: str, bytes_per_pair: int, costs: tuple[float, float]) -> dict[str, Any]:
    """The flow model's arguments (:func:`netweave.stages.flowsim.simulate`) that charge a native
    `collective`'s messages `costs` (seconds per message, seconds per byte): paid by the receiver
    on each message's own payload (:data:`RECEIVER_PAYS`), else by the sender, per message of
    `bytes_per_pair`, before its data moves — in place of the calibration's per-message
    overhead either way (the library's cost is what was measured).

    >>> native_charges("alltoall", 1000, (0.5, 0.001))
    {'overhead_s': 1.5}
    >>> native_charges("gather", 1000, (0.5, 0.001))
    {'overhead_s': 0.0, 'receive_s': 0.5, 'receive_per_byte_s': 0.001}
    """
    per_message_s, per_byte_s = costs
    if collective in RECEIVER_PAYS:
        return {"overhead_s": 0.0, "receive_s": per_message_s, "receive_per_byte_s": per_byte_s}
    return {"overhead_s": per_message_s + per_byte_s * bytes_per_pair}


def cost_key(library: str, collective: str, ranks: int, bytes_per_pair: int) -> str:
    """The entry of `library`'s ``native`` section that says what its `collective` costs a job of
    `ranks` ranks at `bytes_per_pair`: ``<collective>_xor`` where the library pairs the ranks by
    XOR (MPICH's pairwise all-to-all on a power-of-two job, whose steps measured 1.4–2.7× a
    shift's cost per step on the emulation's shared cores; docs/flowsim.md), else the collective.

    >>> cost_key("mpich", "alltoall", 16, 1 << 20), cost_key("mpich", "alltoall", 28, 1 << 20)
    ('alltoall_xor', 'alltoall')
    """
    info = _core.native_mpi(library, collective, ranks, bytes_per_pair, 0)[1]
    return collective + XOR_PAIRED if info["pairs_by_xor"] else collective


def collective_costs(section: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A library's fitted entry `key` (:func:`cost_key`) in its ``native`` section
    (``parameters``, ``fit_error``): its own, else the plain all-to-all's — for XOR pairs the
    calibration did not measure, and for an all-gather, whose steps send and receive at once as
    an all-to-all's do; None when the calibration measured neither."""
    costs = section.get("collectives", {})
    collective = key.removesuffix(XOR_PAIRED)
    return costs.get(key) or costs.get(collective) or (costs.get("alltoall") if collective == "allgather" else None)


def native_streams(document: dict[str, Any], library: str, nct: int) -> int:
    """How many of `nct` posted sends `library`'s ranks stream at once under a checked calibration
    `document`: its ``native`` section's ``host_streams`` for the library, else every one. The
    library's transport decides, not netweave's executor's (the file's ``host_streams``): Open
    MPI's linear all-to-all streams as the executor does, MPICH's UCX does not (docs/flowsim.md,
    "Host streams")."""
    section = (document.get("native") or {}).get(library) or {}
    return min(nct, section.get("host_streams") or nct)


def fit_native(points: list[dict[str, Any]], eager_limit: int) -> tuple[dict[str, float], float]:
    """The cost parameters (:data:`NATIVE_COSTS`, each ≥ 0) that bring the model's predictions of
    one library's calls of one collective, `points`, closest to their measured times, in squared
    log ratio summed over the points (the targets are ratios: twice too slow is as wrong as twice
    too fast); and that error.

    Each point has ``bytes`` per pair, ``measured_s``, ``model_s`` (the model's time with no
    library cost), ``per_cost`` (seconds the prediction grows per second of per-message cost: the
    messages on the call's critical path) and ``per_byte_cost`` (seconds it grows per second of
    cost per byte: the payload bytes on that path, more than the messages × ``bytes`` where a
    gather's tree forwards whole subtrees). A point's per-message cost is ``eager_s`` (blocks up
    to `eager_limit` bytes) or ``rendezvous_s``, and each message also costs ``byte_s`` per byte
    of its payload, so its prediction is ``model_s + per_cost × message cost + per_byte_cost ×
    byte_s`` — linear in the parameters. Each round solves the weighted least squares whose
    weight, 1 / √(measured × predicted), makes a point's error its log ratio to first order
    (:func:`_nonnegative_least_squares`), with the previous round's predictions."""
    rows, gaps = [], []
    for p in points:
        eager = p["bytes"] <= eager_limit
        rows.append([p["per_cost"] * eager, p["per_cost"] * (not eager), p["per_byte_cost"]])
        gaps.append(p["measured_s"] - p["model_s"])
    design = np.asarray(rows, dtype=float).reshape(len(points), len(NATIVE_COSTS))
    gap = np.asarray(gaps, dtype=float)
    measured = np.asarray([p["measured_s"] for p in points], dtype=float)
    base = np.asarray([p["model_s"] for p in points], dtype=float)
    predicted = measured  # the first round weighs by the measurements alone (relative error)
    x = np.zeros(len(NATIVE_COSTS))
    for _round in range(NATIVE_FIT_ROUNDS):
        weight = 1.0 / np.sqrt(measured * np.maximum(predicted, 1e-12))
        x = _nonnegative_least_squares(design * weight[:, None], gap * weight)
        predicted = base + design @ x
    error = float(np.sum(np.log(np.maximum(predicted, 1e-12) / measured) ** 2))
    return {name: float(v) for name, v in zip(NATIVE_COSTS, x)}, error


def _nonnegative_least_squares(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The x ≥ 0 minimising |a x − b|²: least squares on every subset of the columns, keeping the
    best non-negative solution (three columns: eight subsets)."""
    best = (float(b @ b), np.zeros(a.shape[1]))
    for size in range(1, a.shape[1] + 1):
        for subset in itertools.combinations(range(a.shape[1]), size):
            cols = list(subset)
            solution = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
            if (solution < 0).any():
                continue
            x = np.zeros(a.shape[1])
            x[cols] = solution
            residual = a @ x - b
            if float(residual @ residual) < best[0] - 1e-15:
                best = (float(residual @ residual), x)
    return best[1]


def message_costs(section: dict[str, Any], bytes_per_pair: int, key: str) -> tuple[float, float]:
    """What each message of a collective at `bytes_per_pair` costs under a library's ``native``
    section's entry `key` (:func:`cost_key`), at the section's ranks: seconds per message, and
    seconds per byte (who pays, and for which bytes: :func:`native_charges`; an entry or
    parameter it does not state costs nothing)."""
    entry = collective_costs(section, key)
    return _costs(entry["parameters"] if entry else {}, section.get("eager_limit_bytes", 0), bytes_per_pair)


def _costs(params: dict[str, float], eager_limit: int, bytes_per_pair: int) -> tuple[float, float]:
    """Seconds per message and per byte under cost `params` (:data:`NATIVE_COSTS`; absent ones
    cost nothing) for blocks of `bytes_per_pair`."""
    regime = "eager_s" if bytes_per_pair <= eager_limit else "rendezvous_s"
    return float(params.get(regime, 0.0)), float(params.get("byte_s", 0.0))


def native_overhead(document: dict[str, Any], library: str, ranks: int, bytes_per_pair: int,
                    collective: str) -> tuple[float, float] | None:
    """The costs `library` adds to each message for a job of `ranks` ranks at `bytes_per_pair` in
    a `collective` (seconds per message, seconds per byte of its payload), from a checked
    calibration `document`; None when it measured nothing of the library's that applies.

    The costs were measured with the calibration's ranks on this machine's cores; ranks that
    busy-poll take turns on the cores, so a rank waited for comes round after the others' time
    slices: they are charged ∝ the job's ranks over the calibration's."""
    section = (document.get("native") or {}).get(library)
    if section is None:
        return None
    key = cost_key(library, collective, ranks, bytes_per_pair)
    if collective_costs(section, key) is None:
        return None
    per_message_s, per_byte_s = message_costs(section, bytes_per_pair, key)
    share = ranks / section["ranks"]
    return per_message_s * share, per_byte_s * share


def fit_natives(topo: Topology, routes: RoutingTable, scale: float, buffer: int | None, document: dict[str, Any],
                runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``native`` section for `runs` (:func:`measure_natives`): per library its ``ranks``,
    ``eager_limit_bytes``, the ``host_streams`` its ranks stream at once, per collective
    (``collectives``) the fitted ``parameters`` (:func:`fit_native`) and ``fit_error``, and every
    measurement with the model's time without (``model_s``) and with (``predicted_s``) the cost.
    Runs are fitted per :func:`cost_key` — an all-to-all whose ranks pair by XOR apart from one
    whose ranks pair by shift — each charged ∝ its ranks over the library's most.

    The streams are the library's transport's, one value for all its collectives: the grid value
    of :data:`HOST_STREAMS` whose fit of the library's calls at the calibration's `scale` and ranks, every
    collective sharing one set of costs, has the least error (stated only where fewer than every
    send fit strictly better). Each collective's own costs, on three sizes of one scale, would fit
    any number of streams exactly. Predictions are made on the fabric scaled as each run was (its
    ``scale``, else `scale`) with `document`'s parameters (the rest of the calibration), as ``plan
    --verify`` makes them."""
    fabrics: dict[float, RoutingTable] = {}

    def scaled(run: dict[str, Any]) -> RoutingTable:
        at = run.get("scale", scale)
        if at not in fabrics:
            fabrics[at] = emulate.scaled_routes(routes, emulate.predicted_topology(topo, at, buffer))
        return fabrics[at]

    def fitted(chosen: list[dict[str, Any]], limit: int, streams: int | None
               ) -> tuple[dict[str, float], float, list[dict[str, Any]]]:
        """One set of costs for the `chosen` runs (:func:`fit_native`), their error, the points."""
        points = [{**run, "model_s": _native_prediction(scaled(run), run, document, (0.0, 0.0), streams, ranks)}
                  for run in chosen]
        probes = [(NATIVE_PROBE_S, 0.0)] * len(points)
        for _round in range(NATIVE_SECANT_ROUNDS + 1):
            for point, probe in zip(points, probes):
                _sensitivities(point, probe, functools.partial(_native_prediction, scaled(point), point, document,
                                                               streams=streams, ranks=ranks))
            params, error = fit_native(points, limit)
            probes = [_costs(params, limit, p["bytes"]) for p in points]
        return params, error, points

    section: dict[str, Any] = {}
    for library in dict.fromkeys(r["library"] for r in runs):
        limit = NATIVE_EAGER_LIMITS[library]
        mine = [r for r in runs if r["library"] == library]
        ranks = max(r["ranks"] for r in mine)
        # The streams are chosen on the calls at the calibration's ranks: those on one rank fewer
        # pair by shift where these pair by XOR, and one set of costs cannot fit both.
        at_scale = [r for r in mine if r.get("scale", scale) == scale and r["ranks"] == ranks]
        streams, least = None, math.inf
        for k in HOST_STREAMS:  # every send first: fewer streams must fit strictly better
            error = fitted(at_scale, limit, k)[1]
            if error < least - 1e-12:
                streams, least = k, error
        costs: dict[str, Any] = {}
        measurements: list[dict[str, Any]] = []
        keys = [cost_key(library, r["collective"], r["ranks"], r["bytes"]) for r in mine]
        for key in dict.fromkeys(keys):
            params, error, points = fitted([r for r, k in zip(mine, keys) if k == key], limit, streams)
            costs[key] = {"parameters": params, "fit_error": error}
            for point in points:
                point["predicted_s"] = _native_prediction(scaled(point), point, document,
                                                          _costs(params, limit, point["bytes"]), streams, ranks)
            measurements += points
        section[library] = {"ranks": ranks, "eager_limit_bytes": limit,
                            **({"host_streams": streams} if streams else {}), "collectives": costs,
                            "measurements": measurements}
    return section


def _sensitivities(point: dict[str, Any], costs: tuple[float, float],
                   predict: Callable[[tuple[float, float]], float]) -> None:
    """Set `point`'s ``per_cost`` and ``per_byte_cost`` (:func:`fit_native`): the secants of its
    prediction `predict((per message, per byte))` from no cost to `costs` (the last fit's, or a
    probe where it charged nothing). A sender pays both as one cost per message of the point's
    bytes, so its per-byte sensitivity is the per-message one × the bytes; a receiver pays per
    byte of each message's own payload, probed on its own."""
    per_message, per_byte = costs
    if point["collective"] not in RECEIVER_PAYS:
        whole = per_message + per_byte * point["bytes"] or NATIVE_PROBE_S
        point["per_cost"] = (predict((whole, 0.0)) - point["model_s"]) / whole
        point["per_byte_cost"] = point["per_cost"] * point["bytes"]
        return
    per_message = per_message or NATIVE_PROBE_S
    per_byte = per_byte or NATIVE_PROBE_S / point["bytes"]
    point["per_cost"] = (predict((per_message, 0.0)) - point["model_s"]) / per_message
    point["per_byte_cost"] = (predict((0.0, per_byte)) - point["model_s"]) / per_byte


def _check_costs(entry: Any, where: str) -> None:
    """Refuse, in one line naming `where`, a collective's entry of a ``native`` section that is not
    ``{parameters: {cost: seconds ≥ 0}, fit_error?}``."""
    if not isinstance(entry, dict) or set(entry) - {"parameters", "fit_error"}:
        raise NetweaveError(f"{where} must be an object with parameters (and fit_error)")
    params = entry.get("parameters", {})
    if not isinstance(params, dict) or set(params) - set(NATIVE_COSTS):
        raise NetweaveError(f"{where}.parameters may hold only {', '.join(NATIVE_COSTS)}")
    for key, value in params.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or math.isinf(value):
            raise NetweaveError(f"{where}.parameters.{key} must be a non-negative number of seconds, got {value!r}")


def check_native(document: dict[str, Any], source: str = "calibration") -> dict[str, Any]:
    """Check a calibration's ``native`` section (absent: no library costs anything extra); returns
    `document`, raises NetweaveError in one line naming `source` and the culprit otherwise."""
    native = document.get("native", {})
    if not isinstance(native, dict):
        raise NetweaveError(f"{source}: \"native\" must map each MPI library to its costs")
    for library, section in native.items():
        where = f"{source}: native.{library}"
        if library not in NATIVE_LIBRARIES:
            raise NetweaveError(f"{where}: unknown MPI library (known: {', '.join(NATIVE_LIBRARIES)})")
        keys = ("ranks", "eager_limit_bytes", "host_streams", "collectives", "measurements")
        if not isinstance(section, dict) or set(section) - set(keys):
            raise NetweaveError(f"{where} must be an object with only {', '.join(keys)}")
        ranks, limit = section.get("ranks"), section.get("eager_limit_bytes", 0)
        flowsim.check_host_streams(section.get("host_streams"), f"{where}.host_streams")
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise NetweaveError(f"{where}.ranks must be a positive whole number of ranks, got {ranks!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise NetweaveError(f"{where}.eager_limit_bytes must be a whole number of bytes >= 0, got {limit!r}")
        costs = section.get("collectives", {})
        if not isinstance(costs, dict):
            raise NetweaveError(f"{where}.collectives must map each collective to its costs")
        for key, entry in costs.items():
            if key not in NATIVE_COST_KEYS:
                raise NetweaveError(f"{where}.collectives.{key}: not a cost the calibration measures "
                                    f"({', '.join(NATIVE_COST_KEYS)})")
            _check_costs(entry, f"{where}.collectives.{key}")
    return document


def load(calibration: str | Path | dict[str, Any], topology: Topology) -> dict[str, Any]:
    """A calibration file (or loaded document) checked against `topology`
    (:func:`netweave.stages.flowsim.check_calibration`) and its ``native`` section checked."""
    if isinstance(calibration, dict):
        return check_native(flowsim.check_calibration(calibration, topology))
    return check_native(flowsim.load_calibration(calibration, topology), str(calibration))
