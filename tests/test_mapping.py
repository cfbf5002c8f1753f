"""Rank mapping: patterns, costs, baselines, BISEM, annealing, map files and the `map` CLI."""

import json
import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netweave
from conftest import BIN, run_cli
from netweave import mapping
from netweave._core import NetweaveError


@pytest.fixture(scope="module")
def torus444():
    topo = netweave.topology.torus([4, 4, 4])
    routes = netweave.routing.route(topo, "dor", select="low-port")
    return topo, routes, mapping.MapNetwork(routes)


@pytest.fixture(scope="module")
def files(tmp_path_factory, torus444):
    topo, routes, _ = torus444
    d = tmp_path_factory.mktemp("map")
    netweave.topology.save(topo, d / "torus.json")
    netweave.routing.save(routes, d / "routes.json")
    return d


def test_pattern_generators_and_totals():
    p = mapping.load_pattern("bruck:64:2048")
    assert (p.num_ranks, p.num_messages, p.total_bytes) == (64, 6 * 64, 64 * 2048 * 63)
    assert mapping.load_pattern("stencil:4x4x4").num_messages == 64 * 6
    assert mapping.load_pattern("stencil:4x4:100:open").num_messages == 48
    a = mapping.load_pattern("random:32:3:10:7").arrays()
    b = mapping.load_pattern("random:32:3:10:7").arrays()
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    with pytest.raises(NetweaveError):
        mapping.load_pattern("nonsense:4")
    with pytest.raises(NetweaveError):
        mapping.load_pattern("bruck:1")


def test_pattern_files_round_trip(tmp_path):
    p = mapping.load_pattern("random:20:2:123:1")
    for name in ("p.csv", "p.json"):
        mapping.save_pattern(p, tmp_path / name)
        q = mapping.load_pattern(tmp_path / name)
        assert q.num_ranks == p.num_ranks
        assert all(np.array_equal(x, y) for x, y in zip(p.arrays(), q.arrays()))
    # The trace format: time src dst bytes, repeated pairs summed.
    (tmp_path / "t.trace").write_text("# num_ranks 4\n0.0 0 1 10\n5e-6 0 1 5\n7 3 2 1\n")
    t = mapping.load_pattern(tmp_path / "t.trace")
    assert t.num_ranks == 4
    assert [x.tolist() for x in t.arrays()] == [[0, 3], [1, 2], [15, 1]]


def test_schedule_aggregates_into_a_pattern(tmp_path):
    s = netweave._core.Schedule("two phases", 3, [[(0, 1, 5), (1, 2, 7)], [(0, 1, 5)]])
    p = mapping.Pattern.from_schedule(s)
    assert [x.tolist() for x in p.arrays()] == [[0, 1], [1, 2], [10, 7]]
    # Schedule files (JSON and NWSCHED) are patterns too.
    a2a = netweave.traffic.alltoall(6, 100)
    for name in ("a2a.json", "a2a.nws"):
        netweave.traffic.save(a2a, tmp_path / name)
        q = mapping.load_pattern(tmp_path / name)
        assert (q.num_ranks, q.num_messages, q.total_bytes) == (6, 30, 3000)


@pytest.mark.parametrize("text,fmt,err", [
    ("0,1\n", "csv", "line 1"),
    ("src,dst,bytes\n0,x,3\n", "csv", "line 2"),
    ('{"messages": 3}', "json", "messages"),
    ("0 1 2\n", "trace", "line 1"),
])
def test_bad_pattern_files(text, fmt, err):
    with pytest.raises(NetweaveError, match=err):
        mapping.parse_pattern_text(text, fmt)


def test_pattern_naming_missing_ranks_is_refused():
    with pytest.raises(NetweaveError, match="rank 9"):
        mapping.parse_pattern_text("# num_ranks=4\n0,9,1\n", "csv")


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from(["identity", "random", "hilbert", "peano", "greedy", "bit-reversal"]))
def test_baselines_are_placements(seed, kind):
    topo = netweave.topology.torus([4, 4, 2])
    net = mapping.MapNetwork(netweave.routing.route(topo, "dor"), 2)
    p = mapping.Pattern.random(50, 3, 100, seed)
    hor = mapping.baseline(net, p, kind, seed)
    assert len(hor) == 50
    assert np.bincount(hor, minlength=net.num_hosts).max() <= 2


def test_costs_match_a_python_recount(torus444):
    topo, routes, net = torus444
    p = mapping.Pattern.random(64, 3, 1000, 5)
    hor = mapping.baseline(net, p, "random", 1)
    loads = np.zeros(2 * topo.num_links, dtype=np.int64)
    hops = hop_bytes = 0
    switch_channels = 0
    for s, d, b in zip(*(x.tolist() for x in p.arrays())):
        path = routes.path(int(hor[s]), int(hor[d]))
        for c in path:
            loads[c] += b
        h = max(len(path) - 2, 0)
        hops += h
        hop_bytes += h * b
        switch_channels += h
    figs = mapping.cost(net, p, hor)
    assert figs["sum_hops"] == hops and figs["hop_bytes"] == hop_bytes
    assert figs["max_channel_bytes"] == loads.max()
    assert figs["hops_x_max_channel"] == hops * loads.max()
    assert np.array_equal(mapping.channel_loads(net, p, hor), loads)


def test_bisem_and_annealing_improve_bruck(torus444):
    _, _, net = torus444
    p = mapping.Pattern.bruck(64, 2048)
    b = mapping.bisem(net, p, seed=1)
    assert b["axes"] == [0, 1, 2]
    assert b["group_sizes"] == [8] * 8
    full = mapping.bisem(net, p, levels=64, seed=1)
    assert full["group_sizes"] == [1] * 64 and full["axes"] == [0, 1, 2] * 2
    best = mapping.start_placement(net, p, "best", 1, "hops_x_max_channel")
    candidates = [mapping.start_placement(net, p, k, 1) for k in ("bisem", "bisem-full", "identity", "greedy")]
    assert mapping.cost(net, p, best)["hops_x_max_channel"] <= min(mapping.cost(net, p, c)["hops_x_max_channel"] for c in candidates)
    start = mapping.cost(net, p, b["host_of_rank"])
    res = mapping.optimize(net, p, b["host_of_rank"], seconds=None, evaluations=20_000, seed=2, replicas=2, sweep=500)
    assert res.figures == mapping.cost(net, p, res.host_of_rank)
    assert res.value == res.figures["hops_x_max_channel"] < start["hops_x_max_channel"]
    again = mapping.optimize(net, p, b["host_of_rank"], seconds=None, evaluations=20_000, seed=2, replicas=2, sweep=500)
    assert np.array_equal(res.host_of_rank, again.host_of_rank)
    assert res.stopped_by == "evaluations"
    target = mapping.optimize(net, p, b["host_of_rank"], seconds=30, target=start["hops_x_max_channel"] - 1, seed=3, sweep=100)
    assert target.stopped_by == "target"


def test_map_files_round_trip(torus444, tmp_path):
    _, _, net = torus444
    p = mapping.Pattern.bruck(64, 2048)
    hor = mapping.baseline(net, p, "random", 4)
    for fmt in ("json", "rankfile", "vcoord"):
        mapping.write_map(net, hor, tmp_path / f"m.{fmt}", fmt)
        assert np.array_equal(mapping.read_map(net, tmp_path / f"m.{fmt}", fmt), hor)
    rankfile = (tmp_path / "m.rankfile").read_text().splitlines()
    assert rankfile[0] == f"rank 0={mapping._hostname(net.host_label(int(hor[0])))} slot=0"
    vcoord = (tmp_path / "m.vcoord").read_text().splitlines()
    assert len(vcoord) == 64 and vcoord[0] == "(" + ",".join(map(str, net.host_coords(int(hor[0])))) + ")"
    order = mapping.format_map(net, hor, "mpich").splitlines()[1:]
    ranks = [int(r) for line in order for r in line.rstrip(",").split(",")]
    assert sorted(ranks) == list(range(64))
    assert [int(hor[r]) for r in ranks] == sorted(hor.tolist())


def test_several_ranks_per_host_in_a_rankfile():
    topo = netweave.topology.torus([2, 2])
    net = mapping.MapNetwork(netweave.routing.route(topo, "dor"), 3)
    hor = np.array([0, 0, 1, 0, 3], dtype=np.uint32)
    lines = mapping.format_map(net, hor, "rankfile").splitlines()
    assert [line.split()[-1] for line in lines] == ["slot=0", "slot=1", "slot=0", "slot=2", "slot=0"]


def test_cli_map_end_to_end(files, tmp_path):
    out = tmp_path / "bruck.rankfile"
    proc = run_cli("map", str(files / "torus.json"), str(files / "routes.json"), "bruck:64:2048",
                   "--evals", "20000", "--seed", "1", "-o", str(out), "--json", "--plots", str(tmp_path))
    summary = json.loads(proc.stdout)
    assert summary["result"]["hops_x_max_channel"] <= min(summary["identity"]["hops_x_max_channel"], summary["start"]["hops_x_max_channel"])
    assert summary["stopped_by"] == "evaluations"
    assert len(out.read_text().splitlines()) == 64
    for png in ("cost_vs_time.png", "link_load_histogram.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    again = tmp_path / "again.rankfile"
    run_cli("map", str(files / "torus.json"), str(files / "routes.json"), "bruck:64:2048",
            "--evals", "20000", "--seed", "1", "-o", str(again))
    assert again.read_text() == out.read_text()


def test_cli_map_with_a_pattern_file_and_engine_name(files, tmp_path):
    p = tmp_path / "p.csv"
    p.write_text("src,dst,bytes\n0,5,100\n5,9,100\n9,0,50\n3,4,10\n")
    out = tmp_path / "m.vcoord"
    run_cli("map", str(files / "torus.json"), "dor", str(p), "--evals", "2000", "--start", "greedy",
            "--format", "vcoord", "-o", str(out), "--ranks", "12")
    assert len(out.read_text().splitlines()) == 12


def test_descent_moves_ranks_beside_their_partners(files, tmp_path):
    # A ring of 64 ranks, numbered at random, on the 4x4x4 torus: a placement with every
    # message one hop exists (the ring snakes through the torus), so hop-bytes can reach
    # 64 x 63 x 100 (ring: (n - 1) x bytes per message).
    topo = netweave.topology.torus([4, 4, 4])
    net = mapping.network(topo, "dor")
    ring = mapping.Pattern.ring(64, 100)
    start = mapping.baseline(net, ring, "random", 7)
    d = mapping.descend(net, ring, start)
    assert d["hop_bytes"] == mapping.cost(net, ring, d["host_of_rank"])["hop_bytes"]
    assert 64 * 63 * 100 <= d["hop_bytes"] < mapping.cost(net, ring, start)["hop_bytes"]
    assert sorted(d["host_of_rank"].tolist()) == list(range(64))
    assert mapping.descend(net, ring, start, max_evaluations=3)["evaluations"] <= 3
    # The CLI descends from its start before annealing on hop-bytes.
    out = tmp_path / "ring.json"
    proc = run_cli("map", str(files / "torus.json"), "dor", "ring:64:100", "--cost", "hop-bytes", "--evals", "3000",
                   "--start", "random", "--format", "json", "-o", str(out), "--json")
    result = json.loads(proc.stdout)
    placed = mapping.read_map(net, out, "json")
    random_start = mapping.cost(net, ring, mapping.baseline(net, ring, "random", 0))["hop_bytes"]
    assert result["start"]["hop_bytes"] < random_start
    assert result["result"]["hop_bytes"] == mapping.cost(net, ring, placed)["hop_bytes"] <= result["start"]["hop_bytes"]


@pytest.mark.parametrize("args,message", [
    (["bruck:128"], "128 ranks do not fit 64 host slots"),
    (["PFILE", "--ranks", "4"], "names rank 9"),
    (["bruck:64", "--shape", "8x8x8"], "does not match the topology, a 4x4x4 torus"),
    (["bruck:64", "--format", "svg"], "unknown --format"),
    (["bruck:64", "--cost", "latency"], "unknown cost"),
])
def test_cli_map_bad_input(files, tmp_path, args, message):
    pfile = tmp_path / "bad.csv"
    pfile.write_text("0,9,100\n")
    args = [str(pfile) if a == "PFILE" else a for a in args]
    proc = run_cli("map", str(files / "torus.json"), str(files / "routes.json"), *args, "--evals", "100", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def _mpirun():
    exe = shutil.which("mpirun")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return None
    return exe


@pytest.mark.skipif(_mpirun() is None, reason="Open MPI and mpi4py are installed by `make test`")
def test_cli_map_under_mpirun(files, tmp_path):
    out = tmp_path / "mpi.json"
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "COLUMNS": "200"}
    cmd = [_mpirun(), "-n", "2", "--oversubscribe", str(BIN / "netweave"), "map", str(files / "torus.json"),
           str(files / "routes.json"), "bruck:64:2048", "--mpi", "--evals", "20000", "--replicas", "1",
           "--seed", "3", "--format", "json", "-o", str(out), "--json", "--cost", "rmatt"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    # The earlier cost name is said once for the job, not once per process.
    assert sum("deprecated" in line for line in proc.stderr.splitlines()) == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["processes"] == 2
    assert summary["result"]["hops_x_max_channel"] <= min(summary["identity"]["hops_x_max_channel"], summary["start"]["hops_x_max_channel"])
    doc = json.loads(out.read_text())
    assert sorted(doc["host_of_rank"]) == list(range(64))
    assert doc["figures"] == summary["result"]


def test_raw_bindings_warn_of_earlier_cost_names(capsys):
    """`_core` called directly still reads an earlier name, with a DeprecationWarning; today's
    names and a quiet wrapper call say nothing."""
    with pytest.warns(DeprecationWarning, match="rmatt.*hops_x_max_channel"):
        weights = netweave._core.parse_cost("rmatt")
    assert weights == netweave._core.parse_cost("hops_x_max_channel")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        netweave._core.parse_cost("hop_bytes+2*max_channel_bytes")
    assert mapping.canonical_cost("max-link", announce=False) == "max_channel_bytes"
    assert "deprecated" not in capsys.readouterr().err


@pytest.mark.parametrize("dims,torus,select", [
    ([4, 3], True, "low-port"), ([4, 2, 3], True, "per-destination"), ([3, 4], False, "low-port"),
])
def test_lattice_route_source_matches_the_dor_table(dims, torus, select):
    topo = netweave.topology.torus(dims, 2) if torus else netweave.topology.mesh(dims, 2)
    lattice = mapping.network(topo, f"dor:{select}")
    table = mapping.MapNetwork(netweave.routing.route(topo, "dor", select=select))
    assert (lattice.route_source, table.route_source) == ("lattice", "table")
    hosts = lattice.num_hosts
    assert all(lattice.hops(s, d) == table.hops(s, d) for s in range(hosts) for d in range(hosts))
    pattern = mapping.Pattern.random(hosts, 3, 1000, 5)
    for seed in range(3):
        hor = mapping.baseline(table, pattern, "random", seed=seed)
        assert mapping.cost(lattice, pattern, hor) == mapping.cost(table, pattern, hor)
        assert np.array_equal(mapping.channel_loads(lattice, pattern, hor), mapping.channel_loads(table, pattern, hor))
    # Other engines and ties keep the table.
    assert mapping.network(topo, "dor:balanced").route_source == "table"
    assert mapping.network(topo, "minhop").route_source == "table"


def test_lattice_route_source_refuses_other_families():
    with pytest.raises(NetweaveError, match="torus or mesh"):
        mapping.MapNetwork.dor(netweave.topology.fat_tree(4, 2))


def test_cli_map_dor_engine_on_a_torus_builds_no_table(files, tmp_path):
    out = tmp_path / "m.json"
    proc = run_cli("map", str(files / "torus.json"), "dor", "bruck:64:2048", "--evals", "3000", "--seed", "2",
                   "--format", "json", "-o", str(out), "--json")
    summary = json.loads(proc.stdout)
    via_table = json.loads(run_cli("map", str(files / "torus.json"), str(files / "routes.json"), "bruck:64:2048",
                                   "--evals", "3000", "--seed", "2", "--json").stdout)
    # Same routes, so the same seeded run gives the same figures.
    assert summary["result"] == via_table["result"] and summary["identity"] == via_table["identity"]
    assert sorted(json.loads(out.read_text())["host_of_rank"]) == list(range(64))


def test_step_max_channel_bytes_is_the_sum_of_each_steps_bottleneck(torus444):
    _, _, net = torus444
    p = mapping.Pattern.bruck(64, 2048)
    for seed in range(3):
        hor = mapping.baseline(net, p, "random", seed=seed)
        expected, k = 0, 1
        while k < 64:
            src = np.arange(64, dtype=np.uint32)
            step = mapping.Pattern.from_arrays(64, src, (src + 64 - k) % 64, np.full(64, 2048 * k, dtype=np.uint64))
            expected += int(mapping.channel_loads(net, step, hor).max())
            k *= 2
        assert mapping.cost(net, p, hor)["step_max_channel_bytes"] == expected
    figures = {"hop_bytes": 0, "max_channel_bytes": 0, "hops_x_max_channel": 0, "step_max_channel_bytes": 5}
    assert mapping.objective_value("2*step_max_channel_bytes", figures) == 10


def test_recursive_cubes_beat_identity_on_the_step_bottleneck():
    from netweave.reproduce import rmatt

    topo = netweave.topology.torus([4, 4, 4])
    net = mapping.network(topo, "dor")
    hor = rmatt.recursive_cube_placement(4)
    assert sorted(hor.tolist()) == list(range(64))
    identity = mapping.baseline(net, mapping.Pattern.bruck(64, 2048), "identity")
    assert rmatt.step_bottleneck_ms(net, 64, hor) < rmatt.step_bottleneck_ms(net, 64, identity)
    assert rmatt.injection_bound_ms(4096) == pytest.approx(4095 * 2048 / 5e9 * 1e3 + 12 * 2 * 120e-6)
    with pytest.raises(ValueError, match="power-of-two"):
        rmatt.recursive_cube_placement(6)


def test_cli_map_step_max_channel_bytes_cost(files):
    proc = run_cli("map", str(files / "torus.json"), "dor", "bruck:64:2048", "--cost", "step_max_channel_bytes",
                   "--evals", "4000", "--seed", "1", "--json")
    summary = json.loads(proc.stdout)
    assert summary["result"]["step_max_channel_bytes"] <= summary["start"]["step_max_channel_bytes"]
    assert summary["value"] == summary["result"]["step_max_channel_bytes"]
    assert "deprecated" not in proc.stderr


def test_cli_map_reads_earlier_cost_names_with_one_deprecation_line(files):
    """The earlier names still work, say so once on stderr, and are never printed."""
    proc = run_cli("map", str(files / "torus.json"), "dor", "bruck:64:2048", "--cost", "rmatt+1e8*step-max-link",
                   "--evals", "2000", "--seed", "1", "--json")
    summary = json.loads(proc.stdout)
    assert summary["cost"] == "hops_x_max_channel+1e8*step_max_channel_bytes"
    lines = [line for line in proc.stderr.splitlines() if "deprecated" in line]
    assert len(lines) == 1 and "rmatt" in lines[0] and "step-max-link" in lines[0], proc.stderr
    for old in ("rmatt", "max_link", "step_max_link", '"hops"'):
        assert old not in proc.stdout
    assert set(summary["result"]) == {"sum_hops", "hop_bytes", "max_channel_bytes", "hops_x_max_channel",
                                      "step_max_channel_bytes"}
