//! The figures of a placement ([`CostParts`]) and the objective that weighs them into one
//! number ([`Objective`]), with the cost-spec names users type (`hop_bytes`,
//! `max_channel_bytes`, `hops_x_max_channel`, `step_max_channel_bytes`, weighted sums) and
//! the earlier names still read. [`cost`](super::cost) computes the figures.

use crate::error::Result;

/// The exact figures of one placement, named as [`analysis`](crate::analysis) names the same
/// figures (see the [module notes](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CostParts {
    pub sum_hops: u64,
    pub hop_bytes: u128,
    /// Largest byte count on one directed channel, host links included (an [`Evaluator`]
    /// leaves it 0 when no term of its objective needs channel loads).
    pub max_channel_bytes: u64,
    /// Σ over steps of each step's largest channel load (an [`Evaluator`] leaves it 0 when its
    /// objective does not weigh it).
    pub step_max_channel_bytes: u64,
}

impl CostParts {
    /// Paper 003's evaluation value `Σhops × max_channel_bytes`.
    pub fn hops_x_max_channel(&self) -> u128 {
        self.sum_hops as u128 * self.max_channel_bytes as u128
    }

    /// The five figures as `(name, value)`, in the order reports print them.
    ///
    /// ```
    /// use netweave_core::mapping::CostParts;
    /// let p = CostParts { sum_hops: 3, hop_bytes: 30, max_channel_bytes: 20, step_max_channel_bytes: 20 };
    /// let named = p.named();
    /// assert_eq!(named[0], ("sum_hops", 3));
    /// assert!(named.contains(&("hops_x_max_channel", 60)));
    /// ```
    pub fn named(&self) -> [(&'static str, u128); 5] {
        [
            ("sum_hops", self.sum_hops as u128),
            ("hop_bytes", self.hop_bytes),
            ("max_channel_bytes", self.max_channel_bytes as u128),
            ("hops_x_max_channel", self.hops_x_max_channel()),
            ("step_max_channel_bytes", self.step_max_channel_bytes as u128),
        ]
    }
}

/// The objective terms by name: each accepted spelling (with `-` or `_`), the name it stands
/// for, and whether it is an earlier name (read, but not to be printed).
const TERM_NAMES: [(&str, &str, bool); 7] = [
    ("hop_bytes", "hop_bytes", false),
    ("max_channel_bytes", "max_channel_bytes", false),
    ("hops_x_max_channel", "hops_x_max_channel", false),
    ("step_max_channel_bytes", "step_max_channel_bytes", false),
    ("rmatt", "hops_x_max_channel", true),
    ("max_link", "max_channel_bytes", true),
    ("step_max_link", "step_max_channel_bytes", true),
];

/// Weights of the figures; the objective is
/// `w_hop_bytes·hop_bytes + w_max_channel_bytes·max_channel_bytes +
/// w_hops_x_max_channel·sum_hops·max_channel_bytes + w_step_max_channel_bytes·step_max_channel_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Objective {
    pub w_hop_bytes: f64,
    pub w_max_channel_bytes: f64,
    pub w_hops_x_max_channel: f64,
    pub w_step_max_channel_bytes: f64,
}

impl Objective {
    const ZERO: Objective = Objective {
        w_hop_bytes: 0.0,
        w_max_channel_bytes: 0.0,
        w_hops_x_max_channel: 0.0,
        w_step_max_channel_bytes: 0.0,
    };
    /// Paper 003's `Σhops × max_link` (RMATT's objective).
    pub const HOPS_X_MAX_CHANNEL: Objective = Objective { w_hops_x_max_channel: 1.0, ..Self::ZERO };
    /// Σ bytes × hops.
    pub const HOP_BYTES: Objective = Objective { w_hop_bytes: 1.0, ..Self::ZERO };
    /// The busiest channel's bytes.
    pub const MAX_CHANNEL_BYTES: Objective = Objective { w_max_channel_bytes: 1.0, ..Self::ZERO };
    /// Σ over the pattern's steps of each step's busiest channel: tracks the time of a
    /// step-by-step collective such as Bruck's allgather.
    pub const STEP_MAX_CHANNEL_BYTES: Objective = Objective { w_step_max_channel_bytes: 1.0, ..Self::ZERO };

    /// Parse `hops_x_max_channel`, `hop_bytes`, `max_channel_bytes`, `step_max_channel_bytes`, or
    /// a weighted sum such as `hop_bytes+2e3*max_channel_bytes` (terms `[weight*]name` joined by
    /// `+`; `-` may stand for `_`). The earlier names `rmatt`, `max-link`, `step-max-link` are
    /// read too ([`canonical`](Self::canonical) lists them).
    ///
    /// ```
    /// use netweave_core::mapping::Objective;
    /// let o = Objective::parse("0.5*hop-bytes+max_channel_bytes").unwrap();
    /// assert_eq!((o.w_hop_bytes, o.w_max_channel_bytes, o.w_hops_x_max_channel), (0.5, 1.0, 0.0));
    /// ```
    pub fn parse(text: &str) -> Result<Objective> {
        Self::canonical(text).map(|(o, _, _)| o)
    }

    /// [`parse`](Self::parse), also returning the spec in today's names (terms as written,
    /// each name replaced by its canonical one) and the earlier names it used, once each, so a
    /// caller can say they are deprecated.
    ///
    /// ```
    /// use netweave_core::mapping::Objective;
    /// let (o, spec, old) = Objective::canonical("rmatt+1e8*step-max-link").unwrap();
    /// assert_eq!(spec, "hops_x_max_channel+1e8*step_max_channel_bytes");
    /// assert_eq!(old, vec!["rmatt", "step-max-link"]);
    /// assert_eq!(o.w_hops_x_max_channel, 1.0);
    /// ```
    pub fn canonical(text: &str) -> Result<(Objective, String, Vec<String>)> {
        let mut o = Self::ZERO;
        let mut terms: Vec<String> = Vec::new();
        let mut old: Vec<String> = Vec::new();
        for term in text.split('+') {
            let term = term.trim();
            let (w, weight_text, name) = match term.split_once('*') {
                Some((w, n)) => match w.trim().parse::<f64>() {
                    Ok(x) if x.is_finite() && x >= 0.0 => (x, Some(w.trim()), n.trim()),
                    _ => return crate::invalid!("cost weight '{}' is not a non-negative number", w.trim()),
                },
                None => (1.0, None, term),
            };
            let key = name.replace('-', "_");
            let Some(&(_, canonical, is_old)) = TERM_NAMES.iter().find(|(spelling, _, _)| *spelling == key) else {
                return crate::invalid!(
                    "unknown cost '{name}': use hops_x_max_channel, hop_bytes, max_channel_bytes, \
                     step_max_channel_bytes or a weighted sum"
                );
            };
            if is_old && !old.iter().any(|n| n == name) {
                old.push(name.to_string());
            }
            match canonical {
                "hop_bytes" => o.w_hop_bytes += w,
                "max_channel_bytes" => o.w_max_channel_bytes += w,
                "hops_x_max_channel" => o.w_hops_x_max_channel += w,
                _ => o.w_step_max_channel_bytes += w,
            }
            terms.push(match weight_text {
                Some(wt) => format!("{wt}*{canonical}"),
                None => canonical.to_string(),
            });
        }
        if o.w_hop_bytes + o.w_max_channel_bytes + o.w_hops_x_max_channel + o.w_step_max_channel_bytes == 0.0 {
            return crate::invalid!("cost '{text}' has no positive weight");
        }
        Ok((o, terms.join("+"), old))
    }

    /// The objective's value for `parts`.
    pub fn value(&self, parts: &CostParts) -> f64 {
        self.w_hop_bytes * parts.hop_bytes as f64
            + self.w_max_channel_bytes * parts.max_channel_bytes as f64
            + self.w_hops_x_max_channel * parts.hops_x_max_channel() as f64
            + self.w_step_max_channel_bytes * parts.step_max_channel_bytes as f64
    }
    /// Whether link loads matter (else the evaluator can skip channel loads).
    pub fn needs_loads(&self) -> bool {
        self.w_max_channel_bytes != 0.0 || self.w_hops_x_max_channel != 0.0 || self.w_step_max_channel_bytes != 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The earlier cost names are read as the same objective and reported for a deprecation
    /// line; the canonical spec names only today's figures.
    #[test]
    fn earlier_cost_names_are_read_and_reported() {
        for (old, new) in [
            ("rmatt", "hops_x_max_channel"),
            ("max-link", "max_channel_bytes"),
            ("step_max_link", "step_max_channel_bytes"),
        ] {
            assert_eq!(Objective::parse(old).unwrap(), Objective::parse(new).unwrap());
            let (_, spec, used) = Objective::canonical(&format!("2*{old}+hop-bytes")).unwrap();
            assert_eq!((spec, used), (format!("2*{new}+hop_bytes"), vec![old.to_string()]));
        }
        assert_eq!(Objective::parse("hops_x_max_channel").unwrap(), Objective::HOPS_X_MAX_CHANNEL);
        assert_eq!(Objective::parse("max-channel-bytes").unwrap(), Objective::MAX_CHANNEL_BYTES);
        let (_, _, used) = Objective::canonical("hop_bytes+max_channel_bytes").unwrap();
        assert!(used.is_empty());
        assert!(Objective::parse("hops*max-link").is_err());
        assert!(Objective::parse("max-links").unwrap_err().to_string().contains("unknown cost 'max-links'"));
    }
}
