"""Each port of the emulated fabric as Linux traffic control shapes it: an ``htb`` at the link's
rate (frames metered with their headers), control packets first, and a drop-tail data queue of
the port's buffer — what reproduces shallow-buffer incast."""

from __future__ import annotations

from netweave._core import Topology

#: A switch port's queue on a lossless fabric (no ``buffer``): a drop-tail queue cannot
#: back-pressure as credits do, so it holds more than can converge on one port — the send
#: buffers (Linux's ``tcp_wmem`` maximum, 4 MiB) of 64 flows. At 10 ms of the port's rate, the
#: queue before it, a 52-host gather of 16 KiB lost 1,088 segments and measured 2.5× the model.
LOSSLESS_QUEUE = 256 * 1024 * 1024
#: A host's queue (its NIC): HOST_QUEUE_S of its rate, at least HOST_MIN_QUEUE bytes. Hosts should
#: not drop their own packets (a real NIC pushes back on the socket instead).
HOST_QUEUE_S = 0.2
HOST_MIN_QUEUE = 256 * 1024
#: Ethernet, IPv4 and TCP headers per full 1,460-byte TCP payload (hosts send no TCP timestamps,
#: see _namespace_scripts): a port meters frames, so a link runs at bandwidth × FRAME_OVERHEAD
#: for its payload to move at the modelled bandwidth, as the flow simulator (which has no
#: headers) assumes.
FRAME_OVERHEAD = 1514 / 1460


def port_buffer(topo: Topology, buffer: int | None = None) -> int | None:
    """The bytes a switch port of the emulated `topo` queues: `buffer` when given, else the
    topology's own port buffer (an Ethernet fabric's ``port_buffer_bytes``, the value the flow
    model's loss rule uses); None on a lossless fabric, whose ports then queue LOSSLESS_QUEUE."""
    if buffer is not None:
        return int(buffer)
    return topo.port_buffer_bytes if topo.link_layer == "ethernet" else None



def queue_bytes(buffer: int | None) -> int:
    """A switch port's drop-tail queue: `buffer` (from :func:`port_buffer`), LOSSLESS_QUEUE without."""
    return int(buffer) if buffer is not None else LOSSLESS_QUEUE


def host_queue_bytes(rate_bps: float) -> int:
    """A host port's queue at `rate_bps`: HOST_QUEUE_S of its rate, at least HOST_MIN_QUEUE."""
    return max(HOST_MIN_QUEUE, int(rate_bps / 8 * HOST_QUEUE_S))


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


def tc_lines(ifname: str, rate_bps: float, limit: int) -> list[str]:
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
