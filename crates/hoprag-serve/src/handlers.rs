//! The routes: each checks its input, hands the work to [`AppState`] (on the blocking
//! pool where it is CPU-bound; the routes that write the index are in `edits`) and returns JSON. The `utoipa::path`
//! attributes are the source of `/openapi.json`.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::Json;
use tokio::task::JoinSet;

use super::api::{
    namespace_param, ApiError, ApiJson, Capabilities, ErrorBody, Health, MethodInfo, MethodList, NamespaceInfo,
    NamespaceList, NamespaceParam, RetrieveRequest, RetrieveResponse,
};
use super::auth::{Access, Scope};
use super::state::{generation_name, AppState};
use hoprag::retrieve::registry::{DEFAULT_METHOD, METHODS};

type Shared = State<Arc<AppState>>;
/// What the request's token may do (set by the token check).
pub type Token = Extension<Arc<Scope>>;

/// Retrieve passages for one query.
#[utoipa::path(post, path = "/v1/retrieve", request_body = RetrieveRequest,
    responses((status = 200, body = RetrieveResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 413, body = ErrorBody), (status = 422, body = ErrorBody), (status = 504, body = ErrorBody)))]
pub async fn retrieve(
    State(state): Shared,
    Extension(scope): Token,
    ApiJson(request): ApiJson<RetrieveRequest>,
) -> Result<Json<RetrieveResponse>, ApiError> {
    let served = state.served(&scope, request.namespace.as_deref(), Access::Read).await?;
    let checked = state.check(&served, request)?;
    let work = state.on_worker(move |s| s.retrieve(checked));
    Ok(Json(within_timeout(&state, work).await?))
}

/// Retrieve passages for several queries at once; results come in request order. The
/// batch fails as a whole, naming the first item at fault.
#[utoipa::path(post, path = "/v1/retrieve/batch", request_body = Vec<RetrieveRequest>,
    responses((status = 200, body = Vec<RetrieveResponse>), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 422, body = ErrorBody), (status = 504, body = ErrorBody)))]
pub async fn retrieve_batch(
    State(state): Shared,
    Extension(scope): Token,
    ApiJson(requests): ApiJson<Vec<RetrieveRequest>>,
) -> Result<Json<Vec<RetrieveResponse>>, ApiError> {
    let max = state.settings.max_batch;
    if requests.len() > max {
        return Err(ApiError::bad_request(
            "limit_exceeded",
            format!("the batch has {} queries; the limit is {max} (serve.max_batch)", requests.len()),
        ));
    }
    let mut checked = Vec::with_capacity(requests.len());
    for (i, r) in requests.into_iter().enumerate() {
        let at = |e: ApiError| e.at(&format!("[{i}]"));
        let served = state.served(&scope, r.namespace.as_deref(), Access::Read).await.map_err(at)?;
        checked.push(state.check(&served, r).map_err(at)?);
    }
    let n = checked.len();
    let runner = state.clone();
    let work = async move {
        // Dropping the set (on a timeout) cancels the items still waiting for a worker.
        let mut set = JoinSet::new();
        for (i, c) in checked.into_iter().enumerate() {
            let state = runner.clone();
            set.spawn(async move { (i, state.on_worker(move |s| s.retrieve(c)).await) });
        }
        let mut results: Vec<Option<RetrieveResponse>> = vec![None; n];
        while let Some(joined) = set.join_next().await {
            let (i, result) = joined.map_err(|e| ApiError::internal(format!("a batch task failed: {e}")))?;
            results[i] = Some(result.map_err(|e| e.at(&format!("[{i}]")))?);
        }
        Ok(results.into_iter().flatten().collect())
    };
    Ok(Json(within_timeout(&state, work).await?))
}

/// The retrieval methods, with their parameters as configured on this server and what
/// each can do on the namespace's index (`?namespace=NAME`; the default one if left out).
#[utoipa::path(get, path = "/v1/methods", params(NamespaceParam),
    responses((status = 200, body = MethodList), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn methods(State(state): Shared, Extension(scope): Token, uri: Uri) -> Result<Json<MethodList>, ApiError> {
    let engine = state.served(&scope, namespace_param(&uri)?.as_deref(), Access::Read).await?.engine();
    // Through JSON text: `to_value` would widen f32 parameters (0.85 → 0.8500000238).
    let config: serde_json::Value = serde_json::to_string(&engine.config)
        .and_then(|text| serde_json::from_str(&text))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let methods = METHODS
        .iter()
        .map(|m| MethodInfo {
            name: m.name.to_string(),
            description: m.summary.to_string(),
            parameters: m.section.and_then(|s| config.get(s)).cloned().unwrap_or_default(),
            capabilities: Capabilities::of(m, &engine),
        })
        .collect();
    Ok(Json(MethodList { default: DEFAULT_METHOD.to_string(), methods }))
}

/// Liveness; needs no token. The default namespace's passages and generation are shown
/// when it is open and no token of the server is limited to some namespaces (a scoped
/// token's namespaces are never told to a caller without it).
#[utoipa::path(get, path = "/health", security(()), responses((status = 200, body = Health)))]
pub async fn health(State(state): Shared) -> Json<Health> {
    let engine = (!state.tokens.scoped())
        .then(|| state.namespaces.peek(&hoprag::store::Namespace::default()))
        .flatten()
        .map(|s| s.engine());
    Json(Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        passages: engine.as_ref().map(|e| e.index.len()),
        generation: engine.as_ref().map(|e| generation_name(e)),
        token_required: state.tokens.required(),
    })
}

/// The namespaces this token opens that the store holds, with what each is open for.
#[utoipa::path(get, path = "/v1/namespaces", responses((status = 200, body = NamespaceList), (status = 401, body = ErrorBody)))]
pub async fn namespaces(State(state): Shared, Extension(scope): Token) -> Result<Json<NamespaceList>, ApiError> {
    let lister = state.clone();
    let names = tokio::task::spawn_blocking(move || lister.namespaces.list())
        .await
        .map_err(|e| ApiError::internal(format!("listing the namespaces failed: {e}")))?
        .map_err(|e| ApiError::internal(format!("listing the namespaces: {e}")))?;
    let namespaces = names
        .into_iter()
        .filter(|n| scope.allows(n, Access::Read))
        .map(|n| {
            let open = state.namespaces.peek(&n);
            NamespaceInfo {
                write: scope.allows(&n, Access::Write),
                passages: open.as_ref().map(|s| s.engine().index.len()),
                open: open.is_some(),
                name: n.to_string(),
            }
        })
        .collect();
    Ok(Json(NamespaceList { namespaces }))
}

/// Prometheus metrics (text format).
#[utoipa::path(get, path = "/metrics", responses((status = 200, content_type = "text/plain", body = String),
    (status = 401, body = ErrorBody)))]
pub async fn metrics(State(state): Shared, Extension(scope): Token) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.render_metrics(&scope))
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", responses(
    (status = 200, description = "OpenAPI 3.1 document", content_type = "application/json"), (status = 401, body = ErrorBody)))]
pub async fn openapi(State(state): Shared) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], state.openapi.clone())
}

pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route; GET /openapi.json lists them")
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that HTTP method")
}

/// Awaits `work` for at most the configured time.
async fn within_timeout<T>(
    state: &AppState,
    work: impl std::future::Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let limit = state.settings.timeout();
    tokio::time::timeout(limit, work).await.map_err(|_| {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            format!("the request took longer than {} ms (serve.timeout_ms)", limit.as_millis()),
        )
    })?
}
