//! Mapping benchmark on paper 003's case: the 4,096-rank Bruck allgather on a 16×16×16 torus.
//!
//! Reports candidate evaluations per second of the incremental evaluator with each route
//! source of `MapNetwork` — the flattened `dor` routing table (67 MB of next-channel entries)
//! and the lattice source (routes from coordinates) — against the full recount (the paper's
//! method), all measured in the same run, per CPU-second of the measuring thread; then the time
//! parallel tempering from BISEM needs to reach bit-reversal's `hops_x_max_channel` on 1 and 2
//! threads. The evaluator runs `hops_x_max_channel` (paper 003), and once more the step-aware
//! `step_max_channel_bytes` cost.
//!
//! `cargo bench -p netweave-core --bench mapping` (set `MAP_BENCH_SECONDS` to change the
//! annealing budget, default 60).

use std::sync::Arc;
use std::time::Instant;

use netweave_core::mapping::anneal::{AnnealConfig, Tempering};
use netweave_core::mapping::cost::{full_cost, Evaluator, Move, Objective};
use netweave_core::mapping::{baselines, bisem::bisem, MapNetwork, Pattern};
use netweave_core::routing::{route, select::Select, Engine, RouteOptions};
use netweave_core::topology::grid::torus;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// CPU time of this thread in seconds (Linux), so rates stay meaningful on a loaded machine.
fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()))
        .map_or(f64::NAN, |ns| ns * 1e-9)
}

fn main() {
    let budget: f64 = std::env::var("MAP_BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(60.0);
    let t = Instant::now();
    let topo = torus(&[16, 16, 16], 1).unwrap();
    let routes =
        route(&topo, Engine::Dor, &RouteOptions { select: Select::LowPort, ..RouteOptions::default() }).unwrap();
    let table_net = MapNetwork::new(&topo, &routes, 1).unwrap();
    println!("setup, table source (dor table built, flattened, all pairs walked): {:.2} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let net = Arc::new(MapNetwork::dor_lattice(&topo, Select::LowPort, 1).unwrap());
    println!("setup, lattice source (routes from coordinates): {:.3} s", t.elapsed().as_secs_f64());
    let pattern = Arc::new(Pattern::bruck(4096, 2048).unwrap());

    // Candidate evaluations: random swaps of two ranks at most 2 routers apart per axis.
    let start = bisem(&net, &pattern, None, 1).unwrap().host_of_rank;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let moves: Vec<Move> = (0..400_000)
        .map(|_| {
            let a = rng.gen_range(0..4096u32);
            let (ax, ay, az) = (a % 16, (a / 16) % 16, a / 256);
            let d = |x: u32, rng: &mut ChaCha8Rng| (x + 16 + rng.gen_range(0..4) - 2) % 16;
            let b = d(ax, &mut rng) + 16 * d(ay, &mut rng) + 256 * d(az, &mut rng);
            Move { slots: if a == b { vec![a, (a + 1) % 4096] } else { vec![a, b] } }
        })
        .collect();
    let mut sink = 0u64;
    let mut rate = |net: &MapNetwork, moves: &[Move], objective: Objective| {
        let mut ev = Evaluator::new(net, &pattern, &start, objective).unwrap();
        let (t, cpu) = (Instant::now(), thread_cpu_seconds());
        for (i, mv) in moves.iter().enumerate() {
            sink ^= ev.propose(net, &pattern, mv).max_channel_bytes;
            // Accept one move in 64 so the loads keep changing, as in an annealing run.
            if i % 64 == 0 {
                ev.accept();
            } else {
                ev.reject();
            }
        }
        (moves.len() as f64 / t.elapsed().as_secs_f64(), moves.len() as f64 / (thread_cpu_seconds() - cpu))
    };
    let (table_wall, table_cpu) = rate(&table_net, &moves[..100_000], Objective::HOPS_X_MAX_CHANNEL);
    let (lattice_wall, lattice_cpu) = rate(&net, &moves, Objective::HOPS_X_MAX_CHANNEL);
    let (step_wall, step_cpu) = rate(&net, &moves[..100_000], Objective::STEP_MAX_CHANNEL_BYTES);
    drop(table_net);
    let (t, cpu) = (Instant::now(), thread_cpu_seconds());
    let mut hor = start.clone();
    let full_n = 20;
    for mv in moves.iter().take(full_n) {
        hor.swap(mv.slots[0] as usize, mv.slots[1] as usize); // another permutation to recount
        sink ^= full_cost(&net, &pattern, &hor).max_channel_bytes;
    }
    let full = full_n as f64 / t.elapsed().as_secs_f64();
    let full_cpu = full_n as f64 / (thread_cpu_seconds() - cpu);
    println!("incremental evaluations/s, table source:   {table_wall:>10.0} wall, {table_cpu:>10.0} per CPU-second");
    println!(
        "incremental evaluations/s, lattice source: {lattice_wall:>10.0} wall, {lattice_cpu:>10.0} per CPU-second \
         (lattice/table {:.2}x)",
        lattice_cpu / table_cpu
    );
    println!(
        "incremental evaluations/s, lattice source, step_max_channel_bytes cost (12 steps): {step_wall:>10.0} wall, \
         {step_cpu:>10.0} per CPU-second"
    );
    println!(
        "full recount evaluations/s: {full:>9.1} wall, {full_cpu:>10.1} per CPU-second (lattice incremental/full {:.0}x; paper 003: 5.6/s)",
        lattice_cpu / full_cpu
    );
    let _ = sink;

    // Time to quality: bit-reversal's cost, from BISEM.
    let bitrev = full_cost(&net, &pattern, &baselines::bit_reversal(&net, 4096).unwrap()).hops_x_max_channel() as f64;
    for replicas in [1u32, 2] {
        let cfg = AnnealConfig { replicas, sweep: 5000, seed: 11, ..AnnealConfig::default() };
        let mut pt = Tempering::new(net.clone(), pattern.clone(), &start, cfg).unwrap();
        let t = Instant::now();
        let mut reached = None;
        while t.elapsed().as_secs_f64() < budget {
            pt.round();
            let s = pt.status();
            if reached.is_none() && s.best_value <= bitrev {
                reached = Some(t.elapsed().as_secs_f64());
            }
        }
        let s = pt.status();
        println!(
            "tempering, {replicas} chain(s): start {:.4e}, best {:.4e} (bit-reversal {:.4e}, ratio {:.3}), \
             {} evaluations in {:.0} s ({:.0}/s), bit-reversal's cost reached after {}",
            s.start_value,
            s.best_value,
            bitrev,
            s.best_value / bitrev,
            s.evaluations,
            t.elapsed().as_secs_f64(),
            s.evaluations as f64 / t.elapsed().as_secs_f64(),
            reached.map_or("never".to_string(), |x| format!("{x:.1} s"))
        );
    }
}
