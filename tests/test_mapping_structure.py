"""Rank placement from the traffic alone: structure discovery on shuffled stencils.

Every ideal here is a placement the test constructs from the stencil's own coordinates (the
permutation that shuffled the ranks is known to the test, never to the mapper), scored by the
mapper's exact cost function.
"""

import json

import numpy as np
import pytest

import netweave
from conftest import run_cli
from netweave import mapping


def stencil_coords(dims):
    """Coordinates of every rank of a `stencil:AxBxC` pattern (dimension 0 fastest)."""
    n = int(np.prod(dims))
    rest = np.arange(n)
    coords = []
    for k in dims:
        coords.append(rest % k)
        rest = rest // k
    return np.stack(coords, axis=1)


def shuffled(dims, periodic, seed, drop=0.0, add=0.0):
    """The stencil on `dims` with its ranks renumbered by a seeded permutation, `drop` of its
    pairs removed and `add` × pairs random long-range pairs added; returns (pattern, perm)
    with new rank = perm[original rank]."""
    spec = "stencil:" + "x".join(map(str, dims)) + ":4096" + ("" if periodic else ":open")
    src, dst, nbytes = mapping.load_pattern(spec).arrays()
    n = int(np.prod(dims))
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n).astype(np.uint32)
    keep = rng.random(len(src)) >= drop
    src, dst, nbytes = perm[src[keep]], perm[dst[keep]], nbytes[keep]
    extra = int(add * len(keep))
    es, ed = rng.integers(0, n, extra), rng.integers(0, n, extra)
    ok = es != ed
    src = np.concatenate([src, es[ok].astype(np.uint32)])
    dst = np.concatenate([dst, ed[ok].astype(np.uint32)])
    nbytes = np.concatenate([nbytes, np.full(int(ok.sum()), 4096, dtype=np.uint64)])
    return mapping.Pattern.from_arrays(n, src, dst, nbytes, "shuffled"), perm


def host_of_coords(coords, torus):
    """Host id of the router at `coords` (one host per router, dimension 0 fastest)."""
    strides = np.cumprod([1] + list(torus[:-1]))
    return (coords * strides).sum(axis=1).astype(np.uint32)


def same_shape_ideal(dims, perm):
    """Every stencil neighbour on a neighbouring router: rank perm[r] where r's coordinates say."""
    hor = np.empty(len(perm), dtype=np.uint32)
    hor[perm] = host_of_coords(stencil_coords(dims), dims)
    return hor


def folded_8x8x64_ideal(perm):
    """8×8×64 (periodic) on a 16³ torus: the 64-ring runs a Hamiltonian cycle of Z (16) times a
    2×2 block of X and Y, so its pairs are one hop apart; the two 8-rings take every other X
    (resp. Y), two hops per pair. Mean 5/3 hops per pair."""
    c = stencil_coords([8, 8, 64])
    j, z = c[:, 2] // 16, c[:, 2] % 16
    z = np.where(j % 2 == 0, z, 15 - z)
    block = np.array([(0, 0), (1, 0), (1, 1), (0, 1)])[j]
    xyz = np.stack([2 * c[:, 0] + block[:, 0], 2 * c[:, 1] + block[:, 1], z], axis=1)
    hor = np.empty(len(perm), dtype=np.uint32)
    hor[perm] = host_of_coords(xyz, [16, 16, 16])
    return hor


def placed_hop_bytes(net, pattern):
    """What `netweave map` starts from (the best of BISEM and the baselines), in hop-bytes."""
    start = mapping.start_placement(net, pattern, "best", 1, "hop-bytes")
    return mapping.cost(net, pattern, start)["hop_bytes"]


CASES = [
    # (stencil dims, periodic, network, topology dims)
    ([16, 16], True, "torus", [16, 16]),
    ([12, 10], False, "mesh", [12, 10]),
    ([8, 8, 8], True, "torus", [8, 8, 8]),
    ([6, 7, 5], False, "mesh", [6, 7, 5]),
]


@pytest.mark.parametrize("dims,periodic,kind,topo_dims", CASES)
def test_shuffled_stencils_are_placed_as_well_as_the_ideal(dims, periodic, kind, topo_dims):
    topo = getattr(netweave.topology, kind)(topo_dims, 1)
    net = mapping.network(topo, "dor")
    pattern, perm = shuffled(dims, periodic, seed=11)
    found = mapping.structure(pattern)
    assert found["kind"] == ("torus" if periodic else "mesh")
    assert sorted(found["dims"]) == sorted(dims)
    assert found["explained_edges"] == 1.0
    ideal = mapping.cost(net, pattern, same_shape_ideal(dims, perm))["hop_bytes"]
    # Every pair one hop apart: the ideal is the pattern's bytes.
    assert ideal == int(pattern.arrays()[2].sum())
    assert placed_hop_bytes(net, pattern) <= 1.1 * ideal


def test_a_stencil_of_another_shape_is_folded_onto_the_torus():
    net = mapping.network(netweave.topology.torus([16, 16, 16], 1), "dor")
    pattern, perm = shuffled([8, 8, 64], True, seed=5)
    assert mapping.structure(pattern)["description"] == "torus 64×8×8, 100 % of edges explained"
    reference = mapping.cost(net, pattern, folded_8x8x64_ideal(perm))["hop_bytes"]
    assert reference == pytest.approx(5 / 3 * int(pattern.arrays()[2].sum()))
    assert placed_hop_bytes(net, pattern) <= 1.1 * reference


@pytest.mark.parametrize("dims,periodic,kind", [([8, 8, 8], True, "torus"), ([16, 16], True, "torus"),
                                                 ([6, 7, 5], False, "mesh")])
def test_noisy_stencils_still_land_near_the_ideal(dims, periodic, kind):
    topo = getattr(netweave.topology, kind)(dims, 1)
    net = mapping.network(topo, "dor")
    pattern, perm = shuffled(dims, periodic, seed=3, drop=0.05, add=0.01)
    found = mapping.structure(pattern)
    assert found["kind"] != "none" and found["explained_edges"] >= 0.95, found["description"]
    ideal = mapping.cost(net, pattern, same_shape_ideal(dims, perm))["hop_bytes"]
    assert placed_hop_bytes(net, pattern) <= 1.3 * ideal


def test_random_graphs_claim_no_structure_and_keep_the_metis_path():
    net = mapping.network(netweave.topology.torus([8, 8, 8], 1), "dor")
    pattern = mapping.load_pattern("random:512:6:4096:1")
    assert mapping.structure(pattern)["kind"] == "none"
    assert mapping.structure(mapping.load_pattern("bruck:512"))["description"] == "none"
    b = mapping.bisem(net, pattern, seed=1)
    assert b["grid"] is None  # cut by METIS, as before discovery existed


def test_trees_are_recognised():
    src = np.arange(1, 63, dtype=np.uint32)
    pattern = mapping.Pattern.from_arrays(63, (src - 1) // 2, src, np.full(62, 8, dtype=np.uint64), "tree")
    assert mapping.structure(pattern)["description"] == "tree"


def test_map_and_plan_report_the_structure(tmp_path):
    pattern, _ = shuffled([4, 4, 4], True, seed=2)
    path = mapping.save_pattern(pattern, tmp_path / "trace.csv")
    netweave.topology.save(netweave.topology.torus([4, 4, 4]), tmp_path / "torus.json")
    text = run_cli("map", str(tmp_path / "torus.json"), "dor", str(path), "--evals", "1000").stdout
    # A 4-ring is two links at right angles, so 4×4×4 is found as six dimensions of size 2.
    assert "structure: hypercube 2×2×2×2×2×2, 100 % of edges explained" in text
    as_json = json.loads(run_cli("map", str(tmp_path / "torus.json"), "dor", str(path), "--evals", "1000",
                                 "--json").stdout)
    assert as_json["structure"]["kind"] == "hypercube" and as_json["structure"]["explained_edges"] == 1.0
    plan = run_cli("plan", str(tmp_path / "torus.json"), "--bytes", "1024", "--pattern", str(path),
                   "--map-evals", "1000")
    assert "structure: hypercube" in plan.stdout
    plain = run_cli("map", str(tmp_path / "torus.json"), "dor", "random:64:3:64:1", "--evals", "1000").stdout
    assert "structure: none" in plain
