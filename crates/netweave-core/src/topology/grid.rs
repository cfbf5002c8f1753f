//! Direct networks on a lattice: n-dimensional mesh and torus, hypercube and HyperX.
//!
//! All four generators share one node layout, so later stages (dimension-order routing, rank
//! mapping, plots) can rely on it without asking which generator ran:
//!
//! - **Routers first, in index order.** A router's index packs its coordinates with
//!   dimension 0 varying fastest, the BookSim convention:
//!   `id = x0 + k0·(x1 + k1·(x2 + …))`. Router `i` is node `i`.
//! - **Hosts next, router-major:** host index `router·H + local`, node id `routers + host index`,
//!   attached to port `local + 1` of its router (ports `1..=H` are always the host ports).
//! - **Coordinates:** a router's are `[x0, x1, …]`; a host's are its router's followed by its
//!   local index, `[x0, x1, …, local]`.
//! - **Labels:** `r(x0,x1,…)` for routers and `h(x0,x1,…).local` for hosts, e.g. `r(1,2)` and
//!   `h(1,2).0` in a 2-D grid. The coordinates read in the same order as
//!   [`Topology::coords`], so a label can be matched to its coordinates by eye.
//! - Every link is [`LinkSpec::default()`]; use [`Topology::set_all_links`] to change them.
//!
//! What differs is the router ports after the host ports, documented on each generator.

use super::structure::{Lattice, LatticeShape};
use super::{check_capacity, require_at_least, LinkSpec, NodeId, Port, Topology, TopologyBuilder};
use crate::error::Result;

/// Total ports `routers·radix + hosts`, saturating so absurd sizes reach [`check_capacity`].
fn sat_ports(routers: u64, radix: u64, hosts: u64) -> u64 {
    routers.saturating_mul(radix).saturating_add(hosts)
}

/// `(1,2,3)`: the coordinate part of a label.
fn fmt_coords(x: &[u32]) -> String {
    let mut s = String::with_capacity(2 + 4 * x.len());
    s.push('(');
    for (i, v) in x.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&v.to_string());
    }
    s.push(')');
    s
}

/// `4x4x2`: the shape part of a name.
fn fmt_dims(dims: &[u32]) -> String {
    dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
}

/// Check `dims` (non-empty, every size ≥ 1, product fits `u32`) and return the lattice with
/// its router strides (dimension 0 fastest). HyperX shares the node layout, so it is laid out
/// through a lattice too (its ports differ, and its structure says HyperX).
fn checked_lattice(
    family: &str,
    shape: LatticeShape,
    dims: &[u32],
    hosts_per_router: u32,
) -> Result<(Lattice, Vec<u32>)> {
    if dims.is_empty() {
        return crate::invalid!("{family}: give at least one dimension");
    }
    for (d, &k) in dims.iter().enumerate() {
        if k == 0 {
            return crate::invalid!("{family}: dimension {d} has size 0; every dimension needs at least 1 router");
        }
    }
    let lat = Lattice { shape, dims: dims.to_vec(), hosts_per_router };
    if lat.num_routers_u64() > u32::MAX as u64 {
        return crate::invalid!("{family}: {} routers exceed the 32-bit node id range", fmt_dims(dims));
    }
    let strides = lat.strides().into_iter().map(|s| s as u32).collect();
    Ok((lat, strides))
}

/// Add the routers, the hosts and the host links in the layout described in the module docs.
/// Returns nothing: router `i` is node `i`, so callers address routers by index.
fn add_nodes(lat: &Lattice, b: &mut TopologyBuilder, radix: Port) {
    let n = lat.dims.len();
    let mut x = vec![0u32; n];
    let routers = lat.num_routers();
    for _ in 0..routers {
        let id = b.add_switch(format!("r{}", fmt_coords(&x)), radix);
        b.set_coords(id, x.iter().map(|&v| v as i64).collect());
        lat.step(&mut x);
    }
    // x wrapped back to all zeros: walk the routers again for their hosts.
    for r in 0..routers {
        let tag = fmt_coords(&x);
        for local in 0..lat.hosts_per_router {
            let h = b.add_host(format!("h{tag}.{local}"));
            let mut c: Vec<i64> = x.iter().map(|&v| v as i64).collect();
            c.push(local as i64);
            b.set_coords(h, c);
            b.connect_ports(h, 1, r as NodeId, (local + 1) as Port, LinkSpec::default());
        }
        lat.step(&mut x);
    }
}

/// An n-dimensional mesh: routers on a `dims[0] × dims[1] × …` lattice, each linked to its
/// neighbour one step up and one step down in every dimension, no wrap-around.
///
/// Any size per dimension is allowed; a dimension of size 1 simply has no links (so
/// `mesh(&[1, 5], 1)` is a line of 5). Router radix is `H + 2·dims.len()` whatever the
/// position, so every router has the same port map: ports `1..=H` for hosts, then for
/// dimension `d` port `H + 2d + 1` towards `+1` and `H + 2d + 2` towards `−1`. Border routers
/// leave the ports that would leave the lattice unconnected. A `+` port always meets the
/// neighbour's `−` port of the same dimension, which is what dimension-order routing wants.
///
/// Node layout, coordinates and labels are described in the [module docs](self).
/// `hosts_per_router` may be 0 for a switch-only fabric.
///
/// Counts: `Πk` routers, `Πk·H` hosts, `Σ_d (k_d − 1)·Π_{e≠d} k_e` router links.
///
/// ```
/// let t = netweave_core::topology::grid::mesh(&[4, 4], 1).unwrap();
/// assert_eq!((t.num_switches(), t.num_hosts()), (16, 16));
/// assert_eq!(t.num_links(), 24 + 16);
/// assert_eq!(t.label(5), "r(1,1)");
/// ```
pub fn mesh(dims: &[u32], hosts_per_router: u32) -> Result<Topology> {
    grid("mesh", dims, hosts_per_router, false)
}

/// An n-dimensional torus: a [`mesh`] plus a wrap-around link in every dimension of size ≥ 2.
///
/// Ports are exactly as in [`mesh`]: hosts on `1..=H`, dimension `d` on `H + 2d + 1` (`+`) and
/// `H + 2d + 2` (`−`). The wrap link joins the `+` port of the last router of a ring to the
/// `−` port of the first, so every router uses both ports of every dimension of size ≥ 2.
///
/// **Size 2:** the two routers of a ring of size 2 are joined twice, by the ordinary link
/// (`+` of 0 to `−` of 1) and the wrap link (`+` of 1 to `−` of 0). Keeping both parallel
/// links keeps the torus regular: a torus always has `routers × (number of dimensions of
/// size ≥ 2)` router links, every router has degree `2·(that number) + H`, and the
/// bandwidth between the pair is double, as on real hardware wired as a torus. Dimensions of
/// size 1 have no links.
///
/// ```
/// let t = netweave_core::topology::grid::torus(&[4, 4, 4], 0).unwrap();
/// assert_eq!(t.num_links(), 64 * 3);
/// assert!(t.switches().iter().all(|&s| t.degree(s) == 6));
/// ```
pub fn torus(dims: &[u32], hosts_per_router: u32) -> Result<Topology> {
    grid("torus", dims, hosts_per_router, true)
}

/// Shared body of [`mesh`] and [`torus`].
fn grid(family: &str, dims: &[u32], hosts_per_router: u32, wrap: bool) -> Result<Topology> {
    let shape = if wrap { LatticeShape::Torus } else { LatticeShape::Mesh };
    let (lat, strides) = checked_lattice(family, shape, dims, hosts_per_router)?;
    let h = hosts_per_router as u64;
    let n = dims.len() as u64;
    let routers = lat.num_routers() as u64;
    let radix = h.saturating_add(n.saturating_mul(2));
    let router_links = dims.iter().fold(0u64, |acc, &k| {
        let k = k as u64;
        let in_dim = if wrap {
            if k >= 2 {
                routers
            } else {
                0
            }
        } else {
            (k - 1) * (routers / k)
        };
        acc.saturating_add(in_dim)
    });
    let hosts = routers * h;
    check_capacity(
        family,
        routers + hosts,
        router_links.saturating_add(hosts),
        sat_ports(routers, radix, hosts),
        radix,
    )?;

    let mut b = TopologyBuilder::new(format!("{family}({},hosts={hosts_per_router})", fmt_dims(dims)));
    b.family(family).param("dims", dims.to_vec()).param("hosts_per_router", hosts_per_router);
    add_nodes(&lat, &mut b, radix as Port);

    let spec = LinkSpec::default();
    let hp = hosts_per_router as Port;
    let mut x = vec![0u32; dims.len()];
    for r in 0..lat.num_routers() {
        for (d, (&k, &stride)) in dims.iter().zip(&strides).enumerate() {
            let plus = hp + 2 * d as Port + 1;
            let minus = plus + 1;
            if x[d] + 1 < k {
                b.connect_ports(r, plus, r + stride, minus, spec);
            } else if wrap && k >= 2 {
                b.connect_ports(r, plus, r - (k - 1) * stride, minus, spec);
            }
        }
        lat.step(&mut x);
    }
    b.build()
}

/// A binary hypercube of dimension `dim`: `2^dim` routers, router `i` linked to `i ^ (1 << d)`
/// for every `d < dim`.
///
/// Router index bits are its coordinates (bit 0 first), so the node layout, coordinates and
/// labels are those of a `2 × 2 × … × 2` lattice (see the [module docs](self)): router 6 of a
/// 3-cube is `r(0,1,1)`. Ports: `1..=H` hosts, then dimension `d` on port `H + d + 1` at both
/// ends of its link — one port per dimension, unlike the `2 × … × 2` [`mesh`], which has the
/// same links but spends two ports per dimension.
///
/// `dim` must be 1..=31 (the router count must fit a 32-bit id).
///
/// ```
/// let t = netweave_core::topology::grid::hypercube(4, 1).unwrap();
/// assert_eq!((t.num_switches(), t.num_links()), (16, 32 + 16));
/// ```
pub fn hypercube(dim: u32, hosts_per_router: u32) -> Result<Topology> {
    require_at_least("hypercube dimension", dim as u64, 1)?;
    if dim > 31 {
        return crate::invalid!("hypercube: dimension {dim} exceeds 31 (2^dim routers must fit a 32-bit id)");
    }
    let (lat, _) = checked_lattice("hypercube", LatticeShape::Hypercube, &vec![2; dim as usize], hosts_per_router)?;
    let routers = lat.num_routers() as u64;
    let h = hosts_per_router as u64;
    let radix = h + dim as u64;
    let hosts = routers * h;
    check_capacity(
        "hypercube",
        routers + hosts,
        routers * dim as u64 / 2 + hosts,
        sat_ports(routers, radix, hosts),
        radix,
    )?;

    let mut b = TopologyBuilder::new(format!("hypercube(dim={dim},hosts={hosts_per_router})"));
    b.family("hypercube").param("dim", dim).param("hosts_per_router", hosts_per_router);
    add_nodes(&lat, &mut b, radix as Port);
    let spec = LinkSpec::default();
    for r in 0..lat.num_routers() {
        for d in 0..dim {
            if r & (1 << d) == 0 {
                let port = (hosts_per_router + d + 1) as Port;
                b.connect_ports(r, port, r | (1 << d), port, spec);
            }
        }
    }
    b.build()
}

/// A HyperX (Ahn et al., SC 2009): routers on a lattice, every router linked to *every* other
/// router that differs from it in exactly one coordinate, with `trunking` parallel links per
/// such pair.
///
/// Node layout, coordinates and labels are those of the [module docs](self). Ports, after the
/// hosts on `1..=H`: dimension by dimension (0 first); within dimension `d`, the `k_d − 1`
/// peers in increasing coordinate, skipping the router's own; within a peer, its `trunking`
/// links on consecutive ports. So the link to the peer with coordinate `v` in dimension `d`,
/// trunk `t`, leaves on port
/// `H + trunking·(Σ_{e<d}(k_e − 1) + (v if v < x_d else v − 1)) + t + 1`.
/// Radix is `H + trunking·Σ_d (k_d − 1)`; dimensions of size 1 have no ports.
///
/// Counts: `Πk` routers, `trunking·Πk·Σ_d (k_d − 1)/2` router links.
///
/// ```
/// // 4x4 HyperX: each router reaches its 3 row and 3 column peers directly.
/// let t = netweave_core::topology::grid::hyperx(&[4, 4], 1, 0).unwrap();
/// assert_eq!(t.num_links(), 16 * 6 / 2);
/// ```
pub fn hyperx(dims: &[u32], trunking: u32, hosts_per_router: u32) -> Result<Topology> {
    let (lat, strides) = checked_lattice("hyperx", LatticeShape::Mesh, dims, hosts_per_router)?;
    require_at_least("hyperx trunking", trunking as u64, 1)?;
    let routers = lat.num_routers() as u64;
    let h = hosts_per_router as u64;
    let t = trunking as u64;
    let peers = dims.iter().fold(0u64, |acc, &k| acc.saturating_add(k as u64 - 1));
    let radix = h.saturating_add(t.saturating_mul(peers));
    let hosts = routers * h;
    let links = (routers.saturating_mul(peers).saturating_mul(t) / 2).saturating_add(hosts);
    check_capacity("hyperx", routers + hosts, links, sat_ports(routers, radix, hosts), radix)?;

    let mut b =
        TopologyBuilder::new(format!("hyperx({},trunking={trunking},hosts={hosts_per_router})", fmt_dims(dims)));
    b.family("hyperx")
        .param("dims", dims.to_vec())
        .param("trunking", trunking)
        .param("hosts_per_router", hosts_per_router);
    add_nodes(&lat, &mut b, radix as Port);

    // First port of each dimension's block, as an offset in peer slots.
    let mut offset = Vec::with_capacity(dims.len());
    let mut acc = 0u64;
    for &k in dims {
        offset.push(acc);
        acc += k as u64 - 1;
    }
    let port = |d: usize, own: u32, peer: u32, trunk: u32| -> Port {
        let slot = if peer < own { peer } else { peer - 1 } as u64;
        (h + t * (offset[d] + slot) + trunk as u64 + 1) as Port
    };
    let spec = LinkSpec::default();
    let mut x = vec![0u32; dims.len()];
    for r in 0..lat.num_routers() {
        for (d, (&k, &stride)) in dims.iter().zip(&strides).enumerate() {
            let own = x[d];
            for v in own + 1..k {
                let peer = r + (v - own) * stride;
                for trunk in 0..trunking {
                    b.connect_ports(r, port(d, own, v, trunk), peer, port(d, v, own, trunk), spec);
                }
            }
        }
        lat.step(&mut x);
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::NodeKind;

    fn product(dims: &[u32]) -> usize {
        dims.iter().map(|&k| k as usize).product()
    }

    fn mesh_links(dims: &[u32]) -> usize {
        let r = product(dims);
        dims.iter().map(|&k| (k as usize - 1) * (r / k as usize)).sum()
    }

    fn torus_links(dims: &[u32]) -> usize {
        product(dims) * dims.iter().filter(|&&k| k >= 2).count()
    }

    /// Router-to-router links only.
    fn router_links(t: &Topology) -> usize {
        t.links().iter().filter(|l| !t.is_host(l.a.node) && !t.is_host(l.b.node)).count()
    }

    const SHAPES: &[&[u32]] =
        &[&[4, 4], &[4, 4, 4], &[3, 5], &[16, 16, 16], &[2, 2], &[1, 5], &[7], &[2, 3, 1, 2], &[1]];

    #[test]
    fn mesh_and_torus_counts_match_formulas() {
        for &dims in SHAPES {
            for hosts in [0u32, 1, 3] {
                let r = product(dims);
                let m = mesh(dims, hosts).unwrap();
                assert_eq!(m.num_switches(), r, "{dims:?}");
                assert_eq!(m.num_hosts(), r * hosts as usize);
                assert_eq!(router_links(&m), mesh_links(dims), "mesh {dims:?}");
                assert_eq!(m.num_links(), mesh_links(dims) + r * hosts as usize);
                let t = torus(dims, hosts).unwrap();
                assert_eq!(router_links(&t), torus_links(dims), "torus {dims:?}");
                assert_eq!(t.num_links(), torus_links(dims) + r * hosts as usize);
                assert_eq!(t.family(), "torus");
                assert_eq!(m.params()["dims"], serde_json::json!(dims));
            }
        }
    }

    #[test]
    fn paper_002_mesh_and_torus_shapes() {
        // §3.6: 4x4 mesh has 24 links with degrees 2/3/4, the torus 32 with degree 4.
        let m = mesh(&[4, 4], 4).unwrap();
        assert_eq!(router_links(&m), 24);
        let mut degs: Vec<usize> = m.switches().iter().map(|&s| m.degree(s) - 4).collect();
        degs.sort();
        assert_eq!(degs.iter().filter(|&&d| d == 2).count(), 4);
        assert_eq!(degs.iter().filter(|&&d| d == 3).count(), 8);
        assert_eq!(degs.iter().filter(|&&d| d == 4).count(), 4);
        let t = torus(&[4, 4], 4).unwrap();
        assert_eq!(router_links(&t), 32);
        assert!(t.switches().iter().all(|&s| t.degree(s) == 8 && t.radix(s) == 8));
    }

    #[test]
    fn torus_is_regular_even_with_size_two() {
        for &dims in SHAPES {
            let t = torus(dims, 2).unwrap();
            let active = dims.iter().filter(|&&k| k >= 2).count();
            for &s in t.switches() {
                assert_eq!(t.degree(s), 2 + 2 * active, "{dims:?}");
            }
        }
        // 2x2: each pair joined twice (+ and − ports), 8 links in all.
        let t = torus(&[2, 2], 0).unwrap();
        assert_eq!(t.num_links(), 8);
        let between_0_1 = t.neighbors(0).iter().filter(|a| a.neighbor == 1).count();
        assert_eq!(between_0_1, 2);
    }

    #[test]
    fn router_index_layout_and_coords() {
        let t = mesh(&[3, 5], 2).unwrap();
        // id = x0 + 3*x1; router 7 is (1,2).
        assert_eq!(t.coords(7), Some(&[1i64, 2][..]));
        assert_eq!(t.label(7), "r(1,2)");
        assert_eq!(t.find_label("r(2,4)"), Some(14));
        // Hosts router-major after the 15 routers: host 15 = router 7, local 1.
        let h = t.hosts()[15];
        assert_eq!(h, 15 + 15);
        assert_eq!(t.kind(h), NodeKind::Host);
        assert_eq!(t.label(h), "h(1,2).1");
        assert_eq!(t.coords(h), Some(&[1i64, 2, 1][..]));
        assert_eq!(t.host_switch(h), Some(7));
        assert_eq!(t.neighbors(h)[0].neighbor_port, 2);
        for (i, &s) in t.switches().iter().enumerate() {
            assert_eq!(s as usize, i);
            let c = t.coords(s).unwrap();
            assert_eq!(c[0] + 3 * c[1], i as i64);
        }
    }

    #[test]
    fn plus_port_steps_up_one_coordinate() {
        for wrap in [false, true] {
            let dims = [3u32, 4, 2];
            let hp = 1u16;
            let t = if wrap { torus(&dims, hp as u32) } else { mesh(&dims, hp as u32) }.unwrap();
            for &s in t.switches() {
                let c = t.coords(s).unwrap().to_vec();
                assert_eq!(t.radix(s), hp + 6);
                for a in t.neighbors(s) {
                    if t.is_host(a.neighbor) {
                        assert!(a.port <= hp);
                        continue;
                    }
                    let d = ((a.port - hp - 1) / 2) as usize;
                    let plus = (a.port - hp - 1) % 2 == 0;
                    let nc = t.coords(a.neighbor).unwrap();
                    let k = dims[d] as i64;
                    let step = if plus { 1 } else { -1 };
                    assert_eq!(nc[d], (c[d] + step).rem_euclid(k), "wrap={wrap} {c:?} port {}", a.port);
                    if !wrap {
                        assert_eq!(nc[d], c[d] + step);
                    }
                    // + meets −, same dimension.
                    assert_eq!(a.neighbor_port, if plus { a.port + 1 } else { a.port - 1 });
                    for e in 0..3 {
                        if e != d {
                            assert_eq!(nc[e], c[e]);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn mesh_borders_leave_ports_unconnected() {
        let t = mesh(&[1, 5], 0).unwrap();
        // A line: ends have degree 1, dimension 0 ports never used.
        let degs: Vec<usize> = t.switches().iter().map(|&s| t.degree(s)).collect();
        assert_eq!(degs, vec![1, 2, 2, 2, 1]);
        assert!(t.switches().iter().all(|&s| t.out_channel(s, 1).is_none() && t.out_channel(s, 2).is_none()));
        assert_eq!(t.out_channel(0, 4), None); // − port of the first router
    }

    #[test]
    fn bad_shapes_are_rejected() {
        for dims in [&[][..], &[4, 0][..], &[0][..]] {
            assert!(mesh(dims, 1).is_err());
            assert!(torus(dims, 1).is_err());
            assert!(hyperx(dims, 1, 1).is_err());
        }
        let e = mesh(&[65536, 65536], 0).unwrap_err().to_string();
        assert!(e.contains("32-bit"), "{e}");
        let e = torus(&[2, 2], 65535).unwrap_err().to_string();
        assert!(e.contains("16-bit"), "{e}");
        assert!(!e.contains('\n'));
        // Too many nodes overall (routers fit, hosts do not).
        assert!(mesh(&[65536, 16384], 4).unwrap_err().to_string().contains("node id"));
        assert!(hypercube(0, 1).is_err());
        assert!(hypercube(32, 0).is_err());
        assert!(hyperx(&[4, 4], 0, 1).is_err());
        // Extreme values are errors, never arithmetic overflow.
        assert!(mesh(&[65535, 65535], u32::MAX).is_err());
        assert!(torus(&[1; 64], u32::MAX).is_err());
        assert!(hyperx(&[65535, 65535], u32::MAX, u32::MAX).is_err());
        assert!(hypercube(31, u32::MAX).is_err());
    }

    #[test]
    fn hypercube_links_flip_one_bit_on_matching_ports() {
        for dim in 1..=6u32 {
            let h = 2;
            let t = hypercube(dim, h).unwrap();
            let r = 1usize << dim;
            assert_eq!(t.num_switches(), r);
            assert_eq!(router_links(&t), r * dim as usize / 2);
            assert_eq!(t.num_hosts(), r * h as usize);
            for &s in t.switches() {
                assert_eq!(t.degree(s), (dim + h) as usize);
                for a in t.neighbors(s).iter().filter(|a| !t.is_host(a.neighbor)) {
                    let d = a.port as u32 - h - 1;
                    assert_eq!(a.neighbor, s ^ (1 << d));
                    assert_eq!(a.neighbor_port, a.port);
                }
            }
        }
        let t = hypercube(3, 0).unwrap();
        assert_eq!(t.label(6), "r(0,1,1)");
        assert_eq!(t.coords(6), Some(&[0i64, 1, 1][..]));
    }

    #[test]
    fn hyperx_is_all_to_all_per_dimension_with_trunking() {
        for (dims, trunk) in
            [(&[4u32, 4][..], 1u32), (&[3, 5][..], 2), (&[2, 3, 4][..], 3), (&[1, 6][..], 1), (&[5][..], 2)]
        {
            let h = 1u32;
            let t = hyperx(dims, trunk, h).unwrap();
            let r = product(dims);
            let peers: usize = dims.iter().map(|&k| k as usize - 1).sum();
            assert_eq!(t.num_switches(), r);
            assert_eq!(router_links(&t), trunk as usize * r * peers / 2, "{dims:?}");
            for &s in t.switches() {
                assert_eq!(t.degree(s), h as usize + trunk as usize * peers);
                let c = t.coords(s).unwrap().to_vec();
                let mut count = std::collections::HashMap::new();
                for a in t.neighbors(s).iter().filter(|a| !t.is_host(a.neighbor)) {
                    let nc = t.coords(a.neighbor).unwrap();
                    let diff = (0..dims.len()).filter(|&d| nc[d] != c[d]).count();
                    assert_eq!(diff, 1);
                    *count.entry(a.neighbor).or_insert(0u32) += 1;
                }
                assert_eq!(count.len(), peers);
                assert!(count.values().all(|&v| v == trunk));
            }
        }
        // Documented port formula: 4x4, H=1, T=2, router (1,2) to peer x0=3: slot 2 → ports 6, 7.
        let t = hyperx(&[4, 4], 2, 1).unwrap();
        let r = t.find_label("r(1,2)").unwrap();
        let peer = t.find_label("r(3,2)").unwrap();
        let ports: Vec<Port> = t.neighbors(r).iter().filter(|a| a.neighbor == peer).map(|a| a.port).collect();
        assert_eq!(ports, vec![6, 7]);
    }

    #[test]
    fn names_and_params_are_recorded() {
        let t = torus(&[4, 4, 4], 1).unwrap();
        assert_eq!(t.name(), "torus(4x4x4,hosts=1)");
        assert_eq!(t.params()["hosts_per_router"], serde_json::json!(1));
        let t = hyperx(&[3, 3], 2, 0).unwrap();
        assert_eq!(t.family(), "hyperx");
        assert_eq!(t.params()["trunking"], serde_json::json!(2));
        assert_eq!(hypercube(2, 0).unwrap().params()["dim"], serde_json::json!(2));
    }

    #[test]
    fn large_torus_builds() {
        let t = torus(&[16, 16, 16], 1).unwrap();
        assert_eq!(t.num_switches(), 4096);
        assert_eq!(t.num_links(), 4096 * 3 + 4096);
    }
}
