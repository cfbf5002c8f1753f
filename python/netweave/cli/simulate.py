"""`netweave simulate`: evaluate a network by simulation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from netweave import flitsim
from netweave.cli.common import JsonOpt, UserError, err_console

app = typer.Typer(help="Evaluate a network by simulation.", no_args_is_help=True)


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
    config: Path = typer.Argument(..., help="TOML config (BookSim key names; see --keys)."),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Override a key: --set key=value (repeatable)."),
    sweep: Optional[str] = typer.Option(None, "--sweep", help="Run several loads in parallel: injection_rate=a,b,c."),
    as_json: bool = JsonOpt,
) -> None:
    """Cycle-accurate flit-level simulation of the network a config describes."""
    if not config.is_file():
        raise UserError(f"config file not found: {config}")
    base = flitsim.load_config(config)
    overrides = flitsim.parse_overrides(set_ or [])
    net = flitsim.network(base, overrides)
    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f}" if sweep else "cycle {task.completed:,.0f}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )
    with progress:
        if sweep:
            _, rates = _parse_sweep(sweep)
            task = progress.add_task(f"simulating {len(rates)} loads", total=len(rates))
            result = flitsim.sweep(base, rates, overrides, progress=lambda i: progress.advance(task))
        else:
            task = progress.add_task("simulating", total=None)
            result = flitsim.simulate(base, overrides, progress=lambda c: progress.update(task, completed=c))
    out = {"network": net, **({"sweep": result} if sweep else {"result": result})}
    if as_json:
        print(json.dumps(out, indent=2))
        return
    console = Console()
    console.print(
        f"{net['topology']}: {net['hosts']} hosts, {net['routers']} routers, "
        f"routing {net['routing']} ({net['routing_vcs']} VC classes)"
    )
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


app.command("flit")(flit)
