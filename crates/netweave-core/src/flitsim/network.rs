//! The static network a simulation runs on: sim channels, router ports and port groups as
//! flat arrays ([`SimNetwork`]), and BookSim's own torus routing ([`BookSimTorus`]).

use super::config::SimConfig;
use super::flit::NONE;
use crate::error::Result;
use crate::routing::RoutingTable;
use crate::topology::structure::{Lattice, LatticeShape};
use crate::topology::{Port, Topology};

/// The static network: sim channels, router ports and port groups.
pub(crate) struct SimNetwork {
    pub num_routers: usize,
    pub num_hosts: usize,
    /// Physical VCs per channel.
    pub vcs: usize,
    /// Physical VCs per routing VC class.
    pub class_width: usize,
    pub routing_vcs: usize,
    pub buf: usize,
    pub ch_dst_router: Vec<u32>,
    pub ch_dst_host: Vec<u32>,
    pub ch_src_router: Vec<u32>,
    pub ch_src_host: Vec<u32>,
    pub ch_lat: Vec<u32>,
    /// Global input-port id at the receiving router ([`NONE`] for ejection channels).
    pub ch_ip: Vec<u32>,
    /// Global output-port id at the sending router ([`NONE`] for injection channels).
    pub ch_op: Vec<u32>,
    /// Topology channel a sim channel models (for reports).
    pub ch_topo: Vec<u32>,
    pub in_base: Vec<u32>,
    pub ip_chan: Vec<u32>,
    pub ip_topo_port: Vec<Port>,
    pub out_base: Vec<u32>,
    pub op_chan: Vec<u32>,
    /// `grp_base[r] + topo port` → global output ports `grp_start .. grp_start + grp_len`.
    pub grp_base: Vec<u32>,
    pub grp_start: Vec<u32>,
    pub grp_len: Vec<u8>,
    /// Injection channels of host `h`: `host_inj[host_inj_base[h]..host_inj_base[h+1]]`.
    pub host_inj_base: Vec<u32>,
    pub host_inj: Vec<u32>,
    /// log2 V when V is a power of two ([`split_by_vc`](Self::split_by_vc) shifts), else `u32::MAX`.
    pub vc_shift: u32,
    /// Router r's non-empty-VC bits are words `ne_word[r]..ne_word[r + 1]` of the bitset: whole
    /// words per router, so threads stepping different routers never write one word.
    pub ne_word: Vec<u32>,
    /// Where each channel's flits land, for the hot path of `Sim::push_flit`.
    pub into: Vec<Landing>,
}

/// The receiving end of a sim channel: its VC `vc` is input VC `first_vc + vc` of `router`,
/// whose non-empty bit is `first_bit + vc` (unused for ejection channels).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Landing {
    pub first_vc: u32,
    pub router: u32,
    pub first_bit: u32,
}

impl SimNetwork {
    pub fn new(topo: &Topology, routes: &RoutingTable, cfg: &SimConfig) -> Result<SimNetwork> {
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
        let torus = topo.lattice_with_hosts().is_ok_and(|l| l.shape == LatticeShape::Torus);
        let switch_lat = cfg.switch_latency(torus);
        let host_lat = cfg.host_channel_latency;
        let ports = cfg.injection_ports as usize;
        let num_routers = topo.num_switches();
        let num_hosts = topo.num_hosts();

        let mut f = SimNetwork {
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
            vc_shift: u32::MAX,
            ne_word: Vec::new(),
            into: Vec::new(),
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
        f.vc_shift = if vcs.is_power_of_two() { vcs.trailing_zeros() } else { u32::MAX };
        f.ne_word = Vec::with_capacity(num_routers + 1);
        f.ne_word.push(0);
        for r in 0..num_routers {
            let bits = (f.in_base[r + 1] - f.in_base[r]) as usize * vcs;
            f.ne_word.push(f.ne_word[r] + bits.div_ceil(64) as u32);
        }
        f.into = (0..f.num_channels())
            .map(|c| match f.ch_dst_router[c] {
                NONE => Landing::default(),
                r => {
                    let first_vc = f.ch_ip[c] * vcs as u32;
                    Landing { first_vc, router: r, first_bit: f.nonempty_bit(r as usize, first_vc as usize) as u32 }
                }
            })
            .collect();
        Ok(f)
    }

    /// `(x / V, x % V)`: an input VC `ip·V + vc` or an output VC `channel·V + vc` split into its
    /// two parts, by shifting when V is a power of two.
    #[inline]
    pub(crate) fn split_by_vc(&self, x: u32) -> (usize, usize) {
        if self.vc_shift != u32::MAX {
            ((x >> self.vc_shift) as usize, (x & ((1 << self.vc_shift) - 1)) as usize)
        } else {
            (x as usize / self.vcs, x as usize % self.vcs)
        }
    }

    /// The non-empty bitset's bit of router `r`'s input VC `b`.
    #[inline]
    pub(crate) fn nonempty_bit(&self, r: usize, b: usize) -> usize {
        self.ne_word[r] as usize * 64 + b - self.in_base[r] as usize * self.vcs
    }

    pub fn num_channels(&self) -> usize {
        self.ch_lat.len()
    }

    pub fn max_latency(&self) -> u32 {
        self.ch_lat.iter().copied().max().unwrap_or(1)
    }
}

/// BookSim's `dim_order` on a torus, which a destination table cannot express: a tie
/// (distance exactly k/2) picks its direction at random per packet, and the VC class is fixed
/// when the packet enters a dimension — class 1 if its coordinate must wrap from high to low
/// (BookSim's rule: current coordinate above the destination's), else class 0 — and kept to
/// the end of the dimension. Ejection may use any VC.
pub(crate) struct BookSimTorus {
    pub lattice: Lattice,
    /// Coordinates of every router, `coords[r * n + d]` ([`Lattice::coords`]).
    pub coords: Vec<u32>,
}

impl BookSimTorus {
    /// The decision at router `r` for the head of packet `uid` to host `dst`, arriving on
    /// `in_port` in class `class_in`: (topology port, VC class). A tie takes a direction by a
    /// coin that is a hash of the seed, the packet and the router, so it does not depend on the
    /// order routers are visited in.
    pub(crate) fn route(&self, seed: u64, r: usize, in_port: Port, dst: u32, uid: u64, class_in: u8) -> (Port, u16) {
        let lat = &self.lattice;
        let h = lat.hosts_per_router.max(1);
        let (dst_router, local) = (dst / h, dst % h);
        let n = lat.dims.len();
        let Some(d) = (0..n).find(|&d| self.coords[r * n + d] != self.coords[dst_router as usize * n + d]) else {
            return ((local + 1) as Port, ANY_CLASS);
        };
        if let Some((in_dim, from_plus)) = lat.dim_of_port(in_port).filter(|&(dim, _)| dim == d) {
            // Keep going the same way: a packet that came in on the + port (from the neighbour's
            // − side) leaves on the − port, and the other way round.
            return (lat.port(in_dim, !from_plus), class_in as u16);
        }
        let k = lat.dims[d] as i64;
        let cur = self.coords[r * n + d] as i64;
        let dest = self.coords[dst_router as usize * n + d] as i64;
        let dist2 = k - 2 * ((dest - cur + k) % k);
        let coin = || mix64(seed ^ mix64(uid ^ mix64(r as u64))) & 1 == 1;
        let plus = dist2 > 0 || (dist2 == 0 && coin());
        let partition = u8::from(cur > dest);
        (lat.port(d, plus), partition as u16)
    }
}

/// Route class meaning "any VC" (ejection under [`BookSimTorus`]).
pub(crate) const ANY_CLASS: u16 = u16::MAX;

/// SplitMix64's finaliser: a well-mixed 64-bit hash of `z`.
fn mix64(z: u64) -> u64 {
    let z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
