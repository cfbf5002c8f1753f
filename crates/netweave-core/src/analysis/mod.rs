//! Analysis: exact, static per-phase directed-link loads — the first evaluation engine.
//!
//! For each phase of a [`Schedule`], every message's routed path is followed and each directed
//! channel (host links included) counts the flows and bytes crossing it. From the counts:
//!
//! - **congestion**: the phase's largest channel load, and the contended channels (load > 1),
//!   listed with their end nodes;
//! - **throughput ratio** (paper 000): a flow whose most loaded channel carries `c` flows gets
//!   `1/c`; the ratio is the mean over all flows of all phases (1.0 = contention-free);
//! - **lock-step fluid time** (paper 001): phases run back to back, and each lasts as long as
//!   its most loaded channel needs to move its bytes, `max_c bytes_c / bandwidth_c`, plus the
//!   latency of the phase's longest path when [`AnalysisOptions`] asks for it. Paper 001 treats
//!   node–router links as "sufficiently faster" than router links, so
//!   [`LoadReport::fluid_time_s`] counts switch-to-switch channels only (that is the model of
//!   the paper's T4 table); [`LoadReport::fluid_time_host_links_s`] bounds host links by their
//!   bandwidth too;
//! - **paper 003's cost terms**, named as the mapper names them ([`mapping::cost`](crate::mapping::cost)):
//!   `sum_hops` and `hop_bytes` (hops are switch-to-switch links crossed), `max_channel_bytes`
//!   (the largest byte total on one directed channel, host links included) and
//!   `hops_x_max_channel` (`sum_hops × max_channel_bytes`, paper 003's `Σhops × max_link`);
//! - **completeness**: the schedule's own check of what it claims
//!   ([`Schedule::completeness`]: for a direct all-to-all every ordered rank pair exactly once;
//!   each phase a permutation where the schedule claims it), and which phases are permutations.
//!
//! Messages whose ranks share a host never touch the network: they count for completeness but
//! not as flows.
//!
//! ```
//! use netweave_core::{analysis::analyze, routing::shortest_path, topology::grid::mesh, traffic::Schedule};
//! let topo = mesh(&[4], 1).unwrap();
//! let routes = shortest_path(&topo).unwrap();
//! let sched = Schedule::shift_alltoall(4, 1 << 20).unwrap();
//! let report = analyze(&topo, &routes, &sched).unwrap();
//! assert_eq!(report.max_congestion, 2);      // phase 2: 0→2 and 1→3 share the link 1→2
//! assert!(report.throughput_ratio < 1.0);
//! assert!(report.complete);                  // every ordered pair once
//! ```
//!
//! The count runs over phases in parallel (rayon, one contiguous block of phases per thread);
//! every figure merges exactly (integer counts, per-phase times summed in phase order), so the
//! report does not depend on the number of threads.

pub mod bound;
mod channel_load;
pub mod dag;
mod paths;

use rayon::prelude::*;
use serde::Serialize;

use crate::error::{NetweaveError, Result};
use crate::routing::RoutingTable;
use crate::topology::{ChannelId, NodeId, Topology};
use crate::traffic::{Completeness, Schedule};
use paths::PathTable;

pub use bound::{bottleneck_bound, dag_bound, schedule_bound, Binding, BottleneckBound};
pub use channel_load::{
    dag_channel_bytes, pattern_channel_load, phase_channel_flows, routed_channel_bytes, schedule_channel_bytes,
};

/// Knobs of [`analyze_with`]; the default is the pure fluid model of paper 001.
#[derive(Clone, Debug, PartialEq)]
pub struct AnalysisOptions {
    /// Seconds added to a phase per channel on its longest path (router plus wire); 0 = none.
    pub hop_latency_s: f64,
    /// Add the topology's link latencies along each phase's longest path to its time.
    pub link_latency: bool,
    /// How many contended links [`LoadReport::contended_links`] lists (most loaded first).
    pub max_listed_links: usize,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions { hop_latency_s: 0.0, link_latency: false, max_listed_links: 20 }
    }
}

/// Loads of one phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseLoad {
    /// Messages that cross at least one link (self-sends and same-host ranks excluded).
    pub flows: u32,
    /// Largest number of flows on one directed channel.
    pub max_load: u32,
    /// Number of directed channels carrying more than one flow.
    pub contended_channels: u32,
    /// Mean of 1/(max load on the flow's path) over the phase's flows (1.0 if none).
    pub throughput_ratio: f64,
    /// Lock-step fluid time of the phase over switch-to-switch channels, in seconds.
    pub fluid_time_s: f64,
    /// Like `fluid_time_s`, with host links bounded by their bandwidth too.
    pub fluid_time_host_links_s: f64,
    /// No rank sends twice and no rank receives twice in this phase.
    pub permutation: bool,
}

/// A directed channel that carried more than one flow in some phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContendedLink {
    pub channel: ChannelId,
    /// Node the channel leaves.
    pub from: NodeId,
    /// Node the channel enters.
    pub to: NodeId,
    pub from_label: String,
    pub to_label: String,
    /// Largest number of flows on the channel in one phase.
    pub max_load: u32,
    /// First phase reaching `max_load`.
    pub phase: u32,
    /// Number of phases in which the channel carries more than one flow.
    pub contended_phases: u32,
    /// Bytes carried over the whole schedule.
    pub bytes: u64,
}

/// Result of [`analyze`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadReport {
    pub phases: Vec<PhaseLoad>,
    /// Every claim the schedule makes holds ([`Completeness::ok`]): its collective is
    /// complete and, if it claims so, every phase is a permutation.
    pub complete: bool,
    /// The first problem found (`None` when complete).
    pub problem: Option<String>,
    pub completeness: Completeness,
    /// Phases in which no rank sends twice and no rank receives twice.
    pub permutation_phases: u32,
    /// Largest load over all phases and channels.
    pub max_congestion: u32,
    /// Paper 000's ratio: mean of 1/c over all flows of all phases.
    pub throughput_ratio: f64,
    /// Flows counted (messages between different hosts).
    pub flows: u64,
    /// Paper 001's lock-step fluid time over switch-to-switch channels, in seconds.
    pub fluid_time_s: f64,
    /// Lock-step fluid time with host links bounded by their bandwidth too, in seconds.
    pub fluid_time_host_links_s: f64,
    /// Bytes moved between different hosts.
    pub bytes: u64,
    /// Largest total bytes carried by one directed channel, host links included.
    pub max_channel_bytes: u64,
    /// Paper 003's Σhops: switch-to-switch channels crossed, summed over flows.
    pub sum_hops: u64,
    /// Σ bytes × hops over flows.
    pub hop_bytes: u64,
    /// Paper 003's cost `sum_hops × max_channel_bytes` (a float: it can exceed 64 bits), the
    /// mapper's figure of the same name.
    pub hops_x_max_channel: f64,
    /// Directed channels contended (load > 1) in at least one phase.
    pub contended_links_total: u32,
    /// The most loaded contended channels, at most [`AnalysisOptions::max_listed_links`].
    pub contended_links: Vec<ContendedLink>,
}

/// Count per-phase channel loads of `schedule` routed by `routes` on `topo`, with the default
/// [`AnalysisOptions`] (pure fluid time, no latency).
pub fn analyze(topo: &Topology, routes: &RoutingTable, schedule: &Schedule) -> Result<LoadReport> {
    analyze_with(topo, routes, schedule, &AnalysisOptions::default())
}

/// Like [`analyze`], with options.
pub fn analyze_with(
    topo: &Topology,
    routes: &RoutingTable,
    schedule: &Schedule,
    options: &AnalysisOptions,
) -> Result<LoadReport> {
    if !(options.hop_latency_s.is_finite() && options.hop_latency_s >= 0.0) {
        return crate::invalid!(
            "per-hop latency must be a non-negative number of seconds, got {}",
            options.hop_latency_s
        );
    }
    routes.check_fits(topo)?;
    schedule.check_fits(topo)?;
    analyze_impl(topo, routes, schedule, options, true)
}

/// [`analyze_with`], optionally without the path table (tests compare both ways).
fn analyze_impl(
    topo: &Topology,
    routes: &RoutingTable,
    schedule: &Schedule,
    options: &AnalysisOptions,
    path_table: bool,
) -> Result<LoadReport> {
    let mut ctx = Context::new(topo, routes, schedule, options);
    if !path_table {
        ctx.table = None;
    }
    // One contiguous block of phases per thread, balanced by message count.
    let blocks = phase_blocks(schedule, rayon::current_num_threads());
    let (completeness, tallies) = rayon::join(|| schedule.completeness(), || count_blocks(&ctx, blocks));
    let mut tallies = tallies.into_iter();
    let mut total = tallies.next().unwrap_or_else(|| Tally::new(&ctx));
    for t in tallies {
        total.merge(t);
    }
    total.finish(&ctx, completeness)
}

/// Count each block of phases on its own worker.
fn count_blocks(ctx: &Context, blocks: Vec<(usize, usize)>) -> Vec<Tally> {
    blocks
        .into_par_iter()
        .map(|(lo, hi)| {
            let mut t = Tally::new(ctx);
            for p in lo..hi {
                if let Err(e) = t.phase(ctx, p) {
                    t.error = Some(e);
                    break;
                }
            }
            t.flush_pending();
            t
        })
        .collect()
}

/// Split phases `0..P` into at most `parts` contiguous blocks of similar message counts.
fn phase_blocks(schedule: &Schedule, parts: usize) -> Vec<(usize, usize)> {
    let phases = schedule.num_phases();
    let parts = parts.clamp(1, phases.max(1));
    let per_block = schedule.num_messages().div_ceil(parts).max(1);
    let mut blocks = Vec::with_capacity(parts);
    let (mut lo, mut acc) = (0, 0);
    for p in 0..phases {
        acc += schedule.phase(p).len();
        if acc >= per_block && blocks.len() + 1 < parts {
            blocks.push((lo, p + 1));
            lo = p + 1;
            acc = 0;
        }
    }
    if lo < phases || blocks.is_empty() {
        blocks.push((lo, phases));
    }
    blocks
}

/// Inputs shared by every worker, with the per-channel constants precomputed.
struct Context<'a> {
    topo: &'a Topology,
    routes: &'a RoutingTable,
    schedule: &'a Schedule,
    options: &'a AnalysisOptions,
    table: Option<PathTable>,
    /// Switch-to-switch channel?
    fabric: Vec<bool>,
    /// Seconds per byte of each channel.
    secs_per_byte: Vec<f64>,
    /// Seconds per byte of switch-to-switch channels, 0 for host links.
    fabric_secs_per_byte: Vec<f64>,
    /// Latency of each channel when latency is modelled.
    latency: Option<Vec<f64>>,
    bandwidth: Option<UniformBandwidth>,
}

impl<'a> Context<'a> {
    fn new(topo: &'a Topology, routes: &'a RoutingTable, schedule: &'a Schedule, options: &'a AnalysisOptions) -> Self {
        let fabric = paths::fabric_channels(topo);
        let secs_per_byte: Vec<f64> =
            (0..topo.num_channels()).map(|c| 8.0 / (topo.links()[c / 2].spec.bandwidth_gbps * 1e9)).collect();
        let fabric_secs_per_byte = secs_per_byte.iter().zip(&fabric).map(|(&s, &f)| if f { s } else { 0.0 }).collect();
        let latency = (options.link_latency || options.hop_latency_s > 0.0).then(|| {
            (0..topo.num_channels())
                .map(|c| {
                    let wire = if options.link_latency { topo.links()[c / 2].spec.latency_ns * 1e-9 } else { 0.0 };
                    wire + options.hop_latency_s
                })
                .collect()
        });
        let table = PathTable::build(topo, routes, &fabric, schedule.num_messages());
        let bandwidth = UniformBandwidth::new(&fabric, &secs_per_byte);
        Context {
            topo,
            routes,
            schedule,
            options,
            table,
            fabric,
            secs_per_byte,
            fabric_secs_per_byte,
            latency,
            bandwidth,
        }
    }
}

/// A phase's channel figures.
struct ChannelFigures {
    max_load: u32,
    contended: u32,
    /// Longest time a channel needs for its bytes, host links included.
    secs_all: f64,
    /// Longest time a switch-to-switch channel needs for its bytes.
    secs_fabric: f64,
}

/// Present when every switch-to-switch link has one bandwidth and every host link one
/// (possibly another): a phase's time then follows from its largest loads alone.
struct UniformBandwidth {
    /// `u32::MAX` for switch-to-switch channels, 0 for host links (a branch-free filter).
    fabric_mask: Vec<u32>,
    fabric_secs_per_byte: f64,
    host_secs_per_byte: f64,
}

impl UniformBandwidth {
    fn new(fabric: &[bool], secs_per_byte: &[f64]) -> Option<UniformBandwidth> {
        let one = |want: bool| -> Option<f64> {
            let mut it = secs_per_byte.iter().zip(fabric).filter(|(_, &f)| f == want).map(|(&s, _)| s);
            let first = it.next().unwrap_or(0.0);
            it.all(|s| s == first).then_some(first)
        };
        Some(UniformBandwidth {
            fabric_mask: fabric.iter().map(|&f| if f { u32::MAX } else { 0 }).collect(),
            fabric_secs_per_byte: one(true)?,
            host_secs_per_byte: one(false)?,
        })
    }
}

/// Count each flow's worst channel load into `hist`; the flows' paths lie back to back at
/// stride `STRIDE` in `paths`.
fn worst_histogram<const STRIDE: usize>(paths: &[ChannelId], load: &[u32], hist: &mut [u64]) {
    for path in paths.chunks_exact(STRIDE) {
        let path: &[ChannelId; STRIDE] = path.try_into().unwrap();
        let worst = path.iter().fold(0, |w, &c| w.max(load[c as usize]));
        hist[worst as usize] += 1;
    }
}

/// Channels per step of the dense scan.
const LANES: usize = 16;

/// One worker's scratch space and running totals over its block of phases.
struct Tally {
    // Per-phase scratch, reset after each phase.
    load: Vec<u32>,
    phase_bytes: Vec<u64>,
    touched: Vec<ChannelId>,
    touched_len: usize,
    longest_latency: f64,
    /// Channels of this phase's flows, back to back; flow `i` ends at `ends[i]`.
    paths: Vec<ChannelId>,
    ends: Vec<u32>,
    /// Paths of this phase lie at this fixed stride (0: they end at `ends`).
    stride: usize,
    /// Flows of this phase.
    flows: usize,
    worst_hist: Vec<u64>,
    src_stamp: Vec<u32>,
    dst_stamp: Vec<u32>,
    // Totals over the block.
    worst: Vec<u32>,
    worst_phase: Vec<u32>,
    contended_phases: Vec<u32>,
    channel_bytes: Vec<u64>,
    /// Flows per channel at `pending_size` bytes each, not yet in `channel_bytes`.
    pending_flows: Vec<u32>,
    pending_size: u64,
    /// Channel visits counted in `pending_flows` (bounds every entry, so none overflows).
    pending_touches: u64,
    ratio_hist: Vec<u64>,
    sent_bytes: u128,
    flow_bytes: u128,
    sum_hops: u64,
    hop_bytes: u128,
    phases: Vec<PhaseLoad>,
    error: Option<NetweaveError>,
}

impl Tally {
    fn new(ctx: &Context) -> Tally {
        let channels = ctx.topo.num_channels();
        let ranks = ctx.schedule.num_ranks() as usize;
        Tally {
            // One spare slot: the path table's padding channel.
            load: vec![0; channels + 1],
            phase_bytes: vec![0; channels],
            // One spare slot: the branch-free append writes one past the last distinct channel.
            touched: vec![0; channels + 1],
            touched_len: 0,
            longest_latency: 0.0,
            paths: Vec::new(),
            ends: Vec::new(),
            stride: 0,
            flows: 0,
            worst_hist: Vec::new(),
            src_stamp: vec![0; ranks],
            dst_stamp: vec![0; ranks],
            worst: vec![0; channels],
            worst_phase: vec![0; channels],
            contended_phases: vec![0; channels],
            channel_bytes: vec![0; channels],
            pending_flows: vec![0; channels],
            pending_size: 0,
            pending_touches: 0,
            ratio_hist: Vec::new(),
            sent_bytes: 0,
            flow_bytes: 0,
            sum_hops: 0,
            hop_bytes: 0,
            phases: Vec::new(),
            error: None,
        }
    }

    /// Count phase `p`.
    fn phase(&mut self, ctx: &Context, p: usize) -> Result<()> {
        let messages = ctx.schedule.phase(p);
        // Equal sizes (the usual case) let loads stand for bytes: no per-channel byte sums.
        let uniform = match messages.first() {
            Some(first) if messages.iter().all(|m| m.bytes == first.bytes) => Some(first.bytes),
            _ => None,
        };
        self.sent_bytes += match uniform {
            Some(size) => size as u128 * messages.len() as u128,
            None => messages.iter().map(|m| m.bytes as u128).sum(),
        };
        // Dense phases (every flow loads at least two channels) skip the list of touched
        // channels and scan them all, branch-free, afterwards.
        let dense = uniform.is_some() && ctx.bandwidth.is_some() && messages.len() * 8 >= self.load.len();
        let permutation = match (uniform.is_some(), dense) {
            (true, true) => match &ctx.table {
                Some(table) if ctx.latency.is_none() => self.route_table_uniform_dense(ctx, table, p)?,
                _ => self.route_and_count::<true, true>(ctx, p)?,
            },
            (true, false) => self.route_and_count::<true, false>(ctx, p)?,
            (false, _) => self.route_and_count::<false, false>(ctx, p)?,
        };
        let load = &self.load;

        // Each flow's worst channel, as a histogram (exact and independent of order).
        let flows = self.flows;
        if self.worst_hist.len() <= flows {
            self.worst_hist.resize(flows + 1, 0);
        }
        if self.stride > 0 {
            let paths = &self.paths[..flows * self.stride];
            match self.stride {
                2 => worst_histogram::<2>(paths, load, &mut self.worst_hist),
                3 => worst_histogram::<3>(paths, load, &mut self.worst_hist),
                4 => worst_histogram::<4>(paths, load, &mut self.worst_hist),
                5 => worst_histogram::<5>(paths, load, &mut self.worst_hist),
                6 => worst_histogram::<6>(paths, load, &mut self.worst_hist),
                stride => {
                    for path in paths.chunks_exact(stride) {
                        let worst = path.iter().fold(0, |w, &c| w.max(load[c as usize]));
                        self.worst_hist[worst as usize] += 1;
                    }
                }
            }
        } else {
            let mut start = 0;
            for &end in &self.ends {
                let path = &self.paths[start..end as usize];
                let worst = path.iter().fold(0, |w, &c| w.max(load[c as usize]));
                self.worst_hist[worst as usize] += 1;
                start = end as usize;
            }
        }
        // Per-channel figures, then reset the loads.
        let figures = match (uniform, &ctx.bandwidth) {
            (Some(size), Some(bw)) if dense => self.dense_uniform(p as u32, size, bw),
            _ => self.sparse(ctx, p as u32, uniform),
        };
        let ChannelFigures { max_load, contended, secs_all, secs_fabric } = figures;

        let mut ratio = 0.0;
        if self.ratio_hist.len() <= max_load as usize {
            self.ratio_hist.resize(max_load as usize + 1, 0);
        }
        for w in 1..=max_load as usize {
            let n = std::mem::take(&mut self.worst_hist[w]);
            ratio += n as f64 / w as f64;
            self.ratio_hist[w] += n;
        }
        let latency = if flows > 0 { self.longest_latency } else { 0.0 };
        self.phases.push(PhaseLoad {
            flows: flows as u32,
            max_load,
            contended_channels: contended,
            throughput_ratio: if flows == 0 { 1.0 } else { ratio / flows as f64 },
            fluid_time_s: if flows == 0 { 0.0 } else { secs_fabric + latency },
            fluid_time_host_links_s: if flows == 0 { 0.0 } else { secs_all + latency },
            permutation,
        });
        Ok(())
    }

    /// [`route_and_count`](Self::route_and_count) for a uniform, dense phase routed through
    /// the path table without latencies — the common case (an all-to-all on a fabric with
    /// destination-based routes), kept to what it needs: every flow's path is copied at the
    /// table's fixed stride, padding included (the padding channel's load is ignored).
    fn route_table_uniform_dense(&mut self, ctx: &Context, table: &PathTable, p: usize) -> Result<bool> {
        // The usual widths get a loop the compiler unrolls.
        match table.width() {
            1 => self.route_table_fixed::<1>(ctx, table, p),
            2 => self.route_table_fixed::<2>(ctx, table, p),
            3 => self.route_table_fixed::<3>(ctx, table, p),
            4 => self.route_table_fixed::<4>(ctx, table, p),
            5 => self.route_table_fixed::<5>(ctx, table, p),
            _ => self.route_table_fixed::<0>(ctx, table, p),
        }
    }

    /// [`route_table_uniform_dense`](Self::route_table_uniform_dense) for a table of width
    /// `WIDTH` (0: any width).
    fn route_table_fixed<const WIDTH: usize>(&mut self, ctx: &Context, table: &PathTable, p: usize) -> Result<bool> {
        let stamp = p as u32 + 1;
        let placement = ctx.schedule.placement();
        let messages = ctx.schedule.phase(p);
        let width = if WIDTH > 0 { WIDTH } else { table.width() };
        let stride = width + 1;
        // Paths go into a buffer kept between phases, written by index (no push, no clear).
        let need = messages.len() * stride;
        if self.paths.len() < need {
            self.paths.resize(need, 0);
        }
        let paths = &mut self.paths[..need];
        let load = &mut self.load[..];
        let (src_stamp, dst_stamp) = (&mut self.src_stamp[..], &mut self.dst_stamp[..]);
        let (mut permutation, mut phase_hops, mut at) = (true, 0u64, 0usize);
        for m in messages {
            let (src, dst) = (m.src as usize, m.dst as usize);
            permutation &= (src_stamp[src] != stamp) & (dst_stamp[dst] != stamp);
            src_stamp[src] = stamp;
            dst_stamp[dst] = stamp;
            let (s, d) = (placement[src] as usize, placement[dst] as usize);
            if s == d {
                continue;
            }
            let Some((first, slots)) = table.entry(s, d) else {
                // A host without links: start over the slow way, which names the problem.
                load.fill(0);
                return self.route_and_count::<true, true>(ctx, p);
            };
            let (slots, out) = (&slots[..stride], &mut paths[at..at + stride]);
            out[0] = first;
            load[first as usize] += 1;
            for k in 0..width {
                let c = slots[k];
                out[k + 1] = c;
                load[c as usize] += 1;
            }
            phase_hops += u64::from(slots[width] as u16);
            at += stride;
        }
        let flows = at / stride;
        load[table.pad() as usize] = 0;
        self.stride = stride;
        self.flows = flows;
        let size = messages.first().map_or(0, |m| m.bytes) as u128;
        self.sum_hops += phase_hops;
        self.hop_bytes += phase_hops as u128 * size;
        self.flow_bytes += flows as u128 * size;
        Ok(permutation)
    }

    /// One pass over phase `p`'s messages: coverage and permutation bookkeeping, each flow's
    /// path (table lookup or walk) appended to `paths`, and channel loads (plus bytes unless
    /// `UNIFORM`; first touches listed unless `DENSE`), Σhops, hop-bytes and the longest path
    /// latency. Returns whether the phase is a permutation.
    fn route_and_count<const UNIFORM: bool, const DENSE: bool>(&mut self, ctx: &Context, p: usize) -> Result<bool> {
        let stamp = p as u32 + 1;
        let placement = ctx.schedule.placement();
        let messages = ctx.schedule.phase(p);
        self.paths.clear();
        self.ends.clear();
        self.touched_len = 0;
        self.longest_latency = 0.0;
        let mut permutation = true;
        let (mut phase_hops, mut phase_hop_bytes, mut phase_bytes) = (0u64, 0u128, 0u128);
        for m in messages {
            let (src, dst) = (m.src as usize, m.dst as usize);
            permutation &= self.src_stamp[src] != stamp && self.dst_stamp[dst] != stamp;
            self.src_stamp[src] = stamp;
            self.dst_stamp[dst] = stamp;
            let (s, d) = (placement[src] as usize, placement[dst] as usize);
            if s == d {
                continue;
            }
            let at = self.paths.len();
            let hops = match &ctx.table {
                Some(table) => match table.lookup(s, d) {
                    Some((first, rest, hops)) => {
                        // Element by element: paths are a few channels, too short for memcpy.
                        self.paths.push(first);
                        for &c in rest {
                            self.paths.push(c);
                        }
                        hops as u64
                    }
                    // A host without links: the router names the problem.
                    None => {
                        return Err(ctx.routes.path(ctx.topo, s, d, &mut self.paths).err().unwrap_or_else(|| {
                            NetweaveError::Routing(format!("host {} has no link", ctx.topo.label(ctx.topo.hosts()[s])))
                        }))
                    }
                },
                None => {
                    ctx.routes.path(ctx.topo, s, d, &mut self.paths)?;
                    self.paths[at..].iter().filter(|&&c| ctx.fabric[c as usize]).count() as u64
                }
            };
            let path = &self.paths[at..];
            for &c in path {
                let l = &mut self.load[c as usize];
                if !DENSE {
                    // Branch-free append of first touches: the slot is kept only when l was 0.
                    self.touched[self.touched_len] = c;
                    self.touched_len += usize::from(*l == 0);
                }
                *l += 1;
                if !UNIFORM {
                    let b = &mut self.phase_bytes[c as usize];
                    *b = b.wrapping_add(m.bytes);
                }
            }
            phase_hops += hops;
            if !UNIFORM {
                phase_hop_bytes += hops as u128 * m.bytes as u128;
                phase_bytes += m.bytes as u128;
            }
            if let Some(lat) = &ctx.latency {
                let t: f64 = path.iter().map(|&c| lat[c as usize]).sum();
                self.longest_latency = self.longest_latency.max(t);
            }
            self.ends.push(self.paths.len() as u32);
        }
        self.stride = 0;
        self.flows = self.ends.len();
        if UNIFORM {
            let size = messages.first().map_or(0, |m| m.bytes) as u128;
            phase_hop_bytes = phase_hops as u128 * size;
            phase_bytes = self.ends.len() as u128 * size;
        }
        self.sum_hops += phase_hops;
        self.hop_bytes += phase_hop_bytes;
        self.flow_bytes += phase_bytes;
        Ok(permutation)
    }

    /// Channel figures of a phase whose messages all carry `size` bytes on a fabric whose
    /// switch-to-switch links share one bandwidth and host links another: a scan of every
    /// channel in lanes of [`LANES`] (used when most channels are loaded). Bytes are kept as
    /// flow counts at the pending size and multiplied out when the size changes; a channel's
    /// worst load rarely rises, so that update runs only for the lanes where it does.
    fn dense_uniform(&mut self, p: u32, size: u64, bw: &UniformBandwidth) -> ChannelFigures {
        // Channel visits of this phase (padding included): a bound on any channel's load.
        let touches = if self.stride > 0 { self.flows * self.stride } else { self.paths.len() } as u64;
        if self.pending_size != size || self.pending_touches + touches > u32::MAX as u64 {
            self.flush_pending();
            self.pending_size = size;
        }
        self.pending_touches += touches;
        let channels = self.worst.len();
        let (load, fabric_mask) = (&self.load[..channels], &bw.fabric_mask[..channels]);
        let (worst, worst_phase) = (&mut self.worst[..channels], &mut self.worst_phase[..channels]);
        let (cont, pending) = (&mut self.contended_phases[..channels], &mut self.pending_flows[..channels]);
        let (mut max_all, mut max_fabric, mut max_host, mut contended) =
            ([0u32; LANES], [0u32; LANES], [0u32; LANES], [0u32; LANES]);
        let whole = channels - channels % LANES;
        for base in (0..whole).step_by(LANES) {
            let l: &[u32; LANES] = load[base..base + LANES].try_into().unwrap();
            let mask: &[u32; LANES] = fabric_mask[base..base + LANES].try_into().unwrap();
            let w: &[u32; LANES] = worst[base..base + LANES].try_into().unwrap();
            let cont: &mut [u32; LANES] = (&mut cont[base..base + LANES]).try_into().unwrap();
            let pending: &mut [u32; LANES] = (&mut pending[base..base + LANES]).try_into().unwrap();
            let mut higher = 0u32;
            for k in 0..LANES {
                max_all[k] = max_all[k].max(l[k]);
                max_fabric[k] = max_fabric[k].max(l[k] & mask[k]);
                max_host[k] = max_host[k].max(l[k] & !mask[k]);
                let hot = u32::from(l[k] > 1);
                contended[k] += hot;
                cont[k] += hot;
                pending[k] += l[k];
                higher |= u32::from(l[k] > w[k]);
            }
            if higher != 0 {
                for c in base..base + LANES {
                    if load[c] > worst[c] {
                        worst[c] = load[c];
                        worst_phase[c] = p;
                    }
                }
            }
        }
        for c in whole..channels {
            let l = load[c];
            max_all[0] = max_all[0].max(l);
            max_fabric[0] = max_fabric[0].max(l & fabric_mask[c]);
            max_host[0] = max_host[0].max(l & !fabric_mask[c]);
            let hot = u32::from(l > 1);
            contended[0] += hot;
            cont[c] += hot;
            pending[c] += l;
            if l > worst[c] {
                worst[c] = l;
                worst_phase[c] = p;
            }
        }
        self.load.fill(0);
        let max_load = max_all.into_iter().max().unwrap_or(0);
        let (max_fabric, max_host) =
            (max_fabric.into_iter().max().unwrap_or(0), max_host.into_iter().max().unwrap_or(0));
        let contended = contended.into_iter().sum();
        let size = size as f64;
        let secs_fabric = max_fabric as f64 * size * bw.fabric_secs_per_byte;
        let secs_host = max_host as f64 * size * bw.host_secs_per_byte;
        ChannelFigures { max_load, contended, secs_all: secs_fabric.max(secs_host), secs_fabric }
    }

    /// Turn the flow counts kept at the pending size into bytes.
    fn flush_pending(&mut self) {
        if self.pending_touches > 0 {
            let size = self.pending_size;
            for (b, f) in self.channel_bytes.iter_mut().zip(&mut self.pending_flows) {
                *b = b.wrapping_add(u64::from(std::mem::take(f)).wrapping_mul(size));
            }
        }
        self.pending_touches = 0;
    }

    /// Channel figures of a phase, visiting only the channels it touched (any sizes, any
    /// bandwidths).
    fn sparse(&mut self, ctx: &Context, p: u32, uniform: Option<u64>) -> ChannelFigures {
        let mut fig = ChannelFigures { max_load: 0, contended: 0, secs_all: 0.0, secs_fabric: 0.0 };
        for &c in &self.touched[..self.touched_len] {
            let c = c as usize;
            let l = std::mem::take(&mut self.load[c]);
            let bytes = match uniform {
                Some(size) => l as u64 * size,
                None => std::mem::take(&mut self.phase_bytes[c]),
            };
            fig.max_load = fig.max_load.max(l);
            fig.contended += u32::from(l > 1);
            fig.secs_all = fig.secs_all.max(bytes as f64 * ctx.secs_per_byte[c]);
            fig.secs_fabric = fig.secs_fabric.max(bytes as f64 * ctx.fabric_secs_per_byte[c]);
            if l > self.worst[c] {
                self.worst[c] = l;
                self.worst_phase[c] = p;
            }
            self.contended_phases[c] += u32::from(l > 1);
            self.channel_bytes[c] = self.channel_bytes[c].wrapping_add(bytes);
        }
        fig
    }

    /// Fold in the tally of the next block of phases.
    fn merge(&mut self, other: Tally) {
        if self.error.is_some() {
            return;
        }
        if other.error.is_some() {
            self.error = other.error;
            return;
        }
        for c in 0..self.worst.len() {
            // Blocks arrive in phase order, so on a tie the earlier phase stays.
            if other.worst[c] > self.worst[c] {
                self.worst[c] = other.worst[c];
                self.worst_phase[c] = other.worst_phase[c];
            }
            self.contended_phases[c] += other.contended_phases[c];
            self.channel_bytes[c] = self.channel_bytes[c].wrapping_add(other.channel_bytes[c]);
        }
        if self.ratio_hist.len() < other.ratio_hist.len() {
            self.ratio_hist.resize(other.ratio_hist.len(), 0);
        }
        for (a, b) in self.ratio_hist.iter_mut().zip(&other.ratio_hist) {
            *a += b;
        }
        self.sent_bytes += other.sent_bytes;
        self.flow_bytes += other.flow_bytes;
        self.sum_hops += other.sum_hops;
        self.hop_bytes += other.hop_bytes;
        self.phases.extend(other.phases);
    }

    fn finish(self, ctx: &Context, completeness: Completeness) -> Result<LoadReport> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.sent_bytes > u64::MAX as u128 {
            return Err(NetweaveError::Schedule(format!(
                "the schedule moves {} bytes, more than a 64-bit count holds",
                self.sent_bytes
            )));
        }
        let hop_bytes = u64::try_from(self.hop_bytes)
            .map_err(|_| NetweaveError::Schedule(format!("hop-bytes {} exceed a 64-bit count", self.hop_bytes)))?;
        let flows: u64 = self.phases.iter().map(|p| p.flows as u64).sum();
        let max_channel_bytes = self.channel_bytes.iter().copied().max().unwrap_or(0);
        let ratio_sum: f64 = self.ratio_hist.iter().enumerate().skip(1).map(|(w, &n)| n as f64 / w as f64).sum();
        let mut contended: Vec<ChannelId> =
            (0..self.worst.len() as ChannelId).filter(|&c| self.worst[c as usize] > 1).collect();
        let contended_links_total = contended.len() as u32;
        contended.sort_by_key(|&c| (std::cmp::Reverse(self.worst[c as usize]), c));
        let contended_links = contended
            .into_iter()
            .take(ctx.options.max_listed_links)
            .map(|c| {
                let (from, to) = paths::channel_nodes(ctx.topo, c);
                ContendedLink {
                    channel: c,
                    from,
                    to,
                    from_label: ctx.topo.label(from).to_string(),
                    to_label: ctx.topo.label(to).to_string(),
                    max_load: self.worst[c as usize],
                    phase: self.worst_phase[c as usize],
                    contended_phases: self.contended_phases[c as usize],
                    bytes: self.channel_bytes[c as usize],
                }
            })
            .collect();
        Ok(LoadReport {
            complete: completeness.ok(),
            problem: completeness.first_problem.clone(),
            completeness,
            permutation_phases: self.phases.iter().filter(|p| p.permutation).count() as u32,
            max_congestion: self.phases.iter().map(|p| p.max_load).max().unwrap_or(0),
            throughput_ratio: if flows == 0 { 1.0 } else { ratio_sum / flows as f64 },
            flows,
            fluid_time_s: self.phases.iter().map(|p| p.fluid_time_s).sum(),
            fluid_time_host_links_s: self.phases.iter().map(|p| p.fluid_time_host_links_s).sum(),
            bytes: self.flow_bytes as u64,
            max_channel_bytes,
            sum_hops: self.sum_hops,
            hop_bytes,
            hops_x_max_channel: self.sum_hops as f64 * max_channel_bytes as f64,
            contended_links_total,
            contended_links,
            phases: self.phases,
        })
    }
}

#[cfg(test)]
mod tests;
