//! Personalized PageRank by sparse power iteration.
//!
//! Written here rather than taken from a crate: the graph crates on crates.io (petgraph,
//! graphrs) offer global PageRank on their own graph types but not a personalized one
//! over a compressed adjacency, which is what query-time PPR needs to be fast.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{EdgeKind, EntityGraph};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct PprParams {
    /// Probability of following an edge rather than jumping back to a seed (HippoRAG
    /// uses 0.5).
    pub damping: f64,
    /// Stop when the L1 change of the score vector falls below this.
    pub tolerance: f64,
    pub max_iterations: usize,
    /// Stop as soon as the order of the nodes asked for is proven (see
    /// [`PprGraph::ranked_pagerank`]) rather than at `tolerance`: the same ranking in
    /// fewer iterations.
    pub stop_when_ranked: bool,
    /// Walk the passage seeds once per graph and the entity seeds by local push, by
    /// linearity ([`super::split_ppr`]), when a caller ranks passages; the full walk runs
    /// when the split cannot prove the ranking, or the graph is too large for it.
    pub split: bool,
    /// Edge steps the split walk's push may take to prove its ranking; past them, on a
    /// graph with more entries than that (where the full walk, about a step per entry,
    /// would cost more), it ranks by its estimates and the push's next step, unproven
    /// (the trace says so, with the largest bound); on a smaller graph the full walk runs.
    /// What separates the last few of a million passages can take hundreds of millions of
    /// steps, then a full walk of seconds; on the real subsets a push proves its ranking
    /// in a median of 18,000 steps. 0: prove, or run the full walk, however long it takes.
    pub split_budget: usize,
}

/// [`PprParams::split_budget`]'s default: 2^22 edge steps, tens of milliseconds.
pub const SPLIT_BUDGET: usize = 1 << 22;

impl Default for PprParams {
    fn default() -> Self {
        PprParams {
            damping: 0.5,
            tolerance: 1e-7,
            max_iterations: 100,
            stop_when_ranked: true,
            split: true,
            split_budget: SPLIT_BUDGET,
        }
    }
}

/// The nodes whose ranking a caller needs: the `n` highest-scoring of `nodes`, in order;
/// with `within`, of those it admits (by position in `nodes`: a metadata filter's
/// passages).
#[derive(Debug, Clone)]
pub struct Ranked<'a> {
    pub nodes: std::ops::Range<usize>,
    pub n: usize,
    pub within: Option<&'a crate::filter::Selection>,
}

/// An undirected weighted graph in compressed form, stored for gathering: row `j` lists
/// the nodes `i` linked to `j` with the transition probability `w_ij / deg_i`.
///
/// The rows are stored [`LANES`] at a time (sliced ELLPACK): rows of similar length side
/// by side, entry `k` of each next to each other, the shorter ones padded with zero
/// probabilities. A row's sum is a chain of dependent additions, and most rows are short;
/// summing several rows at once keeps that many chains in flight.
#[derive(Debug, Clone)]
pub struct PprGraph {
    nodes: usize,
    edges: usize,
    slices: Vec<Slice>,
    sources: Vec<u32>,
    probs: Vec<f32>,
    /// Nodes with no edges: their mass returns to the seeds.
    dangling: Vec<u32>,
    /// Weighted degree of each node.
    degree: Vec<f64>,
    /// Where each node's row is: `slice · LANES + lane`, `u32::MAX` for a dangling node.
    row_slot: Vec<u32>,
}

/// Rows summed together.
const LANES: usize = 4;

/// `next`'s rows, written from several threads, each row by one.
#[derive(Clone, Copy)]
struct SharedRows(*mut f64);
// SAFETY: only used by `gather`, whose writers' rows are disjoint.
unsafe impl Send for SharedRows {}
unsafe impl Sync for SharedRows {}

impl SharedRows {
    /// Element `i`. (A method, so that closures capture the wrapper, not the pointer.)
    fn at(self, i: usize) -> *mut f64 {
        // SAFETY: callers stay inside the buffer.
        unsafe { self.0.add(i) }
    }
}

#[derive(Debug, Clone)]
struct Slice {
    /// The rows, `u32::MAX` for an unused lane.
    rows: [u32; LANES],
    /// Entries `start..start + len · LANES` of `sources` and `probs`, lane-interleaved.
    start: usize,
    len: usize,
}

#[derive(Debug, Clone)]
pub struct PprResult {
    pub scores: Vec<f64>,
    pub iterations: usize,
    pub residual: f64,
    /// Whether the walk stopped because the ranking asked for was proven.
    pub ranked: bool,
}

impl PprGraph {
    /// Builds the graph from undirected weighted edges over `n` nodes. Parallel edges add
    /// up; self-loops are ignored.
    pub fn from_edges(n: usize, edges: &[(u32, u32, f32)]) -> PprGraph {
        let mut degree = vec![0f64; n];
        let mut count = vec![0usize; n + 1];
        for &(a, b, w) in edges {
            if a == b || w <= 0.0 {
                continue;
            }
            degree[a as usize] += w as f64;
            degree[b as usize] += w as f64;
            count[a as usize + 1] += 1;
            count[b as usize + 1] += 1;
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let offsets = count.clone();
        let mut fill = count;
        let mut row_sources = vec![0u32; offsets[n]];
        let mut row_probs = vec![0f32; offsets[n]];
        for &(a, b, w) in edges {
            if a == b || w <= 0.0 {
                continue;
            }
            // Row b gathers from a, row a gathers from b.
            for (to, from) in [(b, a), (a, b)] {
                let slot = fill[to as usize];
                row_sources[slot] = from;
                row_probs[slot] = (w as f64 / degree[from as usize]) as f32;
                fill[to as usize] += 1;
            }
        }
        // Longest rows first, so that the rows of a slice are about as long.
        let mut order: Vec<u32> = (0..n as u32).filter(|&j| offsets[j as usize + 1] > offsets[j as usize]).collect();
        order.sort_by_key(|&j| (std::cmp::Reverse(offsets[j as usize + 1] - offsets[j as usize]), j));
        let (mut slices, mut sources, mut probs) = (Vec::new(), Vec::new(), Vec::new());
        let mut row_slot = vec![u32::MAX; n];
        for (slot, &j) in order.iter().enumerate() {
            row_slot[j as usize] = slot as u32;
        }
        for group in order.chunks(LANES) {
            let len = group.iter().map(|&j| offsets[j as usize + 1] - offsets[j as usize]).max().unwrap_or(0);
            let mut rows = [u32::MAX; LANES];
            rows[..group.len()].copy_from_slice(group);
            let start = sources.len();
            for k in 0..len {
                for &row in &rows {
                    // Past a row's end, or in an unused lane: a zero-probability entry.
                    let (lo, hi) = match row {
                        u32::MAX => (0, 0),
                        j => (offsets[j as usize], offsets[j as usize + 1]),
                    };
                    let (from, p) = if lo + k < hi { (row_sources[lo + k], row_probs[lo + k]) } else { (0, 0.0) };
                    sources.push(from);
                    probs.push(p);
                }
            }
            slices.push(Slice { rows, start, len });
        }
        let dangling = (0..n as u32).filter(|&i| degree[i as usize] == 0.0).collect();
        PprGraph { nodes: n, edges: offsets[n] / 2, slices, sources, probs, dangling, degree, row_slot }
    }

    /// Node `j`'s weighted degree.
    pub fn degree(&self, j: usize) -> f64 {
        self.degree[j]
    }

    /// The nodes `i` linked to `j`, each with the probability `w_ij / deg_i` of a step
    /// from `i` to `j` (zero-probability padding included); nothing for a dangling node.
    pub fn row(&self, j: usize) -> impl Iterator<Item = (u32, f32)> + '_ {
        let slot = self.row_slot[j];
        let (start, len, lane) = match slot {
            u32::MAX => (0, 0, 0),
            s => {
                let slice = &self.slices[s as usize / LANES];
                (slice.start, slice.len, s as usize % LANES)
            }
        };
        (0..len).map(move |k| (self.sources[start + k * LANES + lane], self.probs[start + k * LANES + lane]))
    }

    /// The directed entries stored (both directions of each edge, padding included): the
    /// cost of one full iteration.
    pub fn entries(&self) -> usize {
        self.sources.len()
    }

    /// Whether node `j` has no edges.
    pub fn is_dangling(&self, j: usize) -> bool {
        self.row_slot[j] == u32::MAX
    }

    /// `Σ_i p_ij · x[i]` for every node `j` in `rows`, in order: one step of the walk's
    /// gather for those rows only, over the slices that hold them (split across rayon's
    /// threads). Every source of those rows must index `x` (padding reads `x[0]`).
    pub(super) fn gather(&self, rows: std::ops::Range<usize>, x: &[f64]) -> Vec<f64> {
        let mut out = vec![0f64; rows.len()];
        let shared = SharedRows(out.as_mut_ptr());
        let wanted = |j: u32| j != u32::MAX && rows.contains(&(j as usize));
        self.slices.par_iter().with_min_len(256).for_each(|slice| {
            let lanes = slice.rows.map(wanted);
            if !lanes.contains(&true) {
                return;
            }
            // A slice may hold other rows beside them, whose sources `x` need not cover.
            let mut acc = [0f64; LANES];
            let (src, prob) = (&self.sources[slice.start..], &self.probs[slice.start..]);
            for (src, prob) in src.chunks_exact(LANES).zip(prob.chunks_exact(LANES)).take(slice.len) {
                for (((a, &from), &p), &on) in acc.iter_mut().zip(src).zip(prob).zip(&lanes) {
                    if on {
                        *a += x[from as usize] * p as f64;
                    }
                }
            }
            for (&j, &a) in slice.rows.iter().zip(&acc) {
                if wanted(j) {
                    // SAFETY: each row is in one slice, so each slot is written once.
                    unsafe { *shared.at(j as usize - rows.start) = a };
                }
            }
        });
        out
    }

    /// The entity graph as nodes `0..E` (entities) and `E..E+P` (passages): relation and
    /// synonym edges between entities (synonyms weighted by their cosine), and an edge of
    /// weight 1 between each passage and each entity it mentions.
    pub fn from_entity_graph(g: &EntityGraph) -> PprGraph {
        let e = g.entities.len() as u32;
        let mut edges: Vec<(u32, u32, f32)> = g
            .edges
            .iter()
            .map(|x| (x.a, x.b, if x.kind == EdgeKind::Synonym { x.weight } else { x.weight.max(1.0) }))
            .collect();
        for (p, ents) in g.passage_entities.iter().enumerate() {
            edges.extend(ents.iter().map(|&x| (e + p as u32, x, 1.0)));
        }
        Self::from_edges(g.entities.len() + g.passage_entities.len(), &edges)
    }

    pub fn nodes(&self) -> usize {
        self.nodes
    }

    pub fn edges(&self) -> usize {
        self.edges
    }

    /// PPR from weighted seed nodes (weights are normalised to sum to one).
    pub fn personalized_pagerank(&self, seeds: &[(u32, f64)], params: &PprParams) -> PprResult {
        self.walk(seeds, params, None)
    }

    /// PPR for a caller that needs only the order of the best `ranked.n` of
    /// `ranked.nodes` (and which they are). The power iteration is a contraction by
    /// `damping` in L1, so after an iteration whose change is `r` every score is within
    /// `b = r · damping / (1 − damping)` of the exact solution; once each of those nodes
    /// leads the next by more than `2b`, no later iteration can reorder them and the walk
    /// stops. Ties never separate, so tied nodes run to `tolerance` as before.
    pub fn ranked_pagerank(&self, seeds: &[(u32, f64)], params: &PprParams, ranked: &Ranked) -> PprResult {
        self.walk(seeds, params, params.stop_when_ranked.then_some(ranked))
    }

    fn walk(&self, seeds: &[(u32, f64)], params: &PprParams, ranked: Option<&Ranked>) -> PprResult {
        let n = self.nodes();
        let total: f64 = seeds.iter().map(|s| s.1.max(0.0)).sum();
        let mut reset = vec![0f64; n];
        if total <= 0.0 {
            return PprResult { scores: reset, iterations: 0, residual: 0.0, ranked: false };
        }
        for &(s, w) in seeds {
            reset[s as usize] += w.max(0.0) / total;
        }
        let d = params.damping;
        let mut scores = reset.clone();
        let mut next = vec![0f64; n];
        let (mut iterations, mut residual, mut proven) = (0, f64::INFINITY, false);
        let contraction = d / (1.0 - d).max(f64::MIN_POSITIVE);
        // Small graphs are faster on one thread than with rayon's scheduling.
        let parallel = self.sources.len() > 200_000;
        let mut sums = vec![0f64; self.slices.len() * LANES];
        while iterations < params.max_iterations && residual > params.tolerance {
            let lost: f64 = self.dangling.iter().map(|&i| scores[i as usize]).sum();
            // Each row's terms are added in the order the row lists them, as one chain
            // per row would (padding adds zeros at the end), so every sum is the same.
            let slice_sums = |(slice, out): (&Slice, &mut [f64])| {
                let mut acc = [0f64; LANES];
                let (src, prob) = (&self.sources[slice.start..], &self.probs[slice.start..]);
                for (src, prob) in src.chunks_exact(LANES).zip(prob.chunks_exact(LANES)).take(slice.len) {
                    for ((a, &from), &p) in acc.iter_mut().zip(src).zip(prob) {
                        *a += scores[from as usize] * p as f64;
                    }
                }
                out.copy_from_slice(&acc);
            };
            if parallel {
                self.slices.par_iter().zip(sums.par_chunks_mut(LANES)).with_min_len(1024).for_each(slice_sums);
            } else {
                self.slices.iter().zip(sums.chunks_mut(LANES)).for_each(slice_sums);
            }
            let score = |j: usize, gathered: f64| (1.0 - d) * reset[j] + d * (gathered + lost * reset[j]);
            for (slice, acc) in self.slices.iter().zip(sums.chunks(LANES)) {
                for (&j, &a) in slice.rows.iter().zip(acc) {
                    if j != u32::MAX {
                        next[j as usize] = score(j as usize, a);
                    }
                }
            }
            // The rows without edges, in no slice, are the dangling nodes: they gather
            // nothing.
            for &j in &self.dangling {
                next[j as usize] = score(j as usize, 0.0);
            }
            residual = scores.iter().zip(&next).map(|(a, b)| (a - b).abs()).sum();
            std::mem::swap(&mut scores, &mut next);
            iterations += 1;
            if let Some(r) = ranked {
                if settled(&scores, r, residual * contraction) {
                    proven = true;
                    break;
                }
            }
        }
        PprResult { scores, iterations, residual, ranked: proven }
    }
}

/// Whether the best `r.n` of `r.nodes` and their order can no longer change when every
/// score may still move by up to `bound`.
fn settled(scores: &[f64], r: &Ranked, bound: f64) -> bool {
    let slice = &scores[r.nodes.clone()];
    if r.n == 0 || !bound.is_finite() {
        return r.n == 0;
    }
    let by_score = |a: &usize, b: &usize| crate::rank::desc(slice[*a], slice[*b]).then(a.cmp(b));
    let mut order: Vec<usize> = (0..slice.len()).filter(|&i| r.within.is_none_or(|s| s.contains(i))).collect();
    let head = (r.n + 1).min(order.len());
    if head < order.len() {
        order.select_nth_unstable_by(head - 1, by_score);
        order.truncate(head);
    }
    order.sort_by(by_score);
    order.windows(2).all(|w| slice[w[0]] - slice[w[1]] > 2.0 * bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_closed_form_on_a_path() {
        // 0 - 1 - 2, seed 0, damping 0.5; p = 0.5 r + 0.5 P^T p gives
        // p0 = 0.5 + p1/4, p2 = p1/4, p1 = (p0 + p2)/2, hence p1 = 1/3.
        let g = PprGraph::from_edges(3, &[(0, 1, 1.0), (1, 2, 1.0)]);
        let r = g.personalized_pagerank(&[(0, 1.0)], &PprParams { tolerance: 1e-12, ..Default::default() });
        let expected = [0.5 + 1.0 / 12.0, 1.0 / 3.0, 1.0 / 12.0];
        for (a, b) in r.scores.iter().zip(expected) {
            assert!((a - b).abs() < 1e-9, "{:?}", r.scores);
        }
        assert!((r.scores.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn dangling_mass_returns_to_seeds_and_no_seed_gives_zeros() {
        let g = PprGraph::from_edges(4, &[(0, 1, 2.0)]);
        let r = g.personalized_pagerank(&[(0, 1.0), (3, 1.0)], &PprParams::default());
        assert!((r.scores.iter().sum::<f64>() - 1.0).abs() < 1e-6);
        assert_eq!(r.scores[2], 0.0);
        assert!(r.scores[3] > r.scores[1]);
        assert!(g.personalized_pagerank(&[], &PprParams::default()).scores.iter().all(|&x| x == 0.0));
    }

    /// A ring of `n` nodes with chords, pseudo-random weights (deterministic).
    fn random_graph(n: u32) -> PprGraph {
        let mut edges = Vec::new();
        for i in 0..n {
            edges.push((i, (i + 1) % n, 1.0 + (i * 37 % 11) as f32));
            edges.push((i, (i * 7 + 3) % n, 0.5 + (i * 13 % 5) as f32));
        }
        PprGraph::from_edges(n as usize, &edges)
    }

    fn ranking(scores: &[f64], nodes: std::ops::Range<usize>, n: usize) -> Vec<usize> {
        let mut order: Vec<usize> = nodes.collect();
        order.sort_by(|&a, &b| crate::rank::desc(scores[a], scores[b]).then(a.cmp(&b)));
        order.truncate(n);
        order
    }

    #[test]
    fn a_proven_ranking_is_the_converged_one_in_fewer_iterations() {
        let g = random_graph(500);
        let seeds: Vec<(u32, f64)> = (0..500).map(|i| (i, 1.0 + (i * 31 % 17) as f64)).chain([(3, 400.0)]).collect();
        let exact = g.personalized_pagerank(&seeds, &PprParams { tolerance: 1e-14, ..Default::default() });
        let ranked = Ranked { nodes: 100..400, n: 15, within: None };
        let r = g.ranked_pagerank(&seeds, &PprParams::default(), &ranked);
        assert!(r.ranked, "this ranking has no ties, so it is proven");
        assert_eq!(ranking(&r.scores, 100..400, 15), ranking(&exact.scores, 100..400, 15));
        // Off, the walk runs to the tolerance as before.
        let off = g.ranked_pagerank(&seeds, &PprParams { stop_when_ranked: false, ..Default::default() }, &ranked);
        assert!(!off.ranked);
        assert_eq!(off.iterations, g.personalized_pagerank(&seeds, &PprParams::default()).iterations);
        assert!(
            r.iterations < off.iterations,
            "proven after {} iterations, tolerance after {}",
            r.iterations,
            off.iterations
        );
    }

    #[test]
    fn tied_nodes_are_never_proven_apart() {
        // 1 and 2 hang symmetrically off 0: their scores are equal at every iteration.
        let g = PprGraph::from_edges(3, &[(0, 1, 1.0), (0, 2, 1.0)]);
        let r = g.ranked_pagerank(&[(0, 1.0)], &PprParams::default(), &Ranked { nodes: 1..3, n: 1, within: None });
        assert!(!r.ranked);
        assert!(r.residual <= PprParams::default().tolerance);
        assert_eq!(r.scores[1], r.scores[2]);
    }

    #[test]
    fn rows_of_every_length_match_a_dense_power_iteration() {
        // A hub (node 0, degree 40), a chain, a parallel edge and an isolated node (41):
        // rows of many lengths share slices and are padded.
        let n = 42;
        let mut edges: Vec<(u32, u32, f32)> = (1..41).map(|i| (0, i, 1.0 + (i % 3) as f32)).collect();
        edges.extend((1..40).map(|i| (i, i + 1, 0.5)));
        edges.push((5, 6, 2.0));
        let g = PprGraph::from_edges(n, &edges);
        let seeds = [(3u32, 1.0), (17, 2.0), (41, 0.5)];
        let got = g.personalized_pagerank(&seeds, &PprParams { tolerance: 1e-13, ..Default::default() });
        // Dense reference: p = (1 - d) r + d (Pᵀ p + lost · r).
        let mut w = vec![vec![0f64; n]; n];
        for &(a, b, x) in &edges {
            w[a as usize][b as usize] += x as f64;
            w[b as usize][a as usize] += x as f64;
        }
        let deg: Vec<f64> = w.iter().map(|row| row.iter().sum()).collect();
        let mut r = vec![0f64; n];
        seeds.iter().for_each(|&(s, x)| r[s as usize] = x / 3.5);
        let mut p = r.clone();
        for _ in 0..200 {
            let lost: f64 = (0..n).filter(|&i| deg[i] == 0.0).map(|i| p[i]).sum();
            p = (0..n)
                .map(|j| {
                    let gathered: f64 = (0..n).filter(|&i| deg[i] > 0.0).map(|i| p[i] * w[i][j] / deg[i]).sum();
                    0.5 * r[j] + 0.5 * (gathered + lost * r[j])
                })
                .collect();
        }
        // Within the f32 rounding of the stored transition probabilities.
        for (a, b) in got.scores.iter().zip(&p) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
    }

    #[test]
    fn gather_sums_the_rows_asked_for() {
        // Node 0 is a hub: its row shares a slice with others, whose sources are outside
        // the `x` given (only nodes 0..3 are covered).
        let g =
            PprGraph::from_edges(8, &[(0, 3, 1.0), (0, 4, 2.0), (1, 5, 1.0), (2, 6, 0.5), (1, 7, 1.0), (0, 5, 1.0)]);
        let x = [0.3, -1.5, 2.0];
        let got = g.gather(3..8, &x);
        for (i, j) in (3..8).enumerate() {
            let want: f64 = g.row(j).map(|(u, p)| if p > 0.0 { p as f64 * x[u as usize] } else { 0.0 }).sum();
            assert_eq!(got[i], want, "row {j}");
        }
        assert!(got.iter().all(|&v| v != 0.0), "every row asked for has a source in x: {got:?}");
    }

    #[test]
    fn weights_steer_the_walk() {
        // From 0, the heavier edge to 1 gets more mass than the light edge to 2.
        let g = PprGraph::from_edges(3, &[(0, 1, 3.0), (0, 2, 1.0)]);
        let r = g.personalized_pagerank(&[(0, 1.0)], &PprParams::default());
        assert!(r.scores[1] > 2.5 * r.scores[2]);
    }
}
