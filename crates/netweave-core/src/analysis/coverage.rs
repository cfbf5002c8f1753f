//! Completeness of a collective: does every ordered pair of ranks meet exactly once?

use serde::Serialize;

/// What the schedule covers, rank pair by rank pair and phase by phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// Every ordered pair of distinct ranks carries exactly one message (all-to-all complete).
    pub every_pair_once: bool,
    /// Ordered pairs of distinct ranks that carry at least one message.
    pub distinct_pairs: u64,
    /// Ordered pairs of distinct ranks that carry no message.
    pub missing_pairs: u64,
    /// Messages beyond the first on a pair (0 when no pair repeats).
    pub repeated_pairs: u64,
    /// Messages from a rank to itself (local copies; they never touch the network).
    pub self_messages: u64,
    /// Phases in which no rank sends twice and no rank receives twice.
    pub permutation_phases: u32,
    /// The first phase that is not a permutation, if any.
    pub first_non_permutation_phase: Option<u32>,
    /// Whether the schedule claims every phase is a permutation (then `complete` requires it).
    pub claims_permutations: bool,
}

impl Coverage {
    /// True when the collective is complete: every pair once and, if claimed, every phase a
    /// permutation.
    pub fn complete(&self) -> bool {
        self.every_pair_once && (!self.claims_permutations || self.first_non_permutation_phase.is_none())
    }

    /// Why [`complete`](Self::complete) is false, in one line (`None` when complete).
    pub fn problem(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.missing_pairs > 0 {
            parts.push(format!("{} rank pairs never exchange a message", self.missing_pairs));
        }
        if self.repeated_pairs > 0 {
            parts.push(format!("{} messages repeat a rank pair", self.repeated_pairs));
        }
        if self.claims_permutations {
            if let Some(p) = self.first_non_permutation_phase {
                parts.push(format!("phase {p} is not a permutation although the schedule claims it"));
            }
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Key of the ordered pair `src → dst` among `n` ranks: offset-major, a bijection onto `0..n²`.
#[inline]
fn key(n: u64, src: u32, dst: u32) -> u64 {
    let (src, dst) = (src as u64, dst as u64);
    let offset = if dst >= src { dst - src } else { dst + n - src };
    offset * n + src
}

/// Largest bitmap (in bits) kept per worker for pair counting; beyond it, sorted keys.
const MAX_BITMAP_BITS: u64 = 1 << 28;

/// The set of ordered rank pairs seen so far, counting repeats.
///
/// Dense schedules (all-to-all) use a bitmap of `N²` bits; sparse ones keep the pair keys and
/// sort them at the end, so memory follows the schedule, never `N²` for a thin one. A pair is
/// keyed by its *offset* `(dst − src) mod N` first and its source second: the phases of shift
/// and most other all-to-alls keep the offset fixed, so a phase sets one contiguous run of bits.
pub(crate) enum PairSet {
    Bits { num_ranks: u64, bits: Vec<u64>, repeats: u64 },
    Keys { num_ranks: u64, keys: Vec<u64> },
}

impl PairSet {
    /// An empty set for `num_ranks` ranks and a schedule of `messages` messages.
    pub(crate) fn new(num_ranks: u32, messages: usize) -> PairSet {
        let n = num_ranks as u64;
        let bits = n * n;
        if bits <= MAX_BITMAP_BITS && bits <= 64 * messages as u64 + 4096 {
            PairSet::Bits { num_ranks: n, bits: vec![0; bits.div_ceil(64) as usize], repeats: 0 }
        } else {
            PairSet::Keys { num_ranks: n, keys: Vec::new() }
        }
    }

    #[inline]
    pub(crate) fn insert(&mut self, src: u32, dst: u32) {
        match self {
            PairSet::Bits { num_ranks, bits, repeats } => {
                let i = key(*num_ranks, src, dst);
                let word = &mut bits[(i >> 6) as usize];
                let mask = 1u64 << (i & 63);
                *repeats += u64::from(*word & mask != 0);
                *word |= mask;
            }
            PairSet::Keys { num_ranks, keys } => keys.push(key(*num_ranks, src, dst)),
        }
    }

    /// Union with another worker's set (both built by [`new`](Self::new) with the same inputs).
    pub(crate) fn merge(&mut self, other: PairSet) {
        match (self, other) {
            (PairSet::Bits { bits, repeats, .. }, PairSet::Bits { bits: b, repeats: r, .. }) => {
                *repeats += r;
                for (x, y) in bits.iter_mut().zip(b) {
                    *repeats += u64::from((*x & y).count_ones());
                    *x |= y;
                }
            }
            (PairSet::Keys { keys, .. }, PairSet::Keys { keys: k, .. }) => keys.extend(k),
            _ => unreachable!("pair sets of one analysis share their representation"),
        }
    }

    /// `(distinct pairs, repeated messages)`.
    pub(crate) fn finish(self) -> (u64, u64) {
        match self {
            PairSet::Bits { bits, repeats, .. } => (bits.iter().map(|w| w.count_ones() as u64).sum(), repeats),
            PairSet::Keys { mut keys, .. } => {
                keys.sort_unstable();
                let total = keys.len() as u64;
                keys.dedup();
                (keys.len() as u64, total - keys.len() as u64)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_and_keys_agree() {
        let pairs = [(0, 1), (1, 0), (0, 1), (2, 2), (3, 1), (3, 1), (3, 1)];
        let mut bits = PairSet::new(4, 1 << 20);
        let mut keys = PairSet::new(4, 0);
        // The bitmap's threshold keeps tiny sets as bits too; force keys for the comparison.
        keys = match keys {
            PairSet::Bits { num_ranks, .. } => PairSet::Keys { num_ranks, keys: Vec::new() },
            k => k,
        };
        let (mut half_a, mut half_b) = (PairSet::new(4, 1 << 20), PairSet::new(4, 1 << 20));
        for (i, &(s, d)) in pairs.iter().enumerate() {
            bits.insert(s, d);
            keys.insert(s, d);
            if i % 2 == 0 {
                half_a.insert(s, d)
            } else {
                half_b.insert(s, d)
            }
        }
        half_a.merge(half_b);
        assert_eq!(bits.finish(), (4, 3));
        assert_eq!(keys.finish(), (4, 3));
        assert_eq!(half_a.finish(), (4, 3));
    }
}
