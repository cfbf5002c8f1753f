"""`netweave simulate`: time a schedule on a routed fabric (flow level)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from netweave import flowsim, routing, topology
from netweave._core import TaskGraph
from netweave.cli.common import JsonOpt, UserError, err_console, working

app = typer.Typer(help="Simulate schedules on a routed fabric: how long they take.", no_args_is_help=True)

#: Runs with at least this many messages get a progress bar instead of a spinner.
_PROGRESS_BAR_FROM = 20_000


@app.command("flow")
def flow(
    topology_file: Path = typer.Argument(..., help="Topology file."),
    routes_file: Path = typer.Argument(..., help="Routes file (netweave routes JSON)."),
    schedule_file: Path = typer.Argument(..., help="Schedule file (phases or dependency DAG)."),
    executor: str = typer.Option(
        "sync", "--executor", "-e", help="sync (barrier per phase), async (FIFO, NCT sends), local-sync, or dag."
    ),
    nct: Optional[int] = typer.Option(
        None, "--nct", min=1, help="Concurrent sends per host (default: the schedule's, else 1)."
    ),
    bytes_: Optional[int] = typer.Option(None, "--bytes", min=0, help="Replace every message's size by B bytes."),
    barrier: float = typer.Option(0.0, "--barrier", min=0.0, help="Barrier cost between phases (sync), seconds."),
    overhead: float = typer.Option(0.0, "--overhead", min=0.0, help="Software overhead per message, seconds."),
    mtu: Optional[int] = typer.Option(None, "--mtu", min=1, help="Packet payload bytes (packetise messages)."),
    header: int = typer.Option(0, "--header", min=0, help="Header bytes per packet (per message without --mtu)."),
    injection: Optional[float] = typer.Option(None, "--injection-gbps", help="Host injection limit, Gbit/s."),
    ejection: Optional[float] = typer.Option(None, "--ejection-gbps", help="Host ejection limit, Gbit/s."),
    series: bool = typer.Option(False, "--series", help="Record active flows and aggregate rate over time."),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Directory for flow.json, hosts.csv, channels.csv and PNG plots."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Flow-level simulation: max-min fair bandwidth sharing, link latencies, host limits."""
    if executor not in flowsim.EXECUTORS:
        raise UserError(f"unknown executor '{executor}' (known: {', '.join(flowsim.EXECUTORS)})")
    for name, value in (("--injection-gbps", injection), ("--ejection-gbps", ejection)):
        if value is not None and not value > 0:
            raise UserError(f"{name} must be a positive number of Gbit/s, got {value}")
    topo = topology.load(topology_file)
    routes = routing.load(topo, routes_file)
    workload = flowsim.load_workload(schedule_file)
    if isinstance(workload, TaskGraph) and executor != "dag":
        raise UserError(f"{schedule_file} is a dependency DAG; run it with --executor dag")
    if nct is None:
        nct = int(getattr(workload, "concurrent_sends", 1) or 1)
    total = workload.num_tasks if isinstance(workload, TaskGraph) else workload.num_messages
    kwargs = dict(
        executor=executor,
        nct=nct,
        barrier_s=barrier,
        overhead_s=overhead,
        mtu=mtu,
        header_bytes=header,
        injection_gbps=injection,
        ejection_gbps=ejection,
        bytes=bytes_,
        series=series,
    )
    if total >= _PROGRESS_BAR_FROM:
        columns = (TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=err_console, transient=True) as bar:
            task = bar.add_task("flows", total=total)
            report = flowsim.simulate(
                routes, workload, **kwargs, on_progress=lambda done, _: bar.update(task, completed=done)
            )
    else:
        with working("simulating"):
            report = flowsim.simulate(routes, workload, **kwargs)
    summary = flowsim.summary(report)
    summary["schedule"] = workload.name
    if out is not None:
        with working("writing results"):
            flowsim.save(report, topo, out)
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return
    print(
        f"{workload.name}: {summary['executor']} executor, NCT {summary['nct']}: "
        f"makespan {summary['makespan_s'] * 1e3:.6g} ms, "
        f"per-server throughput {summary['throughput_per_server_mib_s']:.6g} MiB/s"
    )
    print(
        f"{summary['messages']} messages ({summary['network_messages']} over the network), "
        f"hosts finish {summary['host_finish_min_s'] * 1e3:.6g}..{summary['host_finish_max_s'] * 1e3:.6g} ms, "
        f"channel utilisation max {summary['max_channel_utilisation']:.4f} mean {summary['mean_channel_utilisation']:.4f}"
    )
    if out is not None:
        print(f"wrote {out}/flow.json, hosts.csv, channels.csv, link_utilisation.png, host_finish.png")
