"""Flit-level simulator: Python API and `netweave simulate flit` end to end."""

import json
import os
import shutil
import subprocess

import pytest

import netweave
import netweave.flitsim as fs
from conftest import BIN, run_cli

SMALL = {"k": 4, "n": 2, "packet_size": 4, "injection_rate": 0.03, "sample_period": 300}


def write_config(tmp_path, text: str):
    path = tmp_path / "sim.toml"
    path.write_text(text)
    return path


def test_open_loop_run_reports_booksim_statistics():
    r = fs.simulate(SMALL)
    assert r["mode"] == "open_loop"
    assert not r["saturated"]
    # 0.03 packets of 4 flits per host per cycle are all accepted below saturation.
    assert r["accepted_flits"] == pytest.approx(0.12, rel=0.15)
    assert r["packet_latency"]["min"] <= r["packet_latency"]["avg"] <= r["packet_latency"]["max"]
    assert r["network_latency"]["avg"] <= r["packet_latency"]["avg"]


def test_same_seed_same_bytes_other_seed_differs():
    a = json.dumps(fs.simulate(SMALL), sort_keys=True)
    b = json.dumps(fs.simulate(SMALL), sort_keys=True)
    c = json.dumps(fs.simulate({**SMALL, "seed": 9}), sort_keys=True)
    assert a == b
    assert a != c


def test_zero_load_latency_of_one_message_on_a_line():
    # One 1-flit message across 4 routers of a mesh line: 4 cycles per router, 3 links,
    # 3 cycles of host links and retirement (BookSim's zero-load figure).
    sched = netweave._core.Schedule("one", 4, [[(0, 3, 1)]])
    r = fs.simulate({"topology": "mesh", "k": 4, "n": 1, "sim_type": "batch"}, schedule=sched)
    assert r["completion_cycles"] == 4 * 4 + 3 + 3


def test_batch_alltoall_with_routes_from_the_routing_layer():
    topo = netweave.topology.torus([3, 3])
    routes = netweave.routing.route(topo, "dor")
    r = fs.simulate({"sim_type": "batch", "packet_size": 4, "message_flits": 8}, routes=routes)
    assert r["messages"] == 72
    assert r["completion_cycles"] == max(r["host_finish"])


def test_sweep_finds_saturation_in_parallel():
    seen = []
    r = fs.sweep({**SMALL, "topology": "mesh"}, [0.01, 0.3], progress=seen.append)
    assert sorted(seen) == [0, 1]
    assert [p["saturated"] for p in r["points"]] == [False, True]
    assert r["saturation_rate"] == 0.3


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"num_vc": 2}, "unknown config key 'num_vc'"),
        ({"vct": 1, "packet_size": 10, "vc_buf_size": 8}, "virtual cut-through"),
        ({"num_vcs": 1}, "needs 2 VCs"),
        ({"traffic": "zigzag"}, "unknown traffic pattern"),
        ({"injection_rate": 2.0}, "at most 1 packet"),
    ],
)
def test_bad_configs_are_one_line_errors(extra, message):
    with pytest.raises(netweave.NetweaveError, match=message):
        fs.simulate({**SMALL, **extra})


def test_cli_runs_a_toml_config_with_overrides(tmp_path):
    cfg = write_config(tmp_path, 'topology = "torus"\nk = 4\nn = 2\npacket_size = 4\ninjection_rate = 0.02\nsample_period = 300\n')
    out = json.loads(run_cli("simulate", "flit", str(cfg), "--set", "traffic=transpose", "--json").stdout)
    assert out["network"]["hosts"] == 16
    assert out["result"]["mode"] == "open_loop"
    human = run_cli("simulate", "flit", str(cfg)).stdout
    assert "packet latency" in human


def test_cli_sweep(tmp_path):
    cfg = write_config(tmp_path, "k = 4\npacket_size = 4\nsample_period = 300\n")
    out = json.loads(run_cli("simulate", "flit", str(cfg), "--sweep", "injection_rate=0.01,0.02", "--json").stdout)
    assert [p["injection_rate"] for p in out["sweep"]["points"]] == [0.01, 0.02]


def test_cli_threads_give_the_same_result(tmp_path):
    # An 8x8 torus with BookSim's dim_order (ties at distance 4 flip a coin): one, two and three
    # threads stepping its routers give the same statistics, field for field.
    cfg = write_config(tmp_path, 'topology = "torus"\nk = 8\nn = 2\npacket_size = 4\ninjection_rate = 0.03\n'
                                 'sample_period = 400\n')
    runs = [json.loads(run_cli("simulate", "flit", str(cfg), "--threads", t, "--json").stdout)["result"]
            for t in ("1", "2", "3")]
    assert runs[0]["packet_latency"]["count"] > 0
    assert runs[1] == runs[0] and runs[2] == runs[0]
    assert run_cli("simulate", "flit", str(cfg), "--threads", "-1", check=False).returncode == 2


MPIRUN = shutil.which("mpirun")
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1",
           "COLUMNS": "200"}
needs_mpirun = pytest.mark.skipif(MPIRUN is None, reason="Open MPI and mpi4py are installed by `make test`")


def _mpirun(*args: str, np_: int = 3) -> subprocess.CompletedProcess:
    proc = subprocess.run([MPIRUN, "-n", str(np_), "--oversubscribe", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **MPI_ENV})
    assert proc.returncode == 0, proc.stderr
    return proc


@needs_mpirun
def test_a_sweep_under_mpirun_equals_the_local_sweep(tmp_path):
    # Each load is a task of its own on processes 1 and 2; the points, the saturation load
    # and the peak throughput are the local run's, bit for bit (JSON compares exactly).
    cfg = write_config(tmp_path, "k = 4\npacket_size = 4\nsample_period = 300\n")
    sweep = "injection_rate=0.01,0.05,0.1,0.4"
    local = json.loads(run_cli("simulate", "flit", str(cfg), "--sweep", sweep, "--json").stdout)
    spread = json.loads(_mpirun(str(BIN / "netweave"), "simulate", "flit", str(cfg), "--sweep", sweep, "--json").stdout)
    assert spread == local and local["sweep"]["saturation_rate"] == 0.4


@needs_mpirun
def test_tasks_under_mpirun_run_on_the_other_processes(tmp_path):
    script = tmp_path / "who.py"
    script.write_text(
        "import time\nfrom mpi4py import MPI\nfrom netweave.support import parallel\n"
        "def who(i):\n    time.sleep(0.05)\n    return i, MPI.COMM_WORLD.Get_rank()\n"
        "with parallel.spread_over_mpi() as leader:\n"
        "    if leader:\n        print(parallel.run_all(who, [(i,) for i in range(12)]))\n")
    out = eval(_mpirun(str(BIN / "python"), str(script)).stdout)
    assert [i for i, _ in out] == list(range(12))  # in order
    assert {rank for _, rank in out} == {1, 2}  # process 0 hands out, 1 and 2 work


def test_cli_open_loop_deadlock_is_not_called_saturation(tmp_path):
    # A torus on minhop with one VC at a load far past saturation: deadlock, named, exit 2.
    cfg = write_config(tmp_path, 'topology = "torus"\nk = 4\nn = 2\nnum_vcs = 1\nrouting_function = "minhop"\n'
                       'packet_size = 8\nvc_buf_size = 4\ninjection_rate = 0.4\n')
    proc = run_cli("simulate", "flit", str(cfg), "--json", check=False)
    assert proc.returncode == 2 and "deadlock" in proc.stderr and "blocked VCs" in proc.stderr
    assert proc.stdout == ""


def test_cli_deadlock_is_reported_not_hung(tmp_path):
    cfg = write_config(
        tmp_path,
        "k = 8\nn = 1\nnum_vcs = 1\nrouting_function = \"minhop\"\npacket_size = 16\nvc_buf_size = 2\n"
        "sim_type = \"batch\"\nschedule = \"tornado\"\nmessage_flits = 64\ndeadlock_cycles = 200\n",
    )
    proc = run_cli("simulate", "flit", str(cfg), check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "deadlock" in proc.stderr and "blocked" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "text, args, message",
    [
        ("k = 4\nbogus = 1\n", [], "unknown config key 'bogus'"),
        ("k = [\n", [], "sim.toml"),
        ("k = 4\n", ["--set", "nokeyvalue"], "--set expects key=value"),
        ("k = 4\n", ["--sweep", "k=1,2"], "--sweep expects injection_rate"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path, text, args, message):
    cfg = write_config(tmp_path, text)
    proc = run_cli("simulate", "flit", str(cfg), *args, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_cli_batch_with_two_ports_and_local_sync(tmp_path):
    cfg = write_config(
        tmp_path,
        'sim_type = "batch"\nk = 3\npacket_size = 4\nmessage_flits = 8\n'
        'injection_ports = 2\nbatch_sync = "local"\n',
    )
    out = json.loads(run_cli("simulate", "flit", str(cfg), "--json").stdout)["result"]
    assert out["mode"] == "batch"
    assert out["messages"] == 9 * 8
    assert len(out["host_finish"]) == 9
    human = run_cli("simulate", "flit", str(cfg)).stdout
    assert "completion" in human


def test_request_reply_permutation_bandwidth_falls_with_distance():
    # Paper 002's remote-DMA mode: the next transfer waits for the reply, so bandwidth per
    # message falls as the partner gets farther away.
    def bw(schedule):
        return fs.simulate({"topology": "mesh", "k": 4, "n": 2, "sim_type": "batch", "request_reply": 1,
                            "packet_size": 8, "message_flits": 64, "schedule": schedule})["bandwidth_flits_per_cycle"]

    assert bw("neighbor") > bw("bitcomp")


def test_reproduce_a2at_with_the_flit_model(tmp_path):
    out = json.loads(run_cli("reproduce", "a2at", "--model", "flit", "--sides", "5", "--out", str(tmp_path), "--json").stdout)
    assert set(out["files"]) >= {"a2at_flit.csv", "a2at_flit.png", "summary_flit.md"}
    # Paper 001 reports torus A2AT within about 20 % of TV_NCT1; the flit model lands near it.
    assert 0.8 < out["figures"]["S4"] < 1.5
    summary = (tmp_path / "summary_flit.md").read_text()
    assert "S8" in summary and "E4: buffer sweep" in summary
    # E4 (Fig. 6) on the only side run: every buffer with and without local sync, and the
    # paper's trend — without sync larger buffers finish sooner; 2-flit buffers (credits
    # cannot cover the round trip) are the slowest either way.
    rows = json.loads((tmp_path / "result_flit.json").read_text())["rows"]
    e4 = [r for r in rows if r["experiment"] == "E4"]
    assert sorted({r["buffer"] for r in e4}) == [2, 10, 20, 50, 100, 200, 400] and len(e4) == 14
    assert {r["k"] for r in e4} == {5}
    for sync in (False, True):
        by_buffer = {r["buffer"]: r["ratio_tv_nct1"] for r in e4 if r["local_sync"] == sync}
        assert by_buffer[2] == max(by_buffer.values()) and by_buffer[2] > 1.5
        if not sync:
            assert by_buffer[400] < by_buffer[20] < by_buffer[2]
    assert set(out["e4"]["5"]) >= {"crossover", "gap"}
    # E1 (Fig. 3) ran with one VC per destination: all four cases completed, and S1–S3 are
    # reported.
    assert len([r for r in rows if r["experiment"] == "E1"]) == 4
    assert {"S1", "S2", "S3_min", "S3_max"} <= set(out["figures"])
    # E3r differs from E3 only by the shorter pipeline: never slower.
    e3 = {(r["topology"], r["algorithm"]): r["cycles"] for r in rows if r["experiment"] == "E3"}
    e3r = {(r["topology"], r["algorithm"]): r["cycles"] for r in rows if r["experiment"] == "E3r"}
    assert e3.keys() == e3r.keys() and all(e3r[c] <= e3[c] for c in e3)


# The cases every process of an MPI job runs split, and this process runs whole: a torus with
# BookSim's dim_order (coin-flip ties at k = 6), a mesh with the table's DOR, a fat-tree with
# d-mod-k and a dragonfly with Nue, each open-loop and batch.
SPLIT_CASES_SCRIPT = '''
import json, sys
from netweave import flitsim, routing, topology

def cases():
    open_loop = {"injection_rate": 0.03, "packet_size": 4, "sample_period": 300, "max_samples": 4}
    batch = {"sim_type": "batch", "message_flits": 6, "packet_size": 3}
    ft = topology.k_ary_n_tree(4, 2)
    df = topology.dragonfly(4, 2, 2)
    nets = [("torus dim_order", {"topology": "torus", "k": 6, "n": 2, "num_vcs": 2}, None),
            ("mesh dor", {"topology": "mesh", "k": 6, "n": 2, "num_vcs": 2}, None),
            ("fat-tree dmodk", {"num_vcs": 1}, routing.route(ft, "dmodk", vcs=1)),
            ("dragonfly nue", {"num_vcs": 4}, routing.route(df, "nue", vcs=4))]
    for name, net, routes in nets:
        for mode, extra in (("open", open_loop), ("batch", batch)):
            yield f"{name} {mode}", {**net, **extra}, routes

def run(mpi):
    out = {}
    for label, cfg, routes in cases():
        if mpi:
            result, part = flitsim.simulate_mpi(cfg, routes=routes)
            assert part["exchanges"] > 0 and sum(part["routers"]) > 0, part
        else:
            result = flitsim.simulate({**cfg, "threads": 1}, routes=routes)
        out[label] = result
    return out

if __name__ == "__main__":
    mpi = sys.argv[1] == "mpi"
    out = run(mpi)
    if not mpi:
        print(json.dumps(out))
    else:
        from mpi4py import MPI
        every = MPI.COMM_WORLD.gather(out, root=0)
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(json.dumps(every))
'''


@needs_mpirun
def test_a_run_split_over_mpi_ranks_is_the_one_process_run(tmp_path):
    # Every rank of 2 and 3 returns the one-process result, field for field, for all eight cases.
    script = tmp_path / "split.py"
    script.write_text(SPLIT_CASES_SCRIPT)
    whole = json.loads(subprocess.run([str(BIN / "python"), str(script), "one"], capture_output=True, text=True,
                                      check=True, timeout=300).stdout)
    assert len(whole) == 8 and all(r["mode"] == ("batch" if "batch" in k else "open_loop") for k, r in whole.items())
    for ranks in (2, 3):
        every = json.loads(_mpirun(str(BIN / "python"), str(script), "mpi", np_=ranks).stdout)
        assert len(every) == ranks
        for rank, out in enumerate(every):
            for label, result in whole.items():
                assert out[label] == result, f"{label}: rank {rank} of {ranks}"


@needs_mpirun
def test_cli_mpi_run_reports_its_partition_and_the_same_result(tmp_path):
    cfg = write_config(tmp_path, 'topology = "torus"\nk = 8\nn = 2\npacket_size = 4\ninjection_rate = 0.03\n'
                                 'sample_period = 400\n')
    local = json.loads(run_cli("simulate", "flit", str(cfg), "--threads", "1", "--json").stdout)
    split = json.loads(_mpirun(str(BIN / "netweave"), "simulate", "flit", str(cfg), "--mpi", "--json", np_=3).stdout)
    assert split["result"] == local["result"]
    part = split["partition"]
    assert part["ranks"] == 3 and sum(part["routers"]) == 64 and min(part["routers"]) >= 20
    # METIS cuts an 8x8 torus into three with far fewer than the 256 channels a random split cuts
    # two thirds of.
    assert 0 < part["cut_channels"] < 256 // 3 and part["lookahead"] == 1
    assert part["exchanges"] >= local["result"]["cycles"] and part["bytes_sent"] > 0


@needs_mpirun
def test_cli_mpi_run_names_a_deadlock_on_every_rank(tmp_path):
    cfg = write_config(tmp_path, 'topology = "torus"\nk = 4\nn = 2\nnum_vcs = 1\nrouting_function = "minhop"\n'
                       'packet_size = 8\nvc_buf_size = 4\ninjection_rate = 0.4\n')
    one = run_cli("simulate", "flit", str(cfg), "--json", check=False)
    proc = subprocess.run([MPIRUN, "-n", "2", "--oversubscribe", str(BIN / "netweave"), "simulate", "flit", str(cfg),
                           "--mpi", "--json"], capture_output=True, text=True, timeout=300, env={**os.environ, **MPI_ENV})
    assert proc.returncode != 0 and proc.stdout == ""
    # Each rank writes the one-process run's message (mpirun interleaves their lines).
    assert "blocked VCs" in one.stderr and one.stderr.strip() in proc.stderr
