"""Routing: forwarding tables ``out_port[switch][dest host]`` plus a VC policy.

>>> import netweave
>>> topo = netweave.topology.torus([4, 4])
>>> routes = netweave.routing.route(topo, "dor")
>>> routes.num_vcs, routes.check()["deadlock_free"]
(2, True)
"""

from __future__ import annotations

from netweave import _core

#: Engine names `route` accepts, in CLI order.
ENGINES: tuple[str, ...] = tuple(_core.routing_engines())

#: Path-selection policies for engines with several legal next hops.
SELECTION_POLICIES: tuple[str, ...] = tuple(_core.selection_policies())


def route(
    topology: _core.Topology,
    engine: str = "minhop",
    vcs: int = 8,
    root: int = 0,
    select: str = "per-destination",
    seed: int = 0,
    spread_vcs: int | None = None,
) -> _core.RoutingTable:
    """Compute forwarding tables for `topology` with the named engine.

    `vcs` is the VC budget, `root` the root switch of tree-based engines (up*/down*, prefix,
    DL), `select` the path-selection policy. `spread_vcs` (``updown`` only) injects each source
    host on VC ``host index mod spread_vcs`` (paper 002's 2- and 4-VC up*/down*), at most `vcs`.
    """
    if spread_vcs is None:
        return _core.route(topology, engine, vcs, root, select, seed)
    return _core.route_updown_spread(topology, engine, spread_vcs, vcs, root, select, seed)


def default_engine(topology: _core.Topology) -> str:
    """The deadlock-free engine `netweave plan` uses for this topology: the structured engine of
    its structure (LSFT unique paths, D-mod-k, dimension order), else Nue, which works on any
    fabric within any VC budget."""
    return _core.default_engine(topology)


def save(routes: _core.RoutingTable, path, format: str = "json"):
    """Write a routes file atomically (:mod:`netweave.files`): ``json`` (netweave routes) or
    ``lft`` (OpenSM opensm-lfts.dump)."""
    from netweave import files

    return files.write_text(path, _core.write_routes(routes, format))


def save_lft(routes: _core.RoutingTable, path):
    """Write an OpenSM ``opensm-lfts.dump`` file (``opensm -R file -U FILE`` loads it)."""
    return save(routes, path, "lft")


def load(topology: _core.Topology, path, format: str = "json") -> _core.RoutingTable:
    """Read a routes file for `topology`; a file made for another fabric is refused."""
    from pathlib import Path

    return _core.read_routes(topology, Path(path).read_text(), format)


def load_lft(topology: _core.Topology, path) -> _core.RoutingTable:
    """Import the tables of an OpenSM ``opensm-lfts.dump`` file computed on `topology`."""
    return load(topology, path, "lft")
