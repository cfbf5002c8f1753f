//! Mapping: where each rank of a job runs — paper 003's RMATT at interactive speed.
//!
//! The pieces, in the order a run uses them:
//!
//! - [`Pattern`]: the job's traffic as a sparse matrix (files and generator specs in
//!   [`pattern_files`], or any [`Schedule`](crate::traffic::Schedule) aggregated).
//! - [`MapNetwork`]: a routed topology flattened for the mapper (next-channel table, hop
//!   table, host slots; several ranks per host allowed).
//! - [`cost`]: `sum_hops`, `hop_bytes`, `max_channel_bytes` under the actual routes, paper 003's
//!   `hops_x_max_channel`
//!   and weighted sums, with an exact incremental [`Evaluator`] for swaps and k-rank rotations.
//! - [`baselines`]: identity, random, bit-reversal, Hilbert / Peano curves, greedy.
//! - [`discovered`]: the lattice (or tree) behind a traffic graph, found from the graph alone,
//!   with every rank's coordinates in it ([`DiscoveredLattice`](discovered::DiscoveredLattice);
//!   not to be confused with a topology's [`Structure`](crate::topology::structure::Structure)).
//! - [`bisem`](bisem::bisem): recursive bisection of network and rank graph, geometric along a
//!   stencil's grid or a discovered lattice, with METIS otherwise.
//! - [`descent`]: swap descent on hop-bytes, each rank moved next to its partners.
//! - [`anneal`]: OPTIM, simulated annealing with parallel tempering across threads.
//! - [`map_files`]: the placement as launchers read it (rankfile, vcoord, MPICH rank order, JSON).
//!
//! ```
//! use std::sync::Arc;
//! use netweave_core::mapping::{anneal::{AnnealConfig, Tempering}, baselines, MapNetwork, Pattern};
//! use netweave_core::routing::{route, Engine, RouteOptions};
//! let topo = netweave_core::topology::grid::torus(&[4, 4], 1).unwrap();
//! let routes = route(&topo, Engine::Dor, &RouteOptions::default()).unwrap();
//! let net = Arc::new(MapNetwork::new(&topo, &routes, 1).unwrap());
//! let pattern = Arc::new(Pattern::bruck(16, 2048).unwrap());
//! let start = baselines::identity(&net, 16).unwrap();
//! let mut sa = Tempering::new(net, pattern, &start, AnnealConfig { sweep: 200, ..Default::default() }).unwrap();
//! for _ in 0..5 { sa.round(); }
//! assert!(sa.status().best_value <= sa.status().start_value);
//! ```

pub mod anneal;
pub mod baselines;
pub mod bisem;
pub mod cost;
pub mod descent;
pub mod discovered;
pub mod map_files;
pub mod network;
pub mod objective;
pub mod pattern;
pub mod pattern_files;

pub use cost::{Evaluator, Move};
pub use network::MapNetwork;
pub use objective::{CostParts, Objective};
pub use pattern::Pattern;

/// Shared fixtures for the unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::OnceLock;

    use super::{MapNetwork, Pattern};
    use crate::routing::{route, select::Select, Engine, RouteOptions};
    use crate::topology::grid::torus;

    /// Paper 003's case, built once per test binary: the 4,096-rank Bruck allgather (2 KiB
    /// base) on a 16×16×16 torus with dimension-order routes, ties to `+`.
    pub(crate) fn paper_case() -> &'static (MapNetwork, Pattern) {
        static CASE: OnceLock<(MapNetwork, Pattern)> = OnceLock::new();
        CASE.get_or_init(|| {
            let t = torus(&[16, 16, 16], 1).unwrap();
            let opts = RouteOptions { select: Select::LowPort, ..RouteOptions::default() };
            let r = route(&t, Engine::Dor, &opts).unwrap();
            (MapNetwork::new(&t, &r, 1).unwrap(), Pattern::bruck(4096, 2048).unwrap())
        })
    }
}
