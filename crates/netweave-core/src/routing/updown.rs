//! (being written)

use crate::error::Result;
use crate::topology::Topology;
use super::{RouteOptions, RoutingTable};

pub fn up_down(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> { let _ = (topo, options); crate::invalid!("up_down is being written") }
pub fn prefix(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> { let _ = (topo, options); crate::invalid!("prefix is being written") }
pub fn descending_layers(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> { let _ = (topo, options); crate::invalid!("descending_layers is being written") }
