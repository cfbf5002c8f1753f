"""Mapping: where each rank of a job runs (paper 003's RMATT at interactive speed).

>>> import netweave
>>> topo = netweave.stages.topology.torus([4, 4])
>>> routes = netweave.stages.routing.route(topo, "dor", select="low-port")
>>> net = MapNetwork(routes)
>>> pattern = load_pattern("bruck:16:2048")
>>> cost(net, pattern, baseline(net, pattern, "identity"))["sum_hops"]
108

Patterns come from files (CSV, JSON, per-message trace; see docs/mapping-formats.md), from a
netweave schedule (aggregated), or from generator specs such as ``bruck:4096:2048``.
Placements are ``host_of_rank`` arrays (a host index per rank).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from netweave import _core
from netweave._core import Annealer, MapNetwork, NetweaveError, Pattern
from netweave.support import files

__all__ = [
    "BASELINES",
    "DEFAULT_COST",
    "FORMATS",
    "GENERATORS",
    "Annealer",
    "MapNetwork",
    "OptimizeResult",
    "Pattern",
    "baseline",
    "bisem",
    "canonical_cost",
    "channel_loads",
    "cost",
    "descend",
    "format_map",
    "load_pattern",
    "network",
    "optimize",
    "parse_pattern_text",
    "plot_link_histogram",
    "plot_trace",
    "read_map",
    "save_pattern",
    "write_map",
]

#: Baseline placements `baseline` accepts.
BASELINES: tuple[str, ...] = tuple(_core.map_baselines())
#: Output formats of `write_map`.
FORMATS: tuple[str, ...] = tuple(_core.map_formats())
#: Generator specs `load_pattern` accepts: name → usage.
GENERATORS: dict[str, str] = dict(_core.pattern_generators())


def parse_pattern_text(text: str, fmt: str, name: str = "pattern", num_ranks: int | None = None) -> Pattern:
    """Parse a pattern file's text: ``csv`` (``src,dst,bytes``), ``json`` or ``trace``.

    `num_ranks` overrides the job size the file declares (else the largest rank + 1).
    """
    return _core.parse_pattern_text(text, fmt, name, num_ranks)


def load_pattern(source: str | Path, num_ranks: int | None = None) -> Pattern:
    """A pattern from a file (``.csv``, ``.json``, ``.trace``; a netweave schedule, ``.json``
    or ``.nws``, is aggregated) or a generator spec (``bruck:4096:2048``, ``stencil:16x16x16``, …)."""
    return _core.load_pattern(str(source), num_ranks)


def save_pattern(pattern: Pattern, path: str | Path) -> Path:
    """Write a pattern as CSV (``.csv``) or JSON (anything else), aggregated, atomically."""
    return files.write_with(path, lambda partial: _core.save_pattern(pattern, partial))


def network(topology, routes, slots_per_host: int = 1) -> MapNetwork:
    """The mapper's view of ``topology`` routed by ``routes``: a ``RoutingTable``, or an engine
    name with an optional tie policy (``"dor"``, ``"dor:per-destination"``, ``"nue"``...).

    ``dor`` on a torus or mesh (tie policy ``low-port`` or ``per-destination``) takes the lattice
    route source: the same routes, computed from coordinates, so no routing table is built and
    the size is not capped (a 65,536-host torus fits in a few megabytes). Anything else builds
    the table and flattens it.

    >>> import netweave
    >>> network(netweave.stages.topology.torus([4, 4]), "dor").route_source
    'lattice'
    """
    if isinstance(routes, str):
        engine, _, select = routes.partition(":")
        select = select or "low-port"
        shape = topology.structure.get("shape")
        if engine == "dor" and shape in ("torus", "mesh") and select != "balanced":
            return MapNetwork.dor(topology, select, slots_per_host)
        from netweave.stages import routing

        routes = routing.route(topology, engine, select=select)
    return MapNetwork(routes, slots_per_host)


def _placement(host_of_rank) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(host_of_rank, dtype=np.uint32))


def cost(net: MapNetwork, pattern: Pattern, host_of_rank) -> dict:
    """Exact figures of a placement, named as `analysis` names them: ``{sum_hops, hop_bytes,
    max_channel_bytes, hops_x_max_channel, step_max_channel_bytes}`` (host links count towards
    the maximum)."""
    return _core.map_cost(net, pattern, _placement(host_of_rank))


def channel_loads(net: MapNetwork, pattern: Pattern, host_of_rank) -> np.ndarray:
    """Bytes on every directed channel under the placement."""
    return _core.map_channel_loads(net, pattern, _placement(host_of_rank))


#: The objective paper 003 optimises: ``sum_hops × max_channel_bytes``.
DEFAULT_COST = "hops_x_max_channel"

_warned_costs: set[str] = set()


def canonical_cost(spec: str, announce: bool = True) -> str:
    """Cost spec `spec` in today's names (``hops_x_max_channel``, ``hop_bytes``,
    ``max_channel_bytes``, ``step_max_channel_bytes``, weighted sums such as
    ``hop_bytes+2e3*max_channel_bytes``). The earlier names (``rmatt``, ``max-link``,
    ``step-max-link``) are still read, with one deprecation line on stderr per spec; a bad
    spec raises naming the term. `announce=False` keeps quiet (the other processes of an MPI
    run, so a job prints the line once, not once per rank).

    >>> canonical_cost("hop-bytes+2*max_channel_bytes")
    'hop_bytes+2*max_channel_bytes'
    """
    canonical, earlier = _core.canonical_cost(spec)
    if earlier and announce and spec not in _warned_costs:
        _warned_costs.add(spec)
        print(f"netweave: deprecated cost name{'s' if len(earlier) > 1 else ''} {', '.join(earlier)} "
              f"in '{spec}': read as '{canonical}'", file=sys.stderr)
    return canonical


def objective_value(spec: str, figures: dict) -> float:
    """The value of cost spec `spec` (``hops_x_max_channel``, ``hop_bytes``,
    ``step_max_channel_bytes``, sums…) for `figures` (as `cost` returns them)."""
    w_hb, w_ml, w_rm, w_st = _core.parse_cost(spec)
    value = w_hb * figures["hop_bytes"] + w_ml * figures["max_channel_bytes"] + w_rm * figures["hops_x_max_channel"]
    return value + w_st * figures.get("step_max_channel_bytes", 0) if w_st else value


def baseline(net: MapNetwork, pattern: Pattern, kind: str, seed: int = 0) -> np.ndarray:
    """A reference placement (see `BASELINES`)."""
    return _core.map_baseline(net, pattern, kind, seed)


def descend(net: MapNetwork, pattern: Pattern, host_of_rank, max_evaluations: int | None = None,
            seconds: float | None = None) -> dict:
    """Swap descent on hop-bytes from a placement: every rank, heaviest first, tries the slots one
    switch hop from its partners that are farther away, farthest first, and takes the first swap
    that lowers hop-bytes, pass after pass until nothing improves, `max_evaluations` moves were tried or `seconds` passed. Returns
    ``{host_of_rank, hop_bytes, evaluations, passes}``; a quick finish for a constructive start
    before annealing.

    >>> from netweave import topology
    >>> net = MapNetwork.dor(topology.torus([4, 4]), "low-port", 1)
    >>> ring = Pattern.ring(16, 64)
    >>> start = baseline(net, ring, "random", 3)
    >>> descend(net, ring, start)["hop_bytes"] < cost(net, ring, start)["hop_bytes"]
    True
    """
    return _core.map_descend(net, pattern, _placement(host_of_rank), max_evaluations, seconds)


def bisem(net: MapNetwork, pattern: Pattern, levels: int | None = None, seed: int = 0) -> dict:
    """Paper 003's BISEM: ``{host_of_rank, axes, group_sizes, regions, grid}`` (``grid``: the
    stencil grid the groups were cut along geometrically, or None where METIS cut them)."""
    return _core.map_bisem(net, pattern, levels, seed)


def structure(pattern: Pattern) -> dict:
    """The lattice (torus, mesh, hypercube) or tree found in `pattern`'s graph alone, whatever
    its rank numbers: ``{kind, description, dims, periodic, explained_edges, explained_bytes,
    displaced_ranks, coords}``. ``kind`` is ``torus``, ``mesh``, ``hypercube``,
    ``partly_periodic`` (some dimensions wrap, some do not), ``tree``, or ``none`` when nothing
    was recognised; BISEM then cuts the pattern with METIS.

    >>> structure(load_pattern("stencil:6x5"))["description"]
    'torus 6×5, 100 % of edges explained'
    """
    return _core.map_structure(pattern)


def check_fits(net: MapNetwork, pattern: Pattern, more_slots: str = "") -> None:
    """Refuse a job with more ranks than host slots; `more_slots` names how the caller's user
    gives more (``map --ranks-per-host``), and is left out where there is no such way."""
    if pattern.num_ranks > net.num_slots:
        hint = f"; raise {more_slots}" if more_slots else ""
        raise NetweaveError(
            f"{pattern.num_ranks} ranks do not fit {net.num_slots} host slots "
            f"({net.num_hosts} hosts x {net.slots_per_host} slots{hint})"
        )


def start_placement(net: MapNetwork, pattern: Pattern, start: str, seed: int = 0,
                    cost_spec: str = DEFAULT_COST) -> np.ndarray:
    """The starting placement: ``best`` (the lowest-cost of BISEM and the deterministic
    baselines under `cost_spec`), ``bisem`` / ``bisem-full`` (fall back to ``greedy`` off
    lattices) or a baseline."""
    check_fits(net, pattern)
    if start == "best":
        kinds = ["bisem", "bisem-full", "identity", "greedy"]
        if net.lattice is not None:
            kinds += ["hilbert", "peano"]
        if net.num_slots & (net.num_slots - 1) == 0:
            kinds.append("bit-reversal")
        candidates = [start_placement(net, pattern, k, seed) for k in kinds]
        values = [objective_value(cost_spec, _core.map_cost(net, pattern, _placement(c))) for c in candidates]
        return candidates[int(np.argmin(values))]
    if start in ("bisem", "bisem-full"):
        if net.lattice is None:
            return baseline(net, pattern, "greedy", seed)
        # bisem: the paper's regions of at most 8 routers, shuffled inside; bisem-full: bisect
        # down to single routers, so the partitioner also decides the order inside regions.
        return bisem(net, pattern, levels=64 if start == "bisem-full" else None, seed=seed)["host_of_rank"]
    if start not in BASELINES:
        raise NetweaveError(f"unknown start '{start}' (best, bisem, bisem-full, {', '.join(BASELINES)})")
    return baseline(net, pattern, start, seed)


@dataclass
class OptimizeResult:
    """What `optimize` found: the best placement, its figures and the cost-versus-time trace."""

    host_of_rank: np.ndarray
    figures: dict
    value: float
    start_value: float
    evaluations: int
    seconds: float
    #: (seconds, best value) after every round.
    trace: list = field(default_factory=list)
    processes: int = 1
    stopped_by: str = "time"

    @property
    def evaluations_per_second(self) -> float:
        return self.evaluations / self.seconds if self.seconds > 0 else 0.0


def optimize(
    net: MapNetwork,
    pattern: Pattern,
    start,
    cost: str = DEFAULT_COST,
    seconds: float | None = 60.0,
    evaluations: int | None = None,
    target: float | None = None,
    stall: float | None = None,
    seed: int = 0,
    replicas: int = 2,
    range: int = 4,
    num_swaps: int = 2,
    sweep: int = 2000,
    t_min: float = 1e-6,
    t_max: float = 3e-4,
    progress: Callable[[dict, float], None] | None = None,
    comm=None,
) -> OptimizeResult:
    """Anneal from `start` with parallel tempering until the time budget (`seconds`), the
    evaluation budget, the `target` value, or `stall` seconds without improvement.

    With `comm` (an mpi4py communicator) every process runs `replicas` chains on its slice of
    one temperature ladder and neighbouring processes exchange states after every round; the
    stop decision is the root's, and every process returns the global best. An evaluation
    budget alone gives the same result on every run (time budgets depend on the machine).
    The search runs in the core (``mapping::anneal::optimize``); the processes' letters
    travel by ``comm.alltoall``.
    """
    rank, size = (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
    cost = canonical_cost(cost, announce=rank == 0)

    def on_round(status: dict, elapsed: float) -> None:
        if progress is not None and rank == 0:
            progress(status, elapsed)

    found = _core.map_optimize(
        net, pattern, _placement(start), cost, seconds=seconds, evaluations=evaluations, target=target,
        stall=stall, seed=seed, replicas=replicas, range=range, num_swaps=num_swaps, sweep=sweep, t_min=t_min,
        t_max=t_max, on_round=on_round, rank=rank, ranks=size, swap=None if comm is None else comm.alltoall,
    )
    figures = _core.map_cost(net, pattern, found["host_of_rank"])
    return OptimizeResult(
        host_of_rank=np.asarray(found["host_of_rank"], dtype=np.uint32),
        figures=figures,
        value=objective_value(cost, figures),
        start_value=found["start_value"],
        evaluations=int(found["evaluations"]),
        seconds=found["seconds"],
        trace=[tuple(point) for point in found["trace"]],
        processes=found["processes"],
        stopped_by=found["stopped_by"],
    )


# ---------------------------------------------------------------- map files

#: A topology host label as a hostname: ``h(1,2).0`` -> ``h-1-2-0``.
_hostname = _core.map_hostname


def format_map(net: MapNetwork, host_of_rank, fmt: str, hostnames: list[str] | None = None,
               meta: dict | None = None) -> str:
    """The text of a map file (see `FORMATS` and docs/mapping-formats.md); `meta` adds fields
    to the JSON format."""
    return _core.format_map(net, _placement(host_of_rank), fmt, hostnames, None if meta is None else json.dumps(meta))


def write_map(net: MapNetwork, host_of_rank, path: str | Path, fmt: str, hostnames=None, meta=None) -> Path:
    """Write a map file: Open MPI ``rankfile``, Fujitsu ``vcoord``, Cray ``mpich``
    (MPICH_RANK_ORDER) or netweave ``json``."""
    return files.write_text(path, format_map(net, host_of_rank, fmt, hostnames, meta))


def read_map(net: MapNetwork, path: str | Path, fmt: str = "json", hostnames=None) -> np.ndarray:
    """Read a map file back into ``host_of_rank`` (json, rankfile or vcoord with one host per router)."""
    return _core.read_map(net, Path(path).read_text(), fmt, hostnames)


# ---------------------------------------------------------------- plots

def plot_trace(traces: dict[str, list], path: str | Path, title: str = "cost versus time") -> Path:
    """Best cost against wall time, one line per run (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, trace in traces.items():
        t, v = zip(*trace)
        ax.step(t, v, where="post", label=label)
    ax.set_xlabel("seconds")
    ax.set_ylabel("best cost")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    files.savefig(fig, path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_link_histogram(loads: dict[str, np.ndarray], path: str | Path,
                        title: str = "bytes per link (paper 003 Fig. 11)") -> Path:
    """Histogram of per-link byte loads, one series per placement (PNG); links with no traffic
    are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    top = max(float(np.max(v)) for v in loads.values())
    bins = np.linspace(0, top * 1.02 if top > 0 else 1, 60).tolist()
    for label, v in loads.items():
        v = np.asarray(v, dtype=np.float64)
        ax.hist(v[v > 0], bins=bins, histtype="step", linewidth=1.5, label=f"{label} (max {int(v.max()):,})")
    ax.set_xlabel("bytes through a link")
    ax.set_ylabel("links")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files.savefig(fig, path, dpi=120)
    plt.close(fig)
    return Path(path)
