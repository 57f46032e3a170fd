//! Edits on the PostgreSQL store against a real server (`common/pg.rs`): the same index
//! as the same edits make on a folder store, readers on two handles (two servers) that
//! keep their generation while the other edits, and concurrent edits that all land
//! (checked on a folder too, which needs no server).
#![cfg(feature = "postgres")]

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::pg::*;
use common::HashEmbedder;
use hoprag::corpus::Passage;
use hoprag::embed::Embedder;
use hoprag::graph::{extract_heuristic, EntityGraph, GraphOptions};
use hoprag::index::{checksum, VectorIndexKind};
use hoprag::progress::Silent;
use hoprag::retrieve::{GraphKind, Query, METHODS};
use hoprag::store::edit::Request;
use hoprag::store::{attach_graph, build_index, BuildOptions, Store};
use hoprag::{Config, Engine, PassageIdx};

/// `docs` documents of three passages each, then `singles` passages of their own; every
/// other passage has metadata, its keys in no sorted order (`json` keeps them as given).
fn documents(tag: &str, docs: usize, singles: usize) -> Vec<Passage> {
    synthetic(tag, 0, docs * 3 + singles)
        .into_iter()
        .enumerate()
        .map(|(i, mut p)| {
            if i < docs * 3 {
                p.id = format!("{tag}-doc{}#{}", i / 3, i % 3);
                p.doc = Some(format!("{tag}-doc{}", i / 3));
            }
            if i % 2 == 0 {
                let meta = serde_json::json!({
                    "url": format!("https://example.org/{tag}/{i}"),
                    "n": i,
                    // serde_json's default parser reads some floats back a bit off
                    // (7.6000000000000005 as 7.6): these read back exactly.
                    "score": i as f64 / 4.0,
                    "tags": ["x", {"deep": [1, 2.5, -0.0]}],
                    "author": null,
                });
                p.meta = meta.as_object().cloned();
            }
            p
        })
        .collect()
}

/// The index in `pg` is the one in `folder`: passages with their documents and metadata
/// (the metadata's JSON text too), vectors bit for bit, manifest, lexical and dense
/// rankings, and the graph's every stored structure with its walk.
fn assert_same_index(what: &str, folder: &dyn Store, pg: &dyn Store, e: &HashEmbedder) {
    let (f, p) = (folder.load().unwrap(), pg.load().unwrap());
    assert_eq!(p.passages(), f.passages(), "{what}");
    let meta_text = |i: &hoprag::index::Index| -> Vec<String> {
        i.passages().iter().map(|p| serde_json::to_string(&p.meta).unwrap()).collect()
    };
    assert_eq!(meta_text(&p), meta_text(&f), "{what}: metadata as written");
    assert_eq!(p.vectors().as_flat(), f.vectors().as_flat(), "{what}: vectors");
    assert_eq!(p.manifest.corpus_checksum, f.manifest.corpus_checksum, "{what}");
    assert_eq!(p.manifest.corpus_checksum, checksum(p.passages()), "{what}");
    assert_eq!(p.manifest.counts.passages, p.len(), "{what}");
    assert_eq!(p.manifest.sources, f.manifest.sources, "{what}");
    for q in ["castle river", "doc3 harbour", "king song war", "q-2 painter"] {
        let (fl, pl) = (f.lexical().search(q, 10).unwrap(), p.lexical().search(q, 10).unwrap());
        assert_same_ranking(&format!("{what}: bm25 {q:?}"), &fl, &pl);
        let v = embed(e, q);
        assert_eq!(p.vector_index().search(&v, 10).unwrap(), f.vector_index().search(&v, 10).unwrap(), "{what}: {q}");
    }
    // (An edit's generation is a delta: its graph is derived with the graph's embedder.)
    let (fg, pg_graph) = (folder.load_graph(&f, Some(e)).unwrap(), pg.load_graph(&p, Some(e)).unwrap());
    let (Some(fg), Some(g)) = (fg, pg_graph) else { panic!("{what}: a graph on both stores") };
    assert_eq!(g.entities, fg.entities, "{what}");
    assert_eq!(g.labels, fg.labels, "{what}");
    assert_eq!(g.passage_entities, fg.passage_entities, "{what}");
    assert_eq!(g.triples, fg.triples, "{what}");
    assert_eq!(g.triple_entities, fg.triple_entities, "{what}");
    assert_eq!(g.triple_facts, fg.triple_facts, "{what}");
    assert_eq!(g.mentions, fg.mentions, "{what}");
    assert_eq!(g.options, fg.options, "{what}");
    let edges = |g: &EntityGraph| g.edges.iter().map(|e| (e.a, e.b, e.weight.to_bits(), e.kind)).collect::<Vec<_>>();
    assert_eq!(edges(&g), edges(&fg), "{what}");
    assert_eq!(g.entity_vectors.as_flat(), fg.entity_vectors.as_flat(), "{what}");
    assert_eq!(g.fact_vectors.as_flat(), fg.fact_vectors.as_flat(), "{what}");
    assert!(g.walk.is_some(), "{what}: the edit solved the walk");
    assert_eq!(g.walk, fg.walk, "{what}: walk");
    let (a, b) = (&p.manifest.graph.as_ref().unwrap(), &f.manifest.graph.as_ref().unwrap());
    assert_eq!((&a.source, a.passages), (&b.source, b.passages), "{what}");
    assert_eq!((a.stats.entities, a.stats.triples), (b.stats.entities, b.stats.triples), "{what}");
}

/// An edit on PostgreSQL makes the index the same edit makes on a folder store:
/// upserts (a document replaced, a passage changed, new ones), a deletion and a sync,
/// over passages with documents and metadata and a graph built with options of its own,
/// which the edits keep (the graph's mentions and options are stored, so nothing but the
/// new passages is extracted again).
#[test]
fn an_edit_on_postgres_is_the_edit_on_a_folder() {
    let Some(url) = fresh("t_edit_parity") else { return };
    let pgs = pg(&url);
    let dir = tempfile::tempdir().unwrap();
    let folder = hoprag::store::folder(dir.path());
    let e = HashEmbedder::new();
    let passages = documents("p", 20, 30);
    assert!(passages.iter().any(|p| p.doc.is_some()) && passages.iter().any(|p| p.meta.is_some()));
    let options = GraphOptions { synonym_threshold: 0.7, synonym_neighbours: 20, ..Default::default() };
    for store in [folder.as_ref(), pgs.as_ref()] {
        build_index(store, &corpus(passages.clone()), vec!["p".into()], &e, &exact(), &Silent).unwrap();
        let index = store.load().unwrap();
        let graph = EntityGraph::build(
            index.passages().as_slice(),
            extract_heuristic(index.passages().as_slice()),
            &e,
            &options,
            &Silent,
        )
        .unwrap();
        drop(index);
        attach_graph(store, &graph, "heuristic".into()).unwrap();
    }
    assert_same_index("build", folder.as_ref(), pgs.as_ref(), &e);
    let stored = pgs.load().unwrap();
    assert_eq!(stored.passages().iter().filter(|p| p.doc.as_deref() == Some("p-doc3")).count(), 3);
    let g = pgs.load_graph(&stored, None).unwrap().unwrap();
    assert_eq!(g.options, options, "the graph's options are stored");
    assert_eq!(g.mentions.len(), stored.len(), "and its mentions");
    drop((g, stored));

    // Document p-doc3 replaced by two passages, a single passage changed, one new
    // document of its own, one passage again unchanged.
    let mut meta = serde_json::Map::new();
    meta.insert("z".into(), serde_json::json!("last key first"));
    meta.insert("a".into(), serde_json::json!(1e-7));
    let mut rows = vec![
        Passage {
            doc: Some("p-doc3".into()),
            meta: Some(meta.clone()),
            ..Passage::new("p-doc3#n0", "New three", "A river castle, new.")
        },
        Passage { doc: Some("p-doc3".into()), ..Passage::new("p-doc3#n1", "New three b", "A harbour song, new.") },
        Passage { meta: Some(meta), ..Passage::new("q-2", "Quarry two", "Quarry two painter supplied the bridge.") },
    ];
    let single = passages[70].clone();
    assert!(single.doc.is_none());
    rows.push(Passage { text: format!("{} Changed.", single.text), ..single.clone() });
    rows.push(passages[71].clone());
    let deleted = passages[72].id.clone();
    let mut synced: Option<Vec<Passage>> = None;
    let requests = [
        ("upsert", Request::Upsert(rows)),
        ("delete", Request::Delete(vec!["p-doc5".into(), deleted])),
        ("sync", Request::Sync { passages: Vec::new(), allow_empty: false }),
    ];
    for (what, request) in requests {
        // The sync: what the index holds less two documents, plus a new one.
        let request = match request {
            Request::Sync { .. } => {
                let mut passages: Vec<Passage> = folder
                    .load()
                    .unwrap()
                    .passages()
                    .iter()
                    .filter(|p| !matches!(p.doc.as_deref(), Some("p-doc7" | "p-doc8")))
                    .cloned()
                    .collect();
                passages.push(Passage::new("r-1", "Riverside", "Riverside mountain novel."));
                synced = Some(passages.clone());
                Request::Sync { passages, allow_empty: false }
            }
            r => r,
        };
        let on_folder = edit_with(folder.as_ref(), request.clone(), what, &e).unwrap();
        let on_pg = edit_with(pgs.as_ref(), request, what, &e).unwrap();
        assert_eq!(on_pg.counts, on_folder.counts, "{what}");
        assert!(on_pg.counts.passages_added + on_pg.counts.passages_removed > 0, "{what}: a change");
        assert_eq!(on_pg.work.passages_embedded, on_folder.work.passages_embedded, "{what}");
        // Written as deltas on both stores: nothing is extracted by the edit, its readers
        // derive the graph from the stored one (the kept passages' triples and mentions
        // come from it), the same on both (below).
        assert!(on_pg.generation.is_some() && pgs.manifest().unwrap().unwrap().delta.is_some(), "{what}");
        assert_eq!(on_pg.work.passages_extracted, 0, "{what}");
        assert_eq!(on_pg.work.passages_extracted, on_folder.work.passages_extracted, "{what}");
        assert_same_index(what, folder.as_ref(), pgs.as_ref(), &e);
    }
    let index = pgs.load().unwrap();
    assert!(index.passages().iter().any(|p| p.id == "r-1"));
    assert!(!index.passages().iter().any(|p| p.document() == "p-doc5" || p.document() == "p-doc7"));
    assert_eq!(index.len(), synced.unwrap().len());
    assert_eq!(pgs.load_graph(&index, Some(&e)).unwrap().unwrap().options, options, "kept through every edit");
}

/// Two handles on one database, as two servers: one opens generation N (its graph not
/// read yet) and keeps answering, graph methods included, while the other publishes three
/// edits back to back. N is kept for as long as its reader has it open (the generations
/// between are dropped), and the first write after the reader is gone drops it.
#[test]
fn a_reader_keeps_its_generation_while_another_server_edits() {
    let schema = "t_two_servers";
    let Some(url) = fresh(schema) else { return };
    let writer = pg(&url);
    let reader_store = pg(&format!("{url}&application_name=hoprag_two_servers_reader"));
    let e = HashEmbedder::new();
    let embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder::new());
    let dir = tempfile::tempdir().unwrap();
    let folder = hoprag::store::folder(dir.path());
    let passages = synthetic("a", 0, 150);
    build_index(writer.as_ref(), &corpus(passages.clone()), vec![], &e, &exact(), &Silent).unwrap();
    build_index(folder.as_ref(), &corpus(passages), vec![], &e, &exact(), &Silent).unwrap();
    let index = writer.load().unwrap();
    let graph = EntityGraph::build(
        index.passages().as_slice(),
        extract_heuristic(index.passages().as_slice()),
        &e,
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    drop(index);
    attach_graph(writer.as_ref(), &graph, "heuristic".into()).unwrap();
    attach_graph(folder.as_ref(), &graph, "heuristic".into()).unwrap();

    // The reading server: an index and an engine over generation N; neither has read
    // the graph. Beside it, an engine over the same generation of a folder store.
    let reader = reader_store.load().unwrap();
    let engine = Engine::new(reader_store.clone(), embedder.clone(), Config::default()).unwrap();
    let folder_engine = Engine::new(folder.clone(), embedder.clone(), Config::default()).unwrap();
    let n: i64 = reader.generation().parse().unwrap();
    let queries = ["castle river a7", "king song a42", "harbour painter a101"];
    type Hits = Vec<(PassageIdx, f32)>;
    let answers = |index: &hoprag::index::Index| -> Vec<(Hits, Hits)> {
        queries
            .iter()
            .map(|q| (index.lexical().search(q, 10).unwrap(), index.vector_index().search(&embed(&e, q), 10).unwrap()))
            .collect()
    };
    let before = answers(&reader);
    let mut admin = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    admin.batch_execute(&format!("SET search_path TO {schema}")).unwrap();
    let generations = |c: &mut postgres::Client| -> Vec<i64> {
        c.query("SELECT id FROM generations ORDER BY id", &[]).unwrap().iter().map(|r| r.get(0)).collect()
    };
    let tables = |c: &mut postgres::Client| -> i64 {
        c.query_one("SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'passages_b%'", &[&schema])
            .unwrap()
            .get(0)
    };
    let graphs = |c: &mut postgres::Client| -> i64 { c.query_one("SELECT count(*) FROM graphs", &[]).unwrap().get(0) };
    let reader_locks = |c: &mut postgres::Client| -> i64 {
        c.query_one(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
             WHERE l.locktype = 'advisory' AND l.mode = 'ShareLock' AND a.application_name = $1",
            &[&"hoprag_two_servers_reader"],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(reader_locks(&mut admin), 1, "the reader holds generation {n}");

    let mut published = Vec::new();
    for i in 0..3 {
        let more = synthetic("b", i * 10, (i + 1) * 10);
        upsert(folder.as_ref(), more.clone(), &format!("b{i}"), &e);
        let report = upsert(writer.as_ref(), more, &format!("b{i}"), &e);
        published.push(report.generation.unwrap().parse::<i64>().unwrap());
        assert_eq!(answers(&reader), before, "the reader answers as before edit {i}");
    }
    // Kept: the reader's generation, the base of the last edit and the live one; the
    // generation between went at the last edit, with its build. The edits are deltas on
    // N: they keep N's build (its one passages table) and graph, and write neither.
    assert_eq!(generations(&mut admin), vec![n, published[1], published[2]]);
    assert_eq!(tables(&mut admin), 1);
    assert_eq!(graphs(&mut admin), 1);

    // The graph, read now on first use, is generation N's, and graph methods answer on
    // it as a folder store of the same generation does.
    let g = reader_store.load_graph(&reader, None).unwrap().expect("generation N's graph");
    assert_eq!((g.passage_entities.len(), g.entities.clone()), (reader.len(), graph.entities.clone()));
    assert_eq!(g.mentions, graph.mentions);
    let (ppr, folder_ppr) = (engine.retriever("ppr").unwrap(), folder_engine.retriever("ppr").unwrap());
    for q in queries {
        let query = Query::with_embedding(q.to_string(), embed(&e, q));
        let hits = |r: &dyn hoprag::retrieve::Retriever| -> Vec<(PassageIdx, f32)> {
            r.retrieve(&query, 10).unwrap().hits.iter().map(|h| (h.passage, h.score)).collect()
        };
        let got = hits(ppr.as_ref());
        assert_eq!(got.len(), 10, "{q}");
        assert_eq!(got, hits(folder_ppr.as_ref()), "ppr {q}");
    }
    assert_eq!(engine.index.generation(), n.to_string());

    // The reading server's handle also opens the live generation beside N: two holds on
    // its one connection for them.
    let live = reader_store.load().unwrap();
    assert_eq!(live.generation(), published[2].to_string());
    assert_eq!(reader_locks(&mut admin), 2);
    drop(live);
    assert_eq!(reader_locks(&mut admin), 1);

    // Once the reader (and the engine over the same generation) is gone, the next write
    // drops N: old generations do not pile up.
    drop((reader, engine, ppr, g));
    assert_eq!(reader_locks(&mut admin), 0);
    let last = upsert(writer.as_ref(), synthetic("c", 0, 5), "c", &e).generation.unwrap().parse::<i64>().unwrap();
    assert_eq!(generations(&mut admin), vec![published[2], last]);
    // N's generation is gone; its build and graph stay, the base of both deltas kept.
    assert_eq!(tables(&mut admin), 1);
    assert_eq!(graphs(&mut admin), 1);
}

#[test]
fn an_edit_is_seen_by_new_readers_only() {
    let Some(url) = fresh("t_edit_readers") else { return };
    let store = pg(&url);
    let e = HashEmbedder::new();
    build_index(store.as_ref(), &corpus(synthetic("a", 0, 200)), vec!["a".into()], &e, &exact(), &Silent).unwrap();
    let before = store.load().unwrap();
    let g0 = store.generation().unwrap().unwrap();
    let hits_before = before.lexical().search("castle b7", 20).unwrap();
    let report = upsert(store.as_ref(), synthetic("b", 0, 50), "b", &e);
    assert_eq!((report.counts.passages_added, report.counts.passages_total), (50, 250));
    assert_eq!(report.work.passages_embedded, 50, "the stored vectors are reused");
    let g1 = store.generation().unwrap().unwrap();
    assert_ne!(g0, g1);
    assert_eq!(report.generation.as_deref(), Some(g1.as_str()));

    let after = store.load().unwrap();
    assert_eq!(after.len(), 250);
    // Canonical order: by id, and every a-… sorts before every b-….
    assert_eq!(after.passage(200).id, "b-0");
    assert!(after.passages().as_slice().windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(after.manifest.corpus_checksum, checksum(after.passages()));
    assert_eq!(after.manifest.sources, vec!["a".to_string(), "b".to_string()]);
    let b7 = after.passages().iter().position(|p| p.id == "b-7").unwrap() as PassageIdx;
    let hit = after.lexical().search("b7", 5).unwrap();
    assert_eq!(hit.first().map(|h| h.0), Some(b7), "{hit:?}");
    let v = after.vectors().row(230).to_vec();
    assert_eq!(after.vector_index().search(&v, 1).unwrap()[0].0, 230);

    // The index opened before the edit still reads its 200 passages, and ranks as it
    // did (its document count and average length are its own).
    assert_eq!(before.len(), 200);
    assert_eq!(before.lexical().len(), 200);
    assert!(before.lexical().search("b7", 5).unwrap().is_empty());
    assert_eq!(before.lexical().search("castle b7", 20).unwrap(), hits_before);

    // Upserting the same passages again changes nothing and publishes nothing.
    let report = upsert(store.as_ref(), synthetic("b", 0, 50), "b", &e);
    assert_eq!((report.counts.passages_added, report.generation), (0, None));
    assert_eq!(store.generation().unwrap().unwrap(), g1);
    assert_eq!(store.load().unwrap().len(), 250);

    // The same with the HNSW graph, which the edit builds for its own build.
    let Some(url) = fresh("t_edit_readers_hnsw") else { return };
    let store = pg(&url);
    let options = BuildOptions { vector_index: VectorIndexKind::Hnsw, ..exact() };
    build_index(store.as_ref(), &corpus(synthetic("a", 0, 200)), vec![], &e, &options, &Silent).unwrap();
    let before = store.load().unwrap();
    upsert(store.as_ref(), synthetic("b", 0, 50), "b", &e);
    let after = store.load().unwrap();
    let v = after.vectors().row(240).to_vec();
    let top = after.vector_index().search(&v, 1).unwrap()[0];
    assert!(top.1 > 0.9999 && after.vectors().row(top.0) == &v[..], "{top:?}: 240 or a passage with its vector");
    assert!(before.vector_index().search(&v, 20).unwrap().iter().all(|h| h.0 < 200), "old readers see old rows");
    // Asked for more than it holds, the graph returns each passage at most once, best
    // first, with exact scores, from its own generation only. (Not necessarily all of
    // them: an HNSW graph over many equal vectors can leave some unreachable, on the
    // folder store too; pgvector's index fell back to an exact scan past k = 1000.)
    for (index, n) in [(&after, 250), (&before, 200)] {
        let all = index.vector_index().search(&v, 1500).unwrap();
        let distinct: HashSet<PassageIdx> = all.iter().map(|h| h.0).collect();
        assert!(distinct.len() == all.len() && all.len() <= n && all.len() >= 10, "{n}: {} hits", all.len());
        for w in all.windows(2) {
            assert!(w[0].1 >= w[1].1, "{n}: {w:?} out of order");
        }
        for &(p, score) in &all {
            assert!((p as usize) < n, "{n}: passage {p}");
            let dot: f32 = index.vectors().row(p).iter().zip(&v).map(|(a, b)| a * b).sum();
            assert!((dot - score).abs() < 1e-5, "{n}: passage {p} scored {score}, its cosine {dot}");
        }
    }
}

/// Two handles on one database (two servers) edit at once, each several times: every
/// edit lands (one computed while the other published is computed again on the newer
/// generation), additions and deletions alike, with the graph rebuilt over the result.
#[test]
fn concurrent_edits_from_two_handles_both_land() {
    let Some(url) = fresh("t_concurrent") else { return };
    concurrent_edits_both_land(move || pg(&url));
}

/// The same on one folder (two processes), no server needed. Each edit's graph build
/// runs in rayon's global pool: two at once once hung there, each pool worker waiting
/// on a plain thread that needed the pool.
#[test]
fn concurrent_edits_on_one_folder_both_land() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    concurrent_edits_both_land(move || hoprag::store::folder(&root));
}

fn concurrent_edits_both_land(open: impl Fn() -> Arc<dyn Store> + Clone + Send + 'static) {
    let store = open();
    let e = HashEmbedder::new();
    let base = synthetic("base", 0, 200);
    build_index(store.as_ref(), &corpus(base.clone()), vec![], &e, &exact(), &Silent).unwrap();
    let index = store.load().unwrap();
    let graph = EntityGraph::build(
        index.passages().as_slice(),
        extract_heuristic(index.passages().as_slice()),
        &e,
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    drop(index);
    attach_graph(store.as_ref(), &graph, "heuristic".into()).unwrap();
    let start = Arc::new(std::sync::Barrier::new(2));
    let handles: Vec<_> = ["x", "y"]
        .into_iter()
        .map(|tag| {
            let (open, start) = (open.clone(), start.clone());
            std::thread::spawn(move || {
                let store = open();
                let e = HashEmbedder::new();
                start.wait();
                let mut reports = Vec::new();
                for round in 0..3 {
                    let passages = synthetic(tag, round * 50, (round + 1) * 50);
                    reports.push(upsert(store.as_ref(), passages, &format!("{tag}{round}"), &e));
                }
                // Each also deletes passages of its own: ten of the base's.
                let ids: Vec<String> =
                    (0..10).map(|i| format!("base-{}", if tag == "x" { i } else { 100 + i })).collect();
                reports.push(edit_with(store.as_ref(), Request::Delete(ids), &format!("{tag}-delete"), &e).unwrap());
                reports
            })
        })
        .collect();
    let mut retries = 0;
    for h in handles {
        let reports = h.join().unwrap();
        assert_eq!(reports.iter().map(|r| r.counts.passages_added).sum::<usize>(), 150);
        assert_eq!(reports.iter().map(|r| r.counts.passages_removed).sum::<usize>(), 10);
        assert!(reports.iter().all(|r| r.generation.is_some()), "every edit published");
        retries += reports.iter().map(|r| r.retries).sum::<usize>();
    }
    eprintln!("8 edits from two handles, {retries} computed again after the other published");
    let index = store.load().unwrap();
    assert_eq!(index.len(), 200 + 300 - 20, "neither handle's edits were lost");
    assert_eq!(index.manifest.counts.passages, index.len());
    assert_eq!(index.manifest.corpus_checksum, checksum(index.passages()));
    let ids: HashSet<&str> = index.passages().iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids.len(), index.len(), "no passage twice");
    assert!(ids.contains("x-149") && ids.contains("y-149") && ids.contains("base-10"));
    assert!(!ids.contains("base-0") && !ids.contains("base-109"));
    let mut sources = index.manifest.sources.clone();
    sources.sort();
    assert_eq!(sources, ["x-delete", "x0", "x1", "x2", "y-delete", "y0", "y1", "y2"]);
    let g = store.load_graph(&index, Some(&e)).unwrap().expect("the graph, rebuilt by every edit");
    assert_eq!(g.passage_entities.len(), index.len());
    assert_eq!(g.mentions.len(), index.len());
}

// ---------------------------------------------------------------------------------------
// Delta generations (schema version 8).

/// The registry's LLM-free methods that run on a heuristic graph.
fn llm_free_methods() -> Vec<&'static str> {
    let sections = Config::default().methods;
    let names: Vec<&'static str> = METHODS
        .iter()
        .filter(|m| m.runs_on(GraphKind::Heuristic) && !m.uses_llm(&sections, GraphKind::Heuristic))
        .map(|m| m.name)
        .collect();
    for m in ["bm25", "dense", "hybrid", "ppr", "auto", "phasegraph", "regime_router", "naive_ge"] {
        assert!(names.contains(&m), "{m} is no longer an LLM-free method of the registry: {names:?}");
    }
    names
}

type Rankings = Vec<(&'static str, Vec<Vec<(String, u32)>>)>;

/// Every method's top 10 (passage id, score bits) for every question, on the live
/// generation of `store` served by an engine as a server serves it.
fn rankings(store: &Arc<dyn Store>, methods: &[&'static str], questions: &[&str]) -> Rankings {
    let embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder::new());
    let engine = Engine::new(store.clone(), embedder, Config::default()).unwrap();
    let e = HashEmbedder::new();
    methods
        .iter()
        .map(|&m| {
            let retriever = engine.retriever(m).unwrap_or_else(|err| panic!("{m}: {err}"));
            let lists = questions
                .iter()
                .map(|q| {
                    let query = Query::with_embedding(q.to_string(), embed(&e, q));
                    let r = retriever.retrieve(&query, 10).unwrap_or_else(|err| panic!("{m} on {q:?}: {err}"));
                    r.hits.iter().map(|h| (engine.index.passage(h.passage).id.clone(), h.score.to_bits())).collect()
                })
                .collect();
            (m, lists)
        })
        .collect()
}

/// An index of `passages` built as `hoprag index` builds one: passages, vectors, lexical
/// statistics, then the heuristic graph with its walk.
fn heuristic_index(store: &dyn Store, passages: Vec<Passage>, e: &HashEmbedder, options: &BuildOptions) {
    build_index(store, &corpus(passages), vec!["d".into()], e, options, &Silent).unwrap();
    let index = store.load().unwrap();
    let triples = hoprag::store::triples_without_llm(&index, None).unwrap();
    hoprag::store::build_graph(store, &index, triples, e, &GraphOptions::default(), &Silent).unwrap();
}

/// An administrator's connection with `schema` first on its search path.
fn admin(schema: &str) -> postgres::Client {
    let mut c = postgres::Client::connect(&server().unwrap(), postgres::NoTls).unwrap();
    c.batch_execute(&format!("SET search_path TO {schema}")).unwrap();
    c
}

/// A transaction id: every row written after it has a later `xmin`.
fn mark(c: &mut postgres::Client) -> i64 {
    c.query_one("SELECT txid_current()", &[]).unwrap().get(0)
}

/// Rows written (inserted, or updated) in `schema` since `mark`, per table with any.
fn rows_since(c: &mut postgres::Client, schema: &str, mark: i64) -> std::collections::BTreeMap<String, i64> {
    let tables: Vec<String> = c
        .query("SELECT tablename::text FROM pg_tables WHERE schemaname = $1 ORDER BY 1", &[&schema])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut out = std::collections::BTreeMap::new();
    for t in tables {
        // xids of this test server stay far below 2^32: no wraparound to mind.
        let n: i64 = c
            .query_one(&format!("SELECT count(*) FROM {schema}.{t} WHERE xmin::text::bigint > $1"), &[&mark])
            .unwrap()
            .get(0);
        if n > 0 {
            out.insert(t, n);
        }
    }
    out
}

fn count(c: &mut postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).unwrap().get(0)
}

/// Edits on PostgreSQL are written as deltas on the last whole generation, as on a
/// folder: a one-document edit writes a few rows (its delta, its tantivy files, the
/// generation), not the corpus's; every delta generation reads back the passages,
/// vectors and graph of the folder store's, and every LLM-free method ranks the same
/// ids with the same score bits on both; a graph stored for a delta generation (`hoprag
/// graph`) is read as its own; compacting writes the whole generation a fresh build of
/// its passages writes; and the base's rows stay exactly while a kept delta needs them.
#[test]
fn postgres_edits_are_deltas_that_read_as_the_folder_reads_them() {
    let schema = "t_deltas";
    let Some(url) = fresh(schema) else { return };
    let Some(fresh_url) = fresh("t_deltas_fresh") else { return };
    let pgs = pg(&url);
    let dir = tempfile::tempdir().unwrap();
    let folder = hoprag::store::folder(dir.path());
    let e = HashEmbedder::new();
    let passages = documents("d", 40, 180);
    let total = passages.len();
    for store in [folder.as_ref(), pgs.as_ref()] {
        heuristic_index(store, passages.clone(), &e, &exact());
    }
    let mut admin = admin(schema);
    let methods = llm_free_methods();
    let questions = ["castle river d7", "doc3 harbour painter", "king song war", "n-1 riverside novel", "bridge city"];
    assert_eq!(rankings(&pgs, &methods, &questions), rankings(&folder, &methods, &questions), "as built");

    let mut meta = serde_json::Map::new();
    meta.insert("z".into(), serde_json::json!("new"));
    let one_doc = vec![
        Passage {
            doc: Some("d-doc3".into()),
            meta: Some(meta),
            ..Passage::new("d-doc3#n0", "Three", "A river castle.")
        },
        Passage { doc: Some("d-doc3".into()), ..Passage::new("d-doc3#n1", "Three b", "A harbour song, painter.") },
    ];
    let steps: Vec<(&str, Request, bool)> = vec![
        ("replace one document", Request::Upsert(one_doc), true),
        ("delete one document", Request::Delete(vec!["d-doc5".into()]), true),
        ("add a passage", Request::Upsert(vec![Passage::new("n-1", "Riverside", "Riverside mountain novel.")]), true),
        ("add forty", Request::Upsert(synthetic("m", 0, 40)), false),
        ("delete one passage again", Request::Delete(vec![passages[200].id.clone()]), true),
    ];
    for (what, request, small) in steps {
        let before = mark(&mut admin);
        let on_pg = edit_with(pgs.as_ref(), request.clone(), what, &e).unwrap();
        let written = rows_since(&mut admin, schema, before);
        let on_folder = edit_with(folder.as_ref(), request, what, &e).unwrap();
        assert_eq!(on_pg.counts, on_folder.counts, "{what}");
        let (p, f) = (pgs.load().unwrap(), folder.load().unwrap());
        let delta = p.manifest.delta.clone().unwrap_or_else(|| panic!("{what}: written as a delta on PostgreSQL"));
        assert_eq!(Some(&delta), f.manifest.delta.as_ref(), "{what}: the folder's delta");
        assert_eq!(delta.base_passages, total, "{what}: a net delta on the build");
        assert_eq!(p.derived().unwrap().base_passages.len(), total, "{what}");
        assert_eq!(p.derived().unwrap().of_base, f.derived().unwrap().of_base, "{what}");
        drop((p, f));
        assert_same_index(what, folder.as_ref(), pgs.as_ref(), &e);
        assert_eq!(rankings(&pgs, &methods, &questions), rankings(&folder, &methods, &questions), "{what}");
        let rows: i64 = written.values().sum();
        eprintln!("{what}: {rows} rows written on PostgreSQL: {written:?}");
        // Nothing of the base is written again: no passages table, HNSW or graph rows.
        assert!(written.keys().all(|t| !t.starts_with("passages_b")), "{what}: {written:?}");
        for t in ["entities", "triples", "edges", "passage_entities", "passage_mentions", "facts", "graph_walks"] {
            assert!(!written.contains_key(t), "{what}: {t} written: {written:?}");
        }
        let added = on_pg.counts.passages_added as i64;
        assert_eq!(written.get("delta_passages").copied().unwrap_or(0), delta.added as i64, "{what}");
        assert!(delta.added as i64 >= added, "{what}");
        if small {
            // The generation (4 rows: builds, deltas, generations, current), the delta's
            // added passages, and the tantivy files (one part each at this size).
            let lexical = written.get("lexical_files").copied().unwrap_or(0);
            assert!(rows <= 4 + delta.added as i64 + lexical && lexical <= 20, "{what}: {written:?}");
            // (The delta is net: each edit writes again what was added since the build.)
            let own = rows - delta.added as i64;
            assert!(own < total as i64 / 10, "{what}: {rows} rows for {total} passages");
        }
    }
    // The kept generations: the live delta and its base; the build (passages table, graph)
    // the deltas are on stays, the only one.
    assert_eq!(count(&mut admin, "SELECT count(*) FROM generations"), 2);
    let whole = "SELECT count(*) FROM pg_tables WHERE schemaname = 't_deltas' AND tablename LIKE 'passages_b%'";
    assert_eq!(count(&mut admin, whole), 1);
    assert_eq!(count(&mut admin, "SELECT count(*) FROM graphs"), 1);
    // The deltas kept: the two generations', and those of the edits whose lexical parts
    // the live generation still lists (their builds stay while it is kept).
    let unheld =
        "SELECT count(*) FROM deltas d WHERE NOT EXISTS (SELECT 1 FROM generations g WHERE g.build = d.build) \
                  AND NOT EXISTS (SELECT 1 FROM generations g, \
                  jsonb_array_elements(coalesce(g.lexical->'parted'->'parts', '[]'::jsonb)) p \
                  WHERE (p->>'build')::bigint = d.build)";
    assert_eq!(count(&mut admin, unheld), 0);
    assert!(count(&mut admin, "SELECT count(*) FROM deltas") >= 2);

    // A graph stored for a delta generation (`hoprag graph`, as a server stores a walk):
    // a generation of the same delta with a graph of its own, read without deriving.
    for store in [folder.as_ref(), pgs.as_ref()] {
        let index = store.load().unwrap();
        let triples = hoprag::store::triples_without_llm(&index, None).unwrap();
        hoprag::store::build_graph(store, &index, triples, &e, &GraphOptions::default(), &Silent).unwrap();
    }
    let (p, f) = (pgs.load().unwrap(), folder.load().unwrap());
    assert!(p.manifest.delta.is_some() && p.derived().is_some(), "still a delta generation");
    let own = pgs.load_graph(&p, None).unwrap().expect("its own graph, read with no embedder");
    let folder_own = folder.load_graph(&f, None).unwrap().unwrap();
    assert_eq!(own.entities, folder_own.entities);
    assert_eq!(own.walk, folder_own.walk);
    assert_eq!(count(&mut admin, "SELECT count(*) FROM graphs"), 2);
    drop((p, f, own, folder_own));
    assert_eq!(rankings(&pgs, &methods, &questions), rankings(&folder, &methods, &questions), "own graph");

    // Compaction writes the generation whole: what a fresh build of its passages writes.
    let embedders = hoprag::store::edit::Embedders {
        passages: Arc::new(HashEmbedder::new()),
        graph: Arc::new(HashEmbedder::new()),
    };
    let before = mark(&mut admin);
    let done = hoprag::store::edit::compact(pgs.as_ref(), &embedders, &Silent).unwrap();
    let written = rows_since(&mut admin, schema, before);
    assert!(done.generation.is_some(), "{done:?}");
    hoprag::store::edit::compact(folder.as_ref(), &embedders, &Silent).unwrap();
    let compacted = pgs.load().unwrap();
    assert!(compacted.manifest.delta.is_none() && compacted.derived().is_none());
    let n = compacted.len() as i64;
    assert!(written.iter().any(|(t, &rows)| t.starts_with("passages_b") && rows == n), "{written:?}");
    let fresh_pg = pg(&fresh_url);
    heuristic_index(fresh_pg.as_ref(), compacted.passages().to_vec(), &e, &exact());
    let fresh = fresh_pg.load().unwrap();
    assert_eq!(compacted.passages(), fresh.passages());
    assert_eq!(compacted.vectors().as_flat(), fresh.vectors().as_flat());
    assert_eq!(compacted.manifest.corpus_checksum, fresh.manifest.corpus_checksum);
    let (a, b) = (compacted.manifest.graph.as_ref().unwrap(), fresh.manifest.graph.as_ref().unwrap());
    assert_eq!((a.passages, a.stats.entities, a.stats.triples), (b.passages, b.stats.entities, b.stats.triples));
    let (g, fg) =
        (pgs.load_graph(&compacted, None).unwrap().unwrap(), fresh_pg.load_graph(&fresh, None).unwrap().unwrap());
    assert_eq!(g.entities, fg.entities);
    assert_eq!(g.labels, fg.labels);
    assert_eq!(g.passage_entities, fg.passage_entities);
    assert_eq!(g.triples, fg.triples);
    assert_eq!(g.mentions, fg.mentions);
    let edges = |g: &EntityGraph| g.edges.iter().map(|e| (e.a, e.b, e.weight.to_bits(), e.kind)).collect::<Vec<_>>();
    assert_eq!(edges(&g), edges(&fg));
    assert_eq!(g.entity_vectors.as_flat(), fg.entity_vectors.as_flat());
    assert_eq!(g.fact_vectors.as_flat(), fg.fact_vectors.as_flat());
    assert_eq!(g.walk, fg.walk, "the walk solved as a fresh build solves it");
    drop((compacted, fresh, g, fg));
    let on_pg = rankings(&pgs, &methods, &questions);
    assert_eq!(on_pg, rankings(&fresh_pg, &methods, &questions), "compacted against a fresh build");
    assert_eq!(on_pg, rankings(&folder, &methods, &questions), "compacted on both stores");
    assert_same_index("compacted", folder.as_ref(), pgs.as_ref(), &e);

    // The next edit is a delta on the compacted build; the old build goes once no kept
    // generation is of it or on it.
    upsert(pgs.as_ref(), synthetic("z", 0, 2), "z0", &e);
    upsert(pgs.as_ref(), synthetic("z", 2, 4), "z1", &e);
    assert!(pgs.manifest().unwrap().unwrap().delta.is_some());
    assert_eq!(count(&mut admin, whole), 1, "only the compacted build's passages table");
    assert_eq!(count(&mut admin, "SELECT count(*) FROM graphs"), 1);
    assert_eq!(pgs.load().unwrap().len(), n as usize + 4);
}

/// A delta generation of an HNSW index reads the base's HNSW graph and updates it in
/// memory (no HNSW rows written by the edit); its answers are exact scores of its own
/// rows, and an added passage finds itself; compaction stores the updated graph.
#[test]
fn a_delta_generation_updates_the_base_hnsw_graph_in_memory() {
    let schema = "t_deltas_hnsw";
    let Some(url) = fresh(schema) else { return };
    let store = pg(&url);
    let e = HashEmbedder::new();
    let options = BuildOptions { vector_index: VectorIndexKind::Hnsw, ..exact() };
    build_index(store.as_ref(), &corpus(synthetic("a", 0, 300)), vec![], &e, &options, &Silent).unwrap();
    let mut admin = admin(schema);
    let before = mark(&mut admin);
    upsert(store.as_ref(), synthetic("b", 0, 3), "b", &e);
    edit_with(store.as_ref(), Request::Delete(vec!["a-7".into(), "a-100".into()]), "delete", &e).unwrap();
    let written = rows_since(&mut admin, schema, before);
    assert!(!written.contains_key("hnsw_graphs") && !written.contains_key("hnsw_slots"), "{written:?}");
    let index = store.load().unwrap();
    assert_eq!(index.manifest.delta.as_ref().map(|d| (d.removed, d.added)), Some((2, 3)));
    assert_eq!(index.len(), 301);
    let check = |index: &hoprag::index::Index| {
        for id in ["b-0", "b-1", "b-2", "a-8", "a-299"] {
            let row = index.passages().iter().position(|p| p.id == id).unwrap() as PassageIdx;
            let v = index.vectors().row(row).to_vec();
            let hits = index.vector_index().search(&v, 10).unwrap();
            assert!(hits[0].1 > 0.9999 && index.vectors().row(hits[0].0) == &v[..], "{id}: {hits:?}");
            for &(p, score) in &hits {
                let dot: f32 = index.vectors().row(p).iter().zip(&v).map(|(a, b)| a * b).sum();
                assert!((dot - score).abs() < 1e-5, "{id}: passage {p} scored {score}, its cosine {dot}");
            }
        }
        assert!(!index.passages().iter().any(|p| p.id == "a-7" || p.id == "a-100"));
    };
    check(&index);
    drop(index);
    let embedders = hoprag::store::edit::Embedders {
        passages: Arc::new(HashEmbedder::new()),
        graph: Arc::new(HashEmbedder::new()),
    };
    let before = mark(&mut admin);
    hoprag::store::edit::compact(store.as_ref(), &embedders, &Silent).unwrap();
    let written = rows_since(&mut admin, schema, before);
    assert!(written.contains_key("hnsw_graphs"), "{written:?}");
    let index = store.load().unwrap();
    assert!(index.manifest.delta.is_none());
    check(&index);
}

/// A server's edits (`Engine::edit`, then `Engine::reload_after`) serve the generation
/// the edit assembled in memory, its HNSW graph the served one's with the edit's
/// passages inserted (copied once, then shared), on both stores: the same passages,
/// vectors and rows of the base as the store reads back, each passage found by its own
/// vector, the removed ones by none.
#[test]
fn a_servers_edits_are_served_from_memory_as_the_store_reads_them() {
    let Some(url) = fresh("t_served") else { return };
    let dir = tempfile::tempdir().unwrap();
    let e = HashEmbedder::new();
    let options = BuildOptions { vector_index: VectorIndexKind::Hnsw, ..exact() };
    for store in [hoprag::store::folder(dir.path()), pg(&url)] {
        build_index(store.as_ref(), &corpus(synthetic("a", 0, 300)), vec![], &e, &options, &Silent).unwrap();
        let index = Arc::new(store.load().unwrap());
        let mut engine =
            Engine::with_index(store.clone(), index, Arc::new(HashEmbedder::new()), Config::default()).unwrap();
        let mut changed = synthetic("a", 40, 41);
        changed[0].text.push_str(" changed");
        let steps = [
            Request::Upsert(synthetic("b", 0, 3)),
            Request::Delete(vec!["a-7".into(), "a-100".into()]),
            Request::Upsert(changed),
            Request::Upsert(synthetic("c", 0, 2)),
        ];
        for (s, request) in steps.into_iter().enumerate() {
            let what = format!("{}, step {s}", store.location());
            let report = engine.edit(&request, &Default::default(), &Silent).unwrap();
            engine = engine.reload_after(&report).unwrap();
            let served = report.published.as_ref().and_then(|p| p.index.clone()).expect("assembled in memory");
            assert!(Arc::ptr_eq(&served, &engine.index), "{what}: served as assembled");
            let read = store.load().unwrap();
            assert_eq!(read.generation(), served.generation(), "{what}");
            assert_eq!(read.passages(), served.passages(), "{what}");
            assert_eq!(read.vectors().as_flat(), served.vectors().as_flat(), "{what}");
            assert_eq!(read.derived().unwrap().of_base, served.derived().unwrap().of_base, "{what}");
            // (Nearly every one: the graph is approximate, its parallel inserts differ
            // from run to run.)
            for index in [&read, &*served] {
                let found = (0..index.len() as PassageIdx)
                    .filter(|&row| {
                        let v = index.vectors().row(row);
                        let top = index.vector_index().search(v, 1).unwrap()[0];
                        top.1 > 0.9999 && index.vectors().row(top.0) == v
                    })
                    .count();
                assert!(found * 100 >= index.len() * 97, "{what}: {found} of {} found themselves", index.len());
            }
        }
        let ids: HashSet<&str> = engine.index.passages().iter().map(|p| p.id.as_str()).collect();
        assert!(ids.contains("c-1") && !ids.contains("a-7") && engine.index.len() == 303, "{}", engine.index.len());
    }
}
