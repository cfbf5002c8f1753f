//! Swap descent on hop-bytes: move each rank next to its partners while that lowers the cost.
//!
//! A constructive start (greedy growth, BISEM) leaves ranks whose partners ended up far away;
//! annealing fixes them slowly, by random moves. This pass goes straight at them: for every
//! rank, heaviest first, it tries the slots one switch hop from each partner more than one hop
//! away, farthest first (swapping with whichever rank sits there, or stepping into a free slot),
//! and keeps the first move that lowers hop-bytes, pass after pass until a pass improves nothing. Each try is an exact delta
//! over the two ranks' messages, so a pass over a 512-rank, degree-6 pattern takes milliseconds.
//!
//! ```
//! use netweave_core::mapping::{baselines, descent, MapNetwork, Pattern};
//! use netweave_core::routing::{route, Engine, RouteOptions};
//! let topo = netweave_core::topology::grid::torus(&[4, 4], 1).unwrap();
//! let net = MapNetwork::new(&topo, &route(&topo, Engine::Dor, &RouteOptions::default()).unwrap(), 1).unwrap();
//! let ring = Pattern::ring(16, 64).unwrap();
//! let start = baselines::random(&net, 16, 1).unwrap();
//! let d = descent::descend_hop_bytes(&net, &ring, &start, descent::Budget::default()).unwrap();
//! assert!(d.hop_bytes < netweave_core::mapping::cost::full_cost(&net, &ring, &start).hop_bytes);
//! ```

use super::cost::{check_placement, full_cost};
use super::{MapNetwork, Pattern};
use crate::error::Result;

/// Hosts beyond which the neighbour lists (a scan of every host pair) are not built and the
/// start is returned unchanged.
pub const MAX_HOSTS: u32 = 16_384;

const EMPTY: u32 = u32::MAX;

/// What [`descend_hop_bytes`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descent {
    pub host_of_rank: Vec<u32>,
    /// Hop-bytes of `host_of_rank`.
    pub hop_bytes: u128,
    /// Moves evaluated.
    pub evaluations: u64,
    /// Passes over the ranks (the last one improved nothing, unless the budget ran out).
    pub passes: u32,
}

/// When to stop besides a pass that improves nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Budget {
    /// Moves to try at most.
    pub evaluations: Option<u64>,
    /// Wall-clock time at most (checked every 256 moves).
    pub seconds: Option<f64>,
}

/// Descend from `start` until a pass improves nothing or the budget is spent.
pub fn descend_hop_bytes(net: &MapNetwork, pattern: &Pattern, start: &[u32], budget: Budget) -> Result<Descent> {
    let started = std::time::Instant::now();
    let max_evaluations = budget.evaluations.unwrap_or(u64::MAX);
    let out_of_time = |evaluations: u64| {
        evaluations % 256 == 0 && budget.seconds.is_some_and(|s| started.elapsed().as_secs_f64() >= s)
    };
    check_placement(net, pattern.num_ranks(), start)?;
    let mut host = start.to_vec();
    if net.num_hosts() > MAX_HOSTS {
        let hop_bytes = full_cost(net, pattern, &host).hop_bytes;
        return Ok(Descent { host_of_rank: host, hop_bytes, evaluations: 0, passes: 0 });
    }
    let sph = net.slots_per_host();
    let mut rank_of_slot = vec![EMPTY; net.num_slots() as usize];
    let mut slot_of_rank = vec![0u32; host.len()];
    let mut used = vec![0u32; net.num_hosts() as usize];
    for (r, &h) in host.iter().enumerate() {
        let s = h * sph + used[h as usize];
        used[h as usize] += 1;
        rank_of_slot[s as usize] = r as u32;
        slot_of_rank[r] = s;
    }
    let (near_off, near) = near_hosts(net);
    let adj = Partners::of(pattern);
    let mut order: Vec<u32> = (0..pattern.num_ranks()).collect();
    order.sort_by_cached_key(|&r| (std::cmp::Reverse(adj.volume(r)), r));
    // Hop-bytes of each rank's own messages where everything is now.
    let mut own: Vec<i128> = (0..pattern.num_ranks()).map(|r| adj.cost(net, &host, r, host[r as usize])).collect();

    let mut evaluations = 0u64;
    let mut passes = 0;
    let mut far: Vec<(u32, u32)> = Vec::new();
    'passes: loop {
        passes += 1;
        let mut improved = false;
        for &r in &order {
            // Farthest partners first: moving beside them gains the most.
            far.clear();
            let from = host[r as usize];
            far.extend(adj.range(r).map(|j| (net.hops(from, host[adj.other[j] as usize]), adj.other[j])));
            far.sort_unstable_by_key(|&(hops, o)| (std::cmp::Reverse(hops), o));
            'partners: for &(hops, p) in &far {
                if hops <= 1 {
                    break; // beside every partner left
                }
                let hp = host[p as usize];
                for &t in &near[near_off[hp as usize] as usize..near_off[hp as usize + 1] as usize] {
                    if t == from {
                        continue;
                    }
                    for s in t * sph..(t + 1) * sph {
                        if evaluations >= max_evaluations || out_of_time(evaluations) {
                            break 'passes;
                        }
                        evaluations += 1;
                        let q = rank_of_slot[s as usize];
                        if adj.swap_delta(net, &host, &own, r, q, t) >= 0 {
                            continue;
                        }
                        let from_slot = slot_of_rank[r as usize];
                        rank_of_slot[s as usize] = r;
                        rank_of_slot[from_slot as usize] = q;
                        slot_of_rank[r as usize] = s;
                        host[r as usize] = t;
                        if q != EMPTY {
                            slot_of_rank[q as usize] = from_slot;
                            host[q as usize] = from;
                        }
                        // The moved ranks' costs and their partners' changed.
                        for x in [r, q] {
                            if x == EMPTY {
                                continue;
                            }
                            own[x as usize] = adj.cost(net, &host, x, host[x as usize]);
                            for k in adj.range(x) {
                                let o = adj.other[k];
                                own[o as usize] = adj.cost(net, &host, o, host[o as usize]);
                            }
                        }
                        improved = true;
                        break 'partners;
                    }
                }
            }
        }
        if !improved {
            break;
        }
    }
    let hop_bytes = full_cost(net, pattern, &host).hop_bytes;
    Ok(Descent { host_of_rank: host, hop_bytes, evaluations, passes })
}

/// Every rank's partners with the bytes each way, as CSR: one entry per partner.
struct Partners {
    off: Vec<u32>,
    other: Vec<u32>,
    /// Bytes the rank sends to / receives from that partner.
    out: Vec<u64>,
    inn: Vec<u64>,
}

impl Partners {
    fn of(pattern: &Pattern) -> Self {
        let n = pattern.num_ranks() as usize;
        let mut entries: Vec<(u32, u32, u64, u64)> = Vec::with_capacity(2 * pattern.num_messages());
        for m in pattern.messages() {
            entries.push((m.src, m.dst, m.bytes, 0));
            entries.push((m.dst, m.src, 0, m.bytes));
        }
        entries.sort_unstable_by_key(|e| (e.0, e.1));
        let mut p = Partners { off: vec![0; n + 1], other: Vec::new(), out: Vec::new(), inn: Vec::new() };
        let mut last: Option<(u32, u32)> = None;
        for (r, o, out, inn) in entries {
            if last == Some((r, o)) {
                *p.out.last_mut().unwrap() += out;
                *p.inn.last_mut().unwrap() += inn;
            } else {
                p.other.push(o);
                p.out.push(out);
                p.inn.push(inn);
                last = Some((r, o));
            }
            p.off[r as usize + 1] = p.other.len() as u32;
        }
        for r in 0..n {
            p.off[r + 1] = p.off[r + 1].max(p.off[r]);
        }
        p
    }

    fn range(&self, r: u32) -> std::ops::Range<usize> {
        self.off[r as usize] as usize..self.off[r as usize + 1] as usize
    }

    fn volume(&self, r: u32) -> u128 {
        self.range(r).map(|j| self.out[j] as u128 + self.inn[j] as u128).sum()
    }

    /// Hop-bytes of `r`'s messages with `r` on host `at` and every partner where `host` says.
    fn cost(&self, net: &MapNetwork, host: &[u32], r: u32, at: u32) -> i128 {
        self.range(r).map(|j| self.term(net, j, at, host[self.other[j] as usize])).sum()
    }

    #[inline]
    fn term(&self, net: &MapNetwork, j: usize, at: u32, partner_at: u32) -> i128 {
        let mut c = 0i128;
        if self.out[j] > 0 {
            c += self.out[j] as i128 * net.hops(at, partner_at) as i128;
        }
        if self.inn[j] > 0 {
            c += self.inn[j] as i128 * net.hops(partner_at, at) as i128;
        }
        c
    }

    /// Change in hop-bytes when `r` moves to host `to` and `q` (a rank or [`EMPTY`]) moves from
    /// `to` to `r`'s host. `own` holds every rank's current cost; messages between `r` and `q`
    /// are counted once, on `r`'s side.
    fn swap_delta(&self, net: &MapNetwork, host: &[u32], own: &[i128], r: u32, q: u32, to: u32) -> i128 {
        let from = host[r as usize];
        let mut r_new = 0i128;
        for j in self.range(r) {
            let o = self.other[j];
            let at = if o == q { from } else { host[o as usize] };
            r_new += self.term(net, j, to, at);
        }
        let mut d = r_new - own[r as usize];
        if q != EMPTY {
            let (mut q_new, mut pair_old) = (0i128, 0i128);
            for j in self.range(q) {
                let o = self.other[j];
                if o == r {
                    pair_old = self.term(net, j, to, from);
                } else {
                    q_new += self.term(net, j, from, host[o as usize]);
                }
            }
            d += q_new - (own[q as usize] - pair_old);
        }
        d
    }
}

/// Hosts within one switch hop of each host (itself included), as CSR: from the coordinates on
/// a lattice, else from every host's row of hops.
fn near_hosts(net: &MapNetwork) -> (Vec<u32>, Vec<u32>) {
    let mut off = vec![0u32];
    let mut near = Vec::new();
    if let Some(lat) = net.lattice() {
        let hpr = lat.hosts_per_router;
        let mut routers: Vec<u32> = Vec::new();
        for h in 0..net.num_hosts() {
            let coords = net.host_coords(h).unwrap_or(&[]);
            routers.clear();
            let mut stride = 1u32;
            let here: u32 = coords.iter().zip(&lat.dims).rev().fold(0, |acc, (&c, &k)| acc * k + c);
            routers.push(here);
            for (&c, &k) in coords.iter().zip(&lat.dims) {
                let plus = if c + 1 < k { Some(c + 1) } else { lat.wrap().then_some(0) };
                let minus = if c > 0 { Some(c - 1) } else { lat.wrap().then_some(k - 1) };
                for next in [plus, minus].into_iter().flatten().filter(|&n| n != c) {
                    routers.push(here - c * stride + next * stride);
                }
                stride *= k;
            }
            routers.sort_unstable();
            routers.dedup();
            near.extend(routers.iter().flat_map(|&r| r * hpr..(r + 1) * hpr));
            off.push(near.len() as u32);
        }
        return (off, near);
    }
    for h in 0..net.num_hosts() {
        let row = net.hops_to(h);
        near.extend((0..net.num_hosts()).filter(|&x| row[x as usize] <= 1));
        off.push(near.len() as u32);
    }
    (off, near)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::baselines;
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::grid::torus;

    fn net(dims: &[u32], slots: u32) -> MapNetwork {
        let topo = torus(dims, 1).unwrap();
        MapNetwork::new(&topo, &route(&topo, Engine::Dor, &RouteOptions::default()).unwrap(), slots).unwrap()
    }

    #[test]
    fn the_reported_cost_is_the_placements_and_never_above_the_start() {
        let net = net(&[8, 8], 1);
        let pattern = Pattern::random_sparse(64, 4, 100, 3).unwrap();
        let start = baselines::random(&net, 64, 2).unwrap();
        let d = descend_hop_bytes(&net, &pattern, &start, Budget::default()).unwrap();
        assert_eq!(d.hop_bytes, full_cost(&net, &pattern, &d.host_of_rank).hop_bytes);
        assert!(d.hop_bytes < full_cost(&net, &pattern, &start).hop_bytes);
        let mut hosts = d.host_of_rank.clone();
        hosts.sort_unstable();
        hosts.dedup();
        assert_eq!(hosts.len(), 64, "still one rank per host");
    }

    #[test]
    fn a_ring_on_a_ring_reaches_one_hop_per_message() {
        // 8 ranks in a ring on an 8-router ring: the best placement has every message one hop.
        let net = net(&[8], 1);
        let ring = Pattern::ring(8, 10).unwrap();
        let start = baselines::random(&net, 8, 5).unwrap();
        let d = descend_hop_bytes(&net, &ring, &start, Budget::default()).unwrap();
        assert!(d.hop_bytes >= 8 * 70, "no placement beats one hop per message");
        assert!(d.hop_bytes < full_cost(&net, &ring, &start).hop_bytes);
        assert!(d.passes >= 1 && d.evaluations > 0);
    }

    #[test]
    fn lattice_neighbours_are_the_hosts_one_hop_away() {
        for (dims, wrap) in [(vec![4u32, 3, 2], true), (vec![5, 1, 3], false)] {
            let topo = if wrap { torus(&dims, 2).unwrap() } else { crate::topology::grid::mesh(&dims, 2).unwrap() };
            let opts = RouteOptions::default();
            let table = MapNetwork::new(&topo, &route(&topo, Engine::Dor, &opts).unwrap(), 1).unwrap();
            let lattice = MapNetwork::dor_lattice(&topo, opts.select, 1).unwrap();
            assert!(table.lattice().is_some());
            let (off, near) = near_hosts(&lattice);
            for h in 0..table.num_hosts() {
                let want: Vec<u32> = (0..table.num_hosts()).filter(|&x| table.hops(h, x) <= 1).collect();
                assert_eq!(&near[off[h as usize] as usize..off[h as usize + 1] as usize], &want[..], "host {h}");
            }
        }
    }

    #[test]
    fn swap_deltas_match_a_full_recount() {
        // Two slots per host (free slots too), ranks without traffic, pairs talking both ways.
        let net = net(&[4, 3], 2);
        let msgs = [(0, 5, 7), (5, 0, 3), (1, 2, 11), (2, 9, 1), (9, 1, 4), (7, 0, 2)]
            .map(|(src, dst, bytes)| crate::traffic::Message { src, dst, bytes });
        let pattern = Pattern::from_messages("p", 12, &msgs).unwrap();
        let adj = Partners::of(&pattern);
        let host: Vec<u32> = vec![0, 3, 5, 7, 1, 11, 2, 4, 6, 8, 9, 10];
        let own: Vec<i128> = (0..12).map(|r| adj.cost(&net, &host, r, host[r as usize])).collect();
        let before = full_cost(&net, &pattern, &host).hop_bytes as i128;
        for r in 0..12u32 {
            for to in 0..12u32 {
                if to == host[r as usize] {
                    continue;
                }
                // Swap with the rank on `to`, or step into `to`'s free second slot.
                for q in [host.iter().position(|&h| h == to).map_or(EMPTY, |q| q as u32), EMPTY] {
                    let mut after = host.clone();
                    after[r as usize] = to;
                    if q != EMPTY {
                        after[q as usize] = host[r as usize];
                    }
                    let recount = full_cost(&net, &pattern, &after).hop_bytes as i128;
                    assert_eq!(adj.swap_delta(&net, &host, &own, r, q, to), recount - before, "r {r} q {q} to {to}");
                }
            }
        }
    }

    #[test]
    fn free_slots_and_budgets_are_respected() {
        let net = net(&[4, 4], 2);
        let pattern = Pattern::random_sparse(12, 3, 10, 1).unwrap();
        let start = baselines::random(&net, 12, 4).unwrap();
        let d = descend_hop_bytes(&net, &pattern, &start, Budget { evaluations: Some(5), seconds: None }).unwrap();
        assert!(d.evaluations <= 5);
        let mut per_host = vec![0; 16];
        for &h in &descend_hop_bytes(&net, &pattern, &start, Budget::default()).unwrap().host_of_rank {
            per_host[h as usize] += 1;
        }
        assert!(per_host.iter().all(|&c| c <= 2));
    }
}
