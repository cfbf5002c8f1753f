"""`netweave simulate`: time a schedule on a routed fabric — `flow` (max-min fair flows) or `flit`
(cycle-accurate routers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from netweave._core import TaskGraph
from netweave.cli.common import JsonOpt, UserError, progress, working
from netweave.stages import flitsim, flowsim, routing, topology
from netweave.support import files

app = typer.Typer(help="Simulate a routed fabric: flow level (how long a schedule takes) or flit level.", no_args_is_help=True)


@app.command("flow")
def flow(
    topology_file: Path = typer.Argument(..., help="Topology file."),
    routes_file: Path = typer.Argument(..., help="Routes file (netweave routes JSON)."),
    schedule_file: Path = typer.Argument(..., help="Schedule file (phases or dependency DAG)."),
    executor: str = typer.Option(
        "sync", "--executor", "-e", help="sync (barrier per phase), async (FIFO, NCT sends), local-sync, or dag."
    ),
    nct: int | None = typer.Option(
        None, "--nct", min=1, help="Concurrent sends per host (default: the schedule's, else 1)."
    ),
    host_streams: int | None = typer.Option(
        None, "--host-streams", min=1, help="Sends a host streams at once, the rest waiting in posting order "
                                            "(default: the calibration's, else all NCT)."
    ),
    bytes_: int | None = typer.Option(None, "--bytes", min=0, help="Replace every message's size by B bytes."),
    barrier: float | None = typer.Option(None, "--barrier", min=0.0, help="Barrier cost between phases (sync), seconds "
                                            "(default: the calibration's, else 0)."),
    overhead: float | None = typer.Option(None, "--overhead", min=0.0, help="Software overhead per message, seconds "
                                             "(default: the calibration's, else 0)."),
    calibration_file: Path | None = typer.Option(None, "--calibration", help="Calibration file (netweave emulate "
                                                    "calibrate): measured overheads and TCP loss parameters."),
    mtu: int | None = typer.Option(None, "--mtu", min=1, help="Packet payload bytes (packetise messages)."),
    header: int = typer.Option(0, "--header", min=0, help="Header bytes per packet (per message without --mtu)."),
    injection: float | None = typer.Option(None, "--injection-gbps", help="Host injection limit, Gbit/s."),
    ejection: float | None = typer.Option(None, "--ejection-gbps", help="Host ejection limit, Gbit/s."),
    series: bool = typer.Option(False, "--series", help="Record active flows and aggregate rate over time."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Directory for flow.json, hosts.csv, channels.csv and PNG plots."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Flow-level simulation: max-min fair bandwidth sharing, link latencies, host limits; on an
    Ethernet fabric also switch port buffers and TCP retransmission timeouts."""
    if executor not in flowsim.EXECUTORS:
        raise UserError(f"unknown executor '{executor}' (known: {', '.join(flowsim.EXECUTORS)})")
    for name, value in (("--injection-gbps", injection), ("--ejection-gbps", ejection)):
        if value is not None and not value > 0:
            raise UserError(f"{name} must be a positive number of Gbit/s, got {value}")
    if out is not None:
        files.check_dir(out, flowsim.OUTPUT_FILES)
    topo = topology.load(topology_file)
    routes = routing.load(topo, routes_file)
    workload = flowsim.load_workload(schedule_file)
    calibration = None if calibration_file is None else flowsim.load_calibration(calibration_file, topo)
    if isinstance(workload, TaskGraph) and executor != "dag":
        raise UserError(f"{schedule_file} is a dependency DAG; run it with --executor dag")
    if nct is None:
        nct = int(getattr(workload, "concurrent_sends", 1) or 1)
    total = workload.num_tasks if isinstance(workload, TaskGraph) else workload.num_messages
    if total == 0 or workload.num_ranks == 0:
        raise UserError(f"{schedule_file}: the schedule has {workload.num_ranks} ranks and no messages: nothing to simulate")
    kwargs: dict[str, Any] = dict(
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
        calibration=calibration,
        host_streams=host_streams,
    )
    with progress("simulating", total, silent=as_json) as steps:
        report = flowsim.simulate(routes, workload, **kwargs, on_progress=lambda done, _: steps.update(completed=done))
    summary = flowsim.summary(report)
    summary["schedule"] = workload.name
    if out is not None:
        with working("writing results", as_json):
            flowsim.save(report, topo, out)
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return
    print(
        f"{workload.name}: {summary['executor']} executor, NCT {summary['nct']}: "
        f"makespan {summary['makespan_s'] * 1e3:.6g} ms, "
        f"per-server throughput {summary['throughput_per_server_mib_s']:.6g} MiB/s"
        + (f"; {topo.link_layer}, {summary['timeouts']} TCP timeouts and {summary['probe_repairs']} tails resent by "
           f"loss probes ({summary['lone_tail_stalls']:.2g} RTO-long stalls expected from lone lost tails) at "
           f"{topo.port_buffer_bytes:,}-byte port buffers"
           if summary["lossy"] else "")
    )
    print(
        f"{summary['messages']} messages ({summary['network_messages']} over the network), "
        f"hosts finish {summary['host_finish_min_s'] * 1e3:.6g}..{summary['host_finish_max_s'] * 1e3:.6g} ms, "
        f"channel utilisation max {summary['max_channel_utilisation']:.4f} mean {summary['mean_channel_utilisation']:.4f}"
    )
    if out is not None:
        print(f"wrote {out}/flow.json, hosts.csv, channels.csv, link_utilisation.png, host_finish.png")


def _parse_sweep(spec: str) -> tuple[str, list[float]]:
    key, sep, values = spec.partition("=")
    if not sep or key.strip() != "injection_rate":
        raise UserError(f"--sweep expects injection_rate=a,b,c, got '{spec}'")
    try:
        rates = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--sweep: '{values}' is not a comma-separated list of numbers") from None
    if not rates:
        raise UserError("--sweep needs at least one injection rate")
    return key.strip(), rates


def _latency_row(r: dict) -> list[str]:
    p, n = r["packet_latency"], r["network_latency"]
    return [
        f"{r['injection_rate']:g}",
        f"{r['accepted_flits']:.4f}",
        f"{p['avg']:.2f}" if p["count"] else "-",
        f"{p['min']}/{p['max']}" if p["count"] else "-",
        f"{n['avg']:.2f}" if n["count"] else "-",
        f"{r['hops']:.2f}",
        "yes" if r["saturated"] else "no",
        str(r["cycles"]),
    ]


def _print_open(points: list[dict], console: Console) -> None:
    t = Table(title="open-loop flit simulation")
    for col in ["injection rate", "accepted flits/host/cycle", "packet latency", "min/max", "network latency", "routers/packet", "saturated", "cycles"]:
        t.add_column(col, justify="right")
    for r in points:
        t.add_row(*_latency_row(r))
    console.print(t)


def _print_batch(r: dict, console: Console) -> None:
    t = Table(title="batch flit simulation")
    t.add_column("metric")
    t.add_column("value", justify="right")
    finish = [f for f in r["host_finish"] if f > 0]
    rows = [
        ("completion (cycles)", str(r["completion_cycles"])),
        ("messages", str(r["messages"])),
        ("flits", str(r["flits"])),
        ("earliest / latest host finish", f"{min(finish) if finish else 0} / {max(finish) if finish else 0}"),
        ("message latency avg (cycles)", f"{r['message_latency']['avg']:.1f}"),
        ("packet latency avg (cycles)", f"{r['packet_latency']['avg']:.1f}"),
        ("throughput (flits/host/cycle)", f"{r['throughput_flits']:.4f}"),
        ("bandwidth per message (flits/cycle)", f"{r['bandwidth_flits_per_cycle']:.4f}"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)


def flit(
    config: Path = typer.Argument(..., help="TOML config (BookSim key names; netweave.stages.flitsim.KEYS and docs/flitsim.md list them)."),
    set_: list[str] | None = typer.Option(None, "--set", help="Override a key: --set key=value (repeatable)."),
    sweep: str | None = typer.Option(None, "--sweep", help="Run several loads in parallel: injection_rate=a,b,c."),
    threads: int | None = typer.Option(None, "--threads", min=0, max=1024,
                                          help="Threads stepping the routers (0: every core, the default; a sweep's "
                                               "points take one each). The results are the same for every count."),
    mpi: bool = typer.Option(False, "--mpi", help="Split this one run over the processes of the MPI job it was "
                                                    "started in (mpirun -n P netweave simulate flit CONFIG --mpi); "
                                                    "the results are the one-process run's."),
    as_json: bool = JsonOpt,
) -> None:
    """Cycle-accurate flit-level simulation of the network a config describes."""
    base = flitsim.load_config(config)
    overrides: dict[str, Any] = dict(flitsim.parse_overrides(set_ or []))
    if threads is not None:
        overrides["threads"] = threads
    net = flitsim.network(base, overrides)
    if mpi:
        if sweep:
            raise UserError("--mpi splits one run; a --sweep under mpirun already spreads its loads (drop --mpi)")
        _flit_over_mpi(base, overrides, net, as_json)
        return
    if sweep:
        _, rates = _parse_sweep(sweep)
        with progress(f"simulating {len(rates)} loads", len(rates), silent=as_json) as steps:
            result = flitsim.sweep(base, rates, overrides, progress=lambda i: steps.advance())
    else:
        with progress("simulating", silent=as_json) as steps:
            result = flitsim.simulate(base, overrides,
                                      progress=lambda c: steps.update(completed=c, description=f"simulating, cycle {c:,}"))
    out = {"network": net, **({"sweep": result} if sweep else {"result": result})}
    if as_json:
        print(json.dumps(out, indent=2))
        return
    console = Console()
    _print_network(net, console)
    if sweep:
        _print_open(result["points"], console)
        sat = result["saturation_rate"]
        console.print(
            f"max accepted throughput {result['max_accepted_flits']:.4f} flits/host/cycle; "
            + (f"saturated from injection_rate {sat:g}" if sat is not None else "no swept load saturated")
        )
    elif result["mode"] == "batch":
        _print_batch(result, console)
    else:
        _print_open([result], console)


def _print_network(net: dict, console: Console) -> None:
    console.print(
        f"{net['topology']}: {net['hosts']} hosts, {net['routers']} routers, "
        f"routing {net['routing']} ({net['routing_vcs']} VC classes)"
    )


def _flit_over_mpi(base: dict, overrides: dict, net: dict, as_json: bool) -> None:
    """Every process of the job runs its share; process 0 reports, with the partition."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise UserError("--mpi needs mpi4py (pip install -r requirements-dev.txt)") from None
    comm = MPI.COMM_WORLD
    root = comm.Get_rank() == 0
    with progress(f"simulating on {comm.Get_size()} processes", silent=as_json or not root) as steps:
        result, part = flitsim.simulate_mpi(
            base, overrides, comm,
            progress=lambda c: steps.update(completed=c, description=f"simulating, cycle {c:,}") if root else None)
    sent = comm.gather(part["bytes_sent"], root=0)
    if not root or sent is None:  # the gathered list reaches process 0 only
        return
    part = {**part, "bytes_sent": sum(sent)}
    if as_json:
        print(json.dumps({"network": net, "result": result, "partition": part}, indent=2))
        return
    console = Console()
    _print_network(net, console)
    console.print(
        f"split over {part['ranks']} processes ({', '.join(map(str, part['routers']))} routers): "
        f"{part['cut_channels']} of {part['switch_channels']} switch channels cut, lookahead {part['lookahead']} "
        f"cycles, {part['exchanges']:,} exchanges, {part['bytes_sent'] / 1e6:.1f} MB sent"
    )
    if result["mode"] == "batch":
        _print_batch(result, console)
    else:
        _print_open([result], console)


app.command("flit")(flit)
