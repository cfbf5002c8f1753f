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
    Ok(())
}
