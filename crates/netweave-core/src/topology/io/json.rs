//! netweave topology JSON, version 1: the lossless native format (spec: `docs/topology-json.md`).
//!
//! ```json
//! {
//!   "format": "netweave-topology",
//!   "version": 1,
//!   "name": "star",
//!   "family": "custom",
//!   "params": {},
//!   "structure": {"kind":"generic"},
//!   "nodes": [
//!     {"kind":"switch","label":"s","ports":4},
//!     {"kind":"host","label":"h0","ports":1,"coords":[0]}
//!   ],
//!   "links": [
//!     {"a":[1,1],"b":[0,1],"bandwidth_gbps":100.0,"latency_ns":100.0}
//!   ]
//! }
//! ```
//!
//! A node's id is its position in `"nodes"`; link ends are `[node, port]` with 1-based ports.
//! The writer puts one node or link per line: files stay greppable and diffable, and a
//! 32×32×32 torus is about 10 MB. Everything in a [`Topology`] survives a round trip,
//! including link order, so `read(write(t))` is `t`.
//!
//! The reader checks the format tag and version first, rejects unknown fields, and validates
//! every link (node and port in range, no port used twice, no self-link, positive bandwidth,
//! non-negative latency) while parsing, so errors carry the line of the offending value.
//! Only when `"links"` precedes `"nodes"` in the object (e.g. `json.dump(sort_keys=True)`) is
//! validation deferred and errors are reported at line 0 with the link's index.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::{finish, parse_error};
use crate::error::{NetweaveError, Result};
use crate::topology::link_layer::{LinkLayer, Switching};
use crate::topology::structure::Structure;
use crate::topology::{LinkSpec, NodeId, NodeKind, Port, Topology, TopologyBuilder};

/// Value of the `"format"` field.
pub const FORMAT_TAG: &str = "netweave-topology";
/// The only version this reader understands and the one the writer emits.
pub const VERSION: u64 = 1;

const FMT: &str = "json";
const FIELDS: &[&str] = &[
    "format",
    "version",
    "name",
    "family",
    "params",
    "structure",
    "link_layer",
    "port_buffer_bytes",
    "nodes",
    "links",
];

/// One entry of `"nodes"`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeRecord {
    kind: NodeKind,
    label: String,
    ports: Port,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    coords: Option<Vec<i64>>,
}

/// One entry of `"links"`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkRecord {
    a: (NodeId, Port),
    b: (NodeId, Port),
    bandwidth_gbps: f64,
    latency_ns: f64,
}

/// Write `topo` as netweave topology JSON (version 1). Never fails in practice; the
/// `Result` keeps the signature uniform across formats.
pub fn write(topo: &Topology) -> Result<String> {
    let mut out = String::with_capacity(64 + 48 * topo.num_nodes() + 80 * topo.num_links());
    out.push_str("{\n");
    out.push_str(&format!("  \"format\": {},\n", enc(FORMAT_TAG)?));
    out.push_str(&format!("  \"version\": {VERSION},\n"));
    out.push_str(&format!("  \"name\": {},\n", enc(topo.name())?));
    out.push_str(&format!("  \"family\": {},\n", enc(topo.family())?));
    out.push_str(&format!("  \"params\": {},\n", enc(topo.params())?));
    // A malformed structure is not written: the reader derives it again from family and params.
    if !matches!(topo.structure(), Structure::Malformed { .. }) {
        out.push_str(&format!("  \"structure\": {},\n", enc(topo.structure())?));
    }
    let switching = topo.switching();
    out.push_str(&format!("  \"link_layer\": {},\n", enc(&switching.link_layer)?));
    if let Some(buffer) = switching.port_buffer_bytes {
        out.push_str(&format!("  \"port_buffer_bytes\": {buffer},\n"));
    }
    let nodes = (0..topo.num_nodes() as NodeId).map(|n| NodeRecord {
        kind: topo.kind(n),
        label: topo.label(n).to_string(),
        ports: topo.radix(n),
        coords: topo.coords(n).map(<[i64]>::to_vec),
    });
    push_array(&mut out, "nodes", nodes, ",")?;
    let links = topo.links().iter().map(|l| LinkRecord {
        a: (l.a.node, l.a.port),
        b: (l.b.node, l.b.port),
        bandwidth_gbps: l.spec.bandwidth_gbps,
        latency_ns: l.spec.latency_ns,
    });
    push_array(&mut out, "links", links, "")?;
    out.push_str("}\n");
    Ok(out)
}

/// Compact JSON for one value. Only non-finite floats could fail, and a built `Topology`
/// has none; the error path exists so a future field cannot panic here.
fn enc<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| NetweaveError::InvalidParameter(format!("json write: {e}")))
}

/// Append `"key": [ ... ]` with one compact element per line, then `trailer` and a newline.
fn push_array<T: Serialize>(out: &mut String, key: &str, items: impl Iterator<Item = T>, trailer: &str) -> Result<()> {
    out.push_str(&format!("  \"{key}\": ["));
    let mut first = true;
    for item in items {
        out.push_str(if first { "\n    " } else { ",\n    " });
        out.push_str(&enc(&item)?);
        first = false;
    }
    out.push_str(if first { "]" } else { "\n  ]" });
    out.push_str(trailer);
    out.push('\n');
    Ok(())
}

/// Parse netweave topology JSON. See the module docs for what is checked.
pub fn read(text: &str) -> Result<Topology> {
    let mut de = serde_json::Deserializer::from_str(text);
    let file = FileSeed.deserialize(&mut de).and_then(|f| de.end().map(|()| f)).map_err(serde_error)?;
    let nodes = file.nodes;
    // Links seen before nodes could not be checked during parsing; check them now.
    let links = match file.links {
        Links::Checked(l) => l,
        Links::Unchecked(raw) => {
            let mut checker = LinkChecker::new(&nodes);
            for (i, l) in raw.iter().enumerate() {
                checker.check(l).map_err(|m| parse_error(FMT, 0, format!("links[{i}]: {m}")))?;
            }
            raw
        }
    };
    // Link layer and buffer: what the file states, the rest from the shape's default.
    let switching = if file.link_layer.is_some() || file.port_buffer_bytes.is_some() {
        let shape = file.structure.clone().unwrap_or_else(|| Structure::from_family(&file.family, &file.params));
        let layer = file.link_layer.unwrap_or(Switching::default_for(&shape).link_layer);
        Some(Switching::new(layer, file.port_buffer_bytes).map_err(|e| parse_error(FMT, 0, e.to_string()))?)
    } else {
        None
    };
    let mut b = TopologyBuilder::new(file.name);
    b.family(&file.family);
    for (k, v) in file.params {
        b.param(&k, v);
    }
    if let Some(s) = file.structure {
        b.structure(s);
    }
    if let Some(s) = switching {
        b.switching(s);
    }
    for n in nodes {
        let id = b.add_node(n.kind, n.label, n.ports);
        if let Some(c) = n.coords {
            b.set_coords(id, c);
        }
    }
    for l in links {
        let spec = LinkSpec { bandwidth_gbps: l.bandwidth_gbps, latency_ns: l.latency_ns };
        b.connect_ports(l.a.0, l.a.1, l.b.0, l.b.1, spec);
    }
    finish(b, FMT)
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

/// The top-level object, parsed key by key so checks can run as soon as their data is in.
struct File {
    name: String,
    family: String,
    params: BTreeMap<String, serde_json::Value>,
    structure: Option<Structure>,
    link_layer: Option<LinkLayer>,
    port_buffer_bytes: Option<u64>,
    nodes: Vec<NodeRecord>,
    links: Links,
}

enum Links {
    /// Validated while parsing (nodes came first).
    Checked(Vec<LinkRecord>),
    /// Parsed before the nodes were known; validated afterwards.
    Unchecked(Vec<LinkRecord>),
}

struct FileSeed;

impl<'de> DeserializeSeed<'de> for FileSeed {
    type Value = File;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<File, D::Error> {
        d.deserialize_map(FileVisitor)
    }
}

struct FileVisitor;

impl<'de> Visitor<'de> for FileVisitor {
    type Value = File;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a netweave topology object {{\"format\": \"{FORMAT_TAG}\", \"version\": {VERSION}, ...}}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<File, A::Error> {
        let mut format: Option<String> = None;
        let mut version: Option<u64> = None;
        let mut name: Option<String> = None;
        let mut family: Option<String> = None;
        let mut params: Option<BTreeMap<String, serde_json::Value>> = None;
        let mut structure: Option<Structure> = None;
        let mut link_layer: Option<LinkLayer> = None;
        let mut port_buffer_bytes: Option<Option<u64>> = None;
        let mut nodes: Option<Vec<NodeRecord>> = None;
        let mut links: Option<Links> = None;
        // Duplicate keys are an error: silently keeping one of two "links" arrays would
        // hide a broken file.
        fn once<T, E: de::Error>(slot: &Option<T>, key: &'static str) -> std::result::Result<(), E> {
            match slot {
                Some(_) => Err(E::duplicate_field(key)),
                None => Ok(()),
            }
        }
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => {
                    once(&format, "format")?;
                    let f: String = map.next_value()?;
                    if f != FORMAT_TAG {
                        return Err(de::Error::custom(format!(
                            "\"format\" is {:?}, expected {FORMAT_TAG:?} (not a netweave topology file)",
                            super::snippet(&f)
                        )));
                    }
                    format = Some(f);
                }
                "version" => {
                    once(&version, "version")?;
                    let v: u64 = map.next_value()?;
                    if v != VERSION {
                        return Err(de::Error::custom(format!(
                            "unsupported netweave topology version {v} (this netweave reads version {VERSION})"
                        )));
                    }
                    version = Some(v);
                }
                "name" => {
                    once(&name, "name")?;
                    name = Some(map.next_value()?);
                }
                "family" => {
                    once(&family, "family")?;
                    family = Some(map.next_value()?);
                }
                "params" => {
                    once(&params, "params")?;
                    params = Some(map.next_value()?);
                }
                "structure" => {
                    once(&structure, "structure")?;
                    let s: Structure = map.next_value()?;
                    if let Structure::Malformed { .. } = s {
                        return Err(de::Error::custom("\"structure\" may not be \"malformed\""));
                    }
                    structure = Some(s);
                }
                "link_layer" => {
                    once(&link_layer, "link_layer")?;
                    link_layer = Some(map.next_value()?);
                }
                "port_buffer_bytes" => {
                    once(&port_buffer_bytes, "port_buffer_bytes")?;
                    port_buffer_bytes = Some(map.next_value()?);
                }
                "nodes" => {
                    once(&nodes, "nodes")?;
                    let n: Vec<NodeRecord> = map.next_value()?;
                    let total: u64 = n.iter().map(|r| r.ports as u64).sum();
                    if total > super::MAX_TOTAL_PORTS {
                        return Err(de::Error::custom(format!(
                            "the nodes declare {total} ports, more than the {} this reader accepts",
                            super::MAX_TOTAL_PORTS
                        )));
                    }
                    nodes = Some(n);
                }
                "links" => {
                    once(&links, "links")?;
                    links = Some(match &nodes {
                        Some(n) => Links::Checked(map.next_value_seed(LinksSeed { checker: LinkChecker::new(n) })?),
                        None => Links::Unchecked(map.next_value()?),
                    });
                }
                other => return Err(de::Error::unknown_field(other, FIELDS)),
            }
        }
        if format.is_none() {
            return Err(de::Error::missing_field("format"));
        }
        if version.is_none() {
            return Err(de::Error::missing_field("version"));
        }
        Ok(File {
            name: name.ok_or_else(|| de::Error::missing_field("name"))?,
            family: family.ok_or_else(|| de::Error::missing_field("family"))?,
            // An empty parameter map is the common case for hand-written files.
            params: params.unwrap_or_default(),
            structure,
            link_layer,
            port_buffer_bytes: port_buffer_bytes.flatten(),
            nodes: nodes.ok_or_else(|| de::Error::missing_field("nodes"))?,
            links: links.ok_or_else(|| de::Error::missing_field("links"))?,
        })
    }
}

/// Checks links against the node table: range, ports, self-links, port reuse, spec.
struct LinkChecker<'a> {
    nodes: &'a [NodeRecord],
    used: HashSet<(NodeId, Port)>,
}

impl<'a> LinkChecker<'a> {
    fn new(nodes: &'a [NodeRecord]) -> Self {
        LinkChecker { nodes, used: HashSet::new() }
    }

    fn check(&mut self, l: &LinkRecord) -> std::result::Result<(), String> {
        for (end, (node, port)) in [("a", l.a), ("b", l.b)] {
            let Some(n) = self.nodes.get(node as usize) else {
                return Err(format!(
                    "link end {end:?} names node {node}, but there are only {} nodes",
                    self.nodes.len()
                ));
            };
            if port == 0 || port > n.ports {
                return Err(format!(
                    "link end {end:?} uses port {port} of node {node} ({:?}), which has ports 1..{}",
                    super::snippet(&n.label),
                    n.ports
                ));
            }
        }
        if l.a.0 == l.b.0 {
            return Err(format!("link connects node {} to itself", l.a.0));
        }
        for (node, port) in [l.a, l.b] {
            if !self.used.insert((node, port)) {
                return Err(format!("port {port} of node {node} is used by two links"));
            }
        }
        LinkSpec::new(l.bandwidth_gbps, l.latency_ns).map(|_| ()).map_err(|e| e.to_string())
    }
}

struct LinksSeed<'a> {
    checker: LinkChecker<'a>,
}

impl<'de, 'a> DeserializeSeed<'de> for LinksSeed<'a> {
    type Value = Vec<LinkRecord>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Vec<LinkRecord>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, 'a> Visitor<'de> for LinksSeed<'a> {
    type Value = Vec<LinkRecord>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of links {\"a\": [node, port], \"b\": [node, port], \"bandwidth_gbps\", \"latency_ns\"}")
    }

    fn visit_seq<S: SeqAccess<'de>>(mut self, mut seq: S) -> std::result::Result<Self::Value, S::Error> {
        let mut out = Vec::new();
        while let Some(l) = seq.next_element_seed(LinkSeed { checker: &mut self.checker, index: out.len() })? {
            out.push(l);
        }
        Ok(out)
    }
}

/// One link, checked inside its own object so that serde_json stamps a failed check with
/// the position of the link's closing brace — its line in files we write — rather than
/// the end of the array.
struct LinkSeed<'c, 'a> {
    checker: &'c mut LinkChecker<'a>,
    index: usize,
}

impl<'de> DeserializeSeed<'de> for LinkSeed<'_, '_> {
    type Value = LinkRecord;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<LinkRecord, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LinkSeed<'_, '_> {
    type Value = LinkRecord;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a link {\"a\": [node, port], \"b\": [node, port], \"bandwidth_gbps\", \"latency_ns\"}")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<LinkRecord, A::Error> {
        let l = LinkRecord::deserialize(de::value::MapAccessDeserializer::new(map))?;
        self.checker.check(&l).map_err(|m| de::Error::custom(format!("links[{}]: {m}", self.index)))?;
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::LinkSpec;

    fn sample() -> Topology {
        let mut b = TopologyBuilder::new("sample \"quoted\"\nname");
        b.family("torus").param("dims", vec![2, 1]).param("wrap", true);
        let s0 = b.add_switch("s0", 4);
        let s1 = b.add_switch("s1", 4);
        b.set_coords(s0, vec![0, 0]);
        b.set_coords(s1, vec![1, -3]);
        let h = b.add_host_with_ports("h ü", 2);
        b.connect_ports(s0, 2, s1, 3, LinkSpec::new(56.0, 12.5).unwrap());
        b.connect_ports(h, 2, s0, 1, LinkSpec::new(0.1, 0.0).unwrap());
        b.connect_ports(h, 1, s1, 4, LinkSpec::default());
        b.build().unwrap()
    }

    fn assert_same(a: &Topology, b: &Topology) {
        assert_eq!(a.name(), b.name());
        assert_eq!(a.family(), b.family());
        assert_eq!(a.params(), b.params());
        assert_eq!(a.num_nodes(), b.num_nodes());
        for n in 0..a.num_nodes() as NodeId {
            assert_eq!(
                (a.kind(n), a.label(n), a.radix(n), a.coords(n)),
                (b.kind(n), b.label(n), b.radix(n), b.coords(n))
            );
        }
        assert_eq!(a.links(), b.links());
    }

    #[test]
    fn round_trip_is_exact_and_deterministic() {
        let t = sample();
        let text = write(&t).unwrap();
        let back = read(&text).unwrap();
        assert_same(&t, &back);
        assert_eq!(write(&back).unwrap(), text);
    }

    #[test]
    fn one_node_or_link_per_line() {
        let text = write(&sample()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "  \"format\": \"netweave-topology\",");
        assert_eq!(lines.iter().filter(|l| l.trim_start().starts_with("{\"kind\"")).count(), 3);
        assert_eq!(lines.iter().filter(|l| l.trim_start().starts_with("{\"a\"")).count(), 3);
    }

    #[test]
    fn empty_topology_round_trips() {
        let t = TopologyBuilder::new("empty").build().unwrap();
        let text = write(&t).unwrap();
        assert!(text.contains("\"nodes\": [],"), "{text}");
        assert_same(&t, &read(&text).unwrap());
    }

    fn err(text: &str) -> String {
        let e = read(text).unwrap_err();
        assert!(matches!(e, NetweaveError::Parse { format: "json", .. }), "{e:?}");
        let s = e.to_string();
        assert!(!s.contains('\n'), "{s}");
        s
    }

    const HEAD: &str = "{\"format\":\"netweave-topology\",\"version\":1,\"name\":\"x\",\"family\":\"f\",";

    #[test]
    fn rejects_wrong_tag_and_version() {
        let e = err("{\"format\": \"something-else\", \"version\": 1}");
        assert!(e.contains("not a netweave topology") && e.contains("line 1"), "{e}");
        let e = err("{\"format\": \"netweave-topology\",\n \"version\": 2}");
        assert!(e.contains("unsupported netweave topology version 2") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn rejects_missing_unknown_and_mistyped_fields() {
        assert!(err("{\"format\":\"netweave-topology\",\"version\":1}").contains("missing field `name`"));
        let e = err(&format!("{HEAD}\"nodes\":[],\"links\":[],\"extra\":1}}"));
        assert!(e.contains("unknown field `extra`"), "{e}");
        let e = err(&format!("{HEAD}\"nodes\":[{{\"kind\":\"router\",\"label\":\"r\",\"ports\":1}}],\"links\":[]}}"));
        assert!(e.contains("unknown variant `router`"), "{e}");
        let e = err(&format!("{HEAD}\"nodes\":[{{\"kind\":\"host\",\"label\":\"r\",\"ports\":-1}}],\"links\":[]}}"));
        assert!(e.contains("invalid value"), "{e}");
        let e = err(&format!(
            "{HEAD}\"nodes\":[{{\"kind\":\"host\",\"label\":\"r\",\"ports\":1,\"colour\":1}}],\"links\":[]}}"
        ));
        assert!(e.contains("unknown field `colour`"), "{e}");
        let e = err(&format!("{HEAD}\"nodes\":[],\"nodes\":[],\"links\":[]}}"));
        assert!(e.contains("duplicate field `nodes`"), "{e}");
        assert!(err("").contains("EOF"));
        assert!(err("[1,2]").contains("invalid type"));
        assert!(err(&format!("{HEAD}\"nodes\":[],\"links\":[]}} trailing")).contains("trailing"));
    }

    #[test]
    fn rejects_bad_links_with_their_line() {
        let nodes = "\"nodes\":[\n{\"kind\":\"switch\",\"label\":\"s\",\"ports\":2},\n{\"kind\":\"host\",\"label\":\"h\",\"ports\":2}\n],\n";
        let link = |l: &str| {
            format!("{HEAD}\n{nodes}\"links\":[\n{{\"a\":[1,1],\"b\":[0,1],\"bandwidth_gbps\":1,\"latency_ns\":0}},\n{l}\n]}}")
        };
        let cases = [
            ("{\"a\":[5,1],\"b\":[0,2],\"bandwidth_gbps\":1,\"latency_ns\":0}", "names node 5"),
            ("{\"a\":[0,3],\"b\":[1,2],\"bandwidth_gbps\":1,\"latency_ns\":0}", "uses port 3"),
            ("{\"a\":[0,0],\"b\":[1,2],\"bandwidth_gbps\":1,\"latency_ns\":0}", "uses port 0"),
            ("{\"a\":[0,2],\"b\":[1,1],\"bandwidth_gbps\":1,\"latency_ns\":0}", "used by two links"),
            ("{\"a\":[0,2],\"b\":[0,1],\"bandwidth_gbps\":1,\"latency_ns\":0}", "to itself"),
            ("{\"a\":[0,2],\"b\":[1,2],\"bandwidth_gbps\":0,\"latency_ns\":0}", "bandwidth"),
            ("{\"a\":[0,2],\"b\":[1,2],\"bandwidth_gbps\":1,\"latency_ns\":-1}", "latency"),
            ("{\"a\":[0,2,1],\"b\":[1,1],\"bandwidth_gbps\":1,\"latency_ns\":0}", "trailing"),
            ("{\"a\":[0,2],\"b\":[1,1],\"bandwidth_gbps\":1}", "missing field `latency_ns`"),
        ];
        for (l, want) in cases {
            let e = err(&link(l));
            assert!(e.contains(want), "{want}: {e}");
            assert!(e.contains("line 8"), "{want}: {e}");
        }
    }

    #[test]
    fn links_before_nodes_are_checked_afterwards() {
        let ok = "{\"links\":[{\"a\":[0,1],\"b\":[1,1],\"bandwidth_gbps\":1,\"latency_ns\":0}],\"nodes\":[{\"kind\":\"host\",\"label\":\"a\",\"ports\":1},{\"kind\":\"host\",\"label\":\"b\",\"ports\":1}],\"format\":\"netweave-topology\",\"version\":1,\"name\":\"n\",\"family\":\"f\"}";
        let t = read(ok).unwrap();
        assert_eq!(t.num_links(), 1);
        let bad = ok.replace("\"b\":[1,1]", "\"b\":[2,1]");
        let e = err(&bad);
        assert!(e.contains("links[0]") && e.contains("names node 2"), "{e}");
    }

    #[test]
    fn huge_port_counts_are_refused() {
        let nodes: Vec<String> =
            (0..1100).map(|i| format!("{{\"kind\":\"switch\",\"label\":\"{i}\",\"ports\":65535}}")).collect();
        let e = err(&format!("{HEAD}\"nodes\":[{}],\"links\":[]}}", nodes.join(",")));
        assert!(e.contains("ports"), "{e}");
    }
}
