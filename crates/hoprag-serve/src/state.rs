//! What the handlers share: the namespaces served, the tokens, the limits, the worker
//! slots and the metrics; and the operations behind the routes, free of HTTP.

use std::sync::Arc;

use super::api::{ApiError, RetrieveRequest, RetrieveResponse};
use super::auth::{Access, Scope, Tokens};
use super::metrics::{Gauges, Metrics, NamespaceGauge};
use super::namespaces::{Namespaces, Served};
use super::settings::ServeSettings;
use hoprag::engine::Engine;
use hoprag::error::{Error, Result};
use hoprag::llm::{CountingLlm, LlmStats};
use hoprag::retrieve::registry::{self, DEFAULT_METHOD, METHODS};
use hoprag::retrieve::Query;
use hoprag::store::Namespace;

/// Configuration sections that are fixed when the engine is built (the embedder and
/// the LLM client), so a request cannot change them.
const SERVER_WIDE: &[&str] = &["embedder", "llm"];

pub struct AppState {
    pub namespaces: Namespaces,
    /// One permit per retrieval allowed to run at once.
    workers: Arc<tokio::sync::Semaphore>,
    pub settings: ServeSettings,
    pub metrics: Metrics,
    llm_stats: Arc<LlmStats>,
    pub tokens: Tokens,
    /// `/openapi.json`, rendered once.
    pub openapi: String,
}

/// A request that passed the checks, with the engine configured for it.
pub struct Checked {
    pub query: String,
    pub method: String,
    pub k: usize,
    pub namespace: Namespace,
    pub engine: Arc<Engine>,
    /// The request's metadata filter, applied on the worker: the first filtered query of
    /// a generation builds its meta columns, which is no work for an async thread.
    pub filter: Option<serde_json::Value>,
}

impl AppState {
    /// Serves one engine built in code (its default namespace only). Meters the engine's
    /// LLM for `/metrics`, and loads the entity graph now rather than on the first request.
    pub fn new(engine: Engine, settings: ServeSettings) -> Result<AppState> {
        settings.check()?;
        let llm_stats = Arc::new(LlmStats::new());
        let engine = meter(engine, &llm_stats);
        Self::with(Namespaces::of_engine(engine)?, llm_stats, settings)
    }

    /// Serves the namespaces of the store `spec` (a folder or a PostgreSQL URL), each
    /// opened on first use with `config`; the default namespace is opened now if it holds
    /// an index.
    pub fn open(spec: &str, config: hoprag::Config, settings: ServeSettings) -> Result<AppState> {
        settings.check()?;
        let llm_stats = Arc::new(LlmStats::new());
        let stats = llm_stats.clone();
        let namespaces = Namespaces::of_store(
            spec.to_string(),
            config,
            settings.max_open_namespaces,
            Box::new(move |e| meter(e, &stats)),
        );
        match namespaces.get(&Namespace::default()) {
            Ok(_) | Err(Error::NoNamespace { .. }) => {}
            Err(e) => return Err(e),
        }
        Self::with(namespaces, llm_stats, settings)
    }

    fn with(namespaces: Namespaces, llm_stats: Arc<LlmStats>, settings: ServeSettings) -> Result<AppState> {
        let tokens = Tokens::new(settings.token.as_deref(), settings.tokens_file.as_deref())?;
        Ok(AppState {
            namespaces,
            workers: Arc::new(tokio::sync::Semaphore::new(settings.worker_count())),
            settings,
            metrics: Metrics::default(),
            llm_stats,
            tokens,
            openapi: super::openapi_json(),
        })
    }

    /// The namespace a request names (the default when it names none), if the request's
    /// token opens it for `access`: one the token does not open gets the same 404 as one
    /// that does not exist; one it may read but not write, a 403. Opens the namespace if
    /// it is not open (on the blocking pool: a load reads files and builds structures).
    pub async fn served(
        self: &Arc<Self>,
        scope: &Scope,
        name: Option<&str>,
        access: Access,
    ) -> Result<Arc<Served>, ApiError> {
        let namespace = parse_namespace(name)?;
        if !scope.allows(&namespace, Access::Read) {
            return Err(no_namespace(&namespace));
        }
        if !scope.allows(&namespace, access) {
            return Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "read_only",
                format!("this token may read namespace {:?} but not write to it", namespace.as_str()),
            ));
        }
        if let Some(served) = self.namespaces.get_open(&namespace) {
            return Ok(served);
        }
        let state = self.clone();
        let asked = namespace.clone();
        let opened = tokio::task::spawn_blocking(move || state.namespaces.get(&asked))
            .await
            .map_err(|e| ApiError::internal(format!("opening the namespace failed: {e}")))?;
        opened.map_err(|e| match e {
            Error::NoNamespace { .. } => no_namespace(&namespace),
            e => ApiError::internal(format!("opening namespace {namespace}: {e}")),
        })
    }

    /// Checks a request against the limits and resolves its method and options.
    pub fn check(&self, served: &Served, request: RetrieveRequest) -> Result<Checked, ApiError> {
        let s = &self.settings;
        let RetrieveRequest { query, method, k, options, namespace: _, filter } = request;
        if query.trim().is_empty() {
            return Err(ApiError::bad_request("invalid_request", "query is empty"));
        }
        let chars = query.chars().count();
        if chars > s.max_query_chars {
            return Err(ApiError::bad_request(
                "limit_exceeded",
                format!("query has {chars} characters; the limit is {} (serve.max_query_chars)", s.max_query_chars),
            ));
        }
        let k = k.unwrap_or(s.default_k);
        if k == 0 {
            return Err(ApiError::bad_request("invalid_request", "k must be at least 1"));
        }
        if k > s.max_k {
            return Err(ApiError::bad_request(
                "limit_exceeded",
                format!("k = {k} is above the limit of {} (serve.max_k)", s.max_k),
            ));
        }
        let method = method.unwrap_or_else(|| DEFAULT_METHOD.to_string());
        if !METHODS.iter().any(|m| m.name == method) {
            return Err(ApiError::bad_request(
                "unknown_method",
                format!("unknown method {method:?}; known: {}", registry::names().join(", ")),
            ));
        }
        let engine = served.engine();
        let engine = if options.is_empty() {
            engine
        } else {
            if let Some(path) =
                options.keys().find(|p| SERVER_WIDE.iter().any(|s| p.as_str() == *s || p.starts_with(&format!("{s}."))))
            {
                return Err(ApiError::bad_request(
                    "invalid_option",
                    format!(
                        "option {path:?}: the {} section is server-wide; set it in hoprag.toml",
                        SERVER_WIDE.join(" and ")
                    ),
                ));
            }
            let settings: Vec<_> = options.into_iter().collect();
            let config = hoprag::config::with_settings(&engine.config, &settings)
                .map_err(|e| ApiError::bad_request("invalid_option", option_message(e)))?;
            Arc::new(engine.with_config(config))
        };
        Ok(Checked { query, method, k, namespace: served.namespace.clone(), engine, filter })
    }

    /// Runs a checked request: CPU-bound and synchronous, for the blocking pool.
    pub fn retrieve(&self, c: Checked) -> Result<RetrieveResponse, ApiError> {
        let retriever = c.engine.retriever(&c.method).map_err(|e| match e {
            // The method exists but cannot run on this index or configuration.
            Error::Config(_) | Error::Index { .. } | Error::Unsupported(_) => {
                ApiError::bad_request("method_unavailable", e.to_string())
            }
            e => ApiError::internal(e.to_string()),
        })?;
        let filter = match &c.filter {
            None => None,
            Some(value) => {
                Some(c.engine.select(value).map_err(|e| ApiError::bad_request("invalid_filter", e.to_string()))?)
            }
        };
        let retrieval = retriever
            .retrieve(&Query { filter, ..Query::new(c.query.as_str()) }, c.k)
            .map_err(|e| ApiError::internal(format!("{} failed: {e}", c.method)))?;
        self.metrics.record_retrieval(&c.namespace, &c.method);
        Ok(RetrieveResponse::new(&c.engine, c.query, c.method, c.k, retrieval))
    }

    /// Runs `f` on the blocking pool once a worker slot is free. Dropping the returned
    /// future (a timeout, a client gone) before the slot is granted does no work.
    pub async fn on_worker<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&AppState) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let permit = self
            .workers
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ApiError::internal("the server is shutting down"))?;
        let state = self.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            f(&state)
        })
        .await
        .map_err(|e| ApiError::internal(format!("the request's task failed: {e}")))?
    }

    /// Serves newer generations of every open namespace, published by another process
    /// (or another server on the same database); says which switched.
    pub fn follow_store(&self) -> Vec<(Namespace, Result<bool>)> {
        self.namespaces.opened().into_iter().map(|s| (s.namespace.clone(), s.follow_store())).collect()
    }

    /// `/metrics` as `scope` may see it: the series of the namespaces it opens (those
    /// open now), and the server's own series only for a token that reads every one.
    pub fn render_metrics(&self, scope: &Scope) -> String {
        let open: Vec<NamespaceGauge> = self
            .namespaces
            .opened()
            .iter()
            .filter(|s| scope.allows(&s.namespace, Access::Read))
            .map(|s| NamespaceGauge { namespace: s.namespace.to_string(), passages: s.engine().index.len() })
            .collect();
        let everything = scope.reads_everything();
        let gauges = Gauges {
            namespaces: open,
            llm: (everything && self.metered()).then(|| self.llm_stats.snapshot()),
            server_wide: everything,
        };
        self.metrics
            .render(&gauges, &|namespace| Namespace::new(namespace).is_ok_and(|n| scope.allows(&n, Access::Read)))
    }

    /// Whether an LLM is configured for the engines (its counters are then written, zero
    /// or not).
    fn metered(&self) -> bool {
        self.namespaces.opened().first().is_some_and(|s| s.engine().llm().is_some())
    }
}

/// The engine with its LLM counted into `stats`.
fn meter(engine: Engine, stats: &Arc<LlmStats>) -> Engine {
    engine.wrap_llm(|inner| Arc::new(CountingLlm { inner, stats: stats.clone() }))
}

/// A namespace name from a request, checked.
pub fn parse_namespace(name: Option<&str>) -> Result<Namespace, ApiError> {
    match name {
        None => Ok(Namespace::default()),
        Some(name) => Namespace::new(name).map_err(|e| {
            ApiError::bad_request("invalid_namespace", e.to_string().trim_start_matches("configuration: ").to_string())
        }),
    }
}

/// The 404 of a namespace that does not exist, or that the token does not open: the same
/// words for both, so that a token cannot tell them apart.
pub fn no_namespace(namespace: &Namespace) -> ApiError {
    ApiError::not_found(format!("no namespace {:?} here", namespace.as_str()))
}

pub fn generation_name(engine: &Engine) -> String {
    engine.index.generation().to_string()
}

/// `with_settings` errors, without the "configuration:" prefix meant for the CLI.
fn option_message(e: Error) -> String {
    match e {
        Error::Config(message) => format!("options: {message}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoprag::llm::{ChatRequest, ChatResponse, Llm, Usage};

    /// Answers from "cache" when asked "cached", fails when asked "fail".
    struct Scripted;

    impl Llm for Scripted {
        fn id(&self) -> &str {
            "scripted"
        }
        fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
            match request.messages[0].content.as_str() {
                "fail" => Err(Error::Other("scripted failure".into())),
                prompt => Ok(ChatResponse {
                    text: "ok".into(),
                    usage: Usage { prompt_tokens: 7, completion_tokens: 3 },
                    cached: prompt == "cached",
                    retries: 0,
                    latency_ms: 1.0,
                }),
            }
        }
    }

    #[test]
    fn the_counting_llm_feeds_the_server_totals() {
        let stats = Arc::new(LlmStats::new());
        let llm = CountingLlm { inner: Arc::new(Scripted), stats: stats.clone() };
        assert_eq!(llm.id(), "scripted");
        llm.chat(&ChatRequest::user("fresh")).unwrap();
        llm.chat(&ChatRequest::user("cached")).unwrap();
        assert!(llm.chat(&ChatRequest::user("fail")).is_err());
        let s = stats.snapshot();
        assert_eq!((s.calls, s.cache_hits, s.errors), (3, 1, 1));
        assert_eq!(s.tokens_spent, Usage { prompt_tokens: 7, completion_tokens: 3 });
        assert_eq!(s.tokens_from_cache, Usage { prompt_tokens: 7, completion_tokens: 3 });
    }
}
