"""`netweave route`: compute deadlock-free routing tables, check them, exchange them with OpenSM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from netweave import routing, topology
from netweave._core import Topology
from netweave.cli.common import JsonOpt, UserError, working

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
        output: Optional[Path] = typer.Option(None, "-o", "--output", help="Routes file to write (netweave routes JSON)."),
        vcs: int = typer.Option(8, "--vcs", min=1, max=16, help="VC budget; engines needing more fail and say how many."),
        root: int = typer.Option(0, "--root", min=0, help="Root switch index (updown, prefix, dl)."),
        select: str = typer.Option("per-destination", "--select", help="Path selection: per-destination, low-port or balanced."),
        seed: int = typer.Option(0, "--seed", min=0, help="Seed for random choices."),
        lft: Optional[Path] = typer.Option(None, "--lft", help="Also write the tables as an OpenSM opensm-lfts.dump file."),
        spread_vcs: Optional[int] = typer.Option(
            None, "--spread-vcs", min=1, max=16,
            help="updown only: inject each source host on VC (host index mod N), N <= --vcs (paper 002's multi-VC up*/down*).",
        ),
        as_json: bool = JsonOpt,
    ) -> None:
        if spread_vcs is not None and engine != "updown":
            raise UserError(f"--spread-vcs applies to updown only, not {engine}")
        from netweave.files import check_file

        for target in (output, lft):  # before routing, which can take minutes on a large fabric
            if target is not None:
                check_file(target)
        topo = topology.load(topology_file)
        with working(f"routing with {engine}", as_json):
            routes = routing.route(topo, engine, vcs, root, select, seed, spread_vcs)
            proof = routes.check()
            stats = routes.metrics()
        if output is not None:
            routing.save(routes, output)
        if lft is not None:
            routing.save_lft(routes, lft)
        summary = {"engine": routes.engine, **_check_summary(proof, stats)}
        if as_json:
            print(json.dumps(summary, indent=2, sort_keys=True))
        else:
            _print_check(summary)

    command.__doc__ = _ENGINE_HELP.get(engine, engine)
    return command


for _engine in routing.ENGINES:
    app.command(_engine)(_make_engine_command(_engine))


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
) -> None:
    """Import the tables OpenSM computed, to check and measure them with netweave."""
    topo = topology.load(topology_file)
    routes = routing.load_lft(topo, lft_file)
    routing.save(routes, output)
    print(f"wrote {output}: tables of {topo.num_switches} switches for {topo.num_hosts} hosts")


@app.command("export-lft")
def route_export_lft(
    topology_file: Path = typer.Argument(..., help="Topology file."),
    routes_file: Path = typer.Argument(..., help="Routes file (netweave routes JSON)."),
    output: Path = typer.Option(..., "-o", "--output", help="opensm-lfts.dump file to write (load with opensm -R file -U FILE)."),
) -> None:
    """Write routes as an OpenSM opensm-lfts.dump file."""
    topo = topology.load(topology_file)
    routing.save_lft(_load_routes(topo, routes_file), output)
    print(f"wrote {output}")
