//! Synthetic traffic patterns with BookSim's names: who sends to whom in open-loop traffic (the
//! flit simulator) and in permutation workloads (batch runs, the mapper's
//! [`Pattern::synthetic`](crate::mapping::Pattern::synthetic)).
//!
//! Hosts are numbered by host index. The bit patterns (`bitcomp`, `transpose`, `bitrev`,
//! `shuffle`, `butterfly`) need a power-of-two host count; `tornado` and `neighbor` need a
//! lattice (`k`-ary `n`-cube with `c` hosts per router) and act on the router digits,
//! keeping a host's local index, as BookSim does for concentrated networks.
//!
//! ```
//! use netweave_core::traffic::synthetic::SyntheticPattern;
//! let p = SyntheticPattern::new("bitcomp", 16, None, 0, &[0], 1.0).unwrap();
//! assert_eq!(p.fixed(3), Some(12));
//! ```

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::error::Result;

pub use crate::topology::structure::Lattice;

/// A destination pattern over `num_hosts` hosts.
#[derive(Clone, Debug)]
pub enum SyntheticPattern {
    /// Uniformly random over all hosts, the source included (as BookSim).
    Uniform { num_hosts: u32 },
    /// A fixed permutation (every deterministic pattern, and `randperm`).
    Permutation(Vec<u32>),
    /// With probability `fraction` one of `hosts` (uniformly), otherwise uniform.
    Hotspot { num_hosts: u32, hosts: Vec<u32>, fraction: f64 },
}

/// The names [`SyntheticPattern::new`] accepts.
pub const NAMES: &[&str] = &[
    "uniform",
    "bitcomp",
    "transpose",
    "bitrev",
    "shuffle",
    "tornado",
    "neighbor",
    "randperm",
    "hotspot",
    "butterfly",
];

fn bits_of(name: &str, num_hosts: u32) -> Result<u32> {
    if num_hosts < 2 || !num_hosts.is_power_of_two() {
        return crate::invalid!("traffic {name} needs a power-of-two number of hosts, this network has {num_hosts}");
    }
    Ok(num_hosts.trailing_zeros())
}

impl SyntheticPattern {
    /// Build pattern `name` for `num_hosts` hosts. `lattice` is needed by `tornado` and
    /// `neighbor`; `perm_seed` seeds `randperm`; `hotspot_hosts`/`fraction` describe `hotspot`.
    pub fn new(
        name: &str,
        num_hosts: u32,
        lattice: Option<&Lattice>,
        perm_seed: u64,
        hotspot_hosts: &[u32],
        fraction: f64,
    ) -> Result<SyntheticPattern> {
        if num_hosts == 0 {
            return crate::invalid!("the network has no hosts to send traffic");
        }
        let perm = |f: &dyn Fn(u32) -> u32| SyntheticPattern::Permutation((0..num_hosts).map(f).collect());
        Ok(match name {
            "uniform" => SyntheticPattern::Uniform { num_hosts },
            "bitcomp" => {
                let mask = (1u32 << bits_of(name, num_hosts)?) - 1;
                perm(&|s| !s & mask)
            }
            "transpose" => {
                let b = bits_of(name, num_hosts)?;
                if b % 2 != 0 {
                    return crate::invalid!(
                        "traffic transpose needs an even number of address bits (4, 16, 64, … hosts)"
                    );
                }
                let half = b / 2;
                let lo = (1u32 << half) - 1;
                perm(&|s| ((s & lo) << half) | (s >> half))
            }
            "bitrev" => {
                let b = bits_of(name, num_hosts)?;
                perm(&|s| s.reverse_bits() >> (32 - b))
            }
            "shuffle" => {
                let b = bits_of(name, num_hosts)?;
                let mask = (1u32 << b) - 1;
                perm(&|s| ((s << 1) & mask) | (s >> (b - 1)))
            }
            "butterfly" => {
                // Paper 002: b_{n-1} … b_0 with the most and least significant bits swapped.
                let b = bits_of(name, num_hosts)?;
                let top = b - 1;
                perm(&|s| {
                    let lsb = s & 1;
                    let msb = (s >> top) & 1;
                    (s & !(1 | (1 << top))) | (lsb << top) | msb
                })
            }
            "tornado" | "neighbor" => {
                let Some(lat) = lattice else {
                    return crate::invalid!("traffic {name} needs a mesh or torus (k-ary n-cube) topology");
                };
                let c = lat.hosts_per_router.max(1);
                let routers: u32 = lat.dims.iter().product();
                if routers * c != num_hosts {
                    return crate::invalid!("traffic {name}: the lattice does not match the host count");
                }
                let tornado = name == "tornado";
                perm(&|s| {
                    let (mut r, local) = (s / c, s % c);
                    let mut dest = 0u32;
                    let mut stride = 1u32;
                    for &k in &lat.dims {
                        let x = r % k;
                        r /= k;
                        let shift = if tornado { k.div_ceil(2) - 1 } else { 1 };
                        dest += ((x + shift) % k) * stride;
                        stride *= k;
                    }
                    dest * c + local
                })
            }
            "randperm" => {
                let mut p: Vec<u32> = (0..num_hosts).collect();
                p.shuffle(&mut ChaCha8Rng::seed_from_u64(perm_seed));
                SyntheticPattern::Permutation(p)
            }
            "hotspot" => {
                if let Some(&h) = hotspot_hosts.iter().find(|&&h| h >= num_hosts) {
                    return crate::invalid!("hotspot host {h} does not exist (the network has {num_hosts} hosts)");
                }
                SyntheticPattern::Hotspot { num_hosts, hosts: hotspot_hosts.to_vec(), fraction }
            }
            _ => return crate::invalid!("unknown traffic pattern '{name}' (known: {})", NAMES.join(", ")),
        })
    }

    /// The destination of a deterministic pattern, `None` for the random ones.
    pub fn fixed(&self, src: u32) -> Option<u32> {
        match self {
            SyntheticPattern::Permutation(p) => Some(p[src as usize]),
            _ => None,
        }
    }

    /// Draw a destination for `src`.
    pub fn dest<R: Rng>(&self, src: u32, rng: &mut R) -> u32 {
        match self {
            SyntheticPattern::Uniform { num_hosts } => rng.gen_range(0..*num_hosts),
            SyntheticPattern::Permutation(p) => p[src as usize],
            SyntheticPattern::Hotspot { num_hosts, hosts, fraction } => {
                if *fraction >= 1.0 || rng.gen::<f64>() < *fraction {
                    hosts[rng.gen_range(0..hosts.len())]
                } else {
                    rng.gen_range(0..*num_hosts)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::structure::LatticeShape;

    fn is_perm(p: &SyntheticPattern, n: u32) -> bool {
        let mut seen = vec![false; n as usize];
        (0..n).all(|s| {
            let d = p.fixed(s).unwrap();
            !std::mem::replace(&mut seen[d as usize], true)
        })
    }

    #[test]
    fn deterministic_patterns_are_permutations() {
        let lat = Lattice { shape: LatticeShape::Torus, dims: vec![4, 4], hosts_per_router: 1 };
        for name in ["bitcomp", "transpose", "bitrev", "shuffle", "butterfly", "tornado", "neighbor", "randperm"] {
            let p = SyntheticPattern::new(name, 16, Some(&lat), 7, &[0], 1.0).unwrap();
            assert!(is_perm(&p, 16), "{name}");
        }
    }

    #[test]
    fn paper_002_fixed_points() {
        // Paper 002 lists the hosts that send to themselves on 16 hosts.
        let fixed = |name: &str| -> Vec<u32> {
            let p = SyntheticPattern::new(name, 16, None, 0, &[0], 1.0).unwrap();
            (0..16).filter(|&s| p.fixed(s) == Some(s)).collect()
        };
        assert_eq!(fixed("bitrev"), vec![0, 6, 9, 15]);
        assert_eq!(fixed("transpose"), vec![0, 5, 10, 15]);
        assert_eq!(fixed("butterfly"), vec![0, 2, 4, 6, 9, 11, 13, 15]);
        assert!(fixed("bitcomp").is_empty());
    }

    #[test]
    fn tornado_goes_halfway_round() {
        let lat = Lattice { shape: LatticeShape::Torus, dims: vec![8], hosts_per_router: 1 };
        let p = SyntheticPattern::new("tornado", 8, Some(&lat), 0, &[0], 1.0).unwrap();
        assert_eq!(p.fixed(0), Some(3));
        assert_eq!(p.fixed(6), Some(1));
    }

    #[test]
    fn bad_sizes_are_refused() {
        assert!(SyntheticPattern::new("bitcomp", 12, None, 0, &[0], 1.0).is_err());
        assert!(SyntheticPattern::new("transpose", 8, None, 0, &[0], 1.0).is_err());
        assert!(SyntheticPattern::new("tornado", 8, None, 0, &[0], 1.0).is_err());
        assert!(SyntheticPattern::new("hotspot", 8, None, 0, &[9], 1.0).is_err());
        assert!(SyntheticPattern::new("zigzag", 8, None, 0, &[0], 1.0).is_err());
    }
}
