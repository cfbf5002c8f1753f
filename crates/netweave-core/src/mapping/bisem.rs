//! BISEM: recursive bisection of the network and of the rank graph (paper 003 §5).
//!
//! At every level each region (a box of routers) is cut in two along the axis where the
//! regions are longest (ties to the lowest axis), and the rank group placed on it is cut by
//! METIS into two groups sized for the halves' slot capacities, balanced also in internal
//! traffic (a second vertex-weight constraint, `Σ_{v∈g} W(u,v)`), with minimum traffic across.
//! Groups already split at this level whose regions touch only one half (torus wrap-around
//! counts) are collapsed into two super-vertices `a` (next to the lower half) and `b` (next to
//! the upper half) joined to the group by their traffic. METIS has no fixed vertices, so they
//! are pinned by weight: each weighs as much as the whole group in the rank-count constraint
//! and the target part weights leave room for exactly one of them on each side; the result is
//! flipped if `a` lands on the upper side. Ranks pulled by `a` thus land next to `a`'s region
//! (the extraction's Conditions 3–4). A greedy pass then moves the cheapest vertices until the
//! counts fit the halves exactly. Finally the ranks of every group are shuffled onto their
//! region's slots (seeded).
//!
//! Patterns that are Cartesian stencils (every message joins two ranks one step apart in one
//! coordinate of a grid, wrap-around allowed — recognised from the messages by
//! [`stencil_grid`]) are cut geometrically instead: each group is split across its longest
//! grid extent (ties to the grid axis of the network axis being cut, so equal shapes stay
//! aligned), lower coordinates into the lower half. The cuts are then the grid's planes, the
//! minimum for a stencil, and neighbouring groups land in neighbouring regions level by level,
//! in a fraction of METIS's time. Patterns whose rank numbers say nothing of geometry (a
//! trace, a shuffled stencil) are cut the same way when [`discover`] finds the lattice behind
//! the graph; the rest go to METIS.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::discovered::discover;
use super::network::{Lattice, MapNetwork};
use super::pattern::Pattern;
use crate::error::{NetweaveError, Result};

/// An axis-aligned box of routers, `lo ≤ x < hi` per dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// Lowest router coordinate per dimension (inclusive).
    pub lo: Vec<u32>,
    /// Highest router coordinate per dimension (exclusive).
    pub hi: Vec<u32>,
}

impl Region {
    fn extent(&self, d: usize) -> u32 {
        self.hi[d] - self.lo[d]
    }
    fn routers(&self) -> u32 {
        (0..self.lo.len()).map(|d| self.extent(d)).product()
    }
    fn split(&self, axis: usize) -> (Region, Region) {
        let mid = self.lo[axis] + self.extent(axis) / 2;
        let mut a = self.clone();
        let mut b = self.clone();
        a.hi[axis] = mid;
        b.lo[axis] = mid;
        (a, b)
    }
    /// Whether two disjoint boxes share a face (torus wrap-around included).
    fn adjacent(&self, other: &Region, lat: &Lattice) -> bool {
        let mut touching = 0;
        for d in 0..self.lo.len() {
            let overlap = self.lo[d] < other.hi[d] && other.lo[d] < self.hi[d];
            if overlap {
                continue;
            }
            let k = lat.dims[d];
            let touch = self.hi[d] == other.lo[d]
                || other.hi[d] == self.lo[d]
                || (lat.wrap() && ((self.hi[d] == k && other.lo[d] == 0) || (other.hi[d] == k && self.lo[d] == 0)));
            if !touch {
                return false;
            }
            touching += 1;
        }
        touching == 1
    }
    /// Router ids inside, dimension 0 fastest.
    fn router_ids(&self, lat: &Lattice) -> Vec<u32> {
        let n = self.lo.len();
        let mut out = Vec::with_capacity(self.routers() as usize);
        let mut x = self.lo.clone();
        loop {
            out.push(lat.router_id(&x));
            let mut d = 0;
            loop {
                if d == n {
                    return out;
                }
                x[d] += 1;
                if x[d] < self.hi[d] {
                    break;
                }
                x[d] = self.lo[d];
                d += 1;
            }
        }
    }
}

/// Result of BISEM: the initial placement and the final (region, group) pairs.
#[derive(Clone, Debug)]
pub struct Bisection {
    /// Host of every rank (paper's `map0`, inverted).
    pub host_of_rank: Vec<u32>,
    /// The final regions of routers, one per group.
    pub regions: Vec<Region>,
    /// The ranks placed on each region.
    pub groups: Vec<Vec<u32>>,
    /// Axis cut at every level.
    pub axes: Vec<usize>,
    /// The lattice the groups were cut along: the stencil grid the rank numbers follow, or the
    /// one [`discover`] found in the graph (else METIS cut them).
    pub grid: Option<Vec<u32>>,
}

/// Run BISEM for `levels` bisections (`None`: until regions hold at most 8 routers, the
/// paper's 2×2×2 on a 16³ torus — single routers for a stencil) with seed `seed` for METIS
/// and the final shuffle.
pub fn bisem(net: &MapNetwork, pattern: &Pattern, levels: Option<u32>, seed: u64) -> Result<Bisection> {
    let Some(lat) = net.lattice() else {
        return crate::invalid!("BISEM needs a torus or mesh topology (a lattice of routers)");
    };
    let n = pattern.num_ranks();
    if n > net.num_slots() {
        return crate::invalid!("{n} ranks do not fit {} host slots", net.num_slots());
    }
    let spr = lat.hosts_per_router * net.slots_per_host();
    // A stencil told by its rank numbers, else a lattice discovered from the graph alone.
    let (grid, coords) = match stencil_grid(pattern) {
        Some(dims) => {
            let xs = grid_coords(&dims, n);
            (Some(dims), Some(xs))
        }
        None => match discover(pattern) {
            s if s.lattice().is_some() => {
                let (dims, xs) = aligned(&s.dims, &s.coords, &lat.dims);
                (Some(dims), Some(xs))
            }
            _ => (None, None),
        },
    };
    // Ties along a cut axis go by lattice index (dimension 0 fastest): the rank id for a stencil.
    let lattice_index: Vec<u64> = match (&grid, &coords) {
        (Some(dims), Some(xs)) => (0..n as usize)
            .map(|r| {
                xs[r * dims.len()..(r + 1) * dims.len()]
                    .iter()
                    .zip(dims)
                    .rev()
                    .fold(0u64, |i, (&x, &k)| i * k as u64 + x as u64)
            })
            .collect(),
        _ => Vec::new(),
    };
    let (off, nbr, wts) = if grid.is_some() { (Vec::new(), Vec::new(), Vec::new()) } else { pattern.symmetric_csr() };
    let graph = SymGraph { off: &off, nbr: &nbr, wts: &wts };
    let mut pairs: Vec<(Region, Vec<u32>)> =
        vec![(Region { lo: vec![0; lat.dims.len()], hi: lat.dims.clone() }, (0..n).collect())];
    // Per pair, the axes that run reversed (stencils only; see `split_geometric`).
    let mut flips: Vec<Mirror> = vec![Mirror::default()];
    let mut label = vec![u32::MAX; n as usize];
    let mut local = vec![u32::MAX; n as usize];
    let mut axes = Vec::new();
    let mut level = 0u32;
    loop {
        let max_routers = pairs.iter().map(|(r, _)| r.routers()).max().unwrap_or(1);
        match levels {
            Some(l) if level >= l => break,
            // Stencils are cut down to single routers: a shuffle would undo the geometry.
            None if max_routers <= 8 && grid.is_none() => break,
            _ => {}
        }
        let dims = lat.dims.len();
        let axis =
            (0..dims).max_by_key(|&d| (pairs.iter().map(|(r, _)| r.extent(d)).max().unwrap(), dims - d)).unwrap();
        if pairs.iter().all(|(r, _)| r.extent(axis) < 2) {
            break;
        }
        axes.push(axis);
        label.fill(u32::MAX);
        let mut next: Vec<(Region, Vec<u32>)> = Vec::with_capacity(2 * pairs.len());
        let mut next_flips: Vec<Mirror> = Vec::with_capacity(2 * pairs.len());
        for ((region, group), flip) in pairs.into_iter().zip(flips) {
            if region.extent(axis) < 2 {
                for &r in &group {
                    label[r as usize] = next.len() as u32;
                }
                next.push((region, group));
                next_flips.push(flip);
                continue;
            }
            let (lo, hi) = region.split(axis);
            let (cap_lo, cap_hi) = (lo.routers() * spr, hi.routers() * spr);
            let size = group.len() as u32;
            let ideal =
                ((size as u64 * cap_lo as u64 + (cap_lo + cap_hi) as u64 / 2) / (cap_lo + cap_hi) as u64) as u32;
            let n_lo = ideal.clamp(size.saturating_sub(cap_hi), cap_lo.min(size));
            let seed_here = seed ^ ((level as u64) << 32) ^ next.len() as u64;
            let (g_lo, g_hi, flip_lo, flip_hi) = match (&grid, &coords) {
                (Some(dims), Some(xs)) => split_geometric(dims, xs, &lattice_index, group, axis, n_lo, flip),
                _ => {
                    // Only the groups this one talks to can pull it: test just their regions.
                    let mut near_lo = vec![false; next.len()];
                    let mut near_hi = vec![false; next.len()];
                    for &u in &group {
                        for &v in &nbr[off[u as usize] as usize..off[u as usize + 1] as usize] {
                            let l = label[v as usize] as usize;
                            if l < next.len() && !near_lo[l] && !near_hi[l] {
                                let q = &next[l].0;
                                near_lo[l] = q.adjacent(&lo, lat) && !q.adjacent(&hi, lat);
                                near_hi[l] = q.adjacent(&hi, lat) && !q.adjacent(&lo, lat);
                            }
                        }
                    }
                    let (a, b) = bisect_group(&graph, &group, &label, &near_lo, &near_hi, n_lo, seed_here, &mut local)?;
                    (a, b, Mirror::default(), Mirror::default())
                }
            };
            next_flips.extend([flip_lo, flip_hi]);
            for &r in &g_lo {
                label[r as usize] = next.len() as u32;
            }
            next.push((lo, g_lo));
            for &r in &g_hi {
                label[r as usize] = next.len() as u32;
            }
            next.push((hi, g_hi));
        }
        pairs = next;
        flips = next_flips;
        level += 1;
    }
    // makeInitMap: shuffle every group onto its region's slots.
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut host_of_rank = vec![0u32; n as usize];
    for (region, group) in &pairs {
        let mut slots: Vec<u32> =
            region.router_ids(lat).into_iter().flat_map(|router| (0..spr).map(move |i| router * spr + i)).collect();
        slots.shuffle(&mut rng);
        for (&r, &s) in group.iter().zip(&slots) {
            host_of_rank[r as usize] = net.host_of_slot(s);
        }
    }
    let (regions, groups) = pairs.into_iter().unzip();
    Ok(Bisection { host_of_rank, regions, groups, axes, grid })
}

/// The Cartesian grid `pattern` is a stencil on, if it is one: sizes per grid dimension (rank
/// id with dimension 0 fastest, as [`Pattern::stencil`] numbers them) such that every message
/// joins two ranks whose coordinates differ in exactly one dimension, by one step or by the
/// wrap-around. The strides are taken from the messages' rank distances; the coarsest grid
/// (fewest dimensions) that explains every message wins. `None` for any other pattern.
///
/// ```
/// use netweave_core::mapping::{bisem::stencil_grid, Pattern};
/// assert_eq!(stencil_grid(&Pattern::stencil(&[8, 4, 2], true, 64).unwrap()), Some(vec![8, 4, 2]));
/// assert_eq!(stencil_grid(&Pattern::bruck(64, 64).unwrap()), None);
/// ```
pub fn stencil_grid(pattern: &Pattern) -> Option<Vec<u32>> {
    /// More distinct rank distances than a 4-D periodic stencil has: not a stencil.
    const MAX_DISTANCES: usize = 8;
    let n = pattern.num_ranks();
    let msgs = pattern.messages();
    if n < 4 || msgs.is_empty() {
        return None;
    }
    let mut distances: Vec<u32> = Vec::new();
    for m in msgs {
        let d = m.src.abs_diff(m.dst);
        if !distances.contains(&d) {
            if distances.len() == MAX_DISTANCES {
                return None;
            }
            distances.push(d);
        }
    }
    distances.sort_unstable();
    if distances[0] != 1 {
        return None;
    }
    // Chains of strides 1 = s0 < s1 < … with s_i | s_{i+1} | n, all of them rank distances.
    let mut best: Option<Vec<u32>> = None;
    let mut chain = vec![1u32];
    fn grow(
        chain: &mut Vec<u32>,
        distances: &[u32],
        n: u32,
        msgs: &[crate::traffic::Message],
        best: &mut Option<Vec<u32>>,
    ) {
        let last = *chain.last().unwrap();
        let dims: Vec<u32> = chain.windows(2).map(|w| w[1] / w[0]).chain(std::iter::once(n / last)).collect();
        if best.as_ref().map_or(true, |b| dims.len() < b.len()) && explains(&dims, msgs) {
            *best = Some(dims);
            return;
        }
        if chain.len() == 4 {
            return;
        }
        for &s in distances {
            if s > last && s % last == 0 && n % s == 0 && s < n {
                chain.push(s);
                grow(chain, distances, n, msgs, best);
                chain.pop();
            }
        }
    }
    grow(&mut chain, &distances, n, msgs, &mut best);
    best
}

/// Whether every message joins grid neighbours of `dims` (one step or wrap-around in one dimension).
fn explains(dims: &[u32], msgs: &[crate::traffic::Message]) -> bool {
    msgs.iter().all(|m| {
        let (mut a, mut b) = (m.src, m.dst);
        let mut moved = 0;
        for &k in dims {
            let (x, y) = (a % k, b % k);
            a /= k;
            b /= k;
            if x != y {
                let step = x.abs_diff(y);
                if step != 1 && step != k - 1 {
                    return false;
                }
                moved += 1;
            }
        }
        moved == 1
    })
}

/// A discovered lattice (`dims` largest first, `coords` per rank) with its dimensions reordered
/// to follow the network's (largest discovered on the largest network axis, and so on), so
/// that equal shapes are cut alike; unchanged when the dimension counts differ.
fn aligned(dims: &[u32], coords: &[u32], net_dims: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let nd = dims.len();
    if nd != net_dims.len() {
        return (dims.to_vec(), coords.to_vec());
    }
    let mut by_size: Vec<usize> = (0..nd).collect();
    by_size.sort_by_key(|&a| (std::cmp::Reverse(net_dims[a]), a));
    // Discovered dimension i goes to position by_size[i].
    let mut out_dims = vec![0u32; nd];
    for (i, &a) in by_size.iter().enumerate() {
        out_dims[a] = dims[i];
    }
    let mut out = vec![0u32; coords.len()];
    for (row, new_row) in coords.chunks(nd).zip(out.chunks_mut(nd)) {
        for (i, &a) in by_size.iter().enumerate() {
            new_row[a] = row[i];
        }
    }
    (out_dims, out)
}

/// Grid coordinates of every rank, `dims.len()` per rank (dimension 0 fastest in rank ids).
fn grid_coords(dims: &[u32], n: u32) -> Vec<u32> {
    let mut xs = Vec::with_capacity(n as usize * dims.len());
    for r in 0..n {
        let mut rest = r;
        for &k in dims {
            xs.push(rest % k);
            rest /= k;
        }
    }
    xs
}

/// Split `group` across its longest grid extent (ties to grid axis `net_axis`, then the
/// lowest) for a cut across network axis `net_axis`: `n_lo` ranks for the lower region half,
/// the rest for the upper, with the [`Mirror`]s of both halves.
///
/// The second half of the group (in the mirror's order) is laid out as the mirror image of
/// the first through the cut plane: both its grid axis and the network axis run reversed for
/// its own cuts. Ranks on both sides of the cut then stay next to each other whatever later
/// cuts do (the reflected Gray code, in space), and a periodic axis closes up the same way.
fn split_geometric(
    dims: &[u32],
    xs: &[u32],
    lattice_index: &[u64],
    group: Vec<u32>,
    net_axis: usize,
    n_lo: u32,
    mirror: Mirror,
) -> (Vec<u32>, Vec<u32>, Mirror, Mirror) {
    let nd = dims.len();
    let coord = |r: u32, d: usize| xs[r as usize * nd + d];
    let extent = |d: usize| {
        let (lo, hi) = group.iter().fold((u32::MAX, 0), |(lo, hi), &r| (lo.min(coord(r, d)), hi.max(coord(r, d))));
        hi.saturating_sub(lo) + 1
    };
    let extents: Vec<u32> = (0..nd).map(extent).collect();
    let axis = (0..nd).max_by_key(|&d| (extents[d], d == net_axis, nd - d)).unwrap_or(0);
    let mut group = group;
    // Along the axis, then by lattice index (the other coordinates in grid order): ties cut cleanly.
    let key = |r: u32| lattice_index[r as usize];
    if mirror.grid & (1 << axis) != 0 {
        group.sort_unstable_by_key(|&r| (std::cmp::Reverse(coord(r, axis)), key(r)));
    } else {
        group.sort_unstable_by_key(|&r| (coord(r, axis), key(r)));
    }
    let mirrored = Mirror { grid: mirror.grid ^ (1 << axis), net: mirror.net ^ (1 << net_axis) };
    if mirror.net & (1 << net_axis) != 0 {
        // The network axis runs reversed: the first ranks in order go to the upper half.
        let lower = group.split_off(group.len() - n_lo as usize);
        (lower, group, mirrored, mirror)
    } else {
        let upper = group.split_off(n_lo as usize);
        (group, upper, mirror, mirrored)
    }
}

/// Which grid axes and which network axes run reversed inside a region (bit per axis).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mirror {
    grid: u32,
    net: u32,
}

struct SymGraph<'a> {
    off: &'a [u32],
    nbr: &'a [u32],
    wts: &'a [u64],
}

/// Split `group` into `(lower, upper)` with `|lower| = n_lo`; see the module docs.
#[allow(clippy::too_many_arguments)]
fn bisect_group(
    g: &SymGraph,
    group: &[u32],
    label: &[u32],
    near_lo: &[bool],
    near_hi: &[bool],
    n_lo: u32,
    seed: u64,
    local: &mut [u32],
) -> Result<(Vec<u32>, Vec<u32>)> {
    let n = group.len();
    for (i, &r) in group.iter().enumerate() {
        local[r as usize] = i as u32;
    }
    // Weights towards the collapsed neighbours and inside the group.
    let mut to_a = vec![0u64; n];
    let mut to_b = vec![0u64; n];
    let mut inner = vec![0u64; n];
    let mut edges: Vec<(u32, u32, u64)> = Vec::new();
    // Edges are pushed vertex by vertex: vertex i's are edges[edge_off[i]..edge_off[i + 1]].
    let mut edge_off: Vec<usize> = Vec::with_capacity(n + 1);
    for (i, &u) in group.iter().enumerate() {
        edge_off.push(edges.len());
        for k in g.off[u as usize] as usize..g.off[u as usize + 1] as usize {
            let v = g.nbr[k];
            let w = g.wts[k];
            let lv = local[v as usize];
            if lv != u32::MAX {
                edges.push((i as u32, lv, w));
                inner[i] += w;
            } else if let Some(&l) = label.get(v as usize).filter(|&&l| l != u32::MAX) {
                if near_lo[l as usize] {
                    to_a[i] += w;
                } else if near_hi[l as usize] {
                    to_b[i] += w;
                }
            }
        }
    }
    edge_off.push(edges.len());
    let has_a = to_a.iter().any(|&w| w > 0);
    let has_b = to_b.iter().any(|&w| w > 0);
    let part = if n <= EXACT_MAX {
        exact_bisect(n, &edges, &to_a, &to_b, n_lo)
    } else {
        metis_bisect(n, &edges, &to_a, &to_b, &inner, has_a, has_b, n_lo, seed)?
    };
    for &r in group {
        local[r as usize] = u32::MAX;
    }
    // Rebalance to exactly n_lo on the lower side, moving the vertices that cost least.
    let mut side: Vec<u8> = part;
    let affinity = |i: usize, side: &[u8]| -> i128 {
        // Gain of having i on the lower side rather than the upper.
        let mut lo_pull = to_a[i] as i128 - to_b[i] as i128;
        for &(_, b, w) in &edges[edge_off[i]..edge_off[i + 1]] {
            lo_pull += if side[b as usize] == 0 { w as i128 } else { -(w as i128) };
        }
        lo_pull
    };
    let count_lo = side.iter().filter(|&&s| s == 0).count() as u32;
    if count_lo != n_lo {
        let from = if count_lo > n_lo { 0u8 } else { 1u8 };
        let excess = count_lo.abs_diff(n_lo) as usize;
        let mut cands: Vec<(i128, usize)> = (0..n)
            .filter(|&i| side[i] == from)
            .map(|i| {
                let a = affinity(i, &side);
                (if from == 0 { a } else { -a }, i)
            })
            .collect();
        cands.sort_unstable();
        for &(_, i) in cands.iter().take(excess) {
            side[i] = 1 - from;
        }
    }
    let mut lower = Vec::with_capacity(n_lo as usize);
    let mut upper = Vec::with_capacity(n - n_lo as usize);
    for (i, &r) in group.iter().enumerate() {
        if side[i] == 0 {
            lower.push(r);
        } else {
            upper.push(r);
        }
    }
    Ok((lower, upper))
}

/// Groups up to this size are bisected exactly (every split tried): at most C(12,6) = 924
/// candidates, cheaper than a METIS call on so small a graph and optimal.
const EXACT_MAX: usize = 12;

/// The split of a small group with exactly `n_lo` vertices on the lower side that minimises
/// the traffic across plus the traffic pulled the wrong way (towards `a` from the upper side,
/// towards `b` from the lower); ties to the first split in mask order. 0 (lower) / 1 (upper).
fn exact_bisect(n: usize, edges: &[(u32, u32, u64)], to_a: &[u64], to_b: &[u64], n_lo: u32) -> Vec<u8> {
    debug_assert!(n <= EXACT_MAX);
    let mut best = (u128::MAX, 0u32);
    for mask in 0u32..(1 << n) {
        // Bit i set: vertex i on the upper side.
        if mask.count_ones() != n as u32 - n_lo {
            continue;
        }
        let mut cost: u128 = 0;
        for i in 0..n {
            cost += if mask >> i & 1 == 1 { to_a[i] } else { to_b[i] } as u128;
        }
        for &(u, v, w) in edges {
            // Every edge is listed from both ends: count it once.
            if u < v && (mask >> u & 1) != (mask >> v & 1) {
                cost += w as u128;
            }
        }
        if cost < best.0 {
            best = (cost, mask);
        }
    }
    (0..n).map(|i| (best.1 >> i & 1) as u8).collect()
}

/// METIS recursive bisection with the pinned super-vertices; returns 0 (lower) / 1 (upper)
/// per group vertex.
#[allow(clippy::too_many_arguments)]
fn metis_bisect(
    n: usize,
    edges: &[(u32, u32, u64)],
    to_a: &[u64],
    to_b: &[u64],
    inner: &[u64],
    has_a: bool,
    has_b: bool,
    n_lo: u32,
    seed: u64,
) -> Result<Vec<u8>> {
    let a = has_a.then_some(n);
    let b = has_b.then_some(n + usize::from(has_a));
    let nv = n + usize::from(has_a) + usize::from(has_b);
    // Integer weights for METIS: scale so sums stay far below i32.
    let edge_total: u128 = edges.iter().map(|e| e.2 as u128).sum::<u128>()
        + to_a.iter().map(|&w| 2 * w as u128).sum::<u128>()
        + to_b.iter().map(|&w| 2 * w as u128).sum::<u128>();
    let inner_total: u128 = inner.iter().map(|&w| w as u128).sum();
    let scale_of = |total: u128| (total / (1u128 << 24)).max(1);
    let (es, is) = (scale_of(edge_total), scale_of(inner_total));
    let sw = |w: u64, s: u128| -> i32 { ((w as u128).div_ceil(s)).min(i32::MAX as u128) as i32 };
    let mut adj: Vec<Vec<(u32, i32)>> = vec![Vec::new(); nv];
    for &(u, v, w) in edges {
        adj[u as usize].push((v, sw(w, es)));
    }
    for i in 0..n {
        if let Some(a) = a.filter(|_| to_a[i] > 0) {
            let w = sw(to_a[i], es);
            adj[i].push((a as u32, w));
            adj[a].push((i as u32, w));
        }
        if let Some(b) = b.filter(|_| to_b[i] > 0) {
            let w = sw(to_b[i], es);
            adj[i].push((b as u32, w));
            adj[b].push((i as u32, w));
        }
    }
    let mut xadj: Vec<metis::Idx> = Vec::with_capacity(nv + 1);
    let mut adjncy: Vec<metis::Idx> = Vec::new();
    let mut adjwgt: Vec<metis::Idx> = Vec::new();
    xadj.push(0);
    for list in &adj {
        for &(v, w) in list {
            adjncy.push(v as metis::Idx);
            adjwgt.push(w.max(1));
        }
        xadj.push(adjncy.len() as metis::Idx);
    }
    // The traffic constraint only matters when ranks differ in internal traffic: when every
    // vertex carries nearly the same, balancing counts balances traffic too, and METIS's
    // single-constraint bisection is faster and cuts less.
    let (lightest, heaviest) = inner.iter().fold((u64::MAX, 0), |(lo, hi), &w| (lo.min(w), hi.max(w)));
    let use_traffic = inner_total > 0 && heaviest > lightest + lightest / 8;
    let ncon: usize = if use_traffic { 2 } else { 1 };
    let pin = n as metis::Idx;
    let mut vwgt: Vec<metis::Idx> = Vec::with_capacity(nv * ncon);
    // Group vertices: one rank each, their internal traffic; super-vertices: pinned by count.
    for &w in inner {
        vwgt.push(1);
        if use_traffic {
            vwgt.push(sw(w, is).max(1));
        }
    }
    for _ in n..nv {
        vwgt.push(pin);
        if use_traffic {
            vwgt.push(0);
        }
    }
    let total_count = (n + pin as usize * (usize::from(has_a) + usize::from(has_b))) as f32;
    let lo_count = n_lo as f32 + if has_a { pin as f32 } else { 0.0 };
    let lo_share = (lo_count / total_count).clamp(1e-3, 1.0 - 1e-3);
    let traffic_share = (n_lo as f32 / n as f32).clamp(1e-3, 1.0 - 1e-3);
    let mut tpwgts: Vec<metis::Real> = vec![lo_share];
    if use_traffic {
        tpwgts.push(traffic_share);
    }
    tpwgts.push(1.0 - lo_share);
    if use_traffic {
        tpwgts.push(1.0 - traffic_share);
    }
    let ubvec: Vec<metis::Real> = if use_traffic { vec![1.01, 1.05] } else { vec![1.01] };
    let mut part = vec![0 as metis::Idx; nv];
    let fail = |e: String| NetweaveError::InvalidParameter(format!("METIS bisection failed: {e}"));
    metis::Graph::new(ncon as metis::Idx, 2, &xadj, &adjncy)
        .map_err(|e| fail(e.to_string()))?
        .set_vwgt(&vwgt)
        .set_adjwgt(&adjwgt)
        .set_tpwgts(&tpwgts)
        .set_ubvec(&ubvec)
        .set_option(metis::option::Seed((seed & 0x7fff_ffff) as metis::Idx))
        .part_recursive(&mut part)
        .map_err(|e| fail(e.to_string()))?;
    let flip = match (a, b) {
        (Some(a), _) => part[a] == 1,
        (None, Some(b)) => part[b] == 0,
        _ => false,
    };
    Ok(part[..n].iter().map(|&p| ((p == 1) != flip) as u8).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::cost::{check_placement, full_cost};
    use crate::mapping::{baselines, Pattern};
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::grid::{mesh, torus};

    #[test]
    fn paper_003_a2_regions_and_axes() {
        let (net, p) = crate::mapping::testing::paper_case();
        let b = bisem(net, p, Some(9), 1).unwrap();
        assert_eq!(b.axes, vec![0, 1, 2, 0, 1, 2, 0, 1, 2]);
        assert_eq!(b.regions.len(), 512);
        assert!(b.regions.iter().all(|r| (0..3).all(|d| r.extent(d) == 2)));
        assert!(b.groups.iter().all(|g| g.len() == 8));
        check_placement(net, 4096, &b.host_of_rank).unwrap();
        // Compact groups: far fewer hop-bytes than the identity.
        let id = baselines::identity(net, 4096).unwrap();
        assert!(full_cost(net, p, &b.host_of_rank).hop_bytes < full_cost(net, p, &id).hop_bytes);
    }

    #[test]
    fn a3_mesh_4x4_quadrants() {
        let t = mesh(&[4, 4], 1).unwrap();
        let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
        let net = MapNetwork::new(&t, &r, 1).unwrap();
        // A 4x4 halo exchange: the best balanced 4-way split is the four 2x2 quadrants.
        let p = Pattern::stencil(&[4, 4], false, 100).unwrap();
        let b = bisem(&net, &p, Some(2), 3).unwrap();
        assert_eq!(b.axes, vec![0, 1]);
        assert_eq!(b.regions.len(), 4);
        assert!(b.groups.iter().all(|g| g.len() == 4));
        check_placement(&net, 16, &b.host_of_rank).unwrap();
        let mut group_of = [0usize; 16];
        for (i, g) in b.groups.iter().enumerate() {
            for &r in g {
                group_of[r as usize] = i;
            }
        }
        let cut = p.messages().iter().filter(|m| group_of[m.src as usize] != group_of[m.dst as usize]).count();
        assert_eq!(cut, 2 * 8, "8 grid edges cut, each carrying a message both ways");
        // Conditions 3-4: each group of the second half talks more to its neighbour region's group.
        let traffic = |a: usize, c: usize| {
            p.messages().iter().filter(|m| group_of[m.src as usize] == a && group_of[m.dst as usize] == c).count()
        };
        // Groups 0,1 split the lower x half along y; 2 sits next to 0 and 3 next to 1.
        assert!(traffic(2, 0) > traffic(2, 1), "{:?}", b.groups);
        assert!(traffic(3, 1) > traffic(3, 0), "{:?}", b.groups);
    }

    #[test]
    fn fewer_ranks_than_slots_and_bad_topology() {
        let t = torus(&[4, 4], 2).unwrap();
        let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
        let net = MapNetwork::new(&t, &r, 2).unwrap();
        let p = Pattern::random_sparse(45, 3, 10, 1).unwrap();
        let b = bisem(&net, &p, None, 0).unwrap();
        check_placement(&net, 45, &b.host_of_rank).unwrap();
    }

    #[test]
    fn stencil_grids_recognised_and_others_refused() {
        assert_eq!(stencil_grid(&Pattern::stencil(&[8, 8, 64], true, 1).unwrap()), Some(vec![8, 8, 64]));
        assert_eq!(stencil_grid(&Pattern::stencil(&[5, 3], false, 1).unwrap()), Some(vec![5, 3]));
        assert_eq!(stencil_grid(&Pattern::stencil(&[2, 2, 2], true, 1).unwrap()), Some(vec![2, 2, 2]));
        assert_eq!(stencil_grid(&Pattern::ring(16, 1).unwrap()), Some(vec![16]));
        assert_eq!(stencil_grid(&Pattern::bruck(64, 1).unwrap()), None);
        assert_eq!(stencil_grid(&Pattern::random_sparse(64, 3, 1, 2).unwrap()), None);
    }

    #[test]
    fn geometric_cuts_fold_a_stencil_with_few_extra_hops() {
        // 8x8x16 ranks onto an 8x16x8 torus: the cuts must fold the grid; the mirror images keep
        // every message within two hops and most at one.
        let t = torus(&[8, 16, 8], 1).unwrap();
        let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
        let net = MapNetwork::new(&t, &r, 1).unwrap();
        let p = Pattern::stencil(&[8, 8, 16], true, 1).unwrap();
        let b = bisem(&net, &p, None, 0).unwrap();
        assert_eq!(b.grid, Some(vec![8, 8, 16]));
        assert!(b.regions.iter().all(|r| r.routers() == 1), "stencils are cut down to single routers");
        check_placement(&net, 1024, &b.host_of_rank).unwrap();
        let ours = full_cost(&net, &p, &b.host_of_rank).hop_bytes;
        let id = full_cost(&net, &p, &baselines::identity(&net, 1024).unwrap()).hop_bytes;
        let bound = p.num_messages() as u128;
        assert!(ours <= id && ours < bound * 3 / 2, "ours {ours}, identity {id}, bound {bound}");
    }
}
