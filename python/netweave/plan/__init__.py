"""The main job: run the whole pipeline on one topology and summarise it.

``plan`` routes the fabric, builds every all-to-all schedule the traffic layer can make for
the job, proves each one with the exact analysis engine (its claims hold: every ordered pair
exactly once, permutation phases where claimed) and measures it (link congestion, paper 000's
throughput ratio, paper 001's lock-step fluid time), then picks the fastest proven schedule and
sets it against shift, the usual MPI algorithm; the flow simulator predicts each one's time on
the fabric's real bandwidths and latencies. :mod:`netweave.report` renders the result as
text, JSON or files.

Candidates come from :func:`candidates`, i.e. from the traffic layer's algorithm table: any
all-to-all registered there (:func:`netweave.stages.traffic.register`) joins the comparison without a
change here; algorithms that do not fit the job (XOR on a number of ranks that is no power of
two, A2AT on a shape that is no odd square, a fabric-specific schedule on another fabric) are
listed as skipped with the reason.

The job is every host of the fabric unless ``hosts`` names some (``netweave plan --hosts``).
Paper 000's sub-cluster schedule ``lsft-partial`` joins when that host set is exactly an
(n, k, m) allocation of a Latin-square fat-tree — m servers on each leaf of an n x k rectangle
of grid leaves: k and m are read off the host set (:func:`lsft_sub_cluster`).

Every candidate is ranked by the time the flow model predicts for it, beside the bottleneck
lower bound of the job's traffic (:func:`netweave.stages.analysis.bottleneck_bound`) and its ratio
to it: the phased schedules, paper 004's task DAGs (:func:`dag_candidates`: the
contention-free one and Concurrent, everything at once), and what the user's MPI runs today
(:func:`native_candidates`: Open MPI 4.1's and MPICH 4.0's default algorithm for the job's
size, ``traffic::native_mpi``). :func:`choose` picks the fastest, preferring a contention-free
candidate within :data:`CONTENTION_FREE_MARGIN` of it (on shallow-buffer Ethernet the
contended one is the one that collapses), and says why. :func:`routing_for` prefers a routing
that needs one virtual lane when it is minimal and as fast (:data:`ONE_LANE_MARGIN`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netweave import _core
from netweave._core import NetweaveError, Schedule, Topology
from netweave.plan.result import (
    Bound,
    CandidateRow,
    DagRow,
    Job,
    NativeRow,
    PhasedRow,
    Pick,
    PlacementSummary,
    PlanResult,
    Prediction,
    RoutingChoice,
    Skipped,
    Today,
    TodayLibrary,
)
from netweave.run import calibration as calibration_mod
from netweave.stages import analysis, flowsim, routing, topology, traffic
from netweave.support.files import ensure_dir, write_text

#: Bytes each rank sends to each other rank in the default job (1 MiB).
DEFAULT_BYTES = 1 << 20

#: The baseline every candidate is compared with, per collective.
BASELINES = {"alltoall": "shift", "allgather": "ring", "gather": "linear"}
#: The all-to-all's baseline (the usual MPI algorithm).
BASELINE = BASELINES["alltoall"]
#: Collectives a plan is made for.
COLLECTIVES = tuple(BASELINES)

#: A candidate listed earlier (the user's MPI, then the baseline) that is as contention-free as
#: the pick, has no more phases and is predicted within this (relative) of it is picked
#: instead: a smaller predicted gain lies inside what the model tells apart. On the 3-level
#: tree of the fidelity benchmark, tree-phased is predicted 10 µs (0.01–0.5 %) ahead of shift,
#: its last phase's paths being shorter, and measured 1.07–1.26× slower, its root-crossing
#: phases packed back to back. The same margin chooses a phased candidate's executor.
LEVEL_MARGIN = 0.05
#: A contention-free candidate this close (relative) to the fastest contended one is picked
#: instead: the flow model shares links fairly, a shallow-buffer switch drops instead, and a
#: smaller gain lies inside what the model tells apart (the executor rule alone may cost a
#: candidate that much: binomial gathers run local-sync 2 % behind async).
CONTENTION_FREE_MARGIN = LEVEL_MARGIN
#: A one-lane routing this close (relative) to the suited engine's prediction is preferred:
#: OpenSM installs its tables alone, no service levels or lane maps needed.
ONE_LANE_MARGIN = 0.02
#: The one-lane engine tried when the suited engine needs more lanes.
ONE_LANE_ENGINE = "updown"
#: The MPI libraries whose default algorithms join every plan (``traffic::native_mpi``).
NATIVE_LIBRARIES = ("openmpi", "mpich")

#: The executors a phased candidate is predicted with — every one the runtime runs a phased
#: schedule with (``auto`` only chooses among them) — the one ranked and deployed being the
#: first here predicted within :data:`LEVEL_MARGIN` of its fastest: local-sync first (no
#: barrier, and what the runtime's ``auto`` runs for forwarded delivery), then sync.
PHASED_EXECUTORS: tuple[str, ...] = tuple(sorted((ex for ex in _core.schedule_executors() if ex != "auto"),
                                                 key=lambda ex: ex != "local-sync"))
#: The executor that holds every rank at a barrier between phases (MPI's pairwise exchange).
BARRIER_EXECUTOR = "sync"


@dataclass
class Candidate:
    """One algorithm tried for the job: its schedule, or why it does not apply."""

    name: str
    schedule: Schedule | None = None
    skipped: str | None = None


def candidates(
    topo: Topology,
    bytes_per_pair: int,
    hosts: str | None = None,
    order: str = "listed",
    seed: int | None = None,
    only: str | None = None,
    collective: str = "alltoall",
    root: int = 0,
) -> list[Candidate]:
    """Every `collective` of the traffic layer's table (or just the one named `only`), built
    for the job — the hosts of `topo` named by `hosts` (all of them when omitted) in rank
    `order`, gathering to rank `root` — baseline first; the ones that do not fit the job carry
    the reason instead.

    ``lsft-partial`` needs the sub-cluster's k and m: they are derived from the job when its
    host set is exactly paper 000's (n, k, m) allocation (:func:`lsft_sub_cluster`), and the
    schedule uses the normative ``text`` move rule; any other job skips it."""
    _check_collective(collective)
    sub_cluster = None
    placed = job_hosts(topo, hosts, order, seed)
    if hosts is not None:
        sub_cluster = lsft_sub_cluster(topo, placed)
    partial_leaves = sub_cluster is not None
    baseline = BASELINES[collective]
    names = traffic.algorithms(collective)
    names = [baseline] + [n for n in names if n != baseline]
    names = [n for n in names if only is None or n == only]
    out = []
    for name in names:
        if name == SUB_CLUSTER:
            out.append(_sub_cluster_candidate(topo, bytes_per_pair, sub_cluster))
            continue
        takes = traffic.ALGORITHMS[(collective, name)].takes
        try:
            sched = traffic.build(
                collective, name, topology=topo, hosts=hosts, order=order, bytes=bytes_per_pair,
                seed=seed if order == "random" else None, allow_partial_leaves=partial_leaves,
                root=root if "root" in takes else None,
            )
            out.append(Candidate(name, sched))
        except NetweaveError as e:
            out.append(Candidate(name, skipped=str(e)))
    return out


def _check_collective(collective: str) -> None:
    if collective not in BASELINES:
        raise NetweaveError(f"plan makes alltoall, allgather or gather, not '{collective}'")


def predict(routes: _core.RoutingTable, workload, executor: str, nct: int = 1,
            calibration: Path | None = None, tcp: dict[str, float] | None = None) -> dict[str, Any]:
    """The flow model's prediction of `workload` (a schedule or a DAG) on `routes`: the one
    place the plan asks it, so the fabric's calibration (``--calibration F``, from
    ``netweave emulate calibrate``) reaches every candidate alike; `tcp` overrides TCP
    parameters (the emulated hosts' for ``--verify``)."""
    if calibration is None:
        return flowsim.simulate(routes, workload, executor=executor, nct=nct, tcp=tcp)
    if "calibration" not in inspect.signature(flowsim.simulate).parameters:
        raise NetweaveError("--calibration: this flow model takes no calibration file yet")
    return flowsim.simulate(routes, workload, executor=executor, nct=nct, calibration=calibration, tcp=tcp)


def phased_executors(loads: dict[str, Any]) -> tuple[str, ...]:
    """The executors worth predicting a phased schedule with, given its exact analysis `loads`:
    :data:`PHASED_EXECUTORS`, less the barrier one where some phase is not a permutation. A
    barrier keeps permutation phases from overlapping; a phase that is itself an incast
    (linear's: every rank to one) gains nothing from it, and the prediction saves a run."""
    if loads["permutation_phases"] == len(loads["phases"]):
        return PHASED_EXECUTORS
    return tuple(ex for ex in PHASED_EXECUTORS if ex != BARRIER_EXECUTOR)


def predict_phased(routes: _core.RoutingTable, schedule: Schedule, executors: Sequence[str] = PHASED_EXECUTORS,
                   calibration: Path | None = None) -> tuple[str, dict[str, Any], dict[str, float]]:
    """The flow model's prediction of the phased `schedule` with each of `executors`:
    ``(chosen executor, its report, every executor's time)``. The chosen one is the first of
    `executors` predicted within :data:`LEVEL_MARGIN` of the fastest: a smaller gain lies inside
    what the model tells apart, and on Ethernet the executors differ in what it does not see.
    Ranks that run ahead (async) overfill the ports a phase fills exactly, and a barrier's
    messages (sync) queue behind bulk data, while local-sync ranks wait only for their own
    receives: on 2 × 14 hosts at 1 MiB per pair (links × 0.02, warm calls) tree-phased measured
    13.3 s local-sync, 16.4 s sync and 20.1 s async, all three predicted 11.3 s."""
    reports = {ex: predict(routes, schedule, ex, calibration=calibration) for ex in executors}
    times = {ex: float(r["makespan_s"]) for ex, r in reports.items()}
    least = min(times.values())
    chosen = next(ex for ex in executors if times[ex] <= least * (1 + LEVEL_MARGIN))
    return chosen, reports[chosen], times


def write_artifacts(topo: Topology, routes: _core.RoutingTable, result: PlanResult, out_dir: Path,
                    hosts: str | None = None, order: str = "listed", seed: int | None = None,
                    placement: Placement | None = None,
                    built: list[Candidate] | None = None) -> tuple[list[Path], list[tuple[str, str]]]:
    """The files a user deploys, beside the report in `out_dir`: the routing tables
    (``routes.json``, and ``opensm/`` for ``opensm -F opensm/opensm.conf``: the tables with their
    lanes, :func:`netweave.stages.routing.save_opensm`), netweave's best
    schedule for the job as ``<collective>-<ranks>.nws`` (the name the MPI library looks up in
    a schedule directory; a phased schedule asks for the executor its prediction, and so the
    ranking, used — local-sync unless another is predicted 5 % faster (:func:`predict_phased`);
    a paper-004 DAG is written as its task graph) and, phased, as ``.json``; the rank
    placement as an Open MPI ``rankfile``, a Fujitsu ``vcoordfile`` and a Cray
    ``MPICH_RANK_ORDER`` when `placement` is given, and ``README.md`` saying which command uses
    each file — and, when the user's own MPI is predicted fastest, that it is. `routes` are the
    tables the plan used, `built` the candidates it measured (rebuilt when omitted). Returns the
    files written, and each file's name with the use ``README.md`` gives it."""
    ensure_dir(out_dir)
    written = [routing.save(routes, out_dir / "routes.json")]
    uses = [("routes.json", f"netweave's routing tables ({routes.engine}): `netweave analyze topology.json routes.json SCHEDULE`, "
             "`netweave emulate up topology.json routes.json --name NAME`")]
    try:
        written.append(routing.save_lft(routes, out_dir / "opensm-lfts.dump"))
        uses.append(("opensm-lfts.dump", "the forwarding tables alone, in OpenSM's dump format (no lanes: to check them, "
                     "`netweave route import-lft`; to install them, use `opensm/`)"))
        osm = routing.save_opensm(routes, out_dir / "opensm")
        installable = (out_dir / "opensm" / "opensm-lfts.dump").exists()
        uses.append(("opensm/", ("the same tables *and their virtual lanes* for an InfiniBand subnet manager (" if installable
                                 else "these tables change lanes mid-path, which OpenSM cannot take from files: "
                                      "opensm.conf says why and configures the equivalent OpenSM engine (") +
                     ", ".join(p.name for p in osm) + "): `opensm -F opensm/opensm.conf`"))
        written += osm
    except NetweaveError as e:
        uses.append(("(no opensm/)", f"these tables cannot be written for OpenSM: {e}"))
    job = result.job
    collective, ranks = job.collective, job.ranks
    ours = result.ours
    if ours is not None:
        name = ours.name
        nws = out_dir / f"{collective}-{ranks}.nws"
        verdict = _deploy_note(result)
        program = (f"`netweave mpi run -np {ranks} --schedule {nws} -- ./your_program`, or `mpirun -np {ranks} "
                   f"-x LD_PRELOAD=<netweave>/runtime/build/libnwmpi-openmpi.so -x NETWEAVE_SCHEDULE={nws} "
                   "./your_program` (MPICH: `-env LD_PRELOAD … -env NETWEAVE_SCHEDULE …`)")
        mpi_call = {"alltoall": "MPI_Alltoall", "allgather": "MPI_Allgather", "gather": "MPI_Gather"}[collective]
        if ours.kind == "dag":
            graph = dag_workload(topo, name, collective, job.bytes_per_pair, job.root_rank)
            graph.save(nws)
            written.append(nws)
            uses.append((nws.name, f"{name} (paper 004 task DAG) inside `{mpi_call}` of an unchanged program at "
                         f"{job.bytes_per_pair} bytes per block{verdict}: " + program))
        else:
            chosen = next((c for c in built or () if c.name == name), None)
            if chosen is None:
                (chosen,) = candidates(topo, job.bytes_per_pair, hosts, order, seed, only=name,
                                       collective=collective, root=job.root_rank)
            schedule = chosen.schedule
            assert schedule is not None, f"the pick {name} is a phased candidate that was built"
            # The executor the ranking used: the file runs what the plan predicted.
            row = next(r for r in result.schedules if r.name == name)
            executor, times = row.executor, row.predicted_times_s
            traffic.save(schedule, nws, executor=executor)
            traffic.save(schedule, out_dir / f"{collective}-{ranks}.json")
            written += [nws, out_dir / f"{collective}-{ranks}.json"]
            tried = ", ".join(f"{ex} {t * 1e3:.3f} ms" for ex, t in times.items())
            uses.append((nws.name, f"{name} inside `{mpi_call}` of an unchanged program, any message size, with the "
                         f"{executor} executor (the plan's choice at {job.bytes_per_pair} bytes per "
                         f"block: {tried}){verdict}: " + program))
            uses.append((f"{collective}-{ranks}.json", "the same schedule as JSON: `netweave analyze`, "
                         "`netweave simulate flow`, `netweave run`"))
    if placement is not None:
        for fmt, file, use in (("rankfile", "rankfile", "Open MPI: `mpirun --rankfile rankfile ./your_program`"),
                               ("vcoord", "vcoordfile", "Fujitsu MPI: `mpiexec --vcoordfile vcoordfile ./your_program`"),
                               ("mpich", "MPICH_RANK_ORDER", "Cray MPICH: `MPICH_RANK_REORDER_METHOD=3` with this file "
                                "in the working directory")):
            try:
                written.append(placement.write_map(out_dir / file, fmt))
                uses.append((file, f"the ranks placed for {placement.summary.pattern}; {use}"))
            except NetweaveError as e:
                uses.append((f"(no {file})", str(e)))
    readme = out_dir / "README.md"
    write_text(readme, "# What to deploy\n\n`netweave plan` wrote these files beside its report (`index.html`); "
               "each line says what uses it.\n\n" + "".join(f"- `{f}`: {u}\n" for f, u in uses))
    written.append(readme)
    return written, uses


def _deploy_note(result: PlanResult) -> str:
    """How the deployed schedule stands against the user's MPI, for README.md."""
    best = result.best
    if best is not None and best.is_native:
        if result.verify_summary is not None and result.verify_summary.adopted == best.name:
            return (f" — not recommended: your MPI's own {best.label} {best.algorithm} measured faster on the "
                    "emulated fabric (`--verify`); keep it")
        return (f" — not recommended: the flow model predicts your MPI's own {best.label} "
                f"{best.algorithm} faster ({best.predicted_time_s * 1e3:.3f} ms); keep it")
    return ""


#: Paper 000's sub-cluster schedule, whose k and m come from the job's host set.
SUB_CLUSTER = "lsft-partial"


def job_hosts(topo: Topology, hosts: str | None, order: str = "listed", seed: int | None = None) -> list[int]:
    """Host index of each rank of the job named by `hosts` (all hosts when None). Fat-trees
    take whole leaves, except that a job that is exactly an LSFT sub-cluster allocation (m
    servers on each leaf of an n x k rectangle) may use part of each leaf, as paper 000's
    jobs do."""
    try:
        return list(_core.allocate_hosts(topo, hosts or "all", order, seed or 0, False))
    except NetweaveError:
        if hosts is None:
            raise
        placed = list(_core.allocate_hosts(topo, hosts, order, seed or 0, True))
        if lsft_sub_cluster(topo, placed) is None:
            raise
        return placed


def lsft_sub_cluster(topo: Topology, placed: list[int]) -> tuple[int, int, int] | None:
    """``(k, m, side)`` when the host set `placed` is exactly paper 000's sub-cluster
    allocation on a Latin-square fat-tree of order n — the m lowest slots of every leaf of the
    n x k rectangle of grid leaves on one side, m <= k <= n; None otherwise (rank order does
    not matter). Recognised by the core (``LsftLayout::sub_cluster_of``)."""
    return _core.lsft_sub_cluster_of(topo, [int(h) for h in placed])


def _sub_cluster_candidate(topo: Topology, bytes_per_pair: int, sub_cluster) -> Candidate:
    if sub_cluster is None:
        return Candidate(SUB_CLUSTER, skipped="the job is not an n x k x m sub-cluster of a Latin-square fat-tree")
    k, m, side = sub_cluster
    return Candidate(SUB_CLUSTER, _core.lsft_partial_alltoall(topo, k, m, bytes_per_pair, "text", "row-major", side))


def _measure(name: str, schedule: Schedule, loads: dict[str, Any], flow: dict[str, Any], executor: str,
             times: dict[str, float], bound_s: float, contention_free: bool) -> PhasedRow:
    """A phased candidate's row: the exact analysis' `loads`, the flow model's prediction `flow`
    with its chosen `executor` (:func:`predict_phased`; every executor's `times`), its traffic's bound and whether
    it is contention-free (:func:`full_rate_contention_free`)."""
    worst = max(range(len(loads["phases"])), key=lambda p: loads["phases"][p]["max_load"], default=0)
    return PhasedRow(
        name=name,
        schedule=schedule.name,
        phases=schedule.num_phases,
        messages=schedule.num_messages,
        complete=loads["complete"],
        problem=loads["problem"],
        max_congestion=loads["max_congestion"],
        throughput_ratio=loads["throughput_ratio"],
        fluid_time_s=loads["fluid_time_s"],
        fluid_time_host_links_s=loads["fluid_time_host_links_s"],
        flows=loads["flows"],
        bytes=loads["bytes"],
        max_channel_bytes=loads["max_channel_bytes"],
        hop_bytes=loads["hop_bytes"],
        contention_free=contention_free,
        worst_phase=worst,
        phase_loads=loads["phases"],
        predicted_time_s=flow["makespan_s"],
        executor=executor,
        predicted_times_s=times,
        throughput_per_server_mib_s=flow["throughput_per_server_mib_s"],
        bound_s=bound_s,
    )


def full_rate_contention_free(topo: Topology, routes: _core.RoutingTable, schedule: Schedule,
                              loads: dict[str, Any]) -> bool:
    """True when no directed link carries, in any phase, more flows than it serves at full host
    rate: ``⌊bandwidth ÷ fastest host link⌋`` of them (at least one) — one on a uniform fabric,
    ten on a 10 Gbit/s trunk between 1 Gbit/s hosts, two on a bonded pair. Every flow then runs
    at its host's rate and no switch queue builds, which is what the plan's preference for
    contention-free schedules is about; counting one flow per link would call a tree schedule
    that fills a 10 Gbit/s trunk with ten 1 Gbit/s flows contended. `loads` is the schedule's
    :func:`analysis.analyze` report (phases with at most one flow per link are not re-counted).

    On a lossless fabric a phase whose messages all go to one host (a gather's incast) counts as
    contention-free too: its flows are held to that host's link, which they keep full, credits
    hold back what a shallow buffer would drop, and no flow to another host queues behind them.
    On the emulated LSFT of order 3 (queues too deep to drop) the linear gather of 16 KiB and
    128 KiB measured 1.16× and 1.13× faster than binomial, which the margin had preferred."""
    if loads["max_congestion"] <= 1:
        return True
    lossless = topo.link_layer != "ethernet"
    ends = topo.link_array().tolist()
    bandwidth = [bw for bw, _lat in topo.link_specs().tolist()]
    host_rate = max((bandwidth[i] for i, (a, _pa, b, _pb) in enumerate(ends) if topo.is_host(a) or topo.is_host(b)),
                    default=0.0)
    if host_rate <= 0:
        return False
    # Channel 2·l and 2·l + 1 are link l's two directions; parallel links are separate channels.
    serves = [max(1, int(bandwidth[c // 2] / host_rate * (1 + 1e-9))) for c in range(2 * len(ends))]
    for p, phase in enumerate(loads["phases"]):
        if phase["max_load"] <= 1 or (lossless and len({dst for _src, dst, _bytes in schedule.phase(p)}) == 1):
            continue
        flows = analysis.phase_channel_flows(routes, schedule, p)
        if any(f > serves[c] for c, f in enumerate(flows)):
            return False
    return True


#: Times closer than this (relative) count as equal: the executors sum the same transfers in
#: different orders.
TIME_TOLERANCE = 1e-6


@dataclass
class Choice:
    """A candidate :func:`choose` picked, and one line saying why."""

    row: CandidateRow
    reason: str


def choose(rows: Sequence[CandidateRow]) -> Choice | None:
    """The pick among every candidate row (phased, DAG, native): complete (its claims hold) and
    fastest as the flow model predicts it; on equal time the contention-free one, then the one
    with fewer phases (fewer synchronisations), then the earlier in the list. A contention-free
    candidate within :data:`CONTENTION_FREE_MARGIN` of a contended pick replaces it; then an
    earlier-listed candidate as contention-free as the pick, with no more phases and within
    :data:`LEVEL_MARGIN` of it does — so the baseline, listed first, stays unless another
    schedule really beats it. Returns the row with the reason it was picked; None when nothing
    is proven."""
    proven = [s for s in rows if s.complete]
    if not proven:
        return None
    fastest = min(s.predicted_time_s for s in proven)
    tied = [s for s in proven if s.predicted_time_s <= fastest * (1 + TIME_TOLERANCE)]
    pick = min(tied, key=lambda s: (not s.contention_free, s.phase_count, rows.index(s)))
    reason = "fastest predicted"
    if pick.contention_free:
        # Say what else it stood against: a contended candidate as fast as it is passed over.
        level = [s.name for s in tied if s is not pick and not s.contention_free]
        reason += (f", and contention-free (level with {', '.join(level)}, which is not)" if level
                   else ", and contention-free")
    else:
        near = [s for s in proven if s.contention_free
                and s.predicted_time_s <= pick.predicted_time_s * (1 + CONTENTION_FREE_MARGIN)]
        if near:
            free = min(near, key=lambda s: (s.predicted_time_s, rows.index(s)))
            slower = free.predicted_time_s / pick.predicted_time_s - 1
            reason = (f"contention-free and within {CONTENTION_FREE_MARGIN:.0%} of the fastest, {pick.name} "
                      f"({slower:+.1%}): no link carries more of its flows at once than it serves at full host "
                      "rate, so a shallow switch buffer never overflows where the flow model assumed fair "
                      "sharing")
            pick = free
    earlier = [s for s in proven[:proven.index(pick)]
               if s.contention_free == pick.contention_free and s.phase_count <= pick.phase_count
               and s.predicted_time_s <= pick.predicted_time_s * (1 + LEVEL_MARGIN)]
    if earlier:
        first = earlier[0]
        slower = first.predicted_time_s / pick.predicted_time_s - 1
        reason = (f"level with {pick.name}, listed after it: as contention-free, no more phases and within "
                  f"{LEVEL_MARGIN:.0%} ({slower:+.1%}), a smaller gain than the model tells apart")
        pick = first
    return Choice(pick, reason)


def routing_for(topo: Topology, engine: str | None = None, bytes_per_pair: int = DEFAULT_BYTES,
                hosts: str | None = None, order: str = "listed", seed: int | None = None,
                calibration: Path | None = None) -> tuple[_core.RoutingTable, str]:
    """The plan's routing and one line saying why: `engine` when given; else the engine suited
    to the fabric, unless it needs more than one virtual lane and up*/down* (one lane, what
    OpenSM installs from a forwarding-table dump alone) is deadlock-free, minimal (no pair on a
    longer path) and predicts the job's baseline all-to-all within :data:`ONE_LANE_MARGIN` of
    it — then up*/down*."""
    if engine is not None:
        return routing.route(topo, engine), f"{engine}, as given"
    suited = routing.default_engine(topo)
    routes = routing.route(topo, suited)
    lanes = routes.check()["vcs_used"]
    if lanes <= 1:
        return routes, f"{suited}, the engine suited to the fabric; it needs one lane"
    keep = f"{suited} with {lanes} lanes, although one would be simpler to install: "
    try:
        one = routing.route(topo, ONE_LANE_ENGINE)
    except NetweaveError as e:
        return routes, keep + f"{ONE_LANE_ENGINE} does not route this fabric ({e})"
    if not one.check()["deadlock_free"] or one.check()["vcs_used"] > 1:
        return routes, keep + f"{ONE_LANE_ENGINE} is not deadlock-free in one lane here"
    detour = one.metrics()["non_minimal_pairs"]
    if detour:
        return routes, keep + f"{ONE_LANE_ENGINE} is not minimal here ({detour:,} host pairs take a longer path)"
    placed = job_hosts(topo, hosts, order, seed)
    baseline = traffic.build("alltoall", BASELINE, num_ranks=len(placed), bytes=bytes_per_pair).with_placement(placed)
    # Each routing's baseline with its fastest executor: which routing is faster, not what to deploy.
    multi = min(predict_phased(routes, baseline, calibration=calibration)[2].values())
    single = min(predict_phased(one, baseline, calibration=calibration)[2].values())
    if single <= multi * (1 + ONE_LANE_MARGIN):
        return one, (f"{ONE_LANE_ENGINE} in one lane instead of {suited}'s {lanes}: minimal, deadlock-free, and {BASELINE} "
                     f"predicts {single * 1e3:.4g} ms against {multi * 1e3:.4g} ms (within {ONE_LANE_MARGIN:.0%}); "
                     "OpenSM installs it from the forwarding tables alone")
    return routes, keep + (f"{ONE_LANE_ENGINE} is minimal but {BASELINE} predicts {single / multi - 1:.1%} slower on it "
                           f"({single * 1e3:.4g} ms against {multi * 1e3:.4g} ms)")


def plan(
    topo: Topology | None = None,
    bytes_per_pair: int = DEFAULT_BYTES,
    engine: str | None = None,
    progress: Callable[[str], None] | None = None,
    hosts: str | None = None,
    order: str = "listed",
    seed: int | None = None,
    routes: _core.RoutingTable | None = None,
    built: list[Candidate] | None = None,
    collective: str = "alltoall",
    root: int = 0,
    calibration: Path | None = None,
    routing_note: str | None = None,
) -> PlanResult:
    """Route `topo` (default: the built-in LSFT of order 3) with a deadlock-free engine
    (:func:`routing_for`, or `engine`; or take `routes` already made, with `routing_note`
    saying why), predict every candidate `collective` for the job — phased ones of
    :func:`candidates` (or `built` when already made for the same job), paper 004's DAGs and
    the user's MPI — on the hosts named by `hosts` (all when omitted; syntax of ``netweave
    schedule --hosts``) in rank `order`, each beside the traffic's bottleneck bound, and pick
    the best (:func:`choose`). `calibration` is the fabric's flow-model parameters file.
    `progress` receives a short note before each step."""
    _check_collective(collective)
    note = progress or (lambda _msg: None)
    topo = topo if topo is not None else topology.example_cluster()
    if routes is None:
        note("routing")
        routes, routing_note = routing_for(topo, engine, bytes_per_pair, hosts, order, seed, calibration)
    proof = routes.check()
    measured: list[PhasedRow] = []
    skipped: list[Skipped] = []
    placed = job_hosts(topo, hosts, order, seed)
    if collective == "gather" and not 0 <= root < len(placed):
        raise NetweaveError(f"--root {root} is not a rank of the job (0..{len(placed) - 1})")
    for cand in built if built is not None else candidates(topo, bytes_per_pair, hosts, order, seed,
                                                           collective=collective, root=root):
        if cand.schedule is None:
            skipped.append(Skipped(name=cand.name, reason=cand.skipped or "it was not built"))
            continue
        note(f"analysing {cand.name}")
        loads = analysis.analyze(routes, cand.schedule)
        note(f"simulating {cand.name}")
        executor, flow, times = predict_phased(routes, cand.schedule, phased_executors(loads), calibration)
        bound_s = analysis.bottleneck_bound(routes, cand.schedule)["seconds"]
        free = full_rate_contention_free(topo, routes, cand.schedule, loads)
        measured.append(_measure(cand.name, cand.schedule, loads, flow, executor, times, bound_s, free))
    baseline_name = BASELINES[collective]
    baseline = next((s for s in measured if s.name == baseline_name), None)
    if baseline is None:
        reason = next((s.reason for s in skipped if s.name == baseline_name), "it was not built")
        raise NetweaveError(f"the job has no {baseline_name} {collective} to compare with: {reason}")
    dags, dag_skipped = dag_candidates(topo, routes, bytes_per_pair, hosts, note, collective, root, calibration)
    skipped += dag_skipped
    natives = native_candidates(routes, placed, bytes_per_pair, note, collective, root, calibration)
    # The job's bound: its traffic sent directly, each block once to each rank that needs it
    # (an allgather moves what an all-to-all of the same block size does); forwarding only adds.
    direct = traffic.build("alltoall" if collective == "allgather" else collective, "linear", num_ranks=len(placed),
                           bytes=bytes_per_pair, root=root if collective == "gather" else None).with_placement(placed)
    bound = analysis.bottleneck_bound(routes, direct)
    # The user's MPI first: on a tie, what the program already runs stays.
    everything: list[CandidateRow] = [*natives, *measured, *dags]
    for row in everything:
        row.bound_ratio = analysis.bound_ratio(row.predicted_time_s, bound)
    # Concurrent is ranked but not picked: it is what the native MPIs' linear algorithms do.
    pickable = [r for r in everything if r.pickable]
    ours = choose([r for r in pickable if r.kind != "native"])
    best = choose(pickable)
    return PlanResult(
        topology=topology.info(topo),
        routing=RoutingChoice(engine=routes.engine, vcs=proof["vcs_used"], deadlock_free=proof["deadlock_free"],
                              why=routing_note or f"{routes.engine}, as given"),
        job=Job(collective=collective, ranks=len(placed), hosts=hosts or "all", bytes_per_pair=bytes_per_pair,
                root=root if collective == "gather" else None),
        bound=Bound(seconds=bound["seconds"], bytes=bound["bytes"], describe=bound["describe"]),
        schedules=measured,
        dag_schedules=dags,
        native=natives,
        skipped=skipped,
        ranking=[r.name for r in sorted(everything, key=lambda r: r.predicted_time_s)],
        best=None if best is None else pick_record(best, baseline),
        ours=None if ours is None else pick_record(ours, baseline),
        today=mpi_today(natives, ours),
        prediction=Prediction(model="flow-level, max-min fair sharing, link latencies", executors=list(PHASED_EXECUTORS),
                              calibration=None if calibration is None else str(calibration)),
    )


def pick_record(choice: Choice, baseline: PhasedRow) -> Pick:
    """What the report says of a pick: its times, against the baseline, and why it was picked."""
    row = choice.row
    phased = row if isinstance(row, PhasedRow) else None
    native = row if isinstance(row, NativeRow) else None
    return Pick(
        name=row.name,
        kind=row.kind,
        reason=choice.reason,
        fluid_time_host_links_s=None if phased is None else phased.fluid_time_host_links_s,
        throughput_ratio=None if phased is None else phased.throughput_ratio,
        speedup_vs_shift=None if phased is None else _speedup(baseline, phased),
        predicted_time_s=row.predicted_time_s,
        executor=row.executor,
        predicted_speedup_vs_shift=baseline.predicted_time_s / row.predicted_time_s if row.predicted_time_s > 0
        else None,
        baseline=baseline.name,
        bound_ratio=row.bound_ratio,
        contention_free=row.contention_free,
        label=None if native is None else native.label,
        algorithm=None if native is None else native.algorithm,
    )


def mpi_today(natives: list[NativeRow], ours: Choice | None) -> Today | None:
    """"Your MPI today: X, ours: Y": each library's default against netweave's pick."""
    if ours is None or not natives:
        return None
    ours_s = ours.row.predicted_time_s
    return Today(
        ours=ours.row.name,
        ours_s=ours_s,
        libraries=[TodayLibrary(library=n.library, label=n.label, algorithm=n.algorithm,
                                predicted_time_s=n.predicted_time_s,
                                ours_speedup=n.predicted_time_s / ours_s if ours_s > 0 else None) for n in natives],
    )


#: Paper 004's schedule, offered where every host pair has one path (trees, Ethernet clusters).
CONTENTION_FREE = "contention-free"
#: Paper 004's baseline: every task at once, as an unscheduled MPI collective posts them.
CONCURRENT = "concurrent"


def dag_workload(topo: Topology, name: str, collective: str, bytes_per_pair: int, root: int) -> _core.TaskGraph:
    """The task DAG of `name` (:data:`CONTENTION_FREE` or :data:`CONCURRENT`) for the whole fabric."""
    if name == CONTENTION_FREE:
        return traffic.contention_free(topo, collective, bytes_per_pair, root=root)[0]
    return traffic.concurrent(topo, collective, bytes_per_pair, root=root)


def dag_candidates(topo: Topology, routes, bytes_per_pair: int, hosts: str | None,
                   note: Callable[[str], None], collective: str = "alltoall", root: int = 0,
                   calibration: Path | None = None) -> tuple[list[DagRow], list[Skipped]]:
    """Paper 004's contention-free `collective` (all-to-all or gather) and its Concurrent
    baseline (everyone at once) as task DAGs, each predicted by the flow simulator's DAG
    executor: ``(rows, skipped)``. They are not phased, so the lock-step analysis does not
    apply; they are ranked by predicted time with the others. Skipped, with the reason, on
    fabrics where some host pair has several shortest paths, on jobs that are not the whole
    fabric and for allgather."""
    if collective not in ("alltoall", "gather"):
        return [], [Skipped(name=CONTENTION_FREE, reason="paper 004 schedules gather and all-to-all only")]
    if hosts is not None:
        return [], [Skipped(name=CONTENTION_FREE, reason="it schedules every host of the fabric; drop --hosts")]
    try:
        note(f"scheduling {CONTENTION_FREE}")
        graph, summary = traffic.contention_free(topo, collective, bytes_per_pair, root=root)
    except NetweaveError as e:
        return [], [Skipped(name=CONTENTION_FREE, reason=str(e))]
    rows = []
    # Concurrent posts every send at once, as MPI's nonblocking sends do; the contention-free
    # DAG sends one task at a time per host, as the thesis' engine does.
    everyone = max(topo.num_hosts - 1, 1)
    no_summary: dict[str, Any] = {}
    for name, dag, extra, nct in ((CONTENTION_FREE, graph, summary, 1),
                                  (CONCURRENT, traffic.concurrent(topo, collective, bytes_per_pair, root=root),
                                   no_summary, everyone)):
        note(f"simulating {name}")
        flow = predict(routes, dag, "dag", nct=nct, calibration=calibration)
        rows.append(DagRow(
            name=name,
            complete=True,
            contention_free=name == CONTENTION_FREE,
            # Concurrent is what an unscheduled MPI collective already does: a baseline, not advice.
            deployable=name == CONTENTION_FREE,
            tasks=dag.num_tasks,
            predicted_time_s=flow["makespan_s"],
            executor="dag",
            throughput_per_server_mib_s=flow["throughput_per_server_mib_s"],
            bound_s=analysis.bottleneck_bound(routes, dag)["seconds"],
            cost_model_s=extra.get("predicted_seconds"),
            groups=extra.get("groups"),
        ))
    return rows, []


def native_candidates(routes, placed: list[int], bytes_per_pair: int, note: Callable[[str], None],
                      collective: str = "alltoall", root: int = 0,
                      calibration: Path | None = None) -> list[NativeRow]:
    """What the user's MPI runs today: for each of :data:`NATIVE_LIBRARIES`, the algorithm its
    default decision rule picks for the job's rank count and block size, as a schedule on the
    job's hosts (``traffic::native_mpi``), predicted with the executor and sends in flight
    that algorithm has (every request at once for the linear ones, one exchange per step for
    pairwise, Bruck and the trees) and, with a `calibration` that measured the library, what
    the library costs the hosts per message (:func:`predict_native`)."""
    rows = []
    for library in NATIVE_LIBRARIES:
        sched, info = native_workload(library, collective, placed, bytes_per_pair, root)
        note(f"simulating {info['label']}'s {info['algorithm']}")
        flow = predict_native(routes, sched, library, info, len(placed), bytes_per_pair, calibration)
        rows.append(NativeRow(
            name=library,
            complete=True,
            contention_free=False,
            library=library,
            label=info["label"],
            algorithm=info["algorithm"],
            schedule=sched.name,
            phases=sched.num_phases,
            executor=info["executor"],
            concurrent_sends=info["concurrent_sends"],
            predicted_time_s=flow["makespan_s"],
            throughput_per_server_mib_s=flow["throughput_per_server_mib_s"],
            bound_s=analysis.bottleneck_bound(routes, sched)["seconds"],
        ))
    return rows


def predict_native(routes: _core.RoutingTable, sched: Schedule, library: str, info: dict[str, Any], ranks: int,
                   bytes_per_pair: int, calibration: Path | None = None,
                   tcp: dict[str, float] | None = None) -> dict[str, Any]:
    """The flow model's prediction of `library`'s schedule `sched` (`info` from
    :func:`native_workload`) for a job of `ranks` ranks: with the executor and sends in flight
    the algorithm has and, when `calibration` has a ``native`` section for the library, every
    message charged the library's measured host cost instead of the calibration's per-message
    overhead (:func:`netweave.run.calibration.native_overhead`). Without one, as :func:`predict`
    (`tcp` as there)."""
    executor, nct = info["executor"], info["concurrent_sends"]
    if calibration is None:
        return predict(routes, sched, executor, nct, tcp=tcp)
    document = calibration_mod.load(calibration, routes.topology)
    costs = calibration_mod.native_overhead(document, library, ranks, bytes_per_pair, sched.collective)
    streams = calibration_mod.native_streams(document, library, nct)
    charges = {} if costs is None else calibration_mod.native_charges(sched.collective, bytes_per_pair, costs)
    return flowsim.simulate(routes, sched, executor=executor, nct=nct, calibration=document, tcp=tcp,
                            host_streams=streams, **charges)


def native_workload(library: str, collective: str, placed: list[int], bytes_per_pair: int,
                    root: int = 0) -> tuple[Schedule, dict[str, Any]]:
    """`library`'s default algorithm for the job as a schedule on the job's hosts, and what
    ``traffic::native_mpi`` says of it (``label``, ``algorithm``, ``executor``,
    ``concurrent_sends``)."""
    sched, info = _core.native_mpi(library, collective, len(placed), bytes_per_pair, root)
    return sched.with_placement(placed), info


def native_schedule(library: str, collective: str, placed: list[int], bytes_per_pair: int, root: int = 0) -> Schedule:
    """The schedule :func:`native_candidates` predicts for `library`, on the job's hosts."""
    return native_workload(library, collective, placed, bytes_per_pair, root)[0]


def _speedup(baseline: PhasedRow, best: PhasedRow) -> float | None:
    """The baseline's lock-step time over `best`'s."""
    t = best.fluid_time_host_links_s
    return baseline.fluid_time_host_links_s / t if t > 0 else None



#: Objective the plan's rank placement minimises (paper 003's hop count x busiest link).
PLACE_COST = "hops_x_max_channel"


@dataclass
class Placement:
    """Where the job's ranks run: the summary the report shows, and what a map file needs."""

    summary: PlacementSummary
    net: Any
    host_of_rank: Any

    def write_rankfile(self, path) -> Any:
        """Write the placement as an Open MPI rankfile at `path`; returns the path."""
        return self.write_map(path, "rankfile")

    def write_map(self, path, fmt: str) -> Any:
        """Write the placement as a map file of format `fmt` (see ``netweave.stages.mapping.FORMATS``)."""
        from netweave.stages import mapping

        meta = {"pattern": self.summary.pattern, "cost": self.summary.cost, "figures": self.summary.placed}
        return mapping.write_map(self.net, self.host_of_rank, path, fmt, None, meta)


def place_ranks(
    topo: Topology,
    pattern_source: str,
    engine: str | None = None,
    seconds: float = 5.0,
    seed: int = 0,
    cost: str = PLACE_COST,
    ranks_per_host: int = 1,
    evaluations: int | None = None,
) -> Placement:
    """Place the ranks of the job's traffic `pattern_source` (a pattern file or generator
    spec, see :func:`netweave.stages.mapping.load_pattern`) on `topo`, routed as the plan routes it
    (`engine`, default the engine suited to the topology): the best of BISEM and the baselines,
    annealed for `seconds` with `seed` (or for `evaluations`, which gives the same placement on
    every run). The summary holds the placement's figures against the
    identity (rank r on host r)."""
    from netweave.stages import mapping

    engine = engine or routing.default_engine(topo)
    pattern = mapping.load_pattern(pattern_source)
    net = mapping.network(topo, engine, ranks_per_host)
    mapping.check_fits(net, pattern)
    identity = mapping.cost(net, pattern, mapping.baseline(net, pattern, "identity"))
    start = mapping.start_placement(net, pattern, "best", seed, cost)
    result = mapping.optimize(net, pattern, start, cost=cost, seconds=seconds, evaluations=evaluations, seed=seed)
    gain = {k: (identity[k] / result.figures[k] if result.figures[k] > 0 else None)
            for k in ("hop_bytes", "max_channel_bytes", "hops_x_max_channel")}
    summary = PlacementSummary(
        pattern=pattern.name,
        source=pattern_source,
        ranks=pattern.num_ranks,
        engine=engine,
        cost=cost,
        seed=seed,
        seconds=round(result.seconds, 3),
        evaluations=result.evaluations,
        structure={k: v for k, v in mapping.structure(pattern).items() if k != "coords"},
        identity=identity,
        placed=result.figures,
        identity_over_placed=gain,
    )
    return Placement(summary, net, result.host_of_rank)
