"""Child processes that die with netweave: one place for the lifetime of every job it starts.

``netweave run``, ``mpi run``, ``mpi bench`` and ``emulate measure`` start processes that start
more (``mpirun`` its ranks, ``ip netns exec`` a rank inside a namespace). A :class:`Job` keeps
track of all of them and ends the whole tree however netweave ends:

- **normal exit, error or timeout** — leaving the ``with`` block kills what is still running:
  SIGTERM first (``mpirun`` then stops its ranks itself), SIGKILL after a grace period;
- **SIGINT, SIGTERM or SIGHUP** — the signal is forwarded to the job's processes, then netweave
  unwinds (its ``finally`` blocks run, e.g. an emulated fabric is taken down) and exits with
  128 + the signal's number;
- **SIGKILL** (or any death that runs no Python code) — a small guardian process, started with
  the job and holding the other end of a pipe, sees the pipe close and kills every process of
  the job, then runs the clean-up commands registered with :meth:`Job.on_parent_death` (e.g.
  removing the emulated namespaces).

A process belongs to a job when it carries the job's mark in its environment (every child
gets ``NETWEAVE_JOB=<mark>``, and launchers pass their environment on to what they start), or
when it runs in a session the job created (each child starts its own), or descends from one of
them. So ranks that ``mpirun`` moved to a process group of their own, and processes reparented
to init when their launcher died, are still found.

>>> with Job() as job:                                          # doctest: +SKIP
...     proc = job.popen(["mpirun", "-np", "4", "./app"])
...     proc.wait(timeout=60)
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

#: Environment variable that marks every process of a job.
MARK_VARIABLE = "NETWEAVE_JOB"
#: Seconds between SIGTERM and SIGKILL when a job is stopped.
GRACE_S = 3.0
#: Signals a job forwards to its processes before netweave unwinds.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, session id) of `pid`, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and ')'
    return int(fields[1]), int(fields[3])


def _marked(pid: int, mark: bytes) -> bool:
    try:
        return mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def members(mark: str, sessions: Sequence[int] = ()) -> list[int]:
    """Every live process of the job marked `mark` (or in one of `sessions`), and their
    descendants; never this process."""
    me = os.getpid()
    wanted = f"{MARK_VARIABLE}={mark}".encode()
    parent: dict[int, int] = {}
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        st = _stat(pid)
        if st is None or pid == me:
            continue
        parent[pid] = st[0]
        if st[1] in sessions or _marked(pid, wanted):
            found.add(pid)
    # Descendants of members, however they changed their session or environment.
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    found.discard(me)
    return sorted(found)


def _signal_all(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop(mark: str, sessions: Sequence[int] = (), grace: float = GRACE_S, reap: Sequence[Any] = ()) -> None:
    """End every process of the job: SIGTERM, then SIGKILL whatever is left after `grace`
    seconds (and whatever appears meanwhile). `reap` are Popen objects of ours to wait for, so
    they leave no zombies."""
    deadline = time.monotonic() + grace
    pids = members(mark, sessions)
    if pids:
        _signal_all(pids, signal.SIGTERM)
    while pids and time.monotonic() < deadline:
        for p in reap:
            p.poll()
        time.sleep(0.05)
        pids = members(mark, sessions)
    # SIGKILL until nothing is left: a launcher may start a process while it is being stopped.
    for _ in range(50):
        pids = members(mark, sessions)
        if not pids:
            break
        _signal_all(pids, signal.SIGKILL)
        for p in reap:
            p.poll()
        time.sleep(0.02)
    for p in reap:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=1)


class Job:
    """The processes of one netweave command (see the module doc). Use it as a context manager;
    start children with :meth:`popen`."""

    def __init__(self, grace: float = GRACE_S) -> None:
        self.mark = f"{os.getpid()}-{secrets.token_hex(8)}"
        self.grace = grace
        self.procs: list[subprocess.Popen] = []
        self._guardian: subprocess.Popen[str] | None = None
        self._handlers: dict[int, Any] = {}

    def __enter__(self) -> Job:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> Job:
        """Start the guardian and take over SIGINT/SIGTERM/SIGHUP (what ``with`` does)."""
        self._guardian = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).resolve()), "guard", self.mark],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True, text=True)
        if threading.current_thread() is threading.main_thread():
            for sig in FORWARDED:
                self._handlers[sig] = signal.signal(sig, self._on_signal)
        return self

    def close(self) -> None:
        """Stop what is left of the job, give the signals back, dismiss the guardian (what
        leaving ``with`` does)."""
        try:
            self.stop()
        finally:
            for sig, handler in self._handlers.items():
                signal.signal(sig, handler)
            self._handlers.clear()
            if self._guardian is not None:
                try:
                    self._guardian_says("done")
                    self._guardian_input().close()
                except OSError:
                    pass
                self._guardian.wait()
                self._guardian = None

    @property
    def sessions(self) -> list[int]:
        """The sessions our children lead (each child starts one, so its pid is the id)."""
        return [p.pid for p in self.procs]

    def popen(self, cmd: Sequence[str], env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.Popen:
        """Start `cmd` as a member of the job: its own session (so a terminal's Ctrl-C reaches
        netweave, which forwards it), the job's mark in its environment. Other arguments as
        :class:`subprocess.Popen`'s."""
        full_env = dict(os.environ if env is None else env)
        full_env[MARK_VARIABLE] = self.mark
        proc = subprocess.Popen(list(cmd), env=full_env, start_new_session=True, **kwargs)
        self.procs.append(proc)
        self._tell(f"session {proc.pid}")
        return proc

    def on_parent_death(self, command: Sequence[str]) -> None:
        """Run `command` (after the job's processes are killed) if netweave dies without
        leaving the ``with`` block — killed by SIGKILL, say. It is not run otherwise."""
        if self._guardian is None:
            raise RuntimeError("Job.on_parent_death needs the job to be entered")
        self._tell("cleanup " + json.dumps(list(command)))

    def _tell(self, line: str) -> None:
        if self._guardian is not None:
            self._guardian_says(line)

    def _guardian_input(self) -> IO[str]:
        """The pipe to the guardian (it is started with one)."""
        assert self._guardian is not None and self._guardian.stdin is not None, "the guardian runs with a pipe"
        return self._guardian.stdin

    def _guardian_says(self, line: str) -> None:
        pipe = self._guardian_input()
        pipe.write(line + "\n")
        pipe.flush()

    def stop(self) -> None:
        """Stop every process of the job (SIGTERM, SIGKILL after the grace period)."""
        stop(self.mark, self.sessions, self.grace, self.procs)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # Forward first, so mpirun can stop its ranks itself while we unwind; then leave by
        # SystemExit so every `finally` (stopping the rest, taking a fabric down) runs.
        _signal_all(members(self.mark, self.sessions), signum)
        raise SystemExit(128 + signum)


def _guard(mark: str) -> int:
    """The guardian: wait for the parent's pipe to close; if it closed without "done", the
    parent died — kill the job's processes and run the registered clean-up commands."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the parent's to handle
    cleanups: list[list[str]] = []
    sessions: list[int] = []
    finished = False
    for line in sys.stdin:
        if line.startswith("cleanup "):
            cleanups.append(json.loads(line[len("cleanup "):]))
        elif line.startswith("session "):
            sessions.append(int(line.split()[1]))
        elif line.strip() == "done":
            finished = True
    if finished:
        return 0
    stop(mark, sessions)
    for command in cleanups:
        subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return 0


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "guard":
    sys.exit(_guard(sys.argv[2]))
