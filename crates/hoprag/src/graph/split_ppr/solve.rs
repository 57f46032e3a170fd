//! The precomputation: the passage seeds' walk solved on the entity nodes alone, for
//! every column of the passage vectors (its byte format is in `stored`).

use rayon::prelude::*;

use super::push::Steps;
use crate::corpus::PassageIdx;
use crate::graph::ppr::PprGraph;
use crate::index::Matrix;

/// Columns of the precomputation walked together (f64 each): 8 per entity keep the
/// iterate, the next one and each thread's sums of a 50,000-entity graph in the L3 cache.
pub(super) const BLOCK: usize = 8;

/// The precomputation stops when each column's last iteration moved it by less than this
/// fraction of its reset mass.
pub(super) const PRECOMPUTE_TOLERANCE: f64 = 1e-11;

/// Incoming steps as compressed rows: row `j` lists `(i, P(i → j))`.
pub(super) struct Csr {
    pub(super) offsets: Vec<usize>,
    pub(super) entries: Vec<(u32, f32)>,
}

impl Csr {
    /// The rows `rows` of the walk's incoming steps, positive ones only, each source
    /// checked by `keep` (`None` when one fails it).
    pub(super) fn incoming(graph: &PprGraph, rows: std::ops::Range<usize>, keep: impl Fn(u32) -> bool) -> Option<Csr> {
        let mut offsets = Vec::with_capacity(rows.len() + 1);
        let mut entries = Vec::new();
        offsets.push(0);
        for j in rows {
            for (i, p) in graph.row(j) {
                if p > 0.0 {
                    if !keep(i) {
                        return None;
                    }
                    entries.push((i, p));
                }
            }
            offsets.push(entries.len());
        }
        Some(Csr { offsets, entries })
    }

    pub(super) fn row(&self, j: usize) -> &[(u32, f32)] {
        &self.entries[self.offsets[j]..self.offsets[j + 1]]
    }
}

/// The passage seeds' walk solved on the entity nodes alone. With `r` on the passages,
/// `A = P(e → p)`, `B = P(p → e)`, `C = P(e' → e)`: a passage's only neighbours are
/// entities, so `x_p = (1 − d)·r_p + d·(A y)_p`, and the entities' values solve
/// `y = d(1 − d)·B r + M y` with `M = d²·B A + d·C`. `M`'s column sums are at most `d`
/// (an entity's steps sum to one; those to passages come back after two), so the
/// iteration contracts by `ρ ≤ d` in L1, and after one that moved `y` by `Δ` (L1), `y` is
/// within `Δ·ρ / (1 − ρ)` of the fixed point, and each passage within `d` times that.
/// One iteration streams the passages once (gather from `y`, scatter into per-thread
/// sums): entity-sized arrays are all it reads at random, where the full walk gathers
/// from node-sized ones (at 1 M passages, 8 columns of 1,05 M nodes are 67 MB).
pub(super) struct EntityWalk<'a> {
    pub(super) entities: usize,
    pub(super) passages: usize,
    pub(super) damping: f64,
    /// `A`, by passage.
    pub(super) into_passage: Csr,
    /// `C`, by entity (entity sources only).
    pub(super) into_entity: Csr,
    /// `B`: passage `p`'s steps are `steps.from(entities + p)`.
    pub(super) steps: &'a Steps,
    /// `M`'s largest column sum, from the stored probabilities.
    pub(super) contraction: f64,
}

impl<'a> EntityWalk<'a> {
    /// `None` when a passage node has a passage neighbour (the split needs the
    /// passage–entity graph), or the walk does not contract.
    pub(super) fn new(graph: &PprGraph, steps: &'a Steps, entities: usize, damping: f64) -> Option<EntityWalk<'a>> {
        let nodes = graph.nodes();
        let passages = nodes - entities;
        let is_entity = |i: u32| (i as usize) < entities;
        let into_passage = Csr::incoming(graph, entities..nodes, is_entity)?;
        let into_entity = Csr::incoming(graph, 0..entities, |_| true)?;
        let into_entity = Csr {
            offsets: {
                let mut o = vec![0];
                for j in 0..entities {
                    o.push(o[j] + into_entity.row(j).iter().filter(|s| is_entity(s.0)).count());
                }
                o
            },
            entries: into_entity.entries.iter().copied().filter(|s| is_entity(s.0)).collect(),
        };
        let d = damping;
        let out_sum: Vec<f64> =
            (0..passages).map(|p| steps.from(entities + p).iter().map(|s| s.1 as f64).sum()).collect();
        let contraction = (0..entities)
            .map(|u| {
                steps.from(u).iter().fold(0.0, |sum, &(v, p)| {
                    let v = v as usize;
                    sum + if v < entities { d * p as f64 } else { d * d * p as f64 * out_sum[v - entities] }
                })
            })
            .fold(0.0, f64::max)
            * (1.0 + 1e-9);
        (contraction < 1.0).then_some(EntityWalk {
            entities,
            passages,
            damping,
            into_passage,
            into_entity,
            steps,
            contraction,
        })
    }

    /// `Σ_p P(p → e)·f(p)` for every entity, `width` columns (`f` fills a passage's),
    /// entity-major; one pass over the passages, one part per thread.
    pub(super) fn scatter(&self, width: usize, f: &(dyn Fn(usize, &mut [f64]) + Sync)) -> Vec<f64> {
        let (e, np) = (self.entities, self.passages);
        let part = np.div_ceil(rayon::current_num_threads().max(1)).max(1);
        let starts: Vec<usize> = (0..np).step_by(part).collect();
        let sums: Vec<Vec<f64>> = starts
            .into_par_iter()
            .map(|start| {
                let mut sum = vec![0f64; e * width];
                let mut t = [0f64; BLOCK];
                let t = &mut t[..width];
                for p in start..(start + part).min(np) {
                    f(p, t);
                    for &(v, prob) in self.steps.from(e + p) {
                        for (s, x) in sum[v as usize * width..][..width].iter_mut().zip(t.iter()) {
                            *s += prob as f64 * x;
                        }
                    }
                }
                sum
            })
            .collect();
        let mut sums = sums.into_iter();
        let mut total = sums.next().unwrap_or_else(|| vec![0f64; e * width]);
        for s in sums {
            total.par_iter_mut().zip(s.par_iter()).with_min_len(4096).for_each(|(a, b)| *a += b);
        }
        total
    }

    /// `Σ_e P(e → p)·y_e` for passage `p`, `width` columns.
    #[inline]
    pub(super) fn gathered(&self, p: usize, y: &[f64], width: usize, out: &mut [f64]) {
        out.fill(0.0);
        for &(u, prob) in self.into_passage.row(p) {
            for (o, v) in out.iter_mut().zip(&y[u as usize * width..][..width]) {
                *o += prob as f64 * v;
            }
        }
    }

    /// The entities' values for `width` reset columns (`reset` fills a passage's), to
    /// `PRECOMPUTE_TOLERANCE` of each column's reset mass: the values, each column's last
    /// change (L1) and the iterations; `None` if it does not converge, or `stop` says so
    /// (checked at each iteration). Iterated from `start` where given (the bound after the
    /// last iteration holds whatever the first iterate), else from the seeds.
    pub(super) fn solve(
        &self,
        width: usize,
        reset: &(dyn Fn(usize, &mut [f64]) + Sync),
        mass: &[f64],
        stop: &(dyn Fn() -> bool + Sync),
        start: Option<Vec<f64>>,
    ) -> Option<(Vec<f64>, Vec<f64>, usize)> {
        let d = self.damping;
        let mut seeded = self.scatter(width, reset);
        seeded.iter_mut().for_each(|v| *v *= d * (1.0 - d));
        let limit = 2 * ((PRECOMPUTE_TOLERANCE.ln() / self.contraction.max(1e-3).ln()).ceil() as usize + 2);
        let mut y = start.unwrap_or_else(|| seeded.clone());
        for iteration in 1..=limit {
            if stop() {
                return None;
            }
            let back = self.scatter(width, &|p, t| self.gathered(p, &y, width, t));
            let mut next = vec![0f64; y.len()];
            const ROWS: usize = 1024;
            let change = next
                .par_chunks_mut(ROWS * width)
                .enumerate()
                .map(|(chunk, out)| {
                    let mut change = vec![0f64; width];
                    for (i, row) in out.chunks_mut(width).enumerate() {
                        let j = chunk * ROWS + i;
                        let mut acc = [0f64; BLOCK];
                        for &(u, prob) in self.into_entity.row(j) {
                            for (a, v) in acc.iter_mut().zip(&y[u as usize * width..][..width]) {
                                *a += prob as f64 * v;
                            }
                        }
                        for c in 0..width {
                            let at = j * width + c;
                            row[c] = seeded[at] + d * d * back[at] + d * acc[c];
                            change[c] += (row[c] - y[at]).abs();
                        }
                    }
                    change
                })
                .reduce(|| vec![0f64; width], |a, b| a.iter().zip(&b).map(|(x, y)| x + y).collect());
            y = next;
            if !change.iter().all(|c| c.is_finite()) {
                return None;
            }
            if change.iter().zip(mass).all(|(ch, m)| *ch <= PRECOMPUTE_TOLERANCE * m) {
                return Some((y, change, iteration));
            }
        }
        None
    }
}

/// The expensive half of a [`PassageResponse`]: the entities' values of the passage seeds'
/// walk for every column of the passage vectors and the constant column (`y` in
/// [`EntityWalk`]), each column's last change, found by iterating over every
/// passage–entity edge until each column converges. What depends on the query side only
/// (codes, norms, the passages' constants, the push's steps) is rebuilt from it in one
/// pass. Computed when the graph is attached to its index and stored with it, so that a
/// process that opens the index does not pay it (minutes at a million passages).
#[derive(Clone)]
pub struct Solved {
    pub(super) entities: usize,
    pub(super) passages: usize,
    pub(super) dim: usize,
    pub(super) damping: f64,
    pub(super) iterations: usize,
    pub(super) secs: f64,
    /// Per column, the L1 change of the last iteration (after a repair, the `Δ` whose
    /// bound `ρ·Δ` covers the part of the residual bounded in L1).
    pub(super) change: Vec<f64>,
    /// Per column, `ε`: the rest of the residual is at most `ε · deg(u)` on each entity
    /// `u` (a local repair's per-node bound, [`super::repair`]); all 0 after a solve.
    pub(super) node_error: Vec<f64>,
    /// Blocks of [`BLOCK`] columns (the last one shorter), each entity-major.
    pub(super) values: Vec<f64>,
    /// A deferred walk's exact residuals ([`Solved::defer`]): empty after a solve or a
    /// repair. A deferred walk is served, never stored.
    pub(super) pending: Pending,
}

/// The residuals `r = c + M y − y` of a walk's values on the entities whose equation an
/// edit changed, every column of each (entity-major): exact, not pushed, so that each
/// query pushes its own combination of the columns (one column's work where a repair
/// pushes them all).
#[derive(Clone, Default, PartialEq)]
pub(super) struct Pending {
    pub(super) entities: Vec<u32>,
    /// `dim + 1` values per entity.
    pub(super) values: Vec<f64>,
}

impl Pending {
    pub(super) fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Each entity with its residual's columns.
    pub(super) fn rows(&self) -> impl Iterator<Item = (u32, &[f64])> {
        let width = self.values.len().checked_div(self.entities.len()).unwrap_or(0);
        self.entities.iter().copied().zip(self.values.chunks_exact(width.max(1)))
    }
}

/// The same solution, however long each took.
impl PartialEq for Solved {
    fn eq(&self, o: &Solved) -> bool {
        (self.entities, self.passages, self.dim, self.iterations) == (o.entities, o.passages, o.dim, o.iterations)
            && self.damping.to_bits() == o.damping.to_bits()
            && self.change.iter().map(|x| x.to_bits()).eq(o.change.iter().map(|x| x.to_bits()))
            && self.node_error.iter().map(|x| x.to_bits()).eq(o.node_error.iter().map(|x| x.to_bits()))
            && self.values.iter().map(|x| x.to_bits()).eq(o.values.iter().map(|x| x.to_bits()))
            && self.pending == o.pending
    }
}

impl std::fmt::Debug for Solved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Solved {{ {} entities, {} passages, dim {}, damping {}, {} iterations, {:.3}s, {} pending }}",
            self.entities,
            self.passages,
            self.dim,
            self.damping,
            self.iterations,
            self.secs,
            self.pending.entities.len()
        )
    }
}

/// Passage `p`'s reset values in columns `first..first + out.len()`: the vector's
/// coordinate, or 1 for the constant column (`dim`).
pub(super) fn reset_columns(vectors: &Matrix, first: usize, p: usize, out: &mut [f64]) {
    let row = vectors.row(p as PassageIdx);
    for (c, o) in out.iter_mut().enumerate() {
        *o = row.get(first + c).map_or(1.0, |&v| v as f64);
    }
}

impl Solved {
    /// Solves the entities' values of every column; `None` when the graph is not one of
    /// passages linked to entities only, or the walk does not converge.
    pub fn solve(graph: &PprGraph, entities: usize, vectors: &Matrix, damping: f64) -> Option<Solved> {
        Self::solve_unless(graph, entities, vectors, damping, &|| false)
    }

    /// [`Solved::solve`], given up (`None`) as soon as `stop` says so (checked at each
    /// iteration): a walk solved in the background for a generation no longer served,
    /// which should let go of that generation's graph soon.
    pub fn solve_unless(
        graph: &PprGraph,
        entities: usize,
        vectors: &Matrix,
        damping: f64,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Option<Solved> {
        Self::solve_from(graph, entities, vectors, damping, stop, None)
    }

    /// [`Solved::solve_unless`], each block of columns iterated from `start(first, width)`
    /// (entity-major) where given.
    pub(super) fn solve_from(
        graph: &PprGraph,
        entities: usize,
        vectors: &Matrix,
        damping: f64,
        stop: &(dyn Fn() -> bool + Sync),
        start_at: Option<&dyn Fn(usize, usize) -> Vec<f64>>,
    ) -> Option<Solved> {
        let start = std::time::Instant::now();
        let passages = graph.nodes().checked_sub(entities)?;
        let dim = vectors.dim();
        if vectors.rows() < passages || !(0.0..1.0).contains(&damping) {
            return None;
        }
        let steps = Steps::new(graph);
        let walk = EntityWalk::new(graph, &steps, entities, damping)?;
        let mut values = Vec::with_capacity(entities * (dim + 1));
        let mut change = Vec::with_capacity(dim + 1);
        let mut iterations = 0;
        for first in (0..dim + 1).step_by(BLOCK) {
            if stop() {
                return None;
            }
            let width = BLOCK.min(dim + 1 - first);
            let reset = |p: usize, out: &mut [f64]| reset_columns(vectors, first, p, out);
            // Each column's sum in passage order, one row read at a time (a layered
            // matrix finds a row through its runs: once per passage, not per column).
            let mut sums = vec![0f64; width];
            for p in 0..passages {
                let row = vectors.row(p as PassageIdx);
                for (c, sum) in sums.iter_mut().enumerate().filter(|(c, _)| first + c < dim) {
                    *sum += (row[first + c] as f64).abs();
                }
            }
            let mass: Vec<f64> = sums
                .into_iter()
                .enumerate()
                .map(|(c, sum)| f64::max(if first + c < dim { sum } else { passages as f64 }, f64::MIN_POSITIVE))
                .collect();
            let (y, last, its) = walk.solve(width, &reset, &mass, stop, start_at.map(|f| f(first, width)))?;
            iterations = iterations.max(its);
            values.extend(y);
            change.extend(last);
        }
        Some(Solved {
            entities,
            passages,
            dim,
            damping,
            iterations,
            secs: start.elapsed().as_secs_f64(),
            change,
            node_error: vec![0.0; dim + 1],
            values,
            pending: Pending::default(),
        })
    }

    pub fn damping(&self) -> f64 {
        self.damping
    }

    /// Whether the walk is deferred ([`Solved::defer`]): served with residuals each query
    /// pushes, never stored.
    pub fn is_deferred(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Iterations of the slowest block of columns.
    pub fn iterations(&self) -> usize {
        self.iterations
    }

    /// Seconds the solve took.
    pub fn secs(&self) -> f64 {
        self.secs
    }
}
