"""The plan as one self-contained web page (``index.html``), and a reproduction's
``summary.md`` as one too.

The plan's page shows the fabric (:mod:`netweave.report.drawing`), each phased candidate's busiest
phase as a heat map on it with a link-load histogram, the candidates as a chart and a table,
the routing's proof and path lengths, the rank placement when there is one, and under every
figure the command that reproduces it. Everything is inline (SVG, CSS, a few lines of script
to switch the heat map between candidates): the page needs no network and no other file.

>>> import netweave
>>> from netweave import plan, routing
>>> topo = netweave.stages.topology.mesh([4, 4], 1)
>>> routes = routing.route(topo, "dor")
>>> built = plan.candidates(topo, 1024)
>>> result = plan.plan(topo, 1024, routes=routes, built=built)
>>> page = plan_page(result, topo, routes, built, command="netweave plan mesh.json --bytes 1024")
>>> page.startswith("<!DOCTYPE html>") and 'id="heatmap"' in page
True
"""

from __future__ import annotations

import base64
import html
import json
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from netweave._core import RoutingTable, Topology
from netweave.plan import Candidate, Placement
from netweave.plan.result import PlanResult, VerifyRow, VerifySummary
from netweave.report import (
    UNCALIBRATED,
    candidate_rows,
    drawing,
    format_bytes,
    format_seconds,
    pick_text,
    summary_lines,
    today_line,
)
from netweave.stages import analysis

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:1.5em}
h1{font-size:1.6em;margin:.2em 0}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
.verdict{font-size:1.15em;background:#fff;border-left:4px solid #1a9850;padding:.6em 1em}
svg.fabric{width:100%;height:auto;background:#fff;border:1px solid #e2e2e2}
svg.chart{background:#fff;border:1px solid #e2e2e2;max-width:100%}
table{border-collapse:collapse;background:#fff;font-size:.92em}
td,th{border:1px solid #ddd;padding:.3em .6em;text-align:right}td:first-child,th:first-child{text-align:left}
pre.cmd{background:#1d1d1f;color:#e8e8e8;padding:.6em .9em;overflow-x:auto;font-size:.85em}
.note{color:#555;font-size:.9em}.legend span{display:inline-block;width:1.2em;height:.8em;margin:0 .2em 0 .8em}
.small{display:inline-block;vertical-align:top;margin:0 1em 1em 0}
.ok{color:#1a7f37}.bad{color:#b42318}
img{max-width:100%}
"""

# Recolours the heat map for the candidate chosen in the selector; the same scale as
# drawing.heat_colour.
_SCRIPT = """
(function(){
  const data = JSON.parse(document.getElementById('heat-data').textContent);
  const stops = [[0,[26,152,80]],[0.5,[254,224,47]],[1,[215,25,28]]];
  function colour(load, top){
    if (load <= 0) return '#d0d0d0';
    if (top <= 1) return '#1a9850';
    const t = (load - 1) / (top - 1);
    for (let i = 0; i + 1 < stops.length; i++){
      const [t0, c0] = stops[i], [t1, c1] = stops[i + 1];
      if (t <= t1){
        const u = (t - t0) / (t1 - t0);
        return '#' + c0.map((a, j) => Math.round(a + (c1[j] - a) * u).toString(16).padStart(2, '0')).join('');
      }
    }
    return '#d7191c';
  }
  const svg = document.getElementById('heatmap');
  const select = document.getElementById('heat-select');
  function show(name){
    const c = data.candidates[name];
    const top = Math.max(c.max, 1);
    svg.querySelectorAll('g.links > *').forEach(el => el.setAttribute('stroke', colour(c.seg[+el.dataset.i], top)));
    svg.querySelectorAll('g.nodes > circle').forEach(el => {
      const i = +el.dataset.i;
      if (data.folded[i]) el.setAttribute('fill', colour(c.dot[i], top));
    });
    const legend = document.getElementById('heat-legend');
    legend.replaceChildren(document.createTextNode('flows on the busiest link of each line:'));
    [...new Set([0, 1, Math.floor((top + 1) / 2), top])].sort((a, b) => a - b).forEach(v => {
      const swatch = document.createElement('span');
      swatch.style.background = colour(v, top);
      legend.append(swatch, document.createTextNode(String(v)));
    });
    document.getElementById('heat-caption').textContent =
      name + ': phase ' + c.phase + ' of ' + c.phases + ', busiest link ' + c.max + ' flow' + (c.max == 1 ? '' : 's');
  }
  select.addEventListener('change', () => show(select.value));
  show(select.value);
})();
"""

_VERDICT_COLOUR = {"contention-free": "#1a9850", "contended": "#f39c12", "incomplete": "#d7191c", "dag": "#4a6fa5",
                   "native": "#7b5ea7"}


def plan_page(result: PlanResult, topo: Topology, routes: RoutingTable, built: Sequence[Candidate],
              placement: Placement | None = None, files: Sequence[tuple[str, str]] = (), command: str = "netweave plan",
              job_hosts: Sequence[int] | None = None) -> str:
    """The plan `result` (from :func:`netweave.plan.plan`) as one HTML page: `built` are the
    candidates the plan measured (:func:`netweave.plan.candidates`), `placement` the rank
    placement of ``--pattern``, `files` the deployable files with their use, `command` the
    plan's own command line, `job_hosts` the job's host indices (default: every host)."""
    fabric = drawing.layout(topo, job_hosts)
    schedules = {c.name: c.schedule for c in built if c.schedule is not None}
    sections = [
        _header(result),
        _fabric_section(result, fabric, topo),
        _candidates_section(result, command),
        _heat_section(result, fabric, routes, schedules, command),
        _routing_section(result, routes),
    ]
    if result.verify and result.verify_summary is not None:
        sections.insert(3, _verify_section(result.verify, result.verify_summary, command, result.prediction.calibration))
    if placement is not None:
        sections.append(_placement_section(placement, fabric, topo))
    if files:
        sections.append(_files_section(files))
    return _page("netweave plan: " + result.topology["name"], "".join(sections))


def _page(title: str, body: str, script: str = "") -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head>'
            f"<body><main>{body}</main>{script}</body></html>\n")


def _cmd(*lines: str) -> str:
    return '<pre class="cmd">' + html.escape("\n".join(lines)) + "</pre>"


def _header(result: PlanResult) -> str:
    t, job, best = result.topology, result.job, result.best
    if best is None:
        verdict = "No schedule could be proven complete."
    else:
        baseline = best.baseline
        predicted = best.predicted_speedup_vs_shift
        ratio = "-" if best.bound_ratio is None else f"{best.bound_ratio:.2f}"
        verdict = (f"<b>{html.escape(pick_text(best))}</b>: predicted {format_seconds(best.predicted_time_s)}"
                   + (f" ({predicted:.2f}× {html.escape(baseline)}'s speed)" if predicted and best.name != baseline
                      else "")
                   + f", {ratio}× the bound — {html.escape(best.reason)}.")
        today = today_line(result)
        if today:
            verdict += f"<br>{html.escape(today[0].upper() + today[1:])}."
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(result)[:4])
    unit = "pair" if job.collective == "alltoall" else "block"
    return (f"<h1>netweave plan — {html.escape(t['name'])}</h1>"
            f"<p class='verdict' id='verdict'>{verdict}</p><ul>{lines}</ul>"
            f"<p class='note'>{job.ranks} ranks, {job.collective}, {format_bytes(job.bytes_per_pair)} per {unit}; "
            f"hosts: {html.escape(job.hosts)}.</p>")


def _fabric_section(result: PlanResult, fabric: drawing.Drawing, topo: Topology) -> str:
    t = result.topology
    notes = "".join(f"<p class='note'>{html.escape(n)}.</p>" for n in fabric.notes)
    return (f"<section id='fabric-section'><h2>Fabric</h2>"
            f"<p>{t['hosts']:,} hosts, {t['switches']:,} switches, {t['links']:,} links, diameter {t['diameter']} "
            f"switch hops; drawn {fabric.kind}. Switches carrying hosts of the job are outlined"
            + ("; hosts of the job are black dots" if any(n.is_host for n in fabric.nodes) else "") + ".</p>"
            + drawing.svg(fabric, "fabric", title="fabric") + notes
            + _cmd("netweave topo info topology.json") + "</section>")


def _candidates_section(result: PlanResult, command: str) -> str:
    rows = candidate_rows(result)
    best = None if result.best is None else result.best.name
    baseline = "shift" if result.best is None else result.best.baseline
    shift = next((r.predicted for r in rows if r.name == baseline), None)
    top = max((r.predicted for r in rows), default=0) or 1.0
    label_w, bar_w, row_h = 150, 560, 24
    height = row_h * len(rows) + 40
    bars = []
    for i, r in enumerate(rows):
        y = 10 + i * row_h
        w = max(1.0, bar_w * r.predicted / top)
        colour = _VERDICT_COLOUR[r.verdict]
        weight = "bold" if r.name == best else "normal"
        bars.append(f"<text x='{label_w - 6}' y='{y + 15}' text-anchor='end' font-size='13' font-weight='{weight}'>"
                    f"{html.escape(r.name)}</text><rect class='bar' x='{label_w}' y='{y + 3}' width='{w:.1f}' "
                    f"height='{row_h - 8}' fill='{colour}'><title>{html.escape(r.name)}: predicted "
                    f"{format_seconds(r.predicted)}</title></rect><text x='{label_w + w + 5:.1f}' y='{y + 15}' "
                    f"font-size='12'>{format_seconds(r.predicted)}</text>")
        if r.lockstep is not None:
            x = label_w + bar_w * r.lockstep / top
            bars.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{y + 1}' y2='{y + row_h - 3}' stroke='#000' "
                        "stroke-width='2'/>")
    axis_y = 14 + len(rows) * row_h
    bound = result.bound.seconds
    if bound:
        x = label_w + bar_w * bound / top
        bars.append(f"<line id='bound-line' x1='{x:.1f}' x2='{x:.1f}' y1='6' y2='{axis_y}' stroke='#d7191c' "
                    f"stroke-dasharray='4 3'><title>bottleneck bound {format_seconds(bound)}</title></line>")
    chart = (f"<svg id='candidates-chart' class='chart' width='{label_w + bar_w + 120}' height='{height}' "
             f"xmlns='http://www.w3.org/2000/svg'>{''.join(bars)}<text x='{label_w}' y='{axis_y + 14}' font-size='12' "
             f"fill='#555'>predicted time (flow simulation); black tick: lock-step time; red dashes: the bottleneck "
             "bound</text></svg>")
    legend = "<p class='legend note'>" + "".join(
        f"<span style='background:{c}'></span>{v}" for v, c in _VERDICT_COLOUR.items()) + \
        " (dag: paper 004's task DAGs; native: what Open MPI and MPICH run by default)</p>"
    head = ("<tr><th>schedule</th><th>size</th><th>lock-step</th><th>predicted</th><th>executor</th><th>÷ bound</th>"
            f"<th>vs {html.escape(baseline)}</th><th>throughput ratio</th><th>max congestion</th><th>verdict</th></tr>")
    body = []
    for r in rows:
        vs = f"{shift / r.predicted:.2f}×" if shift and r.predicted else "-"
        mark = " ★" if r.name == best else ""
        body.append(f"<tr><td>{html.escape(r.name)}{mark}</td><td>{r.size}</td>"
                    f"<td>{'-' if r.lockstep is None else format_seconds(r.lockstep)}</td>"
                    f"<td>{format_seconds(r.predicted)}</td><td>{html.escape(r.executor)}</td>"
                    f"<td>{'-' if r.bound_ratio is None else format(r.bound_ratio, '.2f') + '×'}</td><td>{vs}</td>"
                    f"<td>{'-' if r.ratio is None else format(r.ratio, '.4f')}</td>"
                    f"<td>{'-' if r.congestion is None else r.congestion}</td><td>{r.verdict}</td></tr>")
    for s in result.skipped:
        body.append(f"<tr class='skipped'><td>{html.escape(s.name)}</td><td colspan='9' style='text-align:left'>"
                    f"skipped: {html.escape(s.reason)}</td></tr>")
    executors = ", ".join(result.prediction.executors)
    return ("<section id='candidates-section'><h2>Candidate schedules</h2>"
            f"<p>Every {html.escape(result.job.collective)} netweave can build for the job, paper 004's task "
            "DAGs and the algorithm Open MPI and MPICH run by default for this size, each predicted by the flow "
            f"simulation (phased schedules with each of the {executors} executors; the fastest counts, is ranked and "
            "is the one the deployed schedule asks for) and set against the bottleneck bound "
            f"({html.escape(result.bound.describe)}); phased schedules also proven by the exact "
            "analysis and timed lock-step (paper 001: phases back to back, each as long as its busiest link needs). "
            f"★ marks the pick: {html.escape('none' if result.best is None else result.best.reason)}.</p>"
            + chart + legend + f"<table id='candidates-table'>{head}{''.join(body)}</table>"
            + _cmd(command, "netweave plan … --json   # every figure of this table as JSON") + "</section>")


def _verify_section(rows: Sequence[VerifyRow], summary: VerifySummary, command: str,
                    calibration: str | None) -> str:
    """``--verify``: predicted against measured per candidate, as paired bars and a table, with
    the verdict on the pick (and, without `calibration`, how to get one)."""
    top = max([r.predicted_s for r in rows] + [r.measured_s or 0 for r in rows]) or 1.0
    label_w, bar_w, row_h = 150, 520, 30
    parts = []
    for i, r in enumerate(rows):
        y = 10 + i * row_h
        weight = "bold" if r.name == summary.pick else "normal"
        parts.append(f"<text x='{label_w - 6}' y='{y + 17}' text-anchor='end' font-size='13' font-weight='{weight}'>"
                     f"{html.escape(r.name)}</text>")
        for j, (key, value, colour) in enumerate((("predicted_s", r.predicted_s, "#9ecae1"),
                                                  ("measured_s", r.measured_s, "#08519c"))):
            if value is None:
                continue
            w = max(1.0, bar_w * value / top)
            parts.append(f"<rect class='bar {key}' x='{label_w}' y='{y + 3 + j * 12}' width='{w:.1f}' height='11' "
                         f"fill='{colour}'><title>{html.escape(r.name)}: {key[:-2]} {format_seconds(value)}</title></rect>"
                         f"<text x='{label_w + w + 4:.1f}' y='{y + 12 + j * 12}' font-size='10'>{format_seconds(value)}</text>")
    height = 10 + len(rows) * row_h + 24
    chart = (f"<svg id='verify-chart' class='chart' width='{label_w + bar_w + 110}' height='{height}' "
             f"xmlns='http://www.w3.org/2000/svg'>{''.join(parts)}<text x='{label_w}' y='{height - 6}' font-size='12' "
             "fill='#555'>light: predicted; dark: measured on the emulated fabric</text></svg>")
    body = "".join(
        f"<tr><td>{html.escape(r.name)}{' ★' if r.name == summary.pick else ''}</td><td>{r.kind}</td>"
        f"<td>{format_seconds(r.predicted_s)}</td>"
        f"<td>{'-' if r.measured_s is None else format_seconds(r.measured_s)}</td>"
        f"<td>{'-' if r.ratio is None else format(r.ratio, '.2f') + '×'}</td>"
        f"<td style='text-align:left'>{html.escape(r.problem or '')}</td></tr>" for r in rows)
    if summary.pick_over_best is None:
        verdict = f"The pick, {html.escape(str(summary.pick))}, was not measured."
    else:
        cls = "ok" if summary.pick_is_best else "bad"
        verdict = (f"<span class='{cls}'>The pick, {html.escape(str(summary.pick))}, "
                   f"{'is' if summary.pick_is_best else 'is not'} the measured best</span>: "
                   f"{html.escape(str(summary.measured_best))} measured fastest; the pick took "
                   f"{summary.pick_over_best:.2f}× its time.")
    for what, name in (("The plan's pick", summary.adopted), ("The deployed schedule", summary.adopted_ours)):
        if name is not None:
            verdict += f" {what} is now {html.escape(name)}, measured fastest."
    return ("<section id='verify-section'><h2>Measured on the emulated fabric</h2>"
            f"<p>{verdict} Links at {summary.scale:.3g}× their bandwidth, no link latency (predictions made the "
            "same way); each time is the slowest rank's mean over warm calls, netweave's schedules on netweave's TCP "
            "executor, the native MPIs through nwbench."
            + ("" if calibration else " " + re.sub(r"`([^`]*)`", r"<code>\1</code>",
                                                   html.escape(UNCALIBRATED[0].upper() + UNCALIBRATED[1:])) + ".")
            + "</p>" + chart
            + "<table id='verify-table'><tr><th>candidate</th><th>kind</th><th>predicted</th><th>measured</th>"
            f"<th>measured ÷ predicted</th><th></th></tr>{body}</table>"
            + _cmd(command if "--verify" in command else command + " --verify") + "</section>")


def _heat_section(result: PlanResult, fabric: drawing.Drawing, routes: RoutingTable,
                  schedules: dict[str, Any], command: str) -> str:
    phased = [s for s in result.schedules if s.name in schedules]
    if not phased:
        return "<section id='heat-section'><h2>Link load</h2><p>No phased schedule to show.</p></section>"
    names = {s.name for s in phased}
    # The pick when it is phased, else netweave's own pick (the pick may be a DAG or the user's MPI).
    picks = [p.name for p in (result.best, result.ours) if p is not None]
    default = next((n for n in picks if n in names), phased[0].name)
    data: dict[str, dict[str, Any]] = {}
    histograms = []
    for s in phased:
        phase = s.worst_phase
        flows = analysis.phase_channel_flows(routes, schedules[s.name], phase)
        seg, dot = fabric.loads(flows)
        data[s.name] = {"phase": phase, "phases": s.phases, "seg": seg, "dot": dot, "max": max(flows, default=0)}
        histograms.append(_histogram(s.name, flows, phase))
    first = data[default]
    top = max(first["max"], 1)  # each schedule on its own scale: red is its busiest link
    heat = drawing.svg(fabric, "heatmap", first["seg"], first["dot"], top, title="busiest phase link loads")
    options = "".join(f"<option value='{html.escape(n)}'{' selected' if n == default else ''}>{html.escape(n)}</option>"
                      for n in data)
    legend = "<p class='legend note' id='heat-legend'>flows on the busiest link of each line:" + "".join(
        f"<span style='background:{drawing.heat_colour(v, top)}'></span>{v}"
        for v in sorted({0, 1, (top + 1) // 2, top})) + "</p>"
    payload = {"folded": [bool(n.folded) for n in fabric.nodes], "candidates": data}
    folded = " Dots coloured by load stand for links not drawn." if any(n.folded for n in fabric.nodes) else ""
    dags = ("<p class='note'>Paper 004's DAG schedules have no phases; they are timed in the candidates' table.</p>"
            if result.dag_schedules else "")
    hosts = _job_options(command)
    return ("<section id='heat-section'><h2>Link load in the busiest phase</h2>"
            f"<p>Each link coloured by the flows crossing it (the busier direction) in the phase with the most "
            f"loaded link, from green (one flow) to red (that schedule's busiest link); pick a schedule: <select id='heat-select'>{options}</select> "
            f"<span id='heat-caption' class='note'></span>.{folded}</p>"
            + heat + legend + dags + "<h3>Links by load, busiest phase</h3>" + "".join(histograms)
            + _cmd("netweave schedule alltoall topology.json --algo NAME" + hosts + " -o NAME.json",
                   "netweave analyze topology.json routes.json NAME.json   # per-phase loads and the busiest links")
            + "<script type='application/json' id='heat-data'>" + json.dumps(payload, separators=(",", ":"))
            .replace("</", "<\\/") + "</script><script>" + _SCRIPT + "</script></section>")


def _job_options(command: str) -> str:
    """The plan command's job options (--hosts, --order, --seed, --bytes), for the per-schedule commands."""
    words = shlex.split(command)
    kept = []
    for i, w in enumerate(words):
        if w in ("--hosts", "--order", "--seed", "--bytes") and i + 1 < len(words):
            kept += [w, words[i + 1]]
        elif re.match(r"--(hosts|order|seed|bytes)=", w):
            kept.append(w)
    return (" " + shlex.join(kept)) if kept else ""


def _histogram(name: str, flows: Sequence[int], phase: int) -> str:
    """Bars: how many directed channels carry 1, 2, … flows in the phase."""
    counts: dict[int, int] = {}
    for f in flows:
        if f > 0:
            counts[f] = counts.get(f, 0) + 1
    idle = sum(1 for f in flows if f == 0)
    return _bars_chart(f"hist-{name}", f"{name} (phase {phase}); {idle:,} channels idle",
                       [(str(k), v) for k, v in sorted(counts.items())], "flows on a channel", "channels",
                       colour=lambda k: drawing.heat_colour(int(k), max(counts, default=1)))


def _bars_chart(element_id: str, title: str, bars: list[tuple[str, int]], xlabel: str, ylabel: str,
                colour=lambda _k: "#4a6fa5") -> str:
    """A small vertical bar chart as inline SVG."""
    width, height, left, bottom = 300, 170, 46, 34
    top = max((v for _, v in bars), default=0) or 1
    step = (width - left - 10) / max(1, len(bars))
    parts = [f"<svg id='{html.escape(element_id)}' class='chart small' width='{width}' height='{height}' "
             f"xmlns='http://www.w3.org/2000/svg'><text x='{left}' y='13' font-size='12'>{html.escape(title)}</text>"]
    for i, (label, v) in enumerate(bars):
        h = (height - bottom - 22) * v / top
        x = left + i * step
        parts.append(f"<rect class='bar' x='{x + 1:.1f}' y='{height - bottom - h:.1f}' width='{max(1.0, step - 2):.1f}' "
                     f"height='{h:.1f}' fill='{colour(label)}'><title>{html.escape(label)}: {v:,}</title></rect>")
        if len(bars) <= 16 or i % max(1, len(bars) // 8) == 0:
            parts.append(f"<text x='{x + step / 2:.1f}' y='{height - bottom + 13}' font-size='10' "
                         f"text-anchor='middle'>{html.escape(label)}</text>")
    parts.append(f"<text x='{left}' y='{height - 6}' font-size='11' fill='#555'>{html.escape(xlabel)}</text>"
                 f"<text x='4' y='{height - bottom}' font-size='11' fill='#555'>{top:,}</text>"
                 f"<text x='4' y='{height - bottom - 12}' font-size='10' fill='#555'>{html.escape(ylabel)}</text></svg>")
    return "".join(parts)


def _routing_section(result: PlanResult, routes: RoutingTable) -> str:
    r = result.routing
    metrics = routes.metrics()
    verdict = ("<span class='ok'>deadlock-free</span>" if r.deadlock_free
               else "<span class='bad'>CAN DEADLOCK: the channel dependency graph has a cycle</span>")
    hist = _bars_chart("hops-histogram", "host pairs by switch-to-switch hops",
                       [(str(h), n) for h, n in enumerate(metrics["hops_histogram"])], "hops", "pairs")
    table = ("<table id='routing-table'>"
             f"<tr><td>engine</td><td>{html.escape(r.engine)}</td></tr>"
             f"<tr><td>virtual channels</td><td>{r.vcs}</td></tr>"
             f"<tr><td>deadlock proof (channel dependency graph)</td><td>{verdict}</td></tr>"
             f"<tr><td>mean hops / longest</td><td>{metrics['avg_hops']:.3f} / {metrics['max_hops']}</td></tr>"
             f"<tr><td>non-minimal pairs</td><td>{metrics['non_minimal_pairs']:,} of {metrics['pairs']:,}</td></tr>"
             f"<tr><td>path diversity</td><td>{metrics['path_diversity']:.3f}</td></tr></table>")
    return ("<section id='routing-section'><h2>Routing</h2>" + table + "<p></p>" + hist
            + _cmd("netweave route check topology.json routes.json   # the proof and these path figures")
            + "</section>")


def _placement_section(placement: Placement, fabric: drawing.Drawing, topo: Topology) -> str:
    s = placement.summary
    hosts = [int(h) for h in topo.hosts]
    ranks = s.ranks
    pictures = []
    for label, host_of_rank in (("identity: rank r on host r", list(range(ranks))),
                                ("placed", [int(h) for h in placement.host_of_rank])):
        colours = _rank_colours(fabric, [hosts[h] for h in host_of_rank], ranks)
        pictures.append(f"<div class='small' style='width:48%'><p>{html.escape(label)}</p>"
                        + drawing.svg(fabric, "placement-" + label.split(":")[0], node_colours=colours, title=label)
                        + "</div>")
    rows = "".join(f"<tr><td>{k}</td><td>{f['sum_hops']:,}</td><td>{f['hop_bytes']:,}</td>"
                   f"<td>{f['max_channel_bytes']:,}</td><td>{f['hops_x_max_channel']:,}</td></tr>"
                   for k, f in (("identity", s.identity), ("placed", s.placed)))
    gain = s.identity_over_placed
    fmt = lambda v: "-" if v is None else f"{v:.2f}×"  # noqa: E731
    return ("<section id='placement-section'><h2>Rank placement</h2>"
            f"<p>{html.escape(s.pattern)}: {ranks:,} ranks, cost {html.escape(s.cost)}, seed {s.seed}, "
            f"{s.evaluations:,} evaluations in {s.seconds:.1f} s; structure: "
            f"{html.escape(s.structure['description'])}.</p>"
            "<table id='placement-table'><tr><th>placement</th><th>sum_hops</th><th>hop_bytes</th>"
            f"<th>max_channel_bytes</th><th>hops_x_max_channel</th></tr>{rows}</table>"
            f"<p>identity / placed: hop_bytes {fmt(gain['hop_bytes'])}, max_channel_bytes "
            f"{fmt(gain['max_channel_bytes'])}, hops_x_max_channel {fmt(gain['hops_x_max_channel'])}. Colour: rank number (violet = first, red = last), so a "
            "placement that keeps neighbouring ranks together shows smooth colour.</p>" + "".join(pictures)
            + _cmd(f"netweave map topology.json {s.engine} {shlex.quote(s.source)} "
                   f"--cost {s.cost} --seed {s.seed} --evals {s.evaluations} --format rankfile -o rankfile")
            + "</section>")


def _rank_colours(fabric: drawing.Drawing, node_of_rank: list[int], ranks: int) -> list[str | None]:
    """Per dot, the colour of the mean rank placed on it (on its own host, or the hosts of its switches)."""
    dot = fabric.dot_of
    total: dict[int, list[float]] = {}
    for r, node in enumerate(node_of_rank):
        i = dot.get(node)
        if i is not None:
            acc = total.setdefault(i, [0.0, 0])
            acc[0] += r
            acc[1] += 1
    return [drawing.rank_colour(total[i][0] / total[i][1] / max(1, ranks - 1)) if i in total else None
            for i in range(len(fabric.nodes))]


def _files_section(files: Sequence[tuple[str, str]]) -> str:
    items = "".join(f"<li><code>{html.escape(f)}</code>: {_inline_md(u)}</li>" for f, u in files)
    return ("<section id='files-section'><h2>Files to deploy</h2><p>Beside this page (also listed in "
            f"<code>README.md</code>):</p><ul>{items}</ul></section>")


def _inline_md(text: str) -> str:
    """`code` spans of a one-line Markdown text as HTML, the rest escaped."""
    parts = text.split("`")
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def markdown_page(markdown_text: str, folder: Path, title: str) -> str:
    """A reproduction's ``summary.md`` as one HTML page: its text rendered, each PNG it links
    from `folder` inlined, and the folder's other PNG figures appended, so the page stands alone."""
    import markdown

    body = markdown.markdown(markdown_text, extensions=["tables", "fenced_code"])
    used = set()

    def inline(match: re.Match) -> str:
        name = html.unescape(match.group(2))
        path = folder / name
        if not re.fullmatch(r"[\w.\-]+\.png", name) or not path.is_file():
            return match.group(0)
        used.add(name)
        return f"{match.group(1)}data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}{match.group(3)}"

    body = re.sub(r'(<img[^>]*\bsrc=")([^"]+)(")', inline, body)
    extra = sorted(p for p in folder.glob("*.png") if p.name not in used)
    if extra:
        body += "<h2>Figures</h2>" + "".join(
            f"<figure><img alt='{html.escape(p.stem)}' src='data:image/png;base64,"
            f"{base64.b64encode(p.read_bytes()).decode()}'><figcaption>{html.escape(p.name)}</figcaption></figure>"
            for p in extra)
    return _page(title, body)
