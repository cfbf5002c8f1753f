"""`netweave plan` predicts each phased candidate with every executor the runtime runs it with,
ranks it by the one it chooses (local-sync, then sync, unless another is predicted more than 5 %
faster), says which one in the table, the JSON and the page, and deploys the schedule with that
executor — so a contention-free tree schedule whose phases need a barrier is
ranked as it will run, and the preference for contention-free schedules can fire."""

import json
import struct

import pytest

from conftest import run_cli
from netweave import plan, report, topology
from netweave.stages import analysis, flowsim

#: The executor codes of a ``.nws`` header (docs/schedule-format.md, offset 52).
NWS_EXECUTORS = {0: "auto", 1: "sync", 2: "async", 3: "local-sync"}


def _two_by_fourteen():
    return topology.switch_tree([2], 14, [10.0], [5000.0], 1.0, 5000.0)


def _uneven_gigabit_tree():
    # Issue 31's uneven tree: 3 x 2 switches, 5 hosts each, every link 1 Gbit/s.
    return topology.switch_tree([3, 2], 5, [1.0, 1.0], [5000.0, 5000.0], 1.0, 5000.0)


TREES = {"2x14": _two_by_fourteen, "3,2x5": _uneven_gigabit_tree}


@pytest.fixture(scope="module", params=sorted(TREES))
def tree_plan(request):
    topo = TREES[request.param]()
    return topo, plan.plan(topo, bytes_per_pair=1 << 20)


def test_each_phased_candidate_is_ranked_by_its_chosen_executor(tree_plan):
    topo, result = tree_plan
    routes = plan.routing_for(topo)[0]
    built = {c.name: c.schedule for c in plan.candidates(topo, 1 << 20) if c.schedule is not None}
    assert result.prediction.executors == list(plan.PHASED_EXECUTORS)
    for row in result.schedules:
        loads = analysis.analyze(routes, built[row.name])
        permutations = all(p["permutation"] for p in loads["phases"])
        # Every executor of the runtime; the barrier one only where every phase is a permutation.
        expected = set(plan.PHASED_EXECUTORS) - (set() if permutations else {plan.BARRIER_EXECUTOR})
        assert set(row.predicted_times_s) == expected, row.name
        # The first of local-sync, sync, async within the level margin of the fastest.
        fastest = min(row.predicted_times_s.values())
        level = [ex for ex in plan.PHASED_EXECUTORS
                 if ex in row.predicted_times_s and row.predicted_times_s[ex] <= fastest * (1 + plan.LEVEL_MARGIN)]
        assert plan.PHASED_EXECUTORS[0] == "local-sync" and row.executor == level[0], row.name
        assert row.predicted_times_s[row.executor] == row.predicted_time_s
        # The time is the flow model's for that executor, asked afresh.
        again = flowsim.simulate(routes, built[row.name], executor=row.executor)["makespan_s"]
        assert again == pytest.approx(row.predicted_time_s, rel=1e-9)
    # Other kinds say what ran them too: the DAG executor, or the MPI algorithm's own.
    assert all(d.executor == "dag" for d in result.dag_schedules)
    assert all(n.executor in plan.PHASED_EXECUTORS for n in result.native)
    assert result.best is not None
    assert result.best.executor == next(r.executor for r in result.candidates if r.name == result.best.name)


def test_the_contention_free_tree_schedule_is_picked_and_the_report_says_why(tree_plan):
    _topo, result = tree_plan
    tree = next(r for r in result.schedules if r.name == "tree-phased")
    assert tree.complete and tree.contention_free
    for pick in (result.best, result.ours):
        assert pick is not None and pick.name == "tree-phased" and pick.contention_free
        pickable = [r for r in result.candidates if r.pickable and r.complete
                    and (pick is result.best or r.kind != "native")]
        faster = [r for r in pickable if r.predicted_time_s < pick.predicted_time_s and r.name != pick.name]
        # Picked although something contended is faster only within the margin, and then named.
        for r in faster:
            assert r.predicted_time_s * (1 + plan.CONTENTION_FREE_MARGIN) >= pick.predicted_time_s
        if faster:
            assert f"contention-free and within {plan.CONTENTION_FREE_MARGIN:.0%} of the fastest" in pick.reason
            assert min(faster, key=lambda r: r.predicted_time_s).name in pick.reason
        else:
            assert pick.reason.startswith("fastest predicted, and contention-free")
    text = report.to_text(result)
    assert f"tree-phased: {report.format_seconds(result.best.predicted_time_s)} predicted " \
           f"({result.best.executor} executor), {result.best.reason}" in text
    assert f"contention-free; {tree.executor} executor (" in text


def test_the_deployed_schedule_asks_for_the_executor_the_ranking_used(tmp_path):
    path = tmp_path / "tree.json"
    run_cli("topo", "tree", "--fanouts", "2", "--hosts-per-switch", "14", "-o", str(path))
    out = tmp_path / "plan"
    data = json.loads(run_cli("plan", str(path), "--json", "--out", str(out)).stdout)
    ours = data["ours"]
    assert ours["kind"] == "phased"
    row = next(r for r in data["schedules"] if r["name"] == ours["name"])
    assert ours["executor"] == row["executor"]
    header = (out / f"alltoall-{data['job']['ranks']}.nws").read_bytes()[:56]
    (code,) = struct.unpack_from("<I", header, 52)
    assert NWS_EXECUTORS[code] == row["executor"]
    readme = (out / "README.md").read_text()
    assert f"with the {row['executor']} executor (the plan's choice at " in readme
    page = (out / "index.html").read_text()
    assert "the fastest counts" in page and f"<td>{row['executor']}</td>" in page


def test_each_executor_becomes_the_dag_the_tcp_executor_runs():
    """--verify runs a phased candidate on netweave's TCP executor in the order of the executor
    it is deployed with; the DAG for each is built from the schedule alone."""
    from netweave.run import executor
    from netweave.stages import traffic

    shift = traffic.alltoall(6, 100, "shift")
    sync = executor.as_task_graph(shift, executor.phase_groups_for(shift, "sync"))
    # A binomial barrier (5 reports, 5 releases, zero bytes) between each two of the 5 phases.
    assert sync.num_tasks == shift.num_messages + 2 * 5 * (shift.num_phases - 1)
    assert sum(1 for t in sync.tasks() if t[2] == 0) == 2 * 5 * 4
    tasks = sync.tasks()
    for src, _dst, _nbytes, after, _relay in tasks:  # every wait is on a task of the same rank
        assert all(src in (tasks[p][0], tasks[p][1]) for p in after)
    # Groups of phases are merged phases with a barrier each: both ways give one DAG.
    merged = shift.with_phases_merged([2, 1, 2])
    assert merged.num_phases == 3 and merged.num_messages == shift.num_messages
    assert (executor.as_task_graph(merged, [1, 1, 1]).tasks() == executor.as_task_graph(shift, [2, 1, 2]).tasks())
    free = executor.as_task_graph(shift, executor.phase_groups_for(shift, "async"))
    assert free.num_tasks == shift.num_messages and free.num_dependencies == 0
    assert executor.phase_groups_for(shift, "local-sync") is None
    assert executor.as_task_graph(shift).num_dependencies == executor.as_task_graph(shift, None).num_dependencies > 0
    bruck = traffic.alltoall(6, 100, "bruck")  # forwarded: async still waits for earlier receives
    assert executor.phase_groups_for(bruck, "async") is None
    assert executor.phase_groups_for(bruck, "sync") == [1] * bruck.num_phases
    with pytest.raises(Exception, match="unknown executor 'eager'"):
        executor.phase_groups_for(shift, "eager")
    with pytest.raises(Exception, match="cannot be merged"):
        executor.as_task_graph(bruck, [bruck.num_phases])
