"""Analysis: exact per-phase directed-link loads of a schedule on a routed topology.

``analyze`` returns a dict with

- ``complete`` (every claim the schedule makes holds: its collective is complete — for a
  direct all-to-all every ordered rank pair exactly once — and, if it claims so, every phase
  is a permutation), ``problem`` (the first problem, or ``None``), ``completeness`` (the
  counts behind it) and ``permutation_phases``;
- ``max_congestion``, ``contended_links_total`` and ``contended_links`` (the most loaded
  channels, each with ``from_label``/``to_label`` nodes, ``max_load``, the ``phase`` reaching
  it, ``contended_phases`` and total ``bytes``);
- ``throughput_ratio`` (paper 000: mean over flows of 1 / max load on the flow's path);
- ``fluid_time_s`` (paper 001's lock-step fluid time: phases back to back, each as long as its
  most loaded switch-to-switch channel needs at its bandwidth) and
  ``fluid_time_host_links_s`` (host links bounded by their bandwidth too);
- paper 003's cost terms, named as the mapper names them: ``sum_hops``, ``hop_bytes``,
  ``max_channel_bytes`` (host links included) and ``hops_x_max_channel``; also ``bytes`` and
  ``flows``;
- ``phases``: per phase ``flows``, ``max_load``, ``contended_channels``,
  ``throughput_ratio``, ``fluid_time_s``, ``fluid_time_host_links_s`` and ``permutation``.

>>> import netweave
>>> topo = netweave.stages.topology.latin_square_fat_tree(2)
>>> routes = netweave.stages.routing.route(topo, "lsft")
>>> report = analyze(routes, netweave.stages.traffic.alltoall(topo.num_hosts, 1 << 20))
>>> report["complete"], report["max_congestion"] > 1
(True, True)
"""

from __future__ import annotations

from netweave import _core


def analyze(
    routes: _core.RoutingTable,
    schedule: _core.Schedule,
    hop_latency_s: float = 0.0,
    link_latency: bool = False,
    max_links: int = 20,
) -> dict:
    """Loads of `schedule` routed by `routes` (on the topology the routes were built for).

    `hop_latency_s` adds a per-channel latency along each phase's longest path, `link_latency`
    the topology's own link latencies; `max_links` bounds the ``contended_links`` list.
    """
    return _core.analyze(routes, schedule, hop_latency_s, link_latency, max_links)


def phase_channel_flows(routes: _core.RoutingTable, schedule: _core.Schedule, phase: int) -> list[int]:
    """Flows on each directed channel in phase `phase` of `schedule`, indexed by channel:
    channel ``2*l`` runs along link ``l`` from its end ``a`` to its end ``b``, ``2*l + 1`` back.

    >>> import netweave
    >>> topo = netweave.stages.topology.mesh([4], 1)
    >>> routes = netweave.stages.routing.route(topo, "dor")
    >>> max(phase_channel_flows(routes, netweave.stages.traffic.alltoall(4, 1), 1))  # shift by 2
    2
    """
    return _core.phase_channel_flows(routes, schedule, phase)


def bottleneck_bound(routes: _core.RoutingTable, traffic) -> dict:
    """The bottleneck lower bound of `traffic` (a phased ``Schedule`` or a DAG ``TaskGraph``)
    routed by `routes`: no order of its messages finishes sooner than its busiest resource
    moves its bytes — the largest of bytes ÷ bandwidth over directed links and of bytes sent
    (received) ÷ link bandwidth over hosts. Latency is left out.

    Returns ``seconds``, ``bytes`` (on the binding resource), ``binding`` (``kind`` ``link``
    with ``from_label``/``to_label``, ``injection``/``ejection`` with the host's ``label``, or
    ``none``), ``describe`` (one line naming it), ``link_seconds``, ``injection_seconds``,
    ``ejection_seconds`` and ``network_bytes``. A candidate's ratio to it is
    :func:`bound_ratio`.

    >>> import netweave
    >>> topo = netweave.stages.topology.mesh([4], 1)
    >>> routes = netweave.stages.routing.route(topo, "dor")
    >>> b = bottleneck_bound(routes, netweave.stages.traffic.alltoall(4, 1 << 20))
    >>> b["binding"]["kind"], b["bytes"] == 4 << 20
    ('link', True)
    """
    return _core.bottleneck_bound(routes, traffic)


def bound_ratio(seconds: float, bound: dict) -> float:
    """`seconds` ÷ the bound's seconds: 1.0 at the bound (infinite if the bound is 0 and the
    candidate takes time)."""
    if bound["seconds"] > 0:
        return seconds / bound["seconds"]
    return float("inf") if seconds > 0 else 1.0


def describe(schedule: _core.Schedule) -> dict:
    """Name and sizes of a schedule, for reports."""
    info = {
        "name": schedule.name,
        "ranks": schedule.num_ranks,
        "phases": schedule.num_phases,
        "messages": schedule.num_messages,
        "collective": schedule.collective,
    }
    return info
