//! Incremental max-min fair bandwidth sharing (progressive filling).
//!
//! Flows cross *resources* (directed channels, optional host injection/ejection limits). The
//! max-min allocation is the one progressive filling finds: raise every flow's rate together,
//! freeze the flows of each resource as it saturates, continue with the rest.
//!
//! After a change (flows leaving and joining) only part of the allocation is recomputed. Two
//! facts make that exact, not an approximation:
//!
//! 1. *Nothing below the lowest changed level moves.* Progressive filling is a sweep over
//!    rising levels. A leaving flow of rate `r` only lowers the load of resources whose level
//!    was already `≥ r`; a joining flow's rate is at least `min over its path of C/n` (every
//!    resource saturates no lower than its equal split), so neither changes any event below
//!    `λ0` = the smallest of those values. Flows whose rate is below `λ0` keep it.
//! 2. *Disconnected parts are independent.* With the low flows fixed, the rest splits into
//!    components linked by shared resources; only components touching a changed flow move.
//!
//! So an update walks out from the changed flows' resources over flows with rate `≥ λ0`,
//! subtracts the fixed flows' rates from the resources it reaches, and refills only that
//! part. In a collective the leaving flows are the fast ones, so the part is usually small.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A resource's fair share in the filling heap (min-heap on `share`, then resource id).
#[derive(Clone, Copy, PartialEq)]
struct ShareEntry {
    share: f64,
    resource: u32,
}

impl Eq for ShareEntry {}
impl Ord for ShareEntry {
    fn cmp(&self, other: &Self) -> Ordering {
        other.share.total_cmp(&self.share).then_with(|| other.resource.cmp(&self.resource))
    }
}
impl PartialOrd for ShareEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Per-flow state in one update.
const IDLE: u8 = 0;
const IN_SET: u8 = 1;
const FROZEN: u8 = 2;

/// Relative tolerance when comparing rates against the lowest changed level.
const LEVEL_TOLERANCE: f64 = 1e-9;
/// Relative change below which a recomputed rate counts as unchanged.
const RATE_TOLERANCE: f64 = 1e-12;

/// The max-min allocation over a fixed set of resources and paths, updated incrementally.
///
/// Paths are given once, flat: flow `f` crosses `path_res[path_off[f]..path_off[f + 1]]`.
pub(crate) struct FairShare {
    capacity: Vec<f64>,
    path_off: Vec<u32>,
    path_res: Vec<u32>,
    /// Position of flow `f` in `res_flows[path_res[i]]`, parallel to `path_res`.
    path_pos: Vec<u32>,
    /// Active flows crossing each resource.
    res_flows: Vec<Vec<u32>>,
    rate: Vec<f64>,
    active: Vec<bool>,
    // Scratch, reset after each update.
    flow_state: Vec<u8>,
    res_seen: Vec<bool>,
    /// Per resource: a flow on it joined, left or changed rate in this update, so its used
    /// rate must be summed again (the others' sums would come out the same, bit for bit).
    res_dirty: Vec<bool>,
    residual: Vec<f64>,
    unfrozen: Vec<u32>,
    seen_res: Vec<u32>,
    set_flows: Vec<u32>,
    heap: BinaryHeap<ShareEntry>,
    /// Sum of active flows' rates on each resource.
    used: Vec<f64>,
    /// Flows whose rate was recomputed, over all updates (a cost measure).
    pub(crate) flows_recomputed: u64,
    /// Flows whose rate actually changed, over all updates.
    pub(crate) rates_changed: u64,
    pub(crate) updates: u64,
}

impl FairShare {
    pub(crate) fn new(capacity: Vec<f64>, path_off: Vec<u32>, path_res: Vec<u32>) -> Self {
        let r = capacity.len();
        let f = path_off.len() - 1;
        FairShare {
            path_pos: vec![0; path_res.len()],
            res_flows: vec![Vec::new(); r],
            rate: vec![0.0; f],
            active: vec![false; f],
            flow_state: vec![IDLE; f],
            res_seen: vec![false; r],
            res_dirty: vec![false; r],
            residual: vec![0.0; r],
            unfrozen: vec![0; r],
            used: vec![0.0; r],
            seen_res: Vec::new(),
            set_flows: Vec::new(),
            heap: BinaryHeap::new(),
            capacity,
            path_off,
            path_res,
            flows_recomputed: 0,
            rates_changed: 0,
            updates: 0,
        }
    }

    fn path(&self, f: u32) -> std::ops::Range<usize> {
        self.path_off[f as usize] as usize..self.path_off[f as usize + 1] as usize
    }

    /// Current rate of flow `f` (bytes/s; 0 when inactive).
    pub(crate) fn rate(&self, f: u32) -> f64 {
        self.rate[f as usize]
    }

    /// Resources of flow `f`'s path.
    pub(crate) fn path_resources(&self, f: u32) -> &[u32] {
        &self.path_res[self.path(f)]
    }

    /// Active flows crossing resource `r`.
    pub(crate) fn flows_on(&self, r: u32) -> &[u32] {
        &self.res_flows[r as usize]
    }

    /// Capacity of resource `r` (bytes/s).
    pub(crate) fn capacity(&self, r: u32) -> f64 {
        self.capacity[r as usize]
    }

    /// Sum of the rates of the active flows on resource `r`.
    pub(crate) fn used(&self, r: u32) -> f64 {
        self.used[r as usize]
    }

    /// Remove `leaving` flows and add `joining` ones, then refill the affected part.
    /// `before_change(r)` is called for every resource whose used rate may change, before it
    /// does (for busy-time accounting); `changed` receives every flow whose rate moved, with
    /// its old rate (joining flows with old rate 0).
    pub(crate) fn update(
        &mut self,
        leaving: &[u32],
        joining: &[u32],
        mut before_change: impl FnMut(u32, f64),
        changed: &mut Vec<(u32, f64)>,
    ) {
        changed.clear();
        if leaving.is_empty() && joining.is_empty() {
            return;
        }
        self.updates += 1;
        let mut level = f64::INFINITY;
        // Leaving flows: note the level and unlink them; their resources seed the walk.
        for &f in leaving {
            debug_assert!(self.active[f as usize]);
            level = level.min(self.rate[f as usize]);
            for i in self.path(f) {
                let r = self.path_res[i];
                self.unlink(f, i);
                self.seed(r);
                self.res_dirty[r as usize] = true;
            }
            self.active[f as usize] = false;
            self.rate[f as usize] = 0.0;
        }
        for &f in joining {
            for i in self.path(f) {
                let r = self.path_res[i] as usize;
                self.path_pos[i] = self.res_flows[r].len() as u32;
                self.res_flows[r].push(f);
                self.res_dirty[r] = true;
            }
            self.active[f as usize] = true;
            self.flow_state[f as usize] = IN_SET;
            self.set_flows.push(f);
        }
        for &f in joining {
            let mut bound = f64::INFINITY;
            for i in self.path(f) {
                let r = self.path_res[i];
                bound = bound.min(self.capacity[r as usize] / self.res_flows[r as usize].len() as f64);
                self.seed(r);
            }
            level = level.min(bound);
        }
        let threshold = level * (1.0 - LEVEL_TOLERANCE);
        // Walk out over flows at or above the threshold.
        let mut next = 0;
        while next < self.seen_res.len() {
            let r = self.seen_res[next] as usize;
            next += 1;
            for k in 0..self.res_flows[r].len() {
                let f = self.res_flows[r][k];
                if self.flow_state[f as usize] == IDLE && self.rate[f as usize] >= threshold {
                    self.flow_state[f as usize] = IN_SET;
                    self.set_flows.push(f);
                    for i in self.path(f) {
                        let q = self.path_res[i];
                        self.seed(q);
                    }
                }
            }
        }
        // Residual capacity left by fixed flows, and unfrozen counts.
        for &r in &self.seen_res {
            let r = r as usize;
            before_change(r as u32, self.used[r]);
            let mut fixed = 0.0;
            let mut count = 0u32;
            for &f in &self.res_flows[r] {
                if self.flow_state[f as usize] == IDLE {
                    fixed += self.rate[f as usize];
                } else {
                    count += 1;
                }
            }
            self.residual[r] = (self.capacity[r] - fixed).max(0.0);
            self.unfrozen[r] = count;
            if count > 0 {
                self.heap.push(ShareEntry { share: self.residual[r] / count as f64, resource: r as u32 });
            }
        }
        // Progressive filling over the affected part. Freezing flows at the lowest level `s`
        // can only raise another resource's share ((R − s)/(n − 1) ≥ R/n when s ≤ R/n), so
        // heap keys are lower bounds: a popped key that turns out stale is pushed again with
        // the current share instead of pushing on every change.
        while let Some(e) = self.heap.pop() {
            let r = e.resource as usize;
            let n = self.unfrozen[r];
            if n == 0 {
                continue;
            }
            let current = self.residual[r] / n as f64;
            if current > e.share * (1.0 + LEVEL_TOLERANCE) {
                self.heap.push(ShareEntry { share: current, resource: r as u32 });
                continue;
            }
            // Never hand out a zero rate because of rounding: a flow always moves.
            let share = current.max(self.capacity[r] * 1e-12);
            for k in 0..self.res_flows[r].len() {
                let f = self.res_flows[r][k];
                if self.flow_state[f as usize] != IN_SET {
                    continue;
                }
                self.flow_state[f as usize] = FROZEN;
                let old = self.rate[f as usize];
                // A rate equal to the old one up to rounding is left alone: rescheduling the
                // flow would cost an event and change nothing.
                let moved = (share - old).abs() > RATE_TOLERANCE * old;
                if moved {
                    self.rate[f as usize] = share;
                    changed.push((f, old));
                }
                for i in self.path(f) {
                    let q = self.path_res[i] as usize;
                    self.res_dirty[q] |= moved;
                    self.residual[q] = (self.residual[q] - share).max(0.0);
                    self.unfrozen[q] -= 1;
                }
            }
        }
        self.flows_recomputed += self.set_flows.len() as u64;
        self.rates_changed += changed.len() as u64;
        // New used rates where a flow moved, summed in list order as always; scratch reset.
        for &r in &self.seen_res {
            let r = r as usize;
            if self.res_dirty[r] {
                self.used[r] = self.res_flows[r].iter().map(|&f| self.rate[f as usize]).sum();
                self.res_dirty[r] = false;
            }
            self.res_seen[r] = false;
        }
        self.seen_res.clear();
        for &f in &self.set_flows {
            self.flow_state[f as usize] = IDLE;
        }
        self.set_flows.clear();
    }

    fn seed(&mut self, r: u32) {
        if !self.res_seen[r as usize] {
            self.res_seen[r as usize] = true;
            self.seen_res.push(r);
        }
    }

    /// Remove flow `f` (hop `i` of its path) from its resource's list in O(1).
    fn unlink(&mut self, f: u32, i: usize) {
        let r = self.path_res[i] as usize;
        let pos = self.path_pos[i] as usize;
        let list = &mut self.res_flows[r];
        debug_assert_eq!(list[pos], f);
        list.swap_remove(pos);
        if pos < list.len() {
            // Fix the moved flow's back-pointer: find its hop on resource r.
            let moved = list[pos];
            let range = self.path_off[moved as usize] as usize..self.path_off[moved as usize + 1] as usize;
            for j in range {
                if self.path_res[j] as usize == r {
                    self.path_pos[j] = pos as u32;
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
// The reference filling indexes several arrays by the same resource or flow: ranges read best.
#[allow(clippy::needless_range_loop)]
mod tests {
    use super::*;

    fn solver(capacity: Vec<f64>, paths: &[&[u32]]) -> FairShare {
        let mut off = vec![0u32];
        let mut res = Vec::new();
        for p in paths {
            res.extend_from_slice(p);
            off.push(res.len() as u32);
        }
        FairShare::new(capacity, off, res)
    }

    /// Plain progressive filling from scratch, the reference the incremental update must match.
    fn reference(capacity: &[f64], paths: &[&[u32]], active: &[bool]) -> Vec<f64> {
        let mut rate = vec![0.0; paths.len()];
        let mut frozen: Vec<bool> = active.iter().map(|a| !a).collect();
        let mut residual = capacity.to_vec();
        loop {
            let mut best = (f64::INFINITY, usize::MAX);
            for r in 0..capacity.len() {
                let n = (0..paths.len()).filter(|&f| !frozen[f] && paths[f].contains(&(r as u32))).count();
                if n > 0 && residual[r] / (n as f64) < best.0 {
                    best = (residual[r] / n as f64, r);
                }
            }
            if best.1 == usize::MAX {
                return rate;
            }
            for f in 0..paths.len() {
                if !frozen[f] && paths[f].contains(&(best.1 as u32)) {
                    frozen[f] = true;
                    rate[f] = best.0;
                    for &q in paths[f] {
                        residual[q as usize] -= best.0;
                    }
                }
            }
        }
    }

    /// Every resource's used rate is, bit for bit, the sum of its flows' rates in list order:
    /// the update re-sums only resources where a flow joined, left or moved, which is exact
    /// only if no other resource's sum could differ.
    fn assert_used_is_a_fresh_sum(s: &FairShare, nres: usize) {
        for r in 0..nres as u32 {
            let fresh: f64 = s.flows_on(r).iter().map(|&f| s.rate(f)).sum();
            // (An empty sum is -0.0, an untouched resource's 0.0: equal, not the same bits.)
            let same = if fresh == 0.0 { s.used(r) == 0.0 } else { s.used(r).to_bits() == fresh.to_bits() };
            assert!(same, "resource {r}: {} vs {fresh}", s.used(r));
        }
    }

    /// One step of a seeded stall-and-resume run: every flow `flip` picks changes state (active
    /// ones leave, idle ones join), the solver updates, its used rates are checked as fresh sums,
    /// and the from-scratch shares for the new state are returned to compare with.
    fn flip_update_and_reference(
        s: &mut FairShare,
        capacity: &[f64],
        paths: &[&[u32]],
        active: &mut [bool],
        changed: &mut Vec<(u32, f64)>,
        mut flip: impl FnMut() -> bool,
    ) -> Vec<f64> {
        let (mut leave, mut join) = (Vec::new(), Vec::new());
        for (f, on) in active.iter_mut().enumerate() {
            if flip() {
                if *on {
                    leave.push(f as u32)
                } else {
                    join.push(f as u32)
                }
                *on = !*on;
            }
        }
        s.update(&leave, &join, |_, _| {}, changed);
        assert_used_is_a_fresh_sum(s, capacity.len());
        reference(capacity, paths, active)
    }

    #[test]
    fn used_rates_stay_fresh_sums_when_few_flows_move() {
        use rand::{Rng, SeedableRng};
        // Many flows on disjoint-ish paths, a few changing per update: most resources the walk
        // reaches keep every rate, so their sums are skipped.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(31);
        for _ in 0..20 {
            let nres = rng.gen_range(6..20);
            let capacity: Vec<f64> = (0..nres).map(|_| rng.gen_range(1.0..10.0)).collect();
            let owned: Vec<Vec<u32>> = (0..rng.gen_range(10..60))
                .map(|_| {
                    let mut p: Vec<u32> = (0..rng.gen_range(1..4)).map(|_| rng.gen_range(0..nres as u32)).collect();
                    p.sort_unstable();
                    p.dedup();
                    p
                })
                .collect();
            let paths: Vec<&[u32]> = owned.iter().map(|p| p.as_slice()).collect();
            let mut s = solver(capacity.clone(), &paths);
            let mut active = vec![false; paths.len()];
            let mut changed = Vec::new();
            for _ in 0..40 {
                let want = flip_update_and_reference(&mut s, &capacity, &paths, &mut active, &mut changed, || {
                    rng.gen_bool(0.05)
                });
                for (f, want) in want.iter().enumerate() {
                    assert!((s.rate(f as u32) - want).abs() < 1e-9);
                }
            }
        }
    }

    #[test]
    fn incremental_shares_match_from_scratch_under_stalls_and_resumes() {
        use rand::{Rng, SeedableRng};
        // A two-level tree's channels: each flow goes up from its host, maybe across the
        // root, and down to another host. Flows stall (leave) and resume (rejoin) one or two
        // at a time at scattered moments, as timeouts make them, between bursts that start
        // and end many together — the lossy run's pattern.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2026);
        for _ in 0..12 {
            let (edges, hosts_per_edge) = (rng.gen_range(2..5u32), rng.gen_range(2..6u32));
            let hosts = edges * hosts_per_edge;
            // Resources: host up, host down, edge up, edge down.
            let mut capacity = vec![1.0; 2 * hosts as usize];
            capacity.extend((0..2 * edges).map(|_| rng.gen_range(1.5..4.0)));
            let owned: Vec<Vec<u32>> = (0..rng.gen_range(40..160))
                .map(|_| {
                    let src = rng.gen_range(0..hosts);
                    let dst = (src + rng.gen_range(1..hosts)) % hosts;
                    let (es, ed) = (src / hosts_per_edge, dst / hosts_per_edge);
                    let mut p = vec![src, hosts + dst];
                    if es != ed {
                        p.extend([2 * hosts + es, 2 * hosts + edges + ed]);
                    }
                    p
                })
                .collect();
            let paths: Vec<&[u32]> = owned.iter().map(|p| p.as_slice()).collect();
            let mut s = solver(capacity.clone(), &paths);
            let mut active = vec![false; paths.len()];
            let mut changed = Vec::new();
            for step in 0..60 {
                let burst = step % 10 == 0;
                let flows = paths.len() as f64;
                let want = flip_update_and_reference(&mut s, &capacity, &paths, &mut active, &mut changed, || {
                    if burst {
                        rng.gen_bool(0.4)
                    } else {
                        rng.gen_bool(1.5 / flows)
                    }
                });
                for (f, want) in want.iter().enumerate() {
                    let got = s.rate(f as u32);
                    assert!((got - want).abs() <= 1e-9 * want.abs(), "step {step}, flow {f}: {got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn textbook_example() {
        // Link 0 (cap 1) shared by flows 0,1,2; link 1 (cap 2) by flows 2,3.
        let paths: &[&[u32]] = &[&[0], &[0], &[0, 1], &[1]];
        let mut s = solver(vec![1.0, 2.0], paths);
        let mut changed = Vec::new();
        s.update(&[], &[0, 1, 2, 3], |_, _| {}, &mut changed);
        let third = 1.0 / 3.0;
        for (f, want) in [(0, third), (1, third), (2, third), (3, 2.0 - third)] {
            assert!((s.rate(f) - want).abs() < 1e-12, "flow {f}: {}", s.rate(f));
        }
        s.update(&[0, 1], &[], |_, _| {}, &mut changed);
        assert!((s.rate(2) - 1.0).abs() < 1e-12);
        assert!((s.rate(3) - 1.0).abs() < 1e-12);
        assert!((s.used(1) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn incremental_updates_match_a_full_recompute() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..40 {
            let nres = rng.gen_range(2..8);
            let capacity: Vec<f64> = (0..nres).map(|_| rng.gen_range(1..5) as f64).collect();
            let owned: Vec<Vec<u32>> = (0..rng.gen_range(3..14))
                .map(|_| {
                    let mut p: Vec<u32> = (0..nres as u32).filter(|_| rng.gen_bool(0.4)).collect();
                    if p.is_empty() {
                        p.push(rng.gen_range(0..nres as u32));
                    }
                    p
                })
                .collect();
            let paths: Vec<&[u32]> = owned.iter().map(|p| p.as_slice()).collect();
            let mut s = solver(capacity.clone(), &paths);
            let mut active = vec![false; paths.len()];
            let mut changed = Vec::new();
            for _ in 0..12 {
                let mut leave = Vec::new();
                let mut join = Vec::new();
                for f in 0..paths.len() {
                    if rng.gen_bool(0.3) {
                        if active[f] {
                            leave.push(f as u32);
                        } else {
                            join.push(f as u32);
                        }
                        active[f] = !active[f];
                    }
                }
                s.update(&leave, &join, |_, _| {}, &mut changed);
                let want = reference(&capacity, &paths, &active);
                for f in 0..paths.len() {
                    assert!((s.rate(f as u32) - want[f]).abs() < 1e-9, "flow {f}: {} vs {}", s.rate(f as u32), want[f]);
                }
                assert_used_is_a_fresh_sum(&s, nres);
            }
        }
    }
}
