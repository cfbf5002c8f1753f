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

The lanes (``test_opensm_installs_netweave_lanes``): a routing on several virtual lanes is
exported with ``netweave route ENGINE … --opensm DIR`` (``opensm.conf``, the dump and
``qos-policy.conf``) and OpenSM runs as a subnet manager with ``-F DIR/opensm.conf``. Then the
subnet administrator's path record for every (source, destination) pair (``saquery -p
--src-to-dst``) must carry the SL of our table, every switch's SL→VL table (``smpquery sl2vl``)
must map each used SL to its lane, every switch's LFT (``ibroute``) must be ours, and the
tables imported with the policy (``route import-lft --qos``) must prove deadlock-free on the
same number of lanes. A routing whose lanes change mid-path (``dor`` on a torus) is not
handed over: its ``opensm.conf`` configures OpenSM's torus-2QoS, which must route the
simulated torus by itself and hand out SLs.

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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from ibtools import ibsim as _ibsim
from ibtools import limits as _limits
from ibtools import netweave_cli as _netweave
from ibtools import require as _require
from ibtools import run as _run
from ibtools import stop as _stop
from ibtools import umad2sim as _umad2sim
from ibtools import which as _which

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
        "saquery": _require(_which("saquery"), "saquery"),
        "smpquery": _require(_which("smpquery"), "smpquery"),
        "ibroute": _require(_which("ibroute"), "ibroute"),
        "umad2sim": _require(_umad2sim(), "libumad2sim.so"),
        "netweave": _require(_netweave(), "the netweave command"),
    }


# --- the simulated fabric and the subnet manager ---------------------------------------------


@contextmanager
def _subnet_manager(tools: dict, env: dict, workdir: Path, config: Path, cache: str | None = None) -> Iterator[Path]:
    """OpenSM running as the subnet manager (and administrator) with `config` until the block
    exits; yields its log once the subnet is up. Stopped in ``finally`` whatever happens."""
    cache_dir = workdir / "osm-cache"
    cache_dir.mkdir()
    if cache is not None:
        (cache_dir / "guid2lid").write_text(cache)
    log = workdir / "opensm.log"
    # -d2 flushes the log after every line, so "SUBNET UP" can be waited for.
    cmd = [tools["opensm"], "-F", str(config), "-f", str(log), "-D", "0x43", "-d2"]
    osm_env = {**env, "OSM_CACHE_DIR": str(cache_dir), "OSM_TMP_DIR": str(workdir)}
    with open(workdir / "opensm.out", "w") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=osm_env, cwd=workdir,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + OPENSM_TIMEOUT
            while True:
                text = log.read_text(errors="replace") if log.exists() else ""
                if "SUBNET UP" in text:
                    break
                if "No routing engine able" in text or proc.poll() is not None:
                    raise AssertionError(f"OpenSM did not bring the subnet up ({proc.poll()}):\n{text[-3000:]}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"OpenSM did not bring the subnet up within {OPENSM_TIMEOUT} s:\n{text[-3000:]}")
                time.sleep(0.05)
            yield log
        finally:
            _stop(proc)


def _opensm(tools: dict, env: dict, workdir: Path, engine_args: list[str], cache: str | None = None) -> Path:
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


# --- lanes: service levels and SL-to-VL maps ---------------------------------------------------

QUERY_TIMEOUT = 60  # s, one saquery / smpquery / ibroute
QUERY_WORKERS = 4  # concurrent diagnostic clients on the simulator

LANE_CASES = [
    # DFSSSP needs two layers on this torus (per-pair SLs); Nue's per-destination layers.
    pytest.param("dfsssp", ["torus", "--dims", "3x3", "--hosts-per-router", "2"], id="dfsssp-torus-3x3"),
    pytest.param("nue", ["irregular", "--switches", "8", "--max-links", "4", "--hosts-per-switch", "2", "--seed", "3"],
                 id="nue-irregular-8"),
]


def _field(text: str, name: str) -> int:
    m = re.search(rf"^\s*{name}\.+(\S+)", text, re.M)
    assert m, f"no {name} in:\n{text}"
    return int(m.group(1), 0)


def _injection_vc(injection: dict, s: int, d: int) -> int:
    kind = injection["kind"]
    if kind == "zero":
        return 0
    if kind == "per_source":
        return injection["vcs"][s]
    if kind == "per_destination":
        return injection["vcs"][d]
    return injection["vcs"][s][d]


def _sl2vl(text: str) -> dict[tuple[int, int], list[int]]:
    """``smpquery sl2vl`` output: ``{(in port, out port): [VL of SL 0..15]}``."""
    rows = {}
    for m in re.finditer(r"ports: in\s+(\d+), out\s+(\d+):\s*\|(.*)\|", text):
        rows[int(m.group(1)), int(m.group(2))] = [int(v) for v in m.group(3).split("|")]
    return rows


@pytest.mark.parametrize("engine, generator", LANE_CASES)
def test_opensm_installs_netweave_lanes(tools, tmp_path, engine, generator):
    nw = tools["netweave"]
    netfile, topo = tmp_path / "fabric.net", tmp_path / "fabric.json"
    _run([nw, "topo", *generator, "-o", str(netfile)], CLI_TIMEOUT)
    _run([nw, "topo", *generator, "-o", str(topo)], CLI_TIMEOUT)
    fabric = json.loads(topo.read_text())
    routes, osm = tmp_path / "R.json", tmp_path / "opensm"
    _run([nw, "route", engine, str(topo), "--vcs", "4", "-o", str(routes), "--opensm", str(osm)], CLI_TIMEOUT)
    table = json.loads(routes.read_text())
    lanes = table["num_vcs"]
    assert lanes >= 2, f"{engine} should need several lanes on this fabric"
    exported, _ = _lfts((osm / "opensm-lfts.dump").read_text())
    cache, switch_lids, host_lids = _ibsim_lids(fabric)
    host_lid_list = list(host_lids.values())  # host order
    hosts = len(host_lid_list)
    pairs = [(s, d) for s in range(hosts) for d in range(hosts) if s != d]

    with _ibsim(tools, netfile, tmp_path, _limits(fabric)) as sim:
        env = sim["env"]
        with _subnet_manager(tools, env, tmp_path, osm / "opensm.conf", cache) as log:
            assert "file tables configured on all switches" in log.read_text(errors="replace")

            def path_sl(pair):
                s, d = pair
                out = _run([tools["saquery"], "-p", "--src-to-dst", f"{host_lid_list[s]}:{host_lid_list[d]}"],
                           QUERY_TIMEOUT, env=env, cwd=tmp_path).stdout
                assert _field(out, "slid") == host_lid_list[s] and _field(out, "dlid") == host_lid_list[d], out
                return _field(out, "sl")

            def switch_query(args):
                return _run(args, QUERY_TIMEOUT, env=env, cwd=tmp_path).stdout

            with ThreadPoolExecutor(QUERY_WORKERS) as pool:
                sls = dict(zip(pairs, pool.map(path_sl, pairs)))
                radix = {lid: n["ports"] for lid, n in zip(switch_lids.values(),
                                                           (n for n in fabric["nodes"] if n["kind"] == "switch"))}
                sl2vl_jobs = [(lid, port) for lid in switch_lids.values() for port in range(1, radix[lid] + 1)]
                sl2vl_text = list(pool.map(switch_query, ([tools["smpquery"], "sl2vl", str(lid), str(port)]
                                                          for lid, port in sl2vl_jobs)))
                ibroute_text = list(pool.map(switch_query, ([tools["ibroute"], str(lid)] for lid in switch_lids.values())))

    # Every path record carries the SL of our table: its lane.
    want = {(s, d): _injection_vc(table["injection"], s, d) for s, d in pairs}
    wrong = {p: (sls[p], want[p]) for p in pairs if sls[p] != want[p]}
    assert not wrong, f"{len(wrong)} of {len(pairs)} path records have another SL (got, want): {list(wrong.items())[:5]}"
    assert set(sls.values()) == set(range(lanes))
    # Every switch maps SL n to VL n on every (in, out) port pair it has, for every lane in use.
    checked = 0
    for text in sl2vl_text:
        for ports, vls in _sl2vl(text).items():
            assert vls[:lanes] == list(range(lanes)), (ports, vls, text)
            checked += 1
    assert checked > 0
    # Every switch holds our forwarding tables (ibroute reads them through the SM's LIDs).
    installed = {}
    for text in ibroute_text:
        installed.update(_lfts(text)[0])
    assert installed == exported

    # Imported with the policy, the installed tables are our routing, proven on the same lanes.
    (tmp_path / "installed.lft").write_text("\n".join(ibroute_text))
    back = tmp_path / "R2.json"
    _run([nw, "route", "import-lft", str(topo), str(tmp_path / "installed.lft"), "--qos", str(osm / "qos-policy.conf"),
          "-o", str(back)], CLI_TIMEOUT)
    proof = _check(tools, topo, back)
    assert proof["deadlock_free"] is True and proof["vcs_used"] == lanes, proof
    assert json.loads(back.read_text())["out_port"] == table["out_port"]


def test_a_torus_dateline_is_handed_to_torus_2qos(tools, tmp_path):
    """dor changes lanes at the dateline: the export says OpenSM cannot take that, writes no
    tables, and configures torus-2QoS, which routes the simulated torus and hands out SLs."""
    nw = tools["netweave"]
    generator = ["torus", "--dims", "4x4", "--hosts-per-router", "1"]
    netfile, topo = tmp_path / "fabric.net", tmp_path / "fabric.json"
    _run([nw, "topo", *generator, "-o", str(netfile)], CLI_TIMEOUT)
    _run([nw, "topo", *generator, "-o", str(topo)], CLI_TIMEOUT)
    fabric = json.loads(topo.read_text())
    osm = tmp_path / "opensm"
    proc = _run([nw, "route", "dor", str(topo), "--opensm", str(osm)], CLI_TIMEOUT)
    assert "OpenSM cannot install" in proc.stderr and "torus-2QoS" in proc.stderr, proc.stderr
    conf = (osm / "opensm.conf").read_text()
    assert conf.startswith("#") and "NOT INSTALLABLE" in conf and "routing_engine torus-2QoS" in conf
    assert not (osm / "opensm-lfts.dump").exists()
    cache, _, host_lids = _ibsim_lids(fabric)
    lids = list(host_lids.values())
    with _ibsim(tools, netfile, tmp_path, _limits(fabric)) as sim:
        env = sim["env"]
        with _subnet_manager(tools, env, tmp_path, osm / "opensm.conf", cache) as log:
            text = log.read_text(errors="replace")
            # Paths from host 0 that cross a dateline get another SL than those that do not.
            sls = {_field(_run([tools["saquery"], "-p", "--src-to-dst", f"{lids[0]}:{d}"], QUERY_TIMEOUT, env=env,
                               cwd=tmp_path).stdout, "sl") for d in lids[1:]}
    # The torus-2QoS engine itself routed the fabric, not a fallback.
    assert "torus-2QoS" in text and "fall" not in text.lower(), text[-3000:]
    assert len(sls) >= 2, sls
