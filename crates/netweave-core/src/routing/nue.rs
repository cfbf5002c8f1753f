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
//!    likewise keeps each layer's destinations close together. A round-robin split is
//!    available through [`NueParams`]. Every host is injected on its destination's layer
//!    ([`Injection::PerDestination`]); the VC never changes in the network.
//! 2. **Escape paths.** Per layer, a BFS spanning tree is rooted at a switch central to that
//!    layer's destinations (smallest eccentricity towards them, found by a double sweep and a
//!    short local search). The dependencies of tree routes (up, turn at the lowest common
//!    ancestor, down) towards every destination of the layer go into the layer's dependency
//!    graph first. They are acyclic (up channels deepest first, then down channels), and they
//!    guarantee every destination stays reachable whatever else the layer holds.
//! 3. **Routing in the dependency graph.** Destinations are routed one host at a time by a
//!    Dijkstra from the destination's switch outwards in which a switch `v` may attach to an
//!    already settled neighbour `u` over channel `v→u` only if the dependency
//!    `(v→u) → (u's channel)` is already in the layer's graph or can be added without closing
//!    a cycle. Acyclicity is maintained online with the Pearce–Kelly dynamic topological
//!    order (amortised small searches instead of a cycle search per edge); a dependency found
//!    to close a cycle is blocked for good. Candidates are checked when they leave the heap,
//!    and a switch whose best candidate fails is re-offered its other settled neighbours.
//!    Channel weights start at `hosts²` and grow by the number of source hosts each routed
//!    tree sends over a channel, so paths stay short while load spreads (as in Nue/SSSP);
//!    at equal weight an existing dependency is preferred to a new one.
//! 4. **Impasse.** If the search cannot reach every switch, the dependencies it added for
//!    this destination are withdrawn and the destination is routed on the escape tree.
//!    (OpenSM first tries local backtracking; this implementation falls back directly and
//!    counts the fallbacks in [`NueStats`].)
//!
//! The next hop is unique (weighted search), so [`RouteOptions::select`] does not apply;
//! nor does [`RouteOptions::root`] — the escape root is chosen per layer. Nothing is random.
//! Switches without hosts in a component of their own are left without routes; hosts spread
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
use crate::topology::metrics::SwitchGraph;
use crate::topology::{Port, Topology};

use super::minhop::hosts_by_switch;
use super::{Injection, RouteOptions, RoutingTable, VcPolicy, MAX_VCS};

/// "No channel / no switch" in the flat arrays.
const NONE: u32 = u32::MAX;
/// TEMP instrumentation
pub static mut PK: [u64; 6] = [0; 6];
/// TEMP
pub static mut HIST: [[u64; 24]; 2] = [[0; 24]; 2];
/// Dependency states in a layer's complete channel dependency graph.
const UNUSED: u8 = 0;
const USED: u8 = 1;
const BLOCKED: u8 = 2;

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
    /// Destinations whose search hit an impasse (some switches unreachable inside the
    /// dependency graph), repaired with escape paths.
    pub impasses: usize,
    /// Switch routes (summed over destinations) moved onto the escape tree by those repairs.
    pub escape_routes: usize,
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
    let graph = SwitchGraph::new(topo);
    let in_comp = main_component(topo, &graph, &by_switch)?;
    let comp_size = in_comp.iter().filter(|&&b| b).count();
    let fab = Fabric::new(topo, &by_switch)?;

    let dest_switches: Vec<u32> = (0..fab.ns as u32).filter(|&s| !by_switch[s as usize].is_empty()).collect();
    let k = (options.max_vcs as usize).min(dest_switches.len()).max(1);
    let layer_of = match params.partition {
        LayerPartition::Clustered => clustered_partition(&graph, &dest_switches, &fab.hosts, k),
        LayerPartition::RoundRobin => {
            let mut l = vec![u8::MAX; fab.ns];
            for (i, &s) in dest_switches.iter().enumerate() {
                l[s as usize] = (i % k) as u8;
            }
            l
        }
    };

    let host_port = host_ports(topo)?;
    let num_hosts = topo.num_hosts() as u64;
    // Nue's initial weight: larger than any load a channel can collect, so shorter paths win
    // and load only decides between paths of (nearly) equal length.
    let mut weights = vec![num_hosts.saturating_mul(num_hosts).max(1); fab.nc()];
    let mut search = Search::new(&fab);
    let mut layer = Layer::new(&fab);
    let mut tree = Tree::default();
    let mut bfs = BfsScratch::new(fab.ns);
    let mut injection = vec![0u8; topo.num_hosts()];
    for l in 0..k {
        let dests: Vec<u32> = dest_switches.iter().copied().filter(|&s| layer_of[s as usize] == l as u8).collect();
        if dests.is_empty() {
            continue;
        }
        let root = layer_centre(&graph, &dests, &mut bfs);
        tree.build(&fab, &graph, root, &mut bfs);
        layer.reset(&fab, &tree, &dests);
        // Route neighbouring destinations one after another (depth-first order of the tree):
        // their trees are alike, so the dependency order needs little repair between them.
        let rank = tree.preorder();
        let mut dests = dests;
        dests.sort_unstable_by_key(|&s| rank[s as usize]);
        for &t in &dests {
            for &h in &by_switch[t as usize] {
                injection[h] = l as u8;
                stats.destinations += 1;
                let reached = search.dijkstra(&fab, &mut layer, &weights, t, &mut stats);
                if reached < comp_size {
                    stats.impasses += 1;
                    stats.escape_routes += search.repair(&fab, &mut layer, &tree, t, &in_comp, &mut stats);
                }
                search.add_load(&fab, &mut weights, t);
                for &v in &search.order {
                    if v != t {
                        table.set_out_port(v as usize, h, fab.port[search.chan[v as usize] as usize]);
                    }
                }
                table.set_out_port(t as usize, h, host_port[h]);
            }
        }
        stats.layers += 1;
        stats.dependencies += layer.state.iter().filter(|&&s| s == USED).count();
    }
    table.set_vc_policy(VcPolicy {
        num_vcs: stats.layers.max(1),
        injection: Injection::PerDestination(injection),
        transitions: None,
    });
    Ok((table, stats))
}

/// Switch-to-switch channels in compact form (CSR by sending switch) and the slots of the
/// complete channel dependency graph: dependency `c → d` (d leaving the switch c enters) is
/// slot `edge_base[c] + pos[d]`.
struct Fabric {
    ns: usize,
    out_off: Vec<u32>,
    /// Sending and receiving switch (switch indices), reverse channel, port at the sender.
    head: Vec<u32>,
    tail: Vec<u32>,
    rev: Vec<u32>,
    port: Vec<Port>,
    /// Position of a channel among its sender's out-channels.
    pos: Vec<u32>,
    edge_base: Vec<usize>,
    /// Hosts per switch (the sources whose load a channel carries).
    hosts: Vec<u32>,
}

impl Fabric {
    fn new(topo: &Topology, by_switch: &[Vec<usize>]) -> Result<Self> {
        let ns = topo.num_switches();
        let mut compact = vec![NONE; topo.num_channels()];
        let mut out_off = Vec::with_capacity(ns + 1);
        let (mut head, mut tail, mut port, mut orig) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        out_off.push(0u32);
        for (v, &node) in topo.switches().iter().enumerate() {
            for a in topo.neighbors(node) {
                if topo.is_host(a.neighbor) {
                    continue;
                }
                compact[a.channel as usize] = head.len() as u32;
                head.push(v as u32);
                tail.push(topo.kind_index(a.neighbor) as u32);
                port.push(a.port);
                orig.push(a.channel);
            }
            out_off.push(head.len() as u32);
        }
        let nc = head.len();
        let rev: Vec<u32> = orig.iter().map(|&c| compact[(c ^ 1) as usize]).collect();
        let pos: Vec<u32> = (0..nc).map(|c| c as u32 - out_off[head[c] as usize]).collect();
        let mut edge_base = Vec::with_capacity(nc + 1);
        let mut acc = 0usize;
        for &t in &tail {
            edge_base.push(acc);
            acc += (out_off[t as usize + 1] - out_off[t as usize]) as usize;
        }
        edge_base.push(acc);
        if acc > (1usize << 34) {
            return Err(NetweaveError::Routing(format!(
                "nue: the complete channel dependency graph would have {acc} edges, too many to hold"
            )));
        }
        let hosts = by_switch.iter().map(|h| h.len() as u32).collect();
        Ok(Fabric { ns, out_off, head, tail, rev, port, pos, edge_base, hosts })
    }

    fn nc(&self) -> usize {
        self.head.len()
    }

    fn out(&self, v: u32) -> std::ops::Range<u32> {
        self.out_off[v as usize]..self.out_off[v as usize + 1]
    }

    /// Slot of dependency `c → d` (requires `tail[c] == head[d]`).
    #[inline]
    fn edge(&self, c: u32, d: u32) -> usize {
        self.edge_base[c as usize] + self.pos[d as usize] as usize
    }
}

/// Port of each host's link on its switch (host index order).
fn host_ports(topo: &Topology) -> Result<Vec<Port>> {
    topo.hosts()
        .iter()
        .map(|&h| {
            topo.neighbors(h)
                .iter()
                .find(|a| !topo.is_host(a.neighbor))
                .map(|a| a.neighbor_port)
                .ok_or_else(|| NetweaveError::Routing(format!("host {} is not attached to a switch", topo.label(h))))
        })
        .collect()
}

/// Switches of the component holding the hosts; an error naming the components when hosts
/// sit in more than one.
fn main_component(topo: &Topology, graph: &SwitchGraph, by_switch: &[Vec<usize>]) -> Result<Vec<bool>> {
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
        let names: Vec<String> = with_hosts
            .iter()
            .map(|&c| {
                let mut m = members[c].clone();
                m.sort_unstable();
                let shown: Vec<&str> = m.iter().take(4).map(|&s| topo.label(topo.switches()[s as usize])).collect();
                let more = if m.len() > 4 { ", …" } else { "" };
                format!("{{{}{more}}} ({} switches)", shown.join(", "), m.len())
            })
            .collect();
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
fn clustered_partition(graph: &SwitchGraph, dests: &[u32], hosts: &[u32], k: usize) -> Vec<u8> {
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
fn layer_centre(graph: &SwitchGraph, dests: &[u32], bfs: &mut BfsScratch) -> u32 {
    graph.bfs(dests[0] as usize, &mut bfs.dist, &mut bfs.queue);
    let a = farthest(&bfs.dist, dests);
    graph.bfs(a as usize, &mut bfs.other, &mut bfs.queue);
    let b = farthest(&bfs.other, dests);
    graph.bfs(b as usize, &mut bfs.dist, &mut bfs.queue);
    let d = bfs.other[b as usize];
    let (from_a, from_b) = (&bfs.other, &bfs.dist);
    let mut cur = (0..graph.len() as u32)
        .find(|&m| from_a[m as usize] == d / 2 && from_b[m as usize] == d - d / 2)
        .unwrap_or(a);
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
    fn build(&mut self, fab: &Fabric, graph: &SwitchGraph, root: u32, bfs: &mut BfsScratch) {
        let ns = fab.ns;
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
                let p = fab.tail[c as usize];
                if self.depth[p as usize] + 1 == dv
                    && (pick == NONE || nchild[p as usize] < nchild[fab.tail[pick as usize] as usize])
                {
                    pick = c;
                }
            }
            self.parent_ch[v as usize] = pick;
            nchild[fab.tail[pick as usize] as usize] += 1;
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
                let p = fab.tail[pc as usize] as usize;
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
            fab.tail[pc as usize]
        }
    }

    fn children(&self, v: u32) -> &[u32] {
        &self.children[self.child_off[v as usize] as usize..self.child_off[v as usize + 1] as usize]
    }
}

/// One virtual layer's complete channel dependency graph: dependency states and a
/// topological order of the used dependencies (Pearce–Kelly).
struct Layer {
    state: Vec<u8>,
    /// `ord[channel]` = position; `at[position]` = channel.
    ord: Vec<u32>,
    at: Vec<u32>,
}

impl Layer {
    fn new(fab: &Fabric) -> Self {
        Layer { state: vec![UNUSED; *fab.edge_base.last().unwrap_or(&0)], ord: vec![0; fab.nc()], at: vec![0; fab.nc()] }
    }

    /// Clear the layer, load the escape dependencies towards `dests` and a topological order
    /// consistent with them: up channels deepest first, then the rest, then down channels
    /// shallowest first.
    fn reset(&mut self, fab: &Fabric, tree: &Tree, dests: &[u32]) {
        self.state.fill(UNUSED);
        let nc = fab.nc();
        let maxd = tree.depth.iter().filter(|&&d| d != u32::MAX).max().copied().unwrap_or(0) as u64;
        let mut key = vec![1u64 << 40; nc];
        for v in 0..fab.ns {
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
        for v in 0..fab.ns as u32 {
            let pc = tree.parent_ch[v as usize];
            if pc == NONE {
                continue;
            }
            let ppc = tree.parent_ch[fab.tail[pc as usize] as usize];
            if ppc != NONE {
                self.state[fab.edge(pc, ppc)] = USED;
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
                let p = fab.tail[pc as usize];
                let ppc = tree.parent_ch[p as usize];
                if ppc != NONE {
                    self.state[fab.edge(fab.rev[ppc as usize], down)] = USED;
                }
                for &y in tree.children(p) {
                    if y != x {
                        self.state[fab.edge(tree.parent_ch[y as usize], down)] = USED;
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
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    acc: Vec<u64>,
    /// Per switch: the dependency slot its settling added for the current destination
    /// (`usize::MAX` if it added none), withdrawn if a repair reroutes the switch.
    fresh: Vec<usize>,
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
    stack: Vec<u32>,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    slots: Vec<u32>,
}

impl Search {
    fn new(fab: &Fabric) -> Self {
        let (ns, nc) = (fab.ns, fab.nc());
        Search {
            settled: vec![false; ns],
            best_key: vec![u64::MAX; ns],
            best_ch: vec![NONE; ns],
            chan: vec![NONE; ns],
            dist: vec![0; ns],
            order: Vec::with_capacity(ns),
            heap: BinaryHeap::with_capacity(nc + 1),
            acc: vec![0; ns],
            fresh: vec![usize::MAX; ns],
            esc: vec![NONE; ns],
            in_f: vec![false; ns],
            work: Vec::new(),
            child_off: vec![0; ns + 1],
            child: Vec::with_capacity(ns),
            mark: vec![0; nc],
            epoch: 0,
            stack: Vec::new(),
            fwd: Vec::new(),
            bwd: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// Route every switch towards switch `t` inside the layer's dependency graph; returns
    /// how many switches were reached (`t` included).
    fn dijkstra(&mut self, fab: &Fabric, layer: &mut Layer, w: &[u64], t: u32, stats: &mut NueStats) -> usize {
        self.settled.fill(false);
        self.best_key.fill(u64::MAX);
        self.best_ch.fill(NONE);
        self.order.clear();
        self.fresh.fill(usize::MAX);
        self.heap.clear();
        self.settled[t as usize] = true;
        self.chan[t as usize] = NONE;
        self.dist[t as usize] = 0;
        self.order.push(t);
        self.relax(fab, layer, w, t);
        while let Some(Reverse((key, c))) = self.heap.pop() {
            let v = fab.head[c as usize];
            if self.settled[v as usize] || self.best_ch[v as usize] != c || self.best_key[v as usize] != key {
                continue;
            }
            let u = fab.tail[c as usize];
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
                            layer.state[e] = USED;
                            self.fresh[v as usize] = e;
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
            self.dist[v as usize] = key >> 1;
            self.order.push(v);
            self.relax(fab, layer, w, v);
        }
        self.order.len()
    }

    /// Key of attaching over channel `c` (into settled `u`): weighted distance, doubled, plus
    /// one if the dependency is new; `None` if it is blocked.
    #[inline]
    fn candidate(&self, fab: &Fabric, layer: &Layer, w: &[u64], c: u32, u: u32) -> Option<u64> {
        let cu = self.chan[u as usize];
        let fresh = if cu == NONE {
            0
        } else {
            match layer.state[fab.edge(c, cu)] {
                BLOCKED => return None,
                USED => 0,
                _ => 1,
            }
        };
        Some(self.dist[u as usize].saturating_add(w[c as usize]).saturating_mul(2) | fresh)
    }

    /// Offer every unsettled neighbour of newly settled `u` the channel into `u`.
    fn relax(&mut self, fab: &Fabric, layer: &Layer, w: &[u64], u: u32) {
        for o in fab.out(u) {
            let c = fab.rev[o as usize];
            let v = fab.tail[o as usize];
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
            let u = fab.tail[c as usize];
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
    /// repair the topological order (the caller marks the slot used).
    fn try_insert(&mut self, fab: &Fabric, layer: &mut Layer, x: u32, y: u32) -> bool {
        let ub = layer.ord[x as usize];
        let lb = layer.ord[y as usize];
        unsafe { PK[0] += 1; }
        if ub < lb {
            unsafe { PK[1] += 1; }
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
        self.fwd.push(y);
        while let Some(c) = self.stack.pop() {
            let t = fab.tail[c as usize];
            let base = fab.edge_base[c as usize];
            let o = fab.out_off[t as usize];
            let deg = fab.out_off[t as usize + 1] - o;
            for j in 0..deg {
                if layer.state[base + j as usize] != USED {
                    continue;
                }
                let d = o + j;
                if d == x {
                    unsafe { PK[2] += 1; PK[3] += self.fwd.len() as u64; HIST[0][64 - (self.fwd.len() as u64).leading_zeros() as usize] += self.fwd.len() as u64; }
                    return false;
                }
                if self.mark[d as usize] != ep && layer.ord[d as usize] < ub {
                    self.mark[d as usize] = ep;
                    self.stack.push(d);
                    self.fwd.push(d);
                }
            }
        }
        // Backward from x through channels ordered after y.
        self.bwd.clear();
        self.stack.push(x);
        self.mark[x as usize] = ep;
        self.bwd.push(x);
        while let Some(c) = self.stack.pop() {
            let h = fab.head[c as usize];
            let p = fab.pos[c as usize] as usize;
            for o in fab.out(h) {
                let b = fab.rev[o as usize];
                if layer.state[fab.edge_base[b as usize] + p] != USED {
                    continue;
                }
                if self.mark[b as usize] != ep && layer.ord[b as usize] > lb {
                    self.mark[b as usize] = ep;
                    self.stack.push(b);
                    self.bwd.push(b);
                }
            }
        }
        unsafe { PK[4] += self.fwd.len() as u64; PK[5] += self.bwd.len() as u64; let n = (self.fwd.len() + self.bwd.len()) as u64; HIST[1][64 - n.leading_zeros() as usize] += n; }
        // Reassign the affected positions: everything reaching x, then everything y reaches.
        let ord = &mut layer.ord;
        self.fwd.sort_unstable_by_key(|&c| ord[c as usize]);
        self.bwd.sort_unstable_by_key(|&c| ord[c as usize]);
        self.slots.clear();
        self.slots.extend(self.bwd.iter().chain(self.fwd.iter()).map(|&c| ord[c as usize]));
        self.slots.sort_unstable();
        for (&c, &s) in self.bwd.iter().chain(self.fwd.iter()).zip(self.slots.iter()) {
            ord[c as usize] = s;
            layer.at[s as usize] = c;
        }
        true
    }

    /// Repair an impasse: every unreached switch takes its escape route towards `t`, and so
    /// does every switch on that route (the escape region stays closed under "next hop", so
    /// it needs only escape dependencies). A searched switch whose next hop moved into the
    /// region keeps its channel if the dependency into the next hop's escape channel fits the
    /// layer's graph, and joins the region otherwise. Dependencies of rerouted switches are
    /// withdrawn. Returns how many switches were rerouted.
    fn repair(&mut self, fab: &Fabric, layer: &mut Layer, tree: &Tree, t: u32, in_comp: &[bool], stats: &mut NueStats) -> usize {
        self.escape_channels(fab, tree, t);
        // Children in the search tree (CSR), by the channels the search chose; `work` serves
        // as the fill cursor per parent.
        self.child_off.fill(0);
        for &v in &self.order[1..] {
            self.child_off[fab.tail[self.chan[v as usize] as usize] as usize + 1] += 1;
        }
        for i in 0..fab.ns {
            self.child_off[i + 1] += self.child_off[i];
        }
        self.child.clear();
        self.child.resize(self.order.len() - 1, NONE);
        self.work.clear();
        self.work.extend_from_slice(&self.child_off[..fab.ns]);
        for &v in &self.order[1..] {
            let p = fab.tail[self.chan[v as usize] as usize] as usize;
            self.child[self.work[p] as usize] = v;
            self.work[p] += 1;
        }
        self.work.clear();
        self.in_f.fill(false);
        self.in_f[t as usize] = true;
        let mut moved = 0;
        for v in 0..fab.ns as u32 {
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
                if old != usize::MAX && old != e {
                    // The old dependency led into x's abandoned channel.
                    layer.state[old] = UNUSED;
                    self.fresh[s as usize] = usize::MAX;
                }
                let keep = match layer.state[e] {
                    USED => true,
                    BLOCKED => false,
                    _ => {
                        if self.try_insert(fab, layer, cs, cx) {
                            layer.state[e] = USED;
                            self.fresh[s as usize] = e;
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
                let v = fab.tail[o as usize];
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
            if old != usize::MAX {
                layer.state[old] = UNUSED;
                self.fresh[y as usize] = usize::MAX;
            }
            self.settled[y as usize] = true;
            self.chan[y as usize] = self.esc[y as usize];
            self.work.push(y);
            moved += 1;
            y = fab.tail[self.esc[y as usize] as usize];
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

    /// Add to each channel of the routed tree the number of source hosts it carries.
    fn add_load(&mut self, fab: &Fabric, w: &mut [u64], t: u32) {
        for &v in &self.order {
            self.acc[v as usize] = fab.hosts[v as usize] as u64;
        }
        for &v in self.order.iter().rev() {
            if v == t {
                continue;
            }
            let c = self.chan[v as usize];
            let load = self.acc[v as usize];
            w[c as usize] = w[c as usize].saturating_add(load);
            self.acc[fab.tail[c as usize] as usize] += load;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{deadlock, metrics::route_metrics};
    use crate::topology::dragonfly::{dragonfly, GlobalArrangement};
    use crate::topology::fat_tree::fat_tree;
    use crate::topology::grid::{mesh, torus};
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
