//! Analysis: exact per-phase directed-link loads — the first evaluation engine.
//!
//! For each phase, every message's routed path is walked and each directed channel counts
//! the messages crossing it. From the counts come the phase's maximum congestion and paper
//! 000's *throughput ratio*: a flow whose most loaded channel carries `c` flows gets `1/c`,
//! and the ratio is the mean over all flows of all phases (1.0 = contention-free).
//!
//! ```
//! use netweave_core::{analysis::analyze, routing::shortest_path, topology::grid::mesh, traffic::Schedule};
//! let topo = mesh(&[4], 1).unwrap();
//! let routes = shortest_path(&topo).unwrap();
//! let sched = Schedule::shift_alltoall(4, 1 << 20).unwrap();
//! let report = analyze(&topo, &routes, &sched).unwrap();
//! assert_eq!(report.max_congestion, 2);      // phase 2: 0→2 and 1→3 share the link 1→2
//! assert!(report.throughput_ratio < 1.0);
//! ```

use serde::Serialize;

use crate::error::Result;
use crate::routing::RoutingTable;
use crate::topology::{ChannelId, Topology};
use crate::traffic::Schedule;

/// Loads of one phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseLoad {
    /// Messages that cross at least one link (self-sends and same-host ranks excluded).
    pub flows: u32,
    /// Largest number of flows on one directed channel.
    pub max_load: u32,
    /// Number of directed channels carrying more than one flow.
    pub contended_channels: u32,
    /// Mean of 1/(max load on the flow's path) over the phase's flows (1.0 if none).
    pub throughput_ratio: f64,
}

/// Result of [`analyze`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadReport {
    pub phases: Vec<PhaseLoad>,
    /// Largest load over all phases and channels.
    pub max_congestion: u32,
    /// Paper 000's ratio: mean of 1/c over all flows of all phases.
    pub throughput_ratio: f64,
    /// Flows counted (messages between different hosts).
    pub flows: u64,
    /// Largest total bytes carried by one directed channel over the whole schedule.
    pub max_channel_bytes: u64,
}

/// Count per-phase channel loads of `schedule` routed by `routes` on `topo`.
///
/// Messages whose ranks share a host never touch the network and are left out of the ratio.
pub fn analyze(topo: &Topology, routes: &RoutingTable, schedule: &Schedule) -> Result<LoadReport> {
    schedule.check_fits(topo)?;
    let placement = schedule.placement();
    let mut load = vec![0u32; topo.num_channels()];
    let mut bytes = vec![0u64; topo.num_channels()];
    // Flat path buffer for one phase: channels of message i are paths[ends[i-1]..ends[i]].
    let mut paths: Vec<ChannelId> = Vec::new();
    let mut ends: Vec<usize> = Vec::new();
    let mut phases = Vec::with_capacity(schedule.num_phases());
    let mut ratio_sum = 0.0;
    let mut flows_total = 0u64;
    for phase in schedule.phases() {
        paths.clear();
        ends.clear();
        for m in phase {
            let (src, dst) = (placement[m.src as usize] as usize, placement[m.dst as usize] as usize);
            if src == dst {
                continue;
            }
            let start = paths.len();
            routes.path(topo, src, dst, &mut paths)?;
            for &c in &paths[start..] {
                load[c as usize] += 1;
                bytes[c as usize] += m.bytes;
            }
            ends.push(paths.len());
        }
        let mut phase_ratio = 0.0;
        let mut start = 0;
        for &end in &ends {
            let worst = paths[start..end].iter().map(|&c| load[c as usize]).max().unwrap_or(1);
            phase_ratio += 1.0 / worst as f64;
            start = end;
        }
        // Reset only what this phase touched, and collect its figures on the way.
        let mut max_load = 0;
        let mut contended = 0;
        for &c in &paths {
            let l = &mut load[c as usize];
            if *l > 0 {
                max_load = max_load.max(*l);
                contended += u32::from(*l > 1);
                *l = 0;
            }
        }
        let flows = ends.len() as u32;
        ratio_sum += phase_ratio;
        flows_total += flows as u64;
        phases.push(PhaseLoad {
            flows,
            max_load,
            contended_channels: contended,
            throughput_ratio: if flows == 0 { 1.0 } else { phase_ratio / flows as f64 },
        });
    }
    Ok(LoadReport {
        max_congestion: phases.iter().map(|p| p.max_load).max().unwrap_or(0),
        throughput_ratio: if flows_total == 0 { 1.0 } else { ratio_sum / flows_total as f64 },
        flows: flows_total,
        max_channel_bytes: bytes.into_iter().max().unwrap_or(0),
        phases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::shortest_path;
    use crate::topology::{LinkSpec, TopologyBuilder};
    use crate::traffic::Message;

    /// `leaves` switches with `per_leaf` hosts each, all joined to one spine by a single link.
    fn two_level(leaves: u32, per_leaf: u32) -> Topology {
        let mut b = TopologyBuilder::new("tree");
        let spine = b.add_switch("spine", leaves as u16);
        for l in 0..leaves {
            let leaf = b.add_switch(format!("leaf{l}"), (per_leaf + 1) as u16);
            b.connect(leaf, spine, LinkSpec::default()).unwrap();
            for h in 0..per_leaf {
                let host = b.add_host(format!("h{l}.{h}"));
                b.connect(host, leaf, LinkSpec::default()).unwrap();
            }
        }
        b.build().unwrap()
    }

    #[test]
    fn single_uplink_tree_has_closed_form_congestion() {
        // With k hosts per leaf behind one uplink, a shift phase that sends every host off-leaf
        // loads each uplink with k flows.
        let t = two_level(3, 4);
        let r = shortest_path(&t).unwrap();
        let s = Schedule::shift_alltoall(12, 100).unwrap();
        let rep = analyze(&t, &r, &s).unwrap();
        assert_eq!(rep.max_congestion, 4);
        assert_eq!(rep.flows, 12 * 11);
        assert_eq!(rep.phases[3].max_load, 4); // phase i=4: every host sends to the next leaf
        assert!((rep.phases[3].throughput_ratio - 0.25).abs() < 1e-12);
        // The spine-to-leaf channel carries 4 hosts × 8 off-leaf peers × 100 bytes.
        assert_eq!(rep.max_channel_bytes, 4 * 8 * 100);
    }

    #[test]
    fn disjoint_flows_are_contention_free() {
        let t = two_level(2, 2);
        let r = shortest_path(&t).unwrap();
        let phase = vec![Message { src: 0, dst: 1, bytes: 1 }, Message { src: 2, dst: 3, bytes: 1 }];
        let s = Schedule::from_phases("p", 4, vec![phase]).unwrap();
        let rep = analyze(&t, &r, &s).unwrap();
        assert_eq!(rep.max_congestion, 1);
        assert_eq!(rep.throughput_ratio, 1.0);
        assert_eq!(rep.phases[0].contended_channels, 0);
    }

    #[test]
    fn ranks_sharing_a_host_do_not_count() {
        let t = two_level(2, 2);
        let r = shortest_path(&t).unwrap();
        let s = Schedule::shift_alltoall(2, 1).unwrap().with_placement(vec![1, 1]).unwrap();
        let rep = analyze(&t, &r, &s).unwrap();
        assert_eq!(rep.flows, 0);
        assert_eq!(rep.throughput_ratio, 1.0);
        let off = Schedule::shift_alltoall(2, 1).unwrap().with_placement(vec![0, 9]).unwrap();
        assert!(analyze(&t, &r, &off).is_err());
    }
}
