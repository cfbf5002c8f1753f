"""Pieces every command module shares: the one-line error type, the progress display, common
options."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

err_console = Console(stderr=True)

JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON.")

#: Set by ``netweave --quiet`` (accepted anywhere before ``--``): no progress display at all.
quiet = False


class UserError(Exception):
    """A problem with the user's input, reported as one line with exit code 2."""


def set_max_memory(text: str) -> None:
    """Set the memory budget every size guard of the engine checks (``--max-memory``): a size
    such as ``512M`` or ``4G`` (powers of 1024), passed on as ``NETWEAVE_MAX_MEMORY`` so child
    processes (MPI ranks, workers) keep it."""
    from netweave import _core

    try:
        _core.parse_size(text)
    except ValueError as e:
        raise UserError(f"--max-memory: {e}") from None
    os.environ["NETWEAVE_MAX_MEMORY"] = text.strip()


class Steps:
    """What a command reports while it works: the step it is on and how far it got. Shown as a
    bar on stderr when that is a terminal; nothing otherwise (a pipe, ``--json``, ``--quiet``)."""

    def __init__(self, bar: Progress | None = None, task=None):
        self._bar, self._task, self._started = bar, task, 0

    def note(self, description: str) -> None:
        """The command starts its next step, `description`: the steps before it are done."""
        if self._bar is not None:
            self._started += 1
            self._bar.update(self._task, description=description, completed=self._started - 1)

    def update(self, completed: float | None = None, total: float | None = None,
               description: str | None = None) -> None:
        """Set how much is done (and the total, or the description)."""
        if self._bar is not None:
            self._bar.update(self._task, completed=completed, total=total, description=description)

    def advance(self, amount: float = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, amount)


def shows_progress(silent: bool = False) -> bool:
    """Whether a command shows progress: on a terminal, without ``--quiet``, unless `silent`
    (``--json``, or not the main process of an MPI run)."""
    return not (quiet or silent) and err_console.is_terminal


@contextmanager
def progress(description: str, total: float | None = None, silent: bool = False) -> Iterator[Steps]:
    """A progress bar on stderr for a command that can take more than a moment: `total` steps
    (a pulsing bar when unknown), the current step's description and the time elapsed. Gone
    when the command ends; never shown on a pipe, with ``--quiet``, or when `silent` (``--json``)."""
    if not shows_progress(silent):
        yield Steps()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        yield Steps(bar, bar.add_task(description, total=total))


@contextmanager
def working(message: str, silent: bool = False) -> Iterator[Steps]:
    """:func:`progress` for one step of unknown length."""
    with progress(message, None, silent) as steps:
        yield steps
