//! The GEAR agent (§5): SyncGE retrieval per iteration, a gist memory of proximal
//! triples read from what was retrieved, a reasoning step that stops once the memory
//! answers the question, and query rewriting otherwise; after termination, passageLink
//! of every memory triple and one RRF over everything (Eq. 8–10).

use std::sync::Arc;

use serde_json::json;

use super::stages::{self, remember, Fact, Verdict};
use super::sync_ge::{llm_or_nothing, sync_ge};
use super::{Expansion, Ranked};
use crate::corpus::Passage;
use crate::error::Result;
use crate::fusion::rrf;
use crate::index::SearchKind;
use crate::llm::Llm;
use crate::retrieve::dense::query_embedding;
use crate::retrieve::fallback::fallback_step;
use crate::retrieve::fallback::WithFallback;
use crate::retrieve::registry::{GraphUse, LlmUse, MethodSpec, TraceKind};
use crate::retrieve::{hits, list_detail, Query, Retrieval, Retriever, Trace};

pub const GEAR: MethodSpec = MethodSpec {
    name: "gear",
    section: Some("gear"),
    summary: "the GEAR agent: SyncGE at each step, a gist memory, a reason-and-rewrite loop, then passageLink \
              of the memory fused by RRF",
    graph: GraphUse::Required,
    llm: LlmUse::Always,
    trace: TraceKind::Beams,
    build: |s, r| {
        let llm = r.llm(GEAR.name)?;
        let base = r.method(s.gear.base_method().name)?;
        let method = Gear::new(Expansion::build(s, r)?, llm, r.llm_concurrency());
        Ok(Box::new(WithFallback::new(Box::new(method), base)))
    },
};

pub struct Gear {
    ctx: Expansion,
    llm: Arc<dyn Llm>,
    concurrency: usize,
}

impl Gear {
    pub fn new(ctx: Expansion, llm: Arc<dyn Llm>, concurrency: usize) -> Self {
        Gear { ctx, llm, concurrency }
    }

    /// passageLink(t_j, k) (Eq. 8, 10): RRF of the passages the base retriever finds for
    /// the triple's text and the passages of the triples it finds in the triple index.
    fn passage_link(&self, memory: &[Fact], k: usize) -> Result<Vec<Ranked>> {
        let ctx = &self.ctx;
        let kind = ctx.params.base;
        let texts: Vec<String> = memory.iter().map(Fact::text).collect();
        // The base retriever searches passages in their space, the triple index in the
        // triples' (the same vectors unless the graph has an embedder of its own).
        let embeddings = ctx.triples.embed_queries(kind, &texts, ctx.triple_embedder())?;
        let passage_embeddings = match ctx.graph_embedder {
            Some(_) => ctx.triples.embed_queries(kind, &texts, ctx.embedder.as_ref())?,
            None => embeddings.clone(),
        };
        texts
            .iter()
            .zip(embeddings)
            .zip(passage_embeddings)
            .map(|((text, e), passage_e)| {
                let embedding = (kind != SearchKind::Bm25).then(|| Arc::new(passage_e));
                let from_passages: Ranked = ctx
                    .base
                    .retrieve(&Query { embedding, ..Query::new(text.clone()) }, k)?
                    .hits
                    .into_iter()
                    .map(|h| (h.passage, h.score))
                    .collect();
                let mut seen = std::collections::HashSet::new();
                let from_triples: Ranked = ctx
                    .triples
                    .search(kind, text, &e, k, ctx.params.rrf_k, ctx.hybrid.depth)?
                    .into_iter()
                    .map(|(t, s)| (ctx.triples.graph.passage(t), s))
                    .filter(|(p, _)| seen.insert(*p))
                    .collect();
                let mut fused = rrf(&[&from_passages, &from_triples], ctx.params.rrf_k);
                fused.truncate(k);
                Ok(fused)
            })
            .collect()
    }
}

impl Retriever for Gear {
    fn name(&self) -> &str {
        GEAR.name
    }

    fn retrieve(&self, question: &Query, k: usize) -> Result<Retrieval> {
        let (ctx, llm, p) = (&self.ctx, self.llm.as_ref(), &self.ctx.params);
        let mut trace = Trace::default();
        let mut memory: Vec<Fact> = Vec::new(); // G
        let mut rounds: Vec<Ranked> = Vec::new(); // C_q(1), …, C_q(n)
        let mut current = question.clone(); // q(n), q(1) = q
        let mut steps = 0;
        let mut stopped = "max steps";
        // Queries asked so far (normalised): a rewrite that repeats one would only
        // repeat its round.
        let mut asked = vec![normalize_query(&question.text)];
        let mut llm_failures: Vec<String> = Vec::new();
        for n in 1..=p.max_steps.max(1) {
            steps = n;
            trace.step("iteration", || Ok(((), json!({"step": n, "query": current.text}))))?;
            let q = query_embedding(ctx.embedder.as_ref(), &current, &mut trace)?;
            let query = Query { embedding: Some(q.clone()), gold: None, ..current.clone() };
            // C_q(n): SyncGE on q(n), from round_passages base passages.
            let (retrieved, _, failure) = sync_ge(ctx, llm, &query, &q, p.round_passages, usize::MAX, &mut trace)?;
            llm_failures.extend(failure);
            // T^G_q(n) = read(C_q(n), q[, G(n−1)]) (Eq. 4); G(n) = G(n−1) ∘ T^G_q(n) (Eq. 5)
            let passages: Vec<&Passage> =
                retrieved.iter().take(p.round_passages).map(|&(x, _)| ctx.index.passage(x)).collect();
            if !passages.is_empty() {
                let failure = trace.llm_step("gist read", llm, |meter| {
                    let r = llm_or_nothing(stages::read(
                        meter,
                        &passages,
                        &question.text,
                        &memory,
                        p.max_tokens,
                        p.grounding,
                    ));
                    let added = remember(&mut memory, &r.facts);
                    let d = json!({"passages": passages.len(), "proximal_triples": r.facts, "added": added,
                                   "memory": memory, "malformed": r.malformed, "ungrounded": r.ungrounded,
                                   "unparsed": r.unparsed,
                                   "error": r.error});
                    Ok((r.failure(), d))
                })?;
                llm_failures.extend(failure);
            }
            rounds.push(retrieved);
            // a(n), r(n) = reason(G(n), q) (Eq. 6)
            // With no fact in memory the question cannot be answerable: no call.
            let verdict = if memory.is_empty() {
                Verdict { reason: "no facts known yet".into(), ..Verdict::default() }
            } else {
                trace.llm_step("reason", llm, |meter| {
                    let (v, error) = match stages::reason(meter, &question.text, &memory, p.max_tokens) {
                        Ok(v) => (v, None),
                        Err(e) => (Verdict::default(), Some(e.to_string())),
                    };
                    let d = json!({"verdict": v, "error": error});
                    Ok((v, d))
                })?
            };
            if verdict.answerable {
                stopped = "answerable";
                break;
            }
            if n == p.max_steps {
                break;
            }
            // q(n+1) = rewrite(G(n), q, r(n)) (Eq. 7)
            let next = trace.llm_step("rewrite", llm, |meter| {
                let why = &verdict.reason;
                let (next, error) =
                    match stages::rewrite(meter, &question.text, &memory, why, p.max_tokens, p.ground_rewrites) {
                        Ok(q) => (q, None),
                        Err(e) => (None, Some(e.to_string())),
                    };
                let d = json!({"next_query": next, "error": error});
                Ok((next, d))
            })?;
            match next {
                Some(text) if asked.contains(&normalize_query(&text)) => {
                    stopped = "repeated query";
                    break;
                }
                Some(text) => {
                    asked.push(normalize_query(&text));
                    current = Query::new(text);
                }
                None => {
                    stopped = "no next query";
                    break;
                }
            }
        }
        // C_t_j = passageLink(t_j, k) for every t_j in G(n) (Eq. 8, 10)
        let linked = trace.step("passage link", || {
            let lists = self.passage_link(&memory, k)?;
            let d = json!(memory
                .iter()
                .zip(&lists)
                .map(|(f, l)| json!({"triple": f.text(), "top": list_detail(l)}))
                .collect::<Vec<_>>());
            Ok((lists, d))
        })?;
        // RRF(C_t_1, …, C_t_|G|, C_q(1), …, C_q(n)) (Eq. 9)
        let fused = trace.step("fuse all", || {
            let lists: Vec<&[_]> = linked.iter().chain(&rounds).map(Vec::as_slice).collect();
            let mut f = rrf(&lists, p.rrf_k);
            f.truncate(k);
            let d = json!({"steps": steps, "stopped": stopped, "memory": memory, "linked_lists": linked.len(),
                           "rounds": rounds.len(), "top": list_detail(&f)});
            Ok((f, d))
        })?;
        if memory.is_empty() && !llm_failures.is_empty() {
            // Every LLM stage failed to give a fact: the query is answered by the base
            // ranking, and says so.
            let base = ctx.base_passages(question, k, &mut trace)?;
            trace.steps.push(fallback_step(p.base_method().name, &llm_failures.join("; ")));
            return Ok(Retrieval { hits: hits(base), trace });
        }
        Ok(Retrieval { hits: hits(fused), trace })
    }

    fn concurrency(&self) -> Option<usize> {
        Some(self.concurrency)
    }
}

/// A query as compared for repeats: lower case, whitespace and end punctuation ignored.
fn normalize_query(text: &str) -> String {
    crate::text::normalize_whitespace(&text.to_lowercase()).trim_end_matches(['?', '.', '!']).trim().to_string()
}
