"""netweave's schedules inside MPI: launching programs with the PMPI library, and `nwbench`.

The library (``runtime/mpi/nwmpi.c``, built once per MPI implementation by ``make setup`` as
``runtime/build/libnwmpi-<impl>.so``, and shipped inside a wheel built by ``make wheel``; found by
:func:`netweave.run.executor.runtime_file`) runs a schedule file inside ``MPI_Alltoall``,
``MPI_Allgather`` and ``MPI_Gather`` of an unchanged program; see ``docs/mpi-executor.md``.

>>> env = settings(Path("a2a.nws"), verbose=True)                 # doctest: +SKIP
>>> run(command("openmpi", 4, ["./app"], env=env), timeout=600)   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from netweave import _core
from netweave._core import NetweaveError
from netweave.run import executor, processes

#: Debian's MPI implementations, by their command suffix.
IMPLEMENTATIONS = ("openmpi", "mpich")
#: Executors the library offers (NETWEAVE_EXECUTOR); names as the flow simulator's.
EXECUTORS = tuple(_core.schedule_executors())


#: The MPI each library and program is built against, as a user knows it, and its Debian package.
_MPI_NAMES = {"openmpi": ("Open MPI", "libopenmpi-dev"), "mpich": ("MPICH", "libmpich-dev")}


def _built(name: str, implementation: str) -> Path:
    """A file of the C runtime built for `implementation` (:func:`netweave.run.executor.runtime_file`),
    or one line naming the MPI it needs."""
    path = executor.runtime_file(name)
    if path is None:
        mpi_name, package = _MPI_NAMES[implementation]
        where = " or ".join(str(d) for d in executor.runtime_dirs())
        raise NetweaveError(f"netweave has no {name} for {mpi_name} (looked in {where}): it is built only where {mpi_name} "
                            f"is installed; install {mpi_name} (Debian: {package}) and rebuild (make setup, or make wheel), "
                            f"or choose the other MPI with --mpi")
    return path


def library_path(implementation: str) -> Path:
    """The PMPI library for `implementation` (``openmpi`` or ``mpich``)."""
    _check(implementation)
    return _built(f"libnwmpi-{implementation}.so", implementation)


def program_path(program: str, implementation: str) -> Path:
    """A bundled MPI program (``nwbench``, ``nwcheck``) built for `implementation`."""
    _check(implementation)
    return _built(f"{program}-{implementation}", implementation)


def _check(implementation: str) -> None:
    if implementation not in IMPLEMENTATIONS:
        raise NetweaveError(f"unknown MPI '{implementation}' (known: {', '.join(IMPLEMENTATIONS)})")


def settings(schedule: Path | None = None, executor: str | None = None,
             concurrent_sends: int | None = None, verbose: bool = False) -> dict[str, str]:
    """The NETWEAVE_* environment the library reads."""
    env: dict[str, str] = {}
    if schedule is not None:
        if not Path(schedule).exists():
            raise NetweaveError(f"{schedule}: no such schedule file or directory")
        env["NETWEAVE_SCHEDULE"] = str(Path(schedule).resolve())
    if executor is not None:
        if executor not in EXECUTORS:
            raise NetweaveError(f"unknown executor '{executor}' (known: {', '.join(EXECUTORS)})")
        env["NETWEAVE_EXECUTOR"] = executor
    if concurrent_sends is not None:
        if concurrent_sends < 1:
            raise NetweaveError("concurrent sends must be at least 1")
        env["NETWEAVE_CONCURRENT_SENDS"] = str(concurrent_sends)
    if verbose:
        env["NETWEAVE_VERBOSE"] = "1"
    return env


def command(implementation: str, ranks: int, program: Sequence[str], preload: bool = True,
            env: dict[str, str] | None = None, launcher_args: Sequence[str] = ()) -> list[str]:
    """`mpirun` of `implementation` running `program` as `ranks` processes on this machine
    (oversubscribed), with the library preloaded, `env` passed to every rank and
    `launcher_args` (e.g. ``--mca btl tcp,self``) given to the launcher."""
    _check(implementation)
    if ranks < 1:
        raise NetweaveError("an MPI run needs at least one rank")
    env = dict(env or {})
    if preload:
        env["LD_PRELOAD"] = str(library_path(implementation))
    if implementation == "openmpi":
        cmd = ["mpirun.openmpi", "--oversubscribe", "-np", str(ranks)]
        if os.geteuid() == 0:
            cmd.insert(1, "--allow-run-as-root")
        for k, v in env.items():
            cmd += ["-x", f"{k}={v}"]
    else:
        cmd = ["mpiexec.mpich", "-np", str(ranks)]
        for k, v in env.items():
            cmd += ["-env", k, v]
    return cmd + list(launcher_args) + [str(p) for p in program]


def run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run an MPI command, output captured, as a :class:`netweave.run.processes.Job`: launcher and
    ranks end with it — after `timeout` seconds (the run then fails with that reason), on
    SIGINT/SIGTERM (forwarded first) or when netweave is killed."""
    with processes.Job() as job:
        proc = job.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            job.stop()
            proc.communicate()
            raise NetweaveError(f"{cmd[0]} did not finish within {timeout:g} s (every rank was killed)") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def nwbench_program(implementation: str, collective: str, sizes: Sequence[int], reps: int = 20, warmup: int = 3,
                    check: bool = True, schedules: Sequence[Path | str] = ()) -> list[str]:
    """The `nwbench` command line: `collective` at every size of `sizes` (bytes per pair),
    natively, then with each of `schedules` switched on (``"native"``: the native collective
    again). Run it under :func:`command` here, or :func:`netweave.run.emulate.mpirun` on a fabric."""
    if collective not in ("alltoall", "allgather", "gather"):
        raise NetweaveError(f"nwbench times alltoall, allgather or gather, not '{collective}'")
    for s in schedules:
        if s != "native" and not Path(s).exists():
            raise NetweaveError(f"{s}: no such schedule file or directory")
    program = [str(program_path("nwbench", implementation)), "--collective", collective,
               "--sizes", ",".join(str(s) for s in sizes), "--reps", str(reps), "--warmup", str(warmup)]
    program += ["--check"] if check else []
    for s in schedules:
        program += ["--schedule", s if s == "native" else str(Path(s).resolve())]
    return program


def nwbench_report(proc: subprocess.CompletedProcess, where: str = "") -> dict[str, Any]:
    """The JSON report of a finished `nwbench` run, or an error with the end of its stderr."""
    if proc.returncode != 0:
        raise NetweaveError(f"nwbench{where} failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}")
    return json.loads(proc.stdout)


def bench(implementation: str, ranks: int, collective: str, schedules: Sequence[Path], sizes: Sequence[int],
          reps: int = 20, warmup: int = 3, check: bool = True, executor: str | None = None,
          timeout: float = 600.0, env: dict[str, str] | None = None,
          launcher_args: Sequence[str] = ()) -> dict[str, Any]:
    """Run `nwbench`: the native collective, then each schedule, in one MPI run. Returns its
    JSON report (``results`` native; ``schedules``: ``[{schedule, results, ran, fell_back}]``,
    where ``ran`` counts the calls that ran the schedule and those that fell back to the native
    collective, with the library's reason, and ``fell_back`` says whether any did)."""
    program = nwbench_program(implementation, collective, sizes, reps, warmup, check, schedules)
    env = {**settings(executor=executor), **(env or {})}
    report = nwbench_report(run(command(implementation, ranks, program, env=env, launcher_args=launcher_args), timeout))
    report["implementation"] = implementation
    for entry in report["schedules"]:
        if "ran" in entry:
            entry["fell_back"] = entry["ran"]["native"] > 0
    return report


def fallbacks(report: dict[str, Any]) -> list[str]:
    """One line per schedule of a :func:`bench` report that (partly) ran the native collective
    instead, with the library's reason; empty when every timed call ran its schedule."""
    lines = []
    for entry in report.get("schedules", []):
        ran = entry.get("ran")
        if ran and ran["native"]:
            share = "every call" if not ran["schedule"] else f"{ran['native']} of {ran['native'] + ran['schedule']} calls"
            lines.append(f"{Path(entry['schedule']).name}: {share} ran the native {report['collective']}, not the "
                         f"schedule ({ran['why']})")
    return lines


def plot_bench(report: dict[str, Any], path: Path) -> Path:
    """Time and throughput per process against bytes per pair, native against each schedule."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [("native " + report.get("implementation", ""), report["results"])]
    series += [(Path(s["schedule"]).name, s["results"]) for s in report.get("schedules", [])]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, rows in series:
        rows = [r for r in rows if r["bytes"] > 0]
        x = [r["bytes"] for r in rows]
        left.plot(x, [r["avg_s"] * 1e6 for r in rows], marker="o", label=label)
        right.plot(x, [r["bytes_per_s"] / 1e6 for r in rows], marker="o", label=label)
    for ax, ylabel in ((left, "time per call, µs (avg over ranks)"), (right, "MB/s per process")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes per pair")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", lw=0.3)
    left.legend(fontsize=8)
    fig.suptitle(f"{report['collective']} on {report['ranks']} ranks ({report.get('library', '')[:40]})", fontsize=9)
    fig.savefig(path, metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    return path
