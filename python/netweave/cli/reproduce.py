"""`netweave reproduce`: regenerate a paper's tables and figures next to the paper's numbers.

One command per paper; each writes CSV files, PNG plots and a Markdown summary into ``--out``.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from netweave.cli.common import JsonOpt, err_console

app = typer.Typer(
    help="Regenerate the papers' tables and figures (CSV, PNG, Markdown) next to the papers' numbers.",
    no_args_is_help=True,
)


@app.command("lsft")
def lsft_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Directory for the CSV files, PNG plots and summary.md."),
    quick: bool = typer.Option(False, "--quick", help="Fig. 18 on L1-L3 only (seconds instead of minutes)."),
    as_json: bool = JsonOpt,
) -> None:
    """Paper 000, Latin-square fat-tree all-to-all: Tables 1-3 (both move rules), Fig. 17, Table 5, Fig. 18.

    Writes CSV files, PNG plots and summary.md with our numbers next to the paper's; the full
    run analyses L1-L6 at 25/50/75/100 % of the servers (up to 30.5 M flows at L6)."""
    from netweave.reproduce import lsft

    if out.exists() and not out.is_dir():
        from netweave.cli.common import UserError

        raise UserError(f"--out {out} exists and is not a directory")
    with err_console.status("reproducing paper 000") as status:
        result = lsft.run(out, quick=quick, progress=lambda msg: status.update(f"paper 000: {msg}"))
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False))
        return
    print(f"Tables 1-3: Table 1 {result['table1_matching_cells']}/12 cells, Table 2 "
          f"{'identical' if result['table2_match'] else 'DIFFERENT'}, Table 3 "
          + ", ".join(f"{rule} {n}/144" for rule, n in result["table3_matching_cells"].items()))
    if result["l6_full_shift"] is not None:
        print(f"L6 full system: shift {result['l6_full_shift']:.4f} (paper 0.108), proposed 1.0")
    print(f"wrote {len(result['files'])} files to {out} (summary.md)")
