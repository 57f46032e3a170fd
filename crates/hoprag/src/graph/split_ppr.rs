//! HippoRAG 2's walk split in two by linearity, for one query in about a millisecond
//! instead of a dozen passes over the whole graph.
//!
//! Personalized PageRank is linear in its reset vector: with `S(r)` the solution of
//! `p = (1 − d)·r + d·Pᵀp` (mass reaching a dangling node is lost),
//! - every passage node is seeded with `w · x_p`, `x_p = a·(v_p · q) + b` (min-max of the
//!   dense scores), so that half of the walk on passage nodes is
//!   `w · (a · (S V) q + b · S 1)`: `S V` (passages × dim) and `S 1` depend on the graph
//!   and the passage vectors only, and are computed once ([`PassageResponse`]);
//! - the few entity seeds are walked by local forward push (Andersen, Chung & Lang 2006),
//!   which touches only the nodes their mass reaches.
//!
//! The walk with dangling mass sent back to the seeds ([`PprGraph::personalized_pagerank`])
//! is `κ · S(r)` with `κ = 1 / (1 − d · r_D)`, `r_D` the reset mass on dangling nodes: the
//! same ranking, and the same scores once `κ` is applied.
//!
//! Both halves carry proven error bounds (the precomputation's convergence and f32
//! storage, and, until a passage's product with the query is taken exactly, the int8
//! screen's interval for it; the push's residual mass, and `ε · deg(v)` per node on an
//! undirected graph), and a ranking is returned only once the bounds separate the
//! passages asked for; else the caller runs the full walk. Tied passages are never
//! separated this way, so a tie always goes to the full walk.

use std::borrow::Cow;

use rayon::prelude::*;

use super::ppr::PprGraph;
use crate::corpus::PassageIdx;
use crate::index::{Matrix, Screen, Screened};
use crate::rank::NthLargest;

/// Columns of the precomputation walked together (f64 each): 8 per entity keep the
/// iterate, the next one and each thread's sums of a 50,000-entity graph in the L3 cache.
const BLOCK: usize = 8;

/// The precomputation stops when each column's last iteration moved it by less than this
/// fraction of its reset mass.
const PRECOMPUTE_TOLERANCE: f64 = 1e-11;

/// The push starts at this threshold on `residual / degree`, relative to the seeds' mass,
/// and divides it by [`PUSH_STEP`] until the ranking is proven. A push's work grows as its
/// threshold shrinks, and the last round overshoots the threshold the proof needed by up
/// to the step: on the 2wiki graph (51 questions) a step of 3 took a median of 18,000
/// edge steps a query against 32,000 at 8 (mean 58,000 against 109,000), for 4.8 rounds
/// instead of 3.3 (each round's bounds and proof cost about 0.07 ms); 2 took 20,000 in
/// 6.6 rounds, 4 took 24,000 in 4.
const PUSH_START: f64 = 1e-4;
const PUSH_STEP: f64 = 3.0;
const PUSH_FLOOR: f64 = 1e-14;

/// `S` applied to the passage seeds, on the passage nodes.
pub struct PassageResponse {
    entities: usize,
    passages: usize,
    dim: usize,
    damping: f64,
    half: Half,
    /// The passage vectors' int8 copy (every row of the matrix the response was computed
    /// from): the dense ranking and the range of the dense scores, exactly, without
    /// reading the f32 vectors.
    passage_screen: Screen,
    /// `Σ v_p` over the graph's passages, and over its dangling ones: the sums of the
    /// passage seeds, by linearity, from the range of the dense scores alone.
    vector_sum: Vec<f64>,
    dangling_sum: Vec<f64>,
    /// `(S 1)_p`.
    constant: Vec<f64>,
    /// Per column of `S V`, a bound on any passage entry's convergence error.
    column_error: Vec<f64>,
    constant_error: f64,
    /// Passages with no entity: dangling nodes of the walk.
    dangling: Vec<u32>,
    /// The walk's steps by source node, for the push.
    steps: Steps,
    /// The passages by their walk degree, highest first (ties by index): without passage
    /// seeds, the bound of every passage the push has not reached is its degree's.
    by_degree: Vec<u32>,
    stats: ResponseStats,
}

/// How the passage rows of `S V` are kept.
enum Half {
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
struct PassageGather {
    /// `P(e → p)` of entity `e`'s steps to passages (f32, as the walk stores it).
    prob: Vec<f32>,
    /// Passage `p`'s entities are `sources[offsets[p]..offsets[p + 1]]`.
    offsets: Vec<u32>,
    sources: Vec<u32>,
}

/// Passages a task of the gather sums.
const GATHER_ROWS: usize = 4096;

impl PassageGather {
    fn new(into_passage: &Csr, entities: usize) -> Option<PassageGather> {
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
    fn gather(&self, z: &[f64]) -> Vec<f64> {
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

    fn bytes(&self) -> usize {
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
/// `P(u → v)` for every edge, grouped by `u`, as the full walk stores them (f32): the
/// walk's rows list each node's incoming steps, lane-interleaved for the multi-column
/// pass, while a push from `u` reads `u`'s outgoing steps, contiguous here.
struct Steps {
    /// Node `u`'s steps are `edges[offsets[u]..offsets[u + 1]]`.
    offsets: Vec<usize>,
    edges: Vec<(u32, f32)>,
    /// Push states of every node, kept between queries (one per query running at once):
    /// making one anew, with each node's degree, cost 0.2 ms a query on the 2wiki graph,
    /// while a query touches a few thousand of its 53,000 nodes, and resets only those.
    states: std::sync::Mutex<Vec<Vec<Node>>>,
    degrees: Vec<f64>,
}

impl Steps {
    fn new(graph: &PprGraph) -> Steps {
        let n = graph.nodes();
        let mut count = vec![0usize; n + 1];
        for v in 0..n {
            for (u, p) in graph.row(v) {
                if p > 0.0 {
                    count[u as usize + 1] += 1;
                }
            }
        }
        for u in 0..n {
            count[u + 1] += count[u];
        }
        let offsets = count.clone();
        let mut edges = vec![(0u32, 0f32); offsets[n]];
        for v in 0..n {
            // Row v lists p = P(u → v) for each neighbour u.
            for (u, p) in graph.row(v) {
                if p > 0.0 {
                    let slot = &mut count[u as usize];
                    edges[*slot] = (v as u32, p);
                    *slot += 1;
                }
            }
        }
        let degrees = (0..n).map(|u| graph.degree(u)).collect();
        Steps { offsets, edges, states: Default::default(), degrees }
    }

    fn from(&self, u: usize) -> &[(u32, f32)] {
        &self.edges[self.offsets[u]..self.offsets[u + 1]]
    }

    /// A push state with nothing pushed.
    fn take_state(&self) -> Vec<Node> {
        let kept = self.states.lock().unwrap_or_else(|e| e.into_inner()).pop();
        kept.unwrap_or_else(|| self.degrees.iter().map(|&degree| Node { degree, ..Node::default() }).collect())
    }

    /// Takes back a state whose `touched` nodes are the only ones pushed to.
    fn give_back(&self, mut nodes: Vec<Node>, touched: &[u32]) {
        for &u in touched {
            let node = &mut nodes[u as usize];
            *node = Node { degree: node.degree, ..Node::default() };
        }
        self.states.lock().unwrap_or_else(|e| e.into_inner()).push(nodes);
    }
}

/// Incoming steps as compressed rows: row `j` lists `(i, P(i → j))`.
struct Csr {
    offsets: Vec<usize>,
    entries: Vec<(u32, f32)>,
}

impl Csr {
    /// The rows `rows` of the walk's incoming steps, positive ones only, each source
    /// checked by `keep` (`None` when one fails it).
    fn incoming(graph: &PprGraph, rows: std::ops::Range<usize>, keep: impl Fn(u32) -> bool) -> Option<Csr> {
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

    fn row(&self, j: usize) -> &[(u32, f32)] {
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
struct EntityWalk<'a> {
    entities: usize,
    passages: usize,
    damping: f64,
    /// `A`, by passage.
    into_passage: Csr,
    /// `C`, by entity (entity sources only).
    into_entity: Csr,
    /// `B`: passage `p`'s steps are `steps.from(entities + p)`.
    steps: &'a Steps,
    /// `M`'s largest column sum, from the stored probabilities.
    contraction: f64,
}

impl<'a> EntityWalk<'a> {
    /// `None` when a passage node has a passage neighbour (the split needs the
    /// passage–entity graph), or the walk does not contract.
    fn new(graph: &PprGraph, steps: &'a Steps, entities: usize, damping: f64) -> Option<EntityWalk<'a>> {
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
    fn scatter(&self, width: usize, f: &(dyn Fn(usize, &mut [f64]) + Sync)) -> Vec<f64> {
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
    fn gathered(&self, p: usize, y: &[f64], width: usize, out: &mut [f64]) {
        out.fill(0.0);
        for &(u, prob) in self.into_passage.row(p) {
            for (o, v) in out.iter_mut().zip(&y[u as usize * width..][..width]) {
                *o += prob as f64 * v;
            }
        }
    }

    /// The entities' values for `width` reset columns (`reset` fills a passage's), to
    /// `PRECOMPUTE_TOLERANCE` of each column's reset mass: the values, each column's last
    /// change (L1) and the iterations; `None` if it does not converge.
    fn solve(
        &self,
        width: usize,
        reset: &(dyn Fn(usize, &mut [f64]) + Sync),
        mass: &[f64],
    ) -> Option<(Vec<f64>, Vec<f64>, usize)> {
        let d = self.damping;
        let mut seeded = self.scatter(width, reset);
        seeded.iter_mut().for_each(|v| *v *= d * (1.0 - d));
        let limit = 2 * ((PRECOMPUTE_TOLERANCE.ln() / self.contraction.max(1e-3).ln()).ceil() as usize + 2);
        let mut y = seeded.clone();
        for iteration in 1..=limit {
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
    entities: usize,
    passages: usize,
    dim: usize,
    damping: f64,
    iterations: usize,
    secs: f64,
    /// Per column, the L1 change of the last iteration.
    change: Vec<f64>,
    /// Blocks of [`BLOCK`] columns (the last one shorter), each entity-major.
    values: Vec<f64>,
}

/// The same solution, however long each took.
impl PartialEq for Solved {
    fn eq(&self, o: &Solved) -> bool {
        (self.entities, self.passages, self.dim, self.iterations) == (o.entities, o.passages, o.dim, o.iterations)
            && self.damping.to_bits() == o.damping.to_bits()
            && self.change.iter().map(|x| x.to_bits()).eq(o.change.iter().map(|x| x.to_bits()))
            && self.values.iter().map(|x| x.to_bits()).eq(o.values.iter().map(|x| x.to_bits()))
    }
}

impl std::fmt::Debug for Solved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Solved {{ {} entities, {} passages, dim {}, damping {}, {} iterations, {:.3}s }}",
            self.entities, self.passages, self.dim, self.damping, self.iterations, self.secs
        )
    }
}

/// Passage `p`'s reset values in columns `first..first + out.len()`: the vector's
/// coordinate, or 1 for the constant column (`dim`).
fn reset_columns(vectors: &Matrix, first: usize, p: usize, out: &mut [f64]) {
    let row = vectors.row(p as PassageIdx);
    for (c, o) in out.iter_mut().enumerate() {
        *o = row.get(first + c).map_or(1.0, |&v| v as f64);
    }
}

/// The first bytes of a stored [`Solved`], and its layout's version.
const SOLVED_MAGIC: &[u8; 8] = b"hrgwalk1";

impl Solved {
    /// Solves the entities' values of every column; `None` when the graph is not one of
    /// passages linked to entities only, or the walk does not converge.
    pub fn solve(graph: &PprGraph, entities: usize, vectors: &Matrix, damping: f64) -> Option<Solved> {
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
            let width = BLOCK.min(dim + 1 - first);
            let reset = |p: usize, out: &mut [f64]| reset_columns(vectors, first, p, out);
            let mass: Vec<f64> = (0..width)
                .map(|c| {
                    let col = first + c;
                    let sum = if col < dim {
                        (0..passages).map(|p| (vectors.row(p as PassageIdx)[col] as f64).abs()).sum()
                    } else {
                        passages as f64
                    };
                    f64::max(sum, f64::MIN_POSITIVE)
                })
                .collect();
            let (y, last, its) = walk.solve(width, &reset, &mass)?;
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
            values,
        })
    }

    pub fn damping(&self) -> f64 {
        self.damping
    }

    /// Iterations of the slowest block of columns.
    pub fn iterations(&self) -> usize {
        self.iterations
    }

    /// Seconds the solve took.
    pub fn secs(&self) -> f64 {
        self.secs
    }

    /// Little-endian: the magic, five u64 (entities, passages, dim, iterations, block),
    /// the damping and the seconds (f64), then the changes and the values (f64).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 * (9 + self.change.len() + self.values.len()));
        out.extend_from_slice(SOLVED_MAGIC);
        for n in [self.entities, self.passages, self.dim, self.iterations, BLOCK] {
            out.extend_from_slice(&(n as u64).to_le_bytes());
        }
        for x in [self.damping, self.secs].iter().chain(&self.change).chain(&self.values) {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Reads [`Solved::to_bytes`]'s layout back, or says what is wrong with it.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Solved, String> {
        let body = bytes.strip_prefix(SOLVED_MAGIC.as_slice()).ok_or("not a stored walk (bad magic)")?;
        if body.len() % 8 != 0 || body.len() < 7 * 8 {
            return Err(format!("{} bytes is not a stored walk's length", bytes.len()));
        }
        let words: Vec<[u8; 8]> = body.chunks_exact(8).map(|c| c.try_into().expect("8 bytes")).collect();
        let n = |i: usize| u64::from_le_bytes(words[i]) as usize;
        let (entities, passages, dim, iterations, block) = (n(0), n(1), n(2), n(3), n(4));
        if block != BLOCK {
            return Err(format!("stored in blocks of {block} columns, this version uses {BLOCK}"));
        }
        let floats: Vec<f64> = words[5..].iter().map(|w| f64::from_le_bytes(*w)).collect();
        let want = 2 + (dim + 1) + entities.checked_mul(dim + 1).ok_or("impossible size")?;
        if floats.len() != want {
            return Err(format!(
                "{} values for {entities} entities of dimension {dim} ({want} expected)",
                floats.len()
            ));
        }
        Ok(Solved {
            entities,
            passages,
            dim,
            damping: floats[0],
            iterations,
            secs: floats[1],
            change: floats[2..dim + 3].to_vec(),
            values: floats[dim + 3..].to_vec(),
        })
    }
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
        let steps = Steps::new(graph);
        let walk = EntityWalk::new(graph, &steps, entities, d)?;
        let mut entity_rows = vec![0f32; entities * dim];
        let mut passage_rows = if rows { vec![0f32; passages * dim] } else { Vec::new() };
        let mut constant = vec![0f64; passages];
        let mut column_error = vec![0f64; dim];
        let mut constant_error = 0.0;
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
            dangling,
            steps,
            by_degree,
            stats,
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

/// The seeds of one query, as [`crate::retrieve::ppr`] builds them: entity nodes with
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
}

/// Passage p's share of the score, `w · (a · (S V)_p · q + b · (S 1)_p)`, and its bound:
/// the dot product's error, f32 storage (relative 2^-24 per entry, so at most
/// `2^-24 · |row| · |q|` per dot product, `per_norm · norm_p`) and convergence (`fixed`).
struct PassageShare {
    w: f64,
    a: f64,
    b: f64,
    per_norm: f64,
    fixed: f64,
}

impl PassageShare {
    #[inline]
    fn of(&self, dot: f64, dot_error: f64, constant: f64, norm: f64) -> (f64, f64) {
        let (x, y) = (self.a * dot, self.b * constant);
        let bound = self.w * (self.a.abs() * (dot_error + self.per_norm * norm) + self.fixed);
        // Plus the f64 rounding of the sums.
        (self.w * (x + y), bound + 1e-12 * self.w * (x.abs() + y.abs()))
    }
}

/// Passages the split walk's first pass bounds at a time.
const FIRST_PASS_ROWS: usize = 4096;

/// A passage still in reach of the best `n`: its `(S V)_p · q` within `dot`
/// (midpoint, half-width; 0 once taken exactly), and its score within `score ± slack`
/// as of the last round.
#[derive(Debug, Clone, Copy)]
struct Live {
    p: usize,
    dot: (f64, f64),
    exact: bool,
    score: f64,
    slack: f64,
}

/// Every passage's `(S V)_p · q` within an interval, without copying them: from the
/// response's own int8 screen (rows form), or from the passage vectors' int8 pass and
/// the gather `Σ_e P(e → p)·(S V)_e · q` (entity form).
enum Dots<'a> {
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
    fn intervals_into(&self, first: usize, d: f64, mid: &mut [f64], half: &mut [f64]) {
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
    fn interval(&self, p: usize, d: f64) -> (f64, f64) {
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
struct Unreached<'a> {
    /// The passages by degree, highest first; those before `cursor` are all reached.
    by_degree: &'a [u32],
    cursor: usize,
    /// Entries of the push's `touched` already joined.
    joined: usize,
    /// The last round's residual, `eps` and floor, while the class is in reach.
    last: Option<(f64, f64, f64)>,
    open: bool,
}

impl<'a> Unreached<'a> {
    fn new(by_degree: &'a [u32]) -> Self {
        Unreached { by_degree, cursor: 0, joined: 0, last: None, open: true }
    }

    /// Whether unreached passage `p` was in reach at the last round.
    fn in_reach(&self, push: &Push, e: usize, p: usize) -> bool {
        let degree = push.nodes[e + p].degree;
        self.last.is_none_or(|(residual, eps, floor)| push_bound(residual, eps, degree) >= floor)
    }

    /// Adds the passages the push reached since the last call that were still in reach.
    fn join(&mut self, push: &Push, e: usize, live: &mut Vec<Live>) {
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
    fn test(&mut self, push: &Push, e: usize, residual: f64, eps: f64, floor: f64) -> f64 {
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
    fn fill(&self, push: &Push, e: usize, n: usize, live: &mut Vec<Live>) {
        if !self.open || live.len() >= n {
            return;
        }
        let fill = (0..push.nodes.len() - e).filter(|&p| !push.reached(e + p) && self.in_reach(push, e, p)).take(n);
        live.extend(fill.map(|p| Live { p, dot: (0.0, 0.0), exact: true, score: 0.0, slack: 0.0 }));
    }
}

/// The `n` best passages of the walk seeded by `q`, proven; `None` when the bounds do not
/// separate them (ties, or scores closer than the push can resolve), or the input is not
/// one this split covers (the caller then runs the full walk).
pub fn ranked_passages(graph: &PprGraph, response: &PassageResponse, q: &SplitQuery, n: usize) -> Option<SplitRanking> {
    let (e, np, d) = (response.entities, response.passages, q.damping);
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
    if d != response.damping || q.vectors.rows() != response.passage_screen.rows() || q.vectors.dim() != response.dim {
        return None;
    }
    if q.screened.is_some_and(|s| s.intervals().len() != response.passage_screen.rows()) {
        return None;
    }
    // The passage seeds, x_p = a · s_p + b, as the walk's caller computes them; their
    // sums by linearity, from the sums of the vectors. (They scale every score alike, so
    // their rounding, unlike the caller's per-passage one, moves no passage's rank.)
    let (a, b) = if hi > lo { (1.0 / (hi - lo) as f64, -(lo as f64) / (hi - lo) as f64) } else { (0.0, 1.0) };
    let x_sum = |vectors: &[f64], count: usize| (a * dot_f64(vectors, q.query) + b * count as f64).max(0.0);
    let entity_mass: f64 = q.entity_seeds.iter().map(|s| s.1.max(0.0)).sum();
    let passage_mass: f64 = q.passage_weight * x_sum(&response.vector_sum, np);
    let total = entity_mass + passage_mass;
    if total <= 0.0 || !total.is_finite() {
        return None;
    }
    let w = q.passage_weight / total;
    // Dangling reset mass, for κ.
    let dangling_entities: f64 =
        q.entity_seeds.iter().filter(|s| graph.is_dangling(s.0 as usize)).map(|s| s.1.max(0.0)).sum::<f64>() / total;
    let dangling_passages: f64 = x_sum(&response.dangling_sum, response.dangling.len()) * w;
    let kappa = 1.0 / (1.0 - d * (dangling_entities + dangling_passages));

    // The passage half, with its bound: f32 storage (relative 2^-24 per entry, so at most
    // 2^-24 · |row| · |q| per dot product) and convergence; the dot products first within
    // an interval (the screens'), then exactly for the passages near the top.
    let q_norm = q.query.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>().sqrt();
    let convergence: f64 = response.column_error.iter().zip(q.query).map(|(e, &v)| e * (v as f64).abs()).sum();
    let storage = 2f64.powi(-24) * (1.0 + 1e-6);
    let (norms, norm_factor) = match &response.half {
        Half::Rows { norms, .. } => (norms, 1.0),
        Half::Entities { norms, .. } => (norms, d),
    };
    let share = PassageShare {
        w,
        a,
        b,
        per_norm: storage * norm_factor * q_norm,
        fixed: a.abs() * convergence + b.abs() * response.constant_error,
    };
    let passage = |p: usize, (dot, dot_error): (f64, f64)| share.of(dot, dot_error, response.constant[p], norms[p]);
    // What an interval's width adds to the bound: 0 once the product is exact.
    let screen_error = |l: &Live| w * a.abs() * l.dot.1;
    // The entity half, pushed until the bounds separate the ranking; its first round on
    // one thread while the other bounds the passages' half.
    let mut push = Push::new(&response.steps, d);
    for &(s, weight) in q.entity_seeds {
        push.seed(s as usize, weight.max(0.0) / total);
    }
    let seed_mass = entity_mass / total;
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
    let (dots, mut complete) = rayon::join(
        || -> Option<Dots> {
            if q.passage_weight == 0.0 {
                return Some(Dots::Zero);
            }
            match &response.half {
                Half::Rows { screen, .. } => Some(Dots::Rows(screen.intervals(q.query)?)),
                Half::Entities { .. } => {
                    let gathered = match q.entity_products.filter(|g| g.len() == np) {
                        Some(given) => Cow::Borrowed(given),
                        None => Cow::Owned(response.entity_products(graph, q.query)?),
                    };
                    Some(Dots::Entities { screened: given.or(made.as_ref())?, gathered })
                }
            }
        },
        || push.run(eps, budget),
    );
    let dots = dots?;
    // Takes the products of `these` (positions in `live`) exactly.
    let take_exactly = |live: &mut [Live], these: &[usize]| {
        let exact_dot = |p: usize| match (&dots, &response.half) {
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
    };

    // The first round over every passage in one pass, which keeps only those in reach
    // of the best `n`: at a million passages the intervals alone are 16 MB, and a pass
    // that wrote every passage's score and bound took longer than the walk itself. A
    // passage the push has not reached has no estimate, and its bound needs only its
    // degree; those it has reached are kept whatever the pass finds, and scored below.
    // Without passage seeds there is nothing to bound passage by passage: the passages
    // the push reaches join round by round, and the others are one class ([`Unreached`]).
    let zero = matches!(dots, Dots::Zero);
    let residual = push.residual();
    let degrees = &response.steps.degrees;
    let (first_floor, in_reach) = if zero {
        (f64::NEG_INFINITY, Vec::new())
    } else {
        let reached: Vec<usize> =
            push.touched.iter().map(|&u| u as usize).filter(|u| (e..e + np).contains(u)).map(|u| u - e).collect();
        let fresh =
            || (NthLargest::<f64>::new(n), Vec::new(), vec![0f64; FIRST_PASS_ROWS], vec![0f64; FIRST_PASS_ROWS]);
        let (lower, mut in_reach, ..) = (0..np.div_ceil(FIRST_PASS_ROWS))
            .into_par_iter()
            .fold(fresh, |(mut lower, mut keep, mut low, mut high), block| {
                let first = block * FIRST_PASS_ROWS;
                let rows = first..(first + FIRST_PASS_ROWS).min(np);
                let (lows, highs) = (&mut low[..rows.len()], &mut high[..rows.len()]);
                // Bounds in plain loops over the block (they vectorise), then the offers.
                dots.intervals_into(first, d, lows, highs);
                let per_row =
                    response.constant[rows.clone()].iter().zip(&norms[rows.clone()]).zip(&degrees[e + first..]);
                for ((lo, hi), ((&constant, &norm), &degree)) in lows.iter_mut().zip(highs.iter_mut()).zip(per_row) {
                    let (part, bound) = share.of(*lo, *hi, constant, norm);
                    let slack = push_bound(residual, eps, degree) + bound;
                    // Unreached: its estimate is 0, which also bounds a reached one's from
                    // below.
                    (*lo, *hi) = (part - slack, part + slack);
                }
                for (p, (&lo, &hi)) in rows.zip(lows.iter().zip(highs.iter())) {
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
    };
    let mut live: Vec<Live> = in_reach
        .into_iter()
        .map(|p| Live { p, dot: dots.interval(p, d), exact: zero, score: 0.0, slack: 0.0 })
        .collect();
    let mut unreached = zero.then(|| Unreached::new(&response.by_degree));
    let mut nth_floor = first_floor;
    loop {
        if let Some(class) = &mut unreached {
            class.join(&push, e, &mut live);
        }
        if !complete {
            // In time the full walk costs about a push step per entry of the graph (its
            // 20-odd sequential passes some 1.5 ns an entry each, a step into random node
            // states 30–50 ns): where that is no more than the budget, it runs instead,
            // exact.
            if graph.entries() <= budget {
                return None;
            }
            // Unproven: the best by the estimates (ties by index, as the full walk's),
            // the dot products of the head taken exactly first. The push stopped inside a
            // round: its bounds are those of the largest residual per degree left.
            let residual = push.residual();
            let eps = push.stopped_at(eps);
            if let Some(class) = &unreached {
                class.fill(&push, e, n, &mut live);
            }
            // Each estimate with what the push's next step would add to it: the mass
            // waiting at the passage and at its neighbours (their share of it). One step
            // of lookahead ranks as well as a pass that moves every residual two hops
            // (at a million passages, 40 ms) would, at the cost of reading these rows.
            for l in live.iter_mut() {
                l.score = push.ahead(graph, e + l.p);
            }
            let value = |l: &Live| l.score + passage(l.p, l.dot).0;
            let by_value = |live: &mut Vec<Live>| {
                live.sort_by(|x, y| crate::rank::desc(value(x), value(y)).then(x.p.cmp(&y.p)));
            };
            by_value(&mut live);
            let head: Vec<usize> = (0..live.len().min(4 * n)).filter(|&i| !live[i].exact).collect();
            take_exactly(&mut live, &head);
            by_value(&mut live);
            live.truncate(n);
            let slack_of = |l: &Live| push_bound(residual, eps, push.nodes[e + l.p].degree) + passage(l.p, l.dot).1;
            let bound = live.iter().map(|l| kappa * (slack_of(l) + 1e-5 * value(l).abs())).fold(0.0, f64::max);
            let top = live.iter().map(|l| (l.p as PassageIdx, kappa * value(l))).collect();
            return Some(SplitRanking { top, pushes: push.pushes, residual, bound, proven: false });
        }
        let residual = push.residual();
        // Passage p's score and slack: the push's estimate and bound plus its half.
        let entity_error = |p: usize| push_bound(residual, eps, push.nodes[e + p].degree);
        let score = |l: &mut Live| {
            let (part, bound) = passage(l.p, l.dot);
            (l.score, l.slack) = (push.nodes[e + l.p].estimate + part, entity_error(l.p) + bound);
        };
        let mut lower = NthLargest::new(n);
        for l in live.iter_mut() {
            score(l);
            lower.offer(l.score - l.slack);
        }
        // Lower bounds only rise from round to round (the push only adds to estimates,
        // and its residual and `eps` only shrink), so the first pass's floor stands.
        nth_floor = nth_floor.max(lower.get());
        // The passages that may be among the best `n` get their exact product (a
        // refined interval lies inside the screened one, so the others stay out), once
        // the screen's share of their bound is no longer small beside the push's: the
        // first coarse pushes leave every passage in reach of the top. Those whose upper
        // bound is under the n-th best lower bound leave `live` for good.
        let in_reach = |l: &Live| l.score + l.slack >= nth_floor;
        let exactly: Vec<usize> = (0..live.len())
            .filter(|&i| {
                let l = &live[i];
                !l.exact && in_reach(l) && screen_error(l) * PUSH_STEP >= entity_error(l.p)
            })
            .collect();
        take_exactly(&mut live, &exactly);
        exactly.iter().for_each(|&i| score(&mut live[i]));
        // A NaN bound proves nothing: kept.
        live.retain(|l| in_reach(l) || (l.score + l.slack).is_nan());
        // The unreached passages' highest bound, while it is in reach; as they score 0,
        // fewer than `n` reached ones leave one of them in the head, unproven.
        let outside =
            unreached.as_mut().map_or(f64::NEG_INFINITY, |class| class.test(&push, e, residual, eps, nth_floor));
        let (scores, slacks): (Vec<f64>, Vec<f64>) = live.iter().map(|l| (l.score, l.slack)).unzip();
        // `live` is in passage order: ties by position are ties by passage.
        let proven = match outside == f64::NEG_INFINITY || live.len() >= n {
            true => proven_top(&scores, &slacks, &(0..live.len()).collect::<Vec<_>>(), n, outside),
            false => None,
        };
        if let Some(order) = proven {
            // Plus how far the sums above may be from the caller's sum of its f32 seeds
            // (each seed's rounding, and its dense score's, a few units of 2^-24 of the
            // range): it scales every score alike, by well under 1e-5.
            let bound = order.iter().map(|&i| kappa * (slacks[i] + 1e-5 * scores[i].abs())).fold(0.0, f64::max);
            let top = order.into_iter().map(|i| (live[i].p as PassageIdx, kappa * scores[i])).collect();
            return Some(SplitRanking { top, pushes: push.pushes, residual, bound, proven: true });
        }
        eps /= PUSH_STEP;
        if eps < PUSH_FLOOR * seed_mass.max(f64::MIN_POSITIVE) || residual == 0.0 {
            return None;
        }
        complete = push.run(eps, budget);
    }
}

/// The `n` best of the passages `among` by `score` (ties by index), if every one of them
/// is proven above all of `among` that follow it, and above `outside` (the highest
/// `score + slack` of any other passage, each of which follows them): each true value
/// lies within `score ± slack`. In linear passes (the n-th best score, the few at or
/// above it, the bound of the rest): it runs a few times a query.
fn proven_top(score: &[f64], slack: &[f64], among: &[usize], n: usize, outside: f64) -> Option<Vec<usize>> {
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

/// `Σ_c row[c] · q[c]` in f64 (the products of an f32 or f64 with an f32 are exact, or
/// rounded once, in f64).
fn dot_f64<T: Copy + Into<f64>>(row: &[T], q: &[f32]) -> f64 {
    let mut lanes = [0f64; 8];
    let (rc, qc) = (row.chunks_exact(8), q.chunks_exact(8));
    let tail: f64 = rc.remainder().iter().zip(qc.remainder()).map(|(&a, &b)| a.into() * b as f64).sum();
    for (r, v) in rc.zip(qc) {
        for ((l, &a), &b) in lanes.iter_mut().zip(r).zip(v) {
            *l += a.into() * b as f64;
        }
    }
    lanes.iter().sum::<f64>() + tail
}

/// How far below its score a node's estimate may be once the push has left every
/// residual at most `eps · degree` with `residual` in all (undirected graph): the mass
/// still to reach it.
fn push_bound(residual: f64, eps: f64, degree: f64) -> f64 {
    residual.min(eps * degree)
}

/// One node's state in the push; what a step to the node reads and writes, together.
#[derive(Clone, Copy, Default)]
struct Node {
    estimate: f64,
    residual: f64,
    degree: f64,
    queued: bool,
}

/// Forward push on `S`: `estimate + S(residual)` stays equal to `S(seeds)`.
struct Push<'a> {
    steps: &'a Steps,
    damping: f64,
    nodes: Vec<Node>,
    /// Nodes whose residual was ever set, once each (a node with no estimate and no
    /// residual, not queued, has never been), so that their residuals sum to the mass
    /// left unpushed, not more.
    touched: Vec<u32>,
    queue: std::collections::VecDeque<u32>,
    pushes: usize,
    /// Steps taken.
    work: usize,
}

impl Drop for Push<'_> {
    fn drop(&mut self) {
        self.steps.give_back(std::mem::take(&mut self.nodes), &self.touched);
    }
}

impl<'a> Push<'a> {
    fn new(steps: &'a Steps, damping: f64) -> Self {
        let nodes = steps.take_state();
        Push { steps, damping, nodes, touched: Vec::new(), queue: Default::default(), pushes: 0, work: 0 }
    }

    fn seed(&mut self, u: usize, mass: f64) {
        self.add(u as u32, mass);
    }

    /// Adds residual mass to node `u`, listing it the first time; the node, for the
    /// caller to queue.
    #[inline]
    fn add(&mut self, u: u32, mass: f64) -> &mut Node {
        if !self.reached(u as usize) {
            self.touched.push(u);
        }
        let node = &mut self.nodes[u as usize];
        node.residual += mass;
        node
    }

    /// Pushes until every residual is at most `eps · degree` (zero on dangling nodes), or
    /// until `limit` steps in all have been taken: whether it got there.
    fn run(&mut self, eps: f64, limit: usize) -> bool {
        let above = |n: &Node| n.residual > 0.0 && n.residual > eps * n.degree;
        for &u in &self.touched {
            let node = &mut self.nodes[u as usize];
            if !node.queued && above(node) {
                node.queued = true;
                self.queue.push_back(u);
            }
        }
        let d = self.damping;
        while let Some(&u) = self.queue.front() {
            if self.work >= limit {
                return false;
            }
            self.queue.pop_front();
            let node = &mut self.nodes[u as usize];
            node.queued = false;
            let r = std::mem::take(&mut node.residual);
            node.estimate += (1.0 - d) * r;
            self.pushes += 1;
            // A dangling node has no steps: S loses what reaches it.
            let steps: &'a Steps = self.steps;
            let steps = steps.from(u as usize);
            self.work += steps.len();
            // The states this push reaches, and the next push's steps, are asked for
            // before they are read: a query's first touch of a node looks like a miss to
            // memory (the fact scan just before reads more than the cache keeps), and the
            // loop below, one node at a time, would wait for each. On 2wiki (51 questions
            // × 5, p50 of two runs each, in turn) the later rounds' pushes took 0.70 /
            // 0.73 ms without, 0.57 / 0.58 with; the first round 0.08 / 0.10 against
            // 0.06 / 0.06.
            steps.iter().filter_map(|&(v, _)| self.nodes.get(v as usize)).for_each(crate::simd::prefetch);
            if let Some(next) = self.queue.front().and_then(|&u| self.steps.from(u as usize).first()) {
                crate::simd::prefetch(next);
            }
            for &(v, p) in steps {
                let node = self.add(v, d * r * p as f64);
                if !node.queued && above(node) {
                    node.queued = true;
                    self.queue.push_back(v);
                }
            }
        }
        true
    }

    /// The `eps` whose bounds hold after a run to `eps` that stopped at its limit: a node
    /// over `eps · degree` is queued, so the largest residual per degree in the queue (a
    /// dangling node's bound is the whole residual).
    fn stopped_at(&self, eps: f64) -> f64 {
        let ratio = |u: &u32| {
            let node = &self.nodes[*u as usize];
            if node.degree > 0.0 {
                node.residual / node.degree
            } else {
                f64::INFINITY
            }
        };
        self.queue.iter().map(ratio).fold(eps, f64::max)
    }

    /// Node `u`'s estimate with the next step's share of the residuals on it and its
    /// neighbours, `(1 − d)·(r_u + d·Σ_i P(i → u)·r_i)`: still a lower bound on its score.
    fn ahead(&self, graph: &PprGraph, u: usize) -> f64 {
        let d = self.damping;
        let arriving: f64 = graph.row(u).map(|(i, p)| p as f64 * self.nodes[i as usize].residual).sum();
        let node = &self.nodes[u];
        node.estimate + (1.0 - d) * (node.residual + d * arriving)
    }

    /// Whether the push has ever set node `u`'s residual.
    fn reached(&self, u: usize) -> bool {
        let node = &self.nodes[u];
        node.residual != 0.0 || node.estimate != 0.0 || node.queued
    }

    fn residual(&self) -> f64 {
        self.touched.iter().map(|&u| self.nodes[u as usize].residual).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::ppr::{PprParams, Ranked};
    use crate::rank::range;

    /// Entities 0..e on a ring with chords, passages e..e+p each linked to three entities,
    /// one dangling entity and one passage with no entity.
    fn graph(e: u32, p: u32) -> PprGraph {
        let mut edges = Vec::new();
        for i in 0..e - 1 {
            edges.push((i, (i + 1) % (e - 1), 1.0 + (i * 37 % 11) as f32));
            edges.push((i, (i * 7 + 3) % (e - 1), 0.5 + (i * 13 % 5) as f32 / 7.0));
        }
        for j in 0..p - 1 {
            for k in 0..3 {
                edges.push((e + j, (j * 5 + k * 11) % (e - 1), 1.0));
            }
        }
        PprGraph::from_edges((e + p) as usize, &edges)
    }

    #[test]
    fn the_passage_gather_sums_as_the_walk_does() {
        let (e, p) = (40u32, 400u32);
        let g = graph(e, p);
        let steps = Steps::new(&g);
        let walk = EntityWalk::new(&g, &steps, e as usize, 0.5).expect("contracts");
        let gather = PassageGather::new(&walk.into_passage, e as usize).expect("every passage edge weighs 1");
        let z: Vec<f64> = (0..e).map(|i| ((i * 37 % 11) as f64 - 5.0) / 7.0).collect();
        let (got, want) = (gather.gather(&z), g.gather(e as usize..(e + p) as usize, &z));
        assert_eq!(got.len(), want.len());
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 1e-14 * (1.0 + b.abs()), "passage {i}: {a} vs {b}");
        }
        // The last passage has no entity: its sum is 0; the others' are not all.
        assert_eq!(got[p as usize - 1], 0.0);
        assert!(got.iter().filter(|&&x| x != 0.0).count() > p as usize / 2);
        // An entity whose passage edges weigh differently has no one probability: the
        // walk's own gather serves.
        let uneven = PprGraph::from_edges(4, &[(0, 1, 1.0), (2, 0, 1.0), (3, 0, 2.0)]);
        let steps = Steps::new(&uneven);
        let walk = EntityWalk::new(&uneven, &steps, 2, 0.5).expect("contracts");
        assert!(PassageGather::new(&walk.into_passage, 2).is_none());
    }

    fn vectors(p: usize, dim: usize) -> Matrix {
        let mut s = 7u64;
        let data = (0..p * dim)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect();
        Matrix::from_flat(dim, data)
    }

    /// A query with HippoRAG 2's passage weight and damping, its passages scored `dense`.
    fn split_query<'a>(
        entity_seeds: &'a [(u32, f64)],
        dense: &[f32],
        query: &'a [f32],
        vectors: &'a Matrix,
    ) -> SplitQuery<'a> {
        SplitQuery {
            entity_seeds,
            dense_range: range(dense),
            query,
            passage_weight: 0.05,
            damping: 0.5,
            vectors,
            budget: 0,
            screened: None,
            entity_products: None,
        }
    }

    #[test]
    fn the_split_walk_ranks_as_the_full_walk_converged() {
        // More entities than passages (the real subsets) and fewer (the scale benchmark's
        // corpora), in both forms.
        for (e, p) in [(300u32, 200u32), (40, 400)] {
            for form in [Form::Auto, Form::Rows, Form::Entities] {
                split_equals_full(e, p, form, false);
            }
        }
        // The entity form over a screen with the 4-bit first stage (a million passages').
        split_equals_full(40, 400, Form::Entities, true);
    }

    #[test]
    fn past_its_budget_the_push_ranks_by_its_estimates_within_their_bound() {
        let (e, p, dim) = (40u32, 400u32, 24);
        let g = graph(e, p);
        let v = vectors(p as usize, dim);
        let response = PassageResponse::compute(&g, e as usize, &v, 0.5).unwrap();
        let query: Vec<f32> = (0..dim).map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0).collect();
        let dense = v.dots(&query);
        let seeds = [(3, 1.0), (17, 0.4)];
        let proven = ranked_passages(&g, &response, &split_query(&seeds, &dense, &query, &v), 10).unwrap();
        assert!(proven.proven);
        let q = SplitQuery { budget: 1, ..split_query(&seeds, &dense, &query, &v) };
        let rough = ranked_passages(&g, &response, &q, 10).expect("ranked, unproven");
        assert!(!rough.proven && rough.top.len() == 10);
        // Every returned score is within the bound of the full walk's.
        let (lo, hi) = range(&dense);
        let mut all: Vec<(u32, f64)> = seeds.to_vec();
        all.extend(dense.iter().enumerate().map(|(i, &s)| (e + i as u32, 0.05 * ((s - lo) / (hi - lo)) as f64)));
        let full =
            g.personalized_pagerank(&all, &PprParams { tolerance: 1e-15, max_iterations: 200, ..Default::default() });
        for &(passage, score) in &rough.top {
            let truth = full.scores[e as usize + passage as usize];
            assert!(
                (score - truth).abs() <= rough.bound + 1e-15,
                "{passage}: {score} vs {truth}, bound {}",
                rough.bound
            );
        }
        // A budget the proof fits in changes nothing.
        let q = SplitQuery { budget: 1 << 30, ..split_query(&seeds, &dense, &query, &v) };
        let roomy = ranked_passages(&g, &response, &q, 10).unwrap();
        assert!(roomy.proven);
        assert_eq!(roomy.top, proven.top);
        // Without passage seeds, asking for more passages than the first push reached:
        // the unreached ones fill the list at 0, each also within the bound.
        let zero = [(3, 1.0)];
        let q = SplitQuery { budget: 1, passage_weight: 0.0, ..split_query(&zero, &dense, &query, &v) };
        let rough = ranked_passages(&g, &response, &q, 300).expect("ranked, unproven");
        assert!(!rough.proven && rough.top.len() == 300, "{} passages", rough.top.len());
        let mut listed: Vec<u32> = rough.top.iter().map(|x| x.0).collect();
        listed.sort_unstable();
        listed.dedup();
        assert_eq!(listed.len(), 300, "each passage once");
        let full =
            g.personalized_pagerank(&zero, &PprParams { tolerance: 1e-15, max_iterations: 200, ..Default::default() });
        for &(passage, score) in &rough.top {
            let truth = full.scores[e as usize + passage as usize];
            assert!((score - truth).abs() <= rough.bound + 1e-15, "{passage}: {score} vs {truth}");
        }
    }

    #[test]
    fn a_stored_solution_gives_the_same_response_as_computing_it() {
        let dim = 24;
        for (e, p) in [(300u32, 200u32), (40, 400)] {
            let g = graph(e, p);
            let v = vectors(p as usize, dim);
            let solved = Solved::solve(&g, e as usize, &v, 0.5).expect("small graph");
            let read = Solved::from_bytes(&solved.to_bytes()).expect("its own bytes");
            assert_eq!(read, solved, "round trip");
            let computed = PassageResponse::compute(&g, e as usize, &v, 0.5).unwrap();
            let stored = PassageResponse::from_solved(&g, e as usize, &v, &read, Form::Auto).unwrap();
            assert_eq!(
                (stored.constant.clone(), stored.column_error.clone()),
                (computed.constant.clone(), computed.column_error.clone())
            );
            for trial in 0..4u32 {
                let query: Vec<f32> =
                    (0..dim).map(|i| (((i as u32 * 29 + trial * 11) % 13) as f32 - 6.0) / 10.0).collect();
                let dense = v.dots(&query);
                let seeds = [(trial * 5 % (e - 1), 1.0), ((trial * 17 + 3) % (e - 1), 0.5)];
                let q = split_query(&seeds, &dense, &query, &v);
                let (a, b) = (ranked_passages(&g, &computed, &q, 10), ranked_passages(&g, &stored, &q, 10));
                let (a, b) = (a.expect("no ties"), b.expect("no ties"));
                assert_eq!(a.top, b.top, "{e}/{p} trial {trial}: the same passages and scores");
                assert_eq!(a.bound, b.bound);
            }
        }
        // Another graph's solution, or damaged bytes, are refused.
        let g = graph(300, 200);
        let solved = Solved::solve(&g, 300, &vectors(200, 24), 0.5).unwrap();
        assert!(PassageResponse::from_solved(&graph(40, 400), 40, &vectors(400, 24), &solved, Form::Auto).is_none());
        let bytes = solved.to_bytes();
        assert!(Solved::from_bytes(&bytes[..bytes.len() - 8]).is_err());
        assert!(Solved::from_bytes(b"not a walk at all").is_err());
    }

    fn split_equals_full(e: u32, p: u32, form: Form, first_stage: bool) {
        let dim = 24;
        let g = graph(e, p);
        let v = vectors(p as usize, dim);
        let mut response = PassageResponse::compute_as(&g, e as usize, &v, 0.5, form).expect("small graph");
        if first_stage {
            response.passage_screen = Screen::with_first_stage(&v, true);
        }
        let rows = matches!(response.half, Half::Rows { .. });
        assert_eq!(rows, form == Form::Rows || (form == Form::Auto && p <= e), "{form:?}");
        assert!(response.stats().contraction <= 0.5 * (1.0 + 1e-6), "{:?}", response.stats());
        let mut first = None;
        for trial in 0..8u32 {
            let query: Vec<f32> = (0..dim).map(|i| (((i as u32 * 31 + trial * 17) % 13) as f32 - 6.0) / 10.0).collect();
            let dense = v.dots(&query);
            // Entity seeds, one of them the dangling entity (e - 1).
            let entity_seeds = [(trial * 3 % (e - 1), 1.0), ((trial * 41 + 5) % (e - 1), 0.4), (e - 1, 0.2)];
            // Every other query brings the caller's pass over the screen: its int8 one,
            // or one of the first stage, which the walk passes over for its own.
            let every_row = trial % 4 == 1;
            let pass = response.passage_screen.screened(&query, 1, every_row).unwrap();
            assert_eq!(pass.coarse(), first_stage && !every_row);
            let screened = (trial % 2 == 1).then_some(&pass);
            let q = SplitQuery { screened, ..split_query(&entity_seeds, &dense, &query, &v) };
            let got = ranked_passages(&g, &response, &q, 10)
                .unwrap_or_else(|| panic!("{e}/{p} {form:?} trial {trial}: no ties here"));
            // The entities' products taken beforehand (as `ppr` takes them beside its
            // scans) rank exactly as those the walk takes itself; the rows form has none.
            let products = response.entity_products(&g, &query);
            assert_eq!(products.is_some(), !rows, "{form:?}");
            let given = SplitQuery { entity_products: products.as_deref(), ..q };
            let again = ranked_passages(&g, &response, &given, 10).expect("as above");
            assert_eq!(again.top, got.top, "{e}/{p} {form:?} trial {trial}");
            // The full walk from the same seeds, run to convergence.
            let (lo, hi) = range(&dense);
            let mut seeds: Vec<(u32, f64)> = entity_seeds.to_vec();
            seeds.extend(dense.iter().enumerate().map(|(i, &s)| (e + i as u32, 0.05 * ((s - lo) / (hi - lo)) as f64)));
            let full = g.personalized_pagerank(
                &seeds,
                &PprParams { tolerance: 1e-15, max_iterations: 200, ..Default::default() },
            );
            let mut want: Vec<(usize, f64)> = (0..p as usize).map(|i| (i, full.scores[e as usize + i])).collect();
            want.sort_by(|x, y| crate::rank::desc(x.1, y.1).then(x.0.cmp(&y.0)));
            let got_ids: Vec<usize> = got.top.iter().map(|x| x.0 as usize).collect();
            let want_ids: Vec<usize> = want[..10].iter().map(|x| x.0).collect();
            assert_eq!(got_ids, want_ids, "{e}/{p} {form:?} trial {trial}");
            // Scores within the proven bound, which is far below the gaps it separates.
            for (g, w) in got.top.iter().zip(&want) {
                assert!(
                    (g.1 - w.1).abs() <= got.bound + 1e-15,
                    "trial {trial}: {} vs {} (bound {})",
                    g.1,
                    w.1,
                    got.bound
                );
            }
            assert!(got.bound < 1e-3 * want[0].1, "trial {trial}: bound {}", got.bound);
            // And the ranked walk the method ran before agrees.
            let ranked = g.ranked_pagerank(
                &seeds,
                &PprParams::default(),
                &Ranked { nodes: e as usize..(e + p) as usize, n: 10 },
            );
            let mut r: Vec<(usize, f64)> = (0..p as usize).map(|i| (i, ranked.scores[e as usize + i])).collect();
            r.sort_by(|x, y| crate::rank::desc(x.1, y.1).then(x.0.cmp(&y.0)));
            assert_eq!(r[..10].iter().map(|x| x.0).collect::<Vec<_>>(), want_ids);
            first.get_or_insert((q.entity_seeds.to_vec(), query.clone(), dense.clone(), got));
        }
        // The push state kept between queries starts clean: the first query again, after
        // seven others, gives what it gave.
        let (seeds, query, dense, want) = first.unwrap();
        let again = ranked_passages(&g, &response, &split_query(&seeds, &dense, &query, &v), 10).unwrap();
        assert_eq!((again.top, again.pushes, again.residual), (want.top, want.pushes, want.residual));
    }

    #[test]
    fn ties_and_uncovered_input_go_to_the_full_walk() {
        // Entities 0 - 1, passage 2 on entity 0, passage 3 on entity 1: mirror images.
        let g = PprGraph::from_edges(4, &[(0, 1, 1.0), (2, 0, 1.0), (3, 1, 1.0)]);
        let v = Matrix::from_flat(2, vec![0.6, 0.8, 0.8, 0.6]);
        for form in [Form::Rows, Form::Entities] {
            mirrored_passages_tie(&g, &PassageResponse::compute_as(&g, 2, &v, 0.5, form).unwrap(), &v);
        }

        let (e, p, dim) = (50u32, 30u32, 8);
        let g = graph(e, p);
        let v = vectors(p as usize, dim);
        let response = PassageResponse::compute(&g, e as usize, &v, 0.5).unwrap();
        let query = vec![0.1f32; dim];
        let dense = v.dots(&query);
        let q = split_query(&[(3, 1.0)], &dense, &query, &v);
        assert!(ranked_passages(&g, &response, &q, 5).is_some());
        let q = SplitQuery { dense_range: (f32::NAN, q.dense_range.1), ..q };
        assert!(ranked_passages(&g, &response, &q, 5).is_none(), "a range that is not finite goes to the walk");
        let q = SplitQuery { dense_range: range(&dense), damping: 0.6, ..q };
        assert!(ranked_passages(&g, &response, &q, 5).is_none(), "another damping than the response's");
        let other = vectors(p as usize + 1, dim);
        let q = SplitQuery { damping: 0.5, vectors: &other, ..q };
        assert!(ranked_passages(&g, &response, &q, 5).is_none(), "other vectors than the response's");
        // A passage linked to a passage: not the graph the split covers.
        let g = PprGraph::from_edges(4, &[(0, 1, 1.0), (2, 0, 1.0), (3, 2, 1.0)]);
        assert!(PassageResponse::compute(&g, 2, &Matrix::from_flat(2, vec![0.6, 0.8, 0.8, 0.6]), 0.5).is_none());
    }

    fn mirrored_passages_tie(g: &PprGraph, response: &PassageResponse, v: &Matrix) {
        // Equal dense scores and mirrored entity seeds: the two passages tie.
        let query = [0.6f32, 0.6];
        let dense = v.dots(&query);
        assert_eq!(dense[0], dense[1]);
        let seeds = [(0u32, 1.0), (1, 1.0)];
        let q = split_query(&seeds, &dense, &query, v);
        assert!(ranked_passages(g, response, &q, 1).is_none(), "tied passages are not proven apart");
        // Break the tie: passage 2 (index 0) first.
        let seeds = [(0u32, 1.0), (1, 0.5)];
        let q = SplitQuery { entity_seeds: &seeds, ..q };
        assert_eq!(ranked_passages(g, response, &q, 1).unwrap().top[0].0, 0);
    }

    #[test]
    fn without_passage_seeds_the_push_alone_ranks_as_the_full_walk() {
        // (On graph(40, 400) passages j and j + 39 have the same entities: without passage
        // seeds they tie, and go to the full walk.)
        for (e, p, form) in [(300u32, 200u32, Form::Rows), (300, 200, Form::Entities)] {
            let g = graph(e, p);
            let v = vectors(p as usize, 8);
            let response = PassageResponse::compute_as(&g, e as usize, &v, 0.5, form).unwrap();
            for trial in 0..4u32 {
                let seeds = [(trial * 7 % (e - 1), 1.0), ((trial * 13 + 2) % (e - 1), 0.3)];
                let query = vec![0.2f32; 8];
                let q = SplitQuery { passage_weight: 0.0, ..split_query(&seeds, &v.dots(&query), &query, &v) };
                let got = ranked_passages(&g, &response, &q, 10).expect("no ties here");
                let full = g.personalized_pagerank(
                    &seeds,
                    &PprParams { tolerance: 1e-15, max_iterations: 200, ..Default::default() },
                );
                let mut want: Vec<(usize, f64)> = (0..p as usize).map(|i| (i, full.scores[e as usize + i])).collect();
                want.sort_by(|x, y| crate::rank::desc(x.1, y.1).then(x.0.cmp(&y.0)));
                let ids: Vec<usize> = got.top.iter().map(|x| x.0 as usize).collect();
                assert_eq!(ids, want[..10].iter().map(|x| x.0).collect::<Vec<_>>(), "{e}/{p} trial {trial}");
                for (g, w) in got.top.iter().zip(&want) {
                    assert!((g.1 - w.1).abs() <= got.bound + 1e-15, "{} vs {} (bound {})", g.1, w.1, got.bound);
                }
            }
        }
    }

    #[test]
    fn proven_top_needs_every_gap_covered() {
        const ALL: [usize; 4] = [0, 1, 2, 3];
        let scores = [5.0, 4.0, 3.9, 1.0];
        assert_eq!(proven_top(&scores, &[0.01; 4], &ALL, 3, f64::NEG_INFINITY), Some(vec![0, 1, 2]));
        let loose = [0.01, 0.01, 0.01, 3.0];
        assert_eq!(proven_top(&scores, &loose, &ALL, 3, f64::NEG_INFINITY), None, "passage 3 might pass passage 2");
        assert_eq!(
            proven_top(&scores, &loose, &[0, 1, 2], 3, f64::NEG_INFINITY),
            Some(vec![0, 1, 2]),
            "3 is out of reach: not asked"
        );
        assert_eq!(
            proven_top(&scores, &[0.01; 4], &[1, 3], 1, f64::NEG_INFINITY),
            Some(vec![1]),
            "the best among those asked"
        );
        assert_eq!(proven_top(&scores, &[0.06; 4], &ALL, 2, f64::NEG_INFINITY), None, "1 and 2 overlap");
        assert_eq!(
            proven_top(&[1.0, 3.0, 2.0, 0.5], &[0.1; 4], &ALL, 4, f64::NEG_INFINITY),
            Some(vec![1, 2, 0, 3]),
            "all of them"
        );
        assert_eq!(
            proven_top(&[1.0, 2.0, 2.0, 0.5], &[0.0; 4], &ALL, 1, f64::NEG_INFINITY),
            None,
            "a tie is never proven apart"
        );
        assert_eq!(
            proven_top(&[1.0, 2.0, 2.0, 0.5], &[0.0; 4], &ALL, 3, f64::NEG_INFINITY),
            None,
            "nor inside the head"
        );
        assert_eq!(proven_top(&scores, &[0.0; 4], &ALL, 0, f64::NEG_INFINITY), Some(vec![]));
        // Passages outside `among` follow the head, each below `outside`.
        assert_eq!(proven_top(&scores, &[0.01; 4], &[0, 1, 2], 3, 3.95), None, "one outside might pass passage 2");
        assert_eq!(proven_top(&scores, &[0.01; 4], &[0, 1, 2], 3, 3.5), Some(vec![0, 1, 2]));
    }
}
