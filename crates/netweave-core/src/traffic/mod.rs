//! Traffic: what the job sends — the third pipeline stage.
//!
//! A [`Schedule`] is an ordered list of phases, each a set of `(src, dst, bytes)` messages
//! between job *ranks*, plus a placement mapping each rank to a host index. Messages are
//! stored flat (one array, phase offsets into it) so evaluators stream through them.
//!
//! ```
//! use netweave_core::traffic::Schedule;
//! let s = Schedule::shift_alltoall(4, 1024).unwrap();
//! assert_eq!(s.num_phases(), 3);              // (S + i) mod N for i = 1..N-1
//! assert_eq!(s.phase(1)[0].dst, 2);           // rank 0 sends to rank 2 in the second phase
//! ```

use serde::{Deserialize, Serialize};

pub mod dag;

use crate::error::{NetweaveError, Result};
use crate::topology::Topology;

/// One point-to-point transfer between ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
}

/// Phases of messages between `num_ranks` ranks, and where each rank runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    name: String,
    num_ranks: u32,
    /// Host index of each rank.
    placement: Vec<u32>,
    messages: Vec<Message>,
    /// Phase `p` is `messages[phase_offsets[p]..phase_offsets[p + 1]]`.
    phase_offsets: Vec<u32>,
}

impl Schedule {
    /// Build from explicit phases; ranks are placed on hosts `0..num_ranks` until
    /// [`with_placement`](Self::with_placement) says otherwise.
    pub fn from_phases(name: impl Into<String>, num_ranks: u32, phases: Vec<Vec<Message>>) -> Result<Self> {
        let mut messages = Vec::with_capacity(phases.iter().map(Vec::len).sum());
        let mut phase_offsets = Vec::with_capacity(phases.len() + 1);
        phase_offsets.push(0);
        for phase in phases {
            for m in &phase {
                if m.src >= num_ranks || m.dst >= num_ranks {
                    return Err(NetweaveError::Schedule(format!(
                        "message {} -> {} names a rank outside 0..{num_ranks}",
                        m.src, m.dst
                    )));
                }
            }
            messages.extend(phase);
            phase_offsets.push(messages.len() as u32);
        }
        Ok(Schedule { name: name.into(), num_ranks, placement: (0..num_ranks).collect(), messages, phase_offsets })
    }

    /// The shift (pairwise) all-to-all: in phase `i` (1 ≤ i < N) rank `S` sends `bytes` to
    /// `(S + i) mod N`. The self-exchange of phase 0 is a local copy and is left out.
    pub fn shift_alltoall(num_ranks: u32, bytes: u64) -> Result<Self> {
        if num_ranks < 2 {
            return crate::invalid!("an all-to-all needs at least 2 ranks, got {num_ranks}");
        }
        let phases = (1..num_ranks)
            .map(|i| (0..num_ranks).map(|s| Message { src: s, dst: (s + i) % num_ranks, bytes }).collect())
            .collect();
        Self::from_phases(format!("alltoall-shift(N={num_ranks})"), num_ranks, phases)
    }

    /// Place rank `r` on host index `placement[r]`.
    pub fn with_placement(mut self, placement: Vec<u32>) -> Result<Self> {
        if placement.len() != self.num_ranks as usize {
            return Err(NetweaveError::Schedule(format!(
                "placement lists {} hosts for {} ranks",
                placement.len(),
                self.num_ranks
            )));
        }
        self.placement = placement;
        Ok(self)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn num_ranks(&self) -> u32 {
        self.num_ranks
    }
    pub fn num_phases(&self) -> usize {
        self.phase_offsets.len() - 1
    }
    pub fn num_messages(&self) -> usize {
        self.messages.len()
    }
    /// Messages of phase `p`.
    pub fn phase(&self, p: usize) -> &[Message] {
        &self.messages[self.phase_offsets[p] as usize..self.phase_offsets[p + 1] as usize]
    }
    pub fn phases(&self) -> impl Iterator<Item = &[Message]> + '_ {
        (0..self.num_phases()).map(|p| self.phase(p))
    }
    /// Host index of each rank.
    pub fn placement(&self) -> &[u32] {
        &self.placement
    }

    /// Check the placement fits `topo`: every rank on an existing host.
    pub fn check_fits(&self, topo: &Topology) -> Result<()> {
        if let Some((r, &h)) = self.placement.iter().enumerate().find(|(_, &h)| h as usize >= topo.num_hosts()) {
            return Err(NetweaveError::Schedule(format!(
                "rank {r} is placed on host {h}, but the topology has {} hosts",
                topo.num_hosts()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shift_covers_every_ordered_pair_once() {
        let n = 7;
        let s = Schedule::shift_alltoall(n, 8).unwrap();
        let mut seen = vec![0u32; (n * n) as usize];
        for phase in s.phases() {
            let mut dst_seen = vec![false; n as usize];
            for m in phase {
                seen[(m.src * n + m.dst) as usize] += 1;
                assert!(!std::mem::replace(&mut dst_seen[m.dst as usize], true), "phase is a permutation");
            }
        }
        for a in 0..n {
            for b in 0..n {
                assert_eq!(seen[(a * n + b) as usize], u32::from(a != b));
            }
        }
    }

    #[test]
    fn bad_ranks_and_placements_are_rejected() {
        assert!(Schedule::shift_alltoall(1, 8).is_err());
        let bad = vec![vec![Message { src: 0, dst: 5, bytes: 1 }]];
        assert!(Schedule::from_phases("x", 2, bad).is_err());
        assert!(Schedule::shift_alltoall(3, 8).unwrap().with_placement(vec![0, 1]).is_err());
    }
}
