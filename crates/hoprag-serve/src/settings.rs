//! The `[serve]` section: where the server listens, its token and its limits.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ServeSettings {
    /// Address to listen on; loopback unless you mean to expose the server.
    pub addr: String,
    /// Bearer token every route but `/health` requires; env `HOPRAG_TOKEN`. Never
    /// serialised or printed.
    #[serde(skip_serializing)]
    pub token: Option<String>,
    /// Largest request body (JSON), in bytes; bounds passage additions too.
    pub max_body_bytes: usize,
    /// Largest `k` a request may ask for.
    pub max_k: usize,
    /// `k` of requests that name none.
    pub default_k: usize,
    /// Longest query, in characters.
    pub max_query_chars: usize,
    /// Most queries in one batch request.
    pub max_batch: usize,
    /// Limit on one retrieval request (a batch counts as one), in milliseconds, the
    /// wait for a worker included; a request that runs past it gets a 504. Passage additions are not cut off: an
    /// index write is never abandoned half-way.
    pub timeout_ms: u64,
    /// Retrievals that run at once (they are CPU-bound); 0 = one per CPU core. The rest
    /// wait in line, without holding a thread.
    pub workers: usize,
    /// How often the server asks the store for a newer generation, in milliseconds
    /// (0: never; it still serves its own additions at once).
    pub follow_ms: u64,
    /// Most questions an evaluation run from the web page (`POST /v1/eval`) may take.
    pub max_eval_questions: usize,
    /// Namespaces kept open (loaded in memory) at once; beyond it the least recently
    /// used is closed, and opened again on its next request.
    pub max_open_namespaces: usize,
    /// Tokens with scopes (namespaces to read, to write), as SHA-256 digests: see
    /// `docs/serve.md`. Default: `tokens.toml` in the index folder, if there is one.
    pub tokens_file: Option<std::path::PathBuf>,
}

impl Default for ServeSettings {
    fn default() -> Self {
        ServeSettings {
            addr: "127.0.0.1:8080".into(),
            token: None,
            max_body_bytes: 4 << 20,
            max_k: 100,
            default_k: 5,
            max_query_chars: 2_000,
            max_batch: 64,
            timeout_ms: 30_000,
            workers: 0,
            follow_ms: 1_000,
            max_eval_questions: 200,
            max_open_namespaces: 8,
            tokens_file: None,
        }
    }
}

impl ServeSettings {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// `workers`, with 0 resolved to the number of CPU cores.
    pub fn worker_count(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        }
    }

    /// Rejects limits that would make every request fail.
    pub fn check(&self) -> hoprag::Result<()> {
        let bad = |field: &str| Err(hoprag::Error::Config(format!("serve.{field} must be at least 1")));
        for (field, value) in [
            ("max_body_bytes", self.max_body_bytes),
            ("max_k", self.max_k),
            ("default_k", self.default_k),
            ("max_query_chars", self.max_query_chars),
            ("max_batch", self.max_batch),
            ("timeout_ms", self.timeout_ms as usize),
            ("max_eval_questions", self.max_eval_questions),
            ("max_open_namespaces", self.max_open_namespaces),
        ] {
            if value == 0 {
                return bad(field);
            }
        }
        if self.default_k > self.max_k {
            return Err(hoprag::Error::Config(format!(
                "serve.default_k ({}) is larger than serve.max_k ({})",
                self.default_k, self.max_k
            )));
        }
        Ok(())
    }
}

impl fmt::Debug for ServeSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeSettings")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_k", &self.max_k)
            .field("default_k", &self.default_k)
            .field("max_query_chars", &self.max_query_chars)
            .field("max_batch", &self.max_batch)
            .field("timeout_ms", &self.timeout_ms)
            .field("workers", &self.workers)
            .field("follow_ms", &self.follow_ms)
            .field("max_eval_questions", &self.max_eval_questions)
            .field("max_open_namespaces", &self.max_open_namespaces)
            .field("tokens_file", &self.tokens_file)
            .finish()
    }
}
