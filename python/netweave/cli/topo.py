"""`netweave topo`: build, inspect and convert topologies."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from netweave import _core
from netweave._core import Topology
from netweave.cli.common import JsonOpt, UserError, err_console, working
from netweave.stages import topology
from netweave.support import files

app = typer.Typer(help="Build, inspect and convert topologies.", no_args_is_help=True)


# --- topo: generators ------------------------------------------------------------------------

OutputOpt = typer.Option(None, "-o", "--output", help="File to write; the format follows the extension (.json .net .anynet .dot).")
BandwidthOpt = typer.Option(None, "--bandwidth", help="Set every link's bandwidth, Gbit/s.")
LatencyOpt = typer.Option(None, "--latency", help="Set every link's latency, ns.")
LinkLayerOpt = typer.Option(None, "--link-layer", help="ethernet (drop-tail port buffers, TCP losses) or infiniband "
                                                       "(lossless, credit flow control); default the family's (switch trees: ethernet; others: infiniband).")
PortBufferOpt = typer.Option(None, "--buffer", help="Bytes a switch port queues before it drops (Ethernet; default 65536).")


def _with_switching(topo: Topology, link_layer: str | None, buffer: int | None) -> Topology:
    """`topo` with the link layer and port buffer the options state (see docs/topology-json.md)."""
    if buffer is not None and buffer <= 0:
        raise UserError(f"--buffer {buffer}: a port buffer must be a positive number of bytes")
    if link_layer is None and buffer is None:
        return topo
    return topo.with_switching(link_layer or topo.link_layer, buffer)


def _emit(topo: Topology, output: Path | None, bandwidth: float | None, latency: float | None, as_json: bool = False,
          link_layer: str | None = None, buffer: int | None = None) -> None:
    """Apply link and switching overrides, then write `topo` to `output` or describe it on stdout."""
    topo = _with_switching(topo, link_layer, buffer)
    if bandwidth is not None and not (math.isfinite(bandwidth) and bandwidth > 0):
        raise UserError(f"--bandwidth {bandwidth}: give a positive, finite number of Gbit/s")
    if latency is not None and not (math.isfinite(latency) and latency >= 0):
        raise UserError(f"--latency {latency}: give a finite number of ns, at least 0")
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


@app.command("lsft")
def topo_lsft(
    order: int = typer.Option(..., "--order", min=0, help="Order q of the projective plane (any prime power)."),
    two_sided: bool = typer.Option(False, "--two-sided", help="Use both sides of the spines (twice the servers)."),
    reduced: bool = typer.Option(False, "--reduced", help="Grid leaves only, spine L omitted (paper 000's S3 build)."),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """Latin-square fat-tree from PG(2, q): (q+1)(q²+q+1) servers, degree q+1."""
    _emit(topology.latin_square_fat_tree(order, two_sided, reduced), output, bandwidth, latency, as_json, link_layer, buffer)


@app.command("fattree")
def topo_fattree(
    degree: int = typer.Option(..., "--degree", min=0, help="Switch degree d = ports / 2."),
    levels: int = typer.Option(2, "--levels", min=0, help="2 or 3 switch levels."),
    two_sided: bool = typer.Option(False, "--two-sided", help="Use both sides of the top switches."),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """Fat-tree as in paper 000: d² (2-level) or d³ (3-level) servers, one-sided by default."""
    _emit(topology.fat_tree(degree, levels, two_sided), output, bandwidth, latency, as_json, link_layer, buffer)


@app.command("kary-ntree")
def topo_kary(
    k: int = typer.Option(..., "--k", min=0, help="Arity: k down and k up ports per switch."),
    n: int = typer.Option(..., "--n", min=0, help="Number of switch levels."),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """k-ary n-tree: k^n hosts, n levels of k^(n-1) switches."""
    _emit(topology.k_ary_n_tree(k, n), output, bandwidth, latency, as_json, link_layer, buffer)


@app.command("pgft")
def topo_pgft(
    spec: str = typer.Argument(..., help='PGFT in "h; m1,…,mh; w1,…,wh; p1,…,ph" notation, e.g. "2; 4,4; 1,4; 1,2".'),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """Parallel-ports generalised fat-tree (XGFT when the p list is left out)."""
    _emit(topology.pgft(spec), output, bandwidth, latency, as_json, link_layer, buffer)


@app.command("mesh")
def topo_mesh(
    dims: str = typer.Option(..., "--dims", help="Routers per dimension, e.g. 4x4 or 8x8x8."),
    hosts_per_router: int = typer.Option(1, "--hosts-per-router", min=0, help="Hosts attached to each router."),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """n-dimensional mesh."""
    _emit(topology.mesh(topology.parse_dims(dims), hosts_per_router), output, bandwidth, latency, as_json, link_layer, buffer)


@app.command("torus")
def topo_torus(
    dims: str = typer.Option(..., "--dims", help="Routers per dimension, e.g. 16x16x16."),
    hosts_per_router: int = typer.Option(1, "--hosts-per-router", min=0, help="Hosts attached to each router."),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """n-dimensional torus (wrap-around in every dimension of size ≥ 2)."""
    _emit(topology.torus(topology.parse_dims(dims), hosts_per_router), output, bandwidth, latency, as_json, link_layer, buffer)


@app.command("hypercube")
def topo_hypercube(
    dim: int = typer.Option(..., "--dim", min=0, help="Dimension n: 2^n routers."),
    hosts_per_router: int = typer.Option(1, "--hosts-per-router", min=0),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """Binary hypercube."""
    _emit(topology.hypercube(dim, hosts_per_router), output, bandwidth, latency, as_json, link_layer, buffer)


@app.command("hyperx")
def topo_hyperx(
    dims: str = typer.Option(..., "--dims", help="Routers per dimension, e.g. 4x4."),
    trunking: int = typer.Option(1, "--trunking", min=0, help="Parallel links between connected routers."),
    hosts_per_router: int = typer.Option(1, "--hosts-per-router", min=0),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """HyperX: routers fully connected along every dimension."""
    _emit(topology.hyperx(topology.parse_dims(dims), trunking, hosts_per_router), output, bandwidth, latency, as_json, link_layer, buffer)


@app.command("dragonfly")
def topo_dragonfly(
    a: int = typer.Option(..., "--a", min=0, help="Routers per group."),
    p: int = typer.Option(..., "--p", min=0, help="Hosts per router."),
    h: int = typer.Option(..., "--h", min=0, help="Global links per router."),
    g: int | None = typer.Option(None, "--g", min=0, help="Groups (default a·h+1)."),
    arrangement: str = typer.Option("absolute", "--arrangement", help="Global links: absolute, relative or circulant."),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """Dragonfly (Kim et al.): all-to-all groups joined by global links."""
    _emit(topology.dragonfly(a, p, h, g, arrangement), output, bandwidth, latency, as_json, link_layer, buffer)


@app.command("random-regular")
def topo_random_regular(
    switches: int = typer.Option(..., "--switches", min=0),
    degree: int = typer.Option(..., "--degree", min=0, help="Switch-to-switch links per switch."),
    hosts_per_switch: int = typer.Option(1, "--hosts-per-switch", min=0),
    seed: int = typer.Option(0, "--seed", min=0),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """Random regular switch graph (Jellyfish-like), reproducible per seed."""
    _emit(topology.random_regular(switches, degree, hosts_per_switch, seed), output, bandwidth, latency, as_json, link_layer, buffer)


@app.command("irregular")
def topo_irregular(
    switches: int = typer.Option(16, "--switches", min=0),
    max_links: int = typer.Option(4, "--max-links", min=0, help="Most switch-to-switch links per switch."),
    diameter: int = typer.Option(6, "--diameter", min=0, help="Exact switch-graph diameter wanted."),
    hosts_per_switch: int = typer.Option(4, "--hosts-per-switch", min=0),
    seed: int = typer.Option(0, "--seed", min=0),
    output: Path | None = OutputOpt, bandwidth: float | None = BandwidthOpt, latency: float | None = LatencyOpt, as_json: bool = JsonOpt,
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
) -> None:
    """Irregular fabric standing in for paper 002's topologies A and B (defaults: its shape)."""
    _emit(topology.irregular(switches, max_links, diameter, hosts_per_switch, seed), output, bandwidth, latency, as_json, link_layer, buffer)


def _floats(text: str, name: str, count: int) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise UserError(f"{name} must be comma-separated numbers, got '{text}'") from None
    if len(values) == 1:
        values = values * count
    if len(values) != count:
        wanted = "1 value" if count == 1 else f"1 value or {count} (one per switch level)"
        raise UserError(f"{name} '{text}': needs {wanted}, got {len(values)}")
    return values


@app.command("tree")
def topo_tree(
    fanouts: str | None = typer.Option(None, "--fanouts", help="Children per switch at each depth, e.g. 7 (one core, 7 edge switches) or 2,4."),
    hosts_per_switch: int = typer.Option(14, "--hosts-per-switch", min=0, help="Hosts on each edge switch."),
    bandwidth_levels: str = typer.Option("10", "--switch-bandwidth", help="Switch-link Gbit/s, one value or one per depth."),
    latency_levels: str = typer.Option("5000", "--switch-latency", help="Switch-link latency ns, one value or one per depth."),
    host_bandwidth: float = typer.Option(1.0, "--host-bandwidth", help="Host-link Gbit/s."),
    host_latency: float = typer.Option(5000.0, "--host-latency", help="Host-link latency ns."),
    clusters: str | None = typer.Option(None, "--clusters", help='Several clusters joined by WAN links: "name:hosts[:gbps],…" , "intrigger" (Table 6.1) or "intrigger-6.2[:K]" (the first K clusters of Table 6.2).'),
    wan_latency: float | None = typer.Option(None, "--wan-latency", help="Latency of each WAN link, ns (cluster to cluster crosses two; with --clusters)."),
    link_layer: str | None = LinkLayerOpt, buffer: int | None = PortBufferOpt,
    output: Path | None = OutputOpt, as_json: bool = JsonOpt,
) -> None:
    """Tree of Ethernet switches with per-link bandwidth and latency (paper 004), or several
    such clusters joined by WAN links."""
    if clusters is not None:
        if fanouts is not None:
            raise UserError("give either --fanouts (one tree) or --clusters (several), not both")
        _emit(topology.multi_cluster(clusters, wan_latency), output, None, None, as_json, link_layer, buffer)
        return
    try:
        fan = [int(v) for v in (fanouts or "7").split(",")]
    except ValueError:
        raise UserError(f"--fanouts must be comma-separated integers, got '{fanouts}'") from None
    bws = _floats(bandwidth_levels, "--switch-bandwidth", len(fan))
    lats = _floats(latency_levels, "--switch-latency", len(fan))
    tree = topology.switch_tree(fan, hosts_per_switch, bws, lats, host_bandwidth, host_latency)
    _emit(tree, output, None, None, as_json, link_layer, buffer)


# --- topo: inspection ------------------------------------------------------------------------


def _print_info(topo: Topology, as_json: bool) -> None:
    with working(f"measuring {topo.name}", as_json):
        data = topology.info(topo)
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return
    avg = data["average_distance"]
    print(f"{data['name']}  (family {data['family']})")
    print(f"  hosts {data['hosts']}, switches {data['switches']}, links {data['links']} "
          f"({data['switch_links']} switch-switch, {data['host_links']} host)")
    print(f"  switch degree {data['min_switch_degree']}..{data['max_switch_degree']}, radix {data['max_switch_radix']}")
    if data.get("distances_skipped"):
        print(f"  {'connected' if data['connected'] else 'disconnected'} switch graph; {data['distances_skipped']}")
        return
    print(f"  diameter {data['diameter']} switch hops ({data['host_diameter']} links host to host), "
          f"average distance {avg:.4f}" if avg is not None else "  disconnected switch graph")


@app.command("info")
def topo_info(
    file: Path = typer.Argument(..., help="Topology file (.json .net .anynet .dot)."),
    fmt: str | None = typer.Option(None, "--format", help="Override the format implied by the extension."),
    as_json: bool = JsonOpt,
) -> None:
    """Counts, degrees, diameter and average distance of a topology file."""
    _print_info(topology.load(file, fmt), as_json)


@app.command("convert")
def topo_convert(
    src: Path = typer.Argument(..., help="Input file."),
    dst: Path = typer.Argument(..., help="Output file."),
    from_fmt: str | None = typer.Option(None, "--from", help="Input format (default: by extension)."),
    to_fmt: str | None = typer.Option(None, "--to", help="Output format (default: by extension)."),
    lossy: bool = typer.Option(False, "--lossy", help="Write even when the output format cannot hold every link's "
                               "bandwidth or latency (ibnet: IB rates only, no latency); says what was lost."),
) -> None:
    """Convert between topology formats: json, ibnet (ibnetdiscover / ibsim), anynet (BookSim), dot.

    A conversion that would change what the fabric says (a 1 Gbit/s link has no IB rate) is
    refused, naming what would be lost, unless --lossy."""
    files.check_file(dst)
    topo = topology.load(src, from_fmt)
    fmt = to_fmt or _core.format_from_path(str(dst))
    lost = topology.lost_in(topo, topo.to_text(fmt), fmt)
    if lost and not lossy:
        raise UserError(f"{dst}: the {fmt} format cannot hold {'; '.join(lost)} (write .json to keep them, or pass --lossy)")
    topology.save(topo, dst, fmt, lossy=True)
    if lost:
        err_console.file.write(f"warning: {dst}: lost {'; '.join(lost)}\n")
    print(f"wrote {dst}: {topo.num_hosts} hosts, {topo.num_switches} switches, {topo.num_links} links")


@app.command("cost")
def topo_cost(
    degree: int = typer.Option(..., "--degree", min=2, max=2**16, help="Switch degree d = ports / 2."),
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


@app.command("plane")
def topo_plane(
    order: int = typer.Option(..., "--order", min=0, help="Order q (prime power)."),
    as_json: bool = JsonOpt,
) -> None:
    """The projective plane PG(2, q): its lines, and a check of the four axioms."""
    plane = topology.ProjectivePlane(order)
    lines = {plane.line_label(k): [plane.point_label(p) for p in plane.points_of_line(k)] for k in range(plane.num_points)}
    violation = plane.check_axioms()
    if as_json:
        print(json.dumps({"order": order, "points": plane.num_points, "lines": lines, "axioms_hold": violation is None}, indent=2))
        return
    for name, pts in lines.items():
        print(f"{name}: {' '.join(pts)}")
    print("axioms hold" if violation is None else f"axiom violated: {violation}")
