//! OpenSM linear forwarding table (LFT) dumps: `opensm-lfts.dump`, and the `dump_fts` /
//! `ibroute` output of infiniband-diags.
//!
//! OpenSM writes its tables with `opensm -D 0x43 --dump_files_dir DIR` (`DIR/opensm-lfts.dump`)
//! and installs tables from such a file with its `file` routing engine,
//! `opensm -R file -U FILE`. The grammar (checked against OpenSM's `osm_dump.c` and
//! `osm_ucast_file.c`):
//!
//! ```text
//! Unicast lids [0-27] of switch Lid 1 guid 0x0000000000200000 ('r(0,0)'):
//! 0x0001 000 # Switch portguid 0x0000000000200000: 'r(0,0)'
//! 0x000a 001 # Channel Adapter portguid 0x0000000000100001: 'h(0,0).0'
//! 27 lids dumped
//! ```
//!
//! One section per switch: a header naming the switch's GUID (and its LID and node
//! description), then one line per destination LID that has a route: the LID in hex, the
//! output port in decimal (port 0 is the switch itself), and after `#` what the LID belongs
//! to. OpenSM's loader needs only `Unicast lids … guid 0x…` and the `0x<lid> <port>` pairs;
//! it uses the `portguid` to re-map a LID to the one the port actually has, so a file stays
//! valid when LIDs are assigned differently.
//!
//! **Writing** ([`write`]) produces exactly that format for a [`RoutingTable`], with the LIDs
//! of a [`LidMap`] and the GUIDs ibsim gives the nodes of a net file netweave wrote
//! ([`IbsimGuids`]). Host LIDs get the table's ports (entries with no route are left out,
//! which OpenSM reads as "no path"). Switch LIDs, which carry only management traffic, are
//! routed too, because an SM and diagnostic tools reach switches by LID: port 0 at the switch
//! itself; elsewhere the port the table uses towards the first host hanging off that switch by
//! its only link (so those routes add no channel dependency the host routes do not have), or,
//! for switches without such a host, the lowest-numbered port on a shortest path. Checked
//! end to end by `tests/test_opensm.py`: OpenSM 3.3.23 on ibsim 0.10 installs such a file,
//! its own dump of the installed tables is the same file (but for the first comment line),
//! and `dump_fts` reads the same ports back from the simulated switches.
//!
//! **Reading** ([`read`]) takes OpenSM's dump, or `dump_fts` / `ibroute` output
//! (`Unicast lids [0x0-0x1b] of switch Lid 3 guid 0x… (desc):`, a two-line column header,
//! entries `0x0003 004 : (Switch portguid 0x…: 'desc')`, `N valid lids dumped`; `DR path`
//! headers and the `*** WARNING ***` lines of the `dump_lfts` wrapper are fine). It turns the
//! tables into a [`RoutingTable`] of the given topology (one VC, engine `"opensm-lft"`) so
//! netweave's metrics and deadlock checker can analyse what a subnet manager computed:
//! - a switch section belongs to the switch whose label is `S-<guid>` (an ibnetdiscover id
//!   kept as label), else whose node description (label as ibsim stores it, see
//!   [`node_description`]) is the header's and unique, else the switch ibsim gives that GUID
//!   (when the header's description, if any, is that switch's);
//! - a `Channel Adapter` entry's LID belongs to the host with that unique description, else
//!   to the host port ibsim gives that port GUID (again if the descriptions agree); entries
//!   for switches, routers, LMC paths (`path #k`), illegal ports and unknown LIDs are
//!   ignored; an entry with no description at all (`ibroute -n`) is looked up in
//!   [`LidMap::sequential`];
//! - when a host has several LIDs (several ports, or LMC), the LID of its first connected
//!   port is used if known, else its lowest LID; hosts with no LID or no entry get
//!   [`NO_PORT`], as do entries with port 0;
//! - a section for a switch the topology lacks, a topology switch without a section, an
//!   adapter that is no host of the topology, a port beyond the switch's radix, a LID listed
//!   twice in a section, a LID described as two different nodes, and any unrecognised line
//!   are one-line errors naming the line.
//!
//! **LIDs** ([`LidMap::sequential`]): switches get 1..=S in switch order, hosts S+1..=S+H in
//! host order (a host's LID is that of its first connected port). OpenSM picks its own LIDs
//! in discovery order unless its cache says otherwise, so [`guid2lid`] writes the cache file
//! (`$OSM_CACHE_DIR/guid2lid`) that makes OpenSM assign exactly these LIDs.
//!
//! **GUIDs** ([`IbsimGuids`]): ibsim numbers nodes by type in file order (`ibsim/sim_net.c`):
//! the k-th switch gets node GUID `0x200000 + k` (all its ports share it); hosts take GUIDs
//! from `0x100000` on, each reserving its port count + 1, and port p of a host with node GUID
//! g has port GUID `g + p`. netweave's ibnet writer lists nodes in id order, so for a
//! single-port-host fabric host k has node GUID `0x100000 + 2k` and port GUID
//! `0x100000 + 2k + 1`.
//!
//! ```
//! use netweave_core::topology::grid::torus;
//! use netweave_core::routing::{io::lft, route, Engine, RouteOptions};
//! let topo = torus(&[3, 3], 2).unwrap();
//! let routes = route(&topo, Engine::MinHop, &RouteOptions::default()).unwrap();
//! let lids = lft::LidMap::sequential(&topo).unwrap();
//! let dump = lft::write(&topo, &routes, &lids).unwrap();
//! assert!(dump.contains("Unicast lids [0-27] of switch Lid 1 guid 0x0000000000200000 ('r(0,0)'):"));
//! let back = lft::read(&topo, &dump).unwrap();
//! assert_eq!(back.ports(), routes.ports());
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io;

use crate::error::{NetweaveError, Result};
use crate::routing::{RoutingTable, NO_PORT};
use crate::topology::fabric::SwitchFabric;
use crate::topology::io::{parse_error, snippet};
use crate::topology::{NodeId, Port, Topology};

const FMT: &str = "lft";

/// Highest unicast LID (0xC000 and up are multicast).
pub const MAX_UNICAST_LID: u16 = 0xBFFF;
/// First node GUID ibsim gives a host (channel adapter).
pub const IBSIM_HCA_GUID_BASE: u64 = 0x10_0000;
/// First node GUID ibsim gives a switch.
pub const IBSIM_SWITCH_GUID_BASE: u64 = 0x20_0000;
/// Longest node description InfiniBand keeps (64 bytes with the terminator).
const DESCRIPTION_BYTES: usize = 63;
/// Engine name of imported tables.
pub const IMPORTED_ENGINE: &str = "opensm-lft";

// ---------------------------------------------------------------------------------------
// LIDs and GUIDs

/// The LID of every switch and host: what [`write`] puts in a dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LidMap {
    switch_lids: Vec<u16>,
    host_lids: Vec<u16>,
    max_lid: u16,
}

impl LidMap {
    /// netweave's deterministic assignment: switch `i` gets LID `1 + i`, host `j` gets
    /// `1 + S + j`. Errors if the fabric needs more than the 49151 unicast LIDs.
    pub fn sequential(topo: &Topology) -> Result<LidMap> {
        let (s, h) = (topo.num_switches(), topo.num_hosts());
        if s + h > MAX_UNICAST_LID as usize {
            return crate::invalid!(
                "the fabric has {} switches and hosts, more than the {MAX_UNICAST_LID} unicast LIDs InfiniBand has",
                s + h
            );
        }
        let switch_lids = (1..=s as u16).collect();
        let host_lids = (s as u16 + 1..=(s + h) as u16).collect();
        Ok(LidMap { switch_lids, host_lids, max_lid: (s + h) as u16 })
    }

    /// An explicit assignment (e.g. the LIDs a running subnet manager gave): one LID per
    /// switch and per host, all distinct, each in 1..=0xBFFF.
    pub fn from_lids(topo: &Topology, switch_lids: Vec<u16>, host_lids: Vec<u16>) -> Result<LidMap> {
        if switch_lids.len() != topo.num_switches() || host_lids.len() != topo.num_hosts() {
            return crate::invalid!(
                "a LID map needs {} switch and {} host LIDs, got {} and {}",
                topo.num_switches(),
                topo.num_hosts(),
                switch_lids.len(),
                host_lids.len()
            );
        }
        let mut seen = HashSet::with_capacity(switch_lids.len() + host_lids.len());
        for &lid in switch_lids.iter().chain(&host_lids) {
            if lid == 0 || lid > MAX_UNICAST_LID {
                return crate::invalid!("LID {lid} is not a unicast LID (1..={MAX_UNICAST_LID})");
            }
            if !seen.insert(lid) {
                return crate::invalid!("LID {lid} is given twice");
            }
        }
        let max_lid = switch_lids.iter().chain(&host_lids).copied().max().unwrap_or(0);
        Ok(LidMap { switch_lids, host_lids, max_lid })
    }

    /// LID of switch `switch_index`.
    pub fn switch_lid(&self, switch_index: usize) -> u16 {
        self.switch_lids[switch_index]
    }
    /// LID of host `host_index` (of its first connected port).
    pub fn host_lid(&self, host_index: usize) -> u16 {
        self.host_lids[host_index]
    }
    /// Highest LID in use.
    pub fn max_lid(&self) -> u16 {
        self.max_lid
    }

    /// What each LID `0..=max_lid` belongs to.
    fn targets(&self) -> Vec<Target> {
        let mut t = vec![Target::None; self.max_lid as usize + 1];
        for (i, &l) in self.switch_lids.iter().enumerate() {
            t[l as usize] = Target::Switch(i);
        }
        for (i, &l) in self.host_lids.iter().enumerate() {
            t[l as usize] = Target::Host(i);
        }
        t
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    None,
    Switch(usize),
    Host(usize),
}

/// The node and port GUIDs ibsim gives the nodes of a net file written by netweave's ibnet
/// writer (see the module docs).
#[derive(Clone, Debug)]
pub struct IbsimGuids {
    node_guid: Vec<u64>,
    is_switch: Vec<bool>,
    /// Node GUIDs of the hosts in host order (increasing), for the reverse lookup.
    host_guids: Vec<u64>,
}

impl IbsimGuids {
    /// GUIDs for every node of `topo`.
    pub fn new(topo: &Topology) -> Self {
        let mut node_guid = Vec::with_capacity(topo.num_nodes());
        let mut is_switch = Vec::with_capacity(topo.num_nodes());
        let mut host_guids = Vec::with_capacity(topo.num_hosts());
        let (mut next_hca, mut next_switch) = (IBSIM_HCA_GUID_BASE, IBSIM_SWITCH_GUID_BASE);
        for n in 0..topo.num_nodes() as NodeId {
            if topo.is_host(n) {
                node_guid.push(next_hca);
                host_guids.push(next_hca);
                next_hca += topo.radix(n) as u64 + 1;
                is_switch.push(false);
            } else {
                node_guid.push(next_switch);
                next_switch += 1;
                is_switch.push(true);
            }
        }
        IbsimGuids { node_guid, is_switch, host_guids }
    }

    /// Node GUID of `node`.
    pub fn node_guid(&self, node: NodeId) -> u64 {
        self.node_guid[node as usize]
    }

    /// Port GUID of `port` of `node`: a switch's ports share its node GUID, a host's port p
    /// is node GUID + p.
    pub fn port_guid(&self, node: NodeId, port: Port) -> u64 {
        let g = self.node_guid[node as usize];
        if self.is_switch[node as usize] {
            g
        } else {
            g + port as u64
        }
    }

    /// Switch index with this node GUID.
    pub fn switch_of(&self, topo: &Topology, guid: u64) -> Option<usize> {
        let k = guid.checked_sub(IBSIM_SWITCH_GUID_BASE)?;
        (k < topo.num_switches() as u64).then_some(k as usize)
    }

    /// `(host index, port)` with this port GUID.
    pub fn host_port_of(&self, topo: &Topology, guid: u64) -> Option<(usize, Port)> {
        let h = self.host_guids.partition_point(|&g| g < guid).checked_sub(1)?;
        let port = guid - self.host_guids[h];
        (port >= 1 && port <= topo.radix(topo.hosts()[h]) as u64).then_some((h, port as Port))
    }
}

/// The node description ibsim and OpenSM report for a node netweave wrote with this label:
/// `"` becomes `'` and control characters spaces (the ibnet writer), cut to 63 bytes, and
/// then every byte that is not printable ASCII becomes a space (OpenSM's and
/// infiniband-diags' `clean_nodedesc`). An empty label gives an empty description.
pub fn node_description(label: &str) -> String {
    let mut cut = String::new();
    for c in label.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if cut.len() + c.len_utf8() > DESCRIPTION_BYTES {
            break;
        }
        cut.push(c);
    }
    cut.bytes()
        .map(|b| match b {
            b'"' => '\'',
            0x20..=0x7e => b as char,
            _ => ' ',
        })
        .collect()
}

/// The port a host is reached on and injects from: its first connected port (1 if none).
pub(super) fn primary_port(topo: &Topology, host: NodeId) -> Port {
    topo.neighbors(host).first().map_or(1, |a| a.port)
}

/// OpenSM's persistent LID database (`guid2lid` in `$OSM_CACHE_DIR`, `/var/cache/opensm` by
/// default) assigning `lids` to the ibsim GUIDs of `topo`: an OpenSM started with this cache
/// (and without `--reassign_lids`) gives every switch and every host's first connected port
/// exactly the LID of the map, so dumps, `ibroute` output and [`write`]'s file agree LID for
/// LID.
pub fn guid2lid(topo: &Topology, lids: &LidMap) -> String {
    let guids = IbsimGuids::new(topo);
    let mut out = String::with_capacity(48 * topo.num_nodes());
    for (i, &s) in topo.switches().iter().enumerate() {
        let lid = lids.switch_lid(i);
        let _ = write!(out, "0x{:016x} 0x{lid:04x} 0x{lid:04x}\n\n", guids.port_guid(s, 0));
    }
    for (i, &h) in topo.hosts().iter().enumerate() {
        let lid = lids.host_lid(i);
        let _ = write!(out, "0x{:016x} 0x{lid:04x} 0x{lid:04x}\n\n", guids.port_guid(h, primary_port(topo, h)));
    }
    out
}

// ---------------------------------------------------------------------------------------
// Writing

/// Write `routes` as an OpenSM LFT dump with the LIDs of `lids` and ibsim's GUIDs (see the
/// module docs). Fails only when the table or the LID map does not fit `topo`.
///
/// A dump has a line per switch and LID, like OpenSM's own: S × (S + H) lines of about 70
/// bytes (2.3 GB for a 16×16×16 torus with one host per router); [`write_to`] streams it
/// to a file instead of building it in memory.
pub fn write(topo: &Topology, routes: &RoutingTable, lids: &LidMap) -> Result<String> {
    let mut out = Vec::new();
    write_to(&mut out, topo, routes, lids)?;
    // Everything written is ASCII or comes from `&str` labels.
    String::from_utf8(out).map_err(|e| NetweaveError::InvalidParameter(format!("lft write: {e}")))
}

/// [`write`] into any `io::Write` (a `BufWriter<File>` for big fabrics); I/O errors become
/// one-line errors.
pub fn write_to<W: io::Write>(sink: &mut W, topo: &Topology, routes: &RoutingTable, lids: &LidMap) -> Result<()> {
    routes.check_fits(topo)?;
    if lids.switch_lids.len() != topo.num_switches() || lids.host_lids.len() != topo.num_hosts() {
        return crate::invalid!(
            "the LID map has {} switch and {} host LIDs, the topology {} switches and {} hosts",
            lids.switch_lids.len(),
            lids.host_lids.len(),
            topo.num_switches(),
            topo.num_hosts()
        );
    }
    let guids = IbsimGuids::new(topo);
    let targets = lids.targets();
    let switch_routes = SwitchRoutes::new(topo);
    // Destination comments are the same in every section: build them once.
    let comments: Vec<String> = targets
        .iter()
        .map(|t| match *t {
            Target::None => String::new(),
            Target::Switch(i) => {
                let n = topo.switches()[i];
                format!("Switch portguid 0x{:016x}: '{}'", guids.port_guid(n, 0), node_description(topo.label(n)))
            }
            Target::Host(i) => {
                let n = topo.hosts()[i];
                format!(
                    "Channel Adapter portguid 0x{:016x}: '{}'",
                    guids.port_guid(n, primary_port(topo, n)),
                    node_description(topo.label(n))
                )
            }
        })
        .collect();
    let max = lids.max_lid();
    let io_error = |e: io::Error| NetweaveError::InvalidParameter(format!("cannot write the LFT dump: {e}"));
    // One switch section at a time: bounded memory whatever the fabric.
    let mut out = String::with_capacity((max as usize + 2) * 80);
    let _ = writeln!(
        out,
        "# netweave routes {:?} for topology {:?}: OpenSM LFT dump, load with opensm -R file -U FILE",
        snippet(routes.engine()),
        snippet(topo.name())
    );
    for (s, &node) in topo.switches().iter().enumerate() {
        let _ = writeln!(
            out,
            "Unicast lids [0-{max}] of switch Lid {} guid 0x{:016x} ('{}'):",
            lids.switch_lid(s),
            guids.node_guid(node),
            node_description(topo.label(node))
        );
        for (lid, t) in targets.iter().enumerate() {
            let port = match *t {
                Target::None => continue,
                Target::Host(h) => match routes.out_port(s, h) {
                    NO_PORT => continue,
                    p => p,
                },
                Target::Switch(t) => match switch_routes.port(topo, routes, s, t) {
                    Some(p) => p,
                    None => continue,
                },
            };
            let _ = writeln!(out, "0x{lid:04x} {port:03} # {}", comments[lid]);
        }
        let _ = writeln!(out, "{max} lids dumped");
        sink.write_all(out.as_bytes()).map_err(io_error)?;
        out.clear();
    }
    sink.write_all(out.as_bytes()).map_err(io_error)?;
    sink.flush().map_err(io_error)
}

/// Routes towards switch LIDs (see the module docs).
struct SwitchRoutes {
    /// Per switch: a host hanging off it by its only link, whose routes are reused.
    via_host: Vec<Option<usize>>,
    /// Shortest-path ports for switches without such a host: `ports[slot * S + from]`.
    slot: Vec<u32>,
    ports: Vec<Port>,
}

impl SwitchRoutes {
    fn new(topo: &Topology) -> Self {
        let s_count = topo.num_switches();
        let mut via_host = vec![None; s_count];
        for (h, &node) in topo.hosts().iter().enumerate() {
            if topo.degree(node) != 1 {
                continue;
            }
            if let Some(sw) = topo.host_switch(node) {
                via_host[topo.kind_index(sw)].get_or_insert(h);
            }
        }
        let mut slot = vec![u32::MAX; s_count];
        let lonely: Vec<usize> = (0..s_count).filter(|&t| via_host[t].is_none()).collect();
        let mut ports = vec![NO_PORT; lonely.len() * s_count];
        if !lonely.is_empty() {
            let graph = SwitchFabric::new(topo);
            let mut dist = vec![u32::MAX; s_count];
            let mut queue = Vec::with_capacity(s_count);
            for (k, &t) in lonely.iter().enumerate() {
                slot[t] = k as u32;
                graph.bfs(t, &mut dist, &mut queue);
                for from in 0..s_count {
                    if from == t || dist[from] == u32::MAX {
                        continue;
                    }
                    // Neighbours are in port order, so the first closer one is the lowest port.
                    let next = topo.neighbors(topo.switches()[from]).iter().find(|a| {
                        !topo.is_host(a.neighbor) && dist[topo.kind_index(a.neighbor)].wrapping_add(1) == dist[from]
                    });
                    if let Some(a) = next {
                        ports[k * s_count + from] = a.port;
                    }
                }
            }
        }
        SwitchRoutes { via_host, slot, ports }
    }

    /// Port switch `from` uses towards switch `to`'s LID; `None` when unreachable.
    fn port(&self, topo: &Topology, routes: &RoutingTable, from: usize, to: usize) -> Option<Port> {
        if from == to {
            return Some(0);
        }
        let p = match self.via_host[to] {
            Some(h) => routes.out_port(from, h),
            None => self.ports[self.slot[to] as usize * topo.num_switches() + from],
        };
        (p != NO_PORT).then_some(p)
    }
}

// ---------------------------------------------------------------------------------------
// Reading

/// What a LID was found to belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// A host, with whether the LID is known to be that of its first connected port.
    Host { host: usize, primary: Option<bool> },
    /// A switch, router, or anything else that is not a host of the topology's routing.
    Other,
}

/// How a LID was described, and where first.
struct LidInfo {
    owner: Owner,
    /// Description text as read, for conflict messages.
    what: String,
    line: usize,
}

/// Name lookups built once per read.
struct Index<'t> {
    topo: &'t Topology,
    guids: IbsimGuids,
    /// Description → switch index; `None` when two switches share it.
    switch_desc: HashMap<String, Option<usize>>,
    host_desc: HashMap<String, Option<usize>>,
    /// GUID in an ibnetdiscover-style label `S-<16 hex digits>` → switch index.
    switch_label_guid: HashMap<u64, usize>,
}

impl<'t> Index<'t> {
    fn new(topo: &'t Topology) -> Self {
        let mut switch_desc: HashMap<String, Option<usize>> = HashMap::with_capacity(topo.num_switches());
        let mut switch_label_guid = HashMap::new();
        for (i, &s) in topo.switches().iter().enumerate() {
            let d = node_description(topo.label(s));
            if !d.trim().is_empty() {
                switch_desc.entry(d.trim_end().to_string()).and_modify(|v| *v = None).or_insert(Some(i));
            }
            if let Some(g) = topo.label(s).strip_prefix("S-").and_then(hex16) {
                switch_label_guid.insert(g, i);
            }
        }
        let mut host_desc: HashMap<String, Option<usize>> = HashMap::with_capacity(topo.num_hosts());
        for (i, &h) in topo.hosts().iter().enumerate() {
            let d = node_description(topo.label(h));
            if !d.trim().is_empty() {
                host_desc.entry(d.trim_end().to_string()).and_modify(|v| *v = None).or_insert(Some(i));
            }
        }
        Index { topo, guids: IbsimGuids::new(topo), switch_desc, host_desc, switch_label_guid }
    }

    fn switch(&self, guid: u64, desc: Option<&str>) -> Option<usize> {
        if let Some(&s) = self.switch_label_guid.get(&guid) {
            return Some(s);
        }
        if let Some(&Some(s)) = desc.and_then(|d| self.switch_desc.get(d.trim_end())) {
            return Some(s);
        }
        self.guids.switch_of(self.topo, guid).filter(|&s| self.agrees(self.topo.switches()[s], desc))
    }

    /// Whether a GUID-position match is plausible: the dump gives no description, or the
    /// node's (when it has one) is the same. Guards against reading another fabric's dump,
    /// whose ibsim GUIDs would otherwise map onto this topology's nodes by position.
    fn agrees(&self, node: NodeId, desc: Option<&str>) -> bool {
        let label = self.topo.label(node);
        match desc {
            None => true,
            Some(d) => label.is_empty() || node_description(label).trim_end() == d.trim_end(),
        }
    }

    fn host(&self, port_guid: u64, desc: Option<&str>) -> Option<Owner> {
        if let Some(&Some(h)) = desc.and_then(|d| self.host_desc.get(d.trim_end())) {
            // The port is known only if the GUID is ibsim's for this very host.
            let primary = match self.guids.host_port_of(self.topo, port_guid) {
                Some((gh, p)) if gh == h => Some(p == primary_port(self.topo, self.topo.hosts()[h])),
                _ => None,
            };
            return Some(Owner::Host { host: h, primary });
        }
        let (h, p) = self.guids.host_port_of(self.topo, port_guid)?;
        if !self.agrees(self.topo.hosts()[h], desc) {
            return None;
        }
        Some(Owner::Host { host: h, primary: Some(p == primary_port(self.topo, self.topo.hosts()[h])) })
    }
}

/// Exactly 16 hex digits as a number.
fn hex16(s: &str) -> Option<u64> {
    (s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| u64::from_str_radix(s, 16).ok()).flatten()
}

/// Hex digits at the start of `s` (after which `s` continues), as a number.
fn leading_hex(s: &str) -> Option<(u64, &str)> {
    let end = s.bytes().position(|b| !b.is_ascii_hexdigit()).unwrap_or(s.len());
    if end == 0 || end > 16 {
        return None;
    }
    Some((u64::from_str_radix(&s[..end], 16).ok()?, &s[end..]))
}

/// A parsed destination description.
enum Dest<'a> {
    /// No description (`ibroute -n`).
    Bare,
    /// Nothing to import (LMC path, illegal port, unknown LID).
    Skip,
    /// `<type> portguid 0x<guid>: '<desc>'`.
    Port { host: bool, guid: u64, desc: Option<&'a str> },
}

/// Parse what follows `0x<lid> <port>` on an entry line.
fn parse_dest(rest: &str) -> std::result::Result<Dest<'_>, String> {
    let mut s = rest.trim();
    if s.is_empty() {
        return Ok(Dest::Bare);
    }
    // OpenSM: "# <info>"; infiniband-diags: ": (<info>)".
    if let Some(t) = s.strip_prefix('#') {
        s = t.trim();
    } else if let Some(t) = s.strip_prefix(':') {
        s = t.trim();
        s = s.strip_prefix('(').and_then(|t| t.strip_suffix(')')).unwrap_or(s).trim();
    } else {
        return Err(format!("expected '#' or ':' after the port, found {:?}", snippet(s)));
    }
    if s.is_empty()
        || s.starts_with("path #")
        || s.contains("illegal port")
        || s.starts_with("unknown node")
        || s.starts_with("node info not available")
        || s.starts_with("no description")
    {
        return Ok(Dest::Skip);
    }
    let Some(at) = s.find("portguid 0x") else {
        return Err(format!("unrecognised destination {:?} (expected '<type> portguid 0x<guid>: ...')", snippet(s)));
    };
    let kind = s[..at].trim();
    let Some((guid, after)) = leading_hex(&s[at + "portguid 0x".len()..]) else {
        return Err(format!("cannot read the port GUID in {:?}", snippet(s)));
    };
    let desc = after.trim_start().strip_prefix(':').map(str::trim).and_then(|d| {
        let d = d.strip_prefix('\'')?;
        Some(d.strip_suffix('\'').unwrap_or(d))
    });
    Ok(Dest::Port { host: kind == "Channel Adapter", guid, desc })
}

/// A switch section header: (guid, description).
fn parse_header(line: &str) -> std::result::Result<(u64, Option<&str>), String> {
    let Some(at) = line.find(" guid 0x") else {
        return Err("switch header without ' guid 0x<guid>'".to_string());
    };
    let Some((guid, after)) = leading_hex(&line[at + " guid 0x".len()..]) else {
        return Err("cannot read the switch GUID".to_string());
    };
    let after = after.trim();
    let desc = after.strip_suffix(':').unwrap_or(after).trim();
    let desc = desc.strip_prefix('(').and_then(|d| d.strip_suffix(')')).map(|d| {
        let d = d.trim();
        d.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')).unwrap_or(d)
    });
    Ok((guid, desc))
}

/// Lines that carry nothing: blank, comments, ibroute's column header, section footers, the
/// `dump_lfts` wrapper's warning, diagnostics' stderr.
fn ignorable(t: &str) -> bool {
    if t.is_empty() || t.starts_with('#') || t.starts_with("***") || t.starts_with("ibwarn:") {
        return true;
    }
    let words: Vec<&str> = t.split_whitespace().collect();
    matches!(words.as_slice(), ["Lid", "Out", "Destination"] | ["Port", "Info"])
        || matches!(words.as_slice(), [n, "lids", "dumped"] | [n, "valid", "lids", "dumped"] if n.bytes().all(|b| b.is_ascii_digit()))
}

/// Parse an LFT dump of `topo`'s fabric into a routing table (one VC, engine
/// [`IMPORTED_ENGINE`]). See the module docs for how switches and LIDs are matched.
pub fn read(topo: &Topology, text: &str) -> Result<RoutingTable> {
    let index = Index::new(topo);
    let s_count = topo.num_switches();
    // Per switch: the line of its header and its (lid, port) entries.
    let mut section_line = vec![0usize; s_count];
    let mut entries: Vec<Vec<(u16, Port)>> = vec![Vec::new(); s_count];
    let mut seen_in_section: HashSet<u16> = HashSet::new();
    let mut lids: HashMap<u16, LidInfo> = HashMap::new();
    let mut bare: HashMap<u16, usize> = HashMap::new();
    let mut current: Option<usize> = None;
    let mut sections = 0usize;

    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let t = raw.trim();
        let err = |m: String| parse_error(FMT, line, m);
        if ignorable(t) {
            continue;
        }
        if t.starts_with("Multicast mlids") {
            return Err(err("this is a multicast forwarding table dump; unicast LFTs are needed".into()));
        }
        if t.starts_with("Unicast lids") {
            let (guid, desc) = parse_header(t).map_err(err)?;
            let Some(s) = index.switch(guid, desc) else {
                return Err(err(format!(
                    "switch 0x{guid:016x} ({:?}) is not a switch of topology {:?} (no switch has that \
                     description or ibsim GUID)",
                    snippet(desc.unwrap_or("")),
                    snippet(topo.name())
                )));
            };
            if section_line[s] != 0 {
                return Err(err(format!(
                    "switch {:?} has a second table (the first is at line {})",
                    snippet(topo.label(topo.switches()[s])),
                    section_line[s]
                )));
            }
            section_line[s] = line;
            seen_in_section.clear();
            current = Some(s);
            sections += 1;
            continue;
        }
        let Some(body) = t.strip_prefix("0x") else {
            return Err(err(format!("unrecognised line {:?}", snippet(t))));
        };
        let Some(s) = current else {
            return Err(err("a LID entry before any 'Unicast lids … of switch' header".into()));
        };
        let Some((lid, after)) = leading_hex(body) else {
            return Err(err(format!("cannot read the LID in {:?}", snippet(t))));
        };
        if lid == 0 || lid > MAX_UNICAST_LID as u64 {
            return Err(err(format!("LID 0x{lid:x} is not a unicast LID (1..=0x{MAX_UNICAST_LID:x})")));
        }
        let lid = lid as u16;
        let after = after.trim_start();
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || (digits < after.len() && !after.as_bytes()[digits].is_ascii_whitespace()) {
            return Err(err(format!("cannot read the output port in {:?}", snippet(t))));
        }
        let port: u32 = after[..digits].parse().unwrap_or(u32::MAX);
        let dest = parse_dest(&after[digits..]).map_err(err)?;
        if matches!(dest, Dest::Skip) {
            continue;
        }
        let node = topo.switches()[s];
        if port > topo.radix(node) as u32 {
            return Err(err(format!(
                "port {port} is beyond the {} ports of switch {:?}",
                topo.radix(node),
                snippet(topo.label(node))
            )));
        }
        // Port 0 is the switch itself; any other port must lead somewhere in this fabric (a
        // table of another fabric with the same switch names fails here, e.g. a torus's wrap ports
        // on a mesh).
        if port != 0 && topo.out_channel(node, port as Port).is_none() {
            return Err(err(format!(
                "switch {:?} sends LID 0x{lid:04x} out of port {port}, which has no link in topology {:?} \
                 (is it a dump of this fabric?)",
                snippet(topo.label(node)),
                snippet(topo.name())
            )));
        }
        if !seen_in_section.insert(lid) {
            return Err(err(format!("LID 0x{lid:04x} is listed twice in this table")));
        }
        entries[s].push((lid, port as Port));
        match dest {
            Dest::Skip => {}
            Dest::Bare => {
                bare.entry(lid).or_insert(line);
            }
            Dest::Port { host, guid, desc } => {
                let owner = if host {
                    index.host(guid, desc).ok_or_else(|| {
                        err(format!(
                            "LID 0x{lid:04x} is adapter port 0x{guid:016x} ({:?}), which is no host of \
                             topology {:?}",
                            snippet(desc.unwrap_or("")),
                            snippet(topo.name())
                        ))
                    })?
                } else {
                    Owner::Other
                };
                let what = format!("port 0x{guid:016x} ({:?})", snippet(desc.unwrap_or("")));
                match lids.get(&lid) {
                    None => {
                        lids.insert(lid, LidInfo { owner, what, line });
                    }
                    Some(prev) if prev.owner != owner => {
                        return Err(err(format!(
                            "LID 0x{lid:04x} is {what} here but {} at line {}",
                            prev.what, prev.line
                        )));
                    }
                    Some(_) => {}
                }
            }
        }
    }
    if sections == 0 {
        return Err(parse_error(FMT, 0, "no 'Unicast lids … of switch … guid …' table in the text"));
    }
    if let Some(s) = section_line.iter().position(|&l| l == 0) {
        return Err(parse_error(
            FMT,
            0,
            format!(
                "switch {:?} of topology {:?} has no table in the dump (is it a dump of this fabric?)",
                snippet(topo.label(topo.switches()[s])),
                snippet(topo.name())
            ),
        ));
    }
    // LIDs seen only without a description: netweave's sequential assignment.
    if !bare.is_empty() {
        let seq = LidMap::sequential(topo)?;
        let targets = seq.targets();
        let mut bare: Vec<(u16, usize)> = bare.into_iter().filter(|(l, _)| !lids.contains_key(l)).collect();
        bare.sort_unstable();
        for (lid, line) in bare {
            let owner = match targets.get(lid as usize) {
                Some(Target::Host(h)) => Owner::Host { host: *h, primary: Some(true) },
                Some(Target::Switch(_)) => Owner::Other,
                _ => {
                    return Err(parse_error(
                        FMT,
                        line,
                        format!(
                            "LID 0x{lid:04x} has no destination description and is beyond the {} LIDs of \
                             netweave's sequential assignment",
                            seq.max_lid()
                        ),
                    ))
                }
            };
            lids.insert(lid, LidInfo { owner, what: String::new(), line });
        }
    }
    // One LID per host: its first connected port's if known, else its lowest.
    let mut host_lid: Vec<Option<(bool, u16)>> = vec![None; topo.num_hosts()];
    for (&lid, info) in &lids {
        if let Owner::Host { host, primary } = info.owner {
            let rank = (primary != Some(true), lid);
            let slot = &mut host_lid[host];
            if slot.map_or(true, |old| rank < old) {
                *slot = Some(rank);
            }
        }
    }
    let mut lid_host: HashMap<u16, usize> = HashMap::with_capacity(topo.num_hosts());
    for (h, v) in host_lid.iter().enumerate() {
        if let Some((_, lid)) = v {
            lid_host.insert(*lid, h);
        }
    }
    let mut table = RoutingTable::new(topo, IMPORTED_ENGINE);
    for (s, list) in entries.iter().enumerate() {
        for &(lid, port) in list {
            if let Some(&h) = lid_host.get(&lid) {
                table.set_out_port(s, h, port);
            }
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{deadlock, route, Engine, RouteOptions};
    use crate::topology::fat_tree::k_ary_n_tree;
    use crate::topology::grid::torus;
    use crate::topology::io::ibnet;
    use crate::topology::lsft::latin_square_fat_tree;
    use crate::topology::{LinkSpec, TopologyBuilder};
    use proptest::prelude::*;

    fn minhop(topo: &Topology) -> RoutingTable {
        route(topo, Engine::MinHop, &RouteOptions::default()).unwrap()
    }

    fn err(topo: &Topology, text: &str) -> String {
        let e = read(topo, text).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(e.starts_with("lft parse error at line"), "{e}");
        e
    }

    #[test]
    fn sequential_lids_and_ibsim_guids() {
        let t = torus(&[3, 3], 2).unwrap();
        let l = LidMap::sequential(&t).unwrap();
        assert_eq!((l.switch_lid(0), l.switch_lid(8), l.host_lid(0), l.host_lid(17), l.max_lid()), (1, 9, 10, 27, 27));
        let g = IbsimGuids::new(&t);
        let (s0, h0, h1) = (t.switches()[0], t.hosts()[0], t.hosts()[1]);
        assert_eq!(g.node_guid(s0), 0x200000);
        assert_eq!(g.port_guid(s0, 3), 0x200000);
        assert_eq!(g.node_guid(t.switches()[8]), 0x200008);
        assert_eq!((g.node_guid(h0), g.port_guid(h0, 1)), (0x100000, 0x100001));
        assert_eq!(g.port_guid(h1, 1), 0x100003);
        assert_eq!(g.host_port_of(&t, 0x100003), Some((1, 1)));
        assert_eq!(g.host_port_of(&t, 0x100002), None);
        assert_eq!(g.host_port_of(&t, 0xfffff), None);
        assert_eq!(g.switch_of(&t, 0x200008), Some(8));
        assert_eq!(g.switch_of(&t, 0x200009), None);
        let g2l = guid2lid(&t, &l);
        assert!(g2l.starts_with("0x0000000000200000 0x0001 0x0001\n\n"), "{g2l}");
        assert!(g2l.contains("0x0000000000100023 0x001b 0x001b\n"), "{g2l}");
    }

    #[test]
    fn explicit_lid_maps_are_checked() {
        let t = torus(&[2, 2], 1).unwrap();
        assert!(LidMap::from_lids(&t, vec![1, 2, 3, 4], vec![5, 6, 7, 8]).is_ok());
        assert!(LidMap::from_lids(&t, vec![1, 2, 3], vec![5, 6, 7, 8]).is_err());
        assert!(LidMap::from_lids(&t, vec![1, 2, 3, 4], vec![5, 6, 7, 4]).unwrap_err().to_string().contains("twice"));
        assert!(LidMap::from_lids(&t, vec![0, 2, 3, 4], vec![5, 6, 7, 8]).is_err());
        assert!(LidMap::from_lids(&t, vec![0xc000, 2, 3, 4], vec![5, 6, 7, 8]).is_err());
        // Sparse LIDs round-trip too.
        let lids = LidMap::from_lids(&t, vec![40, 2, 33, 4], vec![100, 6, 7, 900]).unwrap();
        let r = minhop(&t);
        let dump = write(&t, &r, &lids).unwrap();
        assert!(dump.contains("Unicast lids [0-900] of switch Lid 40 guid"), "{dump}");
        assert_eq!(read(&t, &dump).unwrap().ports(), r.ports());
    }

    #[test]
    fn streaming_matches_and_reports_io_errors() {
        let t = torus(&[3, 3], 1).unwrap();
        let r = minhop(&t);
        let lids = LidMap::sequential(&t).unwrap();
        let mut buf = Vec::new();
        write_to(&mut buf, &t, &r, &lids).unwrap();
        assert_eq!(String::from_utf8(buf).unwrap(), write(&t, &r, &lids).unwrap());
        struct Full;
        impl io::Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let e = write_to(&mut Full, &t, &r, &lids).unwrap_err().to_string();
        assert!(e.contains("disk full") && !e.contains('\n'), "{e}");
        let other = torus(&[2, 2], 1).unwrap();
        assert!(write(&t, &r, &LidMap::sequential(&other).unwrap()).unwrap_err().to_string().contains("LID map"));
    }

    #[test]
    fn dump_has_opensm_shape() {
        let t = torus(&[3, 3], 2).unwrap();
        let r = minhop(&t);
        let dump = write(&t, &r, &LidMap::sequential(&t).unwrap()).unwrap();
        let lines: Vec<&str> = dump.lines().collect();
        assert!(lines[0].starts_with("# netweave routes \"minhop\""));
        assert_eq!(lines[1], "Unicast lids [0-27] of switch Lid 1 guid 0x0000000000200000 ('r(0,0)'):");
        assert_eq!(lines[2], "0x0001 000 # Switch portguid 0x0000000000200000: 'r(0,0)'");
        assert_eq!(lines[11], "0x000a 001 # Channel Adapter portguid 0x0000000000100001: 'h(0,0).0'");
        assert_eq!(lines[29], "27 lids dumped");
        assert_eq!(dump.matches("Unicast lids").count(), 9);
        // Every switch routes every LID (the torus is connected and minhop complete).
        assert_eq!(dump.lines().filter(|l| l.starts_with("0x")).count(), 9 * 27);
    }

    #[test]
    fn switch_lids_follow_host_routes_or_shortest_paths() {
        // A 2-ary 2-tree: the two spines have no hosts.
        let t = k_ary_n_tree(2, 2).unwrap();
        let r = minhop(&t);
        let lids = LidMap::sequential(&t).unwrap();
        let sr = SwitchRoutes::new(&t);
        let graph = SwitchFabric::new(&t);
        let mut dist = vec![0; t.num_switches()];
        let mut q = Vec::new();
        for to in 0..t.num_switches() {
            graph.bfs(to, &mut dist, &mut q);
            for (from, &want) in dist.iter().enumerate() {
                // Following the ports from `from` reaches `to` in `dist` hops.
                let mut at = from;
                let mut hops = 0u32;
                while at != to {
                    let p = sr.port(&t, &r, at, to).unwrap();
                    let a = t.neighbors(t.switches()[at]).iter().find(|a| a.port == p).unwrap();
                    at = t.kind_index(a.neighbor);
                    hops += 1;
                    assert!(hops as usize <= t.num_switches());
                }
                assert_eq!(sr.port(&t, &r, to, to), Some(0));
                assert_eq!(hops, want, "{from} -> {to}");
            }
        }
        assert_eq!(read(&t, &write(&t, &r, &lids).unwrap()).unwrap().ports(), r.ports());
    }

    #[test]
    fn round_trips_on_several_families() {
        for t in
            [torus(&[3, 3], 2).unwrap(), latin_square_fat_tree(2, false, false).unwrap(), k_ary_n_tree(4, 2).unwrap()]
        {
            for engine in [Engine::MinHop, Engine::Shortest] {
                let r = route(&t, engine, &RouteOptions::default()).unwrap();
                let dump = write(&t, &r, &LidMap::sequential(&t).unwrap()).unwrap();
                let back = read(&t, &dump).unwrap();
                assert_eq!(back.ports(), r.ports(), "{}", t.name());
                assert_eq!(back.engine(), IMPORTED_ENGINE);
                assert_eq!(deadlock::check(&t, &back).unwrap(), deadlock::check(&t, &r).unwrap());
            }
        }
    }

    #[test]
    fn no_route_entries_are_left_out_and_read_back_as_no_port() {
        let t = torus(&[3, 3], 1).unwrap();
        let mut r = minhop(&t);
        r.set_out_port(4, 2, NO_PORT);
        let dump = write(&t, &r, &LidMap::sequential(&t).unwrap()).unwrap();
        let back = read(&t, &dump).unwrap();
        assert_eq!(back.out_port(4, 2), NO_PORT);
        assert_eq!(back.ports(), r.ports());
        // Port 0 towards a host is no route as well.
        let host_lid = LidMap::sequential(&t).unwrap().host_lid(3);
        let from = format!("0x{host_lid:04x} 00");
        let pos = dump.find(&from).unwrap();
        let mut edited = dump.clone();
        edited.replace_range(pos..pos + from.len() + 1, &format!("0x{host_lid:04x} 000"));
        assert_eq!(read(&t, &edited).unwrap().out_port(0, 3), NO_PORT);
    }

    /// `dump_fts` / `ibroute` output of a fabric whose LIDs OpenSM chose itself (not ours):
    /// adapters are found by description, LIDs in any order.
    #[test]
    fn reads_ibroute_output_with_foreign_lids() {
        let mut b = TopologyBuilder::new("2sw");
        let s1 = b.add_switch("Switch1", 8);
        let s2 = b.add_switch("Switch2", 8);
        let h1 = b.add_host("Hca1");
        let h2 = b.add_host("Hca2");
        b.connect_ports(h1, 1, s1, 1, LinkSpec::default());
        b.connect_ports(s1, 3, s2, 4, LinkSpec::default());
        b.connect_ports(h2, 1, s2, 1, LinkSpec::default());
        let t = b.build().unwrap();
        let text = "\
Unicast lids [0x0-0x5] of switch DR path slid 0; dlid 0; 0 guid 0x0000000000200000 (Switch1):
  Lid  Out   Destination
       Port     Info 
0x0001 000 : (Switch portguid 0x0000000000200000: 'Switch1')
0x0002 001 : (Channel Adapter portguid 0x0000000000100001: 'Hca1')
0x0003 003 : (Switch portguid 0x0000000000200001: 'Switch2')
0x0005 003 : (Channel Adapter portguid 0x0000000000100004: 'Hca2')
4 valid lids dumped 
Unicast lids [0x0-0x5] of switch Lid 3 guid 0x0000000000200001 (Switch2):
  Lid  Out   Destination
       Port     Info 
0x0001 004 : (Switch portguid 0x0000000000200000: 'Switch1')
0x0002 004 : (Channel Adapter portguid 0x0000000000100001: 'Hca1')
0x0003 000 : (Switch portguid 0x0000000000200001: 'Switch2')
0x0005 001 : (Channel Adapter portguid 0x0000000000100004: 'Hca2')
0x0006 255 : (illegal port)
4 valid lids dumped 


*** WARNING ***: this command has been replaced by dump_fts
";
        let r = read(&t, text).unwrap();
        assert_eq!((r.out_port(0, 0), r.out_port(0, 1), r.out_port(1, 0), r.out_port(1, 1)), (1, 3, 4, 1));
        r.path(&t, 0, 1, &mut Vec::new()).unwrap();
    }

    #[test]
    fn bare_entries_use_sequential_lids_and_guids_stand_in_for_descriptions() {
        let t = torus(&[2, 2], 1).unwrap();
        let r = minhop(&t);
        let dump = write(&t, &r, &LidMap::sequential(&t).unwrap()).unwrap();
        // `ibroute -n`: no destination descriptions at all.
        let bare: String =
            dump.lines().map(|l| if l.starts_with("0x") { &l[..10] } else { l }).collect::<Vec<_>>().join("\n");
        assert_eq!(read(&t, &bare).unwrap().ports(), r.ports());
        // Descriptions that contradict the nodes at those ibsim GUIDs: another fabric.
        let renamed = dump.replace("'r(", "'x(");
        assert!(err(&t, &renamed).contains("not a switch of topology"));
        let renamed = dump.replace("'h(", "'y(");
        assert!(err(&t, &renamed).contains("no host of topology"));
        // OpenSM's own file engine format without any description (broken dump) still maps.
        let no_desc: String = dump
            .lines()
            .map(|l| l.split(": '").next().unwrap_or(l).trim_end_matches(':').to_string())
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(read(&t, &no_desc).unwrap().ports(), r.ports());
    }

    #[test]
    fn descriptions_win_over_position_guids() {
        // The same fabric with its nodes in another order (as an ibnetdiscover import has):
        // ibsim GUIDs of the original no longer match positions, but unique labels do.
        let t = torus(&[2, 2], 1).unwrap();
        let r = minhop(&t);
        let dump = write(&t, &r, &LidMap::sequential(&t).unwrap()).unwrap();
        let text = ibnet::write(&t).unwrap();
        // Reverse the records of the net file, then read it back: node order reversed.
        let mut records: Vec<&str> = text.split("\n\n").filter(|r| r.contains('[')).collect();
        records.reverse();
        let reordered = ibnet::read(&records.join("\n\n")).unwrap();
        assert_eq!(reordered.label(0), t.label((t.num_nodes() - 1) as NodeId));
        let back = read(&reordered, &dump).unwrap();
        let mut path = Vec::new();
        for s in 0..reordered.num_hosts() {
            for d in 0..reordered.num_hosts() {
                path.clear();
                back.path(&reordered, s, d, &mut path).unwrap();
            }
        }
    }

    #[test]
    fn node_descriptions_match_what_ibsim_and_opensm_report() {
        assert_eq!(node_description("r(0,0)"), "r(0,0)");
        assert_eq!(node_description("say \"hi\"\tnow"), "say 'hi' now");
        assert_eq!(node_description("hü"), "h  ");
        assert_eq!(node_description(&"z".repeat(100)).len(), 63);
        assert_eq!(node_description(""), "");
    }

    #[test]
    fn malformed_dumps_give_one_line_errors() {
        let t = torus(&[2, 2], 1).unwrap();
        let r = minhop(&t);
        let good = write(&t, &r, &LidMap::sequential(&t).unwrap()).unwrap();
        let other = latin_square_fat_tree(2, false, false).unwrap();
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "no 'Unicast lids"),
            ("hello\n".into(), "unrecognised line"),
            ("0x0001 001\n".into(), "before any"),
            ("Multicast mlids [0xc000-0xc3ff] of switch Lid 1\n".into(), "multicast"),
            ("Unicast lids [0-4] of switch Lid 1\n".into(), "guid 0x"),
            ("Unicast lids [0-4] of switch Lid 1 guid 0xZZ\n".into(), "switch GUID"),
            ("Unicast lids [0-4] of switch Lid 1 guid 0x0000000000999999 ('nope'):\n".into(), "not a switch"),
            (good.replacen("0x0002 0", "0xzz 0", 1), "cannot read the LID"),
            (good.replacen("0x0002 0", "0xc000 0", 1), "not a unicast LID"),
            (good.replacen("0x0002 0", "0x0000 0", 1), "not a unicast LID"),
            (good.replacen("0x0002 00", "0x0002 x0", 1), "output port"),
            (good.replacen("0x0002 00", "0x0002 90", 1), "beyond the 5 ports"),
            (
                good.replacen(" # Switch portguid 0x0000000000200001", " ! Switch portguid 0x0000000000200001", 1),
                "expected '#' or ':'",
            ),
            (good.replacen("Switch portguid", "Switch guid", 1), "unrecognised destination"),
            (good.replacen("portguid 0x0000000000200001", "portguid 0xqq", 1), "port GUID"),
            (good.replacen("0x0003 ", "0x0002 ", 1), "listed twice"),
            (good.replacen("'h(0,0)", "'nobody", 1).replacen("0x0000000000100001", "0x0000000000900001", 1), "no host"),
            (good.replacen("0x0000000000100003: 'h(1,0).0'", "0x0000000000100001: 'h(0,0).0'", 1), "but port"),
            (
                good.replacen("Unicast lids [0-8] of switch Lid 4", "Unicast lids [0-8] of switch Lid 1", 1).replacen(
                    "0x0000000000200003 ('r(1,1)')",
                    "0x0000000000200000 ('r(0,0)')",
                    1,
                ),
                "second table",
            ),
            (good.split("Unicast lids").take(4).collect::<Vec<_>>().join("Unicast lids"), "has no table"),
            (
                good.lines()
                    .map(|l| if l.starts_with("0x") { &l[..10] } else { l })
                    .collect::<Vec<_>>()
                    .join("\n")
                    .replacen("0x0008 00", "0x0009 00", 1),
                "beyond the 8 LIDs",
            ),
        ];
        for (text, want) in cases {
            assert_ne!(text, good, "the edit for {want:?} changed nothing");
            let e = err(&t, &text);
            assert!(e.contains(want), "want {want:?} in {e}");
        }
        let e = err(&other, &good);
        assert!(e.contains("line 2") && e.contains("not a switch of topology \"lsft(q=2)\""), "{e}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
            let t = torus(&[2, 2], 1).unwrap();
            if let Err(e) = read(&t, &text) {
                prop_assert!(!e.to_string().contains('\n'));
            }
        }

        /// Lines shaped like dump lines with random fields never panic the reader.
        #[test]
        fn dump_shaped_lines_never_panic(
            lines in proptest::collection::vec(
                prop_oneof![
                    "Unicast lids \\[0-[0-9]{1,3}\\] of switch Lid [0-9]{1,3} guid 0x[0-9a-f]{0,17} \\('[a-z(),0-9]{0,8}'\\):",
                    "0x[0-9a-fA-F]{0,5} [0-9]{0,4} (#|:) ?\\(?(Switch|Channel Adapter|Router|path #1) portguid 0x[0-9a-f]{0,17}: '[a-z(),.0-9]{0,9}'\\)?",
                    "0x[0-9a-f]{1,4} [0-9]{1,3}",
                    "[0-9]{1,3} (valid )?lids dumped",
                ],
                0..40,
            )
        ) {
            let t = torus(&[2, 2], 1).unwrap();
            match read(&t, &lines.join("\n")) {
                Ok(r) => r.check_fits(&t).unwrap(),
                Err(e) => prop_assert!(!e.to_string().contains('\n')),
            }
        }

        /// Damaging a valid dump anywhere gives an error or a table of the topology.
        #[test]
        fn damaged_dumps_never_panic(pos in 0usize..5000, byte in 0u8..128, op in 0u8..3) {
            let t = torus(&[2, 2], 1).unwrap();
            let good = write(&t, &minhop(&t), &LidMap::sequential(&t).unwrap()).unwrap();
            let mut bytes = good.into_bytes();
            let n = bytes.len();
            match op {
                0 => bytes.truncate(pos % n),
                1 => { bytes.remove(pos % n); }
                _ => bytes[pos % n] = byte,
            }
            match read(&t, &String::from_utf8_lossy(&bytes)) {
                Ok(r) => r.check_fits(&t).unwrap(),
                Err(e) => prop_assert!(!e.to_string().contains('\n')),
            }
        }
    }
}
