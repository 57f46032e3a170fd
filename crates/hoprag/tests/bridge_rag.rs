//! BridgeRAG against the loopback fixture server: each stage, the decision record, the
//! three ablation conditions on one pool, and answers the model gets wrong (malformed SVO
//! JSON, an entity line without "|", judge scores missing or extra, an empty or very long
//! bridge).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::fixture::{Fixture, Reply, Request};
use common::HashEmbedder;
use hoprag::corpus::{LoadedCorpus, Passage, PassageIdx};
use hoprag::embed::{Embedder, TextKind};
use hoprag::index::{Index, VectorIndex, VectorIndexKind};
use hoprag::llm::{CachedLlm, Llm, OpenAiChat};
use hoprag::progress::Silent;
use hoprag::retrieve::bridge_rag::prompts::{ENTITY_SYSTEM, JUDGE_BRIDGE_SYSTEM, JUDGE_PLAIN_SYSTEM, SVO_SYSTEM};
use hoprag::retrieve::BridgeRagParams;
use hoprag::retrieve::{BridgeRag, Condition, DecisionRecord, Query, Retrieval, Retriever};
use hoprag::store;
use hoprag::{Config, Engine};
use serde_json::{json, Value};

const QUESTION: &str = "Who is the spouse of the actor who played the Iron Warden?";
const SVO_ANSWER: &str = r#"{"queries": ["Doran Vale married a journalist", "Doran Vale spouse is Lisette Orm", "Iron Warden actor Doran Vale wife"]}"#;
const ENTITY_ANSWER: &str = "Doran Vale | Lisette Orm";

fn passage(id: &str, title: &str, text: &str) -> Passage {
    Passage::new(id, title, text)
}

/// An invented corpus: the bridge (the film), the second hop (the actor), a passage with
/// the same surface as the question from another chain (the novel), and filler.
fn passages() -> Vec<Passage> {
    vec![
        passage(
            "film",
            "The Iron Warden",
            "The Iron Warden is a 1991 film. The actor who played the Iron Warden is Doran Vale.",
        ),
        passage("vale", "Doran Vale", "Doran Vale is an actor and bodybuilder. He married the journalist Lisette Orm."),
        passage("orm", "Lisette Orm", "Lisette Orm is a journalist and author, spouse of Doran Vale since 1986."),
        passage(
            "novel",
            "The Iron Warden (novel)",
            "The Iron Warden is a novel whose hero, a warden, loses his spouse.",
        ),
        passage("river", "Brisk River", "The Brisk River rises in the Tollan Hills and flows past Alder Mill."),
        passage("mill", "Alder Mill", "Alder Mill is a watermill on the Brisk River built in 1791."),
        passage("bay", "Kestrel Bay", "Kestrel Bay is a fishing village on the Corran coast."),
        passage("hills", "Tollan Hills", "The Tollan Hills are a range of low hills with sheep farms."),
        passage("gym", "Vale Gym", "Vale Gym is a bodybuilder gym opened by an actor in a small town."),
        passage("paper", "The Corran Courier", "The Corran Courier is a newspaper where many a journalist worked."),
        passage("opera", "The Warden's Wife", "The Warden's Wife is an opera about a married prison warden."),
        passage("mine", "Orm Mine", "Orm Mine is a closed copper mine near Kestrel Bay."),
    ]
}

fn completion(text: &str) -> Value {
    json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10},
    })
}

fn message(body: &Value, i: usize) -> String {
    body["messages"][i]["content"].as_str().unwrap_or("").to_string()
}

/// The candidates of a judge prompt, `[i] Title: text` lines: their titles, in order.
fn candidate_titles(user: &str) -> Vec<String> {
    user.lines()
        .filter(|l| l.starts_with('['))
        .map(|l| l.split_once("] ").map_or("", |x| x.1).split(':').next().unwrap_or("").to_string())
        .collect()
}

/// How the fixture's judge answers.
#[derive(Clone, Copy)]
enum Judge {
    /// Every candidate, as `[{"id", "score"}]`.
    Full,
    /// Only the first three candidates (half of a pool of six), plus an unknown id, a
    /// repeated id and a score of 15.
    Partial,
    /// Only the first two candidates: fewer than half of the pool.
    TooFew,
}

/// The bridge-conditioned judge prefers the actor; the 2-way judge the novel, whose
/// surface matches the question (the paper's Figure 1 failure mode).
fn score(title: &str, bridge: bool) -> i64 {
    match (title, bridge) {
        ("Doran Vale", true) => 9,
        ("Lisette Orm", true) => 8,
        ("The Iron Warden", _) => 6,
        ("The Iron Warden (novel)", false) => 9,
        ("Doran Vale", false) => 3,
        _ => 1,
    }
}

fn judge_answer(user: &str, bridge: bool, mode: Judge) -> String {
    let titles = candidate_titles(user);
    let scores: Vec<Value> =
        titles.iter().enumerate().map(|(i, t)| json!({"id": i + 1, "score": score(t, bridge)})).collect();
    match mode {
        Judge::Full => Value::Array(scores).to_string(),
        Judge::TooFew => Value::Array(scores[..2].to_vec()).to_string(),
        Judge::Partial => {
            let mut some = scores[..3].to_vec();
            some.push(json!({"id": 99, "score": 10}));
            some.push(json!({"id": 1, "score": 0}));
            some[1]["score"] = json!(15);
            format!("Here are my scores:\n```json\n{}\n```\nHope that helps.", Value::Array(some))
        }
    }
}

/// A fixture server answering the three BridgeRAG calls with the given SVO and entity
/// answers; every request body is kept.
struct Server {
    fixture: Fixture,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Server {
    fn start(svo: &'static str, entity: &'static str, judge: Judge) -> Server {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let fixture = Fixture::start(move |r: &Request| {
            log.lock().unwrap().push(r.body.clone());
            let (system, user) = (message(&r.body, 0), message(&r.body, 1));
            let text = match system.as_str() {
                SVO_SYSTEM => svo.to_string(),
                ENTITY_SYSTEM => entity.to_string(),
                JUDGE_BRIDGE_SYSTEM => judge_answer(&user, true, judge),
                JUDGE_PLAIN_SYSTEM => judge_answer(&user, false, judge),
                _ => return Reply::status(400, "unknown prompt"),
            };
            Reply::json(completion(&text))
        });
        Server { fixture, seen }
    }

    fn requests(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }

    fn with_system(&self, system: &str) -> Vec<Value> {
        self.requests().into_iter().filter(|b| message(b, 0) == system).collect()
    }

    fn client(&self) -> OpenAiChat {
        self.fixture.chat_client()
    }
}

/// Counts embedding calls and the texts of each.
struct CountingEmbedder {
    inner: HashEmbedder,
    calls: Mutex<Vec<Vec<String>>>,
}

impl Embedder for CountingEmbedder {
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[String], kind: TextKind) -> hoprag::Result<Vec<Vec<f32>>> {
        self.calls.lock().unwrap().push(texts.to_vec());
        self.inner.embed(texts, kind)
    }
}

/// Counts searches.
struct CountingIndex {
    inner: Arc<dyn VectorIndex>,
    searches: AtomicUsize,
}

impl VectorIndex for CountingIndex {
    fn search(&self, query: &[f32], k: usize) -> hoprag::Result<Vec<(PassageIdx, f32)>> {
        self.searches.fetch_add(1, Ordering::SeqCst);
        self.inner.search(query, k)
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn kind(&self) -> VectorIndexKind {
        self.inner.kind()
    }
}

fn build_index(dir: &std::path::Path, passages: Vec<Passage>) -> Arc<Index> {
    let corpus = LoadedCorpus { passages, ..Default::default() };
    common::hash_index(dir, &corpus);
    Arc::new(store::folder(dir).load().unwrap())
}

/// Small pool parameters, so that every cut (SVO-keep, entity top, pool size) bites on
/// the twelve-passage corpus.
fn small_params() -> BridgeRagParams {
    BridgeRagParams { k1: 3, svo_k: 4, svo_keep: 5, entity_k: 3, pool: 6, ..BridgeRagParams::default() }
}

fn engine(index: &Arc<Index>, params: BridgeRagParams, llm: Arc<dyn Llm>) -> Engine {
    let mut config = Config::default();
    config.methods.bridge_rag = params;
    Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), config).unwrap().with_llm(llm)
}

fn record(r: &Retrieval) -> DecisionRecord {
    let step = r.trace.steps.iter().find(|s| s.name == "decision record").expect("a decision record");
    serde_json::from_value(step.detail.clone()).unwrap()
}

fn step<'a>(r: &'a Retrieval, name: &str) -> &'a hoprag::retrieve::TraceStep {
    r.trace.steps.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no step {name}"))
}

fn ids(index: &Index, r: &Retrieval) -> Vec<String> {
    r.hits.iter().map(|h| index.passage(h.passage).id.clone()).collect()
}

/// The test's own percentile rank: the share of the list at or below each score.
fn percentile(xs: &[f64]) -> Vec<f64> {
    xs.iter().map(|x| xs.iter().filter(|y| *y <= x).count() as f64 / xs.len() as f64).collect()
}

#[test]
fn each_stage_and_the_decision_record() {
    let server = Server::start(SVO_ANSWER, ENTITY_ANSWER, Judge::Full);
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), passages());
    let embedder = Arc::new(CountingEmbedder { inner: HashEmbedder::new(), calls: Mutex::new(Vec::new()) });
    let vectors = Arc::new(CountingIndex { inner: index.vector_index(), searches: AtomicUsize::new(0) });
    let params = small_params();
    let method = BridgeRag::new(
        index.clone(),
        vectors.clone(),
        embedder.clone(),
        Arc::new(server.client()),
        params,
        "bridge_rag",
        4,
    );
    assert_eq!(method.concurrency(), Some(4), "eval may run as many queries as the client allows");

    let q = Query::new(QUESTION);
    let r = method.retrieve(&q, 5).unwrap();
    let rec = record(&r);

    // Stage 1: the bridge is the dense top-1.
    let dense_top = index.vector_index().search(&HashEmbedder::new().embed_one(QUESTION, TextKind::Query).unwrap(), 1);
    assert_eq!(index.passage(dense_top.unwrap()[0].0).id, "film");
    assert_eq!(rec.bridge, "film");

    // Three calls, one per stage, each in its own traced step with its cost.
    assert_eq!(server.requests().len(), 3);
    for name in ["svo queries", "entities", "judge"] {
        let llm = step(&r, name).llm.as_ref().unwrap();
        assert_eq!((llm.calls, llm.parse_failures, llm.tokens().prompt_tokens), (1, 0, 100), "{name}");
    }
    let names: Vec<&str> = r.trace.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "embed query",
            "dense",
            "svo queries",
            "entities",
            "embed expansions",
            "expansion search",
            "pool",
            "judge",
            "pit fusion",
            "decision record"
        ]
    );

    // Stages 2 and 3 read the answers; the SVO and entity prompts carry the bridge.
    assert_eq!(rec.svo_queries.len(), 3);
    assert_eq!(rec.svo_queries[1], "Doran Vale spouse is Lisette Orm");
    assert_eq!((rec.e1.as_str(), rec.e2.as_str()), ("Doran Vale", "Lisette Orm"));
    for system in [SVO_SYSTEM, ENTITY_SYSTEM] {
        let body = &server.with_system(system)[0];
        assert!(message(body, 1).contains(QUESTION) && message(body, 1).contains("played the Iron Warden is Doran"));
    }
    assert_eq!(server.with_system(SVO_SYSTEM)[0]["response_format"], json!({"type": "json_object"}));
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);

    // Two embedding calls: the question, then the three queries and two entities at once.
    let calls = embedder.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].len(), 5);
    assert_eq!(&calls[1][3..], ["Doran Vale", "Lisette Orm"]);
    // Six searches: hop 1, three SVO queries, two entities (counted one by one, as this
    // index does not override the one-scan `search_many`).
    assert_eq!(vectors.searches.load(Ordering::SeqCst), 6);

    // Stage 4: recompute the pool from the searches themselves.
    let e = HashEmbedder::new();
    let svo_vecs = e.embed(&rec.svo_queries, TextKind::Query).unwrap();
    let mut svo_best: HashMap<PassageIdx, f32> = HashMap::new();
    for v in &svo_vecs {
        for (p, s) in index.vector_index().search(v, params.svo_k).unwrap() {
            let b = svo_best.entry(p).or_insert(s);
            *b = b.max(s);
        }
    }
    let mut svo_list: Vec<(PassageIdx, f32)> = svo_best.into_iter().collect();
    svo_list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    svo_list.truncate(params.svo_keep);
    let mut candidates: HashMap<PassageIdx, f32> = svo_list.iter().copied().collect();
    for ent in [&rec.e1, &rec.e2] {
        for (p, s) in index.vector_index().search(&e.embed_one(ent, TextKind::Query).unwrap(), params.entity_k).unwrap()
        {
            let b = candidates.entry(p).or_insert(s);
            *b = b.max(s);
        }
    }
    assert!(candidates.len() > params.pool, "the pool cut must bite for this test to mean something");
    let mut expected: Vec<(PassageIdx, f32)> = candidates.into_iter().collect();
    expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    expected.truncate(params.pool);
    let pool_ids: Vec<&str> = rec.pool.iter().map(|c| c.id.as_str()).collect();
    let expected_ids: Vec<&str> = expected.iter().map(|(p, _)| index.passage(*p).id.as_str()).collect();
    assert_eq!(pool_ids, expected_ids);
    for (c, (_, s)) in rec.pool.iter().zip(&expected) {
        assert!((c.pool_score - s).abs() < 1e-6);
    }

    // Every pool member's SVO score is its best cosine to the three queries.
    let by_id: HashMap<&str, PassageIdx> =
        index.passages().iter().enumerate().map(|(i, p)| (p.id.as_str(), i as PassageIdx)).collect();
    for c in &rec.pool {
        let row = index.vectors().row(by_id[c.id.as_str()]);
        let best = svo_vecs.iter().map(|v| hoprag::embed::dot(v, row) as f64).fold(f64::MIN, f64::max);
        assert!((c.svo - best).abs() < 1e-6, "{}: {} vs {best}", c.id, c.svo);
    }

    // Stage 5: the judge saw q, b, e1, e2 and the pool in pool order, and its scores are
    // recorded per candidate.
    let judge = &server.with_system(JUDGE_BRIDGE_SYSTEM)[0];
    let user = message(judge, 1);
    assert!(user.contains("Doran Vale") && user.contains("Lisette Orm") && user.contains("played the Iron Warden is"));
    let titles = candidate_titles(&user);
    let pool_titles: Vec<String> = rec.pool.iter().map(|c| index.passage(by_id[c.id.as_str()]).title.clone()).collect();
    assert_eq!(titles, pool_titles);
    for (c, t) in rec.pool.iter().zip(&titles) {
        assert_eq!(c.judge, Some(score(t, true) as f64));
    }

    // Fusion: f = 0.9 PIT(judge) + 0.1 PIT(svo), recomputed here, and the ranking by f.
    let judge_scores: Vec<f64> = rec.pool.iter().map(|c| c.judge.unwrap()).collect();
    let svo_scores: Vec<f64> = rec.pool.iter().map(|c| c.svo).collect();
    let (pj, ps) = (percentile(&judge_scores), percentile(&svo_scores));
    for (i, c) in rec.pool.iter().enumerate() {
        assert!((c.f - (0.9 * pj[i] + 0.1 * ps[i])).abs() < 1e-9);
    }
    let got = ids(&index, &r);
    assert_eq!(rec.ranking, got);
    assert_eq!(got.len(), 5);
    let f_of: HashMap<&str, f64> = rec.pool.iter().map(|c| (c.id.as_str(), c.f)).collect();
    assert!(got.windows(2).all(|w| f_of[w[0].as_str()] >= f_of[w[1].as_str()]));
    assert_eq!(got[0], "vale", "the judge's 9 wins");
}

#[test]
fn conditions_share_one_pool_and_differ_only_in_the_judge() {
    let server = Server::start(SVO_ANSWER, ENTITY_ANSWER, Judge::Full);
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), passages());
    let cache = tempfile::tempdir().unwrap();
    let llm: Arc<dyn Llm> = Arc::new(CachedLlm::new(server.client(), cache.path()).unwrap());
    let engine = engine(&index, small_params(), llm);
    let q = Query::new(QUESTION);

    let a = engine.retriever("bridge_rag_a").unwrap().retrieve(&q, 5).unwrap();
    assert_eq!(server.requests().len(), 2, "A asks for SVO queries and entities, no judge");
    let b = engine.retriever("bridge_rag_b").unwrap().retrieve(&q, 5).unwrap();
    let c = engine.retriever("bridge_rag").unwrap().retrieve(&q, 5).unwrap();
    // B and C got the SVO and entity answers from the cache: the server saw one of each,
    // and one judge call per judged condition.
    assert_eq!(server.with_system(SVO_SYSTEM).len(), 1);
    assert_eq!(server.with_system(ENTITY_SYSTEM).len(), 1);
    assert_eq!(server.with_system(JUDGE_PLAIN_SYSTEM).len(), 1);
    assert_eq!(server.with_system(JUDGE_BRIDGE_SYSTEM).len(), 1);
    assert_eq!(server.requests().len(), 4);
    assert_eq!(step(&b, "svo queries").llm.as_ref().unwrap().cache_hits, 1);

    let (ra, rb, rc) = (record(&a), record(&b), record(&c));
    assert_eq!((ra.condition, rb.condition, rc.condition), (Condition::A, Condition::B, Condition::C));
    for other in [&rb, &rc] {
        assert_eq!(other.bridge, ra.bridge);
        assert_eq!((&other.e1, &other.e2, &other.svo_queries), (&ra.e1, &ra.e2, &ra.svo_queries));
        let pool = |r: &DecisionRecord| r.pool.iter().map(|p| (p.id.clone(), p.svo, p.pool_score)).collect::<Vec<_>>();
        assert_eq!(pool(other), pool(&ra), "identical pools with identical SVO scores");
    }
    assert!(a.trace.steps.iter().all(|s| s.name != "judge"));
    assert!(ra.pool.iter().all(|p| p.judge.is_none()));

    // A ranks by SVO similarity alone.
    let mut by_svo = ra.pool.clone();
    by_svo.sort_by(|x, y| y.svo.total_cmp(&x.svo));
    assert_eq!(ra.ranking, by_svo.iter().take(5).map(|p| p.id.clone()).collect::<Vec<_>>());

    // The 2-way judge saw neither the bridge nor the entities; the tripartite one saw both.
    let plain = message(&server.with_system(JUDGE_PLAIN_SYSTEM)[0], 1);
    let bridged = message(&server.with_system(JUDGE_BRIDGE_SYSTEM)[0], 1);
    assert!(!plain.contains("bridge") && !plain.contains("Lisette Orm |") && !plain.contains("Entity settled"));
    assert!(bridged.contains("Entity settled by the first passage: Doran Vale"));
    assert_eq!(candidate_titles(&plain), candidate_titles(&bridged), "the same candidates in the same order");

    // The conditioning flips the top-1 from the surface match to the actor.
    assert_eq!(ids(&index, &b)[0], "novel");
    assert_eq!(ids(&index, &c)[0], "vale");

    // The condition is also a setting of `bridge_rag`.
    let mut config = engine.config.clone();
    config.methods.bridge_rag.condition = Condition::B;
    let b2 = engine.with_config(config).retriever("bridge_rag").unwrap().retrieve(&q, 5).unwrap();
    assert_eq!(record(&b2), rb);
    assert_eq!(server.requests().len(), 4, "all from the cache");
}

#[test]
fn malformed_svo_json_falls_back_to_the_question() {
    let server = Server::start("Sure! Queries: {queries: [Doran Vale married", "Doran Vale | Lisette Orm", Judge::Full);
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), passages());
    let engine = engine(&index, small_params(), Arc::new(server.client()));
    let r = engine.retriever("bridge_rag").unwrap().retrieve(&Query::new(QUESTION), 5).unwrap();
    let rec = record(&r);
    assert!(rec.svo_queries.is_empty());
    assert!(rec.warnings.iter().any(|w| w.contains("searched with the question")), "{:?}", rec.warnings);
    let svo = step(&r, "svo queries");
    assert_eq!(svo.llm.as_ref().unwrap().parse_failures, 1, "the failure is counted");
    assert_eq!(svo.detail["fallback"], "question");
    // The pool is still built (from the question and the entities) and judged.
    assert!(!rec.pool.is_empty() && rec.pool.iter().all(|p| p.judge.is_some()));
    assert_eq!(ids(&index, &r).len(), 5);

    // Fenced JSON with prose and a trailing comma parses.
    let fenced = Server::start(
        "Here you go:\n```json\n{\"queries\": [\"Doran Vale married Lisette Orm\", \"Lisette Orm is a journalist\",],}\n```\nDone.",
        ENTITY_ANSWER,
        Judge::Full,
    );
    let engine = self::engine(&index, small_params(), Arc::new(fenced.client()));
    let r = engine.retriever("bridge_rag").unwrap().retrieve(&Query::new(QUESTION), 5).unwrap();
    let rec = record(&r);
    assert_eq!(rec.svo_queries, ["Doran Vale married Lisette Orm", "Lisette Orm is a journalist"]);
    assert_eq!(rec.warnings, ["svo answer held 2 of 3 queries"]);
}

#[test]
fn entity_line_without_a_bar() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), passages());

    let comma = Server::start(SVO_ANSWER, "Doran Vale, Lisette Orm", Judge::Full);
    let r = engine(&index, small_params(), Arc::new(comma.client()))
        .retriever("bridge_rag")
        .unwrap()
        .retrieve(&Query::new(QUESTION), 5)
        .unwrap();
    let rec = record(&r);
    assert_eq!((rec.e1.as_str(), rec.e2.as_str()), ("Doran Vale", "Lisette Orm"));
    assert_eq!(step(&r, "entities").detail["split"], json!({"separator": ","}));
    assert!(rec.warnings.iter().any(|w| w.contains("without \"|\"")), "{:?}", rec.warnings);

    // One entity: used for both searches (searched once), and said so.
    let single = Server::start(SVO_ANSWER, "Doran Vale", Judge::Full);
    let r = engine(&index, small_params(), Arc::new(single.client()))
        .retriever("bridge_rag")
        .unwrap()
        .retrieve(&Query::new(QUESTION), 5)
        .unwrap();
    let rec = record(&r);
    assert_eq!((rec.e1.as_str(), rec.e2.as_str()), ("Doran Vale", "Doran Vale"));
    assert_eq!(step(&r, "expansion search").detail["entity_searches"], 1);
    assert_eq!(step(&r, "embed expansions").detail["texts"], 4, "three queries and one entity");
    assert!(rec.pool.iter().any(|p| p.from == ["e1", "e2"] || p.from == ["svo", "e1", "e2"]));

    // Nothing usable: the bridge's title stands in.
    let empty = Server::start(SVO_ANSWER, "   ", Judge::Full);
    let r = engine(&index, small_params(), Arc::new(empty.client()))
        .retriever("bridge_rag")
        .unwrap()
        .retrieve(&Query::new(QUESTION), 5)
        .unwrap();
    let rec = record(&r);
    assert_eq!((rec.e1.as_str(), rec.e2.as_str()), ("The Iron Warden", "The Iron Warden"));
    assert!(rec.warnings.iter().any(|w| w.contains("bridge title")));
}

#[test]
fn judge_scores_missing_or_extra_are_counted() {
    let server = Server::start(SVO_ANSWER, ENTITY_ANSWER, Judge::Partial);
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), passages());
    let engine = engine(&index, small_params(), Arc::new(server.client()));
    let r = engine.retriever("bridge_rag").unwrap().retrieve(&Query::new(QUESTION), 5).unwrap();
    let rec = record(&r);
    let n = rec.pool.len();
    assert_eq!(n, 6);
    let judge = &step(&r, "judge").detail;
    assert_eq!(judge["missing"], n - 3);
    assert_eq!(judge["extra"], 2, "the unknown id and the repeated one");
    assert_eq!(judge["clamped"], 1, "15 is clamped to 10");
    assert_eq!(step(&r, "judge").llm.as_ref().unwrap().parse_failures, 0, "fenced JSON with prose parses");
    let titles = candidate_titles(&message(&server.with_system(JUDGE_BRIDGE_SYSTEM)[0], 1));
    assert_eq!(rec.pool[0].judge, Some(score(&titles[0], true) as f64));
    assert_eq!(rec.pool[1].judge, Some(10.0));
    assert_eq!(rec.pool[2].judge, Some(score(&titles[2], true) as f64));
    assert!(rec.pool[3..].iter().all(|p| p.judge == Some(0.0)), "missing scores are the lowest");
    assert!(rec.warnings.iter().any(|w| w.contains(&format!("no score for {} of {n}", n - 3))));
    assert!(rec.warnings.iter().any(|w| w.contains("2 scores for no candidate")));
    assert!(!rec.fell_back_to_dense, "half of the pool is scored");
    // The clamped 10 leads the ranking.
    assert_eq!(rec.ranking[0], rec.pool[1].id);

    // Two scores for a pool of six is not the answer asked for: refused and counted, and
    // the query gets the dense ranking.
    let server = Server::start(SVO_ANSWER, ENTITY_ANSWER, Judge::TooFew);
    let too_few = crate::engine(&index, small_params(), Arc::new(server.client()));
    let r = too_few.retriever("bridge_rag").unwrap().retrieve(&Query::new(QUESTION), 5).unwrap();
    let rec = record(&r);
    assert_eq!(step(&r, "judge").llm.as_ref().unwrap().parse_failures, 1);
    assert_eq!(step(&r, "judge").detail["unparsed"], true);
    assert!(rec.raw_answers.contains_key("judge"), "the refused answer is kept in the record");
    assert!(rec.fell_back_to_dense && r.trace.fell_back());
    let dense = too_few.retriever("dense").unwrap().retrieve(&Query::new(QUESTION), 5).unwrap();
    let ids = |r: &Retrieval| r.hits.iter().map(|h| h.passage).collect::<Vec<_>>();
    assert_eq!(ids(&r), ids(&dense));
}

#[test]
fn an_empty_or_very_long_bridge_is_cut_or_flagged_not_an_error() {
    let server = Server::start(SVO_ANSWER, ENTITY_ANSWER, Judge::Full);
    // Repeating the question's words keeps the long passage the dense top-1.
    let long_text = "The actor who played the Iron Warden is the spouse of no one here. ".repeat(150);
    let mut long = passages();
    long[0] = passage("film", "The Iron Warden", &long_text);
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), long);
    let params = BridgeRagParams { bridge_max_chars: 300, ..small_params() };
    let r = engine(&index, params, Arc::new(server.client()))
        .retriever("bridge_rag")
        .unwrap()
        .retrieve(&Query::new(QUESTION), 5)
        .unwrap();
    let rec = record(&r);
    assert_eq!(rec.bridge, "film");
    let total = long_text.chars().count();
    assert!(
        rec.warnings.iter().any(|w| w == &format!("bridge film cut from {total} to 300 characters")),
        "{:?}",
        rec.warnings
    );
    for system in [SVO_SYSTEM, ENTITY_SYSTEM] {
        let user = message(&server.with_system(system)[0], 1);
        assert!(user.contains("played the Iron Warden") && user.len() < 300 + 1000, "{system}: {} chars", user.len());
    }
    // In the judge prompt the bridge is cut to 300 and, as a candidate, to 1000 characters.
    let judge = message(&server.with_system(JUDGE_BRIDGE_SYSTEM)[0], 1);
    assert!(judge.len() < 300 + 1000 + 3000, "{} chars", judge.len());

    // A bridge with a title and no text.
    let server = Server::start(SVO_ANSWER, ENTITY_ANSWER, Judge::Full);
    let mut empty = passages();
    empty[0] = passage("film", "Who is the spouse of the actor who played the Iron Warden", "");
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), empty);
    let r = engine(&index, small_params(), Arc::new(server.client()))
        .retriever("bridge_rag")
        .unwrap()
        .retrieve(&Query::new(QUESTION), 5)
        .unwrap();
    let rec = record(&r);
    assert_eq!(rec.bridge, "film");
    assert!(rec.warnings.iter().any(|w| w == "bridge film has no text"), "{:?}", rec.warnings);
    assert_eq!(ids(&index, &r).len(), 5);
}

#[test]
fn without_a_usable_llm_the_method_says_what_to_set() {
    // No endpoint, and a local model file that is not there: the method fails when it is
    // built, before any question, and says both ways out.
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), passages());
    let mut config = Config::default();
    config.llm.model = String::new();
    config.llm.local = dir.path().join("absent.gguf").to_string_lossy().into_owned();
    let engine = Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), config).unwrap();
    for name in ["bridge_rag", "bridge_rag_a", "bridge_rag_b"] {
        let err = engine.retriever(name).err().expect("the local model is missing").to_string();
        assert!(err.contains(name) && err.contains("absent.gguf") && err.contains("HOPRAG_LLM_MODEL"), "{err}");
    }
}

#[test]
fn tune_grid_searches_alpha_and_reruns_come_from_the_cache() {
    use hoprag::dataset::{resolve_gold, GoldRef, Question};
    use hoprag::eval::tune::{tune, TuneOptions};

    let server = Server::start(SVO_ANSWER, ENTITY_ANSWER, Judge::Full);
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), passages());
    let cache = tempfile::tempdir().unwrap();
    let llm: Arc<dyn Llm> = Arc::new(CachedLlm::new(server.client(), cache.path()).unwrap());
    let engine = engine(&index, small_params(), llm);
    // Variations of the question (the fixture answers every one alike), enough for both
    // splits.
    let questions: Vec<Question> = (0..8)
        .map(|i| Question {
            id: format!("q{i}"),
            text: format!("{QUESTION} (asked {i} times)"),
            gold: vec![GoldRef::Id("film".into()), GoldRef::Id("vale".into())],
            hop_ordered: true,
            qtype: Some("bridge".into()),
            answers: vec![],
        })
        .collect();
    let data = resolve_gold(&questions, index.passages());
    let alphas = [0.05, 0.10, 0.15, 0.20];
    let options = TuneOptions {
        method: "bridge_rag".into(),
        grid: vec![("alpha".into(), alphas.iter().map(|&a| json!(a)).collect())],
        metric: "recall@5".parse().unwrap(),
        ks: vec![5],
        baseline: None,
        tune_share: 0.5,
        dataset: "fixture".into(),
    };
    let report = tune(&engine, &data, &options, &Silent).unwrap();
    assert!(report.tune_n > 0 && report.test_n > 0);
    assert_eq!(report.grid.len(), 4);
    for (point, a) in report.grid.iter().zip(alphas) {
        assert_eq!(point.setting, [("bridge_rag.alpha".to_string(), json!(a))]);
        assert!((0.0..=1.0).contains(&point.tune_score));
    }
    assert_eq!(report.best[0].0, "bridge_rag.alpha");
    // Three calls per question, once: α only moves the fusion, so the grid points after
    // the first are answered by the cache.
    assert_eq!(server.requests().len(), 3 * 8);
}

#[test]
fn auto_llm_runs_its_configured_choice_and_says_so() {
    let server = Server::start(SVO_ANSWER, ENTITY_ANSWER, Judge::Full);
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), passages());
    let mut config = Config::default();
    config.methods.bridge_rag = small_params();
    config.methods.auto_llm.without_graph = "bridge_rag".into();
    let engine = Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), config)
        .unwrap()
        .with_llm(Arc::new(server.client()));
    assert!(engine.uses_llm("auto_llm") && !engine.uses_llm("auto"));
    let q = Query::new(QUESTION);
    let via_auto = engine.retriever("auto_llm").unwrap().retrieve(&q, 5).unwrap();
    let first = &via_auto.trace.steps[0];
    assert_eq!((first.name.as_str(), first.detail["method"].as_str()), ("auto_llm", Some("bridge_rag")));
    assert_eq!(first.detail["because"], "the index has no entity graph");
    let direct = engine.retriever("bridge_rag").unwrap().retrieve(&q, 5).unwrap();
    assert_eq!(ids(&index, &via_auto), ids(&index, &direct));
    let hyphen = engine.retriever("auto-llm").unwrap().retrieve(&q, 5).unwrap();
    assert_eq!((hyphen.trace.steps[0].name.as_str(), ids(&index, &hyphen)), ("auto_llm", ids(&index, &direct)));

    // A choice may carry parameters, and may not be an auto method itself.
    let engine = engine.with_config({
        let mut c = engine.config.clone();
        c.methods.auto_llm.without_graph = "bridge_rag[condition=a]".into();
        c
    });
    let a = engine.retriever("auto_llm").unwrap().retrieve(&q, 5).unwrap();
    assert!(a.trace.steps.iter().all(|s| s.name != "judge"), "condition A asks no judge");
    let looping = engine.with_config({
        let mut c = engine.config.clone();
        c.methods.auto_llm.without_graph = "auto".into();
        c
    });
    let err = looping.retriever("auto_llm").err().expect("auto_llm may not choose auto").to_string();
    assert!(err.contains("auto_llm cannot choose itself or another auto method (auto)"), "{err}");
}
