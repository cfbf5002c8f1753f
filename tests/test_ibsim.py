"""The ibsim export against the real InfiniBand stack.

A fabric exported with ``netweave topo … -o FILE.net`` is loaded by the real simulator,
``ibsim -s -n FILE.net``; then the real ``ibnetdiscover`` runs against it through
umad2sim (``LD_PRELOAD=libumad2sim.so``, what ``ibsim-run`` does) and its output is
imported with ``netweave topo convert discovered.txt out.json --from ibnet``. The
discovered fabric must have the exported one's hosts, switches, links and diameter, the
same node descriptions (netweave writes labels into them) and, node for node, the same
links on the same ports.

The simulator and the client meet on an abstract unix socket named by ``IBSIM_SOCKNAME``;
each test picks a fresh name, so runs in parallel do not meet each other's simulator.
Every subprocess has a hard timeout (``ibnetdiscover`` blocks forever when no simulator
answers) and the simulator is always stopped in a ``finally``.

Without ``ibsim``, ``ibnetdiscover``, ``libumad2sim.so`` (Debian: ibsim-utils,
infiniband-diags) or the ``netweave`` command the tests skip, or fail when ``CI`` is set.
``NETWEAVE_CLI`` may name the ``netweave`` executable to use.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ibtools import ibsim as _ibsim
from ibtools import limits as _limits
from ibtools import netweave_cli as _netweave
from ibtools import require as _require
from ibtools import run as _run
from ibtools import umad2sim as _umad2sim
from ibtools import which as _which

CLI_TIMEOUT = 300  # s, one netweave command
DISCOVER_TIMEOUT = 120  # s, ibnetdiscover over the simulated fabric

# ibsim keeps 63 bytes of a node description (the InfiniBand NodeDescription is 64).
DESCRIPTION_BYTES = 63


@pytest.fixture(scope="module")
def tools() -> dict:
    return {
        "ibsim": _require(_which("ibsim"), "ibsim"),
        "ibnetdiscover": _require(_which("ibnetdiscover"), "ibnetdiscover"),
        "umad2sim": _require(_umad2sim(), "libumad2sim.so"),
        "netweave": _require(_netweave(), "the netweave command"),
    }


def _info(tools: dict, path: Path, *extra: str) -> dict:
    proc = _run([tools["netweave"], "topo", "info", str(path), *extra, "--json"], CLI_TIMEOUT)
    return json.loads(proc.stdout)


def _description(label: str) -> str:
    """The node description ibsim reports for a netweave label (see topology/io/ibnet.rs)."""
    text = "".join(" " if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in label).replace('"', "'")
    data = text.encode()[:DESCRIPTION_BYTES]
    return data.decode(errors="ignore")


def _links_by_label(fabric: dict, rename) -> set:
    labels = [rename(n["label"]) for n in fabric["nodes"]]
    return {frozenset([(labels[k["a"][0]], k["a"][1]), (labels[k["b"][0]], k["b"][1])]) for k in fabric["links"]}


CASES = [
    pytest.param(["torus", "--dims", "3x3", "--hosts-per-router", "2"], id="torus-3x3"),
    pytest.param(["lsft", "--order", "2"], id="lsft-2"),
]


@pytest.mark.parametrize("generator", CASES)
def test_ibnetdiscover_finds_the_exported_fabric(tools, tmp_path, generator):
    nw = tools["netweave"]
    exported = tmp_path / "fabric.net"
    reference = tmp_path / "fabric.json"
    _run([nw, "topo", *generator, "-o", str(exported)], CLI_TIMEOUT)
    _run([nw, "topo", *generator, "-o", str(reference)], CLI_TIMEOUT)
    expected = _info(tools, reference)
    fabric = json.loads(reference.read_text())
    assert expected["hosts"] > 0 and expected["links"] > 0
    # Our own reader agrees with the generator before ibsim is involved.
    own = _info(tools, exported)
    assert [own[k] for k in ("hosts", "switches", "links")] == [expected[k] for k in ("hosts", "switches", "links")]

    lines = exported.read_text().count("\n")
    with _ibsim(tools, exported, tmp_path, _limits(fabric)) as sim:
        # ibsim reports how many lines it consumed: all of them, or a record was cut short.
        assert f"{exported.name}: parsed {lines} lines" in sim["stdout"].read_text(), sim["stdout"].read_text()
        # Port lines carry "# lid 0 <width>x<speed>" exactly so ibsim can parse them quietly.
        warnings = [line for line in sim["stderr"].read_text().splitlines() if "parse" in line and "speed" not in line]
        assert not warnings, "\n".join(warnings)
        discovered = _run([tools["ibnetdiscover"]], DISCOVER_TIMEOUT, env=sim["env"], cwd=tmp_path).stdout
    (tmp_path / "discovered.txt").write_text(discovered)
    assert discovered.count("\nSwitch") + discovered.startswith("Switch") == expected["switches"], discovered

    imported = tmp_path / "out.json"
    _run([nw, "topo", "convert", str(tmp_path / "discovered.txt"), str(imported), "--from", "ibnet"], CLI_TIMEOUT)
    got = _info(tools, imported)
    for key in ("hosts", "switches", "links", "diameter"):
        assert got[key] == expected[key], (key, got[key], expected[key])

    # Node descriptions survive, so the labels do (as ibsim stores them).
    back = json.loads(imported.read_text())
    want = sorted((n["kind"], _description(n["label"])) for n in fabric["nodes"] if n["label"])
    have = sorted((n["kind"], n["label"]) for n in back["nodes"] if n["label"] in {d for _, d in want})
    assert have == want
    # With unique labels the whole wiring can be compared: same links on the same ports.
    descriptions = [_description(n["label"]) for n in fabric["nodes"]]
    if all(descriptions) and len(set(descriptions)) == len(descriptions):
        assert _links_by_label(back, lambda label: label) == _links_by_label(fabric, _description)


def test_ibsim_rejects_nothing_from_the_ibsim_examples_round_trip(tools, tmp_path):
    """ibsim's own example fabric, re-exported by netweave, loads and is discovered whole."""
    example = tmp_path / "example.net"
    # Our text in the shape of ibsim's net.2sw2path4hca2port: parallel inter-switch links
    # and two-port HCAs with both ports on one switch.
    example.write_text(
        'Switch 8 "Switch1"\n[1] "Hca1"[1]\n[2] "Hca1"[2]\n[3] "Switch2"[3]\n[5] "Switch2"[5]\n\n'
        'Switch 8 "Switch2"\n[1] "Hca2"[1]\n[2] "Hca2"[2]\n[3] "Switch1"[3]\n[5] "Switch1"[5]\n\n'
        'Hca 2 "Hca1"\n[1] "Switch1"[1]\n[2] "Switch1"[2]\n\n'
        'Hca 2 "Hca2"\n[1] "Switch2"[1]\n[2] "Switch2"[2]\n'
    )
    nw = tools["netweave"]
    exported = tmp_path / "exported.net"
    _run([nw, "topo", "convert", str(example), str(exported)], CLI_TIMEOUT)
    with _ibsim(tools, exported, tmp_path, []) as sim:
        discovered = _run([tools["ibnetdiscover"]], DISCOVER_TIMEOUT, env=sim["env"], cwd=tmp_path).stdout
    (tmp_path / "discovered.txt").write_text(discovered)
    imported = tmp_path / "out.json"
    _run([nw, "topo", "convert", str(tmp_path / "discovered.txt"), str(imported), "--from", "ibnet"], CLI_TIMEOUT)
    got = _info(tools, imported)
    assert (got["hosts"], got["switches"], got["links"]) == (2, 2, 6)
    back = json.loads(imported.read_text())
    assert sorted(n["label"] for n in back["nodes"]) == ["Hca1", "Hca2", "Switch1", "Switch2"]
