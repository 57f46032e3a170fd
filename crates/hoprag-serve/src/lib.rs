//! The HTTP server of hoprag: the engine behind a JSON API.
//!
//! It is a library crate, not only part of the CLI, so that an application can mount
//! [`Server::router`] inside its own axum app next to its own routes, with an engine it
//! built in code.
//!
//! Routes: `POST /v1/retrieve`, `POST /v1/retrieve/batch`, `GET /v1/methods`,
//! `GET /v1/namespaces`; edits
//! (`PUT /v1/documents`, `GET` and `DELETE /v1/documents/{id}`, `POST /v1/delete`,
//! `POST /v1/sync`, `POST /v1/passages`); `GET /health`, `GET /metrics`, `GET /openapi.json` (generated
//! from the types in [`api`] and the route modules); for looking inside the index,
//! `GET /v1/index`, `GET /v1/passages`, `GET /v1/graph/entity`, `POST /v1/graph/walk`,
//! and with a data set (`Server::with_dataset`) `GET /v1/dataset`,
//! `GET /v1/dataset/question`, `POST /v1/eval`; a web page at `/` that draws them
//! (`docs/web.md`); and the MCP server's streamable HTTP transport at `/mcp`
//! (`docs/mcp.md`; not in the OpenAPI document: its body is MCP's JSON-RPC; stdio:
//! [`Server::serve_mcp_stdio`]). Every route but `/health` works on one namespace (a `namespace`
//! field of the body, or `?namespace=`; the default one when left out), if the request's
//! token opens it ([`auth`]). Retrieval is CPU-bound and synchronous, so it runs on
//! tokio's blocking pool, at most [`ServeSettings::workers`] at a time; the async
//! threads only parse, check and wait. An edit writes a new index generation
//! and then swaps the served engine whole, so a query sees the old index or the new
//! one, never a mix.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use hoprag_serve::{shutdown_signal, ServeSettings, Server};
//! let engine = hoprag::Engine::open(hoprag::store::open("idx")?, hoprag::Config::default())?;
//! let server = Server::new(engine, ServeSettings::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! server.run(listener, shutdown_signal()).await?;
//! # Ok(()) }
//! ```

pub mod api;
pub mod auth;
mod dataset;
mod edits;
mod handlers;
mod inspect;
mod mcp;
mod metrics;
mod middleware;
mod namespaces;
mod settings;
mod state;
mod web;

pub use mcp::LocalAccess;
pub use settings::ServeSettings;

use std::future::Future;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use axum::Router;
use hoprag::engine::Engine;
use hoprag::error::Result;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::OpenApi;

use dataset::{Inspect, ServedDataset};
use state::AppState;

pub struct Server {
    state: Arc<AppState>,
    dataset: Option<Arc<ServedDataset>>,
    eval_busy: Arc<AtomicBool>,
}

impl Server {
    /// Serves one engine built in code, as the default namespace (its graph is loaded
    /// now). A thread then follows the store: every `serve.follow_ms` it asks for the
    /// live generation and serves a newer one (published by `hoprag add`, or by another
    /// server on the same database) once it is loaded.
    pub fn new(engine: Engine, settings: ServeSettings) -> Result<Server> {
        Self::following(Arc::new(AppState::new(engine, settings)?))
    }

    /// Serves every namespace of the store `spec` (a folder or a PostgreSQL URL), each
    /// opened on first use with `config` and closed when unused beyond
    /// `serve.max_open_namespaces`; the default namespace is opened now if it holds an
    /// index. Followed as [`Server::new`]'s engine is.
    pub fn open(spec: &str, config: hoprag::Config, settings: ServeSettings) -> Result<Server> {
        Self::following(Arc::new(AppState::open(spec, config, settings)?))
    }

    fn following(state: Arc<AppState>) -> Result<Server> {
        if state.settings.follow_ms > 0 {
            let weak = Arc::downgrade(&state);
            let every = std::time::Duration::from_millis(state.settings.follow_ms);
            std::thread::Builder::new()
                .name("hoprag-follow".into())
                .spawn(move || loop {
                    std::thread::sleep(every);
                    let Some(state) = weak.upgrade() else { return };
                    for (namespace, followed) in state.follow_store() {
                        match followed {
                            Ok(true) => log::info!("namespace {namespace}: serving a new generation"),
                            Ok(false) => {}
                            // The store may be down for a while; requests meanwhile keep
                            // the generation they have, and the next tick tries again.
                            Err(e) => log::warn!("namespace {namespace}: checking the store for a new generation: {e}"),
                        }
                    }
                })
                .map_err(|e| hoprag::Error::Other(format!("starting the store follower: {e}")))?;
        }
        Ok(Server { state, dataset: None, eval_busy: Arc::default() })
    }

    /// Serves the questions of a data set file (any format `hoprag eval --dataset`
    /// reads) to the web page, which then marks their gold passages and can run
    /// evaluations on them. Their gold is matched to the index now, to report how much
    /// matched, and again for each new generation.
    pub fn with_dataset(mut self, path: &Path) -> Result<Server> {
        let data = ServedDataset::load(path)?;
        if let Some(served) = self.state.namespaces.peek(&hoprag::store::Namespace::default()) {
            let counts = data.resolved(&served.engine()).counts;
            log::info!(
                "data set {}: {} questions, {} of {} gold passages in the default namespace",
                path.display(),
                data.summary().questions,
                counts.gold - counts.unmatched,
                counts.gold
            );
        }
        self.dataset = Some(Arc::new(data));
        Ok(self)
    }

    pub fn settings(&self) -> &ServeSettings {
        &self.state.settings
    }

    /// All routes, with the token check, the body limit, logging and metrics.
    pub fn router(&self) -> Router {
        let state = &self.state;
        let guarded = Router::new()
            .route("/v1/retrieve", post(handlers::retrieve))
            .route("/v1/retrieve/batch", post(handlers::retrieve_batch))
            .route("/v1/passages", post(edits::add_passages))
            .route("/v1/documents", put(edits::upsert))
            .route("/v1/documents/{*id}", get(edits::get_document).delete(edits::delete_one))
            .route("/v1/delete", post(edits::delete_many))
            .route("/v1/sync", post(edits::sync))
            .route("/v1/methods", get(handlers::methods))
            .route("/v1/namespaces", get(handlers::namespaces))
            .route("/metrics", get(handlers::metrics))
            .route("/openapi.json", get(handlers::openapi))
            .route_layer(axum::middleware::from_fn_with_state(state.clone(), middleware::require_token));
        let inspect =
            Arc::new(Inspect { app: state.clone(), dataset: self.dataset.clone(), eval_busy: self.eval_busy.clone() });
        let inspection = Router::new()
            .route("/v1/index", get(inspect::index_info))
            .route("/v1/passages", get(inspect::lookup_passages))
            .route("/v1/graph/entity", get(inspect::entity))
            .route("/v1/graph/walk", post(inspect::walk))
            .route("/v1/dataset", get(dataset::dataset))
            .route("/v1/dataset/question", get(dataset::question))
            .route("/v1/eval", post(dataset::run_eval))
            .route_layer(axum::middleware::from_fn_with_state(state.clone(), middleware::require_token))
            .with_state(inspect.clone());
        Router::new()
            .route("/health", get(handlers::health))
            .merge(web::router())
            .merge(guarded)
            .merge(inspection)
            .merge(mcp::router(inspect))
            .fallback(handlers::not_found)
            .method_not_allowed_fallback(handlers::method_not_allowed)
            .layer(DefaultBodyLimit::max(state.settings.max_body_bytes))
            .layer(axum::middleware::from_fn_with_state(state.clone(), middleware::observe))
            .with_state(state.clone())
    }

    /// Serves on `listener` until `shutdown` completes, then stops accepting and lets
    /// the requests in flight finish.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(listener, self.router()).with_graceful_shutdown(shutdown).await
    }
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            log::error!("cannot listen for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                log::error!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    log::info!("shutting down: no new connections; finishing the requests in flight");
}

#[derive(OpenApi)]
#[openapi(
    info(title = "hoprag", description = "Multi-hop retrieval: passages for a question, with the method's trace."),
    paths(
        handlers::retrieve,
        handlers::retrieve_batch,
        edits::add_passages,
        edits::upsert,
        edits::get_document,
        edits::delete_one,
        edits::delete_many,
        edits::sync,
        handlers::methods,
        handlers::namespaces,
        handlers::health,
        handlers::metrics,
        handlers::openapi,
        inspect::index_info,
        inspect::lookup_passages,
        inspect::entity,
        inspect::walk,
        dataset::dataset,
        dataset::question,
        dataset::run_eval
    ),
    modifiers(&BearerToken, &JsonBodies, &Namespaced),
    security(("bearer" = []))
)]
struct ApiDoc;

/// Declares the bearer scheme the `security` requirement above names.
struct BearerToken;

impl utoipa::Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

/// Documents, on every operation that takes a JSON body, the 415 that axum's `Json`
/// extractor answers (as a JSON error, like every other) when the body is not declared
/// as JSON: one rule here rather than a line on each route.
struct JsonBodies;

impl utoipa::Modify for JsonBodies {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        let unsupported = ResponseBuilder::new()
            .description("the body is not declared as JSON (`Content-Type: application/json`)")
            .content("application/json", ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build())
            .build();
        for item in openapi.paths.paths.values_mut() {
            for operation in [&mut item.post, &mut item.put, &mut item.patch].into_iter().flatten() {
                if operation.request_body.is_some() {
                    operation.responses.responses.insert("415".into(), unsupported.clone().into());
                }
            }
        }
    }
}

/// Documents, on every route that works on a namespace (all of `/v1/` but the listing of
/// namespaces), the 404 of a namespace the store does not hold or the token does not open,
/// and the 403 of a read-only token's write: one rule here rather than a line on each.
struct Namespaced;

impl utoipa::Modify for Namespaced {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        let error = |description: &str| {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build(),
                )
                .build()
        };
        let missing = error("no such namespace here (or one the token does not open), or no such item in it");
        let read_only = error("the token may read this namespace but not write to it");
        let malformed = error("a malformed request: a namespace name outside its pattern, among others");
        for (path, item) in openapi.paths.paths.iter_mut() {
            if !path.starts_with("/v1/") || path == "/v1/namespaces" {
                continue;
            }
            for operation in [&mut item.get, &mut item.post, &mut item.put, &mut item.delete].into_iter().flatten() {
                operation.responses.responses.entry("404".into()).or_insert_with(|| missing.clone().into());
                operation.responses.responses.entry("400".into()).or_insert_with(|| malformed.clone().into());
            }
            let writes = ["/v1/passages", "/v1/documents", "/v1/delete", "/v1/sync"];
            let write_ops = match path.as_str() {
                "/v1/documents/{id}" => vec![&mut item.delete],
                p if writes.contains(&p) => vec![&mut item.post, &mut item.put],
                _ => Vec::new(),
            };
            for operation in write_ops.into_iter().flatten() {
                operation.responses.responses.entry("403".into()).or_insert_with(|| read_only.clone().into());
            }
        }
    }
}

/// The OpenAPI document of the routes above.
pub fn openapi_json() -> String {
    ApiDoc::openapi().to_pretty_json().expect("the OpenAPI document serialises")
}
