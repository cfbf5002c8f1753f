"""The ``netweave`` command line: one sub-command per pipeline stage, plus ``plan``.

Bad input never prints a traceback: the cause goes to stderr as one line and the exit code is 2.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.console import Console

from netweave import plan as plan_mod
from netweave import report, routing, topology
from netweave._core import NetweaveError, Topology

app = typer.Typer(
    help="netweave: an interconnect lab for HPC cluster networks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
topo_app = typer.Typer(help="Build, inspect and convert topologies.", no_args_is_help=True)
app.add_typer(topo_app, name="topo")

err_console = Console(stderr=True)


class UserError(Exception):
    """A problem with the user's input, reported as one line with exit code 2."""


@contextmanager
def working(message: str) -> Iterator[None]:
    """A spinner on stderr for steps that may take more than a moment."""
    with err_console.status(message):
        yield


# --- topo: generators ------------------------------------------------------------------------

OutputOpt = typer.Option(None, "-o", "--output", help="File to write; the format follows the extension (.json .net .anynet .dot).")
BandwidthOpt = typer.Option(None, "--bandwidth", help="Set every link's bandwidth, Gbit/s.")
LatencyOpt = typer.Option(None, "--latency", help="Set every link's latency, ns.")
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON.")


def _emit(topo: Topology, output: Optional[Path], bandwidth: Optional[float], latency: Optional[float], as_json: bool = False) -> None:
    """Apply link overrides, then write `topo` to `output` or describe it on stdout."""
    if bandwidth is not None or latency is not None:
        specs = topo.link_specs()
        bw = bandwidth if bandwidth is not None else (float(specs[0][0]) if len(specs) else 100.0)
        lat = latency if latency is not None else (float(specs[0][1]) if len(specs) else 100.0)
        topo = topo.with_links(bw, lat)
    if output is not None:
        topology.save(topo, output)
        msg = f"wrote {output}: {topo.num_hosts} hosts, {topo.num_switches} switches, {topo.num_links} links"
        print(json.dumps({"output": str(output), "hosts": topo.num_hosts, "switches": topo.num_switches, "links": topo.num_links}) if as_json else msg)
    else:
        _print_info(topo, as_json)


@topo_app.command("lsft")
def topo_lsft(
    order: int = typer.Option(..., "--order", min=0, help="Order q of the projective plane (any prime power)."),
    two_sided: bool = typer.Option(False, "--two-sided", help="Use both sides of the spines (twice the servers)."),
    reduced: bool = typer.Option(False, "--reduced", help="Grid leaves only, spine L omitted (paper 000's S3 build)."),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """Latin-square fat-tree from PG(2, q): (q+1)(q²+q+1) servers, degree q+1."""
    _emit(topology.latin_square_fat_tree(order, two_sided, reduced), output, bandwidth, latency, as_json)


@topo_app.command("fattree")
def topo_fattree(
    degree: int = typer.Option(..., "--degree", min=0, help="Switch degree d = ports / 2."),
    levels: int = typer.Option(2, "--levels", min=0, help="2 or 3 switch levels."),
    two_sided: bool = typer.Option(False, "--two-sided", help="Use both sides of the top switches."),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """Fat-tree as in paper 000: d² (2-level) or d³ (3-level) servers, one-sided by default."""
    _emit(topology.fat_tree(degree, levels, two_sided), output, bandwidth, latency, as_json)


@topo_app.command("kary-ntree")
def topo_kary(
    k: int = typer.Option(..., "--k", min=0, help="Arity: k down and k up ports per switch."),
    n: int = typer.Option(..., "--n", min=0, help="Number of switch levels."),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """k-ary n-tree: k^n hosts, n levels of k^(n-1) switches."""
    _emit(topology.k_ary_n_tree(k, n), output, bandwidth, latency, as_json)


@topo_app.command("pgft")
def topo_pgft(
    spec: str = typer.Argument(..., help='PGFT in "h; m1,…,mh; w1,…,wh; p1,…,ph" notation, e.g. "2; 4,4; 1,4; 1,2".'),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """Parallel-ports generalised fat-tree (XGFT when the p list is left out)."""
    _emit(topology.pgft(spec), output, bandwidth, latency, as_json)


@topo_app.command("mesh")
def topo_mesh(
    dims: str = typer.Option(..., "--dims", help="Routers per dimension, e.g. 4x4 or 8x8x8."),
    hosts_per_router: int = typer.Option(1, "--hosts-per-router", min=0, help="Hosts attached to each router."),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """n-dimensional mesh."""
    _emit(topology.mesh(topology.parse_dims(dims), hosts_per_router), output, bandwidth, latency, as_json)


@topo_app.command("torus")
def topo_torus(
    dims: str = typer.Option(..., "--dims", help="Routers per dimension, e.g. 16x16x16."),
    hosts_per_router: int = typer.Option(1, "--hosts-per-router", min=0, help="Hosts attached to each router."),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """n-dimensional torus (wrap-around in every dimension of size ≥ 2)."""
    _emit(topology.torus(topology.parse_dims(dims), hosts_per_router), output, bandwidth, latency, as_json)


@topo_app.command("hypercube")
def topo_hypercube(
    dim: int = typer.Option(..., "--dim", min=0, help="Dimension n: 2^n routers."),
    hosts_per_router: int = typer.Option(1, "--hosts-per-router", min=0),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """Binary hypercube."""
    _emit(topology.hypercube(dim, hosts_per_router), output, bandwidth, latency, as_json)


@topo_app.command("hyperx")
def topo_hyperx(
    dims: str = typer.Option(..., "--dims", help="Routers per dimension, e.g. 4x4."),
    trunking: int = typer.Option(1, "--trunking", min=0, help="Parallel links between connected routers."),
    hosts_per_router: int = typer.Option(1, "--hosts-per-router", min=0),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """HyperX: routers fully connected along every dimension."""
    _emit(topology.hyperx(topology.parse_dims(dims), trunking, hosts_per_router), output, bandwidth, latency, as_json)


@topo_app.command("dragonfly")
def topo_dragonfly(
    a: int = typer.Option(..., "--a", min=0, help="Routers per group."),
    p: int = typer.Option(..., "--p", min=0, help="Hosts per router."),
    h: int = typer.Option(..., "--h", min=0, help="Global links per router."),
    g: Optional[int] = typer.Option(None, "--g", min=0, help="Groups (default a·h+1)."),
    arrangement: str = typer.Option("absolute", "--arrangement", help="Global links: absolute, relative or circulant."),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """Dragonfly (Kim et al.): all-to-all groups joined by global links."""
    _emit(topology.dragonfly(a, p, h, g, arrangement), output, bandwidth, latency, as_json)


@topo_app.command("random-regular")
def topo_random_regular(
    switches: int = typer.Option(..., "--switches", min=0),
    degree: int = typer.Option(..., "--degree", min=0, help="Switch-to-switch links per switch."),
    hosts_per_switch: int = typer.Option(1, "--hosts-per-switch", min=0),
    seed: int = typer.Option(0, "--seed", min=0),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """Random regular switch graph (Jellyfish-like), reproducible per seed."""
    _emit(topology.random_regular(switches, degree, hosts_per_switch, seed), output, bandwidth, latency, as_json)


@topo_app.command("irregular")
def topo_irregular(
    switches: int = typer.Option(16, "--switches", min=0),
    max_links: int = typer.Option(4, "--max-links", min=0, help="Most switch-to-switch links per switch."),
    diameter: int = typer.Option(6, "--diameter", min=0, help="Exact switch-graph diameter wanted."),
    hosts_per_switch: int = typer.Option(4, "--hosts-per-switch", min=0),
    seed: int = typer.Option(0, "--seed", min=0),
    output: Optional[Path] = OutputOpt, bandwidth: Optional[float] = BandwidthOpt, latency: Optional[float] = LatencyOpt, as_json: bool = JsonOpt,
) -> None:
    """Irregular fabric standing in for paper 002's topologies A and B (defaults: its shape)."""
    _emit(topology.irregular(switches, max_links, diameter, hosts_per_switch, seed), output, bandwidth, latency, as_json)


def _floats(text: str, name: str, count: int) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise UserError(f"{name} must be comma-separated numbers, got '{text}'") from None
    if len(values) == 1:
        values = values * count
    if len(values) != count:
        raise UserError(f"{name} needs 1 or {count} values, got {len(values)}")
    return values


@topo_app.command("tree")
def topo_tree(
    fanouts: Optional[str] = typer.Option(None, "--fanouts", help="Children per switch at each depth, e.g. 7 (one core, 7 edge switches) or 2,4."),
    hosts_per_switch: int = typer.Option(14, "--hosts-per-switch", min=0, help="Hosts on each edge switch."),
    bandwidth_levels: str = typer.Option("10", "--switch-bandwidth", help="Switch-link Gbit/s, one value or one per depth."),
    latency_levels: str = typer.Option("5000", "--switch-latency", help="Switch-link latency ns, one value or one per depth."),
    host_bandwidth: float = typer.Option(1.0, "--host-bandwidth", help="Host-link Gbit/s."),
    host_latency: float = typer.Option(5000.0, "--host-latency", help="Host-link latency ns."),
    clusters: Optional[str] = typer.Option(None, "--clusters", help='Several clusters joined by WAN links: "name:hosts[:gbps],…" or "intrigger".'),
    wan_latency: Optional[float] = typer.Option(None, "--wan-latency", help="Latency of each WAN link, ns (cluster to cluster crosses two; with --clusters)."),
    output: Optional[Path] = OutputOpt, as_json: bool = JsonOpt,
) -> None:
    """Tree of Ethernet switches with per-link bandwidth and latency (paper 004), or several
    such clusters joined by WAN links."""
    if clusters is not None:
        if fanouts is not None:
            raise UserError("give either --fanouts (one tree) or --clusters (several), not both")
        _emit(topology.multi_cluster(clusters, wan_latency), output, None, None, as_json)
        return
    try:
        fan = [int(v) for v in (fanouts or "7").split(",")]
    except ValueError:
        raise UserError(f"--fanouts must be comma-separated integers, got '{fanouts}'") from None
    bws = _floats(bandwidth_levels, "--switch-bandwidth", len(fan))
    lats = _floats(latency_levels, "--switch-latency", len(fan))
    _emit(topology.switch_tree(fan, hosts_per_switch, bws, lats, host_bandwidth, host_latency), output, None, None, as_json)


# --- topo: inspection ------------------------------------------------------------------------


def _print_info(topo: Topology, as_json: bool) -> None:
    with working(f"measuring {topo.name}"):
        data = topology.info(topo)
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return
    avg = data["average_distance"]
    print(f"{data['name']}  (family {data['family']})")
    print(f"  hosts {data['hosts']}, switches {data['switches']}, links {data['links']} "
          f"({data['switch_links']} switch-switch, {data['host_links']} host)")
    print(f"  switch degree {data['min_switch_degree']}..{data['max_switch_degree']}, radix {data['max_switch_radix']}")
    print(f"  diameter {data['diameter']} switch hops ({data['host_diameter']} links host to host), "
          f"average distance {avg:.4f}" if avg is not None else "  disconnected switch graph")


@topo_app.command("info")
def topo_info(
    file: Path = typer.Argument(..., help="Topology file (.json .net .anynet .dot)."),
    fmt: Optional[str] = typer.Option(None, "--format", help="Override the format implied by the extension."),
    as_json: bool = JsonOpt,
) -> None:
    """Counts, degrees, diameter and average distance of a topology file."""
    _print_info(topology.load(file, fmt), as_json)


@topo_app.command("convert")
def topo_convert(
    src: Path = typer.Argument(..., help="Input file."),
    dst: Path = typer.Argument(..., help="Output file."),
    from_fmt: Optional[str] = typer.Option(None, "--from", help="Input format (default: by extension)."),
    to_fmt: Optional[str] = typer.Option(None, "--to", help="Output format (default: by extension)."),
) -> None:
    """Convert between topology formats: json, ibnet (ibnetdiscover / ibsim), anynet (BookSim), dot."""
    topo = topology.load(src, from_fmt)
    topology.save(topo, dst, to_fmt)
    print(f"wrote {dst}: {topo.num_hosts} hosts, {topo.num_switches} switches, {topo.num_links} links")


@topo_app.command("cost")
def topo_cost(
    degree: int = typer.Option(..., "--degree", min=0, help="Switch degree d = ports / 2."),
    as_json: bool = JsonOpt,
) -> None:
    """Paper 000's cost table: servers, switches and links per topology at degree d."""
    rows = topology.cost_table(degree)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'topology':<24}{'servers':>9}{'switches':>10}{'(total)':>9}{'links':>8}")
    for r in rows:
        print(f"{r['family']:<24}{r['servers']:>9}{r['switches_printed']:>10}{r['switches_total']:>9}{r['links_with_servers']:>8}")
    print("switches: as printed in paper 000; (total): leaves + spines for the LSFT")


@topo_app.command("plane")
def topo_plane(
    order: int = typer.Option(..., "--order", min=0, help="Order q (prime power)."),
    as_json: bool = JsonOpt,
) -> None:
    """The projective plane PG(2, q): its lines, and a check of the four axioms."""
    plane = topology.ProjectivePlane(order)
    lines = {plane.line_label(l): [plane.point_label(p) for p in plane.points_of_line(l)] for l in range(plane.num_points)}
    violation = plane.check_axioms()
    if as_json:
        print(json.dumps({"order": order, "points": plane.num_points, "lines": lines, "axioms_hold": violation is None}, indent=2))
        return
    for name, pts in lines.items():
        print(f"{name}: {' '.join(pts)}")
    print("axioms hold" if violation is None else f"axiom violated: {violation}")


# --- route -----------------------------------------------------------------------------------

route_app = typer.Typer(
    help="Compute deadlock-free routing tables, check them, and exchange them with OpenSM.\n\n"
    "netweave route ENGINE TOPO -o ROUTES, with ENGINE one of: " + ", ".join(routing.ENGINES) + ".",
    no_args_is_help=True,
)
app.add_typer(route_app, name="route")

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
        as_json: bool = JsonOpt,
    ) -> None:
        topo = topology.load(topology_file)
        with working(f"routing with {engine}"):
            routes = routing.route(topo, engine, vcs, root, select, seed)
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
    route_app.command(_engine)(_make_engine_command(_engine))


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


@route_app.command("check")
def route_check(
    topology_file: Path = typer.Argument(..., help="Topology file."),
    routes_file: Path = typer.Argument(..., help="Routes file (netweave routes JSON)."),
    as_json: bool = JsonOpt,
) -> None:
    """Prove a routing deadlock-free (or print a dependency cycle) and measure its paths."""
    topo = topology.load(topology_file)
    routes = _load_routes(topo, routes_file)
    with working("checking"):
        summary = {"engine": routes.engine, **_check_summary(routes.check(), routes.metrics())}
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        _print_check(summary)


@route_app.command("import-lft")
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


@route_app.command("export-lft")
def route_export_lft(
    topology_file: Path = typer.Argument(..., help="Topology file."),
    routes_file: Path = typer.Argument(..., help="Routes file (netweave routes JSON)."),
    output: Path = typer.Option(..., "-o", "--output", help="opensm-lfts.dump file to write (load with opensm -R file -U FILE)."),
) -> None:
    """Write routes as an OpenSM opensm-lfts.dump file."""
    topo = topology.load(topology_file)
    routing.save_lft(_load_routes(topo, routes_file), output)
    print(f"wrote {output}")


# --- plan ------------------------------------------------------------------------------------


@app.command("plan")
def plan_cmd(
    topology_file: Optional[Path] = typer.Argument(None, help="Topology file; default: the built-in LSFT of order 3 (52 servers)."),
    bytes_per_pair: int = typer.Option(plan_mod.DEFAULT_BYTES, "--bytes", min=1, max=2**63, help="Bytes each rank sends to each other rank."),
    engine: Optional[str] = typer.Option(None, "--engine", help="Routing engine (default: the deadlock-free engine suited to the topology)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also write report.json, report.md, phases.csv and topology.json here."),
) -> None:
    """Route the fabric, run an all-to-all over all hosts and report link contention."""
    topo = topology.load(topology_file) if topology_file is not None else topology.example_cluster()
    with working("routing and analysing"):
        result = plan_mod.plan(topo, bytes_per_pair, engine)
    print(report.to_json(result) if as_json else report.to_text(result), end="")
    if out is not None:
        for path in report.write_files(result, out, topo.to_text("json")):
            if not as_json:
                print(f"wrote {path}")


def main() -> None:
    """Entry point: run the app, turning input errors into one line and exit code 2."""
    try:
        # Not standalone: usage errors come back as exceptions instead of a multi-line panel.
        app(standalone_mode=False)
    except typer.TyperException as e:  # unknown command, missing or malformed option
        context = getattr(e, "ctx", None)
        if e.format_message():
            hint = f" (see '{context.command_path} --help')" if context is not None else ""
            _fail(e.format_message() + hint)
        sys.exit(2)  # the help text was already printed (a group called without a command)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except (NetweaveError, UserError) as e:
        _fail(str(e))
    except OverflowError:
        _fail("a number is out of range for this parameter (sizes are 32-bit, seeds 64-bit)")
    except OSError as e:
        _fail(f"{e.strerror or e}: {e.filename}" if e.filename else str(e))


def _fail(message: str) -> None:
    # Plain print, not rich: the message must stay on one line whatever the terminal width.
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
