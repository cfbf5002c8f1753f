"""Routing engines: netweave against OpenSM, on the same fabrics, measured in the same run.

    .venv/bin/python benches/routing_vs_opensm.py                      # N = 500, 2000 and a 16x16x16 torus
    .venv/bin/python benches/routing_vs_opensm.py --sizes 500 --engines updown,nue
    .venv/bin/python benches/routing_vs_opensm.py --large               # adds N = 10000

Fabrics: random regular switch graphs (``netweave topo random-regular --switches N --degree 8
--hosts-per-switch 4``) and a 16x16x16 torus with one host per router. Engines, by netweave
name and the OpenSM routing engine run against it: updown/updn, nue/nue, lash/lash,
dfsssp/dfsssp.

netweave: ``netweave.routing.route(topo, engine, vcs)`` in a forked child process (so that
``--timeout`` can stop it too), timed with ``time.perf_counter`` around that call alone (the
topology is built beforehand). VCs is the routing's ``num_vcs``; a failure is the engine's
one-line error (e.g. "lash needs 11 VCs …").

OpenSM: the fabric is written as an ibsim net file, loaded by ``ibsim -s -n`` (with ``-N -S -P``
raised to fit), and OpenSM configures it once under umad2sim::

    IBSIM_SOCKNAME=… OSM_CACHE_DIR=… LD_PRELOAD=…/libumad2sim.so \\
      opensm -F empty.conf -o -R ENGINE,no_fallback [-a roots | -Q --nue_max_num_vls VCS] \\
             -f osm.log -D 0x07 --dump_files_dir DIR

``-D 0x07`` adds VERBOSE to the default ERROR+INFO so the log has the line OpenSM writes when
it starts a routing engine ("building routing with 'ENGINE' routing algorithm...", VERBOSE)
next to the one it writes when the engine is done ("ENGINE tables configured on all
switches", INFO). **OpenSM routing s** is the difference of those two log timestamps
(microsecond resolution): the routing engine alone, the figure compared with netweave's time
(**ratio** = OpenSM routing / netweave). **OpenSM total s** runs from OpenSM's first log line
to "SUBNET UP" and adds fabric discovery, LID assignment and uploading the tables through
ibsim. up*/down* gets the root netweave uses (switch 0, ibsim GUID 0x200000) through a root
GUID file, since OpenSM finds no roots on a non-tree fabric; Nue gets the same VL budget
(it needs QoS on, ``-Q``, to use more than one). LASH and DFSSSP use the VLs the ports offer:
ibsim's ports offer 8. VLs is what OpenSM logs ("Lanes needed", "Virtual Lanes needed", or what a
failing engine says it would need); for Nue, which does not log it at INFO, the budget it was
given ("<=8"). For a failing netweave engine, VCs is what its error says it needs.

OpenSM with ``-o`` retries forever when routing fails, so its log is watched: "No routing
engine able" ends the run as a failure with OpenSM's own error (e.g. "Not enough VLs available
(avail=8, needed=9)"), and ``--timeout`` bounds every run. ibsim and OpenSM are always
stopped. ibsim's switches forward at most 0x7800 = 30720 LIDs (OpenSM logs "Subnet max
unicast lid is 0x7800" and runs out of LIDs beyond), so OpenSM is not run on a fabric with more
switches and hosts than that; N = 10000 therefore uses ``--large-hosts-per-switch`` (default 2:
30000 LIDs) instead of 4.

Engines without an OpenSM peer (dl, sssp) run on netweave's side only.

This runs outside the test suite. Debian packages: ibsim-utils, opensm.
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

OPENSM_ENGINE = {"updown": "updn", "nue": "nue", "lash": "lash", "dfsssp": "dfsssp", "dl": None, "sssp": None}
MAX_UNICAST_LID = 0xBFFF
# ibsim's switches report a linear forwarding table of 0x7800 entries ("Subnet max unicast lid
# is 0x7800"), so OpenSM runs out of LIDs beyond that many switches and hosts under ibsim.
IBSIM_MAX_LID = 0x7800
IBSIM_SWITCH_GUID_BASE = 0x200000
IBSIM_DEFAULT_NODES, IBSIM_DEFAULT_SWITCHES, IBSIM_DEFAULT_PORTS = 2048, 256, 256 * 36 + 2048 * 2
IBSIM_READY_TIMEOUT = 900  # s; ibsim parses big net files slowly

_STAMP = re.compile(r"^(\w{3} +\d+ \d\d:\d\d:\d\d) (\d{6}) ")


@dataclass
class Outcome:
    ok: bool = False
    seconds: float | None = None
    vcs: str = ""
    note: str = ""
    total: float | None = None  # OpenSM only: first log line to SUBNET UP
    extra: dict = field(default_factory=dict)


# --- tools -----------------------------------------------------------------------------------


def which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(["/usr/sbin", "/sbin", "/usr/local/sbin"]))


def umad2sim() -> str | None:
    for c in glob.glob("/usr/lib/*/umad2sim/libumad2sim.so") + glob.glob("/usr/lib*/umad2sim/libumad2sim.so"):
        if os.path.isfile(c):
            return c
    return None


def stop(proc: subprocess.Popen) -> None:
    """Terminate a child we started, then kill it if it lingers."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


# --- netweave --------------------------------------------------------------------------------


def _route_child(topo, engine: str, vcs: int, check: bool, conn) -> None:
    """In a forked child (which shares the parent's fabric): time the engine alone, send back
    an Outcome."""
    from netweave import routing

    t0 = time.perf_counter()
    try:
        routes = routing.route(topo, engine, vcs)
    except Exception as e:  # the engine's one-line error, e.g. "lash needs 11 VCs on this fabric, …"
        m = re.search(r"needs (more than )?(\d+) VCs", str(e))
        needed = "" if m is None else (">" if m.group(1) else "") + m.group(2)
        conn.send(Outcome(ok=False, seconds=time.perf_counter() - t0, vcs=needed, note=str(e)))
        return
    out = Outcome(ok=True, seconds=time.perf_counter() - t0, vcs=str(routes.num_vcs))
    if check:
        t1 = time.perf_counter()
        proof = routes.check()
        out.extra["check_s"] = time.perf_counter() - t1
        out.note = "deadlock-free" if proof["deadlock_free"] else "CAN DEADLOCK"
    conn.send(out)


def run_netweave(topo, engine: str, vcs: int, check: bool, timeout: float) -> Outcome:
    """netweave's engine in a forked child, so that `timeout` can stop it like OpenSM's."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_route_child, args=(topo, engine, vcs, check, send))
    child.start()
    send.close()
    try:
        if recv.poll(timeout):
            return recv.recv()
        return Outcome(note=f"no result within {timeout:.0f} s" if child.is_alive() else "the engine process died")
    except EOFError:
        return Outcome(note=f"the engine process died (exit code {child.exitcode})")
    finally:
        if child.is_alive():
            child.terminate()
        child.join(15)
        if child.is_alive():
            child.kill()
            child.join()


# --- OpenSM through ibsim --------------------------------------------------------------------


def stamp(line: str) -> dt.datetime | None:
    """Timestamp of an OpenSM log line ("Nov 21 23:37:20 826796 [...] ...")."""
    m = _STAMP.match(line)
    if not m:
        return None
    t = dt.datetime.strptime(f"2000 {m.group(1)}", "%Y %b %d %H:%M:%S")
    return t + dt.timedelta(microseconds=int(m.group(2)))


def seconds(a: dt.datetime, b: dt.datetime) -> float:
    d = (b - a).total_seconds()
    return d + 86400 if d < 0 else d  # a run across midnight of a year's end is not handled


def ibsim_limits(topo) -> list[str]:
    ports = sum(topo.radix(n) for n in range(topo.num_nodes)) + topo.num_switches
    return [
        "-N", str(max(IBSIM_DEFAULT_NODES, topo.num_nodes)),
        "-S", str(max(IBSIM_DEFAULT_SWITCHES, topo.num_switches)),
        "-P", str(max(IBSIM_DEFAULT_PORTS, ports)),
    ]


def parse_opensm_log(text: str, engine: str, vcs: int) -> Outcome:
    lines = text.splitlines()
    first = next((stamp(line) for line in lines if stamp(line)), None)
    start = configured = up = failed = None
    error = ""
    vls = ""
    for line in lines:
        if f"building routing with '{engine}'" in line and start is None:
            start = stamp(line)
        elif f"{engine} tables configured on all switches" in line and configured is None:
            configured = stamp(line)
        elif "SUBNET UP" in line and up is None and stamp(line):
            up = stamp(line)
        elif "No routing engine able" in line and failed is None:
            failed = stamp(line)
        elif " ERR " in line and not error:
            error = line.split(" -> ", 1)[-1].strip()
        m = re.search(r"Lanes needed: (\d+)|Lane requirements \((\d+)\)", line)
        if m and not vls:
            vls = m.group(1) or m.group(2)
    if engine == "updn":
        vls = "1"
    elif engine == "nue":
        vls = f"<={vcs}"
    out = Outcome(vcs=vls)
    if start and configured:
        out.ok = up is not None
        out.seconds = seconds(start, configured)
        out.total = seconds(first, up) if (first and up) else None
    elif start and failed:
        out.seconds = seconds(start, failed)
        out.note = error or "no routing engine could configure the fabric"
    return out


def run_opensm(topo, netfile: Path, engine: str, vcs: int, workdir: Path, tools: dict, timeout: float) -> Outcome:
    if topo.num_nodes > min(MAX_UNICAST_LID, IBSIM_MAX_LID):
        return Outcome(note=f"{topo.num_nodes} nodes exceed the {IBSIM_MAX_LID} LIDs ibsim's switches can forward")
    osm_engine = OPENSM_ENGINE[engine]
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "empty.conf").write_text("")
    cache, dumps = workdir / "cache", workdir / "dump"
    cache.mkdir(exist_ok=True)
    dumps.mkdir(exist_ok=True)
    extra: list[str] = []
    if osm_engine == "updn":
        roots = workdir / "roots.txt"
        roots.write_text(f"0x{IBSIM_SWITCH_GUID_BASE:016x}\n")  # switch 0, netweave's default root
        extra = ["-a", str(roots)]
    elif osm_engine == "nue":
        extra = ["-Q", "--nue_max_num_vls", str(vcs)]
    env = {**os.environ, "IBSIM_SOCKNAME": f"nwb{os.getpid()}{uuid.uuid4().hex[:10]}"}
    sim_out = workdir / "ibsim.out"
    log = workdir / "opensm.log"
    with open(sim_out, "w") as so:
        sim = subprocess.Popen(
            [tools["ibsim"], "-s", "-n", *ibsim_limits(topo), str(netfile)],
            stdin=subprocess.DEVNULL, stdout=so, stderr=subprocess.STDOUT, env=env, cwd=workdir,
            start_new_session=True,
        )
        osm = None
        try:
            deadline = time.monotonic() + IBSIM_READY_TIMEOUT
            while "Network simulator ready." not in sim_out.read_text(errors="replace"):
                if sim.poll() is not None or time.monotonic() > deadline:
                    return Outcome(note="ibsim did not come up: " + sim_out.read_text(errors="replace")[-300:])
                time.sleep(0.1)
            osm_env = {**env, "OSM_CACHE_DIR": str(cache), "OSM_TMP_DIR": str(dumps), "LD_PRELOAD": tools["umad2sim"]}
            cmd = [
                tools["opensm"], "-F", str(workdir / "empty.conf"), "-o", "-R", f"{osm_engine},no_fallback", *extra,
                "-f", str(log), "-D", "0x07", "--dump_files_dir", str(dumps),
            ]
            with open(workdir / "opensm.out", "w") as oo:
                osm = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=oo, stderr=subprocess.STDOUT, env=osm_env, cwd=workdir,
                    start_new_session=True,
                )
                deadline = time.monotonic() + timeout
                timed_out = False
                seen, carry = 0, b""
                while osm.poll() is None:
                    # Scan only what was appended since the last look (the log of a big
                    # fabric grows by megabytes a second), keeping a line's worth of overlap.
                    if log.exists():
                        with open(log, "rb") as f:
                            f.seek(seen)
                            chunk = f.read()
                        seen += len(chunk)
                        if b"No routing engine able" in carry + chunk:
                            break
                        carry = (carry + chunk)[-256:]
                    if time.monotonic() > deadline:
                        timed_out = True
                        break
                    time.sleep(0.2)
        finally:
            if osm is not None:
                stop(osm)
            stop(sim)
    out = parse_opensm_log(log.read_text(errors="replace") if log.exists() else "", osm_engine, vcs)
    if timed_out and not out.ok:
        out.note = out.note or f"no result within {timeout:.0f} s"
    return out


# --- main ------------------------------------------------------------------------------------


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def verdict(o: Outcome) -> str:
    if o.ok:
        return "yes"
    return "no" if (o.seconds is not None or o.note) else "-"  # "-": not run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engines", default="updown,dl,nue,lash,dfsssp,sssp", help="netweave engine names (comma separated)")
    p.add_argument("--sizes", default="500,2000", help="random-regular switch counts (comma separated; empty for none)")
    p.add_argument("--large", action="store_true", help="also N = 10000")
    p.add_argument("--torus", default="16x16x16", help="torus dimensions, or 'none'")
    p.add_argument("--torus-hosts", type=int, default=1, help="hosts per torus router")
    p.add_argument("--degree", type=int, default=8)
    p.add_argument("--hosts-per-switch", type=int, default=4)
    p.add_argument(
        "--large-hosts-per-switch", type=int, default=2,
        help="hosts per switch at N = 10000 (3 or 4 would exceed the 30720 LIDs ibsim's switches forward)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--vcs", type=int, default=8, help="VC budget (netweave) / Nue VL budget (OpenSM)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run (OpenSM, and netweave)")
    p.add_argument("--only", choices=["both", "netweave", "opensm"], default="both")
    p.add_argument("--check", action="store_true", help="also prove netweave's routes deadlock-free (slow on big fabrics)")
    p.add_argument("--workdir", type=Path, help="keep ibsim/OpenSM files here (default: a temporary directory)")
    args = p.parse_args(argv)

    engines = [e for e in args.engines.split(",") if e]
    unknown = [e for e in engines if e not in OPENSM_ENGINE]
    if unknown:
        p.error(f"unknown engine(s) {', '.join(unknown)} (known: {', '.join(OPENSM_ENGINE)})")
    try:
        from netweave import topology
    except ImportError as e:
        print(f"cannot import netweave ({e}); run with the project's .venv/bin/python", file=sys.stderr)
        return 2
    tools = {"ibsim": which("ibsim"), "opensm": which("opensm"), "umad2sim": umad2sim()}
    if args.only != "netweave" and not all(tools.values()):
        missing = [k for k, v in tools.items() if not v]
        print(f"missing {', '.join(missing)} (Debian: ibsim-utils, opensm); use --only netweave", file=sys.stderr)
        return 2

    fabrics = []
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()] + ([10000] if args.large else [])
    for n in sizes:
        hosts = args.large_hosts_per_switch if n >= 10000 else args.hosts_per_switch
        fabrics.append(
            (f"rr N={n} h={hosts}", lambda n=n, h=hosts: topology.random_regular(n, args.degree, h, args.seed))
        )
    if args.torus.lower() != "none":
        dims = topology.parse_dims(args.torus)
        fabrics.append((f"torus {args.torus}", lambda: topology.torus(dims, args.torus_hosts)))

    root = args.workdir or Path(tempfile.mkdtemp(prefix="nw-opensm-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    header = (
        f"{'fabric':<18}{'engine':<8}{'netweave s':>11}{'VCs':>5} {'ok':<4}"
        f"{'OpenSM rt s':>12}{'total s':>9}{'VLs':>5} {'ok':<4}{'ratio':>8}  notes"
    )
    print(header)
    print("-" * len(header))
    try:
        for name, build in fabrics:
            topo = build()
            netfile = None
            if args.only != "netweave":
                netfile = root / (re.sub(r"[^A-Za-z0-9]+", "_", name) + ".net")
                topology.save(topo, netfile)
            for engine in engines:
                ours = (
                    run_netweave(topo, engine, args.vcs, args.check, args.timeout)
                    if args.only != "opensm"
                    else Outcome()
                )
                theirs = Outcome()
                if args.only != "netweave" and OPENSM_ENGINE[engine] is not None:
                    work = root / re.sub(r"[^A-Za-z0-9]+", "_", f"{name}_{engine}")
                    theirs = run_opensm(topo, netfile, engine, args.vcs, work, tools, args.timeout)
                ratio = (
                    f"{theirs.seconds / ours.seconds:.1f}x"
                    if ours.ok and theirs.ok and ours.seconds and theirs.seconds is not None
                    else "-"
                )
                notes = "; ".join(x for x in (
                    f"netweave: {ours.note}" if ours.note else "",
                    f"check {ours.extra['check_s']:.1f} s" if "check_s" in ours.extra else "",
                    f"OpenSM: {theirs.note}" if theirs.note else "",
                ) if x)
                print(
                    f"{name:<18}{engine:<8}{fmt(ours.seconds):>11}{ours.vcs:>5} {verdict(ours):<4}"
                    f"{fmt(theirs.seconds):>12}{fmt(theirs.total):>9}{theirs.vcs:>5} {verdict(theirs):<4}"
                    f"{ratio:>8}  {notes}",
                    flush=True,
                )
    finally:
        if args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
