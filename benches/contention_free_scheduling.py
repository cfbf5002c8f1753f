"""Paper 004's scheduler: time to schedule an all-to-all (and a gather) against the number of hosts.

Trees of 1 Gbit/s hosts, 16 per edge switch, edge switches on one 10 Gbit/s core (the shape of
the thesis' istbs cluster), 64 KiB per pair, policy min-sync, relaying on (the thesis' rule;
`--relay off` for the no-relay scheduler). The thesis' C scheduler took "a few tens of ms" for
64 hosts (4,032 tasks) and grew about as hosts² (§6.2); this prints our time per size, the
fitted exponent of time against tasks, and the schedule's groups, dependencies and relays.
"core" is the scheduler alone as the Rust core times it (paths, grouping, stages, DAG); the
other columns are whole Python calls (also the cost-model replay and the summary).

Then, against the bottleneck lower bound (`analysis.bottleneck_bound`: busiest link or port,
bytes ÷ bandwidth) in the lossless flow model, 1 MiB per pair, on the 2 × 14 and 4 × 16 trees
(10 Gbit/s core, 1 Gbit/s hosts) and a 3-level tree (2 × 3 switches of 8 hosts, 10 Gbit/s
trunks): the tree-phased all-to-all (phase-synchronous executor, as a contention-free phased
schedule is meant to run), the packed DAG and the paper's DAG (DAG executor), each as a ratio to
the bound, with the time to build each.

Then the time to schedule tree-phased and the packed DAG at 16, 64, 256 and 1,024 hosts (targets
2 ms at 64 and 5 s at 1,024; "phases" against "bound", the bound in phases), each also as a ratio to two peers timed in the same run: the shift generator (a formula, the
floor of what building a schedule costs) and the paper's scheduler (min-sync, relaying).

    python benches/contention_free_scheduling.py [--max-hosts 1024] [--repeat 3] [--relay off] [--no-bound] [--no-build-time]
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
    ap.add_argument("--no-bound", action="store_true", help="skip the ratio-to-the-bound table")
    ap.add_argument("--no-build-time", action="store_true", help="skip the tree-phased and packed build times")
    args = ap.parse_args()
    if not args.no_bound:
        bound_table()
    if not args.no_build_time:
        build_time_table(args.repeat)
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


def bound_table() -> None:
    """Ratio of each schedule's flow-model time to the bottleneck bound on the benchmark trees."""
    from netweave import analysis, flowsim, routing

    trees = [("2 x 14", [2], 14), ("4 x 16", [4], 16), ("3-level 2x3x8", [2, 3], 8)]
    print(f"{'tree':>14}{'bound (ms)':>12}{'tree-phased':>13}{'packed DAG':>12}{'paper DAG':>11}"
          f"{'build tp/packed/paper (ms)':>30}")
    for name, fanouts, per_switch in trees:
        topo = netweave.topology.switch_tree(fanouts, per_switch, [10.0] * len(fanouts), [5000.0] * len(fanouts),
                                             1.0, 5000.0)
        routes = routing.route(topo, "updown")
        t0 = time.perf_counter()
        phased = traffic.build("alltoall", "tree-phased", topology=topo, bytes=1 << 20)
        t_tp = time.perf_counter() - t0
        packed, s_packed = traffic.contention_free(topo, "alltoall", 1 << 20, scheduler="packed")
        paper, s_paper = traffic.contention_free(topo, "alltoall", 1 << 20)
        bound = analysis.bottleneck_bound(routes, phased)
        r_tp = flowsim.simulate(routes, phased, executor="sync")["makespan_s"] / bound["seconds"]
        r_packed = flowsim.simulate(routes, packed, executor="dag")["makespan_s"] / bound["seconds"]
        r_paper = flowsim.simulate(routes, paper, executor="dag")["makespan_s"] / bound["seconds"]
        build = f"{t_tp * 1e3:.1f}/{s_packed['scheduling_seconds'] * 1e3:.1f}/{s_paper['scheduling_seconds'] * 1e3:.1f}"
        print(f"{name:>14}{bound['seconds'] * 1e3:>12.1f}{r_tp:>13.3f}{r_packed:>12.3f}{r_paper:>11.3f}{build:>30}",
              flush=True)
    print()


#: Scheduling-time targets (seconds) by hosts; the sizes between have none and are shown for the trend.
BUILD_TARGETS = {16: None, 64: 2e-3, 256: None, 1024: 5.0}


def phase_bound(switches: int, per_switch: int, trunk_flows: int) -> int:
    """The bound in phases on `switches` edge switches of `per_switch` hosts whose trunks each
    serve `trunk_flows` host flows at once: the busier of a host port (n − 1 messages) and a
    trunk (per_switch × (n − per_switch) messages, `trunk_flows` at a time)."""
    n = switches * per_switch
    trunk = 0 if switches < 2 else -(-per_switch * (n - per_switch) // min(trunk_flows, per_switch))
    return max(n - 1, trunk)


def build_time_table(repeat: int) -> None:
    """Wall time to build tree-phased and the packed DAG (64 KiB per pair) on 16-host edge switches
    under a 10 Gbit/s core, against shift and the paper's scheduler timed alongside."""

    def fastest(build, runs: int) -> float:
        best = math.inf
        for _ in range(runs):
            t0 = time.perf_counter()
            build()
            best = min(best, time.perf_counter() - t0)
        return best

    print(f"{'hosts':>6}{'phases':>8}{'bound':>7}{'tree-phased (ms)':>18}{'packed (ms)':>13}{'shift (ms)':>12}"
          f"{'paper (ms)':>12}{'tp/shift':>10}{'tp/paper':>10}{'packed/paper':>14}{'target':>10}")
    for hosts, target in BUILD_TARGETS.items():
        topo = netweave.topology.switch_tree([hosts // 16], 16, [10.0], [5000.0], 1.0, 5000.0)
        runs = repeat if hosts <= 64 else 1
        sched = traffic.build("alltoall", "tree-phased", topology=topo, bytes=65536)
        t_tp = fastest(lambda topo=topo: traffic.build("alltoall", "tree-phased", topology=topo, bytes=65536), runs)
        t_packed = fastest(lambda topo=topo: traffic.contention_free(topo, "alltoall", 65536, scheduler="packed"), runs)
        t_shift = fastest(lambda topo=topo: traffic.build("alltoall", "shift", topology=topo, bytes=65536), runs)
        t_paper = fastest(lambda topo=topo: traffic.contention_free(topo, "alltoall", 65536), runs)
        met = "-" if target is None else "met" if max(t_tp, t_packed) <= target else "MISSED"
        print(f"{hosts:>6}{sched.num_phases:>8}{phase_bound(hosts // 16, 16, 10):>7}{t_tp * 1e3:>18.2f}{t_packed * 1e3:>13.2f}{t_shift * 1e3:>12.2f}"
              f"{t_paper * 1e3:>12.2f}{t_tp / t_shift:>10.1f}{t_tp / t_paper:>10.2f}{t_packed / t_paper:>14.2f}"
              f"{met:>10}", flush=True)
    print()


if __name__ == "__main__":
    main()
