"""Routing: forwarding tables ``out_port[switch][dest host]`` plus a VC policy.

>>> import netweave
>>> topo = netweave.stages.topology.torus([4, 4])
>>> routes = netweave.stages.routing.route(topo, "dor")
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
    """Write a routes file atomically (:mod:`netweave.support.files`): ``json`` (netweave routes) or
    ``lft`` (OpenSM opensm-lfts.dump)."""
    from netweave.support import files

    return files.write_text(path, _core.write_routes(routes, format))


def save_lft(routes: _core.RoutingTable, path):
    """Write an OpenSM ``opensm-lfts.dump`` file (``opensm -R file -U FILE`` loads it)."""
    return save(routes, path, "lft")


#: The files :func:`save_opensm` may write, in the order it lists them.
OPENSM_FILES: tuple[str, ...] = ("opensm.conf", "opensm-lfts.dump", "qos-policy.conf", "torus-2QoS.conf")


def opensm_install(routes: _core.RoutingTable, out_dir, vcs: int = 8) -> dict:
    """What OpenSM needs to install `routes` with their lanes on a fabric whose ports have `vcs`
    data VLs, without writing anything: ``installable``, ``lanes``, ``pairs_per_sl``; for a
    routing whose VC changes inside the network (a torus dateline, descending layers, channel
    pools), which OpenSM cannot take from files, the ``reason`` and the OpenSM ``engine`` that
    gives an equivalent deadlock-free routing; and ``files``, name → text, with ``opensm.conf``
    naming the others inside `out_dir`. A routing needing more lanes than `vcs` raises."""
    from pathlib import Path

    where = Path(out_dir).absolute()
    return _core.opensm_files(routes, vcs, str(where / "opensm-lfts.dump"), str(where / "qos-policy.conf"),
                              str(where / "torus-2QoS.conf"))


def save_opensm(routes: _core.RoutingTable, out_dir, vcs: int = 8) -> list:
    """Write into `out_dir` what OpenSM 3.3 needs to install `routes` *with their lanes*
    (``opensm -F out_dir/opensm.conf``): ``opensm.conf`` (the ``file`` routing engine, QoS on,
    SL n → VL n on every port), ``opensm-lfts.dump`` (the forwarding tables) and, when more than
    one lane is used, ``qos-policy.conf`` (the service level of every source–destination path).
    When OpenSM cannot take the lanes (a VC change inside the network), no tables are written:
    ``opensm.conf`` says why in its first lines and configures the equivalent OpenSM engine
    (with ``torus-2QoS.conf`` for torus-2QoS). Files of an earlier call that no longer apply are
    removed. Returns the paths written. A routing needing more lanes than `vcs` raises."""
    from pathlib import Path

    from netweave.support import files

    files.check_dir(out_dir, OPENSM_FILES)
    plan = opensm_install(routes, out_dir, vcs)  # refuses a routing the fabric cannot carry before anything is written
    out_dir = files.ensure_dir(out_dir, OPENSM_FILES)
    written = [files.write_text(Path(out_dir) / name, plan["files"][name]) for name in OPENSM_FILES
               if name in plan["files"]]
    for stale in (Path(out_dir) / name for name in OPENSM_FILES if name not in plan["files"]):
        stale.unlink(missing_ok=True)
    return written


def apply_qos_policy(routes: _core.RoutingTable, path) -> _core.RoutingTable:
    """`routes` with the service levels of an OpenSM QoS policy file as their VCs (SL n = VC n,
    as :func:`save_opensm` maps them): what the fabric runs once OpenSM installed both. A policy
    naming ports of another fabric is refused."""
    return _core.apply_qos_policy(routes, _core.read_text_file(str(path)))


def load(topology: _core.Topology, path, format: str = "json") -> _core.RoutingTable:
    """Read a routes file for `topology`; a file made for another fabric is refused."""
    from netweave.support import files

    with files.naming(path):
        return _core.read_routes(topology, _core.read_text_file(str(path)), format)


def load_lft(topology: _core.Topology, path) -> _core.RoutingTable:
    """Import the tables of an OpenSM ``opensm-lfts.dump`` file computed on `topology`."""
    return load(topology, path, "lft")
