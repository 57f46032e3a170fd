//! HippoRAG 2's retrieval (Gutiérrez et al. 2025): seed the graph from the facts nearest
//! to the query and every passage from its dense score, run Personalized PageRank, rank
//! passages by the mass the walk leaves on their nodes.
//!
//! - Facts: every triple is scored against the query embedding; the best `fact_top_k`
//!   distinct facts (min-max normalised over all triples) seed their subject and object
//!   phrases, each weighted by its fact's score divided by the number of passages that
//!   mention the phrase, the heaviest `top_seeds` kept (graph::linking). The names
//!   the query mentions are linked too (HippoRAG 1's query entities, LLM-free with the
//!   surface extractor), and compete for the same `top_seeds` (see `LinkParams::mentions`
//!   for why this departs from HippoRAG 2).
//! - Passages: every passage node is seeded with its min-max normalised dense score
//!   times `passage_node_weight` (0.05).
//! - The walk: damping 0.5 over phrase–phrase relation edges, symmetric synonym edges
//!   and passage–phrase edges (graph::ppr).
//! - No fact matched (no triples, or none naming an entity): dense retrieval.
//! - Fewer passages than asked (passages the walk cannot reach): the rest of the list
//!   comes from dense retrieval, in its order.
//!
//! HippoRAG 2 writes a phrase's weight from each fact in turn, so that a later, weaker
//! fact overwrites a stronger one naming the same phrase; here a phrase keeps its
//! strongest fact. Its optional LLM recognition-memory filter of the facts is not part
//! of this LLM-free method.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::dense::{dense_search, graph_query_embedding, query_embedding};
use super::registry::{GraphUse, LlmUse, MethodSpec, TraceKind};
use super::{backfill, hits, list_detail, Query, Retrieval, Retriever, Trace, TraceStep};
use crate::corpus::PassageIdx;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::filter::Selection;
use crate::fusion::{guard, DenseGuard};
use crate::graph::linking::{FactMatch, LinkParams, LinkedEntity, NerMode, NO_LLM_FOR_NER};
use crate::graph::ppr::PprParams;
pub use crate::graph::walk::PassageScoring;
use crate::graph::walk::{DenseScores, StepLog, WalkDetail, WalkExplanation, WalkInput, WalkParams, Walker};
use crate::graph::{query_ner, GraphContext};
use crate::index::{Matrix, VectorIndex};
use crate::llm::Meter;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct PprMethodParams {
    pub ppr: PprParams,
    pub link: LinkParams,
    pub passage_scoring: PassageScoring,
    /// Weight of a passage node's seed relative to its min-max normalised dense score
    /// (HippoRAG 2's passage_node_weight, 0.05); 0 seeds phrases only (HippoRAG 1).
    pub passage_node_weight: f64,
    /// Dense passages that go before the walk's ranking (fusion::guard). Off here, as in
    /// HippoRAG 2; `auto` turns it on (`auto.dense_guard`).
    pub dense_guard: DenseGuard,
}

impl PprMethodParams {
    /// What the walk reads of them.
    pub(crate) fn walk(&self) -> WalkParams {
        WalkParams { ppr: self.ppr, scoring: self.passage_scoring, passage_weight: self.passage_node_weight }
    }
}

impl Default for PprMethodParams {
    fn default() -> Self {
        PprMethodParams {
            ppr: PprParams::default(),
            link: LinkParams::default(),
            passage_scoring: PassageScoring::PassageNode,
            passage_node_weight: 0.05,
            dense_guard: DenseGuard::default(),
        }
    }
}

/// The graph walk records its steps in the method's trace.
impl StepLog for Trace {
    fn record(&mut self, name: &str, micros: u64, detail: serde_json::Value) {
        self.steps.push(TraceStep { name: name.to_string(), micros, detail, llm: None });
    }
}

/// What linking found for a query: the entity seeds, heaviest first, and the facts
/// nearest to it.
pub(crate) struct Linked {
    pub seeds: Vec<LinkedEntity>,
    pub facts: Vec<FactMatch>,
}

impl Linked {
    pub fn has_seeds(&self) -> bool {
        !self.seeds.is_empty()
    }

    /// The walk's entity seeds (node, weight); `None` when no entity was linked.
    pub fn entity_seeds(&self) -> Option<Vec<(u32, f64)>> {
        (!self.seeds.is_empty()).then(|| self.seeds.iter().map(|s| (s.entity, s.weight)).collect())
    }

    /// The explanation of `method`'s answer, with its walk (`None`: no entity linked).
    pub fn explain(self, method: &str, walk: Option<WalkDetail>) -> WalkExplanation {
        WalkExplanation { method: method.to_string(), linked: self.seeds, facts: self.facts, walk }
    }
}

/// HippoRAG 2's linking: the query's facts and mentions, as entity seeds (with LLM query
/// NER, the mentions the linker's LLM finds).
pub(crate) fn link_entities(
    ctx: &GraphContext,
    embedder: &dyn Embedder,
    query: &Query,
    embedding: &[f32],
    link: &LinkParams,
    trace: &mut Trace,
) -> Result<Linked> {
    let mentions = match link.ner {
        NerMode::Llm => Some(llm_mentions(ctx, query, trace)?),
        _ => None,
    };
    let (embedding, embedder) = graph_query_embedding(ctx.embedder.as_ref(), embedder, query, embedding, trace)?;
    let (seeds, facts) = trace.step("link entities", || {
        let linked = ctx.linker.link_with_facts(&query.text, &embedding, mentions.as_deref(), embedder, link)?;
        let detail = json!(linked.0);
        Ok((linked, detail))
    })?;
    Ok(Linked { seeds, facts })
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

pub const SPEC: MethodSpec = MethodSpec {
    name: "ppr",
    section: Some("ppr"),
    summary: "HippoRAG 2: Personalized PageRank seeded by the query's nearest facts, the names it mentions and \
              every passage's dense score, damping 0.5; dense where no fact matches",
    graph: GraphUse::Required,
    llm: LlmUse::ForMentions(|s| &s.ppr.link),
    trace: TraceKind::Walk,
    build: |s, r| Ok(Box::new(Ppr::new(r.graph()?, r.index().vectors().clone(), r.vectors(), r.embedder(), s.ppr))),
};

pub struct Ppr {
    graph: Arc<GraphContext>,
    passages: Arc<Matrix>,
    vectors: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    params: PprMethodParams,
}

/// The dense step: the guard's best passages (when it is on), and what the walk needs of
/// the scores.
struct DenseStep {
    guard_top: Option<Vec<(PassageIdx, f32)>>,
    scores: DenseScores,
}

impl Ppr {
    /// `passages`: the index's passage vectors, for the passage-node seeds.
    pub fn new(
        graph: Arc<GraphContext>,
        passages: Arc<Matrix>,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        params: PprMethodParams,
    ) -> Self {
        Ppr { graph, passages, vectors, embedder, params }
    }

    /// HippoRAG 2: link facts and entities → seed them and every passage by its dense
    /// score → PPR → rank passages by their mass; dense retrieval where nothing links.
    /// The walk's explanation when `explain`.
    ///
    /// `within` a filter, the first `k` admitted passages of that order, the walk ranking
    /// only those it admits; `None` where the order's admitted head is not the walk's (no
    /// entity linked, or fewer admitted passages with mass than asked): the caller then
    /// filters a deeper ranking ([`super::ordered`]).
    fn run(
        &self,
        query: &Query,
        k: usize,
        explain: bool,
        within: Option<&Selection>,
    ) -> Result<Option<(Retrieval, Linked, Option<WalkDetail>)>> {
        let mut trace = Trace::default();
        let q = query_embedding(self.embedder.as_ref(), query, &mut trace)?;
        let p = &self.params;
        // Looked up once, for the dense step, the entity products and the walk.
        let walker = self.graph.walker(&self.passages, p.walk());
        // The walk's entity products need only the query vector, and much of their time is
        // a gather in the cache: they go on beside the fact scan and the dense step, which
        // wait on memory. Those two run one after the other: side by side they contend for
        // the same bandwidth (at a million passages, in pairs, 4 of 6 runs were faster in
        // turn; docs/scale.md).
        // A query that seeds no entity is answered by dense search, so the dense step
        // waits for the seeds (the products, started beside, are then taken in vain).
        let mut products_trace = Trace::default();
        let (linked, products) = rayon::join(
            || -> Result<_> {
                let linked = link_entities(&self.graph, self.embedder.as_ref(), query, &q, &p.link, &mut trace)?;
                let dense = match linked.has_seeds() {
                    true => self.dense_step(&walker, &q, p.dense_guard.depth.max(k), &mut trace)?,
                    false => None,
                };
                Ok((linked, dense))
            },
            || self.entity_products(&walker, &q, &mut products_trace),
        );
        let ((linked, dense), products) = (linked?, products?);
        trace.steps.append(&mut products_trace.steps);
        let walked = match linked.entity_seeds() {
            Some(entity_seeds) => {
                let dense = dense.as_ref().map(|d| d.scores.view());
                let entity_products = products.as_deref();
                let input = WalkInput { entity_seeds, query: &q, dense, entity_products, depth: k, within, explain };
                Some(walker.rank(input, &mut trace)?)
            }
            None => None,
        };
        if let Some(within) = within {
            let want = k.min(within.count());
            if walked.as_ref().is_none_or(|w| w.passages.len() < want) {
                return Ok(None);
            }
        }
        let guard_top = dense.and_then(|d| d.guard_top);
        let (list, walked) = match walked {
            Some(w) => (Some(w.passages), Some(w.detail)),
            None => (None, None),
        };
        let list = match (list, guard_top) {
            (Some(list), Some(top)) => trace.step("dense guard", || {
                let mut guarded = guard(&list, &top, &p.dense_guard);
                // Guarded passages the filter does not admit go (the walk's list holds
                // none), before the list is cut to k.
                if let Some(within) = within {
                    guarded.retain(|x| within.contains(x.0 as usize));
                }
                let out = backfill(guarded, &top, k);
                let guarded = p.dense_guard.guarded(&top).len();
                let detail = json!({"params": p.dense_guard, "guarded": guarded, "top": list_detail(&out)});
                Ok((out, detail))
            })?,
            (Some(list), None) if list.len() >= k => list,
            // No fact matched: HippoRAG 2 answers with dense retrieval. A short list is
            // filled up from the dense one.
            (Some(list), None) => {
                let dense = dense_search(self.vectors.as_ref(), &q, k, &mut trace)?;
                backfill(list, &dense, k)
            }
            (None, _) => dense_search(self.vectors.as_ref(), &q, k, &mut trace)?,
        };
        // Within a filter the walk's list held k admitted passages, or every one.
        let list = match within {
            Some(within) => list.into_iter().filter(|x| within.contains(x.0 as usize)).take(k).collect(),
            None => list,
        };
        Ok(Some((Retrieval { hits: hits(list), trace }, linked, walked.flatten())))
    }

    /// The dense scores the guard and the walk need, in one pass over the passage vectors,
    /// or over their int8 screen (exact; a quarter of the bytes) when the split walk will
    /// run: with the guard off, the walk's alone; `None` when neither needs any (no
    /// passage seeds, and no guard).
    fn dense_step(&self, walker: &Walker, q: &[f32], depth: usize, trace: &mut Trace) -> Result<Option<DenseStep>> {
        let p = &self.params;
        let guard = p.dense_guard.is_on();
        if self.passages.rows() == 0 || !(guard || p.passage_node_weight > 0.0) {
            return Ok(None);
        }
        // Named as the walk's own steps are: what the guard-less walk needs is the range.
        let name = if guard || !walker.screens_dense() { "dense scores" } else { "dense range" };
        trace
            .step(name, || {
                let (top, scores) = walker.dense_scores(q, if guard { depth } else { 1 });
                let screened = matches!(scores, DenseScores::Screened(..));
                let step = DenseStep { guard_top: guard.then_some(top), scores };
                Ok((step, json!({"passages": self.passages.rows(), "screened": screened})))
            })
            .map(Some)
    }

    /// The split walk's entity products for `q`, when it reads them.
    fn entity_products(&self, walker: &Walker, q: &[f32], trace: &mut Trace) -> Result<Option<Vec<f64>>> {
        if !walker.takes_entity_products() {
            return Ok(None);
        }
        trace.step("entity products", || {
            let products = walker.entity_products(q);
            let detail = json!({"passages": products.as_ref().map(Vec::len)});
            Ok((products, detail))
        })
    }
}

impl Retriever for Ppr {
    fn name(&self) -> &str {
        SPEC.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let (retrieval, ..) = self.run(query, k, false, None)?.expect("a ranking without a filter");
        Ok(retrieval)
    }

    fn explain(&self, query: &Query, k: usize) -> Result<Option<(Retrieval, WalkExplanation)>> {
        let (retrieval, linked, walk) = self.run(query, k, true, None)?.expect("a ranking without a filter");
        Ok(Some((retrieval, linked.explain(self.name(), walk))))
    }

    /// The walk ranks the admitted passages alone: the split walk proves the best `k` of
    /// them as it proves an unfiltered top `k`, where filtering a deeper ranking would
    /// need the full walk (a tenth of a million passages admitted: 15 passages deep per
    /// match, 150 for 10).
    fn retrieve_within(&self, query: &Query, k: usize, selection: &Selection) -> Option<Result<Retrieval>> {
        self.run(query, k, false, Some(selection)).map(|r| r.map(|(retrieval, ..)| retrieval)).transpose()
    }
}
