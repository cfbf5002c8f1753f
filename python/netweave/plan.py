"""The main job: run the whole pipeline on one topology and summarise it.

``plan`` routes the fabric, builds the job's all-to-all, counts exact per-phase link loads and
returns one dict that :mod:`netweave.report` renders as text, JSON or files.
"""

from __future__ import annotations

from typing import Any

from netweave import routing, topology, traffic
from netweave._core import Topology

#: Bytes each rank sends to each other rank in the default job (1 MiB).
DEFAULT_BYTES = 1 << 20


def plan(topo: Topology | None = None, bytes_per_pair: int = DEFAULT_BYTES, engine: str | None = None) -> dict[str, Any]:
    """Route `topo` (default: the built-in LSFT of order 3) with a deadlock-free engine suited
    to it (or `engine`), run a shift all-to-all over all of its hosts and report link congestion
    and paper 000's throughput ratio."""
    topo = topo if topo is not None else topology.example_cluster()
    routes = routing.route(topo, engine or routing.default_engine(topo))
    proof = routes.check()
    schedule = traffic.alltoall(topo.num_hosts, bytes_per_pair, "shift")
    loads = routes.analyze(schedule)
    worst = max(range(len(loads["phases"])), key=lambda p: loads["phases"][p]["max_load"])
    return {
        "topology": topology.info(topo),
        "routing": {"engine": routes.engine, "vcs": proof["vcs_used"], "deadlock_free": proof["deadlock_free"]},
        "job": {
            "collective": "alltoall",
            "ranks": schedule.num_ranks,
            "bytes_per_pair": bytes_per_pair,
        },
        "schedules": [
            {
                "name": "shift",
                "phases": schedule.num_phases,
                "messages": schedule.num_messages,
                "max_congestion": loads["max_congestion"],
                "throughput_ratio": loads["throughput_ratio"],
                "flows": loads["flows"],
                "max_channel_bytes": loads["max_channel_bytes"],
                "contention_free": loads["max_congestion"] <= 1,
                "worst_phase": worst,
                "phase_loads": loads["phases"],
            }
        ],
    }
