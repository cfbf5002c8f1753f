//! Fewer phases by recolouring. A phased all-to-all is a colouring of the host-level bipartite
//! multigraph — a sending copy and a receiving copy of every rank, an edge per message, a
//! colour per phase — in which no rank sends or receives twice in one colour. Exchanging two
//! colours along an alternating (Kempe) chain keeps that true, so the host ports are never in
//! question; link capacities are what a chain swap may break or mend. Starting from the
//! constructed phases, the messages of the emptiest phases are recoloured into the others
//! (König's argument: a chain swap always frees a colour at both ends of a message), and a
//! local search over chain swaps then drives the flows beyond any link's capacity to zero.
//! It runs within a fixed number of moves and from a fixed seed, so the schedule is
//! deterministic; when the budget runs out the constructed phases stand.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Job;

const NONE: u32 = u32::MAX;
/// Colours tried for each repair move; the best swap among them is taken.
const TRIES: usize = 4;
/// Chance of taking a move that adds excess flows (to leave a local minimum).
const NOISE: f64 = 0.02;
/// Longest chain a repair move may swap: on a large job a full colouring's chains run through
/// most ranks, and a move that cheap keeps the search within its time.
const MAX_CHAIN: usize = 64;

/// `phases` recoloured into `target` phases whose every link holds no more flows than its
/// capacity, within `budget` repair moves; `None` when the budget runs out first.
pub(super) fn into_phases(
    job: &Job,
    phases: &[Vec<(u32, u32)>],
    target: usize,
    budget: usize,
) -> Option<Vec<Vec<(u32, u32)>>> {
    let mut by_size: Vec<usize> = (0..phases.len()).collect();
    by_size.sort_by_key(|&p| (std::cmp::Reverse(phases[p].len()), p));
    let ends: Vec<(u32, u32)> = by_size.iter().flat_map(|&p| phases[p].iter().copied()).collect();
    let mut col = Colouring::new(job, target, ends);
    let mut rng = ChaCha8Rng::seed_from_u64(0x7ee5);
    let mut m = 0u32;
    for (c, &p) in by_size.iter().enumerate() {
        for _ in &phases[p] {
            if c < target {
                col.add(m, c as u32);
            } else {
                col.insert(m, &mut rng);
            }
            m += 1;
        }
    }
    if !col.repair(budget, &mut rng) {
        return None;
    }
    let mut out = vec![Vec::new(); target];
    for (m, &c) in col.colour.iter().enumerate() {
        out[c as usize].push(col.ends[m]);
    }
    out.retain(|p| !p.is_empty());
    Some(out)
}

/// Messages coloured with phases, with the flows on every (phase, directed link).
struct Colouring<'j, 'a> {
    job: &'j Job<'a>,
    colours: usize,
    num_links: usize,
    /// (sending rank, receiving rank) of every message.
    ends: Vec<(u32, u32)>,
    /// Colour of every message, `NONE` while uncoloured.
    colour: Vec<u32>,
    /// The message a rank sends (receives) in each colour: `rank × colours + colour`.
    at_send: Vec<u32>,
    at_recv: Vec<u32>,
    /// Flows on each directed link in each colour: `colour × links + link`.
    flows: Vec<u32>,
    /// Flows beyond capacity, summed over colours and links.
    excess: usize,
    /// (colour, link) pairs that went over capacity; stale entries are dropped when met.
    hot: Vec<(u32, u32)>,
}

impl<'j, 'a> Colouring<'j, 'a> {
    fn new(job: &'j Job<'a>, colours: usize, ends: Vec<(u32, u32)>) -> Self {
        let n = job.hosts.len();
        let num_links = job.capacity.len();
        Colouring {
            job,
            colours,
            num_links,
            colour: vec![NONE; ends.len()],
            ends,
            at_send: vec![NONE; n * colours],
            at_recv: vec![NONE; n * colours],
            flows: vec![0; colours * num_links],
            excess: 0,
            hot: Vec::new(),
        }
    }

    fn over(&self, c: u32, l: u32) -> bool {
        self.flows[c as usize * self.num_links + l as usize] > self.job.capacity[l as usize]
    }

    fn add(&mut self, m: u32, c: u32) {
        let job = self.job;
        let (s, d) = self.ends[m as usize];
        self.colour[m as usize] = c;
        self.at_send[s as usize * self.colours + c as usize] = m;
        self.at_recv[d as usize * self.colours + c as usize] = m;
        for &l in job.path(s, d) {
            let i = c as usize * self.num_links + l as usize;
            let cap = job.capacity[l as usize];
            if self.flows[i] >= cap {
                self.excess += 1;
                if self.flows[i] == cap {
                    self.hot.push((c, l));
                }
            }
            self.flows[i] += 1;
        }
    }

    fn remove(&mut self, m: u32) {
        let job = self.job;
        let (s, d) = self.ends[m as usize];
        let c = std::mem::replace(&mut self.colour[m as usize], NONE);
        self.at_send[s as usize * self.colours + c as usize] = NONE;
        self.at_recv[d as usize * self.colours + c as usize] = NONE;
        for &l in job.path(s, d) {
            let i = c as usize * self.num_links + l as usize;
            self.flows[i] -= 1;
            if self.flows[i] >= job.capacity[l as usize] {
                self.excess -= 1;
            }
        }
    }

    /// Exchanges colours `a` and `b` on every message of `chain` (all coloured one of them).
    fn swap(&mut self, chain: &[u32], a: u32, b: u32) {
        for &e in chain {
            let was = self.colour[e as usize];
            self.remove(e);
            // Parked as the other colour; added back once every slot of the chain is free.
            self.colour[e as usize] = if was == a { b } else { a };
        }
        for &e in chain {
            let c = std::mem::replace(&mut self.colour[e as usize], NONE);
            self.add(e, c);
        }
    }

    /// Follows an alternating chain from `node` (a sending copy when `at_sender`) whose next
    /// edge has colour `want`, then `other`, and so on, pushing its messages: `Some(true)` when
    /// it closes on `start` (a cycle), `None` once `out` holds more than `limit` messages.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        mut node: u32,
        mut at_sender: bool,
        mut want: u32,
        mut other: u32,
        start: u32,
        limit: usize,
        out: &mut Vec<u32>,
    ) -> Option<bool> {
        loop {
            let slot = node as usize * self.colours + want as usize;
            let e = if at_sender { self.at_send[slot] } else { self.at_recv[slot] };
            if e == NONE {
                return Some(false);
            }
            if e == start {
                return Some(true);
            }
            if out.len() >= limit {
                return None;
            }
            out.push(e);
            let (s, d) = self.ends[e as usize];
            node = if at_sender { d } else { s };
            at_sender = !at_sender;
            std::mem::swap(&mut want, &mut other);
        }
    }

    /// The chain of colours `colour[m]` and `b` through message `m`; false when it is longer
    /// than `limit` messages.
    fn chain(&self, m: u32, b: u32, limit: usize, out: &mut Vec<u32>) -> bool {
        out.clear();
        out.push(m);
        let a = self.colour[m as usize];
        let (s, d) = self.ends[m as usize];
        match self.walk(s, true, b, a, m, limit, out) {
            None => false,
            Some(true) => true,
            Some(false) => self.walk(d, false, b, a, m, limit, out).is_some(),
        }
    }

    /// Colours the uncoloured message `m`: with a colour free at both its ends if there is one
    /// (the one adding the fewest excess flows), else after a chain swap that frees one.
    fn insert(&mut self, m: u32, rng: &mut ChaCha8Rng) {
        let (s, d) = self.ends[m as usize];
        let at_s = self.free_colours(&self.at_send, s);
        let at_d = self.free_colours(&self.at_recv, d);
        let job = self.job;
        let added = |c: u32| {
            job.path(s, d)
                .iter()
                .filter(|&&l| self.flows[c as usize * self.num_links + l as usize] >= job.capacity[l as usize])
                .count()
        };
        if let Some(c) = at_s.iter().copied().filter(|c| at_d.contains(c)).min_by_key(|&c| added(c)) {
            self.add(m, c);
            return;
        }
        // Every rank has fewer messages than colours, so each end has a free colour: a at the
        // sender, b at the receiver. Swapping the a/b chain from the receiver frees a there; it
        // cannot reach the sender, which has no a edge.
        let a = at_s[rng.gen_range(0..at_s.len())];
        let b = at_d[rng.gen_range(0..at_d.len())];
        let mut chain = Vec::new();
        self.walk(d, false, a, b, NONE, usize::MAX, &mut chain);
        self.swap(&chain, a, b);
        self.add(m, a);
    }

    /// Colours in which `rank` has no message in `at` (`at_send` or `at_recv`).
    fn free_colours(&self, at: &[u32], rank: u32) -> Vec<u32> {
        let row = &at[rank as usize * self.colours..(rank as usize + 1) * self.colours];
        (0..self.colours as u32).filter(|&c| row[c as usize] == NONE).collect()
    }

    /// Chain swaps until no link carries more than its capacity in any colour, at most
    /// `budget` of them; true on success.
    fn repair(&mut self, budget: usize, rng: &mut ChaCha8Rng) -> bool {
        let n = self.job.hosts.len();
        if self.colours < 2 {
            return self.excess == 0;
        }
        let (mut on_link, mut chain) = (Vec::new(), Vec::new());
        for _ in 0..budget {
            if self.excess == 0 {
                return true;
            }
            if self.hot.len() > 8 * (self.excess + 8) {
                let mut hot = std::mem::take(&mut self.hot);
                hot.sort_unstable();
                hot.dedup();
                hot.retain(|&(c, l)| self.over(c, l));
                self.hot = hot;
            }
            let i = rng.gen_range(0..self.hot.len());
            let (c, l) = self.hot[i];
            if !self.over(c, l) {
                self.hot.swap_remove(i);
                continue;
            }
            on_link.clear();
            for s in 0..n {
                let m = self.at_send[s * self.colours + c as usize];
                if m != NONE {
                    let (s, d) = self.ends[m as usize];
                    if self.job.path(s, d).contains(&l) {
                        on_link.push(m);
                    }
                }
            }
            let m = on_link[rng.gen_range(0..on_link.len())];
            let before = self.excess as isize;
            let mut best: Option<(isize, u32)> = None;
            for _ in 0..TRIES {
                let b = rng.gen_range(0..self.colours as u32 - 1);
                let b = if b >= c { b + 1 } else { b };
                if !self.chain(m, b, MAX_CHAIN, &mut chain) {
                    continue;
                }
                self.swap(&chain, c, b);
                let delta = self.excess as isize - before;
                self.swap(&chain, c, b);
                if best.map_or(true, |(d, _)| delta < d) {
                    best = Some((delta, b));
                }
            }
            if let Some((delta, b)) = best {
                if delta <= 0 || rng.gen_bool(NOISE) {
                    self.chain(m, b, usize::MAX, &mut chain);
                    self.swap(&chain, c, b);
                }
            }
        }
        self.excess == 0
    }
}
