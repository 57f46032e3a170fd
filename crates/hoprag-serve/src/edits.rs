//! The edit routes: upsert, delete and sync documents and passages, and read a document
//! back. Each turns its body into one [`Request`] and hands it to [`Served::edit`] of its namespace on
//! the blocking pool, in a task of its own: once started, a write runs to its end even if
//! the client goes away, so the served engine always matches the index on disk. Edits
//! are never cut off by the request timeout.

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::http::Uri;
use axum::Json;
use serde_json::Value;

use super::api::{
    namespace_param, query_params, AddPassagesRequest, AddPassagesResponse, ApiError, ApiJson, DeleteRequest,
    DocumentResponse, EditResponse, ErrorBody, Issue, NewPassage, StoredPassage, SyncRequest, UpsertRequest,
};
use super::auth::Access;
use super::handlers::Token;
use super::namespaces::{Edited, Served};
use super::state::{generation_name, AppState};
use hoprag::corpus::{load_entries, CorpusOptions, LoadedCorpus};
use hoprag::store::edit::{EditOptions, Request};

type Shared = State<Arc<AppState>>;

/// Upsert documents and passages (`hoprag add`'s rule): a passage with a `doc` replaces
/// all of that document's passages; one without, whose id names an existing passage,
/// replaces that passage in place; any other is a new document of its own. The entity
/// graph follows; the new generation is served when the response comes.
#[utoipa::path(put, path = "/v1/documents", request_body = UpsertRequest,
    responses((status = 200, body = EditResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn upsert(
    State(state): Shared,
    Extension(scope): Token,
    ApiJson(request): ApiJson<UpsertRequest>,
) -> Result<Json<EditResponse>, ApiError> {
    let UpsertRequest { passages, dry_run, namespace } = request;
    let served = state.served(&scope, namespace.as_deref(), Access::Write).await?;
    let (edited, duplicates) = on_writer(served, move |s| {
        let corpus = corpus(passages)?;
        let duplicates = issues(&corpus);
        Ok((s.edit(Request::Upsert(corpus.passages), options("PUT /v1/documents", dry_run))?, duplicates))
    })
    .await?;
    Ok(Json(response(edited, duplicates)))
}

/// Make the index hold exactly these passages: new documents are added, changed ones
/// replaced, missing ones deleted; unchanged ones are kept as they are (nothing is
/// embedded again). An empty `passages` is refused unless `allow_empty`.
#[utoipa::path(post, path = "/v1/sync", request_body = SyncRequest,
    responses((status = 200, body = EditResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn sync(
    State(state): Shared,
    Extension(scope): Token,
    ApiJson(request): ApiJson<SyncRequest>,
) -> Result<Json<EditResponse>, ApiError> {
    let SyncRequest { passages, allow_empty, dry_run, namespace } = request;
    let served = state.served(&scope, namespace.as_deref(), Access::Write).await?;
    let (edited, duplicates) = on_writer(served, move |s| {
        let corpus = corpus(passages)?;
        let duplicates = issues(&corpus);
        let request = Request::Sync { passages: corpus.passages, allow_empty };
        Ok((s.edit(request, options("POST /v1/sync", dry_run))?, duplicates))
    })
    .await?;
    Ok(Json(response(edited, duplicates)))
}

/// Delete documents (all their passages) or single passages by id; the ids may hold any
/// character. An unknown id fails the request with a 404 naming it, and nothing changes.
#[utoipa::path(post, path = "/v1/delete", request_body = DeleteRequest,
    responses((status = 200, body = EditResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn delete_many(
    State(state): Shared,
    Extension(scope): Token,
    ApiJson(request): ApiJson<DeleteRequest>,
) -> Result<Json<EditResponse>, ApiError> {
    let DeleteRequest { ids, dry_run, namespace } = request;
    let served = state.served(&scope, namespace.as_deref(), Access::Write).await?;
    let edited = on_writer(served, move |s| s.edit(Request::Delete(ids), options("POST /v1/delete", dry_run))).await?;
    Ok(Json(response(edited, Vec::new())))
}

/// Delete one document (all its passages), or one passage, by id. In the path the id is
/// percent-encoded (`/` as `%2F`, `#` as `%23`; an unencoded `/` works too). An unknown
/// id is a 404, and nothing changes.
#[utoipa::path(delete, path = "/v1/documents/{id}",
    params(("id" = String, Path, min_length = 1, description = "A document's or a passage's id, percent-encoded"),
           ("dry_run" = Option<bool>, Query, description = "Count what would change; write nothing"),
           ("namespace" = Option<String>, Query, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$",
            description = "The namespace (the default one when left out)")),
    responses((status = 200, body = EditResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn delete_one(
    State(state): Shared,
    Extension(scope): Token,
    id: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<Json<EditResponse>, ApiError> {
    let id = path_id(id)?;
    let served = state.served(&scope, namespace_param(&uri)?.as_deref(), Access::Write).await?;
    let dry_run = match query_params(&uri)?.get("dry_run").map(String::as_str) {
        None | Some("false") | Some("0") => false,
        Some("true") | Some("1") | Some("") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!("dry_run: expected true or false, found {other:?}"),
            ))
        }
    };
    let edited =
        on_writer(served, move |s| s.edit(Request::Delete(vec![id]), options("DELETE /v1/documents", dry_run))).await?;
    Ok(Json(response(edited, Vec::new())))
}

/// A document's passages (id, doc, title, text, meta), from the generation served now.
/// The id of a passage gives the document holding it. The id is percent-encoded in the
/// path, as for `DELETE`.
#[utoipa::path(get, path = "/v1/documents/{id}",
    params(("id" = String, Path, min_length = 1, description = "A document's or a passage's id, percent-encoded"),
           ("namespace" = Option<String>, Query, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$",
            description = "The namespace (the default one when left out)")),
    responses((status = 200, body = DocumentResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn get_document(
    State(state): Shared,
    Extension(scope): Token,
    id: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<Json<DocumentResponse>, ApiError> {
    let id = path_id(id)?;
    let engine = state.served(&scope, namespace_param(&uri)?.as_deref(), Access::Read).await?.engine();
    let all = engine.index.passages();
    let doc = if all.iter().any(|p| p.document() == id) {
        id.as_str()
    } else {
        all.iter()
            .find(|p| p.id == id)
            .map(|p| p.document())
            .ok_or_else(|| ApiError::not_found(format!("no document or passage has the id {id:?}")))?
    };
    let passages = all
        .iter()
        .filter(|p| p.document() == doc)
        .map(|p| StoredPassage {
            id: p.id.clone(),
            doc: p.doc.clone(),
            title: p.title.clone(),
            text: p.text.clone(),
            meta: p.meta.clone(),
        })
        .collect();
    Ok(Json(DocumentResponse { id: doc.to_string(), generation: generation_name(&engine), passages }))
}

/// Upsert passages (the same rule as `PUT /v1/documents`). They are embedded and written
/// as a new index generation, which is then served; queries already running finish on
/// the previous one.
#[utoipa::path(post, path = "/v1/passages", request_body = AddPassagesRequest,
    responses((status = 200, body = AddPassagesResponse), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn add_passages(
    State(state): Shared,
    Extension(scope): Token,
    ApiJson(request): ApiJson<AddPassagesRequest>,
) -> Result<Json<AddPassagesResponse>, ApiError> {
    let served = state.served(&scope, request.namespace.as_deref(), Access::Write).await?;
    on_writer(served, move |s| {
        let corpus = corpus(request.passages)?;
        let (duplicates, warnings) =
            (issues(&corpus), corpus.report.warnings.iter().cloned().map(Into::into).collect());
        let Edited { report, engine } =
            s.edit(Request::Upsert(corpus.passages), options("POST /v1/passages", false))?;
        Ok(AddPassagesResponse {
            added: report.counts.passages_added,
            total: engine.index.len(),
            generation: generation_name(&engine),
            duplicates,
            warnings,
            counts: report.counts,
        })
    })
    .await
    .map(Json)
}

/// Runs a write on the blocking pool in a task of its own, which runs to its end whether
/// or not the request is still waiting for it.
async fn on_writer<T: Send + 'static>(
    served: Arc<Served>,
    f: impl FnOnce(&Served) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(move || f(&served))
        .await
        .map_err(|e| ApiError::internal(format!("the edit's task failed: {e}")))?
}

fn options(source: &str, dry_run: bool) -> EditOptions {
    EditOptions { dry_run, source: source.into(), ..Default::default() }
}

/// The request's passages read by the corpus loader, with `hoprag add`'s rules for a
/// JSONL row (text trimmed, an id derived from the content when there is none, the same
/// passage twice kept once). All or nothing: an entry the loader would skip fails the
/// request, naming it (`passages[3]: ...`).
fn corpus(rows: Vec<NewPassage>) -> Result<LoadedCorpus, ApiError> {
    let entries: Vec<Value> = rows
        .into_iter()
        .map(serde_json::to_value)
        .collect::<serde_json::Result<_>>()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let corpus = load_entries("passages", &entries, &CorpusOptions::default())
        .map_err(|e| ApiError::bad_request("invalid_request", e.to_string()))?;
    if let Some(s) = corpus.report.skipped.first() {
        return Err(ApiError::bad_request("invalid_request", format!("{}: {}", s.location, s.reason)));
    }
    Ok(corpus)
}

fn issues(corpus: &LoadedCorpus) -> Vec<Issue> {
    corpus.report.duplicates.iter().cloned().map(Into::into).collect()
}

fn response(edited: Edited, duplicates: Vec<Issue>) -> EditResponse {
    let Edited { report, engine } = edited;
    EditResponse {
        changed: report.generation.is_some(),
        dry_run: report.dry_run,
        generation: generation_name(&engine),
        counts: report.counts,
        duplicates,
    }
}

/// The id of a `/v1/documents/{id}` path, percent-decoded.
fn path_id(id: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(id) = id.map_err(|e| ApiError::bad_request("invalid_request", format!("id: {}", e.body_text())))?;
    if id.is_empty() {
        return Err(ApiError::bad_request("invalid_request", "id: empty"));
    }
    Ok(id)
}
