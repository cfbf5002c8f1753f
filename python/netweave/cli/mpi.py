"""`netweave mpi`: run MPI programs with netweave's schedules inside their collectives."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from netweave.cli.common import JsonOpt, UserError, working
from netweave.run import mpi
from netweave.stages import flowsim
from netweave.support import files

app = typer.Typer(
    help="netweave's schedules inside MPI_Alltoall, MPI_Allgather and MPI_Gather of an unchanged program "
         "(PMPI library; see docs/mpi-runtime.md).",
    no_args_is_help=True,
)

def _check_schedules(paths: list[Path]) -> None:
    """Read every schedule file before mpirun starts, so a missing, unreadable or malformed one
    is one line naming it (not one error per rank); directories are looked up by the library."""
    for path in paths:
        if path.is_dir():
            continue
        flowsim.load_workload(path)


ImplOpt = typer.Option("openmpi", "--mpi", help="MPI implementation: openmpi or mpich.")
ExecutorOpt = typer.Option(None, "--executor", help="Override the schedule's executor: auto, sync, async, local-sync.")


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run_cmd(
    ctx: typer.Context,
    np_: int = typer.Option(..., "-np", "--np", help="Number of ranks."),
    schedule: Path = typer.Option(..., "--schedule", help="A schedule file (.nws) or a directory of <collective>-<ranks>.nws."),
    implementation: str = ImplOpt,
    executor: str | None = ExecutorOpt,
    concurrent_sends: int | None = typer.Option(None, "--concurrent-sends", help="Sends in flight for the async executor."),
    verbose: bool = typer.Option(False, "--verbose", help="Say per communicator which schedule runs, or why the native one does."),
    timeout: float = typer.Option(3600.0, "--timeout", help="Kill every rank after this many seconds."),
) -> None:
    """Run `-- PROGRAM ARGS` under mpirun with the library preloaded; exits with its status."""
    program = [a for a in ctx.args if a != "--"]
    if not program:
        raise UserError("name the program after --, e.g. netweave mpi run -np 4 --schedule a.nws -- ./app")
    _check_schedules([schedule])
    env = mpi.settings(schedule, executor, concurrent_sends, verbose)
    proc = mpi.run(mpi.command(implementation, np_, program, env=env), timeout)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    raise typer.Exit(proc.returncode)


#: The topology-free algorithm `mpi schedules` writes per collective unless told otherwise:
#: pairwise exchange, ring and binomial tree (each rank sends one block per phase).
SCHEDULE_DEFAULTS = {"alltoall": "shift", "allgather": "ring", "gather": "binomial"}


def parse_rank_counts(text: str) -> list[int]:
    """Communicator sizes from ``8``, ``2-64`` or ``2,4,8-16``: each at least 1, in order, once."""
    sizes: list[int] = []
    for item in (t.strip() for t in text.split(",")):
        low, dash, high = item.partition("-")
        try:
            first, last = (int(low), int(high)) if dash else (int(item), int(item))
        except ValueError:
            raise UserError(f"--ranks '{text}': use N, A-B or a comma list such as 2,4,8-16") from None
        if first < 1 or last < first:
            raise UserError(f"--ranks '{item}': communicator sizes start at 1 and a range runs upwards")
        sizes += [n for n in range(first, last + 1) if n not in sizes]
    return sizes


_ALGO_HELP = ("COLLECTIVE=ALGORITHM, a topology-free one (default: "
              + ", ".join(f"{c}={a}" for c, a in SCHEDULE_DEFAULTS.items()) + "); repeatable.")


@app.command("schedules")
def schedules_cmd(
    ranks: str = typer.Option(..., "--ranks", help="Communicator sizes: N, A-B or a comma list (2-64, 2,4,8-16)."),
    out: Path = typer.Option(..., "--out", help="Directory to fill with <collective>-<ranks>.nws (NETWEAVE_SCHEDULE=DIR)."),
    collectives: str = typer.Option("alltoall,allgather,gather", "--collectives", help="Which collectives, comma-separated."),
    algo: list[str] = typer.Option([], "--algo", help=_ALGO_HELP),
    root: int = typer.Option(0, "--root", min=0, help="Root rank of the gather schedules (a call with another root runs the native gather)."),
    executor: str = typer.Option("auto", "--executor", help="Executor the files ask the library for: auto, sync, async, local-sync."),
    as_json: bool = JsonOpt,
) -> None:
    """Write a schedule directory for communicators of every size in --ranks: the library looks up
    <collective>-<size>.nws there for each communicator, so one directory serves MPI_COMM_WORLD and
    every split of it. Topology-free algorithms: rank r is process r."""
    from netweave._core import NetweaveError
    from netweave.stages import traffic

    sizes = parse_rank_counts(ranks)
    chosen = dict(SCHEDULE_DEFAULTS)
    for item in algo:
        collective, eq, name = item.partition("=")
        if not eq or collective not in SCHEDULE_DEFAULTS:
            raise UserError(f"--algo '{item}': use COLLECTIVE=ALGORITHM with COLLECTIVE one of {', '.join(SCHEDULE_DEFAULTS)}")
        chosen[collective] = name
    wanted = [c.strip() for c in collectives.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in SCHEDULE_DEFAULTS]
    if unknown or not wanted:
        raise UserError(f"--collectives '{collectives}': choose among {', '.join(SCHEDULE_DEFAULTS)}")
    if root >= min(sizes):
        raise UserError(f"--root {root} is no rank of a {min(sizes)}-rank communicator (valid: 0..{min(sizes) - 1})")
    names = [f"{c}-{n}.nws" for c in wanted for n in sizes]
    files.check_dir(out, names)
    written, skipped = [], []
    with working(f"building {len(names)} schedules", as_json):
        built = []
        for collective in wanted:
            for n in sizes:
                try:
                    built.append((f"{collective}-{n}.nws", traffic.build(collective, chosen[collective], num_ranks=n,
                                                                         root=root if collective == "gather" else None)))
                except NetweaveError as e:
                    skipped.append({"file": f"{collective}-{n}.nws", "reason": str(e)})
        if not built:
            raise UserError(f"no schedule could be built: {skipped[0]['reason']}")
        files.ensure_dir(out, names)
        for name, schedule in built:
            traffic.save(schedule, out / name, executor)
            written.append(name)
    summary = {"directory": str(out), "algorithms": {c: chosen[c] for c in wanted}, "written": written, "skipped": skipped}
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return
    print(f"wrote {len(written)} schedules into {out} ({', '.join(f'{c} {chosen[c]}' for c in wanted)}); "
          f"use: netweave mpi run --schedule {out} …, or NETWEAVE_SCHEDULE={out}")
    for s in skipped:
        print(f"  no {s['file']}: {s['reason']} (that size runs the native collective)", file=sys.stderr)


@app.command("bench")
def bench_cmd(
    schedules: list[Path] = typer.Argument(None, metavar="SCHEDULE...", help="Schedule files (or directories) to time against native."),
    np_: int = typer.Option(8, "-np", "--np", help="Number of ranks."),
    collective: str = typer.Option("alltoall", "--collective", help="alltoall, allgather or gather."),
    sizes: str = typer.Option("1,1024,65536,1048576", "--sizes", help="Bytes per pair, comma-separated (1 B ... 16 MiB)."),
    reps: int = typer.Option(20, "--reps", min=1, help="Timed repetitions per size."),
    warmup: int = typer.Option(3, "--warmup", min=0, help="Untimed calls before timing."),
    implementation: str = ImplOpt,
    executor: str | None = ExecutorOpt,
    out: Path | None = typer.Option(None, "--out", help="Write bench.json and bench.png here."),
    strict: bool = typer.Option(False, "--strict", help="Fail (exit 2) when a schedule fell back to the native collective."),
    as_json: bool = JsonOpt,
) -> None:
    """Time the native collective and each SCHEDULE in one MPI run (IMB-style: min/avg/max over
    ranks of each rank's average; every received byte checked once per size).

    A schedule that does not apply to the run (another -np, collective or root) runs the native
    collective instead: its column is marked NATIVE, the JSON says ``"fell_back": true`` with
    the library's reason, and a line on stderr says so; --strict makes that an error."""
    try:
        byte_sizes = [int(s) for s in sizes.split(",")]
    except ValueError:
        raise UserError(f"--sizes must be integers separated by commas, got '{sizes}'") from None
    for size in byte_sizes:
        if not 1 <= size <= 16 << 20:
            raise UserError(f"--sizes: {size} bytes is outside 1 B ... 16 MiB")
    _check_schedules(schedules or [])
    if out is not None:
        files.check_dir(out, ["bench.json", "bench.png"])  # before the MPI run, not after it
    with working(f"timing {collective} on {np_} ranks", as_json):
        report = mpi.bench(implementation, np_, collective, schedules or [], byte_sizes, reps, warmup,
                           executor=executor)
    fell_back = mpi.fallbacks(report)
    if strict and fell_back:
        raise UserError(f"not timed: {fell_back[0]}")
    for line in fell_back:
        print(f"warning: {line}", file=sys.stderr)
    if out is not None:
        files.ensure_dir(out)
        files.write_text(out / "bench.json", json.dumps(report, indent=1))
        files.write_with(out / "bench.png", lambda partial: mpi.plot_bench(report, partial))
    if as_json:
        print(json.dumps(report, indent=2))
        return
    print(f"{collective} on {np_} ranks, {report['library'][:60]}")
    header = ["bytes", "native us"] + [Path(s["schedule"]).name + (" NATIVE" if s.get("fell_back") else "") + " us"
                                       for s in report["schedules"]]
    print("  ".join(f"{h:>18}" for h in header))
    for i, row in enumerate(report["results"]):
        cells = [row["bytes"], row["avg_s"] * 1e6] + [s["results"][i]["avg_s"] * 1e6 for s in report["schedules"]]
        print("  ".join(f"{c:>18.2f}" if isinstance(c, float) else f"{c:>18}" for c in cells))
    if out is not None:
        print(f"wrote {out / 'bench.json'} and {out / 'bench.png'}")
