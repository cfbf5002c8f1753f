use proptest::prelude::*;

use super::*;
use crate::topology::ethernet::{switch_tree, TreeLevel, GIGABIT_LAN};
use crate::topology::{LinkSpec, TopologyBuilder};

const TEN_GIG: LinkSpec = LinkSpec { bandwidth_gbps: 10.0, latency_ns: 5_000.0 };

/// Every phase a partial permutation whose flows fit every logical link, every ordered
/// pair exactly once.
fn assert_valid(topo: &Topology, hosts: &[u32], plan: &TreePhased) {
    let paths = PathTable::new(topo).unwrap();
    let job = Job::new(&paths, hosts);
    let n = hosts.len();
    let mut seen = vec![false; n * n];
    for (p, phase) in plan.phases.iter().enumerate() {
        let mut ph = Phases::new(n, paths.num_dir_links(), 1);
        for &(s, d) in phase {
            assert!(ph.fits(&job, 0, s, d), "phase {p}: {s} -> {d} contends");
            ph.place(&job, 0, s, d);
            assert!(s != d && !std::mem::replace(&mut seen[s as usize * n + d as usize], true));
        }
    }
    assert_eq!(seen.iter().filter(|&&x| x).count(), n * (n - 1), "every pair once");
}

fn ratio(topo: &Topology, hosts: &[u32]) -> f64 {
    let plan = TreePhased::new(topo, hosts).unwrap();
    assert_valid(topo, hosts, &plan);
    plan.phases.len() as f64 / plan.lower_bound_phases as f64
}

fn all(topo: &Topology) -> Vec<u32> {
    (0..topo.num_hosts() as u32).collect()
}

#[test]
fn the_benchmark_trees_meet_the_bound() {
    let two_by_14 = switch_tree(&[TreeLevel::new(2, TEN_GIG)], 14, GIGABIT_LAN).unwrap();
    let four_by_16 = switch_tree(&[TreeLevel::new(4, TEN_GIG)], 16, GIGABIT_LAN).unwrap();
    let three_level = switch_tree(&[TreeLevel::new(2, TEN_GIG), TreeLevel::new(3, TEN_GIG)], 8, GIGABIT_LAN).unwrap();
    let uneven =
        switch_tree(&[TreeLevel::new(3, GIGABIT_LAN), TreeLevel::new(2, GIGABIT_LAN)], 5, GIGABIT_LAN).unwrap();
    // Host-port-bound (2 x 14, 27 phases) and trunk-bound (4 x 16, 77) alike.
    for (name, t) in [("2x14", &two_by_14), ("4x16", &four_by_16), ("3-level", &three_level), ("3,2x5", &uneven)] {
        let r = ratio(t, &all(t));
        eprintln!("tree-phased {name}: {r:.3} x the bound in phases");
        assert!(r <= 1.05, "{name}: {r:.3} x the bound in phases");
    }
}

#[test]
fn a_host_subset_and_one_host_jobs() {
    let t = switch_tree(&[TreeLevel::new(4, TEN_GIG)], 16, GIGABIT_LAN).unwrap();
    let subset: Vec<u32> = (0..64).filter(|h| h % 3 != 1).collect();
    let r = ratio(&t, &subset);
    eprintln!("tree-phased 4x16 subset: {r:.3} x the bound in phases");
    assert!(r <= 1.05);
    let one = TreePhased::new(&t, &[5]).unwrap_err().to_string();
    assert!(one.contains("'h5'"), "{one}");
    assert!(TreePhased::new(&t, &[5, 5]).unwrap_err().to_string().contains("twice"));
}

/// A random tree: 1–7 switches joined at random by 1 or 10 Gbit/s links, some bonded (two
/// parallel cables), 2–6 hosts on random switches at 1 Gbit/s, a random subset in the job.
fn random_tree(seed: u64) -> (Topology, Vec<u32>) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let switches = rng.gen_range(1..=7);
    let mut b = TopologyBuilder::new("random tree");
    let sw: Vec<NodeId> = (0..switches).map(|s| b.add_switch(format!("s{s}"), 64)).collect();
    for s in 1..switches {
        let parent = sw[rng.gen_range(0..s)];
        let spec = if rng.gen_bool(0.5) { GIGABIT_LAN } else { TEN_GIG };
        b.connect(sw[s], parent, spec).unwrap();
        if rng.gen_bool(0.2) {
            b.connect(sw[s], parent, spec).unwrap();
        }
    }
    let mut hosts = 0;
    for &switch in &sw {
        for _ in 0..rng.gen_range(0..=6) {
            let h = b.add_host(format!("h{hosts}"));
            b.connect(h, switch, GIGABIT_LAN).unwrap();
            hosts += 1;
        }
    }
    if hosts < 2 {
        for _ in 0..2 {
            let h = b.add_host(format!("h{hosts}"));
            b.connect(h, sw[0], GIGABIT_LAN).unwrap();
            hosts += 1;
        }
    }
    let topo = b.build().unwrap();
    let mut job: Vec<u32> = (0..hosts).filter(|_| rng.gen_bool(0.8)).collect();
    if job.len() < 2 {
        job = (0..hosts).collect();
    }
    (topo, job)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn random_trees_are_contention_free_and_near_the_bound(seed: u64) {
        let (topo, job) = random_tree(seed);
        // Bonded and mixed-speed trunks, host subsets: the target holds on every one.
        let r = ratio(&topo, &job);
        prop_assert!(r <= 1.05, "seed {seed}: {r:.3} x the bound");
    }
}

/// The construction of `uniform.rs` alone: `None` when it does not close, else its phases
/// (checked valid and exactly at the bound).
fn uniform_only(topo: &Topology, hosts: &[u32]) -> Option<usize> {
    let paths = PathTable::new(topo).unwrap();
    let job = Job::new(&paths, hosts);
    let lower = job.lower_bound();
    let (_, phases) = uniform::phases(topo, &job, lower)?;
    let plan = TreePhased { phases, lower_bound_phases: lower, root: String::new() };
    assert_valid(topo, hosts, &plan);
    assert_eq!(plan.phases.len(), lower, "the equal-subtree construction lands on the bound");
    Some(plan.phases.len())
}

#[test]
fn equal_subtrees_reach_the_bound_by_construction() {
    let four_by_16 = switch_tree(&[TreeLevel::new(4, TEN_GIG)], 16, GIGABIT_LAN).unwrap();
    let sixteen_by_16 = switch_tree(&[TreeLevel::new(16, TEN_GIG)], 16, GIGABIT_LAN).unwrap();
    let three_level = switch_tree(&[TreeLevel::new(2, TEN_GIG), TreeLevel::new(3, TEN_GIG)], 8, GIGABIT_LAN).unwrap();
    let gigabit_trunks = switch_tree(&[TreeLevel::new(5, GIGABIT_LAN)], 6, GIGABIT_LAN).unwrap();
    let non_blocking = switch_tree(&[TreeLevel::new(6, TEN_GIG)], 8, GIGABIT_LAN).unwrap();
    for (name, t, bound) in [
        ("4x16", &four_by_16, 77),
        ("16x16", &sixteen_by_16, 384),
        ("3-level", &three_level, 58),
        ("5x6 1G trunks", &gigabit_trunks, 144),
        ("6x8 host-bound", &non_blocking, 47),
    ] {
        assert_eq!(uniform_only(t, &all(t)), Some(bound), "{name}");
        // And the schedule the catalogue builds is that one.
        let plan = TreePhased::new(t, &all(t)).unwrap();
        assert_eq!(plan.phases.len(), bound, "{name}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Equal subtrees of 1–12 hosts (one or two switch levels, 1, 4 or 10 Gbit/s trunks,
    /// some bonded): the whole schedule is contention-free and near the bound, and whenever the
    /// equal-subtree construction closes it is valid and exactly at the bound.
    #[test]
    fn equal_subtrees_are_at_the_bound_when_the_construction_closes(
        k in 2u32..=5, lower_fanout in 1u32..=3, m in 1u32..=12, speed in 0usize..3, bonded: bool,
    ) {
        let gbps = [1.0, 4.0, 10.0][speed];
        let trunk = LinkSpec { bandwidth_gbps: gbps, latency_ns: 5_000.0 };
        let levels = if lower_fanout == 1 { vec![TreeLevel::new(k, trunk)] } else {
            vec![TreeLevel::new(k, trunk), TreeLevel::new(lower_fanout, trunk)]
        };
        let t = switch_tree(&levels, m, GIGABIT_LAN).unwrap();
        let t = if bonded { bond_trunks(&t) } else { t };
        let hosts = all(&t);
        uniform_only(&t, &hosts);
        let r = ratio(&t, &hosts);
        prop_assert!(r <= 1.05, "{r:.3} x the bound");
    }
}

/// `topo` with every switch-to-switch link doubled (two parallel cables).
fn bond_trunks(topo: &Topology) -> Topology {
    let mut b = TopologyBuilder::new("bonded tree");
    let ids: Vec<NodeId> = (0..topo.num_nodes() as NodeId)
        .map(|v| if topo.is_host(v) { b.add_host(topo.label(v)) } else { b.add_switch(topo.label(v), 256) })
        .collect();
    for u in 0..topo.num_nodes() as NodeId {
        for a in topo.neighbors(u) {
            if u < a.neighbor {
                let spec = topo.link(Topology::channel_link(a.channel)).spec;
                b.connect(ids[u as usize], ids[a.neighbor as usize], spec).unwrap();
                if !topo.is_host(u) && !topo.is_host(a.neighbor) {
                    b.connect(ids[u as usize], ids[a.neighbor as usize], spec).unwrap();
                }
            }
        }
    }
    b.build().unwrap()
}
