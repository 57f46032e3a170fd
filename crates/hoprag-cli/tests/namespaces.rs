//! Namespaces and scoped tokens, with the real default embedder on slices of two shared
//! data sets: a namespace ranks exactly as a separate index of its documents (from the
//! command line and from one server holding both), an edit in one changes nothing in
//! the other, and a token opens only its own namespaces.

mod server;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use server::{client, hoprag, Server, TOKEN};

/// The eight methods that need no LLM.
const METHODS: &str = "bm25,dense,hybrid,ppr,auto,phasegraph,regime_router,naive_ge";
const QUESTIONS: usize = 5;
const DEPTH: usize = 15;

fn ok(o: std::process::Output) -> String {
    assert!(o.status.success(), "hoprag failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn data(set: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data").join(set);
    dir.join("corpus.json").is_file().then_some(dir)
}

/// The first `n` passages of a shared set's corpus, as JSONL with ids.
fn slice(set: &Path, n: usize, prefix: &str, out: &Path) {
    let corpus: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(set.join("corpus.json")).unwrap()).unwrap();
    let rows: String = corpus
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, p)| format!("{}\n", json!({"id": format!("{prefix}{i}"), "title": p["title"], "text": p["text"]})))
        .collect();
    std::fs::write(out, rows).unwrap();
}

/// Every method's ranking of the set's first questions, by question id: `hoprag eval
/// --json` on the index `args` names.
fn eval(set: &Path, args: &[&str]) -> Value {
    let questions = set.join("questions.json");
    let limit = QUESTIONS.to_string();
    let mut all =
        vec!["eval", "--dataset", questions.to_str().unwrap(), "--method", METHODS, "--limit", &limit, "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(hoprag(&all))).unwrap()
}

/// Method -> question id -> (ids, scores), from an eval report.
fn rankings(report: &Value) -> Vec<(String, String, Value, Value)> {
    let mut out = Vec::new();
    for (method, m) in report["methods"].as_object().unwrap() {
        for q in m["per_query"].as_array().unwrap() {
            out.push((method.clone(), q["id"].as_str().unwrap().into(), q["retrieved"].clone(), q["scores"].clone()));
        }
    }
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

/// The set's first questions: (id, text).
fn questions(set: &Path) -> Vec<(String, String)> {
    let all: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(set.join("questions.json")).unwrap()).unwrap();
    all.iter()
        .take(QUESTIONS)
        .map(|q| {
            let id = q.get("id").or_else(|| q.get("_id")).and_then(Value::as_str).unwrap();
            (id.to_string(), q["question"].as_str().unwrap().to_string())
        })
        .collect()
}

/// The same rankings as [`rankings`], asked of a server's namespace.
fn served(
    c: &reqwest::blocking::Client,
    s: &Server,
    token: &str,
    namespace: &str,
    set: &Path,
) -> Vec<(String, String, Value, Value)> {
    let qs = questions(set);
    let mut out = Vec::new();
    for method in METHODS.split(',') {
        let batch: Vec<Value> = qs
            .iter()
            .map(|(_, text)| json!({"query": text, "method": method, "k": DEPTH, "namespace": namespace}))
            .collect();
        let r = c.post(s.url("/v1/retrieve/batch")).bearer_auth(token).json(&batch).send().unwrap();
        assert!(r.status().is_success(), "{method} on {namespace}: {}", r.text().unwrap());
        let answers: Vec<Value> = r.json().unwrap();
        for ((id, _), a) in qs.iter().zip(answers) {
            let passages = a["passages"].as_array().unwrap();
            let ids: Vec<Value> = passages.iter().map(|p| p["id"].clone()).collect();
            let scores: Vec<Value> = passages.iter().map(|p| p["score"].clone()).collect();
            out.push((method.to_string(), id.clone(), Value::from(ids), Value::from(scores)));
        }
    }
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

fn assert_same(what: &str, a: &[(String, String, Value, Value)], b: &[(String, String, Value, Value)]) {
    assert_eq!(a.len(), b.len(), "{what}: a different number of rankings");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x, y, "{what}: {} on question {} differs", x.0, x.1);
    }
}

#[test]
fn a_namespace_ranks_exactly_as_a_separate_index_and_edits_stay_in_it() {
    let (Some(musique), Some(wiki)) = (data("musique-dev"), data("2wiki-dev")) else {
        eprintln!("skipped: ../shared/data is not beside the checkout");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    slice(&musique, 60, "m", &dir.path().join("m.jsonl"));
    slice(&wiki, 60, "w", &dir.path().join("w.jsonl"));
    let store = path("store");
    for (corpus, separate, namespace) in [("m.jsonl", "sep-m", "musique-dev"), ("w.jsonl", "sep-w", "2wiki.dev_B")] {
        ok(hoprag(&["index", "-q", "--corpus", &path(corpus), "--out", &path(separate)]));
        ok(hoprag(&["index", "-q", "--corpus", &path(corpus), "--out", &store, "--namespace", namespace]));
    }
    // The default namespace holds a third corpus: it must not leak into the others.
    let demo = server::demo().join("corpus.jsonl");
    ok(hoprag(&["index", "-q", "--corpus", demo.to_str().unwrap(), "--out", &store]));
    let listed: Value = serde_json::from_str(&ok(hoprag(&["namespaces", "--index", &store, "--json"]))).unwrap();
    let names: Vec<&str> =
        listed["namespaces"].as_array().unwrap().iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["default", "2wiki.dev_B", "musique-dev"]);

    // The command line: the same rankings, scores to the bit.
    let cli_m = rankings(&eval(&musique, &["--index", &path("sep-m")]));
    let cli_w = rankings(&eval(&wiki, &["--index", &path("sep-w")]));
    assert_same("musique-dev", &cli_m, &rankings(&eval(&musique, &["--index", &store, "--namespace", "musique-dev"])));
    assert_same("2wiki", &cli_w, &rankings(&eval(&wiki, &["--index", &store, "--namespace", "2wiki.dev_B"])));

    // One server holding both (and the default), at most two open at once, against a
    // server of each separate index. (The CLI embeds an evaluation's questions in one
    // batch, the server each query alone: their scores may differ in the last bits, so
    // servers are compared with servers.)
    let c = client();
    let alone_m = Server::start(Path::new(&path("sep-m")), &[]);
    let alone_w = Server::start(Path::new(&path("sep-w")), &[]);
    let sep_m = served(&c, &alone_m, TOKEN, "default", &musique);
    let sep_w = served(&c, &alone_w, TOKEN, "default", &wiki);
    let s = Server::start(Path::new(&store), &["--set", "serve.max_open_namespaces=2"]);
    assert_same("served musique-dev", &sep_m, &served(&c, &s, TOKEN, "musique-dev", &musique));
    assert_same("served 2wiki", &sep_w, &served(&c, &s, TOKEN, "2wiki.dev_B", &wiki));
    // The default namespace was closed to open the second (limit 2): asked again, it
    // opens again and answers.
    let metrics = c.get(s.url("/metrics")).bearer_auth(TOKEN).send().unwrap().text().unwrap();
    assert!(metrics.contains("hoprag_namespaces_open 2\n"), "{metrics}");
    let body = json!({"query": "Who founded the foundry?", "k": 3});
    let r = c.post(s.url("/v1/retrieve")).bearer_auth(TOKEN).json(&body).send().unwrap();
    assert!(r.status().is_success());

    // An edit in one namespace changes nothing in the other.
    let deleted = c
        .post(s.url("/v1/delete"))
        .bearer_auth(TOKEN)
        .json(&json!({"ids": ["m0", "m1", "m2", "m3", "m4"], "namespace": "musique-dev"}))
        .send()
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.text().unwrap());
    let after_m = served(&c, &s, TOKEN, "musique-dev", &musique);
    assert!(after_m.iter().all(|r| r
        .2
        .as_array()
        .unwrap()
        .iter()
        .all(|id| !["m0", "m1", "m2", "m3", "m4"].contains(&id.as_str().unwrap()))));
    assert_ne!(after_m, sep_m, "the delete changed musique-dev's rankings");
    assert_same("2wiki after an edit of musique-dev", &sep_w, &served(&c, &s, TOKEN, "2wiki.dev_B", &wiki));
    // And from the command line too, on the same store.
    assert_same(
        "2wiki from the CLI after the edit",
        &cli_w,
        &rankings(&eval(&wiki, &["--index", &store, "--namespace", "2wiki.dev_B"])),
    );
}

#[test]
fn a_token_opens_only_its_own_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let store = server::demo_index(dir.path());
    let demo = server::demo().join("corpus.jsonl");
    for namespace in ["a", "b"] {
        ok(hoprag(&[
            "index",
            "-q",
            "--corpus",
            demo.to_str().unwrap(),
            "--out",
            store.to_str().unwrap(),
            "--namespace",
            namespace,
        ]));
    }
    let tokens = dir.path().join("tokens.toml");
    let new = |name: &str, scope: &[&str]| {
        let mut args = vec!["token", "new", "--name", name, "--tokens", tokens.to_str().unwrap()];
        args.extend_from_slice(scope);
        ok(hoprag(&args)).trim().to_string()
    };
    let reader = new("reader-a", &["--read", "a"]);
    let writer = new("writer-b", &["--write", "b"]);
    let text = std::fs::read_to_string(&tokens).unwrap();
    assert!(!text.contains(&reader) && !text.contains(&writer), "the file holds digests, never tokens");
    let s = Server::start(&store, &["--tokens", tokens.to_str().unwrap()]);
    let c = client();
    let ask = |token: &str, namespace: &str| {
        let body = json!({"query": "Who founded the foundry?", "namespace": namespace});
        let r = c.post(s.url("/v1/retrieve")).bearer_auth(token).json(&body).send().unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    assert_eq!(ask(&reader, "a").0, 200);
    assert_eq!(ask(&writer, "b").0, 200);
    assert_eq!(ask(TOKEN, "b").0, 200, "HOPRAG_TOKEN opens every namespace");
    // A namespace the token does not open answers as one that does not exist.
    let (hidden, missing) = (ask(&reader, "b"), ask(&reader, "zz"));
    assert_eq!((hidden.0, missing.0), (404, 404));
    let message = |body: &str| serde_json::from_str::<Value>(body).unwrap()["error"].to_string();
    assert_eq!(
        message(&hidden.1).replace("\\\"b\\\"", "\\\"zz\\\""),
        message(&missing.1),
        "the same words for hidden and missing"
    );
    assert_eq!(ask(&reader, "default").0, 404);
    assert_eq!(ask("wrong", "a").0, 401);
    // A read token cannot write; a write token can, in its namespace only.
    let upsert = |token: &str, namespace: &str| {
        let body = json!({"passages": [{"id": "new1", "text": "Quell Amarin founded the Orrin Works."}], "namespace": namespace});
        c.put(s.url("/v1/documents")).bearer_auth(token).json(&body).send().unwrap().status().as_u16()
    };
    assert_eq!(upsert(&reader, "a"), 403);
    assert_eq!(upsert(&writer, "a"), 404);
    assert_eq!(upsert(&writer, "b"), 200);
    let get = |token: &str, path: &str| {
        let r = c.get(s.url(path)).bearer_auth(token).send().unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    assert_eq!(get(&reader, "/v1/documents/new1?namespace=b").0, 404);
    assert_eq!(get(&writer, "/v1/documents/new1?namespace=b").0, 200);
    assert_eq!(get(&reader, "/v1/index?namespace=b").0, 404);
    assert_eq!(get(&reader, "/v1/index?namespace=a").0, 200);
    // Listing and metrics show the token's namespaces only.
    let (_, listed) = get(&reader, "/v1/namespaces");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        listed["namespaces"].as_array().unwrap().iter().map(|n| n["name"].clone()).collect::<Vec<_>>(),
        [json!("a")]
    );
    let (_, metrics) = get(&reader, "/metrics");
    assert!(metrics.contains("namespace=\"a\"") && !metrics.contains("namespace=\"b\""), "{metrics}");
    assert!(!metrics.contains("hoprag_http_requests_total{"), "the server's own series are not a scoped token's");
    let (_, all) = get(TOKEN, "/metrics");
    assert!(all.contains("namespace=\"b\"") && all.contains("hoprag_http_requests_total{"));
    let health: Value = serde_json::from_str(&get("", "/health").1).unwrap();
    assert!(health.get("passages").is_none(), "with scoped tokens /health tells no namespace's size: {health}");
    // Names that are no namespace: a 400 that names the rule, never a 5xx.
    for bad in ["../b", "a/../../etc", "x'; DROP TABLE passages; --", &"n".repeat(65), "", "b%00"] {
        let (status, body) = ask(TOKEN, bad);
        assert_eq!(status, 400, "{bad:?}: {body}");
        assert!(body.contains("invalid_namespace"), "{body}");
    }
    let (status, _) = get(TOKEN, "/v1/index?namespace=%FF%FE");
    assert_eq!(status, 400, "non-UTF-8 in a query string");
}
