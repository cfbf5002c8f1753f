//! Mapping: `Pattern`, `MapNetwork`, costs, baselines, BISEM, the `Annealer` and the whole
//! tempering search (`map_optimize`).

use std::path::PathBuf;
use std::sync::Arc;

use netweave_core::exchange::{Exchange, SoloExchange};
use netweave_core::mapping::anneal::{self, AnnealConfig, AnnealStatus, StopRules, Tempering};
use netweave_core::mapping::map_files::{self, MapFormat};
use netweave_core::mapping::pattern_files::{self, PatternFormat};
use netweave_core::mapping::{baselines, bisem, cost, descent, discovered, CostParts, MapNetwork, Objective, Pattern};
use netweave_core::routing::select::Select;
use netweave_core::traffic::Message;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::err;
use crate::exchange::PyExchange;
use crate::routing::PyRoutingTable;
use crate::topology::PyTopology;
use crate::traffic::PySchedule;

/// A sparse directed traffic matrix between ranks (duplicates summed, self-messages dropped).
#[pyclass(name = "Pattern", module = "netweave._core", frozen)]
pub(crate) struct PyPattern {
    pub(crate) inner: Arc<Pattern>,
}

fn wrap(p: netweave_core::Result<Pattern>) -> PyResult<PyPattern> {
    Ok(PyPattern { inner: Arc::new(p.map_err(err)?) })
}

#[pymethods]
impl PyPattern {
    /// From parallel arrays of sources, destinations and byte counts.
    #[staticmethod]
    #[pyo3(signature = (num_ranks, src, dst, nbytes, name="pattern"))]
    fn from_arrays(
        num_ranks: u32,
        src: PyReadonlyArray1<'_, u32>,
        dst: PyReadonlyArray1<'_, u32>,
        nbytes: PyReadonlyArray1<'_, u64>,
        name: &str,
    ) -> PyResult<Self> {
        let (s, d, b) = (src.as_slice()?, dst.as_slice()?, nbytes.as_slice()?);
        if s.len() != d.len() || s.len() != b.len() {
            return Err(crate::NetweaveErrorPy::new_err("src, dst and bytes must have the same length"));
        }
        let msgs: Vec<Message> = (0..s.len()).map(|i| Message { src: s[i], dst: d[i], bytes: b[i] }).collect();
        wrap(Pattern::from_messages(name, num_ranks, &msgs))
    }
    /// Every message of every phase of a schedule, summed per pair.
    #[staticmethod]
    fn from_schedule(schedule: &PySchedule) -> PyResult<Self> {
        wrap(Pattern::from_schedule(&schedule.inner))
    }
    /// Bruck allgather merged into one step: rank i sends base·2^k bytes to i − 2^k.
    #[staticmethod]
    fn bruck(num_ranks: u32, base_bytes: u64) -> PyResult<Self> {
        wrap(Pattern::bruck(num_ranks, base_bytes))
    }
    /// Ring allgather merged into one step: rank i sends (n − 1)·bytes to i + 1.
    #[staticmethod]
    fn ring(num_ranks: u32, nbytes: u64) -> PyResult<Self> {
        wrap(Pattern::ring(num_ranks, nbytes))
    }
    /// All-to-all: every rank sends `nbytes` to every other.
    #[staticmethod]
    fn alltoall(num_ranks: u32, nbytes: u64) -> PyResult<Self> {
        wrap(Pattern::alltoall(num_ranks, nbytes))
    }
    /// Nearest-neighbour exchange on a rank grid.
    #[staticmethod]
    fn stencil(dims: Vec<u32>, periodic: bool, nbytes: u64) -> PyResult<Self> {
        wrap(Pattern::stencil(&dims, periodic, nbytes))
    }
    /// Seeded random sparse pattern: `degree` random partners per rank.
    #[staticmethod]
    fn random(num_ranks: u32, degree: u32, nbytes: u64, seed: u64) -> PyResult<Self> {
        wrap(Pattern::random_sparse(num_ranks, degree, nbytes, seed))
    }
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }
    #[getter]
    fn num_ranks(&self) -> u32 {
        self.inner.num_ranks()
    }
    #[getter]
    fn num_messages(&self) -> usize {
        self.inner.num_messages()
    }
    #[getter]
    fn total_bytes(&self) -> u128 {
        self.inner.total_bytes()
    }
    /// The aggregated messages as `(src, dst, bytes)` arrays.
    #[allow(clippy::type_complexity)]
    fn arrays<'py>(
        &self,
        py: Python<'py>,
    ) -> (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u64>>) {
        let m = self.inner.messages();
        (
            PyArray1::from_iter(py, m.iter().map(|x| x.src)),
            PyArray1::from_iter(py, m.iter().map(|x| x.dst)),
            PyArray1::from_iter(py, m.iter().map(|x| x.bytes)),
        )
    }
}

/// A routed topology flattened for the mapper, with `slots_per_host` rank slots per host.
#[pyclass(name = "MapNetwork", module = "netweave._core", frozen)]
pub(crate) struct PyMapNetwork {
    pub(crate) inner: Arc<MapNetwork>,
}

#[pymethods]
impl PyMapNetwork {
    #[new]
    #[pyo3(signature = (routes, slots_per_host=1))]
    fn new(py: Python<'_>, routes: &PyRoutingTable, slots_per_host: u32) -> PyResult<Self> {
        let topo = &routes.topology.get().inner;
        let table = &routes.inner;
        let net = py.allow_threads(|| MapNetwork::new(topo, table, slots_per_host)).map_err(err)?;
        Ok(PyMapNetwork { inner: Arc::new(net) })
    }
    /// Dimension-order routes of a torus or mesh computed from coordinates (no routing table,
    /// no host-count cap); the same routes as `route(topology, "dor", select)`.
    #[staticmethod]
    #[pyo3(signature = (topology, select="low-port", slots_per_host=1))]
    fn dor(py: Python<'_>, topology: &PyTopology, select: &str, slots_per_host: u32) -> PyResult<Self> {
        let select: Select = select.parse().map_err(err)?;
        let topo = &topology.inner;
        let net = py.allow_threads(|| MapNetwork::dor_lattice(topo, select, slots_per_host)).map_err(err)?;
        Ok(PyMapNetwork { inner: Arc::new(net) })
    }
    /// "table" (flattened routing table) or "lattice" (dimension-order routes from coordinates).
    #[getter]
    fn route_source(&self) -> &'static str {
        if self.inner.is_table_routed() {
            "table"
        } else {
            "lattice"
        }
    }
    #[getter]
    fn num_hosts(&self) -> u32 {
        self.inner.num_hosts()
    }
    #[getter]
    fn num_slots(&self) -> u32 {
        self.inner.num_slots()
    }
    #[getter]
    fn slots_per_host(&self) -> u32 {
        self.inner.slots_per_host()
    }
    #[getter]
    fn num_channels(&self) -> u32 {
        self.inner.num_channels()
    }
    /// `{"dims": [...], "torus": bool, "hosts_per_router": int}` or None.
    #[getter]
    fn lattice(&self, py: Python<'_>) -> PyResult<PyObject> {
        match self.inner.lattice() {
            None => Ok(py.None()),
            Some(l) => {
                let d = PyDict::new(py);
                d.set_item("dims", l.dims.clone())?;
                d.set_item("torus", l.wrap())?;
                d.set_item("hosts_per_router", l.hosts_per_router)?;
                Ok(d.into_any().unbind())
            }
        }
    }
    fn host_label(&self, host: u32) -> PyResult<String> {
        self.check_host(host)?;
        Ok(self.inner.host_label(host).to_string())
    }
    /// Router coordinates of `host` (None without a lattice).
    fn host_coords(&self, host: u32) -> PyResult<Option<Vec<u32>>> {
        self.check_host(host)?;
        Ok(self.inner.host_coords(host).map(|c| c.to_vec()))
    }
    /// Switch-to-switch hops between two hosts.
    fn hops(&self, src: u32, dst: u32) -> PyResult<u32> {
        self.check_host(src)?;
        self.check_host(dst)?;
        Ok(self.inner.hops(src, dst))
    }
}

impl PyMapNetwork {
    fn check_host(&self, host: u32) -> PyResult<()> {
        if host >= self.inner.num_hosts() {
            return Err(crate::NetweaveErrorPy::new_err(format!(
                "host {host} is outside 0..{}",
                self.inner.num_hosts()
            )));
        }
        Ok(())
    }
}

fn parts_dict<'py>(py: Python<'py>, p: &CostParts) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, value) in p.named() {
        d.set_item(name, value)?;
    }
    Ok(d)
}

/// Exact figures of a placement (`host_of_rank`), recounted from scratch: `{sum_hops,
/// hop_bytes, max_channel_bytes, hops_x_max_channel, step_max_channel_bytes}`.
#[pyfunction]
fn map_cost<'py>(
    py: Python<'py>,
    net: &PyMapNetwork,
    pattern: &PyPattern,
    host_of_rank: PyReadonlyArray1<'_, u32>,
) -> PyResult<Bound<'py, PyDict>> {
    let h = host_of_rank.as_slice()?;
    cost::check_placement(&net.inner, pattern.inner.num_ranks(), h).map_err(err)?;
    let parts = py.allow_threads(|| cost::full_cost(&net.inner, &pattern.inner, h));
    parts_dict(py, &parts)
}

/// Bytes on every directed channel under the placement.
#[pyfunction]
fn map_channel_loads<'py>(
    py: Python<'py>,
    net: &PyMapNetwork,
    pattern: &PyPattern,
    host_of_rank: PyReadonlyArray1<'_, u32>,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    let h = host_of_rank.as_slice()?;
    cost::check_placement(&net.inner, pattern.inner.num_ranks(), h).map_err(err)?;
    Ok(PyArray1::from_vec(py, cost::channel_loads(&net.inner, &pattern.inner, h)))
}

/// Objective weights parsed from a cost spec (`hops_x_max_channel`, `hop_bytes`,
/// `max_channel_bytes`, `step_max_channel_bytes`, weighted sums): `(hop_bytes,
/// max_channel_bytes, hops_x_max_channel, step_max_channel_bytes)`.
#[pyfunction]
fn parse_cost(py: Python<'_>, spec: &str) -> PyResult<(f64, f64, f64, f64)> {
    let o = objective(py, spec)?;
    Ok((o.w_hop_bytes, o.w_max_channel_bytes, o.w_hops_x_max_channel, o.w_step_max_channel_bytes))
}

/// The objective of cost spec `spec`; an earlier name (`rmatt`, `max-link`, `step-max-link`)
/// is read as today's with a `DeprecationWarning`, so callers of the raw bindings hear of it
/// too (the Python wrappers print their own line and pass today's names).
fn objective(py: Python<'_>, spec: &str) -> PyResult<Objective> {
    let (objective, canonical, earlier) = Objective::canonical(spec).map_err(err)?;
    if !earlier.is_empty() {
        let message = format!("deprecated cost name(s) {} in '{spec}': read as '{canonical}'", earlier.join(", "));
        let category = py.get_type::<pyo3::exceptions::PyDeprecationWarning>();
        PyErr::warn(py, &category, &std::ffi::CString::new(message)?, 1)?;
    }
    Ok(objective)
}

/// A cost spec in today's names and the earlier names it used (`rmatt`, `max-link`,
/// `step-max-link`), once each: `(canonical_spec, earlier_names)`.
#[pyfunction]
fn canonical_cost(spec: &str) -> PyResult<(String, Vec<String>)> {
    let (_, canonical, earlier) = Objective::canonical(spec).map_err(err)?;
    Ok((canonical, earlier))
}

/// Names of the baseline placements, in CLI order.
#[pyfunction]
fn map_baselines() -> Vec<&'static str> {
    baselines::NAMES.to_vec()
}

/// A baseline placement: `identity`, `random`, `bit-reversal`, `hilbert`, `peano`, `greedy`.
#[pyfunction]
#[pyo3(signature = (net, pattern, kind, seed=0))]
fn map_baseline<'py>(
    py: Python<'py>,
    net: &PyMapNetwork,
    pattern: &PyPattern,
    kind: &str,
    seed: u64,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let (netr, pat) = (&*net.inner, &*pattern.inner);
    let r = py.allow_threads(|| baselines::by_name(netr, pat, kind, seed)).map_err(err)?;
    Ok(PyArray1::from_vec(py, r))
}

/// Swap descent on hop-bytes from `host_of_rank` within `max_evaluations` moves and `seconds`:
/// `{host_of_rank, hop_bytes, evaluations, passes}`.
#[pyfunction]
#[pyo3(signature = (net, pattern, host_of_rank, max_evaluations=None, seconds=None))]
fn map_descend<'py>(
    py: Python<'py>,
    net: &PyMapNetwork,
    pattern: &PyPattern,
    host_of_rank: PyReadonlyArray1<'_, u32>,
    max_evaluations: Option<u64>,
    seconds: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let (netr, pat, start) = (&*net.inner, &*pattern.inner, host_of_rank.as_slice()?);
    let budget = descent::Budget { evaluations: max_evaluations, seconds };
    let d = py.allow_threads(|| descent::descend_hop_bytes(netr, pat, start, budget)).map_err(err)?;
    let out = PyDict::new(py);
    out.set_item("host_of_rank", PyArray1::from_vec(py, d.host_of_rank))?;
    out.set_item("hop_bytes", d.hop_bytes)?;
    out.set_item("evaluations", d.evaluations)?;
    out.set_item("passes", d.passes)?;
    Ok(out)
}

/// BISEM: `{host_of_rank, axes, group_sizes, regions}` after `levels` bisections
/// (None: until regions hold ≤ 8 routers).
#[pyfunction]
#[pyo3(signature = (net, pattern, levels=None, seed=0))]
fn map_bisem<'py>(
    py: Python<'py>,
    net: &PyMapNetwork,
    pattern: &PyPattern,
    levels: Option<u32>,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let (netr, pat) = (&*net.inner, &*pattern.inner);
    let b = py.allow_threads(|| bisem::bisem(netr, pat, levels, seed)).map_err(err)?;
    let d = PyDict::new(py);
    d.set_item("host_of_rank", PyArray1::from_vec(py, b.host_of_rank))?;
    d.set_item("axes", b.axes)?;
    d.set_item("group_sizes", b.groups.iter().map(Vec::len).collect::<Vec<_>>())?;
    d.set_item("grid", b.grid)?;
    d.set_item("regions", b.regions.iter().map(|r| (r.lo.clone(), r.hi.clone())).collect::<Vec<_>>())?;
    Ok(d)
}

/// The structure found in a pattern's graph: `{kind, dims, periodic, explained_edges,
/// explained_bytes, displaced_ranks, description, coords}` (`coords`: ranks × dims, or None).
#[pyfunction]
fn map_structure<'py>(py: Python<'py>, pattern: &PyPattern) -> PyResult<Bound<'py, PyDict>> {
    let pat = &*pattern.inner;
    let s = py.allow_threads(|| discovered::discover(pat));
    let d = PyDict::new(py);
    d.set_item("kind", s.kind.name())?;
    d.set_item("description", s.describe())?;
    d.set_item("dims", s.dims.clone())?;
    d.set_item("periodic", s.periodic.clone())?;
    d.set_item("explained_edges", s.explained_edges)?;
    d.set_item("explained_bytes", s.explained_bytes)?;
    d.set_item("displaced_ranks", s.displaced_ranks)?;
    if s.dims.is_empty() {
        d.set_item("coords", py.None())?;
    } else {
        let rows = s.coords.chunks(s.dims.len()).map(<[u32]>::to_vec).collect::<Vec<_>>();
        d.set_item("coords", rows)?;
    }
    Ok(d)
}

/// Parallel-tempering annealer over placements (one chain per thread per round).
#[pyclass(name = "Annealer", module = "netweave._core")]
pub(crate) struct PyAnnealer {
    inner: Tempering,
}

#[pymethods]
impl PyAnnealer {
    #[new]
    #[pyo3(signature = (net, pattern, start, cost="hops_x_max_channel", range=4, num_swaps=2, replicas=4,
                        t_min=1e-6, t_max=3e-4, sweep=2000, seed=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        net: &PyMapNetwork,
        pattern: &PyPattern,
        start: PyReadonlyArray1<'_, u32>,
        cost: &str,
        range: u32,
        num_swaps: u32,
        replicas: u32,
        t_min: f64,
        t_max: f64,
        sweep: u32,
        seed: u64,
    ) -> PyResult<Self> {
        let objective = objective(py, cost)?;
        let config = AnnealConfig { objective, range, num_swaps, replicas, t_min, t_max, sweep, seed };
        let inner = Tempering::new(net.inner.clone(), pattern.inner.clone(), start.as_slice()?, config).map_err(err)?;
        Ok(PyAnnealer { inner })
    }
    /// Run `rounds` rounds (sweeps on every chain in parallel, then exchanges).
    fn run(&mut self, py: Python<'_>, rounds: u32) {
        let t = &mut self.inner;
        py.allow_threads(|| {
            for _ in 0..rounds {
                t.round();
            }
        });
    }
    /// `{rounds, evaluations, accepted, exchanges, best: {...}, best_value, start_value, energies}`.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        status_dict(py, &self.inner.status())
    }
    /// Best placement found so far.
    fn best<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.best().0)
    }
    /// Current placement and objective value of chain `i` (0 = coldest).
    fn chain_state<'py>(&self, py: Python<'py>, i: usize) -> PyResult<(Bound<'py, PyArray1<u32>>, f64)> {
        let (h, e) =
            self.inner.chain_state(i).ok_or_else(|| crate::NetweaveErrorPy::new_err(format!("no chain {i}")))?;
        Ok((PyArray1::from_slice(py, h), e))
    }
    /// Replace chain `i`'s placement (state exchange between processes).
    fn set_chain_state(&mut self, i: usize, host_of_rank: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        self.inner.set_chain_state(i, host_of_rank.as_slice()?).map_err(err)
    }
    #[getter]
    fn temperatures(&self) -> Vec<f64> {
        self.inner.temperatures()
    }
    fn set_temperatures(&mut self, temps: Vec<f64>) -> PyResult<()> {
        self.inner.set_temperatures(&temps).map_err(err)
    }
    /// The objective normalisation (starting cost): energies are value / scale.
    #[getter]
    fn scale(&self) -> f64 {
        self.inner.scale()
    }
}

/// A tempering run's progress as `Annealer.status` gives it.
fn status_dict<'py>(py: Python<'py>, s: &AnnealStatus) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("rounds", s.rounds)?;
    d.set_item("evaluations", s.evaluations)?;
    d.set_item("accepted", s.accepted)?;
    d.set_item("exchanges", s.exchanges)?;
    d.set_item("best", parts_dict(py, &s.best)?)?;
    d.set_item("best_value", s.best_value)?;
    d.set_item("start_value", s.start_value)?;
    d.set_item("energies", s.energies.clone())?;
    Ok(d)
}

/// Anneal from `start` with parallel tempering until `seconds` pass (ignored with an evaluation
/// budget), `evaluations` moves were tried, the best value reaches `target`, or `stall` seconds
/// bring no better value. Split over `ranks` processes (this one `rank`) when `swap` carries
/// their letters (mpi4py's `comm.alltoall`): each runs `replicas` chains on its slice of one
/// temperature ladder. `on_round(status, seconds)` runs on every process after every round.
/// Returns `{host_of_rank, best_value, start_value, evaluations, seconds, trace, processes,
/// stopped_by}`, the same placement on every process.
#[pyfunction]
#[pyo3(signature = (net, pattern, start, cost="hops_x_max_channel", seconds=Some(60.0), evaluations=None, target=None, stall=None, seed=0, replicas=2, range=4, num_swaps=2, sweep=2000, t_min=1e-6, t_max=3e-4, on_round=None, rank=0, ranks=1, swap=None))]
#[allow(clippy::too_many_arguments)]
fn map_optimize<'py>(
    py: Python<'py>,
    net: &PyMapNetwork,
    pattern: &PyPattern,
    start: PyReadonlyArray1<'_, u32>,
    cost: &str,
    seconds: Option<f64>,
    evaluations: Option<u64>,
    target: Option<f64>,
    stall: Option<f64>,
    seed: u64,
    replicas: u32,
    range: u32,
    num_swaps: u32,
    sweep: u32,
    t_min: f64,
    t_max: f64,
    on_round: Option<PyObject>,
    rank: usize,
    ranks: usize,
    swap: Option<PyObject>,
) -> PyResult<Bound<'py, PyDict>> {
    let objective = objective(py, cost)?;
    let config = AnnealConfig { objective, range, num_swaps, replicas, t_min, t_max, sweep, seed };
    let stop = StopRules { seconds, evaluations, target, stall };
    let start = start.as_slice()?.to_vec();
    let mut link: Box<dyn Exchange> = match swap {
        Some(swap) => Box::new(PyExchange::new(rank, ranks, swap)),
        None if (rank, ranks) == (0, 1) => Box::new(SoloExchange),
        None => return Err(crate::NetweaveErrorPy::new_err("a run over several processes needs `swap`")),
    };
    // A Python error in the callback (or a Ctrl-C) ends the run and is raised as it was.
    let mut raised: Option<PyErr> = None;
    let (network, pat) = (net.inner.clone(), pattern.inner.clone());
    let found = py.allow_threads(|| {
        let mut hook = |status: &AnnealStatus, elapsed: f64| {
            Python::with_gil(|py| -> PyResult<()> {
                py.check_signals()?;
                if let Some(f) = &on_round {
                    f.call1(py, (status_dict(py, status)?, elapsed))?;
                }
                Ok(())
            })
            .map_err(|e| {
                raised = Some(e);
                netweave_core::NetweaveError::InvalidParameter("interrupted".into())
            })
        };
        anneal::optimize(network, pat, &start, config, &stop, link.as_mut(), &mut hook)
    });
    let found = match (found, raised) {
        (_, Some(e)) => return Err(e),
        (r, None) => r.map_err(err)?,
    };
    let d = PyDict::new(py);
    d.set_item("host_of_rank", PyArray1::from_vec(py, found.host_of_rank))?;
    d.set_item("best_value", found.best_value)?;
    d.set_item("start_value", found.start_value)?;
    d.set_item("evaluations", found.evaluations)?;
    d.set_item("seconds", found.seconds)?;
    d.set_item("trace", found.trace)?;
    d.set_item("processes", found.processes)?;
    d.set_item("stopped_by", found.stopped_by.as_str())?;
    Ok(d)
}

// ---------------------------------------------------------------------------------------------
// Pattern files and map files: `mapping::pattern_files`, `mapping::map_files`
// ---------------------------------------------------------------------------------------------

/// A pattern from a file (`.csv`, `.json`, `.trace`; a `.json`/`.nws` schedule is aggregated) or
/// a generator spec (`bruck:4096:2048`); `num_ranks` overrides or checks the size.
#[pyfunction]
#[pyo3(signature = (source, num_ranks=None))]
fn load_pattern(py: Python<'_>, source: PathBuf, num_ranks: Option<u32>) -> PyResult<PyPattern> {
    let source = source.to_string_lossy().into_owned();
    wrap(py.allow_threads(|| pattern_files::load(&source, num_ranks)))
}

/// Parse a pattern file's text in format `fmt` (`csv`, `json`, `trace`).
#[pyfunction]
#[pyo3(signature = (text, fmt, name="pattern", num_ranks=None))]
fn parse_pattern_text(text: &str, fmt: &str, name: &str, num_ranks: Option<u32>) -> PyResult<PyPattern> {
    wrap(pattern_files::parse_text(text, PatternFormat::from_name(fmt).map_err(err)?, name, num_ranks))
}

/// Write a pattern: CSV for `.csv`, JSON otherwise.
#[pyfunction]
fn save_pattern(pattern: &PyPattern, path: PathBuf) -> PyResult<()> {
    pattern_files::save(&pattern.inner, &path).map_err(err)
}

/// Generator specs: `(name, usage)` in listing order.
#[pyfunction]
fn pattern_generators() -> Vec<(&'static str, &'static str)> {
    pattern_files::GENERATORS.to_vec()
}

/// Map file format names, in listing order.
#[pyfunction]
fn map_formats() -> Vec<&'static str> {
    MapFormat::ALL.iter().map(|(_, n)| *n).collect()
}

/// The text of a map file; `meta_json` is a JSON object of extra fields for the JSON format.
#[pyfunction]
#[pyo3(signature = (net, host_of_rank, fmt, hostnames=None, meta_json=None))]
fn format_map(
    net: &PyMapNetwork,
    host_of_rank: PyReadonlyArray1<'_, u32>,
    fmt: &str,
    hostnames: Option<Vec<String>>,
    meta_json: Option<&str>,
) -> PyResult<String> {
    let meta: Option<serde_json::Map<String, serde_json::Value>> = match meta_json {
        None => None,
        Some(text) => Some(serde_json::from_str(text).map_err(|e| crate::NetweaveErrorPy::new_err(e.to_string()))?),
    };
    let format = MapFormat::from_name(fmt).map_err(err)?;
    map_files::format(&net.inner, host_of_rank.as_slice()?, format, hostnames.as_deref(), meta.as_ref()).map_err(err)
}

/// A map file's text read back into `host_of_rank`.
#[pyfunction]
#[pyo3(signature = (net, text, fmt, hostnames=None))]
fn read_map<'py>(
    py: Python<'py>,
    net: &PyMapNetwork,
    text: &str,
    fmt: &str,
    hostnames: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let format = MapFormat::from_name(fmt).map_err(err)?;
    let hosts = map_files::read(&net.inner, text, format, hostnames.as_deref()).map_err(err)?;
    Ok(PyArray1::from_vec(py, hosts))
}

/// A topology host label as a hostname (`h(1,2).0` → `h-1-2-0`).
#[pyfunction]
fn map_hostname(label: &str) -> String {
    map_files::hostname(label)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPattern>()?;
    m.add_class::<PyMapNetwork>()?;
    m.add_class::<PyAnnealer>()?;
    m.add_function(wrap_pyfunction!(map_cost, m)?)?;
    m.add_function(wrap_pyfunction!(map_channel_loads, m)?)?;
    m.add_function(wrap_pyfunction!(parse_cost, m)?)?;
    m.add_function(wrap_pyfunction!(canonical_cost, m)?)?;
    m.add_function(wrap_pyfunction!(map_baseline, m)?)?;
    m.add_function(wrap_pyfunction!(map_baselines, m)?)?;
    m.add_function(wrap_pyfunction!(map_bisem, m)?)?;
    m.add_function(wrap_pyfunction!(map_structure, m)?)?;
    for f in [
        wrap_pyfunction!(map_descend, m)?,
        wrap_pyfunction!(map_optimize, m)?,
        wrap_pyfunction!(load_pattern, m)?,
        wrap_pyfunction!(parse_pattern_text, m)?,
        wrap_pyfunction!(save_pattern, m)?,
        wrap_pyfunction!(pattern_generators, m)?,
        wrap_pyfunction!(map_formats, m)?,
        wrap_pyfunction!(format_map, m)?,
        wrap_pyfunction!(read_map, m)?,
        wrap_pyfunction!(map_hostname, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
