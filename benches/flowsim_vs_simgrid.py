"""netweave's flow simulator side by side with SimGrid's max-min network model.

For each platform/workload pair, netweave simulates the schedule; the same fabric (one SimGrid
link per directed channel, netweave's routed paths as SimGrid routes) and the same messages are
then run in SimGrid with its CM02 model stripped of TCP corrections (latency and bandwidth
factors 1, no cross-traffic, no TCP window bound), i.e. pure max-min sharing. The table lists
both makespans, their relative difference and both wall-clock times.

Usage (run with the Python that has netweave installed)::

    python benches/flowsim_vs_simgrid.py [--json] [--simgrid-python PYTHON]

SimGrid is taken from whatever Python interpreter can ``import simgrid`` (Debian package
``python3-simgrid``); the script installs nothing and says what is missing.

Semantics that differ and how the cases avoid them: SimGrid pays a message's latency before it
takes bandwidth, netweave after its tail has left; both give ``L + M/B`` alone, and with
latencies of tens of ns against transfers of tens of µs the difference is far below 0.1 %.
The asynchronous case sends one message at a time per host in both simulators.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIMGRID_CONFIG = [
    "network/model:CM02",
    "network/latency-factor:1",
    "network/bandwidth-factor:1",
    "network/weight-S:0",
    "network/crosstraffic:0",
    "network/TCP-gamma:1e30",
]


# --------------------------------------------------------------------------------------------
# SimGrid side: runs under an interpreter with simgrid, without netweave.


def run_in_simgrid(case_dir: str) -> None:
    from simgrid import Actor, Comm, Engine, this_actor  # noqa: F401

    d = Path(case_dir)
    work = json.loads((d / "workload.json").read_text())
    e = Engine([sys.argv[0]] + [f"--cfg={c}" for c in SIMGRID_CONFIG] + ["--log=root.thres:critical"])
    e.load_platform(str(d / "platform.xml"))
    hosts = {h.name: h for h in e.all_hosts}
    phases = work["phases"]

    def phase_sync():
        for phase in phases:
            comms = [Comm.sendto_async(hosts[s], hosts[t], b) for s, t, b in phase]
            Comm.wait_all(comms)

    def sender(name):
        def run():
            for phase in phases:
                for s, t, b in phase:
                    if s == name:
                        Comm.sendto(hosts[s], hosts[t], b)

        return run

    if work["executor"] == "sync":
        Actor.create("controller", hosts[work["hosts"][0]], phase_sync)
    else:
        for h in work["hosts"]:
            Actor.create(f"send-{h}", hosts[h], sender(h))
    t0 = time.perf_counter()
    e.run()
    print(json.dumps({"makespan_s": e.clock, "wall_s": time.perf_counter() - t0}))


# --------------------------------------------------------------------------------------------
# netweave side.


def _cases():
    import numpy as np

    from netweave import routing, topology, traffic
    from netweave._core import Schedule

    def with_links(topo, gbps, ns):
        g = topology.to_networkx(topo)
        for _, _, d in g.edges(data=True):
            d["bandwidth_gbps"], d["latency_ns"] = gbps, ns
        return topology.from_networkx(g)

    rng = np.random.default_rng(1)
    cases = []
    t = with_links(topology.latin_square_fat_tree(3), 32.0, 100.0)
    cases.append(("LSFT q=3 (52 hosts), lsft routes, shift all-to-all 1 MiB, sync", t, routing.route(t, "lsft"),
                  traffic.alltoall(t.num_hosts, 1 << 20), "sync"))
    t = with_links(topology.torus([4, 4, 4], 1), 40.0, 120.0)
    cases.append(("torus 4x4x4, DOR, shift all-to-all 512 KiB, sync", t, routing.route(t, "dor"),
                  traffic.alltoall(64, 1 << 19), "sync"))
    t = with_links(topology.torus([8, 8], 1), 100.0, 50.0)
    n = t.num_hosts
    phases = [[(s, (s + step) % n, int(rng.integers(1, 8)) << 18) for s in range(n)] for step in (1, 3, 8, 17, 31)]
    cases.append(("torus 8x8, DOR, 5 shifts of random sizes (256 KiB-1.75 MiB), sync", t, routing.route(t, "dor"),
                  Schedule("random-shifts", n, phases), "sync"))
    t = with_links(topology.fat_tree(4, 2), 100.0, 100.0)
    cases.append(("fat-tree degree 4, 2 levels, minhop, shift all-to-all 1 MiB, async NCT 1", t,
                  routing.route(t, "minhop"), traffic.alltoall(t.num_hosts, 1 << 20), "async"))
    return cases


def _platform(topo, routes, pairs) -> str:
    specs = topo.link_specs()
    lines = [
        "<?xml version='1.0'?>",
        '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
        '<platform version="4.1">',
        '<zone id="fabric" routing="Full">',
    ]
    lines += [f'  <host id="h{h}" speed="1Gf"/>' for h in range(topo.num_hosts)]
    used = set()
    routes_xml = []
    for s, d in sorted(pairs):
        path = routes.path(s, d)
        used.update(path)
        ctn = "".join(f'<link_ctn id="c{c}"/>' for c in path)
        routes_xml.append(f'  <route src="h{s}" dst="h{d}" symmetrical="NO">{ctn}</route>')
    for c in sorted(used):
        gbps, ns = float(specs[c // 2][0]), float(specs[c // 2][1])
        lines.append(f'  <link id="c{c}" bandwidth="{gbps * 1e9 / 8:.17g}Bps" latency="{ns * 1e-9:.17g}s"/>')
    lines += routes_xml + ["</zone>", "</platform>"]
    return "\n".join(lines) + "\n"


def _find_simgrid_python(explicit: str | None) -> str | None:
    candidates = [explicit] if explicit else [sys.executable, shutil.which("python3"), "/usr/bin/python3"]
    for c in candidates:
        if c and subprocess.run([c, "-c", "import simgrid"], capture_output=True).returncode == 0:
            return c
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--simgrid-python", help="interpreter that can import simgrid")
    ap.add_argument("--simgrid-case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.simgrid_case:
        run_in_simgrid(args.simgrid_case)
        return 0
    try:
        from netweave import flowsim
    except ImportError:
        print("missing: the netweave Python package (run `make setup` and use .venv/bin/python)", file=sys.stderr)
        return 1
    sg_python = _find_simgrid_python(args.simgrid_python)
    if sg_python is None:
        print("missing: SimGrid's Python bindings (Debian package python3-simgrid); "
              "only netweave's figures are printed", file=sys.stderr)
    rows = []
    for name, topo, routes, sched, executor in _cases():
        t0 = time.perf_counter()
        rep = flowsim.simulate(routes, sched, executor=executor)
        nw_wall = time.perf_counter() - t0
        row = {"case": name, "flows": sched.num_messages, "netweave_s": rep["makespan_s"], "netweave_wall_s": nw_wall}
        if sg_python:
            placement = list(sched.placement)
            phases = [[(f"h{placement[s]}", f"h{placement[d]}", b) for s, d, b in sched.phase(p) if placement[s] != placement[d]]
                      for p in range(sched.num_phases)]
            pairs = {(int(s[1:]), int(d[1:])) for ph in phases for s, d, _ in ph}
            with tempfile.TemporaryDirectory() as tmp:
                Path(tmp, "platform.xml").write_text(_platform(topo, routes, pairs))
                hosts = sorted({s for ph in phases for s, _, _ in ph}, key=lambda h: int(h[1:]))
                Path(tmp, "workload.json").write_text(json.dumps({"executor": executor, "phases": phases, "hosts": hosts}))
                proc = subprocess.run([sg_python, __file__, "--simgrid-case", tmp], capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"SimGrid failed on {name}: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            else:
                sg = json.loads(proc.stdout.strip().splitlines()[-1])
                row.update(simgrid_s=sg["makespan_s"], simgrid_wall_s=sg["wall_s"],
                           rel_diff=rep["makespan_s"] / sg["makespan_s"] - 1)
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'case':<78} {'flows':>6} {'netweave ms':>12} {'SimGrid ms':>11} {'diff':>8} {'nw wall s':>9} {'SG wall s':>9}")
    for r in rows:
        sg = f"{r['simgrid_s'] * 1e3:11.5f}" if "simgrid_s" in r else f"{'-':>11}"
        diff = f"{r['rel_diff'] * 100:+7.3f}%" if "rel_diff" in r else f"{'-':>8}"
        sgw = f"{r['simgrid_wall_s']:9.3f}" if "simgrid_wall_s" in r else f"{'-':>9}"
        print(f"{r['case']:<78} {r['flows']:>6} {r['netweave_s'] * 1e3:12.5f} {sg} {diff} {r['netweave_wall_s']:9.3f} {sgw}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
