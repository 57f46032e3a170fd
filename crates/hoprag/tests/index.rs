//! Index build, reopen, query, add, and the failure modes around them.

mod common;

use std::sync::Arc;

use common::HashEmbedder;
use hoprag::corpus::{load_corpus, CorpusOptions, LoadedCorpus, Passage};
use hoprag::index::VectorIndexKind;
use hoprag::progress::Silent;
use hoprag::retrieve::Query;
use hoprag::store;
use hoprag::{Config, Engine};

fn demo_corpus() -> LoadedCorpus {
    load_corpus(&common::demo().join("corpus.jsonl"), &CorpusOptions::default()).unwrap()
}

fn build(dir: &std::path::Path, kind: VectorIndexKind) -> LoadedCorpus {
    let corpus = demo_corpus();
    let opts = store::BuildOptions { vector_index: kind, ..Default::default() };
    store::build_index(store::folder(dir).as_ref(), &corpus, vec!["demo".into()], &HashEmbedder::new(), &opts, &Silent)
        .unwrap();
    corpus
}

#[test]
fn build_open_and_query_every_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = build(dir.path(), VectorIndexKind::Auto);
    let index = store::folder(dir.path()).load().unwrap();
    assert_eq!(index.len(), corpus.passages.len());
    assert_eq!(index.manifest.counts.passages, corpus.passages.len());
    assert_eq!(index.manifest.vector_index, VectorIndexKind::Exact);
    assert_eq!(index.manifest.corpus_checksum, hoprag::index::checksum(&corpus.passages));
    let engine =
        Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), Config::default())
            .unwrap();
    let q = Query::new("Ardent Ironworks: a foundry and engineering company established in 1851");
    for method in ["bm25", "dense", "hybrid"] {
        let r = engine.retriever(method).unwrap().retrieve(&q, 5).unwrap();
        assert_eq!(r.hits.len(), 5, "{method}");
        assert!(r.hits.windows(2).all(|w| w[0].score >= w[1].score), "{method} is sorted");
        assert!(!r.trace.steps.is_empty());
        let top = engine.index.passage(r.hits[0].passage);
        assert_eq!(top.title, "Ardent Ironworks", "{method}");
    }
    assert!(engine.retriever("nope").is_err());
}

#[test]
fn hnsw_agrees_with_exact_on_a_small_corpus() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), VectorIndexKind::Hnsw);
    let index = store::folder(dir.path()).load().unwrap();
    assert_eq!(index.manifest.vector_index, VectorIndexKind::Hnsw);
    let e = HashEmbedder::new();
    let q = hoprag::embed::Embedder::embed_one(&e, "Varn lighthouse", hoprag::embed::TextKind::Query).unwrap();
    let a = index.exact_index();
    let exact = hoprag::index::VectorIndex::search(&a, &q, 5).unwrap();
    let approx = index.vector_index().search(&q, 5).unwrap();
    assert_eq!(exact.iter().map(|x| x.0).collect::<Vec<_>>(), approx.iter().map(|x| x.0).collect::<Vec<_>>());
    for (x, y) in exact.iter().zip(&approx) {
        assert!((x.1 - y.1).abs() < 1e-4);
    }
}

/// Upserts `corpus` into the folder index at `root`, as `hoprag add` does.
fn upsert(
    root: &std::path::Path,
    corpus: &LoadedCorpus,
    source: &str,
    embedder: HashEmbedder,
) -> hoprag::Result<store::edit::EditReport> {
    let embedder: std::sync::Arc<dyn hoprag::embed::Embedder> = std::sync::Arc::new(embedder);
    let embedders = store::edit::Embedders { passages: embedder.clone(), graph: embedder };
    let options = store::edit::EditOptions { source: source.into(), ..Default::default() };
    let request = store::edit::Request::Upsert(corpus.passages.clone());
    store::edit::edit(store::folder(root).as_ref(), &request, &embedders, &options, &Silent)
}

#[test]
fn adding_passages_extends_without_rebuilding() {
    for kind in [VectorIndexKind::Exact, VectorIndexKind::Hnsw] {
        let dir = tempfile::tempdir().unwrap();
        let corpus = build(dir.path(), kind);
        let before = store::folder(dir.path()).load().unwrap();
        let old_gen = before.generation().to_string();
        let new = LoadedCorpus {
            passages: vec![
                Passage::new("x1", "Zephyr Quarry", "Zephyr Quarry supplied granite."),
                corpus.passages[0].clone(), // already indexed, unchanged
            ],
            ..Default::default()
        };
        let report = upsert(dir.path(), &new, "more", HashEmbedder::new()).unwrap();
        assert_eq!(report.counts.passages_added, 1);
        assert_eq!(report.counts.documents_unchanged, corpus.passages.len(), "the same passage again changes nothing");
        let after = store::folder(dir.path()).load().unwrap();
        assert_eq!(after.len(), before.len() + 1);
        assert_ne!(after.generation(), old_gen);
        // The reader that opened before the addition still sees its complete generation.
        assert_eq!(before.lexical().len(), before.len());
        let hits = after.lexical().search("granite quarry", 3).unwrap();
        assert_eq!(after.passage(hits[0].0).id, "x1");
        let q = hoprag::embed::Embedder::embed_one(
            &HashEmbedder::new(),
            "Zephyr Quarry supplied granite.",
            hoprag::embed::TextKind::Query,
        )
        .unwrap();
        let dense = after.vector_index().search(&q, 1).unwrap();
        assert_eq!(after.passage(dense[0].0).id, "x1", "{kind:?}");
        assert_eq!(after.manifest.sources, vec!["demo".to_string(), "more".to_string()]);
        assert_eq!(after.manifest.corpus_checksum, hoprag::index::checksum(after.passages()));
    }
}

#[test]
fn other_embedder_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), VectorIndexKind::Auto);
    let index = store::folder(dir.path()).load().unwrap();
    let other = HashEmbedder { id: "openai:text-embedding-3-small".into(), dim: 1536 };
    let err = index.check_embedder(&other).unwrap_err().to_string();
    assert!(err.contains("built with embedder minilm") && err.contains("openai:text-embedding-3-small"), "{err}");
    let new = LoadedCorpus { passages: vec![Passage::new("y", "T", "t")], ..Default::default() };
    let err = upsert(dir.path(), &new, "x", other).unwrap_err().to_string();
    assert!(err.contains("built with embedder minilm"), "{err}");
}

#[test]
fn interrupted_build_leaves_no_index_and_existing_index_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    // An embedder that fails half-way stands in for an interruption.
    struct Failing;
    impl hoprag::embed::Embedder for Failing {
        fn id(&self) -> &str {
            "minilm"
        }
        fn dim(&self) -> usize {
            64
        }
        fn embed(&self, _: &[String], _: hoprag::embed::TextKind) -> hoprag::Result<Vec<Vec<f32>>> {
            Err(hoprag::Error::Embedding("interrupted".into()))
        }
    }
    let corpus = demo_corpus();
    let root = dir.path().join("idx");
    assert!(store::build_index(
        store::folder(&root).as_ref(),
        &corpus,
        vec![],
        &Failing,
        &store::BuildOptions::default(),
        &Silent
    )
    .is_err());
    let err = store::folder(&root).load().err().expect("no index was published").to_string();
    assert!(err.contains("no index here"), "{err}");
    // No temporary folder is left behind either: only the writers' lock file.
    let left: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["LOCK"]);

    build(&root, VectorIndexKind::Auto);
    let again = store::build_index(
        store::folder(&root).as_ref(),
        &corpus,
        vec![],
        &HashEmbedder::new(),
        &store::BuildOptions::default(),
        &Silent,
    );
    assert!(again.unwrap_err().to_string().contains("--force"));
    let overwrite = store::BuildOptions { overwrite: true, ..Default::default() };
    assert!(store::build_index(store::folder(&root).as_ref(), &corpus, vec![], &Failing, &overwrite, &Silent).is_err());
    assert_eq!(store::folder(&root).load().unwrap().len(), corpus.passages.len(), "old index still served");
}

#[test]
fn corrupt_index_files_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), VectorIndexKind::Auto);
    let gen = dir.path().join(store::folder(dir.path()).load().unwrap().generation());
    std::fs::write(gen.join("vectors.f32"), [0u8; 10]).unwrap();
    let err = store::folder(dir.path()).load().err().unwrap().to_string();
    assert!(err.contains("vectors.f32"), "{err}");
}

#[test]
fn concurrent_additions_both_land() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = build(dir.path(), VectorIndexKind::Auto);
    let batch = |tag: &str| LoadedCorpus {
        passages: (0..20)
            .map(|i| {
                Passage::new(format!("{tag}{i}"), format!("{tag} {i}"), format!("Passage {i} written by writer {tag}."))
            })
            .collect(),
        ..Default::default()
    };
    // Each writer opens its own store handle, as two processes would.
    let threads: Vec<_> = ["left", "right"]
        .into_iter()
        .map(|tag| {
            let root = dir.path().to_path_buf();
            let new = batch(tag);
            std::thread::spawn(move || upsert(&root, &new, tag, HashEmbedder::new()).unwrap())
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().counts.passages_added, 20);
    }
    let index = store::folder(dir.path()).load().unwrap();
    assert_eq!(index.len(), corpus.passages.len() + 40, "neither addition is lost");
    assert_eq!(index.manifest.counts.passages, index.len());
    assert_eq!(index.manifest.corpus_checksum, hoprag::index::checksum(index.passages()));
    assert_eq!(index.lexical().len(), index.len());
    for tag in ["left", "right"] {
        assert!(index.passages().iter().any(|p| p.id == format!("{tag}19")), "{tag}'s passages are there");
    }
}

#[test]
fn a_generation_in_use_outlives_back_to_back_additions() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), VectorIndexKind::Exact);
    let folder = store::folder(dir.path());
    let index = folder.load().unwrap();
    let graph = hoprag::graph::EntityGraph::build(
        index.passages().as_slice(),
        hoprag::graph::extract_heuristic(index.passages().as_slice()),
        &HashEmbedder::new(),
        &hoprag::graph::GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    store::attach_graph(folder.as_ref(), &graph, "heuristic".into()).unwrap();
    // A reader opens the generation with the graph and has not read the graph yet (it
    // is read on first use), while three writes publish newer generations.
    let reader = folder.load().unwrap();
    let generations = |root: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('g'))
            .collect();
        names.sort();
        names
    };
    for i in 0..3 {
        let more = LoadedCorpus {
            passages: vec![Passage::new(
                format!("new{i}"),
                format!("Quarry {i}"),
                format!("Quarry {i} supplied granite to the harbour."),
            )],
            ..Default::default()
        };
        upsert(dir.path(), &more, &format!("more{i}"), HashEmbedder::new()).unwrap();
    }
    let live = folder.load().unwrap();
    assert_ne!(live.generation(), reader.generation());
    assert!(generations(dir.path()).contains(&reader.generation().to_string()), "{:?}", generations(dir.path()));
    let loaded = folder.load_graph(&reader, None).unwrap().expect("the reader's generation has its graph");
    assert_eq!(loaded.passage_entities.len(), reader.len());
    // Once no reader holds it (and `index`, the first generation's reader, is gone too),
    // the next write removes it: old generations do not pile up.
    let old = reader.generation().to_string();
    drop((reader, index));
    let last = LoadedCorpus { passages: vec![Passage::new("last", "T", "t")], ..Default::default() };
    upsert(dir.path(), &last, "last", HashEmbedder::new()).unwrap();
    let left = generations(dir.path());
    assert!(!left.contains(&old), "{left:?}");
    assert!(left.len() <= 3, "the live generation, the previous one and the one `live` holds: {left:?}");
}

/// Applies `request` to the folder index at `root`.
fn apply(root: &std::path::Path, request: store::edit::Request) -> hoprag::Result<store::edit::EditReport> {
    let embedder: Arc<dyn hoprag::embed::Embedder> = Arc::new(HashEmbedder::new());
    let embedders = store::edit::Embedders { passages: embedder.clone(), graph: embedder };
    store::edit::edit(store::folder(root).as_ref(), &request, &embedders, &Default::default(), &Silent)
}

/// Each passage's own vector finds it first through the HNSW graph, and dense search
/// through the graph ranks as exact search does (60 passages: the graph's walk sees
/// them all).
fn hnsw_finds_every_passage(index: &hoprag::index::Index, what: &str) {
    use hoprag::index::VectorIndex;
    assert_eq!(index.manifest.vector_index, VectorIndexKind::Hnsw);
    assert_eq!(index.vector_index().len(), index.len(), "{what}");
    let exact = index.exact_index();
    for (i, p) in index.passages().iter().enumerate() {
        let v = index.vectors().row(i as u32);
        let top = index.vector_index().search(v, 5).unwrap();
        assert_eq!(index.passage(top[0].0).id, p.id, "{what}: {} found {top:?}", p.id);
        assert_eq!(top, exact.search(v, 5).unwrap(), "{what}: {}", p.id);
    }
}

/// An edit of an HNSW index updates its base's graph instead of building one: passages
/// removed and added in the middle of the canonical order (every later row shifts) are
/// found under their new rows, through a slot table written beside the graph; the
/// base's graph file stays as it was; a generation without a table (a fresh build, or
/// any written before tables existed) reads slot = row; a damaged table is an error
/// naming its file, and the edit that meets it publishes nothing.
#[test]
fn an_edit_updates_the_hnsw_graph_through_its_slot_table() {
    // In a one-thread pool: parallel inserts make the graph differ from run to run, and on
    // a loaded machine one build missed a neighbour among the 60 (this test asserts the
    // graph ranks as exact search does); one thread builds the same graph every run.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    pool.install(an_edit_updates_the_hnsw_graph);
}

fn an_edit_updates_the_hnsw_graph() {
    use store::edit::Request;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    build(root, VectorIndexKind::Hnsw);
    let gen = |root: &std::path::Path| root.join(store::folder(root).generation().unwrap().unwrap());
    let g1 = gen(root);
    assert!(!g1.join("hnsw.slots").exists(), "a graph built from scratch has slot = row");
    let graph1 = std::fs::read(g1.join("hnsw.usearch")).unwrap();
    let before = store::folder(root).load().unwrap();
    hnsw_finds_every_passage(&before, "build");

    let new = |id: &str, text: &str| Passage::new(id, format!("Title {id}"), text);
    apply(root, Request::Delete(vec!["p10".into(), "p30".into()])).unwrap();
    let report = apply(
        root,
        Request::Upsert(vec![
            new("p00", "Amberlyn is a glass works on the Orlane delta."),
            new("p15a", "Corvid Mill ground barley for the river towns."),
            new("p45x", "The Quillfort tramway opened in 1903."),
        ]),
    )
    .unwrap();
    assert_eq!(report.counts.passages_added, 3);
    // The edits are written as a delta: the HNSW graph is the base's, updated by each
    // reader in memory.
    let g3 = gen(root);
    assert!(!g3.join("hnsw.usearch").exists() && g3.join("base/hnsw.usearch").is_file(), "a delta generation");
    assert_eq!(std::fs::read(g1.join("hnsw.usearch")).unwrap(), graph1, "the base's graph is never modified");
    let after = store::folder(root).load().unwrap();
    assert_eq!(after.len(), 61);
    assert_eq!(after.passage(0).id, "p00");
    hnsw_finds_every_passage(&after, "two edits");
    let e = HashEmbedder::new();
    let q =
        hoprag::embed::Embedder::embed_one(&e, "Corvid Mill ground barley", hoprag::embed::TextKind::Query).unwrap();
    assert_eq!(after.passage(after.vector_index().search(&q, 1).unwrap()[0].0).id, "p15a");
    // The reader of the build still searches its own generation, unchanged.
    hnsw_finds_every_passage(&before, "the build, read during the edits");

    // The edited index holds what a fresh build of its passages holds: the same passages,
    // vectors, lexical scores and exact search; dense search through either graph ranks
    // as exact search does.
    let fresh_dir = tempfile::tempdir().unwrap();
    let corpus = LoadedCorpus { passages: after.passages().to_vec(), ..Default::default() };
    let opts = store::BuildOptions { vector_index: VectorIndexKind::Hnsw, ..Default::default() };
    store::build_index(store::folder(fresh_dir.path()).as_ref(), &corpus, vec![], &e, &opts, &Silent).unwrap();
    let fresh = store::folder(fresh_dir.path()).load().unwrap();
    assert_eq!(fresh.passages(), after.passages());
    assert_eq!(fresh.vectors().as_flat(), after.vectors().as_flat());
    for text in ["granite quarry", "Quillfort tramway", "river towns barley"] {
        assert_eq!(fresh.lexical().search(text, 10).unwrap(), after.lexical().search(text, 10).unwrap(), "{text}");
        let q = hoprag::embed::Embedder::embed_one(&e, text, hoprag::embed::TextKind::Query).unwrap();
        let exact = after.exact_index();
        let exact = hoprag::index::VectorIndex::search(&exact, &q, 10).unwrap();
        assert_eq!(after.vector_index().search(&q, 10).unwrap(), exact, "{text}");
        assert_eq!(fresh.vector_index().search(&q, 10).unwrap(), exact, "{text}");
    }

    // Compacted, the generation stores the updated graph with its slot table.
    let embedder: Arc<dyn hoprag::embed::Embedder> = Arc::new(HashEmbedder::new());
    let embedders = store::edit::Embedders { passages: embedder.clone(), graph: embedder };
    store::edit::compact(store::folder(root).as_ref(), &embedders, &Silent).unwrap();
    let g3 = gen(root);
    assert!(g3.join("hnsw.slots").is_file(), "an updated graph stores its table");
    hnsw_finds_every_passage(&store::folder(root).load().unwrap(), "compacted");

    // A damaged table is named; the edit that meets it publishes nothing and leaves no
    // temporary folder behind.
    let slots = g3.join("hnsw.slots");
    let table = std::fs::read(&slots).unwrap();
    std::fs::write(&slots, &table[..table.len() - 4]).unwrap();
    let err = store::folder(root).load().err().unwrap().to_string();
    assert!(err.contains("hnsw.slots") && err.contains("bytes of rows"), "{err}");
    let err = apply(root, Request::Delete(vec!["p20".into()])).unwrap_err().to_string();
    assert!(err.contains("hnsw.slots"), "{err}");
    assert_eq!(gen(root), g3, "nothing published");
    let names: Vec<String> =
        std::fs::read_dir(root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.starts_with(".tmp-") && !n.starts_with(".stage-")), "{names:?}");
    std::fs::write(&slots, &table).unwrap();
    apply(root, Request::Delete(vec!["p20".into()])).unwrap();
    hnsw_finds_every_passage(&store::folder(root).load().unwrap(), "after the table was mended");
}
