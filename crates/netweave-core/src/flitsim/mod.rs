//! Flit-level simulation: cycle-accurate input-queued virtual-channel routers.
//!
//! The model is BookSim's IQ router — per-VC flit buffers, credit-based flow control,
//! wormhole or virtual cut-through switching, route / VC-allocation / switch-allocation /
//! crossbar pipeline stages with configurable delays, separable allocators with round-robin
//! arbiters and iSLIP pointer updates (or oldest-first, "age" arbitration), optional holding
//! of the switch for a whole packet — driven by any [`RoutingTable`] the routing layer
//! produces, VC policy included (datelines, layers, channel pools), with one or more
//! injection and ejection ports per host. See [`engine`] for the data layout.
//!
//! The simulator takes a built network (topology and routes); [`scenario::build_network`](crate::scenario::build_network)
//! builds the one a BookSim-style config names.
//!
//! Workloads: open-loop Bernoulli traffic with BookSim's pattern names ([`run_open_loop`],
//! [`sweep`]) and closed batch runs of any [`Schedule`] ([`run_batch`]). A watchdog turns a
//! deadlock into an error naming the blocked channels.
//!
//! ```
//! use netweave_core::flitsim::{simulate, SimConfig, SimResult};
//! use netweave_core::scenario::build_network;
//! let mut cfg = SimConfig::default();
//! for (k, v) in [("k", "4"), ("injection_rate", "0.05"), ("sample_period", "300"), ("packet_size", "4")] {
//!     cfg.set(k, v).unwrap();
//! }
//! let (topo, routes) = build_network(&cfg).unwrap();
//! let SimResult::OpenLoop(r) = simulate(&topo, &routes, &cfg, None, &|_| {}).unwrap() else { panic!() };
//! assert!(!r.saturated && r.packet_latency.avg > 10.0);
//! ```

use rayon::prelude::*;
use serde::Serialize;

use crate::error::{NetweaveError, Result};
use crate::routing::RoutingTable;
use crate::topology::structure::LatticeShape;
use crate::topology::Topology;
use crate::traffic::dag::TaskGraph;
use crate::traffic::{Message, Schedule};

pub mod batch;
pub mod config;
pub mod engine;
mod flit;
mod network;
pub mod open_loop;
pub mod partition;
mod router;

use crate::traffic::synthetic::{self, SyntheticPattern};
pub use batch::{run_batch, BatchResult};
pub use config::{Arbitration, BatchSync, SimConfig, SimType, SwAllocator, Switching};
pub use open_loop::{run_open_loop, LatencyStats, OpenLoopResult};
pub use partition::{Exchange, PartitionReport};

/// Result of [`simulate`]: open-loop statistics or a batch completion.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum SimResult {
    OpenLoop(OpenLoopResult),
    Batch(BatchResult),
}

/// The simulator for `cfg` on `routes`, every run mode's one way in. When the config asks for
/// BookSim's own torus `dim_order` (random tie-breaking, VC class fixed on entering a
/// dimension) it routes that way rather than by the routing layer's table (`dor`).
pub(crate) fn new_sim<'a>(topo: &'a Topology, routes: &'a RoutingTable, cfg: &SimConfig) -> Result<engine::Sim<'a>> {
    let mut sim = engine::Sim::new(topo, routes, cfg)?;
    let named = matches!(cfg.routing_function.as_str(), "dim_order" | "dim_order_torus");
    // With one VC per destination the table's DOR is used, as BookSim's dim_order_ni.
    if named && !cfg.vc_per_destination {
        if let Ok(lat) = topo.lattice_with_hosts() {
            if lat.shape == LatticeShape::Torus {
                sim.use_booksim_torus(lat)?;
            }
        }
    }
    Ok(sim)
}

/// The mesh or torus the digit patterns (`tornado`, `neighbor`, …) act on, when the topology
/// is one ([`Topology::lattice`]'s check).
fn digit_lattice(topo: &Topology) -> Option<&synthetic::Lattice> {
    topo.lattice_with_hosts().ok().filter(|l| l.shape != LatticeShape::Hypercube)
}

/// The open-loop destination pattern the config names.
pub fn pattern_of(topo: &Topology, cfg: &SimConfig) -> Result<SyntheticPattern> {
    SyntheticPattern::new(
        &cfg.traffic,
        topo.num_hosts() as u32,
        digit_lattice(topo),
        cfg.perm_seed,
        &cfg.hotspot_hosts,
        cfg.hotspot_fraction,
    )
}

/// The batch schedule the config names: `alltoall-shift`, or a deterministic traffic pattern
/// as one phase; every message `message_flits` flits (one "byte" per flit).
pub fn schedule_of(topo: &Topology, cfg: &SimConfig) -> Result<Schedule> {
    let n = topo.num_hosts() as u32;
    let bytes = cfg.message_flits as u64;
    match cfg.schedule.as_str() {
        "alltoall-shift" | "alltoall" | "shift" => Schedule::shift_alltoall(n, bytes),
        name => {
            let p = SyntheticPattern::new(name, n, digit_lattice(topo), cfg.perm_seed, &cfg.hotspot_hosts, 1.0)
                .map_err(|_| {
                    NetweaveError::InvalidParameter(format!(
                        "schedule must be alltoall-shift or a permutation pattern ({}), got '{name}'",
                        synthetic::NAMES.join(", ")
                    ))
                })?;
            let Some(_) = p.fixed(0) else {
                return crate::invalid!("schedule '{name}' is random; a batch needs a permutation pattern");
            };
            let phase = (0..n).map(|s| Message { src: s, dst: p.fixed(s).unwrap(), bytes }).collect();
            Schedule::from_phases(format!("{name}(N={n})"), n, vec![phase])
        }
    }
}

/// What a run simulates: the config's own workload (open loop, or its batch schedule), a
/// given schedule, or a task graph (batch runs; bytes count flits).
#[derive(Clone, Copy)]
pub enum Job<'w> {
    Config,
    Schedule(&'w Schedule),
    Dag(&'w TaskGraph),
}

/// Run what `cfg.sim_type` asks for. Batch runs use `schedule`, or the config's built-in one;
/// a schedule's `bytes` count flits.
pub fn simulate(
    topo: &Topology,
    routes: &RoutingTable,
    cfg: &SimConfig,
    schedule: Option<&Schedule>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SimResult> {
    cfg.validate()?;
    let job = schedule.map_or(Job::Config, Job::Schedule);
    run_job(&mut new_sim(topo, routes, cfg)?, job, progress)
}

/// [`simulate`] split over the ranks `link` connects ([`partition`]): every rank calls it with
/// the same arguments, steps its share of the routers, and returns the whole run's result —
/// bit for bit [`simulate`]'s, whatever the number of ranks — with its partition report.
///
/// ```
/// use netweave_core::flitsim::{partition::local_group, simulate, simulate_partitioned, Job, SimConfig};
/// use netweave_core::scenario::build_network;
/// let mut cfg = SimConfig::default();
/// for (k, v) in [("k", "4"), ("injection_rate", "0.05"), ("sample_period", "200"), ("threads", "1")] {
///     cfg.set(k, v).unwrap();
/// }
/// let (topo, routes) = build_network(&cfg).unwrap();
/// let whole = simulate(&topo, &routes, &cfg, None, &|_| {}).unwrap();
/// let runs: Vec<_> = std::thread::scope(|s| {
///     let ranks: Vec<_> = local_group(2).into_iter().map(|link| {
///         let (topo, routes, cfg) = (&topo, &routes, &cfg);
///         s.spawn(move || simulate_partitioned(topo, routes, cfg, Job::Config, Box::new(link), &|_| {}).unwrap())
///     }).collect();
///     ranks.into_iter().map(|r| r.join().unwrap()).collect()
/// });
/// assert!(runs.iter().all(|(result, _)| *result == whole));
/// assert_eq!(runs[0].1.ranks, 2);
/// ```
pub fn simulate_partitioned(
    topo: &Topology,
    routes: &RoutingTable,
    cfg: &SimConfig,
    job: Job,
    link: Box<dyn Exchange>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(SimResult, PartitionReport)> {
    cfg.validate()?;
    let mut sim = new_sim(topo, routes, cfg)?;
    sim.distribute(link)?;
    let result = run_job(&mut sim, job, progress)?;
    Ok((result, sim.partition_report().expect("a distributed run has a report")))
}

/// The run `job` on a built simulator.
fn run_job(sim: &mut engine::Sim, job: Job, progress: &(dyn Fn(u64) + Sync)) -> Result<SimResult> {
    let flits_of = |b: u64| b.min(u32::MAX as u64) as u32;
    let cfg = sim.cfg.clone();
    match (job, cfg.sim_type) {
        (Job::Dag(graph), SimType::Batch) => Ok(SimResult::Batch(batch::dag_on(sim, graph, &flits_of, progress)?)),
        (Job::Dag(_), _) => crate::invalid!("a task graph runs in batch mode: set sim_type = \"batch\""),
        (Job::Schedule(s), SimType::Batch) => Ok(SimResult::Batch(batch::batch_on(sim, s, &flits_of, progress)?)),
        (Job::Config, SimType::Batch) => {
            let s = schedule_of(sim.topo, &cfg)?;
            Ok(SimResult::Batch(batch::batch_on(sim, &s, &flits_of, progress)?))
        }
        _ => {
            let p = pattern_of(sim.topo, &cfg)?;
            Ok(SimResult::OpenLoop(open_loop::open_loop_on(sim, &p, progress)?))
        }
    }
}

/// A load sweep: one open-loop run per injection rate, in parallel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepResult {
    pub points: Vec<OpenLoopResult>,
    /// The lowest swept load that saturated, if any.
    pub saturation_rate: Option<f64>,
    /// Highest accepted throughput seen, flits per host per cycle.
    pub max_accepted_flits: f64,
}

/// Run `cfg` at every load of `rates` (rayon, one run per load, same seed);
/// `done(i)` is called as load `i` finishes.
pub fn sweep(
    topo: &Topology,
    routes: &RoutingTable,
    cfg: &SimConfig,
    rates: &[f64],
    done: &(dyn Fn(usize) + Sync),
) -> Result<SweepResult> {
    if rates.is_empty() {
        return crate::invalid!("a sweep needs at least one injection rate");
    }
    let p = pattern_of(topo, cfg)?;
    let points: Result<Vec<OpenLoopResult>> = rates
        .par_iter()
        .enumerate()
        .map(|(i, &rate)| {
            let mut c = cfg.clone();
            c.injection_rate = rate;
            // The points already run side by side; unless told otherwise, one thread each.
            if c.threads == 0 {
                c.threads = 1;
            }
            c.validate()?;
            let r = run_open_loop(topo, routes, &c, &p, &|_| {});
            done(i);
            r
        })
        .collect();
    let points = points?;
    let saturation_rate = points
        .iter()
        .filter(|r| r.saturated)
        .map(|r| r.injection_rate)
        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.min(x))));
    let max_accepted_flits = points.iter().map(|r| r.accepted_flits).fold(0.0, f64::max);
    Ok(SweepResult { points, saturation_rate, max_accepted_flits })
}

#[cfg(test)]
mod tests;
