//! `hoprag config`: the layers (defaults < file < environment < flags) and secret masking.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// The binary with the variables these tests set removed from the inherited environment.
fn hoprag(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hoprag"));
    for var in ["HOPRAG_LLM_BASE_URL", "HOPRAG_LLM_MODEL", "HOPRAG_LLM_API_KEY", "OPENAI_API_KEY", "HOPRAG_TOKEN"] {
        cmd.env_remove(var);
    }
    cmd.args(args).envs(env.iter().copied()).output().expect("run hoprag")
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn config_applies_file_environment_and_flags_in_order_and_masks_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("custom.toml");
    write(
        &file,
        "[llm]\nmodel = \"from-file\"\nbase_url = \"http://file.invalid/v1\"\napi_key = \"sk-file-secret\"\n\n\
         [hybrid]\nrrf_k = 30.0\ndepth = 40\n\n[serve]\ntoken = \"tok-file-secret\"\nmax_k = 9\n",
    );
    let env = [("HOPRAG_LLM_MODEL", "from-env"), ("HOPRAG_TOKEN", "tok-env-secret")];
    let o = hoprag(&["config", "--config", file.to_str().unwrap(), "--set", "hybrid.depth=7", "--json"], &env);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("secret"), "a secret was printed: {text}");
    let out: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(out["file"], file.to_str().unwrap());
    let c = &out["config"];
    assert_eq!(c["llm"]["model"], "from-env", "environment over file");
    assert_eq!(c["llm"]["base_url"], "http://file.invalid/v1", "file over defaults");
    assert_eq!(c["hybrid"]["rrf_k"], 30.0);
    assert_eq!(c["hybrid"]["depth"], 7, "--set over file");
    assert_eq!(c["serve"]["max_k"], 9);
    assert_eq!(c["serve"]["max_batch"], 64, "defaults fill the rest");
    assert_eq!(c["llm"]["api_key"], "********");
    assert_eq!(c["serve"]["token"], "********");
    assert!(c["embedder"]["openai"].get("api_key").is_none(), "an unset secret is left out");

    let o = hoprag(&["config", "--config", file.to_str().unwrap(), "--set", "llm.model=from-flag"], &env);
    let toml = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && !toml.contains("secret"), "{toml}");
    assert!(toml.contains("model = \"from-flag\"") && toml.contains("rrf_k = 30"), "{toml}");

    // Without --config, the index's hoprag.toml; without either, the defaults.
    write(&dir.path().join("hoprag.toml"), "[hybrid]\nrrf_k = 12.0\n");
    let o = hoprag(&["config", "--index", dir.path().to_str().unwrap(), "--json"], &[]);
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["config"]["hybrid"]["rrf_k"], 12.0);
    let o = hoprag(&["config", "--json"], &[]);
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(out["file"].is_null());
    assert_eq!(out["config"]["hybrid"]["rrf_k"], 60.0);
}

#[test]
fn unknown_keys_name_the_key_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hoprag.toml");
    write(&file, "[phasegraph.fusion]\nalpah = 0.5\n");
    let o = hoprag(&["config", "--index", dir.path().to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("phasegraph.fusion.alpah") && err.contains(file.to_str().unwrap()), "{err}");
    assert!(err.contains("alpha"), "the section's keys are suggested: {err}");
    let o = hoprag(&["config", "--set", "hybrid.nope=1"], &[]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("hybrid.nope"));
}
