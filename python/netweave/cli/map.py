"""`netweave map`: place a job's ranks on the hosts so its traffic crosses less (paper 003)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from netweave import _core
from netweave.cli.common import UserError, progress, working
from netweave.stages import mapping, routing, topology
from netweave.support import files


def _network(topo, routes_arg: str, slots_per_host: int):
    """The mapper's network for a routes file or an engine name (`dor` on a torus or mesh
    computes its routes from coordinates: no routing table, no size cap; see
    :func:`netweave.stages.mapping.network`)."""
    path = Path(routes_arg)
    if path.is_file():
        return mapping.MapNetwork(routing.load(topo, path), slots_per_host)
    if routes_arg.partition(":")[0] in routing.ENGINES:
        return mapping.network(topo, routes_arg, slots_per_host)
    raise UserError(f"routes '{routes_arg}' is neither a routes file nor an engine name ({', '.join(routing.ENGINES)})")


def _check_shape(net, shape: str) -> None:
    try:
        dims = [int(d) for d in shape.lower().split("x")]
    except ValueError:
        raise UserError(f"--shape '{shape}' is not like 16x16x16") from None
    lat = net.lattice
    if lat is None:
        raise UserError(f"--shape {shape} given, but the topology is not a torus or mesh")
    if lat["dims"] != dims:
        have = "x".join(str(d) for d in lat["dims"])
        kind = "torus" if lat["torus"] else "mesh"
        raise UserError(f"--shape {shape} does not match the topology, a {have} {kind}")


_PATTERN_HELP = ("Pattern file (.csv, .json, .trace, schedule JSON or .nws) or generator spec: "
                 + ", ".join(usage.split()[0] for usage in mapping.GENERATORS.values()) + ".")


def map_cmd(
    topology_file: Path = typer.Argument(..., help="Topology file."),
    routes_arg: str = typer.Argument(..., metavar="ROUTES", help="Routes file, or an engine name (e.g. dor, dor:per-destination)."),
    pattern_arg: str = typer.Argument(..., metavar="PATTERN", help=_PATTERN_HELP),
    output: Path | None = typer.Option(None, "-o", "--output", help="Map file to write."),
    fmt: str = typer.Option("rankfile", "--format", help="Map file format: " + ", ".join(mapping.FORMATS) + " (Open MPI, Fujitsu, Cray MPICH_RANK_ORDER, netweave)."),
    cost: str = typer.Option(mapping.DEFAULT_COST, "--cost", help="Objective: hops_x_max_channel (sum_hops x max_channel_bytes, paper 003's), hop_bytes, max_channel_bytes, step_max_channel_bytes (sum of each step's busiest channel), or a weighted sum like 'hop_bytes+1e3*max_channel_bytes'. The earlier names rmatt, max-link and step-max-link are read with a deprecation line."),
    seconds: float = typer.Option(60.0, "--time", min=0.0, help="Time budget in seconds."),
    evaluations: int | None = typer.Option(None, "--evals", min=1, help="Evaluation budget instead of time (reproducible; rounded up to one move per tempering chain)."),
    target: float | None = typer.Option(None, "--target", help="Stop once the cost is at or below this."),
    stall: float | None = typer.Option(None, "--stall", min=0.0, help="Stop after this many seconds without improvement."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**63 - 1, help="Seed for every random choice."),
    start: str = typer.Option("best", "--start", help="Starting placement: best (lowest cost of BISEM and the baselines), bisem, bisem-full, " + ", ".join(mapping.BASELINES) + "."),
    replicas: int = typer.Option(2, "--replicas", min=1, max=64, help="Tempering chains (threads) per process."),
    range_: int = typer.Option(4, "--range", min=0, help="Move box side in routers (paper's RANGE; 0 = whole network)."),
    swaps: int = typer.Option(2, "--swaps", min=2, max=64, help="Ranks rotated per move (paper's NUM_SWAPS)."),
    ranks_per_host: int = typer.Option(1, "--ranks-per-host", min=1, max=4096, help="Rank slots on every host."),
    num_ranks: int | None = typer.Option(None, "--ranks", min=1, help="Job size (default: from the pattern); ranks the pattern names must be below it."),
    shape: str | None = typer.Option(None, "--shape", help="Expected torus/mesh shape, e.g. 16x16x16; refused if the topology differs."),
    hostnames: Path | None = typer.Option(None, "--hostnames", help="File with one hostname per host index, for rankfiles."),
    mpi: bool = typer.Option(False, "--mpi", help="Run under mpirun: processes share one tempering ladder and exchange states (mpi4py)."),
    plots: Path | None = typer.Option(None, "--plots", help="Directory for cost-vs-time and link-load histogram PNGs."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Optimise where each rank runs: the best of BISEM and the baselines, then parallel-tempering annealing."""
    if fmt not in mapping.FORMATS:
        raise UserError(f"unknown --format '{fmt}' (use {', '.join(mapping.FORMATS)})")
    # Every budget must be a finite number: `--time inf` would never stop, and a NaN
    # comparison never holds, so `--target nan` or `--stall nan` would silently do nothing.
    for option, value in (("--time", seconds), ("--target", target), ("--stall", stall)):
        if value is not None and not math.isfinite(value):
            raise UserError(f"{option} {value}: give a finite number")
    if output is not None:
        files.check_file(output)
    if plots is not None:
        files.check_dir(plots, ["cost_vs_time.png", "link_load_histogram.png"])
    comm = None
    if mpi:
        try:
            from mpi4py import MPI
        except ImportError:
            raise UserError("--mpi needs mpi4py (pip install -r requirements-dev.txt)") from None
        comm = MPI.COMM_WORLD
    root = comm is None or comm.Get_rank() == 0
    # Refuse a bad --cost before any work; earlier names are read as today's, said once per job.
    cost = mapping.canonical_cost(cost, announce=root)
    topo = topology.load(topology_file)
    pattern = mapping.load_pattern(pattern_arg, num_ranks)
    names = None
    if hostnames is not None:
        names = [line.strip() for line in _core.read_text_file(hostnames).splitlines() if line.strip()]
    with working("routing", as_json or not root):
        net = _network(topo, routes_arg, ranks_per_host)
    if shape is not None:
        _check_shape(net, shape)
    if fmt == "vcoord" and net.lattice is None:
        raise UserError("--format vcoord needs a torus or mesh topology")
    mapping.check_fits(net, pattern, "--ranks-per-host")
    with working(f"starting placement ({start})", as_json or not root):
        start_map = mapping.start_placement(net, pattern, start, seed, cost)
        if cost == "hop_bytes":
            # Swap descent first: it moves ranks beside their partners far faster than annealing.
            budget = dict(max_evaluations=evaluations) if evaluations is not None else dict(seconds=0.25 * seconds)
            start_map = mapping.descend(net, pattern, start_map, **budget)["host_of_rank"]
    identity = mapping.cost(net, pattern, mapping.baseline(net, pattern, "identity"))
    start_figs = mapping.cost(net, pattern, start_map)

    total = float(evaluations) if evaluations is not None else max(seconds, 1e-9)
    with progress("annealing", total, silent=as_json or not root) as steps:

        def progress_cb(status, elapsed):
            done = status["evaluations"] * (comm.Get_size() if comm else 1) if evaluations is not None else elapsed
            steps.update(completed=done, description=f"annealing, cost {status['best_value']:.4g}")

        result = mapping.optimize(
            net, pattern, start_map, cost=cost, seconds=seconds, evaluations=evaluations, target=target,
            stall=stall, seed=seed, replicas=replicas, range=range_, num_swaps=swaps, progress=progress_cb,
            comm=comm,
        )
    if not root:
        return
    found = mapping.structure(pattern)
    meta = {"topology": topo.name, "pattern": pattern.name, "cost": cost, "figures": result.figures}
    if output is not None:
        mapping.write_map(net, result.host_of_rank, output, fmt, names, meta)
    if plots is not None:
        files.ensure_dir(plots)
        mapping.plot_trace({"netweave map": result.trace}, plots / "cost_vs_time.png")
        mapping.plot_link_histogram(
            {"identity": mapping.channel_loads(net, pattern, mapping.baseline(net, pattern, "identity")),
             "optimised": mapping.channel_loads(net, pattern, result.host_of_rank)},
            plots / "link_load_histogram.png",
        )
    summary = {
        "pattern": pattern.name, "ranks": pattern.num_ranks, "topology": topo.name, "cost": cost,
        "structure": {k: v for k, v in found.items() if k != "coords"},
        "identity": identity, "start": {"kind": start, **start_figs}, "result": result.figures,
        "value": result.value, "start_value": result.start_value, "evaluations": result.evaluations,
        "seconds": round(result.seconds, 3), "evaluations_per_second": round(result.evaluations_per_second),
        "processes": result.processes, "stopped_by": result.stopped_by,
        "output": str(output) if output is not None else None,
    }
    if as_json:
        print(json.dumps(summary, indent=1))
        return
    print(f"{pattern.name}: {pattern.num_ranks} ranks on {topo.name}, cost {cost}")
    print(f"structure: {found['description']}")
    print(f"{'placement':<12}{'sum_hops':>12}{'hop_bytes':>20}{'max_channel_bytes':>19}{'hops_x_max_channel':>22}")
    for label, f in (("identity", identity), (start, start_figs), ("optimised", result.figures)):
        print(f"{label:<12}{f['sum_hops']:>12,}{f['hop_bytes']:>20,}{f['max_channel_bytes']:>19,}"
              f"{f['hops_x_max_channel']:>22,}")
    print(f"{result.evaluations:,} evaluations in {result.seconds:.1f} s "
          f"({result.evaluations_per_second:,.0f}/s, {result.processes} process(es)), stopped by {result.stopped_by}")
    if output is not None:
        print(f"wrote {output} ({fmt})")

