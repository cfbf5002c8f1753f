//! Per-channel counts of routed traffic: the payload bytes each directed channel carries
//! ([`routed_channel_bytes`]), the routes sharing each channel (the routing-only figure paper
//! 002 compares engines by) and a phase's flows per channel.
//!
//! One channel numbering throughout, the topology's: channel `2·l` runs from link `l`'s end
//! `a` to its end `b`, channel `2·l + 1` back ([`Topology::channel_ends`]).

use crate::error::Result;
use crate::routing::metrics::{summarise, ChannelLoad};
use crate::routing::RoutingTable;
use crate::topology::Topology;
use crate::traffic::dag::TaskGraph;
use crate::traffic::Schedule;

/// Payload bytes routed over each directed channel (host links included), indexed by channel
/// id: every message's bytes on every channel of its route from host `src` to host `dst`
/// (`(src, dst, bytes)`, host indices). Messages within one host cross no channel; totals
/// saturate at `u64::MAX` rather than wrap.
///
/// ```
/// use netweave_core::{analysis::routed_channel_bytes, routing::shortest_path, topology::grid::mesh};
/// let t = mesh(&[3], 1).unwrap();
/// let bytes = routed_channel_bytes(&t, &shortest_path(&t).unwrap(), [(0, 2, 100), (1, 2, 10)]).unwrap();
/// assert_eq!(bytes.iter().max(), Some(&110)); // both cross the switch link 1→2
/// ```
pub fn routed_channel_bytes(
    topo: &Topology,
    routes: &RoutingTable,
    messages: impl IntoIterator<Item = (u32, u32, u64)>,
) -> Result<Vec<u64>> {
    routes.check_fits(topo)?;
    let n = topo.num_hosts();
    let mut bytes_on = vec![0u64; topo.num_channels()];
    let mut path = Vec::new();
    for (src, dst, bytes) in messages {
        if src as usize >= n || dst as usize >= n {
            return crate::invalid!("message {src} -> {dst} names a host outside 0..{}", n.saturating_sub(1));
        }
        if src == dst || bytes == 0 {
            continue;
        }
        path.clear();
        routes.path(topo, src as usize, dst as usize, &mut path)?;
        for &c in &path {
            bytes_on[c as usize] = bytes_on[c as usize].saturating_add(bytes);
        }
    }
    Ok(bytes_on)
}

/// [`routed_channel_bytes`] of every message of `schedule` (all phases), ranks on the hosts
/// its placement names.
pub fn schedule_channel_bytes(topo: &Topology, routes: &RoutingTable, schedule: &Schedule) -> Result<Vec<u64>> {
    schedule.check_fits(topo)?;
    let placement = schedule.placement();
    let messages = schedule.phases().flat_map(|phase| phase.iter());
    routed_channel_bytes(
        topo,
        routes,
        messages.map(|m| (placement[m.src as usize], placement[m.dst as usize], m.bytes)),
    )
}

/// [`routed_channel_bytes`] of every task of `graph`, ranks on the hosts its placement names.
pub fn dag_channel_bytes(topo: &Topology, routes: &RoutingTable, graph: &TaskGraph) -> Result<Vec<u64>> {
    graph.check_fits(topo)?;
    let placement = graph.placement();
    routed_channel_bytes(
        topo,
        routes,
        graph.tasks().iter().map(|m| (placement[m.src as usize], placement[m.dst as usize], m.bytes)),
    )
}

/// Routes per switch-to-switch channel for every message of `schedule` (all phases together):
/// largest and mean over switch-to-switch channels.
///
/// ```
/// use netweave_core::{analysis::pattern_channel_load, routing::shortest_path, topology::grid::mesh, traffic::Schedule};
/// let t = mesh(&[4], 1).unwrap();
/// let load = pattern_channel_load(&t, &shortest_path(&t).unwrap(), &Schedule::shift_alltoall(4, 1).unwrap()).unwrap();
/// assert_eq!(load.max_channel_paths, 4); // the middle link 1→2 carries 0→2, 0→3, 1→2, 1→3
/// ```
pub fn pattern_channel_load(topo: &Topology, routes: &RoutingTable, schedule: &Schedule) -> Result<ChannelLoad> {
    schedule.check_fits(topo)?;
    let placement = schedule.placement();
    let mut counts = vec![0u32; topo.num_channels()];
    let mut path = Vec::new();
    for phase in schedule.phases() {
        for m in phase {
            path.clear();
            routes.path(topo, placement[m.src as usize] as usize, placement[m.dst as usize] as usize, &mut path)?;
            for &c in &path {
                counts[c as usize] += 1;
            }
        }
    }
    let inter_switch: Vec<bool> = (0..topo.num_channels() as u32)
        .map(|c| {
            let (a, b) = topo.channel_ends(c);
            !topo.is_host(a.node) && !topo.is_host(b.node)
        })
        .collect();
    Ok(summarise(&counts, &inter_switch))
}

/// Flows on each directed channel (host links included), indexed by channel id, in phase
/// `phase` of `schedule`: the loads a heat map of that phase draws. Messages between ranks of
/// one host cross no channel.
///
/// ```
/// use netweave_core::{analysis::phase_channel_flows, routing::shortest_path, topology::grid::mesh, traffic::Schedule};
/// let t = mesh(&[4], 1).unwrap();
/// let sched = Schedule::shift_alltoall(4, 1 << 20).unwrap();
/// let flows = phase_channel_flows(&t, &shortest_path(&t).unwrap(), &sched, 1).unwrap();
/// assert_eq!(flows.iter().max(), Some(&2)); // shift by 2: 0→2 and 1→3 share 1→2
/// ```
pub fn phase_channel_flows(
    topo: &Topology,
    routes: &RoutingTable,
    schedule: &Schedule,
    phase: usize,
) -> Result<Vec<u32>> {
    routes.check_fits(topo)?;
    schedule.check_fits(topo)?;
    if phase >= schedule.num_phases() {
        return crate::invalid!("phase {phase} does not exist: the schedule has {} phases", schedule.num_phases());
    }
    let placement = schedule.placement();
    let mut flows = vec![0u32; topo.num_channels()];
    let mut path = Vec::new();
    for m in schedule.phase(phase) {
        let (src, dst) = (placement[m.src as usize] as usize, placement[m.dst as usize] as usize);
        if src == dst {
            continue;
        }
        path.clear();
        routes.path(topo, src, dst, &mut path)?;
        for &c in &path {
            flows[c as usize] += 1;
        }
    }
    Ok(flows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::shortest_path;
    use crate::topology::grid::mesh;
    use crate::topology::ChannelId;

    /// The channel from node `from` to node `to` (numbered as the topology numbers them).
    fn channel(t: &Topology, from: u32, to: u32) -> usize {
        (0..t.num_channels() as ChannelId)
            .find(|&c| {
                let (a, b) = t.channel_ends(c);
                (a.node, b.node) == (from, to)
            })
            .unwrap() as usize
    }

    #[test]
    fn bytes_per_channel_on_a_line_by_hand() {
        // A line of 4 switches, one host each: host h hangs off switch h.
        let t = mesh(&[4], 1).unwrap();
        let r = shortest_path(&t).unwrap();
        let (sw, host) = (|i: usize| t.switches()[i], |i: usize| t.hosts()[i]);
        let bytes = routed_channel_bytes(&t, &r, [(0, 3, 1000), (1, 3, 100), (3, 0, 10), (2, 2, 5)]).unwrap();
        // 0→3 crosses s0→s1→s2→s3, 1→3 crosses s1→s2→s3, 3→0 the way back; 2→2 stays home.
        assert_eq!(bytes[channel(&t, sw(0), sw(1))], 1000);
        assert_eq!(bytes[channel(&t, sw(1), sw(2))], 1100);
        assert_eq!(bytes[channel(&t, sw(2), sw(3))], 1100);
        assert_eq!(bytes[channel(&t, sw(3), sw(2))], 10);
        assert_eq!(bytes[channel(&t, host(0), sw(0))], 1000);
        assert_eq!(bytes[channel(&t, sw(3), host(3))], 1100);
        assert_eq!(bytes[channel(&t, host(3), sw(3))], 10);
        // Every payload byte counted once per channel of its route: 1000 x 5 + 100 x 4 + 10 x 5.
        assert_eq!(bytes.iter().sum::<u64>(), 5000 + 400 + 50);
        assert!(routed_channel_bytes(&t, &r, [(0, 4, 1)]).is_err());
    }

    #[test]
    fn schedule_and_task_graph_forms_count_alike() {
        let t = mesh(&[4], 1).unwrap();
        let r = shortest_path(&t).unwrap();
        let sched = Schedule::shift_alltoall(4, 64).unwrap();
        let a = schedule_channel_bytes(&t, &r, &sched).unwrap();
        let b = dag_channel_bytes(&t, &r, &TaskGraph::from_schedule(&sched).unwrap()).unwrap();
        assert_eq!(a, b);
        // Shift all-to-all on a line of 4: the middle link carries 0,1 → 2,3 one way: 4 pairs x 64.
        let mid = channel(&t, t.switches()[1], t.switches()[2]);
        assert_eq!(a[mid], 4 * 64);
    }
}
