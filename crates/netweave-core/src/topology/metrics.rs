//! Structural metrics: counts, degrees, diameter and average distance.
//!
//! Distances are switch hops on the switch graph (hosts never forward traffic), computed by
//! bit-parallel BFS: 64 sources advance together as bits of one `u64` per switch, and batches
//! of sources run on all cores. That keeps a 32,768-router torus to a few seconds.
//!
//! ```
//! use netweave_core::topology::{metrics::stats, TopologyBuilder, LinkSpec};
//! let mut b = TopologyBuilder::new("pair");
//! let s0 = b.add_switch("s0", 2);
//! let s1 = b.add_switch("s1", 2);
//! let h0 = b.add_host("h0");
//! let h1 = b.add_host("h1");
//! b.connect(s0, s1, LinkSpec::default()).unwrap();
//! b.connect(h0, s0, LinkSpec::default()).unwrap();
//! b.connect(h1, s1, LinkSpec::default()).unwrap();
//! let s = stats(&b.build().unwrap());
//! assert_eq!(s.diameter, Some(1));
//! assert_eq!(s.host_diameter, Some(3));
//! ```

use rayon::prelude::*;
use serde::Serialize;

use super::fabric::SwitchFabric;
use super::{NodeId, Topology};

/// Summary figures of a topology, as `netweave topo info` prints them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TopologyStats {
    pub hosts: usize,
    pub switches: usize,
    /// All full-duplex links, host links included.
    pub links: usize,
    /// Links between two switches.
    pub switch_links: usize,
    /// Links with a host at one end.
    pub host_links: usize,
    /// Smallest and largest number of connected ports over switches.
    pub min_switch_degree: usize,
    pub max_switch_degree: usize,
    /// Largest number of ports (connected or not) of any switch.
    pub max_switch_radix: usize,
    /// Switch-graph diameter in switch-to-switch hops; `None` when disconnected.
    pub diameter: Option<u32>,
    /// Largest host-to-host distance in links (host links included); `None` when disconnected.
    pub host_diameter: Option<u32>,
    /// Mean switch-to-switch hops over ordered pairs of distinct switches.
    pub average_distance: Option<f64>,
    /// Whether every switch reaches every other switch.
    pub connected: bool,
    /// Why `diameter`, `host_diameter` and `average_distance` were not computed (a fabric too
    /// large for exact all-pairs distances); `None` when they were.
    pub distances_skipped: Option<String>,
}

/// Largest switch count whose all-pairs distances [`stats`] computes: the work grows with the
/// square of the switch count (a 32,768-router torus takes seconds; 4 M routers would take
/// days), so larger fabrics get their counts and connectivity only, and say why.
pub const MAX_ALL_PAIRS_SWITCHES: usize = 65_536;

/// Compute [`TopologyStats`] (exact, all pairs; distances only up to
/// [`MAX_ALL_PAIRS_SWITCHES`] switches).
pub fn stats(topo: &Topology) -> TopologyStats {
    let switch_graph = SwitchFabric::new(topo);
    let mut switch_links = 0;
    let mut host_links = 0;
    for l in topo.links() {
        if topo.is_host(l.a.node) || topo.is_host(l.b.node) {
            host_links += 1;
        } else {
            switch_links += 1;
        }
    }
    let degrees = topo.switches().iter().map(|&s| topo.degree(s));
    let mut out = TopologyStats {
        hosts: topo.num_hosts(),
        switches: topo.num_switches(),
        links: topo.num_links(),
        switch_links,
        host_links,
        min_switch_degree: degrees.clone().min().unwrap_or(0),
        max_switch_degree: degrees.max().unwrap_or(0),
        max_switch_radix: topo.switches().iter().map(|&s| topo.radix(s) as usize).max().unwrap_or(0),
        diameter: None,
        host_diameter: None,
        average_distance: None,
        connected: false,
        distances_skipped: None,
    };
    if switch_graph.len() > MAX_ALL_PAIRS_SWITCHES {
        let mut dist = vec![u32::MAX; switch_graph.len()];
        switch_graph.bfs(0, &mut dist, &mut Vec::new());
        out.connected = dist.iter().all(|&d| d != u32::MAX);
        out.distances_skipped = Some(format!(
            "distances not computed: {} switches is more than the {} whose all-pairs distances \
             can be computed in reasonable time",
            switch_graph.len(),
            MAX_ALL_PAIRS_SWITCHES
        ));
        return out;
    }
    let distances = switch_graph.all_pairs_summary();
    let n = topo.num_switches() as f64;
    out.connected = distances.unreached == 0;
    if out.connected {
        out.diameter = Some(distances.max_distance);
        out.host_diameter = host_diameter(topo, &distances);
        out.average_distance = (n > 1.0).then(|| distances.distance_sum as f64 / (n * (n - 1.0)));
    }
    out
}

/// Host diameter from switch distances: two hosts on different switches are `d + 2` links
/// apart, two on the same switch 2, two joined directly 1. Hosts count at their first switch.
fn host_diameter(topo: &Topology, d: &DistanceSummary) -> Option<u32> {
    if topo.num_hosts() < 2 {
        return None;
    }
    let mut hosts_per_switch = vec![0u32; topo.num_switches()];
    for &h in topo.hosts() {
        match topo.host_switch(h) {
            Some(s) => hosts_per_switch[topo.kind_index(s)] += 1,
            // A host that only touches other hosts: the pair is one link apart at most.
            None => return if topo.num_switches() == 0 && topo.num_hosts() == 2 { Some(1) } else { None },
        }
    }
    let busy_switches = hosts_per_switch.iter().filter(|&&c| c > 0).count();
    let same_switch = hosts_per_switch.iter().any(|&c| c > 1);
    if busy_switches > 1 {
        Some(d.max_host_distance + 2)
    } else if same_switch {
        Some(2)
    } else {
        None
    }
}

/// Hop distances from one switch to every switch (`u32::MAX` = unreachable), indexed by
/// switch index. For one-off use; loops should keep a [`SwitchFabric`] and call
/// [`SwitchFabric::bfs`].
pub fn switch_distances_from(topo: &Topology, switch_index: usize) -> Vec<u32> {
    let g = SwitchFabric::new(topo);
    let mut dist = vec![u32::MAX; g.len()];
    g.bfs(switch_index, &mut dist, &mut Vec::new());
    dist
}

/// The switch graph metrics search: the shared [`SwitchFabric`](super::fabric::SwitchFabric)
/// (this name is kept for callers written against it).
pub use super::fabric::SwitchFabric as SwitchGraph;

#[derive(Default)]
struct DistanceSummary {
    max_distance: u32,
    /// Largest distance between two switches that both carry hosts.
    max_host_distance: u32,
    distance_sum: u64,
    unreached: u64,
}

impl SwitchFabric {
    fn all_pairs_summary(&self) -> DistanceSummary {
        let n = self.len();
        let batches: Vec<usize> = (0..n.div_ceil(64)).collect();
        batches.par_iter().map(|&b| self.batch_summary(b * 64, (b * 64 + 64).min(n))).reduce(
            DistanceSummary::default,
            |a, b| DistanceSummary {
                max_distance: a.max_distance.max(b.max_distance),
                max_host_distance: a.max_host_distance.max(b.max_host_distance),
                distance_sum: a.distance_sum + b.distance_sum,
                unreached: a.unreached + b.unreached,
            },
        )
    }

    /// BFS from sources `lo..hi` (≤ 64) at once; bit `i` of a word is source `lo + i`.
    fn batch_summary(&self, lo: usize, hi: usize) -> DistanceSummary {
        let n = self.len();
        let all: u64 = if hi - lo == 64 { u64::MAX } else { (1u64 << (hi - lo)) - 1 };
        let mut host_sources = 0u64;
        let mut visited = vec![0u64; n];
        let mut frontier = vec![0u64; n];
        let mut next = vec![0u64; n];
        for s in lo..hi {
            visited[s] = 1 << (s - lo);
            frontier[s] = 1 << (s - lo);
            if self.has_hosts[s] {
                host_sources |= 1 << (s - lo);
            }
        }
        let mut out = DistanceSummary::default();
        let mut level = 0u32;
        loop {
            level += 1;
            let mut any = false;
            for v in 0..n {
                if visited[v] == all {
                    next[v] = 0;
                    continue;
                }
                let mut reach = 0u64;
                for &u in self.neighbors(v) {
                    reach |= frontier[u as usize];
                }
                let new = reach & !visited[v];
                next[v] = new;
                if new != 0 {
                    any = true;
                    visited[v] |= new;
                    out.distance_sum += level as u64 * new.count_ones() as u64;
                    out.max_distance = level;
                    if self.has_hosts[v] && new & host_sources != 0 {
                        out.max_host_distance = level;
                    }
                }
            }
            if !any {
                break;
            }
            std::mem::swap(&mut frontier, &mut next);
        }
        out.unreached = visited.iter().map(|w| (all & !w).count_ones() as u64).sum();
        out
    }
}

/// Node ids of the switches with at least one host, in switch order.
pub fn leaf_switches(topo: &Topology) -> Vec<NodeId> {
    topo.switches().iter().copied().filter(|&s| topo.neighbors(s).iter().any(|a| topo.is_host(a.neighbor))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{LinkSpec, TopologyBuilder};

    /// A ring of `n` switches with one host each, built by hand so the test needs no generator.
    fn ring(n: u32) -> Topology {
        let mut b = TopologyBuilder::new("ring");
        let sw: Vec<_> = (0..n).map(|i| b.add_switch(format!("s{i}"), 3)).collect();
        for i in 0..n {
            b.connect(sw[i as usize], sw[((i + 1) % n) as usize], LinkSpec::default()).unwrap();
            let h = b.add_host(format!("h{i}"));
            b.connect(h, sw[i as usize], LinkSpec::default()).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn too_many_switches_for_all_pairs_says_so_and_still_checks_connectivity() {
        let s = stats(&ring(MAX_ALL_PAIRS_SWITCHES as u32 + 1));
        assert!(s.connected);
        assert_eq!((s.diameter, s.average_distance), (None, None));
        assert!(s.distances_skipped.unwrap().contains("65537 switches"));
        assert_eq!(stats(&ring(5)).distances_skipped, None);
    }

    #[test]
    fn ring_distances_match_closed_form() {
        for n in [3u32, 4, 7, 70, 130] {
            let s = stats(&ring(n));
            assert_eq!(s.diameter, Some(n / 2), "n={n}");
            assert_eq!(s.host_diameter, Some(n / 2 + 2));
            // Sum of ring distances from one node: for odd n 2·Σ_{1..⌊n/2⌋} i, for even add n/2 once less.
            let half = n / 2;
            let per_source: u64 =
                if n % 2 == 1 { (half * (half + 1)) as u64 } else { (half * (half + 1) - half) as u64 };
            let expected = per_source as f64 / (n - 1) as f64;
            assert!((s.average_distance.unwrap() - expected).abs() < 1e-12, "n={n}");
            assert_eq!(s.switch_links, n as usize);
            assert_eq!(s.host_links, n as usize);
            assert!(s.connected);
        }
    }

    #[test]
    fn disconnected_graph_has_no_diameter() {
        let mut b = TopologyBuilder::new("two islands");
        let a = b.add_switch("a", 1);
        let c = b.add_switch("c", 1);
        let h = b.add_host("h");
        let g = b.add_host("g");
        b.connect(h, a, LinkSpec::default()).unwrap();
        b.connect(g, c, LinkSpec::default()).unwrap();
        let s = stats(&b.build().unwrap());
        assert!(!s.connected);
        assert_eq!(s.diameter, None);
        assert_eq!(s.average_distance, None);
    }

    #[test]
    fn bfs_helper_agrees_with_batch() {
        let t = ring(9);
        let d = switch_distances_from(&t, 0);
        assert_eq!(d, vec![0, 1, 2, 3, 4, 4, 3, 2, 1]);
        assert_eq!(leaf_switches(&t).len(), 9);
    }
}
