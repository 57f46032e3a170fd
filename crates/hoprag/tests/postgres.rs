//! The PostgreSQL store against a real server: parity with the folder store, the HNSW
//! graph and the lexical index kept in the database, schema upgrades, atomicity
//! (dropped writers, kill -9 of a writing process) and bad input. Edits, readers and
//! concurrent writers: `postgres_edits.rs`; the server: `common/pg.rs`.
#![cfg(feature = "postgres")]

mod common;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::pg::*;
use common::HashEmbedder;
use hoprag::corpus::canonical_order;
use hoprag::corpus::{load_corpus, CorpusOptions, Passage};
use hoprag::dataset::load_dataset;
use hoprag::embed::{Embedder, TextKind};
use hoprag::graph::{extract_heuristic, EntityGraph, GraphOptions};
use hoprag::index::{checksum, HnswParams, VectorIndex, VectorIndexKind};
use hoprag::progress::Silent;
use hoprag::retrieve::Query;
use hoprag::store::edit::Request;
use hoprag::store::postgres::PgStore;
use hoprag::store::{attach_graph, build_index, BuildOptions};
use hoprag::{Config, Engine, PassageIdx};

/// The first `n` passages of a shared benchmark subset and its first `questions`
/// questions, if the shared data is there.
fn slice(dataset: &str, n: usize, questions: usize) -> Option<(Vec<Passage>, Vec<String>)> {
    let data = common::shared_data()?;
    let mut corpus = load_corpus(&data.join(dataset).join("corpus.json"), &CorpusOptions::default()).unwrap();
    corpus.passages.truncate(n);
    let (_, qs) = load_dataset(&data.join(dataset).join("questions.json")).unwrap();
    // Questions, plus passage titles as short queries (many terms shared by few passages).
    let mut queries: Vec<String> = qs.iter().take(questions).map(|q| q.text.clone()).collect();
    queries.extend(corpus.passages.iter().step_by(37).map(|p| p.title.clone()));
    Some((corpus.passages, queries))
}

/// On the first 300 passages of musique-train; with `HOPRAG_PG_PARITY_FULL=1` on the
/// whole musique-train and hotpotqa-train subsets with every question.
#[test]
fn parity_with_the_folder_store_on_a_musique_slice() {
    if std::env::var("HOPRAG_PG_PARITY_FULL").is_ok_and(|v| v == "1") {
        parity("musique-train", usize::MAX, usize::MAX);
        parity("hotpotqa-train", usize::MAX, usize::MAX);
    } else {
        parity("musique-train", 300, 25);
    }
}

fn parity(dataset: &str, n: usize, questions: usize) {
    let schema = format!("t_parity_{}", dataset.replace('-', "_"));
    let Some(url) = fresh(&schema) else { return };
    let Some((passages, queries)) = slice(dataset, n, questions) else { return };
    eprintln!("{dataset}: {} passages, {} queries", passages.len(), queries.len());
    let embedder = Arc::new(HashEmbedder::new());
    let dir = tempfile::tempdir().unwrap();
    let folder = hoprag::store::folder(dir.path());
    let pgs = pg(&url);
    let t = Instant::now();
    build_index(folder.as_ref(), &corpus(passages.clone()), vec![], embedder.as_ref(), &exact(), &Silent).unwrap();
    let folder_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let stats =
        build_index(pgs.as_ref(), &corpus(passages.clone()), vec![], embedder.as_ref(), &exact(), &Silent).unwrap();
    let pg_secs = t.elapsed().as_secs_f64();
    eprintln!(
        "build of {} passages: folder {folder_secs:.3} s, postgres {pg_secs:.3} s (lexical {:.3} s, write {:.3} s, \
         {} bytes)",
        passages.len(),
        stats.lexical_secs,
        stats.write_secs,
        stats.bytes_on_disk
    );
    assert!(stats.bytes_on_disk > 0);

    let (fi, pi) = (folder.load().unwrap(), pgs.load().unwrap());
    assert_eq!(pi.passages(), fi.passages());
    assert_eq!(pi.vectors().as_flat(), fi.vectors().as_flat(), "vectors round-trip bit for bit");
    assert_eq!(pi.manifest.corpus_checksum, checksum(pi.passages()));
    assert_eq!(pi.generation(), pgs.generation().unwrap().unwrap());

    // BM25: the same index on both stores, so the same scores; tantivy's sums may round
    // differently in the last bit where the documents fell into other segments, so
    // hits whose scores tie within that may swap.
    assert!(queries.len() >= 20);
    let (mut swapped, mut compared) = (0, 0);
    for q in &queries {
        let f = fi.lexical().search(q, 10).unwrap();
        let p = pi.lexical().search(q, 10).unwrap();
        assert!(!f.is_empty(), "{q}");
        compared += f.len();
        swapped += assert_same_ranking(&format!("bm25 {q:?}"), &f, &p);
    }
    eprintln!("bm25: {} queries, {compared} hits compared, {swapped} tied hits ordered differently", queries.len());
    assert!(swapped * 20 <= compared, "ties should be rare: {swapped} of {compared}");
    assert!(pi.lexical().search("the of and", 10).unwrap().is_empty(), "stop words only");

    // Dense, exact: identical.
    for q in &queries {
        let v = embed(embedder.as_ref(), q);
        assert_eq!(pi.vector_index().search(&v, 10).unwrap(), fi.vector_index().search(&v, 10).unwrap(), "{q}");
    }

    // The graph: the same heuristic graph attached to both round-trips, and PPR agrees.
    let graph = EntityGraph::build(
        fi.passages().as_slice(),
        extract_heuristic(fi.passages().as_slice()),
        embedder.as_ref(),
        &GraphOptions { synonym_threshold: 0.75, ..Default::default() },
        &Silent,
    )
    .unwrap();
    attach_graph(folder.as_ref(), &graph, "heuristic".into()).unwrap();
    attach_graph(pgs.as_ref(), &graph, "heuristic".into()).unwrap();
    let pi = pgs.load().unwrap();
    let g = pgs.load_graph(&pi, None).unwrap().expect("a graph");
    assert_eq!(g.entities, graph.entities);
    assert_eq!(g.labels, graph.labels);
    assert_eq!(g.passage_entities, graph.passage_entities);
    assert_eq!(g.triples, graph.triples);
    assert_eq!(g.triple_entities, graph.triple_entities);
    let edges = |g: &EntityGraph| g.edges.iter().map(|e| (e.a, e.b, e.weight.to_bits(), e.kind)).collect::<Vec<_>>();
    assert_eq!(edges(&g), edges(&graph));
    assert_eq!(g.entity_vectors.as_flat(), graph.entity_vectors.as_flat());
    assert_eq!(g.triple_facts, graph.triple_facts);
    assert_eq!(g.fact_vectors.as_flat(), graph.fact_vectors.as_flat());
    assert_eq!(g.mentions, graph.mentions);
    assert_eq!(g.mentions.len(), fi.len());
    assert_eq!(g.options, graph.options);
    // The passage seeds' walk, solved when the graph was attached, is stored with it.
    let folder_walk =
        folder.load_graph(&folder.load().unwrap(), None).unwrap().unwrap().walk.expect("solved at attach");
    assert_eq!(g.walk.as_deref(), Some(&*folder_walk), "the stored walk round-trips, equal on both stores");
    // Statistics through JSON: counts exactly, timings to the last bits (serde_json's
    // default float parser may round the last digit differently).
    let (a, b) = (&g.stats, &graph.stats);
    assert_eq!(
        (a.triples, a.entities, a.passages, a.relation_edges, a.synonym_edges, a.passage_entity_edges),
        (b.triples, b.entities, b.passages, b.relation_edges, b.synonym_edges, b.passage_entity_edges)
    );
    assert_eq!((a.components, a.isolated_passages), (b.components, b.isolated_passages));
    assert!((a.build_secs - b.build_secs).abs() <= 1e-12 * b.build_secs.abs().max(1.0));
    assert!((a.embed_secs - b.embed_secs).abs() <= 1e-12 * b.embed_secs.abs().max(1.0));
    assert!(g.entity_id(&graph.entities[0]).is_some(), "the entity lookup is rebuilt");
    eprintln!("graph: {} entities, {} triples, {} edges round-trip", g.entities.len(), g.triples.len(), g.edges.len());

    let fe = Engine::new(folder.clone(), embedder.clone(), Config::default()).unwrap();
    let pe = Engine::new(pgs.clone(), embedder.clone(), Config::default()).unwrap();
    let (fr, pr) = (fe.retriever("ppr").unwrap(), pe.retriever("ppr").unwrap());
    for q in &queries {
        let query = Query::with_embedding(q.clone(), embed(embedder.as_ref(), q));
        let f: Vec<(PassageIdx, f32)> =
            fr.retrieve(&query, 10).unwrap().hits.iter().map(|h| (h.passage, h.score)).collect();
        let p: Vec<(PassageIdx, f32)> =
            pr.retrieve(&query, 10).unwrap().hits.iter().map(|h| (h.passage, h.score)).collect();
        assert_eq!(f, p, "ppr {q}");
    }

    // A graph written before facts were shared (schema version 1) kept each triple's
    // vector in its row: rewritten so, it reads back with each triple its own fact.
    let mut client = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    client
        .batch_execute(&format!(
            "UPDATE {schema}.triples t SET vector = f.vector, fact = NULL FROM {schema}.facts f \
             WHERE f.graph = t.graph AND f.id = t.fact; DELETE FROM {schema}.facts"
        ))
        .unwrap();
    let old = pgs.load_graph(&pgs.load().unwrap(), None).unwrap().expect("a graph");
    assert_eq!(old.fact_count(), graph.triples.len());
    assert!(graph.fact_count() < graph.triples.len(), "the slice repeats some statements");
    for t in 0..graph.triples.len() as u32 {
        assert_eq!(old.triple_vector(t), graph.triple_vector(t), "triple {t}");
    }

    // HNSW: the folder store's usearch graph, built in the process and kept in the
    // database, against exact search on the same vectors.
    let hnsw_schema = format!("{schema}_hnsw");
    let Some(hnsw_url) = fresh(&hnsw_schema) else { return };
    let hs = pg(&hnsw_url);
    let options = BuildOptions { vector_index: VectorIndexKind::Hnsw, hnsw: HnswParams::default(), ..exact() };
    build_index(hs.as_ref(), &corpus(passages.clone()), vec![], embedder.as_ref(), &options, &Silent).unwrap();
    let hi = hs.load().unwrap();
    assert_eq!(hi.vector_index().kind(), VectorIndexKind::Hnsw);
    let (mut found, mut total) = (0, 0);
    for q in &queries {
        let v = embed(embedder.as_ref(), q);
        let truth: HashSet<PassageIdx> = fi.exact_index().search(&v, 10).unwrap().iter().map(|h| h.0).collect();
        let got = hi.vector_index().search(&v, 10).unwrap();
        assert_eq!(got.len(), 10);
        for &(p, s) in &got {
            // The score is the cosine: the exact dot product of the stored vectors
            // (the i8 graph's candidates are re-scored on them).
            let dot: f32 = hi.vectors().row(p).iter().zip(&v).map(|(a, b)| a * b).sum();
            assert!((dot - s).abs() < 1e-4, "{s} vs {dot}");
        }
        found += got.iter().filter(|h| truth.contains(&h.0)).count();
        total += truth.len();
    }
    let recall = found as f64 / total as f64;
    eprintln!("HNSW recall@10 vs exact on the slice: {recall:.3} ({} queries)", queries.len());
    assert!(recall >= 0.9, "HNSW recall@10 {recall}");
    // pgvector's HNSW index is no longer built: only the primary key is there.
    let mut admin = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    let indexes: Vec<String> = admin
        .query("SELECT indexdef FROM pg_indexes WHERE schemaname = $1", &[&hnsw_schema])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(indexes.iter().all(|i| !i.contains("USING hnsw")), "{indexes:#?}");
}

/// The live generation's HNSW slot table as stored in `hnsw_slots` (empty: none).
fn stored_slots(client: &mut postgres::Client) -> Vec<u8> {
    let rows = client
        .query(
            "SELECT h.bytes FROM current c JOIN generations g ON g.id = c.generation \
             JOIN hnsw_slots h ON h.build = g.build AND h.passages = (g.hnsw->>'passages')::int ORDER BY h.part",
            &[],
        )
        .unwrap();
    rows.iter().flat_map(|r| r.get::<_, &[u8]>(0).to_vec()).collect()
}

/// The live generation's `hnsw.slots` in the folder store at `dir` (empty: none).
fn folder_slots(folder: &dyn hoprag::store::Store, dir: &std::path::Path) -> Vec<u8> {
    std::fs::read(dir.join(folder.generation().unwrap().unwrap()).join("hnsw.slots")).unwrap_or_default()
}

/// Writes the live generation of `store` whole ([`hoprag::store::edit::compact`]).
fn compact(store: &dyn hoprag::store::Store) {
    let e: Arc<dyn hoprag::embed::Embedder> = Arc::new(HashEmbedder::new());
    let embedders = hoprag::store::edit::Embedders { passages: e.clone(), graph: e };
    let done = hoprag::store::edit::compact(store, &embedders, &Silent).unwrap();
    assert!(done.generation.is_some(), "{done:?}");
}

/// Builds with one rayon thread: usearch inserts in parallel, so which thread inserts
/// which vector (and so the graph) varies from run to run with more threads; with one,
/// the same vectors in the same order make the same graph, byte for byte.
fn one_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(f)
}

/// The HNSW graph of the PostgreSQL store is the folder store's: built with the same
/// code and parameters (one thread, so deterministic), it is stored byte for byte and
/// returns the same hits, after a build and after an edit. A missing or damaged part is
/// named when the generation is opened.
#[test]
fn the_hnsw_graph_lives_in_the_database() {
    let schema = "t_hnsw";
    let Some(url) = fresh(schema) else { return };
    let store = pg(&url);
    let e = HashEmbedder::new();
    let dir = tempfile::tempdir().unwrap();
    let folder = hoprag::store::folder(dir.path());
    let options = BuildOptions { vector_index: VectorIndexKind::Hnsw, ..exact() };
    let a = corpus(synthetic("a", 0, 400));
    one_thread(|| build_index(folder.as_ref(), &a, vec![], &e, &options, &Silent)).unwrap();
    one_thread(|| build_index(store.as_ref(), &a, vec![], &e, &options, &Silent)).unwrap();
    let mut client = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    client.batch_execute(&format!("SET search_path TO {schema}")).unwrap();
    let stored = |c: &mut postgres::Client| -> Vec<u8> {
        let rows = c
            .query(
                "SELECT h.bytes FROM current c JOIN generations g ON g.id = c.generation \
                 JOIN hnsw_graphs h ON h.build = g.build AND h.passages = (g.hnsw->>'passages')::int ORDER BY h.part",
                &[],
            )
            .unwrap();
        rows.iter().flat_map(|r| r.get::<_, &[u8]>(0).to_vec()).collect()
    };
    let folder_graph =
        || std::fs::read(dir.path().join(folder.generation().unwrap().unwrap()).join("hnsw.usearch")).unwrap();
    let same_bytes = |what: &str, pg: Vec<u8>, folder: Vec<u8>| {
        let first = pg.iter().zip(&folder).position(|(a, b)| a != b);
        assert!(
            pg.len() == folder.len() && first.is_none(),
            "{what}: {} bytes stored, {} in the folder store's file, first difference at {first:?}",
            pg.len(),
            folder.len()
        );
    };
    same_bytes("build", stored(&mut client), folder_graph());

    // (Loaded with one thread: a delta generation's reader inserts the added passages into
    // the base's graph, as the edit did.)
    let same_hits = |what: &str| {
        let (f, p) = one_thread(|| (folder.load().unwrap(), store.load().unwrap()));
        assert_eq!(p.len(), f.len());
        for i in (0..p.len() as u32).step_by(7) {
            let v = f.vectors().row(i).to_vec();
            let (fh, ph) = (f.vector_index().search(&v, 10).unwrap(), p.vector_index().search(&v, 10).unwrap());
            assert_eq!(ph, fh, "{what}: passage {i}'s vector");
            // Breadth below k's default: the graph's walk alone decides.
            assert_eq!(
                p.vector_index().search_with_breadth(&v, 5, 5).unwrap(),
                f.vector_index().search_with_breadth(&v, 5, 5).unwrap(),
                "{what}: passage {i}'s vector, breadth 5"
            );
        }
    };
    same_hits("build");

    // An edit is a delta: its readers update the base's graph in memory, as the folder
    // store's do. Compacted, it is written whole with its graph, the folder store's (the
    // base's updated, with its slot table); the graphs of builds no longer kept are
    // dropped.
    let b = synthetic("b", 0, 120);
    one_thread(|| upsert(folder.as_ref(), b.clone(), "b", &e));
    one_thread(|| upsert(store.as_ref(), b.clone(), "b", &e));
    assert!(store.manifest().unwrap().unwrap().delta.is_some());
    same_hits("edit");
    one_thread(|| compact(folder.as_ref()));
    one_thread(|| compact(store.as_ref()));
    same_bytes("compacted edit", stored(&mut client), folder_graph());
    same_bytes("compacted edit's slot table", stored_slots(&mut client), folder_slots(folder.as_ref(), dir.path()));
    same_hits("compacted edit");
    upsert(store.as_ref(), synthetic("c", 0, 30), "c", &e);
    let graphs: Vec<i32> = client
        .query("SELECT DISTINCT passages FROM hnsw_graphs ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(graphs, vec![520], "the graph of the build the live delta is on");
    let index = store.load().unwrap();
    assert_eq!(index.vector_index().len(), 550);
    let v = index.vectors().row(540).to_vec();
    let top = index.vector_index().search(&v, 1).unwrap()[0];
    assert!(top.1 > 0.9999 && index.vectors().row(top.0) == &v[..], "{top:?}: 540 or a passage with its vector");
    // Attaching an entity graph makes a generation that reads the same HNSW rows.
    let g = EntityGraph::build(
        index.passages().as_slice(),
        extract_heuristic(index.passages().as_slice()),
        &e,
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    attach_graph(store.as_ref(), &g, "heuristic".into()).unwrap();
    assert_eq!(store.load().unwrap().vector_index().search(&v, 1).unwrap()[0], top);
    // Compacted: a whole generation of 550 passages with its graph stored.
    compact(store.as_ref());
    assert_eq!(store.load().unwrap().vector_index().search(&v, 1).unwrap()[0], top);

    // Damage: a generation record with an impossible size, a short part, a part out of
    // sequence, a missing graph.
    let generation = store.generation().unwrap().unwrap();
    let live = "id = (SELECT generation FROM current)";
    let record: String =
        client.query_one(&format!("SELECT hnsw::text FROM generations WHERE {live}"), &[]).unwrap().get(0);
    client
        .execute(
            &format!("UPDATE generations SET hnsw = jsonb_set(hnsw, '{{bytes}}', '{}') WHERE {live}", 1u64 << 62),
            &[],
        )
        .unwrap();
    let err = store.load().err().expect("a wrong size").to_string();
    assert!(err.contains(&format!("the generation says {}", 1u64 << 62)), "{err}");
    client.execute(&format!("UPDATE generations SET hnsw = $1::text::jsonb WHERE {live}"), &[&record]).unwrap();
    store.load().unwrap();
    client.execute("UPDATE hnsw_graphs SET bytes = substring(bytes from 2) WHERE passages = 550", &[]).unwrap();
    let err = store.load().err().expect("a truncated graph").to_string();
    assert!(
        err.contains(&format!("HNSW graph of generation {generation}"))
            && err.contains("hnsw_graphs")
            && err.contains("bytes"),
        "{err}"
    );
    client.execute("UPDATE hnsw_graphs SET part = part + 1 WHERE passages = 550", &[]).unwrap();
    let err = store.load().err().expect("a graph without part 0").to_string();
    assert!(err.contains("lacks part 0") && err.contains("hnsw_graphs"), "{err}");
    client.execute("DELETE FROM hnsw_graphs WHERE passages = 550", &[]).unwrap();
    let err = store.load().err().expect("a missing graph").to_string();
    assert!(err.contains(&format!("generation {generation}")) && err.contains("missing"), "{err}");

    // A graph larger than a part (2 MB) is stored in several, read back in order.
    let schema = "t_hnsw_parts";
    let Some(url) = fresh(schema) else { return };
    let store = pg(&url);
    build_index(store.as_ref(), &corpus(synthetic("p", 0, 20_000)), vec![], &e, &options, &Silent).unwrap();
    client.batch_execute(&format!("SET search_path TO {schema}")).unwrap();
    let parts: i64 = client.query_one("SELECT count(*) FROM hnsw_graphs", &[]).unwrap().get(0);
    assert!(parts >= 2, "{parts} part(s)");
    let index = store.load().unwrap();
    for i in [0u32, 9_999, 19_999] {
        let v = index.vectors().row(i).to_vec();
        let top = index.vector_index().search(&v, 1).unwrap()[0];
        assert!(top.1 > 0.9999 && index.vectors().row(top.0) == &v[..], "{i}: {top:?}");
    }
    client.execute("DELETE FROM hnsw_graphs WHERE part = 1", &[]).unwrap();
    let err = store.load().err().expect("a graph without part 1").to_string();
    assert!(err.contains("lacks part 1") && err.contains("hnsw_graphs"), "{err}");
}

/// An edit of an HNSW index updates the stored graph instead of building one, as on a
/// folder store (the same graph and slot table, byte for byte, with one thread): passages
/// removed and added in the middle of the canonical order are found under their new
/// rows; the base's graph rows stay as they were; a generation built from scratch has
/// no table (slot = row); a damaged table is named, and the edit that meets it commits
/// nothing.
#[test]
fn an_edit_updates_the_stored_hnsw_graph() {
    let schema = "t_hnsw_slots";
    let Some(url) = fresh(schema) else { return };
    let store = pg(&url);
    let e = HashEmbedder::new();
    let dir = tempfile::tempdir().unwrap();
    let folder = hoprag::store::folder(dir.path());
    let options = BuildOptions { vector_index: VectorIndexKind::Hnsw, ..exact() };
    let mut client = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    client.batch_execute(&format!("SET search_path TO {schema}")).unwrap();
    let a = corpus(synthetic("m", 0, 300));
    for s in [folder.as_ref(), store.as_ref()] {
        one_thread(|| build_index(s, &a, vec![], &e, &options, &Silent)).unwrap();
    }
    assert!(stored_slots(&mut client).is_empty(), "a graph built from scratch: slot = row");
    let graph_of = |c: &mut postgres::Client, generation: &str| -> Vec<u8> {
        let sql = "SELECT h.bytes FROM generations g JOIN hnsw_graphs h ON h.build = g.build \
                   AND h.passages = (g.hnsw->>'passages')::int WHERE g.id = $1::text::bigint ORDER BY h.part";
        c.query(sql, &[&generation]).unwrap().iter().flat_map(|r| r.get::<_, &[u8]>(0).to_vec()).collect()
    };
    let g0 = store.generation().unwrap().unwrap();
    let base_graph = graph_of(&mut client, &g0);
    let every_passage_found = |what: &str| {
        let index = store.load().unwrap();
        for i in 0..index.len() as PassageIdx {
            let v = index.vectors().row(i).to_vec();
            let top = index.vector_index().search(&v, 1).unwrap()[0];
            assert!(top.1 > 0.9999 && index.vectors().row(top.0) == &v[..], "{what}: row {i} found {top:?}");
        }
    };
    // Ids sort bytewise: m-150..m-159 and m-15 sit in the middle, m-15a and m-2x among them.
    let gone: Vec<String> = (150..160).map(|i| format!("m-{i}")).chain(["m-15".into()]).collect();
    let mut added = synthetic("n", 1000, 1003);
    for (p, id) in added.iter_mut().zip(["m-15a", "m-2x", "m-0a"]) {
        p.id = id.into();
    }
    for s in [folder.as_ref(), store.as_ref()] {
        one_thread(|| edit_with(s, Request::Delete(gone.clone()), "d", &e)).unwrap();
    }
    // The base is kept beside the new generation, its graph as it was.
    assert!(graph_of(&mut client, &g0) == base_graph, "the base's graph rows are not modified");
    for s in [folder.as_ref(), store.as_ref()] {
        one_thread(|| upsert(s, added.clone(), "n", &e));
        // Both edits are one delta on the build, its graph updated by readers; compacted,
        // the generation is written whole with the updated graph.
        assert!(s.manifest().unwrap().unwrap().delta.is_some());
        one_thread(|| compact(s));
    }
    let slots = stored_slots(&mut client);
    assert!(!slots.is_empty(), "an updated graph stores its table");
    assert!(slots == folder_slots(folder.as_ref(), dir.path()), "the folder store's table");
    let folder_graph = std::fs::read(dir.path().join(folder.generation().unwrap().unwrap()).join("hnsw.usearch"));
    assert!(graph_of(&mut client, &store.generation().unwrap().unwrap()) == folder_graph.unwrap(), "its graph");
    let index = store.load().unwrap();
    assert_eq!(index.len(), 292);
    let row = |id: &str| index.passages().iter().position(|p| p.id == id).unwrap() as PassageIdx;
    for id in ["m-15a", "m-2x", "m-0a", "m-16", "m-299"] {
        let v = index.vectors().row(row(id)).to_vec();
        let top = index.vector_index().search(&v, 1).unwrap()[0];
        assert!(top.0 == row(id) || index.vectors().row(top.0) == &v[..], "{id} at row {}: {top:?}", row(id));
    }
    drop(index);
    every_passage_found("two edits");

    // A damaged table: named when opened; the edit that meets it commits nothing.
    let live = store.generation().unwrap().unwrap();
    client.execute("UPDATE hnsw_slots SET bytes = substring(bytes from 1 for 8)", &[]).unwrap();
    let err = store.load().err().expect("a short table").to_string();
    assert!(err.contains("slot table of generation") && err.contains("hnsw_slots"), "{err}");
    let err = edit_with(store.as_ref(), Request::Delete(vec!["m-7".into()]), "d", &e).unwrap_err().to_string();
    assert!(err.contains("hnsw_slots"), "{err}");
    assert_eq!(store.generation().unwrap().unwrap(), live, "nothing committed");
    // Mended (one part: the table is small), the next edit updates the graph again.
    client.execute("UPDATE hnsw_slots SET bytes = $1", &[&slots]).unwrap();
    edit_with(store.as_ref(), Request::Delete(vec!["m-7".into()]), "d", &e).unwrap();
    every_passage_found("a delta on the mended table");
    compact(store.as_ref());
    assert!(!stored_slots(&mut client).is_empty());
    assert_ne!(stored_slots(&mut client), slots);
    every_passage_found("after the table was mended");
}

/// A schema of version 4 (pgvector's HNSW index, no `hnsw_graphs`, passages without
/// documents or metadata) is upgraded on connect, and its generation still opens and
/// searches through pgvector; its next edit builds the in-process graph of a new build.
#[test]
fn an_old_generation_searches_through_pgvector() {
    let schema = "t_hnsw_old";
    let Some(url) = fresh(schema) else { return };
    let store = pg(&url);
    let e = HashEmbedder::new();
    let options = BuildOptions { vector_index: VectorIndexKind::Hnsw, ..exact() };
    build_index(store.as_ref(), &corpus(synthetic("a", 0, 300)), vec![], &e, &options, &Silent).unwrap();
    let mut client = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    client.batch_execute(&format!("SET search_path TO {schema}, public")).unwrap();
    let build: i64 = client
        .query_one("SELECT g.build FROM current c JOIN generations g ON g.id = c.generation", &[])
        .unwrap()
        .get(0);
    // What version 4 wrote: pgvector's index, neither the table nor the column of
    // version 5, none of the columns and tables of versions 6 to 8.
    client
        .batch_execute(&format!(
            "CREATE INDEX ON passages_b{build} USING hnsw (embedding vector_cosine_ops) \
             WITH (m = 16, ef_construction = 128);
             DROP TABLE hnsw_graphs, hnsw_slots; ALTER TABLE generations DROP COLUMN hnsw;
             ALTER TABLE passages_b{build} DROP COLUMN doc, DROP COLUMN meta;
             DROP TABLE passage_mentions; ALTER TABLE graphs DROP COLUMN mentions, DROP COLUMN options;
             DROP TABLE delta_passages, deltas;
             DELETE FROM hoprag_migrations WHERE version >= 5;"
        ))
        .unwrap();
    drop(store);
    let store = pg(&url);
    let version: i32 = client.query_one("SELECT max(version) FROM hoprag_migrations", &[]).unwrap().get(0);
    assert_eq!(version, 8, "upgraded on connect");
    let old = store.load().unwrap();
    assert!(old.passages().iter().all(|p| p.doc.is_none() && p.meta.is_none()), "the build's rows gained the columns");
    assert_eq!(old.vector_index().kind(), VectorIndexKind::Hnsw);
    let v = old.vectors().row(123).to_vec();
    let top = old.vector_index().search(&v, 10).unwrap();
    assert!(top[0].1 > 0.9999 && old.vectors().row(top[0].0) == &v[..], "{top:?}");
    // The search is SQL on the passages table (and the planner takes pgvector's index).
    let plan: Vec<String> = client
        .query(
            &format!("EXPLAIN SELECT idx FROM passages_b{build} WHERE idx < 300 ORDER BY embedding <=> $1 LIMIT 10"),
            &[&pgvector::Vector::from(v.clone())],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(plan.iter().any(|l| l.contains("Index Scan using") && l.contains("embedding_idx")), "{plan:#?}");
    client.batch_execute(&format!("ALTER TABLE passages_b{build} RENAME TO moved")).unwrap();
    let err = old.vector_index().search(&v, 10).expect_err("the table is gone").to_string();
    assert!(err.contains("HNSW search") && err.contains(&format!("passages_b{build}")), "{err}");
    client.batch_execute(&format!("ALTER TABLE moved RENAME TO passages_b{build}")).unwrap();
    assert_eq!(old.vector_index().search(&v, 10).unwrap(), top);

    // The next edit makes a new build with a graph of all 330 vectors (written whole,
    // not as a delta on a generation pgvector's index serves).
    upsert(store.as_ref(), synthetic("b", 0, 30), "b", &e);
    let stored: Option<String> = client
        .query_one("SELECT g.hnsw::text FROM current c JOIN generations g ON g.id = c.generation", &[])
        .unwrap()
        .get(0);
    assert!(stored.is_some_and(|s| s.contains("\"passages\": 330")), "the new generation names its graph");
    let new = store.load().unwrap();
    assert!(new.manifest.delta.is_none());
    assert_eq!(new.vector_index().len(), 330);
    for i in [5u32, 123, 299, 300, 329] {
        let v = new.vectors().row(i).to_vec();
        let top = new.vector_index().search(&v, 1).unwrap()[0];
        assert!(top.1 > 0.9999 && new.vectors().row(top.0) == &v[..], "{i}: {top:?}");
    }
    // Served in the process: the table's name no longer matters to dense search.
    client.batch_execute(&format!("ALTER TABLE passages_b{build} RENAME TO moved")).unwrap();
    assert_eq!(new.vector_index().search(&v, 10).unwrap().len(), 10);
    client.batch_execute(&format!("ALTER TABLE moved RENAME TO passages_b{build}")).unwrap();
}

#[test]
fn a_graph_with_its_own_embedder_round_trips() {
    let Some(url) = fresh("t_graph_embedder") else { return };
    let store = pg(&url);
    let passages = synthetic("g", 0, 60);
    let e = HashEmbedder::new();
    build_index(store.as_ref(), &corpus(passages.clone()), vec!["g".into()], &e, &exact(), &Silent).unwrap();
    // Entity and fact vectors of another model and dimension than the passages' 64.
    let other = HashEmbedder { id: "mpnet".into(), dim: 48 };
    let graph =
        EntityGraph::build(&passages, extract_heuristic(&passages), &other, &GraphOptions::default(), &Silent).unwrap();
    attach_graph(store.as_ref(), &graph, "heuristic".into()).unwrap();
    let index = store.load().unwrap();
    let own = index.manifest.graph.as_ref().unwrap().embedder.clone().expect("recorded");
    assert_eq!((own.id.as_str(), own.dim), ("mpnet", 48));
    assert_eq!(index.manifest.embedder.dim, 64);
    let g = store.load_graph(&index, None).unwrap().expect("a graph");
    assert_eq!(g.entity_vectors.dim(), 48);
    assert_eq!(g.entity_vectors.as_flat(), graph.entity_vectors.as_flat());
    assert_eq!(g.fact_vectors.as_flat(), graph.fact_vectors.as_flat());
}

/// BM25 on PostgreSQL is tantivy's index, kept in the database: each build stores its
/// own files, and a generation lists them; a generation from before the index was kept
/// there (schema 2, BM25 in SQL) gets one on its next edit; a missing or truncated file
/// is named when the generation is opened.
#[test]
fn the_lexical_index_lives_in_the_database() {
    let Some(url) = fresh("t_lexical") else { return };
    let store = pg(&url);
    let e = HashEmbedder::new();
    build_index(store.as_ref(), &corpus(synthetic("a", 0, 200)), vec![], &e, &exact(), &Silent).unwrap();
    let mut client = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    client.batch_execute("SET search_path TO t_lexical").unwrap();
    // (build, files) of the stored files, and of the files the live generation lists.
    let files = |c: &mut postgres::Client| -> Vec<(i64, i64)> {
        c.query("SELECT build, count(DISTINCT name) FROM lexical_files GROUP BY build ORDER BY build", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    };
    // The live generation's build, the files it lists under that build (its parts' and
    // its ids), and the builds its parts are stored by.
    let listed = |c: &mut postgres::Client| -> (i64, i64, Vec<i64>) {
        let row = c
            .query_one(
                "SELECT g.build, 1 + (SELECT count(*) FROM jsonb_array_elements(g.lexical->'parted'->'parts') p, \
                 jsonb_array_elements(p->'files') f WHERE (p->>'build')::bigint = g.build), \
                 (SELECT array_agg((p->>'build')::bigint) FROM jsonb_array_elements(g.lexical->'parted'->'parts') p) \
                 FROM current c JOIN generations g ON g.id = c.generation",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    let first = files(&mut client);
    assert_eq!(first.len(), 1);
    let (build, count, parts) = listed(&mut client);
    assert_eq!((build, count), first[0], "the generation lists its build's files");
    assert_eq!(parts, [build], "one part, of its own build");
    upsert(store.as_ref(), synthetic("b", 0, 50), "b", &e);
    let second = files(&mut client);
    assert_eq!(second.len(), 2, "the edit's build and the previous one: {second:?}");
    assert_eq!(second[0], first[0]);
    let (build, count, parts) = listed(&mut client);
    assert_eq!((build, count), second[1], "the new generation lists its own build's files");
    assert_eq!(parts, [first[0].0, build], "the edit stored its new part only, and lists the first build's");
    // Two edits more: each lists the parts before it where they are, and the builds
    // storing them stay while it is kept. Read back below by a handle that holds no part
    // open.
    let second_build = build;
    upsert(store.as_ref(), synthetic("d", 0, 10), "d", &e);
    upsert(store.as_ref(), synthetic("e", 0, 10), "e", &e);
    let (build, _, parts) = listed(&mut client);
    assert_eq!(parts.len(), 4);
    assert_eq!((parts[0], parts[1], parts[3]), (first[0].0, second_build, build), "{parts:?}");
    let stored: Vec<i64> = files(&mut client).iter().map(|(b, _)| *b).collect();
    assert!(parts.iter().all(|b| stored.contains(b)), "{parts:?} listed, {stored:?} stored");

    // The same ranking as a folder store of the same 250 passages.
    let dir = tempfile::tempdir().unwrap();
    let folder = hoprag::store::folder(dir.path());
    let mut all = synthetic("a", 0, 200);
    for tag in ["b", "d", "e"] {
        all.extend(synthetic(tag, 0, if tag == "b" { 50 } else { 10 }));
    }
    build_index(folder.as_ref(), &corpus(all.clone()), vec![], &e, &exact(), &Silent).unwrap();
    let (f, p) = (folder.load().unwrap(), pg(&url).load().unwrap());
    for q in ["castle b7", "b7", "river harbour a19", "king song"] {
        assert_same_ranking(q, &f.lexical().search(q, 10).unwrap(), &p.lexical().search(q, 10).unwrap());
    }

    // A generation without lexical files (as schema 2 wrote them; a whole one, so the
    // delta the edit left is compacted first): the next edit builds an index of every
    // passage, and ranks as the folder store does.
    compact(store.as_ref());
    client.execute("UPDATE generations SET lexical = NULL WHERE id = (SELECT generation FROM current)", &[]).unwrap();
    upsert(store.as_ref(), synthetic("c", 0, 30), "c", &e);
    all.extend(synthetic("c", 0, 30));
    build_index(folder.as_ref(), &corpus(all.clone()), vec![], &e, &exact(), &Silent).unwrap();
    let (f, p) = (folder.load().unwrap(), store.load().unwrap());
    assert_eq!(p.lexical().len(), 300);
    for q in ["castle c7", "b7", "a150 river", "c29"] {
        assert_same_ranking(q, &f.lexical().search(q, 10).unwrap(), &p.lexical().search(q, 10).unwrap());
    }

    // A damaged file is named (once no index holds its part open: a process reads a
    // part it holds once).
    drop((f, p));
    let name: String = client
        .query_one(
            "SELECT (p->>'name') || '/' || (f->>'name') FROM current c JOIN generations g ON g.id = c.generation, \
             jsonb_array_elements(g.lexical->'parted'->'parts') p, jsonb_array_elements(p->'files') f \
             ORDER BY (f->>'bytes')::bigint DESC LIMIT 1",
            &[],
        )
        .unwrap()
        .get(0);
    client.execute("UPDATE lexical_files SET bytes = substring(bytes from 2) WHERE name = $1", &[&name]).unwrap();
    let err = store.load().err().expect("a truncated file").to_string();
    assert!(err.contains(&name) && err.contains("bytes"), "{err}");
    client.execute("DELETE FROM lexical_files WHERE name = $1", &[&name]).unwrap();
    let err = store.load().err().expect("a missing file").to_string();
    assert!(err.contains(&name) && err.contains("missing"), "{err}");
}

#[test]
fn a_writer_that_does_not_commit_changes_nothing() {
    let Some(url) = fresh("t_rollback") else { return };
    let store = pg(&url);
    let e = HashEmbedder::new();
    build_index(store.as_ref(), &corpus(synthetic("a", 0, 100)), vec![], &e, &exact(), &Silent).unwrap();
    let g0 = store.generation().unwrap();
    drop(store.writer().unwrap());
    assert_eq!(store.generation().unwrap(), g0);

    // A commit that fails after its rows were copied (the manifest miscounts them)
    // leaves the old generation and no trace of the new build.
    let old = store.load().unwrap();
    let mut manifest = old.manifest.clone();
    manifest.counts.passages = 7;
    let passages = synthetic("z", 0, 50);
    let vectors = hoprag::index::Matrix::from_flat(
        e.dim,
        e.embed(&passages.iter().map(Passage::index_text).collect::<Vec<_>>(), TextKind::Passage).unwrap().concat(),
    );
    let writer = store.writer().unwrap();
    let err = writer
        .commit(hoprag::store::Change::passages(&manifest, &passages.clone().into(), &vectors), &Silent)
        .expect_err("miscounted manifest");
    assert!(err.to_string().contains("counts 7 passages"), "{err}");
    assert_eq!(store.generation().unwrap(), g0);
    let now = store.load().unwrap();
    assert_eq!(now.len(), 100);
    assert_eq!(now.manifest.corpus_checksum, old.manifest.corpus_checksum);
    let mut client = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 't_rollback' AND tablename LIKE 'passages_b%'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "the failed build's tables were rolled back");
    // And the store takes writes again.
    upsert(store.as_ref(), synthetic("c", 0, 10), "c", &e);
    assert_eq!(store.load().unwrap().len(), 110);
}

/// Not a test: the writing process the kill -9 test starts and kills (run with
/// `--ignored --exact writer_process`). It rebuilds the index in
/// `HOPRAG_PG_WRITER_URL` over and over, alternating two corpora, and appends
/// `begin N` / `commit N` lines to `HOPRAG_PG_WRITER_LOG`.
#[test]
#[ignore = "run by kill_9_of_a_writer_leaves_the_old_or_the_new_generation"]
fn writer_process() {
    use std::io::Write;
    let (Ok(url), Ok(log)) = (std::env::var("HOPRAG_PG_WRITER_URL"), std::env::var("HOPRAG_PG_WRITER_LOG")) else {
        return;
    };
    let store = pg(&url);
    let e = HashEmbedder::new();
    let options = BuildOptions { vector_index: VectorIndexKind::Hnsw, ..exact() };
    let mut log = std::fs::OpenOptions::new().append(true).create(true).open(log).unwrap();
    for round in 0.. {
        let c = corpus(kill_corpus(round % 2));
        writeln!(log, "begin {round}").unwrap();
        build_index(store.as_ref(), &c, vec![], &e, &options, &Silent).unwrap();
        writeln!(log, "commit {round}").unwrap();
    }
}

fn kill_corpus(which: usize) -> Vec<Passage> {
    match which {
        0 => synthetic("k", 0, 3000),
        _ => synthetic("l", 0, 2000),
    }
}

#[test]
fn kill_9_of_a_writer_leaves_the_old_or_the_new_generation() {
    let Some(url) = fresh("t_kill") else { return };
    let store = pg(&url);
    let e = HashEmbedder::new();
    build_index(store.as_ref(), &corpus(synthetic("base", 0, 100)), vec![], &e, &exact(), &Silent).unwrap();
    // Of the passages in canonical order, as every generation holds them.
    let known: HashSet<String> = [synthetic("base", 0, 100), kill_corpus(0), kill_corpus(1)]
        .into_iter()
        .map(|mut p| {
            canonical_order(&mut p);
            checksum(&p)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // Each kill lands this long after the writer announced a round: before, during
    // and after the COPY, during the HNSW build, around the commit.
    let delays_ms = [0u64, 30, 90, 200, 400, 700];
    let mut mid_write = 0;
    let mut in_transaction = 0;
    let mut admin = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    for (i, delay) in delays_ms.iter().enumerate() {
        let log = dir.path().join(format!("writer-{i}.log"));
        let mut child = Command::new(&exe)
            .args(["--ignored", "--exact", "writer_process", "--nocapture", "--test-threads=1"])
            .env("HOPRAG_PG_WRITER_URL", format!("{url}&application_name=hoprag_kill_writer"))
            .env("HOPRAG_PG_WRITER_LOG", &log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the writer's round (i % 3) to begin, then give it `delay`.
        let target = format!("begin {}", i % 3);
        let started = Instant::now();
        while !std::fs::read_to_string(&log).unwrap_or_default().contains(&target) {
            assert!(started.elapsed() < Duration::from_secs(120), "the writer never began {target}");
            assert!(child.try_wait().unwrap().is_none(), "the writer exited early");
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(*delay));
        // What the writer's backend is doing at the moment of the kill.
        let doing: Vec<(String, bool)> = admin
            .query(
                "SELECT coalesce(state, '') || ': ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 50), \
                 xact_start IS NOT NULL FROM pg_stat_activity WHERE application_name = 'hoprag_kill_writer'",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        if doing.iter().any(|d| d.1) {
            in_transaction += 1;
        }
        let pid = child.id().to_string();
        assert!(Command::new("kill").args(["-9", &pid]).status().unwrap().success());
        child.wait().unwrap();
        let lines = std::fs::read_to_string(&log).unwrap();
        let last = lines.lines().last().unwrap_or("").to_string();
        if last.starts_with("begin") {
            mid_write += 1;
        }

        let index = store.load().unwrap();
        let sum = checksum(index.passages());
        assert_eq!(index.manifest.corpus_checksum, sum, "kill {i}: the generation is whole");
        assert_eq!(index.manifest.counts.passages, index.len());
        assert_eq!(index.lexical().len(), index.len());
        assert!(known.contains(&sum), "kill {i}: an unknown mix of passages");
        assert_eq!(index.vector_index().search(index.vectors().row(0), 1).unwrap().len(), 1);
        let builds: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 't_kill' AND tablename LIKE 'passages_b%'",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(builds <= 2, "kill {i}: {builds} builds' tables remain");
        eprintln!(
            "kill {i} ({delay} ms into round {}): writer's last line {last:?}, its backend {doing:?}; \
             store holds {} passages (generation {})",
            i % 3,
            index.len(),
            index.generation()
        );
    }
    eprintln!(
        "{mid_write} of {} kills landed inside a write, {in_transaction} with the writer's transaction open",
        delays_ms.len()
    );
    assert!(mid_write >= 3, "only {mid_write} kills interrupted a write");
    assert!(in_transaction >= 3, "only {in_transaction} kills hit an open transaction");
    // The store is still writable: the dead writers' locks went with their connections.
    build_index(store.as_ref(), &corpus(synthetic("end", 0, 10)), vec![], &e, &exact(), &Silent).unwrap();
    assert_eq!(store.load().unwrap().len(), 10);
}

#[test]
fn bad_input_gets_clear_errors() {
    // Nothing listens on port 1.
    let err = PgStore::connect("postgres://postgres:secret@127.0.0.1:1/hoprag").err().unwrap().to_string();
    assert!(err.contains("127.0.0.1:1") && err.contains("cannot connect"), "{err}");
    assert!(!err.contains("secret"), "the password stays out of messages: {err}");
    let err = PgStore::connect("postgres://postgres@127.0.0.1:1/hoprag?schema=Bad-Name").err().unwrap().to_string();
    assert!(err.contains("not a plain lowercase identifier"), "{err}");
    let err = PgStore::connect("postgres://postgres@127.0.0.1:1/hoprag?frobnicate=1").err().unwrap().to_string();
    assert!(err.contains("not a PostgreSQL URL"), "{err}");

    let Some(url) = fresh("t_bad") else { return };
    let store = pg(&url);
    assert!(store.load().err().unwrap().to_string().contains("no index here"));
    let e = HashEmbedder::new();
    build_index(store.as_ref(), &corpus(synthetic("a", 0, 50)), vec![], &e, &exact(), &Silent).unwrap();
    let err =
        build_index(store.as_ref(), &corpus(synthetic("a", 0, 50)), vec![], &e, &BuildOptions::default(), &Silent)
            .err()
            .unwrap()
            .to_string();
    assert!(err.contains("already exists"), "{err}");

    // Another embedder: refused like a folder index.
    let other = HashEmbedder { id: "other".into(), dim: 32 };
    let err = Engine::new(store.clone(), Arc::new(other), Config::default()).err().unwrap().to_string();
    assert!(err.contains("built with embedder minilm (64 dimensions)") && err.contains("other"), "{err}");
    let other = HashEmbedder { id: "other".into(), dim: 32 };
    let err = edit_with(store.as_ref(), Request::Upsert(synthetic("b", 0, 5)), "b", &other).err().unwrap();
    assert!(err.to_string().contains("built with embedder minilm"), "{err}");

    // A schema from a newer hoprag.
    let mut client = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    client.batch_execute("INSERT INTO t_bad.hoprag_migrations (version, name) VALUES (999, 'future')").unwrap();
    let err = PgStore::connect(&url).err().unwrap().to_string();
    assert!(err.contains("newer hoprag") && err.contains("999"), "{err}");
}

/// A database without the `vector` extension, reached by a user who may not create it
/// (pgvector is not a trusted extension): the error says what to install or run.
#[test]
fn a_database_without_pgvector_is_named() {
    let Some(base) = server() else { return };
    let mut client = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    let db_exists: bool = client
        .query_one("SELECT exists(SELECT 1 FROM pg_database WHERE datname = 'hoprag_novector')", &[])
        .unwrap()
        .get(0);
    if !db_exists {
        client.batch_execute("CREATE DATABASE hoprag_novector").unwrap();
    }
    let role_exists: bool =
        client.query_one("SELECT exists(SELECT 1 FROM pg_roles WHERE rolname = 'hoprag_plain')", &[]).unwrap().get(0);
    if !role_exists {
        client.batch_execute("CREATE ROLE hoprag_plain LOGIN").unwrap();
    }
    // The URL of that database as that user (same host and port).
    let mut config: postgres::Config = base.split('?').next().unwrap().parse().unwrap();
    config.user("hoprag_plain").dbname("hoprag_novector");
    let host = match &config.get_hosts()[0] {
        postgres::config::Host::Tcp(h) => h.clone(),
        postgres::config::Host::Unix(p) => p.display().to_string().replace('/', "%2F"),
    };
    let url = format!("postgres://hoprag_plain@{host}:{}/hoprag_novector", config.get_ports()[0]);
    let err = PgStore::connect(&url).err().expect("no pgvector in that database").to_string();
    eprintln!("{err}");
    assert!(err.contains("lacks the `vector` extension") && err.contains("CREATE EXTENSION"), "{err}");
}

/// Connections dropped under a loaded index (as by a database restart or a proxy):
/// the next queries check out fresh ones and answer as before.
#[test]
fn queries_survive_dropped_connections() {
    let Some(url) = fresh("t_dropped") else { return };
    let url = format!("{url}&application_name=hoprag_dropped");
    let store = pg(&url);
    let e = HashEmbedder::new();
    let options = BuildOptions { vector_index: VectorIndexKind::Hnsw, ..exact() };
    build_index(store.as_ref(), &corpus(synthetic("a", 0, 300)), vec![], &e, &options, &Silent).unwrap();
    let index = store.load().unwrap();
    let v = index.vectors().row(5).to_vec();
    let (bm25, dense) =
        (index.lexical().search("castle a5", 10).unwrap(), index.vector_index().search(&v, 10).unwrap());
    let mut admin = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    let killed: i64 = admin
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = 'hoprag_dropped'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(killed >= 1, "the pool held connections");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(index.lexical().search("castle a5", 10).unwrap(), bm25);
    assert_eq!(index.vector_index().search(&v, 10).unwrap(), dense);
    assert!(store.generation().unwrap().is_some());
    // The connection that held the open index's generation went too: the next load
    // connects again and holds it there once more.
    let again = store.load().unwrap();
    assert_eq!(again.generation(), index.generation());
    let held: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
             WHERE l.locktype = 'advisory' AND l.mode = 'ShareLock' AND a.application_name = 'hoprag_dropped'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(held, 1, "the generation is held again");
    eprintln!("{killed} connections terminated; queries answered again");
}
