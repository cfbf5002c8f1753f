//! Min Sync's pick without scanning the group's members. `Sync(prev, t)` depends only on `t`'s
//! sender: 0 for prev's sender, else the latency from prev's receiver to it. So the best member
//! is the first unscheduled task of the best *sender*: a group keeps its members as one run per
//! sender, each with a cursor past its scheduled tasks, and a pick looks at senders, not tasks.
//! A host's downlink group has a sender per host but one receiver, so the latencies are fixed:
//! its members are sorted by them once and consumed from the front. This is what keeps a
//! 1,024-host all-to-all (groups of 1,023 senders, trunk groups of 16,000 tasks) at seconds.

use super::grouping::Groups;
use super::paths::PathTable;
use crate::traffic::Message;

/// Downlink-style index: members by (latency from the one receiver, task), with a cursor.
struct ByLatency {
    order: Vec<(u64, u32)>,
    next: usize,
}

/// One group's index, built on first use.
struct GroupIndex {
    /// Members sorted by (sender, task); run `r` is `tasks[run_start[r]..run_start[r + 1]]`.
    tasks: Vec<u32>,
    senders: Vec<u32>,
    run_start: Vec<u32>,
    /// Each run's first possibly unscheduled position.
    run_next: Vec<u32>,
    /// Runs that may still have unscheduled tasks (exhausted ones are dropped, order free).
    active: Vec<u32>,
    single_receiver: Option<(u32, ByLatency)>,
}

impl GroupIndex {
    fn new(members: &[u32], tasks: &[Message], paths: &PathTable) -> GroupIndex {
        let mut by_sender: Vec<(u32, u32)> = members.iter().map(|&t| (tasks[t as usize].src, t)).collect();
        by_sender.sort_unstable();
        let mut index = GroupIndex {
            tasks: by_sender.iter().map(|&(_, t)| t).collect(),
            senders: Vec::new(),
            run_start: Vec::new(),
            run_next: Vec::new(),
            active: Vec::new(),
            single_receiver: None,
        };
        for (i, &(s, _)) in by_sender.iter().enumerate() {
            if index.senders.last() != Some(&s) {
                index.senders.push(s);
                index.run_start.push(i as u32);
            }
        }
        index.run_start.push(by_sender.len() as u32);
        index.run_next = index.run_start[..index.senders.len()].to_vec();
        index.active = (0..index.senders.len() as u32).collect();
        let receiver = tasks[members[0] as usize].dst;
        if members.iter().all(|&t| tasks[t as usize].dst == receiver) {
            let mut order: Vec<(u64, u32)> =
                members.iter().map(|&t| (paths.latency_ps(receiver, tasks[t as usize].src), t)).collect();
            order.sort_unstable();
            index.single_receiver = Some((receiver, ByLatency { order, next: 0 }));
        }
        index
    }

    /// The first unscheduled task of run `r`, moving its cursor past scheduled ones.
    fn first_of_run(&mut self, r: usize, done: &[bool]) -> Option<u32> {
        let end = self.run_start[r + 1];
        let next = &mut self.run_next[r];
        while *next < end && done[self.tasks[*next as usize] as usize] {
            *next += 1;
        }
        (*next < end).then(|| self.tasks[*next as usize])
    }
}

/// Every group's index, each built the first time Min Sync picks in that group.
pub(super) struct MinSyncIndex {
    groups: Vec<Option<GroupIndex>>,
}

impl MinSyncIndex {
    pub fn new(num_groups: usize) -> Self {
        MinSyncIndex { groups: (0..num_groups).map(|_| None).collect() }
    }

    /// The unscheduled member of `g` with the least `Sync(prev, ·)`, ties to the first in task
    /// order; `None` when every member is scheduled.
    pub fn pick(
        &mut self,
        g: u32,
        groups: &Groups,
        tasks: &[Message],
        paths: &PathTable,
        prev: Message,
        done: &[bool],
    ) -> Option<u32> {
        let members = groups.members(g);
        if members.is_empty() {
            return None;
        }
        let index = self.groups[g as usize].get_or_insert_with(|| GroupIndex::new(members, tasks, paths));
        let same_sender = match index.senders.binary_search(&prev.src) {
            Ok(r) => index.first_of_run(r, done),
            Err(_) => None,
        };
        if let Some((_, by_latency)) = index.single_receiver.as_mut().filter(|(r, _)| *r == prev.dst) {
            while by_latency.next < by_latency.order.len() && done[by_latency.order[by_latency.next].1 as usize] {
                by_latency.next += 1;
            }
            let nearest = by_latency.order.get(by_latency.next).copied();
            return match (same_sender, nearest) {
                // A zero-latency member ties with the sync-free one: the earlier task wins.
                (Some(a), Some((0, b))) => Some(a.min(b)),
                (Some(a), _) => Some(a),
                (None, nearest) => nearest.map(|(_, t)| t),
            };
        }
        let mut best: Option<(u64, u32)> = same_sender.map(|t| (0, t));
        let mut i = 0;
        while i < index.active.len() {
            let r = index.active[i] as usize;
            let Some(t) = index.first_of_run(r, done) else {
                index.active.swap_remove(i);
                continue;
            };
            i += 1;
            if index.senders[r] != prev.src {
                let key = paths.latency_ps(prev.dst, index.senders[r]);
                if best.map_or(true, |b| (key, t) < b) {
                    best = Some((key, t));
                }
            }
        }
        best.map(|(_, t)| t)
    }
}
