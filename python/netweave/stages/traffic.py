"""Traffic: schedules of ``(src, dst, bytes)`` messages between ranks, in phases.

>>> from netweave import traffic
>>> s = traffic.alltoall(4, 1024)
>>> s.num_phases, s.phase(0)[:2]
(3, [(0, 1, 1024), (1, 2, 1024)])
>>> traffic.build("alltoall", "a2at", num_ranks=25, nct=2).name
'alltoall-a2at(5x5,nct=2)'

Every algorithm sits in one table, :data:`ALGORITHMS`, keyed by ``(collective, name)``; the
``netweave schedule`` command and :func:`build` read it. The core's catalogue fills it
(``traffic::catalog``: which options an algorithm takes, whether it places its ranks, how to
build it); :func:`register` adds a builder written in Python, checked the same way.

Files: :func:`save` / :func:`load` pick the format from the extension — ``.json`` (versioned
JSON) or ``.nws`` (the compact binary format an MPI runtime reads; see
``docs/schedule-format.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netweave import _core
from netweave._core import NetweaveError, Schedule, Topology

#: Bytes per rank pair (or per block) when the caller gives none: 1 MiB; a barrier sends 8.
DEFAULT_BYTES = 1 << 20
DEFAULT_BARRIER_BYTES = 8


@dataclass
class Job:
    """What a schedule is built for: the ranks, where they run, and the algorithm's options."""

    #: Host index of each rank (rank r runs on host ``hosts[r]``).
    hosts: list[int]
    #: Bytes per pair (all-to-all) or per block (allgather, gather); per signal (barrier).
    bytes: int
    #: The topology the job runs on, if any (algorithms that depend on the fabric read it).
    topology: Topology | None = None
    #: The ranks' lattice shape, dimension 0 fastest (A2AND, A2AT).
    shape: list[int] | None = None
    #: Concurrent sends per rank (paper 001's NCT).
    nct: int = 1
    #: Root rank (gather, multicast barrier).
    root: int = 0
    #: Seed for random choices (multicast barrier's visiting list).
    seed: int = 0
    #: Further algorithm-specific options (e.g. ``k``, ``m``, ``rule``).
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def num_ranks(self) -> int:
        return len(self.hosts)


@dataclass(frozen=True)
class Algorithm:
    """One entry of the algorithm table."""

    collective: str
    name: str
    help: str
    #: Builds the schedule over ranks ``0..job.num_ranks``; None for the core's own algorithms,
    #: which :func:`build` hands to the core's catalogue.
    build: Callable[[Job], Schedule] | None = None
    #: Job fields and options this algorithm reads besides hosts and bytes
    #: (any of ``nct``, ``root``, ``seed``, ``shape`` or an ``options`` key).
    takes: tuple[str, ...] = ()
    #: The builder places ranks itself (it reads ``job.hosts``/``job.topology``); otherwise
    #: rank r is placed on ``job.hosts[r]`` afterwards.
    places_ranks: bool = False


#: ``(collective, algorithm) → Algorithm``: the core's catalogue, then anything registered here.
ALGORITHMS: dict[tuple[str, str], Algorithm] = {
    (a["collective"], a["name"]): Algorithm(a["collective"], a["name"], a["help"], None, tuple(a["takes"]),
                                            a["places_ranks"])
    for a in _core.algorithm_catalog()
}
#: The collectives the catalogue builds.
COLLECTIVES: tuple[str, ...] = tuple(dict.fromkeys(c for c, _ in ALGORITHMS))


def register(collective: str, name: str, help: str, takes: tuple[str, ...] = (), places_ranks: bool = False):
    """Decorator adding a Python builder ``fn(job) -> Schedule`` to :data:`ALGORITHMS` (the
    core's algorithms live in its catalogue; this is the plug-in path)."""

    def add(fn: Callable[[Job], Schedule]) -> Callable[[Job], Schedule]:
        ALGORITHMS[(collective, name)] = Algorithm(collective, name, help, fn, takes, places_ranks)
        return fn

    return add


def algorithms(collective: str) -> list[str]:
    """Algorithm names known for `collective`, in table order."""
    return [a for (c, a) in ALGORITHMS if c == collective]


#: ``grid_shape(topology, hosts)``: the lattice shape of a job that covers a whole mesh or torus
#: with one host per router, ranks in router order; None otherwise.
grid_shape = _core.grid_shape


def build(
    collective: str,
    algorithm: str,
    *,
    topology: Topology | None = None,
    hosts: str | None = None,
    order: str = "listed",
    num_ranks: int | None = None,
    bytes: int | None = None,
    nct: int | None = None,
    root: int | None = None,
    seed: int | None = None,
    shape: list[int] | None = None,
    allow_partial_leaves: bool = False,
    **options: Any,
) -> Schedule:
    """Build `algorithm` for `collective`.

    The job is the hosts of `topology` named by `hosts` (``"all"`` when omitted; syntax
    ``0-15,20,leaf:2-3``; fat-trees take whole leaves) in rank `order` (``listed``,
    ``cyclic``, ``random`` with `seed`) — or, without a topology, `num_ranks` ranks on hosts
    ``0..num_ranks``. Options the algorithm does not take are an error, so a typo never goes
    unnoticed. A2AND/A2AT need the ranks' `shape` unless the job is a whole mesh/torus with
    one host per router; without a topology, A2AT takes a square `num_ranks` as a square shape
    and A2AND runs on the 1-D shape ``[num_ranks]``.
    """
    if collective not in COLLECTIVES:
        raise NetweaveError(f"unknown collective '{collective}' (known: {', '.join(COLLECTIVES)})")
    algo = ALGORITHMS.get((collective, algorithm))
    if algo is None:
        raise NetweaveError(
            f"unknown {collective} algorithm '{algorithm}' (known: {', '.join(algorithms(collective))})"
        )
    job_args = dict(topology=topology, hosts=hosts, order=order, num_ranks=num_ranks, bytes=bytes, nct=nct,
                    root=root, seed=seed, shape=shape, allow_partial_leaves=allow_partial_leaves)
    if algo.build is None:
        return _core.build_schedule(collective, algorithm, job_args, options)
    given = [k for k, v in options.items() if v is not None]
    settled = _core.settle_job(f"{collective} {algorithm}", collective, list(algo.takes), job_args, given)
    job = Job(topology=topology, options={k: options[k] for k in given}, **settled)
    schedule = algo.build(job)
    return schedule if algo.places_ranks else schedule.with_placement(job.hosts)


#: ``a2at_theory(k)``: paper 001's Table 1 for odd side k — (TV_NCT1, LB_Mesh, TV_NCT2,
#: LB_Torus) in message units.
a2at_theory = _core.a2at_theory
#: ``a2at_offsets(k)``: A2AT's send list as (dx, dy) offsets (with the j ≤ i−1 correction).
a2at_offsets = _core.a2at_offsets
#: ``a2and_offsets(dims)``: A2AND's offsets, lexicographic with dimension 0 outermost.
a2and_offsets = _core.a2and_offsets
#: ``visiting_list(n, root, seed)``: paper 002's barrier visiting list.
visiting_list = _core.visiting_list


#: Task policies of paper 004's contention-free scheduler (``min-sync`` is the paper's).
CONTENTION_FREE_POLICIES: list[str] = _core.contention_free_policies()


def contention_free(topology: Topology, collective: str, bytes: int, root: int = 0, policy: str = "min-sync",
                    rule_b: str = "ge", seed: int = 0, relay: str | None = None, timing: str = "sum",
                    perturbation: float = 0.0, perturbation_seed: int = 0,
                    tasks: list[tuple[int, int, int]] | None = None, scheduler: str = "paper",
                    hosts: list[int] | None = None, routes=None):
    """Paper 004's contention-free ``gather`` or ``alltoall`` over every host of `topology` (a
    tree, or a fabric with unique shortest paths), or collective ``tasks`` with `tasks` a list of
    ``(src, dst, bytes)``: ``(TaskGraph, summary)``, the summary with ``tasks``,
    ``dependencies``, ``groups``, ``relayed_tasks`` and ``relay_pieces``, ``predicted_seconds``
    (cost-model replay on the true link values) and ``scheduling_seconds``. Rank r is host r.

    `relay` is ``departure`` (relay by task splitting with the thesis' rule), ``arrival``
    (relay only when the data arrives sooner) or ``off`` (the no-relay baselines). By default
    gather relays and all-to-all does not: measured, relaying made all-to-all slower (see
    docs/contention-free.md), as the thesis itself found it rarely pays there. `timing` is how
    group times advance for relay decisions (``sum`` as (5.3) is written, or ``clock``).
    `perturbation` r > 0 schedules from link values each off by up to ±r ((6.1)/(6.2), drawn
    from `perturbation_seed`).

    `scheduler` is ``paper`` (the thesis' stage scheduler, the reproduction default) or
    ``packed`` (stages filled with every task that fits, from contention-free phases — the tree
    schedule for an all-to-all; no relaying). `hosts` (host indices) runs the collective among
    those hosts only, rank r on ``hosts[r]``; `routes` (a ``RoutingTable`` of `topology`)
    takes each pair's path from the table, so a fabric whose *routes* are unique (a torus routed
    by ``dor``) is schedulable.

    >>> from netweave import topology
    >>> tree = topology.multi_cluster("a:4,b:4")
    >>> dag, s = contention_free(tree, "tasks", 0, tasks=[(0, 5, 1000), (1, 5, 1000)])
    >>> s["tasks"], s["groups"] > 0
    (2, True)
    """
    if relay is None:
        relay = "departure" if collective == "gather" and scheduler == "paper" else "off"
    return _core.contention_free(topology, collective, bytes, root, policy, rule_b, seed, relay, timing,
                                 perturbation, perturbation_seed, tasks, scheduler, hosts, routes)


def buffer_groups(routes: _core.RoutingTable, schedule: Schedule, buffer_bytes: int) -> list[int]:
    """`schedule`'s phases cut, in order, into the longest runs that put at most `buffer_bytes`
    (headers included) on every switch output port of the fabric `routes` routes: each run's
    length in phases. Runs of phases between two barriers then never overflow a drop-tail port,
    however their messages overlap (``TaskGraph.with_barriers`` builds that DAG;
    docs/contention-free.md). A forwarded schedule gets one phase per run.

    >>> from netweave import routing, topology
    >>> tree = topology.switch_tree([2], 4, [1.0], [100.0], 1.0, 100.0)
    >>> routes = routing.route(tree, "updown")
    >>> buffer_groups(routes, alltoall(8, 1024), 64 * 1024), buffer_groups(routes, alltoall(8, 65536), 64 * 1024)
    ([7], [1, 1, 1, 1, 1, 1, 1])
    """
    return _core.buffer_groups(routes, schedule, buffer_bytes)


def concurrent(topology: Topology, collective: str, bytes: int, root: int = 0,
               tasks: list[tuple[int, int, int]] | None = None, seed: int = 0):
    """Paper 004's Concurrent baseline as a DAG: the same tasks as :func:`contention_free`, all
    started at once (what an unscheduled MPI gather or all-to-all does), each host posting its
    own in an order drawn with `seed` — unrelated to the other hosts' orders, as unscheduled
    sends are (in one shared order every host would send to the same destination first)."""
    return _core.concurrent_dag(topology, collective, bytes, root, tasks, seed)


def read_task_list(path: str | Path) -> list[tuple[int, int, int]]:
    """A task list file: CSV rows ``src,dst,bytes`` (a header row of those names is allowed,
    ``#`` starts a comment). Errors name the file and line."""
    tasks = []
    for number, line in enumerate(_core.read_text_file(str(path)).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line or line.replace(" ", "") == "src,dst,bytes":
            continue
        fields = [f.strip() for f in line.split(",")]
        try:
            src, dst, size = (int(f) for f in fields)
        except ValueError:
            raise NetweaveError(f"{path}:{number}: expected 'src,dst,bytes' with non-negative integers, got '{line}'") \
                from None
        if min(src, dst, size) < 0:
            raise NetweaveError(f"{path}:{number}: negative value in '{line}'")
        if max(src, dst) >= 2**32 or size >= 2**64:
            raise NetweaveError(f"{path}:{number}: a value out of range in '{line}' (ranks 32-bit, bytes 64-bit)")
        tasks.append((src, dst, size))
    if not tasks:
        raise NetweaveError(f"{path}: no tasks (expected CSV rows 'src,dst,bytes')")
    return tasks


def alltoall(num_ranks: int, bytes_per_pair: int, algorithm: str = "shift") -> Schedule:
    """An all-to-all schedule over `num_ranks` ranks placed on hosts ``0..num_ranks``."""
    return build("alltoall", algorithm, num_ranks=num_ranks, bytes=bytes_per_pair)


def save(schedule: Schedule, path: str | Path, executor: str = "auto") -> None:
    """Write `schedule`: ``.json`` as JSON, ``.nws`` as the compact binary format, which also
    names the `executor` an MPI runtime should use (``auto``, ``sync``, ``async``,
    ``local-sync``). Written atomically (:mod:`netweave.support.files`)."""
    from netweave.support import files

    files.write_with(path, lambda partial: _core.save_schedule(schedule, partial, executor))


def load(path: str | Path) -> Schedule:
    """Read a schedule written by :func:`save`; errors name the file."""
    from netweave.support import files

    with files.naming(path):
        return _core.load_schedule(Path(path))


def summary(schedule: Schedule) -> dict[str, Any]:
    """Sizes and the completeness check of a schedule, as a JSON-ready dict."""
    return {
        "name": schedule.name,
        "collective": schedule.collective,
        "root": schedule.root,
        "delivery": schedule.delivery,
        "ranks": schedule.num_ranks,
        "phases": schedule.num_phases,
        "messages": schedule.num_messages,
        "total_bytes": schedule.total_bytes,
        "concurrent_sends": schedule.concurrent_sends,
        "claims_permutation": schedule.claims_permutation,
        "completeness": schedule.completeness(),
    }


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
