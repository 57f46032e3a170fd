//! GEAR (Graph-enhanced Agent for Retrieval-augmented generation): graph expansion of a
//! base retriever's passages by diverse triple beam search, and the multi-step agent.
//!
//! - [`NaiveGe`] (`naive_ge`): the initial triples are all triples of the base passages;
//!   no LLM.
//! - [`SyncGe`] (`sync_ge`): an LLM reads the base passages into proximal triples
//!   (Eq. 1), each linked to its most similar indexed triple (Eq. 2).
//! - [`Gear`] (`gear`): SyncGE inside a loop with a gist memory, a termination check and
//!   query rewriting (§5), then passageLink of the memory and a final fusion (Eq. 8–10).
//!
//! All three share [`Expansion`]: base retrieval, Algorithm 1 over the triple index, the
//! breadth-first mapping of beams to passages and the RRF with the base list (Eq. 3).

mod agent;
mod naive_ge;
mod params;
pub mod prompts;
mod recorded;
pub mod stages;
mod sync_ge;

pub use agent::{Gear, GEAR};
pub use naive_ge::{NaiveGe, NAIVE_GE};
pub use params::{GearParams, Grounding, SequenceScoring};
pub use recorded::{llm_from_config, RecordedCounts, RecordedReader};
pub use sync_ge::{SyncGe, SYNC_GE};

use std::sync::Arc;

use serde_json::json;

use super::dense::graph_query_embedding;
use super::hybrid::HybridParams;
use super::registry::{MethodSections, Resources};
use super::{list_detail, Query, Retriever, Trace};
use crate::corpus::PassageIdx;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::fusion::rrf;
use crate::graph::beam::{
    diverse_triple_beam_search, flatten_breadth_first, triples_to_passages, EncodeScorer, PooledScorer, SequenceScorer,
};
use crate::graph::TripleIndex;
use crate::index::Index;

/// A ranked list of passages, best first.
pub(crate) type Ranked = Vec<(PassageIdx, f32)>;

/// Beams shown in a trace (the rest are counted).
const TRACE_BEAMS: usize = 10;

/// What every GEAR method runs on: the base retriever h_base over passages, the triple
/// index and the parameters.
pub struct Expansion {
    pub(crate) base: Box<dyn Retriever>,
    pub(crate) triples: Arc<TripleIndex>,
    pub(crate) index: Arc<Index>,
    pub(crate) embedder: Arc<dyn Embedder>,
    /// The embedder of the triples' vectors where it is not `embedder` (the graph's own).
    pub(crate) graph_embedder: Option<Arc<dyn Embedder>>,
    pub(crate) params: GearParams,
    /// How deep hybrid triple search reads each list.
    pub(crate) hybrid: HybridParams,
}

impl Expansion {
    /// What the GEAR methods share, from the opened index: the base retriever of
    /// `gear.base`, the triple index (built on first use) and the parameters.
    pub(crate) fn build(sections: &MethodSections, r: &dyn Resources) -> Result<Expansion> {
        let p = sections.gear;
        if p.beam_size == 0 || p.length == 0 || p.max_steps == 0 || p.round_passages == 0 {
            return Err(Error::Config(
                "gear.beam_size, gear.length, gear.max_steps and gear.round_passages must be at least 1".into(),
            ));
        }
        let graph = r.graph()?;
        let embedder = r.embedder();
        let triples = graph.triple_index(graph.embedder.as_deref().unwrap_or(embedder.as_ref()))?;
        let base = r.method(p.base_method().name)?;
        Ok(Expansion::new(base, triples, r.index(), embedder, p, sections.hybrid)
            .with_graph_embedder(graph.embedder.clone()))
    }

    pub fn new(
        base: Box<dyn Retriever>,
        triples: Arc<TripleIndex>,
        index: Arc<Index>,
        embedder: Arc<dyn Embedder>,
        params: GearParams,
        hybrid: HybridParams,
    ) -> Self {
        Expansion { base, triples, index, embedder, graph_embedder: None, params, hybrid }
    }

    /// The same expansion over triples embedded by `graph_embedder` (the graph's own,
    /// where it has one).
    pub fn with_graph_embedder(self, graph_embedder: Option<Arc<dyn Embedder>>) -> Self {
        Expansion { graph_embedder, ..self }
    }

    /// The embedder of the triple index's vectors.
    pub(crate) fn triple_embedder(&self) -> &dyn Embedder {
        self.graph_embedder.as_deref().unwrap_or(self.embedder.as_ref())
    }

    /// Passages the single-step methods take from the base retriever for a request of
    /// k: `base_k`, or where it is 0, the method's own `unset` (`None`: k, the paper's).
    fn base_k(&self, k: usize, unset: Option<usize>) -> usize {
        match self.params.base_k {
            0 => unset.unwrap_or(k),
            n => n,
        }
    }

    /// C'_q = h_base^k(q, C), with the base method's steps in the trace (prefixed
    /// `base `).
    pub(crate) fn base_passages(&self, query: &Query, k: usize, trace: &mut Trace) -> Result<Ranked> {
        let r = self.base.retrieve(query, k)?;
        for mut step in r.trace.steps {
            step.name = format!("base {}", step.name);
            trace.steps.push(step);
        }
        Ok(r.hits.into_iter().map(|h| (h.passage, h.score)).collect())
    }

    /// Eq. 2: each fact linked to its most similar indexed triple (searched the base
    /// retriever's way); facts that link to nothing are counted in the trace.
    pub(crate) fn triple_link(&self, facts: &[stages::Fact], trace: &mut Trace) -> Result<Vec<u32>> {
        trace.step("triple link", || {
            let texts: Vec<String> = facts.iter().map(stages::Fact::text).collect();
            let kind = self.params.base;
            let embeddings = self.triples.embed_queries(kind, &texts, self.triple_embedder())?;
            let mut linked = Vec::new();
            let mut detail = Vec::new();
            for (text, e) in texts.iter().zip(&embeddings) {
                let hit = self.triples.search(kind, text, e, 1, self.params.rrf_k, self.hybrid.depth)?.first().copied();
                if let Some((t, _)) = hit {
                    linked.push(t);
                }
                detail.push(json!({"fact": text, "triple": hit.map(|(t, s)| json!([t, self.triples.text(t), s]))}));
            }
            let unlinked = facts.len() - linked.len();
            Ok((linked, json!({"search": kind, "links": detail, "unlinked": unlinked})))
        })
    }

    /// Algorithm 1 from `initial` for `query` (whose passage-space embedding is
    /// `embedding`), the beams flattened breadth-first into passages (C̃_q), fused with
    /// the base list by RRF (Eq. 3) and cut to `k`.
    pub(crate) fn expand(
        &self,
        query: &Query,
        embedding: &[f32],
        initial: &[u32],
        base: &Ranked,
        k: usize,
        trace: &mut Trace,
    ) -> Result<Ranked> {
        let graph = &self.triples.graph;
        // Sequences are scored against the triples' own vectors, so in their space.
        let (query, embedder) =
            graph_query_embedding(self.graph_embedder.as_ref(), self.embedder.as_ref(), query, embedding, trace)?;
        let query = query.as_ref();
        let expanded = trace.step("beam search", || {
            let pooled = PooledScorer { graph, query };
            let text = |t: u32| self.triples.text(t).to_string();
            let encode = EncodeScorer { graph, text: &text, embedder, query };
            let scorer: &dyn SequenceScorer = match self.params.scoring {
                SequenceScoring::Pooled => &pooled,
                SequenceScoring::Encode => &encode,
            };
            let (beams, stats) = diverse_triple_beam_search(graph, query, initial, scorer, &self.params.beam())?;
            let passages = triples_to_passages(graph, &flatten_breadth_first(&beams));
            let shown: Vec<_> = beams
                .iter()
                .take(TRACE_BEAMS)
                .map(|b| json!({"score": b.score, "triples": b.triples.iter().map(|&t| self.triples.text(t)).collect::<Vec<_>>()}))
                .collect();
            let detail = json!({"params": self.params.beam(), "scoring": self.params.scoring, "stats": stats,
                                "beams": shown, "passages": passages});
            Ok((passages, detail))
        })?;
        trace.step("fuse", || {
            // C̃_q carries ranks only; RRF reads nothing else.
            let graph_list: Ranked = expanded.iter().map(|&p| (p, 0.0)).collect();
            let mut fused = rrf(&[&graph_list, base], self.params.rrf_k);
            fused.truncate(k);
            let d = json!({"rrf_k": self.params.rrf_k, "graph": graph_list.len(), "base": base.len(),
                           "top": list_detail(&fused)});
            Ok((fused, d))
        })
    }
}
