//! SyncGE (GEAR §4): an LLM reads the base passages into proximal triples (knowledge
//! synchronisation, Eq. 1), each is linked to an indexed triple (Eq. 2), and diverse
//! triple beam search expands from those (Algorithm 1, Eq. 3).

use std::sync::Arc;

use serde_json::json;

use super::stages::{self, Fact};
use super::{Expansion, Ranked};
use crate::corpus::Passage;
use crate::error::Result;
use crate::llm::Llm;
use crate::retrieve::dense::query_embedding;
use crate::retrieve::fallback::fallback_step;
use crate::retrieve::fallback::WithFallback;
use crate::retrieve::registry::{GraphUse, LlmUse, MethodSpec, TraceKind};
use crate::retrieve::{hits, Query, Retrieval, Retriever, Trace};

pub const SYNC_GE: MethodSpec = MethodSpec {
    name: "sync_ge",
    section: super::GEAR.section,
    summary: "GEAR SyncGE: an LLM reads the base passages into triples that seed the triple beam search",
    graph: GraphUse::Required,
    llm: LlmUse::Always,
    trace: TraceKind::Beams,
    build: |s, r| {
        let llm = r.llm(SYNC_GE.name)?;
        let base = r.method(s.gear.base_method().name)?;
        let method = SyncGe::new(Expansion::build(s, r)?, llm, r.llm_concurrency());
        Ok(Box::new(WithFallback::new(Box::new(method), base)))
    },
};

pub struct SyncGe {
    ctx: Expansion,
    llm: Arc<dyn Llm>,
    concurrency: usize,
}

impl SyncGe {
    pub fn new(ctx: Expansion, llm: Arc<dyn Llm>, concurrency: usize) -> Self {
        SyncGe { ctx, llm, concurrency }
    }
}

/// One SyncGE retrieval for `query` (whose embedding is `q`) from `base_k` base
/// passages, cut to `k`: C_q and the proximal triples T'_q.
pub(crate) fn sync_ge(
    ctx: &Expansion,
    llm: &dyn Llm,
    query: &Query,
    q: &[f32],
    base_k: usize,
    k: usize,
    trace: &mut Trace,
) -> Result<(Ranked, Vec<Fact>, Option<String>)> {
    // C'_q = h_base^k(q, C)
    let base = ctx.base_passages(query, base_k, trace)?;
    // T'_q = read(C'_q, q)  (Eq. 1); nothing to read, no call.
    let passages: Vec<&Passage> = base.iter().map(|&(p, _)| ctx.index.passage(p)).collect();
    if passages.is_empty() {
        return Ok((base, Vec::new(), None));
    }
    let (read, failure) = trace.llm_step("read", llm, |meter| {
        let r = llm_or_nothing(stages::read(
            meter,
            &passages,
            &query.text,
            &[],
            ctx.params.max_tokens,
            ctx.params.grounding,
        ));
        let d = json!({"query": query.text, "passages": passages.len(), "proximal_triples": r.facts,
                       "malformed": r.malformed, "ungrounded": r.ungrounded, "unparsed": r.unparsed,
                       "error": r.error});
        let failure = r.failure();
        Ok(((r.facts, failure), d))
    })?;
    if read.is_empty() {
        // Nothing to expand from: the base ranking as it is (the LLM failure, if any, is
        // the caller's to report).
        return Ok((base, read, failure));
    }
    // T_q = {tripleLink(t') : t' ∈ T'_q}  (Eq. 2)
    let initial = ctx.triple_link(&read, trace)?;
    // Algorithm 1, C̃_q, RRF(C̃_q, C'_q)  (Eq. 3)
    let fused = ctx.expand(query, q, &initial, &base, k, trace)?;
    Ok((fused, read, None))
}

/// A read whose call failed (after the client's retries) found nothing: the failure is
/// counted by the meter and shown in the trace, and the query goes on with the base
/// passages rather than failing a whole evaluation.
pub(crate) struct Read {
    pub facts: Vec<Fact>,
    pub malformed: usize,
    pub ungrounded: usize,
    pub unparsed: bool,
    pub error: Option<String>,
}

impl Read {
    /// Why the read gave nothing usable: the call failed, the answer held no JSON, or
    /// every triple in it was malformed or named nothing in the passages.
    pub fn failure(&self) -> Option<String> {
        match (&self.error, self.unparsed) {
            (Some(e), _) => Some(format!("read failed: {e}")),
            (None, true) => Some("read answer held no usable JSON".into()),
            _ if self.facts.is_empty() && self.malformed + self.ungrounded > 0 => Some(format!(
                "read answer held {} malformed triples, {} naming nothing in the passages, and no good one",
                self.malformed, self.ungrounded
            )),
            _ => None,
        }
    }
}

pub(crate) fn llm_or_nothing(r: Result<stages::ReadOutcome>) -> Read {
    match r {
        Ok(o) => {
            Read { facts: o.facts, malformed: o.malformed, ungrounded: o.ungrounded, unparsed: o.unparsed, error: None }
        }
        Err(e) => Read { facts: Vec::new(), malformed: 0, ungrounded: 0, unparsed: false, error: Some(e.to_string()) },
    }
}

impl Retriever for SyncGe {
    fn name(&self) -> &str {
        SYNC_GE.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let mut trace = Trace::default();
        let q = query_embedding(self.ctx.embedder.as_ref(), query, &mut trace)?;
        let query = Query { embedding: Some(q.clone()), gold: None, ..query.clone() };
        let (mut fused, _, failure) =
            sync_ge(&self.ctx, self.llm.as_ref(), &query, &q, self.ctx.base_k(k, None), k, &mut trace)?;
        if let Some(reason) = failure {
            // The LLM gave nothing to expand from: the query is answered by the base
            // ranking, and says so.
            fused.truncate(k);
            trace.steps.push(fallback_step(self.ctx.params.base_method().name, &reason));
        }
        Ok(Retrieval { hits: hits(fused), trace })
    }

    fn concurrency(&self) -> Option<usize> {
        Some(self.concurrency)
    }
}
