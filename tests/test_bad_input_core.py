"""Hostile input to the engine's own checks (issue 33, core half): byte totals that do not fit 64
bits, work over the memory budget, files that are not text, DAG schedules in `analyze`, and
the error kinds the Python API raises.

Each CLI case ends with exit code 2 and one line on stderr naming the option, file or value at
fault, with no traceback and nothing written; the memory budget is set per case
(``--max-memory`` or ``NETWEAVE_MAX_MEMORY``), so the cases do not depend on this machine's memory.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
from pathlib import Path

import pytest

import netweave
from netweave import cli, routing, topology, traffic


def C(command: str, culprit: str):
    """A case: the command line after ``netweave`` and a text its error line must contain."""
    return pytest.param(command, culprit, id=command[:90])


CASES = [
    # --- checked arithmetic: totals past 2^64 - 1 name --bytes, link figures must be physical --
    C("schedule alltoall F/t.json --algo shift --bytes 18446744073709551615", "--bytes"),
    C("schedule alltoall F/t.json --algo linear --bytes 9223372036854775808", "--bytes"),
    C("schedule alltoall F/t.json --algo bruck --bytes 4611686018427387904", "--bytes"),
    C("schedule allgather F/t.json --algo ring --bytes 18446744073709551615", "--bytes"),
    C("schedule allgather F/t.json --algo bruck --bytes 9223372036854775807", "--bytes"),
    C("schedule allgather F/t.json --algo recursive-doubling --bytes 9223372036854775807", "--bytes"),
    C("schedule gather F/t.json --algo binomial --bytes 9223372036854775807", "--bytes"),
    C("topo torus --dims 4x4 --bandwidth 1e-300", "1e-300"),
    C("topo torus --dims 4x4 --bandwidth 1e300", "1e300"),
    C("topo torus --dims 4x4 --latency 1e308", "1e308"),
    # --- size guards: refused before allocation, naming the budget -----------------------------
    C("--max-memory 1M route shortest F/t32.json", "--max-memory"),
    C("route dfsssp F/t32.json --max-memory 1M", "--max-memory"),
    C("--max-memory 64M topo torus --dims 2000x2000", "--max-memory"),
    C("--max-memory 1K topo torus --dims 64x64x64", "torus"),
    C("--max-memory 1M schedule alltoall F/t32.json --algo shift", "--max-memory"),
    C("--max-memory=16M schedule alltoall F/t32.json --algo linear", "alltoall-linear(N=1024)"),
    C("--max-memory lots topo torus --dims 4x4", "--max-memory"),
    C("--max-memory -1 topo torus --dims 4x4", "--max-memory"),
    C("--max-memory 1e40 topo torus --dims 4x4", "--max-memory"),
    # --- readers: bytes that are not text, named by file and offset ----------------------------
    C("topo info F/latin1.json", "byte offset 36"),
    C("topo info F/nul.net", "byte offset 5"),
    C("topo convert F/latin1.json O/x.net", "latin1.json"),
    C("route check F/t.json F/latin1.json", "byte offset 36"),
    C("route import-lft F/t.json F/nul.net -o O/x.json", "nul.net"),
    C("analyze F/t.json F/r.json F/latin1.json", "latin1.json"),
    C("analyze F/t.json F/r.json F/notnws.nws", "NWSCHED"),
    C("topo info F/adir.json", "directory"),
    # --- accepted nonsense no more ---------------------------------------------------------------
    C("route shortest F/emptytopo.json", "no hosts"),
    C("route import-lft F/m.json F/r.lft -o O/x.json", "r.lft"),
]


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> Path:
    """Every fixture file the cases name, built through the Python API."""
    d = tmp_path_factory.mktemp("fxcore")
    torus = topology.torus([4, 4])
    topology.save(torus, d / "t.json")
    topology.save(topology.mesh([4, 4]), d / "m.json")
    routes = routing.route(torus, "dor")
    routing.save(routes, d / "r.json")
    routing.save_lft(routes, d / "r.lft")
    topology.save(topology.torus([32, 32]), d / "t32.json")
    good = (d / "t.json").read_bytes()
    (d / "latin1.json").write_bytes(good[:36] + b"\xe9" + good[37:])
    (d / "nul.net").write_bytes(b"hosts\x00 4\n")
    (d / "notnws.nws").write_bytes(b"NWSCHEX\x00" + bytes(56))
    (d / "adir.json").mkdir()
    (d / "emptytopo.json").write_text('{"format":"netweave-topology","version":1,"name":"e","family":"generic",'
                                      '"params":{},"nodes":[],"links":[]}')
    tree = topology.switch_tree([2], 2, [10.0], [5000.0], 1.0, 5000.0)
    topology.save(tree, d / "tree.json")
    routing.save(routing.route(tree, "shortest"), d / "rtree.json")
    graph, _ = traffic.contention_free(tree, "gather", 1000, root=0)
    graph.save(d / "g.json")
    graph.save(d / "g.nws")
    return d


def _expand(text: str, fx: Path, out: Path) -> str:
    return text.replace("F/", f"{fx}/").replace("O/", f"{out}/")


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(argv)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _own_budget():
    # --max-memory sets NETWEAVE_MAX_MEMORY for the process: restore it after each case, so the
    # budget of one case never reaches another test.
    before = os.environ.pop("NETWEAVE_MAX_MEMORY", None)
    yield
    os.environ.pop("NETWEAVE_MAX_MEMORY", None)
    if before is not None:
        os.environ["NETWEAVE_MAX_MEMORY"] = before


@pytest.mark.parametrize("command, culprit", CASES)
def test_hostile_input_is_one_line_and_exit_2(fx, tmp_path, command, culprit):
    out = tmp_path / "out"
    out.mkdir()
    argv = [_expand(word, fx, out) for word in shlex.split(command)]
    code, stdout, stderr = _run(argv)
    lines = stderr.splitlines()
    assert code == 2, f"exit {code}\nstdout: {stdout[-400:]}\nstderr: {stderr[-800:]}"
    assert "Traceback" not in stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert _expand(culprit, fx, out) in lines[0], lines[0]
    assert stdout == "", "partial output before the error"
    assert list(out.iterdir()) == [], f"left {sorted(p.name for p in out.iterdir())} in the output directory"


@pytest.mark.parametrize("name", ["g.json", "g.nws"])
def test_analyze_reads_a_dag_schedule_in_both_forms(fx, name):
    code, stdout, stderr = _run(["analyze", str(fx / "tree.json"), str(fx / "rtree.json"), str(fx / name), "--json"])
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["complete"] and report["collective"] == "gather(root=0)", report["problem"]
    assert report["stages"] == len(report["loads"]["phases"]) >= 1
    assert report["tasks"] == sum(stage["flows"] for stage in report["loads"]["phases"])
    # No order of the tasks beats the bound; stages back to back cannot beat it either.
    assert 0 < report["bound"]["seconds"] <= report["loads"]["fluid_time_host_links_s"] * (1 + 1e-9)
    code, text, _ = _run(["analyze", str(fx / "tree.json"), str(fx / "rtree.json"), str(fx / name)])
    assert code == 0 and "stages; complete gather(root=0)" in text and "bound" in text


def test_the_python_api_raises_error_kinds_instead_of_aborting(monkeypatch):
    with pytest.raises(netweave.ResourceLimitError, match="alltoall-shift"):
        traffic.alltoall(10**9, 1)
    monkeypatch.setenv("NETWEAVE_MAX_MEMORY", "64M")
    with pytest.raises(netweave.ResourceLimitError, match=r"64\.0 MiB"):
        topology.torus([2000, 2000])
    with pytest.raises(netweave.ResourceLimitError, match="routing"):
        routing.route(topology.torus([100, 100]), "shortest")
    with pytest.raises(netweave.ParameterError, match="--bytes"):
        traffic.alltoall(4, 2**64 - 1)
    with pytest.raises(netweave.FileError, match="NUL byte at byte offset 0"):
        topology.load("/dev/zero", "json")
    monkeypatch.setenv("NETWEAVE_MAX_MEMORY", "junk")
    with pytest.raises(netweave.ParameterError, match="NETWEAVE_MAX_MEMORY"):
        topology.torus([4, 4])
    # Every kind is a NetweaveError, itself a ValueError: old handlers keep working.
    for kind in (netweave.FileError, netweave.ParameterError, netweave.InfeasibleError, netweave.ResourceLimitError):
        assert issubclass(kind, netweave.NetweaveError) and issubclass(kind, ValueError)
    assert netweave.Error is netweave.NetweaveError
