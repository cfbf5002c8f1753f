//! Routing: destination-based forwarding tables — the second pipeline stage.
//!
//! Every engine produces one form, [`RoutingTable`]: for each switch and each destination
//! host, the output port (`out_port[switch][dest host]`, the InfiniBand LFT model), plus a
//! [`VcPolicy`] — the VC a packet is injected on for a (source, destination) pair and the VC
//! change applied at (switch, in port, out port). Evaluators only ever walk paths through
//! [`RoutingTable::path`] / [`RoutingTable::hops`], so any engine works with any evaluator,
//! and [`deadlock::check`] proves any engine's output deadlock-free or prints a cycle.
//!
//! ```
//! use netweave_core::topology::grid::mesh;
//! use netweave_core::routing::{route, Engine, RouteOptions};
//! let topo = mesh(&[3, 3], 1).unwrap();
//! let routes = route(&topo, Engine::MinHop, &RouteOptions::default()).unwrap();
//! let mut path = Vec::new();
//! routes.path(&topo, 0, 8, &mut path).unwrap();
//! assert_eq!(path.len(), 6); // host link, 4 switch hops, host link
//! ```

use std::fmt;
use std::str::FromStr;

use crate::error::{NetweaveError, Result};
use crate::topology::{ChannelId, NodeId, Port, Topology};

pub mod deadlock;
pub mod dor;
pub mod io;
pub mod layered;
pub mod metrics;
pub mod minhop;
pub mod nue;
pub mod sbp;
pub mod select;
pub mod tree;
pub mod updown;

pub use minhop::shortest_path;
pub use select::Select;

/// Output port meaning "no route" in [`RoutingTable`].
pub const NO_PORT: Port = 0;

/// Most virtual channels any engine may use (InfiniBand has 15 data VLs; 16 keeps `u8` room).
pub const MAX_VCS: u8 = 16;

/// What happens to a packet's VC when it crosses a switch from one port to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VcChange {
    /// Leave on the VC it arrived on.
    Keep,
    /// Leave on the next VC (structured channel pools, DL at a down→up turn).
    Increment,
    /// Leave on this VC (dateline crossings and resets).
    Set(u8),
}

impl VcChange {
    const KEEP: u8 = u8::MAX;
    const INCREMENT: u8 = u8::MAX - 1;

    fn encode(self) -> u8 {
        match self {
            VcChange::Keep => Self::KEEP,
            VcChange::Increment => Self::INCREMENT,
            VcChange::Set(v) => v,
        }
    }
    fn decode(code: u8) -> Self {
        match code {
            Self::KEEP => VcChange::Keep,
            Self::INCREMENT => VcChange::Increment,
            v => VcChange::Set(v),
        }
    }
    /// The VC after this change, from `vc`.
    pub fn apply(self, vc: u8) -> u8 {
        match self {
            VcChange::Keep => vc,
            VcChange::Increment => vc.saturating_add(1),
            VcChange::Set(v) => v,
        }
    }
}

/// VC a packet is injected on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Injection {
    /// Every packet starts on VC 0.
    Zero,
    /// By source host index (up*/down* spread over VCs per sending host).
    PerSource(Vec<u8>),
    /// By destination host index (Nue's per-destination layers).
    PerDestination(Vec<u8>),
    /// By `(source, destination)`, `vcs[src * num_hosts + dst]` (LASH, DFSSSP layers).
    PerPair { num_hosts: usize, vcs: Vec<u8> },
}

/// Per-switch VC change table indexed by `(in port, out port)`, port 0..=radix each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VcTransitions {
    /// Start of each switch's `(radix+1)²` block in `codes`.
    base: Vec<usize>,
    width: Vec<u16>,
    codes: Vec<u8>,
}

impl VcTransitions {
    /// A table that keeps the VC everywhere.
    pub fn new(topo: &Topology) -> Self {
        let mut base = Vec::with_capacity(topo.num_switches());
        let mut width = Vec::with_capacity(topo.num_switches());
        let mut total = 0usize;
        for &s in topo.switches() {
            let w = topo.radix(s) as usize + 1;
            base.push(total);
            width.push(w as u16);
            total += w * w;
        }
        VcTransitions { base, width, codes: vec![VcChange::KEEP; total] }
    }
    /// Change applied at switch `switch_index` from `in_port` to `out_port`.
    pub fn get(&self, switch_index: usize, in_port: Port, out_port: Port) -> VcChange {
        let w = self.width[switch_index] as usize;
        VcChange::decode(self.codes[self.base[switch_index] + in_port as usize * w + out_port as usize])
    }
    pub fn set(&mut self, switch_index: usize, in_port: Port, out_port: Port, change: VcChange) {
        let w = self.width[switch_index] as usize;
        self.codes[self.base[switch_index] + in_port as usize * w + out_port as usize] = change.encode();
    }
}

/// How many VCs a routing uses, which one a packet starts on, and how it changes per hop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VcPolicy {
    /// Number of virtual channels the routing needs.
    pub num_vcs: u8,
    pub injection: Injection,
    /// `None`: the VC never changes inside the network.
    pub transitions: Option<VcTransitions>,
}

impl VcPolicy {
    /// Everything on VC 0.
    pub fn single() -> Self {
        VcPolicy { num_vcs: 1, injection: Injection::Zero, transitions: None }
    }
    /// VC a packet from host `src` to host `dst` is injected on.
    pub fn injection_vc(&self, src: usize, dst: usize) -> u8 {
        match &self.injection {
            Injection::Zero => 0,
            Injection::PerSource(v) => v[src],
            Injection::PerDestination(v) => v[dst],
            Injection::PerPair { num_hosts, vcs } => vcs[src * num_hosts + dst],
        }
    }
    /// Change at switch `switch_index` between the two ports.
    pub fn change(&self, switch_index: usize, in_port: Port, out_port: Port) -> VcChange {
        self.transitions.as_ref().map_or(VcChange::Keep, |t| t.get(switch_index, in_port, out_port))
    }
}

/// One step of a routed path: the channel taken and the VC it is taken on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hop {
    pub channel: ChannelId,
    pub vc: u8,
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

/// Refuse (before anything is allocated) a fabric whose forwarding tables would not fit the
/// memory budget: one port per (switch, destination host), and the engines' working copies
/// of it, so twice that.
pub fn ensure_table_fits(topo: &Topology) -> Result<()> {
    let entries = topo.num_switches() as u128 * topo.num_hosts() as u128;
    crate::budget::ensure(
        &format!(
            "routing {} switches × {} hosts (forwarding tables and the engine's working copy)",
            topo.num_switches(),
            topo.num_hosts()
        ),
        entries * 2 * std::mem::size_of::<Port>() as u128,
    )
}

impl RoutingTable {
    /// An empty table (every entry [`NO_PORT`]) sized for `topo`, with one VC.
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
    pub fn set_vc_policy(&mut self, vc: VcPolicy) {
        self.vc = vc;
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

    /// Check the table was built for a topology of `topo`'s shape.
    pub fn check_fits(&self, topo: &Topology) -> Result<()> {
        if topo.num_hosts() != self.num_hosts || topo.num_switches() != self.num_switches {
            return Err(NetweaveError::Routing(format!(
                "routes are for {} switches and {} hosts, the topology has {} and {}",
                self.num_switches,
                self.num_hosts,
                topo.num_switches(),
                topo.num_hosts()
            )));
        }
        Ok(())
    }

    /// Append to `path` the channels a packet from host `src` to host `dst` (host indices)
    /// crosses. Hosts inject on their first connected port. Errors if the tables drop the
    /// packet, deliver it to the wrong host, or loop.
    pub fn path(&self, topo: &Topology, src: usize, dst: usize, path: &mut Vec<ChannelId>) -> Result<()> {
        self.walk(topo, src, dst, |hop| path.push(hop.channel))
    }

    /// Like [`path`](Self::path), with the VC of every channel.
    pub fn hops(&self, topo: &Topology, src: usize, dst: usize, hops: &mut Vec<Hop>) -> Result<()> {
        self.walk(topo, src, dst, |hop| hops.push(hop))
    }

    fn walk(&self, topo: &Topology, src: usize, dst: usize, mut visit: impl FnMut(Hop)) -> Result<()> {
        if src >= self.num_hosts || dst >= self.num_hosts || topo.num_hosts() != self.num_hosts {
            return Err(NetweaveError::Routing(format!(
                "pair ({src}, {dst}) is outside a table for {} hosts",
                self.num_hosts
            )));
        }
        if src == dst {
            return Ok(());
        }
        let src_node = topo.hosts()[src];
        let dst_node = topo.hosts()[dst];
        let Some(first) = topo.neighbors(src_node).first() else {
            return Err(NetweaveError::Routing(format!("host {} has no link", topo.label(src_node))));
        };
        let mut vc = self.vc.injection_vc(src, dst);
        visit(Hop { channel: first.channel, vc });
        let mut node: NodeId = first.neighbor;
        let mut in_port = first.neighbor_port;
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
            let sw = topo.kind_index(node);
            let port = self.out_port(sw, dst);
            let channel = topo.out_channel(node, port).ok_or_else(|| {
                NetweaveError::Routing(format!(
                    "switch {} has no route to {} (port {port})",
                    topo.label(node),
                    topo.label(dst_node)
                ))
            })?;
            vc = self.vc.change(sw, in_port, port).apply(vc);
            if vc >= self.vc.num_vcs {
                return Err(NetweaveError::Routing(format!(
                    "route {} -> {} needs VC {vc} at switch {}, but the routing declares {} VCs",
                    topo.label(src_node),
                    topo.label(dst_node),
                    topo.label(node),
                    self.vc.num_vcs
                )));
            }
            visit(Hop { channel, vc });
            let far = topo.channel_ends(channel).1;
            node = far.node;
            in_port = far.port;
        }
        Ok(())
    }
}

/// The routing engines, by CLI name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    /// Shortest paths, next hop chosen by the selection policy; 1 VC, not deadlock-free in general.
    Shortest,
    /// OpenSM min-hop: shortest paths with per-port load equalisation; 1 VC.
    MinHop,
    /// Shortest paths over globally balanced link weights (SSSP); 1 VC.
    Sssp,
    /// SSSP paths spread over VC layers until each layer is acyclic (DFSSSP).
    Dfsssp,
    /// Dimension-order (e-cube) on mesh / torus / hypercube, dateline VCs on tori.
    Dor,
    /// D-mod-k on fat-trees / PGFT.
    DModK,
    /// The unique leaf–spine–leaf route of the Latin-square fat-tree.
    Lsft,
    /// Up*/down* over a BFS tree (Autonet orientation).
    UpDown,
    /// Prefix routing on the up*/down* BFS tree.
    Prefix,
    /// Descending layers: up*/down* in every layer, next layer at a down→up turn.
    Dl,
    /// Structured channel pools: VC + 1 per switch-to-switch transit.
    Sbp,
    /// Reduced structured channel pools: VC + 1 only at switches with ≥ 3 switch neighbours.
    SbpReduced,
    /// LASH: per-pair layer assignment keeping every layer acyclic.
    Lash,
    /// Nue: routing inside the complete channel dependency graph, any VC budget.
    Nue,
}

/// The deadlock-free engine that suits a topology best: the structured engine of its shape
/// (LSFT unique paths, D-mod-k on fat-trees, dimension order on lattices), else Nue, which
/// works on any fabric within any VC budget. `netweave plan` routes with it.
///
/// ```
/// use netweave_core::routing::{default_engine, Engine};
/// assert_eq!(default_engine(&netweave_core::topology::grid::torus(&[4, 4], 1).unwrap()), Engine::Dor);
/// ```
pub fn default_engine(topo: &Topology) -> Engine {
    use crate::topology::structure::Structure;
    match topo.structure() {
        Structure::Lsft(_) => Engine::Lsft,
        Structure::FatTree(_) => Engine::DModK,
        Structure::Lattice(_) => Engine::Dor,
        _ => Engine::Nue,
    }
}

impl Engine {
    /// Every engine, in the order the CLI lists them.
    pub const ALL: [Engine; 14] = [
        Engine::Shortest,
        Engine::MinHop,
        Engine::Sssp,
        Engine::Dfsssp,
        Engine::Dor,
        Engine::DModK,
        Engine::Lsft,
        Engine::UpDown,
        Engine::Prefix,
        Engine::Dl,
        Engine::Sbp,
        Engine::SbpReduced,
        Engine::Lash,
        Engine::Nue,
    ];

    /// CLI name (`"updown"`, `"sbp-reduced"`, …).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Shortest => "shortest",
            Engine::MinHop => "minhop",
            Engine::Sssp => "sssp",
            Engine::Dfsssp => "dfsssp",
            Engine::Dor => "dor",
            Engine::DModK => "dmodk",
            Engine::Lsft => "lsft",
            Engine::UpDown => "updown",
            Engine::Prefix => "prefix",
            Engine::Dl => "dl",
            Engine::Sbp => "sbp",
            Engine::SbpReduced => "sbp-reduced",
            Engine::Lash => "lash",
            Engine::Nue => "nue",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Engine {
    type Err = NetweaveError;
    fn from_str(s: &str) -> Result<Self> {
        let key = s.trim().to_ascii_lowercase();
        let key = match key.as_str() {
            "shortest-path" => "shortest",
            "ecube" | "e-cube" => "dor",
            "d-mod-k" => "dmodk",
            "up-down" | "updn" => "updown",
            other => other,
        };
        Engine::ALL.into_iter().find(|e| e.name() == key).ok_or_else(|| {
            let names: Vec<_> = Engine::ALL.iter().map(|e| e.name()).collect();
            NetweaveError::InvalidParameter(format!("unknown routing engine '{s}' (known: {})", names.join(", ")))
        })
    }
}

/// Knobs shared by the engines; each engine reads the ones that apply to it.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteOptions {
    /// VC budget: the most VCs the engine may use (engines that need more fail and say how many).
    pub max_vcs: u8,
    /// Root switch (switch index) of tree-based engines (up*/down*, prefix, DL).
    pub root: usize,
    /// How to pick among several legal next hops.
    pub select: Select,
    /// Seed for every random choice.
    pub seed: u64,
}

impl Default for RouteOptions {
    fn default() -> Self {
        RouteOptions { max_vcs: 8, root: 0, select: Select::PerDestination, seed: 0 }
    }
}

/// Route `topo` with `engine`.
pub fn route(topo: &Topology, engine: Engine, options: &RouteOptions) -> Result<RoutingTable> {
    if options.max_vcs == 0 || options.max_vcs > MAX_VCS {
        return crate::invalid!("the VC budget must be 1..={MAX_VCS}, got {}", options.max_vcs);
    }
    if topo.num_switches() > 0 && options.root >= topo.num_switches() {
        return crate::invalid!("root switch {} does not exist (the fabric has {})", options.root, topo.num_switches());
    }
    if topo.num_hosts() == 0 {
        // Nothing to deliver: a table would be empty and vacuously "deadlock-free with 0 VCs".
        return Err(NetweaveError::InvalidTopology(format!(
            "the fabric '{}' has no hosts: there is nothing to route",
            topo.name()
        )));
    }
    ensure_table_fits(topo)?;
    match engine {
        Engine::Shortest => minhop::shortest_with(topo, options.select),
        Engine::MinHop => minhop::shortest_path(topo),
        Engine::Sssp => layered::sssp(topo, options),
        Engine::Dfsssp => layered::dfsssp(topo, options),
        Engine::Dor => dor::dimension_order(topo, options),
        Engine::DModK => tree::d_mod_k(topo, options),
        Engine::Lsft => tree::lsft(topo, options),
        Engine::UpDown => updown::up_down(topo, options),
        Engine::Prefix => updown::prefix(topo, options),
        Engine::Dl => updown::descending_layers(topo, options),
        Engine::Sbp => sbp::structured_channel_pools(topo, options, false),
        Engine::SbpReduced => sbp::structured_channel_pools(topo, options, true),
        Engine::Lash => layered::lash(topo, options),
        Engine::Nue => nue::nue(topo, options),
    }
}
