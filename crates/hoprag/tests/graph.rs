//! Graph build, attach, reload and the graph methods end to end on the demo corpus.

mod common;

use std::sync::Arc;

use common::HashEmbedder;
use hoprag::corpus::{load_corpus, CorpusOptions, LoadedCorpus, Passage};
use hoprag::graph::{extract_heuristic, EdgeKind, EntityGraph, GraphOptions};
use hoprag::index::{BuildOptions, Index};
use hoprag::progress::Silent;
use hoprag::retrieve::Query;
use hoprag::{Config, Engine};

fn demo_index(dir: &std::path::Path) -> Index {
    let corpus = load_corpus(&common::demo().join("corpus.jsonl"), &CorpusOptions::default()).unwrap();
    Index::build(dir, &corpus, vec![], &HashEmbedder::new(), &BuildOptions::default(), &Silent).unwrap();
    Index::open(dir).unwrap()
}

#[test]
fn heuristic_graph_attaches_reloads_and_serves_graph_methods() {
    let dir = tempfile::tempdir().unwrap();
    let index = demo_index(dir.path());
    let extraction = extract_heuristic(index.passages());
    assert!(extraction.triples.len() > index.len(), "several triples per passage");
    let graph =
        EntityGraph::build(index.len(), extraction, &HashEmbedder::new(), &GraphOptions::default(), &Silent).unwrap();
    let s = graph.stats.clone();
    assert_eq!(s.passages, 60);
    assert!(s.entities > 60 && s.relation_edges > 0);
    assert_eq!(graph.edges.iter().filter(|e| e.kind == EdgeKind::Synonym).count(), s.synonym_edges);
    assert!(graph.edges.iter().all(|e| e.a < e.b), "each undirected edge once");
    assert_eq!(graph.entity_vectors.rows(), s.entities);
    assert_eq!(graph.triple_vectors.rows(), s.triples);
    Index::attach_graph(dir.path(), &graph, "heuristic".into()).unwrap();

    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.manifest.graph.as_ref().unwrap().source, "heuristic");
    let reloaded = index.graph().unwrap().unwrap();
    assert_eq!(reloaded.entities, graph.entities);
    assert_eq!(reloaded.entity_vectors.as_flat(), graph.entity_vectors.as_flat());
    assert!(reloaded.entity_id("maud corrigan").is_some());

    let engine = Engine::new(Arc::new(index), Arc::new(HashEmbedder::new()), Config::default()).unwrap();
    // The question names the lighthouse; the graph walks to its builder's passage.
    let q = Query::new("Who founded the company that built Varn Light?");
    let ppr = engine.retriever("ppr").unwrap().retrieve(&q, 10).unwrap();
    let titles: Vec<&str> = ppr.hits.iter().map(|h| engine.index.passage(h.passage).title.as_str()).collect();
    assert!(titles.contains(&"Varn Light"), "{titles:?}");
    assert!(ppr.trace.steps.iter().any(|s| s.name == "link entities"));
    assert!(ppr.trace.steps.iter().any(|s| s.name == "ppr"));
    let pg = engine.retriever("phasegraph").unwrap().retrieve(&q, 5).unwrap();
    assert_eq!(pg.hits.len(), 5);
    assert!(pg.hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(pg.trace.steps.iter().any(|s| s.name == "calibrated fusion"));

    // `auto` runs PhaseGraph on an index with a graph, and says so first in its trace.
    let auto = engine.retriever("auto").unwrap().retrieve(&q, 5).unwrap();
    assert_eq!(auto.hits, pg.hits);
    assert_eq!(auto.trace.steps[0].name, "auto");
    assert_eq!(auto.trace.steps[0].detail["method"], "phasegraph");
}

#[test]
fn graph_methods_without_a_graph_say_how_to_build_one() {
    let dir = tempfile::tempdir().unwrap();
    let index = demo_index(dir.path());
    let engine = Engine::new(Arc::new(index), Arc::new(HashEmbedder::new()), Config::default()).unwrap();
    let err = engine.retriever("ppr").err().expect("no graph").to_string();
    assert!(err.contains("hoprag graph"), "{err}");
}

#[test]
fn adding_passages_keeps_the_graph_for_the_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    let index = demo_index(dir.path());
    let graph = EntityGraph::build(
        index.len(),
        extract_heuristic(index.passages()),
        &HashEmbedder::new(),
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    Index::attach_graph(dir.path(), &graph, "heuristic".into()).unwrap();
    let mut new = LoadedCorpus {
        passages: vec![Passage { id: "z".into(), title: "Zephyr".into(), text: "Zephyr Quarry.".into() }],
        ..Default::default()
    };
    Index::add(dir.path(), &mut new, "more".into(), &HashEmbedder::new(), &Silent).unwrap();
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.len(), 61);
    assert_eq!(index.manifest.graph.as_ref().unwrap().passages, 60);
    let engine = Engine::new(Arc::new(index), Arc::new(HashEmbedder::new()), Config::default()).unwrap();
    let r = engine.retriever("ppr").unwrap().retrieve(&Query::new("Zephyr Quarry"), 5).unwrap();
    assert!(!r.hits.is_empty());
}
