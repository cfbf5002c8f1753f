"""End-to-end: `netweave route` engines, the deadlock proof, OpenSM dump round-trips, plan."""

import json

import pytest

import netweave
from conftest import run_cli, run_json
from netweave import routing, topology

# Engine → a topology family it accepts (CLI arguments of `netweave topo`).
FABRICS = {
    "mesh": ["mesh", "--dims", "4x4", "--hosts-per-router", "2"],
    "torus": ["torus", "--dims", "4x4", "--hosts-per-router", "2"],
    "fattree": ["fattree", "--degree", "4", "--levels", "2"],
    "lsft": ["lsft", "--order", "3"],
    "irregular": ["irregular", "--seed", "2"],
    "random": ["random-regular", "--switches", "24", "--degree", "4", "--hosts-per-switch", "2", "--seed", "1"],
}
DEADLOCK_FREE = {
    "dfsssp": ["torus", "irregular", "random"],
    "dor": ["mesh", "torus"],
    "dmodk": ["fattree"],
    "lsft": ["lsft"],
    "updown": ["mesh", "torus", "irregular", "random", "lsft"],
    "prefix": ["mesh", "irregular"],
    "dl": ["mesh", "torus", "irregular", "random"],
    "sbp": ["mesh", "torus", "irregular"],
    "lash": ["torus", "irregular", "random"],
    "nue": ["mesh", "torus", "irregular", "random", "lsft", "fattree"],
}


@pytest.fixture(scope="module")
def fabrics(tmp_path_factory):
    d = tmp_path_factory.mktemp("fabrics")
    paths = {}
    for name, args in FABRICS.items():
        paths[name] = d / f"{name}.json"
        run_cli("topo", *args, "-o", str(paths[name]))
    return paths


@pytest.mark.parametrize("engine, fabric", [(e, f) for e, fs in DEADLOCK_FREE.items() for f in fs])
def test_engines_are_proven_deadlock_free(fabrics, tmp_path, engine, fabric):
    out = tmp_path / "routes.json"
    run_cli("route", engine, str(fabrics[fabric]), "-o", str(out))
    data = run_json("route", "check", str(fabrics[fabric]), str(out))
    assert data["deadlock_free"] is True, data["cycle"]
    assert data["cycle"] == []
    for key in ("vcs_used", "avg_hops", "max_hops", "non_minimal_pairs"):
        assert key in data
    assert 1 <= data["vcs_used"] <= 8


def test_unrestricted_shortest_paths_on_a_torus_deadlock(fabrics, tmp_path):
    out = tmp_path / "r.json"
    run_cli("route", "shortest", str(fabrics["torus"]), "--vcs", "1", "-o", str(out))
    data = run_json("route", "check", str(fabrics["torus"]), str(out))
    assert data["deadlock_free"] is False
    assert len(data["cycle"]) >= 2
    text = run_cli("route", "check", str(fabrics["torus"]), str(out)).stdout
    assert "CAN DEADLOCK" in text and "cycle:" in text


def test_paper_002_vc_counts_and_minimality():
    mesh = topology.mesh([4, 4], hosts_per_router=4)
    torus = topology.torus([4, 4], hosts_per_router=4)
    assert mesh.route("sbp").check()["vcs_used"] == 6
    assert torus.route("sbp").check()["vcs_used"] == 4
    for t in (mesh, torus):
        assert t.route("dl", vcs=2).metrics()["non_minimal_pairs"] == 0
        assert t.route("prefix").metrics()["non_minimal_pairs"] > 0
    assert mesh.route("updown", root=0).metrics()["non_minimal_pairs"] == 0


@pytest.mark.parametrize(
    "args, needle",
    [
        (["route", "dor", "FATTREE"], "dor"),
        (["route", "sbp", "MESH", "--vcs", "4"], "6"),
        (["route", "teleport", "MESH"], "teleport"),
        (["route", "updown", "MESH", "--root", "99"], "root"),
        (["route", "updown", "MESH", "--select", "sideways"], "sideways"),
        (["route", "dor", "MESH", "--spread-vcs", "2"], "updown only"),
        (["route", "updown", "MESH", "--vcs", "2", "--spread-vcs", "4"], "budget"),
    ],
)
def test_engine_misuse_is_one_line_exit_2(fabrics, args, needle):
    args = [str(fabrics["fattree"]) if a == "FATTREE" else str(fabrics["mesh"]) if a == "MESH" else a for a in args]
    proc = run_cli(*args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert needle in proc.stderr


def test_routes_file_refuses_another_fabric(fabrics, tmp_path):
    out = tmp_path / "r.json"
    run_cli("route", "updown", str(fabrics["mesh"]), "-o", str(out))
    proc = run_cli("route", "check", str(fabrics["torus"]), str(out), check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")


def test_lft_dump_round_trips_the_tables(fabrics, tmp_path):
    topo = topology.load(fabrics["irregular"])
    routes = routing.route(topo, "updown")
    dump = tmp_path / "opensm-lfts.dump"
    routing.save_lft(routes, dump)
    back = routing.load_lft(topo, dump)
    assert (back.ports() == routes.ports()).all()
    # Through the CLI too.
    r = tmp_path / "r.json"
    r2 = tmp_path / "r2.json"
    run_cli("route", "updown", str(fabrics["irregular"]), "-o", str(r), "--lft", str(tmp_path / "cli.dump"))
    run_cli("route", "import-lft", str(fabrics["irregular"]), str(tmp_path / "cli.dump"), "-o", str(r2))
    assert run_json("route", "check", str(fabrics["irregular"]), str(r2))["avg_hops"] == run_json(
        "route", "check", str(fabrics["irregular"]), str(r)
    )["avg_hops"]


def test_plan_routes_deadlock_free_by_default():
    data = json.loads(run_cli("plan", "--json").stdout)
    assert data["routing"]["engine"] == "lsft"
    assert data["routing"]["deadlock_free"] is True


def test_python_api_mirrors_the_cli():
    t = topology.torus([3, 3], hosts_per_router=1)
    r = t.route("dor")
    assert r.num_vcs == 2 and r.check()["deadlock_free"]
    assert r.ports().shape == (9, 9)
    assert routing.default_engine(t) == "dor"
    assert set(routing.ENGINES) >= {"updown", "nue", "lash", "dfsssp", "sbp-reduced"}
    with pytest.raises(netweave.NetweaveError):
        t.route("dor", vcs=1)


def test_updown_spreads_sources_over_vcs(fabrics, tmp_path):
    out = tmp_path / "r.json"
    data = run_json("route", "updown", str(fabrics["irregular"]), "--spread-vcs", "4", "-o", str(out))
    assert data["deadlock_free"] is True and data["vcs_used"] == 4
    # Same paths as plain up*/down*, only the VCs differ.
    plain = run_json("route", "updown", str(fabrics["irregular"]))
    assert plain["vcs_used"] == 1 and plain["avg_hops"] == data["avg_hops"]


@pytest.mark.parametrize("engine", ["dfsssp", "lash"])
def test_layered_engines_fit_any_budget(fabrics, engine):
    # The random fabric's shortest paths need more than one layer; with one VC the
    # destinations that do not fit take up*/down* escape routes, still deadlock-free.
    free = run_json("route", engine, str(fabrics["random"]))
    assert free["vcs_used"] >= 2
    tight = run_json("route", engine, str(fabrics["random"]), "--vcs", "1")
    assert tight["deadlock_free"] is True and tight["vcs_used"] == 1
    assert tight["avg_hops"] > free["avg_hops"]  # the escape routes are longer


# --- lanes for OpenSM -------------------------------------------------------------------------


@pytest.mark.parametrize("engine, fabric", [("dfsssp", "random"), ("lash", "random"), ("nue", "irregular"), ("nue", "torus")])
def test_opensm_export_carries_every_path_lane(fabrics, tmp_path, engine, fabric):
    """Per-path layers become one SL per (source, destination) in qos-policy.conf, and importing
    the dump with that policy gives back the routing's VCs pair for pair (so the same proof)."""
    out, osm = tmp_path / "r.json", tmp_path / "osm"
    data = run_json("route", engine, str(fabrics[fabric]), "-o", str(out), "--opensm", str(osm))
    info = data["opensm"]
    assert info["installable"] is True and info["engine"] is None
    conf = (osm / "opensm.conf").read_text()
    assert "routing_engine file" in conf and f"lfts_file {osm.absolute() / 'opensm-lfts.dump'}" in conf
    routes = routing.load(topology.load(fabrics[fabric]), out)
    if routes.num_vcs == 1:
        assert "qos FALSE" in conf and not (osm / "qos-policy.conf").exists()
        return
    lanes = routes.num_vcs
    assert info["lanes"] == lanes and sum(1 for n in info["pairs_per_sl"] if n) == lanes
    assert "qos TRUE" in conf and f"qos_policy_file {osm.absolute() / 'qos-policy.conf'}" in conf
    identity = [str(sl) if sl < lanes else "15" for sl in range(16)]
    assert f"qos_sl2vl {','.join(identity)}" in conf
    back = tmp_path / "back.json"
    run_cli("route", "import-lft", str(fabrics[fabric]), str(osm / "opensm-lfts.dump"), "--qos", str(osm / "qos-policy.conf"),
            "-o", str(back))
    mine, theirs = json.loads(out.read_text()), json.loads(back.read_text())
    assert theirs["out_port"] == mine["out_port"]
    h = len(mine["out_port"][0])
    ours = routing.load(topology.load(fabrics[fabric]), out)
    want = [[_injection_vc(mine["injection"], s, d, h) for d in range(h)] for s in range(h)]
    assert theirs["injection"]["kind"] == "per_pair" and theirs["injection"]["vcs"] == want
    assert ours.num_vcs == theirs["num_vcs"]
    proof = run_json("route", "check", str(fabrics[fabric]), str(back))
    assert proof["deadlock_free"] is True and proof["vcs_used"] == lanes


def _injection_vc(injection: dict, s: int, d: int, hosts: int) -> int:
    kind = injection["kind"]
    if kind == "zero":
        return 0
    if kind == "per_source":
        return injection["vcs"][s]
    if kind == "per_destination":
        return injection["vcs"][d]
    return injection["vcs"][s][d]


@pytest.mark.parametrize("engine, fabric, instead", [("dor", "torus", "torus-2QoS"), ("sbp", "mesh", "nue"), ("dl", "irregular", "nue")])
def test_opensm_export_says_when_lanes_change_mid_path(fabrics, tmp_path, engine, fabric, instead):
    osm = tmp_path / "osm"
    (osm).mkdir()
    (osm / "opensm-lfts.dump").write_text("stale")  # an earlier export's tables must not stay behind
    proc = run_cli("route", engine, str(fabrics[fabric]), "--vcs", "8", "--opensm", str(osm))
    routes = routing.route(topology.load(fabrics[fabric]), engine, vcs=8)
    if routes.num_vcs == 1:
        pytest.skip(f"{engine} needs one lane on {fabric}")
    assert "OpenSM cannot install" in proc.stderr and instead in proc.stderr, proc.stderr
    conf = (osm / "opensm.conf").read_text()
    assert "NOT INSTALLABLE" in conf and f"routing_engine {instead}\n" in conf
    assert not (osm / "opensm-lfts.dump").exists() and not (osm / "qos-policy.conf").exists()
    assert (osm / "torus-2QoS.conf").exists() == (instead == "torus-2QoS")
    info = run_json("route", "export-opensm", str(fabrics[fabric]), str(_routes_file(tmp_path, routes)), "--out", str(osm))
    assert info["installable"] is False and info["engine"] == instead and "changes from VC" in info["reason"]


def _routes_file(tmp_path, routes):
    path = tmp_path / "routes.json"
    routing.save(routes, path)
    return path


def test_opensm_export_refuses_more_lanes_than_the_fabric_has(fabrics, tmp_path):
    routes = routing.route(topology.load(fabrics["torus"]), "dor")
    proc = run_cli("route", "export-opensm", str(fabrics["torus"]), str(_routes_file(tmp_path, routes)), "--vcs", "1",
                   "--out", str(tmp_path / "osm"), check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "needs 2 lanes" in proc.stderr and "--vcs" in proc.stderr
    assert not (tmp_path / "osm").exists()


def test_a_qos_policy_for_another_fabric_is_refused(fabrics, tmp_path):
    osm = tmp_path / "osm"
    run_cli("route", "dfsssp", str(fabrics["random"]), "--opensm", str(osm))
    assert (osm / "qos-policy.conf").exists()
    other = tmp_path / "other.dump"
    run_cli("route", "updown", str(fabrics["mesh"]), "--lft", str(other))
    proc = run_cli("route", "import-lft", str(fabrics["mesh"]), str(other), "--qos", str(osm / "qos-policy.conf"),
                   "-o", str(tmp_path / "x.json"), check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "another fabric" in proc.stderr and not (tmp_path / "x.json").exists()
