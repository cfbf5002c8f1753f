"""`netweave run`: execute a schedule with real processes on this machine (TCP on loopback)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Optional

import typer

from netweave import flowsim, routing, runtime, topology
from netweave.cli.common import JsonOpt, UserError, working


def run_cmd(
    schedule_file: Path = typer.Argument(..., help="Schedule file: a task DAG or a phased schedule (.json or .nws)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the payload every receiver verifies."),
    fragment: int = typer.Option(runtime.DEFAULT_FRAGMENT, "--fragment", help="Bytes per fragment (relays forward fragment by fragment)."),
    timeout: float = typer.Option(runtime.DEFAULT_TIMEOUT, "--timeout", help="Seconds a process waits with nothing moving before it fails."),
    fault: Optional[str] = typer.Option(None, "--fault", help="Inject a fault: crash:RANK[:K] or hang:RANK[:K] (before that rank's K-th send)."),
    predict_on: Optional[Path] = typer.Option(None, "--topology", help="Also predict the run with the flow simulator on this fabric."),
    out: Optional[Path] = typer.Option(None, "--out", help="Keep the run here: schedule, traces, stderr, result.json, tasks.csv."),
    as_json: bool = JsonOpt,
) -> None:
    """Run SCHEDULE with one process per rank on loopback addresses, every byte verified.

    Paper 004's executor: a host sends one task at a time; a dependency on someone else's
    receive arrives as a 1-byte sync message; relays forward data as it arrives. A dead or
    silent process makes every other fail within --timeout, with the reason. Exit status 1
    when the run failed.
    """
    if not schedule_file.exists():
        raise UserError(f"{schedule_file}: no such schedule file")
    if timeout <= 0:
        raise UserError("--timeout must be positive")
    graph = runtime.as_task_graph(flowsim.load_workload(schedule_file))
    prediction = None
    if predict_on is not None:
        topo = topology.load(predict_on)
        with working("predicting with the flow simulator", as_json):
            routes = routing.route(topo, routing.default_engine(topo))
            prediction = flowsim.simulate(routes, graph, executor="dag")["makespan_s"]
    with working(f"running {graph.name} on {graph.num_ranks} processes", as_json):
        result = runtime.run_local(graph, seed=seed, fragment=fragment, timeout=timeout, fault=fault, work_dir=out)
    result["predicted_makespan_s"] = prediction
    if out is not None:
        _save(result, out)
    summary = {k: v for k, v in result.items() if k != "timeline"}
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        _print(summary)
    if not result["ok"]:
        raise typer.Exit(1)


def _save(result: dict, out: Path) -> None:
    (out / "result.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    with open(out / "tasks.csv", "w", newline="") as f:
        w = csv.writer(f)
        keys = ["task", "src", "dst", "bytes", "start_s", "sent_s", "first_s", "last_s"]
        w.writerow(keys)
        for t in result["timeline"]:
            w.writerow([t[k] for k in keys])


def _print(r: dict) -> None:
    head = f"{r['schedule']}: {r['ranks']} processes, {r['tasks']} tasks"
    if r["ok"]:
        rate = r["throughput_bytes_per_s"]
        print(f"{head} — done in {r['makespan_s'] * 1e3:.3f} ms"
              + (f", {rate / 1e6:.1f} MB/s aggregate" if rate else ""))
        print(f"  {r['bytes_verified']:,} bytes verified, {r['syncs']} sync messages, "
              f"{r['messages']} TCP messages on {r['connections']} connections")
        if r.get("predicted_makespan_s") is not None:
            print(f"  flow simulator predicted {r['predicted_makespan_s'] * 1e3:.3f} ms on the given fabric")
        return
    cause = r["cause"]
    print(f"{head} — FAILED: rank {cause['rank']}: {cause['reason']}")
    others = [f for f in r["failures"] if f["rank"] != cause["rank"]]
    for f in others[:4]:
        print(f"  rank {f['rank']}: {f['reason']}")
    if len(others) > 4:
        print(f"  … and {len(others) - 4} more ranks failed after it")
