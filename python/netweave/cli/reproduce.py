"""`netweave reproduce`: rerun a paper's evaluation and write its tables and figures."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Reproduce the papers' evaluations (tables, figures, JSON).", no_args_is_help=True)


@app.command("rmatt")
def rmatt_cmd(
    out: Path = typer.Option(Path("rmatt-out"), "--out", help="Directory for results.json, results.md, maps and PNGs."),
    seconds: float = typer.Option(60.0, "--time", min=0.0, help="Annealing time budget in seconds."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed for BISEM and annealing."),
    size: int = typer.Option(16, "--size", min=2, max=32, help="Torus side (the paper: 16, i.e. 4,096 ranks)."),
    replicas: int = typer.Option(2, "--replicas", min=1, max=64, help="Tempering chains (threads)."),
) -> None:
    """Paper 003: the Bruck allgather (2,048 B base) on a size³ torus — identity, bit-reversal and
    the optimised map (Σhops, hop-bytes, max_link, cost, simulated time when available)."""
    from netweave.reproduce import rmatt

    result = rmatt.run(out, seconds=seconds, seed=seed, size=size, replicas=replicas, echo=True)
    print(rmatt.table(result), end="")
    print(f"wrote {out}/results.json, results.md, cost_vs_time.png, link_load_histogram.png")
