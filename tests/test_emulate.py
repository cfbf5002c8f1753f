"""The emulated cluster: namespaces routed by netweave's tables carry exactly the routed bytes.

Every test builds a uniquely named fabric and removes it in a fixture, so nothing is left
behind even when an assertion fails midway.
"""

import json
import subprocess
import sys
import tempfile
import uuid

import pytest

import netweave
from conftest import run_cli
from netweave import flowsim, routing, topology, traffic
from netweave.run import calibration, emulate, mpi
from netweave.run.emulate import cluster, runs, traffic_control


@pytest.fixture
def name():
    fabric = "t" + uuid.uuid4().hex[:11]
    yield fabric
    emulate.down(fabric)
    assert emulate.namespaces(fabric) == []


def _measure(topo, engine, workload, name, **kw):
    routes = routing.route(topo, engine)
    result = emulate.measure(topo, routes, workload, name, **kw)
    assert result["cause"] is None and result["measured_s"] > 0
    payload = sum(b for s, d, b, _a, _r in netweave.run.executor.as_task_graph(workload).tasks() if s != d)
    assert result["bytes_verified"] == payload
    return result


def _proved(topo, engine, workload, name, attempts=3, **kw):
    """A measurement whose byte-counter proof is conclusive. TCP retransmits when a starved
    machine delays ACKs past its timeout, which makes a proof inconclusive (bytes above the
    routed ones, with the retransmissions counted); such a run is measured again. A violation
    without losses fails at once: that would be a route the fabric did not take."""
    for attempt in range(attempts):
        result = _measure(topo, engine, workload, f"{name[:10]}{attempt}", **kw)
        proof = result["routing_proof"]
        if proof["ok"]:
            return result
        assert proof["inconclusive"], (proof["losses"], proof["violations"][:3])
    pytest.fail(f"{attempts} runs lost packets or retransmitted: {proof['losses']}, {proof['violations'][:3]}")


@pytest.mark.parametrize("fabric,engine", [
    (lambda: topology.mesh([4, 4]), "dor"),
    (lambda: topology.k_ary_n_tree(2, 3), "dmodk"),
    (lambda: topology.latin_square_fat_tree(2), "lsft"),
])
def test_byte_counters_prove_the_fabric_routes_by_the_table(fabric, engine, name):
    topo = fabric()
    n = topo.num_hosts
    # An all-to-all loads every channel; a gather to one host makes directions differ, so a
    # route taken the wrong way round would show. A deep buffer keeps both free of losses.
    for i, workload in enumerate((traffic.alltoall(n, 65536, "shift"),
                                  traffic.build("gather", "linear", num_ranks=n, bytes=200_000, root=n // 2 + 1))):
        result = _proved(topo, engine, workload, f"{name[:9]}{i}", scale=0.005, buffer=16 << 20)
        proof = result["routing_proof"]
        assert 0 <= proof["overhead"] < emulate.proof.DATA_OVERHEAD + emulate.proof.ACK_SHARE
        # Independently of the proof's own arithmetic: the flow simulator's bytes per channel.
        routes = routing.route(topo, engine)
        flow = netweave.flowsim.simulate(routes, netweave.run.executor.as_task_graph(workload), executor="dag")
        measured = result["channel_bytes"]
        for c, simulated in enumerate(flow["channel_bytes"].tolist()):
            if simulated > 0:
                assert simulated <= measured[c] <= simulated * 1.06 + 65536, (c, simulated, measured[c])
            elif flow["channel_bytes"][c ^ 1] == 0:
                assert measured[c] < 65536, (c, measured[c])


def test_forwarding_load_counts_every_channel_of_every_route():
    # Host 0 to host 1 through one switch crosses two channels; host 0 to itself none.
    star = topology.switch_tree([], 2, [], [], 1.0, 5_000.0)
    routes = routing.route(star, "updown")
    graph = netweave._core.TaskGraph.from_schedule(
        netweave._core.Schedule("pair", 2, [[(0, 1, 1000), (0, 0, 500)]]))
    assert emulate.forwarding_load(routes, graph, 0.5) == 2 * 1000 * 8 / 0.5
    # A mesh shift at 50 Mbit/s links stays inside the budget the fidelity figures hold for;
    # at 200 Mbit/s it does not.
    mesh = topology.mesh([4, 4])
    mesh_routes = routing.route(mesh, "dor")
    shift = netweave.run.executor.as_task_graph(traffic.alltoall(16, 131072, "shift"))
    for scale, inside in ((0.0005, True), (0.002, False)):
        scaled = emulate.scaled_topology(mesh, scale)
        predicted = netweave.flowsim.simulate(emulate.scaled_routes(mesh_routes, scaled), shift,
                                              executor="dag")["makespan_s"]
        assert (emulate.forwarding_load(mesh_routes, shift, predicted) <= emulate.FORWARDING_BUDGET_BPS) == inside


def test_a_contention_free_dag_with_relays_runs_on_an_emulated_tree(name):
    tree = topology.multi_cluster("a:4,b:4")
    dag, summary = traffic.contention_free(tree, "gather", 20_000, root=5)
    assert summary["relayed_tasks"] > 0
    result = _proved(tree, "updown", dag, name, scale=0.05)
    assert result["run"]["syncs"] > 0


def test_a_bring_up_that_fails_midway_leaves_nothing(name, monkeypatch):
    topo = topology.mesh([3, 3])
    routes = routing.route(topo, "dor")
    links_before = subprocess.run(["ip", "-j", "link"], capture_output=True, text=True).stdout

    def broken(ns, *args):
        if ns.endswith("-s4"):
            raise netweave.NetweaveError("injected failure")
        return real(ns, *args)

    real = cluster._configure
    monkeypatch.setattr(cluster, "_configure", broken)
    with pytest.raises(netweave.NetweaveError, match="injected failure"):
        emulate.up(topo, routes, name, scale=0.01)
    assert emulate.namespaces(name) == []
    assert not (emulate.STATE_DIR / f"{name}.json").exists()
    # Every veth was created inside the fabric's namespaces: the root namespace is untouched.
    after = subprocess.run(["ip", "-j", "link"], capture_output=True, text=True).stdout
    assert len(json.loads(after)) == len(json.loads(links_before))


def test_cli_up_status_exec_twice_and_down(name, tmp_path):
    run_cli("topo", "mesh", "--dims", "3x3", "-o", str(tmp_path / "t.json"))
    run_cli("route", "dor", str(tmp_path / "t.json"), "-o", str(tmp_path / "r.json"))
    up = json.loads(run_cli("emulate", "up", str(tmp_path / "t.json"), str(tmp_path / "r.json"), "--name", name,
                            "--scale", "0.01", "--json").stdout)
    assert up["hosts"] == 9 and up["first_host"]["address"] == emulate.fabric_address(0)
    # The hosts' TCP is the model's (Linux's default, loss-based), whatever this machine's default.
    said = run_cli("emulate", "exec", "4", "--name", name, "--", "sysctl", "-n", "net.ipv4.tcp_congestion_control").stdout
    assert said.strip() == cluster.HOST_CONGESTION_CONTROL == "cubic"
    rows = {r["name"]: r for r in json.loads(run_cli("emulate", "status", "--json").stdout)}
    assert rows[name]["complete"] and rows[name]["namespaces"] == 9 + 9 + 1
    out = run_cli("emulate", "exec", "4", "--name", name, "--", "ip", "-br", "addr").stdout
    assert emulate.fabric_address(4) in out and emulate.mgmt_address(4) in out
    again = run_cli("emulate", "up", str(tmp_path / "t.json"), str(tmp_path / "r.json"), "--name", name, check=False)
    assert again.returncode == 2 and f"fabric '{name}' is already up" in again.stderr
    run_cli("emulate", "down", name)
    assert emulate.namespaces(name) == []


def test_the_hosts_congestion_control_is_allowed_only_by_adding_it(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster, "IPV4_SYSCTLS", tmp_path)
    available, allowed = tmp_path / "tcp_available_congestion_control", tmp_path / "tcp_allowed_congestion_control"
    available.write_text("reno bbr cubic\n")
    allowed.write_text("reno bbr\n")
    cluster.allow_host_congestion_control()
    assert allowed.read_text().split() == ["reno", "bbr", "cubic"]
    cluster.allow_host_congestion_control()  # already allowed: left as it is
    assert allowed.read_text().split() == ["reno", "bbr", "cubic"]
    available.write_text("reno bbr\n")
    allowed.write_text("reno bbr\n")
    with pytest.raises(netweave.NetweaveError, match="this kernel offers only reno bbr"):
        cluster.allow_host_congestion_control()
    assert allowed.read_text().split() == ["reno", "bbr"]


def test_down_cleans_up_after_a_crashed_run(name):
    # A crash leaves namespaces and no state file: status names them, down removes them.
    for suffix in ("h0", "s0"):
        subprocess.run(["ip", "netns", "add", f"{emulate.PREFIX}{name}-{suffix}"], check=True)
    rows = {r["name"]: r for r in emulate.status()}
    assert rows[name]["namespaces"] == 2 and not rows[name]["complete"]
    assert emulate.down(name)["removed_namespaces"] == 2


def test_bad_input_is_one_clear_line(name, monkeypatch, tmp_path):
    topo = topology.mesh([2, 2])
    routes = routing.route(topo, "dor")
    with pytest.raises(netweave.NetweaveError, match="1-12 lowercase letters"):
        emulate.up(topo, routes, "Bad_Name")
    with pytest.raises(netweave.NetweaveError, match="must be positive"):
        emulate.up(topo, routes, name, scale=0)
    with pytest.raises(netweave.NetweaveError, match="raise --scale"):
        emulate.up(topo, routes, name, scale=1e-9)
    monkeypatch.setattr(cluster.os, "geteuid", lambda: 1000)
    with pytest.raises(netweave.NetweaveError, match="needs root"):
        emulate.up(topo, routes, name)


def test_reproduce_ethernet_emulated_shows_incast(tmp_path):
    before = emulate.namespaces()
    result = json.loads(run_cli("reproduce", "ethernet", "--emulate", "--quick", "--out", str(tmp_path), "--json").stdout)
    h = result["headline"]
    # §3: 31 senders at once into one 1 Gbit/s port with a shallow queue lose packets and wait
    # for retransmission timeouts, far below the link's rate (cubic hosts: 470-560 Mbit/s).
    # One after another they run near it, but at 1 Gbit/s the two cores forwarding every hop
    # measured that anywhere from 417 to 985 Mbit/s, too unsteady to compare against.
    assert h["concurrent_retransmitted_segments"] > 0
    assert h["concurrent_mbit_per_s"] < 0.75 * 1000
    assert h["sequential_mbit_per_s"] < 1000 * 1.01  # never above the link
    summary = (tmp_path / "summary_emulated.md").read_text()
    assert "200-300 Mbit/s" in summary and (tmp_path / "emulated_incast.png").stat().st_size > 1000
    assert emulate.namespaces() == before  # every fabric it built is gone


def test_native_open_mpi_alltoall_runs_over_the_fabric(name):
    topo = topology.mesh([2, 2])
    fabric = emulate.up(topo, routing.route(topo, "dor"), name, scale=0.01)
    before = sum(fabric.channel_bytes())
    bench = netweave.run.executor.executor_path().parent / "nwbench-openmpi"
    proc = emulate.mpirun(fabric, "openmpi", 4, [str(bench), "--sizes", "0,1,100000", "--check", "--reps", "5"],
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["ranks"] == 4 and [r["bytes"] for r in report["results"]] == [0, 1, 100000]
    # The MPI traffic crossed the emulated links: 3 warm-up, 1 checked and 5 timed calls of
    # 4 x 3 x 100 kB, each over at least a host uplink and a host downlink.
    assert sum(fabric.channel_bytes()) - before >= 2 * 9 * 12 * 100_000


@pytest.mark.parametrize("mpi,collective", [("openmpi", "alltoall"), ("mpich", "alltoall"), ("mpich", "allgather"),
                                            ("mpich", "gather")])
def test_nwbench_verifies_every_byte_on_both_mpis(mpi, collective):
    # On shared memory: MPICH's UCX is not dependable on emulated trees (docs/emulate.md).
    launcher = {"openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe"], "mpich": ["mpirun.mpich"]}[mpi]
    bench = netweave.run.executor.executor_path().parent / f"nwbench-{mpi}"
    proc = subprocess.run(launcher + ["-n", "5", str(bench), "--collective", collective, "--sizes", "0,1,4097",
                                      "--check", "--reps", "2"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["collective"] == collective and report["ranks"] == 5
    assert all(0 <= r["min_s"] <= r["avg_s"] <= r["max_s"] for r in report["results"])
    bad = subprocess.run(launcher + ["-n", "2", str(bench), "--sizes", "-5"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--sizes must be byte counts" in bad.stderr


def test_netweave_schedules_run_inside_mpi_on_the_fabric(name, tmp_path):
    # The MPI runtime over the emulated fabric: Open MPI's TCP between namespaces routed by the
    # table, netweave's Bruck all-to-all inside MPI_Alltoall, bit-identical to Open MPI's own.
    topo = topology.mesh([2, 2])
    fabric = emulate.up(topo, routing.route(topo, "dor"), name, scale=0.01)
    traffic.save(traffic.build("alltoall", "bruck", num_ranks=4, bytes=8), tmp_path / "alltoall-4.nws")
    before = sum(fabric.channel_bytes())
    env = {**mpi.settings(tmp_path, verbose=True), "LD_PRELOAD": str(mpi.library_path("openmpi"))}
    nwcheck = mpi.program_path("nwcheck", "openmpi")
    proc = emulate.mpirun(fabric, "openmpi", 4, [str(nwcheck), "--types", "byte,double", "--counts", "0,1,7,20000"],
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["mismatches"] == 0
    assert "runs 'alltoall-bruck(N=4)'" in proc.stderr
    # Both all-to-alls of 4 x 3 x 160 kB (doubles) crossed host links.
    assert sum(fabric.channel_bytes()) - before >= 2 * 2 * 12 * 160_000


def test_reproduce_lsft_emulated_runs_the_schedules_inside_mpi(tmp_path):
    # Paper 000 §5 in miniature (S2): Open MPI's pairwise and linear all-to-alls and netweave's
    # shift and LSFT schedules inside MPI_Alltoall, over an emulated LSFT routed by `lsft`.
    before = emulate.namespaces()
    result = json.loads(run_cli("reproduce", "lsft", "--emulate", "--quick", "--out", str(tmp_path), "--json").stdout)
    h = result["headline"]["S2"]
    rows = json.loads((tmp_path / "results_emulated.json").read_text())["rows"]
    assert {r["method"] for r in rows} == {"Open MPI pairwise", "Open MPI linear", "netweave shift",
                                           "netweave proposed (LSFT)"}
    # Real bytes cannot beat the emulated link; the flow model puts the LSFT schedule above shift.
    assert all(0 < r["ratio_to_link"] <= 1.01 for r in rows)
    assert h["proposed_flow_model"] > h["shift_flow_model"]
    assert "| S2 |" in (tmp_path / "summary_emulated.md").read_text()
    assert emulate.namespaces() == before


def test_mpich_nwbench_runs_on_the_fabric_even_when_finalize_hangs(name):
    # MPICH over UCX may hang in MPI_Finalize here after all its work (docs/emulate.md):
    # mpirun(done_when=...) ends such a run once nwbench has printed everything.
    topo = topology.mesh([2, 2])
    fabric = emulate.up(topo, routing.route(topo, "dor"), name, scale=0.01)
    bench = mpi.program_path("nwbench", "mpich")
    proc = emulate.mpirun(fabric, "mpich", 4, [str(bench), "--sizes", "1,50000", "--check", "--reps", "3"],
                          timeout=120, done_when=lambda out: out.rstrip().endswith("]}"), grace=5)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["ranks"] == 4 and [r["bytes"] for r in report["results"]] == [1, 50000]
    assert emulate.namespaces(name)  # the fabric is still up; the fixture takes it down


def test_reading_a_running_programs_output_never_overwrites_it():
    """mpirun polls what its launcher has printed while the launcher still writes: the two share
    the file's offset, so the read must not move it (a seek made the launcher's next line land
    over the report's start)."""
    lines = 20000
    child = f"for i in range({lines}):\n    print(i, flush=True)"
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([sys.executable, "-c", child], stdout=out, text=True)
        seen = ""
        while proc.poll() is None:
            seen = runs._written(out)
        assert proc.wait() == 0
        final = runs._written(out)
    assert final == "".join(f"{i}\n" for i in range(lines))
    assert final.startswith(seen)

# Runs inside host 1: echoes every byte on "E" connections, swallows "B" connections.
_ECHO_SERVER = """
import socket, sys, threading
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], 7300)); srv.listen(64); print("ready", flush=True)
def serve(c):
    kind = c.recv(1)
    while True:
        data = c.recv(65536)
        if not data:
            return
        if kind == b"E":
            c.sendall(data)
while True:
    threading.Thread(target=serve, args=(srv.accept()[0],), daemon=True).start()
"""

# Runs inside host 0: keeps 8 bulk connections busy, then times 1-byte round trips on a
# connection marked DSCP EF and on an unmarked one; prints both medians (seconds).
_PROBE = """
import json, socket, statistics, sys, threading, time
dst, tos = sys.argv[1], int(sys.argv[2], 16)
stop = time.monotonic() + 8
def bulk():
    s = socket.create_connection((dst, 7300)); s.sendall(b"B")
    while time.monotonic() < stop:
        s.sendall(bytes(65536))
for _ in range(8):
    threading.Thread(target=bulk, daemon=True).start()
time.sleep(1.5)
out = {}
for label, mark in (("marked", tos), ("unmarked", 0)):
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, mark)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.connect((dst, 7300)); s.sendall(b"E")
    rtts = []
    for _ in range(7):
        t = time.monotonic(); s.sendall(b"x"); s.recv(1); rtts.append(time.monotonic() - t)
    out[label] = statistics.median(rtts)
print(json.dumps(out), flush=True)
"""


def test_ports_serve_control_packets_before_queued_data(name):
    # Eight bulk streams fill host 0's port queue; a round trip marked as control (DSCP EF, as
    # the TCP executor marks its syncs) passes them, an unmarked one waits behind them.
    star = topology.switch_tree([], 2, [], [], 1.0, 5_000.0)
    fabric = emulate.up(star, routing.route(star, "updown"), name, scale=0.01)
    server = subprocess.Popen(fabric.exec_prefix(1) + [sys.executable, "-c", _ECHO_SERVER, fabric.host_address(1)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        probe = subprocess.run(fabric.exec_prefix(0) + [sys.executable, "-c", _PROBE, fabric.host_address(1),
                                                          hex(traffic_control.CONTROL_TOS)],
                               capture_output=True, text=True, timeout=60, check=True)
        rtt = json.loads(probe.stdout)
        assert rtt["marked"] * 3 < rtt["unmarked"], rtt
    finally:
        server.kill()
        server.wait()


def test_a_lossless_fabric_queues_an_incast_without_dropping(name):
    # Eight senders of 512 KiB into one port: 4 MiB converge where a drop-tail queue of 10 ms
    # of the port's rate (256 KiB here) overflowed. Credits never drop, so the emulation must not.
    star = topology.switch_tree([], 9, [], [], 1.0, 5_000.0).with_switching("infiniband", None)
    fabric = emulate.up(star, routing.route(star, "updown"), name, scale=0.01)
    run = emulate.run(fabric, calibration.incast(8, 512 * 1024, 9), warmup=0, reps=1)
    assert run["ok"], run
    assert run["losses"]["dropped_packets"] == 0, run["losses"]
    # Each single-loss probe recovery resent a segment: the hosts count it among their retransmits.
    assert 0 <= run["losses"]["probe_recoveries"] <= run["losses"]["retransmitted_segments"], run["losses"]
    # Every byte crossed host 0's port at its scaled rate (1 Gbit/s × 0.01): the bound, less
    # the few frames a token bucket lets through at once.
    assert run["makespan_s"] >= 0.95 * 8 * 512 * 1024 * 8 / (1e9 * 0.01)


def test_calibrate_measures_the_model_parameters_and_refuses_bad_input(name, tmp_path):
    star = topology.switch_tree([], 6, [], [], 1.0, 5_000.0)
    topo_file, routes_file, out = tmp_path / "star.json", tmp_path / "routes.json", tmp_path / "cal.json"
    topology.save(star, topo_file)
    routing.save(routing.route(star, "updown"), routes_file)
    # Bad input: one line, exit 2, nothing written and no fabric left.
    for args, needle in ((["--buffer=0"], "--buffer"), (["--senders", "9"], "--senders"), (["--senders", "2", "--native", "bcast"], "--native"),
                         (["--senders", "2", "--timed-seconds", "-1"], "--timed-seconds")):
        proc = run_cli("emulate", "calibrate", str(topo_file), str(routes_file), "--name", name, "-o", str(out),
                       *args, check=False)
        assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not out.exists() and not emulate.namespaces(name)
    run_cli("emulate", "calibrate", str(topo_file), str(routes_file), "--name", name, "-o", str(out), "--scale", "0.1",
            "--senders", "2,5", "--bytes", "100000", "--repeats", "1", "--native", "gather", "--timed-seconds", "0")
    doc = json.loads(out.read_text())
    assert not emulate.namespaces(name)
    assert (doc["format"], doc["version"]) == ("netweave-calibration", flowsim.CALIBRATION_VERSION)
    assert doc["fabric"]["link_layer"] == "ethernet" and doc["fabric"]["port_buffer_bytes"] == 64 * 1024
    p = doc["parameters"]
    assert p["overhead_s"] > 0 and p["sync_s"] >= 0 and set(p["tcp"]) >= {"timeout_s", "window_segments", "survival_per_segment"}
    assert [pt["senders"] for pt in doc["measurements"]["incast"]] == [2, 5]
    assert doc["measurements"]["timed_seconds"] == 0
    # The native MPIs' own gathers on every host, each library's cost fitted to them.
    for library in ("openmpi", "mpich"):
        native = doc["native"][library]
        assert native["ranks"] == 6 and set(native["collectives"]) == {"gather"}
        assert set(native["collectives"]["gather"]["parameters"]) == {"eager_s", "rendezvous_s", "byte_s"}
        # At the calibration's link scale and on links five times faster (a gather's verify scale).
        assert [(m["collective"], m["bytes"], m["scale"]) for m in native["measurements"]] == [
            ("gather", b, scale) for scale in (0.1, 0.5) for b in calibration.NATIVE_SIZES]
        assert all(m["measured_s"] > 0 and m["predicted_s"] >= m["model_s"] > 0 for m in native["measurements"])
    # The file predicts for the fabric it was measured on, and no other.
    routes = routing.route(star, "updown")
    sched = traffic.concurrent(star, "gather", 10_000, root=0)
    assert netweave.flowsim.simulate(routes, sched, executor="dag", calibration=out)["makespan_s"] > 0
    deep = star.with_switching("ethernet", 1 << 20)
    with pytest.raises(netweave.NetweaveError, match="port buffer"):
        netweave.flowsim.simulate(routing.route(deep, "updown"), sched, executor="dag", calibration=out)
