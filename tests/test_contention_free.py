"""Paper 004's contention-free scheduler from the command line: DAG files the simulators run."""

import json

import pytest

import netweave
from netweave import traffic

from conftest import run_cli


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
    (["alltoall", "--hosts", "0-3"], "run on every host of the fabric"),
    (["barrier"], "contention-free schedules gather or alltoall"),
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
