"""Ethernet trees at the bound: the bottleneck bound, the tree-phased all-to-all, the packed
DAG scheduler, routing tables and host subsets for the contention-free schedules, bad input."""

import dataclasses
import json

import pytest

from conftest import run_cli
from netweave import analysis, flowsim, plan, routing, topology, traffic

MIB = 1 << 20


def _lossless(path):
    """The tree as the lossless flow model sees it: the bound targets are stated for that model
    (an Ethernet tree's default port buffers add TCP timeouts, a separate question)."""
    return topology.load(path).with_switching("infiniband", None)


def _tree(fanouts, hosts_per_switch, switch_gbps, tmp_path, name):
    path = tmp_path / f"{name}.json"
    run_cli("topo", "tree", "--fanouts", fanouts, "--hosts-per-switch", str(hosts_per_switch),
            "--switch-bandwidth", switch_gbps, "-o", str(path))
    return path


TREES = [("2", 14, "10"), ("4", 16, "10"), ("2,3", 8, "10"), ("3,2", 5, "1")]


@pytest.mark.parametrize("fanouts,per_switch,gbps", TREES)
def test_tree_phased_is_contention_free_and_near_the_bound(fanouts, per_switch, gbps, tmp_path):
    topo = _lossless(_tree(fanouts, per_switch, gbps, tmp_path, "t"))
    routes = routing.route(topo, "updown")
    sched = traffic.build("alltoall", "tree-phased", topology=topo, bytes=MIB)
    bound = analysis.bottleneck_bound(routes, sched)
    loads = analysis.analyze(routes, sched)
    assert loads["complete"]
    if gbps == "1":
        # Uniform links: one flow per link per phase, which the analysis proves.
        assert loads["max_congestion"] == 1
    # Phase-synchronous, as a contention-free phased schedule is meant to run (local-sync lets
    # ranks that idle in a phase run ahead and collide: 1.45 x on 2 x 14).
    sim = flowsim.simulate(routes, sched, executor="sync")
    ratio = analysis.bound_ratio(sim["makespan_s"], bound)
    assert 1.0 <= ratio <= 1.05, f"{fanouts} x {per_switch}: {ratio:.3f} x the bound"


def test_plan_counts_a_full_trunk_as_contention_free_and_prefers_it(tmp_path):
    topo = _lossless(_tree("2", 14, "10", tmp_path, "t"))
    routes = routing.route(topo, "updown")
    phased = traffic.build("alltoall", "tree-phased", topology=topo, bytes=MIB)
    shift = traffic.build("alltoall", "shift", topology=topo, bytes=MIB)
    phased_loads, shift_loads = analysis.analyze(routes, phased), analysis.analyze(routes, shift)
    # Up to ten 1 Gbit/s flows share a 10 Gbit/s trunk in a tree-phased phase: more than one
    # flow per link, none beyond what the trunk serves at full host rate. Shift puts 14 there.
    assert 1 < phased_loads["max_congestion"] <= 10
    assert plan.full_rate_contention_free(topo, routes, phased, phased_loads)
    assert shift_loads["max_congestion"] > 10
    assert not plan.full_rate_contention_free(topo, routes, shift, shift_loads)
    result = plan.plan(topo, MIB, routes=routes, routing_note="updown, given")
    rows = {r.name: r for r in result.schedules}
    assert rows["tree-phased"].contention_free and not rows["shift"].contention_free
    # A contended candidate 1 % faster than tree-phased loses to it, and the pick says why.
    tree = rows["tree-phased"]
    faster = dataclasses.replace(rows["shift"], predicted_time_s=tree.predicted_time_s / 1.01)
    choice = plan.choose([faster, tree])
    assert choice.row.name == "tree-phased", choice.row.name
    assert choice.reason.startswith("contention-free and within 5%"), choice.reason
    # 6 % faster: beyond the margin, the faster one stays.
    assert plan.choose([dataclasses.replace(faster, predicted_time_s=tree.predicted_time_s / 1.06), tree]).row.name == "shift"


def test_a_gathers_incast_is_contention_free_only_on_a_lossless_fabric(tmp_path):
    # Linear gather: 27 flows into the root's link at once. Credits hold them back without a
    # drop; a 64 KiB Ethernet buffer overflows.
    lossless = _lossless(_tree("2", 14, "10", tmp_path, "t"))
    ethernet = lossless.with_switching("ethernet", 64 * 1024)
    for topo, free in ((lossless, True), (ethernet, False)):
        routes = routing.route(topo, "updown")
        linear = traffic.build("gather", "linear", topology=topo, bytes=MIB)
        loads = analysis.analyze(routes, linear)
        assert loads["max_congestion"] > 1
        assert plan.full_rate_contention_free(topo, routes, linear, loads) is free, topo.link_layer
    # An all-to-all's phases go to many hosts: contended on both.
    routes = routing.route(lossless, "updown")
    shift = traffic.build("alltoall", "shift", topology=lossless, bytes=MIB)
    assert not plan.full_rate_contention_free(lossless, routes, shift, analysis.analyze(routes, shift))


def test_packed_dag_is_within_20_percent_of_the_bound_and_beats_the_paper(tmp_path):
    topo = _lossless(_tree("2", 14, "10", tmp_path, "t"))
    routes = routing.route(topo, "updown")
    packed, _s = traffic.contention_free(topo, "alltoall", MIB, scheduler="packed")
    paper, _ = traffic.contention_free(topo, "alltoall", MIB)
    bound = analysis.bottleneck_bound(routes, packed)
    assert bound == analysis.bottleneck_bound(routes, paper)  # same traffic, same bound
    t_packed = flowsim.simulate(routes, packed, executor="dag")["makespan_s"]
    t_paper = flowsim.simulate(routes, paper, executor="dag")["makespan_s"]
    assert analysis.bound_ratio(t_packed, bound) <= 1.2
    assert t_packed < t_paper


def test_analyze_prints_the_bound(tmp_path):
    t = _tree("2", 4, "1", tmp_path, "t")
    run_cli("route", "updown", str(t), "-o", str(tmp_path / "r.json"))
    run_cli("schedule", "alltoall", str(t), "--algo", "tree-phased", "--bytes", "1000", "-o", str(tmp_path / "s.json"))
    out = json.loads(run_cli("analyze", str(t), str(tmp_path / "r.json"), str(tmp_path / "s.json"), "--json").stdout)
    # 2 x 4 hosts on 1 Gbit/s: each trunk carries 16 messages of 1000 bytes each way.
    assert out["bound"]["bytes"] == 16_000 and out["bound"]["binding"]["kind"] == "link"
    text = run_cli("analyze", str(t), str(tmp_path / "r.json"), str(tmp_path / "s.json")).stdout
    assert "bound" in text and "x the bound" in text


def test_a_torus_is_schedulable_with_its_routing_table(tmp_path):
    t = tmp_path / "torus.json"
    run_cli("topo", "torus", "--dims", "4x4", "-o", str(t))
    run_cli("route", "dor", str(t), "-o", str(tmp_path / "r.json"))
    refused = run_cli("schedule", "alltoall", str(t), "--algo", "contention-free", "-o", str(tmp_path / "x.json"),
                      check=False)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "more than one shortest path" in refused.stderr and "routing table" in refused.stderr
    assert not (tmp_path / "x.json").exists()
    out = tmp_path / "a.json"
    s = json.loads(run_cli("schedule", "alltoall", str(t), "--algo", "contention-free", "--routes",
                           str(tmp_path / "r.json"), "--bytes", "4096", "-o", str(out), "--json").stdout)
    assert s["tasks"] == 16 * 15 and out.exists()


def test_hosts_subset_for_the_contention_free_schedules(tmp_path):
    t = _tree("2", 4, "10", tmp_path, "t")
    out = tmp_path / "a.json"
    s = json.loads(run_cli("schedule", "alltoall", str(t), "--algo", "contention-free", "--hosts", "0-2,5",
                           "--scheduler", "packed", "--bytes", "4096", "-o", str(out), "--json").stdout)
    assert s["tasks"] == 4 * 3
    doc = json.loads(out.read_text())
    assert doc["placement"] == [0, 1, 2, 5]


@pytest.mark.parametrize("algo", ["contention-free", "tree-phased"])
def test_one_host_job_is_refused_by_name(algo, tmp_path):
    t = _tree("2", 4, "10", tmp_path, "t")
    out = tmp_path / "s.json"
    p = run_cli("schedule", "alltoall", str(t), "--algo", algo, "--hosts", "3", "-o", str(out), check=False)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "h3" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()


def test_zero_bandwidth_link_is_refused_by_name(tmp_path):
    t = _tree("2", 2, "10", tmp_path, "t")
    doc = json.loads(t.read_text())
    doc["links"][0]["bandwidth_gbps"] = 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    for algo in ("contention-free", "tree-phased"):
        out = tmp_path / f"{algo}.json"
        p = run_cli("schedule", "alltoall", str(bad), "--algo", algo, "-o", str(out), check=False)
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
        assert "bandwidth" in p.stderr
        assert not out.exists()
