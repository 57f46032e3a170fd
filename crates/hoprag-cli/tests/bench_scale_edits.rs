//! `hoprag bench scale --edits N`: a stream of edits on the scale benchmark's own small
//! index while two clients query it; the report has every edit's time, I/O, store size
//! and a passed probe, and the methods' latency during and after the stream.

use std::path::Path;
use std::process::Command;

#[test]
fn bench_scale_edits_reports_every_edit_seen_and_the_queries_around_them() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    if !data.join("2wiki-corpus/corpus.json").exists() {
        eprintln!("skipped: no shared data at {}", data.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("idx");
    let report = dir.path().join("report.json");
    let o = Command::new(env!("CARGO_BIN_EXE_hoprag"))
        .args(["bench", "scale", "--passages", "1000", "--edits", "5", "--edit-rate", "0", "--questions", "6"])
        .args(["--agreement", "4", "--json", "--data", data.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && stderr.contains("hoprag models fetch") {
        assert!(std::env::var_os("HOPRAG_REQUIRE_MODELS").is_none(), "{stderr}");
        eprintln!("skipped: MiniLM is not installed");
        return;
    }
    assert!(o.status.success(), "{stderr}");
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(printed, written);
    assert!(printed.get("queries").is_none(), "the edits replace the query measurement");
    let r = &printed["edits"];

    assert_eq!(r["edits"], 5, "{r}");
    assert_eq!(r["store"], "folder");
    // Two adds, a change and a delete of every four: 1000 + 3 - 1.
    assert_eq!(r["passages_before"], 1000);
    assert_eq!(r["passages_after"], 1002);
    let methods: Vec<&str> = r["methods"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    for m in ["bm25", "dense", "hybrid", "ppr", "auto", "phasegraph"] {
        assert!(methods.contains(&m), "{m} is queried: {methods:?}");
    }
    let edits = r["per_edit"].as_array().unwrap();
    let kinds: Vec<&str> = edits.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["add", "change", "add", "delete", "add"]);
    for e in edits {
        assert_eq!(e["probe_passed"], true, "{e}");
        assert_eq!(e["dense_probe_passed"], true, "{e}");
        let (write, visible) = (e["write_secs"].as_f64().unwrap(), e["visible_secs"].as_f64().unwrap());
        assert!(write > 0.0 && visible >= write && visible < 60.0, "{e}");
        // The edit writes a generation: bytes written, and a store that holds it.
        assert!(e["write_io"]["wchar"].as_u64().unwrap() > 0, "{e}");
        for field in ["rchar", "read_bytes", "write_bytes"] {
            assert!(e["write_io"][field].is_u64() && e["serve_io"][field].is_u64(), "{e}");
        }
        assert!(e["store_bytes_before"].as_u64().unwrap() > 0 && e["store_bytes_after"].as_u64().unwrap() > 0);
        assert!(e["work"]["total_secs"].as_f64().unwrap() > 0.0, "{e}");
    }
    assert_eq!(edits[3]["probe_before"], true, "the deleted passage was found before: {}", edits[3]);
    let s = &r["summary"];
    assert_eq!(s["probes_passed"], 5);
    assert_eq!(s["probes_failed"], 0);
    let visible = &s["visible_secs"];
    assert!(visible["p50"].as_f64().unwrap() > 0.0 && visible["p99"].as_f64() >= visible["p50"].as_f64(), "{s}");

    // Latency per method, during the stream and after it.
    for phase in ["during", "after"] {
        let rows = r[phase].as_array().unwrap();
        assert_eq!(rows.len(), methods.len(), "{phase}: {rows:?}");
        for row in rows {
            let q = row["queries"].as_u64().unwrap();
            if q > 0 {
                assert!(row["ms"]["p99"].as_f64() >= row["ms"]["p50"].as_f64(), "{row}");
            }
        }
    }
    // After the stream every method answered every question once, between the clients.
    let after: u64 = r["after"].as_array().unwrap().iter().map(|l| l["queries"].as_u64().unwrap()).sum();
    assert_eq!(after, methods.len() as u64 * 6);
    assert_eq!(r["walk_settled"], true, "{r}");

    // The graph methods on the edited graph against the full walk.
    let agreement = r["agreement"].as_array().unwrap();
    let names: Vec<&str> = agreement.iter().map(|a| a["method"].as_str().unwrap()).collect();
    assert_eq!(names, ["ppr", "auto", "phasegraph"]);
    for a in agreement {
        assert_eq!(a["questions"], 4);
        let overlap = a["top_k_overlap"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&overlap), "{a}");
    }
    assert_eq!(agreement[0]["identical"], 4, "ppr's split walk is exact: {}", agreement[0]);
}
