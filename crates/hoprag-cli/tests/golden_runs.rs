//! Golden TREC runs: every LLM-free method's ranking on hotpotqa-train is what it was.
//!
//! The test indexes `../shared/data/hotpotqa-train` (994 passages, the fastest of the
//! shared sets to index) with the built binary and its defaults (MiniLM, the heuristic
//! graph), runs `hoprag eval --run` with the eight LLM-free methods at eval's default
//! cutoffs (2,5,10,15: every run 15 deep) and compares each `METHOD.trec`, and
//! `qrels.txt`, byte for byte with `tests/data/golden/hotpotqa-train/`. So a refactor
//! that is meant to change nothing (issue 48) cannot change a ranking unnoticed;
//! `scripts/trec_equivalence.sh` makes the same check on all six shared sets against a
//! binary built before the change.
//!
//! The .trec score column is derived from the rank (`eval/trec.rs`), so the files hold
//! rankings and ids only, no floating-point text. A ranking can still rest on float
//! ties and sums (dense dot products, the walk's mass): another CPU kind (other SIMD
//! paths in the GEMM and vector kernels) could in principle swap two near-tied passages.
//! The comparison is still byte for byte: CI runs on one machine kind, and a swap there
//! is a change of behaviour.
//!
//! On an intended change of rankings, regenerate the files and say why in the commit:
//!
//! ```sh
//! HOPRAG_UPDATE_GOLDEN=1 cargo test -p hoprag-cli --test golden_runs
//! ```
//!
//! Skips without the shared data (unless HOPRAG_REQUIRE_DATA is set) or without MiniLM
//! (unless HOPRAG_REQUIRE_MODELS is set, as scripts/test.sh does).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SET: &str = "hotpotqa-train";
const METHODS: [&str; 8] = ["bm25", "dense", "hybrid", "ppr", "auto", "phasegraph", "regime_router", "naive_ge"];
/// eval's default cutoffs, spelled out so that a change of default shows here.
const KS: &str = "2,5,10,15";
const UPDATE: &str = "HOPRAG_UPDATE_GOLDEN";

fn hoprag(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hoprag"))
        .args(args)
        // LLM-free methods only: no endpoint or local model takes part.
        .env("HOPRAG_LLM_LOCAL", "/nonexistent/hoprag-test-model.gguf")
        .env_remove("HOPRAG_LLM_MODEL")
        .env_remove("HOPRAG_LLM_BASE_URL")
        .env_remove("HOPRAG_LLM_API_KEY")
        .env_remove("HOPRAG_STORE")
        .output()
        .expect("run hoprag")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data").join(SET)
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden").join(SET)
}

/// How two runs differ: lines that differ by position, the questions they belong to, and
/// the first such line on each side.
fn describe_difference(golden: &str, now: &str) -> String {
    let (g, n): (Vec<&str>, Vec<&str>) = (golden.lines().collect(), now.lines().collect());
    let mut lines = 0;
    let mut questions = std::collections::BTreeSet::new();
    let mut first = None;
    for i in 0..g.len().max(n.len()) {
        let (a, b) = (g.get(i).copied(), n.get(i).copied());
        if a != b {
            lines += 1;
            for line in [a, b].into_iter().flatten() {
                questions.insert(line.split_whitespace().next().unwrap_or("").to_string());
            }
            first.get_or_insert((i + 1, a.unwrap_or("(none)"), b.unwrap_or("(none)")));
        }
    }
    match first {
        Some((line, a, b)) => format!(
            "{lines} of {} lines differ, in {} question(s); first at line {line}:\n      golden: {a}\n      now:    {b}",
            g.len(),
            questions.len()
        ),
        // Same lines, other bytes (a final newline, line endings).
        None => "the same lines, other bytes (line endings or the final newline)".to_string(),
    }
}

#[test]
fn llm_free_runs_match_the_golden_files() {
    if !data().join("corpus.json").exists() {
        assert!(std::env::var_os("HOPRAG_REQUIRE_DATA").is_none(), "no shared data at {}", data().display());
        eprintln!("skipped: no shared data at {}", data().display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (idx, runs) = (dir.path().join("idx"), dir.path().join("runs"));
    let corpus = data().join("corpus.json");
    let o = hoprag(&["index", "-q", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap()]);
    if !o.status.success() && stderr(&o).contains("hoprag models fetch") {
        assert!(std::env::var_os("HOPRAG_REQUIRE_MODELS").is_none(), "{}", stderr(&o));
        eprintln!("skipped: MiniLM is not installed (hoprag models fetch minilm)");
        return;
    }
    assert!(o.status.success(), "index: {}", stderr(&o));

    let questions = data().join("questions.json");
    let methods = METHODS.join(",");
    let o = hoprag(&[
        "eval",
        "-q",
        "--index",
        idx.to_str().unwrap(),
        "--dataset",
        questions.to_str().unwrap(),
        "--method",
        &methods,
        "--k",
        KS,
        "--run",
        runs.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "eval: {}", stderr(&o));

    let files: Vec<String> =
        METHODS.iter().map(|m| format!("{m}.trec")).chain(std::iter::once("qrels.txt".to_string())).collect();
    if std::env::var_os(UPDATE).is_some_and(|v| v == "1") {
        std::fs::create_dir_all(golden_dir()).unwrap();
        for f in &files {
            std::fs::copy(runs.join(f), golden_dir().join(f)).unwrap();
        }
        eprintln!("{UPDATE}=1: wrote {} golden files to {}", files.len(), golden_dir().display());
        return;
    }

    let mut differences = Vec::new();
    for f in &files {
        let now = std::fs::read(runs.join(f)).unwrap_or_else(|e| panic!("eval wrote no {f}: {e}"));
        let golden = match std::fs::read(golden_dir().join(f)) {
            Ok(golden) => golden,
            Err(e) => {
                differences.push(format!("  {f}: no golden file ({e})"));
                continue;
            }
        };
        if now != golden {
            let why = describe_difference(&String::from_utf8_lossy(&golden), &String::from_utf8_lossy(&now));
            differences.push(format!("  {f}: {why}"));
        }
    }
    assert!(
        differences.is_empty(),
        "the LLM-free runs on {SET} differ from the golden files in {}:\n{}\n\
         If the change of ranking is intended, regenerate them with\n    \
         {UPDATE}=1 cargo test -p hoprag-cli --test golden_runs\n\
         and say in the commit why the rankings changed (scripts/trec_equivalence.sh \
         compares all six shared sets between two binaries).",
        golden_dir().display(),
        differences.join("\n")
    );
}
