"""The main job: run the whole pipeline on one topology and summarise it.

``plan`` routes the fabric, builds every all-to-all schedule the traffic layer can make for
the job, proves each one with the exact analysis engine (its claims hold: every ordered pair
exactly once, permutation phases where claimed) and measures it (link congestion, paper 000's
throughput ratio, paper 001's lock-step fluid time), then picks the fastest proven schedule and
sets it against shift, the usual MPI algorithm; the flow simulator predicts each one's time on
the fabric's real bandwidths and latencies. :mod:`netweave.report` renders the result as
text, JSON or files.

Candidates come from :func:`candidates`, i.e. from the traffic layer's algorithm table: any
all-to-all registered there (:func:`netweave.traffic.register`) joins the comparison without a
change here; algorithms that do not fit the job (XOR on a number of ranks that is no power of
two, A2AT on a shape that is no odd square, a fabric-specific schedule on another fabric) are
listed as skipped with the reason.

The job is every host of the fabric unless ``hosts`` names some (``netweave plan --hosts``).
Paper 000's sub-cluster schedule ``lsft-partial`` joins when that host set is exactly an
(n, k, m) allocation of a Latin-square fat-tree — m servers on each leaf of an n x k rectangle
of grid leaves: k and m are read off the host set (:func:`lsft_sub_cluster`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from netweave import analysis, flowsim, routing, topology, traffic
from netweave import _core
from netweave._core import NetweaveError, Schedule, Topology

#: Bytes each rank sends to each other rank in the default job (1 MiB).
DEFAULT_BYTES = 1 << 20

#: The baseline every candidate is compared with.
BASELINE = "shift"

#: How the flow simulator runs each candidate to predict its time: every rank starts a phase
#: once it has received all of the previous phase's messages (MPI's pairwise exchange).
PREDICT_EXECUTOR = "local-sync"


@dataclass
class Candidate:
    """One all-to-all algorithm tried for the job: its schedule, or why it does not apply."""

    name: str
    schedule: Optional[Schedule] = None
    skipped: Optional[str] = None


def candidates(
    topo: Topology,
    bytes_per_pair: int,
    hosts: Optional[str] = None,
    order: str = "listed",
    seed: Optional[int] = None,
    only: Optional[str] = None,
) -> list[Candidate]:
    """Every all-to-all of the traffic layer's table (or just the one named `only`), built for
    the job — the hosts of `topo` named by `hosts` (all of them when omitted) in rank `order` —
    shift first; the ones that do not fit the job carry the reason instead.

    ``lsft-partial`` needs the sub-cluster's k and m: they are derived from the job when its
    host set is exactly paper 000's (n, k, m) allocation (:func:`lsft_sub_cluster`), and the
    schedule uses the normative ``text`` move rule; any other job skips it."""
    sub_cluster = None
    placed = job_hosts(topo, hosts, order, seed)
    if hosts is not None:
        sub_cluster = lsft_sub_cluster(topo, placed)
    partial_leaves = sub_cluster is not None
    names = traffic.algorithms("alltoall")
    names = [BASELINE] + [n for n in names if n != BASELINE]
    names = [n for n in names if only is None or n == only]
    out = []
    for name in names:
        if name == SUB_CLUSTER:
            out.append(_sub_cluster_candidate(topo, bytes_per_pair, sub_cluster))
            continue
        try:
            sched = traffic.build(
                "alltoall", name, topology=topo, hosts=hosts, order=order, bytes=bytes_per_pair,
                seed=seed if order == "random" else None, allow_partial_leaves=partial_leaves,
            )
            out.append(Candidate(name, sched))
        except NetweaveError as e:
            out.append(Candidate(name, skipped=str(e)))
    return out


def write_artifacts(topo: Topology, routes: _core.RoutingTable, result: dict[str, Any], out_dir: Path,
                    hosts: Optional[str] = None, order: str = "listed", seed: Optional[int] = None,
                    placement: Optional["Placement"] = None,
                    built: Optional[list[Candidate]] = None) -> tuple[list[Path], list[tuple[str, str]]]:
    """The files a user deploys, beside the report in `out_dir`: the routing tables
    (``routes.json``, and ``opensm-lfts.dump`` for ``opensm -R file -U``), the chosen all-to-all
    as ``alltoall-<ranks>.nws`` (the name the MPI library looks up in a schedule directory; it
    asks for the executor the flow model finds fastest for it) and ``.json``, the rank placement
    as an Open MPI ``rankfile``, a Fujitsu ``vcoordfile`` and a Cray ``MPICH_RANK_ORDER`` when
    `placement` is given, and ``README.md`` saying which command uses each file. `routes` are the
    tables the plan used, `built` the candidates it measured (rebuilt when omitted). Returns the
    files written, and each file's name with the use ``README.md`` gives it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [routing.save(routes, out_dir / "routes.json")]
    uses = [("routes.json", f"netweave's routing tables ({routes.engine}): `netweave analyze topology.json routes.json SCHEDULE`, "
             "`netweave emulate up topology.json routes.json --name NAME`")]
    try:
        written.append(routing.save_lft(routes, out_dir / "opensm-lfts.dump"))
        uses.append(("opensm-lfts.dump", "the same tables for an InfiniBand subnet manager: "
                     "`opensm -R file -U opensm-lfts.dump`"))
    except NetweaveError as e:
        uses.append(("(no opensm-lfts.dump)", f"these tables cannot be written for OpenSM: {e}"))
    if result.get("best") is not None:
        name = result["best"]["name"]
        chosen = next((c for c in built or () if c.name == name), None)
        if chosen is None:
            (chosen,) = candidates(topo, result["job"]["bytes_per_pair"], hosts, order, seed, only=name)
        # A contention-free phase schedule stays so only while its phases do not overlap; which
        # executor keeps them apart best depends on the schedule (half-empty phases favour sync).
        # The plan already predicted the chosen schedule with its own executor.
        times = {ex: result["best"]["predicted_time_s"] if ex == PREDICT_EXECUTOR
                 else flowsim.simulate(routes, chosen.schedule, executor=ex)["makespan_s"]
                 for ex in _core.schedule_executors() if ex != "auto"}
        executor = min(times, key=times.get)
        ranks = chosen.schedule.num_ranks
        nws = out_dir / f"alltoall-{ranks}.nws"
        traffic.save(chosen.schedule, nws, executor=executor)
        traffic.save(chosen.schedule, out_dir / f"alltoall-{ranks}.json")
        written += [nws, out_dir / f"alltoall-{ranks}.json"]
        uses.append((nws.name, f"{name} inside `MPI_Alltoall` of an unchanged program, any message size, with the "
                     f"{executor} executor (flow model: " + ", ".join(f"{ex} {t * 1e3:.3f} ms" for ex, t in times.items())
                     + f"): `netweave mpi run -np {ranks} --schedule {nws} -- ./your_program`, or `mpirun -np {ranks} "
                     f"-x LD_PRELOAD=<netweave>/runtime/build/libnwmpi-openmpi.so -x NETWEAVE_SCHEDULE={nws} "
                     "./your_program` (MPICH: `-env LD_PRELOAD … -env NETWEAVE_SCHEDULE …`)"))
        uses.append((f"alltoall-{ranks}.json", "the same schedule as JSON: `netweave analyze`, `netweave simulate flow`, "
                     "`netweave run`"))
    if placement is not None:
        for fmt, file, use in (("rankfile", "rankfile", "Open MPI: `mpirun --rankfile rankfile ./your_program`"),
                               ("vcoord", "vcoordfile", "Fujitsu MPI: `mpiexec --vcoordfile vcoordfile ./your_program`"),
                               ("mpich", "MPICH_RANK_ORDER", "Cray MPICH: `MPICH_RANK_REORDER_METHOD=3` with this file "
                                "in the working directory")):
            try:
                written.append(placement.write_map(out_dir / file, fmt))
                uses.append((file, f"the ranks placed for {placement.summary['pattern']}; {use}"))
            except NetweaveError as e:
                uses.append((f"(no {file})", str(e)))
    readme = out_dir / "README.md"
    readme.write_text("# What to deploy\n\n`netweave plan` wrote these files beside its report (`index.html`); "
                      "each line says what uses it.\n\n" + "".join(f"- `{f}`: {u}\n" for f, u in uses))
    written.append(readme)
    return written, uses


#: Paper 000's sub-cluster schedule, whose k and m come from the job's host set.
SUB_CLUSTER = "lsft-partial"


def job_hosts(topo: Topology, hosts: Optional[str], order: str = "listed", seed: Optional[int] = None) -> list[int]:
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


def lsft_sub_cluster(topo: Topology, placed: list[int]) -> Optional[tuple[int, int, int]]:
    """``(k, m, side)`` when the host set `placed` is exactly paper 000's sub-cluster
    allocation on a Latin-square fat-tree of order n — the m lowest slots of every leaf of the
    n x k rectangle of grid leaves on one side, m <= k <= n; None otherwise (rank order does
    not matter)."""
    s = topo.structure
    if s["kind"] != "lsft":
        return None
    n = int(s["order"])
    sides = 2 if s["two_sided"] else 1
    size, wanted = len(placed), set(placed)
    if len(wanted) != size:
        return None
    for k in range(1, n + 1):
        if size % (n * k):
            continue
        m = size // (n * k)
        if not 1 <= m <= k:
            continue
        for side in range(sides):
            if set(int(h) for h in traffic.lsft_allocation(topo, k, m, side=side)) == wanted:
                return k, m, side
    return None


def _sub_cluster_candidate(topo: Topology, bytes_per_pair: int, sub_cluster) -> Candidate:
    if sub_cluster is None:
        return Candidate(SUB_CLUSTER, skipped="the job is not an n x k x m sub-cluster of a Latin-square fat-tree")
    k, m, side = sub_cluster
    return Candidate(SUB_CLUSTER, _core.lsft_partial_alltoall(topo, k, m, bytes_per_pair, "text", "row-major", side))


def _measure(name: str, schedule: Schedule, loads: dict[str, Any]) -> dict[str, Any]:
    worst = max(range(len(loads["phases"])), key=lambda p: loads["phases"][p]["max_load"], default=0)
    return {
        "name": name,
        "schedule": schedule.name,
        "phases": schedule.num_phases,
        "messages": schedule.num_messages,
        "complete": loads["complete"],
        "problem": loads["problem"],
        "max_congestion": loads["max_congestion"],
        "throughput_ratio": loads["throughput_ratio"],
        "fluid_time_s": loads["fluid_time_s"],
        "fluid_time_host_links_s": loads["fluid_time_host_links_s"],
        "flows": loads["flows"],
        "bytes": loads["bytes"],
        "max_channel_bytes": loads["max_channel_bytes"],
        "max_link_bytes": loads["max_link_bytes"],
        "hop_bytes": loads["hop_bytes"],
        "contention_free": loads["max_congestion"] <= 1,
        "worst_phase": worst,
        "phase_loads": loads["phases"],
    }


#: Times closer than this (relative) count as equal: sums of per-phase times in floating point.
TIME_TOLERANCE = 1e-9


def choose(measured: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The best proven schedule: complete (its claims hold) and fastest in the lock-step model
    with host links bound too (a rank's port is a link like any other); on equal time the more
    contention-free, then the one with fewer phases (fewer synchronisations), then the earlier
    in the list — so shift, listed first, stays unless another schedule really beats it."""
    proven = [s for s in measured if s["complete"]]
    if not proven:
        return None
    fastest = min(s["fluid_time_host_links_s"] for s in proven)
    tied = [s for s in proven if s["fluid_time_host_links_s"] <= fastest * (1 + TIME_TOLERANCE)]
    return min(tied, key=lambda s: (-round(s["throughput_ratio"], 12), s["phases"], measured.index(s)))


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
) -> dict[str, Any]:
    """Route `topo` (default: the built-in LSFT of order 3) with a deadlock-free engine suited
    to it (or `engine`; or take `routes` already made), analyse every candidate all-to-all for
    the job (those of :func:`candidates`, or `built` when already made for the same job) — the hosts named by `hosts` (all when omitted; syntax of ``netweave schedule
    --hosts``) in rank `order` — and report each one with the best proven schedule against
    shift. `progress` receives a short note before each step."""
    note = progress or (lambda _msg: None)
    topo = topo if topo is not None else topology.example_cluster()
    if routes is None:
        note("routing")
        routes = routing.route(topo, engine or routing.default_engine(topo))
    proof = routes.check()
    measured, skipped = [], []
    placed = job_hosts(topo, hosts, order, seed)
    for cand in built if built is not None else candidates(topo, bytes_per_pair, hosts, order, seed):
        if cand.schedule is None:
            skipped.append({"name": cand.name, "reason": cand.skipped})
            continue
        note(f"analysing {cand.name}")
        row = _measure(cand.name, cand.schedule, analysis.analyze(routes, cand.schedule))
        note(f"simulating {cand.name}")
        flow = flowsim.simulate(routes, cand.schedule, executor=PREDICT_EXECUTOR)
        row["predicted_time_s"] = flow["makespan_s"]
        row["throughput_per_server_mib_s"] = flow["throughput_per_server_mib_s"]
        measured.append(row)
    dags, dag_skipped = dag_candidates(topo, routes, bytes_per_pair, hosts, note)
    skipped += dag_skipped
    baseline = next((s for s in measured if s["name"] == BASELINE), None)
    if baseline is None:
        reason = next(s["reason"] for s in skipped if s["name"] == BASELINE)
        raise NetweaveError(f"the job has no {BASELINE} all-to-all to compare with: {reason}")
    best = choose(measured)
    return {
        "topology": topology.info(topo),
        "routing": {"engine": routes.engine, "vcs": proof["vcs_used"], "deadlock_free": proof["deadlock_free"]},
        "job": {
            "collective": "alltoall",
            "ranks": len(placed),
            "hosts": hosts or "all",
            "bytes_per_pair": bytes_per_pair,
        },
        "schedules": measured,
        "dag_schedules": dags,
        "skipped": skipped,
        "best": None if best is None else {
            "name": best["name"],
            "fluid_time_host_links_s": best["fluid_time_host_links_s"],
            "throughput_ratio": best["throughput_ratio"],
            "speedup_vs_shift": _speedup(baseline, best),
            "predicted_time_s": best["predicted_time_s"],
            "predicted_speedup_vs_shift": baseline["predicted_time_s"] / best["predicted_time_s"]
            if best["predicted_time_s"] > 0
            else None,
        },
        "prediction": {"model": "flow-level, max-min fair sharing, link latencies", "executor": PREDICT_EXECUTOR},
    }


#: Paper 004's schedule, offered where every host pair has one path (trees, Ethernet clusters).
CONTENTION_FREE = "contention-free"


def dag_candidates(topo: Topology, routes, bytes_per_pair: int, hosts: Optional[str],
                   note: Callable[[str], None]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Paper 004's contention-free all-to-all and its Concurrent baseline (everyone at once) as
    task DAGs, each predicted by the flow simulator's DAG executor: ``(rows, skipped)``. They
    are not phased, so the lock-step analysis does not apply; the plan sets their predicted
    time beside the phased schedules'. Skipped, with the reason, on fabrics where some host
    pair has several shortest paths and on jobs that are not the whole fabric."""
    if hosts is not None:
        return [], [{"name": CONTENTION_FREE, "reason": "it schedules every host of the fabric; drop --hosts"}]
    try:
        note(f"scheduling {CONTENTION_FREE}")
        graph, summary = traffic.contention_free(topo, "alltoall", bytes_per_pair)
    except NetweaveError as e:
        return [], [{"name": CONTENTION_FREE, "reason": str(e)}]
    rows = []
    # Concurrent posts every send at once, as MPI's nonblocking sends do; the contention-free
    # DAG sends one task at a time per host, as the thesis' engine does.
    everyone = max(topo.num_hosts - 1, 1)
    for name, dag, extra, nct in ((CONTENTION_FREE, graph, summary, 1),
                                  ("concurrent", traffic.concurrent(topo, "alltoall", bytes_per_pair), {}, everyone)):
        note(f"simulating {name}")
        flow = flowsim.simulate(routes, dag, executor="dag", nct=nct)
        rows.append({
            "name": name,
            "tasks": dag.num_tasks,
            "predicted_time_s": flow["makespan_s"],
            "throughput_per_server_mib_s": flow["throughput_per_server_mib_s"],
            "cost_model_s": extra.get("predicted_seconds"),
            "groups": extra.get("groups"),
        })
    return rows, []


def _speedup(baseline: dict[str, Any], best: dict[str, Any]) -> Optional[float]:
    t = best["fluid_time_host_links_s"]
    return baseline["fluid_time_host_links_s"] / t if t > 0 else None



#: Objective the plan's rank placement minimises (paper 003's hop count x busiest link).
PLACE_COST = "rmatt"


@dataclass
class Placement:
    """Where the job's ranks run: the summary the report shows, and what a map file needs."""

    summary: dict[str, Any]
    net: Any
    host_of_rank: Any

    def write_rankfile(self, path) -> Any:
        """Write the placement as an Open MPI rankfile at `path`; returns the path."""
        return self.write_map(path, "rankfile")

    def write_map(self, path, fmt: str) -> Any:
        """Write the placement as a map file of format `fmt` (see ``netweave.mapping.FORMATS``)."""
        from netweave import mapping

        meta = {"pattern": self.summary["pattern"], "cost": self.summary["cost"], "figures": self.summary["placed"]}
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
    spec, see :func:`netweave.mapping.load_pattern`) on `topo`, routed as the plan routes it
    (`engine`, default the engine suited to the topology): the best of BISEM and the baselines,
    annealed for `seconds` with `seed` (or for `evaluations`, which gives the same placement on
    every run). The summary holds the placement's figures against the
    identity (rank r on host r)."""
    from netweave import mapping

    engine = engine or routing.default_engine(topo)
    pattern = mapping.load_pattern(pattern_source)
    net = mapping.network(topo, engine, ranks_per_host)
    mapping.check_fits(net, pattern)
    identity = mapping.cost(net, pattern, mapping.baseline(net, pattern, "identity"))
    start = mapping.start_placement(net, pattern, "best", seed, cost)
    result = mapping.optimize(net, pattern, start, cost=cost, seconds=seconds, evaluations=evaluations, seed=seed)
    gain = {k: (identity[k] / result.figures[k] if result.figures[k] > 0 else None)
            for k in ("hop_bytes", "max_link", "rmatt")}
    summary = {
        "pattern": pattern.name,
        "source": pattern_source,
        "ranks": pattern.num_ranks,
        "engine": engine,
        "cost": cost,
        "seed": seed,
        "seconds": round(result.seconds, 3),
        "evaluations": result.evaluations,
        "structure": {k: v for k, v in mapping.structure(pattern).items() if k != "coords"},
        "identity": identity,
        "placed": result.figures,
        "identity_over_placed": gain,
    }
    return Placement(summary, net, result.host_of_rank)
