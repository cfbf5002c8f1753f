//! All-to-all schedules: shift, linear, XOR, Bruck, and paper 001's A2A, A2AND and A2AT.
//!
//! Every generator takes the bytes each rank sends to each other rank and returns a
//! [`Schedule`] over ranks `0..N` placed on hosts `0..N` (use
//! [`Schedule::with_placement`] or [`alloc`](super::alloc) to place them elsewhere).
//!
//! The lattice algorithms (A2AND, A2AT) number ranks like the grid topologies number routers:
//! dimension 0 fastest, `rank = x0 + k0·(x1 + k1·…)`, and send to *relative offsets*: rank `x`
//! sends its offset-`o` message to `(x + o) mod k` in every dimension (paper 001's reading,
//! also on a mesh, where a wrapped offset travels back the long way). Each rank owns a FIFO
//! list of destinations; with `nct` concurrent sends, phase `g` holds sends `g·nct .. (g+1)·nct`
//! of every rank — paper 001's idealised lock-step groups.
//!
//! ```
//! use netweave_core::traffic::alltoall::{a2at, a2at_offsets};
//! assert_eq!(&a2at_offsets(5).unwrap()[..4], &[(1, 0), (0, 1), (-1, 0), (0, -1)]);
//! let s = a2at(&[5, 5], 100, 2).unwrap();       // odd square, two sends in flight
//! assert_eq!((s.num_ranks(), s.num_phases()), (25, 12));
//! assert!(s.check_complete().is_ok());
//! assert!(a2at(&[4, 4], 100, 1).is_err());        // even side: not covered by paper 001
//! ```

use super::{Collective, Delivery, Message, Schedule};
use crate::checked;
use crate::error::Result;

fn need_ranks(algo: &str, n: u32) -> Result<()> {
    if n < 2 {
        return crate::invalid!("{algo}: an all-to-all needs at least 2 ranks, got {n}");
    }
    Ok(())
}

/// Build a direct all-to-all from per-rank FIFO destination lists (`dests(rank, k)` is rank's
/// `k`-th destination, `k < per_rank`), `nct` sends per phase.
fn from_send_lists(
    name: String,
    num_ranks: u32,
    per_rank: u32,
    bytes: u64,
    nct: u32,
    dests: impl Fn(u32, u32) -> u32,
) -> Result<Schedule> {
    if nct == 0 {
        return crate::invalid!("{name}: NCT (concurrent sends) must be at least 1");
    }
    super::ensure_fits(&name, u128::from(num_ranks) * u128::from(per_rank))?;
    let groups = per_rank.div_ceil(nct);
    let phases = (0..groups)
        .map(|g| {
            let ks = g * nct..((g + 1) * nct).min(per_rank);
            let mut phase = Vec::with_capacity(num_ranks as usize * ks.len());
            for s in 0..num_ranks {
                for k in ks.clone() {
                    phase.push(Message { src: s, dst: dests(s, k), bytes });
                }
            }
            phase
        })
        .collect();
    Schedule::from_phases(name, num_ranks, phases)?
        .with_collective(Collective::Alltoall, Delivery::Direct)
        .with_concurrent_sends(nct)
}

/// Shift (pairwise): phase `i` sends `S → (S + i) mod N`. Same as
/// [`Schedule::shift_alltoall`].
pub fn shift(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    Schedule::shift_alltoall(num_ranks, bytes)
}

/// Linear: every rank walks the ranks in increasing order, skipping itself, so in phase `i`
/// all ranks but one send to rank `i` — the hot-spot baseline (MPI's basic linear
/// all-to-all issued in lock-step). Not a permutation.
pub fn linear(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    need_ranks("linear", num_ranks)?;
    from_send_lists(format!("alltoall-linear(N={num_ranks})"), num_ranks, num_ranks - 1, bytes, 1, |s, k| {
        if k < s {
            k
        } else {
            k + 1
        }
    })
}

/// XOR (recursive exchange): phase `i` pairs `S ↔ S xor i`. Needs N a power of two.
pub fn xor(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    need_ranks("xor", num_ranks)?;
    if !num_ranks.is_power_of_two() {
        return crate::invalid!("xor all-to-all needs a power-of-two number of ranks, got {num_ranks}");
    }
    Ok(from_send_lists(format!("alltoall-xor(N={num_ranks})"), num_ranks, num_ranks - 1, bytes, 1, |s, k| s ^ (k + 1))?
        .with_permutation_claim(true))
}

/// Blocks Bruck's all-to-all moves in step `k`: the block indices `j < N` with bit `k` set.
pub fn bruck_step_blocks(num_ranks: u32, k: u32) -> u64 {
    let (n, half) = (num_ranks as u64, 1u64 << k);
    (n >> (k + 1)) * half + (n % (2 * half)).saturating_sub(half)
}

/// Bruck's all-to-all (radix 2): after a local rotation, in step `k` (`2^k < N`) rank `S` sends
/// to `(S + 2^k) mod N` every block whose index has bit `k` set, so a step moves
/// [`bruck_step_blocks`] blocks of `bytes` each — ⌈log₂ N⌉ steps instead of N − 1, at the price
/// of forwarding data. Each step is a permutation.
pub fn bruck(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    need_ranks("bruck", num_ranks)?;
    let steps = 32 - (num_ranks - 1).leading_zeros();
    let name = format!("alltoall-bruck(N={num_ranks})");
    super::ensure_fits(&name, u128::from(num_ranks) * u128::from(steps))?;
    let phases = (0..steps)
        .map(|k| {
            let b = checked::mul("--bytes", bytes, bruck_step_blocks(num_ranks, k))?;
            Ok((0..num_ranks).map(|s| Message { src: s, dst: (s + (1 << k)) % num_ranks, bytes: b }).collect())
        })
        .collect::<Result<_>>()?;
    Ok(Schedule::from_phases(name, num_ranks, phases)?
        .with_collective(Collective::Alltoall, Delivery::Forwarded)
        .with_permutation_claim(true))
}

/// Paper 001's A2A (MPICH's "SimpleSpread"): rank `S` sends to `(S + i) mod N`,
/// `i = 1 .. N−1`, `nct` at a time. With `nct = 1` it is the shift schedule.
pub fn a2a(num_ranks: u32, bytes: u64, nct: u32) -> Result<Schedule> {
    need_ranks("a2a", num_ranks)?;
    Ok(from_send_lists(
        format!("alltoall-a2a(N={num_ranks},nct={nct})"),
        num_ranks,
        num_ranks - 1,
        bytes,
        nct,
        |s, k| (s + k + 1) % num_ranks,
    )?
    .with_permutation_claim(nct == 1))
}

/// Check a lattice shape and return its strides (dimension 0 fastest) and rank count.
fn lattice(algo: &str, dims: &[u32]) -> Result<(Vec<u32>, u32)> {
    if dims.is_empty() || dims.contains(&0) {
        return crate::invalid!("{algo}: the shape needs at least one dimension and no zero size, got {dims:?}");
    }
    let mut strides = Vec::with_capacity(dims.len());
    let mut n: u64 = 1;
    for &k in dims {
        strides.push(n as u32);
        n *= k as u64;
        if n > u32::MAX as u64 {
            return crate::invalid!("{algo}: shape {} has more than 2^32 ranks", fmt_shape(dims));
        }
    }
    need_ranks(algo, n as u32)?;
    Ok((strides, n as u32))
}

/// `5x5`.
pub fn fmt_shape(dims: &[u32]) -> String {
    dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
}

/// Destination of `rank` for a relative offset, wrapping in every dimension.
fn offset_dest(rank: u32, offset: &[i64], dims: &[u32], strides: &[u32]) -> u32 {
    let mut dst = 0u32;
    for d in 0..dims.len() {
        let k = dims[d] as i64;
        let x = (rank / strides[d]) as i64 % k;
        dst += (((x + offset[d]) % k + k) % k) as u32 * strides[d];
    }
    dst
}

/// Build a lattice all-to-all from one offset list shared (up to translation) by every rank.
fn from_offsets(name: String, dims: &[u32], offsets: &[Vec<i64>], bytes: u64, nct: u32) -> Result<Schedule> {
    let (strides, n) = lattice(&name, dims)?;
    // Destination table: rank-major, offset-minor.
    let per = offsets.len();
    super::ensure_fits(&name, u128::from(n) * per as u128)?;
    let mut table = vec![0u32; n as usize * per];
    for s in 0..n {
        for (k, o) in offsets.iter().enumerate() {
            table[s as usize * per + k] = offset_dest(s, o, dims, &strides);
        }
    }
    Ok(from_send_lists(name, n, per as u32, bytes, nct, |s, k| table[s as usize * per + k as usize])?
        .with_permutation_claim(nct == 1))
}

/// Paper 001's A2AND offsets: every offset vector in `[0, k_d)` per dimension except zero, in
/// lexicographic order with dimension 0 outermost (the paper's `x` outer, `y` inner).
pub fn a2and_offsets(dims: &[u32]) -> Vec<Vec<i64>> {
    let total: u64 = dims.iter().map(|&k| k as u64).product();
    let mut out = Vec::with_capacity(total.saturating_sub(1) as usize);
    let mut x = vec![0i64; dims.len()];
    for _ in 1..total {
        // Odometer with the last dimension fastest.
        for d in (0..dims.len()).rev() {
            x[d] += 1;
            if x[d] < dims[d] as i64 {
                break;
            }
            x[d] = 0;
        }
        out.push(x.clone());
    }
    out
}

/// Paper 001's A2AND on an n-D shape: each rank visits the relative offsets of
/// [`a2and_offsets`], `nct` at a time. Consecutive sends keep their direction, which is why
/// it gains little from extra concurrent sends.
pub fn a2and(dims: &[u32], bytes: u64, nct: u32) -> Result<Schedule> {
    lattice("a2and", dims)?;
    from_offsets(format!("alltoall-a2and({},nct={nct})", fmt_shape(dims)), dims, &a2and_offsets(dims), bytes, nct)
}

/// Paper 001's A2AT send list for an odd side `n`, as `(dx, dy)` offsets in `[−M, M]²`,
/// `M = (n−1)/2`: Step 1 (axes and diagonals) then Step 2, **with the inner loop running
/// `j = 1 .. i−1`** (the printed `j ≤ i` would resend the diagonals: 8M duplicates).
pub fn a2at_offsets(n: u32) -> Result<Vec<(i64, i64)>> {
    if n < 3 || n % 2 == 0 {
        return crate::invalid!(
            "a2at covers odd square 2-D shapes (side 3, 5, 7, …); side {n} is not covered (use a2and)"
        );
    }
    let m = (n as i64 - 1) / 2;
    let mut out = Vec::with_capacity((n * n - 1) as usize);
    for i in 1..=m {
        out.extend([(i, 0), (0, i), (-i, 0), (0, -i), (i, i), (-i, -i), (i, -i), (-i, i)]);
    }
    for i in 1..=m {
        for j in 1..i {
            out.extend([(i, j), (-j, -i), (j, i), (-i, -j), (i, -j), (-j, i), (j, -i), (-i, j)]);
        }
    }
    Ok(out)
}

/// Paper 001's A2AT on an odd square 2-D shape `[n, n]` with `nct` ∈ {1, 2, 4} concurrent
/// sends: each phase of `nct` consecutive sends loads every link direction evenly (NCT 2 on a
/// mesh reaches the bisection bound, NCT 4 on a torus the torus bound). Other shapes and NCT
/// values are rejected.
pub fn a2at(dims: &[u32], bytes: u64, nct: u32) -> Result<Schedule> {
    let square = dims.len() == 2 && dims[0] == dims[1];
    if !square {
        return crate::invalid!(
            "a2at covers odd square 2-D shapes only, got {} (use a2and for other shapes)",
            fmt_shape(dims)
        );
    }
    if ![1, 2, 4].contains(&nct) {
        return crate::invalid!("a2at runs with NCT 1, 2 or 4 concurrent sends, got {nct}");
    }
    let offsets: Vec<Vec<i64>> = a2at_offsets(dims[0])?.into_iter().map(|(a, b)| vec![a, b]).collect();
    from_offsets(format!("alltoall-a2at({},nct={nct})", fmt_shape(dims)), dims, &offsets, bytes, nct)
}

/// Paper 001's Table 1 in message units (one message over one link) for an odd side `n`:
/// `(TV_NCT1, LB_Mesh, TV_NCT2, LB_Torus)` = N(N²−1)·(1/3, 1/4, 1/6, 1/8).
pub fn a2at_theory(n: u32) -> Result<(u64, u64, u64, u64)> {
    a2at_offsets(n)?;
    let v = n as u64 * (n as u64 * n as u64 - 1);
    Ok((v / 3, v / 4, v / 6, v / 8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a2at_matches_the_papers_test_vector() {
        let expect = [
            (1, 0),
            (0, 1),
            (-1, 0),
            (0, -1),
            (1, 1),
            (-1, -1),
            (1, -1),
            (-1, 1),
            (2, 0),
            (0, 2),
            (-2, 0),
            (0, -2),
            (2, 2),
            (-2, -2),
            (2, -2),
            (-2, 2),
            (2, 1),
            (-1, -2),
            (1, 2),
            (-2, -1),
            (2, -1),
            (-1, 2),
            (1, -2),
            (-2, 1),
        ];
        assert_eq!(a2at_offsets(5).unwrap(), expect);
    }

    #[test]
    fn a2at_lists_cover_the_square_once() {
        for n in (3..=17).step_by(2) {
            let l = a2at_offsets(n).unwrap();
            let m = (n as i64 - 1) / 2;
            let mut seen = std::collections::HashSet::new();
            for &(a, b) in &l {
                assert!(a.abs() <= m && b.abs() <= m && (a, b) != (0, 0));
                assert!(seen.insert((a, b)), "duplicate offset ({a},{b}) for n={n}");
            }
            assert_eq!(l.len() as u32, n * n - 1);
            // The printed j ≤ i would add the diagonals again: 8M duplicates.
            assert_eq!(l.len() as i64 + 8 * m, (n * n - 1) as i64 + 8 * m);
        }
    }

    #[test]
    fn a2at_rejects_shapes_it_does_not_cover() {
        for dims in [&[4u32, 4][..], &[5, 7], &[5], &[5, 5, 5], &[1, 1]] {
            assert!(a2at(dims, 1, 1).is_err(), "{dims:?}");
        }
        assert!(a2at(&[5, 5], 1, 3).unwrap_err().to_string().contains("NCT 1, 2 or 4"));
        assert!(a2at(&[6, 6], 1, 1).unwrap_err().to_string().contains("odd square"));
    }

    #[test]
    fn a2and_is_lexicographic_x_outer() {
        let o = a2and_offsets(&[5, 5]);
        assert_eq!(o.len(), 24);
        assert_eq!(&o[..6], &[vec![0, 1], vec![0, 2], vec![0, 3], vec![0, 4], vec![1, 0], vec![1, 1]]);
        // Rank (1,0) = 1 sends its first message to (1, 1) = 1 + 5.
        let s = a2and(&[5, 5], 8, 1).unwrap();
        assert_eq!(s.phase(0)[1], Message { src: 1, dst: 6, bytes: 8 });
        assert_eq!(a2and_offsets(&[2, 2, 2]).len(), 7);
    }

    #[test]
    fn bruck_moves_the_right_number_of_blocks() {
        // N = 6: step 0 moves blocks 1,3,5; step 1 blocks 2,3; step 2 block 4,5.
        assert_eq!((0..3).map(|k| bruck_step_blocks(6, k)).collect::<Vec<_>>(), vec![3, 2, 2]);
        let s = bruck(6, 10).unwrap();
        assert_eq!(s.num_phases(), 3);
        assert_eq!(s.phase(1)[0], Message { src: 0, dst: 2, bytes: 20 });
        // Power of two: N/2 blocks per step.
        assert!((0..4).all(|k| bruck_step_blocks(16, k) == 8));
    }

    #[test]
    fn xor_needs_a_power_of_two() {
        assert!(xor(12, 1).unwrap_err().to_string().contains("power-of-two"));
        let s = xor(8, 1).unwrap();
        assert_eq!(s.phase(2)[5].dst, 5 ^ 3);
    }

    #[test]
    fn a2a_groups_nct_sends_per_phase() {
        let s = a2a(5, 1, 2).unwrap();
        assert_eq!(s.num_phases(), 2);
        assert_eq!(&s.phase(0)[..2], &[Message { src: 0, dst: 1, bytes: 1 }, Message { src: 0, dst: 2, bytes: 1 }]);
        assert_eq!(s.concurrent_sends(), 2);
        assert!(!s.claims_permutation());
        assert_eq!(a2a(5, 1, 1).unwrap().messages(), shift(5, 1).unwrap().messages());
    }

    #[test]
    fn theory_matches_table_1() {
        assert_eq!(a2at_theory(5).unwrap(), (40, 30, 20, 15));
        assert_eq!(a2at_theory(17).unwrap(), (1632, 1224, 816, 612));
        assert!(a2at_theory(4).is_err());
    }

    /// Bruck's data movement, block by block: rank r holds blocks keyed by (origin, final dst).
    fn bruck_delivers(n: u32) -> bool {
        let s = bruck(n, 1).unwrap();
        // After the local rotation, rank r's slot j holds the block for (r + j) mod n.
        let mut slots: Vec<Vec<(u32, u32)>> = (0..n).map(|r| (0..n).map(|j| (r, (r + j) % n)).collect()).collect();
        for (k, phase) in s.phases().enumerate() {
            let mut next = slots.clone();
            for m in phase {
                let moved = (0..n).filter(|j| j & (1 << k) != 0).count() as u64;
                assert_eq!(m.bytes, moved);
                for j in 0..n as usize {
                    if j & (1 << k) != 0 {
                        next[m.dst as usize][j] = slots[m.src as usize][j];
                    }
                }
            }
            slots = next;
        }
        // Rank r's slot j now holds the block from (r − j) addressed to r.
        (0..n).all(|r| (0..n).all(|j| slots[r as usize][j as usize] == ((r + n - j) % n, r)))
    }

    #[test]
    fn bruck_data_movement_is_exact() {
        for n in 2..=20 {
            assert!(bruck_delivers(n), "N = {n}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn every_direct_alltoall_sends_every_pair_once(n in 2u32..40, nct in 1u32..5, k0 in 1u32..5, k1 in 1u32..5, k2 in 1u32..4) {
            let mut all = vec![shift(n, 3).unwrap(), linear(n, 3).unwrap(), a2a(n, 3, nct).unwrap(), bruck(n, 3).unwrap()];
            if k0 * k1 * k2 >= 2 {
                all.push(a2and(&[k0, k1, k2], 3, nct).unwrap());
            }
            if n.is_power_of_two() {
                all.push(xor(n, 3).unwrap());
            }
            let side = 2 * (n % 6) + 3;
            all.push(a2at(&[side, side], 3, [1, 2, 4][nct as usize % 3]).unwrap());
            for s in all {
                let c = s.completeness();
                prop_assert!(c.ok(), "{}: {:?}", s.name(), c);
                prop_assert_eq!(c.complete, Some(true));
                prop_assert!(s.is_canonical());
                let per_rank = s.send_order();
                let sends = per_rank.of(0).len();
                prop_assert!(s.delivery() == Delivery::Forwarded || sends as u32 == s.num_ranks() - 1);
            }
        }
    }
}
