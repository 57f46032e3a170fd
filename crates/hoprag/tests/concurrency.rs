//! Issue 32's hang, set up so that the bad interleaving is the likely one, not a lucky
//! one. A rayon worker computing the walk's passage response waits on its own parallel
//! iteration once another worker steals a piece of it; while it waits it runs other
//! queued work, and here that is more questions that want the same response. Before the
//! fix the response was computed under a mutex, and the worker deadlocked on it.

mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use common::HashEmbedder;
use hoprag::corpus::{LoadedCorpus, Passage};
use hoprag::graph::{extract_heuristic, EntityGraph, GraphOptions};
use hoprag::progress::Silent;
use hoprag::retrieve::Query;
use hoprag::{store, Config, Engine};

/// A corpus whose heuristic graph has thousands of nodes, so that the walk's
/// precomputation runs its power iteration in parallel.
fn chained_corpus(n: usize) -> LoadedCorpus {
    let passages = (0..n)
        .map(|i| {
            let (a, b, c) = (i, (i * 7 + 3) % n, (i * 13 + 5) % n);
            let text = format!(
                "Person{a} Harlow founded Company{b} Works in Town{c} Vale. Company{b} Works built Bridge{a} Span near Town{c} Vale."
            );
            Passage::new(format!("p{i}"), format!("Person{a} Harlow"), text)
        })
        .collect();
    LoadedCorpus { passages, ..Default::default() }
}

#[test]
fn questions_queued_behind_a_cold_passage_response_never_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    common::hash_index(dir.path(), &chained_corpus(3000));
    let index = store::folder(dir.path()).load().unwrap();
    let extraction = extract_heuristic(index.passages().as_slice());
    let graph = EntityGraph::build(
        index.passages().as_slice(),
        extraction,
        &HashEmbedder::new(),
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    store::attach_graph(store::folder(dir.path()).as_ref(), &graph, "heuristic".into()).unwrap();
    for round in 0..3 {
        // A new engine each round: its graph and passage response are cold.
        let engine =
            Arc::new(Engine::new(store::folder(dir.path()), Arc::new(HashEmbedder::new()), Config::default()).unwrap());
        let context = engine.graph().unwrap();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let (done, answered) = mpsc::channel();
        // One worker is busy for a moment while the other starts computing the response;
        // then it is free to steal a piece of that computation, and the questions wait
        // in the pool's queue for whichever worker looks for work next.
        pool.spawn(|| std::thread::sleep(Duration::from_millis(20)));
        for q in 0..16 {
            let (engine, context, done) = (engine.clone(), context.clone(), done.clone());
            pool.spawn(move || {
                let response = context.passage_response(engine.index.vectors(), engine.config.methods.ppr.ppr.damping);
                let _ = done.send((q, response.is_some()));
            });
        }
        for _ in 0..16 {
            let (_, computed) = answered.recv_timeout(Duration::from_secs(120)).unwrap_or_else(|_| {
                panic!("round {round}: questions waiting on the passage response hung (deadlocked rayon workers)")
            });
            assert!(computed, "round {round}: the graph is meant to be small enough for the precomputation");
        }
        // The same through whole queries (the walk, the fact scan and the dense step
        // side by side), on a fresh engine.
        let engine =
            Arc::new(Engine::new(store::folder(dir.path()), Arc::new(HashEmbedder::new()), Config::default()).unwrap());
        let (done, answered) = mpsc::channel();
        pool.spawn(|| std::thread::sleep(Duration::from_millis(20)));
        for q in 0..16 {
            let (engine, done) = (engine.clone(), done.clone());
            pool.spawn(move || {
                let hits = engine
                    .retriever("ppr")
                    .and_then(|r| r.retrieve(&Query::new(format!("Who founded Company{q} Works?")), 5))
                    .map(|r| r.hits.len());
                let _ = done.send((q, hits));
            });
        }
        for _ in 0..16 {
            let (q, hits) = answered.recv_timeout(Duration::from_secs(120)).unwrap_or_else(|_| {
                panic!("round {round}: ppr queries on a cold engine hung (deadlocked rayon workers)")
            });
            assert_eq!(hits.unwrap(), 5, "round {round}, question {q}");
        }
    }
}
