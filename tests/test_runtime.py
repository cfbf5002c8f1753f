"""The real executor (runtime/: executor core + TCP transport, launched by `netweave run`):
paper 004's T24-T25 on loopback with 16+ processes, a relay chain, dead and silent peers.

Every check here is on what real processes did: bytes verified by the receivers against the
seeded payload, and the per-task trace (one monotonic clock on this machine) against the
dependencies of the DAG they ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import run_cli
from netweave import _core, traffic
from netweave.run import executor

# A two-level Ethernet tree: 4 edge switches under a 10 Gbps core, 4 hosts each.
TREE = _core.switch_tree([4], 4, [10.0], [1000.0], 1.0, 1000.0)


def expected_syncs(graph: _core.TaskGraph) -> int:
    """Sync messages paper 004's runtime sends: one per `complete` edge whose successor's
    sender neither sent nor received the predecessor (it cannot know on its own)."""
    tasks = graph.tasks()
    count = 0
    for src, _dst, _bytes, after, _relays in tasks:
        for p in after:
            p_src, p_dst = tasks[p][0], tasks[p][1]
            count += src != p_src and src != p_dst
    return count


def check_run(graph: _core.TaskGraph, result: dict) -> None:
    """The run succeeded, moved every byte verified, and honoured every dependency."""
    assert result["ok"], result["failures"][:3]
    tasks = graph.tasks()
    moved = sum(b for s, d, b, _a, _r in tasks if s != d)
    assert result["bytes"] == moved
    assert result["bytes_verified"] == moved, "every receiver checks every byte it was owed"
    assert result["syncs"] == expected_syncs(graph)
    line = result["timeline"]
    for t, (src, _dst, _b, after, relays) in enumerate(tasks):
        rec = line[t]
        assert rec["start_s"] is not None and rec["last_s"] is not None, f"task {t} never ran"
        assert rec["start_s"] <= rec["first_s"] <= rec["last_s"]
        for p in after:
            # My own earlier send: once its data has left; anyone else's: once it fully arrived.
            done = line[p]["sent_s"] if tasks[p][0] == src else line[p]["last_s"]
            assert rec["start_s"] >= done, (t, p)
        if relays is not None:  # cut-through: after the head arrived, before its tail was due
            assert rec["start_s"] >= line[relays]["first_s"]
            assert rec["last_s"] >= line[relays]["last_s"]


@pytest.mark.parametrize("collective", ["gather", "alltoall"])
def test_contention_free_schedules_run_on_16_processes(collective):
    """T24/T25: the scheduler's DAGs run on real processes, verified byte for byte."""
    graph, _ = traffic.contention_free(TREE, collective, 256 * 1024, root=5 if collective == "gather" else 0)
    assert graph.num_ranks == 16
    result = executor.run_local(graph, seed=11, timeout=20)
    check_run(graph, result)
    assert result["connections"] == (15 if collective == "gather" else 120)


def test_a_relayed_gather_runs_with_its_chains():
    """T23 on real processes: small gathers relay (pieces forwarded cut-through), and the root
    still receives every host's data, verified."""
    graph, summary = traffic.contention_free(TREE, "gather", 2000, root=0)
    assert summary["relayed_tasks"] > 0
    check_run(graph, executor.run_local(graph, seed=4, timeout=20))


def test_a_relay_chain_forwards_fragments_as_they_arrive():
    """A 17-process chain W → X1 → … → Y: each hop relays the previous one cut-through, so it
    starts forwarding before the previous hop has finished (3 MiB = 48 fragments)."""
    size = 3 << 20
    tasks = [(0, 1, size, [], None)] + [(i, i + 1, size, [], i - 1) for i in range(1, 16)]
    graph = _core.TaskGraph("relay-chain", 17, tasks)
    result = executor.run_local(graph, seed=5, timeout=20)
    check_run(graph, result)
    line = result["timeline"]
    for t in range(1, 16):
        assert line[t]["start_s"] < line[t - 1]["last_s"], f"hop {t} waited for the whole message"


def test_a_phased_schedule_runs_in_local_sync_order():
    schedule = traffic.alltoall(16, 70_001, "xor")  # an odd size: fragments end mid-word
    graph = executor.as_task_graph(schedule)
    check_run(graph, executor.run_local(graph, seed=2, fragment=8192, timeout=20))


def test_zero_byte_tasks_and_self_copies_complete():
    tasks = [(0, 1, 0, [], None), (1, 1, 5000, [0], None), (1, 2, 0, [1], None), (2, 0, 5000, [2], None)]
    graph = _core.TaskGraph("odd", 3, tasks)
    check_run(graph, executor.run_local(graph, timeout=10))


def _leftovers(tag: str) -> list[str]:
    """Processes whose command line mentions `tag` (to prove a run left none behind)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if tag in cmd and "nw-tcp-run" in cmd:
            found.append(cmd)
    return found


@pytest.mark.parametrize("kind", ["crash", "hang"])
def test_a_dead_or_silent_peer_fails_every_process_with_the_reason(kind, tmp_path):
    graph, _ = traffic.contention_free(TREE, "alltoall", 64 * 1024)
    work = tmp_path / "run"
    result = executor.run_local(graph, timeout=2, fault=f"{kind}:6:2", work_dir=work)
    assert not result["ok"]
    assert {f["rank"] for f in result["failures"]} == set(range(16)), "every process exits non-zero"
    assert result["cause"]["rank"] == 6
    if kind == "crash":
        assert "SIGKILL" in result["cause"]["reason"]
    else:
        assert "stopped by the launcher" in result["cause"]["reason"]
    for f in result["failures"]:
        if f["rank"] != 6:
            assert any(why in f["reason"] for why in ("closed its connection", "reset its connection", "nothing moved")), f
            assert f["exit"] == 1
    assert _leftovers(str(work)) == []


def test_the_cause_is_the_rank_the_others_blame_not_the_first_listed():
    """Ranks ending within one poll are listed by rank: the first may be a victim of a later one."""
    reasons = {0: "nw-tcp-run rank 0: waiting: rank 3 closed its connection while 1 message(s) ...",
               3: "nw-tcp-run rank 3: task 9 from rank 2: byte 4 is not what task 9 sent",
               5: "nw-tcp-run rank 5: waiting: rank 0 reset its connection while ..."}
    codes = [1, 0, 0, 1, 0, 1]
    assert executor._cause([0, 3, 5], codes, reasons) == 3
    assert executor._cause([5, 0, 3], codes, reasons) == 3, "blame is followed through a chain"
    loop = {0: "rank 3 closed its connection", 3: "rank 0 reset its connection"}
    assert executor._cause([0, 3], [1, 0, 0, 1], loop) == 3, "a cycle of blame ends (it is not followed back)"
    assert executor._cause([0, 3], [1, 0, 0, -9], reasons) == 3, "a rank killed by a signal comes first"
    assert executor._cause([], codes, {}) is None


def test_runs_leave_no_processes_or_scratch_files():
    before = {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("netweave-run-")}
    graph = executor.as_task_graph(traffic.alltoall(4, 1000, "shift"))
    executor.run_local(graph, timeout=2, fault="crash:1")
    executor.run_local(graph)
    after = {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("netweave-run-")}
    assert after == before
    assert _leftovers("netweave-run-") == []


def test_a_killed_launcher_leaves_no_scratch_directory(tmp_path):
    """SIGKILL runs no `finally`: the job's guardian removes the scratch directory then."""
    scratch_parent = tmp_path / "tmp"
    scratch_parent.mkdir()
    # A rank that hangs keeps the run going until the launcher is killed.
    script = ("from netweave import traffic\nfrom netweave.run import executor\n"
              "g = executor.as_task_graph(traffic.alltoall(4, 1000, 'shift'))\n"
              "executor.run_local(g, timeout=120, fault='hang:1')\n")
    child = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(scratch_parent)})
    try:
        deadline = time.monotonic() + 60
        while not any(scratch_parent.glob("netweave-run-*/peers.txt")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(scratch_parent.glob("netweave-run-*")), "the run never started"
        child.kill()
        child.wait()
        deadline = time.monotonic() + 30
        while any(scratch_parent.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(scratch_parent.iterdir()) == []
        assert _leftovers(str(scratch_parent)) == []
    finally:
        child.kill()
        child.wait()


def test_dag_files_round_trip_through_the_binary_form(tmp_path):
    graph, _ = traffic.contention_free(TREE, "alltoall", 1000)
    for name in ("g.nws", "g.json"):
        graph.save(tmp_path / name)
        back = _core.TaskGraph.load(tmp_path / name)
        assert back.tasks() == graph.tasks() and back.placement == graph.placement and back.name == graph.name


def test_the_executor_refuses_corrupt_schedules_with_one_line(tmp_path):
    graph = executor.as_task_graph(traffic.alltoall(3, 100, "shift"))
    graph.save(tmp_path / "s.nws")
    data = (tmp_path / "s.nws").read_bytes()
    (tmp_path / "short.nws").write_bytes(data[:-8])
    (tmp_path / "peers.txt").write_text("127.0.0.1 1\n" * 3)
    exe = str(executor.executor_path())
    for bad, why in [("short.nws", "implies"), ("missing.nws", "cannot open")]:
        proc = subprocess.run([exe, "--schedule", str(tmp_path / bad), "--rank", "0", "--peers",
                               str(tmp_path / "peers.txt")], capture_output=True, text=True, timeout=10)
        assert proc.returncode == 2 and why in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = subprocess.run([exe, "--rank", "x"], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2


def test_netweave_run_cli(tmp_path):
    topo = tmp_path / "t.json"
    run_cli("topo", "tree", "--fanouts", "4", "--hosts-per-switch", "4", "-o", str(topo))
    run_cli("schedule", "gather", str(topo), "--algo", "contention-free", "--root", "3", "--bytes", "100000",
            "-o", str(tmp_path / "g.nws"))
    out = tmp_path / "kept"
    result = json.loads(run_cli("run", str(tmp_path / "g.nws"), "--out", str(out), "--topology", str(topo),
                                "--json").stdout)
    assert result["ok"] and result["ranks"] == 16 and result["bytes_verified"] == result["bytes"] >= 15 * 100000
    assert result["predicted_makespan_s"] > 0
    rows = (out / "tasks.csv").read_text().splitlines()
    assert rows[0] == "task,src,dst,bytes,start_s,sent_s,first_s,last_s" and len(rows) == result["tasks"] + 1
    timeline = json.loads((out / "result.json").read_text())["timeline"]
    assert all(t["last_s"] is not None for t in timeline) and 3 in {t["dst"] for t in timeline}

    failed = run_cli("run", str(tmp_path / "g.nws"), "--fault", "crash:0", "--timeout", "2", check=False)
    assert failed.returncode == 1 and "FAILED: rank 0" in failed.stdout

    (tmp_path / "bad.nws").write_bytes(b"NWSCHED\0" + bytes(20))
    for args in (["run", str(tmp_path / "bad.nws")], ["run", str(tmp_path / "g.nws"), "--fault", "explode:1"],
                 ["run", str(tmp_path / "nope.json")]):
        proc = run_cli(*args, check=False)
        assert proc.returncode == 2 and proc.stderr.startswith("error:") and len(proc.stderr.strip().splitlines()) == 1
