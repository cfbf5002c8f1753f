use super::{dfsssp, dfsssp_with, lash, lash_with, sssp, Fit, LayeredParams, LayeredStats};
use crate::error::Result;
use crate::routing::select::Select;
use crate::routing::{deadlock, minhop, route, Engine};
use crate::routing::{Injection, RouteOptions, RoutingTable, VcPolicy, MAX_VCS};
use crate::topology::dragonfly::{dragonfly, GlobalArrangement};
use crate::topology::fabric::SwitchFabric;
use crate::topology::fat_tree::k_ary_n_tree;
use crate::topology::grid::{hypercube, mesh, torus};
use crate::topology::lsft::latin_square_fat_tree;
use crate::topology::random::{irregular, random_regular};
use crate::topology::{LinkSpec, Port, Topology, TopologyBuilder};

fn families() -> Vec<(&'static str, Topology)> {
    vec![
        ("torus 4x4", torus(&[4, 4], 1).unwrap()),
        ("torus 8x8", torus(&[8, 8], 1).unwrap()),
        ("torus 16x16", torus(&[16, 16], 1).unwrap()),
        ("torus 3x3x3", torus(&[3, 3, 3], 2).unwrap()),
        ("mesh 4x3", mesh(&[4, 3], 2).unwrap()),
        ("hypercube 4", hypercube(4, 1).unwrap()),
        ("random regular", random_regular(100, 4, 2, 7).unwrap()),
        ("random regular 2", random_regular(60, 5, 1, 3).unwrap()),
        ("irregular A", irregular(16, 4, 6, 4, 1).unwrap()),
        ("irregular B", irregular(16, 4, 6, 4, 2).unwrap()),
        ("lsft", latin_square_fat_tree(3, false, false).unwrap()),
        ("lsft two-sided", latin_square_fat_tree(2, true, false).unwrap()),
        ("dragonfly", dragonfly(4, 2, 2, None, GlobalArrangement::Relative).unwrap()),
        ("dragonfly abs", dragonfly(3, 1, 1, None, GlobalArrangement::Absolute).unwrap()),
        ("fat tree", k_ary_n_tree(4, 3).unwrap()),
    ]
}

fn opts(select: Select) -> RouteOptions {
    RouteOptions { max_vcs: 16, select, ..RouteOptions::default() }
}

#[test]
fn layered_engines_are_deadlock_free_everywhere() {
    for (name, t) in families() {
        for engine in [Engine::Dfsssp, Engine::Lash] {
            for select in Select::ALL {
                let r = route(&t, engine, &opts(select)).unwrap_or_else(|e| panic!("{name} {engine}: {e}"));
                let rep = deadlock::check(&t, &r).unwrap();
                assert!(rep.deadlock_free, "{name} {engine} {select}: cycle {:?}", rep.cycle);
                assert!(rep.vcs_used <= r.vc_policy().num_vcs, "{name} {engine}");
            }
            // And within the default budget of 8.
            let r = route(&t, engine, &RouteOptions::default()).unwrap_or_else(|e| panic!("{name} {engine}: {e}"));
            assert!(deadlock::check(&t, &r).unwrap().deadlock_free, "{name} {engine}");
        }
    }
}

#[test]
fn sssp_delivers_every_pair_and_is_minimal_on_a_light_fabric() {
    for (name, t) in families() {
        let r = sssp(&t, &RouteOptions::default()).unwrap();
        let mut path = Vec::new();
        for s in 0..t.num_hosts() {
            for d in 0..t.num_hosts() {
                path.clear();
                r.path(&t, s, d, &mut path).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
        assert_eq!(r.vc_policy().num_vcs, 1);
    }
    // A torus ring routed by SSSP has dependency cycles: that is dfsssp's job.
    let ring = torus(&[6], 1).unwrap();
    let r = route(&ring, Engine::Sssp, &RouteOptions::default()).unwrap();
    assert!(!deadlock::check(&ring, &r).unwrap().deadlock_free);
}

/// Two switches joined by `links` parallel links, `hosts` hosts on each.
fn trunk(links: usize, hosts: usize) -> Topology {
    let mut b = TopologyBuilder::new("trunk");
    let s0 = b.add_switch("s0", (links + hosts) as Port);
    let s1 = b.add_switch("s1", (links + hosts) as Port);
    for _ in 0..links {
        b.connect(s0, s1, LinkSpec::default()).unwrap();
    }
    for i in 0..2 * hosts {
        let h = b.add_host(format!("h{i}"));
        b.connect(h, if i < hosts { s0 } else { s1 }, LinkSpec::default()).unwrap();
    }
    b.build().unwrap()
}

#[test]
fn sssp_balances_destinations_over_parallel_links() {
    // Four destinations on s1, four trunk links: one search serves s1's hosts (as in
    // OpenSM), so its four equally light links are a tie that spreading policies split.
    let t = trunk(4, 4);
    for select in [Select::PerDestination, Select::Balanced] {
        let r = sssp(&t, &RouteOptions { select, ..RouteOptions::default() }).unwrap();
        let mut ports: Vec<Port> = (4..8).map(|d| r.out_port(0, d)).collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 4, "{select}: {ports:?}");
    }
}

#[test]
fn sssp_spreads_load_unlike_low_port_shortest_paths() {
    // On a 4x4 torus the busiest channel carries fewer routes under SSSP than under
    // low-port shortest paths (which pile onto the lowest dimensions).
    let t = torus(&[4, 4], 2).unwrap();
    let max_load = |r: &RoutingTable| {
        let mut load = vec![0u32; t.num_channels()];
        let mut path = Vec::new();
        for s in 0..t.num_hosts() {
            for d in 0..t.num_hosts() {
                path.clear();
                r.path(&t, s, d, &mut path).unwrap();
                for &c in &path {
                    load[c as usize] += 1;
                }
            }
        }
        let (h0, h1) = (t.hosts()[0], t.hosts()[1]);
        (0..t.num_channels())
            .filter(|&c| {
                let (a, b) = t.channel_ends(c as u32);
                ![h0, h1].contains(&a.node) && !t.is_host(a.node) && !t.is_host(b.node)
            })
            .map(|c| load[c])
            .max()
            .unwrap()
    };
    let balanced = max_load(&sssp(&t, &RouteOptions::default()).unwrap());
    let low = max_load(&minhop::shortest_with(&t, Select::LowPort).unwrap());
    assert!(balanced < low, "sssp max channel load {balanced}, low-port {low}");
}

#[test]
fn lash_routes_one_minimal_path_per_switch_pair() {
    for (name, t) in families() {
        for select in Select::ALL {
            let r = lash(&t, &opts(select)).unwrap();
            let graph = SwitchFabric::new(&t);
            let mut dist = vec![0; t.num_switches()];
            let mut path = Vec::new();
            for d in 0..t.num_hosts() {
                let home = t.kind_index(t.host_switch(t.hosts()[d]).unwrap());
                graph.bfs(home, &mut dist, &mut Vec::new());
                for s in 0..t.num_hosts() {
                    let from = t.kind_index(t.host_switch(t.hosts()[s]).unwrap());
                    path.clear();
                    r.path(&t, s, d, &mut path).unwrap();
                    let expected = if s == d { 0 } else { dist[from] as usize + 2 };
                    assert_eq!(path.len(), expected, "{name} {select}");
                }
                // Hosts of one switch share the tree.
                let d0 = t.neighbors(t.switches()[home]).iter().find(|a| t.is_host(a.neighbor)).unwrap();
                let d0 = t.kind_index(d0.neighbor);
                for v in (0..t.num_switches()).filter(|&v| v != home) {
                    assert_eq!(r.out_port(v, d), r.out_port(v, d0), "{name} {select}");
                }
            }
        }
        // The shortest engine's next hops towards the first host of each switch; with
        // low-port, exactly its table.
        for select in Select::ALL {
            let a = lash(&t, &opts(select)).unwrap();
            let b = minhop::shortest_with(&t, select).unwrap();
            for d in 0..t.num_hosts() {
                let home = t.host_switch(t.hosts()[d]).unwrap();
                // The switch's first host in host order.
                let d0 = t
                    .neighbors(home)
                    .iter()
                    .filter(|a| t.is_host(a.neighbor))
                    .map(|a| t.kind_index(a.neighbor))
                    .min()
                    .unwrap();
                for v in (0..t.num_switches()).filter(|&v| v != t.kind_index(home)) {
                    assert_eq!(a.out_port(v, d), b.out_port(v, d0), "{name} {select}");
                }
            }
        }
        let a = lash(&t, &opts(Select::LowPort)).unwrap();
        let b = minhop::shortest_with(&t, Select::LowPort).unwrap();
        assert_eq!(a.ports(), b.ports(), "{name}");
    }
}

#[test]
fn dfsssp_keeps_sssp_paths() {
    // With one host per switch the sssp engine's host spreading has nothing to spread.
    for (name, t) in families().into_iter().take(8).filter(|(_, t)| t.num_hosts() == t.num_switches()) {
        for select in Select::ALL {
            let a = dfsssp(&t, &opts(select)).unwrap();
            let b = sssp(&t, &opts(select)).unwrap();
            assert_eq!(a.ports(), b.ports(), "{name} {select}");
        }
    }
}

#[test]
fn trees_need_one_layer() {
    for t in [mesh(&[6], 2).unwrap(), k_ary_n_tree(2, 3).unwrap()] {
        for engine in [Engine::Dfsssp, Engine::Lash] {
            let r = route(&t, engine, &RouteOptions { max_vcs: 1, ..RouteOptions::default() }).unwrap();
            assert_eq!(r.vc_policy(), &VcPolicy::single());
            assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
        }
    }
}

#[test]
fn a_budget_below_the_layers_needed_takes_escape_routes() {
    let t = torus(&[8, 8], 1).unwrap();
    let free = LayeredParams::default();
    for (engine, with) in [("dfsssp", dfsssp_with as LayeredFn), ("lash", lash_with as LayeredFn)] {
        let (r, stats) = with(&t, &opts(Select::PerDestination), &free).unwrap();
        let needed = r.vc_policy().num_vcs;
        assert!(needed >= 2, "{engine}");
        assert_eq!((stats.layers, stats.escaped_trees), (needed, 0), "{engine}");
        // Fewer layers than the paths need: some destinations take up*/down* routes in the
        // last layer, and the result stays deadlock-free within the budget.
        for budget in 1..needed {
            let o = RouteOptions { max_vcs: budget, ..RouteOptions::default() };
            let (r, stats) = with(&t, &o, &free).unwrap();
            assert!(r.vc_policy().num_vcs <= budget, "{engine} {budget}");
            let rep = deadlock::check(&t, &r).unwrap();
            assert!(rep.deadlock_free, "{engine} {budget}: {:?}", rep.cycle);
            if budget == 1 {
                assert!(stats.escaped_trees > 0, "{engine}");
            }
        }
    }
}

type LayeredFn = fn(&Topology, &RouteOptions, &LayeredParams) -> Result<(RoutingTable, LayeredStats)>;

#[test]
fn random_regular_fabrics_route_within_a_tight_budget() {
    // Regression: a random regular fabric whose shortest paths need more layers than the
    // budget used to fail ("needs more than 2 VCs"); now it routes deadlock-free within it.
    let t = random_regular(64, 6, 2, 5).unwrap();
    for fit in [Fit::First, Fit::Best] {
        let params = LayeredParams { fit, ..LayeredParams::default() };
        for with in [dfsssp_with as LayeredFn, lash_with as LayeredFn] {
            let (_, free) = with(&t, &opts(Select::PerDestination), &params).unwrap();
            assert!(free.layers > 2 && free.escaped_trees == 0, "{free:?}");
            let o = RouteOptions { max_vcs: 2, ..RouteOptions::default() };
            let (r, stats) = with(&t, &o, &params).unwrap();
            assert_eq!(stats.layers, 2);
            assert!(stats.escaped_trees > 0);
            let rep = deadlock::check(&t, &r).unwrap();
            assert!(rep.deadlock_free && rep.vcs_used <= 2, "{:?}", rep.cycle);
        }
    }
}

#[test]
fn saturation_back_off_and_effort_bound_only_add_escapes() {
    // Trying fewer trees, or giving each less search effort, sends more destinations to
    // the escape layer; the result stays deadlock-free within the budget either way.
    let t = random_regular(64, 6, 2, 5).unwrap();
    let o = RouteOptions { max_vcs: 2, ..RouteOptions::default() };
    let exhaustive = LayeredParams { patience: 0, tree_effort: 0, ..LayeredParams::default() };
    let hasty = LayeredParams { patience: 1, ..exhaustive };
    let frugal = LayeredParams { tree_effort: 1, ..exhaustive };
    for with in [dfsssp_with as LayeredFn, lash_with as LayeredFn] {
        let (_, all) = with(&t, &o, &exhaustive).unwrap();
        for params in [hasty, frugal] {
            let (r, stats) = with(&t, &o, &params).unwrap();
            assert!(stats.escaped_trees > all.escaped_trees, "{params:?}: {stats:?} against {all:?}");
            let rep = deadlock::check(&t, &r).unwrap();
            assert!(rep.deadlock_free && rep.vcs_used <= 2, "{:?}", rep.cycle);
        }
    }
}

#[test]
fn best_fit_needs_no_more_layers_than_first_fit_for_lash() {
    // Gathering paths by shared turns packs LASH's minimal paths into fewer layers on
    // random regular fabrics (7 against 8 at 500 switches of degree 8).
    for (n, d, seed) in [(64, 6, 5), (100, 4, 7), (120, 8, 3)] {
        let t = random_regular(n, d, 1, seed).unwrap();
        let layers = |fit| {
            lash_with(&t, &opts(Select::PerDestination), &LayeredParams { fit, ..LayeredParams::default() })
                .unwrap()
                .1
                .layers
        };
        let (first, best) = (layers(Fit::First), layers(Fit::Best));
        assert!(best <= first, "{n} switches: best fit {best} layers, first fit {first}");
    }
}

#[test]
fn out_of_range_budget_is_refused() {
    let t = torus(&[4, 4], 1).unwrap();
    for max_vcs in [0, MAX_VCS + 1] {
        let o = RouteOptions { max_vcs, ..RouteOptions::default() };
        assert!(dfsssp(&t, &o).unwrap_err().to_string().contains("budget must be 1..=16"));
        assert!(lash(&t, &o).unwrap_err().to_string().contains("budget must be 1..=16"));
    }
}

#[test]
fn per_pair_vcs_follow_the_source_switch() {
    let t = torus(&[4, 4], 3).unwrap();
    let r = lash(&t, &opts(Select::PerDestination)).unwrap();
    let Injection::PerPair { num_hosts, vcs } = &r.vc_policy().injection else {
        panic!("expected per-pair injection");
    };
    assert_eq!(*num_hosts, t.num_hosts());
    // Hosts 0..3 share switch 0, so their paths and VCs towards any destination agree.
    for d in 0..t.num_hosts() {
        assert_eq!(vcs[d], vcs[t.num_hosts() + d]);
        assert_eq!(vcs[d], vcs[2 * t.num_hosts() + d]);
    }
    assert!(vcs.iter().any(|&v| v > 0));
}

#[test]
fn disconnected_fabric_names_its_components() {
    let mut b = TopologyBuilder::new("islands");
    let s: Vec<_> = (0..4).map(|i| b.add_switch(format!("s{i}"), 3)).collect();
    b.connect(s[0], s[1], LinkSpec::default()).unwrap();
    b.connect(s[2], s[3], LinkSpec::default()).unwrap();
    for (i, &sw) in s.iter().enumerate() {
        let h = b.add_host(format!("h{i}"));
        b.connect(h, sw, LinkSpec::default()).unwrap();
    }
    let t = b.build().unwrap();
    for engine in [Engine::Sssp, Engine::Dfsssp, Engine::Lash] {
        let err = route(&t, engine, &RouteOptions::default()).unwrap_err().to_string();
        assert!(err.contains("2 components") && err.contains("{s0, s1}") && err.contains("{s2, s3}"), "{err}");
    }
    // A hostless island is harmless.
    let mut b = TopologyBuilder::new("hostless island");
    let s: Vec<_> = (0..3).map(|i| b.add_switch(format!("s{i}"), 3)).collect();
    b.connect(s[0], s[1], LinkSpec::default()).unwrap();
    for (i, &sw) in s.iter().take(2).enumerate() {
        let h = b.add_host(format!("h{i}"));
        b.connect(h, sw, LinkSpec::default()).unwrap();
    }
    let t = b.build().unwrap();
    for engine in [Engine::Sssp, Engine::Dfsssp, Engine::Lash] {
        let r = route(&t, engine, &RouteOptions::default()).unwrap();
        assert!(deadlock::check(&t, &r).unwrap().deadlock_free);
    }
}

#[test]
fn degenerate_fabrics_do_not_panic() {
    let mut b = TopologyBuilder::new("one switch");
    let s = b.add_switch("s", 2);
    for i in 0..2 {
        let h = b.add_host(format!("h{i}"));
        b.connect(h, s, LinkSpec::default()).unwrap();
    }
    let one = b.build().unwrap();
    let empty = TopologyBuilder::new("empty").build().unwrap();
    let mut b = TopologyBuilder::new("host pair");
    let h0 = b.add_host("a");
    let h1 = b.add_host("b");
    b.connect(h0, h1, LinkSpec::default()).unwrap();
    let bare = b.build().unwrap();
    for engine in [Engine::Sssp, Engine::Dfsssp, Engine::Lash] {
        let r = route(&one, engine, &RouteOptions::default()).unwrap();
        assert!(deadlock::check(&one, &r).unwrap().deadlock_free);
        assert!(route(&empty, engine, &RouteOptions::default()).is_err()); // nothing to route is refused
        assert!(route(&bare, engine, &RouteOptions::default()).is_err());
    }
}

#[test]
fn deterministic() {
    let t = random_regular(40, 4, 2, 11).unwrap();
    for engine in [Engine::Sssp, Engine::Dfsssp, Engine::Lash] {
        let a = route(&t, engine, &RouteOptions::default()).unwrap();
        let b = route(&t, engine, &RouteOptions::default()).unwrap();
        assert_eq!(a.ports(), b.ports());
        assert_eq!(a.vc_policy(), b.vc_policy());
    }
}
