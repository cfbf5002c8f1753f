"""netweave's TCP executor on the emulated cluster, against another build of the C runtime in
the same run: the check that a change to the executor or its transport made small messages
cheaper, where 64 processes on two cores make the hosts' work, not the network, the limit.

    .venv/bin/python benches/executor_emulated.py OTHER_RUNTIME_DIR [--sizes 1024] [--rounds 2]

OTHER_RUNTIME_DIR holds the other build's ``nw-tcp-run`` (for an earlier revision: ``git
worktree add W REV && make -C W/runtime``, then ``W/runtime/build``). Needs root. One fabric is
brought up — paper 004's §6.3.1 tree, 64 hosts on 5 × 14 at 100 Mbit/s with 64 KiB queues, as
``reproduce ethernet --emulate`` builds it — and tree-phased in its local-sync order and in
buffer groups is run 3 calls at a time by each build in turn, round after round, so both see
the same load. Prints each run's mean and fastest call and the timeouts per call, then each
schedule's median over the rounds as this build ÷ the other.
"""

from __future__ import annotations

import argparse
import os
import statistics
import uuid
from pathlib import Path

from netweave.reproduce import ethernet_alltoall as setup
from netweave.run import emulate, executor
from netweave.stages import routing, traffic

CALLS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the other build's runtime directory (with nw-tcp-run)")
    parser.add_argument("--sizes", default="1024", help="bytes per pair, comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if not (args.other / "nw-tcp-run").is_file():
        parser.error(f"{args.other} has no nw-tcp-run; build it with `make -C <checkout>/runtime`")
    builds = {"this": str(executor.executor_path().parent), "other": str(args.other.resolve())}
    tree = setup.FULL.tree()
    hosts = list(range(setup.FULL.hosts))
    routes = routing.route(tree, "updown")
    name = "b" + uuid.uuid4().hex[:11]
    fabric = emulate.up(tree, routes, name, scale=setup.SCALE, buffer=setup.BUFFER)
    before = os.environ.get("NETWEAVE_RUNTIME_DIR")
    try:
        for nbytes in (int(x) for x in args.sizes.split(",")):
            phased = traffic.build("alltoall", "tree-phased", topology=tree, hosts=",".join(map(str, hosts)),
                                   bytes=nbytes)
            graphs = {"tree-phased, local-sync": executor.as_task_graph(phased),
                      "tree-phased, buffer groups": executor.as_task_graph(
                          phased, traffic.buffer_groups(routes, phased, setup.BUFFER))}
            times: dict[tuple[str, str], list[float]] = {}
            for rnd in range(args.rounds):
                for build, directory in builds.items():
                    os.environ["NETWEAVE_RUNTIME_DIR"] = directory
                    for method, graph in graphs.items():
                        r = setup._run_schedule(fabric, graph, CALLS)
                        times.setdefault((method, build), []).append(r["seconds"])
                        print(f"{nbytes} B, round {rnd}, {build}: {method}: mean {r['seconds'] * 1e3:.1f} ms, fastest "
                              f"{r['fastest_s'] * 1e3:.1f} ms, {r['timeouts_per_call']:.1f} timeouts per call", flush=True)
            for method in graphs:
                this, other = (statistics.median(times[(method, b)]) for b in builds)
                print(f"{nbytes} B, {method}: this build {this * 1e3:.1f} ms, other {other * 1e3:.1f} ms, "
                      f"this ÷ other {this / other:.2f}")
    finally:
        if before is None:
            os.environ.pop("NETWEAVE_RUNTIME_DIR", None)
        else:
            os.environ["NETWEAVE_RUNTIME_DIR"] = before
        emulate.down(name)


if __name__ == "__main__":
    main()
