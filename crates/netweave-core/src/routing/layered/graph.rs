//! What the layered engines' parts share, a leaf the others import: their parameters and
//! statistics, the switch view with its channel-dependency numbering, and the sentinels of
//! their flat arrays.

use crate::error::{NetweaveError, Result};
use crate::routing::minhop::hosts_by_switch;
use crate::topology::fabric::SwitchFabric;
use crate::topology::Topology;

/// Tree entry "no next hop": the tree's root switch, or a switch that cannot reach it.
pub(super) const NO_HOP: u16 = u16::MAX;
/// Dijkstra distance of a switch not reached (yet).
pub(super) const UNREACHED: u64 = u64::MAX;
/// Most dependency slots a layer may have (bits per layer; `Σ degree²` over switches).
pub(super) const MAX_SLOTS: usize = 1 << 31;

/// How paths are assigned to layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fit {
    /// The lowest layer that stays acyclic with the path.
    First,
    /// The layer already holding most of the path's dependencies (fewest new ones), lowest
    /// first on a tie: paths that share turns gather in one layer, which leaves the other
    /// layers' orders freer.
    #[default]
    Best,
}

/// Knobs of the layered engines beyond [`RouteOptions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayeredParams {
    pub fit: Fit,
    /// Most layers tried per path (in fit order) before the path counts as fitting nowhere;
    /// 0 tries them all.
    pub tries: u8,
    /// Most rounds (one channel each way) a Pearce–Kelly search may take before giving up,
    /// which counts as a refusal (safe: refusing a dependency never makes a layer cyclic).
    pub search_limit: u32,
    /// Back-off once the layers are saturated: after this many destination trees took escape
    /// routes, a tree is tried only when the previous one fitted or the escapes so far number
    /// a power of two; the others take escape routes outright. 0 tries every tree.
    pub patience: u32,
    /// Most Pearce–Kelly search rounds a destination tree may spend per source switch; a tree
    /// that spends more takes escape routes. This keeps a tree's cost linear in the fabric's
    /// size once its layers are dense. 0 leaves it unbounded.
    pub tree_effort: u32,
}

impl Default for LayeredParams {
    fn default() -> Self {
        LayeredParams { fit: Fit::Best, tries: 0, search_limit: 1 << 13, patience: 32, tree_effort: 256 }
    }
}

/// What a layered run did, for reports and tests.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LayeredStats {
    /// VC layers used.
    pub layers: u8,
    /// Destination trees (hosts for DFSSSP, switches for LASH) whose paths fitted in no
    /// layer and took up*/down* routes in the escape layer instead.
    pub escaped_trees: usize,
}

/// The shared [`SwitchFabric`] plus the numbering of its channel dependencies the layered
/// engines count in (the view's fields and methods are reached through `Deref`).
pub(super) struct DependencySlots {
    view: SwitchFabric,
    /// Dependency slots of channel `c = a→b`: `slot_base[c] + j` stands for `c` followed by
    /// `b`'s `j`-th out-channel.
    slot_base: Vec<usize>,
    /// The same dependencies indexed from their second channel: `rslot_base[c] + i` stands
    /// for `b`'s `i`-th in-channel (the reverse of its `i`-th out-channel) followed by `c = b→x`.
    rslot_base: Vec<usize>,
    num_slots: usize,
}

impl std::ops::Deref for DependencySlots {
    type Target = SwitchFabric;
    fn deref(&self) -> &SwitchFabric {
        &self.view
    }
}

impl DependencySlots {
    pub(super) fn new(topo: &Topology, engine: &str) -> Result<Self> {
        // Every host must hang on a switch (the error names the first that does not).
        hosts_by_switch(topo)?;
        let view = SwitchFabric::new(topo);
        let mut slot_base = Vec::with_capacity(view.num_channels() + 1);
        let mut acc = 0usize;
        for &h in &view.head {
            slot_base.push(acc);
            acc += view.out_degree(h as usize);
        }
        slot_base.push(acc);
        let mut rslot_base = Vec::with_capacity(view.num_channels() + 1);
        let mut racc = 0usize;
        for &t in &view.tail {
            rslot_base.push(racc);
            racc += view.out_degree(t as usize);
        }
        rslot_base.push(racc);
        if acc > MAX_SLOTS {
            return Err(NetweaveError::Routing(format!(
                "{engine}: the fabric has {acc} possible channel dependencies, more than the {MAX_SLOTS} it can track"
            )));
        }
        let slots = DependencySlots { view, slot_base, rslot_base, num_slots: acc };
        slots.check_connected(topo, engine)?;
        Ok(slots)
    }

    /// Dependency slots in all (the size of a layer's bitsets).
    #[inline]
    pub(super) fn num_slots(&self) -> usize {
        self.num_slots
    }

    /// Slot of dependency `c1 → (j-th out-channel of the switch c1 enters)`; the slots of
    /// `c1`'s dependencies are consecutive, `slot(c1, 0)` first.
    #[inline]
    pub(super) fn slot(&self, c1: usize, j: usize) -> usize {
        self.slot_base[c1] + j
    }

    /// First reverse slot of channel `c = b→x`: `+ i` stands for `b`'s `i`-th in-channel
    /// followed by `c` (consecutive, as [`slot`](Self::slot)'s are).
    #[inline]
    pub(super) fn first_rslot(&self, c: usize) -> usize {
        self.rslot_base[c]
    }

    /// Reverse slot of dependency `c1 → c2` (`c2` leaves the switch `c1` enters).
    #[inline]
    pub(super) fn rslot(&self, c1: usize, c2: usize) -> usize {
        let b = self.head[c1] as usize;
        self.rslot_base[c2] + self.rev[c1] as usize - self.out_start[b] as usize
    }

    /// Channel switch `v` takes in `tree`, and the switch it leads to.
    #[inline]
    pub(super) fn hop(&self, tree: &[u16], v: usize) -> (usize, usize) {
        let c = self.out_start[v] as usize + tree[v] as usize;
        (c, self.head[c] as usize)
    }

    /// `root` if it reaches the switches with hosts, else the first switch with hosts (the
    /// root of the escape routes must lie in the hosts' component).
    pub(super) fn escape_root(&self, root: usize) -> usize {
        let root = root.min(self.num_switches - 1);
        let mut seen = vec![false; self.num_switches];
        let mut queue = vec![root as u32];
        seen[root] = true;
        let mut head = 0;
        while head < queue.len() {
            let v = queue[head] as usize;
            head += 1;
            if self.host_count(v) > 0 {
                return root;
            }
            for lc in self.out(v) {
                let u = self.head[lc] as usize;
                if !seen[u] {
                    seen[u] = true;
                    queue.push(u as u32);
                }
            }
        }
        (0..self.num_switches).find(|&v| self.host_count(v) > 0).unwrap_or(root)
    }

    /// Errors, naming the components, when hosts sit on switches that cannot reach each other.
    fn check_connected(&self, topo: &Topology, engine: &str) -> Result<()> {
        // Union-find over the links; components are few and small to name.
        let mut parent: Vec<u32> = (0..self.num_switches as u32).collect();
        fn find(parent: &mut [u32], mut v: u32) -> u32 {
            while parent[v as usize] != v {
                parent[v as usize] = parent[parent[v as usize] as usize];
                v = parent[v as usize];
            }
            v
        }
        for lc in 0..self.head.len() {
            let (a, b) = (find(&mut parent, self.tail[lc]), find(&mut parent, self.head[lc]));
            if a != b {
                parent[a.max(b) as usize] = a.min(b);
            }
        }
        let mut roots: Vec<u32> =
            (0..self.num_switches).filter(|&v| self.host_count(v) > 0).map(|v| find(&mut parent, v as u32)).collect();
        roots.sort_unstable();
        roots.dedup();
        if roots.len() <= 1 {
            return Ok(());
        }
        let names: Vec<String> = roots
            .iter()
            .take(4)
            .map(|&r| {
                let members: Vec<usize> =
                    (0..self.num_switches).filter(|&v| find(&mut parent, v as u32) == r).collect();
                let shown: Vec<&str> = members.iter().take(3).map(|&v| topo.label(topo.switches()[v])).collect();
                let more = if members.len() > 3 { ", …" } else { "" };
                format!("{{{}{more}}} ({} switches)", shown.join(", "), members.len())
            })
            .collect();
        let rest = if roots.len() > 4 { ", …" } else { "" };
        Err(NetweaveError::Routing(format!(
            "{engine} needs a connected fabric, but its hosts sit in {} components: {}{rest}",
            roots.len(),
            names.join(", ")
        )))
    }
}
