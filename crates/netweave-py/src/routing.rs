//! Routing: the `RoutingTable` class, the engines and the routes files.

use netweave_core::routing::{self, RoutingTable};
use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;

use crate::topology::PyTopology;
use crate::{err, to_py, NetweaveErrorPy};

/// Forwarding tables `out_port[switch][dest host]` plus a VC policy.
#[pyclass(name = "RoutingTable", module = "netweave._core", frozen)]
pub(crate) struct PyRoutingTable {
    pub(crate) inner: RoutingTable,
    /// The topology the table was computed for, so paths and analyses need no second argument.
    pub(crate) topology: Py<PyTopology>,
}

#[pymethods]
impl PyRoutingTable {
    #[getter]
    fn engine(&self) -> &str {
        self.inner.engine()
    }
    #[getter]
    fn num_vcs(&self) -> u8 {
        self.inner.vc_policy().num_vcs
    }
    /// The table as a `(switches, hosts)` array of output ports (0 = no route).
    fn ports<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<u16>>> {
        let flat = PyArray1::from_slice(py, self.inner.ports());
        flat.reshape([self.inner.num_switches(), self.inner.num_hosts()])
    }
    #[getter]
    fn topology(&self, py: Python<'_>) -> Py<PyTopology> {
        self.topology.clone_ref(py)
    }
    /// This table on `topology`, a copy of its own with other link speeds (`Topology.scaled`);
    /// a topology wired differently is refused.
    fn on_topology(&self, topology: Bound<'_, PyTopology>) -> PyResult<PyRoutingTable> {
        if !self.topology.get().inner.same_wiring(&topology.get().inner) {
            return Err(err(netweave_core::NetweaveError::Routing(format!(
                "the routes are for '{}', wired differently from '{}'",
                self.topology.get().inner.name(),
                topology.get().inner.name()
            ))));
        }
        Ok(PyRoutingTable { inner: self.inner.clone(), topology: topology.unbind() })
    }
    /// Channel ids crossed from host index `src` to host index `dst`.
    fn path(&self, src: usize, dst: usize) -> PyResult<Vec<u32>> {
        let mut p = Vec::new();
        self.inner.path(&self.topology.get().inner, src, dst, &mut p).map_err(err)?;
        Ok(p)
    }
    /// Channel-dependency proof: `deadlock_free`, `vcs_used`, `dependencies`, and a `cycle`
    /// of `{channel, vc, from, to}` when there is one.
    fn check(&self, py: Python<'_>) -> PyResult<PyObject> {
        let topology = &self.topology.get().inner;
        let report = py.allow_threads(|| routing::deadlock::check(topology, &self.inner)).map_err(err)?;
        to_py(py, &report)
    }
    /// Path metrics over all host pairs: hops, non-minimal pairs, VCs, path diversity, channel loads.
    fn metrics(&self, py: Python<'_>) -> PyResult<PyObject> {
        let topology = &self.topology.get().inner;
        let report = py.allow_threads(|| routing::metrics::route_metrics(topology, &self.inner)).map_err(err)?;
        to_py(py, &report)
    }
}

// `Topology.route` lives here, beside the engines it calls, so the topology bindings need
// nothing from routing (pyo3's `multiple-pymethods` lets a class's methods span files).
#[pymethods]
impl PyTopology {
    /// Route this topology with the named engine (see `route`).
    #[pyo3(signature = (engine, vcs=8, root=0, select="per-destination", seed=0))]
    fn route(
        slf: Bound<'_, Self>,
        engine: &str,
        vcs: u8,
        root: usize,
        select: &str,
        seed: u64,
    ) -> PyResult<PyRoutingTable> {
        route(slf.py(), slf.clone(), engine, vcs, root, select, seed)
    }
}

/// Route a topology with the named engine: `vcs` is the VC budget, `root` the root switch
/// index of tree-based engines, `select` the path-selection policy, `seed` for random choices.
#[pyfunction]
#[pyo3(signature = (topology, engine, vcs=8, root=0, select="per-destination", seed=0))]
pub(crate) fn route(
    py: Python<'_>,
    topology: Bound<'_, PyTopology>,
    engine: &str,
    vcs: u8,
    root: usize,
    select: &str,
    seed: u64,
) -> PyResult<PyRoutingTable> {
    let engine: routing::Engine = engine.parse().map_err(err)?;
    let options = routing::RouteOptions { max_vcs: vcs, root, select: select.parse().map_err(err)?, seed };
    let t = &topology.get().inner;
    let table = py.allow_threads(|| routing::route(t, engine, &options)).map_err(err)?;
    Ok(PyRoutingTable { inner: table, topology: topology.unbind() })
}

/// Up*/down* with each source host injecting on VC `host index mod spread_vcs` (paper 002's
/// multi-VC up*/down*); `spread_vcs` must be at most the budget `vcs`. `engine` must name
/// up*/down* (any of its spellings).
#[pyfunction]
#[pyo3(signature = (topology, engine, spread_vcs, vcs=8, root=0, select="per-destination", seed=0))]
#[allow(clippy::too_many_arguments)]
fn route_updown_spread(
    py: Python<'_>,
    topology: Bound<'_, PyTopology>,
    engine: &str,
    spread_vcs: u8,
    vcs: u8,
    root: usize,
    select: &str,
    seed: u64,
) -> PyResult<PyRoutingTable> {
    if engine.parse::<routing::Engine>().map_err(err)? != routing::Engine::UpDown {
        return Err(err(netweave_core::NetweaveError::InvalidParameter(format!(
            "spreading sources over VCs applies to updown only, not {engine}"
        ))));
    }
    let options = routing::RouteOptions { max_vcs: vcs, root, select: select.parse().map_err(err)?, seed };
    let t = &topology.get().inner;
    let table = py.allow_threads(|| routing::updown::up_down_vcs(t, &options, spread_vcs)).map_err(err)?;
    Ok(PyRoutingTable { inner: table, topology: topology.unbind() })
}

/// Routes as text: `"json"` (netweave routes) or `"lft"` (OpenSM `opensm-lfts.dump`, with
/// netweave's sequential LIDs: switches 1..S, then hosts).
#[pyfunction]
fn write_routes(routes: &PyRoutingTable, format: &str) -> PyResult<String> {
    let topology = &routes.topology.get().inner;
    match format {
        "json" => routing::io::json::write(topology, &routes.inner),
        "lft" => routing::io::lft::LidMap::sequential(topology)
            .and_then(|lids| routing::io::lft::write(topology, &routes.inner, &lids)),
        other => return Err(NetweaveErrorPy::new_err(format!("unknown routes format '{other}' (known: json, lft)"))),
    }
    .map_err(err)
}

/// Read routes for `topology` from text in `format` (`"json"` or `"lft"`).
#[pyfunction]
fn read_routes(topology: Bound<'_, PyTopology>, text: &str, format: &str) -> PyResult<PyRoutingTable> {
    let t = &topology.get().inner;
    let table = match format {
        "json" => routing::io::json::read(t, text),
        "lft" => routing::io::lft::read(t, text),
        other => return Err(NetweaveErrorPy::new_err(format!("unknown routes format '{other}' (known: json, lft)"))),
    }
    .map_err(err)?;
    Ok(PyRoutingTable { inner: table, topology: topology.unbind() })
}

/// What OpenSM needs to install `routes` with their lanes, on a fabric whose ports have `vcs`
/// data VLs: `installable`, `lanes`, `pairs_per_sl`, and for a routing whose VC changes
/// mid-path the `reason` and the equivalent OpenSM `engine`; `files` maps file names
/// (`opensm.conf`, `opensm-lfts.dump`, `qos-policy.conf`, `torus-2QoS.conf`) to their text.
/// `opensm.conf` names the other files by the given paths.
#[pyfunction]
fn opensm_files(
    py: Python<'_>,
    routes: &PyRoutingTable,
    vcs: u8,
    lfts_path: &str,
    qos_policy_path: &str,
    torus_config_path: &str,
) -> PyResult<PyObject> {
    use routing::io::opensm_qos::{self as qos, EquivalentEngine, InstallPaths, Lanes};
    let topology = &routes.topology.get().inner;
    qos::check_lane_budget(&routes.inner, vcs).map_err(err)?;
    let lanes = py.allow_threads(|| qos::lanes(topology, &routes.inner)).map_err(err)?;
    let paths = InstallPaths { lfts: lfts_path, qos_policy: qos_policy_path, torus_config: torus_config_path };
    let mut files = std::collections::BTreeMap::new();
    files.insert("opensm.conf", qos::write_options(topology, &routes.inner, &lanes, &paths));
    let summary = match &lanes {
        Lanes::PerPath(levels) => {
            let dump = routing::io::lft::LidMap::sequential(topology)
                .and_then(|lids| routing::io::lft::write(topology, &routes.inner, &lids))
                .map_err(err)?;
            files.insert("opensm-lfts.dump", dump);
            if levels.num_lanes() > 1 {
                files.insert("qos-policy.conf", qos::write_policy(topology, levels));
            }
            serde_json::json!({
                "installable": true,
                "lanes": levels.num_lanes(),
                "pairs_per_sl": levels.pairs_per_sl().to_vec(),
                "engine": null,
                "reason": null,
            })
        }
        Lanes::ChangesMidPath { change, instead } => {
            if let EquivalentEngine::Torus2Qos { dims } = instead {
                files.insert("torus-2QoS.conf", qos::write_torus_config(topology, dims).map_err(err)?);
            }
            serde_json::json!({
                "installable": false,
                "lanes": routes.inner.vc_policy().num_vcs,
                "pairs_per_sl": null,
                "engine": instead.name(),
                "reason": format!(
                    "a packet from {} to {} changes from VC {} to VC {} at switch {}, which needs per-port SL-to-VL \
                     tables OpenSM cannot read from a file",
                    change.source, change.destination, change.from_vc, change.to_vc, change.switch
                ),
            })
        }
    };
    let mut out = summary;
    out["files"] = serde_json::to_value(&files).map_err(|e| NetweaveErrorPy::new_err(e.to_string()))?;
    to_py(py, &out)
}

/// `routes` with the service levels of an OpenSM QoS policy file as their VCs (SL n = VC n):
/// what the fabric runs once OpenSM installed the tables and the policy.
#[pyfunction]
fn apply_qos_policy(routes: &PyRoutingTable, text: &str, py: Python<'_>) -> PyResult<PyRoutingTable> {
    use routing::io::opensm_qos as qos;
    let topology = &routes.topology.get().inner;
    let levels = qos::read_policy(topology, text).map_err(err)?;
    let table = qos::with_service_levels(topology, &routes.inner, &levels).map_err(err)?;
    Ok(PyRoutingTable { inner: table, topology: routes.topology.clone_ref(py) })
}

/// Names of every routing engine, in CLI order.
#[pyfunction]
fn routing_engines() -> Vec<&'static str> {
    routing::Engine::ALL.iter().map(|e| e.name()).collect()
}

/// Names of the path-selection policies, in CLI order.
#[pyfunction]
fn selection_policies() -> Vec<&'static str> {
    routing::select::Select::ALL.iter().map(|s| s.name()).collect()
}

/// The deadlock-free engine that suits `topology` best (`routing::default_engine`).
#[pyfunction]
fn default_engine(topology: &PyTopology) -> &'static str {
    routing::default_engine(&topology.inner).name()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRoutingTable>()?;
    for f in [
        wrap_pyfunction!(route, m)?,
        wrap_pyfunction!(route_updown_spread, m)?,
        wrap_pyfunction!(routing_engines, m)?,
        wrap_pyfunction!(selection_policies, m)?,
        wrap_pyfunction!(default_engine, m)?,
        wrap_pyfunction!(write_routes, m)?,
        wrap_pyfunction!(read_routes, m)?,
        wrap_pyfunction!(opensm_files, m)?,
        wrap_pyfunction!(apply_qos_policy, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
