//! (being written)

use crate::error::Result;
use crate::topology::Topology;
use super::{RouteOptions, RoutingTable};

pub fn structured_channel_pools(topo: &Topology, options: &RouteOptions, reduced: bool) -> Result<RoutingTable> { let _ = (topo, options, reduced); crate::invalid!("structured_channel_pools is being written") }
