//! Analysis: exact per-phase link loads, congestion, fluid time and completeness of a schedule.

use netweave_core::analysis::{self, AnalysisOptions};
use pyo3::prelude::*;

use crate::routing::PyRoutingTable;
use crate::traffic::PySchedule;
use crate::{err, to_py};

/// Loads of `schedule` routed by `routes` (on the topology the routes were built for), as a
/// dict: `complete`, `max_congestion`, `throughput_ratio`, `fluid_time_s`, `phases`, … .
/// `hop_latency_s` is added per channel on each phase's longest path, `link_latency` adds the
/// topology's link latencies, `claims_permutations` makes `complete` require permutation
/// phases, `max_links` bounds the list of contended links.
#[pyfunction]
#[pyo3(signature = (routes, schedule, hop_latency_s=0.0, link_latency=false, claims_permutations=false, max_links=20))]
fn analyze(
    py: Python<'_>,
    routes: &PyRoutingTable,
    schedule: &PySchedule,
    hop_latency_s: f64,
    link_latency: bool,
    claims_permutations: bool,
    max_links: usize,
) -> PyResult<PyObject> {
    let topology = &routes.topology.get().inner;
    let options = AnalysisOptions { hop_latency_s, link_latency, claims_permutations, max_listed_links: max_links };
    let report =
        py.allow_threads(|| analysis::analyze_with(topology, &routes.inner, &schedule.inner, &options)).map_err(err)?;
    to_py(py, &report)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(analyze, m)?)
}
