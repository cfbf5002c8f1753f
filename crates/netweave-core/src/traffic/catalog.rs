//! The algorithm catalogue: every collective algorithm netweave builds, by name, with the
//! options it reads — the one table the CLI, the plan and the bindings list and build from.
//!
//! ```
//! use netweave_core::traffic::catalog::{self, Request};
//! let s = catalog::build("alltoall", "a2at", &Request { num_ranks: Some(25), nct: Some(2), ..Request::default() })
//!     .unwrap();
//! assert_eq!(s.name(), "alltoall-a2at(5x5,nct=2)");
//! assert!(catalog::algorithms("barrier").contains(&"multicast"));
//! ```
//!
//! A [`Request`] names the job (the hosts of a topology, or a rank count) and the options the
//! caller gave; [`job`] checks them against what the algorithm [`takes`](Algorithm::takes), so a
//! typo never goes unnoticed, places the ranks and infers the ranks' lattice shape where an
//! algorithm needs one. Adding an algorithm is one row of [`ALGORITHMS`] and one arm of
//! `build_job`.

use super::{alloc, alltoall, collectives, lsft, tree_phased, Schedule};
use crate::error::Result;
use crate::invalid;
use crate::topology::structure::{LatticeShape, Structure};
use crate::topology::Topology;

/// Bytes per rank pair (or per block) when the caller gives none: 1 MiB.
pub const DEFAULT_BYTES: u64 = 1 << 20;
/// Bytes per barrier signal when the caller gives none.
pub const DEFAULT_BARRIER_BYTES: u64 = 8;

/// One entry of the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Algorithm {
    pub collective: &'static str,
    pub name: &'static str,
    /// One line for `--help` listings.
    pub help: &'static str,
    /// Options read besides hosts and bytes: any of `nct`, `root`, `seed`, `shape`, or an
    /// algorithm-specific option (`k`, `m`, `rule`).
    pub takes: &'static [&'static str],
    /// The builder places the ranks itself; otherwise rank r runs on the job's r-th host.
    pub places_ranks: bool,
}

const fn algo(
    collective: &'static str,
    name: &'static str,
    help: &'static str,
    takes: &'static [&'static str],
) -> Algorithm {
    Algorithm { collective, name, help, takes, places_ranks: false }
}

/// Every algorithm, in listing order.
pub const ALGORITHMS: &[Algorithm] = &[
    algo("alltoall", "shift", "Pairwise: phase i sends S -> (S+i) mod N; every phase a permutation.", &[]),
    algo("alltoall", "linear", "Every rank walks ranks 0..N-1 in order: the hot-spot baseline.", &[]),
    algo("alltoall", "xor", "Phase i pairs S with S xor i (power-of-two N).", &[]),
    algo("alltoall", "bruck", "Bruck: ceil(log2 N) steps forwarding blocks, real per-step sizes.", &[]),
    algo("alltoall", "a2a", "Paper 001's A2A (MPICH SimpleSpread), NCT sends at a time.", &["nct"]),
    algo("alltoall", "a2and", "Paper 001's A2AND: lexicographic relative offsets on an n-D shape.", &["nct", "shape"]),
    algo("alltoall", "a2at", "Paper 001's A2AT: odd square 2-D shapes, NCT 1, 2 or 4.", &["nct", "shape"]),
    algo(
        "alltoall",
        "tree-phased",
        "Faraj-Yuan on a switch tree: contention-free phases, as few as the bottleneck link or port allows.",
        &[],
    ),
    algo("allgather", "ring", "Ring: N-1 steps passing one block to the right.", &[]),
    algo("allgather", "bruck", "Bruck: ceil(log2 N) steps, min(2^k, N-2^k) blocks each.", &[]),
    algo("allgather", "recursive-doubling", "Exchange with S xor 2^k, doubling blocks (power-of-two N).", &[]),
    algo("gather", "linear", "Every rank sends straight to the root, in one phase.", &["root"]),
    algo("gather", "binomial", "Binomial tree towards the root, subtrees forwarded.", &["root"]),
    algo("barrier", "dissemination", "Round k: S signals S + 2^k; ceil(log2 N) rounds.", &[]),
    algo(
        "barrier",
        "multicast",
        "Paper 002: gather + release over a unicast-based multicast tree of a random visiting list.",
        &["root", "seed"],
    ),
    Algorithm {
        collective: "alltoall",
        name: "lsft",
        help: "Paper 000: every server of a Latin-square fat-tree, one phase per shift-number triple; \
               contention-free under the lsft routing.",
        takes: &[],
        places_ranks: true,
    },
    Algorithm {
        collective: "alltoall",
        name: "lsft-partial",
        help: "Paper 000: n*k*m sub-cluster of an LSFT of order n (--k columns of grid leaves, --m servers \
               per leaf, m <= k <= n; --rule text or the erratum paper-table3); contention-free with the text rule.",
        takes: &["k", "m", "rule"],
        places_ranks: true,
    },
];

/// The collectives of the catalogue, in listing order.
pub fn collectives() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for a in ALGORITHMS {
        if !out.contains(&a.collective) {
            out.push(a.collective);
        }
    }
    out
}

/// Algorithm names for `collective`, in listing order.
pub fn algorithms(collective: &str) -> Vec<&'static str> {
    ALGORITHMS.iter().filter(|a| a.collective == collective).map(|a| a.name).collect()
}

/// The catalogue entry of `collective`/`name`, with an error listing the known names.
pub fn find(collective: &str, name: &str) -> Result<&'static Algorithm> {
    if !collectives().contains(&collective) {
        return invalid!("unknown collective '{collective}' (known: {})", collectives().join(", "));
    }
    match ALGORITHMS.iter().find(|a| a.collective == collective && a.name == name) {
        Some(a) => Ok(a),
        None => invalid!("unknown {collective} algorithm '{name}' (known: {})", algorithms(collective).join(", ")),
    }
}

/// A value of an algorithm-specific option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionValue {
    Int(u64),
    Text(String),
}

/// What the caller asks for: the job and the options given (None: not given).
#[derive(Clone, Debug, Default)]
pub struct Request<'a> {
    /// The fabric; with it the job is the hosts named by `hosts` in rank `order`.
    pub topology: Option<&'a Topology>,
    /// Host list (`all` when omitted; `0-15,20,leaf:2-3`); needs a topology.
    pub hosts: Option<&'a str>,
    /// Rank order over the hosts: `listed` (default), `cyclic`, `random` (with `seed`).
    pub order: Option<&'a str>,
    /// Without a topology: ranks on hosts `0..num_ranks`.
    pub num_ranks: Option<u32>,
    pub bytes: Option<u64>,
    pub nct: Option<u32>,
    pub root: Option<u32>,
    pub seed: Option<u64>,
    pub shape: Option<Vec<u32>>,
    /// Fat-trees take whole leaves unless this is set.
    pub allow_partial_leaves: bool,
    /// Algorithm-specific options by name (`k`, `m`, `rule`, or a plug-in's own).
    pub options: Vec<(String, OptionValue)>,
}

/// A checked job: the ranks' hosts and every option with its default filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// Host index of each rank.
    pub hosts: Vec<u32>,
    pub bytes: u64,
    /// The ranks' lattice shape, dimension 0 fastest, where the algorithm takes one and it is
    /// given or inferable.
    pub shape: Option<Vec<u32>>,
    pub nct: u32,
    pub root: u32,
    pub seed: u64,
    pub options: Vec<(String, OptionValue)>,
}

impl Job {
    fn int_option(&self, name: &str) -> Result<Option<u32>> {
        match self.options.iter().find(|(n, _)| n == name).map(|(_, v)| v) {
            None => Ok(None),
            Some(OptionValue::Int(v)) => match u32::try_from(*v) {
                Ok(v) => Ok(Some(v)),
                Err(_) => invalid!("--{name} {v} is too large"),
            },
            Some(OptionValue::Text(t)) => invalid!("--{name} takes an integer, got '{t}'"),
        }
    }

    fn text_option(&self, name: &str) -> Option<String> {
        self.options.iter().find(|(n, _)| n == name).map(|(_, v)| match v {
            OptionValue::Int(i) => i.to_string(),
            OptionValue::Text(t) => t.clone(),
        })
    }
}

/// The lattice shape of a job that covers a whole mesh or torus with one host per router, ranks
/// in router order; None otherwise.
pub fn grid_shape(topo: &Topology, hosts: &[u32]) -> Option<Vec<u32>> {
    let Structure::Lattice(lat) = topo.structure() else { return None };
    let whole = hosts.len() == topo.num_hosts() && hosts.iter().enumerate().all(|(i, &h)| h as usize == i);
    (lat.shape != LatticeShape::Hypercube && lat.hosts_per_router == 1 && whole).then(|| lat.dims.clone())
}

/// Check `request` against an algorithm taking `takes` and settle the job: place the ranks,
/// fill in defaults, infer the shape. `label` names the algorithm in errors (`alltoall a2at`).
pub fn job(label: &str, collective: &str, takes: &[&str], request: &Request) -> Result<Job> {
    let random_order = request.order == Some("random");
    let given = [
        ("nct", request.nct.is_some()),
        ("root", request.root.is_some()),
        ("seed", request.seed.is_some() && !random_order),
        ("shape", request.shape.is_some()),
    ];
    let extra: Vec<String> = given
        .iter()
        .filter(|(_, g)| *g)
        .map(|(n, _)| *n)
        .chain(request.options.iter().map(|(n, _)| n.as_str()))
        .filter(|n| !takes.contains(n))
        .map(|n| format!("--{n}"))
        .collect();
    if !extra.is_empty() {
        return invalid!("{label} does not take {}", extra.join(", "));
    }
    let ordering = alloc::RankOrdering::from_name(request.order.unwrap_or("listed"), request.seed.unwrap_or(0))?;
    let hosts = match (request.topology, request.num_ranks) {
        (Some(_), Some(_)) => {
            return invalid!("give either a topology (and a host list) or a number of ranks, not both")
        }
        (Some(topo), None) => {
            alloc::allocate(topo, request.hosts.unwrap_or("all"), ordering, request.allow_partial_leaves)?
        }
        (None, _) if request.hosts.is_some() => return invalid!("a host list needs a topology"),
        (None, Some(n)) => (0..n).collect(),
        (None, None) => return invalid!("give a topology or a number of ranks"),
    };
    let mut shape = request.shape.clone();
    if shape.is_none() && takes.contains(&"shape") {
        let n = hosts.len() as u32;
        let side = (n as f64).sqrt().round() as u32;
        shape = match request.topology {
            Some(topo) => grid_shape(topo, &hosts),
            None if label.ends_with(" a2at") => (side * side == n).then(|| vec![side, side]),
            None => Some(vec![n]),
        };
    }
    if let Some(dims) = &shape {
        let product: u64 = dims.iter().map(|&d| d as u64).product();
        if product != hosts.len() as u64 {
            let text: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            return invalid!("shape {} has {product} ranks but the job has {} hosts", text.join("x"), hosts.len());
        }
    }
    let default_bytes = if collective == "barrier" { DEFAULT_BARRIER_BYTES } else { DEFAULT_BYTES };
    Ok(Job {
        hosts,
        bytes: request.bytes.unwrap_or(default_bytes),
        shape,
        nct: request.nct.unwrap_or(1),
        root: request.root.unwrap_or(0),
        seed: request.seed.unwrap_or(0),
        options: request.options.clone(),
    })
}

/// Build `name` for `collective` as `request` asks.
pub fn build(collective: &str, name: &str, request: &Request) -> Result<Schedule> {
    let algorithm = find(collective, name)?;
    let job = job(&format!("{collective} {name}"), collective, algorithm.takes, request)?;
    let schedule = build_job(algorithm, &job, request.topology)?;
    if algorithm.places_ranks {
        Ok(schedule)
    } else {
        schedule.with_placement(job.hosts)
    }
}

fn build_job(algorithm: &Algorithm, job: &Job, topology: Option<&Topology>) -> Result<Schedule> {
    let n = job.hosts.len() as u32;
    let (bytes, nct, root) = (job.bytes, job.nct, job.root);
    let shape = || match &job.shape {
        Some(s) => Ok(s.clone()),
        None => invalid!(
            "{} needs the ranks' lattice shape: give --shape (e.g. 5x5) or run it on a whole mesh/torus",
            algorithm.name
        ),
    };
    match (algorithm.collective, algorithm.name) {
        ("alltoall", "shift") => Schedule::shift_alltoall(n, bytes),
        ("alltoall", "linear") => alltoall::linear(n, bytes),
        ("alltoall", "xor") => alltoall::xor(n, bytes),
        ("alltoall", "bruck") => alltoall::bruck(n, bytes),
        ("alltoall", "a2a") => alltoall::a2a(n, bytes, nct),
        ("alltoall", "a2and") => alltoall::a2and(&shape()?, bytes, nct),
        ("alltoall", "a2at") => alltoall::a2at(&shape()?, bytes, nct),
        ("alltoall", "tree-phased") => match topology {
            Some(topo) => tree_phased::TreePhased::new(topo, &job.hosts)?.schedule(n, bytes),
            // Ranks without a fabric sit on one switch: any host pairing is contention-free there.
            None => tree_phased::TreePhased::new(&one_switch(n)?, &(0..n).collect::<Vec<_>>())?.schedule(n, bytes),
        },
        ("allgather", "ring") => collectives::allgather_ring(n, bytes),
        ("allgather", "bruck") => collectives::allgather_bruck(n, bytes),
        ("allgather", "recursive-doubling") => collectives::allgather_recursive_doubling(n, bytes),
        ("gather", "linear") => collectives::gather_linear(n, bytes, root),
        ("gather", "binomial") => collectives::gather_binomial(n, bytes, root),
        ("barrier", "dissemination") => collectives::barrier_dissemination(n, bytes),
        ("barrier", "multicast") => collectives::barrier_multicast(n, bytes, root, job.seed),
        ("alltoall", "lsft") => {
            lsft::FullSystemAllToAll::for_topology(lsft_topology(algorithm, job, topology)?)?.schedule(bytes)
        }
        ("alltoall", "lsft-partial") => {
            let topo = lsft_topology(algorithm, job, topology)?;
            let (Some(k), Some(m)) = (job.int_option("k")?, job.int_option("m")?) else {
                return invalid!("lsft-partial needs --k (columns of the rectangle) and --m (servers per leaf)");
            };
            let rule: lsft::MoveRule = job.text_option("rule").as_deref().unwrap_or("text").parse()?;
            let layout = crate::topology::lsft::LsftLayout::from_topology(topo)?;
            lsft::SubClusterAllToAll::new(layout.order, k, m, rule, lsft::RankOrder::RowMajor)?
                .schedule(&layout, 0, bytes)
        }
        (c, a) => invalid!("{c} {a} is listed in the catalogue but has no builder"),
    }
}

/// `n` hosts on one gigabit switch: the fabric of a job given as a bare rank count.
fn one_switch(n: u32) -> Result<Topology> {
    use crate::topology::ethernet::{star_of_switches, GIGABIT_LAN};
    star_of_switches(n.max(1), n.max(1), GIGABIT_LAN, GIGABIT_LAN)
}

/// The job's LSFT; the LSFT schedules choose their hosts, so the job must be left at every host
/// in host order (the defaults of `--hosts` and `--order`).
fn lsft_topology<'t>(algorithm: &Algorithm, job: &Job, topology: Option<&'t Topology>) -> Result<&'t Topology> {
    let Some(topo) = topology else {
        return invalid!("{} needs a Latin-square fat-tree topology (netweave topo lsft)", algorithm.name);
    };
    if job.hosts.len() != topo.num_hosts() || job.hosts.iter().enumerate().any(|(i, &h)| h as usize != i) {
        let place = if algorithm.name == "lsft" {
            "every server of the LSFT, rank r on host r"
        } else {
            "the n x k rectangle of grid leaves with m servers on each"
        };
        return invalid!("{} places its ranks itself ({place}): leave --hosts all and --order listed", algorithm.name);
    }
    Ok(topo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{grid, lsft as lsft_topology};

    #[test]
    fn every_entry_builds_and_is_complete() {
        for a in ALGORITHMS.iter().filter(|a| !a.places_ranks) {
            let n = if a.name == "a2at" { 9 } else { 8 };
            let s = build(a.collective, a.name, &Request { num_ranks: Some(n), bytes: Some(4), ..Request::default() })
                .unwrap_or_else(|e| panic!("{} {}: {e}", a.collective, a.name));
            assert_eq!(s.num_ranks(), n, "{} {}", a.collective, a.name);
            assert!(s.check_complete().is_ok(), "{} {}", a.collective, a.name);
        }
    }

    #[test]
    fn options_not_taken_are_refused_by_name() {
        let r = Request { num_ranks: Some(4), nct: Some(2), ..Request::default() };
        assert!(build("alltoall", "shift", &r).unwrap_err().to_string().contains("does not take --nct"));
        let r = Request { num_ranks: Some(4), options: vec![("k".into(), OptionValue::Int(2))], ..Request::default() };
        assert!(build("alltoall", "a2a", &r).unwrap_err().to_string().contains("does not take --k"));
        let unknown = build("alltoall", "nope", &Request::default()).unwrap_err().to_string();
        assert!(unknown.contains("known: shift, linear"), "{unknown}");
    }

    #[test]
    fn shape_is_inferred_from_a_whole_torus_and_checked() {
        let torus = grid::torus(&[3, 3], 1).unwrap();
        let r = Request { topology: Some(&torus), ..Request::default() };
        assert_eq!(job("alltoall a2at", "alltoall", &["shape"], &r).unwrap().shape, Some(vec![3, 3]));
        let partial = Request { topology: Some(&torus), hosts: Some("0-7"), ..Request::default() };
        assert_eq!(job("alltoall a2at", "alltoall", &["shape"], &partial).unwrap().shape, None);
        let wrong = Request { num_ranks: Some(8), shape: Some(vec![3, 3]), ..Request::default() };
        assert!(job("x", "alltoall", &["shape"], &wrong).unwrap_err().to_string().contains("has 9 ranks"));
    }

    #[test]
    fn lsft_builds_place_their_own_ranks() {
        let topo = lsft_topology::latin_square_fat_tree(2, false, false).unwrap();
        let full = build("alltoall", "lsft", &Request { topology: Some(&topo), ..Request::default() }).unwrap();
        assert_eq!(full.num_phases(), 20);
        let sub = Request {
            topology: Some(&topo),
            options: vec![("k".into(), OptionValue::Int(2)), ("m".into(), OptionValue::Int(1))],
            ..Request::default()
        };
        assert_eq!(build("alltoall", "lsft-partial", &sub).unwrap().num_ranks(), 4);
        let moved = Request { topology: Some(&topo), hosts: Some("leaf:0-1"), ..Request::default() };
        assert!(build("alltoall", "lsft", &moved).unwrap_err().to_string().contains("places its ranks itself"));
    }
}
