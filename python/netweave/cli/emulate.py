"""`netweave emulate`: the fabric as network namespaces routed by netweave's own tables."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from netweave.cli.common import JsonOpt, UserError, working
from netweave.run import calibration, emulate
from netweave.stages import flowsim, routing, topology

app = typer.Typer(
    help="An emulated cluster: a network namespace per host and switch, a veth pair per link, switches "
         "forwarding by the routing table, tbf rate limits (see docs/emulate.md). Needs root.",
    no_args_is_help=True,
)

NameOpt = typer.Option(..., "--name", help="Fabric name: 1-12 lowercase letters and digits.")
ScaleOpt = typer.Option(1.0, "--scale", help="Run every link at its bandwidth x this (e.g. 0.01: 100 Gbit/s -> 1 Gbit/s).")
BufferOpt = typer.Option(None, "--buffer", help="Bytes of queue per switch port (shallow buffers reproduce incast); default the "
                                                  "topology's port buffer on Ethernet, 256 MiB (too deep to drop) on a lossless fabric.")
CalibrationOpt = typer.Option(None, "--calibration", help="Calibration file (netweave emulate calibrate) for the prediction.")


def _load(topology_file: Path, routes_file: Path):
    topo = topology.load(topology_file)
    return topo, routing.load(topo, routes_file)


@app.command("up")
def up_cmd(
    topology_file: Path = typer.Argument(..., metavar="TOPO", help="Topology file."),
    routes_file: Path = typer.Argument(..., metavar="ROUTES", help="Routing table (netweave route ... -o)."),
    name: str = NameOpt, scale: float = ScaleOpt, buffer: int | None = BufferOpt, as_json: bool = JsonOpt,
) -> None:
    """Bring the fabric up; `netweave emulate down NAME` removes it."""
    topo, routes = _load(topology_file, routes_file)
    with working(f"bringing up {name}", as_json):
        fabric = emulate.up(topo, routes, name, scale=scale, buffer=buffer)
    summary = {"name": name, "hosts": fabric.num_hosts, "switches": len(fabric.state["switches"]),
               "links": len(fabric.state["links"]), "scale": scale, "buffer": buffer,
               "first_host": {"namespace": fabric.host_ns(0), "address": fabric.host_address(0)}}
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return
    print(f"{name}: {summary['hosts']} hosts, {summary['switches']} switches, {summary['links']} links up "
          f"(host 0 is {fabric.host_address(0)} in namespace {fabric.host_ns(0)})")


@app.command("down")
def down_cmd(name: str = typer.Argument(..., metavar="NAME", help="Fabric name."), as_json: bool = JsonOpt) -> None:
    """Remove the fabric: its namespaces (and with them its links) and its state file. Also
    cleans up after an earlier run that crashed."""
    result = emulate.down(name)
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(f"{name}: removed {result['removed_namespaces']} namespaces")


@app.command("status")
def status_cmd(as_json: bool = JsonOpt) -> None:
    """Every emulated fabric on this machine (also leftovers without a state file)."""
    rows = emulate.status()
    if as_json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return
    if not rows:
        print("no emulated fabric is up")
    for r in rows:
        if r["topology"] is None:
            print(f"{r['name']}: {r['namespaces']} namespaces left without a state file (netweave emulate down {r['name']})")
        else:
            print(f"{r['name']}: {r['topology']}, {r['hosts']} hosts, {r['switches']} switches, {r['links']} links, "
                  f"routes {r['engine']}, scale {r['scale']}" + ("" if r["complete"] else " (INCOMPLETE)"))


@app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_cmd(
    ctx: typer.Context,
    host: str = typer.Argument(..., metavar="HOST", help="Host index."),
    name: str = NameOpt,
) -> None:
    """Run a command on a host: netweave emulate exec 3 --name N -- ip addr"""
    fabric = emulate.attach(name)
    raise typer.Exit(emulate.exec_on(fabric, emulate.host_index(fabric, host), list(ctx.args)))


@app.command("measure")
def measure_cmd(
    topology_file: Path = typer.Argument(..., metavar="TOPO", help="Topology file."),
    routes_file: Path = typer.Argument(..., metavar="ROUTES", help="Routing table."),
    schedule_file: Path = typer.Argument(..., metavar="SCHEDULE", help="Schedule or DAG file (.json or .nws)."),
    name: str = NameOpt, scale: float = ScaleOpt, buffer: int | None = BufferOpt,
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the verified payload."),
    out: Path | None = typer.Option(None, "--out", help="Keep the run's files and measure.json here."),
    calibration_file: Path | None = CalibrationOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Bring up a fabric, run SCHEDULE on it with the TCP executor, prove by byte counters that
    every link carried what the routing table routes over it, set the measured time beside the
    flow simulator's prediction for the same scaled fabric, and tear the fabric down."""
    if not schedule_file.exists():
        raise UserError(f"{schedule_file}: no such schedule file")
    topo, routes = _load(topology_file, routes_file)
    workload = flowsim.load_workload(schedule_file)
    calib = None
    if calibration_file is not None:
        measured_on = emulate.predicted_topology(topo, scale, buffer)
        calib = flowsim.load_calibration(calibration_file, measured_on)
    if out is not None:
        from netweave.support import files

        files.ensure_dir(out, ["measure.json"])  # refused before the fabric comes up, not after the run
    with working(f"measuring on {name}", as_json):
        result = emulate.measure(topo, routes, workload, name, scale=scale, buffer=buffer, seed=seed, work_dir=out,
                                 calibration=calib)
    if out is not None:
        files.write_text(out / "measure.json", json.dumps(result, indent=1, sort_keys=True))
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        if result["warning"]:
            print(f"warning: {result['warning']}", file=sys.stderr)
        if result["measured_s"] is None:
            print(f"{result['schedule']}: FAILED: {result['cause']}")
        else:
            p = result["routing_proof"]
            verdict = ("every channel carried its routed bytes" if p["ok"] else
                       f"{len(p['violations'])} channels off their routed bytes" + (" (losses: inconclusive)" if p["inconclusive"] else ""))
            print(f"{result['schedule']}: measured {result['measured_s'] * 1e3:.2f} ms, predicted "
                  f"{result['predicted_s'] * 1e3:.2f} ms (x{result['measured_over_predicted']:.2f}); {verdict}; "
                  f"overhead {p['overhead'] * 100:.2f} %, {p['losses']['dropped_packets']} drops")
    if not result["ok"]:
        raise typer.Exit(1)


@app.command("calibrate")
def calibrate_cmd(
    topology_file: Path = typer.Argument(..., metavar="TOPO", help="Topology file: the fabric to calibrate."),
    routes_file: Path = typer.Argument(..., metavar="ROUTES", help="Routing table."),
    name: str = NameOpt, scale: float = ScaleOpt, buffer: int | None = BufferOpt,
    output: Path = typer.Option(..., "-o", "--output", help="Calibration file to write (JSON)."),
    senders: str = typer.Option(",".join(map(str, calibration.DEFAULT_SENDERS)), "--senders",
                                help="Incast sweep: senders per point (hosts 1..k send to host 0)."),
    nbytes: int = typer.Option(calibration.DEFAULT_INCAST_BYTES, "--bytes", help="Bytes each incast sender sends."),
    repeats: int = typer.Option(calibration.DEFAULT_REPEATS, "--repeats", help="Runs per sweep point (the median counts)."),
    timed_seconds: float = typer.Option(calibration.TIMED_SECONDS, "--timed-seconds",
                                        help="Time each short point for about this long (at most "
                                             f"{calibration.MAX_TIMED_CALLS} calls; 0: {calibration.TIMED_CALLS} calls)."),
    native: str = typer.Option(",".join(calibration.NATIVE_COLLECTIVES), "--native",
                               help="Collectives Open MPI's and MPICH's host cost is measured on (nwbench), "
                                    "comma-separated; 'none' to skip."),
    as_json: bool = JsonOpt,
) -> None:
    """Measure what the flow model needs on the emulated fabric — per-message host overhead,
    sync cost, on Ethernet the loss behaviour at the port buffer (an incast sweep), and what
    Open MPI's and MPICH's own collectives cost the hosts per message — and write a calibration
    file for simulate flow / plan --calibration (see docs/flowsim.md)."""
    try:
        counts = tuple(int(v) for v in senders.split(",") if v.strip())
    except ValueError:
        raise UserError(f"--senders must be comma-separated integers, got '{senders}'") from None
    if buffer is not None and buffer <= 0:
        raise UserError(f"--buffer {buffer}: a port buffer must be a positive number of bytes")
    natives = () if native.strip() == "none" else tuple(c.strip() for c in native.split(",") if c.strip())
    if not output.parent.is_dir():
        raise UserError(f"{output}: its directory does not exist")
    topo, routes = _load(topology_file, routes_file)
    emulate.require_root()
    with working(f"calibrating on {name}", as_json) as steps:
        doc = calibration.calibrate(topo, routes, name, scale=scale, buffer=buffer, senders=counts, nbytes=nbytes,
                                    repeats=repeats, natives=natives, timed_seconds=timed_seconds,
                                    progress=lambda what: steps.update(description=f"calibrating on {name}: {what}"))
    calibration.write(doc, output)
    if as_json:
        print(json.dumps(doc, indent=2, sort_keys=True))
        return
    p = doc["parameters"]
    print(f"wrote {output}: overhead {p['overhead_s'] * 1e6:.1f} us per message, sync {p['sync_s'] * 1e6:.1f} us")
    if "tcp" in p:
        t = p["tcp"]
        print(f"TCP: timeout {t['timeout_s'] * 1e3:.0f} ms, {t['window_segments']:g} segments per flow, "
              f"survival per segment {t['survival_per_segment']:g}")
        for point in doc["measurements"]["incast"]:
            print(f"  incast {point['senders']:>3} x {point['bytes']:,} B: measured median {point['median_s'] * 1e3:.1f} ms "
                  f"(runs {', '.join(f'{t * 1e3:.0f}' for t in point['measured_s'])}), predicted {point['predicted_s'] * 1e3:.1f} ms")
    for library, section in doc.get("native", {}).items():
        for key, entry in section["collectives"].items():
            c = entry["parameters"]
            collective = key.removesuffix(calibration.XOR_PAIRED)
            pairing = " (ranks paired by XOR)" if key != collective else ""
            print(f"{library}'s {collective}{pairing} on {section['ranks']} ranks: {c['eager_s'] * 1e3:.2f} ms per message up to "
                  f"{section['eager_limit_bytes']:,} B, {c['rendezvous_s'] * 1e3:.2f} ms above, "
                  f"{c['byte_s'] * 1e9:.1f} ns per byte, paid by each message's "
                  f"{'receiver' if collective in calibration.RECEIVER_PAYS else 'sender'}")
        for point in section["measurements"]:
            print(f"  {point['collective']:<8} {point['bytes']:>9,} B on {point['ranks']} ranks, links x {point['scale']:g}: measured "
                  f"{point['measured_s'] * 1e3:.1f} ms, model {point['model_s'] * 1e3:.1f} ms, "
                  f"with the cost {point['predicted_s'] * 1e3:.1f} ms")
