"""Flow simulator benchmarks: paper 003's Bruck allgather, and time against flow count.

1. Paper 003's OpenNSIM case: 4,096 ranks, Bruck allgather (12 steps, rank i sends
   2,048·2^k bytes to (i − 2^k) mod 4096 in step k), 16×16×16 torus, DOR, 5 GB/s links, 120 ns,
   with the default x,y,z placement and a 12-bit bit-reversal placement, for each executor.
   Bruck's step k forwards what arrived in step k − 1, so ``local-sync`` is the executor that
   matches the MPI program; the paper's simulator reported 22.3 ms for the x,y,z placement.
2. Shift all-to-all on n×n×n tori (DOR, 100 Gbit/s, 100 ns, 64 KiB per pair) for growing n:
   flows, wall time, peak memory, and the analysis engine's time on the same schedule as a
   reference measured in the same run.

``--lossy`` runs every case a second time on the same fabric restated as Ethernet (64 KiB port
buffers, TCP timeouts: docs/flowsim.md) right after the lossless run, and prints the lossy run's
wall time over the lossless one's (budget: at most 2×).

Usage::

    python benches/flowsim_scaling.py [--max-n 10] [--lossy] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time


def _torus(dims, gbps, ns):
    from netweave import topology

    g = topology.to_networkx(topology.torus(dims, 1))
    for _, _, d in g.edges(data=True):
        d["bandwidth_gbps"], d["latency_ns"] = gbps, ns
    return topology.from_networkx(g)


def bit_reversal(bits: int) -> list[int]:
    return [int(f"{r:0{bits}b}"[::-1], 2) for r in range(1 << bits)]


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


#: The port buffer of the ``--lossy`` runs: the Ethernet trees' default.
LOSSY_BUFFER = 64 * 1024


def models(topo, lossy: bool) -> list:
    """(label, routes) of the lossless fabric and, with `lossy`, the same fabric as Ethernet."""
    from netweave import routing

    out = [("lossless", routing.route(topo, "dor"))]
    if lossy:
        out.append(("ethernet", routing.route(topo.with_switching("ethernet", LOSSY_BUFFER), "dor")))
    return out


def lossy_note(row: dict, lossless_wall: float) -> str:
    """The lossy run's cost against the lossless run of the same case, for the printed line."""
    if row["model"] == "lossless":
        return ""
    row["over_lossless"] = row["wall_s"] / lossless_wall
    return f", {row['over_lossless']:.2f}x lossless, {row['timeouts']} timeouts"


def paper_003(rows: list, lossy: bool) -> None:
    from netweave import flowsim, traffic

    topo = _torus([16, 16, 16], 40.0, 120.0)  # 5 GB/s = 40 Gbit/s
    sched = traffic.build("allgather", "bruck", num_ranks=4096, bytes=2048)
    fabrics = models(topo, lossy)
    for placement_name, placement in (("x,y,z", list(range(4096))), ("bit-reversal", bit_reversal(12))):
        s = sched.with_placement(placement)
        loads = fabrics[0][1].analyze(s)  # the same paths on either link layer
        for executor in ("local-sync", "sync", "async"):
            lossless_wall = 0.0
            for model, routes in fabrics:
                t0 = time.perf_counter()
                rep = flowsim.simulate(routes, s, executor=executor)
                wall = time.perf_counter() - t0
                lossless_wall = lossless_wall or wall
                rows.append({
                    "bench": "paper003-bruck", "placement": placement_name, "executor": executor, "model": model,
                    "flows": s.num_messages, "makespan_ms": rep["makespan_s"] * 1e3,
                    "paper_ms": 22.3 if placement_name == "x,y,z" else None,
                    "max_channel_bytes": loads["max_channel_bytes"], "wall_s": wall, "timeouts": rep["timeouts"],
                    "reallocations": rep["reallocations"], "flows_recomputed": rep["flows_recomputed"],
                })
                print(f"paper 003 Bruck 4096 ranks, {placement_name:>12} placement, {executor:>10}, {model}: "
                      f"{rep['makespan_s'] * 1e3:8.3f} ms simulated (paper, x,y,z on OpenNSIM: 22.3 ms), "
                      f"max_channel_bytes {loads['max_channel_bytes'] / 1e6:.2f} MB, {s.num_messages} flows in "
                      f"{wall:.3f} s{lossy_note(rows[-1], lossless_wall)}", flush=True)


def scaling(rows: list, max_n: int, executors, lossy: bool) -> None:
    from netweave import flowsim, traffic

    for n in range(4, max_n + 1, 2):
        topo = _torus([n, n, n], 100.0, 100.0)
        sched = traffic.alltoall(n**3, 1 << 16)
        fabrics = models(topo, lossy)
        t0 = time.perf_counter()
        fabrics[0][1].analyze(sched)
        analyze_wall = time.perf_counter() - t0
        for executor in executors:
            lossless_wall = 0.0
            for model, routes in fabrics:
                t0 = time.perf_counter()
                rep = flowsim.simulate(routes, sched, executor=executor)
                wall = time.perf_counter() - t0
                lossless_wall = lossless_wall or wall
                rows.append({
                    "bench": "alltoall-scaling", "torus": f"{n}x{n}x{n}", "executor": executor, "model": model,
                    "flows": sched.num_messages, "wall_s": wall, "analyze_wall_s": analyze_wall,
                    "peak_rss_gib": peak_rss_gib(), "makespan_ms": rep["makespan_s"] * 1e3, "timeouts": rep["timeouts"],
                    "reallocations": rep["reallocations"], "flows_recomputed": rep["flows_recomputed"],
                    "rates_changed": rep["rates_changed"],
                })
                print(f"all-to-all torus {n}x{n}x{n} {executor:>6} {model}: {sched.num_messages:>8} flows in {wall:7.2f} s "
                      f"({wall / sched.num_messages * 1e6:5.2f} us/flow, {wall / analyze_wall:6.1f}x analyze), "
                      f"peak RSS {peak_rss_gib():.2f} GiB, {rep['reallocations']} reallocations, "
                      f"{rep['flows_recomputed'] / sched.num_messages:.1f} recomputations/flow"
                      f"{lossy_note(rows[-1], lossless_wall)}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-n", type=int, default=10, help="largest torus side for the scaling runs (10: 999,000 flows)")
    ap.add_argument("--executors", default="sync,async", help="executors for the scaling runs")
    ap.add_argument("--skip-paper", action="store_true")
    ap.add_argument("--lossy", action="store_true", help="also run every case as Ethernet (buffers and TCP timeouts)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows: list = []
    if not args.skip_paper:
        paper_003(rows, args.lossy)
    scaling(rows, args.max_n, args.executors.split(","), args.lossy)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
