//! BookSim2 `anynet` network files (`network_file` of BookSim's `anynet` topology).
//!
//! ```text
//! router 0 node 0 100 node 1 100 router 1 100
//! router 1 node 2 100 node 3 100 router 0 100
//! ```
//!
//! The grammar, from BookSim's `src/networks/anynet.cpp`: each line starts with a head,
//! `router R` or `node N`, followed by any number of `router X` / `node Y` entries, each
//! optionally followed by a link latency in cycles (default 1). Routers and nodes are
//! numbered from 0 without gaps. A node (BookSim's name for a host) is attached to exactly
//! one router; node-to-node links do not exist. BookSim keys links by their far end, so two
//! links between the same pair of routers are one link. BookSim splits on single spaces
//! and has no comments.
//!
//! **Writing** emits one line per switch, in switch order: `router <switch index>`, then the
//! switch's links in port order as `node <host index> <cycles>` or
//! `router <switch index> <cycles>`. Router-router links therefore appear on both lines with
//! the same latency, which keeps BookSim's per-direction latencies symmetric. Latency
//! becomes `round(latency_ns / ns_per_cycle)` cycles, at least 1 because BookSim rejects
//! zero-delay channels; [`write()`] uses [`DEFAULT_NS_PER_CYCLE`]. What anynet cannot express
//! is an error: a host with no link, with more than one link, or linked to a host, and
//! parallel links between two switches. Bandwidth, labels, port numbers, port counts, the
//! name, family, parameters and coordinates are not carried.
//!
//! **Reading** (for round trips and BookSim imports) accepts any whitespace between tokens.
//! Routers become switches `0..R` (node ids `0..R`, labels `router<R>`), then nodes become
//! one-port hosts (node ids `R..R+N`, labels `node<N>`). A switch's ports are numbered 1, 2, …
//! in order of appearance of its links, reading lines top to bottom and left to right;
//! a link listed again (from the other end, or with a `node N router R` line) is the same
//! link and keeps the latency it was first given explicitly. Latency is
//! `cycles × ns_per_cycle`; bandwidth is [`LinkSpec::default`]'s. The topology is named
//! `"anynet"`, family `"file"`.
//!
//! A round trip keeps kinds, the switch and host order, which host hangs off which switch,
//! switch-to-switch adjacency and latencies that are whole numbers of cycles.

use std::collections::{BTreeMap, HashMap};

use super::{check_total_ports, finish, parse_error, snippet};
use crate::error::Result;
use crate::topology::{LinkSpec, NodeId, NodeKind, Port, Topology, TopologyBuilder};

const FMT: &str = "anynet";

/// Nanoseconds per BookSim cycle used by [`write()`] and [`read()`]: 1 ns, a 1 GHz router
/// clock, so latencies in ns and cycles read the same.
pub const DEFAULT_NS_PER_CYCLE: f64 = 1.0;

/// Largest latency in cycles: BookSim reads them with `atoi` into an `int`.
const MAX_CYCLES: f64 = i32::MAX as f64;

/// Write `topo` as a BookSim anynet file with 1 ns cycles. See the module docs.
pub fn write(topo: &Topology) -> Result<String> {
    write_with(topo, DEFAULT_NS_PER_CYCLE)
}

/// Write `topo` as a BookSim anynet file, converting latencies with `ns_per_cycle`.
pub fn write_with(topo: &Topology, ns_per_cycle: f64) -> Result<String> {
    if !(ns_per_cycle.is_finite() && ns_per_cycle > 0.0) {
        return crate::invalid!("anynet: ns per cycle must be a positive number, got {ns_per_cycle}");
    }
    let name = |n: NodeId| format!("{} ({:?})", n, snippet(topo.label(n)));
    for &h in topo.hosts() {
        let adj = topo.neighbors(h);
        if let Some(a) = adj.iter().find(|a| topo.is_host(a.neighbor)) {
            return crate::invalid!(
                "cannot write anynet: hosts {} and {} are linked directly; anynet only links nodes to routers",
                name(h),
                name(a.neighbor)
            );
        }
        match adj.len() {
            1 => {}
            0 => {
                return crate::invalid!(
                    "cannot write anynet: host {} has no link; anynet attaches every node to a router",
                    name(h)
                )
            }
            k => {
                return crate::invalid!(
                "cannot write anynet: host {} has {k} links; anynet attaches a node to exactly one router by one link",
                name(h)
            )
            }
        }
    }
    let mut out = String::with_capacity(16 * (topo.num_switches() + 2 * topo.num_links()));
    for &s in topo.switches() {
        out.push_str(&format!("router {}", topo.kind_index(s)));
        let mut seen = Vec::new();
        for a in topo.neighbors(s) {
            let latency = topo.link(a.channel / 2).spec.latency_ns;
            let cycles = (latency / ns_per_cycle).round().max(1.0);
            if cycles > MAX_CYCLES {
                return crate::invalid!("cannot write anynet: latency {latency} ns is more than {MAX_CYCLES} cycles");
            }
            let kind = if topo.is_host(a.neighbor) { "node" } else { "router" };
            if kind == "router" {
                if seen.contains(&a.neighbor) {
                    return crate::invalid!(
                        "cannot write anynet: switches {} and {} have parallel links; anynet has one link per pair of routers",
                        name(s),
                        name(a.neighbor)
                    );
                }
                seen.push(a.neighbor);
            }
            out.push_str(&format!(" {kind} {} {}", topo.kind_index(a.neighbor), cycles as u64));
        }
        out.push('\n');
    }
    Ok(out)
}

/// Parse a BookSim anynet file with 1 ns cycles. See the module docs.
pub fn read(text: &str) -> Result<Topology> {
    read_with(text, DEFAULT_NS_PER_CYCLE)
}

/// An anynet link as read: a router pair or a node on a router, latency in cycles if given.
#[derive(Clone, Copy)]
enum Edge {
    Routers(u32, u32),
    Node { node: u32, router: u32 },
}

/// Parse a BookSim anynet file, converting latencies with `ns_per_cycle`.
pub fn read_with(text: &str, ns_per_cycle: f64) -> Result<Topology> {
    if !(ns_per_cycle.is_finite() && ns_per_cycle > 0.0) {
        return Err(parse_error(FMT, 0, format!("ns per cycle must be a positive number, got {ns_per_cycle}")));
    }
    // First line mentioning each router / node, for the numbering check.
    let mut routers: BTreeMap<u32, usize> = BTreeMap::new();
    let mut nodes: BTreeMap<u32, usize> = BTreeMap::new();
    let mut edges: Vec<(Edge, Option<u32>)> = Vec::new();
    let mut router_pairs: HashMap<(u32, u32), usize> = HashMap::new();
    let mut node_edge: HashMap<u32, (usize, usize)> = HashMap::new(); // node -> (edge index, line)

    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let mut toks = raw.split_whitespace().peekable();
        let Some(head_kind) = toks.next() else { continue };
        let head_is_router = kind_word(head_kind, line)?;
        let head = id(toks.next(), head_kind, line)?;
        if head_is_router {
            routers.entry(head).or_insert(line);
        } else {
            nodes.entry(head).or_insert(line);
        }
        while let Some(body_kind) = toks.next() {
            let body_is_router = kind_word(body_kind, line)?;
            let body = id(toks.next(), body_kind, line)?;
            let cycles = match toks.peek() {
                Some(&t) if t != "router" && t != "node" => {
                    toks.next();
                    Some(latency(t, line)?)
                }
                _ => None,
            };
            let (edge, key) = match (head_is_router, body_is_router) {
                (false, false) => {
                    return Err(parse_error(
                        FMT,
                        line,
                        format!("node {head} is linked to node {body}; anynet links nodes only to routers"),
                    ))
                }
                (true, true) => {
                    if head == body {
                        return Err(parse_error(FMT, line, format!("router {head} is linked to itself")));
                    }
                    routers.entry(body).or_insert(line);
                    (Edge::Routers(head, body), None)
                }
                (true, false) => {
                    nodes.entry(body).or_insert(line);
                    (Edge::Node { node: body, router: head }, Some(body))
                }
                (false, true) => {
                    routers.entry(body).or_insert(line);
                    (Edge::Node { node: head, router: body }, Some(head))
                }
            };
            // Repeated listings of a link are the same link (BookSim keys links by far end).
            let existing = match (edge, key) {
                (Edge::Node { router, .. }, Some(node)) => match node_edge.get(&node) {
                    Some(&(e, first)) => match edges[e].0 {
                        Edge::Node { router: r, .. } if r == router => Some(e),
                        Edge::Node { router: r, .. } => {
                            return Err(parse_error(
                                FMT,
                                line,
                                format!("node {node} is attached to router {router} here and to router {r} at line {first}; a node has one router"),
                            ))
                        }
                        Edge::Routers(..) => None,
                    },
                    None => None,
                },
                (Edge::Routers(a, b), _) => router_pairs.get(&(a.min(b), a.max(b))).copied(),
                _ => None,
            };
            match existing {
                Some(e) => {
                    // The first explicit latency wins.
                    if edges[e].1.is_none() {
                        edges[e].1 = cycles;
                    }
                }
                None => {
                    let e = edges.len();
                    edges.push((edge, cycles));
                    match edge {
                        Edge::Routers(a, b) => {
                            router_pairs.insert((a.min(b), a.max(b)), e);
                        }
                        Edge::Node { node, .. } => {
                            node_edge.insert(node, (e, line));
                        }
                    }
                    check_total_ports(FMT, line, 2 * edges.len() as u64)?;
                }
            }
        }
    }

    let num_routers = contiguous(&routers, "router")?;
    let num_nodes = contiguous(&nodes, "node")?;
    if let Some((&n, &line)) = nodes.iter().find(|(n, _)| !node_edge.contains_key(n)) {
        return Err(parse_error(FMT, line, format!("node {n} is not attached to any router")));
    }

    // Ports in order of appearance; hosts have the single port 1.
    let mut next_port = vec![0u32; num_routers as usize];
    let mut ends: Vec<(u32, u32, u32, u32)> = Vec::with_capacity(edges.len()); // (a, port, b, port) in node ids
    for &(edge, _) in &edges {
        let mut take = |r: u32| {
            next_port[r as usize] += 1;
            next_port[r as usize]
        };
        ends.push(match edge {
            Edge::Routers(a, b) => (a, take(a), b, take(b)),
            Edge::Node { node, router } => (num_routers + node, 1, router, take(router)),
        });
    }
    if let Some((r, &p)) = next_port.iter().enumerate().find(|(_, &p)| p > Port::MAX as u32) {
        return Err(parse_error(
            FMT,
            routers.get(&(r as u32)).copied().unwrap_or(0),
            format!("router {r} has {p} links, more than {} ports", Port::MAX),
        ));
    }

    let mut b = TopologyBuilder::new("anynet");
    b.family("file").param("format", FMT);
    for r in 0..num_routers {
        b.add_node(NodeKind::Switch, format!("router{r}"), next_port[r as usize] as Port);
    }
    for n in 0..num_nodes {
        b.add_node(NodeKind::Host, format!("node{n}"), 1);
    }
    for (&(a, pa, z, pz), &(_, cycles)) in ends.iter().zip(&edges) {
        let spec = LinkSpec { latency_ns: cycles.unwrap_or(1) as f64 * ns_per_cycle, ..LinkSpec::default() };
        b.connect_ports(a as NodeId, pa as Port, z as NodeId, pz as Port, spec);
    }
    finish(b, FMT)
}

/// `router` → true, `node` → false, anything else is an error.
fn kind_word(word: &str, line: usize) -> Result<bool> {
    match word {
        "router" => Ok(true),
        "node" => Ok(false),
        _ => Err(parse_error(FMT, line, format!("expected \"router\" or \"node\", found {:?}", snippet(word)))),
    }
}

/// A router or node number.
fn id(tok: Option<&str>, kind: &str, line: usize) -> Result<u32> {
    let Some(t) = tok else {
        return Err(parse_error(FMT, line, format!("expected a {kind} number at the end of the line")));
    };
    t.parse::<u32>()
        .ok()
        .filter(|&v| v < i32::MAX as u32)
        .ok_or_else(|| parse_error(FMT, line, format!("expected a {kind} number, found {:?}", snippet(t))))
}

/// A latency in cycles: a positive integer (BookSim rejects zero-delay channels).
fn latency(t: &str, line: usize) -> Result<u32> {
    t.parse::<u32>().ok().filter(|&v| v >= 1 && v as f64 <= MAX_CYCLES).ok_or_else(|| {
        parse_error(
            FMT,
            line,
            format!("expected a latency in cycles (a positive integer) or router/node, found {:?}", snippet(t)),
        )
    })
}

/// Check ids are exactly `0..n` (BookSim indexes arrays by them) and return `n`.
fn contiguous(ids: &BTreeMap<u32, usize>, what: &str) -> Result<u32> {
    for (expected, (&id, &line)) in ids.iter().enumerate() {
        if id as usize != expected {
            return Err(parse_error(
                FMT,
                line,
                format!(
                    "{what}s must be numbered from 0 without gaps, but {what} {expected} is missing before {what} {id}"
                ),
            ));
        }
    }
    Ok(ids.len() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::NetweaveError;

    fn err(text: &str) -> String {
        let e = read(text).unwrap_err();
        assert!(matches!(e, NetweaveError::Parse { format: "anynet", .. }), "{e:?}");
        let s = e.to_string();
        assert!(!s.contains('\n'), "{s}");
        s
    }

    #[test]
    fn reads_booksim_examples() {
        // The two examples from anynet.cpp's header comment, completed with nodes.
        let t = read("router 0 router 1 15 router 2\nrouter 1 node 0\nrouter 2 node 1 5\n").unwrap();
        assert_eq!((t.num_switches(), t.num_hosts(), t.num_links()), (3, 2, 4));
        assert_eq!(t.link(0).spec.latency_ns, 15.0);
        assert_eq!(t.link(1).spec.latency_ns, 1.0);
        assert_eq!(t.link(3).spec.latency_ns, 5.0);
        assert_eq!(t.label(3), "node0");
        assert_eq!(t.host_switch(3), Some(1));

        let t = read("router 0 node 0 node 1 5 node 2 5\n").unwrap();
        assert_eq!((t.num_switches(), t.num_hosts()), (1, 3));
        let ports: Vec<_> = t.neighbors(0).iter().map(|a| (a.port, a.neighbor)).collect();
        assert_eq!(ports, vec![(1, 1), (2, 2), (3, 3)]);
        assert_eq!(t.radix(0), 3);
    }

    #[test]
    fn repeated_listings_are_one_link() {
        let t =
            read_with("router 0 router 1 3\nrouter 1 router 0 7\nnode 0 router 1\nrouter 1\tnode 0 4\n", 2.0).unwrap();
        assert_eq!(t.num_links(), 2);
        assert_eq!(t.link(0).spec.latency_ns, 6.0);
        assert_eq!(t.link(1).spec.latency_ns, 8.0);
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("router 0 node 0\n\nswitch 1\n", "expected \"router\" or \"node\"", "line 3"),
            ("router x\n", "router number", "line 1"),
            ("router 0 node\n", "end of the line", "line 1"),
            ("router 0 node 0 0\n", "positive integer", "line 1"),
            ("router 0 node 0 -3\n", "positive integer", "line 1"),
            ("node 0 node 1\n", "only to routers", "line 1"),
            ("router 0 router 0\n", "itself", "line 1"),
            ("router 0 node 0\nrouter 1 node 0\n", "one router", "line 2"),
            ("router 0 node 0\nrouter 2 node 1\n", "router 1 is missing", "line 2"),
            ("router 0 node 1\n", "node 0 is missing", "line 1"),
            ("router 0 node 0\nnode 1\n", "not attached", "line 2"),
            ("router 4294967295\n", "router number", "line 1"),
        ];
        for (text, want, line) in cases {
            let e = err(text);
            assert!(e.contains(want) && e.contains(line), "{text:?}: {e}");
        }
    }

    fn fabric() -> Topology {
        let mut b = TopologyBuilder::new("fabric");
        let s0 = b.add_switch("s0", 4);
        let h0 = b.add_host("h0");
        let s1 = b.add_switch("s1", 4);
        let h1 = b.add_host_with_ports("h1", 2);
        b.connect_ports(s0, 3, s1, 1, LinkSpec::new(100.0, 40.0).unwrap());
        b.connect_ports(h0, 1, s0, 1, LinkSpec::new(100.0, 0.0).unwrap());
        b.connect_ports(h1, 2, s1, 4, LinkSpec::new(100.0, 2.6).unwrap());
        b.build().unwrap()
    }

    #[test]
    fn writes_one_line_per_switch() {
        let t = fabric();
        assert_eq!(write(&t).unwrap(), "router 0 node 0 1 router 1 40\nrouter 1 router 0 40 node 1 3\n");
        let back = read(&write(&t).unwrap()).unwrap();
        assert_eq!((back.num_switches(), back.num_hosts(), back.num_links()), (2, 2, 3));
        assert_eq!(write(&back).unwrap(), "router 0 node 0 1 router 1 40\nrouter 1 router 0 40 node 1 3\n");
    }

    #[test]
    fn inexpressible_topologies_are_errors() {
        let mut b = TopologyBuilder::new("x");
        let s0 = b.add_switch("s0", 4);
        let s1 = b.add_switch("s1", 4);
        b.connect(s0, s1, LinkSpec::default()).unwrap();
        b.connect(s0, s1, LinkSpec::default()).unwrap();
        assert!(write(&b.clone().build().unwrap()).unwrap_err().to_string().contains("parallel"));

        let mut b = TopologyBuilder::new("x");
        let s0 = b.add_switch("s0", 4);
        let s1 = b.add_switch("s1", 4);
        let h = b.add_host_with_ports("h", 2);
        b.connect(h, s0, LinkSpec::default()).unwrap();
        b.connect(h, s1, LinkSpec::default()).unwrap();
        assert!(write(&b.build().unwrap()).unwrap_err().to_string().contains("2 links"));

        let mut b = TopologyBuilder::new("x");
        let a = b.add_host("a");
        let c = b.add_host("c");
        b.connect(a, c, LinkSpec::default()).unwrap();
        assert!(write(&b.build().unwrap()).unwrap_err().to_string().contains("directly"));

        let mut b = TopologyBuilder::new("x");
        b.add_host("a");
        assert!(write(&b.build().unwrap()).unwrap_err().to_string().contains("no link"));
        assert!(write_with(&fabric(), 0.0).is_err());
    }
}
