//! HippoRAG-style retrieval: link the query's entities to the graph, run Personalized
//! PageRank from them, rank passages by the mass the walk leaves on them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::dense::{dense_search, query_embedding};
use super::{hits, list_detail, Query, Retrieval, Retriever, Trace};
use crate::corpus::PassageIdx;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::graph::linking::{LinkParams, NerMode, NO_LLM_FOR_NER};
use crate::graph::ppr::PprParams;
use crate::graph::{query_ner, GraphContext};
use crate::index::VectorIndex;
use crate::llm::Meter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PassageScoring {
    /// The PPR mass of the passage node (HippoRAG 2).
    PassageNode,
    /// The summed PPR mass of the passage's entities (HippoRAG 1).
    EntitySum,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct PprMethodParams {
    pub ppr: PprParams,
    pub link: LinkParams,
    pub passage_scoring: PassageScoring,
}

impl Default for PprMethodParams {
    fn default() -> Self {
        PprMethodParams {
            ppr: PprParams::default(),
            link: LinkParams::default(),
            passage_scoring: PassageScoring::PassageNode,
        }
    }
}

/// Passages scored by PPR from the query's linked entities, best first (at most `depth`,
/// zero-mass passages left out); `None` when no entity could be linked.
pub(crate) fn graph_scores(
    ctx: &GraphContext,
    embedder: &dyn Embedder,
    query: &Query,
    embedding: &[f32],
    params: &PprMethodParams,
    depth: usize,
    trace: &mut Trace,
) -> Result<Option<Vec<(PassageIdx, f32)>>> {
    let mentions = match params.link.ner {
        NerMode::Llm if params.link.mentions => Some(llm_mentions(ctx, query, trace)?),
        _ => None,
    };
    let seeds = trace.step("link entities", || {
        let linked = ctx.linker.link(&query.text, embedding, mentions.as_deref(), embedder, &params.link)?;
        let detail = json!(linked);
        Ok((linked, detail))
    })?;
    if seeds.is_empty() {
        return Ok(None);
    }
    let list = trace.step("ppr", || {
        let weights: Vec<(u32, f64)> = seeds.iter().map(|s| (s.entity, s.weight)).collect();
        let r = ctx.ppr.personalized_pagerank(&weights, &params.ppr);
        let g = ctx.graph();
        let e = g.entities.len();
        let mut scored: Vec<(PassageIdx, f32)> = (0..g.passage_entities.len())
            .map(|p| {
                let s = match params.passage_scoring {
                    PassageScoring::PassageNode => r.scores[e + p],
                    PassageScoring::EntitySum => g.passage_entities[p].iter().map(|&x| r.scores[x as usize]).sum(),
                };
                (p as PassageIdx, s as f32)
            })
            .filter(|x| x.1 > 0.0)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(depth);
        let detail = json!({"iterations": r.iterations, "residual": r.residual, "top": list_detail(&scored)});
        Ok((scored, detail))
    })?;
    Ok(Some(list))
}

/// The question's named entities from the linker's LLM (HippoRAG's query NER), with the
/// mentions and what they cost in the trace.
fn llm_mentions(ctx: &GraphContext, query: &Query, trace: &mut Trace) -> Result<Vec<String>> {
    let llm = ctx.linker.llm().ok_or_else(|| Error::Config(NO_LLM_FOR_NER.into()))?;
    trace.step("query ner", || {
        let meter = Meter::new(llm.as_ref());
        let mentions = query_ner(&meter, &query.text)?;
        let s = meter.snapshot();
        let detail = json!({
            "model": llm.id(),
            "mentions": mentions,
            "cached": s.cache_hits > 0,
            "tokens": s.tokens(),
            "tokens_spent": s.tokens_spent,
            "parse_failures": s.parse_failure_examples,
        });
        Ok((mentions, detail))
    })
}

pub struct Ppr {
    graph: Arc<GraphContext>,
    vectors: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    params: PprMethodParams,
}

impl Ppr {
    pub fn new(
        graph: Arc<GraphContext>,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        params: PprMethodParams,
    ) -> Self {
        Ppr { graph, vectors, embedder, params }
    }
}

impl Retriever for Ppr {
    fn name(&self) -> &str {
        "ppr"
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let mut trace = Trace::default();
        let q = query_embedding(self.embedder.as_ref(), query, &mut trace)?;
        let list = match graph_scores(&self.graph, self.embedder.as_ref(), query, &q, &self.params, k, &mut trace)? {
            Some(list) if !list.is_empty() => list,
            // HippoRAG's behaviour when the query names nothing in the graph.
            _ => dense_search(self.vectors.as_ref(), &q, k, &mut trace)?,
        };
        Ok(Retrieval { hits: hits(list), trace })
    }
}
