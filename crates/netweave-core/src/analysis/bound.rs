//! The bottleneck lower bound: no schedule of a traffic can finish before its busiest resource
//! has moved its bytes.
//!
//! For a set of messages routed on a fabric, every directed channel must carry the bytes of
//! every message whose route crosses it, and every host must inject everything it sends and
//! eject everything it receives through its links. So the traffic takes at least
//!
//! ```text
//! max( max over directed channels c of bytes_c / bandwidth_c,
//!      max over hosts h of sent_h / Σ bandwidth of h's links,
//!      max over hosts h of received_h / Σ bandwidth of h's links )
//! ```
//!
//! whatever the order, phases or dependencies: the bound of a phased [`Schedule`] and of a DAG
//! [`TaskGraph`] with the same messages is the same number. Latency is left out (a bound, not a
//! prediction); messages between ranks of one host cross no link and count for nothing. A
//! candidate's *ratio to the bound* (predicted time ÷ bound, ≥ 1 for any model that respects
//! link bandwidths) says how much of the fabric it leaves idle.
//!
//! ```
//! use netweave_core::analysis::bound::schedule_bound;
//! use netweave_core::{routing::shortest_path, topology::grid::mesh, traffic::Schedule};
//! let topo = mesh(&[4], 1).unwrap();
//! let routes = shortest_path(&topo).unwrap();
//! let b = schedule_bound(&topo, &routes, &Schedule::shift_alltoall(4, 1 << 20).unwrap()).unwrap();
//! // The middle link 1→2 carries 0→2, 0→3, 1→2 and 1→3: 4 MiB at the link's bandwidth.
//! assert_eq!(b.bytes, 4 << 20);
//! assert_eq!(b.binding.kind(), "link");
//! ```

use serde::Serialize;

use super::channel_load::routed_channel_bytes;
use crate::error::Result;
use crate::routing::RoutingTable;
use crate::topology::{ChannelId, Topology};
use crate::traffic::dag::TaskGraph;
use crate::traffic::{Message, Schedule};

/// The resource whose bytes set the bound.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Binding {
    /// A directed channel (`from_label` → `to_label`).
    Link { channel: ChannelId, from_label: String, to_label: String },
    /// A host's sending side (all its links together).
    Injection { host: u32, label: String },
    /// A host's receiving side (all its links together).
    Ejection { host: u32, label: String },
    /// No message crosses the network (the bound is 0).
    None,
}

impl Binding {
    /// `link`, `injection`, `ejection` or `none`.
    pub fn kind(&self) -> &'static str {
        match self {
            Binding::Link { .. } => "link",
            Binding::Injection { .. } => "injection",
            Binding::Ejection { .. } => "ejection",
            Binding::None => "none",
        }
    }

    /// One line naming the resource: `link 'e0' -> 'h3'`, `injection of host 'h3'`.
    pub fn describe(&self) -> String {
        match self {
            Binding::Link { from_label, to_label, .. } => format!("link '{from_label}' -> '{to_label}'"),
            Binding::Injection { label, .. } => format!("injection of host '{label}'"),
            Binding::Ejection { label, .. } => format!("ejection of host '{label}'"),
            Binding::None => "no network traffic".to_string(),
        }
    }
}

/// The bottleneck lower bound of a traffic on a routed fabric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BottleneckBound {
    /// The bound in seconds: the largest of the three figures below.
    pub seconds: f64,
    /// What sets it.
    pub binding: Binding,
    /// Bytes the binding resource carries.
    pub bytes: u64,
    /// Largest bytes ÷ bandwidth over directed channels.
    pub link_seconds: f64,
    /// Largest bytes sent ÷ the host's link bandwidth, over hosts.
    pub injection_seconds: f64,
    /// Largest bytes received ÷ the host's link bandwidth, over hosts.
    pub ejection_seconds: f64,
    /// Bytes moved between different hosts.
    pub network_bytes: u64,
}

impl BottleneckBound {
    /// `seconds ÷ bound`: how far a candidate predicted at `seconds` is from the bound (1.0 at
    /// the bound; infinite when the bound is 0 but the candidate takes time).
    pub fn ratio(&self, seconds: f64) -> f64 {
        if self.seconds > 0.0 {
            seconds / self.seconds
        } else if seconds > 0.0 {
            f64::INFINITY
        } else {
            1.0
        }
    }
}

/// The bound of `messages` given as (source host, destination host, bytes), routed by `routes`.
pub fn bottleneck_bound(
    topo: &Topology,
    routes: &RoutingTable,
    messages: impl IntoIterator<Item = (u32, u32, u64)>,
) -> Result<BottleneckBound> {
    let n = topo.num_hosts();
    let mut sent = vec![0u64; n];
    let mut received = vec![0u64; n];
    let mut network_bytes = 0u64;
    // The per-host sums ride along the one routing walk (which checks the hosts and routes).
    let counted = messages.into_iter().inspect(|&(src, dst, bytes)| {
        if (src as usize) < n && (dst as usize) < n && src != dst {
            sent[src as usize] = sent[src as usize].saturating_add(bytes);
            received[dst as usize] = received[dst as usize].saturating_add(bytes);
            network_bytes = network_bytes.saturating_add(bytes);
        }
    });
    let channel_bytes = routed_channel_bytes(topo, routes, counted)?;
    let bytes_per_second = |c: usize| topo.links()[c / 2].spec.bandwidth_gbps * 1e9 / 8.0;
    let mut best = BottleneckBound {
        seconds: 0.0,
        binding: Binding::None,
        bytes: 0,
        link_seconds: 0.0,
        injection_seconds: 0.0,
        ejection_seconds: 0.0,
        network_bytes,
    };
    for (c, &bytes) in channel_bytes.iter().enumerate().filter(|(_, &b)| b > 0) {
        let seconds = bytes as f64 / bytes_per_second(c);
        best.link_seconds = best.link_seconds.max(seconds);
        if seconds > best.seconds {
            let (from, to) = topo.channel_ends(c as ChannelId);
            best.seconds = seconds;
            best.bytes = bytes;
            best.binding = Binding::Link {
                channel: c as ChannelId,
                from_label: topo.label(from.node).to_string(),
                to_label: topo.label(to.node).to_string(),
            };
        }
    }
    for (h, &node) in topo.hosts().iter().enumerate() {
        // A host's links in one direction run side by side (bonding): their bandwidths add.
        let nic: f64 = topo.neighbors(node).iter().map(|a| bytes_per_second(a.channel as usize)).sum();
        let label = topo.label(node).to_string();
        for (bytes, receiving) in [(sent[h], false), (received[h], true)] {
            if bytes == 0 {
                continue;
            }
            let seconds = bytes as f64 / nic;
            if receiving {
                best.ejection_seconds = best.ejection_seconds.max(seconds);
            } else {
                best.injection_seconds = best.injection_seconds.max(seconds);
            }
            // A host link already binding at the same time names the link, the finer culprit.
            if seconds > best.seconds {
                best.seconds = seconds;
                best.bytes = bytes;
                best.binding = if receiving {
                    Binding::Ejection { host: h as u32, label: label.clone() }
                } else {
                    Binding::Injection { host: h as u32, label: label.clone() }
                };
            }
        }
    }
    Ok(best)
}

/// The bound of every message of a phased schedule (ranks placed on hosts by its placement).
pub fn schedule_bound(topo: &Topology, routes: &RoutingTable, schedule: &Schedule) -> Result<BottleneckBound> {
    schedule.check_fits(topo)?;
    bottleneck_bound(topo, routes, on_hosts(schedule.messages(), schedule.placement()))
}

/// The bound of every task of a DAG schedule (ranks placed on hosts by its placement).
pub fn dag_bound(topo: &Topology, routes: &RoutingTable, graph: &TaskGraph) -> Result<BottleneckBound> {
    graph.check_fits(topo)?;
    bottleneck_bound(topo, routes, on_hosts(graph.tasks(), graph.placement()))
}

fn on_hosts<'a>(messages: &'a [Message], placement: &'a [u32]) -> impl Iterator<Item = (u32, u32, u64)> + 'a {
    messages.iter().map(move |m| (placement[m.src as usize], placement[m.dst as usize], m.bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::shortest_path;
    use crate::topology::ethernet::{star_of_switches, GIGABIT_LAN};

    #[test]
    fn phased_and_dag_forms_of_one_traffic_share_the_bound() {
        let topo = star_of_switches(4, 2, GIGABIT_LAN, GIGABIT_LAN).unwrap();
        let routes = shortest_path(&topo).unwrap();
        let n = topo.num_hosts() as u32;
        let shift = Schedule::shift_alltoall(n, 1000).unwrap();
        let dag = TaskGraph::from_schedule(&shift).unwrap();
        let a = schedule_bound(&topo, &routes, &shift).unwrap();
        let b = dag_bound(&topo, &routes, &dag).unwrap();
        assert_eq!(a, b);
        assert!(a.seconds > 0.0 && a.bytes > 0);
        assert_eq!(a.ratio(2.0 * a.seconds), 2.0);
    }

    #[test]
    fn a_lone_sender_is_bound_by_its_injection() {
        let topo = star_of_switches(4, 4, GIGABIT_LAN, GIGABIT_LAN).unwrap();
        let routes = shortest_path(&topo).unwrap();
        // Host 0 sends 1 MB to each of three others: its uplink carries 3 MB.
        let b = bottleneck_bound(&topo, &routes, (1..4).map(|d| (0, d, 1_000_000))).unwrap();
        assert_eq!(b.bytes, 3_000_000);
        let gbit = GIGABIT_LAN.bandwidth_gbps * 1e9 / 8.0;
        assert!((b.seconds - 3e6 / gbit).abs() < 1e-12);
        assert_eq!(b.injection_seconds, b.link_seconds);
        assert_eq!(b.binding.kind(), "link", "a single host link names the link");
        let none = bottleneck_bound(&topo, &routes, [(2, 2, 5)]).unwrap();
        assert_eq!((none.seconds, none.binding.kind()), (0.0, "none"));
        assert!(
            bottleneck_bound(&topo, &routes, [(0, 9, 5)]).unwrap_err().to_string().contains("0 -> 9")
                || bottleneck_bound(&topo, &routes, [(0, 9, 5)]).unwrap_err().to_string().contains("9")
        );
    }
}
