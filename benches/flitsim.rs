//! Flit-level simulator throughput: simulated cycles per second on the BookSim comparison
//! configuration (16×16 torus, dimension-order routing with 2 dateline VCs, 8-flit buffers,
//! 10-flit packets, uniform traffic at 0.007 packets/cycle/host), single thread.
//!
//! `cargo bench -p netweave-core --bench flitsim`; the side-by-side ratio against BookSim2 is
//! measured by `benches/flitsim_vs_booksim.py`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use netweave_core::flitsim::{simulate, SimConfig};
use netweave_core::scenario::build_network;

fn config(k: u32, cycles_per_sample: u32) -> SimConfig {
    let mut c = SimConfig::default();
    for (key, value) in [
        ("topology", "torus".to_string()),
        ("k", k.to_string()),
        ("n", "2".into()),
        ("num_vcs", "2".into()),
        ("vc_buf_size", "8".into()),
        ("packet_size", "10".into()),
        ("traffic", "uniform".into()),
        ("injection_rate", "0.007".into()),
        ("sample_period", cycles_per_sample.to_string()),
        ("warmup_periods", "1".into()),
        ("max_samples", "4".into()),
    ] {
        c.set(key, &value).unwrap();
    }
    c
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("flitsim");
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    for k in [16u32, 32] {
        let cfg = config(k, 2_000);
        let (topo, routes) = build_network(&cfg).unwrap();
        let cycles = match simulate(&topo, &routes, &cfg, None, &|_| {}).unwrap() {
            netweave_core::flitsim::SimResult::OpenLoop(r) => r.cycles,
            _ => unreachable!(),
        };
        group.throughput(Throughput::Elements(cycles));
        group.bench_function(format!("torus{k}x{k}_uniform_0.007"), |b| {
            b.iter(|| black_box(simulate(&topo, &routes, &cfg, None, &|_| {}).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
