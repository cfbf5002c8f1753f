//! The flat switch view of a topology that routing engines and metrics search.
//!
//! One type, [`SwitchFabric`], indexed by *switch index* (position in [`Topology::switches`]):
//!
//! - every switch-to-switch channel once, numbered so that each switch's out-channels are
//!   contiguous and in port order ("local channels"), with the sending switch (`tail`),
//!   receiving switch (`head`), port and reverse channel of each — engines that reason about
//!   channels and their dependencies (Nue, LASH, DFSSSP) build their tables on top of it;
//! - where every host hangs (hosts per switch, switch and port per host);
//! - the neighbour graph with parallel links collapsed ([`neighbors`](SwitchFabric::neighbors),
//!   [`bfs`](SwitchFabric::bfs)), for breadth-first searches (distances, trees, components).
//!
//! ```
//! use netweave_core::topology::{fabric::SwitchFabric, grid};
//! let t = grid::torus(&[3, 3], 2).unwrap();
//! let f = SwitchFabric::new(&t);
//! assert_eq!((f.num_switches, f.num_channels()), (9, 36));
//! let c = f.out(4).start;
//! assert_eq!((f.tail[c], f.tail[f.rev[c] as usize]), (4, f.head[c]));
//! assert_eq!(f.hosts_of(4), &[8, 9]);
//! ```

use super::{ChannelId, Port, Topology};

/// "No switch" in [`SwitchFabric::host_switch`] (a host without a switch link).
pub const NO_SWITCH: u32 = u32::MAX;
/// "No port" in [`SwitchFabric::host_port`].
pub const NO_PORT: Port = 0;

/// Switch-to-switch channels in flat arrays (CSR by sending switch) and the host attachment.
#[derive(Clone, Debug)]
pub struct SwitchFabric {
    /// Number of switches.
    pub num_switches: usize,
    /// Number of hosts.
    pub num_hosts: usize,
    /// Local channels leaving switch `v`: `out_start[v]..out_start[v + 1]`, in port order.
    pub out_start: Vec<u32>,
    /// Sending switch of each local channel.
    pub tail: Vec<u32>,
    /// Receiving switch of each local channel.
    pub head: Vec<u32>,
    /// Port of the sending switch.
    pub port: Vec<Port>,
    /// The local channel of the same link in the other direction.
    pub rev: Vec<u32>,
    /// The topology channel id of each local channel.
    pub channel: Vec<ChannelId>,
    /// Hosts of switch `v`: `host_list[host_start[v]..host_start[v + 1]]`, in host order.
    pub host_start: Vec<u32>,
    pub host_list: Vec<u32>,
    /// Switch of every host ([`Topology::host_switch`]; [`NO_SWITCH`] if none) and the port of
    /// that switch its link arrives on ([`NO_PORT`] if none).
    pub host_switch: Vec<u32>,
    pub host_port: Vec<Port>,
    /// Neighbouring switches of `v` with parallel links collapsed, ascending:
    /// `nbr[nbr_start[v]..nbr_start[v + 1]]`.
    nbr_start: Vec<u32>,
    nbr: Vec<u32>,
    /// Whether any host link ends at switch `v` (multi-homed hosts count on every switch).
    pub(crate) has_hosts: Vec<bool>,
}

impl SwitchFabric {
    /// The view of `topo` (linear time). Hosts without a switch link get [`NO_SWITCH`]; engines
    /// that need every host attached check that first.
    pub fn new(topo: &Topology) -> Self {
        let n = topo.num_switches();
        let mut out_start = Vec::with_capacity(n + 1);
        let (mut head, mut tail, mut port, mut channel) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (v, &node) in topo.switches().iter().enumerate() {
            out_start.push(head.len() as u32);
            for a in topo.neighbors(node) {
                if !topo.is_host(a.neighbor) {
                    head.push(topo.kind_index(a.neighbor) as u32);
                    tail.push(v as u32);
                    port.push(a.port);
                    channel.push(a.channel);
                }
            }
        }
        out_start.push(head.len() as u32);
        let mut local = vec![u32::MAX; topo.num_channels()];
        for (lc, &c) in channel.iter().enumerate() {
            local[c as usize] = lc as u32;
        }
        let rev: Vec<u32> = channel.iter().map(|&c| local[(c ^ 1) as usize]).collect();

        // Collapsed neighbour lists: each switch's heads, sorted and deduplicated.
        let mut nbr_start = Vec::with_capacity(n + 1);
        let mut nbr = Vec::with_capacity(head.len());
        let mut has_hosts = Vec::with_capacity(n);
        nbr_start.push(0u32);
        for (v, &node) in topo.switches().iter().enumerate() {
            let start = nbr.len();
            nbr.extend_from_slice(&head[out_start[v] as usize..out_start[v + 1] as usize]);
            nbr[start..].sort_unstable();
            let mut w = start;
            for r in start..nbr.len() {
                if r == start || nbr[r] != nbr[w - 1] {
                    nbr[w] = nbr[r];
                    w += 1;
                }
            }
            nbr.truncate(w);
            nbr_start.push(nbr.len() as u32);
            has_hosts.push(topo.neighbors(node).iter().any(|a| topo.is_host(a.neighbor)));
        }

        let nh = topo.num_hosts();
        let mut host_switch = vec![NO_SWITCH; nh];
        let mut host_port = vec![NO_PORT; nh];
        let mut count = vec![0u32; n + 1];
        for (h, &node) in topo.hosts().iter().enumerate() {
            // The host's lowest connected port that reaches a switch, as Topology::host_switch.
            if let Some(a) = topo.neighbors(node).iter().find(|a| !topo.is_host(a.neighbor)) {
                let s = topo.kind_index(a.neighbor) as u32;
                host_switch[h] = s;
                host_port[h] = a.neighbor_port;
                count[s as usize + 1] += 1;
            }
        }
        for v in 0..n {
            count[v + 1] += count[v];
        }
        let host_start = count.clone();
        let mut fill = count;
        let mut host_list = vec![0u32; host_start[n] as usize];
        for (h, &s) in host_switch.iter().enumerate() {
            if s != NO_SWITCH {
                host_list[fill[s as usize] as usize] = h as u32;
                fill[s as usize] += 1;
            }
        }
        SwitchFabric {
            num_switches: n,
            num_hosts: nh,
            out_start,
            tail,
            head,
            port,
            rev,
            channel,
            host_start,
            host_list,
            host_switch,
            host_port,
            nbr_start,
            nbr,
            has_hosts,
        }
    }

    /// Number of switches (the graph's vertex count).
    #[inline]
    pub fn len(&self) -> usize {
        self.num_switches
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.num_switches == 0
    }

    /// Neighbouring switch indices of switch `v`, ascending, parallel links collapsed.
    #[inline]
    pub fn neighbors(&self, v: usize) -> &[u32] {
        &self.nbr[self.nbr_start[v] as usize..self.nbr_start[v + 1] as usize]
    }

    /// Whether switch `v` has hosts attached (any host link, multi-homed hosts included).
    #[inline]
    pub fn has_hosts(&self, v: usize) -> bool {
        self.has_hosts[v]
    }

    /// BFS hop distances from switch `src` into `dist` (`u32::MAX` = unreachable); `queue` is
    /// scratch space reused across calls so loops over sources allocate nothing.
    pub fn bfs(&self, src: usize, dist: &mut [u32], queue: &mut Vec<u32>) {
        dist.fill(u32::MAX);
        queue.clear();
        dist[src] = 0;
        queue.push(src as u32);
        let mut head = 0;
        while head < queue.len() {
            let v = queue[head] as usize;
            head += 1;
            for &u in self.neighbors(v) {
                if dist[u as usize] == u32::MAX {
                    dist[u as usize] = dist[v] + 1;
                    queue.push(u);
                }
            }
        }
    }

    /// Number of switch-to-switch channels.
    #[inline]
    pub fn num_channels(&self) -> usize {
        self.head.len()
    }

    /// Local channels leaving switch `v`.
    #[inline]
    pub fn out(&self, v: usize) -> std::ops::Range<usize> {
        self.out_start[v] as usize..self.out_start[v + 1] as usize
    }

    /// Number of channels leaving switch `v`.
    #[inline]
    pub fn out_degree(&self, v: usize) -> usize {
        (self.out_start[v + 1] - self.out_start[v]) as usize
    }

    /// Hosts of switch `v`, in host order.
    #[inline]
    pub fn hosts_of(&self, v: usize) -> &[u32] {
        &self.host_list[self.host_start[v] as usize..self.host_start[v + 1] as usize]
    }

    /// Number of hosts on switch `v`.
    #[inline]
    pub fn host_count(&self, v: usize) -> u64 {
        (self.host_start[v + 1] - self.host_start[v]) as u64
    }
}
