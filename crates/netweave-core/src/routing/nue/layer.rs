//! One virtual layer: its escape spanning tree and its complete channel dependency graph
//! (dependency states, used-dependency masks, Pearce–Kelly topological order).

use crate::topology::fabric::SwitchFabric;

use super::graph::{DependencySlots, NONE, UNUSED, USED};
use super::partition::BfsScratch;

/// The escape spanning tree of one layer.
#[derive(Default)]
pub(super) struct Tree {
    root: u32,
    /// Channel from a switch to its parent (`NONE` at the root and outside the component).
    pub(super) parent_ch: Vec<u32>,
    depth: Vec<u32>,
    /// Children of each switch (CSR), and per child count while building.
    child_off: Vec<u32>,
    children: Vec<u32>,
}

impl Tree {
    /// BFS tree from `root`; each switch hangs off the neighbour one level up that has the
    /// fewest children so far, so the tree (and its escape paths) is not lopsided.
    pub(super) fn build(&mut self, slots: &DependencySlots, graph: &SwitchFabric, root: u32, bfs: &mut BfsScratch) {
        let ns = slots.num_switches;
        self.root = root;
        graph.bfs(root as usize, &mut bfs.dist, &mut bfs.queue);
        self.depth.clear();
        self.depth.extend_from_slice(&bfs.dist);
        self.parent_ch.clear();
        self.parent_ch.resize(ns, NONE);
        let mut nchild = vec![0u32; ns];
        // bfs.queue holds the switches in BFS order.
        for &v in &bfs.queue {
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
        for &v in &bfs.queue {
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

    pub(super) fn parent(&self, slots: &DependencySlots, v: u32) -> u32 {
        let pc = self.parent_ch[v as usize];
        if pc == NONE {
            NONE
        } else {
            slots.head[pc as usize]
        }
    }

    pub(super) fn children(&self, v: u32) -> &[u32] {
        &self.children[self.child_off[v as usize] as usize..self.child_off[v as usize + 1] as usize]
    }
}

/// One virtual layer's complete channel dependency graph: dependency states, the used
/// dependencies as successor and predecessor bit masks per channel (so searches touch only
/// used dependencies), and a topological order of them (Pearce–Kelly).
pub(super) struct Layer {
    pub(super) state: Vec<u8>,
    /// Mask words per channel (`ceil(max switch degree / 64)`).
    pub(super) words: usize,
    /// Bit `j` of `succ[c]`: dependency `c → (j-th out-channel of c's receiving switch)` used.
    pub(super) succ: Vec<u64>,
    /// Bit `i` of `pred[d]`: dependency `(reverse of the i-th out-channel of d's sender) → d` used.
    pub(super) pred: Vec<u64>,
    /// `ord[channel]` = position; `at[position]` = channel.
    pub(super) ord: Vec<u32>,
    pub(super) at: Vec<u32>,
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
}
