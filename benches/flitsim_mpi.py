"""One flit simulation split over the processes of an MPI job: speed against one process, and
the mail per cycle that a many-machine run would carry.

    .venv/bin/python benches/flitsim_mpi.py [--ranks 1,2,4] [--repeat 2]

Cases: the BookSim comparison's 16×16 torus (uniform, 0.007 packets/cycle, 10-flit packets)
and the same on a 32×32 torus. The peer is the same simulation in one process on one thread,
timed in this run; each rank count then runs it with ``mpirun -n P netweave simulate flit
--mpi`` (Open MPI, ranks on one thread each; past the machine's cores they are
oversubscribed, and the table says so). The wall time excludes start-up: it is the run's own,
timed on rank 0 around the simulation. Every split result must equal the one-process result
field for field (the benchmark checks).

Per case and rank count it prints cycles per second, the speed-up over one process, the
exchanges (one per lookahead window, plus syncs), the bytes all ranks sent per cycle and the
wall time per exchange beyond the work per cycle one process does — the synchronisation cost
a run pays per window.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netweave import flitsim

SPEED = {"topology": "torus", "n": 2, "routing_function": "dim_order", "num_vcs": 2, "vc_buf_size": 8,
         "packet_size": 10, "traffic": "uniform", "injection_rate": 0.007, "sample_period": 10000}
CASES = {"torus 16x16": {**SPEED, "k": 16}, "torus 32x32": {**SPEED, "k": 32, "sample_period": 4000}}

#: Run under mpirun: time the split run on every rank, report from rank 0.
RANK_SCRIPT = """
import json, sys, time
from mpi4py import MPI
from netweave import flitsim
cfg = json.loads(sys.argv[1])
comm = MPI.COMM_WORLD
comm.Barrier()
t0 = time.perf_counter()
result, part = flitsim.simulate_mpi(cfg, comm=comm)
wall = time.perf_counter() - t0
sent = comm.gather(part["bytes_sent"], root=0)
if comm.Get_rank() == 0:
    print(json.dumps({"wall": wall, "result": result, "partition": {**part, "bytes_sent": sum(sent)}}))
"""


def split_run(cfg: dict, ranks: int, script: Path) -> dict:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise SystemExit("mpirun not found: `make setup` installs Open MPI")
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    proc = subprocess.run([mpirun, "-n", str(ranks), "--oversubscribe", "--bind-to", "none", sys.executable,
                           str(script), json.dumps(cfg)], capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"mpirun -n {ranks} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1,2,4", help="rank counts to run")
    ap.add_argument("--repeat", type=int, default=2, help="best wall time of this many runs")
    args = ap.parse_args()
    counts = [int(r) for r in args.ranks.split(",")]
    cores = os.cpu_count() or 1
    print(f"{'case':<13}{'ranks':>6}{'cycles':>8}{'wall s':>8}{'cycles/s':>10}{'speed-up':>9}{'exchanges':>10}"
          f"{'B/cycle':>9}{'µs/exch':>9}  note")
    with tempfile.TemporaryDirectory(prefix="netweave-bench-") as tmp:
        script = Path(tmp) / "rank.py"
        script.write_text(RANK_SCRIPT)
        for name, cfg in CASES.items():
            one_wall, one = float("inf"), None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                one = flitsim.simulate({**cfg, "threads": 1})
                one_wall = min(one_wall, time.perf_counter() - t0)
            cycles = one["cycles"]
            print(f"{name:<13}{'1 proc':>6}{cycles:>8}{one_wall:>8.2f}{cycles / one_wall:>10,.0f}{1.0:>9.2f}", flush=True)
            for ranks in counts:
                runs = [split_run(cfg, ranks, script) for _ in range(args.repeat)]
                best = min(runs, key=lambda r: r["wall"])
                if any(r["result"] != one for r in runs):
                    raise SystemExit(f"{name}: {ranks} ranks gave a different result than one process")
                part, wall = best["partition"], best["wall"]
                # Wall beyond one process's share of the work, per exchange: what a window's
                # swap costs (it is the whole gap, so it includes load imbalance).
                per_exchange = (wall - one_wall / ranks) / part["exchanges"] * 1e6
                note = f"oversubscribed ({cores} cores)" if ranks > cores else ""
                note += f" cut {part['cut_channels']}/{part['switch_channels']}, lookahead {part['lookahead']}"
                print(f"{name:<13}{ranks:>6}{cycles:>8}{wall:>8.2f}{cycles / wall:>10,.0f}{one_wall / wall:>9.2f}"
                      f"{part['exchanges']:>10,}{part['bytes_sent'] / cycles:>9,.0f}{per_exchange:>9.1f}  {note.strip()}",
                      flush=True)


if __name__ == "__main__":
    main()
