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
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams { connectivity: 16, expansion_add: 128, expansion_search: 128 }
    }
}

pub struct HnswIndex {
    index: Index,
    params: HnswParams,
}

fn err(e: impl std::fmt::Display) -> Error {
    Error::Other(format!("hnsw: {e}"))
}

impl HnswIndex {
    fn empty(dim: usize, params: HnswParams) -> Result<Self> {
        let options = IndexOptions {
            dimensions: dim,
            metric: MetricKind::IP,
            quantization: ScalarKind::F32,
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
        let n = matrix.rows();
        self.index.reserve_capacity_and_threads(n, rayon::current_num_threads()).map_err(err)?;
        (first as usize..n)
            .into_par_iter()
            .try_for_each(|i| self.index.add(i as u64, matrix.row(i as PassageIdx)).map_err(err))
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let s = path.to_str().ok_or_else(|| Error::index(path, "path is not UTF-8"))?;
        self.index.save(s).map_err(|e| Error::index(path, format!("hnsw save: {e}")))
    }

    pub fn load(path: &Path, dim: usize, params: HnswParams) -> Result<Self> {
        let h = Self::empty(dim, params)?;
        let s = path.to_str().ok_or_else(|| Error::index(path, "path is not UTF-8"))?;
        h.index.load(s).map_err(|e| Error::index(path, format!("hnsw load: {e}")))?;
        Ok(h)
    }
}

impl VectorIndex for HnswIndex {
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        if query.len() != self.index.dimensions() {
            return Err(Error::Embedding(format!(
                "query has {} dimensions, index has {}",
                query.len(),
                self.index.dimensions()
            )));
        }
        if k > self.params.expansion_search {
            self.index.change_expansion_search(k);
        }
        let m = self.index.search(query, k).map_err(err)?;
        // usearch's inner-product distance is 1 - dot.
        Ok(m.keys.iter().zip(&m.distances).map(|(&key, &d)| (key as PassageIdx, 1.0 - d)).collect())
    }

    fn len(&self) -> usize {
        self.index.size()
    }

    fn kind(&self) -> VectorIndexKind {
        VectorIndexKind::Hnsw
    }
}
