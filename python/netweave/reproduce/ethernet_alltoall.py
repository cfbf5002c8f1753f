"""Paper 004 §6.3.1 on the emulated cluster: all-to-all on 64 hosts against both MPIs' native one.

The thesis ran its contention-free all-to-all (OURS) on 64 hosts of the istbs cluster — edge
switches of 14 hosts, "arranged hierarchically" (Fig. 6.1) — against Open MPI's, MPICH's and
MPICH2's ``MPI_Alltoall``, 1 KB to several MB per pair, and found OURS at about 32 % of their
time on average from 1 KB to about 200 KB, the methods converging at MB sizes, where the
switch-to-switch links saturate and the 200 ms retransmission timeouts matter less (§6.3.1).

Here (:func:`run`, root only): the same on an emulated tree — 5 edge switches of 14 hosts under
one root switch, hosts 0-63 taking part (four full edge switches and 8 hosts of the fifth, hosts
added from one end as in §6.2) — with six candidates per message size:

- **OURS (paper DAG)**: paper 004's task DAG from the thesis' own stage scheduler
  (``traffic.contention_free``, ``scheduler="paper"``), on netweave's TCP executor (1-byte syncs,
  one send at a time per host), as the thesis ran its own program over TCP;
- **tree-phased**: the phased tree all-to-all (Faraj-Yuan style, ``--algo tree-phased``), its
  phases run as a DAG by the same executor in their local-sync order;
- **tree-phased, buffer groups**: the same phases cut into the longest runs that fit every
  switch port's queue (``traffic.buffer_groups``), a barrier between two runs and no wait
  inside one (``TaskGraph.with_barriers``): at 1 KiB per pair some 60 phases share a barrier,
  from 64 KiB each phase has its own;
- **packed DAG**: the contention-free DAG from the packing stage scheduler
  (``--scheduler packed``);
- **Open MPI** and **MPICH** ``MPI_Alltoall``, timed by ``nwbench`` with one rank per host on the
  same fabric (Open MPI over its TCP BTL, MPICH over UCX's TCP).

Every run counts the fabric's queue drops, the TCP segments the hosts retransmitted and the
retransmission timeouts that fired (``/proc/net/snmp`` and ``/proc/net/netstat`` of every host
namespace, before and after). Each size also carries the bottleneck bound (the most loaded
directed link's bytes ÷ its scaled bandwidth) and, for netweave's schedules, the flow model's
prediction; a zero-byte run of each schedule's DAG measures what its syncs and the hosts cost
without data.

Scale: Fig. 6.1's link speeds are not in the text; the thesis' hardware is 1 Gbit/s Ethernet and
its §6.3.1 says the switch-to-switch links are the bottleneck at MB sizes, so every link is
1 Gbit/s. Links run at ``SCALE`` (0.1: 100 Mbit/s) with the shallow 64 KiB port queues of the
incast experiment: two cores then forward an all-to-all at the bottleneck bound (about 2 Gbit/s
of payload × hops), which is what bounds the run time, not the scale. A native run slower than
``NATIVE_CAP_FACTOR`` × our best time at that size (at least ``NATIVE_CAP_MIN_S`` per call) is
stopped, and its time reported as a lower bound (``censored``): the full run then fits in about
15 minutes even where a native all-to-all stalls for minutes in retransmission timeouts.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netweave import _core
from netweave._core import NetweaveError
from netweave.run import emulate, executor, mpi
from netweave.stages import analysis, routing, topology, traffic

#: Hosts per edge switch of the thesis' cluster (§4.1).
HOSTS_PER_SWITCH = 14
#: Every link's bandwidth (Gbit/s) before scaling, and the scale the emulation runs it at.
LINK_GBPS = 1.0
SCALE = 0.1
#: A switch port's data queue, bytes (as the incast experiment's).
BUFFER = 64 * 1024
#: A native run is stopped after this many times our best schedule's time at the size per call,
#: and at least this many seconds per call; its time is then a lower bound (and ours ÷ its an
#: upper bound: 4 keeps a stopped native from lifting the mean ratio above 0.25 at its size).
NATIVE_CAP_FACTOR = 4.0
NATIVE_CAP_MIN_S = 20.0
#: Seconds an MPI launch (64 daemons and ranks over the management network) may take on top.
LAUNCH_ALLOWANCE_S = 40.0
#: Sizes up to this many bytes per pair are timed over SMALL_CALLS calls (the natives after one
#: untimed warm-up call); larger ones in one call (after a 1-byte call that opens the natives'
#: connections, which netweave's executor opens before its clock starts).
SMALL_BYTES = 16 * 1024
SMALL_CALLS = 3
#: netweave's candidates and the natives, as the table and the CSV name them.
OURS, TREE_PHASED, TREE_GROUPS, PACKED = "OURS (paper DAG)", "tree-phased", "tree-phased, buffer groups", "packed DAG"
SCHEDULES = (OURS, TREE_PHASED, TREE_GROUPS, PACKED)
NATIVES = {"openmpi": "Open MPI MPI_Alltoall", "mpich": "MPICH MPI_Alltoall"}
#: The thesis' finding (§6.3.1) and the targets this reproduction checks.
PAPER = ("64 hosts: OURS about 32 % of MPICH's and Open MPI's MPI_Alltoall time on average at 1 KB-200 KB; "
         "no clear difference at several MB")
TARGET_SMALL, TARGET_LARGE = 0.5, 1.1
SMALL_RANGE, LARGE_FROM = (1024, 200 * 1024), 1 << 20


@dataclass(frozen=True)
class Setup:
    """One all-to-all experiment: edge switches of 14 hosts under one root, the first `hosts`
    hosts taking part, `sizes` bytes per pair."""

    edge_switches: int
    hosts: int
    sizes: tuple[int, ...]

    def tree(self) -> _core.Topology:
        """The emulated cluster: every link :data:`LINK_GBPS`."""
        return topology.switch_tree([self.edge_switches], HOSTS_PER_SWITCH, [LINK_GBPS], [5_000.0], LINK_GBPS, 5_000.0)

    @property
    def shape(self) -> str:
        return f"{self.hosts} hosts on {self.edge_switches} x {HOSTS_PER_SWITCH}"


FULL = Setup(5, 64, (1024, 4096, 16384, 65536, 204800, 1048576))
QUICK = Setup(2, 28, (16384,))


def schedules(routes: _core.RoutingTable, hosts: list[int], nbytes: int) -> dict[str, _core.TaskGraph]:
    """netweave's four candidates for an all-to-all of `nbytes` per pair among `hosts` on the
    tree `routes` routes, as DAGs (rank r on ``hosts[r]``)."""
    tree = routes.topology
    listed = ",".join(str(h) for h in hosts)
    phased = traffic.build("alltoall", "tree-phased", topology=tree, hosts=listed, bytes=nbytes)
    return {OURS: traffic.contention_free(tree, "alltoall", nbytes, hosts=hosts)[0],
            TREE_PHASED: executor.as_task_graph(phased),
            TREE_GROUPS: executor.as_task_graph(phased, traffic.buffer_groups(routes, phased, BUFFER)),
            PACKED: traffic.contention_free(tree, "alltoall", nbytes, hosts=hosts, scheduler="packed")[0]}


def without_data(graph: _core.TaskGraph) -> _core.TaskGraph:
    """`graph` with every task's bytes set to zero: the same dependencies, so a run costs only
    the syncs, the hosts' per-task work and the forwarding of headers."""
    tasks = [(src, dst, 0, after, relay) for src, dst, _nbytes, after, relay in graph.tasks()]
    return _core.TaskGraph(f"{graph.name}-0B", graph.num_ranks, tasks, graph.placement)


def _losses(before: dict[str, int], after: dict[str, int], calls: int) -> dict[str, Any]:
    """What the fabric lost between two counter readings, in total and per timed call."""
    lost = {k: after[k] - before[k] for k in after}
    return {"dropped_packets": lost["dropped_packets"], "retransmitted_segments": lost["retransmitted_segments"],
            "tcp_timeouts": lost["tcp_timeouts"], "retransmitted_per_call": lost["retransmitted_segments"] / calls,
            "timeouts_per_call": lost["tcp_timeouts"] / calls}


def _run_schedule(fabric: emulate.EmulatedCluster, graph: _core.TaskGraph, calls: int) -> dict[str, Any]:
    """`calls` runs of `graph` on the TCP executor: the mean and the fastest makespan, and losses."""
    before, times = fabric.losses(), []
    for _ in range(calls):
        result = emulate.run(fabric, graph)
        if not result["ok"]:
            raise NetweaveError(f"{graph.name} failed on the emulated fabric: {(result['cause'] or {}).get('reason')}")
        times.append(result["makespan_s"])
    return {"seconds": sum(times) / len(times), "fastest_s": min(times), "calls": calls,
            **_losses(before, fabric.losses(), calls)}


def _run_native(fabric: emulate.EmulatedCluster, implementation: str, ranks: int, nbytes: int, cap_s: float
                ) -> dict[str, Any]:
    """`implementation`'s ``MPI_Alltoall`` of `nbytes` per pair timed by ``nwbench`` (the slowest
    rank's mean call; ``fastest_s`` is not known), stopped when the calls take longer than `cap_s`
    each."""
    small = nbytes <= SMALL_BYTES
    reps, warmup = (SMALL_CALLS, 1) if small else (1, 0)
    sizes = [nbytes] if small else [1, nbytes]  # a 1-byte call first opens every connection
    program = mpi.nwbench_program(implementation, "alltoall", sizes, reps=reps, warmup=warmup, check=False)
    calls = reps + warmup
    before = fabric.losses()
    try:
        proc = emulate.mpirun(fabric, implementation, ranks, program, timeout=cap_s * calls + LAUNCH_ALLOWANCE_S,
                              done_when=lambda out: out.rstrip().endswith("]}"), grace=3.0)
    except NetweaveError as stopped:
        if "did not finish" not in str(stopped):
            raise
        return {"seconds": None, "fastest_s": None, "censored_above_s": cap_s, "calls": calls,
                **_losses(before, fabric.losses(), calls)}
    result = next(r for r in mpi.nwbench_report(proc, f" ({implementation}, emulated)")["results"] if r["bytes"] == nbytes)
    return {"seconds": result["max_s"], "fastest_s": None, "censored_above_s": None, "calls": calls,
            **_losses(before, fabric.losses(), calls)}


def run(quick: bool, note: Callable[[str], None]) -> dict[str, Any]:
    """The experiment (:data:`QUICK` or :data:`FULL`): ``rows`` (one per size and candidate),
    ``zero_byte`` (each schedule's DAG without data), ``setup`` and ``headline``."""
    setup = QUICK if quick else FULL
    tree = setup.tree()
    hosts = list(range(setup.hosts))
    routes = routing.route(tree, "updown")
    scaled = emulate.scaled_routes(routes, emulate.scaled_topology(tree, SCALE))
    name = "a" + uuid.uuid4().hex[:11]
    common = {"hosts": setup.hosts, "edge_switches": setup.edge_switches, "scale": SCALE,
              "link_mbit_per_s": LINK_GBPS * SCALE * 1e3, "buffer_bytes": BUFFER}
    rows: list[dict[str, Any]] = []
    zero: list[dict[str, Any]] = []
    note(f"all-to-all: bringing up {setup.shape} hosts (links x {SCALE})")
    fabric = emulate.up(tree, routes, name, scale=SCALE, buffer=BUFFER)
    try:
        for nbytes in setup.sizes:
            graphs = schedules(routes, hosts, nbytes)
            bound = analysis.bottleneck_bound(scaled, graphs[PACKED])["seconds"]
            calls = SMALL_CALLS if nbytes <= SMALL_BYTES and not quick else 1
            best = float("inf")  # the fastest schedule's time: the natives' cap
            for method, graph in graphs.items():
                note(f"all-to-all {nbytes} B: {method}")
                measured = _run_schedule(fabric, graph, calls)
                predicted = emulate.predict(tree, routes, graph, SCALE, BUFFER)["makespan_s"]
                best = min(best, measured["seconds"])
                rows.append({**common, "bytes": nbytes, "method": method, "kind": "schedule", "bound_s": bound,
                             "predicted_s": predicted, "censored_above_s": None, **measured})
            cap = max(NATIVE_CAP_MIN_S, NATIVE_CAP_FACTOR * best)
            for implementation, method in NATIVES.items():
                note(f"all-to-all {nbytes} B: {method} (stopped after {cap:.0f} s a call)")
                measured = _run_native(fabric, implementation, setup.hosts, nbytes, cap)
                rows.append({**common, "bytes": nbytes, "method": method, "kind": "native", "bound_s": bound,
                             "predicted_s": None, **measured})
        for method, graph in schedules(routes, hosts, setup.sizes[0]).items():
            note(f"all-to-all without data: {method}")
            zero.append({**common, "method": method, "tasks": graph.num_tasks, "syncs": graph.num_dependencies,
                         **_run_schedule(fabric, without_data(graph), 1)})
    finally:
        emulate.down(name)
    for row in rows:
        row["over_bound"] = row["seconds"] / row["bound_s"] if row["seconds"] and row["bound_s"] else None
    result = {"setup": {**common, "sizes": list(setup.sizes)}, "rows": rows, "zero_byte": zero}
    result["headline"] = headline(result)
    return result


def _ratio(ours: float, native: dict[str, Any]) -> tuple[float | None, bool]:
    """ours ÷ the native's time, and whether that is only an upper bound (the native was stopped)."""
    if native["seconds"]:
        return ours / native["seconds"], False
    if native.get("censored_above_s"):
        return ours / native["censored_above_s"], True
    return None, False


def headline(result: dict[str, Any]) -> dict[str, Any]:
    """Per size and native MPI: our best schedule's and OURS's time ÷ the native's; their means
    over 1 KiB-200 KiB and at ≥ 1 MiB against the targets; the zero-byte times."""
    rows = result["rows"]
    per_size: dict[int, dict[str, Any]] = {}
    for nbytes in sorted({r["bytes"] for r in rows}):
        cell = {r["method"]: r for r in rows if r["bytes"] == nbytes}
        ours = {m: cell[m]["seconds"] for m in SCHEDULES if cell.get(m) and cell[m]["seconds"]}
        if not ours:
            continue
        best_method = min(ours, key=lambda m: ours[m])
        entry: dict[str, Any] = {"best": best_method, "best_s": ours[best_method]}
        for implementation, method in NATIVES.items():
            if method not in cell:
                continue
            best_ratio, censored = _ratio(ours[best_method], cell[method])
            paper_ratio, _ = _ratio(ours[OURS], cell[method]) if OURS in ours else (None, False)
            entry[implementation] = {"best_over_native": best_ratio, "ours_over_native": paper_ratio,
                                     "upper_bound": censored}
        per_size[nbytes] = entry
    summary: dict[str, Any] = {"per_size": per_size}
    for implementation in NATIVES:
        small = [e[implementation] for b, e in per_size.items()
                 if SMALL_RANGE[0] <= b <= SMALL_RANGE[1] and implementation in e and e[implementation]["best_over_native"]]
        large = [e[implementation] for b, e in per_size.items()
                 if b >= LARGE_FROM and implementation in e and e[implementation]["best_over_native"]]
        mean = lambda xs, key: sum(x[key] for x in xs) / len(xs) if xs else None  # noqa: E731
        summary[implementation] = {
            "small_sizes": len(small),
            "best_over_native_small": mean(small, "best_over_native"),
            "ours_over_native_small": mean(small, "ours_over_native"),
            "best_over_native_large": max((x["best_over_native"] for x in large), default=None),
            "upper_bound_small": any(x["upper_bound"] for x in small),
            "upper_bound_large": any(x["upper_bound"] for x in large)}
        s, g = summary[implementation]["best_over_native_small"], summary[implementation]["best_over_native_large"]
        summary[implementation]["meets_small_target"] = None if s is None else s <= TARGET_SMALL
        summary[implementation]["meets_large_target"] = None if g is None else g <= TARGET_LARGE
    summary["zero_byte_s"] = {z["method"]: z["seconds"] for z in result["zero_byte"]}
    return summary


def _fmt_s(row: dict[str, Any]) -> str:
    if row["seconds"] is None:
        return f"> {row['censored_above_s'] * 1e3:.0f} (stopped)"
    return f"{row['seconds'] * 1e3:.1f}"


def _fmt_ratio(cell: dict[str, Any] | None, key: str) -> str:
    if not cell or cell.get(key) is None:
        return "–"
    return ("≤ " if cell["upper_bound"] else "") + f"{cell[key]:.2f}"


def summary(result: dict[str, Any]) -> list[str]:
    """The all-to-all section of the emulated reproduction's page (Markdown lines)."""
    s, h = result["setup"], result["headline"]
    lines = [f"## §6.3.1 all-to-all against MPI_Alltoall: {s['hosts']} hosts on {s['edge_switches']} x {HOSTS_PER_SWITCH}", "",
             f"Edge switches of {HOSTS_PER_SWITCH} hosts under one root switch, every link {LINK_GBPS:g} Gbit/s "
             f"**scaled by {s['scale']:g}** (so {s['link_mbit_per_s']:.0f} Mbit/s), {s['buffer_bytes'] // 1024} KiB port "
             "queues, up*/down* routes. Times are per call, ms (the slowest rank's, or the executor's first send to last "
             f"receive); bound: the most loaded link's bytes ÷ its bandwidth. A native stopped after {NATIVE_CAP_FACTOR:g} times our best time is "
             "shown as \"> t (stopped)\", and ratios against it as upper bounds (≤).", "",
             f"Thesis: {PAPER}.", "",
             "![all-to-all against MPI](emulated_alltoall.png)", "",
             "| bytes per pair | method | ms | ÷ bound | flow model ms | retransmitted / call | RTOs / call | drops |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        over = f"{r['over_bound']:.2f}" if r["over_bound"] else "–"
        model = f"{r['predicted_s'] * 1e3:.1f}" if r["predicted_s"] else "–"
        lines.append(f"| {r['bytes']} | {r['method']} | {_fmt_s(r)} | {over} | {model} | {r['retransmitted_per_call']:.0f} | "
                     f"{r['timeouts_per_call']:.1f} | {r['dropped_packets']} |")
    lines += ["", f"Ours ÷ native per size (best of our {len(SCHEDULES)}; the paper's DAG in brackets):", "",
              "| bytes per pair | best | ÷ Open MPI | ÷ MPICH |", "|---|---|---|---|"]
    for nbytes, e in h["per_size"].items():
        cells = [f"{_fmt_ratio(e.get(i), 'best_over_native')} ({_fmt_ratio(e.get(i), 'ours_over_native')})" for i in NATIVES]
        lines.append(f"| {nbytes} | {e['best']} | " + " | ".join(cells) + " |")
    lines += ["", "| target | Open MPI | MPICH |", "|---|---|---|"]

    def verdict(implementation: str, which: str, target: float) -> str:
        x = h[implementation][f"best_over_native_{which}"]
        if x is None:
            return "not measured"
        bound = "≤ " if h[implementation][f"upper_bound_{which}"] else ""
        return f"{bound}{x:.2f} ({'met' if x <= target else 'missed'})"

    lines.append(f"| best ÷ native, mean over 1 KiB-200 KiB ≤ {TARGET_SMALL} (thesis 0.32) | "
                 + " | ".join(verdict(i, "small", TARGET_SMALL) for i in NATIVES) + " |")
    lines.append(f"| best ÷ native at ≥ 1 MiB ≤ {TARGET_LARGE} | "
                 + " | ".join(verdict(i, "large", TARGET_LARGE) for i in NATIVES) + " |")
    lines.append("| OURS (paper DAG) ÷ native, mean over 1 KiB-200 KiB | "
                 + " | ".join(f"{h[i]['ours_over_native_small']:.2f}" if h[i]["ours_over_native_small"] else "–"
                              for i in NATIVES) + " |")
    lines += ["", "Without data (the smallest size's DAGs, every task 0 bytes), ms: "
              + ", ".join(f"{z['method']} {z['seconds'] * 1e3:.1f} ({z['tasks']} tasks, {z['syncs']} dependencies)"
                          for z in result["zero_byte"]), ""]
    return lines


def plot(result: dict[str, Any], out: Path) -> Path:
    """Time per call against bytes per pair for every candidate, and retransmitted segments per
    call (``emulated_alltoall.png``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    methods = list(dict.fromkeys(r["method"] for r in result["rows"]))
    for method in methods:
        rows = [r for r in result["rows"] if r["method"] == method]
        x = [r["bytes"] for r in rows]
        y = [(r["seconds"] or r["censored_above_s"]) * 1e3 for r in rows]
        line, = left.plot(x, y, marker="o", label=method)
        stopped = [(r["bytes"], r["censored_above_s"] * 1e3) for r in rows if r["seconds"] is None]
        if stopped:
            left.scatter(*zip(*stopped), marker="^", s=80, color=line.get_color())
        right.plot(x, [max(r["retransmitted_per_call"], 0.5) for r in rows], marker="o", label=method)
    sizes = sorted({r["bytes"] for r in result["rows"]})
    bound = {r["bytes"]: r["bound_s"] for r in result["rows"]}
    left.plot(sizes, [bound[b] * 1e3 for b in sizes], ls="--", marker="_", ms=14, color="grey", label="bottleneck bound")
    s = result["setup"]
    left.set(xscale="log", yscale="log", xlabel="bytes per pair", ylabel="ms per call (▲: stopped, at least)",
             title=f"all-to-all, {s['hosts']} hosts, links x {s['scale']:g}")
    right.set(xscale="log", yscale="log", xlabel="bytes per pair", ylabel="TCP segments retransmitted per call",
              title="retransmissions")
    for ax in (left, right):
        ax.grid(True, which="both", lw=0.3)
    left.legend(fontsize=7)
    fig.tight_layout()
    path = out / "emulated_alltoall.png"
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
