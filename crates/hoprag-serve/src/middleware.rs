//! Layers around the routes: the bearer token check, and the per-request log line and
//! metrics.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::api::ApiError;
use super::state::AppState;

/// Rejects a request without one of the server's tokens (when it has any) with a 401,
/// and hands the routes what the token may do (an `Extension<Arc<Scope>>`).
pub async fn require_token(State(state): State<Arc<AppState>>, mut request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    let Some(scope) = state.tokens.scope_of(given) else {
        let message = match given {
            None => "this route needs `Authorization: Bearer TOKEN`",
            Some(_) => "wrong token",
        };
        return ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    };
    request.extensions_mut().insert(scope);
    next.run(request).await
}

/// Counts and times every request by route and status, and logs one line for it.
pub async fn observe(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    // The route pattern, not the path, so that unknown paths share one series.
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |m| m.as_str()).to_string();
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    let response = {
        let _in_flight = state.metrics.in_flight();
        next.run(request).await
    };
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    state.metrics.record(&route, status, elapsed);
    log::info!("{method} {path} {status} {:.1} ms", elapsed.as_secs_f64() * 1e3);
    response
}
