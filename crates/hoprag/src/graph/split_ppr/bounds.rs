//! The error bounds: a passage's share of the score and its bound, the intervals of
//! the dot products, the passages in reach of the top, and the proof of a ranking.

use std::borrow::Cow;

use super::push::{push_bound, Push};
use crate::index::Screened;
use crate::rank::NthLargest;

/// Passage p's share of the score, `w · (a · (S V)_p · q + b · (S 1)_p)`, and its bound:
/// the dot product's error, f32 storage (relative 2^-24 per entry, so at most
/// `2^-24 · |row| · |q|` per dot product, `per_norm · norm_p`) and convergence: `fixed`
/// (the residual bounded in L1) and `per_degree · deg(p)` (a repaired walk's per-node
/// residual bound; 0 after a solve).
pub(super) struct PassageShare {
    pub(super) w: f64,
    pub(super) a: f64,
    pub(super) b: f64,
    pub(super) per_norm: f64,
    pub(super) fixed: f64,
    pub(super) per_degree: f64,
}

impl PassageShare {
    #[inline]
    pub(super) fn of(&self, dot: f64, dot_error: f64, constant: f64, norm: f64, degree: f64) -> (f64, f64) {
        let (x, y) = (self.a * dot, self.b * constant);
        let fixed = self.fixed + self.per_degree * degree;
        let bound = self.w * (self.a.abs() * (dot_error + self.per_norm * norm) + fixed);
        // Plus the f64 rounding of the sums.
        (self.w * (x + y), bound + 1e-12 * self.w * (x.abs() + y.abs()))
    }
}

/// A passage still in reach of the best `n`: its `(S V)_p · q` within `dot`
/// (midpoint, half-width; 0 once taken exactly), and its score within `score ± slack`
/// as of the last round.
#[derive(Debug, Clone, Copy)]
pub(super) struct Live {
    pub(super) p: usize,
    pub(super) dot: (f64, f64),
    pub(super) exact: bool,
    pub(super) score: f64,
    pub(super) slack: f64,
}

/// Every passage's `(S V)_p · q` within an interval, without copying them: from the
/// response's own int8 screen (rows form), or from the passage vectors' int8 pass and
/// the gather `Σ_e P(e → p)·(S V)_e · q` (entity form).
pub(super) enum Dots<'a> {
    /// No passage seeds: every product is known to be 0.
    Zero,
    Rows(Vec<(f32, f32)>),
    Entities {
        screened: &'a Screened,
        gathered: Cow<'a, [f64]>,
    },
}

impl Dots<'_> {
    /// The intervals of passages `first..first + mid.len()`, into `mid` and `half`.
    pub(super) fn intervals_into(&self, first: usize, d: f64, mid: &mut [f64], half: &mut [f64]) {
        let mid_half = |(lo, hi): (f32, f32)| ((lo as f64 + hi as f64) / 2.0, (hi as f64 - lo as f64) / 2.0);
        let out = mid.iter_mut().zip(half.iter_mut());
        match self {
            Dots::Zero => out.for_each(|(m, h)| (*m, *h) = (0.0, 0.0)),
            Dots::Rows(intervals) => out.zip(&intervals[first..]).for_each(|((m, h), &i)| (*m, *h) = mid_half(i)),
            Dots::Entities { screened, gathered } => {
                for (((m, h), &i), &g) in out.zip(&screened.intervals()[first..]).zip(&gathered[first..]) {
                    let (mid, half) = mid_half(i);
                    (*m, *h) = ((1.0 - d) * mid + d * g, (1.0 - d) * half);
                }
            }
        }
    }

    /// Passage p's interval (midpoint, half-width).
    #[inline]
    pub(super) fn interval(&self, p: usize, d: f64) -> (f64, f64) {
        let (mut mid, mut half) = ([0.0], [0.0]);
        self.intervals_into(p, d, &mut mid, &mut half);
        (mid[0], half[0])
    }
}

/// Without passage seeds, the passages the push has not reached, as one class: each
/// scores 0 within `min(residual, eps · degree)`, so the class is in reach of the best
/// `n` while the bound of its highest degree is, and out for good once that is not
/// (bounds only tighten). A passage the push reaches joins `live`, unless its own bound
/// had already put it out. At a million passages, bounding each of them every round
/// took longer than the push.
pub(super) struct Unreached<'a> {
    /// The passages by degree, highest first; those before `cursor` are all reached.
    pub(super) by_degree: &'a [u32],
    pub(super) cursor: usize,
    /// Entries of the push's `touched` already joined.
    pub(super) joined: usize,
    /// The last round's residual, `eps` and floor, while the class is in reach.
    pub(super) last: Option<(f64, f64, f64)>,
    pub(super) open: bool,
}

impl<'a> Unreached<'a> {
    pub(super) fn new(by_degree: &'a [u32]) -> Self {
        Unreached { by_degree, cursor: 0, joined: 0, last: None, open: true }
    }

    /// Whether unreached passage `p` was in reach at the last round.
    pub(super) fn in_reach(&self, push: &Push, e: usize, p: usize) -> bool {
        let degree = push.nodes[e + p].degree;
        self.last.is_none_or(|(residual, eps, floor)| push_bound(residual, eps, degree) >= floor)
    }

    /// Adds the passages the push reached since the last call that were still in reach.
    pub(super) fn join(&mut self, push: &Push, e: usize, live: &mut Vec<Live>) {
        let new = &push.touched[self.joined..];
        self.joined = push.touched.len();
        if !self.open {
            return;
        }
        let before = live.len();
        for p in new.iter().map(|&u| u as usize).filter(|&u| u >= e).map(|u| u - e) {
            if self.in_reach(push, e, p) {
                live.push(Live { p, dot: (0.0, 0.0), exact: true, score: 0.0, slack: 0.0 });
            }
        }
        if live.len() > before {
            live.sort_unstable_by_key(|l| l.p);
        }
    }

    /// The class's highest `score + slack` after this round (closing it when that is
    /// under `floor`), or −∞ once closed.
    pub(super) fn test(&mut self, push: &Push, e: usize, residual: f64, eps: f64, floor: f64) -> f64 {
        while self.open && self.cursor < self.by_degree.len() && push.reached(e + self.by_degree[self.cursor] as usize)
        {
            self.cursor += 1;
        }
        let Some(&p) = self.by_degree.get(self.cursor).filter(|_| self.open) else {
            self.open = false;
            return f64::NEG_INFINITY;
        };
        let bound = push_bound(residual, eps, push.nodes[e + p as usize].degree);
        if bound < floor {
            self.open = false;
            return f64::NEG_INFINITY;
        }
        self.last = Some((residual, eps, floor));
        bound
    }

    /// Past the budget with fewer than `n` passages in `live`: the unreached ones in
    /// reach, up to `n` of them by index (they score 0, ties by index).
    pub(super) fn fill(&self, push: &Push, e: usize, n: usize, live: &mut Vec<Live>) {
        if !self.open || live.len() >= n {
            return;
        }
        let fill = (0..push.nodes.len() - e).filter(|&p| !push.reached(e + p) && self.in_reach(push, e, p)).take(n);
        live.extend(fill.map(|p| Live { p, dot: (0.0, 0.0), exact: true, score: 0.0, slack: 0.0 }));
    }
}

/// The `n` best of the passages `among` by `score` (ties by index), if every one of them
/// is proven above all of `among` that follow it, and above `outside` (the highest
/// `score + slack` of any other passage, each of which follows them): each true value
/// lies within `score ± slack`. In linear passes (the n-th best score, the few at or
/// above it, the bound of the rest): it runs a few times a query.
pub(super) fn proven_top(score: &[f64], slack: &[f64], among: &[usize], n: usize, outside: f64) -> Option<Vec<usize>> {
    let n = n.min(among.len());
    if n == 0 {
        return Some(Vec::new());
    }
    let by_score = |a: &usize, b: &usize| crate::rank::desc(score[*a], score[*b]).then(a.cmp(b));
    let mut nth = NthLargest::new(n);
    among.iter().for_each(|&p| nth.offer(score[p]));
    let floor = nth.get();
    // Every passage below the n-th best score follows the n best (a NaN is kept: it
    // sorts last, and only counts when there are fewer than n numbers).
    let mut head: Vec<usize> = among.iter().copied().filter(|&p| score[p] >= floor || score[p].is_nan()).collect();
    head.sort_by(by_score);
    head.truncate(n);
    let last = head[n - 1];
    let follows = |p: usize| score[p] < score[last] || by_score(&p, &last).is_gt();
    let mut above = among.iter().copied().filter(|&p| follows(p)).map(|p| score[p] + slack[p]).fold(outside, f64::max);
    for &p in head.iter().rev() {
        if score[p] - slack[p] <= above {
            return None;
        }
        above = above.max(score[p] + slack[p]);
    }
    Some(head)
}
