"""What `netweave plan --out` adds to the plan: the report files, the deployable artifacts and
the page, timed against the plan itself, in one run.

    .venv/bin/python benches/plan_page.py [--cases lsft17,torus16] [--out DIR]

Cases: LSFT of order 17 (5,526 hosts, routed `lsft`) and a 16×16×16 torus (4,096 hosts, `dor`),
all-to-all of 1 MiB per pair. For each: the plan (routing, building every candidate, the exact
analysis and the flow simulation of each) as `netweave plan` runs it, then everything `--out`
adds (`report.json`/`.md`/`phases.csv`/`topology.json`, routes, OpenSM tables, the chosen
schedule as `.nws` and `.json`, `README.md`, and `index.html` with its drawings and heat maps).
Reported: both times, their ratio (target: below 1, the report adds less than the plan takes),
and the page's size. `--only shift,lsft` keeps those candidates alone (the page then draws
fewer heat maps, and the plan is quicker): a quick check, not the figure. The flow simulation dominates the plan at this size (minutes per
candidate); run it when a few tens of minutes are free.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from netweave import plan, report, routing, topology
from netweave.report import html_page

CASES = {
    "lsft17": lambda: topology.latin_square_fat_tree(17),
    "torus16": lambda: topology.torus([16, 16, 16], 1),
}


def measure(name: str, out: Path, only: list[str] | None = None) -> dict:
    topo = CASES[name]()
    t0 = time.perf_counter()
    routes = routing.route(topo, routing.default_engine(topo))
    built = plan.candidates(topo, plan.DEFAULT_BYTES)
    if only:
        built = [c for c in built if c.name in only]
    result = plan.plan(topo, plan.DEFAULT_BYTES, routes=routes, built=built)
    plan_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    report.write_files(result, out, topo.to_text("json"))
    _, uses = plan.write_artifacts(topo, routes, result, out, built=built)
    artifacts_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    page = html_page.plan_page(result, topo, routes, built, None, uses, f"netweave plan {name}.json --out {out}")
    (out / "index.html").write_text(page)
    page_s = time.perf_counter() - t2
    return {
        "case": name, "hosts": topo.num_hosts, "candidates": [c.name for c in built], "plan_s": round(plan_s, 2), "files_s": round(artifacts_s, 2),
        "page_s": round(page_s, 2), "out_over_plan": round((artifacts_s + page_s) / plan_s, 4),
        "page_bytes": (out / "index.html").stat().st_size,
        "folder_bytes": sum(p.stat().st_size for p in out.iterdir()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--only", default=None, help="Comma-separated candidates to keep (a quick check).")
    ap.add_argument("--out", type=Path, default=None, help="Keep the folders here (default: a temporary one).")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="netweave-plan-page-") as tmp:
        base = args.out or Path(tmp)
        for name in args.cases.split(","):
            row = measure(name, base / name, args.only.split(",") if args.only else None)
            rows.append(row)
            print(f"{row['case']:<8} {row['hosts']:>6,} hosts: plan {row['plan_s']:8.1f} s; --out adds "
                  f"{row['files_s']:.1f} s files + {row['page_s']:.1f} s page = {row['out_over_plan']:.3f}x the plan; "
                  f"page {row['page_bytes'] / 2**20:.2f} MiB, folder {row['folder_bytes'] / 2**20:.1f} MiB", flush=True)
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
