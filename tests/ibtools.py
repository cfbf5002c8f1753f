"""Finding and running the InfiniBand tools the integration tests drive (ibsim, umad2sim,
infiniband-diags, OpenSM) and the installed `netweave` command, and the simulated fabric they run on.

A missing tool skips the test, or fails it when the environment variable CI is set: CI
installs them (`make system-deps`), so their absence there is an error.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

IBSIM_READY_TIMEOUT = 30  # s, for ibsim to parse the file and open its socket
# ibsim's built-in limits (sim.h); raised with -N/-S/-P when a fabric needs more.
IBSIM_DEFAULT_NODES, IBSIM_DEFAULT_SWITCHES, IBSIM_DEFAULT_PORTS = 2048, 256, 256 * 36 + 2048 * 2


def which(name: str) -> str | None:
    """A tool on PATH, or in the sbin directories a non-root PATH often lacks."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(["/usr/sbin", "/sbin", "/usr/local/sbin"]))


def umad2sim() -> str | None:
    candidates = glob.glob("/usr/lib/*/umad2sim/libumad2sim.so") + glob.glob("/usr/lib*/umad2sim/libumad2sim.so")
    candidates += glob.glob("/usr/local/lib*/umad2sim/libumad2sim.so")
    return next((c for c in candidates if os.path.isfile(c)), None)


def netweave_cli() -> str | None:
    explicit = os.environ.get("NETWEAVE_CLI")
    if explicit:
        return explicit
    venv = Path(sys.executable).parent / "netweave"
    return str(venv) if venv.is_file() else shutil.which("netweave")


def require(path: str | None, what: str) -> str:
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


def stop(proc: subprocess.Popen) -> None:
    """Terminate a child (and its session), then kill it if it lingers."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def limits(fabric: dict) -> list[str]:
    """ibsim flags raising its limits to what the fabric needs (a switch adds port 0)."""
    nodes = fabric["nodes"]
    switches = sum(1 for n in nodes if n["kind"] == "switch")
    ports = sum(n["ports"] for n in nodes) + switches
    return [
        "-N", str(max(IBSIM_DEFAULT_NODES, len(nodes))),
        "-S", str(max(IBSIM_DEFAULT_SWITCHES, switches)),
        "-P", str(max(IBSIM_DEFAULT_PORTS, ports)),
    ]


@contextmanager
def ibsim(tools: dict, netfile: Path, workdir: Path, flags: list[str]) -> Iterator[dict]:
    """Run ``ibsim -s -n`` on `netfile` until the block exits; yields the environment clients
    run in (``env``: the socket name and the umad2sim preload) and ibsim's ``stdout``/``stderr`` files."""
    socket_name = f"nw{os.getpid()}{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "IBSIM_SOCKNAME": socket_name}
    out_path, err_path = workdir / "ibsim.out", workdir / "ibsim.err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        # -s starts the fabric at once, -n drops the console (ibsim would read stdin).
        proc = subprocess.Popen(
            [tools["ibsim"], "-s", "-n", *flags, str(netfile)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=workdir, start_new_session=True,
        )
        try:
            deadline = time.monotonic() + IBSIM_READY_TIMEOUT
            while "Network simulator ready." not in out_path.read_text(errors="replace"):
                if proc.poll() is not None:
                    raise AssertionError(
                        f"ibsim exited ({proc.returncode}) while loading {netfile.name}:\n"
                        f"{out_path.read_text(errors='replace')}\n{err_path.read_text(errors='replace')}"
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(f"ibsim was not ready after {IBSIM_READY_TIMEOUT} s")
                time.sleep(0.05)
            client_env = dict(env)
            preload = os.environ.get("LD_PRELOAD")
            client_env["LD_PRELOAD"] = f"{tools['umad2sim']}:{preload}" if preload else tools["umad2sim"]
            yield {"env": client_env, "stdout": out_path, "stderr": err_path}
        finally:
            stop(proc)
