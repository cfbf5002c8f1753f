//! Placement costs, full and incremental.
//!
//! Four exact integer figures describe a placement of a [`Pattern`] on a [`MapNetwork`], under
//! the names [`analysis`](crate::analysis) reports them by:
//!
//! - `sum_hops`: Σ over communicating pairs of the switch-to-switch hops between their hosts
//!   (paper 003's Σhop, each directed pair counted once);
//! - `hop_bytes`: Σ bytes × hops;
//! - `max_channel_bytes`: the largest byte count any directed channel carries under the actual
//!   routes (host links included; messages between ranks on one host use no channel) —
//!   paper 003's `max_link`;
//! - `step_max_channel_bytes`: Σ over the pattern's steps (see [`Pattern::num_steps`]) of the
//!   largest byte count a channel carries within that step — the time a step-by-step collective
//!   spends on its bottleneck links, times the link bandwidth (equal to `max_channel_bytes` for
//!   one step);
//!
//! and a fifth derived from them, `hops_x_max_channel` = `sum_hops × max_channel_bytes`, paper
//! 003's evaluation value (RMATT's objective).
//!
//! An [`Objective`] weighs them into one number: any of `hop_bytes`, `max_channel_bytes`,
//! `hops_x_max_channel`, `step_max_channel_bytes`, or a weighted sum of them. The names the
//! mapper used before (`rmatt`, `max-link`, `step-max-link`, …) are still read, and
//! [`Objective::canonical`] says which were used so callers can warn.
//!
//! The [`Evaluator`] keeps per-channel loads and a max segment tree (each node holds the
//! maximum of its range and how many leaves reach it), so a move that relocates `k` ranks costs
//! the walks of their messages only: [`propose`](Evaluator::propose) returns the exact cost of
//! the moved placement without changing anything, then [`accept`](Evaluator::accept) or
//! [`reject`](Evaluator::reject). The maximum is decided without the tree in the common cases
//! (a touched channel rises above it, or some channel at the maximum is untouched); only a move
//! that lowers every hottest channel consults the tree.

use super::network::MapNetwork;
use super::objective::{CostParts, Objective};
use super::pattern::Pattern;
use crate::error::Result;

/// Marks an empty slot in `rank_of_slot`.
pub const EMPTY: u32 = u32::MAX;

/// Check `host_of_rank` is a valid placement: every rank on an existing host, at most
/// `slots_per_host` ranks per host.
pub fn check_placement(net: &MapNetwork, num_ranks: u32, host_of_rank: &[u32]) -> Result<()> {
    if host_of_rank.len() != num_ranks as usize {
        return crate::invalid!("placement lists {} ranks, the pattern has {num_ranks}", host_of_rank.len());
    }
    let mut used = vec![0u32; net.num_hosts() as usize];
    for (r, &h) in host_of_rank.iter().enumerate() {
        if h >= net.num_hosts() {
            return crate::invalid!("rank {r} is placed on host {h}, but there are {} hosts", net.num_hosts());
        }
        used[h as usize] += 1;
        if used[h as usize] > net.slots_per_host() {
            return crate::invalid!("host {h} holds more than {} ranks", net.slots_per_host());
        }
    }
    Ok(())
}

/// Per-channel loads of a placement, recounted from scratch.
pub fn channel_loads(net: &MapNetwork, pattern: &Pattern, host_of_rank: &[u32]) -> Vec<u64> {
    let mut loads = vec![0u64; net.num_channels() as usize];
    for m in pattern.messages() {
        let (a, b) = (host_of_rank[m.src as usize], host_of_rank[m.dst as usize]);
        net.for_each_channel(a, b, |c| loads[c as usize] += m.bytes);
    }
    loads
}

/// The exact figures of a placement, recounted from scratch (the reference the incremental
/// evaluator is tested against).
pub fn full_cost(net: &MapNetwork, pattern: &Pattern, host_of_rank: &[u32]) -> CostParts {
    let mut parts = CostParts::default();
    for m in pattern.messages() {
        let h = net.hops(host_of_rank[m.src as usize], host_of_rank[m.dst as usize]) as u64;
        parts.sum_hops += h;
        parts.hop_bytes += h as u128 * m.bytes as u128;
    }
    if pattern.num_steps() <= 1 {
        parts.max_channel_bytes = max_of(&channel_loads(net, pattern, host_of_rank));
        parts.step_max_channel_bytes = parts.max_channel_bytes;
    } else {
        // One walk for both: the channel loads are the sums of the step loads.
        let by_step = step_loads(net, pattern, host_of_rank);
        let nch = net.num_channels() as usize;
        let mut loads = vec![0u64; nch];
        for step in by_step.chunks(nch) {
            for (total, &x) in loads.iter_mut().zip(step) {
                *total += x;
            }
            parts.step_max_channel_bytes += max_of(step);
        }
        parts.max_channel_bytes = max_of(&loads);
    }
    parts
}

/// Largest value of a slice (0 when empty).
fn max_of(loads: &[u64]) -> u64 {
    loads.iter().copied().max().unwrap_or(0)
}

/// Per-step channel loads, `loads[step · channels + channel]`, recounted from scratch.
fn step_loads(net: &MapNetwork, pattern: &Pattern, host_of_rank: &[u32]) -> Vec<u64> {
    let nch = net.num_channels() as usize;
    let mut loads = vec![0u64; nch * pattern.num_steps() as usize];
    for (i, m) in pattern.messages().iter().enumerate() {
        let base = pattern.step_of(i) as usize * nch;
        let (a, b) = (host_of_rank[m.src as usize], host_of_rank[m.dst as usize]);
        net.for_each_channel(a, b, |c| loads[base + c as usize] += m.bytes);
    }
    loads
}

/// Max segment tree over channel loads: every node keeps `(max, leaves at max)`.
#[derive(Clone, Debug)]
struct MaxTree {
    size: usize,
    max: Vec<u64>,
    count: Vec<u32>,
}

impl MaxTree {
    fn new(loads: &[u64]) -> Self {
        let size = loads.len().next_power_of_two().max(1);
        let mut t = MaxTree { size, max: vec![0; 2 * size], count: vec![1; 2 * size] };
        t.max[size..size + loads.len()].copy_from_slice(loads);
        for i in (1..size).rev() {
            t.pull(i);
        }
        t
    }
    #[inline]
    fn pull(&mut self, i: usize) {
        let (l, r) = (2 * i, 2 * i + 1);
        let (ml, mr) = (self.max[l], self.max[r]);
        self.max[i] = ml.max(mr);
        self.count[i] = if ml > mr {
            self.count[l]
        } else if mr > ml {
            self.count[r]
        } else {
            self.count[l] + self.count[r]
        };
    }
    #[inline]
    fn set(&mut self, leaf: usize, value: u64) {
        let mut i = self.size + leaf;
        self.max[i] = value;
        i /= 2;
        while i >= 1 {
            self.pull(i);
            i /= 2;
        }
    }
    fn top(&self) -> (u64, u32) {
        (self.max[1], self.count[1])
    }
}

/// One candidate move: the contents of `slots[0] → slots[1] → … → slots[k−1] → slots[0]`
/// rotate (a swap is a cycle of two). Empty slots move like ranks, so a rank can step into a
/// free slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Move {
    pub slots: Vec<u32>,
}

/// Incremental cost of a placement under moves.
#[derive(Clone, Debug)]
pub struct Evaluator {
    objective: Objective,
    track_loads: bool,
    rank_of_slot: Vec<u32>,
    slot_of_rank: Vec<u32>,
    host_of_rank: Vec<u32>,
    loads: Vec<u64>,
    tree: MaxTree,
    parts: CostParts,
    // Scratch for one proposal, cleared by accept/reject.
    new_host: Vec<u32>,
    moved_ranks: Vec<u32>,
    msg_stamp: Vec<u32>,
    stamp: u32,
    delta: Vec<i64>,
    touched: Vec<u32>,
    chan_stamp: Vec<u32>,
    /// The proposed move's slots and figures (the slots kept in a reused buffer).
    pending: Option<CostParts>,
    pending_slots: Vec<u32>,
    // Current route of every message, `paths[m · stride..][..path_len[m]]`, so a move reads the
    // old routes sequentially instead of walking the route table again (empty when disabled).
    stride: usize,
    paths: Vec<u32>,
    path_len: Vec<u16>,
    // New routes of the pending move's messages: `changed[i]` has its route at `new_paths[i · stride..]`.
    changed: Vec<u32>,
    new_paths: Vec<u32>,
    new_len: Vec<u16>,
    // Lockstep walks: destination host and next channel of every changed message.
    walk_to: Vec<u32>,
    walk_at: Vec<u32>,
    /// Per-step loads and their max trees, for `step_max_channel_bytes` (when the objective weighs it
    /// and the pattern has several steps): entry `step · channels + channel`.
    steps: Option<Box<StepLoads>>,
}

/// Per-step channel loads of an [`Evaluator`], with a pending delta like the plain loads.
#[derive(Clone, Debug)]
struct StepLoads {
    channels: usize,
    loads: Vec<u64>,
    trees: Vec<MaxTree>,
    delta: Vec<i64>,
    touched: Vec<u32>,
    stamp: Vec<u32>,
    // Per step scratch of one proposal: whether hit, largest new touched load, hottest lowered.
    step_stamp: Vec<u32>,
    hit: Vec<u32>,
    touched_max: Vec<u64>,
    lowered_at_max: Vec<u32>,
}

impl StepLoads {
    #[inline]
    fn add(&mut self, entry: usize, bytes: i64, stamp: u32) {
        self.delta[entry] += bytes;
        if self.stamp[entry] != stamp {
            self.stamp[entry] = stamp;
            self.touched.push(entry as u32);
        }
    }

    /// `Σ` of every step's maximum after the pending deltas, from the current sum `sum`.
    fn new_sum(&mut self, mut sum: u64, stamp: u32) -> u64 {
        self.hit.clear();
        for &e in &self.touched {
            let s = e as usize / self.channels;
            if self.step_stamp[s] != stamp {
                self.step_stamp[s] = stamp;
                self.hit.push(s as u32);
                self.touched_max[s] = 0;
                self.lowered_at_max[s] = 0;
            }
            let old = self.loads[e as usize];
            let new = (old as i64 + self.delta[e as usize]) as u64;
            self.touched_max[s] = self.touched_max[s].max(new);
            if old == self.trees[s].top().0 && new < old {
                self.lowered_at_max[s] += 1;
            }
        }
        for i in 0..self.hit.len() {
            let s = self.hit[i] as usize;
            let (cur, at) = self.trees[s].top();
            let new_max = if self.touched_max[s] >= cur || self.lowered_at_max[s] < at {
                self.touched_max[s].max(cur)
            } else {
                // Every hottest channel of this step went down: ask its tree, then restore it.
                let base = s * self.channels;
                for &e in &self.touched {
                    if e as usize / self.channels == s {
                        let new = (self.loads[e as usize] as i64 + self.delta[e as usize]) as u64;
                        self.trees[s].set(e as usize - base, new);
                    }
                }
                let m = self.trees[s].top().0;
                for &e in &self.touched {
                    if e as usize / self.channels == s {
                        self.trees[s].set(e as usize - base, self.loads[e as usize]);
                    }
                }
                m
            };
            sum = sum - cur + new_max;
        }
        sum
    }

    fn accept(&mut self) {
        for &e in &self.touched {
            let d = self.delta[e as usize];
            if d != 0 {
                let v = (self.loads[e as usize] as i64 + d) as u64;
                self.loads[e as usize] = v;
                let s = e as usize / self.channels;
                self.trees[s].set(e as usize - s * self.channels, v);
            }
            self.delta[e as usize] = 0;
        }
        self.touched.clear();
    }

    fn reject(&mut self) {
        for &e in &self.touched {
            self.delta[e as usize] = 0;
        }
        self.touched.clear();
    }
}

/// `walk_at` value of a finished walk.
const NO_WALK: u32 = u32::MAX;

/// Most route entries the per-message route cache may hold (4 bytes each).
const MAX_CACHED_CHANNELS: usize = 1 << 26;

impl Evaluator {
    /// Start from `host_of_rank` (validated) with the given objective.
    pub fn new(net: &MapNetwork, pattern: &Pattern, host_of_rank: &[u32], objective: Objective) -> Result<Self> {
        check_placement(net, pattern.num_ranks(), host_of_rank)?;
        let mut rank_of_slot = vec![EMPTY; net.num_slots() as usize];
        let mut slot_of_rank = vec![0u32; host_of_rank.len()];
        let mut next_free = vec![0u32; net.num_hosts() as usize];
        for (r, &h) in host_of_rank.iter().enumerate() {
            let s = h * net.slots_per_host() + next_free[h as usize];
            next_free[h as usize] += 1;
            rank_of_slot[s as usize] = r as u32;
            slot_of_rank[r] = s;
        }
        let track_loads = objective.needs_loads();
        let loads = if track_loads { channel_loads(net, pattern, host_of_rank) } else { Vec::new() };
        let tree = MaxTree::new(&loads);
        let mut parts = full_cost(net, pattern, host_of_rank);
        if !track_loads {
            parts.max_channel_bytes = 0;
        }
        if objective.w_step_max_channel_bytes == 0.0 {
            parts.step_max_channel_bytes = 0;
        }
        let nch = net.num_channels() as usize;
        let stride = net.max_hops() as usize + 2;
        let track_steps = objective.w_step_max_channel_bytes != 0.0 && pattern.num_steps() > 1;
        // Cache every route: reading a move's old routes back is cheaper than walking them
        // again (measured with both route sources), and the step loads need old and new routes
        // side by side.
        let cache = track_loads && pattern.num_messages().saturating_mul(stride) <= MAX_CACHED_CHANNELS;
        let steps = if track_steps {
            if !cache {
                return crate::invalid!(
                    "step-max-link needs every route cached, and {} messages are too many",
                    pattern.num_messages()
                );
            }
            let n = pattern.num_steps() as usize;
            let loads = step_loads(net, pattern, host_of_rank);
            let trees = loads.chunks(nch).map(MaxTree::new).collect();
            Some(Box::new(StepLoads {
                channels: nch,
                delta: vec![0; loads.len()],
                stamp: vec![0; loads.len()],
                loads,
                trees,
                touched: Vec::new(),
                step_stamp: vec![0; n],
                hit: Vec::new(),
                touched_max: vec![0; n],
                lowered_at_max: vec![0; n],
            }))
        } else {
            None
        };
        let (mut paths, mut path_len) = (Vec::new(), Vec::new());
        if cache {
            paths = vec![0u32; pattern.num_messages() * stride];
            path_len = vec![0u16; pattern.num_messages()];
            for (i, m) in pattern.messages().iter().enumerate() {
                let mut len = 0usize;
                let row = &mut paths[i * stride..(i + 1) * stride];
                net.for_each_channel(host_of_rank[m.src as usize], host_of_rank[m.dst as usize], |c| {
                    row[len] = c;
                    len += 1;
                });
                path_len[i] = len as u16;
            }
        }
        Ok(Evaluator {
            stride: if cache { stride } else { 0 },
            paths,
            path_len,
            changed: Vec::new(),
            new_paths: Vec::new(),
            new_len: Vec::new(),
            walk_to: Vec::new(),
            walk_at: Vec::new(),
            steps,
            objective,
            track_loads,
            rank_of_slot,
            slot_of_rank,
            host_of_rank: host_of_rank.to_vec(),
            new_host: host_of_rank.to_vec(),
            loads,
            tree,
            parts,
            moved_ranks: Vec::new(),
            msg_stamp: vec![0; pattern.num_messages()],
            stamp: 0,
            delta: vec![0; if track_loads { nch } else { 0 }],
            touched: Vec::new(),
            chan_stamp: vec![0; if track_loads { nch } else { 0 }],
            pending: None,
            pending_slots: Vec::new(),
        })
    }

    /// Current exact figures (`max_channel_bytes` is 0 when the objective ignores it).
    pub fn parts(&self) -> CostParts {
        self.parts
    }
    /// Current objective value.
    pub fn value(&self) -> f64 {
        self.objective.value(&self.parts)
    }
    pub fn objective(&self) -> Objective {
        self.objective
    }
    /// Host of every rank.
    pub fn host_of_rank(&self) -> &[u32] {
        &self.host_of_rank
    }
    /// Rank in every slot ([`EMPTY`] if none).
    pub fn rank_of_slot(&self) -> &[u32] {
        &self.rank_of_slot
    }
    /// Current per-channel loads (empty when the objective ignores `max_channel_bytes`).
    pub fn loads(&self) -> &[u64] {
        &self.loads
    }

    /// Exact figures of the placement after `mv`, leaving the state unchanged until
    /// [`accept`](Self::accept) or [`reject`](Self::reject). Slots must be distinct and valid.
    pub fn propose(&mut self, net: &MapNetwork, pattern: &Pattern, mv: &Move) -> CostParts {
        debug_assert!(self.pending.is_none(), "propose twice without accept/reject");
        let k = mv.slots.len();
        self.moved_ranks.clear();
        self.changed.clear();
        self.new_paths.clear();
        self.new_len.clear();
        self.walk_to.clear();
        self.walk_at.clear();
        for i in 0..k {
            let from = mv.slots[i];
            let to = mv.slots[(i + 1) % k];
            let r = self.rank_of_slot[from as usize];
            if r != EMPTY {
                self.new_host[r as usize] = net.host_of_slot(to);
                self.moved_ranks.push(r);
            }
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.msg_stamp.fill(0);
            self.chan_stamp.fill(0);
            if let Some(st) = &mut self.steps {
                st.stamp.fill(0);
                st.step_stamp.fill(0);
            }
            self.stamp = 1;
        }
        let stamp = self.stamp;
        let mut dhops: i64 = 0;
        let mut dhb: i128 = 0;
        let messages = pattern.messages();
        for idx in 0..self.moved_ranks.len() {
            let r = self.moved_ranks[idx];
            for &mid in pattern.sent_by(r).iter().chain(pattern.received_by(r)) {
                if self.msg_stamp[mid as usize] == stamp {
                    continue;
                }
                self.msg_stamp[mid as usize] = stamp;
                let m = messages[mid as usize];
                let (os, od) = (self.host_of_rank[m.src as usize], self.host_of_rank[m.dst as usize]);
                let (ns, nd) = (self.new_host[m.src as usize], self.new_host[m.dst as usize]);
                if (os, od) == (ns, nd) {
                    continue;
                }
                let (ho, hn) = if self.track_loads {
                    // The walks give the hop counts too (channels − 2 between distinct hosts),
                    // which spares two lookups in the large hop table.
                    let b = m.bytes as i64;
                    let (delta, touched, cs) = (&mut self.delta, &mut self.touched, &mut self.chan_stamp);
                    let mut old_len = 0i64;
                    let mut take_old = |c: u32| {
                        old_len += 1;
                        delta[c as usize] -= b;
                        if cs[c as usize] != stamp {
                            cs[c as usize] = stamp;
                            touched.push(c);
                        }
                    };
                    if self.stride > 0 {
                        let off = mid as usize * self.stride;
                        for &c in &self.paths[off..off + self.path_len[mid as usize] as usize] {
                            take_old(c);
                        }
                    } else {
                        net.for_each_channel(os, od, take_old);
                    }
                    if self.stride > 0 && !net.is_table_routed() {
                        // Lattice routes come from coordinates: no table to miss in, so walk the
                        // new route right here and record it for `accept`.
                        let (stride, i) = (self.stride, self.changed.len());
                        self.changed.push(mid);
                        self.new_paths.resize((i + 1) * stride, 0);
                        let row = &mut self.new_paths[i * stride..(i + 1) * stride];
                        let mut new_len = 0usize;
                        net.for_each_channel(ns, nd, |c| {
                            row[new_len] = c;
                            new_len += 1;
                            delta[c as usize] += b;
                            if cs[c as usize] != stamp {
                                cs[c as usize] = stamp;
                                touched.push(c);
                            }
                        });
                        self.new_len.push(new_len as u16);
                        ((old_len - 2).max(0), (new_len as i64 - 2).max(0))
                    } else if self.stride > 0 {
                        // New table routes are walked below, all at once.
                        self.changed.push(mid);
                        self.walk_to.push(nd);
                        self.walk_at.push(if ns == nd { NO_WALK } else { net.injection_channel(ns) });
                        ((old_len - 2).max(0), 0)
                    } else {
                        let mut new_len = 0i64;
                        net.for_each_channel(ns, nd, |c| {
                            new_len += 1;
                            delta[c as usize] += b;
                            if cs[c as usize] != stamp {
                                cs[c as usize] = stamp;
                                touched.push(c);
                            }
                        });
                        ((old_len - 2).max(0), (new_len - 2).max(0))
                    }
                } else {
                    (net.hops(os, od) as i64, net.hops(ns, nd) as i64)
                };
                dhops += hn - ho;
                dhb += (hn - ho) as i128 * m.bytes as i128;
            }
        }
        if self.stride > 0 && !self.changed.is_empty() && net.is_table_routed() {
            let (h, hb) = self.walk_new_routes(net, pattern);
            dhops += h;
            dhb += hb;
        }
        let mut parts = CostParts {
            sum_hops: (self.parts.sum_hops as i64 + dhops) as u64,
            hop_bytes: (self.parts.hop_bytes as i128 + dhb) as u128,
            max_channel_bytes: 0,
            step_max_channel_bytes: 0,
        };
        if self.track_loads {
            parts.max_channel_bytes = self.new_max();
        }
        if let Some(st) = &mut self.steps {
            // Old and new routes of every changed message are both recorded by now.
            let stride = self.stride;
            for (i, &mid) in self.changed.iter().enumerate() {
                let base = pattern.step_of(mid as usize) as usize * st.channels;
                let b = messages[mid as usize].bytes as i64;
                let old = mid as usize * stride;
                for &c in &self.paths[old..old + self.path_len[mid as usize] as usize] {
                    st.add(base + c as usize, -b, stamp);
                }
                for &c in &self.new_paths[i * stride..i * stride + self.new_len[i] as usize] {
                    st.add(base + c as usize, b, stamp);
                }
            }
            parts.step_max_channel_bytes = st.new_sum(self.parts.step_max_channel_bytes, stamp);
        } else if self.objective.w_step_max_channel_bytes != 0.0 {
            parts.step_max_channel_bytes = parts.max_channel_bytes; // one step
        }
        self.pending_slots.clear();
        self.pending_slots.extend_from_slice(&mv.slots);
        self.pending = Some(parts);
        parts
    }

    /// Walk the new routes of all `changed` messages in lockstep, one hop of each per pass:
    /// the table lookups of different walks do not depend on each other, so their cache misses
    /// overlap instead of queueing. Records the routes and returns the added hops and hop-bytes.
    fn walk_new_routes(&mut self, net: &MapNetwork, pattern: &Pattern) -> (i64, i128) {
        let n = self.changed.len();
        let stride = self.stride;
        self.new_paths.resize(n * stride, 0);
        self.new_len.clear();
        self.new_len.resize(n, 0);
        let stamp = self.stamp;
        let messages = pattern.messages();
        let mut active = self.walk_at.iter().filter(|&&c| c != NO_WALK).count();
        while active > 0 {
            for i in 0..n {
                let c = self.walk_at[i];
                if c == NO_WALK {
                    continue;
                }
                let len = self.new_len[i] as usize;
                self.new_paths[i * stride + len] = c;
                self.new_len[i] += 1;
                self.delta[c as usize] += messages[self.changed[i] as usize].bytes as i64;
                if self.chan_stamp[c as usize] != stamp {
                    self.chan_stamp[c as usize] = stamp;
                    self.touched.push(c);
                }
                self.walk_at[i] = net.next_hop(c, self.walk_to[i]).unwrap_or(NO_WALK);
                if self.walk_at[i] == NO_WALK {
                    active -= 1;
                }
            }
        }
        let (mut hops, mut hop_bytes) = (0i64, 0i128);
        for i in 0..n {
            let h = (self.new_len[i] as i64 - 2).max(0);
            hops += h;
            hop_bytes += h as i128 * messages[self.changed[i] as usize].bytes as i128;
        }
        (hops, hop_bytes)
    }

    /// Maximum channel load after applying the pending deltas.
    fn new_max(&mut self) -> u64 {
        let (cur_max, at_max) = self.tree.top();
        let mut touched_max = 0u64;
        let mut lowered_at_max = 0u32;
        for &c in &self.touched {
            let old = self.loads[c as usize];
            let new = (old as i64 + self.delta[c as usize]) as u64;
            touched_max = touched_max.max(new);
            if old == cur_max && new < cur_max {
                lowered_at_max += 1;
            }
        }
        if touched_max >= cur_max || lowered_at_max < at_max {
            return touched_max.max(cur_max);
        }
        // Every hottest channel went down: ask the tree, then restore it.
        for &c in &self.touched {
            let new = (self.loads[c as usize] as i64 + self.delta[c as usize]) as u64;
            self.tree.set(c as usize, new);
        }
        let m = self.tree.top().0;
        for &c in &self.touched {
            self.tree.set(c as usize, self.loads[c as usize]);
        }
        m
    }

    /// Apply the pending move.
    pub fn accept(&mut self) {
        let Some(parts) = self.pending.take() else { return };
        if let Some(st) = &mut self.steps {
            st.accept();
        }
        for &c in &self.touched {
            let d = self.delta[c as usize];
            if d != 0 {
                let v = (self.loads[c as usize] as i64 + d) as u64;
                self.loads[c as usize] = v;
                self.tree.set(c as usize, v);
            }
            self.delta[c as usize] = 0;
        }
        self.touched.clear();
        let stride = self.stride;
        for (i, &mid) in self.changed.iter().enumerate() {
            let len = self.new_len[i] as usize;
            let off = mid as usize * stride;
            self.paths[off..off + len].copy_from_slice(&self.new_paths[i * stride..i * stride + len]);
            self.path_len[mid as usize] = len as u16;
        }
        for &r in &self.moved_ranks {
            self.host_of_rank[r as usize] = self.new_host[r as usize];
        }
        let slots = &self.pending_slots;
        let k = slots.len();
        let mut carried = self.rank_of_slot[slots[0] as usize];
        for i in 1..=k {
            let to = slots[i % k];
            let displaced = std::mem::replace(&mut self.rank_of_slot[to as usize], carried);
            if carried != EMPTY {
                self.slot_of_rank[carried as usize] = to;
            }
            carried = displaced;
        }
        self.parts = parts;
    }

    /// Drop the pending move.
    pub fn reject(&mut self) {
        self.pending = None;
        if let Some(st) = &mut self.steps {
            st.reject();
        }
        for &c in &self.touched {
            self.delta[c as usize] = 0;
        }
        self.touched.clear();
        for &r in &self.moved_ranks {
            self.new_host[r as usize] = self.host_of_rank[r as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{route, select::Select, Engine, RouteOptions};
    use crate::topology::grid::{mesh, torus};
    use proptest::prelude::*;
    use rand::{seq::SliceRandom, Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn torus_net(dims: &[u32], hpr: u32, slots: u32) -> MapNetwork {
        let t = torus(dims, hpr).unwrap();
        let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
        MapNetwork::new(&t, &r, slots).unwrap()
    }

    /// Random moves (swaps and k-cycles, into empty slots too) keep incremental == full.
    fn check_sequence(net: &MapNetwork, pattern: &Pattern, seed: u64, steps: usize, objective: Objective) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut slots: Vec<u32> = (0..net.num_slots()).collect();
        slots.shuffle(&mut rng);
        let host_of_rank: Vec<u32> =
            slots[..pattern.num_ranks() as usize].iter().map(|&s| net.host_of_slot(s)).collect();
        let mut ev = Evaluator::new(net, pattern, &host_of_rank, objective).unwrap();
        for _ in 0..steps {
            let k = rng.gen_range(2..=5.min(net.num_slots() as usize));
            let mut all: Vec<u32> = (0..net.num_slots()).collect();
            let (chosen, _) = all.partial_shuffle(&mut rng, k);
            let mv = Move { slots: chosen.to_vec() };
            let proposed = ev.propose(net, pattern, &mv);
            if rng.gen_bool(0.5) {
                ev.accept();
                let mut full = full_cost(net, pattern, ev.host_of_rank());
                if !objective.needs_loads() {
                    full.max_channel_bytes = 0;
                }
                if objective.w_step_max_channel_bytes == 0.0 {
                    full.step_max_channel_bytes = 0;
                }
                assert_eq!(proposed, full);
                assert_eq!(ev.parts(), full);
                if objective.needs_loads() {
                    assert_eq!(ev.loads(), channel_loads(net, pattern, ev.host_of_rank()).as_slice());
                }
            } else {
                ev.reject();
            }
        }
        check_placement(net, pattern.num_ranks(), ev.host_of_rank()).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn incremental_equals_full_on_torus(seed in any::<u64>(), slots in 1u32..3, ranks_less in 0u32..5) {
            let net = torus_net(&[4, 3, 2], 1, slots);
            let n = net.num_slots() - ranks_less;
            let p = Pattern::random_sparse(n, 3, 1000, seed).unwrap();
            check_sequence(&net, &p, seed, 60, Objective::HOPS_X_MAX_CHANNEL);
        }

        #[test]
        fn incremental_equals_full_on_mesh_bruck(seed in any::<u64>()) {
            let t = mesh(&[4, 4], 2).unwrap();
            let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
            let net = MapNetwork::new(&t, &r, 1).unwrap();
            let p = Pattern::bruck(32, 2048).unwrap();
            check_sequence(&net, &p, seed, 60, Objective::parse("hop-bytes+3*max-link").unwrap());
            check_sequence(&net, &p, seed ^ 1, 30, Objective::HOP_BYTES);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        #[test]
        fn incremental_equals_full_on_lattice_routes(seed in any::<u64>(), slots in 1u32..3, per_destination in any::<bool>()) {
            let select = if per_destination { Select::PerDestination } else { Select::LowPort };
            let net = MapNetwork::dor_lattice(&torus(&[4, 3, 2], 2).unwrap(), select, slots).unwrap();
            let p = Pattern::random_sparse(net.num_slots() - 1, 3, 1000, seed).unwrap();
            check_sequence(&net, &p, seed, 60, Objective::HOPS_X_MAX_CHANNEL);
            let net = MapNetwork::dor_lattice(&mesh(&[3, 4], 1).unwrap(), select, slots).unwrap();
            let p = Pattern::bruck(net.num_slots(), 2048).unwrap();
            check_sequence(&net, &p, seed ^ 2, 40, Objective::parse("hop-bytes+3*max-link").unwrap());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        #[test]
        fn incremental_equals_full_with_steps(seed in any::<u64>(), slots in 1u32..3, lattice in any::<bool>()) {
            let t = torus(&[4, 3, 2], 1).unwrap();
            let net = if lattice {
                MapNetwork::dor_lattice(&t, Select::LowPort, slots).unwrap()
            } else {
                MapNetwork::new(&t, &route(&t, Engine::Dor, &RouteOptions::default()).unwrap(), slots).unwrap()
            };
            // Bruck keeps its steps; 23 ranks: the last step is partial.
            let p = Pattern::bruck(net.num_slots() - 1, 2048).unwrap();
            prop_assert!(p.num_steps() > 1);
            check_sequence(&net, &p, seed, 60, Objective::STEP_MAX_CHANNEL_BYTES);
            check_sequence(&net, &p, seed ^ 3, 40, Objective::parse("hops_x_max_channel+1e6*step_max_channel_bytes").unwrap());
        }
    }

    #[test]
    fn step_max_channel_bytes_sums_each_steps_bottleneck() {
        let t = torus(&[4, 4], 1).unwrap();
        let net = MapNetwork::dor_lattice(&t, Select::LowPort, 1).unwrap();
        let p = Pattern::bruck(16, 100).unwrap();
        let identity: Vec<u32> = (0..16).collect();
        let mut expected = 0;
        for k in 0..4 {
            let d = 1u32 << k;
            let step: Vec<crate::traffic::Message> = (0..16)
                .map(|s| crate::traffic::Message { src: s, dst: (s + 16 - d) % 16, bytes: 100 * d as u64 })
                .collect();
            expected +=
                full_cost(&net, &Pattern::from_messages("step", 16, &step).unwrap(), &identity).max_channel_bytes;
        }
        assert_eq!(full_cost(&net, &p, &identity).step_max_channel_bytes, expected);
        // A one-step pattern: the sum is its max link.
        let r = Pattern::random_sparse(16, 3, 10, 1).unwrap();
        let c = full_cost(&net, &r, &identity);
        assert_eq!((r.num_steps(), c.step_max_channel_bytes), (1, c.max_channel_bytes));
    }

    #[test]
    fn paper_003_reference_values_from_lattice_routes() {
        let t = torus(&[16, 16, 16], 1).unwrap();
        let net = MapNetwork::dor_lattice(&t, Select::LowPort, 1).unwrap();
        let p = Pattern::bruck(4096, 2048).unwrap();
        let identity: Vec<u32> = (0..4096).collect();
        let c = full_cost(&net, &p, &identity);
        assert_eq!((c.sum_hops, c.hop_bytes, c.max_channel_bytes), (192_240, 195_418_030_080, 33_554_432));
        let bitrev: Vec<u32> = (0..4096u32).map(|r| r.reverse_bits() >> 20).collect();
        let c = full_cost(&net, &p, &bitrev);
        assert_eq!((c.sum_hops, c.hop_bytes, c.max_channel_bytes), (207_264, 73_264_988_160, 14_669_824));
    }

    #[test]
    fn paper_003_reference_values() {
        let (net, p) = crate::mapping::testing::paper_case();
        let identity: Vec<u32> = (0..4096).collect();
        let c = full_cost(net, p, &identity);
        assert_eq!(c.sum_hops, 192_240);
        assert_eq!(c.hop_bytes, 195_418_030_080);
        assert_eq!(c.max_channel_bytes, 33_554_432);
        assert_eq!(c.hops_x_max_channel(), 6_450_504_007_680);
        let bitrev: Vec<u32> = (0..4096u32).map(|r| r.reverse_bits() >> 20).collect();
        let c = full_cost(net, p, &bitrev);
        assert_eq!((c.sum_hops, c.hop_bytes, c.max_channel_bytes), (207_264, 73_264_988_160, 14_669_824));
    }

    /// One vocabulary: the mapper's figures equal the analysis' figures of the same names for
    /// the same schedule, placement and routes (computed by two separate code paths).
    #[test]
    fn figures_match_the_analysis_of_the_same_names() {
        let t = torus(&[4, 3], 1).unwrap();
        let routes = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
        let net = MapNetwork::new(&t, &routes, 1).unwrap();
        let placement: Vec<u32> = (0..12u32).map(|r| (r * 5) % 12).collect();
        let sched =
            crate::traffic::Schedule::shift_alltoall(12, 1000).unwrap().with_placement(placement.clone()).unwrap();
        let report = crate::analysis::analyze(&t, &routes, &sched).unwrap();
        let parts = full_cost(&net, &Pattern::from_schedule(&sched).unwrap(), &placement);
        let named: std::collections::HashMap<&str, u128> = parts.named().into_iter().collect();
        assert_eq!(named["sum_hops"], report.sum_hops as u128);
        assert_eq!(named["hop_bytes"], report.hop_bytes as u128);
        assert_eq!(named["max_channel_bytes"], report.max_channel_bytes as u128);
        assert_eq!(named["hops_x_max_channel"], report.sum_hops as u128 * report.max_channel_bytes as u128);
        assert_eq!(named.len(), 5);
    }
}
