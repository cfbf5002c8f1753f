//! Phases that can share one barrier on shallow-buffer Ethernet.
//!
//! A contention-free phased schedule pays one synchronisation per phase, and with small
//! messages those synchronisations are most of its time. What a drop-tail Ethernet switch
//! cannot take is not two flows on one link but more bytes converging on one output port than
//! its queue holds. So consecutive phases may run between the same two barriers as long as,
//! on every switch output port, the bytes all of their messages route through it fit the
//! port's buffer: even if every one of them arrived at once, nothing would be dropped. With
//! 1 KiB per pair and 64 KiB buffers that merges some sixty phases of one flow per port; at
//! 64 KiB and more every phase keeps its own barrier. [`TaskGraph::with_barriers`] runs the
//! groups.
//!
//! What it does not see: bytes still queued from before the barrier (there are none — a
//! barrier waits for every message to arrive) and traffic outside the schedule.
//!
//! ```
//! use netweave_core::routing::{route, Engine, RouteOptions};
//! use netweave_core::topology::{ethernet, LinkSpec};
//! use netweave_core::traffic::{phase_groups::buffer_groups, Schedule};
//! let l = ethernet::TreeLevel { fanout: 2, link: LinkSpec::default() };
//! let tree = ethernet::switch_tree(&[l], 4, LinkSpec::default()).unwrap();
//! let routes = route(&tree, Engine::UpDown, &RouteOptions::default()).unwrap();
//! let small = Schedule::shift_alltoall(8, 1024).unwrap();
//! assert_eq!(buffer_groups(&tree, &routes, &small, 64 * 1024).unwrap().len(), 1);
//! let large = Schedule::shift_alltoall(8, 64 * 1024).unwrap();
//! assert_eq!(buffer_groups(&tree, &routes, &large, 64 * 1024).unwrap(), vec![1; 7]);
//! ```
//!
//! [`TaskGraph::with_barriers`]: super::dag::TaskGraph::with_barriers

use super::{Delivery, Schedule};
use crate::error::Result;
use crate::invalid;
use crate::routing::RoutingTable;
use crate::topology::link_layer::ethernet_queued_bytes;
use crate::topology::Topology;

/// Cut `schedule`'s phases, in order, into the longest runs whose messages put at most
/// `buffer_bytes` (headers included) on every switch output port; a phase that alone puts
/// more on a port stays a run of its own. Returns each run's length in phases. Only direct
/// delivery can be grouped (a forwarded message waits for a receive of the phase before it),
/// so a forwarded schedule gets one phase per run.
pub fn buffer_groups(
    topo: &Topology,
    routes: &RoutingTable,
    schedule: &Schedule,
    buffer_bytes: u64,
) -> Result<Vec<usize>> {
    if buffer_bytes == 0 {
        return invalid!("a port buffer of 0 bytes holds nothing; give the switch ports' buffer in bytes");
    }
    schedule.check_fits(topo)?;
    routes.check_fits(topo)?;
    if schedule.delivery() != Delivery::Direct {
        return Ok(vec![1; schedule.num_phases()]);
    }
    // Which channels leave a switch: only those queue in a switch port (a host's own NIC
    // queue back-pressures its sender instead of dropping).
    let switch_port = |c: u32| !topo.is_host(topo.channel_ends(c).0.node);
    let placement = schedule.placement();
    let mut queued = vec![0u64; topo.num_channels()];
    let mut touched: Vec<u32> = Vec::new();
    let mut paths: Vec<u32> = Vec::new();
    let mut path_offsets = vec![0usize];
    let mut path = Vec::new();
    let mut groups = Vec::new();
    let mut run = 0;
    for phase in schedule.phases() {
        // The phase's own load, path by path, so it can be added to the run or start a new one.
        paths.clear();
        path_offsets.truncate(1);
        for m in phase {
            if m.src != m.dst && m.bytes > 0 {
                path.clear();
                routes.path(topo, placement[m.src as usize] as usize, placement[m.dst as usize] as usize, &mut path)?;
                paths.extend(path.iter().copied().filter(|&c| switch_port(c)));
            }
            path_offsets.push(paths.len());
        }
        let fits = |queued: &mut Vec<u64>, touched: &mut Vec<u32>| {
            let mut ok = true;
            for (m, w) in phase.iter().zip(path_offsets.windows(2)) {
                for &c in &paths[w[0]..w[1]] {
                    if queued[c as usize] == 0 {
                        touched.push(c);
                    }
                    queued[c as usize] += ethernet_queued_bytes(m.bytes);
                    ok &= queued[c as usize] <= buffer_bytes;
                }
            }
            ok
        };
        if run > 0 && !fits(&mut queued, &mut touched) {
            groups.push(run);
            run = 0;
            touched.iter().for_each(|&c| queued[c as usize] = 0);
            touched.clear();
            fits(&mut queued, &mut touched);
        } else if run == 0 {
            fits(&mut queued, &mut touched);
        }
        run += 1;
    }
    if run > 0 {
        groups.push(run);
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::{ethernet, LinkSpec};
    use crate::traffic::dag::{Dependency, TaskGraph};

    fn tree(edges: u32, hosts: u32) -> (Topology, RoutingTable) {
        let l = ethernet::TreeLevel { fanout: edges, link: LinkSpec::default() };
        let t = ethernet::switch_tree(&[l], hosts, LinkSpec::default()).unwrap();
        let r = route(&t, Engine::UpDown, &RouteOptions::default()).unwrap();
        (t, r)
    }

    /// The largest number of queued bytes any switch port gets from one run of phases,
    /// counted independently of `buffer_groups`: every message's path, hop by hop.
    fn worst_port(topo: &Topology, routes: &RoutingTable, s: &Schedule, first: usize, len: usize) -> u64 {
        let mut per = std::collections::HashMap::new();
        let mut path = Vec::new();
        for p in first..first + len {
            for m in s.phase(p) {
                path.clear();
                routes.path(topo, m.src as usize, m.dst as usize, &mut path).unwrap();
                for &c in &path[1..] {
                    *per.entry(c).or_insert(0u64) += ethernet_queued_bytes(m.bytes);
                }
            }
        }
        per.values().copied().max().unwrap_or(0)
    }

    #[test]
    fn every_run_fits_and_none_could_take_the_next_phase() {
        let (t, r) = tree(3, 4);
        for bytes in [512u64, 4096, 20_000, 70_000] {
            let s = Schedule::shift_alltoall(12, bytes).unwrap();
            let buffer = 64 * 1024;
            let groups = buffer_groups(&t, &r, &s, buffer).unwrap();
            assert_eq!(groups.iter().sum::<usize>(), s.num_phases());
            let mut first = 0;
            for (i, &len) in groups.iter().enumerate() {
                let worst = worst_port(&t, &r, &s, first, len);
                assert!(len == 1 || worst <= buffer, "{bytes} B: run {i} puts {worst} bytes on a port");
                if i + 1 < groups.len() {
                    assert!(worst_port(&t, &r, &s, first, len + 1) > buffer, "{bytes} B: run {i} could be longer");
                }
                first += len;
            }
        }
    }

    #[test]
    fn forwarded_schedules_and_empty_buffers() {
        let (t, r) = tree(2, 4);
        let bruck = crate::traffic::alltoall::bruck(8, 64).unwrap();
        assert_eq!(buffer_groups(&t, &r, &bruck, 1 << 30).unwrap(), vec![1; bruck.num_phases()]);
        assert!(TaskGraph::with_barriers(&bruck, &[bruck.num_phases()]).is_err());
        let s = Schedule::shift_alltoall(8, 64).unwrap();
        let err = buffer_groups(&t, &r, &s, 0).unwrap_err().to_string();
        assert!(err.contains("0 bytes"), "{err}");
    }

    /// Tasks that cannot start before task `a`'s data has arrived: those reached from `a` by
    /// dependency edges whose first edge leads to a task of `a`'s receiver (only the receiver
    /// knows when data has arrived; `a`'s sender only knows when it left).
    fn after_arrival_of(g: &TaskGraph, a: u32) -> Vec<bool> {
        let mut successors = vec![Vec::new(); g.num_tasks()];
        for t in 0..g.num_tasks() as u32 {
            for &(p, _) in g.predecessors(t) {
                successors[p as usize].push(t);
            }
        }
        let mut seen = vec![false; g.num_tasks()];
        let mut stack: Vec<u32> =
            successors[a as usize].iter().copied().filter(|&t| g.task(t).src == g.task(a).dst).collect();
        while let Some(t) = stack.pop() {
            if !std::mem::replace(&mut seen[t as usize], true) {
                stack.extend(&successors[t as usize]);
            }
        }
        seen
    }

    #[test]
    fn barriers_hold_every_group_until_the_last_one_arrived() {
        for n in [2u32, 3, 5, 8, 13] {
            let s = Schedule::shift_alltoall(n, 100).unwrap();
            let phases = s.num_phases();
            let groups: Vec<usize> = if phases >= 3 { vec![1, phases - 2, 1] } else { vec![1; phases] };
            let g = TaskGraph::with_barriers(&s, &groups).unwrap();
            let barriers = groups.len().saturating_sub(1);
            assert_eq!(g.num_tasks(), s.num_messages() + 2 * (n as usize).saturating_sub(1) * barriers);
            // Every dependency joins two tasks of one rank: no 1-byte sync is needed.
            for t in 0..g.num_tasks() as u32 {
                let me = g.task(t);
                for &(p, kind) in g.predecessors(t) {
                    let q = g.task(p);
                    assert_eq!(kind, Dependency::Complete);
                    assert!(q.src == me.src || q.dst == me.src, "task {t} waits on task {p} of other ranks");
                }
            }
            // Data tasks come in schedule order; tag each with its group.
            let mut group_of_message = Vec::new();
            for (i, &len) in groups.iter().enumerate() {
                for p in 0..len {
                    let phase = groups[..i].iter().sum::<usize>() + p;
                    group_of_message.extend(std::iter::repeat(i).take(s.phase(phase).len()));
                }
            }
            let data: Vec<(u32, usize)> =
                (0..g.num_tasks() as u32).filter(|&t| g.task(t).bytes > 0).zip(group_of_message).collect();
            assert_eq!(data.len(), s.num_messages());
            for &(a, ga) in &data {
                let later = after_arrival_of(&g, a);
                for &(b, gb) in &data {
                    assert_eq!(
                        later[b as usize],
                        gb > ga,
                        "n={n}: task {b} (group {gb}) against task {a} (group {ga})"
                    );
                }
            }
        }
    }
}
