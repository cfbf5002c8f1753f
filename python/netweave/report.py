"""Report: render a plan as terminal text, Markdown, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def _seconds(t: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if t >= scale:
            return f"{t / scale:.4g} {unit}"
    return f"{t / 1e-9:.4g} ns"


def _size(n: float) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n:.0f} B"


def analysis_lines(result: dict[str, Any]) -> list[str]:
    """An analysis report (``netweave analyze``) as short human-readable lines."""
    s = result["schedule"]
    verdict = "complete" if result["complete"] else f"INCOMPLETE: {result['problem']}"
    perm = f"{result['permutation_phases']}/{s['phases']} phases are permutations"
    lines = [
        f"schedule    {s['name']}: {s['ranks']} ranks, {s['phases']} phases, {s['messages']} messages; {verdict}; {perm}",
        f"congestion  max {result['max_congestion']} flows on one link, {result['contended_links_total']} links "
        f"contended in some phase; throughput ratio {result['throughput_ratio']:.4f} (paper 000)",
        f"fluid time  {_seconds(result['fluid_time_s'])} over switch links (paper 001), "
        f"{_seconds(result['fluid_time_host_links_s'])} with host links",
        f"costs       Σhops {result['sum_hops']}, hop-bytes {_size(result['hop_bytes'])}, max link "
        f"{_size(result['max_link_bytes'])}, Σhops×max_link {result['hops_x_max_link']:.4g} (paper 003)",
    ]
    if result["contended_links"]:
        lines.append("most loaded links:")
        for link in result["contended_links"]:
            lines.append(
                f"  {link['from_label']} -> {link['to_label']}: {link['max_load']} flows (phase {link['phase']}), "
                f"contended in {link['contended_phases']} phases, {_size(link['bytes'])} in all"
            )
    return lines


def summary_lines(plan: dict[str, Any]) -> list[str]:
    """The plan as short human-readable lines (shared by terminal and Markdown output)."""
    t = plan["topology"]
    job = plan["job"]
    lines = [
        f"topology  {t['name']}: {t['hosts']} hosts, {t['switches']} switches, {t['links']} links, "
        f"diameter {t['diameter']} switch hops",
        f"routing   {plan['routing']['engine']} ({plan['routing']['vcs']} VC, "
        f"{'deadlock-free' if plan['routing']['deadlock_free'] else 'CAN DEADLOCK'})",
        f"job       {job['collective']} over {job['ranks']} ranks, {_bytes(job['bytes_per_pair'])} per pair",
        "schedules lock-step time (paper 001), predicted time (flow simulation), throughput ratio (paper 000), "
        "max link congestion:",
    ]
    width = max((len(s["name"]) for s in plan["schedules"] + plan.get("dag_schedules", []) + plan.get("skipped", [])),
                default=0)
    for s in plan["schedules"]:
        if not s["complete"]:
            verdict = f"INCOMPLETE: {s['problem']}"
        else:
            verdict = "contention-free" if s["contention_free"] else "contended"
        lines.append(
            f"  {s['name']:<{width}}  {_seconds(s['fluid_time_host_links_s']):>10}  "
            f"{_seconds(s['predicted_time_s']):>10}  ratio {s['throughput_ratio']:.4f}  "
            f"congestion {s['max_congestion']:>3}  {s['phases']} phases, {verdict}"
        )
    for s in plan.get("dag_schedules", []):
        how = (f"paper 004 DAG, {s['groups']} groups, cost model {_seconds(s['cost_model_s'])}"
               if s["groups"] is not None else "DAG, every task at once")
        lines.append(f"  {s['name']:<{width}}  {'-':>10}  {_seconds(s['predicted_time_s']):>10}  {s['tasks']} tasks, {how}")
    for s in plan.get("skipped", []):
        lines.append(f"  {s['name']:<{width}}  skipped: {s['reason']}")
    best = plan.get("best")
    if best is None:
        lines.append("best      no schedule could be proven complete")
    else:
        speedup = best["speedup_vs_shift"]
        if best["name"] == "shift":
            versus = "no proven schedule beats it"
        elif speedup is None:
            versus = "no link time at all"
        else:
            versus = f"{speedup:.2f}x faster than shift"
        lines.append(f"best      {best['name']}: {_seconds(best['fluid_time_host_links_s'])}, {versus}")
        predicted = best["predicted_speedup_vs_shift"]
        lines.append(
            f"predicted {_seconds(best['predicted_time_s'])} by flow simulation ({plan['prediction']['executor']} "
            f"executor)" + ("" if best["name"] == "shift" or predicted is None else f", {predicted:.2f}x faster than shift")
        )
    return lines


def to_text(plan: dict[str, Any]) -> str:
    return "\n".join(summary_lines(plan)) + "\n"


def to_markdown(plan: dict[str, Any]) -> str:
    out = ["# netweave plan", ""]
    out += [f"- {line}" for line in summary_lines(plan)]
    out += ["", "Lock-step time: phases back to back, each as long as its most loaded link needs for its",
            "bytes. Throughput ratio: mean over flows and phases of 1 / (max load on the flow's path);",
            "1.0 means no link carries two flows of the same phase.", ""]
    return "\n".join(out)


def phases_csv(plan: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["schedule", "phase", "flows", "max_load", "contended_channels", "throughput_ratio"])
    for s in plan["schedules"]:
        for i, p in enumerate(s["phase_loads"]):
            w.writerow([s["name"], i, p["flows"], p["max_load"], p["contended_channels"], f"{p['throughput_ratio']:.6f}"])
    return buf.getvalue()


def to_json(plan: dict[str, Any]) -> str:
    return json.dumps(plan, indent=2, sort_keys=True) + "\n"


def write_files(plan: dict[str, Any], out_dir: Path, topology_json: str) -> list[Path]:
    """Write report.json, report.md, phases.csv and topology.json into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "report.json": to_json(plan),
        "report.md": to_markdown(plan),
        "phases.csv": phases_csv(plan),
        "topology.json": topology_json,
    }
    written = []
    for name, text in files.items():
        path = out_dir / name
        path.write_text(text)
        written.append(path)
    return written
