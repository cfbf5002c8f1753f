"""Traffic: schedules of ``(src, dst, bytes)`` messages between ranks, in phases.

>>> from netweave import traffic
>>> s = traffic.alltoall(4, 1024)
>>> s.num_phases, s.phase(0)[:2]
(3, [(0, 1, 1024), (1, 2, 1024)])
"""

from netweave import _core

#: All-to-all algorithms `alltoall` accepts.
ALLTOALL_ALGORITHMS = ("shift",)


def alltoall(num_ranks: int, bytes_per_pair: int, algorithm: str = "shift") -> _core.Schedule:
    """An all-to-all schedule over `num_ranks` ranks placed on hosts ``0..num_ranks``."""
    if algorithm != "shift":
        raise _core.NetweaveError(
            f"unknown all-to-all algorithm '{algorithm}' (known: {', '.join(ALLTOALL_ALGORITHMS)})"
        )
    return _core.shift_alltoall(num_ranks, bytes_per_pair)
