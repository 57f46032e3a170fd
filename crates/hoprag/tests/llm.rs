//! The LLM client against a loopback OpenAI-compatible fixture server, with faults
//! injected (server errors, rate limits, time-outs, garbage), and the response cache.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::fixture::{Fixture, Reply};
use hoprag::http::RetryPolicy;
use hoprag::llm::{
    cache_key, CachedLlm, ChatRequest, Llm, LlmStats, Message, Meter, OpenAiChat, OpenAiChatConfig, Usage,
};
use serde_json::{json, Value};

const USAGE: Usage = Usage { prompt_tokens: 12, completion_tokens: 3 };

/// A chat completion whose answer is `text`.
fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-fixture",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": USAGE.prompt_tokens, "completion_tokens": USAGE.completion_tokens},
    })
}

/// Answers with the last message, so answers to different requests differ.
fn echo(body: &Value) -> Reply {
    let last = body["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("");
    Reply::json(completion(&format!("echo: {last}")))
}

fn config(base_url: &str) -> OpenAiChatConfig {
    OpenAiChatConfig {
        base_url: base_url.to_string(),
        model: "fixture-chat".into(),
        api_key: Some("secret".into()),
        timeout_secs: 1,
        retry: RetryPolicy { max_retries: 3, initial_backoff_ms: 10, max_backoff_ms: 50 },
        max_concurrency: 4,
        json_mode: true,
        local: String::new(),
        ..OpenAiChatConfig::default()
    }
}

fn client(server: &Fixture) -> OpenAiChat {
    OpenAiChat::new(config(&server.base_url)).unwrap()
}

fn requests(server: &Fixture) -> usize {
    server.requests.load(Ordering::SeqCst)
}

#[test]
fn sends_an_openai_request_and_accounts_for_usage() {
    // Requests are checked here rather than in the handler, where a failed assertion
    // would only look like a dropped connection.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let server = Fixture::start(move |r| {
        log.lock().unwrap().push((r.path.clone(), r.authorization.clone(), r.body.clone()));
        Reply::json(completion("Sure: ```json\n{'answer': 'Oslo',}\n```"))
    });
    let llm = client(&server);
    let totals = LlmStats::new();
    let meter = Meter::with_totals(&llm, &totals);
    let request = ChatRequest {
        max_tokens: Some(32),
        stop: vec!["\n\n".into()],
        json: true,
        ..ChatRequest::new(vec![Message::system("Answer in JSON."), Message::user("Capital of Norway?")])
    };
    let answer = meter.chat(&request).unwrap();
    assert_eq!((answer.usage, answer.cached, answer.retries), (USAGE, false, 0));
    assert!(answer.latency_ms > 0.0);
    assert_eq!(meter.parse_json(&answer.text).unwrap(), json!({"answer": "Oslo"}));

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let (path, authorization, body) = &seen[0];
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(authorization.as_deref(), Some("Bearer secret"));
    assert_eq!(body["model"], "fixture-chat");
    assert_eq!(body["temperature"], 0.0, "temperature 0 by default");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Answer in JSON."},
            {"role": "user", "content": "Capital of Norway?"}
        ])
    );
    assert_eq!((&body["max_tokens"], &body["stop"]), (&json!(32), &json!(["\n\n"])));
    assert_eq!(body["response_format"], json!({"type": "json_object"}));

    for s in [meter.snapshot(), totals.snapshot()] {
        assert_eq!((s.calls, s.cache_hits, s.errors, s.retries, s.parse_failures), (1, 0, 0, 0, 0));
        assert_eq!((s.tokens_spent, s.tokens_from_cache), (USAGE, Usage::default()));
    }
}

#[test]
fn server_errors_are_retried_and_counted() {
    let server = Fixture::start(|r| if r.n == 0 { Reply::status(500, "boom") } else { echo(&r.body) });
    let llm = client(&server);
    let meter = Meter::new(&llm);
    let answer = meter.chat(&ChatRequest::user("hi")).unwrap();
    assert_eq!((answer.text.as_str(), answer.retries), ("echo: hi", 1));
    assert_eq!(requests(&server), 2);
    let s = meter.snapshot();
    assert_eq!((s.calls, s.retries, s.errors), (1, 1, 0));
    assert_eq!(s.tokens_spent, USAGE, "only the answer counts tokens");
}

#[test]
fn rate_limits_are_retried() {
    let server = Fixture::start(|r| if r.n < 2 { Reply::status(429, "slow down") } else { echo(&r.body) });
    let llm = client(&server);
    let answer = llm.chat(&ChatRequest::user("hi")).unwrap();
    assert_eq!(answer.retries, 2);
    assert_eq!(requests(&server), 3);
}

#[test]
fn an_attempt_past_the_timeout_is_retried() {
    let server = Fixture::start(|r| {
        let mut reply = echo(&r.body);
        if r.n == 0 {
            reply.delay = Duration::from_secs(3); // past the 1 s client timeout
        }
        reply
    });
    let llm = client(&server);
    let answer = llm.chat(&ChatRequest::user("hi")).unwrap();
    assert_eq!((answer.text.as_str(), answer.retries), ("echo: hi", 1));
    assert!(answer.latency_ms >= 1000.0, "latency includes the attempt that timed out: {}", answer.latency_ms);
    assert_eq!(requests(&server), 2);
}

#[test]
fn persistent_failure_is_a_clear_error_after_the_retries() {
    let server = Fixture::start(|_| Reply::status(503, "overloaded"));
    let llm = client(&server);
    let meter = Meter::new(&llm);
    let err = meter.chat(&ChatRequest::user("hi")).unwrap_err().to_string();
    assert!(err.contains("/v1/chat/completions") && err.contains("503"), "{err}");
    assert!(err.contains("gave up after 3 retries"), "{err}");
    assert_eq!(requests(&server), 4);
    let s = meter.snapshot();
    assert_eq!((s.calls, s.errors, s.tokens_spent), (1, 1, Usage::default()));
}

#[test]
fn connection_errors_are_retried() {
    // Port 9 on loopback: nothing listens there.
    let mut cfg = config("http://127.0.0.1:9/v1");
    cfg.retry.max_retries = 1;
    let err = OpenAiChat::new(cfg).unwrap().chat(&ChatRequest::user("hi")).unwrap_err().to_string();
    assert!(err.contains("request failed") && err.contains("gave up after 1 retries"), "{err}");
}

#[test]
fn a_body_that_is_not_json_is_a_clear_error() {
    let server = Fixture::start(|_| Reply::status(200, "<html>502 Bad Gateway</html>"));
    let llm = client(&server);
    let meter = Meter::new(&llm);
    let err = meter.chat(&ChatRequest::user("hi")).unwrap_err().to_string();
    assert!(err.contains("/v1/chat/completions") && err.contains("not JSON") && err.contains("Bad Gateway"), "{err}");
    assert_eq!(meter.snapshot().errors, 1);
}

#[test]
fn an_answer_without_content_is_a_clear_error() {
    let server = Fixture::start(|r| match r.n {
        0 => Reply::json(json!({"object": "chat.completion", "choices": []})),
        _ => Reply::json(
            json!({"choices": [{"message": {"role": "assistant", "content": null}, "finish_reason": "length"}]}),
        ),
    });
    let llm = client(&server);
    let err = llm.chat(&ChatRequest::user("hi")).unwrap_err().to_string();
    assert!(err.contains("/v1/chat/completions") && err.contains("no choices"), "{err}");
    let err = llm.chat(&ChatRequest::user("hi")).unwrap_err().to_string();
    assert!(err.contains("no message content") && err.contains("length"), "{err}");
}

#[test]
fn garbage_model_output_is_counted_not_fatal() {
    let answers = ["I'm sorry, I cannot answer in JSON.", "```json\n{'hops': ['A', 'B',],}\n```", "{\"hops\": [\"A\""];
    let server = Fixture::start(move |r| Reply::json(completion(answers[r.n % answers.len()])));
    let llm = client(&server);
    let meter = Meter::new(&llm);
    let parsed: Vec<bool> = (0..answers.len())
        .map(|i| {
            let answer = meter.chat(&ChatRequest::user(format!("question {i}"))).unwrap();
            meter.parse_json(&answer.text).is_ok()
        })
        .collect();
    assert_eq!(parsed, [false, true, false]);
    let s = meter.snapshot();
    assert_eq!((s.calls, s.parse_failures), (3, 2));
    assert!(s.parse_failure_examples[0].snippet.contains("sorry"));
    assert!(s.parse_failure_examples[1].reason.contains("truncated"), "{:?}", s.parse_failure_examples[1]);
}

#[test]
fn second_run_is_served_from_the_cache() {
    let server = Fixture::start(|r| echo(&r.body));
    let dir = tempfile::tempdir().unwrap();
    let request = ChatRequest::new(vec![Message::system("Be brief."), Message::user("first hop")]);

    let first_run = CachedLlm::new(client(&server), dir.path()).unwrap();
    let first = first_run.chat(&request).unwrap();
    assert!(!first.cached);
    assert_eq!(requests(&server), 1);
    drop(first_run);

    // A fresh client and cache over the same folder: a re-run.
    let llm = CachedLlm::new(client(&server), dir.path()).unwrap();
    let totals = LlmStats::new();
    let meter = Meter::with_totals(&llm, &totals);
    let again = meter.chat(&request).unwrap();
    assert!(again.cached);
    assert_eq!((again.text.as_str(), again.usage), (first.text.as_str(), first.usage));
    assert_eq!(requests(&server), 1, "a hit makes no request");
    let s = meter.snapshot();
    assert_eq!((s.calls, s.cache_hits, s.retries), (1, 1, 0));
    assert_eq!((s.tokens_spent, s.tokens_from_cache, s.tokens()), (Usage::default(), USAGE, USAGE));

    let variants = [
        ChatRequest { temperature: 0.2, ..request.clone() },
        ChatRequest { max_tokens: Some(8), ..request.clone() },
        ChatRequest { stop: vec![".".to_string()], ..request.clone() },
        ChatRequest { json: true, ..request.clone() },
        ChatRequest { seed: Some(1), ..request.clone() },
        ChatRequest::new(vec![Message::system("Be brief."), Message::user("second hop")]),
    ];
    for (i, variant) in variants.iter().enumerate() {
        assert!(!meter.chat(variant).unwrap().cached, "variant {i} hit");
        assert_eq!(requests(&server), 2 + i, "variant {i} reached the server");
    }
    let other_model = CachedLlm::new(
        OpenAiChat::new(OpenAiChatConfig { model: "other".into(), ..config(&server.base_url) }).unwrap(),
        dir.path(),
    )
    .unwrap();
    assert!(!other_model.chat(&request).unwrap().cached, "another model misses");

    let t = totals.snapshot();
    assert_eq!((t.calls, t.cache_hits), (1 + variants.len() as u64, 1));
    assert_eq!(t.tokens_spent.total(), variants.len() as u64 * USAGE.total());
}

#[test]
fn a_corrupt_cache_entry_is_a_miss_not_an_error() {
    let server = Fixture::start(|r| echo(&r.body));
    let dir = tempfile::tempdir().unwrap();
    let llm = CachedLlm::new(client(&server), dir.path()).unwrap();
    let request = ChatRequest::user("hi");
    let path = llm.entry_path(&cache_key(llm.id(), &request));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "{\"format\": 1, \"key\": \"cut off mid-wri").unwrap();

    let answer = llm.chat(&request).unwrap();
    assert_eq!((answer.text.as_str(), answer.cached), ("echo: hi", false));
    assert_eq!(requests(&server), 1);
    assert!(llm.chat(&request).unwrap().cached, "the answer replaced the corrupt entry");
    assert_eq!(requests(&server), 1);
}

#[test]
fn concurrency_limit_is_respected() {
    const DELAY: Duration = Duration::from_millis(100);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (now, peak) = (in_flight.clone(), most.clone());
    let server = Fixture::start(move |r| {
        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(n, Ordering::SeqCst);
        std::thread::sleep(DELAY);
        now.fetch_sub(1, Ordering::SeqCst);
        echo(&r.body)
    });
    let llm = OpenAiChat::new(OpenAiChatConfig { max_concurrency: 2, ..config(&server.base_url) }).unwrap();

    let start = Instant::now();
    std::thread::scope(|s| {
        for i in 0..8 {
            let llm = &llm;
            s.spawn(move || {
                let answer = llm.chat(&ChatRequest::user(format!("q{i}"))).unwrap();
                assert_eq!(answer.text, format!("echo: q{i}"));
            });
        }
    });
    let most = most.load(Ordering::SeqCst);
    assert!((1..=2).contains(&most), "{most} requests in flight at once with a limit of 2");
    // 8 requests through 2 slots take at least 4 rounds.
    assert!(start.elapsed() >= DELAY * 4, "{:?}", start.elapsed());
    assert_eq!(requests(&server), 8);
}
