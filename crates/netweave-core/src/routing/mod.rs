//! Routing: destination-based forwarding tables — the second pipeline stage.
//!
//! Every engine produces one form, [`RoutingTable`]: for each switch and each destination
//! host, the output port (`out_port[switch][dest host]`, the InfiniBand LFT model), plus a
//! [`VcPolicy`]. Evaluators only ever walk paths through [`RoutingTable::path`], so any engine
//! works with any evaluator.
//!
//! ```
//! use netweave_core::topology::grid::mesh;
//! use netweave_core::routing::shortest_path;
//! let topo = mesh(&[3, 3], 1).unwrap();
//! let routes = shortest_path(&topo).unwrap();
//! let mut path = Vec::new();
//! routes.path(&topo, 0, 8, &mut path).unwrap();
//! assert_eq!(path.len(), 6); // host link, 4 switch hops, host link
//! ```

use std::collections::VecDeque;

use crate::error::{NetweaveError, Result};
use crate::topology::{ChannelId, NodeId, Port, Topology};

/// Output port meaning "no route" in [`RoutingTable`].
pub const NO_PORT: Port = 0;

/// Virtual-channel policy carried with a routing table.
///
/// Today's engines use a single VC; deadlock-avoiding engines that need several VCs attach
/// their injection and per-hop VC rules here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VcPolicy {
    /// Number of virtual channels the engine needs.
    pub num_vcs: u8,
}

impl VcPolicy {
    /// Everything on VC 0.
    pub fn single() -> Self {
        VcPolicy { num_vcs: 1 }
    }
}

/// Forwarding tables for every switch and destination host, plus the VC policy.
#[derive(Clone, Debug)]
pub struct RoutingTable {
    engine: String,
    num_switches: usize,
    num_hosts: usize,
    /// `out_port[switch_index * num_hosts + dest_host_index]`; [`NO_PORT`] = unreachable.
    out_port: Vec<Port>,
    vc: VcPolicy,
}

impl RoutingTable {
    /// An empty table (every entry [`NO_PORT`]) sized for `topo`.
    pub fn new(topo: &Topology, engine: impl Into<String>) -> Self {
        RoutingTable {
            engine: engine.into(),
            num_switches: topo.num_switches(),
            num_hosts: topo.num_hosts(),
            out_port: vec![NO_PORT; topo.num_switches() * topo.num_hosts()],
            vc: VcPolicy::single(),
        }
    }
    /// Name of the engine that filled the table.
    pub fn engine(&self) -> &str {
        &self.engine
    }
    pub fn vc_policy(&self) -> &VcPolicy {
        &self.vc
    }
    pub fn num_switches(&self) -> usize {
        self.num_switches
    }
    pub fn num_hosts(&self) -> usize {
        self.num_hosts
    }
    /// Output port of switch `switch_index` towards host `dest_host`.
    pub fn out_port(&self, switch_index: usize, dest_host: usize) -> Port {
        self.out_port[switch_index * self.num_hosts + dest_host]
    }
    pub fn set_out_port(&mut self, switch_index: usize, dest_host: usize, port: Port) {
        self.out_port[switch_index * self.num_hosts + dest_host] = port;
    }
    /// The whole table, row-major `[switch][dest host]`.
    pub fn ports(&self) -> &[Port] {
        &self.out_port
    }

    /// Append to `path` the channels a packet from host `src` to host `dst` (host indices)
    /// crosses. Hosts inject on their first connected port. Errors if the tables drop the
    /// packet, deliver it to the wrong host, or loop.
    pub fn path(&self, topo: &Topology, src: usize, dst: usize, path: &mut Vec<ChannelId>) -> Result<()> {
        if src >= self.num_hosts || dst >= self.num_hosts || topo.num_hosts() != self.num_hosts {
            return Err(NetweaveError::Routing(format!(
                "pair ({src}, {dst}) is outside a table for {} hosts",
                self.num_hosts
            )));
        }
        let src_node = topo.hosts()[src];
        let dst_node = topo.hosts()[dst];
        if src == dst {
            return Ok(());
        }
        let Some(first) = topo.neighbors(src_node).first() else {
            return Err(NetweaveError::Routing(format!("host {} has no link", topo.label(src_node))));
        };
        path.push(first.channel);
        let mut node: NodeId = first.neighbor;
        let mut hops = 0usize;
        while node != dst_node {
            if topo.is_host(node) {
                return Err(NetweaveError::Routing(format!(
                    "route {} -> {} ends at host {}",
                    topo.label(src_node),
                    topo.label(dst_node),
                    topo.label(node)
                )));
            }
            hops += 1;
            if hops > self.num_switches {
                return Err(NetweaveError::Routing(format!(
                    "route {} -> {} loops",
                    topo.label(src_node),
                    topo.label(dst_node)
                )));
            }
            let port = self.out_port(topo.kind_index(node), dst);
            let channel = topo.out_channel(node, port).ok_or_else(|| {
                NetweaveError::Routing(format!(
                    "switch {} has no route to {} (port {port})",
                    topo.label(node),
                    topo.label(dst_node)
                ))
            })?;
            path.push(channel);
            node = topo.channel_ends(channel).1.node;
        }
        Ok(())
    }
}

/// Minimal-hop routing with balanced next-hop choice (OpenSM min-hop style).
///
/// For each destination host, every switch forwards to a neighbour one hop closer to the
/// destination's switch; among several, it takes the port that already carries the fewest
/// destinations (lowest port on ties), which spreads routes evenly over parallel paths.
pub fn shortest_path(topo: &Topology) -> Result<RoutingTable> {
    let mut table = RoutingTable::new(topo, "shortest-path");
    let ns = topo.num_switches();
    // Per (switch, port) count of destinations already routed through it.
    let max_radix = topo.switches().iter().map(|&s| topo.radix(s) as usize).max().unwrap_or(0);
    let mut port_load = vec![0u32; ns * (max_radix + 1)];
    let mut dist = vec![u32::MAX; ns];
    let mut queue = VecDeque::with_capacity(ns);
    // Hosts sharing an attachment switch share the BFS; group them.
    let mut hosts_by_switch: Vec<Vec<usize>> = vec![Vec::new(); ns];
    for (hi, &h) in topo.hosts().iter().enumerate() {
        let sw = topo
            .host_switch(h)
            .ok_or_else(|| NetweaveError::Routing(format!("host {} is not attached to a switch", topo.label(h))))?;
        hosts_by_switch[topo.kind_index(sw)].push(hi);
    }
    for (target, dests) in hosts_by_switch.iter().enumerate() {
        if dests.is_empty() {
            continue;
        }
        dist.fill(u32::MAX);
        dist[target] = 0;
        queue.push_back(target);
        while let Some(v) = queue.pop_front() {
            for a in topo.neighbors(topo.switches()[v]) {
                if topo.is_host(a.neighbor) {
                    continue;
                }
                let u = topo.kind_index(a.neighbor);
                if dist[u] == u32::MAX {
                    dist[u] = dist[v] + 1;
                    queue.push_back(u);
                }
            }
        }
        for &d in dests {
            let dest_node = topo.hosts()[d];
            for s in 0..ns {
                let node = topo.switches()[s];
                let port = if s == target {
                    topo.neighbors(node).iter().find(|a| a.neighbor == dest_node).map(|a| a.port)
                } else if dist[s] == u32::MAX {
                    None
                } else {
                    topo.neighbors(node)
                        .iter()
                        .filter(|a| !topo.is_host(a.neighbor) && dist[topo.kind_index(a.neighbor)] + 1 == dist[s])
                        .min_by_key(|a| (port_load[s * (max_radix + 1) + a.port as usize], a.port))
                        .map(|a| a.port)
                };
                if let Some(p) = port {
                    port_load[s * (max_radix + 1) + p as usize] += 1;
                    table.set_out_port(s, d, p);
                }
            }
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{LinkSpec, TopologyBuilder};

    /// Two switches joined by two parallel links, two hosts on each.
    fn two_switches() -> Topology {
        let mut b = TopologyBuilder::new("2sw2path");
        let s0 = b.add_switch("s0", 4);
        let s1 = b.add_switch("s1", 4);
        b.connect(s0, s1, LinkSpec::default()).unwrap();
        b.connect(s0, s1, LinkSpec::default()).unwrap();
        for i in 0..4 {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, if i < 2 { s0 } else { s1 }, LinkSpec::default()).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn every_pair_is_delivered_minimally() {
        let t = two_switches();
        let r = shortest_path(&t).unwrap();
        let mut path = Vec::new();
        for s in 0..4 {
            for d in 0..4 {
                path.clear();
                r.path(&t, s, d, &mut path).unwrap();
                let same = (s < 2) == (d < 2);
                let expected = if s == d {
                    0
                } else if same {
                    2
                } else {
                    3
                };
                assert_eq!(path.len(), expected, "{s}->{d}");
                if let Some(&last) = path.last() {
                    assert_eq!(t.channel_ends(last).1.node, t.hosts()[d]);
                }
            }
        }
    }

    #[test]
    fn parallel_links_are_balanced_over_destinations() {
        let t = two_switches();
        let r = shortest_path(&t).unwrap();
        // s0 reaches hosts 2 and 3 through different trunk ports.
        assert_ne!(r.out_port(0, 2), r.out_port(0, 3));
    }

    #[test]
    fn broken_table_is_reported_not_followed() {
        let t = two_switches();
        let mut r = shortest_path(&t).unwrap();
        r.set_out_port(0, 2, NO_PORT);
        let err = r.path(&t, 0, 2, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("no route"), "{err}");
        // A loop: s0 and s1 point at each other for host 3.
        let mut r = shortest_path(&t).unwrap();
        let back = t.neighbors(t.switches()[1]).iter().find(|a| !t.is_host(a.neighbor)).unwrap().port;
        r.set_out_port(1, 3, back);
        let err = r.path(&t, 0, 3, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("loops"), "{err}");
    }
}
