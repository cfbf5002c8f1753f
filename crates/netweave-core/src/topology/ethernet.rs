//! Ethernet environments of paper 004: trees of switches with per-link bandwidth and latency,
//! and several clusters joined by WAN links (the InTrigger grid).
//!
//! Paper 004 schedules collectives on networks where the path between two hosts is unique
//! and every link has its own bandwidth and latency (spec §2.1–2.2: a transfer's latency is
//! the sum of its links' latencies, its bandwidth the minimum). All shapes here are therefore
//! **trees**: hosts are leaves, switches inner nodes, `links = nodes − 1`, and each link
//! carries its own [`LinkSpec`] (bandwidth in Gbit/s, one-way latency in ns). Bonded links
//! are one link with the summed bandwidth, as the paper models them.
//!
//! Generators:
//! - [`switch_tree`]: a root switch, levels of switches fanning out, hosts on the edge switches.
//! - [`star_of_switches`]: edge switches with `k` hosts each under one core switch (the
//!   istbs cluster of §4.1 has 14 hosts per switch).
//! - [`multi_cluster`]: clusters (each a switch or a star of switches) joined through a WAN
//!   router; [`intrigger`] gives the 12 clusters of Table 6.1, [`parse_clusters`] reads the
//!   CLI's `chiba:32,hongo:24` form.
//!
//! Ports: on every switch the down ports come first (`1..=children`), the up port last.
//! Hosts have one port. Labels: `sw0` (the top switch), `sw1`, … in breadth-first order, and
//! `h0`, `h1`, … for hosts; in a multi-cluster network they are prefixed with the cluster
//! name (`chiba/sw0`, `chiba/h3`) and the WAN router is `wan`.

use serde::{Deserialize, Serialize};

use super::{check_capacity, require_at_least, LinkSpec, NodeId, Port, Topology, TopologyBuilder};
use crate::error::{NetweaveError, Result};

/// 1 Gbit/s Ethernet with 50 µs one-way latency per link: the host-link values of the worked
/// cost example in paper 004 (spec §2.2), used for every host link of [`intrigger`].
pub const GIGABIT_LAN: LinkSpec = LinkSpec { bandwidth_gbps: 1.0, latency_ns: 50_000.0 };

/// One-way latency of one WAN link (cluster switch ↔ WAN router) in [`intrigger_wan`]:
/// 2.5 ms, so two clusters are 5 ms apart one way. The thesis gives no WAN latencies; 5 ms is
/// a middle value for a Japanese research backbone (Tokyo–Tokyo ≈ 1 ms, Tokyo–Kyushu ≈ 10 ms).
pub const DEFAULT_WAN_LATENCY_NS: f64 = 2.5e6;

/// Cluster egress bandwidth [`parse_clusters`] assumes for a cluster name that is not in
/// Table 6.1 when no bandwidth is given: 10 Gbit/s, the most common egress there.
pub const DEFAULT_EGRESS_GBPS: f64 = 10.0;

/// Check a link spec given by the caller, naming it in the error.
fn check_link(what: &str, spec: &LinkSpec) -> Result<()> {
    LinkSpec::new(spec.bandwidth_gbps, spec.latency_ns)
        .map(|_| ())
        .map_err(|e| NetweaveError::InvalidParameter(format!("{what}: {e}")))
}

/// A link spec as a JSON object, for topology parameters.
fn link_json(spec: &LinkSpec) -> serde_json::Value {
    serde_json::json!({ "bandwidth_gbps": spec.bandwidth_gbps, "latency_ns": spec.latency_ns })
}

/// One level of a [`switch_tree`]: every switch of this level has `fanout` child switches,
/// each joined to it by a link with spec `link`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TreeLevel {
    /// Child switches per switch of this level (≥ 1).
    pub fanout: u32,
    /// The link between a switch of this level and each of its children.
    pub link: LinkSpec,
}

impl TreeLevel {
    /// A level whose switches each have `fanout` children, joined by `link`.
    pub fn new(fanout: u32, link: LinkSpec) -> Self {
        TreeLevel { fanout, link }
    }
}

/// A tree of switches: one root switch; `levels[0].fanout` switches under it joined by
/// `levels[0].link`; `levels[1].fanout` switches under each of those; and so on. The switches
/// of the last level are the edge switches and carry `hosts_per_edge_switch` hosts each on
/// `host_link`. With no levels the root itself is the only (edge) switch.
///
/// Layout: switches in breadth-first order (`sw0` is the root, coordinates `[level, index in
/// level]`), then hosts edge-switch-major (`h0`, `h1`, …, coordinates `[depth, host index]`
/// with `depth = levels.len() + 1`). Ports: down ports `1..=fanout` (or `1..=hosts` on edge
/// switches) in child order, then one up port; hosts use port 1.
///
/// Counts: `1 + f0 + f0·f1 + …` switches, `Πf·H` hosts, `nodes − 1` links.
///
/// ```
/// use netweave_core::topology::ethernet::{switch_tree, TreeLevel, GIGABIT_LAN};
/// use netweave_core::topology::LinkSpec;
/// // A core switch, 7 edge switches on 10 GbE, 14 hosts each on 1 GbE.
/// let up = LinkSpec::new(10.0, 5_000.0).unwrap();
/// let t = switch_tree(&[TreeLevel::new(7, up)], 14, GIGABIT_LAN).unwrap();
/// assert_eq!((t.num_switches(), t.num_hosts(), t.num_links()), (8, 98, 105));
/// ```
pub fn switch_tree(levels: &[TreeLevel], hosts_per_edge_switch: u32, host_link: LinkSpec) -> Result<Topology> {
    require_at_least("switch tree: hosts per edge switch", hosts_per_edge_switch as u64, 1)?;
    check_link("switch tree host link", &host_link)?;
    // Switches per level, saturating so absurd trees reach check_capacity.
    let mut per_level: Vec<u64> = vec![1];
    for (i, lv) in levels.iter().enumerate() {
        require_at_least(&format!("switch tree: fanout of level {i}"), lv.fanout as u64, 1)?;
        check_link(&format!("switch tree level {i} link"), &lv.link)?;
        per_level.push(per_level[i].saturating_mul(lv.fanout as u64));
    }
    let edges = *per_level.last().unwrap_or(&1);
    let switches = per_level.iter().fold(0u64, |a, &x| a.saturating_add(x));
    let hosts = edges.saturating_mul(hosts_per_edge_switch as u64);
    let nodes = switches.saturating_add(hosts);
    let max_radix =
        levels.iter().map(|l| l.fanout as u64 + 1).chain([hosts_per_edge_switch as u64 + 1]).max().unwrap_or(1);
    // Each non-root node has one up link; ports = 2 per link.
    check_capacity("switch tree", nodes, nodes - 1, (nodes - 1).saturating_mul(2), max_radix)?;

    let fanouts: Vec<u32> = levels.iter().map(|l| l.fanout).collect();
    let shape = if fanouts.is_empty() {
        "1".to_string()
    } else {
        fanouts.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("x")
    };
    let mut b = TopologyBuilder::new(format!("switch_tree({shape},hosts={hosts_per_edge_switch})"));
    b.family("switch_tree")
        .param("fanouts", fanouts)
        .param("level_links", levels.iter().map(|l| link_json(&l.link)).collect::<Vec<_>>())
        .param("hosts_per_edge_switch", hosts_per_edge_switch)
        .param("host_link", link_json(&host_link));

    // Switches level by level; the up port is the one after the down ports.
    let depth = levels.len();
    let mut level_start: Vec<NodeId> = Vec::with_capacity(depth + 1);
    for (l, &count) in per_level.iter().enumerate() {
        let down = if l < depth { levels[l].fanout } else { hosts_per_edge_switch };
        let radix = down as Port + Port::from(l > 0);
        level_start.push(b.num_nodes() as NodeId);
        for i in 0..count {
            let s = b.add_switch(format!("sw{}", b.num_nodes()), radix);
            b.set_coords(s, vec![l as i64, i as i64]);
        }
    }
    for (l, lv) in levels.iter().enumerate() {
        let up_port = if l + 1 < depth { levels[l + 1].fanout } else { hosts_per_edge_switch } as Port + 1;
        for i in 0..per_level[l] as u32 {
            let parent = level_start[l] + i;
            for c in 0..lv.fanout {
                let child = level_start[l + 1] + i * lv.fanout + c;
                b.connect_ports(child, up_port, parent, (c + 1) as Port, lv.link);
            }
        }
    }
    let first_edge = level_start[depth];
    for e in 0..edges as u32 {
        for k in 0..hosts_per_edge_switch {
            let idx = e * hosts_per_edge_switch + k;
            let h = b.add_host(format!("h{idx}"));
            b.set_coords(h, vec![depth as i64 + 1, idx as i64]);
            b.connect_ports(h, 1, first_edge + e, (k + 1) as Port, host_link);
        }
    }
    b.build()
}

/// `hosts` hosts on edge switches of `hosts_per_switch` each (the last one possibly less
/// full), all edge switches under one core switch: the istbs-like shape of paper 004 §4.1
/// (14 hosts per switch; 96 hosts need 7 edge switches).
///
/// Host links use `host_link`, edge-to-core links `uplink`. Layout: `sw0` is the core (ports
/// `1..=E` to edge switches `sw1..=swE`); every edge switch has radix `hosts_per_switch + 1`
/// with hosts on the low ports and the uplink last; hosts `h0…` in order, edge-switch-major.
/// Coordinates as in a one-cluster [`multi_cluster`]: switches `[0, level, index]`, hosts
/// `[0, host index]`.
///
/// ```
/// use netweave_core::topology::ethernet::{star_of_switches, GIGABIT_LAN};
/// let t = star_of_switches(96, 14, GIGABIT_LAN, GIGABIT_LAN).unwrap();
/// assert_eq!((t.num_switches(), t.num_hosts()), (8, 96));
/// ```
pub fn star_of_switches(hosts: u32, hosts_per_switch: u32, host_link: LinkSpec, uplink: LinkSpec) -> Result<Topology> {
    let spec = ClusterSpec { name: String::new(), hosts, host_link, uplink, hosts_per_switch: Some(hosts_per_switch) };
    check_cluster(&spec, "star of switches")?;
    let (switches, total_ports, radix) = cluster_size(&spec);
    let nodes = switches + hosts as u64;
    check_capacity("star of switches", nodes, nodes - 1, total_ports, radix)?;
    let mut b = TopologyBuilder::new(format!("star_of_switches(hosts={hosts},per_switch={hosts_per_switch})"));
    b.family("star_of_switches")
        .param("hosts", hosts)
        .param("hosts_per_switch", hosts_per_switch)
        .param("host_link", link_json(&host_link))
        .param("uplink", link_json(&uplink));
    add_cluster(&mut b, &spec, 0, "", 0);
    b.build()
}

/// One cluster of a [`multi_cluster`] network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterSpec {
    /// Name, used as the label prefix (`chiba/h3`): letters, digits, `_`, `-`, `.`.
    pub name: String,
    /// Number of hosts (≥ 1).
    pub hosts: u32,
    /// Link between a host and its switch (intra-cluster network).
    pub host_link: LinkSpec,
    /// The cluster's egress: its bandwidth is the WAN link's bandwidth (see
    /// [`multi_cluster`]); with `hosts_per_switch` the whole spec is also used for the
    /// edge-switch-to-cluster-switch links inside the cluster.
    pub uplink: LinkSpec,
    /// `None`: every host hangs off the one cluster switch. `Some(k)`: hosts sit on edge
    /// switches of `k` hosts each (the last possibly less full) under the cluster switch.
    pub hosts_per_switch: Option<u32>,
}

impl ClusterSpec {
    /// A cluster of `hosts` hosts on [`GIGABIT_LAN`] with an egress of `egress_gbps` (whose
    /// latency is that of the LAN, 50 µs), all hosts on one cluster switch.
    pub fn new(name: impl Into<String>, hosts: u32, egress_gbps: f64) -> Self {
        ClusterSpec {
            name: name.into(),
            hosts,
            host_link: GIGABIT_LAN,
            uplink: LinkSpec { bandwidth_gbps: egress_gbps, latency_ns: GIGABIT_LAN.latency_ns },
            hosts_per_switch: None,
        }
    }
}

/// Whether `name` is a usable cluster name (also a label prefix).
fn valid_cluster_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Check one cluster's own parameters (not its name).
fn check_cluster(c: &ClusterSpec, what: &str) -> Result<()> {
    require_at_least(&format!("{what}: hosts"), c.hosts as u64, 1)?;
    if let Some(k) = c.hosts_per_switch {
        require_at_least(&format!("{what}: hosts per switch"), k as u64, 1)?;
    }
    check_link(&format!("{what} host link"), &c.host_link)?;
    check_link(&format!("{what} uplink"), &c.uplink)
}

/// `(switches, total ports incl. hosts' and one WAN/up port on the cluster switch, max radix)`
/// of one cluster as [`add_cluster`] builds it.
fn cluster_size(c: &ClusterSpec) -> (u64, u64, u64) {
    let hosts = c.hosts as u64;
    match c.hosts_per_switch {
        None => (1, hosts + 1 + hosts, hosts + 1),
        Some(k) => {
            let k = k as u64;
            let edges = hosts.div_ceil(k);
            (1 + edges, (edges + 1) + edges * (k + 1) + hosts, (edges + 1).max(k + 1))
        }
    }
}

/// Add one cluster: its switches (cluster switch first) and hosts, labelled `{prefix}sw{i}` and
/// `{prefix}h{i}`, with coordinates starting with `index`. The cluster switch gets `extra_up`
/// ports after its down ports (1 for the WAN link, 0 for a stand-alone star). Returns the
/// cluster switch.
fn add_cluster(b: &mut TopologyBuilder, c: &ClusterSpec, index: u32, prefix: &str, extra_up: Port) -> NodeId {
    let ci = index as i64;
    let add_hosts = |b: &mut TopologyBuilder, switch: NodeId, first: u32, count: u32| {
        for k in 0..count {
            let idx = first + k;
            let h = b.add_host(format!("{prefix}h{idx}"));
            b.set_coords(h, vec![ci, idx as i64]);
            b.connect_ports(h, 1, switch, (k + 1) as Port, c.host_link);
        }
    };
    match c.hosts_per_switch {
        None => {
            let top = b.add_switch(format!("{prefix}sw0"), c.hosts as Port + extra_up);
            b.set_coords(top, vec![ci, 0, 0]);
            add_hosts(b, top, 0, c.hosts);
            top
        }
        Some(k) => {
            let edges = c.hosts.div_ceil(k);
            let top = b.add_switch(format!("{prefix}sw0"), edges as Port + extra_up);
            b.set_coords(top, vec![ci, 0, 0]);
            let first_edge = b.num_nodes() as NodeId;
            for e in 0..edges {
                let s = b.add_switch(format!("{prefix}sw{}", e + 1), k as Port + 1);
                b.set_coords(s, vec![ci, 1, e as i64]);
                b.connect_ports(s, k as Port + 1, top, (e + 1) as Port, c.uplink);
            }
            for e in 0..edges {
                let first = e * k;
                add_hosts(b, first_edge + e, first, k.min(c.hosts - first));
            }
            top
        }
    }
}

/// Several clusters joined by WAN links: each cluster is a switch tree (one cluster switch
/// with all hosts, or edge switches under a cluster switch when `hosts_per_switch` is given),
/// and every cluster switch is linked to one central WAN router.
///
/// ```text
///            chiba/sw0 ── wan ── suzuk/sw0
///            /  |  \              /  |  \
///      chiba/h0 …  chiba/h31  suzuk/h0 … suzuk/h31
/// ```
///
/// The WAN link of a cluster has the bandwidth of its egress, `uplink.bandwidth_gbps`
/// (capped at `wan.bandwidth_gbps`, the backbone's capacity; pass a large value for no cap),
/// and latency `wan.latency_ns`. A host-to-host path between two clusters is thus
/// `host link → WAN link → WAN link → host link` (plus the edge trunks, if any): one-way
/// latency `2·wan.latency_ns` plus the LAN hops, bandwidth the smaller egress. A star keeps the
/// network a tree (unique paths, as paper 004 requires) and lets every cluster pair share
/// nothing but their own egress links, which is how the thesis reasons about the grid.
///
/// Layout: node 0 is the WAN router `wan` (port `c + 1` towards cluster `c`); then each
/// cluster in order: its cluster switch `name/sw0` (down ports first, WAN port last), its edge
/// switches `name/sw1…` (hosts first, uplink last), its hosts `name/h0…`. Host order is
/// cluster order. Coordinates: switches `[cluster, level, index]`, hosts `[cluster, index]`.
///
/// Errors: no clusters, a bad or repeated name, zero hosts, a bad link, or a cluster switch
/// that would need more than 65,535 ports (give `hosts_per_switch`).
///
/// ```
/// use netweave_core::topology::ethernet::{multi_cluster, intrigger_wan, ClusterSpec};
/// let clusters = [ClusterSpec::new("chiba", 32, 10.0), ClusterSpec::new("suzuk", 32, 1.0)];
/// let t = multi_cluster(&clusters, intrigger_wan()).unwrap();
/// assert_eq!((t.num_switches(), t.num_hosts(), t.num_links()), (3, 64, 66));
/// assert_eq!(t.label(t.hosts()[35]), "suzuk/h3");
/// ```
pub fn multi_cluster(clusters: &[ClusterSpec], wan: LinkSpec) -> Result<Topology> {
    if clusters.is_empty() {
        return crate::invalid!("multi-cluster: give at least one cluster");
    }
    check_link("multi-cluster WAN link", &wan)?;
    if clusters.len() > Port::MAX as usize {
        return crate::invalid!(
            "multi-cluster: {} clusters exceed the WAN router's {} ports",
            clusters.len(),
            Port::MAX
        );
    }
    let (mut switches, mut hosts, mut ports, mut radix) = (1u64, 0u64, clusters.len() as u64, clusters.len() as u64);
    for (i, c) in clusters.iter().enumerate() {
        if !valid_cluster_name(&c.name) {
            return crate::invalid!(
                "multi-cluster: cluster name '{}' must be letters, digits, '_', '-' or '.'",
                c.name
            );
        }
        if clusters[..i].iter().any(|o| o.name == c.name) {
            return crate::invalid!("multi-cluster: cluster name '{}' appears twice", c.name);
        }
        check_cluster(c, &format!("cluster {}", c.name))?;
        let (s, p, r) = cluster_size(c);
        if c.hosts_per_switch.is_none() && r > Port::MAX as u64 {
            return crate::invalid!(
                "multi-cluster: cluster {} has {} hosts, too many for one switch; give hosts_per_switch",
                c.name,
                c.hosts
            );
        }
        switches += s;
        hosts += c.hosts as u64;
        ports += p;
        radix = radix.max(r);
    }
    let nodes = switches + hosts;
    check_capacity("multi-cluster", nodes, nodes - 1, ports, radix)?;

    let names: Vec<String> = clusters.iter().map(|c| format!("{}:{}", c.name, c.hosts)).collect();
    let mut b = TopologyBuilder::new(format!("multi_cluster({})", names.join(",")));
    b.family("multi_cluster")
        .param("clusters", serde_json::to_value(clusters).unwrap_or(serde_json::Value::Null))
        .param("wan", link_json(&wan));
    let router = b.add_switch("wan", clusters.len() as Port);
    for (i, c) in clusters.iter().enumerate() {
        let top = add_cluster(&mut b, c, i as u32, &format!("{}/", c.name), 1);
        let wan_port = match c.hosts_per_switch {
            None => c.hosts,
            Some(k) => c.hosts.div_ceil(k),
        } as Port
            + 1;
        let spec =
            LinkSpec { bandwidth_gbps: c.uplink.bandwidth_gbps.min(wan.bandwidth_gbps), latency_ns: wan.latency_ns };
        b.connect_ports(top, wan_port, router, (i + 1) as Port, spec);
    }
    b.build()
}

/// The WAN assumed for [`intrigger`]: 10 Gbit/s backbone (never below a cluster's egress, so
/// it caps nothing) and [`DEFAULT_WAN_LATENCY_NS`] per WAN link, i.e. 5 ms one way between
/// two clusters. Override either field for other assumptions.
pub fn intrigger_wan() -> LinkSpec {
    LinkSpec { bandwidth_gbps: 10.0, latency_ns: DEFAULT_WAN_LATENCY_NS }
}

/// Table 6.1 of paper 004: name, hosts, egress Gbit/s.
///
/// Readings: "1Gbps or 2Gbps / 10Gbps" (chiba, hongo) → 1 Gbit/s host links (the smaller of
/// the two; some hosts there have bonded NICs) and 10 Gbit/s egress; a single figure such as
/// suzuk's "1Gbps" is both the host link and the egress; "3Gbps (1Gbps * 3)" is a bonded
/// 3 Gbit/s egress with 1 Gbit/s host links.
const TABLE_6_1: [(&str, u32, f64); 12] = [
    ("chiba", 32, 10.0),
    ("hongo", 24, 10.0),
    ("kyoto", 10, 10.0),
    ("okubo", 12, 10.0),
    ("suzuk", 32, 1.0),
    ("mirai", 5, 3.0),
    ("keio", 10, 3.0),
    ("hiro", 10, 3.0),
    ("kyushu", 10, 3.0),
    ("kyutech", 10, 2.0),
    ("tohoku", 10, 2.0),
    ("tsukuba", 10, 2.0),
];

/// The 12 InTrigger clusters of paper 004's Table 6.1 (175 hosts), in the table's order.
///
/// Every host link is [`GIGABIT_LAN`] (1 Gbit/s, 50 µs): where the table says "1Gbps or
/// 2Gbps" (chiba, hongo), 1 Gbit/s is chosen. Egress bandwidths are as printed: 10 Gbit/s
/// for chiba, hongo, kyoto and okubo; 1 for suzuk (its single figure read as both networks);
/// bonded 3 for mirai, keio, hiro, kyushu; bonded 2 for kyutech, tohoku, tsukuba. The
/// cluster-internal topology is not given, so each cluster is one switch
/// (`hosts_per_switch: None`). Combine with [`intrigger_wan`] (or any WAN spec) in
/// [`multi_cluster`].
///
/// ```
/// use netweave_core::topology::ethernet::{intrigger, intrigger_wan, multi_cluster};
/// let t = multi_cluster(&intrigger(), intrigger_wan()).unwrap();
/// assert_eq!(t.num_hosts(), 175);
/// ```
pub fn intrigger() -> Vec<ClusterSpec> {
    TABLE_6_1.iter().map(|&(name, hosts, egress)| ClusterSpec::new(name, hosts, egress)).collect()
}

/// The clusters of paper 004's scaling experiment (Table 6.2, Fig. 6.11) in the order they
/// were added, with the host counts actually used there (hongo 16 of 24, suzuk 24 of 32,
/// okubo 10 of 12). Take a prefix for the first `k` clusters.
pub fn intrigger_table_6_2() -> Vec<ClusterSpec> {
    let order = [
        ("chiba", 32),
        ("hongo", 16),
        ("suzuk", 24),
        ("okubo", 10),
        ("keio", 10),
        ("tsukuba", 10),
        ("tohoku", 10),
        ("kyoto", 10),
        ("hiro", 10),
        ("kyushu", 10),
        ("kyutech", 10),
        ("mirai", 5),
    ];
    order
        .iter()
        .map(|&(name, hosts)| {
            let egress = TABLE_6_1.iter().find(|r| r.0 == name).map_or(DEFAULT_EGRESS_GBPS, |r| r.2);
            ClusterSpec::new(name, hosts, egress)
        })
        .collect()
}

/// Parse the CLI's cluster list, `name:hosts[:gbps],…`, e.g. `"chiba:32,suzuk:32"` or
/// `"a:16:10,b:16:2.5"`.
///
/// `gbps` is the cluster's egress bandwidth. Without it, a cluster named as in Table 6.1
/// takes the table's egress (see [`intrigger`]) and any other name
/// [`DEFAULT_EGRESS_GBPS`]. Host links are [`GIGABIT_LAN`]; every cluster is one switch.
/// Spaces around items are ignored. Errors are one line and name the offending entry.
///
/// ```
/// use netweave_core::topology::ethernet::parse_clusters;
/// let c = parse_clusters("chiba:32, lab:8:2.5").unwrap();
/// assert_eq!((c[0].hosts, c[0].uplink.bandwidth_gbps), (32, 10.0));
/// assert_eq!(c[1].uplink.bandwidth_gbps, 2.5);
/// assert!(parse_clusters("chiba").is_err());
/// ```
pub fn parse_clusters(text: &str) -> Result<Vec<ClusterSpec>> {
    const FORM: &str = "name:hosts[:gbps]";
    if text.trim().is_empty() {
        return crate::invalid!("cluster list is empty; expected {FORM},{FORM},…");
    }
    let mut out: Vec<ClusterSpec> = Vec::new();
    for (i, item) in text.split(',').enumerate() {
        let item = item.trim();
        if item.is_empty() {
            return crate::invalid!("cluster list entry {} is empty; expected {FORM}", i + 1);
        }
        let parts: Vec<&str> = item.split(':').map(str::trim).collect();
        if !(2..=3).contains(&parts.len()) {
            return crate::invalid!("cluster '{item}' must look like {FORM}");
        }
        let name = parts[0];
        if !valid_cluster_name(name) {
            return crate::invalid!("cluster name '{name}' must be letters, digits, '_', '-' or '.'");
        }
        if out.iter().any(|c| c.name == name) {
            return crate::invalid!("cluster name '{name}' appears twice");
        }
        let hosts = match parts[1].parse::<u32>() {
            Ok(h) if h >= 1 => h,
            _ => return crate::invalid!("cluster {name}: hosts must be a whole number ≥ 1, got '{}'", parts[1]),
        };
        let gbps = match parts.get(2) {
            Some(g) => match g.parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 => v,
                _ => {
                    return crate::invalid!("cluster {name}: bandwidth must be a positive number of Gbit/s, got '{g}'")
                }
            },
            None => TABLE_6_1.iter().find(|r| r.0 == name).map_or(DEFAULT_EGRESS_GBPS, |r| r.2),
        };
        out.push(ClusterSpec::new(name, hosts, gbps));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Whether the topology is one tree: connected with `links = nodes − 1`.
    fn is_tree(t: &Topology) -> bool {
        if t.num_links() + 1 != t.num_nodes() {
            return false;
        }
        let mut seen = vec![false; t.num_nodes()];
        seen[0] = true;
        let mut q = VecDeque::from([0 as NodeId]);
        let mut count = 1;
        while let Some(u) = q.pop_front() {
            for a in t.neighbors(u) {
                if !seen[a.neighbor as usize] {
                    seen[a.neighbor as usize] = true;
                    count += 1;
                    q.push_back(a.neighbor);
                }
            }
        }
        count == t.num_nodes()
    }

    /// Links on the unique path between two nodes of a tree (by parent pointers from `a`).
    fn path_links(t: &Topology, a: NodeId, b: NodeId) -> Vec<LinkSpec> {
        let mut parent: Vec<Option<(NodeId, u32)>> = vec![None; t.num_nodes()];
        let mut seen = vec![false; t.num_nodes()];
        seen[a as usize] = true;
        let mut q = VecDeque::from([a]);
        while let Some(u) = q.pop_front() {
            for adj in t.neighbors(u) {
                if !seen[adj.neighbor as usize] {
                    seen[adj.neighbor as usize] = true;
                    parent[adj.neighbor as usize] = Some((u, Topology::channel_link(adj.channel)));
                    q.push_back(adj.neighbor);
                }
            }
        }
        let mut out = Vec::new();
        let mut x = b;
        while let Some((p, l)) = parent[x as usize] {
            out.push(t.link(l).spec);
            x = p;
        }
        out
    }

    fn spec(gbps: f64, ns: f64) -> LinkSpec {
        LinkSpec::new(gbps, ns).unwrap()
    }

    #[test]
    fn switch_tree_counts_links_and_specs() {
        let l0 = spec(40.0, 1000.0);
        let l1 = spec(10.0, 2000.0);
        let host = spec(1.0, 50_000.0);
        let t = switch_tree(&[TreeLevel::new(2, l0), TreeLevel::new(3, l1)], 4, host).unwrap();
        assert_eq!(t.num_switches(), 1 + 2 + 6);
        assert_eq!(t.num_hosts(), 24);
        assert!(is_tree(&t));
        assert_eq!(t.links().iter().filter(|l| l.spec == l0).count(), 2);
        assert_eq!(t.links().iter().filter(|l| l.spec == l1).count(), 6);
        assert_eq!(t.links().iter().filter(|l| l.spec == host).count(), 24);
        // Host 0 to host 23: host, l1, l0, l0, l1, host.
        let p = path_links(&t, t.hosts()[0], t.hosts()[23]);
        let lat: f64 = p.iter().map(|s| s.latency_ns).sum();
        assert_eq!(lat, 2.0 * 50_000.0 + 2.0 * 2000.0 + 2.0 * 1000.0);
        let bw = p.iter().map(|s| s.bandwidth_gbps).fold(f64::INFINITY, f64::min);
        assert_eq!(bw, 1.0);
        // Ports: down first, up last; root has no up port.
        assert_eq!(t.radix(0), 2);
        let mid = t.find_label("sw1").unwrap();
        assert_eq!(t.radix(mid), 4);
        assert_eq!(t.neighbors(mid).last().unwrap().neighbor, 0);
        let edge = t.find_label("sw3").unwrap();
        assert_eq!(t.coords(edge), Some(&[2i64, 0][..]));
        assert_eq!(t.neighbors(edge).last().unwrap().neighbor, mid);
        assert_eq!(t.host_switch(t.hosts()[5]), Some(t.find_label("sw4").unwrap()));
        assert_eq!(t.label(t.hosts()[5]), "h5");
        assert_eq!(t.family(), "switch_tree");
        assert_eq!(t.params()["fanouts"], serde_json::json!([2, 3]));
    }

    #[test]
    fn switch_tree_without_levels_is_one_switch() {
        let t = switch_tree(&[], 8, GIGABIT_LAN).unwrap();
        assert_eq!((t.num_switches(), t.num_hosts(), t.num_links()), (1, 8, 8));
        assert_eq!(t.radix(0), 8);
        assert!(is_tree(&t));
    }

    #[test]
    fn star_of_switches_fills_the_last_switch_partly() {
        let up = spec(10.0, 5000.0);
        let t = star_of_switches(96, 14, GIGABIT_LAN, up).unwrap();
        assert_eq!(t.num_switches(), 8);
        assert_eq!(t.num_hosts(), 96);
        assert!(is_tree(&t));
        assert_eq!(t.links().iter().filter(|l| l.spec == up).count(), 7);
        let last = t.find_label("sw7").unwrap();
        assert_eq!(t.radix(last), 15);
        assert_eq!(t.degree(last), 12 + 1);
        assert_eq!(t.host_switch(t.hosts()[95]), Some(last));
        assert_eq!(t.host_switch(t.hosts()[13]), t.find_label("sw1"));
        assert_eq!(t.host_switch(t.hosts()[14]), t.find_label("sw2"));
        assert_eq!(t.family(), "star_of_switches");
        let one = star_of_switches(5, 14, GIGABIT_LAN, up).unwrap();
        assert_eq!((one.num_switches(), one.num_links()), (2, 6));
    }

    #[test]
    fn multi_cluster_shape_and_link_specs() {
        let wan = LinkSpec { bandwidth_gbps: 10.0, latency_ns: 2e6 };
        let mut a = ClusterSpec::new("chiba", 32, 10.0);
        a.hosts_per_switch = Some(14);
        let b = ClusterSpec::new("suzuk", 32, 1.0);
        let t = multi_cluster(&[a.clone(), b], wan).unwrap();
        // wan + chiba/sw0 + 3 edge switches + suzuk/sw0.
        assert_eq!(t.num_switches(), 6);
        assert_eq!(t.num_hosts(), 64);
        assert!(is_tree(&t));
        assert_eq!(t.label(0), "wan");
        for l in ["chiba/sw0", "chiba/sw3", "chiba/h31", "suzuk/sw0", "suzuk/h0"] {
            assert!(t.find_label(l).is_some(), "{l}");
        }
        assert_eq!(t.label(t.hosts()[3]), "chiba/h3");
        assert_eq!(t.coords(t.hosts()[40]), Some(&[1i64, 8][..]));
        // WAN links: bandwidth of the egress, latency of the WAN.
        let wan_links: Vec<LinkSpec> =
            t.neighbors(0).iter().map(|x| t.link(Topology::channel_link(x.channel)).spec).collect();
        assert_eq!(
            wan_links,
            vec![LinkSpec { bandwidth_gbps: 10.0, latency_ns: 2e6 }, LinkSpec { bandwidth_gbps: 1.0, latency_ns: 2e6 }]
        );
        // chiba host → suzuk host: host, trunk, WAN, WAN, host.
        let p = path_links(&t, t.find_label("chiba/h0").unwrap(), t.find_label("suzuk/h0").unwrap());
        assert_eq!(p.len(), 5);
        let lat: f64 = p.iter().map(|s| s.latency_ns).sum();
        assert_eq!(lat, 50_000.0 + a.uplink.latency_ns + 4e6 + 50_000.0);
        assert_eq!(p.iter().map(|s| s.bandwidth_gbps).fold(f64::INFINITY, f64::min), 1.0);
        // WAN port is the last port of the cluster switch.
        let top = t.find_label("suzuk/sw0").unwrap();
        assert_eq!(t.radix(top), 33);
        assert_eq!(t.neighbors(top).last().unwrap().neighbor, 0);
        assert_eq!(t.family(), "multi_cluster");
        assert_eq!(t.params()["clusters"][1]["name"], serde_json::json!("suzuk"));
        // Backbone cap.
        let capped =
            multi_cluster(&[ClusterSpec::new("x", 2, 10.0), ClusterSpec::new("y", 2, 10.0)], spec(2.5, 1e6)).unwrap();
        assert!(capped
            .neighbors(0)
            .iter()
            .all(|x| capped.link(Topology::channel_link(x.channel)).spec.bandwidth_gbps == 2.5));
    }

    #[test]
    fn intrigger_matches_table_6_1() {
        let c = intrigger();
        assert_eq!(c.len(), 12);
        assert_eq!(c.iter().map(|c| c.hosts).sum::<u32>(), 175);
        let get = |n: &str| c.iter().find(|c| c.name == n).unwrap();
        assert_eq!((get("chiba").hosts, get("chiba").uplink.bandwidth_gbps), (32, 10.0));
        assert_eq!((get("okubo").hosts, get("okubo").uplink.bandwidth_gbps), (12, 10.0));
        assert_eq!((get("suzuk").hosts, get("suzuk").uplink.bandwidth_gbps), (32, 1.0));
        assert_eq!((get("mirai").hosts, get("mirai").uplink.bandwidth_gbps), (5, 3.0));
        assert_eq!(get("tsukuba").uplink.bandwidth_gbps, 2.0);
        assert!(c.iter().all(|c| c.host_link == GIGABIT_LAN));
        let t = multi_cluster(&c, intrigger_wan()).unwrap();
        assert_eq!((t.num_switches(), t.num_hosts()), (13, 175));
        assert!(is_tree(&t));
        let six_two = intrigger_table_6_2();
        let totals: Vec<u32> = six_two
            .iter()
            .scan(0, |acc, c| {
                *acc += c.hosts;
                Some(*acc)
            })
            .collect();
        assert_eq!(totals, vec![32, 48, 72, 82, 92, 102, 112, 122, 132, 142, 152, 157]);
        assert_eq!(six_two[2].uplink.bandwidth_gbps, 1.0); // suzuk
    }

    #[test]
    fn parse_clusters_reads_the_cli_form() {
        let c = parse_clusters(" chiba:32 ,hongo:24, lab-1:8:2.5 ").unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].name.as_str(), c[0].hosts, c[0].uplink.bandwidth_gbps), ("chiba", 32, 10.0));
        assert_eq!(c[1].hosts, 24);
        assert_eq!((c[2].name.as_str(), c[2].uplink.bandwidth_gbps), ("lab-1", 2.5));
        assert_eq!(parse_clusters("suzuk:16").unwrap()[0].uplink.bandwidth_gbps, 1.0);
        assert_eq!(parse_clusters("other:16").unwrap()[0].uplink.bandwidth_gbps, DEFAULT_EGRESS_GBPS);
        for (bad, want) in [
            ("", "empty"),
            ("  ", "empty"),
            ("chiba:32,", "entry 2 is empty"),
            ("chiba", "must look like name:hosts[:gbps]"),
            ("chiba:1:2:3", "must look like"),
            ("chi/ba:3", "cluster name 'chi/ba'"),
            (":3", "cluster name ''"),
            ("chiba:0", "hosts must be a whole number ≥ 1, got '0'"),
            ("chiba:x", "got 'x'"),
            ("chiba:-3", "got '-3'"),
            ("chiba:3:0", "bandwidth must be a positive number"),
            ("chiba:3:inf", "bandwidth"),
            ("chiba:3:NaN", "bandwidth"),
            ("a:3,a:4", "appears twice"),
        ] {
            let e = parse_clusters(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad:?}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn bad_networks_are_rejected() {
        let wan = intrigger_wan();
        assert!(multi_cluster(&[], wan).unwrap_err().to_string().contains("at least one cluster"));
        let c = ClusterSpec::new("a", 4, 1.0);
        assert!(multi_cluster(&[c.clone(), c.clone()], wan).unwrap_err().to_string().contains("twice"));
        let mut z = c.clone();
        z.hosts = 0;
        assert!(multi_cluster(&[z], wan).is_err());
        let mut z = c.clone();
        z.hosts_per_switch = Some(0);
        assert!(multi_cluster(&[z], wan).is_err());
        let mut z = c.clone();
        z.host_link.bandwidth_gbps = 0.0;
        let e = multi_cluster(&[z], wan).unwrap_err().to_string();
        assert!(e.contains("cluster a host link"), "{e}");
        let mut z = c.clone();
        z.name = "a b".into();
        assert!(multi_cluster(&[z], wan).is_err());
        assert!(multi_cluster(std::slice::from_ref(&c), LinkSpec { bandwidth_gbps: 1.0, latency_ns: -1.0 }).is_err());
        let big = ClusterSpec::new("big", 70_000, 10.0);
        let e = multi_cluster(std::slice::from_ref(&big), wan).unwrap_err().to_string();
        assert!(e.contains("hosts_per_switch"), "{e}");
        let mut big = big;
        big.hosts_per_switch = Some(48);
        assert_eq!(multi_cluster(&[big], wan).unwrap().num_hosts(), 70_000);

        assert!(switch_tree(&[], 0, GIGABIT_LAN).is_err());
        assert!(switch_tree(&[TreeLevel::new(0, GIGABIT_LAN)], 2, GIGABIT_LAN).is_err());
        let e = switch_tree(&[TreeLevel::new(2, LinkSpec { bandwidth_gbps: -1.0, latency_ns: 0.0 })], 2, GIGABIT_LAN)
            .unwrap_err()
            .to_string();
        assert!(e.contains("level 0 link"), "{e}");
        assert!(switch_tree(&[TreeLevel::new(65535, GIGABIT_LAN)], 2, GIGABIT_LAN).is_err());
        assert!(switch_tree(&[TreeLevel::new(60000, GIGABIT_LAN); 3], 60000, GIGABIT_LAN)
            .unwrap_err()
            .to_string()
            .contains("32-bit"));
        assert!(star_of_switches(0, 14, GIGABIT_LAN, GIGABIT_LAN).is_err());
        assert!(star_of_switches(10, 0, GIGABIT_LAN, GIGABIT_LAN).is_err());
    }
}
