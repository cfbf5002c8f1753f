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
//! through it `RTT`), over the *burst* — the flows starting or resuming there now, and those
//! that did so less than `B / C` before and still stream (their first windows are still
//! queued: a barrier releases its ranks microseconds apart, their windows take milliseconds):
//!
//! 1. **Overload.** `p` must be saturated and its offered load — the flows already there at
//!    their rates, the burst at what the links before `p` on its paths would give it (the
//!    least equal share `C_q / n_q` over them; a port further on cannot slow what arrives
//!    here) — must exceed `C`. A port that receives no faster than it sends (an all-to-all
//!    whose senders split their links) builds no queue.
//! 2. **Overflow.** The burst's windows must exceed the `P = (B + C·RTT) / MSS` segments the
//!    port holds: small messages fit and lose nothing. Flows are in slow start: a fresh flow
//!    with `S` bytes left sends `min(IW, ⌈S/MSS⌉)` segments
//!    ([`TcpModel::initial_window_segments`]) in the first round trip, then twice as many in
//!    each next one until its bytes are sent; a flow resuming after a timeout restarts from
//!    Linux's one-segment loss window (1, 2, 4, … segments). The first windows arrive
//!    together at their links' rate `A` (the burst's offered share) while the port drains, so
//!    only the share `q = (offered − C) / A` of them stays queued: 14 flows of 20 Mbit/s into
//!    a 200 Mbit/s trunk queue 2/7 of theirs, an incast of `n` senders `1 − 1/n`. Later windows
//!    are ACK clocked, released as the queue drains, and sit in it whole. The burst overflows
//!    in the first round trip whose queued windows exceed `P`; flows that finish before then
//!    lose nothing.
//! 3. **Outlasting the probe.** The burst sends its last byte `B / C` before the bytes it
//!    still has to send from that round trip have drained (`D = ΣS / C` from then). A lost
//!    tail has nothing after it to be acknowledged, so only Linux's tail-loss probe finds it:
//!    a flow's last ACK returns `r` round trips through the full queue after the burst starts
//!    (`r` the round trip of its last window) and half a queue more on average; the probe fires
//!    `2·(B/C + RTT)` plus a fixed part ([`TcpModel::probe_s`]) later, in whole timer ticks
//!    ([`TcpModel::timer_tick_s`]) and on a tick, half a tick early on average; the resent
//!    tail crosses the drained port in a round trip. If the burst has sent its last byte by
//!    then, the probes find room and every loss is repaired without a timeout — but not for
//!    free: `⌈lost⌉` flows that send their last window within a round trip of the overflow
//!    lose their tails and finish no earlier than their probes resend them (flows with more to
//!    send after that send it into a queue with room again, and its ACKs repair their losses by
//!    fast retransmit). A probe is armed at each ACK, and Linux makes it wait the minimum RTO
//!    on top (for the receiver's delayed ACK) while a single segment is outstanding: a flow
//!    whose lost tail is that one segment stalls about an RTO whoever else repairs fast. Which
//!    flow ends so is chance (measured warm, short bursts stall so in some calls and not in
//!    others: docs/flowsim.md), so the model charges its mean: each of the burst's `k` tail
//!    losers ends alone with probability `p` ([`TcpModel::lone_tail_probability`]), the burst
//!    stalls with `1 − (1 − p)^k`, and each of its tail losers is delivered that share of
//!    [`TcpModel::timeout_s`] later.
//! 4. **Timeouts.** Otherwise `p` keeps `K = max(1, ⌊P / w⌋)` flows whose window `w`
//!    ([`TcpModel::window_segments`]) lets them ride out the overshoot, or the share
//!    `σ^(√q·ℓ·S̄)` of all its flows if more, `σ` [`TcpModel::survival_per_segment`]: every
//!    segment a flow still sends into the full queue is one more chance to lose what it cannot
//!    repair. `S̄` is the segments each flow of the burst has left to send from the overflow
//!    on; they arrive beyond what the port drains by the queued share `q`, which enters as
//!    `√q` ([`QUEUED_SHARE_EXPONENT`]); and only as much of
//!    that is at risk as the burst overshoots the port, `ℓ = lost / queued` of the overflowing
//!    round trip's queued segments. A fresh burst of initial windows overshoots by far (31
//!    flows of 10 segments into a port holding 47: ℓ = 0.84), and its survivors, still many
//!    times the port after halving their windows, keep losing; flows resuming from one segment
//!    overflow with a few each (15 × 4 into 47: ℓ = 0.22), lose about one, which fast
//!    retransmit repairs, and fit once halved. So a long incast's first round keeps about
//!    half its flows (measured on cubic hosts: 8–20 of 31 × 1 MB) and the round after a
//!    timeout most (10–13 of 15), short flows most in either (11–15 of 15 × 64 KiB). But a
//!    port cannot keep more flows than it holds minimum windows for: `⌊P / (q·w_min)⌋`
//!    ([`TcpModel::min_window_segments`]; `q·w_min` of each flow's window sits in its queue),
//!    besides the burst's flows that send their last window within two round trips of the
//!    overflow (the one after it halves their windows; they are done before they need one
//!    again). The rest lose every window they send, no duplicate ACK comes back, and they
//!    time out: 27 flows of 128 KiB into a port holding 45 segments keep 11 (measured: 14–16
//!    timeouts per call, where `σ` alone kept 25), while 31 of 64 KiB, done two round trips
//!    after their first windows overflow, keep what `σ` says (measured: 24–29). Flows
//!    already streaming keep their places (ACK clocked, they recover by fast retransmit); the
//!    burst loses the rest, the higher message indices first (every member started at the
//!    same instant). A flow resuming into a port still busy with the survivors of its round
//!    thus times out again. The victims a burst expects are seldom whole (14 flows keeping
//!    0.98 of them expect 0.3): each port carries the fraction to its next burst and cuts a
//!    flow once the expected victims add up to half of one, so a port that sees many such
//!    bursts (the phases of an all-to-all) pays their sum, not none.
//!
//! A victim stops streaming for [`TcpModel::timeout_s`] and restarts where it was (its bytes
//! already delivered stay delivered), meeting the rule again from a one-segment window. The
//! burst's survivors lose the rest of the overflow, and their lost tails wait for their
//! probes as in rule 3.
//!
//! 5. **Backoff.** Linux doubles a flow's RTO at each timeout and restores it only when an ACK
//!    times a round trip. With TCP timestamps ([`TcpModel::timestamps`]) every ACK does, so
//!    only a flow cut in the first round trip of its resume waits twice as long; without them
//!    (Karn's rule) only a segment sent once is timed: F-RTO (RFC 5682, on in Linux by
//!    default) resends one segment, then sends new data in the second round trip, so a
//!    resumed flow cut in either of its first two round trips backs off too.
//!
//! **Steady sharing.** Many long-lived flows converging on one port lose segments all along,
//! not only in a burst at their start, when the port cannot queue a minimum window for each.
//! `w_min` ([`TcpModel::min_window_segments`], 4: the lost segment and the three whose
//! duplicate ACKs would trigger fast retransmit) is the fewest segments in flight that repair
//! a loss without a timeout. TCP senders split their link among their flows only on average:
//! each sends its window at line rate, so the queue overflows even where the overload test
//! (1.) sees none (Concurrent all-to-all, Open MPI's linear algorithms). But a queue grows only
//! by what its input links deliver beyond the port's rate while they burst: with `A` the summed
//! rate of the distinct channels feeding the port's `N` flows (each flow's previous channel),
//! the share `q = max(0, 1 − C/A)` of their windows sits in the queue at once. A port fed by
//! one link of its own rate never queues (`q = 0`); a star's host port, fed by 15 host links
//! of its rate, queues `q = 14/15`; a trunk of 10 host links' rate fed by 14 of them, `2/7`.
//! When `q · N · w_min > P` a share `s = 1 − P / (q·N·w_min)` of the port's flows is starved
//! of window at any time, and each of their losses is a timeout. Each port keeps the channels
//! that brought its flows (a flow that left is dropped when next found on top), so `A` costs
//! the port's feeders, not its flows, and is summed once per port and instant, only where even
//! every channel that could feed the port would overflow it. The port stays that crowded until
//! all but the `⌊N · P / (q·N·w_min)⌋` flows whose windows it holds have finished, at their
//! current rates; a flow (re)starting is charged once, for the `S` segments it sends by then
//! (all it has left, for flows that start together and alike), at the port where that costs
//! most among those not overloaded by a burst in this instant (the burst rule owns those
//! losses), its expected timeouts `m = s · (S − S₀) / L`: `S₀` segments
//! ([`TcpModel::steady_free_segments`]) fit its first windows, and then it delivers `L`
//! segments ([`TcpModel::steady_segments_per_timeout`]) per timeout. Where the crowd is the
//! flows already there (fewer join now than were there), it leaves at their pace whatever the
//! flow's stalls, and a stalled flow sends nothing, so loses nothing: sending for `τ` between
//! timeouts and stalling an RTO after each, over the crowded time `T` it expects `1 − e^(−m)`
//! of a first timeout and `(T − RTO − τ) / (RTO + τ)` more, if fewer than `m`. The charge is
//! one stall of `m ·` [`TcpModel::timeout_s`] when the flow starts — its mean cost,
//! deterministic, where TCP spreads the timeouts over the transfer — and `m` segments sent
//! again. `S₀` and `L` are fitted by `netweave emulate calibrate` (Concurrent all-to-all on
//! the calibrated fabric).
//!
//! Every segment a burst overflows is sent again: the victims' first windows and the rest of
//! the overflow spread over the survivors are counted as retransmitted bytes on their paths.
//!
//! Each instant costs the joining flows' paths and, for steady sharing, the feeding channels of
//! the ports they cross; the flows already at a port are never scanned.
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
/// Linux's largest retransmission timeout (`TCP_RTO_MAX`): backoff stops doubling here.
pub const LINUX_RTO_MAX_S: f64 = 120.0;
/// TCP payload per full 1,500-byte Ethernet frame (the link layer's, re-exported here where the
/// loss rule's segment counts use it).
pub use crate::topology::link_layer::ETHERNET_MSS;
/// Linux's initial congestion window (`TCP_INIT_CWND`): what a starting flow bursts.
pub const LINUX_INITIAL_WINDOW_SEGMENTS: f64 = 10.0;
/// Segments of window a flow needs at a port to recover its losses by fast retransmit: the
/// initial window it overshoots with plus the three duplicate ACKs fast retransmit waits for
/// and the lost segment itself.
pub const RECOVERY_WINDOW_SEGMENTS: f64 = 14.0;
/// Share of an overflowing burst's flows that escape a timeout, per segment each still has to
/// send into the overflowing queue: `σ^(√q·ℓ·S̄)` of them survive (module doc, rule 4). Fitted on
/// emulated incasts of cubic hosts (64 KiB port buffer; `benches/incast_rounds.py`, eight warm
/// runs per case): of the grid 0.997 … 0.999, 0.9988 predicts the five cases' times with the
/// least squared log error (every case within 11 %). It keeps 14 of 15 × 64 KiB (measured 11–15
/// before the first timeout round), 14 of 15 × 128 KiB (11–15) and 9 of 15 × 1 MiB at
/// 353 Mbit/s (finishing at 214 ms; 0–3 measured before 200 ms), 30 of 31 × 64 KiB (23–31) and
/// 16 of 31 × 1 MB (8–20) at 1 Gbit/s, and 12 of 31 × 1 MB's 15 victims in the next round
/// (10–13); 0.9989 and
/// above predict no timeout for 15 × 64 KiB, which paid one in 7 of 8 runs, and 0.9987 and below
/// a third timeout for the last flows of 31 × 1 MB (0.61 s), which paid one in 2 of 8. (Fitted
/// with `q` in the exponent; these incasts' `q` of 0.93–0.97 becomes 0.97–0.98 as `√q`.)
pub const INCAST_SURVIVAL_PER_SEGMENT: f64 = 0.9988;
/// How the queued share `q` of a burst's segments enters its survival exponent, `σ^(q^e·ℓ·S̄)`
/// (module doc, rule 4). An incast queues nearly all it sends (`q ≈ 1`), so the exponent barely
/// moves its fit; a trunk fed by a few more host links than it drains queues little (2 × 14 hosts:
/// `q = 2/7`) yet measured 5–8 timeouts per shift all-to-all of 128 KiB, which `e = 1` predicted
/// none of. Fitted on the stored measurements of one whole `benches/advice_fidelity.py` run
/// (165 candidates, every fabric; docs/flowsim.md): with the carried fractions, 0.25–0.75 all
/// put 147–148 candidates within ±25 %, 1 put 145; a fresh run with ½ measured 152.
pub const QUEUED_SHARE_EXPONENT: f64 = 0.5;
/// Fixed part of the wait before a tail-loss probe, seconds: Linux waits two smoothed round
/// trips plus 2 ms (`TCP_TIMEOUT_MIN_US`), counted in timer ticks ([`LINUX_TIMER_TICK_S`]).
/// Warm connections, as an application's repeated collective and `plan --verify` run them,
/// bear it out on the emulated cluster: gathers of 16 KiB per sender into a 64 KiB port whose
/// burst drains in 5.6 ms (probe 2·1.5 ms plus this) paid a timeout in 4 of 6 warm calls and
/// in none of 2 cold ones, so the fixed part is below 2.6 ms. A first, cold call waits longer
/// (4.5–9.6 ms fitted on cold gathers): its senders start scattered by the processes' own
/// start-up, which is not what a program's collectives see.
pub const LINUX_PROBE_MIN_S: f64 = 0.002;
/// Linux's timer tick on Debian's kernels (`CONFIG_HZ=250`), seconds. TCP's timers count in
/// ticks: a tail-loss probe's wait is rounded up to whole ticks and fires on a tick, on average
/// half a tick before the rounded time. Kernels built with `HZ=1000` (RHEL's, Ubuntu's) tick
/// every millisecond.
pub const LINUX_TIMER_TICK_S: f64 = 0.004;
/// Chance that a flow whose tail a burst loses (rule 3) is left with a single lost segment
/// outstanding, whose probe Linux arms with the minimum RTO on top (`tcp_schedule_loss_probe`:
/// `2·SRTT + TCP_RTO_MIN` with one packet out, `2·SRTT + 2 ms` with more). Fitted on the
/// emulated cluster's 16 KiB gathers (15 and 27 senders into a 64 KiB port, five
/// `benches/advice_fidelity.py` runs, 3 warm calls each): about 1 call in 10 of 15 senders and
/// 1 in 6 of 27 stalled some 200 ms with no timeout counted, `1 − (1 − p)^k` for `k` of 15 and
/// 27 tail losers at `p` ≈ 0.006. A later run timing 100 calls of each measured those gathers at
/// 0.72–1.25× the prediction. It grows with the link rate (15 × 11 segments never stalled in
/// about 100 calls at 50 Mbit/s), so a calibration's slow probe points do not fit it.
pub const LONE_TAIL_PROBABILITY: f64 = 0.006;
/// Fewest segments a flow must have in flight for one loss to be repaired by fast retransmit:
/// the lost segment and three behind it, whose duplicate ACKs trigger the repair.
pub const FAST_RETRANSMIT_MIN_WINDOW: f64 = 4.0;
/// Segments a flow streams at a steadily overflowing port before its losses start to cost
/// timeouts (its first windows fit the queue). Fitted with
/// [`EMULATED_STEADY_SEGMENTS_PER_TIMEOUT`] to four runs of `benches/advice_fidelity.py`
/// (star16, tree2x14, tree3; 16 KiB to 1 MiB per pair; 64 KiB port buffer; links at 20–350
/// Mbit/s; 197 measured candidates) on a grid: the pair that put the most candidates within
/// ±25 % (docs/flowsim.md).
pub const EMULATED_STEADY_FREE_SEGMENTS: f64 = 5.0;
/// Segments a flow delivers per timeout at a port where no flow holds the minimum window
/// (fitted with [`EMULATED_STEADY_FREE_SEGMENTS`]).
pub const EMULATED_STEADY_SEGMENTS_PER_TIMEOUT: f64 = 8.0;

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
    /// Share of an overflowing burst's flows that escape a timeout, per segment each still has
    /// to send (`σ`: `σ^(√q·ℓ·S̄)` of them survive, module doc).
    pub survival_per_segment: f64,
    /// Segments a starting flow sends before its first ACK returns (its initial window).
    pub initial_window_segments: f64,
    /// Fixed part of the wait before a tail-loss probe, seconds (the probe also waits two
    /// round trips through the full queue).
    pub probe_s: f64,
    /// The senders' kernel timer tick, seconds: a tail-loss probe's wait rounds up to whole
    /// ticks (0 for an exact wait).
    pub timer_tick_s: f64,
    /// Chance that a flow whose tail a burst loses is left with that single segment outstanding,
    /// and its probe waits [`TcpModel::timeout_s`] more (module doc, rule 3).
    pub lone_tail_probability: f64,
    /// Segments of window each flow needs at a port to repair a loss by fast retransmit; a port
    /// whose flows cannot all hold it overflows steadily, and a burst keeps no more long flows
    /// than it holds (see the module doc).
    pub min_window_segments: f64,
    /// Segments a flow streams at a steadily overflowing port before timeouts set in.
    pub steady_free_segments: f64,
    /// Segments a flow delivers per timeout at a port where no flow holds the minimum window.
    pub steady_segments_per_timeout: f64,
    /// The senders put TCP timestamps on their segments (Linux's default). With them every ACK
    /// times the round trip, so a flow's RTO stops doubling at the first ACK after a timeout;
    /// without them only a segment sent once can be timed (Karn's rule): Linux's F-RTO sends
    /// new data in a resumed flow's second round trip, and a flow that times out again before
    /// that data's ACK arrived waits twice as long as the time before.
    pub timestamps: bool,
}

impl Default for TcpModel {
    fn default() -> Self {
        TcpModel {
            segment_bytes: ETHERNET_MSS,
            timeout_s: LINUX_RTO_MIN_S,
            window_segments: RECOVERY_WINDOW_SEGMENTS,
            survival_per_segment: INCAST_SURVIVAL_PER_SEGMENT,
            initial_window_segments: LINUX_INITIAL_WINDOW_SEGMENTS,
            probe_s: LINUX_PROBE_MIN_S,
            timer_tick_s: LINUX_TIMER_TICK_S,
            lone_tail_probability: LONE_TAIL_PROBABILITY,
            min_window_segments: FAST_RETRANSMIT_MIN_WINDOW,
            steady_free_segments: EMULATED_STEADY_FREE_SEGMENTS,
            steady_segments_per_timeout: EMULATED_STEADY_SEGMENTS_PER_TIMEOUT,
            timestamps: true,
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
        for (name, v) in [
            ("window per flow", self.window_segments),
            ("initial window", self.initial_window_segments),
            ("minimum window", self.min_window_segments),
        ] {
            if !(v.is_finite() && v >= 1.0) {
                return crate::invalid!("{name} must be at least 1 segment, got {v}");
            }
        }
        if !(self.survival_per_segment.is_finite() && (0.0..=1.0).contains(&self.survival_per_segment)) {
            return crate::invalid!("survival per segment must lie in 0..1, got {}", self.survival_per_segment);
        }
        if !(self.probe_s.is_finite() && self.probe_s >= 0.0) {
            return crate::invalid!("loss probe time must be a non-negative number of seconds, got {}", self.probe_s);
        }
        if !(self.timer_tick_s.is_finite() && self.timer_tick_s >= 0.0) {
            return crate::invalid!("timer tick must be a non-negative number of seconds, got {}", self.timer_tick_s);
        }
        if !(0.0..=1.0).contains(&self.lone_tail_probability) {
            return crate::invalid!(
                "lone tail probability must be a probability (0 to 1), got {}",
                self.lone_tail_probability
            );
        }
        if !(self.steady_free_segments.is_finite() && self.steady_free_segments >= 0.0) {
            return crate::invalid!(
                "segments before steady timeouts must be a non-negative number, got {}",
                self.steady_free_segments
            );
        }
        if !(self.steady_segments_per_timeout.is_finite() && self.steady_segments_per_timeout > 0.0) {
            return crate::invalid!(
                "segments per steady timeout must be a positive number, got {}",
                self.steady_segments_per_timeout
            );
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
    /// Per buffered port: a round trip through its full queue, `B / C + RTT`, seconds.
    full_round_trip_s: Vec<f64>,
    /// Per buffered port: from a flow's last ACK to its probed tail's delivery, on average,
    /// seconds: the probe fires `probe_s` later rounded up to the timer's ticks, less half a
    /// tick, and the resent tail crosses the drained port in a round trip.
    tail_repair_s: Vec<f64>,
    /// Per flow: the time its tail, lost in a burst the probes repair, is delivered again (0
    /// if none was lost): the flow does not finish before.
    pub(super) repaired_at: Vec<f64>,
    /// Tails lost in a burst and resent by their probes, counted once per flow and burst.
    pub(super) probe_repairs: u64,
    /// Bursts whose tails stall on a lone lost segment, expected (the sum of their chances).
    pub(super) lone_tail_stalls: f64,
    lone_tail_probability: f64,
    /// Scratch: the flows of one burst that lose their tails, each with the round trip of its
    /// last window.
    tail_losers: Vec<(u32, u32)>,
    survival_per_segment: f64,
    segment_bytes: f64,
    initial_window: f64,
    pub(super) timeout_s: f64,
    /// Steady overflow: the minimum window, segments streamed before timeouts set in, and
    /// segments per timeout (see the module doc).
    min_window: f64,
    steady_free: f64,
    steady_per_timeout: f64,
    /// Per resource: a burst overloads it in this instant (the burst rule owns its losses);
    /// and the resources so marked, to clear.
    overloaded: Vec<bool>,
    overloaded_list: Vec<u32>,
    /// Per flow: charged for steady overflow already (at most once).
    steady_charged: Vec<bool>,
    /// Per flow: how long its latest stall lasts, seconds (set with each victim).
    stall_s: Vec<f64>,
    /// Per flow: it timed out before, so it resumes from a one-segment window.
    resumed: Vec<bool>,
    /// Per flow: how many times in a row its RTO has doubled.
    backoffs: Vec<u32>,
    timestamps: bool,
    /// Per flow: bytes sent again (the segments its bursts lost).
    pub(super) retransmitted: Vec<f64>,
    /// Scratch: per flow, chosen as a victim in this instant; (port, flow) pairs of the
    /// instant's joiners; one port's burst.
    chosen: Vec<bool>,
    pairs: Vec<(u32, u32)>,
    /// Scratch: per port, the instant's joiners crossing it; the ports counted.
    joiners_at: Vec<u32>,
    touched: Vec<u32>,
    /// Scratch: the ports two or more joiners share (ascending), each one's next write
    /// position in `pairs` (`u32::MAX` for any other resource), and the joiners in ascending
    /// order.
    shared: Vec<u32>,
    slot: Vec<u32>,
    joined_sorted: Vec<u32>,
    burst: Vec<u32>,
    /// Per buffered port: the summed rate of every channel that could feed it (those entering
    /// its switch, less its own reverse), the largest `A` can be.
    feed_bound: Vec<f64>,
    /// Steady overflow's queued share per port ([`Losses::queued_share`]), with the instant it
    /// was worked out in (`instant` counts the calls of [`Losses::victims`]).
    queued: Vec<f64>,
    queued_instant: Vec<u64>,
    instant: u64,
    /// Per buffered port, the channels that fed it flows, each with the flows it fed, latest
    /// last. A flow that left stays listed until [`Losses::queued_share`] finds it on top and
    /// drops it: each listing is dropped at most once, so `A` costs the port's feeders, not
    /// its flows.
    feeders: Vec<Vec<(u32, Vec<u32>)>>,
    /// Scratch: the time each flow at a crowded port needs to finish at its current rate.
    finish_s: Vec<f64>,
    /// Per buffered port: `B / C`, how long after a flow (re)starts there another still
    /// bursts with it (its first window is still queued), seconds.
    together_s: Vec<f64>,
    /// Per buffered port: the flows that (re)started there lately and still stream, with when;
    /// those older than `together_s` or no longer streaming are dropped when the port is next
    /// looked at.
    recent: Vec<Vec<(f64, u32)>>,
    /// Timeouts so far.
    pub(super) timeouts: u64,
    /// Per buffered port: victims its bursts expected but did not cut yet (the rounding's
    /// remainder, −½ … ½), carried to its next burst.
    owed_victims: Vec<f64>,
}

/// First windows a flow in slow start has sent before round trip `round`: 1 + 2 + … +
/// 2^(round−1) (segments, for a flow resuming from a one-segment window).
fn first_windows_before(round: u32) -> f64 {
    2f64.powi(round as i32) - 1.0
}

/// Bytes each flow has left to send now. The flow model updates a flow's count only when its
/// rate changes; in between it drains at `rate` since `since`.
#[derive(Clone, Copy)]
pub(super) struct BytesLeft<'a> {
    pub(super) at_last_change: &'a [f64],
    pub(super) rate: &'a [f64],
    pub(super) since: &'a [f64],
    pub(super) now: f64,
}

impl BytesLeft<'_> {
    /// Bytes flow `f` has left to send now.
    pub(super) fn of(&self, f: u32) -> f64 {
        let i = f as usize;
        (self.at_last_change[i] - self.rate[i] * (self.now - self.since[i])).max(0.0)
    }
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
        // The most that can feed each buffered port: every channel entering its switch but its
        // own reverse (no path turns back over the link it came by).
        let mut entering = vec![0.0f64; topo.num_nodes()];
        for c in 0..work.num_channels {
            entering[topo.channel_ends(c as u32).1.node as usize] += work.capacity[c];
        }
        let feed_bound = (0..nres)
            .map(|r| {
                if buffered(r) {
                    entering[topo.channel_ends(r as u32).0.node as usize] - work.capacity[r ^ 1]
                } else {
                    0.0
                }
            })
            .collect();
        let full_round_trip_s: Vec<f64> =
            (0..nres).map(|r| if buffered(r) { buffer / work.capacity[r] + rtt[r] } else { 0.0 }).collect();
        // Linux probes a tail loss two smoothed round trips (the full queue's) and `probe_s`
        // after the last ACK, counted in whole timer ticks: it fires on the tick that ends the
        // rounded wait, on average half a tick early.
        let tick = tcp.timer_tick_s;
        let tail_repair_s = (0..nres)
            .map(|r| {
                let wait = 2.0 * full_round_trip_s[r] + tcp.probe_s;
                let fires = if tick > 0.0 { ((wait / tick).ceil() - 0.5) * tick } else { wait };
                fires + rtt.get(r).copied().unwrap_or(0.0)
            })
            .collect();
        Some(Losses {
            held_segments,
            clear_flows,
            full_round_trip_s,
            tail_repair_s,
            repaired_at: vec![0.0; work.len()],
            probe_repairs: 0,
            lone_tail_stalls: 0.0,
            lone_tail_probability: tcp.lone_tail_probability,
            tail_losers: Vec::new(),
            survival_per_segment: tcp.survival_per_segment,
            segment_bytes: mss,
            initial_window: tcp.initial_window_segments,
            timeout_s: tcp.timeout_s,
            min_window: tcp.min_window_segments,
            steady_free: tcp.steady_free_segments,
            steady_per_timeout: tcp.steady_segments_per_timeout,
            overloaded: vec![false; nres],
            overloaded_list: Vec::new(),
            steady_charged: vec![false; work.len()],
            stall_s: vec![tcp.timeout_s; work.len()],
            resumed: vec![false; work.len()],
            backoffs: vec![0; work.len()],
            timestamps: tcp.timestamps,
            retransmitted: vec![0.0; work.len()],
            chosen: vec![false; work.len()],
            pairs: Vec::new(),
            joiners_at: vec![0; nres],
            touched: Vec::new(),
            shared: Vec::new(),
            slot: vec![u32::MAX; nres],
            joined_sorted: Vec::new(),
            burst: Vec::new(),
            feed_bound,
            queued: vec![0.0; nres],
            queued_instant: vec![0; nres],
            instant: 0,
            feeders: vec![Vec::new(); nres],
            finish_s: Vec::new(),
            together_s: (0..nres).map(|r| if buffered(r) { buffer / work.capacity[r] } else { 0.0 }).collect(),
            recent: vec![Vec::new(); nres],
            timeouts: 0,
            owed_victims: vec![0.0; nres],
        })
    }

    /// Segments of a flow with `bytes` left, at least one.
    fn segments(&self, bytes: f64) -> f64 {
        (bytes / self.segment_bytes).ceil().max(1.0)
    }

    /// The flows that time out now: `joined` flows have just (re)started streaming, every
    /// flow's bytes left are in `left`, and the shares in `fair` are current. Victims are
    /// appended to `victims`; the segments the bursts lost are added to `retransmitted`.
    pub(super) fn victims(&mut self, fair: &FairShare, joined: &[u32], left: BytesLeft, victims: &mut Vec<u32>) {
        // A new instant: every port's queued share is to be worked out afresh (0 means never).
        self.instant += 1;
        for &f in joined {
            let path = fair.path_resources(f);
            for (i, &r) in path.iter().enumerate().skip(1) {
                if self.held_segments[r as usize].is_finite() {
                    let feeder = path[i - 1];
                    let fed = &mut self.feeders[r as usize];
                    match fed.iter_mut().find(|(c, _)| *c == feeder) {
                        Some((_, flows)) => flows.push(f),
                        None => fed.push((feeder, vec![f])),
                    }
                }
            }
        }
        // Only ports two or more joiners share can see a burst. Count the joiners per port,
        // give each shared port (ascending) its slice of `pairs`, and fill the slices from the
        // joiners in ascending order: the (port, flow) pairs come out sorted without sorting
        // them, and a flow resuming alone, the common case, builds none.
        self.touched.clear();
        let mut crossings = 0;
        for &f in joined {
            for &r in fair.path_resources(f) {
                if self.held_segments[r as usize].is_finite() {
                    if self.joiners_at[r as usize] == 0 {
                        self.touched.push(r);
                    }
                    self.joiners_at[r as usize] += 1;
                    crossings += 1;
                }
            }
        }
        self.pairs.clear();
        if crossings > self.touched.len() {
            self.shared.clear();
            self.shared.extend(self.touched.iter().copied().filter(|&r| self.joiners_at[r as usize] >= 2));
            self.shared.sort_unstable();
            let mut total = 0;
            for &r in &self.shared {
                self.slot[r as usize] = total;
                total += self.joiners_at[r as usize];
            }
            self.pairs.resize(total as usize, (0, 0));
            self.joined_sorted.clear();
            self.joined_sorted.extend_from_slice(joined);
            self.joined_sorted.sort_unstable();
            for &f in &self.joined_sorted {
                for &r in fair.path_resources(f) {
                    let slot = &mut self.slot[r as usize];
                    if *slot != u32::MAX {
                        self.pairs[*slot as usize] = (r, f);
                        *slot += 1;
                    }
                }
            }
            for &r in &self.shared {
                self.slot[r as usize] = u32::MAX;
            }
            debug_assert!(self.pairs.windows(2).all(|w| w[0] < w[1]), "pairs sorted by (port, flow)");
        }
        // A port only one flow joins now still bursts with those that joined it a moment ago.
        for &f in joined {
            for &r in fair.path_resources(f) {
                if self.joiners_at[r as usize] == 1 && !self.recent[r as usize].is_empty() {
                    self.pairs.push((r, f));
                }
            }
        }
        let first_victim = victims.len();
        let mut start = 0;
        while start < self.pairs.len() {
            let r = self.pairs[start].0;
            let mut end = start + 1;
            while end < self.pairs.len() && self.pairs[end].0 == r {
                end += 1;
            }
            self.burst_at(fair, r, start..end, left, victims);
            start = end;
        }
        self.timeouts += (victims.len() - first_victim) as u64;
        // Flows that joined and were not cut are the next instants' recent joiners, and may
        // still be charged for a crowded steady share.
        for &f in joined {
            if !self.chosen[f as usize] {
                for &r in fair.path_resources(f) {
                    if self.joiners_at[r as usize] > 0 {
                        self.recent[r as usize].push((left.now, f));
                    }
                }
                self.steady_overflow(fair, f, left, victims);
            }
        }
        for &r in &self.touched {
            self.joiners_at[r as usize] = 0;
        }
        for &f in &victims[first_victim..] {
            self.chosen[f as usize] = false;
            self.resumed[f as usize] = true;
        }
        for &r in &self.overloaded_list {
            self.overloaded[r as usize] = false;
        }
        self.overloaded_list.clear();
    }

    /// How long victim `f` stalls, seconds: the RTO for a burst's victim, its expected
    /// timeouts' worth for a flow charged for steady overflow.
    pub(super) fn stall_s(&self, f: u32) -> f64 {
        self.stall_s[f as usize]
    }

    /// The steady-overflow rule (module doc) for flow `f`, just (re)started: once per flow, its
    /// expected timeouts as one stall, if any port of its path has more flows than can each
    /// hold the minimum window. It is charged at the port where that costs most.
    fn steady_overflow(&mut self, fair: &FairShare, f: u32, left: BytesLeft, victims: &mut Vec<u32>) {
        if self.steady_charged[f as usize] {
            return;
        }
        let bytes = left.of(f);
        let segments = self.segments(bytes);
        if segments <= self.steady_free {
            return; // too short to leave slow start's first windows
        }
        let mut timeouts = 0.0f64;
        for &r in fair.path_resources(f) {
            let held = self.held_segments[r as usize];
            if !held.is_finite() || self.overloaded[r as usize] {
                continue;
            }
            let flows = fair.flows_on(r).len();
            let windows = flows as f64 * self.min_window;
            // Skip the port where even the most it could queue, with every channel that could
            // feed it busy, fits.
            let bound = self.feed_bound[r as usize];
            if bound <= 0.0 || windows * (1.0 - fair.capacity(r) / bound) <= held {
                continue;
            }
            let queued = windows * self.queued_share(fair, r);
            if queued <= held {
                continue;
            }
            // The share of the port's flows that cannot hold their queued minimum window, for
            // as long as the port stays crowded: until all but the `fit` flows whose windows it
            // holds have finished, at their current rates.
            let starved = 1.0 - held / queued;
            let fit = ((flows as f64 * held / queued).floor() as usize).min(flows - 1);
            self.finish_s.clear();
            self.finish_s.extend(fair.flows_on(r).iter().map(|&g| left.of(g) / fair.rate(g)));
            let crowded_s = *self.finish_s.select_nth_unstable_by(flows - fit - 1, f64::total_cmp).1;
            let crowded = self.segments(bytes.min(fair.rate(f) * crowded_s));
            let mut expected = starved * (crowded - self.steady_free).max(0.0) / self.steady_per_timeout;
            if 2 * (self.joiners_at[r as usize] as usize) < flows {
                // The crowd is the flows already here, and it leaves at their pace, whatever
                // this flow's stalls: it sends for `τ` between timeouts and then stalls an RTO.
                let tau = (bytes / fair.rate(f)).min(crowded_s) / expected.max(f64::MIN_POSITIVE);
                let later = (crowded_s - self.timeout_s - tau).max(0.0) / (self.timeout_s + tau);
                expected = expected.min(1.0 - (-expected).exp() + later);
            }
            timeouts = timeouts.max(expected);
        }
        if timeouts <= 0.0 {
            return;
        }
        self.steady_charged[f as usize] = true;
        // Each timeout resends the window it lost: one segment at the minimum.
        self.retransmitted[f as usize] += (timeouts * self.segment_bytes).min(bytes);
        self.timeouts += timeouts.round() as u64;
        self.stall_s[f as usize] = timeouts * self.timeout_s;
        self.backoffs[f as usize] = 0;
        self.chosen[f as usize] = true;
        victims.push(f);
    }

    /// The share of the windows of port `r`'s flows that can sit in its queue at once,
    /// `q = max(0, 1 − C / A)`: the windows arrive at `A`, the summed rate of the distinct
    /// channels feeding `r`'s flows, while the port drains them at its rate `C`. Worked out
    /// once per port and instant (the flows at a port do not change within one).
    fn queued_share(&mut self, fair: &FairShare, r: u32) -> f64 {
        if self.queued_instant[r as usize] == self.instant {
            return self.queued[r as usize];
        }
        // A channel feeds the port while one of the flows it brought is still active there.
        let mut arrival = 0.0;
        for (feeder, flows) in &mut self.feeders[r as usize] {
            while let Some(&g) = flows.last() {
                if fair.rate(g) > 0.0 {
                    arrival += fair.capacity(*feeder);
                    break;
                }
                flows.pop();
            }
        }
        let share = if arrival > 0.0 { (1.0 - fair.capacity(r) / arrival).max(0.0) } else { 0.0 };
        self.queued_instant[r as usize] = self.instant;
        self.queued[r as usize] = share;
        share
    }

    /// Burst flow `f` times out in round trip `round` of its burst: it stalls for the RTO,
    /// doubled for every timeout in a row that no ACK timed. With timestamps a resuming flow is
    /// timed by its first ACK, so only a flow cut in its first round trip backs off. Without,
    /// only a segment sent once is timed (Karn's rule): Linux's F-RTO (RFC 5682) resends one
    /// segment, then sends new data in the second round trip, whose ACKs time the third; a flow
    /// cut in either of the first two backs off.
    fn time_out(&mut self, f: u32, round: u32) {
        let i = f as usize;
        let untimed = self.resumed[i] && round <= if self.timestamps { 0 } else { 1 };
        self.backoffs[i] = if untimed { self.backoffs[i] + 1 } else { 0 };
        self.stall_s[i] =
            (self.timeout_s * 2f64.powi(self.backoffs[i].min(30) as i32)).min(LINUX_RTO_MAX_S.max(self.timeout_s));
        self.chosen[i] = true;
    }

    /// Segments flow `f`, with `left` bytes to send when its burst starts, sends in round trip
    /// `round` of it, in slow start until its bytes are sent (RFC 5681): a fresh flow its
    /// initial window `IW`, then 2·IW, 4·IW, …; a flow resuming after a timeout 1, 2, 4, …
    /// segments (from the one-segment loss window).
    fn window(&self, f: u32, left: f64, round: u32) -> f64 {
        let first = self.first_window(f);
        let sent = self.sent_before(f, round);
        (self.segments(left) - sent).clamp(0.0, first * 2f64.powi(round as i32))
    }

    /// The window flow `f` starts its burst with: the initial window, or one segment after a timeout.
    fn first_window(&self, f: u32) -> f64 {
        if self.resumed[f as usize] {
            1.0
        } else {
            self.initial_window
        }
    }

    /// Segments flow `f` sent in the round trips of its burst before `round`.
    fn sent_before(&self, f: u32, round: u32) -> f64 {
        self.first_window(f) * first_windows_before(round)
    }

    /// The round trip in which the burst's windows first overflow port `r`, the segments lost
    /// then, and the bytes its flows still have to send from it; `None` when every round fits
    /// (flows that finish before their windows grow past the port lose nothing). Only the
    /// share `queued` of what the burst sends in a round trip stays in the queue: the rest
    /// drains while it arrives.
    fn overflow(&self, r: u32, left: BytesLeft, queued: f64) -> Option<(u32, f64, f64)> {
        let held = self.held_segments[r as usize];
        let mut round = 0;
        loop {
            let windows: f64 = self.burst.iter().map(|&f| self.window(f, left.of(f), round)).sum();
            if windows == 0.0 {
                return None;
            }
            // The first windows arrive together, at their links' rates, while the port drains;
            // later ones are ACK clocked, released as the queue drains, and sit in it.
            let in_queue = if round == 0 { queued * windows } else { windows };
            if in_queue > held {
                let bytes = self
                    .burst
                    .iter()
                    .map(|&f| (left.of(f) - self.sent_before(f, round) * self.segment_bytes).max(0.0))
                    .sum();
                return Some((round, in_queue - held, bytes));
            }
            round += 1;
        }
    }

    /// The round trip of its burst in which flow `f`, with `bytes` left, sends its last segment.
    fn last_round(&self, f: u32, bytes: f64) -> u32 {
        let windows = self.segments(bytes) / self.first_window(f);
        ((windows + 1.0).log2().ceil().max(1.0) - 1.0) as u32
    }

    /// Seconds from a burst's start at port `r` until a flow that sent its last window in round
    /// trip `last_round` has its lost tail delivered again. Nothing follows a lost tail to be
    /// acknowledged, so only the tail-loss probe finds it: the flow's last ACK returns after
    /// `last_round` round trips through the full queue and, on average, half of one more (its
    /// last segment to get in waited behind half the queue); the probe fires `tail_repair_s`
    /// later and the resent tail crosses the drained port.
    fn tail_repaired_s(&self, r: u32, last_round: u32) -> f64 {
        let (full, queue) = (self.full_round_trip_s[r as usize], self.together_s[r as usize]);
        f64::from(last_round) * full + (full - queue / 2.0) + self.tail_repair_s[r as usize]
    }

    /// The burst's survivors `self.burst[survivors_from..]` at port `r`, which overflowed in
    /// round trip `round` by `lost` segments: `⌈lost⌉` of those still sending then lose their
    /// tails (highest message indices first; drop-tail spreads the losses over the flows
    /// arriving while the queue is full, and slow start keeps it full to the burst's last round
    /// trip) and finish no earlier than their probes repair them, later by the burst's chance
    /// of a lone lost tail times the RTO. A flow with more to send after the next round trip
    /// sends it into a queue with room again, and the ACKs of those segments repair its losses
    /// by fast retransmit.
    fn repair_tails(&mut self, r: u32, round: u32, lost: f64, left: BytesLeft, survivors_from: usize) {
        let mut losers = lost.ceil() as usize;
        if losers < self.burst.len() - survivors_from {
            self.burst[survivors_from..].sort_unstable_by(|a, b| b.cmp(a)); // only some lose
        }
        self.tail_losers.clear();
        for i in survivors_from..self.burst.len() {
            if losers == 0 {
                break;
            }
            let f = self.burst[i];
            let bytes = left.of(f);
            let last_round = self.last_round(f, bytes);
            if self.window(f, bytes, round) == 0.0 || last_round > round + 1 {
                continue;
            }
            self.tail_losers.push((f, last_round));
            losers -= 1;
        }
        // Any one of them left with a single segment out stalls the burst: its mean cost.
        let alone = 1.0 - (1.0 - self.lone_tail_probability).powi(self.tail_losers.len() as i32);
        self.lone_tail_stalls += alone;
        for &(f, last_round) in &self.tail_losers {
            let repaired = left.now + self.tail_repaired_s(r, last_round) + alone * self.timeout_s;
            let at = &mut self.repaired_at[f as usize];
            *at = at.max(repaired);
        }
        self.probe_repairs += self.tail_losers.len() as u64;
    }

    /// Apply the rule (module doc) to the flows `self.pairs[joiners]` starting at port `r`.
    fn burst_at(
        &mut self,
        fair: &FairShare,
        r: u32,
        joiners: std::ops::Range<usize>,
        left: BytesLeft,
        victims: &mut Vec<u32>,
    ) {
        self.burst.clear();
        for i in joiners {
            let f = self.pairs[i].1;
            if !self.chosen[f as usize] {
                self.burst.push(f);
            }
        }
        // Flows that started here a moment ago, their first windows still queued, burst with
        // these: a barrier releases its ranks microseconds apart, their windows take milliseconds.
        let (now, together) = (left.now, self.together_s[r as usize]);
        let recent = &mut self.recent[r as usize];
        recent.retain(|&(t, g)| now - t <= together && fair.rate(g) > 0.0);
        if !recent.is_empty() {
            let chosen = &self.chosen;
            self.burst.extend(recent.iter().map(|&(_, g)| g).filter(|&g| !chosen[g as usize]));
            // A flow stalled briefly (a small steady charge) can be back within `B / C`.
            self.burst.sort_unstable();
            self.burst.dedup();
        }
        if self.burst.len() < 2 {
            return; // one flow alone is no synchronised burst
        }
        let capacity = fair.capacity(r);
        if fair.used(r) < capacity * (1.0 - SATURATED) {
            return; // no standing queue: nothing overflows
        }
        // 1. Overload: the burst offered at what the links before `r` on its paths give it (a
        // port further on cannot slow what arrives here).
        let (mut offered, mut arriving) = (fair.used(r), 0.0);
        for &f in &self.burst {
            let path = fair.path_resources(f);
            let before = &path[..path.iter().position(|&q| q == r).unwrap_or(path.len())];
            let upstream =
                before.iter().map(|&q| fair.capacity(q) / fair.flows_on(q).len() as f64).fold(capacity, f64::min);
            offered += upstream - fair.rate(f);
            arriving += upstream;
        }
        if offered <= capacity * (1.0 + SATURATED) {
            return;
        }
        self.overloaded[r as usize] = true;
        self.overloaded_list.push(r);
        // 2. Overflow: what the burst sends beyond what the port drains meanwhile and holds is
        // lost, in the round trip the burst first overflows it (the bytes still to send then
        // are what must drain). While the burst's windows arrive at `arriving` the queue grows
        // at `offered − C`: that share of them stays queued.
        let queued = (offered - capacity) / arriving;
        let Some((round, lost, bytes)) = self.overflow(r, left, queued) else {
            return;
        };
        // 3. A burst draining before the probes fire loses nothing to a timeout, but its flows'
        // lost tails wait for their probes.
        let n = self.burst.len();
        // The burst has sent its last byte `B / C` before its bytes from the overflowing round
        // trip on have drained; its probes find room if they fire after that.
        let last_round = self.burst.iter().map(|&f| self.last_round(f, left.of(f))).max().unwrap_or(0);
        let sent_by =
            f64::from(round) * self.full_round_trip_s[r as usize] + bytes / capacity - self.together_s[r as usize];
        let cut = if sent_by <= self.tail_repaired_s(r, last_round) {
            0
        } else {
            // 4. The port keeps K flows, or the share σ^(√q·ℓ·S̄) of all its flows if more (S̄:
            // the segments each burst flow has left from the overflow on; ℓ: the share of the
            // overflowing round trip's queued segments lost), but no more than it holds minimum
            // windows for besides the burst's flows done within two round trips; the flows
            // already streaming hold their places, the burst loses the rest.
            // Flows another port already cut at this instant are leaving: counting them would
            // let two ports of one burst cut every flow between them, again at every resume.
            let chosen = &self.chosen;
            let flows = fair.flows_on(r).iter().filter(|&&f| !chosen[f as usize]).count();
            let overshoot = lost / (lost + self.held_segments[r as usize]);
            let at_risk = queued.powf(QUEUED_SHARE_EXPONENT) * overshoot * bytes / n as f64 / self.segment_bytes;
            let share = self.survival_per_segment.powf(at_risk);
            let finishing = self.burst.iter().filter(|&&f| self.last_round(f, left.of(f)) <= round + 2).count();
            let holds = self.held_segments[r as usize] / (queued * self.min_window);
            let kept =
                (self.clear_flows[r as usize] as f64).max((share * flows as f64).min(holds.floor() + finishing as f64));
            // Whole victims only: the fraction left over is owed to the port's next burst.
            let owed = &mut self.owed_victims[r as usize];
            let expected = *owed + (flows as f64 - kept).clamp(0.0, n as f64);
            let cut = ((expected + 0.5).floor().max(0.0) as usize).min(n);
            *owed = (expected - cut as f64).min(0.5);
            cut
        };
        if cut > 0 && cut < n {
            // Highest message indices first: only the victims need ordering.
            self.burst.select_nth_unstable_by(cut, |a, b| b.cmp(a));
        }
        // Every lost segment is sent again: the victims lose their first windows, the
        // survivors share the rest of the overflow.
        let mut unassigned = lost;
        for i in 0..cut {
            let f = self.burst[i];
            let bytes_left = left.of(f);
            let sent = self.window(f, bytes_left, round);
            let window = sent.min(unassigned);
            self.retransmitted[f as usize] += (window * self.segment_bytes).min(bytes_left);
            unassigned -= window;
            self.time_out(f, round);
            victims.push(f);
        }
        if cut < n && unassigned > 0.0 {
            let share = unassigned * self.segment_bytes / (n - cut) as f64;
            for &f in &self.burst[cut..] {
                self.retransmitted[f as usize] += share.min(left.of(f));
            }
            self.repair_tails(r, round, unassigned, left, cut);
        }
    }
}

#[cfg(test)]
#[path = "loss_tests.rs"]
mod tests;
