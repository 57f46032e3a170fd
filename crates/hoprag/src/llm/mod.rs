//! Large language models: the [`Llm`] seam every LLM stage of hoprag calls, an
//! OpenAI-compatible chat client, an on-disk response cache, token accounting and
//! lenient JSON extraction from model output.
//!
//! The usual stack is `Meter` → [`CachedLlm`] → [`OpenAiChat`] or [`LazyLocalLlm`]: the
//! meter counts what a query (or a whole run) cost, the cache makes re-runs free and
//! reproducible, and the client talks to the server with retries and a concurrency
//! limit, or runs a GGUF model in-process ([`local`]). [`from_config`] picks the endpoint
//! when one is configured and the local model otherwise.
//!
//! ```no_run
//! use hoprag::llm::{CachedLlm, ChatRequest, Llm, LlmStats, Message, Meter, OpenAiChat, OpenAiChatConfig};
//!
//! let client = OpenAiChat::new(OpenAiChatConfig::default().with_env())?;
//! let llm = CachedLlm::in_default_dir(client)?;
//! let totals = LlmStats::new();
//! let meter = Meter::with_totals(&llm, &totals);
//! let request = ChatRequest { json: true, ..ChatRequest::new(vec![Message::user("Name two rivers as a JSON list.")]) };
//! let answer = meter.chat(&request)?;
//! let rivers = meter.parse_json(&answer.text).ok(); // failures are counted, never a panic
//! println!("{rivers:?} {:?}", meter.snapshot().tokens());
//! # Ok::<(), hoprag::Error>(())
//! ```

mod cache;
mod json;
mod limit;
pub mod local;
mod openai;
mod stats;

pub use cache::{cache_key, default_cache_dir, CachedLlm};
pub use json::{field, has_any_key, parse_expecting, parse_lenient, ParseFailure};
pub use local::{LazyLocalLlm, LocalLlm, LocalModel};
pub use openai::{OpenAiChat, OpenAiChatConfig};
pub use stats::{CountingLlm, LlmStats, LlmStatsSnapshot, Meter};

use std::ops::{Add, AddAssign};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// A chat model. Implementations are shared between threads and must not assume calls
/// arrive one at a time.
pub trait Llm: Send + Sync {
    /// Identifies the model and anything else that changes its answers; part of the
    /// response cache key.
    fn id(&self) -> &str;
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse>;
    /// The caller found the answer to `request` unusable (no JSON, or not the shape
    /// asked for): a cache forgets it, so a bad answer is never served again.
    fn reject(&self, _request: &ChatRequest) {}
}

impl<L: Llm + ?Sized> Llm for &L {
    fn id(&self) -> &str {
        (**self).id()
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        (**self).chat(request)
    }
    fn reject(&self, request: &ChatRequest) {
        (**self).reject(request)
    }
}

impl<L: Llm + ?Sized> Llm for Box<L> {
    fn id(&self) -> &str {
        (**self).id()
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        (**self).chat(request)
    }
    fn reject(&self, request: &ChatRequest) {
        (**self).reject(request)
    }
}

impl<L: Llm + ?Sized> Llm for Arc<L> {
    fn id(&self) -> &str {
        (**self).id()
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        (**self).chat(request)
    }
    fn reject(&self, request: &ChatRequest) {
        (**self).reject(request)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Message { role: Role::System, content: content.into() }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Message { role: Role::User, content: content.into() }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Message { role: Role::Assistant, content: content.into() }
    }
}

/// One chat completion to ask for. Every field is part of the cache key, so two requests
/// that differ anywhere never share an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    /// 0 by default: stages want the model's best answer, and runs should repeat.
    pub temperature: f32,
    pub max_tokens: Option<u32>,
    /// Sequences at which the server stops generating.
    pub stop: Vec<String>,
    /// Ask the server for a JSON object (`response_format`), where the client is
    /// configured to; the answer is still parsed leniently, as servers differ.
    pub json: bool,
    /// Sampling seed, for servers that honour one. Identical requests share one cached
    /// answer, so several samples at a temperature above 0 need distinct seeds.
    pub seed: Option<u64>,
    /// The JSON Schema (as JSON text, properties in the order the answer should list
    /// them) of the answer a stage parses. The local model decodes under a grammar made
    /// from it, so its answer has that shape by construction; endpoints are only asked
    /// for `json` (servers differ in what schemas they take), and every answer is still
    /// parsed leniently against the shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
}

impl Default for ChatRequest {
    fn default() -> Self {
        ChatRequest {
            messages: Vec::new(),
            temperature: 0.0,
            max_tokens: None,
            stop: Vec::new(),
            json: false,
            seed: None,
            schema: None,
        }
    }
}

impl ChatRequest {
    pub fn new(messages: Vec<Message>) -> Self {
        ChatRequest { messages, ..ChatRequest::default() }
    }

    /// The same request with its answer constrained to `schema` (see [`ChatRequest::schema`]).
    pub fn with_schema(self, schema: impl Into<String>) -> Self {
        ChatRequest { schema: Some(schema.into()), ..self }
    }

    /// A single user message.
    pub fn user(prompt: impl Into<String>) -> Self {
        ChatRequest::new(vec![Message::user(prompt)])
    }

    /// Instructions, one worked example (its question and answer), then the real
    /// question: the shape of every prompt the LLM stages send. The instructions and
    /// the example are the shared prefix the local model keeps its state after.
    pub fn one_shot(
        system: impl Into<String>,
        demo_user: impl Into<String>,
        demo_answer: impl Into<String>,
        user: impl Into<String>,
    ) -> Self {
        ChatRequest::new(vec![
            Message::system(system),
            Message::user(demo_user),
            Message::assistant(demo_answer),
            Message::user(user),
        ])
    }
}

/// Tokens as the server counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

impl Add for Usage {
    type Output = Usage;
    fn add(self, other: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
        }
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self = *self + other;
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The model's answer, untrusted: parse it with [`parse_lenient`] or
    /// [`Meter::parse_json`].
    pub text: String,
    /// What the answer cost when the server produced it; for a cached answer, that
    /// original cost (nothing was spent on it now).
    pub usage: Usage,
    /// Served from the response cache, without a call to the server.
    pub cached: bool,
    /// Attempts beyond the first that the call needed.
    pub retries: u32,
    /// Wall time of the call, retries and back-off included, queueing for a
    /// concurrency slot excluded.
    pub latency_ms: f64,
}

/// Where the answers of the LLM stages come from.
#[derive(Clone)]
pub enum LlmSource {
    /// An OpenAI-compatible endpoint.
    Endpoint { model: String, url: String },
    /// The in-process GGUF model, loaded on its first call.
    Local(Arc<LazyLocalLlm>),
    /// A model the caller supplied, by its [`Llm::id`].
    Given(String),
}

impl LlmSource {
    /// Fails, without loading anything, when the model cannot answer at all: a local
    /// model that is not installed (the error names the command that installs it).
    pub fn check(&self) -> Result<()> {
        match self {
            LlmSource::Local(local) => local.check().map(|_| ()),
            LlmSource::Endpoint { .. } | LlmSource::Given(_) => Ok(()),
        }
    }
}

impl std::fmt::Display for LlmSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LlmSource::Endpoint { model, url } => write!(f, "{model} at {url}"),
            LlmSource::Local(local) => f.write_str(&local.describe()),
            LlmSource::Given(id) => f.write_str(id),
        }
    }
}

/// The chat model `config` selects, behind the response cache (so that evaluations
/// re-run for free): its OpenAI-compatible endpoint when it names a model (`llm.model`,
/// env `HOPRAG_LLM_MODEL`), else the local GGUF model `llm.local` (env
/// `HOPRAG_LLM_LOCAL`; Qwen2.5-Coder 0.5B by default), which is loaded on its first call. Nothing is
/// contacted or loaded here.
///
/// `llm.recorded` is not read here: see `retrieve::gear::llm_from_config`, which serves
/// it (the recorded reader answers GEAR's read in its shape). `llm.simulated_judge` is refused: it needs the
/// gold of an evaluation, which only `hoprag eval` and Python's `evaluate` have.
pub fn from_config(config: &OpenAiChatConfig) -> Result<(Arc<dyn Llm>, LlmSource)> {
    config.refuse_simulated_judge()?;
    fn cached<L: Llm + 'static>(inner: L, fallback: impl FnOnce() -> Result<Arc<dyn Llm>>) -> Result<Arc<dyn Llm>> {
        match CachedLlm::in_default_dir(inner) {
            Ok(cached) => Ok(Arc::new(cached)),
            // Answers only cost more without the cache; a query should not fail over it.
            Err(e) => {
                log::warn!("LLM answers will not be cached: {e}");
                fallback()
            }
        }
    }
    if config.model.trim().is_empty() {
        let local = Arc::new(LazyLocalLlm::new(&config.local));
        let llm = cached(local.clone(), || Ok(local.clone() as Arc<dyn Llm>))?;
        return Ok((llm, LlmSource::Local(local)));
    }
    let client = OpenAiChat::new(config.clone())?;
    let source = LlmSource::Endpoint { model: config.model.clone(), url: client.url().to_string() };
    let llm = cached(client, || Ok(Arc::new(OpenAiChat::new(config.clone())?)))?;
    Ok((llm, source))
}
