//! (being written)

use crate::error::Result;
use crate::topology::Topology;
use super::{RouteOptions, RoutingTable};

pub fn dimension_order(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> { let _ = (topo, options); crate::invalid!("dimension_order is being written") }
