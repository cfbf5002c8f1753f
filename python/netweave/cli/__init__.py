"""The ``netweave`` command line: one sub-command per pipeline stage, plus ``plan``.

Each stage's commands live in their own module here; this one assembles them and turns bad
input into one line on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

import typer

from netweave._core import NetweaveError
from netweave.cli import analyze, common, emulate, mpi, plan, reproduce, route, run, schedule, simulate, topo
from netweave.cli import map as map_cli
from netweave.cli.common import UserError
from netweave.support import files, parallel

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
    mkdir: bool = typer.Option(False, "--mkdir", help="Create missing parent directories of output files and "
                               "directories (refused otherwise); accepted after the command too."),
    max_memory: str | None = typer.Option(None, "--max-memory", metavar="SIZE",
                                             help="Memory budget for tables, fabrics and schedules, e.g. 4G "
                                             "(default: NETWEAVE_MAX_MEMORY, else the memory available); "
                                             "work over it is refused before it starts. Accepted after the "
                                             "command too."),
) -> None:
    common.quiet = quiet
    files.make_parents = mkdir
    if max_memory is not None:
        common.set_max_memory(max_memory)


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


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app on `argv` (the words after ``netweave``; default the process's
    own), turning input errors into one line and exit code 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _hoist_global_flags(argv)
    # `map --mpi` and `simulate flit --mpi` run on every process, which cooperate themselves.
    spmd = _command(argv) in _SPMD_COMMANDS or "--mpi" in argv
    if parallel.mpi_processes() > 1 and not spmd:
        # Under mpirun: process 0 runs the command, the others run the tasks it spreads.
        with parallel.spread_over_mpi() as leader:
            if leader:
                _run(argv)
        return
    _run(argv)


#: Commands whose processes cooperate by themselves under mpirun (`map --mpi`; with `--mpi`,
#: `simulate flit` too).
_SPMD_COMMANDS = {"map"}


def _command(argv: list[str]) -> str | None:
    return next((w for w in argv if not w.startswith("-")), None)


def _run(argv: list[str]) -> None:
    """Run the command line, turning input errors into one line and exit code 2."""
    try:
        # Not standalone: usage errors come back as exceptions instead of a multi-line panel.
        code = app(args=argv, prog_name="netweave", standalone_mode=False)
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
    # A safety net: each command checks its input and says what is wrong with it, but whatever
    # slips through still ends as one line, never a traceback.
    except OverflowError:
        _fail(_overflow(argv))
    except TypeError as e:
        # The bindings report a too-large number inside a structure as a TypeError caused by
        # the OverflowError; any other TypeError is a bug and keeps its traceback.
        if isinstance(e.__cause__, OverflowError):
            _fail(_overflow(argv))
        raise
    except OSError as e:
        _fail(_os_error(e))
    except UnicodeDecodeError as e:
        _fail(f"input is not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r})")
    except MemoryError:
        _fail("out of memory: the input is too large for this machine")
    except RecursionError:
        _fail("the input is nested too deeply")
    except ValueError as e:
        _fail(str(e).splitlines()[0] if str(e) else "invalid value")


def _overflow(argv: list[str]) -> str:
    """The message for a number too large for the engine: the options whose values do not fit
    32 bits (sizes and counts are 32-bit; bytes and seeds 64-bit), named."""
    culprits = []
    for i, word in enumerate(argv):
        value = word.partition("=")[2] if word.startswith("--") and "=" in word else word
        try:
            number = int(value)
        except ValueError:
            continue
        if not 0 <= number < 2**32:
            option = argv[i - 1] if i > 0 and argv[i - 1].startswith("-") and "=" not in word else word.partition("=")[0]
            culprits.append(f"{option} {number}" if option.startswith("-") else str(number))
    if culprits:
        return (f"{', '.join(culprits)}: out of range for this parameter "
                "(counts and sizes are 32-bit: 0..4294967295; bytes and seeds 64-bit)")
    return "a number is out of range for this parameter (counts and sizes are 32-bit, bytes and seeds 64-bit)"


def _os_error(e: OSError) -> str:
    """``PATH: reason`` (ripgrep's form), naming both paths of a failed copy or rename."""
    reason = e.strerror or str(e)
    if e.filename is None:
        return reason
    if getattr(e, "filename2", None):
        return f"{e.filename} -> {e.filename2}: {reason}"
    return f"{e.filename}: {reason}"


#: Options of the `netweave` group that may also be given after the command.
_GLOBAL_FLAGS = {"--quiet": "--quiet", "-q": "--quiet", "--mkdir": "--mkdir"}
#: Options of the `netweave` group that take a value and may also be given after the command.
_GLOBAL_VALUE_OPTIONS = ("--max-memory",)


def _hoist_global_flags(argv: list[str]) -> None:
    """Move ``--quiet``/``-q`` and ``--mkdir`` given after the command to the front of `argv`
    (the words after ``netweave``), where the options live, so ``netweave plan --quiet`` works;
    words after ``--`` belong to another program."""
    end = argv.index("--") if "--" in argv else len(argv)
    valued: list[str] = []
    i = 0
    while i < end:  # `--max-memory 4G` and `--max-memory=4G`, moved as one `--max-memory=4G` word
        option = argv[i].partition("=")[0]
        if option in _GLOBAL_VALUE_OPTIONS:
            width = 1 if "=" in argv[i] or i + 1 >= end else 2
            valued.append(argv[i] if width == 1 else f"{option}={argv[i + 1]}")
            del argv[i:i + width]
            end -= width
        else:
            i += 1
    found = [i for i in range(end) if argv[i] in _GLOBAL_FLAGS]
    names = sorted({_GLOBAL_FLAGS[argv[i]] for i in found})
    for i in reversed(found):
        del argv[i]
    argv[0:0] = names + valued


def _fail(message: str) -> None:
    # Plain text, not rich: the message must stay on one line whatever the terminal width. One
    # write, so processes of an MPI job sharing stderr cannot split each other's lines.
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    sys.exit(2)


if __name__ == "__main__":
    main()
