//! The stored walk brought up to date after an edit by local work, instead of solved again
//! from scratch (issue 54).
//!
//! [`Solved`] holds `y ≈ y*`, the fixed point of `y = c + M y` on the entities
//! ([`EntityWalk`]). An edit changes `c` and `M` only on rows near what it touched: a
//! passage added or removed, an entity whose degree changed (so its steps, in every row
//! two steps away). On every other row the old solution's residual `r = c + M y − y` is
//! the old one, bounded without being known: after the solve's last iteration
//! `y_{k+1} = c + M y_k`, `r(y_{k+1}) = M (y_{k+1} − y_k)`, at most `ρ·Δ` in L1 (`ρ` the
//! contraction, `Δ` the stored last change). The repair computes the residual exactly on
//! the rows whose equation changed and pushes it (forward push as it repairs personalized
//! PageRank on a dynamic graph: Zhang, Lofgren & Goel, KDD 2016) until every entity's is
//! at most `ε · deg(u)` per column: a per-node bound, which on the walk's undirected graph
//! bounds each node's error by `ε · κ · deg(v)` however many nodes hold residual
//! ([`super::response::node_factor`]). Its work is then the edit's residual over `ε`, not
//! the graph's size.
//!
//! The bound has two parts, both stored: the L1 part (`Δ`, as after a solve: the old
//! residual of the rows the repair did not reach, inherited, plus rounding) and the
//! per-node part (`ε` per column, [`Solved`]'s `node_error`). Neither grows along a chain
//! of repairs: a row the repair reaches has its residual taken exactly and pushed under
//! `ε · deg`, a row it does not keeps the residual, and the bound, it had. `ε` is
//! [`REPAIR_TOLERANCE`] of each column's reset mass per unit of the graph's total degree,
//! `ε_c = τ · mass_c / vol`: every node within `τ · κ` of its share of the column's mass
//! at the walk's stationary distribution, whatever the corpus's size.
//!
//! A global tolerance (the solve's, 1e-11 of each column's mass in L1) is not local: one
//! passage is 1/6,119 of the mass on 2wiki-corpus, and pushing it to 1e-11 of all of it
//! spread it to all 46,887 entities, at two to four times a solve's time. Past its budget
//! the repair declines, and the caller solves the walk again from the old values
//! ([`Solved::solve_warm`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::push::Steps;
use super::solve::{reset_columns, EntityWalk, Solved, BLOCK, PRECOMPUTE_TOLERANCE};
use crate::corpus::PassageIdx;
use crate::graph::ppr::PprGraph;
use crate::index::Matrix;

/// `τ`: the repair pushes until each entity's residual is at most `ε_c · deg(u)`, with
/// `ε_c = τ · mass_c / vol` (each column's reset mass per unit of the graph's total walk
/// degree), so that every node of the walk is within `τ · κ` (`κ ≤ 2` at the damping 0.5)
/// of its share of the column's mass at the stationary distribution. Measured on
/// 2wiki-corpus (tests/walk_repair_local.rs, 100 questions, after 1 and 10 one-document
/// edits): ppr and auto proved 49 rankings of 100 at 1e-3, 88 at 1e-4, 99-100 at 1e-5
/// (100 with the solved walk; the others ran the full walk, the same lists); a repair
/// took 0.15-0.25, 0.3-0.6 and 0.5-0.9 of a solve's time, the push reaching 15-35 %,
/// 45-80 % and 85-98 % of the entities. 1e-4 keeps most rankings proven at a third to
/// a half of a solve.
pub const REPAIR_TOLERANCE: f64 = 1e-4;

/// `τ` of a deferred walk ([`Solved::defer`]): a changed row whose residual is under
/// `ε_c · deg(u)` (`ε_c = τ · mass_c / vol`, as for [`REPAIR_TOLERANCE`]) joins the
/// per-node part of the bound instead of staying pending. Ten times under the repair's:
/// on 2wiki-corpus 1e-5 proved 99–100 rankings of 100 where 1e-4 proved 88.
pub const DEFER_TOLERANCE: f64 = 1e-5;

/// The rows the push could not bring under `ε · deg` within its rounds leave their excess
/// to the L1 part of the bound: at most this share of what a fresh solve may leave
/// (`ρ · PRECOMPUTE_TOLERANCE · mass`) before the push runs again.
const REPAIR_SHARE: f64 = 1.0 / 16.0;

/// Past this many times a fresh solve's L1 residual, or this many times the per-node
/// target (the graph changed enough that `ε` shrank), the inherited bound is dropped:
/// every row's residual is computed (one pass, as one iteration of the solve) and pushed
/// under the target, so that the bounds of any chain of repairs stay within this factor
/// of a single repair's, whose proof rate is what [`REPAIR_TOLERANCE`] was chosen by.
const REFRESH_AT: f64 = 2.0;

/// More changed rows than this share of the entities: the solve is cheaper to reason about
/// and not much dearer.
const MAX_CHANGED: f64 = 0.5;

/// The push gives up (and the walk is solved again) past this share of a solve's work, in
/// edge steps per block of columns (a solve takes about one per stored entry per
/// iteration); a push's step costs a few of the solve's, which streams. Blocks run two at
/// a time and stop together, so a declined repair costs about two blocks' budget.
const BUDGET: f64 = 0.25;

/// Times the push runs again on the exact residuals, when its own running sums (which
/// miss the old residual of the unchanged rows it reached) drifted from them.
const ROUNDS: usize = 3;

/// Where the new graph's nodes were in the old one: an edit matches entities by key and
/// passages by content.
pub struct Origins<'a> {
    /// For each entity of the new graph, the old graph's entity of the same key.
    pub entities: &'a [Option<u32>],
    /// For each passage of the new graph, the old graph's passage with the same title and
    /// text, and so the same vector: the repair takes the caller's word for it (an edit
    /// copies a kept passage's stored vector).
    pub passages: &'a [Option<u32>],
}

/// What a repair did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RepairStats {
    pub entities: usize,
    /// Entities whose equation changed (their residual computed exactly).
    pub changed: usize,
    /// Whether the inherited bound was dropped and every row's residual computed.
    pub refreshed: bool,
    /// Entities the push reached, in the block of columns that reached most (a deferred
    /// walk's: the rows whose residual was computed, `changed` of them left pending).
    pub touched: usize,
    /// Pushes and edge steps, over all blocks of columns.
    pub pushes: usize,
    pub steps: usize,
    /// Edge steps a solve takes, over all blocks (its iterations times the stored
    /// entries): what `steps` compares with.
    pub solve_steps: usize,
    /// The largest column's stored change against a fresh solve's largest
    /// (`PRECOMPUTE_TOLERANCE · mass`): how much looser its L1 bound may be.
    pub bound_ratio: f64,
    /// `τ`, the per-node tolerance pushed to ([`REPAIR_TOLERANCE`]).
    #[serde(default)]
    pub tolerance: f64,
    /// The largest column's stored per-node bound against this repair's target `ε`:
    /// above 1 where it was inherited from a larger one.
    #[serde(default)]
    pub node_ratio: f64,
    /// Seconds comparing the graphs (steps, contractions, changed rows, masses), and in
    /// all.
    pub compare_secs: f64,
    pub secs: f64,
}

/// What one block of columns left.
struct BlockOutcome {
    /// Per column, the L1 residual on the rows the repair touched beyond `ε · deg`,
    /// rounding included.
    residual: [f64; BLOCK],
    touched: usize,
    pushes: usize,
    steps: usize,
}

/// The new walk and what the repair reads of both graphs.
struct Context<'a> {
    graph: &'a PprGraph,
    walk: &'a EntityWalk<'a>,
    vectors: &'a Matrix,
    origins: &'a Origins<'a>,
    old: &'a Solved,
    /// The rows whose residual starts exact: those whose equation changed (every row for
    /// a refresh).
    rows: &'a [u32],
    budget: usize,
    over: &'a AtomicBool,
}

impl Solved {
    /// This solution, of `old`'s walk, brought up to date for `graph` (`entities` entity
    /// nodes, then the passages of `vectors`), with error bounds as valid as a solve's.
    /// `Err` says why the caller should solve the walk instead: the inputs do not fit
    /// together, the new graph is not one the split covers, or the edit touched too much
    /// for a local repair to pay.
    pub fn repair(
        &self,
        old: &PprGraph,
        graph: &PprGraph,
        entities: usize,
        origins: &Origins,
        vectors: &Matrix,
    ) -> Result<(Solved, RepairStats), String> {
        self.repair_to(old, graph, entities, origins, vectors, REPAIR_TOLERANCE)
    }

    /// [`Solved::repair`] to the per-node tolerance `tolerance` (`τ`) instead of
    /// [`REPAIR_TOLERANCE`]: what that constant was chosen by.
    pub fn repair_to(
        &self,
        old: &PprGraph,
        graph: &PprGraph,
        entities: usize,
        origins: &Origins,
        vectors: &Matrix,
        tolerance: f64,
    ) -> Result<(Solved, RepairStats), String> {
        self.repair_within(old, graph, entities, origins, vectors, BUDGET, tolerance)
    }

    /// [`Solved::repair_to`], giving up past `budget` times a solve's work per block.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn repair_within(
        &self,
        old: &PprGraph,
        graph: &PprGraph,
        entities: usize,
        origins: &Origins,
        vectors: &Matrix,
        budget: f64,
        tolerance: f64,
    ) -> Result<(Solved, RepairStats), String> {
        let start = Instant::now();
        let (d, dim) = (self.damping, self.dim);
        if !(tolerance > 0.0 && tolerance.is_finite()) {
            return Err(format!("a per-node tolerance of {tolerance}"));
        }
        if self.is_deferred() {
            return Err("a deferred walk is solved again, not repaired".into());
        }
        let passages = self.fits(old, graph, entities, origins, vectors)?;
        let (steps, old_steps) = (Steps::new(graph), Steps::new(old));
        let (walk, old_walk) = entity_walks((graph, &steps, entities), (old, &old_steps, self.entities), d)?;
        let rho = walk.contraction;
        let changed = changed_rows(old, graph, self.entities, entities, origins);
        let mass = column_mass(vectors, passages, dim);
        let compare_secs = start.elapsed().as_secs_f64();
        // What a fresh solve may leave per column, `ρ'·Δ` with `Δ` at its tolerance; and
        // what this solution's residual is bounded by (the invariant a solve leaves, and
        // every repair keeps: ‖r‖₁ ≤ ρ·Δ).
        let fresh: Vec<f64> = mass.iter().map(|m| rho * PRECOMPUTE_TOLERANCE * m).collect();
        let inherited: Vec<f64> = self.change.iter().map(|ch| old_walk.contraction * ch).collect();
        // The per-node target, `ε_c = τ · mass_c / vol`.
        let volume: f64 = steps.degrees.iter().sum();
        let eps: Vec<f64> = mass.iter().map(|m| tolerance * m / volume.max(f64::MIN_POSITIVE)).collect();
        let refreshed = inherited.iter().zip(&fresh).any(|(u, f)| *u > REFRESH_AT * f)
            || self.node_error.iter().zip(&eps).any(|(old, e)| *old > REFRESH_AT * e);
        let (rows, inherited) = if refreshed {
            ((0..entities as u32).collect(), vec![0.0; dim + 1])
        } else if changed.len() as f64 > MAX_CHANGED * entities as f64 {
            return Err(format!("the edit changed {} of {entities} entities' equations", changed.len()));
        } else {
            (changed.clone(), inherited)
        };
        let budget = (budget * self.iterations.max(1) as f64 * graph.entries() as f64) as usize;
        let over = AtomicBool::new(false);
        let ctx = Context { graph, walk: &walk, vectors, origins, old: self, rows: &rows, budget, over: &over };

        let mut values = vec![0f64; entities * (dim + 1)];
        let mut blocks = Vec::new();
        let mut rest = values.as_mut_slice();
        for first in (0..dim + 1).step_by(BLOCK) {
            let width = BLOCK.min(dim + 1 - first);
            let (block, tail) = rest.split_at_mut(entities * width);
            blocks.push((first, width, block));
            rest = tail;
        }
        let excess: Vec<f64> = fresh.iter().map(|f| REPAIR_SHARE * f).collect();
        let outcomes: Vec<Option<BlockOutcome>> = blocks
            .into_par_iter()
            .map(|(first, width, y)| {
                let columns = first..first + width;
                ctx.block(first, width, y, &eps[columns.clone()], &excess[columns])
            })
            .collect();
        let outcomes: Vec<BlockOutcome> =
            outcomes.into_iter().collect::<Option<_>>().ok_or("the push went past its budget")?;
        // The bound. With r = c' + M'y − y, y* − y = (I − M')⁻¹ r. Every row the repair
        // touched has its residual computed exactly, each at most ε·deg(u) but for an
        // excess (R, in L1, rounding included); every other row's is the old one (its
        // equation, degree and every value it reads are): at most the old ε·deg(u) where
        // a repair left it, and all the rest together at most the old L1 bound U = ρ·Δ.
        // So r splits into a part under max(ε, ε_old)·deg per node (node_error) and a part
        // of at most R + U in L1, whose error is ‖·‖₁ ≤ (R + U) / (1 − ρ'): the response
        // bounds it by Δ'·ρ' / (1 − ρ'), so Δ' = (R + U) / ρ', which keeps the L1 part
        // under ρ'·Δ' for the next repair, as after a solve.
        let mut change = Vec::with_capacity(dim + 1);
        for (first, o) in (0..dim + 1).step_by(BLOCK).zip(&outcomes) {
            let width = BLOCK.min(dim + 1 - first);
            for c in 0..width {
                change.push((o.residual[c] + inherited[first + c]) / rho * (1.0 + 1e-9));
            }
        }
        let bound_ratio = change.iter().zip(&mass).map(|(ch, m)| ch / (PRECOMPUTE_TOLERANCE * m)).fold(0.0, f64::max);
        let node_error: Vec<f64> = match refreshed {
            true => eps.clone(),
            false => self.node_error.iter().zip(&eps).map(|(old, e)| old.max(*e)).collect(),
        };
        let node_ratio = node_error.iter().zip(&eps).map(|(n, e)| n / e.max(f64::MIN_POSITIVE)).fold(0.0, f64::max);
        let stats = RepairStats {
            entities,
            changed: changed.len(),
            refreshed,
            touched: outcomes.iter().map(|o| o.touched).max().unwrap_or(0),
            pushes: outcomes.iter().map(|o| o.pushes).sum(),
            steps: outcomes.iter().map(|o| o.steps).sum(),
            solve_steps: self.iterations * graph.entries() * outcomes.len(),
            bound_ratio,
            tolerance,
            node_ratio,
            compare_secs,
            secs: start.elapsed().as_secs_f64(),
        };
        let solved = Solved {
            entities,
            passages,
            dim,
            damping: d,
            // The solve's iterations, which the next repair's budget is measured by.
            iterations: self.iterations,
            secs: stats.secs,
            change,
            node_error,
            values,
            pending: Default::default(),
        };
        Ok((solved, stats))
    }
}

impl Solved {
    /// This solution's values moved to `graph`'s entities by `origins`, not pushed: the
    /// exact residuals of the rows whose equation the edit changed (and of those this
    /// solution holds pending, if it is deferred itself) are kept for each query to push
    /// its own combination of the columns ([`super::solve::Pending`]), every other row
    /// keeping the residual, and the bound, it had. The work of comparing the two graphs
    /// and of the changed rows' residuals, not of a push over every column: what a server
    /// serves an edited graph with while the walk is solved again behind it. The
    /// rankings are proven against the new graph's full walk as a solved walk's are.
    /// `Err` as for [`Solved::repair`].
    pub fn defer(
        &self,
        old: &PprGraph,
        graph: &PprGraph,
        entities: usize,
        origins: &Origins,
        vectors: &Matrix,
    ) -> Result<(Solved, RepairStats), String> {
        self.defer_on(old, graph, &Steps::new(graph), entities, origins, vectors)
    }

    /// [`Solved::defer`] with `graph`'s steps made already.
    pub(super) fn defer_on(
        &self,
        old: &PprGraph,
        graph: &PprGraph,
        steps: &Steps,
        entities: usize,
        origins: &Origins,
        vectors: &Matrix,
    ) -> Result<(Solved, RepairStats), String> {
        let start = Instant::now();
        let (d, dim) = (self.damping, self.dim);
        let passages = self.fits(old, graph, entities, origins, vectors)?;
        let old_steps = Steps::new(old);
        let (walk, old_walk) = entity_walks((graph, steps, entities), (old, &old_steps, self.entities), d)?;
        let rho = walk.contraction;
        let mut rows = changed_rows(old, graph, self.entities, entities, origins);
        // The rows this solution holds pending keep their residual (exact, not bounded
        // by the L1 part): computed again where they still are.
        let mut now_of = vec![u32::MAX; self.entities];
        for (i, o) in origins.entities.iter().enumerate() {
            if let Some(o) = o {
                now_of[*o as usize] = i as u32;
            }
        }
        rows.extend(self.pending.entities.iter().map(|&o| now_of[o as usize]).filter(|&i| i != u32::MAX));
        rows.sort_unstable();
        rows.dedup();
        let compare_secs = start.elapsed().as_secs_f64();
        let over = AtomicBool::new(false);
        let ctx = Context { graph, walk: &walk, vectors, origins, old: self, rows: &rows, budget: 0, over: &over };
        let mut values = vec![0f64; entities * (dim + 1)];
        let mut pending = vec![0f64; rows.len() * (dim + 1)];
        let mut rounding = vec![0f64; dim + 1];
        let mut blocks = Vec::new();
        let mut rest = values.as_mut_slice();
        for first in (0..dim + 1).step_by(BLOCK) {
            let width = BLOCK.min(dim + 1 - first);
            let (y, tail) = rest.split_at_mut(entities * width);
            blocks.push((first, width, y));
            rest = tail;
        }
        let residuals: Vec<(usize, usize, Vec<f64>, [f64; BLOCK])> = blocks
            .into_par_iter()
            .map(|(first, width, y)| {
                self.moved(origins.entities, first, width, y);
                let (exact, round) = ctx.residuals(first, width, y, &rows);
                (first, width, exact, round)
            })
            .collect();
        for (first, width, exact, round) in residuals {
            for (k, r) in exact.chunks_exact(width).enumerate() {
                pending[k * (dim + 1) + first..][..width].copy_from_slice(r);
            }
            rounding[first..first + width].copy_from_slice(&round[..width]);
        }
        // An entity's degree change moves every row two steps from it a little: most
        // changed rows' residuals are small. Those under the per-node tolerance
        // `ε_c · deg(u)` ([`DEFER_TOLERANCE`]) join the per-node part of the bound; the
        // smallest of the others go to the L1 part, up to a share of what a fresh solve
        // leaves; the rest stay pending, for the queries to push.
        let mass = column_mass(vectors, passages, dim);
        let volume: f64 = steps.degrees.iter().sum();
        let eps: Vec<f64> = mass.iter().map(|m| DEFER_TOLERANCE * m / volume.max(f64::MIN_POSITIVE)).collect();
        let under = |k: usize| {
            let degree = steps.degrees[rows[k] as usize];
            let r = &pending[k * (dim + 1)..][..dim + 1];
            r.iter().zip(&eps).all(|(x, e)| x.abs() <= e * degree)
        };
        let room: Vec<f64> = mass.iter().map(|m| REPAIR_SHARE * rho * PRECOMPUTE_TOLERANCE * m).collect();
        let share = |k: usize| {
            let r = &pending[k * (dim + 1)..][..dim + 1];
            r.iter().zip(&room).map(|(x, m)| x.abs() / m).fold(0.0, f64::max)
        };
        let mut order: Vec<(f64, usize)> = (0..rows.len()).map(|k| (share(k), k)).collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut folded = vec![0f64; dim + 1];
        let mut kept: Vec<bool> = (0..rows.len()).map(|k| !under(k)).collect();
        let per_node = kept.iter().any(|k| !k);
        let over: Vec<usize> = order.iter().map(|&(_, k)| k).filter(|&k| kept[k]).collect();
        for k in over {
            let r = &pending[k * (dim + 1)..][..dim + 1];
            if r.iter().zip(&folded).zip(&room).any(|((x, f), m)| f + x.abs() > *m) {
                break;
            }
            folded.iter_mut().zip(r).for_each(|(f, x)| *f += x.abs());
            kept[k] = false;
        }
        let (mut pending_rows, mut pending_values) = (Vec::new(), Vec::new());
        for (k, &i) in rows.iter().enumerate() {
            if kept[k] {
                pending_rows.push(i);
                pending_values.extend_from_slice(&pending[k * (dim + 1)..][..dim + 1]);
            }
        }
        // The L1 part as a repair leaves it (every row not pending keeps its residual):
        // the old bound `ρ·Δ`, plus the rows folded into it and the pending residuals'
        // rounding.
        let change: Vec<f64> = self
            .change
            .iter()
            .zip(rounding.iter().zip(&folded))
            .map(|(ch, (r, f))| (old_walk.contraction * ch + r + f) / rho * (1.0 + 1e-9))
            .collect();
        let stats = RepairStats {
            entities,
            changed: pending_rows.len(),
            touched: rows.len(),
            solve_steps: self.iterations * graph.entries() * (dim + 1).div_ceil(BLOCK),
            bound_ratio: 0.0,
            node_ratio: 1.0,
            compare_secs,
            secs: start.elapsed().as_secs_f64(),
            ..Default::default()
        };
        let solved = Solved {
            entities,
            passages,
            dim,
            damping: d,
            iterations: self.iterations,
            secs: stats.secs,
            change,
            node_error: match per_node {
                true => self.node_error.iter().zip(&eps).map(|(old, e)| old.max(*e)).collect(),
                false => self.node_error.clone(),
            },
            values,
            pending: super::solve::Pending { entities: pending_rows, values: pending_values },
        };
        Ok((solved, stats))
    }

    /// Whether this solution, of `old`'s walk, can be brought to `graph`'s (`entities`
    /// entity nodes, then the passages of `vectors`) through `origins`; its passages.
    fn fits(
        &self,
        old: &PprGraph,
        graph: &PprGraph,
        entities: usize,
        origins: &Origins,
        vectors: &Matrix,
    ) -> Result<usize, String> {
        let dim = self.dim;
        let passages = graph.nodes().checked_sub(entities).ok_or("fewer nodes than entities")?;
        if old.nodes() != self.entities + self.passages || self.values.len() != self.entities * (dim + 1) {
            return Err("the stored walk is not the old graph's".into());
        }
        if vectors.dim() != dim || vectors.rows() < passages {
            return Err(format!(
                "{} vectors of dimension {} for {passages} passages of dimension {dim}",
                vectors.rows(),
                vectors.dim()
            ));
        }
        if self.node_error.len() != dim + 1 || self.change.len() != dim + 1 {
            return Err("the stored walk's bounds are not one per column".into());
        }
        if origins.entities.len() != entities || origins.passages.len() != passages {
            return Err("origins for other counts of entities or passages".into());
        }
        if !one_to_one(origins.entities, self.entities) || !one_to_one(origins.passages, self.passages) {
            return Err("two nodes with one origin".into());
        }
        Ok(passages)
    }

    /// The walk of `graph` solved as [`Solved::solve`] solves it (the same stopping rule,
    /// so bounds of the same kind), each block of columns iterated from this solution's
    /// values moved to the new entities by `origins` (0 for new ones) instead of from the
    /// seeds: after an edit the first iterate is close, and fewer iterations reach the
    /// tolerance. Every row is iterated, so it holds whatever the edit touched.
    pub fn solve_warm(
        &self,
        graph: &PprGraph,
        entities: usize,
        origins: &[Option<u32>],
        vectors: &Matrix,
    ) -> Option<Solved> {
        let fits = vectors.dim() == self.dim
            && origins.len() == entities
            && self.values.len() == self.entities * (self.dim + 1)
            && origins.iter().flatten().all(|&o| (o as usize) < self.entities);
        if !fits {
            return None;
        }
        let start = |first: usize, width: usize| {
            let mut y = vec![0f64; entities * width];
            self.moved(origins, first, width, &mut y);
            y
        };
        Self::solve_from(graph, entities, vectors, self.damping, &|| false, Some(&start))
    }

    /// Columns `first..first + width` of the values, moved to the entities of `origins`
    /// (into `y`, entity-major; entities without an origin are left as they are).
    fn moved(&self, origins: &[Option<u32>], first: usize, width: usize, y: &mut [f64]) {
        let old = &self.values[self.entities * first..][..self.entities * width];
        for (i, o) in origins.iter().enumerate() {
            if let Some(o) = o {
                y[i * width..][..width].copy_from_slice(&old[*o as usize * width..][..width]);
            }
        }
    }
}

/// The entity walks of the new graph and the old one (each with its steps and entity
/// count); `Err` where the split does not cover one, or the new one does not contract.
fn entity_walks<'a>(
    (graph, steps, entities): (&PprGraph, &'a Steps, usize),
    (old, old_steps, old_entities): (&PprGraph, &'a Steps, usize),
    d: f64,
) -> Result<(EntityWalk<'a>, EntityWalk<'a>), String> {
    let walk = EntityWalk::new(graph, steps, entities, d).ok_or("the new graph is not one the split covers")?;
    let old_walk =
        EntityWalk::new(old, old_steps, old_entities, d).ok_or("the old graph is not one the split covers")?;
    if walk.contraction <= 0.0 || walk.contraction.is_nan() {
        return Err("the new walk has no steps between entities".into());
    }
    Ok((walk, old_walk))
}

/// Whether no two entries name the same node of `0..count`.
fn one_to_one(origins: &[Option<u32>], count: usize) -> bool {
    let mut seen = vec![false; count];
    origins.iter().flatten().all(|&o| (o as usize) < count && !std::mem::replace(&mut seen[o as usize], true))
}

/// The new entities whose equation is not their origin's. Row `i` of `M` and `c` reads
/// node `i`'s incoming steps and, for each passage `p` among them, `p`'s incoming steps
/// and vector: the row is the old one when those steps are the origin's (the same
/// sources, by origin, with the same probabilities) and every such passage has an origin
/// (so the same vector).
fn changed_rows(old: &PprGraph, graph: &PprGraph, old_entities: usize, entities: usize, origins: &Origins) -> Vec<u32> {
    let origin = |u: usize| -> Option<u32> {
        match u.checked_sub(entities) {
            None => origins.entities[u],
            Some(p) => origins.passages[p].map(|o| old_entities as u32 + o),
        }
    };
    let same_steps = |u: usize| -> bool {
        let Some(o) = origin(u) else { return false };
        let mut new = Vec::new();
        for (i, p) in graph.row(u).filter(|s| s.1 > 0.0) {
            match origin(i as usize) {
                Some(oi) => new.push((oi, p.to_bits())),
                None => return false,
            }
        }
        let mut was: Vec<(u32, u32)> =
            old.row(o as usize).filter(|s| s.1 > 0.0).map(|(i, p)| (i, p.to_bits())).collect();
        new.sort_unstable();
        was.sort_unstable();
        // The same steps in, and (undirected) the same degree: a per-node bound
        // `ε · deg(u)` left by an earlier repair still holds for the row.
        new == was && graph.degree(u) == old.degree(o as usize)
    };
    let same: Vec<bool> = (0..graph.nodes()).into_par_iter().map(same_steps).collect();
    (0..entities)
        .into_par_iter()
        .filter(|&i| !same[i] || graph.row(i).any(|(s, p)| p > 0.0 && s as usize >= entities && !same[s as usize]))
        .map(|i| i as u32)
        .collect()
}

/// Each column's reset mass, as the solve measures its tolerance by.
fn column_mass(vectors: &Matrix, passages: usize, dim: usize) -> Vec<f64> {
    let mut mass = (0..passages)
        .into_par_iter()
        .with_min_len(1024)
        .fold(
            || vec![0f64; dim + 1],
            |mut sum, p| {
                sum.iter_mut().zip(vectors.row(p as PassageIdx)).for_each(|(s, &v)| *s += (v as f64).abs());
                sum
            },
        )
        .reduce(|| vec![0f64; dim + 1], |a, b| a.iter().zip(&b).map(|(x, y)| x + y).collect());
    mass[dim] = passages as f64;
    mass.iter_mut().for_each(|m| *m = m.max(f64::MIN_POSITIVE));
    mass
}

impl Context<'_> {
    /// Repairs columns `first..first + width` into `y` (entity-major), every touched
    /// row's residual under `eps · deg` but for an L1 excess of at most `excess` (else
    /// pushed again, [`ROUNDS`] times at most); `None` past the budget.
    fn block(&self, first: usize, width: usize, y: &mut [f64], eps: &[f64], excess: &[f64]) -> Option<BlockOutcome> {
        let e = self.walk.entities;
        self.old.moved(self.origins.entities, first, width, y);
        let mut per_node = [0f64; BLOCK];
        per_node[..width].copy_from_slice(eps);
        // A row the push reaches that it did not start from holds its old residual (after
        // a repair, up to the old ε·deg): taken from the values before the push, so that
        // the push's running sums stay the residuals.
        // Each passage's value before the push is computed once (for the first row that
        // reads it), not once per row.
        let before = y.to_vec();
        let passage_values = std::cell::RefCell::new((vec![false; self.walk.passages], vec![0f64; 0]));
        let baseline = |i: usize, out: &mut [f64]| {
            let (e, d) = (self.walk.entities, self.walk.damping);
            let mut cache = passage_values.borrow_mut();
            let (done, value) = &mut *cache;
            if value.is_empty() {
                value.resize(self.walk.passages * width, 0.0);
            }
            for c in 0..width {
                out[c] = -before[i * width + c];
            }
            for (s, prob) in self.graph.row(i).filter(|s| s.1 > 0.0) {
                let f = d * prob as f64;
                let s = s as usize;
                if s < e {
                    for c in 0..width {
                        out[c] += f * before[s * width + c];
                    }
                    continue;
                }
                let p = s - e;
                let v = &mut value[p * width..][..width];
                if !std::mem::replace(&mut done[p], true) {
                    reset_columns(self.vectors, first, p, v);
                    v.iter_mut().for_each(|x| *x *= 1.0 - d);
                    for &(j, prob) in self.walk.into_passage.row(p) {
                        for c in 0..width {
                            v[c] += d * prob as f64 * before[j as usize * width + c];
                        }
                    }
                }
                for c in 0..width {
                    out[c] += f * v[c];
                }
            }
        };
        let mut push = BlockPush {
            baseline: &baseline,
            walk: self.walk,
            width,
            y,
            residual: vec![0f64; self.graph.nodes() * width],
            touched: Vec::new(),
            seen: vec![false; e],
            pending: Vec::new(),
            held: vec![false; self.walk.passages],
            queued: vec![false; self.graph.nodes()],
            queue: Default::default(),
            eps: per_node,
            pushes: 0,
            steps: 0,
            budget: self.budget,
            over: self.over,
        };
        let (exact, _) = self.residuals(first, width, push.y, self.rows);
        for (&i, r) in self.rows.iter().zip(exact.chunks_exact(width)) {
            push.set(i as usize, r);
        }
        let degrees = &self.walk.steps.degrees;
        let mut rounds = 0;
        loop {
            push.run()?;
            let rows = push.touched.clone();
            let (exact, rounding) = self.residuals(first, width, push.y, &rows);
            // What is over ε·deg on a row goes to the L1 part, with the rounding.
            let mut total = rounding;
            for (&i, r) in rows.iter().zip(exact.chunks_exact(width)) {
                let degree = degrees[i as usize];
                for c in 0..width {
                    total[c] += (r[c].abs() - per_node[c] * degree).max(0.0);
                }
            }
            rounds += 1;
            let over = total.iter().zip(&rounding).zip(excess).any(|((t, r), x)| t - r > *x);
            if rounds == ROUNDS || !over {
                let mut residual = [0f64; BLOCK];
                residual[..width].copy_from_slice(&total[..width]);
                return Some(BlockOutcome {
                    residual,
                    touched: push.touched.len(),
                    pushes: push.pushes,
                    steps: push.steps,
                });
            }
            // Pushed again from the exact residuals, which hold the old residual of the
            // unchanged rows the push reached (still within its bound, counted twice).
            for (&i, r) in rows.iter().zip(exact.chunks_exact(width)) {
                push.set(i as usize, r);
            }
        }
    }

    /// `c' + M'y − y` on `rows` (row-major, `width` columns), computed from the graph, and
    /// per column a bound on its rounding: a sum of `n` products is within
    /// `n · ε · Σ|terms|` of its value.
    fn residuals(&self, first: usize, width: usize, y: &[f64], rows: &[u32]) -> (Vec<f64>, [f64; BLOCK]) {
        let (e, d) = (self.walk.entities, self.walk.damping);
        // Each passage's value `(1 − d)·v_p + d·(A y)_p` and its terms' absolute sum, once,
        // in the order first read (`slot`): as many as the rows read, not the corpus's.
        let mut slot = vec![u32::MAX; self.walk.passages];
        let mut slots = 0usize;
        let (mut value, mut terms) = (Vec::new(), Vec::new());
        let mut longest = 0;
        for &i in rows {
            for (s, _) in self.graph.row(i as usize).filter(|s| s.1 > 0.0 && s.0 as usize >= e) {
                let p = s as usize - e;
                if slot[p] != u32::MAX {
                    continue;
                }
                let at = slots;
                slot[p] = at as u32;
                slots += 1;
                value.resize((at + 1) * width, 0.0);
                terms.resize((at + 1) * width, 0.0);
                let (value, terms) = (&mut value[at * width..][..width], &mut terms[at * width..][..width]);
                reset_columns(self.vectors, first, p, value);
                for (v, t) in value.iter_mut().zip(terms.iter_mut()) {
                    *v *= 1.0 - d;
                    *t = v.abs();
                }
                let steps = self.walk.into_passage.row(p);
                longest = longest.max(steps.len());
                for &(j, prob) in steps {
                    for c in 0..width {
                        let term = d * prob as f64 * y[j as usize * width + c];
                        value[c] += term;
                        terms[c] += term.abs();
                    }
                }
            }
        }
        let mut out = vec![0f64; rows.len() * width];
        let mut rounding = [0f64; BLOCK];
        for (&i, r) in rows.iter().zip(out.chunks_exact_mut(width)) {
            let i = i as usize;
            let mut abs = [0f64; BLOCK];
            for c in 0..width {
                r[c] = -y[i * width + c];
                abs[c] = r[c].abs();
            }
            let mut n = 1;
            for (s, prob) in self.graph.row(i).filter(|s| s.1 > 0.0) {
                let f = d * prob as f64;
                n += 1;
                if (s as usize) < e {
                    for c in 0..width {
                        let term = f * y[s as usize * width + c];
                        r[c] += term;
                        abs[c] += term.abs();
                    }
                } else {
                    let at = slot[s as usize - e] as usize;
                    for c in 0..width {
                        r[c] += f * value[at * width + c];
                        abs[c] += f * terms[at * width + c];
                    }
                }
            }
            let n = (n + longest + 3) as f64;
            for c in 0..width {
                rounding[c] += n * f64::EPSILON * abs[c];
            }
        }
        (out, rounding)
    }
}

/// The push on one block of columns. Residuals live on every node: an entity's is its
/// equation's; a passage's is mass on its way to its entities, held so that many pushes
/// into one passage reach its entities in one step (the equation's residual is the
/// entities' plus `d·B` times the passages'). Pushing entity `u` moves its residual into
/// `y_u` and `d·P(u → v)` of it to each neighbour `v`; pushing a passage moves
/// `d·P(p → e)` of its residual to each entity `e`. It stops once every entity's residual
/// is at most `eps · deg(u)` in every column and no passage holds any: each push of `u`
/// takes at least `(1 − d)·eps·deg(u)` off the residual's L1 norm, so the work is the
/// edit's residual over `eps`, wherever the graph is large.
struct BlockPush<'a> {
    walk: &'a EntityWalk<'a>,
    /// An entity's residual before the push (its row and what it reads unchanged).
    baseline: &'a dyn Fn(usize, &mut [f64]),
    width: usize,
    y: &'a mut [f64],
    /// Node-major, `width` columns.
    residual: Vec<f64>,
    /// Entities whose residual was ever set, once each.
    touched: Vec<u32>,
    seen: Vec<bool>,
    /// Passages holding residual (some may have pushed it since).
    pending: Vec<u32>,
    queued: Vec<bool>,
    queue: std::collections::VecDeque<u32>,
    /// Whether a passage is in `pending`.
    held: Vec<bool>,
    /// Per column, `ε`: an entity's residual is left once at most `ε · deg(u)`.
    eps: [f64; BLOCK],
    pushes: usize,
    steps: usize,
    budget: usize,
    over: &'a AtomicBool,
}

impl BlockPush<'_> {
    /// Sets entity `i`'s residual.
    fn set(&mut self, i: usize, r: &[f64]) {
        self.residual[i * self.width..][..self.width].copy_from_slice(r);
        if !std::mem::replace(&mut self.seen[i], true) {
            self.touched.push(i as u32);
        }
    }

    /// Node `u`'s residual against what the push leaves on it, `ε · deg(u)`: the largest
    /// column's share (over 1: to be pushed); a passage's counts at `d`, what of it
    /// reaches the entities, against its own degree.
    fn weight(&self, u: usize) -> f64 {
        let r = &self.residual[u * self.width..][..self.width];
        let degree = self.walk.steps.degrees[u];
        // (A column whose ε is 0 has no reset mass: its residual is 0 too.)
        let share = |(x, eps): (&f64, &f64)| if *x == 0.0 { 0.0 } else { x.abs() / (eps * degree) };
        let w = r.iter().zip(&self.eps).map(share).fold(0.0, f64::max);
        if u < self.walk.entities {
            w
        } else {
            self.walk.damping * w
        }
    }

    /// Pushes in rounds, each to a threshold a quarter of the last down to 1 (the largest
    /// residuals first, as Gauss–Southwell), passing every passage's residual on at the
    /// end of each, until every entity's weight is at most 1; `None` past the budget (in
    /// this block or another).
    fn run(&mut self) -> Option<()> {
        let e = self.walk.entities;
        let largest = self.touched.iter().map(|&i| self.weight(i as usize)).fold(0.0, f64::max);
        let mut threshold = (largest / 4.0).max(1.0);
        loop {
            for k in 0..self.touched.len() {
                self.offer(self.touched[k] as usize, threshold);
            }
            while let Some(u) = self.queue.pop_front() {
                let u = u as usize;
                self.queued[u] = false;
                if self.weight(u) > threshold {
                    self.push(u, threshold);
                }
                if self.steps > self.budget || self.over.load(Ordering::Relaxed) {
                    self.over.store(true, Ordering::Relaxed);
                    return None;
                }
            }
            for p in std::mem::take(&mut self.pending) {
                self.held[p as usize] = false;
                self.push(e + p as usize, f64::INFINITY);
            }
            let largest = self.touched.iter().map(|&i| self.weight(i as usize)).fold(0.0, f64::max);
            if largest <= 1.0 {
                return Some(());
            }
            threshold = (threshold.min(largest) / 4.0).max(1.0);
        }
    }

    /// Queues node `u` if its weight is over `threshold`.
    fn offer(&mut self, u: usize, threshold: f64) {
        if !self.queued[u] && self.weight(u) > threshold {
            self.queued[u] = true;
            self.queue.push_back(u as u32);
        }
    }

    /// Pushes node `u`'s residual, queueing the neighbours it puts over `threshold`.
    fn push(&mut self, u: usize, threshold: f64) {
        let (w, d, e) = (self.width, self.walk.damping, self.walk.entities);
        let mut r = [0f64; BLOCK];
        r[..w].copy_from_slice(&self.residual[u * w..][..w]);
        if r[..w].iter().all(|&x| x == 0.0) {
            return;
        }
        self.residual[u * w..][..w].fill(0.0);
        if u < e {
            for (y, x) in self.y[u * w..][..w].iter_mut().zip(&r) {
                *y += x;
            }
        }
        let steps = self.walk.steps.from(u);
        self.pushes += 1;
        self.steps += steps.len();
        for &(v, prob) in steps {
            let v = v as usize;
            let f = d * prob as f64;
            for (x, add) in self.residual[v * w..][..w].iter_mut().zip(&r) {
                *x += f * add;
            }
            if v < e {
                if !std::mem::replace(&mut self.seen[v], true) {
                    self.touched.push(v as u32);
                    let mut old = [0f64; BLOCK];
                    (self.baseline)(v, &mut old[..w]);
                    for (x, o) in self.residual[v * w..][..w].iter_mut().zip(&old) {
                        *x += o;
                    }
                }
            } else if !std::mem::replace(&mut self.held[v - e], true) {
                // Passed on at the end of the round, unless a push from the queue has
                // (it then pushes nothing).
                self.pending.push((v - e) as u32);
            }
            self.offer(v, threshold);
        }
    }
}
