"""Rank placement at scale: BISEM's invariants, geometric cuts for stencils, and `plan --pattern`."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netweave
from conftest import run_cli
from netweave import mapping


def _net(dims, torus=True, hosts=1):
    topo = netweave.topology.torus(dims, hosts) if torus else netweave.topology.mesh(dims, hosts)
    return mapping.MapNetwork(netweave.routing.route(topo, "dor", select="low-port"))


def _check_bisem(net, pattern, b):
    hor = np.asarray(b["host_of_rank"])
    # Every rank placed once, on distinct hosts (one slot per host).
    assert len(hor) == pattern.num_ranks and len(set(hor.tolist())) == pattern.num_ranks
    assert hor.max() < net.num_hosts
    # Balanced parts: group sizes follow the regions' capacities to within one rank.
    sizes = b["group_sizes"]
    caps = [int(np.prod(np.subtract(hi, lo))) for lo, hi in b["regions"]]
    assert sum(sizes) == pattern.num_ranks
    share = pattern.num_ranks / net.num_slots
    assert all(abs(s - c * share) <= len(b["axes"]) + 1 for s, c in zip(sizes, caps)), (sizes, caps)


@pytest.mark.parametrize("shape,dims", [("8x8x4", [8, 4, 8]), ("4x16x4", [8, 8, 4]), ("16x16", [8, 8, 4]),
                                        ("6x5x4", [5, 6, 4])])
def test_bisem_on_stencils_cuts_geometrically_and_beats_identity(shape, dims):
    net = _net(dims)
    pattern = mapping.load_pattern(f"stencil:{shape}:4096")
    for levels in (None, 64):
        b = mapping.bisem(net, pattern, levels=levels, seed=2)
        assert b["grid"] == [int(x) for x in shape.split("x")]
        _check_bisem(net, pattern, b)
        ident = mapping.cost(net, pattern, mapping.baseline(net, pattern, "identity"))["hop_bytes"]
        assert mapping.cost(net, pattern, b["host_of_rank"])["hop_bytes"] <= ident


def test_bisem_full_depth_embeds_a_matching_stencil_with_one_hop_per_message():
    # The same grid as the torus: geometric cuts reproduce the torus, every message one hop.
    net = _net([8, 4, 4])
    pattern = mapping.load_pattern("stencil:8x4x4:1000")
    hor = mapping.bisem(net, pattern, levels=64, seed=0)["host_of_rank"]
    figs = mapping.cost(net, pattern, hor)
    assert figs["hop_bytes"] == pattern.num_messages * 1000
    assert figs["sum_hops"] == pattern.num_messages


def test_bisem_keeps_metis_for_other_patterns():
    net = _net([4, 4, 4])
    for spec in ("bruck:64:2048", "random:64:4:100:3", "alltoall:32"):
        pattern = mapping.load_pattern(spec)
        b = mapping.bisem(net, pattern, seed=1)
        assert b["grid"] is None
        _check_bisem(net, pattern, b)


@settings(max_examples=25, deadline=None)
@given(dims=st.lists(st.integers(1, 6), min_size=1, max_size=3), periodic=st.booleans())
def test_stencil_grids_are_recognised_from_their_messages(dims, periodic):
    # Any stencil generator output is recognised as a grid whose neighbours are exactly its
    # messages' pairs (the coarsest such grid; sizes-1 axes drop out).
    n = int(np.prod(dims))
    if n < 4:
        return
    spec = "stencil:" + "x".join(map(str, dims)) + (":periodic" if periodic else ":open")
    pattern = mapping.load_pattern(spec)
    net = _net([n], torus=True)
    grid = mapping.bisem(net, pattern, levels=1, seed=0)["grid"]
    if pattern.num_messages == 0:
        assert grid is None
        return
    assert grid is not None and int(np.prod(grid)) == n
    src, dst, _ = pattern.arrays()
    strides = np.cumprod([1] + grid[:-1])
    for s, d in zip(src.tolist(), dst.tolist()):
        diff = [(s // st_) % k - (d // st_) % k for st_, k in zip(strides, grid)]
        moved = [abs(x) for x in diff if x != 0]
        assert len(moved) == 1 and moved[0] in (1, grid[next(i for i, x in enumerate(diff) if x)] - 1)


def test_plan_places_ranks_for_a_pattern(tmp_path):
    topo = netweave.topology.torus([4, 4, 4])
    netweave.topology.save(topo, tmp_path / "torus.json")
    args = ["plan", str(tmp_path / "torus.json"), "--bytes", "1024", "--pattern", "stencil:16x4:4096",
            "--map-evals", "20000", "--map-seed", "3"]
    out = tmp_path / "out"
    proc = run_cli(*args, "--out", str(out))
    assert "rank placement for stencil(16x4" in proc.stdout
    assert (out / "rankfile").is_file() and (out / "placement.json").is_file()
    placed = json.loads((out / "placement.json").read_text())
    assert placed["ranks"] == 64 and placed["seed"] == 3
    assert placed["placed"]["hops_x_max_channel"] <= placed["identity"]["hops_x_max_channel"]
    # Open MPI rankfile: one line per rank, each host once.
    lines = [ln for ln in (out / "rankfile").read_text().splitlines() if ln.startswith("rank ")]
    assert len(lines) == 64 and len({ln.split("=")[1].split()[0] for ln in lines}) == 64
    # Seeded with an evaluation budget: the same placement again; JSON carries it too.
    again = json.loads(run_cli(*args, "--json").stdout)
    assert again["placement"]["placed"] == placed["placed"]
    assert "placement" in json.loads((out / "report.json").read_text())


def test_plan_without_pattern_is_unchanged_and_bad_patterns_fail_cleanly(tmp_path):
    plain = json.loads(run_cli("plan", "--json").stdout)
    assert "placement" not in plain
    proc = run_cli("plan", "--pattern", "stencil:100x100", check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli("plan", "--pattern", "stencil:4x4", "--hosts", "0-15", check=False)
    assert proc.returncode == 2 and "--hosts" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
