//! A data set given to the server (`hoprag serve --dataset FILE`): its questions, with
//! their gold passages in the served index, and evaluations run on it from the page.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Extension, State};
use axum::http::{StatusCode, Uri};
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::api::{namespace_param, query_params, ApiError, ApiJson, ErrorBody};
use super::auth::Access;
use super::handlers::Token;
use super::state::{generation_name, AppState};
use hoprag::dataset::{load_dataset, resolve_gold, DatasetFormat, GoldMatchCounts, Question, ResolvedDataset};
use hoprag::engine::Engine;
use hoprag::error::Result;
use hoprag::eval::{evaluate_queries, EvalOptions};
use hoprag::progress::Silent;
use hoprag::retrieve::registry::{self, parse_method_spec};

/// What the inspection routes share (these and [`super::inspect`]'s): the server's state, and the data set it was given.
pub struct Inspect {
    pub app: Arc<AppState>,
    pub dataset: Option<Arc<ServedDataset>>,
    /// Set while an evaluation runs: one at a time (each uses every core).
    pub eval_busy: Arc<AtomicBool>,
}

pub type Shared = State<Arc<Inspect>>;

/// The questions of a data set, and their gold matched to the passages of the
/// generation last asked about (passages added since change the match).
pub struct ServedDataset {
    name: String,
    format: DatasetFormat,
    questions: Vec<Question>,
    /// Generation name and the questions resolved against it. The lock only guards the
    /// swap: resolving runs outside it.
    resolved: Mutex<Option<(String, Arc<ResolvedDataset>)>>,
}

impl ServedDataset {
    /// Reads a data set file in any format `hoprag eval --dataset` reads.
    pub fn load(path: &Path) -> Result<ServedDataset> {
        let (format, questions) = load_dataset(path)?;
        Ok(ServedDataset { name: path.display().to_string(), format, questions, resolved: Mutex::new(None) })
    }

    pub fn summary(&self) -> DatasetSummary {
        DatasetSummary { name: self.name.clone(), format: format_name(self.format), questions: self.questions.len() }
    }

    /// The questions with their gold matched to `engine`'s passages.
    pub fn resolved(&self, engine: &Engine) -> Arc<ResolvedDataset> {
        let generation = generation_name(engine);
        let slot = || self.resolved.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((g, r)) = slot().as_ref() {
            if *g == generation {
                return r.clone();
            }
        }
        let resolved = Arc::new(resolve_gold(&self.questions, engine.index.passages()));
        *slot() = Some((generation, resolved.clone()));
        resolved
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DatasetSummary {
    pub name: String,
    pub format: String,
    pub questions: usize,
}

fn format_name(format: DatasetFormat) -> String {
    serde_json::to_value(format).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

fn no_dataset() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_dataset",
        "the server has no data set; start it with `hoprag serve --dataset FILE`",
    )
}

/// The server's data set: its questions, without their gold.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DatasetInfo {
    pub name: String,
    pub format: String,
    /// How the gold passages matched the served index.
    #[schema(value_type = Object)]
    pub gold_matching: GoldMatchCounts,
    pub questions: Vec<QuestionSummary>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QuestionSummary {
    pub id: String,
    pub text: String,
    #[serde(rename = "type")]
    pub qtype: Option<String>,
}

/// The questions of the server's data set (`hoprag serve --dataset`).
#[utoipa::path(get, path = "/v1/dataset", params(crate::api::NamespaceParam),
    responses((status = 200, body = DatasetInfo), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn dataset(State(inspect): Shared, Extension(scope): Token, uri: Uri) -> Result<Json<DatasetInfo>, ApiError> {
    let data = inspect.dataset.clone().ok_or_else(no_dataset)?;
    let engine = inspect.app.served(&scope, namespace_param(&uri)?.as_deref(), Access::Read).await?.engine();
    let resolved = inspect.app.on_worker(move |_| Ok(data.resolved(&engine))).await?;
    let data = inspect.dataset.as_ref().ok_or_else(no_dataset)?;
    Ok(Json(DatasetInfo {
        name: data.name.clone(),
        format: format_name(data.format),
        gold_matching: resolved.counts,
        questions: resolved
            .questions
            .iter()
            .map(|q| QuestionSummary { id: q.id.clone(), text: q.text.clone(), qtype: q.qtype.clone() })
            .collect(),
    }))
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct QuestionParams {
    /// The question's id in the data set.
    pub id: String,
    /// The namespace (the default one when left out).
    #[param(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

/// One question of the data set with its gold passages.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QuestionDetail {
    pub id: String,
    pub text: String,
    #[serde(rename = "type")]
    pub qtype: Option<String>,
    pub answers: Vec<String>,
    /// Whether `gold` is in hop order (the last is the last hop).
    pub hop_ordered: bool,
    /// The gold passages found in the index.
    pub gold: Vec<GoldPassage>,
    /// Gold passages the data set names, found or not (R@k's denominator).
    pub gold_total: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GoldPassage {
    pub id: String,
    pub title: String,
    /// Position in the hop order (1 = first hop), where the data set gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop: Option<usize>,
    /// The last hop's passage.
    pub last_hop: bool,
}

/// A question of the server's data set, with its gold passages in the index.
#[utoipa::path(get, path = "/v1/dataset/question", params(QuestionParams),
    responses((status = 200, body = QuestionDetail), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn question(
    State(inspect): Shared,
    Extension(scope): Token,
    uri: Uri,
) -> Result<Json<QuestionDetail>, ApiError> {
    let mut query = query_params(&uri)?;
    let id = query.remove("id").ok_or_else(|| ApiError::bad_request("invalid_request", "id: missing"))?;
    let params = QuestionParams { id, namespace: query.remove("namespace") };
    let data = inspect.dataset.clone().ok_or_else(no_dataset)?;
    let engine = inspect.app.served(&scope, params.namespace.as_deref(), Access::Read).await?.engine();
    let resolved = {
        let engine = engine.clone();
        inspect.app.on_worker(move |_| Ok(data.resolved(&engine))).await?
    };
    let q = resolved.questions.iter().find(|q| q.id == params.id).ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("id: no question {:?} in the data set", params.id))
    })?;
    let gold = q
        .gold
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let passage = engine.index.passage(p);
            GoldPassage {
                id: passage.id.clone(),
                title: passage.title.clone(),
                hop: q.hop_ordered.then_some(i + 1),
                last_hop: q.last_hop == Some(p),
            }
        })
        .collect();
    Ok(Json(QuestionDetail {
        id: q.id.clone(),
        text: q.text.clone(),
        qtype: q.qtype.clone(),
        answers: q.answers.clone(),
        hop_ordered: q.hop_ordered,
        gold,
        gold_total: q.gold_total,
    }))
}

/// An evaluation to run on the server's data set.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalRequest {
    /// Methods to evaluate, as `hoprag eval --method` takes them (`name[param=value]`).
    pub methods: Vec<String>,
    /// Cutoffs (default 2, 5, 10, 15; each at most the server's `max_k`).
    pub ks: Option<Vec<usize>>,
    /// The method the others are compared with (W/L/T, sign test, McNemar).
    pub baseline: Option<String>,
    /// Evaluate the first N questions (default and at most `serve.max_eval_questions`).
    pub limit: Option<usize>,
    /// The namespace (the default one when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

/// Evaluate methods on the first questions of the server's data set. The report is the
/// one `hoprag eval --json` writes. One evaluation runs at a time (it uses every core);
/// it is bounded by `serve.max_eval_questions` and `serve.timeout_ms`.
#[utoipa::path(post, path = "/v1/eval", request_body = EvalRequest,
    responses((status = 200, description = "the report of `hoprag eval --json`", content_type = "application/json"),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 413, body = ErrorBody), (status = 422, body = ErrorBody), (status = 429, body = ErrorBody),
              (status = 504, body = ErrorBody)))]
pub async fn run_eval(
    State(inspect): Shared,
    Extension(scope): Token,
    ApiJson(request): ApiJson<EvalRequest>,
) -> Result<impl IntoResponse, ApiError> {
    let data = inspect.dataset.clone().ok_or_else(no_dataset)?;
    let s = &inspect.app.settings;
    let (methods, ks, limit) = check_eval(&request, s.max_k, s.max_eval_questions)?;
    let engine = inspect.app.served(&scope, request.namespace.as_deref(), Access::Read).await?.engine();
    // Claimed here and released by the task when it ends, even after a timeout: the
    // work cannot be stopped once started, so a second one must wait for it to finish.
    if inspect.eval_busy.swap(true, Ordering::AcqRel) {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "busy",
            "an evaluation is already running on this server; try again when it is done",
        ));
    }
    let busy = Arc::clone(&inspect.eval_busy);
    let baseline = request.baseline.clone();
    let work = inspect.app.on_worker(move |_| {
        let _release = Release(busy);
        let resolved = data.resolved(&engine);
        let mut subset = (*resolved).clone();
        subset.questions.truncate(limit);
        let texts: Vec<String> = subset.questions.iter().map(|q| q.text.clone()).collect();
        let internal = |e: hoprag::Error| ApiError::internal(e.to_string());
        let queries = engine.embed_queries(&texts, &Silent).map_err(internal)?;
        let options = EvalOptions::new(ks, baseline, data.name.clone());
        evaluate_queries(&engine, &subset, &queries, &methods, &options, &Silent).map_err(|e| match e {
            hoprag::Error::Config(_) | hoprag::Error::Index { .. } => {
                ApiError::bad_request("method_unavailable", format!("methods: {e}"))
            }
            e => internal(e),
        })
    });
    let limit = inspect.app.settings.timeout();
    let report = tokio::time::timeout(limit, work).await.map_err(|_| {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            format!(
                "the evaluation took longer than {} ms (serve.timeout_ms); ask for fewer questions (limit)",
                limit.as_millis()
            ),
        )
    })??;
    Ok(Json(report))
}

/// Clears the busy flag when the evaluation's task ends, however it ends.
struct Release(Arc<AtomicBool>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The request's methods, cutoffs and question count, checked.
fn check_eval(
    request: &EvalRequest,
    max_k: usize,
    max_questions: usize,
) -> Result<(Vec<String>, Vec<usize>, usize), ApiError> {
    if request.methods.is_empty() {
        return Err(ApiError::bad_request("invalid_request", "methods: name at least one"));
    }
    let known = |spec: &str| parse_method_spec(spec).is_ok_and(|(name, _)| registry::find(name).is_some());
    let names = request.methods.iter().chain(&request.baseline);
    for (i, spec) in names.enumerate() {
        if !known(spec) {
            let field = if i < request.methods.len() { format!("methods[{i}]") } else { "baseline".into() };
            return Err(ApiError::bad_request(
                "unknown_method",
                format!("{field}: unknown method {spec:?}; known: {}", registry::names().join(", ")),
            ));
        }
    }
    let ks = request.ks.clone().unwrap_or_else(|| vec![2, 5, 10, 15]);
    if ks.is_empty() {
        return Err(ApiError::bad_request("invalid_request", "ks: name at least one cutoff"));
    }
    if let Some((i, k)) = ks.iter().enumerate().find(|(_, &k)| k == 0 || k > max_k) {
        return Err(ApiError::bad_request(
            "limit_exceeded",
            format!("ks[{i}]: {k}; cutoffs are from 1 to {max_k} (serve.max_k)"),
        ));
    }
    let limit = request.limit.unwrap_or(max_questions);
    if limit == 0 || limit > max_questions {
        return Err(ApiError::bad_request(
            "limit_exceeded",
            format!("limit: {limit}; from 1 to {max_questions} questions (serve.max_eval_questions)"),
        ));
    }
    Ok((request.methods.clone(), ks, limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(methods: &[&str]) -> EvalRequest {
        EvalRequest {
            methods: methods.iter().map(|m| m.to_string()).collect(),
            ks: None,
            baseline: None,
            limit: None,
            namespace: None,
        }
    }

    #[test]
    fn eval_requests_are_checked_field_by_field() {
        let dense = hoprag::retrieve::dense::SPEC.name;
        let ppr_variant = format!("{}[alpha=0.5]", hoprag::retrieve::ppr::SPEC.name);
        let (methods, ks, limit) = check_eval(&request(&[dense, &ppr_variant]), 100, 200).unwrap();
        assert_eq!((methods.len(), ks, limit), (2, vec![2, 5, 10, 15], 200));
        let message = |r: &EvalRequest| check_eval(r, 100, 200).unwrap_err().message;
        assert!(message(&request(&[])).starts_with("methods:"));
        assert!(message(&request(&[dense, "nope"])).starts_with("methods[1]: unknown method"));
        let mut r = request(&[dense]);
        r.baseline = Some("nope".into());
        assert!(message(&r).starts_with("baseline:"));
        r.baseline = None;
        r.ks = Some(vec![5, 101]);
        assert!(message(&r).starts_with("ks[1]:"));
        r.ks = None;
        r.limit = Some(201);
        assert!(message(&r).starts_with("limit:"));
    }
}
