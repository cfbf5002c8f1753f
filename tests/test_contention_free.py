"""Paper 004's contention-free scheduler from the command line: DAG files the simulators run."""

import json

import pytest

import netweave
from conftest import run_cli
from netweave import traffic


@pytest.fixture(scope="module")
def tree16(tmp_path_factory):
    d = tmp_path_factory.mktemp("cf")
    run_cli("topo", "tree", "--fanouts", "2", "--hosts-per-switch", "8", "-o", str(d / "t.json"))
    run_cli("route", "updown", str(d / "t.json"), "-o", str(d / "r.json"))
    return d


def test_alltoall_dag_is_written_and_the_flow_simulator_runs_it(tree16):
    out = tree16 / "a2a.json"
    summary = json.loads(run_cli("schedule", "alltoall", str(tree16 / "t.json"), "--algo", "contention-free",
                                 "--bytes", "65536", "-o", str(out), "--json").stdout)
    assert summary["tasks"] == 16 * 15
    doc = json.loads(out.read_text())
    assert doc["form"] == "dag" and len(doc["tasks"]) == 240
    # Every ordered pair exactly once.
    assert sorted((t["src"], t["dst"]) for t in doc["tasks"]) == [(s, d) for s in range(16) for d in range(16) if s != d]
    sim = json.loads(run_cli("simulate", "flow", str(tree16 / "t.json"), str(tree16 / "r.json"), str(out),
                             "-e", "dag", "--json").stdout)
    assert sim["messages"] == 240
    # No host sends more than 1 Gbit/s: 15 × 64 KiB per host bounds the time from below.
    assert sim["makespan_s"] >= 15 * 65536 / 1.25e8
    # The cost model and the flow model agree within a quarter here (see docs/contention-free.md).
    assert sim["makespan_s"] == pytest.approx(summary["predicted_seconds"], rel=0.25)


def test_policies_come_from_the_core_and_are_deterministic(tree16):
    topo = netweave.topology.load(tree16 / "t.json")
    assert traffic.CONTENTION_FREE_POLICIES == ["min-sync", "max-sync", "min-cost", "max-cost", "random"]
    for policy in traffic.CONTENTION_FREE_POLICIES:
        a, summary = traffic.contention_free(topo, "gather", 4096, root=3, policy=policy, seed=7)
        b, _ = traffic.contention_free(topo, "gather", 4096, root=3, policy=policy, seed=7)
        assert a.to_json() == b.to_json()
        assert a.num_tasks == 15 - summary["relayed_tasks"] + summary["relay_pieces"]
        plain, _ = traffic.contention_free(topo, "gather", 4096, root=3, policy=policy, seed=7, relay="off")
        assert plain.num_tasks == 15


@pytest.mark.parametrize("args,message", [
    (["gather", "--root", "16"], "gather root 16 is not a host"),
    (["alltoall", "--policy", "fastest"], "unknown task policy 'fastest'"),
    (["alltoall", "--hosts", "0"], "at least 2 hosts; the job has 1"),
    (["barrier"], "contention-free schedules gather, alltoall or tasks"),
    (["gather", "--relay", "sometimes"], "unknown relay rule 'sometimes'"),
])
def test_bad_input_is_one_clear_line_and_no_file(tree16, args, message):
    out = tree16 / "bad.json"
    proc = run_cli("schedule", args[0], str(tree16 / "t.json"), "--algo", "contention-free", *args[1:],
                   "-o", str(out), check=False)
    assert proc.returncode == 2 and message in proc.stderr
    assert not out.exists()


def test_fabrics_with_two_shortest_paths_are_refused(tmp_path):
    netweave.topology.save(netweave.topology.torus([4, 4]), tmp_path / "torus.json")
    proc = run_cli("schedule", "alltoall", str(tmp_path / "torus.json"), "--algo", "contention-free", check=False)
    assert proc.returncode == 2 and "are joined by more than one shortest path" in proc.stderr


def test_a_task_list_is_scheduled_row_for_row(tree16, tmp_path):
    rows = [(0, 9, 50_000), (1, 9, 50_000), (2, 9, 20_000), (9, 0, 1_000), (15, 3, 70_000), (4, 4, 10)]
    (tmp_path / "tasks.csv").write_text("src,dst,bytes\n" + "\n".join(f"{a},{b},{c}" for a, b, c in rows) + "\n")
    out = tmp_path / "tasks.json"
    summary = json.loads(run_cli("schedule", "tasks", str(tree16 / "t.json"), "--algo", "contention-free",
                                 "--tasks", str(tmp_path / "tasks.csv"), "--relay", "off", "-o", str(out),
                                 "--json").stdout)
    doc = json.loads(out.read_text())
    # The self-copy stays local; every other row is one task with its own size.
    assert sorted((t["src"], t["dst"], t["bytes"]) for t in doc["tasks"]) == sorted(r for r in rows if r[0] != r[1])
    assert summary["tasks"] == len(rows) - 1
    (tmp_path / "bad.csv").write_text("0,1,100\n2,x,5\n")
    proc = run_cli("schedule", "tasks", str(tree16 / "t.json"), "--algo", "contention-free",
                   "--tasks", str(tmp_path / "bad.csv"), check=False)
    assert proc.returncode == 2 and "bad.csv:2: expected 'src,dst,bytes'" in proc.stderr
    (tmp_path / "far.csv").write_text("0,16,100\n")
    proc = run_cli("schedule", "tasks", str(tree16 / "t.json"), "--algo", "contention-free",
                   "--tasks", str(tmp_path / "far.csv"), check=False)
    assert proc.returncode == 2 and "names a host outside 0..15" in proc.stderr


def test_perturbed_schedules_are_seeded_and_replayed_on_the_true_fabric(tree16, tmp_path):
    def schedule(*extra):
        out = tmp_path / f"p{len(list(tmp_path.iterdir()))}.json"
        summary = json.loads(run_cli("schedule", "alltoall", str(tree16 / "t.json"), "--algo", "contention-free",
                                     "--bytes", "20000", "-o", str(out), "--json", *extra).stdout)
        return json.loads(out.read_text()), summary
    truth, _ = schedule()
    a, sa = schedule("--perturb", "0.4", "--perturb-seed", "3")
    b, _ = schedule("--perturb", "0.4", "--perturb-seed", "3")
    assert a == b
    assert sorted((t["src"], t["dst"]) for t in a["tasks"]) == sorted((t["src"], t["dst"]) for t in truth["tasks"])
    zero, _ = schedule("--perturb", "0")
    assert zero == truth
    # Independently: the replay of the perturbed DAG on the true values (flow model) is what
    # the summary's cost-model prediction is compared with in docs/contention-free.md.
    assert sa["predicted_seconds"] >= 15 * 20000 / 1.25e8
    proc = run_cli("schedule", "alltoall", str(tree16 / "t.json"), "--algo", "contention-free",
                   "--perturb", "1.5", check=False)
    assert proc.returncode == 2 and "must be in [0, 1)" in proc.stderr


def test_clock_timing_only_changes_relay_decisions(tree16):
    topo = netweave.topology.load(tree16 / "t.json")
    for relay in ("off", "departure"):
        runs = {timing: traffic.contention_free(topo, "gather", 3000, root=5, relay=relay, timing=timing)
                for timing in ("sum", "clock")}
        if relay == "off":
            assert runs["sum"][0].to_json() == runs["clock"][0].to_json()
        for graph, summary in runs.values():
            assert graph.num_tasks == 15 - summary["relayed_tasks"] + summary["relay_pieces"]
    with pytest.raises(netweave.NetweaveError, match="sum or clock"):
        traffic.contention_free(topo, "gather", 3000, timing="wall")


def test_the_schedule_cache_reuses_a_dag_for_the_same_key_only(tree16, tmp_path):
    cache = tmp_path / "cache"
    def schedule(nbytes, out, *extra):
        return json.loads(run_cli("schedule", "alltoall", str(tree16 / "t.json"), "--algo", "contention-free",
                                  "--bytes", str(nbytes), "--cache", str(cache), "-o", str(tmp_path / out),
                                  "--json", *extra).stdout)
    assert schedule(4096, "a.nws")["cache"] == "miss"
    assert schedule(4096, "b.nws")["cache"] == "hit"
    assert (tmp_path / "a.nws").read_bytes() == (tmp_path / "b.nws").read_bytes()
    assert schedule(8192, "c.nws")["cache"] == "miss"  # another size
    assert schedule(4096, "d.nws", "--policy", "max-sync")["cache"] == "miss"  # other options
    entries = sorted(p.name for p in cache.glob("*.nws"))
    assert len(entries) == 3 and all(e.startswith("alltoall-") for e in entries)
    assert not list(cache.glob(".partial-*"))
    # Another fabric (slower trunks) with the same hosts is another key.
    other = tmp_path / "t10.json"
    run_cli("topo", "tree", "--fanouts", "2", "--hosts-per-switch", "8", "--switch-bandwidth", "1", "-o", str(other))
    summary = json.loads(run_cli("schedule", "alltoall", str(other), "--algo", "contention-free", "--bytes", "4096",
                                 "--cache", str(cache), "--json").stdout)
    assert summary["cache"] == "miss"
