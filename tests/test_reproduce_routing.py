"""Paper 002 in the flit simulator: `netweave reproduce routing` and the dependency-driven
barrier (task-graph batch runs)."""

from __future__ import annotations

import csv
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_cli
from netweave import _core, flitsim, routing, topology, traffic
from netweave.reproduce import routing002


def test_reproduce_routing_quick_end_to_end(tmp_path):
    out = json.loads(run_cli("reproduce", "routing", "--quick", "--out", str(tmp_path), "--json").stdout)
    for name in ("summary.md", "bandwidth.csv", "barrier.csv", "hops.csv", "routes.csv",
                 "bandwidth_A.png", "bandwidth_mesh.png", "hops.png", "result.json"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert (tmp_path / "bandwidth_A.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The stand-ins keep the paper's order of path richness and distance.
    a, b = out["ab"]["A"], out["ab"]["B"]
    assert a["minimal_paths"] < b["minimal_paths"] < out["ab"]["mesh_minimal_paths"]
    assert b["avg_distance"] < a["avg_distance"]
    assert a["updown_non_minimal_pairs"] > 0 and b["updown_non_minimal_pairs"] > 0
    assert out["barrier_ordered"] is True
    rows = list(csv.DictReader((tmp_path / "bandwidth.csv").read_text().splitlines()))
    # 2 topologies × (4 + 5 routings) × 4 patterns × 2 sizes.
    assert len(rows) == (4 + 5) * 4 * 2
    assert all(float(r["bandwidth_mbs"]) > 0 for r in rows)
    # Request/reply is latency-bound: every extra switch costs the 2-host transfer bandwidth,
    # and the 2-host barrier time grows with the distance.
    hops = list(csv.DictReader((tmp_path / "hops.csv").read_text().splitlines()))
    bw = [float(r["bandwidth_mbs"]) for r in hops]
    bar = [float(r["barrier_us"]) for r in hops]
    assert bw == sorted(bw, reverse=True) and bw[0] > bw[-1]
    assert bar == sorted(bar) and bar[0] < bar[-1]
    assert out["figures"]["fig8_mbs_per_hop"] < 0 < out["figures"]["fig10_us_per_hop"]
    summary = (tmp_path / "summary.md").read_text()
    assert "Table 3" in summary and "| prefix has the slowest barrier on every topology |" in summary
    # Same inputs, same bytes.
    again = tmp_path / "again"
    run_cli("reproduce", "routing", "--quick", "--out", str(again))
    assert (again / "bandwidth.csv").read_bytes() == (tmp_path / "bandwidth.csv").read_bytes()
    assert (again / "barrier.csv").read_bytes() == (tmp_path / "barrier.csv").read_bytes()


def test_reproduce_routing_refuses_a_file_as_out(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = run_cli("reproduce", "routing", "--quick", "--out", str(f), check=False)
    assert r.returncode == 2 and "not a directory" in r.stderr


def test_packet_arithmetic_and_patterns():
    assert routing002.data_flits(1792) == 229
    assert routing002.data_flits(8) == 6
    for pat in routing002.PATTERNS:
        assert sorted(routing002.pattern_dest(pat, s) for s in range(16)) == list(range(16))
    assert [s for s in range(16) if routing002.pattern_dest("bitrev", s) == s] == [0, 6, 9, 15]
    assert [s for s in range(16) if routing002.pattern_dest("butterfly", s) == s] == [0, 2, 4, 6, 9, 11, 13, 15]


def _barrier_on(topo_name: str, engine: str, num_ranks: int, seed: int):
    topo = topology.mesh([4, 4], 4) if topo_name == "mesh" else topology.irregular(16, 4, 6, 4, 15)
    routes = routing.route(topo, engine, vcs=8 if engine == "sbp" else 2)
    sched = traffic.build("barrier", "multicast", num_ranks=num_ranks, bytes=17, seed=seed)
    graph = routing002.causal_dag(sched)
    cfg = routing002.sim_config(routes)
    cfg["request_reply"] = 0
    return sched, graph, flitsim.simulate(cfg, routes=routes, schedule=graph)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(2, 64), seed=st.integers(0, 2**32), topo_name=st.sampled_from(["mesh", "A"]),
       engine=st.sampled_from(["updown", "dl", "sbp"]))
def test_barrier_releases_every_host_after_the_last_gather_message(n, seed, topo_name, engine):
    sched, graph, r = _barrier_on(topo_name, engine, n, seed)
    half = sched.num_phases // 2
    gather = sum(len(sched.phase(p)) for p in range(half))
    assert len(r["task_start"]) == len(r["task_finish"]) == graph.num_tasks == sched.num_messages
    last_gather = max(r["task_finish"][:gather])
    # The root learns the barrier is complete with the last gather message; no release may
    # leave before, and every host other than the root is released by a message after it.
    assert min(r["task_start"][gather:]) >= last_gather
    released = {}
    for t, (_src, dst, _) in enumerate(m for p in range(sched.num_phases) for m in sched.phase(p)):
        if t >= gather:
            released[dst] = r["task_finish"][t]
    assert set(released) == set(range(n)) - {traffic.visiting_list(n, 0, seed)[0]}
    assert all(t > last_gather for t in released.values())
    assert r["completion_cycles"] == max(r["task_finish"])


def test_barrier_needs_the_dependencies():
    # The same schedule run phase-free (no sync) lets the release overtake the gather.
    sched, _graph, r = _barrier_on("mesh", "dl", 64, 3)
    topo = topology.mesh([4, 4], 4)
    routes = routing.route(topo, "dl", vcs=2)
    cfg = routing002.sim_config(routes)
    cfg["request_reply"] = 0
    free = flitsim.simulate(cfg, routes=routes, schedule=sched)
    assert free["completion_cycles"] < r["completion_cycles"]
    assert "task_start" not in free


def test_dag_runs_refuse_third_party_waits():
    topo = topology.mesh([4, 4], 1)
    routes = routing.route(topo, "dor")
    g = _core.TaskGraph("x", 16, [(0, 1, 4, [], None), (2, 3, 4, [0], None)])
    with pytest.raises(_core.NetweaveError, match="sync message"):
        flitsim.simulate({"sim_type": "batch"}, routes=routes, schedule=g)
    with pytest.raises(_core.NetweaveError, match="batch"):
        flitsim.simulate({"sim_type": "latency"}, routes=routes, schedule=g)
