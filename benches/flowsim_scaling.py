"""Flow simulator benchmarks: paper 003's Bruck allgather, and time against flow count.

1. Paper 003's OpenNSIM case: 4,096 ranks, Bruck allgather (12 steps, rank i sends
   2,048·2^k bytes to (i − 2^k) mod 4096 in step k), 16×16×16 torus, DOR, 5 GB/s links, 120 ns,
   with the default x,y,z placement and a 12-bit bit-reversal placement, for each executor.
   Bruck's step k forwards what arrived in step k − 1, so ``local-sync`` is the executor that
   matches the MPI program; the paper's simulator reported 22.3 ms for the x,y,z placement.
2. Shift all-to-all on n×n×n tori (DOR, 100 Gbit/s, 100 ns, 64 KiB per pair) for growing n:
   flows, wall time, peak memory, and the analysis engine's time on the same schedule as a
   reference measured in the same run.

Usage::

    python benches/flowsim_scaling.py [--max-n 10] [--json]
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


def paper_003(rows: list) -> None:
    from netweave import flowsim, routing, traffic

    topo = _torus([16, 16, 16], 40.0, 120.0)  # 5 GB/s = 40 Gbit/s
    routes = routing.route(topo, "dor")
    sched = traffic.build("allgather", "bruck", num_ranks=4096, bytes=2048)
    for placement_name, placement in (("x,y,z", list(range(4096))), ("bit-reversal", bit_reversal(12))):
        s = sched.with_placement(placement)
        loads = routes.analyze(s)
        for executor in ("local-sync", "sync", "async"):
            t0 = time.perf_counter()
            rep = flowsim.simulate(routes, s, executor=executor)
            wall = time.perf_counter() - t0
            rows.append({
                "bench": "paper003-bruck", "placement": placement_name, "executor": executor,
                "flows": s.num_messages, "makespan_ms": rep["makespan_s"] * 1e3, "paper_ms": 22.3 if placement_name == "x,y,z" else None,
                "max_channel_bytes": loads["max_channel_bytes"], "wall_s": wall,
                "reallocations": rep["reallocations"], "flows_recomputed": rep["flows_recomputed"],
            })
            print(f"paper 003 Bruck 4096 ranks, {placement_name:>12} placement, {executor:>10}: "
                  f"{rep['makespan_s'] * 1e3:8.3f} ms simulated (paper, x,y,z on OpenNSIM: 22.3 ms), "
                  f"max_channel_bytes {loads['max_channel_bytes'] / 1e6:.2f} MB, {s.num_messages} flows in {wall:.3f} s", flush=True)


def scaling(rows: list, max_n: int, executors) -> None:
    from netweave import flowsim, routing, traffic

    for n in range(4, max_n + 1, 2):
        topo = _torus([n, n, n], 100.0, 100.0)
        routes = routing.route(topo, "dor")
        sched = traffic.alltoall(n**3, 1 << 16)
        t0 = time.perf_counter()
        routes.analyze(sched)
        analyze_wall = time.perf_counter() - t0
        for executor in executors:
            t0 = time.perf_counter()
            rep = flowsim.simulate(routes, sched, executor=executor)
            wall = time.perf_counter() - t0
            rows.append({
                "bench": "alltoall-scaling", "torus": f"{n}x{n}x{n}", "executor": executor, "flows": sched.num_messages,
                "wall_s": wall, "analyze_wall_s": analyze_wall, "peak_rss_gib": peak_rss_gib(),
                "makespan_ms": rep["makespan_s"] * 1e3, "reallocations": rep["reallocations"],
                "flows_recomputed": rep["flows_recomputed"], "rates_changed": rep["rates_changed"],
            })
            print(f"all-to-all torus {n}x{n}x{n} {executor:>6}: {sched.num_messages:>8} flows in {wall:7.2f} s "
                  f"({wall / sched.num_messages * 1e6:5.2f} us/flow, {wall / analyze_wall:6.1f}x analyze), "
                  f"peak RSS {peak_rss_gib():.2f} GiB, {rep['reallocations']} reallocations, "
                  f"{rep['flows_recomputed'] / sched.num_messages:.1f} recomputations/flow", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-n", type=int, default=10, help="largest torus side for the scaling runs (10: 999,000 flows)")
    ap.add_argument("--executors", default="sync,async", help="executors for the scaling runs")
    ap.add_argument("--skip-paper", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows: list = []
    if not args.skip_paper:
        paper_003(rows)
    scaling(rows, args.max_n, args.executors.split(","))
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
