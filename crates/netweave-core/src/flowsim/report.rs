//! What a run reports: makespan, per-host finish times, per-channel bytes, busy time and
//! utilisation, and the engine's cost counters.

use serde::Serialize;

use super::model::Sim;
use super::Executor;

/// One sample of the optional time series.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SeriesPoint {
    pub time_s: f64,
    /// Flows streaming data at this time.
    pub active_flows: u32,
    /// Sum of their rates, bytes/s.
    pub aggregate_rate_bps: f64,
}

/// Result of a flow-level run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowReport {
    pub executor: Executor,
    pub nct: u32,
    /// Time from the first issue to the last delivery, seconds.
    pub makespan_s: f64,
    /// Messages simulated (including those between ranks on one host).
    pub messages: u64,
    /// Messages that crossed the network.
    pub network_messages: u64,
    /// Payload bytes of all messages.
    pub payload_bytes: u64,
    /// Per host index: time its last send left or its last message arrived (0 if idle).
    pub host_finish_s: Vec<f64>,
    /// Per directed channel: time it carried data.
    pub channel_busy_s: Vec<f64>,
    /// Per directed channel: bytes on the wire it carried.
    pub channel_bytes: Vec<u64>,
    /// Per directed channel: bytes carried / (capacity × makespan).
    pub channel_utilisation: Vec<f64>,
    pub max_channel_utilisation: f64,
    /// Mean over channels that carried anything.
    pub mean_channel_utilisation: f64,
    /// Mean over sending hosts of payload bytes sent / makespan, MiB/s (IMB-style per-server
    /// throughput: an all-to-all of `M` bytes per pair gives `(N − 1)·M / T`).
    pub throughput_per_server_mib_s: f64,
    /// Sync messages sent (DAG executor).
    pub sync_messages: u64,
    /// Whether the fabric's link layer drops (Ethernet: port buffers and TCP timeouts were
    /// modelled) or not (InfiniBand: lossless max-min).
    pub lossy: bool,
    /// Retransmission timeouts the lossy model charged.
    pub timeouts: u64,
    /// Bytes sent again after losses (the lossy model's overflowed segments), counted in
    /// `channel_bytes` on every channel of their flow's path.
    pub retransmitted_bytes: u64,
    /// Tails lost in a burst and resent by their tail-loss probes (a flow counts once per burst).
    pub probe_repairs: u64,
    /// Bursts expected to stall on a lone lost tail (the sum of each burst's chance; each such
    /// stall costs about an RTO, charged as its mean).
    pub lone_tail_stalls: f64,
    /// Bandwidth reallocations and flows recomputed in them (how much work incrementality saved).
    pub reallocations: u64,
    pub flows_recomputed: u64,
    /// Flows whose rate actually changed in those reallocations (each costs a new drain event).
    pub rates_changed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<SeriesPoint>>,
}

impl Sim<'_> {
    pub(super) fn report(mut self) -> FlowReport {
        let makespan = self.host_finish.iter().copied().fold(0.0, f64::max);
        let nch = self.work.num_channels;
        // Close the busy-time books (every flow has left, so all resources are idle now).
        // Bytes a flow sent again after losses cross its whole path a second time.
        let retransmitted = |m: usize| self.losses.as_ref().map_or(0, |l| l.retransmitted[m].round() as u64);
        let mut channel_bytes = vec![0u64; nch];
        for m in 0..self.work.len() {
            let w = self.work.wire[m].saturating_add(retransmitted(m));
            for &r in self.fair.path_resources(m as u32) {
                if (r as usize) < nch {
                    channel_bytes[r as usize] += w;
                }
            }
        }
        let channel_busy_s: Vec<f64> = self.res_busy[..nch].to_vec();
        let channel_utilisation: Vec<f64> = (0..nch)
            .map(|c| if makespan > 0.0 { channel_bytes[c] as f64 / (self.work.capacity[c] * makespan) } else { 0.0 })
            .collect();
        let used: Vec<f64> = channel_utilisation.iter().copied().filter(|&u| u > 0.0).collect();
        let mut sent = vec![0u64; self.host_finish.len()];
        let mut sender = vec![false; self.host_finish.len()];
        for m in 0..self.work.len() {
            sent[self.work.src[m] as usize] += self.work.payload[m];
            sender[self.work.src[m] as usize] = true;
        }
        let senders = sender.iter().filter(|&&s| s).count();
        let throughput = if senders > 0 && makespan > 0.0 {
            sent.iter().sum::<u64>() as f64 / senders as f64 / makespan / (1u64 << 20) as f64
        } else {
            0.0
        };
        FlowReport {
            executor: self.config.executor,
            nct: self.config.nct,
            makespan_s: makespan,
            messages: self.work.len() as u64,
            network_messages: self
                .work
                .wire
                .iter()
                .zip(&self.work.src)
                .zip(&self.work.dst)
                .filter(|((_, s), d)| s != d)
                .count() as u64,
            payload_bytes: self.work.payload.iter().sum(),
            host_finish_s: std::mem::take(&mut self.host_finish),
            channel_busy_s,
            channel_bytes,
            max_channel_utilisation: used.iter().copied().fold(0.0, f64::max),
            mean_channel_utilisation: if used.is_empty() { 0.0 } else { used.iter().sum::<f64>() / used.len() as f64 },
            channel_utilisation,
            throughput_per_server_mib_s: throughput,
            sync_messages: self.sync_messages,
            lossy: self.losses.is_some(),
            timeouts: self.losses.as_ref().map_or(0, |l| l.timeouts),
            probe_repairs: self.losses.as_ref().map_or(0, |l| l.probe_repairs),
            lone_tail_stalls: self.losses.as_ref().map_or(0.0, |l| l.lone_tail_stalls),
            retransmitted_bytes: (0..self.work.len()).map(retransmitted).sum(),
            reallocations: self.fair.updates,
            flows_recomputed: self.fair.flows_recomputed,
            rates_changed: self.fair.rates_changed,
            series: self.config.series.then(|| std::mem::take(&mut self.series)),
        }
    }
}
