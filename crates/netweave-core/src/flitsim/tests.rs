//! Unit tests of the flit-level simulator: worked zero-load timings, conservation,
//! determinism, the watchdog and the refusals.

use super::*;
use crate::scenario::build_network;

/// A config from `pairs`, on one thread unless they say otherwise: the tests run side by side,
/// and a simulation's helper threads spin.
fn cfg(pairs: &[(&str, &str)]) -> SimConfig {
    let mut c = SimConfig::default();
    c.threads = 1;
    for (k, v) in pairs {
        c.set(k, v).unwrap();
    }
    c
}

fn one_message(src: u32, dst: u32, hosts: u32, flits: u64) -> Schedule {
    Schedule::from_phases("one", hosts, vec![vec![Message { src, dst, bytes: flits }]]).unwrap()
}

fn batch(topo: &Topology, routes: &RoutingTable, c: &SimConfig, s: &Schedule) -> BatchResult {
    match simulate(topo, routes, c, Some(s), &|_| {}).unwrap() {
        SimResult::Batch(b) => b,
        other => panic!("not a batch: {other:?}"),
    }
}

#[test]
fn zero_load_latency_matches_the_pipeline() {
    // BookSim's zero-load latency: 4 cycles per router (route, VC alloc, switch alloc,
    // crossbar), the links between routers, 3 cycles of host links and retirement, and the
    // body one flit per cycle behind the head.
    for (family, link) in [("mesh", 1u64), ("torus", 2u64)] {
        for flits in [1u64, 5] {
            let c = cfg(&[("topology", family), ("k", "8"), ("n", "1"), ("sim_type", "batch"), ("packet_size", "5")]);
            let (t, r) = build_network(&c).unwrap();
            for dst in [0u32, 1, 3] {
                let b = batch(&t, &r, &c, &one_message(0, dst, 8, flits));
                let routers = dst as u64 + 1;
                let expect = routers * 4 + (routers - 1) * link + 3 + (flits - 1);
                assert_eq!(b.packet_latency.max, expect, "{family} dst {dst} flits {flits}");
            }
        }
    }
}

#[test]
fn every_message_of_an_alltoall_arrives() {
    for sync in ["none", "local", "phase"] {
        let c = cfg(&[
            ("k", "3"),
            ("sim_type", "batch"),
            ("packet_size", "4"),
            ("message_flits", "10"),
            ("batch_sync", sync),
        ]);
        let (t, r) = build_network(&c).unwrap();
        let s = schedule_of(&t, &c).unwrap();
        let b = batch(&t, &r, &c, &s);
        assert_eq!(b.messages, 9 * 8);
        assert_eq!(b.flits, 9 * 8 * 10);
        assert_eq!(b.packet_latency.count, 9 * 8 * 3);
        assert_eq!(b.completion_cycles, *b.host_finish.iter().max().unwrap());
    }
}

#[test]
fn phase_sync_is_slower_than_free_dispatch() {
    let run = |sync: &str| {
        let c = cfg(&[
            ("k", "4"),
            ("sim_type", "batch"),
            ("packet_size", "8"),
            ("message_flits", "16"),
            ("batch_sync", sync),
        ]);
        let (t, r) = build_network(&c).unwrap();
        let s = schedule_of(&t, &c).unwrap();
        batch(&t, &r, &c, &s).completion_cycles
    };
    assert!(run("phase") >= run("none"));
}

#[test]
fn request_reply_completes_after_the_reply() {
    let base = [("topology", "mesh"), ("k", "4"), ("n", "1"), ("sim_type", "batch"), ("packet_size", "8")];
    let c = cfg(&base);
    let (t, r) = build_network(&c).unwrap();
    let s = one_message(0, 3, 4, 8);
    let plain = batch(&t, &r, &c, &s).completion_cycles;
    let mut rr = c.clone();
    rr.set("request_reply", "1").unwrap();
    rr.set("reply_size", "1").unwrap();
    let with_reply = batch(&t, &r, &rr, &s).completion_cycles;
    // The reply crosses the same 4 routers back: 4·4 + 3 links + 3 cycles.
    assert_eq!(with_reply - plain, 4 * 4 + 3 + 3);
}

#[test]
fn open_loop_is_deterministic_and_sane() {
    let c = cfg(&[("k", "4"), ("packet_size", "4"), ("injection_rate", "0.05"), ("sample_period", "500")]);
    let (t, r) = build_network(&c).unwrap();
    let a = simulate(&t, &r, &c, None, &|_| {}).unwrap();
    let b = simulate(&t, &r, &c, None, &|_| {}).unwrap();
    assert_eq!(a, b);
    let SimResult::OpenLoop(a) = a else { panic!() };
    assert!(!a.saturated);
    assert!((a.accepted_flits - 0.2).abs() < 0.03, "accepted {}", a.accepted_flits);
    assert!(a.packet_latency.min <= a.network_latency.max);
    assert!(a.network_latency.avg <= a.packet_latency.avg);
    // Uniform on a 4x4 torus: 1 + 16 pairs' average of 2 hops; routers crossed = hops + 1.
    assert!((a.hops - 3.0).abs() < 0.15, "hops {}", a.hops);
}

#[test]
fn booksim_torus_routes_bitcomp_with_its_dateline_classes() {
    // An 8-ring under bit-complement (x -> 7 - x), entered from the host port: the shorter
    // way round, and class 1 exactly when the source coordinate is above the destination's
    // (BookSim's rule, also for a minus-going packet that never wraps).
    let c = cfg(&[("k", "8"), ("n", "1"), ("packet_size", "4")]);
    let (t, r) = build_network(&c).unwrap();
    let mut sim = engine::Sim::new(&t, &r, &c).unwrap();
    sim.use_booksim_torus(t.lattice_with_hosts().unwrap()).unwrap();
    let (plus, minus) = (2, 3);
    let expected = [
        (0, minus, 0),
        (1, minus, 0),
        (2, plus, 0),
        (3, plus, 0),
        (4, minus, 1),
        (5, minus, 1),
        (6, plus, 1),
        (7, plus, 1),
    ];
    for (src, port, class) in expected {
        let bt = sim.booksim_torus.as_ref().unwrap();
        assert_eq!(bt.route(0, src as usize, 1, 7 - src, 0, 0), (port, class), "source {src}");
        // Arriving on the minus port (from the plus neighbour), a packet keeps going minus, in
        // the class it entered the dimension with.
        let arrived_from_plus = bt.route(0, src as usize, plus, 7 - src, 0, class as u8);
        assert_eq!(arrived_from_plus, (minus, class), "source {src} in transit");
    }
}

#[test]
fn torus_bitcomp_saturates_where_booksim_does() {
    // 8x8 torus, dim_order, 2 VCs (one per dateline class), 8-flit buffers, 4-flit packets,
    // offered 1 flit per host per cycle: BookSim2 accepts 0.25 flits/host/cycle. The router-
    // wide rotating VC-allocation pointer this replaced starved inputs and accepted 0.206.
    let run = |alloc: &str| {
        let c = cfg(&[
            ("k", "8"),
            ("packet_size", "4"),
            ("traffic", "bitcomp"),
            ("sim_type", "throughput"),
            ("injection_rate", "0.25"),
            ("sample_period", "500"),
            ("vc_allocator", alloc),
        ]);
        let (t, r) = build_network(&c).unwrap();
        let SimResult::OpenLoop(o) = simulate(&t, &r, &c, None, &|_| {}).unwrap() else { panic!() };
        o.accepted_flits
    };
    let islip = run("islip");
    assert!((islip - 0.25).abs() < 0.0125, "iSLIP VC allocation accepted {islip}");
    let greedy = run("separable_input_first");
    assert!(greedy < 0.23, "the greedy VC pass accepted {greedy}");
}

#[test]
fn saturation_is_detected() {
    let c = cfg(&[
        ("topology", "mesh"),
        ("k", "4"),
        ("packet_size", "4"),
        ("injection_rate", "0.24"),
        ("sample_period", "300"),
    ]);
    let (t, r) = build_network(&c).unwrap();
    let s = sweep(&t, &r, &c, &[0.02, 0.24], &|_| {}).unwrap();
    assert!(!s.points[0].saturated);
    assert!(s.points[1].saturated);
    assert_eq!(s.saturation_rate, Some(0.24));
}

#[test]
fn every_knob_still_delivers() {
    for extra in [
        [("vct", "1"), ("vc_buf_size", "8")],
        [("hold_switch_for_packet", "1"), ("vc_buf_size", "4")],
        [("arb_type", "age"), ("num_vcs", "4")],
        [("injection_ports", "2"), ("routing_delay", "0")],
        [("sw_allocator", "separable_input_first"), ("routing_function", "dor")],
        [("arb_type", "age"), ("sw_allocator", "separable_input_first")],
    ] {
        let mut c = cfg(&[("k", "4"), ("sim_type", "batch"), ("packet_size", "8"), ("message_flits", "20")]);
        for (k, v) in extra {
            c.set(k, v).unwrap();
        }
        let (t, r) = build_network(&c).unwrap();
        let s = schedule_of(&t, &c).unwrap();
        let b = batch(&t, &r, &c, &s);
        assert_eq!(b.messages, 16 * 15, "{extra:?}");
    }
}

#[test]
fn a_cyclic_routing_deadlocks_and_is_reported() {
    // One VC and shortest paths round a ring: the wrap-around closes a credit loop.
    let c = cfg(&[
        ("k", "8"),
        ("n", "1"),
        ("num_vcs", "1"),
        ("routing_function", "minhop"),
        ("packet_size", "16"),
        ("vc_buf_size", "2"),
        ("sim_type", "batch"),
        ("schedule", "tornado"),
        ("message_flits", "64"),
        ("deadlock_cycles", "200"),
    ]);
    let (t, r) = build_network(&c).unwrap();
    let err = simulate(&t, &r, &c, None, &|_| {}).unwrap_err().to_string();
    assert!(err.contains("deadlock") && err.contains("blocked"), "{err}");
}

#[test]
fn an_open_loop_deadlock_is_told_from_saturation() {
    // A torus routed by shortest paths on one VC, at a load far past saturation: the run used
    // to end "saturated" with nothing accepted; the watchdog now names the blocked channels.
    let base = [
        ("topology", "torus"),
        ("k", "4"),
        ("n", "2"),
        ("num_vcs", "1"),
        ("routing_function", "minhop"),
        ("packet_size", "8"),
        ("vc_buf_size", "4"),
        ("traffic", "uniform"),
    ];
    for sim_type in ["latency", "throughput"] {
        let c = cfg(&[base.as_slice(), &[("injection_rate", "0.4"), ("sim_type", sim_type)]].concat());
        let (t, r) = build_network(&c).unwrap();
        let err = simulate(&t, &r, &c, None, &|_| {}).unwrap_err().to_string();
        assert!(err.contains("deadlock") && err.contains("blocked VCs") && err.contains("->"), "{sim_type}: {err}");
    }
    // The same torus with dateline VCs saturates at that load: reported as saturated, no error.
    let c = cfg(&[
        ("topology", "torus"),
        ("k", "4"),
        ("n", "2"),
        ("num_vcs", "2"),
        ("packet_size", "8"),
        ("vc_buf_size", "4"),
        ("injection_rate", "0.4"),
    ]);
    let (t, r) = build_network(&c).unwrap();
    let SimResult::OpenLoop(res) = simulate(&t, &r, &c, None, &|_| {}).unwrap() else { panic!("open loop") };
    assert!(res.saturated && res.accepted_flits > 0.0);
}

#[test]
fn impossible_combinations_are_refused() {
    let bad = |pairs: &[(&str, &str)]| {
        let c = cfg(pairs);
        let (t, r) = build_network(&c)?;
        simulate(&t, &r, &c, None, &|_| {}).map(|_| ())
    };
    assert!(bad(&[("vct", "1"), ("packet_size", "10"), ("vc_buf_size", "8")]).is_err());
    assert!(bad(&[("num_vcs", "3")]).is_err()); // dateline DOR needs a multiple of 2
    assert!(bad(&[("num_vcs", "1"), ("k", "4")]).is_err());
    assert!(bad(&[("traffic", "bitcomp"), ("k", "3")]).is_err());
    assert!(bad(&[("num_vcs", "17")]).is_err()); // beyond the routing layer's VCs
    assert!(bad(&[("num_vcs", "8"), ("k", "3"), ("vc_per_destination", "1")]).is_err()); // 9 hosts
    assert!(SimConfig::default().set("num_vcs", "5000").is_err());
    assert!(SimConfig::default().set("num_vc", "2").is_err());
    assert!(SimConfig::default().set("injection_rate", "-1").is_err());
}

#[test]
fn one_vc_per_destination_keeps_every_destination_apart() {
    // Paper 001's E1: the packet to host d takes VC d on every channel, so each VC carries
    // one destination's DOR tree — no cycle even on the torus without a dateline — and an
    // all-to-all of packets ten times the 2-flit buffers completes, with more VCs than the
    // routing layer defines.
    for topology in ["mesh", "torus"] {
        let c = cfg(&[
            ("topology", topology),
            ("k", "5"),
            ("sim_type", "batch"),
            ("packet_size", "20"),
            ("message_flits", "20"),
            ("vc_buf_size", "2"),
            ("num_vcs", "25"),
            ("vc_per_destination", "1"),
        ]);
        let (t, r) = build_network(&c).unwrap();
        let s = schedule_of(&t, &c).unwrap();
        let b = batch(&t, &r, &c, &s);
        assert_eq!(b.messages, 25 * 24, "{topology}");
        assert_eq!(b.flits, 25 * 24 * 20);
    }
    // The VC a packet holds is its destination's, from injection to ejection.
    let c = cfg(&[("k", "3"), ("packet_size", "4"), ("num_vcs", "9"), ("vc_per_destination", "1")]);
    let (t, r) = build_network(&c).unwrap();
    let sim = engine::Sim::new(&t, &r, &c).unwrap();
    for dst in [1u32, 5, 8] {
        assert_eq!(sim.vc_class_of(0, dst), dst as usize);
    }
}

/// `cfg` on `topo`/`routes` split over `ranks` thread-ranks: every rank's result, with the
/// partition report of rank 0, or the first error.
fn run_split(
    topo: &Topology,
    routes: &RoutingTable,
    c: &SimConfig,
    ranks: usize,
) -> crate::error::Result<(Vec<SimResult>, PartitionReport)> {
    let mut results = Vec::new();
    let mut report = None;
    for run in run_ranks(topo, routes, c, Job::Config, partition::local_group(ranks)) {
        let (r, rep) = run?;
        results.push(r);
        report.get_or_insert(rep);
    }
    Ok((results, report.unwrap()))
}

/// `job` split over the thread-ranks `group`, each on its own thread: every rank's outcome.
fn run_ranks(
    topo: &Topology,
    routes: &RoutingTable,
    c: &SimConfig,
    job: Job,
    group: Vec<partition::LocalExchange>,
) -> Vec<crate::error::Result<(SimResult, PartitionReport)>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = group
            .into_iter()
            .map(|link| s.spawn(move || simulate_partitioned(topo, routes, c, job, Box::new(link), &|_| {})))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Every result field of `cfg` on `topo`/`routes` with 1, 2 and 3 threads, and split over 2
/// and 3 ranks: they must be equal.
fn same_with_any_split(topo: &Topology, routes: &RoutingTable, base: &SimConfig, label: &str) {
    let run = |threads: &str| {
        let mut c = base.clone();
        c.set("threads", threads).unwrap();
        simulate(topo, routes, &c, None, &|_| {}).unwrap()
    };
    let one = run("1");
    for threads in ["2", "3"] {
        assert_eq!(run(threads), one, "{label}: {threads} threads differ from one");
    }
    for ranks in [2, 3] {
        let (results, report) =
            run_split(topo, routes, base, ranks).unwrap_or_else(|e| panic!("{label}, {ranks} ranks: {e}"));
        assert!(report.cut_channels > 0 && report.exchanges > 0, "{label}: {report:?}");
        for (k, r) in results.iter().enumerate() {
            assert_eq!(*r, one, "{label}: rank {k} of {ranks} differs from the one-process run");
        }
    }
}

#[test]
fn threads_and_ranks_do_not_change_results() {
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::dragonfly::{dragonfly, GlobalArrangement};
    use crate::topology::fat_tree::k_ary_n_tree;
    let open = |extra: &[(&str, &str)]| {
        let mut pairs =
            vec![("injection_rate", "0.03"), ("packet_size", "4"), ("sample_period", "300"), ("max_samples", "4")];
        pairs.extend_from_slice(extra);
        cfg(&pairs)
    };
    let batch = |extra: &[(&str, &str)]| {
        let mut pairs = vec![("sim_type", "batch"), ("message_flits", "6"), ("packet_size", "3")];
        pairs.extend_from_slice(extra);
        cfg(&pairs)
    };
    // A torus with BookSim's dim_order (its coin-flip ties and dateline classes) and a mesh with
    // the table's DOR, open-loop and batch.
    for (family, mode) in [("torus", "open"), ("torus", "batch"), ("mesh", "open"), ("mesh", "batch")] {
        // An even k: BookSim's torus routing meets ties (distance k/2) and flips its coin.
        let shape = [("topology", family), ("k", "6"), ("n", "2"), ("num_vcs", "2")];
        let c = if mode == "open" { open(&shape) } else { batch(&shape) };
        let (t, r) = build_network(&c).unwrap();
        same_with_any_split(&t, &r, &c, &format!("{family} {mode}"));
    }
    // A fat-tree with d-mod-k and a dragonfly with Nue.
    let ft = k_ary_n_tree(4, 2).unwrap();
    let ft_routes = route(&ft, Engine::DModK, &RouteOptions::default()).unwrap();
    let df = dragonfly(4, 2, 2, None, GlobalArrangement::Absolute).unwrap();
    let df_routes = route(&df, Engine::Nue, &RouteOptions { max_vcs: 4, ..RouteOptions::default() }).unwrap();
    for (t, r, name) in [(&ft, &ft_routes, "fat-tree dmodk"), (&df, &df_routes, "dragonfly nue")] {
        let vcs = r.vc_policy().num_vcs.max(1).to_string();
        same_with_any_split(t, r, &open(&[("num_vcs", &vcs)]), &format!("{name} open"));
        same_with_any_split(t, r, &batch(&[("num_vcs", &vcs)]), &format!("{name} batch"));
    }
}

#[test]
fn ranks_run_windows_as_long_as_the_links_allow() {
    // Long links and a credit delay give a lookahead of 3 cycles (a credit back to a host:
    // 1 + 2); the ranks swap mail every third cycle and still agree with the one-process run.
    for mode in ["latency", "batch"] {
        let c = cfg(&[
            ("topology", "mesh"),
            ("k", "5"),
            ("n", "2"),
            ("channel_latency", "4"),
            ("host_channel_latency", "2"),
            ("credit_delay", "1"),
            ("injection_rate", "0.04"),
            ("packet_size", "4"),
            ("sample_period", "300"),
            ("max_samples", "4"),
            ("sim_type", mode),
            ("message_flits", "9"),
        ]);
        let (t, r) = build_network(&c).unwrap();
        let one = simulate(&t, &r, &c, None, &|_| {}).unwrap();
        let (results, report) = run_split(&t, &r, &c, 3).unwrap();
        assert_eq!(report.lookahead, 3, "{mode}");
        let cycles = match &one {
            SimResult::OpenLoop(o) => o.cycles,
            SimResult::Batch(b) => b.completion_cycles,
        };
        // One exchange per window, plus the syncs at sample ends and the drain.
        assert!(report.exchanges >= cycles / 3 && report.exchanges < cycles / 2, "{mode}: {report:?} over {cycles}");
        assert!(results.iter().all(|x| *x == one), "{mode}");
    }
}

#[test]
fn a_deadlock_split_over_ranks_is_reported_as_in_one_process() {
    // A torus on minhop with one VC far past saturation deadlocks; every rank stops with the
    // one-process run's message, the same cycle and the same blocked channels.
    let c = cfg(&[
        ("topology", "torus"),
        ("k", "4"),
        ("n", "2"),
        ("num_vcs", "1"),
        ("routing_function", "minhop"),
        ("packet_size", "8"),
        ("vc_buf_size", "4"),
        ("injection_rate", "0.4"),
        ("deadlock_cycles", "300"),
    ]);
    let (t, r) = build_network(&c).unwrap();
    let one = simulate(&t, &r, &c, None, &|_| {}).unwrap_err().to_string();
    assert!(one.contains("deadlock") && one.contains("blocked VCs"), "{one}");
    for ranks in [2, 3] {
        for run in run_ranks(&t, &r, &c, Job::Config, partition::local_group(ranks)) {
            assert_eq!(run.unwrap_err().to_string(), one, "{ranks} ranks");
        }
    }
}

#[test]
fn a_rank_that_leaves_stops_the_others_with_its_name() {
    let c = cfg(&[("k", "4"), ("injection_rate", "0.05"), ("sample_period", "200")]);
    let (t, r) = build_network(&c).unwrap();
    let mut group = partition::local_group(3);
    drop(group.pop()); // rank 2 never runs
    let errors: Vec<String> =
        run_ranks(&t, &r, &c, Job::Config, group).into_iter().map(|run| run.unwrap_err().to_string()).collect();
    // Whoever finds rank 2 gone stops, and the other then finds that one gone.
    assert!(errors.iter().all(|e| e.contains("left the run")), "{errors:?}");
    assert!(errors.iter().any(|e| e.contains("rank 2 left")), "{errors:?}");
}

#[test]
fn a_task_graph_split_over_ranks_is_the_one_process_run() {
    use crate::traffic::dag::{Dependency, TaskGraph};
    // A gather to host 0 and the release back, each task waiting for what its sender receives.
    let c = cfg(&[("topology", "mesh"), ("k", "4"), ("n", "2"), ("sim_type", "batch"), ("packet_size", "5")]);
    let (t, r) = build_network(&c).unwrap();
    let mut g = TaskGraph::new("gather-release", 16);
    let gathered: Vec<_> = (1..16u32)
        .map(|s| (g.add_task(Message { src: s, dst: 0, bytes: 12 }, &[]).unwrap(), Dependency::Complete))
        .collect();
    for d in 1..16u32 {
        g.add_task(Message { src: 0, dst: d, bytes: 7 }, &gathered).unwrap();
    }
    let one = SimResult::Batch(batch::run_dag(&t, &r, &c, &g, &|b| b as u32, &|_| {}).unwrap());
    let runs = run_ranks(&t, &r, &c, Job::Dag(&g), partition::local_group(3));
    let SimResult::Batch(b) = &one else { panic!("not a batch") };
    assert_eq!(b.task_finish.len(), 30);
    assert!(runs.into_iter().all(|run| run.unwrap().0 == one));
}
