"""Flow-level simulation: closed forms, the lock-step fluid agreement, executors, the CLI."""

import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netweave import flowsim, routing, topology, traffic
from netweave._core import NetweaveError, Schedule, TaskGraph

from conftest import run_cli

GBPS = 8.0  # 10^9 bytes/s: one megabyte takes exactly one millisecond
MB = 1_000_000


def star(hosts: int, latency_ns: float = 0.0):
    g = nx.Graph()
    g.add_node("sw", kind="switch")
    for i in range(hosts):
        g.add_node(f"h{i}", kind="host")
        g.add_edge(f"h{i}", "sw", bandwidth_gbps=GBPS, latency_ns=latency_ns, link=i)
    return topology.from_networkx(g)


def star_routes(hosts: int, latency_ns: float = 0.0):
    return routing.route(star(hosts, latency_ns), "minhop")


def close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * abs(b)


def test_one_flow_is_latency_plus_size_over_bandwidth():
    rep = flowsim.simulate(star_routes(2, 500.0), Schedule("one", 2, [[(0, 1, MB)]]))
    assert close(rep["makespan_s"], 1e-3 + 1e-6)
    assert rep["channel_bytes"].sum() == 2 * MB  # uplink and downlink
    assert isinstance(rep["host_finish_s"], np.ndarray)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_fan_in_shares_the_receiving_link(k):
    sched = Schedule("fan-in", k + 1, [[(i, 0, MB) for i in range(1, k + 1)]])
    rep = flowsim.simulate(star_routes(k + 1), sched, executor="async")
    assert close(rep["makespan_s"], k * 1e-3)
    assert close(float(rep["channel_utilisation"].max()), 1.0)


def test_sync_matches_the_lock_step_fluid_time_without_latency():
    g = topology.to_networkx(topology.torus([4, 3], 1))
    for _, _, d in g.edges(data=True):
        d["bandwidth_gbps"], d["latency_ns"] = GBPS, 0.0
    topo = topology.from_networkx(g)
    routes = routing.route(topo, "minhop")
    sched = traffic.alltoall(topo.num_hosts, MB)
    loads = routes.analyze(sched)
    rep = flowsim.simulate(routes, sched, executor="sync")
    # From first principles (max load x size / bandwidth, summed over phases) and as the
    # analysis engine computes it (host links bounded too, as in the simulation).
    assert close(rep["makespan_s"], sum(p["max_load"] for p in loads["phases"]) * 1e-3)
    assert close(rep["makespan_s"], loads["fluid_time_host_links_s"])


def test_dag_relay_is_cut_through_and_syncs_cost_latency():
    routes = star_routes(4, 1000.0)
    relay = TaskGraph("relay", 4, [(0, 1, MB, [], None), (1, 2, MB, [], 0)])
    rep = flowsim.simulate(routes, relay, executor="dag")
    assert close(rep["makespan_s"], 1e-3 + 4e-6)
    synced = TaskGraph("sync", 4, [(0, 1, MB, [], None), (2, 3, MB, [0], None)])
    rep = flowsim.simulate(routes, synced, executor="dag")
    assert close(rep["makespan_s"], 2e-3 + 6e-6 + 1e-9)
    assert rep["sync_messages"] == 1
    assert TaskGraph.from_json(synced.to_json()).to_json() == synced.to_json()


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(1, 4 * MB)), min_size=1, max_size=6),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(flowsim.EXECUTORS),
    st.integers(1, 3),
)
def test_any_schedule_finishes_between_its_bounds(phases, executor, nct):
    routes = star_routes(5)
    rep = flowsim.simulate(routes, Schedule("random", 5, phases), executor=executor, nct=nct)
    network = [m for p in phases for m in p if m[0] != m[1]]
    # Never faster than the busiest channel at full rate; never slower than everything in a row.
    lower = max(rep["channel_bytes"].max(initial=0) / 1e9, 0.0)
    # (plus, for the DAG, its 1-byte sync messages in a row)
    upper = (sum(b for _, _, b in network) + rep["sync_messages"]) / 1e9
    assert rep["makespan_s"] >= lower * (1 - 1e-9)
    assert rep["makespan_s"] <= upper * (1 + 1e-9) + 1e-15
    assert rep["payload_bytes"] == sum(b for p in phases for _, _, b in p)
    assert (rep["channel_utilisation"] <= 1 + 1e-9).all()


def test_python_api_refuses_bad_input():
    routes = star_routes(3)
    sched = Schedule("s", 3, [[(0, 1, 10)]])
    with pytest.raises(NetweaveError, match="executor"):
        flowsim.simulate(routes, sched, executor="warp")
    with pytest.raises(NetweaveError, match="nct"):
        flowsim.simulate(routes, sched, nct=0)
    with pytest.raises(NetweaveError, match="placed on host"):
        flowsim.simulate(routes, sched.with_placement([0, 1, 7]))


def test_progress_callback_sees_every_message():
    seen = []
    sched = traffic.alltoall(6, 1000)
    flowsim.simulate(star_routes(6), sched, executor="async", on_progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (30, 30)


# --- CLI -------------------------------------------------------------------------------------


def _schedule_file(path, num_ranks, phases, placement=None):
    doc = {
        "format": "netweave-schedule", "version": 1, "form": "phases", "name": "test", "collective": "custom",
        "delivery": "direct", "claims_permutation": False, "concurrent_sends": 1, "num_ranks": num_ranks,
        "placement": placement or list(range(num_ranks)), "phases": phases,
    }
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    d = tmp_path_factory.mktemp("flow")
    topo, routes = d / "torus.json", d / "routes.json"
    run_cli("topo", "torus", "--dims", "4x4", "--bandwidth", "8", "--latency", "0", "-o", str(topo))
    run_cli("route", "dor", str(topo), "-o", str(routes))
    n = 16
    shift = [[[s, (s + i) % n, MB] for s in range(n)] for i in range(1, n)]
    sched = _schedule_file(d / "shift.json", n, shift)
    return d, topo, routes, sched


@pytest.mark.parametrize("executor", ["sync", "async", "local-sync", "dag"])
def test_cli_runs_every_executor(fabric, executor):
    _, topo, routes, sched = fabric
    data = json.loads(run_cli("simulate", "flow", str(topo), str(routes), str(sched), "--executor", executor, "--json").stdout)
    assert data["executor"] == executor
    assert data["messages"] == 16 * 15
    assert data["makespan_s"] > 15e-3 * 0.99  # each host sends 15 MB through a 1 GB/s link
    assert data["throughput_per_server_mib_s"] == pytest.approx(15 * MB / data["makespan_s"] / 2**20)


def test_cli_sync_equals_lock_step_and_writes_files(fabric, tmp_path):
    _, topo_file, routes_file, sched = fabric
    out = tmp_path / "out"
    data = json.loads(
        run_cli("simulate", "flow", str(topo_file), str(routes_file), str(sched), "--json", "--out", str(out)).stdout
    )
    topo = topology.load(topo_file)
    loads = routing.load(topo, routes_file).analyze(traffic.alltoall(16, MB))
    assert data["makespan_s"] == pytest.approx(sum(p["max_load"] for p in loads["phases"]) * 1e-3, rel=1e-9)
    full = json.loads((out / "flow.json").read_text())
    assert len(full["channel_utilisation"]) == 2 * topo.num_links
    assert (out / "link_utilisation.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "host_finish.png").stat().st_size > 1000
    assert (out / "channels.csv").read_text().startswith("channel,link,direction,bytes,busy_s,utilisation")
    # --bytes rescales the whole run (no latency: time is proportional to size)
    half = json.loads(
        run_cli("simulate", "flow", str(topo_file), str(routes_file), str(sched), "--bytes", str(MB // 2), "--json").stdout
    )
    assert half["makespan_s"] == pytest.approx(data["makespan_s"] / 2, rel=1e-9)


def test_cli_dag_file(fabric, tmp_path):
    _, topo, routes, _ = fabric
    dag = TaskGraph("pair", 16, [(0, 5, MB, [], None), (5, 9, MB, [], 0)])
    f = tmp_path / "dag.json"
    f.write_text(dag.to_json())
    data = json.loads(run_cli("simulate", "flow", str(topo), str(routes), str(f), "-e", "dag", "--json").stdout)
    assert data["makespan_s"] == pytest.approx(1e-3, rel=1e-9)  # cut-through, no latency
    proc = run_cli("simulate", "flow", str(topo), str(routes), str(f), check=False)
    assert proc.returncode == 2 and "--executor dag" in proc.stderr


def _one_line_exit_2(proc, needle):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], proc.stderr


def test_cli_bad_input_is_one_line_exit_2(fabric, tmp_path):
    d, topo, routes, sched = fabric
    off = _schedule_file(tmp_path / "off.json", 2, [[[0, 1, 10]]], placement=[0, 99])
    _one_line_exit_2(run_cli("simulate", "flow", str(topo), str(routes), str(off), check=False), "host 99")
    # Routes that do not deliver a pair: clear one table entry.
    doc = json.loads(routes.read_text())
    doc["out_port"][0] = [0] * len(doc["out_port"][0])
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(doc))
    _one_line_exit_2(run_cli("simulate", "flow", str(topo), str(broken), str(sched), check=False), "no route")
    # Zero bandwidth: in the topology file, or as a host limit.
    tdoc = json.loads(topo.read_text())
    tdoc["links"][0]["bandwidth_gbps"] = 0
    zero = tmp_path / "zero.json"
    zero.write_text(json.dumps(tdoc))
    _one_line_exit_2(run_cli("simulate", "flow", str(zero), str(routes), str(sched), check=False), "bandwidth")
    _one_line_exit_2(
        run_cli("simulate", "flow", str(topo), str(routes), str(sched), "--injection-gbps", "-1", check=False),
        "injection",
    )
    _one_line_exit_2(run_cli("simulate", "flow", str(topo), str(routes), str(sched), "-e", "warp", check=False), "executor")
