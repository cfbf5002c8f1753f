"""The real executor on loopback: paper 004's contention-free DAGs against Concurrent, run by the
same program (`netweave run`'s launcher and `nw-tcp-run`).

32 processes (a two-level tree of 4 edge switches × 8 hosts gives the schedules), gather to rank
0 and all-to-all, from 1 KiB to 4 MiB per pair. Concurrent is the same tasks with no ordering:
every host sends its tasks back to back, no syncs (for gather: every host at once, the incast
case). Prints per case the best of --repeat runs: time (every process starts together), the collective's payload
bytes/s (relayed bytes counted once), sync messages, relayed tasks, and
contention-free time ÷ Concurrent time. Loopback has no switch buffers to overflow, so this
measures the executor's overhead and the cost of the schedule's ordering, not incast.

    python benches/executor_loopback.py [--hosts 32] [--repeat 3] [--sizes 1024,16384,262144,4194304]
"""

from __future__ import annotations

import argparse

from netweave import _core, traffic
from netweave.run import executor


def concurrent(graph: _core.TaskGraph, name: str) -> _core.TaskGraph:
    """The same transfers, unordered: every relay chain becomes its original direct task."""
    tasks = graph.tasks()
    forwarded = {relays for *_rest, relays in tasks if relays is not None}
    pairs = set()
    for t, (_src, dst, nbytes, _after, _relays) in enumerate(tasks):
        if t in forwarded:
            continue  # an inner piece: its chain's last piece stands for the transfer
        head = t
        while tasks[head][4] is not None:
            head = tasks[head][4]
        pairs.add((tasks[head][0], dst, nbytes))
    return _core.TaskGraph(name, graph.num_ranks, [(s, d, b, [], None) for s, d, b in sorted(pairs)])


def best_of(graph: _core.TaskGraph, repeat: int) -> dict:
    best = None
    for seed in range(repeat):
        r = executor.run_local(graph, seed=seed, timeout=60)
        if not r["ok"]:
            raise SystemExit(f"{graph.name}: {r['cause']}")
        if best is None or r["makespan_s"] < best["makespan_s"]:
            best = r
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="1024,16384,262144,4194304")
    args = ap.parse_args()
    if args.hosts % 8:
        raise SystemExit("--hosts must be a multiple of 8 (8 hosts per edge switch)")
    topo = _core.switch_tree([args.hosts // 8], 8, [10.0], [1000.0], 1.0, 1000.0)
    print(f"{'collective':<10}{'bytes/pair':>11}{'CF ms':>10}{'CF MB/s':>10}{'syncs':>7}{'relayed':>8}"
          f"{'conc ms':>10}{'conc MB/s':>10}{'CF/conc':>9}")
    for collective in ("gather", "alltoall"):
        for size in (int(s) for s in args.sizes.split(",")):
            graph, summary = traffic.contention_free(topo, collective, size, root=0)
            cf = best_of(graph, args.repeat)
            conc = best_of(concurrent(graph, f"{collective}-concurrent"), args.repeat)
            payload = conc["bytes"]  # the collective's bytes; relay pieces move some of them twice
            cf_rate, conc_rate = (payload / r["makespan_s"] / 1e6 for r in (cf, conc))
            print(f"{collective:<10}{size:>11}{cf['makespan_s'] * 1e3:>10.2f}{cf_rate:>10.0f}{cf['syncs']:>7}"
                  f"{summary['relayed_tasks']:>8}{conc['makespan_s'] * 1e3:>10.2f}{conc_rate:>10.0f}"
                  f"{cf['makespan_s'] / conc['makespan_s']:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
