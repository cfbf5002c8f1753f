//! Closed-form routings for trees: D-mod-k on fat-trees and the unique route of the
//! Latin-square fat-tree. Both compute every table entry from the generator's numbering (no
//! search), go up then down only, and so are deadlock-free on one VC.
//!
//! # D-mod-k (Zahavi) on PGFT / XGFT / k-ary n-trees / paper 000's fat-trees
//!
//! With the numbering of [`fat_tree`](crate::topology::fat_tree) (level-l switch local index
//! `x = A·W_l + B`, A its "a" digits, B its "b" digits, `W_l = w_1·…·w_l`; host index D = its
//! digits read in mixed radix), a switch at level l routes destination host D:
//!
//! - **down** if it is an ancestor of D (its a-digits equal D's digits above level l, i.e.
//!   `⌊D / (m_1·…·m_l)⌋ = A`): to child `a_l = ⌊D / (m_1·…·m_{l−1})⌋ mod m_l`, on parallel
//!   link `⌊D / W_l⌋ mod p_l`;
//! - **up** otherwise: up-link index `j = ⌊D / W_l⌋ mod (w_{l+1}·p_{l+1})`, i.e. parent
//!   `b_{l+1} = j mod w_{l+1}` and parallel link `⌊j / w_{l+1}⌋`.
//!
//! That is Zahavi's digit-wise D-mod-k for PGFTs: on a one-sided 2-level fat-tree of degree d
//! the spine is simply `D mod d` (paper 000 spec §2.5), and on a k-ary n-tree level l uses
//! digit l of D in base k. Every source's up path towards D meets the same switch at each
//! level (the choice depends on D alone), and the down link taken into a node is the reverse
//! of the up link D-mod-k would take out of it, so the down paths towards D form one tree.
//! This is what makes the shift all-to-all (`(S + i) mod N`) contention-free on full-bisection
//! trees when ranks sit on hosts in index order. The rule fixes the choice, so
//! [`RouteOptions::select`] is not used.
//!
//! Hosts always inject on their first port (the table cannot choose a host's port), so on
//! trees with multi-homed hosts (w_1·p_1 > 1) routes stay correct and minimal but the
//! convergence argument above no longer holds.
//!
//! # LSFT
//!
//! Leaf p to leaf p' ≠ p goes up to the spine of the unique line through p and p'
//! ([`ProjectivePlane::line_through`]) and down to p'; same-leaf traffic turns at the leaf.
//! Two-sided builds add the one case with a choice: a leaf to its copy on the other side
//! (same point) may use any of its q+1 spines, picked by [`RouteOptions::select`]. Spines that
//! are not on a destination's line (never on a host-to-host route) still get a minimal entry
//! — down to a leaf of their line, which then goes up the line through it and the destination —
//! so the table is complete like an InfiniBand LFT, again chosen by the selection policy.
//!
//! ```
//! use netweave_core::topology::fat_tree::fat_tree;
//! use netweave_core::routing::{route, Engine, RouteOptions};
//! use netweave_core::{analysis::analyze, traffic::Schedule};
//! let t = fat_tree(4, 2, false).unwrap();
//! let r = route(&t, Engine::DModK, &RouteOptions::default()).unwrap();
//! let shift = Schedule::shift_alltoall(16, 1 << 20).unwrap();
//! assert_eq!(analyze(&t, &r, &shift).unwrap().max_congestion, 1);
//! ```

use crate::error::Result;
use crate::topology::fat_tree::PgftSpec;
use crate::topology::lsft::LsftLayout;
use crate::topology::plane::ProjectivePlane;
use crate::topology::structure::Structure;
use crate::topology::{Port, Topology};

use super::select::Selector;
use super::{RouteOptions, RoutingTable};

/// Per-level constants of a PGFT, all indexed by level 0..=h (index 0 unused where noted).
struct Levels {
    spec: PgftSpec,
    h: usize,
    /// Nodes on level l (hosts at l = 0).
    nodes: Vec<u64>,
    /// First switch index of level l (l ≥ 1).
    first: Vec<u64>,
    /// `W_l = w_1·…·w_l` (W_0 = 1): number of distinct b-digit tuples of a level-l node.
    w_prod: Vec<u64>,
    /// `M_l = m_1·…·m_l` (M_0 = 1): hosts below one level-l a-prefix.
    m_prod: Vec<u64>,
}

impl Levels {
    fn m(&self, l: usize) -> u64 {
        self.spec.m[l - 1] as u64
    }
    fn w(&self, l: usize) -> u64 {
        self.spec.w[l - 1] as u64
    }
    fn p(&self, l: usize) -> u64 {
        self.spec.p[l - 1] as u64
    }
    /// Down ports of a level-l node (`p_l·m_l`, 0 for hosts).
    fn down(&self, l: usize) -> u64 {
        if l == 0 {
            0
        } else {
            self.p(l) * self.m(l)
        }
    }
    /// Up ports of a level-l node (`w_{l+1}·p_{l+1}`, 0 at the top).
    fn up(&self, l: usize) -> u64 {
        if l == self.h {
            0
        } else {
            self.w(l + 1) * self.p(l + 1)
        }
    }

    /// Read the PGFT spec from a fat-tree topology's params and check the node counts.
    fn from_topology(topo: &Topology) -> Result<Self> {
        let family = topo.family();
        let tree = match topo.structure() {
            Structure::FatTree(tree) => tree,
            Structure::Malformed { expected, reason } if expected == "fat_tree" => {
                return crate::invalid!("dmodk: {family} topology '{}' {reason}", topo.name())
            }
            other => {
                let hint = if matches!(other, Structure::Lsft(_)) { " (route it with the lsft engine)" } else { "" };
                return crate::invalid!(
                    "dmodk needs a fat-tree (pgft, k_ary_n_tree or fat_tree); this is {family}{hint}"
                );
            }
        };
        let spec = tree.spec()?;
        let h = spec.h as usize;
        let nodes: Vec<u64> = (0..=h as u32).map(|l| spec.nodes_at_level(l)).collect();
        let mut first = vec![0u64; h + 2];
        for l in 1..=h {
            first[l + 1] = first[l].saturating_add(nodes[l]);
        }
        if first[h + 1] != topo.num_switches() as u64 || nodes[0] != topo.num_hosts() as u64 {
            return crate::invalid!(
                "dmodk: '{}' has {} switches and {} hosts, but PGFT({spec}) has {} and {}",
                topo.name(),
                topo.num_switches(),
                topo.num_hosts(),
                first[h + 1],
                nodes[0]
            );
        }
        // Both products are bounded by the node counts just checked, so they cannot overflow.
        let mut w_prod = vec![1u64; h + 1];
        let mut m_prod = vec![1u64; h + 1];
        for l in 1..=h {
            w_prod[l] = w_prod[l - 1] * spec.w[l - 1] as u64;
            m_prod[l] = m_prod[l - 1] * spec.m[l - 1] as u64;
        }
        Ok(Levels { spec, h, nodes, first, w_prod, m_prod })
    }

    /// Check every port of every switch against the PGFT wiring: down port `a·p_l + k + 1`
    /// reaches child a on its up port for this parent, up port `down + b·p_{l+1} + k + 1`
    /// reaches parent b; every tree port is connected and no other port is.
    fn verify_links(&self, topo: &Topology) -> Result<()> {
        for l in 1..=self.h {
            let (down, up) = (self.down(l), self.up(l));
            for x in 0..self.nodes[l] {
                let node = topo.switches()[(self.first[l] + x) as usize];
                let (a_part, b_part) = (x / self.w_prod[l], x % self.w_prod[l]);
                let fail = |why: &str| -> Result<()> {
                    crate::invalid!(
                        "dmodk: '{}' does not have the PGFT({}) wiring its parameters describe: switch {} {why}",
                        topo.name(),
                        self.spec,
                        topo.label(node)
                    )
                };
                for adj in topo.neighbors(node) {
                    let port = adj.port as u64;
                    // (expected neighbour is a host?, its host/switch index, its port)
                    let expected = if port >= 1 && port <= down {
                        let (a, k) = ((port - 1) / self.p(l), (port - 1) % self.p(l));
                        let lower = self.w_prod[l - 1];
                        let child = (a_part * self.m(l) + a) * lower + b_part % lower;
                        let b_l = b_part / lower;
                        let child_port = self.down(l - 1) + b_l * self.p(l) + k + 1;
                        if l == 1 {
                            (true, child, child_port)
                        } else {
                            (false, self.first[l - 1] + child, child_port)
                        }
                    } else if port > down && port <= down + up {
                        let idx = port - 1 - down;
                        let (b, k) = (idx / self.p(l + 1), idx % self.p(l + 1));
                        let m_next = self.m(l + 1);
                        let parent = (a_part / m_next) * self.w_prod[l + 1] + b * self.w_prod[l] + b_part;
                        let parent_port = (a_part % m_next) * self.p(l + 1) + k + 1;
                        (false, self.first[l + 1] + parent, parent_port)
                    } else {
                        return fail(&format!("port {} is connected but is no tree port", adj.port));
                    };
                    let (is_host, index, far_port) = expected;
                    let ok = topo.is_host(adj.neighbor) == is_host
                        && topo.kind_index(adj.neighbor) as u64 == index
                        && adj.neighbor_port as u64 == far_port;
                    if !ok {
                        return fail(&format!(
                            "port {} reaches {}:{}",
                            adj.port,
                            topo.label(adj.neighbor),
                            adj.neighbor_port
                        ));
                    }
                }
                if topo.degree(node) as u64 != down + up {
                    return fail(&format!("has {} links, the tree needs {}", topo.degree(node), down + up));
                }
            }
        }
        Ok(())
    }
}

/// D-mod-k routing on a fat-tree (families "pgft", "k_ary_n_tree", "fat_tree"): up-links
/// chosen digit-wise from the destination host index, down-links deterministic (module docs).
/// One VC, deadlock-free (no down→up turn). Errors in one line for other families and for a
/// topology whose wiring does not match its recorded PGFT parameters.
pub fn d_mod_k(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    // The rule leaves no choice, so `options.select` does not apply; 1 VC always fits.
    let _ = options;
    let lv = Levels::from_topology(topo)?;
    lv.verify_links(topo)?;
    let hosts = topo.num_hosts() as u64;
    let mut table = RoutingTable::new(topo, "dmodk");
    for l in 1..=lv.h {
        let (down, up) = (lv.down(l), lv.up(l));
        let (w_l, m_l, m_below) = (lv.w_prod[l], lv.m_prod[l], lv.m_prod[l - 1]);
        for x in 0..lv.nodes[l] {
            let s = (lv.first[l] + x) as usize;
            let a_part = x / w_l;
            for dest in 0..hosts {
                let port = if dest / m_l == a_part {
                    let a = (dest / m_below) % lv.m(l);
                    let k = (dest / w_l) % lv.p(l);
                    a * lv.p(l) + k + 1
                } else {
                    // Not an ancestor, so l < h (the top level is every host's ancestor).
                    let j = (dest / w_l) % up;
                    let w_next = lv.w(l + 1);
                    down + (j % w_next) * lv.p(l + 1) + j / w_next + 1
                };
                table.set_out_port(s, dest as usize, port as Port);
            }
        }
    }
    Ok(table)
}

/// The unique leaf–spine–leaf route of the Latin-square fat-tree (family "lsft"; one- or
/// two-sided, full or reduced), by the closed form of the plane; same-leaf traffic turns at
/// the leaf. One VC, deadlock-free. `options.select` picks only where the LSFT offers a
/// choice (module docs). Errors in one line for other families.
pub fn lsft(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    // A malformed one gets LsftLayout's message naming the bad parameter.
    if !matches!(topo.structure(), Structure::Lsft(_))
        && !matches!(topo.structure(), Structure::Malformed { expected, .. } if expected == "lsft")
    {
        return crate::invalid!("lsft routing needs a Latin-square fat-tree (family lsft); this is {}", topo.family());
    }
    let lay = LsftLayout::from_topology(topo)?;
    let plane = ProjectivePlane::new(lay.order)?;
    verify_lsft(topo, &lay, &plane)?;
    let d = lay.degree();
    let leaves = lay.num_leaves() as u32;
    let mut table = RoutingTable::new(topo, "lsft");
    let mut selector = Selector::new(topo, options.select);
    let mut candidates: Vec<Port> = Vec::with_capacity(d as usize);
    for (s, &node) in topo.switches().iter().enumerate() {
        if let Some((side, p)) = lay.leaf_of_node(node) {
            for dl in 0..leaves {
                // Leaves are the first nodes, so leaf position dl is also its node id.
                let Some((dside, dp)) = lay.leaf_of_node(dl) else { continue };
                // Host index = leaf position · (q+1) + slot (LsftLayout::host_index).
                let first_host = (dl * d) as usize;
                if (dside, dp) == (side, p) {
                    for u in 0..d {
                        let port = lay.leaf_server_port(u);
                        selector.record(s, port);
                        table.set_out_port(s, first_host + u as usize, port);
                    }
                } else if dp == p {
                    // The same point on the other side: every spine of p leads there.
                    candidates.clear();
                    candidates.extend(
                        plane
                            .lines_through_point(p)
                            .iter()
                            .enumerate()
                            .filter(|&(_, &l)| lay.spine_node(l).is_some())
                            .map(|(j, _)| lay.leaf_up_port(j as u32)),
                    );
                    for u in 0..d as usize {
                        table.set_out_port(s, first_host + u, selector.choose(s, u, &candidates));
                    }
                } else {
                    let line = plane.line_through(p, dp)?;
                    let j = plane.line_position(p, line).unwrap_or(0);
                    let port = lay.leaf_up_port(j);
                    for h in first_host..first_host + d as usize {
                        selector.record(s, port);
                        table.set_out_port(s, h, port);
                    }
                }
            }
        } else if let Some(line) = lay.spine_of_node(node) {
            for dl in 0..leaves {
                // Leaves are the first nodes, so leaf position dl is also its node id.
                let Some((dside, dp)) = lay.leaf_of_node(dl) else { continue };
                // Host index = leaf position · (q+1) + slot (LsftLayout::host_index).
                let first_host = (dl * d) as usize;
                if let Some(x) = plane.point_position(line, dp) {
                    let port = lay.spine_port(dside, x);
                    for h in first_host..first_host + d as usize {
                        selector.record(s, port);
                        table.set_out_port(s, h, port);
                    }
                } else {
                    // Off every route from a host: any leaf of this line on the destination's
                    // side is one hop closer (its line to the destination is another spine).
                    candidates.clear();
                    candidates.extend(
                        plane
                            .points_of_line(line)
                            .iter()
                            .enumerate()
                            .filter(|&(_, &pt)| lay.leaf_node(dside, pt).is_some())
                            .map(|(x, _)| lay.spine_port(dside, x as u32)),
                    );
                    for u in 0..d as usize {
                        table.set_out_port(s, first_host + u, selector.choose(s, u, &candidates));
                    }
                }
            }
        }
    }
    Ok(table)
}

/// Check every leaf's server and spine ports against the canonical LSFT numbering, so an
/// edited file is refused instead of routed wrongly.
fn verify_lsft(topo: &Topology, lay: &LsftLayout, plane: &ProjectivePlane) -> Result<()> {
    let reach = |node: u32, port: Port| topo.out_channel(node, port).map(|c| topo.channel_ends(c).1);
    for side in 0..lay.sides() {
        for p in lay.first_point()..plane.num_points() {
            let Some(leaf) = lay.leaf_node(side, p) else { continue };
            let fail = |port: Port, what: String| -> Result<()> {
                crate::invalid!(
                    "lsft routing: '{}' does not have the canonical LSFT ports: leaf {} port {port} should reach {what}",
                    topo.name(),
                    topo.label(leaf)
                )
            };
            for u in 0..=lay.order {
                let port = lay.leaf_server_port(u);
                let want = lay.host_node(side, p, u);
                if reach(leaf, port).map(|e| e.node) != want {
                    return fail(port, format!("its server {u}"));
                }
            }
            for (j, &l) in plane.lines_through_point(p).iter().enumerate() {
                let Some(spine) = lay.spine_node(l) else { continue };
                let port = lay.leaf_up_port(j as u32);
                let x = plane.point_position(l, p).unwrap_or(0);
                let far = reach(leaf, port);
                if far.map(|e| (e.node, e.port)) != Some((spine, lay.spine_port(side, x))) {
                    return fail(port, format!("spine {}", topo.label(spine)));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::routing::{deadlock, route, Engine, Select};
    use crate::topology::fabric::SwitchFabric;
    use crate::topology::fat_tree::{fat_tree, k_ary_n_tree, pgft};
    use crate::topology::grid::torus;
    use crate::topology::lsft::latin_square_fat_tree;
    use crate::topology::random::irregular;
    use crate::topology::{ChannelId, LinkSpec, TopologyBuilder};
    use crate::traffic::Schedule;

    /// Every pair is delivered over a minimal path (switch hops = BFS distance + 2 host links).
    fn assert_minimal(t: &Topology, r: &RoutingTable) {
        let g = SwitchFabric::new(t);
        let mut dist = vec![u32::MAX; t.num_switches()];
        let mut queue = Vec::new();
        let mut path = Vec::new();
        for dst in 0..t.num_hosts() {
            let ds = t.kind_index(t.host_switch(t.hosts()[dst]).unwrap());
            g.bfs(ds, &mut dist, &mut queue);
            for src in 0..t.num_hosts() {
                if src == dst {
                    continue;
                }
                path.clear();
                r.path(t, src, dst, &mut path).unwrap();
                let ss = t.kind_index(t.host_switch(t.hosts()[src]).unwrap());
                assert_eq!(path.len() as u32, dist[ss] + 2, "{}: {src}->{dst}", t.name());
            }
        }
    }

    fn shift(t: &Topology, r: &RoutingTable) -> crate::analysis::LoadReport {
        let s = Schedule::shift_alltoall(t.num_hosts() as u32, 1 << 20).unwrap();
        analyze(t, r, &s).unwrap()
    }

    #[test]
    fn dmodk_makes_shift_contention_free_on_paper_000_fat_trees() {
        for d in 2..=6 {
            for levels in [2, 3] {
                for two_sided in [false, true] {
                    let t = fat_tree(d, levels, two_sided).unwrap();
                    let r = d_mod_k(&t, &RouteOptions::default()).unwrap();
                    let rep = shift(&t, &r);
                    assert_eq!(rep.max_congestion, 1, "{}", t.name());
                    assert_eq!(rep.throughput_ratio, 1.0);
                    assert_minimal(&t, &r);
                    let dl = deadlock::check(&t, &r).unwrap();
                    assert!(dl.deadlock_free && dl.vcs_used == 1, "{}", t.name());
                }
            }
        }
    }

    #[test]
    fn dmodk_shift_stays_contention_free_on_whole_leaf_subclusters() {
        // Paper 000 §2.1.3 / spec §3: S2' = 2 leaves × 5, S3' = 4 leaves × 7, and any set of
        // whole leaves, ranks numbered leaf by leaf.
        for (d, leaves) in [(5u32, &[0u32, 1][..]), (7, &[0, 1, 2, 3][..]), (5, &[0, 2, 3][..]), (4, &[3, 1][..])] {
            let t = fat_tree(d, 2, false).unwrap();
            let r = d_mod_k(&t, &RouteOptions::default()).unwrap();
            let placement: Vec<u32> = leaves.iter().flat_map(|&l| l * d..(l + 1) * d).collect();
            let s = Schedule::shift_alltoall(placement.len() as u32, 1).unwrap().with_placement(placement).unwrap();
            assert_eq!(analyze(&t, &r, &s).unwrap().max_congestion, 1, "d={d} leaves {leaves:?}");
        }
    }

    #[test]
    fn dmodk_spine_is_destination_mod_d_on_the_two_level_tree() {
        let d = 3;
        let t = fat_tree(d, 2, false).unwrap();
        let r = d_mod_k(&t, &RouteOptions::default()).unwrap();
        for leaf in 0..d as usize {
            for dest in 0..(d * d) as usize {
                let port = r.out_port(leaf, dest);
                if dest / d as usize == leaf {
                    assert_eq!(port as usize, dest % d as usize + 1);
                } else {
                    // Up ports d+1..=2d lead to spines 0..d-1.
                    assert_eq!(port as usize, d as usize + dest % d as usize + 1);
                }
            }
        }
    }

    #[test]
    fn dmodk_on_k_ary_n_trees_and_pgfts() {
        for (k, n) in [(2, 1), (2, 3), (3, 3), (4, 2), (2, 4)] {
            let t = k_ary_n_tree(k, n).unwrap();
            let r = route(&t, Engine::DModK, &RouteOptions::default()).unwrap();
            assert_eq!(shift(&t, &r).max_congestion, 1, "{}", t.name());
            assert_minimal(&t, &r);
            assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
        }
        // Full-bisection PGFTs with parallel links: still contention-free for shift.
        for spec in ["2; 4,2; 1,2; 1,2", "3; 4,2,4; 1,2,2; 1,2,2", "2; 6,3; 1,3; 1,2"] {
            let t = pgft(&spec.parse().unwrap()).unwrap();
            let r = d_mod_k(&t, &RouteOptions::default()).unwrap();
            assert_eq!(shift(&t, &r).max_congestion, 1, "PGFT({spec})");
            assert_minimal(&t, &r);
            assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
        }
        // Slimmed and multi-homed trees: correct, minimal and deadlock-free.
        for spec in ["3; 2,3,2; 1,2,3; 1,1,1", "2; 4,4; 1,2; 1,1", "2; 3,2; 2,2; 1,1", "1; 5; 1; 1"] {
            let t = pgft(&spec.parse().unwrap()).unwrap();
            let r = d_mod_k(&t, &RouteOptions::default()).unwrap();
            assert_minimal(&t, &r);
            assert!(deadlock::check(&t, &r).unwrap().deadlock_free, "PGFT({spec})");
        }
    }

    #[test]
    fn dmodk_down_paths_mirror_up_paths() {
        // Every down channel towards D enters its node on the port that node's D-mod-k up
        // choice for D would leave by: the down tree of D is its up choices reversed.
        for spec in ["3; 4,2,4; 1,2,2; 1,2,2", "3; 3,3,3; 1,3,3; 1,1,1", "2; 2,4; 1,2; 1,2"] {
            let t = pgft(&spec.parse().unwrap()).unwrap();
            let lv = Levels::from_topology(&t).unwrap();
            let r = d_mod_k(&t, &RouteOptions::default()).unwrap();
            let level = |node: u32| -> usize {
                if t.is_host(node) {
                    return 0;
                }
                let s = t.kind_index(node) as u64;
                (1..=lv.h).find(|&l| s < lv.first[l + 1]).unwrap()
            };
            let mut path: Vec<ChannelId> = Vec::new();
            let mut checked = 0;
            for dst in 0..t.num_hosts() {
                for src in 0..t.num_hosts() {
                    path.clear();
                    r.path(&t, src, dst, &mut path).unwrap();
                    for &c in &path {
                        let (from, to) = t.channel_ends(c);
                        let l = level(to.node);
                        if level(from.node) != l + 1 {
                            continue; // an up channel
                        }
                        let j = (dst as u64 / lv.w_prod[l]) % lv.up(l);
                        let w_next = lv.w(l + 1);
                        let up_port = lv.down(l) + (j % w_next) * lv.p(l + 1) + j / w_next + 1;
                        assert_eq!(to.port as u64, up_port, "PGFT({spec}) {src}->{dst}");
                        checked += 1;
                    }
                }
            }
            assert!(checked > 0);
        }
    }

    #[test]
    fn dmodk_refuses_other_topologies() {
        let e = d_mod_k(&torus(&[4, 4], 1).unwrap(), &RouteOptions::default()).unwrap_err().to_string();
        assert_eq!(e, "dmodk needs a fat-tree (pgft, k_ary_n_tree or fat_tree); this is torus");
        let e = d_mod_k(&latin_square_fat_tree(2, false, false).unwrap(), &RouteOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("this is lsft (route it with the lsft engine)"), "{e}");
        let e = d_mod_k(&irregular(16, 4, 6, 4, 1).unwrap(), &RouteOptions::default()).unwrap_err().to_string();
        assert!(e.starts_with("dmodk needs a fat-tree"), "{e}");
        // Claims to be a PGFT but the wiring differs (no links at all).
        let mut b = TopologyBuilder::new("fake");
        b.family("pgft").param("m", vec![2u32, 2]).param("w", vec![1u32, 2]).param("p", vec![1u32, 1]);
        for i in 0..4 {
            b.add_switch(format!("s{i}"), 4);
        }
        for i in 0..4 {
            b.add_host(format!("h{i}"));
        }
        let e = d_mod_k(&b.clone().build().unwrap(), &RouteOptions::default()).unwrap_err().to_string();
        assert!(e.contains("switch s0 has 0 links, the tree needs 4"), "{e}");
        // A wrong link.
        let mut b2 = b.clone();
        let (h0, s0) = (4, 0);
        b2.connect_ports(h0, 1, s0, 2, LinkSpec::default());
        let e = d_mod_k(&b2.build().unwrap(), &RouteOptions::default()).unwrap_err().to_string();
        assert!(e.contains("switch s0 port 2 reaches h0:1"), "{e}");
        let mut b3 = b.clone();
        b3.param("m", "2,2");
        assert!(d_mod_k(&b3.build().unwrap(), &RouteOptions::default()).unwrap_err().to_string().contains("'m'"));
        let mut b4 = b.clone();
        b4.param("m", vec![2u32, 3]);
        let e = d_mod_k(&b4.build().unwrap(), &RouteOptions::default()).unwrap_err().to_string();
        assert!(e.contains("has 4 switches and 4 hosts"), "{e}");
    }

    /// Per-pair paths of two tables.
    fn same_paths(t: &Topology, a: &RoutingTable, b: &RoutingTable, only_unique: impl Fn(usize, usize) -> bool) {
        let (mut pa, mut pb) = (Vec::new(), Vec::new());
        for s in 0..t.num_hosts() {
            for d in 0..t.num_hosts() {
                pa.clear();
                pb.clear();
                a.path(t, s, d, &mut pa).unwrap();
                b.path(t, s, d, &mut pb).unwrap();
                if only_unique(s, d) {
                    assert_eq!(pa, pb, "{}: {s}->{d}", t.name());
                } else {
                    assert_eq!(pa.len(), pb.len());
                }
            }
        }
    }

    #[test]
    fn lsft_routes_are_the_unique_minimal_paths() {
        for q in [2, 3, 4] {
            for two_sided in [false, true] {
                for reduced in [false, true] {
                    let t = latin_square_fat_tree(q, two_sided, reduced).unwrap();
                    let lay = LsftLayout::from_topology(&t).unwrap();
                    for select in Select::ALL {
                        let opts = RouteOptions { select, ..RouteOptions::default() };
                        let r = lsft(&t, &opts).unwrap();
                        assert_minimal(&t, &r);
                        let dl = deadlock::check(&t, &r).unwrap();
                        assert!(dl.deadlock_free && dl.vcs_used == 1, "{}", t.name());
                        let minhop = route(&t, Engine::MinHop, &RouteOptions::default()).unwrap();
                        // Paths are unique except between a leaf and its copy on the other side.
                        let unique = |s: usize, d: usize| {
                            let (ss, ps, _) = lay.host_of_index(s as u32).unwrap();
                            let (sd, pd, _) = lay.host_of_index(d as u32).unwrap();
                            ps != pd || ss == sd
                        };
                        same_paths(&t, &r, &minhop, unique);
                    }
                }
            }
        }
    }

    #[test]
    fn lsft_same_leaf_turns_at_the_leaf_and_shift_matches_minhop() {
        let t = latin_square_fat_tree(3, false, false).unwrap();
        let r = lsft(&t, &RouteOptions::default()).unwrap();
        let mut path = Vec::new();
        r.path(&t, 0, 3, &mut path).unwrap();
        assert_eq!(path.len(), 2);
        let minhop = route(&t, Engine::MinHop, &RouteOptions::default()).unwrap();
        let (a, b) = (shift(&t, &r), shift(&t, &minhop));
        assert_eq!(a.throughput_ratio, b.throughput_ratio);
        assert_eq!(a.max_congestion, b.max_congestion);
        assert!(a.throughput_ratio < 1.0);
        // Reduced S3 machine too.
        let t = latin_square_fat_tree(3, false, true).unwrap();
        let r = lsft(&t, &RouteOptions::default()).unwrap();
        let minhop = route(&t, Engine::MinHop, &RouteOptions::default()).unwrap();
        assert_eq!(shift(&t, &r).throughput_ratio, shift(&t, &minhop).throughput_ratio);
    }

    #[test]
    fn lsft_spines_off_the_route_still_have_minimal_entries() {
        let t = latin_square_fat_tree(3, true, true).unwrap();
        let r = lsft(&t, &RouteOptions::default()).unwrap();
        let g = SwitchFabric::new(&t);
        let mut dist = vec![u32::MAX; t.num_switches()];
        let mut queue = Vec::new();
        for d in 0..t.num_hosts() {
            let ds = t.kind_index(t.host_switch(t.hosts()[d]).unwrap());
            g.bfs(ds, &mut dist, &mut queue);
            for s in 0..t.num_switches() {
                let port = r.out_port(s, d);
                let c = t.out_channel(t.switches()[s], port).expect("every entry is set");
                let next = t.channel_ends(c).1.node;
                if s == ds {
                    assert_eq!(next, t.hosts()[d]);
                } else {
                    assert_eq!(dist[t.kind_index(next)] + 1, dist[s]);
                }
            }
        }
    }

    #[test]
    fn lsft_refuses_other_topologies() {
        let e = lsft(&fat_tree(3, 2, false).unwrap(), &RouteOptions::default()).unwrap_err().to_string();
        assert_eq!(e, "lsft routing needs a Latin-square fat-tree (family lsft); this is fat_tree");
        // An lsft whose ports were rewired.
        let t = latin_square_fat_tree(2, false, false).unwrap();
        let mut b = TopologyBuilder::new("lsft-like");
        b.family("lsft").param("order", 2u32);
        for n in 0..t.num_nodes() as u32 {
            b.add_node(t.kind(n), t.label(n).to_string(), t.radix(n));
        }
        for l in t.links() {
            // Swap server ports 1 and 2 on every leaf.
            let fix = |e: crate::topology::Endpoint| {
                if !t.is_host(e.node)
                    && e.port <= 2
                    && t.is_host(t.channel_ends(t.out_channel(e.node, e.port).unwrap()).1.node)
                {
                    3 - e.port
                } else {
                    e.port
                }
            };
            b.connect_ports(l.a.node, fix(l.a), l.b.node, fix(l.b), LinkSpec::default());
        }
        let e = lsft(&b.build().unwrap(), &RouteOptions::default()).unwrap_err().to_string();
        assert!(e.contains("leaf P port 1 should reach its server 0"), "{e}");
    }
}
