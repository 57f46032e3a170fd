//! Edits from the command line on the demo corpus with the real default embedder: the
//! graph follows an addition with no `hoprag graph` in between, documents are replaced
//! and deleted whole, `sync` makes the index hold exactly a corpus, and bad requests
//! change nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn hoprag(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hoprag")).args(args).output().expect("run hoprag")
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

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo/corpus.jsonl")
}

fn top(idx: &str, method: &str, k: &str, q: &str) -> Vec<String> {
    let r = json(hoprag(&["query", "--index", idx, "--method", method, "-k", k, "--json", q]));
    r["passages"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_string()).collect()
}

fn write(path: &Path, rows: &[serde_json::Value]) {
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_graph_follows_additions_updates_and_deletions() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let idx = idx.to_str().unwrap();
    ok(hoprag(&["index", "-q", "--corpus", demo().to_str().unwrap(), "--out", idx]));
    let question = "Who founded the foundry that cast the statue of the Marquis of Ostrev?";
    let new = dir.path().join("new.jsonl");
    write(
        &new,
        &[
            serde_json::json!({"id": "zorblat", "title": "Zorblat Quenneville",
                "text": "Zorblat Quenneville was a metallurgist who founded the Trelkin Foundry.",
                "meta": {"source": "https://example.org/zq"}}),
            serde_json::json!({"id": "trelkin", "title": "Trelkin Foundry",
                "text": "The Trelkin Foundry cast the bronze statue of the Marquis of Ostrev."}),
        ],
    );
    let report = json(hoprag(&["add", "--json", "--index", idx, "--corpus", new.to_str().unwrap()]));
    assert_eq!(report["report"]["counts"]["passages_added"], 2);
    // The graph methods see both new passages, with no `hoprag graph` in between.
    for method in ["ppr", "phasegraph", "auto"] {
        let got = top(idx, method, "5", question);
        assert!(got.contains(&"zorblat".into()) && got.contains(&"trelkin".into()), "{method}: {got:?}");
    }

    // Adding the same rows again changes nothing: no new generation.
    let again = json(hoprag(&["add", "--json", "--index", idx, "--corpus", new.to_str().unwrap()]));
    assert!(again["report"]["generation"].is_null(), "{again}");
    assert_eq!(
        again["report"]["counts"]["documents_unchanged"].as_u64(),
        report["report"]["counts"]["passages_total"].as_u64()
    );

    // An update replaces the passage in place: the old text is gone from every answer.
    let edit = dir.path().join("edit.jsonl");
    write(
        &edit,
        &[serde_json::json!({"id": "trelkin", "title": "Trelkin Foundry",
            "text": "The Trelkin Foundry cast the iron gates of Vellmoor Abbey."})],
    );
    ok(hoprag(&["add", "--index", idx, "--corpus", edit.to_str().unwrap()]));
    let exported = dir.path().join("export.jsonl");
    ok(hoprag(&["export", "documents", "--index", idx, "--out", exported.to_str().unwrap()]));
    let rows = std::fs::read_to_string(&exported).unwrap();
    assert_eq!(rows.matches("\"trelkin\"").count(), 1, "one passage per id");
    assert!(rows.contains("Vellmoor Abbey") && !rows.contains("bronze statue of the Marquis"));
    assert!(rows.contains("https://example.org/zq"), "metadata is kept");
    // The graph's triples follow the update too: the new text's, none of the old one's.
    let triples = dir.path().join("triples.jsonl");
    ok(hoprag(&["export", "triples", "--index", idx, "--out", triples.to_str().unwrap()]));
    let of_trelkin: Vec<serde_json::Value> = std::fs::read_to_string(&triples)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|t| t["passage"] == "trelkin")
        .collect();
    let text = |t: &serde_json::Value| format!("{} {} {}", t["subject"], t["predicate"], t["object"]);
    assert!(of_trelkin.iter().any(|t| text(t).contains("Vellmoor Abbey")), "{of_trelkin:?}");
    assert!(!of_trelkin.iter().any(|t| text(t).contains("Ostrev")), "{of_trelkin:?}");

    // Unknown ids are refused by name and nothing changes.
    let before = json(hoprag(&["delete", "--json", "--dry-run", "--index", idx, "zorblat"]));
    assert_eq!(before["report"]["counts"]["documents_deleted"], 1);
    let bad = hoprag(&["delete", "--index", idx, "zorblat", "no-such-doc"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("\"no-such-doc\""),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    assert!(top(idx, "bm25", "3", "Zorblat Quenneville metallurgist").contains(&"zorblat".into()));
    ok(hoprag(&["delete", "--index", idx, "zorblat"]));
    for method in ["bm25", "dense", "ppr", "phasegraph"] {
        assert!(!top(idx, method, "10", "Zorblat Quenneville metallurgist").contains(&"zorblat".into()), "{method}");
    }

    // Sync to the demo corpus: the additions go, the rest stays; an empty corpus is refused.
    let dry = json(hoprag(&["sync", "--json", "--dry-run", "--index", idx, "--corpus", demo().to_str().unwrap()]));
    assert_eq!(dry["report"]["counts"]["documents_deleted"], 1, "{dry}");
    ok(hoprag(&["sync", "--index", idx, "--corpus", demo().to_str().unwrap()]));
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let refused = hoprag(&["sync", "--index", idx, "--corpus", empty.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--allow-empty"));

    // The synced index is a delta on the last whole generation; compacted, it is the one
    // a fresh build of the demo corpus makes, to the byte.
    let generation = |root: &Path| root.join(std::fs::read_to_string(root.join("CURRENT")).unwrap().trim());
    let manifest = |root: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(generation(root).join("manifest.json")).unwrap()).unwrap()
    };
    assert!(manifest(Path::new(idx))["delta"].is_object(), "an edit writes a delta generation");
    let compacted = json(hoprag(&["compact", "--json", "--index", idx]));
    assert!(compacted["report"]["generation"].is_string(), "{compacted}");
    assert!(manifest(Path::new(idx)).get("delta").is_none(), "compacted whole");
    let again = json(hoprag(&["compact", "--json", "--index", idx]));
    assert!(again["report"]["generation"].is_null(), "nothing left to compact: {again}");
    let fresh = dir.path().join("fresh");
    ok(hoprag(&["index", "-q", "--corpus", demo().to_str().unwrap(), "--out", fresh.to_str().unwrap()]));
    let (a, b) = (generation(Path::new(idx)), generation(&fresh));
    for file in ["passages.jsonl", "vectors.f32"] {
        assert!(std::fs::read(a.join(file)).unwrap() == std::fs::read(b.join(file)).unwrap(), "{file} differs");
    }
    // The graph's vector files are shared along the edits' generations: the same rows,
    // where its row lists say they lie.
    for file in ["graph/entities.f32", "graph/triples.f32"] {
        assert!(graph_rows(&a, file) == graph_rows(&b, file), "{file} differs");
    }
}

/// The rows of a graph's vector file `file` in generation `dir`, in order: each where its
/// `.rows` list (the file's length in rows, then each row's place) says it lies.
fn graph_rows(dir: &Path, file: &str) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(dir.join(file)).unwrap();
    let list = std::fs::read(dir.join(format!("{file}.rows"))).unwrap();
    let list: Vec<usize> = list.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize).collect();
    let (file_rows, at) = list.split_first().unwrap();
    let row = bytes.len() / file_rows.max(&1);
    at.iter().map(|&r| bytes[r * row..(r + 1) * row].to_vec()).collect()
}

/// A writer killed (SIGKILL) at any point of a sync or a delete leaves the old index or
/// the new one, never a mix; the next writer clears what it left.
#[test]
fn a_killed_edit_leaves_the_old_generation_or_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let idx = idx.to_str().unwrap();
    ok(hoprag(&["index", "-q", "--corpus", demo().to_str().unwrap(), "--out", idx]));
    let export = |name: &str| {
        let out = dir.path().join(name);
        ok(hoprag(&["export", "documents", "--index", idx, "--out", out.to_str().unwrap()]));
        std::fs::read_to_string(out).unwrap()
    };
    let original = export("a.jsonl");
    // The other state: the demo with its first third of passages rewritten.
    let rows: Vec<serde_json::Value> =
        original.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect();
    let changed: Vec<serde_json::Value> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut r = r.clone();
            if i % 3 == 0 {
                r["text"] = format!("{} It was rebuilt in 1950.", r["text"].as_str().unwrap()).into();
            }
            r
        })
        .collect();
    let other = dir.path().join("b.jsonl");
    write(&other, &changed);
    ok(hoprag(&["sync", "--index", idx, "--corpus", other.to_str().unwrap()]));
    let edited = export("b-export.jsonl");
    ok(hoprag(&["sync", "--index", idx, "--corpus", dir.path().join("a.jsonl").to_str().unwrap()]));
    assert_eq!(export("a2.jsonl"), original);
    let (mut old, mut new) = (0, 0);
    for (round, delay_ms) in [50u64, 200, 400, 700, 1000, 1500, 2000, 3000].into_iter().enumerate() {
        let target = if round % 2 == 0 { other.clone() } else { dir.path().join("a.jsonl") };
        let mut child = Command::new(env!("CARGO_BIN_EXE_hoprag"))
            .args(["sync", "-q", "--index", idx, "--corpus", target.to_str().unwrap()])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let now = export("now.jsonl");
        assert!(now == original || now == edited, "round {round}: a mix of the two states");
        if now == original {
            old += 1
        } else {
            new += 1
        }
        // Back to the original for the next round, through a writer that clears remnants.
        ok(hoprag(&["sync", "-q", "--index", idx, "--corpus", dir.path().join("a.jsonl").to_str().unwrap()]));
        let left: Vec<String> = std::fs::read_dir(idx)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".tmp-") || n.starts_with(".stage-"))
            .collect();
        assert!(left.is_empty(), "round {round}: {left:?}");
        // The index answers every method after the kill.
        for method in ["bm25", "ppr"] {
            assert!(!top(idx, method, "3", "Who founded the company that built the lighthouse?").is_empty());
        }
    }
    eprintln!("killed syncs: {old} left the old state, {new} the new one");
}
