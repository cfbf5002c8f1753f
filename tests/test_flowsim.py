"""Flow-level simulation: closed forms, the lock-step fluid agreement, executors, the CLI."""

import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_cli
from netweave import flowsim, routing, topology, traffic
from netweave._core import NetweaveError, Schedule, TaskGraph

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


def test_cli_host_streams_send_in_posting_order(fabric):
    # Every send of the shift schedule in one step (--nct 15): one streaming at a time goes
    # through each host's list in phase order without waiting for receives, as the async
    # executor with one send in flight does.
    _, topo, routes, sched = fabric
    def makespan(*options):
        out = run_cli("simulate", "flow", str(topo), str(routes), str(sched), *options, "--json").stdout
        return json.loads(out)["makespan_s"]
    every = makespan("-e", "local-sync", "--nct", "15")
    one = makespan("-e", "local-sync", "--nct", "15", "--host-streams", "1")
    assert one == pytest.approx(makespan("-e", "async", "--nct", "1"), rel=1e-9)
    assert one != pytest.approx(every, rel=1e-3)
    assert makespan("-e", "local-sync", "--nct", "15", "--host-streams", "15") == pytest.approx(every, rel=1e-12)


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
    _d, topo, routes, sched = fabric
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


# --- buffers and losses (Ethernet) -------------------------------------------------------------


def ethernet_star(hosts: int, buffer: int = 64 * 1024):
    return star(hosts).with_switching("ethernet", buffer)


def _incast(senders: int, nbytes: int = MB) -> Schedule:
    return Schedule("incast", senders + 1, [[(s, 0, nbytes) for s in range(1, senders + 1)]])


def test_the_link_layer_picks_the_model():
    assert star(4).link_layer == "infiniband" and star(4).port_buffer_bytes is None
    tree = topology.switch_tree([2], 4, [10.0], [0.0], 1.0, 0.0)
    assert (tree.link_layer, tree.port_buffer_bytes) == ("ethernet", 64 * 1024)
    sched = _incast(31)
    lossless = flowsim.simulate(routing.route(star(32), "minhop"), sched, executor="async")
    lossy = flowsim.simulate(routing.route(ethernet_star(32), "minhop"), sched, executor="async")
    assert not lossless["lossy"] and lossless["timeouts"] == 0
    assert close(lossless["makespan_s"], 31e-3)
    # Incast: senders time out and the port idles while they wait (200 ms against 31 ms of data).
    assert lossy["lossy"] and lossy["timeouts"] > 0
    assert lossy["makespan_s"] > 31e-3 + flowsim.TCP_DEFAULTS["timeout_s"]
    # What the buffer holds loses nothing: three senders share the port as without losses.
    few = flowsim.simulate(routing.route(ethernet_star(4), "minhop"), _incast(3), executor="async")
    assert few["timeouts"] == 0 and close(few["makespan_s"], 3e-3)
    # A buffer deep enough for every sender is the lossless model again.
    deep = flowsim.simulate(routing.route(ethernet_star(32, 16 << 20), "minhop"), sched, executor="async")
    assert deep["timeouts"] == 0 and close(deep["makespan_s"], 31e-3)


def test_small_messages_lose_segments_but_no_timeouts():
    # 31 senders x 16 KiB overflow a 64 KiB port with their first windows, but the burst drains
    # before the senders' tail-loss probes fire: losses are repaired without a timeout. The
    # segments sent again are counted on the channels they crossed.
    routes = routing.route(ethernet_star(32), "minhop")
    small = flowsim.simulate(routes, _incast(31, 16 * 1024), executor="async")
    assert small["timeouts"] == 0 and small["retransmitted_bytes"] > 0
    into_root = max(small["channel_bytes"])
    assert into_root == 31 * 16 * 1024 + small["retransmitted_bytes"]
    # Each flow whose tail the burst lost may be left with that one segment out, whose probe
    # waits an RTO more: the burst is charged its chance of that, 1 − (1 − p)^k, in RTOs.
    p, rto = flowsim.TCP_DEFAULTS["lone_tail_probability"], flowsim.TCP_DEFAULTS["timeout_s"]
    chance = 1 - (1 - p) ** small["probe_repairs"]
    assert small["probe_repairs"] > 0 and small["lone_tail_stalls"] == pytest.approx(chance, rel=1e-12)
    never = flowsim.simulate(routes, _incast(31, 16 * 1024), executor="async", tcp={"lone_tail_probability": 0.0})
    assert never["lone_tail_stalls"] == 0
    assert small["makespan_s"] - never["makespan_s"] == pytest.approx(chance * rto, rel=1e-9)
    # The same senders with 1 MB each keep the port full past the probes: timeouts.
    large = flowsim.simulate(routes, _incast(31), executor="async")
    assert large["timeouts"] > 0


def test_a_topology_file_states_the_link_layer(tmp_path):
    f = tmp_path / "star.json"
    topology.save(ethernet_star(4, 9000), f)
    doc = json.loads(f.read_text())
    assert (doc["link_layer"], doc["port_buffer_bytes"]) == ("ethernet", 9000)
    back = topology.load(f)
    assert (back.link_layer, back.port_buffer_bytes) == ("ethernet", 9000)
    for bad, needle in (({"port_buffer_bytes": 0}, "at least one"), ({"link_layer": "infiniband", "port_buffer_bytes": 9000}, "never drops"),
                        ({"link_layer": "token-ring"}, "token-ring")):
        edited = {**doc, **bad}
        g = tmp_path / "bad.json"
        g.write_text(json.dumps(edited))
        with pytest.raises(NetweaveError, match=needle):
            topology.load(g)


def _calibration(topo, **parameters):
    return {"format": flowsim.CALIBRATION_FORMAT, "version": flowsim.CALIBRATION_VERSION,
            "fabric": {"link_layer": topo.link_layer, "port_buffer_bytes": topo.port_buffer_bytes},
            "parameters": parameters}


def test_a_calibration_supplies_measured_parameters(tmp_path):
    topo = ethernet_star(32)
    routes = routing.route(topo, "minhop")
    sched = _incast(31)
    base = flowsim.simulate(routes, sched, executor="async")
    cal = _calibration(topo, overhead_s=1e-4, tcp={"timeout_s": 0.5})
    f = tmp_path / "cal.json"
    f.write_text(json.dumps(cal))
    slow = flowsim.simulate(routes, sched, executor="async", calibration=f)
    assert slow["timeouts"] == base["timeouts"]
    # The same timeout rounds, each 0.5 s instead of 0.2 s; the last survivors' transfer after them.
    rounds = int(base["makespan_s"] // 0.2)
    tail = base["makespan_s"] - rounds * 0.2
    assert slow["makespan_s"] == pytest.approx(1e-4 + rounds * 0.5 + tail, rel=1e-6)
    # Explicit arguments win over the file.
    assert flowsim.simulate(routes, sched, executor="async", calibration=cal, overhead_s=0.0,
                            tcp={"timeout_s": 0.2})["makespan_s"] == pytest.approx(base["makespan_s"])


def test_a_calibration_of_another_fabric_or_version_is_refused(tmp_path):
    topo = ethernet_star(8)
    routes = routing.route(topo, "minhop")
    sched = _incast(7)
    for doc, needle in ((_calibration(star(8)), "measured on a fabric of link layer infiniband .*this topology's link layer is ethernet"),
                        ({**_calibration(topo), "version": 99}, "version 99"),
                        ({**_calibration(topo, tcp={"survivor_fraction": 0.4}), "version": 1},
                         "version 1; this netweave reads version 6 .*calibrate again"),
                        ({**_calibration(topo), "version": 2}, "version 2; this netweave reads version 6"),
                        ({**_calibration(topo), "version": 3}, "version 3; this netweave reads version 6"),
                        ({**_calibration(topo), "version": 4}, "version 4; this netweave reads version 6"),
                        ({**_calibration(topo), "version": 5}, "version 5; this netweave reads version 6"),
                        ({**_calibration(topo), "format": "x"}, "not a netweave calibration"),
                        (_calibration(topo, overhead_s=-1), "overhead_s"),
                        (_calibration(topo, tcp={"rto": 1}), "parameters.tcp")):
        with pytest.raises(NetweaveError, match=needle):
            flowsim.simulate(routes, sched, calibration=doc)
    with pytest.raises(NetweaveError, match="no such calibration file"):
        flowsim.simulate(routes, sched, calibration=tmp_path / "missing.json")


def test_cli_calibration_and_buffer_bad_input(tmp_path):
    topo_file, routes_file = tmp_path / "tree.json", tmp_path / "routes.json"
    run_cli("topo", "tree", "--fanouts", "2", "--hosts-per-switch", "4", "--buffer", "32768", "-o", str(topo_file))
    assert json.loads(topo_file.read_text())["port_buffer_bytes"] == 32768
    run_cli("route", "updown", str(topo_file), "-o", str(routes_file))
    sched = _schedule_file(tmp_path / "gather.json", 8, [[[s, 0, MB] for s in range(1, 8)]])
    good = tmp_path / "cal.json"
    good.write_text(json.dumps({**_calibration(topology.load(topo_file), overhead_s=0.0)}))
    data = json.loads(run_cli("simulate", "flow", str(topo_file), str(routes_file), str(sched), "-e", "async",
                              "--calibration", str(good), "--json").stdout)
    assert data["lossy"] and data["timeouts"] > 0
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**_calibration(topology.load(topo_file)), "fabric": {"link_layer": "ethernet",
                                                                                    "port_buffer_bytes": 65536}}))
    _one_line_exit_2(run_cli("simulate", "flow", str(topo_file), str(routes_file), str(sched), "--calibration",
                             str(other), check=False), "port buffer 65,536 bytes")
    for value in ("0", "-5"):
        _one_line_exit_2(run_cli("topo", "tree", "--fanouts", "2", f"--buffer={value}", check=False), "--buffer")
