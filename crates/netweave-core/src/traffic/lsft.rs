//! Contention-free all-to-all on the Latin-square fat-tree (paper 000, §3).
//!
//! The LSFT has exactly one leaf–spine–leaf path between two leaves, so the shift pattern
//! `(S + i) mod N` collides heavily on it (throughput ratio ≈ 0.108 at q = 17). Paper 000 gives
//! two static destination orders that keep every directed link at load ≤ 1 in every phase
//! under that unique routing (the `lsft` routing engine):
//!
//! - [`FullSystemAllToAll`] — every server of the LSFT, via *shift-number triples* (a, b, c);
//! - [`SubClusterAllToAll`] — a job of D = n·k·m servers: an n × k rectangle of grid leaves
//!   and m servers under each, via a *vector table* of leaf moves plus a rotation inside each
//!   phase group.
//!
//! Both work for every prime-power order q (GF(q) arithmetic from
//! [`crate::topology::galois`]); the paper states them for prime q only, where every formula
//! below reduces to integers mod q.
//!
//! # Full system: shift-number triples
//!
//! Unfold the tree into five layers (source servers, leaves going up, spines, leaves going
//! down, destination servers). A switch that takes a flow in on input port x and sends it out
//! on port y applies *shift number* (y − x) mod (its port count). In phase (a, b, c) every
//! leaf going up shifts by a, every spine by b and every leaf going down by c, so every switch
//! is a permutation of its ports and no link carries two flows. The phases are the triples
//! with `b ≠ 0 or c = 0` in lexicographic order — (q+1)(q²+q+1) of them, one per server — and
//! every ordered pair (self-pairs included) occurs in exactly one.
//!
//! The port numbers are the generator's canonical ones ([`crate::topology::lsft`]), 0-based:
//!
//! - leaf p, down side: port u is its u-th server (host index = leaf position · (q+1) + u);
//! - leaf p, up side: port j is the j-th line through p in ascending global line order
//!   (L, L(0..q−1), L(c,r) c-major);
//! - spine ℓ: port x is the x-th point of ℓ in set-definition order (L → P, P(0..q−1);
//!   L(c) → P, P(c,0..q−1); L(c,r) → P(c), P(0, r), P(1, r+c), …).
//!
//! The construction works for any numbering in which each physical port keeps one number;
//! this one is fixed so the destination tables are reproducible. Phase order is
//! lexicographic in (a, b, c) (the paper leaves it open).
//!
//! **Two-sided LSFTs** (paper: "carries over by symmetry", not shown): spines have 2(q+1)
//! ports, side-s copy of the x-th point on port s·(q+1) + x, so b runs over 0..2(q+1). A flow
//! with b = q+1 reaches the same point's copy on the other side, a pair that any of the q+1
//! spines of that point connects; as for b = 0, only c = 0 is kept, which sends server u's
//! flow to the server whose slot equals the spine's up-port index — the spine the `lsft`
//! routing engine picks with its default per-destination selection. Phases: 2(q+1)(q²+q+1).
//!
//! # Sub-cluster: the (n, k, m) schedule
//!
//! Leaves P(x, y) with column index x ∈ 0..k and row y ∈ GF(n) form the rectangle; the m
//! servers with slots (local IDs) 0..m under each leaf take part: D = n·k·m ranks, m ≤ k ≤ n.
//! A *vector* moves every rectangle leaf to another one ([`LeafMove`]); the n·k vectors are
//! n−1 vertical ones [∞, h], k−1 of each finite slope s, and the zero vector [*]. Column 0 of
//! the vector table lists them in that order; column j is column 0 rotated down by j(n−1)
//! rows ([`vector_table`]), which gives the m vectors of each row pairwise different slopes.
//! Phase group g (0 ≤ g < nk) has m phases t = g·m + i: a server with local ID j moves its
//! leaf by vector V[g][j] and sends to local ID (i + j) mod m there.
//!
//! The move of (a_x, a_y) by [s, h] (finite s) is defined by [`MoveRule`]:
//!
//! - `text` (normative, §3.2.3 of the paper): b_x = (a_x + h) mod k,
//!   b_y = a_y + s·(b_x − a_x) — the point of column b_x on the slope-s line through a, so all
//!   flows of one vector and one line share one spine and the move is a bijection;
//! - `paper-table3` (erratum mode): b_y = a_y + s·h. It is what actually produced the paper's
//!   Table 3, and differs from `text` exactly where the column index wraps (b_x − a_x ≠ h). It is
//!   contention-free only for k ≤ 2, k = n or m = 1; elsewhere it typically overloads links
//!   (e.g. (7, 6, 6) gives a throughput ratio near 0.81).
//!
//! [∞, h] moves to (a_x, a_y + h) and [*] stays. All y arithmetic is in GF(n) (column index x
//! is the field element with the same encoding); for prime n that is plain mod n.
//!
//! Ranks are numbered by [`RankOrder`]; the paper's Fig. 14 numbering is
//! [`RankOrder::RowMajor`], rank = (y·k + x)·m + j.
//!
//! ```
//! use netweave_core::traffic::lsft::{MoveRule, RankOrder, SubClusterAllToAll};
//! let job = SubClusterAllToAll::new(3, 2, 2, MoveRule::Text, RankOrder::RowMajor).unwrap();
//! let mut dest = vec![0; 12];
//! job.phase_destinations(0, &mut dest);
//! assert_eq!(dest[0], 4);   // paper's example: server 0 moves by [∞,1] to P(0,1), server 4
//! assert!(SubClusterAllToAll::new(5, 2, 3, MoveRule::Text, RankOrder::RowMajor).is_err()); // m > k
//! ```

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;
use serde::Serialize;

use super::{Collective, Delivery, Message, Schedule};
use crate::error::{NetweaveError, Result};
use crate::topology::galois::GaloisField;
use crate::topology::lsft::LsftLayout;
use crate::topology::plane::ProjectivePlane;
use crate::topology::Topology;

// ---------------------------------------------------------------------------------------------
// Full system
// ---------------------------------------------------------------------------------------------

/// Shift numbers of one full-system phase: `a` at the leaves going up, `b` at the spines,
/// `c` at the leaves going down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ShiftTriple {
    pub a: u32,
    pub b: u32,
    pub c: u32,
}

impl fmt::Display for ShiftTriple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({},{},{})", self.a, self.b, self.c)
    }
}

/// The executed triples of an LSFT of order q, in lexicographic order: `b ≠ 0 or c = 0`
/// (two-sided: `b ∉ {0, q+1} or c = 0`). Their number equals the number of servers.
///
/// ```
/// use netweave_core::traffic::lsft::full_system_triples;
/// assert_eq!(full_system_triples(2, false).len(), 21);
/// assert_eq!(full_system_triples(3, false).len(), 52);
/// assert_eq!(full_system_triples(2, true).len(), 42);
/// ```
pub fn full_system_triples(order: u32, two_sided: bool) -> Vec<ShiftTriple> {
    let d = order + 1;
    let spine_ports = if two_sided { 2 * d } else { d };
    let turns_back = |b: u32| b == 0 || (two_sided && b == d);
    let mut out = Vec::with_capacity((spine_ports * d * d) as usize);
    for a in 0..d {
        for b in 0..spine_ports {
            for c in 0..d {
                if !turns_back(b) || c == 0 {
                    out.push(ShiftTriple { a, b, c });
                }
            }
        }
    }
    out
}

/// Paper 000's all-server all-to-all on a full (not reduced) LSFT, one- or two-sided.
///
/// Rank r is host index r (leaf-consecutive: leaf position · (q+1) + slot), so the schedule's
/// placement is the identity.
///
/// ```
/// use netweave_core::traffic::lsft::{FullSystemAllToAll, ShiftTriple};
/// let a2a = FullSystemAllToAll::new(2, false).unwrap();
/// // The paper's red flow (2,0,1): up 1 → 0, spine 0 → 0, down 0 → 1: back to itself.
/// assert_eq!(a2a.destination(ShiftTriple { a: 2, b: 0, c: 1 }, 1), 1);
/// assert_eq!(a2a.schedule(8).unwrap().num_phases(), 20);   // the identity phase is local only
/// ```
#[derive(Clone, Debug)]
pub struct FullSystemAllToAll {
    layout: LsftLayout,
    /// Points (= lines) per side: q² + q + 1.
    points: u32,
    /// `up_line[p·d + j]`: the j-th line through point p (leaf up-port j).
    up_line: Vec<u32>,
    /// `spine_in[p·d + j]`: position of p on its j-th line (spine port, side 0).
    spine_in: Vec<u32>,
    /// `down_point[ℓ·d + x]`: the x-th point of line ℓ (spine port x, side 0).
    down_point: Vec<u32>,
    /// `down_in[ℓ·d + x]`: position of ℓ among the lines through its x-th point (leaf up-port).
    down_in: Vec<u32>,
    triples: Vec<ShiftTriple>,
}

impl FullSystemAllToAll {
    /// The schedule for the full LSFT of `order` (any prime power), one- or two-sided.
    pub fn new(order: u32, two_sided: bool) -> Result<Self> {
        let plane = ProjectivePlane::new(order)?;
        let layout = LsftLayout::new(order, two_sided, false)?;
        let d = order + 1;
        let points = plane.num_points();
        let mut up_line = Vec::with_capacity((points * d) as usize);
        let mut spine_in = Vec::with_capacity((points * d) as usize);
        let mut down_point = Vec::with_capacity((points * d) as usize);
        let mut down_in = Vec::with_capacity((points * d) as usize);
        for p in 0..points {
            for &l in plane.lines_through_point(p) {
                up_line.push(l);
                spine_in.push(plane.point_position(l, p).expect("p lies on each line through it"));
            }
        }
        for l in 0..points {
            for &p in plane.points_of_line(l) {
                down_point.push(p);
                down_in.push(plane.line_position(p, l).expect("l passes through each of its points"));
            }
        }
        let triples = full_system_triples(order, two_sided);
        Ok(FullSystemAllToAll { layout, points, up_line, spine_in, down_point, down_in, triples })
    }

    /// The schedule for an LSFT topology (family "lsft"). Reduced builds lack leaves and the
    /// spine L the triples need: use [`SubClusterAllToAll`] there.
    pub fn for_topology(topo: &Topology) -> Result<Self> {
        let lay = LsftLayout::from_topology(topo)?;
        if lay.reduced {
            return crate::invalid!(
                "the full-system LSFT schedule needs every leaf and spine, but '{}' is reduced; \
                 use the sub-cluster schedule (lsft-partial) instead",
                topo.name()
            );
        }
        Self::new(lay.order, lay.two_sided)
    }

    /// Plane order q.
    pub fn order(&self) -> u32 {
        self.layout.order
    }

    /// Whether the schedule covers both sides of a two-sided LSFT.
    pub fn two_sided(&self) -> bool {
        self.layout.two_sided
    }

    /// Ranks = servers of the LSFT.
    pub fn num_ranks(&self) -> u32 {
        self.layout.num_hosts() as u32
    }

    /// The phases' triples, in schedule order.
    pub fn triples(&self) -> &[ShiftTriple] {
        &self.triples
    }

    /// Host index that host `src` sends to in phase `t` (any triple, executed or not).
    /// Panics if `src` is not a host index of this LSFT or a shift is out of range.
    pub fn destination(&self, t: ShiftTriple, src: u32) -> u32 {
        let d = self.layout.order + 1;
        let (pos, u) = (src / d, src % d);
        let (side, p) = (pos / self.points, pos % self.points);
        // Leaf going up: server port u → up-port j, reaching spine ℓ on its port x.
        let j = (u + t.a) % d;
        let slot = (p * d + j) as usize;
        let line = self.up_line[slot];
        let x = side * d + self.spine_in[slot];
        // Spine: port x → port y, i.e. the y-th point on side y / d.
        let y = (x + t.b) % (d * self.layout.sides());
        let down = (line * d + y % d) as usize;
        let (dside, dp) = (y / d, self.down_point[down]);
        // Leaf going down: up-port z → server port w.
        let w = (self.down_in[down] + t.c) % d;
        (dside * self.points + dp) * d + w
    }

    /// Destination of every rank in phase `phase` (rank = host index); `out.len()` must be
    /// [`num_ranks`](Self::num_ranks).
    pub fn phase_destinations(&self, phase: usize, out: &mut [u32]) {
        let t = self.triples[phase];
        for (src, dst) in out.iter_mut().enumerate() {
            *dst = self.destination(t, src as u32);
        }
    }

    /// The schedule: one phase per triple, `bytes` per message. Self-sends are local copies
    /// and left out, so the identity triple (0,0,0) yields no phase: (q+1)(q²+q+1) − 1
    /// phases one-sided.
    pub fn schedule(&self, bytes: u64) -> Result<Schedule> {
        let n = self.num_ranks();
        let phases: Vec<Vec<Message>> = self
            .triples
            .par_iter()
            .map(|&t| {
                (0..n)
                    .filter_map(|src| {
                        let dst = self.destination(t, src);
                        (dst != src).then_some(Message { src, dst, bytes })
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|phase| !phase.is_empty())
            .collect();
        let sided = if self.layout.two_sided { ", two-sided" } else { "" };
        Ok(Schedule::from_phases(format!("alltoall-lsft(q={}{sided})", self.layout.order), n, phases)?
            .with_collective(Collective::Alltoall, Delivery::Direct)
            .with_permutation_claim(true))
    }
}

// ---------------------------------------------------------------------------------------------
// Sub-cluster
// ---------------------------------------------------------------------------------------------

/// How a finite-slope vector moves a leaf (module docs; paper 000 §3.2.3 vs. its Table 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum MoveRule {
    /// b_y = a_y + s·(b_x − a_x): the rule as written; contention-free for every m ≤ k ≤ n.
    #[default]
    Text,
    /// b_y = a_y + s·h: reproduces the paper's Table 3 (erratum mode; contended in general).
    PaperTable3,
}

impl MoveRule {
    /// Every rule, in CLI order.
    pub const ALL: [MoveRule; 2] = [MoveRule::Text, MoveRule::PaperTable3];

    /// CLI name: `"text"` or `"paper-table3"`.
    pub fn name(self) -> &'static str {
        match self {
            MoveRule::Text => "text",
            MoveRule::PaperTable3 => "paper-table3",
        }
    }
}

impl fmt::Display for MoveRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MoveRule {
    type Err = NetweaveError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(MoveRule::Text),
            "paper-table3" | "table3" => Ok(MoveRule::PaperTable3),
            _ => crate::invalid!("unknown move rule '{s}' (known: text, paper-table3)"),
        }
    }
}

/// How the n·k·m servers of a sub-cluster are numbered as ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum RankOrder {
    /// rank = (y·k + x)·m + j: rows of the rectangle one after another (paper 000 Fig. 14).
    #[default]
    RowMajor,
    /// rank = (x·n + y)·m + j: columns (vertical lines) one after another.
    ColumnMajor,
}

impl RankOrder {
    /// Every order, in CLI order.
    pub const ALL: [RankOrder; 2] = [RankOrder::RowMajor, RankOrder::ColumnMajor];

    /// CLI name: `"row-major"` or `"column-major"`.
    pub fn name(self) -> &'static str {
        match self {
            RankOrder::RowMajor => "row-major",
            RankOrder::ColumnMajor => "column-major",
        }
    }
}

impl fmt::Display for RankOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RankOrder {
    type Err = NetweaveError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "row-major" | "row" => Ok(RankOrder::RowMajor),
            "column-major" | "column" | "col" => Ok(RankOrder::ColumnMajor),
            _ => crate::invalid!("unknown rank order '{s}' (known: row-major, column-major)"),
        }
    }
}

/// A vector of paper 000 §3.2.3: how every rectangle leaf moves in one phase group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum LeafMove {
    /// [*]: stay on the same leaf.
    Stay,
    /// [∞, h]: h rows up the vertical line (spine L(x)).
    Vertical { hop: u32 },
    /// [s, h]: h columns right along the line of slope s.
    Sloped { slope: u32, hop: u32 },
}

impl LeafMove {
    /// Slope class for the "pairwise different slopes" constraint: the slope for finite
    /// slopes, n for ∞, n + 1 for the zero vector (a class of its own).
    pub fn slope_class(self, n: u32) -> u32 {
        match self {
            LeafMove::Sloped { slope, .. } => slope,
            LeafMove::Vertical { .. } => n,
            LeafMove::Stay => n + 1,
        }
    }
}

impl fmt::Display for LeafMove {
    /// The paper's notation: `[∞,1]`, `[2,1]`, `[*]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LeafMove::Stay => write!(f, "[*]"),
            LeafMove::Vertical { hop } => write!(f, "[∞,{hop}]"),
            LeafMove::Sloped { slope, hop } => write!(f, "[{slope},{hop}]"),
        }
    }
}

/// Check the (n, k, m) parameters: n a prime power (≥ 2), 1 ≤ m ≤ k ≤ n.
fn check_sub_cluster(n: u32, k: u32, m: u32) -> Result<ProjectivePlane> {
    let plane = ProjectivePlane::new(n)?;
    if k == 0 || m == 0 {
        return crate::invalid!("k and m must be at least 1, got k = {k}, m = {m}");
    }
    if k > n {
        return crate::invalid!("k must not exceed the order n: k = {k} > n = {n} (the rectangle has k of n columns)");
    }
    if m > k {
        return crate::invalid!(
            "m must not exceed k: m = {m} > k = {k} (with more servers than columns per leaf, \
             two of a leaf's vectors would share a slope and a spine)"
        );
    }
    Ok(plane)
}

/// The n·k vectors in the order of column 0 of the vector table: [∞, 1..n−1], then
/// [s, 1..k−1] for s = 0..n−1, then [*].
///
/// ```
/// use netweave_core::traffic::lsft::vector_list;
/// let v: Vec<String> = vector_list(3, 2).unwrap().iter().map(|v| v.to_string()).collect();
/// assert_eq!(v, ["[∞,1]", "[∞,2]", "[0,1]", "[1,1]", "[2,1]", "[*]"]);
/// ```
pub fn vector_list(n: u32, k: u32) -> Result<Vec<LeafMove>> {
    check_sub_cluster(n, k, 1)?;
    let mut v = Vec::with_capacity((n * k) as usize);
    v.extend((1..n).map(|hop| LeafMove::Vertical { hop }));
    for slope in 0..n {
        v.extend((1..k).map(|hop| LeafMove::Sloped { slope, hop }));
    }
    v.push(LeafMove::Stay);
    Ok(v)
}

/// The vector table: `table[g][j]` is the vector of local ID j in phase group g; column j is
/// column 0 rotated down by j·(n−1) rows (paper 000 Table 1 for (3, 2, 2)).
pub fn vector_table(n: u32, k: u32, m: u32) -> Result<Vec<Vec<LeafMove>>> {
    check_sub_cluster(n, k, m)?;
    let col0 = vector_list(n, k)?;
    let nk = (n * k) as usize;
    let shift = (n - 1) as usize;
    Ok((0..nk).map(|g| (0..m as usize).map(|j| col0[(g + nk - (j * shift) % nk) % nk]).collect()).collect())
}

/// Paper 000's all-to-all for a sub-cluster of n·k·m servers on an LSFT of order n.
///
/// Phase t = g·m + i (group g, step i). [`phase_destinations`](Self::phase_destinations)
/// gives the full permutation (self-sends included, as in the paper's Table 3);
/// [`schedule`](Self::schedule) the job's [`Schedule`] with its placement.
#[derive(Clone, Debug)]
pub struct SubClusterAllToAll {
    n: u32,
    k: u32,
    m: u32,
    rule: MoveRule,
    rank_order: RankOrder,
    field: GaloisField,
    /// Flat vector table: `table[g·m + j]`.
    table: Vec<LeafMove>,
}

impl SubClusterAllToAll {
    /// The schedule for order `n` (any prime power), k columns and m servers per leaf.
    ///
    /// Errors (one line): n not a prime power, k or m zero, k > n, m > k.
    pub fn new(n: u32, k: u32, m: u32, rule: MoveRule, rank_order: RankOrder) -> Result<Self> {
        let plane = check_sub_cluster(n, k, m)?;
        let table = vector_table(n, k, m)?.into_iter().flatten().collect();
        Ok(SubClusterAllToAll { n, k, m, rule, rank_order, field: plane.field().clone(), table })
    }

    /// Plane order n (rows of the rectangle).
    pub fn order(&self) -> u32 {
        self.n
    }
    /// Columns of the rectangle.
    pub fn columns(&self) -> u32 {
        self.k
    }
    /// Servers per leaf.
    pub fn servers_per_leaf(&self) -> u32 {
        self.m
    }
    /// The move rule in use.
    pub fn rule(&self) -> MoveRule {
        self.rule
    }
    /// The rank numbering in use.
    pub fn rank_order(&self) -> RankOrder {
        self.rank_order
    }
    /// n·k·m ranks.
    pub fn num_ranks(&self) -> u32 {
        self.n * self.k * self.m
    }
    /// n·k·m phases (n·k groups of m), before self-only phases are dropped.
    pub fn num_phases(&self) -> usize {
        self.num_ranks() as usize
    }
    /// Vector of local ID `j` in phase group `g`.
    pub fn vector(&self, g: u32, j: u32) -> LeafMove {
        self.table[(g * self.m + j) as usize]
    }

    /// Rank of the server with local ID `j` under rectangle leaf (column x, row y).
    pub fn rank(&self, x: u32, y: u32, j: u32) -> u32 {
        let leaf = match self.rank_order {
            RankOrder::RowMajor => y * self.k + x,
            RankOrder::ColumnMajor => x * self.n + y,
        };
        leaf * self.m + j
    }

    /// (column x, row y, local ID j) of a rank.
    pub fn coords(&self, rank: u32) -> (u32, u32, u32) {
        let (leaf, j) = (rank / self.m, rank % self.m);
        match self.rank_order {
            RankOrder::RowMajor => (leaf % self.k, leaf / self.k, j),
            RankOrder::ColumnMajor => (leaf / self.n, leaf % self.n, j),
        }
    }

    /// Where leaf (x, y) goes under vector `v` with this schedule's move rule.
    pub fn move_leaf(&self, x: u32, y: u32, v: LeafMove) -> (u32, u32) {
        let f = &self.field;
        match v {
            LeafMove::Stay => (x, y),
            LeafMove::Vertical { hop } => (x, f.add(y, hop)),
            LeafMove::Sloped { slope, hop } => {
                let bx = (x + hop) % self.k;
                let rise = match self.rule {
                    MoveRule::Text => f.mul(slope, f.sub(bx, x)),
                    MoveRule::PaperTable3 => f.mul(slope, hop),
                };
                (bx, f.add(y, rise))
            }
        }
    }

    /// Destination rank of every rank in phase `phase` (= g·m + i), self-sends included;
    /// `out.len()` must be [`num_ranks`](Self::num_ranks).
    pub fn phase_destinations(&self, phase: usize, out: &mut [u32]) {
        let (g, i) = (phase as u32 / self.m, phase as u32 % self.m);
        for (r, dst) in out.iter_mut().enumerate() {
            let (x, y, j) = self.coords(r as u32);
            let (bx, by) = self.move_leaf(x, y, self.vector(g, j));
            *dst = self.rank(bx, by, (i + j) % self.m);
        }
    }

    /// All phases' destinations, flat: `table[t·D + r]` (D = n·k·m).
    pub fn destination_table(&self) -> Vec<u32> {
        let d = self.num_ranks() as usize;
        let mut out = vec![0u32; d * d];
        out.par_chunks_mut(d).enumerate().for_each(|(t, row)| self.phase_destinations(t, row));
        out
    }

    /// Host index of every rank (the job allocation): rank (x, y, j) runs on slot j of grid
    /// leaf P(x, y) on `side` of the LSFT `layout`, whose order must be n. Reduced and
    /// two-sided LSFTs work (grid leaves are always present).
    pub fn hosts(&self, layout: &LsftLayout, side: u32) -> Result<Vec<u32>> {
        if layout.order != self.n {
            return crate::invalid!(
                "the sub-cluster schedule is for an LSFT of order {}, but the topology has order {}",
                self.n,
                layout.order
            );
        }
        if side >= layout.sides() {
            return crate::invalid!("side {side} does not exist: the LSFT has {} side(s)", layout.sides());
        }
        (0..self.num_ranks())
            .map(|r| {
                let (x, y, j) = self.coords(r);
                layout.host_index(side, layout.grid_point(x, y), j).ok_or_else(|| {
                    NetweaveError::InvalidParameter(format!("leaf P({x},{y}) slot {j} is not part of this LSFT"))
                })
            })
            .collect()
    }

    /// The job's schedule on `layout` (side `side`), `bytes` per message, placement included.
    /// Self-sends are local copies and left out; a phase with nothing else (m = 1, zero
    /// vector) is dropped.
    pub fn schedule(&self, layout: &LsftLayout, side: u32, bytes: u64) -> Result<Schedule> {
        let hosts = self.hosts(layout, side)?;
        let d = self.num_ranks() as usize;
        let phases: Vec<Vec<Message>> = (0..self.num_phases())
            .into_par_iter()
            .map_init(
                || vec![0u32; d],
                |dest, t| {
                    self.phase_destinations(t, dest);
                    dest.iter()
                        .enumerate()
                        .filter(|&(src, &dst)| src as u32 != dst)
                        .map(|(src, &dst)| Message { src: src as u32, dst, bytes })
                        .collect::<Vec<_>>()
                },
            )
            .filter(|phase| !phase.is_empty())
            .collect();
        let name = format!(
            "alltoall-lsft-partial(n={},k={},m={},rule={},order={})",
            self.n, self.k, self.m, self.rule, self.rank_order
        );
        Schedule::from_phases(name, self.num_ranks(), phases)?
            .with_collective(Collective::Alltoall, Delivery::Direct)
            .with_permutation_claim(true)
            .with_placement(hosts)
    }

    /// The job's schedule on an LSFT topology (its order is n).
    pub fn schedule_for(&self, topo: &Topology, side: u32, bytes: u64) -> Result<Schedule> {
        self.schedule(&LsftLayout::from_topology(topo)?, side, bytes)
    }
}

/// The shift baseline `(S + i) mod N` on the same sub-cluster and rank order (paper 000's
/// comparison), placed like [`SubClusterAllToAll::hosts`].
pub fn sub_cluster_shift(job: &SubClusterAllToAll, layout: &LsftLayout, side: u32, bytes: u64) -> Result<Schedule> {
    Schedule::shift_alltoall(job.num_ranks(), bytes)?.with_placement(job.hosts(layout, side)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::routing::{route, Engine, RouteOptions, RoutingTable};
    use crate::topology::lsft::latin_square_fat_tree;
    use proptest::prelude::*;

    fn lsft_routed(q: u32, two_sided: bool, reduced: bool) -> (Topology, RoutingTable) {
        let t = latin_square_fat_tree(q, two_sided, reduced).unwrap();
        let r = route(&t, Engine::Lsft, &RouteOptions::default()).unwrap();
        (t, r)
    }

    /// Every phase a permutation of 0..n and every ordered pair (self included) exactly once.
    fn assert_complete(n: usize, phases: usize, mut dest_of: impl FnMut(usize, &mut [u32])) {
        assert_eq!(phases, n, "one phase per rank");
        let mut pair_seen = vec![false; n * n];
        let mut dest = vec![0u32; n];
        for t in 0..phases {
            dest_of(t, &mut dest);
            let mut hit = vec![false; n];
            for (s, &d) in dest.iter().enumerate() {
                assert!(!std::mem::replace(&mut hit[d as usize], true), "phase {t} sends twice to {d}");
                assert!(!std::mem::replace(&mut pair_seen[s * n + d as usize], true), "pair {s}->{d} twice");
            }
        }
        assert!(pair_seen.iter().all(|&b| b));
    }

    #[test]
    fn triples_match_the_server_count_and_the_paper_facts() {
        for q in [2u32, 3, 4, 5, 7, 8, 9] {
            let servers = (q + 1) * (q * q + q + 1);
            assert_eq!(full_system_triples(q, false).len() as u32, servers);
            assert_eq!(full_system_triples(q, true).len() as u32, 2 * servers);
        }
        let a2a = FullSystemAllToAll::new(3, false).unwrap();
        let d = 4;
        for h in 0..a2a.num_ranks() {
            assert_eq!(a2a.destination(ShiftTriple { a: 0, b: 0, c: 0 }, h), h);
            for a in 1..d {
                // (a,0,0): shift by a among the servers of each leaf.
                assert_eq!(a2a.destination(ShiftTriple { a, b: 0, c: 0 }, h), h / d * d + (h % d + a) % d);
            }
            for b in 1..d {
                let t = ShiftTriple { a: h % 3, b, c: (h / 3) % d };
                assert_ne!(a2a.destination(t, h) / d, h / d, "b ≠ 0 always leaves the leaf");
            }
        }
        // Paper's red flow for n = 2: (2,0,1) is the identity.
        let two = FullSystemAllToAll::new(2, false).unwrap();
        assert!((0..21).all(|h| two.destination(ShiftTriple { a: 2, b: 0, c: 1 }, h) == h));
    }

    #[test]
    fn full_system_is_complete_and_contention_free() {
        for (q, two_sided) in
            [(2, false), (3, false), (4, false), (5, false), (7, false), (2, true), (3, true), (4, true)]
        {
            let a2a = FullSystemAllToAll::new(q, two_sided).unwrap();
            let n = a2a.num_ranks() as usize;
            assert_complete(n, a2a.triples().len(), |t, out| a2a.phase_destinations(t, out));
            let (topo, routes) = lsft_routed(q, two_sided, false);
            let s = FullSystemAllToAll::for_topology(&topo).unwrap().schedule(64).unwrap();
            assert_eq!(s.num_phases(), n - 1, "identity phase is dropped");
            assert_eq!(s.num_messages(), n * (n - 1));
            s.check_complete().unwrap();
            let rep = analyze(&topo, &routes, &s).unwrap();
            assert_eq!((rep.max_congestion, rep.throughput_ratio), (1, 1.0), "q={q} two_sided={two_sided}");
        }
    }

    /// Renumber every leaf's up-ports and every spine's ports by seeded random permutations,
    /// keeping each physical port's number consistent in all tables.
    fn renumbered(a2a: &FullSystemAllToAll, seed: u64) -> FullSystemAllToAll {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let d = (a2a.order() + 1) as usize;
        let n = a2a.points as usize;
        let perm = |rng: &mut rand_chacha::ChaCha8Rng| {
            let mut p: Vec<u32> = (0..d as u32).collect();
            p.shuffle(rng);
            p
        };
        let up: Vec<Vec<u32>> = (0..n).map(|_| perm(&mut rng)).collect(); // leaf p: old j → new j
        let spine: Vec<Vec<u32>> = (0..n).map(|_| perm(&mut rng)).collect(); // line l: old x → new x
        let mut out = a2a.clone();
        for (p, leaf_perm) in up.iter().enumerate() {
            for (j, &new_j) in leaf_perm.iter().enumerate() {
                let (old, new) = (p * d + j, p * d + new_j as usize);
                let line = a2a.up_line[old] as usize;
                out.up_line[new] = a2a.up_line[old];
                out.spine_in[new] = spine[line][a2a.spine_in[old] as usize];
            }
        }
        for (l, line_perm) in spine.iter().enumerate() {
            for (x, &new_x) in line_perm.iter().enumerate() {
                let (old, new) = (l * d + x, l * d + new_x as usize);
                let point = a2a.down_point[old] as usize;
                out.down_point[new] = a2a.down_point[old];
                out.down_in[new] = up[point][a2a.down_in[old] as usize];
            }
        }
        out
    }

    #[test]
    fn any_consistent_port_numbering_works() {
        for (q, seed) in [(2, 1), (3, 2), (4, 3), (5, 4), (7, 5)] {
            let canonical = FullSystemAllToAll::new(q, false).unwrap();
            let a2a = renumbered(&canonical, seed);
            let n = a2a.num_ranks() as usize;
            assert_complete(n, a2a.triples().len(), |t, out| a2a.phase_destinations(t, out));
            let (topo, routes) = lsft_routed(q, false, false);
            let rep = analyze(&topo, &routes, &a2a.schedule(1).unwrap()).unwrap();
            assert_eq!((rep.max_congestion, rep.throughput_ratio), (1, 1.0), "q={q}");
            let differs = (0..n).any(|t| {
                let (mut x, mut y) = (vec![0; n], vec![0; n]);
                canonical.phase_destinations(t, &mut x);
                a2a.phase_destinations(t, &mut y);
                x != y
            });
            assert!(differs, "the renumbering changes the phases");
        }
    }

    #[test]
    fn full_system_needs_a_full_lsft() {
        let (reduced, _) = lsft_routed(3, false, true);
        let e = FullSystemAllToAll::for_topology(&reduced).unwrap_err().to_string();
        assert!(e.contains("reduced") && e.contains("lsft-partial"), "{e}");
        let ft = crate::topology::fat_tree::fat_tree(3, 2, false).unwrap();
        assert!(FullSystemAllToAll::for_topology(&ft).unwrap_err().to_string().contains("not an lsft"));
        assert!(FullSystemAllToAll::new(6, false).unwrap_err().to_string().contains("not a prime power"));
    }

    #[test]
    fn table_1_vector_table() {
        let t = vector_table(3, 2, 2).unwrap();
        let cells: Vec<[String; 2]> = t.iter().map(|r| [r[0].to_string(), r[1].to_string()]).collect();
        let paper = [
            ["[∞,1]", "[2,1]"],
            ["[∞,2]", "[*]"],
            ["[0,1]", "[∞,1]"],
            ["[1,1]", "[∞,2]"],
            ["[2,1]", "[0,1]"],
            ["[*]", "[1,1]"],
        ];
        assert_eq!(cells, paper.map(|r| r.map(String::from)));
    }

    #[test]
    fn vector_tables_keep_slopes_distinct_and_columns_complete() {
        for n in [2u32, 3, 4, 5, 7, 8, 9, 11] {
            for k in 1..=n {
                let col0 = vector_list(n, k).unwrap();
                assert_eq!(col0.len() as u32, n * k);
                let m = k;
                let t = vector_table(n, k, m).unwrap();
                let nk = (n * k) as usize;
                for j in 0..m as usize {
                    for g in 0..nk {
                        assert_eq!(t[g][j], col0[(g + nk - j * (n as usize - 1) % nk) % nk]);
                    }
                    let mut col: Vec<String> = t.iter().map(|r| r[j].to_string()).collect();
                    col.sort();
                    col.dedup();
                    assert_eq!(col.len(), nk, "column {j} holds every vector");
                }
                for row in &t {
                    let mut classes: Vec<u32> = row.iter().map(|v| v.slope_class(n)).collect();
                    classes.sort();
                    classes.dedup();
                    assert_eq!(classes.len(), m as usize, "n={n} k={k}: slopes differ in a row");
                }
            }
        }
    }

    #[test]
    fn table_2_rotation_inside_a_group() {
        // Derived from the real schedule: local ID of the destination of comm j in phase i.
        let paper_m4 = [[0, 1, 2, 3], [1, 2, 3, 0], [2, 3, 0, 1], [3, 0, 1, 2]];
        for (m, expect) in [(2u32, vec![vec![0, 1], vec![1, 0]]), (4, paper_m4.iter().map(|r| r.to_vec()).collect())] {
            let job = SubClusterAllToAll::new(5, 4, m, MoveRule::Text, RankOrder::RowMajor).unwrap();
            let mut dest = vec![0; job.num_ranks() as usize];
            for g in 0..20 {
                for i in 0..m {
                    job.phase_destinations((g * m + i) as usize, &mut dest);
                    for j in 0..m {
                        assert_eq!(dest[job.rank(0, 0, j) as usize] % m, expect[j as usize][i as usize]);
                    }
                }
            }
        }
    }

    const TABLE_3: [[u32; 12]; 12] = [
        [4, 11, 6, 9, 8, 3, 10, 1, 0, 7, 2, 5],
        [5, 10, 7, 8, 9, 2, 11, 0, 1, 6, 3, 4],
        [8, 1, 10, 3, 0, 5, 2, 7, 4, 9, 6, 11],
        [9, 0, 11, 2, 1, 4, 3, 6, 5, 8, 7, 10],
        [2, 5, 0, 7, 6, 9, 4, 11, 10, 1, 8, 3],
        [3, 4, 1, 6, 7, 8, 5, 10, 11, 0, 9, 2],
        [6, 9, 4, 11, 10, 1, 8, 3, 2, 5, 0, 7],
        [7, 8, 5, 10, 11, 0, 9, 2, 3, 4, 1, 6],
        [10, 3, 8, 1, 2, 7, 0, 5, 6, 11, 4, 9],
        [11, 2, 9, 0, 3, 6, 1, 4, 7, 10, 5, 8],
        [0, 7, 2, 5, 4, 11, 6, 9, 8, 3, 10, 1],
        [1, 6, 3, 4, 5, 10, 7, 8, 9, 2, 11, 0],
    ];

    /// The text rule's version of Table 3 (extraction §2.7.7): rows for groups 0, 3, 4, 5
    /// differ at the wrapping leaves; groups 1 and 2 equal the paper's.
    const TABLE_3_TEXT_RULE: [(usize, [u32; 12]); 8] = [
        (0, [4, 11, 6, 5, 8, 3, 10, 9, 0, 7, 2, 1]),
        (1, [5, 10, 7, 4, 9, 2, 11, 8, 1, 6, 3, 0]),
        (6, [6, 9, 8, 11, 10, 1, 0, 3, 2, 5, 4, 7]),
        (7, [7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6]),
        (8, [10, 3, 4, 1, 2, 7, 8, 5, 6, 11, 0, 9]),
        (9, [11, 2, 5, 0, 3, 6, 9, 4, 7, 10, 1, 8]),
        (10, [0, 7, 2, 9, 4, 11, 6, 1, 8, 3, 10, 5]),
        (11, [1, 6, 3, 8, 5, 10, 7, 0, 9, 2, 11, 4]),
    ];

    #[test]
    fn table_3_under_both_rules() {
        let table3 = SubClusterAllToAll::new(3, 2, 2, MoveRule::PaperTable3, RankOrder::RowMajor).unwrap();
        let got: Vec<u32> = table3.destination_table();
        assert_eq!(got, TABLE_3.concat(), "paper-table3 reproduces all 144 cells");
        let text = SubClusterAllToAll::new(3, 2, 2, MoveRule::Text, RankOrder::RowMajor).unwrap();
        let mut expect = TABLE_3;
        for (t, row) in TABLE_3_TEXT_RULE {
            expect[t] = row;
        }
        assert_eq!(text.destination_table(), expect.concat());
        let differ = (0..144).filter(|&c| got[c] != expect[c / 12][c % 12]).count();
        assert_eq!(differ, 24, "4 groups × 2 phases × 3 servers");
        assert_complete(12, 12, |t, out| text.phase_destinations(t, out));
        assert_complete(12, 12, |t, out| table3.phase_destinations(t, out));
    }

    #[test]
    fn paper_spot_checks() {
        let job = SubClusterAllToAll::new(3, 2, 2, MoveRule::Text, RankOrder::RowMajor).unwrap();
        assert_eq!(job.move_leaf(1, 2, LeafMove::Sloped { slope: 1, hop: 1 }), (0, 1));
        assert_eq!(job.coords(4), (0, 1, 0)); // server 4 is ID 0 under P(0,1)
        let f = GaloisField::new(3).unwrap();
        assert_eq!(f.div(2, f.neg(1)), Some(1)); // slope(−1, 2) = 1
        assert_eq!(f.div(1, 2), Some(2)); // slope(2, 1) = 2
        assert_eq!(f.div(2, 1), Some(2)); // slope(1, 2) = 2
        let (topo, _) = lsft_routed(3, false, false);
        let hosts = job.hosts(&LsftLayout::from_topology(&topo).unwrap(), 0).unwrap();
        let labels: Vec<&str> = hosts.iter().map(|&h| topo.label(topo.hosts()[h as usize])).collect();
        assert_eq!(labels[..5], ["P(0,0)/s0", "P(0,0)/s1", "P(1,0)/s0", "P(1,0)/s1", "P(0,1)/s0"]);
    }

    #[test]
    fn sub_cluster_rejects_what_the_algebra_does_not_cover() {
        let rule = MoveRule::Text;
        let order = RankOrder::RowMajor;
        for (n, k, m, needle) in [
            (5, 2, 3, "m must not exceed k"),
            (7, 3, 5, "m must not exceed k"),
            (3, 4, 1, "k must not exceed the order"),
            (6, 2, 2, "6 is not a prime power"),
            (12, 2, 2, "12 is not a prime power"),
            (5, 0, 0, "at least 1"),
            (1, 1, 1, "at least 2"),
        ] {
            let e = SubClusterAllToAll::new(n, k, m, rule, order).unwrap_err().to_string();
            assert!(e.contains(needle), "({n},{k},{m}): {e}");
        }
        let job = SubClusterAllToAll::new(3, 2, 2, rule, order).unwrap();
        let e = job.hosts(&LsftLayout::new(5, false, false).unwrap(), 0).unwrap_err().to_string();
        assert!(e.contains("order 3") && e.contains("order 5"), "{e}");
        assert!(job.hosts(&LsftLayout::new(3, false, false).unwrap(), 1).is_err());
        assert_eq!("paper-table3".parse::<MoveRule>(), Ok(MoveRule::PaperTable3));
        assert!("table4".parse::<MoveRule>().unwrap_err().to_string().contains("known: text, paper-table3"));
    }

    #[test]
    fn shift_and_the_table3_rule_are_contended() {
        // Negative controls: the shift pattern on the LSFT, and the erratum rule for 3 ≤ k < n.
        let (topo, routes) = lsft_routed(3, false, false);
        let rep = analyze(&topo, &routes, &Schedule::shift_alltoall(52, 8).unwrap()).unwrap();
        assert!(rep.max_congestion > 1 && rep.throughput_ratio < 0.6, "{rep:?}");
        let (topo, routes) = lsft_routed(5, false, false);
        let lay = LsftLayout::from_topology(&topo).unwrap();
        let job = SubClusterAllToAll::new(5, 4, 4, MoveRule::PaperTable3, RankOrder::RowMajor).unwrap();
        let rep = analyze(&topo, &routes, &job.schedule(&lay, 0, 8).unwrap()).unwrap();
        assert!(rep.max_congestion > 1 && rep.throughput_ratio < 0.95, "{rep:?}");
        let text = SubClusterAllToAll::new(5, 4, 4, MoveRule::Text, RankOrder::RowMajor).unwrap();
        assert_eq!(analyze(&topo, &routes, &text.schedule(&lay, 0, 8).unwrap()).unwrap().max_congestion, 1);
        let shift = sub_cluster_shift(&text, &lay, 0, 8).unwrap();
        assert!(analyze(&topo, &routes, &shift).unwrap().max_congestion > 1);
    }

    #[test]
    fn reduced_and_two_sided_lsfts_host_sub_clusters() {
        for (two_sided, reduced, side) in [(false, true, 0), (true, false, 1), (true, true, 1)] {
            let (topo, routes) = lsft_routed(3, two_sided, reduced);
            let job = SubClusterAllToAll::new(3, 3, 3, MoveRule::Text, RankOrder::ColumnMajor).unwrap();
            let s = job.schedule_for(&topo, side, 8).unwrap();
            let rep = analyze(&topo, &routes, &s).unwrap();
            assert_eq!((rep.max_congestion, rep.throughput_ratio), (1, 1.0));
        }
    }

    const ORDERS: [u32; 8] = [2, 3, 4, 5, 7, 8, 9, 11];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

        /// Random valid (n, k, m), m ≤ k ≤ n ≤ 11 (prime powers), both rank orders: every
        /// phase a permutation, every pair once, and under the lsft routing max congestion 1
        /// and throughput ratio exactly 1.0 with the text rule.
        #[test]
        fn text_rule_is_complete_and_contention_free(
            n_idx in 0..ORDERS.len(), k_frac in 0.0f64..1.0, m_frac in 0.0f64..1.0, column_major: bool,
        ) {
            let n = ORDERS[n_idx];
            let k = 1 + ((k_frac * n as f64) as u32).min(n - 1);
            let m = 1 + ((m_frac * k as f64) as u32).min(k - 1);
            let order = if column_major { RankOrder::ColumnMajor } else { RankOrder::RowMajor };
            let job = SubClusterAllToAll::new(n, k, m, MoveRule::Text, order).unwrap();
            let d = job.num_ranks() as usize;
            assert_complete(d, job.num_phases(), |t, out| job.phase_destinations(t, out));
            let (topo, routes) = lsft_routed(n, false, false);
            let s = job.schedule_for(&topo, 0, 1).unwrap();
            prop_assert_eq!(s.num_messages(), d * (d - 1));
            prop_assert!(s.check_complete().is_ok(), "{:?}", s.check_complete());
            let rep = analyze(&topo, &routes, &s).unwrap();
            prop_assert_eq!(rep.max_congestion, 1, "n={} k={} m={}", n, k, m);
            prop_assert_eq!(rep.throughput_ratio, 1.0);
        }
    }
}
