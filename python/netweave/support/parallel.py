"""Parallel work from Python, the one place that uses MPI for it: independent tasks run where
there is room — across the processes of an MPI job when the command was started by ``mpirun``
(through mpi4py.futures), across this machine's cores otherwise. Every task is a deterministic function of its inputs, so the results are the same
either way, in input order.

Under ``mpirun -np P`` (P ≥ 2) the CLI runs its command on process 0 only
(:func:`spread_over_mpi`); the other P − 1 processes run the tasks process 0 hands out until it
is done. A task's function must be importable by name (defined at a module's top level) and its
inputs picklable.

>>> run_all(pow, [(2, 3), (3, 2)])
[8, 9]
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, cast

#: Environment variables in which launchers give the job's process count (Open MPI; MPICH's Hydra).
_WORLD_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")

#: The executor handing tasks to the other processes, while :func:`spread_over_mpi` is open.
_mpi_executor: Executor | None = None


def mpi_processes() -> int:
    """Processes of the MPI job this process belongs to (1 when not started by ``mpirun``)."""
    for var in _WORLD_SIZE_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 1


@contextmanager
def spread_over_mpi() -> Iterator[bool]:
    """Yields True on the process that runs the program — process 0 under ``mpirun``, the only
    one otherwise — whose :func:`run_all` calls then spread over the other processes; they
    serve tasks inside this block and get False once process 0 has left it."""
    global _mpi_executor
    if mpi_processes() <= 1:
        yield True
        return
    try:
        from mpi4py import MPI
        from mpi4py.futures import MPICommExecutor
    except ImportError:
        raise RuntimeError("started by mpirun, but mpi4py is missing (pip install -r requirements-dev.txt)") from None
    with MPICommExecutor(MPI.COMM_WORLD, root=0) as executor:
        # mpi4py's stubs type what `with` gives as the MPICommExecutor itself; it is the pool
        # executor (an Executor) on the root process and None on the others.
        _mpi_executor = cast(Executor | None, executor)
        try:
            yield executor is not None
        finally:
            _mpi_executor = None


def run_all(fn: Callable[..., Any], args: Sequence[tuple], on_done: Callable[[int], None] | None = None,
            threads: int | None = None) -> list[Any]:
    """``[fn(*a) for a in args]``, the calls spread over the MPI job's processes inside
    :func:`spread_over_mpi`, else over `threads` threads (default one per core; the Rust
    engines release the GIL). `on_done(i)` hears of each finished task."""
    own = _mpi_executor is None
    pool = ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1) if _mpi_executor is None else _mpi_executor
    try:
        futures = [pool.submit(fn, *a) for a in args]
        if on_done is not None:
            for i, f in enumerate(futures):
                f.add_done_callback(functools.partial(_call_done, on_done, i))
        return [f.result() for f in futures]
    finally:
        if own:
            pool.shutdown()


def _call_done(on_done: Callable[[int], None], i: int, _future: Future) -> None:
    on_done(i)


def using_mpi() -> bool:
    """Whether :func:`run_all` spreads tasks over an MPI job right now."""
    return _mpi_executor is not None
