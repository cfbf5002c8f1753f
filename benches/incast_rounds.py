"""How many flows of an incast finish in each retransmission-timeout round? Warm incasts into host
0 of a star (1 Gbit/s links × scale, 64 KiB port buffers): for each timed call, the flows that
finished within each 200 ms round (a flow finishing at t is in round ⌊t / 0.2 s⌋), against the
flow model's prediction of the same incast (each sender's one flow, bucketed the same way).

    python benches/incast_rounds.py [--cases 16:15:65536:0.353,...] [--repeats 3]

A case is HOSTS:SENDERS:BYTES:SCALE. Each run is one warm-up and one timed call on the same
connections. Needs root. Prints one JSON line per run. What the rounds show and how the flow
model's survival rule follows them is in docs/flowsim.md ("Survivors per round").
"""

from __future__ import annotations

import argparse
import json
import math
import uuid

from netweave.run import calibration, emulate
from netweave.stages import flowsim, routing, topology

BUFFER = 64 * 1024
DEFAULT_CASES = "16:15:65536:0.353,16:15:131072:0.353,16:15:1048576:0.353,32:31:65536:1.0,32:31:1000000:1.0"


def rounds(finish_s: list[float], timeout_s: float) -> list[int]:
    """Flows finishing in each round of `timeout_s` (a flow finishing at t is in ⌊t / timeout_s⌋)."""
    counts = [0] * (max((math.floor(t / timeout_s) for t in finish_s), default=-1) + 1)
    for t in finish_s:
        counts[math.floor(t / timeout_s)] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    timeout_s = flowsim.TCP_DEFAULTS["timeout_s"]
    for case in args.cases.split(","):
        hosts, senders, nbytes = (int(v) for v in case.split(":")[:3])
        scale = float(case.split(":")[3])
        star = topology.switch_tree([], hosts, [], [], 1.0, 5_000.0).with_switching("ethernet", BUFFER)
        routes = routing.route(star, "updown")
        graph = calibration.incast(senders, nbytes, hosts)
        predicted = emulate.predict(star, routes, graph, scale, BUFFER)
        predicted_finish = [float(predicted["host_finish_s"][s]) for s in range(1, senders + 1)]
        name = "r" + uuid.uuid4().hex[:10]
        fabric = emulate.up(star, routes, name, scale=scale, buffer=BUFFER)
        try:
            for _ in range(args.repeats):
                run = emulate.run(fabric, graph, warmup=1, reps=1)
                finish = [t["last_s"] for t in run["timeline"] if t["last_s"] is not None]
                print(json.dumps({"case": case, "measured_ms": round(run["makespan_s"] * 1e3, 1),
                                  "measured_rounds": rounds(finish, timeout_s),
                                  "predicted_ms": round(predicted["makespan_s"] * 1e3, 1),
                                  "predicted_rounds": rounds(predicted_finish, timeout_s),
                                  "tcp_timeouts": run["losses"]["tcp_timeouts"]}), flush=True)
        finally:
            emulate.down(name)


if __name__ == "__main__":
    main()
