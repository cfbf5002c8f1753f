"""The typed topology structure: what generators state, what files keep, what Python asks."""

import json

import pytest

from netweave import _core, flowsim, mapping, routing, topology, traffic


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: topology.torus([4, 3], 2),
         {"kind": "lattice", "shape": "torus", "dims": [4, 3], "hosts_per_router": 2}),
        (lambda: topology.mesh([5], 1), {"kind": "lattice", "shape": "mesh", "dims": [5], "hosts_per_router": 1}),
        (lambda: topology.latin_square_fat_tree(3, True, True),
         {"kind": "lsft", "order": 3, "two_sided": True, "reduced": True}),
        (lambda: topology.random_regular(8, 3, 1, 1), {"kind": "generic"}),
    ],
)
def test_generators_state_their_structure(make, expected):
    assert make().structure == expected


def test_structure_survives_a_file_and_old_files_derive_it(tmp_path):
    t = topology.torus([3, 3], 1)
    path = topology.save(t, tmp_path / "t.json")
    data = json.loads(path.read_text())
    assert data["structure"] == t.structure
    assert topology.load(path).structure == t.structure
    # A file written before the field existed: the structure comes from family and params.
    del data["structure"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert topology.load(old).structure == t.structure
    # The stated structure wins over the family written beside it.
    data["structure"] = {"kind": "lattice", "shape": "mesh", "dims": [3, 3], "hosts_per_router": 1}
    old.write_text(json.dumps(data))
    assert topology.load(old).structure["shape"] == "mesh"


def test_python_asks_the_structure():
    assert routing.default_engine(topology.torus([4, 4])) == "dor"
    assert routing.default_engine(topology.latin_square_fat_tree(3)) == "lsft"
    assert routing.default_engine(topology.fat_tree(3, 2, False)) == "dmodk"
    assert routing.default_engine(topology.random_regular(8, 3, 1, 1)) == "nue"
    t = topology.torus([4, 2], 1)
    assert traffic.grid_shape(t, list(range(8))) == [4, 2]
    assert traffic.grid_shape(topology.torus([4, 2], 2), list(range(16))) is None


def test_name_lists_come_from_the_core():
    # Every listed name is accepted by the core, and a made-up one is not.
    t = topology.mesh([4], 1)
    for policy in routing.SELECTION_POLICIES:
        routing.route(t, "minhop", select=policy)
    with pytest.raises(_core.NetweaveError):
        routing.route(t, "minhop", select="sideways")
    routes = routing.route(t, "minhop")
    sched = traffic.alltoall(4, 1024)
    for executor in flowsim.EXECUTORS:
        flowsim.simulate(routes, sched, executor=executor)
    net = mapping.network(t, "minhop")
    pattern = mapping.Pattern.alltoall(4, 64)
    for name in mapping.BASELINES:
        assert sorted(mapping.baseline(net, pattern, name)) == [0, 1, 2, 3]
    for fmt in topology.FORMATS:
        assert _core.read_topology(t.to_text(fmt), fmt).num_hosts == 4
