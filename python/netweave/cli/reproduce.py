"""`netweave reproduce`: regenerate a paper's tables and figures next to the paper's numbers.

One command per paper; each writes CSV files, PNG plots and a Markdown summary into ``--out``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import typer

from netweave.cli.common import JsonOpt, UserError, progress
from netweave.report import html_page
from netweave.support import files

app = typer.Typer(
    help="Regenerate the papers' tables and figures (CSV, PNG, Markdown) next to the papers' numbers.",
    no_args_is_help=True,
)


def _check_out(out: Path, names: tuple[str, ...] = ()) -> None:
    """Refuse an output directory its files cannot go into before any work starts (the runs
    take seconds to hours): a file in its place, a missing parent (without --mkdir), a
    directory where one of its files goes."""
    files.check_dir(out, ("index.html", *names))


def _reproduce(label: str, out: Path, run, as_json: bool, json_view=lambda result: result) -> dict | None:
    """Run `run(progress)` under a progress display named `label`, then write the summary it
    left in `out` as ``index.html`` too; with --json print its result (as `json_view` shows
    it) and return None, else return the result for the command's text lines."""
    started = time.time()
    existed = out.exists()
    try:
        with progress(f"reproducing {label}", silent=as_json) as steps:
            result = run(lambda msg: steps.note(f"{label}: {msg}"))
    except BaseException:
        if not existed and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # refused before writing anything: leave no empty directory behind
        raise
    files = result.get("files")
    for page in _pages(out, started, label):
        if isinstance(files, list):  # as the run lists its files: by name, or by path
            files.append(str(page) if any("/" in str(f) for f in files) else page.name)
    if as_json:
        print(json.dumps(json_view(result), indent=2, sort_keys=True, ensure_ascii=False))
        return None
    return result


def _pages(out: Path, since: float, label: str) -> list[Path]:
    """Each Markdown summary the run wrote into `out` (``summary.md``, ``summary_flit.md``, …)
    also as a page with its figures inline (``index.html``, ``index_flit.html``, …)."""
    pages = []
    for md in sorted(out.glob("*.md")):
        if md.stat().st_mtime < since - 1 or not md.stem.startswith(("summary", "results")):
            continue
        page = out / ("index" + md.stem.removeprefix("summary").removeprefix("results") + ".html")
        files.write_text(page, html_page.markdown_page(md.read_text(), out, f"netweave reproduce: {label}"))
        pages.append(page)
    return pages


def _headline_view(result: dict) -> dict:
    """A reproduction as --json prints it: the headline figures and the files."""
    return {"headline": result["headline"], "files": result["files"], "quick": result["quick"]}


def _without_rows(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "rows"}


@app.command("lsft")
def lsft_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Directory for the CSV files, PNG plots and summary.md."),
    quick: bool = typer.Option(False, "--quick", help="Fig. 18 on L1-L3 only (seconds instead of minutes); with --emulate, S2 only."),
    emulate: bool = typer.Option(False, "--emulate", help="Instead, run §5's real-machine experiment (S1-S3, IMB-style MPI_Alltoall with the schedules inside) on emulated LSFTs (real TCP; needs root)."),
    as_json: bool = JsonOpt,
) -> None:
    """Paper 000, Latin-square fat-tree all-to-all: Tables 1-3 (both move rules), Fig. 17, Table 5, Fig. 18.

    Writes CSV files, PNG plots and summary.md with our numbers next to the paper's; the full
    run analyses L1-L6 at 25/50/75/100 % of the servers (up to 30.5 M flows at L6). With
    --emulate: S1-S3 over real TCP on `netweave emulate`, Open MPI's pairwise and linear
    all-to-alls against netweave's shift and LSFT schedules inside MPI_Alltoall."""
    from netweave.reproduce import lsft

    _check_out(out)
    if emulate:
        from netweave.reproduce import lsft_emulated

        result = _reproduce("paper 000 (emulated)", out, lambda progress: lsft_emulated.run(out, quick=quick, progress=progress),
                            as_json, _headline_view)
        if result is None:
            return
        for name, h in result["headline"].items():
            print(f"{name}: proposed {h['proposed_over_shift']:.2f}x shift's throughput at {h['bytes']} B per pair "
                  f"(paper's machine {h['paper_real_proposed_over_shift']:.2f}x), {h['proposed_ratio_to_link']:.2f} of the link")
        print(f"wrote {len(result['files'])} files to {out} (summary_emulated.md)")
        return
    result = _reproduce("paper 000", out, lambda progress: lsft.run(out, quick=quick, progress=progress), as_json)
    if result is None:
        return
    print(f"Tables 1-3: Table 1 {result['table1_matching_cells']}/12 cells, Table 2 "
          f"{'identical' if result['table2_match'] else 'DIFFERENT'}, Table 3 "
          + ", ".join(f"{rule} {n}/144" for rule, n in result["table3_matching_cells"].items()))
    if result["l6_full_shift"] is not None:
        print(f"L6 full system: shift {result['l6_full_shift']:.4f} (paper 0.108), proposed 1.0")
    print(f"wrote {len(result['files'])} files to {out} (summary.md)")


@app.command("a2at")
def a2at_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Directory for the CSV files, PNG plot and summary.md."),
    model: str = typer.Option("fluid", "--model", help="Evaluation model: fluid (lock-step fluid time of the analysis engine) or flit (cycle-accurate flit simulator, experiments E1–E5)."),
    sides: str | None = typer.Option(None, "--sides", help="Odd sides to run, e.g. 5,7,9 (default 5..17)."),
    as_json: bool = JsonOpt,
) -> None:
    """Paper 001 (A2AT on mesh/torus): the T4 table — A2AT reaching TV_NCT1, LB_Mesh, TV_NCT2 and
    LB_Torus exactly — and A2AND in the same model."""
    from netweave.reproduce import a2at

    if model not in ("fluid", "flit"):
        raise UserError(f"unknown model '{model}' (known: fluid, flit)")
    _check_out(out)
    chosen: tuple[int, ...] = a2at.SIDES
    if sides is not None:
        try:
            chosen = tuple(int(s) for s in sides.split(","))
        except ValueError:
            raise UserError(f"--sides '{sides}': give odd sides separated by commas, e.g. 5,7,9") from None
        if any(k < 3 or k % 2 == 0 for k in chosen):
            raise UserError(f"--sides '{sides}': A2AT covers odd sides of at least 3")
    if model == "flit":
        from netweave.reproduce import a2at_flit

        flit_sides = chosen if sides is not None else (5, 7, 9)
        result = _reproduce("paper 001 (flit)", out, lambda progress: a2at_flit.run(out, flit_sides, progress=progress),
                            as_json, _without_rows)
        if result is None:
            return
        print("; ".join(f"{k} {v:.3f}" for k, v in result["figures"].items()))
        print(f"wrote {len(result['files'])} files to {out} (summary_flit.md)")
        return
    result = _reproduce("paper 001", out, lambda progress: a2at.run(out, chosen, progress=progress), as_json, _without_rows)
    if result is None:
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

    if not math.isfinite(seconds):
        raise UserError(f"--time {seconds}: give a finite number of seconds")
    _check_out(out, ("results.json", "results.md", "cost_vs_time.png", "link_load_histogram.png"))
    result = _reproduce("paper 003", out, lambda progress: rmatt.run(out, seconds=seconds, seed=seed, size=size,
                                                                     replicas=replicas, progress=progress), False)
    if result is None:  # not asked for JSON, so the result comes back
        return
    print(rmatt.table(result), end="")
    print(f"wrote {out}/results.json, results.md, index.html, cost_vs_time.png, link_load_histogram.png")


@app.command("routing")
def routing_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Directory for the CSV files, PNG plots and summary.md."),
    quick: bool = typer.Option(False, "--quick", help="Topologies A and mesh, two data sizes, five routings, two visiting lists."),
    as_json: bool = JsonOpt,
) -> None:
    """Paper 002 (deadlock-free deterministic routings on RHiNET-2) in the flit simulator:
    bandwidth per routing under four permutations with request/reply (Figs. 4-9), 2-host
    bandwidth and barrier against hops (Figs. 8, 10) and the 64-host barrier (Table 3)."""
    from netweave.reproduce import routing002

    _check_out(out)
    result = _reproduce("paper 002", out, lambda progress: routing002.run(out, quick=quick, progress=progress), as_json)
    if result is None:
        return
    fig = result["figures"]
    print(f"A = irregular seed {result['ab']['A']['seed']}, B = seed {result['ab']['B']['seed']}; "
          f"Fig. 8: {fig['fig8_mbs_per_hop']:+.1f} MB/s per switch, Fig. 10: {fig['fig10_us_per_hop']:+.3f} µs per switch")
    print(f"wrote {len(result['files'])} files to {out} (summary.md)")


@app.command("ethernet")
def ethernet_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Directory for the CSV files, PNG plots and summary.md."),
    quick: bool = typer.Option(False, "--quick", help="Fewer sizes, hosts, draws and clusters (seconds)."),
    emulate: bool = typer.Option(False, "--emulate", help="Instead, run §3's incast, §6.3.2's relaying and §6.3.1's 64-host all-to-all against Open MPI's and MPICH's MPI_Alltoall on an emulated cluster (real TCP, links x 0.1, about 25 minutes; --quick: 28 hosts, one size, under a minute; needs root)."),
    as_json: bool = JsonOpt,
) -> None:
    """Paper 004 (contention-free gather/all-to-all on Ethernet trees) in the flow model: task
    policies (Fig. 5.4), relaying (Fig. 5.6), scheduling cost (Figs. 6.2-6.3), wrong link values
    (Fig. 6.7), two clusters (Figs. 6.9-6.10) and the 12-cluster scaling of Table 6.2 (Fig. 6.11).
    With --emulate: incast (§3), gather relaying (§6.3.2) and all-to-all against both MPIs'
    native MPI_Alltoall (§6.3.1, 64 hosts on edge switches of 14, 1 KiB-1 MiB per pair, retransmissions
    counted) over real TCP on `netweave emulate`."""
    from netweave.reproduce import ethernet

    _check_out(out)
    if emulate:
        from netweave.reproduce import ethernet_emulated

        result = _reproduce("paper 004 (emulated)", out, lambda progress: ethernet_emulated.run(out, quick=quick, progress=progress),
                            as_json, _headline_view)
        if result is None:
            return
        h = result["headline"]
        print(f"incast, {h['senders']} senders x 1 MB: sequential {h['sequential_mbit_per_s']:.0f} Mbit/s, concurrent "
              f"{h['concurrent_mbit_per_s']:.0f} Mbit/s (paper: 700-800 and 200-300)")
        for implementation, a in ((i, h["alltoall"][i]) for i in ("openmpi", "mpich")):
            below = {k: "at most " if a[f"upper_bound_{k}"] else "" for k in ("small", "large")}
            small = ("not measured" if a["best_over_native_small"] is None
                     else f"{below['small']}{a['best_over_native_small']:.2f}")
            large = ("" if a["best_over_native_large"] is None
                     else f", at 1 MiB {below['large']}{a['best_over_native_large']:.2f}")
            print(f"all-to-all, our best / {implementation} MPI_Alltoall: {small} on average at 1-200 KiB "
                  f"(paper: about 0.32){large}")
        print(f"wrote {len(result['files'])} files to {out} (summary_emulated.md)")
        return
    result = _reproduce("paper 004", out, lambda progress: ethernet.run(out, quick=quick, progress=progress), as_json,
                        _headline_view)
    if result is None:
        return
    h = result["headline"]
    print(f"relaying: gather down to {h['gather_relay_ratio_min'] * 100:.0f} % (paper: about 30 %), all-to-all relays "
          f"{h['alltoall_relayed_share'][0] * 100:.1f}-{h['alltoall_relayed_share'][1] * 100:.1f} % (paper: 0.5-5 %)")
    s = h["scheduling_ms_at_most_hosts"]
    print(f"scheduling: {s['hosts']} hosts in {s['1KB']:.1f} ms, time ~ tasks^{h['scheduling_exponent_vs_tasks']['1KB']:.2f}")
    print(f"wrote {len(result['files'])} files to {out} (summary.md)")
