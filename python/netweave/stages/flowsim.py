"""Flow-level simulation: how long a schedule takes on a routed fabric.

Every message is a flow over its routed path; flows share each directed channel's bandwidth
max-min fairly, links add their latency, hosts inject and eject at their link's rate (or an
overridden one). Executors decide when messages are issued: ``sync`` (phase-synchronous with a
barrier), ``async`` (FIFO with ``nct`` concurrent sends per host, paper 001), ``local-sync``
(each step waits for the previous step's incoming messages, paper 001) and ``dag`` (paper 004's
dependency DAG with 1-byte sync messages and cut-through relays).

>>> import netweave
>>> topo = netweave.stages.topology.torus([4, 4])
>>> routes = netweave.stages.routing.route(topo, "dor")
>>> sched = netweave.stages.traffic.alltoall(16, 1 << 16)
>>> rep = netweave.stages.flowsim.simulate(routes, sched, executor="async")
>>> rep["makespan_s"] > 0
True

``simulate`` is the one entry point the rest of netweave (``plan``, ``reproduce``) calls. The
topology's link layer picks the model: lossless max-min on InfiniBand, port buffers and TCP
timeouts on Ethernet (``topology.link_layer``, ``topology.port_buffer_bytes``; see
docs/flowsim.md). A calibration file (:func:`load_calibration`, written by
``netweave emulate calibrate``) replaces the defaults with what was measured on a fabric.
"""

from __future__ import annotations

import csv
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from netweave import _core
from netweave.support import files

#: Executor names `simulate` accepts.
EXECUTORS: tuple[str, ...] = tuple(_core.flow_executors())

#: Report fields that hold one value per host or per directed channel (numpy arrays).
_ARRAY_FIELDS = ("host_finish_s", "channel_busy_s", "channel_bytes", "channel_utilisation")

Workload = _core.Schedule | _core.TaskGraph

#: The lossy model's parameters and their defaults, as the engine holds them (one place:
#: ``flowsim/loss.rs``): ``segment_bytes``, ``timeout_s``, ``window_segments``, ``survival_per_segment``,
#: ``initial_window_segments``, ``probe_s``, ``timer_tick_s``, ``lone_tail_probability``, ``min_window_segments``,
#: ``steady_free_segments``, ``steady_segments_per_timeout``, ``timestamps``.
TCP_DEFAULTS: dict[str, float] = dict(_core.flow_tcp_defaults())

#: Calibration files: format tag and the one version this netweave reads.
CALIBRATION_FORMAT = "netweave-calibration"
CALIBRATION_VERSION = 6
#: What a calibration file's ``parameters`` may hold besides ``tcp`` and ``host_streams``.
CALIBRATION_TIMES = ("overhead_s", "sync_s", "barrier_s")


def check_calibration(calibration: dict[str, Any], topology: _core.Topology, source: str = "calibration") -> dict[str, Any]:
    """Check a calibration (as :func:`load_calibration` reads it) against the fabric it is to
    predict: format, version, and the link layer and port buffer it was measured with must match
    `topology`'s. Returns it; raises NetweaveError in one line naming `source` otherwise."""
    if not isinstance(calibration, dict) or calibration.get("format") != CALIBRATION_FORMAT:
        raise _core.NetweaveError(f"{source}: not a netweave calibration file (no \"format\": \"{CALIBRATION_FORMAT}\")")
    if calibration.get("version") != CALIBRATION_VERSION:
        raise _core.NetweaveError(f"{source}: calibration version {calibration.get('version')!r}; this netweave reads "
                                  f"version {CALIBRATION_VERSION} (run netweave emulate calibrate again)")
    fabric = calibration.get("fabric") or {}
    want = (topology.link_layer, topology.port_buffer_bytes)
    got = (fabric.get("link_layer"), fabric.get("port_buffer_bytes"))
    if got != want:
        raise _core.NetweaveError(
            f"{source}: measured on a fabric of link layer {got[0]} with port buffer {_buffer_text(got[1])}; this "
            f"topology's link layer is {want[0]} with port buffer {_buffer_text(want[1])} (calibrate on this fabric)")
    params = calibration.get("parameters")
    if not isinstance(params, dict):
        raise _core.NetweaveError(f"{source}: no \"parameters\" object")
    for key in CALIBRATION_TIMES:
        value = params.get(key, 0.0)
        if not isinstance(value, (int, float)) or not value >= 0:
            raise _core.NetweaveError(f"{source}: parameters.{key} must be a non-negative number of seconds, got {value!r}")
    check_host_streams(params.get("host_streams"), f"{source}: parameters.host_streams")
    tcp = params.get("tcp", {})
    if not isinstance(tcp, dict) or set(tcp) - set(TCP_DEFAULTS):
        raise _core.NetweaveError(f"{source}: parameters.tcp may hold only {', '.join(TCP_DEFAULTS)}")
    return calibration


def check_host_streams(streams: Any, where: str) -> None:
    """Refuse, in one line naming `where`, a ``host_streams`` that is neither absent (None) nor a
    whole number of sends ≥ 1."""
    if streams is not None and (not isinstance(streams, int) or isinstance(streams, bool) or streams < 1):
        raise _core.NetweaveError(f"{where} must be a whole number of sends, at least 1, got {streams!r}")


def _buffer_text(buffer: int | None) -> str:
    return "none" if buffer is None else f"{buffer:,} bytes"


def load_calibration(path, topology: _core.Topology) -> dict[str, Any]:
    """Read a calibration file and check it fits `topology` (see :func:`check_calibration`)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise _core.NetweaveError(f"{path}: no such calibration file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _core.NetweaveError(f"{path}: not a JSON calibration file ({e})") from None
    return check_calibration(doc, topology, str(path))


def simulate(
    routes: _core.RoutingTable,
    workload: Workload,
    executor: str = "sync",
    nct: int = 1,
    barrier_s: float | None = None,
    overhead_s: float | None = None,
    mtu: int | None = None,
    header_bytes: int = 0,
    injection_gbps: float | None = None,
    ejection_gbps: float | None = None,
    bytes: int | None = None,
    series: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    calibration: str | Path | dict[str, Any] | None = None,
    tcp: dict[str, float] | None = None,
    sync_s: float | None = None,
    host_streams: int | None = None,
    receive_s: float = 0.0,
    receive_per_byte_s: float = 0.0,
) -> dict[str, Any]:
    """Simulate `workload` (a Schedule, or a TaskGraph for the ``dag`` executor; a Schedule run
    with ``dag`` becomes its local-sync DAG) on the topology `routes` was computed for.

    `nct` is the number of concurrent sends per host, `barrier_s` the cost of each barrier
    between phases (``sync``), `overhead_s` the software overhead per message (its sender's),
    `receive_s` and `receive_per_byte_s` what its receiver pays per message and per byte of it
    once it has arrived, one message at a time (an MPI library's host cost), `mtu` and
    `header_bytes` packetise messages, `injection_gbps`/`ejection_gbps` override the hosts'
    link rates, `bytes` replaces every message's size, `series` records active flows and
    aggregate rate over time. `on_progress(delivered, total)` is called a few times a second.

    The model follows the topology's link layer: lossless max-min on InfiniBand; on Ethernet,
    switch port buffers of ``topology.port_buffer_bytes`` and TCP retransmission timeouts
    (``timeouts`` in the report). `calibration` (a file path or a loaded dict, checked against
    the topology) supplies measured ``overhead_s``, ``sync_s`` (a DAG's 1-byte sync message; by
    default it costs ``overhead_s``), ``barrier_s`` and TCP parameters; explicit arguments win
    over it, and :data:`TCP_DEFAULTS` fill the rest. `host_streams` (or the
    calibration's), the sends a host was measured to stream at once however many it posts, caps
    the sends in flight (the rest wait in posting order; steps stay `nct` phases;
    docs/flowsim.md, "Host streams").

    Returns a dict: ``makespan_s``, ``throughput_per_server_mib_s`` (IMB-style: payload sent
    per server / makespan), per-host ``host_finish_s`` and per-channel ``channel_busy_s``,
    ``channel_bytes``, ``channel_utilisation`` as numpy arrays, and counters.
    """
    if executor not in EXECUTORS:
        raise _core.NetweaveError(f"unknown executor '{executor}' (known: {', '.join(EXECUTORS)})")
    measured: dict[str, Any] = {}
    if calibration is not None:
        if not isinstance(calibration, dict):
            calibration = load_calibration(calibration, routes.topology)
        else:
            check_calibration(calibration, routes.topology)
        measured = calibration["parameters"]
    barrier_s = float(measured.get("barrier_s", 0.0)) if barrier_s is None else barrier_s
    overhead_s = float(measured.get("overhead_s", 0.0)) if overhead_s is None else overhead_s
    if sync_s is None and "sync_s" in measured:
        sync_s = float(measured["sync_s"])
    tcp = {**measured.get("tcp", {}), **(tcp or {})}
    kwargs: dict[str, Any] = dict(
        executor=executor,
        nct=nct,
        barrier_s=barrier_s,
        overhead_s=overhead_s,
        receive_s=receive_s,
        receive_per_byte_s=receive_per_byte_s,
        mtu=mtu,
        header_bytes=header_bytes,
        injection_gbps=injection_gbps,
        ejection_gbps=ejection_gbps,
        bytes=bytes,
        series=series,
        tcp={k: float(v) for k, v in tcp.items()} or None,
        sync_s=sync_s,
        host_streams=measured.get("host_streams") if host_streams is None else host_streams,
    )
    if on_progress is None:
        report = _core.flow_simulate(routes, workload, **kwargs)
    else:
        report = _run_watched(routes, workload, kwargs, on_progress)
    for key in _ARRAY_FIELDS:
        report[key] = np.asarray(report[key], dtype=np.uint64 if key == "channel_bytes" else np.float64)
    return report


def _run_watched(routes, workload, kwargs, on_progress) -> dict:
    """Run in a background thread (the engine releases the GIL) and report progress meanwhile."""
    total = workload.num_tasks if isinstance(workload, _core.TaskGraph) else workload.num_messages
    progress = _core.FlowProgress()
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["report"] = _core.flow_simulate(routes, workload, progress=progress, **kwargs)
        except BaseException as e:  # re-raised in the caller's thread
            result["error"] = e

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
        on_progress(progress.delivered, total)
    if "error" in result:
        raise result["error"]
    on_progress(total, total)
    return result["report"]


def load_workload(path) -> Workload:
    """Read a schedule file: the phased form (via :func:`netweave.stages.traffic.load`) or the
    dependency-DAG form (``"form": "dag"``)."""
    path = Path(path)
    if path.suffix == ".nws":
        with open(path, "rb") as f:
            header = f.read(16)
        if len(header) == 16 and header[12] == 1:  # form 1: a task DAG
            with files.naming(path):
                return _core.TaskGraph.load(path)
    # Size-limited, and bad bytes named with the file and offset (the file may be anything).
    text = _core.read_text_file(str(path)) if path.suffix != ".nws" else None
    if text is not None:
        try:
            head = json.loads(text)
        except json.JSONDecodeError as e:
            raise _core.NetweaveError(f"{path}: not a JSON schedule file ({e.msg} at line {e.lineno})") from None
        if isinstance(head, dict) and head.get("form") == "dag":
            with files.naming(path):
                return _core.TaskGraph.from_json(text)
    from netweave.stages import traffic

    loader = getattr(traffic, "load", None)
    if loader is None:
        raise _core.NetweaveError(f"{path}: phased schedule files need netweave.stages.traffic.load, which this build lacks")
    return loader(path)


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """The scalar part of a report (what ``--json`` prints), without per-host/per-link arrays."""
    keep = {k: v for k, v in report.items() if k not in _ARRAY_FIELDS and k != "series"}
    finish = report["host_finish_s"]
    active = finish[finish > 0]
    keep["host_finish_min_s"] = float(active.min()) if active.size else 0.0
    keep["host_finish_max_s"] = float(active.max()) if active.size else 0.0
    keep["channels_used"] = int(np.count_nonzero(report["channel_bytes"]))
    return keep


#: The files :func:`save` may write into its directory (what a caller checks the directory for first).
OUTPUT_FILES = ("flow.json", "hosts.csv", "channels.csv", "series.csv", "link_utilisation.png", "host_finish.png")


def save(report: dict[str, Any], topology: _core.Topology, out_dir, plots: bool = True) -> list[Path]:
    """Write ``flow.json`` (everything), ``hosts.csv``, ``channels.csv``, ``series.csv`` (if
    recorded) and, with `plots`, ``link_utilisation.png`` and ``host_finish.png`` into `out_dir`."""
    out = Path(out_dir)
    files.ensure_dir(out)
    written = []
    full = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in report.items()}
    files.write_text(out / "flow.json", json.dumps(full, indent=1, sort_keys=True) + "\n")
    written.append(out / "flow.json")
    hosts = topology.hosts_labels() if hasattr(topology, "hosts_labels") else None
    with files.open_atomic(out / "hosts.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["host", "label", "finish_s"])
        for h, t in enumerate(report["host_finish_s"]):
            w.writerow([h, hosts[h] if hosts else h, repr(float(t))])
    written.append(out / "hosts.csv")
    with files.open_atomic(out / "channels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["channel", "link", "direction", "bytes", "busy_s", "utilisation"])
        for c, (b, busy, u) in enumerate(
            zip(report["channel_bytes"], report["channel_busy_s"], report["channel_utilisation"])
        ):
            w.writerow([c, *topology.channel_link(c), int(b), repr(float(busy)), repr(float(u))])
    written.append(out / "channels.csv")
    if report.get("series"):
        with files.open_atomic(out / "series.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time_s", "active_flows", "aggregate_rate_Bps"])
            for p in report["series"]:
                w.writerow([repr(p["time_s"]), p["active_flows"], repr(p["aggregate_rate_bps"])])
        written.append(out / "series.csv")
    if plots:
        written += plot(report, out)
    return written


def plot(report: dict[str, Any], out_dir) -> list[Path]:
    """PNG plots: channel utilisation (sorted, busiest first) and per-host finish times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    title = f"{report['executor']} executor, NCT {report['nct']}, makespan {report['makespan_s'] * 1e3:.4g} ms"
    util = np.sort(report["channel_utilisation"][report["channel_bytes"] > 0])[::-1]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(np.arange(util.size), util, drawstyle="steps-post")
    ax.set_xlabel("directed channel (sorted by utilisation)")
    ax.set_ylabel("bytes / (capacity x makespan)")
    ax.set_ylim(0, max(1.0, float(util.max()) if util.size else 1.0) * 1.05)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    files.savefig(fig, out / "link_utilisation.png", dpi=120)
    plt.close(fig)
    finish = report["host_finish_s"] * 1e3
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(np.arange(finish.size), finish, width=1.0)
    ax.set_xlabel("host index")
    ax.set_ylabel("finish time (ms)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    files.savefig(fig, out / "host_finish.png", dpi=120)
    plt.close(fig)
    return [out / "link_utilisation.png", out / "host_finish.png"]
