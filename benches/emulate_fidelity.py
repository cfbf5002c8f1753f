"""The emulated cluster: bring-up and tear-down time, fidelity against the flow simulator, and
the highest aggregate rate two cores sustain.

- Bring-up / tear-down of 4×4, 8×8 and 16×8 meshes (16, 64, 128 hosts; 2·hosts + 1 namespaces).
- Fidelity: measured makespan ÷ the flow simulator's prediction on the same scaled fabric (no
  link latency, as emulated) for shift and bruck all-to-all on the 4×4 mesh (dor) and the
  contention-free all-to-all on a two-switch tree (8 + 8 hosts, up*/down*), at three sizes.
- Aggregate rate: one shift phase (every host sends to its neighbour) on the 4×4 mesh at
  growing link rates; the payload rate the run achieves.
- Losses (Ethernet, 64 KiB port buffers): Concurrent incast of 31 senders × 1 MB on one 1 Gbit/s
  switch, repeated (every run and the median), and gather on 2 × 14 hosts (links × 0.2) with
  Concurrent, OURS (relaying) and Min Sync: measured against the flow model's prediction with
  buffers and TCP timeouts (default parameters, or a calibration file's). Each run is one cold
  call (`emulate measure`); `--warm` also times the incast as `plan --verify` and `emulate
  calibrate` time a call (one warm-up, then the slowest rank's mean over 3 calls on the same
  connections).

    python benches/emulate_fidelity.py [--scale 0.0005] [--sizes 16384,131072,524288]
    python benches/emulate_fidelity.py --parts losses [--calibration cal.json] [--repeats 5] [--warm]

The default scale runs the mesh's links at 50 Mbit/s: 16 hosts × 3-4 hops stay well inside what
two cores forward. At --scale 0.002 (200 Mbit/s) the machine is the bottleneck.

Needs root (namespaces). Prints a table per part.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from netweave import flowsim, routing, topology, traffic
from netweave._core import Schedule
from netweave.run import emulate, executor


def name() -> str:
    return "b" + uuid.uuid4().hex[:11]


def bring_up(dims: list[int]) -> tuple[float, float]:
    topo = topology.mesh(dims)
    routes = routing.route(topo, "dor")
    fabric = name()
    t0 = time.perf_counter()
    emulate.up(topo, routes, fabric, scale=0.01)
    t1 = time.perf_counter()
    emulate.down(fabric)
    return t1 - t0, time.perf_counter() - t1


def fidelity(topo, engine, workload, scale: float) -> dict:
    return emulate.measure(topo, routing.route(topo, engine), workload, name(), scale=scale, buffer=16 << 20)


#: The loss part's fabrics: paper 004's incast star and its 2 × 14 gather hierarchy.
INCAST_SENDERS, INCAST_BYTES, SHALLOW_BUFFER = 31, 1_000_000, 64 * 1024
GATHER_BYTES, HIERARCHY_SCALE = 50_000, 0.2


def losses(repeats: int, calibration_file, warm: bool = False) -> None:
    """Predicted against measured where the flow model must see buffers and TCP timeouts."""
    star = topology.switch_tree([], 32, [], [], 1.0, 5_000.0).with_switching("ethernet", SHALLOW_BUFFER)
    tree = topology.switch_tree([2], 14, [10.0], [5_000.0], 1.0, 5_000.0).with_switching("ethernet", SHALLOW_BUFFER)
    calibration = None
    if calibration_file:
        calibration = flowsim.load_calibration(calibration_file, star)
    print(f"\n{'case':<40}{'measured ms':>13}{'predicted ms':>14}{'pred/meas':>11}{'timeouts':>10}{'drops':>7}")
    tasks = [(s, 0, INCAST_BYTES) for s in range(1, INCAST_SENDERS + 1)]
    incast = traffic.concurrent(star, "tasks", 0, tasks=tasks)
    routes = routing.route(star, "updown")
    runs = []
    for i in range(repeats):
        r = emulate.measure(star, routes, incast, name(), scale=1.0, buffer=SHALLOW_BUFFER, calibration=calibration)
        runs.append(r["measured_s"])
        print(f"{f'incast {INCAST_SENDERS} x 1 MB, run {i + 1}':<40}{r['measured_s'] * 1e3:>13.1f}{r['predicted_s'] * 1e3:>14.1f}"
              f"{r['predicted_s'] / r['measured_s']:>11.2f}{r['predicted_timeouts']:>10}{r['losses']['dropped_packets']:>7}",
              flush=True)
    median = statistics.median(runs)
    print(f"{f'incast {INCAST_SENDERS} x 1 MB, median of {repeats}':<40}{median * 1e3:>13.1f}{r['predicted_s'] * 1e3:>14.1f}"
          f"{r['predicted_s'] / median:>11.2f}", flush=True)
    if warm:
        warm_incast(star, routes, incast, repeats, calibration)
    routes = routing.route(tree, "updown")
    methods = {"Concurrent": traffic.concurrent(tree, "gather", GATHER_BYTES, root=0),
               "OURS (relaying)": traffic.contention_free(tree, "gather", GATHER_BYTES, root=0, relay="departure")[0],
               "Min Sync (no relay)": traffic.contention_free(tree, "gather", GATHER_BYTES, root=0, relay="off")[0]}
    for label, dag in methods.items():
        r = emulate.measure(tree, routes, dag, name(), scale=HIERARCHY_SCALE, buffer=SHALLOW_BUFFER, calibration=calibration)
        print(f"{f'gather 2x14 {GATHER_BYTES:,} B: {label}':<40}{r['measured_s'] * 1e3:>13.1f}{r['predicted_s'] * 1e3:>14.1f}"
              f"{r['predicted_s'] / r['measured_s']:>11.2f}{r['predicted_timeouts']:>10}{r['losses']['dropped_packets']:>7}",
              flush=True)


def warm_incast(star, routes, incast, repeats: int, calibration) -> None:
    """The incast timed warm, `repeats` times on one fabric: each run one warm-up call, then the
    slowest rank's mean over 3 calls."""
    graph = executor.as_task_graph(incast)
    predicted = emulate.predict(star, routes, graph, 1.0, SHALLOW_BUFFER, calibration, nct=INCAST_SENDERS)["makespan_s"]
    fabric = name()
    runs = []
    cluster = emulate.up(star, routes, fabric, scale=1.0, buffer=SHALLOW_BUFFER)
    try:
        for i in range(repeats):
            r = emulate.run(cluster, graph, warmup=1, reps=3)
            if not r["ok"]:
                raise SystemExit(f"warm incast failed: {r['cause']}")
            runs.append(r["makespan_s"])
            print(f"{f'incast {INCAST_SENDERS} x 1 MB warm, run {i + 1}':<40}{r['makespan_s'] * 1e3:>13.1f}"
                  f"{predicted * 1e3:>14.1f}{predicted / r['makespan_s']:>11.2f}{'':>10}{r['losses']['dropped_packets']:>7}",
                  flush=True)
    finally:
        emulate.down(fabric)
    median = statistics.median(runs)
    print(f"{f'incast {INCAST_SENDERS} x 1 MB warm, median of {repeats}':<40}{median * 1e3:>13.1f}{predicted * 1e3:>14.1f}"
          f"{predicted / median:>11.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.0005, help="fraction of each link's bandwidth (mesh: 100 Gbit/s)")
    ap.add_argument("--sizes", default="16384,131072,524288", help="bytes per pair")
    ap.add_argument("--parts", default="bringup,fidelity,rate,losses", help="which parts to run")
    ap.add_argument("--repeats", type=int, default=5, help="incast runs (losses part)")
    ap.add_argument("--calibration", default=None, help="calibration file for the losses part's predictions")
    ap.add_argument("--warm", action="store_true", help="losses part: also time the incast warm")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if "losses" in parts:
        losses(args.repeats, args.calibration, args.warm)
    if "bringup" in parts:
        print(f"{'hosts':>6}{'namespaces':>12}{'up (s)':>9}{'down (s)':>10}")
        for dims in ([4, 4], [8, 8], [16, 8]):
            up_s, down_s = bring_up(dims)
            hosts = dims[0] * dims[1]
            print(f"{hosts:>6}{2 * hosts + 1:>12}{up_s:>9.2f}{down_s:>10.2f}", flush=True)
    mesh = topology.mesh([4, 4])
    if "fidelity" in parts:
        schedules(mesh, args.scale, args.sizes)
    if "rate" in parts:
        aggregate_rate(mesh)


def schedules(mesh, mesh_scale: float, sizes: str) -> None:
    """Measured against predicted for shift, bruck and the contention-free all-to-all."""
    tree = topology.multi_cluster("a:8,b:8")
    tree_scale = mesh_scale * 100  # the tree's hosts run 1 Gbit/s links: same rates as the mesh's
    print(f"\n{'schedule':<18}{'bytes':>9}{'measured ms':>13}{'predicted ms':>14}{'ratio':>7}{'overhead':>10}")
    for nbytes in (int(b) for b in sizes.split(",")):
        cases = [("shift (mesh)", mesh, "dor", traffic.alltoall(16, nbytes, "shift"), mesh_scale),
                 ("bruck (mesh)", mesh, "dor", traffic.alltoall(16, nbytes, "bruck"), mesh_scale),
                 ("contention-free", tree, "updown", traffic.contention_free(tree, "alltoall", nbytes)[0], tree_scale)]
        for label, topo, engine, workload, scale in cases:
            r = fidelity(topo, engine, workload, scale)
            ratio = r["measured_over_predicted"]
            overhead = r["routing_proof"]["overhead"] if r["routing_proof"] else None
            print(f"{label:<18}{nbytes:>9}{(r['measured_s'] or 0) * 1e3:>13.2f}{r['predicted_s'] * 1e3:>14.2f}"
                  f"{ratio if ratio else float('nan'):>7.2f}{(overhead or 0) * 100:>9.2f}%", flush=True)


def aggregate_rate(mesh) -> None:
    """The payload rate one neighbour-exchange phase reaches at growing link rates."""
    print(f"\n{'link Gbit/s':>12}{'payload Gbit/s':>16}{'per link':>10}")
    neighbour = Schedule("neighbour", 16, [traffic.alltoall(16, 4 << 20, "shift").phase(1)])
    for gbps in (0.5, 1, 2, 4, 8):
        r = fidelity(mesh, "dor", neighbour, gbps / 100)
        rate = r["bytes"] * 8 / r["measured_s"] / 1e9 if r["measured_s"] else float("nan")
        print(f"{gbps:>12}{rate:>16.2f}{rate / 16:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
