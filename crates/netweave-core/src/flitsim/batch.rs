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

use std::collections::VecDeque;

use serde::Serialize;

use super::config::{BatchSync, SimConfig};
use super::engine::{Delivery, Packet, Sim, Workload, NONE};
use super::open_loop::LatencyStats;
use crate::error::{NetweaveError, Result};
use crate::routing::RoutingTable;
use crate::topology::Topology;
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
    reply_back: bool,
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
            partition: 0,
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
        if !self.may_start(host, self.msgs[m].phase as usize) {
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
                    partition: 0,
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

/// Run `schedule` to completion; `progress(cycle)` is called every 10,000 cycles.
pub fn run_batch(
    topo: &Topology,
    routes: &RoutingTable,
    cfg: &SimConfig,
    schedule: &Schedule,
    flits_of: &dyn Fn(u64) -> u32,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<BatchResult> {
    schedule.check_fits(topo)?;
    let mut sim = Sim::new(topo, routes, cfg)?;
    if let Some((dims, hosts_per_router)) = super::booksim_torus_of(topo, cfg) {
        sim.use_booksim_torus(dims, hosts_per_router)?;
    }
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
    let mut total_flits = 0u64;
    for (p, phase) in schedule.phases().enumerate() {
        for m in phase {
            let src = placement[m.src as usize];
            let dst = placement[m.dst as usize];
            let flits = flits_of(m.bytes).max(1);
            total_flits += flits as u64;
            per_host[src as usize].push(msgs.len() as u32);
            phase_left[p] += 1;
            if local {
                recv_left[dst as usize * num_phases + p] += 1;
            }
            msgs.push(Msg {
                src,
                dst,
                flits,
                phase: p as u32,
                flits_made: 0,
                packets_total: flits.div_ceil(cfg.packet_size),
                packets_delivered: 0,
                start: 0,
                reply_back: false,
            });
        }
    }
    let mut host_base = Vec::with_capacity(hosts + 1);
    let mut host_list = Vec::with_capacity(msgs.len());
    for list in &per_host {
        host_base.push(host_list.len() as u32);
        host_list.extend_from_slice(list);
    }
    host_base.push(host_list.len() as u32);
    let mut current_phase = 0;
    while current_phase < num_phases && phase_left[current_phase] == 0 {
        current_phase += 1;
    }
    let mut w = Batch {
        remaining: msgs.len() as u64,
        msgs,
        host_next: host_base[..hosts].to_vec(),
        host_base,
        host_list,
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
    };
    while w.remaining > 0 {
        sim.step(&mut w);
        sim.take_error()?;
        sim.check_deadlock()?;
        if sim.now % 10_000 == 0 {
            progress(sim.now);
        }
        if sim.flits_in_network == 0 && sim.now - sim.last_progress > cfg.deadlock_cycles as u64 {
            return Err(NetweaveError::Schedule(format!(
                "batch stalled at cycle {}: {} messages can never start (their sync condition is never met)",
                sim.now, w.remaining
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
    Ok(BatchResult {
        completion_cycles: completion,
        host_finish: w.host_finish,
        messages: message_latency.count,
        flits: total_flits,
        message_latency,
        packet_latency: stats(&w.pkt_lat),
        throughput_flits: if completion > 0 { w.data_flits as f64 / completion as f64 / hosts as f64 } else { 0.0 },
        bandwidth_flits_per_cycle: bandwidth,
    })
}
