//! The OpenAI-compatible embedder against a loopback fixture server, faults included.

mod common;

use std::time::Duration;

use common::fixture::{Fixture, Reply};
use hoprag::embed::{Embedder, OpenAiEmbedder, OpenAiEmbedderConfig, TextKind};
use hoprag::http::RetryPolicy;
use serde_json::json;

/// Vectors that encode the input's length, so order and prefixes can be checked.
fn embeddings(body: &serde_json::Value) -> serde_json::Value {
    let inputs = body["input"].as_array().unwrap();
    let data: Vec<_> = inputs
        .iter()
        .enumerate()
        .rev() // out of order on purpose: the client must place vectors by `index`
        .map(|(i, t)| json!({"index": i, "embedding": [t.as_str().unwrap().len() as f32, 1.0, 0.0]}))
        .collect();
    json!({"data": data, "model": body["model"]})
}

fn config(base_url: &str) -> OpenAiEmbedderConfig {
    OpenAiEmbedderConfig {
        base_url: base_url.to_string(),
        model: "fixture-embed".into(),
        api_key: Some("secret".into()),
        batch_size: 2,
        retry: RetryPolicy { max_retries: 3, initial_backoff_ms: 10, max_backoff_ms: 50 },
        timeout_secs: 2,
        ..Default::default()
    }
}

#[test]
fn batches_prefixes_auth_and_order() {
    let server = Fixture::start(|r| {
        assert_eq!(r.path, "/v1/embeddings");
        assert_eq!(r.authorization.as_deref(), Some("Bearer secret"));
        assert!(r.body["input"].as_array().unwrap().len() <= 2, "batch size respected");
        Reply::json(embeddings(&r.body))
    });
    let mut cfg = config(&server.base_url);
    cfg.query_prefix = "query: ".into();
    let e = OpenAiEmbedder::new(cfg).unwrap();
    assert_eq!(e.dim(), 3);
    assert_eq!(e.id(), "openai:fixture-embed");
    let texts: Vec<String> = ["a", "bbb", "cc", "dddd", "e"].map(String::from).to_vec();
    let v = e.embed(&texts, TextKind::Passage).unwrap();
    let lens: Vec<f32> = v.iter().map(|x| x[0] / x[1]).collect();
    assert_eq!(lens, vec![1.0, 3.0, 2.0, 4.0, 1.0]);
    let q = e.embed_one("a", TextKind::Query).unwrap();
    assert!((q[0] / q[1] - "query: a".len() as f32).abs() < 1e-4, "query prefix applied");
    assert!((q.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5, "normalised");
}

#[test]
fn retries_server_errors_and_rate_limits() {
    let server = Fixture::start(|r| match r.n {
        1 => Reply::status(500, "boom"),
        2 => Reply::status(429, "slow down"),
        _ => Reply::json(embeddings(&r.body)),
    });
    let e = OpenAiEmbedder::new(config(&server.base_url)).unwrap();
    let v = e.embed(&["x".to_string()], TextKind::Passage).unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!(server.requests.load(std::sync::atomic::Ordering::SeqCst), 4, "probe + 2 failures + success");
}

#[test]
fn gives_up_with_a_clear_error() {
    let server =
        Fixture::start(|r| if r.n == 0 { Reply::json(embeddings(&r.body)) } else { Reply::status(503, "down") });
    let e = OpenAiEmbedder::new(config(&server.base_url)).unwrap();
    let err = e.embed(&["x".to_string()], TextKind::Passage).unwrap_err().to_string();
    assert!(err.contains("503") && err.contains("gave up after 3 retries"), "{err}");
}

#[test]
fn client_errors_are_not_retried_and_garbage_is_reported() {
    let server = Fixture::start(|r| match r.n {
        0 => Reply::json(embeddings(&r.body)),
        1 => Reply::status(400, "{\"error\": \"bad model\"}"),
        _ => Reply::status(200, "this is not json"),
    });
    let e = OpenAiEmbedder::new(config(&server.base_url)).unwrap();
    let err = e.embed(&["x".to_string()], TextKind::Passage).unwrap_err().to_string();
    assert!(err.contains("400") && err.contains("bad model"), "{err}");
    let err = e.embed(&["x".to_string()], TextKind::Passage).unwrap_err().to_string();
    assert!(err.contains("not JSON"), "{err}");
}

#[test]
fn timeouts_are_retried() {
    let server = Fixture::start(|r| {
        let mut reply = Reply::json(embeddings(&r.body));
        if r.n == 1 {
            reply.delay = Duration::from_secs(4); // past the 2 s client timeout
        }
        reply
    });
    let e = OpenAiEmbedder::new(config(&server.base_url)).unwrap();
    assert_eq!(e.embed(&["x".to_string()], TextKind::Passage).unwrap().len(), 1);
}

#[test]
fn unreachable_endpoint_fails_after_retries() {
    // Port 9 on loopback: nothing listens there.
    let mut cfg = config("http://127.0.0.1:9/v1");
    cfg.retry.max_retries = 1;
    let err = OpenAiEmbedder::new(cfg).err().expect("no server").to_string();
    assert!(err.contains("gave up after 1 retries"), "{err}");
}
