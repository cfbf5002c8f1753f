//! The dependency-DAG schedule form (paper 004): transfers as *tasks* with ordering edges.
//!
//! A [`TaskGraph`] holds point-to-point tasks between ranks and, for each task, the tasks it
//! must wait for. An edge says how the wait is met:
//!
//! - [`Dependency::Complete`]: the successor starts once the predecessor has *completely*
//!   finished. An executor learns that the way paper 004's runtime does: if both tasks have
//!   the same sender, the sender knows as soon as its data has left (no message); if the
//!   predecessor's receiver is the successor's sender, it knows on reception; otherwise the
//!   receiver sends a 1-byte sync message to the successor's sender.
//! - [`Dependency::Relay`]: the successor forwards the predecessor's data (cut-through
//!   relaying, a task split into pieces `W→X→Y`). It may start as soon as the head of the
//!   predecessor's data reaches the relay host, and its tail cannot leave before the
//!   predecessor's tail has arrived. The successor's sender must be the predecessor's receiver.
//!
//! Predecessors are stored flat (CSR), so a million-task graph is a few arrays.
//!
//! ```
//! use netweave_core::traffic::dag::{Dependency, TaskGraph};
//! use netweave_core::traffic::Message;
//! let mut g = TaskGraph::new("relay", 3);
//! let a = g.add_task(Message { src: 0, dst: 1, bytes: 1000 }, &[]).unwrap();
//! let b = g.add_task(Message { src: 1, dst: 2, bytes: 1000 }, &[(a, Dependency::Relay)]).unwrap();
//! assert_eq!(g.predecessors(b), &[(a, Dependency::Relay)]);
//! ```

use serde::{Deserialize, Serialize};

use crate::error::{NetweaveError, Result};
use crate::topology::Topology;
use crate::traffic::{Message, Schedule};

/// How a task waits for one predecessor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dependency {
    /// Start after the predecessor has completely finished (sync message if needed).
    Complete,
    /// Forward the predecessor's data as it arrives (cut-through relay).
    Relay,
}

/// Index of a task in a [`TaskGraph`].
pub type TaskId = u32;

/// Transfers between ranks with ordering dependencies, and where each rank runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskGraph {
    name: String,
    num_ranks: u32,
    placement: Vec<u32>,
    tasks: Vec<Message>,
    /// Predecessors of task `t` are `preds[pred_offsets[t]..pred_offsets[t + 1]]`.
    pred_offsets: Vec<u32>,
    preds: Vec<(TaskId, Dependency)>,
}

/// One task as written in files: the transfer and the tasks it waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    /// Tasks this one starts after, once they have completely finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<TaskId>,
    /// The task whose data this one forwards (cut-through relay), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relays: Option<TaskId>,
}

/// The JSON file form of a [`TaskGraph`]: a netweave schedule file of form `"dag"`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskGraphFile {
    /// Always `"netweave-schedule"`.
    pub format: String,
    pub version: u32,
    /// Always `"dag"` (phased schedules say `"phases"`).
    pub form: String,
    pub name: String,
    pub num_ranks: u32,
    /// Host index of each rank; ranks `0..num_ranks` on hosts `0..num_ranks` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Vec<u32>>,
    pub tasks: Vec<TaskRecord>,
}

/// The `format` tag of schedule files, DAGs included.
pub const SCHEDULE_FORMAT: &str = "netweave-schedule";
/// The `form` tag of DAG schedule files.
pub const DAG_FORM: &str = "dag";

impl TaskGraph {
    /// An empty graph over `num_ranks` ranks placed on hosts `0..num_ranks`.
    pub fn new(name: impl Into<String>, num_ranks: u32) -> Self {
        TaskGraph {
            name: name.into(),
            num_ranks,
            placement: (0..num_ranks).collect(),
            tasks: Vec::new(),
            pred_offsets: vec![0],
            preds: Vec::new(),
        }
    }

    /// Make room for `tasks` more tasks with `deps` dependencies between them, so building a
    /// large graph does not copy it over and over as it grows.
    pub fn reserve(&mut self, tasks: usize, deps: usize) {
        self.tasks.reserve(tasks);
        self.pred_offsets.reserve(tasks);
        self.preds.reserve(deps);
    }

    /// Append a task waiting for `deps` (which must already exist, so the graph stays acyclic).
    /// A relay edge needs the task's sender to be the predecessor's receiver, and a task relays
    /// at most one predecessor.
    pub fn add_task(&mut self, task: Message, deps: &[(TaskId, Dependency)]) -> Result<TaskId> {
        let id = self.tasks.len() as TaskId;
        if task.src >= self.num_ranks || task.dst >= self.num_ranks {
            return Err(NetweaveError::Schedule(format!(
                "task {id} ({} -> {}) names a rank outside 0..{}",
                task.src, task.dst, self.num_ranks
            )));
        }
        let mut relays = 0;
        for &(p, kind) in deps {
            if p >= id {
                return Err(NetweaveError::Schedule(format!(
                    "task {id} depends on task {p}, which is not an earlier task (dependencies must point backwards)"
                )));
            }
            if kind == Dependency::Relay {
                relays += 1;
                let pred = self.tasks[p as usize];
                if pred.dst != task.src {
                    return Err(NetweaveError::Schedule(format!(
                        "task {id} relays task {p}, but it is sent by rank {} and task {p} is received by rank {}",
                        task.src, pred.dst
                    )));
                }
            }
        }
        if relays > 1 {
            return Err(NetweaveError::Schedule(format!("task {id} relays more than one task")));
        }
        self.tasks.push(task);
        // Stored sorted and without repeats, so equal graphs compare equal however built.
        let start = self.preds.len();
        self.preds.extend_from_slice(deps);
        if deps.windows(2).all(|w| w[0] < w[1]) {
            // Already in order (the stage scheduler emits its predecessors so): nothing to do.
            self.pred_offsets.push(self.preds.len() as u32);
            return Ok(id);
        }
        self.preds[start..].sort_unstable();
        let mut keep = start;
        for i in start..self.preds.len() {
            if keep == start || self.preds[keep - 1] != self.preds[i] {
                self.preds[keep] = self.preds[i];
                keep += 1;
            }
        }
        self.preds.truncate(keep);
        self.pred_offsets.push(self.preds.len() as u32);
        Ok(id)
    }

    /// Place rank `r` on host index `placement[r]`.
    pub fn with_placement(mut self, placement: Vec<u32>) -> Result<Self> {
        if placement.len() != self.num_ranks as usize {
            return Err(NetweaveError::Schedule(format!(
                "placement lists {} hosts for {} ranks",
                placement.len(),
                self.num_ranks
            )));
        }
        self.placement = placement;
        Ok(self)
    }

    /// The phased schedule as a DAG: every task of phase `p` waits for every task of phase
    /// `p − 1` that shares its sender or receiver (the local-sync order of paper 001).
    pub fn from_schedule(schedule: &Schedule) -> Result<Self> {
        let n = schedule.num_ranks();
        let mut g = TaskGraph::new(schedule.name(), n);
        // Last phase's tasks by rank they touch, as flat lists.
        let mut prev_by_rank: Vec<Vec<TaskId>> = vec![Vec::new(); n as usize];
        let mut cur_by_rank: Vec<Vec<TaskId>> = vec![Vec::new(); n as usize];
        let mut deps = Vec::new();
        for phase in schedule.phases() {
            for m in phase {
                deps.clear();
                for r in [m.src, m.dst] {
                    deps.extend(prev_by_rank[r as usize].iter().map(|&t| (t, Dependency::Complete)));
                }
                deps.sort_unstable_by_key(|d| d.0);
                deps.dedup();
                let id = g.add_task(*m, &deps)?;
                cur_by_rank[m.src as usize].push(id);
                if m.dst != m.src {
                    cur_by_rank[m.dst as usize].push(id);
                }
            }
            std::mem::swap(&mut prev_by_rank, &mut cur_by_rank);
            cur_by_rank.iter_mut().for_each(Vec::clear);
        }
        g.with_placement(schedule.placement().to_vec())
    }

    /// The phased schedule as a DAG that runs it in barrier-separated groups of phases:
    /// `group_lengths` (phase counts, summing to the schedule's phases) cut the phases into
    /// groups; inside a group every rank sends its messages in phase order with no wait, and
    /// between two groups every rank takes part in a barrier, so group `g + 1` starts only after
    /// every message of group `g` has arrived. Groups of one phase are the phase-synchronous
    /// (`sync`) order; one group of every phase is each rank's send order with no wait at all.
    ///
    /// The barrier is built from zero-byte tasks along a binomial tree on the ranks (a rank
    /// reports to the rank with its lowest set bit cleared, rank 0 releases them back down), so
    /// it costs `2·(n − 1)` messages of no payload and no 1-byte sync: every edge of it joins
    /// tasks of the same rank. Only direct delivery can be grouped: a forwarded message needs
    /// the receive of the phase before it, which a group of several phases does not wait for.
    ///
    /// ```
    /// use netweave_core::traffic::{dag::TaskGraph, Schedule};
    /// let s = Schedule::shift_alltoall(4, 8).unwrap();
    /// let g = TaskGraph::with_barriers(&s, &[2, 1]).unwrap();
    /// assert_eq!(g.num_tasks(), 12 + 2 * 3);   // the messages and one barrier of 3 + 3 tasks
    /// assert!(TaskGraph::with_barriers(&s, &[2]).is_err()); // the groups must cover every phase
    /// ```
    pub fn with_barriers(schedule: &Schedule, group_lengths: &[usize]) -> Result<Self> {
        // A group is a merged phase; the schedule-level form checks the groups and the delivery.
        let merged = schedule.clone().with_phases_merged(group_lengths)?;
        let n = merged.num_ranks();
        let barrier_tasks = 2 * n.saturating_sub(1) as usize * merged.num_phases().saturating_sub(1);
        let mut g = TaskGraph::new(merged.name(), n);
        g.reserve(merged.num_messages() + barrier_tasks, merged.num_messages() + 3 * barrier_tasks);
        // What each rank must have finished before it may start the next group: its own tasks of
        // the group, then (after a barrier) the release it received.
        let mut waits: Vec<Vec<TaskId>> = vec![Vec::new(); n as usize];
        let mut in_group: Vec<Vec<TaskId>> = vec![Vec::new(); n as usize];
        let mut deps = Vec::new();
        for (index, group) in merged.phases().enumerate() {
            for m in group {
                deps.clear();
                deps.extend(waits[m.src as usize].iter().map(|&t| (t, Dependency::Complete)));
                let id = g.add_task(*m, &deps)?;
                in_group[m.src as usize].push(id);
                if m.dst != m.src {
                    in_group[m.dst as usize].push(id);
                }
            }
            if index + 1 < merged.num_phases() {
                g.add_barrier(&mut in_group, &mut waits)?;
            }
        }
        g.with_placement(merged.placement().to_vec())
    }

    /// Append a binomial-tree barrier over every rank, after each rank's tasks in `finished`
    /// (emptied), and leave in `waits` what each rank's next task must wait for.
    fn add_barrier(&mut self, finished: &mut [Vec<TaskId>], waits: &mut [Vec<TaskId>]) -> Result<()> {
        let n = self.num_ranks;
        let parent = |r: u32| r & (r - 1); // the binomial tree: clear the lowest set bit
        let mut reported: Vec<Vec<TaskId>> = vec![Vec::new(); n as usize];
        let mut deps = Vec::new();
        // Children have higher ranks than their parent, so reporting from the top rank down
        // meets every child's report before its parent's.
        for r in (1..n).rev() {
            deps.clear();
            deps.extend(finished[r as usize].iter().chain(&reported[r as usize]).map(|&t| (t, Dependency::Complete)));
            let id = self.add_task(Message { src: r, dst: parent(r), bytes: 0 }, &deps)?;
            reported[parent(r) as usize].push(id);
        }
        // Rank 0 has heard from everyone once its children have reported; it releases its
        // children, each of which releases its own once released.
        waits[0] = finished[0].iter().chain(&reported[0]).copied().collect();
        for r in 1..n {
            deps.clear();
            deps.extend(waits[parent(r) as usize].iter().map(|&t| (t, Dependency::Complete)));
            let id = self.add_task(Message { src: parent(r), dst: r, bytes: 0 }, &deps)?;
            waits[r as usize] = vec![id];
        }
        finished.iter_mut().for_each(Vec::clear);
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn num_ranks(&self) -> u32 {
        self.num_ranks
    }
    pub fn num_tasks(&self) -> usize {
        self.tasks.len()
    }
    /// Number of dependency edges.
    pub fn num_dependencies(&self) -> usize {
        self.preds.len()
    }
    pub fn tasks(&self) -> &[Message] {
        &self.tasks
    }
    pub fn task(&self, t: TaskId) -> Message {
        self.tasks[t as usize]
    }
    /// Predecessors of task `t` and how `t` waits for each, sorted by task.
    pub fn predecessors(&self, t: TaskId) -> &[(TaskId, Dependency)] {
        &self.preds[self.pred_offsets[t as usize] as usize..self.pred_offsets[t as usize + 1] as usize]
    }
    /// Host index of each rank.
    pub fn placement(&self) -> &[u32] {
        &self.placement
    }

    /// Check the placement fits `topo`: every rank on an existing host.
    pub fn check_fits(&self, topo: &Topology) -> Result<()> {
        if let Some((r, &h)) = self.placement.iter().enumerate().find(|(_, &h)| h as usize >= topo.num_hosts()) {
            return Err(NetweaveError::Schedule(format!(
                "rank {r} is placed on host {h}, but the topology has {} hosts",
                topo.num_hosts()
            )));
        }
        Ok(())
    }

    /// The file form.
    pub fn to_file(&self) -> TaskGraphFile {
        let tasks = (0..self.tasks.len() as TaskId)
            .map(|t| {
                let m = self.task(t);
                let mut rec = TaskRecord { src: m.src, dst: m.dst, bytes: m.bytes, after: Vec::new(), relays: None };
                for &(p, kind) in self.predecessors(t) {
                    match kind {
                        Dependency::Complete => rec.after.push(p),
                        Dependency::Relay => rec.relays = Some(p),
                    }
                }
                rec
            })
            .collect();
        let identity = self.placement.iter().enumerate().all(|(r, &h)| r as u32 == h);
        TaskGraphFile {
            format: SCHEDULE_FORMAT.into(),
            version: 1,
            form: DAG_FORM.into(),
            name: self.name.clone(),
            num_ranks: self.num_ranks,
            placement: (!identity).then(|| self.placement.clone()),
            tasks,
        }
    }

    /// Build from the file form, checking every task and edge.
    pub fn from_file(file: TaskGraphFile) -> Result<Self> {
        if file.format != SCHEDULE_FORMAT || file.form != DAG_FORM {
            return Err(NetweaveError::Schedule(format!(
                "not a DAG schedule file (format '{}', form '{}'; want '{SCHEDULE_FORMAT}', '{DAG_FORM}')",
                file.format, file.form
            )));
        }
        if file.version != 1 {
            return Err(NetweaveError::Schedule(format!(
                "DAG file version {} is not supported (want 1)",
                file.version
            )));
        }
        let mut g = TaskGraph::new(file.name, file.num_ranks);
        let mut deps = Vec::new();
        for rec in file.tasks {
            deps.clear();
            deps.extend(rec.after.iter().map(|&p| (p, Dependency::Complete)));
            deps.extend(rec.relays.map(|p| (p, Dependency::Relay)));
            g.add_task(Message { src: rec.src, dst: rec.dst, bytes: rec.bytes }, &deps)?;
        }
        match file.placement {
            Some(p) => g.with_placement(p),
            None => Ok(g),
        }
    }

    /// JSON text of the file form.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.to_file()).expect("task graphs always serialise")
    }

    /// Parse JSON text of the file form.
    pub fn from_json(text: &str) -> Result<Self> {
        let file: TaskGraphFile = serde_json::from_str(text).map_err(|e| NetweaveError::Parse {
            format: "DAG JSON",
            line: e.line(),
            message: e.to_string(),
        })?;
        Self::from_file(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_must_point_backwards_and_relays_must_chain() {
        let mut g = TaskGraph::new("g", 3);
        let a = g.add_task(Message { src: 0, dst: 1, bytes: 1 }, &[]).unwrap();
        assert!(g.add_task(Message { src: 0, dst: 2, bytes: 1 }, &[(5, Dependency::Complete)]).is_err());
        let err = g.add_task(Message { src: 2, dst: 0, bytes: 1 }, &[(a, Dependency::Relay)]).unwrap_err();
        assert!(err.to_string().contains("relays task 0"), "{err}");
        assert!(g.add_task(Message { src: 0, dst: 9, bytes: 1 }, &[]).is_err());
        assert_eq!(g.num_tasks(), 1);
    }

    #[test]
    fn json_round_trip_keeps_everything() {
        let mut g = TaskGraph::new("rt", 3);
        let a = g.add_task(Message { src: 0, dst: 1, bytes: 10 }, &[]).unwrap();
        let b = g.add_task(Message { src: 2, dst: 0, bytes: 20 }, &[(a, Dependency::Complete)]).unwrap();
        g.add_task(Message { src: 1, dst: 2, bytes: 10 }, &[(a, Dependency::Relay), (b, Dependency::Complete)])
            .unwrap();
        let g = g.with_placement(vec![2, 0, 1]).unwrap();
        let back = TaskGraph::from_json(&g.to_json()).unwrap();
        assert_eq!(back, g);
        assert!(TaskGraph::from_json(
            "{\"format\":\"x\",\"version\":1,\"form\":\"dag\",\"name\":\"\",\"num_ranks\":1,\"tasks\":[]}"
        )
        .is_err());
    }

    #[test]
    fn schedule_becomes_local_sync_order() {
        let s = Schedule::shift_alltoall(4, 8).unwrap();
        let g = TaskGraph::from_schedule(&s).unwrap();
        assert_eq!(g.num_tasks(), 12);
        // Phase 1, rank 0 -> 2 waits for phase 0's tasks touching rank 0 (0->1, 3->0) and rank 2 (1->2, 2->3).
        let t = 4;
        assert_eq!(g.task(t), Message { src: 0, dst: 2, bytes: 8 });
        let preds: Vec<TaskId> = g.predecessors(t).iter().map(|p| p.0).collect();
        assert_eq!(preds, vec![0, 1, 2, 3]);
    }
}
