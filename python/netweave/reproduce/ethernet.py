"""Paper 004 reproduced in the flow model: contention-free gather and all-to-all on Ethernet trees.

``run(out_dir, quick)`` regenerates, with netweave's contention-free scheduler and the flow
simulator's DAG executor (max-min fair sharing, link latencies, real sync messages) next to the
scheduler's own cost-model replay:

- **§2.9 / Fig. 5.4**: every task policy on a heterogeneous 10-host, 6-switch tree, all-to-all
  from 100 B to 1 MB per pair, as time ÷ Min Sync's.
- **§5.5.5 / Fig. 5.6**: relaying (Min Sync, the thesis' departure rule) ÷ no relaying on the
  same tree, gather to host A and all-to-all, with the share of transfers relayed.
- **§6.2 / Figs. 6.2–6.3**: groups and scheduling time against hosts on an istbs-like tree
  (edge switches of 14 hosts under one core), all-to-all at 1 KB and 1 MB, relaying on.
- **§6.3.3 / Fig. 6.7**: schedules computed from link values perturbed by ±r ((6.1)/(6.2)),
  replayed on the true values: 64-host all-to-all, time ÷ the unperturbed schedule's.
- **§6.4 / Figs. 6.9–6.11**: two clusters (suzuk 32 + chiba 32, gather to a chiba host, and
  all-to-all) and the 12-cluster scaling of Table 6.2 (100 KB all-to-all) — Concurrent, Random,
  Max Sync, Min Sync and OURS (Min Sync with relaying).

Model choices where the paper is silent (also in ``summary.md``):

- Fig. 5.3's link values are only in the lost figure: :func:`fig_5_3_tree` is our stand-in
  with the figure's shape (hosts A–J, switches SW0–SW5) and deliberately mixed speeds and
  latencies (100 Mbit/s to 10 Gbit/s, 5 µs to 2 ms), since the section is about sync costs.
- InTrigger's WAN latencies are not given anywhere: 5 ms one way between two clusters
  (netweave's ``multi_cluster`` default); clusters are one switch each (Table 6.1's egress).
- The flow model has no packet loss and so no TCP retransmission timeout: the incast collapse
  that makes Concurrent slow on real Ethernet (§3, the 200 ms RTO) is not in it. Concurrent
  here is what a loss-free fabric would give; the real-TCP comparison is ``netweave run``.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx

from netweave._core import Topology
from netweave.stages import flowsim, routing, topology, traffic

#: Bytes per pair of Fig. 5.4 / 5.6 (100 B to 1 MB).
SIZES = (100, 1_000, 2_000, 10_000, 20_000, 100_000, 200_000, 1_000_000)
QUICK_SIZES = (1_000, 20_000, 1_000_000)
#: The no-relay policies and their names in the thesis' figures.
POLICIES = {p: p.replace("-", " ").title() for p in traffic.CONTENTION_FREE_POLICIES}
#: §6.4's methods: (name, policy, relay) — None policy is Concurrent.
METHODS = (("Concurrent", None, None), ("Random", "random", "off"), ("Max Sync", "max-sync", "off"),
           ("Min Sync", "min-sync", "off"), ("OURS", "min-sync", "departure"))
#: Perturbation rates r of (6.1)/(6.2) and the draws per rate.
RATES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8)
QUICK_RATES = (0.0, 0.2, 0.5)
DRAWS, QUICK_DRAWS = 5, 2
#: Hosts per edge switch of the istbs cluster (§4.1) and the edge switches tried in §6.2.
ISTBS_HOSTS_PER_SWITCH = 14
ISTBS_EDGE_SWITCHES, QUICK_EDGE_SWITCHES = range(1, 8), range(1, 4)
#: Two-cluster sizes of Figs. 6.9/6.10, and the clusters of Table 6.2.
TWO_CLUSTER_SIZES = (10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000)
QUICK_TWO_CLUSTER_SIZES = (20_000, 500_000)
TABLE_6_2_CLUSTERS, QUICK_TABLE_6_2_CLUSTERS = range(1, 13), range(1, 5)

#: The paper's numbers, set beside ours in summary.md.
PAPER = {
    "policies": "2 KB-200 KB: other policies up to about +90 % over Min Sync (Max Sync, Random worst); "
                "above 100 KB little difference",
    "relaying": "gather with relaying down to about 30 % of no relaying; all-to-all almost unchanged, "
                "0.5-5 % of transfers relayed",
    "scheduling": "64 hosts: a few tens of ms; about proportional to tasks (hosts^2); 1 KB and 1 MB give almost "
                  "the same numbers of groups",
    "perturbation": "5-50 % slower when the scheduler's values are off (64-host all-to-all, size not stated)",
    "two_clusters": "gather: Concurrent > 200 ms at 20-200 KB; OURS about 50 % of Min Sync at large sizes. "
                    "all-to-all: OURS, Concurrent and Min Sync almost equal; Random and Max Sync about 10x worse",
    "table_6_2": "OURS and Concurrent differ little except at 4 clusters; Random and Max Sync 1.2x-10x worse",
}


def fig_5_3_tree() -> Topology:
    """Our stand-in for Fig. 5.3: hosts A–J (ranks 0–9) on switches SW0–SW5, a three-level tree
    with mixed link speeds and latencies (the figure's own values are lost).

    >>> t = fig_5_3_tree()
    >>> t.stats()["hosts"], t.stats()["switches"]
    (10, 6)
    """
    g: nx.MultiGraph = nx.MultiGraph(name="paper 004 Fig. 5.3 stand-in", family="tree")
    for h in "ABCDEFGHIJ":
        g.add_node(h, kind="host")
    for s in range(6):
        g.add_node(f"SW{s}", kind="switch")
    links = [  # (a, b, Gbit/s, latency ns)
        ("SW0", "SW1", 10.0, 5_000), ("SW0", "SW2", 1.0, 2_000_000), ("SW1", "SW3", 1.0, 20_000),
        ("SW1", "SW4", 10.0, 10_000), ("SW2", "SW5", 1.0, 500_000),
        ("A", "SW3", 1.0, 50_000), ("B", "SW3", 1.0, 50_000), ("C", "SW4", 1.0, 50_000),
        ("D", "SW4", 0.1, 100_000), ("E", "SW1", 10.0, 5_000), ("F", "SW5", 1.0, 50_000),
        ("G", "SW5", 1.0, 50_000), ("H", "SW2", 0.1, 100_000), ("I", "SW0", 1.0, 50_000),
        ("J", "SW0", 10.0, 5_000),
    ]
    for a, b, gbps, ns in links:
        g.add_edge(a, b, bandwidth_gbps=gbps, latency_ns=ns)
    return topology.from_networkx(g)


def istbs_tree(edge_switches: int) -> Topology:
    """`edge_switches` switches of 14 hosts on 1 Gbit/s, each on a 10 Gbit/s core link."""
    return topology.switch_tree([edge_switches], ISTBS_HOSTS_PER_SWITCH, [10.0], [5_000.0], 1.0, 5_000.0)


class _Fabric:
    """A topology with its routes, replaying DAGs in the flow model."""

    def __init__(self, topo: Topology):
        self.topo = topo
        self.routes = routing.route(topo, routing.default_engine(topo))

    def flow_seconds(self, dag, all_at_once: bool = False) -> float:
        # Concurrent posts every send at once (as MPI's nonblocking sends do); the schedules send
        # one task at a time per host, as the thesis' engine does.
        nct = max(self.topo.num_hosts - 1, 1) if all_at_once else 1
        return flowsim.simulate(self.routes, dag, executor="dag", nct=nct)["makespan_s"]

    def method(self, collective: str, nbytes: int, policy: str | None, relay: str | None, root: int = 0,
               **options: Any) -> dict[str, Any]:
        """One method's run: flow time, cost-model time (None for Concurrent) and the summary."""
        if policy is None:
            dag = traffic.concurrent(self.topo, collective, nbytes, root=root)
            return {"flow_s": self.flow_seconds(dag, all_at_once=True), "cost_s": None, "summary": {}}
        dag, summary = traffic.contention_free(self.topo, collective, nbytes, root=root, policy=policy, relay=relay,
                                               **options)
        return {"flow_s": self.flow_seconds(dag), "cost_s": summary["predicted_seconds"], "summary": summary}


def policies(quick: bool) -> list[dict[str, Any]]:
    """§2.9: every no-relay policy on the Fig. 5.3 tree, all-to-all, ÷ Min Sync."""
    fabric = _Fabric(fig_5_3_tree())
    rows = []
    for nbytes in QUICK_SIZES if quick else SIZES:
        runs = {p: fabric.method("alltoall", nbytes, p, "off") for p in POLICIES}
        for p, r in runs.items():
            rows.append({"bytes": nbytes, "policy": POLICIES[p], "cost_model_s": r["cost_s"], "flow_s": r["flow_s"],
                         "cost_model_vs_min_sync": r["cost_s"] / runs["min-sync"]["cost_s"],
                         "flow_vs_min_sync": r["flow_s"] / runs["min-sync"]["flow_s"]})
    return rows


def relaying(quick: bool) -> list[dict[str, Any]]:
    """§5.5.5: Min Sync with relaying ÷ without, gather to host A and all-to-all."""
    fabric = _Fabric(fig_5_3_tree())
    n = fabric.topo.num_hosts
    rows = []
    for collective in ("gather", "alltoall"):
        original = n - 1 if collective == "gather" else n * (n - 1)
        for nbytes in QUICK_SIZES if quick else SIZES:
            plain = fabric.method(collective, nbytes, "min-sync", "off")
            relayed = fabric.method(collective, nbytes, "min-sync", "departure")
            rows.append({"collective": collective, "bytes": nbytes,
                         "cost_model_ratio": relayed["cost_s"] / plain["cost_s"],
                         "flow_ratio": relayed["flow_s"] / plain["flow_s"],
                         "relayed_tasks": relayed["summary"]["relayed_tasks"],
                         "relayed_share": relayed["summary"]["relayed_tasks"] / original})
    return rows


def scheduling(quick: bool) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """§6.2: groups and scheduling time against hosts; the fitted exponent of time vs tasks."""
    rows = []
    for k in QUICK_EDGE_SWITCHES if quick else ISTBS_EDGE_SWITCHES:
        topo = istbs_tree(k)
        n = topo.num_hosts
        row: dict[str, Any] = {"hosts": n, "tasks": n * (n - 1)}
        for nbytes, tag in ((1_000, "1KB"), (1_000_000, "1MB")):
            # Best of three: the scheduler is deterministic, the machine is not.
            best = min((traffic.contention_free(topo, "alltoall", nbytes, relay="departure")[1] for _ in range(3)),
                       key=lambda s: s["scheduling_seconds"])
            row[f"groups_{tag}"] = best["groups"]
            row[f"scheduling_ms_{tag}"] = best["scheduling_seconds"] * 1e3
        rows.append(row)
    fit = {}
    for tag in ("1KB", "1MB"):
        xs = [math.log(r["tasks"]) for r in rows]
        ys = [math.log(max(r[f"scheduling_ms_{tag}"], 1e-9)) for r in rows]
        fit[tag] = _slope(xs, ys)
    return rows, fit


def _slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys against xs (0 for fewer than two points)."""
    if len(xs) < 2:
        return 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def perturbation(quick: bool, nbytes: int = 100_000) -> list[dict[str, Any]]:
    """§6.3.3: 64-host all-to-all scheduled on perturbed values, replayed on the true ones."""
    fabric = _Fabric(topology.switch_tree([4], 16, [10.0], [5_000.0], 1.0, 5_000.0))
    base = fabric.method("alltoall", nbytes, "min-sync", "off")
    rows = []
    for rate in QUICK_RATES if quick else RATES:
        for draw in range(1 if rate == 0 else QUICK_DRAWS if quick else DRAWS):
            r = fabric.method("alltoall", nbytes, "min-sync", "off", perturbation=rate, perturbation_seed=draw)
            rows.append({"rate": rate, "seed": draw, "flow_s": r["flow_s"], "cost_model_s": r["cost_s"],
                         "flow_vs_unperturbed": r["flow_s"] / base["flow_s"],
                         "cost_model_vs_unperturbed": r["cost_s"] / base["cost_s"]})
    return rows


def two_clusters(quick: bool) -> list[dict[str, Any]]:
    """§6.4.1: suzuk 32 + chiba 32, gather to chiba's first host and all-to-all, every method."""
    fabric = _Fabric(topology.multi_cluster("suzuk:32:1,chiba:32:10"))
    rows = []
    for collective in ("gather", "alltoall"):
        for nbytes in QUICK_TWO_CLUSTER_SIZES if quick else TWO_CLUSTER_SIZES:
            for name, policy, relay in METHODS:
                r = fabric.method(collective, nbytes, policy, relay, root=32)
                rows.append({"collective": collective, "bytes": nbytes, "method": name, "flow_s": r["flow_s"],
                             "cost_model_s": r["cost_s"]})
    return rows


def table_6_2(quick: bool, nbytes: int = 100_000) -> list[dict[str, Any]]:
    """§6.4.2: 100 KB all-to-all on the first K clusters of Table 6.2, every method but Min Sync."""
    rows = []
    for k in QUICK_TABLE_6_2_CLUSTERS if quick else TABLE_6_2_CLUSTERS:
        fabric = _Fabric(topology.multi_cluster(f"intrigger-6.2:{k}"))
        runs = {name: fabric.method("alltoall", nbytes, policy, relay) for name, policy, relay in METHODS
                if name != "Min Sync"}
        for name, r in runs.items():
            rows.append({"clusters": k, "hosts": fabric.topo.num_hosts, "method": name, "flow_s": r["flow_s"],
                         "vs_ours": r["flow_s"] / runs["OURS"]["flow_s"]})
    return rows


def run(out_dir: Path, quick: bool = False, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every experiment, write the CSV files, PNG plots and summary.md into `out_dir`."""
    note = progress or (lambda _msg: None)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    note("task policies (Fig. 5.4)")
    result: dict[str, Any] = {"quick": quick, "policies": policies(quick)}
    note("relaying (Fig. 5.6)")
    result["relaying"] = relaying(quick)
    note("scheduling cost (Figs. 6.2-6.3)")
    result["scheduling"], result["scheduling_exponent"] = scheduling(quick)
    note("perturbation (Fig. 6.7)")
    result["perturbation"] = perturbation(quick)
    note("two clusters (Figs. 6.9-6.10)")
    result["two_clusters"] = two_clusters(quick)
    note("Table 6.2 scaling (Fig. 6.11)")
    result["table_6_2"] = table_6_2(quick)
    files = []
    for key in ("policies", "relaying", "scheduling", "perturbation", "two_clusters", "table_6_2"):
        files.append(write_csv(out / f"{key}.csv", result[key]))
    note("plots")
    files += _plots(result, out)
    (out / "summary.md").write_text(summary(result))
    (out / "results.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    result["files"] = [str(p) for p in files + [out / "summary.md", out / "results.json"]]
    result["headline"] = headline(result)
    return result


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    """`rows` (dicts with the same keys) as a CSV file with a header row; returns `path`."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return path


def headline(result: dict[str, Any]) -> dict[str, Any]:
    """The figures summary.md leads with, each comparable with a number of the paper's."""
    worst_policy = max((r for r in result["policies"] if 2_000 <= r["bytes"] <= 200_000),
                       key=lambda r: r["cost_model_vs_min_sync"], default=None)
    gather = [r for r in result["relaying"] if r["collective"] == "gather"]
    a2a = [r for r in result["relaying"] if r["collective"] == "alltoall"]
    perturbed = [r for r in result["perturbation"] if r["rate"] > 0]
    biggest = max(result["scheduling"], key=lambda r: r["hosts"])
    return {
        "policies_worst_over_min_sync": None if worst_policy is None else
        {"policy": worst_policy["policy"], "bytes": worst_policy["bytes"],
         "cost_model": worst_policy["cost_model_vs_min_sync"]},
        "gather_relay_ratio_min": min(r["cost_model_ratio"] for r in gather),
        "alltoall_relayed_share": [min(r["relayed_share"] for r in a2a), max(r["relayed_share"] for r in a2a)],
        "perturbation_flow_ratio": [min(r["flow_vs_unperturbed"] for r in perturbed),
                                    max(r["flow_vs_unperturbed"] for r in perturbed)],
        "scheduling_ms_at_most_hosts": {"hosts": biggest["hosts"], "1KB": biggest["scheduling_ms_1KB"]},
        "scheduling_exponent_vs_tasks": result["scheduling_exponent"],
    }


def summary(result: dict[str, Any]) -> str:
    """summary.md: each experiment's figures with the paper's claim beside them."""
    h = headline(result)
    lines = ["# Paper 004 in the flow model", "",
             "Contention-free gather and all-to-all (netweave's scheduler), replayed by its cost model and by the "
             "flow simulator's DAG executor. " + ("Quick run: fewer sizes, hosts and draws." if result["quick"] else ""),
             "", "| | paper | netweave |", "|---|---|---|"]
    wp = h["policies_worst_over_min_sync"]
    lines.append(f"| §2.9 policies | {PAPER['policies']} | worst at 2 KB-200 KB: "
                 + (f"{wp['policy']} {wp['cost_model']:.2f}x Min Sync at {wp['bytes']} B (cost model)" if wp else "n/a")
                 + " |")
    lines.append(f"| §5.5.5 relaying | {PAPER['relaying']} | gather down to {h['gather_relay_ratio_min'] * 100:.0f} %; "
                 f"all-to-all relays {h['alltoall_relayed_share'][0] * 100:.1f}-{h['alltoall_relayed_share'][1] * 100:.1f} % "
                 "of its transfers |")
    s = h["scheduling_ms_at_most_hosts"]
    lines.append(f"| §6.2 scheduling | {PAPER['scheduling']} | {s['hosts']} hosts: {s['1KB']:.1f} ms (1 KB, relaying); "
                 f"time ~ tasks^{h['scheduling_exponent_vs_tasks']['1KB']:.2f} |")
    pr = h["perturbation_flow_ratio"]
    lines.append(f"| §6.3.3 perturbation | {PAPER['perturbation']} | {(pr[0] - 1) * 100:+.0f} % to {(pr[1] - 1) * 100:+.0f} % "
                 "(flow model, 100 KB) |")
    lines.append(f"| §6.4.1 two clusters | {PAPER['two_clusters']} | see the table below |")
    lines.append(f"| §6.4.2 Table 6.2 | {PAPER['table_6_2']} | see the table below |")
    lines += ["", "## Two clusters (flow model, ms)", "", "| collective | bytes | " + " | ".join(m[0] for m in METHODS) + " |",
              "|---|---|" + "---|" * len(METHODS)]
    for collective in ("gather", "alltoall"):
        sizes = sorted({r["bytes"] for r in result["two_clusters"] if r["collective"] == collective})
        for b in sizes:
            cells = {r["method"]: r["flow_s"] for r in result["two_clusters"] if r["collective"] == collective and r["bytes"] == b}
            lines.append(f"| {collective} | {b} | " + " | ".join(f"{cells[m[0]] * 1e3:.1f}" for m in METHODS) + " |")
    lines += ["", "## Table 6.2 scaling, 100 KB all-to-all (flow model, time ÷ OURS)", "",
              "| clusters | hosts | Concurrent | Random | Max Sync |", "|---|---|---|---|---|"]
    for k in sorted({r["clusters"] for r in result["table_6_2"]}):
        cells = {r["method"]: r for r in result["table_6_2"] if r["clusters"] == k}
        lines.append(f"| {k} | {cells['OURS']['hosts']} | " + " | ".join(f"{cells[m]['vs_ours']:.2f}" for m in ("Concurrent", "Random", "Max Sync")) + " |")
    lines += ["", "## Model", "",
              "- Fig. 5.3's link values are lost with the figure: the 10-host tree is our stand-in with its shape and "
              "mixed speeds (100 Mbit/s-10 Gbit/s) and latencies (5 µs-2 ms).",
              "- InTrigger: one switch per cluster, Table 6.1's egress, 5 ms one way between clusters (no WAN latencies "
              "are given).",
              "- The flow model has no loss and no TCP retransmission timeout, so Concurrent does not suffer the incast "
              "collapse that the thesis measured on real switches; where the paper's OURS beats Concurrent by avoiding "
              "it, this model cannot show it. `netweave run` runs the same DAGs over real TCP.",
              "- Scheduling times are this machine's, best of three, relaying on.", ""]
    return "\n".join(lines)


def _plots(result: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(out / name)

    def lines(ax, rows, key, labels, x, y, scale_y=1.0):
        """One line per label: the rows whose `key` is that label, `y` against `x`."""
        for label in labels:
            mine = [r for r in rows if r[key] == label]
            ax.plot([r[x] for r in mine], [r[y] * scale_y for r in mine], marker="o", label=label)
        ax.legend()

    fig, ax = plt.subplots(figsize=(6, 4))
    lines(ax, result["policies"], "policy", POLICIES.values(), "bytes", "cost_model_vs_min_sync")
    ax.set(xscale="log", xlabel="bytes per pair", ylabel="time / Min Sync (cost model)",
           title="Fig. 5.4: task policies, 10-host tree")
    save(fig, "policies.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    lines(ax, result["relaying"], "collective", ("gather", "alltoall"), "bytes", "cost_model_ratio")
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set(xscale="log", xlabel="bytes per pair", ylabel="relay / no relay (cost model)", title="Fig. 5.6: relaying")
    save(fig, "relaying.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    rows = result["scheduling"]
    for tag in ("1KB", "1MB"):
        ax.plot([r["tasks"] for r in rows], [r[f"scheduling_ms_{tag}"] for r in rows], marker="o", label=f"{tag} per pair")
    ax.set(xscale="log", yscale="log", xlabel="tasks (hosts x (hosts-1))", ylabel="scheduling time, ms",
           title="Fig. 6.3: scheduling time")
    ax.legend()
    save(fig, "scheduling.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    rows = result["perturbation"]
    ax.scatter([r["rate"] for r in rows], [r["flow_vs_unperturbed"] for r in rows])
    ax.set(xlabel="perturbation rate r", ylabel="time / unperturbed (flow model)", title="Fig. 6.7: wrong link values")
    save(fig, "perturbation.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, collective in zip(axes, ("gather", "alltoall")):
        rows = [r for r in result["two_clusters"] if r["collective"] == collective]
        lines(ax, rows, "method", [m[0] for m in METHODS], "bytes", "flow_s", scale_y=1e3)
        ax.set(xscale="log", yscale="log", xlabel="bytes per pair", ylabel="ms (flow model)",
               title=f"Figs. 6.9/6.10: {collective}, 32+32 hosts")
    save(fig, "two_clusters.png")

    fig, ax = plt.subplots(figsize=(6, 4))
    lines(ax, result["table_6_2"], "method", ("Concurrent", "Random", "Max Sync", "OURS"), "clusters", "flow_s")
    ax.set(yscale="log", xlabel="clusters (Table 6.2 order)", ylabel="s (flow model)",
           title="Fig. 6.11: 100 KB all-to-all")
    save(fig, "table_6_2.png")
    return files
