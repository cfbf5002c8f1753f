//! Random switch graphs: random regular graphs (Jellyfish-style fabrics) and connected
//! "slightly irregular" graphs with an exact diameter (stand-ins for paper 002's topologies A
//! and B, whose edge lists were lost with the paper's figure).
//!
//! Both generators are deterministic: every random choice comes from
//! `ChaCha8Rng::seed_from_u64(seed)`, so the same arguments always give the same topology,
//! on every platform.
//!
//! Layout shared by both (and matching the other generators):
//! - Switches first, node `i` = switch `i`, label `s{i}`.
//! - Hosts next, switch-major (host index `switch·H + local`), label `h{switch}.{local}`, on
//!   port `local + 1` of their switch; switch ports `1..=H` are always the host ports.
//! - Switch-to-switch links on ports `H + 1, H + 2, …`, given out in increasing order of
//!   the (smaller id, larger id) edge, so a switch's switch ports list its neighbours in
//!   increasing id order.
//! - No coordinates; every link is [`LinkSpec::default()`].

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::check_capacity;
use super::{require_at_least, LinkSpec, NodeId, Port, Topology, TopologyBuilder};
use crate::error::Result;

/// Switch attempts per edge for [`random_regular`]. Each accepted switch rewires two edges,
/// so an edge is rewired about 20 times on average and the chance that one of the circulant
/// start graph's edges survives untouched is about `e^-20` (none expected below 10^8 edges).
const SWITCHES_PER_EDGE: u64 = 10;
/// Extra rounds of `m` switches allowed when the result is not connected.
const CONNECT_ROUNDS: u32 = 64;
/// [`irregular`] keeps an exact all-pairs distance matrix up to this many switches.
const MATRIX_LIMIT: u32 = 512;
/// Attempts of [`irregular`] when the diameter has to be reached by adding edges to a deeper
/// tree: 64 for up to 128 switches, fewer for larger graphs (each attempt costs `O(n³)`),
/// at least 4.
fn irregular_attempts(n: u32) -> u32 {
    ((1u64 << 20) / (n as u64 * n as u64)).clamp(4, 64) as u32
}

/// Hasher for `u64` edge keys (the splitmix64 finaliser): the default SipHash would spend
/// most of [`random_regular`]'s time hashing.
#[derive(Default, Clone, Copy)]
struct EdgeHasher(u64);

impl Hasher for EdgeHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = z ^ (z >> 31);
    }
}

type EdgeSet = HashSet<u64, BuildHasherDefault<EdgeHasher>>;

/// Key of the undirected edge `{u, v}`.
fn edge_key(u: u32, v: u32) -> u64 {
    let (a, b) = if u < v { (u, v) } else { (v, u) };
    (a as u64) << 32 | b as u64
}

/// Undirected simple graph with at most `stride` neighbours per node, stored flat:
/// node `u`'s neighbours are `nbr[u·stride .. u·stride + deg[u]]`.
struct Adjacency {
    stride: usize,
    deg: Vec<u32>,
    nbr: Vec<u32>,
}

impl Adjacency {
    fn new(n: usize, stride: usize) -> Self {
        Adjacency { stride, deg: vec![0; n], nbr: vec![0; n * stride] }
    }
    fn from_edges(n: usize, stride: usize, edges: &[(u32, u32)]) -> Self {
        let mut a = Adjacency::new(n, stride);
        for &(u, v) in edges {
            a.add(u, v);
        }
        a
    }
    fn neighbors(&self, u: u32) -> &[u32] {
        let base = u as usize * self.stride;
        &self.nbr[base..base + self.deg[u as usize] as usize]
    }
    fn has_edge(&self, u: u32, v: u32) -> bool {
        self.neighbors(u).contains(&v)
    }
    fn add(&mut self, u: u32, v: u32) {
        for (x, y) in [(u, v), (v, u)] {
            let d = &mut self.deg[x as usize];
            self.nbr[x as usize * self.stride + *d as usize] = y;
            *d += 1;
        }
    }
    /// In `u`'s row, replace neighbour `old` by `new`.
    fn replace(&mut self, u: u32, old: u32, new: u32) {
        let base = u as usize * self.stride;
        let row = &mut self.nbr[base..base + self.deg[u as usize] as usize];
        if let Some(x) = row.iter_mut().find(|x| **x == old) {
            *x = new;
        }
    }
    fn full(&self, u: u32) -> bool {
        self.deg[u as usize] as usize == self.stride
    }
}

/// Breadth-first distances from `src` into `dist` (`u32::MAX` = unreached), reusing `queue`.
/// Returns `(eccentricity, nodes reached)`.
fn bfs(adj: &Adjacency, src: u32, dist: &mut [u32], queue: &mut Vec<u32>) -> (u32, usize) {
    dist.fill(u32::MAX);
    queue.clear();
    dist[src as usize] = 0;
    queue.push(src);
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        let du = dist[u as usize];
        for &w in adj.neighbors(u) {
            if dist[w as usize] == u32::MAX {
                dist[w as usize] = du + 1;
                queue.push(w);
            }
        }
    }
    (dist[queue[queue.len() - 1] as usize], queue.len())
}

/// After edge `{u, v}` was added, lower `dist` (BFS distances from one source) where the
/// new edge gives a shortcut. Only the improved region is visited.
fn relax_after_insert(adj: &Adjacency, dist: &mut [u32], u: u32, v: u32, queue: &mut Vec<u32>) {
    queue.clear();
    for (a, b) in [(u, v), (v, u)] {
        if dist[a as usize] != u32::MAX && dist[a as usize] + 1 < dist[b as usize] {
            dist[b as usize] = dist[a as usize] + 1;
            queue.push(b);
        }
    }
    let mut head = 0;
    while head < queue.len() {
        let z = queue[head];
        head += 1;
        let dz = dist[z as usize];
        for &w in adj.neighbors(z) {
            if dz + 1 < dist[w as usize] {
                dist[w as usize] = dz + 1;
                queue.push(w);
            }
        }
    }
}

/// Turn a switch graph into a topology with the layout of the [module docs](self).
/// `edges` must be simple, with `u < v`, and no switch may have more than `switch_ports` of them.
fn build_switch_graph(
    b: &mut TopologyBuilder,
    n: u32,
    switch_ports: u32,
    hosts_per_switch: u32,
    edges: &mut [(u32, u32)],
) {
    let radix = (switch_ports + hosts_per_switch) as Port;
    for s in 0..n {
        b.add_switch(format!("s{s}"), radix);
    }
    let spec = LinkSpec::default();
    for s in 0..n {
        for local in 0..hosts_per_switch {
            let h = b.add_host(format!("h{s}.{local}"));
            b.connect_ports(h, 1, s as NodeId, (local + 1) as Port, spec);
        }
    }
    edges.sort_unstable();
    let mut next = vec![hosts_per_switch as Port + 1; n as usize];
    for &(u, v) in edges.iter() {
        let (pu, pv) = (next[u as usize], next[v as usize]);
        next[u as usize] += 1;
        next[v as usize] += 1;
        b.connect_ports(u, pu, v, pv, spec);
    }
}

/// A random connected simple `degree`-regular graph on `switches` switches, with
/// `hosts_per_switch` hosts on each (the Jellyfish fabric of Singla et al., NSDI 2012).
///
/// Method: start from a connected circulant graph (switch `i` linked to `i ± 1 … i ± ⌊d/2⌋`,
/// plus `i + n/2` when `d` is odd), then apply `10·m` random *edge switches* (`m = n·d/2`
/// edges): pick two edges `{a,b}`, `{c,d}` and rewire them to `{a,c}`, `{b,d}` (or `{a,d}`,
/// `{b,c}`), skipping switches that would create a loop or a parallel link. This Markov chain
/// is symmetric and connects all simple `d`-regular graphs on labelled vertices, so its
/// stationary distribution is uniform; after `10·m` attempts every edge has been rewired
/// about 20 times and no trace of the circulant is left. If the result is disconnected (rare
/// for `d ≥ 3`), up to 64 more rounds of `m` switches are run, then a clear error is returned.
/// Degree 2 is special: connected 2-regular graphs are Hamiltonian cycles, built directly
/// from a random permutation (exactly uniform); `degree = switches − 1` is the complete graph.
///
/// Cost is `O(m)` memory and `10·m` switch attempts, each a few neighbour-row scans (a hash
/// set for degree > 32). The attempts hit memory at random, so time is about 0.1 µs per
/// attempt while the graph fits in cache and 0.4 µs beyond: 10,000 switches of degree 8 take
/// about 50 ms, 100,000 of degree 16 about 3.5 s (release build).
///
/// Requirements: `switches ≥ 2`, `1 ≤ degree < switches`, `switches·degree` even, and
/// `degree = 1` only with 2 switches (otherwise the graph cannot be connected).
/// Switch radix is `hosts_per_switch + degree`; see the [module docs](self) for the layout.
///
/// ```
/// use netweave_core::topology::random::random_regular;
/// let t = random_regular(100, 4, 2, 7).unwrap();
/// assert_eq!((t.num_switches(), t.num_hosts(), t.num_links()), (100, 200, 200 + 200));
/// assert!(t.switches().iter().all(|&s| t.degree(s) == 6));
/// ```
pub fn random_regular(switches: u32, degree: u32, hosts_per_switch: u32, seed: u64) -> Result<Topology> {
    let (n, d) = (switches, degree);
    require_at_least("random regular graph: switches", n as u64, 2)?;
    require_at_least("random regular graph: degree", d as u64, 1)?;
    if d >= n {
        return crate::invalid!("random regular graph: degree {d} must be less than the number of switches {n}");
    }
    if (n as u64 * d as u64) % 2 == 1 {
        return crate::invalid!("random regular graph: switches × degree must be even, got {n} × {d}");
    }
    if d == 1 && n > 2 {
        return crate::invalid!("random regular graph: degree 1 connects only 2 switches, got {n}");
    }
    let m = n as u64 * d as u64 / 2;
    let hosts = n as u64 * hosts_per_switch as u64;
    let radix = d as u64 + hosts_per_switch as u64;
    let ports = (n as u64).saturating_mul(radix).saturating_add(hosts);
    check_capacity("random regular graph", n as u64 + hosts, m + hosts, ports, radix)?;

    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity(m as usize);
    if d == 2 {
        let mut order: Vec<u32> = (0..n).collect();
        order.shuffle(&mut rng);
        for i in 0..n as usize {
            let (u, v) = (order[i], order[(i + 1) % n as usize]);
            edges.push((u.min(v), u.max(v)));
        }
    } else {
        for i in 0..n {
            for k in 1..=d / 2 {
                let j = ((i as u64 + k as u64) % n as u64) as u32;
                edges.push((i.min(j), i.max(j)));
            }
        }
        if d % 2 == 1 {
            for i in 0..n / 2 {
                edges.push((i, i + n / 2));
            }
        }
        if d < n - 1 {
            let mut index = EdgeIndex::new(n as usize, d, &edges);
            switch_edges(&mut edges, &mut index, &mut rng, SWITCHES_PER_EDGE * m);
            let mut dist = vec![0u32; n as usize];
            let mut queue = Vec::with_capacity(n as usize);
            let mut rounds = 0;
            while bfs(&Adjacency::from_edges(n as usize, d as usize, &edges), 0, &mut dist, &mut queue).1 < n as usize {
                rounds += 1;
                if rounds > CONNECT_ROUNDS {
                    return crate::invalid!(
                        "random regular graph: no connected {d}-regular graph on {n} switches \
                         found after {CONNECT_ROUNDS} rounds (seed {seed})"
                    );
                }
                switch_edges(&mut edges, &mut index, &mut rng, m);
            }
        }
    }
    for e in edges.iter_mut() {
        *e = (e.0.min(e.1), e.0.max(e.1));
    }

    let mut b = TopologyBuilder::new(format!("random_regular(n={n},d={d},hosts={hosts_per_switch},seed={seed})"));
    b.family("random_regular")
        .param("switches", n)
        .param("degree", d)
        .param("hosts_per_switch", hosts_per_switch)
        .param("seed", seed);
    build_switch_graph(&mut b, n, d, hosts_per_switch, &mut edges);
    b.build()
}

/// Degrees up to this use row scans in [`EdgeIndex`]; larger ones a hash set.
const ROW_SCAN_MAX_DEGREE: u32 = 32;

/// Edge membership during [`switch_edges`]. For small degrees a node's neighbour row fits a
/// cache line or two and scanning it beats hashing (the hash set's random accesses dominated
/// the run time on large graphs); for large degrees rows get long and the set wins.
enum EdgeIndex {
    Rows(Adjacency),
    Set(EdgeSet),
}

impl EdgeIndex {
    fn new(n: usize, degree: u32, edges: &[(u32, u32)]) -> Self {
        if degree <= ROW_SCAN_MAX_DEGREE {
            EdgeIndex::Rows(Adjacency::from_edges(n, degree as usize, edges))
        } else {
            let mut set = EdgeSet::with_capacity_and_hasher(edges.len(), Default::default());
            set.extend(edges.iter().map(|&(u, v)| edge_key(u, v)));
            EdgeIndex::Set(set)
        }
    }
    fn contains(&self, u: u32, v: u32) -> bool {
        match self {
            EdgeIndex::Rows(adj) => adj.has_edge(u, v),
            EdgeIndex::Set(set) => set.contains(&edge_key(u, v)),
        }
    }
    /// Record the switch `{a,b}, {c,d} → {a,c}, {b,d}`.
    fn rewire(&mut self, a: u32, b: u32, c: u32, d: u32) {
        match self {
            EdgeIndex::Rows(adj) => {
                adj.replace(a, b, c);
                adj.replace(b, a, d);
                adj.replace(c, d, a);
                adj.replace(d, c, b);
            }
            EdgeIndex::Set(set) => {
                set.remove(&edge_key(a, b));
                set.remove(&edge_key(c, d));
                set.insert(edge_key(a, c));
                set.insert(edge_key(b, d));
            }
        }
    }
}

/// `attempts` random edge switches on a simple graph whose edges `index` mirrors.
fn switch_edges(edges: &mut [(u32, u32)], index: &mut EdgeIndex, rng: &mut ChaCha8Rng, attempts: u64) {
    let m = edges.len();
    for _ in 0..attempts {
        let i = rng.gen_range(0..m);
        let j = rng.gen_range(0..m);
        if i == j {
            continue;
        }
        let (a, b) = edges[i];
        let (mut c, mut d) = edges[j];
        if rng.gen::<bool>() {
            std::mem::swap(&mut c, &mut d);
        }
        // Rewire {a,b},{c,d} → {a,c},{b,d}. Loops and parallel links are refused; a shared
        // endpoint always ends up as one of those, so no separate check is needed.
        if a == c || b == d || index.contains(a, c) || index.contains(b, d) {
            continue;
        }
        index.rewire(a, b, c, d);
        edges[i] = (a, c);
        edges[j] = (b, d);
    }
}

/// Largest number of switches a graph of maximum degree `delta` and diameter `diam` can have
/// (the Moore bound `1 + Δ·Σ_{i<D} (Δ − 1)^i`), saturating.
fn moore_bound(delta: u64, diam: u64) -> u64 {
    if delta <= 2 {
        return if delta == 1 { 2 } else { 2 * diam + 1 };
    }
    let (mut total, mut layer) = (1u64, delta);
    for _ in 0..diam {
        total = total.saturating_add(layer);
        if total == u64::MAX {
            break;
        }
        layer = layer.saturating_mul(delta - 1);
    }
    total
}

/// Largest tree with maximum degree `delta` and diameter `diam` (a complete tree around one
/// centre for even `diam`, around a central edge for odd), saturating.
fn tree_capacity(delta: u64, diam: u64) -> u64 {
    if delta <= 2 {
        return if delta == 1 { 2.min(diam + 1) } else { diam + 1 };
    }
    // Σ_{i≤r} (Δ−1)^i, saturating.
    let ball = |r: u64| {
        let (mut total, mut layer) = (0u64, 1u64);
        for _ in 0..=r {
            total = total.saturating_add(layer);
            if total == u64::MAX {
                break;
            }
            layer = layer.saturating_mul(delta - 1);
        }
        total
    };
    if diam % 2 == 0 {
        let r = diam / 2;
        if r == 0 {
            1
        } else {
            1u64.saturating_add(delta.saturating_mul(ball(r - 1)))
        }
    } else {
        ball(diam / 2).saturating_mul(2)
    }
}

/// A connected, mildly irregular switch graph with an exact switch-graph diameter: every
/// switch has at most `max_switch_links` switch links and `hosts_per_switch` hosts, and the
/// largest switch-to-switch hop distance is exactly `diameter`.
///
/// This is netweave's stand-in for topologies A and B of paper 002 (spec §3.6): 16 switches
/// with 8 ports, 4 hosts each, at most 4 switch links, diameter 6, "slight irregularity" —
/// i.e. `irregular(16, 4, 6, 4, seed)`, with the seed picking one of many such graphs.
///
/// Method (deterministic per seed):
/// 1. A random spanning tree shaped to have diameter exactly `D`: a random path of `D + 1`
///    switches, the other switches hung one by one under random switches that still have a
///    free port and are far enough from both path ends that the diameter cannot grow.
/// 2. Random extra links, tried in a random order, each kept only if both ends have a free
///    port and the diameter stays at `D` (adding a link never lengthens a path, so only
///    "shrinks below D" must be checked). Adding stops at a target of 80 % of all switch
///    ports in use (`⌊0.4·n·Δ⌋` links, at least `n − 1`: 1.6 links per switch when Δ = 4,
///    between the 4×4 mesh's 1.5 and the torus's 2 — a mesh-like density with irregular
///    wiring; the paper-002 shape gets 25 links) or when no more link fits.
///
/// Up to 512 switches the diameter is checked exactly with an all-pairs distance matrix and
/// every candidate link is tried; beyond that the check keeps one diametral pair at distance
/// `D` (a sufficient condition) and candidates are sampled.
///
/// If no tree of diameter `D` can hold `n` switches with degree ≤ Δ (small `D`, large `n`;
/// up to 512 switches), step 1 builds the shallowest tree that can, and step 2 first adds
/// the links joining the switches currently farthest apart until the diameter is down to `D`,
/// then fills up at random. The result then has more links than the target. This greedy
/// search can miss graphs that exist (near the degree/diameter record sizes), so it is
/// attempted up to 64 times (fewer above 128 switches) before a one-line error says the
/// diameter was not reached. Requests beyond the Moore bound `n ≤ 1 + Δ·Σ_{i<D}(Δ − 1)^i`
/// (e.g. diameter 1 with 16 switches of ≤ 4 links) or with `D ≥ n` are rejected up front.
///
/// Switch radix is `max_switch_links + hosts_per_switch`; layout in the [module docs](self).
///
/// ```
/// use netweave_core::topology::random::irregular;
/// let t = irregular(16, 4, 6, 4, 1).unwrap();
/// assert_eq!((t.num_switches(), t.num_hosts()), (16, 64));
/// assert!(irregular(16, 4, 1, 4, 1).is_err());
/// ```
pub fn irregular(
    switches: u32,
    max_switch_links: u32,
    diameter: u32,
    hosts_per_switch: u32,
    seed: u64,
) -> Result<Topology> {
    let (n, delta, diam) = (switches, max_switch_links, diameter);
    require_at_least("irregular graph: switches", n as u64, 2)?;
    require_at_least("irregular graph: max_switch_links", delta as u64, 1)?;
    require_at_least("irregular graph: diameter", diam as u64, 1)?;
    if diam >= n {
        return crate::invalid!(
            "irregular graph: diameter {diam} is impossible with {n} switches (a path, the longest, has diameter {})",
            n - 1
        );
    }
    let moore = moore_bound(delta as u64, diam as u64);
    if n as u64 > moore {
        return crate::invalid!(
            "irregular graph: diameter {diam} is unreachable with {n} switches of at most {delta} links \
             (Moore bound: at most {moore} switches)"
        );
    }
    let hosts = n as u64 * hosts_per_switch as u64;
    let radix = delta as u64 + hosts_per_switch as u64;
    let max_links = n as u64 * delta as u64 / 2;
    let ports = (n as u64).saturating_mul(radix).saturating_add(hosts);
    check_capacity("irregular graph", n as u64 + hosts, max_links + hosts, ports, radix)?;
    let tree_diam = if delta <= 2 {
        n - 1
    } else {
        (diam..n).find(|&t| tree_capacity(delta as u64, t as u64) >= n as u64).unwrap_or(n - 1)
    };
    if tree_diam > diam && n > MATRIX_LIMIT {
        return crate::invalid!(
            "irregular graph: diameter {diam} with {n} switches of at most {delta} links needs more than a tree, \
             which netweave builds only up to {MATRIX_LIMIT} switches; diameter ≥ {tree_diam} works"
        );
    }
    let target = (n as u64 * delta as u64 * 2 / 5).max(n as u64 - 1);

    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let attempts = if tree_diam == diam { 1 } else { irregular_attempts(n) };
    let mut best = u32::MAX;
    for _ in 0..attempts {
        let (mut edges, got) = grow_graph(&mut rng, n, delta, diam, tree_diam, target);
        if got == diam {
            let mut b = TopologyBuilder::new(format!(
                "irregular(n={n},max_links={delta},diameter={diam},hosts={hosts_per_switch},seed={seed})"
            ));
            b.family("irregular")
                .param("switches", n)
                .param("max_switch_links", delta)
                .param("diameter", diam)
                .param("hosts_per_switch", hosts_per_switch)
                .param("seed", seed)
                .param("switch_links", edges.len() as u64);
            build_switch_graph(&mut b, n, delta, hosts_per_switch, &mut edges);
            return b.build();
        }
        best = best.min(got);
    }
    crate::invalid!(
        "irregular graph: diameter {diam} was not reached with {n} switches of at most {delta} links \
         after {attempts} attempts (smallest found: {best})"
    )
}

/// One attempt of [`irregular`]: a tree of diameter `tree_diam` plus links that keep the
/// diameter ≥ `diam`. Returns the edges (`u < v`) and the final diameter.
fn grow_graph(
    rng: &mut ChaCha8Rng,
    n: u32,
    delta: u32,
    diam: u32,
    tree_diam: u32,
    target: u64,
) -> (Vec<(u32, u32)>, u32) {
    let nu = n as usize;
    let mut adj = Adjacency::new(nu, delta as usize);
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity(target as usize);

    // 1. Spanning tree: a random path of tree_diam + 1 switches, the rest hung under switches
    //    with a free port and positive slack (how much deeper a branch there may grow without
    //    creating a path longer than tree_diam).
    let mut order: Vec<u32> = (0..n).collect();
    order.shuffle(rng);
    let mut slack = vec![0u32; nu];
    let mut open: Vec<u32> = Vec::new();
    let path_len = tree_diam as usize + 1;
    for i in 0..path_len {
        let v = order[i];
        slack[v as usize] = (i as u32).min(tree_diam - i as u32);
        if i > 0 {
            adj.add(order[i - 1], v);
            edges.push((order[i - 1].min(v), order[i - 1].max(v)));
        }
    }
    for &v in &order[..path_len] {
        if slack[v as usize] > 0 && !adj.full(v) {
            open.push(v);
        }
    }
    for &v in &order[path_len..] {
        // tree_capacity(delta, tree_diam) ≥ n guarantees a free slot (every partial tree
        // embeds in the complete one), so `open` is never empty here.
        let idx = rng.gen_range(0..open.len());
        let parent = open[idx];
        adj.add(parent, v);
        edges.push((parent.min(v), parent.max(v)));
        slack[v as usize] = slack[parent as usize] - 1;
        if adj.full(parent) {
            open.swap_remove(idx);
        }
        if slack[v as usize] > 0 && !adj.full(v) {
            open.push(v);
        }
    }

    // 2. Extra links.
    let got = if n <= MATRIX_LIMIT {
        add_links_exact(rng, &mut adj, &mut edges, diam, target)
    } else {
        let (x, y) = (order[0], order[tree_diam as usize]);
        add_links_witness(rng, &mut adj, &mut edges, diam, target, x, y);
        diam
    };
    (edges, got)
}

/// Exact all-pairs switch distances of a growing graph, for [`add_links_exact`].
struct Distances {
    n: usize,
    /// Row-major `n × n` hop counts.
    dist: Vec<u32>,
    /// Pairs `x < y` at distance ≥ the target diameter: the diameter stays ≥ target while one
    /// of them does.
    far: Vec<(u32, u32)>,
    /// Current diameter.
    current: u32,
    /// Scratch copies of the two rows of a candidate link's ends.
    du: Vec<u32>,
    dv: Vec<u32>,
}

impl Distances {
    fn new(adj: &Adjacency, diam: u32) -> Self {
        let n = adj.deg.len();
        let mut dist = vec![0u32; n * n];
        let mut queue = Vec::with_capacity(n);
        for s in 0..n {
            bfs(adj, s as u32, &mut dist[s * n..(s + 1) * n], &mut queue);
        }
        let mut far = Vec::new();
        let mut current = 0;
        for x in 0..n {
            for y in x + 1..n {
                let d = dist[x * n + y];
                current = current.max(d);
                if d >= diam {
                    far.push((x as u32, y as u32));
                }
            }
        }
        Distances { n, dist, far, current, du: vec![0; n], dv: vec![0; n] }
    }

    fn get(&self, x: u32, y: u32) -> u32 {
        self.dist[x as usize * self.n + y as usize]
    }

    /// Add link `{u, v}` if both ends have a free port and the diameter stays ≥ `diam`.
    fn try_add(&mut self, adj: &mut Adjacency, edges: &mut Vec<(u32, u32)>, u: u32, v: u32, diam: u32) -> bool {
        let n = self.n;
        if adj.full(u) || adj.full(v) || self.get(u, v) <= 1 {
            return false;
        }
        let (ui, vi) = (u as usize, v as usize);
        self.du.copy_from_slice(&self.dist[ui * n..(ui + 1) * n]);
        self.dv.copy_from_slice(&self.dist[vi * n..(vi + 1) * n]);
        let (du, dv, dist) = (&self.du, &self.dv, &self.dist);
        let keeps = self.far.iter().any(|&(x, y)| {
            let (x, y) = (x as usize, y as usize);
            dist[x * n + y].min(du[x] + 1 + dv[y]).min(dv[x] + 1 + du[y]) >= diam
        });
        if !keeps {
            return false;
        }
        adj.add(u, v);
        edges.push((u.min(v), u.max(v)));
        for x in 0..n {
            let row = &mut self.dist[x * n..(x + 1) * n];
            let (a, b) = (du[x] + 1, dv[x] + 1);
            for (y, d) in row.iter_mut().enumerate() {
                *d = (*d).min(a + dv[y]).min(b + du[y]);
            }
        }
        let dist = &self.dist;
        self.far.retain(|&(x, y)| dist[x as usize * n + y as usize] >= diam);
        self.current = self.far.iter().map(|&(x, y)| dist[x as usize * n + y as usize]).max().unwrap_or(0);
        true
    }
}

/// Step 2 of [`irregular`] for small graphs, with exact all-pairs distances. Returns the
/// final diameter.
///
/// Every candidate link is tried once in random order; one pass is exhaustive because a
/// rejected link can never become acceptable later (distances only shrink, ports only fill).
/// When the tree is deeper than `diam`, a first phase repeatedly tries the candidate whose
/// ends are currently farthest apart — the link that shrinks long paths most — until the
/// diameter is down to `diam` (bounded to `4n` tries); the random pass then fills up to the
/// target.
fn add_links_exact(
    rng: &mut ChaCha8Rng,
    adj: &mut Adjacency,
    edges: &mut Vec<(u32, u32)>,
    diam: u32,
    target: u64,
) -> u32 {
    let n = adj.deg.len() as u32;
    let mut d = Distances::new(adj, diam);
    let mut cands: Vec<(u32, u32)> = Vec::new();
    for u in 0..n {
        for v in u + 1..n {
            if !adj.full(u) && !adj.full(v) && d.get(u, v) > 1 {
                cands.push((u, v));
            }
        }
    }
    cands.shuffle(rng);
    if d.current > diam {
        let mut pool = cands.clone();
        let mut tries = 4 * n as usize;
        while d.current > diam && tries > 0 && !pool.is_empty() {
            tries -= 1;
            // First candidate (in random order) among those farthest apart now.
            let mut best = 0;
            for (k, &(u, v)) in pool.iter().enumerate() {
                if d.get(u, v) > d.get(pool[best].0, pool[best].1) {
                    best = k;
                }
            }
            let (u, v) = pool.swap_remove(best);
            d.try_add(adj, edges, u, v, diam);
            pool.retain(|&(u, v)| !adj.full(u) && !adj.full(v) && d.get(u, v) > 1);
        }
    }
    for &(u, v) in &cands {
        if d.current == diam && edges.len() as u64 >= target {
            break;
        }
        d.try_add(adj, edges, u, v, diam);
    }
    d.current
}

/// Step 2 of [`irregular`] for large graphs whose tree already has diameter `diam`: keep the
/// tree's diametral pair `(x, y)` at distance `diam` (which pins the diameter, since links
/// only shorten paths), with BFS distances from `x` and `y` updated incrementally; candidate
/// links are sampled at random from switches with free ports.
fn add_links_witness(
    rng: &mut ChaCha8Rng,
    adj: &mut Adjacency,
    edges: &mut Vec<(u32, u32)>,
    diam: u32,
    target: u64,
    x: u32,
    y: u32,
) {
    let n = adj.deg.len();
    let mut queue = Vec::with_capacity(n);
    let (mut dx, mut dy) = (vec![0u32; n], vec![0u32; n]);
    bfs(adj, x, &mut dx, &mut queue);
    bfs(adj, y, &mut dy, &mut queue);
    let mut open: Vec<u32> = (0..n as u32).filter(|&u| !adj.full(u)).collect();
    let mut budget = 32 * target.saturating_sub(edges.len() as u64) + 1024;
    while (edges.len() as u64) < target && open.len() >= 2 && budget > 0 {
        budget -= 1;
        let i = rng.gen_range(0..open.len());
        let j = rng.gen_range(0..open.len());
        let (u, v) = (open[i], open[j]);
        if i == j || adj.has_edge(u, v) {
            continue;
        }
        let (ui, vi) = (u as usize, v as usize);
        if dx[ui] + 1 + dy[vi] < diam || dx[vi] + 1 + dy[ui] < diam {
            continue;
        }
        adj.add(u, v);
        edges.push((u.min(v), u.max(v)));
        relax_after_insert(adj, &mut dx, u, v, &mut queue);
        relax_after_insert(adj, &mut dy, u, v, &mut queue);
        // Drop full switches from `open`, larger index first so the smaller stays valid.
        let (hi, lo) = (i.max(j), i.min(j));
        for k in [hi, lo] {
            if adj.full(open[k]) {
                open.swap_remove(k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Switch-graph diameter (u32::MAX if disconnected).
    fn diameter(t: &Topology) -> u32 {
        crate::topology::metrics::stats(t).diameter.unwrap_or(u32::MAX)
    }

    fn switch_degree(t: &Topology, s: NodeId) -> usize {
        t.neighbors(s).iter().filter(|a| !t.is_host(a.neighbor)).count()
    }

    fn switch_edges_of(t: &Topology) -> Vec<(NodeId, NodeId)> {
        let mut e: Vec<_> = t
            .links()
            .iter()
            .filter(|l| !t.is_host(l.a.node) && !t.is_host(l.b.node))
            .map(|l| (l.a.node.min(l.b.node), l.a.node.max(l.b.node)))
            .collect();
        e.sort();
        e
    }

    fn is_simple(t: &Topology) -> bool {
        let e = switch_edges_of(t);
        e.windows(2).all(|w| w[0] != w[1]) && e.iter().all(|&(a, b)| a != b)
    }

    #[test]
    fn random_regular_is_regular_simple_connected() {
        for (n, d) in [(10, 3), (16, 4), (50, 2), (2, 1), (8, 7), (9, 8), (100, 5), (30, 29), (12, 6), (7, 4)] {
            for seed in 0..3 {
                let t = random_regular(n, d, 2, seed).unwrap();
                assert_eq!(t.num_switches(), n as usize);
                assert_eq!(t.num_hosts(), 2 * n as usize);
                assert_eq!(switch_edges_of(&t).len(), (n * d / 2) as usize);
                assert!(t
                    .switches()
                    .iter()
                    .all(|&s| switch_degree(&t, s) == d as usize && t.radix(s) == (d + 2) as Port));
                assert!(is_simple(&t), "n={n} d={d}");
                assert!(diameter(&t) < u32::MAX, "disconnected n={n} d={d} seed={seed}");
            }
        }
    }

    #[test]
    fn random_regular_is_deterministic_per_seed() {
        let a = random_regular(200, 6, 1, 42).unwrap();
        let b = random_regular(200, 6, 1, 42).unwrap();
        let c = random_regular(200, 6, 1, 43).unwrap();
        assert_eq!(a.links(), b.links());
        assert_ne!(switch_edges_of(&a), switch_edges_of(&c));
        assert_eq!(a.params()["seed"], serde_json::json!(42));
        assert_eq!(a.family(), "random_regular");
        // The circulant start is gone: few edges join switches with ids ±1..±3 apart.
        let near = switch_edges_of(&a).iter().filter(|&&(u, v)| v - u <= 3 || u + 200 - v <= 3).count();
        assert!(near < 40, "{near} of 600 edges still look circulant");
    }

    #[test]
    fn random_regular_layout() {
        let t = random_regular(10, 3, 2, 5).unwrap();
        assert_eq!(t.label(3), "s3");
        let h = t.hosts()[7]; // switch 3, local 1
        assert_eq!(t.label(h), "h3.1");
        assert_eq!(t.host_switch(h), Some(3));
        assert_eq!(t.neighbors(h)[0].neighbor_port, 2);
        for &s in t.switches() {
            let nb: Vec<NodeId> = t.neighbors(s).iter().filter(|a| a.port > 2).map(|a| a.neighbor).collect();
            assert!(nb.windows(2).all(|w| w[0] < w[1]), "switch ports list neighbours in id order");
            assert!(t.neighbors(s).iter().filter(|a| a.port <= 2).all(|a| t.is_host(a.neighbor)));
        }
    }

    #[test]
    fn random_regular_handles_ten_thousand_switches() {
        let t = random_regular(10_000, 8, 1, 3).unwrap();
        assert_eq!(t.num_links(), 40_000 + 10_000);
        assert!(t.switches().iter().all(|&s| switch_degree(&t, s) == 8));
    }

    #[test]
    fn random_regular_rejects_bad_parameters() {
        for (n, d, want) in [
            (0, 3, "at least 2"),
            (1, 0, "at least 2"),
            (10, 0, "at least 1"),
            (5, 5, "less than"),
            (5, 3, "even"),
            (4, 1, "only 2"),
        ] {
            let e = random_regular(n, d, 1, 0).unwrap_err().to_string();
            assert!(e.contains(want), "n={n} d={d}: {e}");
            assert!(!e.contains('\n'));
        }
        assert!(random_regular(10, 4, 65535, 0).is_err());
        assert!(random_regular(u32::MAX, 2, u32::MAX, 0).is_err());
    }

    #[test]
    fn paper_002_shape_has_exact_diameter_six() {
        let mut link_counts = Vec::new();
        for seed in 0..20 {
            let t = irregular(16, 4, 6, 4, seed).unwrap();
            assert_eq!(t.num_switches(), 16);
            assert_eq!(t.num_hosts(), 64);
            assert_eq!(diameter(&t), 6, "seed {seed}");
            assert!(is_simple(&t));
            for &s in t.switches() {
                assert!(switch_degree(&t, s) <= 4);
                assert_eq!(t.radix(s), 8);
                let host_ports: Vec<Port> =
                    t.neighbors(s).iter().filter(|a| t.is_host(a.neighbor)).map(|a| a.port).collect();
                assert_eq!(host_ports, vec![1, 2, 3, 4]);
            }
            let links = switch_edges_of(&t).len();
            assert_eq!(t.params()["switch_links"], serde_json::json!(links));
            link_counts.push(links);
        }
        // Irregular, not a tree: well above the 15 links of a spanning tree.
        let avg = link_counts.iter().sum::<usize>() as f64 / link_counts.len() as f64;
        assert!(avg >= 19.0, "average {avg} links: {link_counts:?}");
        assert!(link_counts.iter().all(|&l| l <= 25));
    }

    #[test]
    fn irregular_is_deterministic_and_seed_dependent() {
        let a = irregular(16, 4, 6, 4, 11).unwrap();
        let b = irregular(16, 4, 6, 4, 11).unwrap();
        assert_eq!(a.links(), b.links());
        let distinct: std::collections::HashSet<_> =
            (0..8).map(|s| switch_edges_of(&irregular(16, 4, 6, 4, s).unwrap())).collect();
        assert!(distinct.len() >= 7);
    }

    #[test]
    fn irregular_hits_other_diameters() {
        // Phase A (a tree of diameter D fits) and phase B (it must shrink from a deeper tree).
        for (n, delta, diam) in [
            (16, 4, 4),
            (16, 4, 5),
            (16, 4, 10),
            (16, 4, 15),
            (30, 3, 8),
            (16, 4, 3),
            (16, 3, 4),
            (10, 3, 3),
            (16, 3, 3),
            (16, 2, 8),
            (17, 2, 8),
            (2, 1, 1),
            (40, 6, 3),
            (100, 8, 3),
        ] {
            for seed in 0..3 {
                let t = irregular(n, delta, diam, 1, seed)
                    .unwrap_or_else(|e| panic!("({n},{delta},{diam}) seed {seed}: {e}"));
                assert_eq!(diameter(&t), diam, "({n},{delta},{diam}) seed {seed}");
                assert!(t.switches().iter().all(|&s| switch_degree(&t, s) <= delta as usize));
            }
        }
    }

    #[test]
    fn irregular_large_uses_witness_mode() {
        let t = irregular(2000, 4, 40, 0, 9).unwrap();
        let links = switch_edges_of(&t).len();
        assert!(links > 2000 && links <= 3200, "{links}");
        assert!(is_simple(&t));
        assert_eq!(diameter(&t), 40);
    }

    #[test]
    fn irregular_rejects_impossible_requests() {
        for (n, delta, diam, want) in [
            (16, 4, 1, "Moore bound"),
            // Within the Moore bound (17), but no such graph exists: the largest (4,2) graph has 15.
            (16, 4, 2, "not reached"),
            (18, 4, 2, "Moore bound: at most 17"),
            (16, 4, 16, "impossible"),
            (16, 4, 0, "at least 1"),
            (1, 4, 1, "at least 2"),
            (16, 0, 6, "at least 1"),
            (16, 2, 10, "not reached"), // Δ = 2 gives only paths (15) and cycles (8)
            (16, 2, 5, "Moore bound: at most 11"),
            (3, 1, 2, "Moore bound"),
            (1000, 4, 7, "only up to 512"),
        ] {
            let e = match irregular(n, delta, diam, 4, 0) {
                Err(e) => e.to_string(),
                Ok(t) => panic!("({n},{delta},{diam}) built {}", t.name()),
            };
            assert!(e.contains(want), "({n},{delta},{diam}): {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn moore_and_tree_bounds() {
        assert_eq!(moore_bound(4, 1), 5);
        assert_eq!(moore_bound(3, 2), 10);
        assert_eq!(moore_bound(2, 3), 7);
        assert_eq!(moore_bound(1000, 100), u64::MAX);
        assert_eq!(tree_capacity(4, 6), 53);
        assert_eq!(tree_capacity(4, 3), 8);
        assert_eq!(tree_capacity(3, 4), 10);
        assert_eq!(tree_capacity(2, 5), 6);
        assert_eq!(tree_capacity(5, 0), 1);
        assert_eq!(tree_capacity(1000, 1000), u64::MAX);
    }
}
