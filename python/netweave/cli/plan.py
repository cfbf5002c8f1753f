"""`netweave plan`: the main job, from a fabric to a report."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer

from netweave import plan as plan_mod
from netweave import report
from netweave.cli.common import UserError, progress
from netweave.plan import verification
from netweave.plan.result import PlacementSummary
from netweave.report import html_page
from netweave.stages import topology
from netweave.support.files import check_dir, write_text

#: What `plan --out` writes besides the deployable files, checked before any work.
_REPORT_FILES = ("index.html", "report.json", "report.md", "phases.csv", "topology.json", "routes.json", "README.md",
                 "placement.json")


def plan_cmd(
    topology_file: Path | None = typer.Argument(None, help="Topology file; default: the built-in LSFT of order 3 (52 servers)."),
    bytes_per_pair: int = typer.Option(plan_mod.DEFAULT_BYTES, "--bytes", min=1, max=2**63, help="Bytes each rank sends to each other rank (all-to-all), or each rank's block (allgather, gather)."),
    collective: str = typer.Option("alltoall", "--collective", help="The collective to plan: alltoall, allgather or gather."),
    root: int = typer.Option(0, "--root", min=0, help="Root rank of --collective gather."),
    engine: str | None = typer.Option(None, "--engine", help="Routing engine (default: the deadlock-free engine suited to the topology, or up*/down* in one lane when it is minimal and as fast)."),
    calibration: Path | None = typer.Option(None, "--calibration", help="The fabric's flow-model parameters (netweave emulate calibrate); every prediction uses them."),
    verify: bool = typer.Option(False, "--verify", help="Also measure the best three, Concurrent and the native Open MPI and MPICH on the emulated fabric (root; at most 64 hosts) and set each measured time beside its prediction."),
    verify_scale: float | None = typer.Option(None, "--verify-scale", help="Link scale of the --verify fabric (default: what this machine forwards)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    out: Path | None = typer.Option(None, "--out", help="Also write the report here: index.html (a page with the fabric, heat maps, charts and the commands behind them), report.json, report.md, phases.csv, topology.json; and what to deploy (routes, OpenSM tables, the chosen schedule, rank maps; README.md says which command uses each)."),
    hosts: str | None = typer.Option(None, "--hosts", help="Hosts of the job: 'all', '0-15,20', 'leaf:0-3' (fat-trees: whole leaves, or an LSFT sub-cluster)."),
    order: str = typer.Option("listed", "--order", help="Rank order on the hosts: listed, cyclic or random (--seed)."),
    seed: int | None = typer.Option(None, "--seed", min=0, help="Seed of --order random."),
    pattern: str | None = typer.Option(None, "--pattern", help="Also place the job's ranks for this traffic: a pattern file or generator spec (e.g. stencil:4x4x4); with --out, writes rankfile and placement.json."),
    map_time: float = typer.Option(5.0, "--map-time", min=0.0, help="Seconds of annealing for --pattern."),
    map_evals: int | None = typer.Option(None, "--map-evals", min=1, help="Evaluation budget for --pattern instead of time (same placement on every run)."),
    map_seed: int = typer.Option(0, "--map-seed", min=0, max=2**63 - 1, help="Seed for the --pattern rank placement."),
) -> None:
    """Route the fabric, predict every schedule for the job — netweave's, paper 004's DAGs and
    what Open MPI and MPICH run by default — beside the bottleneck bound, and pick the best;
    with --verify, measure them on the emulated fabric; with --pattern, also place the ranks."""
    if pattern is not None and hosts not in (None, "all"):
        raise UserError("--pattern places ranks over every host of the topology; it cannot be combined with --hosts")
    if collective not in plan_mod.COLLECTIVES:
        raise UserError(f"--collective {collective}: plan makes {', '.join(plan_mod.COLLECTIVES)}")
    if root and collective != "gather":
        raise UserError("--root belongs to --collective gather")
    if verify_scale is not None and not verify:
        raise UserError("--verify-scale belongs to --verify")
    if calibration is not None and not calibration.is_file():
        raise UserError(f"--calibration {calibration}: no such file")
    if out is not None:
        check_dir(out, _REPORT_FILES)  # before any work or output: a report is all or nothing
    topo = topology.load(topology_file) if topology_file is not None else topology.example_cluster()
    if calibration is not None:
        # Another fabric's file, or a malformed native section: one line, before any work.
        plan_mod.calibration_mod.load(calibration, topo)
    if verify:
        # Before any work and before any file: a plan that cannot be verified here writes nothing.
        verification.check_can_verify(topo, len(plan_mod.job_hosts(topo, hosts, order, seed)))
    with progress("routing", silent=as_json) as steps:
        steps.note("routing")
        routes, why = plan_mod.routing_for(topo, engine, bytes_per_pair, hosts, order, seed, calibration)
        steps.note("building the candidate schedules")
        built = plan_mod.candidates(topo, bytes_per_pair, hosts, order, seed, collective=collective, root=root)
        # Routing, building, analysis and simulation of each candidate, the native MPIs, then
        # paper 004's DAG and its baseline (scheduled, and both simulated) on whole fabrics.
        steps.update(total=2 + 2 * sum(c.schedule is not None for c in built) + len(plan_mod.NATIVE_LIBRARIES)
                     + (3 if hosts is None else 0))
        result = plan_mod.plan(topo, bytes_per_pair, engine, progress=steps.note, hosts=hosts, order=order, seed=seed,
                               routes=routes, built=built, collective=collective, root=root, calibration=calibration,
                               routing_note=why)
    if verify:
        with progress("verifying on the emulated fabric", silent=as_json) as steps:
            rows, summary = verification.verify(topo, routes, result, built, hosts, order, seed, verify_scale,
                                               calibration=calibration, progress=steps.note)
        # The deployed answer is the one the network confirmed (the model's pick stays in the summary).
        verification.adopt_measured(result, rows, summary)
        result.verify, result.verify_summary = rows, summary
    placement = None
    if pattern is not None:
        with progress(f"placing ranks for {pattern}", silent=as_json):
            placement = plan_mod.place_ranks(topo, pattern, result.routing.engine, map_time, map_seed,
                                             evaluations=map_evals)
        result.placement = placement.summary
    print(report.to_json(result) if as_json else report.to_text(result), end="")
    if placement is not None and not as_json:
        print(_placement_text(placement.summary), end="")
    if out is not None:
        with progress("writing the report", silent=as_json):
            written = report.write_files(result, out, topo.to_text("json"))
            files, uses = plan_mod.write_artifacts(topo, routes, result, out, hosts, order, seed, placement, built)
            written += files
            if placement is not None:
                written.append(write_text(out / "placement.json",
                                          json.dumps(placement.summary.to_dict(), indent=2, sort_keys=True) + "\n"))
            page = html_page.plan_page(result, topo, routes, built, placement, uses,
                                         shlex.join(["netweave", *sys.argv[1:]]),
                                         plan_mod.job_hosts(topo, hosts, order, seed))
            write_text(out / "index.html", page)
            written.insert(0, out / "index.html")
        if not as_json:
            for path in written:
                print(f"wrote {path}")


def _placement_text(s: PlacementSummary) -> str:
    """The rank placement as a few report lines: identity against the placed figures."""
    lines = [f"rank placement for {s.pattern} ({s.ranks} ranks, cost {s.cost}, seed {s.seed}, "
             f"{s.evaluations:,} evaluations in {s.seconds:.1f} s):"]
    lines.append(f"  structure: {s.structure['description']}")
    lines.append(f"  {'placement':<10}{'sum_hops':>12}{'hop_bytes':>18}{'max_channel_bytes':>19}"
                 f"{'hops_x_max_channel':>20}")
    for label, f in (("identity", s.identity), ("placed", s.placed)):
        lines.append(f"  {label:<10}{f['sum_hops']:>12,}{f['hop_bytes']:>18,}{f['max_channel_bytes']:>19,}"
                     f"{f['hops_x_max_channel']:>20,}")
    g = s.identity_over_placed
    fmt = lambda v: "-" if v is None else f"{v:.2f}x"  # noqa: E731
    lines.append(f"  identity / placed: hop_bytes {fmt(g['hop_bytes'])}, max_channel_bytes "
                 f"{fmt(g['max_channel_bytes'])}, hops_x_max_channel {fmt(g['hops_x_max_channel'])}")
    return "\n".join(lines) + "\n"
