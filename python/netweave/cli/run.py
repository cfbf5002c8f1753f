"""`netweave run`: execute a schedule with real processes on this machine (TCP on loopback)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import typer

from netweave.cli.common import JsonOpt, UserError, working
from netweave.run import executor
from netweave.stages import flowsim, routing, topology
from netweave.support import files


def run_cmd(
    schedule_file: Path = typer.Argument(..., help="Schedule file: a task DAG or a phased schedule (.json or .nws)."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**64 - 1, help="Seed of the payload every receiver verifies."),
    fragment: int = typer.Option(executor.DEFAULT_FRAGMENT, "--fragment", help="Bytes per fragment (relays forward fragment by fragment)."),
    timeout: float = typer.Option(executor.DEFAULT_TIMEOUT, "--timeout", help="Seconds a process waits with nothing moving before it fails."),
    fault: str | None = typer.Option(None, "--fault", help="Inject a fault: crash:RANK[:K] or hang:RANK[:K] (before that rank's K-th send)."),
    predict_on: Path | None = typer.Option(None, "--topology", help="Also predict the run with the flow simulator on this fabric."),
    out: Path | None = typer.Option(None, "--out", help="Keep the run here: schedule, traces, stderr, result.json, tasks.csv."),
    as_json: bool = JsonOpt,
) -> None:
    """Run SCHEDULE with one process per rank on loopback addresses, every byte verified.

    Paper 004's executor: a host sends one task at a time; a dependency on someone else's
    receive arrives as a 1-byte sync message; relays forward data as it arrives. A dead or
    silent process makes every other fail within --timeout, with the reason. Exit status 1
    when the run failed.
    """
    if not math.isfinite(timeout) or timeout <= 0:
        raise UserError(f"--timeout {timeout}: give a positive, finite number of seconds")
    if fragment < 4096 or fragment % 8:
        raise UserError(f"--fragment {fragment}: give a multiple of 8 bytes, at least 4096")
    if out is not None:
        files.check_dir(out, ["result.json", "tasks.csv", "schedule.nws", "peers.txt"])
    graph = executor.as_task_graph(flowsim.load_workload(schedule_file))
    if graph.num_ranks == 0 or graph.num_tasks == 0:
        raise UserError(f"{schedule_file}: the schedule has {graph.num_ranks} ranks and {graph.num_tasks} tasks: "
                        "nothing to run")
    if fault is not None:
        _check_fault(fault, graph)
    prediction = None
    if predict_on is not None:
        topo = topology.load(predict_on)
        with working("predicting with the flow simulator", as_json):
            routes = routing.route(topo, routing.default_engine(topo))
            prediction = flowsim.simulate(routes, graph, executor="dag")["makespan_s"]
    if out is not None:
        files.ensure_dir(out)
    with working(f"running {graph.name} on {graph.num_ranks} processes", as_json):
        result = executor.run_local(graph, seed=seed, fragment=fragment, timeout=timeout, fault=fault, work_dir=out)
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


def _check_fault(fault: str, graph) -> None:
    """Refuse a fault that names no rank of the schedule or a send its rank never makes: it
    would never fire, and the run would pass as if it had been tested."""
    try:
        _kind, rank, before = executor.parse_fault(fault)
    except ValueError:
        raise UserError(f"--fault '{fault}': want crash:RANK[:K] or hang:RANK[:K]") from None
    if rank >= graph.num_ranks:
        raise UserError(f"--fault '{fault}': rank {rank} is not in the schedule (ranks 0..{graph.num_ranks - 1})")
    sends = sum(1 for task in graph.tasks() if task[0] == rank)
    if before >= sends:
        raise UserError(f"--fault '{fault}': rank {rank} makes {sends} sends (K is 0..{sends - 1}), "
                        f"so the fault would never fire" if sends else
                        f"--fault '{fault}': rank {rank} sends nothing, so the fault would never fire")


def _save(result: dict, out: Path) -> None:
    files.write_text(out / "result.json", json.dumps(result, indent=1, sort_keys=True))
    with files.open_atomic(out / "tasks.csv", "w", newline="") as f:
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
