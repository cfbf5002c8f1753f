//! Routing inside a layer's dependency graph: the per-destination modified Dijkstra that only
//! takes dependencies keeping the graph acyclic, with the escape paths as fallback.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::routing::select::Selector;
use crate::topology::Port;

use super::graph::{DependencySlots, LayerInput, NueStats, BLOCKED, NONE, USED};
use super::layer::{Layer, OrderScratch, Tree};

/// "No dependency" in [`Search::fresh`].
const NO_DEP: u64 = u64::MAX;

/// A dependency `c → d` packed for [`Search::fresh`].
#[inline]
fn dep(c: u32, d: u32) -> u64 {
    (c as u64) << 32 | d as u64
}

/// Per-destination search state, reused for every destination (no allocation per search).
pub(super) struct Search {
    settled: Vec<bool>,
    best_key: Vec<u64>,
    best_ch: Vec<u32>,
    /// Channel each switch forwards on (`NONE` at the destination's switch).
    chan: Vec<u32>,
    dist: Vec<u64>,
    /// Switches in settling order (destination switch first): a tree order for loads.
    order: Vec<u32>,
    /// The first host's routes (`base`), each switch's position in `order` and its hop
    /// count on those routes, and the hop counts of a sibling's routes.
    base: Vec<u32>,
    rank: Vec<u32>,
    hop_base: Vec<u32>,
    hop: Vec<u32>,
    cand: Vec<u32>,
    cand_ports: Vec<Port>,
    feas_off: Vec<u32>,
    feas: Vec<u32>,
    /// Backtracking scratch: children of the switch being moved, dependencies on trial.
    kids: Vec<u32>,
    trial: Vec<u64>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    acc: Vec<u64>,
    /// Per switch: the dependency `c → d` (as `c << 32 | d`) its settling added for the
    /// current destination (`u64::MAX` if none), withdrawn if a repair reroutes the switch.
    fresh: Vec<u64>,
    // Impasse repair scratch: escape channels towards the destination, membership of the
    // escape region, a work list, and the search tree's children (CSR).
    esc: Vec<u32>,
    in_f: Vec<bool>,
    work: Vec<u32>,
    child_off: Vec<u32>,
    child: Vec<u32>,
    /// Scratch of the acyclicity check ([`Layer::try_insert`]).
    order_scratch: OrderScratch,
}

impl Search {
    pub(super) fn new(slots: &DependencySlots) -> Self {
        let (ns, nc) = (slots.num_switches, slots.nc());
        Search {
            settled: vec![false; ns],
            best_key: vec![u64::MAX; ns],
            best_ch: vec![NONE; ns],
            chan: vec![NONE; ns],
            dist: vec![0; ns],
            order: Vec::with_capacity(ns),
            base: vec![NONE; ns],
            rank: vec![u32::MAX; ns],
            hop_base: vec![0; ns],
            hop: vec![0; ns],
            cand: Vec::new(),
            cand_ports: Vec::new(),
            feas_off: Vec::with_capacity(ns + 1),
            feas: Vec::new(),
            kids: Vec::new(),
            trial: Vec::new(),
            heap: BinaryHeap::with_capacity(nc + 1),
            acc: vec![0; ns],
            fresh: vec![NO_DEP; ns],
            esc: vec![NONE; ns],
            in_f: vec![false; ns],
            work: Vec::new(),
            child_off: vec![0; ns + 1],
            child: Vec::with_capacity(ns),
            order_scratch: OrderScratch::new(nc),
        }
    }

    /// Switches of the fabric (the size of the per-switch state).
    pub(super) fn num_switches(&self) -> usize {
        self.settled.len()
    }

    /// The switches routed towards the last destination, in settling order, without the
    /// destination's own switch.
    pub(super) fn routed(&self) -> &[u32] {
        &self.order[1..]
    }

    /// The channel switch `v` forwards on towards the last destination.
    #[inline]
    pub(super) fn channel(&self, v: u32) -> u32 {
        self.chan[v as usize]
    }

    /// Route every switch towards switch `t` inside the layer's dependency graph; returns
    /// how many switches were reached (`t` included).
    fn dijkstra(
        &mut self,
        slots: &DependencySlots,
        layer: &mut Layer,
        w: &[u64],
        t: u32,
        stats: &mut NueStats,
    ) -> usize {
        self.settled.fill(false);
        self.best_key.fill(u64::MAX);
        self.best_ch.fill(NONE);
        self.order.clear();
        self.fresh.fill(NO_DEP);
        self.heap.clear();
        self.settled[t as usize] = true;
        self.chan[t as usize] = NONE;
        self.dist[t as usize] = 0;
        self.rank[t as usize] = 0;
        self.order.push(t);
        self.relax(slots, layer, w, t);
        self.resume(slots, layer, w, stats)
    }

    /// Run the search until the heap is empty; returns how many switches are reached.
    fn resume(&mut self, slots: &DependencySlots, layer: &mut Layer, w: &[u64], stats: &mut NueStats) -> usize {
        while let Some(Reverse((key, c))) = self.heap.pop() {
            let v = slots.tail[c as usize];
            if self.settled[v as usize] || self.best_ch[v as usize] != c || self.best_key[v as usize] != key {
                continue;
            }
            let u = slots.head[c as usize];
            let cu = self.chan[u as usize];
            if cu != NONE {
                let e = slots.edge(c, cu);
                match layer.state(e) {
                    USED => {}
                    BLOCKED => {
                        self.reoffer(slots, layer, w, v);
                        continue;
                    }
                    _ => {
                        if layer.try_insert(slots, &mut self.order_scratch, c, cu) {
                            layer.use_dep(slots, c, cu);
                            self.fresh[v as usize] = dep(c, cu);
                        } else {
                            layer.block(e);
                            stats.blocked_dependencies += 1;
                            self.reoffer(slots, layer, w, v);
                            continue;
                        }
                    }
                }
            }
            self.settled[v as usize] = true;
            self.chan[v as usize] = c;
            self.dist[v as usize] = key >> 2;
            self.rank[v as usize] = self.order.len() as u32;
            self.order.push(v);
            self.relax(slots, layer, w, v);
        }
        self.order.len()
    }

    /// The search towards `t` with local backtracking: whenever the heap runs dry before
    /// every switch of the component is reached, try to attach one unreached switch by
    /// moving a settled neighbour to another next hop ([`backtrack`](Self::backtrack)) and
    /// continue from it. Returns how many switches were reached.
    pub(super) fn search(
        &mut self,
        ctx: &LayerInput,
        layer: &mut Layer,
        w: &[u64],
        t: u32,
        stats: &mut NueStats,
    ) -> usize {
        let slots = ctx.slots;
        let mut reached = self.dijkstra(slots, layer, w, t, stats);
        while reached < ctx.comp_size {
            let mut progress = false;
            for x in 0..slots.num_switches as u32 {
                if ctx.in_comp[x as usize] && !self.settled[x as usize] && self.backtrack(slots, layer, w, x, stats) {
                    stats.backtracks += 1;
                    progress = true;
                    break;
                }
            }
            if !progress {
                break;
            }
            reached = self.resume(slots, layer, w, stats);
        }
        reached
    }

    /// Make dependency `c → d` part of the layer: `Some(true)` if it was added now,
    /// `Some(false)` if it was there, `None` if it would close a cycle (then it is marked
    /// blocked if `may_block`, i.e. if no trial dependency could be to blame).
    fn ensure(
        &mut self,
        slots: &DependencySlots,
        layer: &mut Layer,
        c: u32,
        d: u32,
        may_block: bool,
        stats: &mut NueStats,
    ) -> Option<bool> {
        let e = slots.edge(c, d);
        match layer.state(e) {
            USED => Some(false),
            BLOCKED => None,
            _ => {
                if layer.try_insert(slots, &mut self.order_scratch, c, d) {
                    layer.use_dep(slots, c, d);
                    Some(true)
                } else {
                    if may_block {
                        layer.block(e);
                        stats.blocked_dependencies += 1;
                    }
                    None
                }
            }
        }
    }

    /// Local backtracking at an impasse: let unreached `x` attach to a settled neighbour `a`
    /// by moving `a` to another settled next hop `b` ranked before it (so no loop can form),
    /// if every dependency this needs fits — a's new channel into b's, x's into a's new one,
    /// and those of a's current children into a's new one. Returns whether x was attached.
    fn backtrack(
        &mut self,
        slots: &DependencySlots,
        layer: &mut Layer,
        w: &[u64],
        x: u32,
        stats: &mut NueStats,
    ) -> bool {
        for cx in slots.out(x) {
            let a = slots.head[cx as usize];
            let old = self.chan[a as usize];
            if !self.settled[a as usize] || old == NONE {
                continue;
            }
            'next: for ca in slots.out(a) {
                let b = slots.head[ca as usize];
                if ca == old || !self.settled[b as usize] || self.rank[b as usize] >= self.rank[a as usize] {
                    continue;
                }
                let cb = self.chan[b as usize];
                if (cb != NONE && layer.state(slots.edge(ca, cb)) == BLOCKED)
                    || layer.state(slots.edge(cx, ca)) == BLOCKED
                {
                    continue;
                }
                self.kids.clear();
                for o in slots.out(a) {
                    let s = slots.head[o as usize];
                    let cs = slots.rev[o as usize];
                    if self.settled[s as usize] && self.chan[s as usize] == cs {
                        if layer.state(slots.edge(cs, ca)) == BLOCKED {
                            continue 'next;
                        }
                        self.kids.push(s);
                    }
                }
                // Trial: add the needed dependencies, remembering the new ones for rollback.
                // A refusal may only block a dependency for good while no trial addition
                // could be part of the cycle.
                self.trial.clear();
                let mut ok = true;
                let mut k = 0;
                let n = self.kids.len() + 2;
                while ok && k < n {
                    let (c, d) = match k {
                        0 if cb == NONE => (NONE, NONE),
                        0 => (ca, cb),
                        1 => (cx, ca),
                        _ => (self.chan[self.kids[k - 2] as usize], ca),
                    };
                    k += 1;
                    if c == NONE {
                        continue;
                    }
                    match self.ensure(slots, layer, c, d, self.trial.is_empty(), stats) {
                        Some(true) => self.trial.push(dep(c, d)),
                        Some(false) => {}
                        None => ok = false,
                    }
                }
                if !ok {
                    for &dd in &self.trial {
                        layer.drop_dep(slots, (dd >> 32) as u32, dd as u32);
                    }
                    continue;
                }
                // Commit: withdraw what only the old channel needed, record what is new.
                let is_new = |trial: &[u64], dd: u64| if trial.contains(&dd) { dd } else { NO_DEP };
                if self.fresh[a as usize] != NO_DEP {
                    let f = self.fresh[a as usize];
                    layer.drop_dep(slots, (f >> 32) as u32, f as u32);
                }
                self.fresh[a as usize] = if cb == NONE { NO_DEP } else { is_new(&self.trial, dep(ca, cb)) };
                for i in 0..self.kids.len() {
                    let s = self.kids[i];
                    if self.fresh[s as usize] != NO_DEP {
                        let f = self.fresh[s as usize];
                        layer.drop_dep(slots, (f >> 32) as u32, f as u32);
                    }
                    self.fresh[s as usize] = is_new(&self.trial, dep(self.chan[s as usize], ca));
                }
                self.chan[a as usize] = ca;
                self.dist[a as usize] = self.dist[b as usize].saturating_add(w[ca as usize]);
                self.fresh[x as usize] = is_new(&self.trial, dep(cx, ca));
                self.settled[x as usize] = true;
                self.chan[x as usize] = cx;
                self.dist[x as usize] = self.dist[a as usize].saturating_add(w[cx as usize]);
                self.rank[x as usize] = self.order.len() as u32;
                self.order.push(x);
                self.relax(slots, layer, w, x);
                return true;
            }
        }
        false
    }

    /// Key of attaching over channel `c` (into settled `u`): the weighted distance times
    /// four plus a tie-breaker — 0 if the dependency is already in the layer, 1 if it is new
    /// but agrees with the layer's topological order (no search), 2 if it needs a search;
    /// `None` if it is blocked.
    #[inline]
    fn candidate(&self, slots: &DependencySlots, layer: &Layer, w: &[u64], c: u32, u: u32) -> Option<u64> {
        let cu = self.chan[u as usize];
        let tier = if cu == NONE {
            0
        } else {
            match layer.state(slots.edge(c, cu)) {
                BLOCKED => return None,
                USED => 0,
                _ if layer.precedes(c, cu) => 1,
                _ => 2,
            }
        };
        Some(self.dist[u as usize].saturating_add(w[c as usize]).saturating_mul(4) | tier)
    }

    /// Offer every unsettled neighbour of newly settled `u` the channel into `u`.
    fn relax(&mut self, slots: &DependencySlots, layer: &Layer, w: &[u64], u: u32) {
        for o in slots.out(u) {
            let c = slots.rev[o as usize];
            let v = slots.head[o as usize];
            if self.settled[v as usize] {
                continue;
            }
            if let Some(key) = self.candidate(slots, layer, w, c, u) {
                if key < self.best_key[v as usize] {
                    self.best_key[v as usize] = key;
                    self.best_ch[v as usize] = c;
                    self.heap.push(Reverse((key, c)));
                }
            }
        }
    }

    /// `v`'s best candidate failed: offer it the best remaining channel into a settled switch.
    fn reoffer(&mut self, slots: &DependencySlots, layer: &Layer, w: &[u64], v: u32) {
        self.best_key[v as usize] = u64::MAX;
        self.best_ch[v as usize] = NONE;
        for c in slots.out(v) {
            let u = slots.head[c as usize];
            if !self.settled[u as usize] {
                continue;
            }
            if let Some(key) = self.candidate(slots, layer, w, c, u) {
                if key < self.best_key[v as usize] {
                    self.best_key[v as usize] = key;
                    self.best_ch[v as usize] = c;
                }
            }
        }
        if self.best_ch[v as usize] != NONE {
            self.heap.push(Reverse((self.best_key[v as usize], self.best_ch[v as usize])));
        }
    }

    /// Repair an impasse: every unreached switch takes its escape route towards `t`, and so
    /// does every switch on that route (the escape region stays closed under "next hop", so
    /// it needs only escape dependencies). A searched switch whose next hop moved into the
    /// region keeps its channel if the dependency into the next hop's escape channel fits the
    /// layer's graph, and joins the region otherwise. Dependencies of rerouted switches are
    /// withdrawn. Returns how many switches were rerouted.
    pub(super) fn repair(
        &mut self,
        slots: &DependencySlots,
        layer: &mut Layer,
        tree: &Tree,
        t: u32,
        in_comp: &[bool],
        stats: &mut NueStats,
    ) -> usize {
        self.escape_channels(slots, tree, t);
        // Children in the search tree (CSR), by the channels the search chose; `work` serves
        // as the fill cursor per parent.
        self.child_off.fill(0);
        for &v in &self.order[1..] {
            self.child_off[slots.head[self.chan[v as usize] as usize] as usize + 1] += 1;
        }
        for i in 0..slots.num_switches {
            self.child_off[i + 1] += self.child_off[i];
        }
        self.child.clear();
        self.child.resize(self.order.len() - 1, NONE);
        self.work.clear();
        self.work.extend_from_slice(&self.child_off[..slots.num_switches]);
        for &v in &self.order[1..] {
            let p = slots.head[self.chan[v as usize] as usize] as usize;
            self.child[self.work[p] as usize] = v;
            self.work[p] += 1;
        }
        self.work.clear();
        self.in_f.fill(false);
        self.in_f[t as usize] = true;
        let mut moved = 0;
        for v in 0..slots.num_switches as u32 {
            if in_comp[v as usize] && !self.settled[v as usize] {
                moved += self.join(slots, layer, v);
            }
        }
        while let Some(x) = self.work.pop() {
            let cx = self.chan[x as usize];
            let (lo, hi) = (self.child_off[x as usize] as usize, self.child_off[x as usize + 1] as usize);
            for i in lo..hi {
                let s = self.child[i];
                if self.in_f[s as usize] {
                    continue;
                }
                let cs = self.chan[s as usize];
                let e = slots.edge(cs, cx);
                let old = self.fresh[s as usize];
                if old != NO_DEP && old != dep(cs, cx) {
                    // The old dependency led into x's abandoned channel.
                    layer.drop_dep(slots, (old >> 32) as u32, old as u32);
                    self.fresh[s as usize] = NO_DEP;
                }
                let keep = match layer.state(e) {
                    USED => true,
                    BLOCKED => false,
                    _ => {
                        if layer.try_insert(slots, &mut self.order_scratch, cs, cx) {
                            layer.use_dep(slots, cs, cx);
                            self.fresh[s as usize] = dep(cs, cx);
                            true
                        } else {
                            layer.block(e);
                            stats.blocked_dependencies += 1;
                            false
                        }
                    }
                };
                if !keep {
                    moved += self.join(slots, layer, s);
                }
            }
        }
        // A tree order of the repaired routes: breadth-first from t against the next hops.
        self.order.clear();
        self.order.push(t);
        let mut head = 0;
        while head < self.order.len() {
            let u = self.order[head];
            head += 1;
            for o in slots.out(u) {
                let v = slots.head[o as usize];
                if v != t && self.chan[v as usize] == slots.rev[o as usize] {
                    self.order.push(v);
                }
            }
        }
        moved
    }

    /// Move `v` and the rest of its escape route into the escape region; returns how many
    /// switches changed region.
    fn join(&mut self, slots: &DependencySlots, layer: &mut Layer, v: u32) -> usize {
        let mut y = v;
        let mut moved = 0;
        while !self.in_f[y as usize] {
            self.in_f[y as usize] = true;
            let old = self.fresh[y as usize];
            if old != NO_DEP {
                layer.drop_dep(slots, (old >> 32) as u32, old as u32);
                self.fresh[y as usize] = NO_DEP;
            }
            self.settled[y as usize] = true;
            self.chan[y as usize] = self.esc[y as usize];
            self.work.push(y);
            moved += 1;
            y = slots.head[self.esc[y as usize] as usize];
        }
        moved
    }

    /// Escape-tree channel of every switch towards `t` (up to the common ancestor, then down).
    fn escape_channels(&mut self, slots: &DependencySlots, tree: &Tree, t: u32) {
        self.esc.fill(NONE);
        self.work.clear();
        self.work.push(t);
        let mut head = 0;
        while head < self.work.len() {
            let y = self.work[head];
            head += 1;
            let p = tree.parent(slots, y);
            if p != NONE && p != t && self.esc[p as usize] == NONE {
                self.esc[p as usize] = slots.rev[tree.parent_channel(y) as usize];
                self.work.push(p);
            }
            for &x in tree.children(y) {
                if x != t && self.esc[x as usize] == NONE {
                    self.esc[x as usize] = tree.parent_channel(x);
                    self.work.push(x);
                }
            }
        }
    }

    /// Remember the routes just computed as the first host's (`base`): ranks in `order`,
    /// hop counts, and each switch's children on those routes (CSR in `child_off`/`child`).
    pub(super) fn keep_base(&mut self, slots: &DependencySlots) {
        self.rank.fill(u32::MAX);
        for (i, &v) in self.order.iter().enumerate() {
            self.rank[v as usize] = i as u32;
            self.base[v as usize] = self.chan[v as usize];
        }
        let t = self.order[0];
        self.hop_base[t as usize] = 0;
        self.hop[t as usize] = 0;
        self.child_off.fill(0);
        for &v in &self.order[1..] {
            let u = slots.head[self.base[v as usize] as usize];
            self.hop_base[v as usize] = self.hop_base[u as usize] + 1;
            self.child_off[u as usize + 1] += 1;
        }
        for i in 0..slots.num_switches {
            self.child_off[i + 1] += self.child_off[i];
        }
        self.child.clear();
        self.child.resize(self.order.len() - 1, NONE);
        self.work.clear();
        self.work.extend_from_slice(&self.child_off[..slots.num_switches]);
        for &v in &self.order[1..] {
            let u = slots.head[self.base[v as usize] as usize] as usize;
            self.child[self.work[u] as usize] = v;
            self.work[u] += 1;
        }
        // Per switch (by position in `order`), the channels to switches routed before it and
        // nearer to t on the first host's routes: the siblings' only possible next hops.
        self.feas_off.clear();
        self.feas.clear();
        self.feas_off.push(0);
        for i in 0..self.order.len() {
            let v = self.order[i];
            for c in slots.out(v) {
                let u = slots.head[c as usize];
                if self.rank[u as usize] < i as u32 && self.hop_base[u as usize] < self.hop_base[v as usize] {
                    self.feas.push(c);
                }
            }
            self.feas_off.push(self.feas.len() as u32);
        }
    }

    /// Routes for the `local`-th host of switch `t`, switch by switch in the first host's
    /// order: any channel to a switch already routed, no longer than the first host's path,
    /// whose dependency into that switch's channel is in the layer, and which every switch
    /// that routes through this one for the first host could still enter without a new
    /// dependency — so the first host's own next hop always qualifies, no search is needed,
    /// and the choice among the qualifying ports is the selection policy's.
    pub(super) fn sibling(
        &mut self,
        slots: &DependencySlots,
        layer: &Layer,
        t: u32,
        local: usize,
        selector: &mut Selector,
    ) {
        for i in 1..self.order.len() {
            let v = self.order[i];
            let limit = self.hop_base[v as usize];
            let kids = self.child_off[v as usize] as usize..self.child_off[v as usize + 1] as usize;
            self.cand.clear();
            self.cand_ports.clear();
            for f in self.feas_off[i]..self.feas_off[i + 1] {
                let c = self.feas[f as usize];
                let u = slots.head[c as usize];
                if self.hop[u as usize] + 1 > limit {
                    continue;
                }
                if u != t && layer.state(slots.edge(c, self.chan[u as usize])) != USED {
                    continue;
                }
                if self.child[kids.clone()].iter().any(|&k| layer.state(slots.edge(self.base[k as usize], c)) != USED) {
                    continue;
                }
                self.cand.push(c);
                self.cand_ports.push(slots.port[c as usize]);
            }
            let c = match self.cand.len() {
                0 => self.base[v as usize], // unreachable: the first host's channel qualifies
                1 => {
                    selector.record(v as usize, self.cand_ports[0]);
                    self.cand[0]
                }
                _ => {
                    let port = selector.choose(v as usize, local, &self.cand_ports);
                    self.cand[self.cand_ports.iter().position(|&p| p == port).unwrap_or(0)]
                }
            };
            self.chan[v as usize] = c;
            self.hop[v as usize] = self.hop[slots.head[c as usize] as usize] + 1;
        }
    }

    /// Record for each channel of the routed tree the number of source hosts it carries.
    pub(super) fn add_load(&mut self, slots: &DependencySlots, delta: &mut Vec<(u32, u64)>, t: u32) {
        for &v in &self.order {
            self.acc[v as usize] = slots.host_count(v as usize);
        }
        for &v in self.order.iter().rev() {
            if v == t {
                continue;
            }
            let c = self.chan[v as usize];
            let load = self.acc[v as usize];
            delta.push((c, load));
            self.acc[slots.head[c as usize] as usize] += load;
        }
    }
}
