//! netweave-core: the engine behind netweave, an interconnect lab for HPC cluster networks.
//!
//! The modules follow the pipeline, each depending only on those before it:
//!
//! ```text
//! topology ──► routing ──► traffic ──┬──► mapping   (rank placement, scored under the routes)
//!                                    ├──► analysis ──► flowsim
//!                                    └──► flitsim ──► scenario (a config's network, built for it)
//! ```
//!
//! - [`topology`]: one [`Topology`](topology::Topology) type, its generators, metrics and files.
//! - [`routing`]: destination-based forwarding tables (the InfiniBand LFT model).
//! - [`traffic`]: schedules of messages between ranks, and their placement on hosts.
//! - [`mapping`]: rank placement (paper 003's RMATT): costs, BISEM, annealing, baselines.
//! - [`scenario`]: the network a simulation config names, built before the evaluators run.
//! - [`analysis`]: exact per-phase link loads and the figures derived from them.
//! - [`flowsim`]: flow-level simulation with max-min fair sharing: how long a schedule takes.
//! - [`flitsim`]: cycle-accurate flit-level simulation (input-queued VC routers, credits).
//!
//! Beside the pipeline, every stage uses [`error`] (one error type, four kinds), [`budget`]
//! (the memory budget checked before large allocations), [`checked`] (overflow-checked sizes
//! and finite times) and [`input`] (size-limited, UTF-8-checked file reading).
//! The runs split over processes (the flit simulator's, the mapper's tempering) talk through
//! [`exchange`]'s one collective.

pub mod analysis;
pub mod budget;
pub mod checked;
pub mod error;
pub mod exchange;
pub mod flitsim;
pub mod flowsim;
pub mod input;
pub mod mapping;
pub mod routing;
pub mod scenario;
pub mod topology;
pub mod traffic;

pub use error::{ErrorKind, NetweaveError, Result};
