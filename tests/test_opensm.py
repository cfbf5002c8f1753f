"""netweave's forwarding tables installed by the real OpenSM, and OpenSM's read back.

A fabric exported with ``netweave topo … -o FILE.net`` runs in the real simulator
(``ibsim -s -n FILE.net``). netweave routes it (``netweave route minhop``), exports the tables
as an OpenSM LFT dump (``netweave route export-lft``), and the real subnet manager installs
them with its ``file`` routing engine::

    OSM_CACHE_DIR=cache LD_PRELOAD=libumad2sim.so \\
        opensm -F empty.conf -o -R file,no_fallback -U ours.lft -f osm.log -D 0x43 --dump_files_dir dump

(``-o`` configures the subnet once and exits, ``-F`` an empty config file keeps a host's
``/etc/opensm/opensm.conf`` out, ``OSM_CACHE_DIR`` a private cache, ``no_fallback`` stops it
from quietly using min-hop instead). The cache is seeded with a ``guid2lid`` file giving every
switch and host the LID of netweave's sequential assignment (switches 1..S, hosts S+1..S+H)
at the GUID ibsim derives for it (switch k: 0x200000 + k; hosts from 0x100000 on, each
reserving ports + 1 GUIDs, port p = node GUID + p), so OpenSM's LIDs are ours.

The switches' tables are then read from the simulated hardware with infiniband-diags'
``dump_fts`` (directed-route SMPs, no SM needed) and must equal the exported ones entry for
entry, for every switch and every LID; OpenSM's own ``opensm-lfts.dump`` must too. Finally
``netweave route import-lft`` turns the installed tables back into a routes file that has
the original ports and the same ``route check`` verdict and path metrics.

A second test goes the other way: OpenSM computes its own tables (min-hop, and up*/down*
rooted at switch 0), ``dump_fts`` reads them, and netweave imports and checks them: min-hop
has no non-minimal pair, up*/down* is proven deadlock-free.

Every subprocess has a hard timeout, OpenSM is watched for routing failure (with ``-o`` it
would otherwise retry forever), and ibsim and OpenSM are always stopped in ``finally``.
Without ``ibsim``, ``opensm``, ``dump_fts``, ``libumad2sim.so`` (Debian: ibsim-utils, opensm,
infiniband-diags) or the ``netweave`` command the tests skip, or fail when ``CI`` is set.
``NETWEAVE_CLI`` may name the ``netweave`` executable to use.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Optional

import pytest

from ibtools import ibsim as _ibsim, limits as _limits, netweave_cli as _netweave, require as _require, run as _run
from ibtools import stop as _stop, umad2sim as _umad2sim, which as _which

CLI_TIMEOUT = 300  # s, one netweave command
OPENSM_TIMEOUT = 120  # s, one single-shot OpenSM run
DUMP_TIMEOUT = 120  # s, dump_fts over the simulated fabric

# GUIDs ibsim gives the nodes of a net file, by type, in file order (ibsim/sim_net.c).
IBSIM_HCA_GUID_BASE, IBSIM_SWITCH_GUID_BASE = 0x100000, 0x200000

CASES = [
    pytest.param(["torus", "--dims", "3x3", "--hosts-per-router", "2"], id="torus-3x3"),
    pytest.param(["lsft", "--order", "2"], id="lsft-2"),
]


# --- tools -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tools() -> dict:
    return {
        "ibsim": _require(_which("ibsim"), "ibsim"),
        "opensm": _require(_which("opensm"), "opensm"),
        "dump_fts": _require(_which("dump_fts"), "dump_fts"),
        "umad2sim": _require(_umad2sim(), "libumad2sim.so"),
        "netweave": _require(_netweave(), "the netweave command"),
    }


# --- the simulated fabric and the subnet manager ---------------------------------------------


def _opensm(tools: dict, env: dict, workdir: Path, engine_args: list[str], cache: Optional[str] = None) -> Path:
    """Run OpenSM once (``-o``) in `workdir` with its own cache, config, log and dump
    directory; returns the dump directory. Fails if routing fails or the subnet does not come
    up: with ``-o`` a failing OpenSM retries forever, so the log is watched."""
    cache_dir, dump_dir = workdir / "osm-cache", workdir / "osm-dump"
    cache_dir.mkdir()
    dump_dir.mkdir()
    if cache is not None:
        (cache_dir / "guid2lid").write_text(cache)
    config = workdir / "opensm.conf"
    config.write_text("")
    log = workdir / "opensm.log"
    cmd = [
        tools["opensm"], "-F", str(config), "-o", *engine_args,
        "-f", str(log), "-D", "0x43", "--dump_files_dir", str(dump_dir),
    ]
    osm_env = {**env, "OSM_CACHE_DIR": str(cache_dir), "OSM_TMP_DIR": str(dump_dir)}
    with open(workdir / "opensm.out", "w") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=osm_env, cwd=workdir,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + OPENSM_TIMEOUT
            while proc.poll() is None:
                text = log.read_text(errors="replace") if log.exists() else ""
                if "No routing engine able" in text:
                    raise AssertionError(f"OpenSM could not route ({' '.join(engine_args)}):\n{text[-3000:]}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"OpenSM did not finish within {OPENSM_TIMEOUT} s:\n{text[-3000:]}")
                time.sleep(0.05)
        finally:
            _stop(proc)
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, f"opensm exited with {proc.returncode}:\n{text[-3000:]}"
    assert "SUBNET UP" in text, text[-3000:]
    return dump_dir


def _dump_fts(tools: dict, env: dict, workdir: Path) -> str:
    """The LFTs the switches of the simulated fabric hold, read by directed-route SMPs."""
    return _run([tools["dump_fts"]], DUMP_TIMEOUT, env=env, cwd=workdir).stdout


# --- files -----------------------------------------------------------------------------------

_HEADER = re.compile(r"^Unicast lids \[[^\]]*\] of switch (?:Lid (\d+) )?.*?guid 0x([0-9a-fA-F]+)")
_ENTRY = re.compile(r"^0x([0-9a-fA-F]+)\s+(\d+)")


def _lfts(text: str) -> tuple[dict[int, dict[int, int]], dict[int, int]]:
    """Parse an LFT dump (OpenSM's, or dump_fts output): ``{switch guid: {lid: port}}`` and
    ``{switch guid: switch lid}`` where the header names it."""
    tables: dict[int, dict[int, int]] = {}
    lids: dict[int, int] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        m = _HEADER.match(line)
        if m:
            current = int(m.group(2), 16)
            assert current not in tables, f"switch {current:#x} listed twice"
            tables[current] = {}
            if m.group(1):
                lids[current] = int(m.group(1))
            continue
        m = _ENTRY.match(line)
        if m and current is not None and "illegal port" not in line:
            tables[current][int(m.group(1), 16)] = int(m.group(2))
    return tables, lids


def _ibsim_lids(fabric: dict) -> tuple[str, dict[int, int], dict[int, int]]:
    """netweave's sequential LIDs at ibsim's GUIDs for a topology JSON: the ``guid2lid`` cache
    text, ``{switch guid: lid}`` and ``{host port guid: lid}``."""
    nodes = fabric["nodes"]
    first_port: dict[int, int] = {}
    for link in fabric["links"]:
        for node, port in (link["a"], link["b"]):
            first_port[node] = min(port, first_port.get(node, port))
    switch_lids, host_lids = {}, {}
    switches = [i for i, n in enumerate(nodes) if n["kind"] == "switch"]
    next_lid = 1
    for k, _ in enumerate(switches):
        switch_lids[IBSIM_SWITCH_GUID_BASE + k] = next_lid
        next_lid += 1
    guid = IBSIM_HCA_GUID_BASE
    for i, n in enumerate(nodes):
        if n["kind"] == "host":
            host_lids[guid + first_port.get(i, 1)] = next_lid
            next_lid += 1
            guid += n["ports"] + 1
    cache = "".join(f"0x{g:016x} 0x{lid:04x} 0x{lid:04x}\n\n" for g, lid in {**switch_lids, **host_lids}.items())
    return cache, switch_lids, host_lids


def _check(tools: dict, topo: Path, routes: Path) -> dict:
    return json.loads(_run([tools["netweave"], "route", "check", str(topo), str(routes), "--json"], CLI_TIMEOUT).stdout)


METRICS = ("deadlock_free", "vcs_used", "avg_hops", "max_hops", "non_minimal_pairs")


# --- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("generator", CASES)
def test_opensm_installs_netweave_tables(tools, tmp_path, generator):
    nw = tools["netweave"]
    netfile, topo = tmp_path / "fabric.net", tmp_path / "fabric.json"
    _run([nw, "topo", *generator, "-o", str(netfile)], CLI_TIMEOUT)
    _run([nw, "topo", *generator, "-o", str(topo)], CLI_TIMEOUT)
    fabric = json.loads(topo.read_text())
    routes, ours = tmp_path / "R.json", tmp_path / "ours.lft"
    _run([nw, "route", "minhop", str(topo), "-o", str(routes)], CLI_TIMEOUT)
    _run([nw, "route", "export-lft", str(topo), str(routes), "-o", str(ours)], CLI_TIMEOUT)
    exported, exported_lids = _lfts(ours.read_text())
    cache, switch_lids, host_lids = _ibsim_lids(fabric)
    # The export uses exactly these GUIDs and LIDs.
    assert exported_lids == switch_lids
    assert set(exported) == set(switch_lids)
    for table in exported.values():
        assert set(host_lids.values()) <= set(table), "every switch routes every host LID"

    with _ibsim(tools, netfile, tmp_path, _limits(fabric)) as sim:
        env = sim["env"]
        dump_dir = _opensm(tools, env, tmp_path, ["-R", "file,no_fallback", "-U", str(ours)], cache)
        installed_text = _dump_fts(tools, env, tmp_path)
    log = (tmp_path / "opensm.log").read_text(errors="replace")
    assert "file tables configured on all switches" in log, log[-3000:]

    # OpenSM gave every switch the LID we chose, and its own dump is ours.
    opensm_tables, opensm_lids = _lfts((dump_dir / "opensm-lfts.dump").read_text())
    assert opensm_lids == switch_lids
    assert opensm_tables == exported
    # The hardware (ibsim's switches) holds exactly our tables: every switch, every LID.
    (tmp_path / "installed.lft").write_text(installed_text)
    installed, _ = _lfts(installed_text)
    assert set(installed) == set(exported)
    for guid, table in exported.items():
        assert installed[guid] == table, f"switch {guid:#x}"

    # Imported back (against the fabric as ibsim loaded it), the tables are the routes we made.
    back = tmp_path / "R2.json"
    _run([nw, "route", "import-lft", str(netfile), str(tmp_path / "installed.lft"), "-o", str(back)], CLI_TIMEOUT)
    original, imported = json.loads(routes.read_text()), json.loads(back.read_text())
    assert imported["out_port"] == original["out_port"]
    assert imported["topology"]["wiring"] == original["topology"]["wiring"]
    want, got = _check(tools, topo, routes), _check(tools, topo, back)
    for key in METRICS:
        assert got[key] == want[key], (key, got[key], want[key])


@pytest.mark.parametrize("generator", CASES)
def test_netweave_checks_opensm_own_routing(tools, tmp_path, generator):
    """OpenSM's min-hop and up*/down* tables, read from the switches, imported and analysed."""
    nw = tools["netweave"]
    netfile, topo = tmp_path / "fabric.net", tmp_path / "fabric.json"
    _run([nw, "topo", *generator, "-o", str(netfile)], CLI_TIMEOUT)
    _run([nw, "topo", *generator, "-o", str(topo)], CLI_TIMEOUT)
    fabric = json.loads(topo.read_text())
    # up*/down* needs its root named on fabrics that are not fat-trees: switch 0.
    roots = tmp_path / "roots.txt"
    roots.write_text(f"0x{IBSIM_SWITCH_GUID_BASE:016x}\n")
    results = {}
    for engine, args in [("minhop", ["-R", "minhop,no_fallback"]), ("updn", ["-R", "updn,no_fallback", "-a", str(roots)])]:
        work = tmp_path / engine
        work.mkdir()
        # No LID seeding: OpenSM picks its own LIDs; import maps them by description and GUID.
        with _ibsim(tools, netfile, work, _limits(fabric)) as sim:
            env = sim["env"]
            _opensm(tools, env, work, args)
            installed = _dump_fts(tools, env, work)
        (work / "installed.lft").write_text(installed)
        out = work / "R.json"
        _run([nw, "route", "import-lft", str(topo), str(work / "installed.lft"), "-o", str(out)], CLI_TIMEOUT)
        results[engine] = _check(tools, topo, out)  # fails if any pair is not delivered
    assert results["minhop"]["non_minimal_pairs"] == 0, results["minhop"]
    assert results["updn"]["deadlock_free"] is True, results["updn"]
    assert results["updn"]["vcs_used"] == 1
