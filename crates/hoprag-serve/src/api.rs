//! What goes over the wire: request and response bodies, and the one error shape.
//! The OpenAPI document is derived from these types.

use std::collections::{BTreeMap, HashMap};

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use hoprag::corpus::{Meta, Skipped};
use hoprag::engine::Engine;
use hoprag::retrieve::registry::MethodSpec;
use hoprag::store::edit::EditCounts;

pub use hoprag::response::{RankedPassage, RetrieveResponse};

/// One question to retrieve passages for.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveRequest {
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
    pub query: String,
    /// A method of `GET /v1/methods`; the server's default when left out.
    pub method: Option<String>,
    /// Passages to return (at least 1, at most the server's `max_k`).
    #[schema(minimum = 1)]
    pub k: Option<usize>,
    /// Method parameters for this request only, by dotted path as in `--set`, e.g.
    /// `{"phasegraph.fusion.alpha": 0.5}`. Server-wide sections (`llm`, `embedder`)
    /// cannot be changed per request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = Object)]
    pub options: BTreeMap<String, Value>,
    /// Return only passages whose `meta` matches (MongoDB-style: `{"year": {"$gte":
    /// 2000}, "source": {"$in": ["a", "b"]}}`; docs/filters.md): the first k of the
    /// method's order that match, k of them whenever k match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub filter: Option<Value>,
    /// The namespace to work on (letters, digits, `-`, `_`, `.`; 1-64 characters); the
    /// default one when left out. One the token does not open is answered as one that
    /// does not exist (404).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

/// Passages to upsert into the live index (`hoprag add`'s rule). A passage that cannot
/// be used (no text, an empty id) fails the whole request, naming it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddPassagesRequest {
    pub passages: Vec<NewPassage>,
    /// The namespace to work on (letters, digits, `-`, `_`, `.`; 1-64 characters); the
    /// default one when left out. One the token does not open is answered as one that
    /// does not exist (404).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

/// A passage to write, as a row of a JSONL corpus.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewPassage {
    /// Derived from the title and text when left out (so the same content keeps its id).
    /// The id of an existing passage replaces that passage (in place, unless `doc` is given).
    #[schema(min_length = 1)]
    pub id: Option<String>,
    /// The document the passage belongs to: an upsert replaces all of that document's
    /// passages with the request's passages of it. Left out: the passage is a document
    /// of its own.
    #[schema(min_length = 1)]
    pub doc: Option<String>,
    #[serde(default)]
    pub title: String,
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
    pub text: String,
    /// Any JSON object (source, url, date, ...): stored, never indexed, returned with
    /// the passage by every retrieval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<Meta>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AddPassagesResponse {
    /// Passages new to the index (a changed passage counts as removed and added).
    pub added: usize,
    /// Passages in the index now.
    pub total: usize,
    /// The index generation now served.
    pub generation: String,
    /// Entries not added because the request already has the same passage.
    pub duplicates: Vec<Issue>,
    /// Entries used with a change.
    pub warnings: Vec<Issue>,
    /// What changed, counted as by `PUT /v1/documents`.
    pub counts: EditCounts,
}

/// `PUT /v1/documents`: upsert documents and passages.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpsertRequest {
    pub passages: Vec<NewPassage>,
    /// Count what would change; write nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// The namespace to work on (letters, digits, `-`, `_`, `.`; 1-64 characters); the
    /// default one when left out. One the token does not open is answered as one that
    /// does not exist (404).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

/// `POST /v1/delete`: delete documents (all their passages) or single passages by id.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteRequest {
    /// Ids of documents or of passages; an unknown one fails the request (404) and
    /// nothing is deleted.
    pub ids: Vec<String>,
    #[serde(default)]
    pub dry_run: bool,
    /// The namespace to work on (letters, digits, `-`, `_`, `.`; 1-64 characters); the
    /// default one when left out. One the token does not open is answered as one that
    /// does not exist (404).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

/// `POST /v1/sync`: make the index hold exactly these passages.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncRequest {
    pub passages: Vec<NewPassage>,
    /// An empty `passages` deletes every document of the index, and is refused unless
    /// this is true.
    #[serde(default)]
    pub allow_empty: bool,
    #[serde(default)]
    pub dry_run: bool,
    /// The namespace to work on (letters, digits, `-`, `_`, `.`; 1-64 characters); the
    /// default one when left out. One the token does not open is answered as one that
    /// does not exist (404).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

/// What an edit changed. An edit that changes nothing publishes no generation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EditResponse {
    /// Whether a new generation was published (false for a dry run or a no-op).
    pub changed: bool,
    pub dry_run: bool,
    /// The index generation served now (the new one when `changed`).
    pub generation: String,
    #[serde(flatten)]
    pub counts: EditCounts,
    /// Entries left out because the request already has the same passage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<Issue>,
}

/// A stored passage, as `hoprag export documents` writes it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StoredPassage {
    pub id: String,
    /// Left out when the passage is a document of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    pub title: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<Meta>,
}

/// `GET /v1/documents/{id}`: a document's passages, in the index's order (by id).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DocumentResponse {
    /// The document's id (the passage's own id when the passage is a document of its own).
    pub id: String,
    /// The generation the passages were read from.
    pub generation: String,
    pub passages: Vec<StoredPassage>,
}

/// An entry of a request that was skipped or changed, and why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Issue {
    /// e.g. `passages[3]`.
    pub location: String,
    pub reason: String,
}

impl From<Skipped> for Issue {
    fn from(s: Skipped) -> Self {
        Issue { location: s.location, reason: s.reason }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MethodList {
    /// The method of requests that name none.
    pub default: String,
    pub methods: Vec<MethodInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MethodInfo {
    pub name: String,
    pub description: String,
    /// The method's section of the server's configuration (what `options` paths start
    /// from), or null for a method without parameters.
    #[schema(value_type = Option<Object>)]
    pub parameters: Value,
    pub capabilities: Capabilities,
}

/// What a method needs and what its trace holds, as the method registry states it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Capabilities {
    /// Whether it reads the entity graph: `no`, `required`, or `if_present` (through the
    /// method it chooses, where the index has a graph).
    pub graph: String,
    /// Whether it asks the LLM anything, as configured on this server.
    pub llm: bool,
    /// What its trace holds: `lists`, `walk` (a walk over the entity graph, which
    /// `/v1/graph/walk` draws), `beams`, `judge`, `router`, or `choice` (another method's
    /// trace behind a first step naming it).
    pub trace: String,
    /// The configuration section of its parameters, if it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
}

impl Capabilities {
    pub fn of(method: &MethodSpec, engine: &Engine) -> Capabilities {
        // The registry's own snake_case names of its enums.
        let label =
            |v: serde_json::Result<Value>| v.ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        Capabilities {
            graph: label(serde_json::to_value(method.graph)),
            llm: engine.uses_llm(method.name),
            trace: label(serde_json::to_value(method.trace)),
            section: method.section.map(String::from),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// Always `ok` when the server answers.
    pub status: String,
    pub version: String,
    /// The default namespace's passages, when it is open and no token is limited to
    /// some namespaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passages: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
    /// Whether the other routes want `Authorization: Bearer TOKEN` (the web page asks
    /// for the token before its first call, rather than after a 401).
    pub token_required: bool,
}

/// `GET /v1/namespaces`: the namespaces the token opens.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NamespaceList {
    pub namespaces: Vec<NamespaceInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NamespaceInfo {
    pub name: String,
    /// Whether it is loaded now (its first request after a close loads it again).
    pub open: bool,
    /// Passages of its served index, when open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passages: Option<usize>,
    /// Whether the token may write to it.
    pub write: bool,
}

/// The `?namespace=NAME` of the routes without a body.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NamespaceParam {
    /// The namespace (the default one when left out).
    #[param(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

/// The `namespace` parameter of a URL's query string, if given.
pub(super) fn namespace_param(uri: &Uri) -> Result<Option<String>, ApiError> {
    Ok(query_params(uri)?.remove("namespace"))
}

/// Every error response: `{"error": {"code": ..., "message": ...}}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `invalid_json`, `invalid_request`, `unknown_method`,
    /// `invalid_option`, `method_unavailable`, `limit_exceeded`, `payload_too_large`,
    /// `unsupported_media_type`, `unauthorized`, `not_found`, `no_dataset`,
    /// `method_not_allowed`, `busy`, `timeout`, `internal`. The message starts with
    /// the field at fault where there is one (`methods[1]: ...`).
    pub code: String,
    pub message: String,
}

/// An error on its way to becoming an [`ErrorBody`] response.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// Prefixes the message with where in the request the problem is.
    pub fn at(mut self, location: &str) -> Self {
        self.message = format!("{location}: {}", self.message);
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { error: ErrorDetail { code: self.code.to_string(), message: self.message } };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let status = rejection.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            StatusCode::UNPROCESSABLE_ENTITY => "invalid_request",
            _ => "invalid_json",
        };
        ApiError::new(status, code, rejection.body_text())
    }
}

/// `axum::Json`, with its rejections in our error shape.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let axum::Json(value) = axum::Json::<T>::from_request(req, state).await?;
        Ok(ApiJson(value))
    }
}

/// The parameters of a URL's query string, percent-decoded. (axum's `Query` needs a
/// feature the crate leaves off; three routes do not justify it.)
pub(super) fn query_params(uri: &Uri) -> Result<HashMap<String, String>, ApiError> {
    let mut out = HashMap::new();
    for pair in uri.query().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (key, value) = (percent_decode(key)?, percent_decode(value)?);
        out.insert(key, value);
    }
    Ok(out)
}

fn percent_decode(text: &str) -> Result<String, ApiError> {
    let bad = || ApiError::bad_request("invalid_request", format!("query string: cannot decode {text:?}"));
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
                let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| bad())
}
