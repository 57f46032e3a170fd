//! What the handlers share: the served engine (swapped whole when passages are
//! added), the limits, the worker slots and the metrics; and the operations behind
//! the routes, free of HTTP.

use std::collections::HashSet;
use std::sync::Arc;

use arc_swap::ArcSwap;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use super::api::{ApiError, RetrieveRequest, RetrieveResponse};
use super::metrics::{Gauges, Metrics};
use super::settings::ServeSettings;
use hoprag::engine::Engine;
use hoprag::error::{Error, Result};
use hoprag::llm::{CountingLlm, LlmStats};
use hoprag::progress::Silent;
use hoprag::retrieve::registry::{self, DEFAULT_METHOD, METHODS};
use hoprag::retrieve::Query;
use hoprag::store::edit::{EditOptions, EditReport, Request, WalkUpdate};

/// Configuration sections that are fixed when the engine is built (the embedder and
/// the LLM client), so a request cannot change them.
const SERVER_WIDE: &[&str] = &["embedder", "llm"];

pub struct AppState {
    /// Swapped whole, without a lock: see [`AppState::serve_live`].
    engine: ArcSwap<Engine>,
    /// One permit per retrieval allowed to run at once.
    workers: Arc<Semaphore>,
    pub settings: ServeSettings,
    pub metrics: Metrics,
    llm_stats: Option<Arc<LlmStats>>,
    /// SHA-256 of the bearer token: comparing digests in constant time leaks neither
    /// the token's bytes nor its length.
    token_digest: Option<[u8; 32]>,
    /// `/openapi.json`, rendered once.
    pub openapi: String,
    /// This server's edits in flight: the store follower leaves the generations they
    /// publish to them (each serves its own from memory, [`AppState::serve_edited`])
    /// rather than loading them from the store a second time meanwhile.
    editing: std::sync::atomic::AtomicUsize,
}

/// Counts an edit in flight while it lives.
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// What an edit did, and the engine served after it.
pub struct Edited {
    pub report: EditReport,
    pub engine: Arc<Engine>,
}

/// A request that passed the checks, with the engine configured for it.
pub struct Checked {
    pub query: String,
    pub method: String,
    pub k: usize,
    pub engine: Arc<Engine>,
}

impl AppState {
    /// Meters the engine's LLM (if it has one) for `/metrics`, and loads the entity
    /// graph now rather than on the first request.
    pub fn new(engine: Engine, settings: ServeSettings) -> Result<AppState> {
        settings.check()?;
        let llm_stats = engine.llm().map(|_| Arc::new(LlmStats::new()));
        let engine = match &llm_stats {
            Some(stats) => engine.wrap_llm(|inner| Arc::new(CountingLlm { inner, stats: stats.clone() })),
            None => engine,
        };
        preload_graph(&engine)?;
        let token_digest = settings.token.as_deref().filter(|t| !t.is_empty()).map(|t| Sha256::digest(t).into());
        Ok(AppState {
            engine: ArcSwap::from_pointee(engine),
            workers: Arc::new(Semaphore::new(settings.worker_count())),
            settings,
            metrics: Metrics::default(),
            llm_stats,
            token_digest,
            openapi: super::openapi_json(),
            editing: Default::default(),
        })
    }

    /// The engine now served; a request keeps the one it started with.
    pub fn engine(&self) -> Arc<Engine> {
        self.engine.load_full()
    }

    pub fn requires_token(&self) -> bool {
        self.token_digest.is_some()
    }

    /// Whether `given` is the token (always true when none is set).
    pub fn token_matches(&self, given: Option<&str>) -> bool {
        use subtle::ConstantTimeEq;
        match (&self.token_digest, given) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(expected), Some(given)) => {
                let given: [u8; 32] = Sha256::digest(given).into();
                expected[..].ct_eq(&given[..]).into()
            }
        }
    }

    /// Checks a request against the limits and resolves its method and options.
    pub fn check(&self, request: RetrieveRequest) -> Result<Checked, ApiError> {
        let s = &self.settings;
        let RetrieveRequest { query, method, k, options } = request;
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
        let engine = self.engine();
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
        Ok(Checked { query, method, k, engine })
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
        let retrieval = retriever
            .retrieve(&Query::new(c.query.as_str()), c.k)
            .map_err(|e| ApiError::internal(format!("{} failed: {e}", c.method)))?;
        self.metrics.record_retrieval(&c.method);
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

    /// Applies an edit (upsert, delete or sync) to the index on disk, as one new
    /// generation published atomically with every method's structures brought up to
    /// date, and then serves it; a dry run or an edit that changes nothing publishes
    /// nothing. Every edit route comes here. The store orders concurrent writers (no
    /// lock is held here); readers keep the engine they have. An unknown id to delete is
    /// a 404 naming it, and nothing changes. Blocking: call it on the blocking pool.
    pub fn edit(&self, request: Request, options: EditOptions) -> Result<Edited, ApiError> {
        let engine = self.engine();
        if let Request::Delete(ids) = &request {
            let known: HashSet<&str> =
                engine.index.passages().iter().flat_map(|p| [p.id.as_str(), p.document()]).collect();
            let unknown: Vec<String> =
                ids.iter().filter(|id| !known.contains(id.as_str())).take(10).map(|id| format!("{id:?}")).collect();
            if !unknown.is_empty() {
                return Err(ApiError::not_found(format!(
                    "no document or passage has the id {}; nothing was deleted",
                    unknown.join(", ")
                )));
            }
        }
        let _in_flight = InFlight::new(&self.editing);
        // The walk is solved after the new generation is served (see serve_edited).
        let options = EditOptions { walk: WalkUpdate::Defer, ..options };
        let started = std::time::Instant::now();
        let report = engine.edit(&request, &options, &Silent).map_err(|e| match e {
            // The request's own fault: a refused sync, an id used twice, an id clash.
            Error::Config(message) => ApiError::bad_request("invalid_request", message),
            e @ Error::Input { .. } => ApiError::bad_request("invalid_request", e.to_string()),
            e => ApiError::internal(format!("the edit failed: {e}")),
        })?;
        drop(engine);
        let written = started.elapsed();
        if report.generation.is_some() {
            self.serve_edited(&report).map_err(|e| ApiError::internal(format!("serving the new generation: {e}")))?;
        }
        log::debug!(
            "edit: written in {:.1} ms, served after {:.1} ms; {:?}",
            written.as_secs_f64() * 1e3,
            started.elapsed().as_secs_f64() * 1e3,
            report.work
        );
        Ok(Edited { report, engine: self.engine() })
    }

    /// Serves the store's live generation if another process (or another server on the
    /// same database) has published a newer one; says whether it switched.
    pub fn follow_store(&self) -> Result<bool> {
        if self.editing.load(std::sync::atomic::Ordering::Acquire) > 0 {
            return Ok(false);
        }
        let engine = self.engine();
        // A generation that only stored the walk this server solved already holds what it
        // serves: nothing to load.
        if engine.store.generation()?.is_none() || hoprag::store::is_live(engine.store.as_ref(), &engine.index)? {
            return Ok(false);
        }
        self.serve_live()
    }

    /// Loads the store's live generation (with its graph) and serves it from now on;
    /// says whether it switched. No lock is held while loading (the graph's structures
    /// are built on rayon): the loaded engine replaces the served one only if that is
    /// still the one it was loaded after, so of two requests that load concurrently the
    /// later generation is served either way.
    fn serve_live(&self) -> Result<bool> {
        self.serve_live_with(None, Engine::prepare)
    }

    /// [`AppState::serve_live`] after this server's own edit, published without its walk:
    /// served with the edit's graph as it is in memory ([`Engine::reload_after`]), the
    /// walk solved and stored in the background ([`Engine::prepare_walk_in_background`]).
    pub fn serve_edited(&self, edit: &EditReport) -> Result<bool> {
        self.serve_live_with(Some(edit), Engine::prepare_walk_in_background)
    }

    fn serve_live_with(&self, edit: Option<&EditReport>, prepare: fn(&Engine) -> Result<()>) -> Result<bool> {
        loop {
            let served = self.engine();
            if served.store.generation()?.is_none() || hoprag::store::is_live(served.store.as_ref(), &served.index)? {
                return Ok(false);
            }
            let started = std::time::Instant::now();
            let next = Arc::new(match edit {
                Some(edit) => served.reload_after(edit)?,
                None => served.reload()?,
            });
            let loaded = started.elapsed();
            // Warmed before it is served (the old generation answers meanwhile), so that
            // no request waits for the new one's walk precomputation or triple index.
            prepare(&next)?;
            log::debug!(
                "serving a new generation: loaded in {:.1} ms, prepared in {:.1} ms",
                loaded.as_secs_f64() * 1e3,
                (started.elapsed() - loaded).as_secs_f64() * 1e3
            );
            let previous = self.engine.compare_and_swap(&served, next);
            if Arc::ptr_eq(&previous, &served) {
                served.supersede();
                return Ok(true);
            }
            // Another request swapped first: look again at what is live now.
        }
    }

    pub fn render_metrics(&self) -> String {
        let gauges = Gauges { passages: self.engine().index.len(), llm: self.llm_stats.as_ref().map(|s| s.snapshot()) };
        self.metrics.render(&gauges)
    }
}

pub fn generation_name(engine: &Engine) -> String {
    engine.index.generation().to_string()
}

/// Loads the entity graph of an index that has one, so that requests (and engines made
/// for their options, which share it) never load it themselves, and an engine keeps
/// working after its generation's files are removed.
fn preload_graph(engine: &Engine) -> Result<()> {
    if engine.index.manifest.graph.is_some() {
        engine.graph()?;
    }
    Ok(())
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
