//! Routes per switch-to-switch channel for a schedule's messages: how many paths of a pattern
//! share each channel (the routing-only figure paper 002 compares engines by).

use crate::error::Result;
use crate::routing::metrics::{summarise, ChannelLoad};
use crate::routing::RoutingTable;
use crate::topology::Topology;
use crate::traffic::Schedule;

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
