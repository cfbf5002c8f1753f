//! The flit simulator's shared vocabulary: flits, packets, input-VC states and the ring and
//! round-robin arithmetic. A leaf: the network (`network.rs`), the routers (`router.rs`), the
//! partition (`partition.rs`) and the engine (`engine.rs`) import it, and it imports none of them.

/// No id: an empty slot, no packet, no port, no router.
pub(crate) const NONE: u32 = u32::MAX;

/// Input-VC states: no packet; a head waiting for an output VC; a packet holding one.
pub(crate) const IDLE: u8 = 0;
pub(crate) const VC_ALLOC: u8 = 1;
pub(crate) const ACTIVE: u8 = 2;

/// One flit in a buffer: its packet, its index in the packet (and whether it is the last), the
/// cycle it is there (low 32 bits), the routers it has crossed and, on a head under BookSim's
/// torus routing, the VC class its packet keeps in the current dimension. What changes hop by
/// hop travels in the flit, so a router step never writes the packet record another router may
/// be reading.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Flit {
    pub arrive: u32,
    pub packet: u32,
    pub seq: u16,
    pub hops: u16,
    pub class: u8,
    pub tail: bool,
}

impl Flit {
    /// Whether the flit is in its buffer by cycle `now`: the wrapping difference is exact while
    /// arrival and `now` are less than 2³¹ cycles apart (the deadlock watchdog fires long before).
    #[inline]
    pub(crate) fn arrived(self, now: u64) -> bool {
        (now as u32).wrapping_sub(self.arrive) as i32 >= 0
    }
}

/// A packet in flight or queued at its source.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Packet {
    pub src: u32,
    pub dst: u32,
    pub size: u16,
    /// Routers crossed so far.
    pub hops: u16,
    pub ctime: u64,
    pub itime: u64,
    /// Counted in the statistics (created while measuring).
    pub measured: bool,
    /// Batch message it belongs to, or [`NONE`]; replies carry the message too.
    pub message: u32,
    pub is_reply: bool,
    /// Creation number, unique in the run: names the packet in tie-breaks and orders deliveries
    /// the same way however the routers are split (ids are recycled).
    pub uid: u64,
}

/// `(local − ptr) mod n`, the round-robin distance of `local` from pointer `ptr`, without a
/// division: `local < n`, and `ptr ≤ n` since a pointer is stored as one past the last winner.
#[inline]
pub(crate) fn rr_distance(local: u32, ptr: u32, n: u32) -> u32 {
    let p = if ptr >= n { ptr - n } else { ptr };
    if local >= p {
        local - p
    } else {
        local + n - p
    }
}

/// `(x + 1) mod n` for `x < n`, without a division: where a round-robin pointer goes after `x` won.
#[inline]
pub(crate) fn next_ptr(x: u32, n: u32) -> u32 {
    if x + 1 >= n {
        0
    } else {
        x + 1
    }
}

/// Slot `off` places after `head` in a ring buffer of `cap` slots, without a division.
#[inline]
pub(crate) fn ring_slot(head: u16, off: usize, cap: usize) -> usize {
    let s = head as usize + off;
    if s >= cap {
        s - cap
    } else {
        s
    }
}
