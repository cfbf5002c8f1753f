//! The extraction's acceptance tests T1–T16 (§5.2) and the derived 4-host trace (§5.3).

use proptest::prelude::*;

use super::*;
use crate::topology::{LinkSpec, NodeId, TopologyBuilder};

const GIG: LinkSpec = LinkSpec { bandwidth_gbps: 1.0, latency_ns: 50_000.0 };
const TEN_GIG: LinkSpec = LinkSpec { bandwidth_gbps: 10.0, latency_ns: 50_000.0 };
const MIB: u64 = 1 << 20;

/// Hosts on switches: `placement[h]` is host h's switch; `trunks` join switches.
fn tree(
    switches: usize,
    placement: &[usize],
    host_links: &[LinkSpec],
    trunks: &[(usize, usize, LinkSpec)],
) -> Topology {
    let mut b = TopologyBuilder::new("test tree");
    let hosts: Vec<NodeId> = (0..placement.len()).map(|h| b.add_host(format!("h{h}"))).collect();
    let sw: Vec<NodeId> = (0..switches).map(|s| b.add_switch(format!("s{s}"), 64)).collect();
    for (h, &s) in placement.iter().enumerate() {
        b.connect(hosts[h], sw[s], host_links[h]).unwrap();
    }
    for &(a, c, spec) in trunks {
        b.connect(sw[a], sw[c], spec).unwrap();
    }
    b.build().unwrap()
}

/// Fig. 4.5: hosts 0, 1 on S0 and 2, 3 on S1.
fn four_hosts(trunk: LinkSpec) -> Topology {
    tree(2, &[0, 0, 1, 1], &[GIG; 4], &[(0, 1, trunk)])
}

fn names(cf: &ContentionFree, g: u32) -> Vec<(u32, u32)> {
    cf.groups().members(g).iter().map(|&t| (cf.tasks()[t as usize].src, cf.tasks()[t as usize].dst)).collect()
}

#[test]
fn t1_definition_1_on_a_three_link_path() {
    let wan = LinkSpec { bandwidth_gbps: 10.0, latency_ns: 2e6 };
    let t = tree(2, &[0, 1], &[GIG, GIG], &[(0, 1, wan)]);
    let p = PathTable::new(&t).unwrap();
    assert_eq!(p.latency_ps(0, 1), 2_100_000_000); // 2.1 ms
    assert_eq!(p.path_bandwidth(0, 1), 1.25e8);
    assert_eq!(p.cost_ps(0, 1, 1_000_000), 10_100_000_000); // 10.1 ms
    assert_eq!(p.cost_ps(1, 1, 1_000_000), 0);
}

#[test]
fn t9_fig_4_5_has_ten_groups_and_twelve_with_a_ten_gigabit_trunk() {
    let cf = ContentionFree::new(&four_hosts(GIG), alltoall_tasks(4, MIB).unwrap(), Options::default()).unwrap();
    assert_eq!(cf.groups().len(), 10);
    let table: Vec<Vec<(u32, u32)>> = (0..10).map(|g| names(&cf, g)).collect();
    assert_eq!(
        table,
        vec![
            vec![(0, 1), (0, 2), (0, 3)],
            vec![(1, 0), (1, 2), (1, 3)],
            vec![(2, 0), (2, 1), (2, 3)],
            vec![(3, 0), (3, 1), (3, 2)],
            vec![(1, 0), (2, 0), (3, 0)],
            vec![(0, 1), (2, 1), (3, 1)],
            vec![(0, 2), (1, 2), (3, 2)],
            vec![(0, 3), (1, 3), (2, 3)],
            vec![(0, 2), (0, 3), (1, 2), (1, 3)],
            vec![(2, 0), (2, 1), (3, 0), (3, 1)],
        ]
    );
    let fast = ContentionFree::new(&four_hosts(TEN_GIG), alltoall_tasks(4, MIB).unwrap(), Options::default()).unwrap();
    assert_eq!(fast.groups().len(), 12);
    let trunk: Vec<Vec<(u32, u32)>> = (8..12).map(|g| names(&fast, g)).collect();
    assert_eq!(trunk, vec![vec![(0, 2), (0, 3)], vec![(1, 2), (1, 3)], vec![(2, 0), (2, 1)], vec![(3, 0), (3, 1)]]);
}

#[test]
fn t10_fig_4_1_groups() {
    // a, c, d on SW0; b on SW2 under SW0; e, f on SW1.
    let (a, b, c, d, e, f) = (0u32, 1, 2, 3, 4, 5);
    let t = tree(3, &[0, 2, 0, 0, 1, 1], &[GIG; 6], &[(0, 1, GIG), (0, 2, GIG)]);
    let cf = ContentionFree::new(&t, alltoall_tasks(6, MIB).unwrap(), Options::default()).unwrap();
    let group_with = |x: (u32, u32), y: (u32, u32)| {
        (0..cf.groups().len() as u32).map(|g| names(&cf, g)).find(|m| m.contains(&x) && m.contains(&y)).unwrap()
    };
    let mut trunk = group_with((a, e), (d, f));
    trunk.sort();
    assert_eq!(trunk, vec![(a, e), (a, f), (b, e), (b, f), (c, e), (c, f), (d, e), (d, f)]);
    assert_eq!(group_with((b, a), (b, f)), vec![(b, a), (b, c), (b, d), (b, e), (b, f)]);
}

#[test]
fn t8_small_messages_get_one_group_per_source() {
    let long = LinkSpec { bandwidth_gbps: 1.0, latency_ns: 10e6 }; // BDP 1.25e6 B
    let t = four_hosts(long);
    let tasks = |bytes| [(0, 2), (0, 3), (1, 2), (1, 3)].map(|(src, dst)| Message { src, dst, bytes }).to_vec();
    let trunk_groups = |bytes| {
        let cf = ContentionFree::new(&t, tasks(bytes), Options::default()).unwrap();
        cf.groups().count_on(cf.paths().path(0, 2)[1])
    };
    assert_eq!(trunk_groups(10_000), 2);
    assert_eq!(trunk_groups(1_000_000), 1);
}

#[test]
fn t11_rule_b_switch_gives_ten_or_nine_groups() {
    // 14 hosts at 1 Gbit/s on S0, a 10 Gbit/s uplink to S1 with the root.
    let mut placement = vec![0; 14];
    placement.push(1);
    let mut links = vec![GIG; 14];
    links.push(TEN_GIG);
    let t = tree(2, &placement, &links, &[(0, 1, TEN_GIG)]);
    for (rule, want, in_g0) in [(RuleB::AtLeast, 10, 5), (RuleB::Below, 9, 6)] {
        let cf =
            ContentionFree::new(&t, gather_tasks(15, 14, MIB).unwrap(), Options { rule_b: rule, ..Default::default() })
                .unwrap();
        let uplink = cf.paths().path(0, 14)[1];
        let g = cf.groups();
        let on: Vec<u32> = (0..g.len() as u32).filter(|&k| g.link[k as usize] == uplink).collect();
        assert_eq!(on.len(), want, "{rule:?}");
        assert_eq!(g.members(on[0]).len(), in_g0, "{rule:?}");
    }
}

#[test]
fn derived_four_host_trace_is_reproduced_exactly() {
    let cf = ContentionFree::new(&four_hosts(GIG), alltoall_tasks(4, MIB).unwrap(), Options::default()).unwrap();
    let times = cf.replay_seconds();
    let order: Vec<(u32, u32)> =
        cf.stages().order.iter().map(|&t| (cf.tasks()[t as usize].src, cf.tasks()[t as usize].dst)).collect();
    let want = [
        ((0, 2), 0.0, 8.539),
        ((2, 0), 0.0, 8.539),
        ((0, 3), 8.539, 17.077),
        ((2, 1), 8.539, 17.077),
        ((1, 0), 8.639, 17.127),
        ((3, 0), 17.277, 25.816),
        ((1, 2), 17.227, 25.766),
        ((3, 1), 25.816, 34.354),
        ((2, 3), 17.177, 25.666),
        ((1, 3), 25.816, 34.354),
        ((0, 1), 34.454, 42.943),
        ((3, 2), 34.354, 42.843),
    ];
    assert_eq!(order, want.iter().map(|w| w.0).collect::<Vec<_>>());
    for (k, &(pair, start, finish)) in want.iter().enumerate() {
        assert!((times[k].0 * 1e3 - start).abs() < 5e-4, "{pair:?} start {}", times[k].0 * 1e3);
        assert!((times[k].1 * 1e3 - finish).abs() < 5e-4, "{pair:?} finish {}", times[k].1 * 1e3);
    }
    assert!((cf.makespan_seconds() * 1e3 - 42.943).abs() < 5e-4);
    // Sync predecessors as listed: J12 waits for J02, J03 and J10.
    let k = order.iter().position(|&p| p == (1, 2)).unwrap();
    let preds: Vec<(u32, u32)> = cf.stages().preds
        [cf.stages().pred_off[k] as usize..cf.stages().pred_off[k + 1] as usize]
        .iter()
        .map(|&p| order[p as usize])
        .collect();
    assert_eq!(preds, vec![(0, 2), (0, 3), (1, 0)]);
}

#[test]
fn fabrics_with_two_paths_and_bad_links_are_refused() {
    let ring = tree(3, &[0, 1, 2], &[GIG; 3], &[(0, 1, GIG), (1, 2, GIG), (2, 0, GIG)]);
    assert!(PathTable::new(&ring).is_ok(), "a triangle has unique shortest paths");
    let square = tree(4, &[0, 1, 2, 3], &[GIG; 4], &[(0, 1, GIG), (1, 2, GIG), (2, 3, GIG), (3, 0, GIG)]);
    let e = PathTable::new(&square).unwrap_err().to_string();
    assert!(e.contains("'h0' and 'h2' are joined by more than one shortest path"), "{e}");
    assert!(gather_tasks(4, 4, 1).unwrap_err().to_string().contains("root 4 is not a host"));
}

#[test]
fn bonded_links_count_as_one() {
    let t = tree(2, &[0, 1], &[GIG, GIG], &[(0, 1, GIG), (0, 1, GIG)]);
    let p = PathTable::new(&t).unwrap();
    let trunk = p.path(0, 1)[1];
    assert_eq!(p.bandwidth(trunk), 2.5e8);
}

/// A random tree: `switches` switches joined at random, hosts on random switches, random
/// link speeds and latencies.
fn random_tree(seed: u64) -> Topology {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let switches = rng.gen_range(1..=6);
    let hosts = rng.gen_range(3..=9);
    let spec = |rng: &mut rand_chacha::ChaCha8Rng| LinkSpec {
        bandwidth_gbps: [1.0, 1.0, 10.0, 0.1][rng.gen_range(0..4)],
        latency_ns: [1e3, 5e4, 1e6][rng.gen_range(0..3)],
    };
    let placement: Vec<usize> = (0..hosts).map(|_| rng.gen_range(0..switches)).collect();
    let links: Vec<LinkSpec> = (0..hosts).map(|_| spec(&mut rng)).collect();
    let trunks: Vec<(usize, usize, LinkSpec)> =
        (1..switches).map(|s| (rng.gen_range(0..s), s, spec(&mut rng))).collect();
    tree(switches, &placement, &links, &trunks)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// T3–T6, T12, T13, T15, T16 on random trees, random speeds, every policy.
    #[test]
    fn grouping_and_scheduling_invariants(seed: u64, big: bool, policy in 0usize..5, gather: bool) {
        let topo = random_tree(seed);
        let n = topo.num_hosts() as u32;
        let bytes = if big { 1_000_000 } else { 2_000 };
        let tasks = if gather { gather_tasks(n, (seed % n as u64) as u32, bytes).unwrap() } else { alltoall_tasks(n, bytes).unwrap() };
        let options = Options { policy: Policy::ALL[policy].0, seed, ..Default::default() };
        let cf = ContentionFree::new(&topo, tasks.clone(), options).unwrap();
        let (p, g) = (cf.paths(), cf.groups());
        // T3: one group per directed link of the path, none elsewhere.
        for (t, task) in tasks.iter().enumerate() {
            let mut links: Vec<u32> = g.of_task(t as u32).iter().map(|&k| g.link[k as usize]).collect();
            let mut path = p.path(task.src, task.dst).to_vec();
            links.sort_unstable();
            path.sort_unstable();
            prop_assert_eq!(links, path);
        }
        for k in 0..g.len() as u32 {
            let l = g.link[k as usize];
            let members = g.members(k);
            // T4: same-source tasks on a link share its group.
            for &t in members {
                for (u, other) in tasks.iter().enumerate() {
                    if other.src == tasks[t as usize].src && p.path(other.src, other.dst).contains(&l) {
                        prop_assert!(g.of_task(u as u32).contains(&k));
                    }
                }
            }
            // T5: several groups on a big-mode link fit its bandwidth by their fastest inputs.
            let users: Vec<usize> = (0..tasks.len()).filter(|&t| p.path(tasks[t].src, tasks[t].dst).contains(&l)).collect();
            let total: f64 = users.iter().map(|&t| tasks[t].bytes as f64).sum();
            let big_mode = total >= p.bandwidth(l) * p.link_latency_ps(l) as f64 * 1e-12;
            let on: Vec<u32> = (0..g.len() as u32).filter(|&h| g.link[h as usize] == l).collect();
            if big_mode && on.len() > 1 && k == on[0] {
                let input = |t: u32| {
                    let path = p.path(tasks[t as usize].src, tasks[t as usize].dst);
                    let i = path.iter().position(|&x| x == l).unwrap();
                    if i == 0 { p.bandwidth(l) } else { path[..i].iter().map(|&x| p.bandwidth(x)).fold(f64::INFINITY, f64::min) }
                };
                let sum: f64 = on.iter().map(|&h| g.members(h).iter().map(|&t| input(t)).fold(0.0, f64::max)).sum();
                prop_assert!(sum <= p.bandwidth(l) * (1.0 + 1e-9), "{sum} > {}", p.bandwidth(l));
            }
        }
        // T12: every task once.
        let s = cf.stages();
        let mut seen = s.order.clone();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..tasks.len() as u32).collect::<Vec<_>>());
        // T13: predecessors come earlier; consecutive members of a group are joined.
        let mut position = vec![0u32; tasks.len()];
        for (k, &t) in s.order.iter().enumerate() {
            position[t as usize] = k as u32;
            for &q in &s.preds[s.pred_off[k] as usize..s.pred_off[k + 1] as usize] {
                prop_assert!(q < k as u32);
            }
        }
        let times = stages::replay(p, &tasks, s);
        for k in 0..g.len() as u32 {
            let mut by_pos: Vec<u32> = g.members(k).iter().map(|&t| position[t as usize]).collect();
            by_pos.sort_unstable();
            for w in by_pos.windows(2) {
                let preds = &s.preds[s.pred_off[w[1] as usize] as usize..s.pred_off[w[1] as usize + 1] as usize];
                prop_assert!(preds.contains(&w[0]));
                // T6/T16: no overlap inside a group.
                prop_assert!(times[w[1] as usize].0 >= times[w[0] as usize].1);
            }
        }
        // T16: start after every predecessor plus its sync; T15's sync rule.
        for (k, &t) in s.order.iter().enumerate() {
            for &q in &s.preds[s.pred_off[k] as usize..s.pred_off[k + 1] as usize] {
                let (prev, next) = (tasks[s.order[q as usize] as usize], tasks[t as usize]);
                let sync = if prev.src == next.src { 0 } else { p.latency_ps(prev.dst, next.src) };
                prop_assert!(times[k].0 >= times[q as usize].1 + sync);
            }
        }
    }

    /// Theorems 1 and 2 (T18, T19) on random trees.
    #[test]
    fn theorems_one_and_two(seed: u64) {
        let topo = random_tree(seed);
        let p = PathTable::new(&topo).unwrap();
        let n = topo.num_hosts() as u32;
        let disjoint = |a: &[u32], b: &[u32]| a.iter().all(|l| !b.contains(l));
        for x in 0..n { for y in 0..n { for z in 0..n {
            if x != y && y != z && x != z {
                prop_assert!(disjoint(p.path(x, y), p.path(y, z)));
            }
            for w in 0..n {
                let distinct = x != y && w != z && x != w && w != y;
                if distinct && !disjoint(p.path(x, y), p.path(w, z)) {
                    let pieces = [p.path(w, x), p.path(x, y), p.path(y, z)];
                    prop_assert!(disjoint(pieces[0], pieces[1]) && disjoint(pieces[1], pieces[2]) && disjoint(pieces[0], pieces[2]));
                }
            }
        }}}
    }
}

/// Hosts of every relay chain (head piece to end piece) and the original transfer it replaces.
fn relay_chains(g: &TaskGraph) -> Vec<Vec<u32>> {
    let n = g.num_tasks();
    let mut next = vec![None; n];
    let mut fed = vec![false; n];
    for t in 0..n as u32 {
        for &(p, kind) in g.predecessors(t) {
            if kind == Dependency::Relay {
                assert!(next[p as usize].is_none(), "piece {p} feeds two relays");
                next[p as usize] = Some(t);
                fed[t as usize] = true;
            }
        }
    }
    let mut chains = Vec::new();
    for head in (0..n).filter(|&t| !fed[t] && next[t].is_some()) {
        let mut hosts = vec![g.task(head as u32).src];
        let mut t = Some(head as u32);
        while let Some(k) = t {
            hosts.push(g.task(k).dst);
            assert_eq!(g.task(k).bytes, g.task(head as u32).bytes, "pieces carry the original bytes");
            t = next[k as usize];
        }
        chains.push(hosts);
    }
    chains
}

#[test]
fn t23_single_switch_gather_relays_into_pipelines_and_is_not_slower() {
    let topo = tree(1, &[0; 8], &[GIG; 8], &[]);
    for bytes in [1_000, 10_000] {
        let tasks = gather_tasks(8, 0, bytes).unwrap();
        let plain = ContentionFree::new(&topo, tasks.clone(), Options::default()).unwrap();
        let relayed =
            ContentionFree::new(&topo, tasks, Options { relay: Some(RelayRule::Departure), ..Default::default() })
                .unwrap();
        assert!(relayed.stages().relayed_tasks > 0, "small gathers relay");
        assert!(relayed.makespan_seconds() <= plain.makespan_seconds() * (1.0 + 1e-12));
        // Chains end at the root and pass through other senders (Fig. 3.4's pipeline).
        for chain in relay_chains(&relayed.task_graph("g").unwrap()) {
            assert_eq!(*chain.last().unwrap(), 0);
            assert!(chain.len() >= 3);
        }
    }
}

#[test]
fn t20_no_relay_when_the_tail_has_the_same_sender() {
    // alltoall on one switch with one host sending: every group's tail has this sender.
    let topo = tree(1, &[0; 4], &[GIG; 4], &[]);
    let tasks: Vec<Message> = (1..4).map(|d| Message { src: 0, dst: d, bytes: 1000 }).collect();
    let cf =
        ContentionFree::new(&topo, tasks, Options { relay: Some(RelayRule::Departure), ..Default::default() }).unwrap();
    assert_eq!(cf.stages().relayed_tasks, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// T21, T22 and the relay replay on random trees: every original transfer arrives exactly
    /// once (directly or as one chain), chains never reuse a link or a host, and the DAG is
    /// valid for the executors.
    #[test]
    fn relaying_conserves_data_and_never_loops(seed: u64, small: bool, gather: bool, arrival: bool, clock: bool) {
        let topo = random_tree(seed);
        let n = topo.num_hosts() as u32;
        let bytes = if small { 1_500 } else { 300_000 };
        let tasks = if gather { gather_tasks(n, (seed % n as u64) as u32, bytes).unwrap() } else { alltoall_tasks(n, bytes).unwrap() };
        let rule = if arrival { RelayRule::Arrival } else { RelayRule::Departure };
        let timing = if clock { Timing::Clock } else { Timing::Sum };
        let cf = ContentionFree::new(&topo, tasks.clone(), Options { relay: Some(rule), seed, timing, ..Default::default() })
            .unwrap();
        let g = cf.task_graph("r").unwrap();
        let chains = relay_chains(&g);
        prop_assert_eq!(chains.len() as u32, cf.stages().relayed_tasks);
        let mut delivered: Vec<(u32, u32)> = chains.iter().map(|c| (c[0], *c.last().unwrap())).collect();
        let in_chain: usize = chains.iter().map(|c| c.len() - 1).sum();
        prop_assert_eq!(g.num_tasks(), tasks.len() - chains.len() + in_chain);
        for t in 0..g.num_tasks() as u32 {
            let relayed = g.predecessors(t).iter().any(|&(_, k)| k == Dependency::Relay);
            let feeds = (0..g.num_tasks() as u32).any(|u| g.predecessors(u).contains(&(t, Dependency::Relay)));
            if !relayed && !feeds {
                delivered.push((g.task(t).src, g.task(t).dst));
            }
        }
        let mut want: Vec<(u32, u32)> = tasks.iter().map(|t| (t.src, t.dst)).collect();
        delivered.sort_unstable();
        want.sort_unstable();
        prop_assert_eq!(delivered, want);
        let p = cf.paths();
        for c in &chains {
            let mut hosts = c.clone();
            hosts.sort_unstable();
            hosts.dedup();
            prop_assert_eq!(hosts.len(), c.len(), "a chain visits a host twice: {:?}", c);
            let mut links: Vec<u32> = c.windows(2).flat_map(|w| p.path(w[0], w[1]).to_vec()).collect();
            let total = links.len();
            links.sort_unstable();
            links.dedup();
            prop_assert_eq!(links.len(), total, "a chain crosses a link twice: {:?}", c);
        }
        // The replay honours relays: a piece never finishes before the piece it forwards.
        let times = cf.replay_seconds();
        for k in 0..g.num_tasks() as u32 {
            for &(q, kind) in g.predecessors(k) {
                if kind == Dependency::Relay {
                    prop_assert!(times[k as usize].1 >= times[q as usize].1);
                    prop_assert!(times[k as usize].0 >= times[q as usize].0);
                }
            }
        }
    }
}

#[test]
fn timing_reading_only_moves_relay_decisions() {
    // Without relaying the group times are never read, so both readings give one DAG.
    let topo = random_tree(11);
    let n = topo.num_hosts() as u32;
    let dag = |timing| {
        let cf =
            ContentionFree::new(&topo, alltoall_tasks(n, 5_000).unwrap(), Options { timing, ..Default::default() });
        cf.unwrap().task_graph("t").unwrap().to_json()
    };
    assert_eq!(dag(Timing::Sum), dag(Timing::Clock));
    assert!(Timing::by_name("wall").unwrap_err().to_string().contains("sum or clock"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// (6.1)/(6.2): every believed link value lies within ±rate of the truth, the draw is a
    /// function of the seed, and the replay of a perturbed schedule runs on the true values.
    #[test]
    fn perturbation_stays_within_its_rate(seed: u64, rate in 0.0f64..0.9) {
        let topo = random_tree(seed);
        let truth = PathTable::new(&topo).unwrap();
        let off = truth.perturbed(rate, seed).unwrap();
        prop_assert_eq!(off.latency_ps(0, 1), truth.perturbed(rate, seed).unwrap().latency_ps(0, 1));
        let n = topo.num_hosts() as u32;
        for (a, b) in (0..n).flat_map(|a| (0..n).map(move |b| (a, b))).filter(|(a, b)| a != b) {
            let bw = off.path_bandwidth(a, b) / truth.path_bandwidth(a, b);
            prop_assert!(bw >= 1.0 - rate - 1e-9 && bw <= 1.0 + rate + 1e-9, "bandwidth ratio {}", bw);
            let lat = off.latency_ps(a, b) as f64 / truth.latency_ps(a, b) as f64;
            prop_assert!(lat >= 1.0 - rate - 1e-6 && lat <= 1.0 + rate + 1e-6, "latency ratio {}", lat);
        }
        let tasks = alltoall_tasks(n, 100_000).unwrap();
        let options = Options { perturbation: rate, perturbation_seed: seed, ..Default::default() };
        let cf = ContentionFree::new(&topo, tasks, options).unwrap();
        prop_assert_eq!(cf.paths().latency_ps(0, 1), truth.latency_ps(0, 1));
    }
}

#[test]
fn perturbation_rate_outside_zero_one_is_refused() {
    let truth = PathTable::new(&four_hosts(GIG)).unwrap();
    for rate in [-0.1, 1.0, f64::NAN] {
        let err = truth.perturbed(rate, 0).unwrap_err().to_string();
        assert!(err.contains("must be in [0, 1)"), "{err}");
    }
}

/// Each host's sends in Concurrent's task order.
fn posting_orders(g: &TaskGraph, hosts: u32) -> Vec<Vec<u32>> {
    let mut orders = vec![Vec::new(); hosts as usize];
    for t in 0..g.num_tasks() as u32 {
        let m = g.task(t);
        orders[m.src as usize].push(m.dst);
    }
    orders
}

#[test]
fn concurrent_hosts_post_in_unrelated_seeded_orders() {
    let tasks = alltoall_tasks(16, 1024).unwrap();
    let g = concurrent("a2a", 16, &tasks, 3).unwrap();
    assert_eq!((g.num_tasks(), g.num_dependencies()), (240, 0));
    let orders = posting_orders(&g, 16);
    for (h, order) in orders.iter().enumerate() {
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..16).filter(|&d| d != h as u32).collect::<Vec<_>>(),
            "host {h} sends once to each other host"
        );
    }
    // Unrelated: the hosts do not all start at one destination (rank order sends every host to 0 first).
    let first: std::collections::BTreeSet<u32> = orders.iter().map(|o| o[0]).collect();
    assert!(first.len() > 4, "first destinations {first:?}");
    // The seed decides, and only the seed.
    assert_eq!(posting_orders(&concurrent("a2a", 16, &tasks, 3).unwrap(), 16), orders);
    assert_ne!(posting_orders(&concurrent("a2a", 16, &tasks, 4).unwrap(), 16), orders);
    // A gather has one task per host: nothing to order.
    let gather = concurrent("g", 16, &gather_tasks(16, 0, 1024).unwrap(), 3).unwrap();
    assert_eq!(gather.num_tasks(), 15);
}
