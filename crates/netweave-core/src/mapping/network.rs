//! The mapper's flat view of a routed network: every route walkable from two arrays.
//!
//! A destination-based table already is a compact encoding of every host-to-host path, so the
//! mapper keeps it in that form instead of expanding all `hosts²` paths (4,096 hosts would need
//! ~800 MB of channel lists): `next_channel[dst · switches + switch]` is the channel a packet for
//! `dst` leaves `switch` on, `channel_switch[c]` the switch channel `c` enters (or [`AT_HOST`]).
//! A path is then a chain of two flat lookups per hop. The table is stored destination-major so
//! one walk stays inside one row: on a lattice, consecutive routers along a dimension are
//! neighbours in that row, which keeps walks in cache. Every pair is walked once at build time
//! (in parallel, row by row), which proves all routes deliver and fills the `hops` table, so
//! later walks need no checks.

use rayon::prelude::*;

use crate::error::{NetweaveError, Result};
use crate::routing::RoutingTable;
use crate::topology::{ChannelId, Topology, NO_CHANNEL};

/// `channel_switch` value of a channel that ends at a host.
pub const AT_HOST: u32 = u32::MAX;

/// Largest `hosts²` the flat tables may hold (4 bytes each for `next_channel`).
const MAX_PAIRS: u64 = 1 << 28;

/// A torus or mesh lattice behind the hosts, when the topology is one (for boxes and curves).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lattice {
    /// Routers per dimension, dimension 0 fastest in router ids.
    pub dims: Vec<u32>,
    /// Wrap-around links in every dimension (torus) or none (mesh).
    pub torus: bool,
    /// Hosts per router; host index = `router · hosts_per_router + local`.
    pub hosts_per_router: u32,
}

impl Lattice {
    /// Router id of coordinates `x` (dimension 0 fastest).
    pub fn router_id(&self, x: &[u32]) -> u32 {
        let mut id = 0u32;
        for d in (0..self.dims.len()).rev() {
            id = id * self.dims[d] + x[d];
        }
        id
    }
    /// Coordinates of router `id`.
    pub fn router_coords(&self, mut id: u32, x: &mut [u32]) {
        for (xd, &k) in x.iter_mut().zip(&self.dims) {
            *xd = id % k;
            id /= k;
        }
    }
    pub fn num_routers(&self) -> u32 {
        self.dims.iter().product()
    }
}

/// Flat routes and host slots for the mapper.
#[derive(Clone, Debug)]
pub struct MapNetwork {
    num_hosts: u32,
    num_switches: u32,
    num_channels: u32,
    /// First channel of each host (its injection link).
    inject: Vec<ChannelId>,
    /// `next_channel[dst · switches + switch]`.
    next_channel: Vec<ChannelId>,
    /// Switch index a channel enters, or [`AT_HOST`].
    channel_switch: Vec<u32>,
    /// Switch-to-switch hops of every host pair, `hops[dst · hosts + src]`.
    hops: Vec<u16>,
    /// Largest switch-to-switch hop count of any pair.
    max_hops: u32,
    /// Rank slots per host.
    slots_per_host: u32,
    lattice: Option<Lattice>,
    /// Host labels, for rankfiles.
    host_labels: Vec<String>,
    /// Router coordinates of every host, flat `[host · dims + d]` (empty without a lattice).
    host_coords: Vec<u32>,
}

impl MapNetwork {
    /// Build from a topology and its routes, with `slots_per_host` rank slots on every host.
    /// Fails if a route drops, misdelivers or loops, or if the network is too large for the
    /// flat tables.
    pub fn new(topo: &Topology, routes: &RoutingTable, slots_per_host: u32) -> Result<Self> {
        routes.check_fits(topo)?;
        if slots_per_host == 0 {
            return crate::invalid!("slots per host must be at least 1");
        }
        let h = topo.num_hosts();
        let s = topo.num_switches();
        if h == 0 {
            return crate::invalid!("the topology has no hosts to place ranks on");
        }
        if (h as u64) * (h.max(s) as u64) > MAX_PAIRS {
            return crate::invalid!(
                "{h} hosts and {s} switches are too many for the mapper's flat route tables (limit {MAX_PAIRS} pairs)"
            );
        }
        let num_channels = topo.num_channels() as u32;
        let mut inject = Vec::with_capacity(h);
        for &node in topo.hosts() {
            match topo.neighbors(node).first() {
                Some(a) => inject.push(a.channel),
                None => return Err(NetweaveError::Routing(format!("host {} has no link", topo.label(node)))),
            }
        }
        let channel_switch: Vec<u32> = (0..num_channels)
            .map(|c| {
                let far = topo.channel_ends(c).1.node;
                if topo.is_host(far) {
                    AT_HOST
                } else {
                    topo.kind_index(far) as u32
                }
            })
            .collect();
        let switches = topo.switches();
        let mut next_channel = vec![NO_CHANNEL; s * h];
        next_channel.par_chunks_mut(s).enumerate().for_each(|(dst, row)| {
            for (sw, slot) in row.iter_mut().enumerate() {
                let port = routes.out_port(sw, dst);
                *slot = topo.out_channel(switches[sw], port).unwrap_or(NO_CHANNEL);
            }
        });
        let mut net = MapNetwork {
            num_hosts: h as u32,
            num_switches: s as u32,
            num_channels,
            inject,
            next_channel,
            channel_switch,
            hops: vec![0; h * h],
            max_hops: 0,
            slots_per_host,
            lattice: lattice_of(topo),
            host_labels: topo.hosts().iter().map(|&n| topo.label(n).to_string()).collect(),
            host_coords: Vec::new(),
        };
        // Walk every pair once: proves delivery and fills the hop table.
        let host_nodes = topo.hosts();
        let mut hops = std::mem::take(&mut net.hops);
        let bad: Option<String> = hops
            .par_chunks_mut(h)
            .enumerate()
            .map(|(dst, row)| {
                for (src, slot) in row.iter_mut().enumerate() {
                    if src == dst {
                        continue;
                    }
                    match net.checked_hops(src as u32, dst as u32) {
                        Ok(n) => *slot = n,
                        Err(()) => {
                            return Some(format!(
                                "the routes do not deliver {} -> {}",
                                topo.label(host_nodes[src]),
                                topo.label(host_nodes[dst])
                            ))
                        }
                    }
                }
                None
            })
            .find_any(|e| e.is_some())
            .flatten();
        if let Some(msg) = bad {
            return Err(NetweaveError::Routing(msg));
        }
        net.max_hops = hops.par_iter().copied().max().unwrap_or(0) as u32;
        net.hops = hops;
        if let Some(lat) = &net.lattice {
            let mut x = vec![0u32; lat.dims.len()];
            for host in 0..h as u32 {
                lat.router_coords(host / lat.hosts_per_router, &mut x);
                net.host_coords.extend_from_slice(&x);
            }
        }
        Ok(net)
    }

    /// Walk `src → dst` with full checks; the switch-to-switch hop count, or `Err` if the
    /// route drops, ends elsewhere or loops.
    fn checked_hops(&self, src: u32, dst: u32) -> std::result::Result<u16, ()> {
        let mut c = self.inject[src as usize];
        let mut hops = 0u32;
        loop {
            let sw = self.channel_switch[c as usize];
            if sw == AT_HOST {
                // Arrived at a host: it must be dst, i.e. the channel is dst's ejection.
                return if self.ejects_to(c, dst) { Ok(hops.saturating_sub(1) as u16) } else { Err(()) };
            }
            if hops > self.num_switches || hops >= u16::MAX as u32 {
                return Err(());
            }
            c = self.next_channel[dst as usize * self.num_switches as usize + sw as usize];
            if c == NO_CHANNEL {
                return Err(());
            }
            hops += 1;
        }
    }

    /// Whether channel `c` (ending at a host) ends at host index `dst`: true when the reverse
    /// channel of `c` is `dst`'s injection channel.
    fn ejects_to(&self, c: ChannelId, dst: u32) -> bool {
        (c ^ 1) == self.inject[dst as usize]
    }

    /// Call `visit(channel)` for every channel of the route `src → dst` (none when equal).
    #[inline]
    pub fn for_each_channel(&self, src: u32, dst: u32, mut visit: impl FnMut(ChannelId)) {
        if src == dst {
            return;
        }
        let mut c = self.inject[src as usize];
        visit(c);
        let s = self.num_switches as usize;
        let row = &self.next_channel[dst as usize * s..(dst as usize + 1) * s];
        loop {
            let sw = self.channel_switch[c as usize];
            if sw == AT_HOST {
                return;
            }
            c = row[sw as usize];
            visit(c);
        }
    }

    /// The channel host `host` injects on (first channel of every route from it).
    #[inline]
    pub fn injection_channel(&self, host: u32) -> ChannelId {
        self.inject[host as usize]
    }

    /// The channel after `c` on a route to host `dst`, or `None` when `c` reaches a host.
    #[inline]
    pub fn next_hop(&self, c: ChannelId, dst: u32) -> Option<ChannelId> {
        let sw = self.channel_switch[c as usize];
        (sw != AT_HOST).then(|| self.next_channel[dst as usize * self.num_switches as usize + sw as usize])
    }

    /// Switch-to-switch hops from host `src` to host `dst` (0 on the same switch).
    #[inline]
    pub fn hops(&self, src: u32, dst: u32) -> u32 {
        self.hops[dst as usize * self.num_hosts as usize + src as usize] as u32
    }
    /// Hops from every host to `dst` (indexed by source host).
    pub fn hops_to(&self, dst: u32) -> &[u16] {
        let h = self.num_hosts as usize;
        &self.hops[dst as usize * h..(dst as usize + 1) * h]
    }
    pub fn num_hosts(&self) -> u32 {
        self.num_hosts
    }
    /// Longest route in switch-to-switch hops; a route has at most `max_hops + 2` channels.
    pub fn max_hops(&self) -> u32 {
        self.max_hops
    }
    pub fn num_channels(&self) -> u32 {
        self.num_channels
    }
    pub fn slots_per_host(&self) -> u32 {
        self.slots_per_host
    }
    /// Total rank slots, `hosts · slots_per_host`; slot `s` is on host `s / slots_per_host`.
    pub fn num_slots(&self) -> u32 {
        self.num_hosts * self.slots_per_host
    }
    #[inline]
    pub fn host_of_slot(&self, slot: u32) -> u32 {
        slot / self.slots_per_host
    }
    /// The torus/mesh lattice, if the topology is one.
    pub fn lattice(&self) -> Option<&Lattice> {
        self.lattice.as_ref()
    }
    /// Router coordinates of `host` (lattice topologies only).
    pub fn host_coords(&self, host: u32) -> Option<&[u32]> {
        let lat = self.lattice.as_ref()?;
        let n = lat.dims.len();
        Some(&self.host_coords[host as usize * n..(host as usize + 1) * n])
    }
    pub fn host_label(&self, host: u32) -> &str {
        &self.host_labels[host as usize]
    }
}

/// The lattice of a `torus`/`mesh` topology whose parameters match its size, else `None`.
fn lattice_of(topo: &Topology) -> Option<Lattice> {
    let torus = match topo.family() {
        "torus" => true,
        "mesh" => false,
        _ => return None,
    };
    let p = topo.params();
    let hpr = p.get("hosts_per_router")?.as_u64()? as u32;
    let dims: Vec<u32> =
        p.get("dims")?.as_array()?.iter().map(|v| v.as_u64().map(|x| x as u32)).collect::<Option<Vec<u32>>>()?;
    let routers: u64 = dims.iter().map(|&d| d as u64).product();
    if hpr == 0 || routers != topo.num_switches() as u64 || routers * hpr as u64 != topo.num_hosts() as u64 {
        return None;
    }
    Some(Lattice { dims, torus, hosts_per_router: hpr })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::grid::torus;

    #[test]
    fn hops_match_torus_distance() {
        let t = torus(&[4, 3], 1).unwrap();
        let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
        let net = MapNetwork::new(&t, &r, 1).unwrap();
        let lat = net.lattice().unwrap().clone();
        let (mut a, mut b) = ([0u32; 2], [0u32; 2]);
        for s in 0..12 {
            for d in 0..12 {
                lat.router_coords(s, &mut a);
                lat.router_coords(d, &mut b);
                let ring = |x: u32, y: u32, k: u32| {
                    let dd = x.abs_diff(y);
                    dd.min(k - dd)
                };
                assert_eq!(net.hops(s, d), ring(a[0], b[0], 4) + ring(a[1], b[1], 3));
                let mut n = 0;
                net.for_each_channel(s, d, |_| n += 1);
                assert_eq!(n, if s == d { 0 } else { net.hops(s, d) + 2 });
            }
        }
    }
}
