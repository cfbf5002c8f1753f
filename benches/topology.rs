//! Topology generation and metrics at the sizes the issue names.
//!
//! `make bench` (or `cargo bench -p netweave-core --bench topology`): LSFT of order 17
//! (5,526 servers), a 32×32×32 torus (32,768 routers), and the exact diameter of the LSFT.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use netweave_core::topology::{grid, lsft, metrics};

fn generation(c: &mut Criterion) {
    let mut g = c.benchmark_group("generate");
    g.sample_size(10);
    g.bench_function("lsft q=17", |b| b.iter(|| lsft::latin_square_fat_tree(black_box(17), false, false).unwrap()));
    g.bench_function("torus 32x32x32", |b| b.iter(|| grid::torus(black_box(&[32, 32, 32]), 1).unwrap()));
    g.finish();

    let mut m = c.benchmark_group("metrics");
    m.sample_size(10);
    let t = lsft::latin_square_fat_tree(17, false, false).unwrap();
    m.bench_function("stats lsft q=17", |b| b.iter(|| metrics::stats(black_box(&t))));
    m.finish();
}

criterion_group!(benches, generation);
criterion_main!(benches);
