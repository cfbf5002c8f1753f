"""The plan's typed result (:mod:`netweave.plan.result`): ``report.json`` keeps the fields it
has always had, record by record, and reads back as the same typed result."""

import json

import pytest

from netweave import plan, report, topology
from netweave.plan import result as result_module
from netweave.plan.result import PlanResult, VerifyRow, VerifySummary

# The fields report.json held before the result was typed (``netweave plan --json`` on an LSFT,
# a gather on a two-switch tree, a mesh with --pattern, a --hosts job and an allgather), and
# since each phased candidate is predicted with every executor: each candidate's and pick's
# ``executor``, each phased row's ``predicted_times_s``, the prediction's ``executors`` in place
# of its one ``executor``.
PLAN = {"best", "bound", "dag_schedules", "job", "native", "ours", "prediction", "ranking", "routing", "schedules",
        "skipped", "today", "topology"}
JOB = {"bytes_per_pair", "collective", "hosts", "ranks"}
ROUTING = {"deadlock_free", "engine", "vcs", "why"}
BOUND = {"bytes", "describe", "seconds"}
PREDICTION = {"calibration", "executors", "model"}
CANDIDATE = {"bound_ratio", "bound_s", "complete", "contention_free", "executor", "kind", "name", "predicted_time_s",
             "throughput_per_server_mib_s"}
PHASED = CANDIDATE | {"bytes", "flows", "fluid_time_host_links_s", "fluid_time_s", "hop_bytes", "max_channel_bytes",
                      "max_congestion", "messages", "phase_loads", "phases", "predicted_times_s", "problem",
                      "schedule", "throughput_ratio", "worst_phase"}
DAG = CANDIDATE | {"cost_model_s", "deployable", "groups", "tasks"}
NATIVE = CANDIDATE | {"algorithm", "concurrent_sends", "label", "library", "phases", "schedule"}
SKIPPED = {"name", "reason"}
PICK = {"baseline", "bound_ratio", "contention_free", "executor", "fluid_time_host_links_s", "kind", "name",
        "predicted_speedup_vs_shift", "predicted_time_s", "reason", "speedup_vs_shift", "throughput_ratio"}
TODAY = {"libraries", "ours", "ours_s"}
TODAY_LIBRARY = {"algorithm", "label", "library", "ours_speedup", "predicted_time_s"}
PLACEMENT = {"cost", "engine", "evaluations", "identity", "identity_over_placed", "pattern", "placed", "ranks",
             "seconds", "seed", "source", "structure"}
VERIFY_ROW = {"kind", "measured_by", "measured_s", "name", "predicted_s", "predicted_timeouts", "problem", "ratio",
              "timeouts_per_call"}
VERIFY_SUMMARY = {"buffer", "latency", "measured_best", "pick", "pick_at_scale", "pick_at_scale_over_best",
                  "pick_is_best", "pick_over_best", "scale", "worst_ratio"}


def _gather_on_a_tree() -> PlanResult:
    tree = topology.switch_tree([2], 14, [10.0], [5000.0], 1.0, 5000.0)
    return plan.plan(tree, bytes_per_pair=100_000, collective="gather", root=3)


def _mesh_with_a_placement() -> PlanResult:
    mesh = topology.mesh([4, 4], 1)
    result = plan.plan(mesh, bytes_per_pair=1024)
    result.placement = plan.place_ranks(mesh, "stencil:4x4", result.routing.engine, evaluations=200).summary
    return result


def _verified() -> PlanResult:
    # --verify's rows need the emulated fabric; their records are checked as the CLI fills them in.
    result = plan.plan(topology.latin_square_fat_tree(2), bytes_per_pair=4096)
    result.verify = [VerifyRow(name="lsft", kind="phased", predicted_s=1e-3, measured_s=1.2e-3, ratio=1.2,
                               measured_by="netweave's TCP executor", problem="2 timeouts in 4 calls",
                               timeouts_per_call=0.5, predicted_timeouts=1),
                     VerifyRow(name="openmpi", kind="native", predicted_s=2e-3, measured_s=None, ratio=None,
                               measured_by="nwbench, 3 calls", problem="the run failed")]
    result.verify_summary = VerifySummary(pick_at_scale="lsft", pick_at_scale_over_best=1.0, scale=0.01, buffer=None,
                                          pick="lsft", measured_best="lsft", pick_over_best=1.0, pick_is_best=True,
                                          worst_ratio=1.2, latency="none")
    return result


JOBS = {
    "lsft": lambda: plan.plan(topology.latin_square_fat_tree(2), bytes_per_pair=4096),
    "hosts": lambda: plan.plan(topology.latin_square_fat_tree(3), bytes_per_pair=4096, hosts="leaf:0-1"),
    "gather": _gather_on_a_tree,
    "allgather": lambda: plan.plan(topology.multi_cluster("a:4,b:4"), bytes_per_pair=4096, collective="allgather"),
    "placement": _mesh_with_a_placement,
    "verify": _verified,
}


@pytest.fixture(scope="module", params=sorted(JOBS))
def job(request) -> tuple[str, PlanResult]:
    return request.param, JOBS[request.param]()


def test_report_json_keeps_its_fields(job):
    name, result = job
    data = json.loads(report.to_json(result))
    extra = {"placement"} if name == "placement" else {"verify", "verify_summary"} if name == "verify" else set()
    assert set(data) == PLAN | extra
    assert set(data["job"]) == JOB | ({"root"} if name == "gather" else set())
    assert (set(data["routing"]), set(data["bound"]), set(data["prediction"])) == (ROUTING, BOUND, PREDICTION)
    for rows, fields in ((data["schedules"], PHASED), (data["dag_schedules"], DAG), (data["native"], NATIVE),
                         (data["skipped"], SKIPPED)):
        assert all(set(row) == fields for row in rows)
    assert {r["kind"] for r in data["schedules"]} == {"phased"} and {r["kind"] for r in data["native"]} == {"native"}
    for pick in (data["best"], data["ours"]):
        assert set(pick) == PICK | ({"label", "algorithm"} if pick["kind"] == "native" else set())
    assert set(data["today"]) == TODAY and all(set(n) == TODAY_LIBRARY for n in data["today"]["libraries"])
    if name == "placement":
        assert set(data["placement"]) == PLACEMENT
    if name == "verify":
        assert all(set(r) == VERIFY_ROW for r in data["verify"]) and set(data["verify_summary"]) == VERIFY_SUMMARY
    # The job that shows every kind of pick: the user's MPI is fastest on the small mesh.
    if name == "placement":
        assert data["best"]["kind"] == "native" and data["ours"]["kind"] != "native"


def test_report_json_reads_back_as_the_same_typed_result(job):
    _name, result = job
    text = report.to_json(result)
    again = PlanResult.from_dict(json.loads(text))
    assert again == result
    assert report.to_json(again) == text
    assert report.to_text(again) == report.to_text(result)


def test_a_report_with_a_field_the_result_lacks_is_refused():
    data = json.loads(report.to_json(JOBS["lsft"]()))
    data["schedules"][0]["surprise"] = 1
    with pytest.raises(ValueError, match="PhasedRow has no field surprise"):
        PlanResult.from_dict(data)
    data = json.loads(report.to_json(JOBS["lsft"]()))
    data["native"][0]["kind"] = "dag"
    with pytest.raises(ValueError, match="NativeRow holds native rows, not dag"):
        PlanResult.from_dict(data)


def test_an_earlier_report_json_reads_with_todays_figure_names(capsys, monkeypatch):
    """A report.json written before the one cost vocabulary (``max_link_bytes`` beside each
    phased row, the placement's ``hops`` / ``max_link`` / ``rmatt``) reads back under today's
    names, with a deprecation line on stderr, and writes only today's names."""
    data = _mesh_with_a_placement().to_dict()
    for row in data["schedules"]:
        if row["kind"] == "phased":
            row["max_link_bytes"] = row["max_channel_bytes"]
    renamed = {"sum_hops": "hops", "max_channel_bytes": "max_link", "hops_x_max_channel": "rmatt",
               "step_max_channel_bytes": "step_max_link"}
    placement = data["placement"]
    for key in ("identity", "placed"):
        placement[key] = {renamed.get(k, k): v for k, v in placement[key].items()}
    placement["identity_over_placed"] = {renamed.get(k, k): v for k, v in placement["identity_over_placed"].items()}
    monkeypatch.setattr(result_module, "_warned_earlier", set())  # each name warns once per process
    back = PlanResult.from_dict(json.loads(json.dumps(data)))
    warned = [line for line in capsys.readouterr().err.splitlines() if "earlier name" in line]
    assert sorted(line.split()[3] for line in warned) == ["hops", "max_link", "max_link_bytes", "rmatt", "step_max_link"]
    written = json.dumps(back.to_dict())
    for old in ('"max_link_bytes"', '"max_link"', '"rmatt"', '"hops"', '"step_max_link"'):
        assert old not in written, old
    assert back.placement.placed["hops_x_max_channel"] == back.placement.placed["sum_hops"] * \
        back.placement.placed["max_channel_bytes"]


def test_an_earlier_report_json_with_one_executor_reads_as_each_rows(capsys, monkeypatch):
    """A report.json written when every phased candidate was predicted with one executor
    (``prediction.executor``, none per row) reads back with that executor on each phased row
    and pick, ``dag`` on the DAGs, and writes only today's fields."""
    result = JOBS["gather"]()
    data = json.loads(report.to_json(result))
    data["prediction"]["executor"] = "local-sync"
    del data["prediction"]["executors"]
    for row in [*data["schedules"], *data["dag_schedules"]]:
        del row["executor"]
    for row in data["schedules"]:
        del row["predicted_times_s"]
    for key in ("best", "ours"):
        del data[key]["executor"]
    monkeypatch.setattr(result_module, "_warned_earlier", set())
    back = PlanResult.from_dict(data)
    assert "prediction.executor is an earlier form" in capsys.readouterr().err
    assert back.prediction.executors == ["local-sync"]
    assert all(r.executor == "local-sync" and r.predicted_times_s == {"local-sync": r.predicted_time_s}
               for r in back.schedules)
    assert all(r.executor == "dag" for r in back.dag_schedules)
    natives = {n.name: n.executor for n in back.native}
    for pick in (back.best, back.ours):
        assert pick is not None
        assert pick.executor == {"phased": "local-sync", "dag": "dag"}.get(pick.kind, natives.get(pick.name))
    assert set(json.loads(report.to_json(back))["prediction"]) == PREDICTION
