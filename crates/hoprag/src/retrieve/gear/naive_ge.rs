//! NaiveGE (GEAR §6.2): graph expansion from every triple of the base retriever's
//! passages, without an LLM.

use serde_json::json;

use super::Expansion;
use crate::error::Result;
use crate::retrieve::dense::query_embedding;
use crate::retrieve::registry::{GraphUse, LlmUse, MethodSpec, TraceKind};
use crate::retrieve::{hits, Query, Retrieval, Retriever, Trace};

pub const NAIVE_GE: MethodSpec = MethodSpec {
    name: "naive_ge",
    section: super::GEAR.section,
    summary: "GEAR NaiveGE: diverse triple beam search from the base passages' triples, fused with them by RRF",
    graph: GraphUse::Required,
    llm: LlmUse::Never,
    trace: TraceKind::Beams,
    build: |s, r| Ok(Box::new(NaiveGe::new(Expansion::build(s, r)?))),
};

pub struct NaiveGe {
    ctx: Expansion,
}

impl NaiveGe {
    pub fn new(ctx: Expansion) -> Self {
        NaiveGe { ctx }
    }
}

impl Retriever for NaiveGe {
    fn name(&self) -> &str {
        NAIVE_GE.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let ctx = &self.ctx;
        let mut trace = Trace::default();
        let q = query_embedding(ctx.embedder.as_ref(), query, &mut trace)?;
        let query = Query { embedding: Some(q.clone()), gold: None, ..query.clone() };
        // C'_q = h_base^k(q, C)
        let base = ctx.base_passages(&query, ctx.base_k(k, Some(super::params::NAIVE_BASE_K)), &mut trace)?;
        // T_q: all triples of C'_q, in the base list's order.
        let initial = trace.step("initial triples", || {
            let t: Vec<u32> =
                base.iter().flat_map(|&(p, _)| ctx.triples.graph.passage_triples(p).iter().copied()).collect();
            let d = json!({"triples": t.len(), "passages": base.len()});
            Ok((t, d))
        })?;
        // Algorithm 1, C̃_q, RRF(C̃_q, C'_q) (Eq. 3)
        let fused = ctx.expand(&query, &q, &initial, &base, k, &mut trace)?;
        Ok(Retrieval { hits: hits(fused), trace })
    }
}
