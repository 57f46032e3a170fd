//! The evaluation harness end to end on a corpus whose BM25 rankings are known by hand.

mod common;

use std::io::Write;
use std::sync::Arc;

use common::HashEmbedder;
use hoprag::corpus::{LoadedCorpus, Passage};
use hoprag::dataset::{load_dataset, resolve_gold};
use hoprag::eval::{evaluate, unmatched_doc, write_runs, EvalOptions};
use hoprag::progress::Silent;
use hoprag::store;
use hoprag::{Config, Engine};

fn p(id: &str, title: &str, text: &str) -> Passage {
    Passage::new(id, title, text)
}

#[test]
fn metrics_tests_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = LoadedCorpus {
        passages: vec![
            p("a", "Alpha", "alpha alpha"),
            p("b", "Beta", "beta words"),
            p("c", "Gamma", "gamma words"),
            p("d", "Delta", "delta words"),
        ],
        ..Default::default()
    };
    common::hash_index(dir.path(), &corpus);
    let engine = Engine::new(store::folder(dir.path()), Arc::new(HashEmbedder::new()), Config::default()).unwrap();
    let mut f = tempfile::Builder::new().suffix(".jsonl").tempfile().unwrap();
    // q1: BM25 finds only Alpha (R@2 = 1/2, last hop Beta missed).
    // q2: BM25 finds Beta and Gamma (R@2 = 1, last hop Gamma found).
    // q3: one gold title is not in the corpus (R@2 = 1/2 at best, Full never); it is
    // the last hop, so LastHop is missed, not unknown.
    // q4: no hop order: LastHop is not defined.
    let ordered = r#""hop_ordered": true"#;
    writeln!(f, r#"{{"id": "q1", "question": "alpha", "gold_titles": ["Alpha", "Beta"], "type": "x", {ordered}}}"#)
        .unwrap();
    writeln!(
        f,
        r#"{{"id": "q2", "question": "beta gamma", "gold_titles": ["Beta", "Gamma"], "type": "x", {ordered}}}"#
    )
    .unwrap();
    writeln!(f, r#"{{"id": "q3", "question": "delta", "gold_titles": ["Delta", "Nowhere"], "type": "y", {ordered}}}"#)
        .unwrap();
    writeln!(f, r#"{{"id": "q4", "question": "gamma", "gold_titles": ["Gamma"], "type": "y"}}"#).unwrap();
    let (_, questions) = load_dataset(f.path()).unwrap();
    let data = resolve_gold(&questions, engine.index.passages());
    assert_eq!(data.unmatched.len(), 1);
    assert_eq!((data.counts.hop_ordered_questions, data.counts.last_hop_matched), (3, 2));
    let options = EvalOptions::new(vec![2, 1], Some("dense".into()), "toy");
    let methods = vec!["bm25".to_string()];
    let report = evaluate(&engine, &data, &methods, &options, &Silent).unwrap();
    assert_eq!(report.ks, vec![1, 2], "sorted");
    assert_eq!(report.n, 4);
    let bm25 = &report.methods["bm25"];
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(bm25.recall["2"], (0.5 + 1.0 + 0.5 + 1.0) / 4.0));
    assert!(close(bm25.full["2"], 2.0 / 4.0));
    assert!(close(bm25.any["2"], 1.0));
    // The last hop is defined for q1-q3 (q3's is not in the index: missed), not q4.
    assert_eq!(bm25.last_hop_n, 3);
    assert!(close(bm25.last_hop["2"], 1.0 / 3.0));
    assert_eq!(bm25.by_type["x"].n, 2);
    assert!(close(bm25.by_type["x"].recall["2"], 0.75));
    let vs = bm25.vs_baseline.as_ref().unwrap();
    assert_eq!(vs.all.wins + vs.all.losses + vs.all.ties, 4);
    assert_eq!(vs.all.last_hop.keys().collect::<Vec<_>>(), ["1", "2"], "McNemar at every cutoff");
    assert_eq!(vs.by_type["x"].n + vs.by_type["y"].n, 4);
    assert_eq!(vs.sign_p_holm, vs.all.sign_p, "one method: Holm changes nothing");
    assert!(report.methods.contains_key("dense"), "the baseline is evaluated too");
    assert!(report.methods["dense"].vs_baseline.is_none());

    let json = serde_json::to_value(&report).unwrap();
    for key in ["recall", "full", "any", "last_hop", "by_type", "per_query", "vs_baseline"] {
        assert!(json["methods"]["bm25"].get(key).is_some(), "missing {key}");
    }
    for key in ["wins", "losses", "ties", "sign_p", "sign_p_greater", "sign_p_holm", "last_hop", "by_type"] {
        assert!(json["methods"]["bm25"]["vs_baseline"].get(key).is_some(), "missing {key}");
    }
    assert_eq!(json["dataset"], "toy");
    assert_eq!(json["n"], 4);
    assert_eq!(json["gold_matching"]["unmatched"], 1);
    let pq = &json["methods"]["bm25"]["per_query"][0];
    assert_eq!(pq["id"], "q1");
    assert_eq!(pq["retrieved"][0], "a");

    let runs = dir.path().join("runs");
    let files = write_runs(&report, &runs).unwrap();
    assert_eq!(files.len(), 3, "bm25, dense, qrels");
    let text = std::fs::read_to_string(runs.join("bm25.trec")).unwrap();
    assert!(!text.contains(" dense"), "one method per file");
    let first = text.lines().next().unwrap();
    let fields: Vec<&str> = first.split(' ').collect();
    assert_eq!(fields.len(), 6);
    assert_eq!((fields[0], fields[1], fields[2], fields[3], fields[5]), ("q1", "Q0", "a", "1", "bm25"));
    let qrels = std::fs::read_to_string(runs.join("qrels.txt")).unwrap();
    assert!(qrels.contains("q2 0 c 1"));
    // The unmatched gold of q3 is in the qrels, so trec_eval's recall counts it missed.
    assert!(qrels.contains(&format!("q3 0 {} 1", unmatched_doc("q3", 0))), "{qrels}");
}
