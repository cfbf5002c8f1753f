//! One memory budget for everything netweave allocates in proportion to its input.
//!
//! Routing tables, generated topologies, schedules, patterns and simulator fabrics grow with
//! the square (or worse) of what the user asks for; an allocation the machine cannot satisfy
//! aborts the process without a word. Each of them first asks [`ensure`] whether its size fits
//! the budget, and refuses with one line saying what it would need when it does not.
//!
//! The budget is, first found:
//! 1. the `NETWEAVE_MAX_MEMORY` environment variable (the CLI's `--max-memory` sets it), a size
//!    such as `512M`, `8GiB` or `1000000` (bytes; K, M, G, T are powers of 1024);
//! 2. the memory the kernel says is available (`MemAvailable` in `/proc/meminfo`);
//! 3. no limit, on systems without `/proc/meminfo`.
//!
//! Input files may take at most a quarter of the budget ([`max_file_bytes`]): what is parsed
//! from a file is nearly always larger than the file.
//!
//! ```
//! use netweave_core::budget::{parse_size, human_bytes};
//! assert_eq!(parse_size("1.5K").unwrap(), 1536);
//! assert_eq!(human_bytes(3 << 30), "3.0 GiB");
//! ```

use crate::error::{NetweaveError, Result};

/// The environment variable that overrides the memory budget (bytes, or with a K/M/G/T suffix).
pub const MAX_MEMORY_ENV: &str = "NETWEAVE_MAX_MEMORY";

/// The memory budget and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Bytes the process may allocate for one piece of work.
    pub bytes: u64,
    /// Where `bytes` came from.
    pub source: BudgetSource,
}

/// Where the budget came from; the refusal message says it so the user knows what to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetSource {
    /// `NETWEAVE_MAX_MEMORY` (or `--max-memory`).
    Override,
    /// `MemAvailable` in `/proc/meminfo`.
    Available,
    /// Nothing known: no limit.
    Unlimited,
}

/// Parse a size: a non-negative number of bytes, optionally with a K, M, G or T suffix
/// (powers of 1024, an optional `iB` or `B` after it), e.g. `512M`, `8GiB`, `1.5T`, `65536`.
pub fn parse_size(text: &str) -> Result<u64> {
    let trimmed = text.trim();
    let lower = trimmed.to_ascii_lowercase();
    let body = lower.strip_suffix("ib").or_else(|| lower.strip_suffix('b')).unwrap_or(&lower);
    let (number, scale) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1u64 << 10),
        Some('m') => (&body[..body.len() - 1], 1 << 20),
        Some('g') => (&body[..body.len() - 1], 1 << 30),
        Some('t') => (&body[..body.len() - 1], 1 << 40),
        _ => (body, 1),
    };
    let bad =
        || NetweaveError::InvalidParameter(format!("'{text}' is not a size (bytes, or a number with K, M, G or T)"));
    if let Ok(whole) = number.trim().parse::<u64>() {
        return whole.checked_mul(scale).ok_or_else(bad);
    }
    let value: f64 = number.trim().parse().map_err(|_| bad())?;
    let bytes = value * scale as f64;
    // 2^64 itself is not representable as u64; anything at or above it, negative or NaN is refused.
    if !(0.0..18_446_744_073_709_551_616.0).contains(&bytes) {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// `bytes` for people: `512 B`, `3.0 GiB`, `1.2 TiB`.
pub fn human_bytes(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The current budget (read afresh each call: the override may change between calls).
pub fn budget() -> Result<Budget> {
    if let Some(text) = std::env::var_os(MAX_MEMORY_ENV) {
        let text = text.to_string_lossy();
        let bytes = parse_size(&text).map_err(|_| {
            NetweaveError::InvalidParameter(format!(
                "{MAX_MEMORY_ENV}: '{text}' is not a size (bytes, or a number with K, M, G or T)"
            ))
        })?;
        return Ok(Budget { bytes, source: BudgetSource::Override });
    }
    Ok(match available_memory() {
        Some(bytes) => Budget { bytes, source: BudgetSource::Available },
        None => Budget { bytes: u64::MAX, source: BudgetSource::Unlimited },
    })
}

/// `MemAvailable` from `/proc/meminfo`, in bytes.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Refuse `what` when it needs more than the budget: `bytes` is the estimate of what it would
/// allocate (a `u128`, so estimates themselves cannot overflow). The message names `what`,
/// the size and the budget, and how to raise the budget.
pub fn ensure(what: &str, bytes: u128) -> Result<()> {
    let budget = budget()?;
    if bytes <= u128::from(budget.bytes) {
        return Ok(());
    }
    let limit = match budget.source {
        BudgetSource::Override => {
            format!("the {} set by --max-memory / {MAX_MEMORY_ENV}", human_bytes(budget.bytes.into()))
        }
        BudgetSource::Available => format!(
            "the {} this machine has available (--max-memory / {MAX_MEMORY_ENV} sets another budget)",
            human_bytes(budget.bytes.into())
        ),
        BudgetSource::Unlimited => "what this machine can address".to_string(),
    };
    Err(NetweaveError::ResourceLimit(format!("{what} would need {}, more than {limit}", human_bytes(bytes))))
}

/// [`ensure`] for `count` values of type `T` (plus nothing else).
pub fn ensure_items<T>(what: &str, count: u128) -> Result<()> {
    ensure(what, count.saturating_mul(std::mem::size_of::<T>() as u128))
}

/// Most bytes an input file may have: a quarter of the budget (parsed data outgrows its text).
pub fn max_file_bytes() -> Result<u64> {
    Ok(budget()?.bytes / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse_size(" 2t ").unwrap(), 2 << 40);
        assert_eq!(parse_size("1e3").unwrap(), 1000);
        for bad in ["", "-1", "abc", "nan", "inf", "1e30", "16777216T", "18446744073709551616", "5X"] {
            assert!(parse_size(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn huge_requests_are_refused_with_the_size_and_the_budget() {
        // Beyond any machine's memory whatever the budget source (the environment is shared by
        // concurrently running tests, so it is not changed here).
        let e = ensure("a routing table for 2^40 pairs", 1u128 << 100).unwrap_err();
        assert!(matches!(e, NetweaveError::ResourceLimit(_)), "{e}");
        assert!(e.to_string().starts_with("a routing table for 2^40 pairs would need"), "{e}");
        assert!(ensure("nothing", 0).is_ok());
        assert!(ensure_items::<u64>("too many", u128::MAX).is_err());
    }
}
