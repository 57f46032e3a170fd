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
use super::{backfill, hits, list_detail, Query, Retrieval, Retriever, Trace};
use crate::corpus::PassageIdx;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::fusion::{guard, DenseGuard};
use crate::graph::linking::{LinkParams, NerMode, NO_LLM_FOR_NER};
use crate::graph::ppr::{PprParams, Ranked};
use crate::graph::split_ppr::{ranked_passages, PassageResponse, SplitQuery};
use crate::graph::{query_ner, GraphContext};
use crate::index::{Extremes, Matrix, Screened, VectorIndex};
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
    /// Weight of a passage node's seed relative to its min-max normalised dense score
    /// (HippoRAG 2's passage_node_weight, 0.05); 0 seeds phrases only (HippoRAG 1).
    pub passage_node_weight: f64,
    /// Dense passages that go before the walk's ranking (fusion::guard). Off here, as in
    /// HippoRAG 2; `auto` turns it on (`auto.dense_guard`).
    pub dense_guard: DenseGuard,
}

impl PprMethodParams {
    /// Whether the walk runs split by linearity (graph::split_ppr): asked for, and
    /// passages ranked by their own nodes (without passage seeds the push alone runs).
    fn splits(&self) -> bool {
        self.ppr.split && self.passage_scoring == PassageScoring::PassageNode && self.passage_node_weight >= 0.0
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

/// The query's dense scores, as far as the caller has them.
#[derive(Clone, Copy)]
pub(crate) enum Dense<'a> {
    /// Every passage's.
    All(&'a [f32]),
    /// The pass over the passage vectors' screen, and from it the lowest and the highest
    /// score over every passage, exactly: all the split walk needs; the full walk
    /// computes the scores.
    Screened(&'a Screened, f32, f32),
}

/// Passages scored by PPR from the query's facts (and mentions) and the passages' dense
/// scores (`dense`: what the caller has; else computed here), best first (at most
/// `depth`, zero-mass passages left out); `None` when no entity could be seeded.
#[allow(clippy::too_many_arguments)]
pub(crate) fn graph_scores(
    ctx: &GraphContext,
    embedder: &dyn Embedder,
    passages: &Matrix,
    query: &Query,
    embedding: &[f32],
    dense: Option<Dense<'_>>,
    params: &PprMethodParams,
    depth: usize,
    trace: &mut Trace,
) -> Result<Option<Vec<(PassageIdx, f32)>>> {
    match entity_seeds(ctx, embedder, query, embedding, params, trace)? {
        Some(seeds) => walk(ctx, passages, embedding, dense, None, seeds, params, depth, trace).map(Some),
        None => Ok(None),
    }
}

/// The query's entity seeds (node, weight) from its facts and mentions; `None` when no
/// entity could be seeded.
fn entity_seeds(
    ctx: &GraphContext,
    embedder: &dyn Embedder,
    query: &Query,
    embedding: &[f32],
    params: &PprMethodParams,
    trace: &mut Trace,
) -> Result<Option<Vec<(u32, f64)>>> {
    let mentions = match params.link.ner {
        NerMode::Llm => Some(llm_mentions(ctx, query, trace)?),
        _ => None,
    };
    let (embedding, embedder) = graph_query_embedding(ctx.embedder.as_ref(), embedder, query, embedding, trace)?;
    let seeds = trace.step("link entities", || {
        let linked = ctx.linker.link(&query.text, &embedding, mentions.as_deref(), embedder, &params.link)?;
        let detail = json!(linked);
        Ok((linked, detail))
    })?;
    Ok((!seeds.is_empty()).then(|| seeds.iter().map(|s| (s.entity, s.weight)).collect()))
}

/// Passages scored by PPR from `weights` (the entity seeds; the passage seeds are added
/// here), best first. `entity_products`: the split walk's, when the caller took them
/// (`PassageResponse::entity_products`).
#[allow(clippy::too_many_arguments)]
fn walk(
    ctx: &GraphContext,
    passages: &Matrix,
    embedding: &[f32],
    dense: Option<Dense<'_>>,
    entity_products: Option<&[f64]>,
    mut weights: Vec<(u32, f64)>,
    params: &PprMethodParams,
    depth: usize,
    trace: &mut Trace,
) -> Result<Vec<(PassageIdx, f32)>> {
    let g = ctx.graph();
    let e = g.entities.len();
    let graph_passages = g.passage_entities.len();
    let dense_scores = |trace: &mut Trace| {
        trace.step("dense scores", || {
            let d = passages.dots(embedding);
            let detail = json!({"passages": d.len()});
            Ok((d, detail))
        })
    };
    let (mut owned, mut screened) = (None, None);
    let dense = match dense {
        Some(d) => Some(d),
        None if params.passage_node_weight > 0.0 && passages.rows() > 0 => {
            match split_range(ctx, passages, embedding, params, trace)? {
                Some((pass, lo, hi)) => Some(Dense::Screened(screened.insert(pass), lo, hi)),
                None => Some(Dense::All(owned.insert(dense_scores(trace)?).as_slice())),
            }
        }
        None => None,
    };
    // Without passage seeds the split walk reads no dense score.
    if params.splits() && (dense.is_some() || params.passage_node_weight == 0.0) {
        if let Some(list) =
            split_walk(ctx, passages, embedding, dense, entity_products, &weights, params, depth, trace)?
        {
            return Ok(list);
        }
    }
    // The full walk seeds every passage with its score.
    let mut owned = None;
    let dense = match dense {
        Some(Dense::Screened(..)) => Some(owned.insert(dense_scores(trace)?).as_slice()),
        Some(Dense::All(all)) => Some(all),
        None => None,
    };
    if let Some(dense) = dense.filter(|_| params.passage_node_weight > 0.0) {
        trace.step("passage seeds", || {
            let n = push_passage_seeds(&mut weights, dense, e, graph_passages, params.passage_node_weight);
            Ok(((), json!({"passages": n, "weight": params.passage_node_weight})))
        })?;
    }
    trace.step("ppr", || {
        let r = match params.passage_scoring {
            // Only the passages' order is used: stop once it is proven.
            PassageScoring::PassageNode => {
                let ranked = Ranked { nodes: e..e + graph_passages, n: depth };
                ctx.ppr.ranked_pagerank(&weights, &params.ppr, &ranked)
            }
            PassageScoring::EntitySum => ctx.ppr.personalized_pagerank(&weights, &params.ppr),
        };
        let mut scored: Vec<(PassageIdx, f32)> = (0..graph_passages)
            .map(|p| {
                let s = match params.passage_scoring {
                    PassageScoring::PassageNode => r.scores[e + p],
                    PassageScoring::EntitySum => g.passage_entities[p].iter().map(|&x| r.scores[x as usize]).sum(),
                };
                (p as PassageIdx, s as f32)
            })
            .filter(|x| x.1 > 0.0)
            .collect();
        crate::rank::sort_hits(&mut scored);
        scored.truncate(depth);
        let detail = json!({"iterations": r.iterations, "residual": r.residual, "ranked": r.ranked, "passages": scored.len(),
                            "top": list_detail(&scored)});
        Ok((scored, detail))
    })
}

/// The lowest and highest dense score over the passages, exactly, from one pass over the
/// passage vectors' screen (at 1,000,000 passages its 4-bit first stage, 192 MB read
/// instead of 1.5 GB), when the split walk will run: all it needs of the dense scores,
/// and the pass itself, whose intervals the walk reads. `None` when it will not.
fn split_range(
    ctx: &GraphContext,
    passages: &Matrix,
    embedding: &[f32],
    params: &PprMethodParams,
    trace: &mut Trace,
) -> Result<Option<(Screened, f32, f32)>> {
    let Some(response) = split_response(ctx, passages, params) else {
        return Ok(None);
    };
    trace.step("dense range", || {
        let Some((pass, found)) = screen_pass(&response, passages, embedding, 1) else {
            return Ok((None, json!({"passages": passages.rows(), "reason": "the query is not finite"})));
        };
        let detail = json!({"passages": passages.rows(), "rescored": found.rescored});
        Ok((found.min.zip(found.max).map(|(lo, hi)| (pass, lo, hi)), detail))
    })
}

/// The walk's response to the passage seeds, when the split walk will run over these
/// passages (the response is of the graph's passages, and they are all of them).
fn split_response(ctx: &GraphContext, passages: &Matrix, params: &PprMethodParams) -> Option<Arc<PassageResponse>> {
    let response = params.splits().then(|| ctx.passage_response(passages, params.ppr.damping)).flatten();
    response.filter(|r| r.passages() == passages.rows())
}

/// One int8 pass over the passage vectors' screen for `q`: every passage's interval (what
/// the split walk reads), and from it the best `n` passages and the lowest and highest
/// score, exactly. `None` for a query that is not finite.
fn screen_pass(response: &PassageResponse, passages: &Matrix, q: &[f32], n: usize) -> Option<(Screened, Extremes)> {
    let screen = response.passage_screen();
    let pass = screen.screened(q, n, true)?;
    let found = screen.extremes_of(&pass, passages, q);
    Some((pass, found))
}

/// The walk split by linearity (graph::split_ppr): the passage seeds' part from the
/// graph's precomputed response, the entity seeds' by local push. `None` (and a trace
/// step saying why) when it does not apply or cannot prove the ranking: the caller then
/// runs the full walk.
#[allow(clippy::too_many_arguments)]
fn split_walk(
    ctx: &GraphContext,
    passages: &Matrix,
    embedding: &[f32],
    dense: Option<Dense<'_>>,
    entity_products: Option<&[f64]>,
    entity_seeds: &[(u32, f64)],
    params: &PprMethodParams,
    depth: usize,
    trace: &mut Trace,
) -> Result<Option<Vec<(PassageIdx, f32)>>> {
    let Some(response) = ctx.passage_response(passages, params.ppr.damping) else {
        return Ok(None);
    };
    let (dense_range, screened) = match dense {
        // No passage seeds.
        None => ((0.0, 0.0), None),
        Some(Dense::All(all)) if all.len() >= response.passages() => {
            let graph_passages = &all[..response.passages()];
            if graph_passages.iter().any(|s| !s.is_finite()) {
                return Ok(None);
            }
            (crate::rank::range(graph_passages), None)
        }
        // A range over more passages than the graph's is not theirs.
        Some(Dense::Screened(pass, lo, hi)) if passages.rows() == response.passages() => ((lo, hi), Some(pass)),
        _ => return Ok(None),
    };
    let query = SplitQuery {
        entity_seeds,
        dense_range,
        query: embedding,
        passage_weight: params.passage_node_weight,
        damping: params.ppr.damping,
        vectors: passages,
        budget: params.ppr.split_budget,
        screened,
        entity_products,
    };
    trace.step("ppr", || {
        let split = ranked_passages(&ctx.ppr, &response, &query, depth);
        let list: Option<Vec<(PassageIdx, f32)>> =
            split.as_ref().map(|s| s.top.iter().map(|&(p, x)| (p, x as f32)).filter(|x| x.1 > 0.0).collect());
        let detail = match (&split, &list) {
            (Some(s), Some(l)) => {
                json!({"split": true, "proven": s.proven, "pushes": s.pushes, "residual": s.residual, "bound": s.bound,
                       "passages": l.len(), "top": list_detail(l)})
            }
            _ => json!({"split": false, "reason": "the bounds did not separate the ranking; the full walk follows"}),
        };
        Ok((list, detail))
    })
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

    /// The best `depth` dense passages, for the guard, and what the walk needs of the
    /// dense scores: from the passages' int8 screen when the split walk will run
    /// (`response`; exact, every score only if the walk falls back to the full one), else
    /// every score.
    fn dense_scores(
        &self,
        response: Option<&PassageResponse>,
        q: &[f32],
        depth: usize,
    ) -> (Vec<(PassageIdx, f32)>, DenseScores) {
        if let Some(r) = response {
            if let Some((pass, Extremes { top, min: Some(lo), max: Some(hi), .. })) =
                screen_pass(r, &self.passages, q, depth)
            {
                return (top, DenseScores::Screened(pass, lo, hi));
            }
        }
        let all = self.passages.dots(q);
        (crate::rank::top(&all, depth), DenseScores::All(all))
    }

    /// The dense scores the guard and the walk need, in one pass over the passage vectors,
    /// or over their int8 screen (exact; a quarter of the bytes) when the split walk will
    /// run: with the guard off, the walk's alone; `None` when neither needs any (no
    /// passage seeds, and no guard). `response`: the walk's, when it will run split.
    fn dense_step(
        &self,
        response: Option<&PassageResponse>,
        q: &[f32],
        depth: usize,
        trace: &mut Trace,
    ) -> Result<Option<DenseStep>> {
        let p = &self.params;
        let guard = p.dense_guard.is_on();
        if self.passages.rows() == 0 || !(guard || p.passage_node_weight > 0.0) {
            return Ok(None);
        }
        // Named as the walk's own steps are: what the guard-less walk needs is the range.
        let name = if guard || response.is_none() { "dense scores" } else { "dense range" };
        trace
            .step(name, || {
                let (top, scores) = self.dense_scores(response, q, if guard { depth } else { 1 });
                let screened = matches!(scores, DenseScores::Screened(..));
                let step = DenseStep { guard_top: guard.then_some(top), scores };
                Ok((step, json!({"passages": self.passages.rows(), "screened": screened})))
            })
            .map(Some)
    }

    /// The split walk's entity products for `q` (`PassageResponse::entity_products`), when
    /// it will run (`response`) in the entity form with passage seeds.
    fn entity_products(
        &self,
        response: Option<&PassageResponse>,
        q: &[f32],
        trace: &mut Trace,
    ) -> Result<Option<Vec<f64>>> {
        let with_seeds = self.params.passage_node_weight > 0.0;
        let Some(response) = response.filter(|r| with_seeds && r.has_entity_form()) else {
            return Ok(None);
        };
        trace.step("entity products", || {
            let products = response.entity_products(&self.graph.ppr, q);
            let detail = json!({"passages": products.as_ref().map(Vec::len)});
            Ok((products, detail))
        })
    }
}

/// The dense step: the guard's best passages (when it is on), and what the walk needs of
/// the scores.
struct DenseStep {
    guard_top: Option<Vec<(PassageIdx, f32)>>,
    scores: DenseScores,
}

/// [`Dense`], owned.
enum DenseScores {
    All(Vec<f32>),
    Screened(Screened, f32, f32),
}

impl DenseScores {
    fn view(&self) -> Dense<'_> {
        match self {
            DenseScores::All(all) => Dense::All(all),
            DenseScores::Screened(pass, lo, hi) => Dense::Screened(pass, *lo, *hi),
        }
    }
}

impl Retriever for Ppr {
    fn name(&self) -> &str {
        SPEC.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let mut trace = Trace::default();
        let q = query_embedding(self.embedder.as_ref(), query, &mut trace)?;
        let p = &self.params;
        // The walk's entity products need only the query vector, and much of their time is
        // a gather in the cache: they go on beside the fact scan and the dense step, which
        // wait on memory. Those two run one after the other: side by side they contend for
        // the same bandwidth (at a million passages, in pairs, 4 of 6 runs were faster in
        // turn; docs/scale.md).
        // A query that seeds no entity is answered by dense search, so the dense step
        // waits for the seeds (the products, started beside, are then taken in vain).
        let embedder = self.embedder.as_ref();
        // Looked up once, for both branches.
        let response = split_response(&self.graph, &self.passages, p);
        let response = response.as_deref();
        let mut products_trace = Trace::default();
        let (seeded, products) = rayon::join(
            || -> Result<_> {
                let Some(seeds) = entity_seeds(&self.graph, embedder, query, &q, p, &mut trace)? else {
                    return Ok(None);
                };
                let dense = self.dense_step(response, &q, p.dense_guard.depth.max(k), &mut trace)?;
                Ok(Some((seeds, dense)))
            },
            || self.entity_products(response, &q, &mut products_trace),
        );
        let (seeded, products) = (seeded?, products?);
        trace.steps.append(&mut products_trace.steps);
        let (seeds, dense) = seeded.map_or((None, None), |(seeds, dense)| (Some(seeds), dense));
        let walk_dense = dense.as_ref().map(|d| d.scores.view());
        let graph = match seeds {
            Some(seeds) => {
                Some(walk(&self.graph, &self.passages, &q, walk_dense, products.as_deref(), seeds, p, k, &mut trace)?)
            }
            None => None,
        };
        let guard_top = dense.and_then(|d| d.guard_top);
        let list = match (graph, guard_top) {
            (Some(list), Some(top)) => trace.step("dense guard", || {
                let out = backfill(guard(&list, &top, &p.dense_guard), &top, k);
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
        Ok(Retrieval { hits: hits(list), trace })
    }
}

/// HippoRAG 2's passage seeds: every graph passage (node `entities + p`) seeded with its
/// min–max normalised dense score times `weight`; returns how many passages were read.
pub(crate) fn push_passage_seeds(
    weights: &mut Vec<(u32, f64)>,
    dense: &[f32],
    entities: usize,
    graph_passages: usize,
    weight: f64,
) -> usize {
    let n = graph_passages.min(dense.len());
    let (lo, hi) = crate::rank::range(&dense[..n]);
    for (p, &s) in dense[..n].iter().enumerate() {
        let x = if hi > lo { ((s - lo) / (hi - lo)) as f64 } else { 1.0 };
        if x > 0.0 {
            weights.push(((entities + p) as u32, x * weight));
        }
    }
    n
}
