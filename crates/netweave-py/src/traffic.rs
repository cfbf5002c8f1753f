//! Traffic: the `Schedule` class, the `TaskGraph` class (paper 004's DAG form), their files and
//! the generators.

use std::path::PathBuf;

use netweave_core::traffic::catalog::{self, OptionValue, Request};
use netweave_core::traffic::dag::{Dependency, TaskGraph};
use netweave_core::traffic::{alloc, alltoall, collectives, io, Collective, Delivery, Message, Schedule};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::topology::PyTopology;
use crate::{err, to_py, NetweaveErrorPy};

/// Phases of `(src, dst, bytes)` messages between ranks, with a rank → host placement and
/// what the schedule claims (collective, delivery, permutation phases, concurrent sends).
#[pyclass(name = "Schedule", module = "netweave._core", frozen)]
pub(crate) struct PySchedule {
    pub(crate) inner: Schedule,
}

#[pymethods]
impl PySchedule {
    #[new]
    #[pyo3(signature = (name, num_ranks, phases, placement=None, collective="custom", root=0, delivery="direct", claims_permutation=false, concurrent_sends=1))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        name: &str,
        num_ranks: u32,
        phases: Vec<Vec<(u32, u32, u64)>>,
        placement: Option<Vec<u32>>,
        collective: &str,
        root: u32,
        delivery: &str,
        claims_permutation: bool,
        concurrent_sends: u32,
    ) -> PyResult<Self> {
        let phases = phases
            .into_iter()
            .map(|p| p.into_iter().map(|(src, dst, bytes)| Message { src, dst, bytes }).collect())
            .collect();
        let mut s = Schedule::from_phases(name, num_ranks, phases).map_err(err)?;
        if let Some(pl) = placement {
            s = s.with_placement(pl).map_err(err)?;
        }
        let collective = Collective::from_name(collective, root).map_err(err)?;
        let delivery = Delivery::from_name(delivery).map_err(err)?;
        let s = s
            .with_collective(collective, delivery)
            .with_permutation_claim(claims_permutation)
            .with_concurrent_sends(concurrent_sends)
            .map_err(err)?;
        Ok(PySchedule { inner: s })
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
    fn num_phases(&self) -> usize {
        self.inner.num_phases()
    }
    #[getter]
    fn num_messages(&self) -> usize {
        self.inner.num_messages()
    }
    #[getter]
    fn total_bytes(&self) -> u64 {
        self.inner.total_bytes()
    }
    #[getter]
    fn placement<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.placement())
    }
    /// `alltoall`, `allgather`, `gather`, `barrier` or `custom`.
    #[getter]
    fn collective(&self) -> &'static str {
        self.inner.collective().name()
    }
    /// The gather root, or None for other collectives.
    #[getter]
    fn root(&self) -> Option<u32> {
        match self.inner.collective() {
            Collective::Gather { root } => Some(root),
            _ => None,
        }
    }
    /// `direct` or `forwarded`.
    #[getter]
    fn delivery(&self) -> &'static str {
        self.inner.delivery().name()
    }
    #[getter]
    fn claims_permutation(&self) -> bool {
        self.inner.claims_permutation()
    }
    #[getter]
    fn concurrent_sends(&self) -> u32 {
        self.inner.concurrent_sends()
    }
    /// Messages of phase `p` as `(src, dst, bytes)` tuples.
    fn phase(&self, p: usize) -> PyResult<Vec<(u32, u32, u64)>> {
        if p >= self.inner.num_phases() {
            return Err(NetweaveErrorPy::new_err(format!("phase {p} is outside 0..{}", self.inner.num_phases())));
        }
        Ok(self.inner.phase(p).iter().map(|m| (m.src, m.dst, m.bytes)).collect())
    }
    /// All messages as numpy arrays `(phase, src, dst, bytes)`, phase after phase.
    #[allow(clippy::type_complexity)]
    fn arrays<'py>(
        &self,
        py: Python<'py>,
    ) -> (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u64>>)
    {
        let ms = self.inner.messages();
        (
            PyArray1::from_vec(py, self.inner.message_phases()),
            PyArray1::from_iter(py, ms.iter().map(|m| m.src)),
            PyArray1::from_iter(py, ms.iter().map(|m| m.dst)),
            PyArray1::from_iter(py, ms.iter().map(|m| m.bytes)),
        )
    }
    /// Rank `rank`'s sends in the order it issues them, as `(phase, dst, bytes)`.
    fn send_order(&self, rank: u32) -> PyResult<Vec<(u32, u32, u64)>> {
        self.rank_order(rank, true)
    }
    /// Rank `rank`'s receives in phase order, as `(phase, src, bytes)`.
    fn receive_order(&self, rank: u32) -> PyResult<Vec<(u32, u32, u64)>> {
        self.rank_order(rank, false)
    }
    /// Check the schedule's claims: dict with `complete`, `permutation` (None when not
    /// claimed), `missing`, `duplicated`, `unexpected`, `non_permutation_phases`, `first_problem`.
    fn completeness(&self, py: Python<'_>) -> PyResult<PyObject> {
        to_py(py, &self.inner.completeness())
    }
    /// A copy with ranks placed on these host indices.
    fn with_placement(&self, placement: Vec<u32>) -> PyResult<PySchedule> {
        Ok(PySchedule { inner: self.inner.clone().with_placement(placement).map_err(err)? })
    }
    /// A copy with consecutive phases merged: `group_lengths` (phase counts adding up to the
    /// phases) become the new phases, messages in the same order (direct delivery only).
    fn with_phases_merged(&self, group_lengths: Vec<usize>) -> PyResult<PySchedule> {
        Ok(PySchedule { inner: self.inner.clone().with_phases_merged(&group_lengths).map_err(err)? })
    }
    /// The schedule as versioned JSON text.
    fn to_json(&self) -> String {
        io::to_json(&self.inner)
    }
    /// The schedule in the compact binary NWSCHED format.
    fn to_binary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &io::to_binary(&self.inner).map_err(err)?))
    }
    /// Read JSON text written by `to_json`.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<PySchedule> {
        Ok(PySchedule { inner: io::from_json(text).map_err(err)? })
    }
    /// Read NWSCHED bytes written by `to_binary`.
    #[staticmethod]
    fn from_binary(data: &[u8]) -> PyResult<PySchedule> {
        Ok(PySchedule { inner: io::from_binary(data).map_err(err)? })
    }
    fn __eq__(&self, other: &PySchedule) -> bool {
        self.inner == other.inner
    }
    fn __repr__(&self) -> String {
        format!(
            "Schedule('{}', ranks={}, phases={}, messages={})",
            self.inner.name(),
            self.inner.num_ranks(),
            self.inner.num_phases(),
            self.inner.num_messages()
        )
    }
}

impl PySchedule {
    fn rank_order(&self, rank: u32, sends: bool) -> PyResult<Vec<(u32, u32, u64)>> {
        if rank >= self.inner.num_ranks() {
            return Err(NetweaveErrorPy::new_err(format!("rank {rank} is outside 0..{}", self.inner.num_ranks())));
        }
        let order = if sends { self.inner.send_order() } else { self.inner.receive_order() };
        let phase_of = self.inner.message_phases();
        Ok(order
            .of(rank)
            .iter()
            .map(|&i| {
                let m = self.inner.message(i as usize);
                (phase_of[i as usize], if sends { m.dst } else { m.src }, m.bytes)
            })
            .collect())
    }
}

/// The shift all-to-all: in phase i rank S sends to (S + i) mod N.
#[pyfunction]
fn shift_alltoall(num_ranks: u32, bytes: u64) -> PyResult<PySchedule> {
    Ok(PySchedule { inner: Schedule::shift_alltoall(num_ranks, bytes).map_err(err)? })
}

/// Write a schedule: `.json` as JSON, `.nws` as binary NWSCHED asking MPI runtimes for
/// `executor` (auto, sync, async, local-sync).
#[pyfunction]
#[pyo3(signature = (schedule, path, executor = "auto"))]
fn save_schedule(schedule: &PySchedule, path: PathBuf, executor: &str) -> PyResult<()> {
    io::save_with(&schedule.inner, &path, io::ExecutorHint::from_name(executor).map_err(err)?).map_err(err)
}

/// Executors a binary schedule can ask an MPI runtime for, in code order.
#[pyfunction]
fn schedule_executors() -> Vec<&'static str> {
    io::ExecutorHint::ALL.iter().map(|(_, n)| *n).collect()
}

/// Read a schedule written by `save_schedule`.
#[pyfunction]
fn load_schedule(path: PathBuf) -> PyResult<PySchedule> {
    Ok(PySchedule { inner: io::load(&path).map_err(err)? })
}

/// Read a schedule file of either form: a `Schedule` (phases) or a `TaskGraph` (DAG).
#[pyfunction]
fn load_workload(py: Python<'_>, path: PathBuf) -> PyResult<PyObject> {
    Ok(match io::load_workload(&path).map_err(err)? {
        io::Workload::Phases(inner) => Py::new(py, PySchedule { inner })?.into_any(),
        io::Workload::Dag(inner) => Py::new(py, PyTaskGraph { inner })?.into_any(),
    })
}

fn wrap(s: netweave_core::Result<Schedule>) -> PyResult<PySchedule> {
    Ok(PySchedule { inner: s.map_err(err)? })
}

/// A2AT's send list for odd side `n` as (dx, dy) offsets.
#[pyfunction]
fn a2at_offsets(n: u32) -> PyResult<Vec<(i64, i64)>> {
    alltoall::a2at_offsets(n).map_err(err)
}

/// A2AND's offsets for a shape, lexicographic with dimension 0 outermost.
#[pyfunction]
fn a2and_offsets(dims: Vec<u32>) -> Vec<Vec<i64>> {
    alltoall::a2and_offsets(&dims)
}

/// Paper 001's Table 1 for odd side `n`: (TV_NCT1, LB_Mesh, TV_NCT2, LB_Torus) in message units.
#[pyfunction]
fn a2at_theory(n: u32) -> PyResult<(u64, u64, u64, u64)> {
    alltoall::a2at_theory(n).map_err(err)
}

/// The barrier's visiting list: `root`, then the other ranks shuffled by `seed`.
#[pyfunction]
fn visiting_list(num_ranks: u32, root: u32, seed: u64) -> Vec<u32> {
    collectives::visiting_list(num_ranks, root, seed)
}

/// The algorithm catalogue: one dict per algorithm (`collective`, `name`, `help`, `takes`,
/// `places_ranks`), in listing order.
#[pyfunction]
fn algorithm_catalog(py: Python<'_>) -> PyResult<Vec<PyObject>> {
    catalog::ALGORITHMS
        .iter()
        .map(|a| {
            let d = pyo3::types::PyDict::new(py);
            d.set_item("collective", a.collective)?;
            d.set_item("name", a.name)?;
            d.set_item("help", a.help)?;
            d.set_item("takes", pyo3::types::PyTuple::new(py, a.takes)?)?;
            d.set_item("places_ranks", a.places_ranks)?;
            Ok(d.into_any().unbind())
        })
        .collect()
}

/// Algorithm-specific options from Python: integers or strings, None for not given.
fn option_values(options: Option<&Bound<'_, pyo3::types::PyDict>>) -> PyResult<Vec<(String, OptionValue)>> {
    let mut out = Vec::new();
    for (key, value) in options.into_iter().flat_map(|d| d.iter()) {
        if value.is_none() {
            continue;
        }
        let name: String = key.extract()?;
        let value = if let Ok(i) = value.extract::<u64>() {
            OptionValue::Int(i)
        } else if let Ok(t) = value.extract::<String>() {
            OptionValue::Text(t)
        } else {
            return Err(NetweaveErrorPy::new_err(format!("--{name} takes a non-negative integer or a name")));
        };
        out.push((name, value));
    }
    Ok(out)
}

/// The job as `traffic.build` passes it: a dict with every field of [`Request`] but the options.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct JobArgs<'py> {
    topology: Option<PyRef<'py, PyTopology>>,
    hosts: Option<String>,
    order: String,
    num_ranks: Option<u32>,
    bytes: Option<u64>,
    nct: Option<u32>,
    root: Option<u32>,
    seed: Option<u64>,
    shape: Option<Vec<u32>>,
    allow_partial_leaves: bool,
}

impl JobArgs<'_> {
    fn request(&self, options: Vec<(String, OptionValue)>) -> Request<'_> {
        Request {
            topology: self.topology.as_deref().map(|t| &t.inner),
            hosts: self.hosts.as_deref(),
            order: Some(&self.order),
            num_ranks: self.num_ranks,
            bytes: self.bytes,
            nct: self.nct,
            root: self.root,
            seed: self.seed,
            shape: self.shape.clone(),
            allow_partial_leaves: self.allow_partial_leaves,
            options,
        }
    }
}

/// Build catalogue algorithm `algorithm` of `collective` for `job` (see `traffic.build`) with
/// the algorithm-specific `options`.
#[pyfunction]
#[pyo3(signature = (collective, algorithm, job, options=None))]
fn build_schedule(
    py: Python<'_>,
    collective: &str,
    algorithm: &str,
    job: JobArgs<'_>,
    options: Option<&Bound<'_, pyo3::types::PyDict>>,
) -> PyResult<PySchedule> {
    let r = job.request(option_values(options)?);
    wrap(py.allow_threads(|| catalog::build(collective, algorithm, &r)))
}

/// Check `job` against an algorithm taking `takes` and settle it (for algorithms registered from
/// Python, whose own options are given by name): `{hosts, bytes, shape, nct, root, seed}`.
#[pyfunction]
#[pyo3(signature = (label, collective, takes, job, option_names=vec![]))]
fn settle_job(
    py: Python<'_>,
    label: &str,
    collective: &str,
    takes: Vec<String>,
    job: JobArgs<'_>,
    option_names: Vec<String>,
) -> PyResult<PyObject> {
    // Only the names are checked here; the plug-in reads its options' values itself.
    let r = job.request(option_names.into_iter().map(|n| (n, OptionValue::Text(String::new()))).collect());
    let takes: Vec<&str> = takes.iter().map(String::as_str).collect();
    let job = catalog::job(label, collective, &takes, &r).map_err(err)?;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("hosts", job.hosts)?;
    d.set_item("bytes", job.bytes)?;
    d.set_item("shape", job.shape)?;
    d.set_item("nct", job.nct)?;
    d.set_item("root", job.root)?;
    d.set_item("seed", job.seed)?;
    Ok(d.into_any().unbind())
}

/// The lattice shape of a job covering a whole mesh or torus with one host per router, ranks in
/// router order; None otherwise.
#[pyfunction]
fn grid_shape(topology: &PyTopology, hosts: Vec<u32>) -> Option<Vec<u32>> {
    catalog::grid_shape(&topology.inner, &hosts)
}

/// Hosts of a job, rank by rank: host list `spec` (`all`, `0-15`, `leaf:0-3`, ...), rank
/// `order` (`listed`, `cyclic`, `random` with `seed`); fat-trees take whole leaves unless
/// `allow_partial_leaves`.
#[pyfunction]
#[pyo3(signature = (topology, spec, order="listed", seed=0, allow_partial_leaves=false))]
fn allocate_hosts(
    topology: &PyTopology,
    spec: &str,
    order: &str,
    seed: u64,
    allow_partial_leaves: bool,
) -> PyResult<Vec<u32>> {
    let ordering = alloc::RankOrdering::from_name(order, seed).map_err(err)?;
    alloc::allocate(&topology.inner, spec, ordering, allow_partial_leaves).map_err(err)
}

/// Host indices of each leaf (switch with hosts), in switch order.
#[pyfunction]
fn leaf_hosts(topology: &PyTopology) -> Vec<Vec<u32>> {
    alloc::leaves(&topology.inner).into_iter().map(|(_, h)| h).collect()
}

/// Paper 004's contention-free schedule of `collective` (`gather`, `alltoall`, or `tasks` with
/// the `(src, dst, bytes)` list `tasks`) over every host of `topo`: `(TaskGraph, summary)`;
/// `policy` is a task policy name, `rule_b` `ge`/`lt`, `relay` `departure` (the thesis' rule),
/// `arrival` or `off`, `timing` `sum` or `clock`; `perturbation` > 0 schedules from link values
/// off by up to that fraction (drawn from `perturbation_seed`) and replays on the true ones.
/// `scheduler` is `paper` (the thesis' stage scheduler) or `packed` (stages filled from
/// contention-free phases); `hosts` (host indices) runs the job on part of the fabric, rank r on
/// `hosts[r]`; `routes` takes the paths from a routing table instead of the unique shortest ones.
#[pyfunction]
#[pyo3(signature = (topo, collective, bytes, root=0, policy="min-sync", rule_b="ge", seed=0, relay="departure",
                    timing="sum", perturbation=0.0, perturbation_seed=0, tasks=None, scheduler="paper", hosts=None,
                    routes=None))]
#[allow(clippy::too_many_arguments)]
fn contention_free<'py>(
    py: Python<'py>,
    topo: &PyTopology,
    collective: &str,
    bytes: u64,
    root: u32,
    policy: &str,
    rule_b: &str,
    seed: u64,
    relay: &str,
    timing: &str,
    perturbation: f64,
    perturbation_seed: u64,
    tasks: Option<Vec<(u32, u32, u64)>>,
    scheduler: &str,
    hosts: Option<Vec<u32>>,
    routes: Option<&crate::routing::PyRoutingTable>,
) -> PyResult<(PyTaskGraph, Bound<'py, pyo3::types::PyDict>)> {
    use netweave_core::traffic::contention_free as cf;
    let job = job_hosts(topo, hosts)?;
    let tasks = match &job {
        // A job on part of the fabric: the collective among its hosts, in host indices.
        Some(h) if tasks.is_none() => {
            let on_job = collective_tasks_n(h.len() as u32, collective, bytes, root, None)?;
            on_job
                .into_iter()
                .map(|m| Message { src: h[m.src as usize], dst: h[m.dst as usize], bytes: m.bytes })
                .collect()
        }
        _ => collective_tasks(topo, collective, bytes, root, tasks)?,
    };
    let rule_b = match rule_b {
        "ge" => cf::RuleB::AtLeast,
        "lt" => cf::RuleB::Below,
        other => return Err(NetweaveErrorPy::new_err(format!("unknown Rule B comparison '{other}' (use ge or lt)"))),
    };
    let relay = match relay {
        "departure" => Some(cf::RelayRule::Departure),
        "arrival" => Some(cf::RelayRule::Arrival),
        "off" => None,
        other => {
            return Err(NetweaveErrorPy::new_err(format!(
                "unknown relay rule '{other}' (use departure, arrival or off)"
            )))
        }
    };
    let options = cf::Options {
        scheduler: cf::Scheduler::by_name(scheduler).map_err(err)?,
        policy: cf::Policy::by_name(policy).map_err(err)?,
        rule_b,
        seed,
        relay,
        timing: cf::Timing::by_name(timing).map_err(err)?,
        perturbation,
        perturbation_seed,
    };
    let table = routes.map(|r| &r.inner);
    let t0 = std::time::Instant::now();
    let (plan, graph) = py
        .allow_threads(|| {
            let paths = match table {
                Some(r) => cf::PathTable::with_routes(&topo.inner, r)?,
                None => cf::PathTable::new(&topo.inner)?,
            };
            let plan = cf::ContentionFree::on_paths(&topo.inner, paths, tasks, options)?;
            let name = match scheduler {
                "paper" => format!("{collective}-contention-free-{policy}"),
                other => format!("{collective}-contention-free-{other}"),
            };
            let graph = match &job {
                Some(h) => plan.task_graph_on(&name, h)?,
                None => plan.task_graph(&name)?,
            };
            Ok::<_, netweave_core::error::NetweaveError>((plan, graph))
        })
        .map_err(err)?;
    let seconds = t0.elapsed().as_secs_f64();
    let d = pyo3::types::PyDict::new(py);
    d.set_item("tasks", graph.num_tasks())?;
    d.set_item("dependencies", graph.num_dependencies())?;
    d.set_item("groups", plan.groups().len())?;
    d.set_item("relayed_tasks", plan.stages().relayed_tasks)?;
    d.set_item("relay_pieces", plan.stages().pieces.len())?;
    d.set_item("predicted_seconds", plan.makespan_seconds())?;
    d.set_item("scheduling_seconds", seconds)?;
    Ok((PyTaskGraph { inner: graph }, d))
}

/// The job's hosts when a subset is given: at least two, each a host of `topo`, none twice.
fn job_hosts(topo: &PyTopology, hosts: Option<Vec<u32>>) -> PyResult<Option<Vec<u32>>> {
    let Some(hosts) = hosts else { return Ok(None) };
    let t = &topo.inner;
    let label = |h: u32| t.label(t.hosts()[h as usize]).to_string();
    if let Some(&h) = hosts.iter().find(|&&h| h as usize >= t.num_hosts()) {
        return Err(NetweaveErrorPy::new_err(format!(
            "host index {h} is not a host of the fabric (0..{})",
            t.num_hosts() - 1
        )));
    }
    if hosts.len() < 2 {
        let which = hosts.first().map(|&h| format!(" (host '{}')", label(h))).unwrap_or_default();
        return Err(NetweaveErrorPy::new_err(format!(
            "a contention-free schedule needs at least 2 hosts; the job has {}{which}",
            hosts.len()
        )));
    }
    let mut seen = vec![false; t.num_hosts()];
    for &h in &hosts {
        if std::mem::replace(&mut seen[h as usize], true) {
            return Err(NetweaveErrorPy::new_err(format!("host '{}' appears twice in the job", label(h))));
        }
    }
    Ok(Some(hosts))
}

/// The tasks of `collective` among `n` ranks: gather(root), alltoall, or the given list.
fn collective_tasks_n(
    n: u32,
    collective: &str,
    bytes: u64,
    root: u32,
    tasks: Option<Vec<(u32, u32, u64)>>,
) -> PyResult<Vec<Message>> {
    use netweave_core::traffic::contention_free as cf;
    match (collective, tasks) {
        ("gather", None) => cf::gather_tasks(n, root, bytes),
        ("alltoall", None) => cf::alltoall_tasks(n, bytes),
        ("tasks", Some(list)) => Ok(list.into_iter().map(|(src, dst, bytes)| Message { src, dst, bytes }).collect()),
        ("tasks", None) => netweave_core::invalid!("collective 'tasks' needs the task list"),
        (other, None) => {
            netweave_core::invalid!("contention-free schedules gather, alltoall or a task list, not {other}")
        }
        (other, Some(_)) => netweave_core::invalid!("a task list goes with collective 'tasks', not {other}"),
    }
    .map_err(err)
}

/// The tasks of `collective` over every host of `topo`: gather(root), alltoall, or the given list.
fn collective_tasks(
    topo: &PyTopology,
    collective: &str,
    bytes: u64,
    root: u32,
    tasks: Option<Vec<(u32, u32, u64)>>,
) -> PyResult<Vec<Message>> {
    collective_tasks_n(topo.inner.num_hosts() as u32, collective, bytes, root, tasks)
}

/// Paper 004's Concurrent baseline for the same tasks as `contention_free`: every task at once,
/// each host posting its own in an order drawn with `seed`.
#[pyfunction]
#[pyo3(signature = (topo, collective, bytes, root=0, tasks=None, seed=0))]
fn concurrent_dag(
    topo: &PyTopology,
    collective: &str,
    bytes: u64,
    root: u32,
    tasks: Option<Vec<(u32, u32, u64)>>,
    seed: u64,
) -> PyResult<PyTaskGraph> {
    let list = collective_tasks(topo, collective, bytes, root, tasks)?;
    let n = topo.inner.num_hosts() as u32;
    let graph =
        netweave_core::traffic::contention_free::concurrent(&format!("{collective}-concurrent"), n, &list, seed);
    Ok(PyTaskGraph { inner: graph.map_err(err)? })
}

/// The algorithm an MPI library (`openmpi`, `mpich`) runs by default for `collective` on
/// `num_ranks` ranks with `bytes` per block, as a schedule on ranks `0..num_ranks` (gather to
/// `root`): `(schedule, {library, label, algorithm, pairs_by_xor, executor, concurrent_sends})`.
#[pyfunction]
#[pyo3(signature = (library, collective, num_ranks, bytes, root=0))]
fn native_mpi(
    py: Python<'_>,
    library: &str,
    collective: &str,
    num_ranks: u32,
    bytes: u64,
    root: u32,
) -> PyResult<(PySchedule, PyObject)> {
    use netweave_core::traffic::native_mpi as native;
    let lib = native::Library::from_name(library).map_err(err)?;
    let algorithm = native::decide(lib, collective, num_ranks, bytes).map_err(err)?;
    let schedule = native::schedule(lib, collective, num_ranks, bytes, root).map_err(err)?;
    let info = pyo3::types::PyDict::new(py);
    info.set_item("library", lib.name())?;
    info.set_item("label", lib.label())?;
    info.set_item("algorithm", algorithm)?;
    info.set_item("pairs_by_xor", native::pairs_by_xor(lib, collective, num_ranks, bytes).map_err(err)?)?;
    let executor = io::ExecutorHint::ALL.iter().find(|(h, _)| *h == native::EXECUTOR).map(|(_, n)| *n);
    info.set_item("executor", executor)?;
    info.set_item("concurrent_sends", schedule.concurrent_sends())?;
    Ok((PySchedule { inner: schedule }, info.into_any().unbind()))
}

/// `schedule`'s phases cut, in order, into the longest runs whose messages put at most
/// `buffer_bytes` (headers included) on every switch output port of `routes`' fabric: each
/// run's length in phases, for [`TaskGraph.with_barriers`]. A forwarded schedule gets one phase
/// per run.
#[pyfunction]
fn buffer_groups(
    routes: &crate::routing::PyRoutingTable,
    schedule: &PySchedule,
    buffer_bytes: u64,
) -> PyResult<Vec<usize>> {
    let topology = &routes.topology.get().inner;
    netweave_core::traffic::phase_groups::buffer_groups(topology, &routes.inner, &schedule.inner, buffer_bytes)
        .map_err(err)
}

/// Task policy names of the contention-free scheduler.
#[pyfunction]
fn contention_free_policies() -> Vec<&'static str> {
    netweave_core::traffic::contention_free::Policy::ALL.iter().map(|(_, n)| *n).collect()
}

/// Transfers between ranks with dependencies (paper 004's DAG form).
#[pyclass(name = "TaskGraph", module = "netweave._core", frozen)]
pub(crate) struct PyTaskGraph {
    pub(crate) inner: TaskGraph,
}

/// One task in the constructor's form: `(src, dst, bytes, after, relays)`.
type TaskRow = (u32, u32, u64, Vec<u32>, Option<u32>);

#[pymethods]
impl PyTaskGraph {
    /// `tasks` are `(src, dst, bytes, after, relays)`: `after` lists earlier tasks that must
    /// completely finish first, `relays` the earlier task whose data this one forwards (or None).
    #[new]
    #[pyo3(signature = (name, num_ranks, tasks, placement=None))]
    fn new(name: &str, num_ranks: u32, tasks: Vec<TaskRow>, placement: Option<Vec<u32>>) -> PyResult<Self> {
        let mut g = TaskGraph::new(name, num_ranks);
        let mut deps = Vec::new();
        for (src, dst, bytes, after, relays) in tasks {
            deps.clear();
            deps.extend(after.into_iter().map(|p| (p, Dependency::Complete)));
            deps.extend(relays.map(|p| (p, Dependency::Relay)));
            g.add_task(Message { src, dst, bytes }, &deps).map_err(err)?;
        }
        if let Some(p) = placement {
            g = g.with_placement(p).map_err(err)?;
        }
        Ok(PyTaskGraph { inner: g })
    }
    /// The phased schedule as a DAG in local-sync order.
    #[staticmethod]
    fn from_schedule(schedule: &PySchedule) -> PyResult<Self> {
        Ok(PyTaskGraph { inner: TaskGraph::from_schedule(&schedule.inner).map_err(err)? })
    }
    /// The phased schedule as a DAG that runs it in groups of phases (`group_lengths`, phase
    /// counts adding up to the schedule's), a binomial-tree barrier of zero-byte tasks between
    /// groups and no wait inside one: `[1] * phases` is the phase-synchronous order.
    #[staticmethod]
    fn with_barriers(schedule: &PySchedule, group_lengths: Vec<usize>) -> PyResult<Self> {
        Ok(PyTaskGraph { inner: TaskGraph::with_barriers(&schedule.inner, &group_lengths).map_err(err)? })
    }
    /// Parse the `netweave-dag` JSON form.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        Ok(PyTaskGraph { inner: TaskGraph::from_json(text).map_err(err)? })
    }
    fn to_json(&self) -> String {
        self.inner.to_json()
    }
    /// Write to `path`: `.json`, or `.nws` (the binary DAG form the executors read).
    fn save(&self, path: std::path::PathBuf) -> PyResult<()> {
        netweave_core::traffic::io::save_dag(&self.inner, &path).map_err(err)
    }
    /// Read a `.json` or `.nws` DAG file.
    #[staticmethod]
    fn load(path: std::path::PathBuf) -> PyResult<Self> {
        Ok(PyTaskGraph { inner: netweave_core::traffic::io::load_dag(&path).map_err(err)? })
    }
    /// Every task as `(src, dst, bytes, after, relays)`, the constructor's form.
    fn tasks(&self) -> Vec<TaskRow> {
        (0..self.inner.num_tasks() as u32)
            .map(|t| {
                let m = self.inner.task(t);
                let mut after = Vec::new();
                let mut relays = None;
                for &(p, kind) in self.inner.predecessors(t) {
                    match kind {
                        Dependency::Complete => after.push(p),
                        Dependency::Relay => relays = Some(p),
                    }
                }
                (m.src, m.dst, m.bytes, after, relays)
            })
            .collect()
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
    fn num_tasks(&self) -> usize {
        self.inner.num_tasks()
    }
    #[getter]
    fn num_dependencies(&self) -> usize {
        self.inner.num_dependencies()
    }
    #[getter]
    fn placement(&self) -> Vec<u32> {
        self.inner.placement().to_vec()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(contention_free, m)?)?;
    m.add_function(wrap_pyfunction!(buffer_groups, m)?)?;
    m.add_function(wrap_pyfunction!(contention_free_policies, m)?)?;
    m.add_function(wrap_pyfunction!(schedule_executors, m)?)?;
    m.add_function(wrap_pyfunction!(concurrent_dag, m)?)?;
    m.add_function(wrap_pyfunction!(native_mpi, m)?)?;
    m.add_class::<PySchedule>()?;
    m.add_class::<PyTaskGraph>()?;
    for f in [
        wrap_pyfunction!(shift_alltoall, m)?,
        wrap_pyfunction!(save_schedule, m)?,
        wrap_pyfunction!(load_schedule, m)?,
        wrap_pyfunction!(load_workload, m)?,
        wrap_pyfunction!(a2at_offsets, m)?,
        wrap_pyfunction!(a2and_offsets, m)?,
        wrap_pyfunction!(a2at_theory, m)?,
        wrap_pyfunction!(visiting_list, m)?,
        wrap_pyfunction!(algorithm_catalog, m)?,
        wrap_pyfunction!(build_schedule, m)?,
        wrap_pyfunction!(settle_job, m)?,
        wrap_pyfunction!(grid_shape, m)?,
        wrap_pyfunction!(allocate_hosts, m)?,
        wrap_pyfunction!(leaf_hosts, m)?,
    ] {
        m.add_function(f)?;
    }
    register_lsft(m)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Latin-square fat-tree all-to-all schedules (paper 000): `traffic::lsft`
// ---------------------------------------------------------------------------------------------

use netweave_core::topology::lsft::LsftLayout;
use netweave_core::traffic::lsft::{self as lsft_core, FullSystemAllToAll, SubClusterAllToAll};
use numpy::{PyArray2, PyArrayMethods};

fn lsft_sub_cluster(order: u32, k: u32, m: u32, rule: &str, rank_order: &str) -> PyResult<SubClusterAllToAll> {
    SubClusterAllToAll::new(order, k, m, rule.parse().map_err(err)?, rank_order.parse().map_err(err)?).map_err(err)
}

fn lsft_rows<'py>(py: Python<'py>, flat: Vec<u32>, cols: usize) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let rows = flat.len().checked_div(cols).unwrap_or(0);
    PyArray1::from_vec(py, flat).reshape([rows, cols])
}

/// Paper 000's full-system all-to-all (shift-number triples) on an LSFT topology; rank r runs
/// on host index r.
#[pyfunction]
fn lsft_alltoall(py: Python<'_>, topology: &PyTopology, bytes: u64) -> PyResult<PySchedule> {
    let t = &topology.inner;
    let inner = py.allow_threads(|| FullSystemAllToAll::for_topology(t)?.schedule(bytes)).map_err(err)?;
    Ok(PySchedule { inner })
}

/// Paper 000's sub-cluster all-to-all: n×k rectangle of grid leaves (n = the LSFT's order), m
/// servers per leaf, move `rule` ("text" or "paper-table3"), `rank_order` ("row-major" or
/// "column-major"), on `side` of the LSFT; placement included.
#[pyfunction]
#[pyo3(signature = (topology, k, m, bytes, rule="text", rank_order="row-major", side=0))]
#[allow(clippy::too_many_arguments)]
fn lsft_partial_alltoall(
    py: Python<'_>,
    topology: &PyTopology,
    k: u32,
    m: u32,
    bytes: u64,
    rule: &str,
    rank_order: &str,
    side: u32,
) -> PyResult<PySchedule> {
    let t = &topology.inner;
    let lay = LsftLayout::from_topology(t).map_err(err)?;
    let job = lsft_sub_cluster(lay.order, k, m, rule, rank_order)?;
    let inner = py.allow_threads(|| job.schedule(&lay, side, bytes)).map_err(err)?;
    Ok(PySchedule { inner })
}

/// The shift baseline on the same sub-cluster allocation and rank order.
#[pyfunction]
#[pyo3(signature = (topology, k, m, bytes, rank_order="row-major", side=0))]
fn lsft_partial_shift(
    topology: &PyTopology,
    k: u32,
    m: u32,
    bytes: u64,
    rank_order: &str,
    side: u32,
) -> PyResult<PySchedule> {
    let lay = LsftLayout::from_topology(&topology.inner).map_err(err)?;
    let job = lsft_sub_cluster(lay.order, k, m, "text", rank_order)?;
    Ok(PySchedule { inner: lsft_core::sub_cluster_shift(&job, &lay, side, bytes).map_err(err)? })
}

/// Host index of every rank of the n×k×m sub-cluster (the job allocation).
#[pyfunction]
#[pyo3(signature = (topology, k, m, rank_order="row-major", side=0))]
fn lsft_allocation<'py>(
    py: Python<'py>,
    topology: &PyTopology,
    k: u32,
    m: u32,
    rank_order: &str,
    side: u32,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let lay = LsftLayout::from_topology(&topology.inner).map_err(err)?;
    let job = lsft_sub_cluster(lay.order, k, m, "text", rank_order)?;
    Ok(PyArray1::from_vec(py, job.hosts(&lay, side).map_err(err)?))
}

/// The executed shift-number triples `(a, b, c)` of the full-system schedule, in phase order.
#[pyfunction]
#[pyo3(signature = (order, two_sided=false))]
fn lsft_triples(order: u32, two_sided: bool) -> Vec<(u32, u32, u32)> {
    lsft_core::full_system_triples(order, two_sided).into_iter().map(|t| (t.a, t.b, t.c)).collect()
}

/// Full-system destinations as a `(phases, servers)` array, self-sends included.
#[pyfunction]
#[pyo3(signature = (order, two_sided=false))]
fn lsft_full_destinations(py: Python<'_>, order: u32, two_sided: bool) -> PyResult<Bound<'_, PyArray2<u32>>> {
    let a2a = FullSystemAllToAll::new(order, two_sided).map_err(err)?;
    let n = a2a.num_ranks() as usize;
    let flat = py.allow_threads(|| {
        let mut flat = vec![0u32; n * a2a.triples().len()];
        for (t, row) in flat.chunks_mut(n).enumerate() {
            a2a.phase_destinations(t, row);
        }
        flat
    });
    lsft_rows(py, flat, n)
}

/// Sub-cluster destinations as a `(phases, ranks)` array (phase t = g·m + i), self-sends
/// included: paper 000's Table 3 for (3, 2, 2) with rule "paper-table3".
#[pyfunction]
#[pyo3(signature = (order, k, m, rule="text", rank_order="row-major"))]
fn lsft_partial_destinations<'py>(
    py: Python<'py>,
    order: u32,
    k: u32,
    m: u32,
    rule: &str,
    rank_order: &str,
) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let job = lsft_sub_cluster(order, k, m, rule, rank_order)?;
    let flat = py.allow_threads(|| job.destination_table());
    lsft_rows(py, flat, job.num_ranks() as usize)
}

/// The vector table in the paper's notation: `table[g][j]` ("[∞,1]", "[2,1]", "[*]").
#[pyfunction]
fn lsft_vector_table(order: u32, k: u32, m: u32) -> PyResult<Vec<Vec<String>>> {
    let t = lsft_core::vector_table(order, k, m).map_err(err)?;
    Ok(t.into_iter().map(|row| row.into_iter().map(|v| v.to_string()).collect()).collect())
}

/// Names of the sub-cluster move rules ("text", "paper-table3") and rank orders.
#[pyfunction]
fn lsft_options() -> (Vec<&'static str>, Vec<&'static str>) {
    (
        lsft_core::MoveRule::ALL.iter().map(|r| r.name()).collect(),
        lsft_core::RankOrder::ALL.iter().map(|r| r.name()).collect(),
    )
}

fn register_lsft(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(lsft_alltoall, m)?,
        wrap_pyfunction!(lsft_partial_alltoall, m)?,
        wrap_pyfunction!(lsft_partial_shift, m)?,
        wrap_pyfunction!(lsft_allocation, m)?,
        wrap_pyfunction!(lsft_triples, m)?,
        wrap_pyfunction!(lsft_full_destinations, m)?,
        wrap_pyfunction!(lsft_partial_destinations, m)?,
        wrap_pyfunction!(lsft_vector_table, m)?,
        wrap_pyfunction!(lsft_options, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
