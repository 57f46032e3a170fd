//! [`ranked_passages`]: the split walk of one query, in the stages of its proof. The
//! seeds' masses by linearity ([`SeedMass`]); the passage half's share and bound
//! ([`Split::new`]); the first push beside the intervals of the passages' dot products;
//! a first pass that keeps only the passages in reach of the top
//! ([`Split::first_pass`]); then rounds that push further and tighten the bounds until
//! they separate the ranking ([`Split::prove`]), or, past the push's budget, the ranking
//! by the estimates ([`Split::by_estimates`]).

use std::borrow::Cow;

use rayon::prelude::*;

use super::bounds::{proven_top, Dots, Live, PassageShare, Unreached};
use super::dot_f64;
use super::push::{push_bound, Push, PUSH_FLOOR, PUSH_START, PUSH_STEP};
use super::response::{Half, PassageResponse};
use crate::corpus::PassageIdx;
use crate::filter::Selection;
use crate::graph::ppr::PprGraph;
use crate::index::{Matrix, Screened};
use crate::rank::NthLargest;

/// What a split walk found.
#[derive(Debug, Clone)]
pub struct SplitRanking {
    /// The `n` best passages, best first, with their scores (as the full walk's).
    pub top: Vec<(PassageIdx, f64)>,
    /// Nodes pushed from the entity seeds.
    pub pushes: usize,
    /// The residual mass left unpushed.
    pub residual: f64,
    /// How far any returned score may be from the fixed point of the full walk from the
    /// caller's seeds.
    pub bound: f64,
    /// Whether the bounds separate the ranking (it is the full walk's); `false` when the
    /// push ran out of its budget and the ranking is by the estimates, each within
    /// `bound` of its true value.
    pub proven: bool,
}

/// The seeds of one query, as [`crate::graph::walk`] builds them: entity nodes with
/// weights, and every graph passage with `passage_weight · x_p`, its dense score min-max
/// normalised.
pub struct SplitQuery<'a> {
    pub entity_seeds: &'a [(u32, f64)],
    /// The lowest and highest dense score over the graph's passages.
    pub dense_range: (f32, f32),
    pub query: &'a [f32],
    pub passage_weight: f64,
    pub damping: f64,
    /// The passage vectors the response was computed from (their exact rows, for the
    /// entity form).
    pub vectors: &'a Matrix,
    /// Edge steps the push may take before the ranking is returned unproven
    /// ([`crate::graph::ppr::PprParams::split_budget`]); 0: none (past the cost of a full
    /// walk, `None`).
    pub budget: usize,
    /// The caller's pass over the passage screen for `query` (the one that found the
    /// dense range), read again in the entity form instead of a second pass; made here
    /// when `None`.
    pub screened: Option<&'a Screened>,
    /// [`PassageResponse::entity_products`] for `query`, when the caller took them beside
    /// its other work; taken here when `None`.
    pub entity_products: Option<&'a [f64]>,
    /// Rank only the passages a metadata filter admits: the best `n` of them, in the
    /// order of every passage (the bounds are the same; only the passages that compete
    /// change).
    pub within: Option<&'a Selection>,
}

/// Passages the split walk's first pass bounds at a time.
const FIRST_PASS_ROWS: usize = 4096;

/// The `n` best passages of the walk seeded by `q`, proven; `None` when the bounds do not
/// separate them (ties, or scores closer than the push can resolve), or the input is not
/// one this split covers (the caller then runs the full walk).
pub fn ranked_passages(graph: &PprGraph, response: &PassageResponse, q: &SplitQuery, n: usize) -> Option<SplitRanking> {
    // Without passage seeds the passages the push has not reached compete as one class
    // (`Unreached`), which a filter would split: the full walk ranks those.
    if q.within.is_some() && q.passage_weight == 0.0 {
        return None;
    }
    let n = q.within.map_or(n, |s| n.min(s.count()));
    let seeds = SeedMass::of(graph, response, q, n)?;
    // The entity half, pushed until the bounds separate the ranking; its first round on
    // one thread while the other bounds the passages' half.
    let mut push = Push::new(&response.steps, q.damping);
    for &(s, weight) in q.entity_seeds {
        push.seed(s as usize, weight.max(0.0) / seeds.total);
    }
    // A deferred walk's residuals, this query's combination of their columns: what the
    // stale values the passage half reads miss, pushed with the entity seeds.
    let pending = pending_seeds(response, q, &seeds);
    for &(e, mass) in &pending {
        push.seed(e as usize, mass);
    }
    let seed_mass = seeds.entity / seeds.total + pending.iter().map(|s| s.1.abs()).sum::<f64>();
    let mut eps = PUSH_START * seed_mass.max(f64::MIN_POSITIVE);
    // The int8 pass over the passage screen, when the caller has not made it.
    let given = q.screened.filter(|s| !s.coarse());
    let made = match (given, &response.half) {
        (None, Half::Entities { .. }) if q.passage_weight > 0.0 => {
            Some(response.passage_screen.screened(q.query, 1, true)?)
        }
        _ => None,
    };
    // Whatever the budget, the push stops at 16 steps per entry of the graph, the
    // entries the full walk's 15–25 passes read (in time, several full walks: below).
    let work_limit = (16 * graph.entries()).max(1 << 14);
    let budget = if q.budget > 0 { q.budget.min(work_limit) } else { work_limit };
    let (dots, mut complete) =
        rayon::join(|| passage_dots(graph, response, q, given.or(made.as_ref())), || push.run(eps, budget));
    let split = Split::new(graph, response, q, n, &seeds, dots?);

    let (first_floor, in_reach) = split.first_pass(&push, eps);
    let zero = matches!(split.dots, Dots::Zero);
    let mut live: Vec<Live> = in_reach
        .into_iter()
        .map(|p| Live { p, dot: split.dots.interval(p, q.damping), exact: zero, score: 0.0, slack: 0.0 })
        .collect();
    let mut unreached = zero.then(|| Unreached::new(&response.by_degree));
    let mut nth_floor = first_floor;
    loop {
        if let Some(class) = &mut unreached {
            class.join(&push, response.entities, &mut live);
        }
        if !complete {
            // In time the full walk costs about a push step per entry of the graph (its
            // 20-odd sequential passes some 1.5 ns an entry each, a step into random node
            // states 30–50 ns): where that is no more than the budget, it runs instead,
            // exact.
            if graph.entries() <= budget {
                return None;
            }
            return Some(split.by_estimates(&push, eps, unreached.as_ref(), live));
        }
        let residual = match split.prove(&push, eps, &mut live, unreached.as_mut(), &mut nth_floor) {
            Proof::Proven(ranking) => return Some(ranking),
            Proof::Open { residual } => residual,
        };
        eps /= PUSH_STEP;
        if eps < PUSH_FLOOR * seed_mass.max(f64::MIN_POSITIVE) || residual == 0.0 {
            return None;
        }
        complete = push.run(eps, budget);
    }
}

/// The seeds' masses, by linearity: the passage seeds are `x_p = a · s_p + b`, as the
/// walk's caller computes them, and their sums come from the sums of the vectors. (They
/// scale every score alike, so their rounding, unlike the caller's per-passage one, moves
/// no passage's rank.)
#[derive(Clone, Copy)]
struct SeedMass {
    a: f64,
    b: f64,
    /// The entity seeds' mass, and the total with the passage seeds'.
    entity: f64,
    total: f64,
    /// `1 / (1 − d · r_D)`, `r_D` the reset mass on dangling nodes.
    kappa: f64,
}

impl SeedMass {
    /// `None` when the input is not one this split covers.
    fn of(graph: &PprGraph, response: &PassageResponse, q: &SplitQuery, n: usize) -> Option<SeedMass> {
        let (np, d) = (response.passages, q.damping);
        let (lo, hi) = q.dense_range;
        // A passage weight of 0 (no passage seeds: HippoRAG 1's walk, PhaseGraph's graph
        // list) leaves the push alone.
        if q.query.len() != response.dim
            || q.passage_weight.is_nan()
            || q.passage_weight < 0.0
            || n == 0
            || !lo.is_finite()
            || !hi.is_finite()
        {
            return None;
        }
        if q.entity_seeds.iter().any(|s| !s.1.is_finite()) {
            return None;
        }
        // The walk the response was computed for, from the vectors it was computed from.
        if d != response.damping
            || q.vectors.rows() != response.passage_screen.rows()
            || q.vectors.dim() != response.dim
        {
            return None;
        }
        if q.screened.is_some_and(|s| s.intervals().len() != response.passage_screen.rows()) {
            return None;
        }
        let (a, b) = if hi > lo { (1.0 / (hi - lo) as f64, -(lo as f64) / (hi - lo) as f64) } else { (0.0, 1.0) };
        let x_sum = |vectors: &[f64], count: usize| (a * dot_f64(vectors, q.query) + b * count as f64).max(0.0);
        let entity: f64 = q.entity_seeds.iter().map(|s| s.1.max(0.0)).sum();
        let passage_mass: f64 = q.passage_weight * x_sum(&response.vector_sum, np);
        let total = entity + passage_mass;
        if total <= 0.0 || !total.is_finite() {
            return None;
        }
        let w = q.passage_weight / total;
        // Dangling reset mass, for κ.
        let dangling_entities: f64 =
            q.entity_seeds.iter().filter(|s| graph.is_dangling(s.0 as usize)).map(|s| s.1.max(0.0)).sum::<f64>()
                / total;
        let dangling_passages: f64 = x_sum(&response.dangling_sum, response.dangling.len()) * w;
        let kappa = 1.0 / (1.0 - d * (dangling_entities + dangling_passages));
        Some(SeedMass { a, b, entity, total, kappa })
    }
}

/// The push's seeds from a deferred walk's residuals ([`super::repair`]): the full walk's
/// residual of the stale values is the entity walk's `r = c + M y − y` on the entities
/// (0 on the passages, whose values the passage half computes from the entities'), so
/// its error is `S(r / (1 − d))`, for this query's columns `w · (a · r·q + b · r_1)`.
fn pending_seeds(response: &PassageResponse, q: &SplitQuery, seeds: &SeedMass) -> Vec<(u32, f64)> {
    let w = q.passage_weight / seeds.total;
    if w == 0.0 {
        return Vec::new();
    }
    let (dim, d) = (response.dim, q.damping);
    response
        .pending
        .rows()
        .map(|(e, r)| (e, w * (seeds.a * dot_f64(&r[..dim], q.query) + seeds.b * r[dim]) / (1.0 - d)))
        .filter(|s| s.1 != 0.0)
        .collect()
}

/// Every passage's `(S V)_p · q` within an interval: none without passage seeds, the
/// rows form's screen, or the entity form's products with the passage screen's pass.
fn passage_dots<'a>(
    graph: &PprGraph,
    response: &'a PassageResponse,
    q: &SplitQuery<'a>,
    screened: Option<&'a Screened>,
) -> Option<Dots<'a>> {
    if q.passage_weight == 0.0 {
        return Some(Dots::Zero);
    }
    match &response.half {
        Half::Rows { screen, .. } => Some(Dots::Rows(screen.intervals(q.query)?)),
        Half::Entities { .. } => {
            let gathered = match q.entity_products.filter(|g| g.len() == response.passages) {
                Some(given) => Cow::Borrowed(given),
                None => Cow::Owned(response.entity_products(graph, q.query)?),
            };
            Some(Dots::Entities { screened: screened?, gathered })
        }
    }
}

/// One query's split walk past its setup: the passage half (its share of each score and
/// the bound of it) and the intervals of its dot products.
struct Split<'a> {
    graph: &'a PprGraph,
    response: &'a PassageResponse,
    q: &'a SplitQuery<'a>,
    n: usize,
    share: PassageShare,
    /// Per passage, the norm its f32 storage bound scales with.
    norms: &'a [f64],
    dots: Dots<'a>,
    kappa: f64,
}

/// A round of [`Split::prove`]: the ranking, or the residual the push left.
enum Proof {
    Proven(SplitRanking),
    Open { residual: f64 },
}

impl<'a> Split<'a> {
    /// The passage half, with its bound: f32 storage (relative 2^-24 per entry, so at
    /// most 2^-24 · |row| · |q| per dot product) and convergence; the dot products first
    /// within an interval (the screens'), then exactly for the passages near the top.
    fn new(
        graph: &'a PprGraph,
        response: &'a PassageResponse,
        q: &'a SplitQuery<'a>,
        n: usize,
        seeds: &SeedMass,
        dots: Dots<'a>,
    ) -> Split<'a> {
        let (d, SeedMass { a, b, total, kappa, .. }) = (q.damping, *seeds);
        let w = q.passage_weight / total;
        let q_norm = q.query.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>().sqrt();
        let convergence: f64 = response.column_error.iter().zip(q.query).map(|(e, &v)| e * (v as f64).abs()).sum();
        let storage = 2f64.powi(-24) * (1.0 + 1e-6);
        let (norms, norm_factor) = match &response.half {
            Half::Rows { norms, .. } => (norms, 1.0),
            Half::Entities { norms, .. } => (norms, d),
        };
        let per_degree: f64 = response.degree_error.iter().zip(q.query).map(|(e, &v)| e * (v as f64).abs()).sum();
        let share = PassageShare {
            w,
            a,
            b,
            per_norm: storage * norm_factor * q_norm,
            fixed: a.abs() * convergence + b.abs() * response.constant_error,
            per_degree: a.abs() * per_degree + b.abs() * response.degree_constant_error,
        };
        Split { graph, response, q, n, share, norms, dots, kappa }
    }

    /// Passage p's share of the score and its bound, its product within `dot`.
    fn passage(&self, p: usize, (dot, dot_error): (f64, f64)) -> (f64, f64) {
        let degree = self.response.steps.degrees[self.response.entities + p];
        self.share.of(dot, dot_error, self.response.constant[p], self.norms[p], degree)
    }

    /// What an interval's width adds to the bound: 0 once the product is exact.
    fn screen_error(&self, l: &Live) -> f64 {
        self.share.w * self.share.a.abs() * l.dot.1
    }

    /// Takes the products of `these` (positions in `live`) exactly.
    fn take_exactly(&self, live: &mut [Live], these: &[usize]) {
        let (d, q) = (self.q.damping, self.q);
        let exact_dot = |p: usize| match (&self.dots, &self.response.half) {
            // No passage half: every product is 0 (and known so from the start).
            (Dots::Zero, _) => 0.0,
            (Dots::Entities { gathered, .. }, _) => {
                (1.0 - d) * dot_f64(q.vectors.row(p as PassageIdx), q.query) + d * gathered[p]
            }
            (Dots::Rows(_), Half::Rows { response, .. }) => dot_f64(response.row(p as PassageIdx), q.query),
            (Dots::Rows(_), Half::Entities { .. }) => unreachable!("the rows form's screen gives `Dots::Rows`"),
        };
        // Scattered rows read from memory: both threads wait on them.
        let exact: Vec<f64> = these.par_iter().map(|&i| exact_dot(live[i].p)).collect();
        for (&i, dot) in these.iter().zip(exact) {
            (live[i].dot, live[i].exact) = ((dot, 0.0), true);
        }
    }

    /// The first round over every passage in one pass, which keeps only those in reach
    /// of the best `n`: at a million passages the intervals alone are 16 MB, and a pass
    /// that wrote every passage's score and bound took longer than the walk itself. A
    /// passage the push has not reached has no estimate, and its bound needs only its
    /// degree; those it has reached are kept whatever the pass finds, and scored later.
    /// Without passage seeds there is nothing to bound passage by passage: the passages
    /// the push reaches join round by round, and the others are one class
    /// ([`Unreached`]). The n-th best lower bound, and the passages kept.
    fn first_pass(&self, push: &Push, eps: f64) -> (f64, Vec<usize>) {
        if matches!(self.dots, Dots::Zero) {
            return (f64::NEG_INFINITY, Vec::new());
        }
        let (e, np, d, n) = (self.response.entities, self.response.passages, self.q.damping, self.n);
        let residual = push.residual();
        // Every estimate is taken as 0 here: with negative residuals pushed (a deferred
        // walk's), a reached passage's may be below it by as much as the lowest.
        let below = -push.lowest_passage_estimate(e);
        let degrees = &self.response.steps.degrees;
        let admits = |p: usize| self.q.within.is_none_or(|s| s.contains(p));
        let reached: Vec<usize> = push
            .touched
            .iter()
            .map(|&u| u as usize)
            .filter(|u| (e..e + np).contains(u))
            .map(|u| u - e)
            .filter(|&p| admits(p))
            .collect();
        let fresh =
            || (NthLargest::<f64>::new(n), Vec::new(), vec![0f64; FIRST_PASS_ROWS], vec![0f64; FIRST_PASS_ROWS]);
        let (lower, mut in_reach, ..) = (0..np.div_ceil(FIRST_PASS_ROWS))
            .into_par_iter()
            .fold(fresh, |(mut lower, mut keep, mut low, mut high), block| {
                let first = block * FIRST_PASS_ROWS;
                let rows = first..(first + FIRST_PASS_ROWS).min(np);
                let (lows, highs) = (&mut low[..rows.len()], &mut high[..rows.len()]);
                // Bounds in plain loops over the block (they vectorise), then the offers.
                self.dots.intervals_into(first, d, lows, highs);
                let per_row = self.response.constant[rows.clone()]
                    .iter()
                    .zip(&self.norms[rows.clone()])
                    .zip(&degrees[e + first..]);
                for ((lo, hi), ((&constant, &norm), &degree)) in lows.iter_mut().zip(highs.iter_mut()).zip(per_row) {
                    let (part, bound) = self.share.of(*lo, *hi, constant, norm, degree);
                    let slack = push_bound(residual, eps, degree) + bound + below;
                    // Unreached: its estimate is 0, which also bounds a reached one's from
                    // below.
                    (*lo, *hi) = (part - slack, part + slack);
                }
                for (p, (&lo, &hi)) in rows.zip(lows.iter().zip(highs.iter())) {
                    if !admits(p) {
                        continue;
                    }
                    lower.offer(lo);
                    if hi >= *lower.floor() || hi.is_nan() {
                        keep.push(p);
                    }
                }
                (lower, keep, low, high)
            })
            .reduce(fresh, |(mut a, mut x, ..), (b, y, low, high)| {
                a.merge(b);
                x.extend(y);
                (a, x, low, high)
            });
        in_reach.extend(reached);
        in_reach.sort_unstable();
        in_reach.dedup();
        (lower.get(), in_reach)
    }

    /// One round of the proof after a complete push: every passage in `live` scored
    /// within its bound, the products near the top taken exactly, the passages out of
    /// reach dropped, and the ranking if the bounds now separate it.
    fn prove(
        &self,
        push: &Push,
        eps: f64,
        live: &mut Vec<Live>,
        unreached: Option<&mut Unreached>,
        nth_floor: &mut f64,
    ) -> Proof {
        let (e, n) = (self.response.entities, self.n);
        let residual = push.residual();
        // Passage p's score and slack: the push's estimate and bound plus its half.
        let entity_error = |p: usize| push_bound(residual, eps, push.nodes[e + p].degree);
        let score = |l: &mut Live| {
            let (part, bound) = self.passage(l.p, l.dot);
            (l.score, l.slack) = (push.nodes[e + l.p].estimate + part, entity_error(l.p) + bound);
        };
        let mut lower = NthLargest::new(n);
        for l in live.iter_mut() {
            score(l);
            lower.offer(l.score - l.slack);
        }
        // Lower bounds only rise from round to round (the push only adds to estimates,
        // and its residual and `eps` only shrink), so the first pass's floor stands.
        *nth_floor = nth_floor.max(lower.get());
        let nth_floor = *nth_floor;
        // The passages that may be among the best `n` get their exact product (a
        // refined interval lies inside the screened one, so the others stay out), once
        // the screen's share of their bound is no longer small beside the push's: the
        // first coarse pushes leave every passage in reach of the top. Those whose upper
        // bound is under the n-th best lower bound leave `live` for good.
        let in_reach = |l: &Live| l.score + l.slack >= nth_floor;
        let exactly: Vec<usize> = (0..live.len())
            .filter(|&i| {
                let l = &live[i];
                !l.exact && in_reach(l) && self.screen_error(l) * PUSH_STEP >= entity_error(l.p)
            })
            .collect();
        self.take_exactly(live, &exactly);
        exactly.iter().for_each(|&i| score(&mut live[i]));
        // A NaN bound proves nothing: kept.
        live.retain(|l| in_reach(l) || (l.score + l.slack).is_nan());
        // The unreached passages' highest bound, while it is in reach; as they score 0,
        // fewer than `n` reached ones leave one of them in the head, unproven.
        let outside = unreached.map_or(f64::NEG_INFINITY, |class| class.test(push, e, residual, eps, nth_floor));
        let (scores, slacks): (Vec<f64>, Vec<f64>) = live.iter().map(|l| (l.score, l.slack)).unzip();
        // `live` is in passage order: ties by position are ties by passage.
        let proven = match outside == f64::NEG_INFINITY || live.len() >= n {
            true => proven_top(&scores, &slacks, &(0..live.len()).collect::<Vec<_>>(), n, outside),
            false => None,
        };
        let Some(order) = proven else {
            return Proof::Open { residual };
        };
        // Plus how far the sums above may be from the caller's sum of its f32 seeds
        // (each seed's rounding, and its dense score's, a few units of 2^-24 of the
        // range): it scales every score alike, by well under 1e-5.
        let kappa = self.kappa;
        let bound = order.iter().map(|&i| kappa * (slacks[i] + 1e-5 * scores[i].abs())).fold(0.0, f64::max);
        let top = order.into_iter().map(|i| (live[i].p as PassageIdx, kappa * scores[i])).collect();
        Proof::Proven(SplitRanking { top, pushes: push.pushes, residual, bound, proven: true })
    }

    /// Past the budget, unproven: the best by the estimates (ties by index, as the full
    /// walk's), the dot products of the head taken exactly first. The push stopped inside
    /// a round: its bounds are those of the largest residual per degree left.
    fn by_estimates(&self, push: &Push, eps: f64, unreached: Option<&Unreached>, mut live: Vec<Live>) -> SplitRanking {
        let (e, n, kappa) = (self.response.entities, self.n, self.kappa);
        let residual = push.residual();
        let eps = push.stopped_at(eps);
        if let Some(class) = unreached {
            class.fill(push, e, n, &mut live);
        }
        // Each estimate with what the push's next step would add to it: the mass
        // waiting at the passage and at its neighbours (their share of it). One step
        // of lookahead ranks as well as a pass that moves every residual two hops
        // (at a million passages, 40 ms) would, at the cost of reading these rows.
        for l in live.iter_mut() {
            l.score = push.ahead(self.graph, e + l.p);
        }
        let value = |l: &Live| l.score + self.passage(l.p, l.dot).0;
        let by_value = |live: &mut Vec<Live>| {
            live.sort_by(|x, y| crate::rank::desc(value(x), value(y)).then(x.p.cmp(&y.p)));
        };
        by_value(&mut live);
        let head: Vec<usize> = (0..live.len().min(4 * n)).filter(|&i| !live[i].exact).collect();
        self.take_exactly(&mut live, &head);
        by_value(&mut live);
        live.truncate(n);
        let slack_of = |l: &Live| push_bound(residual, eps, push.nodes[e + l.p].degree) + self.passage(l.p, l.dot).1;
        let bound = live.iter().map(|l| kappa * (slack_of(l) + 1e-5 * value(l).abs())).fold(0.0, f64::max);
        let top = live.iter().map(|l| (l.p as PassageIdx, kappa * value(l))).collect();
        SplitRanking { top, pushes: push.pushes, residual, bound, proven: false }
    }
}
