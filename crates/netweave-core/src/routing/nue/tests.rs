use super::{nue, nue_with, LayerPartition, NueParams, NueStats};
use crate::routing::{deadlock, metrics::route_metrics};
use crate::routing::{Injection, RouteOptions, RoutingTable};
use crate::topology::dragonfly::{dragonfly, GlobalArrangement};
use crate::topology::fat_tree::{fat_tree, k_ary_n_tree};
use crate::topology::grid::{hypercube, hyperx, mesh, torus};
use crate::topology::lsft::latin_square_fat_tree;
use crate::topology::random::{irregular, random_regular};
use crate::topology::{LinkSpec, Port, Topology, TopologyBuilder};

fn opts(max_vcs: u8) -> RouteOptions {
    RouteOptions { max_vcs, ..Default::default() }
}

/// Deadlock-free, every pair delivered, VC count within budget; returns the stats.
fn check_all(topo: &Topology, max_vcs: u8, params: NueParams) -> (RoutingTable, NueStats) {
    let (r, stats) = nue_with(topo, &opts(max_vcs), &params).unwrap();
    let rep = deadlock::check(topo, &r).unwrap_or_else(|e| panic!("{} vcs={max_vcs}: {e}", topo.name()));
    assert!(rep.deadlock_free, "{} vcs={max_vcs}: cycle {:?}", topo.name(), rep.cycle);
    assert!(rep.vcs_used <= max_vcs && r.vc_policy().num_vcs <= max_vcs);
    assert_eq!(r.vc_policy().num_vcs, stats.layers);
    (r, stats)
}

fn families() -> Vec<Topology> {
    let mut v = vec![
        torus(&[4, 4], 1).unwrap(),
        torus(&[8, 8], 1).unwrap(),
        torus(&[4, 4, 4], 1).unwrap(),
        mesh(&[5, 4], 2).unwrap(),
        dragonfly(4, 2, 2, None, GlobalArrangement::Relative).unwrap(),
        latin_square_fat_tree(3, false, false).unwrap(),
        fat_tree(4, 3, false).unwrap(),
    ];
    for seed in [1, 2, 3] {
        v.push(irregular(16, 4, 6, 4, seed).unwrap());
    }
    v
}

#[test]
fn deadlock_free_on_every_family_and_budget() {
    for t in families() {
        for vcs in [1u8, 2, 4, 8] {
            for partition in [LayerPartition::Clustered, LayerPartition::RoundRobin] {
                check_all(&t, vcs, NueParams { partition });
            }
        }
    }
}

#[test]
fn deadlock_free_on_random_regular_fabrics() {
    for seed in [1u64, 2, 3, 4] {
        let t = random_regular(200, 6, 2, seed).unwrap();
        for vcs in [1u8, 2, 4, 8] {
            check_all(&t, vcs, NueParams::default());
        }
    }
}

#[test]
fn more_layers_do_not_lengthen_torus_paths() {
    for t in [torus(&[4, 4], 1).unwrap(), torus(&[8, 8], 1).unwrap(), torus(&[4, 4, 4], 1).unwrap()] {
        let one = route_metrics(&t, &check_all(&t, 1, NueParams::default()).0).unwrap();
        for vcs in [2u8, 4, 8] {
            let m = route_metrics(&t, &check_all(&t, vcs, NueParams::default()).0).unwrap();
            assert!(m.avg_hops <= one.avg_hops + 1e-9, "{} {vcs} VCs: {} > {}", t.name(), m.avg_hops, one.avg_hops);
        }
    }
}

#[test]
fn trees_route_minimally_in_one_layer() {
    // A fat-tree's up/down paths never need a cycle, so nothing should fall back.
    let t = fat_tree(4, 3, false).unwrap();
    let (r, stats) = check_all(&t, 1, NueParams::default());
    assert_eq!(stats.impasses, 0);
    assert_eq!(route_metrics(&t, &r).unwrap().non_minimal_pairs, 0);
}

#[test]
fn layers_follow_the_budget_and_the_destination_count() {
    let t = torus(&[4, 4], 1).unwrap();
    let (r, s) = check_all(&t, 4, NueParams::default());
    assert_eq!((s.layers, s.destinations), (4, 16));
    let Injection::PerDestination(v) = &r.vc_policy().injection else { panic!("per-destination injection") };
    for l in 0..4u8 {
        assert_eq!(v.iter().filter(|&&x| x == l).count(), 4, "balanced layers");
    }
    assert!(r.vc_policy().transitions.is_none());
    // Two destination switches cannot fill eight layers.
    let line = mesh(&[2], 3).unwrap();
    assert_eq!(check_all(&line, 8, NueParams::default()).1.layers, 2);
}

#[test]
fn single_switch_and_hostless_fabrics() {
    let one = mesh(&[1], 3).unwrap();
    let (r, _) = check_all(&one, 1, NueParams::default());
    let mut p = Vec::new();
    r.path(&one, 0, 2, &mut p).unwrap();
    assert_eq!(p.len(), 2);
    let mut b = TopologyBuilder::new("bare");
    b.add_switch("s", 2);
    let bare = b.build().unwrap();
    assert!(nue(&bare, &opts(1)).is_ok());
}

#[test]
fn disconnected_fabric_names_its_components() {
    let mut b = TopologyBuilder::new("split");
    let s: Vec<_> = (0..4).map(|i| b.add_switch(format!("sw{i}"), 4)).collect();
    b.connect(s[0], s[1], LinkSpec::default()).unwrap();
    b.connect(s[2], s[3], LinkSpec::default()).unwrap();
    for (i, &sw) in s.iter().enumerate() {
        let h = b.add_host(format!("h{i}"));
        b.connect(h, sw, LinkSpec::default()).unwrap();
    }
    let err = nue(&b.build().unwrap(), &opts(2)).unwrap_err().to_string();
    assert!(!err.contains('\n'));
    assert!(err.contains("2 components") && err.contains("sw0, sw1") && err.contains("sw2, sw3"), "{err}");
}

#[test]
fn hostless_island_is_ignored() {
    let mut b = TopologyBuilder::new("island");
    let s: Vec<_> = (0..3).map(|i| b.add_switch(format!("sw{i}"), 4)).collect();
    b.connect(s[0], s[1], LinkSpec::default()).unwrap();
    for &sw in &s[..2] {
        let h = b.add_host(format!("h{sw}"));
        b.connect(h, sw, LinkSpec::default()).unwrap();
    }
    check_all(&b.build().unwrap(), 2, NueParams::default());
}

#[test]
fn more_families_and_every_selection_policy() {
    use crate::routing::Select;
    let topos = [
        hypercube(4, 2).unwrap(),
        hyperx(&[3, 3], 1, 2).unwrap(),
        k_ary_n_tree(3, 2).unwrap(),
        random_regular(60, 4, 3, 7).unwrap(),
        torus(&[3, 5], 3).unwrap(),
    ];
    for t in &topos {
        for select in Select::ALL {
            for vcs in [1u8, 3] {
                let o = RouteOptions { max_vcs: vcs, select, ..Default::default() };
                let r = nue(t, &o).unwrap();
                let rep = deadlock::check(t, &r).unwrap();
                assert!(rep.deadlock_free, "{} {select} vcs={vcs}", t.name());
            }
        }
    }
}

#[test]
fn selection_policy_spreads_hosts_of_a_switch() {
    use crate::routing::Select;
    // Hosts of one switch: per-destination selection gives them different next hops
    // where equally short ones exist; low-port selection does not spread them.
    let t = mesh(&[4, 4], 4).unwrap();
    let spread = |select| {
        let r = nue(&t, &RouteOptions { max_vcs: 2, select, ..Default::default() }).unwrap();
        assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
        route_metrics(&t, &r).unwrap().path_diversity
    };
    assert!(spread(Select::PerDestination) > spread(Select::LowPort));
}

#[test]
fn result_does_not_depend_on_the_thread_count() {
    let t = random_regular(80, 5, 2, 3).unwrap();
    let run = |threads| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| nue_with(&t, &opts(4), &NueParams::default()).unwrap())
    };
    let (a, sa) = run(1);
    let (b, sb) = run(3);
    assert_eq!(a.ports(), b.ports());
    assert_eq!(a.vc_policy(), b.vc_policy());
    assert_eq!(sa, sb);
}

#[test]
fn switches_with_more_than_64_neighbours() {
    // A wheel: a hub linked to 70 rim switches that also form a ring (many cycles), so
    // the hub's dependency masks span two words.
    let n = 70;
    let mut b = TopologyBuilder::new("wheel");
    let hub = b.add_switch("hub", n as Port);
    let rim: Vec<_> = (0..n).map(|i| b.add_switch(format!("r{i}"), 4)).collect();
    for i in 0..n {
        b.connect(hub, rim[i], LinkSpec::default()).unwrap();
        b.connect(rim[i], rim[(i + 1) % n], LinkSpec::default()).unwrap();
        let h = b.add_host(format!("h{i}"));
        b.connect(h, rim[i], LinkSpec::default()).unwrap();
    }
    let t = b.build().unwrap();
    for vcs in [1u8, 2] {
        check_all(&t, vcs, NueParams::default());
    }
}

#[test]
fn host_without_switch_is_an_error() {
    let mut b = TopologyBuilder::new("pair");
    let h0 = b.add_host("h0");
    let h1 = b.add_host("h1");
    b.connect(h0, h1, LinkSpec::default()).unwrap();
    let err = nue(&b.build().unwrap(), &opts(1)).unwrap_err().to_string();
    assert!(err.contains("not attached to a switch"), "{err}");
}

#[test]
fn bad_budget_is_an_error_not_a_panic() {
    let t = torus(&[3, 3], 1).unwrap();
    assert!(nue(&t, &opts(0)).is_err());
    assert!(nue(&t, &opts(17)).is_err());
}

#[test]
fn parallel_links_carry_different_destinations() {
    let mut b = TopologyBuilder::new("trunk");
    let s0 = b.add_switch("s0", 6);
    let s1 = b.add_switch("s1", 6);
    b.connect(s0, s1, LinkSpec::default()).unwrap();
    b.connect(s0, s1, LinkSpec::default()).unwrap();
    for i in 0..4 {
        let h = b.add_host(format!("h{i}"));
        b.connect(h, if i < 2 { s0 } else { s1 }, LinkSpec::default()).unwrap();
    }
    let t = b.build().unwrap();
    let (r, _) = check_all(&t, 1, NueParams::default());
    assert_ne!(r.out_port(0, 2), r.out_port(0, 3));
}
