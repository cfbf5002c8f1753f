"""The flow model's cost with buffers and losses on, against the lossless model on the same
fabric and workload (budget: at most 2x the lossless time).

The fabric is an Ethernet tree (``--fanouts``, ``--hosts-per-switch``; the default 8 x 8 edge
switches of 16 hosts: 1,024 hosts, 64 KiB port buffers); the same topology restated as
InfiniBand runs the lossless model. Workloads:

- shift all-to-all, phase-synchronous (one flow per port: the loss rule finds nothing to do);
- linear all-to-all, ``async`` with 4 concurrent sends per host (many flows converge on every
  port: timeouts on Ethernet);
- paper 004's concurrent gather to host 0 (incast at one port).

    python benches/flowsim_losses.py [--fanouts 8,8] [--hosts-per-switch 16] [--bytes 65536] [--repeats 3] [--wall]
                                     [--predictions FILE]

Prints, per workload, the best time of each model, their ratio and the timeouts charged. The
two models run alternately, repeat by repeat, so both see the same machine load, and the time
is the process's CPU time (the engine runs in this thread), which other processes' load
disturbs far less than wall time; `--wall` measures wall time instead. `--predictions FILE`
writes every workload's two reports (makespan, timeouts, retransmitted bytes, per-host finish and
per-channel times, cost counters) as JSON, so a change meant to keep the predictions can be
checked against the file written before it.
"""

from __future__ import annotations

import argparse
import json
import time

from netweave import flowsim, routing, topology, traffic


def best_times(models, workload, executor: str, nct: int, repeats: int, clock) -> list[tuple[float, dict]]:
    """Best time and report of each of `models` (routing tables), run alternately."""
    best: list[tuple[float, dict]] = [(float("inf"), {})] * len(models)
    for _ in range(repeats):
        for i, routes in enumerate(models):
            t0 = clock()
            report = flowsim.simulate(routes, workload, executor=executor, nct=nct)
            best[i] = (min(best[i][0], clock() - t0), report)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fanouts", default="8,8")
    ap.add_argument("--hosts-per-switch", type=int, default=16)
    ap.add_argument("--bytes", type=int, default=65536, help="bytes per pair (all-to-all) or per sender (gather)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--wall", action="store_true", help="measure wall time, not this process's CPU time")
    ap.add_argument("--predictions", metavar="FILE", help="write every workload's lossless and lossy reports as JSON")
    args = ap.parse_args()
    fanouts = [int(v) for v in args.fanouts.split(",")]
    ethernet = topology.switch_tree(fanouts, args.hosts_per_switch, [10.0] * len(fanouts), [5000.0] * len(fanouts),
                                    1.0, 5000.0)
    lossless = ethernet.with_switching("infiniband")
    n = ethernet.num_hosts
    workloads = [
        ("shift all-to-all, sync", traffic.alltoall(n, args.bytes, "shift"), "sync", 1),
        ("linear all-to-all, async NCT 4", traffic.alltoall(n, args.bytes, "linear"), "async", 4),
        ("concurrent gather", traffic.concurrent(ethernet, "gather", args.bytes, root=0), "dag", 1),
    ]
    print(f"{n} hosts, {ethernet.num_switches} switches, port buffer {ethernet.port_buffer_bytes:,} B, "
          f"{args.bytes:,} B per message")
    print(f"{'workload':<32}{'flows':>9}{'lossless s':>12}{'lossy s':>10}{'ratio':>7}{'timeouts':>10}"
          f"{'makespan x':>12}")
    predictions: dict[str, dict] = {}
    for label, workload, executor, nct in workloads:
        routes_eth = routing.route(ethernet, "updown")
        routes_ib = routing.route(lossless, "updown")
        clock = time.perf_counter if args.wall else time.process_time
        (t_ib, r_ib), (t_eth, r_eth) = best_times([routes_ib, routes_eth], workload, executor, nct, args.repeats, clock)
        flows = r_eth["messages"]
        print(f"{label:<32}{flows:>9}{t_ib:>12.3f}{t_eth:>10.3f}{t_eth / t_ib:>7.2f}{r_eth['timeouts']:>10}"
              f"{r_eth['makespan_s'] / r_ib['makespan_s']:>12.2f}", flush=True)
        for model, report in (("lossless", r_ib), ("lossy", r_eth)):
            predictions[f"{label} / {model}"] = {k: v.tolist() if hasattr(v, "tolist") else v for k, v in report.items()}
    if args.predictions:
        with open(args.predictions, "w") as f:
            json.dump(predictions, f, indent=1)


if __name__ == "__main__":
    main()
