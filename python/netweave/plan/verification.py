"""``netweave plan --verify``: the plan's predictions measured on the emulated fabric.

:func:`verify` brings the plan's fabric up as network namespaces routed by the plan's tables
(:mod:`netweave.run.emulate`, links at their bandwidth × a scale this machine can forward), runs
the candidates that matter at the plan's message size and sets each measured time beside the
prediction for the same scaled fabric:

- the :data:`TOP` best-predicted of netweave's candidates (and netweave's pick, where a tie rule
  took it from below them) and paper 004's Concurrent on
  netweave's TCP executor (:func:`netweave.run.emulate.run`; one send in flight per host, every
  receive open), timed as ``nwbench`` times the MPIs (one warm-up call, then :data:`REPS` calls
  on the same warm connections, each behind a barrier, and more where they were short:
  :func:`netweave.run.calibration.timed`; the slowest rank's mean), predicted as
  that executor runs them (the flow model's DAG executor) — as ``reproduce ethernet --emulate``
  runs paper 004's schedules. A DAG runs as it is; a phased schedule in the order of the
  executor the plan deploys it with (:func:`netweave.run.executor.phase_groups_for`: ``sync`` a
  barrier after every phase, ``async`` each rank's sends in order with no wait, ``local-sync``
  its local-sync order);
- Open MPI's and MPICH's own collective (``nwbench``'s native timing, the slowest rank's mean
  over as many calls, :func:`netweave.run.calibration.run_native`), predicted as the plan
  models them (``traffic::native_mpi``) and, with a calibration that measured the library, with
  what the library costs this machine's hosts per message (:func:`netweave.plan.predict_native`).

Running netweave's schedules inside ``nwbench`` through netweave's MPI library was measured
too (benches/advice_fidelity.py's notes): on these fabrics the MPI transport's rendezvous
round trips wait behind bulk data in the switch queues, which neither the flow model nor
netweave's own executor has, so the TCP executor is the measurement that tests the model.

Each row is ``{name, predicted_s, measured_s, ratio}`` (ratio = measured ÷ predicted); the
summary says whether the plan's pick is the measured best, and ``plan --verify`` then deploys
what the network measured fastest where the model's pick measured more than :data:`PICK_MARGIN`
slower (:func:`adopt_measured`). The fabric is torn down whatever
happens, Ctrl-C included. Everything is checked before anything starts
(:func:`check_can_verify`): root, the fabric's size, the MPI programs.

The emulation has no link latency; the predictions for it are made on the scaled fabric
without latency too (as ``netweave emulate measure`` does), so the ratio is the model's error,
not the scale's.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netweave import plan as plan_mod
from netweave._core import NetweaveError, RoutingTable, Schedule, TaskGraph, Topology
from netweave.plan.result import CandidateRow, PlanResult, VerifyRow, VerifySummary
from netweave.run import calibration as calibration_mod
from netweave.run import emulate, executor, mpi

#: netweave candidates measured besides Concurrent and the native MPIs: the best predicted.
TOP = 3
#: The most hosts this machine emulates for --verify: one namespace and one MPI process each, on
#: two cores (28 hosts measured in benches/advice_fidelity.py).
MAX_HOSTS = 64
#: The share of emulate's forwarding budget a verified run may use at its predicted pace.
FORWARDING_SHARE = 0.5
#: The slowest link of a verified fabric, after scaling (bit/s): below it connection set-up and
#: control messages wait behind seconds of queued data, and runs time out instead of measuring.
MIN_LINK_BPS = 20e6
#: Timed calls per candidate (after one warm-up call), the fewest: short ones are timed more
#: (:func:`netweave.run.calibration.timed`). nwbench reports the slowest rank's mean. The
#: calibration times its points the same way, so its parameters fit what this measures.
REPS = calibration_mod.TIMED_CALLS
#: What a row's ``problem`` says when the run forwards more at its predicted pace than
#: ``emulate.FORWARDING_BUDGET_BPS``: the time is the veth forwarding's, not the fabric's.
MACHINE_BOUND = "it measures the machine, not the fabric"
#: How much slower than the measured best the pick may be and still count as the best (the
#: issue's target: within 10 %).
PICK_MARGIN = 0.10


def check_can_verify(topo: Topology, ranks: int) -> None:
    """Raise a one-line error unless this machine can verify a plan on `topo`: root (namespaces),
    at most :data:`MAX_HOSTS` hosts, nwbench built for both MPIs and netweave's TCP executor."""
    if topo.num_hosts > MAX_HOSTS:
        raise NetweaveError(f"--verify: the fabric has {topo.num_hosts:,} hosts; this machine emulates at most "
                            f"{MAX_HOSTS} (one namespace and one MPI process per host on its cores)")
    if ranks < 2:
        raise NetweaveError("--verify needs a job of at least 2 ranks")
    try:
        emulate.require_root()
    except NetweaveError as e:
        raise NetweaveError(f"--verify brings up an emulated fabric: {e}") from None
    for implementation in mpi.IMPLEMENTATIONS:
        mpi.program_path("nwbench", implementation)
    executor.executor_path()


def _scale(routes: RoutingTable, workloads: list[Schedule | TaskGraph], fastest_s: float) -> float:
    """The link scale at which the heaviest workload, run at its predicted pace, forwards at most
    :data:`FORWARDING_SHARE` of what two cores carry (predicted times grow as 1 / scale)."""
    heaviest = max(emulate.forwarding_load(routes, executor.as_task_graph(w), fastest_s) for w in workloads)
    if heaviest <= 0:
        return 1.0
    return min(1.0, FORWARDING_SHARE * emulate.FORWARDING_BUDGET_BPS / heaviest)


def verify(topo: Topology, routes: RoutingTable, result: PlanResult, built: list[plan_mod.Candidate],
           hosts: str | None = None, order: str = "listed", seed: int | None = None,
           scale: float | None = None, buffer: int | None = None, calibration: Path | None = None,
           progress: Callable[[str], None] | None = None) -> tuple[list[VerifyRow], VerifySummary]:
    """Measure the plan `result` (from :func:`netweave.plan.plan` with `routes` and the phased
    candidates `built`) on the emulated fabric: ``(rows, summary)`` — a
    :class:`~netweave.plan.result.VerifyRow` per candidate measured (``report.json``'s
    ``verify``), and the summary with the ``scale``, ``buffer``, the ``pick``, the
    ``measured_best``, ``pick_over_best`` and the verdict ``pick_is_best`` (within
    :data:`PICK_MARGIN`). `scale` defaults to what this machine forwards (:func:`_scale`),
    `buffer` to the Ethernet fabric's port buffer (the flow model's), else emulate's queue."""
    note = progress or (lambda _msg: None)
    job = result.job
    collective, nbytes, ranks, root = job.collective, job.bytes_per_pair, job.ranks, job.root_rank
    if collective == "gather" and root != 0:
        raise NetweaveError("--verify times gathers to rank 0 (nwbench's root); drop --root")
    check_can_verify(topo, ranks)
    placed = plan_mod.job_hosts(topo, hosts, order, seed)
    chosen, graphs, natives, native_work = _candidates(topo, result, built, placed)
    fastest = min(r.predicted_time_s for r in [*chosen, *natives.values()])
    if buffer is None and topo.link_layer == "ethernet":
        # The switch port buffer the flow model assumes for this fabric, so both see the same drops.
        buffer = topo.port_buffer_bytes
    if scale is None:
        scale = _scale(routes, list(graphs.values()) + list(native_work.values()), fastest)
        slowest = float(topo.link_specs()[:, 0].min()) * 1e9 * scale
        if slowest < MIN_LINK_BPS:
            raise NetweaveError(
                f"--verify: this job is too large to emulate here: to keep its forwarding within what this machine "
                f"carries, links would run at {slowest / 1e6:.3g} Mbit/s (x {scale:.2g}), below {MIN_LINK_BPS / 1e6:.0f} "
                "Mbit/s; plan a smaller job (--hosts) or force a scale with --verify-scale")
    elif not scale > 0:
        raise NetweaveError(f"--verify-scale {scale} must be positive")

    note("predicting on the scaled fabric")
    reports = _predict(routes, scale, graphs, natives, native_work, ranks, nbytes, calibration)
    predicted = {name: r["makespan_s"] for name, r in reports.items()}

    measured: dict[str, float | None] = {}
    problems: dict[str, str | None] = {}
    timeouts: dict[str, float] = {}
    how: dict[str, str] = {}

    def measure(name: str, measured_by: str, run: Callable[[int], float]) -> None:
        """Time `name` with `run(reps)` (:func:`netweave.run.calibration.timed`), its losses counted
        on the hosts around it (every call, the warm-ups included)."""
        before = fabric.losses()
        calls = []

        def counted(reps: int) -> float:
            calls.append(reps + 1)
            return run(reps)
        try:
            measured[name], timed = calibration_mod.timed(counted)
        except NetweaveError as e:
            # One candidate failing to run here leaves the other rows standing; the row says why.
            measured[name], problems[name], how[name] = None, str(e), measured_by
            return
        after = fabric.losses()
        lost = {k: after[k] - before[k] for k in after}
        timeouts[name] = lost["tcp_timeouts"] / sum(calls)
        problems[name] = _losses(lost, sum(calls))
        how[name] = f"{measured_by}, {timed} calls"
    fabric_name = "v" + uuid.uuid4().hex[:11]
    note(f"bringing up the emulated fabric (links x {scale:.3g})")
    fabric = emulate.up(topo, routes, fabric_name, scale=scale, buffer=buffer)
    try:
        for name, graph in graphs.items():
            note(f"measuring {name} on the fabric")
            # Timed as nwbench times the MPIs.
            measure(name, f"netweave's TCP executor, {_order(next(r for r in chosen if r.name == name))}",
                    functools.partial(_executor_run, fabric, graph))
        for implementation in natives:
            note(f"measuring {implementation}'s own {collective} on the fabric")
            measure(implementation, "nwbench", functools.partial(calibration_mod.run_native, fabric, implementation,
                                                                 collective, nbytes, ranks, placed))
    finally:
        emulate.down(fabric_name)
    workloads = {**graphs, **{name: executor.as_task_graph(w) for name, w in native_work.items()}}
    out = []
    for r in [*chosen, *natives.values()]:
        name = r.name
        m, p = measured.get(name), predicted[name]
        # A run this machine cannot forward at its predicted pace measures the machine, not the fabric.
        load = emulate.forwarding_load(routes, workloads[name], p)
        if load > emulate.FORWARDING_BUDGET_BPS:
            problems[name] = "; ".join(filter(None, [problems.get(name), (
                f"forwards {load / 1e9:.1f} Gbit/s at its predicted pace, more than the "
                f"{emulate.FORWARDING_BUDGET_BPS / 1e9:.0f} Gbit/s this machine carries: {MACHINE_BOUND}")]))
        out.append(VerifyRow(name=name, kind=r.kind, predicted_s=p, measured_s=m, ratio=m / p if m and p else None,
                             measured_by=how.get(name), problem=problems.get(name),
                             timeouts_per_call=timeouts.get(name), predicted_timeouts=reports[name]["timeouts"]))
    return out, _summary(out, result, scale, buffer)


def _executor_run(fabric: emulate.EmulatedCluster, graph: TaskGraph, reps: int) -> float:
    """`graph` on netweave's TCP executor: the slowest rank's mean over `reps` calls after a
    warm-up, seconds; a failed run raises with its cause."""
    run = emulate.run(fabric, graph, warmup=1, reps=reps)
    if not run["ok"] or run["makespan_s"] is None:
        raise NetweaveError(f"the run failed: {_failure(run)}")
    return float(run["makespan_s"])


def _losses(lost: dict[str, int], calls: int) -> str | None:
    """What a candidate lost on the fabric (:meth:`netweave.run.emulate.EmulatedCluster.losses`)
    over its `calls` calls, in words; None if nothing."""
    parts = [f"{lost['retransmitted_segments']} segments retransmitted" if lost["retransmitted_segments"] else "",
             f"{lost['tcp_timeouts']} timeouts in {calls} calls" if lost["tcp_timeouts"] else ""]
    return ", ".join(filter(None, parts)) or None


def _candidates(topo: Topology, result: PlanResult, built: list[plan_mod.Candidate], placed: list[int]
                ) -> tuple[list[CandidateRow], dict[str, TaskGraph], dict[str, Any], dict[str, Any]]:
    """What --verify measures: the best :data:`TOP` of netweave's rows (and its pick), Concurrent with the
    DAGs the TCP executor runs them as (a phased one in its deployed executor's order), and the
    native MPI rows with their schedules."""
    job = result.job
    collective, nbytes, root = job.collective, job.bytes_per_pair, job.root_rank
    phased = {c.name: c.schedule for c in built if c.schedule is not None}
    rows: list[CandidateRow] = [r for r in [*result.schedules, *result.dag_schedules] if r.complete]
    ours = [r for r in sorted(rows, key=lambda r: r.predicted_time_s) if r.name != plan_mod.CONCURRENT][:TOP]
    # The plan's own pick is measured even where a tie rule took it from below the best three.
    ours += [r for r in rows if result.ours is not None and r.name == result.ours.name and r not in ours]
    chosen = ours + [r for r in result.dag_schedules if r.name == plan_mod.CONCURRENT]
    graphs: dict[str, TaskGraph] = {}
    for r in chosen:
        if r.kind == "phased":
            schedule = phased[r.name]
            graphs[r.name] = executor.as_task_graph(schedule, executor.phase_groups_for(schedule, r.executor))
        else:
            graphs[r.name] = executor.as_task_graph(plan_mod.dag_workload(topo, r.name, collective, nbytes, root))
    natives = {r.name: r for r in result.native}
    native_work = {name: plan_mod.native_schedule(name, collective, placed, nbytes, root) for name in natives}
    return chosen, graphs, natives, native_work


def _failure(run: dict[str, Any]) -> str:
    """Why a run failed: its cause and, where that is a rank the launcher stopped, what a rank
    that failed by itself said (the launcher's own words name no reason)."""
    cause = run.get("cause")
    if cause is None:
        return "no rank named a cause"
    text = f"rank {cause['rank']}: {cause['reason']}"
    said = next((f for f in run.get("failures", []) if f["exit"] is not None and f["rank"] != cause["rank"]), None)
    if cause["exit"] is None and said is not None:
        text += f" (rank {said['rank']}: {said['reason']})"
    return text


def _order(row: CandidateRow) -> str:
    """How the TCP executor runs `row`'s candidate, for the report."""
    if row.kind != "phased":
        return "as its DAG"
    return {"sync": "a barrier after every phase (as the sync executor)",
            "async": "each rank's sends in order, one in flight (as the async executor)",
            }.get(row.executor, "in local-sync order")


def predict_at_scale(topo: Topology, routes: RoutingTable, result: PlanResult, built: list[plan_mod.Candidate],
                     scale: float, calibration: Path | None = None, hosts: str | None = None, order: str = "listed",
                     seed: int | None = None) -> dict[str, float]:
    """What :func:`verify` predicts for each candidate it measures, on the fabric scaled by
    `scale`, with `calibration` (or the defaults): to compare parameter sets on one measurement."""
    reports = reports_at_scale(topo, routes, result, built, scale, calibration, hosts, order, seed)
    return {name: r["makespan_s"] for name, r in reports.items()}


def reports_at_scale(topo: Topology, routes: RoutingTable, result: PlanResult, built: list[plan_mod.Candidate],
                     scale: float, calibration: Path | None = None, hosts: str | None = None, order: str = "listed",
                     seed: int | None = None) -> dict[str, dict[str, Any]]:
    """:func:`predict_at_scale`'s flow-model reports whole (``makespan_s``, ``timeouts``, …)."""
    _chosen, graphs, natives, native_work = _candidates(topo, result, built,
                                                        plan_mod.job_hosts(topo, hosts, order, seed))
    return _predict(routes, scale, graphs, natives, native_work, result.job.ranks, result.job.bytes_per_pair,
                    calibration)


def _predict(routes: RoutingTable, scale: float, graphs: dict[str, TaskGraph], natives: dict[str, Any],
             native_work: dict[str, Any], ranks: int, bytes_per_pair: int,
             calibration: Path | None = None) -> dict[str, dict[str, Any]]:
    """Each candidate's flow-model report (its ``makespan_s``, ``timeouts``, …) on the fabric
    scaled as the emulation runs it: netweave's `graphs` and the `natives` (plan rows) with their
    schedules `native_work`, charged their library's host cost when `calibration` measured it
    (:func:`netweave.plan.predict_native`), with the emulated hosts' TCP
    (:data:`netweave.run.emulate.HOST_TCP`)."""
    scaled_routes = emulate.scaled_routes(routes, emulate.scaled_topology(routes.topology, scale))
    # Concurrent as the plan predicts it (every send of a host at once); the others one send
    # in flight per host, as netweave's executor runs them.
    reports = {name: plan_mod.predict(scaled_routes, graph, "dag", max(ranks - 1, 1) if name == plan_mod.CONCURRENT
                                      else 1, calibration, emulate.HOST_TCP)
               for name, graph in graphs.items()}
    for name, r in natives.items():
        info = {"executor": r.executor, "concurrent_sends": r.concurrent_sends}
        reports[name] = plan_mod.predict_native(scaled_routes, native_work[name], r.library, info, ranks,
                                                bytes_per_pair, calibration, emulate.HOST_TCP)
    return reports


def adopt_measured(result: PlanResult, rows: list[VerifyRow], summary: VerifySummary) -> None:
    """Make what the emulated fabric measured fastest the plan's pick where the model's pick
    measured more than :data:`PICK_MARGIN` slower: ``result.best`` among every measured candidate
    the plan may pick (Concurrent is not: the native MPIs' linear algorithms are what it
    stands for), ``result.ours`` — the schedule written as the deployable ``.nws`` — among
    netweave's own. Each new pick's reason gives both measured times; ``summary.adopted`` and
    ``summary.adopted_ours`` name them. The answer a plan deploys is then one the network
    confirmed; the model's picks stay in ``summary.pick`` and the rows.

    The fabric was measured at ``summary.scale`` of its bandwidth; a timeout costs the same
    200 ms at any scale, so losses weigh more at full rate, not less, and a schedule that loses
    here is no better there."""
    rows_by_name = {r.name: r for r in result.candidates}
    timed = {r.name: r.measured_s for r in rows
             if r.measured_s and r.name in rows_by_name and rows_by_name[r.name].pickable
             and rows_by_name[r.name].complete}
    if result.best is None:
        return
    baseline = next(r for r in result.schedules if r.name == result.best.baseline)
    for attribute, pool in (("best", timed), ("ours", {n: t for n, t in timed.items()
                                                       if rows_by_name[n].kind != "native"})):
        pick = getattr(result, attribute)
        if pick is None or pick.name not in pool:
            continue  # nothing to hold the measurement against
        fastest = min(pool, key=lambda n: pool[n])
        if pool[pick.name] <= pool[fastest] * (1 + PICK_MARGIN):
            continue
        reason = (f"measured fastest on the emulated fabric (links x {summary.scale:.3g}): {pool[fastest] * 1e3:.4g} ms "
                  f"against {pool[pick.name] * 1e3:.4g} ms for the flow model's pick, {pick.name} "
                  f"({pool[pick.name] / pool[fastest]:.2f}x)")
        choice = plan_mod.Choice(rows_by_name[fastest], reason)
        setattr(result, attribute, plan_mod.pick_record(choice, baseline))
        if attribute == "best":
            summary.adopted = fastest
        else:
            summary.adopted_ours = fastest
            result.today = plan_mod.mpi_today(result.native, choice)


def pick_at_scale(result: PlanResult, predicted: dict[str, float]) -> str | None:
    """The plan's pick among the candidates in `predicted` with those times in place of its own
    (the predictions for the scaled fabric the verification measures): :func:`netweave.plan.choose`
    over them in the plan's order, so its tie rules decide here too — a raw minimum would pick
    by differences smaller than the model tells apart (on the LSFT of order 3, Concurrent
    predicted 0.2 % ahead of the LSFT schedule and measured 1.23× its time). None if no
    candidate the plan may pick is among them.

    >>> from netweave import plan, topology
    >>> result = plan.plan(topology.switch_tree([2], 4, [10.0], [5000.0], 1.0, 5000.0), bytes_per_pair=1 << 16)
    >>> # Concurrent is ranked, not picked; contention-free shift within 5 % of Open MPI's is preferred.
    >>> pick_at_scale(result, {"shift": 1.0, "openmpi": 0.98, "concurrent": 0.5})
    'shift'
    >>> pick_at_scale(result, {"shift": 1.0, "openmpi": 0.9})
    'openmpi'
    """
    rows = [dataclasses.replace(r, predicted_time_s=predicted[r.name])
            for r in [*result.native, *result.schedules, *result.dag_schedules]
            if r.pickable and predicted.get(r.name)]
    choice = plan_mod.choose(rows)
    return None if choice is None else choice.row.name


def _summary(rows: list[VerifyRow], result: PlanResult, scale: float, buffer: int | None) -> VerifySummary:
    """The verdict on the plan's pick from the measured `rows`."""
    measured = {r.name: r.measured_s for r in rows if r.measured_s}
    best = min(measured, key=measured.__getitem__, default=None)
    pick = None if result.best is None else result.best.name
    over = measured[pick] / measured[best] if pick in measured and best else None
    ratios = [r.ratio for r in rows if r.measured_s and r.ratio]
    # Scaling changes an Ethernet fabric's regime (the retransmission timeout does not scale with
    # the links), so the pick the model makes for the scaled fabric is judged too.
    scaled_pick = pick_at_scale(result, {r.name: r.predicted_s for r in rows if r.measured_s})
    scaled_over = measured[scaled_pick] / measured[best] if scaled_pick and best else None
    return VerifySummary(
        pick_at_scale=scaled_pick,
        pick_at_scale_over_best=scaled_over,
        scale=scale,
        buffer=buffer,
        pick=pick,
        measured_best=best,
        pick_over_best=over,
        pick_is_best=None if over is None else over <= 1 + PICK_MARGIN,
        worst_ratio=max(ratios, key=lambda x: abs(x - 1), default=None),
        latency="none (the emulation adds none; predictions are made without it too)",
    )
