//! Approximate search with an HNSW graph (usearch), for corpora where a full scan per
//! query is too slow.

use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use super::{Matrix, VectorIndex, VectorIndexKind};
use crate::corpus::PassageIdx;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct HnswParams {
    /// Graph degree (M).
    pub connectivity: usize,
    /// Candidate list size while inserting (efConstruction).
    pub expansion_add: usize,
    /// Candidate list size while searching (ef); raised to k when k is larger.
    pub expansion_search: usize,
    /// How the graph stores its copy of the vectors. Indexes written before this field
    /// existed hold f32.
    #[serde(default = "Quantization::f32")]
    pub quantization: Quantization,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams { connectivity: 16, expansion_add: 128, expansion_search: 128, quantization: Quantization::I8 }
    }
}

/// The scalar type of the graph's own copy of the vectors (usearch keeps one beside the
/// index's f32 matrix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantization {
    /// The vectors as they are: scores exact, 4 bytes a dimension.
    F32,
    /// One byte a dimension (usearch scales each unit vector by 127): a quarter of the
    /// memory and memory traffic, so a faster build and search. Its scores are
    /// approximate, so searches re-score their candidates on the f32 matrix
    /// ([`super::Rescored`]): only the graph's walk is approximate, as with f32.
    I8,
}

impl Quantization {
    fn f32() -> Self {
        Quantization::F32
    }
}

impl std::str::FromStr for Quantization {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "f32" => Ok(Quantization::F32),
            "i8" => Ok(Quantization::I8),
            _ => Err(format!("unknown HNSW quantization {s:?}: expected f32 or i8")),
        }
    }
}

/// The search breadth (ef) for a graph of `n` vectors built with `params`: the configured
/// `expansion_search` up to [`BREADTH_FROM`] vectors, then grown with the square root of
/// `n` (see [`breadth_for`]).
pub fn breadth_for(params: &HnswParams, n: usize) -> usize {
    let scale = (n as f64 / BREADTH_FROM as f64).max(1.0).sqrt();
    ((params.expansion_search as f64 * scale).ceil() as usize).min(MAX_BREADTH)
}

/// Below this many vectors the configured breadth holds its recall (0.97 at 20,000
/// passages in the scale benchmark, 0.93 at 100,000, 0.86 at 1,000,000 with 128:
/// docs/scale.md); past it the breadth grows as `√(n / BREADTH_FROM)`.
pub const BREADTH_FROM: usize = 50_000;

/// pgvector's largest hnsw.ef_search, and a cap for in-process searches too.
pub const MAX_BREADTH: usize = 1000;

pub struct HnswIndex {
    index: Index,
    params: HnswParams,
}

fn err(e: impl std::fmt::Display) -> Error {
    Error::Other(format!("hnsw: {e}"))
}

impl HnswIndex {
    fn empty(dim: usize, params: HnswParams) -> Result<Self> {
        // Cosine for i8: usearch's i8 inner product is an integer dot in its own scale,
        // its i8 cosine a true cosine (equal to the inner product on unit vectors).
        let (metric, quantization) = match params.quantization {
            Quantization::F32 => (MetricKind::IP, ScalarKind::F32),
            Quantization::I8 => (MetricKind::Cos, ScalarKind::I8),
        };
        let options = IndexOptions {
            dimensions: dim,
            metric,
            quantization,
            connectivity: params.connectivity,
            expansion_add: params.expansion_add,
            expansion_search: params.expansion_search,
            multi: false,
        };
        Ok(HnswIndex { index: Index::new(&options).map_err(err)?, params })
    }

    /// Builds the graph over every row of the matrix, inserting in parallel.
    pub fn build(matrix: &Matrix, params: HnswParams) -> Result<Self> {
        let h = Self::empty(matrix.dim(), params)?;
        h.add(matrix, 0)?;
        Ok(h)
    }

    /// Inserts rows `first..` of the matrix (rows before are already in the graph).
    pub fn add(&self, matrix: &Matrix, first: PassageIdx) -> Result<()> {
        self.insert(matrix, first as usize, 0)
    }

    /// Inserts the rows of `added` as passages `first..` (the graph holds passages
    /// `..first`): an append that has the new vectors only, as the PostgreSQL store's
    /// writer does.
    pub fn extend(&self, added: &Matrix, first: PassageIdx) -> Result<()> {
        if self.index.size() != first as usize {
            return Err(err(format!("the graph holds {} vectors, the append starts at {first}", self.index.size())));
        }
        self.insert(added, 0, first as usize)
    }

    /// Inserts rows `from..` of `rows`, row i under key `offset + i`, in parallel.
    fn insert(&self, rows: &Matrix, from: usize, offset: usize) -> Result<()> {
        let n = rows.rows();
        self.index.reserve_capacity_and_threads(offset + n, rayon::current_num_threads()).map_err(err)?;
        (from..n)
            .into_par_iter()
            .try_for_each(|i| self.index.add((offset + i) as u64, rows.row(i as PassageIdx)).map_err(err))
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let s = path.to_str().ok_or_else(|| Error::index(path, "path is not UTF-8"))?;
        self.index.save(s).map_err(|e| Error::index(path, format!("hnsw save: {e}")))
    }

    pub fn load(path: &Path, dim: usize, params: HnswParams) -> Result<Self> {
        let h = Self::empty(dim, params)?;
        let s = path.to_str().ok_or_else(|| Error::index(path, "path is not UTF-8"))?;
        h.index.load(s).map_err(|e| Error::index(path, format!("hnsw load: {e}")))?;
        h.check_dim(dim).map_err(|m| Error::index(path, m))?;
        Ok(h)
    }

    /// The graph as [`save`](Self::save) writes it to a file.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; self.index.serialized_length()];
        self.index.save_to_buffer(&mut bytes).map_err(err)?;
        Ok(bytes)
    }

    /// A graph from [`to_bytes`](Self::to_bytes) (or a saved file's bytes); the error
    /// says what is wrong, for the caller to name where the bytes came from.
    pub fn from_bytes(bytes: &[u8], dim: usize, params: HnswParams) -> std::result::Result<Self, String> {
        let h = Self::empty(dim, params).map_err(|e| e.to_string())?;
        h.index.load_from_buffer(bytes).map_err(|e| format!("not a usearch index: {e}"))?;
        h.check_dim(dim)?;
        Ok(h)
    }

    /// usearch takes the dimension from the serialized header: one that differs from
    /// the manifest's would fail every query.
    fn check_dim(&self, dim: usize) -> std::result::Result<(), String> {
        match self.index.dimensions() {
            d if d == dim => Ok(()),
            d => Err(format!("the HNSW graph has {d} dimensions, the manifest {dim}")),
        }
    }
}

impl VectorIndex for HnswIndex {
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        self.search_with_breadth(query, k, self.search_breadth(k))
    }

    fn search_breadth(&self, k: usize) -> usize {
        breadth_for(&self.params, self.index.size()).max(k)
    }

    fn search_with_breadth(&self, query: &[f32], k: usize, breadth: usize) -> Result<Vec<(PassageIdx, f32)>> {
        if query.len() != self.index.dimensions() {
            return Err(Error::Embedding(format!(
                "query has {} dimensions, index has {}",
                query.len(),
                self.index.dimensions()
            )));
        }
        // usearch searches with max(expansion_search, count) candidates: asking for
        // `breadth` results sets the breadth of this search alone (changing the index's
        // expansion would change it for searches running beside it).
        let m = self.index.search(query, k.max(breadth)).map_err(err)?;
        // usearch's inner-product and cosine distances are 1 - similarity.
        Ok(m.keys.iter().zip(&m.distances).take(k).map(|(&key, &d)| (key as PassageIdx, 1.0 - d)).collect())
    }

    fn len(&self) -> usize {
        self.index.size()
    }

    fn kind(&self) -> VectorIndexKind {
        VectorIndexKind::Hnsw
    }

    fn approximate_scores(&self) -> bool {
        self.params.quantization != Quantization::F32
    }
}
