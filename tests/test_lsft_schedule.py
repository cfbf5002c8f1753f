"""Latin-square fat-tree all-to-all schedules (paper 000) and `netweave reproduce lsft`."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from netweave import NetweaveError, routing, topology, traffic
from netweave.reproduce.lsft import PAPER_TABLE1, PAPER_TABLE3

PRIME_POWERS = (2, 3, 4, 5, 7)
_ROUTED: dict = {}


def routed(order: int):
    """LSFT of `order` with its unique-path routing (cached: hypothesis reuses them)."""
    if order not in _ROUTED:
        t = topology.latin_square_fat_tree(order)
        _ROUTED[order] = (t, routing.route(t, "lsft"))
    return _ROUTED[order]


def assert_all_pairs_once(dest: np.ndarray) -> None:
    n = dest.shape[1]
    assert dest.shape == (n, n)
    for row in dest:
        assert sorted(row.tolist()) == list(range(n)), "each phase is a permutation"
    for src in range(n):
        assert sorted(dest[:, src].tolist()) == list(range(n)), "each ordered pair exactly once"


def test_paper_tables_1_and_3_under_both_rules():
    assert traffic.lsft_vector_table(3, 2, 2) == PAPER_TABLE1
    paper = np.array(PAPER_TABLE3)
    assert paper[0, 0] == 4 and paper[10, 11] == 1  # spot cells of the printed table
    table3 = traffic.lsft_partial_destinations(3, 2, 2, "paper-table3")
    assert (table3 == paper).all()
    text = traffic.lsft_partial_destinations(3, 2, 2, "text")
    differ = {(int(t) // 2, int(s)) for t, s in np.argwhere(text != paper)}
    assert differ == {(g, s) for g in (0, 5) for s in (3, 7, 11)} | {(g, s) for g in (3, 4) for s in (2, 6, 10)}
    assert text[0].tolist() == [4, 11, 6, 5, 8, 3, 10, 9, 0, 7, 2, 1]
    for dest in (text, table3):
        assert_all_pairs_once(dest)


def test_full_system_schedule_is_complete_and_contention_free():
    assert len(traffic.lsft_triples(3)) == 52
    assert traffic.lsft_triples(2)[:3] == [(0, 0, 0), (0, 1, 0), (0, 1, 1)]
    assert_all_pairs_once(traffic.lsft_full_destinations(3))
    topo, routes = routed(3)
    rep = routes.analyze(traffic.lsft_alltoall(topo, 1 << 10))
    assert (rep["max_congestion"], rep["throughput_ratio"]) == (1, 1.0)
    shift = routes.analyze(traffic.alltoall(52, 1 << 10))
    assert shift["max_congestion"] > 1 and shift["throughput_ratio"] < 0.6


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PRIME_POWERS), st.data())
def test_sub_cluster_text_rule_is_contention_free(order, data):
    k = data.draw(st.integers(1, order), label="k")
    m = data.draw(st.integers(1, k), label="m")
    rank_order = data.draw(st.sampled_from(traffic.LSFT_RANK_ORDERS), label="rank_order")
    assert_all_pairs_once(traffic.lsft_partial_destinations(order, k, m, "text", rank_order))
    topo, routes = routed(order)
    sched = traffic.lsft_partial_alltoall(topo, k, m, 64, rank_order=rank_order)
    assert sched.num_ranks == order * k * m
    rep = routes.analyze(sched)
    assert rep["flows"] == sched.num_ranks * (sched.num_ranks - 1)
    assert (rep["max_congestion"], rep["throughput_ratio"]) == (1, 1.0)


def test_allocation_is_the_rectangle_in_rank_order():
    topo, _ = routed(3)
    hosts = traffic.lsft_allocation(topo, 2, 2)
    assert len(hosts) == 12 and len(set(hosts.tolist())) == 12
    # Host index = leaf position · 4 + slot; P(x, y) is leaf 4 + 3x + y for n = 3.
    expect = [(4 + 3 * x + y) * 4 + j for y in range(3) for x in range(2) for j in range(2)]
    assert hosts.tolist() == expect
    col = traffic.lsft_allocation(topo, 2, 2, "column-major")
    assert col.tolist() == [(4 + 3 * x + y) * 4 + j for x in range(2) for y in range(3) for j in range(2)]
    sched = traffic.lsft_partial_alltoall(topo, 2, 2, 64)
    assert sched.placement.tolist() == expect


@pytest.mark.parametrize(
    "order,k,m,needle",
    [(5, 2, 3, "m must not exceed k"), (3, 4, 2, "k must not exceed the order"), (3, 2, 2, None)],
)
def test_bad_sub_clusters_are_rejected(order, k, m, needle):
    topo, _ = routed(order)
    if needle is None:
        with pytest.raises(NetweaveError, match="unknown move rule"):
            traffic.lsft_partial_alltoall(topo, k, m, 64, rule="table4")
        return
    with pytest.raises(NetweaveError, match=needle):
        traffic.lsft_partial_alltoall(topo, k, m, 64)


def test_non_lsft_and_reduced_topologies_are_rejected():
    with pytest.raises(NetweaveError, match="not a prime power"):
        traffic.lsft_partial_destinations(6, 2, 2)
    with pytest.raises(NetweaveError, match="not an lsft"):
        traffic.lsft_alltoall(topology.fat_tree(3, 2, False), 64)
    with pytest.raises(NetweaveError, match="reduced"):
        traffic.lsft_alltoall(topology.latin_square_fat_tree(3, reduced=True), 64)


def test_reproduce_lsft_quick(tmp_path):
    out = tmp_path / "repro"
    result = json.loads(run_cli("reproduce", "lsft", "--out", str(out), "--quick", "--json").stdout)
    assert result["table1_matching_cells"] == 12 and result["table2_match"]
    assert result["table3_matching_cells"] == {"text": 120, "paper-table3": 144}
    fig17 = result["fig17"]
    for name in ("S1", "S2", "S3"):
        assert fig17[f"{name} proposed"] == 1.0 and fig17[f"{name} shift"] < 1.0
    for name in ("S1'", "S2'", "S3'"):
        assert fig17[f"{name} shift"] == 1.0
    fig18 = result["fig18"]
    assert all(v == 1.0 for key, v in fig18.items() if key.endswith("proposed"))
    assert fig18["L3 full shift"] < fig18["L3 50% shift"] < fig18["L3 25% shift"] < 1.0
    assert fig18["L3 75% paper-table3"] == 1.0 and fig18["L2 25% paper-table3"] < 1.0  # k = n is safe, 3 ≤ k < n not
    for name in ("summary.md", "fig17_small_configs.png", "fig18_large_configs.png", "table3_destinations.csv"):
        assert (out / name).stat().st_size > 0
    summary = (out / "summary.md").read_text()
    assert "| `paper-table3` | 144/144 |" in summary and "| `text` | 120/144 |" in summary
    # The same summary as a page, its figures inline (one per PNG in the folder).
    page = (out / "index.html").read_text()
    assert "index.html" in result["files"] and "<table>" in page
    assert page.count("data:image/png;base64,") == len(list(out.glob("*.png"))) >= 3
    bad = run_cli("reproduce", "lsft", "--out", str(out / "summary.md"), check=False)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error:") and len(bad.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def lsft3_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("lsft") / "lsft3.json"
    run_cli("topo", "lsft", "--order", "3", "-o", str(path))
    return path


@pytest.mark.parametrize(
    "args,ranks,rule",
    [
        (["--algo", "lsft"], 52, None),
        (["--algo", "lsft-partial", "--k", "3", "--m", "2"], 18, "text"),
        (["--algo", "lsft-partial", "--k", "2", "--m", "2", "--rule", "paper-table3"], 12, "paper-table3"),
    ],
)
def test_schedule_cli_builds_contention_free_lsft_schedules(tmp_path, lsft3_file, args, ranks, rule):
    out = tmp_path / "sched.nws"
    summary = json.loads(run_cli("schedule", "alltoall", str(lsft3_file), *args, "-o", str(out), "--json").stdout)
    assert summary["ranks"] == ranks and summary["claims_permutation"]
    assert summary["completeness"]["complete"] and summary["completeness"]["permutation"]
    sched = traffic.load(out)
    topo = topology.load(lsft3_file)
    rep = routing.route(topo, "lsft").analyze(sched)
    assert (rep["max_congestion"], rep["throughput_ratio"]) == (1, 1.0)
    if rule is not None:
        k, m = int(args[3]), int(args[5])
        assert sched.placement.tolist() == traffic.lsft_allocation(topo, k, m).tolist()
        assert rule in sched.name


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--algo", "lsft-partial", "--k", "2", "--m", "3"], "m must not exceed k"),
        (["--algo", "lsft-partial", "--k", "4", "--m", "1"], "k must not exceed the order"),
        (["--algo", "lsft-partial", "--k", "2"], "needs --k"),
        (["--algo", "lsft-partial", "--k", "2", "--m", "2", "--rule", "table4"], "unknown move rule"),
        (["--algo", "lsft", "--hosts", "leaf:0-3"], "places its ranks itself"),
        (["--algo", "lsft", "--k", "2"], "does not take --k"),
    ],
)
def test_schedule_cli_rejects_bad_lsft_jobs(lsft3_file, args, needle):
    proc = run_cli("schedule", "alltoall", str(lsft3_file), *args, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], proc.stderr
