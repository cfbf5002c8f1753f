//! Flow-level simulation: how long a schedule takes on a fabric — the second evaluation engine.
//!
//! Every message is a *flow* over its routed path ([`RoutingTable::path`]). Flows share the
//! bandwidth of the directed channels they cross max-min fairly (progressive filling,
//! recomputed incrementally, see [`maxmin`]). A message of `M` bytes issued at `t` occupies one
//! of its sender's controllers for the software overhead `o`, then streams at its max-min
//! rate until its tail has left (`α`), and is delivered one path latency later
//! (`β = α + L`) — paper 004's cost model `C = L + M/B` when it runs alone. Hosts inject and
//! eject at their link's rate, or at an overridden rate.
//!
//! [`Executor`]s decide when each message is issued:
//! - [`Executor::Sync`]: phase-synchronous; phase `p + 1` starts a barrier cost after the last
//!   message of phase `p` has been delivered (MPI pairwise exchange).
//! - [`Executor::Async`]: each host drains its send list in FIFO order with `nct` concurrent
//!   sends (paper 001's communication controllers), never waiting for anyone.
//! - [`Executor::LocalSync`]: like `Async`, but a host starts step `s` (the schedule's phases
//!   taken `nct` at a time, paper 001's groups) only once every message of step `s − 1`
//!   addressed to it has arrived and its own step-`s − 1` sends have left.
//! - [`Executor::Dag`]: a [`TaskGraph`](crate::traffic::dag::TaskGraph) run as paper 004's
//!   runtime runs it: 1-byte sync messages between hosts, cut-through relays, `nct` sends at
//!   a time per host in the order they become ready.
//!
//! ```
//! use netweave_core::{flowsim::{simulate, Executor, FlowConfig}, routing::shortest_path};
//! use netweave_core::{topology::grid::mesh, traffic::Schedule};
//! let topo = mesh(&[4], 1).unwrap();              // 100 Gbit/s, 100 ns links
//! let routes = shortest_path(&topo).unwrap();
//! let sched = Schedule::shift_alltoall(4, 1 << 20).unwrap();
//! let report = simulate(&topo, &routes, &sched, &FlowConfig::new(Executor::Sync)).unwrap();
//! assert!(report.makespan_s > 0.0);
//! ```

use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use serde::Serialize;

use crate::error::{NetweaveError, Result};
use crate::routing::RoutingTable;
use crate::topology::{ChannelId, Topology};
use crate::traffic::dag::{Dependency, TaskGraph};
use crate::traffic::{Message, Schedule};

mod maxmin;

use maxmin::FairShare;

/// When each message of a schedule is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Executor {
    /// Phase-synchronous with a barrier between phases.
    Sync,
    /// FIFO send list per host, `nct` sends in flight, no waiting.
    Async,
    /// FIFO per host, each step waits for the previous step's incoming messages.
    LocalSync,
    /// A dependency DAG with sync messages and relays.
    Dag,
}

impl Executor {
    /// Every executor, in the order the CLI lists them.
    pub const ALL: [Executor; 4] = [Executor::Sync, Executor::Async, Executor::LocalSync, Executor::Dag];

    /// CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Executor::Sync => "sync",
            Executor::Async => "async",
            Executor::LocalSync => "local-sync",
            Executor::Dag => "dag",
        }
    }
}

impl std::str::FromStr for Executor {
    type Err = NetweaveError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "sync" | "phase-sync" => Ok(Executor::Sync),
            "async" | "fifo" => Ok(Executor::Async),
            "local-sync" | "localsync" | "local" => Ok(Executor::LocalSync),
            "dag" => Ok(Executor::Dag),
            _ => crate::invalid!("unknown executor '{s}' (known: sync, async, local-sync, dag)"),
        }
    }
}

/// Knobs of a flow-level run. [`FlowConfig::new`] gives the defaults.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowConfig {
    pub executor: Executor,
    /// Concurrent sends per host (paper 001's NCT); at least 1.
    pub nct: u32,
    /// Cost of the barrier between phases of the `Sync` executor, seconds.
    pub barrier_s: f64,
    /// Software overhead per message, paid by the sender before the data moves, seconds.
    pub overhead_s: f64,
    /// Packet payload size; `None` sends messages as one unframed stream.
    pub mtu: Option<u64>,
    /// Header bytes added per packet (with `mtu`), or per message (without).
    pub header_bytes: u64,
    /// Host injection limit in Gbit/s; `None` = the host link's bandwidth.
    pub injection_gbps: Option<f64>,
    /// Host ejection limit in Gbit/s; `None` = the host link's bandwidth.
    pub ejection_gbps: Option<f64>,
    /// Replace every message's size by this many bytes.
    pub bytes: Option<u64>,
    /// Record a time series of active flows and aggregate rate at every change.
    pub series: bool,
}

impl FlowConfig {
    /// Defaults: one send at a time, no barrier cost, no overhead, no packetisation.
    pub fn new(executor: Executor) -> Self {
        FlowConfig {
            executor,
            nct: 1,
            barrier_s: 0.0,
            overhead_s: 0.0,
            mtu: None,
            header_bytes: 0,
            injection_gbps: None,
            ejection_gbps: None,
            bytes: None,
            series: false,
        }
    }

    fn check(&self) -> Result<()> {
        if self.nct == 0 {
            return crate::invalid!("nct (concurrent sends per host) must be at least 1");
        }
        for (name, v) in [("barrier cost", self.barrier_s), ("overhead", self.overhead_s)] {
            if !(v.is_finite() && v >= 0.0) {
                return crate::invalid!("{name} must be a non-negative number of seconds, got {v}");
            }
        }
        if self.mtu == Some(0) {
            return crate::invalid!("mtu must be at least 1 byte");
        }
        for (name, v) in [("injection", self.injection_gbps), ("ejection", self.ejection_gbps)] {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0) {
                    return crate::invalid!("{name} bandwidth must be a positive number of Gbit/s, got {v}");
                }
            }
        }
        Ok(())
    }

    /// Bytes on the wire for a payload of `bytes`.
    pub fn wire_bytes(&self, bytes: u64) -> u64 {
        match self.mtu {
            Some(mtu) => bytes + bytes.div_ceil(mtu).max(1) * self.header_bytes,
            None => bytes + self.header_bytes,
        }
    }
}

/// One sample of the optional time series.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SeriesPoint {
    pub time_s: f64,
    /// Flows streaming data at this time.
    pub active_flows: u32,
    /// Sum of their rates, bytes/s.
    pub aggregate_rate_bps: f64,
}

/// Result of a flow-level run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowReport {
    pub executor: Executor,
    pub nct: u32,
    /// Time from the first issue to the last delivery, seconds.
    pub makespan_s: f64,
    /// Messages simulated (including those between ranks on one host).
    pub messages: u64,
    /// Messages that crossed the network.
    pub network_messages: u64,
    /// Payload bytes of all messages.
    pub payload_bytes: u64,
    /// Per host index: time its last send left or its last message arrived (0 if idle).
    pub host_finish_s: Vec<f64>,
    /// Per directed channel: time it carried data.
    pub channel_busy_s: Vec<f64>,
    /// Per directed channel: bytes on the wire it carried.
    pub channel_bytes: Vec<u64>,
    /// Per directed channel: bytes carried / (capacity × makespan).
    pub channel_utilisation: Vec<f64>,
    pub max_channel_utilisation: f64,
    /// Mean over channels that carried anything.
    pub mean_channel_utilisation: f64,
    /// Mean over sending hosts of payload bytes sent / makespan, MiB/s (IMB-style per-server
    /// throughput: an all-to-all of `M` bytes per pair gives `(N − 1)·M / T`).
    pub throughput_per_server_mib_s: f64,
    /// Sync messages sent (DAG executor).
    pub sync_messages: u64,
    /// Bandwidth reallocations and flows recomputed in them (how much work incrementality saved).
    pub reallocations: u64,
    pub flows_recomputed: u64,
    /// Flows whose rate actually changed in those reallocations (each costs a new drain event).
    pub rates_changed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<SeriesPoint>>,
}

/// Simulate a phased schedule with the `Sync`, `Async` or `LocalSync` executor.
pub fn simulate(
    topo: &Topology,
    routes: &RoutingTable,
    schedule: &Schedule,
    config: &FlowConfig,
) -> Result<FlowReport> {
    simulate_with_progress(topo, routes, schedule, config, None)
}

/// [`simulate`], counting delivered messages in `progress` as it goes (for progress bars).
pub fn simulate_with_progress(
    topo: &Topology,
    routes: &RoutingTable,
    schedule: &Schedule,
    config: &FlowConfig,
    progress: Option<&AtomicU64>,
) -> Result<FlowReport> {
    config.check()?;
    schedule.check_fits(topo)?;
    if config.executor == Executor::Dag {
        let dag = TaskGraph::from_schedule(schedule)?;
        return simulate_dag_with_progress(topo, routes, &dag, config, progress);
    }
    let msgs: Vec<Message> = schedule.phases().flat_map(|p| p.iter().copied()).collect();
    let mut phase_of = Vec::with_capacity(msgs.len());
    for (p, phase) in schedule.phases().enumerate() {
        phase_of.extend(std::iter::repeat(p as u32).take(phase.len()));
    }
    let work = Workload::build(topo, routes, &msgs, schedule.placement(), config)?;
    let control = match config.executor {
        Executor::Sync => Control::sync(&phase_of, schedule.num_phases()),
        Executor::Async => Control::Async,
        Executor::LocalSync => Control::local_sync(&work, &phase_of, schedule.num_phases(), config.nct)?,
        Executor::Dag => unreachable!("handled above"),
    };
    Sim::new(topo, routes, work, control, config, progress).run()
}

/// Simulate a dependency DAG (paper 004's executor); `config.executor` is ignored.
pub fn simulate_dag(
    topo: &Topology,
    routes: &RoutingTable,
    dag: &TaskGraph,
    config: &FlowConfig,
) -> Result<FlowReport> {
    simulate_dag_with_progress(topo, routes, dag, config, None)
}

/// [`simulate_dag`] with a delivered-message counter.
pub fn simulate_dag_with_progress(
    topo: &Topology,
    routes: &RoutingTable,
    dag: &TaskGraph,
    config: &FlowConfig,
    progress: Option<&AtomicU64>,
) -> Result<FlowReport> {
    let mut config = config.clone();
    config.executor = Executor::Dag;
    config.check()?;
    dag.check_fits(topo)?;
    let work = Workload::build(topo, routes, dag.tasks(), dag.placement(), &config)?;
    let control = Control::dag(dag);
    Sim::new(topo, routes, work, control, &config, progress).run()
}

/// Messages resolved to hosts, wire sizes, resource paths and latencies.
struct Workload {
    src: Vec<u32>,
    dst: Vec<u32>,
    payload: Vec<u64>,
    wire: Vec<u64>,
    latency: Vec<f64>,
    capacity: Vec<f64>,
    path_off: Vec<u32>,
    path_res: Vec<u32>,
    num_channels: usize,
}

fn bytes_per_s(gbps: f64) -> f64 {
    gbps * 1e9 / 8.0
}

impl Workload {
    fn build(
        topo: &Topology,
        routes: &RoutingTable,
        msgs: &[Message],
        placement: &[u32],
        config: &FlowConfig,
    ) -> Result<Self> {
        routes.check_fits(topo)?;
        let nch = topo.num_channels();
        let nh = topo.num_hosts();
        let mut capacity: Vec<f64> =
            (0..nch).map(|c| bytes_per_s(topo.link((c / 2) as u32).spec.bandwidth_gbps)).collect();
        // Extra resources only when a host limit is overridden: injection then ejection, per host.
        let inj_base = capacity.len();
        if let Some(g) = config.injection_gbps {
            capacity.extend(std::iter::repeat(bytes_per_s(g)).take(nh));
        }
        let ej_base = capacity.len();
        if let Some(g) = config.ejection_gbps {
            capacity.extend(std::iter::repeat(bytes_per_s(g)).take(nh));
        }
        if let Some((c, &cap)) = capacity.iter().enumerate().find(|(_, &c)| !(c.is_finite() && c > 0.0)) {
            return crate::invalid!("resource {c} has bandwidth {cap} B/s; bandwidths must be positive");
        }
        let n = msgs.len();
        let mut w = Workload {
            src: Vec::with_capacity(n),
            dst: Vec::with_capacity(n),
            payload: Vec::with_capacity(n),
            wire: Vec::with_capacity(n),
            latency: Vec::with_capacity(n),
            capacity,
            path_off: Vec::with_capacity(n + 1),
            path_res: Vec::with_capacity(n * 6),
            num_channels: nch,
        };
        w.path_off.push(0);
        let mut channels: Vec<ChannelId> = Vec::new();
        for m in msgs {
            let (s, d) = (placement[m.src as usize], placement[m.dst as usize]);
            let bytes = config.bytes.unwrap_or(m.bytes);
            w.src.push(s);
            w.dst.push(d);
            w.payload.push(bytes);
            if s == d {
                w.wire.push(0);
                w.latency.push(0.0);
            } else {
                channels.clear();
                routes.path(topo, s as usize, d as usize, &mut channels)?;
                w.wire.push(config.wire_bytes(bytes));
                w.latency.push(channels.iter().map(|&c| topo.link(c / 2).spec.latency_ns).sum::<f64>() * 1e-9);
                if config.injection_gbps.is_some() {
                    w.path_res.push((inj_base + s as usize) as u32);
                }
                w.path_res.extend_from_slice(&channels);
                if config.ejection_gbps.is_some() {
                    w.path_res.push((ej_base + d as usize) as u32);
                }
            }
            if w.path_res.len() > u32::MAX as usize {
                return crate::invalid!("the schedule's paths exceed 2^32 hops in total; simulate it in parts");
            }
            w.path_off.push(w.path_res.len() as u32);
        }
        Ok(w)
    }

    fn len(&self) -> usize {
        self.src.len()
    }
}

/// Executor-specific bookkeeping.
enum Control {
    Sync {
        /// Messages of phase `p` are `phase_off[p]..phase_off[p + 1]` (they are stored in phase order).
        phase_off: Vec<u32>,
        outstanding: Vec<u32>,
    },
    Async,
    LocalSync {
        steps: usize,
        /// Messages sent by host `h` in step `s`: `by_host_step[off[h * steps + s]..off[h * steps + s + 1]]`.
        off: Vec<u32>,
        by_host_step: Vec<u32>,
        step_of: Vec<u32>,
        /// Messages still to arrive at / leave host `h` in step `s`.
        in_left: Vec<u32>,
        out_left: Vec<u32>,
        next_step: Vec<u32>,
    },
    Dag {
        /// Successors of task `t`: `succ[succ_off[t]..succ_off[t + 1]]`.
        succ_off: Vec<u32>,
        succ: Vec<(u32, Dependency)>,
        waiting: Vec<u32>,
        /// Task each relay forwards, `u32::MAX` if none.
        relay_of: Vec<u32>,
    },
}

impl Control {
    fn sync(phase_of: &[u32], phases: usize) -> Control {
        let mut phase_off = vec![0u32; phases + 1];
        for &p in phase_of {
            phase_off[p as usize + 1] += 1;
        }
        let outstanding = phase_off[1..].to_vec();
        for p in 0..phases {
            phase_off[p + 1] += phase_off[p];
        }
        Control::Sync { phase_off, outstanding }
    }

    fn local_sync(work: &Workload, phase_of: &[u32], phases: usize, nct: u32) -> Result<Control> {
        let steps = phases.div_ceil(nct as usize).max(1);
        let hosts = work.src.iter().chain(&work.dst).map(|&h| h as usize + 1).max().unwrap_or(0);
        let cells = hosts.saturating_mul(steps);
        if cells > 200_000_000 {
            return crate::invalid!("local sync over {hosts} hosts × {steps} steps is too large to track");
        }
        let step_of: Vec<u32> = phase_of.iter().map(|&p| p / nct).collect();
        let mut off = vec![0u32; cells + 1];
        let mut in_left = vec![0u32; cells];
        for (m, &s) in step_of.iter().enumerate() {
            off[work.src[m] as usize * steps + s as usize + 1] += 1;
            in_left[work.dst[m] as usize * steps + s as usize] += 1;
        }
        let out_left = off[1..].to_vec();
        for i in 0..cells {
            off[i + 1] += off[i];
        }
        let mut fill = off.clone();
        let mut by_host_step = vec![0u32; step_of.len()];
        for (m, &s) in step_of.iter().enumerate() {
            let cell = work.src[m] as usize * steps + s as usize;
            by_host_step[fill[cell] as usize] = m as u32;
            fill[cell] += 1;
        }
        Ok(Control::LocalSync { steps, off, by_host_step, step_of, in_left, out_left, next_step: vec![0; hosts] })
    }

    fn dag(dag: &TaskGraph) -> Control {
        let n = dag.num_tasks();
        let mut succ_off = vec![0u32; n + 1];
        let mut waiting = vec![0u32; n];
        let mut relay_of = vec![u32::MAX; n];
        for t in 0..n as u32 {
            for &(p, kind) in dag.predecessors(t) {
                succ_off[p as usize + 1] += 1;
                waiting[t as usize] += 1;
                if kind == Dependency::Relay {
                    relay_of[t as usize] = p;
                }
            }
        }
        for i in 0..n {
            succ_off[i + 1] += succ_off[i];
        }
        let mut fill = succ_off.clone();
        let mut succ = vec![(0u32, Dependency::Complete); dag.num_dependencies()];
        for t in 0..n as u32 {
            for &(p, kind) in dag.predecessors(t) {
                succ[fill[p as usize] as usize] = (t, kind);
                fill[p as usize] += 1;
            }
        }
        Control::Dag { succ_off, succ, waiting, relay_of }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventKind {
    /// The message's data starts streaming (after the overhead).
    Start,
    /// The flow's last byte may leave now. Only the flow's earliest pending drain event counts;
    /// if its rate has dropped since, the event finds the flow unfinished and moves on.
    Drain,
    /// The message's tail reaches its receiver.
    Deliver,
    /// One of the task's dependencies is met.
    Satisfy,
    /// A barrier releases this phase.
    Release,
}

#[derive(Clone, Copy, Debug)]
struct Event {
    time: f64,
    seq: u64,
    kind: EventKind,
    id: u32,
}
impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Event {}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.time.total_cmp(&self.time).then_with(|| other.seq.cmp(&self.seq))
    }
}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Drain times within this relative distance are processed together (one reallocation).
const SAME_TIME: f64 = 1e-10;

struct Sim<'a> {
    topo: &'a Topology,
    routes: &'a RoutingTable,
    work: Workload,
    control: Control,
    config: &'a FlowConfig,
    progress: Option<&'a AtomicU64>,
    fair: FairShare,
    events: BinaryHeap<Event>,
    seq: u64,
    now: f64,
    // Per message.
    remaining: Vec<f64>,
    rate: Vec<f64>,
    last: Vec<f64>,
    /// Time of the flow's earliest pending drain event (infinity if none).
    scheduled: Vec<f64>,
    /// End of the instant being processed (events up to here count as simultaneous).
    horizon: f64,
    /// Tail has been streamed but a relay's upstream has not fully arrived yet.
    drained_waiting: Vec<bool>,
    delivered: Vec<bool>,
    // Per host.
    free: Vec<u32>,
    queue: Vec<VecDeque<u32>>,
    host_finish: Vec<f64>,
    // Per resource accounting.
    res_last: Vec<f64>,
    res_busy: Vec<f64>,
    // Pending flow changes of the current instant.
    joining: Vec<u32>,
    leaving: Vec<u32>,
    changed: Vec<(u32, f64)>,
    delivered_count: u64,
    sync_messages: u64,
    active: u32,
    aggregate_rate: f64,
    series: Vec<SeriesPoint>,
}

impl<'a> Sim<'a> {
    fn new(
        topo: &'a Topology,
        routes: &'a RoutingTable,
        work: Workload,
        control: Control,
        config: &'a FlowConfig,
        progress: Option<&'a AtomicU64>,
    ) -> Self {
        let n = work.len();
        let nh = topo.num_hosts();
        let nres = work.capacity.len();
        let fair = FairShare::new(work.capacity.clone(), work.path_off.clone(), work.path_res.clone());
        Sim {
            topo,
            routes,
            control,
            config,
            progress,
            fair,
            events: BinaryHeap::new(),
            seq: 0,
            now: 0.0,
            remaining: vec![0.0; n],
            rate: vec![0.0; n],
            last: vec![0.0; n],
            scheduled: vec![f64::INFINITY; n],
            horizon: 0.0,
            drained_waiting: vec![false; n],
            delivered: vec![false; n],
            free: vec![config.nct; nh],
            queue: vec![VecDeque::new(); nh],
            host_finish: vec![0.0; nh],
            res_last: vec![0.0; nres],
            res_busy: vec![0.0; nres],
            joining: Vec::new(),
            leaving: Vec::new(),
            changed: Vec::new(),
            delivered_count: 0,
            sync_messages: 0,
            active: 0,
            aggregate_rate: 0.0,
            series: Vec::new(),
            work,
        }
    }

    fn push(&mut self, time: f64, kind: EventKind, id: u32) {
        self.seq += 1;
        self.events.push(Event { time, seq: self.seq, kind, id });
    }

    fn run(mut self) -> Result<FlowReport> {
        self.begin();
        self.reallocate();
        while let Some(first) = self.events.pop() {
            let horizon = first.time + first.time.abs() * SAME_TIME;
            self.horizon = horizon;
            self.now = first.time;
            self.handle(first);
            // Everything due at this instant, including what handling it scheduled.
            while let Some(e) = self.events.peek() {
                if e.time > horizon {
                    break;
                }
                let e = self.events.pop().expect("peeked");
                self.handle(e);
            }
            self.reallocate();
        }
        let n = self.work.len();
        if self.delivered_count as usize != n {
            return Err(NetweaveError::Schedule(format!(
                "{} of {n} messages never ran: the dependencies can never all be met",
                n - self.delivered_count as usize
            )));
        }
        Ok(self.report())
    }

    fn begin(&mut self) {
        match &self.control {
            Control::Sync { .. } => self.push(0.0, EventKind::Release, 0),
            Control::Async => {
                for m in 0..self.work.len() as u32 {
                    self.queue[self.work.src[m as usize] as usize].push_back(m);
                }
                for h in 0..self.queue.len() {
                    self.dispatch(h);
                }
            }
            Control::LocalSync { next_step, .. } => {
                for h in 0..next_step.len() {
                    self.advance_host(h);
                }
            }
            Control::Dag { waiting, .. } => {
                let roots: Vec<u32> = (0..waiting.len() as u32).filter(|&t| waiting[t as usize] == 0).collect();
                for t in roots {
                    self.ready(t);
                }
            }
        }
    }

    fn handle(&mut self, e: Event) {
        let m = e.id as usize;
        match e.kind {
            EventKind::Start => self.start(e.id),
            EventKind::Drain => {
                if e.time != self.scheduled[m] || self.rate[m] == 0.0 {
                    return; // superseded by an earlier event, or already drained
                }
                self.scheduled[m] = f64::INFINITY;
                let done = self.last[m] + self.remaining[m] / self.rate[m];
                if done > self.horizon {
                    self.scheduled[m] = done;
                    self.push(done, EventKind::Drain, e.id);
                    return;
                }
                {
                    self.leaving.push(e.id);
                    self.active -= 1;
                    self.aggregate_rate -= self.rate[m];
                    self.rate[m] = 0.0;
                    self.remaining[m] = 0.0;
                    self.tail_streamed(e.id);
                }
            }
            EventKind::Deliver => self.deliver(e.id),
            EventKind::Satisfy => {
                let Control::Dag { waiting, .. } = &mut self.control else { unreachable!() };
                waiting[m] -= 1;
                if waiting[m] == 0 {
                    self.ready(e.id);
                }
            }
            EventKind::Release => {
                let Control::Sync { phase_off, outstanding } = &self.control else { unreachable!() };
                let mut p = m;
                // Skip empty phases at once.
                while p < outstanding.len() && outstanding[p] == 0 {
                    p += 1;
                }
                if p < outstanding.len() {
                    let (lo, hi) = (phase_off[p], phase_off[p + 1]);
                    for msg in lo..hi {
                        self.queue[self.work.src[msg as usize] as usize].push_back(msg);
                    }
                    for msg in lo..hi {
                        self.dispatch(self.work.src[msg as usize] as usize);
                    }
                }
            }
        }
    }

    /// Queue a message at its sender and start it if a controller is free.
    fn ready(&mut self, m: u32) {
        let h = self.work.src[m as usize] as usize;
        self.queue[h].push_back(m);
        self.dispatch(h);
    }

    fn dispatch(&mut self, h: usize) {
        while self.free[h] > 0 {
            let Some(m) = self.queue[h].pop_front() else { break };
            self.free[h] -= 1;
            let t = self.now + self.config.overhead_s;
            if t == self.now {
                self.start(m);
            } else {
                self.push(t, EventKind::Start, m);
            }
        }
    }

    fn start(&mut self, m: u32) {
        let mi = m as usize;
        if let Control::Dag { succ_off, succ, .. } = &self.control {
            // Relays may start once this message's head reaches them.
            let head = self.now + self.work.latency[mi];
            let relays: Vec<u32> = succ[succ_off[mi] as usize..succ_off[mi + 1] as usize]
                .iter()
                .filter(|s| s.1 == Dependency::Relay)
                .map(|s| s.0)
                .collect();
            for r in relays {
                self.push(head, EventKind::Satisfy, r);
            }
        }
        if self.work.wire[mi] == 0 {
            self.tail_streamed(m);
        } else {
            self.remaining[mi] = self.work.wire[mi] as f64;
            self.last[mi] = self.now;
            self.active += 1;
            self.joining.push(m);
        }
    }

    /// The flow has streamed all its bytes; a relay may still wait for its upstream.
    fn tail_streamed(&mut self, m: u32) {
        if let Control::Dag { relay_of, .. } = &self.control {
            let up = relay_of[m as usize];
            if up != u32::MAX && !self.delivered[up as usize] {
                self.drained_waiting[m as usize] = true;
                return;
            }
        }
        self.tail_left(m);
    }

    /// The message's tail leaves its sender now.
    fn tail_left(&mut self, m: u32) {
        let mi = m as usize;
        let src = self.work.src[mi] as usize;
        self.host_finish[src] = self.host_finish[src].max(self.now);
        self.free[src] += 1;
        let t = self.now + self.work.latency[mi];
        self.push(t, EventKind::Deliver, m);
        match &mut self.control {
            Control::LocalSync { out_left, steps, step_of, .. } => {
                out_left[src * *steps + step_of[mi] as usize] -= 1;
                self.advance_host(src);
            }
            Control::Dag { succ_off, succ, .. } => {
                // A later task of the same sender needs no sync: the sender knows its data left.
                let same: Vec<u32> = succ[succ_off[mi] as usize..succ_off[mi + 1] as usize]
                    .iter()
                    .filter(|s| s.1 == Dependency::Complete && self.work.src[s.0 as usize] as usize == src)
                    .map(|s| s.0)
                    .collect();
                for s in same {
                    self.push(self.now, EventKind::Satisfy, s);
                }
            }
            _ => {}
        }
        self.dispatch(src);
    }

    fn deliver(&mut self, m: u32) {
        let mi = m as usize;
        self.delivered[mi] = true;
        self.delivered_count += 1;
        if let Some(p) = self.progress {
            p.fetch_add(1, AtomicOrdering::Relaxed);
        }
        let dst = self.work.dst[mi] as usize;
        self.host_finish[dst] = self.host_finish[dst].max(self.now);
        match &mut self.control {
            Control::Sync { .. } => {
                let p = self.phase_of_sync(m);
                let Control::Sync { outstanding, .. } = &mut self.control else { unreachable!() };
                outstanding[p] -= 1;
                if outstanding[p] == 0 && p + 1 < outstanding.len() {
                    self.push(self.now + self.config.barrier_s, EventKind::Release, p as u32 + 1);
                }
            }
            Control::Async => {}
            Control::LocalSync { in_left, steps, step_of, .. } => {
                in_left[dst * *steps + step_of[mi] as usize] -= 1;
                self.advance_host(dst);
            }
            Control::Dag { succ_off, succ, relay_of, .. } => {
                let src = self.work.src[mi];
                let mut due: Vec<(f64, u32)> = Vec::new();
                let mut relays_done: Vec<u32> = Vec::new();
                for &(s, kind) in &succ[succ_off[mi] as usize..succ_off[mi + 1] as usize] {
                    let next_sender = self.work.src[s as usize];
                    match kind {
                        Dependency::Relay => {
                            if relay_of[s as usize] == m && self.drained_waiting[s as usize] {
                                relays_done.push(s);
                            }
                        }
                        Dependency::Complete if next_sender == src => {} // met when the tail left
                        Dependency::Complete if next_sender as usize == dst => due.push((self.now, s)),
                        Dependency::Complete => due.push((f64::NAN, s)),
                    }
                }
                for (t, s) in due {
                    let t = if t.is_nan() {
                        self.sync_messages += 1;
                        self.now + self.sync_delay(dst, self.work.src[s as usize] as usize)
                    } else {
                        t
                    };
                    self.push(t, EventKind::Satisfy, s);
                }
                for r in relays_done {
                    self.drained_waiting[r as usize] = false;
                    self.tail_left(r);
                }
            }
        }
    }

    /// Phase of message `m` under the `Sync` executor (binary search in the phase offsets).
    fn phase_of_sync(&self, m: u32) -> usize {
        let Control::Sync { phase_off, .. } = &self.control else { unreachable!() };
        phase_off.partition_point(|&o| o <= m) - 1
    }

    /// Time a 1-byte sync message takes from host `from` to host `to`: path latency plus its
    /// serialisation at the path's narrowest link (too small to share bandwidth with data).
    fn sync_delay(&self, from: usize, to: usize) -> f64 {
        if from == to {
            return 0.0;
        }
        let mut path = Vec::new();
        if self.routes.path(self.topo, from, to, &mut path).is_err() {
            // Paths were checked for every data message; a sync pair not among them is
            // charged the reverse path, which exists whenever the data could flow.
            path.clear();
            let _ = self.routes.path(self.topo, to, from, &mut path);
        }
        let latency: f64 = path.iter().map(|&c| self.topo.link(c / 2).spec.latency_ns).sum::<f64>() * 1e-9;
        let narrowest =
            path.iter().map(|&c| bytes_per_s(self.topo.link(c / 2).spec.bandwidth_gbps)).fold(f64::INFINITY, f64::min);
        let wire = self.config.wire_bytes(1) as f64;
        self.config.overhead_s + latency + if narrowest.is_finite() { wire / narrowest } else { 0.0 }
    }

    /// Local sync: release host `h`'s next steps while their conditions hold.
    fn advance_host(&mut self, h: usize) {
        loop {
            let Control::LocalSync { steps, off, by_host_step, in_left, out_left, next_step, .. } = &mut self.control
            else {
                unreachable!()
            };
            let s = next_step[h] as usize;
            if s >= *steps {
                return;
            }
            if s > 0 && (in_left[h * *steps + s - 1] > 0 || out_left[h * *steps + s - 1] > 0) {
                return;
            }
            next_step[h] += 1;
            let cell = h * *steps + s;
            let (lo, hi) = (off[cell] as usize, off[cell + 1] as usize);
            for i in lo..hi {
                let m = by_host_step[i];
                self.queue[h].push_back(m);
            }
            self.dispatch(h);
        }
    }

    /// Apply this instant's joins and leaves to the bandwidth shares and reschedule drains.
    fn reallocate(&mut self) {
        if self.joining.is_empty() && self.leaving.is_empty() {
            return;
        }
        let now = self.now;
        let (res_last, res_busy) = (&mut self.res_last, &mut self.res_busy);
        self.fair.update(
            &self.leaving,
            &self.joining,
            |r, used| {
                let r = r as usize;
                if used > 0.0 {
                    res_busy[r] += now - res_last[r];
                }
                res_last[r] = now;
            },
            &mut self.changed,
        );
        self.leaving.clear();
        self.joining.clear();
        for i in 0..self.changed.len() {
            let (f, _) = self.changed[i];
            let fi = f as usize;
            let new_rate = self.fair.rate(f);
            self.remaining[fi] = (self.remaining[fi] - self.rate[fi] * (now - self.last[fi])).max(0.0);
            self.last[fi] = now;
            self.aggregate_rate += new_rate - self.rate[fi];
            self.rate[fi] = new_rate;
            // Only an earlier drain needs a new event; a later one is found when the pending
            // event fires (rates mostly fall when flows join, so this saves most pushes).
            let t = now + self.remaining[fi] / new_rate;
            if t < self.scheduled[fi] {
                self.scheduled[fi] = t;
                self.push(t, EventKind::Drain, f);
            }
        }
        if self.config.series {
            self.series.push(SeriesPoint {
                time_s: now,
                active_flows: self.active,
                aggregate_rate_bps: self.aggregate_rate.max(0.0),
            });
        }
    }

    fn report(mut self) -> FlowReport {
        let makespan = self.host_finish.iter().copied().fold(0.0, f64::max);
        let nch = self.work.num_channels;
        // Close the busy-time books (every flow has left, so all resources are idle now).
        let mut channel_bytes = vec![0u64; nch];
        for m in 0..self.work.len() {
            let w = self.work.wire[m];
            for &r in self.fair.path_resources(m as u32) {
                if (r as usize) < nch {
                    channel_bytes[r as usize] += w;
                }
            }
        }
        let channel_busy_s: Vec<f64> = self.res_busy[..nch].to_vec();
        let channel_utilisation: Vec<f64> = (0..nch)
            .map(|c| if makespan > 0.0 { channel_bytes[c] as f64 / (self.work.capacity[c] * makespan) } else { 0.0 })
            .collect();
        let used: Vec<f64> = channel_utilisation.iter().copied().filter(|&u| u > 0.0).collect();
        let mut sent = vec![0u64; self.host_finish.len()];
        let mut sender = vec![false; self.host_finish.len()];
        for m in 0..self.work.len() {
            sent[self.work.src[m] as usize] += self.work.payload[m];
            sender[self.work.src[m] as usize] = true;
        }
        let senders = sender.iter().filter(|&&s| s).count();
        let throughput = if senders > 0 && makespan > 0.0 {
            sent.iter().sum::<u64>() as f64 / senders as f64 / makespan / (1u64 << 20) as f64
        } else {
            0.0
        };
        FlowReport {
            executor: self.config.executor,
            nct: self.config.nct,
            makespan_s: makespan,
            messages: self.work.len() as u64,
            network_messages: self
                .work
                .wire
                .iter()
                .zip(&self.work.src)
                .zip(&self.work.dst)
                .filter(|((_, s), d)| s != d)
                .count() as u64,
            payload_bytes: self.work.payload.iter().sum(),
            host_finish_s: std::mem::take(&mut self.host_finish),
            channel_busy_s,
            channel_bytes,
            max_channel_utilisation: used.iter().copied().fold(0.0, f64::max),
            mean_channel_utilisation: if used.is_empty() { 0.0 } else { used.iter().sum::<f64>() / used.len() as f64 },
            channel_utilisation,
            throughput_per_server_mib_s: throughput,
            sync_messages: self.sync_messages,
            reallocations: self.fair.updates,
            flows_recomputed: self.fair.flows_recomputed,
            rates_changed: self.fair.rates_changed,
            series: self.config.series.then(|| std::mem::take(&mut self.series)),
        }
    }
}

#[cfg(test)]
mod tests;
