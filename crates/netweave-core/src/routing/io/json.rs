//! netweave routes JSON, version 1: a [`RoutingTable`] saved losslessly with the identity of
//! its topology (spec: `docs/routes-json.md`).
//!
//! ```json
//! {
//!   "format": "netweave-routes",
//!   "version": 1,
//!   "engine": "minhop",
//!   "topology": {"name":"star","switches":1,"hosts":2,"links":2,"wiring":"fnv1a64:5d8e4b31c0a3f2e7"},
//!   "num_vcs": 1,
//!   "injection": {"kind":"zero"},
//!   "transitions": null,
//!   "out_port": [
//!     [1,2]
//!   ]
//! }
//! ```
//!
//! `out_port[s][h]` is the port switch `s` (position in the topology's switch list) sends
//! packets for host `h` (position in the host list) out of, 0 for "no route". The VC policy
//! is stored whole: `injection` (`zero`, `per_source`, `per_destination`, `per_pair`) and
//! `transitions`, the non-`Keep` entries of the per-switch `(in port, out port)` table as
//! `[switch, in_port, out_port, change]`, with `change` either `"increment"` or the VC to
//! set; `null` means the VC never changes. `read(topo, write(topo, r))` gives back `r`:
//! same engine name, ports and [`VcPolicy`] (compared with `==`).
//!
//! The `topology` object is the [`Fingerprint`] of the topology the routes were made for:
//! its name, switch/host/link counts and [`wiring_hash`]. The reader refuses routes whose
//! counts or wiring differ from the topology it is given (the name is informational: the
//! same fabric read from an ibsim file is named differently but routes the same).
//!
//! The reader checks everything against the topology while it parses (ports within each
//! switch's radix, one row per switch and one entry per host, VCs below `num_vcs`, VC
//! vectors of the right length, no duplicate transition), so errors carry the line of the
//! offending row in files laid out like ours. Errors are one line, never a panic.

use std::collections::HashSet;
use std::fmt::{self, Write as _};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::{NetweaveError, Result};
use crate::routing::{Injection, RoutingTable, VcChange, VcPolicy, VcTransitions, MAX_VCS};
use crate::topology::io::{parse_error, snippet};
use crate::topology::{NodeId, NodeKind, Port, Topology};

/// Value of the `"format"` field.
pub const FORMAT_TAG: &str = "netweave-routes";
/// The only version this reader understands and the one the writer emits.
pub const VERSION: u64 = 1;

const FMT: &str = "routes";
const FIELDS: &[&str] = &["format", "version", "engine", "topology", "num_vcs", "injection", "transitions", "out_port"];

// ---------------------------------------------------------------------------------------
// Topology identity

/// What a routes file records about its topology: enough to refuse a different fabric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// The topology's name, kept for messages only.
    pub name: String,
    /// Number of switches.
    pub switches: usize,
    /// Number of hosts.
    pub hosts: usize,
    /// Number of links.
    pub links: usize,
    /// [`wiring_hash`] of the topology.
    pub wiring: u64,
}

impl Fingerprint {
    /// The fingerprint of `topo`.
    pub fn of(topo: &Topology) -> Self {
        Fingerprint {
            name: topo.name().to_string(),
            switches: topo.num_switches(),
            hosts: topo.num_hosts(),
            links: topo.num_links(),
            wiring: wiring_hash(topo),
        }
    }

    /// Whether routes made for `self` fit a topology with fingerprint `other`: same counts
    /// and wiring (names may differ).
    pub fn fits(&self, other: &Fingerprint) -> bool {
        (self.switches, self.hosts, self.links, self.wiring) == (other.switches, other.hosts, other.links, other.wiring)
    }

    /// The wiring hash as written in files: `fnv1a64:` and 16 hex digits.
    pub fn wiring_text(&self) -> String {
        format!("fnv1a64:{:016x}", self.wiring)
    }
}

impl fmt::Display for Fingerprint {
    /// `"torus(3x3,hosts=2)" (9 switches, 18 hosts, 36 links, wiring fnv1a64:…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} ({} switches, {} hosts, {} links, wiring {})",
            snippet(&self.name),
            self.switches,
            self.hosts,
            self.links,
            self.wiring_text()
        )
    }
}

/// 64-bit FNV-1a hash of what a routing table depends on: node order and kinds, port counts,
/// and which port is wired to which port of which node. Labels, link order and link
/// bandwidth/latency are left out, so the same fabric re-read from an ibsim file hashes the
/// same, while any rewiring or renumbering (which would make stored port numbers wrong) does
/// not.
///
/// The hashed bytes (all integers little-endian) are the node count (u32), then per node in
/// id order: kind (u8, 0 host, 1 switch), radix (u16), number of connected ports (u32), and
/// per connected port in ascending order: port (u16), neighbour node id (u32), neighbour port
/// (u16). `docs/routes-json.md` repeats this so other tools can compute it.
pub fn wiring_hash(topo: &Topology) -> u64 {
    let mut h = Fnv1a::new();
    h.bytes(&(topo.num_nodes() as u32).to_le_bytes());
    for n in 0..topo.num_nodes() as NodeId {
        h.bytes(&[match topo.kind(n) {
            NodeKind::Host => 0,
            NodeKind::Switch => 1,
        }]);
        h.bytes(&topo.radix(n).to_le_bytes());
        h.bytes(&(topo.degree(n) as u32).to_le_bytes());
        for a in topo.neighbors(n) {
            h.bytes(&a.port.to_le_bytes());
            h.bytes(&a.neighbor.to_le_bytes());
            h.bytes(&a.neighbor_port.to_le_bytes());
        }
    }
    h.0
}

/// FNV-1a, 64-bit: tiny, dependency-free and stable across platforms and releases (unlike
/// `std`'s `DefaultHasher`), which a value stored in files must be.
struct Fnv1a(u64);

impl Fnv1a {
    fn new() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Writing

/// Write `routes` (made for `topo`) as netweave routes JSON, version 1.
///
/// Fails, with one line saying what is inconsistent, only for a table that does not fit
/// `topo` or whose VC policy contradicts itself (a VC at or above `num_vcs`, VC vectors of
/// the wrong length): such a file could not be read back.
pub fn write(topo: &Topology, routes: &RoutingTable) -> Result<String> {
    routes.check_fits(topo)?;
    let vc = routes.vc_policy();
    let bad = |m: String| Err(NetweaveError::Routing(format!("cannot write routes: {m}")));
    if routes.engine().trim().is_empty() || routes.engine().chars().any(char::is_control) {
        return bad(format!("the engine name {:?} is empty or has control characters", snippet(routes.engine())));
    }
    if vc.num_vcs == 0 || vc.num_vcs > MAX_VCS {
        return bad(format!("num_vcs is {}, it must be 1..={MAX_VCS}", vc.num_vcs));
    }
    let hosts = topo.num_hosts();
    let (vcs, expected): (&[u8], usize) = match &vc.injection {
        Injection::Zero => (&[], 0),
        Injection::PerSource(v) | Injection::PerDestination(v) => (v, hosts),
        Injection::PerPair { num_hosts, vcs } => {
            if *num_hosts != hosts {
                return bad(format!("per-pair injection is for {num_hosts} hosts, the topology has {hosts}"));
            }
            (vcs, hosts * hosts)
        }
    };
    if vcs.len() != expected {
        return bad(format!("the injection table has {} entries, expected {expected}", vcs.len()));
    }
    if let Some(i) = vcs.iter().position(|&v| v >= vc.num_vcs) {
        return bad(format!("injection entry {i} is VC {}, but num_vcs is {}", vcs[i], vc.num_vcs));
    }
    for (s, &node) in topo.switches().iter().enumerate() {
        let radix = topo.radix(node);
        if let Some(h) = (0..hosts).find(|&h| routes.out_port(s, h) > radix) {
            return bad(format!(
                "switch {} routes host {h} to port {}, beyond its {radix} ports",
                topo.label(node),
                routes.out_port(s, h)
            ));
        }
    }
    let transitions = non_keep_transitions(topo, vc);
    if let Some(&(s, i, o, VcChange::Set(v))) =
        transitions.iter().find(|t| matches!(t.3, VcChange::Set(v) if v >= vc.num_vcs))
    {
        return bad(format!(
            "switch {} sets VC {v} from port {i} to port {o}, but num_vcs is {}",
            topo.label(topo.switches()[s]),
            vc.num_vcs
        ));
    }

    let fp = Fingerprint::of(topo);
    let mut out = String::with_capacity(256 + topo.num_switches() * (hosts * 3 + 8) + transitions.len() * 24);
    out.push_str("{\n");
    let _ = writeln!(out, "  \"format\": \"{FORMAT_TAG}\",");
    let _ = writeln!(out, "  \"version\": {VERSION},");
    let _ = writeln!(out, "  \"engine\": {},", json_string(routes.engine()));
    let _ = writeln!(
        out,
        "  \"topology\": {{\"name\":{},\"switches\":{},\"hosts\":{},\"links\":{},\"wiring\":\"{}\"}},",
        json_string(topo.name()),
        fp.switches,
        fp.hosts,
        fp.links,
        fp.wiring_text()
    );
    let _ = writeln!(out, "  \"num_vcs\": {},", vc.num_vcs);
    match &vc.injection {
        Injection::Zero => out.push_str("  \"injection\": {\"kind\":\"zero\"},\n"),
        Injection::PerSource(v) | Injection::PerDestination(v) => {
            let kind = if matches!(vc.injection, Injection::PerSource(_)) { "per_source" } else { "per_destination" };
            let _ = write!(out, "  \"injection\": {{\"kind\":\"{kind}\",\"vcs\":");
            push_row(&mut out, v);
            out.push_str("},\n");
        }
        Injection::PerPair { vcs, .. } => {
            out.push_str("  \"injection\": {\"kind\":\"per_pair\",\"vcs\":[");
            push_rows(&mut out, vcs.chunks(hosts.max(1)).take(hosts), "    ");
            out.push_str("]},\n");
        }
    }
    match &vc.transitions {
        None => out.push_str("  \"transitions\": null,\n"),
        Some(_) => {
            out.push_str("  \"transitions\": [");
            for (k, &(s, i, o, change)) in transitions.iter().enumerate() {
                out.push_str(if k == 0 { "\n    " } else { ",\n    " });
                let _ = write!(out, "[{s},{i},{o},");
                match change {
                    VcChange::Increment => out.push_str("\"increment\""),
                    VcChange::Set(v) => {
                        let _ = write!(out, "{v}");
                    }
                    VcChange::Keep => out.push_str("\"keep\""), // never listed
                }
                out.push(']');
            }
            out.push_str(if transitions.is_empty() { "],\n" } else { "\n  ],\n" });
        }
    }
    out.push_str("  \"out_port\": [");
    let ports = routes.ports();
    push_rows(&mut out, (0..topo.num_switches()).map(|s| &ports[s * hosts..(s + 1) * hosts]), "    ");
    out.push_str("]\n}\n");
    Ok(out)
}

/// Every `(switch index, in port, out port, change)` whose change is not `Keep`, in that
/// order. Ports run over `0..=radix` as in [`VcTransitions`].
pub fn non_keep_transitions(topo: &Topology, vc: &VcPolicy) -> Vec<(usize, Port, Port, VcChange)> {
    vc.transitions.as_ref().map_or_else(Vec::new, |t| list_transitions(topo, t))
}

fn list_transitions(topo: &Topology, t: &VcTransitions) -> Vec<(usize, Port, Port, VcChange)> {
    let mut out = Vec::new();
    for (s, &node) in topo.switches().iter().enumerate() {
        let radix = topo.radix(node);
        for i in 0..=radix {
            for o in 0..=radix {
                let c = t.get(s, i, o);
                if c != VcChange::Keep {
                    out.push((s, i, o, c));
                }
            }
        }
    }
    out
}

/// A JSON string literal (serde_json's escaping; a `&str` always serialises).
fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// `[a,b,c]` for a row of small integers.
fn push_row<T: fmt::Display>(out: &mut String, row: &[T]) {
    out.push('[');
    for (k, v) in row.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        let _ = write!(out, "{v}");
    }
    out.push(']');
}

/// Rows one per line, indented, for the inside of an array whose `[` is already written;
/// leaves the cursor where the closing `]` goes.
fn push_rows<'a, T: fmt::Display + 'a>(out: &mut String, rows: impl Iterator<Item = &'a [T]>, indent: &str) {
    let mut any = false;
    for row in rows {
        out.push_str(if any { ",\n" } else { "\n" });
        out.push_str(indent);
        push_row(out, row);
        any = true;
    }
    if any {
        out.push('\n');
        out.push_str(&indent[..indent.len().saturating_sub(2)]);
    }
}

// ---------------------------------------------------------------------------------------
// Reading

/// Parse netweave routes JSON made for `topo`. Refuses files for another topology (counts or
/// wiring differ), malformed JSON, and any entry that does not fit `topo`; see the module docs.
pub fn read(topo: &Topology, text: &str) -> Result<RoutingTable> {
    let mut de = serde_json::Deserializer::from_str(text);
    let file = FileSeed { topo }.deserialize(&mut de).and_then(|f| de.end().map(|()| f)).map_err(serde_error)?;
    let mut table = RoutingTable::new(topo, file.engine);
    let hosts = topo.num_hosts();
    if hosts > 0 {
        for (s, row) in file.out_port.chunks(hosts).enumerate() {
            for (h, &p) in row.iter().enumerate() {
                table.set_out_port(s, h, p);
            }
        }
    }
    table.set_vc_policy(VcPolicy { num_vcs: file.num_vcs, injection: file.injection, transitions: file.transitions });
    Ok(table)
}

/// Map a serde_json error to a one-line `Parse` error with serde's line number.
fn serde_error(e: serde_json::Error) -> NetweaveError {
    let full = e.to_string();
    // serde_json appends " at line L column C"; the line goes into the error's own field.
    let message = match full.rfind(" at line ") {
        Some(i) if e.line() > 0 => format!("{} (column {})", &full[..i], e.column()),
        _ => full,
    };
    parse_error(FMT, e.line(), message)
}

/// The parsed, checked file.
struct File {
    engine: String,
    num_vcs: u8,
    injection: Injection,
    transitions: Option<VcTransitions>,
    /// Row-major `[switch][host]`, complete.
    out_port: Vec<Port>,
}

struct FileSeed<'t> {
    topo: &'t Topology,
}

impl<'de> DeserializeSeed<'de> for FileSeed<'_> {
    type Value = File;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<File, D::Error> {
        d.deserialize_map(self)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyRecord {
    name: String,
    switches: u64,
    hosts: u64,
    links: u64,
    wiring: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum InjectionKind {
    Zero,
    PerSource,
    PerDestination,
    PerPair,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InjectionRecord {
    kind: InjectionKind,
    #[serde(default)]
    vcs: Option<Vec<VcItem>>,
}

/// One element of an injection `vcs` array: a VC, or (per-pair) a row of VCs.
enum VcItem {
    One(u8),
    Row(Vec<u8>),
}

impl<'de> Deserialize<'de> for VcItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = VcItem;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a VC number 0..255 or an array of them")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<VcItem, E> {
                u8::try_from(v).map(VcItem::One).map_err(|_| E::custom(format!("VC {v} is out of range 0..255")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<VcItem, E> {
                u8::try_from(v).map(VcItem::One).map_err(|_| E::custom(format!("VC {v} is out of range 0..255")))
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> std::result::Result<VcItem, S::Error> {
                let mut row = Vec::new();
                while let Some(v) = seq.next_element::<u8>()? {
                    row.push(v);
                }
                Ok(VcItem::Row(row))
            }
        }
        d.deserialize_any(V)
    }
}

/// The `change` of a transition entry: `"increment"`, `"keep"` or a VC number.
struct ChangeRecord(VcChange);

impl<'de> Deserialize<'de> for ChangeRecord {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ChangeRecord;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a VC change: \"increment\", \"keep\" or the VC number to set")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<ChangeRecord, E> {
                match u8::try_from(v) {
                    Ok(v) if v < MAX_VCS => Ok(ChangeRecord(VcChange::Set(v))),
                    _ => Err(E::custom(format!("VC {v} is out of range 0..{}", MAX_VCS - 1))),
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<ChangeRecord, E> {
                match u64::try_from(v) {
                    Ok(u) => self.visit_u64(u),
                    Err(_) => Err(E::custom(format!("VC {v} is out of range 0..{}", MAX_VCS - 1))),
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<ChangeRecord, E> {
                match v {
                    "increment" => Ok(ChangeRecord(VcChange::Increment)),
                    "keep" => Ok(ChangeRecord(VcChange::Keep)),
                    other => Err(E::custom(format!(
                        "unknown VC change {:?} (expected \"increment\", \"keep\" or a VC number)",
                        snippet(other)
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// Duplicate keys are an error: silently keeping one of two `out_port` arrays would hide a
/// broken file.
fn once<T, E: de::Error>(slot: &Option<T>, key: &'static str) -> std::result::Result<(), E> {
    match slot {
        Some(_) => Err(E::duplicate_field(key)),
        None => Ok(()),
    }
}

impl<'de> Visitor<'de> for FileSeed<'_> {
    type Value = File;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a netweave routes object {{\"format\": \"{FORMAT_TAG}\", \"version\": {VERSION}, ...}}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<File, A::Error> {
        let topo = self.topo;
        let mut format: Option<()> = None;
        let mut version: Option<()> = None;
        let mut engine: Option<String> = None;
        let mut fingerprint: Option<()> = None;
        let mut num_vcs: Option<u8> = None;
        let mut injection: Option<Injection> = None;
        let mut transitions: Option<Option<VcTransitions>> = None;
        let mut out_port: Option<Vec<Port>> = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => {
                    once(&format, "format")?;
                    let f: String = map.next_value()?;
                    if f != FORMAT_TAG {
                        return Err(de::Error::custom(format!(
                            "\"format\" is {:?}, expected {FORMAT_TAG:?} (not a netweave routes file)",
                            snippet(&f)
                        )));
                    }
                    format = Some(());
                }
                "version" => {
                    once(&version, "version")?;
                    let v: u64 = map.next_value()?;
                    if v != VERSION {
                        return Err(de::Error::custom(format!(
                            "unsupported netweave routes version {v} (this netweave reads version {VERSION})"
                        )));
                    }
                    version = Some(());
                }
                "engine" => {
                    once(&engine, "engine")?;
                    let e: String = map.next_value()?;
                    if e.trim().is_empty() || e.chars().any(char::is_control) {
                        return Err(de::Error::custom(format!(
                            "\"engine\" must be a non-empty name without control characters, got {:?}",
                            snippet(&e)
                        )));
                    }
                    engine = Some(e);
                }
                "topology" => {
                    once(&fingerprint, "topology")?;
                    let r: TopologyRecord = map.next_value()?;
                    check_fingerprint(topo, &r).map_err(de::Error::custom)?;
                    fingerprint = Some(());
                }
                "num_vcs" => {
                    once(&num_vcs, "num_vcs")?;
                    let v: u64 = map.next_value()?;
                    if v == 0 || v > MAX_VCS as u64 {
                        return Err(de::Error::custom(format!("\"num_vcs\" is {v}, it must be 1..={MAX_VCS}")));
                    }
                    num_vcs = Some(v as u8);
                }
                "injection" => {
                    once(&injection, "injection")?;
                    let r: InjectionRecord = map.next_value()?;
                    injection = Some(injection_from(topo.num_hosts(), r).map_err(de::Error::custom)?);
                }
                "transitions" => {
                    once(&transitions, "transitions")?;
                    transitions = Some(map.next_value_seed(TransitionsSeed { topo })?);
                }
                "out_port" => {
                    once(&out_port, "out_port")?;
                    out_port = Some(map.next_value_seed(OutPortSeed { topo })?);
                }
                other => return Err(de::Error::unknown_field(other, FIELDS)),
            }
        }
        format.ok_or_else(|| de::Error::missing_field("format"))?;
        version.ok_or_else(|| de::Error::missing_field("version"))?;
        fingerprint.ok_or_else(|| de::Error::missing_field("topology"))?;
        let engine = engine.ok_or_else(|| de::Error::missing_field("engine"))?;
        let num_vcs = num_vcs.ok_or_else(|| de::Error::missing_field("num_vcs"))?;
        let injection = injection.ok_or_else(|| de::Error::missing_field("injection"))?;
        let transitions = transitions.unwrap_or(None);
        let out_port = out_port.ok_or_else(|| de::Error::missing_field("out_port"))?;
        // VC ranges need num_vcs, which may come after the tables in a hand-written file.
        let vcs: &[u8] = match &injection {
            Injection::Zero => &[],
            Injection::PerSource(v) | Injection::PerDestination(v) | Injection::PerPair { vcs: v, .. } => v,
        };
        if let Some(i) = vcs.iter().position(|&v| v >= num_vcs) {
            return Err(de::Error::custom(format!(
                "injection.vcs entry {i} is VC {}, but \"num_vcs\" is {num_vcs}",
                vcs[i]
            )));
        }
        if let Some(t) = &transitions {
            if let Some((s, i, o, VcChange::Set(v))) =
                list_transitions(topo, t).into_iter().find(|t| matches!(t.3, VcChange::Set(v) if v >= num_vcs))
            {
                return Err(de::Error::custom(format!(
                    "transition [{s},{i},{o}] sets VC {v}, but \"num_vcs\" is {num_vcs}"
                )));
            }
        }
        Ok(File { engine, num_vcs, injection, transitions, out_port })
    }
}

/// Refuse a routes file made for another topology (counts or wiring differ).
fn check_fingerprint(topo: &Topology, r: &TopologyRecord) -> std::result::Result<(), String> {
    let ours = Fingerprint::of(topo);
    let Some(wiring) = r.wiring.strip_prefix("fnv1a64:").and_then(|h| {
        (h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit())).then(|| u64::from_str_radix(h, 16).ok()).flatten()
    }) else {
        return Err(format!(
            "\"topology.wiring\" is {:?}, expected \"fnv1a64:\" and 16 hex digits",
            snippet(&r.wiring)
        ));
    };
    let theirs = Fingerprint {
        name: r.name.clone(),
        switches: r.switches.try_into().unwrap_or(usize::MAX),
        hosts: r.hosts.try_into().unwrap_or(usize::MAX),
        links: r.links.try_into().unwrap_or(usize::MAX),
        wiring,
    };
    if theirs.fits(&ours) {
        Ok(())
    } else {
        Err(format!(
            "these routes were made for topology {theirs}, not for the given topology {ours}; \
             give the topology the routes were made for, or route this one again"
        ))
    }
}

fn injection_from(hosts: usize, r: InjectionRecord) -> std::result::Result<Injection, String> {
    let flat = |items: Vec<VcItem>, what: &str| -> std::result::Result<Vec<u8>, String> {
        if items.len() != hosts {
            return Err(format!("injection \"{what}\" needs one VC per host ({hosts}), got {}", items.len()));
        }
        items
            .into_iter()
            .map(|i| match i {
                VcItem::One(v) => Ok(v),
                VcItem::Row(_) => Err(format!("injection \"{what}\" takes a flat array of VCs, found a nested array")),
            })
            .collect()
    };
    let kind_name = match r.kind {
        InjectionKind::Zero => "zero",
        InjectionKind::PerSource => "per_source",
        InjectionKind::PerDestination => "per_destination",
        InjectionKind::PerPair => "per_pair",
    };
    match (r.kind, r.vcs) {
        (InjectionKind::Zero, None) => Ok(Injection::Zero),
        (InjectionKind::Zero, Some(_)) => Err("injection \"zero\" takes no \"vcs\"".into()),
        (_, None) => Err(format!("injection \"{kind_name}\" needs \"vcs\"")),
        (InjectionKind::PerSource, Some(v)) => flat(v, kind_name).map(Injection::PerSource),
        (InjectionKind::PerDestination, Some(v)) => flat(v, kind_name).map(Injection::PerDestination),
        (InjectionKind::PerPair, Some(rows)) => {
            if rows.len() != hosts {
                return Err(format!(
                    "injection \"per_pair\" needs one row per source host ({hosts}), got {}",
                    rows.len()
                ));
            }
            let mut vcs = Vec::with_capacity(hosts * hosts);
            for (src, row) in rows.into_iter().enumerate() {
                match row {
                    VcItem::Row(r) if r.len() == hosts => vcs.extend_from_slice(&r),
                    VcItem::Row(r) => {
                        return Err(format!(
                            "injection \"per_pair\" row {src} has {} VCs, expected one per host ({hosts})",
                            r.len()
                        ))
                    }
                    VcItem::One(_) => {
                        return Err(format!("injection \"per_pair\" row {src} must be an array of VCs, one per host"))
                    }
                }
            }
            Ok(Injection::PerPair { num_hosts: hosts, vcs })
        }
    }
}

/// `out_port`, checked row by row against the topology while parsing.
struct OutPortSeed<'t> {
    topo: &'t Topology,
}

impl<'de> DeserializeSeed<'de> for OutPortSeed<'_> {
    type Value = Vec<Port>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Vec<Port>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for OutPortSeed<'_> {
    type Value = Vec<Port>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array with one row of output ports per switch")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> std::result::Result<Vec<Port>, S::Error> {
        let topo = self.topo;
        let (switches, hosts) = (topo.num_switches(), topo.num_hosts());
        let mut out = Vec::with_capacity(switches.saturating_mul(hosts).min(1 << 26));
        let mut s = 0usize;
        while let Some(row) = seq.next_element::<Vec<Port>>()? {
            if s >= switches {
                return Err(de::Error::custom(format!("\"out_port\" has more rows than the {switches} switches")));
            }
            let node = topo.switches()[s];
            if row.len() != hosts {
                return Err(de::Error::custom(format!(
                    "\"out_port\" row {s} (switch {:?}) has {} entries, expected one per host ({hosts})",
                    snippet(topo.label(node)),
                    row.len()
                )));
            }
            let radix = topo.radix(node);
            if let Some(h) = row.iter().position(|&p| p > radix) {
                return Err(de::Error::custom(format!(
                    "\"out_port\" row {s} (switch {:?}) sends host {h} to port {}, but the switch has ports 1..{radix}",
                    snippet(topo.label(node)),
                    row[h]
                )));
            }
            out.extend_from_slice(&row);
            s += 1;
        }
        if s != switches {
            return Err(de::Error::custom(format!("\"out_port\" has {s} rows, expected one per switch ({switches})")));
        }
        Ok(out)
    }
}

/// `transitions`: `null` or the non-`Keep` entries, written into a [`VcTransitions`].
struct TransitionsSeed<'t> {
    topo: &'t Topology,
}

impl<'de> DeserializeSeed<'de> for TransitionsSeed<'_> {
    type Value = Option<VcTransitions>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for TransitionsSeed<'_> {
    type Value = Option<VcTransitions>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("null or an array of [switch, in_port, out_port, change]")
    }

    fn visit_none<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> std::result::Result<Self::Value, S::Error> {
        let topo = self.topo;
        let mut table = VcTransitions::new(topo);
        let mut seen = HashSet::new();
        let mut k = 0usize;
        while let Some((s, i, o, ChangeRecord(change))) = seq.next_element::<(u64, Port, Port, ChangeRecord)>()? {
            let Some(&node) = usize::try_from(s).ok().and_then(|s| topo.switches().get(s)) else {
                return Err(de::Error::custom(format!(
                    "transitions[{k}] names switch {s}, but there are {} switches",
                    topo.num_switches()
                )));
            };
            let radix = topo.radix(node);
            if i > radix || o > radix {
                return Err(de::Error::custom(format!(
                    "transitions[{k}] uses ports {i} -> {o} of switch {s} ({:?}), which has ports 0..{radix}",
                    snippet(topo.label(node))
                )));
            }
            if !seen.insert((s, i, o)) {
                return Err(de::Error::custom(format!("transitions[{k}] repeats switch {s}, ports {i} -> {o}")));
            }
            table.set(s as usize, i, o, change);
            k += 1;
        }
        Ok(Some(table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{route, Engine, RouteOptions, NO_PORT};
    use crate::topology::grid::{mesh, torus};
    use crate::topology::lsft::latin_square_fat_tree;
    use crate::topology::{LinkSpec, TopologyBuilder};
    use proptest::prelude::*;

    fn minhop(topo: &Topology) -> RoutingTable {
        route(topo, Engine::MinHop, &RouteOptions::default()).unwrap()
    }

    fn assert_same(a: &RoutingTable, b: &RoutingTable) {
        assert_eq!(a.engine(), b.engine());
        assert_eq!(a.ports(), b.ports());
        assert_eq!(a.vc_policy(), b.vc_policy());
    }

    /// A table with every kind of VC policy feature, on a 3×3 torus.
    fn rich(topo: &Topology, injection: Injection) -> RoutingTable {
        let mut r = minhop(topo);
        let mut t = VcTransitions::new(topo);
        let last = topo.num_switches() - 1;
        t.set(0, 1, 2, VcChange::Increment);
        t.set(1, topo.radix(topo.switches()[1]), 1, VcChange::Set(0));
        t.set(last, 0, topo.radix(topo.switches()[last]), VcChange::Set(2));
        r.set_vc_policy(VcPolicy { num_vcs: 3, injection, transitions: Some(t) });
        r
    }

    fn err(topo: &Topology, text: &str) -> String {
        let e = read(topo, text).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn round_trips_every_injection_kind() {
        let t = torus(&[3, 3], 2).unwrap();
        let h = t.num_hosts();
        for inj in [
            Injection::Zero,
            Injection::PerSource((0..h).map(|i| (i % 3) as u8).collect()),
            Injection::PerDestination((0..h).map(|i| (i % 2) as u8).collect()),
            Injection::PerPair { num_hosts: h, vcs: (0..h * h).map(|i| (i % 3) as u8).collect() },
        ] {
            let r = rich(&t, inj);
            let text = write(&t, &r).unwrap();
            let back = read(&t, &text).unwrap();
            assert_same(&r, &back);
            assert_eq!(write(&t, &back).unwrap(), text, "writing is deterministic");
        }
    }

    #[test]
    fn none_and_empty_transitions_stay_distinct() {
        let t = mesh(&[2, 2], 1).unwrap();
        let mut r = minhop(&t);
        let text = write(&t, &r).unwrap();
        assert!(text.contains("\"transitions\": null"), "{text}");
        assert_same(&r, &read(&t, &text).unwrap());
        r.set_vc_policy(VcPolicy { num_vcs: 1, injection: Injection::Zero, transitions: Some(VcTransitions::new(&t)) });
        let text = write(&t, &r).unwrap();
        assert!(text.contains("\"transitions\": []"), "{text}");
        assert_same(&r, &read(&t, &text).unwrap());
    }

    #[test]
    fn layout_is_one_row_per_line() {
        let t = latin_square_fat_tree(2, false, false).unwrap();
        let r = minhop(&t);
        let text = write(&t, &r).unwrap();
        assert!(
            text.starts_with("{\n  \"format\": \"netweave-routes\",\n  \"version\": 1,\n  \"engine\": \"minhop\",\n")
        );
        let rows = text.lines().filter(|l| l.starts_with("    [")).count();
        assert_eq!(rows, t.num_switches());
        // Any JSON layout is accepted: a compact re-encoding reads the same.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_same(&r, &read(&t, &serde_json::to_string(&v).unwrap()).unwrap());
    }

    #[test]
    fn empty_fabrics_round_trip() {
        let mut b = TopologyBuilder::new("lonely");
        b.add_switch("s", 2);
        let t = b.build().unwrap();
        let r = RoutingTable::new(&t, "none");
        assert_same(&r, &read(&t, &write(&t, &r).unwrap()).unwrap());
        let t = TopologyBuilder::new("nothing").build().unwrap();
        let r = RoutingTable::new(&t, "none");
        assert_same(&r, &read(&t, &write(&t, &r).unwrap()).unwrap());
    }

    #[test]
    fn wiring_hash_ignores_labels_and_link_specs_but_not_wiring() {
        let build = |label: &str, bw: f64, swap: bool| {
            let mut b = TopologyBuilder::new("x");
            let s0 = b.add_switch(label, 4);
            let s1 = b.add_switch("s1", 4);
            let h0 = b.add_host("h0");
            let h1 = b.add_host("h1");
            let spec = LinkSpec::new(bw, 1.0).unwrap();
            if swap {
                b.connect_ports(s0, 3, s1, 3, spec);
                b.connect_ports(h0, 1, s0, 1, spec);
            } else {
                b.connect_ports(h0, 1, s0, 1, spec);
                b.connect_ports(s0, 3, s1, 3, spec);
            }
            b.connect_ports(h1, 1, s1, 2, spec);
            b.build().unwrap()
        };
        let base = wiring_hash(&build("s0", 100.0, false));
        assert_eq!(base, wiring_hash(&build("renamed", 25.0, true)));
        let mut b = build("s0", 100.0, false).to_builder();
        b.add_host("h2");
        assert_ne!(base, wiring_hash(&b.build().unwrap()));
        // Same counts, one host moved to another port: refused.
        let mut b = TopologyBuilder::new("x");
        let s0 = b.add_switch("s0", 4);
        let s1 = b.add_switch("s1", 4);
        let h0 = b.add_host("h0");
        let h1 = b.add_host("h1");
        b.connect_ports(h0, 1, s0, 2, LinkSpec::default());
        b.connect_ports(s0, 3, s1, 3, LinkSpec::default());
        b.connect_ports(h1, 1, s1, 2, LinkSpec::default());
        let moved = b.build().unwrap();
        assert_ne!(base, wiring_hash(&moved));
        let orig = build("s0", 100.0, false);
        let text = write(&orig, &minhop(&orig)).unwrap();
        let e = err(&moved, &text);
        assert!(e.contains("were made for topology") && e.contains("wiring fnv1a64:"), "{e}");
    }

    #[test]
    fn mismatched_topology_is_refused_with_both_fingerprints() {
        let a = torus(&[3, 3], 2).unwrap();
        let b = latin_square_fat_tree(2, false, false).unwrap();
        let text = write(&a, &minhop(&a)).unwrap();
        let e = err(&b, &text);
        assert!(e.contains("torus(3x3,hosts=2)") && e.contains("9 switches") && e.contains(b.name()), "{e}");
        assert!(e.starts_with("routes parse error at line 5"), "{e}");
    }

    #[test]
    fn writer_refuses_inconsistent_policies() {
        let t = mesh(&[2, 2], 1).unwrap();
        let mut r = minhop(&t);
        r.set_vc_policy(VcPolicy { num_vcs: 2, injection: Injection::PerSource(vec![0, 1]), transitions: None });
        assert!(write(&t, &r).unwrap_err().to_string().contains("has 2 entries, expected 4"));
        r.set_vc_policy(VcPolicy { num_vcs: 2, injection: Injection::PerSource(vec![0, 1, 2, 0]), transitions: None });
        assert!(write(&t, &r).unwrap_err().to_string().contains("VC 2"));
        let mut tr = VcTransitions::new(&t);
        tr.set(1, 1, 2, VcChange::Set(5));
        r.set_vc_policy(VcPolicy { num_vcs: 2, injection: Injection::Zero, transitions: Some(tr) });
        assert!(write(&t, &r).unwrap_err().to_string().contains("sets VC 5"));
        let other = torus(&[3, 3], 1).unwrap();
        assert!(write(&other, &r).is_err());
        let r = RoutingTable::new(&t, "two\nlines");
        assert!(write(&t, &r).unwrap_err().to_string().contains("engine name"));
    }

    /// The file for `t` with one line replaced: the first that starts with `starts`, looking
    /// only inside `out_port` when `starts` is a row.
    fn edit(t: &Topology, r: &RoutingTable, starts: &str, with: &str) -> String {
        let text = write(t, r).unwrap();
        let skip = if starts == "    [" { text.find("\"out_port\"").unwrap() } else { 0 };
        let (head, tail) = text.split_at(skip);
        let mut done = false;
        let out: Vec<String> = tail
            .lines()
            .map(|l| {
                if !done && l.starts_with(starts) {
                    done = true;
                    with.to_string()
                } else {
                    l.to_string()
                }
            })
            .collect();
        assert!(done, "no line starts with {starts:?}");
        format!("{head}{}", out.join("\n"))
    }

    #[test]
    fn malformed_files_give_one_line_errors() {
        let t = mesh(&[2, 2], 1).unwrap();
        let h = t.num_hosts();
        let r = rich(&t, Injection::PerSource(vec![0; h]));
        let good = write(&t, &r).unwrap();
        let fp = Fingerprint::of(&t);
        let topo_line = format!(
            "  \"topology\": {{\"name\":\"x\",\"switches\":{},\"hosts\":{},\"links\":{},\"wiring\":\"{}\"}},",
            fp.switches,
            fp.hosts,
            fp.links,
            fp.wiring_text()
        );
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "EOF"),
            ("[]".into(), "netweave routes object"),
            (good.replace("netweave-routes", "netweave-topology"), "not a netweave routes file"),
            (good.replace("\"version\": 1", "\"version\": 2"), "unsupported netweave routes version 2"),
            (good.replace("\"engine\": \"minhop\"", "\"engine\": \"\""), "non-empty name"),
            (good.replace("\"num_vcs\": 3", "\"num_vcs\": 0"), "1..=16"),
            (good.replace("\"num_vcs\": 3", "\"num_vcs\": 1"), "but \"num_vcs\" is 1"),
            (good.replace("\"kind\":\"per_source\"", "\"kind\":\"sideways\""), "unknown variant"),
            (good.replace("\"kind\":\"per_source\"", "\"kind\":\"zero\""), "takes no \"vcs\""),
            (good.replace("\"kind\":\"per_source\"", "\"kind\":\"per_pair\""), "row 0 must be an array"),
            (good.replace("\"vcs\":[0,0,0,0]", "\"vcs\":[0,0,0]"), "one VC per host (4), got 3"),
            (good.replace("\"vcs\":[0,0,0,0]", "\"vcs\":[0,0,0,[1]]"), "nested array"),
            (good.replace("\"vcs\":[0,0,0,0]", "\"vcs\":[0,0,0,999]"), "out of range"),
            (good.replace("\"vcs\":[0,0,0,0]", "\"vcs\":[0,0,0,-1]"), "out of range"),
            (good.replace("\"increment\"", "\"sideways\""), "unknown VC change"),
            (good.replace("\"increment\"", "200"), "out of range 0..15"),
            (good.replace("\"increment\"", "\"keep\"],\n    [0,1,2,\"keep\""), "repeats switch 0"),
            (good.replace("[0,1,2,", "[7,1,2,"), "names switch 7"),
            (good.replace("[0,1,2,", "[0,9,2,"), "ports 0..5"),
            (good.replace("[0,1,2,", "[0,1,2,1,"), "trailing"),
            (good.replace("[3,0,5,2]", "[3,0,5,1]").replace("\"num_vcs\": 3", "\"num_vcs\": 1"), "sets VC 1"),
            (good.replace("\"transitions\": [", "\"transitions\": {").replacen("  ],", "  },", 1), "array of"),
            (good.replace("\"out_port\"", "\"out_ports\""), "unknown field"),
            (good.replace("\"engine\"", "\"format\""), "duplicate field"),
            (good.replace("\"out_port\": [", "\"ignored\": 1, \"out_port\": ["), "unknown field"),
            (format!("{good} trailing"), "trailing characters"),
            (good.replace("fnv1a64:", "md5:"), "16 hex digits"),
            (edit(&t, &r, "  \"topology\"", &topo_line.replace("\"hosts\":4", "\"hosts\":5")), "were made for"),
            (edit(&t, &r, "    [", "    [1,2],"), "row 0"),
            (edit(&t, &r, "    [", "    [1,2,3,99],"), "port 99"),
            (edit(&t, &r, "    [", "    [1,2,3,-1],"), "invalid value"),
            (edit(&t, &r, "    [", "    [1,2,3,\"a\"],"), "invalid type"),
            (good.replace("  ]\n}", "  ,[0,0,0,0]]\n}"), "more rows than"),
            (good.replace("\"out_port\": [", "\"out_port\": [\n    [0,0,0,0],"), "more rows than"),
        ];
        for (text, want) in cases {
            let e = err(&t, &text);
            assert!(e.starts_with("routes parse error at line"), "{e}");
            assert!(e.contains(want), "want {want:?} in {e}");
        }
        // Missing fields and too few rows.
        let without = |key: &str| -> String {
            let v: serde_json::Value = serde_json::from_str(&good).unwrap();
            let mut m = v.as_object().unwrap().clone();
            m.remove(key);
            serde_json::to_string(&m).unwrap()
        };
        for key in ["format", "version", "engine", "topology", "num_vcs", "injection", "out_port"] {
            let e = err(&t, &without(key));
            assert!(e.contains(&format!("missing field `{key}`")), "{e}");
        }
        let back = read(&t, &without("transitions")).unwrap();
        assert_eq!(back.vc_policy().transitions, None);
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        v["out_port"].as_array_mut().unwrap().pop();
        assert!(err(&t, &v.to_string()).contains("has 3 rows, expected one per switch (4)"));
    }

    #[test]
    fn no_route_entries_survive() {
        let t = torus(&[3, 3], 1).unwrap();
        let mut r = minhop(&t);
        r.set_out_port(2, 5, NO_PORT);
        let back = read(&t, &write(&t, &r).unwrap()).unwrap();
        assert_eq!(back.out_port(2, 5), NO_PORT);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Arbitrary text never panics the reader and errors stay on one line.
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
            let t = mesh(&[2, 2], 1).unwrap();
            if let Err(e) = read(&t, &text) {
                prop_assert!(!e.to_string().contains('\n'));
            }
        }

        /// Damaging a valid file anywhere (truncate, delete, replace a byte) gives an error or a
        /// table that fits the topology, never a panic.
        #[test]
        fn damaged_files_never_panic(cut in 0usize..2000, pos in 0usize..2000, byte in 0u8..128, op in 0u8..3) {
            let t = mesh(&[2, 2], 1).unwrap();
            let r = rich(&t, Injection::PerPair { num_hosts: 4, vcs: vec![1; 16] });
            let good = write(&t, &r).unwrap();
            let mut bytes = good.into_bytes();
            let n = bytes.len();
            match op {
                0 => bytes.truncate(cut % n),
                1 => { bytes.remove(pos % n); }
                _ => bytes[pos % n] = byte,
            }
            let text = String::from_utf8_lossy(&bytes).into_owned();
            match read(&t, &text) {
                Ok(back) => {
                    back.check_fits(&t).unwrap();
                    // Whatever was accepted can be written again.
                    prop_assert!(write(&t, &back).is_ok());
                }
                Err(e) => prop_assert!(!e.to_string().contains('\n')),
            }
        }

        /// Random tables (ports in range, random policies) round-trip exactly.
        #[test]
        fn random_tables_round_trip(seed in any::<u64>(), vcs in 1u8..=16, kind in 0u8..4) {
            use rand::{Rng, SeedableRng};
            let t = torus(&[3, 2], 2).unwrap();
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let h = t.num_hosts();
            let mut r = RoutingTable::new(&t, "random");
            for s in 0..t.num_switches() {
                let radix = t.radix(t.switches()[s]);
                for d in 0..h {
                    r.set_out_port(s, d, rng.gen_range(0..=radix));
                }
            }
            let mut pick = |n: usize| (0..n).map(|_| rng.gen_range(0..vcs)).collect::<Vec<u8>>();
            let injection = match kind {
                0 => Injection::Zero,
                1 => Injection::PerSource(pick(h)),
                2 => Injection::PerDestination(pick(h)),
                _ => Injection::PerPair { num_hosts: h, vcs: pick(h * h) },
            };
            let mut tr = VcTransitions::new(&t);
            for _ in 0..20 {
                let s = rng.gen_range(0..t.num_switches());
                let radix = t.radix(t.switches()[s]);
                let change = if rng.gen_bool(0.5) { VcChange::Increment } else { VcChange::Set(rng.gen_range(0..vcs)) };
                tr.set(s, rng.gen_range(0..=radix), rng.gen_range(0..=radix), change);
            }
            r.set_vc_policy(VcPolicy { num_vcs: vcs, injection, transitions: Some(tr) });
            let back = read(&t, &write(&t, &r).unwrap()).unwrap();
            prop_assert_eq!(back.ports(), r.ports());
            prop_assert_eq!(back.vc_policy(), r.vc_policy());
        }
    }
}
