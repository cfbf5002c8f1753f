//! The cycle loop: input-queued VC routers, credits, hosts.
//!
//! Everything is flat arrays indexed by integer ids:
//!
//! - a *sim channel* is a topology channel, plus `injection_ports − 1` parallel host links per
//!   host link (paper 001's NCT: more router–node ports);
//! - an *input VC* `ip·V + vc` sits at input port `ip` of the receiving router of a channel
//!   (a router's input ports are numbered contiguously, so its VCs' state is adjacent in
//!   memory): a ring of `vc_buf_size` flits, a state (idle → VC allocation → active) and its
//!   route;
//! - an *output VC* `channel·V + vc` sits at the sending end: its owner (the input VC holding
//!   it, or a host) and the credits it has left.
//!
//! A flit granted the switch is written straight into the downstream buffer, stamped with the
//! cycle it arrives; credits guarantee the room, and the downstream router ignores it until
//! then. Credits and deliveries travel on two small timing wheels. Only routers holding flits
//! are visited, and a router's step reads and writes nothing another router reads in the same
//! cycle, so the visiting order cannot change the result.
//!
//! Pipeline (BookSim's IQ router with one-cycle stages): a head flit arriving in cycle `t` is
//! routed in `t`, may win VC allocation from `t + routing_delay`, then switch allocation
//! `vc_alloc_delay` cycles after that; a flit granted the switch in cycle `s` reaches the next
//! buffer in `s + sw_alloc_delay + st_final_delay + latency`, and a host retires a packet one
//! cycle after its tail arrives. With BookSim's defaults a head spends 4 cycles per router
//! plus the link, and zero-load latency is `4·R + L·(R − 1) + 3 + (P − 1)` for `R` routers,
//! link latency `L` and `P` flits — BookSim's own figure. Body flits only need switch
//! allocation. A credit is usable upstream `credit_delay + latency` cycles after its flit left.

use std::collections::VecDeque;

use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::config::{Arbitration, SimConfig, SwAllocator, Switching};
use crate::error::{NetweaveError, Result};
use crate::routing::{RoutingTable, NO_PORT};
use crate::topology::structure::LatticeShape;
use crate::topology::{Port, Topology};

pub(crate) const NONE: u32 = u32::MAX;
/// Output-VC owner meaning "a host is injecting on it".
const HOST_OWNER: u32 = u32::MAX - 1;

const IDLE: u8 = 0;
const VC_ALLOC: u8 = 1;
const ACTIVE: u8 = 2;

/// One flit in a buffer: its packet, its index in the packet, the cycle it is there.
#[derive(Clone, Copy, Debug, Default)]
struct Flit {
    arrive: u64,
    packet: u32,
    seq: u16,
}

/// A packet in flight or queued at its source.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Packet {
    pub src: u32,
    pub dst: u32,
    pub size: u16,
    /// Routers crossed so far.
    pub hops: u16,
    pub ctime: u64,
    pub itime: u64,
    /// Counted in the statistics (created while measuring).
    pub measured: bool,
    /// Batch message it belongs to, or [`NONE`]; replies carry the message too.
    pub message: u32,
    pub is_reply: bool,
    /// VC class chosen on entering the current dimension (BookSim torus routing only).
    pub partition: u8,
}

/// What a finished packet reports back to the workload.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Delivery {
    pub packet: Packet,
    pub time: u64,
}

/// The static network: sim channels, router ports and port groups.
pub(crate) struct Fabric {
    pub num_routers: usize,
    pub num_hosts: usize,
    /// Physical VCs per channel.
    pub vcs: usize,
    /// Physical VCs per routing VC class.
    pub class_width: usize,
    pub routing_vcs: usize,
    pub buf: usize,
    ch_dst_router: Vec<u32>,
    ch_dst_host: Vec<u32>,
    ch_src_router: Vec<u32>,
    ch_src_host: Vec<u32>,
    ch_lat: Vec<u32>,
    /// Global input-port id at the receiving router ([`NONE`] for ejection channels).
    ch_ip: Vec<u32>,
    /// Global output-port id at the sending router ([`NONE`] for injection channels).
    ch_op: Vec<u32>,
    /// Topology channel a sim channel models (for reports).
    ch_topo: Vec<u32>,
    in_base: Vec<u32>,
    ip_chan: Vec<u32>,
    ip_topo_port: Vec<Port>,
    out_base: Vec<u32>,
    op_chan: Vec<u32>,
    /// `grp_base[r] + topo port` → global output ports `grp_start .. grp_start + grp_len`.
    grp_base: Vec<u32>,
    grp_start: Vec<u32>,
    grp_len: Vec<u8>,
    /// Injection channels of host `h`: `host_inj[host_inj_base[h]..host_inj_base[h+1]]`.
    host_inj_base: Vec<u32>,
    host_inj: Vec<u32>,
}

impl Fabric {
    pub fn new(topo: &Topology, routes: &RoutingTable, cfg: &SimConfig) -> Result<Fabric> {
        routes.check_fits(topo)?;
        let vcs = cfg.num_vcs as usize;
        // One VC per destination replaces the routing's VC classes: every VC is its own class.
        let routing_vcs = if cfg.vc_per_destination { vcs } else { routes.vc_policy().num_vcs.max(1) as usize };
        if cfg.vc_per_destination && vcs < topo.num_hosts() {
            return crate::invalid!("vc_per_destination needs num_vcs ≥ the {} hosts, got {vcs}", topo.num_hosts());
        }
        if vcs < routing_vcs {
            return crate::invalid!("routing {} needs {routing_vcs} VCs but num_vcs is {vcs}", routes.engine());
        }
        if vcs % routing_vcs != 0 {
            return crate::invalid!(
                "num_vcs {vcs} is not a multiple of the {routing_vcs} VCs routing {} defines",
                routes.engine()
            );
        }
        let torus = topo.structure().lattice().is_some_and(|l| l.shape == LatticeShape::Torus);
        let switch_lat = cfg.switch_latency(torus);
        let host_lat = cfg.host_channel_latency;
        let ports = cfg.injection_ports as usize;
        let num_routers = topo.num_switches();
        let num_hosts = topo.num_hosts();

        let mut f = Fabric {
            num_routers,
            num_hosts,
            vcs,
            class_width: vcs / routing_vcs,
            routing_vcs,
            buf: cfg.vc_buf_size as usize,
            ch_dst_router: Vec::new(),
            ch_dst_host: Vec::new(),
            ch_src_router: Vec::new(),
            ch_src_host: Vec::new(),
            ch_lat: Vec::new(),
            ch_ip: Vec::new(),
            ch_op: Vec::new(),
            ch_topo: Vec::new(),
            in_base: vec![0; num_routers + 1],
            ip_chan: Vec::new(),
            ip_topo_port: Vec::new(),
            out_base: vec![0; num_routers + 1],
            op_chan: Vec::new(),
            grp_base: vec![0; num_routers + 1],
            grp_start: Vec::new(),
            grp_len: Vec::new(),
            host_inj_base: vec![0; num_hosts + 1],
            host_inj: Vec::new(),
        };
        // Sim channels: every topology channel, replicated `ports` times when one end is a host.
        let end_of = |node| {
            if topo.is_host(node) {
                (NONE, topo.kind_index(node) as u32)
            } else {
                (topo.kind_index(node) as u32, NONE)
            }
        };
        let mut copies_of: Vec<(u32, u32)> = Vec::with_capacity(topo.num_channels()); // (first sim channel, count)
        for ch in 0..topo.num_channels() as u32 {
            let (a, b) = topo.channel_ends(ch);
            let host_link = topo.is_host(a.node) || topo.is_host(b.node);
            if topo.is_host(a.node) && topo.is_host(b.node) {
                return crate::invalid!("host-to-host links cannot be simulated ({})", topo.label(a.node));
            }
            let copies = if host_link { ports } else { 1 };
            copies_of.push((f.ch_dst_router.len() as u32, copies as u32));
            for _ in 0..copies {
                let (sr, sh) = end_of(a.node);
                let (dr, dh) = end_of(b.node);
                f.ch_src_router.push(sr);
                f.ch_src_host.push(sh);
                f.ch_dst_router.push(dr);
                f.ch_dst_host.push(dh);
                f.ch_lat.push(if host_link { host_lat } else { switch_lat });
                f.ch_ip.push(NONE);
                f.ch_op.push(NONE);
                f.ch_topo.push(ch);
            }
        }
        // Router ports, in topology port order, each port expanded to its copies.
        for (r, &node) in topo.switches().iter().enumerate() {
            f.in_base[r] = f.ip_chan.len() as u32;
            f.out_base[r] = f.op_chan.len() as u32;
            f.grp_base[r] = f.grp_start.len() as u32;
            let radix = topo.radix(node) as usize;
            f.grp_start.extend(std::iter::repeat(0).take(radix + 1));
            f.grp_len.extend(std::iter::repeat(0).take(radix + 1));
            for adj in topo.neighbors(node) {
                let (first, count) = copies_of[adj.channel as usize];
                let g = f.grp_base[r] as usize + adj.port as usize;
                f.grp_start[g] = f.op_chan.len() as u32;
                f.grp_len[g] = count.min(255) as u8;
                for sc in first..first + count {
                    f.ch_op[sc as usize] = f.op_chan.len() as u32;
                    f.op_chan.push(sc);
                }
                // The reverse channel enters this router on the same port.
                let back = adj.channel ^ 1;
                let (bfirst, bcount) = copies_of[back as usize];
                for sc in bfirst..bfirst + bcount {
                    f.ch_ip[sc as usize] = f.ip_chan.len() as u32;
                    f.ip_chan.push(sc);
                    f.ip_topo_port.push(adj.port);
                }
            }
        }
        f.in_base[num_routers] = f.ip_chan.len() as u32;
        f.out_base[num_routers] = f.op_chan.len() as u32;
        f.grp_base[num_routers] = f.grp_start.len() as u32;
        for (h, &node) in topo.hosts().iter().enumerate() {
            f.host_inj_base[h] = f.host_inj.len() as u32;
            for adj in topo.neighbors(node) {
                let (first, count) = copies_of[adj.channel as usize];
                f.host_inj.extend(first..first + count);
            }
            if f.host_inj.len() as u32 == f.host_inj_base[h] {
                return crate::invalid!("host {} has no link to inject on", topo.label(node));
            }
        }
        f.host_inj_base[num_hosts] = f.host_inj.len() as u32;
        Ok(f)
    }

    pub fn num_channels(&self) -> usize {
        self.ch_lat.len()
    }

    fn max_latency(&self) -> u32 {
        self.ch_lat.iter().copied().max().unwrap_or(1)
    }
}

/// BookSim's `dim_order` on a torus, which a destination table cannot express: a tie
/// (distance exactly k/2) picks its direction at random per packet, and the VC class is fixed
/// when the packet enters a dimension — class 1 if its coordinate must wrap from high to low
/// (BookSim's rule: current coordinate above the destination's), else class 0 — and kept to
/// the end of the dimension. Ejection may use any VC.
pub(crate) struct BookSimTorus {
    dims: Vec<u32>,
    host_ports: u32,
    /// Coordinates of every router, `coords[r * n + d]`.
    coords: Vec<u32>,
}

/// Route class meaning "any VC" (ejection under [`BookSimTorus`]).
const ANY_CLASS: u16 = u16::MAX;

/// Per-host injection state: one current packet per injection port.
pub(crate) struct HostPorts {
    /// Packet being injected on each (host, port slot), or [`NONE`].
    pub packet: Vec<u32>,
    pub seq: Vec<u16>,
    /// Output VC (channel·V + vc) held on the injection channel, or [`NONE`].
    pub ovc: Vec<u32>,
    /// Offset (within the class) of the VC the last packet took.
    pub last_vc: Vec<u16>,
}

/// A source of packets: the open-loop generator or a batch workload.
pub(crate) trait Workload {
    /// Create packets due at cycle `now` (open loop) — called once per cycle before injection.
    fn generate(&mut self, sim: &mut Sim, now: u64);
    /// Next packet for port slot `slot` of host `host`, if any may start now.
    fn next_packet(&mut self, sim: &mut Sim, host: usize, slot: usize, now: u64) -> u32;
    /// A packet's tail reached its destination host.
    fn delivered(&mut self, sim: &mut Sim, d: Delivery);
    /// Whether host `host` might have a packet to start (cheap filter, asked for an idle port slot).
    fn host_has_work(&self, host: usize) -> bool;
}

/// Simulation state.
pub(crate) struct Sim<'a> {
    pub fab: Fabric,
    pub topo: &'a Topology,
    routes: &'a RoutingTable,
    pub cfg: SimConfig,
    pub rng: ChaCha8Rng,
    pub now: u64,
    // buffers (input VCs)
    flits: Vec<Flit>,
    head: Vec<u16>,
    len: Vec<u16>,
    state: Vec<u8>,
    ready: Vec<u64>,
    route_grp: Vec<u32>,
    route_cls: Vec<u16>,
    out_op: Vec<u32>,
    out_ovc: Vec<u32>,
    // output VCs
    owner: Vec<u32>,
    credits: Vec<u16>,
    // arbitration
    va_ptr: Vec<u32>,
    sa_in_ptr: Vec<u16>,
    sa_out_ptr: Vec<u32>,
    /// Next VC (within the class) the VC allocator tries first at each output port.
    ovc_rr: Vec<u16>,
    in_hold: Vec<u16>,
    out_hold: Vec<u32>,
    // scratch, per global output port
    best_ip: Vec<u32>,
    best_key: Vec<u64>,
    best_vc: Vec<u16>,
    touched: Vec<u32>,
    sa_reqs: Vec<(u32, u16, u32)>,
    accepted_ips: Vec<u32>,
    acc_ptr: Vec<u32>,
    acc_op: Vec<u32>,
    acc_key: Vec<u64>,
    islip: bool,
    va_scratch: Vec<(u64, u32)>,
    /// iSLIP VC allocation (BookSim's default): grant pointer of every output VC and accept
    /// pointer of every input VC (router-local indices), and per-output-VC grant scratch.
    vc_islip: bool,
    va_grant_ptr: Vec<u32>,
    va_accept_ptr: Vec<u32>,
    va_grant: Vec<u32>,
    va_grant_dist: Vec<u32>,
    va_touched: Vec<u32>,
    /// Bit `ip·V + vc` is set while that input VC holds a flit, so a router step visits only
    /// the buffers with something in them, in the order a full scan would.
    nonempty: Vec<u64>,
    /// Scratch: the non-empty input VCs (`ip·V + vc`) of the router being stepped.
    scan: Vec<u32>,
    /// log2 V when V is a power of two ([`split_by_vc`](Self::split_by_vc) shifts), else `u32::MAX`.
    vc_shift: u32,
    // activity
    buffered: Vec<u32>,
    active: Vec<u32>,
    next_active: Vec<u32>,
    in_active: Vec<bool>,
    // wheels
    wheel_mask: u64,
    credit_wheel: Vec<Vec<u32>>,
    delivery_wheel: Vec<Vec<u32>>,
    // packets
    pub packets: Vec<Packet>,
    free_packets: Vec<u32>,
    pub hosts: HostPorts,
    // counters
    pub flits_in_network: u64,
    pub moved: u64,
    pub last_progress: u64,
    pub ejected_flits: u64,
    pub error: Option<NetweaveError>,
    vct: bool,
    age: bool,
    hold: bool,
    booksim_torus: Option<BookSimTorus>,
    /// One VC per destination host (`vc_per_destination`).
    per_destination: bool,
}

/// `(local − ptr) mod n`, the round-robin distance of `local` from pointer `ptr`, without a
/// division: `local < n`, and `ptr ≤ n` since a pointer is stored as one past the last winner.
#[inline]
fn rr_distance(local: u32, ptr: u32, n: u32) -> u32 {
    let p = if ptr >= n { ptr - n } else { ptr };
    if local >= p {
        local - p
    } else {
        local + n - p
    }
}

/// `(x + 1) mod n` for `x < n`, without a division: where a round-robin pointer goes after `x` won.
#[inline]
fn next_ptr(x: u32, n: u32) -> u32 {
    if x + 1 >= n {
        0
    } else {
        x + 1
    }
}

fn ring_slot(head: u16, off: usize, cap: usize) -> usize {
    let s = head as usize + off;
    if s >= cap {
        s - cap
    } else {
        s
    }
}

impl<'a> Sim<'a> {
    pub fn new(topo: &'a Topology, routes: &'a RoutingTable, cfg: &SimConfig) -> Result<Sim<'a>> {
        cfg.validate()?;
        let fab = Fabric::new(topo, routes, cfg)?;
        let nch = fab.num_channels();
        let v = fab.vcs;
        let nb = nch * v;
        let ivcs = fab.ip_chan.len() * v;
        let max_delay = (cfg.sw_alloc_delay + cfg.st_final_delay + cfg.credit_delay + fab.max_latency() + 4) as u64;
        let wheel = max_delay.next_power_of_two() as usize;
        let mut credits = vec![cfg.vc_buf_size as u16; nb];
        for c in 0..nch {
            if fab.ch_dst_router[c] == NONE {
                credits[c * v..(c + 1) * v].fill(u16::MAX);
            }
        }
        let slots = fab.host_inj.len();
        let num_ops = fab.op_chan.len();
        let num_ips = fab.ip_chan.len();
        let r = fab.num_routers;
        Ok(Sim {
            flits: vec![Flit::default(); ivcs * fab.buf],
            head: vec![0; ivcs],
            len: vec![0; ivcs],
            state: vec![IDLE; ivcs],
            ready: vec![0; ivcs],
            route_grp: vec![0; ivcs],
            route_cls: vec![0; ivcs],
            out_op: vec![NONE; ivcs],
            out_ovc: vec![NONE; ivcs],
            owner: vec![NONE; nb],
            credits,
            va_ptr: vec![0; r],
            sa_in_ptr: vec![0; num_ips],
            sa_out_ptr: vec![0; num_ops],
            ovc_rr: vec![0; num_ops],
            in_hold: vec![u16::MAX; num_ips],
            out_hold: vec![NONE; num_ops],
            best_ip: vec![NONE; num_ops],
            best_key: vec![u64::MAX; num_ops],
            best_vc: vec![0; num_ops],
            touched: Vec::with_capacity(64),
            sa_reqs: Vec::with_capacity(64),
            accepted_ips: Vec::with_capacity(64),
            acc_ptr: vec![0; num_ips],
            acc_op: vec![NONE; num_ips],
            acc_key: vec![u64::MAX; num_ips],
            islip: cfg.sw_allocator == SwAllocator::Islip,
            va_scratch: Vec::with_capacity(64),
            vc_islip: cfg.vc_allocator == SwAllocator::Islip && cfg.arbitration == Arbitration::RoundRobin,
            va_grant_ptr: vec![0; nb],
            va_accept_ptr: vec![0; ivcs],
            va_grant: vec![NONE; nb],
            va_grant_dist: vec![u32::MAX; nb],
            va_touched: Vec::with_capacity(64),
            nonempty: vec![0; (num_ips * v).div_ceil(64)],
            scan: Vec::with_capacity(64),
            vc_shift: if v.is_power_of_two() { v.trailing_zeros() } else { u32::MAX },
            buffered: vec![0; r],
            active: Vec::with_capacity(r),
            next_active: Vec::with_capacity(r),
            in_active: vec![false; r],
            wheel_mask: wheel as u64 - 1,
            credit_wheel: vec![Vec::new(); wheel],
            delivery_wheel: vec![Vec::new(); wheel],
            packets: Vec::new(),
            free_packets: Vec::new(),
            hosts: HostPorts {
                packet: vec![NONE; slots],
                seq: vec![0; slots],
                ovc: vec![NONE; slots],
                last_vc: vec![u16::MAX; slots],
            },
            flits_in_network: 0,
            moved: 0,
            last_progress: 0,
            ejected_flits: 0,
            error: None,
            vct: cfg.switching == Switching::VirtualCutThrough,
            age: cfg.arbitration == Arbitration::Age,
            hold: cfg.hold_switch_for_packet,
            booksim_torus: None,
            per_destination: cfg.vc_per_destination,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            now: 0,
            fab,
            topo,
            routes,
            cfg: cfg.clone(),
        })
    }

    /// Route with BookSim's torus `dim_order` instead of the table's ports and VC policy.
    pub fn use_booksim_torus(&mut self, dims: Vec<u32>, host_ports: u32) -> Result<()> {
        if self.fab.routing_vcs != 2 {
            return crate::invalid!("BookSim's dim_order on a torus needs a routing with 2 VC classes");
        }
        let n = dims.len();
        let mut coords = vec![0u32; self.fab.num_routers * n];
        for r in 0..self.fab.num_routers {
            let mut x = r as u32;
            for (d, &k) in dims.iter().enumerate() {
                coords[r * n + d] = x % k;
                x /= k;
            }
        }
        self.booksim_torus = Some(BookSimTorus { dims, host_ports, coords });
        Ok(())
    }

    /// BookSim's torus `dim_order` decision: (topology port, VC class).
    pub(crate) fn booksim_torus_route(&mut self, r: usize, in_port: Port, packet: u32) -> (Port, u16) {
        let bt = self.booksim_torus.as_ref().unwrap();
        let h = bt.host_ports.max(1);
        let dst = self.packets[packet as usize].dst;
        let (dst_router, local) = (dst / h, dst % h);
        let n = bt.dims.len();
        let Some(d) = (0..n).find(|&d| bt.coords[r * n + d] != bt.coords[dst_router as usize * n + d]) else {
            return ((local + 1) as Port, ANY_CLASS);
        };
        let hp = bt.host_ports as Port;
        let in_dim = if in_port > hp { Some(((in_port - hp - 1) / 2) as usize) } else { None };
        if in_dim == Some(d) {
            // Keep going the same way: a + port always meets the neighbour's − port.
            let out = if (in_port - hp - 1) % 2 == 0 { in_port + 1 } else { in_port - 1 };
            return (out, self.packets[packet as usize].partition as u16);
        }
        let k = bt.dims[d] as i64;
        let cur = bt.coords[r * n + d] as i64;
        let dest = bt.coords[dst_router as usize * n + d] as i64;
        let dist2 = k - 2 * ((dest - cur + k) % k);
        let plus = dist2 > 0 || (dist2 == 0 && self.rng.gen::<bool>());
        let partition = u8::from(cur > dest);
        self.packets[packet as usize].partition = partition;
        (hp + 2 * d as Port + if plus { 1 } else { 2 }, partition as u16)
    }

    /// The VC class a packet from host `src` to host `dst` is injected in: the destination's
    /// own VC with one VC per destination, else the routing's injection VC.
    pub(crate) fn vc_class_of(&self, src: u32, dst: u32) -> usize {
        if self.per_destination {
            dst as usize
        } else {
            self.routes.vc_policy().injection_vc(src as usize, dst as usize) as usize
        }
    }

    /// A new packet record (recycled ids).
    pub fn alloc_packet(&mut self, p: Packet) -> u32 {
        if let Some(id) = self.free_packets.pop() {
            self.packets[id as usize] = p;
            id
        } else {
            self.packets.push(p);
            (self.packets.len() - 1) as u32
        }
    }

    /// Number of injection port slots of `host`.
    pub fn host_slots(&self, host: usize) -> std::ops::Range<usize> {
        self.fab.host_inj_base[host] as usize..self.fab.host_inj_base[host + 1] as usize
    }

    fn activate(&mut self, r: u32) {
        if !self.in_active[r as usize] {
            self.in_active[r as usize] = true;
            self.next_active.push(r);
        }
    }

    /// Write flit into the input buffer fed by output VC `ovc` (channel·V + vc).
    fn push_flit(&mut self, ovc: usize, flit: Flit) {
        let cap = self.fab.buf;
        let (ch, vc) = self.split_by_vc(ovc as u32);
        let b = self.fab.ch_ip[ch] as usize * self.fab.vcs + vc;
        let slot = ring_slot(self.head[b], self.len[b] as usize, cap);
        self.flits[b * cap + slot] = flit;
        self.len[b] += 1;
        self.nonempty[b / 64] |= 1 << (b % 64);
        let r = self.fab.ch_dst_router[ch];
        self.buffered[r as usize] += 1;
        self.activate(r);
    }

    #[inline]
    fn front(&self, b: usize) -> Flit {
        self.flits[b * self.fab.buf + self.head[b] as usize]
    }

    /// One simulated cycle. The workload is asked for packets; deliveries are reported to it.
    pub fn step<W: Workload>(&mut self, w: &mut W) {
        let now = self.now;
        let slot = (now & self.wheel_mask) as usize;
        // Credits due now.
        let mut credits = std::mem::take(&mut self.credit_wheel[slot]);
        for &ovc in &credits {
            self.credits[ovc as usize] += 1;
        }
        credits.clear();
        self.credit_wheel[slot] = credits;
        // Deliveries due now.
        let mut deliveries = std::mem::take(&mut self.delivery_wheel[slot]);
        for &p in &deliveries {
            let packet = self.packets[p as usize];
            self.free_packets.push(p);
            w.delivered(self, Delivery { packet, time: now });
        }
        deliveries.clear();
        self.delivery_wheel[slot] = deliveries;

        w.generate(self, now);
        self.inject(w, now);

        std::mem::swap(&mut self.active, &mut self.next_active);
        self.next_active.clear();
        let active = std::mem::take(&mut self.active);
        for &r in &active {
            self.in_active[r as usize] = false;
        }
        for &r in &active {
            self.router_step(r as usize, now);
            if self.buffered[r as usize] > 0 {
                self.activate(r);
            }
        }
        self.active = active;
        if self.moved > 0 {
            self.last_progress = now;
            self.moved = 0;
        }
        self.now = now + 1;
    }

    fn schedule_credit(&mut self, ovc: u32, at: u64) {
        let s = (at & self.wheel_mask) as usize;
        self.credit_wheel[s].push(ovc);
    }

    fn inject<W: Workload>(&mut self, w: &mut W, now: u64) {
        let v = self.fab.vcs;
        for h in 0..self.fab.num_hosts {
            for s in self.host_slots(h) {
                if self.hosts.packet[s] == NONE {
                    // A slot between packets asks the workload only when it may have one.
                    if !w.host_has_work(h) {
                        continue;
                    }
                    let p = w.next_packet(self, h, s, now);
                    if p == NONE {
                        continue;
                    }
                    self.hosts.packet[s] = p;
                    self.hosts.seq[s] = 0;
                    self.hosts.ovc[s] = NONE;
                }
                let p = self.hosts.packet[s];
                let pk = self.packets[p as usize];
                let ch = self.fab.host_inj[s] as usize;
                if self.hosts.ovc[s] == NONE {
                    let cls = self.vc_class_of(pk.src, pk.dst);
                    if cls >= self.fab.routing_vcs {
                        self.error = Some(NetweaveError::Routing(format!(
                            "injection VC {cls} of pair {} -> {} is outside the routing's {} VCs",
                            pk.src, pk.dst, self.fab.routing_vcs
                        )));
                        return;
                    }
                    // BookSim's torus routing lets a packet enter on any VC.
                    let (base, width) = if self.booksim_torus.is_some() {
                        (ch * v, v)
                    } else {
                        (ch * v + cls * self.fab.class_width, self.fab.class_width)
                    };
                    // Round-robin from the VC after the last one used, as BookSim's sources do,
                    // so back-to-back packets do not queue behind each other in one VC; like
                    // them, skip a free VC whose buffer is full.
                    let first = self.hosts.last_vc[s] as usize + 1;
                    let Some(ovc) = (0..width)
                        .map(|j| base + (first + j) % width)
                        .find(|&o| self.owner[o] == NONE && self.credits[o] > 0)
                    else {
                        continue;
                    };
                    self.hosts.last_vc[s] = (ovc - base) as u16;
                    self.owner[ovc] = HOST_OWNER;
                    self.hosts.ovc[s] = ovc as u32;
                }
                let ovc = self.hosts.ovc[s] as usize;
                let seq = self.hosts.seq[s];
                let need = if self.vct && seq == 0 { pk.size } else { 1 };
                if self.credits[ovc] < need {
                    continue;
                }
                self.credits[ovc] -= 1;
                if seq == 0 {
                    self.packets[p as usize].itime = now;
                }
                let arrive = now + self.fab.ch_lat[ch] as u64;
                self.push_flit(ovc, Flit { arrive, packet: p, seq });
                self.flits_in_network += 1;
                self.moved += 1;
                if seq + 1 == pk.size {
                    self.owner[ovc] = NONE;
                    self.hosts.packet[s] = NONE;
                    self.hosts.ovc[s] = NONE;
                } else {
                    self.hosts.seq[s] = seq + 1;
                }
            }
        }
    }

    fn priority(&self, packet: u32, rr_distance: u32) -> u64 {
        if self.age {
            (self.packets[packet as usize].ctime << 16) | rr_distance as u64
        } else {
            rr_distance as u64
        }
    }

    fn router_step(&mut self, r: usize, now: u64) {
        let v = self.fab.vcs;
        let ip_lo = self.fab.in_base[r] as usize;
        let ip_hi = self.fab.in_base[r + 1] as usize;

        // Route computation and VC allocation requests.
        self.va_scratch.clear();
        let n_ivc = ((ip_hi - ip_lo) * v) as u32;
        let mut scan = std::mem::take(&mut self.scan);
        self.nonempty_inputs(ip_lo * v, ip_hi * v, &mut scan);
        self.scan = scan;
        // iSLIP's switch requests are gathered in this same pass when nothing between here and
        // switch allocation can change them: no held connections to release, and a VC that
        // wins VC allocation now is not ready to send before next cycle.
        let collect = self.islip && !self.hold && self.cfg.vc_alloc_delay > 0;
        self.sa_reqs.clear();
        for i in 0..self.scan.len() {
            let b = self.scan[i] as usize;
            let (ip, vc) = self.split_by_vc(b as u32);
            {
                match self.state[b] {
                    IDLE => {
                        let f = self.front(b);
                        if f.arrive > now {
                            continue;
                        }
                        if f.seq != 0 {
                            self.error = Some(NetweaveError::Routing("internal: body flit at an idle VC".into()));
                            return;
                        }
                        if !self.route(r, ip, b, f.packet) {
                            return;
                        }
                        self.state[b] = VC_ALLOC;
                        self.ready[b] = now + self.cfg.routing_delay as u64;
                        if self.cfg.routing_delay == 0 {
                            let local = ((ip - ip_lo) * v + vc) as u32;
                            let dist = rr_distance(local, self.va_ptr[r], n_ivc);
                            self.va_scratch.push((self.priority(f.packet, dist), b as u32));
                        }
                    }
                    VC_ALLOC if self.ready[b] <= now => {
                        let local = ((ip - ip_lo) * v + vc) as u32;
                        let dist = rr_distance(local, self.va_ptr[r], n_ivc);
                        let p = self.front(b).packet;
                        self.va_scratch.push((self.priority(p, dist), b as u32));
                    }
                    ACTIVE if collect && self.can_send(b, now) => {
                        self.sa_reqs.push((ip as u32, vc as u16, self.out_op[b]));
                    }
                    _ => {}
                }
            }
        }
        if !self.va_scratch.is_empty() && self.vc_islip {
            self.islip_vc_allocate(r, now);
        } else if !self.va_scratch.is_empty() {
            let mut reqs = std::mem::take(&mut self.va_scratch);
            reqs.sort_unstable();
            let mut first_grant = None;
            for &(_, b) in &reqs {
                let b = b as usize;
                let g = self.route_grp[b] as usize;
                let start = self.fab.grp_start[g] as usize;
                let glen = self.fab.grp_len[g] as usize;
                let (cls, w) = match self.route_cls[b] {
                    ANY_CLASS => (0, v),
                    c => (c as usize, self.fab.class_width),
                };
                let mut granted = false;
                // The port of a group to try first turns with the channel (as it always has).
                let turn = self.fab.ip_chan[b / v] as usize * v + b % v;
                'search: for k in 0..glen {
                    let op = start + (k + turn) % glen;
                    let ch = self.fab.op_chan[op] as usize;
                    // Round-robin over the output's VCs, so consecutive packets alternate.
                    let first = self.ovc_rr[op] as usize;
                    for j in 0..w {
                        let ovc = ch * v + cls * w + (first + j) % w;
                        if self.owner[ovc] == NONE {
                            self.ovc_rr[op] = ((ovc % v - cls * w + 1) % w) as u16;
                            self.owner[ovc] = b as u32;
                            self.out_op[b] = op as u32;
                            self.out_ovc[b] = ovc as u32;
                            self.state[b] = ACTIVE;
                            self.ready[b] = now + self.cfg.vc_alloc_delay as u64;
                            granted = true;
                            break 'search;
                        }
                    }
                }
                if granted && first_grant.is_none() {
                    first_grant = Some((b - ip_lo * v) as u32);
                }
            }
            if let Some(local) = first_grant {
                self.va_ptr[r] = next_ptr(local, n_ivc);
            }
            self.va_scratch = reqs;
        }

        // Switch allocation: each input picks one VC, each output one input.
        let n_in = (ip_hi - ip_lo) as u32;
        if self.hold {
            // As BookSim: a held connection is kept only while its VC can send this cycle;
            // otherwise it is released, so a stalled packet never blocks the other VCs.
            for ip in ip_lo..ip_hi {
                let held = self.in_hold[ip];
                if held == u16::MAX {
                    continue;
                }
                let b = ip * v + held as usize;
                if !self.can_send(b, now) {
                    let op = self.out_op[b];
                    if op != NONE && self.out_hold[op as usize] == ip as u32 {
                        self.out_hold[op as usize] = NONE;
                    }
                    self.in_hold[ip] = u16::MAX;
                }
            }
        }
        if self.islip {
            self.islip_allocate(r, now, collect);
            return;
        }
        for ip in ip_lo..ip_hi {
            let held = self.in_hold[ip];
            let mut pick: Option<(u64, u16)> = None;
            let start = self.sa_in_ptr[ip] as usize;
            for k in 0..v {
                let vc = (start + k) % v;
                if held != u16::MAX && held as usize != vc {
                    continue;
                }
                let b = ip * v + vc;
                if !self.can_send(b, now) {
                    continue;
                }
                let op = self.out_op[b] as usize;
                if self.hold && self.out_hold[op] != NONE && self.out_hold[op] != ip as u32 {
                    continue;
                }
                let f = self.front(b);
                let key = if self.age { self.packets[f.packet as usize].ctime } else { k as u64 };
                if pick.map_or(true, |(best, _)| key < best) {
                    pick = Some((key, vc as u16));
                    if !self.age {
                        break;
                    }
                }
            }
            let Some((_, vc)) = pick else { continue };
            let b = ip * v + vc as usize;
            let op = self.out_op[b] as usize;
            let local = (ip - ip_lo) as u32;
            let dist = rr_distance(local, self.sa_out_ptr[op], n_in);
            let key = self.priority(self.front(b).packet, dist);
            if self.best_ip[op] == NONE {
                self.touched.push(op as u32);
            }
            if key < self.best_key[op] {
                self.best_key[op] = key;
                self.best_ip[op] = ip as u32;
                self.best_vc[op] = vc;
            }
        }
        let touched = std::mem::take(&mut self.touched);
        for &op in &touched {
            let op = op as usize;
            let ip = self.best_ip[op] as usize;
            let vc = self.best_vc[op] as usize;
            self.best_ip[op] = NONE;
            self.best_key[op] = u64::MAX;
            self.sa_out_ptr[op] = (ip - ip_lo) as u32 + 1;
            self.sa_in_ptr[ip] = next_ptr(vc as u32, v as u32) as u16;
            self.traverse(r, ip, vc, op, now);
        }
        self.touched = touched;
        self.touched.clear();
    }

    /// `(x / V, x % V)`: an input bit `ip·V + vc` or a buffer `channel·V + vc` split into its two
    /// parts, by shifting when V is a power of two.
    #[inline]
    fn split_by_vc(&self, bit: u32) -> (usize, usize) {
        if self.vc_shift != u32::MAX {
            ((bit >> self.vc_shift) as usize, (bit & ((1 << self.vc_shift) - 1)) as usize)
        } else {
            (bit as usize / self.fab.vcs, bit as usize % self.fab.vcs)
        }
    }

    /// The set bits `ip·V + vc` of [`nonempty`](Self::nonempty) in `lo..hi`, ascending, into `out`.
    fn nonempty_inputs(&self, lo: usize, hi: usize, out: &mut Vec<u32>) {
        out.clear();
        for word in lo / 64..hi.div_ceil(64) {
            let mut bits = self.nonempty[word];
            let base = word * 64;
            if base < lo {
                bits &= !0u64 << (lo - base);
            }
            if base + 64 > hi {
                bits &= !0u64 >> (base + 64 - hi);
            }
            while bits != 0 {
                out.push((base + bits.trailing_zeros() as usize) as u32);
                bits &= bits - 1;
            }
        }
    }

    /// The free output VCs input VC `b` may take: (global output port, first VC, VC count).
    #[inline]
    fn vc_candidates(&self, b: usize) -> (usize, usize, usize, usize) {
        let g = self.route_grp[b] as usize;
        let (cls, w) = match self.route_cls[b] {
            ANY_CLASS => (0, self.fab.vcs),
            c => (c as usize, self.fab.class_width),
        };
        (self.fab.grp_start[g] as usize, self.fab.grp_len[g] as usize, cls * w, w)
    }

    /// VC allocation by one iteration of iSLIP over input VCs × output VCs, as BookSim's
    /// default allocator: every waiting input VC requests every free output VC of its route;
    /// each output VC grants the requester next after its own pointer, each input VC accepts
    /// the grant next after its pointer, and only accepted grants move the pointers. Per-VC
    /// pointers matter under overload: with one VC per dateline class a router-wide pointer
    /// lets a busy input win the same output VC again and again.
    fn islip_vc_allocate(&mut self, r: usize, now: u64) {
        let v = self.fab.vcs;
        let ip_lo = self.fab.in_base[r] as usize;
        let op_lo = self.fab.out_base[r] as usize;
        let n_ivc = ((self.fab.in_base[r + 1] as usize - ip_lo) * v) as u32;
        let n_ovc = ((self.fab.out_base[r + 1] as usize - op_lo) * v) as u32;
        let reqs = std::mem::take(&mut self.va_scratch);
        let local_in = |_: &Self, b: usize| (b - ip_lo * v) as u32;
        // Grant: each free output VC picks the requesting input VC nearest after its pointer.
        for &(_, b) in &reqs {
            let b = b as usize;
            let li = local_in(self, b);
            let (start, glen, first_vc, w) = self.vc_candidates(b);
            for op in start..start + glen {
                let ch = self.fab.op_chan[op] as usize;
                for ovc in ch * v + first_vc..ch * v + first_vc + w {
                    if self.owner[ovc] != NONE {
                        continue;
                    }
                    let dist = rr_distance(li, self.va_grant_ptr[ovc], n_ivc);
                    if self.va_grant[ovc] == NONE {
                        self.va_touched.push(ovc as u32);
                    }
                    if dist < self.va_grant_dist[ovc] {
                        self.va_grant_dist[ovc] = dist;
                        self.va_grant[ovc] = b as u32;
                    }
                }
            }
        }
        // Accept: each input VC takes the granting output VC nearest after its pointer.
        for &(_, b) in &reqs {
            let b = b as usize;
            let (start, glen, first_vc, w) = self.vc_candidates(b);
            let mut best: Option<(u32, usize, usize)> = None;
            for op in start..start + glen {
                let ch = self.fab.op_chan[op] as usize;
                for ovc in ch * v + first_vc..ch * v + first_vc + w {
                    if self.va_grant[ovc] != b as u32 {
                        continue;
                    }
                    let lo = ((op - op_lo) * v + ovc % v) as u32;
                    let dist = rr_distance(lo, self.va_accept_ptr[b], n_ovc);
                    if best.map_or(true, |(d, _, _)| dist < d) {
                        best = Some((dist, op, ovc));
                    }
                }
            }
            let Some((_, op, ovc)) = best else { continue };
            self.va_grant_ptr[ovc] = next_ptr(local_in(self, b), n_ivc);
            let ovc_vc = self.split_by_vc(ovc as u32).1;
            self.va_accept_ptr[b] = next_ptr(((op - op_lo) * v + ovc_vc) as u32, n_ovc);
            self.owner[ovc] = b as u32;
            self.out_op[b] = op as u32;
            self.out_ovc[b] = ovc as u32;
            self.state[b] = ACTIVE;
            self.ready[b] = now + self.cfg.vc_alloc_delay as u64;
        }
        for &ovc in &self.va_touched {
            self.va_grant[ovc as usize] = NONE;
            self.va_grant_dist[ovc as usize] = u32::MAX;
        }
        self.va_touched.clear();
        self.va_scratch = reqs;
    }

    /// Switch allocation by one iteration of iSLIP (BookSim's default): every ready VC
    /// requests its output; each output grants the requesting input next after its pointer,
    /// each input accepts the granting output next after its pointer, and only accepted
    /// grants move the pointers. With age arbitration the oldest packet wins both steps.
    fn islip_allocate(&mut self, r: usize, now: u64, collected: bool) {
        let v = self.fab.vcs;
        let ip_lo = self.fab.in_base[r] as usize;
        let ip_hi = self.fab.in_base[r + 1] as usize;
        let op_lo = self.fab.out_base[r] as usize;
        let n_in = (ip_hi - ip_lo) as u32;
        let n_out = (self.fab.out_base[r + 1] as usize - op_lo) as u32;
        let mut reqs = std::mem::take(&mut self.sa_reqs);
        if !collected {
            reqs.clear();
        }
        // Only a non-empty VC can send; the scan is this router step's (lengths have not
        // changed since it was taken).
        for &bit in self.scan.iter().filter(|_| !collected) {
            let (ip, vc) = self.split_by_vc(bit);
            let held = self.in_hold[ip];
            {
                if held != u16::MAX && held as usize != vc {
                    continue;
                }
                let b = bit as usize;
                if !self.can_send(b, now) {
                    continue;
                }
                let op = self.out_op[b];
                if self.hold && self.out_hold[op as usize] != NONE && self.out_hold[op as usize] != ip as u32 {
                    continue;
                }
                reqs.push((ip as u32, vc as u16, op));
            }
        }
        if reqs.is_empty() {
            self.sa_reqs = reqs;
            return;
        }
        if let [(ip, vc, op)] = reqs[..] {
            // One request (most router steps below saturation): its output grants it and its
            // input accepts, whatever the pointers; they move as in the general case below.
            let (ip, op) = (ip as usize, op as usize);
            self.sa_out_ptr[op] = (ip - ip_lo) as u32 + 1;
            self.acc_ptr[ip] = (op - op_lo) as u32 + 1;
            self.sa_in_ptr[ip] = next_ptr(vc as u32, v as u32) as u16;
            self.sa_reqs = reqs;
            self.traverse(r, ip, vc as usize, op, now);
            return;
        }
        // Grant.
        for &(ip, vc, op) in &reqs {
            let (ip, op) = (ip as usize, op as usize);
            let dist = rr_distance((ip - ip_lo) as u32, self.sa_out_ptr[op], n_in);
            let b = ip * v + vc as usize;
            let key = self.priority(self.front(b).packet, dist);
            if self.best_ip[op] == NONE {
                self.touched.push(op as u32);
            }
            if key < self.best_key[op] {
                self.best_key[op] = key;
                self.best_ip[op] = ip as u32;
            }
        }
        // Accept.
        let mut accepted_ips = std::mem::take(&mut self.accepted_ips);
        accepted_ips.clear();
        for &op in &self.touched {
            let op = op as usize;
            let ip = self.best_ip[op] as usize;
            let dist = rr_distance((op - op_lo) as u32, self.acc_ptr[ip], n_out);
            let key = if self.age { (self.best_key[op] & !0xffff) | dist as u64 } else { dist as u64 };
            if self.acc_op[ip] == NONE {
                accepted_ips.push(ip as u32);
            }
            if key < self.acc_key[ip] {
                self.acc_key[ip] = key;
                self.acc_op[ip] = op as u32;
            }
        }
        for &op in &self.touched {
            self.best_ip[op as usize] = NONE;
            self.best_key[op as usize] = u64::MAX;
        }
        self.touched.clear();
        // The accepted input's VC for that output, round-robin (or oldest), then traverse.
        for &ip in &accepted_ips {
            let ip = ip as usize;
            let op = self.acc_op[ip];
            self.acc_op[ip] = NONE;
            self.acc_key[ip] = u64::MAX;
            let start = self.sa_in_ptr[ip] as usize;
            let mut best: Option<(u64, u16)> = None;
            for &(rip, vc, rop) in &reqs {
                if rip as usize != ip || rop != op {
                    continue;
                }
                let b = ip * v + vc as usize;
                let dist = rr_distance(vc as u32, start as u32, v as u32);
                let key = self.priority(self.front(b).packet, dist);
                if best.map_or(true, |(k, _)| key < k) {
                    best = Some((key, vc));
                }
            }
            let (_, vc) = best.expect("an accepted input has a request for its output");
            let op = op as usize;
            self.sa_out_ptr[op] = (ip - ip_lo) as u32 + 1;
            self.acc_ptr[ip] = (op - op_lo) as u32 + 1;
            self.sa_in_ptr[ip] = next_ptr(vc as u32, v as u32) as u16;
            self.traverse(r, ip, vc as usize, op, now);
        }
        self.accepted_ips = accepted_ips;
        self.sa_reqs = reqs;
    }

    /// Whether input VC `b` has a flit that may cross the switch now: allocated, arrived,
    /// past the VC-allocation delay, and with credit downstream (a whole packet's for VCT).
    #[inline]
    fn can_send(&self, b: usize, now: u64) -> bool {
        if self.state[b] != ACTIVE || self.len[b] == 0 {
            return false;
        }
        let f = self.front(b);
        if f.arrive > now || (f.seq == 0 && self.ready[b] > now) {
            return false;
        }
        let need = if self.vct && f.seq == 0 { self.packets[f.packet as usize].size } else { 1 };
        self.credits[self.out_ovc[b] as usize] >= need
    }

    /// Route the head flit of input VC `b`: output port group and VC class. False on error.
    fn route(&mut self, r: usize, ip: usize, b: usize, packet: u32) -> bool {
        let pk = self.packets[packet as usize];
        let in_port = self.fab.ip_topo_port[ip];
        let (port, forced_cls) = if self.booksim_torus.is_some() {
            let (p, c) = self.booksim_torus_route(r, in_port, packet);
            (p, Some(c))
        } else {
            (self.routes.out_port(r, pk.dst as usize), None)
        };
        let node = self.topo.switches()[r];
        let g = self.fab.grp_base[r] as usize + port as usize;
        if port == NO_PORT || g >= self.fab.grp_base[r + 1] as usize || self.fab.grp_len[g] == 0 {
            let dst = self.topo.hosts()[pk.dst as usize];
            self.error = Some(NetweaveError::Routing(format!(
                "switch {} has no route to {} (port {port})",
                self.topo.label(node),
                self.topo.label(dst)
            )));
            return false;
        }
        if self.per_destination {
            self.route_grp[b] = g as u32;
            self.route_cls[b] = self.vc_class_of(pk.src, pk.dst) as u16;
            return true;
        }
        if let Some(cls) = forced_cls {
            self.route_grp[b] = g as u32;
            self.route_cls[b] = cls;
            return true;
        }
        let cls_in = (b % self.fab.vcs) / self.fab.class_width;
        let cls = self.routes.vc_policy().change(r, in_port, port).apply(cls_in as u8) as usize;
        if cls >= self.fab.routing_vcs {
            self.error = Some(NetweaveError::Routing(format!(
                "switch {} moves a packet to VC {cls}, beyond the routing's {} VCs",
                self.topo.label(node),
                self.fab.routing_vcs
            )));
            return false;
        }
        self.route_grp[b] = g as u32;
        self.route_cls[b] = cls as u16;
        true
    }

    /// Move the front flit of input VC (`ip`, `vc`) through output port `op`.
    fn traverse(&mut self, _r: usize, ip: usize, vc: usize, op: usize, now: u64) {
        let v = self.fab.vcs;
        let in_ch = self.fab.ip_chan[ip] as usize;
        let b = ip * v + vc;
        let cap = self.fab.buf;
        let f = self.flits[b * cap + self.head[b] as usize];
        self.head[b] = ring_slot(self.head[b], 1, cap) as u16;
        self.len[b] -= 1;
        if self.len[b] == 0 {
            self.nonempty[b / 64] &= !(1 << (b % 64));
        }
        let r_in = self.fab.ch_dst_router[in_ch] as usize;
        self.buffered[r_in] -= 1;
        self.moved += 1;
        // The freed slot's credit goes back upstream, to the output VC that feeds this buffer.
        let back = now + (self.cfg.credit_delay + self.fab.ch_lat[in_ch]) as u64;
        self.schedule_credit((in_ch * v + vc) as u32, back);

        let pk = &mut self.packets[f.packet as usize];
        if f.seq == 0 {
            pk.hops += 1;
        }
        let tail = f.seq + 1 == pk.size;
        let out_ch = self.fab.op_chan[op] as usize;
        let ovc = self.out_ovc[b] as usize;
        let arrive = now + (self.cfg.sw_alloc_delay + self.cfg.st_final_delay) as u64 + self.fab.ch_lat[out_ch] as u64;
        if self.fab.ch_dst_router[out_ch] == NONE {
            self.flits_in_network -= 1;
            self.ejected_flits += 1;
            if tail {
                // The host retires the tail one cycle after it arrives.
                let s = ((arrive + 1) & self.wheel_mask) as usize;
                self.delivery_wheel[s].push(f.packet);
            }
        } else {
            self.credits[ovc] -= 1;
            self.push_flit(ovc, Flit { arrive, packet: f.packet, seq: f.seq });
        }
        if self.hold {
            self.out_hold[op] = if tail { NONE } else { ip as u32 };
            self.in_hold[ip] = if tail { u16::MAX } else { vc as u16 };
        }
        if tail {
            self.owner[ovc] = NONE;
            self.state[b] = IDLE;
            self.out_op[b] = NONE;
            self.out_ovc[b] = NONE;
        }
    }

    /// One line naming the blocked channels (for the deadlock report).
    pub fn blocked_channels(&self, limit: usize) -> (usize, String) {
        let v = self.fab.vcs;
        let mut parts = Vec::new();
        let mut count = 0;
        // Switch-to-switch channels first: they show the cycle; host links only back up.
        let chan = |b: usize| self.fab.ip_chan[b / v] as usize;
        let switch_first = (0..self.len.len())
            .filter(|&b| self.fab.ch_src_router[chan(b)] != NONE)
            .chain((0..self.len.len()).filter(|&b| self.fab.ch_src_router[chan(b)] == NONE));
        for b in switch_first {
            if self.len[b] == 0 {
                continue;
            }
            count += 1;
            if parts.len() < limit {
                let ch = self.fab.ch_topo[chan(b)];
                let (a, z) = self.topo.channel_ends(ch);
                parts.push(format!(
                    "{}->{} vc {} ({} flits)",
                    self.topo.label(a.node),
                    self.topo.label(z.node),
                    b % v,
                    self.len[b]
                ));
            }
        }
        (count, parts.join(", "))
    }

    /// Check the watchdog; an error if nothing moved for `deadlock_cycles` with flits in flight.
    pub fn check_deadlock(&self) -> Result<()> {
        if self.flits_in_network > 0 && self.now - self.last_progress > self.cfg.deadlock_cycles as u64 {
            let (count, list) = self.blocked_channels(6);
            return Err(NetweaveError::Routing(format!(
                "deadlock: no flit moved for {} cycles (cycle {}) with {} flits in flight; {count} blocked VCs: {list}",
                self.cfg.deadlock_cycles, self.now, self.flits_in_network
            )));
        }
        Ok(())
    }

    /// Take the error a step ran into, if any.
    pub fn take_error(&mut self) -> Result<()> {
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Geometric gap (≥ 1) between Bernoulli(p) successes.
pub(crate) fn geometric_gap<R: Rng>(rng: &mut R, p: f64) -> u64 {
    if p >= 1.0 {
        return 1;
    }
    let u: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
    let g = (u.ln() / (1.0 - p).ln()).floor();
    if g.is_finite() && g < 1e15 {
        g as u64 + 1
    } else {
        u64::MAX / 4
    }
}

/// A host-local FIFO of packets.
pub(crate) type PacketQueue = VecDeque<u32>;
