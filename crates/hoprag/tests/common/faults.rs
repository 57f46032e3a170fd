//! The faults an OpenAI-compatible endpoint can answer with, one kind per server, for the
//! fault-injection suites of the library (`tests/faults.rs`) and of the binary
//! (`hoprag-cli/tests/faults_cli.rs`, which includes this file and `fixture.rs` by path:
//! test helpers are not part of either crate).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::fixture::{Reply, Request};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    Empty,
    ProseWithBrackets,
    TruncatedJson,
    WrongKeys,
    WrongCase,
    SingleTriple,
    FinishLength,
    Http500,
    Http429RetryAfter,
    Timeout,
    NonUtf8,
}

impl Fault {
    pub const ALL: [Fault; 11] = [
        Fault::Empty,
        Fault::ProseWithBrackets,
        Fault::TruncatedJson,
        Fault::WrongKeys,
        Fault::WrongCase,
        Fault::SingleTriple,
        Fault::FinishLength,
        Fault::Http500,
        Fault::Http429RetryAfter,
        Fault::Timeout,
        Fault::NonUtf8,
    ];

    /// Faults whose every answer is unusable: nothing may be cached, and every LLM
    /// method must answer every question with its fallback.
    pub fn all_bad(self) -> bool {
        !matches!(self, Fault::WrongCase | Fault::SingleTriple)
    }
}

/// The LLM methods of the suites and the LLM-free ranking each falls back to.
pub const FALLBACKS: [(&str, &str); 3] = [("bridge_rag", "dense"), ("sync_ge", "hybrid"), ("gear", "hybrid")];

pub fn completion(text: &str, finish: &str) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": finish}],
           "usage": {"prompt_tokens": 50, "completion_tokens": 5}})
}

/// The timeout fault answers this late; clients under test wait at most 1 s.
pub const TIMEOUT_DELAY: Duration = Duration::from_millis(1500);

/// The one answer the server gives to every request under `fault`.
pub fn reply(fault: Fault, _: &Request) -> Reply {
    let ok = |text: &str| Reply::json(completion(text, "stop"));
    match fault {
        Fault::Empty => ok(""),
        Fault::ProseWithBrackets => ok("Looking at passage [2] and [3], I believe the answer is unclear {sorry}."),
        Fault::TruncatedJson => ok(r#"{"queries": ["who built the lighthouse", "the comp"#),
        Fault::WrongKeys => ok(r#"{"thoughts": ["a", "b"], "result": {"value": 3}, "note": "done"}"#),
        // Every key a stage asks for, in capitals: accepted (keys are compared without
        // case), so this fault's answers are well formed. Their content is another
        // question's: a fact about Varn Light, a rewrite about Ardent Ironworks, and 20
        // bare judge scores whatever the pool's size.
        Fault::WrongCase => {
            ok(r#"{"QUERIES": ["Varn Light was built by Ardent Ironworks"], "ENTITIES": ["Varn Light"],
                "TRIPLES": [["Varn Light", "built by", "Ardent Ironworks"]], "ANSWERABLE": false,
                "REASON": "the founder is not known", "QUERY": "Who founded Ardent Ironworks?",
                "SCORES": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4]}"#)
        }
        Fault::SingleTriple => ok(r#"["Varn Light", "built by", "Ardent Ironworks"]"#),
        Fault::FinishLength => Reply::json(completion(r#"{"queries": ["who built"#, "length")),
        Fault::Http500 => Reply::status(500, r#"{"error": "internal"}"#),
        Fault::Http429RetryAfter => Reply {
            headers: vec![("Retry-After".into(), "1".into())],
            ..Reply::status(429, r#"{"error": "slow down"}"#)
        },
        Fault::Timeout => Reply { delay: TIMEOUT_DELAY, ..ok(r#"{"queries": ["late"]}"#) },
        Fault::NonUtf8 => {
            let mut body = br#"{"choices": [{"message": {"content": ""#.to_vec();
            body.extend_from_slice(b"\xff\xfe\x80 {\"queries\": [\"\xc3\x28\"]}");
            body.extend_from_slice(br#""}, "finish_reason": "stop"}]}"#);
            Reply { raw: Some(body), ..Reply::status(200, "") }
        }
    }
}

/// Every answer left in the response cache at `dir`, as (request asked for JSON, text);
/// none when nothing was ever cached (no folder).
pub fn cached_answers(dir: &Path) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let Ok(shards) = std::fs::read_dir(dir) else { return out };
    for shard in shards.flatten() {
        if !shard.path().is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(shard.path()).unwrap().flatten() {
            let v: Value = serde_json::from_slice(&std::fs::read(entry.path()).unwrap()).unwrap();
            out.push((v["request"]["json"].as_bool().unwrap_or(false), v["text"].as_str().unwrap_or("").to_string()));
        }
    }
    out
}

/// Nothing bad is cached: no empty answer, no JSON request without JSON; with only bad
/// answers, nothing at all.
pub fn check_cache(fault: Fault, dir: &Path) {
    let cached = cached_answers(dir);
    for (json, text) in &cached {
        assert!(!text.trim().is_empty(), "{fault:?}: an empty answer was cached");
        assert!(!json || hoprag::llm::parse_lenient(text).is_ok(), "{fault:?}: cached answer without JSON: {text}");
    }
    if fault.all_bad() {
        assert!(cached.is_empty(), "{fault:?}: {} bad answers cached: {:?}", cached.len(), cached.first());
    }
}

/// One LLM method's row of an evaluation under a fault, read from the report as
/// `hoprag eval --json` writes it (the library's `EvalReport` serialised).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub method: &'static str,
    pub fallback: &'static str,
    pub r5: f64,
    pub fallback_r5: f64,
    pub fallbacks: u64,
    pub errors: u64,
    pub parse_failures: u64,
    /// Questions where the method's R@5 is below the fallback's.
    pub worse: Vec<String>,
}

impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "| {} | {:.3} | {} | {:.3} | {} | {} | {} | {:?} |",
            self.method,
            self.r5,
            self.fallback,
            self.fallback_r5,
            self.fallbacks,
            self.errors,
            self.parse_failures,
            self.worse
        )
    }
}

/// Checks an evaluation of the methods of [`FALLBACKS`] and their fallbacks over `n`
/// questions under `fault`: with only bad answers, every question falls back (marked per
/// question), the failures are counted and R@5 is exactly the fallback's; a question that
/// fell back got exactly the fallback's ranking; R@5 is at least the fallback's. Every
/// row is printed before anything is asserted, so that one failing method does not hide
/// the others' numbers. Returns the rows.
pub fn check_report(fault: Fault, report: &Value, n: usize) -> Vec<Row> {
    assert_eq!(report["n"], n, "{fault:?}: questions evaluated");
    let method = |m: &str| &report["methods"][m];
    let r5 = |m: &str| method(m)["recall"]["5"].as_f64().unwrap_or_else(|| panic!("{fault:?}: no R@5 for {m}"));
    let count = |v: &Value| v.as_u64().unwrap_or(0);
    let per_query = |m: &str| method(m)["per_query"].as_array().cloned().unwrap_or_default();
    let rows: Vec<Row> = FALLBACKS
        .iter()
        .map(|&(m, fallback)| Row {
            method: m,
            fallback,
            r5: r5(m),
            fallback_r5: r5(fallback),
            fallbacks: count(&method(m)["fallbacks"]),
            errors: count(&method(m)["llm"]["errors"]),
            parse_failures: count(&method(m)["llm"]["parse_failures"]),
            worse: per_query(m)
                .iter()
                .zip(per_query(fallback))
                .filter(|(a, b)| a["recall"]["5"].as_f64() < b["recall"]["5"].as_f64())
                .map(|(a, _)| a["id"].as_str().unwrap_or("?").to_string())
                .collect(),
        })
        .collect();
    for row in &rows {
        eprintln!("| {fault:?} {row}");
    }
    if !fault.all_bad() {
        // Well-formed answers: some method reads them rather than falling back, so the
        // checks below see their content at work.
        assert!(rows.iter().any(|r| r.fallbacks < n as u64), "{fault:?}: no method used the well-formed answers");
    }
    for row in &rows {
        let (m, fallback) = (row.method, row.fallback);
        let questions = per_query(m);
        assert_eq!(questions.len(), n, "{fault:?}: {m}: one row per question");
        if fault.all_bad() {
            assert_eq!(row.fallbacks, n as u64, "{fault:?}: {m} must fall back on every question");
            assert!(questions.iter().all(|q| q["fell_back"] == true), "{fault:?}: {m}: marked per question");
            assert!(row.errors + row.parse_failures > 0, "{fault:?}: {m}: the failures are counted");
            assert!((row.r5 - row.fallback_r5).abs() < 1e-9, "{fault:?}: {m} is exactly its fallback");
        }
        let fell_back = questions.iter().filter(|q| q["fell_back"] == true).count();
        assert_eq!(fell_back as u64, row.fallbacks, "{fault:?}: {m}: the count is the questions marked");
        for (q, b) in questions.iter().zip(per_query(fallback)) {
            if q["fell_back"] == true {
                assert_eq!(q["retrieved"], b["retrieved"], "{fault:?}: {m} on {} fell back to {fallback}", q["id"]);
            }
        }
        assert!(row.r5 >= row.fallback_r5 - 1e-9, "{fault:?}: {m} R@5 below its fallback {fallback}");
    }
    rows
}
