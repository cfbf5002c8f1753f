"""The TCP executor timed as a benchmark times an MPI collective (``run_local(warmup=W,
reps=N)``): W + N calls over the same connections, each behind the launcher's barrier, each
process timing its own call; ``makespan_s`` is the slowest process's mean over the N timed
calls, as ``nwbench`` reports ``max_s``.

Checked on what the processes recorded (their traces, one monotonic clock on this machine),
never on how long anything took.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from netweave import _core, traffic
from netweave.run import executor

TREE = _core.switch_tree([2], 4, [10.0], [1000.0], 1.0, 1000.0)


def _traces(work) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(work.glob("trace-*.json"))]


def test_repeated_calls_report_the_slowest_ranks_mean_behind_a_barrier(tmp_path):
    graph, _ = traffic.contention_free(TREE, "gather", 32 * 1024)
    work = tmp_path / "run"
    result = executor.run_local(graph, seed=3, timeout=20, warmup=2, reps=4, work_dir=work)
    assert result["ok"], result["failures"][:3]
    traces = _traces(work)
    assert len(traces) == graph.num_ranks
    assert all(len(t["calls"]) == 4 for t in traces), "one [start, end] per timed call, warm-ups left out"
    # The statistic: each rank's mean call, the slowest of those (nwbench's max_s).
    means = [sum(end - start for start, end in t["calls"]) / 4 for t in traces]
    assert result["makespan_s"] == pytest.approx(max(means) / 1e9, rel=1e-9)
    # Each timed call's makespan over all ranks, from the first start to the last end.
    for k, call in enumerate(result["calls_s"]):
        first = min(t["calls"][k][0] for t in traces)
        last = max(t["calls"][k][1] for t in traces)
        assert call == pytest.approx((last - first) / 1e9, rel=1e-9)
    # The barrier: no rank starts a call before every rank has finished the one before.
    for k in range(1, 4):
        assert min(t["calls"][k][0] for t in traces) >= max(t["calls"][k - 1][1] for t in traces)
    # The last call moved and verified every byte; its timeline is the one reported.
    moved = sum(b for s, d, b, _a, _r in graph.tasks() if s != d)
    assert result["bytes_verified"] == moved
    assert all(rec["last_s"] is not None for rec in result["timeline"])
    # One set of connections for every call: each rank talked to as many peers as one call needs.
    assert result["connections"] == executor.run_local(graph, timeout=20)["connections"]


def test_one_call_is_the_cold_run_with_no_call_list():
    graph = executor.as_task_graph(traffic.alltoall(4, 4096, "shift"))
    result = executor.run_local(graph, timeout=20)
    assert result["ok"] and result["calls_s"] == []
    assert result["makespan_s"] == max(r["last_s"] for r in result["timeline"])


@pytest.mark.parametrize("reps, warmup", [(0, 0), (1, -1), (2.5, 0)])
def test_bad_call_counts_are_refused_before_anything_starts(reps, warmup):
    graph = executor.as_task_graph(traffic.alltoall(2, 64, "shift"))
    with pytest.raises(_core.NetweaveError, match="reps"):
        executor.run_local(graph, reps=reps, warmup=warmup)


def test_the_program_refuses_repeated_calls_without_the_barrier(tmp_path):
    graph = executor.as_task_graph(traffic.alltoall(2, 64, "shift"))
    graph.save(tmp_path / "s.nws")
    (tmp_path / "peers.txt").write_text("127.0.0.1 1\n" * 2)
    proc = subprocess.run([str(executor.executor_path()), "--schedule", str(tmp_path / "s.nws"), "--rank", "0",
                           "--peers", str(tmp_path / "peers.txt"), "--reps", "3"],
                          capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2
    assert "--start-gate" in proc.stderr.splitlines()[0]


def test_a_peer_silent_in_a_later_call_fails_the_run_and_leaves_nothing(tmp_path):
    graph = executor.as_task_graph(traffic.alltoall(4, 4096, "shift"))
    work = tmp_path / "run"
    # Rank 1 sends 3 messages a call: its 7th send is in the third call.
    result = executor.run_local(graph, timeout=2, warmup=1, reps=3, fault="hang:1:7", work_dir=work)
    assert not result["ok"]
    assert result["cause"]["rank"] == 1
    assert result["makespan_s"] is None and result["calls_s"] == []
    leftovers = subprocess.run(["pgrep", "-f", str(work)], capture_output=True, text=True).stdout.split()
    assert leftovers == []
