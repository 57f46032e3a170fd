//! `hoprag serve` end to end: the binary on a loopback port over an index of the demo
//! corpus (MiniLM), checked route by route against the CLI's own answers.

mod server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use reqwest::blocking::{Client, Response};
use serde_json::{json, Value};

use server::{client, demo, demo_index, hoprag, Server, TOKEN};

fn post(c: &Client, url: &str, body: &Value) -> Response {
    c.post(url).bearer_auth(TOKEN).json(body).send().unwrap()
}

fn ok_json(r: Response) -> Value {
    let status = r.status();
    let body: Value = r.json().unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

/// The status and the `error.code` of an error response, checking its shape.
fn error_of(r: Response) -> (u16, String, String) {
    let status = r.status().as_u16();
    let body: Value = r.json().expect("errors are JSON");
    let code = body["error"]["code"].as_str().unwrap_or_else(|| panic!("no error.code in {body}")).to_string();
    let message = body["error"]["message"].as_str().unwrap_or_else(|| panic!("no error.message in {body}")).to_string();
    (status, code, message)
}

/// What must agree between the server and the CLI: everything but the step timings.
fn comparable(response: &Value) -> Value {
    let steps: Vec<Value> = response["trace"]["steps"].as_array().unwrap().iter().map(|s| s["name"].clone()).collect();
    json!({"query": response["query"], "method": response["method"], "k": response["k"],
           "passages": response["passages"], "steps": steps})
}

fn cli_query(index: &Path, method: &str, k: usize, question: &str, set: &[&str]) -> Result<Value, String> {
    let k = k.to_string();
    let mut args = vec!["query", "--index", index.to_str().unwrap(), "--method", method, "-k", &k, "--json"];
    for s in set {
        args.extend(["--set", s]);
    }
    args.push(question);
    let o = hoprag(&args);
    if o.status.success() {
        Ok(serde_json::from_slice(&o.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).into_owned())
    }
}

fn method_names() -> Vec<String> {
    let o = hoprag(&["methods", "--json"]);
    let list: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    list.iter().map(|m| m["name"].as_str().unwrap().to_string()).collect()
}

fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn every_route_with_auth_limits_passages_and_concurrency() {
    let dir = tempfile::tempdir().unwrap();
    let idx = demo_index(dir.path());
    // The index's own configuration file: limits for the server, a method parameter
    // that the CLI must apply too, and a token that the environment overrides. The
    // timeout counts the wait for a worker, which hundreds of requests at once on two
    // busy cores can make long: it is set far above that here.
    std::fs::write(
        idx.join("hoprag.toml"),
        "[hybrid]\ndepth = 50\n\n[serve]\ntoken = \"from-the-file\"\nmax_k = 20\nmax_query_chars = 300\nmax_batch = 8\n\
         max_body_bytes = 65536\ntimeout_ms = 600000\n",
    )
    .unwrap();
    let server = Server::start(&idx, &[]);
    let c = client();
    let mut retrieve_ok = 0;

    // /health is open; everything else wants the token (from HOPRAG_TOKEN, over the file's).
    let health = ok_json(c.get(server.url("/health")).send().unwrap());
    assert_eq!((health["status"].as_str(), health["passages"].as_u64()), (Some("ok"), Some(60)));
    for path in ["/v1/methods", "/metrics", "/openapi.json"] {
        let (status, code, _) = error_of(c.get(server.url(path)).send().unwrap());
        assert_eq!((status, code.as_str()), (401, "unauthorized"), "{path} without a token");
        for wrong in ["from-the-file", "nope", ""] {
            let (status, _, _) = error_of(c.get(server.url(path)).bearer_auth(wrong).send().unwrap());
            assert_eq!(status, 401, "{path} with token {wrong:?}");
        }
    }
    let r = c.post(server.url("/v1/retrieve")).json(&json!({"query": "Quillfort"})).send().unwrap();
    assert_eq!(error_of(r).0, 401);

    // /v1/methods lists what `hoprag methods` lists, with the configured parameters.
    let listed = ok_json(c.get(server.url("/v1/methods")).bearer_auth(TOKEN).send().unwrap());
    let names: Vec<String> =
        listed["methods"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, method_names());
    let default_method = listed["default"].as_str().unwrap().to_string();
    assert!(names.contains(&default_method));
    let hybrid = listed["methods"].as_array().unwrap().iter().find(|m| m["name"] == "hybrid").unwrap();
    assert_eq!(hybrid["parameters"]["depth"], 50, "the file's value: {hybrid}");

    // /openapi.json is generated from the handlers and types.
    let doc = ok_json(c.get(server.url("/openapi.json")).bearer_auth(TOKEN).send().unwrap());
    for path in
        ["/v1/retrieve", "/v1/retrieve/batch", "/v1/passages", "/v1/methods", "/health", "/metrics", "/openapi.json"]
    {
        assert!(doc["paths"][path].is_object(), "{path} missing from the OpenAPI document");
    }
    for schema in ["RetrieveRequest", "RetrieveResponse", "AddPassagesRequest", "ErrorBody", "MethodList"] {
        assert!(doc["components"]["schemas"][schema].is_object(), "schema {schema} missing");
    }
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());

    // /v1/retrieve answers exactly what `hoprag query --json` prints, for every method:
    // the ones that cannot run on this index (no graph) fail the same way in both.
    let questions = [
        "What year did Tessany declare independence?",
        "Who founded the company that built the lighthouse on Varn Island?",
        "Which river flows through the mill town where Halloway Looms operates?",
    ];
    let mut expected: Vec<(Value, Value)> = Vec::new(); // (request, comparable response)
    for method in &names {
        for (i, q) in questions.iter().enumerate() {
            let k = 3 + i;
            let request = json!({"query": q, "method": method, "k": k});
            let r = post(&c, &server.url("/v1/retrieve"), &request);
            match cli_query(&idx, method, k, q, &[]) {
                Ok(cli) => {
                    let served = ok_json(r);
                    retrieve_ok += 1;
                    assert_eq!(comparable(&served), comparable(&cli), "{method} on {q:?}");
                    assert_eq!(served["passages"].as_array().unwrap().len(), k);
                    expected.push((request, comparable(&served)));
                }
                Err(cli_error) => {
                    let (status, code, message) = error_of(r);
                    assert_eq!((status, code.as_str()), (400, "method_unavailable"), "{method}: {message}");
                    assert!(!cli_error.is_empty());
                    break;
                }
            }
        }
    }
    assert!(expected.len() >= 9, "bm25, dense and hybrid at least run on the demo index");

    // No method: the default one. Options: the same as the CLI's --set.
    let served = ok_json(post(&c, &server.url("/v1/retrieve"), &json!({"query": questions[0]})));
    retrieve_ok += 1;
    assert_eq!(served["method"], default_method.as_str());
    assert_eq!(served["k"], 5);
    let with_options =
        json!({"query": questions[1], "method": "hybrid", "k": 4, "options": {"hybrid.rrf_k": 1, "hybrid.depth": 3}});
    let served = ok_json(post(&c, &server.url("/v1/retrieve"), &with_options));
    retrieve_ok += 1;
    let cli = cli_query(&idx, "hybrid", 4, questions[1], &["hybrid.rrf_k=1", "hybrid.depth=3"]).unwrap();
    assert_eq!(comparable(&served), comparable(&cli));
    let plain = expected.iter().find(|(r, _)| r["method"] == "hybrid" && r["query"] == questions[1]).unwrap();
    assert_ne!(comparable(&served)["passages"], plain.1["passages"], "the options changed the ranking");

    // Bad requests: JSON errors with the right status and code, naming the problem.
    let long_query = "q".repeat(301);
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (json!({"query": "x", "options": {"hybrid.nope": 1}}), 400, "invalid_option", "hybrid.nope"),
        (json!({"query": "x", "options": {"hybrid.rrf_k": "sixty"}}), 400, "invalid_option", "hybrid.rrf_k"),
        (json!({"query": "x", "options": {"llm.model": "m"}}), 400, "invalid_option", "llm.model"),
        (json!({"query": "x", "k": 21}), 400, "limit_exceeded", "serve.max_k"),
        (json!({"query": "x", "k": 0}), 400, "invalid_request", "k must be"),
        (json!({"query": long_query}), 400, "limit_exceeded", "serve.max_query_chars"),
        (json!({"query": "  "}), 400, "invalid_request", "empty"),
        (json!({"query": "x", "method": "telepathy"}), 400, "unknown_method", "telepathy"),
        (json!({"query": "x", "methdo": "bm25"}), 422, "invalid_request", "methdo"),
        (json!({"k": 3}), 422, "invalid_request", "query"),
    ];
    for (body, status, code, mention) in cases {
        let (s, c2, message) = error_of(post(&c, &server.url("/v1/retrieve"), &body));
        assert_eq!((s, c2.as_str()), (status, code), "{body}: {message}");
        assert!(message.contains(mention), "{body}: {message:?} should mention {mention:?}");
    }
    let r = c.post(server.url("/v1/retrieve")).bearer_auth(TOKEN).header("content-type", "application/json");
    let (s, code, _) = error_of(r.body("{\"query\": ").send().unwrap());
    assert_eq!((s, code.as_str()), (400, "invalid_json"));
    let big = json!({"query": "x".repeat(70_000)});
    let (s, code, _) = error_of(post(&c, &server.url("/v1/retrieve"), &big));
    assert_eq!((s, code.as_str()), (413, "payload_too_large"));
    let (s, code, _) = error_of(c.get(server.url("/v1/retrieve")).bearer_auth(TOKEN).send().unwrap());
    assert_eq!((s, code.as_str()), (405, "method_not_allowed"));
    let (s, code, _) = error_of(c.get(server.url("/v2/nothing")).bearer_auth(TOKEN).send().unwrap());
    assert_eq!((s, code.as_str()), (404, "not_found"));

    // Batches: in order, the same answers as one at a time; the size limit; the item at fault named.
    let batch: Vec<Value> = expected.iter().take(8).map(|(r, _)| r.clone()).collect();
    let served = ok_json(post(&c, &server.url("/v1/retrieve/batch"), &json!(batch)));
    let served = served.as_array().unwrap();
    assert_eq!(served.len(), batch.len());
    for (s, (_, want)) in served.iter().zip(&expected) {
        assert_eq!(&comparable(s), want);
    }
    let nine: Vec<Value> = (0..9).map(|_| json!({"query": "x"})).collect();
    let (s, code, _) = error_of(post(&c, &server.url("/v1/retrieve/batch"), &json!(nine)));
    assert_eq!((s, code.as_str()), (400, "limit_exceeded"));
    let faulty = json!([{"query": "x"}, {"query": "y", "k": 99}]);
    let (s, _, message) = error_of(post(&c, &server.url("/v1/retrieve/batch"), &faulty));
    assert!(s == 400 && message.starts_with("[1]"), "{message}");

    // Some hundreds of requests at once, from as many threads: no errors, same answers.
    // Mostly bm25: a query embedding costs a few hundred ms of CPU here, and the test
    // should stay quick on two cores; every eighth request embeds (dense, hybrid).
    let (lexical, embedded): (Vec<_>, Vec<_>) = expected.iter().cloned().partition(|(r, _)| r["method"] == "bm25");
    assert!(!lexical.is_empty() && !embedded.is_empty());
    let parallel = 240;
    let barrier = Arc::new(Barrier::new(parallel));
    let url = server.url("/v1/retrieve");
    let handles: Vec<_> = (0..parallel)
        .map(|i| {
            let (c, barrier, url) = (c.clone(), barrier.clone(), url.clone());
            let (request, want) =
                if i % 8 == 0 { embedded[i / 8 % embedded.len()].clone() } else { lexical[i % lexical.len()].clone() };
            std::thread::spawn(move || {
                barrier.wait();
                let served = ok_json(post(&c, &url, &request));
                assert_eq!(comparable(&served), want, "{request}");
            })
        })
        .collect();
    let failed = handles.into_iter().map(|h| h.join()).filter(Result::is_err).count();
    assert_eq!(failed, 0, "{failed} of {parallel} concurrent requests failed");
    retrieve_ok += parallel;

    // Adding passages: one without text fails the request, and nothing is added.
    let empty = json!({"passages": [{"title": "A", "text": "Some text."}, {"title": "Empty", "text": "   "}]});
    let (s, code, message) = error_of(post(&c, &server.url("/v1/passages"), &empty));
    assert_eq!((s, code.as_str()), (400, "invalid_request"));
    assert!(message.contains("passages[1]"), "{message}");
    assert_eq!(ok_json(c.get(server.url("/health")).send().unwrap())["passages"], 60);
    // One new and one already in the index (the same id and content: an upsert that
    // changes nothing for it): the new one is added and then found, by the server and by
    // the CLI (it is on disk).
    let add = json!({"passages": [
        {"id": "zz1", "title": "Brindlemoor Observatory", "text": "The Brindlemoor Observatory stands on Kestrel Fell and was funded by the glassmaker Odile Varga in 1911."},
        {"id": "p01", "title": "Tessany", "text": "Tessany is a small coastal republic on the eastern shore of the Sarn Sea. It declared independence in 1848, when Petra Andolin was chosen as its First Chancellor. The country is drained mainly by the Orlane River and its tributaries, and its capital and largest port is Quillfort. Its currency is the tessan crown."}
    ]});
    let added = ok_json(post(&c, &server.url("/v1/passages"), &add));
    assert_eq!((added["added"].as_u64(), added["total"].as_u64()), (Some(1), Some(61)), "{added}");
    assert_eq!(added["counts"]["documents_unchanged"], 60, "{added}");
    let question = "Who funded the observatory on Kestrel Fell?";
    for method in ["bm25", "dense", "hybrid"] {
        let served =
            ok_json(post(&c, &server.url("/v1/retrieve"), &json!({"query": question, "method": method, "k": 3})));
        retrieve_ok += 1;
        assert_eq!(served["passages"][0]["id"], "zz1", "{method}: {served}");
        let cli = cli_query(&idx, method, 3, question, &[]).unwrap();
        assert_eq!(comparable(&served), comparable(&cli));
    }
    let health = ok_json(c.get(server.url("/health")).send().unwrap());
    assert_eq!(health["passages"], 61);
    let (s, code, _) = error_of(post(&c, &server.url("/v1/passages"), &json!({"passages": [{"title": "no text"}]})));
    assert_eq!((s, code.as_str()), (422, "invalid_request"));

    // /metrics counts what happened above.
    let r = c.get(server.url("/metrics")).bearer_auth(TOKEN).send().unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().unwrap();
    let count = |route: &str, status: u16| {
        metric(&text, &format!("hoprag_http_requests_total{{route=\"{route}\",status=\"{status}\"}}"))
    };
    assert_eq!(count("/v1/retrieve", 200), Some(retrieve_ok as f64), "{text}");
    assert_eq!(count("/v1/retrieve", 401), Some(1.0));
    assert_eq!(count("/v1/retrieve", 413), Some(1.0));
    assert_eq!(count("/v1/passages", 200), Some(1.0));
    assert_eq!(count("/health", 200), Some(3.0));
    assert_eq!(count("/v1/passages", 400), Some(1.0));
    assert_eq!(count("unmatched", 404), Some(1.0));
    let histogram = "hoprag_http_request_duration_seconds_count{route=\"/v1/retrieve\"}";
    assert!(metric(&text, histogram).unwrap() >= retrieve_ok as f64);
    assert_eq!(metric(&text, "hoprag_index_passages{namespace=\"default\"}"), Some(61.0));

    // Graceful shutdown: a request in flight when SIGTERM arrives still gets its answer.
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).unwrap();
    let body = json!({"query": questions[0], "method": "bm25", "k": 2}).to_string();
    write!(
        stream,
        "POST /v1/retrieve HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        body.len()
    )
    .unwrap();
    // "100 Continue" comes when the handler starts reading the body: the request is in flight.
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 100"), "{line:?}");
    reader.read_line(&mut line).unwrap();
    let killed = Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    // Once the listener is closed the server is shutting down; then send the body.
    let mut closed = false;
    for _ in 0..500 {
        if TcpStream::connect(&addr).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(closed, "the server kept accepting connections after SIGTERM");
    stream.write_all(body.as_bytes()).unwrap();
    let mut response = String::new();
    reader.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"passages\""), "{response}");
    let mut server = server;
    let status = server.child.wait().unwrap();
    let log = server.final_log();
    assert!(status.success(), "exit status after SIGTERM: {status}; {log}");

    // One log line per request (the last one included).
    let logged = log.lines().filter(|l| l.contains("POST /v1/retrieve 200")).count();
    assert_eq!(logged, retrieve_ok + 1, "{log}");
}

#[test]
fn a_request_past_the_timeout_gets_a_504() {
    let dir = tempfile::tempdir().unwrap();
    let idx = demo_index(dir.path());
    // One worker and 1 ms: a batch of eight dense queries embeds eight questions one
    // after the other, which takes far longer than a millisecond.
    let server = Server::start(&idx, &["--set", "serve.timeout_ms=1", "--set", "serve.workers=1"]);
    let c = client();
    let batch: Vec<Value> =
        (0..8).map(|i| json!({"query": format!("question number {i} about Quillfort"), "method": "dense"})).collect();
    let (s, code, message) = error_of(post(&c, &server.url("/v1/retrieve/batch"), &json!(batch)));
    assert_eq!((s, code.as_str()), (504, "timeout"), "{message}");
    assert!(message.contains("serve.timeout_ms"));
    // The server is still healthy afterwards, and stops cleanly.
    ok_json(c.get(server.url("/health")).send().unwrap());
    assert!(server.terminate().success());
}

#[test]
fn serve_refuses_bad_settings_and_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let idx = demo_index(dir.path());
    let o = hoprag(&["serve", "--index", idx.to_str().unwrap(), "--set", "serve.max_k=0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("serve.max_k"));
    let file = idx.join("hoprag.toml");
    std::fs::write(&file, "[serve]\nmax_kay = 3\n").unwrap();
    let o = hoprag(&["serve", "--index", idx.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("serve.max_kay") && err.contains("hoprag.toml"), "{err}");
    // The same file stops every command that opens the index.
    let o = hoprag(&["query", "--index", idx.to_str().unwrap(), "x"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("serve.max_kay"));
}

/// Stores the two-server test runs on: a folder always, and the PostgreSQL store when
/// a server is given (`HOPRAG_TEST_POSTGRES`, as `scripts/test.sh` sets it), in a schema
/// of its own built from the demo corpus, dropped when the guard returned beside them is.
fn shared_stores(dir: &Path) -> (Vec<String>, Option<DropSchema>) {
    let mut stores = vec![demo_index(dir).to_string_lossy().into_owned()];
    let mut guard = None;
    if let Ok(server) = std::env::var("HOPRAG_TEST_POSTGRES") {
        let sep = if server.contains('?') { '&' } else { '?' };
        let schema = format!("serve_{}", std::process::id());
        // The application name marks the servers' connections, for the dropped-connection check.
        let url = format!("{server}{sep}schema={schema}&application_name=hoprag_{schema}");
        guard = Some(DropSchema { server, schema });
        let corpus = demo().join("corpus.jsonl");
        let o = hoprag(&["index", "--corpus", corpus.to_str().unwrap(), "--store", &url, "--force", "--json"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        stores.push(url);
    }
    (stores, guard)
}

/// Drops a test's schema when the test ends, passed or failed: the schema is named for
/// the test process, so a server that outlives many runs would otherwise keep them all.
struct DropSchema {
    server: String,
    schema: String,
}

impl Drop for DropSchema {
    fn drop(&mut self) {
        match postgres::Client::connect(&self.server, postgres::NoTls) {
            Ok(mut admin) => {
                if let Err(e) = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema)) {
                    eprintln!("could not drop the test schema {}: {e}", self.schema);
                }
            }
            Err(e) => eprintln!("could not connect to drop the test schema {}: {e}", self.schema),
        }
    }
}

#[test]
fn servers_on_one_store_answer_alike_under_load_and_follow_each_others_additions() {
    let dir = tempfile::tempdir().unwrap();
    let questions = [
        "Who founded the Varn river port?",
        "Which city lies on the bay?",
        "When was the observatory built?",
        "Who married the founder of the mill?",
    ];
    let methods = ["bm25", "dense", "hybrid", "ppr", "auto"];
    let (stores, _schema) = shared_stores(dir.path());
    for store in stores {
        let follow = ["--set", "serve.follow_ms=200"];
        let servers = [Server::start(Path::new(&store), &follow), Server::start(Path::new(&store), &follow)];
        let c = client();
        let ask = |s: &Server, method: &str, q: &str| {
            post(&c, &s.url("/v1/retrieve"), &json!({"query": q, "method": method, "k": 5}))
        };
        let reference: Vec<Value> = methods
            .iter()
            .flat_map(|m| questions.iter().map(move |q| (m, q)))
            .map(|(m, q)| comparable(&ok_json(ask(&servers[0], m, q))))
            .collect();

        // A bounded load: 4 clients, 2,000 requests in all, alternating servers.
        let errors = std::sync::atomic::AtomicUsize::new(0);
        let mismatches = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for t in 0..4 {
                let (servers, reference, errors, mismatches) = (&servers, &reference, &errors, &mismatches);
                scope.spawn(move || {
                    let c = client();
                    for i in 0..500 {
                        let case = (t * 7 + i) % reference.len();
                        let (m, q) = (methods[case / questions.len()], questions[case % questions.len()]);
                        let r =
                            post(&c, &servers[i % 2].url("/v1/retrieve"), &json!({"query": q, "method": m, "k": 5}));
                        if r.status() != 200 {
                            errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        } else if comparable(&r.json().unwrap()) != reference[case] {
                            mismatches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(errors.into_inner(), 0, "{store}: errors under load");
        assert_eq!(mismatches.into_inner(), 0, "{store}: the two servers disagreed");

        // The database drops every connection the servers hold (as on a restart): both
        // keep answering, alike, once it accepts connections again.
        if store.starts_with("postgres") {
            let server = std::env::var("HOPRAG_TEST_POSTGRES").expect("a PostgreSQL store comes from it");
            let mut admin = postgres::Client::connect(&server, postgres::NoTls).unwrap();
            let killed: i64 = admin
                .query_one(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE application_name = $1",
                    &[&format!("hoprag_serve_{}", std::process::id())],
                )
                .unwrap()
                .get(0);
            assert!(killed >= 2, "each server held a connection: {killed}");
            for (case, want) in reference.iter().enumerate() {
                let (m, q) = (methods[case / questions.len()], questions[case % questions.len()]);
                for s in &servers {
                    assert_eq!(&comparable(&ok_json(ask(s, m, q))), want, "{m} {q} after the drop");
                }
            }
        }

        // One server adds a passage, the other rewrites it: each edit is served by both
        // shortly after (each server's own at once), whichever made it.
        let lighthouse =
            |text: &str| json!({"passages": [{"id": "quennel", "title": "Quennel Lighthouse", "text": text}]});
        let question = "Which lighthouse stands on Skerry Point?";
        let health: Value = c.get(servers[0].url("/health")).send().unwrap().json().unwrap();
        let total = health["passages"].as_u64().unwrap() + 1;
        let edits = [
            (0, "The Quennel lighthouse stands on Skerry Point."),
            (1, "The Quennel lighthouse stands on Skerry Point, rebuilt in 1911."),
        ];
        for (editor, text) in edits {
            let edited = ok_json(post(&c, &servers[editor].url("/v1/passages"), &lighthouse(text)));
            assert_eq!(edited["total"], total, "{edited}");
            let top = ok_json(ask(&servers[editor], "ppr", question));
            assert_eq!(top["passages"][0]["text"], text, "{store}: the editing server serves its edit at once");
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            for s in &servers {
                loop {
                    let answer = ok_json(ask(s, "bm25", question));
                    if answer["passages"][0]["text"] == text {
                        break;
                    }
                    assert!(std::time::Instant::now() < deadline, "{store}: a server never followed: {answer}");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            // The graph methods too, and both servers alike once both serve the edit (the
            // ranking: an editing server's graph methods run the full walk until its split
            // walk is solved, which ranks the same but may differ in a score's last bits).
            let ranking = |v: &Value| -> Vec<Value> {
                v["passages"].as_array().unwrap().iter().map(|p| p["id"].clone()).collect()
            };
            for m in methods {
                let [a, b] = [&servers[0], &servers[1]].map(|s| ok_json(ask(s, m, question)));
                assert_eq!(a["passages"][0]["text"], text, "{store} {m}");
                assert_eq!(ranking(&a), ranking(&b), "{store} {m}: the two servers rank differently after the edit");
            }
        }
        // One server deletes it: neither returns it shortly after, the deleting one at once.
        let deleted = c.delete(servers[0].url("/v1/documents/quennel")).bearer_auth(TOKEN).send().unwrap();
        assert_eq!(deleted.status(), 200, "{store}: {}", deleted.text().unwrap());
        let gone = |s: &Server| {
            methods.iter().all(|m| {
                let answer = ok_json(ask(s, m, question));
                answer["passages"].as_array().unwrap().iter().all(|p| p["id"] != "quennel")
            })
        };
        assert!(gone(&servers[0]), "{store}: the deleting server still returns the passage");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !gone(&servers[1]) {
            assert!(std::time::Instant::now() < deadline, "{store}: the other server never followed the delete");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
