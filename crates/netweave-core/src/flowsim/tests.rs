//! Closed-form cases, executor semantics and the lock-step fluid agreement.

use super::*;
use crate::analysis::analyze;
use crate::routing::{route, shortest_path, Engine, RouteOptions};
use crate::topology::grid::{mesh, torus};
use crate::topology::{LinkSpec, TopologyBuilder};
use crate::traffic::dag::Dependency;

/// 8 Gbit/s = 10⁹ B/s, so 10⁶ bytes take exactly 1 ms.
const GBPS: f64 = 8.0;
const B: f64 = 1e9;
const M: u64 = 1_000_000;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
}

/// `hosts` hosts on one switch; host links `GBPS` and `lat_ns`.
fn star(hosts: usize, lat_ns: f64) -> Topology {
    let mut b = TopologyBuilder::new("star");
    let s = b.add_switch("s", hosts as u16);
    for i in 0..hosts {
        let h = b.add_host(format!("h{i}"));
        b.connect(h, s, LinkSpec::new(GBPS, lat_ns).unwrap()).unwrap();
    }
    b.build().unwrap()
}

/// Two switches joined by one link of `trunk_gbps`; `k` hosts on each with fast links.
fn dumbbell(k: usize, trunk_gbps: f64) -> Topology {
    let mut b = TopologyBuilder::new("dumbbell");
    let l = b.add_switch("l", k as u16 + 1);
    let r = b.add_switch("r", k as u16 + 1);
    b.connect(l, r, LinkSpec::new(trunk_gbps, 0.0).unwrap()).unwrap();
    for side in [l, r] {
        for i in 0..k {
            let h = b.add_host(format!("h{side}.{i}"));
            b.connect(h, side, LinkSpec::new(100.0 * GBPS, 0.0).unwrap()).unwrap();
        }
    }
    b.build().unwrap()
}

fn one_phase(n: u32, msgs: &[(u32, u32, u64)]) -> Schedule {
    Schedule::from_phases("t", n, vec![msgs.iter().map(|&(src, dst, bytes)| Message { src, dst, bytes }).collect()])
        .unwrap()
}

fn run(topo: &Topology, s: &Schedule, cfg: &FlowConfig) -> FlowReport {
    let r = shortest_path(topo).unwrap();
    simulate(topo, &r, s, cfg).unwrap()
}

#[test]
fn one_flow_takes_latency_plus_size_over_bandwidth() {
    let t = star(2, 500.0);
    let rep = run(&t, &one_phase(2, &[(0, 1, M)]), &FlowConfig::new(Executor::Sync));
    assert!(close(rep.makespan_s, M as f64 / B + 2.0 * 500e-9), "{}", rep.makespan_s);
    // The host's uplink is busy exactly the streaming time.
    let up = t.neighbors(t.hosts()[0])[0].channel as usize;
    assert!(close(rep.channel_busy_s[up], 1e-3));
    assert_eq!(rep.channel_bytes[up], M);
    assert!(close(rep.throughput_per_server_mib_s, M as f64 / rep.makespan_s / 1048576.0));
}

#[test]
fn k_flows_on_one_link_share_it_equally() {
    for k in 1..=5 {
        let t = dumbbell(k, GBPS);
        let n = 2 * k as u32;
        let msgs: Vec<_> = (0..k as u32).map(|i| (i, k as u32 + i, M)).collect();
        let rep = run(&t, &one_phase(n, &msgs), &FlowConfig::new(Executor::Async));
        assert!(close(rep.makespan_s, k as f64 * 1e-3), "k={k}: {}", rep.makespan_s);
        assert!(close(rep.max_channel_utilisation, 1.0));
        assert_eq!(rep.reallocations, 2); // all join together, all leave together
    }
}

#[test]
fn unequal_flows_speed_up_when_others_leave() {
    // Two flows on one 1 GB/s trunk: 1 MB and 3 MB. Shared until the small one ends at 2 ms,
    // then the big one has the link alone for its last 2 MB: 4 ms in all.
    let t = dumbbell(2, GBPS);
    let rep = run(&t, &one_phase(4, &[(0, 2, M), (1, 3, 3 * M)]), &FlowConfig::new(Executor::Async));
    assert!(close(rep.makespan_s, 4e-3), "{}", rep.makespan_s);
    assert!(close(rep.host_finish_s[0], 2e-3));
}

#[test]
fn chain_is_limited_by_its_narrowest_link() {
    let mut b = TopologyBuilder::new("chain");
    let s: Vec<_> = (0..3).map(|i| b.add_switch(format!("s{i}"), 3)).collect();
    let h0 = b.add_host("a");
    let h1 = b.add_host("b");
    b.connect(h0, s[0], LinkSpec::new(4.0 * GBPS, 100.0).unwrap()).unwrap();
    b.connect(s[0], s[1], LinkSpec::new(2.0 * GBPS, 200.0).unwrap()).unwrap();
    b.connect(s[1], s[2], LinkSpec::new(GBPS, 300.0).unwrap()).unwrap();
    b.connect(s[2], h1, LinkSpec::new(4.0 * GBPS, 400.0).unwrap()).unwrap();
    let t = b.build().unwrap();
    let rep = run(&t, &one_phase(2, &[(0, 1, M)]), &FlowConfig::new(Executor::Sync));
    assert!(close(rep.makespan_s, 1e-3 + 1000e-9), "{}", rep.makespan_s);
}

#[test]
fn fan_in_shares_the_receivers_link() {
    let k = 6;
    let t = star(k + 1, 0.0);
    let msgs: Vec<_> = (1..=k as u32).map(|i| (i, 0, M)).collect();
    let rep = run(&t, &one_phase(k as u32 + 1, &msgs), &FlowConfig::new(Executor::Sync));
    assert!(close(rep.makespan_s, k as f64 * 1e-3));
    // An ejection limit below the link's halves the rate again.
    let mut cfg = FlowConfig::new(Executor::Sync);
    cfg.ejection_gbps = Some(GBPS / 2.0);
    let rep = run(&t, &one_phase(k as u32 + 1, &msgs), &cfg);
    assert!(close(rep.makespan_s, 2.0 * k as f64 * 1e-3));
}

#[test]
fn sync_executor_matches_lock_step_fluid_time_without_latency() {
    // Phase time under max-min with equal sizes and no latency is max load × M / B, so the
    // run must equal the analysis engine's lock-step sum over phases.
    for (topo, engine) in [
        (mesh(&[4, 3], 1).unwrap(), Engine::Dor),
        (torus(&[5, 4], 1).unwrap(), Engine::Dor),
        (torus(&[3, 3, 2], 2).unwrap(), Engine::MinHop),
    ] {
        let mut topo = topo;
        topo.set_all_links(LinkSpec::new(GBPS, 0.0).unwrap());
        let routes = route(&topo, engine, &RouteOptions::default()).unwrap();
        let n = topo.num_hosts() as u32;
        let sched = Schedule::shift_alltoall(n, M).unwrap();
        let loads = analyze(&topo, &routes, &sched).unwrap();
        let lock_step: f64 = loads.phases.iter().map(|p| p.max_load as f64 * M as f64 / B).sum();
        let rep = simulate(&topo, &routes, &sched, &FlowConfig::new(Executor::Sync)).unwrap();
        assert!(close(rep.makespan_s, lock_step), "{}: {} vs {lock_step}", topo.name(), rep.makespan_s);
        // The analysis engine's own lock-step time (host links bounded too, as here).
        assert!(close(rep.makespan_s, loads.fluid_time_host_links_s), "{}", loads.fluid_time_host_links_s);
        // A barrier cost adds once per phase boundary.
        let mut cfg = FlowConfig::new(Executor::Sync);
        cfg.barrier_s = 1e-6;
        let with_barrier = simulate(&topo, &routes, &sched, &cfg).unwrap();
        let want = lock_step + (sched.num_phases() - 1) as f64 * 1e-6;
        assert!(close(with_barrier.makespan_s, want));
    }
}

#[test]
fn async_and_local_sync_differ_as_paper_001_says() {
    // Phase 0: 0 -> 1 (4 MB). Phase 1: 1 -> 2 (1 MB). Without waiting, host 1 sends at once;
    // with local sync it waits for the 4 MB from host 0 first.
    let t = star(3, 0.0);
    let s = Schedule::from_phases(
        "ls",
        3,
        vec![vec![Message { src: 0, dst: 1, bytes: 4 * M }], vec![Message { src: 1, dst: 2, bytes: M }]],
    )
    .unwrap();
    let a = run(&t, &s, &FlowConfig::new(Executor::Async));
    assert!(close(a.makespan_s, 4e-3));
    assert!(close(a.host_finish_s[2], 1e-3));
    let l = run(&t, &s, &FlowConfig::new(Executor::LocalSync));
    assert!(close(l.makespan_s, 5e-3));
    assert!(close(l.host_finish_s[2], 5e-3));
}

#[test]
fn nct_bounds_concurrent_sends_per_host() {
    // Host 0 sends 1 MB to each of hosts 1..=3. NCT 1: one after another, host 1 done at 1 ms.
    // NCT 3: all three share host 0's link and end together at 3 ms.
    let t = star(4, 0.0);
    let s = one_phase(4, &[(0, 1, M), (0, 2, M), (0, 3, M)]);
    let one = run(&t, &s, &FlowConfig::new(Executor::Async));
    let mut cfg = FlowConfig::new(Executor::Async);
    cfg.nct = 3;
    let three = run(&t, &s, &cfg);
    assert!(close(one.makespan_s, 3e-3) && close(three.makespan_s, 3e-3));
    assert!(close(one.host_finish_s[1], 1e-3));
    assert!(close(three.host_finish_s[1], 3e-3));
}

#[test]
fn host_streams_serve_posted_sends_in_order_within_one_step() {
    // Two phases, one local-sync step (NCT 2): hosts 0 and 1 each send 1 MB to hosts 2 and 3,
    // host 0 posting 2 then 3. All four stream at once: each at half a link, done at 2 ms.
    // One stream per host: if host 1 posts 2 first too, the two meet at host 2 (half a link
    // each) and then at host 3, their other receiver idle meanwhile: 4 ms; posted the other
    // way round, they never meet: 2 ms. The step is still both phases (no wait between them).
    let t = star(4, 0.0);
    let posted = |host1_first: u32| {
        Schedule::from_phases(
            "streams",
            4,
            vec![
                vec![Message { src: 0, dst: 2, bytes: M }, Message { src: 1, dst: host1_first, bytes: M }],
                vec![Message { src: 0, dst: 3, bytes: M }, Message { src: 1, dst: 5 - host1_first, bytes: M }],
            ],
        )
        .unwrap()
    };
    let mut cfg = FlowConfig::new(Executor::LocalSync);
    cfg.nct = 2;
    assert!(close(run(&t, &posted(2), &cfg).makespan_s, 2e-3));
    cfg.host_streams = Some(1);
    assert!(close(run(&t, &posted(2), &cfg).makespan_s, 4e-3));
    assert!(close(run(&t, &posted(3), &cfg).makespan_s, 2e-3));
    // More streams than sends in flight change nothing; none is refused.
    cfg.host_streams = Some(8);
    assert!(close(run(&t, &posted(2), &cfg).makespan_s, 2e-3));
    cfg.host_streams = Some(0);
    let r = shortest_path(&t).unwrap();
    assert!(simulate(&t, &r, &posted(2), &cfg).unwrap_err().to_string().contains("host_streams"));
}

#[test]
fn overhead_and_packet_headers_add_up() {
    let t = star(2, 0.0);
    let mut cfg = FlowConfig::new(Executor::Async);
    cfg.overhead_s = 2e-6;
    cfg.mtu = Some(4096);
    cfg.header_bytes = 64;
    let s = one_phase(2, &[(0, 1, M), (0, 1, M)]);
    let rep = run(&t, &s, &cfg);
    let wire = M + M.div_ceil(4096) * 64;
    assert_eq!(cfg.wire_bytes(M), wire);
    assert!(close(rep.makespan_s, 2.0 * (2e-6 + wire as f64 / B)));
}

#[test]
fn receive_costs_are_paid_one_message_at_a_time_at_the_receiver() {
    // Hosts 0 and 1 send M and 3M bytes to host 2 at once: on a star whose links have no
    // latency, M arrives at 2M/B (the two share host 2's link), 3M at 4M/B. Host 2 processes M
    // until 2M/B + c + M·b, and 3M from 4M/B (later) until 4M/B + c + 3M·b.
    let t = star(3, 0.0);
    let mut cfg = FlowConfig::new(Executor::Async);
    cfg.receive_s = 1e-3;
    cfg.receive_per_byte_s = 1e-9;
    let s = one_phase(3, &[(0, 2, M), (1, 2, 3 * M)]);
    let rep = run(&t, &s, &cfg);
    let expected = 4.0 * M as f64 / B + 1e-3 + 3.0 * M as f64 * 1e-9;
    assert!(close(rep.makespan_s, expected), "{} vs {expected}", rep.makespan_s);
    // Arriving together (both at 2M/B), the second waits for the first: c + M·b each.
    let s = one_phase(3, &[(0, 2, M), (1, 2, M)]);
    let rep = run(&t, &s, &cfg);
    let expected = 2.0 * M as f64 / B + 2.0 * (1e-3 + M as f64 * 1e-9);
    assert!(close(rep.makespan_s, expected), "{} vs {expected}", rep.makespan_s);
    cfg.receive_per_byte_s = -1e-9;
    let r = shortest_path(&t).unwrap();
    assert!(simulate(&t, &r, &s, &cfg).unwrap_err().to_string().contains("receive cost per byte"));
}

fn dag_star() -> (Topology, RoutingTable) {
    let t = star(4, 1000.0);
    let r = shortest_path(&t).unwrap();
    (t, r)
}

#[test]
fn dag_relay_is_cut_through() {
    // 0 -> 1 relayed on to 2: the relay starts when the head reaches host 1 (2 µs) and its tail
    // leaves when the upstream tail has arrived, so the total is M/B + 4 µs, not 2·M/B.
    let (t, r) = dag_star();
    let mut g = TaskGraph::new("relay", 4);
    let a = g.add_task(Message { src: 0, dst: 1, bytes: M }, &[]).unwrap();
    g.add_task(Message { src: 1, dst: 2, bytes: M }, &[(a, Dependency::Relay)]).unwrap();
    let rep = simulate_dag(&t, &r, &g, &FlowConfig::new(Executor::Dag)).unwrap();
    assert!(close(rep.makespan_s, 1e-3 + 4e-6), "{}", rep.makespan_s);
    assert_eq!(rep.sync_messages, 0);
}

#[test]
fn dag_dependencies_cost_a_sync_message_only_between_hosts() {
    let (t, r) = dag_star();
    let one_byte = 1.0 / B;
    // Different hosts: 1 sends 1 byte to 2 (2 µs + 1 ns), then 2 -> 3 runs.
    let mut g = TaskGraph::new("sync", 4);
    let a = g.add_task(Message { src: 0, dst: 1, bytes: M }, &[]).unwrap();
    g.add_task(Message { src: 2, dst: 3, bytes: M }, &[(a, Dependency::Complete)]).unwrap();
    let rep = simulate_dag(&t, &r, &g, &FlowConfig::new(Executor::Dag)).unwrap();
    assert!(close(rep.makespan_s, 2e-3 + 6e-6 + one_byte), "{}", rep.makespan_s);
    assert_eq!(rep.sync_messages, 1);
    // Same sender: it knows when its own data has left; no message, no latency.
    let mut g = TaskGraph::new("same", 4);
    let a = g.add_task(Message { src: 0, dst: 1, bytes: M }, &[]).unwrap();
    g.add_task(Message { src: 0, dst: 2, bytes: M }, &[(a, Dependency::Complete)]).unwrap();
    let rep = simulate_dag(&t, &r, &g, &FlowConfig::new(Executor::Dag)).unwrap();
    assert!(close(rep.makespan_s, 2e-3 + 2e-6));
    assert_eq!(rep.sync_messages, 0);
    // The receiver sends next: it knows on reception.
    let mut g = TaskGraph::new("recv", 4);
    let a = g.add_task(Message { src: 0, dst: 1, bytes: M }, &[]).unwrap();
    g.add_task(Message { src: 1, dst: 2, bytes: M }, &[(a, Dependency::Complete)]).unwrap();
    let rep = simulate_dag(&t, &r, &g, &FlowConfig::new(Executor::Dag)).unwrap();
    assert!(close(rep.makespan_s, 2e-3 + 4e-6));
}

#[test]
fn dag_of_a_schedule_runs_every_task() {
    let t = torus(&[3, 3], 1).unwrap();
    let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
    let s = Schedule::shift_alltoall(9, 4096).unwrap();
    let rep = simulate(&t, &r, &s, &FlowConfig::new(Executor::Dag)).unwrap();
    assert_eq!(rep.messages, 72);
    let ls = simulate(&t, &r, &s, &FlowConfig::new(Executor::LocalSync)).unwrap();
    assert!(rep.makespan_s >= ls.makespan_s * 0.999); // sync messages only add time
}

#[test]
fn every_executor_delivers_every_byte() {
    let t = torus(&[4, 3], 2).unwrap();
    let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
    let s = Schedule::shift_alltoall(24, 10_000).unwrap();
    for ex in [Executor::Sync, Executor::Async, Executor::LocalSync, Executor::Dag] {
        for nct in [1, 2, 4] {
            let mut cfg = FlowConfig::new(ex);
            cfg.nct = nct;
            let rep = simulate(&t, &r, &s, &cfg).unwrap();
            assert_eq!(rep.payload_bytes, 24 * 23 * 10_000);
            let loads = analyze(&t, &r, &s).unwrap();
            let total: u64 = rep.channel_bytes.iter().sum();
            // Every byte crosses each channel of its path once.
            let mut hops = 0u64;
            let mut p = Vec::new();
            for m in s.phases().flatten() {
                p.clear();
                r.path(&t, m.src as usize, m.dst as usize, &mut p).unwrap();
                hops += p.len() as u64;
            }
            assert_eq!(total, hops * 10_000, "{ex:?}");
            // Nothing beats the busiest channel's bytes at full rate.
            let bound = loads.max_channel_bytes as f64 / (100e9 / 8.0);
            assert!(rep.makespan_s >= bound * (1.0 - 1e-9), "{ex:?} nct {nct}");
            assert!(rep.max_channel_utilisation <= 1.0 + 1e-9);
        }
    }
}

#[test]
fn bad_input_is_refused() {
    let t = star(3, 0.0);
    let r = shortest_path(&t).unwrap();
    let s = Schedule::shift_alltoall(3, 10).unwrap();
    let mut cfg = FlowConfig::new(Executor::Async);
    cfg.nct = 0;
    assert!(simulate(&t, &r, &s, &cfg).is_err());
    let mut cfg = FlowConfig::new(Executor::Async);
    cfg.injection_gbps = Some(0.0);
    assert!(simulate(&t, &r, &s, &cfg).is_err());
    let off = s.clone().with_placement(vec![0, 1, 7]).unwrap();
    assert!(simulate(&t, &r, &off, &FlowConfig::new(Executor::Sync)).is_err());
    let mut holes = RoutingTable::new(&t, "empty");
    holes.set_out_port(0, 0, 1);
    let err = simulate(&t, &holes, &s, &FlowConfig::new(Executor::Sync)).unwrap_err();
    assert!(err.to_string().contains("no route"), "{err}");
    assert!("warp".parse::<Executor>().is_err());
}

#[test]
fn a_bytes_override_whose_totals_overflow_is_refused_not_wrapped() {
    let t = star(3, 500.0);
    let r = shortest_path(&t).unwrap();
    let s = one_phase(3, &[(0, 1, 1), (1, 2, 1), (2, 0, 1)]);
    let mut cfg = FlowConfig::new(Executor::Sync);
    cfg.bytes = Some(i64::MAX as u64);
    let err = simulate(&t, &r, &s, &cfg).unwrap_err().to_string();
    assert!(err.contains("--bytes"), "{err}");
    // One message at the largest size plus a header cannot be carried either.
    let mut one = FlowConfig::new(Executor::Sync);
    one.bytes = Some(u64::MAX);
    one.header_bytes = 64;
    assert!(simulate(&t, &r, &one_phase(3, &[(0, 1, 1)]), &one).is_err());
    // Just inside the limit still runs.
    cfg.bytes = Some(u64::MAX / 4);
    assert_eq!(simulate(&t, &r, &s, &cfg).unwrap().payload_bytes, 3 * (u64::MAX / 4));
}

/// Holding a lossy instant's void drain events back from the heap (the victims' drains, void
/// as soon as they are made) must not change a prediction: on seeded random workloads over an
/// Ethernet tree, every executor gives the same timeouts, retransmissions and channel bytes,
/// and the same times up to where the event loop anchors an instant (a void event no longer
/// opens one, so events within its 1e-10 relative window run at their own time).
#[test]
fn holding_void_drains_back_changes_no_prediction() {
    use crate::topology::ethernet::{switch_tree, TreeLevel, GIGABIT_LAN};
    use rand::{Rng, SeedableRng};
    let levels = [TreeLevel::new(3, GIGABIT_LAN), TreeLevel::new(2, GIGABIT_LAN)];
    let topo = switch_tree(&levels, 5, GIGABIT_LAN).unwrap();
    assert!(!topo.switching().lossless());
    let routes = shortest_path(&topo).unwrap();
    let n = topo.num_hosts() as u32;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(30);
    let mut lossy_cases = 0;
    for case in 0..24 {
        let phases: Vec<Vec<Message>> = (0..rng.gen_range(1..5))
            .map(|_| {
                (0..rng.gen_range(4..40))
                    .map(|_| {
                        let src = rng.gen_range(0..n);
                        let dst = (src + rng.gen_range(1..n)) % n;
                        Message { src, dst, bytes: rng.gen_range(1u64..1 << 20) }
                    })
                    .collect()
            })
            .collect();
        let sched = Schedule::from_phases("random", n, phases).unwrap();
        let mut cfg = FlowConfig::new([Executor::Sync, Executor::Async, Executor::LocalSync][case % 3]);
        cfg.nct = rng.gen_range(1..5);
        let held = simulate_phased(&topo, &routes, &sched, &cfg, None, true).unwrap();
        let plain = simulate_phased(&topo, &routes, &sched, &cfg, None, false).unwrap();
        assert_eq!(held.timeouts, plain.timeouts, "case {case}");
        assert_eq!(held.retransmitted_bytes, plain.retransmitted_bytes, "case {case}");
        assert_eq!(held.channel_bytes, plain.channel_bytes, "case {case}");
        assert!(close(held.makespan_s, plain.makespan_s), "case {case}: {} vs {}", held.makespan_s, plain.makespan_s);
        for (a, b) in held.host_finish_s.iter().zip(&plain.host_finish_s) {
            assert!(close(*a, *b), "case {case}: {a} vs {b}");
        }
        lossy_cases += usize::from(held.timeouts > 0);
    }
    assert!(lossy_cases >= 4, "only {lossy_cases} cases timed out: the test would not exercise holding");
}
