"""Schedules: generators, completeness, files, job allocation, `netweave schedule` and
`netweave reproduce a2at`."""

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli, run_json
from netweave import topology, traffic
from netweave._core import NetweaveError, Schedule

# --- the papers' fixed vectors ---------------------------------------------------------------

A2AT_5 = [(1, 0), (0, 1), (-1, 0), (0, -1), (1, 1), (-1, -1), (1, -1), (-1, 1), (2, 0), (0, 2), (-2, 0), (0, -2),
          (2, 2), (-2, -2), (2, -2), (-2, 2), (2, 1), (-1, -2), (1, 2), (-2, -1), (2, -1), (-1, 2), (1, -2), (-2, 1)]


def test_a2at_send_list_is_the_papers_with_the_j_correction():
    assert traffic.a2at_offsets(5) == A2AT_5
    for n in (3, 7, 17):
        offsets = traffic.a2at_offsets(n)
        assert len(offsets) == len(set(offsets)) == n * n - 1
    # Rank (x, y) = x + 5y sends offset (a, b) to ((x+a) mod 5, (y+b) mod 5), NCT sends per phase.
    s = traffic.build("alltoall", "a2at", num_ranks=25, nct=2, bytes=100)
    assert s.send_order(7)[:4] == [(0, 8, 100), (0, 12, 100), (1, 6, 100), (1, 2, 100)]
    assert traffic.a2at_theory(17) == (1632, 1224, 816, 612)


def test_a2and_starts_lexicographically():
    assert traffic.a2and_offsets([5, 5])[:6] == [[0, 1], [0, 2], [0, 3], [0, 4], [1, 0], [1, 1]]


def test_bruck_and_barrier_sizes():
    s = traffic.build("alltoall", "bruck", num_ranks=6, bytes=10)
    assert [s.phase(p)[0][2] for p in range(s.num_phases)] == [30, 20, 20]
    ag = traffic.build("allgather", "bruck", num_ranks=6, bytes=10)
    assert [ag.phase(p)[0][2] for p in range(ag.num_phases)] == [10, 20, 20]
    b = traffic.build("barrier", "multicast", num_ranks=64, seed=4)
    assert b.num_phases == 12  # paper 002: 6 gather + 6 release steps for 64 hosts
    assert traffic.visiting_list(64, 0, 4)[0] == 0


# --- invariants (hypothesis) ----------------------------------------------------------------

# Algorithms that place their ranks themselves (the LSFT schedules) need their topology;
# tests/test_lsft_schedule.py covers them.
CASES = [case for case, algo in traffic.ALGORITHMS.items() if not algo.places_ranks]


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(CASES), n=st.integers(2, 40), nct=st.sampled_from([1, 2, 4]), root=st.integers(0, 39),
       seed=st.integers(0, 2**32))
def test_every_generator_delivers_what_it_claims(case, n, nct, root, seed):
    collective, algo = case
    takes = traffic.ALGORITHMS[case].takes
    kwargs = {}
    if "nct" in takes:
        kwargs["nct"] = nct
    if "root" in takes:
        kwargs["root"] = root % n
    if "seed" in takes:
        kwargs["seed"] = seed
    if algo == "a2at":
        side = 2 * (n % 8) + 3
        n = side * side
    if algo in ("xor", "recursive-doubling"):
        n = 1 << (n % 6 + 1)
    s = traffic.build(collective, algo, num_ranks=n, bytes=8, **kwargs)
    c = s.completeness()
    assert c["complete"] is True, c
    assert c["permutation"] in (True, None), c
    assert s.collective == collective and s.num_ranks == n
    if collective == "alltoall" and s.delivery == "direct":
        # every ordered pair exactly once
        pairs = [(a, b) for p in range(s.num_phases) for (a, b, _) in s.phase(p)]
        assert len(pairs) == len(set(pairs)) == n * (n - 1)
    if collective == "allgather":
        # every rank receives N − 1 blocks' worth
        _, _, dst, nbytes = s.arrays()
        assert all(int(nbytes[dst == r].sum()) == 8 * (n - 1) for r in range(n))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CASES), n=st.integers(2, 12), fmt=st.sampled_from([".json", ".nws"]))
def test_files_round_trip(tmp_path, case, n, fmt):
    collective, algo = case
    if algo == "a2at":
        n = 9
    if algo in ("xor", "recursive-doubling"):
        n = 8
    s = traffic.build(collective, algo, num_ranks=n, bytes=3).with_placement(list(range(2 * n - 1, -1, -2)))
    path = tmp_path / f"s{fmt}"
    traffic.save(s, path)
    assert traffic.load(path) == s
    assert Schedule.from_binary(s.to_binary()) == s
    assert Schedule.from_json(s.to_json()) == s


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=400), at=st.integers(0, 10**6), flip=st.integers(1, 255), text=st.text(max_size=200))
def test_malformed_files_raise_clear_errors(data, at, flip, text):
    good = bytearray(traffic.build("alltoall", "shift", num_ranks=4, bytes=1).to_binary())
    good[at % len(good)] ^= flip
    for blob in (bytes(good), data, b"NWSCHED\0" + data):
        try:
            Schedule.from_binary(blob)
        except NetweaveError as e:
            assert "\n" not in str(e) and str(e).startswith("NWSCHED parse error")
    try:
        Schedule.from_json(text)
    except NetweaveError as e:
        assert "\n" not in str(e)


# --- job allocation ----------------------------------------------------------------------------


def test_host_lists_and_rank_orders():
    fat = topology.k_ary_n_tree(4, 2)
    s = traffic.build("alltoall", "shift", topology=fat, hosts="leaf:1-2", order="cyclic")
    assert list(s.placement) == [4, 8, 5, 9, 6, 10, 7, 11]
    with pytest.raises(NetweaveError, match="whole leaves"):
        traffic.build("alltoall", "shift", topology=fat, hosts="0-5")
    r1 = traffic.build("alltoall", "shift", topology=fat, order="random", seed=9)
    r2 = traffic.build("alltoall", "shift", topology=fat, order="random", seed=9)
    assert list(r1.placement) == list(r2.placement) != list(range(16))
    # A sub-block of a torus with an explicit shape.
    t = topology.torus([6, 6], 1)
    sub = traffic.build("alltoall", "a2at", topology=t, hosts="0-8", shape=[3, 3])
    assert list(sub.placement) == list(range(9)) and sub.completeness()["complete"]


# --- CLI -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def topos(tmp_path_factory):
    d = tmp_path_factory.mktemp("topos")
    files = {"t5": d / "t5.json", "m6": d / "m6.json", "t5x7": d / "t5x7.json", "kt": d / "kt.json"}
    topology.save(topology.torus([5, 5], 1), files["t5"])
    topology.save(topology.mesh([6, 6], 1), files["m6"])
    topology.save(topology.torus([5, 7], 1), files["t5x7"])
    topology.save(topology.k_ary_n_tree(4, 2), files["kt"])
    return files


def test_cli_schedule_writes_both_formats(topos, tmp_path):
    out = tmp_path / "a.nws"
    summary = run_json("schedule", "alltoall", "--algo", "a2at", str(topos["t5"]), "--nct", "4", "--bytes", "100", "-o", str(out))
    assert summary["phases"] == 6 and summary["messages"] == 600 and summary["completeness"]["complete"]
    built = traffic.build("alltoall", "a2at", topology=topology.load(topos["t5"]), nct=4, bytes=100)
    assert traffic.load(out) == built
    js = tmp_path / "b.json"
    run_cli("schedule", "barrier", "--algo", "multicast", str(topos["kt"]), "--seed", "5", "--hosts", "leaf:0-1", "-o", str(js))
    doc = json.loads(js.read_text())
    assert (doc["format"], doc["version"], doc["collective"], doc["num_ranks"]) == ("netweave-schedule", 1, "barrier", 8)
    assert doc["placement"] == list(range(8))


@pytest.mark.parametrize("args, needle", [
    (["alltoall", "--algo", "a2at", "m6"], "odd square"),
    (["alltoall", "--algo", "a2at", "t5x7"], "odd square"),
    (["alltoall", "--algo", "xor", "kt", "--hosts", "leaf:0-2"], "power-of-two"),
    (["alltoall", "--algo", "shift", "kt", "--hosts", "0-5"], "whole leaves"),
    (["alltoall", "--algo", "shift", "kt", "--hosts", "0-99"], "does not exist"),
    (["alltoall", "--algo", "a2at", "t5", "--shape", "5x5", "--hosts", "0-23"], "has 25 ranks but the job has 24"),
    (["alltoall", "--algo", "a2at", "t5", "--nct", "3"], "NCT 1, 2 or 4"),
    (["alltoall", "--algo", "shift", "kt", "--nct", "2"], "does not take --nct"),
    (["alltoall", "--algo", "nope", "kt"], "unknown alltoall algorithm"),
    (["gather", "--algo", "linear", "kt", "--root", "16"], "valid: 0..=15"),
])
def test_cli_bad_input_is_one_line_exit_2(topos, args, needle):
    args = [str(topos[a]) if a in topos else a for a in args]
    proc = run_cli("schedule", *args, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], proc.stderr


def test_reproduce_a2at_fluid_reaches_table_1(tmp_path):
    out = tmp_path / "rep"
    result = run_json("reproduce", "a2at", "--model", "fluid", "--sides", "5,7", "--out", str(out))
    assert result["t4_cells_exact"] == result["t4_cells"] == 10
    assert result["a2and_cells_matching"] == 10
    table = (out / "table_t4.csv").read_text().splitlines()
    assert table[1] == "5,40,40,30,20,15,40,30,20,15"
    assert table[2] == "7,112,112,84,56,42,112,84,56,42"
    assert (out / "a2at_fluid.png").stat().st_size > 0 and "35" not in (out / "summary.md").read_text().split("T4 cells")[1]
    assert math.isclose(json.loads((out / "result.json").read_text())["t4_cells_exact"], 10)


C_MAIN = r"""
int main(int argc, char **argv) {
    nws_rank r;
    if (argc != 3) return 2;
    nws_read_rank(argv[1], (uint32_t)atoi(argv[2]), &r);
    printf("%u %u %u %u %u %u\n", r.ranks, r.phases, r.collective, r.root, r.flags, r.concurrent_sends);
    printf("blocks of %llu bytes\n", (unsigned long long)r.block_bytes);
    for (uint64_t i = 0; i < r.nsend; i++)
        printf("s %u %u %llu\n", r.sends[i].phase, r.sends[i].peer, (unsigned long long)r.sends[i].bytes);
    for (uint64_t i = 0; i < r.nrecv; i++)
        printf("r %u %u %llu\n", r.recvs[i].phase, r.recvs[i].peer, (unsigned long long)r.recvs[i].bytes);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_the_documented_c_reader_reads_our_files(tmp_path):
    """The C sketch in docs/schedule-format.md compiles and reads what netweave writes."""
    doc = (Path(__file__).parent.parent / "docs" / "schedule-format.md").read_text()
    code = re.search(r"### Reading it from C.*?```c\n(.*?)```", doc, re.S).group(1)
    (tmp_path / "reader.c").write_text(code + C_MAIN)
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-o", str(tmp_path / "reader"), str(tmp_path / "reader.c")],
                   check=True, capture_output=True)
    s = traffic.build("gather", "binomial", num_ranks=11, root=3, bytes=5)
    traffic.save(s, tmp_path / "g.nws")
    for rank in (0, 3, 10):
        out = subprocess.run([str(tmp_path / "reader"), str(tmp_path / "g.nws"), str(rank)],
                             check=True, capture_output=True, text=True).stdout.splitlines()
        assert out[0] == "11 4 2 3 3 1"  # ranks, phases, gather, root, permutation|forwarded, 1 send
        assert out[1] == "blocks of 5 bytes"
        assert out[2:] == [f"s {p} {d} {b}" for p, d, b in s.send_order(rank)] + \
                          [f"r {p} {src} {b}" for p, src, b in s.receive_order(rank)]
