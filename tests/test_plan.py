"""End-to-end: `netweave plan`, the main job."""

import itertools
import json

import networkx as nx
import pytest

import netweave
from conftest import run_cli
from netweave import plan, report, topology
from netweave.plan.result import NativeRow


def test_plan_on_builtin_cluster_reports_contended_shift():
    proc = run_cli("plan")
    assert "lsft(q=3)" in proc.stdout
    assert "throughput ratio" in proc.stdout
    data = json.loads(run_cli("plan", "--json").stdout)
    assert data["topology"]["hosts"] == 52
    shift = data["schedules"][0]
    assert shift["name"] == "shift"
    assert shift["max_congestion"] > 1
    assert 0 < shift["throughput_ratio"] < 1.0
    assert shift["flows"] == 52 * 51


def test_plan_is_deterministic(tmp_path):
    first = run_cli("plan", "--json", "--out", str(tmp_path / "a")).stdout
    second = run_cli("plan", "--json", "--out", str(tmp_path / "b")).stdout
    assert first == second
    for name in ("report.json", "report.md", "phases.csv", "topology.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_plan_accepts_a_topology_file(tmp_path):
    path = tmp_path / "fabric.json"
    run_cli("topo", "fattree", "--degree", "4", "-o", str(path))
    data = json.loads(run_cli("plan", str(path), "--json").stdout)
    assert data["topology"]["hosts"] == 16
    assert data["schedules"][0]["flows"] == 16 * 15


def _reference_ratio(topo) -> float:
    """Paper 000's throughput ratio (self-sends excluded) computed independently with
    networkx: on an LSFT the leaf-spine-leaf path is unique, so shortest paths are the routes."""
    g = topology.to_networkx(topo)
    hosts = [int(h) for h in topo.hosts]
    n = len(hosts)
    path = {}
    for s in hosts:
        for d in hosts:
            if s != d:
                p = nx.shortest_path(g, s, d)
                path[s, d] = list(itertools.pairwise(p))
    total = 0.0
    for i in range(1, n):
        flows = [path[hosts[k], hosts[(k + i) % n]] for k in range(n)]
        load = {}
        for f in flows:
            for e in f:
                load[e] = load.get(e, 0) + 1
        total += sum(1.0 / max(load[e] for e in f) for f in flows)
    return total / (n * (n - 1))


@pytest.mark.parametrize("order", [2, 3])
def test_shift_ratio_matches_independent_reference(order):
    topo = topology.latin_square_fat_tree(order)
    got = plan.plan(topo).schedules[0].throughput_ratio
    assert got == pytest.approx(_reference_ratio(topo), abs=1e-12)


def test_shift_ratio_on_lsft_order_2_matches_extraction_estimate():
    # Extraction §4.1: S1 (LSFT q=2, 21 servers) shift ≈ 0.565 with self-sends counted as 1.
    topo = topology.latin_square_fat_tree(2)
    n = topo.num_hosts
    excl = plan.plan(topo).schedules[0].throughput_ratio
    incl = (n + n * (n - 1) * excl) / (n * n)
    assert incl == pytest.approx(0.565, abs=0.0006)


def test_shift_ratio_on_lsft_order_17_matches_paper():
    # Paper 000 §4.2: shift on L6 (q = 17, 5,526 servers, 30.5 M flows) gives 0.108.
    topo = topology.latin_square_fat_tree(17)
    assert topo.num_hosts == 5526
    routes = topo.route("shortest-path")
    report = routes.analyze(netweave.traffic.alltoall(topo.num_hosts, 1))
    assert report["flows"] == 5526 * 5525
    assert report["throughput_ratio"] == pytest.approx(0.108, abs=0.0005)


def test_plan_picks_a2at_over_shift_on_a_torus(tmp_path):
    # 5x5 torus, DOR: A2AND/A2AT take TV_NCT1 = 40 message times (paper 001), shift 42.
    path = tmp_path / "torus.json"
    run_cli("topo", "torus", "--dims", "5x5", "-o", str(path))
    data = json.loads(run_cli("plan", str(path), "--json").stdout)
    by_name = {s["name"]: s for s in data["schedules"]}
    unit = (1 << 20) * 8 / 100e9
    assert by_name["a2at"]["fluid_time_host_links_s"] == pytest.approx(40 * unit)
    assert by_name["shift"]["fluid_time_host_links_s"] == pytest.approx(42 * unit)
    # netweave's own pick is the lattice schedule; whether the user's MPI beats it is the flow
    # model's call (the report says so either way).
    assert data["ours"]["name"] in ("a2and", "a2at")
    assert data["ours"]["speedup_vs_shift"] == pytest.approx(42 / 40)
    assert "xor" in {s["name"] for s in data["skipped"]}  # 25 ranks: no power of two
    text = run_cli("plan", str(path)).stdout
    assert "skipped" in text and f"ours: {data['ours']['name']}" in text


def test_plan_lists_every_candidate_and_keeps_shift_when_nothing_beats_it():
    data = plan.plan()
    names = [s.name for s in data.schedules] + [s.name for s in data.skipped]
    assert names[0] == "shift"
    assert sorted(names) == sorted(netweave.traffic.algorithms("alltoall"))
    assert all(s.complete for s in data.schedules)
    shift = data.schedules[0]
    ours = data.ours
    assert ours is not None
    fastest = min(r.predicted_time_s for r in [*data.schedules, *data.dag_schedules] if r.name != "concurrent")
    assert ours.predicted_time_s <= fastest * (1 + plan.CONTENTION_FREE_MARGIN)
    assert ours.predicted_time_s <= shift.predicted_time_s * (1 + plan.CONTENTION_FREE_MARGIN)


def test_plan_never_picks_an_unproven_schedule(monkeypatch):
    # A candidate that skips half the pairs looks fast but is no all-to-all: it must lose.
    def half(job):
        n = job.num_ranks
        phases = [[(s, (s + i) % n, job.bytes) for s in range(n)] for i in range(1, n // 2)]
        return netweave._core.Schedule("half", n, phases, collective="alltoall")

    monkeypatch.setitem(netweave.traffic.ALGORITHMS, ("alltoall", "half"),
                        netweave.traffic.Algorithm("alltoall", "half", "incomplete on purpose", half))
    data = plan.plan(topology.latin_square_fat_tree(2))
    by_name = {s.name: s for s in data.schedules}
    assert not by_name["half"].complete
    assert by_name["half"].fluid_time_host_links_s < by_name["shift"].fluid_time_host_links_s
    assert data.best is not None and data.best.name != "half"
    assert "INCOMPLETE" in "\n".join(report.summary_lines(data))


def test_choose_prefers_the_baseline_on_ties_and_contention_free_within_the_margin():
    def s(name, t, free=False, phases=10, complete=True):
        return NativeRow(name=name, predicted_time_s=t, contention_free=free, phases=phases, complete=complete,
                         throughput_per_server_mib_s=0.0, bound_s=0.0, library=name, label=name, algorithm=name,
                         schedule=name, executor="sync", concurrent_sends=1)

    def picked(rows):
        choice = plan.choose(rows)
        return None if choice is None else choice.row.name

    assert picked([s("shift", 1.0), s("a2a", 1.0 - 1e-12)]) == "shift"
    assert picked([s("shift", 1.0), s("fast", 0.5)]) == "fast"
    assert picked([s("shift", 1.0), s("fast", 0.5, complete=False)]) == "shift"
    assert picked([s("shift", 1.0), s("free", 1.0, free=True)]) == "free"
    assert picked([s("shift", 1.0), s("few", 1.0, phases=2)]) == "few"
    assert picked([s("x", 1.0, complete=False)]) is None
    # Within 2 %: the contention-free one, and the reason names the one it displaced.
    pick = plan.choose([s("concurrent", 1.0), s("tree", 1.0 + plan.CONTENTION_FREE_MARGIN * 0.9, free=True)])
    assert pick is not None
    assert pick.row.name == "tree" and "contention-free" in pick.reason and "concurrent" in pick.reason
    # Beyond it: the contended one stays.
    assert picked([s("concurrent", 1.0), s("tree", 1.0 + plan.CONTENTION_FREE_MARGIN * 1.5, free=True)]) == "concurrent"
    # Predicted less than LEVEL_MARGIN faster than an earlier-listed candidate as contention-free
    # and with no more phases: the earlier one stays, and the reason says so.
    inside, beyond = 1.0 / (1 + plan.LEVEL_MARGIN * 0.9), 1.0 / (1 + plan.LEVEL_MARGIN * 1.5)
    pick = plan.choose([s("shift", 1.0, free=True), s("tree", inside, free=True)])
    assert pick is not None and pick.row.name == "shift" and "tree" in pick.reason, pick
    assert picked([s("shift", 1.0, free=True), s("tree", beyond, free=True)]) == "tree"
    assert picked([s("shift", 1.0, free=True, phases=11), s("tree", inside, free=True)]) == "tree"
    assert picked([s("shift", 1.0), s("tree", inside, free=True)]) == "tree"


def test_plan_on_lsft_picks_the_contention_free_lsft_schedule():
    # Paper 000's all-server schedule, once the traffic table has it: proven, ratio exactly
    # 1.0, chosen over shift.
    if ("alltoall", "lsft") not in netweave.traffic.ALGORITHMS:
        pytest.skip("the traffic layer has no LSFT all-to-all")
    data = plan.plan()
    lsft = next(s for s in data.schedules if s.name == "lsft")
    assert lsft.complete and lsft.contention_free and lsft.throughput_ratio == 1.0
    assert data.best is not None and data.best.name == "lsft"
    assert data.best.speedup_vs_shift is not None and data.best.speedup_vs_shift > 1


def _host_list(hosts) -> str:
    return ",".join(str(int(h)) for h in hosts)


@pytest.mark.parametrize("k,m", [(2, 2), (3, 3)])
def test_plan_derives_the_lsft_sub_cluster_and_proves_it(tmp_path, k, m):
    # Paper 000's (n, k, m) job on the LSFT of order 3: the host set alone gives k and m, and
    # the sub-cluster schedule (text rule) is proven, contention-free and faster than shift.
    path = tmp_path / "lsft3.json"
    run_cli("topo", "lsft", "--order", "3", "-o", str(path))
    topo = topology.load(path)
    hosts = [int(h) for h in netweave.traffic.lsft_allocation(topo, k, m)]
    listed = _host_list(reversed(hosts))  # any rank order: the host set decides
    data = json.loads(run_cli("plan", str(path), "--hosts", listed, "--json").stdout)
    assert data["job"]["ranks"] == 3 * k * m
    by_name = {s["name"]: s for s in data["schedules"]}
    part = by_name["lsft-partial"]
    assert part["schedule"].startswith(f"alltoall-lsft-partial(n=3,k={k},m={m},rule=text")
    assert part["complete"] and part["contention_free"] and part["throughput_ratio"] == 1.0
    assert part["flows"] == (3 * k * m) * (3 * k * m - 1)
    assert by_name["shift"]["flows"] == part["flows"]
    assert data["ours"]["predicted_time_s"] <= part["predicted_time_s"] * (1 + 1e-9)
    if by_name["shift"]["max_congestion"] > 1:
        # The pick is contention-free: the sub-cluster schedule, or tree-phased where the
        # routes are unique and its phases pack tighter (measured faster on k = m = 2).
        assert by_name[data["ours"]["name"]]["contention_free"]
        assert data["ours"]["speedup_vs_shift"] > 1
    # The same job through the schedule command, with k and m given: the same analysis.
    sched = tmp_path / "part.json"
    run_cli("schedule", "alltoall", "--algo", "lsft-partial", "--k", str(k), "--m", str(m), str(path), "-o", str(sched))
    routes = tmp_path / "routes.json"
    run_cli("route", data["routing"]["engine"], str(path), "-o", str(routes))
    direct = json.loads(run_cli("analyze", str(path), str(routes), str(sched), "--json").stdout)
    assert direct["max_congestion"] == part["max_congestion"]
    assert direct["fluid_time_host_links_s"] == pytest.approx(part["fluid_time_host_links_s"])


def test_plan_skips_lsft_partial_for_other_jobs_and_rejects_split_leaves():
    topo = topology.latin_square_fat_tree(3)
    # Whole leaves: a valid job, but no n x k x m rectangle.
    data = json.loads(run_cli("plan", "--hosts", "leaf:0-1", "--json").stdout)
    assert data["job"]["ranks"] == 8
    assert "lsft-partial" in {s["name"] for s in data["skipped"]}
    assert "lsft-partial" not in {s["name"] for s in data["schedules"]}
    # The sub-cluster's hosts minus one: part of a leaf, and no sub-cluster either.
    hosts = [int(h) for h in netweave.traffic.lsft_allocation(topo, 2, 2)][:-1]
    proc = run_cli("plan", "--hosts", _host_list(hosts), check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "whole leaves" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_plan_on_a_one_rank_job_is_a_clear_error(tmp_path):
    path = tmp_path / "torus.json"
    run_cli("topo", "torus", "--dims", "3x3", "-o", str(path))
    proc = run_cli("plan", str(path), "--hosts", "4", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "at least 2 ranks" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_plan_offers_paper_004_on_trees_and_says_why_not_elsewhere(tmp_path):
    tree = topology.multi_cluster("a:4,b:4")
    result = plan.plan(tree, bytes_per_pair=32768)
    rows = {s.name: s for s in result.dag_schedules}
    assert set(rows) == {"contention-free", "concurrent"}
    for row in rows.values():
        assert row.tasks == 8 * 7
        # Each host sends 7 x 32 KiB through its 1 Gbit/s link: the flow model cannot beat that.
        assert row.predicted_time_s >= 7 * 32768 / 1.25e8
    groups = rows["contention-free"].groups
    assert groups is not None and groups > 0
    assert "contention-free" in report.to_text(result)
    # Paper 000's fat-tree joins any two leaves by one spine, so it qualifies; a torus does not.
    assert plan.plan(bytes_per_pair=1024).dag_schedules
    on_torus = plan.plan(topology.torus([3, 3]), bytes_per_pair=1024)
    assert on_torus.dag_schedules == []
    reason = next(s.reason for s in on_torus.skipped if s.name == "contention-free")
    assert "more than one shortest path" in reason


def test_plan_out_writes_what_to_deploy(tmp_path):
    # A 5x5 torus with a placed stencil: every deployable file, each named in README.md, each
    # readable back by the tool that uses it.
    run_cli("topo", "torus", "--dims", "5x5", "-o", str(tmp_path / "t.json"))
    out = tmp_path / "plan"
    run_cli("plan", str(tmp_path / "t.json"), "--out", str(out), "--pattern", "stencil:5x5", "--map-evals", "500")
    deploy = (out / "README.md").read_text()
    for name in ("routes.json", "opensm-lfts.dump", "alltoall-25.nws", "alltoall-25.json", "rankfile", "vcoordfile",
                 "MPICH_RANK_ORDER"):
        assert (out / name).stat().st_size > 0 and f"`{name}`" in deploy, name
    topo = topology.load(out / "topology.json")
    routes = netweave.routing.load(topo, out / "routes.json")
    lft = netweave.routing.load(topo, out / "opensm-lfts.dump", "lft")
    tables = lambda r: netweave._core.write_routes(r, "lft").split("\n", 1)[1]  # noqa: E731 (line 1 names the engine)
    assert tables(lft) == tables(routes)
    assert netweave.traffic.load(out / "alltoall-25.nws") == netweave.traffic.load(out / "alltoall-25.json")
    report_best = json.loads((out / "report.json").read_text())["ours"]["name"]
    # The .nws re-read equals the chosen schedule built afresh for the same job.
    (fresh,) = plan.candidates(topo, plan.DEFAULT_BYTES, only=report_best)
    assert netweave.traffic.load(out / "alltoall-25.nws") == fresh.schedule
    placed = json.loads((out / "placement.json").read_text())
    assert "mpirun --rankfile rankfile" in deploy and placed["ranks"] == 25
