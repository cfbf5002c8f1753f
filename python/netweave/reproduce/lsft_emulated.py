"""Paper 000's real-machine experiment (§5, Figs. 19–21) on the emulated cluster.

The paper built S1–S3 from InfiniBand switches and ran IMB's Alltoall with Open MPI's pairwise
and linear algorithms and with its LSFT destination order as a custom ``MPI_Alltoall``. Here the
LSFT is emulated (:mod:`netweave.run.emulate`: a namespace per server and switch, routed by
netweave's ``lsft`` tables), and the same three contenders run inside an unchanged
``MPI_Alltoall`` of ``nwbench`` with Open MPI over TCP: the native pairwise and linear
algorithms, and netweave's shift and proposed (LSFT) schedules through the MPI runtime
(:mod:`netweave.run.mpi`). Per-server throughput is ``(N − 1) × bytes per pair / time`` (IMB's
t_avg), reported against the emulated link rate — the ratio of Fig. 22 — beside the flow
model's prediction for the same fabric and the paper's real-machine figures.

Configurations (Table 4): S1 the full order-2 LSFT (21 servers, the full-system schedule), S2
the (n, k, m) = (2, 2, 2) sub-cluster of the order-2 LSFT (8 servers), S3 the (3, 3, 3)
sub-cluster of the order-3 LSFT (27 servers; the paper left out the leaves and spine the
sub-cluster does not use, the emulation keeps them idle).

Executors: the proposed schedule runs phase-synchronously (``sync``: a barrier between phases),
which is what keeps it contention-free — the sub-cluster schedules have half-empty phases, and
ranks that run ahead into the next phase (local-sync) meet stragglers of the last (the flow model
gives S2 0.674 ms synchronised, 0.842 ms local-sync, 1.091 ms asynchronous at 1 MiB per pair);
netweave's shift runs local-sync, as Open MPI's pairwise does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netweave._core import NetweaveError
from netweave.reproduce.ethernet import write_csv
from netweave.reproduce.lsft import PAPER_LIMIT_MIBS, PAPER_REAL_SHIFT_MIBS
from netweave.run import emulate, mpi
from netweave.stages import flowsim, routing, topology, traffic
from netweave.support.files import ensure_dir, write_text

#: (name, LSFT order, k, m); k = None is the full system.
CONFIGS = (("S1", 2, None, None), ("S2", 2, 2, 2), ("S3", 3, 3, 3))
QUICK_CONFIGS = ("S2",)
#: Emulated host-link rate: what two cores carry for 27 senders through the namespaces.
LINK_BITS_PER_S = 40e6
BYTES, QUICK_BYTES = (65_536, 262_144), (131_072,)
#: How each netweave schedule runs (see the module docs).
EXECUTOR = {"shift": "local-sync", "proposed": "sync"}
#: Open MPI's coll_tuned numbers of the paper's two built-in algorithms.
NATIVE = {"pairwise": 2, "linear": 1}


#: Bytes per pair of the schedules as generated (they run at every size) and of the flow model's
#: prediction (large enough that link latency does not count).
SCHEDULE_BYTES = 1 << 20


def _schedules(order: int, k: int | None, m: int | None):
    topo = topology.lsft(order)
    if k is None or m is None:  # the full system (a sub-cluster names both k and m)
        return topo, traffic.alltoall(topo.num_hosts, SCHEDULE_BYTES), traffic.lsft_alltoall(topo, SCHEDULE_BYTES)
    return (topo, traffic.lsft_partial_shift(topo, k, m, SCHEDULE_BYTES),
            traffic.lsft_partial_alltoall(topo, k, m, SCHEDULE_BYTES))


def _bench(fabric, ranks: int, hosts: list[int], sizes, schedules: list[Path], native: str, env: dict) -> dict:
    program = mpi.nwbench_program("openmpi", "alltoall", sizes, reps=3, warmup=1, schedules=schedules)
    mca = ["--mca", "coll_tuned_use_dynamic_rules", "1", "--mca", "coll_tuned_alltoall_algorithm", str(NATIVE[native])]
    proc = emulate.mpirun(fabric, "openmpi", ranks, mca + program, timeout=900, env=env, hosts=hosts)
    return mpi.nwbench_report(proc, " on the emulated LSFT")


def run_config(name: str, order: int, k, m, sizes, work: Path, note: Callable[[str], None]) -> list[dict[str, Any]]:
    topo, shift, proposed = _schedules(order, k, m)
    routes = routing.route(topo, "lsft")
    link_bits = json.loads(topo.to_text("json"))["links"][0]["bandwidth_gbps"] * 1e9
    scale = LINK_BITS_PER_S / link_bits
    hosts = [int(h) for h in proposed.placement]
    if hosts != [int(h) for h in shift.placement]:
        raise NetweaveError(f"{name}: shift and the proposed schedule place ranks differently")
    files = []
    for label, sched in (("shift", shift), ("proposed", proposed)):
        files.append(work / f"{name}-{label}.nws")
        traffic.save(sched, files[-1], executor=EXECUTOR[label])
    fabric_name = "l" + uuid.uuid4().hex[:11]
    note(f"{name}: bringing up LSFT({order})")
    fabric = emulate.up(topo, routes, fabric_name, scale=scale)
    rows = []
    try:
        env = {"LD_PRELOAD": str(mpi.library_path("openmpi"))}
        note(f"{name}: pairwise, shift and proposed inside MPI_Alltoall")
        a = _bench(fabric, len(hosts), hosts, sizes, files, "pairwise", env)
        note(f"{name}: linear")
        b = _bench(fabric, len(hosts), hosts, sizes, [], "linear", env)
    finally:
        emulate.down(fabric_name)
    n = len(hosts)
    series = {"Open MPI pairwise": a["results"], "Open MPI linear": b["results"],
              "netweave shift": a["schedules"][0]["results"], "netweave proposed (LSFT)": a["schedules"][1]["results"]}
    # The flow model's per-server throughput over the link rate (fluid: the same at every size).
    predicted = {}
    for label, sched in (("netweave shift", shift), ("netweave proposed (LSFT)", proposed)):
        makespan = flowsim.simulate(routes, sched, executor=EXECUTOR[label.split()[1]])["makespan_s"]
        predicted[label] = (n - 1) * SCHEDULE_BYTES * 8 / makespan / link_bits
    for label, results in series.items():
        for r in results:
            per_server = (n - 1) * r["bytes"] / r["avg_s"] if r["avg_s"] else None
            rows.append({"config": name, "servers": n, "method": label, "bytes": r["bytes"], "avg_s": r["avg_s"],
                         "server_mib_s": per_server / 2**20 if per_server else None,
                         "ratio_to_link": per_server * 8 / LINK_BITS_PER_S if per_server else None,
                         "flow_model_ratio": predicted.get(label)})
    return rows


def run(out_dir: Path, quick: bool = False, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """S1–S3 (S2 only with `quick`) on emulated LSFTs; writes CSV and summary_emulated.md."""
    note = progress or (lambda _msg: None)
    emulate.require_root()
    out = Path(out_dir)
    ensure_dir(out)
    rows: list[dict[str, Any]] = []
    for name, order, k, m in CONFIGS:
        if quick and name not in QUICK_CONFIGS:
            continue
        rows += run_config(name, order, k, m, QUICK_BYTES if quick else BYTES, out, note)
    result = {"quick": quick, "rows": rows, "headline": headline(rows)}
    files = [write_csv(out / "emulated_lsft.csv", rows)]
    write_text(out / "summary_emulated.md", summary(result))
    write_text(out / "results_emulated.json", json.dumps(result, indent=1, sort_keys=True) + "\n")
    result["files"] = [str(p) for p in files + [out / "summary_emulated.md", out / "results_emulated.json"]]
    return result


def headline(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per configuration, at the largest size: proposed over shift, over pairwise, and the ratios to
    the link (measured and flow model)."""
    out = {}
    for name in sorted({r["config"] for r in rows}):
        size = max(r["bytes"] for r in rows if r["config"] == name)
        cell = {r["method"]: r for r in rows if r["config"] == name and r["bytes"] == size}
        prop, shift = cell["netweave proposed (LSFT)"], cell["netweave shift"]
        out[name] = {"bytes": size, "proposed_over_shift": shift["avg_s"] / prop["avg_s"],
                     "proposed_over_pairwise": cell["Open MPI pairwise"]["avg_s"] / prop["avg_s"],
                     "shift_ratio_to_link": shift["ratio_to_link"], "proposed_ratio_to_link": prop["ratio_to_link"],
                     "shift_flow_model": shift["flow_model_ratio"], "proposed_flow_model": prop["flow_model_ratio"],
                     "paper_real_shift": PAPER_REAL_SHIFT_MIBS[name] / PAPER_LIMIT_MIBS,
                     "paper_real_proposed_over_shift": 3700 / PAPER_REAL_SHIFT_MIBS[name]}
    return out


def summary(result: dict[str, Any]) -> str:
    lines = ["# Paper 000 §5 on the emulated cluster", "",
             f"IMB-style `nwbench` inside an unchanged `MPI_Alltoall` (Open MPI over TCP), on LSFTs emulated with "
             f"namespaces routed by netweave's `lsft` tables, host links at {LINK_BITS_PER_S / 1e6:.0f} Mbit/s. "
             + ("Quick run." if result["quick"] else ""), "",
             "| config | bytes per pair | proposed ÷ shift (throughput) | proposed ÷ Open MPI pairwise | shift / link: measured, "
             "flow model, paper's machine | proposed / link: measured, flow model | paper: proposed ÷ shift |",
             "|---|---|---|---|---|---|---|"]
    for name, h in result["headline"].items():
        lines.append(f"| {name} | {h['bytes']} | {h['proposed_over_shift']:.2f} | {h['proposed_over_pairwise']:.2f} | "
                     f"{h['shift_ratio_to_link']:.3f}, {h['shift_flow_model']:.3f}, {h['paper_real_shift']:.3f} | "
                     f"{h['proposed_ratio_to_link']:.3f}, {h['proposed_flow_model']:.3f} | "
                     f"{h['paper_real_proposed_over_shift']:.2f} |")
    lines += ["", "| config | method | bytes | ms per call | MiB/s per server | / link |", "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['config']} | {r['method']} | {r['bytes']} | {r['avg_s'] * 1e3:.1f} | "
                     f"{r['server_mib_s']:.2f} | {r['ratio_to_link']:.3f} |")
    lines += ["", "The emulation has no link latency and runs every rank on two cores; the ratios, not the absolute "
              "rates, are what compare with the paper.", ""]
    return "\n".join(lines)
