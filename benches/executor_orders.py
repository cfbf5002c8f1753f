"""Which executor should a phased schedule run with? Each candidate under each executor order
(sync, async, local-sync), measured on the emulated fabric as `plan --verify` measures it (one
warm-up call, the slowest rank's mean of 3) against the flow model's prediction of the same DAG.

    python benches/executor_orders.py [--fabric tree2x14] [--scale 0.02] [--sizes 131072,1048576]
        [--candidates tree-phased,shift] [--executors sync,async,local-sync] [--repeats 1] [--out FILE]

The fabrics are `advice_fidelity.py`'s; the scale is the link scale (the one `plan --verify`
chose there: star16 0.047, tree2x14 0.02, tree3 0.0201 for all-to-alls). Needs root. Prints one
JSON line per run and writes them all to --out. `plan.predict_phased` chooses local-sync, then
sync, unless another executor is predicted more than 5 % faster; the figures behind that rule
are in docs/plan.md ("The executor"). Each row also has the model's timeouts and the TCP
timeouts and drops the fabric counted over the run's four calls: `--candidates shift --executors
sync --sizes 16384,131072,1048576 --repeats 2` is the run behind docs/flowsim.md's "Bursts on a
trunk".
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path

from advice_fidelity import FABRICS

from netweave import plan
from netweave.run import emulate, executor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fabric", default="tree2x14", choices=sorted(FABRICS))
    parser.add_argument("--scale", type=float, default=0.02)
    parser.add_argument("--sizes", default="131072,1048576")
    parser.add_argument("--candidates", default="tree-phased,shift")
    parser.add_argument("--executors", default=",".join(plan.PHASED_EXECUTORS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    topo = FABRICS[args.fabric]()
    rows = []
    for nbytes in (int(s) for s in args.sizes.split(",")):
        routes, _why = plan.routing_for(topo, None, nbytes)
        built = {c.name: c.schedule for c in plan.candidates(topo, nbytes, collective="alltoall") if c.schedule}
        scaled = emulate.scaled_routes(routes, emulate.scaled_topology(routes.topology, args.scale))
        name = "x" + uuid.uuid4().hex[:10]
        fabric = emulate.up(topo, routes, name, scale=args.scale, buffer=topo.port_buffer_bytes)
        try:
            for candidate in (c for c in args.candidates.split(",") if c in built):
                schedule = built[candidate]
                for order in args.executors.split(","):
                    graph = executor.as_task_graph(schedule, executor.phase_groups_for(schedule, order))
                    predicted = plan.predict(scaled, graph, "dag", 1, tcp=emulate.HOST_TCP)
                    for _ in range(args.repeats):
                        run = emulate.run(fabric, graph, warmup=1, reps=3)
                        row = {"fabric": args.fabric, "bytes": nbytes, "candidate": candidate, "executor": order,
                               "predicted_ms": predicted["makespan_s"] * 1e3,
                               "predicted_timeouts": predicted["timeouts"],
                               "measured_ms": run["makespan_s"] * 1e3 if run["ok"] else None,
                               "retransmitted": run["losses"]["retransmitted_segments"],
                               "tcp_timeouts": run["losses"]["tcp_timeouts"],
                               "dropped_packets": run["losses"]["dropped_packets"]}
                        print(json.dumps(row), flush=True)
                        rows.append(row)
        finally:
            emulate.down(name)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
