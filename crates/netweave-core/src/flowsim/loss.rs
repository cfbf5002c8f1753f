//! Port buffers and TCP losses: what the flow model adds on a lossy (Ethernet) fabric.
//!
//! On a lossless fabric the max-min share is the whole story. On Ethernet every switch port
//! (a directed channel leaving a switch) queues at most [`port_buffer_bytes`] and drops the
//! rest, and the senders are TCP connections. A flow-level model cannot follow segments, so it
//! keeps what decides a collective's time: *retransmission timeouts*. A loss that fast
//! retransmit repairs costs a round trip and leaves the port busy — the max-min rate already
//! stands for it. A timeout stalls the flow for the RTO (Linux's `RTO_min`, 200 ms, against
//! microseconds of transfer), and when every flow left at a port is stalled the port idles:
//! the goodput collapse of incast (Phanishayee et al., FAST'08; Chen et al., WREN'09).
//!
//! The rule, applied at every instant flows (re)start streaming through a buffered port `p`
//! that is then saturated, with `n` flows limited by `p`:
//!
//! - `p` holds `K = max(1, ⌊(B + C·RTT) / (w · MSS)⌋)` flows without a timeout: each needs
//!   `w` segments of window ([`TcpModel::window_segments`]) to ride out its slow-start
//!   overshoot by fast retransmit, and the port holds its buffer `B` plus what its rate `C`
//!   keeps in flight over the flows' round trip.
//! - If `n > K`, the synchronised bursts overflow it and only `max(K, round(f · n))` flows
//!   survive ([`TcpModel::survivor_fraction`]); the others time out. Victims are the flows
//!   that started streaming last (those just (re)starting first: their burst met the full
//!   queue), ties broken by the higher message index.
//! - A victim stops streaming for [`TcpModel::timeout_s`] and then restarts where it was (its
//!   bytes already delivered stay delivered), meeting the same rule again. No exponential
//!   backoff: a flow restarting after a timeout has a window of one segment, which gets
//!   through; it loses later in slow start and Linux times that loss afresh.
//!
//! Where it is wrong is in `docs/flowsim.md`; the parameters' defaults are Linux's and the
//! incast literature's, and `netweave emulate calibrate` fits them to a measured fabric.
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
/// Segments of window a flow needs at a port to recover its losses by fast retransmit: Linux's
/// initial window (10 segments, what a starting flow bursts) plus the three duplicate ACKs fast
/// retransmit waits for and the lost segment itself.
pub const RECOVERY_WINDOW_SEGMENTS: f64 = 14.0;
/// Share of the flows contending at an overflowing port that escape a timeout, measured on
/// emulated incast (1 MB per sender, 4–31 senders, 64 KiB port buffer: about 40 % of the flows
/// still waiting finish in each RTO round).
pub const INCAST_SURVIVOR_FRACTION: f64 = 0.4;

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
    /// Share of the flows contending at an overflowing port that escape a timeout.
    pub survivor_fraction: f64,
}

impl Default for TcpModel {
    fn default() -> Self {
        TcpModel {
            segment_bytes: ETHERNET_MSS,
            timeout_s: LINUX_RTO_MIN_S,
            window_segments: RECOVERY_WINDOW_SEGMENTS,
            survivor_fraction: INCAST_SURVIVOR_FRACTION,
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
        if !(self.window_segments.is_finite() && self.window_segments > 0.0) {
            return crate::invalid!(
                "window per flow must be a positive number of segments, got {}",
                self.window_segments
            );
        }
        if !(self.survivor_fraction.is_finite() && (0.0..=1.0).contains(&self.survivor_fraction)) {
            return crate::invalid!("survivor fraction must lie in 0..1, got {}", self.survivor_fraction);
        }
        Ok(())
    }
}

/// Per-run state of the lossy model.
pub(super) struct Losses {
    /// Flows port `r` holds without a timeout; `u32::MAX` for resources that never drop
    /// (host NICs push back on their sockets, host limits are not queues).
    clear_flows: Vec<u32>,
    survivor_fraction: f64,
    pub(super) timeout_s: f64,
    /// Per flow: when it last (re)started streaming, for choosing victims.
    started: Vec<f64>,
    /// Per flow: stopped by a timeout, waiting to restart.
    pub(super) stalled: Vec<bool>,
    /// Scratch: ports already examined in this instant, and flows already chosen as victims.
    seen: Vec<bool>,
    chosen: Vec<bool>,
    ports: Vec<u32>,
    contenders: Vec<(f64, u32)>,
    /// Timeouts so far.
    pub(super) timeouts: u64,
}

/// Relative tolerance for "the port is saturated" and "the flow is limited by this port".
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
        let window = tcp.window_segments * tcp.segment_bytes as f64;
        let clear_flows = (0..nres)
            .map(|r| {
                if r >= work.num_channels {
                    return u32::MAX;
                }
                let (from, _to) = topo.channel_ends(r as u32);
                if topo.is_host(from.node) {
                    return u32::MAX;
                }
                let held = buffer + work.capacity[r] * rtt[r];
                ((held / window).floor() as u32).max(1)
            })
            .collect();
        Some(Losses {
            clear_flows,
            survivor_fraction: tcp.survivor_fraction,
            timeout_s: tcp.timeout_s,
            started: vec![0.0; work.len()],
            stalled: vec![false; work.len()],
            seen: vec![false; nres],
            chosen: vec![false; work.len()],
            ports: Vec::new(),
            contenders: Vec::new(),
            timeouts: 0,
        })
    }

    /// The flows that time out now: `joined` flows have just (re)started streaming at `now`
    /// and the shares in `fair` are current. Victims are appended to `victims`.
    pub(super) fn victims(&mut self, fair: &FairShare, joined: &[u32], now: f64, victims: &mut Vec<u32>) {
        for &f in joined {
            self.started[f as usize] = now;
            for &r in fair.path_resources(f) {
                if self.clear_flows[r as usize] != u32::MAX && !self.seen[r as usize] {
                    self.seen[r as usize] = true;
                    self.ports.push(r);
                }
            }
        }
        let first_victim = victims.len();
        for i in 0..self.ports.len() {
            let r = self.ports[i];
            self.seen[r as usize] = false;
            let capacity = fair.capacity(r);
            if fair.used(r) < capacity * (1.0 - SATURATED) {
                continue; // no standing queue: nothing overflows
            }
            let flows = fair.flows_on(r);
            let n_all = flows.len() as u32;
            if n_all <= self.clear_flows[r as usize] {
                continue;
            }
            // Flows limited here run at the port's top rate; the others queue elsewhere.
            let level = flows.iter().map(|&f| fair.rate(f)).fold(0.0, f64::max);
            self.contenders.clear();
            let chosen = &self.chosen;
            self.contenders.extend(
                flows
                    .iter()
                    .filter(|&&f| fair.rate(f) >= level * (1.0 - SATURATED) && !chosen[f as usize])
                    .map(|&f| (self.started[f as usize], f)),
            );
            let n = self.contenders.len() as u32;
            let keep = self.clear_flows[r as usize].max((self.survivor_fraction * n as f64).round() as u32);
            if n <= keep {
                continue;
            }
            // Latest starters first, then the higher message index: only the victims need ordering.
            let cut = (n - keep) as usize;
            let latest_first = |a: &(f64, u32), b: &(f64, u32)| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1));
            if cut < self.contenders.len() {
                self.contenders.select_nth_unstable_by(cut, latest_first);
            }
            for &(_, f) in &self.contenders[..cut] {
                self.chosen[f as usize] = true;
                victims.push(f);
            }
        }
        self.ports.clear();
        for &f in &victims[first_victim..] {
            self.chosen[f as usize] = false;
        }
        self.timeouts += (victims.len() - first_victim) as u64;
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
        // 64 KiB / (14 × 1460 B) = 3 flows ride out their losses by fast retransmit.
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
        // 31 → 12 survive, then 19 → 8, 11 → 4, 7 → 3, 4 → 3, 1: five timeout rounds, each
        // ending once the port's survivors have drained long before the RTO fires.
        let rounds = (r.makespan_s / tcp.timeout_s).floor();
        assert_eq!(rounds, 5.0, "makespan {}", r.makespan_s);
        // Deeper buffers hold every sender: back to the lossless time.
        let deep = Switching::new(LinkLayer::Ethernet, Some(31 * 14 * 1460)).unwrap();
        let r = incast(&star(32, deep), 31, 1_000_000);
        assert_eq!(r.timeouts, 0);
        assert!((r.makespan_s - 0.031).abs() < 1e-9);
    }

    #[test]
    fn parameters_are_checked() {
        for bad in [
            TcpModel { timeout_s: 0.0, ..TcpModel::default() },
            TcpModel { survivor_fraction: 1.5, ..TcpModel::default() },
            TcpModel { window_segments: f64::NAN, ..TcpModel::default() },
            TcpModel { segment_bytes: 0, ..TcpModel::default() },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(TcpModel::default().check().is_ok());
    }
}
