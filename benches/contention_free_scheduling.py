"""Paper 004's scheduler: time to schedule an all-to-all (and a gather) against the number of hosts.

Trees of 1 Gbit/s hosts, 16 per edge switch, edge switches on one 10 Gbit/s core (the shape of
the thesis' istbs cluster), 64 KiB per pair, policy min-sync, relaying on (the thesis' rule;
`--relay off` for the no-relay scheduler). The thesis' C scheduler took "a few tens of ms" for
64 hosts (4,032 tasks) and grew about as hosts² (§6.2); this prints our time per size, the
fitted exponent of time against tasks, and the schedule's groups, dependencies and relays.
"core" is the scheduler alone as the Rust core times it (paths, grouping, stages, DAG); the
other columns are whole Python calls (also the cost-model replay and the summary).

    python benches/contention_free_scheduling.py [--max-hosts 1024] [--repeat 3] [--relay off]
"""

from __future__ import annotations

import argparse
import math
import time

import netweave
from netweave import traffic


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-hosts", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the fastest is reported")
    ap.add_argument("--relay", default="departure", choices=["departure", "arrival", "off"])
    args = ap.parse_args()
    print(f"{'hosts':>6}{'tasks':>10}{'groups':>8}{'deps':>10}{'relayed':>9}{'core (ms)':>11}{'alltoall (ms)':>15}{'gather (ms)':>13}")
    points = []
    hosts = 16
    while hosts <= args.max_hosts:
        topo = netweave.topology.switch_tree([hosts // 16], 16, [10.0], [5000.0], 1.0, 5000.0)
        best, core, summary = math.inf, math.inf, None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            _, summary = traffic.contention_free(topo, "alltoall", 65536, relay=args.relay)
            best = min(best, time.perf_counter() - t0)
            core = min(core, summary["scheduling_seconds"])
        g_best = math.inf
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            traffic.contention_free(topo, "gather", 65536, root=0, relay=args.relay)
            g_best = min(g_best, time.perf_counter() - t0)
        print(f"{hosts:>6}{summary['tasks']:>10}{summary['groups']:>8}{summary['dependencies']:>10}{summary['relayed_tasks']:>9}"
              f"{core * 1e3:>11.2f}{best * 1e3:>15.2f}{g_best * 1e3:>13.2f}", flush=True)
        points.append((summary["tasks"], best))
        hosts *= 2
    if len(points) >= 2:
        (t0, s0), (t1, s1) = points[0], points[-1]
        print(f"time grows as tasks^{math.log(s1 / s0) / math.log(t1 / t0):.2f} "
              f"(hosts^{2 * math.log(s1 / s0) / math.log(t1 / t0):.2f}) from {points[0][0]} to {points[-1][0]} tasks")


if __name__ == "__main__":
    main()
