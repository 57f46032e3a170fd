//! Exact inner-product search over the contiguous matrix, in parallel.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use rayon::prelude::*;

use super::{Matrix, Screen, VectorIndex, VectorIndexKind};
use crate::corpus::PassageIdx;
use crate::embed::encoder::kernels::{gemm, View};
use crate::error::{Error, Result};
use crate::lazy::Lazy;

/// Brute force: one pass over the matrix, rows split across threads, each keeping its
/// own top-k, then merged. Memory-bandwidth bound, so it is the speed reference for HNSW.
///
/// A screened index ([`ExactIndex::screened`]) first scans an int8 copy of the rows, a
/// quarter of the bytes, with proven bounds ([`Screen`]), and scores in f32 only the rows
/// those cannot rule out: the same hits to the bit, for a quarter of the memory traffic
/// and a quarter more memory. Dense retrieval over an index's passages uses it (the
/// scan was 15% of a `dense` server's CPU on 2wiki); other users of exact search scan.
pub struct ExactIndex {
    matrix: Arc<Matrix>,
    /// The int8 codes, made on the first search; `None` for a plain scan.
    screen: Option<Lazy<Screen>>,
}

/// Matrices smaller than this (f32 bytes) are scanned whole even when screened: they sit
/// in the cache, where the screen's second pass costs more than it saves.
const SCREEN_FROM_BYTES: usize = 1 << 20;

/// Rows per parallel task: big enough that scheduling costs little against 64k
/// multiply-adds, small enough to spread a few thousand rows over both cores.
pub(crate) const ROWS_PER_TASK: usize = 1024;

/// Rows of the self-join scored per matrix product: the block's score rows (`BLOCK` x
/// rows x 4 bytes, 51 MB at 50,000 rows) stay small while each product is long enough
/// for the GEMM kernels to run at speed.
const BLOCK: usize = 256;

impl ExactIndex {
    pub fn new(matrix: Arc<Matrix>) -> Self {
        ExactIndex { matrix, screen: None }
    }

    /// An index that screens its scans with int8 codes (see the type's documentation).
    pub fn screened(matrix: Arc<Matrix>) -> Self {
        ExactIndex { matrix, screen: Some(Lazy::new()) }
    }

    /// The screen, for a screened matrix large enough to gain from it.
    fn screen(&self) -> Option<&Screen> {
        let lazy = self.screen.as_ref()?;
        (self.matrix.rows() * self.matrix.dim() * 4 >= SCREEN_FROM_BYTES)
            .then(|| lazy.get_or_compute(|| Screen::new(&self.matrix)))
    }

    /// The best `k` of `rows` (ascending) by inner product with `query`, best first, ties
    /// by row: exact search restricted to those rows (a metadata filter's), its scores to
    /// the bit. A screened index screens them: at a million passages a tenth of them is
    /// 150 MB of f32 rows, 38 MB of codes.
    pub fn top_of_rows(&self, query: &[f32], rows: &[PassageIdx], k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        let dim = self.matrix.dim();
        if query.len() != dim {
            return Err(Error::Embedding(format!("query has {} dimensions, index has {dim}", query.len())));
        }
        if let Some(top) = self.screen().and_then(|screen| screen.top_of_rows(&self.matrix, query, rows, k)) {
            return Ok(top);
        }
        let scored = rows
            .par_chunks(ROWS_PER_TASK)
            .flat_map_iter(|rows| top_of(rows.iter().map(|&p| (p, dot(self.matrix.row(p), query))), k));
        Ok(top_of(scored.collect::<Vec<_>>().into_iter(), k))
    }

    /// For every row, the other rows scoring at least `min_score` against it, at most
    /// `k`, best first (ties by row): `search(row, k + 1)` for each row, filtered, but as
    /// blocked matrix products, which run an order of magnitude faster than a scan per
    /// row (its dot products are memory-bound; a product's are not).
    pub fn neighbours_of_all(&self, k: usize, min_score: f32) -> Vec<Vec<(PassageIdx, f32)>> {
        let rows: Vec<PassageIdx> = (0..self.matrix.rows() as PassageIdx).collect();
        self.neighbours_of(&rows, k, min_score)
    }

    /// [`ExactIndex::neighbours_of_all`] for the given rows only, with the same scores to
    /// the bit: a score is one product's sum over the dimensions in a fixed order,
    /// whichever block its row is in.
    pub fn neighbours_of(&self, rows: &[PassageIdx], k: usize, min_score: f32) -> Vec<Vec<(PassageIdx, f32)>> {
        let mut out = Vec::with_capacity(rows.len());
        self.products(
            rows.iter().map(|&r| self.matrix.row(r)),
            |r, scores| {
                let me = rows[r];
                let found = scores
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| (i as PassageIdx, s))
                    .filter(|&(i, s)| i != me && s >= min_score);
                let mut top = top_k(found, k);
                top.sort();
                top.into_iter().map(|Scored(s, i)| (i, s)).collect::<Vec<_>>()
            },
            &mut out,
        );
        out
    }

    /// The rows scoring at least `min_score` against any of `queries`, ascending.
    pub fn any_above<'a>(&self, queries: impl ExactSizeIterator<Item = &'a [f32]>, min_score: f32) -> Vec<PassageIdx> {
        let mut found: Vec<Vec<PassageIdx>> = Vec::new();
        self.products(
            queries,
            |_, scores| {
                scores.iter().enumerate().filter(|&(_, &s)| s >= min_score).map(|(i, _)| i as PassageIdx).collect()
            },
            &mut found,
        );
        let mut all: Vec<PassageIdx> = found.into_iter().flatten().collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// The rows in tasks of at most [`ROWS_PER_TASK`], each with its first row: a scan
    /// reads a layered matrix (an edited graph's fact vectors) through its runs rather
    /// than a copy of it.
    fn tasks(&self) -> Vec<(usize, &[f32])> {
        let dim = self.matrix.dim();
        let mut tasks = Vec::new();
        for (first, block) in self.matrix.blocks() {
            let chunks = block.chunks(ROWS_PER_TASK * dim).enumerate();
            tasks.extend(chunks.map(|(c, rows)| (first + c * ROWS_PER_TASK, rows)));
        }
        tasks
    }

    /// Scores `queries` against every row, [`BLOCK`] queries per matrix product, and
    /// appends `each(query, scores)` for each query in order.
    fn products<'a, T: Send>(
        &self,
        queries: impl ExactSizeIterator<Item = &'a [f32]>,
        each: impl Fn(usize, &[f32]) -> T + Sync,
        out: &mut Vec<T>,
    ) {
        let (n, dim) = (self.matrix.rows(), self.matrix.dim());
        let flat = self.matrix.as_flat();
        let total = queries.len();
        let mut scores = vec![0f32; BLOCK.min(total) * n];
        let mut block = Vec::with_capacity(BLOCK.min(total) * dim);
        let mut queries = queries.peekable();
        let mut first = 0;
        while queries.peek().is_some() {
            block.clear();
            for q in queries.by_ref().take(BLOCK) {
                block.extend_from_slice(q);
            }
            let m = block.len() / dim;
            // SAFETY: `block` is m x dim and the matrix n x dim, both row-major; `scores`
            // holds m rows of n, and is a buffer of its own.
            unsafe {
                gemm(
                    m,
                    n,
                    dim,
                    scores.as_mut_ptr(),
                    n,
                    View::rows(&block, dim),
                    View::rows(flat, dim).t(),
                    1.0,
                    rayon::current_num_threads(),
                )
            };
            out.par_extend(scores[..m * n].par_chunks(n).enumerate().map(|(r, row)| each(first + r, row)));
            first += m;
        }
    }
}

/// A min-heap entry: the heap's top is the weakest of the current top-k.
#[derive(PartialEq)]
struct Scored(f32, PassageIdx);

impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: lower score = greater, so BinaryHeap (a max-heap) pops the weakest.
        // Ties broken by passage index so results are deterministic.
        crate::rank::desc(self.0, other.0).then(self.1.cmp(&other.1))
    }
}

/// The `k` best of `scores`, best first, ties by passage.
pub(crate) fn top_of(scores: impl Iterator<Item = (PassageIdx, f32)>, k: usize) -> Vec<(PassageIdx, f32)> {
    let mut best = top_k(scores, k);
    best.sort();
    best.into_iter().map(|Scored(s, p)| (p, s)).collect()
}

fn top_k(scores: impl Iterator<Item = (PassageIdx, f32)>, k: usize) -> Vec<Scored> {
    let mut heap = BinaryHeap::with_capacity(k + 1);
    for (i, s) in scores {
        offer(&mut heap, k, i, s);
    }
    heap.into_vec()
}

/// Keeps (i, s) in a top-k heap if it beats the weakest.
#[inline]
fn offer(heap: &mut BinaryHeap<Scored>, k: usize, i: PassageIdx, s: f32) {
    if heap.len() < k {
        heap.push(Scored(s, i));
    } else if let Some(weakest) = heap.peek() {
        if Scored(s, i) < *weakest {
            heap.pop();
            heap.push(Scored(s, i));
        }
    }
}

crate::simd::multiversion! {
    /// Eight independent accumulators let the compiler vectorise without -ffast-math (one
    /// AVX2 register where the CPU has it, two SSE registers otherwise: the same sums in
    /// the same order either way, so the same result to the bit).
    pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
        let mut acc = [0.0f32; 8];
        let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
        let (ra, rb) = (ca.remainder(), cb.remainder());
        for (x, y) in ca.zip(cb) {
            for j in 0..8 {
                acc[j] += x[j] * y[j];
            }
        }
        let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
        acc.iter().sum::<f32>() + tail
    }
}

impl VectorIndex for ExactIndex {
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        let dim = self.matrix.dim();
        if query.len() != dim {
            return Err(Error::Embedding(format!("query has {} dimensions, index has {dim}", query.len())));
        }
        if k == 0 || self.matrix.rows() == 0 {
            return Ok(Vec::new());
        }
        if let Some(screen) = self.screen().filter(|_| query.iter().all(|x| x.is_finite())) {
            return Ok(screen.extremes(&self.matrix, query, k).top);
        }
        let mut merged: Vec<Scored> = self
            .tasks()
            .into_par_iter()
            .flat_map_iter(|(base, rows)| {
                top_k(rows.chunks_exact(dim).enumerate().map(|(r, v)| ((base + r) as PassageIdx, dot(v, query))), k)
            })
            .collect();
        merged.sort();
        merged.truncate(k);
        Ok(merged.into_iter().map(|Scored(s, i)| (i, s)).collect())
    }

    fn search_many(&self, queries: &[&[f32]], k: usize) -> Result<Vec<Vec<(PassageIdx, f32)>>> {
        let dim = self.matrix.dim();
        if let Some(q) = queries.iter().find(|q| q.len() != dim) {
            return Err(Error::Embedding(format!("query has {} dimensions, index has {dim}", q.len())));
        }
        if queries.len() <= 1 || k == 0 || self.matrix.rows() == 0 || self.screen().is_some() {
            return queries.iter().map(|q| self.search(q, k)).collect();
        }
        // Each row is read once and scored against every query while it is in cache:
        // the scan is bound by memory, not by the multiply-adds.
        let chunks: Vec<Vec<Vec<Scored>>> = self
            .tasks()
            .into_par_iter()
            .map(|(base, rows)| {
                let mut heaps: Vec<BinaryHeap<Scored>> =
                    queries.iter().map(|_| BinaryHeap::with_capacity(k + 1)).collect();
                for (r, v) in rows.chunks_exact(dim).enumerate() {
                    for (heap, q) in heaps.iter_mut().zip(queries) {
                        offer(heap, k, (base + r) as PassageIdx, dot(v, q));
                    }
                }
                heaps.into_iter().map(BinaryHeap::into_vec).collect()
            })
            .collect();
        Ok((0..queries.len())
            .map(|qi| {
                let mut merged: Vec<Scored> =
                    chunks.iter().flat_map(|c| c[qi].iter().map(|s| Scored(s.0, s.1))).collect();
                merged.sort();
                merged.truncate(k);
                merged.into_iter().map(|Scored(s, i)| (i, s)).collect()
            })
            .collect())
    }

    fn len(&self) -> usize {
        self.matrix.rows()
    }

    fn kind(&self) -> VectorIndexKind {
        VectorIndexKind::Exact
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screened_index_returns_the_scan_s_hits_to_the_bit() {
        // 3,000 unit rows of 96 dimensions: 1.1 MB of f32, past SCREEN_FROM_BYTES.
        let dim = 96;
        let mut m = Matrix::new(dim);
        let mut state = 99u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let unit = |v: &mut Vec<f32>| {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
        };
        for i in 0..3000 {
            let mut v: Vec<f32> = (0..dim).map(|_| next()).collect();
            unit(&mut v);
            m.push(&v);
            if i % 500 == 0 {
                m.push(&v); // exact ties, to be broken by row
            }
        }
        let m = Arc::new(m);
        assert!(m.rows() * dim * 4 >= SCREEN_FROM_BYTES);
        let (plain, screened) = (ExactIndex::new(m.clone()), ExactIndex::screened(m.clone()));
        for q in 0..40u32 {
            // Rows of the matrix (their own best match, ties included) and fresh queries.
            let query: Vec<f32> = if q % 2 == 0 {
                m.row(q * 70).to_vec()
            } else {
                let mut v: Vec<f32> = (0..dim).map(|_| next()).collect();
                unit(&mut v);
                v
            };
            for k in [1, 10, 100] {
                let (a, b) = (plain.search(&query, k).unwrap(), screened.search(&query, k).unwrap());
                assert_eq!(a.len(), k);
                assert!(a.iter().zip(&b).all(|(x, y)| x.0 == y.0 && x.1.to_bits() == y.1.to_bits()), "{a:?}\n{b:?}");
            }
            let many = screened.search_many(&[&query, m.row(5)], 10).unwrap();
            assert_eq!(many[0], plain.search(&query, 10).unwrap());
        }
        assert!(screened.screen.as_ref().unwrap().get().is_some(), "the screen was used");
    }

    #[test]
    fn neighbours_of_all_equal_a_search_per_row() {
        let dim = 8;
        let mut m = Matrix::new(dim);
        let mut state = 12345u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.3
        };
        for _ in 0..700 {
            let mut v: Vec<f32> = (0..dim).map(|_| next()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            m.push(&v);
        }
        let idx = ExactIndex::new(Arc::new(m.clone()));
        let (k, min) = (5, 0.9);
        let all = idx.neighbours_of_all(k, min);
        assert_eq!(all.len(), 700, "more rows than one block");
        let (mut linked, mut full) = (0, 0);
        for (a, got) in all.iter().enumerate() {
            let want: Vec<(PassageIdx, f32)> = idx
                .search(m.row(a as u32), k + 1)
                .unwrap()
                .into_iter()
                .filter(|&(b, s)| b as usize != a && s >= min)
                .take(k)
                .collect();
            let ids = |l: &[(PassageIdx, f32)]| l.iter().map(|h| h.0).collect::<Vec<_>>();
            if ids(got) != ids(&want) {
                // Only a near-tie may differ: the product rounds in another order.
                let edge = |s: f32| (s - min).abs() < 1e-5 || want.last().is_some_and(|w| (s - w.1).abs() < 1e-5);
                for &(b, s) in got.iter().chain(&want) {
                    assert!(
                        ids(got).contains(&b) == ids(&want).contains(&b) || edge(s),
                        "row {a}: {got:?} vs {want:?}"
                    );
                }
            }
            for &(b, s) in got {
                assert!(b as usize != a && s >= min);
                assert!((s - dot(m.row(a as u32), m.row(b))).abs() < 1e-5);
            }
            assert!(got.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
            linked += got.len();
            full += usize::from(got.len() == k);
        }
        assert!(linked > 700 && full > 10, "the data must give rows neighbours, some a full list: {linked}, {full}");
    }

    #[test]
    fn a_nan_score_ranks_last_not_first() {
        let mut m = Matrix::new(2);
        m.push(&[f32::NAN, 0.0]);
        m.push(&[0.2, 0.0]);
        m.push(&[1.0, 0.0]);
        let idx = ExactIndex::new(Arc::new(m));
        let all = idx.search(&[1.0, 0.0], 3).unwrap();
        assert_eq!(all.iter().map(|h| h.0).collect::<Vec<_>>(), vec![2, 1, 0]);
        let two = idx.search(&[1.0, 0.0], 2).unwrap();
        assert_eq!(two.iter().map(|h| h.0).collect::<Vec<_>>(), vec![2, 1]);
    }

    #[test]
    fn finds_the_top_k_in_order_across_chunks() {
        let dim = 3;
        let n = 3000;
        let mut m = Matrix::new(dim);
        for i in 0..n {
            let x = i as f32 / n as f32;
            m.push(&[x, 1.0 - x, 0.0]);
        }
        let idx = ExactIndex::new(Arc::new(m));
        let hits = idx.search(&[1.0, 0.0, 0.0], 3).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![2999, 2998, 2997]);
        let hits = idx.search(&[0.0, 1.0, 0.0], 2).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![0, 1]);
        assert!(idx.search(&[1.0, 0.0], 2).is_err());
    }

    #[test]
    fn one_scan_for_many_queries_matches_one_search_each() {
        let dim = 5;
        let mut m = Matrix::new(dim);
        for i in 0..2500u32 {
            let v: Vec<f32> = (0..dim as u32).map(|j| ((i * 31 + j * 17) % 97) as f32 / 97.0 - 0.4).collect();
            m.push(&v);
        }
        let idx = ExactIndex::new(Arc::new(m));
        let queries: Vec<Vec<f32>> =
            (0..4).map(|q| (0..dim).map(|j| ((q * 7 + j * 3) % 5) as f32 - 2.0).collect()).collect();
        let refs: Vec<&[f32]> = queries.iter().map(Vec::as_slice).collect();
        let many = idx.search_many(&refs, 7).unwrap();
        assert_eq!(many.len(), 4);
        for (q, got) in refs.iter().zip(&many) {
            assert_eq!(got, &idx.search(q, 7).unwrap());
        }
        assert!(idx.search_many(&[&[1.0, 0.0][..]], 3).is_err());
    }

    #[test]
    fn dot_matches_naive() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.1).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.05).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-4);
    }
}
