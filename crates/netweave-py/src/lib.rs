//! Python bindings for netweave-core: wrappers and conversions only, no logic.
//!
//! Every function maps one-to-one onto a core function; core errors become
//! `netweave.NetweaveError` (a `ValueError`) carrying the core's one-line message.

use netweave_core::NetweaveError;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pythonize::pythonize;

mod analysis;
mod flitsim;
mod flowsim;
mod mapping;
mod routing;
mod topology;
mod traffic;

create_exception!(_core, NetweaveErrorPy, PyValueError, "A netweave input or engine error (one-line message).");

fn err(e: NetweaveError) -> PyErr {
    NetweaveErrorPy::new_err(e.to_string())
}

fn to_py<T: serde::Serialize>(py: Python<'_>, value: &T) -> PyResult<PyObject> {
    Ok(pythonize(py, value).map_err(|e| PyValueError::new_err(e.to_string()))?.unbind())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NetweaveError", m.py().get_type::<NetweaveErrorPy>())?;
    topology::register(m)?;
    routing::register(m)?;
    traffic::register(m)?;
    analysis::register(m)?;
    flitsim::register(m)?;
    flowsim::register(m)?;
    mapping::register(m)?;
    Ok(())
}
