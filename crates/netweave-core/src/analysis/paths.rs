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

/// One group's row of the table: path lengths, hops and channels for every destination.
type Row = (Vec<u16>, Vec<u16>, Vec<ChannelId>);

/// The routed channels of every (attachment, destination host) pair, padded to one width.
///
/// Pair `g·H + d` owns the slots `entries[(g·H + d)·(W + 1)..][..W + 1]`: its channels after
/// injection, then [`PathTable::pad`] up to the widest path `W`, then its switch-to-switch hop
/// count and length packed in one word. A fixed stride keeps a lookup to one cache line and
/// lets the count touch `W` slots without a branch on the length: callers size their
/// per-channel arrays one past the last channel, so the padding lands in a slot they ignore.
pub(crate) struct PathTable {
    num_hosts: usize,
    /// Channels after injection of the longest path (`W`).
    width: usize,
    /// The padding channel: one past the topology's last channel.
    pad: ChannelId,
    /// Attachment group and injection channel (first port) of each host; the group is
    /// [`NO_GROUP`] for hosts without links.
    host: Vec<HostEntry>,
    entries: Vec<u32>,
}

/// A host's attachment group and injection channel, side by side (one load per lookup).
#[derive(Clone, Copy)]
struct HostEntry {
    group: u32,
    injection: ChannelId,
}

/// Largest table in slots (4 bytes each); larger ones are walked message by message.
const MAX_TABLE_SLOTS: usize = 1 << 26;

/// Widest path (channels after injection) the table pads to; longer routes are walked.
const MAX_WIDTH: usize = 15;

impl PathTable {
    /// Build the table when it pays: at most [`MAX_TABLE_PAIRS`] pairs, no more than twice the
    /// `messages` the schedule will look up, paths of at most [`MAX_WIDTH`] channels after
    /// injection, and every pair routable (otherwise `None`, so per-message walks report the
    /// exact failing pair, and only if the schedule uses it).
    pub(crate) fn build(topo: &Topology, routes: &RoutingTable, fabric: &[bool], messages: usize) -> Option<PathTable> {
        let hosts = topo.hosts();
        let num_hosts = hosts.len();
        // Group hosts by the node their first port reaches; remember one representative each.
        let mut group_of_node = vec![NO_GROUP; topo.num_nodes()];
        let mut host = Vec::with_capacity(num_hosts);
        let mut members: Vec<Vec<u32>> = Vec::new();
        for (h, &node) in hosts.iter().enumerate() {
            let Some(first) = topo.neighbors(node).first() else {
                host.push(HostEntry { group: NO_GROUP, injection: 0 });
                continue;
            };
            let g = &mut group_of_node[first.neighbor as usize];
            if *g == NO_GROUP {
                *g = members.len() as u32;
                members.push(Vec::new());
            }
            members[*g as usize].push(h as u32);
            host.push(HostEntry { group: *g, injection: first.channel });
        }
        let pairs = members.len().checked_mul(num_hosts)?;
        if pairs > MAX_TABLE_PAIRS || pairs > messages.saturating_mul(2) {
            return None;
        }
        let pad = ChannelId::try_from(topo.num_channels()).ok()?;
        // Walk each group's row in parallel: (lengths, hops, channels) per group.
        let rows: Vec<Option<Row>> = members
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
                    if buf.len() - 1 > MAX_WIDTH {
                        return None;
                    }
                    chans.extend_from_slice(&buf[1..]);
                    lens.push(buf.len() as u16 - 1);
                    let h = buf.iter().filter(|&&c| fabric[c as usize]).count();
                    hops.push(u16::try_from(h).ok()?);
                }
                Some((lens, hops, chans))
            })
            .collect();
        let mut width = 0;
        for row in &rows {
            width = width.max(row.as_ref()?.0.iter().copied().max().unwrap_or(0) as usize);
        }
        if pairs * (width + 1) > MAX_TABLE_SLOTS {
            return None;
        }
        let mut entries = Vec::with_capacity(pairs * (width + 1));
        for row in rows {
            let (lens, row_hops, chans) = row?;
            let mut at = 0;
            for (len, hops) in lens.into_iter().zip(row_hops) {
                let len = len as usize;
                entries.extend_from_slice(&chans[at..at + len]);
                entries.resize(entries.len() + width - len, pad);
                entries.push(u32::from(hops) | (len as u32) << 16);
                at += len;
            }
        }
        Some(PathTable { num_hosts, width, pad, host, entries })
    }

    /// Channels after injection of the widest path; every entry has this many slots.
    #[inline(always)]
    pub(crate) fn width(&self) -> usize {
        self.width
    }

    /// The padding channel (one past the topology's last channel).
    #[inline(always)]
    pub(crate) fn pad(&self) -> ChannelId {
        self.pad
    }

    /// Injection channel of host `src` and the padded slots of the pair `src → dst`
    /// (`width()` channels, then the packed hops and length); `None` if `src` has no link.
    #[inline(always)]
    pub(crate) fn entry(&self, src: usize, dst: usize) -> Option<(ChannelId, &[u32])> {
        let HostEntry { group, injection } = self.host[src];
        if group == NO_GROUP {
            return None;
        }
        let stride = self.width + 1;
        let at = (group as usize * self.num_hosts + dst) * stride;
        Some((injection, &self.entries[at..at + stride]))
    }

    /// Injection channel, the remaining channels and the switch-to-switch hops of the flow
    /// from host `src` to host `dst`; `None` if `src` has no link.
    #[inline(always)]
    pub(crate) fn lookup(&self, src: usize, dst: usize) -> Option<(ChannelId, &[ChannelId], u16)> {
        let (injection, slots) = self.entry(src, dst)?;
        let meta = slots[self.width];
        Some((injection, &slots[..(meta >> 16) as usize], meta as u16))
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
