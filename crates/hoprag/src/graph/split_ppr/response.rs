//! The passage seeds' walk kept for queries ([`PassageResponse`]), in one of two forms:
//! the passages' rows of `S V`, or the entities' rows and a gather.

use rayon::prelude::*;

use super::dot_f64;
use super::push::Steps;
use super::solve::{reset_columns, Csr, EntityWalk, Pending, Solved, BLOCK};
use crate::graph::ppr::PprGraph;
use crate::index::{Matrix, Screen};

/// `κ`: with every entity's residual at most `ε · deg(u)` (and none on the passages),
/// every node `v` of the full walk is within `ε · κ · deg(v)` of the fixed point. The
/// walk's error is `(I − d·Pᵀ)⁻¹` applied to the residual, whose entries from `u` to
/// `v` are `Σ_k d^k (P^k)_uv`; on an undirected graph `deg(u)·(P^k)_uv =
/// deg(v)·(P^k)_vu` and `Σ_u (P^k)_vu ≤ 1`, so the error at `v` is at most
/// `ε · deg(v) / (1 − d)`. The stored probabilities are `P` rounded to f32 (relative
/// 2^-24, each at most `(1 + η)·P`): `κ = 1 / (1 − d·(1 + η))`, `η = 1e-6`.
pub(super) fn node_factor(d: f64) -> f64 {
    1.0 / (1.0 - d * (1.0 + 1e-6)) * (1.0 + 1e-9)
}

/// `S` applied to the passage seeds, on the passage nodes.
pub struct PassageResponse {
    pub(super) entities: usize,
    pub(super) passages: usize,
    pub(super) dim: usize,
    pub(super) damping: f64,
    pub(super) half: Half,
    /// The passage vectors' int8 copy (every row of the matrix the response was computed
    /// from): the dense ranking and the range of the dense scores, exactly, without
    /// reading the f32 vectors.
    pub(super) passage_screen: Screen,
    /// `Σ v_p` over the graph's passages, and over its dangling ones: the sums of the
    /// passage seeds, by linearity, from the range of the dense scores alone.
    pub(super) vector_sum: Vec<f64>,
    pub(super) dangling_sum: Vec<f64>,
    /// `(S 1)_p`.
    pub(super) constant: Vec<f64>,
    /// Per column of `S V`, a bound on any passage entry's convergence error.
    pub(super) column_error: Vec<f64>,
    pub(super) constant_error: f64,
    /// Per column of `S V`, and for `S 1`, a bound on a passage entry's error from a
    /// repaired walk's per-node residuals, per unit of the passage's walk degree (0 after
    /// a solve): `ε · κ` ([`node_factor`]).
    pub(super) degree_error: Vec<f64>,
    pub(super) degree_constant_error: f64,
    /// Passages with no entity: dangling nodes of the walk.
    pub(super) dangling: Vec<u32>,
    /// The walk's steps by source node, for the push.
    pub(super) steps: Steps,
    /// The passages by their walk degree, highest first (ties by index): without passage
    /// seeds, the bound of every passage the push has not reached is its degree's.
    pub(super) by_degree: Vec<u32>,
    pub(super) stats: ResponseStats,
    /// A deferred walk's residuals, which each query pushes ([`Solved::defer`]).
    pub(super) pending: Pending,
}

/// How the passage rows of `S V` are kept.
pub(super) enum Half {
    /// Row `p` is `(S V)_p`, stored f32 (bounded below), with its int8 copy (a query
    /// scores every row within a proven interval in a quarter of the memory traffic, and
    /// only the rows that compete for the top in f64) and each row's L2 norm (for the f32
    /// storage bound). Kept where passages are no more than entities (the real subsets):
    /// a query then reads fewer rows than [`Half::Entities`] would.
    Rows { response: Matrix, screen: Box<Screen>, norms: Vec<f64> },
    /// Only the entity rows `(S V)_e`, f32: a passage node's only neighbours are
    /// entities, so its row is `(1 − d)·v_p + d·Σ_e P(e → p)·(S V)_e`, and a query
    /// takes `(S V)_e · q` for every entity, then one gather over the passage rows of
    /// the walk. `norms[p]` is `Σ_e P(e → p)·|(S V)_e|` (the f32 storage bound). Kept
    /// where passages outnumber entities: at 1,000,000 passages and 49,375 entities,
    /// 76 MB instead of 1.9 GB of rows and codes.
    Entities { response: Matrix, norms: Vec<f64>, gather: Option<PassageGather> },
}

/// `Σ_e P(e → p)·z_e` for every passage `p`, reading 4 bytes a step. A passage's steps
/// come from entities only, and an entity's steps to passages share one probability
/// (each is a weight-1 edge over the entity's degree), so that probability moves onto
/// the entity's value (one product per entity) and the pass reads the entity's index
/// alone: at a million passages 63 MB, where the walk's rows hold 125 MB of index and
/// probability, and a query's gather took 13 of its 50 ms. `None` (the walk's own
/// gather serves) for a graph whose steps into passages are not so.
pub(super) struct PassageGather {
    /// `P(e → p)` of entity `e`'s steps to passages (f32, as the walk stores it).
    pub(super) prob: Vec<f32>,
    /// Passage `p`'s entities are `sources[offsets[p]..offsets[p + 1]]`.
    pub(super) offsets: Vec<u32>,
    pub(super) sources: Vec<u32>,
}

/// Passages a task of the gather sums.
pub(super) const GATHER_ROWS: usize = 4096;

impl PassageGather {
    pub(super) fn new(into_passage: &Csr, entities: usize) -> Option<PassageGather> {
        let mut prob = vec![f32::NAN; entities];
        let mut offsets = Vec::with_capacity(into_passage.offsets.len());
        let mut sources = Vec::with_capacity(into_passage.entries.len());
        offsets.push(0);
        for p in 0..into_passage.offsets.len() - 1 {
            for &(e, step) in into_passage.row(p) {
                let known = &mut prob[e as usize];
                if known.is_nan() {
                    *known = step;
                } else if known.to_bits() != step.to_bits() {
                    return None;
                }
                sources.push(e);
            }
            offsets.push(u32::try_from(sources.len()).ok()?);
        }
        Some(PassageGather { prob, offsets, sources })
    }

    /// Every passage's `Σ_e P(e → p)·z_e` (`z` by entity).
    pub(super) fn gather(&self, z: &[f64]) -> Vec<f64> {
        let y: Vec<f64> = z.iter().zip(&self.prob).map(|(&z, &p)| z * p as f64).collect();
        let mut out = vec![0f64; self.offsets.len() - 1];
        out.par_chunks_mut(GATHER_ROWS).enumerate().for_each(|(chunk, out)| {
            let first = chunk * GATHER_ROWS;
            for (i, o) in out.iter_mut().enumerate() {
                let row = &self.sources[self.offsets[first + i] as usize..self.offsets[first + i + 1] as usize];
                // Four sums side by side: a row's additions are otherwise one dependent chain.
                let mut sums = [0f64; 4];
                let mut quads = row.chunks_exact(4);
                for q in &mut quads {
                    for (s, &e) in sums.iter_mut().zip(q) {
                        *s += y[e as usize];
                    }
                }
                for (s, &e) in sums.iter_mut().zip(quads.remainder()) {
                    *s += y[e as usize];
                }
                *o = (sums[0] + sums[1]) + (sums[2] + sums[3]);
            }
        });
        out
    }

    pub(super) fn bytes(&self) -> usize {
        4 * (self.prob.len() + self.offsets.len() + self.sources.len())
    }
}

/// What the precomputation cost.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ResponseStats {
    /// `rows` or `entities` (see [`PassageResponse`]'s forms).
    pub form: String,
    /// Iterations of the slowest block of columns.
    pub iterations: usize,
    /// The walk's contraction per iteration on the entity nodes (at most the damping).
    pub contraction: f64,
    /// Seconds this process spent: assembling the response, and solving the walk where
    /// it was not stored.
    pub secs: f64,
    /// Seconds the solve took (in this process, or when the graph was attached).
    #[serde(default)]
    pub solve_secs: f64,
    /// Whether the solve came stored with the graph.
    #[serde(default)]
    pub stored: bool,
    /// Bytes of the response kept for queries (rows or entity rows, codes, norms,
    /// constants), the push's steps excluded.
    pub bytes: usize,
}

/// The form a response is kept in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Whichever reads less per query: rows when passages are no more than entities.
    Auto,
    Rows,
    Entities,
}

impl PassageResponse {
    /// Walks the passage vectors (the first `passages` rows of `vectors`, passage `p` at
    /// node `entities + p`) through the graph; `None` when the graph is not one of
    /// passages linked to entities only, or the walk does not converge.
    pub fn compute(graph: &PprGraph, entities: usize, vectors: &Matrix, damping: f64) -> Option<PassageResponse> {
        Self::compute_as(graph, entities, vectors, damping, Form::Auto)
    }

    /// [`PassageResponse::compute`], kept in the given form.
    pub fn compute_as(
        graph: &PprGraph,
        entities: usize,
        vectors: &Matrix,
        damping: f64,
        form: Form,
    ) -> Option<PassageResponse> {
        let solved = Solved::solve(graph, entities, vectors, damping)?;
        let mut response = Self::from_solved(graph, entities, vectors, &solved, form)?;
        response.stats.secs += solved.secs;
        response.stats.stored = false;
        Some(response)
    }

    /// The response from the entities' values an earlier [`Solved::solve`] found for the
    /// same graph, passage vectors and damping (stored with the graph): equal to
    /// [`PassageResponse::compute_as`]'s, at the cost of a pass over the passages.
    /// `None` when `solved` is not this graph's (other counts or dimension) or the graph
    /// is not one the split covers.
    pub fn from_solved(
        graph: &PprGraph,
        entities: usize,
        vectors: &Matrix,
        solved: &Solved,
        form: Form,
    ) -> Option<PassageResponse> {
        Self::from_solved_on(graph, Steps::new(graph), entities, vectors, solved, form)
    }

    /// The walk of `graph` deferred from `old`'s solution on `old_graph`
    /// ([`Solved::defer`]), and its response: the new graph's steps built once for both.
    #[allow(clippy::too_many_arguments)]
    pub fn deferred(
        old: &Solved,
        old_graph: &PprGraph,
        graph: &PprGraph,
        entities: usize,
        origins: &super::Origins,
        vectors: &Matrix,
        form: Form,
    ) -> Result<(PassageResponse, Solved, super::RepairStats), String> {
        let steps = Steps::new(graph);
        let (solved, stats) = old.defer_on(old_graph, graph, &steps, entities, origins, vectors)?;
        let response = Self::from_solved_on(graph, steps, entities, vectors, &solved, form)
            .ok_or("the deferred walk gives no response")?;
        Ok((response, solved, stats))
    }

    /// [`PassageResponse::from_solved`] with `graph`'s steps made already.
    fn from_solved_on(
        graph: &PprGraph,
        steps: Steps,
        entities: usize,
        vectors: &Matrix,
        solved: &Solved,
        form: Form,
    ) -> Option<PassageResponse> {
        let start = std::time::Instant::now();
        let passages = graph.nodes().checked_sub(entities)?;
        let dim = vectors.dim();
        let d = solved.damping;
        if vectors.rows() < passages
            || (solved.entities, solved.passages, solved.dim) != (entities, passages, dim)
            || solved.values.len() != entities * (dim + 1)
        {
            return None;
        }
        let rows = match form {
            Form::Auto => passages <= entities,
            Form::Rows => true,
            Form::Entities => false,
        };
        let walk = EntityWalk::new(graph, &steps, entities, d)?;
        let mut entity_rows = vec![0f32; entities * dim];
        let mut passage_rows = if rows { vec![0f32; passages * dim] } else { Vec::new() };
        let mut constant = vec![0f64; passages];
        let mut column_error = vec![0f64; dim];
        let mut constant_error = 0.0;
        let mut degree_error = vec![0f64; dim];
        let mut degree_constant_error = 0.0;
        let per_degree = node_factor(d);
        let rho = walk.contraction;
        // A passage's error is at most d times the entities' (L1), bounded by the
        // contraction: Δ·ρ / (1 − ρ).
        let bound = |change: f64| d * change * rho / (1.0 - rho) * (1.0 + 1e-9);
        for first in (0..dim + 1).step_by(BLOCK) {
            let width = BLOCK.min(dim + 1 - first);
            let y = &solved.values[entities * first..][..entities * width];
            let reset = |p: usize, out: &mut [f64]| reset_columns(vectors, first, p, out);
            for (e, values) in y.chunks_exact(width).enumerate() {
                for (c, &v) in values.iter().enumerate() {
                    if first + c < dim {
                        entity_rows[e * dim + first + c] = v as f32;
                    }
                }
            }
            for (c, &ch) in solved.change[first..first + width].iter().enumerate() {
                match first + c {
                    col if col < dim => column_error[col] = bound(ch),
                    _ => constant_error = bound(ch),
                }
            }
            for (c, &eps) in solved.node_error[first..first + width].iter().enumerate() {
                match first + c {
                    col if col < dim => degree_error[col] = eps * per_degree,
                    _ => degree_constant_error = eps * per_degree,
                }
            }
            // The passages' values, x_p = (1 − d)·r_p + d·(A y)_p: every column for the
            // rows form, the constant column for both.
            let value = |p: usize, out: &mut [f64]| {
                let mut r = [0f64; BLOCK];
                reset(p, &mut r[..width]);
                walk.gathered(p, y, width, out);
                for (o, r) in out.iter_mut().zip(r) {
                    *o = (1.0 - d) * r + d * *o;
                }
            };
            if rows {
                passage_rows.par_chunks_mut(dim.max(1)).enumerate().for_each(|(p, row)| {
                    let mut out = [0f64; BLOCK];
                    value(p, &mut out[..width]);
                    for (c, &v) in out[..width].iter().enumerate() {
                        if first + c < dim {
                            row[first + c] = v as f32;
                        }
                    }
                });
            }
            if first + width > dim {
                constant.par_iter_mut().enumerate().for_each(|(p, k)| {
                    let mut out = [0f64; BLOCK];
                    value(p, &mut out[..width]);
                    *k = out[width - 1];
                });
            }
        }
        let iterations = solved.iterations;
        let row_norms = |m: &Matrix| -> Vec<f64> {
            m.as_flat()
                .chunks_exact(dim.max(1))
                .map(|r| r.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>().sqrt())
                .collect()
        };
        let entity_response = Matrix::from_flat(dim, entity_rows);
        let half = if rows {
            let response = Matrix::from_flat(dim, passage_rows);
            let norms = row_norms(&response);
            let screen = Screen::new(&response);
            Half::Rows { response, screen: Box::new(screen), norms }
        } else {
            let entity_norms = row_norms(&entity_response);
            let norms = (0..passages)
                .into_par_iter()
                .map(|p| walk.into_passage.row(p).iter().map(|&(u, prob)| prob as f64 * entity_norms[u as usize]).sum())
                .collect();
            let gather = PassageGather::new(&walk.into_passage, entities);
            Half::Entities { response: entity_response, norms, gather }
        };
        let dangling: Vec<u32> = (0..passages as u32).filter(|&p| graph.is_dangling(entities + p as usize)).collect();
        let sum = |rows: &mut dyn Iterator<Item = u32>| {
            let mut sum = vec![0f64; dim];
            rows.for_each(|p| sum.iter_mut().zip(vectors.row(p)).for_each(|(s, &v)| *s += v as f64));
            sum
        };
        let (vector_sum, dangling_sum) = (sum(&mut (0..passages as u32)), sum(&mut dangling.iter().copied()));
        let passage_screen = Screen::new(vectors);
        let mut by_degree: Vec<u32> = (0..passages as u32).collect();
        let degree = |p: &u32| steps.degrees[entities + *p as usize];
        by_degree.sort_by(|a, b| crate::rank::desc(degree(a), degree(b)).then(a.cmp(b)));
        drop(walk);
        let bytes = match &half {
            Half::Rows { response, .. } => response.as_flat().len() * 5 + passages * 8,
            Half::Entities { response, gather, .. } => {
                response.as_flat().len() * 4 + passages * 8 + gather.as_ref().map_or(0, PassageGather::bytes)
            }
        } + passages * 12;
        let stats = ResponseStats {
            form: if rows { "rows" } else { "entities" }.into(),
            iterations,
            contraction: rho,
            secs: start.elapsed().as_secs_f64(),
            solve_secs: solved.secs,
            stored: true,
            bytes,
        };
        Some(PassageResponse {
            entities,
            passages,
            dim,
            damping: d,
            half,
            passage_screen,
            vector_sum,
            dangling_sum,
            constant,
            column_error,
            constant_error,
            degree_error,
            degree_constant_error,
            dangling,
            steps,
            by_degree,
            stats,
            pending: solved.pending.clone(),
        })
    }

    pub fn passages(&self) -> usize {
        self.passages
    }

    /// Whether the response is in the entity form, where a query's
    /// [`PassageResponse::entity_products`] are taken.
    pub fn has_entity_form(&self) -> bool {
        matches!(self.half, Half::Entities { .. })
    }

    /// Every passage's `Σ_e P(e → p)·(S V)_e · q` in the entity form (`None` in the rows
    /// form, or for a query of another dimension): the entities' part of its row's
    /// product with the query, which the walk's first pass reads. It needs the query
    /// alone, so a caller can take it beside its scans of the facts and the passages:
    /// much of its time is the gather's, over entity values that sit in the cache (at a
    /// million passages it still reads 139 MB, which costs as much beside the scans as
    /// after them when memory is busy).
    /// `graph`: the walk's, whose steps the gather follows where the response has no
    /// [`PassageGather`] of its own.
    pub fn entity_products(&self, graph: &PprGraph, query: &[f32]) -> Option<Vec<f64>> {
        let Half::Entities { response: rows, gather, .. } = &self.half else {
            return None;
        };
        if query.len() != self.dim {
            return None;
        }
        let z: Vec<f64> = rows.as_flat().par_chunks(self.dim.max(1)).map(|r| dot_f64(r, query)).collect();
        Some(match gather {
            Some(g) => g.gather(&z),
            None => graph.gather(self.entities..self.entities + self.passages, &z),
        })
    }

    /// The passage vectors' int8 screen (index::Screen), for exact dense rankings.
    pub fn passage_screen(&self) -> &Screen {
        &self.passage_screen
    }

    /// What computing it cost, and its form.
    pub fn stats(&self) -> &ResponseStats {
        &self.stats
    }
}
