"""The emulated cluster: bring-up and tear-down time, fidelity against the flow simulator, and
the highest aggregate rate two cores sustain.

- Bring-up / tear-down of 4×4, 8×8 and 16×8 meshes (16, 64, 128 hosts; 2·hosts + 1 namespaces).
- Fidelity: measured makespan ÷ the flow simulator's prediction on the same scaled fabric (no
  link latency, as emulated) for shift and bruck all-to-all on the 4×4 mesh (dor) and the
  contention-free all-to-all on a two-switch tree (8 + 8 hosts, up*/down*), at three sizes.
- Aggregate rate: one shift phase (every host sends to its neighbour) on the 4×4 mesh at
  growing link rates; the payload rate the run achieves.

    python benches/emulate_fidelity.py [--scale 0.0005] [--sizes 16384,131072,524288]

The default scale runs the mesh's links at 50 Mbit/s: 16 hosts × 3-4 hops stay well inside what
two cores forward. At --scale 0.002 (200 Mbit/s) the machine is the bottleneck.

Needs root (namespaces). Prints a table per part.
"""

from __future__ import annotations

import argparse
import time
import uuid

from netweave import emulate, routing, topology, traffic
from netweave._core import Schedule


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.0005, help="fraction of each link's bandwidth (mesh: 100 Gbit/s)")
    ap.add_argument("--sizes", default="16384,131072,524288", help="bytes per pair")
    args = ap.parse_args()
    print(f"{'hosts':>6}{'namespaces':>12}{'up (s)':>9}{'down (s)':>10}")
    for dims in ([4, 4], [8, 8], [16, 8]):
        up_s, down_s = bring_up(dims)
        hosts = dims[0] * dims[1]
        print(f"{hosts:>6}{2 * hosts + 1:>12}{up_s:>9.2f}{down_s:>10.2f}", flush=True)

    mesh = topology.mesh([4, 4])
    tree = topology.multi_cluster("a:8,b:8")
    tree_scale = args.scale * 100  # the tree's hosts run 1 Gbit/s links: same rates as the mesh's
    print(f"\n{'schedule':<18}{'bytes':>9}{'measured ms':>13}{'predicted ms':>14}{'ratio':>7}{'overhead':>10}")
    for nbytes in (int(b) for b in args.sizes.split(",")):
        cases = [("shift (mesh)", mesh, "dor", traffic.alltoall(16, nbytes, "shift"), args.scale),
                 ("bruck (mesh)", mesh, "dor", traffic.alltoall(16, nbytes, "bruck"), args.scale),
                 ("contention-free", tree, "updown", traffic.contention_free(tree, "alltoall", nbytes)[0], tree_scale)]
        for label, topo, engine, workload, scale in cases:
            r = fidelity(topo, engine, workload, scale)
            ratio = r["measured_over_predicted"]
            overhead = r["routing_proof"]["overhead"] if r["routing_proof"] else None
            print(f"{label:<18}{nbytes:>9}{(r['measured_s'] or 0) * 1e3:>13.2f}{r['predicted_s'] * 1e3:>14.2f}"
                  f"{ratio if ratio else float('nan'):>7.2f}{(overhead or 0) * 100:>9.2f}%", flush=True)

    print(f"\n{'link Gbit/s':>12}{'payload Gbit/s':>16}{'per link':>10}")
    neighbour = Schedule("neighbour", 16, [traffic.alltoall(16, 4 << 20, "shift").phase(1)])
    for gbps in (0.5, 1, 2, 4, 8):
        r = fidelity(mesh, "dor", neighbour, gbps / 100)
        rate = r["bytes"] * 8 / r["measured_s"] / 1e9 if r["measured_s"] else float("nan")
        print(f"{gbps:>12}{rate:>16.2f}{rate / 16:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
