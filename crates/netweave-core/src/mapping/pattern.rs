//! Communication patterns: who sends how many bytes to whom, with no timing.
//!
//! A [`Pattern`] is a sparse directed traffic matrix `T[src][dst]` over `num_ranks` ranks, stored
//! as one flat list of aggregated messages (duplicates summed, self-messages dropped) plus two
//! CSR indexes (messages by source, by destination) so a move touching a few ranks visits only
//! their messages.
//!
//! ```
//! use netweave_core::mapping::Pattern;
//! let p = Pattern::bruck(8, 2048).unwrap();
//! assert_eq!(p.num_messages(), 8 * 3);               // log2(8) steps, one message per rank each
//! assert_eq!(p.total_bytes(), 8 * 2048 * 7);         // every rank gathers 7 blocks of 2 KiB
//! ```

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::Result;
use crate::traffic::{collectives, Message, Schedule};

/// Largest rank count a generated pattern may have (the mapper's flat arrays are 32-bit).
const MAX_RANKS: u64 = 1 << 24;

/// A sparse directed traffic matrix between ranks, with per-rank message indexes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    name: String,
    num_ranks: u32,
    /// Aggregated messages, sorted by `(src, dst)`; no self-messages, no zero-byte entries.
    messages: Vec<Message>,
    /// Messages sent by rank `r`: `out_msgs[out_offsets[r]..out_offsets[r + 1]]` (message ids).
    out_offsets: Vec<u32>,
    out_msgs: Vec<u32>,
    /// Messages received by rank `r`.
    in_offsets: Vec<u32>,
    in_msgs: Vec<u32>,
    /// Step of every message (empty: the whole pattern is one step), see [`Pattern::num_steps`].
    step_of_message: Vec<u32>,
    num_steps: u32,
}

fn check_ranks(what: &str, n: u64) -> Result<()> {
    if n < 2 {
        return crate::invalid!("{what} needs at least 2 ranks, got {n}");
    }
    if n > MAX_RANKS {
        return crate::invalid!("{what}: {n} ranks exceed the limit of {MAX_RANKS}");
    }
    Ok(())
}

impl Pattern {
    /// Aggregate `(src, dst, bytes)` records: repeated pairs are summed, self-messages and
    /// zero-byte records dropped. A record naming a rank `≥ num_ranks` is an error.
    pub fn from_messages(name: impl Into<String>, num_ranks: u32, records: &[Message]) -> Result<Self> {
        if num_ranks == 0 {
            return crate::invalid!("a pattern needs at least one rank");
        }
        if let Some(m) = records.iter().find(|m| m.src >= num_ranks || m.dst >= num_ranks) {
            return crate::invalid!("pattern names rank {} but the job has ranks 0..{num_ranks}", m.src.max(m.dst));
        }
        let mut messages: Vec<Message> = records.iter().filter(|m| m.src != m.dst && m.bytes > 0).copied().collect();
        messages.sort_unstable_by_key(|m| (m.src, m.dst));
        let mut merged: Vec<Message> = Vec::with_capacity(messages.len());
        for m in messages {
            match merged.last_mut() {
                Some(last) if last.src == m.src && last.dst == m.dst => {
                    last.bytes = last.bytes.checked_add(m.bytes).ok_or_else(|| {
                        crate::error::NetweaveError::InvalidParameter(format!(
                            "bytes from rank {} to {} overflow 64 bits",
                            m.src, m.dst
                        ))
                    })?;
                }
                _ => merged.push(m),
            }
        }
        let (out_offsets, out_msgs) = index_by(num_ranks, &merged, |m| m.src);
        let (in_offsets, in_msgs) = index_by(num_ranks, &merged, |m| m.dst);
        Ok(Pattern {
            name: name.into(),
            num_ranks,
            messages: merged,
            out_offsets,
            out_msgs,
            in_offsets,
            in_msgs,
            step_of_message: Vec::new(),
            num_steps: 1,
        })
    }

    /// Every message of every phase of `schedule`, summed per `(src, dst)` pair.
    pub fn from_schedule(schedule: &Schedule) -> Result<Self> {
        Self::merged(schedule.name().to_string(), schedule)
    }

    /// Bruck allgather merged into one step (paper 003's evaluation pattern): in step
    /// `k = 0..⌈log2 n⌉−1` rank `i` sends `base · 2^k` bytes to `(i − 2^k) mod n`.
    /// For a non-power-of-two `n` the last step carries only the `n − 2^k` missing blocks.
    pub fn bruck(num_ranks: u32, base_bytes: u64) -> Result<Self> {
        check_ranks("bruck", num_ranks as u64)?;
        let schedule = collectives::allgather_bruck(num_ranks, base_bytes)?;
        Self::merged(format!("bruck(n={num_ranks},base={base_bytes})"), &schedule)
    }

    /// Ring allgather merged into one step: rank `i` sends `(n − 1) · bytes` to `i + 1`.
    pub fn ring(num_ranks: u32, bytes: u64) -> Result<Self> {
        check_ranks("ring", num_ranks as u64)?;
        let schedule = collectives::allgather_ring(num_ranks, bytes)?;
        Self::merged(format!("ring(n={num_ranks},bytes={bytes})"), &schedule)
    }

    /// Every message of `schedule` summed per pair, under `name`. When every pair talks in one
    /// phase only (Bruck, recursive doubling, a ring's single phase), the pattern keeps each
    /// message's phase as its step, for step-aware costs; otherwise it is one step.
    fn merged(name: String, schedule: &Schedule) -> Result<Self> {
        let all: Vec<Message> = schedule.phases().flat_map(|p| p.iter().copied()).collect();
        let mut pattern = Self::from_messages(name, schedule.num_ranks(), &all)?;
        let mut pair_steps: Vec<(u32, u32, u32)> = schedule
            .phases()
            .enumerate()
            .flat_map(|(k, p)| {
                p.iter().filter(|m| m.src != m.dst && m.bytes > 0).map(move |m| (m.src, m.dst, k as u32))
            })
            .collect();
        pair_steps.sort_unstable();
        pair_steps.dedup();
        let steps = pair_steps.iter().map(|&(_, _, k)| k + 1).max().unwrap_or(1);
        // Both lists are sorted by (src, dst): equal lengths mean one phase per pair.
        if steps > 1 && pair_steps.len() == pattern.messages.len() {
            pattern.step_of_message = pair_steps.into_iter().map(|(_, _, k)| k).collect();
            pattern.num_steps = steps;
        }
        Ok(pattern)
    }

    /// All-to-all: every rank sends `bytes` to every other rank.
    pub fn alltoall(num_ranks: u32, bytes: u64) -> Result<Self> {
        check_ranks("alltoall", num_ranks as u64)?;
        if (num_ranks as u64) * (num_ranks as u64) > 1 << 28 {
            return crate::invalid!("alltoall: {num_ranks}² pairs are too many for a dense pattern");
        }
        let n = num_ranks;
        let msgs: Vec<Message> = (0..n)
            .flat_map(|s| (0..n).filter(move |&d| d != s).map(move |d| Message { src: s, dst: d, bytes }))
            .collect();
        Self::from_messages(format!("alltoall(n={num_ranks},bytes={bytes})"), num_ranks, &msgs)
    }

    /// A synthetic permutation with BookSim's name (`bitrev`, `transpose`, `tornado`, …, see
    /// [`synthetic`](crate::traffic::synthetic)): every rank sends `bytes` to its image, the
    /// same generator the flit simulator draws from. `lattice` is needed by `tornado` and
    /// `neighbor`; `randperm` takes `seed`. Random patterns (`uniform`, `hotspot`) are refused.
    ///
    /// ```
    /// let p = netweave_core::mapping::Pattern::synthetic("bitrev", 8, None, 0, 64).unwrap();
    /// assert_eq!(p.num_messages(), 8 - 4); // 000, 010, 101 and 111 are their own reverse
    /// ```
    pub fn synthetic(
        name: &str,
        num_ranks: u32,
        lattice: Option<&crate::traffic::synthetic::Lattice>,
        seed: u64,
        bytes: u64,
    ) -> Result<Self> {
        use crate::traffic::synthetic::SyntheticPattern;
        check_ranks(name, num_ranks as u64)?;
        let p = SyntheticPattern::new(name, num_ranks, lattice, seed, &[0], 1.0)?;
        let Some(_) = p.fixed(0) else {
            return crate::invalid!("{name} is random, not a permutation; a pattern needs fixed destinations");
        };
        let msgs: Vec<Message> =
            (0..num_ranks).map(|s| Message { src: s, dst: p.fixed(s).unwrap_or(s), bytes }).collect();
        Self::from_messages(format!("{name}(n={num_ranks},bytes={bytes})"), num_ranks, &msgs)
    }

    /// Nearest-neighbour halo exchange on a 1-, 2- or 3-D rank grid `dims` (rank id with
    /// dimension 0 fastest): each rank sends `bytes` to its `±1` neighbour in every dimension,
    /// wrapping around when `periodic`.
    pub fn stencil(dims: &[u32], periodic: bool, bytes: u64) -> Result<Self> {
        if dims.is_empty() || dims.contains(&0) {
            return crate::invalid!("stencil: give 1 to 3 positive grid sizes, got {dims:?}");
        }
        let n: u64 = dims.iter().map(|&d| d as u64).product();
        check_ranks("stencil", n)?;
        let mut strides = Vec::with_capacity(dims.len());
        let mut s = 1u64;
        for &d in dims {
            strides.push(s);
            s *= d as u64;
        }
        let mut msgs = Vec::new();
        for r in 0..n {
            for (d, (&k, &stride)) in dims.iter().zip(&strides).enumerate() {
                let _ = d;
                let x = (r / stride) % k as u64;
                let k = k as u64;
                for step in [1i64, -1] {
                    let nx = x as i64 + step;
                    let nx = if (0..k as i64).contains(&nx) {
                        nx as u64
                    } else if periodic && k > 2 {
                        ((nx + k as i64) % k as i64) as u64
                    } else {
                        continue;
                    };
                    let dst = r - x * stride + nx * stride;
                    msgs.push(Message { src: r as u32, dst: dst as u32, bytes });
                }
            }
        }
        let shape = dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
        Self::from_messages(format!("stencil({shape},periodic={periodic},bytes={bytes})"), n as u32, &msgs)
    }

    /// A seeded random sparse pattern: every rank sends `bytes` to `degree` distinct random
    /// other ranks.
    pub fn random_sparse(num_ranks: u32, degree: u32, bytes: u64, seed: u64) -> Result<Self> {
        check_ranks("random", num_ranks as u64)?;
        if degree == 0 || degree >= num_ranks {
            return crate::invalid!("random: degree must be between 1 and {}, got {degree}", num_ranks - 1);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut msgs = Vec::with_capacity(num_ranks as usize * degree as usize);
        let mut chosen: Vec<u32> = Vec::with_capacity(degree as usize);
        for s in 0..num_ranks {
            chosen.clear();
            while chosen.len() < degree as usize {
                let d = rng.gen_range(0..num_ranks);
                if d != s && !chosen.contains(&d) {
                    chosen.push(d);
                }
            }
            msgs.extend(chosen.iter().map(|&d| Message { src: s, dst: d, bytes }));
        }
        Self::from_messages(
            format!("random(n={num_ranks},degree={degree},bytes={bytes},seed={seed})"),
            num_ranks,
            &msgs,
        )
    }

    /// Descriptive name ("bruck(n=4096,base=2048)").
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn num_ranks(&self) -> u32 {
        self.num_ranks
    }
    /// Number of distinct communicating `(src, dst)` pairs.
    pub fn num_messages(&self) -> usize {
        self.messages.len()
    }
    /// The aggregated messages, sorted by `(src, dst)`.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }
    /// Number of steps the messages fall into: a generated collective whose every pair talks in
    /// one phase keeps its phases (Bruck on 4,096 ranks: 12 steps); anything else is 1 step.
    ///
    /// ```
    /// use netweave_core::mapping::Pattern;
    /// let p = Pattern::bruck(8, 2048).unwrap();
    /// assert_eq!(p.num_steps(), 3);
    /// let m = p.messages().iter().position(|m| (m.src, m.dst) == (0, 7)).unwrap();
    /// assert_eq!(p.step_of(m), 0); // distance 1: the first step
    /// ```
    pub fn num_steps(&self) -> u32 {
        self.num_steps
    }
    /// Step of message `m` (0 when the pattern is one step).
    #[inline]
    pub fn step_of(&self, m: usize) -> u32 {
        self.step_of_message.get(m).copied().unwrap_or(0)
    }
    /// Sum of all bytes.
    pub fn total_bytes(&self) -> u128 {
        self.messages.iter().map(|m| m.bytes as u128).sum()
    }
    /// Ids (indexes into [`messages`](Self::messages)) of the messages rank `r` sends.
    pub fn sent_by(&self, r: u32) -> &[u32] {
        &self.out_msgs[self.out_offsets[r as usize] as usize..self.out_offsets[r as usize + 1] as usize]
    }
    /// Ids of the messages rank `r` receives.
    pub fn received_by(&self, r: u32) -> &[u32] {
        &self.in_msgs[self.in_offsets[r as usize] as usize..self.in_offsets[r as usize + 1] as usize]
    }

    /// Symmetric weights `W(i, j) = T[i][j] + T[j][i]` as CSR `(offsets, neighbours, weights)`,
    /// neighbours sorted, for partitioning and greedy placement.
    pub fn symmetric_csr(&self) -> (Vec<u32>, Vec<u32>, Vec<u64>) {
        let mut pairs: Vec<(u32, u32, u64)> = Vec::with_capacity(2 * self.messages.len());
        for m in &self.messages {
            pairs.push((m.src, m.dst, m.bytes));
            pairs.push((m.dst, m.src, m.bytes));
        }
        pairs.sort_unstable_by_key(|&(a, b, _)| (a, b));
        let mut offsets = vec![0u32; self.num_ranks as usize + 1];
        let mut nbrs = Vec::with_capacity(pairs.len());
        let mut wts: Vec<u64> = Vec::with_capacity(pairs.len());
        let mut last: Option<(u32, u32)> = None;
        for (a, b, w) in pairs {
            if last == Some((a, b)) {
                *wts.last_mut().unwrap() = wts.last().unwrap().saturating_add(w);
                continue;
            }
            last = Some((a, b));
            offsets[a as usize + 1] += 1;
            nbrs.push(b);
            wts.push(w);
        }
        for r in 0..self.num_ranks as usize {
            offsets[r + 1] += offsets[r];
        }
        (offsets, nbrs, wts)
    }
}

/// CSR index of message ids grouped by `key(message)`.
fn index_by(num_ranks: u32, messages: &[Message], key: impl Fn(&Message) -> u32) -> (Vec<u32>, Vec<u32>) {
    let mut offsets = vec![0u32; num_ranks as usize + 1];
    for m in messages {
        offsets[key(m) as usize + 1] += 1;
    }
    for r in 0..num_ranks as usize {
        offsets[r + 1] += offsets[r];
    }
    let mut fill = offsets.clone();
    let mut ids = vec![0u32; messages.len()];
    for (i, m) in messages.iter().enumerate() {
        let k = key(m) as usize;
        ids[fill[k] as usize] = i as u32;
        fill[k] += 1;
    }
    (offsets, ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bruck_4096_totals_match_the_extraction() {
        let p = Pattern::bruck(4096, 2048).unwrap();
        assert_eq!(p.num_messages(), 49_152);
        assert_eq!(p.total_bytes(), 34_351_349_760);
    }

    #[test]
    fn bruck_non_power_of_two_sends_each_block_once() {
        let p = Pattern::bruck(6, 1).unwrap();
        // Each rank must receive the 5 other blocks exactly once.
        for r in 0..6 {
            let got: u64 = p.received_by(r).iter().map(|&m| p.messages()[m as usize].bytes).sum();
            assert_eq!(got, 5);
        }
    }

    #[test]
    fn duplicates_merge_and_bad_ranks_fail() {
        let recs = [
            Message { src: 0, dst: 1, bytes: 5 },
            Message { src: 0, dst: 1, bytes: 7 },
            Message { src: 1, dst: 1, bytes: 9 },
        ];
        let p = Pattern::from_messages("x", 2, &recs).unwrap();
        assert_eq!(p.messages(), &[Message { src: 0, dst: 1, bytes: 12 }]);
        assert_eq!(p.sent_by(0), &[0]);
        assert_eq!(p.received_by(1), &[0]);
        assert!(Pattern::from_messages("x", 1, &recs).is_err());
    }

    #[test]
    fn stencil_counts_neighbours() {
        let p = Pattern::stencil(&[4, 4], true, 1).unwrap();
        assert_eq!(p.num_messages(), 16 * 4);
        let q = Pattern::stencil(&[4, 4], false, 1).unwrap();
        assert_eq!(q.num_messages(), 2 * 2 * 3 * 4);
        let (off, nb, _) = q.symmetric_csr();
        assert_eq!(off[1] - off[0], 2); // corner rank 0 has 2 neighbours
        assert!(nb.iter().all(|&r| r < 16));
    }

    #[test]
    fn random_is_seeded() {
        let a = Pattern::random_sparse(50, 3, 10, 7).unwrap();
        let b = Pattern::random_sparse(50, 3, 10, 7).unwrap();
        let c = Pattern::random_sparse(50, 3, 10, 8).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.messages(), c.messages());
    }
}
