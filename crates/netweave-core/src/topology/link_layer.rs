//! What a fabric's switches do when a port is full: the link layer and the switch port buffer.
//!
//! InfiniBand (and every lossless fabric: credit flow control, PFC) never drops a packet — a
//! sender waits for credit — so bandwidth sharing is the whole story and the flow simulator
//! keeps its lossless max-min model. Ethernet switches queue a port's packets in a buffer of
//! finite size and drop what does not fit; TCP then pays for the loss (fast retransmit, or a
//! retransmission timeout). The flow simulator chooses its model by [`LinkLayer`], and the
//! emulated cluster queues [`Switching::port_buffer_bytes`] per switch port.
//!
//! Every topology has one [`Switching`]: stated by a file (topology JSON's `link_layer` and
//! `port_buffer_bytes`) or a generator option (`topo … --link-layer … --buffer BYTES`), else
//! the family's default ([`Switching::default_for`]): trees of switches — paper 004's Ethernet
//! clusters — are Ethernet with [`DEFAULT_ETHERNET_PORT_BUFFER`], everything else InfiniBand.
//!
//! ```
//! use netweave_core::topology::{ethernet, grid, link_layer::{LinkLayer, DEFAULT_ETHERNET_PORT_BUFFER}, LinkSpec};
//! let l = ethernet::TreeLevel { fanout: 2, link: LinkSpec::default() };
//! let tree = ethernet::switch_tree(&[l], 3, LinkSpec::default()).unwrap();
//! assert_eq!(tree.switching().link_layer, LinkLayer::Ethernet);
//! assert_eq!(tree.switching().port_buffer_bytes, Some(DEFAULT_ETHERNET_PORT_BUFFER));
//! assert!(grid::torus(&[4, 4], 1).unwrap().switching().lossless());
//! ```

use serde::{Deserialize, Serialize};

use super::structure::Structure;
use crate::error::Result;

/// A switch port of an Ethernet tree holds this many bytes by default: 64 KiB, the per-port
/// share of a shallow-buffered commodity Gigabit switch (the incast studies measured 32–64 KiB
/// per port) and what paper 004's incast reproduction queues.
pub const DEFAULT_ETHERNET_PORT_BUFFER: u64 = 64 * 1024;
/// The smallest port buffer accepted: one full Ethernet frame.
pub const MIN_PORT_BUFFER: u64 = 1500;
/// TCP payload per full 1,500-byte Ethernet frame (IPv4 and TCP headers without options).
pub const ETHERNET_MSS: u64 = 1460;
/// Bytes a switch port queues per segment besides its payload: the Ethernet, IPv4 and TCP headers.
pub const ETHERNET_SEGMENT_HEADERS: u64 = 14 + 20 + 20;

/// Bytes `payload` bytes of TCP data occupy in a switch port's queue: the payload and the
/// headers of every segment it is cut into.
///
/// ```
/// use netweave_core::topology::link_layer::ethernet_queued_bytes;
/// assert_eq!(ethernet_queued_bytes(0), 0);
/// assert_eq!(ethernet_queued_bytes(1024), 1024 + 54);
/// assert_eq!(ethernet_queued_bytes(1461), 1461 + 2 * 54);
/// ```
pub fn ethernet_queued_bytes(payload: u64) -> u64 {
    payload + payload.div_ceil(ETHERNET_MSS) * ETHERNET_SEGMENT_HEADERS
}

/// How switches treat a full port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkLayer {
    /// Drop-tail port buffers; TCP recovers losses.
    Ethernet,
    /// Credit-based flow control: a full port back-pressures, nothing is lost.
    Infiniband,
}

impl LinkLayer {
    /// File and CLI name ("ethernet", "infiniband").
    pub fn name(self) -> &'static str {
        match self {
            LinkLayer::Ethernet => "ethernet",
            LinkLayer::Infiniband => "infiniband",
        }
    }
}

impl std::str::FromStr for LinkLayer {
    type Err = crate::error::NetweaveError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ethernet" | "eth" => Ok(LinkLayer::Ethernet),
            "infiniband" | "ib" => Ok(LinkLayer::Infiniband),
            _ => crate::invalid!("unknown link layer '{s}' (known: ethernet, infiniband)"),
        }
    }
}

/// A fabric's link layer and its switch port buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Switching {
    pub link_layer: LinkLayer,
    /// Bytes of data one switch port queues before it drops (Ethernet); `None` on a lossless
    /// fabric.
    pub port_buffer_bytes: Option<u64>,
}

impl Switching {
    /// The default of a topology of this shape: trees of switches (paper 004's Ethernet
    /// clusters) are Ethernet with a shallow buffer; lattices, fat-trees, LSFTs, dragonflies and
    /// generic graphs are InfiniBand-like and lossless.
    pub fn default_for(structure: &Structure) -> Switching {
        match structure {
            Structure::SwitchTree { .. } | Structure::StarOfSwitches { .. } | Structure::MultiCluster { .. } => {
                Switching { link_layer: LinkLayer::Ethernet, port_buffer_bytes: Some(DEFAULT_ETHERNET_PORT_BUFFER) }
            }
            _ => Switching::infiniband(),
        }
    }

    /// A lossless (InfiniBand) fabric.
    pub fn infiniband() -> Switching {
        Switching { link_layer: LinkLayer::Infiniband, port_buffer_bytes: None }
    }

    /// `link_layer` with `buffer` (or, when `None`, the link layer's default: 64 KiB for
    /// Ethernet, none for InfiniBand), checked: an Ethernet port needs a buffer of at least one
    /// frame, and a lossless fabric has none to give.
    pub fn new(link_layer: LinkLayer, buffer: Option<u64>) -> Result<Switching> {
        match (link_layer, buffer) {
            (LinkLayer::Ethernet, None) => {
                Ok(Switching { link_layer, port_buffer_bytes: Some(DEFAULT_ETHERNET_PORT_BUFFER) })
            }
            (LinkLayer::Ethernet, Some(b)) if b < MIN_PORT_BUFFER => crate::invalid!(
                "port buffer {b} bytes: a switch port must hold at least one {MIN_PORT_BUFFER}-byte frame"
            ),
            (LinkLayer::Ethernet, Some(b)) => Ok(Switching { link_layer, port_buffer_bytes: Some(b) }),
            (LinkLayer::Infiniband, None) => Ok(Switching::infiniband()),
            (LinkLayer::Infiniband, Some(b)) => crate::invalid!(
                "port buffer {b} bytes on an InfiniBand fabric: credit flow control never drops, so a lossless \
                 fabric has no drop-tail buffer (state link layer ethernet to model one)"
            ),
        }
    }

    /// Whether no packet is ever lost (the flow simulator's max-min model is then exact).
    pub fn lossless(&self) -> bool {
        self.link_layer == LinkLayer::Infiniband
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_checked_against_the_link_layer() {
        assert_eq!(
            Switching::new(LinkLayer::Ethernet, None).unwrap().port_buffer_bytes,
            Some(DEFAULT_ETHERNET_PORT_BUFFER)
        );
        assert_eq!(Switching::new(LinkLayer::Ethernet, Some(4096)).unwrap().port_buffer_bytes, Some(4096));
        assert!(Switching::new(LinkLayer::Ethernet, Some(0)).unwrap_err().to_string().contains("at least one"));
        assert!(Switching::new(LinkLayer::Infiniband, Some(4096)).unwrap_err().to_string().contains("never drops"));
        assert!(Switching::new(LinkLayer::Infiniband, None).unwrap().lossless());
        assert_eq!("IB".parse::<LinkLayer>().unwrap(), LinkLayer::Infiniband);
        assert!("token-ring".parse::<LinkLayer>().is_err());
    }
}
