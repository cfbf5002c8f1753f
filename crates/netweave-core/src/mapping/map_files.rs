//! Map files: a placement (`host_of_rank`) as the launchers read it — Open MPI's `rankfile`,
//! Fujitsu's `vcoord`, Cray MPICH's `MPICH_RANK_ORDER` — or as netweave's own JSON.
//!
//! ```
//! use netweave_core::mapping::{map_files::{self, MapFormat}, MapNetwork};
//! use netweave_core::routing::{route, Engine, RouteOptions};
//! let topo = netweave_core::topology::grid::torus(&[2, 2], 1).unwrap();
//! let net = MapNetwork::new(&topo, &route(&topo, Engine::Dor, &RouteOptions::default()).unwrap(), 1).unwrap();
//! let text = map_files::format(&net, &[3, 0], MapFormat::Rankfile, None, None).unwrap();
//! assert!(text.starts_with("rank 0=h-1-1-0 slot=0\n")); // host 3 is h(1,1).0
//! assert_eq!(map_files::read(&net, &text, MapFormat::Rankfile, None).unwrap(), vec![3, 0]);
//! ```

use serde::Serialize;

use super::MapNetwork;
use crate::error::{NetweaveError, Result};
use crate::invalid;

/// A map file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapFormat {
    /// Open MPI `rankfile`: `rank R=HOST slot=S`.
    Rankfile,
    /// Fujitsu `vcoord`: the router coordinates of every rank, one `(x,y,z)` per line.
    Vcoord,
    /// Cray `MPICH_RANK_ORDER`: ranks host by host, 16 per line.
    Mpich,
    /// netweave's JSON: `host_of_rank`, host names and whatever the writer adds.
    Json,
}

impl MapFormat {
    /// Every format, in listing order, with its name.
    pub const ALL: [(MapFormat, &'static str); 4] = [
        (MapFormat::Rankfile, "rankfile"),
        (MapFormat::Vcoord, "vcoord"),
        (MapFormat::Mpich, "mpich"),
        (MapFormat::Json, "json"),
    ];

    /// The inverse of the names in [`ALL`](Self::ALL).
    pub fn from_name(name: &str) -> Result<Self> {
        match Self::ALL.iter().find(|(_, n)| *n == name) {
            Some((f, _)) => Ok(*f),
            None => {
                let known: Vec<&str> = Self::ALL.iter().map(|(_, n)| *n).collect();
                invalid!("unknown map format '{name}' (use {})", known.join(", "))
            }
        }
    }
}

/// A topology host label as a hostname: runs of other characters become one dash, so `h(1,2).0`
/// becomes `h-1-2-0`.
pub fn hostname(label: &str) -> String {
    let mut name = String::with_capacity(label.len());
    for c in label.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = name.trim_matches('-');
    if name.is_empty() {
        "host".into()
    } else {
        name.into()
    }
}

fn host_names(net: &MapNetwork, hostnames: Option<&[String]>) -> Result<Vec<String>> {
    match hostnames {
        Some(names) if names.len() != net.num_hosts() as usize => {
            invalid!("the host name list has {} names for {} hosts", names.len(), net.num_hosts())
        }
        Some(names) => Ok(names.to_vec()),
        None => Ok((0..net.num_hosts()).map(|h| hostname(net.host_label(h))).collect()),
    }
}

#[derive(Serialize)]
struct MapDocument<'a> {
    format: &'static str,
    version: u32,
    #[serde(flatten)]
    meta: &'a serde_json::Map<String, serde_json::Value>,
    num_ranks: usize,
    slots_per_host: u32,
    host_of_rank: &'a [u32],
    hosts: Vec<&'a str>,
}

/// The text of a map file for the placement `host_of_rank`. `hostnames` replaces the names made
/// from the topology's host labels; `meta` adds fields to the JSON format (topology, pattern,
/// cost, figures).
pub fn format(
    net: &MapNetwork,
    host_of_rank: &[u32],
    format: MapFormat,
    hostnames: Option<&[String]>,
    meta: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<String> {
    let names = host_names(net, hostnames)?;
    if host_of_rank.iter().any(|&h| h >= net.num_hosts()) {
        return invalid!("the placement names a host outside the topology");
    }
    Ok(match format {
        MapFormat::Rankfile => {
            let mut used = vec![0u32; net.num_hosts() as usize];
            let mut out = String::new();
            for (rank, &h) in host_of_rank.iter().enumerate() {
                out += &format!("rank {rank}={} slot={}\n", names[h as usize], used[h as usize]);
                used[h as usize] += 1;
            }
            out
        }
        MapFormat::Vcoord => {
            if net.lattice().is_none() {
                return invalid!("a vcoord file needs a torus or mesh topology (router coordinates)");
            }
            let mut out = String::new();
            for &h in host_of_rank {
                let coords: Vec<String> = net.host_coords(h).unwrap_or(&[]).iter().map(u32::to_string).collect();
                out += &format!("({})\n", coords.join(","));
            }
            out
        }
        MapFormat::Mpich => {
            let mut order: Vec<u32> = (0..host_of_rank.len() as u32).collect();
            order.sort_by_key(|&r| (host_of_rank[r as usize], r));
            let lines: Vec<String> =
                order.chunks(16).map(|chunk| chunk.iter().map(u32::to_string).collect::<Vec<_>>().join(",")).collect();
            format!("# MPICH_RANK_ORDER: ranks host by host in host order (netweave map)\n{}\n", lines.join(",\n"))
        }
        MapFormat::Json => {
            let empty = serde_json::Map::new();
            let doc = MapDocument {
                format: "netweave-map",
                version: 1,
                meta: meta.unwrap_or(&empty),
                num_ranks: host_of_rank.len(),
                slots_per_host: net.slots_per_host(),
                host_of_rank,
                hosts: host_of_rank.iter().map(|&h| names[h as usize].as_str()).collect(),
            };
            let mut out = Vec::new();
            let mut ser =
                serde_json::Serializer::with_formatter(&mut out, serde_json::ser::PrettyFormatter::with_indent(b" "));
            doc.serialize(&mut ser).map_err(|e| NetweaveError::InvalidParameter(e.to_string()))?;
            String::from_utf8(out).unwrap_or_default() + "\n"
        }
    })
}

/// Read a map file's text back into `host_of_rank` (JSON, rankfile, or vcoord on a lattice with
/// one host per router).
pub fn read(net: &MapNetwork, text: &str, format: MapFormat, hostnames: Option<&[String]>) -> Result<Vec<u32>> {
    let parse_err = |format: &'static str, line: usize, message: String| NetweaveError::Parse { format, line, message };
    match format {
        MapFormat::Json => {
            let doc: serde_json::Value =
                serde_json::from_str(text).map_err(|e| parse_err("netweave map JSON", e.line(), e.to_string()))?;
            let hosts = doc.get("host_of_rank").and_then(|v| v.as_array());
            let hosts = hosts.ok_or_else(|| parse_err("netweave map JSON", 0, "no 'host_of_rank' list".into()))?;
            hosts
                .iter()
                .map(|h| h.as_u64().and_then(|h| u32::try_from(h).ok()).filter(|&h| h < net.num_hosts()))
                .collect::<Option<Vec<u32>>>()
                .ok_or_else(|| {
                    parse_err("netweave map JSON", 0, "'host_of_rank' names a host outside the topology".into())
                })
        }
        MapFormat::Rankfile => {
            let names = host_names(net, hostnames)?;
            let index: std::collections::HashMap<&str, u32> =
                names.iter().enumerate().map(|(i, n)| (n.as_str(), i as u32)).collect();
            let mut placed: Vec<(u32, u32)> = Vec::new();
            for (i, line) in text.lines().enumerate() {
                let bad = || parse_err("rankfile", i + 1, format!("expected 'rank R=HOST slot=S', got '{line}'"));
                let rest = line.trim().strip_prefix("rank").ok_or_else(bad)?;
                let (rank, rest) = rest.split_once('=').ok_or_else(bad)?;
                let mut fields = rest.split_whitespace();
                let (host, slot) = (fields.next().ok_or_else(bad)?, fields.next().ok_or_else(bad)?);
                let rank: u32 = rank.trim().parse().map_err(|_| bad())?;
                if !slot.starts_with("slot=") || fields.next().is_some() {
                    return Err(bad());
                }
                let host =
                    *index.get(host).ok_or_else(|| parse_err("rankfile", i + 1, format!("unknown host '{host}'")))?;
                placed.push((rank, host));
            }
            placed.sort_unstable();
            if let Some(w) = placed.windows(2).find(|w| w[0].0 == w[1].0) {
                return invalid!("rankfile places rank {} twice", w[0].0);
            }
            Ok(placed.into_iter().map(|(_, h)| h).collect())
        }
        MapFormat::Vcoord => {
            if net.lattice().map(|l| l.hosts_per_router) != Some(1) {
                return invalid!("reading vcoord needs a lattice with one host per router");
            }
            let coords: std::collections::HashMap<Vec<u32>, u32> =
                (0..net.num_hosts()).filter_map(|h| net.host_coords(h).map(|c| (c.to_vec(), h))).collect();
            let mut hosts = Vec::new();
            for (i, line) in text.lines().enumerate() {
                let key: Vec<u32> = line
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|f| !f.is_empty())
                    .map(|f| f.parse().unwrap_or(u32::MAX))
                    .collect();
                match coords.get(&key) {
                    Some(&h) => hosts.push(h),
                    None => return Err(parse_err("vcoord", i + 1, format!("no router at {key:?}"))),
                }
            }
            Ok(hosts)
        }
        MapFormat::Mpich => invalid!("cannot read map format 'mpich' (it has no host names)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::grid::torus;

    fn net(slots: u32) -> MapNetwork {
        let topo = torus(&[4, 4], 1).unwrap();
        MapNetwork::new(&topo, &route(&topo, Engine::Dor, &RouteOptions::default()).unwrap(), slots).unwrap()
    }

    #[test]
    fn hostnames_are_label_words_joined_by_dashes() {
        assert_eq!(hostname("h(1,2).0"), "h-1-2-0");
        assert_eq!(hostname("()"), "host");
    }

    #[test]
    fn every_readable_format_round_trips() {
        let net = net(1);
        let placement: Vec<u32> = (0..16).map(|r| (r * 7 + 3) % 16).collect();
        for format in [MapFormat::Json, MapFormat::Rankfile, MapFormat::Vcoord] {
            let text = super::format(&net, &placement, format, None, None).unwrap();
            assert_eq!(read(&net, &text, format, None).unwrap(), placement, "{format:?}");
        }
    }

    #[test]
    fn rankfile_slots_count_ranks_per_host() {
        let text = format(&net(3), &[0, 0, 1, 0, 3], MapFormat::Rankfile, None, None).unwrap();
        let slots: Vec<&str> = text.lines().map(|l| l.rsplit(' ').next().unwrap()).collect();
        assert_eq!(slots, ["slot=0", "slot=1", "slot=0", "slot=2", "slot=0"]);
    }

    #[test]
    fn mpich_lists_ranks_host_by_host() {
        let text = format(&net(2), &[5, 1, 5, 0], MapFormat::Mpich, None, None).unwrap();
        assert_eq!(text.lines().nth(1), Some("3,1,0,2"));
        assert!(format(&net(1), &[99], MapFormat::Mpich, None, None).is_err());
    }
}
