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
//! A flit granted the switch goes to the downstream buffer at the end of the cycle, stamped with
//! the cycle it arrives; credits guarantee the room, and the downstream router ignores it until
//! then. Credits and deliveries travel on two small timing wheels, and a third wakes a router
//! in the cycle a flit reaches it: only routers holding an arrived flit are visited, by one or
//! more workers (`router.rs`); a router's step reads and writes nothing another router touches
//! in the same cycle, so neither the visiting order nor the split among threads — or among
//! processes (`partition.rs`) — can change the result. The network's static arrays are in
//! `network.rs`.
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
use super::flit::{Flit, Packet, IDLE, NONE};
use super::network::{BookSimTorus, SimNetwork};
use super::partition::{self, error_text, read_blocked, Broadcast, Exchange, Mail, PartitionReport};
use super::router::{land_flit, step_routers, Fixed, Outbox, Pool, RouterState, Shared, Wheels, Worker};
use crate::error::{NetweaveError, Result};
use crate::routing::RoutingTable;
use crate::topology::structure::Lattice;
use crate::topology::Topology;

/// Output-VC owner meaning "a host is injecting on it".
const HOST_OWNER: u32 = u32::MAX - 1;

/// What a finished packet reports back to the workload.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Delivery {
    pub packet: Packet,
    pub time: u64,
}

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
    /// Whether the workload calls [`Sim::wake_host`] whenever it gives a host work, so that
    /// injection visits only awake hosts (else it visits every host every cycle).
    fn wakes_hosts(&self) -> bool {
        false
    }
}

/// Simulation state.
pub(crate) struct Sim<'a> {
    /// Threads for workers 1.. (none with one worker). First, so that dropping a Sim (also while
    /// unwinding) joins them before the arrays they step are freed.
    pool: Option<Pool>,
    pub net: SimNetwork,
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
    /// Flit slot the next flit through each output VC lands in ([`land_flit`]).
    write_at: Vec<u32>,
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
    acc_ptr: Vec<u32>,
    acc_op: Vec<u32>,
    acc_key: Vec<u64>,
    islip: bool,
    /// iSLIP VC allocation (BookSim's default): grant pointer of every output VC and accept
    /// pointer of every input VC (router-local indices), and per-output-VC grant scratch.
    vc_islip: bool,
    va_grant_ptr: Vec<u32>,
    va_accept_ptr: Vec<u32>,
    va_grant: Vec<u32>,
    va_grant_dist: Vec<u32>,
    /// A bit per input VC ([`SimNetwork::nonempty_bit`]), set while it holds a flit, so a router
    /// step visits only the buffers with something in them, in the order a full scan would.
    nonempty: Vec<u64>,
    /// Router workers: one per thread, each stepping the routers of its share (`part_of`).
    workers: Vec<Worker>,
    part_of: Vec<u32>,
    // activity
    /// Routers to step next cycle, a bit each (`active_words` words): a bitset rather than a
    /// list, so that waking a router twice costs nothing and they step in id order.
    next_active: Vec<u64>,
    active_words: usize,
    // wheels
    wheel_mask: u64,
    credit_wheel: Vec<Vec<u32>>,
    /// Routers to wake when a flit reaches their buffer (those not holding the switch sleep
    /// while all their flits are on links): a router bitset per slot, slot after slot.
    wake_wheel: Vec<u64>,
    /// Tails due at their host: (packet, routers crossed).
    delivery_wheel: Vec<Vec<(u32, u16)>>,
    // packets
    pub packets: Vec<Packet>,
    free_packets: Vec<u32>,
    next_uid: u64,
    pub hosts: HostPorts,
    /// A bit per host that may have something to inject (see [`Workload::wakes_hosts`]).
    awake: Vec<u64>,
    // counters
    pub flits_in_network: u64,
    pub moved: u64,
    pub last_progress: u64,
    pub ejected_flits: u64,
    pub error: Option<NetweaveError>,
    vct: bool,
    age: bool,
    hold: bool,
    pub(crate) booksim_torus: Option<BookSimTorus>,
    /// One VC per destination host (`vc_per_destination`).
    per_destination: bool,
    /// This process's share of a run split over ranks ([`partition`]), if it is one.
    dist: Option<Dist>,
}

/// A rank's side of a partitioned run: whose routers are whose, and the mail not yet sent.
struct Dist {
    link: Box<dyn Exchange>,
    me: u32,
    rank_of: Vec<u32>,
    lookahead: u64,
    /// Effects of cycles before this one have been exchanged.
    synced_to: u64,
    mail: Vec<Mail>,
    all: Broadcast,
    report: PartitionReport,
}

impl<'a> Sim<'a> {
    pub fn new(topo: &'a Topology, routes: &'a RoutingTable, cfg: &SimConfig) -> Result<Sim<'a>> {
        cfg.validate()?;
        let net = SimNetwork::new(topo, routes, cfg)?;
        let nch = net.num_channels();
        let v = net.vcs;
        let nb = nch * v;
        let ivcs = net.ip_chan.len() * v;
        if ivcs * net.buf > u32::MAX as usize {
            return crate::invalid!(
                "{ivcs} input VCs of {} flits are more flit slots than this simulator indexes (2³²)",
                net.buf
            );
        }
        // The flit slots dominate what a run allocates; the rest is per channel or per router.
        crate::budget::ensure(
            &format!("the flit simulator's {ivcs} input VCs of {} flits", net.buf),
            (ivcs * net.buf) as u128 * std::mem::size_of::<Flit>() as u128 + (nb as u128) * 16,
        )?;
        let max_delay = (cfg.sw_alloc_delay + cfg.st_final_delay + cfg.credit_delay + net.max_latency() + 4) as u64;
        let wheel = max_delay.next_power_of_two() as usize;
        let mut credits = vec![cfg.vc_buf_size as u16; nb];
        for c in 0..nch {
            if net.ch_dst_router[c] == NONE {
                credits[c * v..(c + 1) * v].fill(u16::MAX);
            }
        }
        let slots = net.host_inj.len();
        let num_ops = net.op_chan.len();
        let num_ips = net.ip_chan.len();
        let r = net.num_routers;
        let threads = cfg.worker_threads().min(r.max(1));
        Ok(Sim {
            flits: vec![Flit::default(); ivcs * net.buf],
            head: vec![0; ivcs],
            len: vec![0; ivcs],
            state: vec![IDLE; ivcs],
            ready: vec![0; ivcs],
            route_grp: vec![0; ivcs],
            route_cls: vec![0; ivcs],
            out_op: vec![NONE; ivcs],
            out_ovc: vec![NONE; ivcs],
            owner: vec![NONE; nb],
            write_at: (0..nb)
                .map(|o| match net.ch_dst_router[o / v] {
                    NONE => 0, // into a host: nothing lands in a buffer
                    _ => ((net.into[o / v].first_vc as usize + o % v) * net.buf) as u32,
                })
                .collect(),
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
            acc_ptr: vec![0; num_ips],
            acc_op: vec![NONE; num_ips],
            acc_key: vec![u64::MAX; num_ips],
            islip: cfg.sw_allocator == SwAllocator::Islip,
            vc_islip: cfg.vc_allocator == SwAllocator::Islip && cfg.arbitration == Arbitration::RoundRobin,
            va_grant_ptr: vec![0; nb],
            va_accept_ptr: vec![0; ivcs],
            va_grant: vec![NONE; nb],
            va_grant_dist: vec![u32::MAX; nb],
            nonempty: vec![0; net.ne_word[r] as usize],
            workers: (0..threads).map(|_| Worker::default()).collect(),
            // Contiguous shares of router ids: neighbours in a lattice mostly stay together.
            part_of: (0..r).map(|x| (x * threads / r.max(1)) as u32).collect(),
            pool: (threads > 1).then(|| Pool::new(threads - 1)),
            next_active: vec![0; r.div_ceil(64)],
            active_words: r.div_ceil(64),
            wheel_mask: wheel as u64 - 1,
            credit_wheel: vec![Vec::new(); wheel],
            wake_wheel: vec![0; wheel * r.div_ceil(64)],
            delivery_wheel: vec![Vec::new(); wheel],
            packets: Vec::new(),
            free_packets: Vec::new(),
            next_uid: 0,
            hosts: HostPorts {
                packet: vec![NONE; slots],
                seq: vec![0; slots],
                ovc: vec![NONE; slots],
                last_vc: vec![u16::MAX; slots],
            },
            awake: vec![0; net.num_hosts.div_ceil(64)],
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
            dist: None,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            now: 0,
            net,
            topo,
            routes,
            cfg: cfg.clone(),
        })
    }

    /// Route with BookSim's torus `dim_order` on lattice `lat` instead of the table's ports
    /// and VC policy.
    pub fn use_booksim_torus(&mut self, lat: &Lattice) -> Result<()> {
        if self.net.routing_vcs != 2 {
            return crate::invalid!("BookSim's dim_order on a torus needs a routing with 2 VC classes");
        }
        self.booksim_torus = Some(BookSimTorus { coords: lat.coords(), lattice: lat.clone() });
        Ok(())
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
    pub fn alloc_packet(&mut self, mut p: Packet) -> u32 {
        p.uid = self.next_uid;
        self.next_uid += 1;
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
        self.net.host_inj_base[host] as usize..self.net.host_inj_base[host + 1] as usize
    }

    /// Whether this process steps router `r` (every router in a one-process run).
    fn owns(&self, r: u32) -> bool {
        self.dist.as_ref().map_or(true, |d| d.rank_of[r as usize] == d.me)
    }

    fn activate(&mut self, r: u32) {
        self.next_active[r as usize / 64] |= 1 << (r % 64);
    }

    /// Write flit into the input buffer fed by output VC `ovc` (channel·V + vc).
    fn push_flit(&mut self, ovc: usize, flit: Flit) {
        let mut state = self.router_state(false);
        let r = land_flit(&self.net, &mut state, ovc, flit);
        if self.hold {
            self.activate(r);
        } else {
            let slot = (flit.arrive as u64 & self.wheel_mask) as usize;
            self.wake_wheel[slot * self.active_words + r as usize / 64] |= 1 << (r % 64);
        }
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
        // Deliveries due now, oldest packet first: the order routers reported them in depends
        // on how they were split among threads.
        let mut deliveries = std::mem::take(&mut self.delivery_wheel[slot]);
        deliveries.sort_unstable_by_key(|&(p, _)| self.packets[p as usize].uid);
        for &(p, hops) in &deliveries {
            self.packets[p as usize].hops = hops;
            let packet = self.packets[p as usize];
            self.free_packets.push(p);
            w.delivered(self, Delivery { packet, time: now });
        }
        deliveries.clear();
        self.delivery_wheel[slot] = deliveries;

        w.generate(self, now);
        self.inject(w, now);

        self.step_routers(now);
        if self.moved > 0 {
            self.last_progress = now;
            self.moved = 0;
        }
        self.now = now + 1;
        if self.dist.as_ref().is_some_and(|d| self.now - d.synced_to >= d.lookahead) {
            self.exchange();
        }
    }

    /// The router-owned arrays as the router steps share them; with `land`, the wheels too,
    /// for effects to land at once ([`Wheels`]).
    #[inline]
    fn router_state(&mut self, land: bool) -> RouterState {
        let wheels = land.then(|| Wheels {
            wheel_mask: self.wheel_mask,
            credit_wheel: Shared::of(&mut self.credit_wheel),
            wake_wheel: Shared::of(&mut self.wake_wheel),
            words: self.active_words,
            next_active: Shared::of(&mut self.next_active),
            delivery_wheel: Shared::of(&mut self.delivery_wheel),
        });
        RouterState {
            flits: Shared::of(&mut self.flits),
            head: Shared::of(&mut self.head),
            len: Shared::of(&mut self.len),
            state: Shared::of(&mut self.state),
            ready: Shared::of(&mut self.ready),
            route_grp: Shared::of(&mut self.route_grp),
            route_cls: Shared::of(&mut self.route_cls),
            out_op: Shared::of(&mut self.out_op),
            out_ovc: Shared::of(&mut self.out_ovc),
            owner: Shared::of(&mut self.owner),
            credits: Shared::of(&mut self.credits),
            va_ptr: Shared::of(&mut self.va_ptr),
            sa_in_ptr: Shared::of(&mut self.sa_in_ptr),
            sa_out_ptr: Shared::of(&mut self.sa_out_ptr),
            ovc_rr: Shared::of(&mut self.ovc_rr),
            in_hold: Shared::of(&mut self.in_hold),
            out_hold: Shared::of(&mut self.out_hold),
            best_ip: Shared::of(&mut self.best_ip),
            best_key: Shared::of(&mut self.best_key),
            best_vc: Shared::of(&mut self.best_vc),
            acc_ptr: Shared::of(&mut self.acc_ptr),
            acc_op: Shared::of(&mut self.acc_op),
            acc_key: Shared::of(&mut self.acc_key),
            va_grant_ptr: Shared::of(&mut self.va_grant_ptr),
            va_accept_ptr: Shared::of(&mut self.va_accept_ptr),
            va_grant: Shared::of(&mut self.va_grant),
            va_grant_dist: Shared::of(&mut self.va_grant_dist),
            nonempty: Shared::of(&mut self.nonempty),
            write_at: Shared::of(&mut self.write_at),
            wheels,
        }
    }

    /// Every router holding flits takes its step, each worker its share on its own thread;
    /// then what they did to other routers, hosts and upstream ports is applied, worker by
    /// worker (`router.rs` says why the split cannot change the outcome).
    fn step_routers(&mut self, now: u64) {
        let slot = (now & self.wheel_mask) as usize;
        for w in &mut self.workers {
            w.routers.clear();
        }
        let waking = &mut self.wake_wheel[slot * self.active_words..(slot + 1) * self.active_words];
        for (word, (busy, woken)) in self.next_active.iter_mut().zip(waking).enumerate() {
            let mut bits = std::mem::take(busy) | std::mem::take(woken);
            while bits != 0 {
                let r = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.workers[self.part_of[r] as usize].routers.push(r as u32);
            }
        }
        // One worker in one process lands its effects at once; otherwise they wait in outboxes.
        let state = self.router_state(self.pool.is_none() && self.dist.is_none());
        let fixed = Fixed {
            net: &self.net,
            topo: self.topo,
            routes: self.routes,
            cfg: &self.cfg,
            booksim_torus: self.booksim_torus.as_ref(),
            packets: &self.packets,
            vct: self.vct,
            age: self.age,
            hold: self.hold,
            islip: self.islip,
            vc_islip: self.vc_islip,
            per_destination: self.per_destination,
        };
        match &self.pool {
            Some(pool) => pool.run(&fixed, state, &mut self.workers, now),
            None => step_routers(&fixed, state, &mut self.workers[0], now),
        }
        let mut workers = std::mem::take(&mut self.workers);
        let mut dist = self.dist.take();
        let mut error: Option<(usize, NetweaveError)> = None;
        for w in &mut workers {
            let out = &mut w.out;
            match dist.as_mut() {
                None => self.apply_outbox(out),
                Some(d) => self.apply_or_mail(out, d, now),
            }
            for &r in &out.busy {
                self.activate(r);
            }
            if let Some((r, e)) = out.error.take() {
                if error.as_ref().map_or(true, |(at, _)| r < *at) {
                    error = Some((r, e));
                }
            }
        }
        self.workers = workers;
        match (error, dist.as_mut()) {
            (None, _) => {}
            (Some((_, e)), None) => self.error = Some(e),
            // Every rank must stop on the same cycle: the error waits for the exchange.
            (Some((r, e)), Some(d)) => {
                // The earliest wins, as in one process (a window spans cycles).
                let key = (now, r as u32);
                if d.all.error.as_ref().map_or(true, |(at, _)| key < *at) {
                    d.all.error = Some((key, error_text(&e)));
                }
            }
        }
        self.dist = dist;
    }

    /// A worker's effects in a one-process run: everything lands here.
    fn apply_outbox(&mut self, out: &Outbox) {
        for &(ovc, flit) in &out.pushes {
            self.push_flit(ovc as usize, flit);
        }
        for &(ovc, at) in &out.credits {
            self.credit_wheel[(at & self.wheel_mask) as usize].push(ovc);
        }
        for &(at, packet, hops) in &out.deliveries {
            self.delivery_wheel[(at & self.wheel_mask) as usize].push((packet, hops));
        }
        self.moved += out.moved;
        self.flits_in_network -= out.ejected;
        self.ejected_flits += out.ejected;
    }

    /// A worker's effects in a partitioned run: what concerns this rank's routers or the host
    /// side lands here; flits and credits for other ranks' routers go into their mail; tails,
    /// host credits, movement and ejections go to every rank.
    fn apply_or_mail(&mut self, out: &Outbox, d: &mut Dist, now: u64) {
        let v = self.net.vcs as u32;
        for &(ovc, flit) in &out.pushes {
            let r = self.net.ch_dst_router[(ovc / v) as usize];
            match d.rank_of[r as usize] {
                k if k == d.me => self.push_flit(ovc as usize, flit),
                k => partition::put_push(&mut d.mail[k as usize].pushes, ovc, &flit),
            }
        }
        for &(ovc, at) in &out.credits {
            let up = self.net.ch_src_router[(ovc / v) as usize];
            if up == NONE {
                partition::put_credit(&mut d.all.credits, ovc, at);
            } else if d.rank_of[up as usize] != d.me {
                partition::put_credit(&mut d.mail[d.rank_of[up as usize] as usize].credits, ovc, at);
                continue;
            }
            self.credit_wheel[(at & self.wheel_mask) as usize].push(ovc);
        }
        for &(at, packet, hops) in &out.deliveries {
            partition::put_delivery(&mut d.all.deliveries, at, packet, hops);
            self.delivery_wheel[(at & self.wheel_mask) as usize].push((packet, hops));
        }
        if out.moved > 0 {
            d.all.last_moved = now;
        }
        self.moved += out.moved;
        d.all.ejected += out.ejected;
        self.flits_in_network -= out.ejected;
        self.ejected_flits += out.ejected;
    }

    /// Split this run over the ranks `link` connects: this process steps only its own routers
    /// and swaps effects with the others every `lookahead` cycles. Call before the first step.
    pub fn distribute(&mut self, link: Box<dyn Exchange>) -> Result<()> {
        let (me, ranks) = (link.rank(), link.ranks());
        if me >= ranks {
            return crate::invalid!("rank {me} of {ranks}: ranks are numbered from 0");
        }
        // Checked on every rank before the first exchange, so a refusal stops them all.
        if ranks > self.net.num_routers.max(1) {
            return crate::invalid!(
                "{ranks} ranks for {} routers: use at most one rank per router",
                self.net.num_routers
            );
        }
        // Rank 0 splits and tells the others: METIS's random state is process-wide, so ranks
        // that each ran it could disagree (threads as ranks do).
        let mut link = link;
        let rank_of = if me == 0 {
            let rank_of = partition::partition_routers(&self.net, ranks, self.cfg.seed);
            let bytes: Vec<u8> = rank_of.iter().flat_map(|k| k.to_le_bytes()).collect();
            link.exchange(vec![bytes; ranks])?;
            rank_of
        } else {
            let got = link.exchange(vec![Vec::new(); ranks])?.swap_remove(0);
            let rank_of: Vec<u32> = got.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
            if rank_of.len() != self.net.num_routers || rank_of.iter().any(|&k| k as usize >= ranks) {
                return crate::invalid!("rank 0 split a different network: every rank must run the same config");
            }
            rank_of
        };
        let (sw, st, cd) =
            (self.cfg.sw_alloc_delay as u64, self.cfg.st_final_delay as u64, self.cfg.credit_delay as u64);
        // The soonest another rank needs a step's effect: a flit or credit over a cut channel,
        // a credit back to a host (every rank injects), a tail's retirement (every rank counts).
        let mut lookahead = u64::MAX;
        let (mut cut, mut switch_channels) = (0, 0);
        for c in 0..self.net.num_channels() {
            let lat = self.net.ch_lat[c] as u64;
            let (a, b) = (self.net.ch_src_router[c], self.net.ch_dst_router[c]);
            if a != NONE && b != NONE {
                switch_channels += 1;
                if rank_of[a as usize] != rank_of[b as usize] {
                    cut += 1;
                    lookahead = lookahead.min(sw + st + lat).min(cd + lat);
                }
            } else if a == NONE {
                lookahead = lookahead.min(cd + lat);
            } else {
                lookahead = lookahead.min(sw + st + lat + 1);
            }
        }
        let lookahead = lookahead.clamp(1, self.wheel_mask);
        let mut routers = vec![0; ranks];
        for &k in &rank_of {
            routers[k as usize] += 1;
        }
        let own: Vec<usize> = (0..self.net.num_routers).filter(|&r| rank_of[r] == me as u32).collect();
        let threads = self.cfg.worker_threads().min(own.len().max(1));
        for (i, &r) in own.iter().enumerate() {
            self.part_of[r] = (i * threads / own.len()) as u32;
        }
        self.pool = None;
        self.workers = (0..threads).map(|_| Worker::default()).collect();
        self.pool = (threads > 1).then(|| Pool::new(threads - 1));
        self.dist = Some(Dist {
            link,
            me: me as u32,
            rank_of,
            lookahead,
            synced_to: self.now,
            mail: (0..ranks).map(|_| Mail::default()).collect(),
            all: Broadcast { last_moved: u64::MAX, ..Broadcast::default() },
            report: PartitionReport {
                ranks,
                routers,
                cut_channels: cut,
                switch_channels,
                lookahead,
                exchanges: 0,
                bytes_sent: 0,
            },
        });
        Ok(())
    }

    /// The partition and mail figures of a partitioned run (None for a one-process run).
    pub fn partition_report(&self) -> Option<PartitionReport> {
        self.dist.as_ref().map(|d| d.report.clone())
    }

    /// Bring every rank's effects up to now, so the flit counters are the whole run's; a
    /// collective in a partitioned run (every rank calls it on the same cycle), nothing otherwise.
    pub fn sync(&mut self) {
        if self.dist.as_ref().is_some_and(|d| d.synced_to < self.now) {
            self.exchange();
        }
    }

    /// Swap the window's mail with every rank and apply what came in.
    fn exchange(&mut self) {
        let Some(mut d) = self.dist.take() else { return };
        let me = d.me as usize;
        let letters: Vec<Vec<u8>> =
            (0..d.mail.len()).map(|k| if k == me { Vec::new() } else { partition::seal(&d.all, &d.mail[k]) }).collect();
        d.report.exchanges += 1;
        d.report.bytes_sent += letters.iter().map(|l| l.len() as u64).sum::<u64>();
        let mut first_error = d.all.error.take();
        for m in &mut d.mail {
            m.pushes.clear();
            m.credits.clear();
        }
        d.all.deliveries.clear();
        d.all.credits.clear();
        d.all.last_moved = u64::MAX;
        d.all.ejected = 0;
        // Alone, there is no one to write to.
        let swapped = if d.mail.len() == 1 { Ok(vec![Vec::new()]) } else { d.link.exchange(letters) };
        match swapped {
            Err(e) => self.error = self.error.take().or(Some(e)),
            Ok(got) => {
                for (k, bytes) in got.iter().enumerate().filter(|&(k, _)| k != me) {
                    match partition::open(bytes, k) {
                        Err(e) => self.error = self.error.take().or(Some(e)),
                        Ok(letter) => {
                            self.take_letter(&letter);
                            if let Some((key, text)) = letter.error {
                                if first_error.as_ref().map_or(true, |(at, _)| key < *at) {
                                    first_error = Some((key, text));
                                }
                            }
                        }
                    }
                }
            }
        }
        if let Some((_, text)) = first_error {
            self.error = self.error.take().or(Some(NetweaveError::Routing(text)));
        }
        d.synced_to = self.now;
        self.dist = Some(d);
    }

    /// Apply another rank's letter: its flits, credits, tails and counters.
    fn take_letter(&mut self, l: &partition::Letter) {
        if l.last_moved != u64::MAX {
            self.last_progress = self.last_progress.max(l.last_moved);
        }
        self.flits_in_network -= l.ejected;
        self.ejected_flits += l.ejected;
        for r in l.deliveries.chunks_exact(partition::DELIVERY_BYTES) {
            let (at, packet, hops) = partition::read_delivery(r);
            self.delivery_wheel[(at & self.wheel_mask) as usize].push((packet, hops));
        }
        for r in
            l.credits.chunks_exact(partition::CREDIT_BYTES).chain(l.own_credits.chunks_exact(partition::CREDIT_BYTES))
        {
            let (ovc, at) = partition::read_credit(r);
            self.credit_wheel[(at & self.wheel_mask) as usize].push(ovc);
        }
        for r in l.pushes.chunks_exact(partition::PUSH_BYTES) {
            let (ovc, flit) = partition::read_push(r);
            self.push_flit(ovc as usize, flit);
        }
    }

    /// Hosts start and continue their packets, in host order. A workload that wakes its hosts
    /// ([`Workload::wakes_hosts`]) has only the awake ones visited: a host sleeps once its
    /// slots are empty and it has no work, which is all a visit would find.
    fn inject<W: Workload>(&mut self, w: &mut W, now: u64) {
        if !w.wakes_hosts() {
            for h in 0..self.net.num_hosts {
                self.inject_host(w, h, now);
                if self.error.is_some() {
                    return;
                }
            }
            return;
        }
        for word in 0..self.awake.len() {
            let mut bits = self.awake[word];
            while bits != 0 {
                let h = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if !self.inject_host(w, h, now) {
                    self.awake[word] &= !(1 << (h % 64));
                }
                if self.error.is_some() {
                    return;
                }
            }
        }
    }

    /// Host `h` wakes: it has work for [`inject`](Self::inject) to find.
    pub fn wake_host(&mut self, h: usize) {
        self.awake[h / 64] |= 1 << (h % 64);
    }

    /// Host `h`'s injection this cycle; whether it still has a packet under way or work.
    fn inject_host<W: Workload>(&mut self, w: &mut W, h: usize, now: u64) -> bool {
        let v = self.net.vcs;
        {
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
                let ch = self.net.host_inj[s] as usize;
                if self.hosts.ovc[s] == NONE {
                    let cls = self.vc_class_of(pk.src, pk.dst);
                    if cls >= self.net.routing_vcs {
                        self.error = Some(NetweaveError::Routing(format!(
                            "injection VC {cls} of pair {} -> {} is outside the routing's {} VCs",
                            pk.src, pk.dst, self.net.routing_vcs
                        )));
                        return false;
                    }
                    // BookSim's torus routing lets a packet enter on any VC.
                    let (base, width) = if self.booksim_torus.is_some() {
                        (ch * v, v)
                    } else {
                        (ch * v + cls * self.net.class_width, self.net.class_width)
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
                let arrive = (now + self.net.ch_lat[ch] as u64) as u32;
                // Every rank injects alike; the flit lands only where its router is stepped.
                if self.owns(self.net.ch_dst_router[ch]) {
                    let tail = seq + 1 == pk.size;
                    self.push_flit(ovc, Flit { arrive, packet: p, seq, hops: 0, class: 0, tail });
                }
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
        self.host_slots(h).any(|s| self.hosts.packet[s] != NONE) || w.host_has_work(h)
    }

    /// Blocked input VCs — switch-to-switch channels first (they show the cycle; host links
    /// only back up), then by VC — as (order, text), the first `limit`, and how many there are.
    fn blocked_here(&self, limit: usize) -> (usize, Vec<(u64, String)>) {
        let v = self.net.vcs;
        let chan = |b: usize| self.net.ip_chan[b / v] as usize;
        let mut found: Vec<(u64, usize)> = (0..self.len.len())
            .filter(|&b| self.len[b] > 0)
            .map(|b| ((u64::from(self.net.ch_src_router[chan(b)] == NONE) << 63) | b as u64, b))
            .collect();
        let count = found.len();
        found.sort_unstable();
        found.truncate(limit);
        let parts = found
            .into_iter()
            .map(|(order, b)| {
                let (a, z) = self.topo.channel_ends(self.net.ch_topo[chan(b)]);
                let text = format!(
                    "{}->{} vc {} ({} flits)",
                    self.topo.label(a.node),
                    self.topo.label(z.node),
                    b % v,
                    self.len[b]
                );
                (order, text)
            })
            .collect();
        (count, parts)
    }

    /// One line naming the blocked channels (for the deadlock report); in a partitioned run a
    /// collective that gathers every rank's.
    pub fn blocked_channels(&mut self, limit: usize) -> Result<(usize, String)> {
        let (mut count, mut parts) = self.blocked_here(limit);
        if let Some(d) = self.dist.as_mut() {
            let mut mine = (count as u64).to_le_bytes().to_vec();
            for (order, text) in &parts {
                mine.extend_from_slice(&order.to_le_bytes());
                mine.extend_from_slice(&(text.len() as u32).to_le_bytes());
                mine.extend_from_slice(text.as_bytes());
            }
            let ranks = d.mail.len();
            for (k, theirs) in d.link.exchange(vec![mine; ranks])?.into_iter().enumerate() {
                if k != d.me as usize {
                    let (c, p) = read_blocked(&theirs).ok_or_else(|| {
                        NetweaveError::InvalidParameter(format!("malformed deadlock report from rank {k}"))
                    })?;
                    count += c;
                    parts.extend(p);
                }
            }
            parts.sort();
            parts.truncate(limit);
        }
        Ok((count, parts.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(", ")))
    }

    /// The cycle the watchdog fired at — `deadlock_cycles` after the last flit moved — once
    /// that is known: every cycle in a one-process run, at exchanges in a partitioned one
    /// (where nothing moving since means nothing changed, so the verdict is the same).
    pub fn watchdog_fired(&self) -> Option<u64> {
        if self.dist.as_ref().is_some_and(|d| d.synced_to < self.now) {
            return None;
        }
        let limit = self.cfg.deadlock_cycles as u64;
        (self.now - self.last_progress > limit).then_some(self.last_progress + limit + 1)
    }

    /// Check the watchdog; an error if nothing moved for `deadlock_cycles` with flits in flight.
    pub fn check_deadlock(&mut self) -> Result<()> {
        if let Some(cycle) = self.watchdog_fired().filter(|_| self.flits_in_network > 0) {
            let (count, list) = self.blocked_channels(6)?;
            return Err(NetweaveError::Routing(format!(
                "deadlock: no flit moved for {} cycles (cycle {cycle}) with {} flits in flight; {count} blocked VCs: {list}",
                self.cfg.deadlock_cycles, self.flits_in_network
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
