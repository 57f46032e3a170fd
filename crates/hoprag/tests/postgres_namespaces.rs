//! Namespaces on the PostgreSQL store: a namespace ranks exactly as the same documents in
//! a schema of their own, an edit in one leaves the other as it was, the store lists its
//! namespaces, and a namespace it does not hold is an error that creates nothing.
#![cfg(feature = "postgres")]

mod common;

use std::sync::Arc;

use common::pg::*;
use common::HashEmbedder;
use hoprag::graph::GraphOptions;
use hoprag::progress::Silent;
use hoprag::retrieve::Query;
use hoprag::store::edit::Request;
use hoprag::store::{self, build_index, Namespace, Open, Store};
use hoprag::{Config, Engine, Error};

const METHODS: [&str; 6] = ["bm25", "dense", "hybrid", "ppr", "auto", "phasegraph"];

/// Drops `base` and every namespace schema beside it.
fn fresh_with_namespaces(base: &str) -> Option<String> {
    let url = server()?;
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect to the test server");
    let like = format!("{base}_ns_%");
    for row in client.query("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE $1", &[&like]).unwrap() {
        let schema: String = row.get(0);
        client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).unwrap();
    }
    fresh(base)
}

fn build(store: &dyn Store, passages: Vec<hoprag::corpus::Passage>, embedder: &HashEmbedder) {
    build_index(store, &corpus(passages), vec![], embedder, &exact(), &Silent).unwrap();
    let index = store.load().unwrap();
    let triples = store::triples_without_llm(&index, None).unwrap();
    store::build_graph(store, &index, triples, embedder, &GraphOptions::default(), &Silent).unwrap();
}

/// Every method's ranking (passage ids and score bits) of the queries.
fn rankings(store: Arc<dyn Store>, queries: &[&str]) -> Vec<Vec<(String, u32)>> {
    let engine = Engine::new(store, Arc::new(HashEmbedder::new()), Config::default()).unwrap();
    let mut out = Vec::new();
    for m in METHODS {
        let retriever = engine.retriever(m).unwrap();
        for q in queries {
            let r = retriever.retrieve(&Query::new(*q), 10).unwrap();
            out.push(r.hits.iter().map(|h| (engine.index.passage(h.passage).id.clone(), h.score.to_bits())).collect());
        }
    }
    out
}

#[test]
fn namespaces_isolate_exactly_on_postgres() {
    let Some(url) = fresh_with_namespaces("t_ns_iso") else { return };
    let (Some(sep_a), Some(sep_b)) = (fresh("t_ns_sep_a"), fresh("t_ns_sep_b")) else { return };
    let embedder = HashEmbedder::new();
    let (a, b) = (synthetic("a", 0, 80), synthetic("b", 0, 80));
    let (name_a, name_b) = (Namespace::new("Acme.EU").unwrap(), Namespace::new("2wiki-dev").unwrap());
    let in_a = store::open_in(&url, &name_a, Open::OrCreate).unwrap();
    let in_b = store::open_in(&url, &name_b, Open::OrCreate).unwrap();
    build(in_a.as_ref(), a.clone(), &embedder);
    build(in_b.as_ref(), b.clone(), &embedder);
    build(pg(&sep_a).as_ref(), a, &embedder);
    build(pg(&sep_b).as_ref(), b, &embedder);

    assert_eq!(store::namespaces(&url).unwrap(), [name_b.clone(), name_a.clone()], "listed by name, no default");
    let queries = ["river castle founded", "painter novel a3", "king war song b7", "harbour city"];
    let alone_b = rankings(pg(&sep_b), &queries);
    assert_eq!(
        rankings(store::open_in(&url, &name_a, Open::Existing).unwrap(), &queries),
        rankings(pg(&sep_a), &queries)
    );
    assert_eq!(rankings(store::open_in(&url, &name_b, Open::Existing).unwrap(), &queries), alone_b);

    // An edit in one namespace: the other ranks as before, to the bit.
    let ids: Vec<String> = (0..10).map(|i| format!("a-{i}")).collect();
    edit_with(in_a.as_ref(), Request::Delete(ids), "test", &embedder).unwrap();
    assert_eq!(in_a.load().unwrap().len(), 70);
    assert_eq!(rankings(store::open_in(&url, &name_b, Open::Existing).unwrap(), &queries), alone_b);

    // A namespace the store does not hold: an error naming it, and no schema made.
    let missing = Namespace::new("zz").unwrap();
    match store::open_in(&url, &missing, Open::Existing) {
        Err(Error::NoNamespace { namespace, .. }) => assert_eq!(namespace, "zz"),
        other => panic!("expected NoNamespace, got {:?}", other.map(|s| s.location().to_string())),
    }
    assert_eq!(store::namespaces(&url).unwrap().len(), 2);
}
