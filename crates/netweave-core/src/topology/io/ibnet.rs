//! InfiniBand `ibnetdiscover` output and ibsim `net` files (one grammar, two dialects).
//!
//! ```text
//! Switch  8 "sw0"  # "leaf switch 0"
//! [1]  "h0"[1]  # lid 0 4xEDR
//! [3]  "sw1"[3]  # lid 0 4xEDR
//!
//! Hca  1 "h0"  # "host 0"
//! [1]  "sw0"[1]  # lid 0 4xEDR
//! ```
//!
//! (The writer separates fields with tabs, as ibnetdiscover does; any blanks are accepted.)
//!
//! A record is a header — `Switch`/`Rt` (router, read as a switch) or `Ca`/`Hca`, the port
//! count, a quoted unique node id, optionally `# "description"` — followed by one line per
//! connected port, `[port] "peer id"[peer port]`, and ends at a blank line. Every link is
//! listed from both ends.
//!
//! **Reading** accepts real `ibnetdiscover` output (`vendid=`/`caguid=`/… lines are ignored,
//! port GUIDs in `(…)` are skipped, `# …` comments are ignored) and hand-written ibsim files
//! (`[1] "peer"` without a peer port means port 1, as in ibsim; `w=`/`s=` options are
//! ignored). A node's label is its description when it has a non-empty one, else its quoted
//! id. Both listings of a link become one link; a link listed from one side only is accepted.
//! Contradicting listings (`A[1]` says `B[2]`, `B[2]` says `C[1]`), a port listed twice,
//! unknown peers, ports beyond the header's count, ibsim aliases (`@`) and `include`/`do`
//! directives are errors. The link rate (`4xEDR`, `1xQDR`, …) printed after a port's comment
//! gives its bandwidth (lanes × per-lane rate: SDR 2.5, DDR 5, QDR/FDR10 10, FDR 14, EDR 25,
//! HDR 50, NDR 100, XDR 200 Gbit/s); without one the bandwidth is
//! [`LinkSpec::default`]'s. The format has no latency: links get the default latency.
//! The topology is named `"ibnet"`, family `"file"`.
//!
//! **Writing** produces an ibsim net file that the real `ibsim -s FILE` loads (checked
//! against ibsim's parser, `ibsim/sim_net.c`) and this reader round-trips:
//! - nodes in id order, so the first node (where ibsim attaches clients by default) is
//!   node 0; each record ends with a blank line because ibsim consumes the line that ends
//!   a record;
//! - node ids are labels reduced to `[A-Za-z0-9._-]`, at most 48 bytes, made unique with a
//!   `-n<node>` suffix (ibsim ids are at most 64 bytes and reserve `#` and `@`);
//! - the label goes in the header's `# "label"` comment, which ibsim turns into the node
//!   description that `ibnetdiscover` reports: `"` becomes `'`, control characters become
//!   spaces and it is cut to 63 bytes (the size of ibsim's node description); an empty
//!   label is left out and then reads back as the node id;
//! - each port line ends in `# lid 0 <width>x<speed>`, the shape ibsim's parser takes a
//!   port's enabled width and speed from, so ibsim brings the link up at that rate and
//!   `ibnetdiscover` reports it. The bandwidth is written as the IB rate equal to it
//!   (see [`ib_rate`]: 4 lanes preferred, NDR only when nothing else fits because ibsim
//!   before 0.11 does not know it), or the nearest one on a log scale if there is none, so
//!   only IB rates (lanes 1/2/4/8/12 × SDR…NDR) survive exactly. Port lines carry nothing
//!   else — no peer description as ibnetdiscover prints — because ibsim takes any `=`
//!   after the peer for a `w=`/`s=`/`e=` option;
//! - every line stays under 256 bytes, the size of ibsim's line buffer (it would split a
//!   longer one and misread the rest);
//! - ibsim's limits are errors: 1..=254 ports per node, and the node, switch and port
//!   totals of [`IbsimLimits`] (ibsim's defaults unless [`write_with_limits`] raises them —
//!   then start ibsim with `-N`/`-S`/`-P` as the file's header comment says).
//!
//! A round trip therefore keeps node order, kinds, labels (within the above), port counts
//! and every link with its ports; link order may change, latency and non-IB bandwidths do
//! not survive, nor do the topology's name, family, parameters and coordinates.

use std::collections::{HashMap, HashSet};

use super::{check_total_ports, finish, parse_error, snippet};
use crate::error::Result;
use crate::topology::{LinkSpec, NodeId, NodeKind, Port, Topology, TopologyBuilder};

const FMT: &str = "ibnet";

/// Most ports a node may have in ibsim: NodeInfo's port count is 8 bits and 255 marks an
/// unused entry in a switch's forwarding table.
pub const MAX_PORTS_PER_NODE: Port = 254;
/// Longest node description ibsim keeps (its buffer is 64 bytes with the terminator).
pub const MAX_DESCRIPTION_BYTES: usize = 63;
/// Longest node id the writer produces before a uniqueness suffix; ibsim allows 64 bytes.
const MAX_ID_BASE_BYTES: usize = 48;

/// Size limits of an ibsim instance: `-N` nodes, `-S` switches, `-P` ports (a switch counts
/// its ports plus its management port 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IbsimLimits {
    /// Most nodes, hosts and switches together (`ibsim -N`).
    pub max_nodes: usize,
    /// Most switches (`ibsim -S`).
    pub max_switches: usize,
    /// Most ports in total (`ibsim -P`).
    pub max_ports: usize,
}

impl IbsimLimits {
    /// ibsim's built-in defaults (`MAXNETNODES`, `MAXNETSWITCHS`, `MAXNETPORTS` in `sim.h`).
    pub const IBSIM_DEFAULT: IbsimLimits =
        IbsimLimits { max_nodes: 2048, max_switches: 256, max_ports: 256 * 36 + 2048 * 2 };
    /// No count limits (per-node port limits still apply): for files that will be loaded
    /// with raised `-N`/`-S`/`-P`, or by other tools.
    pub const UNLIMITED: IbsimLimits =
        IbsimLimits { max_nodes: usize::MAX, max_switches: usize::MAX, max_ports: usize::MAX };

    /// The smallest limits `topo` fits in: what to pass to `ibsim -N -S -P`.
    pub fn needed(topo: &Topology) -> IbsimLimits {
        let ports =
            (0..topo.num_nodes() as NodeId).map(|n| topo.radix(n) as usize + usize::from(!topo.is_host(n))).sum();
        IbsimLimits { max_nodes: topo.num_nodes(), max_switches: topo.num_switches(), max_ports: ports }
    }
}

impl Default for IbsimLimits {
    /// [`IbsimLimits::IBSIM_DEFAULT`].
    fn default() -> Self {
        IbsimLimits::IBSIM_DEFAULT
    }
}

/// Per-lane data rates in Gbit/s by IB speed name, as `ibnetdiscover` prints them.
/// FDR10 must come before FDR only for readability; lookups are by exact name.
const LANE_GBPS: &[(&str, f64)] = &[
    ("SDR", 2.5),
    ("DDR", 5.0),
    ("QDR", 10.0),
    ("FDR10", 10.0),
    ("FDR", 14.0),
    ("EDR", 25.0),
    ("HDR", 50.0),
    ("NDR", 100.0),
    ("XDR", 200.0),
];
/// Link widths ibsim understands, in the order the writer prefers them (4x is the norm).
const WIDTHS: [u8; 5] = [4, 1, 2, 8, 12];
/// Speeds the writer may emit, NDR last: ibsim only knows NDR from 0.11 on (older ones fall
/// back to SDR), so it is used only when no other rate fits as well. FDR10 duplicates QDR's
/// rate and XDR is unknown to ibsim.
const WRITE_SPEEDS: [&str; 7] = ["SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR"];

/// Bandwidth in Gbit/s of an IB rate string like `"4xEDR"` (lanes × per-lane rate), or
/// `None` if it is not one.
pub fn rate_gbps(rate: &str) -> Option<f64> {
    let (width, speed) = rate.split_once('x')?;
    if width.is_empty() || width.len() > 2 || !width.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let width: u32 = width.parse().ok()?;
    if width == 0 {
        return None;
    }
    LANE_GBPS.iter().find(|(name, _)| *name == speed).map(|(_, g)| width as f64 * g)
}

/// The IB rate (lane count, speed name) the writer uses for `bandwidth_gbps`: an exact
/// match if one exists, else the nearest on a log scale. Among equals, 4 lanes come first
/// and NDR last (ibsim before 0.11 lacks it): 100 → 4xEDR, 400 → 8xHDR, 800 → 8xNDR.
pub fn ib_rate(bandwidth_gbps: f64) -> (u8, &'static str) {
    let (older, ndr) = WRITE_SPEEDS.split_at(WRITE_SPEEDS.len() - 1);
    let candidates = WIDTHS
        .iter()
        .flat_map(|&w| older.iter().map(move |&s| (w, s)))
        .chain(WIDTHS.iter().flat_map(|&w| ndr.iter().map(move |&s| (w, s))));
    let mut best = (4, "SDR");
    let mut best_dist = f64::INFINITY;
    for (w, s) in candidates {
        let lane = LANE_GBPS.iter().find(|(n, _)| *n == s).map_or(1.0, |(_, g)| *g);
        let dist = (w as f64 * lane / bandwidth_gbps).ln().abs();
        // Strictly smaller keeps the preferred encoding among equals; exact matches have
        // a distance within rounding of zero.
        if dist + 1e-12 < best_dist {
            best = (w, s);
            best_dist = dist;
        }
    }
    best
}

// ---------------------------------------------------------------------------------------
// Writing

/// Write `topo` as an ibsim net file of any size; the header comment names the `ibsim -N -S -P`
/// limits it needs when they exceed ibsim's defaults. See the module docs.
pub fn write(topo: &Topology) -> Result<String> {
    write_with_limits(topo, &IbsimLimits::UNLIMITED)
}

/// Write `topo` as an ibsim net file, checking node/switch/port totals against `limits`.
pub fn write_with_limits(topo: &Topology, limits: &IbsimLimits) -> Result<String> {
    for n in 0..topo.num_nodes() as NodeId {
        let r = topo.radix(n);
        if r == 0 || r > MAX_PORTS_PER_NODE {
            return crate::invalid!(
                "cannot write ibnet: node {n} ({:?}) has {r} ports, ibsim needs 1..={MAX_PORTS_PER_NODE}",
                snippet(topo.label(n))
            );
        }
    }
    let need = IbsimLimits::needed(topo);
    for (what, has, max, flag) in [
        ("nodes", need.max_nodes, limits.max_nodes, "-N"),
        ("switches", need.max_switches, limits.max_switches, "-S"),
        ("ports", need.max_ports, limits.max_ports, "-P"),
    ] {
        if has > max {
            return crate::invalid!(
                "cannot write ibnet: the topology has {has} {what}, more than the {max} ibsim allows \
                 (ibsim's {flag} option raises it; write with raised limits and run `ibsim {flag} {has}`)"
            );
        }
    }
    let ids = node_ids(topo);
    let mut out = String::with_capacity(64 * (topo.num_nodes() + 2 * topo.num_links()) + 256);
    // ibsim reads lines into a 256-byte buffer and would split a longer one, so the free
    // text in comments is kept short.
    out.push_str(&format!(
        "# netweave topology \"{}\" (family {}): {} switches, {} hosts, {} links\n",
        comment_text(topo.name(), 80),
        comment_text(topo.family(), 40),
        topo.num_switches(),
        topo.num_hosts(),
        topo.num_links()
    ));
    out.push_str(&format!(
        "# ibsim net format; load with: ibsim -s -N {} -S {} -P {} FILE (or larger)\n\n",
        need.max_nodes.max(1),
        need.max_switches.max(1),
        need.max_ports.max(1)
    ));
    for n in 0..topo.num_nodes() as NodeId {
        let keyword = if topo.is_host(n) { "Hca" } else { "Switch" };
        out.push_str(&format!("{keyword}\t{} \"{}\"", topo.radix(n), ids[n as usize]));
        let desc = comment_text(topo.label(n), MAX_DESCRIPTION_BYTES).replace('"', "'");
        if !desc.is_empty() {
            out.push_str(&format!("\t# \"{desc}\""));
        }
        out.push('\n');
        for a in topo.neighbors(n) {
            let spec = topo.link(a.channel / 2).spec;
            let (w, s) = ib_rate(spec.bandwidth_gbps);
            out.push_str(&format!(
                "[{}]\t\"{}\"[{}]\t# lid 0 {w}x{s}\n",
                a.port, ids[a.neighbor as usize], a.neighbor_port
            ));
        }
        out.push('\n');
    }
    Ok(out)
}

/// `s` with control characters as spaces, cut to at most `max` bytes on a char boundary.
fn comment_text(s: &str, max: usize) -> String {
    let mut out = String::new();
    for c in s.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    out
}

/// Unique ibsim node ids derived from labels (see the module docs).
fn node_ids(topo: &Topology) -> Vec<String> {
    let mut taken = HashSet::with_capacity(topo.num_nodes());
    let mut ids = Vec::with_capacity(topo.num_nodes());
    for n in 0..topo.num_nodes() as NodeId {
        let mut base: String = topo
            .label(n)
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
            .take(MAX_ID_BASE_BYTES)
            .collect();
        if base.is_empty() {
            base = format!("{}{n}", if topo.is_host(n) { "H" } else { "S" });
        }
        let mut id = base.clone();
        let mut k = 0u64;
        while taken.contains(&id) {
            id = if k == 0 { format!("{base}-n{n}") } else { format!("{base}-n{n}-{k}") };
            k += 1;
        }
        taken.insert(id.clone());
        ids.push(id);
    }
    ids
}

// ---------------------------------------------------------------------------------------
// Reading

/// A node header as read.
struct NodeDecl<'a> {
    kind: NodeKind,
    id: &'a str,
    desc: Option<&'a str>,
    ports: Port,
    line: usize,
}

/// A port line as read, belonging to node `node` (index into the declarations).
struct PortDecl<'a> {
    node: usize,
    port: Port,
    peer: &'a str,
    peer_port: Port,
    rate: Option<f64>,
    line: usize,
}

/// Parse `ibnetdiscover` output or an ibsim net file. See the module docs.
pub fn read(text: &str) -> Result<Topology> {
    let (nodes, ports) = scan(text)?;

    let mut index: HashMap<&str, usize> = HashMap::with_capacity(nodes.len());
    let mut total_ports = 0u64;
    for (i, d) in nodes.iter().enumerate() {
        if let Some(&first) = index.get(d.id) {
            return Err(parse_error(
                FMT,
                d.line,
                format!("node id {:?} is declared twice (first at line {})", snippet(d.id), nodes[first].line),
            ));
        }
        index.insert(d.id, i);
        total_ports += d.ports as u64;
        check_total_ports(FMT, d.line, total_ports)?;
    }

    // Resolve every port line to (node, port) → (peer node, peer port).
    type End = (usize, Port);
    let mut claims: HashMap<End, (End, usize)> = HashMap::with_capacity(ports.len());
    let mut resolved: Vec<(End, End, Option<f64>, usize)> = Vec::with_capacity(ports.len());
    for p in &ports {
        let d = &nodes[p.node];
        let name = |i: usize| snippet(nodes[i].id);
        if p.port == 0 || p.port > d.ports {
            return Err(parse_error(
                FMT,
                p.line,
                format!("port {} of {:?} is out of range: the node has ports 1..{}", p.port, name(p.node), d.ports),
            ));
        }
        let Some(&peer) = index.get(p.peer) else {
            return Err(parse_error(
                FMT,
                p.line,
                format!("unknown peer node {:?} (no Switch/Ca record declares it)", snippet(p.peer)),
            ));
        };
        if p.peer_port == 0 || p.peer_port > nodes[peer].ports {
            return Err(parse_error(
                FMT,
                p.line,
                format!(
                    "peer port {} of {:?} is out of range: that node has ports 1..{}",
                    p.peer_port,
                    name(peer),
                    nodes[peer].ports
                ),
            ));
        }
        if peer == p.node {
            return Err(parse_error(
                FMT,
                p.line,
                format!("port {} of {:?} is linked to the node itself", p.port, name(peer)),
            ));
        }
        let (me, them) = ((p.node, p.port), (peer, p.peer_port));
        if let Some((_, first)) = claims.insert(me, (them, p.line)) {
            return Err(parse_error(
                FMT,
                p.line,
                format!("port {} of {:?} is listed twice (first at line {first})", p.port, name(p.node)),
            ));
        }
        resolved.push((me, them, p.rate, p.line));
    }

    // Pair up the two listings of each link, in order of first appearance.
    let mut builder = TopologyBuilder::new("ibnet");
    builder.family("file").param("format", FMT);
    for d in &nodes {
        let label = d.desc.unwrap_or(d.id);
        builder.add_node(d.kind, label.to_string(), d.ports);
    }
    let mut used: HashMap<End, usize> = HashMap::with_capacity(resolved.len());
    for &(me, them, rate, line) in &resolved {
        let show = |e: End| format!("{:?}[{}]", snippet(nodes[e.0].id), e.1);
        if let Some(&(back, other_line)) = claims.get(&them) {
            if back != me {
                return Err(parse_error(
                    FMT,
                    line,
                    format!(
                        "inconsistent links: {} is linked to {} here, but line {other_line} links {} to {}",
                        show(me),
                        show(them),
                        show(them),
                        show(back)
                    ),
                ));
            }
            // Listed from both ends: the link was built at the earlier of the two lines.
            if other_line < line {
                continue;
            }
        }
        for e in [me, them] {
            if let Some(&first) = used.get(&e) {
                return Err(parse_error(FMT, line, format!("{} is linked twice (also at line {first})", show(e))));
            }
        }
        used.insert(me, line);
        used.insert(them, line);
        let spec =
            LinkSpec { bandwidth_gbps: rate.unwrap_or(LinkSpec::default().bandwidth_gbps), ..LinkSpec::default() };
        builder.connect_ports(me.0 as NodeId, me.1, them.0 as NodeId, them.1, spec);
    }
    finish(builder, FMT)
}

/// Directive keywords of ibsim and ibnetdiscover that carry nothing netweave models.
const DIRECTIVES: &[&str] = &[
    "vendid",
    "devid",
    "sysimgguid",
    "switchguid",
    "caguid",
    "hcaguids",
    "rtguid",
    "width",
    "speed",
    "extspeed",
    "module",
    "pdebug",
];

/// First pass: classify lines into node headers and port lines.
fn scan(text: &str) -> Result<(Vec<NodeDecl<'_>>, Vec<PortDecl<'_>>)> {
    let mut nodes = Vec::new();
    let mut ports = Vec::new();
    // Record the port lines belong to; ended by a blank or any non-port line as in ibsim.
    let mut current: Option<usize> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let t = raw.trim();
        if t.is_empty() {
            current = None;
            continue;
        }
        if t.starts_with('#') {
            continue;
        }
        if t.starts_with('[') {
            let Some(node) = current else {
                return Err(parse_error(
                    FMT,
                    line,
                    "port line outside a node record (a record is a Switch/Ca/Hca/Rt header and the port lines right after it)",
                ));
            };
            ports.push(parse_port(t, node, line)?);
            continue;
        }
        if t.starts_with('@') {
            return Err(parse_error(FMT, line, "ibsim port aliases ('@') are not supported"));
        }
        current = None;
        // Header keywords are letters only: ibsim reads the port count right after the
        // keyword, so "Switch8 ..." is a header too. Directive names may hold digits and '_'.
        let alpha_len = t.bytes().take_while(u8::is_ascii_alphabetic).count();
        let word_len = t.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count();
        let word = &t[..word_len];
        let after = t[word_len..].trim_start();
        let kind = match word_head(&t[..alpha_len]) {
            Some(k) => k,
            None if DIRECTIVES.contains(&word) || (!word.is_empty() && after.starts_with('=')) => continue,
            None if word == "include" || word == "do" => {
                return Err(parse_error(FMT, line, format!("the ibsim {word:?} directive is not supported")))
            }
            None => {
                return Err(parse_error(
                    FMT,
                    line,
                    format!(
                        "unrecognised line {:?} (expected a Switch/Ca/Hca/Rt header, a [port] line, key=value or a # comment)",
                        snippet(t)
                    ),
                ))
            }
        };
        nodes.push(parse_header(t, alpha_len, kind, line)?);
        current = Some(nodes.len() - 1);
    }
    Ok((nodes, ports))
}

/// Node kind for a header keyword: routers are modelled as switches.
fn word_head(word: &str) -> Option<NodeKind> {
    match word {
        "Switch" | "Rt" => Some(NodeKind::Switch),
        "Ca" | "Hca" => Some(NodeKind::Host),
        _ => None,
    }
}

/// A byte cursor over one line; only ever stops on ASCII bytes, so slices stay on char
/// boundaries.
struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        if hit {
            self.i += 1;
        }
        hit
    }
    fn digits(&mut self) -> &'a str {
        let start = self.i;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
        &self.s[start..self.i]
    }
    /// A `"…"` string (no escapes, as in ibsim).
    fn quoted(&mut self) -> Option<&'a str> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let body = &self.s[self.i + 1..];
        let end = body.find('"')?;
        self.i += end + 2;
        Some(&body[..end])
    }
    /// Skip an optional `(guid)`.
    fn guid(&mut self) {
        if self.peek() == Some(b'(') {
            match self.s[self.i..].find(')') {
                Some(j) => self.i += j + 1,
                None => self.i = self.s.len(),
            }
        }
    }
    fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }
}

fn port_number(digits: &str, what: &str, line: usize) -> Result<Port> {
    if digits.is_empty() {
        return Err(parse_error(FMT, line, format!("expected a {what} number")));
    }
    digits.parse::<Port>().map_err(|_| {
        parse_error(FMT, line, format!("{what} number {} is too large (at most {})", snippet(digits), Port::MAX))
    })
}

/// `Switch 24 "S-0008f10400411f56" # "desc" enhanced port 0 lid 6 lmc 0`.
fn parse_header(t: &str, keyword_len: usize, kind: NodeKind, line: usize) -> Result<NodeDecl<'_>> {
    let mut c = Cursor { s: t, i: keyword_len };
    c.ws();
    let ports = port_number(c.digits(), "port count", line)?;
    if ports == 0 {
        return Err(parse_error(FMT, line, "a node needs at least one port"));
    }
    c.ws();
    let id = c.quoted().ok_or_else(|| parse_error(FMT, line, "expected a quoted node id after the port count"))?;
    if id.is_empty() {
        return Err(parse_error(FMT, line, "empty node id"));
    }
    Ok(NodeDecl { kind, id, desc: description(c.rest()), ports, line })
}

/// The node description in a header's trailing comment: `# "desc" ...`, or unquoted text
/// up to ibnetdiscover's ` enhanced port `/` base port `/` lid `/` lmc ` fields (as ibsim
/// reads it). Empty descriptions count as absent.
fn description(rest: &str) -> Option<&str> {
    let after = rest[rest.find('#')? + 1..].trim_start();
    let desc = if let Some(q) = after.strip_prefix('"') {
        q.find('"').map_or(q, |e| &q[..e])
    } else {
        let end = [" enhanced port ", " base port ", " lid ", " lmc "]
            .iter()
            .filter_map(|m| after.find(m))
            .min()
            .unwrap_or(after.len());
        after[..end].trim_end()
    };
    (!desc.is_empty()).then_some(desc)
}

/// `[1](guid) "peer"[2](guid) ... # ... lid 4 4xSDR`.
fn parse_port(t: &str, node: usize, line: usize) -> Result<PortDecl<'_>> {
    let mut c = Cursor { s: t, i: 0 };
    c.eat(b'[');
    let port = port_number(c.digits(), "port", line)?;
    if !c.eat(b']') {
        return Err(parse_error(FMT, line, "expected ']' after the port number"));
    }
    c.guid();
    c.ws();
    let peer = c.quoted().ok_or_else(|| parse_error(FMT, line, "expected the quoted id of the peer node"))?;
    if peer.contains('@') {
        return Err(parse_error(FMT, line, "ibsim port aliases ('@') are not supported"));
    }
    let peer_port = if c.eat(b'[') {
        let p = port_number(c.digits(), "peer port", line)?;
        if !c.eat(b']') {
            return Err(parse_error(FMT, line, "expected ']' after the peer port number"));
        }
        p
    } else {
        1 // ibsim's default when the peer port is omitted
    };
    c.guid();
    Ok(PortDecl { node, port, peer, peer_port, rate: link_rate(c.rest(), line)?, line })
}

/// Bandwidth from the rate token (`4xSDR`) in a port line's comment. Only the text after the
/// last quote is searched, as ibsim does, so a description containing "4xEDR" is not taken
/// for the rate. A token shaped like a rate with a speed this reader does not know
/// (`4xXYZ`) is an error: taking the default bandwidth instead would silently change the link.
fn link_rate(rest: &str, line: usize) -> Result<Option<f64>> {
    let Some(hash) = rest.find('#') else { return Ok(None) };
    let comment = &rest[hash + 1..];
    let tail = comment.rfind('"').map_or(comment, |q| &comment[q + 1..]);
    for token in tail.split_whitespace() {
        if let Some(gbps) = rate_gbps(token) {
            return Ok(Some(gbps));
        }
        if let Some((width, speed)) = token.split_once('x') {
            let rate_shaped = (1..=2).contains(&width.len())
                && width.bytes().all(|b| b.is_ascii_digit())
                && !speed.is_empty()
                && speed.bytes().all(|b| b.is_ascii_alphanumeric());
            if rate_shaped {
                let known: Vec<&str> = LANE_GBPS.iter().map(|(name, _)| *name).collect();
                return Err(parse_error(
                    FMT,
                    line,
                    format!("unknown link rate '{token}' (lanes x speed, speeds {})", known.join(" ")),
                ));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::NetweaveError;

    /// Our own text in the shape of ibsim's `net.2sw2path4hca` example: two switches joined by
    /// two parallel links, two hosts on each.
    pub(crate) const TWO_SWITCH: &str = "\
# two switches, two paths, four hosts
Switch\t8 \"Switch1\"
[1]\t\"Hca1\"[1]
[2]\t\"Hca3\"[1]
[3]\t\"Switch2\"[3]
[5]\t\"Switch2\"[5]

Switch 8 \"Switch2\"
[1]\t\"Hca2\"[1]
[2]\t\"Hca4\"[1]
[3]\t\"Switch1\"[3]
[5]\t\"Switch1\"[5]

Hca\t2 \"Hca1\"
[1]\t\"Switch1\"[1]

Hca\t2 \"Hca2\"
[1]\t\"Switch2\"[1]

Hca\t2 \"Hca3\"
[1]\t\"Switch1\"[2]

Hca \t2 \"Hca4\"
[1]\t\"Switch2\"[2]
";

    /// Real-style ibnetdiscover output (GUIDs, descriptions, lids, rates, a router).
    const DISCOVERED: &str = "\
#
# Topology file: generated on Tue Mar  3 10:11:12 2026
#
# Initiated from node 0008f10403961354 port 0008f10403961355

vendid=0x8f1
devid=0x5a5a
sysimgguid=0x8f10400411f56
switchguid=0x8f10400411f56(8f10400411f56)
Switch\t24 \"S-0008f10400411f56\"\t\t# \"ISR9024 Voltaire\" enhanced port 0 lid 6 lmc 0
[1]\t\"H-0008f10403961354\"[1](8f10403961355) \t\t# \"node01 HCA-1\" lid 4 4xSDR
[2]\t\"H-0008f10403961358\"[2](8f1040396135a) \t\t# \"node02 HCA-1\" lid 5 4xQDR
[24]\t\"R-0008f1040041aaaa\"[1]\t\t# \"gateway 4xEDR\" lid 9 4xEDR

vendid=0x2c9
devid=0x5a44
sysimgguid=0x8f10403961357
caguid=0x8f10403961354
Ca\t2 \"H-0008f10403961354\"\t\t# \"node01 HCA-1\"
[1](8f10403961355) \t\"S-0008f10400411f56\"[1]\t\t# lid 4 lmc 0 \"ISR9024 Voltaire\" lid 6 4xSDR

caguid=0x8f10403961358
Ca\t2 \"H-0008f10403961358\"\t\t# \"node02 HCA-1\"
[2](8f1040396135a) \t\"S-0008f10400411f56\"[2]\t\t# lid 5 lmc 0 \"ISR9024 Voltaire\" lid 6 4xQDR

rtguid=0x8f1040041aaaa
Rt\t2 \"R-0008f1040041aaaa\"\t\t# \"gateway 4xEDR\"
[1]\t\"S-0008f10400411f56\"[24]\t\t# lid 9 lmc 0 \"ISR9024 Voltaire\" lid 6 4xEDR
";

    fn err(text: &str) -> String {
        let e = read(text).unwrap_err();
        assert!(matches!(e, NetweaveError::Parse { format: "ibnet", .. }), "{e:?}");
        let s = e.to_string();
        assert!(!s.contains('\n'), "{s}");
        s
    }

    #[test]
    fn reads_ibsim_example_with_parallel_links() {
        let t = read(TWO_SWITCH).unwrap();
        assert_eq!((t.num_switches(), t.num_hosts(), t.num_links()), (2, 4, 6));
        let (s1, s2) = (t.find_label("Switch1").unwrap(), t.find_label("Switch2").unwrap());
        let between: Vec<_> =
            t.neighbors(s1).iter().filter(|a| a.neighbor == s2).map(|a| (a.port, a.neighbor_port)).collect();
        assert_eq!(between, vec![(3, 3), (5, 5)]);
        let h1 = t.find_label("Hca1").unwrap();
        assert_eq!((t.radix(h1), t.degree(h1)), (2, 1));
        assert_eq!(t.radix(s1), 8);
        assert_eq!(t.link(0).spec, LinkSpec::default());
    }

    #[test]
    fn reads_multiport_host_and_one_sided_listing() {
        // Like net.2sw2path4hca2port, but the host records list nothing: one-sided is fine.
        let text = "Switch 8 \"S\"\n[1] \"H\"[1]\n[2] \"H\"[2]\n\nHca 2 \"H\"\n";
        let t = read(text).unwrap();
        let h = t.find_label("H").unwrap();
        assert_eq!(t.degree(h), 2);
        // A peer port may be omitted: ibsim then means port 1.
        let t = read("Switch 8 \"S\"\n[4] \"H\"\n\nHca 1 \"H\"\n[1] \"S\"[4]\n").unwrap();
        assert_eq!(t.num_links(), 1);
    }

    #[test]
    fn reads_ibnetdiscover_output() {
        let t = read(DISCOVERED).unwrap();
        assert_eq!((t.num_switches(), t.num_hosts(), t.num_links()), (2, 2, 3));
        let sw = t.find_label("ISR9024 Voltaire").unwrap();
        assert_eq!(t.radix(sw), 24);
        let gw = t.find_label("gateway 4xEDR").unwrap();
        assert_eq!(t.kind(gw), NodeKind::Switch);
        let n2 = t.find_label("node02 HCA-1").unwrap();
        assert_eq!(t.neighbors(n2)[0].port, 2);
        let bw: Vec<f64> = t.links().iter().map(|l| l.spec.bandwidth_gbps).collect();
        assert_eq!(bw, vec![10.0, 40.0, 100.0]);
    }

    #[test]
    fn unquoted_and_missing_descriptions() {
        assert_eq!(description("\t# ISR9024 Voltaire enhanced port 0 lid 6 lmc 0"), Some("ISR9024 Voltaire"));
        assert_eq!(description(" # \"\""), None);
        assert_eq!(description(""), None);
        assert_eq!(description(" # \"open"), Some("open"));
        let t = read("Switch8 \"S-1\"\n").unwrap();
        assert_eq!((t.label(0), t.radix(0)), ("S-1", 8));
    }

    #[test]
    fn rates() {
        assert_eq!(rate_gbps("4xEDR"), Some(100.0));
        assert_eq!(rate_gbps("12xQDR"), Some(120.0));
        assert_eq!(rate_gbps("4xFDR10"), Some(40.0));
        assert_eq!(rate_gbps("4xFDR"), Some(56.0));
        assert_eq!(rate_gbps("0xEDR"), None);
        assert_eq!(rate_gbps("4xedr"), None);
        assert_eq!(rate_gbps("x"), None);
        assert_eq!(ib_rate(100.0), (4, "EDR"));
        assert_eq!(ib_rate(400.0), (8, "HDR"));
        assert_eq!(ib_rate(800.0), (8, "NDR"));
        assert_eq!(ib_rate(10.0), (4, "SDR"));
        assert_eq!(ib_rate(5.0), (1, "DDR"));
        assert_eq!(ib_rate(20.0), (4, "DDR"));
        assert_eq!(ib_rate(112.0), (8, "FDR"));
        assert_eq!(ib_rate(600.0), (12, "HDR"));
        assert_eq!(ib_rate(95.0), (4, "EDR"));
        assert_eq!(ib_rate(1.0), (1, "SDR"));
        for bw in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let _ = ib_rate(bw);
        }
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&str, &str, &str)] = &[
            ("[1] \"x\"[1]\n", "outside a node record", "line 1"),
            ("Switch 8 \"S\"\n[9] \"H\"[1]\nHca 1 \"H\"\n", "out of range", "line 2"),
            ("Switch 8 \"S\"\n[1] \"H\"[2]\n\nHca 1 \"H\"\n", "peer port 2", "line 2"),
            ("Switch 8 \"S\"\n[1] \"Q\"[1]\n", "unknown peer node", "line 2"),
            ("Switch 8 \"S\"\n[1] \"S\"[2]\n", "itself", "line 2"),
            ("Switch 8 \"S\"\n[1] \"H\"[1]\n[1] \"H\"[1]\n\nHca 1 \"H\"\n", "listed twice", "line 3"),
            ("Switch 8 \"S\"\n\nSwitch 4 \"S\"\n", "declared twice", "line 3"),
            ("Switch 8 S\n", "quoted node id", "line 1"),
            ("Switch \"S\"\n", "port count", "line 1"),
            ("Switch 0 \"S\"\n", "at least one port", "line 1"),
            ("Switch 99999 \"S\"\n", "too large", "line 1"),
            ("Switch 8 \"S\"\n[1 \"H\"[1]\n", "']'", "line 2"),
            ("Switch 8 \"S\"\n[x] \"H\"[1]\n", "port number", "line 2"),
            ("Switch 8 \"S\"\n[1] H[1]\n", "quoted id of the peer", "line 2"),
            ("Switch 8 \"S\"\n@[1] \"a\"\n", "aliases", "line 2"),
            ("include \"other.net\"\n", "include", "line 1"),
            ("hello world\n", "unrecognised line", "line 1"),
            // A[1]↔B[2] but B[2]→C[1]: inconsistent duplicate.
            (
                "Switch 4 \"A\"\n[1] \"B\"[2]\n\nSwitch 4 \"B\"\n[2] \"C\"[1]\n\nSwitch 4 \"C\"\n[1] \"B\"[2]\n",
                "inconsistent links",
                "line 2",
            ),
            // Two one-sided claims on the same far port.
            (
                "Switch 4 \"A\"\n[1] \"C\"[1]\n\nSwitch 4 \"B\"\n[1] \"C\"[1]\n\nSwitch 4 \"C\"\n",
                "linked twice",
                "line 5",
            ),
        ];
        for (text, want, line) in cases {
            let e = err(text);
            assert!(e.contains(want) && e.contains(line), "{text:?}: want {want:?} at {line}: {e}");
            assert!(e.starts_with("ibnet parse error at line"), "{e}");
        }
    }

    fn star() -> Topology {
        let mut b = TopologyBuilder::new("star");
        let s = b.add_switch("core switch", 6);
        for i in 0..4 {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, s, LinkSpec::new(200.0, 10.0).unwrap()).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn write_matches_ibsim_shape() {
        let text = write(&star()).unwrap();
        let expected = "\
# netweave topology \"star\" (family custom): 1 switches, 4 hosts, 4 links
# ibsim net format; load with: ibsim -s -N 5 -S 1 -P 11 FILE (or larger)

Switch\t6 \"core_switch\"\t# \"core switch\"
[1]\t\"h0\"[1]\t# lid 0 4xHDR
[2]\t\"h1\"[1]\t# lid 0 4xHDR
[3]\t\"h2\"[1]\t# lid 0 4xHDR
[4]\t\"h3\"[1]\t# lid 0 4xHDR

Hca\t1 \"h0\"\t# \"h0\"
[1]\t\"core_switch\"[1]\t# lid 0 4xHDR

";
        assert!(text.starts_with(expected), "{text}");
        for l in text.lines() {
            assert!(l.len() < 255, "ibsim splits lines of 256 bytes or more: {l}");
            assert!(!l.contains('='), "ibsim parses '=' in port lines as options: {l}");
        }
        let back = read(&text).unwrap();
        assert_eq!(back.num_links(), 4);
        assert_eq!(back.label(0), "core switch");
        assert_eq!(back.link(0).spec.bandwidth_gbps, 200.0);
    }

    #[test]
    fn ids_are_sanitised_and_unique() {
        let mut b = TopologyBuilder::new("ids");
        for l in ["a b", "a_b", "a b", "", "x\"#@y", &"z".repeat(100), "a_b-n1"] {
            b.add_switch(l, 1);
        }
        let t = b.build().unwrap();
        let ids = node_ids(&t);
        assert_eq!(ids[..5], ["a_b", "a_b-n1", "a_b-n2", "S3", "x___y"]);
        assert_eq!(ids[5].len(), MAX_ID_BASE_BYTES);
        assert_eq!(ids[6], "a_b-n1-n6");
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
        // Labels survive (quote replaced), empty one reads back as its id.
        let back = read(&write(&t).unwrap()).unwrap();
        assert_eq!(back.label(0), "a b");
        assert_eq!(back.label(3), "S3");
        assert_eq!(back.label(4), "x'#@y");
        assert_eq!(back.label(5), "z".repeat(63));
    }

    #[test]
    fn write_enforces_ibsim_limits() {
        let mut b = TopologyBuilder::new("big");
        b.add_switch("s", 255);
        let e = write(&b.build().unwrap()).unwrap_err().to_string();
        // `write` has no size limits (ibnetdiscover files of big fabrics are normal); ibsim's
        // defaults are enforced by `write_with_limits`.
        assert!(e.contains("1..=254"), "{e}");
        let mut b = TopologyBuilder::new("lonely");
        b.add_host_with_ports("h", 0);
        assert!(write(&b.build().unwrap()).is_err());

        let mut b = TopologyBuilder::new("many");
        for i in 0..300 {
            b.add_switch(format!("s{i}"), 1);
        }
        let t = b.build().unwrap();
        let e = write_with_limits(&t, &IbsimLimits::default()).unwrap_err().to_string();
        assert!(e.contains("300 switches") && e.contains("-S"), "{e}");
        assert!(write(&t).unwrap().contains("-S 300"));
        let raised = IbsimLimits { max_switches: 300, ..IbsimLimits::default() };
        assert!(write_with_limits(&t, &raised).unwrap().contains("-S 300"));
        assert!(write_with_limits(&t, &IbsimLimits::UNLIMITED).is_ok());
        assert_eq!(IbsimLimits::needed(&t), IbsimLimits { max_nodes: 300, max_switches: 300, max_ports: 600 });
    }
}
