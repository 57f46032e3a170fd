//! `hoprag bench bridge`: the non-LLM part of a BridgeRAG query (hop-1 search, three SVO
//! and two entity searches, the pool with its SVO similarities, PIT fusion) on an index,
//! target under 10 ms.
//!
//! The real method runs end to end, with every embedding computed before the clock
//! starts (served from a table) and canned LLM answers (an SVO object, an entity line, a
//! judge array over the actual pool), so prompt building and answer parsing are timed
//! too but no model is. Canned texts come from the corpus: a query is the start of one
//! passage, its SVO queries the starts of three others, its entities two titles. The peer,
//! in the same run: the method with its five expansion searches run one by one instead of
//! in one scan of the vectors.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use hoprag::embed::{load_embedder, Embedder, EmbedderSpec, TextKind};
use hoprag::index::{VectorIndex, VectorIndexKind};
use hoprag::llm::{ChatRequest, ChatResponse, Llm, Usage};
use hoprag::retrieve::bridge_rag::prompts::{ENTITY_SYSTEM, SVO_SYSTEM};
use hoprag::retrieve::bridge_rag::{entities, svo_queries};
use hoprag::retrieve::{bridge_rag, dense, BridgeRag, Query, Retriever, Trace};
use hoprag::{Engine, Error};
use serde::Serialize;

use super::{percentiles, Percentiles};
use crate::Context;

#[derive(Args)]
pub struct BridgeBench {
    /// Index to search.
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    /// Number of queries.
    #[arg(long, default_value_t = 100)]
    queries: usize,
    /// Passages per query.
    #[arg(short, default_value_t = 5)]
    k: usize,
}

/// Steps that search, build the pool and fuse: the part the target is stated for.
const SEARCH_STEPS: &[&str] = &[dense::SPEC.name, "expansion search", "pool", "pit fusion"];
/// Steps that would call a model: here they build prompts and parse canned answers.
const LLM_STEPS: &[&str] = &["svo queries", "entities", "judge"];

#[derive(Serialize)]
struct Report {
    passages: usize,
    vector_index: String,
    threads: usize,
    queries: usize,
    k: usize,
    /// Mean pool size.
    pool: f64,
    /// Searches, pool and fusion: the non-LLM part of a query.
    search_pool_fusion_ms: Percentiles,
    /// The same with the expansion searches run one by one (the peer).
    search_one_by_one_ms: Percentiles,
    /// Prompt building and parsing of the canned answers of the three LLM steps.
    prompts_and_parsing_ms: Percentiles,
    /// The whole query as the method runs it (embeddings precomputed, answers canned).
    total_ms: Percentiles,
    /// Each step of the trace.
    steps_ms: Vec<(String, Percentiles)>,
    target_ms: f64,
    meets_target: bool,
    precompute_secs: f64,
}

/// Per-query times of one variant.
#[derive(Default)]
struct Timings {
    total: Vec<f64>,
    search: Vec<f64>,
    prompts: Vec<f64>,
    pool: usize,
    /// Each step's times, in the order steps first ran.
    steps: Vec<(String, Vec<f64>)>,
}

impl Timings {
    fn run(&mut self, method: &dyn Retriever, q: &Query, k: usize) -> anyhow::Result<()> {
        let step_ms = |t: &Trace, names: &[&str]| -> f64 {
            t.steps.iter().filter(|s| names.contains(&s.name.as_str())).map(|s| s.micros as f64 / 1e3).sum()
        };
        let t = Instant::now();
        let r = method.retrieve(q, k)?;
        self.total.push(t.elapsed().as_secs_f64() * 1e3);
        self.search.push(step_ms(&r.trace, SEARCH_STEPS));
        self.prompts.push(step_ms(&r.trace, LLM_STEPS));
        let record = r.trace.steps.iter().find(|s| s.name == "decision record");
        self.pool += record.and_then(|s| s.detail["pool"].as_array()).map_or(0, Vec::len);
        for step in &r.trace.steps {
            let ms = step.micros as f64 / 1e3;
            match self.steps.iter_mut().find(|(name, _)| *name == step.name) {
                Some((_, times)) => times.push(ms),
                None => self.steps.push((step.name.clone(), vec![ms])),
            }
        }
        Ok(())
    }
}

/// A vector index that searches one query at a time (the trait's default `search_many`).
struct OneByOne(Arc<dyn VectorIndex>);

impl VectorIndex for OneByOne {
    fn search(&self, query: &[f32], k: usize) -> hoprag::Result<Vec<(hoprag::PassageIdx, f32)>> {
        self.0.search(query, k)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn kind(&self) -> VectorIndexKind {
        self.0.kind()
    }
}

/// The canned texts of one query.
struct Canned {
    question: String,
    svo: Vec<String>,
    entities: (String, String),
}

/// Embeddings computed up front; a text not in the table is an error, so no embedding
/// can slip into the timed part.
struct Table {
    id: String,
    dim: usize,
    vectors: HashMap<String, Vec<f32>>,
}

impl Embedder for Table {
    fn id(&self) -> &str {
        &self.id
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[String], _: TextKind) -> hoprag::Result<Vec<Vec<f32>>> {
        texts
            .iter()
            .map(|t| self.vectors.get(t).cloned().ok_or_else(|| Error::Embedding(format!("not precomputed: {t:?}"))))
            .collect()
    }
}

/// Answers the three calls from the canned texts of the question in the prompt.
struct CannedLlm {
    by_question: HashMap<String, (String, String)>,
}

impl Llm for CannedLlm {
    fn id(&self) -> &str {
        "canned"
    }
    fn chat(&self, request: &ChatRequest) -> hoprag::Result<ChatResponse> {
        let system = request.messages.first().map_or("", |m| m.content.as_str());
        let user = request.messages.last().map_or("", |m| m.content.as_str());
        let question = user.lines().next().unwrap_or("").trim_start_matches("Question: ");
        let (svo, entities) =
            self.by_question.get(question).ok_or_else(|| Error::Other(format!("no canned answer for {question:?}")))?;
        let text = match system {
            SVO_SYSTEM => svo.clone(),
            ENTITY_SYSTEM => entities.clone(),
            // The judge: a score for every candidate line "[i] ...", varied by position.
            _ => {
                let n = user.lines().filter(|l| l.starts_with('[')).count();
                let scores: Vec<String> =
                    (1..=n).map(|i| format!("{{\"id\": {i}, \"score\": {}}}", (i * 7 + question.len()) % 11)).collect();
                format!("[{}]", scores.join(", "))
            }
        };
        Ok(ChatResponse { text, usage: Usage::default(), cached: false, retries: 0, latency_ms: 0.0 })
    }
}

/// The first `n` words of `text`.
fn words(text: &str, n: usize) -> String {
    text.split_whitespace().take(n).collect::<Vec<_>>().join(" ")
}

pub fn run(ctx: &Context, args: BridgeBench) -> anyhow::Result<()> {
    let store = hoprag::store::folder(&args.index);
    let index = Arc::new(store.load()?);
    let n = index.len();
    anyhow::ensure!(n >= 4, "{}: the index needs at least 4 passages", args.index.display());
    let embedder = load_embedder(&EmbedderSpec::from_id(&index.manifest.embedder.id)?, &ctx.config.embedder)?;

    // Canned texts from evenly spread passages (distinct questions, so each has its own
    // answers).
    let started = Instant::now();
    let passage = |i: usize| index.passage((i % n) as u32);
    let mut canned: Vec<Canned> = Vec::new();
    for q in 0..args.queries {
        let at = q * n / args.queries.max(1) + q;
        let question = format!("{} (query {q})?", words(&passage(at).text, 14));
        let svo = (1..=3).map(|j| words(&passage(at + j * 97).text, 10)).collect();
        let entities = (passage(at).title.clone(), passage(at + 211).title.clone());
        canned.push(Canned { question, svo, entities });
    }
    // The canned answers, and the texts the method will embed from them: read back with
    // the method's own parsers, so the table holds exactly those strings.
    let answers: Vec<(String, String)> = canned
        .iter()
        .map(|c| (serde_json::json!({"queries": c.svo}).to_string(), format!("{} | {}", c.entities.0, c.entities.1)))
        .collect();
    let mut texts: Vec<String> = Vec::new();
    for (c, (svo, line)) in canned.iter().zip(&answers) {
        texts.push(c.question.clone());
        texts.extend(svo_queries(&serde_json::from_str(svo)?, 3).queries);
        let e = entities(line);
        texts.extend([e.e1, e.e2]);
    }
    texts.sort();
    texts.dedup();
    ctx.note(format!("embedding {} canned texts", texts.len()));
    let vectors = hoprag::embed::embed_all(embedder.as_ref(), &texts, TextKind::Query, 64, &|_| {})?;
    let table =
        Table { id: embedder.id().to_string(), dim: embedder.dim(), vectors: texts.into_iter().zip(vectors).collect() };
    let precompute_secs = started.elapsed().as_secs_f64();

    let by_question = canned.iter().map(|c| c.question.clone()).zip(answers).collect();
    let queries: Vec<Query> =
        canned.iter().map(|c| Query::with_embedding(c.question.clone(), table.vectors[&c.question].clone())).collect();
    let engine = Engine::new(store, Arc::new(table), ctx.config.clone())?.with_llm(Arc::new(CannedLlm { by_question }));
    let method = engine.retriever(bridge_rag::SPEC.name)?;
    // The peer: the same method searching one query at a time (the index's own
    // `search`), for what the one-scan expansion searches save.
    let one_by_one = BridgeRag::new(
        index.clone(),
        Arc::new(OneByOne(engine.vectors())),
        engine.embedder.clone(),
        engine.llm().expect("set above").clone(),
        engine.config.methods.bridge_rag,
        bridge_rag::SPEC.name,
        1,
    );

    // Warm-up, then one timed run per query and variant, interleaved so that load from
    // other processes falls on both alike.
    for q in queries.iter().take(5) {
        method.retrieve(q, args.k)?;
        one_by_one.retrieve(q, args.k)?;
    }
    let (mut main, mut peer) = (Timings::default(), Timings::default());
    for q in &queries {
        main.run(method.as_ref(), q, args.k)?;
        peer.run(&one_by_one, q, args.k)?;
    }
    let target_ms = 10.0;
    let search_pool_fusion_ms = percentiles(main.search.clone());
    let report = Report {
        passages: n,
        vector_index: format!("{:?}", engine.vectors().kind()).to_lowercase(),
        threads: rayon::current_num_threads(),
        queries: queries.len(),
        k: args.k,
        pool: main.pool as f64 / queries.len().max(1) as f64,
        meets_target: search_pool_fusion_ms.p50 < target_ms,
        search_pool_fusion_ms,
        search_one_by_one_ms: percentiles(peer.search),
        prompts_and_parsing_ms: percentiles(main.prompts),
        total_ms: percentiles(main.total),
        steps_ms: main.steps.iter().map(|(name, t)| (name.clone(), percentiles(t.clone()))).collect(),
        target_ms,
        precompute_secs,
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} passages ({} vectors), {} threads, {} queries, mean pool {:.1}",
            report.passages, report.vector_index, report.threads, report.queries, report.pool
        );
        let row = |name: &str, p: Percentiles| println!("{name:<52} p50 {:>7.3} ms   p99 {:>7.3} ms", p.p50, p.p99);
        row("6 searches + pool + PIT fusion (non-LLM part)", report.search_pool_fusion_ms);
        row("  the same, searching one query at a time (peer)", report.search_one_by_one_ms);
        row("prompt building + parsing canned answers", report.prompts_and_parsing_ms);
        row("whole query (embeddings precomputed)", report.total_ms);
        for (name, p) in &report.steps_ms {
            row(&format!("  step: {name}"), *p);
        }
        println!(
            "target: non-LLM part under {} ms at p50: {}",
            report.target_ms,
            if report.meets_target { "met" } else { "NOT met" }
        );
    }
    Ok(())
}
