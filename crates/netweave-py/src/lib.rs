//! Python bindings for netweave-core: wrappers and conversions only, no logic.
//!
//! Every function maps one-to-one onto a core function; core errors become a subclass of
//! `netweave.NetweaveError` (a `ValueError`) by kind — `FileError`, `ParameterError`,
//! `InfeasibleError`, `ResourceLimitError` — carrying the core's one-line message.

use netweave_core::{ErrorKind, NetweaveError};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pythonize::pythonize;

mod analysis;
mod exchange;
mod flitsim;
mod flowsim;
mod mapping;
mod routing;
mod topology;
mod traffic;

create_exception!(_core, NetweaveErrorPy, PyValueError, "A netweave input or engine error (one-line message).");
create_exception!(_core, FileError, NetweaveErrorPy, "An input file is unreadable or malformed.");
create_exception!(_core, ParameterError, NetweaveErrorPy, "A parameter is out of range or inconsistent.");
create_exception!(_core, InfeasibleError, NetweaveErrorPy, "Valid inputs asking for what cannot be done.");
create_exception!(
    _core,
    ResourceLimitError,
    NetweaveErrorPy,
    "Refused: over the memory budget (--max-memory) or another limit."
);

fn err(e: NetweaveError) -> PyErr {
    let message = e.to_string();
    match e.kind() {
        ErrorKind::BadFile => FileError::new_err(message),
        ErrorKind::BadParameter => ParameterError::new_err(message),
        ErrorKind::Infeasible => InfeasibleError::new_err(message),
        ErrorKind::ResourceLimit => ResourceLimitError::new_err(message),
    }
}

/// Read a text file for a Python reader: UTF-8 without NUL bytes, within the size limit;
/// errors name the path and the offset of the first bad byte.
#[pyfunction]
fn read_text_file(path: std::path::PathBuf) -> PyResult<String> {
    netweave_core::input::read_text(&path).map_err(err)
}

/// The memory budget in bytes (`NETWEAVE_MAX_MEMORY`, else the memory available).
#[pyfunction]
fn memory_budget() -> PyResult<u64> {
    netweave_core::budget::budget().map(|b| b.bytes).map_err(err)
}

/// Parse a size such as `512M` or `8GiB` into bytes (K, M, G, T are powers of 1024).
#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    netweave_core::budget::parse_size(text).map_err(err)
}

fn to_py<T: serde::Serialize>(py: Python<'_>, value: &T) -> PyResult<PyObject> {
    Ok(pythonize(py, value).map_err(|e| PyValueError::new_err(e.to_string()))?.unbind())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NetweaveError", m.py().get_type::<NetweaveErrorPy>())?;
    m.add("FileError", m.py().get_type::<FileError>())?;
    m.add("ParameterError", m.py().get_type::<ParameterError>())?;
    m.add("InfeasibleError", m.py().get_type::<InfeasibleError>())?;
    m.add("ResourceLimitError", m.py().get_type::<ResourceLimitError>())?;
    m.add_function(wrap_pyfunction!(read_text_file, m)?)?;
    m.add_function(wrap_pyfunction!(memory_budget, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    topology::register(m)?;
    routing::register(m)?;
    traffic::register(m)?;
    analysis::register(m)?;
    flitsim::register(m)?;
    flowsim::register(m)?;
    mapping::register(m)?;
    Ok(())
}
