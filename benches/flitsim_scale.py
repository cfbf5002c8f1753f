"""The flit simulator at scale: time and memory per host of open-loop runs to a converged
latency on big fabrics, and the largest fabric that fits this machine's memory.

    .venv/bin/python benches/flitsim_scale.py [--cases torus32,dragonfly16k] [--rate 0.002]

Cases (uniform traffic, 10-flit packets, 8-flit VC buffers, BookSim's convergence rule):
- ``torus32``: a 32×32×32 torus, one host per router (32,768 hosts), BookSim's dimension-order
  routing with two dateline VCs;
- ``dragonfly16k``: a dragonfly with a = 16 routers per group, p = 8 hosts per router, h = 8
  global links per router and g = a·h + 1 = 129 groups (16,512 hosts, the balanced dragonfly
  nearest 16,384), routed by netweave's Nue within 3 VCs.

Each case runs in a child process of its own, so its peak resident memory (``ru_maxrss``) is
that run's alone: reported per host, with the build (topology and routes) and the simulation
timed apart. The load is moderate — a fraction of what uniform traffic saturates at on these
fabrics. Memory splits into the routing table (one 2-byte output port per router and
destination host: it grows with hosts², and dominates the torus) and the rest (per channel,
VC and host: linear); the largest fabric of the same family that fits 24 GiB solves
``2·(H/p)·H + rest_per_host·H = 24 GiB`` for H hosts with p hosts per router.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

MEMORY_BYTES = 24 * 2**30

BASE = {"vc_buf_size": 8, "packet_size": 10, "traffic": "uniform", "sample_period": 2000, "max_samples": 20}


def run_case(name: str, rate: float) -> dict:
    """One case in this process: build, simulate, report."""
    from netweave import flitsim, routing, topology

    t0 = time.perf_counter()
    if name == "torus32":
        config = {**BASE, "topology": "torus", "k": 32, "n": 3, "routing_function": "dim_order", "num_vcs": 2}
        routes, hosts, routers = None, 32**3, 32**3
    elif name == "dragonfly16k":
        topo = topology.dragonfly(16, 8, 8, None)  # g = a·h + 1 = 129 groups
        routes = routing.route(topo, "nue", vcs=3)
        config = {**BASE, "num_vcs": routes.num_vcs}
        hosts, routers = topo.num_hosts, topo.num_switches
    else:
        raise SystemExit(f"unknown case {name}")
    build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    result = flitsim.simulate(config, {"injection_rate": rate}, routes=routes)
    sim_s = time.perf_counter() - t1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    table = 2 * routers * hosts
    rest_per_host = max(peak - table, 0) / hosts
    per_router = hosts / routers
    # 2·H²/p + rest·H = M  →  H = (−rest + √(rest² + 8·M/p)) / (4/p)
    largest = (-rest_per_host + (rest_per_host**2 + 8 * MEMORY_BYTES / per_router) ** 0.5) / (4 / per_router)
    return {"case": name, "hosts": hosts, "routers": routers, "rate": rate, "build_s": round(build_s, 1), "simulate_s": round(sim_s, 1),
            "cycles": result["cycles"], "cycles_per_s": round(result["cycles"] / sim_s, 1),
            "converged": result["converged"], "saturated": result["saturated"],
            "latency": round(result["packet_latency"]["avg"], 2), "accepted_flits": round(result["accepted_flits"], 5),
            "peak_bytes": peak, "bytes_per_host": round(peak / hosts), "table_bytes": table,
            "rest_bytes_per_host": round(rest_per_host), "largest_hosts_in_24gib": int(largest)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="torus32,dragonfly16k")
    ap.add_argument("--rate", type=float, default=0.002, help="Packets per host per cycle (moderate on both).")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_case(args.one, args.rate)))
        return
    rows = []
    for name in args.cases.split(","):
        out = subprocess.run([sys.executable, __file__, "--one", name, "--rate", str(args.rate)],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout)
        rows.append(row)
        print(f"{name:<13} {row['hosts']:>6,} hosts: build {row['build_s']} s, {row['cycles']:,} cycles in "
              f"{row['simulate_s']} s ({row['cycles_per_s']:,} cycles/s), latency {row['latency']} "
              f"({'converged' if row['converged'] else 'NOT converged'}{', saturated' if row['saturated'] else ''}); "
              f"peak {row['peak_bytes'] / 2**30:.2f} GiB = {row['bytes_per_host'] / 1024:.1f} KiB/host "
              f"(routing table {row['table_bytes'] / 2**30:.2f} GiB, rest {row['rest_bytes_per_host'] / 1024:.1f} KiB/host); "
              f"24 GiB fits ~{row['largest_hosts_in_24gib']:,} hosts", flush=True)
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
