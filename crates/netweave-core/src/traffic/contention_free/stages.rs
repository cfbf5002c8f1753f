//! The stage scheduler (paper 004 §5.1–§5.4) and the cost-model replay (§5.4.4).
//!
//! Each stage takes the group with the largest remaining cost `R = Σ C` of its unscheduled
//! tasks (ties: lowest group number), picks one of its unscheduled tasks by the policy, and
//! appends that task to every group it belongs to: the previous tail of each of those groups
//! becomes a predecessor ("start after it has completely finished").

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::group_queue::GroupQueue;
use super::grouping::Groups;
use super::min_sync::MinSyncIndex;
use super::paths::PathTable;
use super::relay::{GroupState, RelayRule, Relayer};
use crate::error::Result;
use crate::traffic::Message;

/// How a stage picks a task from the selected group (§5.4.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Smallest sync cost against the group's previous task (the thesis' proposal).
    #[default]
    MinSync,
    /// Largest sync cost.
    MaxSync,
    /// Smallest `C`.
    MinCost,
    /// Largest `C`.
    MaxCost,
    /// Uniformly at random (seeded, so every host draws the same).
    Random,
}

impl Policy {
    /// Every policy with its command-line name.
    pub const ALL: [(Policy, &'static str); 5] = [
        (Policy::MinSync, "min-sync"),
        (Policy::MaxSync, "max-sync"),
        (Policy::MinCost, "min-cost"),
        (Policy::MaxCost, "max-cost"),
        (Policy::Random, "random"),
    ];

    /// The policy named `name` (`min-sync`, `max-sync`, `min-cost`, `max-cost`, `random`).
    pub fn by_name(name: &str) -> Result<Policy> {
        match Self::ALL.iter().find(|(_, n)| *n == name) {
            Some(&(p, _)) => Ok(p),
            None => crate::invalid!(
                "unknown task policy '{name}' (use {})",
                Self::ALL.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(p, _)| *p == self).unwrap().1
    }
}

/// How a group's time `T_g` (5.3), which the relay decision reads, advances (§6 question 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Timing {
    /// As (5.3) is written: the sum of the group's task costs and the syncs between them.
    #[default]
    Sum,
    /// A clock: a task starts when the last of its groups is free (plus the sync from that
    /// group's tail) and every one of its groups then ends at its finish.
    Clock,
}

impl Timing {
    /// Every reading with its command-line name.
    pub const ALL: [(Timing, &'static str); 2] = [(Timing::Sum, "sum"), (Timing::Clock, "clock")];

    /// The reading named `name` (`sum` or `clock`).
    pub fn by_name(name: &str) -> Result<Timing> {
        match Self::ALL.iter().find(|(_, n)| *n == name) {
            Some(&(t, _)) => Ok(t),
            None => crate::invalid!("unknown timing reading '{name}' (use sum or clock)"),
        }
    }
}

/// The tasks in selection order with each one's predecessors (indices into that order).
#[derive(Clone, Debug, Default)]
pub struct Stages {
    /// Task indices in selection order: `i < tasks.len()` is an input task, larger indices are
    /// relay pieces (`pieces[i - tasks.len()]`).
    pub order: Vec<u32>,
    /// Predecessors of the k-th selected task: `preds[pred_off[k]..pred_off[k + 1]]`, as
    /// positions in `order` (each one to finish completely first).
    pub pred_off: Vec<u32>,
    pub preds: Vec<u32>,
    /// Position of the piece the k-th task forwards (cut-through), or `u32::MAX`.
    pub relays: Vec<u32>,
    /// Relay pieces: input tasks replaced by chains `W → X → … → Z`, each carrying W's data.
    pub pieces: Vec<Message>,
    /// Number of input tasks that were relayed instead of sent directly.
    pub relayed_tasks: u32,
}

impl Stages {
    /// Empty stages with room for `n` tasks sent directly (no relay pieces), so the scheduling
    /// loops do not grow them: growing showed up as page faults.
    pub fn with_capacity(n: usize) -> Stages {
        let mut pred_off = Vec::with_capacity(n + 1);
        pred_off.push(0);
        Stages {
            order: Vec::with_capacity(n),
            pred_off,
            preds: Vec::with_capacity(3 * n),
            relays: Vec::with_capacity(n),
            ..Default::default()
        }
    }

    /// The transfer of the k-th selected task.
    pub fn message(&self, tasks: &[Message], k: usize) -> Message {
        let i = self.order[k] as usize;
        if i < tasks.len() {
            tasks[i]
        } else {
            self.pieces[i - tasks.len()]
        }
    }
}

/// Per-group bookkeeping while stages are appended.
struct Tails {
    tail: Vec<u32>, // position in `order` of each group's last task
    tail_msg: Vec<Option<Message>>,
    time: Vec<u64>, // T_g (5.3), ps
    timing: Timing,
}

impl Tails {
    /// Append `msg` at position `k` to `groups_of`, recording its predecessors.
    fn append(&mut self, paths: &PathTable, out: &mut Stages, msg: Message, groups_of: &[u32], relays: u32) {
        let k = out.relays.len() as u32;
        let first = out.preds.len();
        let cost = paths.cost_ps(msg.src, msg.dst, msg.bytes);
        // Clock: the task starts when the last of its groups is free (plus that group's sync).
        let start = match self.timing {
            Timing::Sum => 0,
            Timing::Clock => groups_of
                .iter()
                .map(|&h| self.time[h as usize] + paths.sync_ps(self.tail_msg[h as usize], msg))
                .max()
                .unwrap_or(0),
        };
        for &h in groups_of {
            let h = h as usize;
            if self.tail[h] != u32::MAX {
                out.preds.push(self.tail[h]);
            }
            self.time[h] = match self.timing {
                Timing::Sum => self.time[h] + cost + paths.sync_ps(self.tail_msg[h], msg),
                Timing::Clock => start + cost,
            };
            self.tail[h] = k;
            self.tail_msg[h] = Some(msg);
        }
        out.preds[first..].sort_unstable();
        let mut keep = first;
        for i in first..out.preds.len() {
            if (keep == first || out.preds[keep - 1] != out.preds[i]) && out.preds[i] != relays {
                out.preds[keep] = out.preds[i];
                keep += 1;
            }
        }
        out.preds.truncate(keep);
        out.pred_off.push(out.preds.len() as u32);
        out.relays.push(relays);
    }
}

/// Run the stage scheduler over `groups`, relaying by task splitting when `relay` is given
/// (its decisions read the groups' times as `timing` keeps them). Tasks that belong to no
/// group (self-copies) are left out of the order.
pub fn schedule(
    paths: &PathTable,
    tasks: &[Message],
    groups: &Groups,
    policy: Policy,
    seed: u64,
    relay: Option<RelayRule>,
    timing: Timing,
) -> Stages {
    let ng = groups.len();
    let cost: Vec<u64> = tasks.iter().map(|t| paths.cost_ps(t.src, t.dst, t.bytes)).collect();
    let mut remaining = vec![0u64; ng];
    let mut left = vec![0u32; ng];
    for g in 0..ng as u32 {
        for &t in groups.members(g) {
            remaining[g as usize] += cost[t as usize];
            left[g as usize] += 1;
        }
    }
    let mut queue = GroupQueue::new(&remaining, &left);
    let mut relayer = relay.map(|rule| Relayer::new(paths, tasks, groups, rule));
    let slots = relayer.as_ref().map_or(ng, |r| r.group_capacity());
    let mut tails = Tails { tail: vec![u32::MAX; slots], tail_msg: vec![None; slots], time: vec![0; slots], timing };
    let mut done = vec![false; tasks.len()]; // scheduled, directly or as relay pieces
    let mut cursor: Vec<u32> = groups.member_off[..ng].to_vec();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Sized for the no-relay case up front: growing these in the loop showed up as page faults.
    let mut out = Stages::with_capacity(tasks.len());
    let mut candidates: Vec<u32> = Vec::new();
    let mut piece_groups: Vec<u32> = Vec::new();
    let mut min_sync = MinSyncIndex::new(ng);
    while let Some(g) = queue.top(&remaining) {
        // Skip the scheduled prefix of the group's members.
        let end = groups.member_off[g as usize + 1];
        while done[groups.members[cursor[g as usize] as usize] as usize] {
            cursor[g as usize] += 1;
        }
        let prev = tails.tail_msg[g as usize];
        let mut unscheduled =
            (cursor[g as usize]..end).map(|i| groups.members[i as usize]).filter(|&t| !done[t as usize]);
        let pick = match policy {
            Policy::MinSync => match prev {
                // Without a predecessor every member is sync-free: the first unscheduled wins.
                None => unscheduled.next(),
                Some(p) => {
                    let pick = min_sync.pick(g, groups, tasks, paths, p, &done);
                    if cfg!(debug_assertions) {
                        let scan = unscheduled.min_by_key(|&t| paths.sync_ps(prev, tasks[t as usize]));
                        debug_assert_eq!(pick, scan, "Min Sync's index disagrees with the scan in group {g}");
                    }
                    pick
                }
            },
            Policy::MaxSync => unscheduled.min_by_key(|&t| std::cmp::Reverse(paths.sync_ps(prev, tasks[t as usize]))),
            Policy::MinCost => unscheduled.min_by_key(|&t| cost[t as usize]),
            Policy::MaxCost => unscheduled.min_by_key(|&t| std::cmp::Reverse(cost[t as usize])),
            Policy::Random => {
                candidates.clear();
                candidates.extend(unscheduled);
                (!candidates.is_empty()).then(|| candidates[rng.gen_range(0..candidates.len())])
            }
        };
        let t = pick.expect("a group with unscheduled members has a candidate");
        done[t as usize] = true;
        for &h in groups.of_task(t) {
            remaining[h as usize] -= cost[t as usize];
            left[h as usize] -= 1;
            if left[h as usize] == 0 {
                queue.remove(h); // the queue reads the others' lower costs when they surface
            }
        }
        let task = tasks[t as usize];
        let chain = relayer.as_mut().and_then(|rl| {
            let state = GroupState { time: &tails.time, tail: &tails.tail_msg };
            rl.decide(&state, task, groups.of_task(t), prev)
        });
        match (chain, relayer.as_mut()) {
            (Some(chain), Some(rl)) => {
                out.relayed_tasks += 1;
                let mut relays = u32::MAX;
                for hop in chain.hosts().windows(2) {
                    let piece = Message { src: hop[0], dst: hop[1], bytes: task.bytes };
                    rl.groups_of_piece(hop[0], hop[1], &mut piece_groups);
                    rl.joined(groups, hop[0], &piece_groups);
                    out.order.push((tasks.len() + out.pieces.len()) as u32);
                    out.pieces.push(piece);
                    tails.append(paths, &mut out, piece, &piece_groups, relays);
                    relays = out.relays.len() as u32 - 1;
                }
            }
            _ => {
                out.order.push(t);
                tails.append(paths, &mut out, task, groups.of_task(t), u32::MAX);
            }
        }
    }
    out
}

/// Start and finish (tail arrival) of every task in `stages.order`, in picoseconds, by the
/// cost model with the clock reading: a task starts when every predecessor has finished plus
/// the sync cost from it, and finishes `C` later. A relay piece may start once the head of the
/// piece it forwards has arrived, and its tail cannot arrive before that piece's tail has
/// arrived and crossed this hop ((5.5)/(5.6)).
pub fn replay(paths: &PathTable, tasks: &[Message], stages: &Stages) -> Vec<(u64, u64)> {
    let mut times: Vec<(u64, u64)> = Vec::with_capacity(stages.order.len());
    for k in 0..stages.order.len() {
        let task = stages.message(tasks, k);
        let mut start = stages.preds[stages.pred_off[k] as usize..stages.pred_off[k + 1] as usize]
            .iter()
            .map(|&p| times[p as usize].1 + paths.sync_ps(Some(stages.message(tasks, p as usize)), task))
            .max()
            .unwrap_or(0);
        let mut finish_floor = 0;
        if let Some(&r) = stages.relays.get(k).filter(|&&r| r != u32::MAX) {
            let fed = stages.message(tasks, r as usize);
            start = start.max(times[r as usize].0 + paths.latency_ps(fed.src, fed.dst));
            finish_floor = times[r as usize].1 + paths.latency_ps(task.src, task.dst);
        }
        times.push((start, (start + paths.cost_ps(task.src, task.dst, task.bytes)).max(finish_floor)));
    }
    times
}
