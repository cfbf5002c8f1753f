//! Flit-level simulation: config keys, one run, load sweeps.

use netweave_core::flitsim::{self, Job, SimConfig};
use pyo3::prelude::*;

use crate::exchange::PyExchange;
use crate::routing::PyRoutingTable;
use crate::traffic::PySchedule;
use crate::traffic::PyTaskGraph;
use crate::{err, to_py};

fn config(settings: Vec<(String, String)>) -> PyResult<SimConfig> {
    let mut cfg = SimConfig::default();
    for (k, v) in settings {
        cfg.set(&k, &v).map_err(err)?;
    }
    cfg.validate().map_err(err)?;
    Ok(cfg)
}

/// Network of a config, or the routing table given (its topology included).
fn network(
    cfg: &SimConfig,
    routes: Option<&PyRoutingTable>,
    py: Python<'_>,
) -> PyResult<(netweave_core::topology::Topology, netweave_core::routing::RoutingTable)> {
    match routes {
        Some(r) => Ok((r.topology.get().inner.clone(), r.inner.clone())),
        None => py.allow_threads(|| netweave_core::scenario::build_network(cfg)).map_err(err),
    }
}

fn call_progress(progress: &Option<PyObject>, value: u64) {
    if let Some(cb) = progress {
        Python::with_gil(|py| {
            let _ = cb.call1(py, (value,));
        });
    }
}

/// `(key, meaning)` of every config key.
#[pyfunction]
fn flitsim_keys() -> Vec<(&'static str, &'static str)> {
    flitsim::config::KEYS.to_vec()
}

/// Run one simulation of `settings` (`(key, value)` text pairs); `routes` replaces the
/// config's network, `schedule` its batch workload; `progress(cycle)` is called now and then.
#[pyfunction]
#[pyo3(signature = (settings, routes=None, schedule=None, progress=None))]
fn flitsim_simulate(
    py: Python<'_>,
    settings: Vec<(String, String)>,
    routes: Option<PyRef<'_, PyRoutingTable>>,
    schedule: Option<PyRef<'_, PySchedule>>,
    progress: Option<PyObject>,
) -> PyResult<PyObject> {
    let cfg = config(settings)?;
    let (topo, table) = network(&cfg, routes.as_deref(), py)?;
    let sched = schedule.map(|s| s.inner.clone());
    let result = py
        .allow_threads(|| flitsim::simulate(&topo, &table, &cfg, sched.as_ref(), &|c| call_progress(&progress, c)))
        .map_err(err)?;
    to_py(py, &result)
}

/// Batch run of the task graph `graph` (`sim_type = "batch"`, bytes counting flits): each task
/// starts once its sender knows its predecessors are done; the result lists task times.
#[pyfunction]
#[pyo3(signature = (settings, graph, routes=None, progress=None))]
fn flitsim_simulate_dag(
    py: Python<'_>,
    settings: Vec<(String, String)>,
    graph: PyRef<'_, PyTaskGraph>,
    routes: Option<PyRef<'_, PyRoutingTable>>,
    progress: Option<PyObject>,
) -> PyResult<PyObject> {
    let cfg = config(settings)?;
    if cfg.sim_type != flitsim::SimType::Batch {
        return Err(err(netweave_core::error::NetweaveError::InvalidParameter(
            "a task graph runs in batch mode: set sim_type = \"batch\"".into(),
        )));
    }
    let (topo, table) = network(&cfg, routes.as_deref(), py)?;
    let g = graph.inner.clone();
    let flits_of = |b: u64| b.min(u32::MAX as u64) as u32;
    let result = py
        .allow_threads(|| {
            flitsim::batch::run_dag(&topo, &table, &cfg, &g, &flits_of, &|c| call_progress(&progress, c))
                .map(flitsim::SimResult::Batch)
        })
        .map_err(err)?;
    to_py(py, &result)
}

/// One run of `settings` split over `ranks` processes, this one rank `rank`; `swap` carries
/// their mail (every rank calls this with the same arguments). `schedule` is a `Schedule` or a
/// `TaskGraph`. Returns `(result, partition report)`; the result is the one-process run's.
#[pyfunction]
#[pyo3(signature = (settings, rank, ranks, swap, routes=None, schedule=None, graph=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn flitsim_simulate_partitioned(
    py: Python<'_>,
    settings: Vec<(String, String)>,
    rank: usize,
    ranks: usize,
    swap: PyObject,
    routes: Option<PyRef<'_, PyRoutingTable>>,
    schedule: Option<PyRef<'_, PySchedule>>,
    graph: Option<PyRef<'_, PyTaskGraph>>,
    progress: Option<PyObject>,
) -> PyResult<(PyObject, PyObject)> {
    let cfg = config(settings)?;
    let (topo, table) = network(&cfg, routes.as_deref(), py)?;
    let sched = schedule.map(|s| s.inner.clone());
    let dag = graph.map(|g| g.inner.clone());
    let job = match (&sched, &dag) {
        (_, Some(g)) => Job::Dag(g),
        (Some(s), None) => Job::Schedule(s),
        (None, None) => Job::Config,
    };
    let link = Box::new(PyExchange::new(rank, ranks, swap));
    let (result, report) = py
        .allow_threads(|| {
            flitsim::simulate_partitioned(&topo, &table, &cfg, job, link, &|c| call_progress(&progress, c))
        })
        .map_err(err)?;
    Ok((to_py(py, &result)?, to_py(py, &report)?))
}

/// Open-loop runs of `settings` at every rate of `rates`, in parallel; `progress(i)` as load
/// `i` finishes.
#[pyfunction]
#[pyo3(signature = (settings, rates, routes=None, progress=None))]
fn flitsim_sweep(
    py: Python<'_>,
    settings: Vec<(String, String)>,
    rates: Vec<f64>,
    routes: Option<PyRef<'_, PyRoutingTable>>,
    progress: Option<PyObject>,
) -> PyResult<PyObject> {
    let cfg = config(settings)?;
    let (topo, table) = network(&cfg, routes.as_deref(), py)?;
    let result = py
        .allow_threads(|| flitsim::sweep(&topo, &table, &cfg, &rates, &|i| call_progress(&progress, i as u64)))
        .map_err(err)?;
    to_py(py, &result)
}

/// Topology summary of a config's network: `(name, hosts, routers, routing engine, routing VCs)`.
#[pyfunction]
fn flitsim_network(py: Python<'_>, settings: Vec<(String, String)>) -> PyResult<(String, usize, usize, String, u8)> {
    let cfg = config(settings)?;
    let (t, r) = network(&cfg, None, py)?;
    Ok((t.name().to_string(), t.num_hosts(), t.num_switches(), r.engine().to_string(), r.vc_policy().num_vcs))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(flitsim_keys, m)?,
        wrap_pyfunction!(flitsim_simulate, m)?,
        wrap_pyfunction!(flitsim_simulate_dag, m)?,
        wrap_pyfunction!(flitsim_simulate_partitioned, m)?,
        wrap_pyfunction!(flitsim_sweep, m)?,
        wrap_pyfunction!(flitsim_network, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
