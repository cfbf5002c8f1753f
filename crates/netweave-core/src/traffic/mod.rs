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
//! assert!(s.check_complete().is_ok());        // every ordered pair once, every phase a permutation
//! ```
//!
//! Besides its phases a schedule says what it claims to be, so that every evaluator can check
//! it: the [`Collective`] it implements, whether messages go straight to their final
//! destination or ranks forward data received earlier ([`Delivery`]), whether each phase is a
//! permutation, and how many sends a rank keeps in flight when an asynchronous executor runs
//! it (the NCT of paper 001). [`Schedule::send_order`] gives each rank's sends in the order it
//! issues them; asynchronous executors drain that list instead of waiting for phase barriers.
//!
//! The phase form is one of two schedule forms: a dependency DAG of tasks (paper 004) lives
//! beside it and can be built from a schedule's send order; the files in [`io`] carry a
//! `form` field so that a later version can hold either.
//!
//! [`catalog`] lists every algorithm by name and builds it for a job. Generators: [`alltoall`] (shift, linear, XOR, Bruck, A2A, A2AND, A2AT), [`collectives`]
//! (allgather, gather, barrier), [`lsft`] (paper 000's Latin-square fat-tree all-to-alls);
//! [`alloc`] places a job's ranks on a subset of hosts.

pub mod alloc;
pub mod alltoall;
pub mod blocks;
pub mod catalog;
pub mod collectives;
pub mod contention_free;
pub mod dag;
pub mod io;
pub mod lsft;
pub mod native_mpi;
pub mod phase_groups;
pub mod synthetic;
pub mod tree_phased;

use serde::{Deserialize, Serialize};

use crate::error::{NetweaveError, Result};
use crate::topology::Topology;

/// One point-to-point transfer between ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
}

/// The collective operation a schedule implements; it decides what [`Schedule::completeness`]
/// checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Collective {
    /// Every rank sends a distinct block to every other rank.
    Alltoall,
    /// Every rank ends up with every rank's block.
    Allgather,
    /// The root ends up with every rank's block.
    Gather { root: u32 },
    /// No rank leaves before every rank has arrived: an allgather of empty tokens.
    Barrier,
    /// No collective claimed (hand-made or synthetic traffic); nothing to check.
    Custom,
}

impl Collective {
    /// Lower-case name used in files and on the command line (`alltoall`, `gather`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Collective::Alltoall => "alltoall",
            Collective::Allgather => "allgather",
            Collective::Gather { .. } => "gather",
            Collective::Barrier => "barrier",
            Collective::Custom => "custom",
        }
    }

    /// The inverse of [`name`](Self::name); `root` is used by `gather` only.
    pub fn from_name(name: &str, root: u32) -> Result<Self> {
        Ok(match name {
            "alltoall" => Collective::Alltoall,
            "allgather" => Collective::Allgather,
            "gather" => Collective::Gather { root },
            "barrier" => Collective::Barrier,
            "custom" => Collective::Custom,
            other => {
                return crate::invalid!(
                    "unknown collective '{other}' (known: alltoall, allgather, gather, barrier, custom)"
                )
            }
        })
    }
}

/// How data reaches its final destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Delivery {
    /// Every message goes straight from the rank that owns the data to the rank that needs it,
    /// so an all-to-all sends each ordered pair exactly once (shift, XOR, A2AT, linear gather).
    Direct,
    /// Ranks pass on data they received in earlier phases (Bruck, ring, trees, barriers); the
    /// check follows what each rank can know, phase by phase.
    Forwarded,
}

impl Delivery {
    /// `direct` or `forwarded`.
    pub fn name(&self) -> &'static str {
        match self {
            Delivery::Direct => "direct",
            Delivery::Forwarded => "forwarded",
        }
    }

    /// The inverse of [`name`](Self::name).
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "direct" => Ok(Delivery::Direct),
            "forwarded" => Ok(Delivery::Forwarded),
            other => crate::invalid!("unknown delivery '{other}' (known: direct, forwarded)"),
        }
    }
}

/// Phases of messages between `num_ranks` ranks, where each rank runs, and what the schedule
/// claims to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    name: String,
    num_ranks: u32,
    /// Host index of each rank.
    placement: Vec<u32>,
    messages: Vec<Message>,
    /// Phase `p` is `messages[phase_offsets[p]..phase_offsets[p + 1]]`.
    phase_offsets: Vec<u32>,
    collective: Collective,
    delivery: Delivery,
    /// Every phase is a (partial) permutation: no rank sends or receives twice in it.
    claims_permutation: bool,
    /// Sends a rank keeps in flight when executed asynchronously (paper 001's NCT).
    concurrent_sends: u32,
}

/// Each rank's messages in the order it handles them, as indices into the schedule's flat
/// message array (phase order, then order within the phase). Built by
/// [`Schedule::send_order`] and [`Schedule::receive_order`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerRank {
    /// Rank `r`'s entries are `messages[offsets[r]..offsets[r + 1]]`.
    pub offsets: Vec<u32>,
    /// Message indices (see [`Schedule::message`]).
    pub messages: Vec<u32>,
}

impl PerRank {
    /// Message indices of rank `r`, in order.
    pub fn of(&self, rank: u32) -> &[u32] {
        &self.messages[self.offsets[rank as usize] as usize..self.offsets[rank as usize + 1] as usize]
    }
}

/// Outcome of [`Schedule::completeness`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Completeness {
    /// Does the schedule deliver what its collective needs? `None` for [`Collective::Custom`].
    pub complete: Option<bool>,
    /// Is every phase a permutation? `None` when the schedule does not claim it.
    pub permutation: Option<bool>,
    /// Direct delivery: required (src, dst) pairs never sent. Forwarded: (rank, origin) pairs
    /// whose data never reaches the rank.
    pub missing: u64,
    /// Direct delivery: required pairs sent more than once (counted once per extra copy).
    pub duplicated: u64,
    /// Messages the collective has no use for (self-sends; in a direct gather, any message
    /// not addressed to the root).
    pub unexpected: u64,
    /// Phases where some rank sends or receives more than once (when permutations are claimed).
    pub non_permutation_phases: u64,
    /// The first problem found, as one line.
    pub first_problem: Option<String>,
}

impl Completeness {
    /// True when every claim the schedule makes holds (vacuously true for custom traffic).
    pub fn ok(&self) -> bool {
        self.complete != Some(false) && self.permutation != Some(false)
    }
}

/// Refuse, before anything is built, a schedule of `messages` messages that would not fit the
/// memory budget (its phases, the flat copy and the per-rank orders evaluators build).
pub fn ensure_fits(name: &str, messages: u128) -> Result<()> {
    let per_message = 3 * std::mem::size_of::<Message>() as u128;
    crate::budget::ensure(&format!("{name} with {messages} messages"), messages.saturating_mul(per_message))
}

impl Schedule {
    /// Build from explicit phases; ranks are placed on hosts `0..num_ranks` until
    /// [`with_placement`](Self::with_placement) says otherwise. The schedule claims nothing
    /// ([`Collective::Custom`], direct delivery, no permutation claim, one send in flight)
    /// until [`with_collective`](Self::with_collective) and friends say otherwise.
    pub fn from_phases(name: impl Into<String>, num_ranks: u32, phases: Vec<Vec<Message>>) -> Result<Self> {
        let name = name.into();
        let total: usize = phases.iter().map(Vec::len).sum();
        if total > u32::MAX as usize {
            return Err(NetweaveError::Schedule(format!("{total} messages exceed the 32-bit message index range")));
        }
        // Every later figure (totals, loads, payloads) sums these: refuse here what would wrap.
        crate::checked::total_bytes(&format!("--bytes: {name}"), phases.iter().flatten().map(|m| m.bytes))?;
        let mut messages = Vec::with_capacity(total);
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
        Ok(Schedule {
            name,
            num_ranks,
            placement: (0..num_ranks).collect(),
            messages,
            phase_offsets,
            collective: Collective::Custom,
            delivery: Delivery::Direct,
            claims_permutation: false,
            concurrent_sends: 1,
        })
    }

    /// The shift (pairwise) all-to-all: in phase `i` (1 ≤ i < N) rank `S` sends `bytes` to
    /// `(S + i) mod N`. The self-exchange of phase 0 is a local copy and is left out.
    pub fn shift_alltoall(num_ranks: u32, bytes: u64) -> Result<Self> {
        if num_ranks < 2 {
            return crate::invalid!("an all-to-all needs at least 2 ranks, got {num_ranks}");
        }
        let name = format!("alltoall-shift(N={num_ranks})");
        ensure_fits(&name, u128::from(num_ranks) * u128::from(num_ranks - 1))?;
        let phases = (1..num_ranks)
            .map(|i| (0..num_ranks).map(|s| Message { src: s, dst: (s + i) % num_ranks, bytes }).collect())
            .collect();
        Ok(Self::from_phases(name, num_ranks, phases)?
            .with_collective(Collective::Alltoall, Delivery::Direct)
            .with_permutation_claim(true))
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

    /// Say which collective this schedule implements and how it delivers data.
    pub fn with_collective(mut self, collective: Collective, delivery: Delivery) -> Self {
        self.collective = collective;
        self.delivery = delivery;
        self
    }

    /// Claim (or not) that every phase is a permutation.
    pub fn with_permutation_claim(mut self, claims: bool) -> Self {
        self.claims_permutation = claims;
        self
    }

    /// Sends each rank keeps in flight when executed asynchronously (≥ 1).
    pub fn with_concurrent_sends(mut self, sends: u32) -> Result<Self> {
        if sends == 0 {
            return crate::invalid!("a rank needs at least 1 concurrent send");
        }
        self.concurrent_sends = sends;
        Ok(self)
    }

    /// The same messages in the same order with consecutive phases merged: `group_lengths`
    /// (phase counts adding up to the phases) become the new phases. Run with a barrier between
    /// phases, a merged phase is a run of phases that share one barrier
    /// ([`phase_groups::buffer_groups`] finds the runs that fit the switch ports' buffers). Only
    /// direct delivery can be merged: a forwarded message needs a receive of the phase before it.
    ///
    /// ```
    /// use netweave_core::traffic::Schedule;
    /// let s = Schedule::shift_alltoall(4, 8).unwrap().with_phases_merged(&[2, 1]).unwrap();
    /// assert_eq!((s.num_phases(), s.phase(0).len(), s.claims_permutation()), (2, 8, false));
    /// ```
    pub fn with_phases_merged(mut self, group_lengths: &[usize]) -> Result<Self> {
        let phases = self.num_phases();
        if group_lengths.contains(&0) || group_lengths.iter().sum::<usize>() != phases {
            return Err(NetweaveError::Schedule(format!(
                "phase groups {group_lengths:?} must be positive and add up to the schedule's {phases} phases"
            )));
        }
        if group_lengths.iter().all(|&len| len == 1) {
            return Ok(self);
        }
        if self.delivery != Delivery::Direct {
            return Err(NetweaveError::Schedule(format!(
                "{} forwards data received in earlier phases, so its phases cannot be merged",
                self.name
            )));
        }
        let mut offsets = Vec::with_capacity(group_lengths.len() + 1);
        let mut phase = 0;
        offsets.push(0);
        for &len in group_lengths {
            phase += len;
            offsets.push(self.phase_offsets[phase]);
        }
        self.phase_offsets = offsets;
        self.claims_permutation = false;
        Ok(self)
    }

    /// Rename the schedule.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Name, e.g. `alltoall-a2at(5x5,nct=2)`.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Number of ranks in the job.
    pub fn num_ranks(&self) -> u32 {
        self.num_ranks
    }
    /// Number of phases.
    pub fn num_phases(&self) -> usize {
        self.phase_offsets.len() - 1
    }
    /// Number of messages over all phases.
    pub fn num_messages(&self) -> usize {
        self.messages.len()
    }
    /// Messages of phase `p`.
    pub fn phase(&self, p: usize) -> &[Message] {
        &self.messages[self.phase_offsets[p] as usize..self.phase_offsets[p + 1] as usize]
    }
    /// All phases in order.
    pub fn phases(&self) -> impl Iterator<Item = &[Message]> + '_ {
        (0..self.num_phases()).map(|p| self.phase(p))
    }
    /// Message `i` of the flat array (phase 0's messages first).
    pub fn message(&self, i: usize) -> &Message {
        &self.messages[i]
    }
    /// All messages, phase after phase.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }
    /// Start of each phase in [`messages`](Self::messages), plus the total at the end.
    pub fn phase_offsets(&self) -> &[u32] {
        &self.phase_offsets
    }
    /// Host index of each rank.
    pub fn placement(&self) -> &[u32] {
        &self.placement
    }
    /// The collective this schedule claims to implement.
    pub fn collective(&self) -> Collective {
        self.collective
    }
    /// How the schedule delivers data.
    pub fn delivery(&self) -> Delivery {
        self.delivery
    }
    /// Does the schedule claim that every phase is a permutation?
    pub fn claims_permutation(&self) -> bool {
        self.claims_permutation
    }
    /// Sends each rank keeps in flight when executed asynchronously.
    pub fn concurrent_sends(&self) -> u32 {
        self.concurrent_sends
    }
    /// Total bytes over all messages.
    pub fn total_bytes(&self) -> u64 {
        // Cannot wrap: `from_phases` refused any schedule whose total does not fit.
        self.messages.iter().map(|m| m.bytes).sum()
    }

    /// Phase of each message of the flat array.
    pub fn message_phases(&self) -> Vec<u32> {
        let mut out = vec![0u32; self.messages.len()];
        for p in 0..self.num_phases() {
            out[self.phase_offsets[p] as usize..self.phase_offsets[p + 1] as usize].fill(p as u32);
        }
        out
    }

    /// Each rank's sends in the order it issues them: phase by phase, and within a phase in
    /// the order the phase lists them. An asynchronous executor keeps
    /// [`concurrent_sends`](Self::concurrent_sends) of them in flight, FIFO.
    pub fn send_order(&self) -> PerRank {
        self.rank_order(|m| m.src)
    }

    /// Each rank's receives, phase by phase (what a runtime posts receives for).
    pub fn receive_order(&self) -> PerRank {
        self.rank_order(|m| m.dst)
    }

    /// Counting sort of message indices by `key` (stable, so phase order is kept).
    fn rank_order(&self, key: impl Fn(&Message) -> u32) -> PerRank {
        let n = self.num_ranks as usize;
        let mut offsets = vec![0u32; n + 1];
        for m in &self.messages {
            offsets[key(m) as usize + 1] += 1;
        }
        for r in 0..n {
            offsets[r + 1] += offsets[r];
        }
        let mut next = offsets.clone();
        let mut messages = vec![0u32; self.messages.len()];
        for (i, m) in self.messages.iter().enumerate() {
            let slot = &mut next[key(m) as usize];
            messages[*slot as usize] = i as u32;
            *slot += 1;
        }
        PerRank { offsets, messages }
    }

    /// The same schedule with each phase's messages sorted (stably) by source rank — the order
    /// the compact file format stores. Generators already emit this order.
    pub fn canonicalized(mut self) -> Self {
        for p in 0..self.num_phases() {
            let (a, b) = (self.phase_offsets[p] as usize, self.phase_offsets[p + 1] as usize);
            self.messages[a..b].sort_by_key(|m| m.src);
        }
        self
    }

    /// Is every phase's message list sorted by source rank (see [`canonicalized`](Self::canonicalized))?
    pub fn is_canonical(&self) -> bool {
        self.phases().all(|p| p.windows(2).all(|w| w[0].src <= w[1].src))
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

    /// Check every claim the schedule makes; the error names the first problem.
    pub fn check_complete(&self) -> Result<()> {
        let c = self.completeness();
        match c.first_problem {
            Some(p) if !c.ok() => Err(NetweaveError::Schedule(format!("{}: {p}", self.name))),
            _ => Ok(()),
        }
    }

    /// Check what the schedule claims:
    ///
    /// - direct all-to-all / allgather / barrier: every ordered pair of distinct ranks exactly
    ///   once, no self-sends;
    /// - direct gather: every other rank sends to the root exactly once, nothing else;
    /// - forwarded delivery: following the phases in order (messages of one phase carry what
    ///   their sender knew when the phase began), every rank ends up with data from every
    ///   rank (the root only, for a gather);
    /// - with a permutation claim: no rank sends or receives twice in a phase.
    ///
    /// Cost: O(N² / 8) bytes and O(messages) for direct delivery; O(messages · N / 64) word
    /// operations for forwarded delivery.
    pub fn completeness(&self) -> Completeness {
        let mut c = Completeness {
            complete: None,
            permutation: None,
            missing: 0,
            duplicated: 0,
            unexpected: 0,
            non_permutation_phases: 0,
            first_problem: None,
        };
        // A direct all-to-all-like check walks the messages once; it checks the permutation
        // claim on the way.
        let fused = self.claims_permutation
            && self.delivery == Delivery::Direct
            && !matches!(self.collective, Collective::Custom | Collective::Gather { .. });
        if fused && self.is_offset_cover() {
            c.complete = Some(true);
            c.permutation = Some(true);
            return c;
        }
        if self.collective != Collective::Custom {
            match self.delivery {
                Delivery::Direct => self.check_direct(&mut c, fused),
                Delivery::Forwarded => self.check_forwarded(&mut c),
            }
            c.complete = Some(c.missing == 0 && c.duplicated == 0 && c.unexpected == 0);
        }
        if self.claims_permutation {
            if !fused {
                let mut stamps = PermutationStamps::new(self.num_ranks as usize);
                for (p, phase) in self.phases().enumerate() {
                    for m in phase {
                        stamps.visit(p, m);
                    }
                    stamps.end_phase(&mut c);
                }
            }
            c.permutation = Some(c.non_permutation_phases == 0);
        }
        c
    }

    /// The shape of the shift all-to-all, checked in one cheap pass: every phase lists all N
    /// ranks as sources in rank order, each sending to the rank one offset `o ≠ 0` ahead
    /// (mod N), and every offset occurs in exactly one phase. Such a schedule sends every
    /// ordered pair of distinct ranks exactly once with every phase a permutation, so the
    /// per-pair bitmap is not needed; anything else (`false`) gets the full check.
    fn is_offset_cover(&self) -> bool {
        let n = self.num_ranks as usize;
        let phases = self.num_phases();
        if phases != n.saturating_sub(1) || self.phase_offsets.iter().enumerate().any(|(p, &at)| at as usize != p * n) {
            return false;
        }
        let mut seen = vec![false; n];
        // Ranks are below N (checked on construction), so one conditional subtraction wraps.
        let offset = |m: &Message| {
            let d = m.dst as usize + n - m.src as usize;
            if d >= n {
                d - n
            } else {
                d
            }
        };
        self.messages.chunks_exact(n.max(1)).all(|phase| {
            let o = offset(&phase[0]);
            let shifted =
                phase.iter().enumerate().fold(true, |ok, (i, m)| ok & (m.src as usize == i) & (offset(m) == o));
            shifted && o != 0 && !std::mem::replace(&mut seen[o], true)
        })
    }

    /// Every ordered pair of distinct ranks once (all-to-all, allgather, barrier) or every
    /// rank once to the root (gather); with `permutations`, the permutation claim too.
    fn check_direct(&self, c: &mut Completeness, permutations: bool) {
        let n = self.num_ranks as usize;
        let note = |c: &mut Completeness, msg: String| {
            c.first_problem.get_or_insert(msg);
        };
        if let Collective::Gather { root } = self.collective {
            let mut seen = vec![0u32; n];
            for m in &self.messages {
                if m.dst != root || m.src == root {
                    c.unexpected += 1;
                    note(c, format!("message {} -> {} is not a send to the root {root}", m.src, m.dst));
                } else {
                    seen[m.src as usize] += 1;
                }
            }
            for (r, &k) in seen.iter().enumerate() {
                if r as u32 == root {
                    continue;
                }
                if k == 0 {
                    c.missing += 1;
                    note(c, format!("rank {r} never sends to the root {root}"));
                } else if k > 1 {
                    c.duplicated += u64::from(k - 1);
                    note(c, format!("rank {r} sends to the root {root} {k} times"));
                }
            }
            return;
        }
        // One bit per ordered pair for "seen", one for "seen twice": 2·N² bits. Pair (s, d)
        // sits at bit `offset·N + s` with offset = (d − s) mod N, so a shift phase — one
        // offset for every rank — walks its bits in order instead of striding N bits.
        let bit_of = |src: usize, dst: usize| (if dst >= src { dst - src } else { dst + n - src }) * n + src;
        let words = (n * n).div_ceil(64);
        let mut once = vec![0u64; words];
        let mut twice = vec![0u64; words];
        let mut stamps = PermutationStamps::new(if permutations { n } else { 0 });
        for p in 0..self.num_phases() {
            for m in self.phase(p) {
                if permutations {
                    stamps.visit(p, m);
                }
                if m.src == m.dst {
                    c.unexpected += 1;
                    note(c, format!("rank {} sends to itself", m.src));
                    continue;
                }
                let bit = bit_of(m.src as usize, m.dst as usize);
                let (w, b) = (bit / 64, 1u64 << (bit % 64));
                if once[w] & b != 0 {
                    c.duplicated += 1;
                    if twice[w] & b == 0 {
                        note(c, format!("pair {} -> {} is sent more than once", m.src, m.dst));
                    }
                    twice[w] |= b;
                }
                once[w] |= b;
            }
            if permutations {
                stamps.end_phase_quietly(c);
            }
        }
        let present: u64 = once.iter().map(|w| u64::from(w.count_ones())).sum();
        let required = (n as u64) * (n as u64).saturating_sub(1);
        c.missing = required - present;
        if c.missing > 0 && c.first_problem.is_none() {
            // The first missing pair in (source, destination) order.
            let first = (0..n * n).map(|pair| (pair / n, pair % n)).find(|&(s, d)| {
                let bit = bit_of(s, d);
                s != d && once[bit / 64] & (1 << (bit % 64)) == 0
            });
            if let Some((s, d)) = first {
                note(c, format!("pair {s} -> {d} is never sent ({} pairs missing)", c.missing));
            }
        }
        if let Some(problem) = stamps.first_problem.take() {
            note(c, problem);
        }
    }

    fn check_forwarded(&self, c: &mut Completeness) {
        let n = self.num_ranks as usize;
        let words = n.div_ceil(64);
        // knows[r] = set of origins whose data rank r holds; every rank starts with its own.
        let mut knows = vec![0u64; n * words];
        for r in 0..n {
            knows[r * words + r / 64] |= 1 << (r % 64);
        }
        let mut carried: Vec<u64> = Vec::new();
        for phase in self.phases() {
            // Snapshot what each sender knew when the phase began, then deliver.
            carried.clear();
            for m in phase {
                carried.extend_from_slice(&knows[m.src as usize * words..(m.src as usize + 1) * words]);
            }
            for (i, m) in phase.iter().enumerate() {
                if m.src == m.dst {
                    c.unexpected += 1;
                    c.first_problem.get_or_insert(format!("rank {} sends to itself", m.src));
                }
                let row = &mut knows[m.dst as usize * words..(m.dst as usize + 1) * words];
                for (k, w) in row.iter_mut().zip(&carried[i * words..(i + 1) * words]) {
                    *k |= w;
                }
            }
        }
        let needers: Vec<usize> = match self.collective {
            Collective::Gather { root } if (root as usize) < n => vec![root as usize],
            Collective::Gather { root } => {
                c.missing = n as u64;
                c.first_problem.get_or_insert(format!("gather root {root} is outside 0..{n}"));
                return;
            }
            _ => (0..n).collect(),
        };
        for r in needers {
            let row = &knows[r * words..(r + 1) * words];
            let have: u64 = row.iter().map(|w| u64::from(w.count_ones())).sum();
            let lacking = n as u64 - have;
            if lacking > 0 {
                let origin = (0..n).find(|&o| row[o / 64] & (1 << (o % 64)) == 0).unwrap_or(0);
                c.first_problem.get_or_insert(format!(
                    "rank {r} never receives data from rank {origin} ({lacking} origins missing)"
                ));
            }
            c.missing += lacking;
        }
    }
}

/// The permutation check, phase by phase: stamp arrays whose entry is `phase + 1` once the
/// rank has sent (received) in that phase.
struct PermutationStamps {
    sent: Vec<u32>,
    received: Vec<u32>,
    /// Some rank sent or received twice in the current phase.
    bad: bool,
    /// The first problem, kept aside so that a completeness problem found in the same pass
    /// still comes first.
    first_problem: Option<String>,
}

impl PermutationStamps {
    fn new(num_ranks: usize) -> Self {
        PermutationStamps { sent: vec![0; num_ranks], received: vec![0; num_ranks], bad: false, first_problem: None }
    }

    #[inline(always)]
    fn visit(&mut self, phase: usize, m: &Message) {
        let stamp = phase as u32 + 1;
        let sent_twice = std::mem::replace(&mut self.sent[m.src as usize], stamp) == stamp;
        let received_twice = std::mem::replace(&mut self.received[m.dst as usize], stamp) == stamp;
        if (sent_twice || received_twice) && !self.bad {
            self.bad = true;
            let (who, verb) = if sent_twice { (m.src, "sends") } else { (m.dst, "receives") };
            self.first_problem.get_or_insert(format!("phase {phase} is not a permutation: rank {who} {verb} twice"));
        }
    }

    /// Close a phase: count it if it was no permutation; its problem stays aside.
    fn end_phase_quietly(&mut self, c: &mut Completeness) {
        c.non_permutation_phases += u64::from(std::mem::take(&mut self.bad));
    }

    /// Close a phase and report its problem at once.
    fn end_phase(&mut self, c: &mut Completeness) {
        self.end_phase_quietly(c);
        if let Some(problem) = self.first_problem.take() {
            c.first_problem.get_or_insert(problem);
        }
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
        let c = s.completeness();
        assert_eq!((c.complete, c.permutation), (Some(true), Some(true)));
    }

    #[test]
    fn bad_ranks_and_placements_are_rejected() {
        assert!(Schedule::shift_alltoall(1, 8).is_err());
        let bad = vec![vec![Message { src: 0, dst: 5, bytes: 1 }]];
        assert!(Schedule::from_phases("x", 2, bad).is_err());
        assert!(Schedule::shift_alltoall(3, 8).unwrap().with_placement(vec![0, 1]).is_err());
        assert!(Schedule::shift_alltoall(3, 8).unwrap().with_concurrent_sends(0).is_err());
    }

    fn msg(src: u32, dst: u32) -> Message {
        Message { src, dst, bytes: 1 }
    }

    #[test]
    fn completeness_finds_missing_duplicated_and_self_pairs() {
        let phases = vec![vec![msg(0, 1), msg(1, 2), msg(2, 0)], vec![msg(0, 1), msg(2, 2)]];
        let s = Schedule::from_phases("t", 3, phases)
            .unwrap()
            .with_collective(Collective::Alltoall, Delivery::Direct)
            .with_permutation_claim(true);
        let c = s.completeness();
        assert_eq!(c.complete, Some(false));
        assert_eq!(c.permutation, Some(true)); // each phase is a partial permutation
        assert_eq!((c.missing, c.duplicated, c.unexpected), (3, 1, 1));
        assert!(s.check_complete().is_err());
        // Nothing claimed: nothing to check.
        let custom = Schedule::from_phases("t", 3, vec![vec![msg(0, 1), msg(0, 2)]]).unwrap();
        assert_eq!(custom.completeness().complete, None);
        assert!(custom.check_complete().is_ok());
        // Claimed permutations that are not.
        let c = custom.with_permutation_claim(true).completeness();
        assert_eq!((c.permutation, c.non_permutation_phases), (Some(false), 1));
        assert!(c.first_problem.unwrap().contains("rank 0 sends twice"));
    }

    #[test]
    fn the_first_missing_pair_is_named_in_source_order() {
        // Every ordered pair of 4 ranks except 0 -> 3 and 1 -> 2, one message per phase.
        let pairs = (0..4u32).flat_map(|a| (0..4u32).map(move |b| (a, b)));
        let phases =
            pairs.filter(|&(a, b)| a != b && (a, b) != (0, 3) && (a, b) != (1, 2)).map(|(a, b)| vec![msg(a, b)]);
        let s = Schedule::from_phases("t", 4, phases.collect())
            .unwrap()
            .with_collective(Collective::Alltoall, Delivery::Direct)
            .with_permutation_claim(true);
        let c = s.completeness();
        assert_eq!((c.missing, c.duplicated, c.permutation), (2, 0, Some(true)));
        assert_eq!(c.first_problem.as_deref(), Some("pair 0 -> 3 is never sent (2 pairs missing)"));
        // A completeness problem comes before a permutation problem found in the same pass.
        let s = Schedule::from_phases("t", 3, vec![vec![msg(0, 1), msg(0, 2)], vec![msg(1, 1)]])
            .unwrap()
            .with_collective(Collective::Alltoall, Delivery::Direct)
            .with_permutation_claim(true);
        let c = s.completeness();
        assert_eq!(c.non_permutation_phases, 1);
        assert_eq!(c.first_problem.as_deref(), Some("rank 1 sends to itself"));
    }

    #[test]
    fn shift_shaped_schedules_take_the_quick_check_and_others_the_full_one() {
        let shift = |offsets: &[u32]| {
            let phases = offsets.iter().map(|&o| (0..5).map(|s| msg(s, (s + o) % 5)).collect()).collect();
            Schedule::from_phases("t", 5, phases)
                .unwrap()
                .with_collective(Collective::Alltoall, Delivery::Direct)
                .with_permutation_claim(true)
        };
        // Offsets in any order cover every pair once.
        assert!(shift(&[3, 1, 4, 2]).is_offset_cover());
        assert!(shift(&[3, 1, 4, 2]).check_complete().is_ok());
        // A repeated offset: the full check counts and names the problem.
        let twice = shift(&[1, 2, 2, 4]);
        assert!(!twice.is_offset_cover());
        let c = twice.completeness();
        assert_eq!((c.complete, c.missing, c.duplicated), (Some(false), 5, 5));
        assert_eq!(c.first_problem.as_deref(), Some("pair 0 -> 2 is sent more than once"));
        // Offset 0 is a phase of self-sends.
        let c = shift(&[0, 1, 2, 3]).completeness();
        assert_eq!((c.unexpected, c.missing), (5, 5));
        // Sources out of order: same pairs, full check, same verdict.
        let mut phases: Vec<Vec<Message>> = (1..5).map(|o| (0..5).map(|s| msg(s, (s + o) % 5)).collect()).collect();
        phases[0].reverse();
        let reordered = Schedule::from_phases("t", 5, phases)
            .unwrap()
            .with_collective(Collective::Alltoall, Delivery::Direct)
            .with_permutation_claim(true);
        assert!(!reordered.is_offset_cover());
        assert_eq!(reordered.completeness(), shift(&[1, 2, 3, 4]).completeness());
    }

    #[test]
    fn forwarded_check_follows_phase_order() {
        // A 3-rank ring allgather needs 2 phases; in one phase, data does not chain.
        let ring = |phases: usize| {
            let p = (0..phases).map(|_| (0..3).map(|r| msg(r, (r + 1) % 3)).collect()).collect();
            Schedule::from_phases("ring", 3, p).unwrap().with_collective(Collective::Allgather, Delivery::Forwarded)
        };
        assert_eq!(ring(2).completeness().complete, Some(true));
        let c = ring(1).completeness();
        assert_eq!((c.complete, c.missing), (Some(false), 3));
        // Chained inside a single phase does not count: 0 -> 1 and 1 -> 2 together.
        let chained = Schedule::from_phases("c", 3, vec![vec![msg(0, 1), msg(1, 2)]])
            .unwrap()
            .with_collective(Collective::Gather { root: 2 }, Delivery::Forwarded);
        assert_eq!(chained.completeness().complete, Some(false));
        let staged = Schedule::from_phases("c", 3, vec![vec![msg(0, 1)], vec![msg(1, 2)]])
            .unwrap()
            .with_collective(Collective::Gather { root: 2 }, Delivery::Forwarded);
        assert_eq!(staged.completeness().complete, Some(true));
    }

    #[test]
    fn send_and_receive_orders_are_phase_ordered() {
        let s = Schedule::shift_alltoall(4, 1).unwrap();
        let sends = s.send_order();
        let dsts: Vec<u32> = sends.of(1).iter().map(|&i| s.message(i as usize).dst).collect();
        assert_eq!(dsts, vec![2, 3, 0]);
        let recvs = s.receive_order();
        let srcs: Vec<u32> = recvs.of(1).iter().map(|&i| s.message(i as usize).src).collect();
        assert_eq!(srcs, vec![0, 3, 2]);
        assert_eq!(sends.messages.len(), s.num_messages());
    }
}
