"""Jobs die with their parent: `mpi run`, `mpi bench`, `run` and `emulate measure`, ended by
SIGTERM or SIGKILL while their processes are busy, leave no process (and no namespace) behind.

Each job's processes carry a number unique to the test in their command line (a size, a seed),
so the test finds exactly them — and every one still alive at the end is killed by the test's
own clean-up, so a failing test leaves nothing either.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from netweave import traffic
from netweave.run import emulate, mpi, processes

BIN = Path(sys.executable).parent


def _with_token(token: str) -> list[int]:
    """Processes (not this one) whose command line holds `token` as a word."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            words = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(token.encode() in w for w in words) and not words[0].endswith(b"pytest"):
            found.append(int(entry))
    return found


def _wait_for(condition, limit: float) -> bool:
    """Poll `condition` until it holds or `limit` seconds have passed (a bound, not a timing)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.fixture
def token():
    value = str(random.randrange(100_001, 999_999))
    yield value
    for pid in _with_token(value):  # whatever a failed test left
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _kill_midway(args: list[str], token: str, sig: int, busy: int) -> subprocess.Popen:
    """Start `netweave ARGS`, wait until `busy` of its processes hold `token`, send it `sig`,
    and check that every one of them is gone afterwards."""
    parent = subprocess.Popen([str(BIN / "netweave"), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    try:
        assert _wait_for(lambda: len(_with_token(token)) >= busy or parent.poll() is not None, 120), \
            f"the job never started: {_with_token(token)}"
        assert parent.poll() is None, parent.stderr.read()
        parent.send_signal(sig)
        parent.wait(timeout=60)
        assert _wait_for(lambda: not _with_token(token), 30), \
            f"left behind: {[Path(f'/proc/{p}/cmdline').read_bytes()[:200] for p in _with_token(token)]}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    if sig == signal.SIGTERM:
        assert parent.returncode == 128 + signal.SIGTERM, parent.stderr.read()
    return parent


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("impl", mpi.IMPLEMENTATIONS)
def test_mpi_run_and_bench_take_their_ranks_with_them(tmp_path, token, sig, impl):
    path = tmp_path / "a.nws"
    traffic.save(traffic.build("alltoall", "bruck", num_ranks=3, bytes=8), path)
    # nwbench spins at 7 bytes for a billion repetitions; the token is a size it never reaches.
    endless = ["--sizes", f"7,{token}", "--reps", "1000000000", "--warmup", "0"]
    nwbench = str(mpi.program_path("nwbench", impl))
    _kill_midway(["mpi", "run", "-np", "3", "--mpi", impl, "--schedule", str(path), "--", nwbench, *endless],
                 token, sig, busy=3)
    _kill_midway(["mpi", "bench", str(path), "-np", "3", "--mpi", impl, *endless], token, sig, busy=3)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_run_takes_its_processes_with_it(tmp_path, token, sig):
    path = tmp_path / "a.nws"
    traffic.save(traffic.build("alltoall", "shift", num_ranks=4, bytes=4096), path)
    # Rank 1 falls silent before its first send; the others wait for it for 1000 s.
    _kill_midway(["run", str(path), "--fault", "hang:1", "--timeout", "1000", "--seed", token], token, sig, busy=4)


@pytest.mark.skipif(os.geteuid() != 0, reason="emulated fabrics need root")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_emulate_measure_takes_its_processes_and_namespaces_with_it(tmp_path, token, sig, cli):
    name = "k" + uuid.uuid4().hex[:10]
    try:
        cli("topo", "mesh", "--dims", "2x2", "-o", str(tmp_path / "t.json"))
        cli("route", "dor", str(tmp_path / "t.json"), "-o", str(tmp_path / "r.json"))
        traffic.save(traffic.build("alltoall", "shift", num_ranks=4, bytes=50_000_000), tmp_path / "a.nws")
        # At 1/10,000 of the links' speed the run takes minutes: it is killed while it moves data.
        _kill_midway(["emulate", "measure", str(tmp_path / "t.json"), str(tmp_path / "r.json"), str(tmp_path / "a.nws"),
                      "--name", name, "--scale", "0.0001", "--seed", token], token, sig, busy=4)
        assert _wait_for(lambda: not emulate.namespaces(name), 30), emulate.namespaces(name)
    finally:
        emulate.down(name)


def test_a_job_forwards_the_signal_before_it_stops_the_rest(tmp_path):
    # A child that exits cleanly on SIGTERM leaves its mark in a file: the signal reached it
    # (forwarded), rather than only the SIGKILL that follows the grace period.
    marker = tmp_path / "got-term"
    script = (f"import signal, sys, time\n"
              f"signal.signal(signal.SIGTERM, lambda *a: (open({str(marker)!r}, 'w').close(), sys.exit(0)))\n"
              f"print('ready', flush=True)\n"
              f"time.sleep(1000)\n")
    driver = (f"import sys; from netweave.run import processes\n"
              f"with processes.Job() as job:\n"
              f"    p = job.popen([sys.executable, '-c', {script!r}], stdout=__import__('subprocess').PIPE, text=True)\n"
              f"    p.stdout.readline(); print('started', flush=True); p.wait()\n")
    proc = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        assert _wait_for(marker.exists, 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_members_are_found_by_mark_session_and_descent():
    # A child that starts its own session and drops the job's mark from its environment is
    # still a member: it descends from one.
    with processes.Job(grace=1.0) as job:
        parent = job.popen(["sh", "-c", "env -u NETWEAVE_JOB setsid sleep 1000 & echo $!; wait"],
                           stdout=subprocess.PIPE, text=True)
        grandchild = int(parent.stdout.readline())
        assert grandchild in processes.members(job.mark, job.sessions)
    assert not Path(f"/proc/{grandchild}").exists() or "Z" in Path(f"/proc/{grandchild}/stat").read_text().split()[2]
