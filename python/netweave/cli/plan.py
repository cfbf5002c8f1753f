"""`netweave plan`: the main job, from a fabric to a report."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from netweave import plan as plan_mod
from netweave import report, topology
from netweave.cli.common import err_console


def plan_cmd(
    topology_file: Optional[Path] = typer.Argument(None, help="Topology file; default: the built-in LSFT of order 3 (52 servers)."),
    bytes_per_pair: int = typer.Option(plan_mod.DEFAULT_BYTES, "--bytes", min=1, max=2**63, help="Bytes each rank sends to each other rank."),
    engine: Optional[str] = typer.Option(None, "--engine", help="Routing engine (default: the deadlock-free engine suited to the topology)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also write report.json, report.md, phases.csv and topology.json here."),
    hosts: Optional[str] = typer.Option(None, "--hosts", help="Hosts of the job: 'all', '0-15,20', 'leaf:0-3' (fat-trees: whole leaves, or an LSFT sub-cluster)."),
    order: str = typer.Option("listed", "--order", help="Rank order on the hosts: listed, cyclic or random (--seed)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="Seed of --order random."),
) -> None:
    """Route the fabric, prove and measure every all-to-all schedule for all hosts, and show the
    best against shift."""
    topo = topology.load(topology_file) if topology_file is not None else topology.example_cluster()
    with err_console.status("routing") as status:
        result = plan_mod.plan(topo, bytes_per_pair, engine, progress=status.update, hosts=hosts, order=order, seed=seed)
    print(report.to_json(result) if as_json else report.to_text(result), end="")
    if out is not None:
        for path in report.write_files(result, out, topo.to_text("json")):
            if not as_json:
                print(f"wrote {path}")
