"""Do short bursts pay a retransmission timeout? Warm incasts from 15 senders into one host of a
16-host star (1 Gbit/s links × scale, 64 KiB port buffers), a few segments per sender: each timed
call's makespan (over 200 ms means a stall of the minimum RTO), against the burst's drain time
and the flow model's prediction, with the hosts' TCP timeouts and single-loss probe recoveries
(a probe armed with one segment outstanding also waits the minimum RTO).

    python benches/short_bursts.py [--scales 0.353,0.05] [--segments 7,8,10,11,12,16] [--repeats 2]

Each size runs `--repeats` times as `plan --verify` times a candidate (one warm-up, then 3 calls
on the same connections). Needs root. Prints one JSON line per run. The figures and what they
mean for the flow model's probe rule are in docs/flowsim.md ("The probe across link rates").
"""

from __future__ import annotations

import argparse
import json
import uuid

from netweave.run import calibration, emulate
from netweave.stages import flowsim, routing, topology

SENDERS = 15
BUFFER = 64 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default="0.353,0.05")
    parser.add_argument("--segments", default="7,8,10,11,12,16")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    star = topology.switch_tree([], SENDERS + 1, [], [], 1.0, 5_000.0).with_switching("ethernet", BUFFER)
    routes = routing.route(star, "updown")
    mss = flowsim.TCP_DEFAULTS["segment_bytes"]
    for scale in (float(s) for s in args.scales.split(",")):
        name = "b" + uuid.uuid4().hex[:10]
        fabric = emulate.up(star, routes, name, scale=scale, buffer=BUFFER)
        try:
            for segments in (int(s) for s in args.segments.split(",")):
                graph = calibration.incast(SENDERS, segments * mss, SENDERS + 1)
                predicted = emulate.predict(star, routes, graph, scale, BUFFER)["makespan_s"]
                drain = SENDERS * segments * mss / (scale * 1e9 / 8)
                for _ in range(args.repeats):
                    run = emulate.run(fabric, graph, warmup=1, reps=3)
                    calls = [round(t * 1e3, 1) for t in run.get("calls_s") or []]
                    print(json.dumps({"scale": scale, "segments": segments, "drain_ms": round(drain * 1e3, 1),
                                      "predicted_ms": round(predicted * 1e3, 1), "calls_ms": calls,
                                      "timed_out": sum(t > 200 for t in calls),
                                      "retransmitted": run["losses"]["retransmitted_segments"],
                                      "tcp_timeouts": run["losses"]["tcp_timeouts"],
                                      "probe_recoveries": run["losses"]["probe_recoveries"]}), flush=True)
        finally:
            emulate.down(name)


if __name__ == "__main__":
    main()
