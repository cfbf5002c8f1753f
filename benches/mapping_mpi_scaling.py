"""Scaling of `netweave map --mpi` with 1, 2 and 4 processes at a fixed time budget.

Every run maps the same job — paper 003's case by default, the 4,096-rank Bruck allgather on a
16x16x16 torus under dimension-order routes — from the same BISEM start, with the same seed and
annealing budget, under `mpirun -n N netweave map … --mpi`. Each process runs `--replicas`
tempering chains (threads) on its slice of one temperature ladder and neighbouring processes
exchange states after every round. The table gives, per process count, the cost reached when
the budget ran out, the evaluations per second in total and per process, and the gain over the
one-process run. More processes than cores oversubscribe: the total rate can then only stay
flat, and what more processes can still buy is a longer ladder (more chains exploring at once).

    python benches/mapping_mpi_scaling.py [--procs 1,2,4] [--time 20] [--replicas 1]

Needs Open MPI's `mpirun` and mpi4py; prints a note and exits if either is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import netweave


def run(mpirun: str, procs: int, topo: Path, args) -> dict:
    exe = Path(sys.executable).parent / "netweave"
    cmd = [mpirun, "-n", str(procs), "--oversubscribe", "--bind-to", "none", str(exe), "map", str(topo),
           "dor:low-port", args.pattern, "--mpi", "--cost", args.cost, "--time", str(args.time),
           "--replicas", str(args.replicas), "--start", "bisem", "--seed", str(args.seed), "--json"]
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1",
           # Waiting processes yield the core instead of spinning: the cores are shared.
           "OMPI_MCA_mpi_yield_when_idle": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.time * 10 + 600)
    if proc.returncode != 0:
        raise SystemExit(f"mpirun -n {procs} failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", default="1,2,4", help="comma-separated process counts")
    ap.add_argument("--time", type=float, default=20.0, help="annealing budget per run in seconds")
    ap.add_argument("--replicas", type=int, default=1, help="tempering chains (threads) per process")
    ap.add_argument("--torus", default="16x16x16", help="torus shape")
    ap.add_argument("--pattern", default="bruck:4096:2048", help="pattern spec")
    ap.add_argument("--cost", default="hops_x_max_channel", help="objective")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    mpirun = shutil.which("mpirun")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        mpirun = None
    if mpirun is None:
        print("mpirun or mpi4py not found (Debian's openmpi-bin, pip mpi4py); nothing to measure")
        return
    procs = [int(p) for p in args.procs.split(",")]
    print(f"{args.pattern} on a {args.torus} torus, cost {args.cost}, {args.time:g} s of annealing, "
          f"{args.replicas} chain(s) per process, {os.cpu_count()} cores")
    print(f"{'procs':>5}{'chains':>7}{'start':>14}{'reached':>14}{'gain':>8}{'evals':>12}"
          f"{'evals/s':>10}{'per proc':>10}{'vs 1 proc':>10}")
    with tempfile.TemporaryDirectory() as d:
        topo = Path(d) / "torus.json"
        netweave.topology.save(netweave.topology.torus(netweave.topology.parse_dims(args.torus)), topo)
        base_rate = None
        for n in procs:
            s = run(mpirun, n, topo, args)
            rate = s["evaluations"] / s["seconds"] if s["seconds"] > 0 else 0.0
            base_rate = base_rate or rate
            print(f"{n:>5}{n * args.replicas:>7}{s['start_value']:>14.5g}{s['value']:>14.5g}"
                  f"{s['start_value'] / s['value']:>7.3f}x{s['evaluations']:>12,}{rate:>10,.0f}"
                  f"{rate / n:>10,.0f}{rate / base_rate:>9.2f}x")


if __name__ == "__main__":
    main()
