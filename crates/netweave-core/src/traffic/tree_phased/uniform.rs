//! The bound by construction on a tree seen from a root with `k` subtrees of equal size `m`
//! (`k` edge switches of `m` hosts under a core, or `k` pods of a deeper tree), in the manner of
//! Faraj and Yuan: the messages between subtrees in a fixed global order, then the messages
//! inside subtrees in the ports they leave free. No search, so no recolouring.
//!
//! **Between subtrees.** Every subtree sends the same stream of `m² (k − 1)` messages: round
//! `r = 1 … k − 1` sends from `T_i` to `T_{i+r}` (indices mod `k`), as `m` layers of a Latin
//! square — layer `q` has the `a`-th host of `T_i` send to the `(a + q) mod m`-th of
//! `T_{i+r}`. Position `g` of the stream is round `⌊g / m²⌋ + 1`, layer `⌊g / m⌋ mod m`, host
//! `g mod m`, and phase `⌊g / c⌋` takes positions `c·p … c·p + c − 1` of every subtree's
//! stream at once, where `c` is what the root's link into or out of a subtree serves at once
//! (at most `m`). So every root link carries exactly `c` flows per phase and the stream ends
//! after `⌈m² (k − 1) / c⌉` phases, the bound of those links. A phase holds `c ≤ m` consecutive
//! positions: their senders `g mod m` are distinct, and so are their receivers — within a layer
//! they are the senders shifted by `q`; across a layer boundary the tail of layer `q` lands on
//! `a₀ + q … m − 1 + q` and the head of layer `q + 1` on `q + 1 … q + c − m + a₀`, apart when
//! `c < m` (when `c = m` phases are whole layers).
//!
//! **Inside subtrees.** Phase by phase, each subtree's hosts not sending (receiving) between
//! subtrees are paired by a maximum bipartite matching of senders to the free receivers they
//! still owe, senders and receivers tried least slack first (free phases left minus messages
//! left), so the tightest hosts are served first and the result is deterministic. Every
//! placement is checked on the real paths, so deeper subtrees (whose inner links the local
//! messages load) are served too. When that matching leaves messages over (a host ran out of
//! free phases first — mostly when the host ports are the bound, with no slack), they go into
//! phases of their own and the recolouring (`recolour.rs`) takes this near-finished start down
//! to the bound; only if that fails too does the general construction run.

use super::{
    recolour, root_candidates, root_link_capacities, subtree_members, subtrees, Job, Pending, Phases, RankPhases,
    RECOLOUR_MOVES_MAX, RECOLOUR_MOVES_PER_RANK,
};
use crate::topology::{NodeId, Topology};

/// Roots with equal subtrees tried before giving up to the general construction.
const ATTEMPTS: usize = 2;

/// Phases at exactly `lower` from the first root whose subtrees are of equal size — the ends
/// of the bottleneck first, then every other switch (when the host ports are the bottleneck
/// the core is not among those ends); `None` when no root has them or the construction does
/// not close.
pub(super) fn phases(topo: &Topology, job: &Job, lower: usize) -> Option<(NodeId, RankPhases)> {
    let mut roots = root_candidates(topo, job);
    roots.extend(topo.switches().iter().copied().filter(|s| !roots.contains(s)).collect::<Vec<_>>());
    let mut attempts = 0;
    for root in roots {
        let subtree = subtrees(topo, job, root);
        let k = subtree.iter().map(|&t| t + 1).max().unwrap_or(0) as usize;
        let members = subtree_members(&subtree, k);
        let m = members[0].len();
        if k < 2 || members.iter().any(|t| t.len() != m) {
            continue;
        }
        if let Some(phases) = from_root(job, root, &subtree, &members, lower) {
            return Some((root, phases));
        }
        // Each failed attempt costs a construction; the general one is left to try after two.
        attempts += 1;
        if attempts == ATTEMPTS {
            break;
        }
    }
    None
}

fn from_root(job: &Job, root: NodeId, subtree: &[u32], members: &[Vec<u32>], lower: usize) -> Option<RankPhases> {
    let (k, m, n) = (members.len(), members[0].len(), subtree.len());
    let (up, down) = root_link_capacities(job, root, subtree, members);
    let c = up.iter().chain(&down).copied().min()? as usize;
    let stream = m * m * (k - 1);
    if c == 0 || stream.div_ceil(c) > lower {
        return None;
    }
    let mut phases = Phases::new(n, job.capacity.len(), lower);
    let mut pending = Pending::new(n);
    for g in 0..stream {
        let (p, round, layer, a) = (g / c, g / (m * m) + 1, (g / m) % m, g % m);
        for (i, from) in members.iter().enumerate() {
            let (s, d) = (from[a], members[(i + round) % k][(a + layer) % m]);
            if !phases.fits(job, p, s, d) {
                return None;
            }
            phases.place(job, p, s, d);
            pending.take(s, d);
        }
    }
    if fill_inside(job, members, &mut phases, &mut pending) {
        return Some(phases.messages);
    }
    // A few messages inside subtrees left over: in phases of their own, then recoloured down
    // to the bound from this near-finished start (far cheaper than the general construction).
    for s in 0..n as u32 {
        for d in 0..n as u32 {
            if pending.has(s, d) {
                let p = (lower..phases.len()).find(|&p| phases.fits(job, p, s, d)).unwrap_or_else(|| phases.open());
                phases.place(job, p, s, d);
            }
        }
    }
    let moves = (RECOLOUR_MOVES_PER_RANK * n).min(RECOLOUR_MOVES_MAX);
    recolour::into_phases(job, &phases.messages, lower, moves)
}

/// Messages inside each subtree into the phases' free ports; false if any is left over.
fn fill_inside(job: &Job, members: &[Vec<u32>], phases: &mut Phases, pending: &mut Pending) -> bool {
    let (n, count) = (phases.n, phases.len());
    // Phases from the current one on in which each rank's port is free of messages between
    // subtrees, sending and receiving; a rank with none to spare (slack 0) must use each.
    let mut free_send = vec![0i64; n];
    let mut free_recv = vec![0i64; n];
    for p in 0..count {
        for r in 0..n {
            free_send[r] += i64::from(!phases.sending[p * n + r]);
            free_recv[r] += i64::from(!phases.receiving[p * n + r]);
        }
    }
    let mut matching = Matching::default();
    let (mut send_open, mut recv_open) = (vec![false; n], vec![false; n]);
    for p in 0..count {
        for r in 0..n {
            send_open[r] = !phases.sending[p * n + r];
            recv_open[r] = !phases.receiving[p * n + r];
        }
        for ranks in members {
            let send_slack = |s: u32| free_send[s as usize] - i64::from(pending.sends[s as usize]);
            let recv_slack = |d: u32| free_recv[d as usize] - i64::from(pending.receives[d as usize]);
            let mut senders: Vec<u32> = ranks
                .iter()
                .copied()
                .filter(|&r| !phases.sending[p * n + r as usize] && pending.sends[r as usize] > 0)
                .collect();
            senders.sort_by_key(|&s| (send_slack(s), s));
            let mut receivers: Vec<u32> =
                ranks.iter().copied().filter(|&r| !phases.receiving[p * n + r as usize]).collect();
            receivers.sort_by_key(|&d| (recv_slack(d), d));
            matching.reset(senders.len(), receivers.len());
            for (i, &s) in senders.iter().enumerate() {
                for (j, &d) in receivers.iter().enumerate() {
                    if pending.has(s, d) && phases.fits(job, p, s, d) {
                        matching.adjacent[i].push(j as u32);
                    }
                }
            }
            matching.solve();
            for (j, &i) in matching.sender_of.iter().enumerate() {
                let (s, d) = (senders.get(i as usize).copied(), receivers[j]);
                // Inner links of a deeper subtree may be shared by two local messages: check.
                if let Some(s) = s.filter(|&s| phases.fits(job, p, s, d)) {
                    phases.place(job, p, s, d);
                    pending.take(s, d);
                }
            }
        }
        // This phase's free ports are spent, used or not.
        for r in 0..n {
            free_send[r] -= i64::from(send_open[r]);
            free_recv[r] -= i64::from(recv_open[r]);
        }
    }
    pending.sends.iter().all(|&s| s == 0)
}

/// A maximum bipartite matching of senders to receivers (Kuhn's augmenting paths), senders
/// taken in the order given and each one's receivers in the order given, so the least slack
/// is served first and the result is deterministic. Buffers are kept between calls.
#[derive(Default)]
struct Matching {
    /// Receivers each sender may be matched to, by index.
    adjacent: Vec<Vec<u32>>,
    /// The sender matched to each receiver, `u32::MAX` if none.
    sender_of: Vec<u32>,
    visited: Vec<bool>,
}

impl Matching {
    fn reset(&mut self, senders: usize, receivers: usize) {
        self.adjacent.iter_mut().for_each(Vec::clear);
        self.adjacent.resize_with(senders.max(self.adjacent.len()), Vec::new);
        self.adjacent.truncate(senders);
        self.sender_of.clear();
        self.sender_of.resize(receivers, u32::MAX);
    }

    fn solve(&mut self) {
        for i in 0..self.adjacent.len() {
            // The first free receiver straight away (most senders), else an augmenting path.
            if let Some(&j) = self.adjacent[i].iter().find(|&&j| self.sender_of[j as usize] == u32::MAX) {
                self.sender_of[j as usize] = i as u32;
                continue;
            }
            self.visited.clear();
            self.visited.resize(self.sender_of.len(), false);
            self.augment(i as u32);
        }
    }

    fn augment(&mut self, i: u32) -> bool {
        for k in 0..self.adjacent[i as usize].len() {
            let j = self.adjacent[i as usize][k] as usize;
            if std::mem::replace(&mut self.visited[j], true) {
                continue;
            }
            let holder = self.sender_of[j];
            if holder == u32::MAX || self.augment(holder) {
                self.sender_of[j] = i;
                return true;
            }
        }
        false
    }
}
