"""Calibration files and fits that need no emulated fabric: the steady-sharing and probe
parameters are recovered from measurements the model itself made, and a file round-trips."""

import json

import pytest

from conftest import run_cli
from netweave import flowsim, plan, routing, topology
from netweave._core import NetweaveError
from netweave.run import calibration, emulate
from netweave.run.emulate import runs

HOSTS = 16
SCALE = 0.05


def _star():
    return topology.switch_tree([], HOSTS, [], [], 1.0, 5_000.0)


def _measured(topo, routes, points, tcp, streams=None):
    """`points` with the medians the model predicts under `tcp` and `streams` host streams (what
    a fabric obeying the model would measure)."""
    scaled = emulate.scaled_routes(routes, emulate.predicted_topology(topo, SCALE))
    out = []
    for p in points:
        graph, nct = calibration._graph(p, topo)
        t = flowsim.simulate(scaled, graph, executor="dag", nct=nct, tcp={**tcp, **emulate.HOST_TCP},
                             host_streams=streams)["makespan_s"]
        out.append({**p, "median_s": t})
    return out


def _probe_points():
    """The calibration's short incasts: PROBE_SEGMENTS segments from each of the other hosts."""
    return [{"kind": "incast", "senders": HOSTS - 1, "bytes": k * flowsim.TCP_DEFAULTS["segment_bytes"]}
            for k in calibration.PROBE_SEGMENTS]


def test_predictions_of_emulated_runs_use_the_emulated_hosts_tcp():
    # The emulated hosts send no TCP timestamps: victims of a long incast cut again before the
    # new data F-RTO sends in their second round trip is acknowledged back off (Karn's rule),
    # which the default (Linux's timestamps) does not. 47 senders × 1 MB: about half time out,
    # and so many resume together that they overflow the port in that second round trip.
    topo = topology.switch_tree([], 48, [], [], 1.0, 5_000.0).with_switching("ethernet", 64 * 1024)
    routes = routing.route(topo, "updown")
    graph = calibration.incast(47, 1_000_000, 48)
    emulated = emulate.predict(topo, routes, graph, 1.0)
    scaled = emulate.scaled_routes(routes, emulate.predicted_topology(topo, 1.0))
    timed = flowsim.simulate(scaled, graph, executor="dag")
    tick = emulate.HOST_TCP.get("timer_tick_s", flowsim.TCP_DEFAULTS["timer_tick_s"])
    karn = flowsim.simulate(scaled, graph, executor="dag", tcp={"timestamps": False, "timer_tick_s": tick})
    assert emulate.HOST_TCP["timestamps"] is False and set(emulate.HOST_TCP) <= {"timestamps", "timer_tick_s"}
    # At least one wait doubled: one more RTO for the victims cut again.
    assert emulated["makespan_s"] == karn["makespan_s"]
    assert karn["makespan_s"] >= timed["makespan_s"] + flowsim.TCP_DEFAULTS["timeout_s"] - 1e-9


def test_the_emulated_hosts_timers_tick_as_this_machines_kernel():
    # The kernel's own build configuration says its tick; a machine whose configuration is not
    # readable keeps the model's default (Debian's 250 Hz).
    tick = runs.kernel_timer_tick_s()
    assert tick is None or round(1 / tick) in (100, 250, 300, 1000)
    assert emulate.HOST_TCP.get("timer_tick_s") == tick


def test_concurrent_alltoall_graph_posts_every_pair_at_once_in_unrelated_orders():
    six = topology.switch_tree([], 6, [], [], 1.0, 5_000.0)
    graph = calibration.concurrent_alltoall(4, 1000, six)
    assert graph.num_ranks == 6 and graph.num_tasks == 12 and graph.num_dependencies == 0
    pairs = [(s, d) for s, d, _b, _after, _relay in graph.tasks()]
    assert sorted(pairs) == [(s, d) for s in range(4) for d in range(4) if s != d]
    # Each host's sends in the order it posts them: drawn per host with the seed, so the
    # hosts do not all start at one destination (rank order: every host at host 0 first).
    star = _star()
    def firsts(seed):
        order = [(s, d) for s, d, *_rest in calibration.concurrent_alltoall(HOSTS, 1000, star, seed).tasks()]
        return [next(d for s, d in order if s == h) for h in range(HOSTS)]
    assert len(set(firsts(0))) > 4 and firsts(0) == firsts(0) != firsts(1)


def test_the_fit_recovers_steady_sharing_and_probe_parameters():
    topo = _star()
    routes = routing.route(topo, "updown")
    # Linux's own probe, on a fabric whose short bursts lose flows (survival 0.99 per segment).
    # The probe points (11 and 16 segments from 15 senders at 50 Mbit/s, the queue 10.5 ms):
    # the first sends its last byte 28 ms in, before its probes fire (after 15.75 ms, and
    # 21 ms + the fixed part rounded up to 4 ms ticks), so its lost tails are resent then; the
    # second sends until 45.6 ms and times out unless the fixed part is 10 ms or more. No
    # fixed part and 2 ms round to the same ticks, and the fit keeps the default of the two.
    truth = {"survival_per_segment": 0.99, "probe_s": calibration.PROBE_SECONDS[1],
             "steady_free_segments": calibration.STEADY_FREE_SEGMENTS[2],
             "steady_segments_per_timeout": calibration.STEADY_SEGMENTS_PER_TIMEOUT[3]}
    probes = _probe_points()
    points = ([{"kind": "incast", "senders": HOSTS - 1, "bytes": 1_000_000}] + probes
              + [{"kind": "concurrent", "hosts": HOSTS, "bytes": b} for b in calibration.STEADY_BYTES])
    measured = _measured(topo, routes, points, truth)
    # 15 flows into every port of 64 KiB are short of minimum windows: the all-to-alls measure
    # the steady charge (without it they would be faster).
    steady = len(calibration.STEADY_BYTES)
    off = _measured(topo, routes, points[-steady:], {**truth, "min_window_segments": 1.0})
    assert all(a["median_s"] > b["median_s"] for a, b in zip(measured[-steady:], off))
    tcp, error = calibration.fit_tcp(topo, routes, measured, SCALE, None, 0.0, 0.0)
    # The groups are fitted one after the other (the 1 MB incast with the default steady
    # parameters, which touch a few of its resuming flows): nearly, not exactly, exact.
    assert error < 1e-2
    assert tcp["steady_segments_per_timeout"] == truth["steady_segments_per_timeout"]
    assert tcp["steady_free_segments"] == truth["steady_free_segments"]
    assert tcp["probe_s"] == truth["probe_s"] == flowsim.TCP_DEFAULTS["probe_s"]
    for probe, same in ((0.0, True), (0.004, False), (0.015, False)):
        other = _measured(topo, routes, probes, {**truth, "probe_s": probe})
        assert ([m["median_s"] for m in other] == [m["median_s"] for m in measured[1:3]]) is same, probe
    # A fabric whose probes wait longer: its resent tails tell the fit how much.
    late = _measured(topo, routes, probes, {**truth, "probe_s": 0.03})
    assert late[0]["median_s"] > measured[1]["median_s"] and late[1]["median_s"] < measured[2]["median_s"]
    fitted, _ = calibration.fit_tcp(topo, routes, [measured[0], *late, *measured[3:]], SCALE, None, 0.0, 0.0)
    assert fitted["probe_s"] == 0.03
    again = _measured(topo, routes, points, tcp)
    for a, b in zip(again, measured):
        assert a["median_s"] == pytest.approx(b["median_s"], rel=0.05)


def test_short_incasts_decide_the_survival_that_long_ones_cannot_tell_apart():
    # Flows of 1 MB from 2 and 4 senders never overflow the port for long, so every survival
    # predicts them alike; a burst of 16 segments from 15 senders, sending past its probes,
    # times out or not by it: a fabric that keeps fewer of them than the default survival does.
    # (The 11-segment burst's probes repair it whatever the survival.)
    topo = _star()
    routes = routing.route(topo, "updown")
    truth = {"survival_per_segment": calibration.SURVIVAL_PER_SEGMENT[0]}
    probes = _probe_points()
    points = [{"kind": "incast", "senders": k, "bytes": 1_000_000} for k in (2, 4)] + probes
    measured = _measured(topo, routes, points, truth)
    at_default = _measured(topo, routes, points, {})
    assert [m["median_s"] for m in measured[:3]] == [m["median_s"] for m in at_default[:3]]
    assert measured[3]["median_s"] > 2 * at_default[3]["median_s"]
    tcp, error = calibration.fit_tcp(topo, routes, measured, SCALE, None, 0.0, 0.0)
    assert error < 1e-3
    again = _measured(topo, routes, points, tcp)
    for a, b in zip(again, measured):
        assert a["median_s"] == pytest.approx(b["median_s"], rel=0.02)


def test_a_departure_from_the_defaults_must_beat_the_repeats_spread():
    # 1 MB incasts on a fabric whose bursts keep few flows (survival 0.99, so the port's floor of
    # flows riding out the overshoot decides) measured as a window of 24 segments predicts them.
    # Repeats that agree: the fit finds 24. Repeats 30 % apart: 24 is not closer than their
    # spread, so the default stays.
    topo = _star()
    routes = routing.route(topo, "updown")
    truth = {"window_segments": 24.0, "survival_per_segment": 0.99}
    points = [{"kind": "incast", "senders": k, "bytes": 1_000_000} for k in (4, 8, 15)]
    measured = _measured(topo, routes, points, truth)
    at_default = _measured(topo, routes, points, {})
    assert any(m["median_s"] != d["median_s"] for m, d in zip(measured, at_default))
    tight = [{**m, "measured_s": [m["median_s"]] * 2} for m in measured]
    loose = [{**m, "measured_s": [m["median_s"] * 1.3, m["median_s"] / 1.3]} for m in measured]
    fitted, _ = calibration.fit_tcp(topo, routes, tight, SCALE, None, 0.0, 0.0)
    assert fitted["window_segments"] == truth["window_segments"]
    kept, _ = calibration.fit_tcp(topo, routes, loose, SCALE, None, 0.0, 0.0)
    assert kept["window_segments"] == flowsim.TCP_DEFAULTS["window_segments"]


def test_many_flows_on_a_shallow_port_are_charged_and_the_parameters_matter():
    # 16 hosts all-to-all at once: 15 flows into every 64 KiB port need 60 segments of minimum
    # window against 45 held: the steady rule charges timeouts; a deeper buffer does not.
    topo = _star()
    routes = routing.route(topo, "updown")
    graph = calibration.concurrent_alltoall(16, 1 << 20, topo)
    shallow = flowsim.simulate(routes, graph, executor="dag", nct=15)
    assert shallow["timeouts"] > 0
    fewer = flowsim.simulate(routes, graph, executor="dag", nct=15, tcp={"steady_segments_per_timeout": 40.0})
    assert fewer["makespan_s"] < shallow["makespan_s"]
    deep = topo.with_switching("ethernet", 1 << 20)
    lossless = flowsim.simulate(routing.route(deep, "updown"), graph, executor="dag", nct=15)
    assert lossless["timeouts"] == 0 and lossless["makespan_s"] < fewer["makespan_s"]


def test_the_fit_recovers_host_streams_on_a_lossless_fabric():
    topo = _star().with_switching("infiniband", None)
    routes = routing.route(topo, "updown")
    points = [{"kind": "concurrent", "hosts": HOSTS, "bytes": b} for b in calibration.STEADY_BYTES]
    # Every send streaming at once meets the bound, each host's 15 messages over its link at links
    # × SCALE; two at a time in unrelated orders meet at receivers while other links idle.
    every, two = _measured(topo, routes, points, {}), _measured(topo, routes, points, {}, streams=2)
    for p, a, b in zip(points, every, two):
        bound = (HOSTS - 1) * p["bytes"] / (1e9 * SCALE / 8)
        assert a["median_s"] == pytest.approx(bound, rel=1e-3)
        assert b["median_s"] > 1.3 * bound
    fit, error = calibration.fit_tcp(topo, routes, two, SCALE, None, 0.0, 0.0)
    assert fit == {"host_streams": 2} and error < 1e-9
    # Measured at the bound: every send streams, which the file does not state.
    assert calibration.fit_tcp(topo, routes, every, SCALE, None, 0.0, 0.0)[0] == {}


def test_a_native_mpi_streams_as_its_own_section_says():
    # The file's host_streams are netweave's executor's; a library's own decide its schedule's.
    topo = _star().with_switching("infiniband", None)
    routes = routing.route(topo, "updown")
    own = {"ranks": HOSTS, "eager_limit_bytes": 65536, "collectives": {"alltoall": {"parameters": {}}}}
    doc = calibration._document(topo, 1.0, None, {"overhead_s": 0.0, "sync_s": 0.0, "host_streams": 1}, {}, None,
                                {"openmpi": {**own, "host_streams": 1}, "mpich": own})
    placed = list(range(HOSTS))
    for library, nbytes, follows in (("openmpi", 1 << 17, True), ("mpich", 1 << 14, False)):
        sched, info = plan.native_workload(library, "alltoall", placed, nbytes)
        assert info["concurrent_sends"] > 1
        streamed = plan.predict_native(routes, sched, library, info, HOSTS, nbytes, doc)["makespan_s"]
        every = plan.predict_native(routes, sched, library, info, HOSTS, nbytes)["makespan_s"]
        assert (streamed > 1.2 * every) is follows, library
        assert (streamed == every) is not follows, library


def test_a_calibration_file_round_trips_and_old_files_still_load(tmp_path):
    topo = _star()
    routes = routing.route(topo, "updown")
    graph = calibration.concurrent_alltoall(16, 1 << 20, topo)
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
                                         ({"steady_free_segments": -3.0}, "before steady timeouts"),
                                         ({"survival_per_segment": 1.5}, "survival per segment"),
                                         ({"timestamps": 2}, "timestamps must be true or false")])
def test_bad_tcp_parameters_are_refused_in_one_line(bad, needle):
    topo = _star()
    doc = calibration._document(topo, 1.0, None, {"tcp": bad}, {}, None)
    with pytest.raises(NetweaveError, match=needle) as e:
        flowsim.simulate(routing.route(topo, "updown"), calibration.incast(2, 1000, HOSTS), executor="dag",
                         calibration=doc)
    assert len(str(e.value).splitlines()) == 1


@pytest.mark.parametrize("streams", [0, 2.5, True, "2"])
def test_bad_host_streams_are_refused_in_one_line(streams):
    topo = _star()
    doc = calibration._document(topo, 1.0, None, {"host_streams": streams}, {}, None)
    needle = "host_streams must be a whole number of sends"
    with pytest.raises(NetweaveError, match=needle) as e:
        flowsim.simulate(routing.route(topo, "updown"), calibration.incast(2, 1000, HOSTS), executor="dag",
                         calibration=doc)
    assert len(str(e.value).splitlines()) == 1


# The native MPIs' host cost (calibration's ``native`` section).

#: Costs the synthetic measurements below are made with: per message up to the eager limit, above
#: it, per byte.
EAGER_S, RENDEZVOUS_S, BYTE_S = 0.04, 0.06, 1e-7


def test_the_native_fit_recovers_costs_from_measurements_computed_by_hand():
    # One collective's points, at two link scales: the model's time without the library's cost,
    # how many messages sit on the call's critical path (the 4 a binomial gather's root of 16
    # takes in) and how many bytes (their subtrees of 1, 2, 4 and 8 ranks: 15 blocks);
    # measured = model + messages × per-message cost + bytes × per-byte cost.
    def point(nbytes, model_s):
        regime = EAGER_S if nbytes <= 65536 else RENDEZVOUS_S
        return {"collective": "gather", "bytes": nbytes, "model_s": model_s, "per_cost": 4.0,
                "per_byte_cost": 15.0 * nbytes, "measured_s": model_s + 4 * regime + 15 * nbytes * BYTE_S}

    points = [point(16384, 0.0393), point(131072, 0.3146), point(1048576, 2.5166),
              point(16384, 0.0079), point(131072, 0.0629), point(1048576, 0.5033)]
    params, error = calibration.fit_native(points, eager_limit=65536)
    assert params == pytest.approx({"eager_s": EAGER_S, "rendezvous_s": RENDEZVOUS_S, "byte_s": BYTE_S}, rel=1e-9)
    assert error == pytest.approx(0.0, abs=1e-18)
    # A library the model already predicts (or over-predicts) costs nothing: never a negative cost.
    faster = [{**p, "measured_s": p["model_s"] * 0.9} for p in points]
    assert calibration.fit_native(faster, eager_limit=65536)[0] == {"eager_s": 0.0, "rendezvous_s": 0.0, "byte_s": 0.0}


@pytest.mark.parametrize("library, link_layer, streams", [("mpich", "ethernet", None), ("openmpi", "infiniband", 2)])
def test_the_native_fit_recovers_costs_the_flow_model_charged(library, link_layer, streams):
    # Measurements a fabric obeying the model with these costs (and, for Open MPI's linear
    # all-to-all, two streams per rank) would give: the fit, which reads the model's sensitivity
    # to the cost from two predictions for each grid value of the streams, finds them again.
    topo = _star() if link_layer == "ethernet" else _star().with_switching(link_layer, None)
    routes = routing.route(topo, "updown")
    # The gather also measured on links five times faster; each collective gets its own costs
    # (here the same, so that the streams, chosen with one set of costs for both, are exact).
    # MPICH's 16 ranks pair by XOR above 32 KiB, and cost twice as much per message as the 15
    # ranks paired by shift (measured as calibrate does, ∝ ranks); its XOR points are all
    # above the eager limit, so they say nothing of an eager cost.
    same = {"eager_s": EAGER_S, "rendezvous_s": RENDEZVOUS_S, "byte_s": BYTE_S}
    costs = {"gather": same, "alltoall": same}
    if library == "mpich":
        costs["alltoall_xor"] = {"eager_s": 0.0, "rendezvous_s": 2 * RENDEZVOUS_S, "byte_s": 2 * BYTE_S}
    section = {"eager_limit_bytes": 65536, "collectives": {c: {"parameters": p} for c, p in costs.items()}}
    runs = []
    for collective, scale, ranks in (("gather", SCALE, HOSTS), ("gather", 5 * SCALE, HOSTS),
                                     ("alltoall", SCALE, HOSTS), ("alltoall", SCALE, HOSTS - 1)):
        scaled = emulate.scaled_routes(routes, emulate.predicted_topology(topo, scale))
        for nbytes in (16384, 131072, 1048576):
            if ranks < HOSTS and calibration.cost_key(library, collective, HOSTS, nbytes) == collective:
                continue  # one rank fewer only where the pairing differs
            run = {"library": library, "collective": collective, "bytes": nbytes, "ranks": ranks, "scale": scale}
            charged = calibration.message_costs(section, nbytes,
                                                calibration.cost_key(library, collective, ranks, nbytes))
            # A gather's ranks post one send each: only the all-to-all has streams to limit.
            few = streams if collective == "alltoall" else None
            runs.append({**run, "measured_s": calibration._native_prediction(scaled, run, None, charged, few, HOSTS)})
    native = calibration.fit_natives(topo, routes, SCALE, None, None, runs)[library]
    # With fewer streams than sends a message's cost also delays the sends queued behind it: the
    # sensitivity moves with the cost, and the fit's secant rounds close in on it.
    assert set(native["collectives"]) == set(costs)
    for key, params in costs.items():
        entry = native["collectives"][key]
        assert entry["parameters"] == pytest.approx(params, rel=1e-3 if streams is None else 1e-2), key
    assert native.get("host_streams") == streams
    assert native["ranks"] == HOSTS and len(native["measurements"]) == len(runs) == (11 if library == "mpich" else 9)
    for point in native["measurements"]:
        assert point["predicted_s"] == pytest.approx(point["measured_s"], rel=1e-3 if streams is None else 1e-2)
        assert point["model_s"] < point["measured_s"]


def _native_document(topo, native):
    return calibration._document(topo, 1.0, None, {"overhead_s": 1e-5, "sync_s": 2e-5}, {}, 0.0, native)


MPICH_SECTION = {"ranks": 8, "eager_limit_bytes": 65536,
                 "collectives": {"gather": {"parameters": {"eager_s": EAGER_S, "rendezvous_s": RENDEZVOUS_S}},
                                 "alltoall": {"parameters": {"eager_s": EAGER_S, "rendezvous_s": RENDEZVOUS_S,
                                                             "byte_s": BYTE_S}}}}


def test_a_calibration_with_native_costs_round_trips_and_plan_charges_them(tmp_path):
    topo = _star()
    routes = routing.route(topo, "updown")
    path = tmp_path / "cal.json"
    calibration.write(_native_document(topo, {"mpich": MPICH_SECTION}), path)
    back = calibration.load(path, topo)
    assert back["native"] == {"mpich": MPICH_SECTION}
    placed, nbytes = list(range(HOSTS)), 131072
    rows = {r.name: r for r in plan.native_candidates(routes, placed, nbytes, lambda _m: None, "gather",
                                                      calibration=path)}
    # MPICH: every message of a gather costs the gather's rendezvous cost (its entry states no
    # per-byte cost), measured on 8 ranks and charged for 16 (twice: ranks taking turns on the
    # cores), to its receiver; an all-to-all's messages cost its entry's, per byte too, and an
    # all-gather's the all-to-all's (the calibration does not time it).
    sched, info = plan.native_workload("mpich", "gather", placed, nbytes)
    cost = RENDEZVOUS_S * HOSTS / 8
    assert calibration.native_overhead(back, "mpich", HOSTS, nbytes, "gather") == pytest.approx((cost, 0.0))
    assert calibration.native_overhead(back, "mpich", HOSTS, nbytes, "alltoall") == pytest.approx(
        (cost, BYTE_S * HOSTS / 8))
    assert calibration.native_overhead(back, "mpich", HOSTS, nbytes, "allgather") == pytest.approx(
        (cost, BYTE_S * HOSTS / 8))
    # 16 ranks at 128 KiB pair by XOR: a section with its own XOR costs charges those, one with
    # none the shift's; 15 ranks pair by shift either way.
    xor = {"parameters": {"rendezvous_s": 3 * RENDEZVOUS_S}}
    with_xor = _native_document(topo, {"mpich": {**MPICH_SECTION, "collectives": {**MPICH_SECTION["collectives"],
                                                                                  "alltoall_xor": xor}}})
    assert calibration.native_overhead(with_xor, "mpich", HOSTS, nbytes, "alltoall") == pytest.approx((3 * cost, 0.0))
    assert calibration.native_overhead(with_xor, "mpich", HOSTS - 1, nbytes, "alltoall") == pytest.approx(
        (RENDEZVOUS_S * (HOSTS - 1) / 8, BYTE_S * (HOSTS - 1) / 8))
    gather_only = {"mpich": {**MPICH_SECTION, "collectives": {"gather": MPICH_SECTION["collectives"]["gather"]}}}
    assert calibration.native_overhead(_native_document(topo, gather_only), "mpich", HOSTS, nbytes, "alltoall") is None
    charged = flowsim.simulate(routes, sched, executor=info["executor"], nct=info["concurrent_sends"], overhead_s=0.0,
                               receive_s=cost)
    assert rows["mpich"].predicted_time_s == pytest.approx(charged["makespan_s"])
    # The root takes in its 4 children's subtrees one after another: at least 4 costs more.
    plain = plan.native_candidates(routes, placed, nbytes, lambda _m: None, "gather")
    assert rows["mpich"].predicted_time_s > plain[1].predicted_time_s + 4 * cost * 0.99
    # Open MPI has no section: its row is predicted with the calibration's overhead, as before.
    sched, info = plan.native_workload("openmpi", "gather", placed, nbytes)
    assert rows["openmpi"].predicted_time_s == pytest.approx(
        plan.predict(routes, sched, info["executor"], info["concurrent_sends"], path)["makespan_s"])
    # A file written before the native section existed (same version) still loads and changes nothing.
    old = tmp_path / "old.json"
    calibration.write(_native_document(topo, None), old)
    assert "native" not in json.loads(old.read_text())
    assert calibration.native_overhead(calibration.load(old, topo), "mpich", HOSTS, nbytes, "gather") is None
    before = {r.name: r.predicted_time_s for r in plan.native_candidates(routes, placed, nbytes, lambda _m: None,
                                                                         "gather", calibration=old)}
    assert before["mpich"] < rows["mpich"].predicted_time_s
    assert before["openmpi"] == rows["openmpi"].predicted_time_s


@pytest.mark.parametrize("native, needle", [
    ([1, 2], "\"native\" must map"),
    ({"lam": MPICH_SECTION}, "native.lam: unknown MPI library"),
    ({"mpich": {**MPICH_SECTION, "ranks": 0}}, "native.mpich.ranks"),
    ({"mpich": {**MPICH_SECTION, "collectives": {"gather": {"parameters": {"eager_s": -1.0}}}}},
     "native.mpich.collectives.gather.parameters.eager_s"),
    ({"mpich": {**MPICH_SECTION, "collectives": {"gather": {"parameters": {"latency_s": 1.0}}}}}, "may hold only"),
    ({"mpich": {**MPICH_SECTION, "host_streams": 0}}, "native.mpich.host_streams"),
    ({"mpich": {**MPICH_SECTION, "collectives": {"bcast": {"parameters": {}}}}}, "not a cost the calibration measures"),
    ({"mpich": {**MPICH_SECTION, "parameters": {"eager_s": 0.1}}}, "native.mpich must be an object with only"),
])
def test_a_malformed_native_section_is_refused_in_one_line(tmp_path, native, needle):
    topo = _star()
    topo_file, path = tmp_path / "star.json", tmp_path / "cal.json"
    topology.save(topo, topo_file)
    calibration.write(_native_document(topo, native), path)
    proc = run_cli("plan", str(topo_file), "--bytes", "16384", "--calibration", str(path), check=False)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_short_calls_are_timed_more_and_averaged_over_every_call():
    # A 1 s call is timed three times; a 40 ms one first three times, then as many more as two
    # seconds hold at that pace; a 1 ms one up to the cap. The mean weighs every timed call.
    asked = []

    def measure(means):
        def run(reps):
            asked.append(reps)
            return means[len(asked) - 1]
        return run
    assert calibration.timed(measure([1.0])) == (1.0, 3) and asked == [3]
    asked.clear()
    mean, calls = calibration.timed(measure([0.04, 0.05]))
    assert (calls, asked) == (50, [3, 47])
    assert mean == pytest.approx((3 * 0.04 + 47 * 0.05) / 50)
    asked.clear()
    assert calibration.timed(measure([0.001, 0.001]))[1] == calibration.MAX_TIMED_CALLS
    assert asked == [3, calibration.MAX_TIMED_CALLS - 3]


def test_xor_paired_calls_are_measured_on_one_rank_fewer_too(monkeypatch):
    # MPICH pairs 16 ranks by XOR above its scattered all-to-all's 32 KiB, 15 by shift: the
    # calibration times those sizes on both, and every other call (Open MPI's, the gathers,
    # MPICH's scattered 16 KiB) on the calibration's ranks alone.
    timed = []
    monkeypatch.setattr(calibration, "run_native", lambda _fabric, library, collective, nbytes, ranks, placed, _reps:
                        timed.append((library, collective, nbytes, ranks, placed == list(range(ranks)))) or 1.0)
    runs = calibration.measure_natives(None, HOSTS, ("gather", "alltoall"), lambda _m: None, SCALE)
    fewer = {(lib, c, b) for lib, c, b, ranks, _ in timed if ranks == HOSTS - 1}
    assert fewer == {("mpich", "alltoall", 131072), ("mpich", "alltoall", 1048576)}
    assert len(timed) == len(runs) == 2 * 2 * len(calibration.NATIVE_SIZES) + 2
    assert all(on_first_hosts for *_, on_first_hosts in timed)
    assert [r["ranks"] for r in runs] == [ranks for *_, ranks, _ in timed]
