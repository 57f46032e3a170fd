//! BM25 baseline: the lexical index alone.

use std::sync::Arc;

use super::registry::{GraphUse, LlmUse, MethodSpec, TraceKind};
use super::{hits, list_detail, Query, Retrieval, Retriever, Trace};
use crate::error::Result;
use crate::index::Index;

pub const SPEC: MethodSpec = MethodSpec {
    name: "bm25",
    section: None,
    summary: "BM25 over title + text (tantivy)",
    graph: GraphUse::No,
    llm: LlmUse::Never,
    trace: TraceKind::Lists,
    build: |_, r| Ok(Box::new(Bm25::new(r.index()))),
};

pub struct Bm25 {
    index: Arc<Index>,
}

impl Bm25 {
    pub fn new(index: Arc<Index>) -> Self {
        Bm25 { index }
    }
}

impl Retriever for Bm25 {
    fn name(&self) -> &str {
        SPEC.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let mut trace = Trace::default();
        let list = trace.step(SPEC.name, || {
            let l = self.index.lexical().search(&query.text, k)?;
            let d = list_detail(&l);
            Ok((l, d))
        })?;
        Ok(Retrieval { hits: hits(list), trace })
    }
}
