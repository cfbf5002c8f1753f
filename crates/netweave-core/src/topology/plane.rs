//! Finite projective planes PG(2, q) in the labelling of paper 000 (§2.2), over any GF(q).
//!
//! The Latin-square fat-tree ([`super::lsft`]) turns points into leaf switches and lines into
//! spine switches, so the plane's numbering *is* the switch numbering. It is fixed here once:
//!
//! | global index            | point        | line          |
//! |-------------------------|--------------|---------------|
//! | `0`                     | `P`          | `L`           |
//! | `1 + c`                 | `P(c)`       | `L(c)`        |
//! | `1 + q + c·q + r`       | `P(c,r)`     | `L(c,r)`      |
//!
//! with `c, r ∈ GF(q)` encoded as in [`super::galois`] (for prime q: plain integers mod q,
//! identical to the paper). The lines are
//!
//! ```text
//! L      = {P} ∪ {P(c)   | c ∈ GF(q)}
//! L(c)   = {P} ∪ {P(c,i) | i ∈ GF(q)}
//! L(c,r) = {P(c)} ∪ {P(i, r + c·i) | i ∈ GF(q)}
//! ```
//!
//! Geometrically P(c,r) is the affine point (x, y) = (c, r); L(c,r) is the line y = r + c·x of
//! slope c, L(c) the vertical line x = c, P(c) the point at infinity of slope c, P that of the
//! verticals, and L the line at infinity. This reading gives the closed forms of
//! [`ProjectivePlane::line_through`] and [`ProjectivePlane::intersection`].
//!
//! ```
//! use netweave_core::topology::plane::ProjectivePlane;
//! let pl = ProjectivePlane::new(2).unwrap();
//! assert_eq!(pl.num_points(), 7);
//! assert_eq!(pl.line_label(4), "L(0,1)");
//! let pts: Vec<String> = pl.points_of_line(4).iter().map(|&p| pl.point_label(p)).collect();
//! assert_eq!(pts, ["P(0)", "P(0,1)", "P(1,1)"]);
//! assert!(pl.check_axioms().is_ok());
//! ```

use std::fmt;

use super::galois::{prime_power, GaloisField};
use crate::error::Result;

/// Largest plane order accepted by [`ProjectivePlane::new`].
///
/// The plane stores two flat incidence tables of (q+1)(q²+q+1) `u32` each: about 1 GiB at
/// q = 512. Larger planes would also give LSFTs with more than 10⁸ servers, far beyond any
/// machine this crate models, so they are refused rather than left to exhaust memory.
pub const MAX_PLANE_ORDER: u32 = 512;

/// The three kinds of points, with their coordinates as field elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PointKind {
    /// `P`: the point at infinity shared by all vertical lines L(c).
    Infinity,
    /// `P(c)`: the point at infinity of the lines of slope c.
    Slope(u32),
    /// `P(c,r)`: the grid (affine) point with column c and row r.
    Grid(u32, u32),
}

/// The three kinds of lines, with their parameters as field elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LineKind {
    /// `L`: the line at infinity {P, P(0), …, P(q−1)}.
    Infinity,
    /// `L(c)`: the vertical line {P, P(c,0), …, P(c,q−1)}.
    Vertical(u32),
    /// `L(c,r)`: the line of slope c and intercept r, {P(c)} ∪ {P(i, r + c·i)}.
    Sloped(u32, u32),
}

impl fmt::Display for PointKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PointKind::Infinity => write!(f, "P"),
            PointKind::Slope(c) => write!(f, "P({c})"),
            PointKind::Grid(c, r) => write!(f, "P({c},{r})"),
        }
    }
}

impl fmt::Display for LineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LineKind::Infinity => write!(f, "L"),
            LineKind::Vertical(c) => write!(f, "L({c})"),
            LineKind::Sloped(c, r) => write!(f, "L({c},{r})"),
        }
    }
}

/// A projective plane of prime-power order q with flat incidence tables in both directions.
#[derive(Clone, Debug)]
pub struct ProjectivePlane {
    q: u32,
    field: GaloisField,
    /// `line_points[l*(q+1) ..][..q+1]`: points of line l in set-definition order.
    line_points: Vec<u32>,
    /// `point_lines[p*(q+1) ..][..q+1]`: lines through point p, ascending.
    point_lines: Vec<u32>,
}

impl ProjectivePlane {
    /// Build the plane of order q (q a prime power, 2 ≤ q ≤ [`MAX_PLANE_ORDER`]).
    ///
    /// Errors are one line: "order must be at least 2, got 1",
    /// "order 6 has no known projective plane: 6 is not a prime power".
    pub fn new(q: u32) -> Result<Self> {
        super::require_at_least("order", q as u64, 2)?;
        if prime_power(q).is_none() {
            return crate::invalid!("order {q} has no known projective plane: {q} is not a prime power");
        }
        if q > MAX_PLANE_ORDER {
            return crate::invalid!(
                "projective plane of order {q} is too large: at most {MAX_PLANE_ORDER} is supported"
            );
        }
        let field = GaloisField::new(q)?;
        let n = (q * q + q + 1) as usize;
        let k = q as usize + 1;
        let mut line_points = Vec::with_capacity(n * k);
        // L
        line_points.push(0);
        line_points.extend(1..=q);
        // L(c)
        for c in 0..q {
            line_points.push(0);
            line_points.extend((0..q).map(|i| grid_index(q, c, i)));
        }
        // L(c,r)
        for c in 0..q {
            for r in 0..q {
                line_points.push(1 + c);
                line_points.extend((0..q).map(|i| grid_index(q, i, field.add(r, field.mul(c, i)))));
            }
        }
        // Transpose by a counting fill: lines are visited in ascending order, so every point's
        // list comes out ascending without sorting.
        let mut fill = vec![0usize; n];
        let mut point_lines = vec![0u32; n * k];
        for (l, pts) in line_points.chunks_exact(k).enumerate() {
            for &p in pts {
                let slot = &mut fill[p as usize];
                // A broken construction could overfill a point; check_axioms reports it, so
                // just drop the excess here rather than index out of bounds.
                if *slot < k {
                    point_lines[p as usize * k + *slot] = l as u32;
                }
                *slot += 1;
            }
        }
        Ok(ProjectivePlane { q, field, line_points, point_lines })
    }

    /// The order q: q+1 points per line, q+1 lines per point.
    pub fn order(&self) -> u32 {
        self.q
    }

    /// q² + q + 1.
    pub fn num_points(&self) -> u32 {
        self.q * self.q + self.q + 1
    }

    /// q² + q + 1 (a projective plane is self-dual).
    pub fn num_lines(&self) -> u32 {
        self.num_points()
    }

    /// The coordinate field GF(q).
    pub fn field(&self) -> &GaloisField {
        &self.field
    }

    /// Points of `line` in the order of the set definitions: L → P, P(0..q−1);
    /// L(c) → P, P(c,0..q−1); L(c,r) → P(c), then P(i, r+c·i) for i = 0..q−1.
    /// This order is the spine port numbering of the LSFT. Panics if `line` is out of range.
    pub fn points_of_line(&self, line: u32) -> &[u32] {
        let k = self.q as usize + 1;
        &self.line_points[line as usize * k..][..k]
    }

    /// Lines through `point`, in ascending global line order (the LSFT leaf up-port order).
    /// Panics if `point` is out of range.
    pub fn lines_through_point(&self, point: u32) -> &[u32] {
        let k = self.q as usize + 1;
        &self.point_lines[point as usize * k..][..k]
    }

    /// Position of `point` on `line` in [`points_of_line`](Self::points_of_line) order,
    /// computed in O(1) from the definitions; `None` if the point is not on the line.
    pub fn point_position(&self, line: u32, point: u32) -> Option<u32> {
        if line >= self.num_lines() || point >= self.num_points() {
            return None;
        }
        let f = &self.field;
        match (self.line_kind(line), self.point_kind(point)) {
            (LineKind::Infinity, PointKind::Infinity) => Some(0),
            (LineKind::Infinity, PointKind::Slope(c)) => Some(1 + c),
            (LineKind::Vertical(_), PointKind::Infinity) => Some(0),
            (LineKind::Vertical(c), PointKind::Grid(x, y)) if x == c => Some(1 + y),
            (LineKind::Sloped(c, _), PointKind::Slope(s)) if s == c => Some(0),
            (LineKind::Sloped(c, r), PointKind::Grid(x, y)) if y == f.add(r, f.mul(c, x)) => Some(1 + x),
            _ => None,
        }
    }

    /// Position of `line` among the lines through `point`
    /// ([`lines_through_point`](Self::lines_through_point) order), or `None`.
    pub fn line_position(&self, point: u32, line: u32) -> Option<u32> {
        if point >= self.num_points() {
            return None;
        }
        self.lines_through_point(point).binary_search(&line).ok().map(|i| i as u32)
    }

    /// Kind and coordinates of a point index. Never panics; an index ≥ num_points yields a
    /// `Grid` with a column ≥ q, which [`point_index`](Self::point_index) rejects.
    pub fn point_kind(&self, point: u32) -> PointKind {
        let q = self.q;
        match point {
            0 => PointKind::Infinity,
            p if p <= q => PointKind::Slope(p - 1),
            p => PointKind::Grid((p - 1 - q) / q, (p - 1 - q) % q),
        }
    }

    /// Kind and parameters of a line index (same index layout as points).
    pub fn line_kind(&self, line: u32) -> LineKind {
        match self.point_kind(line) {
            PointKind::Infinity => LineKind::Infinity,
            PointKind::Slope(c) => LineKind::Vertical(c),
            PointKind::Grid(c, r) => LineKind::Sloped(c, r),
        }
    }

    /// Global index of a point kind, or `None` if a coordinate is not a field element.
    pub fn point_index(&self, kind: PointKind) -> Option<u32> {
        let q = self.q;
        match kind {
            PointKind::Infinity => Some(0),
            PointKind::Slope(c) if c < q => Some(1 + c),
            PointKind::Grid(c, r) if c < q && r < q => Some(grid_index(q, c, r)),
            _ => None,
        }
    }

    /// Global index of a line kind, or `None` if a parameter is not a field element.
    pub fn line_index(&self, kind: LineKind) -> Option<u32> {
        self.point_index(match kind {
            LineKind::Infinity => PointKind::Infinity,
            LineKind::Vertical(c) => PointKind::Slope(c),
            LineKind::Sloped(c, r) => PointKind::Grid(c, r),
        })
    }

    /// "P", "P(2)" or "P(1,0)".
    pub fn point_label(&self, point: u32) -> String {
        self.point_kind(point).to_string()
    }

    /// "L", "L(1)" or "L(0,2)".
    pub fn line_label(&self, line: u32) -> String {
        self.line_kind(line).to_string()
    }

    /// The unique line through two distinct points, by the closed form of paper 000 §2.2 with
    /// GF(q) arithmetic (no search):
    ///
    /// ```text
    /// line(P, P(c))          = L
    /// line(P, P(c,r))        = L(c)
    /// line(P(c), P(c'))      = L
    /// line(P(c), P(c',r'))   = L(c, r' − c·c')
    /// line(P(c,r), P(c,r'))  = L(c)
    /// line(P(c,r), P(c',r')) = L(s, r − s·c),  s = (r' − r)/(c' − c)
    /// ```
    pub fn line_through(&self, a: u32, b: u32) -> Result<u32> {
        self.check_pair("point", a, b, self.num_points())?;
        let f = &self.field;
        use PointKind::*;
        let line = match (self.point_kind(a), self.point_kind(b)) {
            (Infinity, Slope(_)) | (Slope(_), Infinity) | (Slope(_), Slope(_)) => LineKind::Infinity,
            (Infinity, Grid(c, _)) | (Grid(c, _), Infinity) => LineKind::Vertical(c),
            (Slope(c), Grid(x, y)) | (Grid(x, y), Slope(c)) => LineKind::Sloped(c, f.sub(y, f.mul(c, x))),
            (Grid(c, r), Grid(c2, r2)) => {
                if c == c2 {
                    LineKind::Vertical(c)
                } else {
                    let s = f.div(f.sub(r2, r), f.sub(c2, c)).expect("c' − c ≠ 0");
                    LineKind::Sloped(s, f.sub(r, f.mul(s, c)))
                }
            }
            (Infinity, Infinity) => unreachable!("check_pair rejects equal points"),
        };
        Ok(self.line_index(line).expect("closed form yields field elements"))
    }

    /// The unique common point of two distinct lines, by the dual closed form:
    ///
    /// ```text
    /// L ∧ L(c) = P,   L ∧ L(c,r) = P(c),   L(c) ∧ L(c') = P,
    /// L(c) ∧ L(s,r) = P(c, r + s·c),   L(c,r) ∧ L(c,r') = P(c),
    /// L(c,r) ∧ L(c',r') = P(x, r + c·x),  x = (r' − r)/(c − c')
    /// ```
    pub fn intersection(&self, l1: u32, l2: u32) -> Result<u32> {
        self.check_pair("line", l1, l2, self.num_lines())?;
        let f = &self.field;
        use LineKind::*;
        let point = match (self.line_kind(l1), self.line_kind(l2)) {
            (Infinity, Vertical(_)) | (Vertical(_), Infinity) | (Vertical(_), Vertical(_)) => PointKind::Infinity,
            (Infinity, Sloped(c, _)) | (Sloped(c, _), Infinity) => PointKind::Slope(c),
            (Vertical(c), Sloped(s, r)) | (Sloped(s, r), Vertical(c)) => PointKind::Grid(c, f.add(r, f.mul(s, c))),
            (Sloped(c, r), Sloped(c2, r2)) => {
                if c == c2 {
                    PointKind::Slope(c)
                } else {
                    let x = f.div(f.sub(r2, r), f.sub(c, c2)).expect("c − c' ≠ 0");
                    PointKind::Grid(x, f.add(r, f.mul(c, x)))
                }
            }
            (Infinity, Infinity) => unreachable!("check_pair rejects equal lines"),
        };
        Ok(self.point_index(point).expect("closed form yields field elements"))
    }

    fn check_pair(&self, what: &str, a: u32, b: u32, n: u32) -> Result<()> {
        if a >= n || b >= n {
            return crate::invalid!("{what} {} out of range: order {} has {what}s 0..{n}", a.max(b), self.q);
        }
        if a == b {
            return crate::invalid!("{what}s must be distinct, got {a} twice");
        }
        Ok(())
    }

    /// Verify the four projective-plane axioms by brute force over the incidence tables
    /// (independently of the closed forms), returning the first violation as text:
    ///
    /// 1. every line has q+1 distinct points and every point lies on q+1 lines;
    /// 2. any two distinct points share exactly one line;
    /// 3. any two distinct lines share exactly one point;
    /// 4. some 4 points have no 3 collinear.
    ///
    /// Cost O(n²·q) time and O(n) memory for n = q²+q+1 points (about 10⁸ steps at q = 64).
    pub fn check_axioms(&self) -> std::result::Result<(), String> {
        let n = self.num_points() as usize;
        let k = self.q as usize + 1;
        // Axiom 1, recounting from the line table so a bad transpose cannot hide an error.
        let mut on = vec![0usize; n];
        let mut stamp = vec![u32::MAX; n];
        for (l, pts) in self.line_points.chunks_exact(k).enumerate() {
            for &p in pts {
                if p as usize >= n {
                    return Err(format!("line {} names point {p}, beyond {n} points", self.line_label(l as u32)));
                }
                if stamp[p as usize] == l as u32 {
                    return Err(format!(
                        "line {} contains point {} twice",
                        self.line_label(l as u32),
                        self.point_label(p)
                    ));
                }
                stamp[p as usize] = l as u32;
                on[p as usize] += 1;
            }
        }
        if let Some(p) = (0..n).find(|&p| on[p] != k) {
            return Err(format!("point {} lies on {} lines, expected {k}", self.point_label(p as u32), on[p]));
        }
        for p in 0..n as u32 {
            for &l in self.lines_through_point(p) {
                if !self.points_of_line(l).contains(&p) {
                    return Err(format!("tables disagree: {} listed on {}", self.point_label(p), self.line_label(l)));
                }
            }
        }
        // Axioms 2 and 3 (dual): every pair shares exactly one incident element.
        share_exactly_one(n, |p| self.lines_through_point(p), |p| self.point_label(p), "lines")?;
        share_exactly_one(n, |l| self.points_of_line(l), |l| self.line_label(l), "points")?;
        // Axiom 4: greedy quadrangle. With axioms 1–3 and q ≥ 2, the three lines through pairs
        // of a triangle cover at most 3q points < q²+q+1, so a fourth point always exists.
        let common = |a: u32, b: u32| -> u32 {
            let lb = self.lines_through_point(b);
            *self.lines_through_point(a).iter().find(|l| lb.contains(l)).expect("axiom 2 checked")
        };
        let on_line = |l: u32, p: u32| self.points_of_line(l).contains(&p);
        let (a, b) = (0u32, 1u32);
        let ab = common(a, b);
        let Some(c) = (0..n as u32).find(|&c| !on_line(ab, c)) else {
            return Err("all points are collinear".into());
        };
        let (ac, bc) = (common(a, c), common(b, c));
        if !(0..n as u32).any(|d| !on_line(ab, d) && !on_line(ac, d) && !on_line(bc, d)) {
            return Err("no four points without three collinear".into());
        }
        Ok(())
    }
}

/// Check that every two distinct elements `a < b` have exactly one common entry in their
/// incidence lists: mark `a`'s entries with a stamp, then count `b`'s marked ones.
fn share_exactly_one<'a>(
    n: usize,
    lists: impl Fn(u32) -> &'a [u32],
    name: impl Fn(u32) -> String,
    what: &str,
) -> std::result::Result<(), String> {
    let mut mark = vec![u32::MAX; n];
    for a in 0..n as u32 {
        for &x in lists(a) {
            mark[x as usize] = a;
        }
        for b in a + 1..n as u32 {
            let shared = lists(b).iter().filter(|&&x| mark[x as usize] == a).count();
            if shared != 1 {
                return Err(format!("{} and {} share {shared} {what}, expected 1", name(a), name(b)));
            }
        }
    }
    Ok(())
}

/// Global index of grid point P(c,r) (also of line L(c,r)).
fn grid_index(q: u32, c: u32, r: u32) -> u32 {
    1 + q + c * q + r
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDERS: [u32; 11] = [2, 3, 4, 5, 7, 8, 9, 11, 13, 16, 17];

    #[test]
    fn axioms_hold() {
        for q in ORDERS {
            let pl = ProjectivePlane::new(q).unwrap();
            assert_eq!(pl.num_points(), q * q + q + 1);
            assert_eq!(pl.check_axioms(), Ok(()), "q={q}");
        }
    }

    /// The unique common line/point found by scanning the incidence tables.
    fn brute_line(pl: &ProjectivePlane, a: u32, b: u32) -> u32 {
        let lb = pl.lines_through_point(b);
        let common: Vec<u32> = pl.lines_through_point(a).iter().copied().filter(|l| lb.contains(l)).collect();
        assert_eq!(common.len(), 1);
        common[0]
    }

    fn brute_point(pl: &ProjectivePlane, l1: u32, l2: u32) -> u32 {
        let p2 = pl.points_of_line(l2);
        let common: Vec<u32> = pl.points_of_line(l1).iter().copied().filter(|p| p2.contains(p)).collect();
        assert_eq!(common.len(), 1);
        common[0]
    }

    #[test]
    fn closed_forms_agree_with_brute_force() {
        for q in ORDERS {
            let pl = ProjectivePlane::new(q).unwrap();
            let n = pl.num_points();
            for a in 0..n {
                for b in 0..n {
                    if a == b {
                        assert!(pl.line_through(a, b).is_err());
                        assert!(pl.intersection(a, b).is_err());
                        continue;
                    }
                    assert_eq!(pl.line_through(a, b).unwrap(), brute_line(&pl, a, b), "q={q} {a} {b}");
                    assert_eq!(pl.intersection(a, b).unwrap(), brute_point(&pl, a, b), "q={q} {a} {b}");
                }
            }
            assert!(pl.line_through(0, n).is_err());
            assert!(pl.intersection(n, 0).is_err());
        }
    }

    #[test]
    fn order_two_matches_the_paper() {
        let pl = ProjectivePlane::new(2).unwrap();
        let names = |l: u32| -> Vec<String> { pl.points_of_line(l).iter().map(|&p| pl.point_label(p)).collect() };
        assert_eq!(names(0), ["P", "P(0)", "P(1)"]);
        assert_eq!(names(2), ["P", "P(1,0)", "P(1,1)"]);
        // L(1,0) = {P(1)} ∪ {P(i, (0 + 1·i) % 2)} = P(1), P(0,0), P(1,1)
        assert_eq!(pl.line_label(5), "L(1,0)");
        assert_eq!(pl.line_index(LineKind::Sloped(1, 0)), Some(5));
        assert_eq!(names(5), ["P(1)", "P(0,0)", "P(1,1)"]);
        assert_eq!(
            (0..7).map(|l| pl.line_label(l)).collect::<Vec<_>>(),
            ["L", "L(0)", "L(1)", "L(0,0)", "L(0,1)", "L(1,0)", "L(1,1)"]
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn labels_and_kinds_round_trip() {
        let pl = ProjectivePlane::new(3).unwrap();
        assert_eq!(pl.point_label(0), "P");
        assert_eq!(pl.point_label(3), "P(2)");
        assert_eq!(pl.point_label(7), "P(1,0)");
        assert_eq!(pl.line_label(0), "L");
        assert_eq!(pl.line_label(2), "L(1)");
        assert_eq!(pl.line_label(6), "L(0,2)");
        for i in 0..pl.num_points() {
            assert_eq!(pl.point_index(pl.point_kind(i)), Some(i));
            assert_eq!(pl.line_index(pl.line_kind(i)), Some(i));
        }
        assert_eq!(pl.point_index(PointKind::Grid(3, 0)), None);
        assert_eq!(pl.line_index(LineKind::Vertical(5)), None);
    }

    #[test]
    fn incidence_orders_and_positions() {
        for q in [2, 3, 4, 5, 8, 9] {
            let pl = ProjectivePlane::new(q).unwrap();
            for p in 0..pl.num_points() {
                let ls = pl.lines_through_point(p);
                assert!(ls.windows(2).all(|w| w[0] < w[1]), "ascending");
                for (j, &l) in ls.iter().enumerate() {
                    assert_eq!(pl.line_position(p, l), Some(j as u32));
                    let x = pl.point_position(l, p).unwrap();
                    assert_eq!(pl.points_of_line(l)[x as usize], p);
                }
            }
            for l in 0..pl.num_lines() {
                let on = pl.points_of_line(l);
                for p in 0..pl.num_points() {
                    assert_eq!(pl.point_position(l, p).is_some(), on.contains(&p));
                }
            }
        }
    }

    #[test]
    fn non_prime_power_orders_are_rejected() {
        for q in [6u32, 10, 12] {
            let e = ProjectivePlane::new(q).unwrap_err().to_string();
            assert_eq!(e, format!("order {q} has no known projective plane: {q} is not a prime power"));
        }
        for q in [0u32, 1] {
            let e = ProjectivePlane::new(q).unwrap_err().to_string();
            assert_eq!(e, format!("order must be at least 2, got {q}"));
        }
        let e = ProjectivePlane::new(1021).unwrap_err().to_string();
        assert!(e.contains("too large"), "{e}");
    }
}
