"""Report: render a plan as terminal text, Markdown, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from netweave.plan.result import CandidateKind, Pick, PlanResult


def format_bytes(n: int) -> str:
    """`n` bytes in the largest unit that divides it (``16 KiB``)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def format_seconds(t: float) -> str:
    """A duration in s, ms, µs or ns, four significant digits."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if t >= scale:
            return f"{t / scale:.4g} {unit}"
    return f"{t / 1e-9:.4g} ns"


def format_size(n: float) -> str:
    """A byte count in the largest unit it reaches (``1.5 MiB``)."""
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
        f"fluid time  {format_seconds(result['fluid_time_s'])} over switch links (paper 001), "
        f"{format_seconds(result['fluid_time_host_links_s'])} with host links",
        f"costs       sum_hops {result['sum_hops']}, hop_bytes {format_size(result['hop_bytes'])}, "
        f"max_channel_bytes {format_size(result['max_channel_bytes'])}, "
        f"hops_x_max_channel {result['hops_x_max_channel']:.4g} (paper 003)",
    ]
    if result["contended_links"]:
        lines.append("most loaded links:")
        for link in result["contended_links"]:
            lines.append(
                f"  {link['from_label']} -> {link['to_label']}: {link['max_load']} flows (phase {link['phase']}), "
                f"contended in {link['contended_phases']} phases, {format_size(link['bytes'])} in all"
            )
    return lines


def summary_lines(plan: PlanResult) -> list[str]:
    """The plan as short human-readable lines (shared by terminal and Markdown output)."""
    t = plan.topology
    job = plan.job
    r = plan.routing
    lines = [
        f"topology  {t['name']}: {t['hosts']} hosts, {t['switches']} switches, {t['links']} links, "
        f"diameter {t['diameter']} switch hops",
        f"routing   {r.engine} ({r.vcs} VC, {'deadlock-free' if r.deadlock_free else 'CAN DEADLOCK'})"
        + (f": {r.why}" if r.why else ""),
        f"job       {job.collective} over {job.ranks} ranks, {format_bytes(job.bytes_per_pair)} per "
        + ("pair" if job.collective == "alltoall" else "block") + (f", root {job.root}" if job.root is not None else ""),
    ]
    bound = plan.bound
    lines.append(f"bound     {format_seconds(bound.seconds)}: {bound.describe} (no order of the job's messages "
                 "finishes sooner)")
    lines.append("candidates predicted time (flow simulation; phased: with each of "
                 + ", ".join(plan.prediction.executors) + ", the fastest counts), its ratio to the bound; phased: "
                 "lock-step time (paper 001), throughput ratio (paper 000), max link congestion:")
    rows = candidate_rows(plan)
    width = max([len(row.name) for row in rows] + [len(s.name) for s in plan.skipped], default=0)
    for row in rows:
        ratio = "-" if row.bound_ratio is None else f"{row.bound_ratio:.2f}x"
        lines.append(f"  {row.name:<{width}}  {format_seconds(row.predicted):>10}  {ratio:>7} bound  {row.detail}")
    for s in plan.skipped:
        lines.append(f"  {s.name:<{width}}  skipped: {s.reason}")
    best = plan.best
    if best is None:
        lines.append("best      no schedule could be proven complete")
    else:
        lines.append(f"best      {pick_text(best)}: {format_seconds(best.predicted_time_s)} predicted "
                     f"({best.executor} executor), "
                     f"{best.reason}")
        if best.kind == "phased" and best.name != best.baseline and best.speedup_vs_shift:
            lockstep = best.fluid_time_host_links_s
            lines.append(f"          lock-step {'-' if lockstep is None else format_seconds(lockstep)}, "
                         f"{best.speedup_vs_shift:.2f}x faster than {best.baseline}")
    today = today_line(plan)
    if today:
        lines.append(f"today     {today}")
    return lines + verify_lines(plan)


#: What a verified plan without ``--calibration`` says about its predictions: the defaults know
#: neither this machine's host costs nor its losses nor the MPIs' own collectives.
UNCALIBRATED = ("predicted with the flow model's defaults: `netweave emulate calibrate TOPO ROUTES --name N -o cal.json` "
                "measures this machine's host costs, TCP losses and MPIs, and `--calibration cal.json` predicts with them")


def verify_lines(plan: PlanResult) -> list[str]:
    """The --verify measurements: each candidate's prediction, measured time and ratio, then
    the verdict on the pick; nothing when the plan was not verified."""
    rows, summary = plan.verify, plan.verify_summary
    if not rows or summary is None:
        return []
    lines = [f"verify    on the emulated fabric (links x {summary.scale:.3g}, no link latency), slowest rank's mean "
             "of warm calls: predicted, measured, measured / predicted"]
    if plan.prediction.calibration is None:
        lines.append(f"          {UNCALIBRATED}")
    width = max(len(r.name) for r in rows)
    for r in rows:
        measured = "-" if r.measured_s is None else format_seconds(r.measured_s)
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x"
        extra = f"  {r.problem}" if r.problem else ""
        lines.append(f"  {r.name:<{width}}  {format_seconds(r.predicted_s):>10}  {measured:>10}  {ratio:>6}{extra}")
    if summary.pick_over_best is None:
        lines.append(f"          the pick, {summary.pick}, was not measured")
    else:
        verdict = "is" if summary.pick_is_best else "is NOT"
        lines.append(f"          the pick, {summary.pick}, {verdict} the measured best: {summary.measured_best} "
                     f"measured fastest, the pick took {summary.pick_over_best:.2f}x its time")
    for what, name in (("the plan's pick", summary.adopted), ("the deployed schedule", summary.adopted_ours)):
        if name is not None:
            lines.append(f"          {what} is now {name}, measured fastest (the network's answer over the model's)")
    if summary.pick_at_scale_over_best is not None and summary.pick_at_scale != summary.pick:
        lines.append(f"          on the scaled fabric the model picks {summary.pick_at_scale}: "
                     f"{summary.pick_at_scale_over_best:.2f}x the measured best's time")
    return lines


def pick_text(pick: Pick) -> str:
    """A pick's name as a reader knows it: a native one as its library's algorithm."""
    if pick.is_native:
        return f"your MPI ({pick.label}'s {pick.algorithm})"
    return pick.name


def today_line(plan: PlanResult) -> str | None:
    """"your MPI today: X (Open MPI's pairwise), ours: Y" — or None without natives."""
    today = plan.today
    if today is None:
        return None
    mpis = ", ".join(f"{format_seconds(n.predicted_time_s)} ({n.label}'s {n.algorithm})" for n in today.libraries)
    against = ", ".join(f"{n.ours_speedup:.2f}x {n.label.rsplit(' ', 1)[0]}'s speed" if n.ours_speedup else "-"
                        for n in today.libraries)
    return f"your MPI today: {mpis}; ours: {today.ours} {format_seconds(today.ours_s)} ({against})"


#: How a candidate stands, as the text and the page show it: its kind, or a phased one's verdict.
Verdict = Literal["contention-free", "contended", "incomplete", "dag", "native"]


@dataclass(frozen=True)
class DisplayRow:
    """One candidate as the text report and the page list it."""

    name: str
    kind: CandidateKind
    verdict: Verdict
    #: Predicted time (s).
    predicted: float
    #: Lock-step time, throughput ratio and busiest link's flows: phased candidates only.
    lockstep: float | None
    ratio: float | None
    congestion: int | None
    #: "51 phases", "2652 tasks".
    size: str
    bound_ratio: float | None
    #: The executor of its predicted time (the candidate row's ``executor``).
    executor: str
    #: One line saying what it is.
    detail: str


def candidate_rows(plan: PlanResult) -> list[DisplayRow]:
    """Every candidate of the plan, the user's MPI first, as rows shared by text and page."""
    rows = []
    for n in plan.native:
        rows.append(DisplayRow(name=n.name, kind="native", verdict="native", predicted=n.predicted_time_s,
                               lockstep=None, ratio=None, congestion=None, size=f"{n.phases} phases",
                               bound_ratio=n.bound_ratio, executor=n.executor,
                               detail=f"your MPI today: {n.label}'s {n.algorithm} ({n.concurrent_sends} in flight, "
                                      f"{n.executor})"))
    for s in plan.schedules:
        verdict: Verdict = ("incomplete" if not s.complete
                            else "contention-free" if s.contention_free else "contended")
        shown = f"INCOMPLETE: {s.problem}" if verdict == "incomplete" else verdict
        rows.append(DisplayRow(name=s.name, kind="phased", verdict=verdict, predicted=s.predicted_time_s,
                               lockstep=s.fluid_time_host_links_s, ratio=s.throughput_ratio,
                               congestion=s.max_congestion, size=f"{s.phases} phases", bound_ratio=s.bound_ratio,
                               executor=s.executor,
                               detail=f"lock-step {format_seconds(s.fluid_time_host_links_s)}, throughput ratio "
                                      f"{s.throughput_ratio:.4f}, congestion {s.max_congestion}, {s.phases} phases, "
                                      f"{shown}; {executor_text(s.executor, s.predicted_times_s)}"))
    for d in plan.dag_schedules:
        how = (f"paper 004 DAG, {d.groups} groups, cost model {format_seconds(d.cost_model_s)}"
               if d.groups is not None and d.cost_model_s is not None
               else "DAG, every task at once (paper 004's Concurrent)")
        rows.append(DisplayRow(name=d.name, kind="dag", verdict="dag", predicted=d.predicted_time_s,
                               lockstep=None, ratio=None, congestion=None, size=f"{d.tasks} tasks",
                               bound_ratio=d.bound_ratio, executor=d.executor, detail=f"{d.tasks} tasks, {how}"))
    return rows


def executor_text(executor: str, times: dict[str, float]) -> str:
    """Which executor a phased prediction used, and what the others it was tried with took,
    fastest first: ``async executor (sync 227 ms, local-sync 265 ms)``."""
    others = ", ".join(f"{ex} {format_seconds(t)}" for ex, t in sorted(times.items(), key=lambda et: (et[1], et[0]))
                       if ex != executor)
    return f"{executor} executor" + (f" ({others})" if others else "")


def to_text(plan: PlanResult) -> str:
    """The plan as the terminal shows it."""
    return "\n".join(summary_lines(plan)) + "\n"


def to_markdown(plan: PlanResult) -> str:
    """The plan as ``report.md``."""
    out = ["# netweave plan", ""]
    out += [f"- {line}" for line in summary_lines(plan)]
    out += ["", "Lock-step time: phases back to back, each as long as its most loaded link needs for its",
            "bytes. Throughput ratio: mean over flows and phases of 1 / (max load on the flow's path);",
            "1.0 means no link carries two flows of the same phase.", ""]
    return "\n".join(out)


def phases_csv(plan: PlanResult) -> str:
    """Every phased candidate's per-phase loads as ``phases.csv``."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["schedule", "phase", "flows", "max_load", "contended_channels", "throughput_ratio"])
    for s in plan.schedules:
        for i, p in enumerate(s.phase_loads):
            w.writerow([s.name, i, p["flows"], p["max_load"], p["contended_channels"], f"{p['throughput_ratio']:.6f}"])
    return buf.getvalue()


def to_json(plan: PlanResult) -> str:
    """The plan as ``report.json`` (:meth:`PlanResult.to_dict`)."""
    return json.dumps(plan.to_dict(), indent=2, sort_keys=True) + "\n"


def write_files(plan: PlanResult, out_dir: Path, topology_json: str) -> list[Path]:
    """Write report.json, report.md, phases.csv and topology.json into `out_dir` (atomically,
    :mod:`netweave.support.files`)."""
    from netweave.support.files import ensure_dir, write_text

    ensure_dir(out_dir)
    files = {
        "report.json": to_json(plan),
        "report.md": to_markdown(plan),
        "phases.csv": phases_csv(plan),
        "topology.json": topology_json,
    }
    written = []
    for name, text in files.items():
        written.append(write_text(out_dir / name, text))
    return written
