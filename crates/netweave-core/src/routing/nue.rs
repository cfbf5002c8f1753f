//! Nue: deadlock-free destination-based routing on any topology within any VC budget.
//!
//! Domke, Hoefler and Matsuoka, "Routing on the Dependency Graph: A New Approach to
//! Deadlock-Free High-Performance Routing" (HPDC 2016); OpenSM's `nue` engine. Instead of
//! routing first and breaking cycles afterwards (LASH, DFSSSP), Nue routes *inside* the
//! complete channel dependency graph (every turn a packet could take at a switch) and only
//! ever uses a dependency that keeps the graph acyclic, so the result is deadlock-free by
//! construction, with one VC or many.
//!
//! How this implementation works:
//!
//! 1. **Layers.** The destination switches are split into `k = min(max_vcs, #switches with
//!    hosts)` balanced sets, one per virtual layer (= VC). The default split is clustered:
//!    recursive bisection of the switch graph by BFS distance from a peripheral switch,
//!    balanced by host count — a cheap stand-in for the METIS partition Nue uses, which
//!    likewise keeps each layer's destinations close together (measured: shorter paths than
//!    round-robin, which [`NueParams`] also offers). A host is injected on its destination's
//!    layer ([`Injection::PerDestination`]); the VC never changes in the network.
//! 2. **Escape paths.** Per layer, a BFS spanning tree is rooted at a switch central to that
//!    layer's destinations (least eccentricity towards them: double sweep plus a short local
//!    search). The dependencies of tree routes (up, turn at the lowest common ancestor,
//!    down) towards the layer's destinations enter the layer's dependency graph first. They
//!    are acyclic (up channels deepest first, then down channels) and keep every destination
//!    reachable whatever else the layer holds.
//! 3. **Routing inside the dependency graph.** Each destination switch is routed by a
//!    Dijkstra outwards from it in which a switch `v` may attach to a settled neighbour `u`
//!    over channel `v→u` only if the dependency `(v→u) → (u's channel)` is in the layer's
//!    graph or can join it without closing a cycle. Acyclicity is kept online by a dynamic
//!    topological order (Pearce–Kelly, with a bidirectional search that stops early on a
//!    cycle and a Marchetti-Spaccamela shift when one side of the search grows large); a
//!    dependency found to close a cycle is blocked for good. Channel weights start at
//!    `hosts²` and grow by the number of source hosts each routed tree sends over a channel
//!    (SSSP-style), so paths stay short while load spreads; at equal weight an existing
//!    dependency beats a new one in order, which beats one that needs reordering.
//! 4. **Impasses.** When switches stay unreached, *local backtracking* moves a settled
//!    neighbour of an unreached switch to another next hop (ranked before it, so no loop)
//!    if all dependencies that needs fit, attaches the switch and resumes the search. What
//!    still stays unreached takes its escape route towards the destination, and so does
//!    every switch on that route; searched switches routing through them keep their channel
//!    if the dependency into the escape channel fits, and take their escape route otherwise.
//! 5. **Hosts of one switch.** The first host takes the searched routes; each further host
//!    of the same switch takes, switch by switch, any next hop no longer than the first
//!    host's path whose dependencies are already in the layer (and stay available to the
//!    switches behind it), chosen by [`RouteOptions::select`]. So co-located hosts spread
//!    over parallel paths at the cost of one search per switch, with no new dependency.
//! 6. **Parallelism.** Layers advance in lock-step rounds, one destination switch each per
//!    round, on all cores; loads are merged into the shared weights between rounds, so every
//!    search sees all earlier rounds' load and the result does not depend on the thread count.
//!    (Per-layer selection counters keep `Balanced` selection independent of it too.)
//!
//! [`RouteOptions::root`] does not apply (escape roots are chosen per layer); nothing is
//! random. Switches without hosts in a component of their own get no routes; hosts spread
//! over several components are an error naming the components.
//!
//! ```
//! use netweave_core::topology::grid::torus;
//! use netweave_core::routing::{deadlock, nue, RouteOptions};
//! let t = torus(&[4, 4], 1).unwrap();
//! let routes = nue::nue(&t, &RouteOptions { max_vcs: 1, ..Default::default() }).unwrap();
//! assert!(deadlock::check(&t, &routes).unwrap().deadlock_free);
//! ```

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::{NetweaveError, Result};
use crate::topology::fabric::SwitchFabric;
use crate::topology::{Port, Topology};

use rayon::prelude::*;

use super::minhop::hosts_by_switch;
use super::select::Selector;
use super::{Injection, RouteOptions, RoutingTable, VcPolicy, MAX_VCS};

/// "No channel / no switch" in the flat arrays.
const NONE: u32 = u32::MAX;
/// Dependency states in a layer's complete channel dependency graph.
const UNUSED: u8 = 0;
const USED: u8 = 1;
const BLOCKED: u8 = 2;
/// "No dependency" in [`Search::fresh`].
const NO_DEP: u64 = u64::MAX;

/// A dependency `c → d` packed for [`Search::fresh`].
#[inline]
fn dep(c: u32, d: u32) -> u64 {
    (c as u64) << 32 | d as u64
}

/// How destinations are split into virtual layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LayerPartition {
    /// Balanced recursive bisection by BFS distance: each layer's destinations are close
    /// together (Nue's METIS idea without METIS).
    #[default]
    Clustered,
    /// Destination switch `i` (in switch order among switches with hosts) goes to layer `i mod k`.
    RoundRobin,
}

/// Knobs of Nue beyond [`RouteOptions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NueParams {
    pub partition: LayerPartition,
}

/// What a Nue run did, for reports and tests.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NueStats {
    /// Virtual layers (VCs) used.
    pub layers: u8,
    /// Destination hosts routed.
    pub destinations: usize,
    /// Destination switches whose search left switches unreached even after backtracking
    /// (an impasse), repaired with escape paths.
    pub impasses: usize,
    /// Switch routes (summed over destinations) moved onto the escape tree by those repairs.
    pub escape_routes: usize,
    /// Unreached switches attached by local backtracking (moving a neighbour's next hop).
    pub backtracks: usize,
    /// Candidate dependencies refused because they would have closed a cycle.
    pub blocked_dependencies: usize,
    /// Dependencies in all layers' graphs at the end (escape dependencies included).
    pub dependencies: usize,
}

/// Route `topo` with Nue inside `options.max_vcs` virtual layers (default parameters).
///
/// Always deadlock-free; fails only on a fabric whose hosts lie in several components, a
/// host on no switch, or a VC budget outside `1..=16`.
pub fn nue(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    nue_with(topo, options, &NueParams::default()).map(|(table, _)| table)
}

/// Nue with explicit [`NueParams`], also returning [`NueStats`].
///
/// ```
/// use netweave_core::topology::grid::torus;
/// use netweave_core::routing::nue::{nue_with, LayerPartition, NueParams};
/// use netweave_core::routing::RouteOptions;
/// let t = torus(&[4, 4], 1).unwrap();
/// let params = NueParams { partition: LayerPartition::RoundRobin };
/// let (routes, stats) = nue_with(&t, &RouteOptions { max_vcs: 2, ..Default::default() }, &params).unwrap();
/// assert_eq!((stats.layers, routes.vc_policy().num_vcs), (2, 2));
/// ```
pub fn nue_with(topo: &Topology, options: &RouteOptions, params: &NueParams) -> Result<(RoutingTable, NueStats)> {
    if options.max_vcs == 0 || options.max_vcs > MAX_VCS {
        return crate::invalid!("nue: the VC budget must be 1..={MAX_VCS}, got {}", options.max_vcs);
    }
    let mut table = RoutingTable::new(topo, "nue");
    let mut stats = NueStats::default();
    if topo.num_hosts() == 0 {
        return Ok((table, stats));
    }
    let by_switch = hosts_by_switch(topo)?;
    let view = SwitchFabric::new(topo);
    let in_comp = main_component(topo, &view, &by_switch)?;
    let comp_size = in_comp.iter().filter(|&&b| b).count();
    let fab = Fabric::new(view)?;
    let graph: &SwitchFabric = &fab;
    let host_counts: Vec<u32> = by_switch.iter().map(|h| h.len() as u32).collect();

    let dest_switches: Vec<u32> = (0..fab.num_switches as u32).filter(|&s| !by_switch[s as usize].is_empty()).collect();
    let k = (options.max_vcs as usize).min(dest_switches.len()).max(1);
    let layer_of = match params.partition {
        LayerPartition::Clustered => clustered_partition(graph, &dest_switches, &host_counts, k),
        LayerPartition::RoundRobin => {
            let mut l = vec![u8::MAX; fab.num_switches];
            for (i, &s) in dest_switches.iter().enumerate() {
                l[s as usize] = (i % k) as u8;
            }
            l
        }
    };

    let layers: Vec<Vec<u32>> = (0..k as u8)
        .map(|l| dest_switches.iter().copied().filter(|&s| layer_of[s as usize] == l).collect::<Vec<u32>>())
        .filter(|d| !d.is_empty())
        .collect();
    let mut injection = vec![0u8; topo.num_hosts()];
    for (l, dests) in layers.iter().enumerate() {
        for &t in dests {
            for &h in &by_switch[t as usize] {
                injection[h] = l as u8;
            }
        }
    }
    // Layers advance in lock-step rounds, one destination switch each per round, in
    // parallel; between rounds every layer's load is added to the shared channel weights.
    // So each search sees the load of all destinations routed in earlier rounds (of every
    // layer), and the result does not depend on the number of threads.
    let num_hosts = topo.num_hosts() as u64;
    // Nue's initial weight: more than any load a channel can collect, so shorter paths win
    // and load only decides between paths of (nearly) equal length.
    let w0 = num_hosts.saturating_mul(num_hosts).max(1);
    let mut weights = vec![w0; fab.nc()];
    let ctx = LayerInput {
        fab: &fab,
        graph,
        by_switch: &by_switch,
        host_port: &fab.host_port,
        in_comp: &in_comp,
        comp_size,
    };

    let mut runs: Vec<LayerRun> =
        layers.par_iter().map(|dests| LayerRun::new(&ctx, dests, topo, options.select)).collect();
    let rounds = runs.iter().map(|r| r.dests.len()).max().unwrap_or(0);
    for round in 0..rounds {
        runs.par_iter_mut().for_each(|run| run.step(&ctx, round, &weights));
        for run in &mut runs {
            for &(c, load) in &run.delta {
                weights[c as usize] = weights[c as usize].saturating_add(load);
            }
            run.delta.clear();
        }
    }
    let per_layer: Vec<NueStats> = runs.into_iter().map(|run| run.finish(&mut table)).collect();
    for s in per_layer {
        stats.layers += 1;
        stats.destinations += s.destinations;
        stats.impasses += s.impasses;
        stats.escape_routes += s.escape_routes;
        stats.blocked_dependencies += s.blocked_dependencies;
        stats.dependencies += s.dependencies;
        stats.backtracks += s.backtracks;
    }
    table.set_vc_policy(VcPolicy {
        num_vcs: stats.layers.max(1),
        injection: Injection::PerDestination(injection),
        transitions: None,
    });
    Ok((table, stats))
}

/// What every layer reads.
struct LayerInput<'a> {
    fab: &'a Fabric,
    graph: &'a SwitchFabric,
    by_switch: &'a [Vec<usize>],
    host_port: &'a [Port],
    in_comp: &'a [bool],
    comp_size: usize,
}

/// One virtual layer being routed: its escape tree, dependency graph, search state and the
/// columns of the table it has produced.
///
/// The first host of a switch is routed by the search inside the dependency graph; its
/// siblings (further hosts on the same switch) take, switch by switch, any next hop that is
/// no longer than the first host's path and needs no new dependency, picked by the
/// selection policy — so hosts of one switch spread over parallel paths at the cost of one
/// search per switch.
struct LayerRun {
    /// Destination switches in routing order.
    dests: Vec<u32>,
    tree: Tree,
    layer: Layer,
    search: Search,
    selector: Selector,
    /// Routed columns (`ns` ports per destination host) and their host indices.
    cols: Vec<Port>,
    col_host: Vec<usize>,
    /// Load added to channels in the current round.
    delta: Vec<(u32, u64)>,
    stats: NueStats,
}

impl LayerRun {
    fn new(ctx: &LayerInput, dests: &[u32], topo: &Topology, select: super::Select) -> Self {
        let fab = ctx.fab;
        let mut bfs = BfsScratch::new(fab.num_switches);
        let mut tree = Tree::default();
        let root = layer_centre(ctx.graph, dests, &mut bfs);
        tree.build(fab, ctx.graph, root, &mut bfs);
        let mut layer = Layer::new(fab);
        layer.reset(fab, &tree, dests);
        // Route neighbouring destinations one after another (depth-first order of the
        // tree): their trees are alike, so the dependency order needs little repair.
        let rank = tree.preorder();
        let mut dests = dests.to_vec();
        dests.sort_unstable_by_key(|&s| rank[s as usize]);
        let num_hosts: usize = dests.iter().map(|&t| ctx.by_switch[t as usize].len()).sum();
        let search = Search::new(fab);
        LayerRun {
            dests,
            tree,
            layer,
            search,
            selector: Selector::new(topo, select),
            cols: vec![super::NO_PORT; num_hosts * fab.num_switches],
            col_host: Vec::with_capacity(num_hosts),
            delta: Vec::new(),
            stats: NueStats::default(),
        }
    }

    /// Route the hosts of this layer's `round`-th destination switch.
    fn step(&mut self, ctx: &LayerInput, round: usize, weights: &[u64]) {
        let Some(&t) = self.dests.get(round) else { return };
        let (fab, ns) = (ctx.fab, ctx.fab.num_switches);
        let (search, layer, stats) = (&mut self.search, &mut self.layer, &mut self.stats);
        let reached = search.search(ctx, layer, weights, t, stats);
        if reached < ctx.comp_size {
            stats.impasses += 1;
            stats.escape_routes += search.repair(fab, layer, &self.tree, t, ctx.in_comp, stats);
        }
        search.keep_base(fab);
        for (local, &h) in ctx.by_switch[t as usize].iter().enumerate() {
            stats.destinations += 1;
            if local == 0 {
                for &v in &search.order[1..] {
                    self.selector.record(v as usize, fab.port[search.chan[v as usize] as usize]);
                }
            } else {
                search.sibling(fab, layer, t, local, &mut self.selector);
            }
            search.add_load(fab, &mut self.delta, t);
            let k = self.col_host.len();
            let col = &mut self.cols[k * ns..(k + 1) * ns];
            for &v in &search.order[1..] {
                col[v as usize] = fab.port[search.chan[v as usize] as usize];
            }
            col[t as usize] = ctx.host_port[h];
            self.col_host.push(h);
        }
    }

    /// Write the layer's columns into the switch-major table, transposing in cache-sized
    /// blocks, and return its statistics.
    fn finish(mut self, table: &mut RoutingTable) -> NueStats {
        let ns = self.search.settled.len();
        self.stats.dependencies = self.layer.state.iter().filter(|&&s| s == USED).count();
        let mut by_host: Vec<(usize, usize)> = self.col_host.iter().enumerate().map(|(k, &h)| (h, k)).collect();
        by_host.sort_unstable();
        const BLOCK: usize = 256;
        for lo in (0..ns).step_by(BLOCK) {
            let hi = (lo + BLOCK).min(ns);
            for &(h, k) in &by_host {
                for v in lo..hi {
                    table.set_out_port(v, h, self.cols[k * ns + v]);
                }
            }
        }
        self.stats
    }
}

/// The shared [`SwitchFabric`] (reached through `Deref`) and the slots of the complete channel
/// dependency graph: dependency `c → d` (d leaving the switch c enters) is slot
/// `edge_base[c] + pos[d]`.
struct Fabric {
    view: SwitchFabric,
    /// Position of a channel among its sender's out-channels.
    pos: Vec<u32>,
    edge_base: Vec<usize>,
}

impl std::ops::Deref for Fabric {
    type Target = SwitchFabric;
    fn deref(&self) -> &SwitchFabric {
        &self.view
    }
}

impl Fabric {
    fn new(view: SwitchFabric) -> Result<Self> {
        let nc = view.num_channels();
        let pos: Vec<u32> = (0..nc).map(|c| c as u32 - view.out_start[view.tail[c] as usize]).collect();
        let mut edge_base = Vec::with_capacity(nc + 1);
        let mut acc = 0usize;
        for &h in &view.head {
            edge_base.push(acc);
            acc += view.out_degree(h as usize);
        }
        edge_base.push(acc);
        if acc > u32::MAX as usize {
            return Err(NetweaveError::Routing(format!(
                "nue: the complete channel dependency graph would have {acc} dependencies per layer, \
                 more than it can hold (at most {})",
                u32::MAX
            )));
        }
        Ok(Fabric { view, pos, edge_base })
    }

    fn nc(&self) -> usize {
        self.view.num_channels()
    }

    fn out(&self, v: u32) -> std::ops::Range<u32> {
        self.out_start[v as usize]..self.out_start[v as usize + 1]
    }

    /// Slot of dependency `c → d` (requires `tail[c] == head[d]`).
    #[inline]
    fn edge(&self, c: u32, d: u32) -> usize {
        self.edge_base[c as usize] + self.pos[d as usize] as usize
    }
}

/// Switches of the component holding the hosts; an error naming the components when hosts
/// sit in more than one.
fn main_component(topo: &Topology, graph: &SwitchFabric, by_switch: &[Vec<usize>]) -> Result<Vec<bool>> {
    let ns = graph.len();
    let mut comp = vec![u32::MAX; ns];
    let mut members: Vec<Vec<u32>> = Vec::new();
    let mut queue = Vec::new();
    for s in 0..ns {
        if comp[s] != u32::MAX {
            continue;
        }
        let id = members.len() as u32;
        let mut list = vec![s as u32];
        comp[s] = id;
        queue.clear();
        queue.push(s as u32);
        while let Some(v) = queue.pop() {
            for &u in graph.neighbors(v as usize) {
                if comp[u as usize] == u32::MAX {
                    comp[u as usize] = id;
                    list.push(u);
                    queue.push(u);
                }
            }
        }
        members.push(list);
    }
    let with_hosts: Vec<usize> =
        (0..members.len()).filter(|&c| members[c].iter().any(|&s| !by_switch[s as usize].is_empty())).collect();
    if with_hosts.len() > 1 {
        let mut names: Vec<String> = with_hosts
            .iter()
            .take(6)
            .map(|&c| {
                let mut m = members[c].clone();
                m.sort_unstable();
                let shown: Vec<&str> = m.iter().take(4).map(|&s| topo.label(topo.switches()[s as usize])).collect();
                let more = if m.len() > 4 { ", …" } else { "" };
                format!("{{{}{more}}} ({} switches)", shown.join(", "), m.len())
            })
            .collect();
        if with_hosts.len() > 6 {
            names.push(format!("and {} more", with_hosts.len() - 6));
        }
        return Err(NetweaveError::Routing(format!(
            "nue needs a connected fabric, but its hosts sit in {} components: {}",
            with_hosts.len(),
            names.join(", ")
        )));
    }
    let main = with_hosts.first().copied().unwrap_or(0) as u32;
    Ok(comp.iter().map(|&c| c == main).collect())
}

/// Reusable BFS buffers over the switch graph.
struct BfsScratch {
    dist: Vec<u32>,
    other: Vec<u32>,
    queue: Vec<u32>,
}

impl BfsScratch {
    fn new(ns: usize) -> Self {
        BfsScratch { dist: vec![u32::MAX; ns], other: vec![u32::MAX; ns], queue: Vec::with_capacity(ns) }
    }
}

/// The member of `set` farthest from the last BFS (lowest index on ties).
fn farthest(dist: &[u32], set: &[u32]) -> u32 {
    let mut best = set[0];
    for &s in set {
        if dist[s as usize] != u32::MAX && dist[s as usize] > dist[best as usize] {
            best = s;
        }
    }
    best
}

/// Split the destination switches into `k` balanced, spatially compact layers by recursive
/// bisection: sort a part by BFS distance from one of its peripheral members and cut it
/// where the host weight reaches the share of the first half's layers.
fn clustered_partition(graph: &SwitchFabric, dests: &[u32], hosts: &[u32], k: usize) -> Vec<u8> {
    let mut layer_of = vec![u8::MAX; graph.len()];
    let mut bfs = BfsScratch::new(graph.len());
    let mut work: Vec<(Vec<u32>, usize, usize)> = vec![(dests.to_vec(), k, 0)];
    while let Some((mut part, parts, first)) = work.pop() {
        if parts <= 1 || part.len() <= 1 {
            for &s in &part {
                layer_of[s as usize] = first as u8;
            }
            continue;
        }
        graph.bfs(part[0] as usize, &mut bfs.dist, &mut bfs.queue);
        let a = farthest(&bfs.dist, &part);
        graph.bfs(a as usize, &mut bfs.dist, &mut bfs.queue);
        let dist = &bfs.dist;
        part.sort_unstable_by_key(|&s| (dist[s as usize], s));
        let left_parts = parts / 2;
        let total: u64 = part.iter().map(|&s| hosts[s as usize] as u64).sum();
        let target = total * left_parts as u64 / parts as u64;
        let mut acc = 0u64;
        let mut cut = 0;
        while cut < part.len() && acc + (hosts[part[cut] as usize] as u64) / 2 < target {
            acc += hosts[part[cut] as usize] as u64;
            cut += 1;
        }
        let cut = cut.clamp(left_parts, part.len() - (parts - left_parts));
        let right = part.split_off(cut);
        work.push((right, parts - left_parts, first + left_parts));
        work.push((part, left_parts, first));
    }
    layer_of
}

/// A switch central to `dests`: least eccentricity towards them (then least distance sum),
/// from the middle of a double-sweep diameter path improved by a bounded local search.
fn layer_centre(graph: &SwitchFabric, dests: &[u32], bfs: &mut BfsScratch) -> u32 {
    graph.bfs(dests[0] as usize, &mut bfs.dist, &mut bfs.queue);
    let a = farthest(&bfs.dist, dests);
    graph.bfs(a as usize, &mut bfs.other, &mut bfs.queue);
    let b = farthest(&bfs.other, dests);
    graph.bfs(b as usize, &mut bfs.dist, &mut bfs.queue);
    let d = bfs.other[b as usize];
    let (from_a, from_b) = (&bfs.other, &bfs.dist);
    let mut cur =
        (0..graph.len() as u32).find(|&m| from_a[m as usize] == d / 2 && from_b[m as usize] == d - d / 2).unwrap_or(a);
    let eval = |v: u32, bfs: &mut BfsScratch| {
        graph.bfs(v as usize, &mut bfs.dist, &mut bfs.queue);
        let mut ecc = 0u32;
        let mut sum = 0u64;
        for &t in dests {
            ecc = ecc.max(bfs.dist[t as usize]);
            sum += bfs.dist[t as usize] as u64;
        }
        (ecc, sum)
    };
    let mut best = eval(cur, bfs);
    // A few rounds suffice: the start is already near the middle of a longest path.
    for _ in 0..6 {
        let mut next = None;
        for &n in graph.neighbors(cur as usize) {
            let score = eval(n, bfs);
            if score < best {
                best = score;
                next = Some(n);
            }
        }
        match next {
            Some(n) => cur = n,
            None => break,
        }
    }
    cur
}

/// The escape spanning tree of one layer.
#[derive(Default)]
struct Tree {
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
    fn build(&mut self, fab: &Fabric, graph: &SwitchFabric, root: u32, bfs: &mut BfsScratch) {
        let ns = fab.num_switches;
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
            for c in fab.out(v) {
                let p = fab.head[c as usize];
                if self.depth[p as usize] + 1 == dv
                    && (pick == NONE || nchild[p as usize] < nchild[fab.head[pick as usize] as usize])
                {
                    pick = c;
                }
            }
            self.parent_ch[v as usize] = pick;
            nchild[fab.head[pick as usize] as usize] += 1;
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
                let p = fab.head[pc as usize] as usize;
                self.children[fill[p] as usize] = v;
                fill[p] += 1;
            }
        }
    }

    /// Depth-first preorder rank of every switch (`u32::MAX` outside the tree).
    fn preorder(&self) -> Vec<u32> {
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

    fn parent(&self, fab: &Fabric, v: u32) -> u32 {
        let pc = self.parent_ch[v as usize];
        if pc == NONE {
            NONE
        } else {
            fab.head[pc as usize]
        }
    }

    fn children(&self, v: u32) -> &[u32] {
        &self.children[self.child_off[v as usize] as usize..self.child_off[v as usize + 1] as usize]
    }
}

/// One virtual layer's complete channel dependency graph: dependency states, the used
/// dependencies as successor and predecessor bit masks per channel (so searches touch only
/// used dependencies), and a topological order of them (Pearce–Kelly).
struct Layer {
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

impl Layer {
    fn new(fab: &Fabric) -> Self {
        let max_deg = (0..fab.num_switches).map(|v| fab.out_start[v + 1] - fab.out_start[v]).max().unwrap_or(0) as usize;
        let words = max_deg.div_ceil(64).max(1);
        Layer {
            state: vec![UNUSED; *fab.edge_base.last().unwrap_or(&0)],
            words,
            succ: vec![0; fab.nc() * words],
            pred: vec![0; fab.nc() * words],
            ord: vec![0; fab.nc()],
            at: vec![0; fab.nc()],
        }
    }

    /// Mark dependency `c → d` used (its slot must not be blocked).
    #[inline]
    fn use_dep(&mut self, fab: &Fabric, c: u32, d: u32) {
        self.state[fab.edge(c, d)] = USED;
        let j = fab.pos[d as usize] as usize;
        self.succ[c as usize * self.words + j / 64] |= 1 << (j % 64);
        let i = fab.pos[fab.rev[c as usize] as usize] as usize;
        self.pred[d as usize * self.words + i / 64] |= 1 << (i % 64);
    }

    /// Withdraw dependency `c → d`; removing an edge never invalidates the order.
    #[inline]
    fn drop_dep(&mut self, fab: &Fabric, c: u32, d: u32) {
        self.state[fab.edge(c, d)] = UNUSED;
        let j = fab.pos[d as usize] as usize;
        self.succ[c as usize * self.words + j / 64] &= !(1 << (j % 64));
        let i = fab.pos[fab.rev[c as usize] as usize] as usize;
        self.pred[d as usize * self.words + i / 64] &= !(1 << (i % 64));
    }

    /// Clear the layer, load the escape dependencies towards `dests` and a topological order
    /// consistent with them: up channels deepest first, then the rest, then down channels
    /// shallowest first.
    fn reset(&mut self, fab: &Fabric, tree: &Tree, dests: &[u32]) {
        self.state.fill(UNUSED);
        self.succ.fill(0);
        self.pred.fill(0);
        let nc = fab.nc();
        let maxd = tree.depth.iter().filter(|&&d| d != u32::MAX).max().copied().unwrap_or(0) as u64;
        let mut key = vec![1u64 << 40; nc];
        for v in 0..fab.num_switches {
            let pc = tree.parent_ch[v];
            if pc != NONE {
                let d = tree.depth[v] as u64;
                key[pc as usize] = maxd - d;
                key[fab.rev[pc as usize] as usize] = (2u64 << 40) + d;
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
        for v in 0..fab.num_switches as u32 {
            let pc = tree.parent_ch[v as usize];
            if pc == NONE {
                continue;
            }
            let ppc = tree.parent_ch[fab.head[pc as usize] as usize];
            if ppc != NONE {
                self.use_dep(fab, pc, ppc);
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
                let down = fab.rev[pc as usize];
                if done[down as usize] {
                    break;
                }
                done[down as usize] = true;
                let p = fab.head[pc as usize];
                let ppc = tree.parent_ch[p as usize];
                if ppc != NONE {
                    self.use_dep(fab, fab.rev[ppc as usize], down);
                }
                for &y in tree.children(p) {
                    if y != x {
                        self.use_dep(fab, tree.parent_ch[y as usize], down);
                    }
                }
                x = p;
            }
        }
    }
}

/// Per-destination search state, reused for every destination (no allocation per search).
struct Search {
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
    // Pearce–Kelly scratch.
    mark: Vec<u32>,
    epoch: u32,
    /// Forward and backward search lists (channels while searching, then `ord << 32 | channel`).
    fwd: Vec<u64>,
    bwd: Vec<u64>,
}

impl Search {
    fn new(fab: &Fabric) -> Self {
        let (ns, nc) = (fab.num_switches, fab.nc());
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
            mark: vec![0; nc],
            epoch: 0,
            fwd: Vec::new(),
            bwd: Vec::new(),
        }
    }

    /// Route every switch towards switch `t` inside the layer's dependency graph; returns
    /// how many switches were reached (`t` included).
    fn dijkstra(&mut self, fab: &Fabric, layer: &mut Layer, w: &[u64], t: u32, stats: &mut NueStats) -> usize {
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
        self.relax(fab, layer, w, t);
        self.resume(fab, layer, w, stats)
    }

    /// Run the search until the heap is empty; returns how many switches are reached.
    fn resume(&mut self, fab: &Fabric, layer: &mut Layer, w: &[u64], stats: &mut NueStats) -> usize {
        while let Some(Reverse((key, c))) = self.heap.pop() {
            let v = fab.tail[c as usize];
            if self.settled[v as usize] || self.best_ch[v as usize] != c || self.best_key[v as usize] != key {
                continue;
            }
            let u = fab.head[c as usize];
            let cu = self.chan[u as usize];
            if cu != NONE {
                let e = fab.edge(c, cu);
                match layer.state[e] {
                    USED => {}
                    BLOCKED => {
                        self.reoffer(fab, layer, w, v);
                        continue;
                    }
                    _ => {
                        if self.try_insert(fab, layer, c, cu) {
                            layer.use_dep(fab, c, cu);
                            self.fresh[v as usize] = dep(c, cu);
                        } else {
                            layer.state[e] = BLOCKED;
                            stats.blocked_dependencies += 1;
                            self.reoffer(fab, layer, w, v);
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
            self.relax(fab, layer, w, v);
        }
        self.order.len()
    }

    /// The search towards `t` with local backtracking: whenever the heap runs dry before
    /// every switch of the component is reached, try to attach one unreached switch by
    /// moving a settled neighbour to another next hop ([`backtrack`](Self::backtrack)) and
    /// continue from it. Returns how many switches were reached.
    fn search(&mut self, ctx: &LayerInput, layer: &mut Layer, w: &[u64], t: u32, stats: &mut NueStats) -> usize {
        let fab = ctx.fab;
        let mut reached = self.dijkstra(fab, layer, w, t, stats);
        while reached < ctx.comp_size {
            let mut progress = false;
            for x in 0..fab.num_switches as u32 {
                if ctx.in_comp[x as usize] && !self.settled[x as usize] && self.backtrack(fab, layer, w, x, stats) {
                    stats.backtracks += 1;
                    progress = true;
                    break;
                }
            }
            if !progress {
                break;
            }
            reached = self.resume(fab, layer, w, stats);
        }
        reached
    }

    /// Make dependency `c → d` part of the layer: `Some(true)` if it was added now,
    /// `Some(false)` if it was there, `None` if it would close a cycle (then it is marked
    /// blocked if `may_block`, i.e. if no trial dependency could be to blame).
    fn ensure(
        &mut self,
        fab: &Fabric,
        layer: &mut Layer,
        c: u32,
        d: u32,
        may_block: bool,
        stats: &mut NueStats,
    ) -> Option<bool> {
        let e = fab.edge(c, d);
        match layer.state[e] {
            USED => Some(false),
            BLOCKED => None,
            _ => {
                if self.try_insert(fab, layer, c, d) {
                    layer.use_dep(fab, c, d);
                    Some(true)
                } else {
                    if may_block {
                        layer.state[e] = BLOCKED;
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
    fn backtrack(&mut self, fab: &Fabric, layer: &mut Layer, w: &[u64], x: u32, stats: &mut NueStats) -> bool {
        for cx in fab.out(x) {
            let a = fab.head[cx as usize];
            let old = self.chan[a as usize];
            if !self.settled[a as usize] || old == NONE {
                continue;
            }
            'next: for ca in fab.out(a) {
                let b = fab.head[ca as usize];
                if ca == old || !self.settled[b as usize] || self.rank[b as usize] >= self.rank[a as usize] {
                    continue;
                }
                let cb = self.chan[b as usize];
                if (cb != NONE && layer.state[fab.edge(ca, cb)] == BLOCKED) || layer.state[fab.edge(cx, ca)] == BLOCKED
                {
                    continue;
                }
                self.kids.clear();
                for o in fab.out(a) {
                    let s = fab.head[o as usize];
                    let cs = fab.rev[o as usize];
                    if self.settled[s as usize] && self.chan[s as usize] == cs {
                        if layer.state[fab.edge(cs, ca)] == BLOCKED {
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
                    match self.ensure(fab, layer, c, d, self.trial.is_empty(), stats) {
                        Some(true) => self.trial.push(dep(c, d)),
                        Some(false) => {}
                        None => ok = false,
                    }
                }
                if !ok {
                    for &dd in &self.trial {
                        layer.drop_dep(fab, (dd >> 32) as u32, dd as u32);
                    }
                    continue;
                }
                // Commit: withdraw what only the old channel needed, record what is new.
                let is_new = |trial: &[u64], dd: u64| if trial.contains(&dd) { dd } else { NO_DEP };
                if self.fresh[a as usize] != NO_DEP {
                    let f = self.fresh[a as usize];
                    layer.drop_dep(fab, (f >> 32) as u32, f as u32);
                }
                self.fresh[a as usize] = if cb == NONE { NO_DEP } else { is_new(&self.trial, dep(ca, cb)) };
                for i in 0..self.kids.len() {
                    let s = self.kids[i];
                    if self.fresh[s as usize] != NO_DEP {
                        let f = self.fresh[s as usize];
                        layer.drop_dep(fab, (f >> 32) as u32, f as u32);
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
                self.relax(fab, layer, w, x);
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
    fn candidate(&self, fab: &Fabric, layer: &Layer, w: &[u64], c: u32, u: u32) -> Option<u64> {
        let cu = self.chan[u as usize];
        let tier = if cu == NONE {
            0
        } else {
            match layer.state[fab.edge(c, cu)] {
                BLOCKED => return None,
                USED => 0,
                _ if layer.ord[c as usize] < layer.ord[cu as usize] => 1,
                _ => 2,
            }
        };
        Some(self.dist[u as usize].saturating_add(w[c as usize]).saturating_mul(4) | tier)
    }

    /// Offer every unsettled neighbour of newly settled `u` the channel into `u`.
    fn relax(&mut self, fab: &Fabric, layer: &Layer, w: &[u64], u: u32) {
        for o in fab.out(u) {
            let c = fab.rev[o as usize];
            let v = fab.head[o as usize];
            if self.settled[v as usize] {
                continue;
            }
            if let Some(key) = self.candidate(fab, layer, w, c, u) {
                if key < self.best_key[v as usize] {
                    self.best_key[v as usize] = key;
                    self.best_ch[v as usize] = c;
                    self.heap.push(Reverse((key, c)));
                }
            }
        }
    }

    /// `v`'s best candidate failed: offer it the best remaining channel into a settled switch.
    fn reoffer(&mut self, fab: &Fabric, layer: &Layer, w: &[u64], v: u32) {
        self.best_key[v as usize] = u64::MAX;
        self.best_ch[v as usize] = NONE;
        for c in fab.out(v) {
            let u = fab.head[c as usize];
            if !self.settled[u as usize] {
                continue;
            }
            if let Some(key) = self.candidate(fab, layer, w, c, u) {
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

    /// Pearce–Kelly: can dependency `x → y` join the layer's graph without a cycle? If so,
    /// repair the topological order (the caller marks the dependency used).
    ///
    /// Only channels ordered between y and x can lie on a path y ⇝ x. The forward search
    /// from y and the backward search from x advance in turns, breadth-first: they meet on a
    /// cycle (dependency cycles are short, so usually soon), and once either is exhausted
    /// without meeting, there is none and the other is completed for the reordering.
    fn try_insert(&mut self, fab: &Fabric, layer: &mut Layer, x: u32, y: u32) -> bool {
        let ub = layer.ord[x as usize];
        let lb = layer.ord[y as usize];
        if ub < lb {
            return true;
        }
        if self.epoch >= u32::MAX - 2 {
            self.mark.fill(0);
            self.epoch = 0;
        }
        self.epoch += 2;
        let (ef, eb) = (self.epoch - 1, self.epoch);
        self.fwd.clear();
        self.fwd.push(y as u64);
        self.mark[y as usize] = ef;
        self.bwd.clear();
        self.bwd.push(x as u64);
        self.mark[x as usize] = eb;
        let (mut hf, mut hb) = (0, 0);
        // Expand the side with the smaller queue (the usual bidirectional-search balance).
        while hf < self.fwd.len() && hb < self.bwd.len() {
            let met = if self.fwd.len() - hf <= self.bwd.len() - hb {
                let c = self.fwd[hf] as u32;
                hf += 1;
                self.expand_forward(fab, layer, c, ub, ef, eb)
            } else {
                let c = self.bwd[hb] as u32;
                hb += 1;
                self.expand_backward(fab, layer, c, lb, ef, eb)
            };
            if met {
                return false;
            }
        }
        // No cycle. Pearce–Kelly needs both searches complete; if the unfinished one grows
        // past an eighth of the span, shifting the span (a sequential pass) around the
        // finished side is cheaper (Marchetti-Spaccamela et al.).
        let limit = self.fwd.len() + self.bwd.len() + (ub - lb) as usize / 8;
        if hf == self.fwd.len() {
            while hb < self.bwd.len() {
                if self.fwd.len() + self.bwd.len() > limit {
                    self.shift_after(layer, lb, ub, ef);
                    return true;
                }
                let c = self.bwd[hb] as u32;
                hb += 1;
                self.expand_backward(fab, layer, c, lb, ef, eb);
            }
        } else {
            while hf < self.fwd.len() {
                if self.fwd.len() + self.bwd.len() > limit {
                    self.shift_before(layer, lb, ub, eb);
                    return true;
                }
                let c = self.fwd[hf] as u32;
                hf += 1;
                self.expand_forward(fab, layer, c, ub, ef, eb);
            }
        }
        // Reassign the affected positions: everything reaching x, then everything y reaches.
        // Entries are packed `ord << 32 | channel`, so sorting needs no indirection and the
        // freed positions are a merge of the two sorted lists.
        let ord = &mut layer.ord;
        for list in [&mut self.fwd, &mut self.bwd] {
            for c in list.iter_mut() {
                *c |= (ord[*c as usize] as u64) << 32;
            }
            list.sort_unstable();
        }
        let (f, b) = (&self.fwd, &self.bwd);
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
            layer.at[slot as usize] = c;
        }
        true
    }

    /// Reorder positions `lb..=ub` so the complete forward set (marked `ef`: everything y
    /// reaches there) follows all other channels of the span, each part in its old order.
    fn shift_after(&mut self, layer: &mut Layer, lb: u32, ub: u32, ef: u32) {
        for c in self.fwd.iter_mut() {
            *c = (layer.ord[*c as usize] as u64) << 32 | (*c & 0xffff_ffff);
        }
        self.fwd.sort_unstable();
        let mut w = lb;
        for p in lb..=ub {
            let c = layer.at[p as usize];
            if self.mark[c as usize] != ef {
                layer.at[w as usize] = c;
                layer.ord[c as usize] = w;
                w += 1;
            }
        }
        for &f in &self.fwd {
            layer.at[w as usize] = f as u32;
            layer.ord[f as u32 as usize] = w;
            w += 1;
        }
    }

    /// Reorder positions `lb..=ub` so the complete backward set (marked `eb`: everything
    /// that reaches x there) precedes all other channels of the span, each part in its old
    /// order.
    fn shift_before(&mut self, layer: &mut Layer, lb: u32, ub: u32, eb: u32) {
        for c in self.bwd.iter_mut() {
            *c = (layer.ord[*c as usize] as u64) << 32 | (*c & 0xffff_ffff);
        }
        self.bwd.sort_unstable();
        let mut w = ub + 1;
        for p in (lb..=ub).rev() {
            let c = layer.at[p as usize];
            if self.mark[c as usize] != eb {
                w -= 1;
                layer.at[w as usize] = c;
                layer.ord[c as usize] = w;
            }
        }
        for (i, &b) in self.bwd.iter().enumerate() {
            layer.at[lb as usize + i] = b as u32;
            layer.ord[b as u32 as usize] = lb + i as u32;
        }
    }

    /// Queue the unvisited successors of `c` ordered before `ub`; true if one was reached by
    /// the backward search (a cycle).
    #[inline]
    fn expand_forward(&mut self, fab: &Fabric, layer: &Layer, c: u32, ub: u32, ef: u32, eb: u32) -> bool {
        let words = layer.words;
        let o = fab.out_start[fab.head[c as usize] as usize];
        for w in 0..words {
            let mut bits = layer.succ[c as usize * words + w];
            while bits != 0 {
                let d = o + (w * 64) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                let m = self.mark[d as usize];
                if m == eb {
                    return true;
                }
                if m != ef && layer.ord[d as usize] < ub {
                    self.mark[d as usize] = ef;
                    self.fwd.push(d as u64);
                }
            }
        }
        false
    }

    /// Queue the unvisited predecessors of `c` ordered after `lb`; true if one was reached by
    /// the forward search (a cycle).
    #[inline]
    fn expand_backward(&mut self, fab: &Fabric, layer: &Layer, c: u32, lb: u32, ef: u32, eb: u32) -> bool {
        let words = layer.words;
        let o = fab.out_start[fab.tail[c as usize] as usize];
        for w in 0..words {
            let mut bits = layer.pred[c as usize * words + w];
            while bits != 0 {
                let b = fab.rev[(o + (w * 64) as u32 + bits.trailing_zeros()) as usize];
                bits &= bits - 1;
                let m = self.mark[b as usize];
                if m == ef {
                    return true;
                }
                if m != eb && layer.ord[b as usize] > lb {
                    self.mark[b as usize] = eb;
                    self.bwd.push(b as u64);
                }
            }
        }
        false
    }

    /// Repair an impasse: every unreached switch takes its escape route towards `t`, and so
    /// does every switch on that route (the escape region stays closed under "next hop", so
    /// it needs only escape dependencies). A searched switch whose next hop moved into the
    /// region keeps its channel if the dependency into the next hop's escape channel fits the
    /// layer's graph, and joins the region otherwise. Dependencies of rerouted switches are
    /// withdrawn. Returns how many switches were rerouted.
    fn repair(
        &mut self,
        fab: &Fabric,
        layer: &mut Layer,
        tree: &Tree,
        t: u32,
        in_comp: &[bool],
        stats: &mut NueStats,
    ) -> usize {
        self.escape_channels(fab, tree, t);
        // Children in the search tree (CSR), by the channels the search chose; `work` serves
        // as the fill cursor per parent.
        self.child_off.fill(0);
        for &v in &self.order[1..] {
            self.child_off[fab.head[self.chan[v as usize] as usize] as usize + 1] += 1;
        }
        for i in 0..fab.num_switches {
            self.child_off[i + 1] += self.child_off[i];
        }
        self.child.clear();
        self.child.resize(self.order.len() - 1, NONE);
        self.work.clear();
        self.work.extend_from_slice(&self.child_off[..fab.num_switches]);
        for &v in &self.order[1..] {
            let p = fab.head[self.chan[v as usize] as usize] as usize;
            self.child[self.work[p] as usize] = v;
            self.work[p] += 1;
        }
        self.work.clear();
        self.in_f.fill(false);
        self.in_f[t as usize] = true;
        let mut moved = 0;
        for v in 0..fab.num_switches as u32 {
            if in_comp[v as usize] && !self.settled[v as usize] {
                moved += self.join(fab, layer, v);
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
                let e = fab.edge(cs, cx);
                let old = self.fresh[s as usize];
                if old != NO_DEP && old != dep(cs, cx) {
                    // The old dependency led into x's abandoned channel.
                    layer.drop_dep(fab, (old >> 32) as u32, old as u32);
                    self.fresh[s as usize] = NO_DEP;
                }
                let keep = match layer.state[e] {
                    USED => true,
                    BLOCKED => false,
                    _ => {
                        if self.try_insert(fab, layer, cs, cx) {
                            layer.use_dep(fab, cs, cx);
                            self.fresh[s as usize] = dep(cs, cx);
                            true
                        } else {
                            layer.state[e] = BLOCKED;
                            stats.blocked_dependencies += 1;
                            false
                        }
                    }
                };
                if !keep {
                    moved += self.join(fab, layer, s);
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
            for o in fab.out(u) {
                let v = fab.head[o as usize];
                if v != t && self.chan[v as usize] == fab.rev[o as usize] {
                    self.order.push(v);
                }
            }
        }
        moved
    }

    /// Move `v` and the rest of its escape route into the escape region; returns how many
    /// switches changed region.
    fn join(&mut self, fab: &Fabric, layer: &mut Layer, v: u32) -> usize {
        let mut y = v;
        let mut moved = 0;
        while !self.in_f[y as usize] {
            self.in_f[y as usize] = true;
            let old = self.fresh[y as usize];
            if old != NO_DEP {
                layer.drop_dep(fab, (old >> 32) as u32, old as u32);
                self.fresh[y as usize] = NO_DEP;
            }
            self.settled[y as usize] = true;
            self.chan[y as usize] = self.esc[y as usize];
            self.work.push(y);
            moved += 1;
            y = fab.head[self.esc[y as usize] as usize];
        }
        moved
    }

    /// Escape-tree channel of every switch towards `t` (up to the common ancestor, then down).
    fn escape_channels(&mut self, fab: &Fabric, tree: &Tree, t: u32) {
        self.esc.fill(NONE);
        self.work.clear();
        self.work.push(t);
        let mut head = 0;
        while head < self.work.len() {
            let y = self.work[head];
            head += 1;
            let p = tree.parent(fab, y);
            if p != NONE && p != t && self.esc[p as usize] == NONE {
                self.esc[p as usize] = fab.rev[tree.parent_ch[y as usize] as usize];
                self.work.push(p);
            }
            for &x in tree.children(y) {
                if x != t && self.esc[x as usize] == NONE {
                    self.esc[x as usize] = tree.parent_ch[x as usize];
                    self.work.push(x);
                }
            }
        }
    }

    /// Remember the routes just computed as the first host's (`base`): ranks in `order`,
    /// hop counts, and each switch's children on those routes (CSR in `child_off`/`child`).
    fn keep_base(&mut self, fab: &Fabric) {
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
            let u = fab.head[self.base[v as usize] as usize];
            self.hop_base[v as usize] = self.hop_base[u as usize] + 1;
            self.child_off[u as usize + 1] += 1;
        }
        for i in 0..fab.num_switches {
            self.child_off[i + 1] += self.child_off[i];
        }
        self.child.clear();
        self.child.resize(self.order.len() - 1, NONE);
        self.work.clear();
        self.work.extend_from_slice(&self.child_off[..fab.num_switches]);
        for &v in &self.order[1..] {
            let u = fab.head[self.base[v as usize] as usize] as usize;
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
            for c in fab.out(v) {
                let u = fab.head[c as usize];
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
    fn sibling(&mut self, fab: &Fabric, layer: &Layer, t: u32, local: usize, selector: &mut Selector) {
        for i in 1..self.order.len() {
            let v = self.order[i];
            let limit = self.hop_base[v as usize];
            let kids = self.child_off[v as usize] as usize..self.child_off[v as usize + 1] as usize;
            self.cand.clear();
            self.cand_ports.clear();
            for f in self.feas_off[i]..self.feas_off[i + 1] {
                let c = self.feas[f as usize];
                let u = fab.head[c as usize];
                if self.hop[u as usize] + 1 > limit {
                    continue;
                }
                if u != t && layer.state[fab.edge(c, self.chan[u as usize])] != USED {
                    continue;
                }
                if self.child[kids.clone()].iter().any(|&k| layer.state[fab.edge(self.base[k as usize], c)] != USED) {
                    continue;
                }
                self.cand.push(c);
                self.cand_ports.push(fab.port[c as usize]);
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
            self.hop[v as usize] = self.hop[fab.head[c as usize] as usize] + 1;
        }
    }

    /// Record for each channel of the routed tree the number of source hosts it carries.
    fn add_load(&mut self, fab: &Fabric, delta: &mut Vec<(u32, u64)>, t: u32) {
        for &v in &self.order {
            self.acc[v as usize] = fab.host_count(v as usize);
        }
        for &v in self.order.iter().rev() {
            if v == t {
                continue;
            }
            let c = self.chan[v as usize];
            let load = self.acc[v as usize];
            delta.push((c, load));
            self.acc[fab.head[c as usize] as usize] += load;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{deadlock, metrics::route_metrics};
    use crate::topology::dragonfly::{dragonfly, GlobalArrangement};
    use crate::topology::fat_tree::{fat_tree, k_ary_n_tree};
    use crate::topology::grid::{hypercube, hyperx, mesh, torus};
    use crate::topology::lsft::latin_square_fat_tree;
    use crate::topology::random::{irregular, random_regular};
    use crate::topology::{LinkSpec, TopologyBuilder};

    fn opts(max_vcs: u8) -> RouteOptions {
        RouteOptions { max_vcs, ..Default::default() }
    }

    /// Deadlock-free, every pair delivered, VC count within budget; returns the stats.
    fn check_all(topo: &Topology, max_vcs: u8, params: NueParams) -> (RoutingTable, NueStats) {
        let (r, stats) = nue_with(topo, &opts(max_vcs), &params).unwrap();
        let rep = deadlock::check(topo, &r).unwrap_or_else(|e| panic!("{} vcs={max_vcs}: {e}", topo.name()));
        assert!(rep.deadlock_free, "{} vcs={max_vcs}: cycle {:?}", topo.name(), rep.cycle);
        assert!(rep.vcs_used <= max_vcs && r.vc_policy().num_vcs <= max_vcs);
        assert_eq!(r.vc_policy().num_vcs, stats.layers);
        (r, stats)
    }

    fn families() -> Vec<Topology> {
        let mut v = vec![
            torus(&[4, 4], 1).unwrap(),
            torus(&[8, 8], 1).unwrap(),
            torus(&[4, 4, 4], 1).unwrap(),
            mesh(&[5, 4], 2).unwrap(),
            dragonfly(4, 2, 2, None, GlobalArrangement::Relative).unwrap(),
            latin_square_fat_tree(3, false, false).unwrap(),
            fat_tree(4, 3, false).unwrap(),
        ];
        for seed in [1, 2, 3] {
            v.push(irregular(16, 4, 6, 4, seed).unwrap());
        }
        v
    }

    #[test]
    fn deadlock_free_on_every_family_and_budget() {
        for t in families() {
            for vcs in [1u8, 2, 4, 8] {
                for partition in [LayerPartition::Clustered, LayerPartition::RoundRobin] {
                    check_all(&t, vcs, NueParams { partition });
                }
            }
        }
    }

    #[test]
    fn deadlock_free_on_random_regular_fabrics() {
        for seed in [1u64, 2, 3, 4] {
            let t = random_regular(200, 6, 2, seed).unwrap();
            for vcs in [1u8, 2, 4, 8] {
                check_all(&t, vcs, NueParams::default());
            }
        }
    }

    #[test]
    fn more_layers_do_not_lengthen_torus_paths() {
        for t in [torus(&[4, 4], 1).unwrap(), torus(&[8, 8], 1).unwrap(), torus(&[4, 4, 4], 1).unwrap()] {
            let one = route_metrics(&t, &check_all(&t, 1, NueParams::default()).0).unwrap();
            for vcs in [2u8, 4, 8] {
                let m = route_metrics(&t, &check_all(&t, vcs, NueParams::default()).0).unwrap();
                assert!(m.avg_hops <= one.avg_hops + 1e-9, "{} {vcs} VCs: {} > {}", t.name(), m.avg_hops, one.avg_hops);
            }
        }
    }

    #[test]
    fn trees_route_minimally_in_one_layer() {
        // A fat-tree's up/down paths never need a cycle, so nothing should fall back.
        let t = fat_tree(4, 3, false).unwrap();
        let (r, stats) = check_all(&t, 1, NueParams::default());
        assert_eq!(stats.impasses, 0);
        assert_eq!(route_metrics(&t, &r).unwrap().non_minimal_pairs, 0);
    }

    #[test]
    fn layers_follow_the_budget_and_the_destination_count() {
        let t = torus(&[4, 4], 1).unwrap();
        let (r, s) = check_all(&t, 4, NueParams::default());
        assert_eq!((s.layers, s.destinations), (4, 16));
        let Injection::PerDestination(v) = &r.vc_policy().injection else { panic!("per-destination injection") };
        for l in 0..4u8 {
            assert_eq!(v.iter().filter(|&&x| x == l).count(), 4, "balanced layers");
        }
        assert!(r.vc_policy().transitions.is_none());
        // Two destination switches cannot fill eight layers.
        let line = mesh(&[2], 3).unwrap();
        assert_eq!(check_all(&line, 8, NueParams::default()).1.layers, 2);
    }

    #[test]
    fn single_switch_and_hostless_fabrics() {
        let one = mesh(&[1], 3).unwrap();
        let (r, _) = check_all(&one, 1, NueParams::default());
        let mut p = Vec::new();
        r.path(&one, 0, 2, &mut p).unwrap();
        assert_eq!(p.len(), 2);
        let mut b = TopologyBuilder::new("bare");
        b.add_switch("s", 2);
        let bare = b.build().unwrap();
        assert!(nue(&bare, &opts(1)).is_ok());
    }

    #[test]
    fn disconnected_fabric_names_its_components() {
        let mut b = TopologyBuilder::new("split");
        let s: Vec<_> = (0..4).map(|i| b.add_switch(format!("sw{i}"), 4)).collect();
        b.connect(s[0], s[1], LinkSpec::default()).unwrap();
        b.connect(s[2], s[3], LinkSpec::default()).unwrap();
        for (i, &sw) in s.iter().enumerate() {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, sw, LinkSpec::default()).unwrap();
        }
        let err = nue(&b.build().unwrap(), &opts(2)).unwrap_err().to_string();
        assert!(!err.contains('\n'));
        assert!(err.contains("2 components") && err.contains("sw0, sw1") && err.contains("sw2, sw3"), "{err}");
    }

    #[test]
    fn hostless_island_is_ignored() {
        let mut b = TopologyBuilder::new("island");
        let s: Vec<_> = (0..3).map(|i| b.add_switch(format!("sw{i}"), 4)).collect();
        b.connect(s[0], s[1], LinkSpec::default()).unwrap();
        for &sw in &s[..2] {
            let h = b.add_host(format!("h{sw}"));
            b.connect(h, sw, LinkSpec::default()).unwrap();
        }
        check_all(&b.build().unwrap(), 2, NueParams::default());
    }

    #[test]
    fn more_families_and_every_selection_policy() {
        use crate::routing::Select;
        let topos = [
            hypercube(4, 2).unwrap(),
            hyperx(&[3, 3], 1, 2).unwrap(),
            k_ary_n_tree(3, 2).unwrap(),
            random_regular(60, 4, 3, 7).unwrap(),
            torus(&[3, 5], 3).unwrap(),
        ];
        for t in &topos {
            for select in Select::ALL {
                for vcs in [1u8, 3] {
                    let o = RouteOptions { max_vcs: vcs, select, ..Default::default() };
                    let r = nue(t, &o).unwrap();
                    let rep = deadlock::check(t, &r).unwrap();
                    assert!(rep.deadlock_free, "{} {select} vcs={vcs}", t.name());
                }
            }
        }
    }

    #[test]
    fn selection_policy_spreads_hosts_of_a_switch() {
        use crate::routing::Select;
        // Hosts of one switch: per-destination selection gives them different next hops
        // where equally short ones exist; low-port selection does not spread them.
        let t = mesh(&[4, 4], 4).unwrap();
        let spread = |select| {
            let r = nue(&t, &RouteOptions { max_vcs: 2, select, ..Default::default() }).unwrap();
            assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
            route_metrics(&t, &r).unwrap().path_diversity
        };
        assert!(spread(Select::PerDestination) > spread(Select::LowPort));
    }

    #[test]
    fn result_does_not_depend_on_the_thread_count() {
        let t = random_regular(80, 5, 2, 3).unwrap();
        let run = |threads| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| nue_with(&t, &opts(4), &NueParams::default()).unwrap())
        };
        let (a, sa) = run(1);
        let (b, sb) = run(3);
        assert_eq!(a.ports(), b.ports());
        assert_eq!(a.vc_policy(), b.vc_policy());
        assert_eq!(sa, sb);
    }

    #[test]
    fn switches_with_more_than_64_neighbours() {
        // A wheel: a hub linked to 70 rim switches that also form a ring (many cycles), so
        // the hub's dependency masks span two words.
        let n = 70;
        let mut b = TopologyBuilder::new("wheel");
        let hub = b.add_switch("hub", n as Port);
        let rim: Vec<_> = (0..n).map(|i| b.add_switch(format!("r{i}"), 4)).collect();
        for i in 0..n {
            b.connect(hub, rim[i], LinkSpec::default()).unwrap();
            b.connect(rim[i], rim[(i + 1) % n], LinkSpec::default()).unwrap();
            let h = b.add_host(format!("h{i}"));
            b.connect(h, rim[i], LinkSpec::default()).unwrap();
        }
        let t = b.build().unwrap();
        for vcs in [1u8, 2] {
            check_all(&t, vcs, NueParams::default());
        }
    }

    #[test]
    fn host_without_switch_is_an_error() {
        let mut b = TopologyBuilder::new("pair");
        let h0 = b.add_host("h0");
        let h1 = b.add_host("h1");
        b.connect(h0, h1, LinkSpec::default()).unwrap();
        let err = nue(&b.build().unwrap(), &opts(1)).unwrap_err().to_string();
        assert!(err.contains("not attached to a switch"), "{err}");
    }

    #[test]
    fn bad_budget_is_an_error_not_a_panic() {
        let t = torus(&[3, 3], 1).unwrap();
        assert!(nue(&t, &opts(0)).is_err());
        assert!(nue(&t, &opts(17)).is_err());
    }

    #[test]
    fn parallel_links_carry_different_destinations() {
        let mut b = TopologyBuilder::new("trunk");
        let s0 = b.add_switch("s0", 6);
        let s1 = b.add_switch("s1", 6);
        b.connect(s0, s1, LinkSpec::default()).unwrap();
        b.connect(s0, s1, LinkSpec::default()).unwrap();
        for i in 0..4 {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, if i < 2 { s0 } else { s1 }, LinkSpec::default()).unwrap();
        }
        let t = b.build().unwrap();
        let (r, _) = check_all(&t, 1, NueParams::default());
        assert_ne!(r.out_port(0, 2), r.out_port(0, 3));
    }
}
