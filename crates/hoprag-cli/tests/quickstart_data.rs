//! The quickstart's benchmark (`data/2wiki-mini`, shipped in the repository) loads with
//! the loaders `hoprag index --corpus` and `hoprag eval --dataset` use, every gold passage
//! is in its corpus, and `hoprag eval --brief` prints the short table the quickstart
//! shows, with the same figures as the full report.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hoprag::corpus::{load_corpus, CorpusOptions};
use hoprag::dataset::{load_dataset, resolve_gold, DatasetFormat};

fn mini() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/2wiki-mini")
}

fn hoprag(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hoprag")).args(args).output().expect("run hoprag")
}

#[test]
fn the_shipped_benchmark_loads_with_every_gold_passage_in_its_corpus() {
    let corpus = load_corpus(&mini().join("corpus.json"), &CorpusOptions::default()).unwrap();
    assert_eq!(corpus.passages.len(), 621);
    let r = &corpus.report;
    assert!(r.skipped.is_empty() && r.duplicates.is_empty() && r.warnings.is_empty(), "{r:?}");

    let (format, questions) = load_dataset(&mini().join("questions.json")).unwrap();
    assert!(matches!(format, DatasetFormat::TwoWiki), "{format:?}");
    assert_eq!(questions.len(), 76);
    let mut types = BTreeMap::new();
    for q in &questions {
        *types.entry(q.qtype.clone().unwrap_or_default()).or_insert(0) += 1;
    }
    let expected = [("bridge_comparison", 26), ("comparison", 25), ("compositional", 20), ("inference", 5)];
    assert_eq!(types, expected.map(|(t, n)| (t.to_string(), n)).into());

    // Every gold passage matches exactly one passage, by title and text, with no fallback.
    let resolved = resolve_gold(&questions, &corpus.passages);
    let c = &resolved.counts;
    assert_eq!(c.gold, 204);
    assert_eq!((c.by_title_and_text, c.unmatched, c.duplicate), (204, 0, 0));
    assert!(resolved.unmatched.is_empty() && resolved.fallback.is_empty(), "{:?}", resolved.fallback);
    assert_eq!((c.hop_ordered_questions, c.last_hop_matched), (25, 25));
    assert!(resolved.questions.iter().all(|q| q.gold.len() == q.gold_total && q.gold.len() >= 2));

    // The corpus is exactly the questions' own paragraphs (their `context`, sentences
    // joined with a space), each once: nothing of other questions.
    let raw: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(mini().join("questions.json")).unwrap()).unwrap();
    let own: BTreeSet<(String, String)> = raw
        .iter()
        .flat_map(|q| q["context"].as_array().unwrap())
        .map(|p| {
            let sentences: Vec<&str> = p[1].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
            (p[0].as_str().unwrap().to_string(), sentences.join(" "))
        })
        .collect();
    let shipped: BTreeSet<(String, String)> =
        corpus.passages.iter().map(|p| (p.title.clone(), p.text.clone())).collect();
    assert_eq!(shipped.len(), 621, "no passage twice");
    assert!(own == shipped, "the corpus is the union of the questions' paragraphs");

    // Small enough to ship: the whole folder is under 1 MB.
    let bytes: u64 = std::fs::read_dir(mini()).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    assert!(bytes < 1 << 20, "data/2wiki-mini is {bytes} bytes");
    let readme = std::fs::read_to_string(mini().join("README.md")).unwrap();
    assert!(readme.contains("Apache") && readme.contains("kept back"), "README states licence and selection");
}

/// `eval --brief` on the demo: one row per method, the default marked, the baseline's
/// row marked, and each other method's wins, losses, ties and sign test as in the JSON
/// report of the same run; it cannot be combined with the tables it leaves out.
#[test]
fn eval_brief_prints_the_short_table_with_the_reports_figures() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo");
    let corpus = demo.join("corpus.jsonl");
    let o = hoprag(&["index", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let questions = demo.join("questions.jsonl");
    let report = dir.path().join("report.json");
    let auto = hoprag::engine::DEFAULT_METHOD;
    let methods = format!("{auto},dense,bm25");
    let args = ["eval", "--index", idx.to_str().unwrap(), "--dataset", questions.to_str().unwrap()];
    let brief =
        ["--method", &methods, "--baseline", "dense", "--k", "5", "--brief", "--json", report.to_str().unwrap()];
    let o = hoprag(&[&args[..], &brief[..]].concat());
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert_eq!(err.lines().filter(|l| l.contains("gold passages")).count(), 1, "{err}");
    assert!(err.contains("24 questions") && err.contains("(0 not in the index)"), "{err}");
    for column in ["method", "R@5", "R@5 vs dense", "won/lost/tied", "sign p", "ms/question"] {
        assert!(out.contains(column), "{column}: {out}");
    }
    let header = out.lines().find(|l| l.contains("won/lost/tied")).unwrap();
    assert!(!header.contains("Full@") && !header.contains("LastHop"), "the full report's columns: {out}");
    assert!(out.contains("— 24 questions, 60 passages"), "{out}");

    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let row = |m: &str| {
        let name = if m == auto { format!("{m} (default)") } else { m.to_string() };
        out.lines()
            .find(|l| l.split('│').nth(1).is_some_and(|c| c.trim_start().starts_with(&format!("{name}  "))))
            .unwrap_or_else(|| panic!("{m}: {out}"))
    };
    assert!(row("dense").contains("(baseline)"), "{out}");
    for m in [auto, "bm25"] {
        let v = &r["methods"][m]["vs_baseline"];
        let wlt = format!("{}/{}/{}", v["wins"], v["losses"], v["ties"]);
        let p = format!("{:.4}", v["sign_p"].as_f64().unwrap());
        let recall = format!("{:.1}", 100.0 * r["methods"][m]["recall"]["5"].as_f64().unwrap());
        let delta = 100.0
            * (r["methods"][m]["recall"]["5"].as_f64().unwrap()
                - r["methods"]["dense"]["recall"]["5"].as_f64().unwrap());
        let cells: Vec<&str> = row(m).split_whitespace().collect();
        for cell in [wlt, p, recall, format!("{delta:+.1}")] {
            assert!(cells.contains(&cell.as_str()), "{m}: {cell} in {}", row(m));
        }
    }

    let o = hoprag(&[&args[..], &["--brief", "--stages"]].concat());
    assert!(!o.status.success(), "--brief leaves out --stages' table, so it refuses it");
}
