"""Proof that the fabric carried a run as the routing table routes it: each directed channel's
interface counter against the payload the table puts on it."""

from __future__ import annotations

from typing import Any

from netweave import _core
from netweave._core import RoutingTable, TaskGraph

#: What the byte-counter proof allows beyond the payload, per channel: headers on the data
#: (veth counts GSO segments, one header per up to 64 KiB: measured 0.3-1.3 % without losses),
#: ACKs for data flowing the other way along the reverse route, and connection set-up,
#: hellos and 1-byte syncs.
DATA_OVERHEAD = 0.03
ACK_SHARE = 0.03
CONTROL_BYTES = 64 * 1024


def routed_bytes(routes: RoutingTable, graph: TaskGraph) -> tuple[list[int], list[int]]:
    """Payload bytes each directed channel must carry by the routing table — every task's bytes
    on every channel of its route — and the bytes whose *reverse* route crosses it (their ACKs).
    Rank r runs on host r, as the emulated fabric places it."""
    on_fabric = list(range(graph.num_ranks))
    return (_core.channel_bytes(routes, graph, placement=on_fabric),
            _core.channel_bytes(routes, graph, reverse=True, placement=on_fabric))


def routing_proof(routes: RoutingTable, graph: TaskGraph, measured: list[int],
                  losses: dict[str, int] | None = None) -> dict[str, Any]:
    """Check that the fabric carried the schedule exactly as the routing table routes it: each
    channel's measured bytes lie between its routed payload and that payload plus the overhead
    allowed above. Returns ``ok``, the overall ``overhead`` (measured ÷ payload − 1 on the
    channels that carry payload) and every channel outside its bounds. A run with losses
    retransmits bytes on some channels, so its proof is ``inconclusive`` (give a deeper
    ``buffer`` or a lower rate) rather than failed."""
    forward, reverse = routed_bytes(routes, graph)
    topo = routes.topology
    violations = []
    for c, (want, back, got) in enumerate(zip(forward, reverse, measured)):
        high = want * (1 + DATA_OVERHEAD) + back * ACK_SHARE + CONTROL_BYTES
        if not want <= got <= high:
            frm, to = topo.channel_ends(c)
            violations.append({"channel": c, "from": topo.label(frm), "to": topo.label(to), "routed_bytes": want,
                               "measured_bytes": got, "allowed_up_to": int(high)})
    carrying = [(w, m) for w, m in zip(forward, measured) if w > 0]
    payload = sum(w for w, _ in carrying)
    lossy = losses is not None and any(losses.values())
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


def forwarding_load(routes: RoutingTable, graph: TaskGraph, seconds: float) -> float:
    """Bits per second the machine must move over veth links for `graph` to take `seconds`:
    every task's bytes once per channel of its route (each channel is a transmit and a receive
    in the kernel)."""
    forward, _reverse = routed_bytes(routes, graph)
    return sum(forward) * 8 / seconds if seconds > 0 else 0.0
