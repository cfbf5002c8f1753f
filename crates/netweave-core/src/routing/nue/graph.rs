//! What Nue's parts share, a leaf the others import: the slots of the complete channel
//! dependency graph over the switch view, the dependency states, the inputs every layer
//! reads and the statistics a run collects.

use crate::error::{NetweaveError, Result};
use crate::topology::fabric::SwitchFabric;

/// "No channel / no switch" in the flat arrays.
pub(super) const NONE: u32 = u32::MAX;
/// Dependency states in a layer's complete channel dependency graph.
pub(super) const UNUSED: u8 = 0;
pub(super) const USED: u8 = 1;
pub(super) const BLOCKED: u8 = 2;

/// What a Nue run did, for reports and tests.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NueStats {
    /// Virtual layers (VCs) used.
    pub layers: u8,
    /// Destination hosts routed.
    pub destinations: usize,
    /// Destination switches whose search left switches unreached even after backtracking
    /// (an impasse), repaired with escape paths.
    pub impasses: usize,
    /// Switch routes (summed over destinations) moved onto the escape tree by those repairs.
    pub escape_routes: usize,
    /// Unreached switches attached by local backtracking (moving a neighbour's next hop).
    pub backtracks: usize,
    /// Candidate dependencies refused because they would have closed a cycle.
    pub blocked_dependencies: usize,
    /// Dependencies in all layers' graphs at the end (escape dependencies included).
    pub dependencies: usize,
}

/// What every layer reads: plain shared data, built once by [`nue_with`](super::nue_with) and
/// never changed (so its fields are read directly rather than through methods).
pub(super) struct LayerInput<'a> {
    /// The switch fabric (through `Deref`) and its dependency slots.
    pub(super) slots: &'a DependencySlots,
    /// Host indices on each switch.
    pub(super) by_switch: &'a [Vec<usize>],
    /// Whether each switch is in the component the hosts are in.
    pub(super) in_comp: &'a [bool],
    /// Switches in that component.
    pub(super) comp_size: usize,
}

/// The shared [`SwitchFabric`] (reached through `Deref`) and the slots of the complete channel
/// dependency graph: dependency `c → d` (d leaving the switch c enters) is slot
/// `edge_base[c] + pos[d]`.
pub(super) struct DependencySlots {
    view: SwitchFabric,
    /// Position of a channel among its sender's out-channels.
    pos: Vec<u32>,
    edge_base: Vec<usize>,
}

impl std::ops::Deref for DependencySlots {
    type Target = SwitchFabric;
    fn deref(&self) -> &SwitchFabric {
        &self.view
    }
}

impl DependencySlots {
    pub(super) fn new(view: SwitchFabric) -> Result<Self> {
        let nc = view.num_channels();
        let pos: Vec<u32> = (0..nc).map(|c| c as u32 - view.out_start[view.tail[c] as usize]).collect();
        let mut edge_base = Vec::with_capacity(nc + 1);
        let mut acc = 0usize;
        for &h in &view.head {
            edge_base.push(acc);
            acc += view.out_degree(h as usize);
        }
        edge_base.push(acc);
        if acc > u32::MAX as usize {
            return Err(NetweaveError::Routing(format!(
                "nue: the complete channel dependency graph would have {acc} dependencies per layer, \
                 more than it can hold (at most {})",
                u32::MAX
            )));
        }
        Ok(DependencySlots { view, pos, edge_base })
    }

    pub(super) fn nc(&self) -> usize {
        self.view.num_channels()
    }

    pub(super) fn out(&self, v: u32) -> std::ops::Range<u32> {
        self.out_start[v as usize]..self.out_start[v as usize + 1]
    }

    /// Dependency slots in all: the size of a layer's state array.
    pub(super) fn num_slots(&self) -> usize {
        *self.edge_base.last().unwrap_or(&0)
    }

    /// Position of channel `c` among its sender's out-channels (its bit in a mask row).
    #[inline]
    pub(super) fn position(&self, c: u32) -> usize {
        self.pos[c as usize] as usize
    }

    /// Slot of dependency `c → d` (requires `tail[c] == head[d]`).
    #[inline]
    pub(super) fn edge(&self, c: u32, d: u32) -> usize {
        self.edge_base[c as usize] + self.pos[d as usize] as usize
    }
}
