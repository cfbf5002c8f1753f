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

use crate::error::Result;
use crate::topology::fabric::SwitchFabric;
use crate::topology::{Port, Topology};

use rayon::prelude::*;

use super::minhop::hosts_by_switch;
use super::select::Selector;
use super::{Injection, RouteOptions, RoutingTable, VcPolicy, MAX_VCS};

mod graph;
mod layer;
mod partition;
mod search;
#[cfg(test)]
mod tests;

pub use graph::NueStats;
use graph::{DependencySlots, LayerInput};
use layer::{Layer, Tree};
use partition::{clustered_partition, layer_centre, main_component, BfsScratch};
use search::Search;

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
    let slots = DependencySlots::new(view)?;
    let graph: &SwitchFabric = &slots;
    let host_counts: Vec<u32> = by_switch.iter().map(|h| h.len() as u32).collect();

    let dest_switches: Vec<u32> =
        (0..slots.num_switches as u32).filter(|&s| !by_switch[s as usize].is_empty()).collect();
    let k = (options.max_vcs as usize).min(dest_switches.len()).max(1);
    let layer_of = match params.partition {
        LayerPartition::Clustered => clustered_partition(graph, &dest_switches, &host_counts, k),
        LayerPartition::RoundRobin => {
            let mut l = vec![u8::MAX; slots.num_switches];
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
    let mut weights = vec![w0; slots.nc()];
    let ctx = LayerInput { slots: &slots, by_switch: &by_switch, in_comp: &in_comp, comp_size };

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
        let slots = ctx.slots;
        let mut bfs = BfsScratch::new(slots.num_switches);
        let mut tree = Tree::default();
        let root = layer_centre(slots, dests, &mut bfs);
        tree.build(slots, root, &mut bfs);
        let mut layer = Layer::new(slots);
        layer.reset(slots, &tree, dests);
        // Route neighbouring destinations one after another (depth-first order of the
        // tree): their trees are alike, so the dependency order needs little repair.
        let rank = tree.preorder();
        let mut dests = dests.to_vec();
        dests.sort_unstable_by_key(|&s| rank[s as usize]);
        let num_hosts: usize = dests.iter().map(|&t| ctx.by_switch[t as usize].len()).sum();
        let search = Search::new(slots);
        LayerRun {
            dests,
            tree,
            layer,
            search,
            selector: Selector::new(topo, select),
            cols: vec![super::NO_PORT; num_hosts * slots.num_switches],
            col_host: Vec::with_capacity(num_hosts),
            delta: Vec::new(),
            stats: NueStats::default(),
        }
    }

    /// Route the hosts of this layer's `round`-th destination switch.
    fn step(&mut self, ctx: &LayerInput, round: usize, weights: &[u64]) {
        let Some(&t) = self.dests.get(round) else { return };
        let (slots, ns) = (ctx.slots, ctx.slots.num_switches);
        let (search, layer, stats) = (&mut self.search, &mut self.layer, &mut self.stats);
        let reached = search.search(ctx, layer, weights, t, stats);
        if reached < ctx.comp_size {
            stats.impasses += 1;
            stats.escape_routes += search.repair(slots, layer, &self.tree, t, ctx.in_comp, stats);
        }
        search.keep_base(slots);
        for (local, &h) in ctx.by_switch[t as usize].iter().enumerate() {
            stats.destinations += 1;
            if local == 0 {
                for &v in search.routed() {
                    self.selector.record(v as usize, slots.port[search.channel(v) as usize]);
                }
            } else {
                search.sibling(slots, layer, t, local, &mut self.selector);
            }
            search.add_load(slots, &mut self.delta, t);
            let k = self.col_host.len();
            let col = &mut self.cols[k * ns..(k + 1) * ns];
            for &v in search.routed() {
                col[v as usize] = slots.port[search.channel(v) as usize];
            }
            col[t as usize] = slots.host_port[h];
            self.col_host.push(h);
        }
    }

    /// Write the layer's columns into the switch-major table, transposing in cache-sized
    /// blocks, and return its statistics.
    fn finish(mut self, table: &mut RoutingTable) -> NueStats {
        let ns = self.search.num_switches();
        self.stats.dependencies = self.layer.used_dependencies();
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
