//! Edits through `hoprag serve` (issue 49): documents upserted, read back, updated in
//! place and deleted over HTTP on a running server, on an index of the demo corpus
//! (MiniLM, default heuristic graph); ids with `/` and `#` percent-encoded in paths;
//! unknown ids and an empty sync refused with nothing changed; the token on every edit
//! route; and queries in flight during back-to-back edits all answered.

mod server;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{json, Value};

use server::{client, demo, demo_index, Server, TOKEN};

const QUESTION: &str = "Who founded the foundry that cast the statue of the Marquis of Ostrev?";

fn send(r: RequestBuilder) -> (u16, Value) {
    let r: Response = r.bearer_auth(TOKEN).send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().expect("a JSON body"))
}

fn ok(r: RequestBuilder) -> Value {
    let (status, body) = send(r);
    assert_eq!(status, 200, "{body}");
    body
}

/// The status, `error.code` and `error.message` of an error response.
fn error(r: RequestBuilder) -> (u16, String, String) {
    let (status, body) = send(r);
    let field = |f: &str| body["error"][f].as_str().unwrap_or_else(|| panic!("no error.{f} in {body}")).to_string();
    (status, field("code"), field("message"))
}

fn retrieve(c: &Client, s: &Server, method: &str, k: usize, query: &str) -> Vec<Value> {
    let body = ok(c.post(s.url("/v1/retrieve")).json(&json!({"query": query, "method": method, "k": k})));
    body["passages"].as_array().unwrap().clone()
}

fn ids(passages: &[Value]) -> Vec<String> {
    passages.iter().map(|p| p["id"].as_str().unwrap().to_string()).collect()
}

fn generation(c: &Client, s: &Server) -> String {
    ok(c.get(s.url("/health")))["generation"].as_str().unwrap().to_string()
}

fn demo_rows() -> Vec<Value> {
    std::fs::read_to_string(demo().join("corpus.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn documents_are_upserted_read_updated_and_deleted_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let idx = demo_index(dir.path());
    let server = Server::start(&idx, &[]);
    let c = client();
    let start = generation(&c, &server);

    // Every edit route wants the token, and changes nothing without it.
    let routes: Vec<(&str, &str, Option<Value>)> = vec![
        ("PUT", "/v1/documents", Some(json!({"passages": [{"text": "Intruder text."}]}))),
        ("GET", "/v1/documents/p01", None),
        ("DELETE", "/v1/documents/p01", None),
        ("POST", "/v1/delete", Some(json!({"ids": ["p01"]}))),
        ("POST", "/v1/sync", Some(json!({"passages": [], "allow_empty": true}))),
        ("POST", "/v1/passages", Some(json!({"passages": [{"text": "Intruder text."}]}))),
    ];
    for (method, path, body) in &routes {
        let mut r = c.request(method.parse().unwrap(), server.url(path));
        if let Some(b) = body {
            r = r.json(b);
        }
        let r = r.send().unwrap();
        assert_eq!(r.status().as_u16(), 401, "{method} {path} without a token");
        let body: Value = r.json().unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{method} {path}");
    }
    assert_eq!(generation(&c, &server), start, "nothing changed without the token");
    assert_eq!(ok(c.get(server.url("/health")))["passages"], 60);

    // The OpenAPI document describes the edit routes.
    let doc = ok(c.get(server.url("/openapi.json")));
    for (path, method) in [
        ("/v1/documents", "put"),
        ("/v1/documents/{id}", "get"),
        ("/v1/documents/{id}", "delete"),
        ("/v1/delete", "post"),
        ("/v1/sync", "post"),
        ("/v1/passages", "post"),
    ] {
        assert!(doc["paths"][path][method].is_object(), "{method} {path} missing from the OpenAPI document");
    }
    for schema in ["UpsertRequest", "DeleteRequest", "SyncRequest", "EditResponse", "DocumentResponse", "NewPassage"] {
        assert!(doc["components"]["schemas"][schema].is_object(), "schema {schema} missing");
    }

    // The example: two passages put on a running server reach the graph methods
    // at once, and their metadata comes back with them.
    let put = json!({"passages": [
        {"id": "zorblat", "title": "Zorblat Quenneville",
         "text": "Zorblat Quenneville was a metallurgist who founded the Trelkin Foundry.",
         "meta": {"source": "https://example.org/zq", "year": 1901}},
        {"id": "trelkin", "title": "Trelkin Foundry",
         "text": "The Trelkin Foundry cast the bronze statue of the Marquis of Ostrev."}
    ]});
    let dry = ok(c.put(server.url("/v1/documents")).json(&json!({"passages": put["passages"], "dry_run": true})));
    assert_eq!((dry["changed"].as_bool(), dry["dry_run"].as_bool()), (Some(false), Some(true)), "{dry}");
    assert_eq!((dry["documents_added"].as_u64(), dry["passages_total"].as_u64()), (Some(2), Some(62)), "{dry}");
    assert_eq!(generation(&c, &server), start, "a dry run writes nothing");
    let added = ok(c.put(server.url("/v1/documents")).json(&put));
    assert_eq!(added["changed"], true, "{added}");
    assert_eq!((added["documents_added"].as_u64(), added["passages_added"].as_u64()), (Some(2), Some(2)));
    assert_eq!(added["passages_total"], 62);
    assert_ne!(added["generation"].as_str().unwrap(), start);
    assert_eq!(added["generation"].as_str().unwrap(), generation(&c, &server), "served when the response comes");
    for method in ["ppr", "phasegraph", "auto"] {
        let got = retrieve(&c, &server, method, 5, QUESTION);
        let got_ids = ids(&got);
        assert!(got_ids.contains(&"zorblat".into()) && got_ids.contains(&"trelkin".into()), "{method}: {got_ids:?}");
        let z = got.iter().find(|p| p["id"] == "zorblat").unwrap();
        assert_eq!(z["meta"], json!({"source": "https://example.org/zq", "year": 1901}), "{method}: {z}");
        assert!(z.get("doc").is_none(), "a document of its own has no doc field: {z}");
        let t = got.iter().find(|p| p["id"] == "trelkin").unwrap();
        assert!(t.get("meta").is_none(), "no metadata, no field: {t}");
    }
    // The same rows again change nothing: no new generation.
    let again = ok(c.put(server.url("/v1/documents")).json(&put));
    assert_eq!((again["changed"].as_bool(), again["documents_unchanged"].as_u64()), (Some(false), Some(62)));

    // An update in place: GET shows the new text; no method returns the old one.
    let old_text = "bronze statue of the Marquis";
    let update = json!({"passages": [{"id": "trelkin", "title": "Trelkin Foundry",
        "text": "The Trelkin Foundry cast the iron gates of Vellmoor Abbey."}]});
    let updated = ok(c.put(server.url("/v1/documents")).json(&update));
    assert_eq!((updated["documents_replaced"].as_u64(), updated["passages_total"].as_u64()), (Some(1), Some(62)));
    let got = ok(c.get(server.url("/v1/documents/trelkin")));
    assert_eq!(got["id"], "trelkin");
    assert_eq!(got["passages"].as_array().unwrap().len(), 1);
    assert_eq!(got["passages"][0]["text"], "The Trelkin Foundry cast the iron gates of Vellmoor Abbey.");
    for method in ["bm25", "dense", "hybrid", "ppr", "phasegraph", "auto"] {
        for q in [QUESTION, "bronze statue of the Marquis of Ostrev"] {
            let got = retrieve(&c, &server, method, 10, q);
            assert!(got.iter().all(|p| !p["text"].as_str().unwrap().contains(old_text)), "{method}: old text served");
        }
    }
    let vellmoor = retrieve(&c, &server, "bm25", 1, "iron gates of Vellmoor Abbey");
    assert_eq!(ids(&vellmoor), ["trelkin"]);

    // Ids with `/` and `#`, percent-encoded in the path (an unencoded `/` works too).
    let notes = json!({"passages": [
        {"id": "notes/a.md#0", "doc": "notes/a.md", "title": "Grelwick Mill",
         "text": "The Grelwick mill on the Pardle stream ground oats for the abbey of Sunwold.", "meta": {"path": "notes/a.md"}},
        {"id": "notes/a.md#1", "doc": "notes/a.md", "title": "Grelwick Mill",
         "text": "Its miller, Ossian Threave, kept bees beside the Grelwick mill race."}
    ]});
    let put_notes = ok(c.put(server.url("/v1/documents")).json(&notes));
    assert_eq!((put_notes["documents_added"].as_u64(), put_notes["passages_added"].as_u64()), (Some(1), Some(2)));
    let by_doc = ok(c.get(server.url("/v1/documents/notes%2Fa.md")));
    assert_eq!(by_doc["id"], "notes/a.md");
    assert_eq!(ids(by_doc["passages"].as_array().unwrap()), ["notes/a.md#0", "notes/a.md#1"]);
    assert_eq!(by_doc["passages"][0]["doc"], "notes/a.md");
    assert_eq!(by_doc["passages"][0]["meta"], json!({"path": "notes/a.md"}));
    let by_passage = ok(c.get(server.url("/v1/documents/notes%2Fa.md%231")));
    assert_eq!(by_passage["id"], "notes/a.md", "a passage id gives the document holding it");
    assert_eq!(by_passage["passages"], by_doc["passages"]);
    assert_eq!(ok(c.get(server.url("/v1/documents/notes/a.md")))["passages"], by_doc["passages"]);
    let hits = retrieve(&c, &server, "bm25", 3, "Who kept bees beside the Grelwick mill race?");
    assert_eq!(hits[0]["id"], "notes/a.md#1");
    assert_eq!(hits[0]["doc"], "notes/a.md");
    // One passage of the document, then the document.
    let one = ok(c.delete(server.url("/v1/documents/notes%2Fa.md%231")));
    assert_eq!((one["passages_removed"].as_u64(), one["passages_total"].as_u64()), (Some(1), Some(63)), "{one}");
    let (status, code, message) = error(c.get(server.url("/v1/documents/notes%2Fa.md%231")));
    assert_eq!((status, code.as_str()), (404, "not_found"));
    assert!(message.contains("\"notes/a.md#1\""), "{message}");
    assert_eq!(
        ids(ok(c.get(server.url("/v1/documents/notes%2Fa.md")))["passages"].as_array().unwrap()),
        ["notes/a.md#0"]
    );
    let whole = ok(c.delete(server.url("/v1/documents/notes%2Fa.md")));
    assert_eq!((whole["documents_deleted"].as_u64(), whole["passages_total"].as_u64()), (Some(1), Some(62)));
    assert_eq!(error(c.get(server.url("/v1/documents/notes%2Fa.md"))).0, 404);
    for method in ["bm25", "dense", "ppr", "phasegraph", "auto"] {
        for q in ["Who kept bees beside the Grelwick mill race?", "What did the Grelwick mill grind?"] {
            let got = ids(&retrieve(&c, &server, method, 10, q));
            assert!(got.iter().all(|id| !id.starts_with("notes/")), "{method}: deleted passages served: {got:?}");
        }
    }

    // Unknown ids: a 404 naming them, and nothing changes.
    let before = generation(&c, &server);
    let (status, code, message) = error(c.delete(server.url("/v1/documents/no%2Fsuch%23doc")));
    assert_eq!((status, code.as_str()), (404, "not_found"));
    assert!(message.contains("\"no/such#doc\""), "{message}");
    let (status, _, message) = error(c.post(server.url("/v1/delete")).json(&json!({"ids": ["zorblat", "nope"]})));
    assert_eq!(status, 404);
    assert!(message.contains("\"nope\"") && !message.contains("zorblat"), "{message}");
    assert_eq!(generation(&c, &server), before, "nothing changed");
    assert_eq!(ok(c.get(server.url("/v1/documents/zorblat")))["passages"][0]["id"], "zorblat");

    // Bad input: 4xx naming the entry at fault, nothing changed.
    let cases = [
        (json!({"passages": [{"text": "Fine."}, {"text": "   "}]}), 400, "passages[1]"),
        (json!({"passages": [{"doc": "", "text": "Fine."}]}), 400, "passages[0]"),
        (json!({"passages": [{"id": "", "text": "Fine."}]}), 400, "passages[0]"),
        (json!({"passages": [{"id": "x1", "text": "One."}, {"id": "x1", "text": "Two."}]}), 400, "x1"),
        (json!({"passages": [{"title": "no text"}]}), 422, "text"),
        (json!({"passages": [{"text": "x", "meta": [1, 2]}]}), 422, "meta"),
        (json!({"passages": [{"text": "x", "colour": "red"}]}), 422, "colour"),
    ];
    for (body, want, mention) in cases {
        let (status, _, message) = error(c.put(server.url("/v1/documents")).json(&body));
        assert_eq!(status, want, "{body}: {message}");
        assert!(message.contains(mention), "{body}: {message:?} should name {mention:?}");
    }
    let (status, _, _) = error(c.get(server.url("/v1/documents/%FF%FE")));
    assert_eq!(status, 400, "an id that is not UTF-8 once decoded");
    let (status, _, message) = error(c.delete(server.url("/v1/documents/zorblat?dry_run=maybe")));
    assert_eq!(status, 400);
    assert!(message.contains("dry_run"), "{message}");
    assert_eq!(generation(&c, &server), before, "nothing changed");

    // Deleting many: a dry run, then for real.
    let dry = ok(c.post(server.url("/v1/delete")).json(&json!({"ids": ["zorblat"], "dry_run": true})));
    assert_eq!((dry["changed"].as_bool(), dry["documents_deleted"].as_u64()), (Some(false), Some(1)));
    let dry_one = ok(c.delete(server.url("/v1/documents/zorblat?dry_run=true")));
    assert_eq!((dry_one["changed"].as_bool(), dry_one["documents_deleted"].as_u64()), (Some(false), Some(1)));
    assert_eq!(generation(&c, &server), before);
    let deleted = ok(c.post(server.url("/v1/delete")).json(&json!({"ids": ["zorblat"]})));
    assert_eq!((deleted["changed"].as_bool(), deleted["passages_total"].as_u64()), (Some(true), Some(61)));
    assert_eq!(error(c.get(server.url("/v1/documents/zorblat"))).0, 404);
    assert!(!ids(&retrieve(&c, &server, "bm25", 10, "Zorblat Quenneville metallurgist")).contains(&"zorblat".into()));

    // Sync: an empty corpus is refused unless allowed; the demo corpus brings the index
    // back to it (the remaining addition deleted).
    let before = generation(&c, &server);
    let (status, code, message) = error(c.post(server.url("/v1/sync")).json(&json!({"passages": []})));
    assert_eq!((status, code.as_str()), (400, "invalid_request"));
    assert!(message.contains("allow_empty"), "{message}");
    assert_eq!(generation(&c, &server), before);
    let rows = demo_rows();
    let dry = ok(c.post(server.url("/v1/sync")).json(&json!({"passages": rows, "dry_run": true})));
    assert_eq!((dry["documents_deleted"].as_u64(), dry["documents_unchanged"].as_u64()), (Some(1), Some(60)), "{dry}");
    let synced = ok(c.post(server.url("/v1/sync")).json(&json!({"passages": rows})));
    assert_eq!((synced["changed"].as_bool(), synced["passages_total"].as_u64()), (Some(true), Some(60)));
    assert_eq!(ok(c.get(server.url("/health")))["passages"], 60);
    assert_eq!(error(c.get(server.url("/v1/documents/trelkin"))).0, 404);

    // POST /v1/passages upserts too, and takes doc and meta.
    let posted = ok(c.post(server.url("/v1/passages")).json(&json!({"passages": [
        {"id": "q/1", "doc": "q", "title": "Quennel", "text": "The Quennel lighthouse stands on Skerry Point.", "meta": {"k": "v"}},
        {"id": "p01", "title": "Tessany", "text": "Tessany is a small coastal republic; its capital is Quillfort."}
    ]})));
    assert_eq!((posted["added"].as_u64(), posted["total"].as_u64()), (Some(2), Some(61)), "{posted}");
    assert_eq!(posted["counts"]["documents_replaced"], 1, "p01 replaced in place: {posted}");
    let q = ok(c.get(server.url("/v1/documents/q")));
    assert_eq!(q["passages"][0]["meta"], json!({"k": "v"}));
    let p01 = ok(c.get(server.url("/v1/documents/p01")));
    assert_eq!(p01["passages"][0]["text"], "Tessany is a small coastal republic; its capital is Quillfort.");
}

/// Queries keep being answered, every one of them, while edits publish new generations
/// back to back (each edit removes generations no longer served).
#[test]
fn queries_in_flight_finish_during_back_to_back_edits() {
    let dir = tempfile::tempdir().unwrap();
    let idx = demo_index(dir.path());
    let server = Arc::new(Server::start(&idx, &[]));
    let c = client();
    let stop = Arc::new(AtomicBool::new(false));
    let questions = [
        "What year did Tessany declare independence?",
        "Who founded the company that built the lighthouse on Varn Island?",
        QUESTION,
    ];
    let clients: Vec<_> = (0..3)
        .map(|t| {
            let (c, server, stop) = (c.clone(), server.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut answered = 0;
                let mut failures = Vec::new();
                let methods = ["bm25", "ppr", "dense", "phasegraph", "auto"];
                while !stop.load(Ordering::Relaxed) || answered < 3 {
                    let method = methods[(answered + t) % methods.len()];
                    let body = json!({"query": questions[answered % questions.len()], "method": method, "k": 5});
                    let r = c.post(server.url("/v1/retrieve")).bearer_auth(TOKEN).json(&body).send();
                    match r {
                        Ok(r) if r.status() == 200 => {
                            let v: Value = r.json().unwrap();
                            if v["passages"].as_array().map_or(0, Vec::len) != 5 {
                                failures.push(format!("{method}: {v}"));
                            }
                        }
                        Ok(r) => failures.push(format!("{method}: {} {}", r.status(), r.text().unwrap_or_default())),
                        Err(e) => failures.push(format!("{method}: {e}")),
                    }
                    answered += 1;
                }
                (answered, failures)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let edits = [
        (
            "PUT",
            "/v1/documents",
            json!({"passages": [{"id": "zorblat", "title": "Zorblat Quenneville",
            "text": "Zorblat Quenneville was a metallurgist who founded the Trelkin Foundry."}]}),
        ),
        (
            "PUT",
            "/v1/documents",
            json!({"passages": [{"id": "zorblat", "title": "Zorblat Quenneville",
            "text": "Zorblat Quenneville was a bell founder who ran the Trelkin Foundry."}]}),
        ),
        ("POST", "/v1/delete", json!({"ids": ["zorblat", "p02"]})),
    ];
    let mut generations = vec![generation(&c, &server)];
    for (method, path, body) in &edits {
        let r = ok(c.request(method.parse().unwrap(), server.url(path)).json(body));
        assert_eq!(r["changed"], true, "{method} {path}: {r}");
        generations.push(r["generation"].as_str().unwrap().to_string());
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for h in clients {
        let (answered, failures) = h.join().unwrap();
        assert!(
            failures.is_empty(),
            "{} of {answered} queries failed: {:?}",
            failures.len(),
            &failures[..failures.len().min(5)]
        );
        total += answered;
    }
    eprintln!("{total} queries answered during {} edits; generations {generations:?}", edits.len());
    generations.dedup();
    assert_eq!(generations.len(), 4, "each edit published a generation: {generations:?}");
    assert_eq!(ok(c.get(server.url("/health")))["passages"], 59);
    for method in ["bm25", "ppr", "auto"] {
        let got = ids(&retrieve(&c, &server, method, 10, "Zorblat Quenneville bell founder"));
        assert!(!got.contains(&"zorblat".into()) && !got.contains(&"p02".into()), "{method}: {got:?}");
    }
}
