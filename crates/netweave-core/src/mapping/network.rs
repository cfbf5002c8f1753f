//! The mapper's flat view of a routed network: every route walkable without per-path storage.
//!
//! A [`MapNetwork`] has one of two route sources behind the same interface:
//!
//! - **table** ([`MapNetwork::new`]): any [`RoutingTable`], flattened as described below; memory
//!   grows with `hosts²`, so it is capped at 2²⁸ host pairs;
//! - **lattice** ([`MapNetwork::dor_lattice`]): dimension-order routes on a torus or mesh,
//!   computed from router coordinates exactly as [`routing::dor`](crate::routing::dor) builds
//!   them (dimension 0 first, shorter way round a ring, ties by the same selection policy, the
//!   same channel ids), with no per-pair table at all: memory is `O(hosts + channels)`, so a
//!   65,536-host torus costs a few megabytes.
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

use std::borrow::Cow;

use crate::error::{NetweaveError, Result};
use crate::routing::select::Select;
use crate::routing::RoutingTable;
use crate::topology::structure::LatticeShape;
use crate::topology::{ChannelId, Port, Topology, NO_CHANNEL};

/// `channel_switch` value of a channel that ends at a host.
pub const AT_HOST: u32 = u32::MAX;

/// Largest `hosts²` the flat tables of the table source may hold (4 bytes each for
/// `next_channel`); the lattice source has no such limit.
const MAX_PAIRS: u64 = 1 << 28;

/// The torus or mesh lattice behind the hosts, when the topology is one (for boxes and curves).
pub use crate::topology::structure::Lattice;

/// Where a [`MapNetwork`] takes its routes from (see the module docs).
#[derive(Clone, Debug)]
enum RouteSource {
    /// A flattened destination-based routing table.
    Table {
        /// `next_channel[dst · switches + switch]`.
        next_channel: Vec<ChannelId>,
        /// Switch index a channel enters, or [`AT_HOST`].
        channel_switch: Vec<u32>,
        /// Switch-to-switch hops of every host pair, `hops[dst · hosts + src]`.
        hops: Vec<u16>,
    },
    /// Dimension-order routes computed from coordinates.
    Lattice(LatticeRoutes),
}

/// Dimension-order routes of a torus or mesh, from coordinates (the lattice route source).
#[derive(Clone, Debug)]
struct LatticeRoutes {
    /// Router-id stride of each dimension.
    strides: Vec<u32>,
    /// Channel leaving router `r` along dimension `d`: `port_channel[(r · dims + d) · 2 + minus]`
    /// ([`NO_CHANNEL`] where a mesh has no link or a ring has one router).
    port_channel: Vec<ChannelId>,
    /// Ties on an even ring: `false` always takes `+` (`low-port`), `true` alternates over the
    /// hosts of the destination router, even local index `+` (`per-destination`).
    alternate_ties: bool,
}

/// Flat routes and host slots for the mapper.
#[derive(Clone, Debug)]
pub struct MapNetwork {
    num_hosts: u32,
    num_switches: u32,
    num_channels: u32,
    /// First channel of each host (its injection link).
    inject: Vec<ChannelId>,
    routes: RouteSource,
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
        let inject = injection_channels(topo)?;
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
            routes: RouteSource::Table { next_channel, channel_switch, hops: Vec::new() },
            max_hops: 0,
            slots_per_host,
            lattice: topo
                .lattice_with_hosts()
                .ok()
                .filter(|l| l.shape != LatticeShape::Hypercube && l.hosts_per_router > 0)
                .cloned(),
            host_labels: topo.hosts().iter().map(|&n| topo.label(n).to_string()).collect(),
            host_coords: Vec::new(),
        };
        // Walk every pair once: proves delivery and fills the hop table.
        let host_nodes = topo.hosts();
        let mut hops = vec![0u16; h * h];
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
        if let RouteSource::Table { hops: table_hops, .. } = &mut net.routes {
            *table_hops = hops;
        }
        net.fill_host_coords();
        Ok(net)
    }

    /// Build the lattice route source: the dimension-order routes the `dor` engine would give
    /// `topo` (a `torus` or `mesh` generated or loaded with its family and parameters) under
    /// tie policy `select`, computed from coordinates with no per-pair table, so memory is
    /// `O(hosts + channels)` and no host-count cap applies. Fails, in one line, on any other
    /// topology, on a file whose links disagree with its parameters, and on `balanced` ties
    /// (they depend on the order a table is filled in; build the table and use
    /// [`new`](Self::new) for those).
    ///
    /// ```
    /// use netweave_core::mapping::MapNetwork;
    /// use netweave_core::routing::select::Select;
    /// let t = netweave_core::topology::grid::torus(&[16, 64, 64], 1).unwrap();
    /// let net = MapNetwork::dor_lattice(&t, Select::LowPort, 1).unwrap();
    /// assert_eq!(net.num_hosts(), 65_536);
    /// assert_eq!(net.hops(0, 65_535), 1 + 1 + 1);
    /// ```
    pub fn dor_lattice(topo: &Topology, select: Select, slots_per_host: u32) -> Result<Self> {
        if slots_per_host == 0 {
            return crate::invalid!("slots per host must be at least 1");
        }
        // The one lattice check (wiring, ports, host attachment); hypercubes route by a table.
        let lat = match topo.lattice_with_hosts() {
            Ok(lat) if lat.shape != LatticeShape::Hypercube && lat.hosts_per_router > 0 => lat.clone(),
            Ok(_) => {
                return crate::invalid!(
                    "lattice routes need a torus or mesh with hosts; '{}' is a {}",
                    topo.name(),
                    topo.family()
                )
            }
            Err(e) => return crate::invalid!("lattice routes need a torus or mesh: {e}"),
        };
        let alternate_ties = match select {
            Select::LowPort => false,
            Select::PerDestination => true,
            Select::Balanced => {
                return crate::invalid!(
                    "lattice routes follow low-port or per-destination ties; 'balanced' needs a routing table"
                )
            }
        };
        let n = lat.dims.len();
        let routers = lat.num_routers() as usize;
        let hpr = lat.hosts_per_router as usize;
        if (routers as u64) * (n as u64) * 2 > u32::MAX as u64 || hpr + 2 * n > Port::MAX as usize {
            return crate::invalid!("'{}' is too large for the lattice route source", topo.name());
        }
        // Fits in u32: the router count is the switch count.
        let strides: Vec<u32> = lat.strides().iter().map(|&s| s as u32).collect();
        let switches = topo.switches();
        let mut port_channel = vec![NO_CHANNEL; routers * n * 2];
        for r in 0..routers {
            for d in 0..n {
                for minus in [false, true] {
                    // Topology::lattice checked that the port reaches the neighbour the layout names.
                    if lat.neighbour(r as u32, d, !minus).is_some() {
                        let channel = topo.out_channel(switches[r], lat.port(d, !minus));
                        port_channel[(r * n + d) * 2 + minus as usize] = channel.unwrap_or(NO_CHANNEL);
                    }
                }
            }
        }
        let inject = injection_channels(topo)?;
        let max_hops = lat.dims.iter().map(|&k| if lat.wrap() { k / 2 } else { k - 1 }).sum();
        let mut net = MapNetwork {
            num_hosts: topo.num_hosts() as u32,
            num_switches: topo.num_switches() as u32,
            num_channels: topo.num_channels() as u32,
            inject,
            routes: RouteSource::Lattice(LatticeRoutes { strides, port_channel, alternate_ties }),
            max_hops,
            slots_per_host,
            lattice: Some(lat),
            host_labels: topo.hosts().iter().map(|&n| topo.label(n).to_string()).collect(),
            host_coords: Vec::new(),
        };
        net.fill_host_coords();
        Ok(net)
    }

    fn fill_host_coords(&mut self) {
        if let Some(lat) = &self.lattice {
            let mut x = vec![0u32; lat.dims.len()];
            self.host_coords.reserve(self.num_hosts as usize * lat.dims.len());
            for host in 0..self.num_hosts {
                lat.router_coords(host / lat.hosts_per_router, &mut x);
                self.host_coords.extend_from_slice(&x);
            }
        }
    }

    /// Whether routes come from a flattened table (`false`: computed from lattice coordinates).
    pub fn is_table_routed(&self) -> bool {
        matches!(self.routes, RouteSource::Table { .. })
    }

    /// Walk `src → dst` with full checks; the switch-to-switch hop count, or `Err` if the
    /// route drops, ends elsewhere or loops.
    fn checked_hops(&self, src: u32, dst: u32) -> std::result::Result<u16, ()> {
        let RouteSource::Table { next_channel, channel_switch, .. } = &self.routes else { return Err(()) };
        let mut c = self.inject[src as usize];
        let mut hops = 0u32;
        loop {
            let sw = channel_switch[c as usize];
            if sw == AT_HOST {
                // Arrived at a host: it must be dst, i.e. the channel is dst's ejection.
                return if self.ejects_to(c, dst) { Ok(hops.saturating_sub(1) as u16) } else { Err(()) };
            }
            if hops > self.num_switches || hops >= u16::MAX as u32 {
                return Err(());
            }
            c = next_channel[dst as usize * self.num_switches as usize + sw as usize];
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
        match &self.routes {
            RouteSource::Table { next_channel, channel_switch, .. } => {
                let s = self.num_switches as usize;
                let row = &next_channel[dst as usize * s..(dst as usize + 1) * s];
                loop {
                    let sw = channel_switch[c as usize];
                    if sw == AT_HOST {
                        return;
                    }
                    c = row[sw as usize];
                    visit(c);
                }
            }
            RouteSource::Lattice(routes) => {
                self.lattice_walk(routes, src, dst, &mut visit);
                visit(self.inject[dst as usize] ^ 1);
            }
        }
    }

    /// The switch-to-switch channels of the dimension-order route `src → dst`, as
    /// `routing::dor` lays them out: dimension 0 first, the shorter way round each ring, ties
    /// by the tie policy.
    #[inline]
    fn lattice_walk(&self, routes: &LatticeRoutes, src: u32, dst: u32, visit: &mut impl FnMut(ChannelId)) {
        let Some(lat) = &self.lattice else { return };
        let n = lat.dims.len();
        let xs = &self.host_coords[src as usize * n..(src as usize + 1) * n];
        let xt = &self.host_coords[dst as usize * n..(dst as usize + 1) * n];
        let mut r = src / lat.hosts_per_router;
        for d in 0..n {
            let (from, to, k) = (xs[d], xt[d], lat.dims[d]);
            if from == to {
                continue;
            }
            let (minus, dist) = if lat.wrap() {
                let forward = if to >= from { to - from } else { to + k - from };
                let backward = k - forward;
                if forward != backward {
                    (backward < forward, forward.min(backward))
                } else {
                    let odd_local = dst % lat.hosts_per_router % 2 == 1;
                    (routes.alternate_ties && odd_local, forward)
                }
            } else {
                (to < from, from.abs_diff(to))
            };
            let stride = routes.strides[d];
            let wrap = (k - 1) * stride;
            let mut x = from;
            for _ in 0..dist {
                visit(routes.port_channel[((r as usize * n + d) << 1) | minus as usize]);
                if minus {
                    if x == 0 {
                        x = k - 1;
                        r += wrap;
                    } else {
                        x -= 1;
                        r -= stride;
                    }
                } else if x + 1 == k {
                    x = 0;
                    r -= wrap;
                } else {
                    x += 1;
                    r += stride;
                }
            }
        }
    }

    /// The channel host `host` injects on (first channel of every route from it).
    #[inline]
    pub fn injection_channel(&self, host: u32) -> ChannelId {
        self.inject[host as usize]
    }

    /// The channel after `c` on a route to host `dst`, or `None` when `c` reaches a host.
    /// Table source only (`None` for lattice routes, which [`for_each_channel`](Self::for_each_channel)
    /// computes directly).
    #[inline]
    pub fn next_hop(&self, c: ChannelId, dst: u32) -> Option<ChannelId> {
        let RouteSource::Table { next_channel, channel_switch, .. } = &self.routes else { return None };
        let sw = channel_switch[c as usize];
        (sw != AT_HOST).then(|| next_channel[dst as usize * self.num_switches as usize + sw as usize])
    }

    /// Switch-to-switch hops from host `src` to host `dst` (0 on the same switch).
    #[inline]
    pub fn hops(&self, src: u32, dst: u32) -> u32 {
        match &self.routes {
            RouteSource::Table { hops, .. } => hops[dst as usize * self.num_hosts as usize + src as usize] as u32,
            RouteSource::Lattice(_) => self.lattice_hops(src, dst),
        }
    }

    /// Dimension-order hops between two hosts of the lattice, from their coordinates.
    #[inline]
    fn lattice_hops(&self, src: u32, dst: u32) -> u32 {
        let Some(lat) = &self.lattice else { return 0 };
        let n = lat.dims.len();
        let xs = &self.host_coords[src as usize * n..(src as usize + 1) * n];
        let xt = &self.host_coords[dst as usize * n..(dst as usize + 1) * n];
        let mut hops = 0;
        for d in 0..n {
            let diff = xs[d].abs_diff(xt[d]);
            hops += if lat.wrap() { diff.min(lat.dims[d] - diff) } else { diff };
        }
        hops
    }

    /// Hops from every host to `dst` (indexed by source host); borrowed from the table
    /// source, computed for the lattice source.
    pub fn hops_to(&self, dst: u32) -> Cow<'_, [u16]> {
        let h = self.num_hosts as usize;
        match &self.routes {
            RouteSource::Table { hops, .. } => Cow::Borrowed(&hops[dst as usize * h..(dst as usize + 1) * h]),
            RouteSource::Lattice(_) => {
                Cow::Owned((0..h as u32).map(|src| self.lattice_hops(src, dst) as u16).collect())
            }
        }
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

/// The injection channel of every host (its first link).
fn injection_channels(topo: &Topology) -> Result<Vec<ChannelId>> {
    topo.hosts()
        .iter()
        .map(|&node| match topo.neighbors(node).first() {
            Some(a) => Ok(a.channel),
            None => Err(NetweaveError::Routing(format!("host {} has no link", topo.label(node)))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::grid::{mesh, torus};
    use proptest::prelude::*;

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

    /// Every pair's channels and hops from coordinates equal the `dor` table's walk.
    fn lattice_equals_table(topo: &Topology, select: Select) {
        let opts = RouteOptions { select, ..RouteOptions::default() };
        let table = route(topo, Engine::Dor, &opts).unwrap();
        let flat = MapNetwork::new(topo, &table, 1).unwrap();
        let net = MapNetwork::dor_lattice(topo, select, 1).unwrap();
        assert!(!net.is_table_routed() && flat.is_table_routed());
        assert_eq!((net.num_hosts(), net.num_channels()), (flat.num_hosts(), flat.num_channels()));
        assert_eq!(net.max_hops(), flat.max_hops());
        assert_eq!(net.lattice(), flat.lattice());
        let h = net.num_hosts();
        let (mut expected, mut got) = (Vec::new(), Vec::new());
        for src in 0..h {
            for dst in 0..h {
                expected.clear();
                table.path(topo, src as usize, dst as usize, &mut expected).unwrap();
                got.clear();
                net.for_each_channel(src, dst, |c| got.push(c));
                assert_eq!(got, expected, "{} {src} -> {dst}", topo.name());
                assert_eq!(net.hops(src, dst), flat.hops(src, dst));
                assert_eq!(net.hops_to(dst)[src as usize], flat.hops_to(dst)[src as usize]);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        #[test]
        fn lattice_routes_equal_dor_table(
            dims in proptest::collection::vec(1u32..6, 1..4),
            is_torus in any::<bool>(),
            hosts_per_router in 1u32..3,
            per_destination in any::<bool>(),
        ) {
            let t = if is_torus { torus(&dims, hosts_per_router) } else { mesh(&dims, hosts_per_router) }.unwrap();
            let select = if per_destination { Select::PerDestination } else { Select::LowPort };
            lattice_equals_table(&t, select);
        }
    }

    #[test]
    fn lattice_routes_on_even_and_odd_rings() {
        for dims in [[4u32, 3, 2], [2, 2, 5], [6, 1, 3]] {
            for hpr in [1, 2] {
                for select in [Select::LowPort, Select::PerDestination] {
                    lattice_equals_table(&torus(&dims, hpr).unwrap(), select);
                    lattice_equals_table(&mesh(&dims, hpr).unwrap(), select);
                }
            }
        }
    }

    #[test]
    fn lattice_source_refuses_what_it_cannot_route() {
        let fat = crate::topology::fat_tree::fat_tree(4, 2, false).unwrap();
        let e = MapNetwork::dor_lattice(&fat, Select::LowPort, 1).unwrap_err().to_string();
        assert!(e.contains("torus or mesh"), "{e}");
        let t = torus(&[4, 4], 1).unwrap();
        let e = MapNetwork::dor_lattice(&t, Select::Balanced, 1).unwrap_err().to_string();
        assert!(e.contains("balanced"), "{e}");
        assert!(MapNetwork::dor_lattice(&t, Select::LowPort, 0).is_err());
    }

    #[test]
    fn lattice_source_has_no_pair_cap() {
        // 65,536 hosts: 2^32 pairs, far beyond the table source's cap.
        let t = torus(&[16, 64, 64], 1).unwrap();
        let r = MapNetwork::dor_lattice(&t, Select::LowPort, 1).unwrap();
        assert_eq!(r.max_hops(), 8 + 32 + 32);
        let far = r.lattice().unwrap().router_id(&[8, 32, 32]);
        assert_eq!(r.hops(0, far), 72);
        let mut n = 0;
        r.for_each_channel(0, far, |_| n += 1);
        assert_eq!(n, 74);
    }
}
