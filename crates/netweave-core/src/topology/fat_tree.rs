//! Fat-trees: the general PGFT/XGFT family, k-ary n-trees, paper 000's 2- and 3-level trees,
//! and paper 000's cost table.
//!
//! # PGFT(h; m; w; p)
//!
//! The parallel-ports generalized fat-tree (Zahavi; XGFT of Öhring et al. when every p_l = 1).
//! Level 0 holds the hosts, levels 1..=h the switches. A level-l node is named by h digits
//!
//! ```text
//! (a_h, …, a_{l+1}, b_l, …, b_1)      a_i ∈ [0, m_i),  b_i ∈ [0, w_i)
//! ```
//!
//! and a level-(l−1) node `(a_h, …, a_l, b_{l−1}, …, b_1)` is joined to the w_l level-l nodes
//! that share every digit except the one in position l, which becomes `b_l ∈ [0, w_l)`; each
//! such pair is joined by p_l parallel links. So a level-l switch has m_l children (p_l·m_l
//! down ports) and w_{l+1} parents (w_{l+1}·p_{l+1} up ports; none at the top), and a host has
//! w_1·p_1 ports.
//!
//! # Numbering (fixed; routing such as D-mod-k relies on it)
//!
//! - **Nodes:** switches level 1 first, then level 2, …, level h, then the hosts. Within a
//!   level, nodes are ordered by their digit tuple read as a mixed-radix number with the
//!   leftmost digit (a_h) most significant. Consequently host index = leaf index · m_1 + a_1
//!   when w_1 = 1: the servers of a leaf are consecutive, as paper 000's shift baseline needs.
//! - **Ports:** down ports first, then up ports. Child a_l uses down ports
//!   `a_l·p_l + 1 ..= a_l·p_l + p_l`; parent b_{l+1} uses up ports
//!   `D + b_{l+1}·p_{l+1} + 1 ..= D + (b_{l+1}+1)·p_{l+1}` where D = p_l·m_l is the number of
//!   down ports (D = 0 for hosts). Ports beyond those (see [`fat_tree`]) are left free.
//! - **Labels:** `L<level>:<digits>` for switches and `H:<digits>` for hosts, digits in tuple
//!   order separated by dots, e.g. `L1:0.2.0` is the level-1 switch (a_3, a_2, b_1) = (0, 2, 0)
//!   of a 3-level tree and `H:1.0.3` a host. **Coordinates** are the same digit tuple.
//!
//! ```
//! use netweave_core::topology::fat_tree::{pgft, PgftSpec};
//! let spec: PgftSpec = "3; 4,4,4; 1,4,4; 1,1,1".parse().unwrap();
//! let t = pgft(&spec).unwrap();
//! assert_eq!((t.num_hosts(), t.num_switches()), (64, 48));
//! assert_eq!(spec.to_string(), "3; 4,4,4; 1,4,4; 1,1,1");
//! ```

use std::fmt;
use std::str::FromStr;

use super::galois::prime_power;
use super::{check_capacity, require_at_least, LinkSpec, NodeId, Port, Topology, TopologyBuilder};
use crate::error::{NetweaveError, Result};

/// Parameters of a PGFT(h; m_1..m_h; w_1..w_h; p_1..p_h), lists indexed by level − 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgftSpec {
    /// Number of switch levels.
    pub h: u32,
    /// m_l: children per level-l switch (hosts per leaf for l = 1).
    pub m: Vec<u32>,
    /// w_l: parents per level-(l−1) node.
    pub w: Vec<u32>,
    /// p_l: parallel links between a level-(l−1) node and each of its parents.
    pub p: Vec<u32>,
}

impl PgftSpec {
    /// A checked spec from the three lists (h = their common length).
    pub fn new(m: Vec<u32>, w: Vec<u32>, p: Vec<u32>) -> Result<Self> {
        let spec = PgftSpec { h: m.len() as u32, m, w, p };
        spec.validate()?;
        Ok(spec)
    }

    /// An XGFT (every p_l = 1).
    pub fn xgft(m: Vec<u32>, w: Vec<u32>) -> Result<Self> {
        let p = vec![1; m.len()];
        Self::new(m, w, p)
    }

    /// Parse `"h; m1,…,mh; w1,…,wh; p1,…,ph"` (spaces anywhere, an optional `PGFT(`…`)` or
    /// `XGFT(`…`)` wrapper). The XGFT form without the p list means every p_l = 1.
    ///
    /// ```
    /// use netweave_core::topology::fat_tree::PgftSpec;
    /// let s = PgftSpec::parse("XGFT(2; 4, 4; 1, 4)").unwrap();
    /// assert_eq!(s.p, vec![1, 1]);
    /// assert_eq!(
    ///     PgftSpec::parse("3; 4,4,4; 1,4").unwrap_err().to_string(),
    ///     "PGFT needs h=3 values in each list, got 2 in w"
    /// );
    /// ```
    pub fn parse(text: &str) -> Result<Self> {
        let mut s = text.trim();
        for prefix in ["PGFT", "XGFT", "pgft", "xgft"] {
            if let Some(rest) = s.strip_prefix(prefix) {
                s = rest.trim();
                break;
            }
        }
        if let Some(inner) = s.strip_prefix('(').and_then(|x| x.strip_suffix(')')) {
            s = inner;
        }
        let parts: Vec<&str> = s.split(';').map(str::trim).collect();
        if !(3..=4).contains(&parts.len()) {
            return crate::invalid!(
                "PGFT spec must look like 'h; m1,..,mh; w1,..,wh[; p1,..,ph]', got '{}'",
                text.trim()
            );
        }
        let num = |what: &str, x: &str| -> Result<u32> {
            x.trim().parse::<u32>().map_err(|_| {
                NetweaveError::InvalidParameter(format!("PGFT {what}: '{}' is not a whole number", x.trim()))
            })
        };
        let h = num("height h", parts[0])?;
        let list = |what: &str, x: &str| -> Result<Vec<u32>> {
            if x.is_empty() {
                return Ok(Vec::new());
            }
            x.split(',').map(|v| num(what, v)).collect()
        };
        let m = list("m", parts[1])?;
        let w = list("w", parts[2])?;
        let p = if parts.len() == 4 { list("p", parts[3])? } else { vec![1; h as usize] };
        let spec = PgftSpec { h, m, w, p };
        spec.validate()?;
        Ok(spec)
    }

    /// Check h ≥ 1, list lengths = h, every value ≥ 1.
    pub fn validate(&self) -> Result<()> {
        require_at_least("PGFT height h", self.h as u64, 1)?;
        for (name, list) in [("m", &self.m), ("w", &self.w), ("p", &self.p)] {
            if list.len() != self.h as usize {
                return crate::invalid!("PGFT needs h={} values in each list, got {} in {name}", self.h, list.len());
            }
            for (i, &v) in list.iter().enumerate() {
                require_at_least(&format!("PGFT {name}{}", i + 1), v as u64, 1)?;
            }
        }
        Ok(())
    }

    /// Number of level-l nodes (l = 0 for hosts): ∏_{i>l} m_i · ∏_{i≤l} w_i, saturating.
    pub fn nodes_at_level(&self, l: u32) -> u64 {
        let hi: u64 = self.m[l as usize..].iter().fold(1u64, |a, &x| a.saturating_mul(x as u64));
        let lo: u64 = self.w[..l as usize].iter().fold(1u64, |a, &x| a.saturating_mul(x as u64));
        hi.saturating_mul(lo)
    }

    /// Ports of a level-l node that the tree uses: p_l·m_l down (none for hosts) plus
    /// w_{l+1}·p_{l+1} up (none at the top).
    pub fn ports_at_level(&self, l: u32) -> u64 {
        let (l, h) = (l as usize, self.h as usize);
        let down = if l == 0 { 0 } else { self.p[l - 1] as u64 * self.m[l - 1] as u64 };
        let up = if l == h { 0 } else { self.w[l] as u64 * self.p[l] as u64 };
        down + up
    }

    /// Number of links between level l−1 and level l (l ≥ 1), saturating.
    pub fn links_at_level(&self, l: u32) -> u64 {
        let i = l as usize - 1;
        self.nodes_at_level(l - 1).saturating_mul(self.w[i] as u64 * self.p[i] as u64)
    }
}

impl FromStr for PgftSpec {
    type Err = NetweaveError;
    fn from_str(s: &str) -> Result<Self> {
        PgftSpec::parse(s)
    }
}

impl fmt::Display for PgftSpec {
    /// `"3; 4,4,4; 1,4,4; 1,1,1"`, which [`PgftSpec::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |v: &[u32]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",");
        write!(f, "{}; {}; {}; {}", self.h, join(&self.m), join(&self.w), join(&self.p))
    }
}

/// Build a PGFT (numbering, ports and labels in the module docs). Family "pgft", params
/// `h`, `m`, `w`, `p` and `spec` (the Display string).
pub fn pgft(spec: &PgftSpec) -> Result<Topology> {
    let mut b = build_pgft(spec, 0, "pgft")?;
    b.family("pgft");
    b.build()
}

/// The k-ary n-tree (Petrini & Vanneschi) = PGFT(n; k,…,k; 1,k,…,k; 1,…,1): k^n hosts,
/// n·k^(n−1) switches of radix 2k (top level: k ports used). Family "k_ary_n_tree", params
/// `k`, `n` (plus the PGFT ones). Needs k ≥ 2 and n ≥ 1.
pub fn k_ary_n_tree(k: u32, n: u32) -> Result<Topology> {
    require_at_least("k-ary n-tree arity k", k as u64, 2)?;
    require_at_least("k-ary n-tree height n", n as u64, 1)?;
    let h = n as usize;
    let mut w = vec![k; h];
    w[0] = 1;
    let spec = PgftSpec::new(vec![k; h], w, vec![1; h])?;
    let mut b = build_pgft(&spec, 0, "k-ary n-tree")?;
    b.family("k_ary_n_tree").param("k", k).param("n", n);
    let mut t = b.build()?;
    t.set_name(format!("k-ary-n-tree(k={k}, n={n})"));
    Ok(t)
}

/// The conventional fat-trees of paper 000 (§2.1, §2.4) with switches of degree d (radix 2d).
///
/// | levels | sides | PGFT | servers | switches |
/// |---|---|---|---|---|
/// | 2 | one | (2; d,d; 1,d; 1,1) | d² | 2d |
/// | 2 | two | (2; d,2d; 1,d; 1,1) | 2d² | 3d |
/// | 3 | one | (3; d,d,d; 1,d,d; 1,1,1) | d³ | 3d² |
/// | 3 | two | (3; d,d,2d; 1,d,d; 1,1,1) | 2d³ | 5d² |
///
/// Every switch gets radix 2d, so a one-sided tree shows its unused top side as d free ports
/// per top switch (ports d+1..=2d), exactly the "half of the spine ports are free" of the
/// paper; two-sided uses them for a second set of leaves/pods. Family "fat_tree", params
/// `degree`, `levels`, `two_sided` (plus the PGFT ones). With the PGFT numbering, host index =
/// leaf index · d + server slot, the order behind Fig. 3 of the paper.
///
/// ```
/// use netweave_core::topology::fat_tree::fat_tree;
/// let t = fat_tree(3, 2, false).unwrap();          // Fig. 1 of paper 000
/// assert_eq!((t.num_hosts(), t.num_switches()), (9, 6));
/// ```
pub fn fat_tree(degree: u32, levels: u32, two_sided: bool) -> Result<Topology> {
    require_at_least("fat-tree degree", degree as u64, 2)?;
    let d = degree;
    let top = |x: u32| -> Result<u32> {
        if two_sided {
            x.checked_mul(2).ok_or_else(|| NetweaveError::InvalidParameter(format!("fat-tree degree {d} is too large")))
        } else {
            Ok(x)
        }
    };
    let spec = match levels {
        2 => PgftSpec::new(vec![d, top(d)?], vec![1, d], vec![1, 1])?,
        3 => PgftSpec::new(vec![d, d, top(d)?], vec![1, d, d], vec![1, 1, 1])?,
        _ => return crate::invalid!("fat-tree levels must be 2 or 3, got {levels}"),
    };
    let mut b = build_pgft(&spec, 2 * d as u64, "fat-tree")?;
    b.family("fat_tree").param("degree", d).param("levels", levels).param("two_sided", two_sided);
    let mut t = b.build()?;
    let side = if two_sided { ", two-sided" } else { "" };
    t.set_name(format!("fat_tree(d={d}, {levels}-level{side})"));
    Ok(t)
}

/// A builder holding PGFT `spec`, every switch's radix raised to at least `radix_floor`.
fn build_pgft(spec: &PgftSpec, radix_floor: u64, family: &str) -> Result<TopologyBuilder> {
    spec.validate()?;
    let h = spec.h;
    let sizes: Vec<u64> = (0..=h).map(|l| spec.nodes_at_level(l)).collect();
    let radix: Vec<u64> = (0..=h)
        .map(|l| if l == 0 { spec.ports_at_level(0) } else { spec.ports_at_level(l).max(radix_floor) })
        .collect();
    let nodes = sizes.iter().fold(0u64, |a, &x| a.saturating_add(x));
    let links = (1..=h).fold(0u64, |a, l| a.saturating_add(spec.links_at_level(l)));
    let ports = (0..=h as usize).fold(0u64, |a, l| a.saturating_add(sizes[l].saturating_mul(radix[l])));
    let max_radix = radix.iter().copied().max().unwrap_or(0);
    check_capacity(family, nodes, links, ports, max_radix)?;

    // base[l]: node id of the first level-l node (switch levels 1..=h first, hosts last).
    let mut base = vec![0u64; h as usize + 1];
    let mut next = 0u64;
    for l in 1..=h as usize {
        base[l] = next;
        next += sizes[l];
    }
    base[0] = next;

    let mut b = TopologyBuilder::new(format!("pgft({spec})"));
    b.param("h", h)
        .param("m", spec.m.clone())
        .param("w", spec.w.clone())
        .param("p", spec.p.clone())
        .param("spec", spec.to_string());
    for l in (1..=h).chain(std::iter::once(0)) {
        // Digit radices of a level-l node: m_h..m_{l+1}, then w_l..w_1.
        let radices: Vec<u32> = (l + 1..=h)
            .rev()
            .map(|i| spec.m[i as usize - 1])
            .chain((1..=l).rev().map(|i| spec.w[i as usize - 1]))
            .collect();
        let mut digits = vec![0u32; h as usize];
        for idx in 0..sizes[l as usize] {
            let text = digits.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(".");
            let node = if l == 0 {
                b.add_host_with_ports(format!("H:{text}"), radix[0] as Port)
            } else {
                b.add_switch(format!("L{l}:{text}"), radix[l as usize] as Port)
            };
            debug_assert_eq!(node as u64, base[l as usize] + idx);
            b.set_coords(node, digits.iter().map(|&x| x as i64).collect());
            // Increment the mixed-radix counter, last digit fastest.
            for pos in (0..h as usize).rev() {
                digits[pos] += 1;
                if digits[pos] < radices[pos] {
                    break;
                }
                digits[pos] = 0;
            }
        }
    }

    // Level l−1 → l. The digit in position h−l is a_l (radix m_l) in the child and b_l
    // (radix w_l) in the parent; digits to its left form `hi`, to its right `lo`.
    let spec_link = LinkSpec::default();
    for l in 1..=h as usize {
        let (m, w, p) = (spec.m[l - 1] as u64, spec.w[l - 1] as u64, spec.p[l - 1] as u64);
        let low: u64 = spec.w[..l - 1].iter().map(|&x| x as u64).product();
        let high: u64 = spec.m[l..].iter().map(|&x| x as u64).product();
        let child_down = if l == 1 { 0 } else { spec.p[l - 2] as u64 * spec.m[l - 2] as u64 };
        for hi in 0..high {
            for a in 0..m {
                for lo in 0..low {
                    let child = (base[l - 1] + (hi * m + a) * low + lo) as NodeId;
                    for bl in 0..w {
                        let parent = (base[l] + (hi * w + bl) * low + lo) as NodeId;
                        for k in 0..p {
                            let up_port = (child_down + bl * p + k + 1) as Port;
                            let down_port = (a * p + k + 1) as Port;
                            b.connect_ports(child, up_port, parent, down_port, spec_link);
                        }
                    }
                }
            }
        }
    }
    Ok(b)
}

/// One row of paper 000's cost comparison (§2.4) for switches of degree d.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CostRow {
    /// "2-level fat-tree", "3-level fat-tree" or "Latin square fat-tree".
    pub family: String,
    /// Switch degree d (ports per side; radix 2d).
    pub degree: u32,
    /// Connectable servers.
    pub servers: u64,
    /// Switch count as printed in the paper (for the LSFT: d²−d+1, the number of leaves only).
    pub switches_printed: u64,
    /// Switches actually needed (for the LSFT: leaves + spines = 2(d²−d+1)).
    pub switches_total: u64,
    /// Links including server links (not printed in the paper; derived in the spec).
    pub links_with_servers: u64,
}

/// Paper 000's cost table for one-sided topologies of switch degree d: 2-level FT (d², 2d),
/// 3-level FT (d³, 3d²) and, only when d−1 is a prime power (so the plane exists), the LSFT
/// (d(d²−d+1) servers). The paper prints d²−d+1 switches for the LSFT, which counts only one
/// layer; both conventions are given because the paper is ambiguous (spec §2.4). Arithmetic
/// saturates at `u64::MAX`; degree 0 gives an empty table.
///
/// ```
/// use netweave_core::topology::fat_tree::cost_table;
/// let rows = cost_table(18);
/// assert_eq!(rows[2].servers, 5526);
/// assert_eq!((rows[2].switches_printed, rows[2].switches_total), (307, 614));
/// ```
pub fn cost_table(degree: u32) -> Vec<CostRow> {
    if degree == 0 {
        return Vec::new();
    }
    let d = degree as u64;
    let mul = |a: u64, b: u64| a.saturating_mul(b);
    let row = |family: &str, servers: u64, printed: u64, total: u64, links: u64| CostRow {
        family: family.to_string(),
        degree,
        servers,
        switches_printed: printed,
        switches_total: total,
        links_with_servers: links,
    };
    let d2 = mul(d, d);
    let d3 = mul(d2, d);
    let mut rows = vec![
        row("2-level fat-tree", d2, 2 * d, 2 * d, mul(2, d2)),
        row("3-level fat-tree", d3, mul(3, d2), mul(3, d2), mul(3, d3)),
    ];
    if degree >= 3 && prime_power(degree - 1).is_some() {
        let plane = d2 - d + 1;
        let servers = mul(d, plane);
        rows.push(row("Latin square fat-tree", servers, plane, mul(2, plane), mul(2, servers)));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::lsft::latin_square_fat_tree;

    fn all_switch_degrees_fit(t: &Topology) {
        for n in 0..t.num_nodes() as NodeId {
            assert!(t.degree(n) <= t.radix(n) as usize, "{}", t.label(n));
        }
    }

    #[test]
    fn k_ary_n_tree_counts() {
        for k in [2u32, 4, 8] {
            for n in 1..=3u32 {
                let t = k_ary_n_tree(k, n).unwrap();
                assert_eq!(t.num_hosts(), k.pow(n) as usize, "k={k} n={n}");
                assert_eq!(t.num_switches(), (n * k.pow(n - 1)) as usize);
                assert_eq!(t.num_links(), (n * k.pow(n)) as usize);
                assert_eq!(t.family(), "k_ary_n_tree");
                assert_eq!(t.name(), format!("k-ary-n-tree(k={k}, n={n})"));
                all_switch_degrees_fit(&t);
                for &s in t.switches() {
                    let top = t.label(s).starts_with(&format!("L{n}:"));
                    assert_eq!(t.degree(s), if top { k } else { 2 * k } as usize);
                }
            }
        }
    }

    #[test]
    fn fat_tree_counts_for_both_levels_and_sides() {
        for d in 2u32..=6 {
            let cases = [
                (2, false, d * d, 2 * d, 2 * d * d),
                (2, true, 2 * d * d, 3 * d, 4 * d * d),
                (3, false, d * d * d, 3 * d * d, 3 * d * d * d),
                (3, true, 2 * d * d * d, 5 * d * d, 6 * d * d * d),
            ];
            for (levels, two, hosts, switches, links) in cases {
                let t = fat_tree(d, levels, two).unwrap();
                let what = format!("d={d} levels={levels} two={two}");
                assert_eq!(t.num_hosts(), hosts as usize, "{what}");
                assert_eq!(t.num_switches(), switches as usize, "{what}");
                assert_eq!(t.num_links(), links as usize, "{what}");
                for &s in t.switches() {
                    assert_eq!(t.radix(s), 2 * d as Port, "{what}");
                }
                all_switch_degrees_fit(&t);
                // One-sided: each top switch uses exactly one side.
                let top = format!("L{levels}:");
                for &s in t.switches().iter().filter(|&&s| t.label(s).starts_with(&top)) {
                    assert_eq!(t.degree(s), if two { 2 * d } else { d } as usize, "{what}");
                }
            }
        }
    }

    #[test]
    fn fat_tree_hosts_are_leaf_consecutive() {
        let d = 3;
        let t = fat_tree(d, 2, false).unwrap();
        for (i, &h) in t.hosts().iter().enumerate() {
            let leaf = t.host_switch(h).unwrap();
            assert_eq!(t.kind_index(leaf), i / d as usize);
            assert_eq!(t.neighbors(h)[0].neighbor_port as usize, i % d as usize + 1);
        }
        assert_eq!(t.params()["degree"], 3);
        assert_eq!(t.name(), "fat_tree(d=3, 2-level)");
    }

    #[test]
    fn links_change_exactly_one_digit_and_ports_go_down_first() {
        let spec = PgftSpec::parse("3; 2,3,2; 1,2,3; 1,1,1").unwrap();
        let t = pgft(&spec).unwrap();
        for l in t.links() {
            let (child, parent) = (l.a, l.b);
            let (cl, pl) = (t.label(child.node), t.label(parent.node));
            let level = |s: &str| if s.starts_with('H') { 0 } else { s[1..2].parse::<usize>().unwrap() };
            let lv = level(pl);
            assert_eq!(level(cl) + 1, lv);
            let (cc, pc) = (t.coords(child.node).unwrap(), t.coords(parent.node).unwrap());
            let pos = spec.h as usize - lv;
            for i in 0..spec.h as usize {
                if i != pos {
                    assert_eq!(cc[i], pc[i], "{cl} - {pl}");
                }
            }
            // Parent's down port encodes the child digit a_l; child's up port the parent's b_l.
            assert_eq!(parent.port as i64, cc[pos] + 1);
            let child_down = if lv == 1 { 0 } else { spec.m[lv - 2] as i64 };
            assert_eq!(child.port as i64, child_down + pc[pos] + 1);
        }
        assert_eq!(t.num_hosts(), 12);
        assert_eq!(t.num_switches(), 6 + 4 + 6); // m2·m3·w1, m3·w1·w2, w1·w2·w3
    }

    #[test]
    fn parallel_links() {
        let spec = PgftSpec::parse("2; 2,2; 1,2; 1,2").unwrap();
        let t = pgft(&spec).unwrap();
        assert_eq!((t.num_hosts(), t.num_switches(), t.num_links()), (4, 4, 4 + 8));
        let leaf = t.find_label("L1:0.0").unwrap();
        assert_eq!(t.radix(leaf), 2 + 4);
        let ups: Vec<NodeId> = t.neighbors(leaf).iter().filter(|a| a.port > 2).map(|a| a.neighbor).collect();
        assert_eq!(ups.len(), 4);
        assert_eq!(ups[0], ups[1]);
        assert_eq!(ups[2], ups[3]);
        assert_ne!(ups[0], ups[2]);
        all_switch_degrees_fit(&t);
        // Multi-homed hosts get one port per parent link.
        let t2 = pgft(&PgftSpec::parse("1; 3; 2; 2").unwrap()).unwrap();
        assert_eq!(t2.radix(t2.hosts()[0]), 4);
        assert_eq!(t2.num_links(), 3 * 2 * 2);
    }

    #[test]
    fn spec_parsing_and_display() {
        let s = PgftSpec::parse("  3 ;4, 4,4 ; 1,4,4;1 ,1,1 ").unwrap();
        assert_eq!(s, PgftSpec { h: 3, m: vec![4; 3], w: vec![1, 4, 4], p: vec![1; 3] });
        assert_eq!(s.to_string(), "3; 4,4,4; 1,4,4; 1,1,1");
        assert_eq!(PgftSpec::parse(&s.to_string()).unwrap(), s);
        assert_eq!(PgftSpec::parse("PGFT(3; 4,4,4; 1,4,4; 1,1,1)").unwrap(), s);
        assert_eq!("3; 4,4,4; 1,4,4".parse::<PgftSpec>().unwrap(), s);
        for (bad, want) in [
            ("3; 4,4; 1,4,4; 1,1,1", "PGFT needs h=3 values in each list, got 2 in m"),
            ("2; 4,4", "PGFT spec must look like"),
            ("x; 4; 1", "PGFT height h: 'x' is not a whole number"),
            ("1; -4; 1", "PGFT m: '-4' is not a whole number"),
            ("0; ; ", "PGFT height h must be at least 1, got 0"),
            ("2; 4,0; 1,4", "PGFT m2 must be at least 1, got 0"),
            ("2; 4,4; 1,4; 1,0", "PGFT p2 must be at least 1, got 0"),
        ] {
            let e = PgftSpec::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(want), "{bad}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn bad_sizes_are_rejected() {
        assert!(k_ary_n_tree(0, 2).is_err());
        assert!(k_ary_n_tree(1, 2).is_err());
        assert!(k_ary_n_tree(4, 0).is_err());
        assert_eq!(fat_tree(0, 2, false).unwrap_err().to_string(), "fat-tree degree must be at least 2, got 0");
        assert_eq!(fat_tree(1, 3, true).unwrap_err().to_string(), "fat-tree degree must be at least 2, got 1");
        assert_eq!(fat_tree(4, 1, false).unwrap_err().to_string(), "fat-tree levels must be 2 or 3, got 1");
        assert_eq!(fat_tree(4, 4, false).unwrap_err().to_string(), "fat-tree levels must be 2 or 3, got 4");
        assert!(fat_tree(40_000, 2, false).is_err());
        let e = pgft(&PgftSpec::parse("1; 70000; 1").unwrap()).unwrap_err().to_string();
        assert!(e.contains("16-bit"), "{e}");
        let e = k_ary_n_tree(1000, 4).unwrap_err().to_string();
        assert!(e.contains("32-bit"), "{e}");
        let bad = PgftSpec { h: 2, m: vec![2, 2], w: vec![1], p: vec![1, 1] };
        assert!(pgft(&bad).is_err());
    }

    #[test]
    fn cost_table_matches_generated_topologies() {
        for d in 3u32..=8 {
            let rows = cost_table(d);
            let count = |t: &Topology| (t.num_hosts() as u64, t.num_switches() as u64, t.num_links() as u64);
            let ft2 = count(&fat_tree(d, 2, false).unwrap());
            assert_eq!((rows[0].servers, rows[0].switches_total, rows[0].links_with_servers), ft2);
            let ft3 = count(&fat_tree(d, 3, false).unwrap());
            assert_eq!((rows[1].servers, rows[1].switches_total, rows[1].links_with_servers), ft3);
            assert_eq!(rows[0].switches_printed, rows[0].switches_total);
            if prime_power(d - 1).is_some() {
                assert_eq!(rows.len(), 3, "d={d}");
                let ls = count(&latin_square_fat_tree(d - 1, false, false).unwrap());
                assert_eq!((rows[2].servers, rows[2].switches_total, rows[2].links_with_servers), ls);
                assert_eq!(rows[2].switches_printed * 2, rows[2].switches_total);
            } else {
                assert_eq!(rows.len(), 2, "d={d}: no plane of order {}", d - 1);
            }
        }
        assert!(cost_table(0).is_empty());
        assert_eq!(cost_table(2).len(), 2);
        assert_eq!(cost_table(u32::MAX)[1].links_with_servers, u64::MAX);
    }
}
