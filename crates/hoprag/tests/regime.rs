//! RegimeRouter end to end on the demo corpus with the hashing embedder: training with
//! cross-fitting, the saved model, the method's modes and the hop-1 protocol.

mod common;

use std::sync::Arc;

use common::HashEmbedder;
use hoprag::corpus::{load_corpus, CorpusOptions};
use hoprag::dataset::{load_dataset, resolve_gold, ResolvedDataset};
use hoprag::eval::protocol::hop1_correct;
use hoprag::eval::{evaluate_queries, EvalOptions};
use hoprag::progress::Silent;
use hoprag::regime::{train, RegimeModel, TrainingSet};
use hoprag::retrieve::Query;
use hoprag::store;
use hoprag::{Config, Engine};

fn demo_engine(dir: &std::path::Path) -> Engine {
    let corpus = load_corpus(&common::demo().join("corpus.jsonl"), &CorpusOptions::default()).unwrap();
    common::hash_index(dir, &corpus);
    Engine::new(store::folder(dir), Arc::new(HashEmbedder::new()), Config::default()).unwrap()
}

fn demo_questions(engine: &Engine) -> (ResolvedDataset, Vec<Query>) {
    let (_, questions) = load_dataset(&common::demo().join("questions.jsonl")).unwrap();
    let data = resolve_gold(&questions, engine.index.passages());
    let texts: Vec<String> = data.questions.iter().map(|q| q.text.clone()).collect();
    let queries = engine.embed_queries(&texts, &Silent).unwrap();
    (data, queries)
}

#[test]
fn trains_saves_and_routes_with_held_out_fold_models() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine(dir.path());
    let (data, queries) = demo_questions(&engine);
    let set = TrainingSet { name: "demo".into(), index: &engine.index, questions: &data.questions, queries: &queries };
    let model = match train(&[set], engine.embedder.as_ref(), 50, 0.25, 2, &Silent) {
        Ok(m) => m,
        Err(e) => panic!("training on the demo questions: {e}"),
    };
    let r = &model.report;
    assert_eq!(r.questions, data.questions.len());
    assert_eq!(
        r.union_labels + r.q_labels + r.unlabelled_no_next_hop,
        r.questions,
        "every question is labelled or counted as unlabelled: {r:?}"
    );
    // The bridge is the gold hop-1 passage, not whatever dense search put first: every
    // question with a next hop gets a label.
    let chains = data.questions.iter().filter(|q| q.gold.len() >= 2).count();
    assert_eq!(r.union_labels + r.q_labels, chains, "{r:?}");
    assert!(r.full_union_share > 0.0 && r.full_union_share < 1.0, "the router routes both ways: {r:?}");
    assert!(r.union_labels > 0 && r.q_labels > 0, "both labels occur: {r:?}");
    assert!(r.selector_positives > 0 && r.selector_positives < r.selector_examples);
    assert_eq!(model.folds.len(), 2);
    let held: usize = model.folds.iter().map(|f| f.held_out.len()).sum();
    assert_eq!(held, data.questions.len(), "every question is held out of exactly one fold");

    // Saved into the index, the method finds it; training questions use their fold model.
    model.save(&dir.path().join(hoprag::regime::MODEL_FILE)).unwrap();
    let loaded = RegimeModel::resolve(None, Some(dir.path())).unwrap();
    // As JSON reads it back: serde_json's default float parsing may differ from the
    // written value in the last bit (the weights below are compared within 1e-12 too).
    let as_read: hoprag::regime::TrainingReport =
        serde_json::from_str(&serde_json::to_string(&model.report).unwrap()).unwrap();
    assert_eq!(loaded.report, as_read);
    let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-12 * x.abs().max(1.0));
    for (l, m) in [(&loaded.full, &model.full)]
        .into_iter()
        .chain(loaded.folds.iter().map(|f| &f.classifiers).zip(model.folds.iter().map(|f| &f.classifiers)))
    {
        assert!(close(&l.router.weights, &m.router.weights) && close(&l.selector.std, &m.selector.std));
    }
    let q = &queries[0];
    let retrieval = engine.retriever("regime_router").unwrap().retrieve(q, 5).unwrap();
    assert_eq!(retrieval.hits.len(), 5);
    let route = retrieval.trace.steps.iter().find(|s| s.name == "route").expect("a route step");
    assert!(route.detail["model"].as_str().unwrap().starts_with("fold "), "{}", route.detail);
    for key in ["bridge", "b_rel", "features", "p_union"] {
        assert!(!route.detail[key].is_null(), "trace has {key}: {}", route.detail);
    }
    let unseen = engine.retriever("regime_router").unwrap().retrieve(&Query::new("Who painted the harbour?"), 3);
    let unseen = unseen.unwrap();
    let route = unseen.trace.steps.iter().find(|s| s.name == "route").unwrap();
    assert_eq!(route.detail["model"], "full");
}

#[test]
fn a_router_that_sends_every_question_one_way_is_refused() {
    use hoprag::regime::{routes_both_ways, LogisticRegression, RouterFeatures};
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine(dir.path());
    let (data, queries) = demo_questions(&engine);
    let set = TrainingSet { name: "demo".into(), index: &engine.index, questions: &data.questions, queries: &queries };
    let model = train(&[set], engine.embedder.as_ref(), 50, 0.25, 2, &Silent).unwrap();
    let features: Vec<RouterFeatures> = data
        .questions
        .iter()
        .map(|q| {
            RouterFeatures::compute(
                &q.text,
                "It was directed by Mara Quint.",
                "Blue Harbor. It was directed by Mara Quint.",
            )
        })
        .collect();
    // The same classifiers with the intercept pushed to either end route one way only.
    for (intercept, way) in [(-50.0, "Q"), (50.0, "Union")] {
        let mut constant = model.full.clone();
        constant.router = LogisticRegression { intercept, ..constant.router.clone() };
        let err = routes_both_ways(&constant, &features).unwrap_err().to_string();
        assert!(err.contains(way) && err.contains("not saved"), "{err}");
    }
}

#[test]
fn modes_never_always_and_oracle_and_the_hop1_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine(dir.path());
    let (data, queries) = demo_questions(&engine);
    let methods: Vec<String> =
        ["dense", "regime_router[router=never]", "regime_router[router=always]", "regime_router[router=oracle]"]
            .map(String::from)
            .to_vec();
    let report =
        evaluate_queries(&engine, &data, &queries, &methods, &EvalOptions::new(vec![2, 5], None, "demo"), &Silent)
            .unwrap();
    let ranked = |m: &str| report.methods[m].per_query.iter().map(|q| q.retrieved.clone()).collect::<Vec<_>>();
    assert_eq!(ranked("regime_router[router=never]"), ranked("dense"), "Q alone is the dense ranking");
    assert_ne!(ranked("regime_router[router=always]"), ranked("dense"), "Union re-ranks some queries");
    // The oracle takes, per query, whichever action ranks the next hop better: never worse
    // than either at finding it.
    let r5 = |m: &str| report.methods[m].recall["5"];
    assert!(r5("regime_router[router=oracle]") >= r5("dense") - 1e-12);

    // Outside evaluation there is no gold: the oracle refuses to run.
    let e = engine.retriever("regime_router[router=oracle]").unwrap().retrieve(&Query::new("x"), 3).unwrap_err();
    assert!(e.to_string().contains("only evaluation"), "{e}");
    assert!(engine.retriever("regime_router[nope=1]").is_err());

    let (kept, kept_queries, r) = hop1_correct(&engine, &data, &queries).unwrap();
    assert_eq!(r.kept + r.hop1_missed + r.single_gold, r.questions);
    assert_eq!(kept.questions.len(), kept_queries.len());
    for (q, original) in kept.questions.iter().zip(&kept_queries) {
        assert_eq!(q.gold.len(), 1, "only hop 2 is scored");
        assert_eq!(q.last_hop, Some(q.gold[0]));
        assert_eq!(q.text, original.text);
    }
}

#[test]
fn auto_is_dense_without_a_graph_and_cannot_choose_itself() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine(dir.path());
    let q = Query::new("Who founded the company that built Varn Light?");
    let auto = engine.retriever("auto").unwrap().retrieve(&q, 5).unwrap();
    let dense = engine.retriever("dense").unwrap().retrieve(&q, 5).unwrap();
    assert_eq!(auto.hits, dense.hits);
    assert_eq!(auto.trace.steps[0].detail["method"], "dense");
    let e = engine.retriever("auto[without_graph=auto]").err().expect("refused").to_string();
    assert!(e.contains("cannot choose itself"), "{e}");
}
