//! The typed shape of a topology: what every later stage asks instead of re-reading the
//! generator's `family` string and `params` map.
//!
//! A [`Structure`] is computed once, when a [`Topology`](super::Topology) is built: from the
//! structure a file states (topology JSON's `structure` field), else from the generator family
//! and parameters ([`Structure::from_family`], the one place that interprets them). Engines,
//! evaluators, the mapper and the Python layer match on it:
//!
//! ```
//! use netweave_core::topology::{grid, structure::{LatticeShape, Structure}};
//! let t = grid::torus(&[4, 3], 2).unwrap();
//! let Structure::Lattice(lat) = t.structure() else { panic!() };
//! assert_eq!((lat.shape, lat.dims.as_slice(), lat.hosts_per_router), (LatticeShape::Torus, &[4, 3][..], 2));
//! assert!(lat.wrap());
//! ```
//!
//! The structure is a *claim* about the wiring, checked by whoever relies on it (dimension-order
//! routing, D-mod-k and the LSFT engine verify every link against it), so a hand-edited file
//! that no longer matches is refused with the switch and port that disagree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fat_tree::PgftSpec;
use super::lsft::LsftLayout;
use super::{Port, Topology};
use crate::error::Result;

/// Which kind of lattice: the three differ in wrap-around and in the router port layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatticeShape {
    /// No wrap-around links; two ports per dimension.
    Mesh,
    /// A ring in every dimension of size ≥ 2; two ports per dimension.
    Torus,
    /// `2 × 2 × … × 2`, one port per dimension used in both directions.
    Hypercube,
}

impl LatticeShape {
    /// The generator family of this shape ("mesh", "torus", "hypercube").
    pub fn name(self) -> &'static str {
        match self {
            LatticeShape::Mesh => "mesh",
            LatticeShape::Torus => "torus",
            LatticeShape::Hypercube => "hypercube",
        }
    }
}

/// Routers on a lattice in [`grid`](super::grid)'s layout: router `i` is node `i` with
/// dimension 0 varying fastest; host index `router · hosts_per_router + local`, on router port
/// `local + 1`; then the dimension ports ([`port`](Self::port)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lattice {
    pub shape: LatticeShape,
    /// Routers per dimension, dimension 0 fastest in router ids.
    pub dims: Vec<u32>,
    /// Host ports `H` before the router ports; host index = `router · H + local`.
    pub hosts_per_router: u32,
}

impl Lattice {
    /// Whether every dimension of size ≥ 2 is a ring (torus).
    #[inline]
    pub fn wrap(&self) -> bool {
        self.shape == LatticeShape::Torus
    }
    /// Router count `Π dims`, saturating at `u64::MAX`.
    #[inline]
    pub fn num_routers_u64(&self) -> u64 {
        self.dims.iter().fold(1u64, |a, &k| a.saturating_mul(k as u64))
    }
    /// Router count `Π dims` (callers check it fits with [`num_routers_u64`](Self::num_routers_u64)).
    #[inline]
    pub fn num_routers(&self) -> u32 {
        self.dims.iter().product()
    }
    /// Router-id stride of each dimension (dimension 0 fastest), saturating.
    pub fn strides(&self) -> Vec<u64> {
        let mut strides = Vec::with_capacity(self.dims.len());
        let mut acc = 1u64;
        for &k in &self.dims {
            strides.push(acc);
            acc = acc.saturating_mul(k as u64);
        }
        strides
    }
    /// Router id of coordinates `x` (dimension 0 fastest).
    #[inline]
    pub fn router_id(&self, x: &[u32]) -> u32 {
        let mut id = 0u32;
        for d in (0..self.dims.len()).rev() {
            id = id * self.dims[d] + x[d];
        }
        id
    }
    /// Coordinates of router `id`.
    #[inline]
    pub fn router_coords(&self, mut id: u32, x: &mut [u32]) {
        for (xd, &k) in x.iter_mut().zip(&self.dims) {
            *xd = id % k;
            id /= k;
        }
    }
    /// Advance an odometer of coordinates (dimension 0 fastest) to the next router.
    #[inline]
    pub fn step(&self, x: &mut [u32]) {
        for (xd, &k) in x.iter_mut().zip(&self.dims) {
            *xd += 1;
            if *xd < k {
                return;
            }
            *xd = 0;
        }
    }
    /// Router port of dimension `d` towards `+1` (`plus`) or `−1`: `H + 2d + 1` / `H + 2d + 2`
    /// on a mesh or torus, `H + d + 1` both ways on a hypercube.
    #[inline]
    pub fn port(&self, d: usize, plus: bool) -> Port {
        let h = self.hosts_per_router as usize;
        if self.shape == LatticeShape::Hypercube {
            (h + d + 1) as Port
        } else {
            (h + 2 * d + if plus { 1 } else { 2 }) as Port
        }
    }
    /// The dimension and direction (`true`: `+`) of router port `port`, the inverse of
    /// [`port`](Self::port); `None` for host ports and ports past the last dimension. A
    /// hypercube's one port per dimension reads as `+`.
    #[inline]
    pub fn dim_of_port(&self, port: Port) -> Option<(usize, bool)> {
        let (h, p) = (self.hosts_per_router as usize, port as usize);
        let per = if self.shape == LatticeShape::Hypercube { 1 } else { 2 };
        (p > h && p <= h + per * self.dims.len()).then(|| ((p - h - 1) / per, (p - h - 1) % per == 0))
    }
    /// The router one step from router `r` along dimension `d` (`plus`: towards `+1`), as the
    /// generators wire it: `None` past a mesh's edge and in a dimension of size 1; on a torus
    /// the step wraps; on a hypercube both directions flip the same bit.
    pub fn neighbour(&self, r: u32, d: usize, plus: bool) -> Option<u32> {
        let k = self.dims[d];
        if k < 2 {
            return None;
        }
        let stride: u32 = self.dims[..d].iter().product();
        let x = r / stride % k;
        match self.shape {
            LatticeShape::Hypercube => Some(r ^ stride),
            LatticeShape::Mesh => match plus {
                true => (x + 1 < k).then(|| r + stride),
                false => (x > 0).then(|| r - stride),
            },
            LatticeShape::Torus => Some(match (plus, x + 1 == k, x == 0) {
                (true, false, _) => r + stride,
                (true, true, _) => r - (k - 1) * stride,
                (false, _, false) => r - stride,
                (false, _, true) => r + (k - 1) * stride,
            }),
        }
    }
    /// Coordinates of every router, flat: `coords[r · n + d]` for `n` dimensions.
    pub fn coords(&self) -> Vec<u32> {
        let n = self.dims.len();
        let routers = self.num_routers() as usize;
        let mut out = Vec::with_capacity(routers * n);
        let mut x = vec![0u32; n];
        for _ in 0..routers {
            out.extend_from_slice(&x);
            self.step(&mut x);
        }
        out
    }
}

impl Topology {
    /// The mesh, torus or hypercube this topology is, checked against its wiring — the one
    /// check every user of lattice rules relies on (dimension-order routing, the mapper's
    /// lattice routes and placements, the flit simulator's BookSim torus routing and digit
    /// patterns). It holds when the structure is a lattice whose router count is the switch
    /// count, whose ports fit 16-bit port numbers, every router link is on the port
    /// [`Lattice::port`] names and reaches [`Lattice::neighbour`] (hosts may hang anywhere; see
    /// [`lattice_with_hosts`](Self::lattice_with_hosts)). Otherwise one line saying what differs (callers prefix
    /// their name).
    ///
    /// ```
    /// use netweave_core::topology::grid::{mesh, torus};
    /// let t = torus(&[4, 3], 2).unwrap();
    /// let lat = t.lattice().unwrap();
    /// assert_eq!((lat.neighbour(3, 0, true), lat.port(1, false)), (Some(0), 2 + 2 + 2));
    /// assert!(netweave_core::topology::fat_tree::k_ary_n_tree(2, 2).unwrap().lattice().is_err());
    /// ```
    pub fn lattice(&self) -> Result<&Lattice> {
        let lat = match self.structure() {
            Structure::Lattice(lat) => lat,
            Structure::Malformed { expected, reason } if expected == "lattice" => {
                return crate::invalid!("{} topology '{}' {reason}", self.family(), self.name())
            }
            _ => {
                return crate::invalid!(
                    "'{}' is not a mesh, torus or hypercube (its family is {})",
                    self.name(),
                    self.family()
                )
            }
        };
        let routers = lat.num_routers_u64();
        if routers != self.num_switches() as u64 {
            return crate::invalid!(
                "'{}' has {} switches, but its dims {:?} imply {routers} routers",
                self.name(),
                self.num_switches(),
                lat.dims
            );
        }
        if lat.hosts_per_router as u64 + 2 * lat.dims.len() as u64 > Port::MAX as u64 {
            return crate::invalid!("'{}' has more router ports than a 16-bit port number allows", self.name());
        }
        let unlike = |what: String| {
            crate::invalid!("'{}' is not the {} its parameters describe: {what}", self.name(), self.family())
        };
        let switches = self.switches();
        for (r, &node) in switches.iter().enumerate() {
            for d in 0..lat.dims.len() {
                for plus in [true, false] {
                    if lat.shape == LatticeShape::Hypercube && !plus {
                        continue; // the same port as `+`
                    }
                    let Some(expected) = lat.neighbour(r as u32, d, plus) else { continue };
                    let port = lat.port(d, plus);
                    let reached = self.out_channel(node, port).map(|c| self.channel_ends(c).1.node);
                    if !reached.is_some_and(|m| !self.is_host(m) && self.kind_index(m) == expected as usize) {
                        return unlike(format!(
                            "router {} port {port} should reach {} (dimension {d}, {} direction)",
                            self.label(node),
                            self.label(switches[expected as usize]),
                            if plus { "+" } else { "-" }
                        ));
                    }
                }
            }
        }
        Ok(lat)
    }

    /// [`lattice`](Self::lattice), and also the generators' host layout — host `h` on router
    /// `h / H` at port `h % H + 1`, `H` hosts on every router — for users that find a host's
    /// router from its index (the mapper's lattice routes, BookSim's torus routing, the digit
    /// traffic patterns).
    pub fn lattice_with_hosts(&self) -> Result<&Lattice> {
        let lat = self.lattice()?;
        let routers = lat.num_routers_u64();
        let unlike = |what: String| {
            crate::invalid!("'{}' is not the {} its parameters describe: {what}", self.name(), self.family())
        };
        let switches = self.switches();
        let per = lat.hosts_per_router as usize;
        if self.num_hosts() as u64 != routers * per as u64 {
            return unlike(format!("{} hosts, not {per} on each of {routers} routers", self.num_hosts()));
        }
        for (h, &node) in self.hosts().iter().enumerate() {
            let (router, port) = (switches[h / per], (h % per + 1) as Port);
            let reached = self.out_channel(router, port).map(|c| self.channel_ends(c).1.node);
            if reached != Some(node) {
                return unlike(format!(
                    "host {} should sit on router {} port {port}",
                    self.label(node),
                    self.label(router)
                ));
            }
        }
        Ok(lat)
    }
}

impl LsftLayout {
    /// Layout of an LSFT topology, from its [`Structure`]. It lives here, beside
    /// [`Topology::lattice`], so that the generator module `lsft` needs nothing from this one
    /// (the structure names the layout; the layout does not read the structure back).
    pub fn from_topology(t: &Topology) -> Result<Self> {
        let lay = match t.structure() {
            // Re-checked: a file may state any order.
            Structure::Lsft(lay) => LsftLayout::new(lay.order, lay.two_sided, lay.reduced)?,
            Structure::Malformed { expected, reason } if expected == "lsft" => {
                return crate::invalid!("lsft topology '{}' {reason}", t.name());
            }
            _ => return crate::invalid!("topology '{}' is a {}, not an lsft", t.name(), t.family()),
        };
        let order = lay.order;
        if lay.num_nodes() != t.num_nodes() as u64 {
            return crate::invalid!(
                "lsft topology '{}' has {} nodes, but order {order} implies {}",
                t.name(),
                t.num_nodes(),
                lay.num_nodes()
            );
        }
        Ok(lay)
    }
}

/// Which generator built a fat-tree that is a PGFT underneath.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FatTreeKind {
    /// [`pgft`](super::fat_tree::pgft).
    Pgft,
    /// [`k_ary_n_tree`](super::fat_tree::k_ary_n_tree).
    KAryNTree,
    /// [`fat_tree`](super::fat_tree::fat_tree) (paper 000's 2- and 3-level trees).
    FatTree,
}

impl FatTreeKind {
    /// The generator family ("pgft", "k_ary_n_tree", "fat_tree").
    pub fn name(self) -> &'static str {
        match self {
            FatTreeKind::Pgft => "pgft",
            FatTreeKind::KAryNTree => "k_ary_n_tree",
            FatTreeKind::FatTree => "fat_tree",
        }
    }
}

/// A fat-tree in PGFT numbering (see [`fat_tree`](super::fat_tree)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FatTree {
    pub family: FatTreeKind,
    pub m: Vec<u32>,
    pub w: Vec<u32>,
    pub p: Vec<u32>,
}

impl FatTree {
    /// The checked PGFT spec.
    pub fn spec(&self) -> crate::error::Result<PgftSpec> {
        PgftSpec::new(self.m.clone(), self.w.clone(), self.p.clone())
    }
}

/// The shape of a topology, as every stage after the first reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Structure {
    /// Mesh, torus or hypercube ([`grid`](super::grid)).
    Lattice(Lattice),
    /// HyperX: every router linked to each router differing in one coordinate.
    Hyperx { dims: Vec<u32>, trunking: u32, hosts_per_router: u32 },
    /// Fat-tree / k-ary n-tree / PGFT.
    FatTree(FatTree),
    /// Latin-square fat-tree of paper 000 (order q, one- or two-sided, full or reduced).
    Lsft(LsftLayout),
    /// A tree of switches ([`ethernet`](super::ethernet)): `fanouts` switches under each switch
    /// level by level, `hosts_per_edge_switch` hosts under each bottom switch.
    SwitchTree { fanouts: Vec<u32>, hosts_per_edge_switch: u32 },
    /// One cluster: a core switch over edge switches of `hosts_per_switch` hosts.
    StarOfSwitches { hosts: u32, hosts_per_switch: u32 },
    /// Several clusters (each a switch or a star of switches) joined by WAN links to one router.
    MultiCluster { clusters: u32 },
    /// Dragonfly: `g` groups of `a` routers, `p` hosts and `h` global links per router.
    Dragonfly { a: u32, p: u32, h: u32, g: u32, arrangement: String },
    /// Anything else: random and irregular graphs, imports, hand-built networks.
    Generic,
    /// The family names a known shape (the `kind` it would have, as [`kind`](Structure::kind) would say) but its
    /// parameters do not describe one (`expected`); `reason` completes "… topology 'NAME' REASON" (e.g.
    /// "lacks a valid 'dims' parameter"). Not written to files (the reader derives it again
    /// from family and parameters).
    Malformed { expected: String, reason: String },
}

impl Structure {
    /// Interpret a generator family and its parameters — the only reader of them.
    /// Unknown families are [`Generic`](Structure::Generic); a known family whose parameters
    /// are missing or ill-typed is [`Malformed`](Structure::Malformed).
    ///
    /// ```
    /// use netweave_core::topology::structure::Structure;
    /// let mut p = std::collections::BTreeMap::new();
    /// p.insert("dims".to_string(), serde_json::json!("4x4"));
    /// let s = Structure::from_family("mesh", &p);
    /// let reason = "lacks a valid 'hosts_per_router' parameter".to_string();
    /// assert_eq!(s, Structure::Malformed { expected: "lattice".into(), reason });
    /// ```
    pub fn from_family(family: &str, params: &BTreeMap<String, serde_json::Value>) -> Structure {
        match Self::parse(family, params) {
            Ok(s) => s,
            Err(reason) => {
                let kind = match family {
                    "mesh" | "torus" | "hypercube" => "lattice",
                    "pgft" | "k_ary_n_tree" | "fat_tree" => "fat_tree",
                    other => other,
                };
                Structure::Malformed { expected: kind.to_string(), reason }
            }
        }
    }

    fn parse(family: &str, params: &BTreeMap<String, serde_json::Value>) -> std::result::Result<Structure, String> {
        let lacks = |key: &str| format!("lacks a valid '{key}' parameter");
        let u32_of = |key: &str| -> std::result::Result<u32, String> {
            params.get(key).and_then(|v| v.as_u64()).and_then(|x| u32::try_from(x).ok()).ok_or_else(|| lacks(key))
        };
        let list_of = |key: &str| -> std::result::Result<Vec<u32>, String> {
            params
                .get(key)
                .and_then(|v| v.as_array())
                .and_then(|a| a.iter().map(|v| v.as_u64().and_then(|x| u32::try_from(x).ok())).collect())
                .ok_or_else(|| lacks(key))
        };
        let flag = |key: &str| params.get(key).and_then(|v| v.as_bool()).unwrap_or(false);
        let dims_of = || -> std::result::Result<Vec<u32>, String> {
            match list_of("dims") {
                Ok(d) if !d.is_empty() && d.iter().all(|&k| k >= 1) => Ok(d),
                _ => Err(lacks("dims")),
            }
        };
        Ok(match family {
            "mesh" | "torus" => {
                let hosts_per_router = u32_of("hosts_per_router")?;
                let shape = if family == "torus" { LatticeShape::Torus } else { LatticeShape::Mesh };
                Structure::Lattice(Lattice { shape, dims: dims_of()?, hosts_per_router })
            }
            "hypercube" => {
                let hosts_per_router = u32_of("hosts_per_router")?;
                let dim = match u32_of("dim") {
                    Ok(d) if (1..=31).contains(&d) => d,
                    _ => return Err(lacks("dim")),
                };
                Structure::Lattice(Lattice {
                    shape: LatticeShape::Hypercube,
                    dims: vec![2; dim as usize],
                    hosts_per_router,
                })
            }
            "hyperx" => Structure::Hyperx {
                dims: dims_of()?,
                trunking: u32_of("trunking")?,
                hosts_per_router: u32_of("hosts_per_router")?,
            },
            "pgft" | "k_ary_n_tree" | "fat_tree" => {
                let family = match family {
                    "pgft" => FatTreeKind::Pgft,
                    "k_ary_n_tree" => FatTreeKind::KAryNTree,
                    _ => FatTreeKind::FatTree,
                };
                let tree = FatTree { family, m: list_of("m")?, w: list_of("w")?, p: list_of("p")? };
                tree.spec().map_err(|e| format!("has parameters that are no PGFT: {e}"))?;
                Structure::FatTree(tree)
            }
            "lsft" => {
                // The order itself (q ≥ 2, a prime power) is checked by whoever builds the plane.
                Structure::Lsft(LsftLayout {
                    order: u32_of("order")?,
                    two_sided: flag("two_sided"),
                    reduced: flag("reduced"),
                })
            }
            "switch_tree" => Structure::SwitchTree {
                fanouts: list_of("fanouts")?,
                hosts_per_edge_switch: u32_of("hosts_per_edge_switch")?,
            },
            "star_of_switches" => {
                Structure::StarOfSwitches { hosts: u32_of("hosts")?, hosts_per_switch: u32_of("hosts_per_switch")? }
            }
            "multi_cluster" => {
                let n = params.get("clusters").and_then(|v| v.as_array()).ok_or_else(|| lacks("clusters"))?.len();
                Structure::MultiCluster { clusters: n as u32 }
            }
            "dragonfly" => Structure::Dragonfly {
                a: u32_of("a")?,
                p: u32_of("p")?,
                h: u32_of("h")?,
                g: u32_of("g")?,
                arrangement: params.get("arrangement").and_then(|v| v.as_str()).unwrap_or("relative").to_string(),
            },
            _ => Structure::Generic,
        })
    }

    /// The lattice, for a mesh, torus or hypercube.
    #[inline]
    pub fn lattice(&self) -> Option<&Lattice> {
        match self {
            Structure::Lattice(l) => Some(l),
            _ => None,
        }
    }

    /// Whether jobs on this topology are allocated in whole leaves (fat-trees and LSFTs).
    pub fn is_fat_tree(&self) -> bool {
        matches!(self, Structure::FatTree(_) | Structure::Lsft(_))
    }

    /// The `kind` tag as written in files ("lattice", "fat_tree", "lsft", …).
    pub fn kind(&self) -> &'static str {
        match self {
            Structure::Lattice(_) => "lattice",
            Structure::Hyperx { .. } => "hyperx",
            Structure::FatTree(_) => "fat_tree",
            Structure::Lsft(_) => "lsft",
            Structure::SwitchTree { .. } => "switch_tree",
            Structure::StarOfSwitches { .. } => "star_of_switches",
            Structure::MultiCluster { .. } => "multi_cluster",
            Structure::Dragonfly { .. } => "dragonfly",
            Structure::Generic => "generic",
            Structure::Malformed { .. } => "malformed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{dragonfly, ethernet, fat_tree, grid, io, lsft, random};

    #[test]
    fn every_generator_states_its_structure() {
        let t = grid::hypercube(3, 1).unwrap();
        assert_eq!(
            t.structure(),
            &Structure::Lattice(Lattice { shape: LatticeShape::Hypercube, dims: vec![2, 2, 2], hosts_per_router: 1 })
        );
        let t = fat_tree::fat_tree(3, 2, true).unwrap();
        let Structure::FatTree(f) = t.structure() else { panic!("{:?}", t.structure()) };
        assert_eq!((f.family, f.m.as_slice()), (FatTreeKind::FatTree, &[3, 6][..]));
        let t = lsft::latin_square_fat_tree(3, true, true).unwrap();
        assert_eq!(t.structure(), &Structure::Lsft(LsftLayout::new(3, true, true).unwrap()));
        let t = grid::hyperx(&[3, 2], 2, 1).unwrap();
        assert_eq!(t.structure(), &Structure::Hyperx { dims: vec![3, 2], trunking: 2, hosts_per_router: 1 });
        let t = dragonfly::dragonfly(4, 2, 2, None, dragonfly::GlobalArrangement::Relative).unwrap();
        assert!(matches!(t.structure(), Structure::Dragonfly { a: 4, p: 2, h: 2, .. }));
        let t = random::random_regular(8, 3, 1, 1).unwrap();
        assert_eq!(t.structure(), &Structure::Generic);
        let l = ethernet::TreeLevel { fanout: 2, link: crate::topology::LinkSpec::default() };
        let t = ethernet::switch_tree(&[l], 3, crate::topology::LinkSpec::default()).unwrap();
        assert_eq!(t.structure(), &Structure::SwitchTree { fanouts: vec![2], hosts_per_edge_switch: 3 });
    }

    #[test]
    fn structure_survives_json_and_old_files_derive_it() {
        let t = grid::torus(&[3, 2], 1).unwrap();
        let text = io::json::write(&t).unwrap();
        assert!(text.contains("\"structure\": {\"kind\":\"lattice\""), "{text}");
        assert_eq!(io::json::read(&text).unwrap().structure(), t.structure());
        // A version-1 file without the field: derived from family and params.
        let old: String =
            text.lines().filter(|l| !l.trim_start().starts_with("\"structure\"")).collect::<Vec<_>>().join("\n");
        assert_eq!(io::json::read(&old).unwrap().structure(), t.structure());
        // The stated structure wins over the family it was written beside.
        let edited = text.replace("\"shape\":\"torus\"", "\"shape\":\"mesh\"");
        assert_eq!(io::json::read(&edited).unwrap().structure().lattice().unwrap().shape, LatticeShape::Mesh);
    }

    #[test]
    fn malformed_parameters_say_which_one() {
        let mut p = BTreeMap::new();
        p.insert("hosts_per_router".into(), serde_json::json!(1));
        let bad = |kind: &str, key: &str| Structure::Malformed {
            expected: kind.into(),
            reason: format!("lacks a valid '{key}' parameter"),
        };
        assert_eq!(Structure::from_family("hypercube", &p), bad("lattice", "dim"));
        p.insert("dims".into(), serde_json::json!([]));
        p.insert("order".into(), serde_json::json!(-1));
        assert_eq!(Structure::from_family("torus", &p), bad("lattice", "dims"));
        assert_eq!(Structure::from_family("lsft", &p), bad("lsft", "order"));
        assert_eq!(Structure::from_family("k_ary_n_tree", &p), bad("fat_tree", "m"));
        assert_eq!(Structure::from_family("something", &p), Structure::Generic);
    }
}
