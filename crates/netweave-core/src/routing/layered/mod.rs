//! Layered shortest-path engines: SSSP, DFSSSP and LASH.
//!
//! * **SSSP** (Hoefler, Schneider & Lumsdaine, "Optimized Routing for Large-Scale InfiniBand
//!   Networks", HOTI 2009; OpenSM's `sssp`): destination hosts are routed one after another,
//!   switch by switch. Each is a Dijkstra search over the switch-to-switch channels, weighted
//!   by the number of routes already crossing each channel plus one; the new routes are then
//!   added to the weights, so later destinations avoid busy channels and the load spreads over
//!   the whole fabric. One VC; not deadlock-free in general.
//! * **DFSSSP** (Domke, Hoefler & Nagel, "Deadlock-Free Oblivious Routing for Arbitrary
//!   Topologies", IPDPS 2011; OpenSM's `dfsssp`): SSSP's paths, each (source, destination) path
//!   in a VC layer whose channel dependency graph (CDG) stays acyclic.
//! * **LASH** (Skeie, Lysne & Theiss, "Layered Shortest Path (LASH) Routing in Irregular
//!   System Area Networks", IPDPS 2002): one minimal path per switch pair, each in a layer
//!   whose CDG stays acyclic.
//!
//! # Layer assignment
//!
//! Both layered engines place paths *online*, tree by tree as the trees are computed, each
//! tree's sources nearest first. By default ([`Fit::Best`]) a path goes to the layer that
//! already holds most of its dependencies (fewest new ones, lowest layer on a tie) among those
//! that stay acyclic with it; [`Fit::First`] takes the lowest such layer, as LASH does. Best
//! fit gathers paths that share turns, which leaves the other layers' orders freer: on a
//! random 8-regular fabric of 500 switches LASH's minimal paths fit in 7 layers instead of 8
//! (OpenSM's LASH needs 9 there). DFSSSP's weighted paths are more varied; they need 9 layers
//! on that fabric either way, like OpenSM's DFSSSP (which then fails with 8 VLs).
//!
//! **Escape layer.** The last layer of the budget takes only up*/down*-legal paths (no
//! down→up turn in the orientation of the BFS tree from `options.root`), which are acyclic
//! together without any search. When a path of a destination's tree fits in no layer, the
//! tree's dependencies are taken back out of the layers, the destination is routed on
//! destination-consistent up*/down* routes instead (the `updown` engine's in-tree) and all
//! its paths go to the escape layer. So both engines always succeed within any budget, one VC
//! included, and stay minimal wherever the paths fit ([`LayeredStats::escaped_trees`] counts
//! the destinations that did not); when the paths fit in fewer layers than the budget, the
//! escape layer is never opened and the result is the plain layering.
//!
//! **Saturation.** On big fabrics the minimal paths fill the layers after a few dozen trees
//! (about 30 of 10,000 destination switches at 10,000 switches), and every later try costs
//! many refused searches to end in escape routes all the same. So a tree that spends more
//! than [`LayeredParams::tree_effort`] search rounds per source takes escape routes, and once
//! [`LayeredParams::patience`] trees have, a tree is tried only right after one that fitted
//! or when the escapes so far number a power of two. Once the escape layer is open, a path
//! it accepts goes there without a search.
//!
//! OpenSM's DFSSSP instead puts every path in layer 0 and, cycle by cycle, moves the paths of
//! a cycle's weakest dependency up a layer; on the same SSSP paths that needed about twice
//! as many layers (20 against 11 on a random 8-regular fabric of 500 switches, 6 against 4 on
//! a 16×16 torus) at no gain in time, so it is not used.
//!
//! # Why it is fast
//!
//! The table is destination-based, so the physical path of a pair depends only on the source
//! *switch* and the destination's route tree: the unit placed in a layer is a (source switch,
//! tree) path, shared by every host on that switch (`Injection::PerPair` then repeats it per
//! source host). A tree's dependencies are one per switch (its channel → its parent's channel).
//!
//! * A layer's CDG is a bit per possible dependency ("slot": channel `a→b` followed by one of
//!   `b`'s out-channels), a few hundred thousand bits even for 10,000 switches.
//! * A tree's sources are placed nearest first. A path is its first hop plus its parent's
//!   path: in the parent's layer it adds one dependency, and every layer below the highest
//!   layer of a placed ancestor is skipped outright (that layer refused a suffix of the path
//!   and layers only grow).
//! * Each new dependency is checked by Pearce–Kelly dynamic topological ordering (Pearce &
//!   Kelly, JEA 2006): only channels between the two ends in the current order are searched,
//!   and a dependency found to close a cycle is remembered as forbidden in that layer. A
//!   search that grows past a fixed bound gives up and counts as a refusal (never unsafe), so
//!   a try in a dense layer of a big fabric costs a bounded time.
//! * DFSSSP runs one Dijkstra search per destination *switch*, shared by its hosts (as
//!   OpenSM's DFSSSP does), over flat CSR arrays with a radix heap; the hosts of a switch then
//!   mostly share one tree, whose dependencies are already in the layer when the second host
//!   comes. (`sssp` alone searches once per host, to spread co-located hosts.)
//!
//! # Cost
//!
//! Release build on a quiet 2-core machine, budget 8 VCs, random 8-regular switch graphs
//! (4 hosts per switch; 2 at 10,000 switches) and the 16×16×16 torus (`benches/README.md`
//! has the commands and the OpenSM comparison). "Escaped" counts destination trees on
//! up*/down* routes (hosts for `dfsssp`, switches for `lash`).
//!
//! | fabric | `dfsssp` | `lash` |
//! |---|---|---|
//! | 500 switches | 8 VCs in 0.60 s, 828 of 2,000 escaped (9 VCs without) | 7 VCs in 0.54 s, minimal |
//! | 2,000 switches | 8 VCs in 8.6 s, 7,308 of 8,000 escaped | 8 VCs in 5.9 s, 1,836 of 2,000 escaped |
//! | 10,000 switches | 8 VCs in 85 s, nearly all escaped | 8 VCs in 41 s, 9,971 of 10,000 escaped |
//! | 16×16×16 torus | 7 VCs in 8.1 s, minimal | 8 VCs in 4.6 s |
//!
//! The layering's time is the Pearce–Kelly searches in dense layers; the saturation rules
//! above keep it from growing faster than the trees that still fit. On big random fabrics
//! minimal paths need far more than 7 layers, so most destinations end on up*/down* routes
//! in the escape layer, and other engines keep paths shorter there: at 2,000 switches the
//! average is 5.15 hops for `lash` and 5.17 for `dfsssp`, against 5.28 for `updown`, 4.69 for
//! `nue` and 3.96 for `dl` (minimal for every pair, with 3 VCs).
//!
//! ```
//! use netweave_core::topology::grid::torus;
//! use netweave_core::routing::{deadlock, route, Engine, RouteOptions};
//! let t = torus(&[8, 8], 1).unwrap();
//! for engine in [Engine::Dfsssp, Engine::Lash] {
//!     let routes = route(&t, engine, &RouteOptions::default()).unwrap();
//!     assert!(deadlock::check(&t, &routes).unwrap().deadlock_free);
//!     assert!(routes.vc_policy().num_vcs >= 2); // a torus needs more than one layer
//! }
//! ```

use rayon::prelude::*;

use crate::error::{NetweaveError, Result};
use crate::topology::Topology;

use super::{Injection, RouteOptions, RoutingTable, VcPolicy, MAX_VCS, NO_PORT};

mod assign;
mod graph;
#[cfg(test)]
mod tests;
mod trees;

use assign::{Greedy, Layering};
use graph::{DependencySlots, NO_HOP};
pub use graph::{Fit, LayeredParams, LayeredStats};
use trees::{lash_trees, sssp_trees};

/// Most bytes the per-pair VC table may take (`hosts²`).
const MAX_PAIR_TABLE: usize = 1 << 35;

/// SSSP: shortest paths over globally balanced channel weights, one VC.
///
/// Destination hosts are taken switch by switch; for each, a Dijkstra search towards its
/// switch over switch-to-switch channels weighted `1 + routes already using the channel`,
/// then every source switch's new route adds its host count to the channels it crosses
/// (OpenSM's `update_weights`). Ties between equally light next hops go to `options.select`.
/// Not deadlock-free in general; [`dfsssp`] layers the same paths.
///
/// ```
/// use netweave_core::topology::grid::mesh;
/// use netweave_core::routing::{layered, RouteOptions};
/// let t = mesh(&[3, 3], 2).unwrap();
/// let r = layered::sssp(&t, &RouteOptions::default()).unwrap();
/// let mut path = Vec::new();
/// r.path(&t, 0, 17, &mut path).unwrap();
/// assert_eq!(path.len(), 6); // corner to corner: host link, 4 switch hops, host link
/// ```
pub fn sssp(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    let slots = DependencySlots::new(topo, "sssp")?;
    let next = sssp_trees(topo, &slots, options.select, true, None)?;
    Ok(slots.table(topo, "sssp", &next, PerHost))
}

/// DFSSSP: SSSP's paths, each in a VC layer whose dependency graph stays acyclic.
///
/// The SSSP routes of [`sssp`] (same table wherever they fit); as each destination host's
/// tree is computed, the path from every source switch (nearest first) goes to a layer it
/// keeps acyclic (see the [module docs](self): best fit, and why this replaces OpenSM's cycle
/// breaking). A destination whose paths fit in none of `options.max_vcs` layers takes
/// up*/down* routes in the last (escape) layer, so it never fails for want of VCs. The VC of
/// a pair is its layer (`Injection::PerPair`, no transitions; `Injection::Zero` when one
/// layer suffices).
pub fn dfsssp(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    dfsssp_with(topo, options, &LayeredParams::default()).map(|(table, _)| table)
}

/// [`dfsssp`] with explicit [`LayeredParams`], also returning [`LayeredStats`].
pub fn dfsssp_with(
    topo: &Topology,
    options: &RouteOptions,
    params: &LayeredParams,
) -> Result<(RoutingTable, LayeredStats)> {
    check_budget("dfsssp", options)?;
    let slots = DependencySlots::new(topo, "dfsssp")?;
    let mut greedy = Greedy::new(topo, &slots, options, params, slots.num_hosts)?;
    let next = sssp_trees(topo, &slots, options.select, false, Some(&mut greedy))?;
    let layering = greedy.finish();
    let stats = layering.stats();
    let mut table = slots.table(topo, "dfsssp", &next, PerHost);
    table.set_vc_policy(slots.vc_policy("dfsssp", layering, PerHost)?);
    Ok((table, stats))
}

/// LASH: one minimal path per switch pair, each in a VC layer it keeps acyclic.
///
/// As in the paper, all hosts of a destination switch share one tree of minimal next hops:
/// the `shortest` engine's tree (same `options.select`, same selector state) towards the
/// switch's first host. With `LowPort` the table is exactly the `shortest` engine's; with
/// `PerDestination` it is the same as with `LowPort`, since spreading the hosts of a switch
/// over several paths is what one path per switch pair rules out. Destination switches are
/// taken in order, their sources nearest first; each switch-pair path goes to a layer whose
/// dependency graph stays acyclic with it (best fit, see the [module docs](self)), a new layer
/// is opened when none does. A destination switch whose paths fit in none of
/// `options.max_vcs` layers takes up*/down* routes in the last (escape) layer instead. The VC
/// of a pair is its layer (`Injection::PerPair`, `Injection::Zero` when one layer suffices).
///
/// ```
/// use netweave_core::topology::random::irregular;
/// use netweave_core::routing::{deadlock, layered, RouteOptions};
/// let t = irregular(16, 4, 6, 4, 1).unwrap();
/// let r = layered::lash(&t, &RouteOptions::default()).unwrap();
/// assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
/// ```
pub fn lash(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    lash_with(topo, options, &LayeredParams::default()).map(|(table, _)| table)
}

/// [`lash`] with explicit [`LayeredParams`], also returning [`LayeredStats`].
pub fn lash_with(
    topo: &Topology,
    options: &RouteOptions,
    params: &LayeredParams,
) -> Result<(RoutingTable, LayeredStats)> {
    check_budget("lash", options)?;
    let slots = DependencySlots::new(topo, "lash")?;
    let mut greedy = Greedy::new(topo, &slots, options, params, slots.num_switches)?;
    let next = lash_trees(topo, &slots, options.select, &mut greedy)?;
    let layering = greedy.finish();
    let stats = layering.stats();
    let mut table = slots.table(topo, "lash", &next, PerSwitch);
    table.set_vc_policy(slots.vc_policy("lash", layering, PerSwitch)?);
    Ok((table, stats))
}

/// Whether route trees exist per destination host (SSSP, DFSSSP) or per destination switch
/// (LASH, one path per switch pair).
#[derive(Clone, Copy, PartialEq, Eq)]
enum TreeKind {
    PerHost,
    PerSwitch,
}
use TreeKind::{PerHost, PerSwitch};

/// The budget check of [`super::route`], for callers that come here directly.
fn check_budget(engine: &str, options: &RouteOptions) -> Result<()> {
    if options.max_vcs == 0 || options.max_vcs > MAX_VCS {
        return crate::invalid!("{engine}: the VC budget must be 1..={MAX_VCS}, got {}", options.max_vcs);
    }
    Ok(())
}

/// Building the table and VC policy from the route trees (the engines' last step).
impl DependencySlots {
    /// Fill a routing table from tree-major next hops: `next[tree * n + v]` is the index of the
    /// out-channel switch `v` takes towards the tree's destination (a host, or with
    /// [`PerSwitch`] every host of the tree's switch).
    fn table(&self, topo: &Topology, engine: &str, next: &[u16], trees: TreeKind) -> RoutingTable {
        let (n, nh) = (self.num_switches, self.num_hosts);
        let mut table = RoutingTable::new(topo, engine);
        // Blocks of switches: `next` is read a short run per destination and the table written
        // a few rows at a time, so neither side thrashes the cache.
        const BLOCK: usize = 64;
        for s0 in (0..n).step_by(BLOCK) {
            let s1 = (s0 + BLOCK).min(n);
            for d in 0..nh {
                let tree = self.tree_of(d, trees);
                let home = self.host_switch[d] as usize;
                for (i, &j) in next[tree * n + s0..tree * n + s1].iter().enumerate() {
                    let s = s0 + i;
                    let p = if j != NO_HOP {
                        self.port[self.out_start[s] as usize + j as usize]
                    } else if s == home {
                        self.host_port[d]
                    } else {
                        NO_PORT
                    };
                    if p != NO_PORT {
                        table.set_out_port(s, d, p);
                    }
                }
            }
        }
        table
    }

    /// Tree (row of `next` and of a [`Layering`]) that routes towards host `d`.
    fn tree_of(&self, d: usize, trees: TreeKind) -> usize {
        match trees {
            PerHost => d,
            PerSwitch => self.host_switch[d] as usize,
        }
    }

    /// The VC policy of a layering, or the one-line error when the budget was exceeded.
    fn vc_policy(&self, engine: &str, layering: Layering, trees: TreeKind) -> Result<VcPolicy> {
        let (layer_of, num_layers) = layering.into_layers();
        if num_layers <= 1 {
            // One layer: every pair on VC 0, no need for a hosts² table.
            return Ok(VcPolicy::single());
        }
        let (n, nh) = (self.num_switches, self.num_hosts);
        if nh.saturating_mul(nh) > MAX_PAIR_TABLE {
            return Err(NetweaveError::Routing(format!(
                "{engine}: a per-pair VC table for {nh} hosts would take {} GiB",
                (nh as u128 * nh as u128) >> 30
            )));
        }
        let num_trees = layer_of.len() / n;
        // Transpose the tree-major layers to source-switch-major in blocks of switches, then
        // expand each source switch's row to its hosts.
        const BLOCK: usize = 64;
        let mut by_switch = vec![0u8; n * num_trees];
        by_switch.par_chunks_mut(BLOCK * num_trees).enumerate().for_each(|(b, rows)| {
            let s0 = b * BLOCK;
            let width = rows.len() / num_trees;
            for tree in 0..num_trees {
                for (i, &l) in layer_of[tree * n + s0..tree * n + s0 + width].iter().enumerate() {
                    rows[i * num_trees + tree] = l;
                }
            }
        });
        drop(layer_of);
        let mut vcs = vec![0u8; nh * nh];
        vcs.par_chunks_mut(nh).enumerate().for_each(|(src, row)| {
            // Pairs on one switch are never placed, so their entries are VC 0.
            let s = self.host_switch[src] as usize;
            let layers = &by_switch[s * num_trees..(s + 1) * num_trees];
            match trees {
                PerHost => row.copy_from_slice(layers),
                PerSwitch => {
                    for (d, vc) in row.iter_mut().enumerate() {
                        *vc = layers[self.host_switch[d] as usize];
                    }
                }
            }
        });
        Ok(VcPolicy {
            num_vcs: num_layers as u8,
            injection: Injection::PerPair { num_hosts: nh, vcs },
            transitions: None,
        })
    }
}
