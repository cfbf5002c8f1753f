//! Every file reader fed hostile bytes: random bytes, and valid files with bytes flipped,
//! cut short, spliced or with numbers swapped for huge ones. A reader may refuse — with one
//! line — but must never panic, abort or hang.
//!
//! Bounded for CI (`cargo test -p netweave-core --test fuzz_readers`, 64 cases per reader by
//! default, well under a minute in all) and seeded, so a run is repeatable: `make fuzz` runs the
//! same properties with many more cases (`PROPTEST_CASES`), `PROPTEST_RNG_SEED=N` explores other
//! inputs. Crashes found are kept as regression cases in [`regressions`] below.

use netweave_core::mapping::pattern_files::{self, PatternFormat};
use netweave_core::routing::io::{json as routes_json, lft};
use netweave_core::routing::{route, Engine, RouteOptions, RoutingTable};
use netweave_core::topology::grid::{mesh, torus};
use netweave_core::topology::io::{self as topo_io, Format};
use netweave_core::topology::Topology;
use netweave_core::traffic::dag::{Dependency, TaskGraph};
use netweave_core::traffic::{alltoall, io as sched_io, Message};
use netweave_core::NetweaveError;
use proptest::prelude::*;

/// Cases per reader unless `PROPTEST_CASES` says otherwise.
const DEFAULT_CASES: u32 = 64;
/// The inputs' seed unless `PROPTEST_RNG_SEED` says otherwise.
const DEFAULT_SEED: u64 = 2026;

fn config() -> ProptestConfig {
    use proptest::test_runner::RngSeed;
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(DEFAULT_CASES);
    // proptest reads PROPTEST_RNG_SEED itself; without it, our seed instead of a random one.
    let defaults = ProptestConfig::default();
    let rng_seed = match defaults.rng_seed {
        RngSeed::Random => RngSeed::Fixed(DEFAULT_SEED),
        given => given,
    };
    ProptestConfig { cases, failure_persistence: None, rng_seed, ..defaults }
}

/// A refusal must be one line: the CLI prints it as `error: <message>`.
fn one_line<T>(result: Result<T, NetweaveError>) -> Result<(), TestCaseError> {
    if let Err(e) = result {
        let text = e.to_string();
        prop_assert!(!text.contains('\n'), "a multi-line error: {text:?}");
        prop_assert!(!text.is_empty());
    }
    Ok(())
}

/// Small fabrics and their files, the seeds the mutations start from.
struct Seeds {
    mesh: Topology,
    routes: RoutingTable,
    topology_texts: Vec<(Format, String)>,
    routes_json: String,
    lft: String,
    schedule_json: String,
    schedule_nws: Vec<u8>,
    dag_json: String,
    dag_nws: Vec<u8>,
}

fn seeds() -> Seeds {
    let mesh = mesh(&[3, 2], 1).unwrap();
    let routes = route(&mesh, Engine::MinHop, &RouteOptions::default()).unwrap();
    let small_torus = torus(&[3, 3], 1).unwrap();
    let topology_texts = [Format::Json, Format::IbNet, Format::AnyNet, Format::Dot]
        .into_iter()
        .map(|f| (f, topo_io::write(&small_torus, f).unwrap()))
        .collect();
    let lids = lft::LidMap::sequential(&mesh).unwrap();
    let schedule = alltoall::shift(4, 96).unwrap();
    let mut dag = TaskGraph::new("relay", 3);
    let a = dag.add_task(Message { src: 2, dst: 1, bytes: 8 }, &[]).unwrap();
    dag.add_task(Message { src: 1, dst: 0, bytes: 8 }, &[]).unwrap();
    dag.add_task(Message { src: 1, dst: 0, bytes: 8 }, &[(a, Dependency::Relay)]).unwrap();
    Seeds {
        routes_json: routes_json::write(&mesh, &routes).unwrap(),
        lft: lft::write(&mesh, &routes, &lids).unwrap(),
        schedule_json: sched_io::to_json(&schedule),
        schedule_nws: sched_io::to_binary(&schedule).unwrap(),
        dag_json: dag.to_json(),
        dag_nws: sched_io::dag_to_binary(&dag),
        mesh,
        routes,
        topology_texts,
    }
}

/// How a seed file is damaged.
#[derive(Clone, Debug)]
enum Mutation {
    /// Overwrite the byte at (position mod length).
    Flip(usize, u8),
    /// Keep only the first (position mod length) bytes.
    Cut(usize),
    /// Insert bytes at (position mod length).
    Insert(usize, Vec<u8>),
    /// Replace the n-th run of digits with a huge or odd number.
    Number(usize, &'static str),
    /// Copy a slice of the file over another place of it.
    Splice(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::Flip(p, b)),
        any::<usize>().prop_map(Mutation::Cut),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..8)).prop_map(|(p, b)| Mutation::Insert(p, b)),
        (
            0usize..64,
            prop::sample::select(vec![
                "0",
                "-1",
                "4294967295",
                "4294967296",
                "18446744073709551615",
                "18446744073709551616",
                "99999999999999999999999",
                "1e308",
                "NaN",
                "-0",
                "65535",
                "65536",
                "2147483648",
            ])
        )
            .prop_map(|(n, v)| Mutation::Number(n, v)),
        (any::<usize>(), any::<usize>(), 1usize..64).prop_map(|(a, b, n)| Mutation::Splice(a, b, n)),
    ]
}

fn mutate(seed: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for m in mutations {
        let len = data.len().max(1);
        match m {
            Mutation::Flip(p, b) => {
                if !data.is_empty() {
                    data[p % len] = *b;
                }
            }
            Mutation::Cut(p) => data.truncate(p % len),
            Mutation::Insert(p, bytes) => {
                let at = p % (data.len() + 1);
                data.splice(at..at, bytes.iter().copied());
            }
            Mutation::Number(n, value) => {
                let runs: Vec<(usize, usize)> = digit_runs(&data);
                if let Some(&(start, end)) = runs.get(n % runs.len().max(1)) {
                    data.splice(start..end, value.bytes());
                }
            }
            Mutation::Splice(a, b, n) => {
                if !data.is_empty() {
                    let (from, to) = (a % len, b % len);
                    let n = (*n).min(len - from).min(len - to);
                    let piece: Vec<u8> = data[from..from + n].to_vec();
                    data[to..to + n].copy_from_slice(&piece);
                }
            }
        }
    }
    data
}

fn digit_runs(data: &[u8]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < data.len() {
        if data[i].is_ascii_digit() {
            let start = i;
            while i < data.len() && data[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    runs
}

/// Text readers take `&str`: hostile bytes reach them through the checked reader, which
/// refuses non-UTF-8; what is left is valid UTF-8 with anything in it.
fn as_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    proptest::collection::vec(mutation(), 1..4)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn topology_readers(which in 0usize..4, muts in mutations()) {
        let s = seeds();
        let (format, text) = &s.topology_texts[which];
        one_line(topo_io::read(&as_text(&mutate(text.as_bytes(), &muts)), *format))?;
    }

    #[test]
    fn topology_readers_on_noise(which in 0usize..4, bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let format = [Format::Json, Format::IbNet, Format::AnyNet, Format::Dot][which];
        one_line(topo_io::read(&as_text(&bytes), format))?;
    }

    #[test]
    fn routes_json_reader(muts in mutations()) {
        let s = seeds();
        one_line(routes_json::read(&s.mesh, &as_text(&mutate(s.routes_json.as_bytes(), &muts))))?;
    }

    #[test]
    fn lft_reader(muts in mutations()) {
        let s = seeds();
        let read = lft::read(&s.mesh, &as_text(&mutate(s.lft.as_bytes(), &muts)));
        if let Ok(table) = &read {
            // Whatever it accepted fits the fabric it was read for.
            prop_assert!(table.check_fits(&s.mesh).is_ok());
        }
        one_line(read)?;
        let _ = &s.routes;
    }

    #[test]
    fn schedule_readers(muts in mutations()) {
        let s = seeds();
        one_line(sched_io::from_json(&as_text(&mutate(s.schedule_json.as_bytes(), &muts))))?;
        one_line(sched_io::from_binary(&mutate(&s.schedule_nws, &muts)))?;
    }

    #[test]
    fn dag_readers(muts in mutations()) {
        let s = seeds();
        one_line(TaskGraph::from_json(&as_text(&mutate(s.dag_json.as_bytes(), &muts))))?;
        one_line(sched_io::dag_from_binary(&mutate(&s.dag_nws, &muts)))?;
    }

    #[test]
    fn binary_readers_on_noise(tail in proptest::collection::vec(any::<u8>(), 0..512)) {
        // Past the magic, so the reader gets to the fields.
        let mut data = sched_io::MAGIC.to_vec();
        data.extend(tail);
        one_line(sched_io::from_binary(&data))?;
        one_line(sched_io::dag_from_binary(&data))?;
    }

    #[test]
    fn pattern_readers(which in 0usize..3, muts in mutations()) {
        let (format, seed) = [
            (PatternFormat::Csv, "# num_ranks=4\nsrc,dst,bytes\n0,1,10\n0,1,5\n3,2,1\n"),
            (PatternFormat::Json, r#"{"num_ranks": 4, "messages": [[0, 1, 15], {"src": 3, "dst": 2, "bytes": 1}]}"#),
            (PatternFormat::Trace, "# num_ranks 4\n0.0 0 1 10\n5e-6 0 1 5\n7 3 2 1\n"),
        ][which];
        one_line(pattern_files::parse_text(&as_text(&mutate(seed.as_bytes(), &muts)), format, "fuzz", None))?;
    }
}

/// Inputs that once crashed or misled a reader, kept so they never come back.
mod regressions {
    use super::*;

    #[test]
    fn a_torus_lft_is_refused_on_a_mesh_of_the_same_size() {
        // The tables of a 4x4 torus name wrap-around ports a 4x4 mesh leaves unconnected.
        let t = torus(&[4, 4], 1).unwrap();
        let m = mesh(&[4, 4], 1).unwrap();
        let routes = route(&t, Engine::Dor, &RouteOptions::default()).unwrap();
        let dump = lft::write(&t, &routes, &lft::LidMap::sequential(&t).unwrap()).unwrap();
        let e = lft::read(&m, &dump).err().expect("a torus LFT accepted on a mesh");
        assert!(!e.to_string().contains('\n'));
    }

    #[test]
    fn an_empty_fabric_is_not_routed() {
        let empty = topo_io::read(
            r#"{"format": "netweave-topology", "version": 1, "name": "empty", "nodes": [], "links": []}"#,
            Format::Json,
        );
        if let Ok(empty) = empty {
            let e = route(&empty, Engine::MinHop, &RouteOptions::default()).unwrap_err();
            assert!(e.to_string().contains("no hosts"), "{e}");
        }
    }

    #[test]
    fn a_pattern_declaring_zero_ranks_is_refused() {
        // Found by `pattern_readers`: "# num_ranks 0" once underflowed the rank count.
        for (format, text) in [
            (PatternFormat::Trace, "# num_ranks 0\n0.0 0 1 10\n"),
            (PatternFormat::Csv, "# num_ranks=0\nsrc,dst,bytes\n0,1,10\n"),
        ] {
            let e = pattern_files::parse_text(text, format, "zero", None).unwrap_err().to_string();
            assert!(e.contains("declares 0 ranks") && !e.contains('\n'), "{e}");
        }
        let e = pattern_files::parse_text("0,1,10\n", PatternFormat::Csv, "zero", Some(0)).unwrap_err();
        assert!(e.to_string().contains("0 ranks"), "{e}");
    }

    #[test]
    fn schedules_whose_bytes_add_past_64_bits_are_refused() {
        let e = alltoall::shift(8, u64::MAX).unwrap_err().to_string();
        assert!(e.starts_with("--bytes: ") && e.contains("exceeds"), "{e}");
        assert!(alltoall::bruck(8, u64::MAX / 2).is_err());
        let json = sched_io::to_json(&alltoall::shift(2, 1).unwrap())
            .replace("[0,1,1]", "[0,1,18446744073709551615]")
            .replace("[1,0,1]", "[1,0,18446744073709551615]");
        if json.contains("18446744073709551615,") || json.contains("18446744073709551615]") {
            assert!(sched_io::from_json(&json).is_err());
        }
    }
}
