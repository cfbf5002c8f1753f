"""The core figures of the top table of benches/README.md, measured on this tree and on an earlier
git revision in the same run, as ratios: the check that a change left speed alone.

    .venv/bin/python benches/against_revision.py REV [--rounds 3] [--only routing,analysis,...] [--large]
        [--work DIR]

REV is built in a temporary git worktree (its own Cargo target folder, about five minutes on two
cores), and every measurement runs in a fresh process against one tree or the other, the two
interleaved round by round so both see the same machine load. A figure the revision cannot
produce (its Python API predates the call) is reported as absent. Figures are CPU seconds of the
measured call alone (building the topology or the routes it needs is left out; calls under a
second are repeated and the fastest kept), or a rate where the table gives one. Reported: the
median of each side and new/old as "time ratio" (below 1: this tree is faster). A figure more
than 5 % slower is flagged.

Groups (the table's rows they stand for):
  routing   up*/down*, DL, Nue, LASH, DFSSSP on random 8-regular fabrics of 500 and 2,000
            switches (4 hosts each) and on the 16x16x16 torus (`--large`: also 10,000 switches,
            2 hosts each)
  analysis  the exact analysis of shift on LSFT q=17 (30.5 M flows)
  flitsim   the flit simulator's speed configuration (16x16 torus, uniform at 0.007)
  mapper    paper 003's case: annealing evaluations per CPU second (one chain), and the
            starting placement (BISEM and the baselines)
  scheduler paper 004's scheduler: 64-host all-to-all with relaying, and 1,024 hosts

The MPI runtime (C) and the peers' figures do not depend on the Rust core and are not rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Imported from whichever tree PYTHONPATH names (the driver sets it for each child).
from netweave import _core, analysis, flitsim, mapping, routing, topology, traffic

REPO = Path(__file__).resolve().parent.parent


# --- kernels: run in a child process whose PYTHONPATH picks the tree --------------------------

def _cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def _best(fn, budget: float = 1.0) -> float:
    """The fastest of repeated calls until `budget` CPU seconds are spent (one call when it takes
    longer): a single first call in a fresh process is too noisy for figures of milliseconds."""
    times = [_cpu(fn)]
    while sum(times) < budget and len(times) < 50:
        times.append(_cpu(fn))
    return min(times)


def _routing_case(case: str):
    if case.startswith("rr"):
        switches = int(case[2:])
        return topology.random_regular(switches, 8, 2 if switches >= 10_000 else 4, 1)
    return topology.torus([16, 16, 16], 1)


def kernel(name: str) -> dict:
    """One measurement: ``{"value": float, "unit": str, "higher_is_better": bool}``."""
    group, _, arg = name.partition(":")
    if group == "route":
        case, engine = arg.split("/")
        topo = _routing_case(case)
        return {"value": _best(lambda: routing.route(topo, engine, 8)), "unit": "CPU s (best of calls)"}
    if group == "analysis":
        topo = topology.latin_square_fat_tree(17)
        routes = routing.route(topo, "lsft")
        schedule = _core.shift_alltoall(topo.num_hosts, 1 << 20)
        return {"value": _best(lambda: analysis.analyze(routes, schedule)), "unit": "CPU s (best of calls)"}
    if group == "flitsim":
        config = {"topology": "torus", "k": 16, "n": 2, "routing_function": "dim_order", "num_vcs": 2,
                  "vc_buf_size": 8, "packet_size": 10, "traffic": "uniform", "injection_rate": 0.007,
                  "sample_period": 10000}
        if "threads" in flitsim.KEYS:  # one core, as trees without threads run it
            config["threads"] = 1
        result = {}
        cpu = _cpu(lambda: result.update(flitsim.simulate(config)))
        return {"value": result["cycles"] / cpu, "unit": "cycles per CPU s", "higher_is_better": True}
    if group == "mapper":
        topo = topology.torus([16, 16, 16], 1)
        net = mapping.MapNetwork(routing.route(topo, "dor", select="low-port"))
        pattern = mapping.Pattern.bruck(4096, 2048)
        start = mapping.baseline(net, pattern, "identity")
        if arg == "start":
            return {"value": _best(lambda: mapping.start_placement(net, pattern, "best")),
                    "unit": "CPU s (best of calls)"}
        budget = 200_000
        out = {}
        cpu = _cpu(lambda: out.update(r=mapping.optimize(net, pattern, start, seconds=None, evaluations=budget,
                                                           replicas=1, seed=1)))
        return {"value": out["r"].evaluations / cpu, "unit": "evaluations per CPU s", "higher_is_better": True}
    if group == "scheduler":
        hosts = int(arg)
        topo = topology.switch_tree([hosts // 16], 16, [10.0], [5000.0], 1.0, 5000.0)
        repeat = 20 if hosts <= 64 else 1
        best = min(traffic.contention_free(topo, "alltoall", 65536, relay="departure")[1]["scheduling_seconds"]
                   for _ in range(repeat))
        return {"value": best, "unit": "s in the core (best of runs)"}
    raise SystemExit(f"unknown kernel '{name}'")


def kernels(groups: list[str], large: bool) -> list[str]:
    names = []
    if "routing" in groups:
        engines = ["updown", "dl", "nue", "lash", "dfsssp"]
        cases = ["rr500", "rr2000", "torus16"] + (["rr10000"] if large else [])
        names += [f"route:{c}/{e}" for c in cases for e in engines]
    if "analysis" in groups:
        names.append("analysis:lsft17")
    if "flitsim" in groups:
        names.append("flitsim:torus16")
    if "mapper" in groups:
        names += ["mapper:anneal", "mapper:start"]
    if "scheduler" in groups:
        names += ["scheduler:64", "scheduler:1024"]
    return names


# --- the driver -------------------------------------------------------------------------------

def build_revision(rev: str, work: Path) -> Path:
    """Check `rev` out into `work/tree` and build its extension in place; returns its python dir.
    A tree already there at `rev` (from an earlier ``--work`` run) is reused."""
    tree = work / "tree"
    wanted = subprocess.run(["git", "-C", str(REPO), "rev-parse", rev], check=True, capture_output=True, text=True)
    if tree.exists():
        have = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True)
        if have.stdout == wanted.stdout and (tree / "python" / "netweave" / "_core.abi3.so").exists():
            return tree / "python"
        raise SystemExit(f"{work} holds another build; give an empty --work folder")
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev], check=True,
                   capture_output=True)
    env = dict(os.environ, CARGO_TARGET_DIR=str(work / "target"))
    print(f"building {rev} (release) ...", flush=True)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "netweave-py"], cwd=tree, env=env, check=True)
    shutil.copy(work / "target" / "release" / "lib_core.so", tree / "python" / "netweave" / "_core.abi3.so")
    return tree / "python"


def measure(name: str, python_dir: Path) -> dict | None:
    """One kernel in a fresh process on the tree at `python_dir`; None if that tree lacks it."""
    # One worker thread, as the table's figures are taken.
    env = dict(os.environ, PYTHONPATH=str(python_dir), RAYON_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, __file__, "--kernel", name], env=env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        if python_dir != REPO / "python" and "AttributeError" in proc.stderr:
            return None  # the revision predates what this figure calls
        raise SystemExit(f"{name} failed under {python_dir}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", nargs="?", help="The git revision to compare against (e.g. a commit before a refactor).")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="routing,analysis,flitsim,mapper,scheduler")
    ap.add_argument("--large", action="store_true", help="Add the 10,000-switch routing case (minutes per round).")
    ap.add_argument("--work", type=Path, help="Build the revision here and keep it for later runs "
                    "(default: a temporary folder, removed at the end).")
    ap.add_argument("--kernel", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.kernel:
        print(json.dumps(kernel(args.kernel)))
        return
    if not args.rev:
        ap.error("give the revision to compare against")
    names = kernels(args.only.split(","), args.large)
    work = args.work or Path(tempfile.mkdtemp(prefix="netweave-against-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        old_python = build_revision(args.rev, work)
        trees = {"old": old_python, "new": REPO / "python"}
        values: dict[str, dict[str, list[float]]] = {n: {"old": [], "new": []} for n in names}
        units: dict[str, dict] = {}
        for r in range(args.rounds):
            for name in names:
                # Alternate which tree goes first so neither always runs on a warmer machine.
                for side in (("old", "new") if (r + names.index(name)) % 2 == 0 else ("new", "old")):
                    m = measure(name, trees[side])
                    if m is not None:
                        values[name][side].append(m["value"])
                        units[name] = m
            print(f"round {r + 1}/{args.rounds} done", flush=True)
        rows = []
        print(f"\n{'figure':<26}{'unit':<24}{args.rev[:10]:>14}{'this tree':>14}{'time ratio':>12}")
        for name in names:
            if not values[name]["old"]:
                print(f"{name:<26}{units[name]['unit']:<24}{'absent':>14}{statistics.median(values[name]['new']):>14.4g}")
                continue
            old, new = (statistics.median(values[name][s]) for s in ("old", "new"))
            higher = units[name].get("higher_is_better", False)
            ratio = old / new if higher else new / old
            flag = "  slower by more than 5 %" if ratio > 1.05 else ""
            print(f"{name:<26}{units[name]['unit']:<24}{old:>14.4g}{new:>14.4g}{ratio:>12.3f}{flag}")
            rows.append({"figure": name, "unit": units[name]["unit"], "old": old, "new": new, "time_ratio": ratio,
                         "old_runs": values[name]["old"], "new_runs": values[name]["new"]})
        print(json.dumps({"revision": args.rev, "rounds": args.rounds, "rows": rows}))
    finally:
        if args.work is None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(work / "tree")],
                           capture_output=True)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
