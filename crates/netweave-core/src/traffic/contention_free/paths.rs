//! Paper 004's point-to-point cost model (Definition 1) on unique host-to-host paths.
//!
//! Parallel links between the same two nodes (bonding, trunking) count as one *logical link*
//! whose bandwidth is their sum. Every logical link is used in two directions, each its own
//! directed link: a path is a list of directed logical links, and x→y never shares one with
//! y→x. A path must be unique: true on any tree, and on fabrics whose shortest paths are
//! unique; anything else is refused with the pair that has two.

use std::collections::VecDeque;

use crate::error::Result;
use crate::routing::RoutingTable;
use crate::topology::{NodeId, Topology};
use crate::traffic::Message;

/// Directed logical link id: `2 × logical link + direction`.
pub type DirLink = u32;

/// Unique paths between all hosts with their latency and bottleneck bandwidth.
#[derive(Clone, Debug)]
pub struct PathTable {
    num_hosts: usize,
    /// Path of host pair `(x, y)` is `links[offsets[x·N + y]..offsets[x·N + y + 1]]`.
    offsets: Vec<u32>,
    links: Vec<DirLink>,
    /// Per directed link: bandwidth (bytes/s) and latency (picoseconds).
    bandwidth: Vec<f64>,
    latency_ps: Vec<u64>,
    /// Per directed link: the host index it leaves / enters, or `u32::MAX` at a switch.
    from_host: Vec<u32>,
    to_host: Vec<u32>,
    /// Per directed link: the node it leaves and the node it enters.
    ends: Vec<(NodeId, NodeId)>,
    /// Per host pair: Σ latencies (ps) and min bandwidth (bytes/s).
    pair_latency_ps: Vec<u64>,
    pair_bandwidth: Vec<f64>,
}

impl PathTable {
    /// Paths between every pair of `topo`'s hosts (host indices). Errors name a host pair with
    /// two shortest paths, a link without bandwidth, or hosts that cannot reach each other.
    pub fn new(topo: &Topology) -> Result<PathTable> {
        PathTable::build(topo, None)
    }

    /// Paths as `routes` sends them: any fabric whose *routes* are unique (a torus routed by
    /// `dor`, a fat-tree by `dmodk`) is schedulable. Parallel links still count as one logical
    /// link of their summed bandwidth, whichever cable the table picks.
    pub fn with_routes(topo: &Topology, routes: &RoutingTable) -> Result<PathTable> {
        routes.check_fits(topo)?;
        PathTable::build(topo, Some(routes))
    }

    fn build(topo: &Topology, routes: Option<&RoutingTable>) -> Result<PathTable> {
        let hosts = topo.hosts();
        let n = hosts.len();
        if n == 0 {
            return crate::invalid!("the topology has no hosts");
        }
        let nodes = topo.num_nodes();
        // Logical links: neighbours of every node merged by the node they reach.
        let mut logical_of_channel = vec![u32::MAX; topo.num_channels()];
        let mut bandwidth: Vec<f64> = Vec::new();
        let mut latency_ps: Vec<u64> = Vec::new();
        let mut from_host: Vec<u32> = Vec::new();
        let mut to_host: Vec<u32> = Vec::new();
        let mut ends: Vec<(NodeId, NodeId)> = Vec::new();
        let host_index = |v: NodeId| if topo.is_host(v) { topo.kind_index(v) as u32 } else { u32::MAX };
        let mut adj_off = vec![0u32; nodes + 1];
        let mut adj: Vec<(NodeId, DirLink)> = Vec::new();
        for u in 0..nodes as NodeId {
            let mut nbrs: Vec<_> = topo.neighbors(u).to_vec();
            nbrs.sort_by_key(|a| (a.neighbor, a.channel));
            let mut i = 0;
            while i < nbrs.len() {
                let v = nbrs[i].neighbor;
                let mut j = i;
                let mut bw = 0.0;
                let mut lat: f64 = 0.0;
                while j < nbrs.len() && nbrs[j].neighbor == v {
                    let spec = topo.link(Topology::channel_link(nbrs[j].channel)).spec;
                    if !spec.bandwidth_gbps.is_finite() || spec.bandwidth_gbps <= 0.0 {
                        return crate::invalid!(
                            "the link between '{}' and '{}' has bandwidth {} Gbit/s; every link needs a positive bandwidth",
                            topo.label(u),
                            topo.label(v),
                            spec.bandwidth_gbps
                        );
                    }
                    if !spec.latency_ns.is_finite() || spec.latency_ns < 0.0 {
                        return crate::invalid!(
                            "the link between '{}' and '{}' has latency {} ns; latencies must be zero or positive",
                            topo.label(u),
                            topo.label(v),
                            spec.latency_ns
                        );
                    }
                    bw += spec.bandwidth_gbps * 1e9 / 8.0;
                    lat = lat.max(spec.latency_ns);
                    j += 1;
                }
                let id = bandwidth.len() as DirLink;
                for a in &nbrs[i..j] {
                    logical_of_channel[a.channel as usize] = id;
                }
                bandwidth.push(bw);
                latency_ps.push((lat * 1000.0).round() as u64);
                from_host.push(host_index(u));
                to_host.push(host_index(v));
                ends.push((u, v));
                adj.push((v, id));
                i = j;
            }
            adj_off[u as usize + 1] = adj.len() as u32;
        }
        // BFS from every host, counting shortest paths (saturating at 2) to find ambiguity.
        let mut offsets = Vec::with_capacity(n * n + 1);
        offsets.push(0u32);
        let mut links: Vec<DirLink> = Vec::new();
        let mut dist = vec![u32::MAX; nodes];
        let mut count = vec![0u8; nodes];
        let mut via = vec![u32::MAX; nodes]; // directed link entering the node on its path
        let mut parent = vec![u32::MAX; nodes];
        let mut queue = VecDeque::new();
        let mut pair_latency_ps = vec![0u64; n * n];
        let mut pair_bandwidth = vec![f64::INFINITY; n * n];
        let mut scratch: Vec<DirLink> = Vec::new();
        if let Some(routes) = routes {
            let mut channels = Vec::new();
            for xi in 0..n {
                for yi in 0..n {
                    if xi != yi {
                        channels.clear();
                        routes.path(topo, xi, yi, &mut channels)?;
                        let p = xi * n + yi;
                        for &c in &channels {
                            let l = logical_of_channel[c as usize];
                            links.push(l);
                            pair_latency_ps[p] += latency_ps[l as usize];
                            pair_bandwidth[p] = pair_bandwidth[p].min(bandwidth[l as usize]);
                        }
                    }
                    offsets.push(links.len() as u32);
                }
            }
        }
        for (xi, &x) in hosts.iter().enumerate().filter(|_| routes.is_none()) {
            dist.fill(u32::MAX);
            count.fill(0);
            dist[x as usize] = 0;
            count[x as usize] = 1;
            queue.clear();
            queue.push_back(x);
            while let Some(u) = queue.pop_front() {
                // Paths run through switches only: hosts are leaves.
                if u != x && topo.is_host(u) {
                    continue;
                }
                for &(v, l) in &adj[adj_off[u as usize] as usize..adj_off[u as usize + 1] as usize] {
                    let d = dist[u as usize] + 1;
                    if dist[v as usize] == u32::MAX {
                        dist[v as usize] = d;
                        count[v as usize] = count[u as usize];
                        via[v as usize] = l;
                        parent[v as usize] = u;
                        queue.push_back(v);
                    } else if dist[v as usize] == d {
                        count[v as usize] = (count[v as usize] + count[u as usize]).min(2);
                    }
                }
            }
            for (yi, &y) in hosts.iter().enumerate() {
                if xi != yi {
                    if dist[y as usize] == u32::MAX {
                        return crate::invalid!("hosts '{}' and '{}' are not connected", topo.label(x), topo.label(y));
                    }
                    if count[y as usize] > 1 {
                        return crate::invalid!(
                            "hosts '{}' and '{}' are joined by more than one shortest path; the contention-free \
                             scheduler needs unique paths (a tree, a fabric whose shortest paths are unique, or a routing table)",
                            topo.label(x),
                            topo.label(y)
                        );
                    }
                    scratch.clear();
                    let mut v = y;
                    while v != x {
                        scratch.push(via[v as usize]);
                        v = parent[v as usize];
                    }
                    let p = xi * n + yi;
                    for &l in scratch.iter().rev() {
                        links.push(l);
                        pair_latency_ps[p] += latency_ps[l as usize];
                        pair_bandwidth[p] = pair_bandwidth[p].min(bandwidth[l as usize]);
                    }
                }
                offsets.push(links.len() as u32);
            }
        }
        Ok(PathTable {
            num_hosts: n,
            offsets,
            links,
            bandwidth,
            latency_ps,
            from_host,
            to_host,
            ends,
            pair_latency_ps,
            pair_bandwidth,
        })
    }

    pub fn num_hosts(&self) -> usize {
        self.num_hosts
    }
    pub fn num_dir_links(&self) -> usize {
        self.bandwidth.len()
    }
    /// Directed links from host `x` to host `y`, in order.
    pub fn path(&self, x: u32, y: u32) -> &[DirLink] {
        let p = x as usize * self.num_hosts + y as usize;
        &self.links[self.offsets[p] as usize..self.offsets[p + 1] as usize]
    }
    /// Bandwidth of a directed link in bytes/s.
    pub fn bandwidth(&self, l: DirLink) -> f64 {
        self.bandwidth[l as usize]
    }
    /// Latency of a directed link in picoseconds.
    pub fn link_latency_ps(&self, l: DirLink) -> u64 {
        self.latency_ps[l as usize]
    }
    /// The host index a directed link leaves (a host uplink), if it leaves a host.
    pub fn from_host(&self, l: DirLink) -> Option<u32> {
        Some(self.from_host[l as usize]).filter(|&h| h != u32::MAX)
    }
    /// The host index a directed link enters (a host downlink), if it enters a host.
    pub fn to_host(&self, l: DirLink) -> Option<u32> {
        Some(self.to_host[l as usize]).filter(|&h| h != u32::MAX)
    }
    /// The node a directed link leaves and the node it enters.
    pub fn ends(&self, l: DirLink) -> (NodeId, NodeId) {
        self.ends[l as usize]
    }
    /// `L_xy`: Σ link latencies from `x` to `y`, picoseconds (0 when `x == y`).
    pub fn latency_ps(&self, x: u32, y: u32) -> u64 {
        self.pair_latency_ps[x as usize * self.num_hosts + y as usize]
    }
    /// `Sync(prev, next)` in picoseconds: 0 without a predecessor or when both tasks have the
    /// same sender, else the latency from the predecessor's receiver to the successor's sender
    /// (§5.4.2).
    pub fn sync_ps(&self, prev: Option<Message>, next: Message) -> u64 {
        match prev {
            Some(p) if p.src != next.src => self.latency_ps(p.dst, next.src),
            _ => 0,
        }
    }
    /// `B_xy`: the smallest bandwidth on the path, bytes/s.
    pub fn path_bandwidth(&self, x: u32, y: u32) -> f64 {
        self.pair_bandwidth[x as usize * self.num_hosts + y as usize]
    }
    /// `C_xy = L_xy + M / B_xy` in picoseconds (Definition 1, eq. 5.1); 0 for a self-copy.
    pub fn cost_ps(&self, x: u32, y: u32, bytes: u64) -> u64 {
        if x == y {
            return 0;
        }
        self.latency_ps(x, y) + transmission_ps(bytes, self.path_bandwidth(x, y))
    }
}

impl PathTable {
    /// The same paths with every directed link's latency and bandwidth multiplied by
    /// `(2R − 1)·rate + 1`, R uniform in [0, 1) drawn per link and value from `seed`: what a
    /// scheduler believes when its measurements are off by up to ±`rate` (paper 004 (6.1)/(6.2)).
    ///
    /// ```
    /// use netweave_core::topology::ethernet::{star_of_switches, GIGABIT_LAN};
    /// use netweave_core::traffic::contention_free::PathTable;
    /// let paths = PathTable::new(&star_of_switches(4, 2, GIGABIT_LAN, GIGABIT_LAN).unwrap()).unwrap();
    /// let off = paths.perturbed(0.5, 7).unwrap();
    /// let ratio = off.path_bandwidth(0, 3) / paths.path_bandwidth(0, 3);
    /// assert!((0.5..1.5).contains(&ratio));
    /// ```
    pub fn perturbed(&self, rate: f64, seed: u64) -> Result<PathTable> {
        use rand::{Rng, SeedableRng};
        if !(0.0..1.0).contains(&rate) {
            return crate::invalid!("perturbation rate {rate} must be in [0, 1) (a fraction: 0.2 means ±20 %)");
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut factor = || (2.0 * rng.gen::<f64>() - 1.0) * rate + 1.0;
        let mut out = self.clone();
        for l in 0..out.bandwidth.len() {
            out.latency_ps[l] = (out.latency_ps[l] as f64 * factor()).round() as u64;
            out.bandwidth[l] *= factor();
        }
        let n = self.num_hosts;
        for p in 0..n * n {
            let links = &out.links[out.offsets[p] as usize..out.offsets[p + 1] as usize];
            out.pair_latency_ps[p] = links.iter().map(|&l| out.latency_ps[l as usize]).sum();
            out.pair_bandwidth[p] = links.iter().map(|&l| out.bandwidth[l as usize]).fold(f64::INFINITY, f64::min);
        }
        Ok(out)
    }
}

/// `M / B` in picoseconds.
pub fn transmission_ps(bytes: u64, bandwidth: f64) -> u64 {
    // Half-up by hand: `f64::round` is a libm call on baseline x86-64, and this sits in the relay
    // search. Equal to `round()` for these non-negative values but within an ulp of a half.
    (bytes as f64 / bandwidth * 1e12 + 0.5) as u64
}
