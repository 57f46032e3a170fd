//! `hoprag eval` with BridgeRAG's three conditions and the B → C flip table, against the
//! loopback fixture server, on the demo corpus with the real embedder.

#[allow(dead_code)]
#[path = "../../hoprag/tests/common/fixture.rs"]
mod fixture;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fixture::{Fixture, Reply};
use hoprag::retrieve::bridge_rag::prompts::{ENTITY_SYSTEM, JUDGE_BRIDGE_SYSTEM, JUDGE_PLAIN_SYSTEM, SVO_SYSTEM};
use serde_json::{json, Value};

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Mechanical answers: SVO queries from the question, its first two capitalised words
/// (after the first) as entities, and judge scores by position: the 2-way judge gives its
/// 10 to the first candidate, the bridge-conditioned one to the second, so with α = 0
/// every top-1 flips.
fn answer(system: &str, user: &str) -> Option<String> {
    let question = user.lines().next()?.trim_start_matches("Question: ").to_string();
    let caps: Vec<&str> = question.split_whitespace().skip(1).filter(|w| w.starts_with(char::is_uppercase)).collect();
    let n = user.lines().filter(|l| l.starts_with('[')).count();
    let judge =
        |f: fn(usize) -> usize| Value::Array((1..=n).map(|i| json!({"id": i, "score": f(i)})).collect()).to_string();
    Some(match system {
        SVO_SYSTEM => {
            json!({"queries": [question.clone(), format!("{question} founded"), format!("{question} located")]})
                .to_string()
        }
        ENTITY_SYSTEM => format!("{} | {}", caps.first().unwrap_or(&"Varn"), caps.get(1).unwrap_or(&"Island")),
        JUDGE_PLAIN_SYSTEM => judge(|i| if i == 1 { 10 } else { i % 5 }),
        JUDGE_BRIDGE_SYSTEM => judge(|i| if i == 2 { 10 } else { (i * 3) % 5 }),
        _ => return None,
    })
}

/// The loopback chat server giving [`answer`]'s answers (an unknown prompt: 400).
fn answering_server() -> Fixture {
    Fixture::start(|r| {
        let msg = |i: usize| r.body["messages"][i]["content"].as_str().unwrap_or("").to_string();
        match answer(&msg(0), &msg(1)) {
            Some(text) => Reply::json(json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 5},
            })),
            None => Reply::status(400, "unknown prompt"),
        }
    })
}

#[test]
fn eval_runs_the_three_conditions_on_shared_answers_and_reports_flips() {
    let server = answering_server();
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let minilm = hoprag::embed::models::require("minilm").unwrap();
    let hoprag = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hoprag"))
            .args(args)
            .env("HOPRAG_MINILM_DIR", &minilm)
            // The response cache in a fresh folder, so every first call reaches the server.
            .env("HOPRAG_CACHE", dir.path().join("cache"))
            .env("HOPRAG_LLM_BASE_URL", &server.base_url)
            .env("HOPRAG_LLM_MODEL", "fixture-chat")
            .output()
            .unwrap()
    };
    let corpus = demo().join("corpus.jsonl");
    let o = hoprag(&["index", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", text(&o).1);

    let report = dir.path().join("report.json");
    let questions = demo().join("questions.jsonl");
    let o = hoprag(&[
        "eval",
        "--index",
        idx.to_str().unwrap(),
        "--dataset",
        questions.to_str().unwrap(),
        "--method",
        "bridge_rag_a,bridge_rag_b,bridge_rag",
        "--flips",
        "bridge_rag_b,bridge_rag",
        "--stages",
        "--traces",
        "--limit",
        "4",
        "--set",
        "bridge_rag.alpha=0",
        "--json",
        report.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("top-1 flips bridge_rag_b -> bridge_rag") && out.contains("productivity"), "{out}");
    assert!(out.contains("judge") && out.contains("svo queries"), "the stage table: {out}");

    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    // Four questions: SVO and entity calls once each (A made them; B and C read the
    // cache), and one judge call per question for B and for C.
    assert_eq!(server.requests.load(std::sync::atomic::Ordering::SeqCst), 4 * 4);
    // Per-query means are sums of quarters: compared to a rounding error.
    let close = |x: f64, want: f64| (x - want).abs() < 1e-9;
    let cost = |m: &str, field: &str| r["methods"][m]["llm"][field].as_f64().unwrap();
    assert!(close(cost("bridge_rag_a", "calls_per_query"), 2.0));
    assert!(close(cost("bridge_rag_b", "calls_per_query"), 3.0));
    assert!(close(cost("bridge_rag", "calls_per_query"), 3.0));
    assert_eq!(cost("bridge_rag", "cache_hits"), 8.0, "its SVO and entity answers");
    assert!(close(cost("bridge_rag", "prompt_tokens_per_query"), 150.0), "tokens count at their original cost");
    assert!(close(r["methods"]["bridge_rag"]["stages"]["judge"]["llm_calls_per_query"].as_f64().unwrap(), 1.0));
    assert!(r["methods"]["bridge_rag_a"]["stages"].get("judge").is_none());

    let flips = &r["flips"][0];
    assert_eq!((flips["from"].as_str(), flips["to"].as_str()), (Some("bridge_rag_b"), Some("bridge_rag")));
    assert_eq!(flips["all"]["n"], 4);
    assert_eq!(flips["all"]["flips"], 4, "the two judges' favourites differ by construction");

    // Every query's decision record is in its trace, with the same pool in B and C.
    let record = |m: &str, i: usize| -> Value {
        let steps = r["methods"][m]["per_query"][i]["trace"]["steps"].as_array().unwrap();
        steps.iter().find(|s| s["name"] == "decision record").unwrap()["detail"].clone()
    };
    for i in 0..4 {
        let (b, c) = (record("bridge_rag_b", i), record("bridge_rag", i));
        let ids = |x: &Value| x["pool"].as_array().unwrap().iter().map(|p| p["id"].clone()).collect::<Vec<_>>();
        assert_eq!(ids(&b), ids(&c));
        assert!(!ids(&c).is_empty());
        assert_eq!((b["bridge"].clone(), b["e1"].clone()), (c["bridge"].clone(), c["e1"].clone()));
        assert_eq!(c["condition"], "c");
        // With α = 0 the judge's favourite leads: the second pool candidate under C.
        assert_eq!(r["methods"]["bridge_rag"]["per_query"][i]["retrieved"][0], c["pool"][1]["id"]);
        assert_eq!(r["methods"]["bridge_rag_b"]["per_query"][i]["retrieved"][0], b["pool"][0]["id"]);
    }
}

/// `--judge-only`: the model is asked BridgeRAG's judge alone (one call per question; the
/// SVO and entity stages fail, counted, and fall back), the report's header says so, and
/// the agreement counts the pools judged "first candidate only". Without a model to ask
/// the evaluation fails, naming it; `llm.simulated_judge` outside `eval` is refused,
/// naming the setting.
#[test]
fn judge_only_asks_the_model_for_the_judge_alone() {
    let server = answering_server();
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let minilm = hoprag::embed::models::require("minilm").unwrap();
    let hoprag = |args: &[&str], llm: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_hoprag"));
        c.args(args).env("HOPRAG_MINILM_DIR", &minilm).env("HOPRAG_CACHE", dir.path().join("cache"));
        if llm {
            c.env("HOPRAG_LLM_BASE_URL", &server.base_url).env("HOPRAG_LLM_MODEL", "fixture-chat");
        } else {
            c.env_remove("HOPRAG_LLM_BASE_URL").env_remove("HOPRAG_LLM_LOCAL");
        }
        c.output().unwrap()
    };
    let corpus = demo().join("corpus.jsonl");
    let o = hoprag(&["index", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap(), "-q"], false);
    assert!(o.status.success(), "{}", text(&o).1);
    let (report, questions) = (dir.path().join("report.json"), demo().join("questions.jsonl"));
    let eval = |extra: &[&str], llm: bool| {
        let mut args = vec!["eval", "--index", idx.to_str().unwrap(), "--dataset", questions.to_str().unwrap()];
        args.extend(["--method", "bridge_rag", "--limit", "4", "--json", report.to_str().unwrap()]);
        args.extend(extra);
        hoprag(&args, llm)
    };

    let o = eval(&["--judge-only"], true);
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(server.requests.load(std::sync::atomic::Ordering::SeqCst), 4, "one judge call per question");
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(r["simulated"].as_str().unwrap().starts_with("JUDGE ONLY: "), "{}", r["simulated"]);
    let m = &r["methods"]["bridge_rag"];
    assert_eq!(m["llm"]["errors"].as_f64(), Some(8.0), "the SVO and entity calls of 4 questions: {}", m["llm"]);
    let a = &m["judge_agreement"];
    // The fixture's bridge-conditioned judge gives its 10 to the second candidate.
    assert_eq!((a["calls"].as_u64(), a["first_only_pools"].as_u64()), (Some(4), Some(0)), "{a}");

    let o = eval(&["--judge-only"], false);
    // No endpoint: the default local model, not installed in this cache, is named.
    assert!(!o.status.success() && text(&o).1.contains("needs the LLM"), "{}", text(&o).1);
    let o = hoprag(&["query", "--index", idx.to_str().unwrap(), "--set", "llm.simulated_judge=0.9", "Who?"], true);
    assert!(!o.status.success() && text(&o).1.contains("llm.simulated_judge"), "{}", text(&o).1);
}
