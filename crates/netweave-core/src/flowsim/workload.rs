//! What a run simulates: messages resolved to hosts, wire sizes and resource paths
//! ([`Workload`]), and each executor's bookkeeping of when they may start ([`Control`]).

use crate::error::Result;
use crate::routing::RoutingTable;
use crate::topology::{ChannelId, Topology};
use crate::traffic::dag::{Dependency, TaskGraph};
use crate::traffic::Message;

use super::FlowConfig;

/// Messages resolved to hosts, wire sizes, resource paths and latencies.
pub(super) struct Workload {
    pub(super) src: Vec<u32>,
    pub(super) dst: Vec<u32>,
    pub(super) payload: Vec<u64>,
    pub(super) wire: Vec<u64>,
    pub(super) latency: Vec<f64>,
    pub(super) capacity: Vec<f64>,
    pub(super) path_off: Vec<u32>,
    pub(super) path_res: Vec<u32>,
    pub(super) num_channels: usize,
}

pub(super) fn bytes_per_s(gbps: f64) -> f64 {
    gbps * 1e9 / 8.0
}

impl Workload {
    pub(super) fn build(
        topo: &Topology,
        routes: &RoutingTable,
        msgs: &[Message],
        placement: &[u32],
        config: &FlowConfig,
    ) -> Result<Self> {
        routes.check_fits(topo)?;
        let nch = topo.num_channels();
        let nh = topo.num_hosts();
        let mut capacity: Vec<f64> =
            (0..nch).map(|c| bytes_per_s(topo.link((c / 2) as u32).spec.bandwidth_gbps)).collect();
        // Extra resources only when a host limit is overridden: injection then ejection, per host.
        let inj_base = capacity.len();
        if let Some(g) = config.injection_gbps {
            capacity.extend(std::iter::repeat(bytes_per_s(g)).take(nh));
        }
        let ej_base = capacity.len();
        if let Some(g) = config.ejection_gbps {
            capacity.extend(std::iter::repeat(bytes_per_s(g)).take(nh));
        }
        if let Some((c, &cap)) = capacity.iter().enumerate().find(|(_, &c)| !(c.is_finite() && c > 0.0)) {
            return crate::invalid!("resource {c} has bandwidth {cap} B/s; bandwidths must be positive");
        }
        let n = msgs.len();
        let mut w = Workload {
            src: Vec::with_capacity(n),
            dst: Vec::with_capacity(n),
            payload: Vec::with_capacity(n),
            wire: Vec::with_capacity(n),
            latency: Vec::with_capacity(n),
            capacity,
            path_off: Vec::with_capacity(n + 1),
            path_res: Vec::with_capacity(n * 6),
            num_channels: nch,
        };
        w.path_off.push(0);
        let mut channels: Vec<ChannelId> = Vec::new();
        for m in msgs {
            let (s, d) = (placement[m.src as usize], placement[m.dst as usize]);
            let bytes = config.bytes.unwrap_or(m.bytes);
            w.src.push(s);
            w.dst.push(d);
            w.payload.push(bytes);
            if s == d {
                w.wire.push(0);
                w.latency.push(0.0);
            } else {
                channels.clear();
                routes.path(topo, s as usize, d as usize, &mut channels)?;
                let wire = config.wire_bytes(bytes);
                if wire == u64::MAX {
                    return crate::invalid!(
                        "--bytes: a message of {bytes} bytes with its headers exceeds 2^64 - 1 bytes on the wire"
                    );
                }
                w.wire.push(wire);
                w.latency.push(channels.iter().map(|&c| topo.link(c / 2).spec.latency_ns).sum::<f64>() * 1e-9);
                if config.injection_gbps.is_some() {
                    w.path_res.push((inj_base + s as usize) as u32);
                }
                w.path_res.extend_from_slice(&channels);
                if config.ejection_gbps.is_some() {
                    w.path_res.push((ej_base + d as usize) as u32);
                }
            }
            if w.path_res.len() > u32::MAX as usize {
                return crate::invalid!("the schedule's paths exceed 2^32 hops in total; simulate it in parts");
            }
            w.path_off.push(w.path_res.len() as u32);
        }
        // The report sums payloads (and wire bytes) as u64: refuse a workload whose totals would
        // not fit rather than report a wrapped figure.
        crate::checked::total_bytes("--bytes: the total payload", w.payload.iter().copied())?;
        crate::checked::total_bytes("--bytes: the total bytes on the wire", w.wire.iter().copied())?;
        Ok(w)
    }

    pub(super) fn len(&self) -> usize {
        self.src.len()
    }
}

/// Executor-specific bookkeeping.
pub(super) enum Control {
    Sync {
        /// Messages of phase `p` are `phase_off[p]..phase_off[p + 1]` (they are stored in phase order).
        phase_off: Vec<u32>,
        outstanding: Vec<u32>,
    },
    Async,
    LocalSync {
        steps: usize,
        /// Messages sent by host `h` in step `s`: `by_host_step[off[h * steps + s]..off[h * steps + s + 1]]`.
        off: Vec<u32>,
        by_host_step: Vec<u32>,
        step_of: Vec<u32>,
        /// Messages still to arrive at / leave host `h` in step `s`.
        in_left: Vec<u32>,
        out_left: Vec<u32>,
        next_step: Vec<u32>,
    },
    Dag {
        /// Successors of task `t`: `succ[succ_off[t]..succ_off[t + 1]]`.
        succ_off: Vec<u32>,
        succ: Vec<(u32, Dependency)>,
        waiting: Vec<u32>,
        /// Task each relay forwards, `u32::MAX` if none.
        relay_of: Vec<u32>,
    },
}

impl Control {
    pub(super) fn sync(phase_of: &[u32], phases: usize) -> Control {
        let mut phase_off = vec![0u32; phases + 1];
        for &p in phase_of {
            phase_off[p as usize + 1] += 1;
        }
        let outstanding = phase_off[1..].to_vec();
        for p in 0..phases {
            phase_off[p + 1] += phase_off[p];
        }
        Control::Sync { phase_off, outstanding }
    }

    pub(super) fn local_sync(work: &Workload, phase_of: &[u32], phases: usize, nct: u32) -> Result<Control> {
        let steps = phases.div_ceil(nct as usize).max(1);
        let hosts = work.src.iter().chain(&work.dst).map(|&h| h as usize + 1).max().unwrap_or(0);
        let cells = hosts.saturating_mul(steps);
        if cells > 200_000_000 {
            return crate::invalid!("local sync over {hosts} hosts × {steps} steps is too large to track");
        }
        let step_of: Vec<u32> = phase_of.iter().map(|&p| p / nct).collect();
        let mut off = vec![0u32; cells + 1];
        let mut in_left = vec![0u32; cells];
        for (m, &s) in step_of.iter().enumerate() {
            off[work.src[m] as usize * steps + s as usize + 1] += 1;
            in_left[work.dst[m] as usize * steps + s as usize] += 1;
        }
        let out_left = off[1..].to_vec();
        for i in 0..cells {
            off[i + 1] += off[i];
        }
        let mut fill = off.clone();
        let mut by_host_step = vec![0u32; step_of.len()];
        for (m, &s) in step_of.iter().enumerate() {
            let cell = work.src[m] as usize * steps + s as usize;
            by_host_step[fill[cell] as usize] = m as u32;
            fill[cell] += 1;
        }
        Ok(Control::LocalSync { steps, off, by_host_step, step_of, in_left, out_left, next_step: vec![0; hosts] })
    }

    pub(super) fn dag(dag: &TaskGraph) -> Control {
        let n = dag.num_tasks();
        let mut succ_off = vec![0u32; n + 1];
        let mut waiting = vec![0u32; n];
        let mut relay_of = vec![u32::MAX; n];
        for t in 0..n as u32 {
            for &(p, kind) in dag.predecessors(t) {
                succ_off[p as usize + 1] += 1;
                waiting[t as usize] += 1;
                if kind == Dependency::Relay {
                    relay_of[t as usize] = p;
                }
            }
        }
        for i in 0..n {
            succ_off[i + 1] += succ_off[i];
        }
        let mut fill = succ_off.clone();
        let mut succ = vec![(0u32, Dependency::Complete); dag.num_dependencies()];
        for t in 0..n as u32 {
            for &(p, kind) in dag.predecessors(t) {
                succ[fill[p as usize] as usize] = (t, kind);
                fill[p as usize] += 1;
            }
        }
        Control::Dag { succ_off, succ, waiting, relay_of }
    }
}
