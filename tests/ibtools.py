"""Finding and running the InfiniBand tools the integration tests drive (ibsim, umad2sim,
infiniband-diags, OpenSM) and the installed `netweave` command.

A missing tool skips the test, or fails it when the environment variable CI is set: CI
installs them (`make system-deps`), so their absence there is an error.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

def which(name: str) -> Optional[str]:
    """A tool on PATH, or in the sbin directories a non-root PATH often lacks."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(["/usr/sbin", "/sbin", "/usr/local/sbin"]))


def umad2sim() -> Optional[str]:
    candidates = glob.glob("/usr/lib/*/umad2sim/libumad2sim.so") + glob.glob("/usr/lib*/umad2sim/libumad2sim.so")
    candidates += glob.glob("/usr/local/lib*/umad2sim/libumad2sim.so")
    return next((c for c in candidates if os.path.isfile(c)), None)


def netweave_cli() -> Optional[str]:
    explicit = os.environ.get("NETWEAVE_CLI")
    if explicit:
        return explicit
    venv = Path(sys.executable).parent / "netweave"
    return str(venv) if venv.is_file() else shutil.which("netweave")


def require(path: Optional[str], what: str) -> str:
    """The path of a required tool; skip without it, or fail under CI."""
    if path and os.access(path, os.X_OK if not path.endswith(".so") else os.R_OK):
        return path
    message = f"{what} is not available (Debian packages: ibsim-utils, infiniband-diags, opensm; or build netweave)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{' '.join(cmd)} did not finish within {timeout} s") from e
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc
