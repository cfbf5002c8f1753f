"""Calibration files and fits that need no emulated fabric: the steady-sharing and probe
parameters are recovered from measurements the model itself made, and a file round-trips."""

import json

import pytest

from netweave import flowsim, routing, topology
from netweave._core import NetweaveError
from netweave.run import calibration, emulate

HOSTS = 16
SCALE = 0.05


def _star():
    return topology.switch_tree([], HOSTS, [], [], 1.0, 5_000.0)


def _measured(topo, routes, points, tcp):
    """`points` with the medians the model predicts under `tcp` (what a fabric obeying the
    model would measure)."""
    scaled = emulate.scaled_routes(routes, emulate.predicted_topology(topo, SCALE))
    out = []
    for p in points:
        graph, nct = calibration._graph(p, topo.num_hosts)
        t = flowsim.simulate(scaled, graph, executor="dag", nct=nct, tcp=tcp)["makespan_s"]
        out.append({**p, "median_s": t})
    return out


def test_concurrent_alltoall_graph_posts_every_pair_at_once():
    graph = calibration.concurrent_alltoall(4, 1000, 6)
    assert graph.num_ranks == 6 and graph.num_tasks == 12


def test_the_fit_recovers_steady_sharing_and_probe_parameters():
    topo = _star()
    routes = routing.route(topo, "updown")
    truth = {"probe_s": calibration.PROBE_SECONDS[4], "steady_free_segments": calibration.STEADY_FREE_SEGMENTS[2],
             "steady_segments_per_timeout": calibration.STEADY_SEGMENTS_PER_TIMEOUT[3]}
    points = ([{"kind": "incast", "senders": HOSTS - 1, "bytes": 1_000_000}]
              + [{"kind": "incast", "senders": HOSTS - 1, "bytes": b} for b in calibration.PROBE_BYTES]
              + [{"kind": "concurrent", "hosts": HOSTS, "bytes": b} for b in calibration.STEADY_BYTES])
    measured = _measured(topo, routes, points, truth)
    # 15 flows into every port of 64 KiB are short of minimum windows: the all-to-alls measure
    # the steady charge (without it they would be faster).
    off = _measured(topo, routes, points[-2:], {**truth, "min_window_segments": 1.0})
    assert all(a["median_s"] > b["median_s"] for a, b in zip(measured[-2:], off))
    tcp, error = calibration.fit_tcp(topo, routes, measured, SCALE, None, 0.0, 0.0)
    # The groups are fitted one after the other (the 1 MB incast with the default steady
    # parameters, which touch a few of its resuming flows): nearly, not exactly, exact.
    assert error < 1e-2
    assert tcp["steady_segments_per_timeout"] == truth["steady_segments_per_timeout"]
    assert tcp["steady_free_segments"] == truth["steady_free_segments"]
    again = _measured(topo, routes, points, tcp)
    for a, b in zip(again, measured):
        assert a["median_s"] == pytest.approx(b["median_s"], rel=0.05)


def test_many_flows_on_a_shallow_port_are_charged_and_the_parameters_matter():
    # 16 hosts all-to-all at once: 15 flows into every 64 KiB port need 60 segments of minimum
    # window against 45 held: the steady rule charges timeouts; a deeper buffer does not.
    topo = _star()
    routes = routing.route(topo, "updown")
    graph = calibration.concurrent_alltoall(16, 1 << 20, 16)
    shallow = flowsim.simulate(routes, graph, executor="dag", nct=15)
    assert shallow["timeouts"] > 0
    fewer = flowsim.simulate(routes, graph, executor="dag", nct=15, tcp={"steady_segments_per_timeout": 40.0})
    assert fewer["makespan_s"] < shallow["makespan_s"]
    deep = topo.with_switching("ethernet", 1 << 20)
    lossless = flowsim.simulate(routing.route(deep, "updown"), graph, executor="dag", nct=15)
    assert lossless["timeouts"] == 0 and lossless["makespan_s"] < fewer["makespan_s"]


def test_a_calibration_file_round_trips_and_old_files_still_load(tmp_path):
    topo = _star()
    routes = routing.route(topo, "updown")
    graph = calibration.concurrent_alltoall(16, 1 << 20, 16)
    tcp = {**flowsim.TCP_DEFAULTS, "steady_segments_per_timeout": 7.0, "probe_s": 0.003}
    doc = calibration._document(topo, 1.0, None, {"overhead_s": 1e-5, "sync_s": 2e-5, "tcp": tcp}, {}, 0.0)
    path = tmp_path / "cal.json"
    calibration.write(doc, path)
    back = flowsim.load_calibration(path, topo)
    assert back["parameters"]["tcp"] == tcp and back == json.loads(json.dumps(doc))
    via_file = flowsim.simulate(routes, graph, executor="dag", nct=15, calibration=path)
    direct = flowsim.simulate(routes, graph, executor="dag", nct=15, overhead_s=1e-5, sync_s=2e-5, tcp=tcp)
    assert via_file["makespan_s"] == direct["makespan_s"]
    # A file written before the steady-sharing parameters existed (same version) loads; what it
    # does not state keeps its default.
    old_tcp = {k: v for k, v in tcp.items() if not k.startswith(("steady_", "min_window"))}
    old = {**doc, "parameters": {**doc["parameters"], "tcp": old_tcp}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    old_run = flowsim.simulate(routes, graph, executor="dag", nct=15, calibration=tmp_path / "old.json")
    defaults = flowsim.simulate(routes, graph, executor="dag", nct=15, overhead_s=1e-5, sync_s=2e-5, tcp=old_tcp)
    assert old_run["makespan_s"] == defaults["makespan_s"]


@pytest.mark.parametrize("bad, needle", [({"steady_segments_per_timeout": 0.0}, "segments per steady timeout"),
                                         ({"min_window_segments": 0.5}, "minimum window"),
                                         ({"steady_free_segments": -3.0}, "before steady timeouts")])
def test_bad_steady_parameters_are_refused_in_one_line(bad, needle):
    topo = _star()
    doc = calibration._document(topo, 1.0, None, {"tcp": bad}, {}, None)
    with pytest.raises(NetweaveError, match=needle) as e:
        flowsim.simulate(routing.route(topo, "updown"), calibration.incast(2, 1000, HOSTS), executor="dag",
                         calibration=doc)
    assert len(str(e.value).splitlines()) == 1
