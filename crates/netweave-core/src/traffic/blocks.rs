//! Which *blocks* each message carries, so one schedule serves every message size.
//!
//! An MPI runtime learns the size of a call only when it is made, so a schedule generated for
//! one size must say what data each message moves, not only how many bytes. The unit is the
//! collective's **block**:
//!
//! - all-to-all: block `o·N + t` is what rank `o` sends to rank `t` (`sendcount` elements);
//! - allgather and gather: block `o` is rank `o`'s contribution.
//!
//! Barriers and custom traffic carry no blocks. The blocks of every generator are *derived*
//! from its phases, by rules that hold for each of them:
//!
//! - **direct** delivery: the message `s → d` carries block `s·N + d` (all-to-all) or `s`;
//! - **forwarded allgather / gather**: a message carries what its sender held when the phase
//!   began and its receiver did not (ring, Bruck, recursive doubling, binomial trees);
//! - **forwarded all-to-all** (Bruck): a message `s → d` with `d − s ≡ 2^k (mod N)` carries
//!   every block held by `s` whose remaining distance `(t − s) mod N` has bit `k` set.
//!
//! A derivation is accepted only when every message's bytes are its number of blocks times one
//! common block size ([`BlockLists::block_bytes`]), and the result delivers the collective, so
//! a schedule the rules do not fit is refused rather than run wrongly.
//!
//! ```
//! use netweave_core::traffic::{alltoall, blocks};
//! let s = alltoall::bruck(4, 100).unwrap();
//! let b = blocks::derive(&s).unwrap().unwrap();
//! assert_eq!(b.block_bytes, 100);
//! assert_eq!(b.of(0), &[1, 3]); // step 1: rank 0's blocks for ranks 1 and 3 (odd distances)
//! ```

use super::dag::{Dependency, TaskGraph};
use super::{Collective, Delivery, Schedule};
use crate::error::{NetweaveError, Result};

/// The blocks of every message of a schedule, flat: message `i` carries
/// `ids[offsets[i]..offsets[i + 1]]`, in increasing id order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockLists {
    /// Bytes of one block in the schedule as generated (every message is a whole number of them).
    pub block_bytes: u64,
    pub offsets: Vec<u64>,
    pub ids: Vec<u32>,
}

impl BlockLists {
    /// Blocks of message `i` (an index into [`Schedule::messages`]).
    pub fn of(&self, i: usize) -> &[u32] {
        &self.ids[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

fn refuse(s: &Schedule, why: String) -> NetweaveError {
    NetweaveError::Schedule(format!("cannot tell which blocks the messages of '{}' carry: {why}", s.name()))
}

/// Largest communicator whose all-to-all block ids fit in 32 bits.
pub const MAX_ALLTOALL_RANKS: u32 = 65_535;

/// The blocks each message of `s` carries, or `None` for a collective without blocks
/// (barrier, custom). An error says why a schedule's bytes do not fit the derivation.
pub fn derive(s: &Schedule) -> Result<Option<BlockLists>> {
    let n = s.num_ranks();
    let lists = match (s.collective(), s.delivery()) {
        (Collective::Barrier | Collective::Custom, _) => return Ok(None),
        (Collective::Alltoall, _) if n > MAX_ALLTOALL_RANKS => {
            return Err(refuse(s, format!("{n} ranks exceed the {MAX_ALLTOALL_RANKS} all-to-all block ids can name")))
        }
        (Collective::Alltoall, Delivery::Direct) => direct(s, |src, dst| src * n + dst),
        (_, Delivery::Direct) => direct(s, |src, _| src),
        (Collective::Alltoall, Delivery::Forwarded) => bruck_alltoall(s)?,
        (_, Delivery::Forwarded) => knows_difference(s),
    };
    let (offsets, ids) = lists;
    let mut block_bytes = None;
    for (i, m) in s.messages().iter().enumerate() {
        let count = offsets[i + 1] - offsets[i];
        if count == 0 {
            if m.bytes != 0 {
                return Err(refuse(
                    s,
                    format!("message {} → {} has {} bytes but carries no block", m.src, m.dst, m.bytes),
                ));
            }
            continue;
        }
        let size = *block_bytes.get_or_insert(m.bytes / count);
        if size.checked_mul(count) != Some(m.bytes) {
            return Err(refuse(
                s,
                format!("message {} → {} has {} bytes for {count} blocks of {size} bytes", m.src, m.dst, m.bytes),
            ));
        }
    }
    let lists = BlockLists { block_bytes: block_bytes.unwrap_or(0), offsets, ids };
    if s.delivery() == Delivery::Forwarded {
        check_delivers(s, &lists)?; // direct delivery moves each sender's own block: nothing to check
    }
    Ok(Some(lists))
}

type Flat = (Vec<u64>, Vec<u32>);

fn direct(s: &Schedule, id: impl Fn(u32, u32) -> u32) -> Flat {
    let offsets = (0..=s.num_messages() as u64).collect();
    (offsets, s.messages().iter().map(|m| id(m.src, m.dst)).collect())
}

/// Forwarded allgather and gather: what the sender held at the start of the phase and the
/// receiver did not.
fn knows_difference(s: &Schedule) -> Flat {
    let n = s.num_ranks() as usize;
    let words = n.div_ceil(64);
    let mut knows = vec![0u64; n * words];
    for r in 0..n {
        knows[r * words + r / 64] |= 1 << (r % 64);
    }
    let (mut offsets, mut ids) = (vec![0u64], Vec::new());
    let mut snapshot = knows.clone();
    for phase in s.phases() {
        snapshot.copy_from_slice(&knows);
        for m in phase {
            let (src, dst) = (m.src as usize, m.dst as usize);
            for w in 0..words {
                let carried = snapshot[src * words + w] & !snapshot[dst * words + w];
                knows[dst * words + w] |= carried;
                let mut bits = carried;
                while bits != 0 {
                    ids.push((w * 64) as u32 + bits.trailing_zeros());
                    bits &= bits - 1;
                }
            }
            offsets.push(ids.len() as u64);
        }
    }
    (offsets, ids)
}

/// Forwarded all-to-all by Bruck's rule: along an offset `2^k`, the held blocks whose
/// remaining distance has bit `k` set.
fn bruck_alltoall(s: &Schedule) -> Result<Flat> {
    let n = s.num_ranks();
    // held[r]: blocks at rank r not yet at their destination (block o·N + t, t ≠ r).
    let mut held: Vec<Vec<u32>> = (0..n).map(|o| (0..n).filter(|&t| t != o).map(|t| o * n + t).collect()).collect();
    let (mut offsets, mut ids) = (vec![0u64], Vec::new());
    for phase in s.phases() {
        let mut arriving: Vec<(u32, Vec<u32>)> = Vec::new();
        for m in phase {
            let step = (m.dst + n - m.src) % n;
            if !step.is_power_of_two() {
                return Err(refuse(
                    s,
                    format!("message {} → {} is not a power-of-two step of Bruck's algorithm", m.src, m.dst),
                ));
            }
            let start = ids.len();
            held[m.src as usize].retain(|&b| {
                let remaining = (b % n + n - m.src) % n;
                if remaining & step != 0 {
                    ids.push(b);
                    false
                } else {
                    true
                }
            });
            ids[start..].sort_unstable();
            arriving.push((m.dst, ids[start..].to_vec()));
            offsets.push(ids.len() as u64);
        }
        for (dst, blocks) in arriving {
            held[dst as usize].extend(blocks.into_iter().filter(|b| b % n != dst));
        }
    }
    Ok((offsets, ids))
}

/// The derived blocks of a forwarded schedule deliver the collective: every needed block
/// reaches its rank, and no message carries a block its sender does not hold at the start of
/// the phase.
fn check_delivers(s: &Schedule, lists: &BlockLists) -> Result<()> {
    let n = s.num_ranks() as usize;
    let all_to_all = s.collective() == Collective::Alltoall;
    let mut holders = Holders::new(n, all_to_all);
    for (p, phase) in s.phases().enumerate() {
        let base = s.phase_offsets()[p] as usize;
        let mut arrivals = Vec::new();
        for (k, m) in phase.iter().enumerate() {
            for &b in lists.of(base + k) {
                if !holders.holds(b, m.src) {
                    return Err(refuse(
                        s,
                        format!("in phase {p}, rank {} would send block {b} it does not hold", m.src),
                    ));
                }
                arrivals.push((b, m.dst));
            }
        }
        for (b, d) in arrivals {
            holders.add(b, d);
        }
    }
    let space = if all_to_all { n * n } else { n };
    for b in 0..space as u32 {
        let missing = match s.collective() {
            Collective::Alltoall if b as usize / n == b as usize % n => None, // a local copy
            Collective::Alltoall => Some(b % n as u32).filter(|&r| !holders.holds(b, r)),
            Collective::Gather { root } => Some(root).filter(|&r| !holders.holds(b, r)),
            _ => (0..n as u32).find(|&r| !holders.holds(b, r)),
        };
        if let Some(r) = missing {
            return Err(refuse(s, format!("block {b} never reaches rank {r}")));
        }
    }
    Ok(())
}

/// Which ranks hold each block: a short list per all-to-all block (it travels one path), a
/// bitset per allgather / gather block (it spreads to many ranks).
enum Holders {
    Paths(Vec<Vec<u32>>),
    Bits { words: usize, bits: Vec<u64> },
}

impl Holders {
    fn new(n: usize, all_to_all: bool) -> Self {
        if all_to_all {
            return Holders::Paths((0..n * n).map(|b| vec![(b / n) as u32]).collect());
        }
        let words = n.div_ceil(64);
        let mut bits = vec![0u64; n * words];
        for o in 0..n {
            bits[o * words + o / 64] |= 1 << (o % 64);
        }
        Holders::Bits { words, bits }
    }

    fn holds(&self, block: u32, rank: u32) -> bool {
        match self {
            Holders::Paths(p) => p[block as usize].contains(&rank),
            Holders::Bits { words, bits } => {
                bits[block as usize * words + rank as usize / 64] & (1 << (rank % 64)) != 0
            }
        }
    }

    fn add(&mut self, block: u32, rank: u32) {
        match self {
            Holders::Paths(p) if !p[block as usize].contains(&rank) => p[block as usize].push(rank),
            Holders::Paths(_) => {}
            Holders::Bits { words, bits } => bits[block as usize * *words + rank as usize / 64] |= 1 << (rank % 64),
        }
    }
}

/// Where each task of a DAG schedule belongs: block `block[t]` (ids as above), bytes
/// `offset[t] .. offset[t] + bytes` of it, in the DAG as generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DagBlocks {
    /// The collective the DAG turned out to deliver (all-to-all or gather).
    pub collective: Collective,
    pub block_bytes: u64,
    pub block: Vec<u32>,
    pub offset: Vec<u64>,
}

/// The blocks of a task DAG (paper 004's schedules): a task that relays carries what it
/// relays; any other task starts a piece of the block from its sender to the end of its relay
/// chain, the pieces of one block following each other in task order. `None` unless the pieces
/// add up to an all-to-all or a gather with one block size.
///
/// ```
/// use netweave_core::traffic::{blocks, dag::{Dependency, TaskGraph}, Message};
/// let mut g = TaskGraph::new("gather", 3);
/// g.add_task(Message { src: 1, dst: 0, bytes: 8 }, &[]).unwrap();
/// let a = g.add_task(Message { src: 2, dst: 1, bytes: 8 }, &[]).unwrap();
/// g.add_task(Message { src: 1, dst: 0, bytes: 8 }, &[(a, Dependency::Relay)]).unwrap();
/// let b = blocks::derive_dag(&g).unwrap();
/// assert_eq!((b.block, b.block_bytes), (vec![1, 2, 2], 8)); // rank 2's block, relayed by rank 1
/// ```
pub fn derive_dag(g: &TaskGraph) -> Option<DagBlocks> {
    let n = g.num_ranks() as u64;
    let t = g.num_tasks();
    let mut relayed_by = vec![u32::MAX; t];
    let mut relays = vec![u32::MAX; t];
    for task in 0..t as u32 {
        for &(p, kind) in g.predecessors(task) {
            if kind == Dependency::Relay {
                if relayed_by[p as usize] != u32::MAX {
                    return None; // one piece forwarded twice: not a collective's block
                }
                relayed_by[p as usize] = task;
                relays[task as usize] = p;
            }
        }
    }
    // Each piece's (origin, final destination) and its offset within that pair's data.
    let mut pair = vec![(0u32, 0u32); t];
    let mut offset = vec![0u64; t];
    let mut filled: std::collections::HashMap<(u32, u32), u64> = std::collections::HashMap::new();
    for task in 0..t {
        let m = g.task(task as u32);
        if relays[task] != u32::MAX {
            pair[task] = pair[relays[task] as usize];
            offset[task] = offset[relays[task] as usize];
            continue;
        }
        let mut end = task;
        while relayed_by[end] != u32::MAX {
            end = relayed_by[end] as usize;
        }
        pair[task] = (m.src, g.task(end as u32).dst);
        let at = filled.entry(pair[task]).or_insert(0);
        offset[task] = *at;
        *at += m.bytes;
    }
    let block_bytes = *filled.values().next()?;
    if filled.values().any(|&b| b != block_bytes) {
        return None;
    }
    let remote: Vec<&(u32, u32)> = filled.keys().filter(|(o, d)| o != d).collect();
    let to_one = remote.first().map(|&&(_, d)| d).filter(|&d| remote.iter().all(|&&(_, x)| x == d));
    let (collective, block): (Collective, Vec<u32>) =
        if remote.len() as u64 == n * (n - 1) && n <= MAX_ALLTOALL_RANKS as u64 {
            (Collective::Alltoall, pair.iter().map(|&(o, d)| o * n as u32 + d).collect())
        } else if let Some(root) = to_one.filter(|_| remote.len() as u64 == n - 1) {
            (Collective::Gather { root }, pair.iter().map(|&(o, _)| o).collect())
        } else {
            return None;
        };
    Some(DagBlocks { collective, block_bytes, block, offset })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{alltoall, collectives, lsft::FullSystemAllToAll, Message};

    fn derived(s: &Schedule) -> BlockLists {
        derive(s).unwrap_or_else(|e| panic!("{}: {e}", s.name())).expect("blocks")
    }

    #[test]
    fn every_generator_derives_with_its_block_size() {
        for n in [2u32, 3, 5, 8, 13, 16] {
            let mut all = vec![
                alltoall::shift(n, 24).unwrap(),
                alltoall::linear(n, 24).unwrap(),
                alltoall::bruck(n, 24).unwrap(),
                alltoall::a2a(n, 24, 2).unwrap(),
                collectives::allgather_ring(n, 24).unwrap(),
                collectives::allgather_bruck(n, 24).unwrap(),
                collectives::gather_linear(n, 24, n / 2).unwrap(),
                collectives::gather_binomial(n, 24, n - 1).unwrap(),
            ];
            if n.is_power_of_two() {
                all.push(alltoall::xor(n, 24).unwrap());
                all.push(collectives::allgather_recursive_doubling(n, 24).unwrap());
            }
            for s in all {
                assert_eq!(derived(&s).block_bytes, 24, "{}", s.name());
            }
        }
        assert_eq!(derived(&FullSystemAllToAll::new(3, false).unwrap().schedule(10).unwrap()).block_bytes, 10);
        let barrier = collectives::barrier_dissemination(5, 0).unwrap();
        assert_eq!(derive_dag(&crate::traffic::dag::TaskGraph::from_schedule(&barrier).unwrap()), None);
        assert_eq!(derive(&barrier).unwrap(), None);
    }

    #[test]
    fn bruck_alltoall_moves_each_block_along_the_bits_of_its_distance() {
        // Independently: block (o, t) with distance d = t − o leaves rank o + (d mod 2^k) in step k
        // when bit k of d is set.
        let n = 6u32;
        let s = alltoall::bruck(n, 8).unwrap();
        let b = derived(&s);
        for (p, phase) in s.phases().enumerate() {
            for (k, m) in phase.iter().enumerate() {
                let mut want: Vec<u32> = (1..n)
                    .filter(|d| d & (1 << p) != 0)
                    .map(|d| {
                        let o = (m.src + n - d % (1 << p)) % n;
                        o * n + (o + d) % n
                    })
                    .collect();
                want.sort_unstable();
                assert_eq!(b.of(s.phase_offsets()[p] as usize + k), want.as_slice());
            }
        }
    }

    #[test]
    fn ring_allgather_passes_on_the_block_received_last() {
        let s = collectives::allgather_ring(5, 8).unwrap();
        let b = derived(&s);
        for (p, phase) in s.phases().enumerate() {
            for (k, m) in phase.iter().enumerate() {
                assert_eq!(b.of(s.phase_offsets()[p] as usize + k), &[(m.src + 5 - p as u32) % 5]);
            }
        }
    }

    #[test]
    fn schedules_the_rules_do_not_fit_are_refused() {
        // Bytes that are not a whole number of blocks.
        let odd = Schedule::from_phases(
            "odd",
            2,
            vec![vec![Message { src: 0, dst: 1, bytes: 3 }], vec![Message { src: 1, dst: 0, bytes: 5 }]],
        )
        .unwrap()
        .with_collective(Collective::Alltoall, Delivery::Direct);
        assert!(derive(&odd).unwrap_err().to_string().contains("blocks of 3 bytes"));
        // A forwarded all-to-all that is not Bruck's.
        let three = Schedule::from_phases(
            "hop3",
            4,
            vec![(0..4).map(|s| Message { src: s, dst: (s + 3) % 4, bytes: 8 }).collect()],
        )
        .unwrap()
        .with_collective(Collective::Alltoall, Delivery::Forwarded);
        assert!(derive(&three).unwrap_err().to_string().contains("power-of-two"));
        // An incomplete forwarded gather.
        let short = Schedule::from_phases("short", 3, vec![vec![Message { src: 1, dst: 0, bytes: 8 }]])
            .unwrap()
            .with_collective(Collective::Gather { root: 0 }, Delivery::Forwarded);
        assert!(derive(&short).unwrap_err().to_string().contains("never reaches rank 0"));
    }
}
