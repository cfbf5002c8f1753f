//! Traffic: the `Schedule` class and its generators.

use netweave_core::traffic::{Message, Schedule};
use numpy::PyArray1;
use pyo3::prelude::*;

use crate::{err, NetweaveErrorPy};

/// Phases of `(src, dst, bytes)` messages between ranks, with a rank → host placement.
#[pyclass(name = "Schedule", module = "netweave._core", frozen)]
pub(crate) struct PySchedule {
    pub(crate) inner: Schedule,
}

#[pymethods]
impl PySchedule {
    #[new]
    #[pyo3(signature = (name, num_ranks, phases, placement=None))]
    fn new(
        name: &str,
        num_ranks: u32,
        phases: Vec<Vec<(u32, u32, u64)>>,
        placement: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        let phases = phases
            .into_iter()
            .map(|p| p.into_iter().map(|(src, dst, bytes)| Message { src, dst, bytes }).collect())
            .collect();
        let mut s = Schedule::from_phases(name, num_ranks, phases).map_err(err)?;
        if let Some(pl) = placement {
            s = s.with_placement(pl).map_err(err)?;
        }
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
    fn placement<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, self.inner.placement())
    }
    /// Messages of phase `p` as `(src, dst, bytes)` tuples.
    fn phase(&self, p: usize) -> PyResult<Vec<(u32, u32, u64)>> {
        if p >= self.inner.num_phases() {
            return Err(NetweaveErrorPy::new_err(format!("phase {p} is outside 0..{}", self.inner.num_phases())));
        }
        Ok(self.inner.phase(p).iter().map(|m| (m.src, m.dst, m.bytes)).collect())
    }
    /// A copy with ranks placed on these host indices.
    fn with_placement(&self, placement: Vec<u32>) -> PyResult<PySchedule> {
        Ok(PySchedule { inner: self.inner.clone().with_placement(placement).map_err(err)? })
    }
}

/// The shift all-to-all: in phase i rank S sends to (S + i) mod N.
#[pyfunction]
fn shift_alltoall(num_ranks: u32, bytes: u64) -> PyResult<PySchedule> {
    Ok(PySchedule { inner: Schedule::shift_alltoall(num_ranks, bytes).map_err(err)? })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySchedule>()?;
    for f in [wrap_pyfunction!(shift_alltoall, m)?] {
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

use crate::topology::PyTopology;

fn lsft_sub_cluster(order: u32, k: u32, m: u32, rule: &str, rank_order: &str) -> PyResult<SubClusterAllToAll> {
    SubClusterAllToAll::new(order, k, m, rule.parse().map_err(err)?, rank_order.parse().map_err(err)?).map_err(err)
}

fn lsft_rows<'py>(py: Python<'py>, flat: Vec<u32>, cols: usize) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let rows = if cols == 0 { 0 } else { flat.len() / cols };
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
