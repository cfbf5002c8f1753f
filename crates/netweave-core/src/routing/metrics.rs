//! Route metrics: path lengths, minimality, path diversity and per-channel path counts of
//! all-to-all (a pattern's own counts are evaluation: `analysis::pattern_channel_load`).
//!
//! Hops are switch-to-switch links; a pair is non-minimal when its routed hops exceed the
//! switch-graph distance between its switches.

use std::collections::HashMap;

use rayon::prelude::*;
use serde::Serialize;

use crate::error::Result;
use crate::topology::fabric::SwitchFabric;
use crate::topology::Topology;

use super::{Hop, RoutingTable};

/// Summary of a routing over all ordered pairs of distinct hosts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteMetrics {
    pub pairs: u64,
    pub avg_hops: f64,
    pub max_hops: u32,
    /// Pairs routed over `i` switch-to-switch links, at index `i` (`0..=max_hops`).
    pub hops_histogram: Vec<u64>,
    pub non_minimal_pairs: u64,
    /// Highest VC used by any route, plus one.
    pub vcs_used: u8,
    /// Mean number of distinct switch-level paths used between two switches that carry hosts.
    pub path_diversity: f64,
    /// Routes per switch-to-switch channel for all-to-all: largest and mean.
    pub max_channel_paths: u32,
    pub mean_channel_paths: f64,
}

/// Paths of a pattern per channel: largest and mean over switch-to-switch channels.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChannelLoad {
    pub max_channel_paths: u32,
    pub mean_channel_paths: f64,
}

#[derive(Default)]
struct Partial {
    pairs: u64,
    hop_sum: u64,
    max_hops: u32,
    hops_histogram: Vec<u64>,
    non_minimal: u64,
    max_vc: u8,
    channel_paths: Vec<u32>,
    distinct_paths: u64,
    switch_pairs: u64,
}

/// Measure `routes` on `topo` over all ordered host pairs.
pub fn route_metrics(topo: &Topology, routes: &RoutingTable) -> Result<RouteMetrics> {
    routes.check_fits(topo)?;
    let graph = SwitchFabric::new(topo);
    let host_switch: Vec<usize> =
        topo.hosts().iter().map(|&h| topo.host_switch(h).map_or(usize::MAX, |s| topo.kind_index(s))).collect();
    let mut by_switch: Vec<Vec<usize>> = vec![Vec::new(); topo.num_switches()];
    for (h, &s) in host_switch.iter().enumerate() {
        if s != usize::MAX {
            by_switch[s].push(h);
        }
    }
    let inter_switch: Vec<bool> = (0..topo.num_channels() as u32)
        .map(|c| {
            let (a, b) = topo.channel_ends(c);
            !topo.is_host(a.node) && !topo.is_host(b.node)
        })
        .collect();
    // One source switch per task: its BFS gives the minimal distances of all its pairs.
    let partials: Vec<Result<Partial>> = (0..topo.num_switches())
        .into_par_iter()
        .filter(|&s| !by_switch[s].is_empty())
        .map(|s| {
            let mut p = Partial { channel_paths: vec![0; topo.num_channels()], ..Default::default() };
            let mut dist = vec![u32::MAX; graph.len()];
            graph.bfs(s, &mut dist, &mut Vec::new());
            let mut hops: Vec<Hop> = Vec::new();
            let mut distinct: HashMap<usize, Vec<u64>> = HashMap::new();
            for &src in &by_switch[s] {
                for (dst, &t) in host_switch.iter().enumerate() {
                    if dst == src || t == usize::MAX {
                        continue;
                    }
                    hops.clear();
                    routes.hops(topo, src, dst, &mut hops)?;
                    let mut n = 0u32;
                    let mut signature = 0xcbf2_9ce4_8422_2325u64;
                    for h in &hops {
                        p.max_vc = p.max_vc.max(h.vc);
                        if inter_switch[h.channel as usize] {
                            n += 1;
                            p.channel_paths[h.channel as usize] += 1;
                            signature = (signature ^ h.channel as u64).wrapping_mul(0x1000_0000_01b3);
                        }
                    }
                    p.pairs += 1;
                    p.hop_sum += n as u64;
                    p.max_hops = p.max_hops.max(n);
                    if p.hops_histogram.len() <= n as usize {
                        p.hops_histogram.resize(n as usize + 1, 0);
                    }
                    p.hops_histogram[n as usize] += 1;
                    if n > dist[t] {
                        p.non_minimal += 1;
                    }
                    if t != s {
                        distinct.entry(t).or_default().push(signature);
                    }
                }
            }
            for (_, mut sigs) in distinct {
                sigs.sort_unstable();
                sigs.dedup();
                p.distinct_paths += sigs.len() as u64;
                p.switch_pairs += 1;
            }
            Ok(p)
        })
        .collect();
    let mut total = Partial { channel_paths: vec![0; topo.num_channels()], ..Default::default() };
    for p in partials {
        let p = p?;
        total.pairs += p.pairs;
        total.hop_sum += p.hop_sum;
        total.max_hops = total.max_hops.max(p.max_hops);
        if total.hops_histogram.len() < p.hops_histogram.len() {
            total.hops_histogram.resize(p.hops_histogram.len(), 0);
        }
        for (t, c) in total.hops_histogram.iter_mut().zip(&p.hops_histogram) {
            *t += c;
        }
        total.non_minimal += p.non_minimal;
        total.max_vc = total.max_vc.max(p.max_vc);
        total.distinct_paths += p.distinct_paths;
        total.switch_pairs += p.switch_pairs;
        for (t, c) in total.channel_paths.iter_mut().zip(p.channel_paths) {
            *t += c;
        }
    }
    let load = summarise(&total.channel_paths, &inter_switch);
    Ok(RouteMetrics {
        pairs: total.pairs,
        avg_hops: if total.pairs == 0 { 0.0 } else { total.hop_sum as f64 / total.pairs as f64 },
        max_hops: total.max_hops,
        hops_histogram: total.hops_histogram,
        non_minimal_pairs: total.non_minimal,
        vcs_used: if total.pairs == 0 { 0 } else { total.max_vc + 1 },
        path_diversity: if total.switch_pairs == 0 {
            0.0
        } else {
            total.distinct_paths as f64 / total.switch_pairs as f64
        },
        max_channel_paths: load.max_channel_paths,
        mean_channel_paths: load.mean_channel_paths,
    })
}

/// Largest and mean of `counts` over the channels `keep` marks (the switch-to-switch ones).
pub(crate) fn summarise(counts: &[u32], keep: &[bool]) -> ChannelLoad {
    let kept: Vec<u32> = counts.iter().zip(keep).filter(|(_, &k)| k).map(|(&c, _)| c).collect();
    ChannelLoad {
        max_channel_paths: kept.iter().copied().max().unwrap_or(0),
        mean_channel_paths: if kept.is_empty() {
            0.0
        } else {
            kept.iter().map(|&c| c as f64).sum::<f64>() / kept.len() as f64
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::grid::{mesh, torus};

    #[test]
    fn shortest_paths_are_minimal_with_mesh_averages() {
        // 4×4 mesh, one host per router: average switch distance 2.6667 (paper 002 §3.6).
        let t = mesh(&[4, 4], 1).unwrap();
        let r = route(&t, Engine::MinHop, &RouteOptions::default()).unwrap();
        let m = route_metrics(&t, &r).unwrap();
        assert_eq!(m.pairs, 16 * 15);
        assert_eq!(m.non_minimal_pairs, 0);
        assert_eq!(m.max_hops, 6);
        // Ordered router pairs at Manhattan distance d: the 1-D counts [4, 6, 4, 2] convolved
        // with themselves, less the 16 pairs of a router with itself.
        assert_eq!(m.hops_histogram, vec![0, 48, 68, 64, 40, 16, 4]);
        assert!((m.avg_hops - 2.6667).abs() < 1e-3);
        assert_eq!(m.vcs_used, 1);
        assert!(m.path_diversity >= 1.0);
    }

    #[test]
    fn per_destination_spreading_uses_more_paths_than_low_port() {
        let t = torus(&[4, 4], 4).unwrap();
        let mut opts = RouteOptions { select: crate::routing::Select::LowPort, ..Default::default() };
        let low = route_metrics(&t, &route(&t, Engine::Shortest, &opts).unwrap()).unwrap();
        opts.select = crate::routing::Select::PerDestination;
        let spread = route_metrics(&t, &route(&t, Engine::Shortest, &opts).unwrap()).unwrap();
        assert_eq!(low.path_diversity, 1.0);
        assert!(spread.path_diversity > 1.0);
    }
}
