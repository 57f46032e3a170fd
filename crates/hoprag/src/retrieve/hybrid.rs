//! Hybrid baseline: reciprocal rank fusion of the BM25 and dense lists.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::dense::{dense_search, query_embedding};
use super::registry::{GraphUse, LlmUse, MethodSpec, TraceKind};
use super::{backfill, bm25, hits, list_detail, Query, Retrieval, Retriever, Trace};
use crate::embed::Embedder;
use crate::error::Result;
use crate::fusion::{rrf, RRF_K};
use crate::index::{Index, VectorIndex};

pub const SPEC: MethodSpec = MethodSpec {
    name: "hybrid",
    section: Some("hybrid"),
    summary: "reciprocal rank fusion (k = 60) of the bm25 and dense lists",
    graph: GraphUse::No,
    llm: LlmUse::Never,
    trace: TraceKind::Lists,
    build: |s, r| Ok(Box::new(Hybrid::new(r.index(), r.vectors(), r.embedder(), s.hybrid))),
};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct HybridParams {
    /// RRF constant (k = 60, Cormack et al. 2009).
    pub rrf_k: f32,
    /// How deep each list is read before fusion, whatever k (past the fused lists the
    /// ranking follows dense).
    pub depth: usize,
}

impl Default for HybridParams {
    fn default() -> Self {
        HybridParams { rrf_k: RRF_K, depth: 100 }
    }
}

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
        SPEC.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let mut trace = Trace::default();
        // Each list is read to a fixed depth, deeper than the usual k (a passage ranked
        // 30th by both can beat one ranked 3rd by only one), and the same for every k,
        // so that the ranking for k is the first k of any deeper one; past the fused
        // lists, dense's order.
        let depth = self.params.depth;
        let q = query_embedding(self.embedder.as_ref(), query, &mut trace)?;
        let dense = dense_search(self.vectors.as_ref(), &q, depth.max(k), &mut trace)?;
        let lexical = trace.step(bm25::SPEC.name, || {
            let l = self.index.lexical().search(&query.text, depth)?;
            let d = list_detail(&l);
            Ok((l, d))
        })?;
        let fused = trace.step("rrf", || {
            let f = rrf(&[&lexical, &dense[..depth.min(dense.len())]], self.params.rrf_k);
            let d = json!({"k": self.params.rrf_k, "depth": depth, "top": list_detail(&f)});
            Ok((f, d))
        })?;
        Ok(Retrieval { hits: hits(backfill(fused, &dense, k)), trace })
    }
}
