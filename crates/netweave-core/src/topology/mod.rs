//! Topology: switches and hosts joined by full-duplex links — the first pipeline stage.
//!
//! One type, [`Topology`], is shared by every later stage. Nodes are numbered `0..num_nodes()`;
//! ports are numbered from 1 as in InfiniBand (port 0 is the switch itself). Every link is
//! full-duplex and owns two directed *channels* with integer ids: link `l` carries channel
//! `2l` from its `a` end to its `b` end and channel `2l + 1` back. Adjacency is stored flat
//! (CSR) so hot loops in routing and evaluation never chase pointers.
//!
//! ```
//! use netweave_core::topology::{TopologyBuilder, LinkSpec};
//! let mut b = TopologyBuilder::new("two hosts on a switch");
//! let s = b.add_switch("sw", 4);
//! let h0 = b.add_host("h0");
//! let h1 = b.add_host("h1");
//! b.connect(h0, s, LinkSpec::default()).unwrap();
//! b.connect(h1, s, LinkSpec::default()).unwrap();
//! let topo = b.build().unwrap();
//! assert_eq!(topo.num_hosts(), 2);
//! assert_eq!(topo.num_channels(), 4);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{NetweaveError, Result};

pub mod dragonfly;
pub mod ethernet;
pub mod fabric;
pub mod fat_tree;
pub mod galois;
pub mod grid;
pub mod io;
pub mod link_layer;
pub mod lsft;
pub mod metrics;
pub mod plane;
pub mod random;
pub mod structure;

use link_layer::Switching;
use structure::Structure;

/// Index of a node (host or switch) in a [`Topology`].
pub type NodeId = u32;
/// Index of a full-duplex link.
pub type LinkId = u32;
/// Index of a directed channel: `2 * link` (a→b) or `2 * link + 1` (b→a).
pub type ChannelId = u32;
/// A physical port number, 1-based.
pub type Port = u16;

/// Sentinel for "no channel" in flat port tables.
pub const NO_CHANNEL: ChannelId = ChannelId::MAX;

/// Whether a node is an end host (HCA / NIC) or a switch / router.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Host,
    Switch,
}

/// Bandwidth and latency of one link, the same in both directions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    /// Data rate per direction in Gbit/s.
    pub bandwidth_gbps: f64,
    /// One-way propagation latency in nanoseconds.
    pub latency_ns: f64,
}

impl Default for LinkSpec {
    /// 100 Gbit/s and 100 ns: a modern HPC link, used where a generator is given nothing else.
    fn default() -> Self {
        LinkSpec { bandwidth_gbps: 100.0, latency_ns: 100.0 }
    }
}

impl LinkSpec {
    /// Slowest link accepted, in Gbit/s (1 kbit/s).
    pub const MIN_BANDWIDTH_GBPS: f64 = 1e-6;
    /// Fastest link accepted, in Gbit/s (1 Ebit/s).
    pub const MAX_BANDWIDTH_GBPS: f64 = 1e9;
    /// Longest one-way latency accepted, in ns (a million seconds).
    pub const MAX_LATENCY_NS: f64 = 1e15;

    /// A link spec, checking that bandwidth and latency are physical: bandwidth within
    /// [`MIN_BANDWIDTH_GBPS`](Self::MIN_BANDWIDTH_GBPS)..=[`MAX_BANDWIDTH_GBPS`](Self::MAX_BANDWIDTH_GBPS),
    /// latency within 0..=[`MAX_LATENCY_NS`](Self::MAX_LATENCY_NS). The bounds keep every time
    /// derived from them finite (2^64 bytes at 1 kbit/s is 1.5e17 s), so no model reports
    /// `inf` or a figure that lost its precision as a result.
    pub fn new(bandwidth_gbps: f64, latency_ns: f64) -> Result<Self> {
        if !(Self::MIN_BANDWIDTH_GBPS..=Self::MAX_BANDWIDTH_GBPS).contains(&bandwidth_gbps) {
            return crate::invalid!(
                "link bandwidth must be {:e} to {:e} Gbit/s (1 kbit/s to 1 Ebit/s), got {bandwidth_gbps:?}",
                Self::MIN_BANDWIDTH_GBPS,
                Self::MAX_BANDWIDTH_GBPS
            );
        }
        if !(0.0..=Self::MAX_LATENCY_NS).contains(&latency_ns) {
            return crate::invalid!("link latency must be 0 to {:e} ns, got {latency_ns:?}", Self::MAX_LATENCY_NS);
        }
        Ok(LinkSpec { bandwidth_gbps, latency_ns })
    }
}

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Endpoint {
    pub node: NodeId,
    pub port: Port,
}

/// A full-duplex link between two ports.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub a: Endpoint,
    pub b: Endpoint,
    pub spec: LinkSpec,
}

/// One entry of a node's adjacency list: leaving `port`, channel `channel` reaches
/// `neighbor` on its port `neighbor_port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adjacent {
    pub port: Port,
    pub neighbor: NodeId,
    pub neighbor_port: Port,
    pub channel: ChannelId,
}

/// A network: hosts and switches with numbered ports, full-duplex links, flat adjacency.
///
/// Build one with a generator (`fat_tree::fat_tree`, `lsft::latin_square_fat_tree`, …), a
/// file reader in [`io`], or a [`TopologyBuilder`].
#[derive(Clone, Debug)]
pub struct Topology {
    name: String,
    /// Generator family and parameters, kept so later stages (and files) know the structure.
    family: String,
    params: BTreeMap<String, serde_json::Value>,
    /// The typed shape, computed once at build time (see [`structure`]).
    structure: Structure,
    /// Link layer and switch port buffer (see [`link_layer`]).
    switching: Switching,
    kinds: Vec<NodeKind>,
    labels: Vec<String>,
    radix: Vec<Port>,
    coords: Vec<Option<Vec<i64>>>,
    links: Vec<Link>,
    hosts: Vec<NodeId>,
    switches: Vec<NodeId>,
    /// Position of each node in `hosts` or `switches`.
    kind_index: Vec<u32>,
    adj_offsets: Vec<u32>,
    adj: Vec<Adjacent>,
    /// `port_channel[port_base[n] + p - 1]` is the channel leaving node `n` on port `p`.
    port_base: Vec<u32>,
    port_channel: Vec<ChannelId>,
}

impl Topology {
    /// Human-readable name ("lsft(q=3)").
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Generator family ("lsft", "torus", "file", …): a name for messages and files. Stages
    /// that need the shape ask [`structure`](Self::structure).
    pub fn family(&self) -> &str {
        &self.family
    }
    /// Generator parameters as JSON values (`order`, `dims`, …), kept for files and
    /// `topo info`; their meaning is in [`structure`](Self::structure).
    pub fn params(&self) -> &BTreeMap<String, serde_json::Value> {
        &self.params
    }
    /// The typed shape: lattice, fat-tree, LSFT, tree of switches, dragonfly, … or generic.
    pub fn structure(&self) -> &Structure {
        &self.structure
    }
    /// Link layer and switch port buffer: whether a full port drops (Ethernet) or waits
    /// (InfiniBand), and how many bytes it queues first.
    pub fn switching(&self) -> &Switching {
        &self.switching
    }
    /// State the link layer and port buffer (a generator's `--link-layer`/`--buffer`).
    pub fn set_switching(&mut self, switching: Switching) {
        self.switching = switching;
    }
    pub fn num_nodes(&self) -> usize {
        self.kinds.len()
    }
    pub fn num_hosts(&self) -> usize {
        self.hosts.len()
    }
    pub fn num_switches(&self) -> usize {
        self.switches.len()
    }
    pub fn num_links(&self) -> usize {
        self.links.len()
    }
    pub fn num_channels(&self) -> usize {
        2 * self.links.len()
    }
    /// Host node ids in host order; "host index" elsewhere means a position in this list.
    pub fn hosts(&self) -> &[NodeId] {
        &self.hosts
    }
    /// Switch node ids in switch order.
    pub fn switches(&self) -> &[NodeId] {
        &self.switches
    }
    pub fn kind(&self, node: NodeId) -> NodeKind {
        self.kinds[node as usize]
    }
    pub fn is_host(&self, node: NodeId) -> bool {
        self.kinds[node as usize] == NodeKind::Host
    }
    /// Position of `node` within [`hosts`](Self::hosts) or [`switches`](Self::switches).
    pub fn kind_index(&self, node: NodeId) -> usize {
        self.kind_index[node as usize] as usize
    }
    pub fn label(&self, node: NodeId) -> &str {
        &self.labels[node as usize]
    }
    /// Number of ports of `node` (connected or not).
    pub fn radix(&self, node: NodeId) -> Port {
        self.radix[node as usize]
    }
    pub fn coords(&self, node: NodeId) -> Option<&[i64]> {
        self.coords[node as usize].as_deref()
    }
    pub fn links(&self) -> &[Link] {
        &self.links
    }
    pub fn link(&self, link: LinkId) -> &Link {
        &self.links[link as usize]
    }
    /// The link a channel belongs to.
    pub fn channel_link(channel: ChannelId) -> LinkId {
        channel / 2
    }
    /// Source and destination endpoints of a directed channel.
    pub fn channel_ends(&self, channel: ChannelId) -> (Endpoint, Endpoint) {
        let l = &self.links[(channel / 2) as usize];
        if channel % 2 == 0 {
            (l.a, l.b)
        } else {
            (l.b, l.a)
        }
    }
    /// Connected ports of `node`, sorted by port number.
    pub fn neighbors(&self, node: NodeId) -> &[Adjacent] {
        let lo = self.adj_offsets[node as usize] as usize;
        let hi = self.adj_offsets[node as usize + 1] as usize;
        &self.adj[lo..hi]
    }
    /// Number of connected ports of `node`.
    pub fn degree(&self, node: NodeId) -> usize {
        self.neighbors(node).len()
    }
    /// Channel leaving `node` on `port`, if that port is connected.
    pub fn out_channel(&self, node: NodeId, port: Port) -> Option<ChannelId> {
        if port == 0 || port > self.radix[node as usize] {
            return None;
        }
        let c = self.port_channel[self.port_base[node as usize] as usize + port as usize - 1];
        (c != NO_CHANNEL).then_some(c)
    }
    /// The switch a host is attached to through its lowest connected port.
    pub fn host_switch(&self, host: NodeId) -> Option<NodeId> {
        self.neighbors(host).iter().map(|a| a.neighbor).find(|&n| !self.is_host(n))
    }
    /// Flat CSR arrays `(offsets, adjacency)` for hot loops.
    pub fn csr(&self) -> (&[u32], &[Adjacent]) {
        (&self.adj_offsets, &self.adj)
    }
    /// Node id with this label, if any (linear scan; for tests and file import).
    pub fn find_label(&self, label: &str) -> Option<NodeId> {
        self.labels.iter().position(|l| l == label).map(|i| i as NodeId)
    }

    /// Set every link's bandwidth and latency (the CLI's `--bandwidth/--latency`).
    pub fn set_all_links(&mut self, spec: LinkSpec) {
        for l in &mut self.links {
            l.spec = spec;
        }
    }

    /// A copy with every link's bandwidth multiplied by `factor` (latencies, ports and
    /// structure kept): the fabric an emulation running at `factor` of line rate carries, so
    /// a model predicts it. A bandwidth the factor takes out of [`LinkSpec::new`]'s range is
    /// refused naming the factor.
    ///
    /// ```
    /// use netweave_core::topology::{grid::mesh, LinkSpec};
    /// let mut t = mesh(&[2], 1).unwrap();
    /// t.set_all_links(LinkSpec::new(10.0, 50.0).unwrap());
    /// let slow = t.scaled(0.25).unwrap();
    /// assert_eq!(slow.link(0).spec, LinkSpec::new(2.5, 50.0).unwrap());
    /// ```
    pub fn scaled(&self, factor: f64) -> Result<Topology> {
        if !(factor > 0.0 && factor.is_finite()) {
            return crate::invalid!("the bandwidth scale must be a positive number, got {factor}");
        }
        let mut t = self.clone();
        for l in &mut t.links {
            l.spec = LinkSpec::new(l.spec.bandwidth_gbps * factor, l.spec.latency_ns)
                .map_err(|e| NetweaveError::InvalidParameter(format!("scaling the bandwidths by {factor}: {e}")))?;
        }
        Ok(t)
    }

    /// Whether `other` has the same nodes and the same links between the same ports (link
    /// speeds aside): a routing table of one then routes the other the same way.
    pub fn same_wiring(&self, other: &Topology) -> bool {
        self.kinds == other.kinds
            && self.radix == other.radix
            && self.links.len() == other.links.len()
            && self.links.iter().zip(&other.links).all(|(x, y)| (x.a, x.b) == (y.a, y.b))
    }

    /// Set every link's one-way latency to `latency_ns` (bandwidths kept), e.g. 0 for an
    /// emulation that adds none.
    pub fn set_link_latency(&mut self, latency_ns: f64) -> Result<()> {
        for l in &mut self.links {
            l.spec = LinkSpec::new(l.spec.bandwidth_gbps, latency_ns)?;
        }
        Ok(())
    }

    /// Rename the topology.
    pub fn set_name(&mut self, name: impl Into<String>) {
        self.name = name.into();
    }

    /// A builder holding a copy of this topology, to extend or modify it.
    pub fn to_builder(&self) -> TopologyBuilder {
        TopologyBuilder {
            name: self.name.clone(),
            family: self.family.clone(),
            params: self.params.clone(),
            structure: Some(self.structure.clone()),
            switching: Some(self.switching),
            kinds: self.kinds.clone(),
            labels: self.labels.clone(),
            radix: self.radix.clone(),
            coords: self.coords.clone(),
            links: self.links.clone(),
        }
    }
}

/// Collects nodes and links, then checks them and builds the flat [`Topology`].
///
/// Ports may be given explicitly ([`connect_ports`](Self::connect_ports)) or taken as the
/// lowest free port ([`connect`](Self::connect)). Hosts get one port unless
/// [`add_host_with_ports`](Self::add_host_with_ports) says otherwise.
#[derive(Clone, Debug, Default)]
pub struct TopologyBuilder {
    name: String,
    family: String,
    params: BTreeMap<String, serde_json::Value>,
    /// A structure stated outright (a file's); `None` derives it from family and params.
    structure: Option<Structure>,
    /// Link layer and port buffer stated outright; `None` takes the structure's default.
    switching: Option<Switching>,
    kinds: Vec<NodeKind>,
    labels: Vec<String>,
    radix: Vec<Port>,
    coords: Vec<Option<Vec<i64>>>,
    links: Vec<Link>,
}

impl TopologyBuilder {
    pub fn new(name: impl Into<String>) -> Self {
        TopologyBuilder { name: name.into(), family: "custom".into(), ..Default::default() }
    }

    /// Record the generator family and a parameter (kept in files and `topo info`); the
    /// [`Structure`] is derived from them at build time unless stated with
    /// [`structure`](Self::structure) afterwards.
    pub fn family(&mut self, family: &str) -> &mut Self {
        self.family = family.to_string();
        self.structure = None;
        self
    }
    pub fn param(&mut self, key: &str, value: impl Into<serde_json::Value>) -> &mut Self {
        self.params.insert(key.to_string(), value.into());
        self.structure = None;
        self
    }
    /// State the structure outright (file readers), instead of deriving it from the family.
    pub fn structure(&mut self, structure: Structure) -> &mut Self {
        self.structure = Some(structure);
        self
    }
    /// State the link layer and port buffer outright, instead of the structure's default.
    pub fn switching(&mut self, switching: Switching) -> &mut Self {
        self.switching = Some(switching);
        self
    }

    pub fn num_nodes(&self) -> usize {
        self.kinds.len()
    }

    /// Add a switch with `radix` ports.
    pub fn add_switch(&mut self, label: impl Into<String>, radix: Port) -> NodeId {
        self.add_node(NodeKind::Switch, label.into(), radix)
    }
    /// Add a host with one port.
    pub fn add_host(&mut self, label: impl Into<String>) -> NodeId {
        self.add_node(NodeKind::Host, label.into(), 1)
    }
    /// Add a host with several ports (multi-rail).
    pub fn add_host_with_ports(&mut self, label: impl Into<String>, ports: Port) -> NodeId {
        self.add_node(NodeKind::Host, label.into(), ports)
    }
    pub fn add_node(&mut self, kind: NodeKind, label: String, radix: Port) -> NodeId {
        self.kinds.push(kind);
        self.labels.push(label);
        self.radix.push(radix);
        self.coords.push(None);
        (self.kinds.len() - 1) as NodeId
    }
    pub fn set_coords(&mut self, node: NodeId, coords: Vec<i64>) {
        self.coords[node as usize] = Some(coords);
    }
    /// Grow a node's port count (used by readers that learn ports as they go).
    pub fn ensure_radix(&mut self, node: NodeId, radix: Port) {
        let r = &mut self.radix[node as usize];
        *r = (*r).max(radix);
    }

    /// Link `a`'s port `pa` to `b`'s port `pb`. Port conflicts are reported by [`build`](Self::build).
    pub fn connect_ports(&mut self, a: NodeId, pa: Port, b: NodeId, pb: Port, spec: LinkSpec) -> LinkId {
        self.links.push(Link { a: Endpoint { node: a, port: pa }, b: Endpoint { node: b, port: pb }, spec });
        (self.links.len() - 1) as LinkId
    }

    /// Link the lowest free ports of `a` and `b`; errors if either node has none left.
    pub fn connect(&mut self, a: NodeId, b: NodeId, spec: LinkSpec) -> Result<LinkId> {
        let pa = self.free_port(a)?;
        let pb = self.free_port(b)?;
        Ok(self.connect_ports(a, pa, b, pb, spec))
    }

    /// Lowest unused port of `node` (linear in its link count; generators use explicit ports
    /// where that matters).
    fn free_port(&self, node: NodeId) -> Result<Port> {
        let radix = self.radix[node as usize];
        let mut used = vec![false; radix as usize + 1];
        for l in &self.links {
            for e in [l.a, l.b] {
                if e.node == node && (e.port as usize) < used.len() {
                    used[e.port as usize] = true;
                }
            }
        }
        (1..=radix).find(|&p| !used[p as usize]).ok_or_else(|| {
            NetweaveError::InvalidTopology(format!(
                "node {} ({}) has no free port left (radix {radix})",
                node, self.labels[node as usize]
            ))
        })
    }

    /// Check ports and endpoints, then build the flat topology.
    pub fn build(self) -> Result<Topology> {
        let n = self.kinds.len();
        let bad = |m: String| Err(NetweaveError::InvalidTopology(m));
        let mut port_base = Vec::with_capacity(n + 1);
        let mut total = 0u32;
        for &r in &self.radix {
            port_base.push(total);
            total += r as u32;
        }
        port_base.push(total);
        let mut port_channel = vec![NO_CHANNEL; total as usize];
        let mut degree = vec![0u32; n];
        for (li, l) in self.links.iter().enumerate() {
            if !l.spec.bandwidth_gbps.is_finite() || l.spec.bandwidth_gbps <= 0.0 {
                return bad(format!("link {li} has non-positive bandwidth {}", l.spec.bandwidth_gbps));
            }
            if !l.spec.latency_ns.is_finite() || l.spec.latency_ns < 0.0 {
                return bad(format!("link {li} has negative latency {}", l.spec.latency_ns));
            }
            if l.a.node == l.b.node {
                return bad(format!("link {li} connects node {} to itself", l.a.node));
            }
            for (dir, e) in [(0u32, l.a), (1u32, l.b)] {
                if e.node as usize >= n {
                    return bad(format!("link {li} names node {} but there are only {n} nodes", e.node));
                }
                let radix = self.radix[e.node as usize];
                if e.port == 0 || e.port > radix {
                    return bad(format!(
                        "link {li} uses port {} of node {} ({}), which has ports 1..{radix}",
                        e.port, e.node, self.labels[e.node as usize]
                    ));
                }
                let slot = &mut port_channel[(port_base[e.node as usize] + e.port as u32 - 1) as usize];
                if *slot != NO_CHANNEL {
                    return bad(format!(
                        "port {} of node {} ({}) is used by two links",
                        e.port, e.node, self.labels[e.node as usize]
                    ));
                }
                *slot = 2 * li as u32 + dir;
                degree[e.node as usize] += 1;
            }
        }
        let mut adj_offsets = Vec::with_capacity(n + 1);
        let mut acc = 0u32;
        for d in &degree {
            adj_offsets.push(acc);
            acc += d;
        }
        adj_offsets.push(acc);
        // Fill adjacency in port order by walking each node's port table.
        let mut adj = Vec::with_capacity(acc as usize);
        for node in 0..n {
            for p in 0..self.radix[node] as u32 {
                let c = port_channel[(port_base[node] + p) as usize];
                if c == NO_CHANNEL {
                    continue;
                }
                let l = &self.links[(c / 2) as usize];
                let far = if c % 2 == 0 { l.b } else { l.a };
                adj.push(Adjacent { port: (p + 1) as Port, neighbor: far.node, neighbor_port: far.port, channel: c });
            }
        }
        let mut hosts = Vec::new();
        let mut switches = Vec::new();
        let mut kind_index = Vec::with_capacity(n);
        for (i, k) in self.kinds.iter().enumerate() {
            match k {
                NodeKind::Host => {
                    kind_index.push(hosts.len() as u32);
                    hosts.push(i as NodeId);
                }
                NodeKind::Switch => {
                    kind_index.push(switches.len() as u32);
                    switches.push(i as NodeId);
                }
            }
        }
        let structure = match self.structure {
            Some(s) => s,
            None => Structure::from_family(&self.family, &self.params),
        };
        let switching = self.switching.unwrap_or_else(|| Switching::default_for(&structure));
        Ok(Topology {
            name: self.name,
            family: self.family,
            params: self.params,
            structure,
            switching,
            kinds: self.kinds,
            labels: self.labels,
            radix: self.radix,
            coords: self.coords,
            links: self.links,
            hosts,
            switches,
            kind_index,
            adj_offsets,
            adj,
            port_base,
            port_channel,
        })
    }
}

/// Largest node count a generator builds: about 16.7 M nodes (a few GiB with labels), far
/// beyond any real fabric, and small enough that a typo like `60000x60000` fails at once
/// instead of exhausting memory.
pub const MAX_NODES: u64 = 1 << 24;

/// Check that a topology of this size fits netweave's id types and memory.
///
/// Node ids are `u32`, channel ids are `u32` with `u32::MAX` reserved as "no channel"
/// (so at most `2^31 − 1` links), the flat port table is indexed by `u32`, and ports are `u16`.
/// Generators call this *before* allocating anything, so an absurd request is a one-line error
/// instead of an out-of-memory abort or an overflow panic in [`TopologyBuilder::build`].
/// `total_ports` is the sum of all node radices (switch ports plus one per host).
pub(crate) fn check_capacity(family: &str, nodes: u64, links: u64, total_ports: u64, max_radix: u64) -> Result<()> {
    if nodes > u32::MAX as u64 {
        return crate::invalid!("{family}: {nodes} nodes exceed the 32-bit node id range");
    }
    if nodes > MAX_NODES || links > MAX_NODES * 4 {
        return crate::invalid!(
            "{family}: {nodes} nodes and {links} links are more than netweave builds in memory \
             (at most {MAX_NODES} nodes and {} links)",
            MAX_NODES * 4
        );
    }
    if links.saturating_mul(2) > u32::MAX as u64 {
        return crate::invalid!(
            "{family}: {links} links exceed the 32-bit channel id range (at most {})",
            u32::MAX / 2
        );
    }
    if total_ports > u32::MAX as u64 {
        return crate::invalid!("{family}: {total_ports} ports in total exceed the 32-bit port table");
    }
    if max_radix > Port::MAX as u64 {
        return crate::invalid!(
            "{family}: a switch would need {max_radix} ports, more than the {} a 16-bit port number allows",
            Port::MAX
        );
    }
    // What a node (label, coordinates, kind, CSR offsets) and a link (two ends, two adjacency
    // entries, its spec) take once built, with the builder's copies alongside.
    const BYTES_PER_NODE: u128 = 160;
    const BYTES_PER_LINK: u128 = 128;
    crate::budget::ensure(
        &format!("{family}: {nodes} nodes and {links} links"),
        u128::from(nodes) * BYTES_PER_NODE + u128::from(links) * BYTES_PER_LINK,
    )
}

/// Check a size parameter is at least `min`, with a message naming it.
pub(crate) fn require_at_least(name: &str, value: u64, min: u64) -> Result<()> {
    if value < min {
        return crate::invalid!("{name} must be at least {min}, got {value}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn star(hosts: usize) -> Topology {
        let mut b = TopologyBuilder::new("star");
        let s = b.add_switch("s", hosts as Port);
        for i in 0..hosts {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, s, LinkSpec::default()).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn channels_pair_up_per_link() {
        let t = star(3);
        assert_eq!(t.num_links(), 3);
        for c in 0..t.num_channels() as ChannelId {
            let (from, to) = t.channel_ends(c);
            let (back_from, back_to) = t.channel_ends(c ^ 1);
            assert_eq!((from, to), (back_to, back_from));
            assert_eq!(t.out_channel(from.node, from.port), Some(c));
        }
    }

    #[test]
    fn csr_lists_neighbours_in_port_order() {
        let t = star(4);
        let s = t.switches()[0];
        let ports: Vec<Port> = t.neighbors(s).iter().map(|a| a.port).collect();
        assert_eq!(ports, vec![1, 2, 3, 4]);
        assert_eq!(t.host_switch(t.hosts()[2]), Some(s));
    }

    #[test]
    fn port_reuse_is_rejected() {
        let mut b = TopologyBuilder::new("bad");
        let s = b.add_switch("s", 2);
        let h0 = b.add_host("a");
        let h1 = b.add_host("b");
        b.connect_ports(h0, 1, s, 1, LinkSpec::default());
        b.connect_ports(h1, 1, s, 1, LinkSpec::default());
        let err = b.build().unwrap_err().to_string();
        assert!(err.contains("used by two links"), "{err}");
    }

    #[test]
    fn full_switch_reports_no_free_port() {
        let mut b = TopologyBuilder::new("full");
        let s = b.add_switch("s", 1);
        let h0 = b.add_host("a");
        let h1 = b.add_host("b");
        b.connect(h0, s, LinkSpec::default()).unwrap();
        assert!(b.connect(h1, s, LinkSpec::default()).is_err());
    }

    #[test]
    fn scaled_multiplies_each_links_bandwidth_and_keeps_the_rest() {
        let mut b = TopologyBuilder::new("two speeds");
        let s = b.add_switch("s", 2);
        let (h0, h1) = (b.add_host("a"), b.add_host("b"));
        b.connect(h0, s, LinkSpec::new(100.0, 300.0).unwrap()).unwrap();
        b.connect(h1, s, LinkSpec::new(40.0, 20.0).unwrap()).unwrap();
        let t = b.build().unwrap();
        let mut slow = t.scaled(0.01).unwrap();
        // 100 x 0.01 = 1 and 40 x 0.01 = 0.4 Gbit/s; latencies as they were.
        let specs: Vec<(f64, f64)> = slow.links().iter().map(|l| (l.spec.bandwidth_gbps, l.spec.latency_ns)).collect();
        assert_eq!(specs, vec![(1.0, 300.0), (0.4, 20.0)]);
        assert_eq!((slow.name(), slow.num_channels(), slow.channel_ends(3)), (t.name(), 4, t.channel_ends(3)));
        slow.set_link_latency(0.0).unwrap();
        assert!(slow.links().iter().all(|l| l.spec.latency_ns == 0.0));
        assert_eq!(t.link(1).spec.latency_ns, 20.0, "the original is untouched");
        assert!(t.same_wiring(&slow) && !t.same_wiring(&star(3)));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(t.scaled(bad).is_err(), "{bad}");
        }
        // 40 Gbit/s x 1e-9 falls below 1 kbit/s.
        let e = t.scaled(1e-9).unwrap_err().to_string();
        assert!(e.contains("scaling the bandwidths by 0.000000001"), "{e}");
    }

    #[test]
    fn bad_link_spec_is_rejected() {
        assert!(LinkSpec::new(0.0, 1.0).is_err());
        assert!(LinkSpec::new(10.0, -1.0).is_err());
        assert!(LinkSpec::new(f64::NAN, 1.0).is_err());
    }
}
