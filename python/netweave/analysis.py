"""Analysis: exact per-phase directed-link loads of a schedule on routed topology.

The result is a dict with ``max_congestion``, ``throughput_ratio`` (paper 000: mean over
flows of 1 / max load on the flow's path; 1.0 means contention-free), ``flows``,
``max_channel_bytes`` and a ``phases`` list with per-phase figures.
"""

from netweave import _core


def analyze(routes: _core.RoutingTable, schedule: _core.Schedule) -> dict:
    """Loads of `schedule` routed by `routes` (on the topology the routes were built for)."""
    return routes.analyze(schedule)
