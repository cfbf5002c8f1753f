//! Traffic: the `Schedule` class, its files and its generators.

use std::path::PathBuf;

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

/// Write a schedule: `.json` as JSON, `.nws` as binary NWSCHED.
#[pyfunction]
fn save_schedule(schedule: &PySchedule, path: PathBuf) -> PyResult<()> {
    io::save(&schedule.inner, &path).map_err(err)
}

/// Read a schedule written by `save_schedule`.
#[pyfunction]
fn load_schedule(path: PathBuf) -> PyResult<PySchedule> {
    Ok(PySchedule { inner: io::load(&path).map_err(err)? })
}

fn wrap(s: netweave_core::Result<Schedule>) -> PyResult<PySchedule> {
    Ok(PySchedule { inner: s.map_err(err)? })
}

/// Linear all-to-all: every rank walks the ranks in order (hot-spot baseline).
#[pyfunction]
fn alltoall_linear(num_ranks: u32, bytes: u64) -> PyResult<PySchedule> {
    wrap(alltoall::linear(num_ranks, bytes))
}

/// XOR all-to-all: phase i pairs S with S xor i (power-of-two N).
#[pyfunction]
fn alltoall_xor(num_ranks: u32, bytes: u64) -> PyResult<PySchedule> {
    wrap(alltoall::xor(num_ranks, bytes))
}

/// Bruck all-to-all with its real per-step message sizes.
#[pyfunction]
fn alltoall_bruck(num_ranks: u32, bytes: u64) -> PyResult<PySchedule> {
    wrap(alltoall::bruck(num_ranks, bytes))
}

/// Paper 001's A2A (SimpleSpread), `nct` sends per phase.
#[pyfunction]
#[pyo3(signature = (num_ranks, bytes, nct=1))]
fn alltoall_a2a(num_ranks: u32, bytes: u64, nct: u32) -> PyResult<PySchedule> {
    wrap(alltoall::a2a(num_ranks, bytes, nct))
}

/// Paper 001's A2AND on an n-D shape, `nct` sends per phase.
#[pyfunction]
#[pyo3(signature = (dims, bytes, nct=1))]
fn alltoall_a2and(dims: Vec<u32>, bytes: u64, nct: u32) -> PyResult<PySchedule> {
    wrap(alltoall::a2and(&dims, bytes, nct))
}

/// Paper 001's A2AT on an odd square 2-D shape, NCT 1, 2 or 4.
#[pyfunction]
#[pyo3(signature = (dims, bytes, nct=1))]
fn alltoall_a2at(dims: Vec<u32>, bytes: u64, nct: u32) -> PyResult<PySchedule> {
    wrap(alltoall::a2at(&dims, bytes, nct))
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

/// Ring allgather.
#[pyfunction]
fn allgather_ring(num_ranks: u32, bytes: u64) -> PyResult<PySchedule> {
    wrap(collectives::allgather_ring(num_ranks, bytes))
}

/// Bruck allgather.
#[pyfunction]
fn allgather_bruck(num_ranks: u32, bytes: u64) -> PyResult<PySchedule> {
    wrap(collectives::allgather_bruck(num_ranks, bytes))
}

/// Recursive-doubling allgather (power-of-two N).
#[pyfunction]
fn allgather_recursive_doubling(num_ranks: u32, bytes: u64) -> PyResult<PySchedule> {
    wrap(collectives::allgather_recursive_doubling(num_ranks, bytes))
}

/// Linear gather to `root`.
#[pyfunction]
#[pyo3(signature = (num_ranks, bytes, root=0))]
fn gather_linear(num_ranks: u32, bytes: u64, root: u32) -> PyResult<PySchedule> {
    wrap(collectives::gather_linear(num_ranks, bytes, root))
}

/// Binomial-tree gather to `root`.
#[pyfunction]
#[pyo3(signature = (num_ranks, bytes, root=0))]
fn gather_binomial(num_ranks: u32, bytes: u64, root: u32) -> PyResult<PySchedule> {
    wrap(collectives::gather_binomial(num_ranks, bytes, root))
}

/// Dissemination barrier.
#[pyfunction]
fn barrier_dissemination(num_ranks: u32, bytes: u64) -> PyResult<PySchedule> {
    wrap(collectives::barrier_dissemination(num_ranks, bytes))
}

/// Paper 002's barrier: gather + release over a unicast-based multicast tree of a random
/// visiting list drawn from `seed`.
#[pyfunction]
#[pyo3(signature = (num_ranks, bytes, root=0, seed=0))]
fn barrier_multicast(num_ranks: u32, bytes: u64, root: u32, seed: u64) -> PyResult<PySchedule> {
    wrap(collectives::barrier_multicast(num_ranks, bytes, root, seed))
}

/// The barrier's visiting list: `root`, then the other ranks shuffled by `seed`.
#[pyfunction]
fn visiting_list(num_ranks: u32, root: u32, seed: u64) -> Vec<u32> {
    collectives::visiting_list(num_ranks, root, seed)
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

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySchedule>()?;
    for f in [
        wrap_pyfunction!(shift_alltoall, m)?,
        wrap_pyfunction!(save_schedule, m)?,
        wrap_pyfunction!(load_schedule, m)?,
        wrap_pyfunction!(alltoall_linear, m)?,
        wrap_pyfunction!(alltoall_xor, m)?,
        wrap_pyfunction!(alltoall_bruck, m)?,
        wrap_pyfunction!(alltoall_a2a, m)?,
        wrap_pyfunction!(alltoall_a2and, m)?,
        wrap_pyfunction!(alltoall_a2at, m)?,
        wrap_pyfunction!(a2at_offsets, m)?,
        wrap_pyfunction!(a2and_offsets, m)?,
        wrap_pyfunction!(a2at_theory, m)?,
        wrap_pyfunction!(allgather_ring, m)?,
        wrap_pyfunction!(allgather_bruck, m)?,
        wrap_pyfunction!(allgather_recursive_doubling, m)?,
        wrap_pyfunction!(gather_linear, m)?,
        wrap_pyfunction!(gather_binomial, m)?,
        wrap_pyfunction!(barrier_dissemination, m)?,
        wrap_pyfunction!(barrier_multicast, m)?,
        wrap_pyfunction!(visiting_list, m)?,
        wrap_pyfunction!(allocate_hosts, m)?,
        wrap_pyfunction!(leaf_hosts, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
