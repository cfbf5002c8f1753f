//! One router's step — route computation, VC and switch allocation, switch traversal — over
//! state shared by the threads that step routers side by side.
//!
//! Each router reads and writes only its own input VCs, input and output ports and output VCs;
//! what it does to other routers (flits into their buffers, credits back upstream, tails to
//! hosts) goes into its worker's [`Outbox`], which the engine applies after every router has
//! stepped — or, when one worker steps them all in one process, straight into the engine's
//! buffers and [`Wheels`], as none of it is due before the next cycle. Nothing a router acts
//! on can change during a cycle (a flit that lands mid-cycle has not arrived), so however the
//! routers are split among threads, and in whatever order they step, a cycle has the same
//! outcome.

use std::cell::UnsafeCell;
use std::ops::{Index, IndexMut};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::config::SimConfig;
use super::flit::{next_ptr, ring_slot, rr_distance, Flit, Packet, ACTIVE, IDLE, NONE, VC_ALLOC};
use super::network::{BookSimTorus, SimNetwork, ANY_CLASS};
use crate::error::NetweaveError;
use crate::routing::{RoutingTable, NO_PORT};
use crate::topology::Topology;

/// A vector the router workers share: each worker touches only the elements of its own
/// routers (see the module doc), which is what makes handing out `&mut` to elements sound.
///
/// Indexing is unchecked in release builds (checked under `debug_assertions`, as in every
/// Rust test): each index derives from the [`SimNetwork`]'s tables, built and checked once, from
/// VC numbers below `vcs`, or from a route the step has checked against the router's port
/// groups. The checks were 9 % of the instructions of a flit move and 7 % of its time.
pub(crate) struct Shared<T> {
    ptr: *mut T,
    len: usize,
}

impl<T> Shared<T> {
    pub(crate) fn of(v: &mut [T]) -> Shared<T> {
        Shared { ptr: v.as_mut_ptr(), len: v.len() }
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shared<T> {}
// SAFETY: workers access disjoint elements (each its own routers'), and the vectors outlive the
// router phase, which the engine runs to completion before touching them again.
unsafe impl<T: Send> Send for Shared<T> {}
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Index<usize> for Shared<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        debug_assert!(i < self.len);
        // SAFETY: in bounds (see the type's doc); no other worker writes this element during
        // the router phase.
        unsafe { &*self.ptr.add(i) }
    }
}

impl<T> IndexMut<usize> for Shared<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        debug_assert!(i < self.len);
        // SAFETY: in bounds (see the type's doc); only the worker stepping this element's
        // router touches it.
        unsafe { &mut *self.ptr.add(i) }
    }
}

/// What a worker's router steps leave for the engine to apply once every router has stepped.
#[derive(Default)]
pub(crate) struct Outbox {
    /// Flits for downstream buffers: (output VC `channel·V + vc`, flit).
    pub pushes: Vec<(u32, Flit)>,
    /// Credits: (output VC, cycle it is usable).
    pub credits: Vec<(u32, u64)>,
    /// Tails reaching their host: (cycle the host retires the packet, packet, routers crossed).
    pub deliveries: Vec<(u64, u32, u16)>,
    /// Routers that still hold flits after their step.
    pub busy: Vec<u32>,
    pub moved: u64,
    pub ejected: u64,
    /// The first error, with the router that ran into it.
    pub error: Option<(usize, NetweaveError)>,
}

impl Outbox {
    pub(crate) fn clear(&mut self) {
        self.pushes.clear();
        self.credits.clear();
        self.deliveries.clear();
        self.busy.clear();
        self.moved = 0;
        self.ejected = 0;
        self.error = None;
    }
}

/// The engine's wheels, for a router step to land its effects in at once. Used when one
/// worker steps every router of a one-process run: nothing else runs then, and a flit or
/// credit a step sends is due next cycle at the earliest (every delay and latency is at least
/// one cycle), so no router can see it this cycle, whichever order they step in.
#[derive(Clone, Copy)]
pub(crate) struct Wheels {
    pub wheel_mask: u64,
    pub credit_wheel: Shared<Vec<u32>>,
    /// A router bitset of `words` words per slot (the engine's `wake_wheel`).
    pub wake_wheel: Shared<u64>,
    pub words: usize,
    /// Routers to step next cycle (the engine's `next_active`).
    pub next_active: Shared<u64>,
    pub delivery_wheel: Shared<Vec<(u32, u16)>>,
}

/// Write `flit` at the back of the input buffer fed by output VC `ovc` (channel·V + vc) and
/// mark the buffer non-empty; returns the router it is in. Shared by the engine (applying
/// outboxes, injecting) and by router steps that land their effects at once.
#[inline]
pub(crate) fn land_flit(net: &SimNetwork, s: &mut RouterState, ovc: usize, flit: Flit) -> u32 {
    // Where the flit goes is kept per output VC, so the store does not wait for the buffer's
    // head and length.
    let at = s.write_at[ovc] as usize;
    s.flits[at] = flit;
    let (ch, vc) = net.split_by_vc(ovc as u32);
    let to = net.into[ch];
    let b = to.first_vc as usize + vc;
    s.write_at[ovc] = if at + 1 == (b + 1) * net.buf { b * net.buf } else { at + 1 } as u32;
    s.len[b] += 1;
    let bit = to.first_bit as usize + vc;
    s.nonempty[bit / 64] |= 1 << (bit % 64);
    to.router
}

/// One worker: the routers it steps this cycle, its scratch and its outbox.
#[derive(Default)]
pub(crate) struct Worker {
    pub routers: Vec<u32>,
    pub out: Outbox,
    scratch: Scratch,
}

#[derive(Default)]
struct Scratch {
    touched: Vec<u32>,
    sa_reqs: Vec<(u32, u16, u32)>,
    accepted_ips: Vec<u32>,
    va_scratch: Vec<(u64, u32)>,
    va_touched: Vec<u32>,
    scan: Vec<u32>,
}

/// Everything a router step reads but never writes.
pub(crate) struct Fixed<'a> {
    pub net: &'a SimNetwork,
    pub topo: &'a Topology,
    pub routes: &'a RoutingTable,
    pub cfg: &'a SimConfig,
    pub booksim_torus: Option<&'a BookSimTorus>,
    pub packets: &'a [Packet],
    pub vct: bool,
    pub age: bool,
    pub hold: bool,
    pub islip: bool,
    pub vc_islip: bool,
    pub per_destination: bool,
}

/// The router-owned state, shared among the workers.
#[derive(Clone, Copy)]
pub(crate) struct RouterState {
    pub flits: Shared<Flit>,
    pub head: Shared<u16>,
    pub len: Shared<u16>,
    pub state: Shared<u8>,
    pub ready: Shared<u64>,
    pub route_grp: Shared<u32>,
    pub route_cls: Shared<u16>,
    pub out_op: Shared<u32>,
    pub out_ovc: Shared<u32>,
    pub owner: Shared<u32>,
    pub credits: Shared<u16>,
    pub va_ptr: Shared<u32>,
    pub sa_in_ptr: Shared<u16>,
    pub sa_out_ptr: Shared<u32>,
    pub ovc_rr: Shared<u16>,
    pub in_hold: Shared<u16>,
    pub out_hold: Shared<u32>,
    pub best_ip: Shared<u32>,
    pub best_key: Shared<u64>,
    pub best_vc: Shared<u16>,
    pub acc_ptr: Shared<u32>,
    pub acc_op: Shared<u32>,
    pub acc_key: Shared<u64>,
    pub va_grant_ptr: Shared<u32>,
    pub va_accept_ptr: Shared<u32>,
    pub va_grant: Shared<u32>,
    pub va_grant_dist: Shared<u32>,
    pub nonempty: Shared<u64>,
    /// Per output VC, the flit slot its next flit lands in (the back of the buffer it feeds).
    pub write_at: Shared<u32>,
    /// Where effects land at once, instead of the worker's outbox (see [`Wheels`]).
    pub wheels: Option<Wheels>,
}

/// Step every router of `worker` in cycle `now`; effects on other routers go to its outbox.
pub(crate) fn step_routers(fixed: &Fixed, state: RouterState, worker: &mut Worker, now: u64) {
    worker.out.clear();
    let mut ctx = RouterCtx::new(fixed, state, std::mem::take(&mut worker.scratch), std::mem::take(&mut worker.out));
    for &r in &worker.routers {
        let r = r as usize;
        ctx.router_step(r, now);
        if let Some(e) = ctx.error.take() {
            if ctx.out.error.as_ref().map_or(true, |(at, _)| r < *at) {
                ctx.out.error = Some((r, e));
            }
        }
        // A router whose flits are all still on their links sleeps until the first arrives
        // (the engine wakes it then); holding the switch needs every cycle's step, as it
        // releases a hold whose next flit is not there.
        let busy = if ctx.hold { ctx.holds_flits(r) } else { ctx.holds_arrived_flit(now + 1) };
        if busy {
            match ctx.wheels.as_mut() {
                Some(w) => w.next_active[r / 64] |= 1 << (r % 64),
                None => ctx.out.busy.push(r as u32),
            }
        }
    }
    worker.scratch = ctx.scratch;
    worker.out = ctx.out;
}

/// A router step's view: the fixed inputs, the shared router state and a worker's scratch,
/// under the names the step's code uses.
struct RouterCtx<'a> {
    net: &'a SimNetwork,
    topo: &'a Topology,
    routes: &'a RoutingTable,
    cfg: &'a SimConfig,
    booksim_torus: Option<&'a BookSimTorus>,
    packets: &'a [Packet],
    vct: bool,
    age: bool,
    hold: bool,
    islip: bool,
    vc_islip: bool,
    per_destination: bool,
    /// iSLIP's switch requests are gathered in the route/VC pass when nothing between there
    /// and switch allocation can change them: no held connections to release, and a VC that
    /// wins VC allocation now is not ready to send before next cycle.
    collect_requests: bool,
    /// Where effects land at once, instead of `out` (see [`Wheels`]).
    wheels: Option<Wheels>,
    /// The shared router arrays (their `wheels` moved to the field above).
    s: RouterState,
    scratch: Scratch,
    out: Outbox,
    error: Option<NetweaveError>,
}

impl<'a> RouterCtx<'a> {
    fn new(f: &Fixed<'a>, s: RouterState, scratch: Scratch, out: Outbox) -> RouterCtx<'a> {
        RouterCtx {
            net: f.net,
            topo: f.topo,
            routes: f.routes,
            cfg: f.cfg,
            booksim_torus: f.booksim_torus,
            packets: f.packets,
            vct: f.vct,
            age: f.age,
            hold: f.hold,
            islip: f.islip,
            vc_islip: f.vc_islip,
            per_destination: f.per_destination,
            collect_requests: f.islip && !f.hold && f.cfg.vc_alloc_delay > 0,
            wheels: s.wheels,
            s: RouterState { wheels: None, ..s },
            scratch,
            out,
            error: None,
        }
    }

    #[inline]
    fn front(&self, b: usize) -> Flit {
        self.s.flits[b * self.net.buf + self.s.head[b] as usize]
    }

    /// Whether router `r` has a flit in any of its buffers.
    fn holds_flits(&self, r: usize) -> bool {
        (self.net.ne_word[r] as usize..self.net.ne_word[r + 1] as usize).any(|w| self.s.nonempty[w] != 0)
    }

    /// Whether a buffer this step found non-empty still holds a flit that is there by `t`
    /// (a step adds no flit to its own router, so those are all the buffers with flits).
    fn holds_arrived_flit(&self, t: u64) -> bool {
        self.scratch.scan.iter().any(|&b| self.s.len[b as usize] > 0 && self.front(b as usize).arrived(t))
    }

    fn priority(&self, packet: u32, rr_distance: u32) -> u64 {
        if self.age {
            (self.packets[packet as usize].ctime << 16) | rr_distance as u64
        } else {
            rr_distance as u64
        }
    }

    fn router_step(&mut self, r: usize, now: u64) {
        let v = self.net.vcs;
        let ip_lo = self.net.in_base[r] as usize;
        let ip_hi = self.net.in_base[r + 1] as usize;

        // Route computation and VC allocation requests.
        self.scratch.va_scratch.clear();
        let n_ivc = ((ip_hi - ip_lo) * v) as u32;
        nonempty_inputs(self.net, &self.s.nonempty, r, &mut self.scratch.scan);
        let collect = self.collect_requests;
        if let [b] = self.scratch.scan[..] {
            // One buffer with flits, already holding an output VC (the body of a packet
            // streaming through, most steps below saturation): its request, if it can send,
            // is the only one, and iSLIP grants it (as below, without the bookkeeping).
            let b = b as usize;
            if collect && self.s.state[b] == ACTIVE {
                if self.can_send(b, now) {
                    let (ip, vc) = self.split_by_vc(b as u32);
                    self.grant(r, ip, vc, self.s.out_op[b] as usize, now);
                }
                return;
            }
        }
        self.scratch.sa_reqs.clear();
        for i in 0..self.scratch.scan.len() {
            let b = self.scratch.scan[i] as usize;
            let (ip, vc) = self.split_by_vc(b as u32);
            {
                match self.s.state[b] {
                    IDLE => {
                        let f = self.front(b);
                        if !f.arrived(now) {
                            continue;
                        }
                        if f.seq != 0 {
                            self.error = Some(NetweaveError::Routing("internal: body flit at an idle VC".into()));
                            return;
                        }
                        if !self.route(r, ip, b, f) {
                            return;
                        }
                        self.s.state[b] = VC_ALLOC;
                        self.s.ready[b] = now + self.cfg.routing_delay as u64;
                        if self.cfg.routing_delay == 0 {
                            let local = ((ip - ip_lo) * v + vc) as u32;
                            let dist = rr_distance(local, self.s.va_ptr[r], n_ivc);
                            self.scratch.va_scratch.push((self.priority(f.packet, dist), b as u32));
                        }
                    }
                    VC_ALLOC if self.s.ready[b] <= now => {
                        let local = ((ip - ip_lo) * v + vc) as u32;
                        let dist = rr_distance(local, self.s.va_ptr[r], n_ivc);
                        let p = self.front(b).packet;
                        self.scratch.va_scratch.push((self.priority(p, dist), b as u32));
                    }
                    ACTIVE if collect && self.can_send(b, now) => {
                        self.scratch.sa_reqs.push((ip as u32, vc as u16, self.s.out_op[b]));
                    }
                    _ => {}
                }
            }
        }
        if !self.scratch.va_scratch.is_empty() && self.vc_islip {
            self.islip_vc_allocate(r, now);
        } else if !self.scratch.va_scratch.is_empty() {
            let mut reqs = std::mem::take(&mut self.scratch.va_scratch);
            reqs.sort_unstable();
            let mut first_grant = None;
            for &(_, b) in &reqs {
                let b = b as usize;
                let g = self.s.route_grp[b] as usize;
                let start = self.net.grp_start[g] as usize;
                let glen = self.net.grp_len[g] as usize;
                let (cls, w) = match self.s.route_cls[b] {
                    ANY_CLASS => (0, v),
                    c => (c as usize, self.net.class_width),
                };
                let mut granted = false;
                // The port of a group to try first turns with the channel (as it always has).
                let turn = self.net.ip_chan[b / v] as usize * v + b % v;
                'search: for k in 0..glen {
                    let op = start + (k + turn) % glen;
                    let ch = self.net.op_chan[op] as usize;
                    // Round-robin over the output's VCs, so consecutive packets alternate.
                    let first = self.s.ovc_rr[op] as usize;
                    for j in 0..w {
                        let ovc = ch * v + cls * w + (first + j) % w;
                        if self.s.owner[ovc] == NONE {
                            self.s.ovc_rr[op] = ((ovc % v - cls * w + 1) % w) as u16;
                            self.s.owner[ovc] = b as u32;
                            self.s.out_op[b] = op as u32;
                            self.s.out_ovc[b] = ovc as u32;
                            self.s.state[b] = ACTIVE;
                            self.s.ready[b] = now + self.cfg.vc_alloc_delay as u64;
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
                self.s.va_ptr[r] = next_ptr(local, n_ivc);
            }
            self.scratch.va_scratch = reqs;
        }

        // Switch allocation: each input picks one VC, each output one input.
        let n_in = (ip_hi - ip_lo) as u32;
        if self.hold {
            // As BookSim: a held connection is kept only while its VC can send this cycle;
            // otherwise it is released, so a stalled packet never blocks the other VCs.
            for ip in ip_lo..ip_hi {
                let held = self.s.in_hold[ip];
                if held == u16::MAX {
                    continue;
                }
                let b = ip * v + held as usize;
                if !self.can_send(b, now) {
                    let op = self.s.out_op[b];
                    if op != NONE && self.s.out_hold[op as usize] == ip as u32 {
                        self.s.out_hold[op as usize] = NONE;
                    }
                    self.s.in_hold[ip] = u16::MAX;
                }
            }
        }
        if self.islip {
            self.islip_allocate(r, now, collect);
            return;
        }
        for ip in ip_lo..ip_hi {
            let held = self.s.in_hold[ip];
            let mut pick: Option<(u64, u16)> = None;
            let start = self.s.sa_in_ptr[ip] as usize;
            for k in 0..v {
                let vc = (start + k) % v;
                if held != u16::MAX && held as usize != vc {
                    continue;
                }
                let b = ip * v + vc;
                if !self.can_send(b, now) {
                    continue;
                }
                let op = self.s.out_op[b] as usize;
                if self.hold && self.s.out_hold[op] != NONE && self.s.out_hold[op] != ip as u32 {
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
            let op = self.s.out_op[b] as usize;
            let local = (ip - ip_lo) as u32;
            let dist = rr_distance(local, self.s.sa_out_ptr[op], n_in);
            let key = self.priority(self.front(b).packet, dist);
            if self.request_output(op, ip, key) {
                self.s.best_vc[op] = vc;
            }
        }
        let touched = std::mem::take(&mut self.scratch.touched);
        for &op in &touched {
            let op = op as usize;
            let ip = self.s.best_ip[op] as usize;
            let vc = self.s.best_vc[op] as usize;
            self.s.best_ip[op] = NONE;
            self.s.best_key[op] = u64::MAX;
            self.s.sa_out_ptr[op] = (ip - ip_lo) as u32 + 1;
            self.s.sa_in_ptr[ip] = next_ptr(vc as u32, v as u32) as u16;
            self.traverse(r, ip, vc, op, now);
        }
        self.scratch.touched = touched;
        self.scratch.touched.clear();
    }

    #[inline]
    fn split_by_vc(&self, x: u32) -> (usize, usize) {
        self.net.split_by_vc(x)
    }

    /// The free output VCs input VC `b` may take: (global output port, first VC, VC count).
    #[inline]
    fn vc_candidates(&self, b: usize) -> (usize, usize, usize, usize) {
        let g = self.s.route_grp[b] as usize;
        let (cls, w) = match self.s.route_cls[b] {
            ANY_CLASS => (0, self.net.vcs),
            c => (c as usize, self.net.class_width),
        };
        (self.net.grp_start[g] as usize, self.net.grp_len[g] as usize, cls * w, w)
    }

    /// VC allocation by one iteration of iSLIP over input VCs × output VCs, as BookSim's
    /// default allocator: every waiting input VC requests every free output VC of its route;
    /// each output VC grants the requester next after its own pointer, each input VC accepts
    /// the grant next after its pointer, and only accepted grants move the pointers. Per-VC
    /// pointers matter under overload: with one VC per dateline class a router-wide pointer
    /// lets a busy input win the same output VC again and again.
    fn islip_vc_allocate(&mut self, r: usize, now: u64) {
        let v = self.net.vcs;
        let ip_lo = self.net.in_base[r] as usize;
        let op_lo = self.net.out_base[r] as usize;
        let n_ivc = ((self.net.in_base[r + 1] as usize - ip_lo) * v) as u32;
        let n_ovc = ((self.net.out_base[r + 1] as usize - op_lo) * v) as u32;
        let reqs = std::mem::take(&mut self.scratch.va_scratch);
        let local_in = |_: &Self, b: usize| (b - ip_lo * v) as u32;
        // Grant: each free output VC picks the requesting input VC nearest after its pointer.
        for &(_, b) in &reqs {
            let b = b as usize;
            let li = local_in(self, b);
            let (start, glen, first_vc, w) = self.vc_candidates(b);
            for op in start..start + glen {
                let ch = self.net.op_chan[op] as usize;
                for ovc in ch * v + first_vc..ch * v + first_vc + w {
                    if self.s.owner[ovc] != NONE {
                        continue;
                    }
                    let dist = rr_distance(li, self.s.va_grant_ptr[ovc], n_ivc);
                    if self.s.va_grant[ovc] == NONE {
                        self.scratch.va_touched.push(ovc as u32);
                    }
                    if dist < self.s.va_grant_dist[ovc] {
                        self.s.va_grant_dist[ovc] = dist;
                        self.s.va_grant[ovc] = b as u32;
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
                let ch = self.net.op_chan[op] as usize;
                for ovc in ch * v + first_vc..ch * v + first_vc + w {
                    if self.s.va_grant[ovc] != b as u32 {
                        continue;
                    }
                    let lo = ((op - op_lo) * v + ovc % v) as u32;
                    let dist = rr_distance(lo, self.s.va_accept_ptr[b], n_ovc);
                    if best.map_or(true, |(d, _, _)| dist < d) {
                        best = Some((dist, op, ovc));
                    }
                }
            }
            let Some((_, op, ovc)) = best else { continue };
            self.s.va_grant_ptr[ovc] = next_ptr(local_in(self, b), n_ivc);
            let ovc_vc = self.split_by_vc(ovc as u32).1;
            self.s.va_accept_ptr[b] = next_ptr(((op - op_lo) * v + ovc_vc) as u32, n_ovc);
            self.s.owner[ovc] = b as u32;
            self.s.out_op[b] = op as u32;
            self.s.out_ovc[b] = ovc as u32;
            self.s.state[b] = ACTIVE;
            self.s.ready[b] = now + self.cfg.vc_alloc_delay as u64;
        }
        for &ovc in &self.scratch.va_touched {
            self.s.va_grant[ovc as usize] = NONE;
            self.s.va_grant_dist[ovc as usize] = u32::MAX;
        }
        self.scratch.va_touched.clear();
        self.scratch.va_scratch = reqs;
    }

    /// Switch allocation by one iteration of iSLIP (BookSim's default): every ready VC
    /// requests its output; each output grants the requesting input next after its pointer,
    /// each input accepts the granting output next after its pointer, and only accepted
    /// grants move the pointers. With age arbitration the oldest packet wins both steps.
    fn islip_allocate(&mut self, r: usize, now: u64, collected: bool) {
        let v = self.net.vcs;
        let ip_lo = self.net.in_base[r] as usize;
        let ip_hi = self.net.in_base[r + 1] as usize;
        let op_lo = self.net.out_base[r] as usize;
        let n_in = (ip_hi - ip_lo) as u32;
        let n_out = (self.net.out_base[r + 1] as usize - op_lo) as u32;
        let mut reqs = std::mem::take(&mut self.scratch.sa_reqs);
        if !collected {
            reqs.clear();
        }
        // Only a non-empty VC can send; the scan is this router step's (lengths have not
        // changed since it was taken).
        for &bit in self.scratch.scan.iter().filter(|_| !collected) {
            let (ip, vc) = self.split_by_vc(bit);
            let held = self.s.in_hold[ip];
            {
                if held != u16::MAX && held as usize != vc {
                    continue;
                }
                let b = bit as usize;
                if !self.can_send(b, now) {
                    continue;
                }
                let op = self.s.out_op[b];
                if self.hold && self.s.out_hold[op as usize] != NONE && self.s.out_hold[op as usize] != ip as u32 {
                    continue;
                }
                reqs.push((ip as u32, vc as u16, op));
            }
        }
        if reqs.is_empty() {
            self.scratch.sa_reqs = reqs;
            return;
        }
        if without_conflicts(&reqs) {
            // Every input asks for a different output (most router steps below saturation):
            // each output grants its one request and each input accepts, whatever the pointers;
            // they move as in the general case below.
            for &(ip, vc, op) in &reqs {
                self.grant(r, ip as usize, vc as usize, op as usize, now);
            }
            self.scratch.sa_reqs = reqs;
            return;
        }
        // Grant.
        for &(ip, vc, op) in &reqs {
            let (ip, op) = (ip as usize, op as usize);
            let dist = rr_distance((ip - ip_lo) as u32, self.s.sa_out_ptr[op], n_in);
            let b = ip * v + vc as usize;
            let key = self.priority(self.front(b).packet, dist);
            self.request_output(op, ip, key);
        }
        // Accept.
        let mut accepted_ips = std::mem::take(&mut self.scratch.accepted_ips);
        accepted_ips.clear();
        for &op in &self.scratch.touched {
            let op = op as usize;
            let ip = self.s.best_ip[op] as usize;
            let dist = rr_distance((op - op_lo) as u32, self.s.acc_ptr[ip], n_out);
            let key = if self.age { (self.s.best_key[op] & !0xffff) | dist as u64 } else { dist as u64 };
            if self.s.acc_op[ip] == NONE {
                accepted_ips.push(ip as u32);
            }
            if key < self.s.acc_key[ip] {
                self.s.acc_key[ip] = key;
                self.s.acc_op[ip] = op as u32;
            }
        }
        for &op in &self.scratch.touched {
            self.s.best_ip[op as usize] = NONE;
            self.s.best_key[op as usize] = u64::MAX;
        }
        self.scratch.touched.clear();
        // The accepted input's VC for that output, round-robin (or oldest), then traverse.
        for &ip in &accepted_ips {
            let ip = ip as usize;
            let op = self.s.acc_op[ip];
            self.s.acc_op[ip] = NONE;
            self.s.acc_key[ip] = u64::MAX;
            let start = self.s.sa_in_ptr[ip] as usize;
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
            self.s.sa_out_ptr[op] = (ip - ip_lo) as u32 + 1;
            self.s.acc_ptr[ip] = (op - op_lo) as u32 + 1;
            self.s.sa_in_ptr[ip] = next_ptr(vc as u32, v as u32) as u16;
            self.traverse(r, ip, vc as usize, op, now);
        }
        self.scratch.accepted_ips = accepted_ips;
        self.scratch.sa_reqs = reqs;
    }

    /// iSLIP's outcome for a request no other request competes with: output `op` grants input
    /// `ip`, which accepts; both pointers and the input's VC pointer move past the winners, and
    /// the flit crosses.
    #[inline]
    fn grant(&mut self, r: usize, ip: usize, vc: usize, op: usize, now: u64) {
        let ip_lo = self.net.in_base[r] as usize;
        let op_lo = self.net.out_base[r] as usize;
        self.s.sa_out_ptr[op] = (ip - ip_lo) as u32 + 1;
        self.s.acc_ptr[ip] = (op - op_lo) as u32 + 1;
        self.s.sa_in_ptr[ip] = next_ptr(vc as u32, self.net.vcs as u32) as u16;
        self.traverse(r, ip, vc, op, now);
    }

    /// Input `ip` asks output `op` with priority `key` (lower wins); true if it leads so far.
    /// The output's first request this step puts it on the `touched` list to be reset.
    #[inline]
    fn request_output(&mut self, op: usize, ip: usize, key: u64) -> bool {
        if self.s.best_ip[op] == NONE {
            self.scratch.touched.push(op as u32);
        }
        if key < self.s.best_key[op] {
            self.s.best_key[op] = key;
            self.s.best_ip[op] = ip as u32;
            true
        } else {
            false
        }
    }

    /// Whether input VC `b` has a flit that may cross the switch now: allocated, arrived,
    /// past the VC-allocation delay, and with credit downstream (a whole packet's for VCT).
    #[inline]
    fn can_send(&self, b: usize, now: u64) -> bool {
        if self.s.state[b] != ACTIVE || self.s.len[b] == 0 {
            return false;
        }
        let f = self.front(b);
        if !f.arrived(now) || (f.seq == 0 && self.s.ready[b] > now) {
            return false;
        }
        let need = if self.vct && f.seq == 0 { self.packets[f.packet as usize].size } else { 1 };
        self.s.credits[self.s.out_ovc[b] as usize] >= need
    }

    /// Route the head flit of input VC `b`: output port group and VC class. False on error.
    fn route(&mut self, r: usize, ip: usize, b: usize, head: Flit) -> bool {
        let packet = head.packet;
        let pk = self.packets[packet as usize];
        let in_port = self.net.ip_topo_port[ip];
        let (port, forced_cls) = if let Some(bt) = self.booksim_torus {
            let (p, c) = bt.route(self.cfg.seed, r, in_port, pk.dst, pk.uid, head.class);
            (p, Some(c))
        } else {
            (self.routes.out_port(r, pk.dst as usize), None)
        };
        let node = self.topo.switches()[r];
        let g = self.net.grp_base[r] as usize + port as usize;
        if port == NO_PORT || g >= self.net.grp_base[r + 1] as usize || self.net.grp_len[g] == 0 {
            let dst = self.topo.hosts()[pk.dst as usize];
            self.error = Some(NetweaveError::Routing(format!(
                "switch {} has no route to {} (port {port})",
                self.topo.label(node),
                self.topo.label(dst)
            )));
            return false;
        }
        if self.per_destination {
            self.s.route_grp[b] = g as u32;
            self.s.route_cls[b] = pk.dst as u16;
            return true;
        }
        if let Some(cls) = forced_cls {
            self.s.route_grp[b] = g as u32;
            self.s.route_cls[b] = cls;
            return true;
        }
        let cls_in = (b % self.net.vcs) / self.net.class_width;
        let cls = self.routes.vc_policy().change(r, in_port, port).apply(cls_in as u8) as usize;
        if cls >= self.net.routing_vcs {
            self.error = Some(NetweaveError::Routing(format!(
                "switch {} moves a packet to VC {cls}, beyond the routing's {} VCs",
                self.topo.label(node),
                self.net.routing_vcs
            )));
            return false;
        }
        self.s.route_grp[b] = g as u32;
        self.s.route_cls[b] = cls as u16;
        true
    }

    /// Move the front flit of input VC (`ip`, `vc`) through output port `op`.
    fn traverse(&mut self, r: usize, ip: usize, vc: usize, op: usize, now: u64) {
        let v = self.net.vcs;
        let in_ch = self.net.ip_chan[ip] as usize;
        let b = ip * v + vc;
        let cap = self.net.buf;
        let f = self.s.flits[b * cap + self.s.head[b] as usize];
        self.s.head[b] = ring_slot(self.s.head[b], 1, cap) as u16;
        self.s.len[b] -= 1;
        if self.s.len[b] == 0 {
            let bit = self.net.nonempty_bit(r, b);
            self.s.nonempty[bit / 64] &= !(1 << (bit % 64));
        }
        self.out.moved += 1;
        // The freed slot's credit goes back upstream, to the output VC that feeds this buffer.
        let back = now + (self.cfg.credit_delay + self.net.ch_lat[in_ch]) as u64;
        let credit = (in_ch * v + vc) as u32;
        match self.wheels.as_mut() {
            Some(w) => w.credit_wheel[(back & w.wheel_mask) as usize].push(credit),
            None => self.out.credits.push((credit, back)),
        }

        let tail = f.tail;
        let hops = f.hops + 1;
        let out_ch = self.net.op_chan[op] as usize;
        let ovc = self.s.out_ovc[b] as usize;
        let arrive = now + (self.cfg.sw_alloc_delay + self.cfg.st_final_delay) as u64 + self.net.ch_lat[out_ch] as u64;
        if self.net.ch_dst_router[out_ch] == NONE {
            self.out.ejected += 1;
            if tail {
                // The host retires the tail one cycle after it arrives.
                match self.wheels.as_mut() {
                    Some(w) => w.delivery_wheel[((arrive + 1) & w.wheel_mask) as usize].push((f.packet, hops)),
                    None => self.out.deliveries.push((arrive + 1, f.packet, hops)),
                }
            }
        } else {
            self.s.credits[ovc] -= 1;
            // A head carries the class its packet keeps in this dimension (BookSim's torus).
            let class = self.s.route_cls[b] as u8;
            let flit = Flit { arrive: arrive as u32, hops, class, ..f };
            match self.wheels.as_mut() {
                Some(w) => {
                    let to = land_flit(self.net, &mut self.s, ovc, flit);
                    let to = to as usize;
                    if self.hold {
                        w.next_active[to / 64] |= 1 << (to % 64);
                    } else {
                        w.wake_wheel[(arrive & w.wheel_mask) as usize * w.words + to / 64] |= 1 << (to % 64);
                    }
                }
                None => self.out.pushes.push((ovc as u32, flit)),
            }
        }
        if self.hold {
            self.s.out_hold[op] = if tail { NONE } else { ip as u32 };
            self.s.in_hold[ip] = if tail { u16::MAX } else { vc as u16 };
        }
        if tail {
            self.s.owner[ovc] = NONE;
            self.s.state[b] = IDLE;
            self.s.out_op[b] = NONE;
            self.s.out_ovc[b] = NONE;
        }
    }
}

/// Router `r`'s non-empty input VCs (`ip·V + vc`), ascending, into `out`.
fn nonempty_inputs(net: &SimNetwork, nonempty: &Shared<u64>, r: usize, out: &mut Vec<u32>) {
    out.clear();
    let first = net.in_base[r] as usize * net.vcs;
    let (lo, hi) = (net.ne_word[r] as usize, net.ne_word[r + 1] as usize);
    for word in lo..hi {
        let mut bits = nonempty[word];
        let base = first + (word - lo) * 64;
        while bits != 0 {
            out.push((base + bits.trailing_zeros() as usize) as u32);
            bits &= bits - 1;
        }
    }
}

/// Whether switch requests (input, VC, output) come from different inputs and go to different
/// outputs, so that iSLIP grants and accepts them all.
#[inline]
fn without_conflicts(reqs: &[(u32, u16, u32)]) -> bool {
    reqs.iter().enumerate().all(|(i, &(ip, _, op))| reqs[..i].iter().all(|&(ip2, _, op2)| ip2 != ip && op2 != op))
}

/// Helper threads that step their workers' routers every cycle. A cycle lasts microseconds, too
/// short to put threads to sleep and wake them (in a VM a wake-up alone costs tens of them), so
/// helpers spin on an epoch counter, yielding once they have waited long, and the stepping
/// thread spins until they are done.
pub(crate) struct Pool {
    shared: Arc<PoolShared>,
    handles: Vec<JoinHandle<()>>,
}

struct PoolShared {
    /// Bumped by the stepping thread when `job` holds a cycle's work.
    epoch: AtomicU64,
    /// Helpers finished with the current epoch.
    done: AtomicUsize,
    stop: AtomicBool,
    /// A helper panicked (its message went to stderr); the stepping thread panics too.
    failed: AtomicBool,
    job: UnsafeCell<Option<Job>>,
}

/// One cycle's work, as pointers valid until every helper reports done.
#[derive(Clone, Copy)]
struct Job {
    fixed: *const Fixed<'static>,
    state: RouterState,
    workers: *mut Worker,
    now: u64,
}

// SAFETY: `job` is written only while no helper reads it (between a cycle's `done` count and the
// next epoch), and the pointers in it stay valid until the cycle's helpers are done.
unsafe impl Sync for PoolShared {}
unsafe impl Send for PoolShared {}

/// Spin this many times before yielding while waiting.
const SPINS: u32 = 1 << 14;

fn wait_until(mut ready: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !ready() {
        if spins < SPINS {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

impl Pool {
    /// Start `helpers` threads; helper `i` steps worker `i + 1` (the stepping thread takes 0).
    pub(crate) fn new(helpers: usize) -> Pool {
        let shared = Arc::new(PoolShared {
            epoch: AtomicU64::new(0),
            done: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            job: UnsafeCell::new(None),
        });
        let handles = (0..helpers)
            .map(|i| {
                let sh = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    loop {
                        wait_until(|| sh.epoch.load(Ordering::Acquire) != seen);
                        seen = sh.epoch.load(Ordering::Acquire);
                        if sh.stop.load(Ordering::Acquire) {
                            return;
                        }
                        // SAFETY: the stepping thread wrote the job before bumping the epoch and
                        // keeps everything it points to alive until this helper reports done.
                        let Some(job) = (unsafe { *sh.job.get() }) else { continue };
                        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                            step_routers(&*job.fixed, job.state, &mut *job.workers.add(i + 1), job.now)
                        }));
                        if ran.is_err() {
                            sh.failed.store(true, Ordering::Release);
                        }
                        sh.done.fetch_add(1, Ordering::Release);
                    }
                })
            })
            .collect();
        Pool { shared, handles }
    }

    /// Step every worker's routers, worker 0 on this thread, and return when all are done.
    pub(crate) fn run(&self, fixed: &Fixed, state: RouterState, workers: &mut [Worker], now: u64) {
        assert_eq!(workers.len(), self.handles.len() + 1);
        let sh = &self.shared;
        // SAFETY: no helper reads the job now (all reported done last cycle); the lifetime is
        // erased only for the duration of this call, which waits for every helper.
        unsafe {
            *sh.job.get() = Some(Job {
                fixed: std::ptr::from_ref(fixed).cast::<Fixed<'static>>(),
                state,
                workers: workers.as_mut_ptr(),
                now,
            });
        }
        sh.epoch.fetch_add(1, Ordering::Release);
        step_routers(fixed, state, &mut workers[0], now);
        let helpers = self.handles.len();
        wait_until(|| sh.done.load(Ordering::Acquire) == helpers);
        sh.done.store(0, Ordering::Relaxed);
        if sh.failed.load(Ordering::Acquire) {
            panic!("a flit-simulator thread panicked (its message is above)");
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.epoch.fetch_add(1, Ordering::Release);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
