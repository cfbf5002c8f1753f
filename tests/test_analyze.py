"""Analysis engine through the Python API, and `netweave analyze` end to end."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netweave
from conftest import run_cli
from netweave import _core, analysis, routing, topology


def _bruck_pattern(ranks: int) -> _core.Schedule:
    """Paper 003's evaluation pattern: in step k rank i sends 2048·2^k bytes to (i − 2^k) mod N."""
    phases = []
    k = 0
    while (1 << k) < ranks:
        phases.append([(i, (i - (1 << k)) % ranks, 2048 << k) for i in range(ranks)])
        k += 1
    return _core.Schedule("bruck-pattern", ranks, phases)


def test_paper_003_cost_terms_on_the_16_cubed_torus():
    # Extraction §10, D1: identity map, dimension-order routing with ties to the + direction.
    topo = topology.torus([16, 16, 16])
    routes = routing.route(topo, "dor", select="low-port")
    report = analysis.analyze(routes, _bruck_pattern(4096))
    assert report["flows"] == 49_152
    assert report["bytes"] == 34_351_349_760
    assert report["sum_hops"] == 192_240
    assert report["hop_bytes"] == 195_418_030_080
    assert report["max_channel_bytes"] == 33_554_432
    assert report["hops_x_max_channel"] == 6_450_504_007_680
    assert "max_link_bytes" not in report and "hops_x_max_link" not in report
    assert report["complete"]  # custom traffic claims nothing


def test_shift_on_lsft_is_complete_and_contended_with_listed_links():
    topo = topology.latin_square_fat_tree(3)
    routes = routing.route(topo, "lsft")
    n = topo.num_hosts
    report = analysis.analyze(routes, _core.shift_alltoall(n, 1 << 20), max_links=5)
    assert report["complete"] and report["problem"] is None
    assert report["permutation_phases"] == n - 1
    assert report["flows"] == n * (n - 1)
    assert report["max_congestion"] > 1 and 0 < report["throughput_ratio"] < 1
    links = report["contended_links"]
    assert 0 < len(links) <= 5
    assert [link["max_load"] for link in links] == sorted((link["max_load"] for link in links), reverse=True)
    assert links[0]["max_load"] == report["max_congestion"]
    # A listed channel names its end nodes.
    assert topo.label(links[0]["from"]) == links[0]["from_label"]
    assert topo.label(links[0]["to"]) == links[0]["to_label"]
    # Equal sizes, equal bandwidths: every phase lasts max_load messages on a switch link, or
    # one message on the host links when no switch link is shared.
    message_s = (1 << 20) * 8 / 100e9
    for p in report["phases"]:
        assert p["fluid_time_host_links_s"] == pytest.approx(max(p["max_load"], 1) * message_s)
    assert report["fluid_time_s"] <= report["fluid_time_host_links_s"]


def test_latency_options_add_time():
    topo = topology.latin_square_fat_tree(2)
    routes = routing.route(topo, "lsft")
    sched = _core.shift_alltoall(topo.num_hosts, 1000)
    pure = analysis.analyze(routes, sched)
    slow = analysis.analyze(routes, sched, hop_latency_s=1e-6)
    # Every phase has an off-leaf flow: 4 links (host, up, down, host) at 1 µs each.
    assert slow["fluid_time_s"] == pytest.approx(pure["fluid_time_s"] + 4e-6 * len(pure["phases"]))
    with pytest.raises(netweave.NetweaveError, match="latency"):
        analysis.analyze(routes, sched, hop_latency_s=-1.0)


def test_schedule_that_does_not_fit_is_refused():
    topo = topology.latin_square_fat_tree(2)
    routes = routing.route(topo, "lsft")
    with pytest.raises(netweave.NetweaveError, match="host"):
        analysis.analyze(routes, _core.shift_alltoall(topo.num_hosts + 1, 8))


@settings(max_examples=30, deadline=None)
@given(
    ranks=st.integers(2, 21),
    drop=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=4),
    dup=st.booleans(),
)
def test_completeness_counts_missing_and_repeated_pairs(ranks, drop, dup):
    topo = topology.latin_square_fat_tree(2)  # 21 hosts
    routes = routing.route(topo, "lsft")
    phases = [[(s, (s + i) % ranks, 4) for s in range(ranks)] for i in range(1, ranks)]
    dropped = set()
    for p, m in drop:
        p %= len(phases)
        if phases[p]:
            dropped.add(phases[p].pop(m % len(phases[p]))[:2])
    if dup:
        phases.append([(0, 1, 4)])
    report = analysis.analyze(routes, _core.Schedule("edited", ranks, phases, collective="alltoall"))
    c = report["completeness"]
    assert c["missing"] == len(dropped) - (1 if dup and (0, 1) in dropped else 0)
    assert c["duplicated"] == (1 if dup and (0, 1) not in dropped else 0)
    assert report["complete"] == (c["missing"] == 0 and c["duplicated"] == 0)
    assert report["flows"] == sum(len(p) for p in phases)


@pytest.fixture(scope="module")
def lsft_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("analyze")
    run_cli("topo", "lsft", "--order", "2", "-o", str(d / "t.json"))
    run_cli("route", "lsft", str(d / "t.json"), "-o", str(d / "r.json"))
    for algo in ("shift", "linear"):
        run_cli("schedule", "alltoall", str(d / "t.json"), "--algo", algo, "-o", str(d / f"{algo}.json"))
    run_cli("schedule", "alltoall", str(d / "t.json"), "--algo", "bruck", "-o", str(d / "bruck.nws"))
    return d


def test_analyze_cli_json_matches_the_api(lsft_files):
    d = lsft_files
    data = json.loads(run_cli("analyze", str(d / "t.json"), str(d / "r.json"), str(d / "shift.json"), "--json").stdout)
    for key in ("complete", "max_congestion", "throughput_ratio", "phases", "fluid_time_s", "hop_bytes",
                "max_channel_bytes", "hops_x_max_channel", "contended_links"):
        assert key in data
    assert data["complete"] and data["schedule"]["phases"] == 20 == len(data["phases"])
    topo = topology.load(d / "t.json")
    api = analysis.analyze(routing.load(topo, d / "r.json"), netweave.traffic.load(d / "shift.json"), max_links=10)
    assert data["throughput_ratio"] == api["throughput_ratio"]
    assert data["contended_links"] == api["contended_links"]
    text = run_cli("analyze", str(d / "t.json"), str(d / "r.json"), str(d / "bruck.nws")).stdout
    assert "complete" in text and "throughput ratio" in text and "fluid time" in text


def test_analyze_cli_ranks_schedules(lsft_files):
    # Linear all-to-all funnels every rank into one receiver per phase: far slower than shift.
    d = lsft_files
    times = {
        algo: json.loads(run_cli("analyze", str(d / "t.json"), str(d / "r.json"), str(d / f"{algo}.json"), "--json").stdout)
        for algo in ("shift", "linear")
    }
    assert times["linear"]["fluid_time_host_links_s"] > 5 * times["shift"]["fluid_time_host_links_s"]


def test_analyze_cli_bad_input_is_one_line(lsft_files, tmp_path):
    d = lsft_files
    run_cli("topo", "lsft", "--order", "3", "-o", str(tmp_path / "big.json"))
    cases = [
        # routes computed for another fabric
        (str(tmp_path / "big.json"), str(d / "r.json"), str(d / "shift.json")),
        # a missing schedule file
        (str(d / "t.json"), str(d / "r.json"), str(tmp_path / "none.json")),
        # a schedule file that is not one
        (str(d / "t.json"), str(d / "r.json"), str(d / "t.json")),
    ]
    for args in cases:
        proc = run_cli("analyze", *args, check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    # A schedule for more ranks than the fabric has hosts.
    run_cli("schedule", "alltoall", str(tmp_path / "big.json"), "--algo", "shift", "-o", str(tmp_path / "big-shift.json"))
    proc = run_cli("analyze", str(d / "t.json"), str(d / "r.json"), str(tmp_path / "big-shift.json"), check=False)
    assert proc.returncode == 2 and "host" in proc.stderr and proc.stderr.count("\n") == 1
    proc = run_cli("analyze", str(d / "t.json"), str(d / "r.json"), str(d / "shift.json"), "--hop-latency", "-1", check=False)
    assert proc.returncode == 2
