//! (being written)

use crate::error::Result;
use crate::topology::Topology;
use super::{RouteOptions, RoutingTable};

pub fn d_mod_k(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> { let _ = (topo, options); crate::invalid!("d_mod_k is being written") }
pub fn lsft(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> { let _ = (topo, options); crate::invalid!("lsft is being written") }
