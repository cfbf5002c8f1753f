//! The user's MPI as a candidate: which algorithm Open MPI 4.1 and MPICH 4.0 pick for
//! `MPI_Alltoall`, `MPI_Allgather` and `MPI_Gather` by default, and that algorithm as a
//! schedule, so a plan can say what the program takes today.
//!
//! The decision rules are the libraries' defaults as Debian 12 ships them (Open MPI 4.1.4,
//! MPICH 4.0.2 with the `ch4:ucx` device), for a communicator of `N` ranks on separate hosts
//! and contiguous buffers (no `MPI_IN_PLACE`):
//!
//! - **Open MPI** runs the `tuned` component over `tcp`/`vader`, whose fixed decision functions
//!   pick an algorithm from tables indexed by communicator size and the bytes of one rank's
//!   block. The tables are transcribed in [`OPEN_MPI_ALLTOALL`], [`OPEN_MPI_ALLGATHER`] and
//!   [`OPEN_MPI_GATHER`]. Fallbacks inside the algorithms are applied as the library applies
//!   them: recursive doubling on a non-power-of-two `N` runs Bruck, neighbour exchange on an
//!   odd `N` runs the ring. `linear_sync` with the default `max_requests` of 0 posts every
//!   request at once, as `basic_linear` does; above the TCP eager limit each rank's messages
//!   move in an order of its own ([`all_at_once_alltoall_in_unrelated_orders`]).
//! - **MPICH** selects through its built-in JSON tree (`coll/mpir/generic.json`): all-to-all
//!   Bruck up to 256 bytes per pair when `N ≥ 8`, "scattered" up to 32 KiB (requests posted in
//!   blocks of `MPIR_CVAR_ALLTOALL_THROTTLE` = 32 destinations, the rank itself included, with
//!   a wait at the end of each block), pairwise above (XOR pairs on a power-of-two `N`);
//!   allgather recursive doubling on a power-of-two `N` below 512 KiB in all, Bruck below
//!   80 KiB, ring otherwise; gather always the binomial tree.
//!
//! Every schedule is meant to run with the flow model's `local-sync` executor and the
//! schedule's [`concurrent_sends`](Schedule::concurrent_sends) (see [`EXECUTOR`]): a step is
//! `concurrent_sends` phases, a rank starts it once its previous step's sends have left and its
//! receives have arrived — `MPI_Sendrecv` per step for pairwise, Bruck, ring and the trees, one
//! `MPI_Waitall` over every request for the linear algorithms, one per block for MPICH's
//! scattered all-to-all.
//!
//! The posting orders above were read in the libraries' sources (Open MPI 4.1
//! `coll_base_alltoall.c`, `coll_base_gather.c`; MPICH 4.0 `alltoall_intra_scattered.c`,
//! `alltoall_intra_pairwise.c`, `gather_intra_binomial.c`) and are pinned by this module's
//! tests. What the schedules leave out, and what it costs on the emulated cluster
//! (`benches/native_mpi_fidelity.py`, figures in `docs/plan.md`):
//!
//! - **The transports' rendezvous.** Above Open MPI's TCP eager limit (64 KiB,
//!   `btl_tcp_eager_limit`) a message sends its first fragment and waits for the receiver's
//!   acknowledgement before the rest; above UCX's rendezvous threshold MPICH's message waits
//!   for the receiver before any data. The acknowledgement is a message from receiver to
//!   sender, which a schedule claiming its collective (every pair exactly once, a gather's
//!   sends only to the root) cannot hold; it needs a task graph. It costs a round trip per
//!   message (linear) or per step (pairwise, the trees): little on the emulated fabric, which
//!   has no link latency, except for MPICH, whose handshakes wait for busy-polling ranks
//!   (below) — without rendezvous its pairwise all-to-all on 8 hosts took 30 ms less per
//!   step at 128 KiB.
//! - **The host's CPU.** MPICH 4.0.2's `ch4:ucx` progress engine busy-polls while it waits and
//!   has no setting to yield, so on a machine where ranks share cores (the emulation: every
//!   rank on two cores) they take turns and every hop waits for the scheduler: a one-byte
//!   gather costs MPICH 11, 41 and 128 ms on 4, 8 and 16 ranks against Open MPI's 0.6–3 ms
//!   (run with `mpi_yield_when_idle`), and MPICH's pairwise all-to-all measures 2.1–23× its
//!   prediction with no packet dropped. A cluster with a core per rank does not pay it; it
//!   belongs to the emulation's calibration, not to a schedule.
//! - **Losses** are the flow model's: Open MPI's linear all-to-all puts N − 1 flows on every
//!   port at once, as the schedule says, and what they lose is charged by the Ethernet model
//!   (`flowsim`), not here.
//! - Open MPI's linear gathers (chosen below 8 ranks only) are modelled as every sender at
//!   once, although `linear_sync` has the root release each sender in rank order with a
//!   zero-byte message and wait for its first segment before the next (again a message no
//!   gather schedule holds) and `basic_linear`'s root receives in rank order, which
//!   serialises messages above the eager limit; the two-process algorithms are one exchange.
//!
//! ```
//! use netweave_core::traffic::native_mpi::{decide, schedule, Library};
//! assert_eq!(decide(Library::OpenMpi, "alltoall", 28, 1 << 20).unwrap(), "linear_sync");
//! assert_eq!(decide(Library::Mpich, "alltoall", 28, 1 << 20).unwrap(), "pairwise");
//! let s = schedule(Library::Mpich, "alltoall", 28, 16384, 0).unwrap();
//! assert_eq!(s.concurrent_sends(), 32);          // scattered: one block of requests
//! assert!(s.check_complete().is_ok());
//! ```

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::io::ExecutorHint;
use super::{alltoall, collectives, Collective, Delivery, Message, Schedule};
use crate::error::Result;
use crate::invalid;

/// The flow executor every native schedule runs with (its steps are `concurrent_sends` phases).
pub const EXECUTOR: ExecutorHint = ExecutorHint::LocalSync;

/// Open MPI's TCP eager limit (`btl_tcp_eager_limit`, 64 KiB): a larger message sends its first
/// fragment and waits for the receiver's acknowledgement before the rest.
pub const OPEN_MPI_EAGER_LIMIT: u64 = 65536;

/// The seed of the orders in which Open MPI's linear all-to-all moves its messages above the
/// eager limit ([`all_at_once_alltoall_in_unrelated_orders`]).
pub const RENDEZVOUS_ORDER_SEED: u64 = 0;

/// Requests MPICH's scattered all-to-all posts per block (`MPIR_CVAR_ALLTOALL_THROTTLE`'s default).
pub const MPICH_ALLTOALL_THROTTLE: u32 = 32;

/// An MPI library whose default collectives are modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Library {
    OpenMpi,
    Mpich,
}

impl Library {
    /// Every library, in listing order.
    pub const ALL: [Library; 2] = [Library::OpenMpi, Library::Mpich];

    /// The name used on the command line and in files: `openmpi` or `mpich`.
    pub fn name(self) -> &'static str {
        match self {
            Library::OpenMpi => "openmpi",
            Library::Mpich => "mpich",
        }
    }

    /// The library and version whose defaults are modelled, for reports.
    pub fn label(self) -> &'static str {
        match self {
            Library::OpenMpi => "Open MPI 4.1.4",
            Library::Mpich => "MPICH 4.0.2",
        }
    }

    /// The inverse of [`name`](Self::name).
    pub fn from_name(name: &str) -> Result<Library> {
        match Library::ALL.iter().find(|l| l.name() == name) {
            Some(l) => Ok(*l),
            None => invalid!("unknown MPI library '{name}' (known: openmpi, mpich)"),
        }
    }
}

/// One row of an Open MPI decision table: communicator sizes below `below_ranks` use the first
/// `(below_bytes, algorithm)` entry whose bound exceeds the block size, else `otherwise`.
pub struct TableRow {
    pub below_ranks: u32,
    pub by_bytes: &'static [(u64, u8)],
    pub otherwise: u8,
}

const fn row(below_ranks: u32, by_bytes: &'static [(u64, u8)], otherwise: u8) -> TableRow {
    TableRow { below_ranks, by_bytes, otherwise }
}

/// `ompi_coll_tuned_alltoall_intra_dec_fixed` (4.1.4): 1 linear, 2 pairwise, 3 modified Bruck,
/// 4 linear_sync, 5 two_proc. The first row is the `N == 2` special case.
pub const OPEN_MPI_ALLTOALL: &[TableRow] = &[
    row(3, &[(2, 2), (4, 5), (16, 2), (64, 5), (256, 2), (4096, 5), (32768, 2), (262144, 4), (1048576, 5)], 2),
    row(8, &[(8192, 4), (16384, 1), (65536, 4), (524288, 1), (1048576, 2)], 1),
    row(16, &[(262144, 4)], 1),
    row(32, &[(4, 4), (512, 3), (8192, 4), (32768, 1), (262144, 4), (524288, 1)], 4),
    row(64, &[(512, 3), (524288, 1)], 4),
    row(128, &[(1024, 3), (2048, 1), (4096, 4), (262144, 1)], 2),
    row(256, &[(1024, 3), (2048, 4), (262144, 1)], 2),
    row(512, &[(1024, 3), (8192, 4), (32768, 1)], 2),
    row(1024, &[(512, 3), (8192, 4), (16384, 1), (131072, 4), (262144, 1)], 2),
    row(2048, &[(512, 3), (1024, 4), (2048, 1), (16384, 4), (262144, 1)], 4),
    row(4096, &[(1024, 3), (4096, 4), (8192, 1), (131072, 4)], 1),
    row(u32::MAX, &[(2048, 3), (8192, 4), (16384, 1), (32768, 4), (65536, 1)], 4),
];

/// `ompi_coll_tuned_allgather_intra_dec_fixed` (4.1.4): 2 Bruck, 3 recursive doubling,
/// 4 ring, 5 neighbour exchange, 6 two_proc (1, linear, is never chosen).
pub const OPEN_MPI_ALLGATHER: &[TableRow] = &[
    row(3, &[], 6),
    row(32, &[], 3),
    row(64, &[(1024, 3), (65536, 5)], 4),
    row(128, &[(512, 3), (65536, 5)], 4),
    row(256, &[(512, 3), (131072, 5), (524288, 4), (1048576, 5)], 4),
    row(512, &[(32, 3), (128, 2), (1024, 3), (131072, 5), (524288, 4), (1048576, 5)], 4),
    row(1024, &[(64, 3), (256, 2), (2048, 3)], 5),
    row(2048, &[(4, 3), (8, 2), (16, 3), (32, 2), (256, 3), (512, 2), (4096, 3)], 5),
    row(4096, &[(32, 2), (128, 3), (512, 2), (4096, 3)], 5),
    row(u32::MAX, &[(2, 3), (8, 2), (16, 3), (512, 2), (4096, 3)], 5),
];

/// `ompi_coll_tuned_gather_intra_dec_fixed` (4.1.4): 1 basic_linear, 2 binomial, 3 linear_sync.
pub const OPEN_MPI_GATHER: &[TableRow] = &[
    row(4, &[(2, 3), (4, 1), (32768, 2), (65536, 1), (131072, 2)], 3),
    row(8, &[(1024, 2), (8192, 1), (32768, 2), (262144, 1)], 3),
    row(256, &[], 2),
    row(512, &[(2048, 2), (8192, 1)], 2),
    row(u32::MAX, &[], 2),
];

fn lookup(table: &[TableRow], num_ranks: u32, bytes: u64) -> u8 {
    let row = table.iter().find(|r| num_ranks < r.below_ranks).unwrap_or(&table[table.len() - 1]);
    row.by_bytes.iter().find(|(below, _)| bytes < *below).map_or(row.otherwise, |(_, a)| *a)
}

/// The algorithm `library` runs by default for `collective` (`alltoall`, `allgather`,
/// `gather`) on `num_ranks` ranks with `bytes` per block (per pair for all-to-all), by the
/// library's own name — after the fallbacks the algorithm itself applies.
pub fn decide(library: Library, collective: &str, num_ranks: u32, bytes: u64) -> Result<&'static str> {
    if num_ranks < 2 {
        return invalid!("a native {collective} needs at least 2 ranks, got {num_ranks}");
    }
    let n = num_ranks;
    Ok(match (library, collective) {
        (Library::OpenMpi, "alltoall") => match lookup(OPEN_MPI_ALLTOALL, n, bytes) {
            1 => "basic_linear",
            2 => "pairwise",
            3 => "modified_bruck",
            4 => "linear_sync",
            _ => "two_proc",
        },
        (Library::OpenMpi, "allgather") => match lookup(OPEN_MPI_ALLGATHER, n, bytes) {
            2 => "bruck",
            3 if n.is_power_of_two() => "recursive_doubling",
            3 => "bruck",
            4 => "ring",
            5 if n % 2 == 0 => "neighbor_exchange",
            5 => "ring",
            _ => "two_proc",
        },
        (Library::OpenMpi, "gather") => match lookup(OPEN_MPI_GATHER, n, bytes) {
            1 => "basic_linear",
            2 => "binomial",
            _ => "linear_sync",
        },
        (Library::Mpich, "alltoall") => {
            if n >= 8 && bytes <= 256 {
                "brucks"
            } else if bytes <= 32768 {
                "scattered"
            } else {
                "pairwise"
            }
        }
        (Library::Mpich, "allgather") => {
            let total = bytes.saturating_mul(u64::from(n));
            if n.is_power_of_two() && total < 524288 {
                "recursive_doubling"
            } else if !n.is_power_of_two() && total < 81920 {
                "brucks"
            } else {
                "ring"
            }
        }
        (Library::Mpich, "gather") => "binomial",
        (_, other) => {
            return invalid!("native algorithms are modelled for alltoall, allgather and gather, not '{other}'")
        }
    })
}

/// Whether `library`'s default `collective` on `num_ranks` ranks at `bytes` per block pairs its
/// ranks by XOR (MPICH's pairwise all-to-all on a power-of-two `N`: partners swap blocks with
/// each other in one step) rather than by shift (rank `r` sends to `r + i`, receives from `r − i`).
/// The two cost the hosts differently, so a calibration keeps a cost for each.
///
/// ```
/// use netweave_core::traffic::native_mpi::{pairs_by_xor, Library};
/// assert!(pairs_by_xor(Library::Mpich, "alltoall", 16, 1 << 20).unwrap());
/// assert!(!pairs_by_xor(Library::Mpich, "alltoall", 15, 1 << 20).unwrap());
/// assert!(!pairs_by_xor(Library::OpenMpi, "alltoall", 16, 1 << 20).unwrap());
/// ```
pub fn pairs_by_xor(library: Library, collective: &str, num_ranks: u32, bytes: u64) -> Result<bool> {
    let algorithm = decide(library, collective, num_ranks, bytes)?;
    Ok(library == Library::Mpich && collective == "alltoall" && algorithm == "pairwise" && num_ranks.is_power_of_two())
}

/// The algorithm [`decide`] names, as a schedule of `num_ranks` ranks on hosts `0..num_ranks`
/// with `bytes` per block; `root` is the gather's root. Named `<collective>-<library>-<algorithm>`;
/// its [`concurrent_sends`](Schedule::concurrent_sends) is what the [`EXECUTOR`] needs.
pub fn schedule(library: Library, collective: &str, num_ranks: u32, bytes: u64, root: u32) -> Result<Schedule> {
    let algorithm = decide(library, collective, num_ranks, bytes)?;
    let n = num_ranks;
    let built = match (collective, algorithm) {
        ("alltoall", "basic_linear" | "linear_sync") if bytes > OPEN_MPI_EAGER_LIMIT => {
            all_at_once_alltoall_in_unrelated_orders(n, bytes, RENDEZVOUS_ORDER_SEED)?
        }
        ("alltoall", "basic_linear" | "linear_sync") => all_at_once_alltoall(n, bytes)?,
        ("alltoall", "pairwise") if pairs_by_xor(library, collective, n, bytes)? => alltoall::xor(n, bytes)?,
        ("alltoall", "pairwise" | "two_proc") => alltoall::shift(n, bytes)?,
        ("alltoall", "modified_bruck" | "brucks") => alltoall::bruck(n, bytes)?,
        ("alltoall", "scattered") => scattered_alltoall(n, bytes)?,
        ("allgather", "recursive_doubling") => collectives::allgather_recursive_doubling(n, bytes)?,
        ("allgather", "bruck" | "brucks") => collectives::allgather_bruck(n, bytes)?,
        ("allgather", "ring" | "two_proc") => collectives::allgather_ring(n, bytes)?,
        ("allgather", "neighbor_exchange") => allgather_neighbor_exchange(n, bytes)?,
        ("gather", "binomial") => collectives::gather_binomial(n, bytes, root)?,
        ("gather", _) => collectives::gather_linear(n, bytes, root)?,
        (c, a) => return invalid!("{} {c} algorithm '{a}' has no schedule", library.label()),
    };
    let name = format!("{collective}-{}-{algorithm}(N={n})", library.name());
    Ok(built.with_name(name))
}

/// Every rank posts all its receives and sends at once and waits for them all (Open MPI's
/// `basic_linear` and `linear_sync` with no request limit): rank `S` sends to `S − 1`, `S − 2`,
/// … in that order, all in flight together.
pub fn all_at_once_alltoall(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    if num_ranks < 2 {
        return invalid!("an all-to-all needs at least 2 ranks, got {num_ranks}");
    }
    let n = num_ranks;
    let phases = (1..n).map(|i| (0..n).map(|s| Message { src: s, dst: (s + n - i) % n, bytes }).collect()).collect();
    Schedule::from_phases(format!("alltoall-all-at-once(N={n})"), n, phases)?
        .with_collective(Collective::Alltoall, Delivery::Direct)
        .with_permutation_claim(true)
        .with_concurrent_sends(n - 1)
}

/// Open MPI's linear all-to-all above its eager limit: every request posted at once as in
/// [`all_at_once_alltoall`], but each rank's messages move in an order of its own, drawn from
/// `seed`. Each message's data waits for its receiver's acknowledgement, and the TCP transport
/// then drains its peers' queues as their sockets take data, not in posting order: on the
/// emulated 16-host star (lossless) the call measured 1.7× the bound at 128 KiB and 1 MiB, as
/// unrelated orders predict, where its eager 16 KiB call, in posting order, measured 1.08×
/// (docs/plan.md, "Posting orders").
///
/// ```
/// use netweave_core::traffic::native_mpi::all_at_once_alltoall_in_unrelated_orders;
/// let s = all_at_once_alltoall_in_unrelated_orders(6, 1 << 20, 0).unwrap();
/// assert!(s.check_complete().is_ok());
/// assert_eq!((s.num_phases(), s.concurrent_sends()), (5, 5));
/// ```
pub fn all_at_once_alltoall_in_unrelated_orders(num_ranks: u32, bytes: u64, seed: u64) -> Result<Schedule> {
    if num_ranks < 2 {
        return invalid!("an all-to-all needs at least 2 ranks, got {num_ranks}");
    }
    let n = num_ranks;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let orders: Vec<Vec<u32>> = (0..n)
        .map(|s| {
            let mut order: Vec<u32> = (1..n).map(|i| (s + n - i) % n).collect();
            order.shuffle(&mut rng);
            order
        })
        .collect();
    let phases = (0..(n - 1) as usize)
        .map(|i| (0..n).map(|s| Message { src: s, dst: orders[s as usize][i], bytes }).collect())
        .collect();
    Schedule::from_phases(format!("alltoall-all-at-once-unrelated(N={n})"), n, phases)?
        .with_collective(Collective::Alltoall, Delivery::Direct)
        .with_concurrent_sends(n - 1)
}

/// MPICH's scattered all-to-all: destinations `S − i` for `i = 0 … N−1` (the rank itself at
/// `i = 0`, a local copy) in blocks of [`MPICH_ALLTOALL_THROTTLE`], every request of a block
/// posted at once, a wait at the end of each block. Phase `i` is offset `i`, so the first phase
/// is empty and the executor's steps of 32 phases are MPICH's blocks.
pub fn scattered_alltoall(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    if num_ranks < 2 {
        return invalid!("an all-to-all needs at least 2 ranks, got {num_ranks}");
    }
    let n = num_ranks;
    let phases = (0..n)
        .map(|i| {
            if i == 0 {
                Vec::new()
            } else {
                (0..n).map(|s| Message { src: s, dst: (s + n - i) % n, bytes }).collect()
            }
        })
        .collect();
    Schedule::from_phases(format!("alltoall-scattered(N={n})"), n, phases)?
        .with_collective(Collective::Alltoall, Delivery::Direct)
        .with_permutation_claim(true)
        .with_concurrent_sends(MPICH_ALLTOALL_THROTTLE)
}

/// Open MPI's neighbour-exchange allgather (even N): N/2 steps; in step 0 even rank `S`
/// exchanges its block with `S + 1`, then ranks alternate between their two neighbours passing
/// on the two blocks received last.
pub fn allgather_neighbor_exchange(num_ranks: u32, bytes: u64) -> Result<Schedule> {
    let n = num_ranks;
    if n < 2 || n % 2 == 1 {
        return invalid!("neighbour-exchange allgather needs an even number of ranks, got {n}");
    }
    // neighbour[0] and neighbour[1] of each rank, as Open MPI numbers them.
    let neighbour = |s: u32, parity: u32| {
        let right = (s + 1) % n;
        let left = (s + n - 1) % n;
        match (s % 2 == 0, parity) {
            (true, 0) | (false, 1) => right,
            _ => left,
        }
    };
    let phases = (0..n / 2)
        .map(|step| {
            let blocks = if step == 0 { 1 } else { 2 };
            (0..n)
                .map(|s| Message { src: s, dst: neighbour(s, step % 2), bytes: bytes.saturating_mul(blocks) })
                .collect()
        })
        .collect();
    Ok(Schedule::from_phases(format!("allgather-neighbor-exchange(N={n})"), n, phases)?
        .with_collective(Collective::Allgather, Delivery::Forwarded)
        .with_permutation_claim(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_mpi_tables_follow_the_source() {
        // Spot checks against ompi_coll_tuned_*_intra_dec_fixed of 4.1.4.
        assert_eq!(decide(Library::OpenMpi, "alltoall", 2, 100_000).unwrap(), "linear_sync");
        assert_eq!(decide(Library::OpenMpi, "alltoall", 16, 16384).unwrap(), "basic_linear");
        assert_eq!(decide(Library::OpenMpi, "alltoall", 16, 100).unwrap(), "modified_bruck");
        assert_eq!(decide(Library::OpenMpi, "alltoall", 100, 1 << 20).unwrap(), "pairwise");
        assert_eq!(decide(Library::OpenMpi, "alltoall", 5000, 1 << 20).unwrap(), "linear_sync");
        assert_eq!(decide(Library::OpenMpi, "allgather", 16, 1 << 20).unwrap(), "recursive_doubling");
        assert_eq!(decide(Library::OpenMpi, "allgather", 28, 1 << 20).unwrap(), "bruck");
        assert_eq!(decide(Library::OpenMpi, "allgather", 40, 4096).unwrap(), "neighbor_exchange");
        assert_eq!(decide(Library::OpenMpi, "allgather", 41, 4096).unwrap(), "ring");
        assert_eq!(decide(Library::OpenMpi, "gather", 28, 1 << 20).unwrap(), "binomial");
        assert_eq!(decide(Library::OpenMpi, "gather", 6, 1 << 20).unwrap(), "linear_sync");
    }

    #[test]
    fn mpich_rules_follow_its_json() {
        assert_eq!(decide(Library::Mpich, "alltoall", 8, 256).unwrap(), "brucks");
        assert_eq!(decide(Library::Mpich, "alltoall", 7, 256).unwrap(), "scattered");
        assert_eq!(decide(Library::Mpich, "alltoall", 16, 32768).unwrap(), "scattered");
        assert_eq!(decide(Library::Mpich, "alltoall", 16, 32769).unwrap(), "pairwise");
        assert_eq!(decide(Library::Mpich, "allgather", 16, 32767).unwrap(), "recursive_doubling");
        assert_eq!(decide(Library::Mpich, "allgather", 16, 32768).unwrap(), "ring");
        assert_eq!(decide(Library::Mpich, "allgather", 28, 2925).unwrap(), "brucks");
        assert_eq!(decide(Library::Mpich, "gather", 3, 1).unwrap(), "binomial");
        assert!(decide(Library::Mpich, "barrier", 4, 8).unwrap_err().to_string().contains("not 'barrier'"));
    }

    #[test]
    fn every_choice_builds_a_complete_schedule() {
        for library in Library::ALL {
            for collective in ["alltoall", "allgather", "gather"] {
                for n in [2u32, 3, 5, 6, 8, 16, 28, 40, 52, 64] {
                    for bytes in [1u64, 200, 4096, 16384, 131072, 1 << 20] {
                        let s = schedule(library, collective, n, bytes, n / 2)
                            .unwrap_or_else(|e| panic!("{library:?} {collective} {n} {bytes}: {e}"));
                        assert!(s.check_complete().is_ok(), "{}: {:?}", s.name(), s.completeness());
                        assert_eq!(s.num_ranks(), n);
                    }
                }
            }
        }
    }

    #[test]
    fn linear_and_scattered_keep_their_requests_in_flight() {
        let linear = schedule(Library::OpenMpi, "alltoall", 16, 16384, 0).unwrap();
        assert_eq!((linear.concurrent_sends(), linear.num_phases()), (15, 15));
        assert_eq!(linear.phase(0)[0].dst, 15); // rank 0 sends to rank N−1 first
        let scattered = scattered_alltoall(40, 8).unwrap();
        // Blocks of 32 offsets: 0..31 (0 is the local copy) then 32..39.
        assert_eq!((scattered.num_phases(), scattered.phase(0).len(), scattered.concurrent_sends()), (40, 0, 32));
        let xor = schedule(Library::Mpich, "alltoall", 16, 1 << 20, 0).unwrap();
        assert!(
            xor.name().starts_with("alltoall-mpich-pairwise") && xor.phase(0)[0].dst == 1 && xor.phase(0)[1].dst == 0
        );
    }

    /// The destinations `rank` sends to, phase by phase (empty phases skipped).
    fn sends_of(s: &Schedule, rank: u32) -> Vec<u32> {
        (0..s.num_phases())
            .flat_map(|p| s.phase(p).iter().filter(|m| m.src == rank).map(|m| m.dst).collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn posting_orders_follow_the_sources() {
        // Open MPI 4.1 `alltoall_intra_linear_sync` / `basic_linear`: sends to rank−1, rank−2, …
        let linear = schedule(Library::OpenMpi, "alltoall", 5, 16384, 0).unwrap();
        assert_eq!(sends_of(&linear, 2), [1, 0, 4, 3]);
        // MPICH 4.0 `alltoall_intra_scattered`: dst = rank − i − ii; one block of 32 for N = 5.
        let scattered = schedule(Library::Mpich, "alltoall", 5, 16384, 0).unwrap();
        assert_eq!((sends_of(&scattered, 2), scattered.concurrent_sends()), (vec![1, 0, 4, 3], 32));
        // MPICH `alltoall_intra_pairwise`: dst = rank + i off powers of two, rank xor i on them.
        assert_eq!(sends_of(&schedule(Library::Mpich, "alltoall", 6, 1 << 20, 0).unwrap(), 2), [3, 4, 5, 0, 1]);
        assert_eq!(sends_of(&schedule(Library::Mpich, "alltoall", 8, 1 << 20, 0).unwrap(), 2), [3, 0, 1, 6, 7, 4, 5]);
        // Above the eager limit the same sends move in an order of each rank's own.
        let rendezvous = schedule(Library::OpenMpi, "alltoall", 16, 1 << 17, 0).unwrap();
        let orders: Vec<Vec<u32>> = (0..16).map(|r| sends_of(&rendezvous, r)).collect();
        for (rank, order) in orders.iter().enumerate() {
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..16).filter(|&d| d != rank as u32).collect::<Vec<_>>());
        }
        assert!(orders.iter().enumerate().any(|(r, o)| o[0] != (r as u32 + 15) % 16));
        assert_eq!(rendezvous.concurrent_sends(), 15);
        // Open MPI's pairwise has no XOR variant: sendto = rank + step on 128 ranks too.
        let pairwise = schedule(Library::OpenMpi, "alltoall", 128, 1 << 20, 0).unwrap();
        assert_eq!(sends_of(&pairwise, 2)[..4], [3, 4, 5, 6]);
        // Both libraries' binomial gather on 6 ranks to root 0: 1→0, 3→2, 5→4 one block each,
        // then 2→0 with two blocks, then 4→0 with the two of 4 and 5; one step per phase.
        let gather = schedule(Library::Mpich, "gather", 6, 10, 0).unwrap();
        let phases: Vec<Vec<(u32, u32, u64)>> = (0..gather.num_phases())
            .map(|p| gather.phase(p).iter().map(|m| (m.src, m.dst, m.bytes)).collect())
            .collect();
        assert_eq!(phases, [vec![(1, 0, 10), (3, 2, 10), (5, 4, 10)], vec![(2, 0, 20)], vec![(4, 0, 20)]]);
        assert_eq!(gather.concurrent_sends(), 1);
    }

    #[test]
    fn neighbour_exchange_alternates_and_doubles() {
        let s = allgather_neighbor_exchange(6, 10).unwrap();
        assert_eq!(s.num_phases(), 3);
        assert_eq!(s.phase(0)[0], Message { src: 0, dst: 1, bytes: 10 });
        assert_eq!(s.phase(1)[0], Message { src: 0, dst: 5, bytes: 20 });
        assert_eq!(s.phase(1)[1], Message { src: 1, dst: 2, bytes: 20 });
        assert!(allgather_neighbor_exchange(5, 10).is_err());
    }
}
