"""The emulated fabric's address plan: which namespace each node is, each host's fabric and
management address, each link's two ends — everything :func:`~netweave.run.emulate.cluster.up`
creates, before it creates anything.

>>> fabric_address(0), fabric_address(255), link_addresses(1)
('10.0.0.1', '10.0.1.0', ('100.64.0.2', '100.64.0.3'))
"""

from __future__ import annotations

import ipaddress
import os
import time
from typing import Any

from netweave._core import NetweaveError, RoutingTable, Topology
from netweave.run.emulate.traffic_control import FRAME_OVERHEAD

#: Namespace name prefix of every emulated fabric.
PREFIX = "nw-"
#: The management network (one bridge, unthrottled) every host joins for launching processes.
MGMT_NETWORK = ipaddress.IPv4Network("172.16.0.0/12")



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
    return str(MGMT_NETWORK.network_address + host + 1)



def address_plan(topo: Topology, routes: RoutingTable, name: str, scale: float, buffer: int | None) -> dict[str, Any]:
    """Everything :func:`~netweave.run.emulate.cluster.up` will create, as the state file records it
    (keys starting with ``_`` are working data, not recorded)."""
    hosts, switches = [int(n) for n in topo.hosts], [int(n) for n in topo.switches]
    ns_of = {int(n): f"{PREFIX}{name}-h{i}" for i, n in enumerate(hosts)}
    ns_of.update({int(n): f"{PREFIX}{name}-s{j}" for j, n in enumerate(switches)})
    specs = topo.link_specs()
    links, end_of_port = [], {}
    for link, (a, pa, b, pb) in enumerate(topo.link_array().tolist()):
        addr_a, addr_b = link_addresses(link)
        rate = float(specs[link][0]) * 1e9 * scale * FRAME_OVERHEAD
        links.append({"link": link, "rate_bps": rate,
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
    return {
        "name": name, "topology": topo.name, "engine": routes.engine, "scale": scale, "buffer": buffer,
        "created": time.time(), "pid": os.getpid(),
        "hosts": host_rows, "switches": [ns_of[int(n)] for n in switches], "mgmt_ns": f"{PREFIX}{name}-m",
        "links": links,
        "_end_of_port": end_of_port, "_ports_of": ports_of, "_ports": routes.ports(), "_hosts": hosts,
        "_switch_nodes": switches,
    }
