"""`netweave schedule`: build a collective's schedule for a job on a topology."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from netweave import _core
from netweave.cli.common import JsonOpt, UserError, err_console, working
from netweave.stages import topology, traffic
from netweave.stages.schedule_cache import ScheduleCache
from netweave.stages.traffic import DEFAULT_BYTES
from netweave.support import files


def _algorithm_table() -> str:
    lines = []
    for (collective, name), algo in traffic.ALGORITHMS.items():
        takes = f" [{', '.join('--' + t for t in algo.takes)}]" if algo.takes else ""
        lines.append(f"{collective} {name}{takes}: {algo.help}")
    return "\n\n".join(lines)


def _parse_shape(text: str | None) -> list[int] | None:
    return None if text is None else topology.parse_dims(text)


def schedule_cmd(
    collective: str = typer.Argument(..., metavar="COLLECTIVE", help="alltoall, allgather, gather, barrier, or tasks (contention-free over --tasks FILE)."),
    topology_file: Path | None = typer.Argument(None, metavar="[TOPO]", help="Topology file (or --ranks N instead)."),
    algo: str = typer.Option(..., "--algo", help="Algorithm (see the table below)."),
    ranks: int | None = typer.Option(None, "--ranks", help="No topology: a communicator of N ranks, for topology-free algorithms (shift, bruck, ring, binomial, ...)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Schedule file: .json or .nws (compact binary)."),
    hosts: str = typer.Option("all", "--hosts", help="Hosts of the job: 'all', '0-15,20', 'leaf:0-3' (fat-trees: whole leaves)."),
    order: str = typer.Option("listed", "--order", help="Rank order on the hosts: listed, cyclic (round-robin over leaves) or random (--seed)."),
    nbytes: int | None = typer.Option(None, "--bytes", min=0, help="Bytes per pair / block (default 1 MiB; barrier 8)."),
    nct: int | None = typer.Option(None, "--nct", min=1, help="Concurrent sends per rank (a2a, a2and, a2at)."),
    root: int | None = typer.Option(None, "--root", min=0, help="Root rank (gather, multicast barrier)."),
    seed: int | None = typer.Option(None, "--seed", min=0, help="Seed (multicast barrier's visiting list, --order random)."),
    shape: str | None = typer.Option(None, "--shape", help="Lattice shape of the ranks, e.g. 5x5 (a2and, a2at; default: the mesh/torus)."),
    k: int | None = typer.Option(None, "--k", min=1, help="Sub-cluster columns k: the n x k rectangle of grid leaves (lsft-partial)."),
    m: int | None = typer.Option(None, "--m", min=1, help="Servers per leaf m (lsft-partial)."),
    rule: str | None = typer.Option(None, "--rule", help="Move rule: text or paper-table3 (lsft-partial)."),
    policy: str | None = typer.Option(None, "--policy", help="Task policy (contention-free): " + ", ".join(traffic.CONTENTION_FREE_POLICIES) + "."),
    rule_b: str | None = typer.Option(None, "--rule-b", help="Rule B's comparison (contention-free): ge (default) or lt."),
    relay: str | None = typer.Option(None, "--relay", help="Relaying by task splitting (contention-free): departure (the thesis' rule; gather's default), arrival, or off (all-to-all's default)."),
    timing: str | None = typer.Option(None, "--timing", help="Group times for relay decisions (contention-free): sum (as (5.3) is written; default) or clock."),
    perturb: float | None = typer.Option(None, "--perturb", help="Schedule from link values off by up to +-this fraction, e.g. 0.2 (contention-free; paper 004 (6.1)/(6.2))."),
    perturb_seed: int | None = typer.Option(None, "--perturb-seed", min=0, help="Seed of --perturb's draws (default 0)."),
    tasks_file: Path | None = typer.Option(None, "--tasks", help="CSV of 'src,dst,bytes' rows (collective tasks, contention-free)."),
    cache: Path | None = typer.Option(None, "--cache", help="Schedule cache directory (contention-free): reuse the DAG for the same operation, size, hosts, fabric and options."),
    scheduler: str | None = typer.Option(None, "--scheduler", help="Stage scheduler (contention-free): paper (the thesis', default) or packed (stages filled from contention-free phases)."),
    routes_file: Path | None = typer.Option(None, "--routes", help="Routing table (contention-free): each pair's path from it, so a fabric whose routes are unique is schedulable."),
    executor: str = typer.Option("auto", "--executor", help="Executor the .nws file asks the MPI runtime for: auto, sync, async, local-sync (phased schedules)."),
    as_json: bool = JsonOpt,
) -> None:
    """Build a collective's schedule for a job on TOPO, or for --ranks N ranks, and check it (every pair once, data reaches every rank, permutation phases where claimed)."""
    if output is not None and output.suffix.lower() not in (".json", ".nws"):
        raise UserError(f"{output}: unknown schedule file extension (use .json or .nws)")
    if output is not None:
        files.check_file(output)  # before the work: a directory in the way or a missing parent
    if (topology_file is None) == (ranks is None):
        raise UserError("give a topology file or --ranks N (a communicator of N ranks), not both" if ranks is not None
                        else "give a topology file, or --ranks N for a communicator of N ranks")
    if ranks is not None:
        if ranks < 1:
            raise UserError(f"--ranks {ranks}: a communicator has at least one rank")
        if hosts != "all" or order != "listed":
            raise UserError("--hosts and --order place ranks on a topology; with --ranks, rank r is process r")
        if algo == "contention-free":
            raise UserError("--algo contention-free schedules a tree's links: it needs a topology file, not --ranks")
    topo = topology.load(topology_file) if topology_file is not None else None
    if algo == "contention-free":
        if scheduler not in (None, "paper", "packed"):
            raise UserError(f"--scheduler {scheduler}: use paper or packed")
        if scheduler == "packed" and relay not in (None, "off"):
            raise UserError("--relay belongs to --scheduler paper (the packed scheduler does not relay)")
        options = dict(policy=policy or "min-sync", rule_b=rule_b or "ge", seed=seed or 0, relay=relay,
                       timing=timing or "sum", perturbation=perturb or 0.0, perturbation_seed=perturb_seed or 0,
                       scheduler=scheduler or "paper")
        _contention_free(collective, topo, output, hosts, order, nbytes, root, tasks_file, cache, options, routes_file,
                         as_json)
        return
    given = [name for name, value in (("--policy", policy), ("--rule-b", rule_b), ("--relay", relay), ("--timing", timing),
                                      ("--perturb", perturb), ("--perturb-seed", perturb_seed), ("--tasks", tasks_file),
                                      ("--cache", cache), ("--scheduler", scheduler), ("--routes", routes_file))
             if value is not None]
    if given:
        raise UserError(f"{', '.join(given)} belong to --algo contention-free")
    with working(f"building {collective} {algo}", as_json):
        job = dict(topology=topo, hosts=hosts, order=order) if topo is not None else dict(num_ranks=ranks)
        sched = traffic.build(
            collective, algo, **job, bytes=nbytes, nct=nct, root=root,
            seed=seed, shape=_parse_shape(shape), k=k, m=m, rule=rule,
        )
        summary = traffic.summary(sched)
    if output is not None:
        traffic.save(sched, output, executor)
        summary["output"] = str(output)
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return
    c = summary["completeness"]
    verdict = {True: "complete", False: "INCOMPLETE", None: "no collective claimed"}[c["complete"]]
    perm = {True: ", every phase a permutation", False: ", NOT a permutation in every phase", None: ""}[c["permutation"]]
    print(f"{sched.name}: {sched.num_ranks} ranks, {sched.num_phases} phases, {sched.num_messages} messages, "
          f"{sched.total_bytes} bytes; {verdict}{perm}")
    if c["first_problem"]:
        print(f"  first problem: {c['first_problem']}")
    if output is not None:
        print(f"wrote {output}")


def _contention_free(collective, topo, output, hosts, order, nbytes, root, tasks_file, cache, options, routes_file,
                     as_json) -> None:
    """Paper 004's DAG schedule, written as a DAG file (.json or binary .nws)."""
    if collective not in ("gather", "alltoall", "tasks"):
        raise UserError(f"contention-free schedules gather, alltoall or tasks, not {collective}")
    if (collective == "tasks") != (tasks_file is not None):
        raise UserError("collective tasks takes its list from --tasks FILE, and --tasks belongs to collective tasks")
    if tasks_file is not None and (hosts != "all" or order != "listed"):
        raise UserError("a task list names its hosts itself: --hosts and --order do not apply to collective tasks")
    job = None
    if hosts != "all" or order != "listed":
        # Rank r runs on the r-th host of the job, as for every other algorithm.
        job = [int(h) for h in _core.allocate_hosts(topo, hosts, order, options["seed"], True)]
        options["hosts"] = job
    if routes_file is not None:
        from netweave.stages import routing
        options["routes"] = routing.load(topo, routes_file)
    if cache is not None and (job is not None or routes_file is not None):
        raise UserError("--cache keys schedules of the whole fabric by its shortest paths: drop --hosts/--routes or --cache")
    if root is not None and collective != "gather":
        raise UserError("--root belongs to gather")
    if collective == "tasks" and nbytes is not None:
        raise UserError("--bytes does not apply to a task list: each row carries its own size")
    tasks = traffic.read_task_list(tasks_file) if tasks_file is not None else None
    size = 0 if tasks is not None else DEFAULT_BYTES if nbytes is None else nbytes
    with working(f"scheduling {collective} contention-free", as_json):
        if cache is not None:
            graph, summary, hit = ScheduleCache(cache).contention_free(topo, collective, size, root=root or 0,
                                                                       tasks=tasks, **options)
            summary["cache"] = "hit" if hit else "miss"
            if "cache_rejected" in summary:
                err_console.file.write(f"warning: --cache {cache}: scheduled again, the stored entry was not used: "
                                       f"{summary['cache_rejected']}\n")
        else:
            graph, summary = traffic.contention_free(topo, collective, size, root=root or 0, tasks=tasks, **options)
    if output is not None:
        files.write_with(output, graph.save)  # atomic: the previous file survives a failed write
        summary["output"] = str(output)
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return
    relayed = f", {summary['relayed_tasks']} relayed" if summary["relayed_tasks"] else ""
    print(f"{graph.name}: {summary['tasks']} tasks{relayed}, {summary['dependencies']} dependencies, {summary['groups']} groups; "
          f"predicted {summary['predicted_seconds'] * 1e3:.3f} ms (cost model), scheduled in "
          f"{summary['scheduling_seconds'] * 1e3:.1f} ms" + (f" (cache {summary['cache']})" if cache is not None else ""))
    if output is not None:
        print(f"wrote {output}")


schedule_cmd.__doc__ = (schedule_cmd.__doc__ or "") + "\n\nAlgorithms:\n\n" + _algorithm_table() + (
    "\n\ngather, alltoall, tasks contention-free [--root, --policy, --rule-b, --relay, --timing, --perturb, "
    "--perturb-seed, --seed, --tasks, --cache]: paper 004's task DAG (grouping per directed link, stage scheduling, "
    "relaying by task splitting) on a tree; written as a DAG (.json, or .nws for the executors)."
)
