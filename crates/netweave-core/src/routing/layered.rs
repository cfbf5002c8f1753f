//! Layered shortest-path engines: SSSP, DFSSSP and LASH.
//!
//! * **SSSP** (Hoefler, Schneider & Lumsdaine, "Optimized Routing for Large-Scale InfiniBand
//!   Networks", HOTI 2009; Domke's OpenSM `sssp`): destination hosts are routed one after
//!   another, switch by switch. Each is a Dijkstra search over the switch-to-switch channels,
//!   weighted by the number of routes already crossing each channel plus one; the new routes
//!   are then added to the weights, so later destinations avoid busy channels and the load
//!   spreads over the whole fabric. One VC; not deadlock-free in general.
//! * **DFSSSP** (Domke, Hoefler & Nagel, "Deadlock-Free Oblivious Routing for Arbitrary
//!   Topologies", IPDPS 2011; OpenSM `dfsssp`): SSSP's paths, each (source, destination) path
//!   given a VC layer. All paths start in layer 0; while a layer's channel dependency graph
//!   (CDG) has a cycle, the paths over the cycle's weakest dependency (fewest host pairs) move
//!   to the next layer.
//! * **LASH** (Skeie, Lysne & Theiss, "Layered Shortest Path (LASH) Routing in Irregular
//!   System Area Networks", IPDPS 2002): the minimal paths of the `shortest` engine (same
//!   table, same selection policy), each assigned to the first layer whose CDG stays acyclic
//!   with it, a new layer when none does.
//!
//! # How the layering stays fast
//!
//! The table is destination-based, so the physical path of a pair depends only on the source
//! *switch* and the destination host: the unit that gets a layer is a (source switch,
//! destination host) path, shared by every host on that switch (`Injection::PerPair` then
//! repeats it per source host). The paths towards one destination form a tree, and the
//! dependencies of a tree are one per switch (its channel → its parent's channel), so:
//!
//! * a layer's CDG is a bit per possible dependency ("slot": channel `a→b` followed by one of
//!   `b`'s out-channels), a few hundred thousand bits even for 10,000 switches;
//! * LASH walks a new path only until it meets a switch whose path is already in the layer
//!   (sources are taken nearest-first, so usually one dependency per path), and checks each
//!   new dependency online with Pearce–Kelly dynamic topological ordering (Pearce & Kelly,
//!   JEA 2006): only the channels between the two ends in the current order are searched,
//!   and a dependency found to close a cycle is remembered as forbidden in that layer;
//! * DFSSSP keeps per-layer dependency counts (host pairs), runs one resumable DFS per layer
//!   (edges only disappear from the layer being searched, so finished channels stay
//!   finished), and moves a weakest dependency's paths by walking the subtrees of the trees
//!   that contain it, found by scanning two rows of the table.
//!
//! ```
//! use netweave_core::topology::grid::torus;
//! use netweave_core::routing::{deadlock, route, Engine, RouteOptions};
//! let t = torus(&[4, 4], 1).unwrap();
//! for engine in [Engine::Dfsssp, Engine::Lash] {
//!     let routes = route(&t, engine, &RouteOptions::default()).unwrap();
//!     assert!(deadlock::check(&t, &routes).unwrap().deadlock_free);
//!     assert!(routes.vc_policy().num_vcs >= 2); // a torus needs more than one layer
//! }
//! ```

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use crate::error::{NetweaveError, Result};
use crate::topology::metrics::SwitchGraph;
use crate::topology::{Port, Topology};

use super::minhop::hosts_by_switch;
use super::select::{Select, Selector};
use super::{Injection, RouteOptions, RoutingTable, VcPolicy, MAX_VCS, NO_PORT};

/// Tree entry "no next hop": the destination's own switch, or a switch that cannot reach it.
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
    let trees = sssp_trees(topo, &fab, options.select, false);
    Ok(fab.table(topo, "sssp", &trees.next))
}

/// DFSSSP: SSSP's paths spread over VC layers until every layer's dependency graph is acyclic.
///
/// Every (source, destination) path starts in layer 0; the layers are then taken in turn, and
/// while a depth-first search finds a dependency cycle in the current layer, all its paths over
/// the cycle's weakest dependency (the one fewest host pairs use) move to the next layer
/// (OpenSM's `dfsssp_remove_deadlocks`). The VC of a pair is its layer (`Injection::PerPair`,
/// no transitions; `Injection::Zero` when one layer suffices). Fails with the number of layers
/// needed when it exceeds `options.max_vcs`.
pub fn dfsssp(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    let fab = Fabric::new(topo, "dfsssp")?;
    let trees = sssp_trees(topo, &fab, options.select, true);
    let mut table = fab.table(topo, "dfsssp", &trees.next);
    let layering = CycleBreaker::new(&fab, &trees.next, table.ports(), trees.counts).run();
    table.set_vc_policy(fab.vc_policy("dfsssp", layering, options.max_vcs)?);
    Ok(table)
}

/// LASH: minimal paths, each switch-to-destination path in the first layer it keeps acyclic.
///
/// The paths are those of the `shortest` engine with `options.select` (identical table), so
/// the table stays destination-based; the unit placed in a layer is the path from a source
/// switch to a destination host (one shortest path per switch pair when the policy gives all
/// hosts of a switch the same next hops). Destinations are taken in host order, their sources
/// nearest first; each path goes to the lowest layer whose dependency graph stays acyclic
/// with it, a new layer is opened when none does. The VC of a pair is its layer
/// (`Injection::PerPair`, `Injection::Zero` when one layer suffices). Fails with the number
/// of layers needed when it exceeds `options.max_vcs`.
pub fn lash(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    let fab = Fabric::new(topo, "lash")?;
    let (next, layering) = lash_layers(topo, &fab, options.select);
    let mut table = fab.table(topo, "lash", &next);
    table.set_vc_policy(fab.vc_policy("lash", layering, options.max_vcs)?);
    Ok(table)
}

/// Switch-to-switch channels in flat arrays, numbered so that each switch's out-channels are
/// contiguous and in port order ("local channels"), plus where every host hangs.
struct Fabric {
    /// Number of switches.
    n: usize,
    num_hosts: usize,
    /// Local channels of switch `v`: `out_start[v]..out_start[v + 1]`.
    out_start: Vec<u32>,
    head: Vec<u32>,
    tail: Vec<u32>,
    port: Vec<Port>,
    /// The channel of the same link in the other direction.
    rev: Vec<u32>,
    /// Dependency slots of channel `c = a→b`: `slot_base[c] + j` stands for `c` followed by
    /// `b`'s `j`-th out-channel.
    slot_base: Vec<usize>,
    num_slots: usize,
    /// Hosts of switch `v`: `host_list[host_start[v]..host_start[v + 1]]`, host order.
    host_start: Vec<u32>,
    host_list: Vec<u32>,
    /// Switch of every host, and the port of that switch leading to it.
    host_switch: Vec<u32>,
    host_port: Vec<Port>,
}

impl Fabric {
    fn new(topo: &Topology, engine: &str) -> Result<Self> {
        let n = topo.num_switches();
        let by_switch = hosts_by_switch(topo)?;
        let mut out_start = Vec::with_capacity(n + 1);
        let (mut head, mut tail, mut port, mut orig) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (v, &node) in topo.switches().iter().enumerate() {
            out_start.push(head.len() as u32);
            for a in topo.neighbors(node) {
                if !topo.is_host(a.neighbor) {
                    head.push(topo.kind_index(a.neighbor) as u32);
                    tail.push(v as u32);
                    port.push(a.port);
                    orig.push(a.channel);
                }
            }
        }
        out_start.push(head.len() as u32);
        let mut local = vec![u32::MAX; topo.num_channels()];
        for (lc, &c) in orig.iter().enumerate() {
            local[c as usize] = lc as u32;
        }
        let rev: Vec<u32> = orig.iter().map(|&c| local[(c ^ 1) as usize]).collect();
        let mut slot_base = Vec::with_capacity(head.len() + 1);
        let mut acc = 0usize;
        for &h in &head {
            slot_base.push(acc);
            acc += (out_start[h as usize + 1] - out_start[h as usize]) as usize;
        }
        slot_base.push(acc);
        if acc > MAX_SLOTS {
            return Err(NetweaveError::Routing(format!(
                "{engine}: the fabric has {acc} possible channel dependencies, more than the {MAX_SLOTS} it can track"
            )));
        }
        let mut host_start = Vec::with_capacity(n + 1);
        let mut host_list = Vec::with_capacity(topo.num_hosts());
        let mut host_switch = vec![0u32; topo.num_hosts()];
        let mut host_port = vec![NO_PORT; topo.num_hosts()];
        for (v, hosts) in by_switch.iter().enumerate() {
            host_start.push(host_list.len() as u32);
            let node = topo.switches()[v];
            for &h in hosts {
                host_list.push(h as u32);
                host_switch[h] = v as u32;
                let host_node = topo.hosts()[h];
                host_port[h] = topo.neighbors(node).iter().find(|a| a.neighbor == host_node).map_or(NO_PORT, |a| a.port);
            }
        }
        host_start.push(host_list.len() as u32);
        let fab = Fabric {
            n,
            num_hosts: topo.num_hosts(),
            out_start,
            head,
            tail,
            port,
            rev,
            slot_base,
            num_slots: acc,
            host_start,
            host_list,
            host_switch,
            host_port,
        };
        fab.check_connected(topo, engine)?;
        Ok(fab)
    }

    fn out(&self, v: usize) -> std::ops::Range<usize> {
        self.out_start[v] as usize..self.out_start[v + 1] as usize
    }

    fn hosts_of(&self, v: usize) -> &[u32] {
        &self.host_list[self.host_start[v] as usize..self.host_start[v + 1] as usize]
    }

    fn host_count(&self, v: usize) -> u64 {
        (self.host_start[v + 1] - self.host_start[v]) as u64
    }

    /// Errors, naming the components, when hosts sit on switches that cannot reach each other.
    fn check_connected(&self, topo: &Topology, engine: &str) -> Result<()> {
        // Union-find over the links; components are few and small to name.
        let mut parent: Vec<u32> = (0..self.n as u32).collect();
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
        let mut roots: Vec<u32> = Vec::new();
        for v in 0..self.n {
            let r = find(&mut parent, v as u32);
            if self.host_count(v) > 0 && !roots.contains(&r) {
                roots.push(r);
                if roots.len() > 4 {
                    break;
                }
            }
        }
        if roots.len() <= 1 {
            return Ok(());
        }
        let total = (0..self.n)
            .filter(|&v| self.host_count(v) > 0)
            .map(|v| find(&mut parent, v as u32))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let names: Vec<String> = roots
            .iter()
            .take(4)
            .map(|&r| {
                let members: Vec<usize> = (0..self.n).filter(|&v| find(&mut parent, v as u32) == r).collect();
                let shown: Vec<&str> = members.iter().take(3).map(|&v| topo.label(topo.switches()[v])).collect();
                let more = if members.len() > 3 { ", …" } else { "" };
                format!("{{{}{more}}} ({} switches)", shown.join(", "), members.len())
            })
            .collect();
        let rest = if total > 4 { format!(", … {total} in all") } else { String::new() };
        Err(NetweaveError::Routing(format!(
            "{engine} needs a connected fabric, but its hosts sit in {total} components: {}{rest}",
            names.join(", ")
        )))
    }

    /// Fill a routing table from destination-major trees (`next[d * n + v]` = index of the
    /// out-channel of switch `v` towards host `d`).
    fn table(&self, topo: &Topology, engine: &str, next: &[u16]) -> RoutingTable {
        let (n, nh) = (self.n, self.num_hosts);
        let mut table = RoutingTable::new(topo, engine);
        // Blocks of switches: `next` is read a short run per destination, the table written
        // in a few rows at a time, so neither side thrashes the cache.
        const BLOCK: usize = 64;
        for s0 in (0..n).step_by(BLOCK) {
            let s1 = (s0 + BLOCK).min(n);
            for d in 0..nh {
                let row = &next[d * n + s0..d * n + s1];
                let home = self.host_switch[d] as usize;
                for (i, &j) in row.iter().enumerate() {
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

    /// The VC policy of a layering, or the one-line error when it needs more than the budget.
    fn vc_policy(&self, engine: &str, layering: Layering, max_vcs: u8) -> Result<VcPolicy> {
        let Layering { layer_of, num_layers } = layering;
        if num_layers > MAX_VCS as usize {
            return Err(NetweaveError::Routing(format!(
                "{engine} needs more than {MAX_VCS} VCs on this fabric, the budget is {max_vcs}"
            )));
        }
        if num_layers > max_vcs as usize {
            return Err(NetweaveError::Routing(format!(
                "{engine} needs {num_layers} VCs on this fabric, the budget is {max_vcs}"
            )));
        }
        if num_layers <= 1 {
            // One layer: every pair on VC 0, no need for a hosts² table.
            return Ok(VcPolicy::single());
        }
        let (n, nh) = (self.n, self.num_hosts);
        if nh.saturating_mul(nh) > MAX_PAIR_TABLE {
            return Err(NetweaveError::Routing(format!(
                "{engine}: a per-pair VC table for {nh} hosts would take {} GiB",
                (nh as u128 * nh as u128) >> 30
            )));
        }
        // Transpose the destination-major layers to switch-major in blocks of switches, then
        // copy each source switch's row to all its hosts.
        const BLOCK: usize = 64;
        let mut by_switch = vec![0u8; n * nh];
        by_switch.par_chunks_mut(BLOCK * nh).enumerate().for_each(|(b, rows)| {
            let s0 = b * BLOCK;
            let width = rows.len() / nh.max(1);
            for d in 0..nh {
                let src = &layer_of[d * n + s0..d * n + s0 + width];
                for (i, &l) in src.iter().enumerate() {
                    rows[i * nh + d] = l;
                }
            }
        });
        drop(layer_of);
        let mut vcs = vec![0u8; nh * nh];
        vcs.par_chunks_mut(nh.max(1)).enumerate().for_each(|(src, row)| {
            let s = self.host_switch[src] as usize;
            // Pairs on one switch were never placed, so their entries are VC 0.
            row.copy_from_slice(&by_switch[s * nh..(s + 1) * nh]);
        });
        Ok(VcPolicy { num_vcs: num_layers as u8, injection: Injection::PerPair { num_hosts: nh, vcs }, transitions: None })
    }
}

/// A layer per (source switch, destination host), destination-major: `layer_of[d * n + s]`.
struct Layering {
    layer_of: Vec<u8>,
    /// Layers used; `MAX_VCS + 1` means "more than `MAX_VCS`" (the search stopped there).
    num_layers: usize,
}

/// SSSP route trees: `next[d * n + v]` is the out-channel index (position in `v`'s out list)
/// of switch `v` towards host `d`; `counts[slot]` the host pairs using each dependency
/// (DFSSSP's layer 0), when asked for.
struct Trees {
    next: Vec<u16>,
    counts: Vec<u64>,
}

/// Route every destination host by Dijkstra over the current channel weights (see [`sssp`]).
fn sssp_trees(topo: &Topology, fab: &Fabric, select: Select, want_counts: bool) -> Trees {
    let n = fab.n;
    let mut next = vec![NO_HOP; n * fab.num_hosts];
    let mut counts = if want_counts { vec![0u64; fab.num_slots] } else { Vec::new() };
    let mut weight = vec![1u64; fab.head.len()];
    let mut selector = Selector::new(topo, select);
    let mut dist = vec![UNREACHED; n];
    let mut order: Vec<u32> = Vec::with_capacity(n);
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::with_capacity(n);
    let mut load = vec![0u64; n];
    let mut cand_port: Vec<Port> = Vec::new();
    let mut cand_idx: Vec<u16> = Vec::new();
    for t in 0..n {
        for (k, &d) in fab.hosts_of(t).iter().enumerate() {
            let d = d as usize;
            // Dijkstra from the destination switch along reversed channels: dist[v] is the
            // weight of the lightest path v → t.
            dist.fill(UNREACHED);
            order.clear();
            dist[t] = 0;
            heap.push(Reverse((0, t as u32)));
            while let Some(Reverse((dv, v))) = heap.pop() {
                let v = v as usize;
                if dv > dist[v] {
                    continue;
                }
                order.push(v as u32);
                for lc in fab.out(v) {
                    let u = fab.head[lc] as usize;
                    let nd = dv + weight[fab.rev[lc] as usize];
                    if nd < dist[u] {
                        dist[u] = nd;
                        heap.push(Reverse((nd, u as u32)));
                    }
                }
            }
            let tree = &mut next[d * n..(d + 1) * n];
            selector.record(t, fab.host_port[d]);
            for v in 0..n {
                if v == t || dist[v] == UNREACHED {
                    continue;
                }
                cand_port.clear();
                cand_idx.clear();
                let o = fab.out_start[v] as usize;
                for lc in fab.out(v) {
                    let u = fab.head[lc] as usize;
                    if dist[u] != UNREACHED && dist[u] + weight[lc] == dist[v] {
                        cand_port.push(fab.port[lc]);
                        cand_idx.push((lc - o) as u16);
                    }
                }
                let p = selector.choose(v, k, &cand_port);
                let pos = cand_port.iter().position(|&q| q == p).unwrap_or(0);
                tree[v] = cand_idx[pos];
            }
            // Farthest first, so each switch's load is complete before it is passed on.
            for &v in &order {
                load[v as usize] = fab.host_count(v as usize);
            }
            for &v in order.iter().rev() {
                let v = v as usize;
                if v == t {
                    continue;
                }
                let c = fab.out_start[v] as usize + tree[v] as usize;
                let p = fab.head[c] as usize;
                let l = load[v];
                weight[c] += l;
                load[p] += l;
                if want_counts && p != t && l > 0 {
                    counts[fab.slot_base[c] + tree[p] as usize] += l;
                }
            }
        }
    }
    Trees { next, counts }
}

/// The `shortest` engine's trees (same selection calls in the same order, so the same table),
/// layered greedily while they are built (see [`lash`]).
fn lash_layers(topo: &Topology, fab: &Fabric, select: Select) -> (Vec<u16>, Layering) {
    let n = fab.n;
    let graph = SwitchGraph::new(topo);
    let mut next = vec![NO_HOP; n * fab.num_hosts];
    let mut layer_of = vec![0u8; n * fab.num_hosts];
    let mut selector = Selector::new(topo, select);
    let mut dist = vec![u32::MAX; n];
    let mut queue = Vec::with_capacity(n);
    let mut level_start: Vec<u32> = Vec::new();
    let mut order: Vec<u32> = Vec::with_capacity(n);
    let mut cand_off: Vec<u32> = Vec::with_capacity(n + 1);
    let mut cand_port: Vec<Port> = Vec::new();
    let mut cand_idx: Vec<u16> = Vec::new();
    let mut greedy = Greedy::new(fab);
    let mut failed = false;
    for t in 0..n {
        let hosts = fab.hosts_of(t);
        if hosts.is_empty() {
            continue;
        }
        graph.bfs(t, &mut dist, &mut queue);
        // Sources nearest first (counting sort by distance): a path then mostly joins its
        // parent's, already placed, after one new dependency.
        let max_d = (0..n).filter(|&v| dist[v] != u32::MAX).map(|v| dist[v]).max().unwrap_or(0) as usize;
        level_start.clear();
        level_start.resize(max_d + 2, 0);
        for v in 0..n {
            if v != t && dist[v] != u32::MAX && fab.host_count(v) > 0 {
                level_start[dist[v] as usize + 1] += 1;
            }
        }
        for i in 1..level_start.len() {
            level_start[i] += level_start[i - 1];
        }
        order.clear();
        order.resize(level_start[max_d + 1] as usize, 0);
        for v in 0..n {
            if v != t && dist[v] != u32::MAX && fab.host_count(v) > 0 {
                let slot = &mut level_start[dist[v] as usize];
                order[*slot as usize] = v as u32;
                *slot += 1;
            }
        }
        // Minimal next hops of every switch, shared by the hosts of `t`.
        cand_off.clear();
        cand_port.clear();
        cand_idx.clear();
        for v in 0..n {
            cand_off.push(cand_port.len() as u32);
            if v == t || dist[v] == u32::MAX {
                continue;
            }
            let o = fab.out_start[v] as usize;
            for lc in fab.out(v) {
                if dist[fab.head[lc] as usize] + 1 == dist[v] {
                    cand_port.push(fab.port[lc]);
                    cand_idx.push((lc - o) as u16);
                }
            }
        }
        cand_off.push(cand_port.len() as u32);
        for (k, &d) in hosts.iter().enumerate() {
            let d = d as usize;
            selector.record(t, fab.host_port[d]);
            let tree = &mut next[d * n..(d + 1) * n];
            for v in 0..n {
                let (lo, hi) = (cand_off[v] as usize, cand_off[v + 1] as usize);
                if lo == hi {
                    continue;
                }
                let p = selector.choose(v, k, &cand_port[lo..hi]);
                let pos = cand_port[lo..hi].iter().position(|&q| q == p).unwrap_or(0);
                tree[v] = cand_idx[lo + pos];
            }
            if !failed && !greedy.place_tree(tree, t, &order, &mut layer_of[d * n..(d + 1) * n]) {
                failed = true;
            }
        }
    }
    let num_layers = if failed { MAX_VCS as usize + 1 } else { greedy.layers.len().max(1) };
    (next, Layering { layer_of, num_layers })
}

/// LASH's layers: per layer a bitset of dependencies, one of dependencies known to close a
/// cycle, and a topological order of the channels kept by Pearce–Kelly.
struct Greedy<'a> {
    fab: &'a Fabric,
    layers: Vec<PkLayer>,
    /// Per switch of the current tree: bit `l` = its path to the destination is in layer `l`.
    covered: Vec<u32>,
    touched: Vec<u32>,
    walked: Vec<u32>,
    tentative: Vec<usize>,
    dag: PkScratch,
}

struct PkLayer {
    edges: Vec<u64>,
    forbidden: Vec<u64>,
    /// Position of every channel in a topological order of the layer's dependency graph.
    ord: Vec<u32>,
}

/// Search buffers shared by all layers; `mark[c] == epoch` = visited in the current search.
struct PkScratch {
    mark: Vec<u32>,
    epoch: u32,
    stack: Vec<u32>,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    pool: Vec<u32>,
}

#[inline]
fn bit(bits: &[u64], i: usize) -> bool {
    bits[i >> 6] >> (i & 63) & 1 != 0
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
    fn new(fab: &'a Fabric) -> Self {
        let m = fab.head.len();
        Greedy {
            fab,
            layers: Vec::new(),
            covered: vec![0; fab.n],
            touched: Vec::new(),
            walked: Vec::new(),
            tentative: Vec::new(),
            dag: PkScratch {
                mark: vec![0; m],
                epoch: 0,
                stack: Vec::new(),
                fwd: Vec::new(),
                bwd: Vec::new(),
                pool: Vec::new(),
            },
        }
    }

    /// Place the path of every source in `order` towards the root `t` of `tree`; false when
    /// some path fits in none of `MAX_VCS` layers.
    fn place_tree(&mut self, tree: &[u16], t: usize, order: &[u32], layer_row: &mut [u8]) -> bool {
        let mut ok = true;
        'sources: for &s in order {
            for l in 0..MAX_VCS as usize {
                if l == self.layers.len() {
                    let m = self.fab.head.len();
                    let words = self.fab.num_slots.div_ceil(64);
                    self.layers.push(PkLayer {
                        edges: vec![0; words],
                        forbidden: vec![0; words],
                        ord: (0..m as u32).collect(),
                    });
                }
                if self.try_path(tree, t, s as usize, l) {
                    layer_row[s as usize] = l as u8;
                    continue 'sources;
                }
            }
            ok = false;
            break;
        }
        for &v in &self.touched {
            self.covered[v as usize] = 0;
        }
        self.touched.clear();
        ok
    }

    /// Add the path `s → t` of `tree` to layer `l` if it keeps the layer acyclic.
    fn try_path(&mut self, tree: &[u16], t: usize, s: usize, l: usize) -> bool {
        let fab = self.fab;
        let flag = 1u32 << l;
        self.walked.clear();
        self.tentative.clear();
        let mut u = s;
        let mut ok = true;
        loop {
            if self.covered[u] & flag != 0 {
                break;
            }
            self.walked.push(u as u32);
            let c1 = fab.out_start[u] as usize + tree[u] as usize;
            let p = fab.head[c1] as usize;
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
                let c2 = fab.out_start[p] as usize + tree[p] as usize;
                if self.dag.insert(fab, layer, c1 as u32, c2 as u32) {
                    set_bit(&mut layer.edges, slot);
                    self.tentative.push(slot);
                } else {
                    // Only a verdict against the layer as it stands (without this path's own
                    // tentative dependencies) holds for good: layers only ever grow.
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
        } else {
            // The order stays valid for the graph without them, so dropping the bits suffices.
            for &slot in &self.tentative {
                clear_bit(&mut self.layers[l].edges, slot);
            }
        }
        ok
    }
}

impl PkScratch {
    /// Pearce–Kelly: can dependency `x → y` join `layer` without a cycle? If so, reorder the
    /// affected channels so that `x` precedes `y` (the caller sets the bit).
    fn insert(&mut self, fab: &Fabric, layer: &mut PkLayer, x: u32, y: u32) -> bool {
        let ub = layer.ord[x as usize];
        let lb = layer.ord[y as usize];
        if lb > ub {
            return true;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.mark.fill(0);
            self.epoch = 1;
        }
        let ep = self.epoch;
        // Forward from y through channels ordered before x: reaching x closes a cycle.
        self.fwd.clear();
        self.stack.clear();
        self.stack.push(y);
        self.mark[y as usize] = ep;
        while let Some(w) = self.stack.pop() {
            self.fwd.push(w);
            let h = fab.head[w as usize] as usize;
            let base = fab.slot_base[w as usize];
            let o = fab.out_start[h];
            for j in 0..(fab.out_start[h + 1] - o) as usize {
                if !bit(&layer.edges, base + j) {
                    continue;
                }
                let z = o + j as u32;
                if z == x {
                    return false;
                }
                if layer.ord[z as usize] < ub && self.mark[z as usize] != ep {
                    self.mark[z as usize] = ep;
                    self.stack.push(z);
                }
            }
        }
        // Backward from x through channels ordered after y.
        self.bwd.clear();
        self.stack.push(x);
        self.mark[x as usize] = ep;
        while let Some(w) = self.stack.pop() {
            self.bwd.push(w);
            let b = fab.tail[w as usize] as usize;
            let j = w as usize - fab.out_start[b] as usize;
            for lc in fab.out(b) {
                let z = fab.rev[lc];
                if !bit(&layer.edges, fab.slot_base[z as usize] + j) {
                    continue;
                }
                if layer.ord[z as usize] > lb && self.mark[z as usize] != ep {
                    self.mark[z as usize] = ep;
                    self.stack.push(z);
                }
            }
        }
        // Everything that reaches x goes before everything y reaches, in the same positions.
        let ord = &mut layer.ord;
        self.bwd.sort_unstable_by_key(|&w| ord[w as usize]);
        self.fwd.sort_unstable_by_key(|&w| ord[w as usize]);
        self.pool.clear();
        self.pool.extend(self.bwd.iter().chain(self.fwd.iter()).map(|&w| ord[w as usize]));
        self.pool.sort_unstable();
        for (&w, &pos) in self.bwd.iter().chain(self.fwd.iter()).zip(self.pool.iter()) {
            ord[w as usize] = pos;
        }
        true
    }
}

const WHITE: u8 = 0;
const GREY: u8 = 1;
const BLACK: u8 = 2;

/// DFSSSP's layering: per-layer dependency counts (host pairs), cycles broken at their weakest
/// dependency by moving its paths one layer up.
struct CycleBreaker<'a> {
    fab: &'a Fabric,
    next: &'a [u16],
    ports: &'a [Port],
    layer_of: Vec<u8>,
    /// `counts[l][slot]`: host pairs whose path in layer `l` has that dependency.
    counts: Vec<Vec<u64>>,
    color: Vec<u8>,
    stack_pos: Vec<u32>,
    /// DFS path: (channel, index of its next dependency slot to look at).
    stack: Vec<(u32, u32)>,
    subtree: Vec<u32>,
    moved: Vec<u64>,
    too_many: bool,
}

impl<'a> CycleBreaker<'a> {
    fn new(fab: &'a Fabric, next: &'a [u16], ports: &'a [Port], counts: Vec<u64>) -> Self {
        let m = fab.head.len();
        CycleBreaker {
            fab,
            next,
            ports,
            layer_of: vec![0; fab.n * fab.num_hosts],
            counts: vec![counts],
            color: vec![WHITE; m],
            stack_pos: vec![0; m],
            stack: Vec::new(),
            subtree: Vec::new(),
            moved: vec![0; fab.n],
            too_many: false,
        }
    }

    fn run(mut self) -> Layering {
        let mut l = 0;
        while l < self.counts.len() && !self.too_many {
            self.break_layer(l);
            l += 1;
        }
        let num_layers = if self.too_many { MAX_VCS as usize + 1 } else { self.counts.len() };
        Layering { layer_of: self.layer_of, num_layers }
    }

    /// Depth-first search of layer `l`, breaking every cycle it meets. Dependencies only
    /// disappear from layer `l` meanwhile, so a finished (black) channel stays cycle-free.
    fn break_layer(&mut self, l: usize) {
        let fab = self.fab;
        let m = fab.head.len();
        self.color.fill(WHITE);
        for root in 0..m {
            if self.color[root] != WHITE {
                continue;
            }
            self.color[root] = GREY;
            self.stack_pos[root] = 0;
            self.stack.push((root as u32, 0));
            while let Some(&(v, j)) = self.stack.last() {
                let h = fab.head[v as usize] as usize;
                let o = fab.out_start[h];
                if j == fab.out_start[h + 1] - o {
                    self.color[v as usize] = BLACK;
                    self.stack.pop();
                    continue;
                }
                if let Some(top) = self.stack.last_mut() {
                    top.1 = j + 1;
                }
                let slot = fab.slot_base[v as usize] + j as usize;
                if self.counts[l][slot] == 0 {
                    continue;
                }
                let z = (o + j) as usize;
                match self.color[z] {
                    WHITE => {
                        self.color[z] = GREY;
                        self.stack_pos[z] = self.stack.len() as u32;
                        self.stack.push((z as u32, 0));
                    }
                    GREY => {
                        self.break_cycle(l, self.stack_pos[z] as usize, slot, z as u32);
                        if self.too_many {
                            self.stack.clear();
                            return;
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// The cycle is the DFS path from position `i` to the top plus the back dependency
    /// `top → z` (`back_slot`): move the paths of its weakest dependency up a layer, then cut
    /// the DFS path below the lowest dependency that vanished.
    fn break_cycle(&mut self, l: usize, i: usize, back_slot: usize, z: u32) {
        let fab = self.fab;
        let top = self.stack.len() - 1;
        let counts = &self.counts[l];
        let mut best = (counts[back_slot], self.stack[top].0, z);
        for k in i..top {
            let (a, ja) = self.stack[k];
            let c = counts[fab.slot_base[a as usize] + ja as usize - 1];
            if c < best.0 {
                best = (c, a, self.stack[k + 1].0);
            }
        }
        if !self.move_paths(l, best.1 as usize, best.2 as usize) {
            self.too_many = true;
            return;
        }
        let counts = &self.counts[l];
        for k in 0..top {
            let (a, ja) = self.stack[k];
            if counts[fab.slot_base[a as usize] + ja as usize - 1] == 0 {
                for &(w, _) in &self.stack[k + 1..] {
                    self.color[w as usize] = WHITE;
                }
                self.stack.truncate(k + 1);
                return;
            }
        }
        debug_assert_eq!(counts[back_slot], 0, "the weakest dependency of a cycle must vanish");
    }

    /// Move every layer-`l` path with dependency `c1 → c2` to layer `l + 1`; false when that
    /// would be layer `MAX_VCS`.
    fn move_paths(&mut self, l: usize, c1: usize, c2: usize) -> bool {
        if l + 1 >= MAX_VCS as usize {
            return false;
        }
        if self.counts.len() == l + 1 {
            self.counts.push(vec![0; self.fab.num_slots]);
        }
        let fab = self.fab;
        let (n, nh) = (fab.n, fab.num_hosts);
        let (a, b) = (fab.tail[c1] as usize, fab.head[c1] as usize);
        let (p1, p2) = (fab.port[c1], fab.port[c2]);
        let row_a = &self.ports[a * nh..(a + 1) * nh];
        let row_b = &self.ports[b * nh..(b + 1) * nh];
        let (lower, upper) = self.counts.split_at_mut(l + 1);
        let (from, to) = (&mut lower[l], &mut upper[0]);
        for d in 0..nh {
            if row_a[d] != p1 || row_b[d] != p2 {
                continue;
            }
            // The trees of destination d through c1 → c2: the sources below `a`.
            let tree = &self.next[d * n..(d + 1) * n];
            let layers = &mut self.layer_of[d * n..(d + 1) * n];
            self.subtree.clear();
            self.subtree.push(a as u32);
            let mut i = 0;
            while i < self.subtree.len() {
                let v = self.subtree[i] as usize;
                i += 1;
                for lc in fab.out(v) {
                    let u = fab.head[lc] as usize;
                    let r = fab.rev[lc] as usize;
                    if tree[u] != NO_HOP && fab.out_start[u] as usize + tree[u] as usize == r {
                        self.subtree.push(u as u32);
                    }
                }
            }
            // Children before parents: the host pairs moved below each switch add up.
            for &v in &self.subtree {
                self.moved[v as usize] = 0;
            }
            for (idx, &v) in self.subtree.iter().enumerate().rev() {
                let v = v as usize;
                if layers[v] as usize == l && fab.host_count(v) > 0 {
                    layers[v] = l as u8 + 1;
                    self.moved[v] += fab.host_count(v);
                }
                let w = self.moved[v];
                if w == 0 {
                    continue;
                }
                let c = fab.out_start[v] as usize + tree[v] as usize;
                let p = fab.head[c] as usize;
                let slot = fab.slot_base[c] + tree[p] as usize;
                from[slot] -= w;
                to[slot] += w;
                if idx > 0 {
                    self.moved[p] += w;
                }
            }
            // Above `a`: b and on towards the destination carry all of it.
            let w = self.moved[a];
            if w == 0 {
                continue;
            }
            let mut u = b;
            loop {
                let c = fab.out_start[u] as usize + tree[u] as usize;
                let p = fab.head[c] as usize;
                if tree[p] == NO_HOP {
                    break;
                }
                let slot = fab.slot_base[c] + tree[p] as usize;
                from[slot] -= w;
                to[slot] += w;
                u = p;
            }
        }
        true
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
        // Four destinations on s1, four trunk links: the weights send each over its own link,
        // whatever the tie-breaking policy.
        let t = trunk(4, 4);
        for select in [Select::LowPort, Select::PerDestination, Select::Balanced] {
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
    fn lash_uses_the_shortest_engine_table() {
        for (name, t) in families() {
            for select in Select::ALL {
                let a = lash(&t, &opts(select)).unwrap();
                let b = minhop::shortest_with(&t, select).unwrap();
                assert_eq!(a.ports(), b.ports(), "{name} {select}");
            }
        }
    }

    #[test]
    fn dfsssp_keeps_sssp_paths() {
        for (name, t) in families().into_iter().take(8) {
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
    fn budget_error_names_the_needed_count() {
        let t = torus(&[8, 8], 1).unwrap();
        for (engine, name) in [(Engine::Dfsssp, "dfsssp"), (Engine::Lash, "lash")] {
            let needed = route(&t, engine, &opts(Select::PerDestination)).unwrap().vc_policy().num_vcs;
            assert!(needed >= 2);
            let budget = needed - 1;
            let err = route(&t, engine, &RouteOptions { max_vcs: budget, ..RouteOptions::default() })
                .unwrap_err()
                .to_string();
            assert_eq!(
                err,
                format!("routing error: {name} needs {needed} VCs on this fabric, the budget is {budget}"),
                "{err}"
            );
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
        for i in 0..2 {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, s[i], LinkSpec::default()).unwrap();
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
