#!/usr/bin/env python3
"""netweave's flit-level simulator side by side with BookSim2.

    python benches/flitsim_vs_booksim.py BOOKSIM_BINARY [--quick] [--skip-validation] [--skip-speed]

Validation: 8x8 torus and mesh, dimension-order routing (2 VCs, 8-flit buffers, 4-flit
packets), uniform / transpose / bitcomp traffic. For each case both simulators first run
``sim_type = throughput`` at full offered load to find the saturation throughput, then
``sim_type = latency`` at 20/40/60/80 % of BookSim's saturation load; the table gives both
average packet latencies and their difference (target: within 10 % below saturation) and
both saturation throughputs (target: within 5 %).

Speed: 16x16 torus, DOR, 2 VCs, 8-flit buffers, 10-flit packets, uniform at 0.007
packets/cycle/host, 10,000-cycle sample periods, single thread; simulated cycles per CPU
second of each simulator, and their ratio (target: at least 10x). Memory: peak RSS of a
32x32 torus run. Both simulators read the same BookSim-style keys.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import netweave.flitsim as fs

VALIDATION_BASE = {
    "k": 8, "n": 2, "routing_function": "dim_order", "num_vcs": 2, "vc_buf_size": 8,
    "packet_size": 4, "sample_period": 1000, "warmup_periods": 3, "max_samples": 10, "seed": 1,
}
SPEED = {
    "topology": "torus", "k": 16, "n": 2, "routing_function": "dim_order", "num_vcs": 2,
    "vc_buf_size": 8, "packet_size": 10, "traffic": "uniform", "injection_rate": 0.007,
    "sample_period": 10000,
}


def booksim_config(cfg: dict) -> str:
    return "".join(f"{k} = {v};\n" for k, v in cfg.items())


def run_booksim(binary: str, cfg: dict) -> dict:
    """Run BookSim on `cfg`; the parsed summary plus the child's CPU seconds."""
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as f:
        f.write(booksim_config(cfg))
        path = f.name
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    proc = subprocess.run([binary, path], capture_output=True, text=True)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    os.unlink(path)
    out = proc.stdout

    def last(pattern: str) -> float | None:
        found = re.findall(pattern, out)
        return float(found[-1]) if found else None

    return {
        "latency": last(r"Packet latency average = ([\d.]+) \(1 samples\)"),
        "accepted": last(r"Accepted flit rate average = ([\d.]+) \(1 samples\)"),
        "cycles": last(r"Time taken is (\d+) cycles"),
        "unstable": "unstable" in out.lower() or "aborting" in out.lower(),
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "wall": wall,
        "maxrss_kib": after.ru_maxrss,
    }


def run_ours(cfg: dict) -> dict:
    """One run on one thread (BookSim has one; cycles per CPU second compare single cores)."""
    cpu = time.process_time()
    wall = time.perf_counter()
    r = fs.simulate({**cfg, "threads": 1})
    return {
        "latency": r["packet_latency"]["avg"] if r["packet_latency"]["count"] else None,
        "accepted": r["accepted_flits"],
        "cycles": r["cycles"],
        "unstable": r["saturated"],
        "cpu": time.process_time() - cpu,
        "wall": time.perf_counter() - wall,
    }


def pct(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{100.0 * (a - b) / b:+.1f} %"


def validation(binary: str, quick: bool) -> list[str]:
    rows = ["| topology | traffic | load (pkt/cycle/host) | BookSim latency | netweave latency | diff | BookSim sat. thr. | netweave sat. thr. | diff |",
            "|---|---|---|---|---|---|---|---|---|"]
    topologies = ["torus", "mesh"]
    patterns = ["uniform"] if quick else ["uniform", "transpose", "bitcomp"]
    fractions = [0.3, 0.7] if quick else [0.2, 0.4, 0.6, 0.8]
    for topo in topologies:
        for traffic in patterns:
            base = {**VALIDATION_BASE, "topology": topo, "traffic": traffic}
            sat = {**base, "sim_type": "throughput", "injection_rate": 1.0 / base["packet_size"]}
            b_sat = run_booksim(binary, sat)["accepted"]
            o_sat = run_ours(sat)["accepted"]
            print(f"{topo} {traffic}: saturation BookSim {b_sat} netweave {o_sat:.4f}", file=sys.stderr)
            zero_load = None
            for i, frac in enumerate(fractions):
                rate = round(frac * b_sat / base["packet_size"], 5)
                cfg = {**base, "sim_type": "latency", "injection_rate": rate}
                b = run_booksim(binary, cfg)
                o = run_ours(cfg)
                print(f"  load {rate}: BookSim {b['latency']} netweave {o['latency']}", file=sys.stderr)
                sat_cells = [f"{b_sat:.4f}", f"{o_sat:.4f}", pct(o_sat, b_sat)] if i == 0 else ["", "", ""]
                if i == 0:
                    zero_load = b["latency"]
                # Past saturation (BookSim unstable or over twice its light-load latency) the
                # latencies are not steady-state and are shown for information only.
                past = b["latency"] is None or (zero_load is not None and b["latency"] > 2 * zero_load)
                rows.append(
                    f"| {topo} 8x8 | {traffic} | {rate:g} ({int(frac * 100)} %) | "
                    f"{b['latency'] if b['latency'] is not None else 'unstable'} | "
                    f"{o['latency']:.2f} | {pct(o['latency'], b['latency'])}{' (past saturation)' if past else ''} | "
                    + " | ".join(sat_cells) + " |"
                )
    return rows


def speed(binary: str) -> list[str]:
    b = run_booksim(binary, SPEED)
    o = run_ours(SPEED)
    b_rate = b["cycles"] / b["cpu"]
    o_rate = o["cycles"] / o["cpu"]
    return [
        "| simulator | cycles | packet latency | accepted flits/host/cycle | CPU s | wall s | cycles per CPU s |",
        "|---|---|---|---|---|---|---|",
        f"| BookSim2 | {b['cycles']:.0f} | {b['latency']} | {b['accepted']} | {b['cpu']:.2f} | {b['wall']:.2f} | {b_rate:,.0f} |",
        f"| netweave | {o['cycles']} | {o['latency']:.2f} | {o['accepted']:.4f} | {o['cpu']:.2f} | {o['wall']:.2f} | {o_rate:,.0f} |",
        f"\nspeed ratio (cycles per CPU second): **{o_rate / b_rate:.1f}x**",
    ]


def memory() -> str:
    """Peak RSS of a 32x32 torus run in a fresh interpreter."""
    code = (
        "import netweave.flitsim as fs, resource, json;"
        "fs.simulate({'k': 32, 'n': 2, 'packet_size': 10, 'injection_rate': 0.003,"
        " 'sample_period': 500, 'warmup_periods': 1, 'max_samples': 3});"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return f"32x32 torus (1,024 hosts, 10-flit packets): peak RSS {int(out.strip()) / 1024:.0f} MiB (limit 1,024 MiB)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("booksim", help="path to the BookSim2 binary")
    ap.add_argument("--quick", action="store_true", help="fewer cases")
    ap.add_argument("--skip-validation", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args()
    if not Path(args.booksim).is_file():
        sys.exit(f"error: BookSim binary not found: {args.booksim}")
    if not args.skip_speed:
        print("\n".join(speed(args.booksim)))
        print(memory())
    if not args.skip_validation:
        print("\n".join(validation(args.booksim, args.quick)))


if __name__ == "__main__":
    main()
