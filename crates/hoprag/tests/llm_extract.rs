//! LLM triple extraction and query NER against the loopback fixture server: canned
//! answers chosen by the passage or question in the request (so concurrency cannot
//! reorder them), faults injected, a re-run served from the cache, and the `ppr` method
//! with LLM query NER end to end.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::fixture::{Fixture, Reply};
use common::HashEmbedder;
use hoprag::corpus::{LoadedCorpus, Passage};
use hoprag::graph::linking::NerMode;
use hoprag::graph::{extract_heuristic, extract_llm, query_ner, EntityGraph, GraphOptions, LlmExtractOptions};
use hoprag::http::RetryPolicy;
use hoprag::llm::{CachedLlm, Llm, Meter, OpenAiChat, OpenAiChatConfig, Usage};
use hoprag::progress::Silent;
use hoprag::retrieve::Query;
use hoprag::store;
use hoprag::{Config, Engine};
use serde_json::{json, Value};

const USAGE: Usage = Usage { prompt_tokens: 40, completion_tokens: 20 };

fn completion(text: &str) -> Value {
    json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": USAGE.prompt_tokens, "completion_tokens": USAGE.completion_tokens},
    })
}

/// The last message of a request: the passage or the question.
fn last_message(body: &Value) -> String {
    body["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("").to_string()
}

fn passage(id: &str, title: &str, text: &str) -> Passage {
    Passage::new(id, title, text)
}

/// An invented corpus: one passage per kind of answer the fixture gives.
fn passages() -> Vec<Passage> {
    vec![
        passage("p0", "Alder Mill", "Alder Mill is a watermill on the Brisk River, built by Oona Farrell in 1791."),
        passage("p1", "Oona Farrell", "Oona Farrell was a millwright born in Kestrel Bay."),
        passage("p2", "Kestrel Bay", "Kestrel Bay is a fishing village on the Corran coast."),
        passage("p3", "Static Noise", "This passage makes the model ramble."),
        passage("p4", "Brisk River", "The Brisk River rises in the Tollan Hills."),
    ]
}

/// The model's answer to a request, chosen by the passage or question it carries.
fn answer(last: &str) -> String {
    if last.contains("Alder Mill is a watermill") {
        r#"{"entities": ["Alder Mill", "Brisk River", "Oona Farrell", 1791],
            "triples": [["Alder Mill", "stands on", "Brisk River"], ["Alder Mill", "built by", "Oona Farrell"],
                        ["Alder Mill", "built in", 1791]]}"#
            .into()
    } else if last.contains("millwright") {
        "Here is the graph:\n```json\n{\"entities\": [\"Oona Farrell\", \"Kestrel Bay\"], \"triples\": \
         [[\"Oona Farrell\", \"was a\", \"millwright\"], [\"Oona Farrell\", \"born in\", \"Kestrel Bay\"],]}\n```\n\
         I hope this helps! Tell me if you want more detail."
            .into()
    } else if last.contains("fishing village") {
        r#"{"entities": ["Kestrel Bay", "Corran"], "triples": [["Kestrel Bay", "is on", "Corran"], ["Kestrel Bay", "fishing village"]]}"#
            .into()
    } else if last.contains("ramble") {
        "I'm afraid I cannot turn this passage into a graph.".into()
    } else if last.contains("Tollan Hills") {
        r#"{"entities": ["Brisk River", "Tollan Hills"], "triples": [["Brisk River", "rises in", "Tollan Hills"]]}"#
            .into()
    } else if last.contains("watermill") {
        // Query NER: the question names the river in lower case, which the surface
        // extractor misses.
        r#"{"entities": ["Brisk River"]}"#.into()
    } else if last.contains("clean list") {
        r#"["Alder Mill", "Oona Farrell", "alder mill", 1791, ""]"#.into()
    } else {
        "Sorry, no entities today.".into()
    }
}

/// Serves [`answer`]; the Brisk River passage's first attempt is a 500.
fn canned_server(seen: Arc<Mutex<Vec<Value>>>) -> Fixture {
    let failed_once = AtomicBool::new(false);
    Fixture::start(move |r| {
        seen.lock().unwrap().push(r.body.clone());
        let last = last_message(&r.body);
        if last.contains("Tollan Hills") && !failed_once.swap(true, Ordering::SeqCst) {
            return Reply::status(500, "transient");
        }
        Reply::json(completion(&answer(&last)))
    })
}

fn config(base_url: &str) -> OpenAiChatConfig {
    OpenAiChatConfig {
        base_url: base_url.to_string(),
        model: "fixture-chat".into(),
        api_key: None,
        timeout_secs: 5,
        retry: RetryPolicy { max_retries: 2, initial_backoff_ms: 10, max_backoff_ms: 20 },
        max_concurrency: 3,
        json_mode: true,
        local: String::new(),
        ..OpenAiChatConfig::default()
    }
}

fn cached_client(server: &Fixture, dir: &std::path::Path) -> CachedLlm<OpenAiChat> {
    CachedLlm::new(OpenAiChat::new(config(&server.base_url)).unwrap(), dir).unwrap()
}

fn requests(server: &Fixture) -> usize {
    server.requests.load(Ordering::SeqCst)
}

fn options() -> LlmExtractOptions {
    LlmExtractOptions { concurrency: 3, ..Default::default() }
}

type Row = (u32, String, String, String);

fn rows(x: &hoprag::graph::Extraction) -> Vec<Row> {
    x.triples
        .iter()
        .map(|t| (t.passage, t.subject.to_string(), t.predicate.to_string(), t.object.to_string()))
        .collect()
}

fn row(p: u32, s: &str, r: &str, o: &str) -> Row {
    (p, s.into(), r.into(), o.into())
}

#[test]
fn extraction_counts_what_it_cannot_use_and_a_rerun_comes_from_the_cache() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = canned_server(seen.clone());
    let cache = tempfile::tempdir().unwrap();
    let passages = passages();

    let llm = cached_client(&server, cache.path());
    let (x, report) = extract_llm(&passages, &llm, &options(), &Silent).unwrap();
    let expected = vec![
        row(0, "Alder Mill", "stands on", "Brisk River"),
        row(0, "Alder Mill", "built by", "Oona Farrell"),
        row(0, "Alder Mill", "built in", "1791"),
        row(1, "Oona Farrell", "was a", "millwright"),
        row(1, "Oona Farrell", "born in", "Kestrel Bay"),
        row(2, "Kestrel Bay", "is on", "Corran"),
        row(4, "Brisk River", "rises in", "Tollan Hills"),
    ];
    assert_eq!(rows(&x), expected, "clean, fenced-with-prose and retried answers, in passage order");
    assert_eq!(x.entities[0], ["Alder Mill", "Brisk River", "Oona Farrell", "1791"]);
    // The garbage answer adds nothing: its passage keeps the LLM-free extraction (here,
    // entities and no triple).
    assert_eq!(report.heuristic_fallback_passages, 1);
    assert_eq!(x.entities[3], extract_heuristic(&passages[3..4]).entities[0]);

    // The two-element triple is counted and shown, not kept.
    assert_eq!(x.report.malformed_triples, 1);
    assert_eq!(x.report.malformed_examples.len(), 1);
    assert!(x.report.malformed_examples[0].starts_with("p2: ") && x.report.malformed_examples[0].contains("fishing"));
    assert_eq!(x.report.docs, 4);

    assert_eq!(report.model, "openai:fixture-chat");
    assert_eq!((report.passages, report.answered, report.unparsed_passages, report.failed_passages), (5, 4, 1, 0));
    let s = &report.llm;
    assert_eq!((s.calls, s.cache_hits, s.errors, s.retries, s.parse_failures), (5, 0, 0, 1, 1));
    assert!(s.parse_failure_examples[0].snippet.contains("afraid"));
    let five = Usage { prompt_tokens: 5 * USAGE.prompt_tokens, completion_tokens: 5 * USAGE.completion_tokens };
    assert_eq!((s.tokens_spent, s.tokens_from_cache), (five, Usage::default()));
    assert_eq!(requests(&server), 6, "five passages and one retry");

    // Each request is the instructions, the one-shot demonstration and the passage.
    for body in seen.lock().unwrap().iter() {
        let messages = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert!(last_message(body).starts_with("Title: "));
        assert_eq!(body["response_format"], json!({"type": "json_object"}));
    }

    // A re-run (a fresh client over the same cache) takes the four good answers from the
    // cache and asks again only for the garbage one, which was never cached.
    drop(llm);
    let rerun = cached_client(&server, cache.path());
    let (again, report2) = extract_llm(&passages, &rerun, &options(), &Silent).unwrap();
    assert_eq!(requests(&server), 7, "the re-run asked only for the uncached garbage answer");
    assert_eq!(rows(&again), expected);
    assert_eq!(again.entities, x.entities);
    let s2 = &report2.llm;
    assert_eq!((s2.calls, s2.cache_hits, s2.errors), (5, 4, 0));
    let one = Usage { prompt_tokens: USAGE.prompt_tokens, completion_tokens: USAGE.completion_tokens };
    let four = Usage { prompt_tokens: 4 * USAGE.prompt_tokens, completion_tokens: 4 * USAGE.completion_tokens };
    assert_eq!((s2.tokens_spent, s2.tokens_from_cache), (one, four));
    assert_eq!((report2.answered, report2.unparsed_passages), (4, 1), "the garbage is counted again");
}

#[test]
fn a_call_that_keeps_failing_is_counted_and_the_run_goes_on() {
    let server = Fixture::start(|r| {
        let last = last_message(&r.body);
        if last.contains("Tollan Hills") {
            Reply::status(503, "overloaded")
        } else {
            Reply::json(completion(&answer(&last)))
        }
    });
    let cache = tempfile::tempdir().unwrap();
    let (x, report) = extract_llm(&passages(), &cached_client(&server, cache.path()), &options(), &Silent).unwrap();
    assert_eq!((report.answered, report.failed_passages, report.llm.errors), (3, 1, 1));
    assert!(report.failure_examples[0].starts_with("p4: ") && report.failure_examples[0].contains("503"));
    // The failed passage (and the unparsed one) keep the LLM-free extraction.
    assert_eq!(report.heuristic_fallback_passages, report.unparsed_passages + 1);
    let stand_in = extract_heuristic(&passages()[4..5]);
    let spo = |t: &hoprag::graph::Triple| (t.subject, t.predicate, t.object);
    let mine: Vec<_> = x.triples.iter().filter(|t| t.passage == 4).map(spo).collect();
    assert_eq!(mine, stand_in.triples.iter().map(spo).collect::<Vec<_>>());
    assert!(!x.entities[4].is_empty() && x.entities[4] == stand_in.entities[0]);
    assert_eq!(x.triples.iter().filter(|t| t.passage == 0).count(), 3, "the other passages are extracted");
    assert_eq!(requests(&server), 4 + 3, "four answers, and the failing call with its two retries");
}

#[test]
fn a_run_where_no_call_succeeds_stops_early_and_keeps_the_llm_free_triples() {
    let server = Fixture::start(|_| Reply::status(503, "down"));
    let many: Vec<Passage> = (0..60).map(|i| passage(&format!("q{i}"), "T", &format!("Passage number {i}."))).collect();
    let cache = tempfile::tempdir().unwrap();
    let llm = cached_client(&server, cache.path());
    let (x, report) = extract_llm(&many, &llm, &options(), &Silent).unwrap();
    assert_eq!((report.answered, report.unparsed_passages, report.failed_passages), (0, 0, 60));
    assert!(report.failure_examples.iter().any(|e| e.contains("503")), "{report:?}");
    assert!(report.failure_examples.iter().any(|e| e.contains("not tried")), "{report:?}");
    assert_eq!(report.heuristic_fallback_passages, 60);
    let heuristic = extract_heuristic(&many);
    assert_eq!(x.entities, heuristic.entities, "every passage has the LLM-free extraction");
    assert_eq!(x.triples.len(), heuristic.triples.len());
    // Without the early stop all 60 passages would be tried, three attempts each.
    assert!(requests(&server) < 60 * 3 / 2, "{} requests", requests(&server));
}

#[test]
fn query_ner_reads_the_list_and_counts_garbage() {
    let server = canned_server(Arc::new(Mutex::new(Vec::new())));
    let llm = OpenAiChat::new(config(&server.base_url)).unwrap();

    let meter = Meter::new(&llm);
    let clean = query_ner(&meter, "A clean list, please: who built Alder Mill?").unwrap();
    assert_eq!(clean, ["Alder Mill", "Oona Farrell", "1791"], "case-insensitive duplicates and blanks dropped");
    assert_eq!(meter.snapshot().parse_failures, 0);

    let asked = query_ner(&meter, "which watermill stands on the brisk river?").unwrap();
    assert_eq!(asked, ["Brisk River"], "the {{\"entities\": [...]}} object asked for");

    let garbage = query_ner(&meter, "Something else entirely?").unwrap();
    assert!(garbage.is_empty());
    let s = meter.snapshot();
    assert_eq!((s.calls, s.parse_failures), (3, 1));
    assert_eq!(s.tokens_spent.total(), 3 * USAGE.total());
}

#[test]
fn ppr_with_llm_query_ner_end_to_end() {
    let server = canned_server(Arc::new(Mutex::new(Vec::new())));
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let corpus = LoadedCorpus { passages: passages(), ..Default::default() };
    common::hash_index(dir.path(), &corpus);
    let index = store::folder(dir.path()).load().unwrap();

    let llm: Arc<dyn Llm> = Arc::new(cached_client(&server, cache.path()));
    let (extraction, _) = extract_llm(index.passages().as_slice(), llm.as_ref(), &options(), &Silent).unwrap();
    let graph = EntityGraph::build(
        index.passages().as_slice(),
        extraction,
        &HashEmbedder::new(),
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    assert!(graph.entity_id("brisk river").is_some());
    store::attach_graph(store::folder(dir.path()).as_ref(), &graph, "llm:fixture-chat".into()).unwrap();
    let index = Arc::new(store::folder(dir.path()).load().unwrap());

    // Mentions only, so the seeds are the LLM's entities and nothing else.
    let mut config = Config::default();
    config.methods.ppr.link.facts = false;
    config.methods.ppr.link.ner = NerMode::Llm;
    config.methods.phasegraph.graph.link = config.methods.ppr.link;
    // With no endpoint configured the engine falls back to the local model; one that is
    // not there stops the method before its first question.
    let mut missing = config.clone();
    missing.llm.local = dir.path().join("missing.gguf").display().to_string();
    let engine = Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), missing).unwrap();
    assert!(engine.llm_source().to_string().starts_with("local "));
    let err = engine.retriever("ppr").err().expect("the local model is missing").to_string();
    assert!(err.contains("needs the LLM") && err.contains("missing.gguf"), "{err}");
    assert!(engine.retriever("bm25").is_ok(), "methods that ask the LLM nothing do not care");
    let engine =
        Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), config.clone()).unwrap();

    // Load the graph first, so that with_llm has to hand the model to a loaded linker.
    engine.graph().unwrap();
    let engine = engine.with_llm(llm.clone());
    assert_eq!(engine.llm_source().to_string(), "openai:fixture-chat");
    let question = Query::new("who built the watermill on the brisk river?");
    let before = requests(&server);
    let r = engine.retriever("ppr").unwrap().retrieve(&question, 2).unwrap();
    assert_eq!(requests(&server), before + 1, "one NER call");
    let step = |name: &str| r.trace.steps.iter().find(|s| s.name == name).map(|s| s.detail.clone());
    let ner = step("query ner").expect("a query ner step");
    assert_eq!(ner["mentions"], json!(["Brisk River"]));
    assert_eq!(ner["model"], "openai:fixture-chat");
    assert_eq!(ner["tokens"], json!(USAGE));
    let linked = step("link entities").unwrap();
    assert_eq!((linked[0]["label"].as_str(), linked[0]["via"].as_str()), (Some("Brisk River"), Some("exact")));
    assert!(step("ppr").is_some(), "seeded PPR, not the dense fallback");
    let mut titles: Vec<&str> = r.hits.iter().map(|h| index.passage(h.passage).title.as_str()).collect();
    titles.sort();
    assert_eq!(titles, ["Alder Mill", "Brisk River"], "the two passages about the river");

    // PhaseGraph links through the same linker; its NER answer now comes from the cache.
    let pg = engine.retriever("phasegraph").unwrap().retrieve(&question, 3).unwrap();
    let pg_ner = pg.trace.steps.iter().find(|s| s.name == "query ner").expect("phasegraph asks too");
    assert_eq!(pg_ner.detail["cached"], true);
    assert_eq!(requests(&server), before + 1);

    // The surface extractor finds nothing in the lower-case question: no seeds, no walk.
    let mut heuristic = config;
    heuristic.methods.ppr.link.ner = NerMode::Heuristic;
    let plain = engine.with_config(heuristic).retriever("ppr").unwrap().retrieve(&question, 2).unwrap();
    assert!(plain.trace.steps.iter().all(|s| s.name != "query ner" && s.name != "ppr"));
}
