"""End-to-end CLI: topology commands, conversions and bad input."""


import pytest

from conftest import run_cli, run_json


@pytest.mark.parametrize(
    "args, hosts, switches",
    [
        (["lsft", "--order", "3"], 52, 26),
        (["lsft", "--order", "4", "--two-sided"], 2 * 5 * 21, 21 + 2 * 21),
        (["lsft", "--order", "3", "--reduced"], 36, 9 + 12),
        (["fattree", "--degree", "4", "--levels", "3"], 64, 48),
        (["kary-ntree", "--k", "4", "--n", "3"], 64, 48),
        (["pgft", "2; 4,4; 1,4; 1,1"], 16, 8),
        (["mesh", "--dims", "4x4", "--hosts-per-router", "4"], 64, 16),
        (["torus", "--dims", "4x4x4"], 64, 64),
        (["hypercube", "--dim", "4"], 16, 16),
        (["hyperx", "--dims", "3x3"], 9, 9),
        (["dragonfly", "--a", "4", "--p", "2", "--h", "2"], 4 * 2 * 9, 4 * 9),
        (["random-regular", "--switches", "20", "--degree", "3", "--seed", "7"], 20, 20),
        (["irregular", "--seed", "1"], 64, 16),
        (["tree", "--fanouts", "7", "--hosts-per-switch", "14"], 98, 8),
    ],
)
def test_generators_write_files_that_info_reads(tmp_path, args, hosts, switches):
    path = tmp_path / "t.json"
    run_cli("topo", *args, "-o", str(path))
    info = run_json("topo", "info", str(path))
    assert (info["hosts"], info["switches"]) == (hosts, switches)
    assert info["links"] >= info["hosts"]
    assert info["diameter"] is not None



@pytest.mark.parametrize("args, family_layer", [
    (["fattree", "--degree", "4"], "infiniband"),
    (["torus", "--dims", "4x4"], "infiniband"),
    (["tree", "--fanouts", "2", "--hosts-per-switch", "4"], "ethernet"),
])
def test_every_generator_sets_link_layer_and_port_buffer(tmp_path, args, family_layer):
    """--link-layer and --buffer reach the written file on every family; --buffer alone keeps an
    Ethernet family's link layer and is refused on a lossless one."""
    import json
    path = tmp_path / "t.json"
    run_cli("topo", *args, "-o", str(path))
    assert json.loads(path.read_text())["link_layer"] == family_layer
    run_cli("topo", *args, "--link-layer", "ethernet", "--buffer", "131072", "-o", str(path))
    doc = json.loads(path.read_text())
    assert (doc["link_layer"], doc["port_buffer_bytes"]) == ("ethernet", 131072)
    if family_layer == "ethernet":
        run_cli("topo", *args, "--buffer", "32768", "-o", str(path))
        doc = json.loads(path.read_text())
        assert (doc["link_layer"], doc["port_buffer_bytes"]) == ("ethernet", 32768)
    else:  # a lossless fabric has no drop-tail buffer to set: refused, naming the way out
        path.unlink()
        proc = run_cli("topo", *args, "--buffer", "32768", "-o", str(path), check=False)
        assert proc.returncode == 2 and "link layer ethernet" in proc.stderr and not path.exists()

def test_paper_002_mesh_and_torus_metrics(tmp_path):
    # Extraction 002 §3.6: 4×4 mesh diameter 6, average distance 2.6667; torus 4 and 2.1333.
    mesh = run_json("topo", "mesh", "--dims", "4x4", "--hosts-per-router", "4")
    torus = run_json("topo", "torus", "--dims", "4x4", "--hosts-per-router", "4")
    assert (mesh["diameter"], round(mesh["average_distance"], 4)) == (6, 2.6667)
    assert (torus["diameter"], round(torus["average_distance"], 4)) == (4, 2.1333)
    assert mesh["switch_links"] == 24 and torus["switch_links"] == 32


def test_convert_round_trips_through_every_format(tmp_path):
    src = tmp_path / "a.json"
    run_cli("topo", "torus", "--dims", "3x4", "--hosts-per-router", "2", "-o", str(src))
    original = run_json("topo", "info", str(src))
    for ext in ("net", "anynet", "dot"):
        out = tmp_path / f"b.{ext}"
        run_cli("topo", "convert", str(src), str(out))
        back = tmp_path / f"c_{ext}.json"
        run_cli("topo", "convert", str(out), str(back))
        info = run_json("topo", "info", str(back))
        for key in ("hosts", "switches", "links", "diameter", "average_distance"):
            assert info[key] == original[key], (ext, key)


def test_cost_table_prints_both_switch_conventions():
    rows = run_json("topo", "cost", "--degree", "18")
    lsft = next(r for r in rows if "atin" in r["family"] or "lsft" in r["family"].lower())
    assert lsft["servers"] == 5526
    assert (lsft["switches_printed"], lsft["switches_total"]) == (307, 614)


def test_plane_command_checks_axioms():
    data = run_json("topo", "plane", "--order", "4")
    assert data["axioms_hold"] and data["points"] == 21


@pytest.mark.parametrize(
    "args, needle",
    [
        (["topo", "lsft", "--order", "6"], "6"),
        (["topo", "lsft", "--order", "10"], "10"),
        (["topo", "lsft", "--order", "12"], "12"),
        (["topo", "torus", "--dims", "4x0"], "dimension"),
        (["topo", "mesh", "--dims", "axb"], "dimensions"),
        (["topo", "fattree", "--degree", "0"], "degree"),
        (["topo", "fattree", "--degree", "4", "--levels", "5"], "level"),
        (["topo", "info", "/nonexistent/file.json"], "file.json"),
        (["topo", "info", "notes.txt"], "format"),
        (["topo", "moebius"], "moebius"),
        (["plan", "--bytes", "0"], "bytes"),
        (["plan", "--bytes", "lots"], "--bytes"),
        (["topo", "lsft"], "--order"),
        (["topo", "torus", "--dims", "5000x5000"], "in memory"),
        (["topo", "torus", "--dims", "4x99999999999"], "32 bits"),
        (["topo", "torus", "--dims", "4x4", "--hosts-per-router", "-3"], "hosts"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(args, needle):
    proc = run_cli(*args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert needle in proc.stderr


@pytest.mark.parametrize("content", ["", "{", '{"format": "netweave-topology", "version": 99}', "\x00\x01binary", '{"format": "netweave-topology", "version": 1, "nodes": [], "links": [{"a": [0, 1], "b": [1, 1]}]}'])
def test_malformed_files_are_rejected_cleanly(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    proc = run_cli("topo", "info", str(path), check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1


def test_help_everywhere():
    for args in (["--help"], ["topo", "--help"], ["plan", "--help"], ["topo", "torus", "--help"], ["topo", "convert", "--help"]):
        assert "Usage" in run_cli(*args).stdout
