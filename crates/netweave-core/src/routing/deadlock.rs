//! Deadlock-freedom proof: the channel dependency graph (Dally & Seitz).
//!
//! A vertex is a `(switch-to-switch channel, VC)`; an edge `a → b` exists when some routed
//! packet holds `a` while requesting `b`. A deterministic routing is deadlock-free iff this
//! graph is acyclic. Host channels are left out: an injection channel has no incoming
//! dependency and an ejection channel no outgoing one, so neither can lie on a cycle.
//!
//! ```
//! use netweave_core::topology::grid::torus;
//! use netweave_core::routing::{deadlock, route, Engine, RouteOptions};
//! let ring = torus(&[5], 1).unwrap();
//! let routes = route(&ring, Engine::MinHop, &RouteOptions::default()).unwrap();
//! let report = deadlock::check(&ring, &routes).unwrap();
//! assert!(!report.deadlock_free);          // shortest paths on a ring with one VC
//! assert!(report.cycle.len() >= 2);
//! ```

use rayon::prelude::*;
use serde::Serialize;

use crate::error::{NetweaveError, Result};
use crate::topology::{ChannelId, Topology};

use super::RoutingTable;

/// One channel of a dependency cycle, with readable ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CycleChannel {
    pub channel: ChannelId,
    pub vc: u8,
    /// `"label:port"` of the sending end.
    pub from: String,
    /// `"label:port"` of the receiving end.
    pub to: String,
}

/// Result of [`check`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeadlockReport {
    pub deadlock_free: bool,
    /// Highest VC any route uses, plus one.
    pub vcs_used: u8,
    /// Distinct dependencies between switch-to-switch channels.
    pub dependencies: usize,
    /// One dependency cycle when the routing can deadlock, empty otherwise.
    pub cycle: Vec<CycleChannel>,
}

/// Build the channel dependency graph of `routes` on `topo` and look for a cycle.
///
/// Errors if a route is broken (no route, loop, VC overflow) — a routing that does not
/// deliver every pair has no meaningful deadlock verdict.
pub fn check(topo: &Topology, routes: &RoutingTable) -> Result<DeadlockReport> {
    routes.check_fits(topo)?;
    let num_vcs = routes.vc_policy().num_vcs.max(1) as usize;
    let num_states = topo.num_channels() * num_vcs;
    let hosts = topo.num_hosts();
    // Per destination, walk every source; a state already walked for this destination has a
    // known continuation, so the walk stops there. Destinations run in parallel.
    let per_dest: Vec<Result<(Vec<u64>, u8)>> = (0..hosts)
        .into_par_iter()
        .map_init(
            || (vec![u32::MAX; num_states], Vec::new()),
            |(seen, hops), dst| {
                let mut edges = Vec::new();
                let mut max_vc = 0u8;
                for src in 0..hosts {
                    if src == dst {
                        continue;
                    }
                    hops.clear();
                    routes.hops(topo, src, dst, hops)?;
                    let mut prev: Option<u32> = None;
                    for h in hops.iter() {
                        max_vc = max_vc.max(h.vc);
                        if is_host_channel(topo, h.channel) {
                            continue;
                        }
                        let state = h.channel * num_vcs as u32 + h.vc as u32;
                        if let Some(p) = prev {
                            edges.push(((p as u64) << 32) | state as u64);
                        }
                        if seen[state as usize] == dst as u32 {
                            break;
                        }
                        seen[state as usize] = dst as u32;
                        prev = Some(state);
                    }
                }
                edges.sort_unstable();
                edges.dedup();
                Ok((edges, max_vc))
            },
        )
        .collect();
    let mut edges = Vec::new();
    let mut max_vc = 0;
    for r in per_dest {
        let (e, v) = r?;
        edges.extend(e);
        max_vc = max_vc.max(v);
    }
    edges.par_sort_unstable();
    edges.dedup();
    let cycle = find_cycle(num_states, &edges);
    let cycle = cycle
        .into_iter()
        .map(|state| {
            let channel = state / num_vcs as u32;
            let (a, b) = topo.channel_ends(channel);
            CycleChannel {
                channel,
                vc: (state % num_vcs as u32) as u8,
                from: format!("{}:{}", topo.label(a.node), a.port),
                to: format!("{}:{}", topo.label(b.node), b.port),
            }
        })
        .collect::<Vec<_>>();
    let vcs_used = if hosts > 1 { max_vc + 1 } else { 0 };
    Ok(DeadlockReport { deadlock_free: cycle.is_empty(), vcs_used, dependencies: edges.len(), cycle })
}

/// Check and turn a cycle into an error naming it (for engines that promise deadlock freedom).
pub fn require_deadlock_free(topo: &Topology, routes: &RoutingTable) -> Result<DeadlockReport> {
    let report = check(topo, routes)?;
    if !report.deadlock_free {
        let names: Vec<String> = report.cycle.iter().map(|c| format!("{}->{} vc{}", c.from, c.to, c.vc)).collect();
        return Err(NetweaveError::Routing(format!(
            "{} routing has a channel dependency cycle: {}",
            routes.engine(),
            names.join(", ")
        )));
    }
    Ok(report)
}

fn is_host_channel(topo: &Topology, channel: ChannelId) -> bool {
    let (a, b) = topo.channel_ends(channel);
    topo.is_host(a.node) || topo.is_host(b.node)
}

/// One cycle of the graph given as sorted, deduplicated `from << 32 | to` edges, or empty.
/// Iterative three-colour DFS, so deep graphs cannot overflow the stack.
fn find_cycle(num_states: usize, edges: &[u64]) -> Vec<u32> {
    let mut offsets = vec![0u32; num_states + 1];
    for &e in edges {
        offsets[(e >> 32) as usize + 1] += 1;
    }
    for i in 0..num_states {
        offsets[i + 1] += offsets[i];
    }
    let targets: Vec<u32> = edges.iter().map(|&e| e as u32).collect();
    const WHITE: u8 = 0;
    const GREY: u8 = 1;
    const BLACK: u8 = 2;
    let mut colour = vec![WHITE; num_states];
    let mut parent = vec![u32::MAX; num_states];
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for root in 0..num_states as u32 {
        if colour[root as usize] != WHITE || offsets[root as usize] == offsets[root as usize + 1] {
            continue;
        }
        colour[root as usize] = GREY;
        stack.push((root, offsets[root as usize]));
        while let Some(top) = stack.last_mut() {
            let (v, next) = *top;
            if next == offsets[v as usize + 1] {
                colour[v as usize] = BLACK;
                stack.pop();
                continue;
            }
            top.1 += 1;
            let u = targets[next as usize];
            match colour[u as usize] {
                WHITE => {
                    colour[u as usize] = GREY;
                    parent[u as usize] = v;
                    stack.push((u, offsets[u as usize]));
                }
                GREY => {
                    // Back edge v → u: the cycle is u … v along the DFS tree.
                    let mut cycle = vec![v];
                    let mut w = v;
                    while w != u {
                        w = parent[w as usize];
                        cycle.push(w);
                    }
                    cycle.reverse();
                    return cycle;
                }
                _ => {}
            }
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::grid::{mesh, torus};

    #[test]
    fn cycle_finder_on_small_graphs() {
        let e = |a: u64, b: u64| (a << 32) | b;
        assert!(find_cycle(3, &[e(0, 1), e(1, 2)]).is_empty());
        let c = find_cycle(4, &[e(0, 1), e(1, 2), e(2, 3), e(3, 1)]);
        assert_eq!(c, vec![1, 2, 3]);
        assert_eq!(find_cycle(2, &[e(1, 1)]), vec![1]);
    }

    #[test]
    fn shortest_paths_on_a_torus_ring_deadlock() {
        let t = torus(&[6, 3], 1).unwrap();
        let r = route(&t, Engine::MinHop, &RouteOptions::default()).unwrap();
        let rep = check(&t, &r).unwrap();
        assert!(!rep.deadlock_free);
        assert_eq!(rep.vcs_used, 1);
        // The cycle is a closed walk: each channel ends where the next begins.
        for w in 0..rep.cycle.len() {
            let next = &rep.cycle[(w + 1) % rep.cycle.len()];
            let end_node = rep.cycle[w].to.rsplit_once(':').unwrap().0;
            assert_eq!(end_node, next.from.rsplit_once(':').unwrap().0);
        }
        assert!(require_deadlock_free(&t, &r).unwrap_err().to_string().contains("cycle"));
    }

    #[test]
    fn trees_have_no_cycles() {
        let line = mesh(&[5], 2).unwrap();
        let r = route(&line, Engine::MinHop, &RouteOptions::default()).unwrap();
        let rep = check(&line, &r).unwrap();
        assert!(rep.deadlock_free && rep.cycle.is_empty());
        assert!(rep.dependencies > 0);
    }
}
