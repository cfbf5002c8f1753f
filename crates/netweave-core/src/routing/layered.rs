//! (being written)

use crate::error::Result;
use crate::topology::Topology;
use super::{RouteOptions, RoutingTable};

pub fn sssp(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> { let _ = (topo, options); crate::invalid!("sssp is being written") }
pub fn dfsssp(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> { let _ = (topo, options); crate::invalid!("dfsssp is being written") }
pub fn lash(topo: &Topology, options: &RouteOptions) -> Result<RoutingTable> { let _ = (topo, options); crate::invalid!("lash is being written") }
