//! One simulation over several processes (MPI ranks, or threads standing in for them): the
//! routers are split among the ranks, each rank steps only its own, and what a step does to
//! another rank's routers travels as mail.
//!
//! The split follows the threaded engine's (`router.rs`): a router step writes only its own
//! router's state and leaves flits for downstream buffers, credits for upstream output VCs and
//! tails for hosts in an outbox. A flit or credit crossing to another rank's router goes into
//! that rank's mail; tails and the flit counters go to every rank. The host side — packet
//! generation, injection, the workload and its statistics — is small beside the routers and
//! runs on every rank alike, so every rank holds the same packets and reaches the same
//! verdicts; credits for injection channels therefore go to every rank too.
//!
//! Ranks exchange mail every `lookahead` cycles (conservative synchronisation): the fewest
//! cycles between a step and the first cycle another rank needs its effect — a flit's or
//! credit's trip over a cut channel, a credit's trip back to a host, a tail's retirement.
//! Effects are applied at the exchange instead of at the end of their own cycle; a flit
//! waits in its buffer unseen until the cycle it arrives in and a credit sits on the timing
//! wheel until it is due, so the run is bit-identical to the one-process run whatever the
//! partition. The driver forces an exchange (`Sim::sync`) before reading the flit counters;
//! the watchdog reasons back from the last known movement.
//!
//! ```
//! use netweave_core::flitsim::partition::{local_group, Exchange};
//! let mut ranks = local_group(2);
//! let b = ranks.pop().unwrap();
//! let peer = std::thread::spawn(move || { let mut b = b; b.exchange(vec![b"to 0".to_vec(), vec![]]).unwrap() });
//! let got = ranks[0].exchange(vec![vec![], b"to 1".to_vec()]).unwrap();
//! assert_eq!(got[1], b"to 0");
//! assert_eq!(peer.join().unwrap()[0], b"to 1");
//! ```

use super::flit::{Flit, NONE};
use super::network::SimNetwork;
use crate::error::{NetweaveError, Result};

/// The ranks' carrier is the crate's one [`Exchange`] (re-exported here, where the split
/// began, so `flitsim::partition::{Exchange, local_group}` keep working).
pub use crate::exchange::{local_group, Exchange, LocalExchange};

/// Rank of every router: METIS's k-way partition of the router graph (channels as edges,
/// routers weighted by their ports), which cuts few channels; ids in blocks when METIS cannot
/// split so small a graph. Any split gives the same results, only the mail volume differs.
/// `ranks` is between 1 and the router count (`Sim::distribute` checks).
pub(crate) fn partition_routers(net: &SimNetwork, ranks: usize, seed: u64) -> Vec<u32> {
    let n = net.num_routers;
    let blocks = || (0..n).map(|r| (r * ranks / n) as u32).collect::<Vec<u32>>();
    if ranks == 1 || n < 4 * ranks {
        return blocks();
    }
    let mut adj: Vec<Vec<(u32, metis::Idx)>> = vec![Vec::new(); n];
    for c in 0..net.num_channels() {
        let (a, b) = (net.ch_src_router[c], net.ch_dst_router[c]);
        if a == NONE || b == NONE || a == b {
            continue;
        }
        // Both directions, each weighted one: a link in both ways weighs two.
        for (u, v) in [(a, b), (b, a)] {
            match adj[u as usize].iter_mut().find(|e| e.0 == v) {
                Some(e) => e.1 += 1,
                None => adj[u as usize].push((v, 1)),
            }
        }
    }
    let mut xadj: Vec<metis::Idx> = vec![0];
    let (mut adjncy, mut adjwgt) = (Vec::new(), Vec::new());
    for list in &mut adj {
        list.sort_unstable();
        for &(v, w) in list.iter() {
            adjncy.push(v as metis::Idx);
            adjwgt.push(w);
        }
        xadj.push(adjncy.len() as metis::Idx);
    }
    // A router's work grows with its ports (input VCs scanned, flits crossing).
    let vwgt: Vec<metis::Idx> = (0..n).map(|r| (net.in_base[r + 1] - net.in_base[r]).max(1) as metis::Idx).collect();
    let mut part = vec![0 as metis::Idx; n];
    let split = metis::Graph::new(1, ranks as metis::Idx, &xadj, &adjncy)
        .map(|g| {
            g.set_vwgt(&vwgt).set_adjwgt(&adjwgt).set_option(metis::option::Seed((seed & 0x7fff_ffff) as metis::Idx))
        })
        .ok()
        .and_then(|g| g.part_kway(&mut part).ok());
    if split.is_none() {
        return blocks();
    }
    part.into_iter().map(|p| p as u32).collect()
}

/// What a rank learnt of a run's partition and mail, for the report.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct PartitionReport {
    pub ranks: usize,
    pub routers: Vec<usize>,
    /// Switch-to-switch channels whose ends are on different ranks, and all of them.
    pub cut_channels: usize,
    pub switch_channels: usize,
    /// Cycles between exchanges.
    pub lookahead: u64,
    pub exchanges: u64,
    /// Bytes this rank sent, all exchanges together.
    pub bytes_sent: u64,
}

/// Mail from one rank to another for one window, flat little-endian records.
#[derive(Default)]
pub(crate) struct Mail {
    pub pushes: Vec<u8>,
    pub credits: Vec<u8>,
}

/// What goes to every rank: tails, movement, ejections and the first router error.
#[derive(Default)]
pub(crate) struct Broadcast {
    pub deliveries: Vec<u8>,
    pub credits: Vec<u8>,
    /// Last cycle one of this rank's routers moved a flit, or `u64::MAX` (none this window).
    pub last_moved: u64,
    pub ejected: u64,
    /// The earliest (cycle, router) error of this rank's steps, and its text.
    pub error: Option<((u64, u32), String)>,
}

pub(crate) const PUSH_BYTES: usize = 18;
pub(crate) const CREDIT_BYTES: usize = 12;
pub(crate) const DELIVERY_BYTES: usize = 14;

pub(crate) fn put_push(buf: &mut Vec<u8>, ovc: u32, f: &Flit) {
    buf.extend_from_slice(&ovc.to_le_bytes());
    buf.extend_from_slice(&f.arrive.to_le_bytes());
    buf.extend_from_slice(&f.packet.to_le_bytes());
    buf.extend_from_slice(&f.seq.to_le_bytes());
    buf.extend_from_slice(&f.hops.to_le_bytes());
    buf.push(f.class);
    buf.push(u8::from(f.tail));
}

pub(crate) fn put_credit(buf: &mut Vec<u8>, ovc: u32, at: u64) {
    buf.extend_from_slice(&ovc.to_le_bytes());
    buf.extend_from_slice(&at.to_le_bytes());
}

pub(crate) fn put_delivery(buf: &mut Vec<u8>, at: u64, packet: u32, hops: u16) {
    buf.extend_from_slice(&at.to_le_bytes());
    buf.extend_from_slice(&packet.to_le_bytes());
    buf.extend_from_slice(&hops.to_le_bytes());
}

/// A rank's letter to one peer: its broadcast part, then the mail for that peer.
pub(crate) fn seal(all: &Broadcast, mail: &Mail) -> Vec<u8> {
    let mut b =
        Vec::with_capacity(48 + all.deliveries.len() + all.credits.len() + mail.pushes.len() + mail.credits.len());
    b.extend_from_slice(&all.last_moved.to_le_bytes());
    b.extend_from_slice(&all.ejected.to_le_bytes());
    for part in [&all.deliveries, &all.credits, &mail.pushes, &mail.credits] {
        b.extend_from_slice(&(part.len() as u32).to_le_bytes());
        b.extend_from_slice(part);
    }
    match &all.error {
        Some(((cycle, router), text)) => {
            b.extend_from_slice(&router.to_le_bytes());
            b.extend_from_slice(&cycle.to_le_bytes());
            b.extend_from_slice(text.as_bytes());
        }
        None => b.extend_from_slice(&NONE.to_le_bytes()),
    }
    b
}

/// A letter read back: the same fields, borrowed.
pub(crate) struct Letter<'m> {
    pub last_moved: u64,
    pub ejected: u64,
    pub deliveries: &'m [u8],
    pub credits: &'m [u8],
    pub pushes: &'m [u8],
    pub own_credits: &'m [u8],
    pub error: Option<((u64, u32), String)>,
}

fn malformed(from: usize) -> NetweaveError {
    NetweaveError::InvalidParameter(format!("malformed mail from rank {from}: ranks run different netweave builds?"))
}

pub(crate) fn open(b: &[u8], from: usize) -> Result<Letter<'_>> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let s = b.get(at..at + n).ok_or_else(|| malformed(from))?;
        at += n;
        Ok(s)
    };
    let last_moved = u64::from_le_bytes(take(8)?.try_into().unwrap());
    let ejected = u64::from_le_bytes(take(8)?.try_into().unwrap());
    let mut parts = [&b[..0]; 4];
    for (part, record) in parts.iter_mut().zip([DELIVERY_BYTES, CREDIT_BYTES, PUSH_BYTES, CREDIT_BYTES]) {
        let len = u32::from_le_bytes(take(4)?.try_into().unwrap()) as usize;
        *part = take(len)?;
        if len % record != 0 {
            return Err(malformed(from));
        }
    }
    let router = u32::from_le_bytes(take(4)?.try_into().unwrap());
    let error = if router == NONE {
        None
    } else {
        let cycle = u64::from_le_bytes(take(8)?.try_into().unwrap());
        Some(((cycle, router), String::from_utf8_lossy(&b[at..]).into_owned()))
    };
    let [deliveries, credits, pushes, own_credits] = parts;
    Ok(Letter { last_moved, ejected, deliveries, credits, pushes, own_credits, error })
}

pub(crate) fn read_push(r: &[u8]) -> (u32, Flit) {
    let u32_at = |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().unwrap());
    let u16_at = |i: usize| u16::from_le_bytes(r[i..i + 2].try_into().unwrap());
    let flit = Flit {
        arrive: u32_at(4),
        packet: u32_at(8),
        seq: u16_at(12),
        hops: u16_at(14),
        class: r[16],
        tail: r[17] != 0,
    };
    (u32_at(0), flit)
}

pub(crate) fn read_credit(r: &[u8]) -> (u32, u64) {
    (u32::from_le_bytes(r[0..4].try_into().unwrap()), u64::from_le_bytes(r[4..12].try_into().unwrap()))
}

pub(crate) fn read_delivery(r: &[u8]) -> (u64, u32, u16) {
    (
        u64::from_le_bytes(r[0..8].try_into().unwrap()),
        u32::from_le_bytes(r[8..12].try_into().unwrap()),
        u16::from_le_bytes(r[12..14].try_into().unwrap()),
    )
}

/// The text of a router error, to be raised again on every rank.
pub(crate) fn error_text(e: &NetweaveError) -> String {
    match e {
        NetweaveError::Routing(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A rank's blocked-VC report: its count, then (order, text) entries.
pub(crate) fn read_blocked(b: &[u8]) -> Option<(usize, Vec<(u64, String)>)> {
    let count = u64::from_le_bytes(b.get(..8)?.try_into().ok()?) as usize;
    let (mut at, mut parts) = (8, Vec::new());
    while at < b.len() {
        let order = u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
        let len = u32::from_le_bytes(b.get(at + 8..at + 12)?.try_into().ok()?) as usize;
        parts.push((order, String::from_utf8_lossy(b.get(at + 12..at + 12 + len)?).into_owned()));
        at += 12 + len;
    }
    Some((count, parts))
}
