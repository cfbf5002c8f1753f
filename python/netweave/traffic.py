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


# --- Latin-square fat-tree all-to-all (paper 000) -------------------------------------------

#: Move rules of the LSFT sub-cluster schedule: ``text`` (normative, contention-free for every
#: m ≤ k ≤ n) and ``paper-table3`` (erratum mode reproducing the paper's Table 3).
#: Rank orders: ``row-major`` (rank = (y·k + x)·m + j, the paper's Fig. 14) and ``column-major``.
LSFT_MOVE_RULES, LSFT_RANK_ORDERS = (tuple(names) for names in _core.lsft_options())


def lsft_alltoall(topology: _core.Topology, bytes_per_pair: int) -> _core.Schedule:
    """Paper 000's all-server all-to-all on a (full, one- or two-sided) Latin-square fat-tree:
    one phase per shift-number triple (a, b, c), contention-free under the ``lsft`` routing.
    Rank r runs on host index r; self-sends are local copies and left out.

    >>> from netweave import topology, traffic
    >>> traffic.lsft_alltoall(topology.latin_square_fat_tree(2), 64).num_phases
    20
    """
    return _core.lsft_alltoall(topology, bytes_per_pair)


def lsft_partial_alltoall(
    topology: _core.Topology,
    k: int,
    m: int,
    bytes_per_pair: int,
    rule: str = "text",
    rank_order: str = "row-major",
    side: int = 0,
) -> _core.Schedule:
    """Paper 000's sub-cluster all-to-all: the n × k rectangle of grid leaves P(x, y)
    (x < k, n = the LSFT's order) with m servers (slots 0..m−1) under each, m ≤ k ≤ n.
    The schedule carries its placement (``lsft_allocation``).

    >>> from netweave import topology, traffic
    >>> s = traffic.lsft_partial_alltoall(topology.latin_square_fat_tree(3), 2, 2, 64)
    >>> s.num_ranks, s.num_phases
    (12, 12)
    """
    return _core.lsft_partial_alltoall(topology, k, m, bytes_per_pair, rule, rank_order, side)


def lsft_partial_shift(
    topology: _core.Topology, k: int, m: int, bytes_per_pair: int, rank_order: str = "row-major", side: int = 0
) -> _core.Schedule:
    """The shift baseline ``(S + i) mod N`` on the same n·k·m allocation and rank order."""
    return _core.lsft_partial_shift(topology, k, m, bytes_per_pair, rank_order, side)


def lsft_allocation(topology: _core.Topology, k: int, m: int, rank_order: str = "row-major", side: int = 0):
    """Host index of every rank of the n × k × m sub-cluster, as a numpy array."""
    return _core.lsft_allocation(topology, k, m, rank_order, side)


#: ``lsft_triples(order, two_sided=False)``: the executed (a, b, c) triples in phase order.
lsft_triples = _core.lsft_triples
#: ``lsft_full_destinations(order, two_sided=False)``: (phases, servers) destination array.
lsft_full_destinations = _core.lsft_full_destinations
#: ``lsft_partial_destinations(order, k, m, rule="text", rank_order="row-major")``:
#: (phases, ranks) destination array, phase t = g·m + i, self-sends included (paper's Table 3).
lsft_partial_destinations = _core.lsft_partial_destinations
#: ``lsft_vector_table(order, k, m)``: the vector table in the paper's notation (Table 1).
lsft_vector_table = _core.lsft_vector_table
