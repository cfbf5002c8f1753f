"""Paper 004 on the emulated cluster: real TCP through namespaces routed by netweave's tables.

``run(out_dir, quick)`` (root only; :mod:`netweave.run.emulate`) reproduces:

- **§3, incast** (Figs. 3.x, Table 3.2's setting): one switch, 1 Gbit/s hosts, ``senders`` hosts
  each sending 1 MB to one root, every sender at once (Concurrent) against one after another
  (the contention-free schedule, whose tasks all share the root's downlink), on a shallow
  switch buffer. The thesis measured 700–800 Mbit/s sequentially and 200–300 Mbit/s
  concurrently beyond 3 senders, with retransmission-timeout stalls (Linux's 200 ms minimum).
- **§6.3.1, all-to-all against MPI** (:mod:`netweave.reproduce.ethernet_alltoall`): 64 hosts on
  edge switches of 14 under one root, links × 0.1, 1 KiB to 1 MiB per pair: the paper's DAG, the
  tree-phased schedule and the packed DAG on netweave's executor against Open MPI's and MPICH's
  native ``MPI_Alltoall`` (``nwbench``), retransmissions and timeouts counted (``--quick``: 2 × 14
  hosts, 16 KiB). MPICH over UCX hangs in ``MPI_Finalize`` in about half the runs on an emulated
  tree, after all its work (see docs/emulate.md): its run is ended once ``nwbench`` has printed
  every result.
- **§6.3.2 in shape**: gather on a 14-hosts-per-switch hierarchy (2 edge switches, 1 Gbit/s
  hosts, 10 Gbit/s trunks, scaled to what two cores carry) with relaying, without it (Min
  Sync) and Concurrent, 10 KB to 500 KB per host (thesis: relaying about 14 % better).

Scaling: links run at their bandwidth × ``scale`` (1.0 for the one-switch incast, whose only
bottleneck is the root's 1 Gbit/s downlink; 0.2 for the hierarchy, so that 27 senders'
forwarding fits two cores). There is no link latency in the emulation (no ``netem`` here), so
sync messages cost microseconds instead of the thesis' LAN latencies.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netweave.reproduce import ethernet_alltoall
from netweave.reproduce.ethernet import write_csv
from netweave.run import emulate
from netweave.stages import routing, topology, traffic

#: Senders of the incast experiment, the bytes each sends, and the switch port queue.
SENDERS, QUICK_SENDERS = (1, 2, 4, 8, 16, 31), (4, 31)
INCAST_BYTES = 1_000_000
SHALLOW_BUFFER = 64 * 1024
#: Gather on the hierarchy: bytes per host, and the link scale.
GATHER_SIZES, QUICK_GATHER_SIZES = (10_000, 50_000, 100_000, 500_000), (50_000,)
HIERARCHY_SCALE = 0.2

PAPER = {
    "incast": "sequential 700-800 Mbit/s; concurrent 200-300 Mbit/s beyond 3 senders; about 4 zero-receive "
              "stalls at 31 senders x 1 MB (RTO minimum 200 ms)",
    "relaying": "gather with relaying about 14 % faster than without on average (single cluster)",
    "alltoall": ethernet_alltoall.PAPER,
}


def _name() -> str:
    return "r" + uuid.uuid4().hex[:11]


def incast(quick: bool, note: Callable[[str], None]) -> list[dict[str, Any]]:
    """§3: Concurrent against sequential gather of 1 MB per sender on one switch."""
    star = topology.switch_tree([], 32, [], [], 1.0, 5_000.0)
    routes = routing.route(star, "updown")
    rows = []
    for senders in QUICK_SENDERS if quick else SENDERS:
        tasks = [(s, 0, INCAST_BYTES) for s in range(1, senders + 1)]
        methods = {"concurrent": traffic.concurrent(star, "tasks", 0, tasks=tasks),
                   "sequential": traffic.contention_free(star, "tasks", 0, tasks=tasks, relay="off")[0]}
        for method, dag in methods.items():
            note(f"incast: {senders} senders, {method}")
            r = emulate.measure(star, routes, dag, _name(), scale=1.0, buffer=SHALLOW_BUFFER)
            seconds = r["measured_s"]
            rows.append({"senders": senders, "method": method, "seconds": seconds,
                         "mbit_per_s": senders * INCAST_BYTES * 8 / seconds / 1e6 if seconds else None,
                         "dropped_packets": r["losses"]["dropped_packets"],
                         "retransmitted_segments": r["losses"]["retransmitted_segments"],
                         "slowest_task_s": _slowest(r), "ok": r["run"]["ok"]})
    return rows


def _slowest(result: dict[str, Any]) -> float | None:
    """The longest send-to-delivery time of any task (an RTO shows as ≥ 0.2 s)."""
    spans = [t["last_s"] - t["start_s"] for t in result.get("timeline", []) if t["last_s"] is not None
             and t["start_s"] is not None]
    return max(spans) if spans else None


def gather_relaying(quick: bool, note: Callable[[str], None]) -> list[dict[str, Any]]:
    """§6.3.2 in shape: gather with and without relaying, and Concurrent, on 2 × 14 hosts."""
    tree = topology.switch_tree([2], 14, [10.0], [5_000.0], 1.0, 5_000.0)
    routes = routing.route(tree, "updown")
    rows = []
    for nbytes in QUICK_GATHER_SIZES if quick else GATHER_SIZES:
        methods = {"OURS (relaying)": traffic.contention_free(tree, "gather", nbytes, root=0, relay="departure")[0],
                   "Min Sync (no relay)": traffic.contention_free(tree, "gather", nbytes, root=0, relay="off")[0],
                   "Concurrent": traffic.concurrent(tree, "gather", nbytes, root=0)}
        for method, dag in methods.items():
            note(f"gather {nbytes} B: {method}")
            r = emulate.measure(tree, routes, dag, _name(), scale=HIERARCHY_SCALE, buffer=SHALLOW_BUFFER)
            rows.append({"bytes": nbytes, "method": method, "seconds": r["measured_s"], "predicted_s": r["predicted_s"],
                         "dropped_packets": r["losses"]["dropped_packets"],
                         "retransmitted_segments": r["losses"]["retransmitted_segments"], "ok": r["run"]["ok"]})
    return rows


def run(out_dir: Path, quick: bool = False, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run both experiments on emulated fabrics; write CSV, PNG and summary_emulated.md."""
    note = progress or (lambda _msg: None)
    emulate.require_root()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    alltoall = ethernet_alltoall.run(quick, note)
    result: dict[str, Any] = {"quick": quick, "incast": incast(quick, note), "gather_relaying": gather_relaying(quick, note),
                              "alltoall_vs_mpi": alltoall["rows"], "alltoall_zero_byte": alltoall["zero_byte"],
                              "alltoall": {k: v for k, v in alltoall.items() if k not in ("rows", "zero_byte")}}
    files = []
    for key in ("incast", "gather_relaying", "alltoall_vs_mpi", "alltoall_zero_byte"):
        files.append(write_csv(out / f"emulated_{key}.csv", result[key]))
    files += [_plot(result, out), ethernet_alltoall.plot(alltoall, out)]
    (out / "summary_emulated.md").write_text(summary(result))
    (out / "results_emulated.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    result["headline"] = headline(result)
    result["files"] = [str(p) for p in files + [out / "summary_emulated.md", out / "results_emulated.json"]]
    return result


def headline(result: dict[str, Any]) -> dict[str, Any]:
    """Sequential and concurrent rates at the most senders, relaying's gain per size, and the
    all-to-all's ratios to the native MPIs (:func:`netweave.reproduce.ethernet_alltoall.headline`)."""
    most = max(r["senders"] for r in result["incast"])
    at = {r["method"]: r for r in result["incast"] if r["senders"] == most}
    gains = {}
    for nbytes in sorted({r["bytes"] for r in result["gather_relaying"]}):
        cell = {r["method"]: r["seconds"] for r in result["gather_relaying"] if r["bytes"] == nbytes}
        if cell.get("OURS (relaying)") and cell.get("Min Sync (no relay)"):
            gains[nbytes] = cell["OURS (relaying)"] / cell["Min Sync (no relay)"]
    return {"alltoall": result["alltoall"]["headline"], "senders": most, "sequential_mbit_per_s": at["sequential"]["mbit_per_s"],
            "concurrent_mbit_per_s": at["concurrent"]["mbit_per_s"],
            "concurrent_retransmitted_segments": at["concurrent"]["retransmitted_segments"],
            "relaying_over_no_relay": gains}


def summary(result: dict[str, Any]) -> str:
    h = headline(result)
    lines = ["# Paper 004 on the emulated cluster", "",
             "Real TCP between network namespaces routed by netweave's tables (`netweave emulate`). "
             + ("Quick run." if result["quick"] else ""), "",
             "| | paper | netweave, emulated |", "|---|---|---|",
             f"| §3 incast, {h['senders']} senders x 1 MB | {PAPER['incast']} | sequential {h['sequential_mbit_per_s']:.0f} Mbit/s, "
             f"concurrent {h['concurrent_mbit_per_s']:.0f} Mbit/s with {h['concurrent_retransmitted_segments']} retransmitted segments |",
             f"| §6.3.2 relaying, gather | {PAPER['relaying']} | relaying ÷ no relay: "
             + ", ".join(f"{b} B {g:.2f}" for b, g in h["relaying_over_no_relay"].items()) + " |",
             f"| §6.3.1 all-to-all vs MPI | {PAPER['alltoall']} | {_alltoall_cell(h['alltoall'])} |",
             "", "## Incast (one switch, 1 Gbit/s, 64 KiB port queue)", "",
             "| senders | method | ms | Mbit/s | drops | retransmitted | slowest task ms |", "|---|---|---|---|---|---|---|"]
    for r in result["incast"]:
        lines.append(f"| {r['senders']} | {r['method']} | {r['seconds'] * 1e3:.1f} | {r['mbit_per_s']:.0f} | {r['dropped_packets']} | "
                     f"{r['retransmitted_segments']} | {(r['slowest_task_s'] or 0) * 1e3:.1f} |")
    lines += ["", f"## Gather on 2 x 14 hosts (links x {HIERARCHY_SCALE})", "",
              "| bytes | method | measured ms | flow model ms | drops |", "|---|---|---|---|---|"]
    for r in result["gather_relaying"]:
        lines.append(f"| {r['bytes']} | {r['method']} | {r['seconds'] * 1e3:.1f} | {r['predicted_s'] * 1e3:.1f} | {r['dropped_packets']} |")
    lines += [""] + ethernet_alltoall.summary({"setup": result["alltoall"]["setup"], "rows": result["alltoall_vs_mpi"],
                                               "zero_byte": result["alltoall_zero_byte"],
                                               "headline": result["alltoall"]["headline"]})
    lines += ["", "No link latency is emulated (no netem in this kernel): syncs cost microseconds, so relaying has less "
              "to save than on the thesis' LAN.", ""]
    return "\n".join(lines)


def _alltoall_cell(h: dict[str, Any]) -> str:
    """Best schedule ÷ each native MPI, mean over 1 KiB-200 KiB and at ≥ 1 MiB, for the overview table."""
    parts = []
    for implementation, method in ethernet_alltoall.NATIVES.items():
        x = h.get(implementation, {})
        small, large = x.get("best_over_native_small"), x.get("best_over_native_large")
        below = {k: "≤ " if x.get(f"upper_bound_{k}") else "" for k in ("small", "large")}
        parts.append(f"÷ {method.split(' MPI_')[0]}: " + (f"{below['small']}{small:.2f} at 1-200 KiB" if small is not None else "–")
                     + (f", {below['large']}{large:.2f} at 1 MiB" if large is not None else ""))
    return "best of ours " + "; ".join(parts)


def _plot(result: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for method in ("sequential", "concurrent"):
        rows = [r for r in result["incast"] if r["method"] == method]
        ax.plot([r["senders"] for r in rows], [r["mbit_per_s"] for r in rows], marker="o", label=method)
    ax.axhspan(200, 300, color="tab:orange", alpha=0.15, label="thesis: concurrent")
    ax.axhspan(700, 800, color="tab:blue", alpha=0.15, label="thesis: sequential")
    ax.set(xlabel="senders (1 MB each, one root)", ylabel="Mbit/s at the root", title="Incast on the emulated switch")
    ax.legend()
    fig.tight_layout()
    path = out / "emulated_incast.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
