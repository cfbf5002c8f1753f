//! A phased all-to-all on a switch tree whose phases are contention-free and whose number meets
//! the bottleneck bound, after Faraj and Yuan (*Message scheduling for all-to-all personalized
//! communication on Ethernet switched clusters*, IPDPS 2005).
//!
//! **What a phase may hold.** Every rank sends at most one message and receives at most one,
//! and every directed link carries no more flows than it can serve at their full rate: a link
//! of bandwidth `B` whose fastest flow runs at `b` (its path's narrowest link, usually a host
//! link) takes `⌊B / b⌋` of them — one on a uniform tree, ten on a 10 GbE uplink fed by 1 GbE
//! hosts. Parallel links between two switches (bonding) count as one link of their summed
//! bandwidth. So every flow of a phase runs at its path's bandwidth and the phase lasts one
//! message time.
//!
//! **How many phases.** A host sends `n − 1` messages and a directed link with load `f` flows
//! and capacity `c` needs `⌈f / c⌉` phases: the largest of these, `P`, is the bound in phases
//! (with equal host links, `P` message times is the bottleneck bound of
//! [`crate::analysis::bound`]).
//!
//! **How, on equal subtrees.** When some root switch sees `k` subtrees of equal size (edge
//! switches of equal host counts under a core, equal pods), the bound is reached by
//! construction, without search (`uniform.rs`): every subtree sends the same Latin-square
//! stream of messages to the others, `c` positions per phase where `c` is what a root link
//! serves at once, and the messages inside subtrees are matched into the ports that leaves
//! free; the few that matching may leave over (mostly when the host ports are the bound and no
//! port has a phase to spare) are recoloured in. The ends of the bottleneck are tried as roots
//! first, then every other switch (two roots with equal subtrees at most). It lands on the
//! bound on the benchmark trees (2 × 14, 4 × 16 up to 64 × 16 hosts, the 3-level tree) and on
//! all but 4 of the 240 one-level trees of 2–6 edge switches of 1–16 hosts with 1, 4 or
//! 10 Gbit/s trunks; where it does not, the general construction below runs.
//!
//! **How, in general.** As Faraj and Yuan do, the tree is seen from a *root* switch at its bottleneck: its
//! subtrees `T_0 … T_k` (a host on the root is a subtree of one). The messages between
//! subtrees are the ones that load the root's links; they are scheduled first, at the subtree
//! level, as a bipartite edge colouring (König: a bipartite multigraph of largest degree `Δ`
//! has a proper colouring with `Δ` colours): subtree `i` is split into `min(c_i, |T_i|)`
//! sending copies over its up link and as many receiving copies over its down link, its
//! messages spread evenly over them, so every copy has at most `P` messages and each colour
//! class sends at most `c_i` messages out of and into every subtree. A colour is a phase and
//! says how many messages go from `T_i` to `T_j` in it. Our own construction then picks the
//! hosts of each such slot, the ones with the most work left whose ports and subtree links
//! are still free, and fills every phase with messages inside subtrees the same way. Whatever
//! does not fit goes first-fit into any phase with room, then into new phases. Then the
//! phases are *recoloured* one fewer at a time (`recolour.rs`): the messages of the emptiest
//! phase are moved into the others by Kempe-chain swaps, which never let a rank send or
//! receive twice in a phase, and a local search over such swaps removes every flow beyond a
//! link's capacity — until the bound is met or a recolouring runs out of moves. Every
//! placement is checked on the real paths, so the phases are contention-free by construction
//! whatever the root; the root is only a matter of how few phases result: the end of the
//! bottleneck link first, and for a small job still over the bound the next candidate too.
//!
//! ```
//! use netweave_core::topology::ethernet::{switch_tree, TreeLevel, GIGABIT_LAN};
//! use netweave_core::traffic::tree_phased;
//! // A root, 3 switches, 2 edge switches under each, 5 hosts per edge switch, all 1 GbE.
//! let t = switch_tree(&[TreeLevel::new(3, GIGABIT_LAN), TreeLevel::new(2, GIGABIT_LAN)], 5, GIGABIT_LAN).unwrap();
//! let hosts: Vec<u32> = (0..30).collect();
//! let plan = tree_phased::TreePhased::new(&t, &hosts).unwrap();
//! // A level-1 link carries 10 × 20 = 200 messages each way, one per phase.
//! assert_eq!(plan.lower_bound_phases, 200);
//! assert!(plan.phases.len() >= 200);
//! ```

use std::collections::HashMap;

use super::contention_free::paths::{DirLink, PathTable};
use super::{Collective, Delivery, Message, Schedule};
use crate::error::Result;
use crate::topology::{NodeId, Topology};

mod recolour;
mod uniform;

/// Roots tried (the best candidates of [`root_candidates`]); each costs a whole construction.
const ROOTS_TRIED: usize = 2;
/// Jobs of at most this many ranks try more than one root.
const SMALL_JOB: usize = 64;
/// Repair moves a recolouring may spend per rank of the job, and at most.
const RECOLOUR_MOVES_PER_RANK: usize = 64;
const RECOLOUR_MOVES_MAX: usize = 20_000;

/// Phases of (source rank, destination rank) pairs.
type RankPhases = Vec<Vec<(u32, u32)>>;

/// A tree all-to-all: phases of (source rank, destination rank) pairs.
#[derive(Clone, Debug)]
pub struct TreePhased {
    /// Each phase's messages as rank pairs.
    pub phases: Vec<Vec<(u32, u32)>>,
    /// The bound in phases: the largest of `n − 1` and every directed link's `⌈flows / capacity⌉`.
    pub lower_bound_phases: usize,
    /// Label of the root switch the schedule was built from.
    pub root: String,
}

/// The job's view of the fabric: ranks on hosts, their paths and every link's capacity.
struct Job<'a> {
    paths: &'a PathTable,
    /// Host index of each rank.
    hosts: &'a [u32],
    /// Flows each directed link serves at once.
    capacity: Vec<u32>,
    /// Flows each directed link carries over the whole all-to-all.
    load: Vec<u32>,
}

impl<'a> Job<'a> {
    /// The all-to-all among `hosts`.
    fn new(paths: &'a PathTable, hosts: &'a [u32]) -> Job<'a> {
        let pairs = hosts.iter().flat_map(|&s| hosts.iter().map(move |&d| (s, d)));
        Job::for_pairs(paths, hosts, pairs)
    }

    /// Ranks on `hosts` exchanging the host `pairs` (self-pairs ignored).
    fn for_pairs(paths: &'a PathTable, hosts: &'a [u32], pairs: impl Iterator<Item = (u32, u32)>) -> Job<'a> {
        let nl = paths.num_dir_links();
        let mut fastest = vec![0f64; nl];
        let mut load = vec![0u32; nl];
        for (hs, hd) in pairs {
            {
                if hs == hd {
                    continue;
                }
                let rate = paths.path_bandwidth(hs, hd);
                for &l in paths.path(hs, hd) {
                    fastest[l as usize] = fastest[l as usize].max(rate);
                    load[l as usize] += 1;
                }
            }
        }
        let capacity = (0..nl)
            .map(|l| {
                if load[l] == 0 {
                    return 1;
                }
                // A hair of tolerance so 10 × 1 Gbit/s fits 10 Gbit/s despite rounding.
                ((paths.bandwidth(l as DirLink) / fastest[l]) * (1.0 + 1e-9)).floor().max(1.0) as u32
            })
            .collect();
        Job { paths, hosts, capacity, load }
    }

    fn path(&self, s: u32, d: u32) -> &[DirLink] {
        self.paths.path(self.hosts[s as usize], self.hosts[d as usize])
    }

    fn lower_bound(&self) -> usize {
        let n = self.hosts.len();
        let links = self.load.iter().zip(&self.capacity).map(|(&f, &c)| f.div_ceil(c) as usize).max().unwrap_or(0);
        links.max(n.saturating_sub(1))
    }
}

/// Phases under construction: who sends, who receives and each link's flows, per phase.
struct Phases {
    n: usize,
    nl: usize,
    sending: Vec<bool>,
    receiving: Vec<bool>,
    flows: Vec<u32>,
    messages: Vec<Vec<(u32, u32)>>,
}

impl Phases {
    fn new(n: usize, nl: usize, count: usize) -> Phases {
        let mut p =
            Phases { n, nl, sending: Vec::new(), receiving: Vec::new(), flows: Vec::new(), messages: Vec::new() };
        for _ in 0..count {
            p.open();
        }
        p
    }

    fn len(&self) -> usize {
        self.messages.len()
    }

    fn open(&mut self) -> usize {
        self.sending.extend(std::iter::repeat(false).take(self.n));
        self.receiving.extend(std::iter::repeat(false).take(self.n));
        self.flows.extend(std::iter::repeat(0).take(self.nl));
        self.messages.push(Vec::new());
        self.messages.len() - 1
    }

    fn fits(&self, job: &Job, p: usize, s: u32, d: u32) -> bool {
        !self.sending[p * self.n + s as usize]
            && !self.receiving[p * self.n + d as usize]
            && job.path(s, d).iter().all(|&l| self.flows[p * self.nl + l as usize] < job.capacity[l as usize])
    }

    fn place(&mut self, job: &Job, p: usize, s: u32, d: u32) {
        self.sending[p * self.n + s as usize] = true;
        self.receiving[p * self.n + d as usize] = true;
        for &l in job.path(s, d) {
            self.flows[p * self.nl + l as usize] += 1;
        }
        self.messages[p].push((s, d));
    }
}

/// What is left to send: per rank pair, and per rank in each direction.
struct Pending {
    n: usize,
    left: Vec<bool>,
    sends: Vec<u32>,
    receives: Vec<u32>,
}

impl Pending {
    fn new(n: usize) -> Pending {
        let mut left = vec![true; n * n];
        for r in 0..n {
            left[r * n + r] = false;
        }
        Pending { n, left, sends: vec![n as u32 - 1; n], receives: vec![n as u32 - 1; n] }
    }
    fn has(&self, s: u32, d: u32) -> bool {
        self.left[s as usize * self.n + d as usize]
    }
    fn take(&mut self, s: u32, d: u32) {
        self.left[s as usize * self.n + d as usize] = false;
        self.sends[s as usize] -= 1;
        self.receives[d as usize] -= 1;
    }
    /// How urgent a message is: the work its two ends still have.
    fn urgency(&self, s: u32, d: u32) -> u32 {
        self.sends[s as usize] + self.receives[d as usize]
    }
}

impl TreePhased {
    /// The all-to-all among `hosts` (rank r on host index `hosts[r]`) on the tree `topo`.
    /// Errors name a host pair with two paths, a link without bandwidth, a host outside the
    /// fabric, a repeated host, or a job of fewer than two hosts.
    pub fn new(topo: &Topology, hosts: &[u32]) -> Result<TreePhased> {
        let paths = PathTable::new(topo)?;
        TreePhased::on_paths(topo, &paths, hosts)
    }

    /// Like [`TreePhased::new`] on paths already computed.
    pub fn on_paths(topo: &Topology, paths: &PathTable, hosts: &[u32]) -> Result<TreePhased> {
        check_hosts(topo, hosts)?;
        let job = Job::new(paths, hosts);
        let lower = job.lower_bound();
        // Equal subtrees under a root: the bound by construction, no search.
        if let Some((root, phases)) = uniform::phases(topo, &job, lower) {
            return Ok(TreePhased { phases, lower_bound_phases: lower, root: topo.label(root).to_string() });
        }
        let mut best: Option<(NodeId, RankPhases)> = None;
        // The next root only for a small job still over the bound: each costs a construction.
        let roots = if hosts.len() <= SMALL_JOB { ROOTS_TRIED } else { 1 };
        for root in root_candidates(topo, &job).into_iter().take(roots) {
            let mut phases = schedule_from(topo, &job, root, lower);
            // One phase fewer at a time, down to the bound or until a recolouring runs out of
            // moves.
            let moves = (RECOLOUR_MOVES_PER_RANK * hosts.len()).min(RECOLOUR_MOVES_MAX);
            while phases.len() > lower {
                match recolour::into_phases(&job, &phases, phases.len() - 1, moves) {
                    Some(fewer) => phases = fewer,
                    None => break,
                }
            }
            if best.as_ref().map_or(true, |(_, b)| phases.len() < b.len()) {
                best = Some((root, phases));
            }
            if best.as_ref().is_some_and(|(_, b)| b.len() == lower) {
                break;
            }
        }
        let (root, phases) = best.expect("a tree has a switch");
        Ok(TreePhased { phases, lower_bound_phases: lower, root: topo.label(root).to_string() })
    }

    /// The schedule: `bytes` per rank pair, ranks on hosts `0..n` until placed.
    pub fn schedule(&self, num_ranks: u32, bytes: u64) -> Result<Schedule> {
        let phases =
            self.phases.iter().map(|ph| ph.iter().map(|&(src, dst)| Message { src, dst, bytes }).collect()).collect();
        Ok(Schedule::from_phases(format!("alltoall-tree-phased(N={num_ranks})"), num_ranks, phases)?
            .with_collective(Collective::Alltoall, Delivery::Direct)
            .with_permutation_claim(true))
    }
}

/// Contention-free phases for any task list on `paths` (hosts as ranks): the task indices of
/// each phase. A whole all-to-all of equal sizes among some hosts gets the tree schedule
/// ([`TreePhased`]); any other list is packed first-fit, the tasks whose ends have the most
/// work left first, into the earliest phase with room. Self-copies are left out.
pub fn phase_order(topo: &Topology, paths: &PathTable, tasks: &[Message]) -> PhaseOrder {
    let all: Vec<u32> = (0..paths.num_hosts() as u32).collect();
    let real: Vec<u32> = (0..tasks.len() as u32).filter(|&t| tasks[t as usize].src != tasks[t as usize].dst).collect();
    let job = Job::for_pairs(paths, &all, real.iter().map(|&t| (tasks[t as usize].src, tasks[t as usize].dst)));
    let capacity = job.capacity.clone();
    let phases = packed_phases(topo, paths, tasks, &real, &job);
    PhaseOrder { phases, capacity }
}

/// Phases of task indices with the capacity (flows at once) of every directed link.
#[derive(Clone, Debug)]
pub struct PhaseOrder {
    /// Task indices of each phase.
    pub phases: Vec<Vec<u32>>,
    /// Flows each directed link serves at once.
    pub capacity: Vec<u32>,
}

fn packed_phases(topo: &Topology, paths: &PathTable, tasks: &[Message], real: &[u32], job: &Job) -> Vec<Vec<u32>> {
    if let Some(hosts) = whole_alltoall(paths.num_hosts(), tasks, real) {
        if let Ok(plan) = TreePhased::on_paths(topo, paths, &hosts) {
            // The task of each (source, destination) host pair, flat: no hashing per message.
            let nh = paths.num_hosts();
            let mut index = vec![u32::MAX; nh * nh];
            for &t in real {
                index[tasks[t as usize].src as usize * nh + tasks[t as usize].dst as usize] = t;
            }
            return plan
                .phases
                .iter()
                .map(|ph| {
                    ph.iter()
                        .map(|&(s, d)| index[hosts[s as usize] as usize * nh + hosts[d as usize] as usize])
                        .collect()
                })
                .collect();
        }
    }
    let n = paths.num_hosts();
    let mut sends = vec![0u32; n];
    let mut receives = vec![0u32; n];
    for &t in real {
        sends[tasks[t as usize].src as usize] += 1;
        receives[tasks[t as usize].dst as usize] += 1;
    }
    let mut order = real.to_vec();
    order.sort_by_key(|&t| {
        let m = tasks[t as usize];
        (std::cmp::Reverse(sends[m.src as usize] + receives[m.dst as usize]), t)
    });
    let mut phases = Phases::new(n, paths.num_dir_links(), 0);
    let mut out: Vec<Vec<u32>> = Vec::new();
    for t in order {
        let m = tasks[t as usize];
        let p = (0..phases.len()).find(|&p| phases.fits(job, p, m.src, m.dst)).unwrap_or_else(|| {
            out.push(Vec::new());
            phases.open()
        });
        phases.place(job, p, m.src, m.dst);
        out[p].push(t);
    }
    out
}

/// The hosts of `tasks` when they are exactly every ordered pair of some host set, all of one
/// size; `None` otherwise.
fn whole_alltoall(num_hosts: usize, tasks: &[Message], real: &[u32]) -> Option<Vec<u32>> {
    let first = tasks.get(*real.first()? as usize)?;
    let mut member = vec![false; num_hosts];
    for &t in real {
        let m = tasks[t as usize];
        if m.bytes != first.bytes {
            return None;
        }
        member[m.src as usize] = true;
        member[m.dst as usize] = true;
    }
    let hosts: Vec<u32> = (0..num_hosts as u32).filter(|&h| member[h as usize]).collect();
    let k = hosts.len();
    if real.len() != k * (k - 1) {
        return None;
    }
    let mut seen = vec![false; num_hosts * num_hosts];
    real.iter()
        .all(|&t| {
            !std::mem::replace(
                &mut seen[tasks[t as usize].src as usize * num_hosts + tasks[t as usize].dst as usize],
                true,
            )
        })
        .then_some(hosts)
}

/// The tree all-to-all of `bytes` per pair among `hosts` of `topo`, ranks placed on them.
pub fn alltoall(topo: &Topology, hosts: &[u32], bytes: u64) -> Result<Schedule> {
    let plan = TreePhased::new(topo, hosts)?;
    plan.schedule(hosts.len() as u32, bytes)?.with_placement(hosts.to_vec())
}

fn check_hosts(topo: &Topology, hosts: &[u32]) -> Result<()> {
    if hosts.len() < 2 {
        let which =
            hosts.first().map(|&h| format!(" (host '{}')", topo.label(topo.hosts()[h as usize]))).unwrap_or_default();
        return crate::invalid!("an all-to-all needs at least 2 hosts; the job has {}{which}", hosts.len());
    }
    let mut seen = vec![false; topo.num_hosts()];
    for &h in hosts {
        if h as usize >= topo.num_hosts() {
            return crate::invalid!("host index {h} is not a host of the fabric (0..{})", topo.num_hosts() - 1);
        }
        if std::mem::replace(&mut seen[h as usize], true) {
            return crate::invalid!("host '{}' appears twice in the job", topo.label(topo.hosts()[h as usize]));
        }
    }
    Ok(())
}

/// Roots worth trying, best first: the switch ends of the links whose `flows / capacity` is
/// largest (Faraj and Yuan root the tree at its bottleneck).
fn root_candidates(topo: &Topology, job: &Job) -> Vec<NodeId> {
    let switches = topo.switches();
    let mut links: Vec<usize> = (0..job.load.len()).filter(|&l| job.load[l] > 0).collect();
    links.sort_by(|&a, &b| {
        let ra = job.load[a] as f64 / job.capacity[a] as f64;
        let rb = job.load[b] as f64 / job.capacity[b] as f64;
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    let mut out = Vec::new();
    for l in links {
        let (u, v) = job.paths.ends(l as DirLink);
        for x in [u, v] {
            if !topo.is_host(x) && !out.contains(&x) {
                out.push(x);
            }
        }
        if out.len() >= 4 {
            break;
        }
    }
    if out.is_empty() {
        out.push(switches[0]);
    }
    out
}

/// The phases built from `root`: subtree-level colouring, host choice, local fill, leftovers.
fn schedule_from(topo: &Topology, job: &Job, root: NodeId, lower: usize) -> Vec<Vec<(u32, u32)>> {
    let n = job.hosts.len();
    let subtree = subtrees(topo, job, root);
    let k = subtree.iter().map(|&t| t + 1).max().unwrap_or(0) as usize;
    let members = subtree_members(&subtree, k);
    let (up_cap, down_cap) = root_link_capacities(job, root, &subtree, &members);
    let (quota, colours) = subtree_colouring(&subtree, &members, &up_cap, &down_cap, lower);
    let mut phases = Phases::new(n, job.capacity.len(), colours);
    let mut pending = Pending::new(n);
    let mut members = members;
    let mut receivers = members.clone();
    let mut senders: Vec<u32> = (0..n as u32).collect();
    for (p, slots) in quota.iter().enumerate() {
        // Subtree-to-subtree slots first: they hold the root's links, the scarce resource. The
        // busiest free sender of the slot's subtree, to the busiest free receiver it still owes.
        for list in members.iter_mut() {
            list.sort_by_key(|&r| (std::cmp::Reverse(pending.sends[r as usize]), r));
        }
        for list in receivers.iter_mut() {
            list.sort_by_key(|&r| (std::cmp::Reverse(pending.receives[r as usize]), r));
        }
        for &((i, j), count) in slots {
            for _ in 0..count {
                let pick = members[i as usize].iter().find_map(|&s| {
                    if pending.sends[s as usize] == 0 || phases.sending[p * n + s as usize] {
                        return None;
                    }
                    receivers[j as usize]
                        .iter()
                        .find(|&&d| {
                            pending.has(s, d) && !phases.receiving[p * n + d as usize] && phases.fits(job, p, s, d)
                        })
                        .map(|&d| (s, d))
                });
                if let Some((s, d)) = pick {
                    phases.place(job, p, s, d);
                    pending.take(s, d);
                }
            }
        }
        // Then messages inside subtrees, busiest senders first.
        senders.sort_by_key(|&s| std::cmp::Reverse(pending.sends[s as usize]));
        for &s in &senders {
            if phases.sending[p * n + s as usize] || pending.sends[s as usize] == 0 {
                continue;
            }
            let t = subtree[s as usize];
            // The busiest receiver it still owes (the order of the phase's start: a receiver
            // picked since is busy in this phase anyway), the cheap tests before the paths.
            let d = receivers[t as usize]
                .iter()
                .copied()
                .find(|&d| pending.has(s, d) && !phases.receiving[p * n + d as usize] && phases.fits(job, p, s, d));
            if let Some(d) = d {
                phases.place(job, p, s, d);
                pending.take(s, d);
            }
        }
    }
    // Leftovers: first fit into any phase with room, most loaded ends first; then new phases.
    let mut left: Vec<(u32, u32)> =
        (0..n as u32).flat_map(|s| (0..n as u32).map(move |d| (s, d))).filter(|&(s, d)| pending.has(s, d)).collect();
    left.sort_by_key(|&(s, d)| (std::cmp::Reverse(pending.urgency(s, d)), s, d));
    for (s, d) in left {
        let p = (0..phases.len()).find(|&p| phases.fits(job, p, s, d)).unwrap_or_else(|| phases.open());
        phases.place(job, p, s, d);
        pending.take(s, d);
    }
    phases.messages.retain(|m| !m.is_empty());
    phases.messages
}

/// The ranks of each of the `k` subtrees, in rank order.
fn subtree_members(subtree: &[u32], k: usize) -> Vec<Vec<u32>> {
    let mut members = vec![Vec::new(); k];
    for (r, &t) in subtree.iter().enumerate() {
        members[t as usize].push(r as u32);
    }
    members
}

/// Flows the root's link out of (up) and into (down) each subtree serves at once, at most the
/// subtree's size: the first and last link of any path leaving it, seen at the root.
fn root_link_capacities(job: &Job, root: NodeId, subtree: &[u32], members: &[Vec<u32>]) -> (Vec<u32>, Vec<u32>) {
    let k = members.len();
    let (mut up_cap, mut down_cap) = (vec![1u32; k], vec![1u32; k]);
    for t in 0..k {
        let r = members[t][0];
        if let Some(q) = (0..subtree.len() as u32).find(|&q| subtree[q as usize] != t as u32) {
            for &l in job.path(r, q) {
                if job.paths.ends(l).1 == root {
                    up_cap[t] = job.capacity[l as usize].min(members[t].len() as u32);
                }
            }
            for &l in job.path(q, r) {
                if job.paths.ends(l).0 == root {
                    down_cap[t] = job.capacity[l as usize].min(members[t].len() as u32);
                }
            }
        }
    }
    (up_cap, down_cap)
}

/// Subtree of every rank seen from `root`: the root's neighbour its host hangs below.
fn subtrees(topo: &Topology, job: &Job, root: NodeId) -> Vec<u32> {
    let mut below = vec![u32::MAX; topo.num_nodes()];
    let mut ids: HashMap<NodeId, u32> = HashMap::new();
    let mut stack: Vec<NodeId> = Vec::new();
    below[root as usize] = u32::MAX - 1;
    for a in topo.neighbors(root) {
        if below[a.neighbor as usize] == u32::MAX {
            let next = ids.len() as u32;
            let id = *ids.entry(a.neighbor).or_insert(next);
            below[a.neighbor as usize] = id;
            stack.push(a.neighbor);
        }
    }
    while let Some(u) = stack.pop() {
        if topo.is_host(u) {
            continue;
        }
        for a in topo.neighbors(u) {
            if below[a.neighbor as usize] == u32::MAX {
                below[a.neighbor as usize] = below[u as usize];
                stack.push(a.neighbor);
            }
        }
    }
    // Renumber the subtrees the job uses 0..k, in rank order.
    let mut renumber: HashMap<u32, u32> = HashMap::new();
    job.hosts
        .iter()
        .map(|&h| {
            let t = below[topo.hosts()[h as usize] as usize];
            let next = renumber.len() as u32;
            *renumber.entry(t).or_insert(next)
        })
        .collect()
}

/// Per colour, how many messages go from subtree `i` to subtree `j`, from a proper edge
/// colouring of the subtree-level bipartite multigraph (split into capacity copies); and the
/// number of colours (at least `lower`).
#[allow(clippy::type_complexity)]
fn subtree_colouring(
    subtree: &[u32],
    members: &[Vec<u32>],
    up_cap: &[u32],
    down_cap: &[u32],
    lower: usize,
) -> (Vec<Vec<((u32, u32), u32)>>, usize) {
    let k = members.len();
    let n = subtree.len();
    // Copies: subtree i sends through up_cap[i] left nodes and receives through down_cap[i]
    // right nodes; its messages are dealt to them evenly.
    let left_base: Vec<usize> = prefix(up_cap);
    let right_base: Vec<usize> = prefix(down_cap);
    let mut edges: Vec<(usize, usize, u32, u32)> = Vec::new(); // (left, right, from, to)
    let mut dealt_out = vec![0usize; k];
    let mut dealt_in = vec![0usize; k];
    for s in 0..n {
        for d in 0..n {
            let (i, j) = (subtree[s] as usize, subtree[d] as usize);
            if i == j {
                continue;
            }
            let left = left_base[i] + dealt_out[i] % up_cap[i] as usize;
            let right = right_base[j] + dealt_in[j] % down_cap[j] as usize;
            dealt_out[i] += 1;
            dealt_in[j] += 1;
            edges.push((left, right, i as u32, j as u32));
        }
    }
    let (nl, nr) = (*left_base.last().unwrap(), *right_base.last().unwrap());
    let mut degree_l = vec![0usize; nl];
    let mut degree_r = vec![0usize; nr];
    for &(l, r, _, _) in &edges {
        degree_l[l] += 1;
        degree_r[r] += 1;
    }
    let colours = degree_l.iter().chain(&degree_r).copied().max().unwrap_or(0).max(lower).max(1);
    const FREE: u32 = u32::MAX;
    let mut at_left = vec![FREE; nl * colours];
    let mut at_right = vec![FREE; nr * colours];
    let mut colour = vec![0usize; edges.len()];
    let mut path: Vec<u32> = Vec::new();
    let (mut next_left, mut next_right) = (vec![0usize; nl], vec![0usize; nr]);
    for (e, &(u, v, _, _)) in edges.iter().enumerate() {
        // A free colour at each end, searched from where the last search ended (edges arrive
        // in order, so the scan is short; a chain swap may free an earlier one, hence the wrap).
        let free_from = |at: &[u32], node: usize, from: usize| {
            (from..colours).chain(0..from).find(|&c| at[node * colours + c] == FREE).expect("degree ≤ colours")
        };
        let a = free_from(&at_left, u, next_left[u]);
        let b = free_from(&at_right, v, next_right[v]);
        next_left[u] = a;
        next_right[v] = b;
        if at_right[v * colours + a] != FREE {
            // Kempe chain from v alternating a, b; swapping it frees a at v (it cannot reach u,
            // which has no a edge).
            path.clear();
            let (mut node, mut on_right, mut want) = (v, true, a);
            loop {
                let f = if on_right { at_right[node * colours + want] } else { at_left[node * colours + want] };
                if f == FREE {
                    break;
                }
                path.push(f);
                let (fl, fr, _, _) = edges[f as usize];
                node = if on_right { fl } else { fr };
                on_right = !on_right;
                want = if want == a { b } else { a };
            }
            for &f in &path {
                let (fl, fr, _, _) = edges[f as usize];
                at_left[fl * colours + colour[f as usize]] = FREE;
                at_right[fr * colours + colour[f as usize]] = FREE;
            }
            for &f in &path {
                let (fl, fr, _, _) = edges[f as usize];
                let c = if colour[f as usize] == a { b } else { a };
                colour[f as usize] = c;
                at_left[fl * colours + c] = f;
                at_right[fr * colours + c] = f;
            }
        }
        colour[e] = a;
        at_left[u * colours + a] = e as u32;
        at_right[v * colours + a] = e as u32;
    }
    let mut quota: Vec<HashMap<(u32, u32), u32>> = vec![HashMap::new(); colours];
    for (e, &(_, _, i, j)) in edges.iter().enumerate() {
        *quota[colour[e]].entry((i, j)).or_insert(0) += 1;
    }
    let quota = quota
        .into_iter()
        .map(|q| {
            let mut v: Vec<_> = q.into_iter().collect();
            v.sort_unstable();
            v
        })
        .collect();
    (quota, colours)
}

fn prefix(counts: &[u32]) -> Vec<usize> {
    let mut out = vec![0usize];
    for &c in counts {
        out.push(out.last().unwrap() + c as usize);
    }
    out
}

#[cfg(test)]
mod tests;
