"""``netweave plan --verify``: the plan's predictions measured on the emulated fabric.

:func:`verify` brings the plan's fabric up as network namespaces routed by the plan's tables
(:mod:`netweave.emulate`, links at their bandwidth × a scale this machine can forward), runs
the candidates that matter at the plan's message size and sets each measured time beside the
prediction for the same scaled fabric:

- the :data:`TOP` best-predicted of netweave's candidates and paper 004's Concurrent, each as a
  schedule file inside ``MPI_Alltoall`` (``MPI_Gather``, ``MPI_Allgather``) of ``nwbench``
  under Open MPI with netweave's MPI library — the way a user deploys them;
- Open MPI's and MPICH's own collective (``nwbench``'s native timing), whose algorithms the
  plan models (``traffic::native_mpi``).

Each row is ``{name, predicted_s, measured_s, ratio}`` (ratio = measured ÷ predicted); the
summary says whether the plan's pick is the measured best. The fabric is torn down whatever
happens, Ctrl-C included. Everything is checked before anything starts
(:func:`check_can_verify`): root, the fabric's size, the MPI programs.

The emulation has no link latency; the predictions for it are made on the scaled fabric
without latency too (as ``netweave emulate measure`` does), so the ratio is the model's error,
not the scale's.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from netweave import emulate, mpi, runtime, traffic
from netweave import plan as plan_mod
from netweave._core import NetweaveError, RoutingTable, Topology

#: netweave candidates measured besides Concurrent and the native MPIs: the best predicted.
TOP = 3
#: The most hosts this machine emulates for --verify: one namespace and one MPI process each, on
#: two cores (28 hosts measured in benches/advice_fidelity.py).
MAX_HOSTS = 64
#: The share of emulate's forwarding budget a verified run may use at its predicted pace.
FORWARDING_SHARE = 0.5
#: Timed calls per candidate (after one warm-up call); nwbench reports the slowest rank's mean.
REPS = 3
#: How much slower than the measured best the pick may be and still count as the best (the
#: issue's target: within 10 %).
PICK_MARGIN = 0.10


def check_can_verify(topo: Topology, ranks: int) -> None:
    """Raise a one-line error unless this machine can verify a plan on `topo`: root (namespaces),
    at most :data:`MAX_HOSTS` hosts, and nwbench with netweave's library built for both MPIs."""
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
        mpi.library_path(implementation)


def _scale(routes: RoutingTable, workloads: list, fastest_s: float) -> float:
    """The link scale at which the heaviest workload, run at its predicted pace, forwards at most
    :data:`FORWARDING_SHARE` of what two cores carry (predicted times grow as 1 / scale)."""
    heaviest = max(emulate.forwarding_load(routes, runtime.as_task_graph(w), fastest_s) for w in workloads)
    if heaviest <= 0:
        return 1.0
    return min(1.0, FORWARDING_SHARE * emulate.FORWARDING_BUDGET_BPS / heaviest)


def verify(topo: Topology, routes: RoutingTable, result: dict[str, Any], built: list[plan_mod.Candidate],
           hosts: Optional[str] = None, order: str = "listed", seed: Optional[int] = None,
           scale: Optional[float] = None, buffer: Optional[int] = None, calibration: Optional[Path] = None,
           progress: Optional[Callable[[str], None]] = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Measure the plan `result` (from :func:`netweave.plan.plan` with `routes` and the phased
    candidates `built`) on the emulated fabric: ``(rows, summary)`` — rows
    ``{name, kind, predicted_s, measured_s, ratio}`` (the same rows ``report.json`` holds as
    ``verify``), the summary with the ``scale``, ``buffer``, the ``pick``, the
    ``measured_best``, ``pick_over_best`` and the verdict ``pick_is_best`` (within
    :data:`PICK_MARGIN`). `scale` defaults to what this machine forwards (:func:`_scale`),
    `buffer` to emulate's switch port queue."""
    note = progress or (lambda _msg: None)
    job = result["job"]
    collective, nbytes, ranks, root = job["collective"], job["bytes_per_pair"], job["ranks"], job.get("root", 0)
    if collective == "gather" and root != 0:
        raise NetweaveError("--verify times gathers to rank 0 (nwbench's root); drop --root")
    check_can_verify(topo, ranks)
    placed = plan_mod.job_hosts(topo, hosts, order, seed)
    phased = {c.name: c.schedule for c in built if c.schedule is not None}
    rows = [r for r in result["schedules"] + result["dag_schedules"] if r.get("complete", True)]
    ours = [r for r in sorted(rows, key=lambda r: r["predicted_time_s"]) if r["name"] != plan_mod.CONCURRENT][:TOP]
    chosen = ours + [r for r in result["dag_schedules"] if r["name"] == plan_mod.CONCURRENT]
    workloads = {}
    for r in chosen:
        workloads[r["name"]] = (phased[r["name"]] if r["kind"] == "phased"
                                else plan_mod._dag_workload(topo, r["name"], collective, nbytes, root))
    natives = {r["name"]: r for r in result["native"]}
    native_work = {name: plan_mod.native_schedule(name, collective, placed, nbytes, root) for name in natives}
    fastest = min(r["predicted_time_s"] for r in chosen + list(natives.values()))
    if scale is None:
        scale = _scale(routes, list(workloads.values()) + list(native_work.values()), fastest)
    elif not scale > 0:
        raise NetweaveError(f"--verify-scale {scale} must be positive")

    note("predicting on the scaled fabric")
    scaled = emulate.scaled_topology(topo, scale)
    scaled_routes = emulate.scaled_routes(routes, scaled)
    predicted = {}
    for r in chosen:
        executor, nct = ((plan_mod.PREDICT_EXECUTOR, 1) if r["kind"] == "phased"
                         else ("dag", 1 if r["name"] == plan_mod.CONTENTION_FREE else max(ranks - 1, 1)))
        predicted[r["name"]] = plan_mod.predict(scaled_routes, workloads[r["name"]], executor, nct,
                                                calibration)["makespan_s"]
    for name, r in natives.items():
        predicted[name] = plan_mod.predict(scaled_routes, native_work[name], r["executor"], r["concurrent_sends"],
                                           calibration)["makespan_s"]

    measured: dict[str, Optional[float]] = {}
    problems: dict[str, str] = {}
    fabric_name = "v" + uuid.uuid4().hex[:11]
    with tempfile.TemporaryDirectory(prefix="netweave-verify-") as scratch:
        files = {}
        for name, work in workloads.items():
            path = Path(scratch) / f"{name}.nws"
            if hasattr(work, "num_phases"):
                traffic.save(work, path, executor=plan_mod.PREDICT_EXECUTOR)
            else:
                work.save(path)
            files[str(path.resolve())] = name
        note(f"bringing up the emulated fabric (links x {scale:.3g})")
        fabric = emulate.up(topo, routes, fabric_name, scale=scale, buffer=buffer)
        try:
            for implementation in mpi.IMPLEMENTATIONS:
                schedules = list(files) if implementation == "openmpi" else []
                note(f"measuring on the fabric: {implementation}" + (" with netweave's schedules" if schedules else ""))
                report = _nwbench(fabric, implementation, collective, nbytes, ranks, placed, schedules)
                measured[implementation] = report["results"][0]["max_s"]
                for entry in report.get("schedules", []):
                    name = files[str(Path(entry["schedule"]).resolve())]
                    ran = entry.get("ran", {})
                    if ran.get("native", 0):
                        problems[name] = f"the library ran the native collective instead: {ran.get('why', '?')}"
                        measured[name] = None
                    else:
                        measured[name] = entry["results"][0]["max_s"]
        finally:
            emulate.down(fabric_name)
    out = []
    for r in chosen + list(natives.values()):
        name = r["name"]
        m, p = measured.get(name), predicted[name]
        out.append({"name": name, "kind": r["kind"], "predicted_s": p, "measured_s": m,
                    "ratio": m / p if m and p else None, "problem": problems.get(name)})
    return out, _summary(out, result, scale, buffer)


def _nwbench(fabric, implementation: str, collective: str, nbytes: int, ranks: int, placed: list[int],
             schedules: list[str]) -> dict[str, Any]:
    """One nwbench run on the fabric: the native collective, then each schedule file."""
    program = mpi.nwbench_program(implementation, collective, [nbytes], reps=REPS, warmup=1, check=False,
                                  schedules=schedules)
    env = {"LD_PRELOAD": str(mpi.library_path(implementation))} if schedules else {}
    # MPICH over UCX can hang in MPI_Finalize on these fabrics after all its work: the run
    # counts as finished once nwbench has printed its whole report (see docs/emulate.md).
    proc = emulate.mpirun(fabric, implementation, ranks, program, env=env, hosts=placed,
                          done_when=lambda text: text.rstrip().endswith("]}"))
    return mpi.nwbench_report(proc, f" ({implementation}, emulated)")


def _summary(rows: list[dict[str, Any]], result: dict[str, Any], scale: float, buffer: Optional[int]) -> dict[str, Any]:
    timed = [r for r in rows if r["measured_s"]]
    best = min(timed, key=lambda r: r["measured_s"], default=None)
    pick = (result.get("best") or {}).get("name")
    pick_row = next((r for r in timed if r["name"] == pick), None)
    over = pick_row["measured_s"] / best["measured_s"] if pick_row and best else None
    ratios = [r["ratio"] for r in timed if r["ratio"]]
    return {
        "scale": scale,
        "buffer": buffer,
        "pick": pick,
        "measured_best": None if best is None else best["name"],
        "pick_over_best": over,
        "pick_is_best": None if over is None else over <= 1 + PICK_MARGIN,
        "worst_ratio": max(ratios, key=lambda x: abs(x - 1), default=None),
        "latency": "none (the emulation adds none; predictions are made without it too)",
    }
