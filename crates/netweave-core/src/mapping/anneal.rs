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

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::sync::Arc;

use super::cost::{CostParts, Evaluator, Move, Objective};
use super::network::MapNetwork;
use super::pattern::Pattern;
use crate::error::Result;

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
            objective: Objective::RMATT,
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

#[cfg(test)]
mod tests {
    use super::*;
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
            // The evaluator leaves out step_max_link when the objective does not weigh it.
            assert_eq!(CostParts { step_max_link: 0, ..full_cost(&net, &p, best) }, parts);
            assert_eq!(value, parts.rmatt() as f64);
            (best.to_vec(), t.status())
        };
        let (a, sa) = run(cfg.clone());
        let (b, _) = run(cfg.clone());
        assert_eq!(a, b, "same seed, same result");
        assert!(sa.best_value < sa.start_value);
        assert_eq!(sa.evaluations, 20 * 3 * 300);
    }
}
