//! Cross-format tests: format selection, round trips of hand-built fabrics through every
//! format, and property tests (random topologies round-trip; no input makes a reader panic).

use std::collections::BTreeSet;
use std::path::Path;

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;
use crate::topology::{LinkSpec, NodeId, NodeKind, Port, Topology, TopologyBuilder};

// ---------------------------------------------------------------------------------------
// Fixtures, built by hand so these tests do not depend on the generators.

fn star(hosts: usize) -> Topology {
    let mut b = TopologyBuilder::new("star");
    let s = b.add_switch("hub", hosts as Port + 2);
    for i in 0..hosts {
        let h = b.add_host(format!("h{i}"));
        b.connect(h, s, LinkSpec::new(100.0, 50.0).unwrap()).unwrap();
    }
    b.build().unwrap()
}

/// ibsim's `net.2sw2path4hca` fabric: two 8-port switches joined by links on ports 3 and 5,
/// two hosts (2-port HCAs using port 1) on each.
fn two_switch_two_path() -> Topology {
    let mut b = TopologyBuilder::new("2sw2path4hca");
    b.family("custom").param("source", "ibsim example");
    let s1 = b.add_switch("Switch1", 8);
    let s2 = b.add_switch("Switch2", 8);
    let hcas: Vec<NodeId> = (1..=4).map(|i| b.add_host_with_ports(format!("Hca{i}"), 2)).collect();
    let spec = LinkSpec::new(40.0, 100.0).unwrap();
    b.connect_ports(s1, 1, hcas[0], 1, spec);
    b.connect_ports(s1, 2, hcas[2], 1, spec);
    b.connect_ports(s2, 1, hcas[1], 1, spec);
    b.connect_ports(s2, 2, hcas[3], 1, spec);
    b.connect_ports(s1, 3, s2, 3, spec);
    b.connect_ports(s1, 5, s2, 5, spec);
    b.build().unwrap()
}

/// A dual-rail host: one HCA with two ports, each on a different switch.
fn dual_rail_host() -> Topology {
    let mut b = TopologyBuilder::new("dual rail");
    let h = b.add_host_with_ports("dual", 2);
    let a = b.add_switch("rail A", 4);
    let z = b.add_switch("rail B", 4);
    let other = b.add_host("single");
    b.connect_ports(h, 1, a, 2, LinkSpec::new(200.0, 20.0).unwrap());
    b.connect_ports(h, 2, z, 4, LinkSpec::new(200.0, 20.0).unwrap());
    b.connect_ports(a, 1, z, 1, LinkSpec::new(100.0, 30.0).unwrap());
    b.connect_ports(other, 1, z, 3, LinkSpec::new(100.0, 30.0).unwrap());
    b.build().unwrap()
}

// ---------------------------------------------------------------------------------------
// What each format must preserve, as comparable values.

type LinkKey = ((NodeId, Port), (NodeId, Port));

/// Links as a set with ends in a canonical order, plus a per-link value.
fn link_set<T: Ord>(t: &Topology, value: impl Fn(&LinkSpec) -> T) -> BTreeSet<(LinkKey, T)> {
    t.links()
        .iter()
        .map(|l| {
            let (x, y) = ((l.a.node, l.a.port), (l.b.node, l.b.port));
            ((x.min(y), x.max(y)), value(&l.spec))
        })
        .collect()
}

/// JSON and DOT: everything, in order.
fn assert_exact(a: &Topology, b: &Topology) {
    assert_eq!((a.name(), a.family(), a.params()), (b.name(), b.family(), b.params()));
    assert_eq!(a.num_nodes(), b.num_nodes());
    for n in 0..a.num_nodes() as NodeId {
        assert_eq!((a.kind(n), a.label(n), a.radix(n), a.coords(n)), (b.kind(n), b.label(n), b.radix(n), b.coords(n)));
    }
    assert_eq!(a.links(), b.links());
}

/// Per node (kind, label, radix), and links with their rate in Mbit/s.
type IbnetView = (Vec<(NodeKind, String, Port)>, BTreeSet<(LinkKey, u64)>);
/// Switch count, host count, links between (is host, index within kind) with cycles.
type AnynetView = (usize, usize, BTreeSet<((bool, usize), (bool, usize), u64)>);

/// ibnet: node order, kinds, labels (as the writer maps them), radix, links with ports and
/// the IB rate the bandwidth is written as. `like` supplies the labels the writer could not carry (empty ones read back as node ids).
fn ibnet_view(t: &Topology, like: Option<&Topology>) -> IbnetView {
    let nodes = (0..t.num_nodes() as NodeId)
        .map(|n| {
            let label = match like {
                Some(back) if t.label(n).is_empty() => back.label(n).to_string(),
                Some(_) => t.label(n).replace('"', "'"),
                None => t.label(n).to_string(),
            };
            (t.kind(n), label, t.radix(n))
        })
        .collect();
    let rate = |s: &LinkSpec| {
        let (w, sp) = ibnet::ib_rate(s.bandwidth_gbps);
        (ibnet::rate_gbps(&format!("{w}x{sp}")).unwrap() * 1000.0) as u64
    };
    (nodes, link_set(t, rate))
}

/// anynet: switch and host counts, and links between (is host, index-within-kind) with
/// latency in whole cycles.
fn anynet_view(t: &Topology) -> AnynetView {
    let key = |n: NodeId| (t.is_host(n), t.kind_index(n));
    let links = t
        .links()
        .iter()
        .map(|l| {
            let (x, y) = (key(l.a.node), key(l.b.node));
            (x.min(y), x.max(y), l.spec.latency_ns.round().max(1.0) as u64)
        })
        .collect();
    (t.num_switches(), t.num_hosts(), links)
}

/// Whether anynet can express `t` (see `anynet` module docs).
fn anynet_expressible(t: &Topology) -> bool {
    let hosts_ok = t.hosts().iter().all(|&h| t.degree(h) == 1 && !t.is_host(t.neighbors(h)[0].neighbor));
    let no_parallel = t.switches().iter().all(|&s| {
        let peers: Vec<NodeId> = t.neighbors(s).iter().map(|a| a.neighbor).filter(|&n| !t.is_host(n)).collect();
        peers.iter().collect::<BTreeSet<_>>().len() == peers.len()
    });
    hosts_ok && no_parallel
}

/// Round-trip `t` through every format and check what each one promises.
fn check_round_trips(t: &Topology) {
    for format in Format::ALL {
        let text = match write(t, format) {
            Ok(text) => text,
            Err(e) => {
                assert!(format == Format::AnyNet && !anynet_expressible(t), "{format} write failed: {e}");
                continue;
            }
        };
        assert!(format != Format::AnyNet || anynet_expressible(t), "anynet wrote an inexpressible topology");
        // Deterministic output.
        assert_eq!(write(t, format).unwrap(), text, "{format}");
        let back = read(&text, format).unwrap_or_else(|e| panic!("{format} re-read failed: {e}\n{text}"));
        match format {
            Format::Json | Format::Dot => assert_exact(t, &back),
            Format::IbNet => assert_eq!(ibnet_view(t, Some(&back)), ibnet_view(&back, None), "{text}"),
            Format::AnyNet => assert_eq!(anynet_view(t), anynet_view(&back), "{text}"),
        }
    }
}

#[test]
fn fixtures_round_trip_through_every_format() {
    for t in [
        star(0),
        star(1),
        star(5),
        two_switch_two_path(),
        dual_rail_host(),
        TopologyBuilder::new("empty").build().unwrap(),
    ] {
        check_round_trips(&t);
    }
}

#[test]
fn anynet_refuses_the_dual_rail_host_but_takes_the_others() {
    assert!(write(&dual_rail_host(), Format::AnyNet).unwrap_err().to_string().contains("2 links"));
    assert!(write(&two_switch_two_path(), Format::AnyNet).unwrap_err().to_string().contains("parallel"));
    assert_eq!(write(&star(2), Format::AnyNet).unwrap(), "router 0 node 0 50 node 1 50\n");
}

#[test]
fn format_names_and_extensions() {
    for (name, f) in [
        ("json", Format::Json),
        ("ibnet", Format::IbNet),
        ("IBNETDISCOVER", Format::IbNet),
        ("ibsim", Format::IbNet),
        ("net", Format::IbNet),
        ("anynet", Format::AnyNet),
        ("booksim", Format::AnyNet),
        ("dot", Format::Dot),
        (" Graphviz ", Format::Dot),
    ] {
        assert_eq!(Format::from_name(name).unwrap(), f, "{name}");
        assert_eq!(name.parse::<Format>().unwrap(), f);
    }
    let e = Format::from_name("yaml").unwrap_err().to_string();
    assert!(e.contains("yaml") && e.contains("json") && e.contains("graphviz") && !e.contains('\n'), "{e}");

    for (path, f) in [
        ("a/b.json", Format::Json),
        ("x.net", Format::IbNet),
        ("x.IBNET", Format::IbNet),
        ("x.topo", Format::IbNet),
        ("x.anynet", Format::AnyNet),
        ("x.dot", Format::Dot),
        ("x.gv", Format::Dot),
    ] {
        assert_eq!(Format::from_path(Path::new(path)).unwrap(), f, "{path}");
    }
    for bad in ["x.yaml", "noext", "dir.json/"] {
        let e = Format::from_path(Path::new(bad));
        if bad == "dir.json/" {
            // Path normalises the trailing slash away: still a .json name.
            assert_eq!(e.unwrap(), Format::Json);
            continue;
        }
        let e = e.unwrap_err().to_string();
        assert!(e.contains(".gv for dot") && e.contains(".net/.ibnet/.topo for ibnet") && !e.contains('\n'), "{e}");
    }
    for f in Format::ALL {
        assert_eq!(Format::from_name(f.name()).unwrap(), f);
        assert_eq!(Format::from_path(Path::new(&format!("t.{}", f.extension()))).unwrap(), f);
        assert_eq!(f.to_string(), f.name());
    }
}

/// The example fabrics shipped with ibsim parse, when ibsim-utils is installed.
#[test]
fn installed_ibsim_examples_parse() {
    let Ok(dir) = std::fs::read_dir("/usr/share/doc/ibsim-utils/net-examples") else { return };
    for entry in dir.flatten() {
        let path = entry.path();
        if !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("net")) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let t = read(&text, Format::IbNet).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(t.num_links() > 0, "{}", path.display());
        check_round_trips(&t);
    }
}

// ---------------------------------------------------------------------------------------
// Property tests

/// Small random topologies: interleaved switches and hosts (some multi-port), random labels,
/// links on random free ports with IB and non-IB bandwidths, some coordinates.
fn arb_topology() -> impl Strategy<Value = Topology> {
    (1usize..5, 0usize..7).prop_flat_map(|(ns, nh)| {
        let n = ns + nh;
        (
            vec(1u16..7, ns),
            vec(1u16..4, nh),
            vec("[a-zA-Z0-9 _.#=ü\"-]{0,10}", n),
            vec(any::<u32>(), n),
            vec(proptest::option::of(vec(-9i64..9, 0..3)), n),
            vec((0..n, 0..n, any::<u16>(), any::<u16>(), 0usize..7, 0u32..3000), 0..3 * n),
            (any::<bool>(), "[a-z ]{0,8}"),
        )
            .prop_map(move |(sw_radix, host_ports, labels, order_keys, coords, attempts, (fam, name))| {
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by_key(|&i| (order_keys[i], i));
                let mut b = TopologyBuilder::new(name);
                if fam {
                    b.family("random").param("seed", 7).param("dims", vec![2, 3]);
                }
                let mut id = vec![0; n];
                let mut free: Vec<Vec<Port>> = vec![Vec::new(); n];
                for &i in &order {
                    let (kind, radix) =
                        if i < ns { (NodeKind::Switch, sw_radix[i]) } else { (NodeKind::Host, host_ports[i - ns]) };
                    id[i] = b.add_node(kind, labels[i].clone(), radix);
                    free[i] = (1..=radix).collect();
                    if let Some(c) = &coords[i] {
                        b.set_coords(id[i], c.clone());
                    }
                }
                const BW: [f64; 7] = [10.0, 40.0, 56.0, 100.0, 200.0, 12.5, 0.75];
                for (x, y, px, py, bw, lat) in attempts {
                    if x == y || free[x].is_empty() || free[y].is_empty() {
                        continue;
                    }
                    let (ix, iy) = (px as usize % free[x].len(), py as usize % free[y].len());
                    let pa = free[x].remove(ix);
                    let pb = free[y].remove(iy);
                    let spec = LinkSpec::new(BW[bw], lat as f64 / 10.0).unwrap();
                    b.connect_ports(id[x], pa, id[y], pb, spec);
                }
                b.build().unwrap()
            })
    })
}

/// Anynet-friendly topologies: every host on exactly one switch, switches in a simple graph.
fn arb_anynet_topology() -> impl Strategy<Value = Topology> {
    (1usize..6, vec((0usize..6, 1u32..50), 0..8), vec((0usize..6, 0usize..6, 1u32..50), 0..10)).prop_map(
        |(ns, hosts, sw_links)| {
            let mut b = TopologyBuilder::new("anynet-ish");
            let sw: Vec<NodeId> = (0..ns).map(|i| b.add_switch(format!("s{i}"), 16)).collect();
            let mut pairs = BTreeSet::new();
            for (x, y, lat) in sw_links {
                let (x, y) = (x % ns, y % ns);
                if x != y && pairs.insert((x.min(y), x.max(y))) {
                    b.connect(sw[x], sw[y], LinkSpec::new(100.0, lat as f64).unwrap()).unwrap();
                }
            }
            for (i, (s, lat)) in hosts.into_iter().enumerate() {
                let h = b.add_host(format!("h{i}"));
                b.connect(h, sw[s % ns], LinkSpec::new(100.0, lat as f64).unwrap()).unwrap();
            }
            b.build().unwrap()
        },
    )
}

/// Every reader error is a one-line `Parse` error naming the reader's format and a line.
fn check_reader_result(format: Format, result: crate::Result<Topology>) {
    if let Err(e) = result {
        match &e {
            crate::NetweaveError::Parse { format: f, .. } => assert_eq!(*f, format.name()),
            other => panic!("{format} reader returned a non-parse error: {other:?}"),
        }
        let s = e.to_string();
        assert!(!s.contains('\n') && !s.contains('\r'), "multi-line error: {s:?}");
        assert!(s.starts_with(&format!("{} parse error at line ", format.name())), "{s}");
    }
}

/// Apply edit operations to `text` on char boundaries.
fn mutate(text: &str, ops: &[(u8, usize, usize, String)]) -> String {
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    for (op, x, y, s) in ops {
        let mut chars: Vec<char> = lines.join("\n").chars().collect();
        let len = chars.len().max(1);
        match op % 7 {
            0 => chars.truncate(x % len),
            1 => {
                let (a, z) = (x % len, (x % len + y % 16).min(chars.len()));
                if a < z {
                    chars.drain(a..z);
                }
            }
            2 => {
                let at = (x % len).min(chars.len());
                chars.splice(at..at, s.chars());
            }
            3 => {
                if let Some(c) = chars.get_mut(x % len) {
                    *c = s.chars().next().unwrap_or('\0');
                }
            }
            _ => {
                lines = chars.iter().collect::<String>().split('\n').map(str::to_string).collect();
                let n = lines.len();
                match op % 7 {
                    4 => lines.swap(x % n, y % n),
                    5 => {
                        let l = lines[x % n].clone();
                        lines.insert(y % n, l);
                    }
                    _ => {
                        lines.remove(x % n);
                        if lines.is_empty() {
                            lines.push(String::new());
                        }
                    }
                }
                continue;
            }
        }
        lines = chars.iter().collect::<String>().split('\n').map(str::to_string).collect();
    }
    lines.join("\n")
}

/// Fragments that steer mutations into the interesting corners of the grammars.
fn arb_fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just(" -- ".to_string()),
        Just("\n".to_string()),
        Just("#".to_string()),
        Just("=".to_string()),
        Just("\\".to_string()),
        Just("/*".to_string()),
        Just("0".to_string()),
        Just("65535".to_string()),
        Just("4294967296".to_string()),
        Just("-1".to_string()),
        Just("1e999".to_string()),
        Just(" router 0".to_string()),
        Just(" node 7 ".to_string()),
        Just("Switch 254 \"x\"\n".to_string()),
        Just("[1] \"x\"[1]\n".to_string()),
        Just("ü".to_string()),
        any::<String>(),
    ]
}

proptest! {
    // No regression files: they would land outside this module's directory.
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_topologies_round_trip(t in arb_topology()) {
        check_round_trips(&t);
    }

    #[test]
    fn anynet_friendly_topologies_round_trip(t in arb_anynet_topology()) {
        prop_assert!(anynet_expressible(&t));
        check_round_trips(&t);
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        for format in Format::ALL {
            check_reader_result(format, read(&text, format));
        }
    }

    #[test]
    fn mutated_files_never_panic(
        t in arb_topology(),
        source in 0usize..4,
        ops in vec((any::<u8>(), any::<usize>(), any::<usize>(), arb_fragment()), 1..6),
    ) {
        let Ok(text) = write(&t, Format::ALL[source]) else { return Ok(()) };
        let text = mutate(&text, &ops);
        for format in Format::ALL {
            check_reader_result(format, read(&text, format));
        }
    }
}
