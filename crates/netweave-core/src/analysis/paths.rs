//! Where each flow goes: the channels of every routed host pair, looked up fast.
//!
//! Destination-based tables make a path depend only on the source host's *attachment* (the
//! node its first port reaches, usually its leaf switch) and the destination host: after the
//! injection channel, every host behind the same switch follows the same channels. So for
//! schedules with many messages the analysis walks [`RoutingTable::path`] once per
//! (attachment, destination) pair into one flat table and then counts loads by table lookup;
//! for sparse schedules on large fabrics it walks each message's path instead.

use rayon::prelude::*;

use crate::routing::RoutingTable;
use crate::topology::{ChannelId, NodeId, Topology};

/// Marks a host without links (its flows are walked, so the router's error message surfaces).
const NO_GROUP: u32 = u32::MAX;

/// Largest table, in (attachment, destination) pairs, built ahead of the count.
const MAX_TABLE_PAIRS: usize = 1 << 24;

/// The routed channels of every (attachment, destination host) pair, in CSR form.
pub(crate) struct PathTable {
    num_hosts: usize,
    /// Attachment group of each host; [`NO_GROUP`] for hosts without links.
    group_of_host: Vec<u32>,
    /// Injection channel of each host (its first port).
    injection: Vec<ChannelId>,
    /// Channels after injection of pair `g·H + d` are `channels[start[i]..start[i + 1]]`.
    start: Vec<u32>,
    channels: Vec<ChannelId>,
    /// Switch-to-switch channels of each pair's path.
    hops: Vec<u16>,
}

impl PathTable {
    /// Build the table when it pays: at most [`MAX_TABLE_PAIRS`] pairs, no more than twice the
    /// `messages` the schedule will look up, and every pair routable (otherwise `None`, so
    /// per-message walks report the exact failing pair, and only if the schedule uses it).
    pub(crate) fn build(topo: &Topology, routes: &RoutingTable, fabric: &[bool], messages: usize) -> Option<PathTable> {
        let hosts = topo.hosts();
        let num_hosts = hosts.len();
        // Group hosts by the node their first port reaches; remember one representative each.
        let mut group_of_node = vec![NO_GROUP; topo.num_nodes()];
        let mut group_of_host = Vec::with_capacity(num_hosts);
        let mut injection = Vec::with_capacity(num_hosts);
        let mut members: Vec<Vec<u32>> = Vec::new();
        for (h, &node) in hosts.iter().enumerate() {
            let Some(first) = topo.neighbors(node).first() else {
                group_of_host.push(NO_GROUP);
                injection.push(0);
                continue;
            };
            let g = &mut group_of_node[first.neighbor as usize];
            if *g == NO_GROUP {
                *g = members.len() as u32;
                members.push(Vec::new());
            }
            members[*g as usize].push(h as u32);
            group_of_host.push(*g);
            injection.push(first.channel);
        }
        let pairs = members.len().checked_mul(num_hosts)?;
        if pairs > MAX_TABLE_PAIRS || pairs > messages.saturating_mul(2) {
            return None;
        }
        // Walk each group's row in parallel: (lengths, channels) per group.
        let rows: Vec<Option<(Vec<u32>, Vec<u16>, Vec<ChannelId>)>> = members
            .par_iter()
            .map(|group| {
                let mut lens = Vec::with_capacity(num_hosts);
                let mut hops = Vec::with_capacity(num_hosts);
                let mut chans = Vec::new();
                let mut buf = Vec::new();
                for d in 0..num_hosts {
                    // A representative other than the destination; a group whose only host is
                    // `d` never sends to `d` off-host, so its entry stays empty.
                    let Some(&rep) = group.iter().find(|&&h| h as usize != d) else {
                        lens.push(0);
                        hops.push(0);
                        continue;
                    };
                    buf.clear();
                    routes.path(topo, rep as usize, d, &mut buf).ok()?;
                    chans.extend_from_slice(&buf[1..]);
                    lens.push(buf.len() as u32 - 1);
                    let h = buf.iter().filter(|&&c| fabric[c as usize]).count();
                    hops.push(u16::try_from(h).ok()?);
                }
                Some((lens, hops, chans))
            })
            .collect();
        let total: usize = rows.iter().map(|r| r.as_ref().map_or(0, |(_, _, c)| c.len())).sum();
        if total > u32::MAX as usize {
            return None;
        }
        let mut start = Vec::with_capacity(pairs + 1);
        let mut channels = Vec::with_capacity(total);
        let mut hops = Vec::with_capacity(pairs);
        start.push(0u32);
        for row in rows {
            let (lens, row_hops, chans) = row?;
            hops.extend_from_slice(&row_hops);
            let mut at = channels.len() as u32;
            for len in lens {
                at += len;
                start.push(at);
            }
            channels.extend_from_slice(&chans);
        }
        Some(PathTable { num_hosts, group_of_host, injection, start, channels, hops })
    }

    /// Injection channel, the remaining channels and the switch-to-switch hops of the flow
    /// from host `src` to host `dst`; `None` if `src` has no link.
    #[inline]
    pub(crate) fn lookup(&self, src: usize, dst: usize) -> Option<(ChannelId, &[ChannelId], u16)> {
        let g = self.group_of_host[src];
        if g == NO_GROUP {
            return None;
        }
        let pair = g as usize * self.num_hosts + dst;
        let (a, b) = (self.start[pair] as usize, self.start[pair + 1] as usize);
        Some((self.injection[src], &self.channels[a..b], self.hops[pair]))
    }
}

/// True for channels between two switches (the "links" of paper 003's hop and byte counts).
pub(crate) fn fabric_channels(topo: &Topology) -> Vec<bool> {
    let mut fabric = vec![false; topo.num_channels()];
    for (l, link) in topo.links().iter().enumerate() {
        let both = !topo.is_host(link.a.node) && !topo.is_host(link.b.node);
        fabric[2 * l] = both;
        fabric[2 * l + 1] = both;
    }
    fabric
}

/// Tail and head node of a channel (for listing contended links).
pub(crate) fn channel_nodes(topo: &Topology, channel: ChannelId) -> (NodeId, NodeId) {
    let (a, b) = topo.channel_ends(channel);
    (a.node, b.node)
}
