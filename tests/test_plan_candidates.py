"""`netweave plan` ranks every candidate: the user's MPI (Open MPI's and MPICH's defaults),
paper 004's DAGs beside the phased schedules, against the bottleneck bound; one-lane routing;
--verify on the emulated fabric."""

import json
import re
import shutil

import pytest

import netweave
from conftest import run_cli
from netweave import _core, plan, report, topology
from netweave.run import calibration, emulate


def test_the_native_model_names_each_librarys_default_and_builds_it():
    # Open MPI 4.1.4's tuned table: 28 ranks, 1 MiB per pair -> linear_sync; 16 KiB -> basic_linear.
    sched, info = _core.native_mpi("openmpi", "alltoall", 28, 1 << 20)
    assert (info["algorithm"], info["concurrent_sends"], info["executor"]) == ("linear_sync", 27, "local-sync")
    assert sched.completeness()["complete"] and sched.num_ranks == 28
    assert _core.native_mpi("openmpi", "alltoall", 28, 16384)[1]["algorithm"] == "basic_linear"
    # MPICH 4.0.2's JSON tree: pairwise above 32 KiB, scattered below, Bruck up to 256 B from 8 ranks.
    assert _core.native_mpi("mpich", "alltoall", 28, 1 << 20)[1]["algorithm"] == "pairwise"
    assert _core.native_mpi("mpich", "alltoall", 28, 16384)[1]["concurrent_sends"] == 32
    assert _core.native_mpi("mpich", "alltoall", 28, 256)[1]["algorithm"] == "brucks"
    assert _core.native_mpi("mpich", "gather", 28, 4096, 3)[0].root == 3
    with pytest.raises(netweave.NetweaveError, match="unknown MPI library 'lam'"):
        _core.native_mpi("lam", "alltoall", 4, 8)


def test_the_report_says_what_your_mpi_takes_today_and_the_bound():
    tree = topology.switch_tree([2], 4, [10.0], [5000.0], 1.0, 5000.0)
    result = plan.plan(tree, bytes_per_pair=1 << 16)
    natives = {n.library: n for n in result.native}
    assert set(natives) == {"openmpi", "mpich"}
    assert natives["openmpi"].algorithm == _core.native_mpi("openmpi", "alltoall", 8, 1 << 16)[1]["algorithm"]
    # No candidate beats the bound: every one moves at least the job's bytes over its busiest link.
    assert all(r.bound_ratio is not None and r.bound_ratio >= 1 - 1e-9 for r in result.candidates)
    # Each host sends 7 x 64 KiB through its 1 Gbit/s link.
    assert result.bound.seconds == pytest.approx(7 * 65536 / 1.25e8)
    text = report.to_text(result)
    assert "your MPI today:" in text and "Open MPI 4.1.4's" in text and "MPICH 4.0.2's" in text
    assert "bound" in text and result.ranking[0] in text


def test_a_tree_is_routed_in_one_lane_and_the_plan_says_why():
    tree = topology.multi_cluster("a:4,b:4,c:4")
    assert netweave.routing.route(tree, netweave.routing.default_engine(tree)).check()["vcs_used"] > 1
    result = plan.plan(tree, bytes_per_pair=4096)
    assert result.routing.engine == "updown" and result.routing.vcs == 1
    assert "one lane" in result.routing.why and "minimal" in result.routing.why
    # Given an engine, the plan keeps it.
    assert plan.plan(tree, bytes_per_pair=4096, engine="nue").routing.engine == "nue"


def test_a_contention_free_dag_is_picked_and_deployed_as_its_task_graph(tmp_path):
    # Gather on 2 x 14 hosts: the paper-004 DAG is within the margin of the fastest and contention-free.
    path = tmp_path / "tree.json"
    run_cli("topo", "tree", "--fanouts", "2", "--hosts-per-switch", "14", "-o", str(path))
    out = tmp_path / "plan"
    data = json.loads(run_cli("plan", str(path), "--collective", "gather", "--bytes", "100000", "--json",
                              "--out", str(out)).stdout)
    pick = data["best"]
    fastest = min(r["predicted_time_s"] for r in data["schedules"] + data["dag_schedules"] + data["native"])
    assert pick["contention_free"] and pick["predicted_time_s"] <= fastest * (1 + plan.CONTENTION_FREE_MARGIN)
    if pick["name"] == "contention-free":
        assert pick["reason"].startswith("fastest predicted") or "contention-free and within 5%" in pick["reason"]
        graph = _core.TaskGraph.load(out / "gather-28.nws")
        assert graph.num_tasks == next(r["tasks"] for r in data["dag_schedules"] if r["name"] == "contention-free")
        assert "paper 004 task DAG" in (out / "README.md").read_text()


def test_bad_plan_options_are_one_line(tmp_path):
    for args, words in ((["--root", "3"], "--root belongs to --collective gather"),
                        (["--collective", "barrier"], "--collective barrier"),
                        (["--calibration", str(tmp_path / "none.json")], "no such file"),
                        (["--verify-scale", "0.1"], "--verify-scale belongs to --verify")):
        proc = run_cli("plan", *args, check=False)
        assert proc.returncode == 2 and words in proc.stderr, args
        assert len(proc.stderr.strip().splitlines()) == 1


def test_verify_refuses_a_fabric_too_large_before_writing_anything(tmp_path):
    path = tmp_path / "big.json"
    run_cli("topo", "torus", "--dims", "9x9", "-o", str(path))
    out = tmp_path / "plan"
    proc = run_cli("plan", str(path), "--verify", "--out", str(out), check=False)
    assert proc.returncode == 2 and "81 hosts" in proc.stderr and "at most 64" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


needs_emulation = pytest.mark.skipif(
    not (shutil.which("ip") and shutil.which("mpirun.openmpi") and shutil.which("mpiexec.mpich"))
    or __import__("os").geteuid() != 0, reason="needs root, iproute2, Open MPI and MPICH")


@needs_emulation
def test_verify_measures_every_candidate_on_the_emulated_fabric_and_tears_it_down(tmp_path):
    path = tmp_path / "star.json"
    run_cli("topo", "tree", "--fanouts", "1", "--hosts-per-switch", "4", "-o", str(path))
    before = set(emulate.namespaces())
    out = tmp_path / "plan"
    data = json.loads(run_cli("plan", str(path), "--bytes", "65536", "--verify", "--json", "--out", str(out)).stdout)
    assert set(emulate.namespaces()) == before
    rows = {r["name"]: r for r in data["verify"]}
    assert {"openmpi", "mpich", "concurrent"} <= set(rows)
    ours = [r for r in data["schedules"] + data["dag_schedules"] if r["complete"] and r["name"] != "concurrent"]
    # The best three of ours (and our pick, if a tie rule took it from below them), Concurrent, two MPIs.
    assert data["ours"]["name"] in rows and len(rows) - 3 in (min(3, len(ours)), min(3, len(ours)) + 1)
    for r in rows.values():
        assert r["predicted_s"] > 0 and r["measured_s"] > 0 and r["ratio"] == pytest.approx(r["measured_s"] / r["predicted_s"])
        # The hosts' timeouts beside the model's: counted per call, and named in the problem when any.
        assert r["timeouts_per_call"] >= 0 and r["predicted_timeouts"] >= 0
        assert (r["timeouts_per_call"] > 0) == ("timeouts in" in (r["problem"] or ""))
        # Timed 3 calls, and more where they were short: 3 alone only if they took over 2/4 s each.
        calls = int(re.search(r", (\d+) calls$", r["measured_by"]).group(1))
        assert 3 <= calls <= calibration.MAX_TIMED_CALLS and (calls > 3 or r["measured_s"] > 0.5), r
    # A phased candidate is measured the way the plan deploys it: in its executor's order.
    deployed = {r["name"]: r["executor"] for r in data["schedules"]}
    expected = {"sync": "a barrier after every phase", "async": "each rank's sends in order", "local-sync": "local-sync order"}
    for r in rows.values():
        if r["kind"] == "phased":
            assert expected[deployed[r["name"]]] in r["measured_by"], (r["name"], deployed[r["name"]], r["measured_by"])
    summary = data["verify_summary"]
    best = min(rows.values(), key=lambda r: r["measured_s"])["name"]
    assert summary["measured_best"] == best
    assert isinstance(summary["pick_is_best"], bool)
    # The plan deploys what the network confirmed: its pick measured within the margin of the
    # fastest it may pick (Concurrent is ranked, not picked), or replaced by it.
    pickable = [r["measured_s"] for n, r in rows.items() if n != "concurrent"]
    assert rows[data["best"]["name"]]["measured_s"] <= min(pickable) * 1.1 + 1e-12
    assert (summary.get("adopted") is None) == (data["best"]["name"] == summary["pick"])
    page = (out / "index.html").read_text()
    assert "id='verify-chart'" in page and "Measured on the emulated fabric" in page
    # Verified on the defaults: the report says how to measure this machine's parameters.
    assert data["prediction"]["calibration"] is None
    assert "<code>netweave emulate calibrate TOPO ROUTES" in page
    assert "predicted with the flow model's defaults: `netweave emulate calibrate" in (out / "report.md").read_text()
    calibrated = plan.PlanResult.from_dict({**data, "prediction": {**data["prediction"], "calibration": "cal.json"}})
    assert report.verify_lines(calibrated) and not any("defaults" in line for line in report.verify_lines(calibrated))
    assert json.loads((out / "report.json").read_text())["verify"] == data["verify"]


@needs_emulation
def test_verify_marks_a_run_this_machine_cannot_forward_at_its_predicted_pace(tmp_path):
    from netweave.plan.verification import MACHINE_BOUND
    path = tmp_path / "star.json"
    run_cli("topo", "tree", "--fanouts", "1", "--hosts-per-switch", "4", "-o", str(path))
    nbytes = 65536
    data = json.loads(run_cli("plan", str(path), "--bytes", str(nbytes), "--verify", "--verify-scale", "1", "--json",
                              "--out", str(tmp_path / "plan")).stdout)
    # Whatever the schedule, an all-to-all of 4 hosts moves each pair's bytes over both links of
    # the star: at full link rate and its predicted time, that alone is more than two cores forward.
    least_bits = 4 * 3 * nbytes * 2 * 8
    bound = [r for r in data["verify"] if least_bits / r["predicted_s"] > emulate.FORWARDING_BUDGET_BPS]
    assert bound
    for r in bound:
        assert MACHINE_BOUND in (r["problem"] or ""), r


def _verified(result, measured):
    """--verify's rows and summary for `result` with these measured times (by name)."""
    from netweave.plan.result import VerifyRow
    from netweave.plan.verification import _summary

    rows = [VerifyRow(name=r.name, kind=r.kind, predicted_s=r.predicted_time_s, measured_s=measured[r.name],
                      ratio=measured[r.name] / r.predicted_time_s, measured_by="by hand", problem=None)
            for r in result.candidates if r.name in measured]
    return rows, _summary(rows, result, 0.5, None)


def test_verify_deploys_what_the_network_measured_fastest_not_the_models_pick():
    from netweave.plan.verification import PICK_MARGIN, adopt_measured

    tree = topology.switch_tree([2], 4, [10.0], [5000.0], 1.0, 5000.0)
    result = plan.plan(tree, bytes_per_pair=1 << 16)
    pick, ours = result.best.name, result.ours.name
    others = [r for r in result.schedules if r.pickable and r.complete and r.name != ours]
    rival = others[0].name
    # Within the margin the model's picks stand.
    close = {"openmpi": 2.0, "mpich": 2.0, pick: 1.0, ours: 1.0, rival: 1.0 / (1 + PICK_MARGIN / 2)}
    rows, summary = _verified(result, close)
    adopt_measured(result, rows, summary)
    assert (result.best.name, result.ours.name, summary.adopted, summary.adopted_ours) == (pick, ours, None, None)
    # A rival of ours measured well ahead replaces both picks, and the report says why.
    rows, summary = _verified(result, {**close, rival: 0.5})
    adopt_measured(result, rows, summary)
    assert result.best.name == result.ours.name == summary.adopted == summary.adopted_ours == rival
    assert "measured fastest" in result.ours.reason and ours in result.ours.reason and pick in result.best.reason
    assert summary.pick == pick
    assert result.today.ours == rival
    # An MPI's own measured fastest: the pick becomes it, the deployed schedule stays ours.
    native = next(n for n in ("mpich", "openmpi") if n != pick)
    result = plan.plan(tree, bytes_per_pair=1 << 16)
    rows, summary = _verified(result, {**close, native: 0.5})
    adopt_measured(result, rows, summary)
    assert result.best.is_native and result.best.name == summary.adopted == native
    assert result.ours.name == ours and summary.adopted_ours is None
    result.verify, result.verify_summary = rows, summary
    assert f"the plan's pick is now {native}" in report.to_text(result)


def test_the_models_pick_for_the_scaled_fabric_follows_the_plans_rules():
    from netweave.plan.result import VerifyRow
    from netweave.plan.verification import _summary

    tree = topology.switch_tree([2], 4, [10.0], [5000.0], 1.0, 5000.0)
    result = plan.plan(tree, bytes_per_pair=1 << 16)
    # (predicted, measured) on the scaled fabric: Concurrent predicted fastest but not pickable,
    # Open MPI 2 % ahead of contention-free shift — inside the margin the plan does not pick by.
    def summary(times):
        kinds = {"concurrent": "dag", "shift": "phased"}
        rows = [VerifyRow(name=n, kind=kinds.get(n, "native"), predicted_s=p, measured_s=m,
                          ratio=m / p if m else None, measured_by="by hand", problem=None)
                for n, (p, m) in times.items()]
        return _summary(rows, result, 0.5, None)

    times = {"concurrent": (0.5, 3.0), "openmpi": (0.98, 1.5), "shift": (1.0, 1.2), "mpich": (2.0, 1.0)}
    s = summary(times)
    assert (s.pick_at_scale, s.measured_best, s.pick_at_scale_over_best) == ("shift", "mpich", pytest.approx(1.2))
    # A candidate whose run failed is not picked; one well ahead is.
    assert summary({**times, "shift": (1.0, None)}).pick_at_scale == "openmpi"
    assert summary({**times, "openmpi": (0.5, 1.5)}).pick_at_scale == "openmpi"


def test_a_failed_runs_problem_says_what_a_failing_rank_said():
    from netweave.plan.verification import _failure

    stopped = {"rank": 2, "exit": None, "reason": "still running after the others failed; stopped by the launcher"}
    said = {"rank": 5, "exit": 1, "reason": "nothing from rank 2 for 30 s"}
    assert _failure({"cause": stopped, "failures": [stopped, said]}) == (
        "rank 2: still running after the others failed; stopped by the launcher (rank 5: nothing from rank 2 for 30 s)")
    # A rank that failed by itself is its own reason.
    assert _failure({"cause": said, "failures": [stopped, said]}) == "rank 5: nothing from rank 2 for 30 s"
    assert _failure({"cause": None, "failures": []}) == "no rank named a cause"


def _calibration(path, link_layer, buffer, overhead_s):
    path.write_text(json.dumps({"format": netweave.flowsim.CALIBRATION_FORMAT,
                                "version": netweave.flowsim.CALIBRATION_VERSION,
                                "fabric": {"link_layer": link_layer, "port_buffer_bytes": buffer},
                                "parameters": {"overhead_s": overhead_s}}))
    return path


def test_calibration_reaches_every_prediction_and_another_fabrics_is_refused(tmp_path):
    path = tmp_path / "tree.json"
    run_cli("topo", "tree", "--fanouts", "2", "--hosts-per-switch", "4", "-o", str(path))
    tree = topology.load(path)
    plain = json.loads(run_cli("plan", str(path), "--bytes", "4096", "--json").stdout)
    cal = _calibration(tmp_path / "cal.json", tree.link_layer, tree.port_buffer_bytes, 1e-3)
    slow = json.loads(run_cli("plan", str(path), "--bytes", "4096", "--json", "--calibration", str(cal)).stdout)
    # A millisecond of host overhead per message: every candidate, the natives included, takes longer.
    for key in ("schedules", "native", "dag_schedules"):
        for a, b in zip(plain[key], slow[key]):
            assert b["predicted_time_s"] >= a["predicted_time_s"] + 0.999e-3, (key, a["name"])
    other = _calibration(tmp_path / "ib.json", "infiniband", None, 0.0)
    out = tmp_path / "plan"
    proc = run_cli("plan", str(path), "--calibration", str(other), "--out", str(out), check=False)
    assert proc.returncode == 2 and "ib.json" in proc.stderr and "calibrate on this fabric" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()


@needs_emulation
def test_an_interrupted_verify_tears_its_fabric_down_and_writes_nothing(tmp_path):
    import signal
    import subprocess
    import time

    from conftest import BIN

    path = tmp_path / "tree.json"
    run_cli("topo", "tree", "--fanouts", "2", "--hosts-per-switch", "4", "-o", str(path))
    before = set(emulate.namespaces())
    out = tmp_path / "plan"
    proc = subprocess.Popen([str(BIN / "netweave"), "plan", str(path), "--bytes", "1048576", "--verify",
                             "--verify-scale", "0.01", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not set(emulate.namespaces()) - before:  # wait for the fabric to come up
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "timeout"
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    # Gone however the interrupt landed: unwound by Python (exit 130) or by the job's guardian.
    deadline = time.monotonic() + 30
    while set(emulate.namespaces()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(emulate.namespaces()) - before == set()
    assert not out.exists()
    assert proc.returncode in (130, -signal.SIGINT), err
