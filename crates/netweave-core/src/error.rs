//! One error type for the whole engine.
//!
//! Every message is a single line that names the problem and, where it helps, what to do;
//! the CLI prints it as `error: <message>` and exits with code 2. [`NetweaveError::kind`]
//! sorts the variants into the four kinds a caller can act on (the Python bindings raise one
//! exception subclass per kind).

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
    /// A file could not be read as what it should be (too large, not text, a device, …);
    /// the message names the byte offset where that helps.
    #[error("{path}: {message}")]
    File { path: String, message: String },
    /// The topology is structurally wrong (a port used twice, a dangling link, ...).
    #[error("invalid topology: {0}")]
    InvalidTopology(String),
    /// Routing cannot deliver a pair or loops.
    #[error("routing error: {0}")]
    Routing(String),
    /// A schedule does not fit the topology or its placement.
    #[error("schedule error: {0}")]
    Schedule(String),
    /// The inputs are valid but what they ask for cannot be done (no routing within the VC
    /// budget, a table that does not match the fabric, …).
    #[error("{0}")]
    Infeasible(String),
    /// The work would need more memory (or another resource) than the budget allows
    /// ([`crate::budget`]); refused before anything is allocated.
    #[error("{0}")]
    ResourceLimit(String),
}

/// The kind of an error, for callers that handle kinds differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A file is unreadable or malformed.
    BadFile,
    /// A parameter (or an input built from parameters) is out of range or inconsistent.
    BadParameter,
    /// Valid inputs that cannot be satisfied (routing, schedules on the wrong fabric, …).
    Infeasible,
    /// Over the memory budget or another limit of this machine.
    ResourceLimit,
}

impl NetweaveError {
    /// Which of the four kinds this error is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            NetweaveError::Parse { .. } | NetweaveError::File { .. } => ErrorKind::BadFile,
            NetweaveError::InvalidParameter(_) | NetweaveError::InvalidTopology(_) => ErrorKind::BadParameter,
            NetweaveError::Routing(_) | NetweaveError::Schedule(_) | NetweaveError::Infeasible(_) => {
                ErrorKind::Infeasible
            }
            NetweaveError::ResourceLimit(_) => ErrorKind::ResourceLimit,
        }
    }
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
