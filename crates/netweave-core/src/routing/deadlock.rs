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
use crate::topology::{ChannelId, Port, Topology};

use super::{Injection, RoutingTable};

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
///
/// The tables are destination-based, so the routes towards one destination form a tree of
/// `(channel, VC)` states: per destination, every source walks only until it meets a state
/// an earlier source already walked (its continuation is known). Dependencies go into a
/// bitset with one bit per possible `(channel, VC) → (next channel, VC)` turn, so duplicates
/// cost nothing; destinations run in parallel, one bitset per chunk, OR-merged at the end.
pub fn check(topo: &Topology, routes: &RoutingTable) -> Result<DeadlockReport> {
    check_in_blocks(topo, routes, DESTS_PER_BLOCK)
}

/// [`check`] copying the table columns of `block` destinations at a time.
fn check_in_blocks(topo: &Topology, routes: &RoutingTable, block: usize) -> Result<DeadlockReport> {
    routes.check_fits(topo)?;
    let block = block.max(1);
    let num_vcs = routes.vc_policy().num_vcs.max(1) as usize;
    let hosts = topo.num_hosts();
    let turns = TurnSlots::new(topo, num_vcs);
    let chunks = (rayon::current_num_threads() * 4).clamp(1, hosts.max(1));
    let per_chunk = hosts.div_ceil(chunks).max(1);
    let results: Vec<Result<(Vec<u64>, u8)>> = (0..hosts)
        .step_by(per_chunk)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|lo| {
            let mut walker = Walker::new(topo, routes, &turns, block);
            let hi = (lo + per_chunk).min(hosts);
            for start in (lo..hi).step_by(block) {
                let end = (start + block).min(hi);
                walker.load_block(start, end);
                for dst in start..end {
                    walker.destination(dst)?;
                }
            }
            Ok((walker.deps, walker.max_vc))
        })
        .collect();
    let mut deps: Vec<u64> = Vec::new();
    let mut max_vc = 0u8;
    for r in results {
        let (bits, v) = r?;
        max_vc = max_vc.max(v);
        if deps.is_empty() {
            deps = bits;
        } else {
            deps.par_iter_mut().zip(bits.par_iter()).for_each(|(a, b)| *a |= b);
        }
    }
    let edges = turns.edges(topo, &deps);
    let num_states = topo.num_channels() * num_vcs;
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

/// Destinations whose table columns a walker copies out together: the table is row-major
/// (`[switch][destination]`), so walking one destination's column straight from it would miss
/// the cache at every switch; a block of columns is read row by row, a cache line per switch.
const DESTS_PER_BLOCK: usize = 64;

/// One bit per possible dependency between switch-to-switch channels: channel `c` on VC `a`
/// followed by port `p` of the switch `c` enters, on VC `b`, is bit
/// `base[c] + (a · radix + p − 1) · V + b`.
struct TurnSlots {
    num_vcs: usize,
    /// `u64::MAX` for channels that touch a host (they lie on no cycle).
    base: Vec<u64>,
    total: u64,
}

impl TurnSlots {
    fn new(topo: &Topology, num_vcs: usize) -> Self {
        let mut base = vec![u64::MAX; topo.num_channels()];
        let mut total = 0u64;
        for (c, slot) in base.iter_mut().enumerate() {
            let (a, b) = topo.channel_ends(c as ChannelId);
            if topo.is_host(a.node) || topo.is_host(b.node) {
                continue;
            }
            *slot = total;
            total += (num_vcs * num_vcs) as u64 * topo.radix(b.node) as u64;
        }
        TurnSlots { num_vcs, base, total }
    }

    #[inline]
    fn slot(&self, radix: usize, from: ChannelId, from_vc: u8, port: usize, to_vc: u8) -> usize {
        let v = self.num_vcs;
        (self.base[from as usize] + ((from_vc as usize * radix + port - 1) * v + to_vc as usize) as u64) as usize
    }

    /// The set dependencies as sorted `from << 32 | to` state pairs (state = channel · V + VC).
    fn edges(&self, topo: &Topology, deps: &[u64]) -> Vec<u64> {
        let v = self.num_vcs;
        let mut edges = Vec::new();
        if deps.is_empty() {
            return edges;
        }
        for (c, &b0) in self.base.iter().enumerate() {
            if b0 == u64::MAX {
                continue;
            }
            let head = topo.channel_ends(c as ChannelId).1.node;
            let radix = topo.radix(head) as usize;
            let len = (v * v * radix) as u64;
            let mut i = b0;
            while i < b0 + len {
                let word = deps[(i >> 6) as usize] >> (i & 63);
                if word == 0 {
                    i = (i | 63) + 1;
                    continue;
                }
                i += word.trailing_zeros() as u64;
                if i >= b0 + len {
                    break;
                }
                let local = (i - b0) as usize;
                let (to_vc, rest) = (local % v, local / v);
                let (port, from_vc) = (rest % radix + 1, rest / radix);
                if let Some(next) = topo.out_channel(head, port as Port) {
                    let from = c * v + from_vc;
                    let to = next as usize * v + to_vc;
                    edges.push((from as u64) << 32 | to as u64);
                }
                i += 1;
            }
        }
        edges
    }
}

/// Walks every source towards one destination at a time, recording dependencies.
struct Walker<'a> {
    topo: &'a Topology,
    routes: &'a RoutingTable,
    turns: &'a TurnSlots,
    /// `seen[state]`: stamp of the walk that last passed the state.
    seen: Vec<u32>,
    stamp: u32,
    /// Per switch: (first stamp of the destination it was entered for, VCs entered on), so
    /// that the hosts of one switch walk once per injection VC, not once each.
    entered: Vec<(u32, u32)>,
    deps: Vec<u64>,
    max_vc: u8,
    /// Columns of the current block of destinations, `column[(dst - block_start) · S + switch]`.
    column: Vec<Port>,
    block_start: usize,
    /// For per-pair injection, the injection VCs of the block's destinations by source,
    /// `injection[(dst - block_start) · H + src]` (the same strided column otherwise).
    injection: Vec<u8>,
    /// Per switch: whether a packet entering from any of its hosts keeps its VC whatever port
    /// it leaves by, so that its hosts share walks per injection VC.
    hosts_keep_vc: Vec<bool>,
    /// Per source host: its entry switch's node and the port it enters by (`None` when the
    /// host has no link).
    entry: Vec<Option<(crate::topology::NodeId, Port)>>,
}

impl<'a> Walker<'a> {
    fn new(topo: &'a Topology, routes: &'a RoutingTable, turns: &'a TurnSlots, block: usize) -> Self {
        Walker {
            topo,
            routes,
            turns,
            seen: vec![0; topo.num_channels() * turns.num_vcs],
            stamp: 0,
            entered: vec![(0, 0); topo.num_switches()],
            deps: vec![0; turns.total.div_ceil(64) as usize],
            max_vc: 0,
            column: vec![0; block * topo.num_switches()],
            block_start: 0,
            injection: Vec::new(),
            hosts_keep_vc: topo
                .switches()
                .iter()
                .enumerate()
                .map(|(sw, &node)| {
                    let policy = routes.vc_policy();
                    let radix = topo.radix(node);
                    topo.neighbors(node)
                        .iter()
                        .filter(|a| topo.is_host(a.neighbor))
                        .all(|a| (0..=radix).all(|out| policy.change(sw, a.port, out) == super::VcChange::Keep))
                })
                .collect(),
            entry: topo
                .hosts()
                .iter()
                .map(|&h| topo.neighbors(h).first().map(|a| (a.neighbor, a.neighbor_port)))
                .collect(),
        }
    }

    /// Copy the table columns of destinations `start..end` (at most the block size).
    fn load_block(&mut self, start: usize, end: usize) {
        let (n, hosts) = (self.topo.num_switches(), self.topo.num_hosts());
        let ports = self.routes.ports();
        // A tile of switches at a time, so that both the rows read and the columns written
        // stay in cache (writing whole columns at once strides by the switch count and thrashes).
        const TILE: usize = 256;
        for lo in (0..n).step_by(TILE) {
            let hi = (lo + TILE).min(n);
            for i in 0..end - start {
                let column = &mut self.column[i * n + lo..i * n + hi];
                for (k, slot) in column.iter_mut().enumerate() {
                    *slot = ports[(lo + k) * hosts + start + i];
                }
            }
        }
        if let Injection::PerPair { num_hosts, vcs } = &self.routes.vc_policy().injection {
            if self.injection.len() < (end - start) * hosts {
                self.injection.resize((end - start) * hosts, 0);
            }
            for src in 0..hosts {
                let row = &vcs[src * num_hosts + start..src * num_hosts + end];
                for (i, &vc) in row.iter().enumerate() {
                    self.injection[i * hosts + src] = vc;
                }
            }
        }
        self.block_start = start;
    }

    /// Walk every source towards host `dst`. A walk stops at a state an earlier walk of this
    /// destination passed; meeting a state of its own walk is a loop.
    fn destination(&mut self, dst: usize) -> Result<()> {
        let (topo, routes) = (self.topo, self.routes);
        let hosts = topo.num_hosts();
        if self.stamp as usize + hosts + 2 >= u32::MAX as usize {
            self.seen.fill(0);
            self.entered.fill((0, 0));
            self.stamp = 0;
        }
        // A stamp of its own per destination, even if every walk of it is shared.
        self.stamp += 1;
        let first_walk = self.stamp;
        let num_vcs = routes.vc_policy().num_vcs;
        let v = self.turns.num_vcs as u32;
        let dst_node = topo.hosts()[dst];
        let policy = routes.vc_policy();
        let n = topo.num_switches();
        let column = &self.column[(dst - self.block_start) * n..(dst - self.block_start + 1) * n];
        for src in 0..hosts {
            if src == dst {
                continue;
            }
            let Some((entry_node, entry_port)) = self.entry[src] else {
                return Err(broken(topo, routes, src, dst));
            };
            let mut vc = match policy.injection {
                Injection::PerPair { .. } => self.injection[(dst - self.block_start) * hosts + src],
                _ => policy.injection_vc(src, dst),
            };
            self.max_vc = self.max_vc.max(vc);
            // Hosts entering one switch on one VC share the rest of the walk, unless the VC
            // change at that switch depends on the host's port.
            if !topo.is_host(entry_node) && vc < 32 && self.hosts_keep_vc[topo.kind_index(entry_node)] {
                let (entry_stamp, entry_vcs) = &mut self.entered[topo.kind_index(entry_node)];
                if *entry_stamp != first_walk {
                    (*entry_stamp, *entry_vcs) = (first_walk, 0);
                }
                if *entry_vcs >> vc & 1 != 0 {
                    continue;
                }
                *entry_vcs |= 1 << vc;
            }
            self.stamp += 1;
            let stamp = self.stamp;
            let mut node = entry_node;
            let mut in_port = entry_port;
            // Previous switch-to-switch channel and its VC, if the last hop was one.
            let mut prev: Option<(ChannelId, u8, usize)> = None;
            while node != dst_node {
                if topo.is_host(node) {
                    return Err(broken(topo, routes, src, dst));
                }
                let sw = topo.kind_index(node);
                let port = column[sw];
                let Some(channel) = topo.out_channel(node, port) else {
                    return Err(broken(topo, routes, src, dst));
                };
                vc = policy.change(sw, in_port, port).apply(vc);
                if vc >= num_vcs {
                    return Err(broken(topo, routes, src, dst));
                }
                self.max_vc = self.max_vc.max(vc);
                let far = topo.channel_ends(channel).1;
                if self.turns.base[channel as usize] != u64::MAX {
                    if let Some((pc, pvc, radix)) = prev {
                        let bit = self.turns.slot(radix, pc, pvc, port as usize, vc);
                        self.deps[bit >> 6] |= 1 << (bit & 63);
                    }
                    let state = (channel * v + vc as u32) as usize;
                    let mark = self.seen[state];
                    if mark == stamp {
                        return Err(broken(topo, routes, src, dst));
                    }
                    if mark >= first_walk {
                        break;
                    }
                    self.seen[state] = stamp;
                    prev = Some((channel, vc, topo.radix(far.node) as usize));
                } else {
                    prev = None;
                }
                node = far.node;
                in_port = far.port;
            }
        }
        Ok(())
    }
}

/// The path walker's own error for a pair the fast walk found broken.
fn broken(topo: &Topology, routes: &RoutingTable, src: usize, dst: usize) -> NetweaveError {
    let mut hops = Vec::new();
    match routes.hops(topo, src, dst, &mut hops) {
        Err(e) => e,
        Ok(()) => NetweaveError::Routing(format!("route {src} -> {dst} is broken")),
    }
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

    /// Every pair walked in full, dependencies in a set: what [`check`] must agree with.
    fn naive_dependencies(topo: &Topology, routes: &RoutingTable) -> std::collections::HashSet<(u32, u8, u32, u8)> {
        let mut deps = std::collections::HashSet::new();
        let mut hops = Vec::new();
        for s in 0..topo.num_hosts() {
            for d in 0..topo.num_hosts() {
                hops.clear();
                routes.hops(topo, s, d, &mut hops).unwrap();
                let inner: Vec<_> = hops
                    .iter()
                    .filter(|h| {
                        let (a, b) = topo.channel_ends(h.channel);
                        !topo.is_host(a.node) && !topo.is_host(b.node)
                    })
                    .collect();
                for w in inner.windows(2) {
                    deps.insert((w[0].channel, w[0].vc, w[1].channel, w[1].vc));
                }
            }
        }
        deps
    }

    #[test]
    fn tree_walk_finds_the_same_dependencies_as_walking_every_pair() {
        use crate::topology::random::random_regular;
        let cases = [
            (torus(&[4, 4], 2).unwrap(), Engine::Dor),
            (torus(&[5, 3], 1).unwrap(), Engine::MinHop),
            (mesh(&[4, 4], 1).unwrap(), Engine::Sbp),
            (torus(&[4, 4], 1).unwrap(), Engine::Dl),
            (random_regular(24, 4, 3, 5).unwrap(), Engine::Dl),
            (mesh(&[3, 3], 2).unwrap(), Engine::Sbp),
            (random_regular(24, 4, 2, 3).unwrap(), Engine::Lash),
            (random_regular(24, 4, 2, 3).unwrap(), Engine::Dfsssp),
            (random_regular(24, 4, 2, 3).unwrap(), Engine::Nue),
        ];
        for (t, engine) in cases {
            let r = route(&t, engine, &RouteOptions { max_vcs: 8, ..RouteOptions::default() }).unwrap();
            let rep = check(&t, &r).unwrap();
            let deps = naive_dependencies(&t, &r);
            assert_eq!(rep.dependencies, deps.len(), "{engine} on {}", t.name());
            // Small blocks of copied columns (several per chunk of destinations) agree.
            for block in [1, 3, 7] {
                assert_eq!(
                    check_in_blocks(&t, &r, block).unwrap(),
                    rep,
                    "{engine} on {} in blocks of {block}",
                    t.name()
                );
            }
            // A cycle, when reported, is made of real dependencies.
            for w in 0..rep.cycle.len() {
                let (a, b) = (&rep.cycle[w], &rep.cycle[(w + 1) % rep.cycle.len()]);
                assert!(deps.contains(&(a.channel, a.vc, b.channel, b.vc)), "{engine}");
            }
        }
    }

    #[test]
    fn broken_tables_are_errors_not_verdicts() {
        let t = torus(&[4, 4], 1).unwrap();
        let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
        let mut dropped = r.clone();
        dropped.set_out_port(0, 5, crate::routing::NO_PORT);
        let err = check(&t, &dropped).unwrap_err().to_string();
        assert!(err.contains("no route"), "{err}");
        // Switches 0 and 1 send host 5's packets to each other.
        let (s0, s1) = (t.switches()[0], t.switches()[1]);
        let port_to = |from, to| t.neighbors(from).iter().find(|a| a.neighbor == to).unwrap().port;
        let mut looping = r.clone();
        looping.set_out_port(0, 5, port_to(s0, s1));
        looping.set_out_port(1, 5, port_to(s1, s0));
        let err = check(&t, &looping).unwrap_err().to_string();
        assert!(err.contains("loops"), "{err}");
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
