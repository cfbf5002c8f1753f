"""Pieces every command module shares: the one-line error type, the spinner, common options."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import typer
from rich.console import Console

err_console = Console(stderr=True)

JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON.")


class UserError(Exception):
    """A problem with the user's input, reported as one line with exit code 2."""


@contextmanager
def working(message: str) -> Iterator[None]:
    """A spinner on stderr for steps that may take more than a moment."""
    with err_console.status(message):
        yield
