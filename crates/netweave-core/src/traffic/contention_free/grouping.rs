//! Grouping (paper 004 §4.3–§4.5): per directed link, which tasks must take turns.
//!
//! Tasks in one *group* of a link use it one after the other; tasks in different groups of
//! the same link may overlap because their summed input bandwidth fits the link.
//! - Rule A: tasks of one source that share a link are in the same group of it.
//! - Rule B (big messages): sorted by input bandwidth, the first opens group G0 and the residual capacity `Ce = B − b0`; each next
//!   task of a new source opens a group while `Ce ≥ b` (or `b < Ce` with [`RuleB::Below`]),
//!   taking `b` from `Ce`, else joins G0.
//!   A task's input bandwidth is the narrowest link of its path before the switch: the rate it
//!   can bring in. The extraction reads "the link it used just before the switch"; on a
//!   two-level tree that would put every task on a core-to-edge link (fed by equally fast
//!   uplinks) in one group and serialise them, although each carries at most its host's rate —
//!   the paper's intent, several slow flows sharing a fast link, needs the rate.
//! - Rule C (small messages): when all the bytes crossing the link fit its bandwidth-delay
//!   product, every source gets its own group (no ordering needed there).
//!
//! Groups are numbered host uplinks first (by host), then host downlinks (by host), then
//! links between switches (by link), each link's groups in creation order; members are kept in
//! task order. Those orders are the scheduler's tie-breaks, so every host computes the same DAG.

use super::paths::{DirLink, PathTable};
use crate::traffic::Message;

/// Rule B's comparison of residual capacity and a task's input bandwidth (§6 question 6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RuleB {
    /// `Ce ≥ b` opens a new group (the thesis' pseudo-code; fills the capacity).
    #[default]
    AtLeast,
    /// `b < Ce` opens a new group (the thesis' prose and eq. 4.6).
    Below,
}

/// The groups of every directed link, both ways round.
#[derive(Clone, Debug)]
pub struct Groups {
    /// Directed link of every group.
    pub link: Vec<DirLink>,
    /// Members of group `g`: `members[member_off[g]..member_off[g + 1]]`, in task order.
    pub member_off: Vec<u32>,
    pub members: Vec<u32>,
    /// Groups of task `t`: `task_groups[task_off[t]..task_off[t + 1]]` (one per link of its path).
    pub task_off: Vec<u32>,
    pub task_groups: Vec<u32>,
}

impl Groups {
    pub fn len(&self) -> usize {
        self.link.len()
    }
    pub fn is_empty(&self) -> bool {
        self.link.is_empty()
    }
    pub fn members(&self, g: u32) -> &[u32] {
        &self.members[self.member_off[g as usize] as usize..self.member_off[g as usize + 1] as usize]
    }
    pub fn of_task(&self, t: u32) -> &[u32] {
        &self.task_groups[self.task_off[t as usize] as usize..self.task_off[t as usize + 1] as usize]
    }
    /// Number of groups on directed link `l`.
    pub fn count_on(&self, l: DirLink) -> usize {
        self.link.iter().filter(|&&x| x == l).count()
    }
}

/// Group `tasks` (host indices; self-copies take no link and join no group) on `paths`.
pub fn group(paths: &PathTable, tasks: &[Message], rule_b: RuleB) -> Groups {
    let nl = paths.num_dir_links();
    // Tasks on every directed link (CSR), each with its input bandwidth there.
    let mut count = vec![0u32; nl + 1];
    for t in tasks {
        if t.src != t.dst {
            for &l in paths.path(t.src, t.dst) {
                count[l as usize + 1] += 1;
            }
        }
    }
    for l in 0..nl {
        count[l + 1] += count[l];
    }
    let mut fill = count.clone();
    let mut on_link = vec![(0u32, 0f64); count[nl] as usize];
    for (i, t) in tasks.iter().enumerate() {
        if t.src == t.dst {
            continue;
        }
        // The rate a task can bring into a switch is its path's narrowest link so far.
        let mut input = f64::INFINITY;
        for &l in paths.path(t.src, t.dst) {
            let b = if input.is_finite() { input } else { paths.bandwidth(l) };
            on_link[fill[l as usize] as usize] = (i as u32, b);
            fill[l as usize] += 1;
            input = input.min(paths.bandwidth(l));
        }
    }
    // Link order: host uplinks by host, host downlinks by host, then the rest by id.
    let mut order: Vec<DirLink> = (0..nl as DirLink).filter(|&l| count[l as usize + 1] > count[l as usize]).collect();
    order.sort_by_key(|&l| match (paths.from_host(l), paths.to_host(l)) {
        (Some(h), _) => (0u8, h, l),
        (None, Some(h)) => (1, h, l),
        _ => (2, 0, l),
    });
    let mut link = Vec::new();
    let mut member_lists: Vec<Vec<u32>> = Vec::new();
    let mut group_of_source = vec![u32::MAX; paths.num_hosts()];
    let mut sorted: Vec<(u32, f64)> = Vec::new();
    for &l in &order {
        let users = &on_link[count[l as usize] as usize..count[l as usize + 1] as usize];
        let first_group = link.len() as u32;
        let bytes: f64 = users.iter().map(|&(t, _)| tasks[t as usize].bytes as f64).sum();
        let bdp = paths.bandwidth(l) * paths.link_latency_ps(l) as f64 * 1e-12;
        let open = |link: &mut Vec<DirLink>, lists: &mut Vec<Vec<u32>>| {
            link.push(l);
            lists.push(Vec::new());
            (link.len() - 1) as u32
        };
        if bytes < bdp {
            // Rule C: one group per source.
            for &(t, _) in users {
                let s = tasks[t as usize].src as usize;
                if group_of_source[s] == u32::MAX {
                    group_of_source[s] = open(&mut link, &mut member_lists);
                }
                member_lists[group_of_source[s] as usize].push(t);
            }
        } else {
            // Rule B, with Rule A's same-source override.
            sorted.clear();
            sorted.extend_from_slice(users);
            sorted.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let mut residual = paths.bandwidth(l);
            let mut g0 = u32::MAX;
            for &(t, b) in &sorted {
                let s = tasks[t as usize].src as usize;
                let g = if g0 == u32::MAX {
                    g0 = open(&mut link, &mut member_lists);
                    residual -= b;
                    g0
                } else if group_of_source[s] != u32::MAX {
                    group_of_source[s]
                } else if match rule_b {
                    RuleB::AtLeast => residual >= b,
                    RuleB::Below => b < residual,
                } {
                    residual -= b;
                    open(&mut link, &mut member_lists)
                } else {
                    g0
                };
                group_of_source[s] = g;
                member_lists[g as usize].push(t);
            }
        }
        for &(t, _) in users {
            group_of_source[tasks[t as usize].src as usize] = u32::MAX;
        }
        for list in &mut member_lists[first_group as usize..] {
            list.sort_unstable();
        }
    }
    let mut member_off = Vec::with_capacity(link.len() + 1);
    member_off.push(0u32);
    let mut members = Vec::new();
    let mut per_task = vec![0u32; tasks.len() + 1];
    for list in &member_lists {
        members.extend_from_slice(list);
        member_off.push(members.len() as u32);
        for &t in list {
            per_task[t as usize + 1] += 1;
        }
    }
    for t in 0..tasks.len() {
        per_task[t + 1] += per_task[t];
    }
    let mut fill = per_task.clone();
    let mut task_groups = vec![0u32; members.len()];
    for (g, list) in member_lists.iter().enumerate() {
        for &t in list {
            task_groups[fill[t as usize] as usize] = g as u32;
            fill[t as usize] += 1;
        }
    }
    Groups { link, member_off, members, task_off: per_task, task_groups }
}
