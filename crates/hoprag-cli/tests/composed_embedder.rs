//! The scale benchmark's composed embedder from the ordinary commands: an index embedded
//! with a word table (a small synthetic one here, written into a temporary cache as
//! `hoprag bench scale` writes its own, so no model is needed) is queried, added to and
//! deleted from like any other; an index recording the bare id (built before ids named
//! their table) opens while the cache holds one table; a missing or ambiguous table is
//! a clear error.

use std::path::Path;
use std::process::{Command, Output};

use hoprag::corpus::{load_corpus, CorpusOptions, Passage};
use hoprag::embed::composed::{self, TableMeta, Vocabulary};
use hoprag::embed::{ComposedEmbedder, Embedder, TextKind};
use hoprag::store::{self, BuildOptions};

fn hoprag(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hoprag")).env("HOPRAG_CACHE", cache).args(args).output().expect("run hoprag")
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "hoprag failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).expect("JSON on stdout")
}

fn failure(o: Output) -> String {
    assert!(!o.status.success(), "hoprag succeeded: {}", String::from_utf8_lossy(&o.stdout));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The ids of the top `k` dense passages for `q`.
fn top(cache: &Path, idx: &str, k: &str, q: &str) -> Vec<String> {
    let r = json(hoprag(cache, &["query", "--index", idx, "--method", "dense", "-k", k, "--json", q]));
    r["passages"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_string()).collect()
}

fn write_jsonl(path: &Path, rows: &[serde_json::Value]) {
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// A table in `cache/scale` as `hoprag bench scale` writes one: the vocabulary of
/// `passages` (and the words of `extra`), one orthogonal unit vector per word, so that
/// texts are near exactly when they share words. Returns its key and dimension.
fn write_table(cache: &Path, passages: &[String], extra: &[&str]) -> (String, usize) {
    let vocabulary = Vocabulary::new(passages.iter().map(String::as_str), extra.iter().copied());
    let dim = vocabulary.words.len();
    let mut floats = vec![0f32; dim * dim];
    (0..dim).for_each(|i| floats[i * dim + i] = 1.0);
    let key = vocabulary.key("minilm");
    let dir = cache.join("scale");
    std::fs::create_dir_all(&dir).unwrap();
    let (meta, data) = composed::table_files(&dir, &key);
    std::fs::write(data, floats.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let m = TableMeta { model: "minilm".into(), dim, vocabulary };
    std::fs::write(meta, serde_json::to_vec(&m).unwrap()).unwrap();
    (key, dim)
}

fn corpus_rows() -> Vec<serde_json::Value> {
    use serde_json::json;
    vec![
        json!({"id": "marquis", "title": "Marquis of Ostrev",
            "text": "The Marquis of Ostrev commissioned a bronze statue for the harbour."}),
        json!({"id": "vellmoor", "title": "Vellmoor Abbey",
            "text": "Vellmoor Abbey stands on a granite hill above the river Quell."}),
        json!({"id": "trelkin", "title": "Trelkin Foundry",
            "text": "The Trelkin Foundry cast iron bells for northern churches."}),
        json!({"id": "quenneville", "title": "Zorblat Quenneville",
            "text": "Zorblat Quenneville was a metallurgist and a painter of seascapes."}),
        json!({"id": "orchard", "title": "Pellham Orchard",
            "text": "Pellham Orchard grows apples and pears beside the canal."}),
    ]
}

/// The passage added later; `Mordrake` is in no table (skipped), its other words are
/// (the benchmark's tables hold the questions' words too).
fn lighthouse() -> serde_json::Value {
    serde_json::json!({"id": "lighthouse", "title": "Keswar Lighthouse",
        "text": "The Keswar Lighthouse guards the Mordrake harbour with a copper lantern."})
}

const EXTRA: &str = "Keswar Lighthouse guards copper lantern";

#[test]
fn every_command_opens_an_index_of_the_composed_embedder() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let corpus = dir.path().join("corpus.jsonl");
    write_jsonl(&corpus, &corpus_rows());
    let loaded = load_corpus(&corpus, &CorpusOptions::default()).unwrap();
    let texts: Vec<String> = loaded.passages.iter().map(Passage::index_text).collect();
    let (key, dim) = write_table(&cache, &texts, &[EXTRA]);
    let keyed_id = format!("{}:{key}", composed::ID);

    // Asked for by the bare id, a new index records the table's key.
    let idx = dir.path().join("idx");
    let idx = idx.to_str().unwrap();
    let c = corpus.to_str().unwrap();
    ok(hoprag(&cache, &["index", "-q", "--corpus", c, "--out", idx, "--embedder", composed::ID]));
    let manifest = store::folder(Path::new(idx)).manifest().unwrap().unwrap();
    assert_eq!(manifest.embedder.id, keyed_id);
    assert_eq!(manifest.embedder.dim, dim, "one dimension per word of the table");

    // query: the passage sharing the question's rare words comes first.
    assert_eq!(top(&cache, idx, "1", "Which abbey stands on a granite hill?"), ["vellmoor"]);
    assert_eq!(top(&cache, idx, "1", "Who painted seascapes?"), ["quenneville"]);
    // The default method (the heuristic graph's) runs too.
    let r = json(hoprag(&cache, &["query", "--index", idx, "-k", "2", "--json", "Trelkin Foundry bells"]));
    assert_eq!(r["passages"][0]["id"], "trelkin", "{r}");

    // add: the new passage is embedded with the same table, unknown words skipped.
    let new = dir.path().join("new.jsonl");
    write_jsonl(&new, &[lighthouse()]);
    let report = json(hoprag(&cache, &["add", "--json", "--index", idx, "--corpus", new.to_str().unwrap()]));
    assert_eq!(report["report"]["counts"]["passages_added"], 1, "{report}");
    assert_eq!(top(&cache, idx, "1", "a copper lantern guards it"), ["lighthouse"]);
    let index = store::folder(Path::new(idx)).load().unwrap();
    assert_eq!(index.manifest.embedder.id, keyed_id);
    let at = index.passages().iter().position(|p| p.id == "lighthouse").unwrap();
    let lighthouse = &index.passages()[at];
    let scale = cache.join("scale");
    let embedder = ComposedEmbedder::open(&scale, Some(&key)).unwrap();
    let want = embedder.embed_one(&lighthouse.index_text(), TextKind::Passage).unwrap();
    assert_eq!(index.vectors().row(at as u32), want.as_slice());
    let without_unknown = lighthouse.index_text().replace("Mordrake", "");
    assert_eq!(want, embedder.embed_one(&without_unknown, TextKind::Passage).unwrap());

    // delete: gone from every answer.
    let report = json(hoprag(&cache, &["delete", "--json", "--index", idx, "lighthouse", "orchard"]));
    assert_eq!(report["report"]["counts"]["passages_total"], 4, "{report}");
    let left = top(&cache, idx, "10", "a copper lantern guards the orchard");
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(!left.contains(&"lighthouse".into()) && !left.contains(&"orchard".into()), "{left:?}");

    // An index recording the bare id (built before ids named the table) opens, and is
    // edited, while the cache holds one table.
    let old = dir.path().join("old");
    let bare = ComposedEmbedder::open(&scale, None).unwrap();
    assert_eq!(bare.id(), composed::ID);
    store::build_index(
        store::folder(&old).as_ref(),
        &loaded,
        vec!["test".into()],
        &bare,
        &BuildOptions::default(),
        &hoprag::progress::Silent,
    )
    .unwrap();
    let old = old.to_str().unwrap();
    assert_eq!(top(&cache, old, "1", "granite hill"), ["vellmoor"]);
    ok(hoprag(&cache, &["delete", "--index", old, "vellmoor"]));
    assert_eq!(top(&cache, old, "1", "granite hill").len(), 1);
    assert_ne!(top(&cache, old, "1", "granite hill"), ["vellmoor"]);
    assert_eq!(store::folder(Path::new(old)).manifest().unwrap().unwrap().embedder.id, composed::ID);

    // A graph embedder asked for by the bare id is recorded with the table's key too.
    ok(hoprag(&cache, &["graph", "-q", "--index", old, "--extract", "heuristic", "--graph-embedder", composed::ID]));
    let graph = store::folder(Path::new(old)).manifest().unwrap().unwrap().graph.unwrap();
    assert_eq!(graph.embedder.map(|e| e.id), Some(keyed_id.clone()));
    assert_eq!(top(&cache, old, "1", "Trelkin Foundry bells"), ["trelkin"]);

    // A second table makes the bare id ambiguous; the keyed index still opens.
    let (other, _) = write_table(&cache, &["alpha beta".to_string()], &[]);
    let err = failure(hoprag(&cache, &["query", "--index", old, "granite hill"]));
    assert!(err.contains("2 word tables") && err.contains(&format!("words-{other}.json")), "{err}");
    assert_eq!(top(&cache, idx, "1", "granite hill"), ["vellmoor"]);

    // Without its table, the index's commands say which file is missing and what makes it.
    let empty = dir.path().join("empty-cache");
    let err = failure(hoprag(&empty, &["query", "--index", idx, "granite hill"]));
    let file = empty.join("scale").join(format!("words-{key}.json"));
    assert!(err.contains(&format!("{}: not found", file.display())), "{err}");
    assert!(err.contains("hoprag bench scale"), "{err}");
    let err = failure(hoprag(&empty, &["delete", "--index", idx, "marquis"]));
    assert!(err.contains(&format!("{}: not found", file.display())), "{err}");
}
