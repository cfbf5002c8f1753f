//! Structured channel pools (SBP, paper 002 §2.4) and the reduced variant (§2.5).
//!
//! Any minimal path is legal: the VC grows by one at every switch a packet crosses from a
//! switch port to a switch port, so the VC strictly increases along consecutive inter-switch
//! channels and no dependency cycle can close. Host ports never change the VC (the paper's
//! host-port exception), so the `k`-th switch link of a path uses VC `k − 1` and a fabric needs
//! as many VCs as its longest routed path has switch links — the diameter.
//!
//! The reduced variant increments only at switches with at least 3 neighbouring switches. It
//! needs fewer VCs, but a ring of switches with ≤ 2 switch neighbours never changes VC, so
//! it is verified with [`deadlock::check`] and refused when a cycle remains (on a ring).

use crate::error::{NetweaveError, Result};
use crate::topology::fabric::SwitchFabric;
use crate::topology::{Port, Topology};

use super::deadlock;
use super::minhop::hosts_by_switch;
use super::select::Selector;
use super::updown::disconnected;
use super::{Injection, RouteOptions, RoutingTable, VcChange, VcPolicy, VcTransitions, MAX_VCS};

/// Structured channel pools on minimal paths chosen by `options.select`; `reduced` selects the
/// variant that increments the VC only at switches with ≥ 3 switch neighbours.
///
/// Errors (one line) when the fabric needs more VCs than `options.max_vcs` — naming the count
/// it needs — when the switches carrying hosts are not connected, and, for the reduced
/// variant, when a channel dependency cycle remains.
///
/// ```
/// use netweave_core::topology::grid::{mesh, torus};
/// use netweave_core::routing::{sbp, RouteOptions};
/// let o = RouteOptions::default(); // 8 VCs
/// assert_eq!(sbp::structured_channel_pools(&mesh(&[4, 4], 4).unwrap(), &o, false).unwrap().vc_policy().num_vcs, 6);
/// assert_eq!(sbp::structured_channel_pools(&torus(&[4, 4], 4).unwrap(), &o, false).unwrap().vc_policy().num_vcs, 4);
/// let tight = RouteOptions { max_vcs: 4, ..o };
/// let err = sbp::structured_channel_pools(&mesh(&[4, 4], 4).unwrap(), &tight, false).unwrap_err();
/// assert!(err.to_string().contains("sbp needs 6 VCs"));
/// ```
pub fn structured_channel_pools(topo: &Topology, options: &RouteOptions, reduced: bool) -> Result<RoutingTable> {
    let name = if reduced { "sbp-reduced" } else { "sbp" };
    if options.max_vcs == 0 || options.max_vcs > MAX_VCS {
        return crate::invalid!("the VC budget must be 1..={MAX_VCS}, got {}", options.max_vcs);
    }
    let by_switch = hosts_by_switch(topo)?;
    let mut table = RoutingTable::new(topo, name);
    let n = topo.num_switches();
    if n == 0 {
        return Ok(table);
    }
    let graph = SwitchFabric::new(topo);
    // Where the VC grows: every switch for SBP, switches with ≥ 3 switch neighbours if reduced.
    let increments: Vec<bool> = (0..n).map(|v| !reduced || graph.neighbors(v).len() >= 3).collect();

    let mut selector = Selector::new(topo, options.select);
    let mut dist = vec![u32::MAX; n];
    let mut queue = Vec::with_capacity(n);
    // Candidate ports of each switch towards the current target, with the switch each reaches.
    let mut cand_start = vec![0u32; n + 1];
    let mut cand_port: Vec<Port> = Vec::new();
    let mut cand_next: Vec<u32> = Vec::new();
    // VC increments still ahead of a packet that has just left switch x (per destination host).
    let mut ahead = vec![0u32; n];
    let mut max_increments = 0u32;
    let mut worst: Option<(usize, usize)> = None;
    for (t, dests) in by_switch.iter().enumerate() {
        if dests.is_empty() {
            continue;
        }
        graph.bfs(t, &mut dist, &mut queue);
        if let Some(s) = (0..n).find(|&s| !by_switch[s].is_empty() && dist[s] == u32::MAX) {
            let what = format!(
                "{name}: switch {} cannot reach switch {}, both with hosts",
                topo.label(topo.switches()[s]),
                topo.label(topo.switches()[t])
            );
            return Err(disconnected(topo, &graph, &what));
        }
        cand_port.clear();
        cand_next.clear();
        for (x, &node) in topo.switches().iter().enumerate() {
            cand_start[x] = cand_port.len() as u32;
            if x == t || dist[x] == u32::MAX {
                continue;
            }
            for a in topo.neighbors(node) {
                if topo.is_host(a.neighbor) {
                    continue;
                }
                let y = topo.kind_index(a.neighbor);
                if dist[y] != u32::MAX && dist[y] + 1 == dist[x] {
                    cand_port.push(a.port);
                    cand_next.push(y as u32);
                }
            }
        }
        cand_start[n] = cand_port.len() as u32;
        for (local, &d) in dests.iter().enumerate() {
            let dest = topo.hosts()[d];
            if let Some(a) = topo.neighbors(topo.switches()[t]).iter().find(|a| a.neighbor == dest) {
                selector.record(t, a.port);
                table.set_out_port(t, d, a.port);
            }
            // BFS order: a switch's next hop (one step closer) is settled before it.
            for &x in &queue[1..] {
                let x = x as usize;
                let range = cand_start[x] as usize..cand_start[x + 1] as usize;
                let port = selector.choose(x, local, &cand_port[range.clone()]);
                table.set_out_port(x, d, port);
                let i = range.start + cand_port[range].iter().position(|&p| p == port).unwrap_or(0);
                let y = cand_next[i] as usize;
                // The packet transits y (switch → y → switch) unless y is the destination's switch.
                ahead[x] = if y == t { 0 } else { ahead[y] + increments[y] as u32 };
                if !by_switch[x].is_empty() && ahead[x] >= max_increments {
                    if ahead[x] > max_increments || worst.is_none() {
                        worst = Some((x, t));
                    }
                    max_increments = ahead[x];
                }
            }
        }
    }
    let needed = max_increments as u64 + 1;
    if needed > options.max_vcs as u64 {
        let why = match (reduced, worst) {
            (false, _) => format!("its diameter: a minimal route crosses {needed} switch links"),
            (true, Some((s, t))) => format!(
                "the route {} -> {} crosses {max_increments} switches with ≥ 3 switch neighbours",
                topo.label(topo.switches()[s]),
                topo.label(topo.switches()[t])
            ),
            (true, None) => "its routes".to_string(),
        };
        return Err(NetweaveError::Routing(format!(
            "{name} needs {needed} VCs on this fabric ({why}), the budget is {}",
            options.max_vcs
        )));
    }
    let mut transitions = VcTransitions::new(topo);
    for (s, &node) in topo.switches().iter().enumerate() {
        if !increments[s] {
            continue;
        }
        for a_in in topo.neighbors(node).iter().filter(|a| !topo.is_host(a.neighbor)) {
            for a_out in topo.neighbors(node).iter().filter(|a| !topo.is_host(a.neighbor)) {
                transitions.set(s, a_in.port, a_out.port, VcChange::Increment);
            }
        }
    }
    table.set_vc_policy(VcPolicy { num_vcs: needed as u8, injection: Injection::Zero, transitions: Some(transitions) });
    if reduced {
        // Plain SBP is acyclic by construction; the reduced rule only where no cycle of
        // low-degree switches exists, so prove it.
        let report = deadlock::check(topo, &table)?;
        if !report.deadlock_free {
            const SHOWN: usize = 6;
            let mut cycle: Vec<String> =
                report.cycle.iter().take(SHOWN).map(|c| format!("{}->{} vc{}", c.from, c.to, c.vc)).collect();
            if report.cycle.len() > SHOWN {
                cycle.push(format!("… {} channels", report.cycle.len()));
            }
            return Err(NetweaveError::Routing(format!(
                "sbp-reduced is not deadlock-free on this fabric: switches with fewer than 3 switch \
                 neighbours never change VC, and a ring of them closes the dependency cycle {} (use sbp)",
                cycle.join(", ")
            )));
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::metrics::route_metrics;
    use crate::routing::{route, Engine, Select};
    use crate::topology::dragonfly::{dragonfly, GlobalArrangement};
    use crate::topology::fat_tree::{fat_tree, k_ary_n_tree};
    use crate::topology::grid::{hypercube, mesh, torus};
    use crate::topology::lsft::latin_square_fat_tree;
    use crate::topology::random::{irregular, random_regular};
    use crate::topology::{LinkSpec, TopologyBuilder};

    fn opts(max_vcs: u8) -> RouteOptions {
        RouteOptions { max_vcs, ..Default::default() }
    }

    fn vcs(t: &Topology, reduced: bool) -> u8 {
        structured_channel_pools(t, &opts(16), reduced).unwrap().vc_policy().num_vcs
    }

    #[test]
    fn vc_counts_match_the_paper() {
        // §2.4 / §5.2 item 2: 6 VCs on the 4×4 mesh, 4 on the 4×4 torus (their diameters).
        let m = mesh(&[4, 4], 4).unwrap();
        let t = torus(&[4, 4], 4).unwrap();
        assert_eq!(vcs(&m, false), 6);
        assert_eq!(vcs(&t, false), 4);
        // Stand-ins for topologies A/B have diameter 6, so 6 VCs as well.
        assert_eq!(vcs(&irregular(16, 4, 6, 4, 1).unwrap(), false), 6);
        for t in [&m, &t] {
            let r = structured_channel_pools(t, &opts(8), false).unwrap();
            let met = route_metrics(t, &r).unwrap();
            assert_eq!(met.non_minimal_pairs, 0);
            assert_eq!(met.vcs_used, r.vc_policy().num_vcs);
            // Reduced needs fewer: the 4×4 torus has no switch with < 3 neighbours, the mesh
            // has four corners.
            assert!(vcs(t, true) <= vcs(t, false));
        }
        assert_eq!(vcs(&torus(&[4, 4], 1).unwrap(), true), 4);
    }

    #[test]
    fn budget_error_names_the_needed_count() {
        let m = mesh(&[4, 4], 4).unwrap();
        let err = structured_channel_pools(&m, &opts(4), false).unwrap_err().to_string();
        assert!(err.contains("sbp needs 6 VCs") && err.contains("budget is 4"), "{err}");
        assert!(!err.contains('\n'));
        // A line has no switch with 3 neighbours: reduced SBP needs 1 VC there.
        let line = mesh(&[9], 1).unwrap();
        assert_eq!(structured_channel_pools(&line, &opts(1), true).unwrap().vc_policy().num_vcs, 1);
        assert!(structured_channel_pools(&line, &opts(1), false).is_err());
        let m8 = mesh(&[8, 8], 1).unwrap();
        let err = structured_channel_pools(&m8, &opts(3), true).unwrap_err().to_string();
        assert!(err.starts_with("routing error: sbp-reduced needs ") && err.contains("budget is 3"), "{err}");
    }

    #[test]
    fn increments_exactly_on_switch_to_switch_pairs() {
        let t = mesh(&[4, 4], 2).unwrap();
        for reduced in [false, true] {
            let r = structured_channel_pools(&t, &opts(8), reduced).unwrap();
            let g = SwitchFabric::new(&t);
            for (s, &node) in t.switches().iter().enumerate() {
                for a in t.neighbors(node) {
                    for b in t.neighbors(node) {
                        let sw = !t.is_host(a.neighbor) && !t.is_host(b.neighbor);
                        let inc = sw && (!reduced || g.neighbors(s).len() >= 3);
                        let want = if inc { VcChange::Increment } else { VcChange::Keep };
                        assert_eq!(r.vc_policy().change(s, a.port, b.port), want);
                    }
                }
            }
        }
    }

    #[test]
    fn deadlock_free_on_every_family() {
        for t in [
            mesh(&[4, 4], 4).unwrap(),
            torus(&[4, 4], 4).unwrap(),
            torus(&[2, 3], 1).unwrap(),
            hypercube(4, 2).unwrap(),
            fat_tree(4, 3, false).unwrap(),
            k_ary_n_tree(3, 3).unwrap(),
            latin_square_fat_tree(3, false, false).unwrap(),
            dragonfly(4, 2, 2, None, GlobalArrangement::Relative).unwrap(),
            random_regular(24, 4, 2, 7).unwrap(),
            irregular(16, 4, 6, 4, 1).unwrap(),
            irregular(16, 4, 6, 4, 2).unwrap(),
            irregular(40, 3, 9, 1, 3).unwrap(),
        ] {
            for reduced in [false, true] {
                for select in Select::ALL {
                    let r = structured_channel_pools(&t, &RouteOptions { select, ..opts(16) }, reduced).unwrap();
                    let rep = deadlock::check(&t, &r).unwrap();
                    assert!(rep.deadlock_free, "{} on {}: {:?}", r.engine(), t.name(), rep.cycle);
                    assert_eq!(rep.vcs_used, r.vc_policy().num_vcs, "{} on {}", r.engine(), t.name());
                    assert_eq!(route_metrics(&t, &r).unwrap().non_minimal_pairs, 0);
                }
            }
        }
    }

    #[test]
    fn reduced_refuses_a_ring() {
        let ring = torus(&[6], 1).unwrap();
        assert_eq!(vcs(&ring, false), 3);
        let err = structured_channel_pools(&ring, &opts(8), true).unwrap_err().to_string();
        assert!(err.contains("not deadlock-free") && err.contains("ring"), "{err}");
        assert!(!err.contains('\n'));
    }

    #[test]
    fn low_port_and_per_destination_choose_different_paths() {
        // §2.9: per-destination spreads the hosts of a switch over the minimal paths, low port
        // first keeps one path per switch pair (e-cube-like on the mesh).
        let t = mesh(&[4, 4], 4).unwrap();
        let low = route(&t, Engine::Sbp, &RouteOptions { select: Select::LowPort, ..opts(8) }).unwrap();
        let spread = route(&t, Engine::Sbp, &RouteOptions { select: Select::PerDestination, ..opts(8) }).unwrap();
        // Switch 0 towards the hosts of switch 15 (hosts 60..64): +x or +y.
        let ports = |r: &RoutingTable| (60..64).map(|d| r.out_port(0, d)).collect::<Vec<_>>();
        assert_eq!(ports(&low), vec![5; 4]);
        assert_eq!(ports(&spread), vec![5, 7, 5, 7]);
        let (ml, ms) = (route_metrics(&t, &low).unwrap(), route_metrics(&t, &spread).unwrap());
        assert_eq!(ml.path_diversity, 1.0);
        assert!(ms.path_diversity > 1.0);
        // Low port first is dimension order on the mesh: x first, then y.
        let mut path = Vec::new();
        low.path(&t, 0, 63, &mut path).unwrap();
        let switches: Vec<u32> = path[..path.len() - 1].iter().map(|&c| t.channel_ends(c).1.node).collect();
        assert_eq!(switches, vec![0, 1, 2, 3, 7, 11, 15]);
    }

    #[test]
    fn disconnected_and_degenerate_fabrics() {
        let mut b = TopologyBuilder::new("islands");
        let s: Vec<_> = (0..3).map(|i| b.add_switch(format!("s{i}"), 3)).collect();
        b.connect(s[0], s[1], LinkSpec::default()).unwrap();
        for &sw in &[s[0], s[2]] {
            let h = b.add_host(format!("h{sw}"));
            b.connect(h, sw, LinkSpec::default()).unwrap();
        }
        let err = structured_channel_pools(&b.build().unwrap(), &opts(8), false).unwrap_err().to_string();
        assert!(err.contains("2 components") && err.contains("{s2}"), "{err}");
        for t in [mesh(&[1], 2).unwrap(), torus(&[3, 3], 0).unwrap(), TopologyBuilder::new("e").build().unwrap()] {
            for reduced in [false, true] {
                let r = structured_channel_pools(&t, &opts(1), reduced).unwrap();
                assert_eq!(r.vc_policy().num_vcs, 1);
            }
        }
        assert!(structured_channel_pools(&mesh(&[2], 1).unwrap(), &opts(0), false).is_err());
    }
}
