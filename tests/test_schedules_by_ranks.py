"""Schedules by rank count: `netweave schedule COLLECTIVE --ranks N` (no topology) and
`netweave mpi schedules --ranks A-B --out DIR`, a directory the MPI library reads for every
communicator size (MPI_COMM_WORLD and both halves of a split find their own file)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli, run_json
from netweave import traffic
from netweave.run import mpi


def test_a_schedule_for_n_ranks_needs_no_topology(tmp_path):
    out = tmp_path / "a.nws"
    data = run_json("schedule", "alltoall", "--ranks", "8", "--algo", "bruck", "-o", str(out))
    assert data["completeness"]["complete"] is True
    schedule = traffic.load(out)
    assert schedule.num_ranks == 8 and schedule.num_phases == 3  # bruck: ceil(log2 8) phases
    gather = run_json("schedule", "gather", "--ranks", "6", "--algo", "binomial", "--root", "2")
    assert gather["completeness"]["complete"] is True


@pytest.mark.parametrize(
    "args, needle",
    [
        (["schedule", "alltoall", "--ranks", "0", "--algo", "bruck"], "--ranks 0"),
        (["schedule", "alltoall", "--algo", "bruck"], "--ranks N"),
        (["schedule", "alltoall", "--ranks", "8", "--algo", "lsft"], "Latin-square"),
        (["schedule", "alltoall", "--ranks", "8", "--algo", "bruck", "--hosts", "0-3"], "--hosts"),
        (["schedule", "alltoall", "--ranks", "8", "--algo", "contention-free"], "topology"),
        (["mpi", "schedules", "--ranks", "0", "--out", "OUT"], "'0'"),
        (["mpi", "schedules", "--ranks", "8-2", "--out", "OUT"], "'8-2'"),
        (["mpi", "schedules", "--ranks", "2-x", "--out", "OUT"], "'2-x'"),
        (["mpi", "schedules", "--ranks", "2-8", "--algo", "scatter=ring", "--out", "OUT"], "scatter=ring"),
        (["mpi", "schedules", "--ranks", "2-8", "--collectives", "reduce", "--out", "OUT"], "reduce"),
        (["mpi", "schedules", "--ranks", "2-8", "--root", "2", "--out", "OUT"], "--root 2"),
    ],
)
def test_bad_rank_counts_are_one_line_exit_2(tmp_path, args, needle):
    out = tmp_path / "out"
    proc = run_cli(*[str(out) if a == "OUT" else a for a in args], "-o" if args[0] == "schedule" else "--json",
                   *([str(tmp_path / "x.nws")] if args[0] == "schedule" else []), check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert needle in proc.stderr
    assert not out.exists() and not (tmp_path / "x.nws").exists()


def test_a_schedule_directory_for_every_size(tmp_path):
    out = tmp_path / "schedules"
    data = run_json("mpi", "schedules", "--ranks", "1-9", "--out", str(out))
    sizes = range(2, 10)
    want = {f"{c}-{n}.nws" for c in ("alltoall", "allgather", "gather") for n in sizes}
    assert set(data["written"]) == want and {p.name for p in out.iterdir()} == want
    # One rank has no schedule: that communicator runs the native collective, and it is said.
    assert {s["file"] for s in data["skipped"]} == {"alltoall-1.nws", "allgather-1.nws", "gather-1.nws"}
    for n in sizes:
        s = traffic.load(out / f"alltoall-{n}.nws")
        assert s.num_ranks == n and s.num_phases == n - 1  # pairwise exchange
    chosen = run_json("mpi", "schedules", "--ranks", "2-8", "--collectives", "allgather",
                      "--algo", "allgather=recursive-doubling", "--out", str(tmp_path / "rd"))
    assert chosen["written"] == ["allgather-2.nws", "allgather-4.nws", "allgather-8.nws"]
    assert len(chosen["skipped"]) == 4


@pytest.mark.parametrize("collective", ["alltoall", "allgather", "gather"])
def test_the_mpi_library_finds_every_communicator_size_in_the_directory(tmp_path, collective):
    """World (6 ranks) and both halves of the split (3 each) run the directory's schedules,
    byte for byte equal to the native collective."""
    try:
        nwcheck = mpi.program_path("nwcheck", "openmpi")
    except Exception as e:  # the runtime is not built: mpi's own tests say why
        pytest.skip(str(e))
    out = tmp_path / "schedules"
    run_cli("mpi", "schedules", "--ranks", "2-8", "--out", str(out))
    proc = run_cli("mpi", "run", "-np", "6", "--schedule", str(out), "--verbose", "--", str(nwcheck),
                   "--collective", collective, "--counts", "0,1,1000", "--split", check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["mismatches"] == 0
    assert f"runs '{collective}-" in proc.stderr and "(N=6" in proc.stderr and "(N=3" in proc.stderr, proc.stderr[-3000:]
