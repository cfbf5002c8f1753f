//! Open-loop runs: Bernoulli injection, warm-up, sampling and stopping as in BookSim.
//!
//! Every host draws packets with probability `injection_rate` per cycle (as geometric gaps,
//! the same distribution without a draw per host per cycle) into an unbounded source queue;
//! packet latency counts from creation, so it includes source queueing, network latency from
//! the head's injection. The run warms up for `warmup_periods` sample periods (or until the
//! warm-up thresholds hold), then measures packets created from then on, sample period by
//! sample period, until latency and throughput changed less than the stopping thresholds in
//! three periods in a row or `max_samples` periods passed; then it drains the measured
//! packets. An average latency above `latency_thres` ends the run as saturated.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;

use super::config::{SimConfig, SimType};
use super::engine::{geometric_gap, Delivery, PacketQueue, Sim, Workload};
use super::flit::{Packet, NONE};
use crate::error::Result;
use crate::routing::RoutingTable;
use crate::topology::Topology;
use crate::traffic::synthetic::SyntheticPattern;

/// Average, minimum and maximum of a latency, in cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyStats {
    pub avg: f64,
    pub min: u64,
    pub max: u64,
    pub count: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Acc {
    sum: u128,
    min: u64,
    max: u64,
    count: u64,
}

impl Acc {
    fn add(&mut self, x: u64) {
        if self.count == 0 || x < self.min {
            self.min = x;
        }
        self.max = self.max.max(x);
        self.sum += x as u128;
        self.count += 1;
    }
    fn stats(&self) -> LatencyStats {
        let avg = if self.count == 0 { 0.0 } else { self.sum as f64 / self.count as f64 };
        LatencyStats { avg, min: self.min, max: self.max, count: self.count }
    }
}

/// Outcome of one open-loop run at one load.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpenLoopResult {
    /// Offered load as configured (packets, or flits with `injection_rate_uses_flits`).
    pub injection_rate: f64,
    /// Offered flits per host per cycle.
    pub offered_flits: f64,
    /// Accepted (ejected) flits per host per cycle over the measurement.
    pub accepted_flits: f64,
    /// Accepted packets per host per cycle.
    pub accepted_packets: f64,
    /// Creation to tail arrival, measured packets.
    pub packet_latency: LatencyStats,
    /// Head injection to tail arrival.
    pub network_latency: LatencyStats,
    /// Routers crossed per packet, average.
    pub hops: f64,
    /// The load saturated the network: average latency above `latency_thres` (latency runs)
    /// or less than 95 % of the offered flits accepted (throughput runs).
    pub saturated: bool,
    /// Sample periods run after warm-up, and whether the stopping criterion was met.
    pub samples: u32,
    pub converged: bool,
    /// Cycles simulated in total (warm-up, samples, drain).
    pub cycles: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    WarmingUp,
    Running,
    Draining,
}

struct OpenLoop {
    pattern: SyntheticPattern,
    rate: f64,
    size: u16,
    /// (cycle, host) of every host's next packet, soonest first.
    next_gen: BinaryHeap<Reverse<(u64, u32)>>,
    queues: Vec<PacketQueue>,
    phase: Phase,
    plat: Acc,
    nlat: Acc,
    hops: Acc,
    outstanding_measured: u64,
    /// Sum of the creation times of the measured packets still in flight.
    outstanding_ctime: u128,
    /// Ejected flits at the last statistics reset.
    flits_at_reset: u64,
    pending_hosts: usize,
}

impl OpenLoop {
    /// BookSim's saturation test: average latency of the measured packets, those still in
    /// flight counted at their current age.
    fn latency_with_in_flight(&self, now: u64) -> f64 {
        let count = self.plat.count + self.outstanding_measured;
        if count == 0 {
            return 0.0;
        }
        let in_flight = self.outstanding_measured as u128 * now as u128 - self.outstanding_ctime;
        (self.plat.sum + in_flight) as f64 / count as f64
    }
}

impl Workload for OpenLoop {
    fn generate(&mut self, sim: &mut Sim, now: u64) {
        // Hosts due now, in host order (the order they draw from the random stream in).
        while let Some(&Reverse((due, h))) = self.next_gen.peek() {
            if due > now {
                break;
            }
            self.next_gen.pop();
            let h = h as usize;
            let dst = self.pattern.dest(h as u32, &mut sim.rng);
            let measured = self.phase == Phase::Running;
            let p = sim.alloc_packet(Packet {
                src: h as u32,
                dst,
                size: self.size,
                hops: 0,
                ctime: now,
                itime: now,
                measured,
                message: NONE,
                is_reply: false,
                uid: 0,
            });
            if measured {
                self.outstanding_measured += 1;
                self.outstanding_ctime += now as u128;
            }
            if self.queues[h].is_empty() {
                self.pending_hosts += 1;
            }
            self.queues[h].push_back(p);
            sim.wake_host(h);
            let gap = geometric_gap(&mut sim.rng, self.rate);
            self.next_gen.push(Reverse((now.saturating_add(gap), h as u32)));
        }
    }

    fn next_packet(&mut self, _sim: &mut Sim, host: usize, _slot: usize, _now: u64) -> u32 {
        match self.queues[host].pop_front() {
            Some(p) => {
                if self.queues[host].is_empty() {
                    self.pending_hosts -= 1;
                }
                p
            }
            None => NONE,
        }
    }

    fn delivered(&mut self, _sim: &mut Sim, d: Delivery) {
        if d.packet.measured {
            self.outstanding_measured -= 1;
            self.outstanding_ctime -= d.packet.ctime as u128;
            self.plat.add(d.time - d.packet.ctime);
            self.nlat.add(d.time - d.packet.itime);
            self.hops.add(d.packet.hops as u64);
        }
    }

    fn host_has_work(&self, host: usize) -> bool {
        !self.queues[host].is_empty()
    }

    fn wakes_hosts(&self) -> bool {
        true
    }
}

/// Run one open-loop simulation; `progress(cycle)` is called every sample period.
pub fn run_open_loop(
    topo: &Topology,
    routes: &RoutingTable,
    cfg: &SimConfig,
    pattern: &SyntheticPattern,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<OpenLoopResult> {
    open_loop_on(&mut super::new_sim(topo, routes, cfg)?, pattern, progress)
}

/// [`run_open_loop`] on a simulator already built (and perhaps [distributed](Sim::distribute)).
pub(crate) fn open_loop_on(
    sim: &mut Sim,
    pattern: &SyntheticPattern,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<OpenLoopResult> {
    let cfg = &sim.cfg.clone();
    let n = sim.topo.num_hosts();
    let rate = cfg.packet_rate();
    let mut w = OpenLoop {
        pattern: pattern.clone(),
        rate,
        size: cfg.packet_size as u16,
        next_gen: BinaryHeap::with_capacity(n),
        queues: vec![PacketQueue::new(); n],
        phase: Phase::WarmingUp,
        plat: Acc::default(),
        nlat: Acc::default(),
        hops: Acc::default(),
        outstanding_measured: 0,
        outstanding_ctime: 0,
        flits_at_reset: 0,
        pending_hosts: 0,
    };
    for h in 0..n {
        let g = geometric_gap(&mut sim.rng, rate) - 1;
        w.next_gen.push(Reverse((g, h as u32)));
    }
    let measure_latency = cfg.sim_type == SimType::Latency;
    let period = cfg.sample_period as u64;
    let mut reset_time = 0u64;
    let mut prev_latency = 0.0f64;
    let mut prev_accepted = 0.0f64;
    let mut converged = 0u32;
    let mut total_phases = 0u32;
    let mut samples = 0u32;
    let mut saturated = false;
    let mut clear_last = false;
    while total_phases < cfg.max_samples && (w.phase != Phase::Running || converged < 3) {
        if clear_last || (w.phase == Phase::WarmingUp && total_phases % 2 == 0) {
            clear_last = false;
            w.plat = Acc::default();
            w.nlat = Acc::default();
            w.hops = Acc::default();
            w.flits_at_reset = sim.ejected_flits;
            reset_time = sim.now;
        }
        for _ in 0..period {
            sim.step(&mut w);
            sim.take_error()?;
            sim.check_deadlock()?;
        }
        // The statistics read below must count every rank's ejections.
        sim.sync();
        progress(sim.now);
        let cur_latency = w.plat.stats().avg;
        let accepted = (sim.ejected_flits - w.flits_at_reset) as f64 / (sim.now - reset_time) as f64 / n as f64;
        let lat_change = if cur_latency > 0.0 { ((cur_latency - prev_latency) / cur_latency).abs() } else { 1.0 };
        let acc_change = if accepted > 0.0 { ((accepted - prev_accepted) / accepted).abs() } else { 1.0 };
        prev_latency = cur_latency;
        prev_accepted = accepted;
        if measure_latency && w.latency_with_in_flight(sim.now) > cfg.latency_thres {
            saturated = true;
            break;
        }
        match w.phase {
            Phase::WarmingUp => {
                let done = if cfg.warmup_periods > 0 {
                    total_phases + 1 >= cfg.warmup_periods
                } else {
                    (!measure_latency || lat_change <= cfg.warmup_thres) && acc_change <= cfg.acc_warmup_thres
                };
                if done {
                    clear_last = true;
                    w.phase = Phase::Running;
                }
            }
            Phase::Running => {
                samples += 1;
                if (!measure_latency || lat_change <= cfg.stopping_thres) && acc_change <= cfg.acc_stopping_thres {
                    converged += 1;
                } else {
                    converged = 0;
                }
            }
            Phase::Draining => {}
        }
        total_phases += 1;
    }
    let was_running = w.phase == Phase::Running;
    let conv = converged >= 3;
    let measured_cycles = sim.now - reset_time;
    let accepted_flits_measured = sim.ejected_flits - w.flits_at_reset;
    if was_running && !saturated && measure_latency {
        w.phase = Phase::Draining;
        let mut last_check = sim.now;
        while w.outstanding_measured > 0 {
            sim.step(&mut w);
            sim.take_error()?;
            sim.check_deadlock()?;
            if sim.now - last_check >= 1000 {
                last_check = sim.now;
                if w.latency_with_in_flight(sim.now) > cfg.latency_thres {
                    saturated = true;
                    break;
                }
            }
        }
    }
    let offered = rate * cfg.packet_size as f64;
    let accepted_flits =
        if measured_cycles > 0 { accepted_flits_measured as f64 / measured_cycles as f64 / n as f64 } else { 0.0 };
    // Latency runs saturate by the latency threshold (as BookSim); throughput runs when the
    // network accepts clearly less than is offered.
    if !measure_latency && accepted_flits < 0.95 * offered {
        saturated = true;
    }
    if saturated {
        deadlock_or_saturation(sim, &mut w)?;
    }
    let hops = w.hops.stats().avg;
    Ok(OpenLoopResult {
        injection_rate: cfg.injection_rate,
        offered_flits: offered,
        accepted_flits,
        accepted_packets: accepted_flits / cfg.packet_size as f64,
        packet_latency: w.plat.stats(),
        network_latency: w.nlat.stats(),
        hops,
        saturated,
        samples,
        converged: conv,
        cycles: sim.now,
    })
}

/// A load declared saturated may be a deadlock: flits in flight and none moving. Step on until
/// a flit moves (saturation: the run stands) or the watchdog fires after `deadlock_cycles`
/// without movement (deadlock: an error naming the blocked channels), so a user can tell the
/// two apart. Saturated networks move flits every few cycles, so this costs them little.
fn deadlock_or_saturation(sim: &mut Sim, w: &mut OpenLoop) -> Result<()> {
    let mark = sim.now;
    loop {
        sim.sync();
        if sim.flits_in_network == 0 || sim.last_progress >= mark {
            return Ok(());
        }
        sim.step(w);
        sim.take_error()?;
        sim.check_deadlock()?;
    }
}
