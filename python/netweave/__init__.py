"""netweave — an interconnect lab for HPC cluster networks.

The package follows the pipeline ``topology → routing → traffic (and mapping) → analysis |
flowsim | flitsim → report``::

    import netweave
    topo = netweave.topology.latin_square_fat_tree(3)
    routes = topo.route("shortest-path")
    sched = netweave.traffic.alltoall(topo.num_hosts, 1 << 20)
    report = routes.analyze(sched)
    report["throughput_ratio"]

The engine is Rust (``netweave._core``); this package adds file handling, networkx
conversion, reports and the ``netweave`` command line.
"""

from netweave._core import NetweaveError, ProjectivePlane, RoutingTable, Schedule, TaskGraph, Topology
from netweave import analysis, flitsim, flowsim, mapping, routing, topology, traffic

__version__ = "0.1.0"

__all__ = [
    "NetweaveError",
    "ProjectivePlane",
    "RoutingTable",
    "Schedule",
    "TaskGraph",
    "Topology",
    "analysis",
    "flitsim",
    "flowsim",
    "mapping",
    "routing",
    "topology",
    "traffic",
]
