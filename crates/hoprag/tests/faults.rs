//! Fault injection: an OpenAI-compatible endpoint on loopback that answers every request
//! with one kind of bad answer. For each fault, an evaluation of `bridge_rag`, `sync_ge`
//! and `gear` over 20 demo questions (the real MiniLM embedder, never the local chat
//! model) and an LLM OpenIE extraction must complete, count the failures and the queries
//! that fell back, keep each method's R@5 at or above its fallback's, and leave nothing
//! bad in the response cache.

mod common;

use std::sync::{Arc, OnceLock};

use common::faults::{check_cache, check_report, reply, Fault};
use common::fixture::Fixture;
use hoprag::corpus::{load_corpus, CorpusOptions};
use hoprag::dataset::{load_dataset, resolve_gold, ResolvedDataset};
use hoprag::embed::{load_embedder, Embedder, EmbedderSettings, EmbedderSpec, LocalModel};
use hoprag::eval::{evaluate, EvalOptions};
use hoprag::graph::{extract_heuristic, extract_llm, EntityGraph, GraphOptions, LlmExtractOptions};
use hoprag::http::RetryPolicy;
use hoprag::index::Index;
use hoprag::llm::{CachedLlm, Llm, OpenAiChat, OpenAiChatConfig};
use hoprag::progress::Silent;
use hoprag::store;
use hoprag::{Config, Engine};

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
        store::build_index(
            store::folder(dir.path()).as_ref(),
            &corpus,
            vec![],
            embedder.as_ref(),
            &store::BuildOptions::default(),
            &Silent,
        )
        .unwrap();
        let index = store::folder(dir.path()).load().unwrap();
        let graph = EntityGraph::build(
            index.passages().as_slice(),
            extract_heuristic(index.passages().as_slice()),
            embedder.as_ref(),
            &GraphOptions::default(),
            &Silent,
        )
        .unwrap();
        store::attach_graph(store::folder(dir.path()).as_ref(), &graph, "heuristic".into()).unwrap();
        let index = Arc::new(store::folder(dir.path()).load().unwrap());
        let (_, mut questions) = load_dataset(&common::demo().join("questions.jsonl")).unwrap();
        questions.truncate(20);
        let data = resolve_gold(&questions, index.passages());
        World { _dir: dir, index, embedder, data }
    })
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
    let passages = &w.index.passages().as_slice()[..10];
    let options = LlmExtractOptions { concurrency: 4, ..Default::default() };
    // Passages without a usable answer (all of them when no call succeeds) keep the
    // LLM-free extraction's triples: the stage's fallback.
    let (_, report) = extract_llm(passages, llm.as_ref(), &options, &Silent)
        .unwrap_or_else(|e| panic!("{fault:?}: OpenIE failed instead of degrading: {e}"));
    let total = report.answered + report.unparsed_passages + report.failed_passages;
    assert_eq!(total, 10, "{fault:?}: {report:?}");
    assert_eq!(report.heuristic_fallback_passages, report.unparsed_passages + report.failed_passages, "{fault:?}");
    if fault.all_bad() {
        assert_eq!((report.answered, report.heuristic_fallback_passages), (0, 10), "{fault:?}: {report:?}");
    }

    // The evaluation: every method completes; fallbacks and failures are counted.
    let mut config = Config::default();
    config.methods.gear.max_steps = 2;
    let engine = Engine::new(store::folder(w.index.location().as_ref()), w.embedder.clone(), config)
        .unwrap()
        .with_llm(llm.clone());
    let methods: Vec<String> = ["bridge_rag", "sync_ge", "gear", "dense", "hybrid"].map(String::from).to_vec();
    let options = EvalOptions::new(vec![5], None, "demo");
    let report = evaluate(&engine, &w.data, &methods, &options, &Silent)
        .unwrap_or_else(|e| panic!("{fault:?}: the evaluation failed instead of degrading: {e}"));
    let report = serde_json::to_value(&report).unwrap();
    check_report(fault, &report, 20);

    if fault == Fault::FinishLength {
        // A cut-off answer is asked once more with twice the budget.
        let budgets = budgets.lock().unwrap();
        let asked: Vec<u64> = budgets.iter().flatten().copied().collect();
        assert!(asked.iter().any(|b| asked.contains(&(b * 2))), "{asked:?}");
    }

    check_cache(fault, cache.path());
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
