"""Topology: generators, files, metrics and networkx conversion.

Every generator returns a :class:`netweave.Topology` (built by the Rust core)::

    >>> from netweave import topology
    >>> t = topology.latin_square_fat_tree(3)
    >>> t.num_hosts, t.num_switches
    (52, 26)
    >>> topology.torus([4, 4], hosts_per_router=4).num_hosts
    64

Files: ``load``/``save`` pick the format from the extension (``.json``, ``.net``/``.ibnet``
for ibnetdiscover/ibsim, ``.anynet`` for BookSim, ``.dot``/``.gv`` for Graphviz).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netweave import _core
from netweave._core import ProjectivePlane, Topology
from netweave.support import files

if TYPE_CHECKING:  # networkx is imported only by the functions that use it
    import networkx as nx

latin_square_fat_tree = _core.latin_square_fat_tree
lsft = _core.latin_square_fat_tree
fat_tree = _core.fat_tree
k_ary_n_tree = _core.k_ary_n_tree
pgft = _core.pgft
cost_table = _core.cost_table
mesh = _core.mesh
torus = _core.torus
hypercube = _core.hypercube
hyperx = _core.hyperx
dragonfly = _core.dragonfly
random_regular = _core.random_regular
irregular = _core.irregular
switch_tree = _core.switch_tree
multi_cluster = _core.multi_cluster

#: File formats by name.
FORMATS: tuple[str, ...] = tuple(_core.topology_formats())

__all__ = [
    "FORMATS",
    "ProjectivePlane",
    "Topology",
    "cost_table",
    "dragonfly",
    "example_cluster",
    "fat_tree",
    "from_networkx",
    "hypercube",
    "hyperx",
    "info",
    "irregular",
    "k_ary_n_tree",
    "latin_square_fat_tree",
    "load",
    "lsft",
    "mesh",
    "multi_cluster",
    "parse_dims",
    "pgft",
    "random_regular",
    "save",
    "switch_tree",
    "to_networkx",
    "torus",
]


def example_cluster() -> Topology:
    """The built-in example: the Latin-square fat-tree of order 3 (52 servers, paper 000)."""
    return latin_square_fat_tree(3)


def parse_dims(text: str) -> list[int]:
    """Parse ``"16x16x16"`` (or ``"4,4"``) into ``[16, 16, 16]``; one-line error otherwise."""
    parts = text.replace(",", "x").lower().split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise _core.NetweaveError(f"dimensions must look like 4x4 or 16x16x16, got '{text}'") from None
    if any(d <= 0 for d in dims):
        raise _core.NetweaveError(f"every dimension must be at least 1, got '{text}'")
    if any(d >= 2**32 for d in dims):
        raise _core.NetweaveError(f"a dimension of '{text}' does not fit 32 bits")
    return dims


def load(path: str | Path, format: str | None = None) -> Topology:
    """Read a topology file; the format comes from the extension unless given."""
    path = Path(path)
    # Size-limited, and bad bytes named by offset: the file may be anything (/dev/zero included).
    with files.naming(path):
        fmt = format or _core.format_from_path(str(path))
        return _core.read_topology(_core.read_text_file(str(path)), fmt)


def save(topo: Topology, path: str | Path, format: str | None = None, lossy: bool = False) -> Path:
    """Write a topology file atomically (:mod:`netweave.support.files`); the format comes from the
    extension unless given.

    A format that cannot hold the topology's link values (ibnet has IB rates only and no
    latency; anynet and dot keep less) is refused with what would be lost, unless `lossy`."""
    path = Path(path)
    files.check_file(path)  # a directory in the way is named as such, before its extension is asked
    with files.naming(path):
        fmt = format or _core.format_from_path(str(path))
    text = topo.to_text(fmt)
    if not lossy:
        lost = lost_in(topo, text, fmt)
        if lost:
            raise _core.NetweaveError(f"{path}: the {fmt} format cannot hold {'; '.join(lost)} "
                                      "(write .json to keep them; `netweave topo convert --lossy` converts anyway)")
    return files.write_text(path, text)


def lost_in(topo: Topology, text: str, fmt: str) -> list[str]:
    """What `topo` written as `text` in format `fmt` no longer says when read back: node and
    link counts, link bandwidths and latencies, each as one phrase (empty: nothing lost)."""
    back = _core.read_topology(text, fmt)
    lost = []
    if (back.num_hosts, back.num_switches, back.num_links) != (topo.num_hosts, topo.num_switches, topo.num_links):
        lost.append(f"its shape ({topo.num_hosts} hosts, {topo.num_switches} switches, {topo.num_links} links "
                    f"read back as {back.num_hosts}, {back.num_switches}, {back.num_links})")
        return lost
    mine, theirs = topo.link_specs(), back.link_specs()
    for column, what, unit in ((0, "bandwidth", "Gbit/s"), (1, "latency", "ns")):
        before, after = sorted(mine[:, column].tolist()), sorted(theirs[:, column].tolist())
        if before != after:
            changed = sum(1 for a, b in zip(mine[:, column].tolist(), theirs[:, column].tolist()) if a != b)
            lost.append(f"the link {what} ({max(changed, 1)} of {topo.num_links} links: {_values(before)} {unit} "
                        f"read back as {_values(after)} {unit})")
    return lost


def _values(values: list[float]) -> str:
    """Distinct values, shortest form, a few at most: ``1, 10``."""
    distinct = sorted(set(values))
    shown = ", ".join(f"{v:g}" for v in distinct[:4])
    return shown + (f" and {len(distinct) - 4} more" if len(distinct) > 4 else "")


def info(topo: Topology) -> dict[str, Any]:
    """Name, family, parameters and structural metrics (`hosts`, `switches`, `links`,
    `diameter`, `average_distance`, degrees…) as one dict."""
    return {"name": topo.name, "family": topo.family, "params": topo.params, **topo.stats()}


def to_networkx(topo: Topology) -> nx.MultiGraph:
    """A ``networkx.MultiGraph`` with the node ids as nodes: node attributes ``kind``,
    ``label``, ``ports``, ``coords``; edge attributes ``link`` (the link id, also the edge key),
    ``ports`` (a dict node → port), ``bandwidth_gbps``, ``latency_ns``."""
    import networkx as nx

    g: nx.MultiGraph = nx.MultiGraph(name=topo.name, family=topo.family, params=topo.params)
    for node in range(topo.num_nodes):
        attrs: dict[str, Any] = {
            "kind": "host" if topo.is_host(node) else "switch",
            "label": topo.label(node),
            "ports": topo.radix(node),
        }
        coords = topo.coords(node)
        if coords is not None:
            attrs["coords"] = coords
        g.add_node(node, **attrs)
    for i, ((a, pa, b, pb), (bw, lat)) in enumerate(zip(topo.link_array().tolist(), topo.link_specs().tolist())):
        g.add_edge(a, b, key=i, link=i, ports={a: pa, b: pb}, bandwidth_gbps=bw, latency_ns=lat)
    return g


def from_networkx(g, default_bandwidth_gbps: float = 100.0, default_latency_ns: float = 100.0) -> Topology:
    """Build a topology from a networkx graph.

    Nodes need a ``kind`` of ``"host"`` or ``"switch"`` (default ``"switch"``); ``label``,
    ``ports`` and ``coords`` are optional. Edges may carry ``ports`` ({node: port}),
    ``bandwidth_gbps`` and ``latency_ns``; missing ports are assigned lowest-free first.
    """
    nodes = list(g.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    used: list[set[int]] = [set() for _ in nodes]
    # networkx iterates edges by adjacency; the `link` attribute restores netweave's link order.
    edges = sorted(g.edges(data=True), key=lambda e: e[2].get("link", float("inf")))
    for a, b, data in edges:
        for n in (a, b):
            port = (data.get("ports") or {}).get(n)
            if port is not None:
                used[index[n]].add(int(port))

    def next_free(i: int) -> int:
        p = 1
        while p in used[i]:
            p += 1
        used[i].add(p)
        return p

    links = []
    for a, b, data in edges:
        ports = data.get("ports") or {}
        pa = int(ports[a]) if a in ports else next_free(index[a])
        pb = int(ports[b]) if b in ports else next_free(index[b])
        links.append(
            {
                "a": [index[a], pa],
                "b": [index[b], pb],
                "bandwidth_gbps": float(data.get("bandwidth_gbps", default_bandwidth_gbps)),
                "latency_ns": float(data.get("latency_ns", default_latency_ns)),
            }
        )
    node_docs = []
    for i, n in enumerate(nodes):
        attrs = g.nodes[n]
        doc = {
            "kind": attrs.get("kind", "switch"),
            "label": str(attrs.get("label", n)),
            "ports": int(attrs.get("ports", max(used[i], default=0) or 1)),
        }
        if attrs.get("coords") is not None:
            doc["coords"] = [int(c) for c in attrs["coords"]]
        node_docs.append(doc)
    doc = {
        "format": "netweave-topology",
        "version": 1,
        "name": str(g.graph.get("name") or "networkx"),
        "family": str(g.graph.get("family", "networkx")),
        "params": g.graph.get("params", {}) or {},
        "nodes": node_docs,
        "links": links,
    }
    return _core.read_topology(json.dumps(doc), "json")
