//! Port buffers and TCP losses: what the flow model adds on a lossy (Ethernet) fabric.
//!
//! On a lossless fabric the max-min share is the whole story. On Ethernet every switch port
//! (a directed channel leaving a switch) queues at most [`port_buffer_bytes`] and drops the
//! rest, and the senders are TCP connections. A flow-level model cannot follow segments, so it
//! keeps what decides a collective's time: *retransmission timeouts*. A loss that fast
//! retransmit (or Linux's RACK and tail-loss probe) repairs costs a round trip and leaves the
//! port busy — the max-min rate already stands for it. A timeout stalls the flow for the RTO
//! (Linux's `RTO_min`, 200 ms, against microseconds of transfer), and when every flow left at
//! a port is stalled the port idles: the goodput collapse of incast (Phanishayee et al.,
//! FAST'08; Chen et al., WREN'09; Zhang et al., INFOCOM'11 call the two causes block-head and
//! block-tail timeouts).
//!
//! Timeouts come from *synchronised bursts*: flows that start together at a port, each with a
//! window too small to recover by duplicate ACKs, into a queue that stays full longer than
//! their tail-loss probes wait. Flows that already stream there have their window open (ACK
//! clocked, fast retransmit) and are never charged one. The rule, applied at every instant
//! flows (re)start, per buffered port `p` (capacity `C`, buffer `B`, longest round trip
//! through it `RTT`), over the *burst* — the flows starting or resuming there now:
//!
//! 1. **Overload.** `p` must be saturated and its offered load — the flows already there at
//!    their rates, the burst at what the rest of its paths would give it (the least equal
//!    share `C_q / n_q` over its other resources) — must exceed `C`. A port that receives no
//!    faster than it sends (an all-to-all whose senders split their links) builds no queue.
//! 2. **Overflow.** The burst's first windows — `min(IW, ⌈S/MSS⌉)` segments for a flow with
//!    `S` bytes left ([`TcpModel::initial_window_segments`]) — must exceed the `P = (B +
//!    C·RTT) / MSS` segments the port holds: small messages fit and lose nothing.
//! 3. **Outlasting the probe.** The queue stays full while the burst's bytes drain, `D =
//!    ΣS / C`. Linux probes a tail loss after about two round trips, `2·(B/C + RTT)` with a
//!    full queue, plus a fixed part ([`TcpModel::probe_s`]); if `D` is shorter, the probes
//!    meet a draining queue and repair every loss without a timeout.
//! 4. **Timeouts.** Otherwise `p` keeps `K = max(1, ⌊P / w⌋)` flows whose window `w`
//!    ([`TcpModel::window_segments`]) lets them ride out the overshoot, or the share
//!    [`TcpModel::survivor_fraction`] of all its flows if more. Flows already streaming keep
//!    their places (ACK clocked, they recover by fast retransmit); the burst loses the rest,
//!    the higher message indices first (every member started at the same instant). A flow
//!    resuming into a port still busy with the survivors of its round thus times out again.
//!
//! A victim stops streaming for [`TcpModel::timeout_s`] and restarts where it was (its bytes
//! already delivered stay delivered), meeting the rule again. No exponential backoff: its
//! one-segment retransmission gets through, and Linux times a later loss afresh.
//!
//! Every segment a burst overflows is sent again: the victims' first windows and the rest of
//! the overflow spread over the survivors are counted as retransmitted bytes on their paths.
//!
//! Each instant costs the joining flows' paths, never a scan of the flows already at a port.
//! Where the model is wrong is in `docs/flowsim.md`; the parameters' defaults are Linux's and
//! the emulated cluster's, and `netweave emulate calibrate` fits them to a measured fabric.
//!
//! [`port_buffer_bytes`]: crate::topology::link_layer::Switching::port_buffer_bytes

use serde::Serialize;

use crate::error::Result;
use crate::topology::Topology;

use super::maxmin::FairShare;
use super::workload::Workload;

/// Linux's minimum retransmission timeout (`TCP_RTO_MIN`).
pub const LINUX_RTO_MIN_S: f64 = 0.2;
/// TCP payload per full 1,500-byte Ethernet frame (IPv4 and TCP headers without options).
pub const ETHERNET_MSS: u64 = 1460;
/// Linux's initial congestion window (`TCP_INIT_CWND`): what a starting flow bursts.
pub const LINUX_INITIAL_WINDOW_SEGMENTS: f64 = 10.0;
/// Segments of window a flow needs at a port to recover its losses by fast retransmit: the
/// initial window it overshoots with plus the three duplicate ACKs fast retransmit waits for
/// and the lost segment itself.
pub const RECOVERY_WINDOW_SEGMENTS: f64 = 14.0;
/// Share of the flows of an overflowing burst that escape a timeout, measured on emulated
/// incast (1 MB per sender, 4–31 senders, 64 KiB port buffer: about 40 % of the flows still
/// waiting finish in each RTO round).
pub const INCAST_SURVIVOR_FRACTION: f64 = 0.4;
/// Fixed part of the wait before a tail-loss probe on the emulated cluster, seconds: Linux
/// waits two smoothed round trips plus 2 ms (`TCP_TIMEOUT_MIN_US`); host scheduling on the
/// emulating machine adds a few more. Bounded by emulated gathers of 16 KiB per sender on a
/// 64 KiB port: bursts draining in 5.5 and 9.5 ms (probe 2·1.5 and 2·2.5 ms plus this) saw no
/// timeout, one draining in 13.6 ms (2·2 ms plus this) did — so between 4.5 and 9.6 ms.
pub const EMULATED_PROBE_S: f64 = 0.007;

/// The TCP parameters of the lossy model. [`TcpModel::default`] holds every default in one
/// place; a calibration file replaces them with measured values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TcpModel {
    /// Payload bytes per TCP segment (MSS).
    pub segment_bytes: u64,
    /// How long a flow that timed out stops streaming, seconds (Linux `RTO_min` by default).
    pub timeout_s: f64,
    /// Segments of window a flow needs at a port to escape timeouts (see the module doc).
    pub window_segments: f64,
    /// Share of the flows of an overflowing burst that escape a timeout.
    pub survivor_fraction: f64,
    /// Segments a starting flow sends before its first ACK returns (its initial window).
    pub initial_window_segments: f64,
    /// Fixed part of the wait before a tail-loss probe, seconds (the probe also waits two
    /// round trips through the full queue).
    pub probe_s: f64,
}

impl Default for TcpModel {
    fn default() -> Self {
        TcpModel {
            segment_bytes: ETHERNET_MSS,
            timeout_s: LINUX_RTO_MIN_S,
            window_segments: RECOVERY_WINDOW_SEGMENTS,
            survivor_fraction: INCAST_SURVIVOR_FRACTION,
            initial_window_segments: LINUX_INITIAL_WINDOW_SEGMENTS,
            probe_s: EMULATED_PROBE_S,
        }
    }
}

impl TcpModel {
    /// Check every parameter names a meaningful value.
    pub fn check(&self) -> Result<()> {
        if self.segment_bytes == 0 {
            return crate::invalid!("TCP segment size must be at least 1 byte");
        }
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return crate::invalid!(
                "retransmission timeout must be a positive number of seconds, got {}",
                self.timeout_s
            );
        }
        for (name, v) in [("window per flow", self.window_segments), ("initial window", self.initial_window_segments)] {
            if !(v.is_finite() && v >= 1.0) {
                return crate::invalid!("{name} must be at least 1 segment, got {v}");
            }
        }
        if !(self.survivor_fraction.is_finite() && (0.0..=1.0).contains(&self.survivor_fraction)) {
            return crate::invalid!("survivor fraction must lie in 0..1, got {}", self.survivor_fraction);
        }
        if !(self.probe_s.is_finite() && self.probe_s >= 0.0) {
            return crate::invalid!("loss probe time must be a non-negative number of seconds, got {}", self.probe_s);
        }
        Ok(())
    }
}

/// Per-run state of the lossy model.
pub(super) struct Losses {
    /// Segments port `r` holds, `(B + C·RTT) / MSS`; infinite for resources that never drop
    /// (host NICs push back on their sockets, host limits are not queues).
    held_segments: Vec<f64>,
    /// Flows port `r` keeps through an overflow, `max(1, ⌊held / window⌋)`.
    clear_flows: Vec<u32>,
    /// How long a burst must keep port `r` full to outlast the tail-loss probes, seconds.
    probe_s: Vec<f64>,
    survivor_fraction: f64,
    segment_bytes: f64,
    initial_window: f64,
    pub(super) timeout_s: f64,
    /// Per flow: bytes sent again (the segments its bursts lost).
    pub(super) retransmitted: Vec<f64>,
    /// Scratch: per flow, chosen as a victim in this instant; (port, flow) pairs of the
    /// instant's joiners; one port's burst.
    chosen: Vec<bool>,
    pairs: Vec<(u32, u32)>,
    burst: Vec<u32>,
    /// Timeouts so far.
    pub(super) timeouts: u64,
}

/// Relative tolerance for "the port is saturated" and "the offered load exceeds it".
const SATURATED: f64 = 1e-6;

impl Losses {
    /// The lossy model's state for `work` on `topo`, or `None` when the fabric is lossless.
    pub(super) fn new(topo: &Topology, work: &Workload, tcp: &TcpModel) -> Option<Losses> {
        let switching = topo.switching();
        let buffer = switching.port_buffer_bytes.filter(|_| !switching.lossless())? as f64;
        let nres = work.capacity.len();
        // The longest round trip of a flow crossing each channel: what the port keeps in flight.
        let mut rtt = vec![0.0f64; work.num_channels];
        for m in 0..work.len() {
            for &r in &work.path_res[work.path_off[m] as usize..work.path_off[m + 1] as usize] {
                if (r as usize) < work.num_channels {
                    rtt[r as usize] = rtt[r as usize].max(2.0 * work.latency[m]);
                }
            }
        }
        let mss = tcp.segment_bytes as f64;
        let buffered = |r: usize| r < work.num_channels && !topo.is_host(topo.channel_ends(r as u32).0.node);
        let held_segments: Vec<f64> = (0..nres)
            .map(|r| if buffered(r) { (buffer + work.capacity[r] * rtt[r]) / mss } else { f64::INFINITY })
            .collect();
        let clear_flows = held_segments
            .iter()
            .map(|&held| if held.is_finite() { ((held / tcp.window_segments).floor() as u32).max(1) } else { u32::MAX })
            .collect();
        let probe_s = (0..nres)
            .map(|r| if buffered(r) { 2.0 * (buffer / work.capacity[r] + rtt[r]) + tcp.probe_s } else { f64::INFINITY })
            .collect();
        Some(Losses {
            held_segments,
            clear_flows,
            probe_s,
            survivor_fraction: tcp.survivor_fraction,
            segment_bytes: mss,
            initial_window: tcp.initial_window_segments,
            timeout_s: tcp.timeout_s,
            retransmitted: vec![0.0; work.len()],
            chosen: vec![false; work.len()],
            pairs: Vec::new(),
            burst: Vec::new(),
            timeouts: 0,
        })
    }

    /// Segments of a flow with `bytes` left, at least one.
    fn segments(&self, bytes: f64) -> f64 {
        (bytes / self.segment_bytes).ceil().max(1.0)
    }

    /// The flows that time out now: `joined` flows have just (re)started streaming, their
    /// bytes left are in `remaining`, and the shares in `fair` are current. Victims are
    /// appended to `victims`; the segments the bursts lost are added to `retransmitted`.
    pub(super) fn victims(&mut self, fair: &FairShare, joined: &[u32], remaining: &[f64], victims: &mut Vec<u32>) {
        self.pairs.clear();
        for &f in joined {
            for &r in fair.path_resources(f) {
                if self.held_segments[r as usize].is_finite() {
                    self.pairs.push((r, f));
                }
            }
        }
        self.pairs.sort_unstable();
        let first_victim = victims.len();
        let mut start = 0;
        while start < self.pairs.len() {
            let r = self.pairs[start].0;
            let mut end = start + 1;
            while end < self.pairs.len() && self.pairs[end].0 == r {
                end += 1;
            }
            self.burst_at(fair, r, start..end, remaining, victims);
            start = end;
        }
        for &f in &victims[first_victim..] {
            self.chosen[f as usize] = false;
        }
        self.timeouts += (victims.len() - first_victim) as u64;
    }

    /// Apply the rule (module doc) to the flows `self.pairs[joiners]` starting at port `r`.
    fn burst_at(
        &mut self,
        fair: &FairShare,
        r: u32,
        joiners: std::ops::Range<usize>,
        remaining: &[f64],
        victims: &mut Vec<u32>,
    ) {
        self.burst.clear();
        for i in joiners {
            let f = self.pairs[i].1;
            if !self.chosen[f as usize] {
                self.burst.push(f);
            }
        }
        if self.burst.len() < 2 {
            return; // one flow alone is no synchronised burst
        }
        let capacity = fair.capacity(r);
        if fair.used(r) < capacity * (1.0 - SATURATED) {
            return; // no standing queue: nothing overflows
        }
        // 1. Overload: the burst offered at what the rest of its paths would give it.
        let mut offered = fair.used(r);
        let (mut first_windows, mut bytes) = (0.0, 0.0);
        for &f in &self.burst {
            let elsewhere = fair
                .path_resources(f)
                .iter()
                .filter(|&&q| q != r)
                .map(|&q| fair.capacity(q) / fair.flows_on(q).len() as f64)
                .fold(capacity, f64::min);
            offered += elsewhere - fair.rate(f);
            let left = remaining[f as usize];
            first_windows += self.segments(left).min(self.initial_window);
            bytes += left;
        }
        if offered <= capacity * (1.0 + SATURATED) {
            return;
        }
        // 2. Overflow: the first windows beyond what the port holds are lost.
        let lost = first_windows - self.held_segments[r as usize];
        if lost <= 0.0 {
            return;
        }
        // 3. A burst draining before the probes fire loses nothing to a timeout.
        let n = self.burst.len();
        let cut = if bytes / capacity <= self.probe_s[r as usize] {
            0
        } else {
            // 4. The port keeps K flows, or the survivor share of all its flows if more; the
            // flows already streaming hold their places, the burst loses the rest.
            let flows = fair.flows_on(r).len();
            let keep =
                (self.clear_flows[r as usize] as usize).max((self.survivor_fraction * flows as f64).round() as usize);
            n.min(flows.saturating_sub(keep))
        };
        if cut > 0 && cut < n {
            // Highest message indices first: only the victims need ordering.
            self.burst.select_nth_unstable_by(cut, |a, b| b.cmp(a));
        }
        // Every lost segment is sent again: the victims lose their first windows, the
        // survivors share the rest of the overflow.
        let mut unassigned = lost;
        for &f in &self.burst[..cut] {
            let left = remaining[f as usize];
            let window = self.segments(left).min(self.initial_window).min(unassigned);
            self.retransmitted[f as usize] += (window * self.segment_bytes).min(left);
            unassigned -= window;
            self.chosen[f as usize] = true;
            victims.push(f);
        }
        if cut < n && unassigned > 0.0 {
            let share = unassigned * self.segment_bytes / (n - cut) as f64;
            for &f in &self.burst[cut..] {
                self.retransmitted[f as usize] += share.min(remaining[f as usize]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowsim::{simulate, Executor, FlowConfig};
    use crate::routing::shortest_path;
    use crate::topology::link_layer::{LinkLayer, Switching};
    use crate::topology::{LinkSpec, TopologyBuilder};
    use crate::traffic::{Message, Schedule};

    /// `hosts` hosts on one switch at 8 Gbit/s (10⁹ B/s), no latency, with this link layer.
    fn star(hosts: usize, switching: Switching) -> Topology {
        let mut b = TopologyBuilder::new("star");
        let s = b.add_switch("s", hosts as u16);
        for i in 0..hosts {
            let h = b.add_host(format!("h{i}"));
            b.connect(h, s, LinkSpec::new(8.0, 0.0).unwrap()).unwrap();
        }
        b.switching(switching);
        b.build().unwrap()
    }

    /// Every sender 1..=senders sends `bytes` to host 0 at once.
    fn incast(topo: &Topology, senders: u32, bytes: u64) -> crate::flowsim::FlowReport {
        let routes = shortest_path(topo).unwrap();
        let phase: Vec<Message> = (1..=senders).map(|s| Message { src: s, dst: 0, bytes }).collect();
        let sched = Schedule::from_phases("incast", topo.num_hosts() as u32, vec![phase]).unwrap();
        simulate(topo, &routes, &sched, &FlowConfig::new(Executor::Async)).unwrap()
    }

    #[test]
    fn a_lossless_fabric_never_times_out() {
        let r = incast(&star(32, Switching::infiniband()), 31, 1_000_000);
        assert!(!r.lossy);
        assert_eq!(r.timeouts, 0);
        assert!((r.makespan_s - 0.031).abs() < 1e-9, "{}", r.makespan_s);
    }

    #[test]
    fn flows_the_buffer_holds_see_no_loss() {
        // Three first windows of 10 segments fit the 44 segments of a 64 KiB buffer.
        let ethernet = Switching::new(LinkLayer::Ethernet, Some(64 * 1024)).unwrap();
        let r = incast(&star(4, ethernet), 3, 1_000_000);
        assert!(r.lossy);
        assert_eq!(r.timeouts, 0);
        assert!((r.makespan_s - 0.003).abs() < 1e-9, "{}", r.makespan_s);
    }

    #[test]
    fn incast_collapses_into_timeout_rounds() {
        let ethernet = Switching::new(LinkLayer::Ethernet, Some(64 * 1024)).unwrap();
        let tcp = TcpModel::default();
        let r = incast(&star(32, ethernet), 31, 1_000_000);
        assert!(r.timeouts > 0);
        // 31 → 12 survive, then 19 → 8, 11 → 4; the last 7 flows' 7 MB drain in 7 ms, before
        // their tail-loss probes (2 × 65.5 µs + probe_s) fire: three timeout rounds, each
        // ending once the port's survivors have drained long before the RTO fires.
        let rounds = (r.makespan_s / tcp.timeout_s).floor();
        assert_eq!(rounds, 3.0, "makespan {}", r.makespan_s);
        assert_eq!(r.timeouts, 19 + 11 + 7);
        // The lost segments were sent again and crossed the receiver's link a second time.
        assert!(r.retransmitted_bytes > 0);
        assert!(r.channel_bytes.iter().copied().max().unwrap() > 31_000_000, "{:?}", r.channel_bytes);
        // Deeper buffers hold every sender's first window: back to the lossless time.
        let deep = Switching::new(LinkLayer::Ethernet, Some(31 * 10 * 1460)).unwrap();
        let r = incast(&star(32, deep), 31, 1_000_000);
        assert_eq!(r.timeouts, 0);
        assert_eq!(r.retransmitted_bytes, 0);
        assert!((r.makespan_s - 0.031).abs() < 1e-9);
    }

    #[test]
    fn a_short_burst_is_repaired_by_probes_not_timeouts() {
        // 31 senders × 16 KiB overflow the port (310 first-window segments against 44), but
        // the 0.5 MB drain in 0.5 ms: the probes find the queue empty.
        let ethernet = Switching::new(LinkLayer::Ethernet, Some(64 * 1024)).unwrap();
        let r = incast(&star(32, ethernet), 31, 16 * 1024);
        assert_eq!(r.timeouts, 0);
        assert!(r.retransmitted_bytes > 0);
        // A probe wait longer than the drain is what keeps them from timing out.
        let topo = star(32, ethernet);
        let routes = shortest_path(&topo).unwrap();
        let phase: Vec<Message> = (1..=31).map(|s| Message { src: s, dst: 0, bytes: 16 * 1024 }).collect();
        let sched = Schedule::from_phases("incast", 32, vec![phase]).unwrap();
        let mut config = FlowConfig::new(Executor::Async);
        config.tcp.probe_s = 0.0;
        let r = simulate(&topo, &routes, &sched, &config).unwrap();
        assert!(r.timeouts > 0, "{}", r.timeouts);
    }

    #[test]
    fn senders_splitting_their_links_build_no_queue() {
        // Concurrent all-to-all on one switch: every port receives 15 flows, each at 1/15 of
        // its sender's link — no faster than it sends, so nothing overflows, whatever the size.
        let ethernet = Switching::new(LinkLayer::Ethernet, Some(64 * 1024)).unwrap();
        let topo = star(16, ethernet);
        let routes = shortest_path(&topo).unwrap();
        let sched = Schedule::shift_alltoall(16, 1 << 20).unwrap();
        let mut config = FlowConfig::new(Executor::Async);
        config.nct = 15;
        let r = simulate(&topo, &routes, &sched, &config).unwrap();
        assert!(r.lossy);
        assert_eq!(r.timeouts, 0);
    }

    #[test]
    fn parameters_are_checked() {
        for bad in [
            TcpModel { timeout_s: 0.0, ..TcpModel::default() },
            TcpModel { survivor_fraction: 1.5, ..TcpModel::default() },
            TcpModel { window_segments: f64::NAN, ..TcpModel::default() },
            TcpModel { segment_bytes: 0, ..TcpModel::default() },
            TcpModel { initial_window_segments: 0.5, ..TcpModel::default() },
            TcpModel { probe_s: -1.0, ..TcpModel::default() },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(TcpModel::default().check().is_ok());
    }
}
