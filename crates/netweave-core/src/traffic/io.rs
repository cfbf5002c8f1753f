//! Schedule files: versioned JSON, and the compact binary `NWSCHED` format an MPI runtime reads.
//!
//! Both are specified in `docs/schedule-format.md`. In short:
//!
//! - **JSON** (`.json`): `{"format": "netweave-schedule", "version": 1, "form": "phases", ...,
//!   "phases": [[[src, dst, bytes], ...], ...]}` — readable, diffable, for tools.
//! - **NWSCHED** (`.nws`): a 64-byte little-endian header, the name, the placement, then per
//!   rank an index into a send table and a receive table of fixed 32-byte records
//!   `{u32 phase, u32 peer, u64 bytes, u32 blocks, u32 0, u64 first_block}` and a table of the
//!   [`blocks`](super::blocks) each message carries, so one file serves every message size. A
//!   rank seeks straight to its own sends and receives, so a C runtime reads what it needs with
//!   a few `fread`s. Version 1 files (16-byte records, no blocks) are still read.
//!
//! The binary file stores each rank's sends in its send order; reading it back gives each
//! phase's messages sorted by source rank ([`Schedule::canonicalized`]), which is the order
//! every generator emits. Readers reject anything malformed with one line naming the problem.
//!
//! ```
//! use netweave_core::traffic::{io, Schedule};
//! let s = Schedule::shift_alltoall(5, 64).unwrap();
//! assert_eq!(io::from_binary(&io::to_binary(&s).unwrap()).unwrap(), s);
//! assert_eq!(io::from_json(&io::to_json(&s)).unwrap(), s);
//! ```

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::blocks::{self, BlockLists};
use super::dag::{Dependency, TaskGraph, TaskId};
use super::{Collective, Delivery, Message, Schedule};
use crate::error::{NetweaveError, Result};
use crate::input;

/// The `format` value of schedule JSON files.
pub const JSON_FORMAT: &str = "netweave-schedule";
/// The version JSON schedules are written with; the JSON reader accepts exactly this version.
pub const VERSION: u32 = 1;
/// The version binary schedules are written with; the binary readers accept 1 and 2.
pub const BINARY_VERSION: u32 = 2;
/// First 8 bytes of a binary schedule.
pub const MAGIC: [u8; 8] = *b"NWSCHED\0";
/// Size of the binary header in bytes.
pub const HEADER_BYTES: usize = 64;
/// Size of one send or receive record in bytes (version 2; version 1 records are 16 bytes,
/// without the block fields).
pub const RECORD_BYTES: usize = 32;
const RECORD_BYTES_V1: usize = 16;
/// Readers accept at most this many phases beyond one per message (empty phases carry no
/// records, so a corrupt count could otherwise ask for any amount of memory).
pub const MAX_EMPTY_PHASES: u64 = 1 << 20;
/// Binary `flags` bit: every phase is claimed to be a permutation.
pub const FLAG_PERMUTATION: u32 = 1;
/// Binary `flags` bit: delivery is forwarded (ranks pass on data received earlier).
pub const FLAG_FORWARDED: u32 = 2;

#[derive(Serialize, Deserialize)]
struct JsonSchedule {
    format: String,
    version: u32,
    #[serde(default = "phases_form")]
    form: String,
    name: String,
    collective: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    root: Option<u32>,
    delivery: String,
    claims_permutation: bool,
    concurrent_sends: u32,
    num_ranks: u32,
    placement: Vec<u32>,
    phases: Vec<Vec<(u32, u32, u64)>>,
}

fn phases_form() -> String {
    "phases".to_string()
}

fn json_err(line: usize, message: impl Into<String>) -> NetweaveError {
    NetweaveError::Parse { format: "schedule JSON", line, message: message.into() }
}

fn bin_err(message: impl Into<String>) -> NetweaveError {
    NetweaveError::Parse { format: "NWSCHED", line: 0, message: message.into() }
}

/// The schedule as versioned JSON text (one line per phase).
pub fn to_json(s: &Schedule) -> String {
    let root = match s.collective() {
        Collective::Gather { root } => Some(root),
        _ => None,
    };
    let head = JsonSchedule {
        format: JSON_FORMAT.to_string(),
        version: VERSION,
        form: phases_form(),
        name: s.name().to_string(),
        collective: s.collective().name().to_string(),
        root,
        delivery: s.delivery().name().to_string(),
        claims_permutation: s.claims_permutation(),
        concurrent_sends: s.concurrent_sends(),
        num_ranks: s.num_ranks(),
        placement: s.placement().to_vec(),
        phases: Vec::new(),
    };
    // Serialise the header with serde, then stream the phases one per line: compact for big
    // schedules yet still diffable.
    let mut out = serde_json::to_string(&head).expect("plain data serialises");
    out.truncate(out.len() - "[]}".len());
    out.push_str("[\n");
    for (p, phase) in s.phases().enumerate() {
        out.push_str(if p == 0 { "  [" } else { ",\n  [" });
        for (i, m) in phase.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "[{},{},{}]", m.src, m.dst, m.bytes);
        }
        out.push(']');
    }
    out.push_str("\n]}\n");
    out
}

/// Read a schedule from JSON text written by [`to_json`] (or by hand).
pub fn from_json(text: &str) -> Result<Schedule> {
    // Check format and version first, so a newer file says so instead of naming a field.
    #[derive(Deserialize)]
    struct Head {
        format: Option<String>,
        version: Option<u32>,
    }
    let head: Head = serde_json::from_str(text).map_err(|e| json_err(e.line(), e.to_string()))?;
    if head.format.as_deref() != Some(JSON_FORMAT) {
        return Err(json_err(0, format!("not a netweave schedule ('format' must be '{JSON_FORMAT}')")));
    }
    if head.version != Some(VERSION) {
        let v = head.version.map_or("missing".to_string(), |v| v.to_string());
        return Err(json_err(0, format!("version {v} is not supported (this netweave reads version {VERSION})")));
    }
    let raw: JsonSchedule = serde_json::from_str(text).map_err(|e| json_err(e.line(), e.to_string()))?;
    if raw.form != "phases" {
        return Err(json_err(0, format!("form '{}' is not supported (this netweave reads 'phases')", raw.form)));
    }
    let collective =
        Collective::from_name(&raw.collective, raw.root.unwrap_or(0)).map_err(|e| json_err(0, e.to_string()))?;
    check_root(collective, raw.num_ranks).map_err(|m| json_err(0, m))?;
    if raw.placement.len() != raw.num_ranks as usize {
        return Err(json_err(
            0,
            format!("'placement' lists {} hosts for {} ranks", raw.placement.len(), raw.num_ranks),
        ));
    }
    let delivery = Delivery::from_name(&raw.delivery).map_err(|e| json_err(0, e.to_string()))?;
    let phases = raw
        .phases
        .into_iter()
        .map(|p| p.into_iter().map(|(src, dst, bytes)| Message { src, dst, bytes }).collect())
        .collect();
    let s = Schedule::from_phases(raw.name, raw.num_ranks, phases)
        .and_then(|s| s.with_placement(raw.placement))
        .and_then(|s| s.with_concurrent_sends(raw.concurrent_sends))
        .map_err(|e| json_err(0, e.to_string()))?;
    Ok(s.with_collective(collective, delivery).with_permutation_claim(raw.claims_permutation))
}

fn check_root(collective: Collective, num_ranks: u32) -> std::result::Result<(), String> {
    match collective {
        Collective::Gather { root } if root >= num_ranks => Err(format!(
            "gather root {root} is not one of the {num_ranks} ranks (valid: 0..={})",
            num_ranks.saturating_sub(1)
        )),
        _ => Ok(()),
    }
}

fn collective_code(c: Collective) -> (u32, u32) {
    match c {
        Collective::Alltoall => (0, 0),
        Collective::Allgather => (1, 0),
        Collective::Gather { root } => (2, root),
        Collective::Barrier => (3, 0),
        Collective::Custom => (4, 0),
    }
}

fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// The 64-byte header both binary forms share (phases: `count` phases, `records` messages;
/// task DAG: `count` tasks, `records` dependencies).
struct Header {
    form: u32,
    num_ranks: u32,
    count: u32,
    records: u64,
    collective: u32,
    root: u32,
    flags: u32,
    concurrent_sends: u32,
    name_bytes: u32,
    /// Version 2: the executor the schedule asks for ([`ExecutorHint`] code).
    executor: u32,
    /// Version 2: bytes per block in the schedule as generated (0: no blocks).
    block_bytes: u64,
    version: u32,
}

/// The executor a binary schedule asks an MPI runtime for (header field of version 2); the
/// names are the flow simulator's. `Auto` lets the runtime choose: asynchronous with the
/// schedule's `concurrent_sends` for direct delivery, local-sync for forwarded delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExecutorHint {
    #[default]
    Auto = 0,
    Sync = 1,
    Async = 2,
    LocalSync = 3,
}

impl ExecutorHint {
    /// Every hint with its name, in code order.
    pub const ALL: [(ExecutorHint, &'static str); 4] = [
        (ExecutorHint::Auto, "auto"),
        (ExecutorHint::Sync, "sync"),
        (ExecutorHint::Async, "async"),
        (ExecutorHint::LocalSync, "local-sync"),
    ];

    /// Parse `auto`, `sync`, `async` or `local-sync`.
    pub fn from_name(name: &str) -> Result<Self> {
        match Self::ALL.iter().find(|(_, n)| *n == name) {
            Some((hint, _)) => Ok(*hint),
            None => crate::invalid!("unknown executor '{name}' (known: auto, sync, async, local-sync)"),
        }
    }
}

/// Write the header, the name and the placement, each padded to 8 bytes.
fn write_preamble(out: &mut Vec<u8>, h: &Header, name: &[u8], placement: &[u32]) {
    out.extend_from_slice(&MAGIC);
    for v in [h.version, h.form, h.num_ranks, h.count] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&h.records.to_le_bytes());
    for v in [h.collective, h.root, h.flags, h.concurrent_sends, h.name_bytes, h.executor] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&h.block_bytes.to_le_bytes());
    out.extend_from_slice(name);
    out.resize(pad8(out.len()), 0);
    for &h in placement {
        out.extend_from_slice(&h.to_le_bytes());
    }
    out.resize(pad8(out.len()), 0);
}

/// The schedule in the compact binary `NWSCHED` format (version 2, little-endian), with the
/// blocks of every message when [`blocks::derive`] can tell them (else none, and an MPI runtime
/// refuses the file with that reason).
pub fn to_binary(s: &Schedule) -> Result<Vec<u8>> {
    to_binary_with(s, ExecutorHint::Auto)
}

/// [`to_binary`], asking runtimes for `executor`.
pub fn to_binary_with(s: &Schedule, executor: ExecutorHint) -> Result<Vec<u8>> {
    // Receive records list a phase's senders in the order the reader rebuilds them.
    let sorted;
    let s = if s.is_canonical() {
        s
    } else {
        sorted = s.clone().canonicalized();
        &sorted
    };
    let n = s.num_ranks() as usize;
    let m = s.num_messages();
    let name = s.name().as_bytes();
    if name.len() > u32::MAX as usize {
        return crate::invalid!("schedule name is too long for the binary format");
    }
    let lists: Option<BlockLists> = blocks::derive(s).ok().flatten();
    let nblocks = lists.as_ref().map_or(0, |l| l.ids.len());
    let size =
        HEADER_BYTES + pad8(name.len()) + pad8(4 * n) + 2 * 8 * (n + 1) + 2 * RECORD_BYTES * m + 8 + pad8(4 * nblocks);
    let mut out = Vec::with_capacity(size);
    let (code, root) = collective_code(s.collective());
    let mut flags = 0;
    if s.claims_permutation() {
        flags |= FLAG_PERMUTATION;
    }
    if s.delivery() == Delivery::Forwarded {
        flags |= FLAG_FORWARDED;
    }
    let header = Header {
        form: 0,
        num_ranks: s.num_ranks(),
        count: s.num_phases() as u32,
        records: m as u64,
        collective: code,
        root,
        flags,
        concurrent_sends: s.concurrent_sends(),
        name_bytes: name.len() as u32,
        executor: executor as u32,
        block_bytes: lists.as_ref().map_or(0, |l| l.block_bytes),
        version: BINARY_VERSION,
    };
    write_preamble(&mut out, &header, name, s.placement());
    let phase_of = s.message_phases();
    let sends = s.send_order();
    let recvs = s.receive_order();
    for order in [&sends, &recvs] {
        for &o in &order.offsets {
            out.extend_from_slice(&u64::from(o).to_le_bytes());
        }
    }
    for (order, peer_is_dst) in [(&sends, true), (&recvs, false)] {
        for &i in &order.messages {
            let msg = s.message(i as usize);
            out.extend_from_slice(&phase_of[i as usize].to_le_bytes());
            out.extend_from_slice(&(if peer_is_dst { msg.dst } else { msg.src }).to_le_bytes());
            out.extend_from_slice(&msg.bytes.to_le_bytes());
            let (count, first) = lists
                .as_ref()
                .map_or((0, 0), |l| (l.offsets[i as usize + 1] - l.offsets[i as usize], l.offsets[i as usize]));
            out.extend_from_slice(&(count as u32).to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&first.to_le_bytes());
        }
    }
    out.extend_from_slice(&(nblocks as u64).to_le_bytes());
    for &b in lists.as_ref().map_or(&[][..], |l| &l.ids) {
        out.extend_from_slice(&b.to_le_bytes());
    }
    out.resize(pad8(out.len()), 0);
    debug_assert_eq!(out.len(), size);
    Ok(out)
}

/// Little-endian cursor over a byte slice; every read checks bounds.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let out = &self.data[self.pos..end];
                self.pos = end;
                Ok(out)
            }
            None => Err(bin_err(format!("file ends inside the {what} (at byte {} of {})", self.pos, self.data.len()))),
        }
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }
    /// The block fields of a version-2 record (`u32 count, u32 0, u64 first`); (0, 0) in version 1.
    fn block_fields(&mut self, v2: bool, what: &str) -> Result<(u64, u64)> {
        if !v2 {
            return Ok((0, 0));
        }
        let (count, zero, first) = (self.u32(what)?, self.u32(what)?, self.u64(what)?);
        if zero != 0 {
            return Err(bin_err(format!("a reserved field of the {what} is not zero")));
        }
        Ok((u64::from(count), first))
    }

    fn align8(&mut self, what: &str) -> Result<()> {
        let pad = pad8(self.pos) - self.pos;
        if self.take(pad, what)?.iter().any(|&b| b != 0) {
            return Err(bin_err(format!("padding after the {what} is not zero")));
        }
        Ok(())
    }

    /// The header, checking magic, version, that the form is `want_form`, and the reserved fields.
    fn header(&mut self, want_form: u32) -> Result<Header> {
        if self.take(8, "header")? != MAGIC {
            return Err(bin_err("not a netweave binary schedule (the file does not start with NWSCHED)"));
        }
        let version = self.u32("header")?;
        if version != 1 && version != BINARY_VERSION {
            return Err(bin_err(format!(
                "version {version} is not supported (this netweave reads versions 1 and {BINARY_VERSION})"
            )));
        }
        let form = self.u32("header")?;
        if form != want_form {
            return Err(bin_err(if want_form == FORM_DAG {
                format!("form {form} is not a task DAG (form {FORM_DAG})")
            } else {
                format!("form {form} is not the phases form 0 (form 1 is a task DAG, read by the DAG reader)")
            }));
        }
        let (num_ranks, count, records) = (self.u32("header")?, self.u32("header")?, self.u64("header")?);
        let (collective, root, flags, concurrent_sends, name_bytes) =
            (self.u32("header")?, self.u32("header")?, self.u32("header")?, self.u32("header")?, self.u32("header")?);
        let (executor, block_bytes) = (self.u32("header")?, self.u64("header")?);
        if version == 1 && (executor != 0 || block_bytes != 0) {
            return Err(bin_err("reserved header fields are not zero"));
        }
        if executor > ExecutorHint::LocalSync as u32 {
            return Err(bin_err(format!("unknown executor code {executor} (known: 0-3)")));
        }
        Ok(Header {
            form,
            num_ranks,
            count,
            records,
            collective,
            root,
            flags,
            concurrent_sends,
            name_bytes,
            executor,
            block_bytes,
            version,
        })
    }

    /// The name and the placement that follow the header.
    fn name_and_placement(&mut self, h: &Header) -> Result<(String, Vec<u32>)> {
        let name = std::str::from_utf8(self.take(h.name_bytes as usize, "name")?)
            .map_err(|_| bin_err("the schedule name is not UTF-8"))?
            .to_string();
        self.align8("name")?;
        let placement = (0..h.num_ranks).map(|_| self.u32("placement")).collect::<Result<Vec<u32>>>()?;
        self.align8("placement")?;
        Ok((name, placement))
    }
}

/// Read a binary `NWSCHED` schedule, checking every field (see the module docs).
pub fn from_binary(data: &[u8]) -> Result<Schedule> {
    let mut r = Reader { data, pos: 0 };
    let header = r.header(0)?;
    let (num_ranks, num_phases, num_messages, name_bytes) =
        (header.num_ranks, header.count, header.records, header.name_bytes);
    let (code, root, flags, concurrent_sends) = (header.collective, header.root, header.flags, header.concurrent_sends);
    let collective = match code {
        0 => Collective::Alltoall,
        1 => Collective::Allgather,
        2 => Collective::Gather { root },
        3 => Collective::Barrier,
        4 => Collective::Custom,
        _ => return Err(bin_err(format!("unknown collective code {code} (known: 0-4)"))),
    };
    if code != 2 && root != 0 {
        return Err(bin_err(format!("root is {root} but only a gather has a root")));
    }
    check_root(collective, num_ranks).map_err(bin_err)?;
    if flags & !(FLAG_PERMUTATION | FLAG_FORWARDED) != 0 {
        return Err(bin_err(format!("unknown flag bits {:#x}", flags & !(FLAG_PERMUTATION | FLAG_FORWARDED))));
    }
    if concurrent_sends == 0 {
        return Err(bin_err("concurrent sends is 0; a rank needs at least 1"));
    }
    // Check the total size before allocating anything proportional to the counts.
    let n = num_ranks as u64;
    let v2 = header.version >= 2;
    let record_bytes = if v2 { RECORD_BYTES } else { RECORD_BYTES_V1 } as u64;
    let records_end = (|| {
        let fixed = (HEADER_BYTES as u64).checked_add(pad8(name_bytes as usize) as u64)?;
        let placement = (4 * n).div_ceil(8) * 8;
        let index = 16u64.checked_mul(n + 1)?;
        let records = (2 * record_bytes).checked_mul(num_messages)?;
        fixed.checked_add(placement)?.checked_add(index)?.checked_add(records)
    })();
    // Version 2 ends with the block table: a u64 count, then that many u32 block ids.
    let num_blocks = match records_end {
        Some(end) if v2 && end.checked_add(8).is_some_and(|e| e <= data.len() as u64) => {
            u64::from_le_bytes(data[end as usize..end as usize + 8].try_into().expect("8 bytes"))
        }
        _ => 0,
    };
    let expected = records_end.and_then(|end| {
        if !v2 {
            return Some(end);
        }
        end.checked_add(8)?.checked_add(num_blocks.checked_mul(4)?.checked_add(7)? / 8 * 8)
    });
    if expected != Some(data.len() as u64) {
        return Err(bin_err(format!(
            "file is {} bytes but its header ({num_ranks} ranks, {num_messages} messages, {name_bytes}-byte name) implies {}",
            data.len(),
            expected.map_or("more than 2^64".to_string(), |e| e.to_string())
        )));
    }
    if num_messages > u32::MAX as u64 {
        return Err(bin_err(format!("{num_messages} messages exceed the 32-bit message index range")));
    }
    if num_phases as u64 > num_messages + MAX_EMPTY_PHASES {
        return Err(bin_err(format!("{num_phases} phases for {num_messages} messages: the header is corrupt")));
    }
    let (name, placement) = r.name_and_placement(&header)?;
    let mut index = [Vec::new(), Vec::new()];
    for (table, idx) in ["send", "receive"].iter().zip(index.iter_mut()) {
        *idx = (0..=num_ranks).map(|_| r.u64("index")).collect::<Result<Vec<u64>>>()?;
        if idx[0] != 0 || idx[num_ranks as usize] != num_messages || idx.windows(2).any(|w| w[0] > w[1]) {
            return Err(bin_err(format!("the {table} index does not run from 0 to {num_messages} in order")));
        }
    }
    // Send table: rebuild phases. Records of a rank must come in phase order.
    let mut phases: Vec<Vec<Message>> = vec![Vec::new(); num_phases as usize];
    // (phase, position in it, blocks, first block) of every send record.
    let mut send_blocks: Vec<(u32, usize, u64, u64)> = Vec::new();
    for src in 0..num_ranks {
        let count = index[0][src as usize + 1] - index[0][src as usize];
        let mut last_phase = 0;
        for k in 0..count {
            let (phase, dst, bytes) = (r.u32("send table")?, r.u32("send table")?, r.u64("send table")?);
            let (blocks, first) = r.block_fields(v2, "send table")?;
            if phase >= num_phases || dst >= num_ranks {
                return Err(bin_err(format!(
                    "send record {k} of rank {src} names phase {phase} / rank {dst}, outside {num_phases} phases / {num_ranks} ranks"
                )));
            }
            if phase < last_phase {
                return Err(bin_err(format!("sends of rank {src} are not in phase order (record {k})")));
            }
            last_phase = phase;
            send_blocks.push((phase, phases[phase as usize].len(), blocks, first));
            phases[phase as usize].push(Message { src, dst, bytes });
        }
    }
    let s = Schedule::from_phases(name, num_ranks, phases)
        .and_then(|s| s.with_placement(placement))
        .and_then(|s| s.with_concurrent_sends(concurrent_sends))
        .map_err(|e| bin_err(e.to_string()))?;
    let delivery = if flags & FLAG_FORWARDED != 0 { Delivery::Forwarded } else { Delivery::Direct };
    let s = s.with_collective(collective, delivery).with_permutation_claim(flags & FLAG_PERMUTATION != 0);
    // Receive table: must be exactly the receive order of the send table.
    // Blocks of message i as the send table gives them: (count, first).
    let mut blocks_of = vec![(0u64, 0u64); s.num_messages()];
    for &(phase, pos, count, first) in &send_blocks {
        blocks_of[s.phase_offsets()[phase as usize] as usize + pos] = (count, first);
    }
    let recvs = s.receive_order();
    let phase_of = s.message_phases();
    for dst in 0..num_ranks {
        if recvs.offsets[dst as usize + 1] as u64 != index[1][dst as usize + 1] {
            return Err(bin_err(format!("the receive index of rank {dst} disagrees with the send table")));
        }
        for (k, &i) in recvs.of(dst).iter().enumerate() {
            let (phase, src, bytes) = (r.u32("receive table")?, r.u32("receive table")?, r.u64("receive table")?);
            let blocks = r.block_fields(v2, "receive table")?;
            let m = s.message(i as usize);
            if (phase, src, bytes, blocks) != (phase_of[i as usize], m.src, m.bytes, blocks_of[i as usize]) {
                return Err(bin_err(format!(
                    "receive record {k} of rank {dst} (phase {phase}, from {src}, {bytes} bytes) disagrees with the send table"
                )));
            }
        }
    }
    if v2 {
        check_block_table(&mut r, &s, &blocks_of, num_blocks, header.block_bytes)?;
    }
    Ok(s)
}

/// A version-2 block table must be exactly what [`blocks::derive`] gives for the schedule (or
/// empty, for a schedule that carries no blocks).
fn check_block_table(
    r: &mut Reader,
    s: &Schedule,
    blocks_of: &[(u64, u64)],
    num_blocks: u64,
    block_bytes: u64,
) -> Result<()> {
    r.u64("block count")?;
    let ids = (0..num_blocks).map(|_| r.u32("block table")).collect::<Result<Vec<u32>>>()?;
    r.align8("block table")?;
    if num_blocks == 0 && block_bytes == 0 && blocks_of.iter().all(|&(c, _)| c == 0) {
        return Ok(()); // not block-aware: runs by bytes only
    }
    let derived = blocks::derive(s).map_err(|e| bin_err(e.to_string()))?.ok_or_else(|| {
        bin_err(format!("a {} schedule carries no blocks, but the file lists some", s.collective().name()))
    })?;
    if derived.block_bytes != block_bytes {
        return Err(bin_err(format!(
            "the header says blocks of {block_bytes} bytes, the messages imply {}",
            derived.block_bytes
        )));
    }
    for (i, &(count, first)) in blocks_of.iter().enumerate() {
        let listed = first.checked_add(count).filter(|&e| e <= num_blocks).map(|e| &ids[first as usize..e as usize]);
        if listed != Some(derived.of(i)) {
            let m = s.message(i);
            return Err(bin_err(format!(
                "the blocks listed for message {} → {} (phase message {i}) are not the ones it carries",
                m.src, m.dst
            )));
        }
    }
    Ok(())
}

/// `form` value of a binary task DAG (paper 004's schedules; phases are form 0).
pub const FORM_DAG: u32 = 1;
/// Size of one task record (`u32 src, u32 dst, u64 bytes, u32 block, u32 0, u64 offset`;
/// version 1: the first three only) and of one dependency record (`u32 task, u32 kind`) in a
/// binary DAG.
pub const TASK_RECORD_BYTES: usize = 32;
const TASK_RECORD_BYTES_V1: usize = 16;
pub const DEPENDENCY_RECORD_BYTES: usize = 8;

/// A task graph in the binary `NWSCHED` DAG form (version 2, form 1): header, name, placement,
/// task records, a predecessor index and dependency records (`kind` 0 = complete, 1 = relay).
/// When the tasks add up to an all-to-all or a gather ([`blocks::derive_dag`]), the header names
/// that collective and the block size and each task record its block and offset, so an MPI
/// runtime can run the DAG at any size; otherwise the collective is custom and blocks are
/// `u32::MAX`. Executors read it whole; see `docs/schedule-format.md`.
///
/// ```
/// use netweave_core::traffic::{dag::{Dependency, TaskGraph}, io, Message};
/// let mut g = TaskGraph::new("chain", 3);
/// let a = g.add_task(Message { src: 0, dst: 1, bytes: 64 }, &[]).unwrap();
/// g.add_task(Message { src: 1, dst: 2, bytes: 64 }, &[(a, Dependency::Relay)]).unwrap();
/// assert_eq!(io::dag_from_binary(&io::dag_to_binary(&g)).unwrap(), g);
/// ```
pub fn dag_to_binary(g: &TaskGraph) -> Vec<u8> {
    let n = g.num_ranks() as usize;
    let t = g.num_tasks();
    let e = g.num_dependencies();
    let name = g.name().as_bytes();
    let size = HEADER_BYTES
        + pad8(name.len())
        + pad8(4 * n)
        + TASK_RECORD_BYTES * t
        + 8 * (t + 1)
        + DEPENDENCY_RECORD_BYTES * e;
    let mut out = Vec::with_capacity(size);
    let found = blocks::derive_dag(g);
    let (collective, root) = found.as_ref().map_or((4, 0), |b| collective_code(b.collective));
    // No flags, one send at a time.
    let header = Header {
        form: FORM_DAG,
        num_ranks: g.num_ranks(),
        count: t as u32,
        records: e as u64,
        collective,
        root,
        flags: 0,
        concurrent_sends: 1,
        name_bytes: name.len() as u32,
        executor: 0,
        block_bytes: found.as_ref().map_or(0, |b| b.block_bytes),
        version: BINARY_VERSION,
    };
    write_preamble(&mut out, &header, name, g.placement());
    for (i, m) in g.tasks().iter().enumerate() {
        out.extend_from_slice(&m.src.to_le_bytes());
        out.extend_from_slice(&m.dst.to_le_bytes());
        out.extend_from_slice(&m.bytes.to_le_bytes());
        let (block, offset) = found.as_ref().map_or((u32::MAX, 0), |b| (b.block[i], b.offset[i]));
        out.extend_from_slice(&block.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
    }
    let mut first = 0u64;
    out.extend_from_slice(&first.to_le_bytes());
    for task in 0..t as TaskId {
        first += g.predecessors(task).len() as u64;
        out.extend_from_slice(&first.to_le_bytes());
    }
    for task in 0..t as TaskId {
        for &(p, kind) in g.predecessors(task) {
            out.extend_from_slice(&p.to_le_bytes());
            out.extend_from_slice(&(matches!(kind, Dependency::Relay) as u32).to_le_bytes());
        }
    }
    debug_assert_eq!(out.len(), size);
    out
}

/// Read a binary task DAG written by [`dag_to_binary`], checking every field and edge.
pub fn dag_from_binary(data: &[u8]) -> Result<TaskGraph> {
    let mut r = Reader { data, pos: 0 };
    let header = r.header(FORM_DAG)?;
    let (num_ranks, num_tasks, num_edges, name_bytes) =
        (header.num_ranks, header.count as u64, header.records, header.name_bytes);
    let expected = (|| {
        let fixed = (HEADER_BYTES as u64).checked_add(pad8(name_bytes as usize) as u64)?;
        let placement = (4 * num_ranks as u64).div_ceil(8) * 8;
        let record = if header.version >= 2 { TASK_RECORD_BYTES } else { TASK_RECORD_BYTES_V1 } as u64;
        let tasks = (record + 8).checked_mul(num_tasks)?.checked_add(8)?;
        let edges = (DEPENDENCY_RECORD_BYTES as u64).checked_mul(num_edges)?;
        fixed.checked_add(placement)?.checked_add(tasks)?.checked_add(edges)
    })();
    if expected != Some(data.len() as u64) {
        return Err(bin_err(format!(
            "file is {} bytes but its header ({num_ranks} ranks, {num_tasks} tasks, {num_edges} dependencies) implies {}",
            data.len(),
            expected.map_or("more than 2^64".to_string(), |e| e.to_string())
        )));
    }
    let (name, placement) = r.name_and_placement(&header)?;
    let mut tasks = Vec::with_capacity(num_tasks as usize);
    let mut placed = Vec::with_capacity(num_tasks as usize);
    for _ in 0..num_tasks {
        tasks.push(Message { src: r.u32("task table")?, dst: r.u32("task table")?, bytes: r.u64("task table")? });
        if header.version >= 2 {
            let (block, zero, offset) = (r.u32("task table")?, r.u32("task table")?, r.u64("task table")?);
            if zero != 0 {
                return Err(bin_err("a reserved field of the task table is not zero"));
            }
            placed.push((block, offset));
        }
    }
    let index = (0..=num_tasks).map(|_| r.u64("predecessor index")).collect::<Result<Vec<u64>>>()?;
    if index[0] != 0 || index[num_tasks as usize] != num_edges || index.windows(2).any(|w| w[0] > w[1]) {
        return Err(bin_err(format!("the predecessor index does not run from 0 to {num_edges} in order")));
    }
    let mut g = TaskGraph::new(name, num_ranks);
    let mut deps = Vec::new();
    for (t, m) in tasks.into_iter().enumerate() {
        deps.clear();
        for _ in index[t]..index[t + 1] {
            let (p, kind) = (r.u32("dependency table")?, r.u32("dependency table")?);
            deps.push((
                p,
                match kind {
                    0 => Dependency::Complete,
                    1 => Dependency::Relay,
                    _ => {
                        return Err(bin_err(format!(
                            "dependency of task {t} has unknown kind {kind} (0 complete, 1 relay)"
                        )))
                    }
                },
            ));
        }
        g.add_task(m, &deps).map_err(|e| bin_err(e.to_string()))?;
    }
    let g = g.with_placement(placement).map_err(|e| bin_err(e.to_string()))?;
    if header.version >= 2 {
        // The collective, block size and blocks must be what the tasks imply.
        let found = blocks::derive_dag(&g);
        let code = found.as_ref().map_or((4, 0), |b| collective_code(b.collective));
        let block_bytes = found.as_ref().map_or(0, |b| b.block_bytes);
        if code != (header.collective, header.root) || block_bytes != header.block_bytes {
            return Err(bin_err(format!(
                "the header's collective {} (root {}, blocks of {} bytes) is not what the tasks add up to",
                header.collective, header.root, header.block_bytes
            )));
        }
        for (t, &(block, offset)) in placed.iter().enumerate() {
            let want = found.as_ref().map_or((u32::MAX, 0), |b| (b.block[t], b.offset[t]));
            if (block, offset) != want {
                return Err(bin_err(format!(
                    "task {t} names block {block} at offset {offset}, not the piece it carries"
                )));
            }
        }
    }
    Ok(g)
}

/// Write a task DAG to `path`: `.json` as JSON, `.nws` in the binary DAG form.
pub fn save_dag(g: &TaskGraph, path: &Path) -> Result<()> {
    let bytes = match extension(path)?.as_str() {
        "json" => g.to_json().into_bytes(),
        _ => dag_to_binary(g),
    };
    std::fs::write(path, bytes)
        .map_err(|e| NetweaveError::InvalidParameter(format!("cannot write {}: {e}", path.display())))
}

/// Read a task DAG from `path` (format from the extension, as in [`save_dag`]).
pub fn load_dag(path: &Path) -> Result<TaskGraph> {
    match extension(path)?.as_str() {
        "json" => TaskGraph::from_json(&input::read_text(path)?),
        _ => dag_from_binary(&input::read_binary(path, &MAGIC, "NWSCHED")?),
    }
}

/// A schedule file of either form, as read by [`load_workload`].
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// A phased schedule (`"form": "phases"`, binary form 0).
    Phases(Schedule),
    /// A dependency DAG (`"form": "dag"`, binary form 1).
    Dag(TaskGraph),
}

/// Read a schedule file of either form (phases or DAG, `.json` or `.nws`), telling them
/// apart by the JSON `form` field or the binary header's form word.
pub fn load_workload(path: &Path) -> Result<Workload> {
    match extension(path)?.as_str() {
        "json" => {
            let text = input::read_text(path)?;
            #[derive(Deserialize)]
            struct Form {
                form: Option<String>,
            }
            let form: Form = serde_json::from_str(&text).map_err(|e| json_err(e.line(), e.to_string()))?;
            if form.form.as_deref() == Some(super::dag::DAG_FORM) {
                Ok(Workload::Dag(TaskGraph::from_json(&text)?))
            } else {
                Ok(Workload::Phases(from_json(&text)?))
            }
        }
        _ => {
            let data = input::read_binary(path, &MAGIC, "NWSCHED")?;
            // Magic (8 bytes), version (u32), form (u32): a short file is left to the reader to name.
            let form = data.get(12..16).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            if form == Some(FORM_DAG) {
                Ok(Workload::Dag(dag_from_binary(&data)?))
            } else {
                Ok(Workload::Phases(from_binary(&data)?))
            }
        }
    }
}

/// Write `s` to `path`: `.json` as JSON, `.nws` as binary NWSCHED.
pub fn save(s: &Schedule, path: &Path) -> Result<()> {
    save_with(s, path, ExecutorHint::Auto)
}

/// [`save`], a binary file asking runtimes for `executor` (JSON files do not carry it).
pub fn save_with(s: &Schedule, path: &Path, executor: ExecutorHint) -> Result<()> {
    let bytes = match extension(path)?.as_str() {
        "json" => to_json(s).into_bytes(),
        _ => to_binary_with(s, executor)?,
    };
    std::fs::write(path, bytes)
        .map_err(|e| NetweaveError::InvalidParameter(format!("cannot write {}: {e}", path.display())))
}

/// Read a schedule from `path` (format from the extension, as in [`save`]).
pub fn load(path: &Path) -> Result<Schedule> {
    match extension(path)?.as_str() {
        "json" => from_json(&input::read_text(path)?),
        _ => from_binary(&input::read_binary(path, &MAGIC, "NWSCHED")?),
    }
}

fn extension(path: &Path) -> Result<String> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "json" | "nws" => Ok(ext),
        _ => crate::invalid!("{}: unknown schedule file extension (use .json or .nws)", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Schedule {
        let phases = vec![
            vec![Message { src: 0, dst: 2, bytes: 7 }, Message { src: 0, dst: 1, bytes: 9 }],
            vec![],
            // The total is exactly 2^64 - 1, the most a schedule carries.
            vec![Message { src: 2, dst: 0, bytes: u64::MAX - 16 }, Message { src: 1, dst: 1, bytes: 0 }],
        ];
        Schedule::from_phases("sample ünïcode", 3, phases)
            .unwrap()
            .with_placement(vec![5, 3, 4])
            .unwrap()
            .with_collective(Collective::Gather { root: 1 }, Delivery::Forwarded)
            .with_concurrent_sends(4)
            .unwrap()
    }

    #[test]
    fn both_formats_round_trip() {
        for s in [sample(), Schedule::shift_alltoall(6, 3).unwrap(), sample().with_permutation_claim(true)] {
            assert_eq!(from_json(&to_json(&s)).unwrap(), s);
            assert_eq!(from_binary(&to_binary(&s).unwrap()).unwrap(), s.clone().canonicalized());
        }
    }

    #[test]
    fn binary_layout_is_as_documented() {
        let s = Schedule::shift_alltoall(3, 10).unwrap();
        let b = to_binary(&s).unwrap();
        // header 64, name "alltoall-shift(N=3)" 19 → 24, placement 12 → 16, index 2·4·8,
        // records 2·6·32, block count 8, 6 block ids 24
        assert_eq!(b.len(), 64 + 24 + 16 + 64 + 384 + 8 + 24);
        assert_eq!(&b[56..64], &10u64.to_le_bytes()); // blocks of 10 bytes
        let send_table = 64 + 24 + 16 + 64;
        // rank 0's first send: phase 0 to rank 1, 10 bytes, 1 block, the first in the table
        assert_eq!(
            &b[send_table..send_table + 32],
            &[0, 0, 0, 0, 1, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        // ... which is block 0·3 + 1
        assert_eq!(&b[b.len() - 24..b.len() - 20], &1u32.to_le_bytes());
    }

    /// A version-1 file (16-byte records, no block table) as netweave wrote it before blocks.
    fn version1(s: &Schedule) -> Vec<u8> {
        let v2 = to_binary(s).unwrap();
        let (n, m) = (s.num_ranks() as usize, s.num_messages());
        let records = 64 + pad8(s.name().len()) + pad8(4 * n) + 16 * (n + 1);
        let mut v1 = v2[..records].to_vec();
        v1[8] = 1;
        v1[52..64].fill(0);
        for k in 0..2 * m {
            v1.extend_from_slice(&v2[records + 32 * k..records + 32 * k + 16]);
        }
        v1
    }

    #[test]
    fn version_1_files_are_still_read() {
        for s in [Schedule::shift_alltoall(5, 3).unwrap(), crate::traffic::alltoall::bruck(6, 8).unwrap()] {
            assert_eq!(from_binary(&version1(&s)).unwrap(), s);
        }
    }

    #[test]
    fn a_block_table_that_is_not_the_schedules_is_refused() {
        let s = crate::traffic::alltoall::bruck(5, 8).unwrap();
        let good = to_binary(&s).unwrap();
        assert_eq!(from_binary(&good).unwrap(), s);
        let msg = |b: &[u8]| from_binary(b).unwrap_err().to_string();
        let mut wrong_id = good.clone();
        let first_id = 64 + pad8(s.name().len()) + pad8(4 * 5) + 16 * 6 + 64 * s.num_messages() + 8;
        wrong_id[first_id] ^= 1;
        assert!(msg(&wrong_id).contains("not the ones it carries"), "{}", msg(&wrong_id));
        let mut wrong_size = good.clone();
        wrong_size[56] = 9;
        assert!(msg(&wrong_size).contains("blocks of 9 bytes"), "{}", msg(&wrong_size));
        // A schedule whose bytes are not whole blocks is written without blocks, and read back.
        let odd = Schedule::from_phases(
            "odd",
            2,
            vec![vec![Message { src: 0, dst: 1, bytes: 3 }], vec![Message { src: 1, dst: 0, bytes: 5 }]],
        )
        .unwrap()
        .with_collective(Collective::Alltoall, Delivery::Direct);
        let bin = to_binary(&odd).unwrap();
        assert_eq!(&bin[56..64], &0u64.to_le_bytes());
        assert_eq!(from_binary(&bin).unwrap(), odd);
    }

    #[test]
    fn dag_binary_round_trips_and_rejects_corruption() {
        let mut g = TaskGraph::new("dag ü", 4);
        let a = g.add_task(Message { src: 0, dst: 1, bytes: 100 }, &[]).unwrap();
        let b = g.add_task(Message { src: 1, dst: 2, bytes: 100 }, &[(a, Dependency::Relay)]).unwrap();
        g.add_task(
            Message { src: 3, dst: 0, bytes: u64::MAX },
            &[(a, Dependency::Complete), (b, Dependency::Complete)],
        )
        .unwrap();
        let g = g.with_placement(vec![3, 2, 1, 0]).unwrap();
        let bin = dag_to_binary(&g);
        assert_eq!(dag_from_binary(&bin).unwrap(), g);
        // header 64, name 6 → 8, placement 16, tasks 96, index 32, edges 24
        assert_eq!(bin.len(), 64 + 8 + 16 + 96 + 32 + 24);
        let msg = |b: &[u8]| dag_from_binary(b).unwrap_err().to_string();
        assert!(msg(&bin[..bin.len() - 8]).contains("implies"));
        let mut cyclic = bin.clone();
        cyclic[bin.len() - 24] = 2; // task 1 relays task 2: a forward edge
        assert!(msg(&cyclic).contains("task 1"), "{}", msg(&cyclic));
        let mut kind = bin.clone();
        kind[bin.len() - 4] = 7;
        assert!(msg(&kind).contains("unknown kind 7"));
        assert!(msg(&to_binary(&Schedule::shift_alltoall(3, 1).unwrap()).unwrap()).contains("form 0 is not a task DAG"));
        assert!(from_binary(&bin).unwrap_err().to_string().contains("form 1"));
    }

    #[test]
    fn malformed_files_give_clear_errors() {
        let good = to_binary(&Schedule::shift_alltoall(4, 1).unwrap()).unwrap();
        let msg = |b: &[u8]| from_binary(b).unwrap_err().to_string();
        assert!(msg(b"hello").contains("file ends inside the header"));
        assert!(msg(&[b"NWSCHEX\0".as_slice(), &good[8..]].concat()).contains("does not start with NWSCHED"));
        let mut v3 = good.clone();
        v3[8] = 3;
        assert!(msg(&v3).contains("version 3 is not supported"));
        assert!(msg(&good[..good.len() - 1]).contains("implies"));
        let mut bad_phase = good.clone();
        let send_table = good.len() - 8 - 4 * 12 - 2 * 32 * 12;
        bad_phase[send_table] = 77;
        assert!(msg(&bad_phase).contains("outside"));
        let mut bad_recv = good.clone();
        let last_recv_byte = good.len() - 8 - 4 * 12 - 32 + 15; // top byte of the last record's bytes
        bad_recv[last_recv_byte] = 1;
        assert!(msg(&bad_recv).contains("disagrees with the send table"));
        assert!(from_json("{").unwrap_err().to_string().contains("schedule JSON parse error"));
        let j = to_json(&Schedule::shift_alltoall(3, 1).unwrap());
        assert!(from_json(&j.replace("\"version\":1", "\"version\":9")).unwrap_err().to_string().contains("version 9"));
        assert!(from_json(&j.replace("[0,1,1]", "[0,7,1]")).unwrap_err().to_string().contains("outside"));
    }

    fn arb_schedule() -> impl Strategy<Value = Schedule> {
        (1u32..6, 0usize..5, any::<bool>(), 1u32..5, 0u8..5).prop_flat_map(|(n, phases, perm, nct, coll)| {
            // Up to 30 messages: sizes below 2^64 / 32 keep every total within 64 bits.
            let msg = (0..n, 0..n, 0..=u64::MAX >> 5).prop_map(|(src, dst, bytes)| Message { src, dst, bytes });
            (
                proptest::collection::vec(proptest::collection::vec(msg, 0..6), phases),
                proptest::collection::vec(0u32..100, n as usize),
            )
                .prop_map(move |(p, placement)| {
                    let collective = match coll {
                        0 => Collective::Alltoall,
                        1 => Collective::Allgather,
                        2 => Collective::Gather { root: n - 1 },
                        3 => Collective::Barrier,
                        _ => Collective::Custom,
                    };
                    let delivery = if perm { Delivery::Direct } else { Delivery::Forwarded };
                    Schedule::from_phases(format!("random {n}"), n, p)
                        .unwrap()
                        .with_placement(placement)
                        .unwrap()
                        .with_collective(collective, delivery)
                        .with_permutation_claim(perm)
                        .with_concurrent_sends(nct)
                        .unwrap()
                })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn random_schedules_round_trip(s in arb_schedule()) {
            prop_assert_eq!(from_json(&to_json(&s)).unwrap(), s.clone());
            prop_assert_eq!(from_binary(&to_binary(&s).unwrap()).unwrap(), s.canonicalized());
        }

        #[test]
        fn corrupted_binary_never_panics(s in arb_schedule(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4), cut in any::<usize>()) {
            let mut b = to_binary(&s).unwrap();
            for (at, v) in flips {
                let len = b.len();
                b[at % len] ^= v;
            }
            // Either a clean error or a schedule that itself round-trips.
            if let Ok(back) = from_binary(&b) {
                prop_assert_eq!(from_binary(&to_binary(&back).unwrap()).unwrap(), back);
            }
            let _ = from_binary(&b[..cut % (b.len() + 1)]);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), text in ".{0,200}") {
            let mut with_magic = MAGIC.to_vec();
            with_magic.extend_from_slice(&bytes);
            prop_assert!(from_binary(&with_magic).is_err() || bytes.len() >= 56);
            let _ = from_binary(&bytes);
            let _ = from_json(&text);
        }

        #[test]
        fn corrupted_json_never_panics(s in arb_schedule(), at in any::<usize>(), c in any::<char>()) {
            let mut j: Vec<char> = to_json(&s).chars().collect();
            let len = j.len();
            j[at % len] = c;
            let text: String = j.into_iter().collect();
            let _ = from_json(&text);
        }
    }
}
