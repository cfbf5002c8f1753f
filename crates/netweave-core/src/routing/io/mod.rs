//! Routing table files: save a [`RoutingTable`](super::RoutingTable), and exchange forwarding
//! tables with OpenSM.
//!
//! | module   | format | carries |
//! |----------|--------|---------|
//! | [`json`] | netweave routes JSON, version 1 (`docs/routes-json.md`) | everything: every switch's ports, the whole VC policy, the engine's name, and a fingerprint of the topology the routes belong to |
//! | [`lft`]  | OpenSM's `opensm-lfts.dump` (also `dump_lfts.sh` / `ibroute` output) | the forwarding tables only, by LID; read by OpenSM's `file` routing engine (`opensm -R file -U FILE`) |
//! | [`opensm_qos`] | OpenSM's QoS policy file and `opensm.conf` options | the lanes: each path's service level and the SL→VL map, or why OpenSM cannot take them and which of its engines to use instead |
//!
//! Routes only make sense on the topology they were computed for, so every reader takes that
//! topology and refuses text that does not fit it with a one-line error. Like the topology
//! readers, the readers here return errors for any malformed text and never panic; writers are
//! deterministic (same routes, same bytes).
//!
//! ```
//! use netweave_core::topology::grid::torus;
//! use netweave_core::routing::{io, route, Engine, RouteOptions};
//! let topo = torus(&[3, 3], 1).unwrap();
//! let routes = route(&topo, Engine::MinHop, &RouteOptions::default()).unwrap();
//! let text = io::json::write(&topo, &routes).unwrap();
//! let back = io::json::read(&topo, &text).unwrap();
//! assert_eq!(back.ports(), routes.ports());
//! ```

pub mod json;
pub mod lft;
pub mod opensm_qos;
