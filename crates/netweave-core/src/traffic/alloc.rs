//! Job allocation: which hosts a collective runs on, and in which rank order.
//!
//! A host list is a comma-separated list of items (spaces ignored):
//!
//! | item | hosts |
//! |---|---|
//! | `all` | every host, in host order |
//! | `7` | host index 7 |
//! | `0-15` | host indices 0 to 15, inclusive |
//! | `leaf:3` | every host of leaf 3 |
//! | `leaf:0-3` | every host of leaves 0 to 3 |
//!
//! Host indices are the topology's host order (`topo.hosts()`); *leaves* are the switches
//! with hosts attached, numbered in switch order. On fat-trees (families `fat_tree`,
//! `k_ary_n_tree`, `pgft`, `lsft`) a job gets whole leaves, so that jobs never share a leaf's
//! links; a list that takes part of a leaf is rejected unless the caller allows it.
//!
//! The [`RankOrdering`] then maps ranks to the listed hosts.
//!
//! ```
//! use netweave_core::topology::fat_tree::k_ary_n_tree;
//! use netweave_core::traffic::alloc::{allocate, RankOrdering};
//! let t = k_ary_n_tree(4, 2).unwrap();                       // 4 leaves of 4 hosts
//! let hosts = allocate(&t, "leaf:1-2", RankOrdering::Listed, false).unwrap();
//! assert_eq!(hosts, (4..12).collect::<Vec<u32>>());
//! let cyclic = allocate(&t, "leaf:1-2", RankOrdering::Cyclic, false).unwrap();
//! assert_eq!(&cyclic[..4], &[4, 8, 5, 9]);                    // alternate between the two leaves
//! assert!(allocate(&t, "0-5", RankOrdering::Listed, false).is_err());  // splits leaf 1
//! ```

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::error::{NetweaveError, Result};
use crate::topology::{NodeId, Topology};

/// How ranks are laid onto the allocated hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankOrdering {
    /// Rank `r` on the `r`-th host of the list, as written.
    Listed,
    /// Round-robin over the leaves (switches) of the listed hosts: consecutive ranks on
    /// different switches.
    Cyclic,
    /// A random permutation of the list, drawn from `seed` (ChaCha8).
    Random { seed: u64 },
}

impl RankOrdering {
    /// `listed`, `cyclic` or `random` (with `seed`).
    pub fn from_name(name: &str, seed: u64) -> Result<Self> {
        match name {
            "listed" => Ok(RankOrdering::Listed),
            "cyclic" => Ok(RankOrdering::Cyclic),
            "random" => Ok(RankOrdering::Random { seed }),
            other => crate::invalid!("unknown rank order '{other}' (known: listed, cyclic, random)"),
        }
    }
}

/// Is `topo` a fat-tree or LSFT (allocated in whole leaves)?
pub fn is_fat_tree(topo: &Topology) -> bool {
    topo.structure().is_fat_tree()
}

/// The switches with hosts attached, in switch order, each with its host indices.
pub fn leaves(topo: &Topology) -> Vec<(NodeId, Vec<u32>)> {
    let mut by_switch: Vec<Vec<u32>> = vec![Vec::new(); topo.num_nodes()];
    for (i, &h) in topo.hosts().iter().enumerate() {
        if let Some(sw) = topo.host_switch(h) {
            by_switch[sw as usize].push(i as u32);
        }
    }
    topo.switches()
        .iter()
        .filter_map(|&sw| {
            let hosts = std::mem::take(&mut by_switch[sw as usize]);
            (!hosts.is_empty()).then_some((sw, hosts))
        })
        .collect()
}

/// Parse `A` or `A-B` (inclusive) against `limit` items named `what`.
fn parse_range(text: &str, item: &str, what: &str, limit: usize) -> Result<(usize, usize)> {
    let num = |s: &str| -> Result<usize> {
        s.trim().parse::<usize>().map_err(|_| {
            NetweaveError::InvalidParameter(format!("host list item '{item}': '{}' is not a number", s.trim()))
        })
    };
    let (a, b) = match text.split_once('-') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => {
            let a = num(text)?;
            (a, a)
        }
    };
    if a > b {
        return crate::invalid!("host list item '{item}': the range runs backwards");
    }
    if b >= limit {
        return crate::invalid!(
            "host list item '{item}': {what} {b} does not exist (the topology has {limit} {what}s)"
        );
    }
    Ok((a, b))
}

/// Expand a host list (syntax in the module docs) into host indices, in the listed order.
/// A host listed twice is an error.
pub fn parse_hosts(topo: &Topology, spec: &str) -> Result<Vec<u32>> {
    let spec: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    if spec.is_empty() {
        return crate::invalid!("the host list is empty");
    }
    let leaf_list = leaves(topo);
    let mut out = Vec::new();
    for item in spec.split(',') {
        if item == "all" {
            out.extend(0..topo.num_hosts() as u32);
        } else if let Some(rest) = item.strip_prefix("leaf:") {
            let (a, b) = parse_range(rest, item, "leaf", leaf_list.len())?;
            for (_, hosts) in &leaf_list[a..=b] {
                out.extend_from_slice(hosts);
            }
        } else {
            let (a, b) = parse_range(item, item, "host", topo.num_hosts())?;
            out.extend(a as u32..=b as u32);
        }
    }
    let mut seen = vec![false; topo.num_hosts()];
    for &h in &out {
        if std::mem::replace(&mut seen[h as usize], true) {
            return crate::invalid!("host {h} appears more than once in the host list");
        }
    }
    Ok(out)
}

/// Hosts of the job, rank by rank: parse `spec`, check whole leaves on fat-trees (unless
/// `allow_partial_leaves`), then apply `ordering`.
pub fn allocate(topo: &Topology, spec: &str, ordering: RankOrdering, allow_partial_leaves: bool) -> Result<Vec<u32>> {
    let hosts = parse_hosts(topo, spec)?;
    let leaf_list = leaves(topo);
    // Leaf position of every host (u32::MAX for hosts on no switch).
    let mut leaf_of = vec![u32::MAX; topo.num_hosts()];
    for (l, (_, hs)) in leaf_list.iter().enumerate() {
        for &h in hs {
            leaf_of[h as usize] = l as u32;
        }
    }
    if is_fat_tree(topo) && !allow_partial_leaves {
        let mut taken = vec![0usize; leaf_list.len()];
        for &h in &hosts {
            if let Some(t) = taken.get_mut(leaf_of[h as usize] as usize) {
                *t += 1;
            }
        }
        if let Some((l, &t)) = taken.iter().enumerate().find(|&(l, &t)| t > 0 && t < leaf_list[l].1.len()) {
            return crate::invalid!(
                "the host list takes {t} of the {} hosts of leaf {l} ('{}'); on a fat-tree a job gets whole leaves (use leaf:A-B)",
                leaf_list[l].1.len(),
                topo.label(leaf_list[l].0)
            );
        }
    }
    Ok(match ordering {
        RankOrdering::Listed => hosts,
        RankOrdering::Random { seed } => {
            let mut h = hosts;
            h.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
            h
        }
        RankOrdering::Cyclic => {
            // Group by leaf in order of first appearance, then deal one host per group.
            let mut group_of_leaf = std::collections::HashMap::new();
            let mut groups: Vec<std::collections::VecDeque<u32>> = Vec::new();
            for &h in &hosts {
                let g = *group_of_leaf.entry(leaf_of[h as usize]).or_insert_with(|| {
                    groups.push(Default::default());
                    groups.len() - 1
                });
                groups[g].push_back(h);
            }
            let mut out = Vec::with_capacity(hosts.len());
            while out.len() < hosts.len() {
                for g in groups.iter_mut() {
                    if let Some(h) = g.pop_front() {
                        out.push(h);
                    }
                }
            }
            out
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{fat_tree::k_ary_n_tree, grid::torus};

    #[test]
    fn host_lists_parse_and_fail_clearly() {
        let t = torus(&[4, 4], 2).unwrap();
        assert_eq!(parse_hosts(&t, "0-2, 5,leaf:3").unwrap(), vec![0, 1, 2, 5, 6, 7]);
        assert_eq!(parse_hosts(&t, "all").unwrap().len(), 32);
        for (spec, needle) in [
            ("", "empty"),
            ("3-1", "backwards"),
            ("40", "does not exist"),
            ("leaf:16", "does not exist"),
            ("x", "not a number"),
            ("1,0-2", "more than once"),
        ] {
            let e = parse_hosts(&t, spec).unwrap_err().to_string();
            assert!(e.contains(needle), "{spec}: {e}");
        }
        // A torus is not a fat-tree: any subset goes.
        assert_eq!(allocate(&t, "1-3", RankOrdering::Listed, false).unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn fat_trees_take_whole_leaves_and_orders_are_permutations() {
        let t = k_ary_n_tree(4, 2).unwrap();
        assert!(allocate(&t, "0-3,8-11", RankOrdering::Listed, false).is_ok());
        let e = allocate(&t, "0-5", RankOrdering::Listed, false).unwrap_err().to_string();
        assert!(e.contains("whole leaves"), "{e}");
        assert!(allocate(&t, "0-5", RankOrdering::Listed, true).is_ok());
        let r1 = allocate(&t, "all", RankOrdering::Random { seed: 3 }, false).unwrap();
        assert_eq!(r1, allocate(&t, "all", RankOrdering::Random { seed: 3 }, false).unwrap());
        let mut sorted = r1.clone();
        sorted.sort();
        assert_eq!(sorted, (0..16).collect::<Vec<_>>());
        let c = allocate(&t, "all", RankOrdering::Cyclic, false).unwrap();
        assert_eq!(&c[..5], &[0, 4, 8, 12, 1]);
    }
}
