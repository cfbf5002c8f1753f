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

>>> fabric_address(0), fabric_address(255), link_addresses(1)
('10.0.0.1', '10.0.1.0', ('100.64.0.2', '100.64.0.3'))
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from netweave import _core, flowsim, mpi, processes, routing, runtime
from netweave._core import NetweaveError, RoutingTable, Topology

#: Where fabric state files live (tmpfs: a reboot forgets fabrics, as it forgets namespaces).
STATE_DIR = Path(os.environ.get("NETWEAVE_EMULATE_STATE", "/run/netweave/emulate"))
#: Namespace name prefix of every emulated fabric.
PREFIX = "nw-"
#: TCP port every executor process listens on (each host has its own address).
EXECUTOR_PORT = 7100
#: A switch port's queue without ``buffer``: this many seconds of the port's rate, at least
#: DEFAULT_MIN_QUEUE bytes. A host's queue (its NIC) is HOST_QUEUE_S deep: hosts should not
#: drop their own packets (a real NIC pushes back on the socket instead).
DEFAULT_QUEUE_S = 0.01
DEFAULT_MIN_QUEUE = 256 * 1024
HOST_QUEUE_S = 0.2
#: Ethernet, IPv4 and TCP headers per full 1,460-byte TCP payload (hosts send no TCP timestamps,
#: see _namespace_scripts): a port meters frames, so a link runs at bandwidth × FRAME_OVERHEAD
#: for its payload to move at the modelled bandwidth, as the flow simulator (which has no
#: headers) assumes.
FRAME_OVERHEAD = 1514 / 1460
_NAME = re.compile(r"^[a-z0-9]{1,12}$")
_MGMT = ipaddress.IPv4Network("172.16.0.0/12")


def fabric_address(host: int) -> str:
    """Host index `host`'s fabric address, ``10.a.b.c`` with ``a·65536 + b·256 + c = host + 1``."""
    if not 0 <= host < (1 << 24) - 2:
        raise NetweaveError(f"host {host}: the emulated fabric addresses at most 16,777,213 hosts")
    return str(ipaddress.IPv4Address((10 << 24) + host + 1))


def link_addresses(link: int) -> tuple[str, str]:
    """The two ends of link `link` (its a side, its b side): a /31 in 100.64.0.0/10."""
    base = int(ipaddress.IPv4Address("100.64.0.0")) + 2 * link
    if 2 * link + 1 >= 1 << 22:
        raise NetweaveError(f"link {link}: the emulated fabric addresses at most 2,097,152 links")
    return str(ipaddress.IPv4Address(base)), str(ipaddress.IPv4Address(base + 1))


def mgmt_address(host: int) -> str:
    """Host index `host`'s management address (172.16.0.0/12)."""
    return str(_MGMT.network_address + host + 1)


def require_root() -> None:
    """Refuse, in one line, when this process cannot create namespaces and links."""
    if os.geteuid() != 0:
        raise NetweaveError("netweave emulate needs root (it creates network namespaces, veth links and tc "
                            "qdiscs): run it as root")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise NetweaveError(f"netweave emulate needs '{tool}' (Debian package iproute2)")


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise NetweaveError(f"fabric name '{name}': use 1-12 lowercase letters and digits")


#: Namespaces (hosts and switches) one core keeps set up and forwarding: every switch forwards in
#: the kernel on the machine's cores, and a 32x32 torus (2,049 namespaces) failed half way on two.
NAMESPACES_PER_CORE = 512


def namespace_limit() -> int:
    """The most namespaces a fabric may have on this machine: :data:`NAMESPACES_PER_CORE` per
    core, within what the kernel still allows (``/proc/sys/user/max_net_namespaces`` less the
    namespaces that exist)."""
    limit = NAMESPACES_PER_CORE * (os.cpu_count() or 1)
    try:
        kernel = int(Path("/proc/sys/user/max_net_namespaces").read_text())
        existing = len(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else 0
        limit = min(limit, kernel - existing)
    except (OSError, ValueError):
        pass
    return max(limit, 0)


def check_size(topo: Topology) -> None:
    """Refuse, before anything is created, a fabric this machine cannot emulate: one without
    hosts, or with more namespaces (hosts, switches and the management one) than
    :func:`namespace_limit`."""
    if topo.num_hosts == 0:
        raise NetweaveError(f"the fabric '{topo.name}' has no hosts: there is nothing to emulate")
    wanted, limit = topo.num_hosts + topo.num_switches + 1, namespace_limit()
    if wanted > limit:
        raise NetweaveError(f"the fabric '{topo.name}' needs {wanted:,} namespaces ({topo.num_hosts:,} hosts, "
                            f"{topo.num_switches:,} switches, 1 management); this machine emulates at most {limit:,} "
                            f"({NAMESPACES_PER_CORE} per core on {os.cpu_count() or 1} cores, within the kernel's limit)")


def _sh(cmd: list[str], input: Optional[str] = None) -> str:
    """Run a command; its stdout, or an error with the command and its last line of output."""
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True)
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        shown = " ".join(cmd[:6]) + (" …" if len(cmd) > 6 else "")
        raise NetweaveError(f"{shown} failed: {said[-1] if said else f'exit status {proc.returncode}'}")
    return proc.stdout


def namespaces(name: Optional[str] = None) -> list[str]:
    """Namespaces of fabric `name` (of every emulated fabric when None) that exist now."""
    out = _sh(["ip", "netns", "list"])
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    want = PREFIX if name is None else f"{PREFIX}{name}-"
    return sorted(n for n in names if n.startswith(want))


@dataclass
class Fabric:
    """A fabric that is up: what was built, for running and measuring on it."""

    name: str
    state: dict[str, Any]

    @property
    def num_hosts(self) -> int:
        return len(self.state["hosts"])

    def host_ns(self, host: int) -> str:
        return self.state["hosts"][host]["ns"]

    def host_address(self, host: int) -> str:
        return self.state["hosts"][host]["address"]

    def exec_prefix(self, host: int) -> list[str]:
        """The command prefix that runs a program on host `host`."""
        return ["ip", "netns", "exec", self.host_ns(host)]

    def placement(self) -> "runtime.Placement":
        """Where the executor's rank r runs: host r's fabric address, inside its namespace."""
        return runtime.Placement([(h["address"], EXECUTOR_PORT) for h in self.state["hosts"]],
                                 [self.exec_prefix(i) for i in range(self.num_hosts)])

    def losses(self) -> dict[str, int]:
        """Packets dropped by the fabric's queues so far (every port) and TCP segments the hosts
        retransmitted: what makes a run's bytes exceed its payload beyond the headers."""
        drops = 0
        for ns in self.state["namespaces"]:
            if ns == self.state["mgmt_ns"]:
                continue
            # A root qdisc counts its bands' drops too.
            for q in json.loads(_sh(["tc", "-n", ns, "-s", "-j", "qdisc", "show"]) or "[]"):
                drops += int(q.get("drops", 0)) if q.get("root") else 0
        retrans = 0
        for h in self.state["hosts"]:
            lines = [l.split() for l in _sh(["ip", "netns", "exec", h["ns"], "cat", "/proc/net/snmp"]).splitlines()
                     if l.startswith("Tcp:")]
            retrans += int(lines[1][lines[0].index("RetransSegs")])
        return {"dropped_packets": drops, "retransmitted_segments": retrans}

    def channel_bytes(self) -> list[int]:
        """Bytes each directed channel (``2·link`` a→b, ``2·link + 1`` b→a) has carried so far:
        the transmit counter of the interface it leaves by."""
        by_ns: dict[str, dict[str, int]] = {}
        for ns in sorted({end["ns"] for link in self.state["links"] for end in (link["a"], link["b"])}):
            data = json.loads(_sh(["ip", "-n", ns, "-s", "-j", "link", "show"]) or "[]")
            by_ns[ns] = {d["ifname"]: int(d.get("stats64", d.get("stats", {}))["tx"]["bytes"]) for d in data}
        out = [0] * (2 * len(self.state["links"]))
        for link in self.state["links"]:
            out[2 * link["link"]] = by_ns[link["a"]["ns"]][link["a"]["ifname"]]
            out[2 * link["link"] + 1] = by_ns[link["b"]["ns"]][link["b"]["ifname"]]
        return out


def _plan(topo: Topology, routes: RoutingTable, name: str, scale: float, buffer: Optional[int]) -> dict[str, Any]:
    """Everything `up` will create, as the state file records it."""
    hosts, switches = [int(n) for n in topo.hosts], [int(n) for n in topo.switches]
    ns_of = {int(n): f"{PREFIX}{name}-h{i}" for i, n in enumerate(hosts)}
    ns_of.update({int(n): f"{PREFIX}{name}-s{j}" for j, n in enumerate(switches)})
    specs = topo.link_specs()
    links, end_of_port = [], {}
    for l, (a, pa, b, pb) in enumerate(topo.link_array().tolist()):
        addr_a, addr_b = link_addresses(l)
        rate = float(specs[l][0]) * 1e9 * scale * FRAME_OVERHEAD
        links.append({"link": l, "rate_bps": rate,
                      "a": {"node": a, "port": pa, "ns": ns_of[a], "ifname": f"p{pa}", "address": addr_a},
                      "b": {"node": b, "port": pb, "ns": ns_of[b], "ifname": f"p{pb}", "address": addr_b}})
        end_of_port[(a, pa)] = (links[-1]["a"], links[-1]["b"], rate)
        end_of_port[(b, pb)] = (links[-1]["b"], links[-1]["a"], rate)
    ports_of: dict[int, list[int]] = {}  # each node's connected ports, ascending
    for node, port in sorted(end_of_port):
        ports_of.setdefault(node, []).append(port)
    host_rows = []
    for i, n in enumerate(hosts):
        ports = ports_of.get(n, [])
        if not ports:
            raise NetweaveError(f"host {i} ({topo.label(int(n))}) has no link")
        host_rows.append({"ns": ns_of[int(n)], "address": fabric_address(i), "mgmt": mgmt_address(i), "port": ports[0]})
    ports = routes.ports()
    return {
        "name": name, "topology": topo.name, "engine": routes.engine, "scale": scale, "buffer": buffer,
        "created": time.time(), "pid": os.getpid(),
        "hosts": host_rows, "switches": [ns_of[int(n)] for n in switches], "mgmt_ns": f"{PREFIX}{name}-m",
        "links": links,
        "_end_of_port": end_of_port, "_ports_of": ports_of, "_ports": ports, "_hosts": hosts,
        "_switch_nodes": switches,
    }


def port_buffer(topo: Topology, buffer: Optional[int] = None) -> Optional[int]:
    """The bytes a switch port of the emulated `topo` queues: `buffer` when given, else the
    topology's own port buffer (an Ethernet fabric's ``port_buffer_bytes``, the value the flow
    model's loss rule uses); None on a lossless fabric, whose ports then queue the deep default
    (a drop-tail queue cannot back-pressure as credits do, so it is made too deep to drop)."""
    if buffer is not None:
        return int(buffer)
    return topo.port_buffer_bytes if topo.link_layer == "ethernet" else None


def predicted_topology(topo: Topology, scale: float, buffer: Optional[int] = None) -> Topology:
    """`topo` as the flow model should see the emulated fabric: scaled (:func:`scaled_topology`)
    and, on Ethernet, with the port buffer the emulation queues."""
    scaled = scaled_topology(topo, scale)
    queue = port_buffer(topo, buffer)
    if topo.link_layer == "ethernet" and queue is not None and queue != scaled.port_buffer_bytes:
        scaled = scaled.with_switching("ethernet", queue)
    return scaled


def _queue_bytes(rate_bps: float, buffer: Optional[int]) -> int:
    return int(buffer) if buffer is not None else max(DEFAULT_MIN_QUEUE, int(rate_bps / 8 * DEFAULT_QUEUE_S))


#: What a port serves first: packets marked DSCP EF (the TCP executor's control connections:
#: syncs, hellos, the end-of-run swap) and pure ACKs, by their IPv4 length without TCP
#: timestamps (40 bytes, plus 12 + 8k with k SACK blocks). Nothing that carries data of a
#: connection is put ahead of that connection's queued data: TCP would take it for loss.
CONTROL_TOS = 0xB8
PURE_ACK_LENGTHS = (40, 52, 60, 68, 76)
#: A port's token bucket holds this many full frames (or 100 µs of its rate, if more).
BURST_FRAMES = 4
#: Largest segmentation-offloaded packet a host hands its port.
GSO_BYTES = 16384


def _tc_lines(ifname: str, rate_bps: float, limit: int) -> list[str]:
    """One port's egress: an ``htb`` at the port's rate with two bands. Control packets (see
    CONTROL_TOS) go first; data queues drop-tail in ``limit`` bytes. The priority band undoes an
    artefact of scaling: a queue of B bytes delays by B / rate, so scaling the rate down by
    1/scale would make every ACK and sync wait 1/scale times longer than on the real fabric,
    where (as in the model) they take microseconds. The small burst keeps an idle port from
    letting a message through at memory speed."""
    rate = int(rate_bps)
    burst = max(BURST_FRAMES * 1514, rate // 8 // 10_000)
    shape = f"ceil {rate}bit burst {burst} cburst {burst} quantum 1514"
    control = f"filter add dev {ifname} parent 1: protocol ip prio 1 u32"
    return [f"qdisc add dev {ifname} root handle 1: htb default 20",
            f"class add dev {ifname} parent 1: classid 1:1 htb rate {rate}bit {shape}",
            f"class add dev {ifname} parent 1:1 classid 1:10 htb rate {rate}bit {shape} prio 0",
            # Data is guaranteed a trickle and borrows the rest of the port's rate.
            f"class add dev {ifname} parent 1:1 classid 1:20 htb rate {max(8000, rate // 1000)}bit {shape} prio 1",
            f"qdisc add dev {ifname} parent 1:10 handle 10: pfifo limit 1000",
            f"qdisc add dev {ifname} parent 1:20 handle 20: bfifo limit {limit}",
            f"{control} match ip tos {CONTROL_TOS:#04x} 0xfc flowid 1:10"] + [
            # IPv4 total length: bytes 2-3.
            f"{control} match u16 {n} 0xffff at 2 flowid 1:10" for n in PURE_ACK_LENGTHS]


def _namespace_scripts(plan: dict[str, Any]) -> dict[str, tuple[list[str], list[str], list[str]]]:
    """Per namespace: (sysctl paths to write "value", ip batch lines, tc batch lines)."""
    scripts: dict[str, tuple[list[str], list[str], list[str]]] = {}
    end_of_port, ports_of, ports = plan["_end_of_port"], plan["_ports_of"], plan["_ports"]
    buffer = plan["buffer"]
    for i, host in enumerate(plan["hosts"]):
        node = int(plan["_hosts"][i])
        mine, peer, rate = end_of_port[(node, host["port"])]
        ip = ["link set lo up"]
        tc: list[str] = []
        # A host holds only its fabric address: a program that binds to "the interface's
        # address" (Open MPI does) must get one the switches route back to.
        for p in ports_of[node]:
            end, _other, r = end_of_port[(node, p)]
            # Segments of at most GSO_BYTES: a port queues (and drops) whole offloaded segments,
            # and 64 KiB ones would not fit a shallow switch buffer twice.
            ip.append(f"link set {end['ifname']} gso_max_size {GSO_BYTES} up")
            tc += _tc_lines(end["ifname"], r, max(DEFAULT_MIN_QUEUE, int(r / 8 * HOST_QUEUE_S)))
        # The whole fabric looks like one subnet (UCX, MPICH's transport, wants that); the switch
        # answers ARP for every other host (proxy ARP) and forwards by its table.
        ip += [f"addr add {host['address']}/8 dev {mine['ifname']}",
               f"addr add {host['mgmt']}/{_MGMT.prefixlen} dev mgmt", "link set mgmt up"]
        # No TCP timestamps: with them, ACKs overtaking their connection's queued data (the
        # control band) made receivers discard that data (measured: 900 retransmissions in one
        # all-to-all without a single queue drop); without them, a handful.
        scripts[host["ns"]] = (["net/ipv4/ip_forward=0", "net/ipv4/tcp_timestamps=0"], ip, tc)
    host_nodes = set(plan["_hosts"])
    for j, ns in enumerate(plan["switches"]):
        node = int(plan["_switch_nodes"][j])
        ip = ["link set lo up"]
        tc = []
        for p in ports_of.get(node, []):
            end, _other, r = end_of_port[(node, p)]
            ip += [f"addr add {end['address']}/31 dev {end['ifname']}", f"link set {end['ifname']} up"]
            tc += _tc_lines(end["ifname"], r, _queue_bytes(r, buffer))
        for h in range(len(plan["hosts"])):
            port = int(ports[j][h])
            if port == 0:
                continue
            end, peer, _r = end_of_port[(node, port)]
            if peer["node"] in host_nodes:  # the host itself: on the link
                ip.append(f"route add {plan['hosts'][h]['address']}/32 dev {end['ifname']}")
            else:
                ip.append(f"route add {plan['hosts'][h]['address']}/32 via {peer['address']} dev {end['ifname']}")
        scripts[ns] = (["net/ipv4/ip_forward=1", "net/ipv4/conf/all/proxy_arp=1", "net/ipv4/conf/default/proxy_arp=1"],
                       ip, tc)
    mgmt = ["link set lo up", "link add br0 type bridge", "link set br0 up",
            f"addr add {_MGMT.broadcast_address - 1}/{_MGMT.prefixlen} dev br0"]
    for i in range(len(plan["hosts"])):
        mgmt += [f"link set h{i} master br0", f"link set h{i} up"]
    scripts[plan["mgmt_ns"]] = ([], mgmt, [])
    return scripts


def _configure(ns: str, sysctls: list[str], ip_lines: list[str], tc_lines: list[str], work: Path) -> None:
    """Apply one namespace's settings with one `ip netns exec` (sysctls by /proc writes, then
    `ip -batch`, then `tc -batch`)."""
    ip_file, tc_file = work / f"{ns}.ip", work / f"{ns}.tc"
    ip_file.write_text("\n".join(ip_lines) + "\n")
    tc_file.write_text("\n".join(tc_lines) + "\n")
    # rp_filter off: routes need not be symmetric (up/down, dimension order). No redirects.
    steps = [f"echo {v} > /proc/sys/{k.replace('.', '/')}" for k, v in (s.split("=") for s in sysctls)]
    # IPv6 off before any link is up: its neighbour discovery would add bytes to the counters.
    if "net/ipv4/conf/all/proxy_arp=1" in sysctls:
        # Answer at once: proxy replies are otherwise delayed up to 0.8 s (proxy_delay).
        steps += ["for f in /proc/sys/net/ipv4/conf/*/proxy_arp; do echo 1 > $f; done",
                  "for f in /proc/sys/net/ipv4/neigh/*/proxy_delay; do echo 0 > $f; done"]
    steps += ["echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6", "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6",
              "for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $f; done",
              "for f in /proc/sys/net/ipv4/conf/*/send_redirects; do echo 0 > $f; done",
              f"ip -batch {ip_file}"]
    if tc_lines:
        steps.append(f"tc -batch {tc_file}")
    _sh(["ip", "netns", "exec", ns, "sh", "-ec", "; ".join(steps)])


def up(topo: Topology, routes: RoutingTable, name: str, scale: float = 1.0, buffer: Optional[int] = None,
       workers: int = 4) -> Fabric:
    """Bring fabric `name` up from `topo` and `routes` (see the module doc). On any failure
    everything created so far is removed before the error is raised."""
    require_root()
    _check_name(name)
    check_size(topo)
    if not scale > 0:
        raise NetweaveError(f"--scale {scale} must be positive (a fraction of each link's bandwidth)")
    if buffer is not None and buffer < 1500:
        raise NetweaveError(f"--buffer {buffer} must hold at least one 1,500-byte packet")
    buffer = port_buffer(topo, buffer)
    state_file = STATE_DIR / f"{name}.json"
    if state_file.exists() or namespaces(name):
        raise NetweaveError(f"fabric '{name}' is already up (netweave emulate down {name} removes it)")
    if routes.topology.num_nodes != topo.num_nodes:
        raise NetweaveError("the routing table was computed for another topology")
    plan = _plan(topo, routes, name, scale, buffer)
    for link in plan["links"]:
        if link["rate_bps"] < 8_000:
            raise NetweaveError(f"link {link['link']} would run at {link['rate_bps']:.0f} bit/s after --scale {scale}: "
                                "raise --scale")
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    public = {k: v for k, v in plan.items() if not k.startswith("_")}
    all_ns = [h["ns"] for h in plan["hosts"]] + plan["switches"] + [plan["mgmt_ns"]]
    public["namespaces"] = all_ns
    public["agent"] = str(_agent_path(name))
    state_file.write_text(json.dumps(public, indent=1))
    work = Path(tempfile.mkdtemp(prefix=f"netweave-emulate-{name}-"))
    try:
        _write_agent(public)
        _sh(["ip", "-batch", "-"], input="".join(f"netns add {ns}\n" for ns in all_ns))
        lines = [f"link add {l['a']['ifname']} netns {l['a']['ns']} type veth peer name {l['b']['ifname']} netns {l['b']['ns']}"
                 for l in plan["links"]]
        lines += [f"link add mgmt netns {h['ns']} type veth peer name h{i} netns {plan['mgmt_ns']}"
                  for i, h in enumerate(plan["hosts"])]
        _sh(["ip", "-batch", "-"], input="\n".join(lines) + "\n")
        scripts = _namespace_scripts(plan)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for f in [pool.submit(_configure, ns, *script, work) for ns, script in scripts.items()]:
                f.result()
    except BaseException:
        down(name)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Fabric(name, public)


def attach(name: str) -> Fabric:
    """The fabric `name` that is up (from its state file)."""
    _check_name(name)
    state_file = STATE_DIR / f"{name}.json"
    if not state_file.exists():
        raise NetweaveError(f"no emulated fabric '{name}' is up (netweave emulate status lists them)")
    return Fabric(name, json.loads(state_file.read_text()))


def down(name: str) -> dict[str, Any]:
    """Remove fabric `name`: every namespace that carries its prefix (their veths
    go with them) and its state file. Safe to call on a half-built or already removed fabric."""
    require_root()
    _check_name(name)
    state_file = STATE_DIR / f"{name}.json"
    # Every namespace of the fabric carries its prefix, so what exists now is what must go
    # (the state file may be missing after a crash, or list namespaces never created).
    doomed = namespaces(name)
    if doomed:
        _kill_inside(doomed)  # a process left inside would keep its namespace's network alive
        subprocess.run(["ip", "-batch", "-"], input="".join(f"netns delete {ns}\n" for ns in doomed),
                       capture_output=True, text=True)
    left = namespaces(name)
    state_file.unlink(missing_ok=True)
    _agent_path(name).unlink(missing_ok=True)
    # Open MPI's session directories are named after the hostnames the agent gave the hosts.
    for session in Path(tempfile.gettempdir()).glob(f"ompi.{PREFIX}{name}-*"):
        shutil.rmtree(session, ignore_errors=True)
    if left:
        raise NetweaveError(f"could not remove {len(left)} namespace(s) of '{name}', e.g. {left[0]}")
    return {"name": name, "removed_namespaces": len(doomed)}


def _kill_inside(spaces: list[str]) -> None:
    """SIGKILL every process running in these namespaces."""
    for ns in spaces:
        for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass


def status() -> list[dict[str, Any]]:
    """Every emulated fabric: from state files, and any namespaces left without one."""
    rows = []
    seen = set()
    if STATE_DIR.is_dir():
        for f in sorted(STATE_DIR.glob("*.json")):
            s = json.loads(f.read_text())
            live = namespaces(s["name"])
            seen.update(live)
            rows.append({"name": s["name"], "topology": s["topology"], "engine": s["engine"], "hosts": len(s["hosts"]),
                         "switches": len(s["switches"]), "links": len(s["links"]), "scale": s["scale"],
                         "buffer": s["buffer"], "namespaces": len(live), "complete": len(live) == len(s["namespaces"])})
    orphans: dict[str, int] = {}
    for ns in namespaces():
        if ns not in seen:
            fabric = ns[len(PREFIX):].rsplit("-", 1)[0]
            orphans[fabric] = orphans.get(fabric, 0) + 1
    for fabric, count in sorted(orphans.items()):
        rows.append({"name": fabric, "topology": None, "engine": None, "hosts": None, "switches": None, "links": None,
                     "scale": None, "buffer": None, "namespaces": count, "complete": False})
    return rows


def host_index(fabric: Fabric, host: str) -> int:
    """The host index `host` names (``"3"``), checked against the fabric."""
    if host.isdigit() and int(host) < fabric.num_hosts:
        return int(host)
    raise NetweaveError(f"host '{host}': give a host index 0..{fabric.num_hosts - 1}")


def exec_on(fabric: Fabric, host: int, command: list[str]) -> int:
    """Run `command` on host `host` with this terminal; its exit status."""
    if not command:
        raise NetweaveError("give the command to run after --")
    return subprocess.run(fabric.exec_prefix(host) + command).returncode


def scaled_topology(topo: Topology, scale: float) -> Topology:
    """`topo` as the emulation runs it: every bandwidth × `scale`, and no link latency (the
    emulation adds none; the namespaces' forwarding cost is microseconds)."""
    doc = json.loads(topo.to_text("json"))
    for link in doc["links"]:
        link["bandwidth_gbps"] = float(link["bandwidth_gbps"]) * scale
        link["latency_ns"] = 0.0
    return _core.read_topology(json.dumps(doc), "json")


def scaled_routes(routes: RoutingTable, scaled: Topology) -> RoutingTable:
    """The same table on the scaled copy of its topology."""
    with tempfile.TemporaryDirectory(prefix="netweave-emulate-") as d:
        path = Path(d) / "routes.json"
        routing.save(routes, path)
        return routing.load(scaled, path)


def run(fabric: Fabric, graph: _core.TaskGraph, **options: Any) -> dict[str, Any]:
    """Run `graph` with the TCP executor on the fabric's hosts (rank r on host r), as
    :func:`runtime.run_local` does on loopback; the result also has ``channel_bytes``, what each
    directed channel carried during the run (its interface counters' difference), and
    ``losses``, the packets the fabric dropped and the segments TCP retransmitted meanwhile."""
    if graph.num_ranks > fabric.num_hosts:
        raise NetweaveError(f"the schedule has {graph.num_ranks} ranks; fabric '{fabric.name}' has {fabric.num_hosts} hosts")
    before, lost_before = fabric.channel_bytes(), fabric.losses()
    result = runtime.run_local(graph, placement=fabric.placement(), **options)
    after, lost_after = fabric.channel_bytes(), fabric.losses()
    result["channel_bytes"] = [a - b for a, b in zip(after, before)]
    result["losses"] = {k: lost_after[k] - lost_before[k] for k in lost_after}
    return result


#: What the byte-counter proof allows beyond the payload, per channel: headers on the data
#: (veth counts GSO segments, one header per up to 64 KiB: measured 0.3-1.3 % without losses),
#: ACKs for data flowing the other way along the reverse route, and connection set-up,
#: hellos and 1-byte syncs.
DATA_OVERHEAD = 0.03
ACK_SHARE = 0.03
CONTROL_BYTES = 64 * 1024


def routed_bytes(routes: RoutingTable, graph: _core.TaskGraph) -> tuple[list[int], list[int]]:
    """Payload bytes each directed channel must carry by the routing table — every task's bytes
    on every channel of its route — and the bytes whose *reverse* route crosses it (their ACKs)."""
    channels = 2 * routes.topology.num_links
    forward, reverse = [0] * channels, [0] * channels
    for src, dst, nbytes, _after, _relays in graph.tasks():
        if src == dst:
            continue
        for c in routes.path(src, dst):
            forward[c] += nbytes
        for c in routes.path(dst, src):
            reverse[c] += nbytes
    return forward, reverse


def routing_proof(routes: RoutingTable, graph: _core.TaskGraph, measured: list[int],
                  losses: Optional[dict[str, int]] = None) -> dict[str, Any]:
    """Check that the fabric carried the schedule exactly as the routing table routes it: each
    channel's measured bytes lie between its routed payload and that payload plus the overhead
    allowed above. Returns ``ok``, the overall ``overhead`` (measured ÷ payload − 1 on the
    channels that carry payload) and every channel outside its bounds. A run with losses
    retransmits bytes on some channels, so its proof is ``inconclusive`` (give a deeper
    ``buffer`` or a lower rate) rather than failed."""
    forward, reverse = routed_bytes(routes, graph)
    topo = routes.topology
    links = topo.link_array().tolist()
    violations = []
    for c, (want, back, got) in enumerate(zip(forward, reverse, measured)):
        high = want * (1 + DATA_OVERHEAD) + back * ACK_SHARE + CONTROL_BYTES
        if not want <= got <= high:
            a, _pa, b, _pb = links[c // 2]
            frm, to = (a, b) if c % 2 == 0 else (b, a)
            violations.append({"channel": c, "from": topo.label(frm), "to": topo.label(to), "routed_bytes": want,
                               "measured_bytes": got, "allowed_up_to": int(high)})
    carrying = [(w, m) for w, m in zip(forward, measured) if w > 0]
    payload = sum(w for w, _ in carrying)
    lossy = bool(losses) and any(losses.values())
    return {
        "ok": not violations,
        "inconclusive": bool(violations) and lossy,
        "losses": losses,
        "channels": len(forward),
        "channels_with_payload": len(carrying),
        "payload_bytes": payload,
        "measured_bytes": sum(measured),
        "overhead": (sum(m for _, m in carrying) / payload - 1) if payload else None,
        "violations": violations,
    }


#: What two cores forward while the emulation keeps to the flow model within a few per cent
#: (bits per second of payload × channels crossed; benches/emulate_fidelity.py).
FORWARDING_BUDGET_BPS = 3e9


def forwarding_load(routes: RoutingTable, graph: _core.TaskGraph, seconds: float) -> float:
    """Bits per second the machine must move over veth links for `graph` to take `seconds`:
    every task's bytes once per channel of its route (each channel is a transmit and a receive
    in the kernel)."""
    forward, _reverse = routed_bytes(routes, graph)
    return sum(forward) * 8 / seconds if seconds > 0 else 0.0


def predict(topo: Topology, routes: RoutingTable, graph: _core.TaskGraph, scale: float = 1.0,
            buffer: Optional[int] = None, calibration=None) -> dict[str, Any]:
    """The flow model's report for `graph` run by the TCP executor on the emulated fabric: the
    DAG executor on :func:`predicted_topology` (scaled, no link latency, the emulated port
    buffer), with `calibration`'s measured parameters when given."""
    scaled = predicted_topology(topo, scale, buffer)
    return flowsim.simulate(scaled_routes(routes, scaled), graph, executor="dag", calibration=calibration)


def measure(topo: Topology, routes: RoutingTable, workload, name: str, scale: float = 1.0,
            buffer: Optional[int] = None, seed: int = 0, timeout: float = runtime.DEFAULT_TIMEOUT,
            work_dir: Optional[Path] = None, calibration=None) -> dict[str, Any]:
    """Bring up a fabric, run `workload` (a schedule or a DAG) on it with the TCP executor, prove
    the routing by byte counters, predict the same run with the flow simulator's DAG executor
    on the scaled fabric (no link latency, as emulated; on Ethernet the emulated port buffer and
    TCP timeouts, with `calibration`'s parameters when given), and tear the fabric down."""
    graph = runtime.as_task_graph(workload)
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
        job.on_parent_death([sys.executable, "-c", f"from netweave import emulate; emulate.down({name!r})"])
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




def _agent_path(name: str) -> Path:
    return STATE_DIR / f"{name}-agent.sh"


def _write_agent(state: dict[str, Any]) -> None:
    """An rsh/ssh-style launcher agent (``AGENT [options] HOST COMMAND...``, HOST a management
    address) that runs COMMAND in that host's namespace with the namespace's name as hostname
    (its own UTS namespace), so MPI launchers start their daemons on emulated hosts."""
    cases = "\n".join(f"  {h['mgmt']}) ns={h['ns']} ;;" for h in state["hosts"])
    _agent_path(state["name"]).write_text(
        "#!/bin/sh\n"
        f"# netweave emulate: launcher agent for fabric {state['name']}\n"
        'while [ "${1#-}" != "$1" ]; do shift; done\n'
        'case "$1" in\n'
        f"{cases}\n"
        '  *) echo "netweave emulate: $1 is not a host of this fabric" >&2; exit 1 ;;\n'
        "esac\n"
        "shift\n"
        'exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns; $*"\n')
    _agent_path(state["name"]).chmod(0o755)


def mpi_command(fabric: Fabric, implementation: str, ranks: int, program: list[str],
                env: Optional[dict[str, str]] = None, hosts: Optional[list[int]] = None) -> list[str]:
    """The command that runs `program` as `ranks` MPI processes, rank r on host r, launched from
    the management namespace: daemons and control over the management network, MPI traffic
    over the fabric only (Open MPI: TCP BTL on 10.0.0.0/8; MPICH: UCX's TCP on the fabric
    interface). `env` is set for every rank (e.g. :func:`netweave.mpi.settings` and the
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
    hosts = [fabric.state["hosts"][h]["mgmt"] for h in chosen]
    agent = fabric.state.get("agent") or str(_agent_path(fabric.name))
    mgmt = ["ip", "netns", "exec", fabric.state["mgmt_ns"]]
    if implementation == "openmpi":
        return mgmt + ["mpirun.openmpi", "--allow-run-as-root", "-np", str(ranks), "--host", ",".join(f"{h}:1" for h in hosts),
                       "--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", str(_MGMT),
                       "--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "10.0.0.0/8",
                       "--mca", "mpi_yield_when_idle", "1",
                       *[a for k, v in env.items() for a in ("-x", f"{k}={v}")], *program]
    ports = {fabric.state["hosts"][h]["port"] for h in chosen}
    if len(ports) != 1:
        raise NetweaveError("MPICH's UCX needs one fabric interface name on every host; these hosts use ports "
                            + ", ".join(map(str, sorted(ports))))
    return mgmt + ["env", "UCX_TLS=tcp,self", f"UCX_NET_DEVICES=p{ports.pop()}", "mpiexec.mpich", "-launcher", "ssh",
                   "-launcher-exec", agent, "-iface", "br0", "-hosts", ",".join(hosts), "-n", str(ranks), "-ppn", "1",
                   *[a for k, v in env.items() for a in ("-genv", k, v)], *program]


def mpirun(fabric: Fabric, implementation: str, ranks: int, program: list[str],
           timeout: float = 300.0, env: Optional[dict[str, str]] = None,
           hosts: Optional[list[int]] = None, done_when: Optional[Callable[[str], bool]] = None,
           grace: float = 10.0) -> subprocess.CompletedProcess:
    """Run `program` under MPI on the fabric (see :func:`mpi_command`); output captured. A run
    that outlives `timeout` seconds is killed, with every process it left in the fabric.

    `done_when(stdout)` says the program's output is complete: a run still alive `grace`
    seconds after that is ended the same way and counts as finished, with a line saying so on
    its stderr — MPICH over UCX can hang in ``MPI_Finalize`` after all its work on these
    fabrics (see docs/emulate.md)."""
    cmd = mpi_command(fabric, implementation, ranks, program, env, hosts)
    everything = [h["ns"] for h in fabric.state["hosts"]] + [fabric.state["mgmt_ns"]]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        with processes.Job() as job:  # launcher and ranks die with netweave, however it ends
            proc = job.popen(cmd, stdout=out, stderr=err, text=True)
            start, complete_at, note = time.monotonic(), None, ""
            while proc.poll() is None:
                now = time.monotonic()
                if complete_at is None and done_when is not None:
                    out.seek(0)
                    if done_when(out.read()):
                        complete_at = now
                if complete_at is not None and now - complete_at > grace:
                    note = (f"netweave emulate: ended the {implementation} run {grace:g} s after its output was "
                            "complete (it did not exit: MPI_Finalize hung)\n")
                    break
                if now - start > timeout:
                    _kill_inside(everything)
                    job.stop()
                    raise NetweaveError(f"{implementation} run on fabric '{fabric.name}' did not finish within {timeout:g} s")
                time.sleep(0.1)
            if note:
                _kill_inside(everything)
                job.stop()
            code = proc.wait()
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, 0 if note else code, out.read(), err.read() + note)
