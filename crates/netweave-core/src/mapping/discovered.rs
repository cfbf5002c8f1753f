//! Lattice discovery: recover the lattice behind a traffic graph whose rank numbers say
//! nothing about geometry (a trace, a shuffled stencil), so the mapper can place it by
//! geometry as it places a `stencil:AxBxC` pattern it is told about.
//!
//! How: in a lattice (mesh, torus, product of rings, hypercube) the two opposite edges of
//! every 4-cycle run along the same dimension in the same direction. Joining edges through
//! 4-cycles (union–find with an orientation bit) splits the edges into one class per
//! dimension; edges in no sizeable class (long-range extras) are left out. A walk over the
//! classified edges then gives every rank integer coordinates (+1 per step along its class's
//! direction); wrap-around edges reveal each periodic dimension's size. Missing edges only
//! remove some 4-cycles, so noisy lattices are still found; graphs with few 4-cycles (random
//! graphs, Bruck, all-to-all) classify almost nothing and no lattice is claimed.
//!
//! [`discover`] runs these phases in order, each a function of this module, and stops at the
//! first that finds no lattice: `TrafficGraph::new` (edges of the graph), `find_squares` and
//! `keep_lattice_squares` (its 4-cycles), `cut_classes` and `dimension_classes` (edges by
//! dimension), `orient_edges` (their direction), `walk_positions` (coordinates),
//! `fold_periodic` (sizes and wrap-around), `settle_ranks` (one rank per point),
//! `explained_share` (how much of the traffic the lattice explains) and `largest_first` (the
//! result, dimensions ordered and the kind named).
//!
//! The result, a [`DiscoveredLattice`], is the mapper's reading of a *traffic* graph; the shape
//! of a *topology* is [`topology::structure`](crate::topology::structure).
//!
//! ```
//! use netweave_core::mapping::{discovered::{discover, DiscoveredKind}, Pattern};
//! let s = discover(&Pattern::stencil(&[6, 5], true, 64).unwrap());
//! assert_eq!(s.kind, DiscoveredKind::Torus);
//! let mut dims = s.dims.clone();
//! dims.sort();
//! assert_eq!(dims, vec![5, 6]);
//! assert_eq!(s.explained_edges, 1.0);
//! ```

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::Pattern;

/// What kind of structure a traffic graph has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscoveredKind {
    /// Every dimension wraps around: a torus (a ring when 1-D, a product of rings).
    Torus,
    /// No dimension wraps: a mesh (a line when 1-D).
    Mesh,
    /// Some dimensions wrap, some do not (a shape no topology generator builds).
    PartlyPeriodic,
    /// Every dimension has size 2: a hypercube.
    Hypercube,
    /// A connected graph without cycles.
    Tree,
    /// Nothing recognised.
    None,
}

impl DiscoveredKind {
    /// The name reports and the bindings print: `torus`, `mesh`, `partly_periodic`,
    /// `hypercube`, `tree`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            DiscoveredKind::Torus => "torus",
            DiscoveredKind::Mesh => "mesh",
            DiscoveredKind::PartlyPeriodic => "partly_periodic",
            DiscoveredKind::Hypercube => "hypercube",
            DiscoveredKind::Tree => "tree",
            DiscoveredKind::None => "none",
        }
    }
}

/// What [`discover`] found: the lattice behind a traffic graph and every rank's coordinates
/// in it (or a tree, or nothing).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiscoveredLattice {
    /// What was found.
    pub kind: DiscoveredKind,
    /// Size of every lattice dimension, largest first (empty unless a lattice was found).
    pub dims: Vec<u32>,
    /// Whether each dimension wraps around.
    pub periodic: Vec<bool>,
    /// Lattice coordinates, `dims.len()` per rank (empty unless a lattice was found).
    #[serde(skip)]
    pub coords: Vec<u32>,
    /// Fraction of the graph's rank pairs joining lattice neighbours (tree: 1 when found).
    pub explained_edges: f64,
    /// The same, weighted by bytes.
    pub explained_bytes: f64,
    /// Ranks whose discovered coordinates clashed or were missing and were put on the nearest
    /// free lattice point.
    pub displaced_ranks: u32,
}

/// Least share of rank pairs a lattice must explain to be claimed.
pub const MIN_EXPLAINED: f64 = 0.9;
/// Most lattice dimensions looked for.
const MAX_DIMS: usize = 8;
/// Ranks of higher degree (a lattice rank has at most 2 × `MAX_DIMS` neighbours, plus a few
/// extra pairs) take no part in finding 4-cycles: hubs, collectives.
const MAX_CORNER_DEGREE: usize = 2 * MAX_DIMS + 4;

impl DiscoveredLattice {
    fn none(kind: DiscoveredKind) -> DiscoveredLattice {
        DiscoveredLattice {
            kind,
            dims: Vec::new(),
            periodic: Vec::new(),
            coords: Vec::new(),
            explained_edges: if kind == DiscoveredKind::Tree { 1.0 } else { 0.0 },
            explained_bytes: if kind == DiscoveredKind::Tree { 1.0 } else { 0.0 },
            displaced_ranks: 0,
        }
    }

    /// The lattice sizes and per-rank coordinates, when a lattice was found.
    pub fn lattice(&self) -> Option<(&[u32], &[u32])> {
        (!self.dims.is_empty()).then_some((&self.dims[..], &self.coords[..]))
    }

    /// One line for people: `torus 16×16×16, 100 % of edges explained`, or `none`.
    pub fn describe(&self) -> String {
        let name = match self.kind {
            DiscoveredKind::Torus if self.dims.len() == 1 => "ring",
            DiscoveredKind::Mesh if self.dims.len() == 1 => "line",
            DiscoveredKind::Torus => "torus",
            DiscoveredKind::Mesh => "mesh",
            DiscoveredKind::PartlyPeriodic => "partly periodic lattice",
            DiscoveredKind::Hypercube => "hypercube",
            DiscoveredKind::Tree => return "tree".to_string(),
            DiscoveredKind::None => return "none".to_string(),
        };
        let dims: Vec<String> = self
            .dims
            .iter()
            .zip(&self.periodic)
            .map(
                |(d, &p)| {
                    if self.kind == DiscoveredKind::PartlyPeriodic && p {
                        format!("{d}p")
                    } else {
                        d.to_string()
                    }
                },
            )
            .collect();
        let pct = (self.explained_edges * 1000.0).floor() / 10.0;
        format!("{name} {}, {pct} % of edges explained", dims.join("×"))
    }
}

/// Union–find over edges, each with its orientation relative to its class root.
struct OrientedSets {
    parent: Vec<u32>,
    /// Orientation of the edge relative to its parent (0 same, 1 reversed).
    flip: Vec<u8>,
}

impl OrientedSets {
    fn new(n: usize) -> Self {
        OrientedSets { parent: (0..n as u32).collect(), flip: vec![0; n] }
    }

    /// Root of `e` and the orientation of `e` relative to it (path halving keeps flips exact).
    fn find(&mut self, mut e: u32) -> (u32, u8) {
        let mut acc = 0u8;
        // First pass: find the root and orientation.
        let start = e;
        while self.parent[e as usize] != e {
            acc ^= self.flip[e as usize];
            e = self.parent[e as usize];
        }
        let root = e;
        // Second pass: point every edge on the path straight at the root.
        let mut x = start;
        let mut to_root = acc;
        while self.parent[x as usize] != x {
            let next = self.parent[x as usize];
            let f = self.flip[x as usize];
            self.parent[x as usize] = root;
            self.flip[x as usize] = to_root;
            to_root ^= f;
            x = next;
        }
        (root, acc)
    }

    /// Record that edge `a` taken with orientation `fa` runs the same way as `b` with `fb`.
    fn join(&mut self, a: u32, fa: u8, b: u32, fb: u8) {
        let (ra, oa) = self.find(a);
        let (rb, ob) = self.find(b);
        let rel = oa ^ fa ^ ob ^ fb;
        if ra == rb {
            // Already joined (a contradiction would come from noise: the first reading stands).
            return;
        }
        self.parent[rb as usize] = ra;
        self.flip[rb as usize] = rel;
    }
}

/// Find the lattice (or tree) a traffic pattern is on, and every rank's coordinates in it.
pub fn discover(pattern: &Pattern) -> DiscoveredLattice {
    let graph = TrafficGraph::new(pattern);
    let n = graph.num_ranks();
    if n < 4 || graph.num_edges() == 0 {
        return DiscoveredLattice::none(DiscoveredKind::None);
    }
    if graph.is_tree() {
        return DiscoveredLattice::none(DiscoveredKind::Tree);
    }
    find_lattice(&graph).unwrap_or_else(|| DiscoveredLattice::none(DiscoveredKind::None))
}

/// The phases after the graph is read; `None` as soon as one finds no lattice.
fn find_lattice(graph: &TrafficGraph) -> Option<DiscoveredLattice> {
    // Most ranks of a lattice have at most 2 × MAX_DIMS partners: refuse denser graphs (Bruck,
    // all-to-all) before looking for 4-cycles, which they have in the millions.
    if graph.median_degree() > 2 * MAX_DIMS {
        return None;
    }
    let mut squares = find_squares(graph)?;
    keep_lattice_squares(graph.num_edges(), &mut squares);
    let edge_classes = cut_classes(graph, &squares);
    let orientation = orient_edges(graph, &squares, &edge_classes);
    drop(squares);
    let classes = dimension_classes(&edge_classes.class_root, orientation)?;
    let walk = walk_positions(graph, &classes)?;
    let lattice = fold_periodic(graph, &classes, walk)?;
    let placed = settle_ranks(graph, &lattice)?;
    let share = explained_share(graph, &lattice, &placed.coords);
    if share.edges < MIN_EXPLAINED {
        return None;
    }
    Some(largest_first(lattice, placed, share))
}

/// The traffic graph as undirected edges: the pattern's symmetric CSR (partners sorted) and
/// an id for every rank pair that communicates.
struct TrafficGraph {
    off: Vec<u32>,
    nbr: Vec<u32>,
    /// Edge id of each CSR slot (`u32::MAX` for a self-loop).
    edge_of_slot: Vec<u32>,
    /// Both ranks of each edge, lower first.
    ends: Vec<(u32, u32)>,
    /// Bytes of each edge, both directions together.
    edge_bytes: Vec<u64>,
}

impl TrafficGraph {
    fn new(pattern: &Pattern) -> Self {
        let n = pattern.num_ranks() as usize;
        let (off, nbr, wts) = pattern.symmetric_csr();
        let mut edge_of_slot = vec![u32::MAX; nbr.len()];
        let mut ends: Vec<(u32, u32)> = Vec::new();
        let mut edge_bytes: Vec<u64> = Vec::new();
        for u in 0..n {
            for k in off[u] as usize..off[u + 1] as usize {
                let v = nbr[k] as usize;
                if u < v {
                    edge_of_slot[k] = ends.len() as u32;
                    ends.push((u as u32, v as u32));
                    edge_bytes.push(wts[k]);
                }
            }
        }
        let mut graph = TrafficGraph { off, nbr, edge_of_slot, ends, edge_bytes };
        // The slot v→u shares the id of the slot u→v (u < v) numbered above.
        for u in 0..n {
            for k in graph.slots(u) {
                let v = graph.nbr[k] as usize;
                if u > v {
                    graph.edge_of_slot[k] = graph.edge_of_slot[graph.slot(v, u as u32).unwrap()];
                }
            }
        }
        graph
    }

    fn num_ranks(&self) -> usize {
        self.off.len() - 1
    }

    fn num_edges(&self) -> usize {
        self.ends.len()
    }

    /// CSR slots of rank `u`'s partners.
    fn slots(&self, u: usize) -> std::ops::Range<usize> {
        self.off[u] as usize..self.off[u + 1] as usize
    }

    /// The slot of partner `v` in rank `u`'s row.
    fn slot(&self, u: usize, v: u32) -> Option<usize> {
        self.nbr[self.slots(u)].binary_search(&v).ok().map(|i| self.off[u] as usize + i)
    }

    fn degree(&self, u: usize) -> usize {
        self.slots(u).len()
    }

    /// Partners of rank `u` without `u` itself (sorted, as the CSR is).
    fn partners(&self, u: usize) -> impl Iterator<Item = u32> + '_ {
        self.nbr[self.slots(u)].iter().copied().filter(move |&v| v as usize != u)
    }

    /// The directed edge p→q (q = `nbr[k]`) as (edge id, orientation relative to lo→hi).
    fn dir(&self, p: usize, k: usize) -> (u32, u8) {
        (self.edge_of_slot[k], u8::from((self.nbr[k] as usize) < p))
    }

    fn median_degree(&self) -> usize {
        let n = self.num_ranks();
        let mut degrees: Vec<u32> = (0..n).map(|u| self.off[u + 1] - self.off[u]).collect();
        *degrees.select_nth_unstable(n / 2).1 as usize
    }

    /// Connected with one edge fewer than vertices.
    fn is_tree(&self) -> bool {
        let n = self.num_ranks();
        if self.num_edges() + 1 != n {
            return false;
        }
        let mut seen = vec![false; n];
        let mut stack = vec![0u32];
        seen[0] = true;
        let mut count = 1;
        while let Some(u) = stack.pop() {
            for &v in &self.nbr[self.slots(u as usize)] {
                if !seen[v as usize] {
                    seen[v as usize] = true;
                    count += 1;
                    stack.push(v);
                }
            }
        }
        count == n
    }

    /// The class of each edge meeting rank `b` (self-loops left out) with its CSR slot.
    fn edges_at(&self, b: usize, class_of: &[u32], at: &mut Vec<(u32, usize)>) {
        at.clear();
        for k in self.slots(b) {
            if self.nbr[k] as usize != b {
                at.push((class_of[self.edge_of_slot[k] as usize], k));
            }
        }
    }
}

/// A 4-cycle u–v–x–w as its directed edges `[u→v, w→x, u→w, v→x]`: the first two run the
/// same way, and so do the last two.
type Square = [(u32, u8); 4];

/// Every 4-cycle between ranks of low degree (each found once per corner); `None` when there
/// are far more than a lattice has.
fn find_squares(graph: &TrafficGraph) -> Option<Vec<Square>> {
    let nbr = &graph.nbr;
    let mut squares: Vec<Square> = Vec::new();
    let mut cands: Vec<(u32, u32, u32)> = Vec::new(); // (x, slot u→v, slot v→x)
                                                      // A lattice of d dimensions has (d − 1) / 2 4-cycles per edge: many more is something else.
    let max_squares = 4 * MAX_DIMS * graph.num_edges();
    for u in 0..graph.num_ranks() {
        if squares.len() > max_squares {
            return None;
        }
        if graph.degree(u) > MAX_CORNER_DEGREE {
            continue;
        }
        cands.clear();
        for k_uv in graph.slots(u) {
            let v = nbr[k_uv] as usize;
            if v == u || graph.degree(v) > MAX_CORNER_DEGREE {
                continue;
            }
            let vx = graph.slots(v);
            for (k_vx, &x) in vx.clone().zip(&nbr[vx]) {
                let x = x as usize;
                if x != u && x != v {
                    cands.push((x as u32, k_uv as u32, k_vx as u32));
                }
            }
        }
        cands.sort_unstable();
        let mut i = 0;
        while i < cands.len() {
            let mut j = i + 1;
            while j < cands.len() && cands[j].0 == cands[i].0 {
                j += 1;
            }
            // Two middles v, w of x form a square; more than a few means a dense spot: skip it.
            if j - i >= 2 && j - i <= 4 && graph.degree(cands[i].0 as usize) <= MAX_CORNER_DEGREE {
                for a in i..j {
                    for b in a + 1..j {
                        let (_, k_uv, k_vx) = cands[a];
                        let (_, k_uw, k_wx) = cands[b];
                        let (v, w) = (nbr[k_uv as usize] as usize, nbr[k_uw as usize] as usize);
                        squares.push([
                            graph.dir(u, k_uv as usize),
                            graph.dir(w, k_wx as usize),
                            graph.dir(u, k_uw as usize),
                            graph.dir(v, k_vx as usize),
                        ]);
                    }
                }
            }
            i = j;
        }
    }
    Some(squares)
}

/// Keep one copy of each 4-cycle, and only the 4-cycles a lattice would have.
fn keep_lattice_squares(num_edges: usize, squares: &mut Vec<Square>) {
    // Each 4-cycle was found from each of its corners: keep one copy. Then keep only the
    // 4-cycles a lattice would have: in a lattice two edges at a corner span at most one
    // 4-cycle, while a long-range extra edge closes two or more with the same lattice edge.
    let edge_set = |q: &Square| {
        let mut k = [q[0].0, q[1].0, q[2].0, q[3].0];
        k.sort_unstable();
        k
    };
    squares.sort_unstable_by_key(edge_set);
    squares.dedup_by_key(|q| edge_set(q));
    let corners = |q: &Square| {
        [(q[0].0, q[2].0), (q[0].0, q[3].0), (q[1].0, q[3].0), (q[1].0, q[2].0)].map(|(a, b)| (a.min(b), a.max(b)))
    };
    let mut corner_pairs: Vec<(u32, u32)> = squares.iter().flat_map(corners).collect();
    corner_pairs.sort_unstable();
    let once = |pair: &(u32, u32)| {
        let lo = corner_pairs.partition_point(|p| p < pair);
        corner_pairs.get(lo + 1) != Some(pair)
    };
    let keep: Vec<bool> = squares.iter().map(|q| corners(q).iter().all(once)).collect();
    let mut kept = keep.iter();
    squares.retain(|_| *kept.next().unwrap());
    drop(corner_pairs);
    // A long-range edge joining the ends of a straight run of three lattice edges (or two
    // parallel long-range edges) closes a 4-cycle a lattice does not have. Its long edges lie
    // in that one 4-cycle only while its lattice edges lie in more than lattice edges usually
    // do (the most common count): drop such 4-cycles.
    let mut in_squares = vec![0u32; num_edges];
    for q in squares.iter() {
        for &(e, _) in q {
            in_squares[e as usize] += 1;
        }
    }
    let usual = {
        let mut histogram = [0u32; 64];
        for &c in &in_squares {
            histogram[(c as usize).min(63)] += 1;
        }
        (1..64).max_by_key(|&c| (histogram[c], std::cmp::Reverse(c))).unwrap_or(1) as u32
    };
    squares.retain(|q| {
        let c = q.map(|(e, _)| in_squares[e as usize]);
        !(c.contains(&1) && c.iter().any(|&x| x > usual))
    });
}

/// Every edge's cut and dimension class, each named by a root edge id.
struct EdgeClasses {
    /// The cut the edge crosses: one position along one dimension.
    cut: Vec<u32>,
    /// The dimension: neighbouring cuts of one dimension joined.
    class_root: Vec<u32>,
}

/// The cut and the dimension class of every edge: first the cuts, then neighbouring cuts of
/// one dimension joined.
fn cut_classes(graph: &TrafficGraph, squares: &[Square]) -> EdgeClasses {
    let (n, num_edges) = (graph.num_ranks(), graph.num_edges());
    // Opposite edges of a 4-cycle cross the same cut of the lattice: classes of edges that
    // cross one cut (Djoković–Winkler), one class per position along a dimension.
    let mut plain = OrientedSets::new(num_edges);
    for q in squares {
        plain.join(q[0].0, 0, q[1].0, 0);
        plain.join(q[2].0, 0, q[3].0, 0);
    }
    let cut: Vec<u32> = (0..num_edges as u32).map(|e| plain.find(e).0).collect();
    // Cuts of two dimensions meet in 4-cycles; consecutive cuts of one dimension never do, and
    // meet at every rank between them, whose two edges run straight through it.
    let mut perpendicular: HashSet<(u32, u32)> = HashSet::new();
    for q in squares {
        let (a, b) = (cut[q[0].0 as usize], cut[q[2].0 as usize]);
        if a != b {
            perpendicular.insert((a.min(b), a.max(b)));
        }
    }
    let mut cut_size = vec![0u32; num_edges];
    for &c in &cut {
        cut_size[c as usize] += 1;
    }
    let mut votes: HashMap<(u32, u32), u32> = HashMap::new();
    let mut at: Vec<(u32, usize)> = Vec::new();
    for b in 0..n {
        if graph.degree(b) > MAX_CORNER_DEGREE {
            continue;
        }
        graph.edges_at(b, &cut, &mut at);
        for i in 0..at.len() {
            for j in i + 1..at.len() {
                let (a, c) = (at[i].0.min(at[j].0), at[i].0.max(at[j].0));
                if a != c && !perpendicular.contains(&(a, c)) {
                    *votes.entry((a, c)).or_insert(0) += 1;
                }
            }
        }
    }
    // Noise meets a cut at a rank or two; neighbouring cuts meet along a whole slab (so a
    // lattice whose slabs hold fewer than 3 edges, a 2×N ladder, is not recognised).
    let mut dimension = OrientedSets::new(num_edges);
    let mut joined: Vec<(u32, u32)> = votes
        .into_iter()
        .filter(|&((a, c), v)| {
            let smaller = cut_size[a as usize].min(cut_size[c as usize]);
            smaller >= 3 && v >= 3 && v * 2 >= smaller
        })
        .map(|(k, _)| k)
        .collect();
    joined.sort_unstable();
    for &(a, c) in &joined {
        dimension.join(a, 0, c, 0);
    }
    let class_root = cut.iter().map(|&c| dimension.find(c).0).collect();
    EdgeClasses { cut, class_root }
}

/// The direction of every edge within its dimension, as oriented sets.
fn orient_edges(graph: &TrafficGraph, squares: &[Square], classes: &EdgeClasses) -> OrientedSets {
    let class_root = &classes.class_root;
    // Directions: opposite edges of a 4-cycle run the same way, and so do a→b and b→c through
    // a rank b whose edges a–b and b–c lie in consecutive cuts of one dimension.
    let mut sets = OrientedSets::new(graph.num_edges());
    for q in squares {
        if class_root[q[0].0 as usize] != class_root[q[2].0 as usize] {
            sets.join(q[0].0, q[0].1, q[1].0, q[1].1);
            sets.join(q[2].0, q[2].1, q[3].0, q[3].1);
        }
    }
    let mut at: Vec<(u32, usize)> = Vec::new();
    for b in 0..graph.num_ranks() {
        if graph.degree(b) > MAX_CORNER_DEGREE {
            continue;
        }
        graph.edges_at(b, &classes.cut, &mut at);
        for i in 0..at.len() {
            for j in i + 1..at.len() {
                let (ci, cj) = (at[i].0, at[j].0);
                let (ei, ej) = (graph.edge_of_slot[at[i].1] as usize, graph.edge_of_slot[at[j].1] as usize);
                if ci != cj && class_root[ei] == class_root[ej] {
                    // Edges b–a and b–c: a→b (the reverse of b→a) runs as b→c.
                    let (e_ba, f_ba) = graph.dir(b, at[i].1);
                    let (e_bc, f_bc) = graph.dir(b, at[j].1);
                    sets.join(e_ba, f_ba ^ 1, e_bc, f_bc);
                }
            }
        }
    }
    sets
}

/// Edges sorted into the lattice's dimensions.
struct DimensionClasses {
    /// Number of dimensions.
    nd: usize,
    /// Dimension of each edge (`u8::MAX`: in none, a long-range extra).
    class_of_edge: Vec<u8>,
    /// Direction of each edge within its dimension (0: lo→hi is `+`).
    orient: Vec<u8>,
}

/// The sizeable edge classes become the dimensions; `None` when there is none or too many.
fn dimension_classes(class_root: &[u32], mut orientation: OrientedSets) -> Option<DimensionClasses> {
    let num_edges = class_root.len();
    let mut class_size = vec![0u32; num_edges];
    for &r in class_root {
        class_size[r as usize] += 1;
    }
    let mut roots: Vec<u32> = (0..num_edges as u32).filter(|&e| class_size[e as usize] >= 2).collect();
    roots.sort_unstable_by_key(|&r| (std::cmp::Reverse(class_size[r as usize]), r));
    let &largest = roots.first()?;
    let floor = (class_size[largest as usize] / 10).max(2);
    roots.retain(|&r| class_size[r as usize] >= floor);
    if roots.len() > MAX_DIMS {
        return None;
    }
    let mut class_of_edge = vec![u8::MAX; num_edges];
    let mut orient = vec![0u8; num_edges];
    for e in 0..num_edges as u32 {
        if let Some(d) = roots.iter().position(|&x| x == class_root[e as usize]) {
            class_of_edge[e as usize] = d as u8;
            orient[e as usize] = orientation.find(e).1;
        }
    }
    Some(DimensionClasses { nd: roots.len(), class_of_edge, orient })
}

/// Integer positions from a walk over classified edges.
struct Walk {
    /// `nd` positions per rank (`i64::MIN` where unreached).
    pos: Vec<i64>,
    /// The walk component of each rank.
    component: Vec<u32>,
    /// The largest component, the one the lattice is read from.
    main: u32,
}

/// Integer coordinates by a walk over classified edges, from each unreached rank in turn;
/// `None` when the largest component holds less than 90 % of the ranks.
fn walk_positions(graph: &TrafficGraph, classes: &DimensionClasses) -> Option<Walk> {
    let (n, nd) = (graph.num_ranks(), classes.nd);
    let mut pos = vec![i64::MIN; n * nd];
    let mut queue: Vec<u32> = Vec::with_capacity(n);
    let mut component = vec![u32::MAX; n];
    let mut comp_sizes: Vec<u32> = Vec::new();
    for s in 0..n {
        if component[s] != u32::MAX {
            continue;
        }
        let c = comp_sizes.len() as u32;
        component[s] = c;
        pos[s * nd..(s + 1) * nd].fill(0);
        queue.clear();
        queue.push(s as u32);
        let mut head = 0;
        while head < queue.len() {
            let u = queue[head] as usize;
            head += 1;
            for k in graph.slots(u) {
                let e = graph.edge_of_slot[k];
                if e == u32::MAX {
                    continue;
                }
                let d = classes.class_of_edge[e as usize];
                let v = graph.nbr[k] as usize;
                if d == u8::MAX || component[v] != u32::MAX {
                    continue;
                }
                component[v] = c;
                // +1 along the class direction: lo→hi when the edge's orientation bit is 0.
                let forward = (u < v) == (classes.orient[e as usize] == 0);
                for j in 0..nd {
                    pos[v * nd + j] = pos[u * nd + j];
                }
                pos[v * nd + d as usize] += if forward { 1 } else { -1 };
                queue.push(v as u32);
            }
        }
        comp_sizes.push(queue.len() as u32);
    }
    let main = (0..comp_sizes.len()).max_by_key(|&c| (comp_sizes[c], std::cmp::Reverse(c))).unwrap() as u32;
    if (comp_sizes[main as usize] as f64) < 0.9 * n as f64 {
        return None;
    }
    Some(Walk { pos, component, main })
}

/// The lattice read from a walk, in discovery order of its dimensions.
struct FoundLattice {
    dims: Vec<u32>,
    periodic: Vec<bool>,
    /// Positions folded into `0..dims[d]` for ranks of the main component.
    walk: Walk,
}

impl FoundLattice {
    fn nd(&self) -> usize {
        self.dims.len()
    }
}

/// Sizes: wrap-around edges step by 1 − size (a multiple of it after detours). Folds each
/// periodic dimension's positions into its ring; `None` when the sizes contradict the walk or
/// the lattice has not about one point per rank.
fn fold_periodic(graph: &TrafficGraph, classes: &DimensionClasses, mut walk: Walk) -> Option<FoundLattice> {
    let (n, nd) = (graph.num_ranks(), classes.nd);
    let main = walk.main;
    let mut dims = vec![0u32; nd];
    let mut periodic = vec![false; nd];
    for d in 0..nd {
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for u in 0..n {
            if walk.component[u] == main {
                lo = lo.min(walk.pos[u * nd + d]);
                hi = hi.max(walk.pos[u * nd + d]);
            }
        }
        let mut g: i64 = 0;
        for (e, &(a, b)) in graph.ends.iter().enumerate() {
            if classes.class_of_edge[e] as usize != d || walk.component[a as usize] != main {
                continue;
            }
            let sign = if classes.orient[e] == 0 { 1 } else { -1 };
            let step = (walk.pos[b as usize * nd + d] - walk.pos[a as usize * nd + d]) * sign;
            if step != 1 {
                g = gcd(g, (1 - step).abs());
            }
        }
        let span = hi - lo + 1;
        if g >= 2 && g <= span {
            dims[d] = g as u32;
            periodic[d] = true;
        } else if g == 0 {
            dims[d] = span as u32;
        } else {
            return None;
        }
        for u in 0..n {
            if walk.component[u] == main {
                let x = walk.pos[u * nd + d] - lo;
                walk.pos[u * nd + d] = if periodic[d] { x.rem_euclid(g) } else { x };
            }
        }
    }
    let points: u64 = dims.iter().map(|&d| d as u64).product();
    if points < n as u64 || points > 2 * n as u64 || dims.iter().any(|&d| d < 2) {
        return None;
    }
    Some(FoundLattice { dims, periodic, walk })
}

/// Every rank's lattice point, one rank per point.
struct Placed {
    /// `nd` coordinates per rank, in discovery order of the dimensions.
    coords: Vec<u32>,
    /// Ranks moved to a free point (clashing or unreached).
    displaced: usize,
}

/// One rank per lattice point: clashing or unreached ranks go to the nearest free point;
/// `None` when more than 5 % of the ranks would have to move.
fn settle_ranks(graph: &TrafficGraph, lattice: &FoundLattice) -> Option<Placed> {
    let (n, nd) = (graph.num_ranks(), lattice.nd());
    let (dims, periodic, walk) = (&lattice.dims, &lattice.periodic, &lattice.walk);
    let points: u64 = dims.iter().map(|&d| d as u64).product();
    let index = |x: &[u32]| -> usize {
        let mut i = 0usize;
        for d in (0..nd).rev() {
            i = i * dims[d] as usize + x[d] as usize;
        }
        i
    };
    let mut coords = vec![0u32; n * nd];
    let mut taken = vec![false; points as usize];
    let mut displaced: Vec<u32> = Vec::new();
    for u in 0..n {
        if walk.component[u] != walk.main {
            displaced.push(u as u32);
            continue;
        }
        for d in 0..nd {
            coords[u * nd + d] = walk.pos[u * nd + d] as u32;
        }
        let i = index(&coords[u * nd..(u + 1) * nd]);
        if taken[i] {
            displaced.push(u as u32);
        } else {
            taken[i] = true;
        }
    }
    if displaced.len() as f64 > 0.05 * n as f64 {
        return None;
    }
    if !displaced.is_empty() {
        let free: Vec<usize> = (0..points as usize).filter(|&i| !taken[i]).collect();
        let point = |mut i: usize| -> Vec<u32> {
            (0..nd)
                .map(|d| {
                    let x = (i % dims[d] as usize) as u32;
                    i /= dims[d] as usize;
                    x
                })
                .collect()
        };
        let mut used = vec![false; free.len()];
        for &u in &displaced {
            // Aim next to an already-placed neighbour, else anywhere.
            let u = u as usize;
            let want: Vec<u32> = graph
                .partners(u)
                .find(|&v| walk.component[v as usize] == walk.main && !displaced.contains(&v))
                .map(|v| coords[v as usize * nd..(v as usize + 1) * nd].to_vec())
                .unwrap_or_else(|| vec![0; nd]);
            let best = (0..free.len())
                .filter(|&f| !used[f])
                .min_by_key(|&f| {
                    let p = point(free[f]);
                    (0..nd).map(|d| lattice_step(p[d], want[d], dims[d], periodic[d])).sum::<u32>()
                })
                .expect("a free point per displaced rank");
            used[best] = true;
            coords[u * nd..(u + 1) * nd].copy_from_slice(&point(free[best]));
        }
    }
    Some(Placed { coords, displaced: displaced.len() })
}

/// How much of the traffic joins lattice neighbours.
struct ExplainedShare {
    /// Share of the rank pairs.
    edges: f64,
    /// Share of the bytes (the pair share when no bytes move).
    bytes: f64,
}

fn explained_share(graph: &TrafficGraph, lattice: &FoundLattice, coords: &[u32]) -> ExplainedShare {
    let nd = lattice.nd();
    let (mut good, mut good_bytes, mut all_bytes) = (0usize, 0u128, 0u128);
    for (e, &(a, b)) in graph.ends.iter().enumerate() {
        all_bytes += graph.edge_bytes[e] as u128;
        let (pa, pb) = (&coords[a as usize * nd..][..nd], &coords[b as usize * nd..][..nd]);
        let steps: u32 = (0..nd).map(|d| lattice_step(pa[d], pb[d], lattice.dims[d], lattice.periodic[d])).sum();
        if steps == 1 {
            good += 1;
            good_bytes += graph.edge_bytes[e] as u128;
        }
    }
    let edges = good as f64 / graph.num_edges() as f64;
    ExplainedShare { edges, bytes: if all_bytes == 0 { edges } else { good_bytes as f64 / all_bytes as f64 } }
}

/// The result with its largest dimension first (ties keep discovery order), coordinates
/// permuted to match, and its kind named.
fn largest_first(lattice: FoundLattice, placed: Placed, share: ExplainedShare) -> DiscoveredLattice {
    let nd = lattice.nd();
    let n = placed.coords.len() / nd;
    let mut order: Vec<usize> = (0..nd).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(lattice.dims[d]));
    let mut sorted = vec![0u32; n * nd];
    for u in 0..n {
        for (j, &d) in order.iter().enumerate() {
            sorted[u * nd + j] = placed.coords[u * nd + d];
        }
    }
    let dims: Vec<u32> = order.iter().map(|&d| lattice.dims[d]).collect();
    // A size-2 ring is a single link: call it what it is.
    let periodic: Vec<bool> = order.iter().map(|&d| lattice.periodic[d] && lattice.dims[d] > 2).collect();
    let kind = if dims.iter().all(|&d| d == 2) && nd >= 2 {
        DiscoveredKind::Hypercube
    } else if periodic.iter().zip(&dims).all(|(&p, &d)| p || d == 2) && periodic.iter().any(|&p| p) {
        DiscoveredKind::Torus
    } else if periodic.iter().all(|&p| !p) {
        DiscoveredKind::Mesh
    } else {
        DiscoveredKind::PartlyPeriodic
    };
    DiscoveredLattice {
        kind,
        dims,
        periodic,
        coords: sorted,
        explained_edges: share.edges,
        explained_bytes: share.bytes,
        displaced_ranks: placed.displaced as u32,
    }
}

/// Steps between two coordinates along one dimension.
fn lattice_step(a: u32, b: u32, size: u32, periodic: bool) -> u32 {
    let d = a.abs_diff(b);
    if periodic {
        d.min(size - d)
    } else {
        d
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests;
