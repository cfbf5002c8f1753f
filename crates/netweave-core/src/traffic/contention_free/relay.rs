//! Relaying by task splitting (paper 004 §5.5): instead of making `W → Z` wait for a sync
//! after the selected group's previous task `X → Y`, send W's data along `W → X → Y → Z`, each
//! hop forwarding cut-through as the data arrives.
//!
//! - Candidates (§5.5.2): only from the selected group's tail `Jxy`, when `X ≠ W` and `W ≠ Y`;
//!   the pieces are `W→X`, `X→Y′` (W's data) and `Y→Z` (left out when `Y = Z`). The first and
//!   last piece are split again the same way against the tails of their own groups (§5.5.3),
//!   as long as no two pieces of a chain cross one link (so share no group) and no host repeats.
//! - Decision (§5.5.4): `α` (5.4) is when the tail would leave W without relaying: the time of
//!   the most advanced of the task's groups, plus the sync from that group's tail, plus `M/B`.
//!   A chain's `β` (5.5, 5.6) is when its tail leaves the last relay. The thesis relays unless
//!   `α < β`, on the chain of smallest `β` ([`RelayRule::Departure`]); [`RelayRule::Arrival`]
//!   compares arrival times at Z instead (§6 question 4).
//! - A piece joins, on each link of its path, the group already holding its sender's tasks there
//!   (Rule A), else the link's first group — taking turns with it never adds contention. A link
//!   no task crosses (a gather's downlinks to non-roots) gets a group of its own, numbered
//!   `groups.len() + link`, which later pieces there share.

use super::grouping::Groups;
use super::paths::{DirLink, PathTable};
use crate::traffic::Message;

/// When a relay chain replaces a task (§5.5.4, §6 question 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RelayRule {
    /// The thesis: relay unless the direct tail departure `α` is earlier than the chain's `β`.
    #[default]
    Departure,
    /// Relay only if the chain's tail reaches Z strictly earlier than the direct task's would.
    Arrival,
}

/// Longest chain considered (pieces), and most candidate chains per decision: §5.5.3's stop
/// rule already bounds the search; these keep one decision cheap on big trees.
const MAX_PIECES: usize = 6;
const MAX_CANDIDATES: usize = 32;
/// Hosts a candidate can hold: a chain of `MAX_PIECES + 1` pieces split once more.
const MAX_HOSTS: usize = MAX_PIECES + 4;

/// A candidate relay chain W, …, Z, inline: deciding allocates nothing per candidate.
#[derive(Clone, Copy)]
pub(super) struct Chain {
    hosts: [u32; MAX_HOSTS],
    len: u8,
}

impl Chain {
    fn new(hosts: &[u32]) -> Chain {
        let mut c = Chain { hosts: [0; MAX_HOSTS], len: hosts.len() as u8 };
        c.hosts[..hosts.len()].copy_from_slice(hosts);
        c
    }
    /// The chain's hosts, W first and Z last.
    pub fn hosts(&self) -> &[u32] {
        &self.hosts[..self.len as usize]
    }
    /// This chain with hosts `i..=j` replaced by `sub`.
    fn splice(&self, i: usize, j: usize, sub: &[u32]) -> Chain {
        let h = self.hosts();
        let mut c = Chain { hosts: [0; MAX_HOSTS], len: (h.len() - (j + 1 - i) + sub.len()) as u8 };
        c.hosts[..i].copy_from_slice(&h[..i]);
        c.hosts[i..i + sub.len()].copy_from_slice(sub);
        c.hosts[i + sub.len()..c.len as usize].copy_from_slice(&h[j + 1..]);
        c
    }
}

/// What the scheduler knows of every group when a decision is made.
pub(super) struct GroupState<'a> {
    /// Each group's time `T_g` (5.3) in ps: its scheduled tasks' costs plus the syncs between them.
    pub time: &'a [u64],
    /// Each group's last scheduled task, if any.
    pub tail: &'a [Option<Message>],
}

pub(super) struct Relayer<'a> {
    paths: &'a PathTable,
    rule: RelayRule,
    /// The group of sender `src` on link `l` at `l * num_hosts + src` (Rule A), including
    /// groups pieces joined; `u32::MAX` where the sender has none yet.
    by_link_src: Vec<u32>,
    num_hosts: usize,
    /// The first group of every directed link (`groups.len() + link` when no task crosses it).
    first_of_link: Vec<u32>,
    num_groups: u32,
    /// Directed links leaving each host: `host_links[host_link_off[h]..host_link_off[h + 1]]`.
    host_link_off: Vec<u32>,
    host_links: Vec<DirLink>,
    // Scratch reused across decisions.
    candidates: Vec<Chain>,
    seen_links: Vec<DirLink>,
}

impl<'a> Relayer<'a> {
    pub fn new(paths: &'a PathTable, tasks: &[Message], groups: &Groups, rule: RelayRule) -> Self {
        let num_hosts = paths.num_hosts();
        let mut by_link_src = vec![u32::MAX; paths.num_dir_links() * num_hosts];
        let mut first_of_link = vec![u32::MAX; paths.num_dir_links()];
        let num_groups = groups.len() as u32;
        for g in 0..groups.len() as u32 {
            let l = groups.link[g as usize];
            if first_of_link[l as usize] == u32::MAX {
                first_of_link[l as usize] = g;
            }
            for &t in groups.members(g) {
                let slot = &mut by_link_src[l as usize * num_hosts + tasks[t as usize].src as usize];
                if *slot == u32::MAX {
                    *slot = g;
                }
            }
        }
        for (l, first) in first_of_link.iter_mut().enumerate() {
            if *first == u32::MAX {
                *first = num_groups + l as u32;
            }
        }
        let mut host_link_off = vec![0u32; num_hosts + 1];
        let leaving: Vec<(u32, DirLink)> =
            (0..paths.num_dir_links() as DirLink).filter_map(|l| paths.from_host(l).map(|h| (h, l))).collect();
        for &(h, _) in &leaving {
            host_link_off[h as usize + 1] += 1;
        }
        for h in 0..num_hosts {
            host_link_off[h + 1] += host_link_off[h];
        }
        let mut host_links = vec![0; leaving.len()];
        let mut fill = host_link_off.clone();
        for &(h, l) in &leaving {
            host_links[fill[h as usize] as usize] = l;
            fill[h as usize] += 1;
        }
        Relayer {
            paths,
            rule,
            host_link_off,
            host_links,
            by_link_src,
            num_hosts,
            first_of_link,
            num_groups,
            candidates: Vec::with_capacity(MAX_CANDIDATES),
            seen_links: Vec::new(),
        }
    }

    /// Number of group ids pieces may use: the grouping's, then one per directed link.
    pub fn group_capacity(&self) -> usize {
        self.num_groups as usize + self.first_of_link.len()
    }

    fn link_of(&self, groups: &Groups, g: u32) -> DirLink {
        if g < self.num_groups {
            groups.link[g as usize]
        } else {
            g - self.num_groups
        }
    }

    /// The groups piece `a → b` joins, one per link of its path.
    pub fn groups_of_piece(&self, a: u32, b: u32, out: &mut Vec<u32>) {
        out.clear();
        for &l in self.paths.path(a, b) {
            out.push(self.group_of(l, a));
        }
    }

    /// A lower bound on β of any chain from `w`: over `w`'s links, the group time there plus the
    /// link's own transmission and latency (a chain's first hop is at least that slow).
    fn beta_floor(&self, state: &GroupState, w: u32, bytes: u64) -> u64 {
        let links =
            &self.host_links[self.host_link_off[w as usize] as usize..self.host_link_off[w as usize + 1] as usize];
        links
            .iter()
            .map(|&l| {
                state.time[self.group_of(l, w) as usize]
                    + super::paths::transmission_ps(bytes, self.paths.bandwidth(l))
                    + self.paths.link_latency_ps(l)
            })
            .min()
            .unwrap_or(0)
    }

    /// The group a piece from `a` joins on link `l`.
    fn group_of(&self, l: DirLink, a: u32) -> u32 {
        let g = self.by_link_src[l as usize * self.num_hosts + a as usize];
        if g == u32::MAX {
            self.first_of_link[l as usize]
        } else {
            g
        }
    }

    /// Remember that a piece from `a` now sits in these groups (Rule A for later pieces).
    pub fn joined(&mut self, groups: &Groups, a: u32, joined: &[u32]) {
        for &g in joined {
            let at = self.link_of(groups, g) as usize * self.num_hosts + a as usize;
            let slot = &mut self.by_link_src[at];
            if *slot == u32::MAX {
                *slot = g;
            }
        }
    }

    /// (5.4): when the tail of `piece` leaves its sender if it only waits for its groups.
    fn alpha(&self, state: &GroupState, piece: Message, piece_groups: &[u32]) -> u64 {
        let gmax = piece_groups.iter().copied().max_by_key(|&g| (state.time[g as usize], std::cmp::Reverse(g)));
        self.departure(state, piece, gmax)
    }

    /// (5.4) given the most advanced of the piece's groups.
    fn departure(&self, state: &GroupState, piece: Message, gmax: Option<u32>) -> u64 {
        let (time, sync) = match gmax {
            Some(g) => (state.time[g as usize], self.paths.sync_ps(state.tail[g as usize], piece)),
            None => (0, 0),
        };
        time + sync + super::paths::transmission_ps(piece.bytes, self.paths.path_bandwidth(piece.src, piece.dst))
    }

    /// (5.5)/(5.6) along `hosts`: the tail's departure from the last relay (β) and its arrival
    /// at the end (γ).
    fn beta_gamma(&self, state: &GroupState, hosts: &[u32], bytes: u64) -> (u64, u64) {
        let mut gamma: Option<u64> = None;
        let mut beta = 0;
        for hop in hosts.windows(2) {
            let piece = Message { src: hop[0], dst: hop[1], bytes };
            // alpha() of the piece, without collecting its groups first.
            let mut gmax: Option<u32> = None;
            for &l in self.paths.path(hop[0], hop[1]) {
                let g = self.group_of(l, hop[0]);
                if gmax.map_or(true, |m| {
                    (state.time[g as usize], std::cmp::Reverse(g)) > (state.time[m as usize], std::cmp::Reverse(m))
                }) {
                    gmax = Some(g);
                }
            }
            let a = self.departure(state, piece, gmax);
            beta = gamma.map_or(a, |g| a.max(g));
            gamma = Some(beta + self.paths.latency_ps(hop[0], hop[1]));
        }
        (beta, gamma.unwrap_or(0))
    }

    /// Whether no host repeats and no two pieces of the chain cross one directed link: the pieces
    /// run at once (cut-through), so a shared link would be contention. This implies §5.5.3's
    /// "no two pieces share a group", since a group lives on one link.
    fn chain_ok(&self, hosts: &[u32], seen: &mut Vec<DirLink>) -> bool {
        for (i, h) in hosts.iter().enumerate() {
            if hosts[..i].contains(h) {
                return false;
            }
        }
        seen.clear();
        for hop in hosts.windows(2) {
            let links = self.paths.path(hop[0], hop[1]);
            if links.iter().any(|l| seen.contains(l)) {
                return false;
            }
            seen.extend_from_slice(links);
        }
        true
    }

    /// Expand `chain` (§5.5.3): split its first and last piece against their groups' tails.
    fn expand(&self, state: &GroupState, chain: Chain, out: &mut Vec<Chain>, seen: &mut Vec<DirLink>) {
        if out.len() >= MAX_CANDIDATES || !self.chain_ok(chain.hosts(), seen) {
            return;
        }
        out.push(chain);
        let hosts = chain.hosts();
        if hosts.len() > MAX_PIECES {
            return;
        }
        let m = hosts.len() - 1;
        for first in [true, false] {
            let (i, j) = if first { (0, 1) } else { (m - 1, m) };
            if !first && m == 1 {
                break; // a single piece: first and last are the same
            }
            let (a, b) = (hosts[i], hosts[j]);
            // A task sits in the groups of every link it crosses, so neighbouring links often
            // share a tail: split against each distinct tail once.
            let mut tried = [(u32::MAX, u32::MAX); 8];
            let mut num_tried = 0;
            for &l in self.paths.path(a, b) {
                let g = self.group_of(l, a);
                let Some(tail) = state.tail[g as usize] else { continue };
                let (x, y) = (tail.src, tail.dst);
                if x == a || y == a || tried[..num_tried].contains(&(x, y)) {
                    continue;
                }
                if num_tried < tried.len() {
                    tried[num_tried] = (x, y);
                    num_tried += 1;
                }
                let sub = [a, x, y, b];
                let sub = if y != b { &sub[..] } else { &sub[..3] };
                self.expand(state, chain.splice(i, j, sub), out, seen);
            }
        }
    }

    /// The relay chain (hosts W, …, Z) to use instead of `task`, whose selected group's tail is
    /// `tail`, or None to schedule the task as it is.
    pub fn decide(
        &mut self,
        state: &GroupState,
        task: Message,
        task_groups: &[u32],
        tail: Option<Message>,
    ) -> Option<Chain> {
        let tail = tail?;
        let (w, z, x, y) = (task.src, task.dst, tail.src, tail.dst);
        if x == w || w == y {
            return None; // same sender: no sync to save; W = Y: independent tasks (Theorem 1)
        }
        // Every chain's first piece leaves W by one of its links, in W's group there, and the
        // tail departs the last relay no earlier than it arrives at the first: a floor for β
        // (and γ) that settles most decisions without building a candidate.
        let alpha = self.alpha(state, task, task_groups);
        let floor = self.beta_floor(state, w, task.bytes);
        let hopeless = match self.rule {
            RelayRule::Departure => alpha < floor,
            RelayRule::Arrival => alpha + self.paths.latency_ps(w, z) <= floor,
        };
        if hopeless {
            return None;
        }
        let start = [w, x, y, z];
        let start = Chain::new(if y != z { &start[..] } else { &start[..3] });
        let mut candidates = std::mem::take(&mut self.candidates);
        let mut seen = std::mem::take(&mut self.seen_links);
        candidates.clear();
        self.expand(state, start, &mut candidates, &mut seen);
        let best = candidates
            .iter()
            .map(|c| (c, self.beta_gamma(state, c.hosts(), task.bytes)))
            .min_by_key(|(c, (beta, _))| (*beta, c.len))
            .map(|(c, bg)| (*c, bg));
        self.candidates = candidates;
        self.seen_links = seen;
        let (best, (beta, gamma)) = best?;
        let relay = match self.rule {
            RelayRule::Departure => alpha >= beta,
            RelayRule::Arrival => gamma < alpha + self.paths.latency_ps(w, z),
        };
        relay.then_some(best)
    }
}
