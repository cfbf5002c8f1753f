"""`netweave analyze` on a dependency-DAG schedule (paper 004's form, JSON or `.nws`): the
DAG's stages as phases, the bottleneck bound and what the tasks deliver."""

from __future__ import annotations

import json

from netweave import _core, report


def analyze_dag_cmd(routes: _core.RoutingTable, graph: _core.TaskGraph, hop_latency_s: float, link_latency: bool,
                    links: int, as_json: bool) -> None:
    """Print the per-stage analysis of `graph` routed by `routes` (as JSON with `as_json`)."""
    result = _core.analyze_dag(routes, graph, hop_latency_s, link_latency, links)
    result["schedule"] = {"name": graph.name, "ranks": graph.num_ranks, "form": "dag", "tasks": result["tasks"],
                          "stages": result["stages"]}
    result["routing"] = routes.engine
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print("\n".join(dag_lines(result)))


def dag_lines(result: dict) -> list[str]:
    """The DAG analysis as short human-readable lines."""
    s, loads, bound = result["schedule"], result["loads"], result["bound"]
    if result["complete"]:
        verdict = f"complete {result['collective']}, blocks of {result['block_bytes']:,} bytes"
    else:
        verdict = f"INCOMPLETE: {result['problem']}"
    lines = [
        f"schedule    {s['name']}: DAG of {result['tasks']} tasks ({result['relays']} relaying, "
        f"{result['dependencies']} dependencies) over {s['ranks']} ranks in {result['stages']} stages; {verdict}",
        f"congestion  max {loads['max_congestion']} flows on one link in a stage, {loads['contended_links_total']} links "
        f"contended in some stage; throughput ratio {loads['throughput_ratio']:.4f}",
        f"fluid time  {report.format_seconds(loads['fluid_time_s'])} over switch links with the stages back to back, "
        f"{report.format_seconds(loads['fluid_time_host_links_s'])} with host links",
        f"bound       {report.format_seconds(bound['seconds'])}: {bound['describe']} carries {bound['bytes']:,} bytes "
        "(no order of the tasks finishes sooner)",
        "stage  flows  max load  contended links  fluid time (host links)",
    ]
    for i, stage in enumerate(loads["phases"]):
        lines.append(f"{i:>5}  {stage['flows']:>5}  {stage['max_load']:>8}  {stage['contended_channels']:>15}  "
                     f"{report.format_seconds(stage['fluid_time_host_links_s'])}")
    return lines
