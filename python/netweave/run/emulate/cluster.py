"""Bringing an emulated fabric up and down: one network namespace per host and switch, veth
links, per-namespace sysctls, routes and ``tc`` (see the package doc for names and addresses), a
state file so :func:`down` cleans up after a crash, and the launcher agent MPI starts its daemons
with."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netweave._core import NetweaveError, RoutingTable, Topology
from netweave.run import executor
from netweave.run.emulate.addresses import MGMT_NETWORK, PREFIX, address_plan
from netweave.run.emulate.traffic_control import (
    GSO_BYTES,
    host_queue_bytes,
    port_buffer,
    queue_bytes,
    tc_lines,
)

#: Where fabric state files live (tmpfs: a reboot forgets fabrics, as it forgets namespaces).
STATE_DIR = Path(os.environ.get("NETWEAVE_EMULATE_STATE", "/run/netweave/emulate"))
#: TCP port every executor process listens on (each host has its own address).
EXECUTOR_PORT = 7100
_NAME = re.compile(r"^[a-z0-9]{1,12}$")


def require_root() -> None:
    """Refuse, in one line, when this process cannot create namespaces and links."""
    if os.geteuid() != 0:
        raise NetweaveError("netweave emulate needs root (it creates network namespaces, veth links and tc "
                            "qdiscs): run it as root")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise NetweaveError(f"netweave emulate needs '{tool}' (Debian package iproute2)")


def check_name(name: str) -> None:
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


#: The kernel's ARP cache limits (machine-wide: every namespace's entries count against them).
NEIGHBOUR_LIMITS = Path("/proc/sys/net/ipv4/neigh/default")


def make_neighbour_room(topo: Topology) -> None:
    """Raise the kernel's ARP cache limits so the fabric's entries fit beside those that exist.
    Every host reaches every other host's address through its switch's proxy ARP, so a host
    caches one entry per other host: a 64-host fabric needs about 4,100 entries, and past the
    default limit of 1,024 the kernel refuses new ones ("neighbor table overflow"): SYNs are
    never sent and runs fail to connect. The limits are only ever raised."""
    hosts = topo.num_hosts
    wanted = hosts * (hosts - 1) + 2 * hosts + 2 * topo.num_links  # hosts, management, switch ports
    try:
        # The first column of the first counter row: the entries that exist now, in hex.
        wanted += int(Path("/proc/net/stat/arp_cache").read_text().splitlines()[1].split()[0], 16)
        thresholds = {k: int((NEIGHBOUR_LIMITS / k).read_text()) for k in ("gc_thresh2", "gc_thresh3")}
    except (OSError, ValueError, IndexError):
        return
    # Below gc_thresh2 entries are collected lazily; gc_thresh3 is the hard limit.
    for key, target in (("gc_thresh2", 2 * wanted), ("gc_thresh3", 4 * wanted)):
        if thresholds[key] < target:
            (NEIGHBOUR_LIMITS / key).write_text(str(target))


#: The hosts' TCP congestion control: Debian's and Linux's default, loss-based, as the flow
#: model's TCP is. A namespace inherits the machine's default instead, and where that is BBR a
#: warm connection keeps its bandwidth estimate between messages and bursts windows of 145
#: segments into 64 KiB port buffers: tree-phased's warm calls on 2 × 14 hosts measured
#: 1.38–1.55× its prediction with BBR, 1.09–1.15× with cubic (its first call 1.08× with both).
HOST_CONGESTION_CONTROL = "cubic"
#: The machine's IPv4 settings, where its TCP congestion-control lists are (the allowed list is machine-wide).
IPV4_SYSCTLS = Path("/proc/sys/net/ipv4")


def allow_host_congestion_control() -> None:
    """Let the hosts' namespaces choose :data:`HOST_CONGESTION_CONTROL`: a namespace may only
    make an algorithm its default if the machine allows it to unprivileged sockets (the
    machine's own default always is), so it is added to
    ``net.ipv4.tcp_allowed_congestion_control`` where missing — only ever added, as the ARP
    limits are only ever raised. Refused in one line where the kernel lacks it."""
    allowed_file = IPV4_SYSCTLS / "tcp_allowed_congestion_control"
    try:
        available = (IPV4_SYSCTLS / "tcp_available_congestion_control").read_text().split()
        allowed = allowed_file.read_text().split()
    except OSError:
        return
    if HOST_CONGESTION_CONTROL not in available:
        raise NetweaveError(f"netweave emulate runs its hosts' TCP with {HOST_CONGESTION_CONTROL} (Linux's default "
                            f"congestion control, the flow model's); this kernel offers only {' '.join(available)}")
    if HOST_CONGESTION_CONTROL not in allowed:
        allowed_file.write_text(" ".join([*allowed, HOST_CONGESTION_CONTROL]))


def sh(cmd: list[str], input: str | None = None) -> str:
    """Run a command; its stdout, or an error with the command and its last line of output."""
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True)
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        shown = " ".join(cmd[:6]) + (" …" if len(cmd) > 6 else "")
        raise NetweaveError(f"{shown} failed: {said[-1] if said else f'exit status {proc.returncode}'}")
    return proc.stdout


def namespaces(name: str | None = None) -> list[str]:
    """Namespaces of fabric `name` (of every emulated fabric when None) that exist now."""
    out = sh(["ip", "netns", "list"])
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    want = PREFIX if name is None else f"{PREFIX}{name}-"
    return sorted(n for n in names if n.startswith(want))


@dataclass
class EmulatedCluster:
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

    def placement(self) -> executor.Placement:
        """Where the executor's rank r runs: host r's fabric address, inside its namespace."""
        return executor.Placement([(h["address"], EXECUTOR_PORT) for h in self.state["hosts"]],
                                 [self.exec_prefix(i) for i in range(self.num_hosts)])

    def losses(self) -> dict[str, int]:
        """Packets dropped by the fabric's queues so far (every port), TCP segments the hosts
        retransmitted (what makes a run's bytes exceed its payload beyond the headers), the
        retransmission timeouts that fired (``tcp_timeouts``: each a stall of at least 200 ms) and
        the tail-loss probes that resent a single lost segment (``probe_recoveries``: a probe armed
        with one segment outstanding waits the minimum RTO too, so each may stall 200 ms without
        a timeout)."""
        drops = 0
        for ns in self.state["namespaces"]:
            if ns == self.state["mgmt_ns"]:
                continue
            # A root qdisc counts its bands' drops too.
            for q in json.loads(sh(["tc", "-n", ns, "-s", "-j", "qdisc", "show"]) or "[]"):
                drops += int(q.get("drops", 0)) if q.get("root") else 0
        retrans = timeouts = probed = 0
        for h in self.state["hosts"]:
            text = sh(["ip", "netns", "exec", h["ns"], "cat", "/proc/net/snmp", "/proc/net/netstat"])
            tcp = [line.split() for line in text.splitlines() if line.startswith("Tcp:")]
            ext = [line.split() for line in text.splitlines() if line.startswith("TcpExt:")]
            retrans += int(tcp[1][tcp[0].index("RetransSegs")])
            timeouts += int(ext[1][ext[0].index("TCPTimeouts")])
            probed += int(ext[1][ext[0].index("TCPLossProbeRecovery")])
        return {"dropped_packets": drops, "retransmitted_segments": retrans, "tcp_timeouts": timeouts,
                "probe_recoveries": probed}

    def channel_bytes(self) -> list[int]:
        """Bytes each directed channel (``2·link`` a→b, ``2·link + 1`` b→a) has carried so far:
        the transmit counter of the interface it leaves by."""
        by_ns: dict[str, dict[str, int]] = {}
        for ns in sorted({end["ns"] for link in self.state["links"] for end in (link["a"], link["b"])}):
            data = json.loads(sh(["ip", "-n", ns, "-s", "-j", "link", "show"]) or "[]")
            by_ns[ns] = {d["ifname"]: int(d.get("stats64", d.get("stats", {}))["tx"]["bytes"]) for d in data}
        out = [0] * (2 * len(self.state["links"]))
        for link in self.state["links"]:
            out[2 * link["link"]] = by_ns[link["a"]["ns"]][link["a"]["ifname"]]
            out[2 * link["link"] + 1] = by_ns[link["b"]["ns"]][link["b"]["ifname"]]
        return out


def _namespace_scripts(plan: dict[str, Any]) -> dict[str, tuple[list[str], list[str], list[str]]]:
    """Per namespace: (sysctl paths to write "value", ip batch lines, tc batch lines)."""
    scripts: dict[str, tuple[list[str], list[str], list[str]]] = {}
    end_of_port, ports_of, ports = plan["_end_of_port"], plan["_ports_of"], plan["_ports"]
    buffer = plan["buffer"]
    for i, host in enumerate(plan["hosts"]):
        node = int(plan["_hosts"][i])
        mine, peer, _rate = end_of_port[(node, host["port"])]
        ip = ["link set lo up"]
        tc: list[str] = []
        # A host holds only its fabric address: a program that binds to "the interface's
        # address" (Open MPI does) must get one the switches route back to.
        for p in ports_of[node]:
            end, _other, r = end_of_port[(node, p)]
            # Segments of at most GSO_BYTES: a port queues (and drops) whole offloaded segments,
            # and 64 KiB ones would not fit a shallow switch buffer twice.
            ip.append(f"link set {end['ifname']} gso_max_size {GSO_BYTES} up")
            tc += tc_lines(end["ifname"], r, host_queue_bytes(r))
        # The whole fabric looks like one subnet (UCX, MPICH's transport, wants that); the switch
        # answers ARP for every other host (proxy ARP) and forwards by its table.
        ip += [f"addr add {host['address']}/8 dev {mine['ifname']}",
               f"addr add {host['mgmt']}/{MGMT_NETWORK.prefixlen} dev mgmt", "link set mgmt up"]
        # No TCP timestamps: with them, ACKs overtaking their connection's queued data (the
        # control band) made receivers discard that data (measured: 900 retransmissions in one
        # all-to-all without a single queue drop); without them, a handful.
        scripts[host["ns"]] = (["net/ipv4/ip_forward=0", "net/ipv4/tcp_timestamps=0",
                                f"net/ipv4/tcp_congestion_control={HOST_CONGESTION_CONTROL}"], ip, tc)
    host_nodes = set(plan["_hosts"])
    for j, ns in enumerate(plan["switches"]):
        node = int(plan["_switch_nodes"][j])
        ip = ["link set lo up"]
        tc = []
        for p in ports_of.get(node, []):
            end, _other, r = end_of_port[(node, p)]
            ip += [f"addr add {end['address']}/31 dev {end['ifname']}", f"link set {end['ifname']} up"]
            tc += tc_lines(end["ifname"], r, queue_bytes(buffer))
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
            f"addr add {MGMT_NETWORK.broadcast_address - 1}/{MGMT_NETWORK.prefixlen} dev br0"]
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
    sh(["ip", "netns", "exec", ns, "sh", "-ec", "; ".join(steps)])


def up(topo: Topology, routes: RoutingTable, name: str, scale: float = 1.0, buffer: int | None = None,
       workers: int = 4) -> EmulatedCluster:
    """Bring fabric `name` up from `topo` and `routes` (see the module doc). On any failure
    everything created so far is removed before the error is raised."""
    require_root()
    check_name(name)
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
    plan = address_plan(topo, routes, name, scale, buffer)
    make_neighbour_room(topo)
    allow_host_congestion_control()
    for link in plan["links"]:
        if link["rate_bps"] < 8_000:
            raise NetweaveError(f"link {link['link']} would run at {link['rate_bps']:.0f} bit/s after --scale {scale}: "
                                "raise --scale")
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    public = {k: v for k, v in plan.items() if not k.startswith("_")}
    all_ns = [h["ns"] for h in plan["hosts"]] + plan["switches"] + [plan["mgmt_ns"]]
    public["namespaces"] = all_ns
    public["agent"] = str(agent_path(name))
    state_file.write_text(json.dumps(public, indent=1))
    work = Path(tempfile.mkdtemp(prefix=f"netweave-emulate-{name}-"))
    try:
        write_agent(public)
        sh(["ip", "-batch", "-"], input="".join(f"netns add {ns}\n" for ns in all_ns))
        lines = [f"link add {k['a']['ifname']} netns {k['a']['ns']} type veth peer name {k['b']['ifname']} netns {k['b']['ns']}"
                 for k in plan["links"]]
        lines += [f"link add mgmt netns {h['ns']} type veth peer name h{i} netns {plan['mgmt_ns']}"
                  for i, h in enumerate(plan["hosts"])]
        sh(["ip", "-batch", "-"], input="\n".join(lines) + "\n")
        scripts = _namespace_scripts(plan)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for f in [pool.submit(_configure, ns, *script, work) for ns, script in scripts.items()]:
                f.result()
    except BaseException:
        down(name)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return EmulatedCluster(name, public)


def attach(name: str) -> EmulatedCluster:
    """The fabric `name` that is up (from its state file)."""
    check_name(name)
    state_file = STATE_DIR / f"{name}.json"
    if not state_file.exists():
        raise NetweaveError(f"no emulated fabric '{name}' is up (netweave emulate status lists them)")
    return EmulatedCluster(name, json.loads(state_file.read_text()))


def down(name: str) -> dict[str, Any]:
    """Remove fabric `name`: every namespace that carries its prefix (their veths
    go with them) and its state file. Safe to call on a half-built or already removed fabric."""
    require_root()
    check_name(name)
    state_file = STATE_DIR / f"{name}.json"
    # Every namespace of the fabric carries its prefix, so what exists now is what must go
    # (the state file may be missing after a crash, or list namespaces never created).
    doomed = namespaces(name)
    if doomed:
        kill_inside(doomed)  # a process left inside would keep its namespace's network alive
        subprocess.run(["ip", "-batch", "-"], input="".join(f"netns delete {ns}\n" for ns in doomed),
                       capture_output=True, text=True)
    left = namespaces(name)
    state_file.unlink(missing_ok=True)
    agent_path(name).unlink(missing_ok=True)
    # Open MPI's session directories are named after the hostnames the agent gave the hosts.
    for session in Path(tempfile.gettempdir()).glob(f"ompi.{PREFIX}{name}-*"):
        shutil.rmtree(session, ignore_errors=True)
    if left:
        raise NetweaveError(f"could not remove {len(left)} namespace(s) of '{name}', e.g. {left[0]}")
    return {"name": name, "removed_namespaces": len(doomed)}


def kill_inside(spaces: list[str]) -> None:
    """SIGKILL every process running in these namespaces."""
    for ns in spaces:
        for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)


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



def host_index(fabric: EmulatedCluster, host: str) -> int:
    """The host index `host` names (``"3"``), checked against the fabric."""
    if host.isdigit() and int(host) < fabric.num_hosts:
        return int(host)
    raise NetweaveError(f"host '{host}': give a host index 0..{fabric.num_hosts - 1}")


def exec_on(fabric: EmulatedCluster, host: int, command: list[str]) -> int:
    """Run `command` on host `host` with this terminal; its exit status."""
    if not command:
        raise NetweaveError("give the command to run after --")
    return subprocess.run(fabric.exec_prefix(host) + command).returncode


def agent_path(name: str) -> Path:
    return STATE_DIR / f"{name}-agent.sh"


def write_agent(state: dict[str, Any]) -> None:
    """An rsh/ssh-style launcher agent (``AGENT [options] HOST COMMAND...``, HOST a management
    address) that runs COMMAND in that host's namespace with the namespace's name as hostname
    (its own UTS namespace), so MPI launchers start their daemons on emulated hosts."""
    cases = "\n".join(f"  {h['mgmt']}) ns={h['ns']} ;;" for h in state["hosts"])
    agent_path(state["name"]).write_text(
        "#!/bin/sh\n"
        f"# netweave emulate: launcher agent for fabric {state['name']}\n"
        'while [ "${1#-}" != "$1" ]; do shift; done\n'
        'case "$1" in\n'
        f"{cases}\n"
        '  *) echo "netweave emulate: $1 is not a host of this fabric" >&2; exit 1 ;;\n'
        "esac\n"
        "shift\n"
        'exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns; $*"\n')
    agent_path(state["name"]).chmod(0o755)
