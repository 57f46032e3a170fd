//! Token and call accounting: [`LlmStats`] counters that threads share, and the [`Meter`]
//! that feeds them from the calls made through it, for per-query and per-run reports.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::json::{parse_lenient, ParseFailure};
use super::{ChatRequest, ChatResponse, Llm, Usage};
use crate::error::Result;

/// Parse failures kept verbatim for the report; the rest are only counted.
const MAX_FAILURE_EXAMPLES: usize = 5;

/// Counters of LLM calls, safe to share between threads (in an `Arc` or by reference).
/// Counts are exact once the calls they record have returned.
#[derive(Debug, Default)]
pub struct LlmStats {
    calls: AtomicU64,
    cache_hits: AtomicU64,
    errors: AtomicU64,
    retries: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    cached_prompt_tokens: AtomicU64,
    cached_completion_tokens: AtomicU64,
    latency_us: AtomicU64,
    parse_failures: AtomicU64,
    failure_examples: Mutex<Vec<ParseFailure>>,
}

/// What [`LlmStats`] had counted at one moment, ready to serialise into a report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmStatsSnapshot {
    /// Chat calls, cache hits and failed calls included.
    pub calls: u64,
    pub cache_hits: u64,
    /// Calls that returned an error (after their retries).
    pub errors: u64,
    /// Retries of the calls that succeeded.
    pub retries: u64,
    /// Tokens of the answers the server produced for these calls: the cost paid now.
    pub tokens_spent: Usage,
    /// Tokens the cache hits cost when they were first produced: not paid again.
    pub tokens_from_cache: Usage,
    /// Wall time of all calls added up (more than elapsed time when they overlap).
    pub latency_ms: f64,
    /// Answers from which no JSON could be recovered.
    pub parse_failures: u64,
    /// The first few of those, with their reasons.
    pub parse_failure_examples: Vec<ParseFailure>,
}

impl LlmStatsSnapshot {
    /// Every token the calls cost, whether paid now or by the run that filled the cache:
    /// a method's cost, the same on a cold and a warm cache.
    pub fn tokens(&self) -> Usage {
        self.tokens_spent + self.tokens_from_cache
    }
}

impl std::ops::Add for LlmStatsSnapshot {
    type Output = LlmStatsSnapshot;

    fn add(mut self, other: LlmStatsSnapshot) -> LlmStatsSnapshot {
        self.calls += other.calls;
        self.cache_hits += other.cache_hits;
        self.errors += other.errors;
        self.retries += other.retries;
        self.tokens_spent += other.tokens_spent;
        self.tokens_from_cache += other.tokens_from_cache;
        self.latency_ms += other.latency_ms;
        self.parse_failures += other.parse_failures;
        let room = MAX_FAILURE_EXAMPLES.saturating_sub(self.parse_failure_examples.len());
        self.parse_failure_examples.extend(other.parse_failure_examples.into_iter().take(room));
        self
    }
}

impl LlmStats {
    pub fn new() -> Self {
        LlmStats::default()
    }

    pub fn record_response(&self, response: &ChatResponse) {
        let (prompt, completion) = if response.cached {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
            (&self.cached_prompt_tokens, &self.cached_completion_tokens)
        } else {
            (&self.prompt_tokens, &self.completion_tokens)
        };
        prompt.fetch_add(response.usage.prompt_tokens, Ordering::Relaxed);
        completion.fetch_add(response.usage.completion_tokens, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.retries.fetch_add(u64::from(response.retries), Ordering::Relaxed);
        self.latency_us.fetch_add((response.latency_ms * 1000.0).max(0.0) as u64, Ordering::Relaxed);
    }

    pub fn record_error(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one call's outcome: its answer, or a failed call.
    pub fn record(&self, outcome: &Result<ChatResponse>) {
        match outcome {
            Ok(response) => self.record_response(response),
            Err(_) => self.record_error(),
        }
    }

    pub fn record_parse_failure(&self, failure: &ParseFailure) {
        self.parse_failures.fetch_add(1, Ordering::Relaxed);
        let mut examples = self.failure_examples.lock().unwrap_or_else(PoisonError::into_inner);
        if examples.len() < MAX_FAILURE_EXAMPLES {
            examples.push(failure.clone());
        }
    }

    pub fn snapshot(&self) -> LlmStatsSnapshot {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        LlmStatsSnapshot {
            calls: get(&self.calls),
            cache_hits: get(&self.cache_hits),
            errors: get(&self.errors),
            retries: get(&self.retries),
            tokens_spent: Usage {
                prompt_tokens: get(&self.prompt_tokens),
                completion_tokens: get(&self.completion_tokens),
            },
            tokens_from_cache: Usage {
                prompt_tokens: get(&self.cached_prompt_tokens),
                completion_tokens: get(&self.cached_completion_tokens),
            },
            latency_ms: get(&self.latency_us) as f64 / 1000.0,
            parse_failures: get(&self.parse_failures),
            parse_failure_examples: self.failure_examples.lock().unwrap_or_else(PoisonError::into_inner).clone(),
        }
    }
}

/// An [`Llm`] that counts the calls made through it, and the answers that held no JSON.
///
/// Give each query its own meter for per-query costs; meters made
/// [`with_totals`](Meter::with_totals) also add everything to run-wide counters, which
/// any number of meters on any threads can share.
pub struct Meter<'a> {
    llm: &'a dyn Llm,
    own: LlmStats,
    totals: Option<&'a LlmStats>,
}

impl<'a> Meter<'a> {
    pub fn new(llm: &'a dyn Llm) -> Self {
        Meter { llm, own: LlmStats::new(), totals: None }
    }

    pub fn with_totals(llm: &'a dyn Llm, totals: &'a LlmStats) -> Self {
        Meter { llm, own: LlmStats::new(), totals: Some(totals) }
    }

    /// What this meter alone has counted.
    pub fn stats(&self) -> &LlmStats {
        &self.own
    }

    pub fn snapshot(&self) -> LlmStatsSnapshot {
        self.own.snapshot()
    }

    /// [`parse_lenient`], with a failure counted (and logged) instead of only returned:
    /// callers fall back as they see fit, and the report says how often they had to.
    pub fn parse_json(&self, text: &str) -> Result<Value, ParseFailure> {
        parse_lenient(text).inspect_err(|failure| {
            log::debug!("{}: unparseable answer: {failure}", self.llm.id());
            self.sinks().for_each(|s| s.record_parse_failure(failure));
        })
    }

    /// [`Meter::parse_json`] of the answer to `request`; an answer without JSON is also
    /// [rejected](Llm::reject), so the cache does not keep it.
    pub fn parse_answer(&self, request: &ChatRequest, text: &str) -> Result<Value, ParseFailure> {
        self.parse_json(text).inspect_err(|_| self.llm.reject(request))
    }

    /// Like [`Meter::parse_answer`], taking the first value in the answer that `accept`s
    /// (see [`parse_expecting`](super::parse_expecting)); a value of another shape is a
    /// counted, rejected "wrong shape" failure.
    pub fn parse_answer_as(
        &self,
        request: &ChatRequest,
        text: &str,
        accept: impl Fn(&Value) -> bool,
        expected: &str,
    ) -> Result<Value, ParseFailure> {
        super::parse_expecting(text, accept, expected).inspect_err(|failure| {
            log::debug!("{}: unusable answer: {failure}", self.llm.id());
            self.sinks().for_each(|s| s.record_parse_failure(failure));
            self.llm.reject(request);
        })
    }

    /// Counts an answer that parsed but is not the shape asked for (wrong keys, a lone
    /// item for a list, ...) as a parse failure, and rejects it.
    pub fn wrong_shape(&self, request: &ChatRequest, text: &str, reason: &str) -> ParseFailure {
        let failure = ParseFailure::wrong_shape(reason, text);
        log::debug!("{}: {failure}", self.llm.id());
        self.sinks().for_each(|s| s.record_parse_failure(&failure));
        self.llm.reject(request);
        failure
    }

    fn sinks(&self) -> impl Iterator<Item = &LlmStats> {
        std::iter::once(&self.own).chain(self.totals)
    }
}

impl Llm for Meter<'_> {
    fn id(&self) -> &str {
        self.llm.id()
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let outcome = self.llm.chat(request);
        self.sinks().for_each(|s| s.record(&outcome));
        outcome
    }

    fn reject(&self, request: &ChatRequest) {
        self.llm.reject(request)
    }
}

/// The owned counterpart of [`Meter`]: counts every call made through it into shared
/// totals that outlive any one query (the server's `/metrics`).
pub struct CountingLlm {
    pub inner: Arc<dyn Llm>,
    pub stats: Arc<LlmStats>,
}

impl Llm for CountingLlm {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let outcome = self.inner.chat(request);
        self.stats.record(&outcome);
        outcome
    }

    fn reject(&self, request: &ChatRequest) {
        self.inner.reject(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Answers "ok" with fixed usage, served from "cache" when the prompt says so, and
    /// fails when the prompt is "fail".
    struct Scripted;

    impl Llm for Scripted {
        fn id(&self) -> &str {
            "scripted"
        }
        fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
            let prompt = &request.messages[0].content;
            if prompt == "fail" {
                return Err(Error::Other("scripted failure".into()));
            }
            Ok(ChatResponse {
                text: "ok".into(),
                usage: Usage { prompt_tokens: 10, completion_tokens: 2 },
                cached: prompt == "cache",
                retries: 1,
                latency_ms: 1.5,
            })
        }
    }

    #[test]
    fn meters_split_spent_and_cached_tokens_and_roll_up_into_totals() {
        let totals = LlmStats::new();
        let first = Meter::with_totals(&Scripted, &totals);
        first.chat(&ChatRequest::user("fresh")).unwrap();
        first.chat(&ChatRequest::user("cache")).unwrap();
        let second = Meter::with_totals(&Scripted, &totals);
        assert!(second.chat(&ChatRequest::user("fail")).is_err());
        assert!(second.parse_json("no json here").is_err());
        assert_eq!(second.parse_json("{'a': 1}").unwrap()["a"], 1);

        let a = first.snapshot();
        assert_eq!((a.calls, a.cache_hits, a.errors, a.retries), (2, 1, 0, 2));
        assert_eq!(a.tokens_spent, Usage { prompt_tokens: 10, completion_tokens: 2 });
        assert_eq!(a.tokens_from_cache, Usage { prompt_tokens: 10, completion_tokens: 2 });
        assert_eq!(a.tokens().total(), 24);
        assert!((a.latency_ms - 3.0).abs() < 1e-9);

        let b = second.snapshot();
        assert_eq!((b.calls, b.errors, b.parse_failures), (1, 1, 1));
        assert_eq!(b.parse_failure_examples[0].snippet, "no json here");

        let t = totals.snapshot();
        assert_eq!((t.calls, t.cache_hits, t.errors, t.retries, t.parse_failures), (3, 1, 1, 2, 1));
        assert_eq!(t.tokens(), a.tokens() + b.tokens());
    }

    #[test]
    fn failure_examples_are_bounded_but_all_counted() {
        let stats = LlmStats::new();
        let meter = Meter::with_totals(&Scripted, &stats);
        for _ in 0..MAX_FAILURE_EXAMPLES + 3 {
            assert!(meter.parse_json("nope").is_err());
        }
        let s = stats.snapshot();
        assert_eq!(s.parse_failures, MAX_FAILURE_EXAMPLES as u64 + 3);
        assert_eq!(s.parse_failure_examples.len(), MAX_FAILURE_EXAMPLES);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["tokens_spent"]["prompt_tokens"], 0, "serialisable for reports");
    }
}
