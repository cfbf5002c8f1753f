//! The simulator's knobs, named like BookSim's where they mean the same thing.
//!
//! A [`SimConfig`] is filled from `key = value` pairs ([`SimConfig::set`]), which is how the
//! TOML file, `--set key=value` and the Python API all reach it. Unknown keys and impossible
//! combinations are refused with one line ([`SimConfig::validate`]).
//!
//! ```
//! use netweave_core::flitsim::SimConfig;
//! let mut c = SimConfig::default();
//! c.set("k", "4").unwrap();
//! c.set("injection_rate", "0.02").unwrap();
//! assert!(c.set("no_such_key", "1").is_err());
//! ```

use crate::error::{NetweaveError, Result};

/// Every key [`SimConfig::set`] understands, with a one-line meaning (BookSim's name first).
pub const KEYS: &[(&str, &str)] = &[
    ("topology", "torus | mesh | file (then topology_file names a netweave topology JSON)"),
    ("k", "routers per dimension (torus, mesh)"),
    ("n", "number of dimensions (torus, mesh)"),
    ("c", "hosts per router (torus, mesh)"),
    ("routing_function", "dim_order (= dor) or any netweave routing engine name, or file (routes_file)"),
    ("num_vcs", "virtual channels per channel (a multiple of the VCs the routing needs)"),
    ("vc_per_destination", "1: a packet to host d takes VC d on every channel (paper 001's E1; num_vcs ≥ hosts)"),
    ("vc_buf_size", "flit buffer per VC"),
    ("packet_size", "flits per packet"),
    ("injection_rate", "offered load per host per cycle (packets, or flits with injection_rate_uses_flits)"),
    ("injection_rate_uses_flits", "0 | 1"),
    ("traffic", "uniform bitcomp transpose bitrev shuffle tornado neighbor randperm hotspot butterfly"),
    ("sim_type", "latency | throughput | batch"),
    ("warmup_periods", "sample periods of warm-up (0: until the warm-up thresholds are met)"),
    ("sample_period", "cycles per sample period"),
    ("max_samples", "most sample periods before stopping"),
    ("latency_thres", "average packet latency above which the load counts as saturated"),
    ("warmup_thres", "relative latency change that ends warm-up (warmup_periods = 0)"),
    ("acc_warmup_thres", "relative throughput change that ends warm-up (warmup_periods = 0)"),
    ("stopping_thres", "relative latency change under which a sample counts as converged"),
    ("acc_stopping_thres", "relative throughput change under which a sample counts as converged"),
    ("seed", "seed of every random choice"),
    ("perm_seed", "seed of the randperm permutation"),
    ("routing_delay", "cycles of route computation"),
    ("vc_alloc_delay", "cycles of VC allocation"),
    ("sw_alloc_delay", "cycles of switch allocation"),
    ("st_final_delay", "cycles of crossbar traversal"),
    ("credit_delay", "extra cycles before a returned credit is usable"),
    ("vct", "0: wormhole, 1: virtual cut-through"),
    ("hold_switch_for_packet", "1: an input keeps its output port until the packet's tail"),
    ("sw_allocator", "islip | separable_input_first (round-robin arbiters, one iteration)"),
    (
        "vc_allocator",
        "islip (per-VC round-robin grant and accept, as BookSim) | separable_input_first (rotating-priority greedy)",
    ),
    ("alloc_iters", "allocator iterations (1)"),
    ("arb_type", "round_robin | age (oldest packet first: global fairness)"),
    ("use_noc_latency", "1: torus links take 2 cycles, mesh links 1 (BookSim's default)"),
    ("channel_latency", "cycles on a switch-to-switch link (overrides use_noc_latency)"),
    ("host_channel_latency", "cycles on a host link"),
    ("topology_file", "netweave topology JSON (topology = file)"),
    ("routes_file", "netweave routes JSON (routing_function = file)"),
    ("injection_ports", "injection and ejection ports per host (paper 001's NCT)"),
    ("deadlock_cycles", "cycles without any flit moving, with flits in flight, that count as deadlock"),
    ("threads", "threads stepping the routers of one simulation (0: every core); results do not depend on it"),
    ("hotspot_hosts", "host indices of the hotspot pattern, e.g. [0, 5]"),
    ("hotspot_fraction", "share of packets sent to the hotspots (rest uniform)"),
    ("schedule", "batch workload: alltoall-shift, or a traffic pattern name (one permutation phase)"),
    ("message_flits", "flits per message of the batch workload (split into packets of packet_size)"),
    ("batch_sync", "none | local | phase: when a host may start its next phase"),
    ("request_reply", "1: each message is answered by a reply, the next send waits for it"),
    ("reply_size", "flits of a reply packet"),
    ("max_cycles", "hard stop of a batch run"),
];

/// Most VCs per channel, reached only with one VC per destination.
pub const MAX_VCS_PER_DESTINATION: u16 = 4096;

/// Switching: wormhole or virtual cut-through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switching {
    Wormhole,
    VirtualCutThrough,
}

/// How the switch allocator matches inputs to outputs (both with round-robin arbiters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwAllocator {
    /// One iteration of iSLIP: outputs grant, inputs accept (BookSim's default).
    Islip,
    /// Separable input-first: each input picks one VC, then each output one input.
    SeparableInputFirst,
}

/// Arbitration priority in the allocators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arbitration {
    /// Round-robin arbiters, iSLIP pointer updates (BookSim's default).
    RoundRobin,
    /// Oldest packet (creation time) first; ties round-robin.
    Age,
}

/// Open loop with latency statistics, open loop for throughput only, or a closed batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimType {
    Latency,
    Throughput,
    Batch,
}

/// When a host may start its next phase in batch mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchSync {
    /// Controllers take the next message as soon as they are free (FIFO dispatch).
    None,
    /// Paper 001's local sync: phase p starts once this host has received all of phase p−1.
    Local,
    /// A global barrier between phases: phase p starts once every message of p−1 arrived.
    Phase,
}

/// Every simulator knob. Defaults are BookSim's where BookSim has the key.
///
/// Field names are the config keys (`switching` is `vct`, `arbitration` is `arb_type`);
/// [`KEYS`] gives each key's meaning.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub topology: String,
    pub k: u32,
    pub n: u32,
    pub c: u32,
    pub routing_function: String,
    pub num_vcs: u16,
    /// One VC per destination host (paper 001's "VCs = number of destinations"): the packet
    /// to host `d` takes VC `d` on every channel, in place of the routing's VC policy.
    /// Deadlock-free with any destination-based routing: each VC carries one destination's
    /// tree, which has no cycle.
    pub vc_per_destination: bool,
    pub vc_buf_size: u32,
    pub packet_size: u32,
    pub injection_rate: f64,
    pub injection_rate_uses_flits: bool,
    pub traffic: String,
    pub sim_type: SimType,
    pub warmup_periods: u32,
    pub sample_period: u32,
    pub max_samples: u32,
    pub latency_thres: f64,
    pub warmup_thres: f64,
    pub acc_warmup_thres: f64,
    pub stopping_thres: f64,
    pub acc_stopping_thres: f64,
    pub seed: u64,
    pub perm_seed: u64,
    pub routing_delay: u32,
    pub vc_alloc_delay: u32,
    pub sw_alloc_delay: u32,
    pub st_final_delay: u32,
    pub credit_delay: u32,
    pub switching: Switching,
    pub hold_switch_for_packet: bool,
    pub sw_allocator: SwAllocator,
    /// VC allocator: iSLIP over input VCs × output VCs (BookSim's default), or the
    /// rotating-priority greedy pass (`separable_input_first`). Age arbitration always takes
    /// the oldest-first greedy pass.
    pub vc_allocator: SwAllocator,
    pub arbitration: Arbitration,
    pub use_noc_latency: bool,
    pub channel_latency: Option<u32>,
    pub host_channel_latency: u32,
    pub topology_file: Option<String>,
    pub routes_file: Option<String>,
    pub injection_ports: u32,
    pub deadlock_cycles: u32,
    /// Threads stepping routers (0: every core). The outcome is the same for every value.
    pub threads: u32,
    pub hotspot_hosts: Vec<u32>,
    pub hotspot_fraction: f64,
    pub schedule: String,
    pub message_flits: u32,
    pub batch_sync: BatchSync,
    pub request_reply: bool,
    pub reply_size: u32,
    pub max_cycles: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            topology: "torus".into(),
            k: 8,
            n: 2,
            c: 1,
            routing_function: "dim_order".into(),
            num_vcs: 2,
            vc_per_destination: false,
            vc_buf_size: 8,
            packet_size: 1,
            injection_rate: 0.1,
            injection_rate_uses_flits: false,
            traffic: "uniform".into(),
            sim_type: SimType::Latency,
            warmup_periods: 3,
            sample_period: 1000,
            max_samples: 10,
            latency_thres: 500.0,
            warmup_thres: 0.05,
            acc_warmup_thres: 0.05,
            stopping_thres: 0.05,
            acc_stopping_thres: 0.05,
            seed: 0,
            perm_seed: 0,
            routing_delay: 1,
            vc_alloc_delay: 1,
            sw_alloc_delay: 1,
            st_final_delay: 1,
            credit_delay: 0,
            switching: Switching::Wormhole,
            hold_switch_for_packet: false,
            sw_allocator: SwAllocator::Islip,
            vc_allocator: SwAllocator::Islip,
            arbitration: Arbitration::RoundRobin,
            use_noc_latency: true,
            channel_latency: None,
            host_channel_latency: 1,
            topology_file: None,
            routes_file: None,
            injection_ports: 1,
            deadlock_cycles: 10_000,
            threads: 0,
            hotspot_hosts: vec![0],
            hotspot_fraction: 1.0,
            schedule: "alltoall-shift".into(),
            message_flits: 100,
            batch_sync: BatchSync::None,
            request_reply: false,
            reply_size: 1,
            max_cycles: 100_000_000,
        }
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T> {
    value
        .trim()
        .parse::<T>()
        .map_err(|_| NetweaveError::InvalidParameter(format!("{key}: '{value}' is not a valid number here")))
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => crate::invalid!("{key}: '{value}' is not 0/1 or true/false"),
    }
}

fn parse_positive(key: &str, value: &str) -> Result<u32> {
    let v: u32 = parse_num(key, value)?;
    if v == 0 {
        return crate::invalid!("{key} must be at least 1");
    }
    Ok(v)
}

fn parse_fraction(key: &str, value: &str) -> Result<f64> {
    let v: f64 = parse_num(key, value)?;
    if !v.is_finite() || v < 0.0 {
        return crate::invalid!("{key} must be a finite number ≥ 0, got {value}");
    }
    Ok(v)
}

fn unquote(value: &str) -> &str {
    value.trim().trim_matches('"').trim_matches('\'')
}

impl SimConfig {
    /// Set one key from its text form (`"0.01"`, `"true"`, `"[0, 5]"`); unknown keys and
    /// malformed values are refused with a one-line message.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let key = key.trim();
        let v = unquote(value);
        match key {
            "topology" => self.topology = v.to_ascii_lowercase(),
            "k" => self.k = parse_positive(key, v)?,
            "n" => self.n = parse_positive(key, v)?,
            "c" => self.c = parse_positive(key, v)?,
            "routing_function" => self.routing_function = v.to_ascii_lowercase(),
            "num_vcs" => {
                let n: u32 = parse_positive(key, v)?;
                if n > MAX_VCS_PER_DESTINATION as u32 {
                    return crate::invalid!("num_vcs must be at most {MAX_VCS_PER_DESTINATION}, got {n}");
                }
                self.num_vcs = n as u16;
            }
            "vc_per_destination" => self.vc_per_destination = parse_bool(key, v)?,
            "vc_buf_size" => self.vc_buf_size = parse_positive(key, v)?,
            "packet_size" => self.packet_size = parse_positive(key, v)?,
            "injection_rate" => self.injection_rate = parse_fraction(key, v)?,
            "injection_rate_uses_flits" => self.injection_rate_uses_flits = parse_bool(key, v)?,
            "traffic" => self.traffic = v.to_ascii_lowercase(),
            "sim_type" => {
                self.sim_type = match v.to_ascii_lowercase().as_str() {
                    "latency" => SimType::Latency,
                    "throughput" => SimType::Throughput,
                    "batch" => SimType::Batch,
                    _ => return crate::invalid!("sim_type must be latency, throughput or batch, got '{v}'"),
                }
            }
            "warmup_periods" => self.warmup_periods = parse_num(key, v)?,
            "sample_period" => self.sample_period = parse_positive(key, v)?,
            "max_samples" => self.max_samples = parse_positive(key, v)?,
            "latency_thres" => self.latency_thres = parse_fraction(key, v)?,
            "warmup_thres" => self.warmup_thres = parse_fraction(key, v)?,
            "acc_warmup_thres" => self.acc_warmup_thres = parse_fraction(key, v)?,
            "stopping_thres" => self.stopping_thres = parse_fraction(key, v)?,
            "acc_stopping_thres" => self.acc_stopping_thres = parse_fraction(key, v)?,
            "seed" => self.seed = parse_num(key, v)?,
            "perm_seed" => self.perm_seed = parse_num(key, v)?,
            "routing_delay" => self.routing_delay = parse_num(key, v)?,
            "vc_alloc_delay" => self.vc_alloc_delay = parse_positive(key, v)?,
            "sw_alloc_delay" => self.sw_alloc_delay = parse_positive(key, v)?,
            "st_final_delay" => self.st_final_delay = parse_num(key, v)?,
            "credit_delay" => self.credit_delay = parse_num(key, v)?,
            "vct" => {
                self.switching = if parse_bool(key, v)? { Switching::VirtualCutThrough } else { Switching::Wormhole }
            }
            "hold_switch_for_packet" => self.hold_switch_for_packet = parse_bool(key, v)?,
            "sw_allocator" => {
                self.sw_allocator = match v.to_ascii_lowercase().as_str() {
                    "islip" => SwAllocator::Islip,
                    "separable_input_first" => SwAllocator::SeparableInputFirst,
                    _ => return crate::invalid!("sw_allocator must be islip or separable_input_first, got '{v}'"),
                }
            }
            "vc_allocator" => {
                self.vc_allocator = match v.to_ascii_lowercase().as_str() {
                    "islip" => SwAllocator::Islip,
                    "separable_input_first" => SwAllocator::SeparableInputFirst,
                    _ => return crate::invalid!("vc_allocator must be islip or separable_input_first, got '{v}'"),
                }
            }
            "alloc_iters" => {
                if parse_positive(key, v)? != 1 {
                    return crate::invalid!("alloc_iters: only one allocator iteration is modelled");
                }
            }
            "arb_type" => {
                self.arbitration = match v.to_ascii_lowercase().as_str() {
                    "round_robin" | "matrix" => Arbitration::RoundRobin,
                    "age" | "oldest_first" => Arbitration::Age,
                    _ => return crate::invalid!("arb_type must be round_robin or age, got '{v}'"),
                }
            }
            "use_noc_latency" => self.use_noc_latency = parse_bool(key, v)?,
            "channel_latency" => self.channel_latency = Some(parse_positive(key, v)?),
            "host_channel_latency" => self.host_channel_latency = parse_positive(key, v)?,
            "topology_file" => self.topology_file = Some(v.to_string()),
            "routes_file" => self.routes_file = Some(v.to_string()),
            "injection_ports" => {
                let p = parse_positive(key, v)?;
                if p > 64 {
                    return crate::invalid!("injection_ports must be at most 64, got {p}");
                }
                self.injection_ports = p;
            }
            "deadlock_cycles" => self.deadlock_cycles = parse_positive(key, v)?,
            "threads" => self.threads = parse_num(key, v)?,
            "hotspot_hosts" => {
                let inner = v.trim_start_matches('[').trim_end_matches(']');
                let mut hosts = Vec::new();
                for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    hosts.push(parse_num::<u32>(key, part)?);
                }
                if hosts.is_empty() {
                    return crate::invalid!("hotspot_hosts must list at least one host");
                }
                self.hotspot_hosts = hosts;
            }
            "hotspot_fraction" => {
                let f = parse_fraction(key, v)?;
                if f > 1.0 {
                    return crate::invalid!("hotspot_fraction must be in 0..=1, got {v}");
                }
                self.hotspot_fraction = f;
            }
            "schedule" => self.schedule = v.to_ascii_lowercase(),
            "message_flits" => self.message_flits = parse_positive(key, v)?,
            "batch_sync" => {
                self.batch_sync = match v.to_ascii_lowercase().as_str() {
                    "none" | "0" | "false" => BatchSync::None,
                    "local" | "1" | "true" => BatchSync::Local,
                    "phase" | "barrier" => BatchSync::Phase,
                    _ => return crate::invalid!("batch_sync must be none, local or phase, got '{v}'"),
                }
            }
            "request_reply" => self.request_reply = parse_bool(key, v)?,
            "reply_size" => self.reply_size = parse_positive(key, v)?,
            "max_cycles" => self.max_cycles = parse_num(key, v)?,
            _ => {
                let names: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
                let close: Vec<&str> =
                    names.iter().copied().filter(|n| n.contains(key) || key.contains(n)).take(3).collect();
                let hint =
                    if close.is_empty() { String::new() } else { format!(" (did you mean {}?)", close.join(", ")) };
                return crate::invalid!("unknown config key '{key}'{hint}");
            }
        }
        Ok(())
    }

    /// Link latency of switch-to-switch channels; `torus` says whether the topology is one
    /// (BookSim's NoC latency model charges its channels 2 cycles).
    pub fn switch_latency(&self, torus: bool) -> u32 {
        self.channel_latency.unwrap_or(if self.use_noc_latency && torus { 2 } else { 1 })
    }

    /// Check the knobs against each other (not yet against the network; the simulator does that).
    /// How many router workers a run uses: `threads`, or every core rayon has for 0.
    pub fn worker_threads(&self) -> usize {
        if self.threads == 0 {
            rayon::current_num_threads()
        } else {
            self.threads as usize
        }
    }

    pub fn validate(&self) -> Result<()> {
        // Buffers keep arrival times in 32 bits (see the engine's Flit).
        if self.deadlock_cycles > 1 << 30 {
            return crate::invalid!("deadlock_cycles must be at most 2^30, got {}", self.deadlock_cycles);
        }
        if !self.vc_per_destination && self.num_vcs > crate::routing::MAX_VCS as u16 {
            return crate::invalid!(
                "num_vcs must be at most {} (more only with vc_per_destination = 1), got {}",
                crate::routing::MAX_VCS,
                self.num_vcs
            );
        }
        if self.switching == Switching::VirtualCutThrough && self.vc_buf_size < self.packet_size {
            return crate::invalid!(
                "virtual cut-through needs vc_buf_size ≥ packet_size ({} < {})",
                self.vc_buf_size,
                self.packet_size
            );
        }
        if self.switching == Switching::VirtualCutThrough && self.request_reply && self.vc_buf_size < self.reply_size {
            return crate::invalid!("virtual cut-through needs vc_buf_size ≥ reply_size");
        }
        if self.packet_size > u16::MAX as u32 || self.vc_buf_size > u16::MAX as u32 {
            return crate::invalid!("packet_size and vc_buf_size must be below 65536");
        }
        if self.sim_type != SimType::Batch && self.packet_rate() > 1.0 {
            return crate::invalid!(
                "injection_rate {} is a per-cycle Bernoulli probability: at most 1 packet per host per cycle",
                self.injection_rate
            );
        }
        if self.sim_type != SimType::Batch && self.injection_rate <= 0.0 {
            return crate::invalid!("injection_rate must be above 0");
        }
        Ok(())
    }

    /// Offered packets per host per cycle.
    pub fn packet_rate(&self) -> f64 {
        if self.injection_rate_uses_flits {
            self.injection_rate / self.packet_size as f64
        } else {
            self.injection_rate
        }
    }
}
