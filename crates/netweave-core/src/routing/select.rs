//! Path selection: which of several legal next hops a switch takes towards a destination.
//!
//! Adaptive rules (shortest paths, up*/down*, DL, SBP) allow several next hops; a
//! destination-based table keeps one. Paper 002 §2.9 names the policies:
//! spread by destination host, low port first, and load-balanced (greedy minimisation of the
//! per-port load, which is also OpenSM min-hop's port equalisation).

use std::fmt;
use std::str::FromStr;

use crate::error::{NetweaveError, Result};
use crate::topology::{Port, Topology};

/// A path-selection policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Select {
    /// The k-th host of a switch takes candidate `k mod #candidates` (in port order), so the
    /// hosts of one switch are reached over different paths (paper 002's default).
    PerDestination,
    /// Always the lowest-numbered candidate port (paper 002 §2.9; e-cube-like on meshes).
    LowPort,
    /// The candidate port that carries the fewest destinations so far (lowest port on ties).
    Balanced,
}

impl Select {
    pub const ALL: [Select; 3] = [Select::PerDestination, Select::LowPort, Select::Balanced];

    pub fn name(self) -> &'static str {
        match self {
            Select::PerDestination => "per-destination",
            Select::LowPort => "low-port",
            Select::Balanced => "balanced",
        }
    }
}

impl fmt::Display for Select {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Select {
    type Err = NetweaveError;
    fn from_str(s: &str) -> Result<Self> {
        Select::ALL.into_iter().find(|p| p.name() == s.trim()).ok_or_else(|| {
            NetweaveError::InvalidParameter(format!(
                "unknown path selection '{s}' (known: per-destination, low-port, balanced)"
            ))
        })
    }
}

/// Applies a [`Select`] policy and keeps the per-(switch, port) destination counts it needs.
pub struct Selector {
    policy: Select,
    stride: usize,
    port_load: Vec<u32>,
}

impl Selector {
    pub fn new(topo: &Topology, policy: Select) -> Self {
        let stride = topo.switches().iter().map(|&s| topo.radix(s) as usize + 1).max().unwrap_or(1);
        Selector { policy, stride, port_load: vec![0; topo.num_switches() * stride] }
    }

    /// Pick one of `candidates` (ascending ports, non-empty) at switch `switch_index` for a
    /// destination that is host number `local_index` on its switch, and count it.
    pub fn choose(&mut self, switch_index: usize, local_index: usize, candidates: &[Port]) -> Port {
        let row = switch_index * self.stride;
        let port = match self.policy {
            Select::LowPort => candidates[0],
            Select::PerDestination => candidates[local_index % candidates.len()],
            Select::Balanced => {
                *candidates.iter().min_by_key(|&&p| (self.port_load[row + p as usize], p)).unwrap_or(&candidates[0])
            }
        };
        self.record(switch_index, port);
        port
    }

    /// The choice of an order-independent policy ([`Select::PerDestination`] or
    /// [`Select::LowPort`]; `Balanced` falls back to the lowest port): the same as
    /// [`choose`](Self::choose) would make, without counting, so that independent
    /// destinations can be filled in parallel.
    pub fn pick(policy: Select, local_index: usize, candidates: &[Port]) -> Port {
        match policy {
            Select::PerDestination => candidates[local_index % candidates.len()],
            Select::LowPort | Select::Balanced => candidates[0],
        }
    }

    /// Count one more destination routed through `port` (for ports chosen without [`choose`](Self::choose)).
    pub fn record(&mut self, switch_index: usize, port: Port) {
        self.port_load[switch_index * self.stride + port as usize] += 1;
    }
}
