//! Scenarios: the network a simulation config names, built before any evaluator runs.
//!
//! A BookSim-style config ([`SimConfig`]) names its network with `topology` (`torus`, `mesh`:
//! a `k`-ary `n`-cube with `c` hosts per router; `file`: a topology JSON) and
//! `routing_function` (`dim_order` = `dor`, any routing engine, or `file`: a routes JSON).
//! Building it belongs to the topology and routing stages, so it lives here, on the caller's
//! side of the simulators, which only ever take a built network.
//!
//! ```
//! use netweave_core::{flitsim::SimConfig, scenario::build_network};
//! let mut cfg = SimConfig::default();
//! cfg.set("k", "4").unwrap();
//! let (topo, routes) = build_network(&cfg).unwrap();
//! assert_eq!((topo.num_hosts(), routes.vc_policy().num_vcs), (16, 2));
//! ```

use std::str::FromStr;

use crate::error::Result;
use crate::flitsim::SimConfig;
use crate::routing::{route, Engine, RouteOptions, RoutingTable};
use crate::topology::{grid, Topology};

/// Build the topology and routing a config describes: a `k`-ary `n`-cube (`topology = torus`
/// or `mesh`, `c` hosts per router) or a topology file, routed by `routing_function`
/// (`dim_order` is netweave's `dor`) or read from `routes_file`.
pub fn build_network(cfg: &SimConfig) -> Result<(Topology, RoutingTable)> {
    // A file key without the mode that reads it would be ignored, and the default torus (or
    // engine) simulated in its place without a word.
    if cfg.topology_file.is_some() && !matches!(cfg.topology.as_str(), "file" | "anynet") {
        return crate::invalid!(
            "topology_file is set but topology = \"{}\": add topology = \"file\" to simulate that file",
            cfg.topology
        );
    }
    if cfg.routes_file.is_some() && cfg.routing_function != "file" {
        return crate::invalid!(
            "routes_file is set but routing_function = \"{}\": add routing_function = \"file\" to use those routes",
            cfg.routing_function
        );
    }
    let topo = match cfg.topology.as_str() {
        "torus" | "mesh" => {
            let dims = vec![cfg.k; cfg.n as usize];
            if (cfg.k as u64).pow(cfg.n.min(64)) > 1 << 22 {
                return crate::invalid!("a {}-ary {}-cube is too large to simulate", cfg.k, cfg.n);
            }
            if cfg.topology == "torus" {
                grid::torus(&dims, cfg.c)?
            } else {
                grid::mesh(&dims, cfg.c)?
            }
        }
        "file" | "anynet" => {
            let Some(path) = &cfg.topology_file else {
                return crate::invalid!("topology = file needs topology_file");
            };
            let text = crate::input::read_text(std::path::Path::new(path))?;
            crate::topology::io::json::read(&text)?
        }
        other => return crate::invalid!("topology must be torus, mesh or file, got '{other}'"),
    };
    let routes = match cfg.routing_function.as_str() {
        "file" => {
            let Some(path) = &cfg.routes_file else {
                return crate::invalid!("routing_function = file needs routes_file");
            };
            let text = crate::input::read_text(std::path::Path::new(path))?;
            crate::routing::io::json::read(&topo, &text)?
        }
        name => {
            let engine = match name {
                "dim_order" | "dim_order_torus" | "dim_order_mesh" | "dor" => Engine::Dor,
                other => Engine::from_str(other)?,
            };
            let max_vcs = cfg.num_vcs.min(crate::routing::MAX_VCS as u16) as u8;
            let options = RouteOptions { max_vcs, seed: cfg.seed, ..RouteOptions::default() };
            route(&topo, engine, &options)?
        }
    };
    Ok((topo, routes))
}
