//! Dimension-order (e-cube) routing on meshes, tori and hypercubes.
//!
//! A packet corrects its coordinates one dimension at a time, **dimension 0 first, then 1, 2,
//! …** (the order of [`grid`](crate::topology::grid)'s `dims` list, i.e. the fastest-varying
//! router index digit first), and never returns to a finished dimension. On a mesh or a
//! hypercube that order alone forbids every cyclic channel dependency, so one VC suffices.
//!
//! On a torus each dimension is a ring. The packet takes the **shorter direction** around the
//! ring; when both are equally short (a ring of even size k and a distance of exactly k/2) it
//! is a tie and [`RouteOptions::select`] picks between the `+` and the `−` port (`low-port`
//! always takes `+`; `per-destination` alternates over the hosts of the destination router).
//! Only the first hop of a dimension can be a tie — one hop later the rest is strictly
//! shorter in the chosen direction — so a destination-based table expresses it. A ring
//! of size 2 joins its two routers by two parallel links (the `+` and the `−` port); both
//! directions are one hop, always a tie, so the selection policy also spreads traffic over
//! the two links.
//!
//! Rings of 3 or more routers are broken with a **dateline** on two VCs: a packet travels on
//! VC 0 until it crosses the ring's wrap-around link (between coordinate k−1 and 0, in either
//! direction) and on VC 1 afterwards, and is reset to VC 0 when it turns into the next
//! dimension. In [`VcTransitions`] terms: at every router, leaving on a wrap link is
//! `Set(1)`; leaving on any other port of dimension d after arriving from a host or from
//! another dimension is `Set(0)`; continuing straight along dimension d is `Keep`. Minimal
//! routes never cross the same wrap link twice, so each VC of a ring carries an acyclic set of
//! dependencies. Rings of size 1 or 2 need no dateline (a packet takes at most one hop in
//! them), so a torus whose dimensions are all ≤ 2 routes on one VC.
//!
//! Only topologies whose family is `"mesh"`, `"torus"` or `"hypercube"` are accepted — the
//! generators of [`grid`](crate::topology::grid), or files that kept their family and
//! parameters (JSON, DOT). The engine computes ports from the lattice layout and then checks
//! every router's links against it, so an edited file that no longer matches its parameters is
//! refused with the router and port that disagree. Topologies that merely carry coordinates
//! (fat-trees, HyperX, file imports without a family) are refused: coordinates alone do not
//! say which port goes where.
//!
//! ```
//! use netweave_core::topology::grid::torus;
//! use netweave_core::routing::{deadlock, route, Engine, RouteOptions};
//! let t = torus(&[4, 4], 1).unwrap();
//! let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
//! assert_eq!(r.vc_policy().num_vcs, 2);
//! assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
//! ```

use crate::error::{NetweaveError, Result};
use crate::topology::structure::{Lattice, LatticeShape as Shape};
use crate::topology::{Port, Topology};

use super::minhop::hosts_by_switch;
use super::select::Selector;
use super::{Injection, RouteOptions, RoutingTable, VcChange, VcPolicy, VcTransitions};

/// The lattice the topology is ([`Topology::lattice`], the one check), errors prefixed `dor: `.
fn checked_lattice(topo: &Topology) -> Result<&Lattice> {
    topo.lattice().map_err(|e| NetweaveError::InvalidParameter(format!("dor: {e}")))
}

/// VCs the routing needs: 2 on a torus with a ring of 3 or more routers, else 1.
fn vcs_needed(lat: &Lattice) -> u8 {
    if lat.shape == Shape::Torus && lat.dims.iter().any(|&k| k >= 3) {
        2
    } else {
        1
    }
}

/// Dimension-order routing (e-cube) on a mesh, torus or hypercube; dateline VCs on tori.
///
/// Dimension 0 is corrected first. Mesh and hypercube: 1 VC. Torus: shortest direction per
/// ring (ties chosen by `options.select`), 2 VCs with a dateline per ring of ≥ 3 routers (see
/// the [module docs](self)). Errors, in one line, for any other family ("dor needs a mesh,
/// torus or hypercube; this is fat_tree"), for a topology that does not match its recorded
/// parameters, and for a torus when `options.max_vcs` is 1.
pub fn dimension_order(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> {
    let lat = checked_lattice(topo)?;
    let num_vcs = vcs_needed(lat);
    if num_vcs > options.max_vcs {
        return crate::invalid!(
            "dor needs {num_vcs} VCs on this torus (a dateline per ring of 3 or more routers), the budget is {}",
            options.max_vcs
        );
    }
    let n = lat.dims.len();
    let routers = lat.num_routers() as usize;
    let coords = lat.coords();
    let by_switch = hosts_by_switch(topo)?;

    let mut table = RoutingTable::new(topo, "dor");
    let mut selector = Selector::new(topo, options.select);
    let mut eject: Vec<Port> = Vec::new();
    for (t, dests) in by_switch.iter().enumerate() {
        if dests.is_empty() {
            continue;
        }
        let target = topo.switches()[t];
        eject.clear();
        for &d in dests {
            let host = topo.hosts()[d];
            // hosts_by_switch found the host among the target's neighbours, so this exists.
            let port = topo.neighbors(target).iter().find(|a| a.neighbor == host).map_or(0, |a| a.port);
            eject.push(port);
        }
        let xt = &coords[t * n..(t + 1) * n];
        for s in 0..routers {
            if s == t {
                for (&d, &port) in dests.iter().zip(&eject) {
                    selector.record(s, port);
                    table.set_out_port(s, d, port);
                }
                continue;
            }
            let xs = &coords[s * n..(s + 1) * n];
            // Distinct routers differ in some coordinate; the first one is the dimension to fix.
            let Some(d) = (0..n).find(|&d| xs[d] != xt[d]) else { continue };
            let (first, tie) = match lat.shape {
                Shape::Mesh => (lat.port(d, xt[d] > xs[d]), None),
                Shape::Hypercube => (lat.port(d, true), None),
                Shape::Torus => {
                    let k = lat.dims[d] as u64;
                    let forward = (xt[d] as u64 + k - xs[d] as u64) % k;
                    let backward = k - forward;
                    if forward < backward {
                        (lat.port(d, true), None)
                    } else if backward < forward {
                        (lat.port(d, false), None)
                    } else {
                        (lat.port(d, true), Some(lat.port(d, false)))
                    }
                }
            };
            for (local, &d) in dests.iter().enumerate() {
                let port = match tie {
                    None => {
                        selector.record(s, first);
                        first
                    }
                    Some(second) => selector.choose(s, local, &[first, second]),
                };
                table.set_out_port(s, d, port);
            }
        }
    }

    if num_vcs > 1 {
        table.set_vc_policy(VcPolicy {
            num_vcs,
            injection: Injection::Zero,
            transitions: Some(dateline_transitions(topo, lat, &coords)),
        });
    }
    Ok(table)
}

/// The dateline VC changes of a torus (module docs): `Set(1)` onto a wrap link of a ring of
/// ≥ 3 routers, `Set(0)` when entering a dimension from a host or another dimension, `Keep`
/// along a dimension.
fn dateline_transitions(topo: &Topology, lat: &Lattice, coords: &[u32]) -> VcTransitions {
    let n = lat.dims.len();
    let mut tr = VcTransitions::new(topo);
    for s in 0..lat.num_routers() as usize {
        let node = topo.switches()[s];
        let x = &coords[s * n..(s + 1) * n];
        for (d, &k) in lat.dims.iter().enumerate() {
            if k < 2 {
                continue;
            }
            for plus in [true, false] {
                let out = lat.port(d, plus);
                let wrap = k >= 3 && if plus { x[d] + 1 == k } else { x[d] == 0 };
                for a in topo.neighbors(node) {
                    let change = if wrap {
                        VcChange::Set(1)
                    } else if lat.dim_of_port(a.port).map(|(dim, _)| dim) != Some(d) {
                        VcChange::Set(0)
                    } else {
                        VcChange::Keep
                    };
                    if change != VcChange::Keep {
                        tr.set(s, a.port, out, change);
                    }
                }
            }
        }
    }
    tr
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{deadlock, route, Engine, Hop, Select};
    use crate::topology::fabric::SwitchFabric;
    use crate::topology::fat_tree::fat_tree;
    use crate::topology::grid::{hypercube, hyperx, mesh, torus};
    use crate::topology::lsft::latin_square_fat_tree;
    use crate::topology::random::random_regular;
    use crate::topology::{LinkSpec, TopologyBuilder};

    fn opts(select: Select, max_vcs: u8) -> RouteOptions {
        RouteOptions { max_vcs, select, ..RouteOptions::default() }
    }

    /// Walk every pair: minimal (switch hops = BFS distance), dimensions visited in
    /// non-decreasing order, never more VCs than declared. Returns the highest VC seen + 1.
    fn check_routes(t: &Topology, r: &RoutingTable) -> u8 {
        let g = SwitchFabric::new(t);
        let mut dist = vec![u32::MAX; t.num_switches()];
        let mut queue = Vec::new();
        let mut hops: Vec<Hop> = Vec::new();
        let mut max_vc = 0;
        for dst in 0..t.num_hosts() {
            let ds = t.kind_index(t.host_switch(t.hosts()[dst]).unwrap());
            g.bfs(ds, &mut dist, &mut queue);
            for src in 0..t.num_hosts() {
                if src == dst {
                    continue;
                }
                hops.clear();
                r.hops(t, src, dst, &mut hops).unwrap();
                let ss = t.kind_index(t.host_switch(t.hosts()[src]).unwrap());
                assert_eq!(hops.len() as u32, dist[ss] + 2, "{src}->{dst} not minimal");
                let mut last_dim = 0usize;
                for h in &hops[1..hops.len() - 1] {
                    let (a, b) = t.channel_ends(h.channel);
                    let (ca, cb) = (t.coords(a.node).unwrap(), t.coords(b.node).unwrap());
                    let d = (0..ca.len()).find(|&d| ca[d] != cb[d]).unwrap();
                    assert!(d >= last_dim, "{src}->{dst}: dimension {d} after {last_dim}");
                    last_dim = d;
                    max_vc = max_vc.max(h.vc);
                }
            }
        }
        max_vc + 1
    }

    #[test]
    fn meshes_are_minimal_ordered_and_deadlock_free_on_one_vc() {
        for (dims, h) in
            [(&[4u32, 4][..], 2u32), (&[3, 5, 2][..], 1), (&[7][..], 1), (&[1, 4][..], 1), (&[2, 2, 2, 2][..], 1)]
        {
            let t = mesh(dims, h).unwrap();
            for select in Select::ALL {
                let r = dimension_order(&t, &opts(select, 1)).unwrap();
                assert_eq!(r.vc_policy().num_vcs, 1);
                assert_eq!(check_routes(&t, &r), 1, "{dims:?}");
                let rep = deadlock::check(&t, &r).unwrap();
                assert!(rep.deadlock_free, "mesh {dims:?}: {:?}", rep.cycle);
                assert_eq!(rep.vcs_used, 1);
            }
        }
    }

    #[test]
    fn tori_are_minimal_and_deadlock_free_on_two_vcs() {
        for (dims, h) in [
            (&[4u32, 4][..], 1u32),
            (&[5, 3][..], 2),
            (&[3, 3, 3][..], 1),
            (&[6][..], 2),
            (&[5][..], 1),
            (&[2, 3][..], 2),
            (&[4, 1, 3][..], 1),
            (&[8, 2][..], 1),
        ] {
            let t = torus(dims, h).unwrap();
            for select in Select::ALL {
                let r = dimension_order(&t, &opts(select, 8)).unwrap();
                assert_eq!(r.vc_policy().num_vcs, 2);
                assert_eq!(check_routes(&t, &r), 2, "{dims:?}: the dateline VC is used");
                let rep = deadlock::check(&t, &r).unwrap();
                assert!(rep.deadlock_free, "torus {dims:?} {select}: {:?}", rep.cycle);
                assert_eq!(rep.vcs_used, 2);
            }
        }
    }

    #[test]
    fn shortest_paths_on_the_same_tori_deadlock_but_dor_does_not() {
        // (Rings of 3 are no contrast: a shortest path takes at most one hop per ring there.)
        for dims in [&[4u32, 4][..], &[5][..], &[5, 5][..], &[6, 3][..], &[4, 4, 4][..]] {
            let t = torus(dims, 1).unwrap();
            let sp = route(&t, Engine::Shortest, &RouteOptions::default()).unwrap();
            let rep = deadlock::check(&t, &sp).unwrap();
            assert!(!rep.deadlock_free && !rep.cycle.is_empty(), "{dims:?}");
            assert_eq!(rep.vcs_used, 1);
            let dor = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
            assert!(deadlock::require_deadlock_free(&t, &dor).is_ok());
        }
    }

    #[test]
    fn small_rings_need_no_dateline() {
        for dims in [&[2u32, 2][..], &[2][..], &[2, 1, 2][..]] {
            let t = torus(dims, 2).unwrap();
            let r = dimension_order(&t, &opts(Select::PerDestination, 1)).unwrap();
            assert_eq!(r.vc_policy().num_vcs, 1);
            assert!(r.vc_policy().transitions.is_none());
            assert_eq!(check_routes(&t, &r), 1);
            assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
        }
    }

    #[test]
    fn one_vc_budget_on_a_torus_is_refused() {
        let t = torus(&[4, 4], 1).unwrap();
        let e = dimension_order(&t, &opts(Select::PerDestination, 1)).unwrap_err().to_string();
        assert_eq!(e, "dor needs 2 VCs on this torus (a dateline per ring of 3 or more routers), the budget is 1");
        assert!(dimension_order(&t, &opts(Select::PerDestination, 2)).is_ok());
    }

    #[test]
    fn dateline_switches_vc_on_the_wrap_link_and_resets_per_dimension() {
        // 5x5 torus, 1 host per router. From (4,3) to (1,0): + in dim 0 starts on the wrap
        // (4→0→1), then + in dim 1 (3→4→0) crosses it again after a reset.
        let t = torus(&[5, 5], 1).unwrap();
        let r = dimension_order(&t, &RouteOptions::default()).unwrap();
        let src = 4 + 5 * 3;
        let dst = 1;
        let mut hops = Vec::new();
        r.hops(&t, src, dst, &mut hops).unwrap();
        let vcs: Vec<u8> = hops.iter().map(|h| h.vc).collect();
        // host, 4→0 wrap (vc1), 0→1 (vc1), then dim 1: 3→4 (reset, vc0), 4→0 wrap (vc1), host.
        assert_eq!(vcs, vec![0, 1, 1, 0, 1, 1]);
        // The − direction: (1,0) to (4,0) is 2 hops backwards through the wrap 0→4.
        hops.clear();
        r.hops(&t, 1, 4, &mut hops).unwrap();
        let vcs: Vec<u8> = hops.iter().map(|h| h.vc).collect();
        assert_eq!(vcs, vec![0, 0, 1, 1]);
        let lab: Vec<&str> = hops[1..3].iter().map(|h| t.label(t.channel_ends(h.channel).1.node)).collect();
        assert_eq!(lab, ["r(0,0)", "r(4,0)"]);
    }

    #[test]
    fn ties_follow_the_selection_policy() {
        // Ring of 4, two hosts per router: router 0 → router 2 is a tie.
        let t = torus(&[4], 2).unwrap();
        let plus = 3; // H + 1
        let minus = 4;
        let low = dimension_order(&t, &opts(Select::LowPort, 8)).unwrap();
        assert_eq!((low.out_port(0, 4), low.out_port(0, 5)), (plus, plus));
        let per = dimension_order(&t, &opts(Select::PerDestination, 8)).unwrap();
        assert_eq!((per.out_port(0, 4), per.out_port(0, 5)), (plus, minus));
        // Not a tie: router 0 → router 1 is + whatever the policy.
        assert_eq!((per.out_port(0, 2), per.out_port(0, 3)), (plus, plus));
        // Size-2 ring: both parallel links are used.
        let t = torus(&[2], 2).unwrap();
        let per = dimension_order(&t, &opts(Select::PerDestination, 8)).unwrap();
        assert_eq!((per.out_port(0, 2), per.out_port(0, 3)), (plus, minus));
        let bal = dimension_order(&t, &opts(Select::Balanced, 8)).unwrap();
        assert_ne!(bal.out_port(0, 2), bal.out_port(0, 3));
    }

    #[test]
    fn hypercubes_route_bit_by_bit() {
        for dim in 1..=5 {
            let t = hypercube(dim, 2).unwrap();
            let r = dimension_order(&t, &opts(Select::PerDestination, 1)).unwrap();
            assert_eq!(check_routes(&t, &r), 1);
            assert!(deadlock::check(&t, &r).unwrap().deadlock_free, "dim {dim}");
        }
        // e-cube: from router 0 to router 6 (bits 1 and 2), the first hop fixes bit 1.
        let t = hypercube(3, 1).unwrap();
        let r = dimension_order(&t, &RouteOptions::default()).unwrap();
        assert_eq!(r.out_port(0, 6), 1 + 1 + 1);
    }

    #[test]
    fn other_families_are_refused_in_one_line() {
        let topos = [
            fat_tree(3, 2, false).unwrap(),
            random_regular(8, 3, 1, 1).unwrap(),
            latin_square_fat_tree(2, false, false).unwrap(),
            hyperx(&[3, 3], 1, 1).unwrap(),
        ];
        for t in &topos {
            let e = dimension_order(t, &RouteOptions::default()).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("dor: '{}' is not a mesh, torus or hypercube (its family is {})", t.name(), t.family())
            );
        }
        let mut b = TopologyBuilder::new("x");
        b.add_switch("s", 2);
        let e = dimension_order(&b.build().unwrap(), &RouteOptions::default()).unwrap_err().to_string();
        assert_eq!(e, "dor: 'x' is not a mesh, torus or hypercube (its family is custom)");
    }

    #[test]
    fn topologies_that_do_not_match_their_parameters_are_refused() {
        // Claims to be a 3x3 mesh but has no links.
        let mut b = TopologyBuilder::new("fake");
        b.family("mesh").param("dims", vec![3u32, 3]).param("hosts_per_router", 0u32);
        for i in 0..9 {
            b.add_switch(format!("s{i}"), 4);
        }
        let e = dimension_order(&b.clone().build().unwrap(), &RouteOptions::default()).unwrap_err().to_string();
        assert!(e.starts_with("dor: 'fake' is not the mesh its parameters describe: router s0 port 1"), "{e}");
        assert!(!e.contains('\n'));
        // Wrong switch count, missing or malformed parameters.
        let mut b2 = b.clone();
        b2.param("dims", vec![4u32, 4]);
        assert!(dimension_order(&b2.build().unwrap(), &RouteOptions::default())
            .unwrap_err()
            .to_string()
            .contains("16 routers"));
        let mut b3 = b.clone();
        b3.param("dims", "3x3");
        assert!(dimension_order(&b3.build().unwrap(), &RouteOptions::default())
            .unwrap_err()
            .to_string()
            .contains("'dims'"));
        let mut b4 = TopologyBuilder::new("cube");
        b4.family("hypercube").param("hosts_per_router", 1u32);
        assert!(dimension_order(&b4.build().unwrap(), &RouteOptions::default())
            .unwrap_err()
            .to_string()
            .contains("'dim'"));
        // A torus missing its wrap links (a mesh relabelled as a torus).
        let m = mesh(&[3, 3], 1).unwrap();
        let mut b5 = m.to_builder();
        b5.family("torus");
        let e = dimension_order(&b5.build().unwrap(), &RouteOptions::default()).unwrap_err().to_string();
        assert!(e.contains("router r(0,0) port 3 should reach r(2,0) (dimension 0, - direction)"), "{e}");
        // A real mesh of 16 switches with host links on extra wires still works.
        let extra = mesh(&[4, 4], 1).unwrap();
        let mut b6 = extra.to_builder();
        let s = 5;
        let h = b6.add_host("extra");
        b6.ensure_radix(s, 6);
        b6.connect_ports(h, 1, s, 6, LinkSpec::default());
        let t6 = b6.build().unwrap();
        let r = dimension_order(&t6, &RouteOptions::default()).unwrap();
        check_routes(&t6, &r);
    }

    #[test]
    fn switch_only_lattices_give_empty_tables() {
        let t = torus(&[3, 3], 0).unwrap();
        let r = dimension_order(&t, &RouteOptions::default()).unwrap();
        assert_eq!(r.num_hosts(), 0);
    }
}
