//! OPTIM: simulated annealing over placements, with parallel tempering across threads.
//!
//! A move picks a random box of `range` routers per dimension (wrapping on a torus, clipped
//! on a mesh) and rotates the contents of `num_swaps` distinct random slots inside it — paper
//! 003's RANGE / NUM_SWAPS operator; empty slots take part, so ranks also move into free
//! slots. On a topology without a lattice the slots are drawn from the whole network.
//!
//! Energies are normalised by the starting cost (`e = cost / cost₀`), so temperatures mean the
//! same on every problem: at `T = 10⁻³` an uphill move worth 0.1 % of the starting cost is taken
//! with probability `1/e`. [`Tempering`] runs `replicas` chains at temperatures spaced
//! geometrically from `t_min` (replica 0) to `t_max`, each on its own thread for one `sweep`
//! of moves per round, then offers exchanges between neighbouring temperatures (Metropolis on
//! `Δβ·ΔE`). Every chain has its own seeded RNG and exchanges are decided by the master's
//! seeded RNG, so a run of `n` rounds gives the same result whatever the thread timing.
//!
//! [`optimize`] runs the whole search under stop rules (time, evaluations, a target value, a
//! stall), in one process or over several that talk through the crate's [`Exchange`]: each
//! process runs its slice of one temperature ladder, and after every round the hottest chain
//! of process `p` and the coldest of `p + 1` are offered an exchange (even or odd pairs in
//! alternate rounds), decided identically on every process from a shared seeded stream.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::sync::Arc;

use super::cost::{Evaluator, Move};
use super::network::MapNetwork;
use super::objective::{CostParts, Objective};
use super::pattern::Pattern;
use crate::error::{NetweaveError, Result};
use crate::exchange::Exchange;

/// Annealing parameters.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AnnealConfig {
    pub objective: Objective,
    /// Box side in routers (paper's RANGE); 0 means the whole network.
    pub range: u32,
    /// Slots rotated per move (paper's NUM_SWAPS), at least 2.
    pub num_swaps: u32,
    /// Number of tempering chains (1 = plain annealing at `t_min`).
    pub replicas: u32,
    /// Coldest and hottest normalised temperatures.
    pub t_min: f64,
    pub t_max: f64,
    /// Moves per chain between exchanges.
    pub sweep: u32,
    pub seed: u64,
}

impl Default for AnnealConfig {
    fn default() -> Self {
        AnnealConfig {
            objective: Objective::HOPS_X_MAX_CHANNEL,
            range: 4,
            num_swaps: 2,
            replicas: 4,
            t_min: 1e-6,
            t_max: 3e-4,
            sweep: 2000,
            seed: 0,
        }
    }
}

impl AnnealConfig {
    fn check(&self) -> Result<()> {
        if self.num_swaps < 2 {
            return crate::invalid!("num_swaps must be at least 2, got {}", self.num_swaps);
        }
        if self.replicas == 0 || self.replicas > 256 {
            return crate::invalid!("replicas must be 1..=256, got {}", self.replicas);
        }
        if !(self.t_min > 0.0 && self.t_max >= self.t_min && self.t_max.is_finite()) {
            return crate::invalid!("temperatures need 0 < t_min <= t_max, got {} and {}", self.t_min, self.t_max);
        }
        if self.sweep == 0 {
            return crate::invalid!("sweep must be at least 1 move");
        }
        Ok(())
    }
}

/// Draws moves: `num_swaps` distinct slots in a random box of `range` routers per dimension.
#[derive(Clone, Debug)]
struct MoveMaker {
    range: Vec<u32>,
    num_swaps: u32,
    slots_per_router: u32,
    box_slots: u32,
}

impl MoveMaker {
    fn new(net: &MapNetwork, range: u32, num_swaps: u32) -> Self {
        match net.lattice() {
            Some(lat) if range > 0 => {
                let r: Vec<u32> = lat.dims.iter().map(|&k| range.min(k)).collect();
                let spr = lat.hosts_per_router * net.slots_per_host();
                let box_slots = r.iter().product::<u32>() * spr;
                MoveMaker { range: r, num_swaps: num_swaps.min(box_slots).max(2), slots_per_router: spr, box_slots }
            }
            _ => MoveMaker {
                range: Vec::new(),
                num_swaps: num_swaps.min(net.num_slots()).max(2),
                slots_per_router: 1,
                box_slots: net.num_slots(),
            },
        }
    }

    fn draw(&self, net: &MapNetwork, rng: &mut ChaCha8Rng, mv: &mut Move, origin: &mut Vec<u32>, x: &mut Vec<u32>) {
        mv.slots.clear();
        let k = self.num_swaps.min(self.box_slots) as usize;
        let Some(lat) = net.lattice().filter(|_| !self.range.is_empty()) else {
            while mv.slots.len() < k {
                let s = rng.gen_range(0..net.num_slots());
                if !mv.slots.contains(&s) {
                    mv.slots.push(s);
                }
            }
            return;
        };
        origin.clear();
        for (&dim, &r) in lat.dims.iter().zip(&self.range) {
            origin.push(if lat.wrap() { rng.gen_range(0..dim) } else { rng.gen_range(0..=dim - r) });
        }
        x.resize(lat.dims.len(), 0);
        while mv.slots.len() < k {
            let mut off = rng.gen_range(0..self.box_slots);
            let local = off % self.slots_per_router;
            off /= self.slots_per_router;
            for d in 0..lat.dims.len() {
                let o = off % self.range[d];
                off /= self.range[d];
                x[d] = (origin[d] + o) % lat.dims[d];
            }
            let s = lat.router_id(x) * self.slots_per_router + local;
            if !mv.slots.contains(&s) {
                mv.slots.push(s);
            }
        }
        // A random cyclic order: any rotation of distinct slots moves every occupant.
        mv.slots.shuffle(rng);
    }
}

/// One tempering chain.
#[derive(Clone, Debug)]
struct Chain {
    eval: Evaluator,
    temperature: f64,
    rng: ChaCha8Rng,
    energy: f64,
    best_energy: f64,
    best: Vec<u32>,
    best_parts: CostParts,
    accepted: u64,
}

/// Progress of a tempering run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AnnealStatus {
    pub rounds: u64,
    pub evaluations: u64,
    pub accepted: u64,
    pub exchanges: u64,
    /// Best exact figures so far and their objective value.
    pub best: CostParts,
    pub best_value: f64,
    pub start_value: f64,
    /// Current objective value of every chain (coldest first).
    pub energies: Vec<f64>,
}

/// Parallel tempering over placements (see the module docs).
pub struct Tempering {
    net: Arc<MapNetwork>,
    pattern: Arc<Pattern>,
    config: AnnealConfig,
    moves: MoveMaker,
    chains: Vec<Chain>,
    scale: f64,
    start_value: f64,
    rng: ChaCha8Rng,
    rounds: u64,
    evaluations: u64,
    exchanges: u64,
}

impl Tempering {
    /// Start every chain from `start` (`host_of_rank`).
    pub fn new(net: Arc<MapNetwork>, pattern: Arc<Pattern>, start: &[u32], config: AnnealConfig) -> Result<Self> {
        config.check()?;
        let eval = Evaluator::new(&net, &pattern, start, config.objective)?;
        let start_value = eval.value();
        let scale = if start_value > 0.0 { start_value } else { 1.0 };
        let moves = MoveMaker::new(&net, config.range, config.num_swaps);
        let n = config.replicas as usize;
        let mut master = ChaCha8Rng::seed_from_u64(config.seed);
        let chains = (0..n)
            .map(|i| {
                let t = if n == 1 {
                    config.t_min
                } else {
                    config.t_min * (config.t_max / config.t_min).powf(i as f64 / (n - 1) as f64)
                };
                Chain {
                    eval: eval.clone(),
                    temperature: t,
                    rng: ChaCha8Rng::seed_from_u64(master.gen()),
                    energy: start_value / scale,
                    best_energy: start_value / scale,
                    best: start.to_vec(),
                    best_parts: eval.parts(),
                    accepted: 0,
                }
            })
            .collect();
        Ok(Tempering {
            net,
            pattern,
            config,
            moves,
            chains,
            scale,
            start_value,
            rng: master,
            rounds: 0,
            evaluations: 0,
            exchanges: 0,
        })
    }

    /// One round: a sweep on every chain in parallel, then neighbour exchanges.
    pub fn round(&mut self) {
        let (net, pattern, moves, sweep, scale) =
            (&*self.net, &*self.pattern, &self.moves, self.config.sweep, self.scale);
        self.chains.par_iter_mut().for_each(|chain| {
            let mut mv = Move::default();
            let (mut origin, mut x) = (Vec::new(), Vec::new());
            let objective = chain.eval.objective();
            for _ in 0..sweep {
                moves.draw(net, &mut chain.rng, &mut mv, &mut origin, &mut x);
                let parts = chain.eval.propose(net, pattern, &mv);
                let e = objective.value(&parts) / scale;
                let de = e - chain.energy;
                if de <= 0.0 || chain.rng.gen::<f64>() < (-de / chain.temperature).exp() {
                    chain.eval.accept();
                    chain.energy = e;
                    chain.accepted += 1;
                    if e < chain.best_energy {
                        chain.best_energy = e;
                        chain.best_parts = parts;
                        chain.best.copy_from_slice(chain.eval.host_of_rank());
                    }
                } else {
                    chain.eval.reject();
                }
            }
        });
        self.evaluations += sweep as u64 * self.chains.len() as u64;
        self.exchange_neighbours();
        self.rounds += 1;
    }

    /// Offer swaps of neighbouring chains' states (alternating even/odd pairs per round).
    fn exchange_neighbours(&mut self) {
        let n = self.chains.len();
        let mut i = (self.rounds % 2) as usize;
        while i + 1 < n {
            let (a, b) = (&self.chains[i], &self.chains[i + 1]);
            let arg = (1.0 / a.temperature - 1.0 / b.temperature) * (a.energy - b.energy);
            if arg >= 0.0 || self.rng.gen::<f64>() < arg.exp() {
                let (lo, hi) = self.chains.split_at_mut(i + 1);
                std::mem::swap(&mut lo[i].eval, &mut hi[0].eval);
                std::mem::swap(&mut lo[i].energy, &mut hi[0].energy);
                self.exchanges += 1;
            }
            i += 2;
        }
    }

    /// Best placement found by any chain, with its figures.
    pub fn best(&self) -> (&[u32], CostParts, f64) {
        let c = self.chains.iter().min_by(|a, b| a.best_energy.total_cmp(&b.best_energy)).unwrap();
        (&c.best, c.best_parts, self.config.objective.value(&c.best_parts))
    }

    /// Progress figures.
    pub fn status(&self) -> AnnealStatus {
        let (_, best, best_value) = self.best();
        AnnealStatus {
            rounds: self.rounds,
            evaluations: self.evaluations,
            accepted: self.chains.iter().map(|c| c.accepted).sum(),
            exchanges: self.exchanges,
            best,
            best_value,
            start_value: self.start_value,
            energies: self.chains.iter().map(|c| c.energy * self.scale).collect(),
        }
    }

    /// Current placement and objective value of chain `i` (0 = coldest).
    pub fn chain_state(&self, i: usize) -> Option<(&[u32], f64)> {
        self.chains.get(i).map(|c| (c.eval.host_of_rank(), c.energy * self.scale))
    }

    /// Replace chain `i`'s current placement (used when chains of other processes exchange
    /// states); its best-so-far is kept and updated if the new state beats it.
    pub fn set_chain_state(&mut self, i: usize, host_of_rank: &[u32]) -> Result<()> {
        let Some(chain) = self.chains.get_mut(i) else {
            return crate::invalid!("no chain {i}");
        };
        let eval = Evaluator::new(&self.net, &self.pattern, host_of_rank, self.config.objective)?;
        chain.energy = eval.value() / self.scale;
        if chain.energy < chain.best_energy {
            chain.best_energy = chain.energy;
            chain.best_parts = eval.parts();
            chain.best.copy_from_slice(host_of_rank);
        }
        chain.eval = eval;
        Ok(())
    }

    /// Temperature of every chain, coldest first.
    pub fn temperatures(&self) -> Vec<f64> {
        self.chains.iter().map(|c| c.temperature).collect()
    }
    /// Overwrite the chains' temperatures (e.g. one slice of a ladder spread over processes).
    pub fn set_temperatures(&mut self, temps: &[f64]) -> Result<()> {
        if temps.len() != self.chains.len() || temps.iter().any(|&t| !(t > 0.0 && t.is_finite())) {
            return crate::invalid!("give {} positive temperatures", self.chains.len());
        }
        for (c, &t) in self.chains.iter_mut().zip(temps) {
            c.temperature = t;
        }
        Ok(())
    }
    /// Objective normalisation (the starting cost).
    pub fn scale(&self) -> f64 {
        self.scale
    }
}

// ---------------------------------------------------------------------------------------------
// The whole search: stop rules, and the ladder split over processes
// ---------------------------------------------------------------------------------------------

/// When [`optimize`] stops (the first rule met wins; none set means it runs until `seconds`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct StopRules {
    /// Wall-time budget; ignored when an evaluation budget is given (that run is reproducible).
    pub seconds: Option<f64>,
    /// Moves tried over all chains of all processes.
    pub evaluations: Option<u64>,
    /// Stop once the best objective value is at most this.
    pub target: Option<f64>,
    /// Stop after this many seconds without a better value.
    pub stall: Option<f64>,
}

/// Which stop rule ended a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoppedBy {
    Time,
    Evaluations,
    Target,
    Stall,
}

impl StoppedBy {
    /// The rule's name as reports print it (`time`, `evaluations`, `target`, `stall`).
    pub fn as_str(self) -> &'static str {
        match self {
            StoppedBy::Time => "time",
            StoppedBy::Evaluations => "evaluations",
            StoppedBy::Target => "target",
            StoppedBy::Stall => "stall",
        }
    }
    /// One byte on the wire: 0 is "go on".
    fn code(stop: Option<StoppedBy>) -> u8 {
        match stop {
            None => 0,
            Some(StoppedBy::Time) => 1,
            Some(StoppedBy::Evaluations) => 2,
            Some(StoppedBy::Target) => 3,
            Some(StoppedBy::Stall) => 4,
        }
    }
    fn from_code(code: u8) -> Option<StoppedBy> {
        [None, Some(StoppedBy::Time), Some(StoppedBy::Evaluations), Some(StoppedBy::Target), Some(StoppedBy::Stall)]
            .get(code as usize)
            .copied()
            .flatten()
    }
}

/// What [`optimize`] found; every process returns the same placement and counts.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Optimized {
    /// The best placement of any chain of any process.
    pub host_of_rank: Vec<u32>,
    /// Its objective value, and the start's.
    pub best_value: f64,
    pub start_value: f64,
    /// Moves tried over all processes.
    pub evaluations: u64,
    /// Wall time of the rounds (this process's clock).
    pub seconds: f64,
    /// `(seconds, best value over all processes)` at the start and after every round.
    pub trace: Vec<(f64, f64)>,
    pub processes: usize,
    pub stopped_by: StoppedBy,
}

/// Largest process count a ladder is split over (each process adds one exchange pair).
const MAX_PROCESSES: usize = 1 << 16;

/// Anneal from `start` with parallel tempering until a [`StopRules`] rule is met, over the
/// processes `link` connects (a [`crate::exchange::SoloExchange`] for one process).
///
/// `config.replicas` chains run in every process, on its slice of one geometric ladder of
/// `replicas × processes` temperatures from `t_min` to `t_max`; process `k` seeds its chains
/// from `seed × 1,000,003 + k`, and the exchanges between processes draw from a stream seeded
/// with `seed` alone — NumPy's `default_rng(seed)` stream, which the Python driver used before
/// this loop moved here, so a seed keeps the placement it gave. An evaluation budget shortens
/// the rounds (`sweep`) when it is smaller than one round, and gives the same result on every
/// run; time budgets and stall rules depend on the machine. The stop decision is rank 0's.
///
/// `on_round(status, seconds)` is called on every process after every round with that
/// process's figures (before the exchanges between processes); an error from it ends the run.
pub fn optimize(
    net: Arc<MapNetwork>,
    pattern: Arc<Pattern>,
    start: &[u32],
    config: AnnealConfig,
    stop: &StopRules,
    link: &mut dyn Exchange,
    on_round: &mut dyn FnMut(&AnnealStatus, f64) -> Result<()>,
) -> Result<Optimized> {
    let (rank, size) = (link.rank(), link.ranks());
    if size == 0 || rank >= size || size > MAX_PROCESSES {
        return crate::invalid!("rank {rank} of {size} processes (1 to {MAX_PROCESSES})");
    }
    let replicas = config.replicas as usize;
    let total = replicas * size;
    let mut config = config;
    if let Some(budget) = stop.evaluations {
        // A round is `sweep` moves on every chain: a budget smaller than one round gets shorter
        // rounds, so it runs at most one move per chain more than asked, not thousands more.
        config.sweep = config.sweep.min(budget.div_ceil(total as u64).min(u32::MAX as u64) as u32).max(1);
    }
    let ladder = temperature_ladder(config.t_min, config.t_max, total);
    let run_seed = config.seed;
    config.seed = run_seed.checked_mul(1_000_003).and_then(|s| s.checked_add(rank as u64)).ok_or_else(|| {
        NetweaveError::InvalidParameter(format!("seed {run_seed} is too large (at most 2^64 / 1,000,003)"))
    })?;
    let mut tempering = Tempering::new(net, pattern, start, config)?;
    tempering.set_temperatures(&ladder[rank * replicas..(rank + 1) * replicas])?;
    let mut draws = SharedDraws::new(run_seed);

    let t0 = std::time::Instant::now();
    let start_value = tempering.status().start_value;
    let mut trace = vec![(0.0, start_value)];
    let (mut best_seen, mut best_at) = (start_value, 0.0);
    let stopped_by = loop {
        tempering.round();
        let status = tempering.status();
        let (global_best, global_evaluations) = if size > 1 {
            exchange_across_processes(&mut tempering, link, &ladder, &mut draws, &status)?
        } else {
            (status.best_value, status.evaluations)
        };
        let elapsed = t0.elapsed().as_secs_f64();
        trace.push((elapsed, global_best));
        if global_best < best_seen {
            (best_seen, best_at) = (global_best, elapsed);
        }
        on_round(&status, elapsed)?;
        let mut verdict = None;
        if stop.target.is_some_and(|target| global_best <= target) {
            verdict = Some(StoppedBy::Target);
        } else if stop.evaluations.is_some_and(|budget| global_evaluations >= budget) {
            verdict = Some(StoppedBy::Evaluations);
        } else if stop.evaluations.is_none() && stop.seconds.is_some_and(|budget| elapsed >= budget) {
            verdict = Some(StoppedBy::Time);
        } else if stop.stall.is_some_and(|stall| elapsed - best_at >= stall) {
            verdict = Some(StoppedBy::Stall);
        }
        if size > 1 {
            // Clocks differ between processes: rank 0's decision holds for all.
            let decided = link.broadcast(0, &[StoppedBy::code(verdict)])?;
            verdict = decided.first().and_then(|&c| StoppedBy::from_code(c));
        }
        if let Some(by) = verdict {
            break by;
        }
    };
    let seconds = t0.elapsed().as_secs_f64();
    let (best, _, best_value) = tempering.best();
    let (mut host_of_rank, mut best_value, mut evaluations) =
        (best.to_vec(), best_value, tempering.status().evaluations);
    if size > 1 {
        let mine = [best_value.to_le_bytes(), evaluations.to_le_bytes()].concat();
        let every = link.all_gather(&mine)?;
        let figures: Vec<(f64, u64)> = every.iter().enumerate().map(|(k, b)| read_pair(k, b)).collect::<Result<_>>()?;
        // The first process holding the lowest value owns the answer.
        let owner = (0..size).fold(0, |o, k| if figures[k].0 < figures[o].0 { k } else { o });
        best_value = figures[owner].0;
        evaluations = figures.iter().map(|f| f.1).sum();
        host_of_rank = decode_placement(&link.broadcast(owner, &encode_placement(&host_of_rank))?, host_of_rank.len())?;
    }
    Ok(Optimized { host_of_rank, best_value, start_value, evaluations, seconds, trace, processes: size, stopped_by })
}

/// `n` temperatures spaced geometrically from `t_min` to `t_max` (one: `t_min`).
fn temperature_ladder(t_min: f64, t_max: f64, n: usize) -> Vec<f64> {
    let steps = n.saturating_sub(1).max(1) as f64;
    (0..n).map(|i| t_min * (t_max / t_min).powf(i as f64 / steps)).collect()
}

/// After a round: offer the exchanges between neighbouring processes' end chains and return
/// the best value and the evaluations over all processes (from `status`, taken before).
fn exchange_across_processes(
    tempering: &mut Tempering,
    link: &mut dyn Exchange,
    ladder: &[f64],
    draws: &mut SharedDraws,
    status: &AnnealStatus,
) -> Result<(f64, u64)> {
    let (rank, size) = (link.rank(), link.ranks());
    let replicas = tempering.chains.len();
    let scale = tempering.scale();
    // Energies as the chains report them (value) and back (÷ scale), as every process sees them.
    let energy = |t: &Tempering, i: usize| t.chains[i].energy * scale / scale;
    let mine = [
        energy(tempering, 0).to_le_bytes(),
        energy(tempering, replicas - 1).to_le_bytes(),
        status.best_value.to_le_bytes(),
        status.evaluations.to_le_bytes(),
    ]
    .concat();
    let every = link.all_gather(&mine)?;
    let mut ends = Vec::with_capacity(size);
    for (k, letter) in every.iter().enumerate() {
        if letter.len() != 32 {
            return Err(malformed(k));
        }
        let word = |i: usize| <[u8; 8]>::try_from(&letter[8 * i..8 * i + 8]).unwrap();
        ends.push((
            f64::from_le_bytes(word(0)),
            f64::from_le_bytes(word(1)),
            f64::from_le_bytes(word(2)),
            u64::from_le_bytes(word(3)),
        ));
    }
    let global_best = ends.iter().map(|e| e.2).fold(f64::INFINITY, f64::min);
    let global_evaluations = ends.iter().map(|e| e.3).sum();

    let uniform: Vec<f64> = (0..size).map(|_| draws.next_f64()).collect();
    let round = tempering.rounds;
    let mut partner = None;
    let mut any = false;
    for p in ((round % 2) as usize..size - 1).step_by(2) {
        let (t_hot, t_cold) = (ladder[(p + 1) * replicas - 1], ladder[(p + 1) * replicas]);
        let (e_hot, e_cold) = (ends[p].1, ends[p + 1].0);
        let arg = (1.0 / t_hot - 1.0 / t_cold) * (e_hot - e_cold);
        if !(arg >= 0.0 || uniform[p] < arg.exp()) {
            continue;
        }
        any = true;
        if rank == p {
            partner = Some((p + 1, replicas - 1));
        } else if rank == p + 1 {
            partner = Some((p, 0));
        }
    }
    if any {
        // Every process knows whether any pair swaps, so all or none take part.
        let mut out = vec![Vec::new(); size];
        if let Some((other, chain)) = partner {
            out[other] = encode_placement(tempering.chains[chain].eval.host_of_rank());
        }
        let got = link.exchange(out)?;
        if let Some((other, chain)) = partner {
            let n = tempering.chains[chain].best.len();
            tempering.set_chain_state(chain, &decode_placement(&got[other], n)?)?;
        }
    }
    Ok((global_best, global_evaluations))
}

fn malformed(from: usize) -> NetweaveError {
    NetweaveError::InvalidParameter(format!(
        "malformed tempering letter from process {from}: processes run different netweave builds?"
    ))
}

fn read_pair(from: usize, letter: &[u8]) -> Result<(f64, u64)> {
    if letter.len() != 16 {
        return Err(malformed(from));
    }
    let (a, b) = letter.split_at(8);
    Ok((f64::from_le_bytes(a.try_into().unwrap()), u64::from_le_bytes(b.try_into().unwrap())))
}

fn encode_placement(host_of_rank: &[u32]) -> Vec<u8> {
    host_of_rank.iter().flat_map(|h| h.to_le_bytes()).collect()
}

fn decode_placement(letter: &[u8], ranks: usize) -> Result<Vec<u32>> {
    if letter.len() != 4 * ranks {
        return crate::invalid!(
            "a placement of {} bytes for {ranks} ranks: processes run different jobs?",
            letter.len()
        );
    }
    Ok(letter.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).collect())
}

/// The uniform draws every process makes alike to decide exchanges between processes: NumPy's
/// `default_rng(seed).random()` stream (PCG64 seeded through `SeedSequence`), kept from the
/// Python driver this loop replaced so that a seed gives the placement it gave before.
struct SharedDraws {
    state: u128,
    increment: u128,
}

impl SharedDraws {
    const MULTIPLIER: u128 = (2549297995355413924u128 << 64) + 4865540595714422341;

    fn new(seed: u64) -> Self {
        let words = seed_sequence_words(seed);
        let initial = ((words[0] as u128) << 64) | words[1] as u128;
        let sequence = ((words[2] as u128) << 64) | words[3] as u128;
        let mut rng = SharedDraws { state: 0, increment: (sequence << 1) | 1 };
        rng.step();
        rng.state = rng.state.wrapping_add(initial);
        rng.step();
        rng
    }
    fn step(&mut self) {
        self.state = self.state.wrapping_mul(Self::MULTIPLIER).wrapping_add(self.increment);
    }
    fn next_u64(&mut self) -> u64 {
        self.step();
        // XSL-RR output: fold the halves, rotate by the top six bits.
        ((self.state >> 64) as u64 ^ self.state as u64).rotate_right((self.state >> 122) as u32)
    }
    /// Uniform in [0, 1) with 53 random bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9007199254740992.0)
    }
}

/// NumPy's `SeedSequence(seed).generate_state(4, uint64)`: the seed's 32-bit words hashed into
/// a pool of four, then four 64-bit words drawn from the pool.
fn seed_sequence_words(seed: u64) -> [u64; 4] {
    const INIT_A: u32 = 0x43b0_d7e5;
    const MULT_A: u32 = 0x931e_8875;
    const INIT_B: u32 = 0x8b51_f9dd;
    const MULT_B: u32 = 0x58f3_8ded;
    const MIX_MULT_L: u32 = 0xca01_f9dd;
    const MIX_MULT_R: u32 = 0x4973_f715;
    let entropy: Vec<u32> = if seed >> 32 == 0 { vec![seed as u32] } else { vec![seed as u32, (seed >> 32) as u32] };
    let mut hash_const = INIT_A;
    let mut hashmix = |value: u32| {
        let mut v = value ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_A);
        v = v.wrapping_mul(hash_const);
        v ^ (v >> 16)
    };
    let mix = |x: u32, y: u32| {
        let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
        r ^ (r >> 16)
    };
    let mut pool = [0u32; 4];
    for (i, slot) in pool.iter_mut().enumerate() {
        *slot = hashmix(entropy.get(i).copied().unwrap_or(0));
    }
    for src in 0..4 {
        for dst in 0..4 {
            if src != dst {
                let h = hashmix(pool[src]);
                pool[dst] = mix(pool[dst], h);
            }
        }
    }
    let mut hash_const = INIT_B;
    let mut words = [0u32; 8];
    for (i, word) in words.iter_mut().enumerate() {
        let mut v = pool[i % 4] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        v = v.wrapping_mul(hash_const);
        *word = v ^ (v >> 16);
    }
    std::array::from_fn(|k| words[2 * k] as u64 | (words[2 * k + 1] as u64) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::SoloExchange;
    use crate::mapping::baselines;
    use crate::mapping::cost::full_cost;
    use crate::routing::{route, Engine, RouteOptions};
    use crate::topology::grid::torus;

    fn setup() -> (Arc<MapNetwork>, Arc<Pattern>) {
        let t = torus(&[4, 4, 4], 1).unwrap();
        let r = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
        (Arc::new(MapNetwork::new(&t, &r, 1).unwrap()), Arc::new(Pattern::bruck(64, 2048).unwrap()))
    }

    #[test]
    fn tempering_improves_and_is_reproducible() {
        let (net, p) = setup();
        let start = baselines::random(&net, 64, 1).unwrap();
        let cfg = AnnealConfig { replicas: 3, sweep: 300, seed: 5, range: 3, num_swaps: 3, ..Default::default() };
        let run = |cfg: AnnealConfig| {
            let mut t = Tempering::new(net.clone(), p.clone(), &start, cfg).unwrap();
            for _ in 0..20 {
                t.round();
            }
            let (best, parts, value) = t.best();
            // The evaluator leaves out step_max_channel_bytes when the objective does not weigh it.
            assert_eq!(CostParts { step_max_channel_bytes: 0, ..full_cost(&net, &p, best) }, parts);
            assert_eq!(value, parts.hops_x_max_channel() as f64);
            (best.to_vec(), t.status())
        };
        let (a, sa) = run(cfg.clone());
        let (b, _) = run(cfg.clone());
        assert_eq!(a, b, "same seed, same result");
        assert!(sa.best_value < sa.start_value);
        assert_eq!(sa.evaluations, 20 * 3 * 300);
    }

    #[test]
    fn shared_draws_follow_numpys_default_rng() {
        // np.random.default_rng(seed).random(5), printed by NumPy 2.4.
        let cases: [(u64, [f64; 5]); 4] = [
            (
                0,
                [0.6369616873214543, 0.2697867137638703, 0.04097352393619469, 0.016527635528529094, 0.8132702392002724],
            ),
            (3, [0.08564916714362436, 0.2368105065960997, 0.8012744652063969, 0.5821620360643678, 0.09412864224039919]),
            (
                1_000_003,
                [0.6383106515474324, 0.5802748401508796, 0.5192489220711785, 0.5803087147952103, 0.9168120462707734],
            ),
            (
                (1 << 40) + 5,
                [0.004739459374490829, 0.3725845824112115, 0.5872294266977701, 0.15139964872492384, 0.4199600159213578],
            ),
        ];
        for (seed, want) in cases {
            let mut draws = SharedDraws::new(seed);
            let got: Vec<f64> = (0..5).map(|_| draws.next_f64()).collect();
            assert_eq!(got, want, "seed {seed}");
        }
    }

    #[test]
    fn ladder_is_geometric_from_t_min_to_t_max() {
        let ladder = temperature_ladder(1e-6, 1e-4, 3);
        assert_eq!(ladder[0], 1e-6);
        assert!((ladder[1] - 1e-5).abs() < 1e-18 && (ladder[2] - 1e-4).abs() < 1e-18, "{ladder:?}");
        assert_eq!(temperature_ladder(2e-6, 5e-4, 1), vec![2e-6]);
    }

    #[test]
    fn optimize_in_one_process_is_the_tempering_run_with_a_budget() {
        let (net, p) = setup();
        let start = baselines::random(&net, 64, 2).unwrap();
        let cfg = AnnealConfig { replicas: 2, sweep: 500, seed: 4, ..Default::default() };
        let stop = StopRules { evaluations: Some(4_500), ..Default::default() };
        let mut rounds_seen = 0;
        let got = optimize(net.clone(), p.clone(), &start, cfg.clone(), &stop, &mut SoloExchange, &mut |_, _| {
            rounds_seen += 1;
            Ok(())
        })
        .unwrap();
        // 4,500 moves over 2 chains of 500 a round: 5 rounds (1,000 each), the fifth passing the budget.
        assert_eq!((rounds_seen, got.evaluations, got.stopped_by), (5, 5_000, StoppedBy::Evaluations));
        assert_eq!(got.trace.len(), 6);
        let mut by_hand =
            Tempering::new(net.clone(), p.clone(), &start, AnnealConfig { seed: 4 * 1_000_003, ..cfg }).unwrap();
        for _ in 0..5 {
            by_hand.round();
        }
        assert_eq!(by_hand.best().0, &got.host_of_rank[..]);
        assert_eq!(got.best_value, full_cost(&net, &p, &got.host_of_rank).hops_x_max_channel() as f64);
        assert_eq!(got.start_value, full_cost(&net, &p, &start).hops_x_max_channel() as f64);
    }

    #[test]
    fn optimize_over_thread_ranks_agrees_on_one_answer_and_repeats() {
        let (net, p) = setup();
        let start = baselines::random(&net, 64, 3).unwrap();
        let run = || {
            let handles: Vec<_> = crate::exchange::local_group(3)
                .into_iter()
                .map(|mut link| {
                    let (net, p, start) = (net.clone(), p.clone(), start.clone());
                    std::thread::spawn(move || {
                        let cfg = AnnealConfig { replicas: 1, sweep: 200, seed: 9, ..Default::default() };
                        let stop = StopRules { evaluations: Some(6_000), ..Default::default() };
                        optimize(net, p, &start, cfg, &stop, &mut link, &mut |_, _| Ok(())).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
        };
        let first = run();
        for r in &first[1..] {
            assert_eq!(
                (&r.host_of_rank, r.best_value, r.evaluations),
                (&first[0].host_of_rank, first[0].best_value, first[0].evaluations)
            );
        }
        // 3 processes x 1 chain x 200 moves a round reach 6,000 after 10 rounds.
        assert_eq!((first[0].evaluations, first[0].processes, first[0].trace.len()), (6_000, 3, 11));
        assert_eq!(first[0].best_value, full_cost(&net, &p, &first[0].host_of_rank).hops_x_max_channel() as f64);
        assert!(first[0].best_value < first[0].start_value);
        let again = run();
        assert_eq!(again[0].host_of_rank, first[0].host_of_rank, "same seed, same result");
    }
}
