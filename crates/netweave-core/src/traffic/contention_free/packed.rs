//! The packing stage scheduler: the DAG of a contention-free phased order, with no more waiting
//! than the links need.
//!
//! The paper's stage scheduler (`stages.rs`) places one task per stage, from the group with the
//! most remaining cost; its chains follow the grouping, and Rule B's catch-all group G0 on a
//! fast trunk serialises every source that did not get a group of its own — on a 2 × 14 tree
//! that chain alone is longer than a host's whole work. Here the order comes from the
//! contention-free phases of [`tree_phased::phase_order`] (every stage filled with every task
//! that fits: Faraj and Yuan's tree schedule for an all-to-all, first-fit packing for any other
//! task list), and the dependencies from *lanes*: a directed link that serves `c` flows at once
//! has `c` lanes, the k-th task of a phase to cross it takes lane k, and a task waits only for
//! the previous task of each of its lanes. At most `c` tasks then hold a link at any time —
//! contention-free by construction — while a task never waits for a phase it shares nothing
//! with (the local synchronisation of the phased schedule, made link-aware).

use super::paths::PathTable;
use super::stages::Stages;
use crate::topology::Topology;
use crate::traffic::tree_phased;
use crate::traffic::Message;

/// The packed schedule of `tasks` on `paths` as [`Stages`] (no relay pieces), so the DAG, the
/// cost-model replay and the summary read it like the paper's.
pub fn schedule(topo: &Topology, paths: &PathTable, tasks: &[Message]) -> Stages {
    let order = tree_phased::phase_order(topo, paths, tasks);
    let n = tasks.len();
    let mut out = Stages::with_capacity(n);
    // Lane tails per directed link (positions in `order`), and lanes taken in this phase.
    let lane_base: Vec<usize> = std::iter::once(0)
        .chain(order.capacity.iter().scan(0usize, |acc, &c| {
            *acc += c as usize;
            Some(*acc)
        }))
        .collect();
    let mut tail = vec![u32::MAX; *lane_base.last().unwrap_or(&0)];
    let mut taken = vec![0u32; order.capacity.len()];
    for phase in &order.phases {
        for &t in phase {
            let m = tasks[t as usize];
            let k = out.order.len() as u32;
            let first = out.preds.len();
            for &l in paths.path(m.src, m.dst) {
                let lane = lane_base[l as usize] + taken[l as usize] as usize;
                taken[l as usize] += 1;
                if tail[lane] != u32::MAX {
                    out.preds.push(tail[lane]);
                }
                tail[lane] = k;
            }
            out.preds[first..].sort_unstable();
            let mut keep = first;
            for i in first..out.preds.len() {
                if keep == first || out.preds[keep - 1] != out.preds[i] {
                    out.preds[keep] = out.preds[i];
                    keep += 1;
                }
            }
            out.preds.truncate(keep);
            out.pred_off.push(out.preds.len() as u32);
            out.relays.push(u32::MAX);
            out.order.push(t);
        }
        for &t in phase {
            let m = tasks[t as usize];
            for &l in paths.path(m.src, m.dst) {
                taken[l as usize] = 0;
            }
        }
    }
    out
}
