"""The MPI runtime against the MPI libraries' own collectives, in one `nwbench` run each.

    .venv/bin/python benches/mpi_runtime.py [--impls openmpi,mpich] [--transports sm,tcp]
                                            [--ranks 8,16] [--reps 20] [--rounds 5] [--schedules]
                                            [--out DIR]

Per MPI implementation and transport (shared memory; TCP on loopback — Open MPI
``--mca btl tcp,self``, MPICH ``UCX_TLS=tcp,self``):

1. **Interposition overhead.** The native all-to-all forced to its pairwise algorithm (Open MPI
   ``coll_tuned_alltoall_algorithm 2``, MPICH ``MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=pairwise``)
   against netweave's shift schedule run local-sync — the same exchange, step for step — at 1 B
   and 1 MiB per pair, --rounds times each, interleaved in one run (native, shift, native,
   shift, …; medians reported, and the ratio of the fastest rounds: single measurements on a
   shared 2-core machine swing by ±10 % and more). On
   2 ranks (one per core: the 1-byte difference is the library's cost per call, not a
   scheduler's artefact) and on each of --ranks (8 and 16: oversubscribed). Reported: our time
   / native at 1 B and 1 MiB, and our time − native at 1 B. Every call is checked to have run
   the schedule (nwbench's "ran" counts).
2. With --schedules, **schedules against native**: the native all-to-all as the library picks
   it, against shift, Bruck and paper 000's LSFT sub-cluster schedule (n·k·m = 2·2·2 on LSFT(2)
   for 8 ranks, 4·2·2 on LSFT(4) for 16), from 1 B to 1 MiB per pair.

Times are nwbench's: each rank's average over the timed calls between barriers, averaged over
ranks (IMB's t_avg). Ranks beyond the 2 cores are oversubscribed, so absolute times at 8 and 16
ranks are the machine's, not a cluster's; ratios within one run are what to read. TCP runs at
16 ranks move 240 MiB per 1 MiB call through loopback: they use --reps-tcp repetitions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from netweave import topology, traffic
from netweave.run import mpi

TRANSPORT = {
    ("openmpi", "sm"): ({}, []), ("openmpi", "tcp"): ({}, ["--mca", "btl", "tcp,self"]),
    ("mpich", "sm"): ({}, []), ("mpich", "tcp"): ({"UCX_TLS": "tcp,self"}, []),
}
PAIRWISE = {
    "openmpi": ({}, ["--mca", "coll_tuned_use_dynamic_rules", "1", "--mca", "coll_tuned_alltoall_algorithm", "2"]),
    "mpich": ({"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": "pairwise"}, []),
}


def lsft_partial(ranks: int):
    order = {8: 2, 16: 4}.get(ranks)
    if order is None:
        return None
    return traffic.build("alltoall", "lsft-partial", topology=topology.lsft(order), k=2, m=2, bytes=1024)


def avg(report: dict, which: int, nbytes: int) -> float:
    rows = report["results"] if which < 0 else report["schedules"][which]["results"]
    return next(r["avg_s"] for r in rows if r["bytes"] == nbytes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impls", default="openmpi,mpich")
    ap.add_argument("--transports", default="sm,tcp")
    ap.add_argument("--ranks", default="8,16")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--reps-tcp", type=int, default=6, help="repetitions over TCP at 8 ranks and more")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved overhead measurements per case (median reported)")
    ap.add_argument("--schedules", action="store_true", help="also time shift, Bruck and LSFT against native")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nw-mpibench-") as scratch:
        results = measure(args, Path(scratch))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "mpi_runtime.json").write_text(json.dumps(results, indent=1))
    return 0


def overhead(args: argparse.Namespace, tmp: Path, impl: str, transport: str, n: int) -> dict:
    """Shift run local-sync against the native pairwise exchange on `n` ranks, interleaved."""
    env, launcher = TRANSPORT[(impl, transport)]
    penv, plauncher = PAIRWISE[impl]
    shift = tmp / f"shift-{n}.nws"
    traffic.save(traffic.build("alltoall", "shift", num_ranks=n, bytes=1024), shift, executor="local-sync")
    order = [shift, "native"] * (args.rounds - 1) + [shift]  # nwbench measures native first
    reps = 200 if n == 2 else args.reps_tcp if transport == "tcp" else args.reps
    rep = mpi.bench(impl, n, "alltoall", order, [1, 1 << 20], reps=reps, warmup=3, check=True,
                    env={**env, **penv}, launcher_args=launcher + plauncher, timeout=3600)
    if mpi.fallbacks(rep):
        raise SystemExit(f"the shift schedule did not run: {mpi.fallbacks(rep)[0]}")
    runs = {"native": [-1] + [i for i, o in enumerate(order) if o == "native"],
            "shift": [i for i, o in enumerate(order) if o != "native"]}
    med = lambda which, size: statistics.median(avg(rep, i, size) for i in runs[which])  # noqa: E731
    best = lambda which, size: min(avg(rep, i, size) for i in runs[which])  # noqa: E731
    row = {"kind": "overhead", "impl": impl, "transport": transport, "ranks": n, "reps": reps, "rounds": args.rounds,
           "native_pairwise_1B_us": med("native", 1) * 1e6, "shift_1B_us": med("shift", 1) * 1e6,
           "native_pairwise_1MiB_ms": med("native", 1 << 20) * 1e3, "shift_1MiB_ms": med("shift", 1 << 20) * 1e3}
    row["extra_1B_us"] = row["shift_1B_us"] - row["native_pairwise_1B_us"]
    row["ratio_1B"] = row["shift_1B_us"] / row["native_pairwise_1B_us"]
    row["ratio_1MiB"] = row["shift_1MiB_ms"] / row["native_pairwise_1MiB_ms"]
    # The fastest round of each: what the code costs when the machine's other load leaves it alone.
    row["best_ratio_1B"] = best("shift", 1) / best("native", 1)
    row["best_ratio_1MiB"] = best("shift", 1 << 20) / best("native", 1 << 20)
    row["best_extra_1B_us"] = (best("shift", 1) - best("native", 1)) * 1e6
    print(f"{impl:8} {transport:4} {n:3} ranks  overhead: 1 B {row['shift_1B_us']:10.2f} us vs pairwise "
          f"{row['native_pairwise_1B_us']:10.2f} us ({row['extra_1B_us']:+.2f} us, x{row['ratio_1B']:.3f}); 1 MiB "
          f"{row['shift_1MiB_ms']:.3f} ms vs {row['native_pairwise_1MiB_ms']:.3f} ms (x{row['ratio_1MiB']:.3f}); "
          f"fastest rounds: 1 B {row['best_extra_1B_us']:+.2f} us (x{row['best_ratio_1B']:.3f}), "
          f"1 MiB x{row['best_ratio_1MiB']:.3f}", flush=True)
    return row


def measure(args: argparse.Namespace, tmp: Path) -> list[dict]:
    """Every table's rows, the schedules written under `tmp`."""
    results = []
    ranks = [int(x) for x in args.ranks.split(",")]
    for impl in args.impls.split(","):
        for transport in args.transports.split(","):
            env, launcher = TRANSPORT[(impl, transport)]
            for n in [2] + ranks:
                results.append(overhead(args, tmp, impl, transport, n))
            for n in (ranks if args.schedules else []):
                files = []
                for name, sched in (("shift", traffic.build("alltoall", "shift", num_ranks=n, bytes=1024)),
                                    ("bruck", traffic.build("alltoall", "bruck", num_ranks=n, bytes=1024)),
                                    ("lsft", lsft_partial(n))):
                    if sched is not None:
                        files.append(tmp / f"{name}-{n}.nws")
                        traffic.save(sched, files[-1])
                sizes = [1, 1024, 65536, 1 << 20]
                rep = mpi.bench(impl, n, "alltoall", files, sizes, reps=args.reps, warmup=3, check=True, env=env,
                                launcher_args=launcher, timeout=3600)
                for size in sizes:
                    row = {"kind": "schedules", "impl": impl, "transport": transport, "ranks": n, "bytes": size,
                           "native_us": avg(rep, -1, size) * 1e6}
                    for i, f in enumerate(files):
                        row[f.stem.rsplit("-", 1)[0] + "_us"] = avg(rep, i, size) * 1e6
                    results.append(row)
                    cells = "  ".join(f"{k[:-3]} {v:10.1f}" for k, v in row.items() if k.endswith("_us"))
                    print(f"{impl:8} {transport:4} {n:3} ranks {size:>8} B  {cells}", flush=True)
    return results


if __name__ == "__main__":
    sys.exit(main())
