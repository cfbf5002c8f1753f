//! Nue's layer partition: the hosts' component, and destinations split into compact clusters
//! (recursive bisection by BFS distance from a peripheral switch).

use crate::error::{NetweaveError, Result};
use crate::topology::fabric::SwitchFabric;
use crate::topology::Topology;

/// Switches of the component holding the hosts; an error naming the components when hosts
/// sit in more than one.
pub(super) fn main_component(topo: &Topology, graph: &SwitchFabric, by_switch: &[Vec<usize>]) -> Result<Vec<bool>> {
    let ns = graph.len();
    let mut comp = vec![u32::MAX; ns];
    let mut members: Vec<Vec<u32>> = Vec::new();
    let mut queue = Vec::new();
    for s in 0..ns {
        if comp[s] != u32::MAX {
            continue;
        }
        let id = members.len() as u32;
        let mut list = vec![s as u32];
        comp[s] = id;
        queue.clear();
        queue.push(s as u32);
        while let Some(v) = queue.pop() {
            for &u in graph.neighbors(v as usize) {
                if comp[u as usize] == u32::MAX {
                    comp[u as usize] = id;
                    list.push(u);
                    queue.push(u);
                }
            }
        }
        members.push(list);
    }
    let with_hosts: Vec<usize> =
        (0..members.len()).filter(|&c| members[c].iter().any(|&s| !by_switch[s as usize].is_empty())).collect();
    if with_hosts.len() > 1 {
        let mut names: Vec<String> = with_hosts
            .iter()
            .take(6)
            .map(|&c| {
                let mut m = members[c].clone();
                m.sort_unstable();
                let shown: Vec<&str> = m.iter().take(4).map(|&s| topo.label(topo.switches()[s as usize])).collect();
                let more = if m.len() > 4 { ", …" } else { "" };
                format!("{{{}{more}}} ({} switches)", shown.join(", "), m.len())
            })
            .collect();
        if with_hosts.len() > 6 {
            names.push(format!("and {} more", with_hosts.len() - 6));
        }
        return Err(NetweaveError::Routing(format!(
            "nue needs a connected fabric, but its hosts sit in {} components: {}",
            with_hosts.len(),
            names.join(", ")
        )));
    }
    let main = with_hosts.first().copied().unwrap_or(0) as u32;
    Ok(comp.iter().map(|&c| c == main).collect())
}

/// Reusable BFS buffers over the switch graph.
pub(super) struct BfsScratch {
    dist: Vec<u32>,
    other: Vec<u32>,
    queue: Vec<u32>,
}

impl BfsScratch {
    pub(super) fn new(ns: usize) -> Self {
        BfsScratch { dist: vec![u32::MAX; ns], other: vec![u32::MAX; ns], queue: Vec::with_capacity(ns) }
    }

    /// BFS over `graph` from switch `root`: afterwards [`distances`](Self::distances) and
    /// [`visit_order`](Self::visit_order) describe it.
    pub(super) fn run(&mut self, graph: &SwitchFabric, root: u32) {
        graph.bfs(root as usize, &mut self.dist, &mut self.queue);
    }

    /// Hop distance of every switch from the last BFS's root (`u32::MAX`: unreached).
    pub(super) fn distances(&self) -> &[u32] {
        &self.dist
    }

    /// The switches the last BFS reached, in visiting order (root first).
    pub(super) fn visit_order(&self) -> &[u32] {
        &self.queue
    }
}

/// The member of `set` farthest from the last BFS (lowest index on ties).
fn farthest(dist: &[u32], set: &[u32]) -> u32 {
    let mut best = set[0];
    for &s in set {
        if dist[s as usize] != u32::MAX && dist[s as usize] > dist[best as usize] {
            best = s;
        }
    }
    best
}

/// Split the destination switches into `k` balanced, spatially compact layers by recursive
/// bisection: sort a part by BFS distance from one of its peripheral members and cut it
/// where the host weight reaches the share of the first half's layers.
pub(super) fn clustered_partition(graph: &SwitchFabric, dests: &[u32], hosts: &[u32], k: usize) -> Vec<u8> {
    let mut layer_of = vec![u8::MAX; graph.len()];
    let mut bfs = BfsScratch::new(graph.len());
    let mut work: Vec<(Vec<u32>, usize, usize)> = vec![(dests.to_vec(), k, 0)];
    while let Some((mut part, parts, first)) = work.pop() {
        if parts <= 1 || part.len() <= 1 {
            for &s in &part {
                layer_of[s as usize] = first as u8;
            }
            continue;
        }
        graph.bfs(part[0] as usize, &mut bfs.dist, &mut bfs.queue);
        let a = farthest(&bfs.dist, &part);
        graph.bfs(a as usize, &mut bfs.dist, &mut bfs.queue);
        let dist = &bfs.dist;
        part.sort_unstable_by_key(|&s| (dist[s as usize], s));
        let left_parts = parts / 2;
        let total: u64 = part.iter().map(|&s| hosts[s as usize] as u64).sum();
        let target = total * left_parts as u64 / parts as u64;
        let mut acc = 0u64;
        let mut cut = 0;
        while cut < part.len() && acc + (hosts[part[cut] as usize] as u64) / 2 < target {
            acc += hosts[part[cut] as usize] as u64;
            cut += 1;
        }
        let cut = cut.clamp(left_parts, part.len() - (parts - left_parts));
        let right = part.split_off(cut);
        work.push((right, parts - left_parts, first + left_parts));
        work.push((part, left_parts, first));
    }
    layer_of
}

/// A switch central to `dests`: least eccentricity towards them (then least distance sum),
/// from the middle of a double-sweep diameter path improved by a bounded local search.
pub(super) fn layer_centre(graph: &SwitchFabric, dests: &[u32], bfs: &mut BfsScratch) -> u32 {
    graph.bfs(dests[0] as usize, &mut bfs.dist, &mut bfs.queue);
    let a = farthest(&bfs.dist, dests);
    graph.bfs(a as usize, &mut bfs.other, &mut bfs.queue);
    let b = farthest(&bfs.other, dests);
    graph.bfs(b as usize, &mut bfs.dist, &mut bfs.queue);
    let d = bfs.other[b as usize];
    let (from_a, from_b) = (&bfs.other, &bfs.dist);
    let mut cur =
        (0..graph.len() as u32).find(|&m| from_a[m as usize] == d / 2 && from_b[m as usize] == d - d / 2).unwrap_or(a);
    let eval = |v: u32, bfs: &mut BfsScratch| {
        graph.bfs(v as usize, &mut bfs.dist, &mut bfs.queue);
        let mut ecc = 0u32;
        let mut sum = 0u64;
        for &t in dests {
            ecc = ecc.max(bfs.dist[t as usize]);
            sum += bfs.dist[t as usize] as u64;
        }
        (ecc, sum)
    };
    let mut best = eval(cur, bfs);
    // A few rounds suffice: the start is already near the middle of a longest path.
    for _ in 0..6 {
        let mut next = None;
        for &n in graph.neighbors(cur as usize) {
            let score = eval(n, bfs);
            if score < best {
                best = score;
                next = Some(n);
            }
        }
        match next {
            Some(n) => cur = n,
            None => break,
        }
    }
    cur
}
