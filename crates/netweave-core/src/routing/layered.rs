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
use crate::topology::fabric::SwitchFabric;
use crate::topology::{Port, Topology};

use super::minhop::hosts_by_switch;
use super::select::{Select, Selector};
use super::updown::EscapeRoutes;
use super::{Injection, RouteOptions, RoutingTable, VcPolicy, MAX_VCS, NO_PORT};

/// Tree entry "no next hop": the tree's root switch, or a switch that cannot reach it.
const NO_HOP: u16 = u16::MAX;
/// Dijkstra distance of a switch not reached (yet).
const UNREACHED: u64 = u64::MAX;
/// Most dependency slots a layer may have (bits per layer; `Σ degree²` over switches).
const MAX_SLOTS: usize = 1 << 31;
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
    let fab = Fabric::new(topo, "sssp")?;
    let next = sssp_trees(topo, &fab, options.select, true, None)?;
    Ok(fab.table(topo, "sssp", &next, PerHost))
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
    let fab = Fabric::new(topo, "dfsssp")?;
    let mut greedy = Greedy::new(topo, &fab, options, params, fab.num_hosts)?;
    let next = sssp_trees(topo, &fab, options.select, false, Some(&mut greedy))?;
    let layering = greedy.finish();
    let stats = layering.stats();
    let mut table = fab.table(topo, "dfsssp", &next, PerHost);
    table.set_vc_policy(fab.vc_policy("dfsssp", layering, PerHost)?);
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
    let fab = Fabric::new(topo, "lash")?;
    let mut greedy = Greedy::new(topo, &fab, options, params, fab.num_switches)?;
    let next = lash_trees(topo, &fab, options.select, &mut greedy)?;
    let layering = greedy.finish();
    let stats = layering.stats();
    let mut table = fab.table(topo, "lash", &next, PerSwitch);
    table.set_vc_policy(fab.vc_policy("lash", layering, PerSwitch)?);
    Ok((table, stats))
}

/// How paths are assigned to layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fit {
    /// The lowest layer that stays acyclic with the path.
    First,
    /// The layer already holding most of the path's dependencies (fewest new ones), lowest
    /// first on a tie: paths that share turns gather in one layer, which leaves the other
    /// layers' orders freer.
    #[default]
    Best,
}

/// Knobs of the layered engines beyond [`RouteOptions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayeredParams {
    pub fit: Fit,
    /// Most layers tried per path (in fit order) before the path counts as fitting nowhere;
    /// 0 tries them all.
    pub tries: u8,
    /// Most rounds (one channel each way) a Pearce–Kelly search may take before giving up,
    /// which counts as a refusal (safe: refusing a dependency never makes a layer cyclic).
    pub search_limit: u32,
    /// Back-off once the layers are saturated: after this many destination trees took escape
    /// routes, a tree is tried only when the previous one fitted or the escapes so far number
    /// a power of two; the others take escape routes outright. 0 tries every tree.
    pub patience: u32,
    /// Most Pearce–Kelly search rounds a destination tree may spend per source switch; a tree
    /// that spends more takes escape routes. This keeps a tree's cost linear in the fabric's
    /// size once its layers are dense. 0 leaves it unbounded.
    pub tree_effort: u32,
}

impl Default for LayeredParams {
    fn default() -> Self {
        LayeredParams { fit: Fit::Best, tries: 0, search_limit: 1 << 13, patience: 32, tree_effort: 256 }
    }
}

/// What a layered run did, for reports and tests.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LayeredStats {
    /// VC layers used.
    pub layers: u8,
    /// Destination trees (hosts for DFSSSP, switches for LASH) whose paths fitted in no
    /// layer and took up*/down* routes in the escape layer instead.
    pub escaped_trees: usize,
}

/// The budget check of [`super::route`], for callers that come here directly.
fn check_budget(engine: &str, options: &RouteOptions) -> Result<()> {
    if options.max_vcs == 0 || options.max_vcs > MAX_VCS {
        return crate::invalid!("{engine}: the VC budget must be 1..={MAX_VCS}, got {}", options.max_vcs);
    }
    Ok(())
}

/// The shared [`SwitchFabric`] plus the numbering of its channel dependencies the layered
/// engines count in (the view's fields and methods are reached through `Deref`).
struct Fabric {
    view: SwitchFabric,
    /// Dependency slots of channel `c = a→b`: `slot_base[c] + j` stands for `c` followed by
    /// `b`'s `j`-th out-channel.
    slot_base: Vec<usize>,
    /// The same dependencies indexed from their second channel: `rslot_base[c] + i` stands
    /// for `b`'s `i`-th in-channel (the reverse of its `i`-th out-channel) followed by `c = b→x`.
    rslot_base: Vec<usize>,
    num_slots: usize,
}

impl std::ops::Deref for Fabric {
    type Target = SwitchFabric;
    fn deref(&self) -> &SwitchFabric {
        &self.view
    }
}

impl Fabric {
    fn new(topo: &Topology, engine: &str) -> Result<Self> {
        // Every host must hang on a switch (the error names the first that does not).
        hosts_by_switch(topo)?;
        let view = SwitchFabric::new(topo);
        let mut slot_base = Vec::with_capacity(view.num_channels() + 1);
        let mut acc = 0usize;
        for &h in &view.head {
            slot_base.push(acc);
            acc += view.out_degree(h as usize);
        }
        slot_base.push(acc);
        let mut rslot_base = Vec::with_capacity(view.num_channels() + 1);
        let mut racc = 0usize;
        for &t in &view.tail {
            rslot_base.push(racc);
            racc += view.out_degree(t as usize);
        }
        rslot_base.push(racc);
        if acc > MAX_SLOTS {
            return Err(NetweaveError::Routing(format!(
                "{engine}: the fabric has {acc} possible channel dependencies, more than the {MAX_SLOTS} it can track"
            )));
        }
        let fab = Fabric { view, slot_base, rslot_base, num_slots: acc };
        fab.check_connected(topo, engine)?;
        Ok(fab)
    }

    /// Reverse slot of dependency `c1 → c2` (`c2` leaves the switch `c1` enters).
    #[inline]
    fn rslot(&self, c1: usize, c2: usize) -> usize {
        let b = self.head[c1] as usize;
        self.rslot_base[c2] + self.rev[c1] as usize - self.out_start[b] as usize
    }

    /// Channel switch `v` takes in `tree`, and the switch it leads to.
    #[inline]
    fn hop(&self, tree: &[u16], v: usize) -> (usize, usize) {
        let c = self.out_start[v] as usize + tree[v] as usize;
        (c, self.head[c] as usize)
    }

    /// `root` if it reaches the switches with hosts, else the first switch with hosts (the
    /// root of the escape routes must lie in the hosts' component).
    fn escape_root(&self, root: usize) -> usize {
        let root = root.min(self.num_switches - 1);
        let mut seen = vec![false; self.num_switches];
        let mut queue = vec![root as u32];
        seen[root] = true;
        let mut head = 0;
        while head < queue.len() {
            let v = queue[head] as usize;
            head += 1;
            if self.host_count(v) > 0 {
                return root;
            }
            for lc in self.out(v) {
                let u = self.head[lc] as usize;
                if !seen[u] {
                    seen[u] = true;
                    queue.push(u as u32);
                }
            }
        }
        (0..self.num_switches).find(|&v| self.host_count(v) > 0).unwrap_or(root)
    }

    /// Errors, naming the components, when hosts sit on switches that cannot reach each other.
    fn check_connected(&self, topo: &Topology, engine: &str) -> Result<()> {
        // Union-find over the links; components are few and small to name.
        let mut parent: Vec<u32> = (0..self.num_switches as u32).collect();
        fn find(parent: &mut [u32], mut v: u32) -> u32 {
            while parent[v as usize] != v {
                parent[v as usize] = parent[parent[v as usize] as usize];
                v = parent[v as usize];
            }
            v
        }
        for lc in 0..self.head.len() {
            let (a, b) = (find(&mut parent, self.tail[lc]), find(&mut parent, self.head[lc]));
            if a != b {
                parent[a.max(b) as usize] = a.min(b);
            }
        }
        let mut roots: Vec<u32> =
            (0..self.num_switches).filter(|&v| self.host_count(v) > 0).map(|v| find(&mut parent, v as u32)).collect();
        roots.sort_unstable();
        roots.dedup();
        if roots.len() <= 1 {
            return Ok(());
        }
        let names: Vec<String> = roots
            .iter()
            .take(4)
            .map(|&r| {
                let members: Vec<usize> = (0..self.num_switches).filter(|&v| find(&mut parent, v as u32) == r).collect();
                let shown: Vec<&str> = members.iter().take(3).map(|&v| topo.label(topo.switches()[v])).collect();
                let more = if members.len() > 3 { ", …" } else { "" };
                format!("{{{}{more}}} ({} switches)", shown.join(", "), members.len())
            })
            .collect();
        let rest = if roots.len() > 4 { ", …" } else { "" };
        Err(NetweaveError::Routing(format!(
            "{engine} needs a connected fabric, but its hosts sit in {} components: {}{rest}",
            roots.len(),
            names.join(", ")
        )))
    }

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
        let Layering { layer_of, num_layers, .. } = layering;
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

/// Whether route trees exist per destination host (SSSP, DFSSSP) or per destination switch
/// (LASH, one path per switch pair).
#[derive(Clone, Copy, PartialEq, Eq)]
enum TreeKind {
    PerHost,
    PerSwitch,
}
use TreeKind::{PerHost, PerSwitch};

/// A layer per (source switch, tree), tree-major: `layer_of[tree * n + s]`.
struct Layering {
    layer_of: Vec<u8>,
    /// Layers used.
    num_layers: usize,
    /// Trees (destination hosts or switches) that took escape routes.
    escaped_trees: usize,
}

impl Layering {
    fn stats(&self) -> LayeredStats {
        LayeredStats { layers: self.num_layers as u8, escaped_trees: self.escaped_trees }
    }
}

/// Route every destination host over the current channel weights (see [`sssp`]);
/// tree-major next hops, one tree per host. With `greedy`, each tree is layered as soon as it
/// is known (and replaced by escape routes when its paths fit in no layer).
///
/// One Dijkstra search per destination switch, or per destination host.
/// With `spread_hosts` (the `sssp` engine) each host gets a search of its own over the
/// weights its predecessors left, so co-located hosts spread over parallel paths. Without
/// (`dfsssp`, like OpenSM's DFSSSP) the weights grow only after all the switch's hosts, which
/// share its one search and so one tree except where the search ties: a quarter of the
/// searches with four hosts per switch, and far fewer distinct paths to layer.
fn sssp_trees(
    topo: &Topology,
    fab: &Fabric,
    select: Select,
    spread_hosts: bool,
    mut greedy: Option<&mut Greedy>,
) -> Result<Vec<u16>> {
    let n = fab.num_switches;
    let mut next = vec![NO_HOP; n * fab.num_hosts];
    // weight[c] of channel c, and back[c] = weight[rev[c]] so that relaxing the channels
    // towards a settled switch reads memory in order.
    let mut weight = vec![1u64; fab.head.len()];
    let mut back = vec![1u64; fab.head.len()];
    let mut selector = Selector::new(topo, select);
    let mut dist = vec![UNREACHED; n];
    let mut order: Vec<u32> = Vec::with_capacity(n);
    let mut sources: Vec<u32> = Vec::with_capacity(n);
    let mut heap = RadixHeap::new();
    let mut scratch = LoadScratch { load: vec![0; n], waiting: Vec::new(), ready: Vec::new() };
    let mut cand_port: Vec<Port> = Vec::new();
    let mut cand_idx: Vec<u16> = Vec::new();
    let mut pending: Vec<(usize, bool)> = Vec::new();
    for t in 0..n {
        if fab.host_count(t) == 0 {
            continue;
        }
        for (k, &d) in fab.hosts_of(t).iter().enumerate() {
            let d = d as usize;
            if k == 0 || spread_hosts {
                lightest_paths(fab, &back, t, &mut dist, &mut order, &mut heap);
            }
            let tree = &mut next[d * n..(d + 1) * n];
            selector.record(t, fab.host_port[d]);
            choose_next_hops(fab, &weight, &dist, &order, &mut selector, k, tree, &mut cand_port, &mut cand_idx);
            let mut escaped = false;
            if let Some(g) = greedy.as_deref_mut() {
                sources.clear();
                sources.extend(order.iter().copied().filter(|&v| v as usize != t && fab.host_count(v as usize) > 0));
                escaped = g.place_tree(topo, tree, t, d, k, &sources)?;
            }
            if spread_hosts {
                add_load(fab, t, &order, &next[d * n..(d + 1) * n], escaped, &mut weight, &mut back, &mut scratch);
            } else {
                pending.push((d, escaped));
            }
        }
        // Now the routes of all of t's hosts weigh on the channels.
        for &(d, escaped) in &pending {
            add_load(fab, t, &order, &next[d * n..(d + 1) * n], escaped, &mut weight, &mut back, &mut scratch);
        }
        pending.clear();
    }
    Ok(next)
}

/// Dijkstra from switch `t` along reversed channels: `dist[v]` is the weight of the lightest
/// path v → t under `back` (weights of the reversed channels); `order` lists the switches
/// reached by it (parents first).
fn lightest_paths(fab: &Fabric, back: &[u64], t: usize, dist: &mut [u64], order: &mut Vec<u32>, heap: &mut RadixHeap) {
    dist.fill(UNREACHED);
    order.clear();
    dist[t] = 0;
    heap.push(0, t as u32);
    while let Some((dv, v)) = heap.pop() {
        let v = v as usize;
        if dv > dist[v] {
            continue;
        }
        order.push(v as u32);
        for lc in fab.out(v) {
            let u = fab.head[lc] as usize;
            let nd = dv + back[lc];
            if nd < dist[u] {
                dist[u] = nd;
                heap.push(nd, u as u32);
            }
        }
    }
}

/// Fill `tree` (next hops towards the search's target, local index `k` on its switch): the
/// lightest next hops under the current weights among the switches the search found closer
/// (so the tree has no loop); with the search's own weights, its own choice.
#[allow(clippy::too_many_arguments)]
fn choose_next_hops(
    fab: &Fabric,
    weight: &[u64],
    dist: &[u64],
    order: &[u32],
    selector: &mut Selector,
    k: usize,
    tree: &mut [u16],
    cand_port: &mut Vec<Port>,
    cand_idx: &mut Vec<u16>,
) {
    for &v in &order[1..] {
        let v = v as usize;
        let dv = dist[v];
        let mut best = UNREACHED;
        cand_port.clear();
        cand_idx.clear();
        for (j, lc) in fab.out(v).enumerate() {
            let du = dist[fab.head[lc] as usize];
            if du >= dv {
                continue;
            }
            let cost = du + weight[lc];
            if cost < best {
                best = cost;
                cand_port.clear();
                cand_idx.clear();
            }
            if cost == best {
                cand_port.push(fab.port[lc]);
                cand_idx.push(j as u16);
            }
        }
        let p = selector.choose(v, k, cand_port);
        tree[v] = cand_idx[cand_port.iter().position(|&q| q == p).unwrap_or(0)];
    }
}

/// Add the routes of `tree` (towards switch `t`, every source switch sending its host count)
/// to the channel weights; `order` is the search order (parents first) unless `escaped`.
#[allow(clippy::too_many_arguments)]
fn add_load(
    fab: &Fabric,
    t: usize,
    order: &[u32],
    tree: &[u16],
    escaped: bool,
    weight: &mut [u64],
    back: &mut [u64],
    scratch: &mut LoadScratch,
) {
    let n = fab.num_switches;
    if !escaped {
        let load = &mut scratch.load;
        // Farthest first, so each switch's load is complete before it is passed on.
        for &v in order {
            load[v as usize] = fab.host_count(v as usize);
        }
        for &v in order.iter().rev() {
            let v = v as usize;
            if v != t {
                let (c, p) = fab.hop(tree, v);
                weight[c] += load[v];
                back[fab.rev[c] as usize] += load[v];
                load[p] += load[v];
            }
        }
    } else {
        // Escape routes follow no search order: pass loads on from the leaves (a switch once
        // all its children have), in time linear in the switches rather than the path lengths.
        let LoadScratch { load, waiting, ready } = scratch;
        waiting.clear();
        waiting.resize(n, 0);
        for v in 0..n {
            load[v] = fab.host_count(v);
            if v != t && tree[v] != NO_HOP {
                waiting[fab.hop(tree, v).1] += 1;
            }
        }
        ready.clear();
        ready.extend(
            (0..n as u32).filter(|&v| v as usize != t && tree[v as usize] != NO_HOP && waiting[v as usize] == 0),
        );
        while let Some(v) = ready.pop() {
            let v = v as usize;
            let (c, p) = fab.hop(tree, v);
            weight[c] += load[v];
            back[fab.rev[c] as usize] += load[v];
            load[p] += load[v];
            waiting[p] -= 1;
            if waiting[p] == 0 && p != t {
                ready.push(p as u32);
            }
        }
    }
}

/// Buffers of [`add_load`].
struct LoadScratch {
    /// Hosts whose routes cross each switch so far.
    load: Vec<u64>,
    /// Children of each switch whose load is still to come.
    waiting: Vec<u32>,
    /// Switches whose load is complete.
    ready: Vec<u32>,
}

/// LASH's trees: per destination switch `t`, every switch's minimal next hop chosen by
/// `select`, in `next[t * n + v]`; each tree is layered as soon as it is known, and routing
/// stops once the budget is exceeded.
fn lash_trees(topo: &Topology, fab: &Fabric, select: Select, greedy: &mut Greedy) -> Result<Vec<u16>> {
    let n = fab.num_switches;
    let graph = SwitchFabric::new(topo);
    let mut next = vec![NO_HOP; n * n];
    let mut selector = Selector::new(topo, select);
    let mut dist = vec![u32::MAX; n];
    let mut queue = Vec::with_capacity(n);
    let mut level_start: Vec<u32> = Vec::new();
    let mut sources: Vec<u32> = Vec::with_capacity(n);
    let mut cand_port: Vec<Port> = Vec::new();
    let mut cand_idx: Vec<u16> = Vec::new();
    for t in 0..n {
        if fab.host_count(t) == 0 {
            continue;
        }
        graph.bfs(t, &mut dist, &mut queue);
        for &d in fab.hosts_of(t) {
            selector.record(t, fab.host_port[d as usize]);
        }
        let tree = &mut next[t * n..(t + 1) * n];
        for v in 0..n {
            if v == t || dist[v] == u32::MAX {
                continue;
            }
            cand_port.clear();
            cand_idx.clear();
            let o = fab.out_start[v] as usize;
            for lc in fab.out(v) {
                if dist[fab.head[lc] as usize] + 1 == dist[v] {
                    cand_port.push(fab.port[lc]);
                    cand_idx.push((lc - o) as u16);
                }
            }
            // The shortest engine's choice for the first host of `t` serves them all; the
            // selector still sees every host, so its state stays the shortest engine's.
            let p = selector.choose(v, 0, &cand_port);
            for k in 1..fab.host_count(t) as usize {
                selector.choose(v, k, &cand_port);
            }
            tree[v] = cand_idx[cand_port.iter().position(|&q| q == p).unwrap_or(0)];
        }
        // Sources nearest first, by counting sort on the distance.
        let max_d = (0..n).filter(|&v| dist[v] != u32::MAX).map(|v| dist[v]).max().unwrap_or(0) as usize;
        level_start.clear();
        level_start.resize(max_d + 2, 0);
        let is_source = |v: usize| v != t && dist[v] != u32::MAX && fab.host_count(v) > 0;
        for v in (0..n).filter(|&v| is_source(v)) {
            level_start[dist[v] as usize + 1] += 1;
        }
        for i in 1..level_start.len() {
            level_start[i] += level_start[i - 1];
        }
        sources.clear();
        sources.resize(level_start[max_d + 1] as usize, 0);
        for v in (0..n).filter(|&v| is_source(v)) {
            let at = &mut level_start[dist[v] as usize];
            sources[*at as usize] = v as u32;
            *at += 1;
        }
        greedy.place_tree(topo, tree, t, t, 0, &sources)?;
    }
    Ok(next)
}

/// Monotone priority queue for Dijkstra (a radix heap): keys popped never decrease, so a key
/// lives in the bucket of the highest bit where it differs from the last key popped.
struct RadixHeap {
    last: u64,
    len: usize,
    buckets: Vec<Vec<(u64, u32)>>,
}

impl RadixHeap {
    fn new() -> Self {
        RadixHeap { last: 0, len: 0, buckets: (0..65).map(|_| Vec::new()).collect() }
    }

    #[inline]
    fn bucket(last: u64, key: u64) -> usize {
        (64 - (key ^ last).leading_zeros()) as usize
    }

    /// Push `item` with `key ≥` the last key popped.
    fn push(&mut self, key: u64, item: u32) {
        self.buckets[Self::bucket(self.last, key)].push((key, item));
        self.len += 1;
    }

    fn pop(&mut self) -> Option<(u64, u32)> {
        if self.len == 0 {
            self.last = 0;
            return None;
        }
        if self.buckets[0].is_empty() {
            let i = (1..65).find(|&i| !self.buckets[i].is_empty())?;
            let mut moved = std::mem::take(&mut self.buckets[i]);
            self.last = moved.iter().map(|e| e.0).min().unwrap_or(self.last);
            for e in moved.drain(..) {
                self.buckets[Self::bucket(self.last, e.0)].push(e);
            }
            self.buckets[i] = moved;
        }
        self.len -= 1;
        self.buckets[0].pop()
    }
}

/// First-fit layer assignment: per layer a bitset of dependencies, a bitset of dependencies
/// known to close a cycle there, and a topological order kept by Pearce–Kelly. The last
/// layer of the budget is the *escape layer*: it takes only up*/down*-legal paths (no
/// down→up turn in the orientation of [`EscapeRoutes`]), which are acyclic together without
/// any search, so a destination whose paths fit nowhere can always move there on up*/down*
/// routes.
struct Greedy<'a> {
    fab: &'a Fabric,
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
    /// Layering for `num_trees` trees over `fab` within `options.max_vcs` layers (≤ `MAX_VCS`),
    /// escape routes on the up*/down* orientation from `options.root` (or, if that switch
    /// cannot reach the hosts, from the first switch with hosts).
    fn new(
        topo: &Topology,
        fab: &'a Fabric,
        options: &RouteOptions,
        params: &LayeredParams,
        num_trees: usize,
    ) -> Result<Self> {
        let budget = (options.max_vcs as usize).clamp(1, MAX_VCS as usize);
        let root = if fab.num_switches == 0 { 0 } else { fab.escape_root(options.root) };
        Ok(Greedy {
            fab,
            fit: params.fit,
            tries: if params.tries == 0 { usize::MAX } else { params.tries as usize },
            search_limit: params.search_limit.max(1) as usize,
            ranked: Vec::new(),
            budget,
            layers: Vec::new(),
            layer_of: vec![0; fab.num_switches * num_trees],
            escape_used: false,
            escape: if fab.num_switches == 0 { None } else { Some(EscapeRoutes::new(topo, root)?) },
            escaped_trees: 0,
            patience: if params.patience == 0 { usize::MAX } else { params.patience as usize },
            last_fitted: false,
            tree_effort: if params.tree_effort == 0 { u64::MAX } else { params.tree_effort as u64 },
            covered: vec![0; fab.num_switches],
            touched: Vec::new(),
            walked: Vec::new(),
            tentative: Vec::new(),
            added: Vec::new(),
            search: PkSearch {
                mark: vec![0; fab.head.len()],
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

    fn finish(self) -> Layering {
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
    fn place_tree(
        &mut self,
        topo: &Topology,
        tree: &mut [u16],
        t: usize,
        row: usize,
        k: usize,
        sources: &[u32],
    ) -> Result<bool> {
        let fab = self.fab;
        let n = fab.num_switches;
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
            let mut u = if self.fit == Fit::First { fab.hop(tree, s).1 } else { t };
            while u != t {
                if fab.host_count(u) > 0 {
                    first = first.max(self.layer_of[row * n + u] as usize);
                }
                u = fab.hop(tree, u).1;
            }
            self.rank_layers(tree, t, s, first, escape);
            for i in 0..self.ranked.len().min(self.tries) {
                let l = self.ranked[i].1 as usize;
                if l == self.layers.len() {
                    self.layers.push(PkLayer {
                        edges: vec![0; fab.num_slots.div_ceil(64)],
                        redges: vec![0; fab.num_slots.div_ceil(64)],
                        forbidden: vec![0; fab.num_slots.div_ceil(64)],
                        ord: (0..fab.head.len() as u32).collect(),
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
            let j = slot as usize - fab.slot_base[c1];
            let c2 = fab.out_start[fab.head[c1] as usize] as usize + j;
            clear_bit(&mut layer.edges, slot as usize);
            clear_bit(&mut layer.redges, fab.rslot(c1, c2));
        }
        self.added.clear();
        let Some(escape_routes) = self.escape.as_mut() else {
            return Err(NetweaveError::Routing("escape routes on a fabric without switches".into()));
        };
        escape_routes.towards(t);
        for v in 0..n {
            if v == t {
                continue;
            }
            let ports = escape_routes.ports(v);
            if ports.is_empty() {
                tree[v] = NO_HOP;
                if fab.host_count(v) > 0 {
                    return Err(NetweaveError::Routing(format!(
                        "escape routes: switch {} cannot reach switch {} by up*/down* routes",
                        topo.label(topo.switches()[v]),
                        topo.label(topo.switches()[t])
                    )));
                }
                continue;
            }
            let p = ports[k % ports.len()];
            let o = fab.out_start[v] as usize;
            tree[v] = fab.out(v).position(|lc| fab.port[lc] == p).map_or(NO_HOP, |j| j as u16);
            debug_assert!(tree[v] != NO_HOP && o + (tree[v] as usize) < fab.out_start[v + 1] as usize);
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
        let fab = self.fab;
        self.ranked.clear();
        let open = self.layers.len().min(escape);
        for l in first..open {
            let mut missing = 0u32;
            if self.fit == Fit::Best {
                let layer = &self.layers[l];
                let flag = 1u32 << l;
                let mut u = s;
                while self.covered[u] & flag == 0 {
                    let (c1, p) = fab.hop(tree, u);
                    if p == t {
                        break;
                    }
                    let slot = fab.slot_base[c1] + tree[p] as usize;
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
        let fab = self.fab;
        let (mut u, mut came_down) = (s, false);
        while u != t {
            let p = fab.hop(tree, u).1;
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
        let fab = self.fab;
        let flag = 1u32 << l;
        self.walked.clear();
        self.tentative.clear();
        let mut u = s;
        let mut ok = true;
        // Up to the first switch whose own path is already in the layer, or to the root.
        while self.covered[u] & flag == 0 {
            self.walked.push(u as u32);
            let (c1, p) = fab.hop(tree, u);
            if p == t {
                break;
            }
            let slot = fab.slot_base[c1] + tree[p] as usize;
            let layer = &mut self.layers[l];
            if !bit(&layer.edges, slot) {
                if bit(&layer.forbidden, slot) {
                    ok = false;
                    break;
                }
                let c2 = fab.hop(tree, p).0;
                let verdict = self.search.insert(fab, layer, c1 as u32, c2 as u32, self.search_limit);
                if verdict == Some(true) {
                    set_bit(&mut layer.edges, slot);
                    set_bit(&mut layer.redges, fab.rslot(c1, c2));
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
                let p = fab.head[c1] as usize;
                self.added.push((l as u8, c1 as u32, (fab.slot_base[c1] + tree[p] as usize) as u32));
            }
        } else {
            // The order stays valid for the graph without them, so dropping the bits suffices.
            let layer = &mut self.layers[l];
            for &c1 in &self.tentative {
                let p = fab.head[c1] as usize;
                let c2 = fab.hop(tree, p).0;
                clear_bit(&mut layer.edges, fab.slot_base[c1] + tree[p] as usize);
                clear_bit(&mut layer.redges, fab.rslot(c1, c2));
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
    fn insert(&mut self, fab: &Fabric, layer: &mut PkLayer, x: u32, y: u32, limit: usize) -> Option<bool> {
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
                let h = fab.head[w as usize] as usize;
                let base = fab.slot_base[w as usize];
                let o = fab.out_start[h] as usize;
                let deg = fab.out_start[h + 1] as usize - o;
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
                let b = fab.tail[w as usize] as usize;
                let base = fab.rslot_base[w as usize];
                let o = fab.out_start[b] as usize;
                let deg = fab.out_start[b + 1] as usize - o;
                for chunk in (0..deg).step_by(64) {
                    let mut set = bits_at(&layer.redges, base + chunk, (deg - chunk).min(64));
                    while set != 0 {
                        let z = fab.rev[o + chunk + set.trailing_zeros() as usize] as usize;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{deadlock, minhop, route, Engine};
    use crate::topology::dragonfly::{dragonfly, GlobalArrangement};
    use crate::topology::fat_tree::k_ary_n_tree;
    use crate::topology::grid::{hypercube, mesh, torus};
    use crate::topology::lsft::latin_square_fat_tree;
    use crate::topology::fabric::SwitchFabric;
    use crate::topology::random::{irregular, random_regular};
    use crate::topology::{LinkSpec, TopologyBuilder};

    fn families() -> Vec<(&'static str, Topology)> {
        vec![
            ("torus 4x4", torus(&[4, 4], 1).unwrap()),
            ("torus 8x8", torus(&[8, 8], 1).unwrap()),
            ("torus 16x16", torus(&[16, 16], 1).unwrap()),
            ("torus 3x3x3", torus(&[3, 3, 3], 2).unwrap()),
            ("mesh 4x3", mesh(&[4, 3], 2).unwrap()),
            ("hypercube 4", hypercube(4, 1).unwrap()),
            ("random regular", random_regular(100, 4, 2, 7).unwrap()),
            ("random regular 2", random_regular(60, 5, 1, 3).unwrap()),
            ("irregular A", irregular(16, 4, 6, 4, 1).unwrap()),
            ("irregular B", irregular(16, 4, 6, 4, 2).unwrap()),
            ("lsft", latin_square_fat_tree(3, false, false).unwrap()),
            ("lsft two-sided", latin_square_fat_tree(2, true, false).unwrap()),
            ("dragonfly", dragonfly(4, 2, 2, None, GlobalArrangement::Relative).unwrap()),
            ("dragonfly abs", dragonfly(3, 1, 1, None, GlobalArrangement::Absolute).unwrap()),
            ("fat tree", k_ary_n_tree(4, 3).unwrap()),
        ]
    }

    fn opts(select: Select) -> RouteOptions {
        RouteOptions { max_vcs: 16, select, ..RouteOptions::default() }
    }

    #[test]
    fn layered_engines_are_deadlock_free_everywhere() {
        for (name, t) in families() {
            for engine in [Engine::Dfsssp, Engine::Lash] {
                for select in Select::ALL {
                    let r = route(&t, engine, &opts(select)).unwrap_or_else(|e| panic!("{name} {engine}: {e}"));
                    let rep = deadlock::check(&t, &r).unwrap();
                    assert!(rep.deadlock_free, "{name} {engine} {select}: cycle {:?}", rep.cycle);
                    assert!(rep.vcs_used <= r.vc_policy().num_vcs, "{name} {engine}");
                }
                // And within the default budget of 8.
                let r = route(&t, engine, &RouteOptions::default()).unwrap_or_else(|e| panic!("{name} {engine}: {e}"));
                assert!(deadlock::check(&t, &r).unwrap().deadlock_free, "{name} {engine}");
            }
        }
    }

    #[test]
    fn sssp_delivers_every_pair_and_is_minimal_on_a_light_fabric() {
        for (name, t) in families() {
            let r = sssp(&t, &RouteOptions::default()).unwrap();
            let mut path = Vec::new();
            for s in 0..t.num_hosts() {
                for d in 0..t.num_hosts() {
                    path.clear();
                    r.path(&t, s, d, &mut path).unwrap_or_else(|e| panic!("{name}: {e}"));
                }
            }
            assert_eq!(r.vc_policy().num_vcs, 1);
        }
        // A torus ring routed by SSSP has dependency cycles: that is dfsssp's job.
        let ring = torus(&[6], 1).unwrap();
        let r = route(&ring, Engine::Sssp, &RouteOptions::default()).unwrap();
        assert!(!deadlock::check(&ring, &r).unwrap().deadlock_free);
    }

    /// Two switches joined by `links` parallel links, `hosts` hosts on each.
    fn trunk(links: usize, hosts: usize) -> Topology {
        let mut b = TopologyBuilder::new("trunk");
        let s0 = b.add_switch("s0", (links + hosts) as Port);
        let s1 = b.add_switch("s1", (links + hosts) as Port);
        for _ in 0..links {
            b.connect(s0, s1, LinkSpec::default()).unwrap();
        }
        for i in 0..2 * hosts {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, if i < hosts { s0 } else { s1 }, LinkSpec::default()).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn sssp_balances_destinations_over_parallel_links() {
        // Four destinations on s1, four trunk links: one search serves s1's hosts (as in
        // OpenSM), so its four equally light links are a tie that spreading policies split.
        let t = trunk(4, 4);
        for select in [Select::PerDestination, Select::Balanced] {
            let r = sssp(&t, &RouteOptions { select, ..RouteOptions::default() }).unwrap();
            let mut ports: Vec<Port> = (4..8).map(|d| r.out_port(0, d)).collect();
            ports.sort_unstable();
            ports.dedup();
            assert_eq!(ports.len(), 4, "{select}: {ports:?}");
        }
    }

    #[test]
    fn sssp_spreads_load_unlike_low_port_shortest_paths() {
        // On a 4x4 torus the busiest channel carries fewer routes under SSSP than under
        // low-port shortest paths (which pile onto the lowest dimensions).
        let t = torus(&[4, 4], 2).unwrap();
        let max_load = |r: &RoutingTable| {
            let mut load = vec![0u32; t.num_channels()];
            let mut path = Vec::new();
            for s in 0..t.num_hosts() {
                for d in 0..t.num_hosts() {
                    path.clear();
                    r.path(&t, s, d, &mut path).unwrap();
                    for &c in &path {
                        load[c as usize] += 1;
                    }
                }
            }
            let (h0, h1) = (t.hosts()[0], t.hosts()[1]);
            (0..t.num_channels())
                .filter(|&c| {
                    let (a, b) = t.channel_ends(c as u32);
                    ![h0, h1].contains(&a.node) && !t.is_host(a.node) && !t.is_host(b.node)
                })
                .map(|c| load[c])
                .max()
                .unwrap()
        };
        let balanced = max_load(&sssp(&t, &RouteOptions::default()).unwrap());
        let low = max_load(&minhop::shortest_with(&t, Select::LowPort).unwrap());
        assert!(balanced < low, "sssp max channel load {balanced}, low-port {low}");
    }

    #[test]
    fn lash_routes_one_minimal_path_per_switch_pair() {
        for (name, t) in families() {
            for select in Select::ALL {
                let r = lash(&t, &opts(select)).unwrap();
                let graph = SwitchFabric::new(&t);
                let mut dist = vec![0; t.num_switches()];
                let mut path = Vec::new();
                for d in 0..t.num_hosts() {
                    let home = t.kind_index(t.host_switch(t.hosts()[d]).unwrap());
                    graph.bfs(home, &mut dist, &mut Vec::new());
                    for s in 0..t.num_hosts() {
                        let from = t.kind_index(t.host_switch(t.hosts()[s]).unwrap());
                        path.clear();
                        r.path(&t, s, d, &mut path).unwrap();
                        let expected = if s == d { 0 } else { dist[from] as usize + 2 };
                        assert_eq!(path.len(), expected, "{name} {select}");
                    }
                    // Hosts of one switch share the tree.
                    let d0 = t.neighbors(t.switches()[home]).iter().find(|a| t.is_host(a.neighbor)).unwrap();
                    let d0 = t.kind_index(d0.neighbor);
                    for v in (0..t.num_switches()).filter(|&v| v != home) {
                        assert_eq!(r.out_port(v, d), r.out_port(v, d0), "{name} {select}");
                    }
                }
            }
            // The shortest engine's next hops towards the first host of each switch; with
            // low-port, exactly its table.
            for select in Select::ALL {
                let a = lash(&t, &opts(select)).unwrap();
                let b = minhop::shortest_with(&t, select).unwrap();
                for d in 0..t.num_hosts() {
                    let home = t.host_switch(t.hosts()[d]).unwrap();
                    // The switch's first host in host order.
                    let d0 = t
                        .neighbors(home)
                        .iter()
                        .filter(|a| t.is_host(a.neighbor))
                        .map(|a| t.kind_index(a.neighbor))
                        .min()
                        .unwrap();
                    for v in (0..t.num_switches()).filter(|&v| v != t.kind_index(home)) {
                        assert_eq!(a.out_port(v, d), b.out_port(v, d0), "{name} {select}");
                    }
                }
            }
            let a = lash(&t, &opts(Select::LowPort)).unwrap();
            let b = minhop::shortest_with(&t, Select::LowPort).unwrap();
            assert_eq!(a.ports(), b.ports(), "{name}");
        }
    }

    #[test]
    fn dfsssp_keeps_sssp_paths() {
        // With one host per switch the sssp engine's host spreading has nothing to spread.
        for (name, t) in families().into_iter().take(8).filter(|(_, t)| t.num_hosts() == t.num_switches()) {
            for select in Select::ALL {
                let a = dfsssp(&t, &opts(select)).unwrap();
                let b = sssp(&t, &opts(select)).unwrap();
                assert_eq!(a.ports(), b.ports(), "{name} {select}");
            }
        }
    }

    #[test]
    fn trees_need_one_layer() {
        for t in [mesh(&[6], 2).unwrap(), k_ary_n_tree(2, 3).unwrap()] {
            for engine in [Engine::Dfsssp, Engine::Lash] {
                let r = route(&t, engine, &RouteOptions { max_vcs: 1, ..RouteOptions::default() }).unwrap();
                assert_eq!(r.vc_policy(), &VcPolicy::single());
                assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
            }
        }
    }

    #[test]
    fn a_budget_below_the_layers_needed_takes_escape_routes() {
        let t = torus(&[8, 8], 1).unwrap();
        let free = LayeredParams::default();
        for (engine, with) in [("dfsssp", dfsssp_with as LayeredFn), ("lash", lash_with as LayeredFn)] {
            let (r, stats) = with(&t, &opts(Select::PerDestination), &free).unwrap();
            let needed = r.vc_policy().num_vcs;
            assert!(needed >= 2, "{engine}");
            assert_eq!((stats.layers, stats.escaped_trees), (needed, 0), "{engine}");
            // Fewer layers than the paths need: some destinations take up*/down* routes in the
            // last layer, and the result stays deadlock-free within the budget.
            for budget in 1..needed {
                let o = RouteOptions { max_vcs: budget, ..RouteOptions::default() };
                let (r, stats) = with(&t, &o, &free).unwrap();
                assert!(r.vc_policy().num_vcs <= budget, "{engine} {budget}");
                let rep = deadlock::check(&t, &r).unwrap();
                assert!(rep.deadlock_free, "{engine} {budget}: {:?}", rep.cycle);
                if budget == 1 {
                    assert!(stats.escaped_trees > 0, "{engine}");
                }
            }
        }
    }

    type LayeredFn = fn(&Topology, &RouteOptions, &LayeredParams) -> Result<(RoutingTable, LayeredStats)>;

    #[test]
    fn random_regular_fabrics_route_within_a_tight_budget() {
        // Regression: a random regular fabric whose shortest paths need more layers than the
        // budget used to fail ("needs more than 2 VCs"); now it routes deadlock-free within it.
        let t = random_regular(64, 6, 2, 5).unwrap();
        for fit in [Fit::First, Fit::Best] {
            let params = LayeredParams { fit, ..LayeredParams::default() };
            for with in [dfsssp_with as LayeredFn, lash_with as LayeredFn] {
                let (_, free) = with(&t, &opts(Select::PerDestination), &params).unwrap();
                assert!(free.layers > 2 && free.escaped_trees == 0, "{free:?}");
                let o = RouteOptions { max_vcs: 2, ..RouteOptions::default() };
                let (r, stats) = with(&t, &o, &params).unwrap();
                assert_eq!(stats.layers, 2);
                assert!(stats.escaped_trees > 0);
                let rep = deadlock::check(&t, &r).unwrap();
                assert!(rep.deadlock_free && rep.vcs_used <= 2, "{:?}", rep.cycle);
            }
        }
    }

    #[test]
    fn saturation_back_off_and_effort_bound_only_add_escapes() {
        // Trying fewer trees, or giving each less search effort, sends more destinations to
        // the escape layer; the result stays deadlock-free within the budget either way.
        let t = random_regular(64, 6, 2, 5).unwrap();
        let o = RouteOptions { max_vcs: 2, ..RouteOptions::default() };
        let exhaustive = LayeredParams { patience: 0, tree_effort: 0, ..LayeredParams::default() };
        let hasty = LayeredParams { patience: 1, ..exhaustive };
        let frugal = LayeredParams { tree_effort: 1, ..exhaustive };
        for with in [dfsssp_with as LayeredFn, lash_with as LayeredFn] {
            let (_, all) = with(&t, &o, &exhaustive).unwrap();
            for params in [hasty, frugal] {
                let (r, stats) = with(&t, &o, &params).unwrap();
                assert!(stats.escaped_trees > all.escaped_trees, "{params:?}: {stats:?} against {all:?}");
                let rep = deadlock::check(&t, &r).unwrap();
                assert!(rep.deadlock_free && rep.vcs_used <= 2, "{:?}", rep.cycle);
            }
        }
    }

    #[test]
    fn best_fit_needs_no_more_layers_than_first_fit_for_lash() {
        // Gathering paths by shared turns packs LASH's minimal paths into fewer layers on
        // random regular fabrics (7 against 8 at 500 switches of degree 8).
        for (n, d, seed) in [(64, 6, 5), (100, 4, 7), (120, 8, 3)] {
            let t = random_regular(n, d, 1, seed).unwrap();
            let layers = |fit| {
                lash_with(&t, &opts(Select::PerDestination), &LayeredParams { fit, ..LayeredParams::default() })
                    .unwrap()
                    .1
                    .layers
            };
            let (first, best) = (layers(Fit::First), layers(Fit::Best));
            assert!(best <= first, "{n} switches: best fit {best} layers, first fit {first}");
        }
    }

    #[test]
    fn out_of_range_budget_is_refused() {
        let t = torus(&[4, 4], 1).unwrap();
        for max_vcs in [0, MAX_VCS + 1] {
            let o = RouteOptions { max_vcs, ..RouteOptions::default() };
            assert!(dfsssp(&t, &o).unwrap_err().to_string().contains("budget must be 1..=16"));
            assert!(lash(&t, &o).unwrap_err().to_string().contains("budget must be 1..=16"));
        }
    }

    #[test]
    fn per_pair_vcs_follow_the_source_switch() {
        let t = torus(&[4, 4], 3).unwrap();
        let r = lash(&t, &opts(Select::PerDestination)).unwrap();
        let Injection::PerPair { num_hosts, vcs } = &r.vc_policy().injection else {
            panic!("expected per-pair injection");
        };
        assert_eq!(*num_hosts, t.num_hosts());
        // Hosts 0..3 share switch 0, so their paths and VCs towards any destination agree.
        for d in 0..t.num_hosts() {
            assert_eq!(vcs[d], vcs[t.num_hosts() + d]);
            assert_eq!(vcs[d], vcs[2 * t.num_hosts() + d]);
        }
        assert!(vcs.iter().any(|&v| v > 0));
    }

    #[test]
    fn disconnected_fabric_names_its_components() {
        let mut b = TopologyBuilder::new("islands");
        let s: Vec<_> = (0..4).map(|i| b.add_switch(format!("s{i}"), 3)).collect();
        b.connect(s[0], s[1], LinkSpec::default()).unwrap();
        b.connect(s[2], s[3], LinkSpec::default()).unwrap();
        for (i, &sw) in s.iter().enumerate() {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, sw, LinkSpec::default()).unwrap();
        }
        let t = b.build().unwrap();
        for engine in [Engine::Sssp, Engine::Dfsssp, Engine::Lash] {
            let err = route(&t, engine, &RouteOptions::default()).unwrap_err().to_string();
            assert!(err.contains("2 components") && err.contains("{s0, s1}") && err.contains("{s2, s3}"), "{err}");
        }
        // A hostless island is harmless.
        let mut b = TopologyBuilder::new("hostless island");
        let s: Vec<_> = (0..3).map(|i| b.add_switch(format!("s{i}"), 3)).collect();
        b.connect(s[0], s[1], LinkSpec::default()).unwrap();
        for (i, &sw) in s.iter().take(2).enumerate() {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, sw, LinkSpec::default()).unwrap();
        }
        let t = b.build().unwrap();
        for engine in [Engine::Sssp, Engine::Dfsssp, Engine::Lash] {
            let r = route(&t, engine, &RouteOptions::default()).unwrap();
            assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
        }
    }

    #[test]
    fn degenerate_fabrics_do_not_panic() {
        let mut b = TopologyBuilder::new("one switch");
        let s = b.add_switch("s", 2);
        for i in 0..2 {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, s, LinkSpec::default()).unwrap();
        }
        let one = b.build().unwrap();
        let empty = TopologyBuilder::new("empty").build().unwrap();
        let mut b = TopologyBuilder::new("host pair");
        let h0 = b.add_host("a");
        let h1 = b.add_host("b");
        b.connect(h0, h1, LinkSpec::default()).unwrap();
        let bare = b.build().unwrap();
        for engine in [Engine::Sssp, Engine::Dfsssp, Engine::Lash] {
            let r = route(&one, engine, &RouteOptions::default()).unwrap();
            assert!(deadlock::check(&one, &r).unwrap().deadlock_free);
            assert!(route(&empty, engine, &RouteOptions::default()).is_ok());
            assert!(route(&bare, engine, &RouteOptions::default()).is_err());
        }
    }

    #[test]
    fn deterministic() {
        let t = random_regular(40, 4, 2, 11).unwrap();
        for engine in [Engine::Sssp, Engine::Dfsssp, Engine::Lash] {
            let a = route(&t, engine, &RouteOptions::default()).unwrap();
            let b = route(&t, engine, &RouteOptions::default()).unwrap();
            assert_eq!(a.ports(), b.ports());
            assert_eq!(a.vc_policy(), b.vc_policy());
        }
    }
}
