//! (being written)

use crate::error::Result;
use crate::topology::Topology;
use super::{RouteOptions, RoutingTable};

pub fn nue(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> { let _ = (topo, options); crate::invalid!("nue is being written") }
