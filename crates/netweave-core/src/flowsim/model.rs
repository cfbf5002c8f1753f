//! The event loop: messages issued by their executor, streamed at their max-min rates,
//! delivered one path latency after their tail left.

use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use crate::error::{NetweaveError, Result};
use crate::routing::RoutingTable;
use crate::topology::Topology;
use crate::traffic::dag::Dependency;

use super::loss::{BytesLeft, Losses};
use super::maxmin::FairShare;
use super::report::{FlowReport, SeriesPoint};
use super::workload::{bytes_per_s, Control, Workload};
use super::FlowConfig;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventKind {
    /// The message's data starts streaming (after the overhead).
    Start,
    /// The flow's last byte may leave now. Only the flow's earliest pending drain event counts;
    /// if its rate has dropped since, the event finds the flow unfinished and moves on.
    Drain,
    /// The message's tail reaches its receiver.
    Deliver,
    /// The receiver has processed the message (its receive cost paid): it is delivered.
    Received,
    /// One of the task's dependencies is met.
    Satisfy,
    /// A barrier releases this phase.
    Release,
    /// A flow stalled by a retransmission timeout streams again.
    Resume,
    /// A tail-loss probe has repaired the flow's lost tail: it has now streamed its bytes.
    Repaired,
}

#[derive(Clone, Copy, Debug)]
struct Event {
    time: f64,
    seq: u64,
    kind: EventKind,
    id: u32,
}
impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Event {}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.time.total_cmp(&self.time).then_with(|| other.seq.cmp(&self.seq))
    }
}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Drain times within this relative distance are processed together (one reallocation).
const SAME_TIME: f64 = 1e-10;

pub(super) struct Sim<'a> {
    pub(super) topo: &'a Topology,
    pub(super) routes: &'a RoutingTable,
    pub(super) work: Workload,
    pub(super) control: Control,
    pub(super) config: &'a FlowConfig,
    pub(super) progress: Option<&'a AtomicU64>,
    pub(super) fair: FairShare,
    events: BinaryHeap<Event>,
    pub(super) seq: u64,
    pub(super) now: f64,
    // Per message.
    pub(super) remaining: Vec<f64>,
    pub(super) rate: Vec<f64>,
    pub(super) last: Vec<f64>,
    /// Time of the flow's earliest pending drain event (infinity if none).
    pub(super) scheduled: Vec<f64>,
    /// End of the instant being processed (events up to here count as simultaneous).
    pub(super) horizon: f64,
    /// Tail has been streamed but a relay's upstream has not fully arrived yet.
    pub(super) drained_waiting: Vec<bool>,
    pub(super) delivered: Vec<bool>,
    // Per host.
    pub(super) free: Vec<u32>,
    pub(super) queue: Vec<VecDeque<u32>>,
    pub(super) host_finish: Vec<f64>,
    /// When each host has processed every message that reached it so far (receive costs).
    receiver_free: Vec<f64>,
    // Per resource accounting.
    pub(super) res_last: Vec<f64>,
    pub(super) res_busy: Vec<f64>,
    // Pending flow changes of the current instant.
    pub(super) joining: Vec<u32>,
    pub(super) leaving: Vec<u32>,
    pub(super) changed: Vec<(u32, f64)>,
    pub(super) delivered_count: u64,
    pub(super) sync_messages: u64,
    pub(super) active: u32,
    pub(super) aggregate_rate: f64,
    pub(super) series: Vec<SeriesPoint>,
    /// The lossy model's state on an Ethernet fabric; `None` on a lossless one.
    pub(super) losses: Option<Losses>,
    /// Scratch of the lossy model: flows (re)started this instant, and their victims.
    joined_now: Vec<u32>,
    victims: Vec<u32>,
    /// Drain events of a lossy instant's first refill, held back until its victims are known:
    /// a victim's drain is void the moment it is made, so it never enters the heap. Each keeps
    /// the sequence number it was given, so the heap's order is what it would have been.
    held_drains: Vec<Event>,
    hold_drains: bool,
    /// Whether void drains are held back at all (always, but for the test that checks holding
    /// them back changes no prediction).
    pub(super) hold_void_drains: bool,
}

impl<'a> Sim<'a> {
    pub(super) fn new(
        topo: &'a Topology,
        routes: &'a RoutingTable,
        work: Workload,
        control: Control,
        config: &'a FlowConfig,
        progress: Option<&'a AtomicU64>,
    ) -> Self {
        let n = work.len();
        let nh = topo.num_hosts();
        let nres = work.capacity.len();
        let fair = FairShare::new(work.capacity.clone(), work.path_off.clone(), work.path_res.clone());
        let losses = Losses::new(topo, &work, &config.tcp);
        Sim {
            topo,
            routes,
            control,
            config,
            progress,
            fair,
            events: BinaryHeap::new(),
            seq: 0,
            now: 0.0,
            remaining: vec![0.0; n],
            rate: vec![0.0; n],
            last: vec![0.0; n],
            scheduled: vec![f64::INFINITY; n],
            horizon: 0.0,
            drained_waiting: vec![false; n],
            delivered: vec![false; n],
            free: vec![config.nct.min(config.host_streams.unwrap_or(u32::MAX)); nh],
            queue: vec![VecDeque::new(); nh],
            host_finish: vec![0.0; nh],
            receiver_free: vec![0.0; nh],
            res_last: vec![0.0; nres],
            res_busy: vec![0.0; nres],
            joining: Vec::new(),
            leaving: Vec::new(),
            changed: Vec::new(),
            delivered_count: 0,
            sync_messages: 0,
            active: 0,
            aggregate_rate: 0.0,
            series: Vec::new(),
            losses,
            joined_now: Vec::new(),
            victims: Vec::new(),
            held_drains: Vec::new(),
            hold_drains: false,
            hold_void_drains: true,
            work,
        }
    }

    fn push(&mut self, time: f64, kind: EventKind, id: u32) {
        self.seq += 1;
        self.events.push(Event { time, seq: self.seq, kind, id });
    }

    pub(super) fn run(mut self) -> Result<FlowReport> {
        self.begin();
        self.reallocate();
        while let Some(first) = self.events.pop() {
            let horizon = first.time + first.time.abs() * SAME_TIME;
            self.horizon = horizon;
            self.now = first.time;
            self.handle(first);
            // Everything due at this instant, including what handling it scheduled.
            while let Some(e) = self.events.peek() {
                if e.time > horizon {
                    break;
                }
                let e = self.events.pop().expect("peeked");
                self.handle(e);
            }
            self.reallocate();
        }
        let n = self.work.len();
        if self.delivered_count as usize != n {
            return Err(NetweaveError::Schedule(format!(
                "{} of {n} messages never ran: the dependencies can never all be met",
                n - self.delivered_count as usize
            )));
        }
        Ok(self.report())
    }

    fn begin(&mut self) {
        match &self.control {
            Control::Sync { .. } => self.push(0.0, EventKind::Release, 0),
            Control::Async => {
                for m in 0..self.work.len() as u32 {
                    self.queue[self.work.src[m as usize] as usize].push_back(m);
                }
                for h in 0..self.queue.len() {
                    self.dispatch(h);
                }
            }
            Control::LocalSync { next_step, .. } => {
                for h in 0..next_step.len() {
                    self.advance_host(h);
                }
            }
            Control::Dag { waiting, .. } => {
                let roots: Vec<u32> = (0..waiting.len() as u32).filter(|&t| waiting[t as usize] == 0).collect();
                for t in roots {
                    self.ready(t);
                }
            }
        }
    }

    fn handle(&mut self, e: Event) {
        let m = e.id as usize;
        match e.kind {
            EventKind::Start => self.start(e.id),
            EventKind::Drain => {
                if e.time != self.scheduled[m] || self.rate[m] == 0.0 {
                    return; // superseded by an earlier event, or already drained
                }
                self.scheduled[m] = f64::INFINITY;
                let done = self.last[m] + self.remaining[m] / self.rate[m];
                if done > self.horizon {
                    self.scheduled[m] = done;
                    self.push(done, EventKind::Drain, e.id);
                    return;
                }
                {
                    self.leaving.push(e.id);
                    self.active -= 1;
                    self.aggregate_rate -= self.rate[m];
                    self.rate[m] = 0.0;
                    self.remaining[m] = 0.0;
                    // A tail lost in a burst leaves when its probe has resent it.
                    let repaired = self.losses.as_ref().map_or(0.0, |l| l.repaired_at[m]);
                    if repaired > self.now {
                        self.push(repaired, EventKind::Repaired, e.id);
                    } else {
                        self.tail_streamed(e.id);
                    }
                }
            }
            EventKind::Deliver => self.arrive(e.id),
            EventKind::Repaired => self.tail_streamed(e.id),
            EventKind::Received => self.deliver(e.id),
            EventKind::Resume => {
                // The loss model sees it restart among this instant's joiners.
                self.last[m] = self.now;
                self.active += 1;
                self.joining.push(e.id);
            }
            EventKind::Satisfy => {
                let Control::Dag { waiting, .. } = &mut self.control else { unreachable!() };
                waiting[m] -= 1;
                if waiting[m] == 0 {
                    self.ready(e.id);
                }
            }
            EventKind::Release => {
                let Control::Sync { phase_off, outstanding } = &self.control else { unreachable!() };
                let mut p = m;
                // Skip empty phases at once.
                while p < outstanding.len() && outstanding[p] == 0 {
                    p += 1;
                }
                if p < outstanding.len() {
                    let (lo, hi) = (phase_off[p], phase_off[p + 1]);
                    for msg in lo..hi {
                        self.queue[self.work.src[msg as usize] as usize].push_back(msg);
                    }
                    for msg in lo..hi {
                        self.dispatch(self.work.src[msg as usize] as usize);
                    }
                }
            }
        }
    }

    /// Queue a message at its sender and start it if a controller is free.
    fn ready(&mut self, m: u32) {
        let h = self.work.src[m as usize] as usize;
        self.queue[h].push_back(m);
        self.dispatch(h);
    }

    fn dispatch(&mut self, h: usize) {
        while self.free[h] > 0 {
            let Some(m) = self.queue[h].pop_front() else { break };
            self.free[h] -= 1;
            let t = self.now + self.config.overhead_s;
            if t == self.now {
                self.start(m);
            } else {
                self.push(t, EventKind::Start, m);
            }
        }
    }

    fn start(&mut self, m: u32) {
        let mi = m as usize;
        if let Control::Dag { succ_off, succ, .. } = &self.control {
            // Relays may start once this message's head reaches them.
            let head = self.now + self.work.latency[mi];
            let relays: Vec<u32> = succ[succ_off[mi] as usize..succ_off[mi + 1] as usize]
                .iter()
                .filter(|s| s.1 == Dependency::Relay)
                .map(|s| s.0)
                .collect();
            for r in relays {
                self.push(head, EventKind::Satisfy, r);
            }
        }
        if self.work.wire[mi] == 0 {
            self.tail_streamed(m);
        } else {
            self.remaining[mi] = self.work.wire[mi] as f64;
            self.last[mi] = self.now;
            self.active += 1;
            self.joining.push(m);
        }
    }

    /// The flow has streamed all its bytes; a relay may still wait for its upstream.
    fn tail_streamed(&mut self, m: u32) {
        if let Control::Dag { relay_of, .. } = &self.control {
            let up = relay_of[m as usize];
            if up != u32::MAX && !self.delivered[up as usize] {
                self.drained_waiting[m as usize] = true;
                return;
            }
        }
        self.tail_left(m);
    }

    /// The message's tail leaves its sender now.
    fn tail_left(&mut self, m: u32) {
        let mi = m as usize;
        let src = self.work.src[mi] as usize;
        self.host_finish[src] = self.host_finish[src].max(self.now);
        self.free[src] += 1;
        let t = self.now + self.work.latency[mi];
        self.push(t, EventKind::Deliver, m);
        match &mut self.control {
            Control::LocalSync { out_left, steps, step_of, .. } => {
                out_left[src * *steps + step_of[mi] as usize] -= 1;
                self.advance_host(src);
            }
            Control::Dag { succ_off, succ, .. } => {
                // A later task of the same sender needs no sync: the sender knows its data left.
                let same: Vec<u32> = succ[succ_off[mi] as usize..succ_off[mi + 1] as usize]
                    .iter()
                    .filter(|s| s.1 == Dependency::Complete && self.work.src[s.0 as usize] as usize == src)
                    .map(|s| s.0)
                    .collect();
                for s in same {
                    self.push(self.now, EventKind::Satisfy, s);
                }
            }
            _ => {}
        }
        self.dispatch(src);
    }

    /// The message's tail has reached its receiver, which processes what arrives one message
    /// at a time when receiving costs anything.
    fn arrive(&mut self, m: u32) {
        let mi = m as usize;
        let cost = self.config.receive_s + self.config.receive_per_byte_s * self.work.payload[mi] as f64;
        if cost == 0.0 {
            return self.deliver(m);
        }
        let dst = self.work.dst[mi] as usize;
        let done = self.now.max(self.receiver_free[dst]) + cost;
        self.receiver_free[dst] = done;
        self.push(done, EventKind::Received, m);
    }

    fn deliver(&mut self, m: u32) {
        let mi = m as usize;
        self.delivered[mi] = true;
        self.delivered_count += 1;
        if let Some(p) = self.progress {
            p.fetch_add(1, AtomicOrdering::Relaxed);
        }
        let dst = self.work.dst[mi] as usize;
        self.host_finish[dst] = self.host_finish[dst].max(self.now);
        match &mut self.control {
            Control::Sync { .. } => {
                let p = self.phase_of_sync(m);
                let Control::Sync { outstanding, .. } = &mut self.control else { unreachable!() };
                outstanding[p] -= 1;
                if outstanding[p] == 0 && p + 1 < outstanding.len() {
                    self.push(self.now + self.config.barrier_s, EventKind::Release, p as u32 + 1);
                }
            }
            Control::Async => {}
            Control::LocalSync { in_left, steps, step_of, .. } => {
                in_left[dst * *steps + step_of[mi] as usize] -= 1;
                self.advance_host(dst);
            }
            Control::Dag { succ_off, succ, relay_of, .. } => {
                let src = self.work.src[mi];
                let mut due: Vec<(f64, u32)> = Vec::new();
                let mut relays_done: Vec<u32> = Vec::new();
                for &(s, kind) in &succ[succ_off[mi] as usize..succ_off[mi + 1] as usize] {
                    let next_sender = self.work.src[s as usize];
                    match kind {
                        Dependency::Relay => {
                            if relay_of[s as usize] == m && self.drained_waiting[s as usize] {
                                relays_done.push(s);
                            }
                        }
                        Dependency::Complete if next_sender == src => {} // met when the tail left
                        Dependency::Complete if next_sender as usize == dst => due.push((self.now, s)),
                        Dependency::Complete => due.push((f64::NAN, s)),
                    }
                }
                for (t, s) in due {
                    let t = if t.is_nan() {
                        self.sync_messages += 1;
                        self.now + self.sync_delay(dst, self.work.src[s as usize] as usize)
                    } else {
                        t
                    };
                    self.push(t, EventKind::Satisfy, s);
                }
                for r in relays_done {
                    self.drained_waiting[r as usize] = false;
                    self.tail_left(r);
                }
            }
        }
    }

    /// Phase of message `m` under the `Sync` executor (binary search in the phase offsets).
    fn phase_of_sync(&self, m: u32) -> usize {
        let Control::Sync { phase_off, .. } = &self.control else { unreachable!() };
        phase_off.partition_point(|&o| o <= m) - 1
    }

    /// Time a 1-byte sync message takes from host `from` to host `to`: path latency plus its
    /// serialisation at the path's narrowest link (too small to share bandwidth with data).
    fn sync_delay(&self, from: usize, to: usize) -> f64 {
        if from == to {
            return 0.0;
        }
        let mut path = Vec::new();
        if self.routes.path(self.topo, from, to, &mut path).is_err() {
            // Paths were checked for every data message; a sync pair not among them is
            // charged the reverse path, which exists whenever the data could flow.
            path.clear();
            let _ = self.routes.path(self.topo, to, from, &mut path);
        }
        let latency: f64 = path.iter().map(|&c| self.topo.link(c / 2).spec.latency_ns).sum::<f64>() * 1e-9;
        let narrowest =
            path.iter().map(|&c| bytes_per_s(self.topo.link(c / 2).spec.bandwidth_gbps)).fold(f64::INFINITY, f64::min);
        let wire = self.config.wire_bytes(1) as f64;
        self.config.sync_s.unwrap_or(self.config.overhead_s)
            + latency
            + if narrowest.is_finite() { wire / narrowest } else { 0.0 }
    }

    /// Local sync: release host `h`'s next steps while their conditions hold.
    fn advance_host(&mut self, h: usize) {
        loop {
            let Control::LocalSync { steps, off, by_host_step, in_left, out_left, next_step, .. } = &mut self.control
            else {
                unreachable!()
            };
            let s = next_step[h] as usize;
            if s >= *steps {
                return;
            }
            if s > 0 && (in_left[h * *steps + s - 1] > 0 || out_left[h * *steps + s - 1] > 0) {
                return;
            }
            next_step[h] += 1;
            let cell = h * *steps + s;
            let (lo, hi) = (off[cell] as usize, off[cell + 1] as usize);
            self.queue[h].extend(by_host_step[lo..hi].iter().copied());
            self.dispatch(h);
        }
    }

    /// Every flow's bytes left now (each count is brought up to date only when its rate changes).
    fn bytes_left(&self) -> BytesLeft<'_> {
        BytesLeft { at_last_change: &self.remaining, rate: &self.rate, since: &self.last, now: self.now }
    }

    /// Apply this instant's joins and leaves to the bandwidth shares and reschedule drains;
    /// on a lossy fabric, then stall the flows that time out (see [`super::loss`]).
    fn reallocate(&mut self) {
        if self.losses.is_none() || self.joining.is_empty() {
            self.refill();
            return;
        }
        self.joined_now.clear();
        self.joined_now.extend_from_slice(&self.joining);
        self.hold_drains = self.hold_void_drains;
        self.refill();
        self.hold_drains = false;
        let losses = self.losses.as_mut().expect("checked above");
        self.victims.clear();
        // `bytes_left()` would borrow all of `self`, which `losses` holds mutably: built by field.
        let left = BytesLeft { at_last_change: &self.remaining, rate: &self.rate, since: &self.last, now: self.now };
        losses.victims(&self.fair, &self.joined_now, left, &mut self.victims);
        if !self.victims.is_empty() {
            self.stall_victims();
        }
        // Drains still due as scheduled enter the heap; the stalled flows' are dropped (their
        // pending time is void), as are any a second refill moved earlier.
        for i in 0..self.held_drains.len() {
            let e = self.held_drains[i];
            let f = e.id as usize;
            if self.scheduled[f] == e.time && self.rate[f] != 0.0 {
                self.events.push(e);
            }
        }
        self.held_drains.clear();
    }

    /// Stall this instant's victims for their timeouts and refill once for all of them.
    fn stall_victims(&mut self) {
        for i in 0..self.victims.len() {
            let f = self.victims[i];
            let timeout = self.losses.as_ref().expect("checked above").stall_s(f);
            self.stall(f, timeout);
        }
        self.refill();
    }

    /// Stop flow `f` streaming for `timeout` seconds: it keeps the bytes it has sent.
    fn stall(&mut self, f: u32, timeout: f64) {
        let fi = f as usize;
        self.remaining[fi] = self.bytes_left().of(f);
        self.last[fi] = self.now;
        self.aggregate_rate -= self.rate[fi];
        self.rate[fi] = 0.0;
        self.scheduled[fi] = f64::INFINITY; // its pending drain event is void
        self.active -= 1;
        self.leaving.push(f);
        self.push(self.now + timeout, EventKind::Resume, f);
    }

    /// Refill the max-min shares after this instant's joins and leaves; reschedule drains.
    fn refill(&mut self) {
        if self.joining.is_empty() && self.leaving.is_empty() {
            return;
        }
        let now = self.now;
        let (res_last, res_busy) = (&mut self.res_last, &mut self.res_busy);
        self.fair.update(
            &self.leaving,
            &self.joining,
            |r, used| {
                let r = r as usize;
                if used > 0.0 {
                    res_busy[r] += now - res_last[r];
                }
                res_last[r] = now;
            },
            &mut self.changed,
        );
        self.leaving.clear();
        self.joining.clear();
        for i in 0..self.changed.len() {
            let (f, _) = self.changed[i];
            let fi = f as usize;
            let new_rate = self.fair.rate(f);
            self.remaining[fi] = self.bytes_left().of(f);
            self.last[fi] = now;
            self.aggregate_rate += new_rate - self.rate[fi];
            self.rate[fi] = new_rate;
            // Only an earlier drain needs a new event; a later one is found when the pending
            // event fires (rates mostly fall when flows join, so this saves most pushes).
            let t = now + self.remaining[fi] / new_rate;
            if t < self.scheduled[fi] {
                self.scheduled[fi] = t;
                if self.hold_drains {
                    self.seq += 1;
                    self.held_drains.push(Event { time: t, seq: self.seq, kind: EventKind::Drain, id: f });
                } else {
                    self.push(t, EventKind::Drain, f);
                }
            }
        }
        if self.config.series {
            self.series.push(SeriesPoint {
                time_s: now,
                active_flows: self.active,
                aggregate_rate_bps: self.aggregate_rate.max(0.0),
            });
        }
    }
}
