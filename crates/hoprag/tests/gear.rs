//! GEAR end to end on a small hand-made graph: the triple index lines up with the graph,
//! `naive_ge` follows a triple chain to a passage its base missed, and `sync_ge` and the
//! `gear` agent run against the loopback fixture LLM with canned answers (every step in
//! the trace, calls and tokens counted, memory growing, both ways of stopping, malformed
//! output and server errors counted rather than fatal).

mod common;

use std::sync::Arc;

use common::fixture::{Fixture, Reply};
use common::HashEmbedder;
use hoprag::corpus::{LoadedCorpus, Passage};
use hoprag::dataset::{load_dataset, resolve_gold};
use hoprag::embed::{Embedder, TextKind};
use hoprag::eval::{evaluate, EvalOptions};
use hoprag::graph::{EntityGraph, Extraction, GraphOptions, Triple, TripleIndex};
use hoprag::index::{Index, SearchKind};
use hoprag::llm::{Llm, Usage};
use hoprag::progress::Silent;
use hoprag::retrieve::{Query, Retrieval};
use hoprag::store;
use hoprag::{Config, Engine};
use serde_json::{json, Value};

const USAGE: Usage = Usage { prompt_tokens: 50, completion_tokens: 10 };

const PASSAGES: [(&str, &str); 7] = [
    ("Alder Mill", "Alder Mill is a watermill on the Brisk River, built by Oona Farrell in 1791."),
    ("Oona Farrell", "Oona Farrell was a millwright from Kestrel Bay."),
    ("Kestrel Bay", "Kestrel Bay is a fishing village on the Corran coast."),
    ("Brisk River", "The Brisk River rises in the Tollan Hills and flows past Alder Mill."),
    ("Tollan Hills", "The Tollan Hills are a range of low hills."),
    ("Harrow Mill", "Harrow Mill is a watermill built in 1802 on the Corran coast."),
    ("Pellam Works", "Pellam Works built watermill wheels for mills on the Brisk River."),
];

const TRIPLES: [(u32, &str, &str, &str); 14] = [
    (0, "Alder Mill", "stands on", "Brisk River"),
    (0, "Alder Mill", "built by", "Oona Farrell"),
    (0, "Alder Mill", "built in", "1791"),
    (1, "Oona Farrell", "was a", "millwright"),
    (1, "Oona Farrell", "born in", "Kestrel Bay"),
    (2, "Kestrel Bay", "is on", "Corran coast"),
    (3, "Brisk River", "rises in", "Tollan Hills"),
    (3, "Brisk River", "flows past", "Alder Mill"),
    (4, "Tollan Hills", "is a", "range of hills"),
    (5, "Harrow Mill", "is a", "watermill"),
    (5, "Harrow Mill", "built in", "1802"),
    (5, "Harrow Mill", "is on", "Corran coast"),
    (6, "Pellam Works", "built wheels for", "watermill"),
    (6, "Pellam Works", "supplied mills on", "Brisk River"),
];

const QUESTION: &str = "Where was the builder of Alder Mill born?";

/// The index of [`PASSAGES`] with the graph of [`TRIPLES`], embedded by [`HashEmbedder`].
fn mill_index(dir: &std::path::Path) -> Arc<Index> {
    let passages = PASSAGES
        .iter()
        .enumerate()
        .map(|(i, (title, text))| Passage::new(format!("p{i}"), title.to_string(), text.to_string()))
        .collect();
    let corpus = LoadedCorpus { passages, ..Default::default() };
    common::hash_index(dir, &corpus);
    let mut x = Extraction::new(PASSAGES.len());
    x.triples = TRIPLES
        .iter()
        .map(|&(p, s, r, o)| Triple { passage: p, subject: s.into(), predicate: r.into(), object: o.into() })
        .collect();
    // The hand-made facts are embedded from their own text (the beams below are reasoned
    // from their words), not read in passages that word them otherwise.
    let options = GraphOptions { fact_vectors: hoprag::graph::FactVectors::Embedded, ..GraphOptions::default() };
    let graph = EntityGraph::build(&corpus.passages, x, &HashEmbedder::new(), &options, &Silent).unwrap();
    store::attach_graph(store::folder(dir).as_ref(), &graph, "hand-made".into()).unwrap();
    Arc::new(store::folder(dir).load().unwrap())
}

/// GEAR over BM25 (the least embedder-dependent base), otherwise the paper's defaults.
fn engine(index: Arc<Index>, tweak: impl FnOnce(&mut Config)) -> Engine {
    let mut config = Config::default();
    config.methods.gear.base = SearchKind::Bm25;
    tweak(&mut config);
    Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), config).unwrap()
}

fn titles(engine: &Engine, r: &Retrieval) -> Vec<String> {
    r.hits.iter().map(|h| engine.index.passage(h.passage).title.clone()).collect()
}

fn steps<'a>(r: &'a Retrieval, name: &str) -> Vec<&'a hoprag::retrieve::TraceStep> {
    r.trace.steps.iter().filter(|s| s.name == name).collect()
}

fn names(r: &Retrieval) -> Vec<&str> {
    r.trace.steps.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn the_triple_index_lines_up_with_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let index = mill_index(dir.path());
    let graph = store::folder(dir.path()).load_graph(&index, None).unwrap().unwrap();
    let triples = TripleIndex::build(&graph, &HashEmbedder::new()).unwrap();
    assert_eq!(triples.graph.len(), TRIPLES.len());
    for (t, &(p, s, r, o)) in TRIPLES.iter().enumerate() {
        let t = t as u32;
        assert_eq!(triples.graph.passage(t), p, "triple {t} keeps its passage");
        assert_eq!(triples.text(t), format!("{s} {r} {o}"));
        assert_eq!(triples.graph.vector(t), graph.triple_vector(t), "the stored vector is reused");
        // Every triple finds itself first, whichever side searches.
        let e = HashEmbedder::new().embed_one(triples.text(t), TextKind::Query).unwrap();
        for kind in [SearchKind::Bm25, SearchKind::Dense, SearchKind::Hybrid] {
            let top = triples.search(kind, triples.text(t), &e, 3, 60.0, 100).unwrap();
            assert!(top.iter().any(|&(x, _)| x == t), "{kind:?} search for {:?}: {top:?}", triples.text(t));
        }
    }
    assert_eq!(triples.graph.passage_triples(5), [9, 10, 11]);
    // "Alder Mill built by Oona Farrell" neighbours the other Alder Mill triples (one
    // written "flows past Alder Mill") and both Oona Farrell triples.
    let mut n = Vec::new();
    triples.graph.neighbours(1, &mut n);
    assert_eq!(n, [0, 2, 3, 4, 7]);
    let top = triples.search(SearchKind::Bm25, "millwright", &[], 5, 60.0, 100).unwrap();
    assert_eq!(top.iter().map(|x| x.0).collect::<Vec<_>>(), [3]);
}

/// Whether some beam of the trace is exactly this sequence of triple texts.
fn has_beam(r: &Retrieval, sequence: &[&str]) -> bool {
    let beams = &steps(r, "beam search")[0].detail["beams"];
    beams.as_array().unwrap().iter().any(|b| b["triples"] == json!(sequence))
}

const CHAIN: [&str; 2] = ["Alder Mill built by Oona Farrell", "Oona Farrell born in Kestrel Bay"];

#[test]
fn naive_ge_follows_the_chain_to_a_passage_bm25_missed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(mill_index(dir.path()), |_| {});
    let q = Query::new(QUESTION);
    let bm25 = engine.retriever("bm25").unwrap().retrieve(&q, 3).unwrap();
    assert_eq!(
        titles(&engine, &bm25),
        ["Alder Mill", "Brisk River", "Harrow Mill"],
        "no word of the builder's passage"
    );

    let r = engine.retriever("naive_ge").unwrap().retrieve(&q, 3).unwrap();
    assert_eq!(names(&r), ["embed query", "base bm25", "initial triples", "beam search", "fuse"]);
    assert_eq!(steps(&r, "initial triples")[0].detail["triples"], 3 + 2 + 3, "every triple of the three passages");
    assert!(has_beam(&r, &CHAIN));
    // Every passage of the tiny corpus is in some beam, so RRF ranks those the base list
    // also holds first (Eq. 3): the same three passages.
    assert_eq!(titles(&engine, &r), ["Alder Mill", "Harrow Mill", "Brisk River"]);

    // From the best BM25 passage alone, its triples' chains lead to the builder's passage.
    let one = engine.with_config({
        let mut c = engine.config.clone();
        c.methods.gear.base_k = 1;
        c
    });
    let r = one.retriever("naive_ge").unwrap().retrieve(&q, 3).unwrap();
    assert_eq!(steps(&r, "initial triples")[0].detail["triples"], 3);
    assert!(has_beam(&r, &CHAIN));
    // C̃ = [Alder Mill, then the passages of the extensions in beam order: the river's
    // ("flows past Alder Mill" shares the most words), the builder's, Pellam Works'
    // (which supplied mills on the river Alder Mill stands on)].
    assert_eq!(steps(&r, "beam search")[0].detail["passages"], json!([0, 3, 1, 6]));
    assert_eq!(titles(&one, &r), ["Alder Mill", "Brisk River", "Oona Farrell"]);

    // Plain beam search is selectable and runs the same steps.
    let plain = engine.with_config({
        let mut c = engine.config.clone();
        c.methods.gear.diversity = false;
        c
    });
    let r = plain.retriever("naive_ge").unwrap().retrieve(&q, 3).unwrap();
    assert_eq!(steps(&r, "beam search")[0].detail["params"]["diversity"], false);
}

fn completion(text: &str) -> Value {
    json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": USAGE.prompt_tokens, "completion_tokens": USAGE.completion_tokens},
    })
}

/// Which stage a request is, from its instructions, and its last message.
fn stage(body: &Value) -> (&'static str, String) {
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap();
    let last = messages.last().unwrap()["content"].as_str().unwrap().to_string();
    let which = if system.starts_with(&hoprag::retrieve::gear::prompts::READ[..40]) {
        "read"
    } else if system.starts_with(&hoprag::retrieve::gear::prompts::REASON[..40]) {
        "reason"
    } else if system.starts_with(&hoprag::retrieve::gear::prompts::REWRITE[..40]) {
        "rewrite"
    } else if system.starts_with("You answer questions from the passages") {
        "answer"
    } else {
        "unknown"
    };
    (which, last)
}

/// Canned answers: the first read finds who built the mill, a read for the rewritten
/// query (or with that fact in memory) finds the birthplace; the memory answers the
/// question once it holds the birthplace. Questions about "Nowhere" are never
/// answerable; questions about "gibberish" get prose; "outage" questions get a 503.
fn mill_server() -> Fixture {
    Fixture::start(|r| {
        let (which, last) = stage(&r.body);
        if last.contains("outage") {
            return Reply::status(503, "overloaded");
        }
        if last.contains("gibberish") {
            return Reply::json(completion("I am not sure what you mean, sorry!"));
        }
        let text = match which {
            "read" if last.contains("Question: Where was Oona Farrell born?") || last.contains("Known facts:") => {
                r#"{"triples": [["Oona Farrell", "born in", "Kestrel Bay"], ["Oona Farrell"]]}"#
            }
            "read" => {
                r#"Sure! ```json
{"triples": [["Alder Mill", "built by", "Oona Farrell"],]}
```"#
            }
            "reason" if last.contains("Kestrel Bay") && !last.contains("Nowhere") => {
                r#"{"answerable": true, "answer": "Kestrel Bay", "reason": "built by Oona Farrell, born in Kestrel Bay"}"#
            }
            "reason" => r#"{"answerable": "no", "answer": "", "reason": "The birthplace of Oona Farrell is missing."}"#,
            // Questions that never become answerable get a new query each time (the
            // agent stops at a repeated one).
            "rewrite" if last.contains("Nowhere") => {
                return Reply::json(completion(&format!(
                    r#"{{"query": "Where was Oona Farrell born (request {})?"}}"#,
                    r.n
                )))
            }
            "rewrite" => r#"{"query": "Where was Oona Farrell born?"}"#,
            "answer" => "Answer: Kestrel Bay.\nIt is where the builder was born.",
            _ => "unexpected request",
        };
        Reply::json(completion(text))
    })
}

fn llm(server: &Fixture) -> Arc<dyn Llm> {
    Arc::new(server.chat_client())
}

fn calls(r: &Retrieval) -> u64 {
    r.trace.llm_cost().map_or(0, |c| c.calls)
}

#[test]
fn llm_methods_say_how_to_configure_an_llm() {
    // No endpoint and a local model file that is not there: refused when built.
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("absent.gguf").to_string_lossy().into_owned();
    let engine = engine(mill_index(dir.path()), |c| {
        c.llm.model = String::new();
        c.llm.local = absent.clone();
    });
    for m in ["sync_ge", "gear"] {
        let err = engine.retriever(m).err().expect("the local model is missing").to_string();
        assert!(err.contains(m) && err.contains("absent.gguf") && err.contains("HOPRAG_LLM_MODEL"), "{err}");
    }
}

#[test]
fn sync_ge_links_the_read_triples_and_expands_from_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = mill_server();
    let engine = engine(mill_index(dir.path()), |_| {}).with_llm(llm(&server));
    let r = engine.retriever("sync_ge").unwrap().retrieve(&Query::new(QUESTION), 4).unwrap();
    assert_eq!(names(&r), ["embed query", "base bm25", "read", "triple link", "beam search", "fuse"]);
    let read = steps(&r, "read")[0];
    assert_eq!(
        read.detail["proximal_triples"],
        json!([{"subject": "Alder Mill", "predicate": "built by", "object": "Oona Farrell"}])
    );
    assert_eq!(read.detail["passages"], 3, "the read sees the base passages (BM25 finds three)");
    let cost = read.llm.as_ref().unwrap();
    assert_eq!((cost.calls, cost.tokens(), cost.parse_failures), (1, USAGE, 0));
    let link = &steps(&r, "triple link")[0].detail;
    assert_eq!(link["links"][0]["triple"][1], "Alder Mill built by Oona Farrell");
    // One initial triple, extended by each of its five neighbours: one of them reaches
    // the builder's passage, which no base passage is.
    let beam = &steps(&r, "beam search")[0].detail;
    assert_eq!((beam["stats"]["initial"].as_u64(), beam["stats"]["scored"].as_u64()), (Some(1), Some(1 + 5)));
    assert!(has_beam(&r, &CHAIN));
    let got = titles(&engine, &r);
    assert_eq!(got.len(), 4);
    assert!(got.contains(&"Oona Farrell".to_string()), "{got:?}");
    assert_eq!(server.requests.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn gear_reads_reasons_rewrites_and_stops_when_the_memory_answers() {
    let dir = tempfile::tempdir().unwrap();
    let server = mill_server();
    let engine = engine(mill_index(dir.path()), |_| {}).with_llm(llm(&server));
    let r = engine.retriever("gear").unwrap().retrieve(&Query::new(QUESTION), 5).unwrap();
    // Iteration 1: SyncGE (read), gist read, reason (no), rewrite; iteration 2: SyncGE on
    // the new query, gist read, reason (yes); then passageLink and the final RRF.
    let llm_steps: Vec<&str> =
        names(&r).into_iter().filter(|n| ["read", "gist read", "reason", "rewrite"].contains(n)).collect();
    assert_eq!(llm_steps, ["read", "gist read", "reason", "rewrite", "read", "gist read", "reason"]);
    let queries: Vec<&Value> = steps(&r, "iteration").iter().map(|s| &s.detail["query"]).collect();
    assert_eq!(queries, [&json!(QUESTION), &json!("Where was Oona Farrell born?")]);
    let memory: Vec<usize> =
        steps(&r, "gist read").iter().map(|s| s.detail["memory"].as_array().unwrap().len()).collect();
    assert_eq!(memory, [1, 2], "the memory grows by the new fact");
    assert_eq!(steps(&r, "gist read")[1].detail["malformed"], 1, "the one-element triple is counted");
    let verdicts: Vec<&Value> = steps(&r, "reason").iter().map(|s| &s.detail["verdict"]["answerable"]).collect();
    assert_eq!(verdicts, [&json!(false), &json!(true)]);
    let last = &steps(&r, "fuse all")[0].detail;
    assert_eq!((last["steps"].as_u64(), last["stopped"].as_str()), (Some(2), Some("answerable")));
    assert_eq!(last["linked_lists"], 2, "one passageLink list per memory triple");
    assert_eq!(last["rounds"], 2);
    // Seven calls, each counted with its tokens, in the steps that made them.
    assert_eq!(calls(&r), 7);
    let total = r.trace.llm_cost().unwrap();
    assert_eq!(total.tokens().total(), 7 * USAGE.total());
    assert_eq!(total.parse_failures, 0);
    assert_eq!(server.requests.load(std::sync::atomic::Ordering::SeqCst), 7);
    let got = titles(&engine, &r);
    for needed in ["Alder Mill", "Oona Farrell"] {
        assert!(got.contains(&needed.to_string()), "{got:?}");
    }
    assert!(r.hits.len() <= 5);
}

#[test]
fn gear_stops_at_the_maximum_number_of_steps() {
    let dir = tempfile::tempdir().unwrap();
    let server = mill_server();
    let q = Query::new("Where was the builder of Alder Mill born, and is Nowhere involved?");
    let index = mill_index(dir.path());
    for (max, expected) in [(1, 3), (2, 7), (3, 11)] {
        let engine = engine(index.clone(), |c| c.methods.gear.max_steps = max).with_llm(llm(&server));
        let r = engine.retriever("gear").unwrap().retrieve(&q, 5).unwrap();
        let last = &steps(&r, "fuse all")[0].detail;
        assert_eq!((last["steps"].as_u64(), last["stopped"].as_str()), (Some(max as u64), Some("max steps")));
        assert_eq!(calls(&r), expected, "{max} steps: read, gist read, reason each, rewrite between");
        assert_eq!(steps(&r, "rewrite").len(), max - 1, "no rewrite after the last step");
    }
}

#[test]
fn malformed_answers_and_server_errors_are_counted_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let server = mill_server();
    let engine = engine(mill_index(dir.path()), |_| {}).with_llm(llm(&server));

    // Prose instead of JSON: SyncGE falls back to the base passages.
    let q = Query::new("Which gibberish mill was built on the Brisk River?");
    let base = engine.retriever("bm25").unwrap().retrieve(&q, 3).unwrap();
    let r = engine.retriever("sync_ge").unwrap().retrieve(&q, 3).unwrap();
    assert_eq!(titles(&engine, &r), titles(&engine, &base), "nothing to expand from: the base list");
    assert_eq!(steps(&r, "read")[0].detail["unparsed"], true);
    assert_eq!(r.trace.llm_cost().unwrap().parse_failures, 1);
    assert!(steps(&r, "beam search").is_empty(), "no beam search without a triple to start from");
    assert!(r.trace.fell_back(), "answered by the base ranking, and marked so");

    // The agent: read, gist read and rewrite (no query) all fail to parse (reason is not
    // asked: with no fact in memory nothing can be answerable), it stops for want of a
    // next query, and the question gets the base ranking.
    let r = engine.retriever("gear").unwrap().retrieve(&q, 3).unwrap();
    let cost = r.trace.llm_cost().unwrap();
    assert_eq!((cost.calls, cost.parse_failures), (3, 3));
    assert!(steps(&r, "reason").is_empty());
    assert_eq!(steps(&r, "fuse all")[0].detail["stopped"], "no next query");
    assert!(r.trace.fell_back());
    assert_eq!(titles(&engine, &r), titles(&engine, &engine.retriever("bm25").unwrap().retrieve(&q, 3).unwrap()));

    // A server that keeps failing: each call is retried once, counted as an error, and
    // the query still returns passages.
    let q = Query::new("Which mill suffered an outage on the Brisk River?");
    let r = engine.retriever("gear").unwrap().retrieve(&q, 3).unwrap();
    let cost = r.trace.llm_cost().unwrap();
    assert_eq!((cost.calls, cost.errors), (3, 3));
    assert!(steps(&r, "read")[0].detail["error"].as_str().unwrap().contains("503"));
    assert!(!r.hits.is_empty() && r.trace.fell_back());
}

#[test]
fn eval_reports_llm_cost_and_steps_of_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let server = mill_server();
    let engine = engine(mill_index(dir.path()), |_| {}).with_llm(llm(&server));
    let data = dir.path().join("questions.jsonl");
    std::fs::write(
        &data,
        format!(
            "{}\n{}\n",
            json!({"id": "q1", "question": QUESTION, "gold_titles": ["Alder Mill", "Oona Farrell"], "answer": "Kestrel Bay"}),
            json!({"id": "q2", "question": "Who built Alder Mill, and is Nowhere involved?", "gold_titles": ["Alder Mill"],
                   "answer": "Oona Farrell", "answer_aliases": ["O. Farrell"]})
        ),
    )
    .unwrap();
    let (_, questions) = load_dataset(&data).unwrap();
    let resolved = resolve_gold(&questions, engine.index.passages());
    let options = EvalOptions { answer_k: Some(5), ..EvalOptions::new(vec![5], Some("bm25".into()), "mill") };
    let methods = ["naive_ge".to_string(), "sync_ge".into(), "gear".into()];
    let report = evaluate(&engine, &resolved, &methods, &options, &Silent).unwrap();
    assert!(report.methods["naive_ge"].llm.is_none());
    let sync = report.methods["sync_ge"].llm.as_ref().unwrap();
    assert_eq!(sync.calls_per_query, 1.0);
    // q1 takes 7 calls (above); q2 runs out its 4 steps: 4 × 3 + 3 rewrites = 15.
    let gear = &report.methods["gear"];
    assert_eq!(gear.llm.as_ref().unwrap().calls_per_query, (7.0 + 15.0) / 2.0);
    assert_eq!(gear.llm.as_ref().unwrap().prompt_tokens_per_query, 11.0 * USAGE.prompt_tokens as f64);
    assert_eq!(gear.stages["iteration"].runs_per_query, (2.0 + 4.0) / 2.0, "steps per query");
    assert_eq!(gear.stages["reason"].llm_calls_per_query, 3.0);
    assert_eq!(gear.recall["5"], 1.0);

    // Every method's answers: the fixture says "Kestrel Bay" to both questions, right
    // for q1 only; the answer calls are counted apart from the method's own.
    for m in ["naive_ge", "sync_ge", "gear", "bm25"] {
        let qa = report.methods[m].qa.as_ref().unwrap();
        assert_eq!((qa.k, qa.answered, qa.failed, qa.llm.calls), (5, 2, 0, 2), "{m}");
        assert_eq!((qa.em, qa.f1), (0.5, 0.5), "{m}");
        let per: Vec<_> = report.methods[m].per_query.iter().map(|q| q.answer.clone().unwrap()).collect();
        assert_eq!((per[0].answer.as_str(), per[0].em, per[1].em), ("Kestrel Bay", true, false));
    }
    assert_eq!(gear.llm.as_ref().unwrap().calls_per_query, 11.0, "answer calls are not the method's");
}
