//! One error type for the whole engine.
//!
//! Every message is a single line that names the problem and, where it helps, what to do;
//! the CLI prints it as `error: <message>` and exits with code 2.

use thiserror::Error;

/// Everything that can go wrong in netweave-core.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum NetweaveError {
    /// A parameter is out of range or inconsistent (`"m must not exceed k"`).
    #[error("{0}")]
    InvalidParameter(String),
    /// A file could not be parsed; `line` is 1-based, 0 when not line-oriented.
    #[error("{format} parse error at line {line}: {message}")]
    Parse { format: &'static str, line: usize, message: String },
    /// The topology is structurally wrong (a port used twice, a dangling link, ...).
    #[error("invalid topology: {0}")]
    InvalidTopology(String),
    /// Routing cannot deliver a pair or loops.
    #[error("routing error: {0}")]
    Routing(String),
    /// A schedule does not fit the topology or its placement.
    #[error("schedule error: {0}")]
    Schedule(String),
}

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, NetweaveError>;

/// Shorthand for `Err(NetweaveError::InvalidParameter(..))` with `format!` arguments.
#[macro_export]
macro_rules! invalid {
    ($($arg:tt)*) => {
        Err($crate::error::NetweaveError::InvalidParameter(format!($($arg)*)))
    };
}
