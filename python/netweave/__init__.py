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
conversion, reports, real runs and the ``netweave`` command line, in subpackages by role:

- ``netweave.stages`` — one thin module per pipeline stage (``topology``, ``routing``,
  ``traffic``, ``mapping``, ``analysis``, ``flowsim``, ``flitsim``); each is also
  ``netweave.<stage>``;
- ``netweave.plan`` — the planner that runs the stages for a job (``plan.verify``: on the
  emulated fabric);
- ``netweave.report`` — text, JSON and CSV reports (``report.page``: the HTML page,
  ``report.drawing``: fabric drawings);
- ``netweave.run`` — real runs: the TCP ``executor``, ``mpi``, the ``emulate`` cluster,
  ``calibration`` of the flow model, ``processes`` (process groups that never outlive netweave);
- ``netweave.support`` — atomic ``files`` and the ``parallel`` process farm;
- ``netweave.cli`` and ``netweave.reproduce`` — the command line and the papers' reproductions.
"""

import os

# numpy serves only small array arithmetic here; its BLAS thread pool, idling in a spin beside
# the simulators' own threads (and MPI ranks), would take their cores. Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# The kinds of NetweaveError a caller can tell apart (all are NetweaveError, itself a ValueError).
from netweave._core import (
    FileError,
    InfeasibleError,
    NetweaveError,
    ParameterError,
    ProjectivePlane,
    ResourceLimitError,
    RoutingTable,
    Schedule,
    TaskGraph,
    Topology,
)

#: ``netweave.Error`` is the base of every error netweave raises for bad input or limits.
Error = NetweaveError
import sys as _sys  # noqa: E402

from netweave.stages import analysis, flitsim, flowsim, mapping, routing, topology, traffic  # noqa: E402

# Each stage is public as netweave.<stage> too, for `import netweave.topology` and
# `from netweave.routing import …`: the same module object, registered under its short name.
for _stage in (analysis, flitsim, flowsim, mapping, routing, topology, traffic):
    _sys.modules[f"netweave.{_stage.__name__.rsplit('.', 1)[1]}"] = _stage

__version__ = "0.1.0"

__all__ = [
    "Error",
    "FileError",
    "InfeasibleError",
    "NetweaveError",
    "ParameterError",
    "ProjectivePlane",
    "ResourceLimitError",
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
