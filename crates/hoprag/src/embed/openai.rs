//! Any OpenAI-compatible `/v1/embeddings` endpoint (vLLM, TEI, Ollama, OpenAI).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{l2_normalize, Embedder, TextKind};
use crate::error::{Error, Result};
use crate::http::{endpoint, post_json, RetryPolicy};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct OpenAiEmbedderConfig {
    /// e.g. `http://127.0.0.1:8000/v1`; env `HOPRAG_EMBED_BASE_URL`.
    pub base_url: String,
    pub model: String,
    /// Bearer token; env `HOPRAG_EMBED_API_KEY` (or `OPENAI_API_KEY`). Never stored in
    /// an index or printed.
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
    /// Prepended to queries / passages (NV-Embed-v2, E5 and BGE expect instructions).
    pub query_prefix: String,
    pub passage_prefix: String,
    /// Texts per request.
    pub batch_size: usize,
    pub timeout_secs: u64,
    pub retry: RetryPolicy,
    /// Vector size; discovered from the endpoint when not set.
    pub dim: Option<usize>,
}

impl Default for OpenAiEmbedderConfig {
    fn default() -> Self {
        OpenAiEmbedderConfig {
            base_url: "http://127.0.0.1:8000/v1".into(),
            model: String::new(),
            api_key: None,
            query_prefix: String::new(),
            passage_prefix: String::new(),
            batch_size: 64,
            timeout_secs: 120,
            retry: RetryPolicy::default(),
            dim: None,
        }
    }
}

impl OpenAiEmbedderConfig {
    /// Applies the environment (`HOPRAG_EMBED_*`), which overrides the configured values;
    /// `OPENAI_API_KEY` only supplies a key where none is configured.
    pub fn with_env(mut self) -> Self {
        if let Ok(url) = std::env::var("HOPRAG_EMBED_BASE_URL") {
            self.base_url = url;
        }
        // Our own variable overrides a configured key; the generic one only fills a gap.
        if let Some(key) = std::env::var("HOPRAG_EMBED_API_KEY").ok().filter(|k| !k.trim().is_empty()) {
            self.api_key = Some(key);
        } else if self.api_key.is_none() {
            self.api_key = std::env::var("OPENAI_API_KEY").ok();
        }
        if let Ok(p) = std::env::var("HOPRAG_EMBED_QUERY_PREFIX") {
            self.query_prefix = p;
        }
        if let Ok(p) = std::env::var("HOPRAG_EMBED_PASSAGE_PREFIX") {
            self.passage_prefix = p;
        }
        self
    }
}

pub struct OpenAiEmbedder {
    config: OpenAiEmbedderConfig,
    client: reqwest::blocking::Client,
    id: String,
    dim: usize,
    url: String,
}

impl OpenAiEmbedder {
    pub fn new(config: OpenAiEmbedderConfig) -> Result<Self> {
        if config.model.is_empty() {
            return Err(Error::Config("the OpenAI-compatible embedder needs a model name".into()));
        }
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(config.timeout_secs))
            .build()
            .map_err(|e| Error::Config(format!("http client: {e}")))?;
        let url = endpoint(&config.base_url, "embeddings");
        let id = format!("openai:{}", config.model);
        let mut e = OpenAiEmbedder { dim: config.dim.unwrap_or(0), config, client, id, url };
        if e.dim == 0 {
            e.dim = e.request(&["dimension probe".to_string()])?[0].len();
        }
        Ok(e)
    }

    fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let body = json!({ "model": self.config.model, "input": texts });
        let resp = post_json(&self.client, &self.url, self.config.api_key.as_deref(), &body, &self.config.retry)?;
        parse_embeddings(&resp.body, texts.len()).map_err(|m| Error::Http { url: self.url.clone(), message: m })
    }
}

/// Reads `{"data": [{"index": i, "embedding": [..]}, ..]}`, placing vectors by `index`.
fn parse_embeddings(body: &Value, expected: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = body.get("data").and_then(Value::as_array).ok_or("answer has no `data` list")?;
    let mut out = vec![Vec::new(); expected];
    for (pos, item) in data.iter().enumerate() {
        let index = item.get("index").and_then(Value::as_u64).map_or(pos, |i| i as usize);
        let emb = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("data[{pos}] has no `embedding` list"))?;
        let v: Option<Vec<f32>> = emb.iter().map(|x| x.as_f64().map(|f| f as f32)).collect();
        let mut v = v.ok_or_else(|| format!("data[{pos}].embedding holds a non-number"))?;
        l2_normalize(&mut v);
        *out.get_mut(index).ok_or_else(|| format!("data[{pos}].index {index} is out of range"))? = v;
    }
    if let Some(missing) = out.iter().position(Vec::is_empty) {
        return Err(format!("no embedding returned for input {missing} of {expected}"));
    }
    Ok(out)
}

impl Embedder for OpenAiEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[String], kind: TextKind) -> Result<Vec<Vec<f32>>> {
        let prefix = match kind {
            TextKind::Query => &self.config.query_prefix,
            TextKind::Passage => &self.config.passage_prefix,
        };
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.config.batch_size.max(1)) {
            let inputs: Vec<String> = chunk.iter().map(|t| format!("{prefix}{t}")).collect();
            let vectors = self.request(&inputs)?;
            if let Some(v) = vectors.iter().find(|v| v.len() != self.dim) {
                return Err(Error::Embedding(format!(
                    "endpoint returned a {}-dimensional vector, expected {}",
                    v.len(),
                    self.dim
                )));
            }
            out.extend(vectors);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_out_of_order_data_and_rejects_gaps() {
        let body = json!({"data": [{"index": 1, "embedding": [0.0, 2.0]}, {"index": 0, "embedding": [3.0, 0.0]}]});
        let v = parse_embeddings(&body, 2).unwrap();
        assert_eq!(v, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        let short = json!({"data": [{"index": 0, "embedding": [1.0]}]});
        assert!(parse_embeddings(&short, 2).unwrap_err().contains("input 1"));
        assert!(parse_embeddings(&json!({"x": 1}), 1).is_err());
    }
}
