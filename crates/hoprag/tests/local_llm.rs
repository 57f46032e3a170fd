//! The in-process GGUF model (SmolLM2 from the model cache, installed by scripts/test.sh)
//! on llama.cpp: tokenizer and chat template from the file, greedy decoding, the kept
//! prefix state, the JSON grammar, and the LLM stages that exist so far (LLM triple
//! extraction, query NER for PPR and PhaseGraph) end to end, offline. Assertions are
//! structural (runs complete, calls and failures are counted, answers repeat, JSON
//! answers parse), not about the quality of a 135M model's answers.
//!
//! Without the model the tests say so and pass, except in CI (`CI` set) or where
//! `HOPRAG_REQUIRE_MODELS` is set (scripts/test.sh installs the model and sets it), where
//! they fail. All tests share one loaded model and run one at a time.
#![cfg(feature = "local-llm")]

mod common;

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use common::HashEmbedder;
use hoprag::corpus::{load_corpus, CorpusOptions, LoadedCorpus};
use hoprag::graph::linking::NerMode;
use hoprag::graph::{extract_llm, EntityGraph, GraphOptions, LlmExtractOptions};
use hoprag::store;

use hoprag::llm::local::Finish;
use hoprag::llm::{CachedLlm, ChatRequest, Llm, LlmSource, LocalLlm, LocalModel, Message};
use hoprag::progress::Silent;
use hoprag::retrieve::Query;
use hoprag::{Config, Engine};

/// Held by each test for its whole run.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The loaded model, or None (after saying why) when it is not installed.
fn smollm2() -> Option<&'static LocalLlm> {
    static MODEL: OnceLock<Option<Arc<LocalLlm>>> = OnceLock::new();
    MODEL
        .get_or_init(|| match LocalModel::resolve("smollm2") {
            Ok(model) => Some(LocalLlm::load(&model).unwrap()),
            Err(e) if std::env::var_os("HOPRAG_REQUIRE_MODELS").is_some() || std::env::var_os("CI").is_some() => {
                panic!("CI installs the local model the tests run: {e}")
            }
            Err(e) => {
                eprintln!("skipped: the local model is not installed ({e})");
                None
            }
        })
        .as_deref()
}

#[test]
fn tokenizer_from_the_gguf_round_trips() {
    let _serial = one_at_a_time();
    let Some(llm) = smollm2() else { return };
    for text in [
        "Hello world",
        "The Brisk River rises in the Tollan Hills; it was bridged in 1791.",
        "Café déjà vu, naïve façade: 東京 and Zürich.",
        "  two  spaces,\ttabs\n\nand blank lines  ",
        "{\"entities\": [\"Alder Mill\", 1791]}",
    ] {
        let ids = llm.tokenize(text);
        assert_eq!(llm.detokenize(&ids), text, "round trip of {text:?}");
    }
    // Common words are single tokens; SmolLM2's pre-tokenizer puts every digit on its own.
    assert_eq!(llm.tokenize("Hello world").len(), 2);
    assert_eq!(llm.tokenize("in 1791").len(), 6);
    // Control texts in user text stay text: no <|im_end|> id (2) comes out of plain text,
    // while the chat template's <|im_end|> is that one id.
    assert_eq!(llm.detokenize(&[2]), "<|im_end|>");
    assert!(!llm.tokenize("a <|im_end|> b").contains(&2));
    assert!(llm.prompt(&ChatRequest::user("a <|im_end|> b")).unwrap().iter().filter(|&&t| t == 2).count() == 1);
}

#[test]
fn the_chat_template_comes_from_the_gguf() {
    let _serial = one_at_a_time();
    let Some(llm) = smollm2() else { return };
    let request = ChatRequest::new(vec![Message::system("Be brief."), Message::user("Hi")]);
    assert_eq!(
        llm.render(&request).unwrap(),
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = llm.prompt(&request).unwrap();
    assert_eq!(llm.detokenize(&ids), llm.render(&request).unwrap(), "SmolLM2 adds no BOS");
    // JSON requests are constrained by a grammar, not by a different prompt.
    assert_eq!(llm.prompt(&ChatRequest { json: true, ..request.clone() }).unwrap(), ids);
}

#[test]
fn json_requests_are_decoded_under_the_grammar() {
    let _serial = one_at_a_time();
    let Some(llm) = smollm2() else { return };
    // Prompts that do not ask for JSON at all: only the grammar makes the answers JSON.
    let mut unconstrained_json = 0;
    for prompt in ["Say hello to Ada.", "Write two lines about the sea.", "What is 2 + 2?"] {
        let request = question(prompt, 160);
        let free = llm.generate(&request).unwrap();
        unconstrained_json += usize::from(free.text.trim_start().starts_with('{'));
        // Cut short or not (a 135M model under a grammar can nest objects until its
        // cap), the answer parses: a cut one is closed after its last complete part.
        let json = llm.generate(&ChatRequest { json: true, ..request }).unwrap();
        assert_ne!(json.finish, Finish::Stop, "{json:?}");
        let value: serde_json::Value =
            serde_json::from_str(&json.text).unwrap_or_else(|e| panic!("{prompt:?}: not JSON ({e}): {:?}", json.text));
        assert!(value.is_object(), "{prompt:?}: {value}");
    }
    assert!(unconstrained_json < 3, "without the grammar the model writes prose");
}

/// Each stage's answer shape, given as a JSON Schema, is what a small model writes:
/// here a question and prompts that ask for nothing like it.
#[test]
fn schema_requests_are_decoded_under_the_schemas_grammar() {
    let _serial = one_at_a_time();
    let Some(llm) = smollm2() else { return };
    let triples = r#"{"type": "object", "properties": {"triples": {"type": "array", "maxItems": 6,
        "items": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 3, "maxItems": 3}}},
        "required": ["triples"], "additionalProperties": false}"#;
    let judged = r#"{"type": "array", "prefixItems": [
        {"type": "object", "properties": {"id": {"const": 1}, "score": {"type": "integer", "minimum": 0, "maximum": 10}}, "required": ["id", "score"], "additionalProperties": false},
        {"type": "object", "properties": {"id": {"const": 2}, "score": {"type": "integer", "minimum": 0, "maximum": 10}}, "required": ["id", "score"], "additionalProperties": false},
        {"type": "object", "properties": {"id": {"const": 3}, "score": {"type": "integer", "minimum": 0, "maximum": 10}}, "required": ["id", "score"], "additionalProperties": false}]}"#;
    for prompt in ["Ada Lovelace wrote notes on the Analytical Engine in 1843.", "Say hello.", "What is 2 + 2?"] {
        let answer = llm.generate(&question(prompt, 200).with_schema(triples)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&answer.text)
            .unwrap_or_else(|e| panic!("{prompt:?}: not JSON ({e}): {:?}", answer.text));
        let list = value["triples"].as_array().unwrap_or_else(|| panic!("{prompt:?}: {value}"));
        assert!(list.len() <= 6, "{value}");
        for t in list {
            let parts = t.as_array().unwrap();
            assert_eq!(parts.len(), 3, "{value}");
            assert!(parts.iter().all(|p| p.as_str().is_some_and(|s| !s.is_empty())), "{value}");
        }

        let answer = llm.generate(&question(prompt, 120).with_schema(judged)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&answer.text)
            .unwrap_or_else(|e| panic!("{prompt:?}: not JSON ({e}): {:?}", answer.text));
        let scores = value.as_array().unwrap_or_else(|| panic!("{prompt:?}: {value}"));
        // Complete unless cut short by the cap, and every part as the schema says.
        assert!(scores.len() == 3 || answer.finish == Finish::Length, "{value}");
        for (i, entry) in scores.iter().enumerate() {
            assert_eq!(entry["id"], i + 1, "{value}");
            assert!((0..=10).contains(&entry["score"].as_i64().unwrap()), "{value}");
        }
    }
}

fn question(text: &str, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        max_tokens: Some(max_tokens),
        ..ChatRequest::new(vec![Message::system("You are a helpful assistant."), Message::user(text)])
    }
}

#[test]
fn greedy_answers_repeat_and_respect_the_limits() {
    let _serial = one_at_a_time();
    let Some(llm) = smollm2() else { return };
    let request = question("What is the capital of France?", 24);
    let first = llm.chat(&request).unwrap();
    let second = llm.chat(&request).unwrap();
    assert_eq!(first.text, second.text, "greedy decoding is deterministic");
    assert_eq!(first.usage, second.usage);
    assert!(!first.text.trim().is_empty());
    assert_eq!(first.usage.prompt_tokens as usize, llm.prompt(&request).unwrap().len());
    assert!((1..=24).contains(&first.usage.completion_tokens));
    assert!(first.latency_ms > 0.0 && !first.cached);

    // A cap of 3 tokens cuts the same answer short: its first tokens, exactly.
    let short = llm.generate(&ChatRequest { max_tokens: Some(3), ..request.clone() }).unwrap();
    assert_eq!((short.completion_tokens, short.finish), (3, Finish::Length));
    assert!(first.text.starts_with(&short.text), "{:?} vs {:?}", short.text, first.text);

    // A stop string taken from the middle of that answer ends it just before.
    let chars: Vec<char> = first.text.chars().collect();
    assert!(chars.len() >= 8, "{:?}", first.text);
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 3].iter().collect();
    let stopped = llm.generate(&ChatRequest { stop: vec![stop.clone()], ..request }).unwrap();
    assert_eq!(stopped.finish, Finish::Stop);
    assert_eq!(stopped.text, first.text[..first.text.find(&stop).unwrap()], "stop {stop:?}");
}

#[test]
fn the_state_after_a_shared_prefix_is_kept_and_changes_nothing() {
    let _serial = one_at_a_time();
    let Some(llm) = smollm2() else { return };
    let conversation = |last: &str| ChatRequest {
        max_tokens: Some(6),
        ..ChatRequest::new(vec![
            Message::system("You answer questions about rivers with one short sentence, naming the river first."),
            Message::user("Which river flows through Paris?"),
            Message::assistant("The Seine flows through Paris."),
            Message::user(last),
        ])
    };
    let first = llm.generate(&conversation("Which river flows through Vienna?")).unwrap();
    let again = llm.generate(&conversation("Which river flows through Vienna?")).unwrap();
    assert_eq!(first.reused_prompt_tokens, 0, "nothing kept yet for this prefix");
    assert!(again.reused_prompt_tokens > 32 && again.reused_prompt_tokens < again.prompt_tokens, "{again:?}");
    assert_eq!(first.text, again.text, "the kept state gives the same answer");
    let other = llm.generate(&conversation("Which river flows through Cairo?")).unwrap();
    assert_eq!(other.reused_prompt_tokens, again.reused_prompt_tokens, "another question, the same prefix");
}

/// The first demo passages.
fn demo_passages(n: usize) -> LoadedCorpus {
    let mut corpus = load_corpus(&common::demo().join("corpus.jsonl"), &CorpusOptions::default()).unwrap();
    corpus.passages.truncate(n);
    corpus
}

#[test]
fn llm_extraction_and_query_ner_run_offline_on_the_local_model() {
    let _serial = one_at_a_time();
    let Some(local) = smollm2() else { return };
    let cache = tempfile::tempdir().unwrap();
    let llm: Arc<dyn Llm> = Arc::new(CachedLlm::new(local, cache.path()).unwrap());
    let corpus = demo_passages(3);

    // Short answers keep the test quick; an answer cut off is closed after its last
    // complete triple.
    let options = LlmExtractOptions { concurrency: 2, max_tokens: Some(96) };
    let (extraction, report) = extract_llm(&corpus.passages, llm.as_ref(), &options, &Silent).unwrap();
    assert_eq!(report.model, local.id());
    assert!(report.model.starts_with("local:SmolLM2-135M-Instruct.Q8_0:"));
    assert_eq!(report.passages, 3);
    assert_eq!(report.failed_passages, 0, "an in-process model does not fail calls");
    assert_eq!(report.answered + report.unparsed_passages, 3);
    // The extraction schema's grammar: every answer parses, even from a 135M model.
    assert_eq!(report.unparsed_passages, 0, "{report:?}");
    assert_eq!((report.llm.calls, report.llm.cache_hits, report.llm.errors), (3, 0, 0));
    assert_eq!(report.llm.parse_failures, 0, "{report:?}");
    let spent = report.llm.tokens_spent;
    assert!(spent.prompt_tokens > 3 * 300, "instructions, demonstration and passage: {spent:?}");
    assert!((3..=3 * 96).contains(&spent.completion_tokens), "{spent:?}");
    for t in &extraction.triples {
        assert!((t.passage as usize) < 3);
        assert!(![&t.subject, &t.predicate, &t.object].iter().any(|s| s.trim().is_empty()), "{t:?}");
    }

    // A graph from those triples, and PPR with the local model's query NER.
    let dir = tempfile::tempdir().unwrap();
    common::hash_index(dir.path(), &corpus);
    let graph =
        EntityGraph::build(&corpus.passages, extraction, &HashEmbedder::new(), &GraphOptions::default(), &Silent)
            .unwrap();
    store::attach_graph(store::folder(dir.path()).as_ref(), &graph, format!("llm:{}", local.id())).unwrap();
    let index = Arc::new(store::folder(dir.path()).load().unwrap());
    let mut config = Config::default();
    config.methods.ppr.link.ner = NerMode::Llm;
    config.methods.phasegraph.graph.link = config.methods.ppr.link;

    // With only `llm.local` configured, the engine picks that model without loading it.
    config.llm.local = "smollm2".into();
    let engine = Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), config).unwrap();
    assert!(matches!(engine.llm_source(), LlmSource::Local(_)));
    assert!(engine.llm_source().to_string().starts_with("local smollm2 ("), "{}", engine.llm_source());
    assert_eq!(engine.llm().unwrap().id(), local.id(), "same file, same cache key");
    assert!(engine.uses_llm("ppr") && !engine.uses_llm("dense"));

    // Answers go to the test's cache, not the user's.
    let engine = engine.with_llm(llm.clone());
    let ppr = engine.retriever("ppr").unwrap();
    let question = Query::new("Who was the First Chancellor of Tessany?");
    let r = ppr.retrieve(&question, 2).unwrap();
    let ner = &r.trace.steps.iter().find(|s| s.name == "query ner").expect("a query ner step").detail;
    assert_eq!(ner["model"], local.id());
    assert_eq!(ner["cached"], false);
    assert!(ner["mentions"].is_array() && ner["parse_failures"].is_array());
    assert!(ner["tokens"]["prompt_tokens"].as_u64().unwrap() > 0);
    // query_ner caps answers at 256 tokens.
    assert!((1..=256).contains(&ner["tokens"]["completion_tokens"].as_u64().unwrap()), "{ner}");
    assert!(r.hits.len() <= 2);
    // PhaseGraph links through the same linker: the question's NER comes from the cache.
    let pg = engine.retriever("phasegraph").unwrap().retrieve(&question, 2).unwrap();
    let ner = &pg.trace.steps.iter().find(|s| s.name == "query ner").unwrap().detail;
    assert_eq!(ner["cached"], true);

    // BridgeRAG's SVO and judge calls under their schemas: every answer parses, and the
    // judge scores every pooled candidate.
    let bridge = engine.retriever("bridge_rag").unwrap().retrieve(&question, 2).unwrap();
    let step =
        |name: &str| bridge.trace.steps.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no {name} step"));
    for name in ["svo queries", "judge"] {
        let llm = step(name).llm.as_ref().unwrap();
        assert_eq!((llm.calls, llm.parse_failures), (1, 0), "{name}: {:?}", step(name).detail);
    }
    let judge = &step("judge").detail;
    assert_eq!((judge["missing"].as_u64(), judge["unparsed"].as_bool()), (Some(0), Some(false)), "{judge}");
    assert_eq!(judge["scores"].as_array().unwrap().len() as u64, step("pool").detail["size"].as_u64().unwrap());
}
