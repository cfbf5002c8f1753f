//! Exact analysis at paper 000's largest size.
//!
//! `cargo bench -p netweave-core --bench analysis`: the shift all-to-all on the Latin-square
//! fat-tree of order 17 (5,526 servers, 30,531,150 flows over 5,525 phases) routed by the `lsft`
//! engine, analysed on one thread and on all of them. The report matches paper 000's shift
//! ratio (0.108); the figures to watch are the one-thread CPU time and the peak memory, both
//! printed before criterion's own timings (a filter that matches no benchmark,
//! `cargo bench -p netweave-core --bench analysis -- none`, prints only them). Results and
//! method: `benches/README.md`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use netweave_core::analysis::analyze;
use netweave_core::routing::{route, Engine, RouteOptions};
use netweave_core::topology::lsft;
use netweave_core::traffic::Schedule;

/// CPU seconds this process has used (all threads), from `/proc/self/stat`; wall time on a
/// loaded machine says little, CPU time says what one core needs.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0) // USER_HZ is 100 on Linux
}

/// Peak resident memory of this process in MiB, from `/proc/self/status`.
fn peak_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<f64>().ok()? / 1024.0)
}

fn lsft_shift(c: &mut Criterion) {
    let topo = lsft::latin_square_fat_tree(17, false, false).unwrap();
    let routes = route(&topo, Engine::Lsft, &RouteOptions::default()).unwrap();
    let shift = Schedule::shift_alltoall(topo.num_hosts() as u32, 1 << 20).unwrap();
    // Reset the peak-RSS mark (Linux: writing 5 to clear_refs), so the peak below is the
    // analysis's own on top of the inputs, not the schedule generator's transient.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = peak_mib();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let runs = 5;
    let cpu = cpu_seconds();
    for _ in 0..runs {
        let report = one.install(|| analyze(&topo, &routes, &shift).unwrap());
        assert_eq!(report.flows, 5526 * 5525);
        assert!((report.throughput_ratio - 0.108).abs() < 5e-4);
    }
    if let (Some(a), Some(b)) = (cpu, cpu_seconds()) {
        println!("lsft q=17 shift: {:.3} CPU s per analysis on one thread (mean of {runs})", (b - a) / runs as f64);
    }
    let cpu = cpu_seconds();
    for _ in 0..runs {
        assert!(shift.completeness().ok());
    }
    if let (Some(a), Some(b)) = (cpu, cpu_seconds()) {
        println!("  of which the schedule's completeness check: {:.3} CPU s", (b - a) / runs as f64);
    }
    if let (Some(a), Some(b)) = (before, peak_mib()) {
        println!(
            "peak memory: {b:.0} MiB in all, {a:.0} MiB before analysing (topology, routes, 30.5 M-message schedule), \
             {:.0} MiB for the analysis",
            b - a
        );
    }

    let mut g = c.benchmark_group("analyze");
    g.sample_size(10);
    g.bench_function("lsft q=17 shift, 1 thread", |b| {
        b.iter(|| one.install(|| analyze(black_box(&topo), &routes, &shift).unwrap()))
    });
    g.bench_function("lsft q=17 shift, all threads", |b| {
        b.iter(|| analyze(black_box(&topo), &routes, &shift).unwrap())
    });
    g.finish();
}

criterion_group!(benches, lsft_shift);
criterion_main!(benches);
