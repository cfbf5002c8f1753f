"""Real runs: a schedule executed by real processes moving real, verified bytes.

:func:`run_local` starts one ``nw-tcp-run`` process per rank on this machine, each on its own
loopback address (``127.1.x.y``), runs a task-DAG schedule over TCP (paper 004's executor:
one send at a time per host, 1-byte sync messages, relays forwarded fragment by fragment) and
gathers every process's per-task trace into one result::

    from netweave.run import executor
    from netweave.stages import traffic
    graph = executor.as_task_graph(traffic.alltoall(8, 4096, "shift"))
    result = executor.run_local(graph, seed=1)
    result["ok"], result["makespan_s"], result["syncs"]

``warmup=W, reps=N`` times the schedule as a benchmark times an MPI collective (``nwbench``):
the processes run it W + N times over the same, warm connections, every call behind a start
line the launcher gives once all processes are ready (a barrier), each process timing its own
call from its release; ``makespan_s`` is then the slowest process's mean over the N timed calls
(``nwbench``'s ``max_s``) and ``calls_s`` each timed call's makespan over all processes.

A process that dies or stalls makes its partners exit non-zero at once (a dropped connection)
or within the timeout (nothing moving), with the reason, and the failure spreads along the
connections; the launcher stops whatever is left and names the cause. Nothing outlives a run: processes are killed
and the scratch directory removed even when the run fails.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netweave import _core
from netweave.run import processes

#: The C programs and libraries shipped inside an installed package (``make wheel`` puts them here).
PACKAGE_RUNTIME_DIR = Path(__file__).resolve().parents[1] / "_runtime"
#: Where ``make setup`` builds them in a source checkout.
CHECKOUT_RUNTIME_DIR = Path(__file__).resolve().parents[3] / "runtime" / "build"
#: Fragment size the executor moves data in; relays forward at this granularity.
DEFAULT_FRAGMENT = 64 * 1024
#: Seconds a process waits with nothing moving before it gives up.
DEFAULT_TIMEOUT = 30.0
#: The most warm-up or timed calls one run makes.
MAX_CALLS = 100_000
FAULT_KINDS = ("crash", "hang")


def runtime_dirs() -> list[Path]:
    """Where the C runtime is looked for, in order: ``NETWEAVE_RUNTIME_DIR`` when set (and then
    only there), else the package's own copy (an installed wheel), then the build directory of
    the source checkout this package runs from (development)."""
    explicit = os.environ.get("NETWEAVE_RUNTIME_DIR")
    if explicit:
        return [Path(explicit)]
    return [PACKAGE_RUNTIME_DIR, CHECKOUT_RUNTIME_DIR]


def runtime_file(name: str) -> Path | None:
    """The first `name` (a program or a library of the C runtime) in :func:`runtime_dirs`, or None."""
    for directory in runtime_dirs():
        if (directory / name).is_file():
            return directory / name
    return None


def executor_path() -> Path:
    """The ``nw-tcp-run`` program, or a clear error saying where it was looked for."""
    exe = runtime_file("nw-tcp-run")
    if exe is None or not os.access(exe, os.X_OK):
        where = " or ".join(str(d) for d in runtime_dirs())
        raise _core.NetweaveError(f"the TCP executor nw-tcp-run is not in {where}; install a netweave wheel built "
                                  "with `make wheel`, or run `make setup` in the netweave checkout")
    return exe


def as_task_graph(workload: _core.Schedule | _core.TaskGraph, phase_groups: list[int] | None = None
                  ) -> _core.TaskGraph:
    """A DAG as it is; a phased schedule in its local-sync order (each message waits for the
    previous phase's messages of its sender and receiver), or, with `phase_groups` (phase
    counts adding up to its phases), in those groups with a barrier between two groups and no
    wait inside one (``TaskGraph.with_barriers``; :func:`phase_groups_for` gives the groups
    that run it as an executor of the MPI library would)."""
    if isinstance(workload, _core.TaskGraph):
        return workload
    if phase_groups is not None:
        return _core.TaskGraph.with_barriers(workload, phase_groups)
    return _core.TaskGraph.from_schedule(workload)


def phase_groups_for(schedule: _core.Schedule, executor: str) -> list[int] | None:
    """The phase groups that make this executor's DAG run `schedule` the way the MPI library's
    `executor` does: ``sync`` a barrier after every phase; ``async`` (direct delivery) no wait
    at all, each rank's sends in order — one at a time, where the library keeps the
    schedule's ``concurrent_sends`` in flight; ``local-sync`` (and ``async`` on forwarded
    delivery, which waits for earlier receives) None, the local-sync order."""
    if executor == "sync":
        return [1] * schedule.num_phases
    if executor == "async" and schedule.delivery == "direct" and schedule.num_phases:
        return [schedule.num_phases]
    if executor in ("local-sync", "async"):
        return None
    raise _core.NetweaveError(f"unknown executor {executor!r} (known: sync, async, local-sync)")


def loopback_address(rank: int) -> str:
    """Rank ``r``'s own loopback address, ``127.1.hi.lo`` with ``hi·256 + lo = r + 1``."""
    if not 0 <= rank < 65535:
        raise _core.NetweaveError(f"rank {rank}: loopback runs support at most 65,535 ranks")
    return f"127.1.{(rank + 1) >> 8}.{(rank + 1) & 255}"


def parse_fault(text: str) -> tuple[str, int, int]:
    """``crash:RANK[:K]`` or ``hang:RANK[:K]`` → (kind, rank, K): that rank dies (SIGKILL) or
    falls silent just before its K-th send (counting from 0; default 0)."""
    parts = text.split(":")
    if not 2 <= len(parts) <= 3 or parts[0] not in FAULT_KINDS or not all(p.isdigit() for p in parts[1:]):
        raise _core.NetweaveError(f"fault {text!r}: want crash:RANK[:K] or hang:RANK[:K]")
    return parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else 0


@dataclass(frozen=True)
class Placement:
    """Where each rank's process runs: its ``(address, port)`` and the command prefix that
    starts a program there (``["ip", "netns", "exec", NS]`` on an emulated host). Each
    process binds its own address; :func:`run_local` instead binds loopback sockets itself."""

    addresses: list[tuple[str, int]]
    prefixes: list[list[str]]


def run_local(
    graph: _core.TaskGraph,
    *,
    seed: int = 0,
    fragment: int = DEFAULT_FRAGMENT,
    timeout: float = DEFAULT_TIMEOUT,
    fault: str | None = None,
    work_dir: Path | None = None,
    placement: Placement | None = None,
    warmup: int = 0,
    reps: int = 1,
) -> dict[str, Any]:
    """Run `graph` with one process per rank on loopback (or where `placement` says) and
    return the merged result.

    ``fault`` (``crash:RANK[:K]`` / ``hang:RANK[:K]``) makes that rank kill itself or fall
    silent just before its K-th send, to see the others fail fast. ``work_dir`` keeps the
    schedule file, the peers table, per-rank traces and stderr there; otherwise a scratch
    directory is used and removed. ``warmup`` untimed and ``reps`` timed calls: see the module
    docstring (the default, one call, is one cold run: connections fresh, each process's clock
    starting at the common start line).
    """
    if fragment < 4096 or fragment % 8:
        raise _core.NetweaveError(f"fragment size {fragment} must be a multiple of 8, at least 4096")
    if not timeout > 0:
        raise _core.NetweaveError("timeout must be positive")
    if not (isinstance(reps, int) and 1 <= reps <= MAX_CALLS and isinstance(warmup, int) and 0 <= warmup <= MAX_CALLS):
        raise _core.NetweaveError(f"reps {reps!r} must be 1 to {MAX_CALLS} and warmup {warmup!r} 0 to {MAX_CALLS}")
    faulty = parse_fault(fault) if fault else None
    if faulty and faulty[1] >= graph.num_ranks:
        raise _core.NetweaveError(f"fault names rank {faulty[1]}, outside the schedule's {graph.num_ranks} ranks")
    exe = executor_path()
    scratch = work_dir is None
    procs: list[subprocess.Popen] = []
    job = processes.Job().start()  # the ranks die with this process, however it ends
    out = Path(tempfile.mkdtemp(prefix="netweave-run-")) if work_dir is None else Path(work_dir)
    if scratch:  # and so does the scratch directory, even when netweave is killed
        job.on_parent_death(["rm", "-rf", "--", str(out)])
    try:
        out.mkdir(parents=True, exist_ok=True)
        schedule_path = out / "schedule.nws"
        graph.save(schedule_path)
        if placement is not None and len(placement.addresses) < graph.num_ranks:
            raise _core.NetweaveError(f"the schedule has {graph.num_ranks} ranks but only {len(placement.addresses)} "
                                      "hosts to run them on")
        # Loopback: bind every listener here (no port races); elsewhere each process binds its own.
        listeners = []
        if placement is None:
            for r in range(graph.num_ranks):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind((loopback_address(r), 0))
                s.listen(4096)
                listeners.append(s)
            addresses = [s.getsockname() for s in listeners]
        else:
            addresses = placement.addresses[:graph.num_ranks]
        (out / "peers.txt").write_text("".join(f"{a} {p}\n" for a, p in addresses))
        started = time.monotonic()
        for r in range(graph.num_ranks):
            cmd = [str(exe), "--schedule", str(schedule_path), "--rank", str(r), "--peers", str(out / "peers.txt"),
                   "--seed", str(seed), "--fragment", str(fragment),
                   "--timeout", str(timeout), "--trace", str(out / f"trace-{r}.json")]
            if warmup + reps > 1:  # a single call needs neither (and a runtime build of before them runs it)
                cmd += ["--warmup", str(warmup), "--reps", str(reps)]
            fds: tuple[int, ...] = ()
            if listeners:
                fds = (listeners[r].fileno(),)
                cmd += ["--listen-fd", str(fds[0])]
            if faulty and faulty[1] == r:
                cmd += [f"--{faulty[0]}-before-send", str(faulty[2])]
            cmd.append("--start-gate")
            if placement is not None:
                cmd = placement.prefixes[r] + cmd
            with open(out / f"stderr-{r}.txt", "wb") as err:
                procs.append(job.popen(cmd, pass_fds=fds, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=err))
        for s in listeners:
            s.close()
        _start_together(procs, warmup + reps)
        codes, order = _wait_all(procs, grace=timeout + 1.0)
        wall = time.monotonic() - started
        return _merge(graph, out, codes, order, wall, timed=reps if warmup + reps > 1 else 0)
    finally:
        job.close()  # stops whatever is still running
        if scratch:
            shutil.rmtree(out, ignore_errors=True)


def _start_together(procs: list[subprocess.Popen], calls: int = 1) -> None:
    """Let every process go at once when all are ready (each prints "ready" once connected and
    prepared), so a call's clock starts when every process can work; `calls` times, each call
    released only when every process has finished the one before (the barrier between calls).
    A process that exits before its last call ends the gating: the others' start lines are
    closed, so a process waiting at one stops, and one still in a call fails on its own (its
    partner's connections drop); _wait_all reports why."""
    ready = [0] * len(procs)
    for call in range(calls):
        while min(ready) <= call:
            waiting = {p.stdout.fileno(): i for i, p in enumerate(procs) if ready[i] <= call and p.stdout}
            readable, _, _ = select.select(list(waiting), [], [], 0.1)
            for fd in readable:
                chunk = os.read(fd, 4096)
                if not chunk:  # it exited before this call
                    _close_pipes(procs)
                    return
                ready[waiting[fd]] += chunk.count(b"\n")
        for p in procs:
            assert p.stdin is not None, "every rank is started with pipes"
            try:
                p.stdin.write(b"g")
                p.stdin.flush()
            except OSError:
                _close_pipes(procs)  # it already exited
                return
    _close_pipes(procs)


def _close_pipes(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        for pipe in (p.stdin, p.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


def _wait_all(procs: list[subprocess.Popen], grace: float) -> tuple[list[int | None], list[int]]:
    """Wait for every process. Once one has failed, the rest get `grace` seconds to notice (they
    exit on their own when a peer's connection drops or their timeout passes); a process still
    running then is silent, and killed. Returns exit codes (None: killed by the launcher) and
    the ranks in the order they ended."""
    codes: list[int | None] = [None] * len(procs)
    running = set(range(len(procs)))
    order: list[int] = []
    failed_at: float | None = None
    while running:
        for i in sorted(running):
            rc = procs[i].poll()
            if rc is not None:
                codes[i] = rc
                running.discard(i)
                order.append(i)
                if rc != 0 and failed_at is None:
                    failed_at = time.monotonic()
        if failed_at is not None and running and time.monotonic() - failed_at > grace:
            for i in sorted(running):
                procs[i].send_signal(signal.SIGKILL)
                procs[i].wait()
                order.append(i)
            running.clear()
        time.sleep(0.005)
    return codes, order


def _reason(out: Path, rank: int, code: int | None) -> str:
    lines = (out / f"stderr-{rank}.txt").read_text(errors="replace").strip().splitlines()
    if lines:
        return lines[-1]
    if code is None:
        return "still running after the others failed; stopped by the launcher"
    if code < 0:
        return f"killed by signal {-code} ({signal.Signals(-code).name})"
    return f"exited with status {code}"


_BLAMED = re.compile(r"\brank (\d+) (?:closed|reset) its connection")


def _cause(failed: list[int], codes: list[int | None], reasons: dict[int, str]) -> int | None:
    """The rank whose failure the others followed: one that died by a signal, else one that went
    silent, else the first to fail — and from there, while its reason is that another failed rank
    hung up on it, that rank (processes ending in one poll interval are listed by rank, so the
    first listed may be a victim)."""
    cause = next((r for r in failed if (code := codes[r]) is not None and code < 0), None)
    cause = next((r for r in failed if codes[r] is None), cause) if cause is None else cause
    if cause is not None or not failed:
        return cause
    cause, seen = failed[0], {failed[0]}
    while (blamed := _BLAMED.search(reasons[cause])) and int(blamed[1]) in reasons and int(blamed[1]) not in seen:
        cause = int(blamed[1])
        seen.add(cause)
    return cause


def _merge(graph: _core.TaskGraph, out: Path, codes: list[int | None], order: list[int], wall: float,
           timed: int = 0) -> dict[str, Any]:
    """Every process's trace as one result; `timed` > 0: the run was that many timed calls
    (each trace's ``calls``), and its ``makespan_s`` is their nwbench statistic."""
    traces = []
    for r in range(graph.num_ranks):
        path = out / f"trace-{r}.json"
        traces.append(json.loads(path.read_text()) if path.exists() else None)
    reasons = {r: _reason(out, r, codes[r]) for r in range(graph.num_ranks) if codes[r] != 0}
    failures = [{"rank": r, "exit": codes[r], "reason": why} for r, why in reasons.items()]
    cause = _cause([r for r in order if codes[r] != 0], codes, reasons)
    tasks = graph.tasks()
    starts = [t["start_ns"] for t in traces if t]
    t0 = min(starts) if starts else 0
    timeline: list[dict[str, Any]] = [
        {"task": i, "src": src, "dst": dst, "bytes": nbytes, "start_s": None, "sent_s": None, "first_s": None,
         "last_s": None}
        for i, (src, dst, nbytes, _after, _relays) in enumerate(tasks)
    ]
    for trace in traces:
        for task, role, start, first, last in (trace or {}).get("events", []):
            rec = timeline[task]
            if role == "send" and start:
                rec["start_s"] = (start - t0) / 1e9
                rec["sent_s"] = (last - t0) / 1e9
            elif role == "recv" and last:
                rec["first_s"] = (first - t0) / 1e9
                rec["last_s"] = (last - t0) / 1e9
    done = [r["last_s"] for r in timeline if r["last_s"] is not None]
    total = lambda key: sum(t[key] for t in traces if t)  # noqa: E731
    moved = sum(nbytes for src, dst, nbytes, _a, _r in tasks if src != dst)
    makespan = max(done) if done and not failures else None
    calls_s: list[float] = []
    if timed and not failures:
        per_rank = [t["calls"] for t in traces if t]
        if per_rank and all(len(c) == timed for c in per_rank):
            calls_s = [(max(c[k][1] for c in per_rank) - min(c[k][0] for c in per_rank)) / 1e9 for k in range(timed)]
            makespan = max(sum(end - start for start, end in c) / timed for c in per_rank) / 1e9
        else:
            makespan = None
    return {
        "ok": not failures,
        "schedule": graph.name,
        "ranks": graph.num_ranks,
        "tasks": graph.num_tasks,
        "makespan_s": makespan,
        "calls_s": calls_s,
        "wall_s": wall,
        "bytes": moved,
        "throughput_bytes_per_s": moved / makespan if makespan else None,
        "bytes_verified": total("bytes_verified"),
        "syncs": total("syncs_sent"),
        "messages": total("messages_sent"),
        "connections": total("connections") // 2,
        "failures": failures,
        "cause": None if cause is None else next(f for f in failures if f["rank"] == cause),
        "timeline": timeline,
    }
