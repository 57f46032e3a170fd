//! What a tool answers: the route's JSON document as structured content (and as text, for
//! clients that read only text), or the route's error as a tool error (`isError`) with the
//! HTTP error's body, `{"error": {"code", "message"}}`, whose message names the field.

use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::{json, Value};

use crate::api::ApiError;

/// A tool's answer from a route's result.
pub fn reply<T: Serialize>(result: Result<T, ApiError>) -> CallToolResult {
    match result.and_then(|body| structured(&body)) {
        Ok(value) => CallToolResult::structured(value),
        Err(e) => error(e),
    }
}

/// A tool error with the route's error body.
pub fn error(e: ApiError) -> CallToolResult {
    CallToolResult::structured_error(json!({"error": {"code": e.code, "message": e.message}}))
}

/// `body` as a JSON object, through JSON text: `to_value` would widen the f32 scores
/// (0.85 → 0.8500000238), and then they would differ from what `hoprag query --json`
/// and `POST /v1/retrieve` print.
fn structured<T: Serialize>(body: &T) -> Result<Value, ApiError> {
    serde_json::to_string(body)
        .and_then(|text| serde_json::from_str(&text))
        .map_err(|e| ApiError::internal(format!("the answer does not serialise: {e}")))
}
