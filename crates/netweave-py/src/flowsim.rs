//! Flow-level simulation: a progress counter and `flow_simulate`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use netweave_core::flowsim::{self, Executor, FlowConfig, TcpModel};
use pyo3::prelude::*;

use crate::routing::PyRoutingTable;
use crate::traffic::{PySchedule, PyTaskGraph};
use crate::{err, to_py, NetweaveErrorPy};

/// A counter of delivered messages another thread can read while a simulation runs.
#[pyclass(name = "FlowProgress", module = "netweave._core", frozen)]
pub(crate) struct PyFlowProgress {
    delivered: Arc<AtomicU64>,
}

#[pymethods]
impl PyFlowProgress {
    #[new]
    fn new() -> Self {
        PyFlowProgress { delivered: Arc::new(AtomicU64::new(0)) }
    }
    /// Messages delivered so far.
    #[getter]
    fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }
}

/// Simulate `workload` (a Schedule or a TaskGraph) on `routes`' topology; returns a dict.
/// `tcp` replaces some of the lossy model's parameters (`flow_tcp_defaults()` names them); the
/// topology's link layer decides whether they are used.
#[pyfunction]
#[pyo3(signature = (routes, workload, executor="sync", nct=1, barrier_s=0.0, overhead_s=0.0, mtu=None,
    header_bytes=0, injection_gbps=None, ejection_gbps=None, bytes=None, series=false, progress=None, tcp=None,
    sync_s=None, host_streams=None, receive_s=0.0, receive_per_byte_s=0.0))]
#[allow(clippy::too_many_arguments)]
fn flow_simulate(
    py: Python<'_>,
    routes: &PyRoutingTable,
    workload: &Bound<'_, PyAny>,
    executor: &str,
    nct: u32,
    barrier_s: f64,
    overhead_s: f64,
    mtu: Option<u64>,
    header_bytes: u64,
    injection_gbps: Option<f64>,
    ejection_gbps: Option<f64>,
    bytes: Option<u64>,
    series: bool,
    progress: Option<&PyFlowProgress>,
    tcp: Option<std::collections::HashMap<String, f64>>,
    sync_s: Option<f64>,
    host_streams: Option<u32>,
    receive_s: f64,
    receive_per_byte_s: f64,
) -> PyResult<PyObject> {
    let executor: Executor = executor.parse().map_err(err)?;
    let config = FlowConfig {
        executor,
        nct,
        host_streams,
        barrier_s,
        overhead_s,
        receive_s,
        receive_per_byte_s,
        sync_s,
        mtu,
        header_bytes,
        injection_gbps,
        ejection_gbps,
        bytes,
        series,
        tcp: tcp_model(tcp.unwrap_or_default())?,
    };
    let topology = &routes.topology.get().inner;
    let counter = progress.map(|p| p.delivered.clone());
    let report = if let Ok(s) = workload.downcast::<PySchedule>() {
        let s = s.get();
        py.allow_threads(|| {
            flowsim::simulate_with_progress(topology, &routes.inner, &s.inner, &config, counter.as_deref())
        })
    } else if let Ok(g) = workload.downcast::<PyTaskGraph>() {
        let g = g.get();
        py.allow_threads(|| {
            flowsim::simulate_dag_with_progress(topology, &routes.inner, &g.inner, &config, counter.as_deref())
        })
    } else {
        return Err(NetweaveErrorPy::new_err("the workload must be a Schedule or a TaskGraph"));
    }
    .map_err(err)?;
    to_py(py, &report)
}

/// The lossy model's parameters with `overrides` applied (unknown names are refused).
fn tcp_model(overrides: std::collections::HashMap<String, f64>) -> PyResult<TcpModel> {
    let mut tcp = TcpModel::default();
    for (key, value) in overrides {
        match key.as_str() {
            "segment_bytes" if value >= 1.0 && value.fract() == 0.0 => tcp.segment_bytes = value as u64,
            "segment_bytes" => {
                return Err(NetweaveErrorPy::new_err(format!(
                    "segment_bytes must be a whole number of bytes ≥ 1, got {value}"
                )))
            }
            "timeout_s" => tcp.timeout_s = value,
            "window_segments" => tcp.window_segments = value,
            "survival_per_segment" => tcp.survival_per_segment = value,
            "initial_window_segments" => tcp.initial_window_segments = value,
            "probe_s" => tcp.probe_s = value,
            "timer_tick_s" => tcp.timer_tick_s = value,
            "lone_tail_probability" => tcp.lone_tail_probability = value,
            "min_window_segments" => tcp.min_window_segments = value,
            "steady_free_segments" => tcp.steady_free_segments = value,
            "steady_segments_per_timeout" => tcp.steady_segments_per_timeout = value,
            "timestamps" if value == 0.0 || value == 1.0 => tcp.timestamps = value == 1.0,
            "timestamps" => {
                return Err(NetweaveErrorPy::new_err(format!("timestamps must be true or false (1 or 0), got {value}")))
            }
            other => {
                return Err(NetweaveErrorPy::new_err(format!(
                    "unknown TCP model parameter '{other}' (known: segment_bytes, timeout_s, window_segments, \
                     survival_per_segment, initial_window_segments, probe_s, timer_tick_s, lone_tail_probability, \
                     min_window_segments, steady_free_segments, steady_segments_per_timeout, timestamps)"
                )))
            }
        }
    }
    tcp.check().map_err(err)?;
    Ok(tcp)
}

/// The lossy model's default parameters (one documented place: `flowsim::loss`).
#[pyfunction]
fn flow_tcp_defaults(py: Python<'_>) -> PyResult<PyObject> {
    to_py(py, &TcpModel::default())
}

/// Names of the flow simulator's executors, in CLI order.
#[pyfunction]
fn flow_executors() -> Vec<&'static str> {
    Executor::ALL.iter().map(|e| e.name()).collect()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFlowProgress>()?;
    m.add_function(wrap_pyfunction!(flow_simulate, m)?)?;
    m.add_function(wrap_pyfunction!(flow_tcp_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(flow_executors, m)?)?;
    Ok(())
}
