//! Analysis: exact per-phase link loads, congestion, fluid time and completeness of a schedule.

use netweave_core::analysis::{self, AnalysisOptions};
use netweave_core::traffic::Message;
use pyo3::prelude::*;

use crate::routing::PyRoutingTable;
use crate::traffic::PySchedule;
use crate::{err, to_py};

// `RoutingTable.pattern_load` / `.analyze` are analysis, so they live here: routing's bindings
// then need nothing from traffic (pyo3's `multiple-pymethods` lets a class span files).
#[pymethods]
impl PyRoutingTable {
    /// Routes per switch-to-switch channel for the messages of `schedule`.
    fn pattern_load(&self, py: Python<'_>, schedule: &PySchedule) -> PyResult<PyObject> {
        let topology = &self.topology.get().inner;
        let load = analysis::pattern_channel_load(topology, &self.inner, &schedule.inner).map_err(err)?;
        to_py(py, &load)
    }
    /// Exact per-phase link loads of `schedule` on these routes, as a dict.
    fn analyze(&self, py: Python<'_>, schedule: &PySchedule) -> PyResult<PyObject> {
        let topology = &self.topology.get().inner;
        let report = py.allow_threads(|| analysis::analyze(topology, &self.inner, &schedule.inner)).map_err(err)?;
        to_py(py, &report)
    }
}

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
fn phase_channel_flows(
    py: Python<'_>,
    routes: &PyRoutingTable,
    schedule: &PySchedule,
    phase: usize,
) -> PyResult<Vec<u32>> {
    let topology = &routes.topology.get().inner;
    py.allow_threads(|| analysis::phase_channel_flows(topology, &routes.inner, &schedule.inner, phase)).map_err(err)
}

/// Payload bytes routed over each directed channel (channel `2·l` runs from link `l`'s end `a`
/// to its end `b`, `2·l + 1` back) by `traffic`, a Schedule or a TaskGraph routed by `routes`:
/// every message's bytes on every channel of its route. `reverse` counts each message on its
/// route back (where its acknowledgements travel); `placement` (rank → host) overrides the
/// traffic's own.
#[pyfunction]
#[pyo3(signature = (routes, traffic, reverse=false, placement=None))]
fn channel_bytes(
    py: Python<'_>,
    routes: &PyRoutingTable,
    traffic: &Bound<'_, PyAny>,
    reverse: bool,
    placement: Option<Vec<u32>>,
) -> PyResult<Vec<u64>> {
    let topology = &routes.topology.get().inner;
    let messages: Vec<Message> = if let Ok(s) = traffic.downcast::<PySchedule>() {
        let s = s.get();
        s.inner.check_fits(topology).map_err(err)?;
        s.inner.phases().flatten().copied().collect()
    } else if let Ok(g) = traffic.downcast::<crate::traffic::PyTaskGraph>() {
        let g = g.get();
        g.inner.check_fits(topology).map_err(err)?;
        g.inner.tasks().to_vec()
    } else {
        return Err(crate::NetweaveErrorPy::new_err("the traffic must be a Schedule or a TaskGraph"));
    };
    let own: Vec<u32> = if let Ok(s) = traffic.downcast::<PySchedule>() {
        s.get().inner.placement().to_vec()
    } else {
        traffic.downcast::<crate::traffic::PyTaskGraph>()?.get().inner.placement().to_vec()
    };
    let host = placement.unwrap_or(own);
    if let Some(m) = messages.iter().find(|m| m.src.max(m.dst) as usize >= host.len()) {
        return Err(crate::NetweaveErrorPy::new_err(format!(
            "the placement names {} ranks; the traffic has rank {}",
            host.len(),
            m.src.max(m.dst)
        )));
    }
    let on_hosts = messages.iter().map(|m| {
        let (src, dst) = (host[m.src as usize], host[m.dst as usize]);
        if reverse {
            (dst, src, m.bytes)
        } else {
            (src, dst, m.bytes)
        }
    });
    let on_hosts: Vec<(u32, u32, u64)> = on_hosts.collect();
    py.allow_threads(|| analysis::routed_channel_bytes(topology, &routes.inner, on_hosts)).map_err(err)
}

/// The bottleneck lower bound of `workload` (a Schedule or a TaskGraph) routed by `routes`, as
/// a dict: `seconds`, `binding` (`kind` link/injection/ejection/none with the link's
/// `from_label`/`to_label` or the host's `label`), `bytes` on it, `describe` (one line), and
/// `link_seconds`, `injection_seconds`, `ejection_seconds`, `network_bytes`.
#[pyfunction]
fn bottleneck_bound(py: Python<'_>, routes: &PyRoutingTable, workload: &Bound<'_, PyAny>) -> PyResult<PyObject> {
    let topology = &routes.topology.get().inner;
    let bound = if let Ok(s) = workload.downcast::<PySchedule>() {
        let s = s.get();
        py.allow_threads(|| analysis::schedule_bound(topology, &routes.inner, &s.inner))
    } else if let Ok(g) = workload.downcast::<crate::traffic::PyTaskGraph>() {
        let g = g.get();
        py.allow_threads(|| analysis::dag_bound(topology, &routes.inner, &g.inner))
    } else {
        return Err(crate::NetweaveErrorPy::new_err("the traffic must be a Schedule or a TaskGraph"));
    }
    .map_err(err)?;
    let out = to_py(py, &bound)?;
    out.bind(py).set_item("describe", bound.binding.describe())?;
    Ok(out)
}

/// Per-stage loads, the bottleneck bound and completeness of a DAG schedule `graph` routed by
/// `routes`, as a dict: `stages`, `tasks`, `relays`, `collective`, `complete`, `problem`,
/// `loads` (the stages as phases, in `analyze`'s form) and `bound`.
#[pyfunction]
#[pyo3(signature = (routes, graph, hop_latency_s=0.0, link_latency=false, max_links=20))]
fn analyze_dag(
    py: Python<'_>,
    routes: &PyRoutingTable,
    graph: &crate::traffic::PyTaskGraph,
    hop_latency_s: f64,
    link_latency: bool,
    max_links: usize,
) -> PyResult<PyObject> {
    let topology = &routes.topology.get().inner;
    let options = AnalysisOptions { hop_latency_s, link_latency, max_listed_links: max_links };
    let report = py
        .allow_threads(|| analysis::dag::analyze_dag(topology, &routes.inner, &graph.inner, &options))
        .map_err(err)?;
    let out = to_py(py, &report)?;
    out.bind(py).get_item("bound")?.set_item("describe", report.bound.binding.describe())?;
    Ok(out)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(analyze_dag, m)?)?;
    m.add_function(wrap_pyfunction!(bottleneck_bound, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(channel_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(phase_channel_flows, m)?)
}
