use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::routing::{route, shortest_path, Engine, RouteOptions};
use crate::topology::grid::{mesh, torus};
use crate::topology::{LinkSpec, TopologyBuilder};
use crate::traffic::{Collective, Delivery, Message};

/// `leaves` switches with `per_leaf` hosts each, all joined to one spine by a single link.
fn two_level(leaves: u32, per_leaf: u32) -> Topology {
    two_level_with_uplink(leaves, per_leaf, LinkSpec::default())
}

/// Like [`two_level`], with leaf 0's uplink given its own spec.
fn two_level_with_uplink(leaves: u32, per_leaf: u32, first_uplink: LinkSpec) -> Topology {
    let mut b = TopologyBuilder::new("tree");
    let spine = b.add_switch("spine", leaves as u16);
    for l in 0..leaves {
        let leaf = b.add_switch(format!("leaf{l}"), (per_leaf + 1) as u16);
        b.connect(leaf, spine, if l == 0 { first_uplink } else { LinkSpec::default() }).unwrap();
        for h in 0..per_leaf {
            let host = b.add_host(format!("h{l}.{h}"));
            b.connect(host, leaf, LinkSpec::default()).unwrap();
        }
    }
    b.build().unwrap()
}

#[test]
fn single_uplink_tree_has_closed_form_congestion() {
    // With k hosts per leaf behind one uplink, a shift phase that sends every host off-leaf
    // loads each uplink with k flows.
    let t = two_level(3, 4);
    let r = shortest_path(&t).unwrap();
    let s = Schedule::shift_alltoall(12, 100).unwrap();
    let rep = analyze(&t, &r, &s).unwrap();
    assert_eq!(rep.max_congestion, 4);
    assert_eq!(rep.flows, 12 * 11);
    assert_eq!(rep.phases[3].max_load, 4); // phase i=4: every host sends to the next leaf
    assert!((rep.phases[3].throughput_ratio - 0.25).abs() < 1e-12);
    // The spine-to-leaf channel carries 4 hosts × 8 off-leaf peers × 100 bytes.
    assert_eq!(rep.max_channel_bytes, 4 * 8 * 100);
    // Off-leaf pairs cross 2 switch-to-switch links, same-leaf pairs none.
    assert_eq!(rep.sum_hops, 12 * 8 * 2);
    assert_eq!(rep.hop_bytes, 12 * 8 * 2 * 100);
    assert_eq!(rep.hops_x_max_channel, (12 * 8 * 2) as f64 * 3200.0);
    assert!(rep.complete && rep.completeness.complete == Some(true));
    assert_eq!(rep.permutation_phases, 11);
    // Contended links: the 6 leaf-spine channels, each at 4 flows, first in phase 3 (i = 4)
    // or earlier; listed with their end nodes.
    assert_eq!(rep.contended_links_total, 6);
    let top = &rep.contended_links[0];
    assert_eq!(top.max_load, 4);
    assert!(top.from_label.starts_with("leaf") && top.to_label == "spine" || top.from_label == "spine");
    assert_eq!(top.bytes, 3200);
}

#[test]
fn disjoint_flows_are_contention_free() {
    let t = two_level(2, 2);
    let r = shortest_path(&t).unwrap();
    let phase = vec![Message { src: 0, dst: 1, bytes: 1 }, Message { src: 2, dst: 3, bytes: 1 }];
    let s = Schedule::from_phases("p", 4, vec![phase]).unwrap();
    let rep = analyze(&t, &r, &s).unwrap();
    assert_eq!(rep.max_congestion, 1);
    assert_eq!(rep.throughput_ratio, 1.0);
    assert_eq!(rep.phases[0].contended_channels, 0);
    assert!(rep.contended_links.is_empty());
    assert!(rep.complete, "custom traffic claims nothing");
    // Claimed as an all-to-all, two of twelve ordered pairs are not enough.
    let rep = analyze(&t, &r, &s.with_collective(Collective::Alltoall, Delivery::Direct)).unwrap();
    assert!(!rep.complete);
    assert_eq!(rep.completeness.missing, 10);
    assert!(rep.problem.unwrap().contains("never sent"));
}

#[test]
fn ranks_sharing_a_host_do_not_count() {
    let t = two_level(2, 2);
    let r = shortest_path(&t).unwrap();
    let s = Schedule::shift_alltoall(2, 1).unwrap().with_placement(vec![1, 1]).unwrap();
    let rep = analyze(&t, &r, &s).unwrap();
    assert_eq!(rep.flows, 0);
    assert_eq!(rep.throughput_ratio, 1.0);
    assert_eq!(rep.fluid_time_s, 0.0);
    assert!(rep.complete, "the pairs are covered even though no byte crosses a link");
    let off = Schedule::shift_alltoall(2, 1).unwrap().with_placement(vec![0, 9]).unwrap();
    assert!(analyze(&t, &r, &off).is_err());
}

#[test]
fn the_schedule_claims_are_checked() {
    let t = two_level(2, 2);
    let r = shortest_path(&t).unwrap();
    let m = |src, dst| Message { src, dst, bytes: 8 };
    let alltoall = |phases| {
        Schedule::from_phases("claimed", 3, phases).unwrap().with_collective(Collective::Alltoall, Delivery::Direct)
    };
    // Phase 0 sends twice from rank 0; one pair repeats, three are missing.
    let s = alltoall(vec![vec![m(0, 1), m(0, 2), m(1, 0)], vec![m(0, 1)]]);
    let rep = analyze(&t, &r, &s).unwrap();
    assert_eq!((rep.completeness.duplicated, rep.completeness.missing), (1, 3));
    assert!(!rep.phases[0].permutation && rep.phases[1].permutation);
    assert_eq!(rep.permutation_phases, 1);
    // A complete all-to-all whose phase is not a permutation fails only if it claims one.
    let all = vec![vec![m(0, 1), m(0, 2), m(1, 0), m(1, 2), m(2, 0), m(2, 1)]];
    assert!(analyze(&t, &r, &alltoall(all.clone())).unwrap().complete);
    let rep = analyze(&t, &r, &alltoall(all).with_permutation_claim(true)).unwrap();
    assert!(!rep.complete);
    assert!(rep.problem.unwrap().contains("phase 0 is not a permutation"));
}

#[test]
fn bad_options_are_rejected() {
    let t = two_level(2, 2);
    let r = shortest_path(&t).unwrap();
    let s = Schedule::shift_alltoall(4, 1).unwrap();
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let o = AnalysisOptions { hop_latency_s: bad, ..Default::default() };
        assert!(analyze_with(&t, &r, &s, &o).is_err());
    }
}

/// Paper 001's A2AND send list on a k×k grid: offsets (x, y) ≠ (0, 0), x outer, y inner,
/// destinations mod k; phase g holds sends g·nct .. (g+1)·nct − 1 of every node.
fn a2and(k: u32, nct: usize, bytes: u64) -> Schedule {
    let offsets: Vec<(u32, u32)> = (0..k).flat_map(|x| (0..k).map(move |y| (x, y))).skip(1).collect();
    let phases = offsets
        .chunks(nct)
        .map(|group| {
            let mut phase = Vec::new();
            for node in 0..k * k {
                let (x, y) = (node % k, node / k);
                for &(i, j) in group {
                    phase.push(Message { src: node, dst: (x + i) % k + k * ((y + j) % k), bytes });
                }
            }
            phase
        })
        .collect();
    Schedule::from_phases("a2and", k * k, phases).unwrap().with_collective(Collective::Alltoall, Delivery::Direct)
}

#[test]
fn lock_step_fluid_time_matches_paper_001_table_t4() {
    // One message of 12,500 bytes takes 1 µs on a 100 Gbit/s link: the unit of T4.
    let unit = 1e-6;
    let dor = |t: &Topology| route(t, Engine::Dor, &RouteOptions::default()).unwrap();
    // (k, topology, NCT, expected units): A2AND rows of the extraction's T4 (NCT 1 gives
    // TV_NCT1 on both; the grouped rows are the derived table).
    let cases = [
        (5, "mesh", 1, 40.0),
        (5, "torus", 1, 40.0),
        (7, "torus", 1, 112.0),
        (5, "mesh", 2, 40.0),
        (5, "torus", 2, 38.0),
        (5, "torus", 4, 29.0),
        (7, "torus", 2, 101.0),
        (7, "torus", 4, 91.0),
    ];
    for (k, family, nct, units) in cases {
        let t = if family == "mesh" { mesh(&[k, k], 1) } else { torus(&[k, k], 1) }.unwrap();
        let rep = analyze(&t, &dor(&t), &a2and(k, nct, 12_500)).unwrap();
        assert!(rep.complete);
        let got = rep.fluid_time_s / unit;
        assert!((got - units).abs() < 1e-9, "{family} k={k} NCT={nct}: {got} units, expected {units}");
        // With NCT > 1 the host links carry NCT messages per phase and become the bound.
        if nct == 1 {
            assert!((rep.fluid_time_host_links_s - rep.fluid_time_s).abs() < 1e-15);
        } else {
            assert!(rep.fluid_time_host_links_s >= rep.fluid_time_s);
        }
    }
}

#[test]
fn latency_adds_the_longest_path_of_each_phase() {
    let t = mesh(&[4], 1).unwrap(); // 100 Gbit/s, 100 ns links
    let r = shortest_path(&t).unwrap();
    let s = Schedule::shift_alltoall(4, 12_500).unwrap();
    let pure = analyze(&t, &r, &s).unwrap();
    let o = AnalysisOptions { link_latency: true, hop_latency_s: 1e-9, ..Default::default() };
    let rep = analyze_with(&t, &r, &s, &o).unwrap();
    // The longest path of phase i = 1, 2, 3 crosses 3, 2, 3 router links (3 → 0, 0 → 2,
    // 0 → 3) plus two host links.
    for ((a, b), hops) in pure.phases.iter().zip(&rep.phases).zip([3.0, 2.0, 3.0]) {
        let channels = hops + 2.0;
        assert!((b.fluid_time_s - a.fluid_time_s - channels * 101e-9).abs() < 1e-15);
    }
}

/// Per phase `(flows, max load, Σ 1/worst, fluid seconds)`; then max channel bytes, Σhops and
/// hop-bytes.
type Recount = (Vec<(u32, u32, f64, f64)>, u64, u64, u64);

/// Straightforward recount: walk every message, hash-map loads per phase.
fn reference(t: &Topology, r: &RoutingTable, s: &Schedule) -> Recount {
    let fabric = paths::fabric_channels(t);
    let mut phases = Vec::new();
    let mut total: HashMap<u32, u64> = HashMap::new();
    let (mut hops_sum, mut hop_bytes) = (0, 0);
    for phase in s.phases() {
        let mut load: HashMap<u32, (u32, u64)> = HashMap::new();
        let mut routes = Vec::new();
        for m in phase {
            let (a, b) = (s.placement()[m.src as usize] as usize, s.placement()[m.dst as usize] as usize);
            if a == b {
                continue;
            }
            let mut p = Vec::new();
            r.path(t, a, b, &mut p).unwrap();
            for &c in &p {
                let e = load.entry(c).or_default();
                e.0 += 1;
                e.1 += m.bytes;
                *total.entry(c).or_default() += m.bytes;
            }
            let hops = p.iter().filter(|&&c| fabric[c as usize]).count() as u64;
            hops_sum += hops;
            hop_bytes += hops * m.bytes;
            routes.push(p);
        }
        let max = load.values().map(|v| v.0).max().unwrap_or(0);
        let ratio = routes.iter().map(|p| 1.0 / p.iter().map(|c| load[c].0).max().unwrap() as f64).sum::<f64>();
        let secs = load
            .iter()
            .filter(|(c, _)| fabric[**c as usize])
            .map(|(c, v)| v.1 as f64 * 8.0 / (t.links()[*c as usize / 2].spec.bandwidth_gbps * 1e9))
            .fold(0.0, f64::max);
        phases.push((routes.len() as u32, max, ratio, secs));
    }
    (phases, total.values().copied().max().unwrap_or(0), hops_sum, hop_bytes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Table lookups, per-message walks and a naive recount agree on random schedules with
    /// random sizes and placements, whatever the number of threads.
    #[test]
    fn fast_paths_agree_with_a_naive_recount(
        leaves in 2u32..5,
        per_leaf in 1u32..4,
        phases in proptest::collection::vec(
            proptest::collection::vec((0u32..64, 0u32..64, 1u64..5000), 0..12), 1..6),
        placement_seed in 0u64..1000,
        uplink_gbps in prop_oneof![Just(100.0), Just(40.0)],
    ) {
        let t = two_level_with_uplink(leaves, per_leaf, LinkSpec::new(uplink_gbps, 100.0).unwrap());
        let hosts = t.num_hosts() as u32;
        let r = shortest_path(&t).unwrap();
        let ranks = hosts + 2; // two ranks share hosts
        let phases: Vec<Vec<Message>> = phases
            .into_iter()
            .map(|p| p.into_iter().map(|(a, b, bytes)| Message { src: a % ranks, dst: b % ranks, bytes }).collect())
            .collect();
        let placement = (0..ranks).map(|i| ((i as u64 * 7 + placement_seed) % hosts as u64) as u32).collect();
        let s = Schedule::from_phases("random", ranks, phases).unwrap().with_placement(placement).unwrap();
        let o = AnalysisOptions::default();
        let fast = analyze_impl(&t, &r, &s, &o, true).unwrap();
        let walked = analyze_impl(&t, &r, &s, &o, false).unwrap();
        prop_assert_eq!(&fast, &walked);
        let single = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        prop_assert_eq!(&fast, &single.install(|| analyze(&t, &r, &s).unwrap()));
        let (want, max_bytes, hops, hop_bytes) = reference(&t, &r, &s);
        prop_assert_eq!(fast.max_channel_bytes, max_bytes);
        prop_assert_eq!(fast.sum_hops, hops);
        prop_assert_eq!(fast.hop_bytes, hop_bytes);
        for (got, (flows, max, ratio, secs)) in fast.phases.iter().zip(want) {
            prop_assert_eq!(got.flows, flows);
            prop_assert_eq!(got.max_load, max);
            let ratio = if flows == 0 { 1.0 } else { ratio / flows as f64 };
            prop_assert!((got.throughput_ratio - ratio).abs() < 1e-12);
            prop_assert!((got.fluid_time_s - secs).abs() <= 1e-12 * secs.max(1e-9));
        }
    }
}

/// Every figure of a [`LoadReport`] recomputed the plain way: one path walk per message, a
/// fresh per-channel count per phase, per-flow 1/worst summed flow by flow.
fn naive_report(t: &Topology, r: &RoutingTable, s: &Schedule) -> LoadReport {
    let channels = t.num_channels();
    let fabric = paths::fabric_channels(t);
    let secs_per_byte: Vec<f64> = (0..channels).map(|c| 8.0 / (t.links()[c / 2].spec.bandwidth_gbps * 1e9)).collect();
    let (mut worst, mut worst_phase, mut contended_phases) =
        (vec![0u32; channels], vec![0u32; channels], vec![0u32; channels]);
    let mut channel_bytes = vec![0u64; channels];
    let (mut ratio_sum, mut flows, mut bytes, mut sum_hops, mut hop_bytes) = (0.0, 0u64, 0u64, 0u64, 0u64);
    let mut phases = Vec::new();
    for (p, phase) in s.phases().enumerate() {
        let mut load = vec![0u32; channels];
        let mut phase_bytes = vec![0u64; channels];
        let mut routes = Vec::new();
        let (mut senders, mut receivers) = (Vec::new(), Vec::new());
        for m in phase {
            senders.push(m.src);
            receivers.push(m.dst);
            let (a, b) = (s.placement()[m.src as usize] as usize, s.placement()[m.dst as usize] as usize);
            if a == b {
                continue;
            }
            let mut path = Vec::new();
            r.path(t, a, b, &mut path).unwrap();
            for &c in &path {
                load[c as usize] += 1;
                phase_bytes[c as usize] += m.bytes;
            }
            let hops = path.iter().filter(|&&c| fabric[c as usize]).count() as u64;
            sum_hops += hops;
            hop_bytes += hops * m.bytes;
            bytes += m.bytes;
            routes.push(path);
        }
        let phase_ratio: f64 =
            routes.iter().map(|path| 1.0 / path.iter().map(|&c| load[c as usize]).max().unwrap() as f64).sum();
        ratio_sum += phase_ratio;
        flows += routes.len() as u64;
        let (mut secs_all, mut secs_fabric) = (0.0f64, 0.0f64);
        for c in 0..channels {
            let secs = phase_bytes[c] as f64 * secs_per_byte[c];
            secs_all = secs_all.max(secs);
            if fabric[c] {
                secs_fabric = secs_fabric.max(secs);
            }
            if load[c] > worst[c] {
                worst[c] = load[c];
                worst_phase[c] = p as u32;
            }
            contended_phases[c] += u32::from(load[c] > 1);
            channel_bytes[c] += phase_bytes[c];
        }
        let distinct = |mut v: Vec<u32>| {
            let n = v.len();
            v.sort_unstable();
            v.dedup();
            v.len() == n
        };
        let n = routes.len();
        phases.push(PhaseLoad {
            flows: n as u32,
            max_load: load.iter().copied().max().unwrap_or(0),
            contended_channels: load.iter().filter(|&&l| l > 1).count() as u32,
            throughput_ratio: if n == 0 { 1.0 } else { phase_ratio / n as f64 },
            fluid_time_s: if n == 0 { 0.0 } else { secs_fabric },
            fluid_time_host_links_s: if n == 0 { 0.0 } else { secs_all },
            permutation: distinct(senders) && distinct(receivers),
        });
    }
    let mut contended: Vec<usize> = (0..channels).filter(|&c| worst[c] > 1).collect();
    contended.sort_by_key(|&c| (std::cmp::Reverse(worst[c]), c));
    let max_channel_bytes = channel_bytes.iter().copied().max().unwrap_or(0);
    let completeness = s.completeness();
    LoadReport {
        complete: completeness.ok(),
        problem: completeness.first_problem.clone(),
        completeness,
        permutation_phases: phases.iter().filter(|p| p.permutation).count() as u32,
        max_congestion: phases.iter().map(|p| p.max_load).max().unwrap_or(0),
        throughput_ratio: if flows == 0 { 1.0 } else { ratio_sum / flows as f64 },
        flows,
        fluid_time_s: phases.iter().map(|p| p.fluid_time_s).sum(),
        fluid_time_host_links_s: phases.iter().map(|p| p.fluid_time_host_links_s).sum(),
        bytes,
        max_channel_bytes,
        sum_hops,
        hop_bytes,
        hops_x_max_channel: sum_hops as f64 * max_channel_bytes as f64,
        contended_links_total: contended.len() as u32,
        contended_links: contended
            .into_iter()
            .take(AnalysisOptions::default().max_listed_links)
            .map(|c| {
                let (from, to) = paths::channel_nodes(t, c as ChannelId);
                ContendedLink {
                    channel: c as ChannelId,
                    from,
                    to,
                    from_label: t.label(from).to_string(),
                    to_label: t.label(to).to_string(),
                    max_load: worst[c],
                    phase: worst_phase[c],
                    contended_phases: contended_phases[c],
                    bytes: channel_bytes[c],
                }
            })
            .collect(),
        phases,
    }
}

/// The analysis equals the naive recount: integers exactly, sums of floats to rounding.
fn assert_matches_naive(got: &LoadReport, want: &LoadReport) {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300);
    let strip = |r: &LoadReport| {
        let mut r = r.clone();
        r.throughput_ratio = 0.0;
        r.fluid_time_s = 0.0;
        r.fluid_time_host_links_s = 0.0;
        for p in &mut r.phases {
            p.throughput_ratio = 0.0;
        }
        r
    };
    assert_eq!(strip(got), strip(want));
    assert!(
        close(got.throughput_ratio, want.throughput_ratio),
        "{} vs {}",
        got.throughput_ratio,
        want.throughput_ratio
    );
    assert!(close(got.fluid_time_s, want.fluid_time_s));
    assert!(close(got.fluid_time_host_links_s, want.fluid_time_host_links_s));
    for (a, b) in got.phases.iter().zip(&want.phases) {
        assert!(close(a.throughput_ratio, b.throughput_ratio));
    }
}

#[test]
fn lsft_schedules_match_a_naive_recount() {
    // Paper 000's fabric at order 5 (186 servers): shift is contended, the Latin-square
    // schedules are not; Bruck's steps carry different sizes (the byte counts change size
    // between phases). Every figure equals a plain per-message recount, on one thread and on
    // several.
    use crate::traffic::alltoall::bruck;
    use crate::traffic::lsft::{FullSystemAllToAll, MoveRule, RankOrder, SubClusterAllToAll};
    let topo = crate::topology::lsft::latin_square_fat_tree(5, false, false).unwrap();
    let routes = route(&topo, Engine::Lsft, &RouteOptions::default()).unwrap();
    let n = topo.num_hosts() as u32;
    assert_eq!(n, 186);
    let size = 1 << 20;
    let shift = Schedule::shift_alltoall(n, size).unwrap();
    let full = FullSystemAllToAll::for_topology(&topo).unwrap().schedule(size).unwrap();
    let partial = SubClusterAllToAll::new(5, 4, 3, MoveRule::Text, RankOrder::RowMajor)
        .unwrap()
        .schedule_for(&topo, 0, size)
        .unwrap();
    let table3 = SubClusterAllToAll::new(5, 4, 3, MoveRule::PaperTable3, RankOrder::ColumnMajor)
        .unwrap()
        .schedule_for(&topo, 0, 4096)
        .unwrap();
    let bruck = bruck(n, 1000).unwrap();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    for s in [&shift, &full, &partial, &table3, &bruck] {
        let want = naive_report(&topo, &routes, s);
        let got = one.install(|| analyze(&topo, &routes, s).unwrap());
        assert_matches_naive(&got, &want);
        assert_eq!(got, three.install(|| analyze(&topo, &routes, s).unwrap()));
        assert!(got.complete, "{}", s.name());
    }
    // Pinned figures: shift contends, the proposed schedules do not.
    let report = |s: &Schedule| analyze(&topo, &routes, s).unwrap();
    let (shift, full, partial) = (report(&shift), report(&full), report(&partial));
    assert!(shift.max_congestion > 1 && shift.throughput_ratio < 1.0);
    assert_eq!((full.max_congestion, full.throughput_ratio), (1, 1.0));
    assert_eq!((partial.max_congestion, partial.throughput_ratio), (1, 1.0));
    assert_eq!(shift.flows, 186 * 185);
    assert_eq!(full.flows, 186 * 185);
    // Every off-leaf flow crosses leaf → spine → leaf: 2 hops; 6 servers per leaf.
    assert_eq!(shift.sum_hops, 186 * (186 - 6) * 2);
    assert_eq!(shift.hop_bytes, shift.sum_hops * size);
    // Lock-step time: one message time per phase when contention-free, a multiple otherwise.
    let unit = size as f64 * 8.0 / (topo.links()[0].spec.bandwidth_gbps * 1e9);
    let phases_with_flows = full.phases.iter().filter(|p| p.flows > 0).count() as f64;
    assert!((full.fluid_time_host_links_s - phases_with_flows * unit).abs() < 1e-9 * full.fluid_time_host_links_s);
    let shift_units: u32 = shift.phases.iter().map(|p| p.max_load).sum();
    assert!((shift.fluid_time_host_links_s - shift_units as f64 * unit).abs() < 1e-9 * shift.fluid_time_host_links_s);
}

#[test]
fn a_phase_heat_map_agrees_with_the_phase_loads() {
    // Each phase's per-channel flows peak at the report's max load and count one channel per
    // hop of every flow (the single-uplink tree: host, leaf, spine, leaf, host).
    let t = two_level(4, 3);
    let r = shortest_path(&t).unwrap();
    let s = Schedule::shift_alltoall(12, 1 << 10).unwrap();
    let report = analyze(&t, &r, &s).unwrap();
    for (p, load) in report.phases.iter().enumerate() {
        let flows = phase_channel_flows(&t, &r, &s, p).unwrap();
        assert_eq!(flows.iter().copied().max().unwrap(), load.max_load, "phase {p}");
        let hops: u32 = s.phase(p).iter().map(|m| if m.src / 3 == m.dst / 3 { 2 } else { 4 }).sum();
        assert_eq!(flows.iter().sum::<u32>(), hops, "phase {p}");
    }
    assert!(phase_channel_flows(&t, &r, &s, s.num_phases()).is_err());
}
