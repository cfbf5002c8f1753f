//! Latin-square fat-tree (LSFT; Valerio, Moser & Melliar-Smith 1994; paper 000 §2.3).
//!
//! A two-level tree built from a projective plane of order q ([`super::plane`]): every point
//! is a **leaf** switch, every line a **spine** switch, and spine ℓ is linked to leaf p iff
//! p ∈ ℓ. Each leaf carries q+1 servers, so (q+1)(q²+q+1) servers hang off switches of degree
//! d = q+1 (radix 2d), against d² for a two-level fat-tree of the same degree. Between two
//! leaves there is exactly one leaf–spine–leaf path (axiom 2), which is what makes the
//! all-to-all schedules of paper 000 necessary.
//!
//! # Node numbering
//!
//! Fixed so that routing and schedules can compute ids instead of searching (see
//! [`LsftLayout`]):
//!
//! 1. **Leaves**, side 0 then (two-sided) side 1, each side in global point order
//!    P, P(0..q−1), P(c,r) c-major ([`super::plane`]).
//! 2. **Spines** in global line order L, L(0..q−1), L(c,r) c-major.
//! 3. **Hosts**, leaf-consecutive in the same leaf order:
//!    host index = leaf position × (q+1) + u, where u is the server's slot on its leaf.
//!    This is the numbering with which the shift baseline of paper 000 reproduces its 0.108 at
//!    q = 17 (spec §3), so it must not change.
//!
//! # Canonical port numbering (paper 000 §2.6, 1-based here)
//!
//! Every switch has radix 2(q+1).
//!
//! - Leaf p: port `u + 1` (u = 0..q) is its u-th server; port `q + 2 + j` is the j-th line
//!   through p in ascending global line order ([`ProjectivePlane::lines_through_point`]).
//! - Spine ℓ: port `x + 1` is the x-th point of ℓ in set-definition order
//!   ([`ProjectivePlane::points_of_line`]); one-sided builds use only ports 1..=q+1.
//! - Two-sided: a second copy of every leaf (with its own servers) hangs on the spines'
//!   other side, the x-th point's copy on spine port `q + 2 + x`. Leaf ports are the same on
//!   both copies.
//!
//! # Reduced build
//!
//! Paper 000's real S3 machine (q = 3) omits the non-grid leaves P, P(c) and the spine L.
//! `reduced = true` builds exactly that: q² grid leaves, q²+q spines, q²(q+1) servers. The
//! remaining links keep the port numbers of the full build, so spine L(c,r) leaves port 1
//! (its point P(c)) free and L(c) leaves port 1 (point P) free; grid leaves keep all q+1
//! up-links because L contains no grid point. Reduced and two-sided combine naturally (the
//! second side is reduced the same way) and are supported.
//!
//! # Labels and coordinates
//!
//! Leaves carry point labels ("P(1,2)"), spines line labels ("L(0,1)"), hosts
//! "P(1,2)/s0". On side 1 the leaf label gets a prime: "P(1,2)'", host "P(1,2)'/s0". Grid
//! leaves get coordinates `[c, r]` (two-sided: `[c, r, side]`); other nodes have none.
//! Family "lsft", params `order`, `degree`, `two_sided`, `reduced`.
//!
//! ```
//! use netweave_core::topology::lsft::latin_square_fat_tree;
//! let t = latin_square_fat_tree(2, false, false).unwrap();
//! assert_eq!((t.num_hosts(), t.num_switches()), (21, 14));
//! assert_eq!(t.label(t.hosts()[3]), "P(0)/s0");
//! ```

use super::plane::ProjectivePlane;
use super::{check_capacity, LinkSpec, NodeId, Port, Topology, TopologyBuilder};
use crate::error::Result;

/// Where every LSFT node and port lives, computed from the parameters alone.
///
/// Routing and schedule code use this instead of label lookups:
///
/// ```
/// use netweave_core::topology::lsft::{latin_square_fat_tree, LsftLayout};
/// let t = latin_square_fat_tree(3, false, true).unwrap();
/// let lay = LsftLayout::from_topology(&t).unwrap();
/// let leaf = lay.leaf_node(0, 4).unwrap();         // point 4 = P(0,0)
/// assert_eq!(t.label(leaf), "P(0,0)");
/// assert_eq!(lay.leaf_node(0, 0), None);           // P is omitted when reduced
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LsftLayout {
    /// Plane order q.
    pub order: u32,
    /// Whether a second copy of the leaves hangs on the spines' other side.
    pub two_sided: bool,
    /// Whether P, P(c) and L are omitted.
    pub reduced: bool,
}

impl LsftLayout {
    /// Layout for the given parameters (no plane is built; only q ≥ 2 is checked).
    pub fn new(order: u32, two_sided: bool, reduced: bool) -> Result<Self> {
        super::require_at_least("order", order as u64, 2)?;
        Ok(LsftLayout { order, two_sided, reduced })
    }

    /// Switch degree d = q+1 (servers per leaf, links per leaf or spine side).
    pub fn degree(&self) -> u32 {
        self.order + 1
    }

    /// Switch radix 2(q+1).
    pub fn radix(&self) -> u64 {
        2 * (self.order as u64 + 1)
    }

    /// Number of sides (1 or 2).
    pub fn sides(&self) -> u32 {
        1 + self.two_sided as u32
    }

    /// q² + q + 1.
    pub fn plane_size(&self) -> u64 {
        let q = self.order as u64;
        q * q + q + 1
    }

    /// First point that is a leaf (q+1 when reduced: only grid points remain).
    pub fn first_point(&self) -> u32 {
        if self.reduced {
            self.order + 1
        } else {
            0
        }
    }

    /// First line that is a spine (1 when reduced: L is omitted).
    pub fn first_line(&self) -> u32 {
        self.reduced as u32
    }

    /// Leaves on one side.
    pub fn leaves_per_side(&self) -> u64 {
        self.plane_size() - self.first_point() as u64
    }

    /// Leaves on all sides.
    pub fn num_leaves(&self) -> u64 {
        self.leaves_per_side() * self.sides() as u64
    }

    /// Spine switches.
    pub fn num_spines(&self) -> u64 {
        self.plane_size() - self.first_line() as u64
    }

    /// Servers: q+1 per leaf.
    pub fn num_hosts(&self) -> u64 {
        self.num_leaves() * self.degree() as u64
    }

    /// All nodes (leaves, spines, hosts).
    pub fn num_nodes(&self) -> u64 {
        self.num_leaves() + self.num_spines() + self.num_hosts()
    }

    /// All links: one per server plus q+1 up-links per leaf.
    pub fn num_links(&self) -> u64 {
        self.num_hosts() + self.num_leaves() * self.degree() as u64
    }

    /// Position of leaf (side, point) among all leaves, or `None` if it is not built.
    pub fn leaf_position(&self, side: u32, point: u32) -> Option<u32> {
        if side >= self.sides() || point < self.first_point() || point as u64 >= self.plane_size() {
            return None;
        }
        Some((side as u64 * self.leaves_per_side() + (point - self.first_point()) as u64) as u32)
    }

    /// Node id of leaf (side, point).
    pub fn leaf_node(&self, side: u32, point: u32) -> Option<NodeId> {
        self.leaf_position(side, point)
    }

    /// Node id of spine `line`, or `None` if it is not built.
    pub fn spine_node(&self, line: u32) -> Option<NodeId> {
        if line < self.first_line() || line as u64 >= self.plane_size() {
            return None;
        }
        Some((self.num_leaves() + (line - self.first_line()) as u64) as NodeId)
    }

    /// Host index (position in [`Topology::hosts`]) of server `u` on leaf (side, point).
    pub fn host_index(&self, side: u32, point: u32, u: u32) -> Option<u32> {
        if u > self.order {
            return None;
        }
        self.leaf_position(side, point).map(|l| l * self.degree() + u)
    }

    /// Node id of server `u` on leaf (side, point).
    pub fn host_node(&self, side: u32, point: u32, u: u32) -> Option<NodeId> {
        let base = self.num_leaves() + self.num_spines();
        self.host_index(side, point, u).map(|h| (base + h as u64) as NodeId)
    }

    /// `(side, point)` of a leaf node, or `None` for spines and hosts.
    pub fn leaf_of_node(&self, node: NodeId) -> Option<(u32, u32)> {
        let n = node as u64;
        if n >= self.num_leaves() {
            return None;
        }
        let per = self.leaves_per_side();
        Some(((n / per) as u32, (n % per) as u32 + self.first_point()))
    }

    /// Line of a spine node, or `None` for leaves and hosts.
    pub fn spine_of_node(&self, node: NodeId) -> Option<u32> {
        let n = node as u64;
        let lo = self.num_leaves();
        (lo..lo + self.num_spines()).contains(&n).then(|| (n - lo) as u32 + self.first_line())
    }

    /// `(side, point, u)` of a host index.
    pub fn host_of_index(&self, host: u32) -> Option<(u32, u32, u32)> {
        if host as u64 >= self.num_hosts() {
            return None;
        }
        let d = self.degree();
        let (side, point) = self.leaf_of_node(host / d)?;
        Some((side, point, host % d))
    }

    /// Leaf port of its u-th server: `u + 1`.
    pub fn leaf_server_port(&self, u: u32) -> Port {
        (u + 1) as Port
    }

    /// Leaf port toward the j-th line through its point: `q + 2 + j`.
    pub fn leaf_up_port(&self, j: u32) -> Port {
        (self.order + 2 + j) as Port
    }

    /// Spine port toward the x-th point of its line on `side`: `side·(q+1) + x + 1`.
    pub fn spine_port(&self, side: u32, x: u32) -> Port {
        (side * (self.order + 1) + x + 1) as Port
    }

    /// Point number of grid leaf P(x, y) (x, y < q): `1 + q + x·q + y`, after P and the q
    /// points P(c) (the [`super::plane`] numbering).
    pub fn grid_point(&self, x: u32, y: u32) -> u32 {
        1 + self.order + x * self.order + y
    }

    /// Which of paper 000's sub-cluster allocations the host set `hosts` (host indices, in any
    /// order) is exactly, if any: slots `0..m` of the grid leaves P(x, y) with `x < k` and
    /// every `y < q`, on one side, `1 ≤ m ≤ k ≤ q` — the job a sub-cluster all-to-all
    /// schedules. A host listed twice, a host off the grid leaves or a gap in the rectangle
    /// means none.
    ///
    /// ```
    /// use netweave_core::topology::lsft::{LsftLayout, SubClusterShape};
    /// let lay = LsftLayout::new(3, false, false).unwrap();
    /// // Slots 0..2 of P(0, 0..3) and P(1, 0..3): k = 2 columns, m = 2 servers each.
    /// let hosts: Vec<u32> = (0..2).flat_map(|x| (0..3).flat_map(move |y| (0..2).map(move |u| (x, y, u))))
    ///     .map(|(x, y, u)| lay.host_index(0, lay.grid_point(x, y), u).unwrap())
    ///     .collect();
    /// assert_eq!(lay.sub_cluster_of(&hosts), Some(SubClusterShape { k: 2, m: 2, side: 0 }));
    /// assert_eq!(lay.sub_cluster_of(&hosts[1..]), None);
    /// ```
    pub fn sub_cluster_of(&self, hosts: &[u32]) -> Option<SubClusterShape> {
        let q = self.order;
        let first_grid = self.grid_point(0, 0);
        let (mut k, mut m, mut side) = (0u32, 0u32, None);
        let mut cells = Vec::with_capacity(hosts.len());
        for &h in hosts {
            let (s, point, u) = self.host_of_index(h)?;
            if *side.get_or_insert(s) != s || point < first_grid {
                return None;
            }
            let (x, y) = ((point - first_grid) / q, (point - first_grid) % q);
            (k, m) = (k.max(x + 1), m.max(u + 1));
            cells.push((x, y, u));
        }
        // Distinct cells inside the k × q × m box that fill it are exactly the box.
        cells.sort_unstable();
        cells.dedup();
        let fills = cells.len() == hosts.len() && cells.len() as u64 == k as u64 * q as u64 * m as u64;
        (fills && 1 <= m && m <= k && k <= q).then(|| SubClusterShape { k, m, side: side.unwrap_or(0) })
    }
}

/// One of paper 000's sub-cluster allocations on an LSFT of order q: slots `0..m` of the grid
/// leaves in columns `0..k` (all q rows) on side `side` ([`LsftLayout::sub_cluster_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SubClusterShape {
    /// Columns of grid leaves, `m ≤ k ≤ q`.
    pub k: u32,
    /// Servers used on each leaf, `1 ≤ m`.
    pub m: u32,
    /// Which copy of the leaves (0, or 1 on a two-sided LSFT).
    pub side: u32,
}

/// Build the Latin-square fat-tree of order q (module docs give numbering, ports, labels).
///
/// Errors: q < 2, q not a prime power ("order 6 has no known projective plane: 6 is not a
/// prime power"), or q beyond [`super::plane::MAX_PLANE_ORDER`].
pub fn latin_square_fat_tree(order: u32, two_sided: bool, reduced: bool) -> Result<Topology> {
    let plane = ProjectivePlane::new(order)?;
    let lay = LsftLayout::new(order, two_sided, reduced)?;
    let total_ports = (lay.num_leaves() + lay.num_spines()) * lay.radix() + lay.num_hosts();
    check_capacity("lsft", lay.num_nodes(), lay.num_links(), total_ports, lay.radix())?;

    let q = order;
    let np = plane.num_points();
    let radix = lay.radix() as Port;
    let mut name = format!("lsft(q={q}");
    for (on, tag) in [(two_sided, ", two-sided"), (reduced, ", reduced")] {
        if on {
            name.push_str(tag);
        }
    }
    name.push(')');
    let mut b = TopologyBuilder::new(name);
    b.family("lsft").param("order", q).param("degree", q + 1).param("two_sided", two_sided).param("reduced", reduced);

    let leaf_label = |side: u32, p: u32| {
        let mut s = plane.point_label(p);
        if side == 1 {
            s.push('\'');
        }
        s
    };
    for side in 0..lay.sides() {
        for p in lay.first_point()..np {
            let node = b.add_switch(leaf_label(side, p), radix);
            debug_assert_eq!(Some(node), lay.leaf_node(side, p));
            if let super::plane::PointKind::Grid(c, r) = plane.point_kind(p) {
                let mut xy = vec![c as i64, r as i64];
                if two_sided {
                    xy.push(side as i64);
                }
                b.set_coords(node, xy);
            }
        }
    }
    for l in lay.first_line()..np {
        let node = b.add_switch(plane.line_label(l), radix);
        debug_assert_eq!(Some(node), lay.spine_node(l));
    }
    let spec = LinkSpec::default();
    for side in 0..lay.sides() {
        for p in lay.first_point()..np {
            let leaf = lay.leaf_node(side, p).expect("leaf is built");
            let label = leaf_label(side, p);
            for u in 0..=q {
                let h = b.add_host(format!("{label}/s{u}"));
                debug_assert_eq!(Some(h), lay.host_node(side, p, u));
                b.connect_ports(leaf, lay.leaf_server_port(u), h, 1, spec);
            }
        }
    }
    // Spine links leaf-major in up-port order, so a leaf's links are contiguous.
    for side in 0..lay.sides() {
        for p in lay.first_point()..np {
            let leaf = lay.leaf_node(side, p).expect("leaf is built");
            for (j, &l) in plane.lines_through_point(p).iter().enumerate() {
                let Some(spine) = lay.spine_node(l) else { continue };
                let x = plane.point_position(l, p).expect("p lies on l");
                b.connect_ports(leaf, lay.leaf_up_port(j as u32), spine, lay.spine_port(side, x), spec);
            }
        }
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::NodeKind;

    #[test]
    fn sub_cluster_recognition_by_hand_on_order_3() {
        // Order 3: 13 leaves of 4 servers; points 0 (P), 1..=3 (P(c)), 4..=12 the grid P(x, y)
        // at 4 + 3x + y. Not reduced, so leaf position = point and host = 4·point + slot.
        let lay = LsftLayout::new(3, true, false).unwrap();
        let per_side = 13 * 4;
        // k = 1, m = 1: slot 0 of P(0, 0), P(0, 1), P(0, 2) = points 4, 5, 6.
        assert_eq!(lay.sub_cluster_of(&[16, 20, 24]), Some(SubClusterShape { k: 1, m: 1, side: 0 }));
        // Rank order does not matter; the second side's copy is side 1.
        let other: Vec<u32> = [24, 16, 20].iter().map(|h| h + per_side).collect();
        assert_eq!(lay.sub_cluster_of(&other), Some(SubClusterShape { k: 1, m: 1, side: 1 }));
        // k = 3, m = 3: slots 0..3 of all nine grid leaves (points 4..=12).
        let all: Vec<u32> = (4..=12).flat_map(|p| (0..3).map(move |u| 4 * p + u)).collect();
        assert_eq!(lay.sub_cluster_of(&all), Some(SubClusterShape { k: 3, m: 3, side: 0 }));
        // m > k (slots 0..2 of column 0 only), a duplicate, a gap, a P(c) leaf, mixed sides.
        assert_eq!(lay.sub_cluster_of(&[16, 17, 20, 21, 24, 25]), None);
        assert_eq!(lay.sub_cluster_of(&[16, 20, 24, 24]), None);
        assert_eq!(lay.sub_cluster_of(&[16, 20, 28]), None);
        assert_eq!(lay.sub_cluster_of(&[4, 20, 24]), None);
        assert_eq!(lay.sub_cluster_of(&[16, 20, 24 + per_side]), None);
        assert_eq!(lay.sub_cluster_of(&[]), None);
        assert_eq!(lay.sub_cluster_of(&[9999]), None);
    }

    const ORDERS: [u32; 11] = [2, 3, 4, 5, 7, 8, 9, 11, 13, 16, 17];

    fn servers(q: u32) -> usize {
        ((q + 1) * (q * q + q + 1)) as usize
    }

    #[test]
    fn server_counts_match_the_paper() {
        for q in ORDERS {
            let t = latin_square_fat_tree(q, false, false).unwrap();
            assert_eq!(t.num_hosts(), servers(q), "q={q}");
            assert_eq!(t.num_switches(), 2 * (q * q + q + 1) as usize);
            let t2 = latin_square_fat_tree(q, true, false).unwrap();
            assert_eq!(t2.num_hosts(), 2 * servers(q));
            assert_eq!(t2.num_switches(), 3 * (q * q + q + 1) as usize);
        }
        assert_eq!(servers(17), 5526);
        assert_eq!(latin_square_fat_tree(17, true, false).unwrap().num_hosts(), 11052);
    }

    #[test]
    fn every_switch_has_degree_q_plus_one_towards_the_other_layer() {
        for q in ORDERS {
            for two in [false, true] {
                let t = latin_square_fat_tree(q, two, false).unwrap();
                let lay = LsftLayout::from_topology(&t).unwrap();
                for &s in t.switches() {
                    let sw = t.neighbors(s).iter().filter(|a| !t.is_host(a.neighbor)).count();
                    let hosts = t.neighbors(s).iter().filter(|a| t.is_host(a.neighbor)).count();
                    if lay.leaf_of_node(s).is_some() {
                        assert_eq!((sw, hosts), (q as usize + 1, q as usize + 1));
                    } else {
                        assert_eq!((sw, hosts), ((q as usize + 1) * lay.sides() as usize, 0));
                    }
                    assert!(t.degree(s) <= t.radix(s) as usize);
                }
            }
        }
    }

    #[test]
    fn exactly_one_path_between_distinct_leaves() {
        for q in [2, 3, 4, 5, 7] {
            let t = latin_square_fat_tree(q, false, false).unwrap();
            let lay = LsftLayout::from_topology(&t).unwrap();
            let n = lay.num_leaves() as usize;
            let spines: Vec<Vec<NodeId>> = (0..n as NodeId)
                .map(|l| t.neighbors(l).iter().map(|a| a.neighbor).filter(|&x| !t.is_host(x)).collect())
                .collect();
            for a in 0..n {
                for b in a + 1..n {
                    let shared = spines[a].iter().filter(|s| spines[b].contains(s)).count();
                    assert_eq!(shared, 1, "q={q}: leaves {a} and {b}");
                }
            }
        }
    }

    #[test]
    fn canonical_ports_and_host_order() {
        for q in [2, 3, 4] {
            let plane = ProjectivePlane::new(q).unwrap();
            for two in [false, true] {
                let t = latin_square_fat_tree(q, two, false).unwrap();
                let lay = LsftLayout::from_topology(&t).unwrap();
                for side in 0..lay.sides() {
                    for p in 0..plane.num_points() {
                        let leaf = lay.leaf_node(side, p).unwrap();
                        for u in 0..=q {
                            let h = lay.host_node(side, p, u).unwrap();
                            let hi = lay.host_index(side, p, u).unwrap();
                            assert_eq!(t.hosts()[hi as usize], h);
                            assert_eq!(t.host_switch(h), Some(leaf));
                            assert_eq!(lay.host_of_index(hi), Some((side, p, u)));
                            let c = t.out_channel(leaf, u as Port + 1).unwrap();
                            assert_eq!(t.channel_ends(c).1.node, h);
                        }
                        for (j, &l) in plane.lines_through_point(p).iter().enumerate() {
                            let c = t.out_channel(leaf, (q + 2 + j as u32) as Port).unwrap();
                            let (_, to) = t.channel_ends(c);
                            assert_eq!(to.node, lay.spine_node(l).unwrap());
                            let x = plane.points_of_line(l).iter().position(|&y| y == p).unwrap() as u32;
                            assert_eq!(to.port as u32, side * (q + 1) + x + 1);
                        }
                    }
                }
                for l in 0..plane.num_lines() {
                    let s = lay.spine_node(l).unwrap();
                    assert_eq!(t.label(s), plane.line_label(l));
                    assert_eq!(lay.spine_of_node(s), Some(l));
                    for (x, &p) in plane.points_of_line(l).iter().enumerate() {
                        for side in 0..lay.sides() {
                            let c = t.out_channel(s, lay.spine_port(side, x as u32)).unwrap();
                            assert_eq!(t.channel_ends(c).1.node, lay.leaf_node(side, p).unwrap());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn labels_coords_and_params() {
        let t = latin_square_fat_tree(3, true, false).unwrap();
        assert_eq!(t.name(), "lsft(q=3, two-sided)");
        assert_eq!(t.family(), "lsft");
        assert_eq!(t.params()["order"], 3);
        assert_eq!(t.params()["two_sided"], true);
        assert_eq!(t.label(0), "P");
        let n = t.find_label("P(1,2)").unwrap();
        assert_eq!(t.coords(n), Some(&[1i64, 2, 0][..]));
        let n2 = t.find_label("P(1,2)'").unwrap();
        assert_eq!(t.coords(n2), Some(&[1i64, 2, 1][..]));
        assert!(t.find_label("P(1,2)'/s3").is_some());
        assert!(t.find_label("L(0,1)").is_some());
        let t1 = latin_square_fat_tree(3, false, false).unwrap();
        assert_eq!(t1.coords(t1.find_label("P(2,0)").unwrap()), Some(&[2i64, 0][..]));
        assert_eq!(t1.coords(t1.find_label("P(2)").unwrap()), None);
        assert_eq!(t1.kind(t1.find_label("P(2)/s1").unwrap()), NodeKind::Host);
    }

    #[test]
    fn reduced_build_matches_the_real_s3_machine() {
        let t = latin_square_fat_tree(3, false, true).unwrap();
        let lay = LsftLayout::from_topology(&t).unwrap();
        assert_eq!((lay.num_leaves(), lay.num_spines(), t.num_hosts()), (9, 12, 36));
        assert_eq!(t.num_switches(), 21);
        assert_eq!(t.name(), "lsft(q=3, reduced)");
        assert!(t.find_label("P").is_none() && t.find_label("P(0)").is_none() && t.find_label("L").is_none());
        assert_eq!(t.label(t.hosts()[0]), "P(0,0)/s0");
        let plane = ProjectivePlane::new(3).unwrap();
        for &s in t.switches() {
            if let Some(l) = lay.spine_of_node(s) {
                // Port 1 (P or P(c)) is free; the grid points keep ports 2..=q+1.
                assert_eq!(t.out_channel(s, 1), None);
                let ports: Vec<Port> = t.neighbors(s).iter().map(|a| a.port).collect();
                assert_eq!(ports, vec![2, 3, 4]);
                for a in t.neighbors(s) {
                    let (_, p) = lay.leaf_of_node(a.neighbor).unwrap();
                    assert_eq!(plane.points_of_line(l)[a.port as usize - 1], p);
                }
            } else {
                assert_eq!(t.degree(s), 8, "grid leaves keep all up-links");
            }
        }
        let t2 = latin_square_fat_tree(3, true, true).unwrap();
        assert_eq!((t2.num_hosts(), t2.num_switches()), (72, 30));
    }

    #[test]
    fn bad_orders_are_rejected() {
        let e = latin_square_fat_tree(6, false, false).unwrap_err().to_string();
        assert_eq!(e, "order 6 has no known projective plane: 6 is not a prime power");
        assert!(latin_square_fat_tree(1, false, false).is_err());
        assert!(latin_square_fat_tree(0, true, true).is_err());
        assert!(latin_square_fat_tree(100_003, false, false).is_err());
    }

    #[test]
    fn layout_from_other_topologies_is_refused() {
        let mut b = TopologyBuilder::new("x");
        b.add_switch("s", 2);
        let t = b.build().unwrap();
        assert!(LsftLayout::from_topology(&t).is_err());
    }
}
