"""Drawings of a fabric for the plan's page: where each switch (and host) sits, which links
are drawn, and how loads colour them — as inline SVG, with no plotting library.

The layout follows the topology's structure (:attr:`Topology.structure`):

- ``grid`` for lattices (mesh, torus, hypercube): routers at their coordinates; a fabric of
  three or more dimensions is drawn as tiled 2-D slices, and the links between slices colour
  the routers instead of being drawn; torus wrap-around links are arcs;
- ``layered`` for fat-trees, trees and any fabric with switches that carry no hosts: leaves at
  the bottom, each switch one row above its nearest host-carrying switch, ordered by the mean
  position of the switches below; hosts are drawn under their leaf while there are few;
- ``circular`` otherwise (dragonflies keep each group together, switches being numbered by
  group).

Past :data:`LINK_LIMIT` drawn links the drawing aggregates: switches are grouped into blocks
and the links between two blocks become one bundle coloured by its busiest link; the drawing's
``notes`` say so.

>>> import netweave
>>> d = layout(netweave.stages.topology.mesh([4, 4], 1))
>>> d.kind, len(d.nodes), len(d.segments)
('grid', 16, 24)
>>> "<svg" in svg(d, "fabric")
True
"""

from __future__ import annotations

import html
import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from netweave._core import Topology

#: Most links a drawing shows one by one; beyond it, links between blocks of switches are bundled.
LINK_LIMIT = 10_000
#: Most hosts drawn as their own dots (layered drawings only).
HOST_LIMIT = 512
#: Width of every drawing's coordinate space; the page scales it to the window.
WIDTH = 1000.0


@dataclass
class Node:
    """A dot: one switch, one host, or a block of switches when aggregated."""

    x: float
    y: float
    r: float
    label: str
    is_host: bool = False
    #: Carries (or is) a host of the job.
    in_job: bool = False
    #: Topology node ids this dot stands for.
    members: list[int] = field(default_factory=list)
    #: Channels drawn as this dot's colour rather than as lines (links between lattice slices).
    folded: list[int] = field(default_factory=list)


@dataclass
class Segment:
    """A drawn link (or bundle of links): its ends, an arc's control point, and its channels."""

    a: int
    b: int
    channels: list[int]
    #: Control point of a quadratic arc (torus wrap-around links); None for a straight line.
    bend: tuple[float, float] | None = None


@dataclass
class Drawing:
    """A laid-out fabric: dots, segments, the coordinate space's height, and what to tell the
    reader about it (aggregation, folded links)."""

    kind: str
    nodes: list[Node]
    segments: list[Segment]
    height: float
    notes: list[str] = field(default_factory=list)
    #: Dot of each topology node: a switch's own dot (or its block's), a host's own dot when
    #: hosts are drawn, else its switch's.
    dot_of: dict[int, int] = field(default_factory=dict)

    def loads(self, channel_flows: Sequence[int]) -> tuple[list[int], list[int]]:
        """Per segment and per dot, the busiest of its channels in `channel_flows` (indexed by
        channel id): what a heat map colours."""
        seg = [max((channel_flows[c] for c in s.channels), default=0) for s in self.segments]
        dot = [max((channel_flows[c] for c in n.folded), default=0) for n in self.nodes]
        return seg, dot


def layout(topo: Topology, job_hosts: Sequence[int] | None = None) -> Drawing:
    """Lay `topo` out by its structure; `job_hosts` (host indices, default all) are marked."""
    nodes = _NodeLists(topo, job_hosts)
    kind = topo.structure["kind"]
    if kind == "lattice":
        drawing = _grid(nodes, [int(d) for d in topo.structure["dims"]])
    elif kind in ("fat_tree", "lsft", "tree") or (kind != "dragonfly" and nodes.has_bare_switches()):
        drawing = _layered(nodes)
    else:
        drawing = _circular(nodes)
    for i, n in enumerate(drawing.nodes):
        for m in n.members:
            drawing.dot_of[m] = i
    for h in nodes.hosts:
        if h not in drawing.dot_of and h in nodes.host_switch:
            drawing.dot_of[h] = drawing.dot_of[nodes.host_switch[h]]
    return drawing


class _NodeLists:
    """The topology's nodes and links as plain lists, read once."""

    def __init__(self, topo: Topology, job_hosts: Sequence[int] | None):
        self.topo = topo
        self.hosts = [int(h) for h in topo.hosts]
        self.switches = [int(s) for s in topo.switches]
        self.links = [(int(a), int(b)) for a, _, b, _ in topo.link_array()]
        num_nodes = topo.num_nodes
        self.is_host = [False] * num_nodes
        for h in self.hosts:
            self.is_host[h] = True
        self.host_switch: dict[int, int] = {}
        self.switch_links: list[int] = []  # link ids between two switches
        self.neighbours: dict[int, list[int]] = defaultdict(list)
        for link, (a, b) in enumerate(self.links):
            if self.is_host[a] and not self.is_host[b]:
                self.host_switch[a] = b
            elif self.is_host[b] and not self.is_host[a]:
                self.host_switch[b] = a
            elif not self.is_host[a] and not self.is_host[b]:
                self.switch_links.append(link)
                self.neighbours[a].append(b)
                self.neighbours[b].append(a)
        job = range(len(self.hosts)) if job_hosts is None else job_hosts
        self.job_nodes = {self.hosts[int(i)] for i in job}
        self.job_switches = {self.host_switch[h] for h in self.job_nodes if h in self.host_switch}
        self.all_in_job = len(self.job_nodes) == len(self.hosts)

    def has_bare_switches(self) -> bool:
        return len(set(self.host_switch.values())) < len(self.switches)

    def switch_node(self, s: int, x: float, y: float, r: float) -> Node:
        return Node(x, y, r, self.topo.label(s), in_job=s in self.job_switches, members=[s])


def _radius(spacing: float) -> float:
    return max(0.8, min(8.0, 0.3 * spacing))


def _lattice_coords(topo: Topology, switch: int) -> list[int]:
    """A lattice switch's coordinates (a grid drawing is made only of lattices)."""
    coords = topo.coords(switch)
    if coords is None:
        raise ValueError(f"switch {switch} has no lattice coordinates")
    return [int(c) for c in coords]


def _grid(f: _NodeLists, dims: list[int]) -> Drawing:
    dx = dims[0]
    dy = dims[1] if len(dims) > 1 else 1
    tiles = math.prod(dims[2:])
    # A long ring or line wraps into rows of tiles too; a square-ish arrangement of tiles.
    tile_cols = max(1, math.ceil(math.sqrt(tiles * dy / dx)))
    tile_cols = min(tile_cols, tiles)
    tile_rows = math.ceil(tiles / tile_cols)
    cell = WIDTH / (tile_cols * (dx + 1))
    coords = {s: _lattice_coords(f.topo, s) for s in f.switches}

    def place(c: list[int]) -> tuple[float, float]:
        tile = 0
        for i in range(len(dims) - 1, 1, -1):
            tile = tile * dims[i] + c[i]
        tx, ty = tile % tile_cols, tile // tile_cols
        y = c[1] if len(c) > 1 else 0
        return (tx * (dx + 1) + c[0] + 1) * cell, (ty * (dy + 1) + y + 1) * cell

    def block_key(s: int, block: int) -> tuple:
        c = coords[s]
        return (tuple(c[2:]), c[0] // block, (c[1] if len(c) > 1 else 0) // block)

    def drawn(a: int, b: int) -> bool:  # same slice: differs only along the first two dimensions
        return coords[a][2:] == coords[b][2:]

    height = tile_rows * (dy + 1) * cell
    drawing = _bundle(f, lambda s: place(coords[s]), block_key, drawn, cell, height, "grid")
    if not drawing.notes:
        wrap = f.topo.structure.get("shape") == "torus"
        for seg in drawing.segments:
            a, b = drawing.nodes[seg.a], drawing.nodes[seg.b]
            if wrap and math.hypot(a.x - b.x, a.y - b.y) > 1.5 * cell:
                seg.bend = _arc(a, b, cell)
    if len(dims) > 2:
        drawing.notes.append(f"{len(dims)}-D lattice drawn as {tiles} slices of {dx}×{dy}; links between slices are "
                             "not drawn: each router's fill shows the busiest of them")
    return drawing


def _arc(a: Node, b: Node, cell: float) -> tuple[float, float]:
    """Control point bulging a wrap-around link out of its row or column."""
    mx, my = (a.x + b.x) / 2, (a.y + b.y) / 2
    if abs(a.y - b.y) < 1e-9:
        return mx, my - 0.8 * cell
    return mx - 0.8 * cell, my


def _layered(f: _NodeLists) -> Drawing:
    leaves = sorted(set(f.host_switch.values()))
    level = dict.fromkeys(leaves, 0)
    frontier = list(leaves)
    while frontier:  # breadth-first from the leaves: a switch's row is its distance from a host
        nxt = []
        for s in frontier:
            for t in f.neighbours[s]:
                if t not in level:
                    level[t] = level[s] + 1
                    nxt.append(t)
        frontier = nxt
    unreached = max(level.values(), default=0) + 1
    for s in f.switches:  # switches no host reaches sit on a row of their own, on top
        level.setdefault(s, unreached)
    rows: dict[int, list[int]] = defaultdict(list)
    for s in f.switches:
        rows[level[s]].append(s)
    order: dict[int, float] = {}
    for lv in sorted(rows):
        members = rows[lv]
        if lv == 0:
            members.sort()
        else:  # by the mean position of the neighbours one row below, to keep lines short
            below = {s: [order[t] for t in f.neighbours[s] if level.get(t) == lv - 1] for s in members}
            members.sort(key=lambda s: (sum(below[s]) / len(below[s]) if below[s] else 0.0, s))
        for i, s in enumerate(members):
            order[s] = (i + 0.5) / len(members)
    top = max(rows)
    show_hosts = len(f.hosts) <= HOST_LIMIT
    row_gap = 80.0 if top < 6 else 480.0 / top
    host_row = row_gap * 0.8 if show_hosts else 0.0
    height = 40 + top * row_gap + host_row + 40
    widest = max(len(m) for m in rows.values())
    spacing = WIDTH / widest

    def place(s: int) -> tuple[float, float]:
        return order[s] * WIDTH, 40 + (top - level[s]) * row_gap

    def block_key(s: int, block: int) -> tuple:
        return (level[s], int(order[s] * len(rows[level[s]])) // block)

    drawing = _bundle(f, place, block_key, lambda a, b: True, spacing, height, "layered")
    if show_hosts and not drawing.notes:
        _add_hosts(f, drawing, 40 + top * row_gap + host_row)
    elif not show_hosts:
        drawing.notes.append(f"{len(f.hosts):,} hosts are not drawn one by one (more than {HOST_LIMIT}); "
                             "leaves carrying hosts of the job are outlined")
    return drawing


def _add_hosts(f: _NodeLists, drawing: Drawing, y: float) -> None:
    """One dot per host in a row under the leaves, each host under its own leaf."""
    index = {n.members[0]: i for i, n in enumerate(drawing.nodes)}
    by_leaf: dict[int, list[int]] = defaultdict(list)
    for h in f.hosts:
        if h in f.host_switch:
            by_leaf[f.host_switch[h]].append(h)
    hosts = sorted(f.hosts, key=lambda h: (drawing.nodes[index[f.host_switch[h]]].x if h in f.host_switch else 0, h))
    spacing = WIDTH / max(1, len(hosts))
    host_link = {}
    for link, (a, b) in enumerate(f.links):
        if f.is_host[a] != f.is_host[b]:
            host_link[a if f.is_host[a] else b] = link
    for i, h in enumerate(hosts):
        drawing.nodes.append(Node((i + 0.5) * spacing, y, _radius(spacing), f.topo.label(h), is_host=True,
                                  in_job=h in f.job_nodes, members=[h]))
        if h in host_link:
            link = host_link[h]
            drawing.segments.append(Segment(index[f.host_switch[h]], len(drawing.nodes) - 1, [2 * link, 2 * link + 1]))


def _circular(f: _NodeLists) -> Drawing:
    n = len(f.switches)
    radius = WIDTH * 0.42
    centre = WIDTH / 2
    position = {s: i for i, s in enumerate(sorted(f.switches))}

    def place(s: int) -> tuple[float, float]:
        angle = 2 * math.pi * position[s] / n - math.pi / 2
        return centre + radius * math.cos(angle), centre + radius * math.sin(angle)

    spacing = 2 * math.pi * radius / max(1, n)
    return _bundle(f, place, lambda s, block: (position[s] // block,), lambda a, b: True, spacing, WIDTH, "circular")


def _bundle(f: _NodeLists, place, block_key, drawn, spacing: float, height: float, kind: str) -> Drawing:
    """Dots and segments for the switch graph: one per switch and link while the drawing has
    at most LINK_LIMIT links, else one per block of switches (`block_key(switch, block)`,
    blocks growing until the bundles fit). Links `drawn(a, b)` rejects colour their ends."""
    drawable = [link for link in f.switch_links if drawn(*f.links[link])]
    block = 1
    while True:
        key = {s: block_key(s, block) for s in f.switches}
        pairs = {frozenset((key[f.links[link][0]], key[f.links[link][1]])) for link in drawable} if block > 1 else drawable
        if len(pairs) <= LINK_LIMIT:
            break
        block *= 2
    groups: dict[tuple, list[int]] = defaultdict(list)
    for s in f.switches:
        groups[key[s]].append(s)
    nodes: list[Node] = []
    index: dict[tuple, int] = {}
    for k, members in groups.items():
        xs, ys = zip(*(place(s) for s in members))
        x, y = sum(xs) / len(xs), sum(ys) / len(ys)
        if len(members) == 1:
            node = f.switch_node(members[0], x, y, _radius(spacing))
        else:
            node = Node(x, y, _radius(spacing * block), f"{len(members)} switches", members=members,
                        in_job=any(s in f.job_switches for s in members))
        index[k] = len(nodes)
        nodes.append(node)
    segments: dict[tuple[int, int], Segment] = {}
    for link, (a, b) in enumerate(f.links):
        if f.is_host[a] or f.is_host[b]:
            continue
        ia, ib = index[key[a]], index[key[b]]
        if not drawn(a, b) or ia == ib:
            nodes[ia].folded += [2 * link, 2 * link + 1]
            if ib != ia:
                nodes[ib].folded += [2 * link, 2 * link + 1]
            continue
        pair = (min(ia, ib), max(ia, ib))
        if pair not in segments:
            segments[pair] = Segment(pair[0], pair[1], [])
        segments[pair].channels += [2 * link, 2 * link + 1]
    drawing = Drawing(kind, nodes, list(segments.values()), height)
    if block > 1:
        drawing.notes.append(f"{len(drawable):,} links are too many to draw one by one: switches are grouped in "
                             f"blocks ({len(nodes):,} dots), each line is a bundle coloured by its busiest link")
    return drawing


def heat_colour(load: int, top: int) -> str:
    """Colour of a link carrying `load` flows when the busiest carries `top`: grey when idle,
    green for one flow, through yellow to red at `top`."""
    if load <= 0:
        return "#d0d0d0"
    if top <= 1:
        return "#1a9850"
    t = (load - 1) / (top - 1)
    stops = ((0.0, (26, 152, 80)), (0.5, (254, 224, 47)), (1.0, (215, 25, 28)))
    for (t0, c0), (t1, c1) in itertools.pairwise(stops):
        if t <= t1:
            u = (t - t0) / (t1 - t0)
            return "#" + "".join(f"{round(a + (b - a) * u):02x}" for a, b in zip(c0, c1))
    return "#d7191c"


def rank_colour(value: float) -> str:
    """A hue for a rank's position `value` in [0, 1): neighbouring ranks get neighbouring hues."""
    hue = 300 * min(max(value, 0.0), 1.0)
    return f"hsl({hue:.0f},75%,50%)"


def svg(drawing: Drawing, element_id: str, segment_loads: Sequence[int] | None = None,
        node_loads: Sequence[int] | None = None, top: int = 1,
        node_colours: Sequence[str | None] | None = None, title: str = "") -> str:
    """The drawing as an inline ``<svg id=element_id>``: plain grey links, or a heat map when
    `segment_loads` are given (`node_loads` colouring dots by their folded links), or dots
    coloured by `node_colours`. Segments and dots carry ``data-i`` so a script can recolour them."""
    width = 1.0 if len(drawing.segments) > 2000 else 1.6
    heat = segment_loads is not None
    parts = [f'<svg id="{element_id}" class="fabric" viewBox="0 0 {WIDTH:.0f} {drawing.height:.0f}" '
             f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{html.escape(title or element_id)}">']
    parts.append(f'<g class="links" stroke-width="{width}" fill="none">')
    for i, s in enumerate(drawing.segments):
        a, b = drawing.nodes[s.a], drawing.nodes[s.b]
        colour = heat_colour(segment_loads[i], top) if segment_loads is not None else "#9a9a9a"
        if s.bend is None:
            parts.append(f'<line data-i="{i}" x1="{a.x:.1f}" y1="{a.y:.1f}" x2="{b.x:.1f}" y2="{b.y:.1f}" '
                         f'stroke="{colour}"/>')
        else:
            parts.append(f'<path data-i="{i}" d="M{a.x:.1f} {a.y:.1f}Q{s.bend[0]:.1f} {s.bend[1]:.1f} {b.x:.1f} '
                         f'{b.y:.1f}" stroke="{colour}"/>')
    parts.append("</g><g class=\"nodes\">")
    for i, n in enumerate(drawing.nodes):
        if node_colours is not None and node_colours[i] is not None:
            fill = node_colours[i]
        elif heat and n.folded:
            fill = heat_colour(node_loads[i] if node_loads is not None else 0, top)
        elif n.is_host:
            fill = "#222" if n.in_job else "#fff"
        else:
            fill = "#4a6fa5"
        stroke = ' stroke="#000" stroke-width="1"' if (n.in_job and not n.is_host) else ' stroke="#555" stroke-width="0.5"'
        parts.append(f'<circle data-i="{i}" cx="{n.x:.1f}" cy="{n.y:.1f}" r="{n.r:.1f}" fill="{fill}"{stroke}>'
                     f"<title>{html.escape(n.label)}</title></circle>")
    parts.append("</g></svg>")
    return "".join(parts)
