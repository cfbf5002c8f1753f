//! Finite fields GF(q) for every prime power q = p^k, the arithmetic under projective planes.
//!
//! Paper 000 builds its projective plane (and so the Latin-square fat-tree) only for prime
//! orders, where the arithmetic is plain integers mod q. The same construction works verbatim
//! over any finite field, which is what lets netweave build LSFTs of order 4, 8, 9, 16, …
//!
//! **Element encoding.** An element is a `u32` in `0..q`. It stands for the polynomial whose
//! coefficients are its base-p digits, least significant digit = constant term:
//! `e = d_0 + d_1·p + … + d_{k-1}·p^{k-1}` ↔ `d_0 + d_1·x + … + d_{k-1}·x^{k-1}`.
//! Arithmetic is polynomial arithmetic over GF(p) modulo a fixed monic irreducible polynomial
//! of degree k. For prime q (k = 1) the modulus is `x`, every element is a constant, and the
//! field is exactly "integers mod q" — so labels and formulas coincide with the paper's.
//!
//! **Determinism.** The modulus is the *smallest* monic irreducible polynomial of degree k, in
//! the order of the base-p integer formed by its non-leading coefficients, found by an
//! exhaustive divisibility check. Two runs (or two machines) therefore always agree on which
//! element is "3" in GF(9), which matters because point and line labels print elements.
//!
//! **Storage.** Up to [`DENSE_TABLE_MAX_ORDER`] the field keeps flat q×q addition and
//! multiplication tables (O(1) lookups for hot loops). Larger fields, up to
//! [`MAX_FIELD_ORDER`], keep only O(q) tables (negation, inverse, discrete log and
//! antilog), because q² entries would need gigabytes; addition is then done digit by digit and
//! multiplication through logarithms.
//!
//! ```
//! use netweave_core::topology::galois::GaloisField;
//! let f = GaloisField::new(4).unwrap();          // GF(4) = GF(2)[x]/(x²+x+1)
//! assert_eq!(f.characteristic(), 2);
//! assert_eq!(f.add(2, 3), 1);                     // x + (x+1) = 1
//! assert_eq!(f.mul(2, 2), 3);                     // x·x = x+1
//! assert_eq!(f.inv(2), Some(3));
//! ```

use crate::error::Result;

/// Largest field order accepted by [`GaloisField::new`].
///
/// Elements must fit comfortably in `u32` arithmetic and the O(q) tables must stay small;
/// projective planes above this order would have more than 2^32 points anyway.
pub const MAX_FIELD_ORDER: u32 = 1 << 16;

/// Largest order for which flat q×q addition and multiplication tables are built
/// (2 × 4 MiB at q = 1024).
pub const DENSE_TABLE_MAX_ORDER: u32 = 1024;

/// Sentinel stored in the inverse and logarithm tables for the zero element.
const NONE: u32 = u32::MAX;

/// `(p, k)` with `q = p^k` and p prime, or `None` when q is not a prime power (q < 2 included).
///
/// ```
/// use netweave_core::topology::galois::prime_power;
/// assert_eq!(prime_power(27), Some((3, 3)));
/// assert_eq!(prime_power(7), Some((7, 1)));
/// assert_eq!(prime_power(12), None);
/// assert_eq!(prime_power(1), None);
/// ```
pub fn prime_power(q: u32) -> Option<(u32, u32)> {
    if q < 2 {
        return None;
    }
    // The smallest divisor > 1 is necessarily prime; q is a prime power iff dividing it out
    // leaves 1.
    let p = smallest_prime_factor(q);
    let (mut rest, mut k) = (q, 0);
    while rest.checked_rem(p) == Some(0) {
        rest /= p;
        k += 1;
    }
    (rest == 1).then_some((p, k))
}

/// Smallest prime factor of `n >= 2` by trial division (n ≤ 2^32, so at most 2^16 trials).
fn smallest_prime_factor(n: u32) -> u32 {
    // `checked_rem(..) == Some(0)` rather than `% == 0`: clippy suggests `is_multiple_of`,
    // which is newer than the workspace's rust-version.
    (2..).take_while(|&d: &u32| (d as u64) * (d as u64) <= n as u64).find(|&d| n.checked_rem(d) == Some(0)).unwrap_or(n)
}

/// Distinct prime factors of `n >= 1`, ascending.
fn prime_factors(mut n: u32) -> Vec<u32> {
    let mut out = Vec::new();
    while n > 1 {
        let p = smallest_prime_factor(n);
        out.push(p);
        while n.checked_rem(p) == Some(0) {
            n /= p;
        }
    }
    out
}

/// The finite field GF(q), q = p^k, with table-driven arithmetic on `u32` elements `0..q`.
///
/// All operations take elements in `0..q`; behaviour for larger values is unspecified (they
/// may panic on a table index), which is fine because elements only come from the field
/// itself. Construction is the only fallible step.
#[derive(Clone, Debug)]
pub struct GaloisField {
    q: u32,
    p: u32,
    k: u32,
    /// Coefficients of the monic irreducible modulus, constant term first, length k + 1.
    modulus: Vec<u32>,
    /// Flat `add[a*q + b]` table, only when q ≤ [`DENSE_TABLE_MAX_ORDER`].
    add: Vec<u32>,
    /// Flat `mul[a*q + b]` table, only when q ≤ [`DENSE_TABLE_MAX_ORDER`].
    mul: Vec<u32>,
    neg: Vec<u32>,
    /// `inv[0]` is [`NONE`].
    inv: Vec<u32>,
    /// `log[a]` = discrete logarithm of a ≠ 0 to the primitive element; `log[0]` is [`NONE`].
    log: Vec<u32>,
    /// `exp[i] = g^i` for `i in 0..2(q-1)`, doubled so `exp[log a + log b]` needs no modulo.
    exp: Vec<u32>,
}

impl GaloisField {
    /// Build GF(q).
    ///
    /// Errors (one line each): q < 2 ("order must be at least 2, got 1"), q not a prime power
    /// ("field order 6 is not a prime power"), q > [`MAX_FIELD_ORDER`].
    pub fn new(q: u32) -> Result<Self> {
        super::require_at_least("order", q as u64, 2)?;
        if q > MAX_FIELD_ORDER {
            return crate::invalid!("field order {q} is too large: at most {MAX_FIELD_ORDER} is supported");
        }
        let Some((p, k)) = prime_power(q) else {
            return crate::invalid!("field order {q} is not a prime power");
        };
        let modulus = smallest_irreducible(p, k);
        let mut f = GaloisField {
            q,
            p,
            k,
            modulus,
            add: Vec::new(),
            mul: Vec::new(),
            neg: Vec::new(),
            inv: Vec::new(),
            log: Vec::new(),
            exp: Vec::new(),
        };
        f.neg = (0..q).map(|a| f.neg_digits(a)).collect();
        f.build_log_tables();
        f.inv = (0..q)
            .map(|a| if a == 0 { NONE } else { f.exp[((q - 1 - f.log[a as usize]) % (q - 1)) as usize] })
            .collect();
        if q <= DENSE_TABLE_MAX_ORDER {
            let n = q as usize;
            let mut add = vec![0u32; n * n];
            let mut mul = vec![0u32; n * n];
            for a in 0..q {
                for b in 0..q {
                    add[a as usize * n + b as usize] = f.add_digits(a, b);
                    mul[a as usize * n + b as usize] = f.mul_log(a, b);
                }
            }
            f.add = add;
            f.mul = mul;
        }
        Ok(f)
    }

    /// Number of elements q.
    pub fn order(&self) -> u32 {
        self.q
    }

    /// The prime p with q = p^k.
    pub fn characteristic(&self) -> u32 {
        self.p
    }

    /// The extension degree k with q = p^k (1 for prime fields).
    pub fn degree(&self) -> u32 {
        self.k
    }

    /// Coefficients of the irreducible modulus, constant term first (length k + 1, last = 1).
    /// For prime fields this is `[0, 1]`, i.e. the polynomial `x`.
    pub fn modulus(&self) -> &[u32] {
        &self.modulus
    }

    /// Whether `a` is an element of this field (`a < q`).
    pub fn contains(&self, a: u32) -> bool {
        a < self.q
    }

    /// a + b.
    #[inline]
    pub fn add(&self, a: u32, b: u32) -> u32 {
        if self.add.is_empty() {
            self.add_digits(a, b)
        } else {
            self.add[(a as usize) * self.q as usize + b as usize]
        }
    }

    /// a − b.
    #[inline]
    pub fn sub(&self, a: u32, b: u32) -> u32 {
        self.add(a, self.neg[b as usize])
    }

    /// a · b.
    #[inline]
    pub fn mul(&self, a: u32, b: u32) -> u32 {
        if self.mul.is_empty() {
            self.mul_log(a, b)
        } else {
            self.mul[(a as usize) * self.q as usize + b as usize]
        }
    }

    /// −a.
    #[inline]
    pub fn neg(&self, a: u32) -> u32 {
        self.neg[a as usize]
    }

    /// a⁻¹, or `None` for a = 0.
    #[inline]
    pub fn inv(&self, a: u32) -> Option<u32> {
        let i = self.inv[a as usize];
        (i != NONE).then_some(i)
    }

    /// a / b, or `None` for b = 0.
    #[inline]
    pub fn div(&self, a: u32, b: u32) -> Option<u32> {
        self.inv(b).map(|bi| self.mul(a, bi))
    }

    /// A primitive element g: its powers g⁰ … g^(q−2) are all the non-zero elements.
    pub fn primitive_element(&self) -> u32 {
        self.exp[1 % self.exp.len()]
    }

    /// Base-p digits of `a`, constant term first, always k of them.
    fn digits(&self, mut a: u32) -> Vec<u32> {
        let mut d = vec![0u32; self.k as usize];
        for x in d.iter_mut() {
            *x = a % self.p;
            a /= self.p;
        }
        d
    }

    /// Inverse of [`digits`](Self::digits); extra high digits must be zero.
    fn encode_digits(&self, d: &[u32]) -> u32 {
        d.iter().rev().fold(0u32, |acc, &x| acc * self.p + x)
    }

    /// Coefficient-wise addition mod p, without tables.
    fn add_digits(&self, a: u32, b: u32) -> u32 {
        if self.k == 1 {
            return (a + b) % self.p;
        }
        if self.p == 2 {
            return a ^ b;
        }
        let (mut a, mut b, mut out, mut place) = (a, b, 0u32, 1u32);
        for _ in 0..self.k {
            out += ((a % self.p + b % self.p) % self.p) * place;
            a /= self.p;
            b /= self.p;
            place = place.wrapping_mul(self.p);
        }
        out
    }

    /// Coefficient-wise negation mod p, without tables.
    fn neg_digits(&self, a: u32) -> u32 {
        let d: Vec<u32> = self.digits(a).iter().map(|&x| (self.p - x) % self.p).collect();
        self.encode_digits(&d)
    }

    /// Schoolbook polynomial product reduced by the modulus; only used while building tables.
    fn mul_poly(&self, a: u32, b: u32) -> u32 {
        let (p, k) = (self.p as u64, self.k as usize);
        let (da, db) = (self.digits(a), self.digits(b));
        let mut prod = vec![0u64; 2 * k - 1];
        for (i, &x) in da.iter().enumerate() {
            for (j, &y) in db.iter().enumerate() {
                prod[i + j] = (prod[i + j] + x as u64 * y as u64) % p;
            }
        }
        // The modulus is monic, so x^k ≡ −(m_0 + … + m_{k-1} x^{k-1}); fold high terms down.
        for deg in (k..2 * k - 1).rev() {
            let c = prod[deg];
            if c == 0 {
                continue;
            }
            prod[deg] = 0;
            for (i, &m) in self.modulus[..k].iter().enumerate() {
                let t = &mut prod[deg - k + i];
                *t = (*t + (p - (c * m as u64) % p)) % p;
            }
        }
        let low: Vec<u32> = prod[..k].iter().map(|&x| x as u32).collect();
        self.encode_digits(&low)
    }

    fn pow_poly(&self, mut base: u32, mut e: u64) -> u32 {
        let mut acc = 1u32;
        while e > 0 {
            if e & 1 == 1 {
                acc = self.mul_poly(acc, base);
            }
            base = self.mul_poly(base, base);
            e >>= 1;
        }
        acc
    }

    /// Find the smallest primitive element and fill `exp`/`log`. The multiplicative group is
    /// cyclic of order q−1, so g is primitive iff g^((q−1)/r) ≠ 1 for every prime r | q−1.
    fn build_log_tables(&mut self) {
        let n = self.q - 1;
        let factors = prime_factors(n);
        let g = (1..self.q)
            .find(|&g| factors.iter().all(|&r| self.pow_poly(g, (n / r) as u64) != 1))
            .expect("every finite field has a primitive element");
        let mut exp = Vec::with_capacity(2 * n as usize);
        let mut log = vec![NONE; self.q as usize];
        let mut x = 1u32;
        for i in 0..n {
            exp.push(x);
            log[x as usize] = i;
            x = self.mul_poly(x, g);
        }
        exp.extend_from_within(..);
        self.exp = exp;
        self.log = log;
    }

    fn mul_log(&self, a: u32, b: u32) -> u32 {
        if a == 0 || b == 0 {
            return 0;
        }
        self.exp[(self.log[a as usize] + self.log[b as usize]) as usize]
    }
}

/// Smallest monic irreducible polynomial of degree k over GF(p), as coefficients constant
/// term first (length k + 1). "Smallest" orders candidates by the base-p integer of their
/// non-leading coefficients, so the result is canonical.
fn smallest_irreducible(p: u32, k: u32) -> Vec<u32> {
    if k == 1 {
        // x itself: elements stay plain integers mod p, matching the paper's prime case.
        return vec![0, 1];
    }
    let count = (p as u64).pow(k);
    (0..count)
        .map(|code| monic_from_code(p, k, code))
        .find(|f| is_irreducible(p, f))
        .expect("irreducible polynomials of every degree exist over every prime field")
}

/// Monic polynomial of degree `deg` whose lower coefficients are the base-p digits of `code`.
fn monic_from_code(p: u32, deg: u32, mut code: u64) -> Vec<u32> {
    let mut f = Vec::with_capacity(deg as usize + 1);
    for _ in 0..deg {
        f.push((code % p as u64) as u32);
        code /= p as u64;
    }
    f.push(1);
    f
}

/// Exhaustive check: a polynomial of degree k is reducible iff some monic polynomial of
/// degree 1..=k/2 divides it. Cheap for the sizes allowed (at most ~2·p^(k/2) trial divisors).
fn is_irreducible(p: u32, f: &[u32]) -> bool {
    let k = (f.len() - 1) as u32;
    for d in 1..=k / 2 {
        for code in 0..(p as u64).pow(d) {
            if poly_rem_is_zero(p, f, &monic_from_code(p, d, code)) {
                return false;
            }
        }
    }
    true
}

/// Whether monic `g` divides `f` over GF(p) (coefficients constant term first).
fn poly_rem_is_zero(p: u32, f: &[u32], g: &[u32]) -> bool {
    let p = p as u64;
    let mut r: Vec<u64> = f.iter().map(|&x| x as u64).collect();
    let dg = g.len() - 1;
    for top in (dg..r.len()).rev() {
        let c = r[top];
        if c == 0 {
            continue;
        }
        for (i, &gi) in g.iter().enumerate() {
            let t = &mut r[top - dg + i];
            *t = (*t + p - (c * gi as u64) % p) % p;
        }
    }
    r.iter().all(|&x| x == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDERS: [u32; 10] = [2, 3, 4, 5, 7, 8, 9, 16, 25, 27];

    #[test]
    fn prime_power_decomposition() {
        assert_eq!(prime_power(2), Some((2, 1)));
        assert_eq!(prime_power(1024), Some((2, 10)));
        assert_eq!(prime_power(625), Some((5, 4)));
        assert_eq!(prime_power(65521), Some((65521, 1)));
        for q in [0, 1, 6, 10, 12, 15, 18, 100] {
            assert_eq!(prime_power(q), None, "{q}");
        }
        assert_eq!(prime_power(u32::MAX), None);
        assert_eq!(prime_power(1 << 31), Some((2, 31)));
    }

    #[test]
    fn field_axioms_hold_exhaustively() {
        for q in ORDERS {
            let f = GaloisField::new(q).unwrap();
            assert_eq!(f.order(), q);
            assert_eq!(f.characteristic().pow(f.degree()), q);
            for a in 0..q {
                assert_eq!(f.add(a, 0), a);
                assert_eq!(f.mul(a, 1), a);
                assert_eq!(f.mul(a, 0), 0);
                assert_eq!(f.add(a, f.neg(a)), 0, "q={q} a={a}");
                assert_eq!(f.sub(a, a), 0);
                for b in 0..q {
                    let (s, m) = (f.add(a, b), f.mul(a, b));
                    assert!(s < q && m < q);
                    assert_eq!(s, f.add(b, a), "q={q}: + commutes");
                    assert_eq!(m, f.mul(b, a), "q={q}: · commutes");
                    assert_eq!(f.add(f.sub(a, b), b), a);
                    if a != 0 && b != 0 {
                        assert_ne!(m, 0, "q={q}: no zero divisors");
                    }
                    for c in 0..q {
                        assert_eq!(f.add(s, c), f.add(a, f.add(b, c)), "q={q}: + associates");
                        assert_eq!(f.mul(m, c), f.mul(a, f.mul(b, c)), "q={q}: · associates");
                        assert_eq!(f.mul(a, f.add(b, c)), f.add(m, f.mul(a, c)), "q={q}: distributes");
                    }
                }
            }
        }
    }

    #[test]
    fn every_nonzero_element_has_an_inverse() {
        for q in ORDERS {
            let f = GaloisField::new(q).unwrap();
            assert_eq!(f.inv(0), None);
            assert_eq!(f.div(1, 0), None);
            for a in 1..q {
                let i = f.inv(a).unwrap();
                assert_eq!(f.mul(a, i), 1, "q={q} a={a}");
                assert_eq!(f.div(a, a), Some(1));
            }
        }
    }

    #[test]
    fn prime_fields_are_integers_mod_q() {
        for q in [2u32, 3, 5, 7, 11, 13, 17] {
            let f = GaloisField::new(q).unwrap();
            assert_eq!(f.modulus(), &[0, 1]);
            for a in 0..q {
                for b in 0..q {
                    assert_eq!(f.add(a, b), (a + b) % q);
                    assert_eq!(f.mul(a, b), a * b % q);
                }
            }
        }
    }

    #[test]
    fn moduli_are_the_smallest_irreducibles() {
        // Known smallest monic irreducibles: x²+x+1 over GF(2), x³+x+1, x⁴+x+1, x²+1 over GF(3).
        assert_eq!(GaloisField::new(4).unwrap().modulus(), &[1, 1, 1]);
        assert_eq!(GaloisField::new(8).unwrap().modulus(), &[1, 1, 0, 1]);
        assert_eq!(GaloisField::new(16).unwrap().modulus(), &[1, 1, 0, 0, 1]);
        assert_eq!(GaloisField::new(9).unwrap().modulus(), &[1, 0, 1]);
    }

    #[test]
    fn primitive_element_generates_the_group() {
        for q in ORDERS {
            let f = GaloisField::new(q).unwrap();
            let g = f.primitive_element();
            let mut seen = vec![false; q as usize];
            let mut x = 1;
            for _ in 0..q - 1 {
                assert!(!seen[x as usize], "q={q}: g has order < q-1");
                seen[x as usize] = true;
                x = f.mul(x, g);
            }
            assert_eq!(x, 1);
        }
    }

    #[test]
    fn large_fields_without_dense_tables_agree() {
        // 2048 = 2^11 and 2187 = 3^7 exceed the dense limit; spot-check the axioms.
        for q in [2048u32, 2187, 1031] {
            let f = GaloisField::new(q).unwrap();
            assert!(f.add.is_empty() && f.mul.is_empty());
            for a in (0..q).step_by(37) {
                if a != 0 {
                    assert_eq!(f.mul(a, f.inv(a).unwrap()), 1);
                }
                for b in (0..q).step_by(41) {
                    assert_eq!(f.mul(a, b), f.mul_poly(a, b));
                    let c = (a * 7 + b) % q;
                    assert_eq!(f.mul(a, f.add(b, c)), f.add(f.mul(a, b), f.mul(a, c)));
                }
            }
        }
    }

    #[test]
    fn bad_orders_are_rejected_with_one_line() {
        for (q, want) in [
            (0, "order must be at least 2, got 0"),
            (1, "order must be at least 2, got 1"),
            (6, "field order 6 is not a prime power"),
            (70000, "field order 70000 is too large"),
        ] {
            let e = GaloisField::new(q).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
            assert!(!e.contains('\n'));
        }
    }
}
