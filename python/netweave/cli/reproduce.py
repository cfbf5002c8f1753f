"""`netweave reproduce`: regenerate a paper's tables and figures next to the paper's numbers.

One command per paper; each writes CSV files, PNG plots and a Markdown summary into ``--out``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from netweave.cli.common import JsonOpt, UserError, err_console

app = typer.Typer(
    help="Regenerate the papers' tables and figures (CSV, PNG, Markdown) next to the papers' numbers.",
    no_args_is_help=True,
)


@app.command("a2at")
def a2at_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Directory for the CSV files, PNG plot and summary.md."),
    model: str = typer.Option("fluid", "--model", help="Evaluation model: fluid (lock-step fluid time of the analysis engine)."),
    sides: Optional[str] = typer.Option(None, "--sides", help="Odd sides to run, e.g. 5,7,9 (default 5..17)."),
    as_json: bool = JsonOpt,
) -> None:
    """Paper 001 (A2AT on mesh/torus): the T4 table — A2AT reaching TV_NCT1, LB_Mesh, TV_NCT2 and
    LB_Torus exactly — and A2AND in the same model."""
    from netweave.reproduce import a2at

    if model != "fluid":
        raise UserError(f"unknown model '{model}' (known: fluid)")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory")
    chosen = a2at.SIDES
    if sides is not None:
        try:
            chosen = tuple(int(s) for s in sides.split(","))
        except ValueError:
            raise UserError(f"--sides '{sides}': give odd sides separated by commas, e.g. 5,7,9") from None
        if any(k < 3 or k % 2 == 0 for k in chosen):
            raise UserError(f"--sides '{sides}': A2AT covers odd sides of at least 3")
    with err_console.status("reproducing paper 001") as status:
        result = a2at.run(out, chosen, progress=lambda msg: status.update(f"paper 001: {msg}"))
    if as_json:
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2, sort_keys=True))
        return
    print(f"T4: {result['t4_cells_exact']}/{result['t4_cells']} cells reach Table 1 exactly; "
          f"A2AND: {result['a2and_cells_matching']}/{result['a2and_cells']} cells as expected")
    print(f"wrote {len(result['files'])} files to {out} (summary.md)")


@app.command("rmatt")
def rmatt_cmd(
    out: Path = typer.Option(Path("rmatt-out"), "--out", "-o", help="Directory for results.json, results.md, maps and PNGs."),
    seconds: float = typer.Option(60.0, "--time", min=0.0, help="Annealing time budget in seconds (per run)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed for BISEM and annealing."),
    size: int = typer.Option(16, "--size", min=2, max=32, help="Torus side (the paper: 16, i.e. 4,096 ranks)."),
    replicas: int = typer.Option(2, "--replicas", min=1, max=64, help="Tempering chains (threads)."),
) -> None:
    """Paper 003 (RMATT): the Bruck allgather (2,048 B base) on a size³ torus — identity,
    bit-reversal and the optimised map (Σhops, hop-bytes, max_link, cost, simulated time when available)."""
    from netweave.reproduce import rmatt

    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory")
    result = rmatt.run(out, seconds=seconds, seed=seed, size=size, replicas=replicas, echo=True)
    print(rmatt.table(result), end="")
    print(f"wrote {out}/results.json, results.md, cost_vs_time.png, link_load_histogram.png")
