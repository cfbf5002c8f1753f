//! Graphviz DOT: an undirected graph for drawing, which also reads back losslessly.
//!
//! ```text
//! graph "star" {
//!   graph [family="custom", params="{}"];
//!   n0 [kind="switch", label="s", ports="4", shape="box"];
//!   n1 [kind="host", label="h0", ports="1", shape="ellipse", coords="0,1"];
//!   n0 -- n1 [taillabel="1", headlabel="1", bandwidth_gbps="100", latency_ns="100"];
//! }
//! ```
//!
//! **Writing**: node `i` is `n<i>`; switches are boxes and hosts ellipses, labelled with their
//! labels; each link is an edge from its `a` end to its `b` end whose `taillabel`/`headlabel`
//! show the port numbers at the two ends (Graphviz draws them next to the ends). The
//! netweave-only attributes `kind`, `ports`, `coords`, `bandwidth_gbps`, `latency_ns`, and the
//! graph's `family` and `params` (a JSON object) are ignored by Graphviz but make the file
//! lossless: `read(write(t))` is `t`, link order included. Numbers are written with Rust's
//! shortest round-trip formatting, all values are quoted, and in strings `\` and `"` are
//! escaped as `\\` and `\"` and line breaks as `\n`/`\r` (which Graphviz also renders).
//!
//! **Reading** accepts that subset of DOT and nothing else: `graph [name] { … }` holding
//! `graph [attrs]` statements, node statements `id [attrs]` and edge statements
//! `id -- id [attrs]` (nodes declared before use), with optional `;`, `,`-or-`;`-separated
//! attributes, `//`, `/* */` and `#`-line comments. Node ids may be any DOT id; nodes are
//! numbered in declaration order. Required attributes: `kind` (`switch`/`host`) and `ports`
//! on nodes, `taillabel`/`headlabel` on edges; `label` defaults to the DOT id and link
//! bandwidth/latency to [`LinkSpec::default`]'s; `shape` is accepted and ignored. Directed
//! graphs, `strict`, subgraphs, default-attribute statements (`node [...]`), unknown
//! attributes and anything else are one-line errors naming the line.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{check_total_ports, finish, parse_error, snippet};
use crate::error::{NetweaveError, Result};
use crate::topology::{LinkSpec, NodeId, NodeKind, Port, Topology, TopologyBuilder};

const FMT: &str = "dot";

/// Write `topo` as a DOT graph. See the module docs.
pub fn write(topo: &Topology) -> Result<String> {
    let params =
        serde_json::to_string(topo.params()).map_err(|e| NetweaveError::InvalidParameter(format!("dot write: {e}")))?;
    let mut out = String::with_capacity(80 * (topo.num_nodes() + topo.num_links()) + 128);
    out.push_str(&format!("graph {} {{\n", quote(topo.name())));
    out.push_str(&format!("  graph [family={}, params={}];\n", quote(topo.family()), quote(&params)));
    for n in 0..topo.num_nodes() as NodeId {
        let (kind, shape) = if topo.is_host(n) { ("host", "ellipse") } else { ("switch", "box") };
        out.push_str(&format!(
            "  n{n} [kind=\"{kind}\", label={}, ports=\"{}\", shape=\"{shape}\"",
            quote(topo.label(n)),
            topo.radix(n)
        ));
        if let Some(c) = topo.coords(n) {
            let c: Vec<String> = c.iter().map(i64::to_string).collect();
            out.push_str(&format!(", coords=\"{}\"", c.join(",")));
        }
        out.push_str("];\n");
    }
    for l in topo.links() {
        out.push_str(&format!(
            "  n{} -- n{} [taillabel=\"{}\", headlabel=\"{}\", bandwidth_gbps=\"{}\", latency_ns=\"{}\"];\n",
            l.a.node, l.b.node, l.a.port, l.b.port, l.spec.bandwidth_gbps, l.spec.latency_ns
        ));
    }
    out.push_str("}\n");
    Ok(out)
}

/// A DOT quoted string with `\`, `"` and line breaks escaped.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------------------------------
// Reading

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// An unquoted DOT id or numeral.
    Id(String),
    /// A quoted string, unescaped.
    Str(String),
    Punct(&'static str),
}

struct Token {
    tok: Tok,
    line: usize,
}

/// Split DOT text into tokens with their lines.
fn lex(text: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let mut at_line_start = true;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
            at_line_start = true;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start_line = line;
        let line_start = std::mem::replace(&mut at_line_start, false);
        // `#` lines are C-preprocessor output, which DOT skips.
        if (c == '#' && line_start) || (c == '/' && chars.get(i + 1) == Some(&'/')) {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            loop {
                match chars.get(i) {
                    None => return Err(parse_error(FMT, start_line, "unterminated /* comment")),
                    Some('*') if chars.get(i + 1) == Some(&'/') => {
                        i += 2;
                        break;
                    }
                    Some('\n') => line += 1,
                    _ => {}
                }
                i += 1;
            }
            continue;
        }
        let tok = match c {
            '{' | '}' | '[' | ']' | '=' | ',' | ';' => {
                i += 1;
                Tok::Punct(match c {
                    '{' => "{",
                    '}' => "}",
                    '[' => "[",
                    ']' => "]",
                    '=' => "=",
                    ',' => ",",
                    _ => ";",
                })
            }
            '-' if chars.get(i + 1) == Some(&'-') => {
                i += 2;
                Tok::Punct("--")
            }
            '-' if chars.get(i + 1) == Some(&'>') => {
                i += 2;
                Tok::Punct("->")
            }
            '"' => {
                i += 1;
                let mut s = String::new();
                loop {
                    match chars.get(i) {
                        None => return Err(parse_error(FMT, start_line, "unterminated quoted string")),
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some('\\') => {
                            match chars.get(i + 1) {
                                Some('"') => s.push('"'),
                                Some('\\') => s.push('\\'),
                                Some('n') => s.push('\n'),
                                Some('r') => s.push('\r'),
                                // Backslash-newline continues the string on the next line.
                                Some('\n') => line += 1,
                                Some(&o) => {
                                    s.push('\\');
                                    s.push(o);
                                }
                                None => return Err(parse_error(FMT, start_line, "unterminated quoted string")),
                            }
                            i += 2;
                        }
                        Some(&o) => {
                            if o == '\n' {
                                line += 1;
                            }
                            s.push(o);
                            i += 1;
                        }
                    }
                }
                Tok::Str(s)
            }
            c if c.is_alphanumeric() || c == '_' || c == '.' || c == '-' => {
                let start = i;
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                    i += 1;
                }
                Tok::Id(chars[start..i].iter().collect())
            }
            other => return Err(parse_error(FMT, line, format!("unexpected character {other:?}"))),
        };
        toks.push(Token { tok, line: start_line });
    }
    Ok(toks)
}

/// Recursive-descent reader over the token list.
struct Parser {
    toks: Vec<Token>,
    pos: usize,
    /// Line of the last token, for errors at the end of input.
    last_line: usize,
}

type Attrs = Vec<(String, String, usize)>;

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }
    fn line(&self) -> usize {
        self.toks.get(self.pos).map_or(self.last_line, |t| t.line)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.tok.clone());
        self.pos += usize::from(t.is_some());
        t
    }
    fn err(&self, msg: impl std::fmt::Display) -> NetweaveError {
        parse_error(FMT, self.line(), msg)
    }
    fn eat(&mut self, p: &str) -> bool {
        let hit = matches!(self.peek(), Some(Tok::Punct(q)) if *q == p);
        self.pos += usize::from(hit);
        hit
    }
    fn expect(&mut self, p: &str) -> Result<()> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(self.err(format!("expected '{p}', found {}", self.describe())))
        }
    }
    fn describe(&self) -> String {
        match self.peek() {
            None => "end of file".into(),
            Some(Tok::Id(s)) => format!("{:?}", snippet(s)),
            Some(Tok::Str(s)) => format!("string {:?}", snippet(s)),
            Some(Tok::Punct(p)) => format!("'{p}'"),
        }
    }
    /// An id or a quoted string.
    fn id(&mut self) -> Option<String> {
        match self.peek() {
            Some(Tok::Id(s) | Tok::Str(s)) => {
                let s = s.clone();
                self.pos += 1;
                Some(s)
            }
            _ => None,
        }
    }
    /// Zero or more `[k=v, ...]` lists.
    fn attrs(&mut self) -> Result<Attrs> {
        let mut out = Vec::new();
        while self.eat("[") {
            loop {
                if self.eat("]") {
                    break;
                }
                let line = self.line();
                let key = self
                    .id()
                    .ok_or_else(|| self.err(format!("expected an attribute name or ']', found {}", self.describe())))?;
                self.expect("=")?;
                let value = self
                    .id()
                    .ok_or_else(|| self.err(format!("expected a value for {key:?}, found {}", self.describe())))?;
                out.push((key, value, line));
                if !self.eat(",") {
                    self.eat(";");
                }
            }
        }
        Ok(out)
    }
}

fn is_keyword(tok: Option<&Tok>, kw: &str) -> bool {
    matches!(tok, Some(Tok::Id(s)) if s.eq_ignore_ascii_case(kw))
}

/// A node as declared.
struct NodeDecl {
    kind: NodeKind,
    label: String,
    ports: Port,
    coords: Option<Vec<i64>>,
}

/// Parse the DOT subset netweave writes. See the module docs.
pub fn read(text: &str) -> Result<Topology> {
    let toks = lex(text)?;
    let last_line = toks.last().map_or(1, |t| t.line);
    let mut p = Parser { toks, pos: 0, last_line };

    if is_keyword(p.peek(), "strict") || is_keyword(p.peek(), "digraph") {
        return Err(p.err("only undirected, non-strict graphs (`graph { ... }`) are supported"));
    }
    if !is_keyword(p.peek(), "graph") {
        return Err(p.err(format!("expected 'graph', found {}", p.describe())));
    }
    p.next();
    let name = if matches!(p.peek(), Some(Tok::Punct(_))) { String::new() } else { p.id().unwrap_or_default() };
    p.expect("{")?;

    let mut family = "file".to_string();
    let mut params: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    let mut ids: HashMap<String, NodeId> = HashMap::new();
    let mut nodes: Vec<NodeDecl> = Vec::new();
    let mut edges: Vec<(NodeId, Port, NodeId, Port, LinkSpec)> = Vec::new();
    let mut used: HashSet<(NodeId, Port)> = HashSet::new();
    let mut total_ports = 0u64;

    loop {
        if p.eat("}") {
            break;
        }
        let line = p.line();
        if p.peek().is_none() {
            return Err(p.err("expected '}' before the end of the file"));
        }
        for kw in ["node", "edge", "subgraph"] {
            if is_keyword(p.peek(), kw) {
                return Err(p.err(format!("'{kw}' statements are not supported by the netweave DOT subset")));
            }
        }
        if is_keyword(p.peek(), "graph") {
            p.next();
            for (k, v, l) in p.attrs()? {
                match k.as_str() {
                    "family" => family = v,
                    "params" => {
                        params = serde_json::from_str(&v).map_err(|e| {
                            parse_error(FMT, l, format!("graph attribute params is not a JSON object: {e}"))
                        })?
                    }
                    other => {
                        return Err(parse_error(
                            FMT,
                            l,
                            format!("unknown graph attribute {:?} (known: family, params)", snippet(other)),
                        ))
                    }
                }
            }
            p.eat(";");
            continue;
        }
        let id = p.id().ok_or_else(|| p.err(format!("expected a node or edge statement, found {}", p.describe())))?;
        if p.eat("->") {
            return Err(parse_error(FMT, line, "directed edges ('->') are not supported; use '--'"));
        }
        if p.eat("--") {
            let to_line = p.line();
            let to = p
                .id()
                .ok_or_else(|| p.err(format!("expected the node at the end of the edge, found {}", p.describe())))?;
            if p.eat("--") || p.eat("->") {
                return Err(parse_error(
                    FMT,
                    to_line,
                    "edge chains (a -- b -- c) are not supported; write one edge per statement",
                ));
            }
            let attrs = p.attrs()?;
            edges.push(edge(&ids, &nodes, &mut used, (&id, line), (&to, to_line), attrs)?);
        } else {
            let attrs = p.attrs()?;
            if ids.contains_key(&id) {
                return Err(parse_error(FMT, line, format!("node {:?} is declared twice", snippet(&id))));
            }
            let decl = node(&id, attrs, line)?;
            total_ports += decl.ports as u64;
            check_total_ports(FMT, line, total_ports)?;
            ids.insert(id, nodes.len() as NodeId);
            nodes.push(decl);
        }
        p.eat(";");
    }
    if p.peek().is_some() {
        return Err(p.err(format!("unexpected {} after the closing '}}'", p.describe())));
    }

    let mut b = TopologyBuilder::new(name);
    b.family(&family);
    for (k, v) in params {
        b.param(&k, v);
    }
    for n in nodes {
        let id = b.add_node(n.kind, n.label, n.ports);
        if let Some(c) = n.coords {
            b.set_coords(id, c);
        }
    }
    for (a, pa, z, pz, spec) in edges {
        b.connect_ports(a, pa, z, pz, spec);
    }
    finish(b, FMT)
}

/// A node statement's attributes.
fn node(id: &str, attrs: Attrs, line: usize) -> Result<NodeDecl> {
    let (mut kind, mut label, mut ports, mut coords) = (None, None, None, None);
    for (k, v, l) in attrs {
        match k.as_str() {
            "kind" => {
                kind = Some(match v.as_str() {
                    "switch" => NodeKind::Switch,
                    "host" => NodeKind::Host,
                    _ => {
                        return Err(parse_error(
                            FMT,
                            l,
                            format!("kind must be \"switch\" or \"host\", not {:?}", snippet(&v)),
                        ))
                    }
                })
            }
            "label" => label = Some(v),
            "ports" => ports = Some(number::<Port>(&v, "ports", l)?),
            "shape" => {}
            "coords" => {
                let c: std::result::Result<Vec<i64>, _> = if v.trim().is_empty() {
                    Ok(Vec::new())
                } else {
                    v.split(',').map(|x| x.trim().parse::<i64>()).collect()
                };
                coords = Some(c.map_err(|_| {
                    parse_error(FMT, l, format!("coords must be comma-separated integers, not {:?}", snippet(&v)))
                })?);
            }
            other => {
                return Err(parse_error(
                    FMT,
                    l,
                    format!("unknown node attribute {:?} (known: kind, label, ports, shape, coords)", snippet(other)),
                ))
            }
        }
    }
    let missing = |a: &str| parse_error(FMT, line, format!("node {:?} has no {a} attribute", snippet(id)));
    Ok(NodeDecl {
        kind: kind.ok_or_else(|| missing("kind"))?,
        label: label.unwrap_or_else(|| id.to_string()),
        ports: ports.ok_or_else(|| missing("ports"))?,
        coords,
    })
}

/// An edge statement, checked against the nodes declared so far.
fn edge(
    ids: &HashMap<String, NodeId>,
    nodes: &[NodeDecl],
    used: &mut HashSet<(NodeId, Port)>,
    (from, from_line): (&str, usize),
    (to, to_line): (&str, usize),
    attrs: Attrs,
) -> Result<(NodeId, Port, NodeId, Port, LinkSpec)> {
    let lookup = |id: &str, line: usize| {
        ids.get(id).copied().ok_or_else(|| {
            parse_error(FMT, line, format!("edge names node {:?}, which is not declared before it", snippet(id)))
        })
    };
    let (a, z) = (lookup(from, from_line)?, lookup(to, to_line)?);
    let (mut pa, mut pz) = (None, None);
    let mut spec = LinkSpec::default();
    for (k, v, l) in attrs {
        match k.as_str() {
            "taillabel" => pa = Some(number::<Port>(&v, "taillabel (port)", l)?),
            "headlabel" => pz = Some(number::<Port>(&v, "headlabel (port)", l)?),
            "bandwidth_gbps" => spec.bandwidth_gbps = number::<f64>(&v, "bandwidth_gbps", l)?,
            "latency_ns" => spec.latency_ns = number::<f64>(&v, "latency_ns", l)?,
            other => {
                return Err(parse_error(
                    FMT,
                    l,
                    format!(
                        "unknown edge attribute {:?} (known: taillabel, headlabel, bandwidth_gbps, latency_ns)",
                        snippet(other)
                    ),
                ))
            }
        }
    }
    let line = from_line;
    let spec = LinkSpec::new(spec.bandwidth_gbps, spec.latency_ns).map_err(|e| parse_error(FMT, line, e))?;
    let pa = pa.ok_or_else(|| parse_error(FMT, line, "edge has no taillabel (its port at the first node)"))?;
    let pz = pz.ok_or_else(|| parse_error(FMT, line, "edge has no headlabel (its port at the second node)"))?;
    if a == z {
        return Err(parse_error(FMT, line, format!("edge connects node {:?} to itself", snippet(from))));
    }
    for (n, port, name) in [(a, pa, from), (z, pz, to)] {
        let radix = nodes[n as usize].ports;
        if port == 0 || port > radix {
            return Err(parse_error(
                FMT,
                line,
                format!("port {port} of node {:?} is out of range 1..{radix}", snippet(name)),
            ));
        }
        if !used.insert((n, port)) {
            return Err(parse_error(
                FMT,
                line,
                format!("port {port} of node {:?} is used by two edges", snippet(name)),
            ));
        }
    }
    Ok((a, pa, z, pz, spec))
}

fn number<T: std::str::FromStr>(v: &str, what: &str, line: usize) -> Result<T> {
    v.trim().parse::<T>().map_err(|_| parse_error(FMT, line, format!("{what} must be a number, not {:?}", snippet(v))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Topology {
        let mut b = TopologyBuilder::new("multi \"rail\"\\demo");
        b.family("custom").param("note", "a\nb");
        let s = b.add_switch("core\nswitch", 8);
        b.set_coords(s, vec![-1, 2]);
        let h = b.add_host_with_ports("h0 \\ ü", 2);
        let g = b.add_host("g");
        b.set_coords(g, vec![]);
        b.connect_ports(h, 2, s, 5, LinkSpec::new(12.5, 0.3).unwrap());
        b.connect_ports(s, 1, h, 1, LinkSpec::new(100.0, 1e-7).unwrap());
        b.build().unwrap()
    }

    #[test]
    fn round_trip_is_exact() {
        let t = sample();
        let text = write(&t).unwrap();
        let back = read(&text).unwrap();
        assert_eq!(back.name(), t.name());
        assert_eq!(back.family(), t.family());
        assert_eq!(back.params(), t.params());
        for n in 0..t.num_nodes() as NodeId {
            assert_eq!(
                (back.kind(n), back.label(n), back.radix(n), back.coords(n)),
                (t.kind(n), t.label(n), t.radix(n), t.coords(n))
            );
        }
        assert_eq!(back.links(), t.links());
        assert_eq!(write(&back).unwrap(), text);
    }

    #[test]
    fn written_shape() {
        let text = write(&sample()).unwrap();
        assert!(text.starts_with("graph \"multi \\\"rail\\\"\\\\demo\" {\n  graph [family=\"custom\", params=\"{\\\"note\\\":\\\"a\\\\nb\\\"}\"];\n"), "{text}");
        assert!(
            text.contains(
                "  n0 [kind=\"switch\", label=\"core\\nswitch\", ports=\"8\", shape=\"box\", coords=\"-1,2\"];\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "  n1 -- n0 [taillabel=\"2\", headlabel=\"5\", bandwidth_gbps=\"12.5\", latency_ns=\"0.3\"];\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn reads_hand_written_subset() {
        let text = "/* a comment */\n# cpp line\ngraph {\n  a [kind=switch ports=2]; // trailing\n  b [kind=host; ports=1][label=\"B\"]\n  a -- b [taillabel=2, headlabel=1]\n}\n";
        let t = read(text).unwrap();
        assert_eq!(t.name(), "");
        assert_eq!((t.label(0), t.label(1)), ("a", "B"));
        assert_eq!(t.link(0).a.port, 2);
        assert_eq!(t.link(0).spec, LinkSpec::default());
    }

    fn err(text: &str) -> String {
        let e = read(text).unwrap_err();
        assert!(matches!(e, NetweaveError::Parse { format: "dot", .. }), "{e:?}");
        let s = e.to_string();
        assert!(!s.contains('\n'), "{s}");
        s
    }

    #[test]
    fn rejects_everything_else_with_a_line() {
        let h = "graph g {\n a [kind=host, ports=1]\n b [kind=switch, ports=2]\n";
        let cases = [
            ("digraph g {}".to_string(), "undirected", "line 1"),
            ("strict graph {}".to_string(), "undirected", "line 1"),
            ("graph g {\n\n node [shape=box]\n}".to_string(), "'node' statements", "line 3"),
            ("graph g {\n subgraph x {}\n}".to_string(), "'subgraph'", "line 2"),
            (format!("{h} a -> b\n}}"), "directed edges", "line 4"),
            (format!("{h} a -- b -- a\n}}"), "edge chains", "line 4"),
            (format!("{h} a -- c [taillabel=1, headlabel=1]\n}}"), "not declared", "line 4"),
            (format!("{h} a -- b [taillabel=1]\n}}"), "headlabel", "line 4"),
            (format!("{h} a -- b [taillabel=1, headlabel=3]\n}}"), "out of range", "line 4"),
            (format!("{h} a -- b [taillabel=1, headlabel=0]\n}}"), "out of range", "line 4"),
            (
                format!("{h} a -- b [taillabel=1, headlabel=1]\n a -- b [taillabel=1, headlabel=2]\n}}"),
                "two edges",
                "line 5",
            ),
            (format!("{h} a -- a [taillabel=1, headlabel=1]\n}}"), "itself", "line 4"),
            (format!("{h} a -- b [taillabel=1, headlabel=1, color=red]\n}}"), "unknown edge attribute", "line 4"),
            (format!("{h} a -- b [taillabel=1, headlabel=1, bandwidth_gbps=-1]\n}}"), "bandwidth", "line 4"),
            (format!("{h} a -- b [taillabel=x, headlabel=1]\n}}"), "must be a number", "line 4"),
            (format!("{h} c [ports=1]\n}}"), "no kind", "line 4"),
            (format!("{h} c [kind=router, ports=1]\n}}"), "kind must be", "line 4"),
            (format!("{h} c [kind=host]\n}}"), "no ports", "line 4"),
            (format!("{h} c [kind=host, ports=1, coords=\"1,x\"]\n}}"), "coords", "line 4"),
            (format!("{h} a [kind=host, ports=1]\n}}"), "declared twice", "line 4"),
            (format!("{h} graph [rankdir=LR]\n}}"), "unknown graph attribute", "line 4"),
            (format!("{h} graph [params=\"[1]\"]\n}}"), "JSON object", "line 4"),
            (h.to_string(), "before the end", "line 3"),
            (format!("{h}}} extra"), "after the closing", "line 4"),
            ("graph g { a [label=\"open }".to_string(), "unterminated", "line 1"),
            ("graph g { /* open".to_string(), "unterminated", "line 1"),
            ("graph g { a @ }".to_string(), "unexpected character", "line 1"),
            ("".to_string(), "expected 'graph'", "line 1"),
        ];
        for (text, want, line) in cases {
            let e = err(&text);
            assert!(e.contains(want) && e.contains(line), "{text:?}: want {want:?} at {line}: {e}");
        }
    }
}
