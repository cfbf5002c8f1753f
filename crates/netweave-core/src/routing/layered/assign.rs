//! Layer assignment: first-fit of each destination's paths into acyclic VC layers, with the
//! escape layer taking up*/down* routes.

use crate::error::{NetweaveError, Result};
use crate::routing::updown::EscapeRoutes;
use crate::routing::{RouteOptions, MAX_VCS};
use crate::topology::Topology;

use super::graph::{DependencySlots, Fit, LayeredParams, LayeredStats, NO_HOP};

/// A layer per (source switch, tree), tree-major: `layer_of[tree * n + s]`.
pub(super) struct Layering {
    layer_of: Vec<u8>,
    /// Layers used.
    num_layers: usize,
    /// Trees (destination hosts or switches) that took escape routes.
    escaped_trees: usize,
}

impl Layering {
    /// What the layering did, for reports.
    pub(super) fn stats(&self) -> LayeredStats {
        LayeredStats { layers: self.num_layers as u8, escaped_trees: self.escaped_trees }
    }

    /// The layer of every (tree, source switch), tree-major, and the number of layers used.
    pub(super) fn into_layers(self) -> (Vec<u8>, usize) {
        (self.layer_of, self.num_layers)
    }
}

/// First-fit layer assignment: per layer a bitset of dependencies, a bitset of dependencies
/// known to close a cycle there, and a topological order kept by Pearce–Kelly. The last
/// layer of the budget is the *escape layer*: it takes only up*/down*-legal paths (no
/// down→up turn in the orientation of [`EscapeRoutes`]), which are acyclic together without
/// any search, so a destination whose paths fit nowhere can always move there on up*/down*
/// routes.
pub(super) struct Greedy<'a> {
    slots: &'a DependencySlots,
    fit: Fit,
    /// Most layers tried per path ([`LayeredParams::tries`]).
    tries: usize,
    /// [`LayeredParams::search_limit`].
    search_limit: usize,
    /// Candidate layers of the current path, `(new dependencies, layer)`.
    ranked: Vec<(u32, u8)>,
    /// Layers a path may use (the VC budget); the last one is the escape layer.
    budget: usize,
    /// Pearce–Kelly layers, `budget - 1` at most.
    layers: Vec<PkLayer>,
    layer_of: Vec<u8>,
    /// Whether the escape layer holds any path.
    escape_used: bool,
    /// `None` only on a fabric without switches (which has no trees to place).
    escape: Option<EscapeRoutes>,
    /// Destinations routed on escape routes.
    escaped_trees: usize,
    /// [`LayeredParams::patience`], and whether the last tree tried fitted.
    patience: usize,
    last_fitted: bool,
    /// [`LayeredParams::tree_effort`].
    tree_effort: u64,
    /// Per switch of the current tree: bit `l` = its path to the root is in layer `l`.
    covered: Vec<u32>,
    touched: Vec<u32>,
    walked: Vec<u32>,
    /// Dependencies this path added so far, by their first channel (the second is its parent's).
    tentative: Vec<usize>,
    /// Dependencies the current tree added, `(layer, first channel, slot)`, to undo them if
    /// the tree has to take escape routes.
    added: Vec<(u8, u32, u32)>,
    search: PkSearch,
}

struct PkLayer {
    /// Dependencies by `slot_base` (to walk forward) and by `rslot_base` (backward).
    edges: Vec<u64>,
    redges: Vec<u64>,
    forbidden: Vec<u64>,
    /// Position of every channel in a topological order of the layer's dependency graph.
    ord: Vec<u32>,
}

/// Search buffers shared by all layers; `mark[c] == epoch` = visited in the current search.
struct PkSearch {
    mark: Vec<u32>,
    epoch: u32,
    fstack: Vec<u32>,
    bstack: Vec<u32>,
    fwd: Vec<u64>,
    bwd: Vec<u64>,
    pool: Vec<u32>,
    /// Rounds taken by all searches so far.
    rounds: u64,
}

#[inline]
fn bit(bits: &[u64], i: usize) -> bool {
    bits[i >> 6] >> (i & 63) & 1 != 0
}
/// `len ≤ 64` bits of `bits` from bit `base`, as the low bits of a word.
#[inline]
fn bits_at(bits: &[u64], base: usize, len: usize) -> u64 {
    let (w, off) = (base >> 6, base & 63);
    let mut x = bits[w] >> off;
    if off + len > 64 {
        x |= bits[w + 1] << (64 - off);
    }
    if len < 64 {
        x & ((1u64 << len) - 1)
    } else {
        x
    }
}
#[inline]
fn set_bit(bits: &mut [u64], i: usize) {
    bits[i >> 6] |= 1 << (i & 63);
}
#[inline]
fn clear_bit(bits: &mut [u64], i: usize) {
    bits[i >> 6] &= !(1 << (i & 63));
}

impl<'a> Greedy<'a> {
    /// Layering for `num_trees` trees over `slots` within `options.max_vcs` layers (≤ `MAX_VCS`),
    /// escape routes on the up*/down* orientation from `options.root` (or, if that switch
    /// cannot reach the hosts, from the first switch with hosts).
    pub(super) fn new(
        topo: &Topology,
        slots: &'a DependencySlots,
        options: &RouteOptions,
        params: &LayeredParams,
        num_trees: usize,
    ) -> Result<Self> {
        let budget = (options.max_vcs as usize).clamp(1, MAX_VCS as usize);
        let root = if slots.num_switches == 0 { 0 } else { slots.escape_root(options.root) };
        Ok(Greedy {
            slots,
            fit: params.fit,
            tries: if params.tries == 0 { usize::MAX } else { params.tries as usize },
            search_limit: params.search_limit.max(1) as usize,
            ranked: Vec::new(),
            budget,
            layers: Vec::new(),
            layer_of: vec![0; slots.num_switches * num_trees],
            escape_used: false,
            escape: if slots.num_switches == 0 { None } else { Some(EscapeRoutes::new(topo, root)?) },
            escaped_trees: 0,
            patience: if params.patience == 0 { usize::MAX } else { params.patience as usize },
            last_fitted: false,
            tree_effort: if params.tree_effort == 0 { u64::MAX } else { params.tree_effort as u64 },
            covered: vec![0; slots.num_switches],
            touched: Vec::new(),
            walked: Vec::new(),
            tentative: Vec::new(),
            added: Vec::new(),
            search: PkSearch {
                mark: vec![0; slots.head.len()],
                epoch: 0,
                fstack: Vec::new(),
                bstack: Vec::new(),
                fwd: Vec::new(),
                bwd: Vec::new(),
                pool: Vec::new(),
                rounds: 0,
            },
        })
    }

    pub(super) fn finish(self) -> Layering {
        let num_layers = if self.escape_used { self.budget } else { self.layers.len().max(1) };
        Layering { layer_of: self.layer_of, num_layers, escaped_trees: self.escaped_trees }
    }

    /// Index of the escape layer.
    fn escape_layer(&self) -> usize {
        self.budget - 1
    }

    /// Place the path of every source in `sources` (parents before children) towards the root
    /// `t` of `tree` (row `row` of the layering), each in the lowest layer that stays acyclic
    /// with it. If one fits in none, the tree's dependencies are taken back out, `tree` is
    /// replaced by up*/down* routes (next hop number `k` among the legal ones, so co-located
    /// destinations spread) and every source goes to the escape layer; returns whether so.
    /// Once the layers are saturated ([`LayeredParams::patience`]) most trees go to the escape
    /// layer without a try.
    pub(super) fn place_tree(
        &mut self,
        topo: &Topology,
        tree: &mut [u16],
        t: usize,
        row: usize,
        k: usize,
        sources: &[u32],
    ) -> Result<bool> {
        let slots = self.slots;
        let n = slots.num_switches;
        let escape = self.escape_layer();
        self.added.clear();
        // A try in saturated layers costs many refused searches and almost never fits.
        let escapes = self.escaped_trees;
        let skip = escapes >= self.patience && !escapes.is_power_of_two() && !self.last_fitted;
        let mut fitted = !skip;
        let sources = if skip { &[][..] } else { sources };
        let effort = self.search.rounds.saturating_add(self.tree_effort.saturating_mul(sources.len() as u64));
        'sources: for &s in sources {
            let s = s as usize;
            if self.search.rounds > effort {
                fitted = false;
                break;
            }
            // Once the escape layer is open, a path it accepts costs no search there and
            // leaves the other layers' room to paths it does not.
            if self.escape_used && self.legal(tree, t, s) {
                self.layer_of[row * n + s] = escape as u8;
                continue 'sources;
            }
            // A placed ancestor's path is a suffix of this one and was refused by every layer
            // below its own; layers only grow, so they refuse this path too.
            // (Best fit places by content, not lowest first, so it tries every layer.)
            let mut first = 0;
            let mut u = if self.fit == Fit::First { slots.hop(tree, s).1 } else { t };
            while u != t {
                if slots.host_count(u) > 0 {
                    first = first.max(self.layer_of[row * n + u] as usize);
                }
                u = slots.hop(tree, u).1;
            }
            self.rank_layers(tree, t, s, first, escape);
            for i in 0..self.ranked.len().min(self.tries) {
                let l = self.ranked[i].1 as usize;
                if l == self.layers.len() {
                    self.layers.push(PkLayer {
                        edges: vec![0; slots.num_slots().div_ceil(64)],
                        redges: vec![0; slots.num_slots().div_ceil(64)],
                        forbidden: vec![0; slots.num_slots().div_ceil(64)],
                        ord: (0..slots.head.len() as u32).collect(),
                    });
                }
                if self.try_path(tree, t, s, l) {
                    self.layer_of[row * n + s] = l as u8;
                    continue 'sources;
                }
            }
            if self.legal(tree, t, s) {
                self.layer_of[row * n + s] = escape as u8;
                self.escape_used = true;
                continue 'sources;
            }
            fitted = false;
            break;
        }
        for &v in &self.touched {
            self.covered[v as usize] = 0;
        }
        self.touched.clear();
        if fitted {
            self.last_fitted = true;
            return Ok(false);
        }
        self.last_fitted = false;
        // Undo: the order of each layer stays valid without these dependencies.
        for &(l, c1, slot) in &self.added {
            let layer = &mut self.layers[l as usize];
            let c1 = c1 as usize;
            let j = slot as usize - slots.slot(c1, 0);
            let c2 = slots.out_start[slots.head[c1] as usize] as usize + j;
            clear_bit(&mut layer.edges, slot as usize);
            clear_bit(&mut layer.redges, slots.rslot(c1, c2));
        }
        self.added.clear();
        let Some(escape_routes) = self.escape.as_mut() else {
            return Err(NetweaveError::Routing("escape routes on a fabric without switches".into()));
        };
        escape_routes.towards(t);
        for (v, hop) in tree.iter_mut().enumerate().take(n) {
            if v == t {
                continue;
            }
            let ports = escape_routes.ports(v);
            if ports.is_empty() {
                *hop = NO_HOP;
                if slots.host_count(v) > 0 {
                    return Err(NetweaveError::Routing(format!(
                        "escape routes: switch {} cannot reach switch {} by up*/down* routes",
                        topo.label(topo.switches()[v]),
                        topo.label(topo.switches()[t])
                    )));
                }
                continue;
            }
            let p = ports[k % ports.len()];
            let o = slots.out_start[v] as usize;
            *hop = slots.out(v).position(|lc| slots.port[lc] == p).map_or(NO_HOP, |j| j as u16);
            debug_assert!(*hop != NO_HOP && o + (*hop as usize) < slots.out_start[v + 1] as usize);
            self.layer_of[row * n + v] = escape as u8;
        }
        self.escape_used = true;
        self.escaped_trees += 1;
        Ok(true)
    }

    /// The layers `first..escape` to try for the path `s → t` of `tree`, in order, into
    /// `ranked`: existing layers, then one new layer if the budget has room. First fit keeps
    /// layer order; best fit orders by the dependencies the path would add (fewest first) and
    /// leaves out layers where one of them is known to close a cycle.
    fn rank_layers(&mut self, tree: &[u16], t: usize, s: usize, first: usize, escape: usize) {
        let slots = self.slots;
        self.ranked.clear();
        let open = self.layers.len().min(escape);
        for l in first..open {
            let mut missing = 0u32;
            if self.fit == Fit::Best {
                let layer = &self.layers[l];
                let flag = 1u32 << l;
                let mut u = s;
                while self.covered[u] & flag == 0 {
                    let (c1, p) = slots.hop(tree, u);
                    if p == t {
                        break;
                    }
                    let slot = slots.slot(c1, tree[p] as usize);
                    if !bit(&layer.edges, slot) {
                        if bit(&layer.forbidden, slot) {
                            missing = u32::MAX;
                            break;
                        }
                        missing += 1;
                    }
                    u = p;
                }
                if missing == u32::MAX {
                    continue;
                }
            }
            self.ranked.push((missing, l as u8));
        }
        if self.fit == Fit::Best {
            self.ranked.sort_unstable();
        }
        if open < escape && first <= open {
            self.ranked.push((u32::MAX, open as u8));
        }
    }

    /// Whether the path `s → t` of `tree` is up*/down*-legal (never turns down→up).
    fn legal(&self, tree: &[u16], t: usize, s: usize) -> bool {
        let slots = self.slots;
        let (mut u, mut came_down) = (s, false);
        while u != t {
            let p = slots.hop(tree, u).1;
            let Some(escape_routes) = self.escape.as_ref() else {
                return false;
            };
            let up = escape_routes.is_up(u, p);
            if up && came_down {
                return false;
            }
            came_down = !up;
            u = p;
        }
        true
    }

    /// Add the path `s → t` of `tree` to layer `l` if it keeps the layer acyclic.
    fn try_path(&mut self, tree: &[u16], t: usize, s: usize, l: usize) -> bool {
        let slots = self.slots;
        let flag = 1u32 << l;
        self.walked.clear();
        self.tentative.clear();
        let mut u = s;
        let mut ok = true;
        // Up to the first switch whose own path is already in the layer, or to the root.
        while self.covered[u] & flag == 0 {
            self.walked.push(u as u32);
            let (c1, p) = slots.hop(tree, u);
            if p == t {
                break;
            }
            let slot = slots.slot(c1, tree[p] as usize);
            let layer = &mut self.layers[l];
            if !bit(&layer.edges, slot) {
                if bit(&layer.forbidden, slot) {
                    ok = false;
                    break;
                }
                let c2 = slots.hop(tree, p).0;
                let verdict = self.search.insert(slots, layer, c1 as u32, c2 as u32, self.search_limit);
                if verdict == Some(true) {
                    set_bit(&mut layer.edges, slot);
                    set_bit(&mut layer.redges, slots.rslot(c1, c2));
                    self.tentative.push(c1);
                } else if verdict.is_none() {
                    // The search gave up: refuse the layer this time, decide nothing for good.
                    ok = false;
                    break;
                } else {
                    // Only a verdict against the layer as it stands (without this path's own
                    // tentative dependencies) holds for good: layers only ever grow. (A tree
                    // taken back out for escape routes can only make such a verdict
                    // stricter than needed, never unsafe.)
                    if self.tentative.is_empty() {
                        set_bit(&mut layer.forbidden, slot);
                    }
                    ok = false;
                    break;
                }
            }
            u = p;
        }
        if ok {
            for &v in &self.walked {
                if self.covered[v as usize] == 0 {
                    self.touched.push(v);
                }
                self.covered[v as usize] |= flag;
            }
            for &c1 in &self.tentative {
                let p = slots.head[c1] as usize;
                self.added.push((l as u8, c1 as u32, (slots.slot(c1, tree[p] as usize)) as u32));
            }
        } else {
            // The order stays valid for the graph without them, so dropping the bits suffices.
            let layer = &mut self.layers[l];
            for &c1 in &self.tentative {
                let p = slots.head[c1] as usize;
                let c2 = slots.hop(tree, p).0;
                clear_bit(&mut layer.edges, slots.slot(c1, tree[p] as usize));
                clear_bit(&mut layer.redges, slots.rslot(c1, c2));
            }
        }
        ok
    }
}

impl PkSearch {
    /// Pearce–Kelly: can dependency `x → y` join `layer` without a cycle? If so, reorder the
    /// affected channels so that `x` precedes `y` (the caller sets the bits).
    ///
    /// The forward search from `y` (channels ordered before `x`) and the backward search from
    /// `x` (channels ordered after `y`) advance in turn, so a cycle shows up as soon as they
    /// meet rather than after one side has been explored in full.
    ///
    /// `Some(true)`: added; `Some(false)`: it would close a cycle; `None`: the search visited
    /// more than `limit` rounds and gave up, which the caller takes as a refusal
    /// (safe: refusing a dependency never makes a layer cyclic). The limit bounds the cost of
    /// a try in a dense layer of a big fabric, where such searches would otherwise dominate.
    fn insert(&mut self, slots: &DependencySlots, layer: &mut PkLayer, x: u32, y: u32, limit: usize) -> Option<bool> {
        let ub = layer.ord[x as usize];
        let lb = layer.ord[y as usize];
        if lb > ub {
            return Some(true);
        }
        if self.epoch >= u32::MAX - 2 {
            self.mark.fill(0);
            self.epoch = 0;
        }
        let (fm, bm) = (self.epoch + 1, self.epoch + 2);
        self.epoch += 2;
        let ord = &layer.ord;
        // Visited channels as `ord << 32 | channel`, so sorting them is sorting by order.
        let key = |c: u32| (ord[c as usize] as u64) << 32 | c as u64;
        self.fwd.clear();
        self.bwd.clear();
        self.fstack.clear();
        self.bstack.clear();
        self.fstack.push(y);
        self.mark[y as usize] = fm;
        self.bstack.push(x);
        self.mark[x as usize] = bm;
        let mut visited = 0usize;
        loop {
            visited += 1;
            self.rounds += 1;
            if visited > limit {
                return None;
            }
            let mut busy = false;
            if let Some(w) = self.fstack.pop() {
                busy = true;
                self.fwd.push(key(w));
                let h = slots.head[w as usize] as usize;
                let base = slots.slot(w as usize, 0);
                let o = slots.out_start[h] as usize;
                let deg = slots.out_start[h + 1] as usize - o;
                for chunk in (0..deg).step_by(64) {
                    let mut set = bits_at(&layer.edges, base + chunk, (deg - chunk).min(64));
                    while set != 0 {
                        let z = o + chunk + set.trailing_zeros() as usize;
                        set &= set - 1;
                        let mz = self.mark[z];
                        if mz == bm {
                            return Some(false);
                        }
                        if mz != fm && ord[z] < ub {
                            self.mark[z] = fm;
                            self.fstack.push(z as u32);
                        }
                    }
                }
            }
            if let Some(w) = self.bstack.pop() {
                busy = true;
                self.bwd.push(key(w));
                let b = slots.tail[w as usize] as usize;
                let base = slots.first_rslot(w as usize);
                let o = slots.out_start[b] as usize;
                let deg = slots.out_start[b + 1] as usize - o;
                for chunk in (0..deg).step_by(64) {
                    let mut set = bits_at(&layer.redges, base + chunk, (deg - chunk).min(64));
                    while set != 0 {
                        let z = slots.rev[o + chunk + set.trailing_zeros() as usize] as usize;
                        set &= set - 1;
                        let mz = self.mark[z];
                        if mz == fm {
                            return Some(false);
                        }
                        if mz != bm && ord[z] > lb {
                            self.mark[z] = bm;
                            self.bstack.push(z as u32);
                        }
                    }
                }
            }
            if !busy {
                break;
            }
        }
        // Everything that reaches x goes before everything y reaches, in the positions they
        // held between them.
        self.fwd.sort_unstable();
        self.bwd.sort_unstable();
        self.pool.clear();
        let (mut i, mut j) = (0, 0);
        while i < self.bwd.len() || j < self.fwd.len() {
            if j == self.fwd.len() || (i < self.bwd.len() && self.bwd[i] < self.fwd[j]) {
                self.pool.push((self.bwd[i] >> 32) as u32);
                i += 1;
            } else {
                self.pool.push((self.fwd[j] >> 32) as u32);
                j += 1;
            }
        }
        let ord = &mut layer.ord;
        for (&k, &pos) in self.bwd.iter().chain(self.fwd.iter()).zip(self.pool.iter()) {
            ord[k as u32 as usize] = pos;
        }
        Some(true)
    }
}
