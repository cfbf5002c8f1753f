//! The lanes of a routing, for OpenSM: the service level (SL) of every host-to-host path in
//! OpenSM's QoS policy file, and the options (`opensm.conf`) that map SLs to virtual lanes.
//!
//! A deadlock-freedom proof over several virtual channels holds on an InfiniBand fabric only
//! if every packet really travels on the lane the proof assumed. An end port picks its lane
//! through the SL of the path record it gets from the subnet administrator; every port then
//! maps the SL to a virtual lane (VL) with its SL→VL table. OpenSM 3.3 (checked against
//! `osm_sa_path_record.c`, `osm_qos_policy.c` and `osm_qos.c`) takes both from files:
//!
//! - the **QoS policy file** (`qos_policy_file`, read when `qos TRUE`): `port-groups` of port
//!   GUIDs, `qos-levels` each naming an SL, and `qos-match-rules` matching a path record's
//!   source and destination ports to a level, first match wins, the level `DEFAULT` for the
//!   rest. The `file` routing engine has no SL callback of its own, so these SLs are the ones
//!   path records carry (`saquery -p --src-to-dst S:D` shows them);
//! - **`qos_sl2vl`** in `opensm.conf`: one SL→VL map OpenSM writes into every port
//!   (CA ports, switch port 0, switch external ports alike), masked to each port's operational
//!   VLs (`max_op_vls`).
//!
//! So OpenSM can install a routing whose every path keeps one VC from source to destination:
//! SL = that VC, `qos_sl2vl` the identity on the VCs used ([`Lanes::PerPath`]). SLs no path
//! uses map to VL 15, which drops data packets and makes OpenSM refuse them in path records,
//! so a packet can never travel on a lane the proof does not cover. A routing whose VC changes
//! inside the network (a torus dateline, descending layers, structured channel pools) would
//! need a different SL→VL table per (switch, input port, output port), which OpenSM computes
//! only inside its own engines and cannot read from a file ([`Lanes::ChangesMidPath`]); for those
//! the artifacts say so and configure the OpenSM engine that gives an equivalent deadlock-free
//! result instead ([`EquivalentEngine`]): `torus-2QoS` on 2-D and 3-D tori, `nue` elsewhere.
//!
//! **The policy file** ([`write_policy`]) is kept short: the most common SL is `DEFAULT`;
//! sources with the same SL towards every destination share a port group; each (source
//! group, SL) pair is one rule whose destination group lists the destinations at that SL
//! (identical destination lists share a group). Per-destination layers (Nue) give one rule per
//! SL, per-source layers one per SL, per-pair layers at most one per (source switch, SL).
//! Port GUIDs are those of [`IbsimGuids`], as in the LFT dump.
//!
//! **Reading** ([`read_policy`]) takes the subset of the grammar the writer produces (port
//! groups by `port-guid` lists and ranges, levels with `sl`, rules with `source`,
//! `destination` and `qos-level-name`; `use:` lines and comments are fine) and gives the SL
//! of every host pair, first matching rule first as OpenSM does; [`with_service_levels`] puts
//! them into an imported table as its VCs, so `route check` proves what OpenSM installed.
//! A GUID that is no host port of the fabric (a policy for another fabric), a rule naming an
//! unknown group or level, an SL above 15 and any other keyword are one-line errors.
//!
//! ```
//! use netweave_core::topology::grid::torus;
//! use netweave_core::routing::{io::opensm_qos, route, Engine, RouteOptions};
//! let topo = torus(&[3, 3], 2).unwrap();
//! let routes = route(&topo, Engine::Dfsssp, &RouteOptions { max_vcs: 4, ..Default::default() }).unwrap();
//! let opensm_qos::Lanes::PerPath(levels) = opensm_qos::lanes(&topo, &routes).unwrap() else { panic!() };
//! let policy = opensm_qos::write_policy(&topo, &levels);
//! assert_eq!(opensm_qos::read_policy(&topo, &policy).unwrap(), levels);
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;

use super::lft::{primary_port, IbsimGuids};
use crate::error::{NetweaveError, Result};
use crate::routing::{Injection, RoutingTable, VcPolicy};
use crate::topology::io::{parse_error, snippet};
use crate::topology::structure::LatticeShape;
use crate::topology::Topology;

const FMT: &str = "qos-policy";

/// Data VLs an InfiniBand port can have (VL 0–14; VL 15 is management only).
pub const MAX_DATA_VLS: u8 = 15;
/// Service levels a path record can carry (0–15).
pub const NUM_SLS: u8 = 16;
/// The SL→VL entry that drops a data packet.
const DROP_VL: u8 = 15;

/// The SL of every (source, destination) host pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceLevels {
    num_hosts: usize,
    /// `sl[src * num_hosts + dst]`.
    sl: Vec<u8>,
}

impl ServiceLevels {
    /// SL of the path from host `src` to host `dst`.
    pub fn get(&self, src: usize, dst: usize) -> u8 {
        self.sl[src * self.num_hosts + dst]
    }
    /// Number of hosts.
    pub fn num_hosts(&self) -> usize {
        self.num_hosts
    }
    /// Lanes needed: the highest SL plus one.
    pub fn num_lanes(&self) -> u8 {
        self.sl.iter().copied().max().unwrap_or(0) + 1
    }
    /// How many host pairs (source ≠ destination) use each SL.
    pub fn pairs_per_sl(&self) -> [usize; NUM_SLS as usize] {
        let mut count = [0usize; NUM_SLS as usize];
        for s in 0..self.num_hosts {
            for d in (0..self.num_hosts).filter(|&d| d != s) {
                count[self.get(s, d) as usize] += 1;
            }
        }
        count
    }
}

/// Where a routing's VC changes inside the network, so no single SL per path can carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MidPathChange {
    /// Host labels of the first path found that changes VC.
    pub source: String,
    pub destination: String,
    /// Label of the switch where it changes.
    pub switch: String,
    pub from_vc: u8,
    pub to_vc: u8,
}

/// The OpenSM routing engine that routes a fabric deadlock-free by itself when netweave's
/// lanes cannot be handed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EquivalentEngine {
    /// `torus-2QoS` on a 2-D or 3-D torus: dimension order with datelines, as `dor`, each path's
    /// SL chosen by the engine and its SL→VL tables per port. `dims` is the torus (`torus-2QoS.conf`).
    Torus2Qos { dims: Vec<u32> },
    /// `nue` with `nue_max_num_vls` lanes: deadlock-free on any topology within the lane budget.
    Nue { max_vls: u8 },
}

impl EquivalentEngine {
    /// OpenSM's name of the engine (`routing_engine` / `-R`).
    pub fn name(&self) -> &'static str {
        match self {
            EquivalentEngine::Torus2Qos { .. } => "torus-2QoS",
            EquivalentEngine::Nue { .. } => "nue",
        }
    }
}

/// What OpenSM needs to install a routing with its lanes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lanes {
    /// Every path keeps one VC: that VC is the path's SL, SL→VL the identity.
    PerPath(ServiceLevels),
    /// Some path changes VC inside the network: OpenSM cannot take it from files.
    ChangesMidPath { change: MidPathChange, instead: EquivalentEngine },
}

/// The lanes of `routes` on `topo` (see the module docs). Walks every path only when the VC
/// policy has transitions; fails when the table does not fit the topology or drops a pair.
pub fn lanes(topo: &Topology, routes: &RoutingTable) -> Result<Lanes> {
    routes.check_fits(topo)?;
    let h = topo.num_hosts();
    let policy = routes.vc_policy();
    let mut sl = Vec::with_capacity(h * h);
    for s in 0..h {
        for d in 0..h {
            sl.push(policy.injection_vc(s, d));
        }
    }
    if policy.transitions.is_some() {
        let mut hops = Vec::new();
        for s in 0..h {
            for d in (0..h).filter(|&d| d != s) {
                hops.clear();
                routes.hops(topo, s, d, &mut hops)?;
                let first = hops[0].vc;
                if let Some(k) = hops.iter().position(|hop| hop.vc != first) {
                    // Hop k leaves the switch at the head of channel k - 1.
                    let switch = topo.channel_ends(hops[k - 1].channel).1.node;
                    let change = MidPathChange {
                        source: topo.label(topo.hosts()[s]).to_string(),
                        destination: topo.label(topo.hosts()[d]).to_string(),
                        switch: topo.label(switch).to_string(),
                        from_vc: hops[k - 1].vc,
                        to_vc: hops[k].vc,
                    };
                    return Ok(Lanes::ChangesMidPath { change, instead: equivalent_engine(topo, policy) });
                }
            }
        }
    }
    if let Some(&bad) = sl.iter().find(|&&v| v >= MAX_DATA_VLS) {
        return crate::invalid!("the routing injects on VC {bad}; InfiniBand has {MAX_DATA_VLS} data lanes (VL 0-14)");
    }
    Ok(Lanes::PerPath(ServiceLevels { num_hosts: h, sl }))
}

fn equivalent_engine(topo: &Topology, policy: &VcPolicy) -> EquivalentEngine {
    match topo.structure().lattice() {
        Some(l) if l.shape == LatticeShape::Torus && (2..=3).contains(&l.dims.len()) => {
            EquivalentEngine::Torus2Qos { dims: l.dims.clone() }
        }
        _ => EquivalentEngine::Nue { max_vls: policy.num_vcs.clamp(1, MAX_DATA_VLS) },
    }
}

/// Check that a routing's lanes fit a fabric whose ports have `vls` data VLs: one line
/// naming both numbers when they do not.
pub fn check_lane_budget(routes: &RoutingTable, vls: u8) -> Result<()> {
    let need = routes.vc_policy().num_vcs;
    if vls == 0 || vls > MAX_DATA_VLS {
        return crate::invalid!("--vcs {vls}: an InfiniBand port has 1 to {MAX_DATA_VLS} data lanes");
    }
    if need > vls {
        return crate::invalid!(
            "the {} routing needs {need} lanes, more than the fabric's {vls} (--vcs); route again with --vcs {vls}",
            routes.engine()
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Writing

/// Port GUID of every host (its first connected port), in host order.
fn host_port_guids(topo: &Topology) -> Vec<u64> {
    let guids = IbsimGuids::new(topo);
    topo.hosts().iter().map(|&n| guids.port_guid(n, primary_port(topo, n))).collect()
}

/// The QoS policy file giving every host pair its SL (see the module docs).
pub fn write_policy(topo: &Topology, levels: &ServiceLevels) -> String {
    let h = levels.num_hosts;
    let guids = host_port_guids(topo);
    let counts = levels.pairs_per_sl();
    // The most common SL needs no rule (lowest on a tie, so one lane gives SL 0).
    let default_sl = (0..NUM_SLS as usize).max_by_key(|&sl| (counts[sl], std::cmp::Reverse(sl))).unwrap_or(0) as u8;

    // Sources with identical rows share a group.
    let mut class_of_row: HashMap<&[u8], usize> = HashMap::new();
    let mut classes: Vec<(usize, Vec<usize>)> = Vec::new(); // (a representative source, sources)
    for s in 0..h {
        let row = &levels.sl[s * h..(s + 1) * h];
        let c = *class_of_row.entry(row).or_insert_with(|| {
            classes.push((s, Vec::new()));
            classes.len() - 1
        });
        classes[c].1.push(s);
    }
    // One rule per (source class, SL other than the default), destination lists shared.
    let mut dest_groups: Vec<Vec<usize>> = Vec::new();
    let mut dest_group_of: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut rules: Vec<(usize, u8, usize)> = Vec::new(); // (source class, SL, destination group)
    let mut used = [false; NUM_SLS as usize];
    used[default_sl as usize] = true;
    for (c, (rep, _)) in classes.iter().enumerate() {
        let row = &levels.sl[rep * h..(rep + 1) * h];
        for sl in (0..NUM_SLS).filter(|&sl| sl != default_sl) {
            let dests: Vec<usize> = (0..h).filter(|&d| row[d] == sl).collect();
            if dests.is_empty() {
                continue;
            }
            used[sl as usize] = true;
            let g = *dest_group_of.entry(dests.clone()).or_insert_with(|| {
                dest_groups.push(dests);
                dest_groups.len() - 1
            });
            rules.push((c, sl, g));
        }
    }

    let mut out = String::new();
    let _ = writeln!(out, "# OpenSM QoS policy: the service level of every path of netweave's routing");
    let _ = writeln!(
        out,
        "# of topology {:?} ({h} hosts). SL = the path's virtual lane; opensm.conf",
        snippet(topo.name())
    );
    let _ = writeln!(out, "# maps SL n to VL n. Port GUIDs are the hosts' (first) ports.");
    let _ = writeln!(out, "# pairs per SL: {}", sl_summary(&counts));
    let group_of_rules = rules.iter().map(|&(c, _, _)| c).collect::<std::collections::BTreeSet<_>>();
    out.push_str("\nport-groups\n");
    for &c in &group_of_rules {
        write_group(&mut out, &format!("src{c}"), classes[c].1.iter().map(|&s| guids[s]));
    }
    for (g, dests) in dest_groups.iter().enumerate() {
        write_group(&mut out, &format!("dst{g}"), dests.iter().map(|&d| guids[d]));
    }
    out.push_str("end-port-groups\n\nqos-levels\n");
    let _ = writeln!(out, "    qos-level\n        name: DEFAULT\n        sl: {default_sl}\n    end-qos-level");
    for sl in (0..NUM_SLS).filter(|&sl| used[sl as usize] && sl != default_sl) {
        let _ = writeln!(out, "    qos-level\n        name: SL{sl}\n        sl: {sl}\n    end-qos-level");
    }
    out.push_str("end-qos-levels\n\nqos-match-rules\n");
    for &(c, sl, g) in &rules {
        let _ = writeln!(
            out,
            "    qos-match-rule\n        source: src{c}\n        destination: dst{g}\n        qos-level-name: SL{sl}\n    end-qos-match-rule"
        );
    }
    out.push_str("end-qos-match-rules\n");
    out
}

fn write_group(out: &mut String, name: &str, guids: impl Iterator<Item = u64>) {
    let _ = writeln!(out, "    port-group\n        name: {name}");
    let guids: Vec<u64> = guids.collect();
    // Several short `port-guid:` lines rather than one of any length.
    for chunk in guids.chunks(8) {
        let list: Vec<String> = chunk.iter().map(|g| format!("0x{g:016x}")).collect();
        let _ = writeln!(out, "        port-guid: {}", list.join(", "));
    }
    let _ = writeln!(out, "    end-port-group");
}

fn sl_summary(counts: &[usize]) -> String {
    let parts: Vec<String> =
        counts.iter().enumerate().filter(|(_, &n)| n > 0).map(|(sl, n)| format!("SL{sl} {n}")).collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

/// `max_op_vls` code for `vls` data VLs (1: VL0, 2: VL0-1, 3: VL0-3, 4: VL0-7, 5: VL0-14).
fn max_op_vls_code(vls: u8) -> u8 {
    match vls {
        0 | 1 => 1,
        2 => 2,
        3..=4 => 3,
        5..=8 => 4,
        _ => 5,
    }
}

/// The identity SL→VL map on lanes `0..vls`, every other SL dropped (VL 15).
fn sl2vl(vls: u8) -> String {
    (0..NUM_SLS).map(|sl| if sl < vls { sl } else { DROP_VL }.to_string()).collect::<Vec<_>>().join(",")
}

/// Equal weight for every VL in use (VL arbitration, low priority; no high-priority VLs).
fn vlarb_low(vls: u8) -> String {
    (0..vls.max(1)).map(|vl| format!("{vl}:64")).collect::<Vec<_>>().join(",")
}

/// Where the installed files will live, for the paths `opensm.conf` names.
pub struct InstallPaths<'a> {
    /// The LFT dump (`lfts_file`).
    pub lfts: &'a str,
    /// The QoS policy (`qos_policy_file`).
    pub qos_policy: &'a str,
    /// The torus-2QoS configuration (`torus_config`).
    pub torus_config: &'a str,
}

/// The `opensm.conf` that installs a routing with its lanes: OpenSM's `file` engine on the LFT
/// dump, QoS on with the policy file and the identity SL→VL map on the lanes used, enough
/// operational VLs — or, for [`Lanes::ChangesMidPath`], the equivalent engine and why.
pub fn write_options(topo: &Topology, routes: &RoutingTable, lanes: &Lanes, paths: &InstallPaths) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# OpenSM 3.3 options for netweave's {:?} routing of topology {:?}.",
        snippet(routes.engine()),
        snippet(topo.name())
    );
    let _ = writeln!(out, "# Start the subnet manager with: opensm -F <this file>");
    match lanes {
        Lanes::PerPath(levels) => {
            let vls = levels.num_lanes().max(routes.vc_policy().num_vcs).min(MAX_DATA_VLS);
            let _ = writeln!(out, "# Forwarding tables: the file engine installs the dump unchanged.");
            out.push_str("routing_engine file\n");
            let _ = writeln!(out, "lfts_file {}", paths.lfts);
            if vls <= 1 {
                let _ = writeln!(out, "# One lane: every path on VL 0, no service levels to hand out.");
                out.push_str("qos FALSE\n");
                return out;
            }
            let _ = writeln!(
                out,
                "# {vls} lanes: each path's SL (qos-policy.conf) is its virtual lane; SL n -> VL n on every port,\n\
                 # SLs no path uses -> VL 15 (dropped, and refused in path records). Ports need {vls} operational VLs."
            );
            out.push_str("qos TRUE\n");
            let _ = writeln!(out, "qos_policy_file {}", paths.qos_policy);
            write_vl_options(&mut out, vls);
        }
        Lanes::ChangesMidPath { change, instead } => {
            let _ = writeln!(
                out,
                "# NOT INSTALLABLE AS COMPUTED: a packet from {} to {} changes from VC {} to VC {} at switch {}.\n\
                 # That needs a different SL->VL table per (switch, input port, output port), which OpenSM\n\
                 # builds only inside its own routing engines and cannot read from a file; installing the\n\
                 # forwarding tables alone would drop the lanes the deadlock-freedom proof relies on.\n\
                 # This file configures OpenSM's {} engine instead: an equivalent deadlock-free routing.",
                snippet(&change.source),
                snippet(&change.destination),
                change.from_vc,
                change.to_vc,
                snippet(&change.switch),
                instead.name()
            );
            let _ = writeln!(out, "routing_engine {}", instead.name());
            out.push_str("qos TRUE\n");
            match instead {
                EquivalentEngine::Torus2Qos { .. } => {
                    let _ = writeln!(out, "# torus-2QoS uses SL bit 0 for its datelines and VLs 0-3.");
                    let _ = writeln!(out, "torus_config {}", paths.torus_config);
                    // torus-2QoS computes its own per-port SL->VL tables; these set the lanes' count and weights.
                    write_vl_options(&mut out, 4);
                }
                EquivalentEngine::Nue { max_vls } => {
                    let _ = writeln!(out, "nue_max_num_vls {max_vls}");
                    write_vl_options(&mut out, *max_vls);
                }
            }
        }
    }
    out
}

fn write_vl_options(out: &mut String, vls: u8) {
    let _ = writeln!(out, "max_op_vls {}", max_op_vls_code(vls));
    let _ = writeln!(out, "qos_max_vls {vls}");
    out.push_str("qos_high_limit 0\n");
    out.push_str("qos_vlarb_high 0:0\n");
    let _ = writeln!(out, "qos_vlarb_low {}", vlarb_low(vls));
    let _ = writeln!(out, "qos_sl2vl {}", sl2vl(vls));
}

/// `torus-2QoS.conf` for a torus routed by [`EquivalentEngine::Torus2Qos`]: its size (a 2-D
/// torus has z radix 1) and one seed, the links from switch 0 towards +x, +y (and +z), with
/// the minus direction too where a radix is 4 (torus-2QoS needs both there).
pub fn write_torus_config(topo: &Topology, dims: &[u32]) -> Result<String> {
    let guids = IbsimGuids::new(topo);
    let switch_guid = |index: u64| -> Result<u64> {
        let node = *topo
            .switches()
            .get(index as usize)
            .ok_or_else(|| NetweaveError::InvalidParameter(format!("the torus has no switch {index}")))?;
        Ok(guids.node_guid(node))
    };
    let mut out = String::from("# torus-2QoS configuration written by netweave\n");
    let mut radix = [1u32; 3];
    radix[..dims.len()].copy_from_slice(dims);
    let _ = writeln!(out, "torus {} {} {}", radix[0], radix[1], radix[2]);
    let origin = switch_guid(0)?;
    let mut stride = 1u64;
    for (d, &k) in dims.iter().enumerate() {
        let axis = ["x", "y", "z"][d];
        if k >= 2 {
            let _ = writeln!(out, "{axis}p_link 0x{origin:016x} 0x{:016x}", switch_guid(stride)?);
            if k == 4 {
                let _ = writeln!(out, "{axis}m_link 0x{origin:016x} 0x{:016x}", switch_guid(stride * (k as u64 - 1))?);
            }
        }
        stride *= k as u64;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Reading

/// The SL of every host pair under a QoS policy file (the subset [`write_policy`] writes; see
/// the module docs).
pub fn read_policy(topo: &Topology, text: &str) -> Result<ServiceLevels> {
    let h = topo.num_hosts();
    let guids = host_port_guids(topo);
    let host_of: HashMap<u64, usize> = guids.iter().enumerate().map(|(i, &g)| (g, i)).collect();
    let fail = |line: usize, what: String| -> Result<ServiceLevels> { Err(parse_error(FMT, line, what)) };

    #[derive(PartialEq)]
    enum Section {
        Top,
        Groups,
        Group,
        Levels,
        Level,
        Rules,
        Rule,
        Other(&'static str),
    }
    let mut section = Section::Top;
    let mut groups: HashMap<String, Vec<bool>> = HashMap::new();
    let mut levels: HashMap<String, u8> = HashMap::new();
    /// A match rule as read: source group, destination group, level, and its line.
    type MatchRule = (Option<String>, Option<String>, Option<String>, usize);
    let mut rules: Vec<MatchRule> = Vec::new();
    let (mut name, mut members, mut sl): (Option<String>, Vec<bool>, Option<u8>) = (None, vec![false; h], None);
    let mut rule: (Option<String>, Option<String>, Option<String>) = (None, None, None);

    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = match line.split_once(':') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (line, None),
        };
        match (&section, key, value) {
            (Section::Top, "port-groups", None) => section = Section::Groups,
            (Section::Top, "qos-levels", None) => section = Section::Levels,
            (Section::Top, "qos-match-rules", None) => section = Section::Rules,
            (Section::Top, "qos-setup", None) => section = Section::Other("end-qos-setup"),
            (Section::Other(end), k, None) if k == *end => section = Section::Top,
            (Section::Other(_), _, _) => {}
            (Section::Groups, "port-group", None) => {
                section = Section::Group;
                (name, members) = (None, vec![false; h]);
            }
            (Section::Groups, "end-port-groups", None) => section = Section::Top,
            (Section::Group, "name", Some(v)) => name = Some(v.to_string()),
            (Section::Group, "use", Some(_)) => {}
            (Section::Group, "port-guid", Some(v)) => {
                for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let (lo, hi) = match item.split_once('-') {
                        Some((a, b)) => (parse_guid(a.trim()), parse_guid(b.trim())),
                        None => (parse_guid(item), parse_guid(item)),
                    };
                    let (Some(lo), Some(hi)) = (lo, hi) else {
                        return fail(n, format!("'{}' is not a port GUID", snippet(item)));
                    };
                    if hi < lo || hi - lo > h as u64 * 64 + 64 {
                        return fail(n, format!("'{}' is not a GUID range of this fabric's hosts", snippet(item)));
                    }
                    let mut any = false;
                    for g in lo..=hi {
                        if let Some(&host) = host_of.get(&g) {
                            members[host] = true;
                            any = true;
                        }
                    }
                    if !any {
                        return fail(
                            n,
                            format!("port GUID {} is no host port of this fabric (a policy for another fabric?)", snippet(item)),
                        );
                    }
                }
            }
            (Section::Group, "end-port-group", None) => {
                let Some(group) = name.take() else { return fail(n, "a port group without a name".into()) };
                groups.insert(group, std::mem::take(&mut members));
                section = Section::Groups;
            }
            (Section::Levels, "qos-level", None) => {
                section = Section::Level;
                (name, sl) = (None, None);
            }
            (Section::Levels, "end-qos-levels", None) => section = Section::Top,
            (Section::Level, "name", Some(v)) => name = Some(v.to_string()),
            (Section::Level, "use", Some(_)) => {}
            (Section::Level, "sl", Some(v)) => match v.parse::<u8>() {
                Ok(x) if x < NUM_SLS => sl = Some(x),
                _ => return fail(n, format!("sl '{}' is not a service level 0-15", snippet(v))),
            },
            (Section::Level, "end-qos-level", None) => {
                let (Some(level), Some(x)) = (name.take(), sl.take()) else {
                    return fail(n, "a QoS level needs a name and an sl".into());
                };
                levels.insert(level, x);
                section = Section::Levels;
            }
            (Section::Rules, "qos-match-rule", None) => {
                section = Section::Rule;
                rule = (None, None, None);
            }
            (Section::Rules, "end-qos-match-rules", None) => section = Section::Top,
            (Section::Rule, "source", Some(v)) => rule.0 = Some(v.to_string()),
            (Section::Rule, "destination", Some(v)) => rule.1 = Some(v.to_string()),
            (Section::Rule, "qos-level-name", Some(v)) => rule.2 = Some(v.to_string()),
            (Section::Rule, "use", Some(_)) => {}
            (Section::Rule, "end-qos-match-rule", None) => {
                let r = std::mem::take(&mut rule);
                rules.push((r.0, r.1, r.2, n));
                section = Section::Rules;
            }
            _ => {
                return fail(
                    n,
                    format!("'{}' is not part of the policy subset netweave reads (port GUID groups, SLs, source/destination rules)", snippet(raw.trim())),
                )
            }
        }
    }
    if section != Section::Top {
        return Err(parse_error(FMT, 0, "the file ends inside a section"));
    }
    let Some(&default_sl) = levels.get("DEFAULT") else {
        return Err(parse_error(FMT, 0, "no qos-level named DEFAULT (OpenSM requires one)"));
    };
    let everyone = vec![true; h];
    let mut compiled = Vec::with_capacity(rules.len());
    for (src, dst, level, n) in &rules {
        let group = |g: &Option<String>| -> std::result::Result<&Vec<bool>, String> {
            match g {
                None => Ok(&everyone),
                Some(g) => {
                    groups.get(g).ok_or_else(|| format!("rule names port group '{}', which is not defined", snippet(g)))
                }
            }
        };
        let (s, d) = match (group(src), group(dst)) {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) | (_, Err(e)) => return fail(*n, e),
        };
        let Some(level) = level else { return fail(*n, "a rule without qos-level-name".into()) };
        let Some(&x) = levels.get(level) else {
            return fail(*n, format!("rule names QoS level '{}', which is not defined", snippet(level)));
        };
        compiled.push((s, d, x));
    }
    let mut sl = Vec::with_capacity(h * h);
    for s in 0..h {
        for d in 0..h {
            sl.push(compiled.iter().find(|(gs, gd, _)| gs[s] && gd[d]).map_or(default_sl, |&(_, _, x)| x));
        }
    }
    if let Some(&bad) = sl.iter().find(|&&v| v >= MAX_DATA_VLS) {
        return Err(parse_error(FMT, 0, format!("SL {bad} maps to no data lane (SL n is VL n, VL 0-14)")));
    }
    Ok(ServiceLevels { num_hosts: h, sl })
}

fn parse_guid(s: &str) -> Option<u64> {
    let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    u64::from_str_radix(hex, 16).ok()
}

/// `routes` with the VCs of `levels` (SL n = VC n): what a fabric runs when OpenSM installed
/// these forwarding tables and this policy. The VC never changes inside the network.
pub fn with_service_levels(topo: &Topology, routes: &RoutingTable, levels: &ServiceLevels) -> Result<RoutingTable> {
    routes.check_fits(topo)?;
    if levels.num_hosts != routes.num_hosts() {
        return crate::invalid!(
            "the service levels are for {} hosts, the routes for {}",
            levels.num_hosts,
            routes.num_hosts()
        );
    }
    let mut out = routes.clone();
    let num_vcs = levels.num_lanes();
    let injection = if num_vcs == 1 {
        Injection::Zero
    } else {
        Injection::PerPair { num_hosts: levels.num_hosts, vcs: levels.sl.clone() }
    };
    out.set_vc_policy(VcPolicy { num_vcs, injection, transitions: None });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::grid::torus;

    fn options(vcs: u8) -> RouteOptions {
        RouteOptions { max_vcs: vcs, ..Default::default() }
    }

    #[test]
    fn per_path_lanes_round_trip_through_the_policy_for_every_layered_engine() {
        let topo = torus(&[4, 3], 2).unwrap();
        for engine in [Engine::Dfsssp, Engine::Lash, Engine::Nue] {
            let routes = route(&topo, engine, &options(4)).unwrap();
            let Lanes::PerPath(levels) = lanes(&topo, &routes).unwrap() else { panic!("{engine:?} keeps its VC") };
            for s in 0..topo.num_hosts() {
                for d in 0..topo.num_hosts() {
                    assert_eq!(levels.get(s, d), routes.vc_policy().injection_vc(s, d));
                }
            }
            let policy = write_policy(&topo, &levels);
            assert_eq!(read_policy(&topo, &policy).unwrap(), levels, "{engine:?}");
            let back = with_service_levels(&topo, &routes, &levels).unwrap();
            assert!(crate::routing::deadlock::check(&topo, &back).unwrap().deadlock_free);
        }
    }

    #[test]
    fn a_dateline_is_refused_and_torus_2qos_named() {
        let topo = torus(&[4, 4], 1).unwrap();
        let routes = route(&topo, Engine::Dor, &options(2)).unwrap();
        let Lanes::ChangesMidPath { change, instead } = lanes(&topo, &routes).unwrap() else { panic!() };
        assert_ne!(change.from_vc, change.to_vc);
        assert_eq!(instead, EquivalentEngine::Torus2Qos { dims: vec![4, 4] });
        let paths = InstallPaths { lfts: "l", qos_policy: "q", torus_config: "t" };
        let conf = write_options(&topo, &routes, &Lanes::ChangesMidPath { change, instead: instead.clone() }, &paths);
        assert!(conf.contains("NOT INSTALLABLE") && conf.contains("routing_engine torus-2QoS"));
        let EquivalentEngine::Torus2Qos { dims } = instead else { unreachable!() };
        let torus_conf = write_torus_config(&topo, &dims).unwrap();
        assert!(torus_conf.contains("torus 4 4 1"));
        assert!(torus_conf.contains("xm_link") && torus_conf.contains("ym_link"));
    }

    #[test]
    fn the_policy_has_one_rule_per_lane_for_per_destination_layers() {
        let topo = torus(&[3, 3], 2).unwrap();
        let mut routes = route(&topo, Engine::MinHop, &options(1)).unwrap();
        let h = topo.num_hosts();
        let per_dest: Vec<u8> = (0..h).map(|d| (d % 3) as u8).collect();
        routes.set_vc_policy(VcPolicy {
            num_vcs: 3,
            injection: Injection::PerDestination(per_dest),
            transitions: None,
        });
        let Lanes::PerPath(levels) = lanes(&topo, &routes).unwrap() else { panic!() };
        let policy = write_policy(&topo, &levels);
        assert_eq!(policy.matches("    qos-match-rule\n").count(), 2, "{policy}");
        assert_eq!(read_policy(&topo, &policy).unwrap(), levels);
        let paths = InstallPaths { lfts: "l", qos_policy: "q", torus_config: "t" };
        let conf = write_options(&topo, &routes, &Lanes::PerPath(levels), &paths);
        assert!(conf.contains("qos_sl2vl 0,1,2,15,15,15,15,15,15,15,15,15,15,15,15,15"), "{conf}");
        assert!(conf.contains("max_op_vls 3"));
    }

    #[test]
    fn a_policy_for_another_fabric_and_unknown_names_are_refused() {
        let small = torus(&[3, 3], 1).unwrap();
        let big = torus(&[4, 4], 2).unwrap();
        let routes = route(&big, Engine::Dfsssp, &options(4)).unwrap();
        let Lanes::PerPath(levels) = lanes(&big, &routes).unwrap() else { panic!() };
        let mut levels = levels;
        levels.sl[1] = 1; // make sure the policy names some GUID beyond the small fabric
        levels.sl[big.num_hosts() - 1] = 1;
        let policy = write_policy(&big, &levels);
        let e = read_policy(&small, &policy).unwrap_err().to_string();
        assert!(e.contains("no host port of this fabric"), "{e}");
        let text = "qos-levels\nqos-level\nname: DEFAULT\nsl: 0\nend-qos-level\nend-qos-levels\n\
                    qos-match-rules\nqos-match-rule\nsource: nobody\nqos-level-name: DEFAULT\nend-qos-match-rule\nend-qos-match-rules\n";
        assert!(read_policy(&small, text).unwrap_err().to_string().contains("'nobody'"));
        assert!(read_policy(&small, "qos-levels\nqos-level\nname: DEFAULT\nsl: 16\n")
            .unwrap_err()
            .to_string()
            .contains("line 4"));
        assert!(read_policy(&small, "qos-ulps\ndefault: 0\nend-qos-ulps\n").is_err());
    }

    #[test]
    fn the_lane_budget_is_checked() {
        let topo = torus(&[4, 4], 1).unwrap();
        let routes = route(&topo, Engine::Dor, &options(2)).unwrap();
        assert!(check_lane_budget(&routes, 2).is_ok());
        assert!(check_lane_budget(&routes, 1).unwrap_err().to_string().contains("needs 2 lanes"));
        assert!(check_lane_budget(&routes, 16).is_err());
    }
}
