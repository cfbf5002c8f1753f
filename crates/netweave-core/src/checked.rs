//! Checked arithmetic for sizes, counts and times: one place that turns an overflow or a
//! non-finite number into a one-line error naming the quantity, instead of a wrapped total
//! or an infinite time reported as a figure.
//!
//! Byte totals are summed in `u128` and must fit `u64` (what every file format and report
//! carries); rates and times must be finite and, where they divide, positive.
//!
//! ```
//! use netweave_core::checked;
//! assert_eq!(checked::total_bytes("bytes", [1u64, 2, 3]).unwrap(), 6);
//! assert!(checked::total_bytes("bytes", [u64::MAX, 1]).is_err());
//! assert!(checked::positive_finite("--host-bandwidth", 0.0).is_err());
//! ```

use crate::error::{NetweaveError, Result};

/// Sum of byte counts; an error naming `what` when it does not fit in 64 bits.
pub fn total_bytes(what: &str, sizes: impl IntoIterator<Item = u64>) -> Result<u64> {
    let mut total: u128 = 0;
    let mut count: u64 = 0;
    for size in sizes {
        total += u128::from(size);
        count += 1;
    }
    u64::try_from(total).map_err(|_| {
        NetweaveError::InvalidParameter(format!(
            "{what}: the total over {count} messages, {total} bytes, exceeds the 18446744073709551615 (2^64 - 1) bytes a schedule can carry"
        ))
    })
}

/// `a * b` for sizes and counts; an error naming `what` on overflow.
pub fn mul(what: &str, a: u64, b: u64) -> Result<u64> {
    a.checked_mul(b).ok_or_else(|| NetweaveError::InvalidParameter(format!("{what}: {a} × {b} exceeds 2^64 - 1")))
}

/// `a + b` for sizes and counts; an error naming `what` on overflow.
pub fn add(what: &str, a: u64, b: u64) -> Result<u64> {
    a.checked_add(b).ok_or_else(|| NetweaveError::InvalidParameter(format!("{what}: {a} + {b} exceeds 2^64 - 1")))
}

/// `value` when finite (not NaN, not infinite); an error naming `what` otherwise.
pub fn finite(what: &str, value: f64) -> Result<f64> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(NetweaveError::InvalidParameter(format!("{what} must be a finite number, got {value}")))
    }
}

/// `value` when finite and at least 0.
pub fn non_negative_finite(what: &str, value: f64) -> Result<f64> {
    if finite(what, value)? >= 0.0 {
        Ok(value)
    } else {
        Err(NetweaveError::InvalidParameter(format!("{what} must not be negative, got {value}")))
    }
}

/// `value` when finite and greater than 0 (a rate or a size something is divided by).
pub fn positive_finite(what: &str, value: f64) -> Result<f64> {
    if finite(what, value)? > 0.0 {
        Ok(value)
    } else {
        Err(NetweaveError::InvalidParameter(format!("{what} must be positive, got {value}")))
    }
}

/// A time or other figure computed from the inputs: an error naming `what` and the inputs at
/// fault (`because`) when it came out infinite or NaN, so no report carries `inf` as a result.
pub fn computed(what: &str, value: f64, because: &str) -> Result<f64> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(NetweaveError::InvalidParameter(format!("{what} comes out as {value}: {because}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn total_bytes_is_the_exact_sum_or_an_error(sizes in proptest::collection::vec(any::<u64>(), 0..8)) {
            let exact: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
            match total_bytes("--bytes", sizes.iter().copied()) {
                Ok(total) => prop_assert_eq!(u128::from(total), exact),
                Err(e) => {
                    prop_assert!(exact > u128::from(u64::MAX));
                    prop_assert!(e.to_string().starts_with("--bytes: the total"));
                }
            }
        }
    }

    #[test]
    fn floats_must_be_finite_and_positive_where_asked() {
        assert!(finite("x", f64::NAN).is_err());
        assert!(finite("x", f64::INFINITY).is_err());
        assert!(non_negative_finite("x", -1e-300).is_err());
        assert!(positive_finite("--host-bandwidth", 1e-300).is_ok());
        assert!(computed("time", 1.0 / 1e-310 * 1e300, "bandwidth too small").is_err());
        assert_eq!(mul("n", 1 << 32, 1 << 32).unwrap_err().to_string(), "n: 4294967296 × 4294967296 exceeds 2^64 - 1");
        assert!(add("n", u64::MAX, 0).is_ok());
    }
}
