"""An emulated cluster on one machine: netweave's fabric and routing tables as real Linux networking.

Every host and every switch is a network namespace, every link a veth pair, and each switch
forwards by its row of the routing table: a packet to host h leaves switch s by
``ports[s][h]`` — the LFT model, as static per-destination routes. Each direction of each link
is rate-limited by ``htb`` at the link's bandwidth × ``scale`` (in payload: frames are metered
with their headers, see :data:`FRAME_OVERHEAD`), with control packets (ACKs, syncs) served first;
a switch port's data queue is ``buffer`` bytes when given, to reproduce shallow-buffer incast.
A separate, unthrottled management network (one bridge) joins every host for launching
processes.

Modelled: topology, destination-based forwarding exactly as the table says, per-direction
bandwidth, per-port queues (drop-tail), real TCP (so incast, retransmission timeouts). Not
modelled: per-link latency (the kernel here has no ``netem``; a packet's delay is the
namespaces' forwarding cost, microseconds), virtual channels and credit flow control (a full
queue drops instead of back-pressuring), link-level error.

Names: a fabric ``NAME`` ([a-z0-9], at most 12 characters) owns the namespaces
``nw-NAME-h<i>`` (host index i), ``nw-NAME-s<j>`` (switch index j) and ``nw-NAME-m``
(management). Inside a namespace, port p's interface is ``p<p>``; a host's management interface
is ``mgmt``. Addresses (documented in docs/emulate.md):

- host i on the fabric: ``10.a.b.c`` with ``a·65536 + b·256 + c = i + 1`` (/8 on its port: the
  fabric looks like one subnet, and switches answer ARP for the other hosts);
- link l's two ends: ``100.64.0.0 + 2l`` (the link's a side) and ``+ 2l + 1`` (/31) — on
  switches only; a host's port holds just its fabric address;
- host i on the management network: ``172.16.0.0 + i + 1`` (/12).

A state file (``/run/netweave/emulate/NAME.json``) is written before anything is created, so
:func:`down` cleans up after a crash too; it also removes any namespace with the fabric's prefix.

The package's modules follow a fabric's life: :mod:`.addresses` (the address plan),
:mod:`.traffic_control` (each port's queue and rate), :mod:`.cluster` (namespaces up and down,
the running :class:`EmulatedCluster`), :mod:`.runs` (the executor and MPI on it, predictions)
and :mod:`.proof` (byte counters against the routing table). Its public names are here.
"""

from netweave.run.emulate.addresses import PREFIX, fabric_address, link_addresses, mgmt_address
from netweave.run.emulate.cluster import (
    EXECUTOR_PORT,
    STATE_DIR,
    EmulatedCluster,
    attach,
    check_size,
    down,
    exec_on,
    host_index,
    namespace_limit,
    namespaces,
    require_root,
    status,
    up,
)
from netweave.run.emulate.proof import FORWARDING_BUDGET_BPS, forwarding_load, routed_bytes, routing_proof
from netweave.run.emulate.runs import (
    HOST_TCP,
    measure,
    mpi_command,
    mpirun,
    predict,
    predicted_topology,
    run,
    scaled_routes,
    scaled_topology,
)
from netweave.run.emulate.traffic_control import port_buffer

__all__ = ["EXECUTOR_PORT", "FORWARDING_BUDGET_BPS", "HOST_TCP", "PREFIX", "STATE_DIR", "EmulatedCluster", "attach", "check_size",
           "down", "exec_on", "fabric_address", "forwarding_load", "host_index", "link_addresses", "measure",
           "mgmt_address", "mpi_command", "mpirun", "namespace_limit", "namespaces", "port_buffer", "predict",
           "predicted_topology", "require_root", "routed_bytes", "routing_proof", "run", "scaled_routes",
           "scaled_topology", "status", "up"]
