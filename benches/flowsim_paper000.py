"""Paper 000, Figs. 19-21: per-server all-to-all throughput against message size on S1-S3.

S1 is the full order-2 Latin-square fat-tree (21 servers), S2 its 2 × 2 × 2 sub-cluster
(8 servers), S3 the 3 × 3 × 3 sub-cluster of the order-3 LSFT (27 servers); routes are the
LSFT's unique paths. Links run at QDR's usable rate (IMB PingPong 3,717 MiB/s) with 100 ns per
link and 1 µs of software overhead per message (assumptions: the paper gives neither). Message
sizes are 1 B … 256 MiB per destination; throughput is IMB-style, (N − 1)·M / T per server.

Executors: ``sync`` runs the phases in lock-step (free barriers), as the contention-free proof
assumes; ``local-sync`` stands for Open MPI's pairwise exchange (each step waits for its
partner's data), ``async`` for the linear algorithm (FIFO, one send at a time). A sub-cluster
LSFT schedule keeps its N/(N − 1) phase overhead only in lock-step: a host idle in one phase runs
ahead under local sync and meets the next phase's traffic on a busy link. The schedules come
from ``netweave.traffic.lsft_alltoall`` / ``lsft_partial_alltoall``.

Usage::

    python benches/flowsim_paper000.py --out DIR [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

QDR_MIB_S = 3717.0
QDR_GBPS = QDR_MIB_S * 2**20 * 8 / 1e9
LATENCY_NS = 100.0
OVERHEAD_S = 1e-6
SIZES = [1 << e for e in range(0, 29)]
PAPER_SHIFT_MIB_S = {"S1": 1400, "S2": 2700, "S3": 1500}


def _with_links(topo):
    from netweave import topology

    g = topology.to_networkx(topo)
    for _, _, d in g.edges(data=True):
        d["bandwidth_gbps"], d["latency_ns"] = QDR_GBPS, LATENCY_NS
    return topology.from_networkx(g)


def configurations():
    """(name, topology, {schedule name: schedule at 1 byte}) per configuration."""
    from netweave import topology, traffic

    have_lsft = hasattr(traffic, "lsft_alltoall")
    t2 = _with_links(topology.latin_square_fat_tree(2))
    t3 = _with_links(topology.latin_square_fat_tree(3))
    configs = [("S1", t2, {"shift": traffic.alltoall(t2.num_hosts, 1)})]
    if have_lsft:
        configs[0][2]["LSFT"] = traffic.lsft_alltoall(t2, 1)
        configs.append(("S2", t2, {"shift": traffic.lsft_partial_shift(t2, 2, 2, 1),
                                   "LSFT": traffic.lsft_partial_alltoall(t2, 2, 2, 1)}))
        configs.append(("S3", t3, {"shift": traffic.lsft_partial_shift(t3, 3, 3, 1),
                                   "LSFT": traffic.lsft_partial_alltoall(t3, 3, 3, 1)}))
    else:
        print("missing: netweave.traffic.lsft_alltoall / lsft_partial_* (LSFT schedules); "
              "drawing S1 shift only", file=sys.stderr)
    return configs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="directory for paper000_throughput.png and .json")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from netweave import flowsim, routing

    rows = []
    for name, topo, schedules in configurations():
        routes = routing.route(topo, "lsft")
        for sched_name, sched in schedules.items():
            n = sched.num_ranks
            for executor in ("sync", "local-sync", "async"):
                curve = []
                for size in SIZES:
                    rep = flowsim.simulate(routes, sched, executor=executor, bytes=size, overhead_s=OVERHEAD_S)
                    curve.append((n - 1) * size / rep["makespan_s"] / 2**20)
                rows.append({"config": name, "servers": n, "schedule": sched_name, "executor": executor,
                             "sizes": SIZES, "throughput_mib_s": curve})
                print(f"{name} ({n} servers) {sched_name:>5} {executor:>10}: {curve[-1]:7.0f} MiB/s at 256 MiB "
                      f"({curve[-1] / QDR_MIB_S:.3f} of QDR; paper's real shift: {PAPER_SHIFT_MIB_S[name]} MiB/s)")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "paper000_throughput.json").write_text(json.dumps(rows, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r["config"] for r in rows})
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for r in rows:
            if r["config"] == name:
                ax.semilogx(r["sizes"], r["throughput_mib_s"], base=2, marker=".",
                            label=f"{r['schedule']} ({r['executor']})")
        ax.axhline(QDR_MIB_S, color="grey", ls="--", lw=0.8, label="QDR limit 3,717 MiB/s")
        ax.axhline(PAPER_SHIFT_MIB_S[name], color="red", ls=":", lw=0.8, label="paper, real shift")
        ax.set_title(f"{name}: flow-level simulation")
        ax.set_xlabel("message size per destination (bytes)")
        ax.set_ylabel("per-server throughput (MiB/s)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out / "paper000_throughput.png", dpi=120)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
