//! Analysis: exact per-phase link loads, congestion, fluid time and completeness of a schedule.

use netweave_core::analysis::{self, AnalysisOptions};
use pyo3::prelude::*;

use crate::routing::PyRoutingTable;
use crate::traffic::PySchedule;
use crate::{err, to_py};

/// Loads of `schedule` routed by `routes` (on the topology the routes were built for), as a
/// dict: `complete`, `max_congestion`, `throughput_ratio`, `fluid_time_s`, `phases`, … .
/// `hop_latency_s` is added per channel on each phase's longest path, `link_latency` adds the
/// topology's link latencies, `max_links` bounds the list of contended links.
#[pyfunction]
#[pyo3(signature = (routes, schedule, hop_latency_s=0.0, link_latency=false, max_links=20))]
fn analyze(
    py: Python<'_>,
    routes: &PyRoutingTable,
    schedule: &PySchedule,
    hop_latency_s: f64,
    link_latency: bool,
    max_links: usize,
) -> PyResult<PyObject> {
    let topology = &routes.topology.get().inner;
    let options = AnalysisOptions { hop_latency_s, link_latency, max_listed_links: max_links };
    let report =
        py.allow_threads(|| analysis::analyze_with(topology, &routes.inner, &schedule.inner, &options)).map_err(err)?;
    to_py(py, &report)
}

/// Flows on each directed channel (host links included; channel `2·l` runs from link `l`'s
/// end `a` to its end `b`, `2·l + 1` back) in phase `phase` of `schedule` routed by `routes`.
#[pyfunction]
fn phase_channel_flows(py: Python<'_>, routes: &PyRoutingTable, schedule: &PySchedule, phase: usize) -> PyResult<Vec<u32>> {
    let topology = &routes.topology.get().inner;
    py.allow_threads(|| analysis::phase_channel_flows(topology, &routes.inner, &schedule.inner, phase)).map_err(err)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(phase_channel_flows, m)?)
}
