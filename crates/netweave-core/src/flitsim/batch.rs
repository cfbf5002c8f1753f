//! Closed (batch) runs: every host sends its messages of a [`Schedule`] and the run ends when
//! the last one has arrived.
//!
//! Each host has `injection_ports` controllers (paper 001's NCT) and one FIFO of its sends in
//! schedule order (phase by phase); a free controller takes the next send. A message is cut
//! into packets of `packet_size` flits (the last one shorter). Sync modes decide when a host
//! may start a send of phase `p`:
//!
//! - `none`: at once (plain FIFO dispatch);
//! - `local` (paper 001, §2.9): once every phase `p − 1` message addressed to this host has
//!   fully arrived;
//! - `phase`: once every message of every earlier phase, anywhere, has arrived (a barrier).
//!
//! With `request_reply` (paper 002's remote DMA) the destination answers each message with a
//! `reply_size`-flit packet, sent ahead of its own data, and the sending controller takes its
//! next send only when the reply is back; the message completes then.
//!
//! [`run_dag`] runs a dependency graph ([`TaskGraph`]) instead: a host's tasks wait in its FIFO
//! in task order, and a task starts only once each predecessor is done as its sender can know
//! it without a message — a predecessor it sent itself once that one's data has left, a
//! predecessor it receives once that one's data has fully arrived. This is how paper 002's
//! barrier runs: a host passes the gather up once all its children's messages are in, and
//! forwards the release once its own release has arrived.

use std::collections::VecDeque;

use serde::Serialize;

use super::config::{BatchSync, SimConfig};
use super::engine::{Delivery, Sim, Workload};
use super::flit::{Packet, NONE};
use super::open_loop::LatencyStats;
use crate::error::{NetweaveError, Result};
use crate::routing::RoutingTable;
use crate::topology::Topology;
use crate::traffic::dag::{Dependency, TaskGraph};
use crate::traffic::Schedule;

/// Outcome of a batch run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchResult {
    /// Cycle at which the last message completed.
    pub completion_cycles: u64,
    /// Per host: the cycle its last send or receive completed (0 if it had none).
    pub host_finish: Vec<u64>,
    pub messages: u64,
    pub flits: u64,
    /// Start (controller takes it) to completion, per message.
    pub message_latency: LatencyStats,
    /// Creation to tail arrival, per data packet.
    pub packet_latency: LatencyStats,
    /// Data flits delivered per host per cycle over the run.
    pub throughput_flits: f64,
    /// Average bytes per cycle per message (paper 002's B = D/T, D in flits here).
    pub bandwidth_flits_per_cycle: f64,
    /// Per task of a [`run_dag`] run: the cycle its sender took it (empty for schedules).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub task_start: Vec<u64>,
    /// Per task of a [`run_dag`] run: the cycle it completed (empty for schedules).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub task_finish: Vec<u64>,
}

#[derive(Clone, Copy, Debug)]
struct Msg {
    src: u32,
    dst: u32,
    flits: u32,
    phase: u32,
    flits_made: u32,
    packets_total: u32,
    packets_delivered: u32,
    start: u64,
    done: u64,
    reply_back: bool,
    /// Predecessors (DAG runs) not yet known done by the sender.
    waiting: u32,
}

struct Batch {
    msgs: Vec<Msg>,
    host_base: Vec<u32>,
    host_list: Vec<u32>,
    host_next: Vec<u32>,
    slot_msg: Vec<u32>,
    replies: Vec<VecDeque<u32>>,
    packet_size: u32,
    reply_size: u16,
    request_reply: bool,
    sync: BatchSync,
    num_phases: usize,
    /// Local sync: messages still to arrive at host h in phase p, `[h * num_phases + p]`.
    recv_left: Vec<u32>,
    /// Phase sync: messages still to complete per phase, and the first unfinished phase.
    phase_left: Vec<u32>,
    current_phase: usize,
    remaining: u64,
    host_finish: Vec<u64>,
    last_done: u64,
    msg_lat: (u128, u64, u64, u64),
    pkt_lat: (u128, u64, u64, u64),
    data_flits: u64,
    /// DAG runs: tasks released when a task's data has left its sender (CSR by task) …
    after_sent: Csr,
    /// … and when its data has fully arrived at its receiver.
    after_arrival: Csr,
}

/// Successor lists, flat: the successors of `i` are `list[base[i]..base[i + 1]]`.
#[derive(Default)]
struct Csr {
    base: Vec<u32>,
    list: Vec<u32>,
}

impl Csr {
    fn of(lists: &[Vec<u32>]) -> Csr {
        let mut c = Csr { base: Vec::with_capacity(lists.len() + 1), list: Vec::new() };
        for l in lists {
            c.base.push(c.list.len() as u32);
            c.list.extend_from_slice(l);
        }
        c.base.push(c.list.len() as u32);
        c
    }

    fn release(&self, m: usize, msgs: &mut [Msg]) {
        if let Some(w) = self.base.get(m..m + 2) {
            for &t in &self.list[w[0] as usize..w[1] as usize] {
                msgs[t as usize].waiting -= 1;
            }
        }
    }
}

fn acc(a: &mut (u128, u64, u64, u64), x: u64) {
    if a.3 == 0 || x < a.1 {
        a.1 = x;
    }
    a.2 = a.2.max(x);
    a.0 += x as u128;
    a.3 += 1;
}

fn stats(a: &(u128, u64, u64, u64)) -> LatencyStats {
    LatencyStats { avg: if a.3 == 0 { 0.0 } else { a.0 as f64 / a.3 as f64 }, min: a.1, max: a.2, count: a.3 }
}

impl Batch {
    fn complete(&mut self, m: usize, time: u64) {
        self.msgs[m].done = time;
        let msg = self.msgs[m];
        self.remaining -= 1;
        self.last_done = self.last_done.max(time);
        for h in [msg.src, msg.dst] {
            let f = &mut self.host_finish[h as usize];
            *f = (*f).max(time);
        }
        acc(&mut self.msg_lat, time - msg.start);
        match self.sync {
            BatchSync::None => {}
            BatchSync::Local => self.recv_left[msg.dst as usize * self.num_phases + msg.phase as usize] -= 1,
            BatchSync::Phase => {
                self.phase_left[msg.phase as usize] -= 1;
                while self.current_phase < self.num_phases && self.phase_left[self.current_phase] == 0 {
                    self.current_phase += 1;
                }
            }
        }
    }

    fn may_start(&self, host: usize, phase: usize) -> bool {
        match self.sync {
            BatchSync::None => true,
            BatchSync::Local => phase == 0 || self.recv_left[host * self.num_phases + phase - 1] == 0,
            BatchSync::Phase => phase <= self.current_phase,
        }
    }

    fn make_packet(&mut self, sim: &mut Sim, m: usize, now: u64) -> u32 {
        let msg = &mut self.msgs[m];
        let size = (msg.flits - msg.flits_made).min(self.packet_size);
        msg.flits_made += size;
        if msg.flits_made == msg.flits {
            self.after_sent.release(m, &mut self.msgs);
        }
        let msg = &self.msgs[m];
        sim.alloc_packet(Packet {
            src: msg.src,
            dst: msg.dst,
            size: size as u16,
            hops: 0,
            ctime: now,
            itime: now,
            measured: true,
            message: m as u32,
            is_reply: false,
            uid: 0,
        })
    }
}

impl Workload for Batch {
    fn generate(&mut self, _sim: &mut Sim, _now: u64) {}

    fn next_packet(&mut self, sim: &mut Sim, host: usize, slot: usize, now: u64) -> u32 {
        if let Some(p) = self.replies[host].pop_front() {
            sim.packets[p as usize].ctime = now;
            return p;
        }
        let m = self.slot_msg[slot];
        if m != NONE {
            let msg = self.msgs[m as usize];
            if msg.flits_made < msg.flits {
                return self.make_packet(sim, m as usize, now);
            }
            if self.request_reply && !msg.reply_back {
                return NONE;
            }
            self.slot_msg[slot] = NONE;
        }
        let i = self.host_next[host];
        if i >= self.host_base[host + 1] {
            return NONE;
        }
        let m = self.host_list[i as usize] as usize;
        if self.msgs[m].waiting > 0 || !self.may_start(host, self.msgs[m].phase as usize) {
            return NONE;
        }
        self.host_next[host] = i + 1;
        self.slot_msg[slot] = m as u32;
        self.msgs[m].start = now;
        self.make_packet(sim, m, now)
    }

    fn delivered(&mut self, sim: &mut Sim, d: Delivery) {
        let m = d.packet.message as usize;
        if d.packet.is_reply {
            self.msgs[m].reply_back = true;
            self.complete(m, d.time);
            return;
        }
        acc(&mut self.pkt_lat, d.time - d.packet.ctime);
        self.data_flits += d.packet.size as u64;
        let msg = &mut self.msgs[m];
        msg.packets_delivered += 1;
        if msg.packets_delivered == msg.packets_total {
            self.after_arrival.release(m, &mut self.msgs);
            let msg = &self.msgs[m];
            if self.request_reply {
                let reply = sim.alloc_packet(Packet {
                    src: msg.dst,
                    dst: msg.src,
                    size: self.reply_size,
                    hops: 0,
                    ctime: d.time,
                    itime: d.time,
                    measured: true,
                    message: m as u32,
                    is_reply: true,
                    uid: 0,
                });
                self.replies[msg.dst as usize].push_back(reply);
            } else {
                self.complete(m, d.time);
            }
        }
    }

    fn host_has_work(&self, host: usize) -> bool {
        self.host_next[host] < self.host_base[host + 1] || !self.replies[host].is_empty() || self.remaining > 0
    }
}

/// A message of a run as the driver needs it: endpoints as host indices.
fn new_msg(src: u32, dst: u32, flits: u32, phase: u32, packet_size: u32) -> Msg {
    Msg {
        src,
        dst,
        flits,
        phase,
        flits_made: 0,
        packets_total: flits.div_ceil(packet_size),
        packets_delivered: 0,
        start: 0,
        done: 0,
        reply_back: false,
        waiting: 0,
    }
}

/// Run `schedule` to completion; `progress(cycle)` is called every 10,000 cycles.
pub fn run_batch(
    topo: &Topology,
    routes: &RoutingTable,
    cfg: &SimConfig,
    schedule: &Schedule,
    flits_of: &dyn Fn(u64) -> u32,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<BatchResult> {
    batch_on(&mut super::new_sim(topo, routes, cfg)?, schedule, flits_of, progress)
}

/// [`run_batch`] on a simulator already built (and perhaps [distributed](Sim::distribute)).
pub(crate) fn batch_on(
    sim: &mut Sim,
    schedule: &Schedule,
    flits_of: &dyn Fn(u64) -> u32,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<BatchResult> {
    let (topo, cfg) = (sim.topo, sim.cfg.clone());
    schedule.check_fits(topo)?;
    let hosts = topo.num_hosts();
    let placement = schedule.placement();
    let num_phases = schedule.num_phases().max(1);
    let mut msgs = Vec::with_capacity(schedule.num_messages());
    let mut per_host: Vec<Vec<u32>> = vec![Vec::new(); hosts];
    let mut phase_left = vec![0u32; num_phases];
    let local = cfg.batch_sync == BatchSync::Local;
    if local && hosts.saturating_mul(num_phases) > 200_000_000 {
        return crate::invalid!("local sync over {num_phases} phases and {hosts} hosts is too large to track");
    }
    let mut recv_left = if local { vec![0u32; hosts * num_phases] } else { Vec::new() };
    for (p, phase) in schedule.phases().enumerate() {
        for m in phase {
            let src = placement[m.src as usize];
            let dst = placement[m.dst as usize];
            per_host[src as usize].push(msgs.len() as u32);
            phase_left[p] += 1;
            if local {
                recv_left[dst as usize * num_phases + p] += 1;
            }
            msgs.push(new_msg(src, dst, flits_of(m.bytes).max(1), p as u32, cfg.packet_size));
        }
    }
    let mut current_phase = 0;
    while current_phase < num_phases && phase_left[current_phase] == 0 {
        current_phase += 1;
    }
    let phases = PhaseState { num_phases, recv_left, phase_left, current_phase };
    drive(sim, msgs, &per_host, phases, (Csr::default(), Csr::default()), progress)
}

/// Run the task graph `graph` to completion (see the [module docs](self)); the result also
/// lists every task's start and finish cycle. `batch_sync` must be `none` (the graph is the
/// order). A task may wait only for tasks its own sender sent or received — a third party's
/// completion would need a sync message, which this model does not send — and relay edges
/// are refused. Dependencies point backwards and each host takes its tasks in task order, so
/// the lowest unstarted task can always start: a run cannot stall.
pub fn run_dag(
    topo: &Topology,
    routes: &RoutingTable,
    cfg: &SimConfig,
    graph: &TaskGraph,
    flits_of: &dyn Fn(u64) -> u32,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<BatchResult> {
    dag_on(&mut super::new_sim(topo, routes, cfg)?, graph, flits_of, progress)
}

/// [`run_dag`] on a simulator already built (and perhaps [distributed](Sim::distribute)).
pub(crate) fn dag_on(
    sim: &mut Sim,
    graph: &TaskGraph,
    flits_of: &dyn Fn(u64) -> u32,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<BatchResult> {
    let (topo, cfg) = (sim.topo, sim.cfg.clone());
    graph.check_fits(topo)?;
    if cfg.batch_sync != BatchSync::None {
        return crate::invalid!("a task graph carries its own order: batch_sync must be none for a DAG run");
    }
    let hosts = topo.num_hosts();
    let placement = graph.placement();
    let tasks = graph.tasks();
    let mut msgs = Vec::with_capacity(tasks.len());
    let mut per_host: Vec<Vec<u32>> = vec![Vec::new(); hosts];
    let mut after_sent: Vec<Vec<u32>> = vec![Vec::new(); tasks.len()];
    let mut after_arrival: Vec<Vec<u32>> = vec![Vec::new(); tasks.len()];
    for (t, task) in tasks.iter().enumerate() {
        let src = placement[task.src as usize];
        let dst = placement[task.dst as usize];
        per_host[src as usize].push(t as u32);
        let mut msg = new_msg(src, dst, flits_of(task.bytes).max(1), 0, cfg.packet_size);
        for &(p, kind) in graph.predecessors(t as u32) {
            let pred = tasks[p as usize];
            if kind == Dependency::Relay {
                return Err(NetweaveError::Schedule(format!(
                    "task {t} relays task {p}: cut-through relays are not modelled in flit batch runs"
                )));
            }
            if pred.src == task.src {
                after_sent[p as usize].push(t as u32);
            } else if pred.dst == task.src {
                after_arrival[p as usize].push(t as u32);
            } else {
                return Err(NetweaveError::Schedule(format!(
                    "task {t} waits for task {p} ({} -> {}), which its sender {} neither sends nor receives \
                     (that needs a sync message, not modelled in flit batch runs)",
                    pred.src, pred.dst, task.src
                )));
            }
            msg.waiting += 1;
        }
        msgs.push(msg);
    }
    let phases = PhaseState { num_phases: 1, recv_left: Vec::new(), phase_left: vec![0], current_phase: 1 };
    let mut r = drive(sim, msgs, &per_host, phases, (Csr::of(&after_sent), Csr::of(&after_arrival)), progress)?;
    r.messages = tasks.len() as u64;
    Ok(r)
}

/// Phase bookkeeping of the sync modes (a DAG run has one phase and no sync).
struct PhaseState {
    num_phases: usize,
    recv_left: Vec<u32>,
    phase_left: Vec<u32>,
    current_phase: usize,
}

/// Simulate `msgs` (queued per sending host in `per_host` order) until all have completed.
fn drive(
    sim: &mut Sim,
    msgs: Vec<Msg>,
    per_host: &[Vec<u32>],
    phases: PhaseState,
    (after_sent, after_arrival): (Csr, Csr),
    progress: &(dyn Fn(u64) + Sync),
) -> Result<BatchResult> {
    let cfg = &sim.cfg.clone();
    let hosts = sim.topo.num_hosts();
    let total_flits: u64 = msgs.iter().map(|m| m.flits as u64).sum();
    let track_tasks = !after_sent.base.is_empty();
    let host_lists = Csr::of(per_host);
    let PhaseState { num_phases, recv_left, phase_left, current_phase } = phases;
    let mut w = Batch {
        remaining: msgs.len() as u64,
        msgs,
        host_next: host_lists.base[..hosts].to_vec(),
        host_base: host_lists.base,
        host_list: host_lists.list,
        slot_msg: vec![NONE; sim.hosts.packet.len()],
        replies: vec![VecDeque::new(); hosts],
        packet_size: cfg.packet_size,
        reply_size: cfg.reply_size as u16,
        request_reply: cfg.request_reply,
        sync: cfg.batch_sync,
        num_phases,
        recv_left,
        phase_left,
        current_phase,
        host_finish: vec![0; hosts],
        last_done: 0,
        msg_lat: (0, 0, 0, 0),
        pkt_lat: (0, 0, 0, 0),
        data_flits: 0,
        after_sent,
        after_arrival,
    };
    while w.remaining > 0 {
        sim.step(&mut w);
        sim.take_error()?;
        sim.check_deadlock()?;
        if sim.now % 10_000 == 0 {
            progress(sim.now);
        }
        if let Some(cycle) = sim.watchdog_fired().filter(|_| sim.flits_in_network == 0) {
            return Err(NetweaveError::Schedule(format!(
                "batch stalled at cycle {cycle}: {} messages can never start (their sync condition is never met)",
                w.remaining
            )));
        }
        if sim.now >= cfg.max_cycles {
            return crate::invalid!(
                "batch did not finish within max_cycles = {} ({} messages left)",
                cfg.max_cycles,
                w.remaining
            );
        }
    }
    let completion = w.last_done;
    let message_latency = stats(&w.msg_lat);
    let bandwidth = if message_latency.avg > 0.0 {
        total_flits as f64 / message_latency.count.max(1) as f64 / message_latency.avg
    } else {
        0.0
    };
    let (task_start, task_finish) = if track_tasks {
        (w.msgs.iter().map(|m| m.start).collect(), w.msgs.iter().map(|m| m.done).collect())
    } else {
        (Vec::new(), Vec::new())
    };
    Ok(BatchResult {
        completion_cycles: completion,
        host_finish: w.host_finish,
        messages: message_latency.count,
        flits: total_flits,
        message_latency,
        packet_latency: stats(&w.pkt_lat),
        throughput_flits: if completion > 0 { w.data_flits as f64 / completion as f64 / hosts as f64 } else { 0.0 },
        bandwidth_flits_per_cycle: bandwidth,
        task_start,
        task_finish,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::grid::mesh;
    use crate::traffic::Message;

    fn setup() -> (Topology, RoutingTable, SimConfig) {
        let topo = mesh(&[4, 4], 1).unwrap();
        let routes = route(&topo, Engine::Dor, &RouteOptions::default()).unwrap();
        let mut cfg = SimConfig::default();
        for (k, v) in [("sim_type", "batch"), ("packet_size", "17"), ("threads", "1")] {
            cfg.set(k, v).unwrap();
        }
        (topo, routes, cfg)
    }

    /// A gather of hosts 15 and 5 to host 0, then the release back: 0 may send the release
    /// only once both gather messages are in, and 15 has nothing to wait for.
    #[test]
    fn a_dag_task_waits_for_what_its_sender_receives() {
        let (topo, routes, cfg) = setup();
        let mut g = TaskGraph::new("gather-release", 16);
        let a = g.add_task(Message { src: 15, dst: 0, bytes: 17 }, &[]).unwrap();
        let b = g.add_task(Message { src: 5, dst: 0, bytes: 17 }, &[]).unwrap();
        let both = [(a, Dependency::Complete), (b, Dependency::Complete)];
        let r1 = g.add_task(Message { src: 0, dst: 15, bytes: 17 }, &both).unwrap();
        let r2 = g.add_task(Message { src: 0, dst: 5, bytes: 17 }, &[(r1, Dependency::Complete)]).unwrap();
        let r = run_dag(&topo, &routes, &cfg, &g, &|b| b as u32, &|_| {}).unwrap();
        let (start, finish) = (&r.task_start, &r.task_finish);
        assert_eq!(r.messages, 4);
        let gathered = finish[a as usize].max(finish[b as usize]);
        // The far host's message (6 hops) arrives last; the release starts on that cycle.
        assert!(finish[a as usize] > finish[b as usize]);
        assert_eq!(start[r1 as usize], gathered);
        // The second release leaves once the first one's 17 flits have left host 0.
        assert!(start[r2 as usize] >= start[r1 as usize] + 17);
        assert!(finish[r2 as usize] < finish[r1 as usize] + 17, "5 is closer than 15");
        assert_eq!(r.completion_cycles, finish[r1 as usize].max(finish[r2 as usize]));
        // The same messages as a phased schedule without sync release at once.
        let s = Schedule::from_phases(
            "unsynced",
            16,
            vec![
                vec![Message { src: 15, dst: 0, bytes: 17 }, Message { src: 5, dst: 0, bytes: 17 }],
                vec![Message { src: 0, dst: 15, bytes: 17 }, Message { src: 0, dst: 5, bytes: 17 }],
            ],
        )
        .unwrap();
        let unsynced = run_batch(&topo, &routes, &cfg, &s, &|b| b as u32, &|_| {}).unwrap();
        assert!(unsynced.completion_cycles < r.completion_cycles);
        assert!(unsynced.task_start.is_empty());
    }

    #[test]
    fn dag_runs_refuse_what_they_cannot_model() {
        let (topo, routes, mut cfg) = setup();
        let mut g = TaskGraph::new("third-party", 16);
        let a = g.add_task(Message { src: 1, dst: 2, bytes: 4 }, &[]).unwrap();
        g.add_task(Message { src: 3, dst: 4, bytes: 4 }, &[(a, Dependency::Complete)]).unwrap();
        let e = run_dag(&topo, &routes, &cfg, &g, &|b| b as u32, &|_| {}).unwrap_err();
        assert!(e.to_string().contains("sync message"), "{e}");
        let mut g = TaskGraph::new("relay", 16);
        let a = g.add_task(Message { src: 1, dst: 2, bytes: 4 }, &[]).unwrap();
        g.add_task(Message { src: 2, dst: 4, bytes: 4 }, &[(a, Dependency::Relay)]).unwrap();
        let e = run_dag(&topo, &routes, &cfg, &g, &|b| b as u32, &|_| {}).unwrap_err();
        assert!(e.to_string().contains("relay"), "{e}");
        cfg.set("batch_sync", "local").unwrap();
        let e = run_dag(&topo, &routes, &cfg, &TaskGraph::new("empty", 16), &|b| b as u32, &|_| {}).unwrap_err();
        assert!(e.to_string().contains("batch_sync"), "{e}");
    }
}
