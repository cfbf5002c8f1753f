//! Shortest-path engines: `shortest` (any selection policy) and `minhop` (OpenSM min-hop's
//! port-load equalisation). One VC, no deadlock avoidance: on a torus they have cycles, which
//! the [`deadlock`](super::deadlock) checker shows.

use crate::error::{NetweaveError, Result};
use crate::topology::fabric::SwitchFabric;
use crate::topology::{Port, Topology};

use super::select::{Select, Selector};
use super::RoutingTable;

/// Minimal-hop routing with balanced next-hop choice (OpenSM min-hop style): every switch
/// forwards to a neighbour one hop closer to the destination's switch; among several, the port
/// that already carries the fewest destinations (lowest port on ties).
pub fn shortest_path(topo: &Topology) -> Result<RoutingTable> {
    let mut table = shortest_with(topo, Select::Balanced)?;
    table.engine = "minhop".into();
    Ok(table)
}

/// Shortest paths with next hops chosen by `select`.
pub fn shortest_with(topo: &Topology, select: Select) -> Result<RoutingTable> {
    let mut table = RoutingTable::new(topo, "shortest");
    let graph = SwitchFabric::new(topo);
    let mut selector = Selector::new(topo, select);
    let mut dist = vec![u32::MAX; topo.num_switches()];
    let mut queue = Vec::with_capacity(topo.num_switches());
    let mut candidates: Vec<Port> = Vec::new();
    for (target, dests) in hosts_by_switch(topo)?.iter().enumerate() {
        if dests.is_empty() {
            continue;
        }
        graph.bfs(target, &mut dist, &mut queue);
        for (local, &d) in dests.iter().enumerate() {
            let dest_node = topo.hosts()[d];
            for s in 0..topo.num_switches() {
                let node = topo.switches()[s];
                if s == target {
                    if let Some(a) = topo.neighbors(node).iter().find(|a| a.neighbor == dest_node) {
                        selector.record(s, a.port);
                        table.set_out_port(s, d, a.port);
                    }
                    continue;
                }
                if dist[s] == u32::MAX {
                    continue;
                }
                candidates.clear();
                candidates.extend(
                    topo.neighbors(node)
                        .iter()
                        .filter(|a| !topo.is_host(a.neighbor) && dist[topo.kind_index(a.neighbor)] + 1 == dist[s])
                        .map(|a| a.port),
                );
                let port = selector.choose(s, local, &candidates);
                table.set_out_port(s, d, port);
            }
        }
    }
    Ok(table)
}

/// Host indices grouped by the switch (index) they hang off; errors for a host on no switch.
pub(crate) fn hosts_by_switch(topo: &Topology) -> Result<Vec<Vec<usize>>> {
    let mut by_switch: Vec<Vec<usize>> = vec![Vec::new(); topo.num_switches()];
    for (hi, &h) in topo.hosts().iter().enumerate() {
        let sw = topo
            .host_switch(h)
            .ok_or_else(|| NetweaveError::Routing(format!("host {} is not attached to a switch", topo.label(h))))?;
        by_switch[topo.kind_index(sw)].push(hi);
    }
    Ok(by_switch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::NO_PORT;
    use crate::topology::{LinkSpec, TopologyBuilder};

    /// Two switches joined by two parallel links, two hosts on each.
    fn two_switches() -> Topology {
        let mut b = TopologyBuilder::new("2sw2path");
        let s0 = b.add_switch("s0", 4);
        let s1 = b.add_switch("s1", 4);
        b.connect(s0, s1, LinkSpec::default()).unwrap();
        b.connect(s0, s1, LinkSpec::default()).unwrap();
        for i in 0..4 {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, if i < 2 { s0 } else { s1 }, LinkSpec::default()).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn every_pair_is_delivered_minimally() {
        let t = two_switches();
        let r = shortest_path(&t).unwrap();
        let mut path = Vec::new();
        for s in 0..4 {
            for d in 0..4 {
                path.clear();
                r.path(&t, s, d, &mut path).unwrap();
                let same = (s < 2) == (d < 2);
                let expected = if s == d {
                    0
                } else if same {
                    2
                } else {
                    3
                };
                assert_eq!(path.len(), expected, "{s}->{d}");
                if let Some(&last) = path.last() {
                    assert_eq!(t.channel_ends(last).1.node, t.hosts()[d]);
                }
            }
        }
    }

    #[test]
    fn parallel_links_are_balanced_over_destinations() {
        let t = two_switches();
        let r = shortest_path(&t).unwrap();
        // s0 reaches hosts 2 and 3 through different trunk ports.
        assert_ne!(r.out_port(0, 2), r.out_port(0, 3));
    }

    #[test]
    fn broken_table_is_reported_not_followed() {
        let t = two_switches();
        let mut r = shortest_path(&t).unwrap();
        r.set_out_port(0, 2, NO_PORT);
        let err = r.path(&t, 0, 2, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("no route"), "{err}");
        // A loop: s0 and s1 point at each other for host 3.
        let mut r = shortest_path(&t).unwrap();
        let back = t.neighbors(t.switches()[1]).iter().find(|a| !t.is_host(a.neighbor)).unwrap().port;
        r.set_out_port(1, 3, back);
        let err = r.path(&t, 0, 3, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("loops"), "{err}");
    }
}
