"""`netweave analyze`: exact link loads of a schedule on a routed fabric."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from netweave import analysis, report, routing, topology, traffic
from netweave.cli.common import JsonOpt, working


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
    schedule = traffic.load(schedule_file)
    with working("analysing", as_json):
        result = analysis.analyze(
            routes,
            schedule,
            hop_latency_s=hop_latency_ns * 1e-9,
            link_latency=link_latency,
            max_links=links,
        )
    result["schedule"] = analysis.describe(schedule)
    result["routing"] = routes.engine
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print("\n".join(report.analysis_lines(result)))
