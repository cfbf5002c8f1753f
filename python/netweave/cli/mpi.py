"""`netweave mpi`: run MPI programs with netweave's schedules inside their collectives."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from netweave import mpi
from netweave.cli.common import JsonOpt, UserError, working

app = typer.Typer(
    help="netweave's schedules inside MPI_Alltoall, MPI_Allgather and MPI_Gather of an unchanged program "
         "(PMPI library; see docs/mpi-runtime.md).",
    no_args_is_help=True,
)

ImplOpt = typer.Option("openmpi", "--mpi", help="MPI implementation: openmpi or mpich.")
ExecutorOpt = typer.Option(None, "--executor", help="Override the schedule's executor: auto, sync, async, local-sync.")


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run_cmd(
    ctx: typer.Context,
    np_: int = typer.Option(..., "-np", "--np", help="Number of ranks."),
    schedule: Path = typer.Option(..., "--schedule", help="A schedule file (.nws) or a directory of <collective>-<ranks>.nws."),
    implementation: str = ImplOpt,
    executor: Optional[str] = ExecutorOpt,
    concurrent_sends: Optional[int] = typer.Option(None, "--concurrent-sends", help="Sends in flight for the async executor."),
    verbose: bool = typer.Option(False, "--verbose", help="Say per communicator which schedule runs, or why the native one does."),
    timeout: float = typer.Option(3600.0, "--timeout", help="Kill every rank after this many seconds."),
) -> None:
    """Run `-- PROGRAM ARGS` under mpirun with the library preloaded; exits with its status."""
    program = [a for a in ctx.args if a != "--"]
    if not program:
        raise UserError("name the program after --, e.g. netweave mpi run -np 4 --schedule a.nws -- ./app")
    env = mpi.settings(schedule, executor, concurrent_sends, verbose)
    proc = mpi.run(mpi.command(implementation, np_, program, env=env), timeout)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    raise typer.Exit(proc.returncode)


@app.command("bench")
def bench_cmd(
    schedules: list[Path] = typer.Argument(None, metavar="SCHEDULE...", help="Schedule files (or directories) to time against native."),
    np_: int = typer.Option(8, "-np", "--np", help="Number of ranks."),
    collective: str = typer.Option("alltoall", "--collective", help="alltoall, allgather or gather."),
    sizes: str = typer.Option("1,1024,65536,1048576", "--sizes", help="Bytes per pair, comma-separated (1 B ... 16 MiB)."),
    reps: int = typer.Option(20, "--reps", min=1, help="Timed repetitions per size."),
    warmup: int = typer.Option(3, "--warmup", min=0, help="Untimed calls before timing."),
    implementation: str = ImplOpt,
    executor: Optional[str] = ExecutorOpt,
    out: Optional[Path] = typer.Option(None, "--out", help="Write bench.json and bench.png here."),
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
        raise UserError(f"--sizes must be integers separated by commas, got '{sizes}'")
    with working(f"timing {collective} on {np_} ranks", as_json):
        report = mpi.bench(implementation, np_, collective, schedules or [], byte_sizes, reps, warmup,
                           executor=executor)
    fell_back = mpi.fallbacks(report)
    if strict and fell_back:
        raise UserError(f"not timed: {fell_back[0]}")
    for line in fell_back:
        print(f"warning: {line}", file=sys.stderr)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench.json").write_text(json.dumps(report, indent=1))
        mpi.plot_bench(report, out / "bench.png")
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
