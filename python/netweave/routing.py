"""Routing: forwarding tables ``out_port[switch][dest host]`` for a topology.

>>> import netweave
>>> topo = netweave.topology.mesh([3, 3])
>>> routes = netweave.routing.route(topo, "shortest-path")
>>> routes.ports().shape
(9, 9)
"""

from netweave import _core

#: Engine names `route` accepts.
ENGINES = ("shortest-path",)


def route(topology: _core.Topology, engine: str = "shortest-path") -> _core.RoutingTable:
    """Compute forwarding tables for `topology` with the named engine."""
    return _core.route(topology, engine)
