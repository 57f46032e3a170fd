//! Metadata filters on every LLM-free method: each method's ranking is one order of the
//! passages that does not depend on k (made total by the passages it does not rank, in
//! index order), and a filtered query returns the first k passages of that order the
//! filter admits (all of them when fewer match), at 50 %, 10 % and 1 %
//! of the corpus. The corpus is the first passages of `../shared/data/musique-dev`, each
//! document given a random `year` (and a `source` to show other fields change nothing).
//! Without `../shared/data` the test is skipped, unless `HOPRAG_REQUIRE_MODELS` is set.

mod common;

use std::sync::Arc;

use serde_json::{json, Value};

use hoprag::corpus::{LoadedCorpus, Passage};
use hoprag::embed::TextKind;
use hoprag::graph::GraphOptions;
use hoprag::progress::Silent;
use hoprag::retrieve::{GraphKind, Query, Retriever, METHODS};
use hoprag::store::{self, BuildOptions};
use hoprag::{Config, Engine};

const PASSAGES: usize = 400;
const QUESTIONS: usize = 6;
const K: usize = 10;

/// A small deterministic generator (the years must be the same on every run).
fn years(n: usize) -> Vec<i64> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            1900 + (x % 120) as i64
        })
        .collect()
}

/// The methods without an LLM on a heuristic graph: the registry's, not a list of names.
fn methods() -> Vec<&'static str> {
    let sections = Config::default().methods;
    METHODS
        .iter()
        .filter(|m| m.runs_on(GraphKind::Heuristic) && !m.uses_llm(&sections, GraphKind::Heuristic))
        .map(|m| m.name)
        .collect()
}

/// The ranking as passage ids. (Scores are not compared: the split walk behind `ppr`
/// and `auto` sums in another order for a deep ranking than for a short one, so the same
/// passage's score can differ in its last bits between depths; the order does not.)
fn ids(engine: &Engine, hits: &[hoprag::retrieve::Hit]) -> Vec<String> {
    hits.iter().map(|h| engine.index.passage(h.passage).id.clone()).collect()
}

#[test]
fn a_filtered_query_returns_the_first_k_matching_passages_of_the_methods_order() {
    let Some(data) = common::shared_data() else {
        assert!(std::env::var_os("HOPRAG_REQUIRE_MODELS").is_none(), "../shared/data is missing");
        eprintln!("skipped: ../shared/data is not beside the checkout");
        return;
    };
    let corpus: Vec<Value> =
        serde_json::from_slice(&std::fs::read(data.join("musique-dev/corpus.json")).unwrap()).unwrap();
    let years = years(PASSAGES);
    let passages: Vec<Passage> = corpus
        .iter()
        .take(PASSAGES)
        .enumerate()
        .map(|(i, p)| {
            let mut passage = Passage::new(
                format!("p{i:04}"),
                p["title"].as_str().unwrap().to_string(),
                p["text"].as_str().unwrap().to_string(),
            );
            let meta = json!({"year": years[i], "source": if i % 3 == 0 { "wiki" } else { "news" }});
            passage.meta = Some(meta.as_object().unwrap().clone());
            passage
        })
        .collect();
    let embedder = common::minilm_or_hashing();
    let dir = tempfile::tempdir().unwrap();
    let store = store::folder(dir.path());
    let loaded = LoadedCorpus { passages, ..Default::default() };
    store::build_index(
        store.as_ref(),
        &loaded,
        vec!["filters".into()],
        embedder.as_ref(),
        &BuildOptions::default(),
        &Silent,
    )
    .unwrap();
    let index = store.load().unwrap();
    let triples = store::triples_without_llm(&index, None).unwrap();
    store::build_graph(store.as_ref(), &index, triples, embedder.as_ref(), &GraphOptions::default(), &Silent).unwrap();
    let engine = Engine::new(store, embedder.clone(), Config::default()).unwrap();
    let n = engine.index.len();

    let questions: Vec<Value> =
        serde_json::from_slice(&std::fs::read(data.join("musique-dev/questions.json")).unwrap()).unwrap();
    let texts: Vec<String> =
        questions.iter().take(QUESTIONS).map(|q| q["question"].as_str().unwrap().to_string()).collect();
    let vectors = embedder.embed(&texts, TextKind::Query).unwrap();
    let queries: Vec<Query> = texts.into_iter().zip(vectors).map(|(t, v)| Query::with_embedding(t, v)).collect();

    // Year bounds that admit about 50 %, 10 % and 1 % of the passages.
    let mut sorted = years.clone();
    sorted.sort_unstable();
    let below = |share: f64| sorted[((n as f64 * share) as usize).min(n - 1)];
    let filters = [
        ("50 %", json!({"year": {"$lt": below(0.5)}})),
        ("10 %", json!({"$and": [{"year": {"$gte": below(0.3)}}, {"year": {"$lt": below(0.4)}}]})),
        ("1 %", json!({"year": {"$in": [sorted[0]]}, "source": {"$exists": true}})),
    ];
    let methods = methods();
    assert!(methods.len() >= 8, "{methods:?}");
    // Filtered walks that ran split (ranking the admitted passages alone), not full.
    let mut split_walks = 0;
    for (share, filter) in &filters {
        let selection = engine.select(filter).unwrap();
        let matching = selection.count();
        assert!(matching > 0 && matching < n, "{share}: {matching} of {n}");
        let admits = |id: &str| {
            let p = engine.index.passages().iter().position(|p| p.id == id).unwrap();
            selection.contains(p)
        };
        for &method in &methods {
            let retriever: Box<dyn Retriever> = engine.retriever(method).unwrap();
            for q in &queries {
                // The whole order: the method's ranking of every passage it ranks (BM25
                // those sharing a term), then the others in index order.
                let mut whole = ids(&engine, &retriever.retrieve(q, n).unwrap().hits);
                let ranked: std::collections::HashSet<String> = whole.iter().cloned().collect();
                whole.extend(engine.index.passages().iter().map(|p| p.id.clone()).filter(|id| !ranked.contains(id)));
                let top = ids(&engine, &retriever.retrieve(q, K).unwrap().hits);
                assert_eq!(top.len(), K.min(ranked.len()), "{method}: unfiltered, only what it ranks");
                assert_eq!(top, whole[..top.len()], "{method}: the top {K} are the first {K} of the whole order");
                let expected: Vec<_> = whole.iter().filter(|id| admits(id)).take(K).cloned().collect();
                let filtered = Query { filter: Some(selection.clone()), ..q.clone() };
                let retrieval = retriever.retrieve(&filtered, K).unwrap();
                let split = |s: &hoprag::retrieve::TraceStep| s.name == "ppr" && s.detail["split"] == json!(true);
                split_walks += retrieval.trace.steps.iter().filter(|s| split(s)).count();
                let got = ids(&engine, &retrieval.hits);
                assert_eq!(got, expected, "{method} at {share} on {:?}", q.text);
                assert_eq!(got.len(), K.min(matching), "{method} at {share}: k of them whenever k match");
            }
        }
    }
    assert!(split_walks > 0, "no filtered query ran the split walk");
}

#[test]
fn bad_filters_are_errors_that_name_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let passages = vec![Passage {
        meta: Some(json!({"source": "wiki"}).as_object().unwrap().clone()),
        ..Passage::new("a", "A", "Alpha beta gamma.")
    }];
    let store = common::hash_index(dir.path(), &LoadedCorpus { passages, ..Default::default() });
    let engine = Engine::new(store, Arc::new(common::HashEmbedder::new()), Config::default()).unwrap();
    for (filter, expected) in [
        (json!({"year": {"$gte": "soon"}}), "year.$gte"),
        (json!({"year": {"$regex": "x"}}), "$regex"),
        (json!(["year"]), "filter"),
        (json!({"yaer": 1}), "no passage of the index has the field \"yaer\""),
    ] {
        let e = engine.select(&filter).err().unwrap().to_string();
        assert!(e.contains(expected), "{filter}: {e}");
    }
}
