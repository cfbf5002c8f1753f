"""Python API of the topology layer: generators, networkx both ways, files, parser fuzzing."""

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import netweave
from netweave import topology

FORMATS = ("json", "ibnet", "anynet", "dot")


def _structure(t):
    """Kinds, labels, radix and the sorted port-level wiring: what every format must keep."""
    nodes = [(t.is_host(n), t.label(n), t.radix(n)) for n in range(t.num_nodes)]
    links = sorted(tuple(sorted([(a, pa), (b, pb)])) for a, pa, b, pb in t.link_array().tolist())
    return nodes, links


@pytest.mark.parametrize("q", [2, 3, 4, 5, 7, 8, 9, 11, 13, 16, 17])
def test_lsft_counts_for_prime_powers(q):
    t = topology.latin_square_fat_tree(q)
    servers = (q + 1) * (q * q + q + 1)
    assert t.num_hosts == servers
    assert topology.latin_square_fat_tree(q, two_sided=True).num_hosts == 2 * servers
    s = t.stats()
    # Leaves: q+1 servers and q+1 spines; spines use one side, q+1 leaves.
    assert (s["min_switch_degree"], s["max_switch_degree"]) == (q + 1, 2 * (q + 1))


@pytest.mark.parametrize("q", [2, 3, 4, 5, 7, 8, 9, 11, 13, 16, 17])
def test_projective_plane_axioms_and_closed_form(q):
    plane = topology.ProjectivePlane(q)
    assert plane.check_axioms() is None
    n = plane.num_points
    assert n == q * q + q + 1
    for a in range(0, n, max(1, n // 7)):
        for b in range(0, n, max(1, n // 5)):
            if a != b:
                line = plane.line_through(a, b)
                assert a in plane.points_of_line(line) and b in plane.points_of_line(line)


@pytest.mark.parametrize("q", [6, 10, 12, 1, 0])
def test_orders_without_a_plane_are_refused(q):
    with pytest.raises(netweave.NetweaveError):
        topology.ProjectivePlane(q)
    with pytest.raises(netweave.NetweaveError):
        topology.latin_square_fat_tree(q)


@pytest.mark.parametrize(
    "make",
    [
        lambda: topology.latin_square_fat_tree(3),
        lambda: topology.torus([3, 4], hosts_per_router=2),
        lambda: topology.fat_tree(3, levels=3),
        lambda: topology.dragonfly(2, 1, 1),
        lambda: topology.multi_cluster("a:3,b:2:10"),
    ],
)
def test_networkx_round_trip_keeps_everything(make):
    t = make()
    g = topology.to_networkx(t)
    assert isinstance(g, nx.MultiGraph)
    assert g.number_of_nodes() == t.num_nodes and g.number_of_edges() == t.num_links
    back = topology.from_networkx(g)
    assert _structure(back) == _structure(t)
    assert back.link_specs().tolist() == t.link_specs().tolist()
    assert back.stats() == t.stats()


def test_from_networkx_fills_in_missing_ports_and_kinds():
    g = nx.cycle_graph(5)
    for i in range(5):
        g.add_node(f"h{i}", kind="host")
        g.add_edge(i, f"h{i}")
    t = topology.from_networkx(g)
    s = t.stats()
    assert (s["hosts"], s["switches"], s["diameter"]) == (5, 5, 2)


@pytest.mark.parametrize("fmt", FORMATS)
def test_files_round_trip(tmp_path, fmt):
    t = topology.torus([3, 3], hosts_per_router=2)
    path = topology.save(t, tmp_path / f"t.{ {'ibnet': 'net'}.get(fmt, fmt) }")
    back = topology.load(path)
    if fmt == "anynet":  # anynet keeps the graph, not port numbers or labels
        assert back.stats() == t.stats()
    else:
        assert _structure(back) == _structure(t)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dims=st.lists(st.integers(1, 6), min_size=1, max_size=3), hosts=st.integers(0, 3))
def test_mesh_and_torus_counts_match_formulas(dims, hosts):
    routers = 1
    for d in dims:
        routers *= d
    mesh = topology.mesh(dims, hosts_per_router=hosts)
    torus = topology.torus(dims, hosts_per_router=hosts)
    mesh_links = sum((d - 1) * routers // d for d in dims)
    torus_links = routers * sum(1 for d in dims if d >= 2)
    assert (mesh.num_switches, mesh.num_hosts) == (routers, routers * hosts)
    assert mesh.num_links == mesh_links + routers * hosts
    assert torus.num_links == torus_links + routers * hosts


@settings(max_examples=300, deadline=None)
@given(fmt=st.sampled_from(FORMATS), text=st.text(max_size=400))
def test_readers_never_crash_on_arbitrary_text(fmt, text):
    try:
        netweave._core.read_topology(text, fmt)
    except netweave.NetweaveError as e:
        assert "\n" not in str(e)


@settings(max_examples=100, deadline=None)
@given(fmt=st.sampled_from(FORMATS), cut=st.floats(0, 1))
def test_truncated_files_are_rejected_or_read(fmt, cut):
    text = topology.torus([3, 3], hosts_per_router=1).to_text(fmt)
    try:
        netweave._core.read_topology(text[: int(len(text) * cut)], fmt)
    except netweave.NetweaveError as e:
        assert "\n" not in str(e)
