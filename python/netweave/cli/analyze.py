"""`netweave analyze`: exact link loads of a schedule on a routed fabric."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from netweave import _core, report
from netweave.cli.analyze_dag import analyze_dag_cmd
from netweave.cli.common import JsonOpt, working
from netweave.stages import analysis, routing, topology


def analyze_cmd(
    topology_file: Path = typer.Argument(..., help="Topology file."),
    routes_file: Path = typer.Argument(..., help="Routes file (netweave routes JSON, from `netweave route`)."),
    schedule_file: Path = typer.Argument(..., help="Schedule file (from `netweave schedule`)."),
    hop_latency_ns: float = typer.Option(0.0, "--hop-latency", min=0.0, help="Nanoseconds added per link crossed on each phase's longest path."),
    link_latency: bool = typer.Option(False, "--link-latency", help="Add the topology's link latencies along each phase's longest path."),
    links: int = typer.Option(10, "--links", min=0, help="How many of the most loaded contended links to list."),
    as_json: bool = JsonOpt,
) -> None:
    """Per-phase link loads, congestion, throughput ratio (paper 000), lock-step fluid time
    (paper 001), hop and byte costs (paper 003) and the completeness check of a schedule."""
    topo = topology.load(topology_file)
    routes = routing.load(topo, routes_file)
    schedule = _core.load_workload(schedule_file)
    if isinstance(schedule, _core.TaskGraph):  # a DAG (paper 004): its stages take the phases' place
        with working("analysing", as_json):
            analyze_dag_cmd(routes, schedule, hop_latency_ns * 1e-9, link_latency, links, as_json)
        return
    with working("analysing", as_json):
        result = analysis.analyze(
            routes,
            schedule,
            hop_latency_s=hop_latency_ns * 1e-9,
            link_latency=link_latency,
            max_links=links,
        )
        bound = analysis.bottleneck_bound(routes, schedule)
    # The lock-step time with host links is the analysis' own prediction; its ratio to the
    # bound says how much of the busiest resource's time the phases leave idle.
    bound["fluid_time_host_links_ratio"] = analysis.bound_ratio(result["fluid_time_host_links_s"], bound)
    result["bound"] = bound
    result["schedule"] = analysis.describe(schedule)
    result["routing"] = routes.engine
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        lines = report.analysis_lines(result)
        lines.insert(3, bound_line(bound))
        print("\n".join(lines))


def bound_line(bound: dict) -> str:
    """The bottleneck bound as one line of the analysis report."""
    return (f"bound       {bound['seconds'] * 1e3:.3f} ms: {bound['describe']} carries {bound['bytes']:,} bytes; "
            f"lock-step time with host links is {bound['fluid_time_host_links_ratio']:.3f}x the bound")
