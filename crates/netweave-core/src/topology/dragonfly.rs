//! Dragonfly (Kim, Dally, Scott & Abts, "Technology-Driven, Highly-Scalable Dragonfly
//! Topology", ISCA 2008): groups of routers, all-to-all inside a group, global links between
//! groups.
//!
//! Parameters follow Kim et al.: `a` routers per group, `p` hosts per router, `h` global links
//! per router, `g` groups. A group owns `a·h` global link slots; the *arrangement* decides
//! which slot goes to which group (see [`GlobalArrangement`]). netweave only builds *balanced*
//! dragonflies, in which every pair of groups is joined by the same number `a·h/(g − 1)` of
//! global links, so distances and loads do not depend on which pair of groups is asked about.
//!
//! Layout, shared with the other generators so later stages can rely on it:
//! - Router `r` of group `G` is node `G·a + r`, label `g{G}.r{r}`, coordinates `[G, r]`.
//! - Hosts follow router-major (host index `router·p + local`), label `g{G}.r{r}.h{local}`,
//!   coordinates `[G, r, local]`.
//! - Router ports: `1..=p` hosts; then `a − 1` local ports, the one towards router `r'` of the
//!   same group being `p + 1 + (r' if r' < r else r' − 1)`; then `h` global ports
//!   `p + a + k` for `k = 0..h`, global slot `j = r·h + k` of the group.
//! - Every link is [`LinkSpec::default()`].

use std::fmt;
use std::str::FromStr;

use super::check_capacity;
use super::{require_at_least, LinkSpec, NodeId, Port, Topology, TopologyBuilder};
use crate::error::{NetweaveError, Result};

/// How the `a·h` global link slots of each group are wired to the other groups.
///
/// Slot `j = r·h + k` is global port `k` of router `r`. With `g − 1` other groups, every group
/// pair gets `m = a·h/(g − 1)` links. The three arrangements are those compared by Camarero,
/// Vallejo & Beivide, "Topological Characterization of Hamming and Dragonfly Networks and its
/// Implications on Routing", ACM TACO 11(4), 2014; for `m = 1` (the maximal `g = a·h + 1`)
/// each reduces to the published form, and for `m > 1` netweave extends it as documented on
/// each variant. They give the same counts and diameter but different *which router holds the
/// link to which group*, which changes minimal-routing load balance and the path diversity
/// that adaptive routing can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GlobalArrangement {
    /// "Absolute" or "consecutive": the other groups are numbered in increasing order, skipping
    /// the group itself, and dealt to the slots in order — router 0 gets the first `h` groups,
    /// router 1 the next `h`, … (the arrangement drawn in Kim et al. 2008).
    /// Slot `j = c·(g − 1) + s` (copy `c < m`, `s < g − 1`) goes to group `s` if `s < G`, else
    /// `s + 1`; the `m` copies towards one group are thus spread `g − 1` slots apart, i.e. over
    /// different routers, rather than piled on one router.
    Absolute,
    /// "Relative" or "palm tree" (M. García's arrangement, generalised by Camarero et al.):
    /// the destination depends on the distance between group numbers. Slot `j` of group `G`
    /// meets slot `j' = a·h − 1 − j` of group `G + 1 + (j' mod (g − 1))` (mod `g`), so router
    /// `r` of one group always meets router `a − 1 − r` of the other, and the wiring looks the
    /// same from every group (it is invariant under `G ↦ G + 1`).
    Relative,
    /// "Circulant": slot `j = c·(g − 1) + s` goes to group `G + δ(s)` (mod `g`) with
    /// `δ(s) = ⌊s/2⌋ + 1` for even `s` and `−(⌊s/2⌋ + 1)` for odd `s`, so the two directions
    /// `±δ` sit on adjacent slots (and, for even `h`, on the same router) and the group graph is
    /// the circulant graph `C_g(1, 2, …, ⌊(g − 1)/2⌋)`. Like [`Relative`](Self::Relative) it is
    /// invariant under `G ↦ G + 1`; unlike it, a router's global links reach groups at
    /// symmetric offsets, which is what the circulant-based analysis of Camarero et al. uses.
    Circulant,
}

impl GlobalArrangement {
    /// All arrangements, for sweeps and tests.
    pub const ALL: [GlobalArrangement; 3] =
        [GlobalArrangement::Absolute, GlobalArrangement::Relative, GlobalArrangement::Circulant];

    /// Parse a name (case-insensitive): `absolute`/`consecutive`, `relative`/`palmtree`
    /// (also `palm-tree`, `palm_tree`), `circulant`.
    pub fn from_name(name: &str) -> Result<Self> {
        let n = name.trim().to_ascii_lowercase();
        match n.as_str() {
            "absolute" | "consecutive" => Ok(GlobalArrangement::Absolute),
            "relative" | "palmtree" | "palm-tree" | "palm_tree" => Ok(GlobalArrangement::Relative),
            "circulant" => Ok(GlobalArrangement::Circulant),
            _ => crate::invalid!("unknown dragonfly arrangement '{name}' (expected absolute, relative or circulant)"),
        }
    }

    /// Canonical lower-case name, as recorded in topology parameters.
    pub fn name(self) -> &'static str {
        match self {
            GlobalArrangement::Absolute => "absolute",
            GlobalArrangement::Relative => "relative",
            GlobalArrangement::Circulant => "circulant",
        }
    }

    /// The far end `(group', slot')` of global slot `slot` of `group`, in a dragonfly of
    /// `groups` groups with `slots` = `a·h` global slots per group.
    ///
    /// The map is an involution without fixed points and never stays in `group`. `None` unless
    /// `2 ≤ groups`, `groups − 1` divides `slots`, `group < groups` and `slot < slots` (the
    /// balanced dragonflies [`dragonfly`] builds). Arithmetic is in `u64`, so it cannot overflow.
    ///
    /// ```
    /// use netweave_core::topology::dragonfly::GlobalArrangement;
    /// // Maximal a = 4, h = 2 dragonfly (9 groups): palm tree sends slot 0 of group 0 to group 8.
    /// assert_eq!(GlobalArrangement::Relative.peer(0, 0, 9, 8), Some((8, 7)));
    /// assert_eq!(GlobalArrangement::Relative.peer(0, 8, 9, 8), None);
    /// ```
    pub fn peer(self, group: u32, slot: u32, groups: u32, slots: u32) -> Option<(u32, u32)> {
        if groups < 2 || slots % (groups - 1) != 0 || group >= groups || slot >= slots {
            return None;
        }
        let (gr, j, g, n) = (group as u64, slot as u64, groups as u64, slots as u64);
        let others = g - 1;
        let (pg, pj) = match self {
            GlobalArrangement::Absolute => {
                let (c, s) = (j / others, j % others);
                let target = if s < gr { s } else { s + 1 };
                let back = if gr < target { gr } else { gr - 1 };
                (target, c * others + back)
            }
            GlobalArrangement::Relative => {
                let pj = n - 1 - j;
                ((gr + 1 + pj % others) % g, pj)
            }
            GlobalArrangement::Circulant => {
                let (c, s) = (j / others, j % others);
                let step = s / 2 + 1;
                let target = if s % 2 == 0 { (gr + step) % g } else { (gr + g - step) % g };
                // The reverse direction is the neighbouring slot; when g is even the middle
                // offset g/2 is its own reverse and sits alone on the last slot.
                let back = if s ^ 1 < others { s ^ 1 } else { s };
                (target, c * others + back)
            }
        };
        Some((pg as u32, pj as u32))
    }
}

impl fmt::Display for GlobalArrangement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GlobalArrangement {
    type Err = NetweaveError;
    fn from_str(s: &str) -> Result<Self> {
        GlobalArrangement::from_name(s)
    }
}

/// A balanced dragonfly: `a` routers per group (all-to-all inside the group), `p` hosts per
/// router, `h` global links per router, `g` groups (default `a·h + 1`, the largest balanced
/// size, one global link per pair of groups).
///
/// Any `2 ≤ g ≤ a·h + 1` with `(a·h) mod (g − 1) = 0` is accepted: every pair of groups is
/// then joined by exactly `a·h/(g − 1)` global links and every global port is used. Other
/// `g` would leave some group pairs with one link more than others, and are rejected.
/// Port numbering and labels are in the [module docs](self).
///
/// Counts: `a·g` routers, `a·p·g` hosts, `g·a(a − 1)/2` local links, `g·a·h/2` global links.
///
/// ```
/// use netweave_core::topology::dragonfly::{dragonfly, GlobalArrangement};
/// // Kim et al.'s example size: a = 4, p = h = 2 → 9 groups, 36 routers, 72 hosts.
/// let t = dragonfly(4, 2, 2, None, GlobalArrangement::Relative).unwrap();
/// assert_eq!((t.num_switches(), t.num_hosts()), (36, 72));
/// assert_eq!(t.num_links(), 72 + 9 * 6 + 9 * 4);
/// ```
pub fn dragonfly(a: u32, p: u32, h: u32, g: Option<u32>, arrangement: GlobalArrangement) -> Result<Topology> {
    require_at_least("dragonfly a (routers per group)", a as u64, 1)?;
    require_at_least("dragonfly h (global links per router)", h as u64, 1)?;
    let slots = a as u64 * h as u64;
    let max_g = slots + 1;
    let g64 = g.map_or(max_g, |g| g as u64);
    if g64 < 2 {
        return crate::invalid!("dragonfly: g must be at least 2 groups, got {g64}");
    }
    if g64 > max_g {
        return crate::invalid!(
            "dragonfly: g = {g64} groups exceeds a·h + 1 = {max_g}; each group has only a·h = {slots} global links"
        );
    }
    if slots % (g64 - 1) != 0 {
        return crate::invalid!(
            "dragonfly: g − 1 = {} must divide a·h = {slots} \
             so every pair of groups gets the same number of global links",
            g64 - 1
        );
    }
    // Saturating u64 arithmetic: a and h near u32::MAX must give an error, not an overflow.
    let routers = (a as u64).saturating_mul(g64);
    let hosts = routers.saturating_mul(p as u64);
    let radix = p as u64 + a as u64 - 1 + h as u64;
    let local_links = routers.saturating_mul(a as u64 - 1) / 2;
    let global_links = routers.saturating_mul(h as u64) / 2;
    let links = hosts.saturating_add(local_links).saturating_add(global_links);
    let ports = routers.saturating_mul(radix).saturating_add(hosts);
    check_capacity("dragonfly", routers.saturating_add(hosts), links, ports, radix)?;
    // All sizes now fit u32 (routers ≤ nodes ≤ u32::MAX; slots < routers·radix).
    let (g, slots, routers) = (g64 as u32, slots as u32, routers as u32);

    let mut b = TopologyBuilder::new(format!("dragonfly(a={a},p={p},h={h},g={g},{arrangement})"));
    b.family("dragonfly")
        .param("a", a)
        .param("p", p)
        .param("h", h)
        .param("g", g)
        .param("arrangement", arrangement.name());
    for grp in 0..g {
        for r in 0..a {
            let id = b.add_switch(format!("g{grp}.r{r}"), radix as Port);
            b.set_coords(id, vec![grp as i64, r as i64]);
        }
    }
    let spec = LinkSpec::default();
    for router in 0..routers {
        let (grp, r) = (router / a, router % a);
        for local in 0..p {
            let host = b.add_host(format!("g{grp}.r{r}.h{local}"));
            b.set_coords(host, vec![grp as i64, r as i64, local as i64]);
            b.connect_ports(host, 1, router as NodeId, (local + 1) as Port, spec);
        }
    }
    // Local links: router r reaches r' on port p + 1 + (r' if r' < r else r' − 1).
    for grp in 0..g {
        let base = grp * a;
        for r1 in 0..a {
            for r2 in r1 + 1..a {
                b.connect_ports(base + r1, (p + r2) as Port, base + r2, (p + r1 + 1) as Port, spec);
            }
        }
    }
    // Global links, each created once from its lexicographically smaller end.
    let global_port = |slot: u32| (p + a + slot % h) as Port;
    for grp in 0..g {
        for slot in 0..slots {
            let Some((pg, ps)) = arrangement.peer(grp, slot, g, slots) else { continue };
            if (grp, slot) < (pg, ps) {
                b.connect_ports(grp * a + slot / h, global_port(slot), pg * a + ps / h, global_port(ps), spec);
            }
        }
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Balanced (a, h, g) cases: maximal and several smaller g.
    const CASES: &[(u32, u32, Option<u32>)] = &[
        (4, 2, None),
        (4, 2, Some(5)),
        (4, 2, Some(3)),
        (4, 2, Some(2)),
        (2, 1, None),
        (3, 3, None),
        (3, 3, Some(4)),
        (6, 3, Some(7)),
        (1, 4, None),
        (1, 4, Some(3)),
        (8, 4, None),
        (5, 1, None),
    ];

    fn groups(a: u32, h: u32, g: Option<u32>) -> u32 {
        g.unwrap_or(a * h + 1)
    }

    fn group_of(t: &Topology, n: NodeId) -> i64 {
        t.coords(n).unwrap()[0]
    }

    #[test]
    fn counts_match_formulas() {
        for &(a, h, g) in CASES {
            for arr in GlobalArrangement::ALL {
                let p = 2;
                let t = dragonfly(a, p, h, g, arr).unwrap();
                let gs = groups(a, h, g) as usize;
                let (a, h, p) = (a as usize, h as usize, p as usize);
                assert_eq!(t.num_switches(), a * gs);
                assert_eq!(t.num_hosts(), a * p * gs);
                let mut local = 0;
                let mut global = 0;
                for l in t.links() {
                    if t.is_host(l.a.node) || t.is_host(l.b.node) {
                        continue;
                    }
                    if group_of(&t, l.a.node) == group_of(&t, l.b.node) {
                        local += 1;
                    } else {
                        global += 1;
                    }
                }
                assert_eq!(local, gs * a * (a - 1) / 2, "{a} {h} {g:?} {arr}");
                assert_eq!(global, gs * a * h / 2, "{a} {h} {g:?} {arr}");
                assert!(t
                    .switches()
                    .iter()
                    .all(|&s| t.degree(s) == p + a - 1 + h && t.radix(s) as usize == p + a - 1 + h));
            }
        }
    }

    #[test]
    fn every_pair_of_groups_gets_the_same_number_of_links() {
        for &(a, h, g) in CASES {
            let gs = groups(a, h, g) as usize;
            let per_pair = (a * h) as usize / (gs - 1);
            for arr in GlobalArrangement::ALL {
                let t = dragonfly(a, 1, h, g, arr).unwrap();
                let mut m = vec![0usize; gs * gs];
                for l in t.links() {
                    if t.is_host(l.a.node) || t.is_host(l.b.node) {
                        continue;
                    }
                    let (x, y) = (group_of(&t, l.a.node) as usize, group_of(&t, l.b.node) as usize);
                    if x != y {
                        m[x * gs + y] += 1;
                        m[y * gs + x] += 1;
                    }
                }
                for x in 0..gs {
                    for y in 0..gs {
                        let want = if x == y { 0 } else { per_pair };
                        assert_eq!(m[x * gs + y], want, "a={a} h={h} g={gs} {arr} pair ({x},{y})");
                    }
                }
            }
        }
    }

    #[test]
    fn global_ports_are_the_last_h_and_local_ports_follow_the_documented_map() {
        let (a, p, h) = (4u32, 2u32, 2u32);
        for arr in GlobalArrangement::ALL {
            let t = dragonfly(a, p, h, None, arr).unwrap();
            for &s in t.switches() {
                let my_group = group_of(&t, s);
                let r = t.coords(s).unwrap()[1] as u32;
                let mut global = 0;
                for adj in t.neighbors(s) {
                    let port = adj.port as u32;
                    if port <= p {
                        assert!(t.is_host(adj.neighbor));
                    } else if port < p + a {
                        assert_eq!(group_of(&t, adj.neighbor), my_group);
                        let r2 = t.coords(adj.neighbor).unwrap()[1] as u32;
                        assert_eq!(port, p + 1 + if r2 < r { r2 } else { r2 - 1 });
                    } else {
                        assert_ne!(group_of(&t, adj.neighbor), my_group);
                        global += 1;
                    }
                }
                assert!(global <= h as usize);
            }
        }
    }

    #[test]
    fn peer_is_a_fixed_point_free_involution() {
        for &(a, h, g) in CASES {
            let gs = groups(a, h, g);
            let slots = a * h;
            for arr in GlobalArrangement::ALL {
                for grp in 0..gs {
                    for j in 0..slots {
                        let (pg, pj) = arr.peer(grp, j, gs, slots).unwrap();
                        assert!(pg < gs && pj < slots);
                        assert_ne!(pg, grp);
                        assert_eq!(arr.peer(pg, pj, gs, slots), Some((grp, j)), "{arr} g={gs} ({grp},{j})");
                    }
                }
            }
        }
    }

    #[test]
    fn arrangements_match_their_published_forms_when_maximal() {
        let (a, h) = (4u32, 2u32);
        let (g, n) = (a * h + 1, a * h);
        for grp in 0..g {
            for j in 0..n {
                // Absolute: other groups in increasing order.
                let t = GlobalArrangement::Absolute.peer(grp, j, g, n).unwrap().0;
                assert_eq!(t, if j < grp { j } else { j + 1 });
                // Palm tree: group G − j − 1.
                let t = GlobalArrangement::Relative.peer(grp, j, g, n).unwrap().0;
                assert_eq!(t, (grp + g - j - 1) % g);
            }
        }
        // Circulant: router 0 of group 0 (h = 2) reaches groups +1 and −1.
        assert_eq!(GlobalArrangement::Circulant.peer(0, 0, g, n).unwrap().0, 1);
        assert_eq!(GlobalArrangement::Circulant.peer(0, 1, g, n).unwrap().0, g - 1);
        // Invalid inputs give None, never a panic.
        for arr in GlobalArrangement::ALL {
            assert_eq!(arr.peer(0, 0, 1, 8), None);
            assert_eq!(arr.peer(0, 0, 0, 8), None);
            assert_eq!(arr.peer(0, 0, 4, 8), None);
            assert_eq!(arr.peer(9, 0, 9, 8), None);
            // Extreme but valid sizes work without overflow.
            let (pg, pj) = arr.peer(u32::MAX - 1, u32::MAX - 2, u32::MAX, u32::MAX - 1).unwrap();
            assert_eq!(arr.peer(pg, pj, u32::MAX, u32::MAX - 1), Some((u32::MAX - 1, u32::MAX - 2)));
        }
    }

    #[test]
    fn balanced_dragonfly_has_diameter_at_most_three() {
        for arr in GlobalArrangement::ALL {
            for (a, h, g) in [(4, 2, None), (2, 1, None), (4, 2, Some(5)), (3, 3, None)] {
                let t = dragonfly(a, 1, h, g, arr).unwrap();
                let diam = crate::topology::metrics::stats(&t).diameter.unwrap();
                assert!(diam <= 3, "{arr} a={a} h={h} g={g:?}");
            }
        }
    }

    #[test]
    fn labels_coords_and_params() {
        let t = dragonfly(4, 2, 2, Some(5), GlobalArrangement::Circulant).unwrap();
        assert_eq!(t.name(), "dragonfly(a=4,p=2,h=2,g=5,circulant)");
        assert_eq!(t.family(), "dragonfly");
        assert_eq!(t.params()["arrangement"], serde_json::json!("circulant"));
        assert_eq!(t.params()["g"], serde_json::json!(5));
        assert_eq!(t.label(6), "g1.r2");
        assert_eq!(t.coords(6), Some(&[1i64, 2][..]));
        let host = t.hosts()[13]; // router 6, local 1
        assert_eq!(t.label(host), "g1.r2.h1");
        assert_eq!(t.host_switch(host), Some(6));
    }

    #[test]
    fn from_name_accepts_aliases_and_rejects_others() {
        use GlobalArrangement::*;
        for (s, want) in [
            ("absolute", Absolute),
            ("Consecutive", Absolute),
            ("relative", Relative),
            ("palmtree", Relative),
            ("palm-tree", Relative),
            (" circulant ", Circulant),
        ] {
            assert_eq!(GlobalArrangement::from_name(s).unwrap(), want);
        }
        assert_eq!("relative".parse::<GlobalArrangement>().unwrap(), Relative);
        let e = GlobalArrangement::from_name("random").unwrap_err().to_string();
        assert!(e.contains("absolute, relative or circulant"), "{e}");
        for arr in GlobalArrangement::ALL {
            assert_eq!(GlobalArrangement::from_name(arr.name()).unwrap(), arr);
        }
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let r = GlobalArrangement::Relative;
        assert!(dragonfly(0, 1, 1, None, r).is_err());
        assert!(dragonfly(4, 1, 0, None, r).is_err());
        assert!(dragonfly(4, 1, 2, Some(1), r).is_err());
        assert!(dragonfly(4, 1, 2, Some(0), r).is_err());
        let e = dragonfly(4, 1, 2, Some(10), r).unwrap_err().to_string();
        assert!(e.contains("exceeds"), "{e}");
        let e = dragonfly(4, 1, 2, Some(4), r).unwrap_err().to_string();
        assert!(e.contains("must divide"), "{e}");
        assert!(dragonfly(60000, 10000, 2, None, r).is_err());
        assert!(dragonfly(u32::MAX, 1, u32::MAX, None, r).is_err());
    }
}
