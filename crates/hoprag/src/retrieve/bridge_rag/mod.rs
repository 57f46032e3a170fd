//! BridgeRAG (Bacellar 2026): bridge-conditioned retrieval in five stages.
//!
//! 1. Hop 1: dense top-K1; the top-1 passage is the bridge b (§4.1).
//! 2. SVO expansion: one LLM call writes N hop-2 queries from (q, b); each is searched
//!    (top-k2), the lists merged by the best cosine per passage, the top 15 kept (§4.2).
//! 3. Dual-entity expansion: one LLM call names "e1 | e2" from (q, b); each is searched
//!    (top 5) (§4.3).
//! 4. Pool: SVO-15 ∪ e1-top-5 ∪ e2-top-5, the top 20 by their best search score (Eq. 4).
//! 5. Judge and fusion: one batched LLM call scores every candidate 0–10 given q, b, e1,
//!    e2; f(c) = (1 − α)·PIT(judge, c) + α·PIT(svo, c) (Eq. 5–6); the top-k by f.
//!
//! The ablation conditions of §5.4 share stages 1–4, so one pool (and, behind the response
//! cache, the very same SVO and entity answers) serves all three; they differ only in the
//! judge: none (A, ranked by SVO similarity), the 2-way s(q, c) (B) or s(q, b, c) (C).
//!
//! Every query leaves a decision record in its trace (§9): bridge, entities, SVO queries,
//! the pool with SVO and judge scores, the final ranking, and what had to be repaired.

mod params;
mod parse;
pub mod prompts;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub use params::BridgeRagParams;
pub use parse::{entities, judge_scores, svo_queries, EntityAnswer, EntitySplit, JudgeAnswer, SvoAnswer};
use prompts::{entity_request, judge_request, svo_request, JudgeContext, PromptPassage};

use super::dense::Dense;
use super::dense::{dense_search, query_embedding};
use super::fallback::WithFallback;
use super::registry::{GraphUse, LlmUse, MethodSections, MethodSpec, Resources, TraceKind};
use super::{Hit, Query, Retrieval, Retriever, Trace};
use crate::corpus::{Passage, PassageIdx};
use crate::embed::{dot, Embedder, TextKind};
use crate::error::{Error, Result};
use crate::fusion::pit;
use crate::index::{Index, VectorIndex};
use crate::llm::{ChatRequest, Llm, Meter};

/// The ablation condition (§5.4): what ranks the fixed pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Condition {
    /// SVO similarity alone, no judge.
    #[serde(alias = "A")]
    A,
    /// The 2-way judge s(q, c), without the bridge.
    #[serde(alias = "B")]
    B,
    /// The bridge-conditioned judge s(q, b, c): full BridgeRAG.
    #[default]
    #[serde(alias = "C")]
    C,
}

/// Full BridgeRAG: the bridge-conditioned judge (condition from `bridge_rag.condition`).
pub const SPEC: MethodSpec = MethodSpec {
    name: "bridge_rag",
    section: Some("bridge_rag"),
    summary: "BridgeRAG: the top dense passage is the bridge; SVO and dual-entity expansion into one pool, \
              scored by a bridge-conditioned LLM judge, PIT fusion (condition from bridge_rag.condition, default c)",
    graph: GraphUse::No,
    llm: LlmUse::Always,
    trace: TraceKind::Judge,
    build: |s, r| build(&SPEC, None, s, r),
};

/// Ablation A: the same pool ranked by SVO similarity alone.
pub const SPEC_A: MethodSpec = MethodSpec {
    name: "bridge_rag_a",
    summary: "BridgeRAG ablation A: the same pool ranked by SVO similarity alone",
    build: |s, r| build(&SPEC_A, Some(Condition::A), s, r),
    ..SPEC
};

/// Ablation B: the same pool ranked by the 2-way judge s(q, c).
pub const SPEC_B: MethodSpec = MethodSpec {
    name: "bridge_rag_b",
    summary: "BridgeRAG ablation B: the same pool ranked by the 2-way judge s(q, c), without the bridge",
    build: |s, r| build(&SPEC_B, Some(Condition::B), s, r),
    ..SPEC
};

/// BridgeRAG behind its LLM-free fallback, dense retrieval.
fn build(
    spec: &MethodSpec,
    condition: Option<Condition>,
    sections: &MethodSections,
    r: &dyn Resources,
) -> Result<Box<dyn Retriever>> {
    let llm = r.llm(spec.name)?;
    let mut params = sections.bridge_rag;
    params.condition = condition.unwrap_or(params.condition);
    let dense = Box::new(Dense::new(r.vectors(), r.embedder()));
    let bridge = BridgeRag::new(r.index(), r.vectors(), r.embedder(), llm, params, spec.name, r.llm_concurrency());
    Ok(Box::new(WithFallback::new(Box::new(bridge), dense)))
}

/// Where a pool passage came from.
const FROM_SVO: u8 = 1;
const FROM_E1: u8 = 2;
const FROM_E2: u8 = 4;

/// Answer text kept in the trace of each LLM step.
const ANSWER_SNIPPET_CHARS: usize = 600;

pub struct BridgeRag {
    index: Arc<Index>,
    vectors: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    llm: Arc<dyn Llm>,
    params: BridgeRagParams,
    name: String,
    concurrency: usize,
}

impl BridgeRag {
    /// `name` is the method name reports show; `concurrency` the queries worth running at
    /// once (the LLM client's limit).
    pub fn new(
        index: Arc<Index>,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        llm: Arc<dyn Llm>,
        params: BridgeRagParams,
        name: impl Into<String>,
        concurrency: usize,
    ) -> Self {
        BridgeRag { index, vectors, embedder, llm, params, name: name.into(), concurrency }
    }
}

/// One candidate of the pool.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Candidate {
    passage: PassageIdx,
    /// Best score over the searches that found it (what the pool is cut by).
    pool_score: f32,
    from: u8,
}

/// The decision record of one query (the paper's §9 traceability), in the trace as the
/// detail of the step "decision record".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub condition: Condition,
    /// Passage id of the bridge.
    pub bridge: String,
    pub e1: String,
    pub e2: String,
    pub svo_queries: Vec<String>,
    /// The pool in pool order (best search score first).
    pub pool: Vec<PoolRecord>,
    /// Passage ids as returned, best first.
    pub ranking: Vec<String>,
    /// What was repaired or fell back: cut passages, unusable answers, failed calls.
    pub warnings: Vec<String>,
    /// The full text of every answer that could not be used as asked (no JSON, the
    /// wrong shape, scores missing), by stage, for inspection.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw_answers: BTreeMap<String, String>,
    /// The judge scored fewer than half of the pool, so the query was answered with the
    /// dense ranking instead.
    #[serde(default)]
    pub fell_back_to_dense: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolRecord {
    pub id: String,
    /// The searches that found it: `svo`, `e1`, `e2`.
    pub from: Vec<String>,
    /// Best score over those searches.
    pub pool_score: f32,
    /// s_svo(c) = max_i cos(q_i, c) over the SVO queries.
    pub svo: f64,
    /// The judge's score (none under condition A).
    pub judge: Option<f64>,
    /// Final score f(c).
    pub f: f64,
}

impl Retriever for BridgeRag {
    fn name(&self) -> &str {
        &self.name
    }

    fn concurrency(&self) -> Option<usize> {
        Some(self.concurrency)
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let p = &self.params;
        let llm = self.llm.as_ref();
        let mut trace = Trace::default();
        let mut warnings = Vec::new();
        let mut raw = BTreeMap::new();

        // Stage 1: hop 1; the top-1 passage is the bridge.
        let q = query_embedding(self.embedder.as_ref(), query, &mut trace)?;
        let hop1 = dense_search(self.vectors.as_ref(), &q, p.k1.max(1), &mut trace)?;
        let Some(&(bridge_idx, _)) = hop1.first() else {
            return Ok(Retrieval { hits: Vec::new(), trace });
        };
        let bridge_passage = self.index.passage(bridge_idx);
        let bridge = bridge_prompt(bridge_passage, p.bridge_max_chars, &mut warnings);

        // Stage 2: N hop-2 queries in subject-verb-object form, conditioned on (q, b).
        let svo = trace.llm_step("svo queries", llm, |m| {
            let request = svo_request(&query.text, &bridge, p.svo_queries, p.svo_max_tokens);
            Ok(ask_svo(m, &request, p.svo_queries, &mut warnings, &mut raw))
        })?;

        // Stage 3: two entities "e1 | e2" from (q, b).
        let (e1, e2) = trace.llm_step("entities", llm, |m| {
            let request = entity_request(&query.text, &bridge, p.entity_max_tokens);
            Ok(ask_entities(m, &request, &bridge_passage.title, &mut warnings, &mut raw))
        })?;

        // One embedding call for the SVO queries and the entities.
        let same_entity = e1.eq_ignore_ascii_case(&e2);
        let mut texts = svo.clone();
        texts.extend([e1.clone(), e2.clone()].into_iter().filter(|e| !e.is_empty()).take(if same_entity {
            1
        } else {
            2
        }));
        let vectors = if texts.is_empty() {
            Vec::new()
        } else {
            trace.step("embed expansions", || {
                let v = self.embedder.embed(&texts, TextKind::Query)?;
                if v.len() != texts.len() {
                    return Err(Error::Embedding(format!("{} vectors for {} texts", v.len(), texts.len())));
                }
                Ok((v, json!({"texts": texts.len(), "embedder": self.embedder.id()})))
            })?
        };
        // Without SVO queries the question itself stands in for them.
        let svo_vectors: Vec<&[f32]> =
            if svo.is_empty() { vec![&q[..]] } else { vectors[..svo.len()].iter().map(Vec::as_slice).collect() };
        let entity_vectors: Vec<&[f32]> = vectors[svo.len()..].iter().map(Vec::as_slice).collect();

        // Stages 2 and 3, searches: each SVO query top-k2, each entity top-5 (a repeated
        // entity is searched once), in one scan of the vectors where the index can.
        let (svo_lists, e1_list, e2_list) = trace.step("expansion search", || {
            let all: Vec<&[f32]> = svo_vectors.iter().chain(&entity_vectors).copied().collect();
            let mut lists = self.vectors.search_many(&all, p.svo_k.max(p.entity_k))?;
            let mut entity_lists = lists.split_off(svo_vectors.len());
            lists.iter_mut().for_each(|l| l.truncate(p.svo_k));
            entity_lists.iter_mut().for_each(|l| l.truncate(p.entity_k));
            let e1_list = if entity_lists.is_empty() { Vec::new() } else { entity_lists.remove(0) };
            let e2_list = entity_lists.pop().unwrap_or_else(|| e1_list.clone());
            let d = json!({"svo_searches": svo_vectors.len(), "svo_k": p.svo_k, "entity_searches": entity_vectors.len(),
                           "entity_k": p.entity_k, "same_entity": same_entity});
            Ok(((lists, e1_list, e2_list), d))
        })?;

        // Stage 4: SVO-15 by union_max, the pool, and every member's SVO similarity.
        let (pool, svo_scores) = trace.step("pool", || {
            let mut svo_list = union_max(&svo_lists);
            svo_list.truncate(p.svo_keep);
            let pool = build_pool(&svo_list, &e1_list, &e2_list, p.pool);
            let matrix = self.index.vectors();
            let svo_scores: Vec<f64> = pool
                .iter()
                .map(|c| svo_vectors.iter().map(|v| dot(v, matrix.row(c.passage)) as f64).fold(f64::MIN, f64::max))
                .collect();
            let d = json!({"svo_kept": svo_list.len(), "size": pool.len(),
                           "from_svo": pool.iter().filter(|c| c.from & FROM_SVO != 0).count(),
                           "entity_only": pool.iter().filter(|c| c.from & FROM_SVO == 0).count()});
            Ok(((pool, svo_scores), d))
        })?;

        // Stage 5: the judge (conditions B and C), one call over the whole pool.
        let judge = match p.condition {
            Condition::A => None,
            condition => Some(trace.llm_step("judge", llm, |m| {
                let candidates: Vec<PromptPassage> = pool
                    .iter()
                    .map(|c| {
                        let passage = self.index.passage(c.passage);
                        PromptPassage {
                            title: passage.title.clone(),
                            text: cut(&passage.text, p.candidate_max_chars).0,
                        }
                    })
                    .collect();
                let context = match condition {
                    Condition::B => JudgeContext::QuestionOnly,
                    _ => JudgeContext::Bridge { bridge: &bridge, e1: &e1, e2: &e2 },
                };
                let request = judge_request(&query.text, context, &candidates, p.judge_max, p.judge_max_tokens);
                let (n, max) = (pool.len(), f64::from(p.judge_max));
                Ok(ask_judge(m, &request, n, max, p.judge_aligned_scores, &mut warnings, &mut raw))
            })?),
        };
        // A judge that scored fewer than half of the pool has not ranked it: the query
        // gets the LLM-free dense ranking instead, marked in the trace and the record.
        let judged = judge.as_ref().map(|(_, scored)| *scored);
        let fell_back = judged.is_some_and(|scored| 2 * scored < pool.len());
        let judge: Option<Vec<f64>> = judge.map(|(scores, _)| scores);

        // f(c) = (1 − α)·PIT(judge, c) + α·PIT(svo, c); under A, PIT(svo) alone.
        let (order, f) = trace.step("pit fusion", || {
            let f = fuse(&svo_scores, judge.as_deref(), p.alpha);
            let order = rank(&f, &svo_scores);
            Ok(((order, f), json!({"alpha": p.alpha, "judged": judge.is_some()})))
        })?;

        let mut hits: Vec<Hit> = order.iter().map(|&i| Hit { passage: pool[i].passage, score: f[i] as f32 }).collect();
        if fell_back {
            let reason = format!("the judge scored {} of {} pool passages", judged.unwrap_or(0), pool.len());
            warnings.push(format!("{reason}; answered with the dense ranking"));
            let dense = dense_search(self.vectors.as_ref(), &q, k, &mut trace)?;
            hits = dense.into_iter().map(|(passage, score)| Hit { passage, score }).collect();
            trace.steps.push(crate::retrieve::fallback::fallback_step(super::dense::SPEC.name, &reason));
        }
        // A pool smaller than k is followed by the rest of the hop-1 list, below it.
        for &(passage, _) in &hop1 {
            if hits.len() < k && !hits.iter().any(|h| h.passage == passage) {
                hits.push(Hit { passage, score: 0.0 });
            }
        }
        hits.truncate(k);

        let id = |i: PassageIdx| self.index.passage(i).id.clone();
        let record = DecisionRecord {
            condition: p.condition,
            bridge: bridge_passage.id.clone(),
            e1,
            e2,
            svo_queries: svo,
            pool: pool
                .iter()
                .enumerate()
                .map(|(i, c)| PoolRecord {
                    id: id(c.passage),
                    from: [(FROM_SVO, "svo"), (FROM_E1, "e1"), (FROM_E2, "e2")]
                        .iter()
                        .filter(|(bit, _)| c.from & bit != 0)
                        .map(|(_, s)| s.to_string())
                        .collect(),
                    pool_score: c.pool_score,
                    svo: svo_scores[i],
                    judge: judge.as_ref().map(|j| j[i]),
                    f: f[i],
                })
                .collect(),
            ranking: hits.iter().map(|h| id(h.passage)).collect(),
            warnings,
            raw_answers: raw,
            fell_back_to_dense: fell_back,
        };
        trace.step("decision record", || Ok(((), serde_json::to_value(&record).unwrap_or(Value::Null))))?;
        Ok(Retrieval { hits, trace })
    }
}

/// The bridge as the prompts show it: cut to `max_chars`, with a warning when cut or
/// empty (never an error: a bridge is still a bridge).
fn bridge_prompt(passage: &Passage, max_chars: usize, warnings: &mut Vec<String>) -> PromptPassage {
    let (text, was_cut) = cut(&passage.text, max_chars);
    if was_cut {
        warnings.push(format!(
            "bridge {} cut from {} to {max_chars} characters",
            passage.id,
            passage.text.chars().count()
        ));
    }
    if passage.text.trim().is_empty() {
        warnings.push(format!("bridge {} has no text", passage.id));
        let title = if passage.title.trim().is_empty() { "(empty passage)".to_string() } else { passage.title.clone() };
        return PromptPassage { title, text: String::new() };
    }
    PromptPassage { title: passage.title.clone(), text }
}

/// `text` cut to `max_chars` characters at a word boundary where one is near, and whether
/// it was cut.
fn cut(text: &str, max_chars: usize) -> (String, bool) {
    let text = text.trim();
    match text.char_indices().nth(max_chars) {
        None => (text.to_string(), false),
        Some((at, _)) => {
            let head = &text[..at];
            let at_word = head.rfind(char::is_whitespace).filter(|&w| w * 5 >= at * 4).unwrap_or(at);
            (format!("{}…", head[..at_word].trim_end()), true)
        }
    }
}

fn snippet(text: &str) -> String {
    cut(text, ANSWER_SNIPPET_CHARS).0
}

/// The SVO call; without usable queries the question stands in (and a warning says so).
fn ask_svo(
    m: &Meter,
    request: &ChatRequest,
    n: usize,
    warnings: &mut Vec<String>,
    raw: &mut BTreeMap<String, String>,
) -> (Vec<String>, Value) {
    let answer = match m.chat(request) {
        Ok(a) => a,
        Err(e) => {
            warnings.push(format!("svo call failed ({e}); searched with the question instead"));
            return (Vec::new(), json!({"error": e.to_string(), "fallback": "question"}));
        }
    };
    // The object asked for, or a bare list of queries; a list of anything else (the
    // `[2]` of "passage [2] helps") is prose, not the answer.
    let accept = |v: &Value| match v {
        Value::Array(items) => {
            !items.is_empty() && items.iter().all(|x| x.is_string() || x.is_array() || x.is_object())
        }
        _ => crate::llm::has_any_key(v, &["queries", "svo_queries", "query"]),
    };
    let parsed = match m.parse_answer_as(request, &answer.text, accept, "`{\"queries\": [...]}`") {
        Ok(v) => {
            let parsed = svo_queries(&v, n);
            if parsed.queries.is_empty() {
                m.wrong_shape(request, &answer.text, "no `queries` list of strings");
            }
            parsed
        }
        Err(_) => SvoAnswer::default(),
    };
    if parsed.queries.is_empty() {
        raw.insert("svo queries".into(), answer.text.clone());
        warnings.push("svo answer held no queries; searched with the question instead".into());
    } else if parsed.queries.len() < n {
        warnings.push(format!("svo answer held {} of {n} queries", parsed.queries.len()));
    }
    let detail = json!({"queries": parsed.queries, "extra": parsed.extra, "skipped": parsed.skipped,
                        "fallback": parsed.queries.is_empty().then_some("question"),
                        "cached": answer.cached, "answer": snippet(&answer.text)});
    (parsed.queries, detail)
}

/// The entity call; with nothing usable both entities are the bridge's title.
fn ask_entities(
    m: &Meter,
    request: &ChatRequest,
    bridge_title: &str,
    warnings: &mut Vec<String>,
    raw: &mut BTreeMap<String, String>,
) -> ((String, String), Value) {
    let fallback = bridge_title.trim().to_string();
    let (parsed, detail, text) = match m.chat(request) {
        Ok(answer) => {
            let e = entities(&answer.text);
            let d = json!({"split": e.split, "cut": e.cut, "cached": answer.cached, "answer": snippet(&answer.text)});
            (e, d, Some(answer.text))
        }
        Err(err) => {
            let e = EntityAnswer { e1: String::new(), e2: String::new(), split: EntitySplit::Empty, cut: 0 };
            (e, json!({"error": err.to_string()}), None)
        }
    };
    let mut detail = detail;
    let (e1, e2) = match parsed.split {
        split if split.is_unusable() => {
            if let Some(text) = text {
                let reason = match split {
                    EntitySplit::Empty => "no entity",
                    _ => "not an \"e1 | e2\" line (JSON of another shape, or brackets in the names)",
                };
                m.wrong_shape(request, &text, reason);
                raw.insert("entities".into(), text);
            }
            warnings.push(format!("entity answer unusable; the bridge title {fallback:?} stands in for both"));
            (fallback.clone(), fallback)
        }
        split => {
            if split.is_irregular() {
                warnings.push(format!("entity answer without \"|\" read as {split:?}"));
            }
            (parsed.e1, parsed.e2)
        }
    };
    if parsed.cut > 0 {
        warnings.push(format!("{} entity cut to its length limit", parsed.cut));
    }
    detail["e1"] = json!(e1);
    detail["e2"] = json!(e2);
    ((e1, e2), detail)
}

/// The judge call: one score per candidate; what could not be read scores lowest.
/// With `aligned`, bare scores must be one per candidate. Returns the scores, the number
/// of candidates the answer actually scored, and the step's detail.
fn ask_judge(
    m: &Meter,
    request: &ChatRequest,
    n: usize,
    max: f64,
    aligned: bool,
    warnings: &mut Vec<String>,
    raw: &mut BTreeMap<String, String>,
) -> ((Vec<f64>, usize), Value) {
    let prompt_chars: usize = request.messages.iter().map(|x| x.content.chars().count()).sum();
    let answer = match m.chat(request) {
        Ok(a) => a,
        Err(e) => {
            warnings.push(format!("judge call failed ({e}); every candidate scores 0"));
            let j = JudgeAnswer::all_missing(n);
            return ((j.scores, 0), json!({"error": e.to_string(), "missing": n, "prompt_chars": prompt_chars}));
        }
    };
    // The shape asked for is one score per candidate: a value that scores fewer than
    // half of them (the `[2]` of "passage [2] helps", another key's list) is not it. Such
    // an answer is counted and not cached, and the query falls back (see `retrieve`).
    // Nor is a list of bare scores of another length than the pool (see
    // `BridgeRagParams::judge_aligned_scores`).
    let accept = |v: &Value| {
        let j = judge_scores(v, n, max);
        (v.is_array() || v.is_object()) && 2 * j.missing <= n && !(aligned && j.misaligned)
    };
    let expected = if aligned { "one score per candidate, by id or in order" } else { "a score for most candidates" };
    let (parsed, unparsed) = match m.parse_answer_as(request, &answer.text, accept, expected) {
        Ok(v) => (judge_scores(&v, n, max), false),
        Err(_) => (JudgeAnswer::all_missing(n), true),
    };
    if unparsed || parsed.missing > 0 {
        raw.insert("judge".into(), answer.text.clone());
    }
    if parsed.zero_based_ids {
        warnings.push("judge numbered the candidates from 0; read as such".into());
    }
    if unparsed {
        warnings.push(format!("judge answer held no {expected}; every candidate scores 0"));
    } else if parsed.missing > 0 {
        warnings.push(format!("judge gave no score for {} of {n} candidates; they score 0", parsed.missing));
    }
    if parsed.extra > 0 {
        warnings.push(format!("judge gave {} scores for no candidate; ignored", parsed.extra));
    }
    if parsed.clamped > 0 {
        warnings.push(format!("{} judge scores outside 0..={max}; clamped", parsed.clamped));
    }
    let detail = json!({"scores": parsed.scores, "missing": parsed.missing, "extra": parsed.extra,
                        "clamped": parsed.clamped, "unparsed": unparsed, "zero_based_ids": parsed.zero_based_ids,
                        "prompt_chars": prompt_chars, "cached": answer.cached, "answer": snippet(&answer.text)});
    let scored = n - parsed.missing;
    ((parsed.scores, scored), detail)
}

/// Merges ranked lists by the best score per passage ("union_max"), best first, ties by
/// passage index.
fn union_max(lists: &[Vec<(PassageIdx, f32)>]) -> Vec<(PassageIdx, f32)> {
    let mut best: HashMap<PassageIdx, f32> = HashMap::new();
    for &(p, s) in lists.iter().flatten() {
        let e = best.entry(p).or_insert(s);
        *e = e.max(s);
    }
    let mut out: Vec<(PassageIdx, f32)> = best.into_iter().collect();
    crate::rank::sort_hits(&mut out);
    out
}

/// Eq. 4: SVO-15 ∪ e1-top ∪ e2-top, deduplicated, the best `size` by the best score over
/// the searches that found each (ties by passage index).
fn build_pool(
    svo: &[(PassageIdx, f32)],
    e1: &[(PassageIdx, f32)],
    e2: &[(PassageIdx, f32)],
    size: usize,
) -> Vec<Candidate> {
    let mut by_passage: HashMap<PassageIdx, Candidate> = HashMap::new();
    for (list, bit) in [(svo, FROM_SVO), (e1, FROM_E1), (e2, FROM_E2)] {
        for &(passage, score) in list {
            let c = by_passage.entry(passage).or_insert(Candidate { passage, pool_score: score, from: 0 });
            c.pool_score = c.pool_score.max(score);
            c.from |= bit;
        }
    }
    let mut pool: Vec<Candidate> = by_passage.into_values().collect();
    pool.sort_by(|a, b| crate::rank::desc(a.pool_score, b.pool_score).then(a.passage.cmp(&b.passage)));
    pool.truncate(size);
    pool
}

/// Eq. 6 over the pool: f(c) = (1 − α)·PIT(judge, c) + α·PIT(svo, c), with PIT the
/// percentile rank within the pool (Eq. 5). Without judge scores (condition A), PIT(svo).
pub fn fuse(svo: &[f64], judge: Option<&[f64]>, alpha: f64) -> Vec<f64> {
    let svo_pit = pit(svo);
    match judge {
        None => svo_pit,
        Some(j) => pit(j).iter().zip(&svo_pit).map(|(pj, ps)| (1.0 - alpha) * pj + alpha * ps).collect(),
    }
}

/// Pool positions by f, best first; ties by SVO similarity, then pool order.
fn rank(f: &[f64], svo: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..f.len()).collect();
    order.sort_by(|&a, &b| crate::rank::desc(f[a], f[b]).then(crate::rank::desc(svo[a], svo[b])).then(a.cmp(&b)));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_by_hand() {
        // Pool of four. svo = [0.9, 0.5, 0.7, 0.6] -> PIT = [4/4, 1/4, 3/4, 2/4].
        // judge = [2, 9, 9, 5] -> PIT = [1/4, 4/4, 4/4, 2/4] (the two 9s share the higher rank).
        let svo = [0.9, 0.5, 0.7, 0.6];
        let judge = [2.0, 9.0, 9.0, 5.0];
        let f = fuse(&svo, Some(&judge), 0.1);
        let expected = [0.9 * 0.25 + 0.1 * 1.0, 0.9 * 1.0 + 0.1 * 0.25, 0.9 * 1.0 + 0.1 * 0.75, 0.9 * 0.5 + 0.1 * 0.5];
        for (got, want) in f.iter().zip(expected) {
            assert!((got - want).abs() < 1e-12, "{f:?}");
        }
        // 0.975 (c2), 0.925 (c1), 0.5 (c3), 0.325 (c0).
        assert_eq!(rank(&f, &svo), [2, 1, 3, 0]);
        // Condition A: SVO similarity alone.
        assert_eq!(rank(&fuse(&svo, None, 0.1), &svo), [0, 2, 3, 1]);
        // α = 1 ignores the judge; α = 0 ties broken by SVO.
        assert_eq!(rank(&fuse(&svo, Some(&judge), 1.0), &svo), [0, 2, 3, 1]);
        assert_eq!(rank(&fuse(&svo, Some(&judge), 0.0), &svo), [2, 1, 3, 0]);
    }

    #[test]
    fn pool_is_the_union_by_best_score() {
        let svo = union_max(&[vec![(1, 0.9), (2, 0.5)], vec![(2, 0.8), (3, 0.4)]]);
        assert_eq!(svo, [(1, 0.9), (2, 0.8), (3, 0.4)]);
        let pool = build_pool(&svo, &[(3, 0.95), (4, 0.3)], &[(3, 0.95), (5, 0.6)], 4);
        let got: Vec<(PassageIdx, f32, u8)> = pool.iter().map(|c| (c.passage, c.pool_score, c.from)).collect();
        assert_eq!(
            got,
            [(3, 0.95, FROM_SVO | FROM_E1 | FROM_E2), (1, 0.9, FROM_SVO), (2, 0.8, FROM_SVO), (5, 0.6, FROM_E2)]
        );
    }

    #[test]
    fn cuts_at_a_word() {
        assert_eq!(cut("short", 10), ("short".to_string(), false));
        assert_eq!(cut("alpha beta gamma", 12), ("alpha beta…".to_string(), true));
        let (c, was) = cut(&"é".repeat(50), 10);
        assert!(was && c.chars().count() == 11);
    }

    #[test]
    fn conditions_read_from_settings() {
        let c: Condition = serde_json::from_value(json!("B")).unwrap();
        assert_eq!(c, Condition::B);
        assert_eq!(serde_json::to_value(Condition::C).unwrap(), json!("c"));
        assert!(serde_json::from_value::<Condition>(json!("d")).is_err());
    }
}
