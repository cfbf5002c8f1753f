"""netweave's TCP executor on the emulated cluster, against another build of the C runtime in
the same run: the check that a change to the executor or its transport made small messages
cheaper, where 64 processes on two cores make the hosts' work, not the network, the limit.

    .venv/bin/python benches/executor_emulated.py OTHER_RUNTIME_DIR [--sizes 1024] [--rounds 2]

OTHER_RUNTIME_DIR holds the other build's ``nw-tcp-run`` (for an earlier revision: ``git
worktree add W REV && make -C W/runtime``, then ``W/runtime/build``). Needs root. One fabric is
brought up — paper 004's §6.3.1 tree, 64 hosts on 5 × 14 at 100 Mbit/s with 64 KiB queues, as
``reproduce ethernet --emulate`` builds it — and tree-phased in its local-sync order and in
buffer groups is run 3 calls at a time by each build in turn, round after round, so both see
the same load. Prints each run's mean and fastest call and the timeouts per call, then each
schedule's median over the rounds as this build ÷ the other.

    .venv/bin/python benches/executor_emulated.py --against-mpi openmpi [--fabric star16]
        [--collective gather] [--bytes 131072] [--candidates binomial,contention-free] [--rounds 2]
        [--timing cold,warm] [OTHER_RUNTIME_DIR]

instead sets this build against an MPI library's own collective on one of
benches/advice_fidelity.py's fabrics, scaled as ``plan --verify`` scales it: per round, each
candidate (the plan's, by name) once cold (one call on fresh connections, the executor's
default) and once warm (one warm-up and ``verification.REPS`` timed calls, the slowest rank's
mean — as ``nwbench`` times the library), then the library's ``nwbench``; prints every
measurement and the medians over the rounds. Given OTHER_RUNTIME_DIR too, each candidate runs
with both builds in turn; ``--timing cold`` leaves the warm calls out (a build from before
nw-tcp-run had --warmup/--reps runs cold only).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import uuid
from pathlib import Path

from netweave.reproduce import ethernet_alltoall as setup
from netweave.run import emulate, executor
from netweave.stages import routing, traffic

CALLS = 3


def against_mpi(implementation: str, fabric_name: str, collective: str, nbytes: int, candidates: list[str],
                rounds: int, builds: dict[str, str], timings: list[str]) -> None:
    """The `builds`' executor (name → runtime directory), cold and warm, against
    `implementation`'s own collective."""
    import advice_fidelity  # benches/: the fabrics the fidelity benchmark verifies on

    from netweave import plan
    from netweave.plan import verification
    from netweave.run import calibration

    topo = advice_fidelity.FABRICS[fabric_name]()
    routes, why = plan.routing_for(topo, advice_fidelity.ENGINES.get(fabric_name), nbytes)
    built = plan.candidates(topo, nbytes, collective=collective)
    result = plan.plan(topo, nbytes, routes=routes, built=built, collective=collective, routing_note=why)
    placed = plan.job_hosts(topo, None, "listed", None)
    chosen, graphs, natives, native_work = verification._candidates(topo, result, built, placed)
    unknown = [c for c in candidates if c not in graphs]
    if unknown:
        raise SystemExit(f"executor_emulated: no candidate {', '.join(unknown)} here (known: {', '.join(graphs)})")
    fastest = min(r.predicted_time_s for r in [*chosen, *natives.values()])
    scale = verification._scale(routes, list(graphs.values()) + list(native_work.values()), fastest)
    slowest = float(topo.link_specs()[:, 0].min()) * 1e9
    scale = max(scale, verification.MIN_LINK_BPS / slowest)  # as advice_fidelity measures a job too large
    buffer = topo.port_buffer_bytes if topo.link_layer == "ethernet" else None
    print(f"{fabric_name}, {collective}, {nbytes} B per pair, links x {scale:.3g}", flush=True)
    times: dict[str, list[float]] = {}
    name = "b" + uuid.uuid4().hex[:11]
    fabric = emulate.up(topo, routes, name, scale=scale, buffer=buffer)
    try:
        for rnd in range(rounds):
            for cand, (build, directory), (how, calls) in itertools.product(
                    candidates, builds.items(), [t for t in (("cold", {}), ("warm", {"warmup": 1, "reps": verification.REPS}))
                                                 if t[0] in timings]):
                os.environ["NETWEAVE_RUNTIME_DIR"] = directory
                r = emulate.run(fabric, graphs[cand], **calls)
                if not r["ok"]:
                    raise SystemExit(f"executor_emulated: {cand} failed: {(r['cause'] or {}).get('reason')}")
                key = f"{cand}, {how}" + (f", {build} build" if len(builds) > 1 else "")
                times.setdefault(key, []).append(r["makespan_s"])
                per_call = ", ".join(f"{c * 1e3:.1f}" for c in r["calls_s"])
                print(f"round {rnd}: {key}: {r['makespan_s'] * 1e3:.1f} ms"
                      f"{f' (calls {per_call} ms)' if per_call else ''}, "
                      f"{r['losses']['retransmitted_segments']} segments retransmitted", flush=True)
            os.environ["NETWEAVE_RUNTIME_DIR"] = builds["this"]  # the MPI programs are this checkout's
            native = calibration.run_native(fabric, implementation, collective, nbytes, len(placed), placed,
                                            verification.REPS)
            times.setdefault(implementation, []).append(native)
            print(f"round {rnd}: {implementation} nwbench: max_s {native * 1e3:.1f} ms", flush=True)
    finally:
        emulate.down(name)
    library = statistics.median(times[implementation])
    for key, values in times.items():
        median = statistics.median(values)
        print(f"{key}: median {median * 1e3:.1f} ms over {len(values)} rounds, ÷ {implementation} {median / library:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, nargs="?", help="the other build's runtime directory (with nw-tcp-run)")
    parser.add_argument("--sizes", default="1024", help="bytes per pair, comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against-mpi", choices=["openmpi", "mpich"], help="compare with this MPI's own collective")
    parser.add_argument("--fabric", default="star16", help="with --against-mpi: an advice_fidelity fabric")
    parser.add_argument("--collective", default="gather", choices=["gather", "alltoall"])
    parser.add_argument("--bytes", type=int, default=131072)
    parser.add_argument("--candidates", default="binomial,contention-free")
    parser.add_argument("--timing", default="cold,warm", help="with --against-mpi: cold, warm or both")
    args = parser.parse_args()
    if args.other is None and not args.against_mpi:
        parser.error("give the other build's runtime directory, or --against-mpi")
    if args.other is not None and not (args.other / "nw-tcp-run").is_file():
        parser.error(f"{args.other} has no nw-tcp-run; build it with `make -C <checkout>/runtime`")
    builds = {"this": str(executor.executor_path().parent)}
    if args.other is not None:
        builds["other"] = str(args.other.resolve())
    if args.against_mpi:
        before = os.environ.get("NETWEAVE_RUNTIME_DIR")
        try:
            against_mpi(args.against_mpi, args.fabric, args.collective, args.bytes, args.candidates.split(","),
                        args.rounds, builds, args.timing.split(","))
        finally:
            if before is None:
                os.environ.pop("NETWEAVE_RUNTIME_DIR", None)
            else:
                os.environ["NETWEAVE_RUNTIME_DIR"] = before
        return
    tree = setup.FULL.tree()
    hosts = list(range(setup.FULL.hosts))
    routes = routing.route(tree, "updown")
    name = "b" + uuid.uuid4().hex[:11]
    fabric = emulate.up(tree, routes, name, scale=setup.SCALE, buffer=setup.BUFFER)
    before = os.environ.get("NETWEAVE_RUNTIME_DIR")
    try:
        for nbytes in (int(x) for x in args.sizes.split(",")):
            phased = traffic.build("alltoall", "tree-phased", topology=tree, hosts=",".join(map(str, hosts)),
                                   bytes=nbytes)
            graphs = {"tree-phased, local-sync": executor.as_task_graph(phased),
                      "tree-phased, buffer groups": executor.as_task_graph(
                          phased, traffic.buffer_groups(routes, phased, setup.BUFFER))}
            times: dict[tuple[str, str], list[float]] = {}
            for rnd in range(args.rounds):
                for build, directory in builds.items():
                    os.environ["NETWEAVE_RUNTIME_DIR"] = directory
                    for method, graph in graphs.items():
                        r = setup._run_schedule(fabric, graph, CALLS)
                        times.setdefault((method, build), []).append(r["seconds"])
                        print(f"{nbytes} B, round {rnd}, {build}: {method}: mean {r['seconds'] * 1e3:.1f} ms, fastest "
                              f"{r['fastest_s'] * 1e3:.1f} ms, {r['timeouts_per_call']:.1f} timeouts per call", flush=True)
            for method in graphs:
                this, other = (statistics.median(times[(method, b)]) for b in builds)
                print(f"{nbytes} B, {method}: this build {this * 1e3:.1f} ms, other {other * 1e3:.1f} ms, "
                      f"this ÷ other {this / other:.2f}")
    finally:
        if before is None:
            os.environ.pop("NETWEAVE_RUNTIME_DIR", None)
        else:
            os.environ["NETWEAVE_RUNTIME_DIR"] = before
        emulate.down(name)


if __name__ == "__main__":
    main()
