"""The native MPI model against the emulated cluster, one library call at a time: Open MPI's and
MPICH's own `MPI_Gather` and `MPI_Alltoall` (`nwbench`) on a one-switch star, beside the native
model's prediction (`traffic::native_mpi` run by the flow model as `plan` runs it), with the
packets the fabric dropped, the segments TCP retransmitted and the retransmission timeouts
that fired during each run.

    python benches/native_mpi_fidelity.py [--hosts 8,16] [--sizes 1,16384,131072,1048576]
        [--collectives gather,alltoall] [--libraries openmpi,mpich] [--scale 0.05] [--reps 3]
        [--openmpi-alltoall pairwise] [--env NAME=VALUE ...] [--calibration FILE] [--out FILE]

Size 1 (one byte per rank) has no prediction worth the name: it measures what a call costs
when the network carries nothing, the per-call floor of each library on this machine.
`--openmpi-alltoall pairwise` forces Open MPI's pairwise all-to-all (`coll_tuned` dynamic
rules) and predicts it as the shift it is: the same schedule MPICH runs above 32 KiB per pair,
so the two libraries can be set side by side on one schedule. `--env` sets a variable for every
rank (e.g. `UCX_RNDV_THRESH=inf`: MPICH's messages all eager, no rendezvous). `--calibration`
adds a column predicted as `plan --calibration` predicts the native rows: with the file's
parameters and, for a library it measured, that library's host cost (`netweave.plan.predict_native`).
Needs root (network namespaces);
the fabric is removed however the run ends. The machine's load average is printed with every
row: emulated times depend on it.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

from netweave import plan, topology
from netweave._core import NetweaveError
from netweave.run import emulate, mpi
from netweave.stages import routing, traffic

GIGABIT, LAN_NS = 1.0, 5_000.0
#: Open MPI's `coll_tuned_alltoall_algorithm` numbers for the algorithms this bench can force.
OPEN_MPI_ALLTOALL_ALGORITHMS = {"pairwise": "2"}


def load_average() -> float:
    """The one-minute load average."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def predicted(topo, routes, library: str, collective: str, placed: list[int], nbytes: int,
              forced: str | None, calibration: Path | None = None) -> tuple[float, str]:
    """The native model's time for one call on `routes` (`topo` scaled as the emulation runs) and the
    schedule's name, with `calibration` as `plan` uses it; a forced Open MPI pairwise all-to-all is
    predicted as the shift it is (no library cost: the calibration measured the default)."""
    if forced == "pairwise":
        sched = traffic.build("alltoall", "shift", topology=topo, hosts=",".join(map(str, placed)), bytes=nbytes)
        return (plan.predict(routes, sched, "local-sync", 1, calibration, emulate.HOST_TCP)["makespan_s"],
                f"alltoall-openmpi-pairwise(N={len(placed)})")
    sched, info = plan.native_workload(library, collective, placed, nbytes)
    return (plan.predict_native(routes, sched, library, info, len(placed), nbytes, calibration,
                                emulate.HOST_TCP)["makespan_s"],
            sched.name)


def measure_star(hosts: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (library, collective, size) of `args` on a star of `hosts` hosts."""
    topo = topology.switch_tree([], hosts, [], [], GIGABIT, LAN_NS)
    routes = routing.route(topo, "updown")
    scaled_topo = emulate.scaled_topology(topo, args.scale)
    scaled = emulate.scaled_routes(routes, scaled_topo)
    placed = list(range(hosts))
    name = "nf" + uuid.uuid4().hex[:10]
    rows = []
    fabric = emulate.up(topo, routes, name, scale=args.scale)
    try:
        for library in args.libraries.split(","):
            for collective in args.collectives.split(","):
                forced = args.openmpi_alltoall if (library, collective) == ("openmpi", "alltoall") else None
                env = dict(args.env_vars)
                if forced is not None:
                    env.update(OMPI_MCA_coll_tuned_use_dynamic_rules="1",
                               OMPI_MCA_coll_tuned_alltoall_algorithm=OPEN_MPI_ALLTOALL_ALGORITHMS[forced])
                for nbytes in (int(s) for s in args.sizes.split(",")):
                    before = fabric.losses()
                    program = mpi.nwbench_program(library, collective, [nbytes], reps=args.reps, warmup=1, check=False)
                    start = time.monotonic()
                    proc = emulate.mpirun(fabric, library, hosts, program, hosts=placed, env=env or None,
                                          done_when=lambda text: text.rstrip().endswith("]}"))
                    wall = time.monotonic() - start
                    after = fabric.losses()
                    row: dict[str, Any] = {"hosts": hosts, "library": library, "collective": collective,
                                           "bytes": nbytes, "scale": args.scale, "env": env, "wall_s": wall,
                                           "load": load_average(),
                                           **{k: after[k] - before[k] for k in after}}
                    try:
                        result = mpi.nwbench_report(proc, f" ({library}, emulated)")["results"][0]
                    except (NetweaveError, json.JSONDecodeError, IndexError, KeyError) as e:
                        row["error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
                    else:
                        row.update(measured_s=result["max_s"], fastest_rank_s=result["min_s"])
                        seconds, schedule = predicted(scaled_topo, scaled, library, collective, placed, nbytes, forced)
                        row.update(predicted_s=seconds, schedule=schedule,
                                   ratio=result["max_s"] / seconds if nbytes >= 16 and seconds > 0 else None)
                        if args.calibration is not None:
                            cal, _name = predicted(scaled_topo, scaled, library, collective, placed, nbytes, forced,
                                                   args.calibration)
                            row.update(predicted_calibrated_s=cal, calibrated_ratio=result["max_s"] / cal)
                    rows.append(row)
                    print(line(row), flush=True)
    finally:
        emulate.down(name)
    return rows


def line(row: dict[str, Any]) -> str:
    """One row as text."""
    head = f"{row['hosts']:>3} {row['library']:<7} {row['collective']:<8} {row['bytes']:>8} B"
    if "error" in row:
        return f"{head}  error: {row['error']}"
    ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
    if "calibrated_ratio" in row:
        ratio += f" (calibrated {row['calibrated_ratio']:.2f})"
    return (f"{head}  measured {row['measured_s'] * 1e3:8.1f} ms  predicted {row['predicted_s'] * 1e3:8.1f} ms  "
            f"ratio {ratio:>5}  drops {row['dropped_packets']:>5}  retransmits {row['retransmitted_segments']:>6}  "
            f"timeouts {row['tcp_timeouts']:>3}  ({row['schedule']}; load {row['load']:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", default="8,16", help="star sizes, comma-separated")
    parser.add_argument("--sizes", default="1,16384,131072,1048576", help="bytes per block, comma-separated")
    parser.add_argument("--collectives", default="gather,alltoall")
    parser.add_argument("--libraries", default="openmpi,mpich")
    parser.add_argument("--scale", type=float, default=0.05, help="link rate x this (0.05: 50 Mbit/s)")
    parser.add_argument("--reps", type=int, default=3, help="timed calls per run (after one warm-up)")
    parser.add_argument("--openmpi-alltoall", choices=sorted(OPEN_MPI_ALLTOALL_ALGORITHMS), default=None,
                        help="force this Open MPI all-to-all algorithm instead of its default")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set this variable for every rank (repeatable)")
    parser.add_argument("--calibration", type=Path, default=None,
                        help="also predict with this calibration file (netweave emulate calibrate)")
    parser.add_argument("--out", type=Path, default=None, help="write every row as JSON here")
    args = parser.parse_args()
    bad = [e for e in args.env if "=" not in e or not e.split("=", 1)[0]]
    if bad:
        parser.error(f"--env {bad[0]}: expected NAME=VALUE")
    args.env_vars = [tuple(e.split("=", 1)) for e in args.env]
    if not args.scale > 0:
        parser.error(f"--scale {args.scale} must be positive")
    if args.reps < 1:
        parser.error(f"--reps {args.reps} must be at least 1")
    print(f"load average {load_average():.1f} at the start", flush=True)
    rows = []
    for hosts in (int(h) for h in args.hosts.split(",")):
        rows += measure_star(hosts, args)
        if args.out is not None:
            args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    try:
        main()
    except NetweaveError as e:
        raise SystemExit(f"native_mpi_fidelity: {e}") from None
