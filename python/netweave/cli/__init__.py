"""The ``netweave`` command line: one sub-command per pipeline stage, plus ``plan``.

Each stage's commands live in their own module here; this one assembles them and turns bad
input into one line on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from netweave import parallel
from netweave._core import NetweaveError
from netweave.cli import analyze, common, emulate, mpi, plan, reproduce, route, run, schedule, simulate, topo
from netweave.cli import map as map_cli
from netweave.cli.common import UserError

app = typer.Typer(
    help="netweave: an interconnect lab for HPC cluster networks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _global_options(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display (never shown on a pipe or with --json "
                               "anyway); accepted after the command too."),
) -> None:
    common.quiet = quiet


app.add_typer(topo.app, name="topo")
app.add_typer(route.app, name="route")
app.command("schedule")(schedule.schedule_cmd)
app.command("map")(map_cli.map_cmd)
app.command("analyze")(analyze.analyze_cmd)
app.add_typer(simulate.app, name="simulate")
app.command("plan")(plan.plan_cmd)
app.add_typer(reproduce.app, name="reproduce")
app.command("run")(run.run_cmd)
app.add_typer(emulate.app, name="emulate")
app.add_typer(mpi.app, name="mpi")


def main() -> None:
    """Entry point: run the app, turning input errors into one line and exit code 2."""
    _hoist_quiet(sys.argv)
    # `map --mpi` and `simulate flit --mpi` run on every process, which cooperate themselves.
    spmd = _command(sys.argv) in _SPMD_COMMANDS or "--mpi" in sys.argv
    if parallel.mpi_processes() > 1 and not spmd:
        # Under mpirun: process 0 runs the command, the others run the tasks it spreads.
        with parallel.spread_over_mpi() as leader:
            if leader:
                _run()
        return
    _run()


#: Commands whose processes cooperate by themselves under mpirun (`map --mpi`; with `--mpi`,
#: `simulate flit` too).
_SPMD_COMMANDS = {"map"}


def _command(argv: list[str]) -> Optional[str]:
    return next((w for w in argv[1:] if not w.startswith("-")), None)


def _run() -> None:
    """Run the command line, turning input errors into one line and exit code 2."""
    try:
        # Not standalone: usage errors come back as exceptions instead of a multi-line panel.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:  # a command ended with typer.Exit(code)
            sys.exit(code)
    except typer.TyperException as e:  # unknown command, missing or malformed option
        context = getattr(e, "ctx", None)
        if e.format_message():
            hint = f" (see '{context.command_path} --help')" if context is not None else ""
            _fail(e.format_message() + hint)
        sys.exit(2)  # the help text was already printed (a group called without a command)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except (NetweaveError, UserError) as e:
        _fail(str(e))
    except OverflowError:
        _fail("a number is out of range for this parameter (sizes are 32-bit, seeds 64-bit)")
    except OSError as e:
        _fail(f"{e.strerror or e}: {e.filename}" if e.filename else str(e))


def _hoist_quiet(argv: list[str]) -> None:
    """Move ``--quiet``/``-q`` given after the command to the front, where the option lives, so
    ``netweave plan --quiet`` works; words after ``--`` belong to another program."""
    end = argv.index("--") if "--" in argv else len(argv)
    flags = [i for i in range(1, end) if argv[i] in ("--quiet", "-q")]
    for i in reversed(flags):
        del argv[i]
    if flags:
        argv.insert(1, "--quiet")


def _fail(message: str) -> None:
    # Plain text, not rich: the message must stay on one line whatever the terminal width. One
    # write, so processes of an MPI job sharing stderr cannot split each other's lines.
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    sys.exit(2)


if __name__ == "__main__":
    main()
