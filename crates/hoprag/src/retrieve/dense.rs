//! Dense baseline: nearest passages to the query embedding.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::registry::{GraphUse, LlmUse, MethodSpec, TraceKind};
use super::{hits, list_detail, Query, Retrieval, Retriever, Trace};
use crate::embed::{Embedder, TextKind};
use crate::error::Result;
use crate::filter::Selection;
use crate::index::{ExactIndex, VectorIndex};

pub const SPEC: MethodSpec = MethodSpec {
    name: "dense",
    section: Some("dense"),
    summary: "the nearest passages to the query embedding (exact search, or the index's HNSW graph)",
    graph: GraphUse::No,
    llm: LlmUse::Never,
    trace: TraceKind::Lists,
    build: |_, r| Ok(Box::new(Dense::new(r.vectors(), r.embedder()).with_exact(r.index().screened_exact()))),
};

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DenseParams {
    /// Scan every vector even where the index has an HNSW graph.
    pub exact: bool,
}

pub struct Dense {
    vectors: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    /// Exact search over the passage vectors, for filtered queries: it scans the
    /// passages a filter admits.
    exact: Option<Arc<ExactIndex>>,
}

impl Dense {
    pub fn new(vectors: Arc<dyn VectorIndex>, embedder: Arc<dyn Embedder>) -> Self {
        Dense { vectors, embedder, exact: None }
    }

    /// With exact search over the passage vectors, a filtered query scans the admitted
    /// passages exactly.
    pub fn with_exact(self, exact: Arc<ExactIndex>) -> Self {
        Dense { exact: Some(exact), ..self }
    }
}

/// The query's embedding: the one supplied, or computed now (as a traced step).
pub(crate) fn query_embedding(embedder: &dyn Embedder, query: &Query, trace: &mut Trace) -> Result<Arc<Vec<f32>>> {
    match &query.embedding {
        Some(e) => Ok(e.clone()),
        None => trace.step("embed query", || {
            Ok((Arc::new(embedder.embed_one(&query.text, TextKind::Query)?), json!({"embedder": embedder.id()})))
        }),
    }
}

/// The query's vector in the graph's space, and the embedder of that space: `embedding`
/// (the passage-space vector) and `embedder` when the graph was embedded by the index's
/// own embedder; else the graph embedder's vector (the one supplied, or computed now).
pub(crate) fn graph_query_embedding<'a, 'v>(
    graph_embedder: Option<&'a Arc<dyn Embedder>>,
    embedder: &'a dyn Embedder,
    query: &Query,
    embedding: &'v [f32],
    trace: &mut Trace,
) -> Result<(Cow<'v, [f32]>, &'a dyn Embedder)> {
    let Some(graph_embedder) = graph_embedder else { return Ok((Cow::Borrowed(embedding), embedder)) };
    let vector = match &query.graph_embedding {
        Some(e) => e.to_vec(),
        None => trace.step("embed query for the graph", || {
            Ok((graph_embedder.embed_one(&query.text, TextKind::Query)?, json!({"embedder": graph_embedder.id()})))
        })?,
    };
    Ok((Cow::Owned(vector), graph_embedder.as_ref()))
}

/// Dense search as a traced step; shared by every method that starts from the vector list.
pub(crate) fn dense_search(
    vectors: &dyn VectorIndex,
    embedding: &[f32],
    k: usize,
    trace: &mut Trace,
) -> Result<Vec<(crate::PassageIdx, f32)>> {
    trace.step(SPEC.name, || {
        let l = vectors.search(embedding, k)?;
        let d = json!({"index": vectors.kind(), "top": list_detail(&l)});
        Ok((l, d))
    })
}

impl Retriever for Dense {
    fn name(&self) -> &str {
        SPEC.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let mut trace = Trace::default();
        let q = query_embedding(self.embedder.as_ref(), query, &mut trace)?;
        let list = dense_search(self.vectors.as_ref(), &q, k, &mut trace)?;
        Ok(Retrieval { hits: hits(list), trace })
    }

    /// Exact search over the admitted passages alone: the first k of exact search's
    /// order that the filter admits (behind HNSW too, whose deeper lists are approximate),
    /// for the cost of the admitted rows only.
    fn retrieve_within(&self, query: &Query, k: usize, selection: &Selection) -> Option<Result<Retrieval>> {
        let exact = self.exact.as_ref()?;
        let mut trace = Trace::default();
        Some(query_embedding(self.embedder.as_ref(), query, &mut trace).and_then(|q| {
            let list = trace.step("dense within the filter", || {
                let rows: Vec<crate::PassageIdx> = selection.iter().map(|p| p as crate::PassageIdx).collect();
                let l = exact.top_of_rows(&q, &rows, k)?;
                let d = json!({"index": "exact", "scanned": rows.len(), "top": list_detail(&l)});
                Ok((l, d))
            })?;
            Ok(Retrieval { hits: hits(list), trace })
        }))
    }
}
