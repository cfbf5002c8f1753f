//! Allgather, gather and barrier schedules.
//!
//! `bytes` is one rank's block; a message that forwards several blocks carries their total.
//! All of these forward data, so their completeness check follows what each rank knows phase
//! by phase ([`Delivery::Forwarded`]), except the linear gather, which is direct.
//!
//! ```
//! use netweave_core::traffic::collectives::{allgather_bruck, barrier_multicast};
//! let s = allgather_bruck(6, 8).unwrap();
//! assert_eq!(s.phase(2)[0].bytes, 2 * 8);            // last step moves min(4, 6 − 4) blocks
//! let b = barrier_multicast(64, 8, 0, 1).unwrap();
//! assert_eq!(b.num_phases(), 12);                     // paper 002: 6 gather + 6 release steps
//! assert!(b.check_complete().is_ok());
//! ```

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Collective, Delivery, Message, Schedule};
use crate::checked;
use crate::error::Result;

fn need_ranks(algo: &str, n: u32, min: u32) -> Result<()> {
    if n < min {
        return crate::invalid!("{algo} needs at least {min} ranks, got {n}");
    }
    Ok(())
}

/// ⌈log₂ n⌉ for n ≥ 1.
fn ceil_log2(n: u32) -> u32 {
    32 - n.saturating_sub(1).leading_zeros()
}

fn forwarded(name: String, n: u32, phases: Vec<Vec<Message>>, collective: Collective) -> Result<Schedule> {
    Ok(Schedule::from_phases(name, n, phases)?
        .with_collective(collective, Delivery::Forwarded)
        .with_permutation_claim(true))
}

/// Ring allgather: N − 1 steps; in each, rank `S` passes the block it received last (its own
/// first) to `S + 1`.
pub fn allgather_ring(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    need_ranks("ring allgather", num_ranks, 2)?;
    let n = num_ranks;
    let name = format!("allgather-ring(N={n})");
    super::ensure_fits(&name, u128::from(n) * u128::from(n - 1))?;
    let phases = (1..n).map(|_| (0..n).map(|s| Message { src: s, dst: (s + 1) % n, bytes }).collect()).collect();
    forwarded(name, n, phases, Collective::Allgather)
}

/// Bruck allgather: ⌈log₂ N⌉ steps; in step `k` rank `S` sends the `min(2^k, N − 2^k)` blocks
/// it holds to `S − 2^k` (works for any N).
pub fn allgather_bruck(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    need_ranks("Bruck allgather", num_ranks, 2)?;
    let n = num_ranks;
    let name = format!("allgather-bruck(N={n})");
    super::ensure_fits(&name, u128::from(n) * u128::from(ceil_log2(n)))?;
    let phases = (0..ceil_log2(n))
        .map(|k| {
            let d = 1u32 << k;
            let b = checked::mul("--bytes", bytes, u64::from(d.min(n - d)))?;
            Ok((0..n).map(|s| Message { src: s, dst: (s + n - d) % n, bytes: b }).collect())
        })
        .collect::<Result<_>>()?;
    forwarded(name, n, phases, Collective::Allgather)
}

/// Recursive-doubling allgather: log₂ N steps; in step `k` ranks `S` and `S xor 2^k` exchange
/// the `2^k` blocks each holds. Needs N a power of two.
pub fn allgather_recursive_doubling(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    need_ranks("recursive-doubling allgather", num_ranks, 2)?;
    let n = num_ranks;
    if !n.is_power_of_two() {
        return crate::invalid!(
            "recursive-doubling allgather needs a power-of-two number of ranks, got {n} (use bruck or ring)"
        );
    }
    let name = format!("allgather-recursive-doubling(N={n})");
    super::ensure_fits(&name, u128::from(n) * u128::from(ceil_log2(n)))?;
    let phases = (0..ceil_log2(n))
        .map(|k| {
            let b = checked::mul("--bytes", bytes, 1u64 << k)?;
            Ok((0..n).map(|s| Message { src: s, dst: s ^ (1 << k), bytes: b }).collect())
        })
        .collect::<Result<_>>()?;
    forwarded(name, n, phases, Collective::Allgather)
}

fn check_root(algo: &str, n: u32, root: u32) -> Result<()> {
    if root >= n {
        return crate::invalid!("{algo}: --root {root} is not a rank of the job (valid: 0..={})", n.saturating_sub(1));
    }
    Ok(())
}

/// Linear gather: every other rank sends its block straight to the root, all in one phase.
pub fn gather_linear(num_ranks: u32, bytes: u64, root: u32) -> Result<Schedule> {
    need_ranks("linear gather", num_ranks, 2)?;
    check_root("linear gather", num_ranks, root)?;
    super::ensure_fits("linear gather", u128::from(num_ranks))?;
    let phase = (0..num_ranks).filter(|&s| s != root).map(|s| Message { src: s, dst: root, bytes }).collect();
    Ok(Schedule::from_phases(format!("gather-linear(N={num_ranks},root={root})"), num_ranks, vec![phase])?
        .with_collective(Collective::Gather { root }, Delivery::Direct))
}

/// Binomial-tree gather: with relative rank `r = (S − root) mod N`, in step `k` every `r` with
/// `r mod 2^(k+1) = 2^k` sends the `min(2^k, N − r)` blocks of its subtree to `r − 2^k`.
pub fn gather_binomial(num_ranks: u32, bytes: u64, root: u32) -> Result<Schedule> {
    need_ranks("binomial gather", num_ranks, 2)?;
    check_root("binomial gather", num_ranks, root)?;
    let n = num_ranks;
    super::ensure_fits("binomial gather", u128::from(n))?;
    let phases = (0..ceil_log2(n))
        .map(|k| {
            let d = 1u32 << k;
            let mut p = (d..n)
                .step_by(2 * d as usize)
                .map(|r| {
                    Ok(Message {
                        src: (r + root) % n,
                        dst: (r - d + root) % n,
                        bytes: checked::mul("--bytes", bytes, u64::from(d.min(n - r)))?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            p.sort_by_key(|m| m.src);
            Ok(p)
        })
        .collect::<Result<_>>()?;
    forwarded(format!("gather-binomial(N={n},root={root})"), n, phases, Collective::Gather { root })
}

/// Dissemination barrier: ⌈log₂ N⌉ rounds; in round `k` rank `S` signals `S + 2^k`.
pub fn barrier_dissemination(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    need_ranks("dissemination barrier", num_ranks, 2)?;
    let n = num_ranks;
    super::ensure_fits("dissemination barrier", u128::from(n) * u128::from(ceil_log2(n)))?;
    let phases = (0..ceil_log2(n))
        .map(|k| (0..n).map(|s| Message { src: s, dst: (s + (1 << k)) % n, bytes }).collect())
        .collect();
    forwarded(format!("barrier-dissemination(N={n})"), n, phases, Collective::Barrier)
}

/// The visiting list of paper 002's barrier: `root` first, then the other ranks in a random
/// order drawn from `seed` (ChaCha8, so the same seed gives the same list everywhere).
pub fn visiting_list(num_ranks: u32, root: u32, seed: u64) -> Vec<u32> {
    let mut others: Vec<u32> = (0..num_ranks).filter(|&r| r != root).collect();
    others.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let mut list = Vec::with_capacity(num_ranks as usize);
    list.push(root);
    list.extend(others);
    list
}

/// Steps of a unicast-based multicast along `list` (McKinley et al.): the holder of a sublist
/// sends to the first rank of its upper half and hands that half over, so `d` destinations
/// take ⌈log₂(d + 1)⌉ steps. Returns `(sender, receiver)` pairs per step.
pub fn multicast_steps(list: &[u32]) -> Vec<Vec<(u32, u32)>> {
    let mut segments = vec![(0usize, list.len())];
    let mut steps = Vec::new();
    while segments.iter().any(|&(lo, hi)| hi - lo > 1) {
        let mut step = Vec::new();
        let mut next = Vec::with_capacity(2 * segments.len());
        for (lo, hi) in segments {
            if hi - lo > 1 {
                let mid = lo + (hi - lo).div_ceil(2);
                step.push((list[lo], list[mid]));
                next.push((lo, mid));
                next.push((mid, hi));
            } else {
                next.push((lo, hi));
            }
        }
        steps.push(step);
        segments = next;
    }
    steps
}

/// Paper 002's barrier: a gather up the unicast-based multicast tree of a random visiting list
/// (the steps in reverse, messages reversed), then the release down the same tree —
/// 2·⌈log₂ N⌉ steps (12 for 64 hosts). `seed` draws the visiting list.
pub fn barrier_multicast(num_ranks: u32, bytes: u64, root: u32, seed: u64) -> Result<Schedule> {
    need_ranks("multicast barrier", num_ranks, 2)?;
    check_root("multicast barrier", num_ranks, root)?;
    super::ensure_fits("multicast barrier", 2 * u128::from(num_ranks))?;
    let steps = multicast_steps(&visiting_list(num_ranks, root, seed));
    let sorted = |mut p: Vec<Message>| {
        p.sort_by_key(|m| m.src);
        p
    };
    let mut phases: Vec<Vec<Message>> = steps
        .iter()
        .rev()
        .map(|st| sorted(st.iter().map(|&(a, b)| Message { src: b, dst: a, bytes }).collect()))
        .collect();
    phases.extend(steps.iter().map(|st| sorted(st.iter().map(|&(a, b)| Message { src: a, dst: b, bytes }).collect())));
    forwarded(
        format!("barrier-multicast(N={num_ranks},root={root},seed={seed})"),
        num_ranks,
        phases,
        Collective::Barrier,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn multicast_takes_ceil_log2_of_list_length_steps() {
        for n in 1..70u32 {
            let list: Vec<u32> = (0..n).collect();
            let steps = multicast_steps(&list);
            assert_eq!(steps.len() as u32, ceil_log2(n), "{n}");
            assert_eq!(steps.iter().map(Vec::len).sum::<usize>() as u32, n - 1);
        }
        // 64 hosts: 6 + 6 steps.
        assert_eq!(barrier_multicast(64, 8, 0, 7).unwrap().num_phases(), 12);
    }

    #[test]
    fn visiting_lists_are_seeded() {
        assert_eq!(visiting_list(16, 3, 5), visiting_list(16, 3, 5));
        assert_ne!(visiting_list(16, 3, 5), visiting_list(16, 3, 6));
        let mut l = visiting_list(16, 3, 5);
        assert_eq!(l[0], 3);
        l.sort();
        assert_eq!(l, (0..16).collect::<Vec<_>>());
    }

    #[test]
    fn fixed_vectors() {
        // Binomial gather to root 0 over 5 ranks: 1→0, 3→2 (step 0); 2→0 (2 blocks); 4→0.
        let g = gather_binomial(5, 1, 0).unwrap();
        let ph: Vec<Vec<(u32, u32, u64)>> =
            g.phases().map(|p| p.iter().map(|m| (m.src, m.dst, m.bytes)).collect()).collect();
        assert_eq!(ph, vec![vec![(1, 0, 1), (3, 2, 1)], vec![(2, 0, 2)], vec![(4, 0, 1)]]);
        // Recursive doubling moves 1, 2, 4 blocks.
        let rd = allgather_recursive_doubling(8, 10).unwrap();
        assert_eq!(rd.phases().map(|p| p[0].bytes).collect::<Vec<_>>(), vec![10, 20, 40]);
        assert!(allgather_recursive_doubling(6, 1).is_err());
        assert!(gather_linear(4, 1, 4).is_err());
        assert_eq!(gather_linear(4, 1, 2).unwrap().completeness().complete, Some(true));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn every_collective_delivers(n in 2u32..70, root_pick in any::<u32>(), seed in any::<u64>()) {
            let root = root_pick % n;
            let mut all = vec![
                allgather_ring(n, 4).unwrap(),
                allgather_bruck(n, 4).unwrap(),
                gather_linear(n, 4, root).unwrap(),
                gather_binomial(n, 4, root).unwrap(),
                barrier_dissemination(n, 0).unwrap(),
                barrier_multicast(n, 0, root, seed).unwrap(),
            ];
            if n.is_power_of_two() {
                all.push(allgather_recursive_doubling(n, 4).unwrap());
            }
            for s in &all {
                let c = s.completeness();
                prop_assert!(c.ok(), "{}: {:?}", s.name(), c);
                prop_assert!(c.complete == Some(true));
                prop_assert!(s.is_canonical());
            }
            // An allgather moves N − 1 blocks into every rank, whatever the algorithm.
            for s in &all[..2] {
                let into_0: u64 = s.messages().iter().filter(|m| m.dst == 0).map(|m| m.bytes).sum();
                prop_assert_eq!(into_0, 4 * (n as u64 - 1));
            }
            // A gather's root receives N − 1 blocks.
            for s in &all[2..4] {
                let into_root: u64 = s.messages().iter().filter(|m| m.dst == root).map(|m| m.bytes).sum();
                prop_assert_eq!(into_root, 4 * (n as u64 - 1));
            }
            // Dropping any one message breaks a barrier.
            let b = &all[5];
            let cut = (seed % b.num_messages() as u64) as usize;
            let phases: Vec<Vec<Message>> = b.phases().map(|p| p.to_vec()).collect();
            let mut k = 0;
            let dropped: Vec<Vec<Message>> = phases.into_iter().map(|p| p.into_iter().filter(|_| { k += 1; k - 1 != cut }).collect()).collect();
            let broken = Schedule::from_phases("cut", n, dropped).unwrap().with_collective(Collective::Barrier, Delivery::Forwarded);
            prop_assert_eq!(broken.completeness().complete, Some(false));
        }
    }
}
