"""Do the phases of a shift all-to-all lose to TCP timeouts on a tree's trunks? Shift on 2 × 14
hosts under a root switch (1 Gbit/s hosts, 10 Gbit/s trunks, both × scale; 64 KiB port buffers),
a barrier after every phase, timed warm as `plan --verify` times it (one warm-up, then the slowest
rank's mean over 3 calls on the same connections), against the flow model's prediction of the
same run and its timeouts.

    python benches/trunk_bursts.py [--sizes 16384,131072,1048576] [--scale 0.02] [--repeats 2]

Phase k sends min(k, 28 − k) flows across each trunk: phases 11–17 offer more than the trunk
drains at the hosts' rate. Needs root. Prints one JSON line per run. What the runs show and how
the flow model's burst rule follows them is in docs/flowsim.md ("Bursts on a trunk").
"""

from __future__ import annotations

import argparse
import json
import uuid

from netweave.run import emulate, executor
from netweave.stages import routing, topology, traffic

HOSTS_PER_SWITCH = 14


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="16384,131072,1048576")
    parser.add_argument("--scale", type=float, default=0.02)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    tree = topology.switch_tree([2], HOSTS_PER_SWITCH, [10.0], [5_000.0], 1.0, 5_000.0)
    routes = routing.route(tree, "updown")
    name = "t" + uuid.uuid4().hex[:10]
    fabric = emulate.up(tree, routes, name, scale=args.scale)
    try:
        for nbytes in (int(s) for s in args.sizes.split(",")):
            shift = traffic.alltoall(tree.num_hosts, nbytes, "shift")
            graph = executor.as_task_graph(shift, executor.phase_groups_for(shift, "sync"))
            predicted = emulate.predict(tree, routes, graph, args.scale)
            for _ in range(args.repeats):
                run = emulate.run(fabric, graph, warmup=1, reps=3)
                print(json.dumps({"bytes": nbytes, "scale": args.scale,
                                  "measured_ms": run["makespan_s"] and round(run["makespan_s"] * 1e3, 1),
                                  "calls_ms": [round(c * 1e3, 1) for c in run["calls_s"]],
                                  "predicted_ms": round(predicted["makespan_s"] * 1e3, 1),
                                  "predicted_timeouts": predicted["timeouts"],
                                  "tcp_timeouts_4_calls": run["losses"]["tcp_timeouts"],
                                  "dropped_packets_4_calls": run["losses"]["dropped_packets"]}), flush=True)
    finally:
        emulate.down(name)


if __name__ == "__main__":
    main()
