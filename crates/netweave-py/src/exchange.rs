//! The core's one `Exchange` carried by a Python callable, for every run split over MPI ranks
//! (the flit simulator's routers, the mapper's tempering ladder).

use netweave_core::error::NetweaveError;
use netweave_core::exchange::Exchange;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

/// The ranks' letters carried by `swap(list of bytes, one per rank)`, which returns what each
/// rank sent this one (mpi4py's `comm.alltoall`).
pub(crate) struct PyExchange {
    rank: usize,
    ranks: usize,
    swap: PyObject,
}

impl PyExchange {
    /// This process as rank `rank` of `ranks`, its letters carried by `swap`.
    pub(crate) fn new(rank: usize, ranks: usize, swap: PyObject) -> Self {
        PyExchange { rank, ranks, swap }
    }
}

impl Exchange for PyExchange {
    fn rank(&self) -> usize {
        self.rank
    }
    fn ranks(&self) -> usize {
        self.ranks
    }
    fn exchange(&mut self, out: Vec<Vec<u8>>) -> netweave_core::error::Result<Vec<Vec<u8>>> {
        Python::with_gil(|py| -> PyResult<Vec<Vec<u8>>> {
            let letters = PyList::new(py, out.iter().map(|b| PyBytes::new(py, b)))?;
            let got = self.swap.call1(py, (letters,))?;
            let got = got.bind(py);
            let mut back = Vec::with_capacity(self.ranks);
            for item in got.try_iter()? {
                back.push(item?.downcast::<PyBytes>()?.as_bytes().to_vec());
            }
            Ok(back)
        })
        .map_err(|e| NetweaveError::InvalidParameter(format!("exchange between ranks failed: {e}")))
        .and_then(|back| {
            if back.len() == self.ranks {
                Ok(back)
            } else {
                Err(NetweaveError::InvalidParameter(format!(
                    "exchange returned {} letters for {} ranks",
                    back.len(),
                    self.ranks
                )))
            }
        })
    }
}
