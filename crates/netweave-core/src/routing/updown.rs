//! Spanning-tree engines of paper 002: up*/down* (Autonet), prefix routing and DL
//! (descending layers).
//!
//! All three share one BFS spanning tree from `options.root` (neighbours visited in increasing
//! switch index) and the Autonet orientation: switch `x` has key `(level, index)`, and a move
//! `u → v` is **up** iff `key(v) < key(u)`, **down** otherwise. A legal up*/down* path never
//! turns down→up; DL allows such a turn but moves the packet to the next VC ("layer") there.
//!
//! The tables are destination-based (one output port per switch and destination host), so
//! every source's path towards a destination must be legal through every switch it crosses.
//! Each destination switch `t` gets an in-tree computed by a label-setting search whose label
//! of switch `x` is `(bucket, length, class)`:
//!
//! - `class` encodes the down→up turns left from `x` whichever way the packet arrived:
//!   class `2k` = `k` turns left after an up *or* down arrival (x forwards down),
//!   class `2k + 1` = `k` after an up arrival but `k + 1` after a down arrival (x forwards up,
//!   so a packet that came down turns at x). Both counts grow with the class, so the smallest
//!   class is the best for every upstream switch.
//! - `length` is the hop count to `t`.
//! - `bucket` (capped mode only) is 1 when a packet arriving at `x` by a down move would need
//!   more layers than allowed, i.e. no switch may route down into `x`.
//!
//! Up*/down* is the capped search with one layer: buckets first reproduce the paper's
//! construction exactly — switches with a down-only path take the shortest one, the rest climb
//! to the switch that minimises the total length. DL first tries the paper's minimal
//! construction (length, then class: minimal next hops minimising the remaining turns) and
//! keeps it when it fits in the layer budget; otherwise that destination falls back to the
//! capped search, the shortest paths it finds within the budget.

use rayon::prelude::*;

use crate::error::{NetweaveError, Result};
use crate::topology::fabric::SwitchFabric;
use crate::topology::{Port, Topology};

use super::minhop::hosts_by_switch;
use super::select::Selector;
use super::{Injection, RouteOptions, RoutingTable, VcChange, VcPolicy, VcTransitions, MAX_VCS};

/// Marks an unreached switch in level / parent / label arrays.
const NONE: u32 = u32::MAX;

/// The BFS spanning tree and Autonet up/down orientation shared by up*/down*, prefix and DL.
///
/// ```
/// use netweave_core::topology::grid::mesh;
/// use netweave_core::routing::updown::UpDownTree;
/// let t = mesh(&[4, 4], 1).unwrap();
/// let tree = UpDownTree::new(&t, 0).unwrap();
/// assert_eq!(tree.level(15), Some(6));
/// assert_eq!(tree.parent(5), Some(1)); // switch 1 is dequeued before switch 4
/// assert!(tree.is_up(5, 1) && !tree.is_up(1, 5));
/// ```
#[derive(Clone, Debug)]
pub struct UpDownTree {
    root: usize,
    /// BFS level per switch index, [`NONE`] when unreachable from the root.
    level: Vec<u32>,
    /// BFS parent per switch index, [`NONE`] for the root and unreachable switches.
    parent: Vec<u32>,
    /// Position of each switch in the order of keys `(level, index)`; the root has rank 0.
    rank: Vec<u32>,
}

impl UpDownTree {
    /// BFS from switch index `root`, visiting neighbours in increasing switch index.
    pub fn new(topo: &Topology, root: usize) -> Result<Self> {
        Self::from_graph(&SwitchFabric::new(topo), root)
    }

    fn from_graph(graph: &SwitchFabric, root: usize) -> Result<Self> {
        let n = graph.len();
        if root >= n {
            return crate::invalid!("root switch {root} does not exist (the fabric has {n})");
        }
        let mut level = vec![NONE; n];
        let mut parent = vec![NONE; n];
        let mut queue = Vec::with_capacity(n);
        level[root] = 0;
        queue.push(root as u32);
        let mut head = 0;
        while head < queue.len() {
            let u = queue[head] as usize;
            head += 1;
            // SwitchFabric lists neighbours ascending: the paper's visit order.
            for &v in graph.neighbors(u) {
                if level[v as usize] == NONE {
                    level[v as usize] = level[u] + 1;
                    parent[v as usize] = u as u32;
                    queue.push(v);
                }
            }
        }
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_unstable_by_key(|&v| (level[v as usize], v));
        let mut rank = vec![0u32; n];
        for (r, &v) in order.iter().enumerate() {
            rank[v as usize] = r as u32;
        }
        Ok(UpDownTree { root, level, parent, rank })
    }

    /// Root switch index.
    pub fn root(&self) -> usize {
        self.root
    }
    /// BFS level of a switch, `None` if the root does not reach it.
    pub fn level(&self, switch_index: usize) -> Option<u32> {
        let l = self.level[switch_index];
        (l != NONE).then_some(l)
    }
    /// BFS parent of a switch (`None` for the root and unreachable switches).
    pub fn parent(&self, switch_index: usize) -> Option<usize> {
        let p = self.parent[switch_index];
        (p != NONE).then_some(p as usize)
    }
    /// Whether the move `from → to` between neighbouring switches is an up move
    /// (`key(to) < key(from)` with key = (level, index)).
    pub fn is_up(&self, from: usize, to: usize) -> bool {
        self.rank[to] < self.rank[from]
    }
}

/// Up*/down* routing (Autonet) on the BFS tree from `options.root`; 1 VC, deadlock-free.
///
/// Destination-based tables as in paper 002 §2.1: a switch with a down-only path to the
/// destination takes the shortest such path; the others climb first, towards the up-neighbour
/// giving the shortest total length. Ties are broken by `options.select`. Paths can be
/// non-minimal (and, destination tables being one in-tree per destination, occasionally longer
/// than a source's own shortest legal path). [`up_down_vcs`] spreads hosts over several VCs.
///
/// ```
/// use netweave_core::topology::grid::mesh;
/// use netweave_core::routing::{updown, metrics::route_metrics, RouteOptions};
/// let t = mesh(&[4, 4], 1).unwrap();
/// let r = updown::up_down(&t, &RouteOptions::default()).unwrap();
/// assert_eq!(route_metrics(&t, &r).unwrap().non_minimal_pairs, 0); // minimal on the mesh
/// ```
pub fn up_down(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    Ok(tree_routes(topo, options, "updown", Layers::UpDown)?.0)
}

/// Up*/down* with the paper's multi-VC variant: the same paths as [`up_down`], each source
/// host injecting on VC `host index mod vcs` and never changing VC (each VC carries an acyclic
/// up*/down* pattern and no dependency links two VCs, so it stays deadlock-free).
/// `vcs` must be 1..=`options.max_vcs`.
pub fn up_down_vcs(topo: &Topology, options: &RouteOptions, vcs: u8) -> Result<RoutingTable> {
    if vcs == 0 || vcs > options.max_vcs.min(MAX_VCS) {
        return crate::invalid!("updown with {vcs} VCs: the count must be 1..={} (the budget)", options.max_vcs);
    }
    let mut table = tree_routes(topo, options, "updown", Layers::UpDown)?.0;
    let injection = (0..topo.num_hosts()).map(|h| (h % vcs as usize) as u8).collect();
    table.set_vc_policy(VcPolicy { num_vcs: vcs, injection: Injection::PerSource(injection), transitions: None });
    Ok(table)
}

/// Prefix routing: pure tree routing on the up*/down* BFS tree — up to the lowest common
/// ancestor of the two switches, then down (paper 002 §2.2); 1 VC, deadlock-free, never
/// minimal on a fabric with a cycle. `options.select` only chooses among parallel links.
pub fn prefix(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    check_options(topo, options)?;
    let by_switch = hosts_by_switch(topo)?;
    let mut table = RoutingTable::new(topo, "prefix");
    if topo.num_switches() == 0 {
        return Ok(table);
    }
    let graph = SwitchFabric::new(topo);
    let tree = UpDownTree::from_graph(&graph, options.root)?;
    require_reachable(topo, &graph, &tree, &by_switch, "prefix")?;
    let mut selector = Selector::new(topo, options.select);
    // toward[x] = child of x on the tree path to the current target when x is its ancestor.
    let mut toward = vec![NONE; topo.num_switches()];
    let mut candidates: Vec<Port> = Vec::new();
    for (t, dests) in by_switch.iter().enumerate() {
        if dests.is_empty() {
            continue;
        }
        let mut v = t;
        while let Some(p) = tree.parent(v) {
            toward[p] = v as u32;
            v = p;
        }
        for (local, &d) in dests.iter().enumerate() {
            set_host_port(topo, &mut table, &mut selector, t, d);
            for (x, &node) in topo.switches().iter().enumerate() {
                if x == t || tree.level[x] == NONE {
                    continue;
                }
                let next = if toward[x] != NONE { toward[x] as usize } else { tree.parent[x] as usize };
                candidates.clear();
                candidates.extend(
                    topo.neighbors(node)
                        .iter()
                        .filter(|a| !topo.is_host(a.neighbor) && topo.kind_index(a.neighbor) == next)
                        .map(|a| a.port),
                );
                let port = selector.choose(x, local, &candidates);
                table.set_out_port(x, d, port);
            }
        }
        let mut v = t;
        while let Some(p) = tree.parent(v) {
            toward[p] = NONE;
            v = p;
        }
    }
    Ok(table)
}

/// DL (descending layers, paper 002 §2.3) with at most `options.max_vcs` layers: up*/down* in
/// every layer, the packet moving to the next layer (VC + 1) at each down→up turn.
///
/// Per destination, the paper's deterministic construction: minimal next hops, choosing
/// the ones that leave the fewest turns (ties by `options.select`). When that in-tree would
/// need more layers than the budget, the destination falls back to the shortest paths the
/// capped search finds within it — with one layer exactly the up*/down* tables. The VC table
/// increments exactly when the in-port and out-port neighbours both have smaller keys than
/// the switch; host ports never change the VC. `num_vcs` is the number of layers used.
///
/// ```
/// use netweave_core::topology::grid::torus;
/// use netweave_core::routing::{updown, metrics::route_metrics, RouteOptions};
/// let t = torus(&[4, 4], 1).unwrap();
/// let r = updown::descending_layers(&t, &RouteOptions { max_vcs: 2, ..Default::default() }).unwrap();
/// let m = route_metrics(&t, &r).unwrap();
/// assert_eq!(m.non_minimal_pairs, 0);
/// assert!(r.vc_policy().num_vcs <= 2);
/// ```
pub fn descending_layers(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    let (mut table, tree, layers) = tree_routes(topo, options, "dl", Layers::Dl(options.max_vcs))?;
    let Some(tree) = tree else {
        return Ok(table);
    };
    let mut transitions = VcTransitions::new(topo);
    for (s, &node) in topo.switches().iter().enumerate() {
        for a_in in topo.neighbors(node) {
            if topo.is_host(a_in.neighbor) || !tree.is_up(s, topo.kind_index(a_in.neighbor)) {
                continue;
            }
            // Arrived by a down move (the in-port neighbour has the smaller key) …
            for a_out in topo.neighbors(node) {
                // … and leaves by an up move: a down→up turn, next layer.
                if !topo.is_host(a_out.neighbor) && tree.is_up(s, topo.kind_index(a_out.neighbor)) {
                    transitions.set(s, a_in.port, a_out.port, VcChange::Increment);
                }
            }
        }
    }
    table.set_vc_policy(VcPolicy { num_vcs: layers, injection: Injection::Zero, transitions: Some(transitions) });
    Ok(table)
}

/// Which in-trees [`tree_routes`] builds.
#[derive(Clone, Copy)]
enum Layers {
    /// The up*/down* construction (capped search with one layer).
    UpDown,
    /// DL: minimal in-trees when they fit in this many layers, else the capped search.
    Dl(u8),
}

/// How [`Labels::compute`] ranks a switch's options.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// (length, class): minimal paths with the fewest turns, no limit on turns.
    Minimal,
    /// (bucket, length, class) with at most this many layers (turns < layers).
    Capped(u8),
}

// Label layout: bucket in bit 62, length in bits 32..62, class in bits 0..32; bit 63 marks a
// final label during a search, and an unlabelled switch has every other bit set.
const FINAL: u64 = 1 << 63;
const UNLABELLED: u64 = FINAL - 1;
fn label(bucket: u64, len: u64, class: u64) -> u64 {
    (bucket << 62) | (len << 32) | class
}
fn label_len(l: u64) -> u64 {
    (l >> 32) & ((1 << 30) - 1)
}
fn label_class(l: u64) -> u64 {
    l & 0xffff_ffff
}

/// Label of a switch that forwards to a switch labelled `next` by a down (`down = true`) or
/// up move; `None` when that breaks the layer cap.
fn extend(mode: Mode, next: u64, down: bool) -> Option<u64> {
    let c = label_class(next);
    // Down move: no turn at this switch, the turns left are next's after a down arrival.
    // Up move: next's turns after an up arrival, one more if the packet arrived here by a down move.
    let class = if down { 2 * c.div_ceil(2) } else { 2 * (c / 2) + 1 };
    let len = label_len(next) + 1;
    match mode {
        Mode::Minimal => Some(label(0, len, class)),
        Mode::Capped(layers) => {
            let (turns_up, turns_down) = (class / 2, class.div_ceil(2));
            (turns_up < layers as u64).then(|| label((turns_down >= layers as u64) as u64, len, class))
        }
    }
}

/// The switch-to-switch links of every switch in port order (one entry per parallel link),
/// each with its port and whether leaving by it is an up move: the flat arrays the
/// per-destination searches walk.
struct OrientedLinks {
    start: Vec<u32>,
    far: Vec<u32>,
    port: Vec<Port>,
    up: Vec<bool>,
}

impl OrientedLinks {
    fn new(topo: &Topology, tree: &UpDownTree) -> Self {
        let n = topo.num_switches();
        let mut links =
            OrientedLinks { start: Vec::with_capacity(n + 1), far: Vec::new(), port: Vec::new(), up: Vec::new() };
        for (x, &node) in topo.switches().iter().enumerate() {
            links.start.push(links.far.len() as u32);
            for a in topo.neighbors(node) {
                if !topo.is_host(a.neighbor) {
                    let y = topo.kind_index(a.neighbor);
                    links.far.push(y as u32);
                    links.port.push(a.port);
                    links.up.push(tree.is_up(x, y));
                }
            }
        }
        links.start.push(links.far.len() as u32);
        links
    }

    fn range(&self, x: usize) -> std::ops::Range<usize> {
        self.start[x] as usize..self.start[x + 1] as usize
    }
}

/// Per-destination-switch labels and the candidate next-hop ports they allow; the buffers
/// are reused across destinations.
struct Labels {
    label: Vec<u64>,
    /// Bucket queue of the search: `queue[bucket * (n + 1) + length]` holds the switches whose
    /// tentative label has that bucket and length (the class only orders switches of one
    /// queue, and no extension stays in its queue, so a queue needs no inner order).
    queue: Vec<Vec<u32>>,
    /// Candidate ports of switch `x`: `cand[cand_start[x]..cand_start[x] + cand_len[x]]`
    /// (written in the order switches become final; `cand_len` 0 when it has none).
    cand_start: Vec<u32>,
    cand_len: Vec<u8>,
    cand: Vec<Port>,
}

impl Labels {
    fn new(n: usize) -> Self {
        Labels {
            label: vec![UNLABELLED; n],
            queue: vec![Vec::new(); 2 * (n + 1)],
            cand_start: vec![0; n],
            cand_len: vec![0; n],
            cand: Vec::new(),
        }
    }

    /// Label every switch that reaches `target` (label-setting search from the target) and
    /// collect, for every labelled switch but the target, the ports (ascending) to neighbours
    /// that realise its label.
    ///
    /// Every extension adds one to the length and never lowers the bucket, so processing the
    /// (bucket, length) queues in order pops each switch with its final label, like Dijkstra
    /// with a heap but in linear time. Labels along a chain of final labels strictly
    /// decrease, so lengths stay below the switch count and the queues suffice. The
    /// neighbours realising a switch's label have smaller labels, hence are final when the
    /// switch is popped: its candidates are collected in the same pass over its links.
    fn compute(&mut self, links: &OrientedLinks, target: usize, mode: Mode) {
        // One copy of the search per common mode, so that `extend` folds to straight-line code.
        match mode {
            Mode::Minimal => self.search(links, target, Mode::Minimal),
            Mode::Capped(1) => self.search(links, target, Mode::Capped(1)),
            _ => self.search(links, target, mode),
        }
    }

    #[inline(always)]
    fn search(&mut self, links: &OrientedLinks, target: usize, mode: Mode) {
        let n = self.label.len();
        let (label, queue, cand) = (&mut self.label, &mut self.queue, &mut self.cand);
        let (cand_start, cand_len) = (&mut self.cand_start, &mut self.cand_len);
        label.fill(UNLABELLED);
        cand_len.fill(0);
        cand.clear();
        let queue_of = |l: u64| (l >> 62) as usize * (n + 1) + label_len(l) as usize;
        label[target] = 0;
        queue[0].push(target as u32);
        let (mut g, mut last) = (0, 0);
        while g <= last {
            let mut current = std::mem::take(&mut queue[g]);
            for &x in &current {
                let x = x as usize;
                let lx = label[x];
                // Skip a switch already final, or queued again since with a better label.
                if lx & FINAL != 0 || queue_of(lx) != g {
                    continue;
                }
                label[x] = lx | FINAL;
                let first = cand.len();
                for e in links.range(x) {
                    let w = links.far[e] as usize;
                    let lw = label[w];
                    if lw & FINAL != 0 {
                        // Final neighbour: a candidate when forwarding to it realises x's label.
                        if extend(mode, lw & !FINAL, !links.up[e]) == Some(lx) && x != target {
                            cand.push(links.port[e]);
                        }
                    } else if let Some(l) = extend(mode, lx, links.up[e]) {
                        // w → x is a down move exactly when x → w is an up move.
                        if l < lw {
                            label[w] = l;
                            let q = queue_of(l);
                            queue[q].push(w as u32);
                            last = last.max(q);
                        }
                    }
                }
                cand_start[x] = first as u32;
                cand_len[x] = (cand.len() - first).min(u8::MAX as usize) as u8;
            }
            current.clear();
            queue[g] = current;
            g += 1;
        }
        for l in label.iter_mut() {
            *l &= !FINAL;
        }
    }

    fn ports(&self, x: usize) -> &[Port] {
        let s = self.cand_start[x] as usize;
        &self.cand[s..s + self.cand_len[x] as usize]
    }

    /// Most down→up turns any host-carrying switch's packets make (a packet injected at `s`
    /// arrives "up": no turn at its first switch).
    fn max_turns(&self, by_switch: &[Vec<usize>]) -> u64 {
        (0..self.label.len())
            .filter(|&s| !by_switch[s].is_empty() && self.label[s] != UNLABELLED)
            .map(|s| label_class(self.label[s]) / 2)
            .max()
            .unwrap_or(0)
    }
}

/// Destination-consistent up*/down* in-trees, one destination switch at a time: the escape
/// routes of the layered engines (a destination whose shortest paths fit in no layer takes
/// these: any set of up*/down*-legal paths is acyclic, so a layer that only ever
/// takes legal paths has room for every destination).
pub(crate) struct EscapeRoutes {
    tree: UpDownTree,
    links: OrientedLinks,
    labels: Labels,
    /// The target of the last [`towards`](Self::towards), whose ports `labels` holds.
    target: Option<usize>,
}

impl EscapeRoutes {
    /// The orientation of the BFS tree from switch index `root`.
    pub(crate) fn new(topo: &Topology, root: usize) -> Result<Self> {
        let graph = SwitchFabric::new(topo);
        let tree = UpDownTree::from_graph(&graph, root)?;
        let links = OrientedLinks::new(topo, &tree);
        let labels = Labels::new(topo.num_switches());
        Ok(EscapeRoutes { tree, links, labels, target: None })
    }

    /// Whether the move `from → to` is up (see [`UpDownTree::is_up`]).
    #[inline]
    pub(crate) fn is_up(&self, from: usize, to: usize) -> bool {
        self.tree.is_up(from, to)
    }

    /// Compute the legal next-hop ports of every switch towards switch `target`; read them
    /// with [`ports`](Self::ports) (empty for the target and switches that cannot reach it).
    /// Consecutive calls for one target (co-located destination hosts) compute it once.
    pub(crate) fn towards(&mut self, target: usize) {
        if self.target != Some(target) {
            self.labels.compute(&self.links, target, Mode::Capped(1));
            self.target = Some(target);
        }
    }

    /// Ports (ascending) of switch `x` after [`towards`](Self::towards).
    pub(crate) fn ports(&self, x: usize) -> &[Port] {
        self.labels.ports(x)
    }
}

/// Destination switches whose in-trees are computed together (in parallel) before their
/// columns of the table are filled; bounds the memory held to a few megabytes.
const TREES_PER_BATCH: usize = 128;

/// The legal next-hop ports towards one destination switch (CSR over switch indices) and the
/// layers its in-tree uses.
struct InTree {
    target: usize,
    cand_start: Vec<u32>,
    cand_len: Vec<u8>,
    cand: Vec<Port>,
    layers: u64,
}

impl InTree {
    fn ports(&self, x: usize) -> &[Port] {
        let s = self.cand_start[x] as usize;
        &self.cand[s..s + self.cand_len[x] as usize]
    }
}

/// Shared body of up*/down* and DL: the tables and, for DL, the layers used.
///
/// The in-trees of the destination switches are independent searches, run in parallel a
/// batch at a time; the table is then filled row by row (in parallel too, unless the
/// selection policy is [`Select::Balanced`](super::Select::Balanced), whose choices depend on
/// the order, and which keeps the sequential destination-major fill). Every choice is a pure
/// function of the in-tree, so the table is the same whatever the thread count.
fn tree_routes(
    topo: &Topology,
    options: &RouteOptions,
    name: &str,
    layers: Layers,
) -> Result<(RoutingTable, Option<UpDownTree>, u8)> {
    check_options(topo, options)?;
    let by_switch = hosts_by_switch(topo)?;
    let mut table = RoutingTable::new(topo, name);
    if topo.num_switches() == 0 {
        return Ok((table, None, 1));
    }
    let graph = SwitchFabric::new(topo);
    let tree = UpDownTree::from_graph(&graph, options.root)?;
    require_reachable(topo, &graph, &tree, &by_switch, name)?;
    let links = OrientedLinks::new(topo, &tree);
    let n = topo.num_switches();
    let num_hosts = topo.num_hosts();
    let targets: Vec<usize> = (0..n).filter(|&t| !by_switch[t].is_empty()).collect();
    let mut selector = Selector::new(topo, options.select);
    let balanced = options.select == super::Select::Balanced;
    let mut layers_used = 1u64;
    for batch in targets.chunks(TREES_PER_BATCH) {
        let trees: Vec<InTree> = batch
            .par_iter()
            .map_init(
                || Labels::new(n),
                |labels, &t| {
                    let mode = match layers {
                        Layers::UpDown => Mode::Capped(1),
                        Layers::Dl(budget) => {
                            labels.compute(&links, t, Mode::Minimal);
                            if labels.max_turns(&by_switch) < budget as u64 {
                                Mode::Minimal
                            } else {
                                Mode::Capped(budget)
                            }
                        }
                    };
                    if mode != Mode::Minimal {
                        labels.compute(&links, t, mode);
                    }
                    InTree {
                        target: t,
                        cand_start: labels.cand_start.clone(),
                        cand_len: labels.cand_len.clone(),
                        cand: labels.cand.clone(),
                        layers: labels.max_turns(&by_switch) + 1,
                    }
                },
            )
            .collect();
        for it in &trees {
            layers_used = layers_used.max(it.layers);
        }
        if balanced {
            for it in &trees {
                for (local, &d) in by_switch[it.target].iter().enumerate() {
                    set_host_port(topo, &mut table, &mut selector, it.target, d);
                    for x in 0..n {
                        let ports = it.ports(x);
                        if !ports.is_empty() {
                            let port = selector.choose(x, local, ports);
                            table.set_out_port(x, d, port);
                        }
                    }
                }
            }
        } else {
            let policy = options.select;
            table.out_port.par_chunks_mut(num_hosts.max(1)).enumerate().for_each(|(x, row)| {
                for it in &trees {
                    let dests = &by_switch[it.target];
                    if x == it.target {
                        let node = topo.switches()[x];
                        for &d in dests {
                            let dest = topo.hosts()[d];
                            if let Some(a) = topo.neighbors(node).iter().find(|a| a.neighbor == dest) {
                                row[d] = a.port;
                            }
                        }
                        continue;
                    }
                    let ports = it.ports(x);
                    if !ports.is_empty() {
                        for (local, &d) in dests.iter().enumerate() {
                            row[d] = Selector::pick(policy, local, ports);
                        }
                    }
                }
            });
        }
    }
    // The cap keeps turns below the budget, itself at most MAX_VCS.
    Ok((table, Some(tree), layers_used.min(MAX_VCS as u64) as u8))
}

/// At the destination's own switch, forward on the port to the destination host.
fn set_host_port(topo: &Topology, table: &mut RoutingTable, selector: &mut Selector, t: usize, d: usize) {
    let dest = topo.hosts()[d];
    if let Some(a) = topo.neighbors(topo.switches()[t]).iter().find(|a| a.neighbor == dest) {
        selector.record(t, a.port);
        table.set_out_port(t, d, a.port);
    }
}

/// The checks `route()` makes, repeated for direct callers (never panic on bad options).
fn check_options(topo: &Topology, options: &RouteOptions) -> Result<()> {
    if options.max_vcs == 0 || options.max_vcs > MAX_VCS {
        return crate::invalid!("the VC budget must be 1..={MAX_VCS}, got {}", options.max_vcs);
    }
    if topo.num_switches() > 0 && options.root >= topo.num_switches() {
        return crate::invalid!("root switch {} does not exist (the fabric has {})", options.root, topo.num_switches());
    }
    Ok(())
}

/// Every switch with hosts must be reachable from the root.
fn require_reachable(
    topo: &Topology,
    graph: &SwitchFabric,
    tree: &UpDownTree,
    by_switch: &[Vec<usize>],
    engine: &str,
) -> Result<()> {
    match (0..graph.len()).find(|&s| !by_switch[s].is_empty() && tree.level[s] == NONE) {
        None => Ok(()),
        Some(s) => Err(disconnected(
            topo,
            graph,
            &format!(
                "{engine}: switch {} (with hosts) is unreachable from root switch {}",
                topo.label(topo.switches()[s]),
                topo.label(topo.switches()[tree.root])
            ),
        )),
    }
}

/// One-line error for a disconnected fabric, naming its components (first labels of each).
pub(crate) fn disconnected(topo: &Topology, graph: &SwitchFabric, what: &str) -> NetweaveError {
    let n = graph.len();
    let mut comp = vec![NONE; n];
    let mut queue = Vec::new();
    let mut names = Vec::new();
    let mut count = 0;
    for s in 0..n {
        if comp[s] != NONE {
            continue;
        }
        comp[s] = count;
        queue.clear();
        queue.push(s as u32);
        let mut head = 0;
        while head < queue.len() {
            let v = queue[head] as usize;
            head += 1;
            for &u in graph.neighbors(v) {
                if comp[u as usize] == NONE {
                    comp[u as usize] = count;
                    queue.push(u);
                }
            }
        }
        count += 1;
        if names.len() < 4 {
            queue.sort_unstable();
            let first: Vec<&str> = queue.iter().take(3).map(|&v| topo.label(topo.switches()[v as usize])).collect();
            let more = if queue.len() > 3 { format!(", … {} switches", queue.len()) } else { String::new() };
            names.push(format!("{{{}{more}}}", first.join(", ")));
        }
    }
    let rest = if count > 4 { format!(", … {} in all", count) } else { String::new() };
    NetweaveError::Routing(format!(
        "{what}: the fabric is disconnected into {count} components: {}{rest}",
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::deadlock;
    use crate::routing::metrics::route_metrics;
    use crate::routing::{route, Engine, Select};
    use crate::topology::dragonfly::{dragonfly, GlobalArrangement};
    use crate::topology::fat_tree::{fat_tree, k_ary_n_tree};
    use crate::topology::grid::{hypercube, mesh, torus};
    use crate::topology::lsft::latin_square_fat_tree;
    use crate::topology::random::{irregular, random_regular};
    use crate::topology::{LinkSpec, TopologyBuilder};

    fn opts(max_vcs: u8) -> RouteOptions {
        RouteOptions { max_vcs, ..Default::default() }
    }

    fn families() -> Vec<Topology> {
        vec![
            mesh(&[4, 4], 4).unwrap(),
            torus(&[4, 4], 4).unwrap(),
            torus(&[3, 5], 1).unwrap(),
            torus(&[2, 3], 1).unwrap(), // parallel links in the size-2 dimension
            hypercube(4, 2).unwrap(),
            fat_tree(4, 3, false).unwrap(),
            k_ary_n_tree(3, 3).unwrap(),
            latin_square_fat_tree(3, false, false).unwrap(),
            dragonfly(4, 2, 2, None, GlobalArrangement::Relative).unwrap(),
            random_regular(24, 4, 2, 7).unwrap(),
            irregular(16, 4, 6, 4, 1).unwrap(),
            irregular(16, 4, 6, 4, 2).unwrap(),
            irregular(40, 3, 9, 1, 3).unwrap(),
        ]
    }

    /// (avg hops, non-minimal pairs, vcs) of an engine.
    fn figures(t: &Topology, r: &RoutingTable) -> (f64, u64, u8) {
        let m = route_metrics(t, r).unwrap();
        (m.avg_hops, m.non_minimal_pairs, r.vc_policy().num_vcs)
    }

    #[test]
    fn bfs_levels_match_section_4_9() {
        let levels = |t: &Topology| {
            let tree = UpDownTree::new(t, 0).unwrap();
            (0..16).map(|s| tree.level(s).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(levels(&mesh(&[4, 4], 1).unwrap()), [0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6]);
        assert_eq!(levels(&torus(&[4, 4], 1).unwrap()), [0, 1, 2, 1, 1, 2, 3, 2, 2, 3, 4, 3, 1, 2, 3, 2]);
    }

    #[test]
    fn section_4_9_reference_numbers() {
        // One host per router: host pairs are the 240 ordered switch pairs of §4.9.
        for (t, prefix_avg, prefix_nonmin, avg) in
            [(mesh(&[4, 4], 1).unwrap(), 4.0667, 108, 2.6667), (torus(&[4, 4], 1).unwrap(), 3.2667, 110, 2.1333)]
        {
            let p = route_metrics(&t, &prefix(&t, &opts(1)).unwrap()).unwrap();
            assert_eq!(p.pairs, 240);
            assert!((p.avg_hops - prefix_avg).abs() < 1e-4, "{}: prefix avg {}", t.name(), p.avg_hops);
            assert_eq!(p.non_minimal_pairs, prefix_nonmin, "{}", t.name());
            let ud = route_metrics(&t, &up_down(&t, &opts(1)).unwrap()).unwrap();
            assert!((ud.avg_hops - avg).abs() < 1e-4, "{}: updown avg {}", t.name(), ud.avg_hops);
            assert_eq!(ud.non_minimal_pairs, 0);
            let dl = route_metrics(&t, &descending_layers(&t, &opts(2)).unwrap()).unwrap();
            assert!((dl.avg_hops - avg).abs() < 1e-4, "{}: dl avg {}", t.name(), dl.avg_hops);
            assert_eq!(dl.non_minimal_pairs, 0);
        }
    }

    #[test]
    fn updown_is_minimal_on_the_mesh_and_dl_on_mesh_and_torus() {
        let m = mesh(&[4, 4], 4).unwrap();
        assert_eq!(figures(&m, &up_down(&m, &opts(1)).unwrap()).1, 0);
        for t in [mesh(&[4, 4], 4).unwrap(), torus(&[4, 4], 4).unwrap()] {
            let r = descending_layers(&t, &opts(2)).unwrap();
            let (_, nonmin, vcs) = figures(&t, &r);
            assert_eq!(nonmin, 0, "{}", t.name());
            // Minimal paths need no down→up turn here (§2.3 [derived]): one layer is used.
            assert_eq!(vcs, 1, "{}", t.name());
        }
    }

    #[test]
    fn prefix_is_never_minimal() {
        for t in [
            mesh(&[4, 4], 4).unwrap(),
            torus(&[4, 4], 4).unwrap(),
            irregular(16, 4, 6, 4, 1).unwrap(),
            irregular(16, 4, 6, 4, 2).unwrap(),
        ] {
            let p = figures(&t, &prefix(&t, &opts(1)).unwrap());
            let ud = figures(&t, &up_down(&t, &opts(1)).unwrap());
            let dl = figures(&t, &descending_layers(&t, &opts(2)).unwrap());
            assert!(p.1 > 0, "{}", t.name());
            assert!(p.0 > ud.0 && ud.0 >= dl.0, "{}: {p:?} {ud:?} {dl:?}", t.name());
        }
    }

    #[test]
    fn every_engine_is_deadlock_free_on_every_family() {
        for t in families() {
            let mut tables = vec![up_down(&t, &opts(1)).unwrap(), prefix(&t, &opts(1)).unwrap()];
            for layers in [1, 2, 3, 8] {
                tables.push(descending_layers(&t, &opts(layers)).unwrap());
            }
            tables.push(up_down_vcs(&t, &opts(4), 4).unwrap());
            for select in Select::ALL {
                let o = RouteOptions { select, root: t.num_switches() / 2, ..opts(2) };
                tables.push(up_down(&t, &o).unwrap());
                tables.push(descending_layers(&t, &o).unwrap());
            }
            for r in &tables {
                let rep = deadlock::check(&t, r).unwrap();
                assert!(rep.deadlock_free, "{} on {}: {:?}", r.engine(), t.name(), rep.cycle);
                assert!(rep.vcs_used <= r.vc_policy().num_vcs);
            }
        }
    }

    #[test]
    fn dl_layers_stay_within_budget_and_shorten_updown() {
        for t in families() {
            let ud = figures(&t, &up_down(&t, &opts(1)).unwrap());
            let mut prev = f64::INFINITY;
            for layers in 1..=4u8 {
                let r = descending_layers(&t, &opts(layers)).unwrap();
                let (avg, _, vcs) = figures(&t, &r);
                assert!(vcs <= layers, "{}: {vcs} > {layers}", t.name());
                // Every destination either keeps minimal paths or the capped search, which with
                // more layers has more options; one layer is at least as good as up*/down*.
                assert!(avg <= prev + 1e-9, "{}: {layers} layers avg {avg} > {prev}", t.name());
                prev = avg;
            }
            assert!(prev <= ud.0 + 1e-9);
        }
    }

    #[test]
    fn dl_falls_back_within_the_budget() {
        // Find an irregular fabric where up*/down* is non-minimal: minimal paths then need a
        // second layer, so one layer must fall back yet stay deadlock-free and deliver.
        let mut tested = 0;
        for seed in 0..20 {
            let t = irregular(16, 4, 6, 1, seed).unwrap();
            let minimal = descending_layers(&t, &opts(16)).unwrap();
            let (_, nonmin, vcs) = figures(&t, &minimal);
            assert_eq!(nonmin, 0);
            if vcs < 2 {
                continue;
            }
            tested += 1;
            for layers in 1..vcs {
                let r = descending_layers(&t, &opts(layers)).unwrap();
                assert!(r.vc_policy().num_vcs <= layers);
                assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
            }
        }
        assert!(tested > 0, "no seed needed a second DL layer");
    }

    #[test]
    fn dl_increments_exactly_at_down_up_turns() {
        let t = irregular(16, 4, 6, 1, 4).unwrap();
        let r = descending_layers(&t, &opts(4)).unwrap();
        let tree = UpDownTree::new(&t, 0).unwrap();
        for (s, &node) in t.switches().iter().enumerate() {
            for a in t.neighbors(node) {
                for b in t.neighbors(node) {
                    let turn = !t.is_host(a.neighbor)
                        && !t.is_host(b.neighbor)
                        && tree.is_up(s, t.kind_index(a.neighbor))
                        && tree.is_up(s, t.kind_index(b.neighbor));
                    let want = if turn { VcChange::Increment } else { VcChange::Keep };
                    assert_eq!(r.vc_policy().change(s, a.port, b.port), want);
                }
            }
        }
        // Up*/down* never changes VC.
        assert!(up_down(&t, &opts(4)).unwrap().vc_policy().transitions.is_none());
    }

    #[test]
    fn updown_vcs_spreads_sources_over_vcs() {
        let t = mesh(&[4, 4], 4).unwrap();
        let r = up_down_vcs(&t, &opts(4), 4).unwrap();
        let rep = deadlock::check(&t, &r).unwrap();
        assert!(rep.deadlock_free);
        assert_eq!(rep.vcs_used, 4);
        assert_eq!(r.vc_policy().injection_vc(5, 0), 1);
        assert_eq!(r.ports(), up_down(&t, &opts(4)).unwrap().ports());
        let err = up_down_vcs(&t, &opts(2), 4).unwrap_err().to_string();
        assert!(err.contains("1..=2"), "{err}");
    }

    #[test]
    fn tables_do_not_depend_on_the_thread_count() {
        // More destination switches than one batch, so batches and rows both run in parallel.
        let t = random_regular(TREES_PER_BATCH as u32 + 40, 4, 2, 5).unwrap();
        let build = |threads: usize, select: Select| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let o = RouteOptions { select, ..opts(3) };
                (up_down(&t, &o).unwrap(), descending_layers(&t, &o).unwrap())
            })
        };
        for select in Select::ALL {
            let (ud1, dl1) = build(1, select);
            let (ud4, dl4) = build(4, select);
            assert_eq!(ud1.ports(), ud4.ports(), "{select}");
            assert_eq!(dl1.ports(), dl4.ports(), "{select}");
            assert_eq!(dl1.vc_policy(), dl4.vc_policy(), "{select}");
            assert!(deadlock::check(&t, &dl4).unwrap().deadlock_free);
        }
    }

    #[test]
    fn selection_policy_changes_updown_paths() {
        let t = mesh(&[4, 4], 4).unwrap();
        let low = up_down(&t, &RouteOptions { select: Select::LowPort, ..opts(1) }).unwrap();
        let spread = up_down(&t, &RouteOptions { select: Select::PerDestination, ..opts(1) }).unwrap();
        // From switch 0 to the four hosts of switch 5 (two minimal legal next hops: +x, +y):
        // low port first sends all one way, per-destination alternates.
        let hosts5: Vec<usize> = (20..24).collect();
        let low_ports: Vec<Port> = hosts5.iter().map(|&d| low.out_port(0, d)).collect();
        let spread_ports: Vec<Port> = hosts5.iter().map(|&d| spread.out_port(0, d)).collect();
        assert!(low_ports.iter().all(|&p| p == low_ports[0]));
        assert_ne!(spread_ports[0], spread_ports[1]);
        let (ml, ms) = (route_metrics(&t, &low).unwrap(), route_metrics(&t, &spread).unwrap());
        assert_eq!(ml.path_diversity, 1.0);
        assert!(ms.path_diversity > 1.0);
        assert_eq!(ml.avg_hops, ms.avg_hops);
    }

    #[test]
    fn dispatcher_reaches_these_engines() {
        let t = mesh(&[3, 3], 1).unwrap();
        for e in [Engine::UpDown, Engine::Prefix, Engine::Dl] {
            let r = route(&t, e, &RouteOptions::default()).unwrap();
            assert_eq!(r.engine(), e.name());
        }
    }

    #[test]
    fn disconnected_fabric_names_components() {
        let mut b = TopologyBuilder::new("islands");
        let s: Vec<_> = (0..4).map(|i| b.add_switch(format!("s{i}"), 3)).collect();
        b.connect(s[0], s[1], LinkSpec::default()).unwrap();
        b.connect(s[2], s[3], LinkSpec::default()).unwrap();
        for (i, &sw) in s.iter().enumerate() {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, sw, LinkSpec::default()).unwrap();
        }
        let t = b.build().unwrap();
        for e in [Engine::UpDown, Engine::Prefix, Engine::Dl] {
            let err = route(&t, e, &RouteOptions::default()).unwrap_err().to_string();
            assert!(err.contains("2 components") && err.contains("{s2, s3}"), "{err}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        // A single switch with hosts; a switch-only fabric; a hostless island; bad options.
        let single = mesh(&[1], 3).unwrap();
        let bare = torus(&[3, 3], 0).unwrap();
        let mut b = TopologyBuilder::new("island");
        let s0 = b.add_switch("s0", 2);
        let s1 = b.add_switch("s1", 2);
        b.add_switch("lonely", 1);
        b.connect(s0, s1, LinkSpec::default()).unwrap();
        let h = b.add_host("h");
        b.connect(h, s0, LinkSpec::default()).unwrap();
        let island = b.build().unwrap();
        for t in [&single, &bare, &island] {
            for f in [up_down, prefix, descending_layers] {
                let r = f(t, &opts(2)).unwrap();
                assert!(deadlock::check(t, &r).unwrap().deadlock_free);
            }
        }
        assert!(up_down(&single, &RouteOptions { root: 5, ..opts(1) }).is_err());
        assert!(descending_layers(&single, &opts(0)).is_err());
        let empty = TopologyBuilder::new("empty").build().unwrap();
        assert!(up_down(&empty, &opts(1)).is_ok());
    }
}
