//! One virtual layer: its escape spanning tree and its complete channel dependency graph
//! (dependency states, used-dependency masks, Pearce–Kelly topological order).

use super::graph::{DependencySlots, BLOCKED, NONE, UNUSED, USED};
use super::partition::BfsScratch;

/// The escape spanning tree of one layer.
#[derive(Default)]
pub(super) struct Tree {
    root: u32,
    /// Channel from a switch to its parent (`NONE` at the root and outside the component).
    parent_ch: Vec<u32>,
    depth: Vec<u32>,
    /// Children of each switch (CSR), and per child count while building.
    child_off: Vec<u32>,
    children: Vec<u32>,
}

impl Tree {
    /// BFS tree from `root`; each switch hangs off the neighbour one level up that has the
    /// fewest children so far, so the tree (and its escape paths) is not lopsided.
    pub(super) fn build(&mut self, slots: &DependencySlots, root: u32, bfs: &mut BfsScratch) {
        let ns = slots.num_switches;
        self.root = root;
        bfs.run(slots, root);
        self.depth.clear();
        self.depth.extend_from_slice(bfs.distances());
        self.parent_ch.clear();
        self.parent_ch.resize(ns, NONE);
        let mut nchild = vec![0u32; ns];
        for &v in bfs.visit_order() {
            let dv = self.depth[v as usize];
            if v == root {
                continue;
            }
            let mut pick = NONE;
            for c in slots.out(v) {
                let p = slots.head[c as usize];
                if self.depth[p as usize] + 1 == dv
                    && (pick == NONE || nchild[p as usize] < nchild[slots.head[pick as usize] as usize])
                {
                    pick = c;
                }
            }
            self.parent_ch[v as usize] = pick;
            nchild[slots.head[pick as usize] as usize] += 1;
        }
        self.child_off.clear();
        self.child_off.push(0);
        let mut acc = 0u32;
        for &n in &nchild {
            acc += n;
            self.child_off.push(acc);
        }
        self.children.clear();
        self.children.resize(acc as usize, NONE);
        let mut fill = self.child_off.clone();
        for &v in bfs.visit_order() {
            let pc = self.parent_ch[v as usize];
            if pc != NONE {
                let p = slots.head[pc as usize] as usize;
                self.children[fill[p] as usize] = v;
                fill[p] += 1;
            }
        }
    }

    /// Depth-first preorder rank of every switch (`u32::MAX` outside the tree).
    pub(super) fn preorder(&self) -> Vec<u32> {
        let mut rank = vec![u32::MAX; self.depth.len()];
        let mut stack = vec![self.root];
        let mut next = 0;
        while let Some(v) = stack.pop() {
            rank[v as usize] = next;
            next += 1;
            stack.extend(self.children(v).iter().rev());
        }
        rank
    }

    /// Parent switch of `v` (`NONE` at the root and outside the component).
    pub(super) fn parent(&self, slots: &DependencySlots, v: u32) -> u32 {
        let pc = self.parent_ch[v as usize];
        if pc == NONE {
            NONE
        } else {
            slots.head[pc as usize]
        }
    }

    /// Channel from switch `v` to its parent (`NONE` at the root and outside the component).
    #[inline]
    pub(super) fn parent_channel(&self, v: u32) -> u32 {
        self.parent_ch[v as usize]
    }

    /// Children of switch `v` in the tree.
    pub(super) fn children(&self, v: u32) -> &[u32] {
        &self.children[self.child_off[v as usize] as usize..self.child_off[v as usize + 1] as usize]
    }
}

/// One virtual layer's complete channel dependency graph: dependency states, the used
/// dependencies as successor and predecessor bit masks per channel (so searches touch only
/// used dependencies), and a topological order of them (Pearce–Kelly).
pub(super) struct Layer {
    /// State of every dependency slot (`UNUSED`, `USED`, `BLOCKED`).
    state: Vec<u8>,
    /// Mask words per channel (`ceil(max switch degree / 64)`).
    words: usize,
    /// Bit `j` of `succ[c]`: dependency `c → (j-th out-channel of c's receiving switch)` used.
    succ: Vec<u64>,
    /// Bit `i` of `pred[d]`: dependency `(reverse of the i-th out-channel of d's sender) → d` used.
    pred: Vec<u64>,
    /// `ord[channel]` = position; `at[position]` = channel.
    ord: Vec<u32>,
    at: Vec<u32>,
}

/// Scratch of [`Layer::try_insert`], kept by the caller so no check allocates.
pub(super) struct OrderScratch {
    /// Visit marks: `epoch − 1` reached forwards, `epoch` backwards.
    mark: Vec<u32>,
    epoch: u32,
    /// Forward and backward search lists (channels while searching, then `ord << 32 | channel`).
    fwd: Vec<u64>,
    bwd: Vec<u64>,
}

impl OrderScratch {
    /// Scratch for a layer of `num_channels` channels.
    pub(super) fn new(num_channels: usize) -> Self {
        OrderScratch { mark: vec![0; num_channels], epoch: 0, fwd: Vec::new(), bwd: Vec::new() }
    }
}

impl Layer {
    pub(super) fn new(slots: &DependencySlots) -> Self {
        let max_deg =
            (0..slots.num_switches).map(|v| slots.out_start[v + 1] - slots.out_start[v]).max().unwrap_or(0) as usize;
        let words = max_deg.div_ceil(64).max(1);
        Layer {
            state: vec![UNUSED; slots.num_slots()],
            words,
            succ: vec![0; slots.nc() * words],
            pred: vec![0; slots.nc() * words],
            ord: vec![0; slots.nc()],
            at: vec![0; slots.nc()],
        }
    }

    /// State of dependency slot `slot` (`UNUSED`, `USED` or `BLOCKED`).
    #[inline]
    pub(super) fn state(&self, slot: usize) -> u8 {
        self.state[slot]
    }

    /// Block dependency slot `slot` for good: it was found to close a cycle.
    #[inline]
    pub(super) fn block(&mut self, slot: usize) {
        self.state[slot] = BLOCKED;
    }

    /// Whether channel `c` comes before `d` in the layer's topological order (so `c → d`
    /// could join without a search).
    #[inline]
    pub(super) fn precedes(&self, c: u32, d: u32) -> bool {
        self.ord[c as usize] < self.ord[d as usize]
    }

    /// Dependencies the layer's graph holds.
    pub(super) fn used_dependencies(&self) -> usize {
        self.state.iter().filter(|&&s| s == USED).count()
    }

    /// Mark dependency `c → d` used (its slot must not be blocked).
    #[inline]
    pub(super) fn use_dep(&mut self, slots: &DependencySlots, c: u32, d: u32) {
        self.state[slots.edge(c, d)] = USED;
        let j = slots.position(d);
        self.succ[c as usize * self.words + j / 64] |= 1 << (j % 64);
        let i = slots.position(slots.rev[c as usize]);
        self.pred[d as usize * self.words + i / 64] |= 1 << (i % 64);
    }

    /// Withdraw dependency `c → d`; removing an edge never invalidates the order.
    #[inline]
    pub(super) fn drop_dep(&mut self, slots: &DependencySlots, c: u32, d: u32) {
        self.state[slots.edge(c, d)] = UNUSED;
        let j = slots.position(d);
        self.succ[c as usize * self.words + j / 64] &= !(1 << (j % 64));
        let i = slots.position(slots.rev[c as usize]);
        self.pred[d as usize * self.words + i / 64] &= !(1 << (i % 64));
    }

    /// Clear the layer, load the escape dependencies towards `dests` and a topological order
    /// consistent with them: up channels deepest first, then the rest, then down channels
    /// shallowest first.
    pub(super) fn reset(&mut self, slots: &DependencySlots, tree: &Tree, dests: &[u32]) {
        self.state.fill(UNUSED);
        self.succ.fill(0);
        self.pred.fill(0);
        let nc = slots.nc();
        let maxd = tree.depth.iter().filter(|&&d| d != u32::MAX).max().copied().unwrap_or(0) as u64;
        let mut key = vec![1u64 << 40; nc];
        for v in 0..slots.num_switches {
            let pc = tree.parent_ch[v];
            if pc != NONE {
                let d = tree.depth[v] as u64;
                key[pc as usize] = maxd - d;
                key[slots.rev[pc as usize] as usize] = (2u64 << 40) + d;
            }
        }
        for (i, c) in self.at.iter_mut().enumerate() {
            *c = i as u32;
        }
        self.at.sort_unstable_by_key(|&c| (key[c as usize], c));
        for (i, &c) in self.at.iter().enumerate() {
            self.ord[c as usize] = i as u32;
        }
        // Up-up: every switch climbs to the root.
        for v in 0..slots.num_switches as u32 {
            let pc = tree.parent_ch[v as usize];
            if pc == NONE {
                continue;
            }
            let ppc = tree.parent_ch[slots.head[pc as usize] as usize];
            if ppc != NONE {
                self.use_dep(slots, pc, ppc);
            }
        }
        // Down-down and turns along the root → destination paths.
        let mut done = vec![false; nc];
        for &t in dests {
            let mut x = t;
            loop {
                let pc = tree.parent_ch[x as usize];
                if pc == NONE {
                    break;
                }
                let down = slots.rev[pc as usize];
                if done[down as usize] {
                    break;
                }
                done[down as usize] = true;
                let p = slots.head[pc as usize];
                let ppc = tree.parent_ch[p as usize];
                if ppc != NONE {
                    self.use_dep(slots, slots.rev[ppc as usize], down);
                }
                for &y in tree.children(p) {
                    if y != x {
                        self.use_dep(slots, tree.parent_ch[y as usize], down);
                    }
                }
                x = p;
            }
        }
    }

    /// Pearce–Kelly: can dependency `x → y` join the layer's graph without a cycle? If so,
    /// repair the topological order (the caller marks the dependency used).
    ///
    /// Only channels ordered between y and x can lie on a path y ⇝ x. The forward search
    /// from y and the backward search from x advance in turns, breadth-first: they meet on a
    /// cycle (dependency cycles are short, so usually soon), and once either is exhausted
    /// without meeting, there is none and the other is completed for the reordering.
    pub(super) fn try_insert(&mut self, slots: &DependencySlots, scratch: &mut OrderScratch, x: u32, y: u32) -> bool {
        let ub = self.ord[x as usize];
        let lb = self.ord[y as usize];
        if ub < lb {
            return true;
        }
        if scratch.epoch >= u32::MAX - 2 {
            scratch.mark.fill(0);
            scratch.epoch = 0;
        }
        scratch.epoch += 2;
        let (ef, eb) = (scratch.epoch - 1, scratch.epoch);
        scratch.fwd.clear();
        scratch.fwd.push(y as u64);
        scratch.mark[y as usize] = ef;
        scratch.bwd.clear();
        scratch.bwd.push(x as u64);
        scratch.mark[x as usize] = eb;
        let (mut hf, mut hb) = (0, 0);
        // Expand the side with the smaller queue (the usual bidirectional-search balance).
        while hf < scratch.fwd.len() && hb < scratch.bwd.len() {
            let met = if scratch.fwd.len() - hf <= scratch.bwd.len() - hb {
                let c = scratch.fwd[hf] as u32;
                hf += 1;
                self.expand_forward(slots, scratch, c, ub, ef, eb)
            } else {
                let c = scratch.bwd[hb] as u32;
                hb += 1;
                self.expand_backward(slots, scratch, c, lb, ef, eb)
            };
            if met {
                return false;
            }
        }
        // No cycle. Pearce–Kelly needs both searches complete; if the unfinished one grows
        // past an eighth of the span, shifting the span (a sequential pass) around the
        // finished side is cheaper (Marchetti-Spaccamela et al.).
        let limit = scratch.fwd.len() + scratch.bwd.len() + (ub - lb) as usize / 8;
        if hf == scratch.fwd.len() {
            while hb < scratch.bwd.len() {
                if scratch.fwd.len() + scratch.bwd.len() > limit {
                    self.shift_after(scratch, lb, ub, ef);
                    return true;
                }
                let c = scratch.bwd[hb] as u32;
                hb += 1;
                self.expand_backward(slots, scratch, c, lb, ef, eb);
            }
        } else {
            while hf < scratch.fwd.len() {
                if scratch.fwd.len() + scratch.bwd.len() > limit {
                    self.shift_before(scratch, lb, ub, eb);
                    return true;
                }
                let c = scratch.fwd[hf] as u32;
                hf += 1;
                self.expand_forward(slots, scratch, c, ub, ef, eb);
            }
        }
        // Reassign the affected positions: everything reaching x, then everything y reaches.
        // Entries are packed `ord << 32 | channel`, so sorting needs no indirection and the
        // freed positions are a merge of the two sorted lists.
        let ord = &mut self.ord;
        for list in [&mut scratch.fwd, &mut scratch.bwd] {
            for c in list.iter_mut() {
                *c |= (ord[*c as usize] as u64) << 32;
            }
            list.sort_unstable();
        }
        let (f, b) = (&scratch.fwd, &scratch.bwd);
        let (mut i, mut j) = (0, 0);
        for k in 0..f.len() + b.len() {
            let slot = if j == f.len() || (i < b.len() && b[i] < f[j]) {
                i += 1;
                (b[i - 1] >> 32) as u32
            } else {
                j += 1;
                (f[j - 1] >> 32) as u32
            };
            let c = if k < b.len() { b[k] as u32 } else { f[k - b.len()] as u32 };
            ord[c as usize] = slot;
            self.at[slot as usize] = c;
        }
        true
    }

    /// Reorder positions `lb..=ub` so the complete forward set (marked `ef`: everything y
    /// reaches there) follows all other channels of the span, each part in its old order.
    fn shift_after(&mut self, scratch: &mut OrderScratch, lb: u32, ub: u32, ef: u32) {
        for c in scratch.fwd.iter_mut() {
            *c = (self.ord[*c as usize] as u64) << 32 | (*c & 0xffff_ffff);
        }
        scratch.fwd.sort_unstable();
        let mut w = lb;
        for p in lb..=ub {
            let c = self.at[p as usize];
            if scratch.mark[c as usize] != ef {
                self.at[w as usize] = c;
                self.ord[c as usize] = w;
                w += 1;
            }
        }
        for &f in &scratch.fwd {
            self.at[w as usize] = f as u32;
            self.ord[f as u32 as usize] = w;
            w += 1;
        }
    }

    /// Reorder positions `lb..=ub` so the complete backward set (marked `eb`: everything
    /// that reaches x there) precedes all other channels of the span, each part in its old
    /// order.
    fn shift_before(&mut self, scratch: &mut OrderScratch, lb: u32, ub: u32, eb: u32) {
        for c in scratch.bwd.iter_mut() {
            *c = (self.ord[*c as usize] as u64) << 32 | (*c & 0xffff_ffff);
        }
        scratch.bwd.sort_unstable();
        let mut w = ub + 1;
        for p in (lb..=ub).rev() {
            let c = self.at[p as usize];
            if scratch.mark[c as usize] != eb {
                w -= 1;
                self.at[w as usize] = c;
                self.ord[c as usize] = w;
            }
        }
        for (i, &b) in scratch.bwd.iter().enumerate() {
            self.at[lb as usize + i] = b as u32;
            self.ord[b as u32 as usize] = lb + i as u32;
        }
    }

    /// Queue the unvisited successors of `c` ordered before `ub`; true if one was reached by
    /// the backward search (a cycle).
    #[inline]
    fn expand_forward(
        &self,
        slots: &DependencySlots,
        scratch: &mut OrderScratch,
        c: u32,
        ub: u32,
        ef: u32,
        eb: u32,
    ) -> bool {
        let words = self.words;
        let o = slots.out_start[slots.head[c as usize] as usize];
        for w in 0..words {
            let mut bits = self.succ[c as usize * words + w];
            while bits != 0 {
                let d = o + (w * 64) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                let m = scratch.mark[d as usize];
                if m == eb {
                    return true;
                }
                if m != ef && self.ord[d as usize] < ub {
                    scratch.mark[d as usize] = ef;
                    scratch.fwd.push(d as u64);
                }
            }
        }
        false
    }

    /// Queue the unvisited predecessors of `c` ordered after `lb`; true if one was reached by
    /// the forward search (a cycle).
    #[inline]
    fn expand_backward(
        &self,
        slots: &DependencySlots,
        scratch: &mut OrderScratch,
        c: u32,
        lb: u32,
        ef: u32,
        eb: u32,
    ) -> bool {
        let words = self.words;
        let o = slots.out_start[slots.tail[c as usize] as usize];
        for w in 0..words {
            let mut bits = self.pred[c as usize * words + w];
            while bits != 0 {
                let b = slots.rev[(o + (w * 64) as u32 + bits.trailing_zeros()) as usize];
                bits &= bits - 1;
                let m = scratch.mark[b as usize];
                if m == ef {
                    return true;
                }
                if m != eb && self.ord[b as usize] > lb {
                    scratch.mark[b as usize] = eb;
                    scratch.bwd.push(b as u64);
                }
            }
        }
        false
    }
}
