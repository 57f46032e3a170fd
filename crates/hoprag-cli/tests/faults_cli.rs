//! Fault injection through the binary: for each fault of the library's suite (the same
//! fixture server and the same bad answers), `hoprag index --extract llm` (LLM OpenIE)
//! and `hoprag eval` of `bridge_rag`, `sync_ge` and `gear` over 20 demo questions must
//! exit 0 (OpenIE keeps the LLM-free triples for the passages without a usable answer),
//! print the failure and fallback counts, keep each method's R@5 at or above its
//! fallback's, and leave nothing bad in the response cache. The faults run side by side
//! on one shared index, each against its own server and cache.

#[allow(dead_code)]
#[path = "../../hoprag/tests/common/fixture.rs"]
mod fixture;

#[allow(dead_code)]
#[path = "../../hoprag/tests/common/faults.rs"]
mod faults;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use faults::{check_cache, check_report, reply, Fault, Row};
use fixture::Fixture;
use serde_json::Value;

const QUESTIONS: usize = 20;

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The client settings of the library's suite: a 1 s timeout (the timeout fault answers
/// after 1.5 s), one quick retry, GEAR's agent at two steps.
const CONFIG: &str = r#"
[llm]
timeout_secs = 1
max_concurrency = 8
json_mode = true

[llm.retry]
max_retries = 1
initial_backoff_ms = 5
max_backoff_ms = 1000

[gear]
max_steps = 2
"#;

/// `hoprag` with `args`, the configuration above, the installed MiniLM and, when
/// `server` is given, that server as the LLM endpoint with its response cache under
/// `cache`.
fn hoprag(config: &Path, cache: &Path, server: Option<&str>, args: &[&str]) -> Output {
    let minilm =
        hoprag::embed::models::require("minilm").expect("the default embedder is installed by scripts/test.sh");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hoprag"));
    cmd.arg("--config")
        .arg(config)
        .args(args)
        .env("HOPRAG_MINILM_DIR", minilm)
        .env("HOPRAG_CACHE", cache)
        .env("HOPRAG_LLM_BASE_URL", server.unwrap_or(""))
        .env("HOPRAG_LLM_MODEL", if server.is_some() { "fixture-chat" } else { "" })
        .env_remove("HOPRAG_LLM_API_KEY")
        .env_remove("OPENAI_API_KEY");
    cmd.output().expect("run hoprag")
}

/// What one fault's runs printed and wrote.
struct Outcome {
    fault: Fault,
    openie: Output,
    eval: Output,
    report: Option<Value>,
    cache: PathBuf,
}

fn run_fault(fault: Fault, dir: &Path, config: &Path, index: &Path, small_corpus: &Path) -> Outcome {
    let server = Fixture::start(move |r| reply(fault, r));
    let own = dir.join(format!("{fault:?}"));
    std::fs::create_dir_all(&own).unwrap();
    let cache = own.join("cache");
    let url = Some(server.base_url.as_str());

    // LLM OpenIE: an index of ten passages whose graph the fixture's answers build.
    let openie_index = own.join("idx-llm");
    let openie = hoprag(
        config,
        &cache,
        url,
        &[
            "index",
            "--corpus",
            small_corpus.to_str().unwrap(),
            "--out",
            openie_index.to_str().unwrap(),
            "--extract",
            "llm",
            "--json",
        ],
    );

    let report = own.join("report.json");
    let eval = hoprag(
        config,
        &cache,
        url,
        &[
            "eval",
            "--index",
            index.to_str().unwrap(),
            "--dataset",
            demo().join("questions.jsonl").to_str().unwrap(),
            "--limit",
            &QUESTIONS.to_string(),
            "--method",
            "bridge_rag,sync_ge,gear,dense,hybrid",
            "--k",
            "5",
            "--json",
            report.to_str().unwrap(),
        ],
    );
    let report = std::fs::read(&report).ok().map(|b| serde_json::from_slice(&b).unwrap());
    Outcome { fault, openie, eval, report, cache: cache.join("llm") }
}

/// The cells of `method`'s row in the printed "LLM cost per query" table.
fn cost_row(stdout: &str, method: &str) -> Option<Vec<String>> {
    let table = stdout.split("LLM cost per query").nth(1)?;
    // Rows are `│ cell  cell … │`: the frame at the ends, columns apart by spaces.
    table
        .lines()
        .map(|l| l.replace('│', " ").split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|cells| cells.first().map(String::as_str) == Some(method))
}

fn check(o: &Outcome) -> Vec<Row> {
    let fault = o.fault;

    // LLM OpenIE: exits 0 with every passage accounted for; those without a usable
    // answer keep the LLM-free triples (the stage's fallback), never a crash.
    let (out, err) = text(&o.openie);
    assert!(!err.contains("panicked"), "{fault:?}: OpenIE panicked: {err}");
    assert!(o.openie.status.success(), "{fault:?}: OpenIE failed instead of degrading: {err}");
    let built: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{fault:?}: {e}: {out}"));
    let r = &built["graph"]["llm"];
    let count = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{fault:?}: no {k} in {r}"));
    assert_eq!(count("passages"), 10);
    assert_eq!(count("answered") + count("unparsed_passages") + count("failed_passages"), 10, "{fault:?}: {r}");
    assert_eq!(count("heuristic_fallback_passages"), count("unparsed_passages") + count("failed_passages"), "{r}");
    if fault.all_bad() {
        assert_eq!(count("answered"), 0, "{fault:?}: {r}");
        assert_eq!(built["graph"]["source"], "heuristic", "{fault:?}: no answer used, so the graph says so");
    } else {
        assert!(built["graph"]["source"].as_str().is_some_and(|s| s.starts_with("llm:")), "{fault:?}: {built}");
    }

    // The evaluation completes, exits 0, and prints and writes the counts.
    let (out, err) = text(&o.eval);
    assert!(o.eval.status.success(), "{fault:?}: eval failed: {err}");
    let report = o.report.as_ref().unwrap_or_else(|| panic!("{fault:?}: no JSON report"));
    let rows = check_report(fault, report, QUESTIONS);
    assert!(out.contains("errors") && out.contains("unparsed") && out.contains("fell back"), "{fault:?}: {out}");
    for row in &rows {
        // The printed table says what the JSON says: errors, unparsed, fell back.
        let cells = cost_row(&out, row.method).unwrap_or_else(|| panic!("{fault:?}: no row for {}: {out}", row.method));
        let n = cells.len();
        assert!(n >= 4, "{fault:?}: {cells:?}");
        assert_eq!(cells[n - 3], row.errors.to_string(), "{fault:?}: {} errors: {cells:?}", row.method);
        assert_eq!(cells[n - 2], row.parse_failures.to_string(), "{fault:?}: {} unparsed: {cells:?}", row.method);
        assert_eq!(cells[n - 1], format!("{}/{QUESTIONS}", row.fallbacks), "{fault:?}: {cells:?}");
        let note = format!(
            "note: {} answered {} of {QUESTIONS} questions with its LLM-free fallback",
            row.method, row.fallbacks
        );
        assert_eq!(out.contains(&note), row.fallbacks > 0, "{fault:?}: {note}: {out}");
    }

    check_cache(fault, &o.cache);
    rows
}

#[test]
fn eval_and_openie_degrade_under_every_fault() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hoprag.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let index = dir.path().join("idx");
    let corpus = demo().join("corpus.jsonl");
    // The shared index, with its default (heuristic, LLM-free) entity graph for GEAR.
    let o = hoprag(
        &config,
        &dir.path().join("cache"),
        None,
        &["index", "--corpus", corpus.to_str().unwrap(), "--out", index.to_str().unwrap(), "-q"],
    );
    assert!(o.status.success(), "{}", text(&o).1);
    let small = dir.path().join("small.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&corpus).unwrap().lines().take(10).map(String::from).collect();
    std::fs::write(&small, lines.join("\n") + "\n").unwrap();

    let (root, config, index, small) = (dir.path(), &config, &index, &small);
    let outcomes: Vec<Outcome> = std::thread::scope(|s| {
        let runs: Vec<_> =
            Fault::ALL.iter().map(|&f| s.spawn(move || run_fault(f, root, config, index, small))).collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    eprintln!("| fault | method | R@5 | fallback | R@5 | fell back | errors | unparsed | worse on |");
    // Every fault is checked, and only then does the first failure fail the test.
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(o)))
                .err()
                .map(|e| e.downcast_ref::<String>().cloned().unwrap_or_else(|| format!("{:?} failed", o.fault)))
        })
        .collect();
    assert!(failures.is_empty(), "{} of {} faults failed:\n{}", failures.len(), outcomes.len(), failures.join("\n"));
}
