"""Shared helpers for the end-to-end tests."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def run_cli(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the installed `netweave` command; returns the completed process."""
    proc = subprocess.run(
        [str(BIN / "netweave"), *args], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"netweave {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def run_json(*args: str) -> dict:
    return json.loads(run_cli(*args, "--json").stdout)


@pytest.fixture
def cli():
    return run_cli
