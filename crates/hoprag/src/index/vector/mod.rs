//! Vector retrieval: the [`VectorIndex`] seam, the contiguous vector matrix, exact search
//! and HNSW.

mod exact;
mod hnsw;
mod screen;

pub use exact::ExactIndex;
pub use hnsw::{breadth_for as hnsw_breadth, HnswIndex, HnswParams, Quantization};
pub use screen::{Extremes, Screen};

use serde::{Deserialize, Serialize};

use crate::corpus::PassageIdx;
use crate::error::Result;

/// Nearest neighbours by inner product (cosine, as vectors are unit length).
pub trait VectorIndex: Send + Sync {
    /// The `k` passages most similar to `query`, best first, with cosine scores.
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(PassageIdx, f32)>>;
    /// Several searches, one list per query, each as [`search`](VectorIndex::search)
    /// returns it. Exact search reads the matrix once for all of them (BridgeRAG's five
    /// expansion searches), other indexes search one by one.
    fn search_many(&self, queries: &[&[f32]], k: usize) -> Result<Vec<Vec<(PassageIdx, f32)>>> {
        queries.iter().map(|q| self.search(q, k)).collect()
    }
    /// [`search`](VectorIndex::search) with a given search breadth (an HNSW graph's ef:
    /// candidates kept while searching); exact indexes ignore it.
    fn search_with_breadth(&self, query: &[f32], k: usize, breadth: usize) -> Result<Vec<(PassageIdx, f32)>> {
        let _ = breadth;
        self.search(query, k)
    }
    /// The breadth [`search`](VectorIndex::search) uses for `k` results (`k` for exact
    /// indexes).
    fn search_breadth(&self, k: usize) -> usize {
        k
    }
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `exact` or `hnsw`, for traces and reports.
    fn kind(&self) -> VectorIndexKind;
    /// Whether the scores are approximate (a quantized copy of the vectors): such an
    /// index is searched through [`Rescored`], which scores its candidates exactly.
    fn approximate_scores(&self) -> bool {
        false
    }
}

/// An approximate index whose candidates are re-scored on the f32 vectors: the search
/// keeps `breadth` candidates anyway, so asking for all of them and ranking them by their
/// exact inner product costs `breadth` dot products (0.1 ms at 600 x 384) and gives exact
/// scores, in the order exact search would give them among the candidates.
pub struct Rescored {
    inner: std::sync::Arc<dyn VectorIndex>,
    vectors: std::sync::Arc<Matrix>,
}

impl Rescored {
    /// `inner` as it is when its scores are exact, else re-scored on `vectors`.
    pub fn wrap(inner: std::sync::Arc<dyn VectorIndex>, vectors: std::sync::Arc<Matrix>) -> std::sync::Arc<dyn VectorIndex> {
        if inner.approximate_scores() {
            std::sync::Arc::new(Rescored { inner, vectors })
        } else {
            inner
        }
    }
}

impl VectorIndex for Rescored {
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        let breadth = self.inner.search_breadth(k);
        self.search_with_breadth(query, k, breadth)
    }

    fn search_with_breadth(&self, query: &[f32], k: usize, breadth: usize) -> Result<Vec<(PassageIdx, f32)>> {
        let candidates = self.inner.search_with_breadth(query, k.max(breadth), breadth)?;
        let mut scored: Vec<(PassageIdx, f32)> =
            candidates.into_iter().map(|(p, _)| (p, exact::dot(self.vectors.row(p), query))).collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        Ok(scored)
    }

    fn search_breadth(&self, k: usize) -> usize {
        self.inner.search_breadth(k)
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn kind(&self) -> VectorIndexKind {
        self.inner.kind()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum VectorIndexKind {
    /// Exact below [`HNSW_THRESHOLD`] passages, HNSW from there on.
    #[default]
    Auto,
    Exact,
    Hnsw,
}

/// Corpus size from which `auto` builds an HNSW graph: exact search over 50,000
/// 384-d vectors reads 77 MB per query (about 10 ms on two cores), past which the
/// approximate index pays for its build time and recall loss.
pub const HNSW_THRESHOLD: usize = 50_000;

impl VectorIndexKind {
    pub fn resolve(self, n: usize) -> VectorIndexKind {
        match self {
            VectorIndexKind::Auto if n >= HNSW_THRESHOLD => VectorIndexKind::Hnsw,
            VectorIndexKind::Auto => VectorIndexKind::Exact,
            k => k,
        }
    }
}

impl std::str::FromStr for VectorIndexKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(VectorIndexKind::Auto),
            "exact" => Ok(VectorIndexKind::Exact),
            "hnsw" => Ok(VectorIndexKind::Hnsw),
            _ => Err(format!("unknown vector index {s:?}: expected auto, exact or hnsw")),
        }
    }
}

/// Row-major `n x dim` matrix of unit vectors, one row per passage.
#[derive(Debug, Clone, Default)]
pub struct Matrix {
    dim: usize,
    data: Vec<f32>,
}

impl Matrix {
    pub fn new(dim: usize) -> Self {
        Matrix { dim, data: Vec::new() }
    }

    pub fn from_flat(dim: usize, data: Vec<f32>) -> Self {
        assert!(dim > 0 && data.len().is_multiple_of(dim), "matrix data is not a whole number of rows");
        Matrix { dim, data }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn rows(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }

    pub fn row(&self, i: PassageIdx) -> &[f32] {
        let i = i as usize;
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    pub fn push(&mut self, v: &[f32]) {
        assert_eq!(v.len(), self.dim, "vector dimension");
        self.data.extend_from_slice(v);
    }

    /// The inner product of every row with `query`, in row order (one parallel pass;
    /// for methods that need every score, e.g. min-max normalisation over all rows).
    pub fn dots(&self, query: &[f32]) -> Vec<f32> {
        use rayon::prelude::*;
        assert_eq!(query.len(), self.dim, "query dimension");
        let mut out = vec![0f32; self.rows()];
        if out.is_empty() {
            return out;
        }
        let step = exact::ROWS_PER_TASK;
        out.par_chunks_mut(step).zip(self.data.par_chunks(step * self.dim)).for_each(|(scores, rows)| {
            for (s, row) in scores.iter_mut().zip(rows.chunks_exact(self.dim)) {
                *s = exact::dot(row, query);
            }
        });
        out
    }

    pub fn as_flat(&self) -> &[f32] {
        &self.data
    }

    /// The row-major data, taken.
    pub fn into_flat(self) -> Vec<f32> {
        self.data
    }

    /// Little-endian bytes, the on-disk format.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.data.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    pub fn from_le_bytes(dim: usize, bytes: &[u8]) -> Option<Self> {
        if dim == 0 || !bytes.len().is_multiple_of(4 * dim) {
            return None;
        }
        let data = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        Some(Matrix { dim, data })
    }
}
