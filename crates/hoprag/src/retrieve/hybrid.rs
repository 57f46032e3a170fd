//! Hybrid baseline: reciprocal rank fusion of the BM25 and dense lists.

use std::sync::Arc;

use serde_json::json;

use super::dense::{dense_search, query_embedding};
use super::{hits, list_detail, Query, Retrieval, Retriever, Trace};
use crate::config::HybridParams;
use crate::embed::Embedder;
use crate::error::Result;
use crate::fusion::rrf;
use crate::index::{Index, VectorIndex};

pub struct Hybrid {
    index: Arc<Index>,
    vectors: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    params: HybridParams,
}

impl Hybrid {
    pub fn new(
        index: Arc<Index>,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        params: HybridParams,
    ) -> Self {
        Hybrid { index, vectors, embedder, params }
    }
}

impl Retriever for Hybrid {
    fn name(&self) -> &str {
        "hybrid"
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let mut trace = Trace::default();
        // Each list is read deeper than k: a passage ranked 30th by both can beat one
        // ranked 3rd by only one.
        let depth = self.params.depth.max(k);
        let q = query_embedding(self.embedder.as_ref(), query, &mut trace)?;
        let dense = dense_search(self.vectors.as_ref(), &q, depth, &mut trace)?;
        let lexical = trace.step("bm25", || {
            let l = self.index.lexical().search(&query.text, depth)?;
            let d = list_detail(&l);
            Ok((l, d))
        })?;
        let mut fused = trace.step("rrf", || {
            let f = rrf(&[&lexical, &dense], self.params.rrf_k);
            let d = json!({"k": self.params.rrf_k, "depth": depth, "top": list_detail(&f)});
            Ok((f, d))
        })?;
        fused.truncate(k);
        Ok(Retrieval { hits: hits(fused), trace })
    }
}
