//! Path search: the balanced shortest-path trees of SSSP/DFSSSP (Dijkstra over a radix heap,
//! then load updates) and the per-switch-pair trees of LASH.

use crate::error::Result;
use crate::routing::select::{Select, Selector};
use crate::topology::fabric::SwitchFabric;
use crate::topology::{Port, Topology};

use super::assign::Greedy;
use super::graph::{DependencySlots, NO_HOP, UNREACHED};

/// Route every destination host over the current channel weights (see [`sssp`]);
/// tree-major next hops, one tree per host. With `greedy`, each tree is layered as soon as it
/// is known (and replaced by escape routes when its paths fit in no layer).
///
/// One Dijkstra search per destination switch, or per destination host.
/// With `spread_hosts` (the `sssp` engine) each host gets a search of its own over the
/// weights its predecessors left, so co-located hosts spread over parallel paths. Without
/// (`dfsssp`, like OpenSM's DFSSSP) the weights grow only after all the switch's hosts, which
/// share its one search and so one tree except where the search ties: a quarter of the
/// searches with four hosts per switch, and far fewer distinct paths to layer.
pub(super) fn sssp_trees(
    topo: &Topology,
    slots: &DependencySlots,
    select: Select,
    spread_hosts: bool,
    mut greedy: Option<&mut Greedy>,
) -> Result<Vec<u16>> {
    let n = slots.num_switches;
    let mut next = vec![NO_HOP; n * slots.num_hosts];
    // weight[c] of channel c, and back[c] = weight[rev[c]] so that relaxing the channels
    // towards a settled switch reads memory in order.
    let mut weight = vec![1u64; slots.head.len()];
    let mut back = vec![1u64; slots.head.len()];
    let mut selector = Selector::new(topo, select);
    let mut dist = vec![UNREACHED; n];
    let mut order: Vec<u32> = Vec::with_capacity(n);
    let mut sources: Vec<u32> = Vec::with_capacity(n);
    let mut heap = RadixHeap::new();
    let mut scratch = LoadScratch { load: vec![0; n], waiting: Vec::new(), ready: Vec::new() };
    let mut cand_port: Vec<Port> = Vec::new();
    let mut cand_idx: Vec<u16> = Vec::new();
    let mut pending: Vec<(usize, bool)> = Vec::new();
    for t in 0..n {
        if slots.host_count(t) == 0 {
            continue;
        }
        for (k, &d) in slots.hosts_of(t).iter().enumerate() {
            let d = d as usize;
            if k == 0 || spread_hosts {
                lightest_paths(slots, &back, t, &mut dist, &mut order, &mut heap);
            }
            let tree = &mut next[d * n..(d + 1) * n];
            selector.record(t, slots.host_port[d]);
            choose_next_hops(slots, &weight, &dist, &order, &mut selector, k, tree, &mut cand_port, &mut cand_idx);
            let mut escaped = false;
            if let Some(g) = greedy.as_deref_mut() {
                sources.clear();
                sources.extend(order.iter().copied().filter(|&v| v as usize != t && slots.host_count(v as usize) > 0));
                escaped = g.place_tree(topo, tree, t, d, k, &sources)?;
            }
            if spread_hosts {
                add_load(slots, t, &order, &next[d * n..(d + 1) * n], escaped, &mut weight, &mut back, &mut scratch);
            } else {
                pending.push((d, escaped));
            }
        }
        // Now the routes of all of t's hosts weigh on the channels.
        for &(d, escaped) in &pending {
            add_load(slots, t, &order, &next[d * n..(d + 1) * n], escaped, &mut weight, &mut back, &mut scratch);
        }
        pending.clear();
    }
    Ok(next)
}

/// Dijkstra from switch `t` along reversed channels: `dist[v]` is the weight of the lightest
/// path v → t under `back` (weights of the reversed channels); `order` lists the switches
/// reached by it (parents first).
fn lightest_paths(
    slots: &DependencySlots,
    back: &[u64],
    t: usize,
    dist: &mut [u64],
    order: &mut Vec<u32>,
    heap: &mut RadixHeap,
) {
    dist.fill(UNREACHED);
    order.clear();
    dist[t] = 0;
    heap.push(0, t as u32);
    while let Some((dv, v)) = heap.pop() {
        let v = v as usize;
        if dv > dist[v] {
            continue;
        }
        order.push(v as u32);
        for lc in slots.out(v) {
            let u = slots.head[lc] as usize;
            let nd = dv + back[lc];
            if nd < dist[u] {
                dist[u] = nd;
                heap.push(nd, u as u32);
            }
        }
    }
}

/// Fill `tree` (next hops towards the search's target, local index `k` on its switch): the
/// lightest next hops under the current weights among the switches the search found closer
/// (so the tree has no loop); with the search's own weights, its own choice.
#[allow(clippy::too_many_arguments)]
fn choose_next_hops(
    slots: &DependencySlots,
    weight: &[u64],
    dist: &[u64],
    order: &[u32],
    selector: &mut Selector,
    k: usize,
    tree: &mut [u16],
    cand_port: &mut Vec<Port>,
    cand_idx: &mut Vec<u16>,
) {
    for &v in &order[1..] {
        let v = v as usize;
        let dv = dist[v];
        let mut best = UNREACHED;
        cand_port.clear();
        cand_idx.clear();
        for (j, lc) in slots.out(v).enumerate() {
            let du = dist[slots.head[lc] as usize];
            if du >= dv {
                continue;
            }
            let cost = du + weight[lc];
            if cost < best {
                best = cost;
                cand_port.clear();
                cand_idx.clear();
            }
            if cost == best {
                cand_port.push(slots.port[lc]);
                cand_idx.push(j as u16);
            }
        }
        let p = selector.choose(v, k, cand_port);
        tree[v] = cand_idx[cand_port.iter().position(|&q| q == p).unwrap_or(0)];
    }
}

/// Add the routes of `tree` (towards switch `t`, every source switch sending its host count)
/// to the channel weights; `order` is the search order (parents first) unless `escaped`.
#[allow(clippy::too_many_arguments)]
fn add_load(
    slots: &DependencySlots,
    t: usize,
    order: &[u32],
    tree: &[u16],
    escaped: bool,
    weight: &mut [u64],
    back: &mut [u64],
    scratch: &mut LoadScratch,
) {
    let n = slots.num_switches;
    if !escaped {
        let load = &mut scratch.load;
        // Farthest first, so each switch's load is complete before it is passed on.
        for &v in order {
            load[v as usize] = slots.host_count(v as usize);
        }
        for &v in order.iter().rev() {
            let v = v as usize;
            if v != t {
                let (c, p) = slots.hop(tree, v);
                weight[c] += load[v];
                back[slots.rev[c] as usize] += load[v];
                load[p] += load[v];
            }
        }
    } else {
        // Escape routes follow no search order: pass loads on from the leaves (a switch once
        // all its children have), in time linear in the switches rather than the path lengths.
        let LoadScratch { load, waiting, ready } = scratch;
        waiting.clear();
        waiting.resize(n, 0);
        for v in 0..n {
            load[v] = slots.host_count(v);
            if v != t && tree[v] != NO_HOP {
                waiting[slots.hop(tree, v).1] += 1;
            }
        }
        ready.clear();
        ready.extend(
            (0..n as u32).filter(|&v| v as usize != t && tree[v as usize] != NO_HOP && waiting[v as usize] == 0),
        );
        while let Some(v) = ready.pop() {
            let v = v as usize;
            let (c, p) = slots.hop(tree, v);
            weight[c] += load[v];
            back[slots.rev[c] as usize] += load[v];
            load[p] += load[v];
            waiting[p] -= 1;
            if waiting[p] == 0 && p != t {
                ready.push(p as u32);
            }
        }
    }
}

/// Buffers of [`add_load`].
struct LoadScratch {
    /// Hosts whose routes cross each switch so far.
    load: Vec<u64>,
    /// Children of each switch whose load is still to come.
    waiting: Vec<u32>,
    /// Switches whose load is complete.
    ready: Vec<u32>,
}

/// LASH's trees: per destination switch `t`, every switch's minimal next hop chosen by
/// `select`, in `next[t * n + v]`; each tree is layered as soon as it is known, and routing
/// stops once the budget is exceeded.
pub(super) fn lash_trees(
    topo: &Topology,
    slots: &DependencySlots,
    select: Select,
    greedy: &mut Greedy,
) -> Result<Vec<u16>> {
    let n = slots.num_switches;
    let graph = SwitchFabric::new(topo);
    let mut next = vec![NO_HOP; n * n];
    let mut selector = Selector::new(topo, select);
    let mut dist = vec![u32::MAX; n];
    let mut queue = Vec::with_capacity(n);
    let mut level_start: Vec<u32> = Vec::new();
    let mut sources: Vec<u32> = Vec::with_capacity(n);
    let mut cand_port: Vec<Port> = Vec::new();
    let mut cand_idx: Vec<u16> = Vec::new();
    for t in 0..n {
        if slots.host_count(t) == 0 {
            continue;
        }
        graph.bfs(t, &mut dist, &mut queue);
        for &d in slots.hosts_of(t) {
            selector.record(t, slots.host_port[d as usize]);
        }
        let tree = &mut next[t * n..(t + 1) * n];
        for v in 0..n {
            if v == t || dist[v] == u32::MAX {
                continue;
            }
            cand_port.clear();
            cand_idx.clear();
            let o = slots.out_start[v] as usize;
            for lc in slots.out(v) {
                if dist[slots.head[lc] as usize] + 1 == dist[v] {
                    cand_port.push(slots.port[lc]);
                    cand_idx.push((lc - o) as u16);
                }
            }
            // The shortest engine's choice for the first host of `t` serves them all; the
            // selector still sees every host, so its state stays the shortest engine's.
            let p = selector.choose(v, 0, &cand_port);
            for k in 1..slots.host_count(t) as usize {
                selector.choose(v, k, &cand_port);
            }
            tree[v] = cand_idx[cand_port.iter().position(|&q| q == p).unwrap_or(0)];
        }
        // Sources nearest first, by counting sort on the distance.
        let max_d = (0..n).filter(|&v| dist[v] != u32::MAX).map(|v| dist[v]).max().unwrap_or(0) as usize;
        level_start.clear();
        level_start.resize(max_d + 2, 0);
        let is_source = |v: usize| v != t && dist[v] != u32::MAX && slots.host_count(v) > 0;
        for v in (0..n).filter(|&v| is_source(v)) {
            level_start[dist[v] as usize + 1] += 1;
        }
        for i in 1..level_start.len() {
            level_start[i] += level_start[i - 1];
        }
        sources.clear();
        sources.resize(level_start[max_d + 1] as usize, 0);
        for v in (0..n).filter(|&v| is_source(v)) {
            let at = &mut level_start[dist[v] as usize];
            sources[*at as usize] = v as u32;
            *at += 1;
        }
        greedy.place_tree(topo, tree, t, t, 0, &sources)?;
    }
    Ok(next)
}

/// Monotone priority queue for Dijkstra (a radix heap): keys popped never decrease, so a key
/// lives in the bucket of the highest bit where it differs from the last key popped.
struct RadixHeap {
    last: u64,
    len: usize,
    buckets: Vec<Vec<(u64, u32)>>,
}

impl RadixHeap {
    fn new() -> Self {
        RadixHeap { last: 0, len: 0, buckets: (0..65).map(|_| Vec::new()).collect() }
    }

    #[inline]
    fn bucket(last: u64, key: u64) -> usize {
        (64 - (key ^ last).leading_zeros()) as usize
    }

    /// Push `item` with `key ≥` the last key popped.
    fn push(&mut self, key: u64, item: u32) {
        self.buckets[Self::bucket(self.last, key)].push((key, item));
        self.len += 1;
    }

    fn pop(&mut self) -> Option<(u64, u32)> {
        if self.len == 0 {
            self.last = 0;
            return None;
        }
        if self.buckets[0].is_empty() {
            let i = (1..65).find(|&i| !self.buckets[i].is_empty())?;
            let mut moved = std::mem::take(&mut self.buckets[i]);
            self.last = moved.iter().map(|e| e.0).min().unwrap_or(self.last);
            for e in moved.drain(..) {
                self.buckets[Self::bucket(self.last, e.0)].push(e);
            }
            self.buckets[i] = moved;
        }
        self.len -= 1;
        self.buckets[0].pop()
    }
}
