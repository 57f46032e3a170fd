//! Fault injection: an OpenAI-compatible endpoint on loopback that answers every request
//! with one kind of bad answer. For each fault, an evaluation of `bridge_rag`, `sync_ge`
//! and `gear` over 20 demo questions (the real MiniLM embedder, never the local chat
//! model) and an LLM OpenIE extraction must complete, count the failures and the queries
//! that fell back, keep each method's R@5 at or above its fallback's, and leave nothing
//! bad in the response cache.

mod common;

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::fixture::{Fixture, Reply, Request};
use hoprag::corpus::{load_corpus, CorpusOptions};
use hoprag::dataset::{load_dataset, resolve_gold, ResolvedDataset};
use hoprag::embed::{load_embedder, Embedder, EmbedderSettings, EmbedderSpec, LocalModel};
use hoprag::eval::{evaluate, EvalOptions};
use hoprag::graph::{extract_heuristic, extract_llm, EntityGraph, GraphOptions, LlmExtractOptions};
use hoprag::http::RetryPolicy;
use hoprag::index::{BuildOptions, Index};
use hoprag::llm::{parse_lenient, CachedLlm, Llm, OpenAiChat, OpenAiChatConfig};
use hoprag::progress::Silent;
use hoprag::{Config, Engine};
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    Empty,
    ProseWithBrackets,
    TruncatedJson,
    WrongKeys,
    WrongCase,
    SingleTriple,
    FinishLength,
    Http500,
    Http429RetryAfter,
    Timeout,
    NonUtf8,
}

impl Fault {
    /// Faults whose every answer is unusable: nothing may be cached, and every LLM
    /// method must answer every question with its fallback.
    fn all_bad(self) -> bool {
        !matches!(self, Fault::WrongCase | Fault::SingleTriple)
    }
}

/// The (fault, method) pairs whose R@5 cannot be held at the fallback's without
/// cheating, and why: the fixture answers every question with the same well-formed,
/// plausible content, so the method does what its design does with a confidently wrong
/// model. `None` where R@5 >= the fallback's is asserted.
fn fabricated(fault: Fault, method: &str) -> Option<&'static str> {
    match (fault, method) {
        // BridgeRAG's final ranking comes from its pool alone (the paper: the bridge "is
        // not used for final retrieval"), and here every question gets the same SVO
        // queries and entities (so the same pool) and the same 20 judge scores, all well
        // formed: the judge scores the whole pool, so nothing says to fall back.
        (Fault::WrongCase, "bridge_rag") => {
            Some("the same well-formed SVO queries, entities and judge scores for every question")
        }
        // GEAR fuses the rounds of its rewritten queries with the first (Eq. 9); here
        // every question is rewritten to "Who founded Ardent Ironworks?", a well-formed
        // query whose round is about another question.
        (Fault::WrongCase, "gear") => Some("the same well-formed rewrite, about another question, for every question"),
        // "Varn Light built by Ardent Ironworks" is a true fact of the demo corpus. Where
        // the base passages name neither entity it is dropped as not read from them
        // (counted; the question falls back); where they do (demo-02 and demo-04 reach
        // the Ardent Works Band or Ardent Ironworks passages) it is a fact of the
        // passages, though not one that bears on the question, and SyncGE's RRF of the
        // expansion from it with the base list (Eq. 3) costs a base hit.
        (Fault::WrongCase | Fault::SingleTriple, "sync_ge" | "gear") => {
            Some("a true fact of the passages read, irrelevant to the question, expanded from as the method does")
        }
        _ => None,
    }
}

fn completion(text: &str, finish: &str) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": finish}],
           "usage": {"prompt_tokens": 50, "completion_tokens": 5}})
}

fn reply(fault: Fault, _: &Request) -> Reply {
    let ok = |text: &str| Reply::json(completion(text, "stop"));
    match fault {
        Fault::Empty => ok(""),
        Fault::ProseWithBrackets => ok("Looking at passage [2] and [3], I believe the answer is unclear {sorry}."),
        Fault::TruncatedJson => ok(r#"{"queries": ["who built the lighthouse", "the comp"#),
        Fault::WrongKeys => ok(r#"{"thoughts": ["a", "b"], "result": {"value": 3}, "note": "done"}"#),
        // Every key a stage asks for, in capitals: accepted (keys are compared without
        // case), so this fault's answers are usable.
        Fault::WrongCase => {
            ok(r#"{"QUERIES": ["Varn Light was built by Ardent Ironworks"], "ENTITIES": ["Varn Light"],
                "TRIPLES": [["Varn Light", "built by", "Ardent Ironworks"]], "ANSWERABLE": false,
                "REASON": "the founder is not known", "QUERY": "Who founded Ardent Ironworks?",
                "SCORES": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4]}"#)
        }
        Fault::SingleTriple => ok(r#"["Varn Light", "built by", "Ardent Ironworks"]"#),
        Fault::FinishLength => Reply::json(completion(r#"{"queries": ["who built"#, "length")),
        Fault::Http500 => Reply::status(500, r#"{"error": "internal"}"#),
        Fault::Http429RetryAfter => Reply {
            headers: vec![("Retry-After".into(), "1".into())],
            ..Reply::status(429, r#"{"error": "slow down"}"#)
        },
        Fault::Timeout => Reply { delay: Duration::from_millis(1500), ..ok(r#"{"queries": ["late"]}"#) },
        Fault::NonUtf8 => {
            let mut body = br#"{"choices": [{"message": {"content": ""#.to_vec();
            body.extend_from_slice(b"\xff\xfe\x80 {\"queries\": [\"\xc3\x28\"]}");
            body.extend_from_slice(br#""}, "finish_reason": "stop"}]}"#);
            Reply { raw: Some(body), ..Reply::status(200, "") }
        }
    }
}

fn client(fixture: &Fixture) -> OpenAiChat {
    OpenAiChat::new(OpenAiChatConfig {
        base_url: fixture.base_url.clone(),
        model: "fixture-chat".into(),
        api_key: None,
        // The timeout fault answers after 1.5 s.
        timeout_secs: 1,
        retry: RetryPolicy { max_retries: 1, initial_backoff_ms: 5, max_backoff_ms: 1000 },
        max_concurrency: 8,
        json_mode: true,
        ..OpenAiChatConfig::default()
    })
    .unwrap()
}

struct World {
    _dir: tempfile::TempDir,
    index: Arc<Index>,
    embedder: Arc<dyn Embedder>,
    data: ResolvedDataset,
}

/// The demo corpus indexed with MiniLM, with a heuristic (LLM-free) graph for GEAR, and
/// its first 20 questions; built once for every fault.
fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let embedder = load_embedder(&EmbedderSpec::Local(LocalModel::MiniLm), &EmbedderSettings::default())
            .expect("the default embedder is installed by scripts/test.sh");
        let dir = tempfile::tempdir().unwrap();
        let corpus = load_corpus(&common::demo().join("corpus.jsonl"), &CorpusOptions::default()).unwrap();
        Index::build(dir.path(), &corpus, vec![], embedder.as_ref(), &BuildOptions::default(), &Silent).unwrap();
        let index = Index::open(dir.path()).unwrap();
        let graph = EntityGraph::build(
            index.len(),
            extract_heuristic(index.passages()),
            embedder.as_ref(),
            &GraphOptions::default(),
            &Silent,
        )
        .unwrap();
        Index::attach_graph(dir.path(), &graph, "heuristic".into()).unwrap();
        let index = Arc::new(Index::open(dir.path()).unwrap());
        let (_, mut questions) = load_dataset(&common::demo().join("questions.jsonl")).unwrap();
        questions.truncate(20);
        let data = resolve_gold(&questions, index.passages());
        World { _dir: dir, index, embedder, data }
    })
}

/// Every answer left in the cache, as (request asked for JSON, text).
fn cached_answers(dir: &Path) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for shard in std::fs::read_dir(dir).unwrap().flatten() {
        if !shard.path().is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(shard.path()).unwrap().flatten() {
            let v: Value = serde_json::from_slice(&std::fs::read(entry.path()).unwrap()).unwrap();
            out.push((v["request"]["json"].as_bool().unwrap_or(false), v["text"].as_str().unwrap_or("").to_string()));
        }
    }
    out
}

fn run_fault(fault: Fault) {
    let w = world();
    let budgets = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = budgets.clone();
    let fixture = Fixture::start(move |r| {
        seen.lock().unwrap().push(r.body["max_tokens"].as_u64());
        reply(fault, r)
    });
    let cache = tempfile::tempdir().unwrap();
    let llm: Arc<dyn Llm> = Arc::new(CachedLlm::new(client(&fixture), cache.path()).unwrap());

    // LLM OpenIE over ten passages: completes and accounts for every passage.
    let passages = &w.index.passages()[..10];
    let options = LlmExtractOptions { concurrency: 4, ..Default::default() };
    // With no call succeeding at all, the extraction refuses with an error naming the
    // first failure (a graph of nothing would be attached otherwise); that is a clear
    // error, not a crash.
    match extract_llm(passages, llm.as_ref(), &options, &Silent) {
        Ok((_, report)) => {
            let total = report.answered + report.unparsed_passages + report.failed_passages;
            assert_eq!(total, 10, "{fault:?}: {report:?}");
            if fault.all_bad() {
                assert_eq!(report.answered, 0, "{fault:?}: {report:?}");
            }
        }
        Err(e) => assert!(e.to_string().contains("no call succeeded"), "{fault:?}: {e}"),
    }

    // The evaluation: every method completes; fallbacks and failures are counted.
    let mut config = Config::default();
    config.gear.max_steps = 2;
    let engine = Engine::new(w.index.clone(), w.embedder.clone(), config).unwrap().with_llm(llm.clone());
    let methods: Vec<String> = ["bridge_rag", "sync_ge", "gear", "dense", "hybrid"].map(String::from).to_vec();
    let options = EvalOptions::new(vec![5], None, "demo");
    let report = evaluate(&engine, &w.data, &methods, &options, &Silent)
        .unwrap_or_else(|e| panic!("{fault:?}: the evaluation failed instead of degrading: {e}"));
    assert_eq!(report.n, 20);
    let r5 = |m: &str| report.methods[m].recall["5"];
    let pairs = [("bridge_rag", "dense"), ("sync_ge", "hybrid"), ("gear", "hybrid")];
    // Every row first, so that one failing method does not hide the others' numbers.
    for (method, fallback) in pairs {
        let m = &report.methods[method];
        let cost = m.llm.clone().unwrap_or_default();
        let base = &report.methods[fallback].per_query;
        let worse: Vec<&str> = m
            .per_query
            .iter()
            .zip(base)
            .filter(|(a, b)| a.recall["5"] < b.recall["5"])
            .map(|(a, _)| a.id.as_str())
            .collect();
        eprintln!(
            "| {fault:?} | {method} | {:.3} | {fallback} | {:.3} | {}/20 | {} | {} | {worse:?} |",
            r5(method),
            r5(fallback),
            m.fallbacks,
            cost.errors,
            cost.parse_failures
        );
    }
    for (method, fallback) in pairs {
        let m = &report.methods[method];
        let cost = m.llm.clone().unwrap_or_default();
        if fault.all_bad() {
            assert_eq!(m.fallbacks, 20, "{fault:?}: {method} must fall back on every question");
            assert!(m.per_query.iter().all(|q| q.fell_back), "{fault:?}: marked per question");
            assert!(cost.errors + cost.parse_failures > 0, "{fault:?}: {method}: the failures are counted");
            assert!((r5(method) - r5(fallback)).abs() < 1e-9, "{fault:?}: {method} is exactly its fallback");
        }
        // A question that fell back got exactly the fallback's ranking.
        for (q, b) in m.per_query.iter().zip(&report.methods[fallback].per_query) {
            if q.fell_back {
                assert_eq!(q.retrieved, b.retrieved, "{fault:?}: {method} on {} fell back to {fallback}", q.id);
            }
        }
        match fabricated(fault, method) {
            None => {
                assert!(r5(method) >= r5(fallback) - 1e-9, "{fault:?}: {method} R@5 below its fallback {fallback}")
            }
            // Well-formed answers with wrong content: read and used as asked (on some
            // questions at least), since no parser can tell them from right ones.
            Some(why) => {
                assert!(m.fallbacks < 20, "{fault:?}: {method}: the well-formed answers were used");
                eprintln!("{fault:?} {method}: R@5 not held at the fallback's: {why}");
            }
        }
    }

    if fault == Fault::FinishLength {
        // A cut-off answer is asked once more with twice the budget.
        let budgets = budgets.lock().unwrap();
        let asked: Vec<u64> = budgets.iter().flatten().copied().collect();
        assert!(asked.iter().any(|b| asked.contains(&(b * 2))), "{asked:?}");
    }

    // Nothing bad is cached: no empty answer, no JSON request without JSON; with only
    // bad answers, nothing at all.
    let cached = cached_answers(cache.path());
    for (json, text) in &cached {
        assert!(!text.trim().is_empty(), "{fault:?}: an empty answer was cached");
        assert!(!json || parse_lenient(text).is_ok(), "{fault:?}: cached answer without JSON: {text}");
    }
    if fault.all_bad() {
        assert!(cached.is_empty(), "{fault:?}: {} bad answers cached: {:?}", cached.len(), cached.first());
    }
}

#[test]
fn empty_answer() {
    run_fault(Fault::Empty);
}

#[test]
fn prose_with_brackets() {
    run_fault(Fault::ProseWithBrackets);
}

#[test]
fn truncated_json() {
    run_fault(Fault::TruncatedJson);
}

#[test]
fn wrong_keys() {
    run_fault(Fault::WrongKeys);
}

#[test]
fn wrong_case() {
    run_fault(Fault::WrongCase);
}

#[test]
fn single_triple() {
    run_fault(Fault::SingleTriple);
}

#[test]
fn finish_reason_length() {
    run_fault(Fault::FinishLength);
}

#[test]
fn http_500() {
    run_fault(Fault::Http500);
}

#[test]
fn http_429_with_retry_after() {
    run_fault(Fault::Http429RetryAfter);
}

#[test]
fn timeout() {
    run_fault(Fault::Timeout);
}

#[test]
fn non_utf8_bytes() {
    run_fault(Fault::NonUtf8);
}
