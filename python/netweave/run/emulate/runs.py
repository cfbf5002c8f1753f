"""Running on an emulated fabric: netweave's TCP executor (:func:`run`, :func:`measure` with its
prediction and byte-counter proof) and the MPI libraries (:func:`mpirun`), plus the scaled
topology the flow model predicts these runs on."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from netweave import _core
from netweave._core import NetweaveError, RoutingTable, Topology
from netweave.run import executor, mpi, processes
from netweave.run.emulate.addresses import MGMT_NETWORK
from netweave.run.emulate.cluster import EmulatedCluster, agent_path, down, kill_inside, up
from netweave.run.emulate.proof import FORWARDING_BUDGET_BPS, forwarding_load, routing_proof
from netweave.run.emulate.traffic_control import port_buffer
from netweave.stages import flowsim


def kernel_timer_tick_s() -> float | None:
    """This machine's kernel timer tick (``1 / CONFIG_HZ``), seconds, from the kernel's build
    configuration (``/proc/config.gz`` or ``/boot/config-<release>``); None where neither says."""
    for read in (lambda: gzip.decompress(Path("/proc/config.gz").read_bytes()).decode(),
                 lambda: Path(f"/boot/config-{os.uname().release}").read_text()):
        try:
            found = re.search(r"^CONFIG_HZ=(\d+)$", read(), re.MULTILINE)
        except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError):
            continue
        if found and int(found.group(1)) > 0:
            return 1.0 / int(found.group(1))
    return None


#: The emulated hosts' TCP, as the flow model's parameters: they send no timestamps (see
#: ``cluster.py``), so only a segment sent once times a round trip (Karn's rule) and a flow that
#: times out again before any new data arrived waits twice as long; and their timers tick as
#: this machine's kernel does (a tail-loss probe's wait rounds up to whole ticks), where its
#: configuration says. Every prediction of a run on the emulated fabric uses it.
HOST_TCP: dict[str, float] = {"timestamps": False,
                              **({"timer_tick_s": tick} if (tick := kernel_timer_tick_s()) else {})}


def predicted_topology(topo: Topology, scale: float, buffer: int | None = None) -> Topology:
    """`topo` as the flow model should see the emulated fabric: scaled (:func:`scaled_topology`)
    and, on Ethernet, with the port buffer the emulation queues."""
    scaled = scaled_topology(topo, scale)
    queue = port_buffer(topo, buffer)
    if topo.link_layer == "ethernet" and queue is not None and queue != scaled.port_buffer_bytes:
        scaled = scaled.with_switching("ethernet", queue)
    return scaled


def scaled_topology(topo: Topology, scale: float) -> Topology:
    """`topo` as the emulation runs it: every bandwidth × `scale`, and no link latency (the
    emulation adds none; the namespaces' forwarding cost is microseconds)."""
    return topo.scaled(scale, link_latency_ns=0.0)


def scaled_routes(routes: RoutingTable, scaled: Topology) -> RoutingTable:
    """The same table on the scaled copy of its topology."""
    return routes.on_topology(scaled)


def run(fabric: EmulatedCluster, graph: _core.TaskGraph, **options: Any) -> dict[str, Any]:
    """Run `graph` with the TCP executor on the fabric's hosts (rank r on host r), as
    :func:`executor.run_local` does on loopback; the result also has ``channel_bytes``, what each
    directed channel carried during the run (its interface counters' difference), and
    ``losses``, the packets the fabric dropped and the segments TCP retransmitted meanwhile
    (over every call). ``warmup=1, reps=3`` (passed on to :func:`executor.run_local`) times it
    as ``nwbench`` times an MPI collective: warm connections, a barrier before each call, the
    slowest rank's mean call as ``makespan_s``; the default is one cold run."""
    if graph.num_ranks > fabric.num_hosts:
        raise NetweaveError(f"the schedule has {graph.num_ranks} ranks; fabric '{fabric.name}' has {fabric.num_hosts} hosts")
    before, lost_before = fabric.channel_bytes(), fabric.losses()
    result = executor.run_local(graph, placement=fabric.placement(), **options)
    after, lost_after = fabric.channel_bytes(), fabric.losses()
    result["channel_bytes"] = [a - b for a, b in zip(after, before)]
    result["losses"] = {k: lost_after[k] - lost_before[k] for k in lost_after}
    return result


def predict(topo: Topology, routes: RoutingTable, graph: _core.TaskGraph, scale: float = 1.0,
            buffer: int | None = None, calibration=None, nct: int = 1) -> dict[str, Any]:
    """The flow model's report for `graph` run by the TCP executor on the emulated fabric: the
    DAG executor on :func:`predicted_topology` (scaled, no link latency, the emulated port
    buffer), with `calibration`'s measured parameters when given; `nct` sends of a host at once
    (a Concurrent graph posts every send of a host together)."""
    scaled = predicted_topology(topo, scale, buffer)
    return flowsim.simulate(scaled_routes(routes, scaled), graph, executor="dag", nct=nct, calibration=calibration,
                            tcp=HOST_TCP)


def measure(topo: Topology, routes: RoutingTable, workload, name: str, scale: float = 1.0,
            buffer: int | None = None, seed: int = 0, timeout: float = executor.DEFAULT_TIMEOUT,
            work_dir: Path | None = None, calibration=None) -> dict[str, Any]:
    """Bring up a fabric, run `workload` (a schedule or a DAG) on it with the TCP executor, prove
    the routing by byte counters, predict the same run with the flow simulator's DAG executor
    on the scaled fabric (no link latency, as emulated; on Ethernet the emulated port buffer and
    TCP timeouts, with `calibration`'s parameters when given), and tear the fabric down."""
    graph = executor.as_task_graph(workload)
    if graph.num_ranks > topo.num_hosts:
        raise NetweaveError(f"the schedule has {graph.num_ranks} ranks; the topology has {topo.num_hosts} hosts")
    prediction = predict(topo, routes, graph, scale, buffer, calibration)
    predicted = prediction["makespan_s"]
    load = forwarding_load(routes, graph, predicted)
    warning = None
    if load > FORWARDING_BUDGET_BPS:
        warning = (f"at the predicted pace this run forwards {load / 1e9:.1f} Gbit/s over veth links, more than the "
                   f"{FORWARDING_BUDGET_BPS / 1e9:.0f} Gbit/s two cores keep up with: expect it to run slower than "
                   f"predicted; a lower --scale (now {scale:g}) keeps it within a few per cent")
    with processes.Job() as job:  # killed netweave: the guardian takes the fabric down
        job.on_parent_death([sys.executable, "-c", f"from netweave.run import emulate; emulate.down({name!r})"])
        fabric = up(topo, routes, name, scale=scale, buffer=buffer)
        try:
            result = run(fabric, graph, seed=seed, timeout=timeout, work_dir=work_dir)
        finally:
            down(name)
    proof = routing_proof(routes, graph, result["channel_bytes"], result["losses"]) if result["ok"] else None
    measured = result["makespan_s"]
    return {
        "ok": result["ok"] and proof is not None and proof["ok"],
        "schedule": graph.name, "ranks": graph.num_ranks, "tasks": graph.num_tasks, "bytes": result["bytes"],
        "scale": scale, "buffer": buffer, "engine": routes.engine,
        "measured_s": measured, "predicted_s": predicted, "predicted_timeouts": prediction["timeouts"],
        "measured_over_predicted": measured / predicted if measured and predicted else None,
        "forwarding_bit_per_s": load, "warning": warning,
        "bytes_verified": result["bytes_verified"], "cause": result["cause"],
        "routing_proof": proof, "channel_bytes": result["channel_bytes"], "losses": result["losses"],
        "timeline": result["timeline"],
        "run": {k: v for k, v in result.items() if k not in ("timeline", "channel_bytes")},
    }


def mpi_command(fabric: EmulatedCluster, implementation: str, ranks: int, program: list[str],
                env: dict[str, str] | None = None, hosts: list[int] | None = None) -> list[str]:
    """The command that runs `program` as `ranks` MPI processes, rank r on host r, launched from
    the management namespace: daemons and control over the management network, MPI traffic
    over the fabric only (Open MPI: TCP BTL on 10.0.0.0/8; MPICH: UCX's TCP on the fabric
    interface). `env` is set for every rank (e.g. :func:`netweave.run.mpi.settings` and the
    library's ``LD_PRELOAD``). `hosts` puts rank r on host ``hosts[r]`` instead (a schedule's
    placement)."""
    env = env or {}
    if implementation not in mpi.IMPLEMENTATIONS:
        raise NetweaveError(f"unknown MPI '{implementation}' (known: {', '.join(mpi.IMPLEMENTATIONS)})")
    if not 1 <= ranks <= fabric.num_hosts:
        raise NetweaveError(f"{ranks} ranks do not fit fabric '{fabric.name}' ({fabric.num_hosts} hosts, one rank each)")
    chosen = list(range(ranks)) if hosts is None else [int(h) for h in hosts]
    if len(chosen) != ranks or len(set(chosen)) != ranks or not all(0 <= h < fabric.num_hosts for h in chosen):
        raise NetweaveError(f"hosts {chosen} are not {ranks} distinct hosts of fabric '{fabric.name}'")
    addresses = [fabric.state["hosts"][h]["mgmt"] for h in chosen]
    agent = fabric.state.get("agent") or str(agent_path(fabric.name))
    mgmt = ["ip", "netns", "exec", fabric.state["mgmt_ns"]]
    if implementation == "openmpi":
        return mgmt + ["mpirun.openmpi", "--allow-run-as-root", "-np", str(ranks), "--host", ",".join(f"{a}:1" for a in addresses),
                       "--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", str(MGMT_NETWORK),
                       "--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "10.0.0.0/8",
                       "--mca", "mpi_yield_when_idle", "1",
                       *[a for k, v in env.items() for a in ("-x", f"{k}={v}")], *program]
    ports = {fabric.state["hosts"][h]["port"] for h in chosen}
    if len(ports) != 1:
        raise NetweaveError("MPICH's UCX needs one fabric interface name on every host; these hosts use ports "
                            + ", ".join(map(str, sorted(ports))))
    return mgmt + ["env", "UCX_TLS=tcp,self", f"UCX_NET_DEVICES=p{ports.pop()}", "mpiexec.mpich", "-launcher", "ssh",
                   "-launcher-exec", agent, "-iface", "br0", "-hosts", ",".join(addresses), "-n", str(ranks), "-ppn", "1",
                   *[a for k, v in env.items() for a in ("-genv", k, v)], *program]


def _written(file: IO[str]) -> str:
    """What a running child has written to `file` so far. Read at an offset (pread): the child
    shares the file's offset, and a seek here would make its next write overwrite the start."""
    fd = file.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


def mpirun(fabric: EmulatedCluster, implementation: str, ranks: int, program: list[str],
           timeout: float = 300.0, env: dict[str, str] | None = None,
           hosts: list[int] | None = None, done_when: Callable[[str], bool] | None = None,
           grace: float = 10.0) -> subprocess.CompletedProcess:
    """Run `program` under MPI on the fabric (see :func:`mpi_command`); output captured. A run
    that outlives `timeout` seconds is killed, with every process it left in the fabric.

    `done_when(stdout)` says the program's output is complete: a run still alive `grace`
    seconds after that is ended the same way and counts as finished, with a line saying so on
    its stderr and the output as it was when complete (the launcher may print a notice of the
    killed ranks after it) — MPICH over UCX can hang in ``MPI_Finalize`` after all its work on
    these fabrics (see docs/emulate.md)."""
    cmd = mpi_command(fabric, implementation, ranks, program, env, hosts)
    everything = [h["ns"] for h in fabric.state["hosts"]] + [fabric.state["mgmt_ns"]]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        with processes.Job() as job:  # launcher and ranks die with netweave, however it ends
            proc = job.popen(cmd, stdout=out, stderr=err, text=True)
            start, complete_at, note, complete_output = time.monotonic(), None, "", ""
            while proc.poll() is None:
                now = time.monotonic()
                if complete_at is None and done_when is not None and done_when(output := _written(out)):
                    complete_at, complete_output = now, output
                if complete_at is not None and now - complete_at > grace:
                    note = (f"netweave emulate: ended the {implementation} run {grace:g} s after its output was "
                            "complete (it did not exit: MPI_Finalize hung)\n")
                    break
                if now - start > timeout:
                    kill_inside(everything)
                    job.stop()
                    raise NetweaveError(f"{implementation} run on fabric '{fabric.name}' did not finish within {timeout:g} s")
                time.sleep(0.1)
            if note:
                kill_inside(everything)
                job.stop()
            code = proc.wait()
        out.seek(0)
        err.seek(0)
        output = complete_output if note else out.read()
        return subprocess.CompletedProcess(cmd, 0 if note else code, output, err.read() + note)
