"""`netweave route`: compute deadlock-free routing tables, check them, exchange them with OpenSM."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from netweave._core import Topology
from netweave.cli.common import JsonOpt, UserError, err_console, working
from netweave.stages import routing, topology
from netweave.support import files

app = typer.Typer(
    help="Compute deadlock-free routing tables, check them, and exchange them with OpenSM.\n\n"
    "netweave route ENGINE TOPO -o ROUTES, with ENGINE one of: " + ", ".join(routing.ENGINES) + ".",
    no_args_is_help=True,
)

_ENGINE_HELP = {
    "shortest": "Shortest paths, next hop by the selection policy (1 VC; may deadlock).",
    "minhop": "OpenSM min-hop: shortest paths with port-load equalisation (1 VC; may deadlock).",
    "sssp": "Shortest paths over globally balanced link weights (1 VC; may deadlock).",
    "dfsssp": "SSSP paths spread over VC layers until every layer is acyclic.",
    "dor": "Dimension-order (e-cube) on mesh, torus, hypercube; dateline VCs on tori.",
    "dmodk": "D-mod-k on fat-trees, k-ary n-trees and PGFT.",
    "lsft": "The unique leaf-spine-leaf route of the Latin-square fat-tree.",
    "updown": "Up*/down* over a BFS tree from --root (Autonet orientation).",
    "prefix": "Prefix routing on the up*/down* BFS tree.",
    "dl": "Descending layers: up*/down* per layer, next layer at a down-up turn (--vcs layers).",
    "sbp": "Structured channel pools: VC + 1 per switch-to-switch transit.",
    "sbp-reduced": "Reduced structured channel pools: VC + 1 at switches with 3+ switch neighbours.",
    "lash": "LASH: per-pair layers keeping every layer's dependency graph acyclic.",
    "nue": "Nue: deadlock-free on any topology within any VC budget (one VC included).",
}


def _load_routes(topo: Topology, path: Path):
    return routing.load(topo, path)


def _make_engine_command(engine: str):
    def command(
        topology_file: Path = typer.Argument(..., help="Topology file."),
        output: Path | None = typer.Option(None, "-o", "--output", help="Routes file to write (netweave routes JSON)."),
        vcs: int = typer.Option(8, "--vcs", min=1, max=16, help="VC budget; engines needing more fail and say how many."),
        root: int = typer.Option(0, "--root", min=0, help="Root switch index (updown, prefix, dl)."),
        select: str = typer.Option("per-destination", "--select", help="Path selection: per-destination, low-port or balanced."),
        seed: int = typer.Option(0, "--seed", min=0, help="Seed for random choices."),
        lft: Path | None = typer.Option(None, "--lft", help="Also write the tables as an OpenSM opensm-lfts.dump file (tables only, no lanes)."),
        opensm: Path | None = typer.Option(
            None, "--opensm", help="Also write into this directory what OpenSM needs to install the routing with its lanes "
            "(opensm.conf, opensm-lfts.dump, qos-policy.conf): opensm -F DIR/opensm.conf.",
        ),
        spread_vcs: int | None = typer.Option(
            None, "--spread-vcs", min=1, max=16,
            help="updown only: inject each source host on VC (host index mod N), N <= --vcs (paper 002's multi-VC up*/down*).",
        ),
        as_json: bool = JsonOpt,
    ) -> None:
        if spread_vcs is not None and engine != "updown":
            raise UserError(f"--spread-vcs applies to updown only, not {engine}")
        from netweave.support.files import check_file

        for target in (output, lft):  # before routing, which can take minutes on a large fabric
            if target is not None:
                check_file(target)
        topo = topology.load(topology_file)
        if opensm is not None:
            files.check_dir(opensm, routing.OPENSM_FILES)
        with working(f"routing with {engine}", as_json):
            routes = routing.route(topo, engine, vcs, root, select, seed, spread_vcs)
            proof = routes.check()
            stats = routes.metrics()
        if output is not None:
            routing.save(routes, output)
        if lft is not None:
            routing.save_lft(routes, lft)
        summary = {"engine": routes.engine, **_check_summary(proof, stats)}
        if opensm is not None:
            summary["opensm"] = _save_opensm(routes, opensm, vcs, as_json)
        if as_json:
            print(json.dumps(summary, indent=2, sort_keys=True))
        else:
            _print_check(summary)

    command.__doc__ = _ENGINE_HELP.get(engine, engine)
    return command


for _engine in routing.ENGINES:
    app.command(_engine)(_make_engine_command(_engine))


def _save_opensm(routes, out_dir: Path, vcs: int, quiet: bool) -> dict:
    """Write the OpenSM files; say what they install, or why OpenSM cannot take the lanes."""
    written = routing.save_opensm(routes, out_dir, vcs)
    info = routing.opensm_install(routes, out_dir, vcs)
    info.pop("files")
    info["written"] = [str(p) for p in written]
    if not quiet:
        names = ", ".join(p.name for p in written)
        if info["installable"]:
            used = ", ".join(f"SL{sl} {n}" for sl, n in enumerate(info["pairs_per_sl"]) if n)
            print(f"wrote {out_dir}: {names} ({info['lanes']} lane{'s' if info['lanes'] > 1 else ''}; pairs per SL: {used}); "
                  f"opensm -F {out_dir / 'opensm.conf'}")
        else:
            err_console.print(f"warning: OpenSM cannot install the {routes.engine} lanes: {info['reason']}; "
                              f"{out_dir / 'opensm.conf'} configures OpenSM's {info['engine']} engine instead", highlight=False,
                              soft_wrap=True)
            print(f"wrote {out_dir}: {names}")
    return info


def _check_summary(proof: dict, stats: dict) -> dict:
    return {
        "deadlock_free": proof["deadlock_free"],
        "cycle": proof["cycle"],
        "dependencies": proof["dependencies"],
        **stats,
    }


def _print_check(summary: dict) -> None:
    verdict = "deadlock-free" if summary["deadlock_free"] else "CAN DEADLOCK"
    print(f"{summary['engine']}: {verdict}, {summary['vcs_used']} VC, hops avg {summary['avg_hops']:.4f} max {summary['max_hops']}, "
          f"{summary['non_minimal_pairs']} non-minimal pairs, path diversity {summary['path_diversity']:.3f}, "
          f"channel paths max {summary['max_channel_paths']} mean {summary['mean_channel_paths']:.2f}")
    if summary["cycle"]:
        print("cycle: " + " -> ".join(f"{c['from']}>{c['to']} vc{c['vc']}" for c in summary["cycle"]))


@app.command("check")
def route_check(
    topology_file: Path = typer.Argument(..., help="Topology file."),
    routes_file: Path = typer.Argument(..., help="Routes file (netweave routes JSON)."),
    as_json: bool = JsonOpt,
) -> None:
    """Prove a routing deadlock-free (or print a dependency cycle) and measure its paths."""
    topo = topology.load(topology_file)
    routes = _load_routes(topo, routes_file)
    with working("checking", as_json):
        summary = {"engine": routes.engine, **_check_summary(routes.check(), routes.metrics())}
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        _print_check(summary)


@app.command("import-lft")
def route_import_lft(
    topology_file: Path = typer.Argument(..., help="Topology file (the fabric OpenSM routed)."),
    lft_file: Path = typer.Argument(..., help="OpenSM opensm-lfts.dump file."),
    output: Path = typer.Option(..., "-o", "--output", help="Routes file to write."),
    qos: Path | None = typer.Option(
        None, "--qos", help="OpenSM QoS policy file installed with the tables: its service levels become the VCs (SL n = VC n).",
    ),
) -> None:
    """Import the tables OpenSM computed (and the service levels of its QoS policy), to check and measure them with netweave."""
    topo = topology.load(topology_file)
    routes = routing.load_lft(topo, lft_file)
    if qos is not None:
        routes = routing.apply_qos_policy(routes, qos)
    routing.save(routes, output)
    lanes = f", {routes.num_vcs} lanes from {qos.name}" if qos is not None else ""
    print(f"wrote {output}: tables of {topo.num_switches} switches for {topo.num_hosts} hosts{lanes}")


@app.command("export-lft")
def route_export_lft(
    topology_file: Path = typer.Argument(..., help="Topology file."),
    routes_file: Path = typer.Argument(..., help="Routes file (netweave routes JSON)."),
    output: Path = typer.Option(..., "-o", "--output", help="opensm-lfts.dump file to write (load with opensm -R file -U FILE)."),
) -> None:
    """Write routes as an OpenSM opensm-lfts.dump file (the forwarding tables only; export-opensm adds the lanes)."""
    topo = topology.load(topology_file)
    routing.save_lft(_load_routes(topo, routes_file), output)
    print(f"wrote {output}")


@app.command("export-opensm")
def route_export_opensm(
    topology_file: Path = typer.Argument(..., help="Topology file."),
    routes_file: Path = typer.Argument(..., help="Routes file (netweave routes JSON)."),
    out_dir: Path = typer.Option(..., "--out", help="Directory for opensm.conf, opensm-lfts.dump and qos-policy.conf."),
    vcs: int = typer.Option(8, "--vcs", min=1, max=15, help="Data VLs the fabric's ports have; a routing needing more is refused."),
    as_json: bool = JsonOpt,
) -> None:
    """Write what OpenSM needs to install routes with their lanes: tables, each path's service level, the SL-to-VL map."""
    topo = topology.load(topology_file)
    files.check_dir(out_dir, routing.OPENSM_FILES)
    info = _save_opensm(_load_routes(topo, routes_file), out_dir, vcs, as_json)
    if as_json:
        print(json.dumps(info, indent=2, sort_keys=True))
