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

use std::sync::atomic::AtomicU64;

use serde::Serialize;

use crate::error::{NetweaveError, Result};
use crate::routing::RoutingTable;
use crate::topology::Topology;
use crate::traffic::dag::TaskGraph;
use crate::traffic::{Message, Schedule};

pub mod loss;
mod maxmin;
mod model;
mod report;
mod workload;

pub use loss::TcpModel;
pub use report::{FlowReport, SeriesPoint};

use model::Sim;
use workload::{Control, Workload};

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
    /// At most this many of a host's sends stream at once, however many its executor has in
    /// flight (`nct`): the rest wait their turn in posting order. `None`: all `nct` stream.
    /// What a host's transport measured (a calibration's `host_streams`); steps are still `nct`
    /// phases.
    pub host_streams: Option<u32>,
    /// Cost of the barrier between phases of the `Sync` executor, seconds.
    pub barrier_s: f64,
    /// Software overhead per message, paid by the sender before the data moves, seconds.
    pub overhead_s: f64,
    /// Software cost per message paid by its receiver once the message has arrived, seconds,
    /// one message at a time per receiver: a rank that must be scheduled to match and copy
    /// each message it receives (an MPI library's ranks taking turns on the cores) serialises
    /// what arrives at once, as at a gather's root.
    pub receive_s: f64,
    /// The receiver's cost per byte of a message's payload, paid with `receive_s`, seconds: an
    /// MPI gather's tree forwards whole subtrees, and its root copies them all.
    pub receive_per_byte_s: f64,
    /// What one 1-byte sync message costs besides its path latency and serialisation (DAG
    /// executor), seconds; `None` charges it the per-message overhead like any message.
    pub sync_s: Option<f64>,
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
    /// TCP's parameters, used on a lossy fabric (the topology's link layer decides, see
    /// [`loss`]).
    pub tcp: TcpModel,
}

impl FlowConfig {
    /// Defaults: one send at a time, no barrier cost, no overhead, no packetisation.
    pub fn new(executor: Executor) -> Self {
        FlowConfig {
            executor,
            nct: 1,
            host_streams: None,
            barrier_s: 0.0,
            overhead_s: 0.0,
            receive_s: 0.0,
            receive_per_byte_s: 0.0,
            sync_s: None,
            mtu: None,
            header_bytes: 0,
            injection_gbps: None,
            ejection_gbps: None,
            bytes: None,
            series: false,
            tcp: TcpModel::default(),
        }
    }

    fn check(&self) -> Result<()> {
        if self.nct == 0 {
            return crate::invalid!("nct (concurrent sends per host) must be at least 1");
        }
        if self.host_streams == Some(0) {
            return crate::invalid!("host_streams (sends a host streams at once) must be at least 1");
        }
        let sync = self.sync_s.unwrap_or(0.0);
        for (name, v) in [
            ("barrier cost", self.barrier_s),
            ("overhead", self.overhead_s),
            ("receive cost", self.receive_s),
            ("receive cost per byte", self.receive_per_byte_s),
            ("sync cost", sync),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return crate::invalid!("{name} must be a non-negative number of seconds, got {v}");
            }
        }
        self.tcp.check()?;
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
        // Saturates: a message this large is refused by the workload's checked totals.
        match self.mtu {
            Some(mtu) => bytes.saturating_add(bytes.div_ceil(mtu).max(1).saturating_mul(self.header_bytes)),
            None => bytes.saturating_add(self.header_bytes),
        }
    }
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
    simulate_phased(topo, routes, schedule, config, progress, true)
}

/// [`simulate_with_progress`], choosing whether a lossy instant's void drain events are held
/// back from the event heap (`model::Sim::hold_void_drains`; only a test turns it off).
fn simulate_phased(
    topo: &Topology,
    routes: &RoutingTable,
    schedule: &Schedule,
    config: &FlowConfig,
    progress: Option<&AtomicU64>,
    hold_void_drains: bool,
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
    let mut sim = Sim::new(topo, routes, work, control, config, progress);
    sim.hold_void_drains = hold_void_drains;
    sim.run()
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

#[cfg(test)]
mod tests;
