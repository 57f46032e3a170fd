//! Any OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, Ollama, llama.cpp
//! server, OpenAI).

use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::json::snippet;
use super::limit::Semaphore;
use super::{ChatRequest, ChatResponse, Llm, Usage};
use crate::error::{Error, Result};
use crate::http::{endpoint, post_json, RetryPolicy};

#[derive(Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct OpenAiChatConfig {
    /// e.g. `http://127.0.0.1:8000/v1`; env `HOPRAG_LLM_BASE_URL`.
    pub base_url: String,
    /// env `HOPRAG_LLM_MODEL`.
    pub model: String,
    /// Bearer token; env `HOPRAG_LLM_API_KEY` (or `OPENAI_API_KEY`). Never serialised or
    /// printed.
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
    /// Limit for one attempt; an attempt that runs past it is retried.
    pub timeout_secs: u64,
    pub retry: RetryPolicy,
    /// Requests in flight at once, across all threads using this client.
    pub max_concurrency: usize,
    /// Send `response_format: {"type": "json_object"}` for requests that ask for JSON.
    /// Turn off for servers that reject it; answers are parsed leniently either way.
    pub json_mode: bool,
    /// The in-process GGUF model the LLM stages use while `model` is empty (no
    /// endpoint): a registry name (`hoprag models`) or a path to a `.gguf` file; env
    /// `HOPRAG_LLM_LOCAL`. See [`crate::llm::from_config`].
    pub local: String,
    /// A HippoRAG OpenIE file whose recorded triples answer the triple-reading stages
    /// instead of any model (`retrieve::gear::RecordedReader`); empty: none.
    pub recorded: std::path::PathBuf,
    /// BridgeRAG's judge simulated at this accuracy from the evaluation's gold
    /// (`eval::SimulatedJudge`). Only `hoprag eval` and Python's `evaluate` take
    /// it (out of the settings, before the configuration is checked); everywhere else
    /// it is refused ([`OpenAiChatConfig::refuse_simulated_judge`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated_judge: Option<f64>,
}

impl Default for OpenAiChatConfig {
    fn default() -> Self {
        OpenAiChatConfig {
            base_url: "http://127.0.0.1:8000/v1".into(),
            model: String::new(),
            api_key: None,
            timeout_secs: 300,
            retry: RetryPolicy::default(),
            max_concurrency: 8,
            json_mode: true,
            local: super::local::DEFAULT_LOCAL_MODEL.into(),
            recorded: std::path::PathBuf::new(),
            simulated_judge: None,
        }
    }
}

impl fmt::Debug for OpenAiChatConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiChatConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout_secs", &self.timeout_secs)
            .field("retry", &self.retry)
            .field("max_concurrency", &self.max_concurrency)
            .field("json_mode", &self.json_mode)
            .field("local", &self.local)
            .field("recorded", &self.recorded)
            .field("simulated_judge", &self.simulated_judge)
            .finish()
    }
}

impl OpenAiChatConfig {
    /// Fails, naming the setting, when `simulated_judge` is set: a judge that knows the
    /// gold passages must never answer a real query, nor be mistaken for a model.
    pub fn refuse_simulated_judge(&self) -> Result<()> {
        match self.simulated_judge {
            None => Ok(()),
            Some(_) => Err(Error::Config(
                "llm.simulated_judge: a simulated judge knows the evaluation's gold passages, so only `hoprag eval` \
                 and Python's `evaluate` take it; remove it from this configuration"
                    .into(),
            )),
        }
    }

    /// Applies the environment: `HOPRAG_LLM_BASE_URL`, `HOPRAG_LLM_MODEL` and
    /// `HOPRAG_LLM_API_KEY` and `HOPRAG_LLM_LOCAL` override the configured values (a
    /// configuration file); the generic `OPENAI_API_KEY` only supplies a key where none
    /// is configured. Empty variables count as unset.
    pub fn with_env(self) -> Self {
        self.apply_env(|name| std::env::var(name).ok())
    }

    fn apply_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        if let Some(url) = var("HOPRAG_LLM_BASE_URL") {
            self.base_url = url;
        }
        if let Some(model) = var("HOPRAG_LLM_MODEL") {
            self.model = model;
        }
        if let Some(local) = var("HOPRAG_LLM_LOCAL") {
            self.local = local;
        }
        if let Some(key) = var("HOPRAG_LLM_API_KEY") {
            self.api_key = Some(key);
        } else if self.api_key.is_none() {
            self.api_key = var("OPENAI_API_KEY");
        }
        self
    }
}

pub struct OpenAiChat {
    config: OpenAiChatConfig,
    client: reqwest::blocking::Client,
    url: String,
    id: String,
    slots: Semaphore,
}

impl OpenAiChat {
    /// Checks the configuration; contacts no server until the first call.
    pub fn new(config: OpenAiChatConfig) -> Result<Self> {
        if config.model.trim().is_empty() {
            return Err(Error::Config("the OpenAI-compatible LLM needs a model name (HOPRAG_LLM_MODEL)".into()));
        }
        if config.max_concurrency == 0 || config.timeout_secs == 0 {
            return Err(Error::Config("the LLM's max_concurrency and timeout_secs must be at least 1".into()));
        }
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(config.timeout_secs))
            .build()
            .map_err(|e| Error::Config(format!("http client: {e}")))?;
        Ok(OpenAiChat {
            url: endpoint(&config.base_url, "chat/completions"),
            id: format!("openai:{}", config.model),
            slots: Semaphore::new(config.max_concurrency),
            client,
            config,
        })
    }

    pub fn config(&self) -> &OpenAiChatConfig {
        &self.config
    }

    /// The chat-completions URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Llm for OpenAiChat {
    fn id(&self) -> &str {
        &self.id
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let mut body = request_body(&self.config.model, request, self.config.json_mode);
        let _slot = self.slots.acquire();
        let start = Instant::now();
        let (mut retries, mut spent) = (0, Usage::default());
        // An answer cut off by the token budget (`finish_reason: length`) is truncated,
        // not an answer: asked once more with a larger budget, then a failure (never
        // returned, so never cached).
        for attempt in 0..2 {
            let answer = post_json(&self.client, &self.url, self.config.api_key.as_deref(), &body, &self.config.retry)?;
            retries += answer.retries + attempt;
            let (text, usage, finish) =
                parse_completion(&answer.body).map_err(|message| Error::Http { url: self.url.clone(), message })?;
            spent += usage;
            if finish.as_deref() != Some("length") {
                let latency_ms = start.elapsed().as_secs_f64() * 1000.0;
                return Ok(ChatResponse { text, usage: spent, cached: false, retries, latency_ms });
            }
            let budget = body.get("max_tokens").and_then(Value::as_u64);
            body["max_tokens"] = json!(larger_budget(budget));
        }
        Err(Error::Http {
            url: self.url.clone(),
            message: format!(
                "the answer was cut off by the token budget (finish_reason: length), also with max_tokens {}",
                body["max_tokens"]
            ),
        })
    }
}

fn request_body(model: &str, request: &ChatRequest, json_mode: bool) -> Value {
    let mut body = json!({
        "model": model,
        "messages": request.messages,
        "temperature": decimal(request.temperature),
    });
    // Optional fields are left out rather than sent as null: not every server accepts
    // null for them.
    if let Some(max_tokens) = request.max_tokens {
        body["max_tokens"] = json!(max_tokens);
    }
    if !request.stop.is_empty() {
        body["stop"] = json!(request.stop);
    }
    if let Some(seed) = request.seed {
        body["seed"] = json!(seed);
    }
    if request.json && json_mode {
        body["response_format"] = json!({"type": "json_object"});
    }
    body
}

/// The decimal an `f32` was written as: 0.7 goes out as 0.7, not as its binary value
/// 0.699999988079071.
fn decimal(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

/// The budget of the one retry after a `length` finish: twice the original, or 2,048
/// tokens where the request set none (the server's default was too small).
fn larger_budget(max_tokens: Option<u64>) -> u64 {
    max_tokens.map_or(2048, |n| n.saturating_mul(2).max(n + 64))
}

/// Reads `choices[0].message.content`, `usage` (zero where the server reports none) and
/// `finish_reason`.
fn parse_completion(body: &Value) -> Result<(String, Usage, Option<String>), String> {
    let choice = body
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| format!("answer has no choices: {}", snippet(&body.to_string(), 300)))?;
    let text = choice.pointer("/message/content").and_then(Value::as_str).ok_or_else(|| {
        let finish = choice.get("finish_reason").and_then(Value::as_str).unwrap_or("none given");
        format!("choices[0] has no message content (finish_reason: {finish}): {}", snippet(&body.to_string(), 300))
    })?;
    let count = |field: &str| body.get("usage").and_then(|u| u.get(field)).and_then(Value::as_u64).unwrap_or(0);
    Ok((
        text.to_string(),
        Usage { prompt_tokens: count("prompt_tokens"), completion_tokens: count("completion_tokens") },
        choice.get("finish_reason").and_then(Value::as_str).map(str::to_string),
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::llm::Message;

    #[test]
    fn body_leaves_out_unset_options() {
        let plain = request_body("m", &ChatRequest::user("hi"), true);
        assert_eq!(plain, json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0}));

        let full = ChatRequest {
            temperature: 0.7,
            max_tokens: Some(64),
            stop: vec!["\n\n".into()],
            json: true,
            seed: Some(7),
            ..ChatRequest::new(vec![Message::system("be brief"), Message::user("hi")])
        };
        let body = request_body("m", &full, true);
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!((body["temperature"].as_f64(), body["max_tokens"].as_u64()), (Some(0.7), Some(64)));
        assert_eq!((&body["stop"], &body["seed"]), (&json!(["\n\n"]), &json!(7)));
        assert_eq!(body["response_format"], json!({"type": "json_object"}));
        assert!(request_body("m", &full, false).get("response_format").is_none(), "json_mode off");
    }

    #[test]
    fn completion_parsing_reports_what_is_missing() {
        let ok = json!({"choices": [{"message": {"content": "yes"}}], "usage": {"prompt_tokens": 9, "completion_tokens": 1}});
        assert_eq!(
            parse_completion(&ok).unwrap(),
            ("yes".into(), Usage { prompt_tokens: 9, completion_tokens: 1 }, None)
        );
        let no_usage = json!({"choices": [{"message": {"content": ""}, "finish_reason": "length"}]});
        assert_eq!(parse_completion(&no_usage).unwrap(), (String::new(), Usage::default(), Some("length".into())));
        assert_eq!((larger_budget(Some(100)), larger_budget(Some(10)), larger_budget(None)), (200, 74, 2048));
        assert!(parse_completion(&json!({"choices": []})).unwrap_err().contains("no choices"));
        let refused = json!({"choices": [{"message": {"content": null}, "finish_reason": "content_filter"}]});
        assert!(parse_completion(&refused).unwrap_err().contains("content_filter"));
    }

    #[test]
    fn environment_overrides_the_configuration_but_openai_api_key_only_fills_a_gap() {
        let env: HashMap<&str, &str> = [
            ("HOPRAG_LLM_BASE_URL", "http://gpu:8000/v1"),
            ("HOPRAG_LLM_MODEL", "qwen"),
            ("HOPRAG_LLM_API_KEY", ""),
            ("OPENAI_API_KEY", "sk-env"),
            ("HOPRAG_LLM_LOCAL", "gemma3-270m"),
        ]
        .into();
        let var = |name: &str| env.get(name).map(|v| v.to_string());
        let cfg = OpenAiChatConfig::default().apply_env(var);
        assert_eq!((cfg.base_url.as_str(), cfg.model.as_str()), ("http://gpu:8000/v1", "qwen"));
        assert_eq!(cfg.local, "gemma3-270m");
        assert_eq!(OpenAiChatConfig::default().apply_env(|_| None).local, super::super::local::DEFAULT_LOCAL_MODEL);
        assert_eq!(cfg.api_key.as_deref(), Some("sk-env"), "empty HOPRAG_LLM_API_KEY falls through");
        let configured = OpenAiChatConfig { api_key: Some("sk-file".into()), ..Default::default() };
        assert_eq!(configured.clone().apply_env(var).api_key.as_deref(), Some("sk-file"));
        let ours = |name: &str| if name == "HOPRAG_LLM_API_KEY" { Some("sk-ours".to_string()) } else { var(name) };
        assert_eq!(configured.apply_env(ours).api_key.as_deref(), Some("sk-ours"));
    }

    #[test]
    fn the_key_is_never_printed_or_serialised() {
        let cfg = OpenAiChatConfig { api_key: Some("sk-secret".into()), ..Default::default() };
        assert!(!format!("{cfg:?}").contains("sk-secret"));
        assert!(!serde_json::to_string(&cfg).unwrap().contains("sk-secret"));
    }

    #[test]
    fn new_rejects_unusable_configs() {
        assert!(OpenAiChat::new(OpenAiChatConfig::default()).is_err(), "no model");
        let zero = OpenAiChatConfig { model: "m".into(), max_concurrency: 0, ..Default::default() };
        assert!(OpenAiChat::new(zero).is_err());
        let chat = OpenAiChat::new(OpenAiChatConfig { model: "m".into(), ..Default::default() }).unwrap();
        assert_eq!((chat.id(), chat.url()), ("openai:m", "http://127.0.0.1:8000/v1/chat/completions"));
    }
}
