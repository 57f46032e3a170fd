//! Routes for looking inside the served index, behind the web page: what the index is
//! (`GET /v1/index`), passages by id or position (`GET /v1/passages`), an entity's
//! neighbourhood (`GET /v1/graph/entity`), and the walk a graph method makes for a
//! question (`POST /v1/graph/walk`); and, with a data set given to the server, its
//! questions and evaluations on it (in [`super::dataset`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Extension, State};
use axum::http::{StatusCode, Uri};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::api::{namespace_param, query_params, ApiError, ApiJson, Capabilities, ErrorBody, NamespaceParam};
use super::auth::Access;
use super::dataset::{DatasetSummary, Shared};
use super::handlers::Token;
use super::state::generation_name;
use hoprag::engine::Engine;
use hoprag::graph::linking::{FactMatch, LinkedEntity};
use hoprag::graph::walk::{RankedBy, WalkExplanation};
use hoprag::graph::{normalize_entity, EdgeKind, EntityGraph, GraphContext};
use hoprag::retrieve::registry::{self, MethodSpec, TraceKind, METHODS};
use hoprag::retrieve::{GraphKind, Query, Retriever};

/// Most passages one lookup returns.
const MAX_LOOKUP: usize = 100;
/// Most nodes a drawn walk has, the question's node included: more is not readable.
const MAX_WALK_NODES: usize = 60;
const DEFAULT_WALK_NODES: usize = 40;

/// The served index at a glance.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct IndexInfo {
    /// The index folder, or the PostgreSQL URL without its password.
    pub location: String,
    /// `folder` or `postgres`.
    pub store: String,
    pub generation: String,
    pub passages: usize,
    /// `none`, `heuristic` or `llm`: what `auto` chooses by.
    pub graph_kind: String,
    /// The index manifest: embedder, counts, vector index, sources, graph statistics.
    #[schema(value_type = Object)]
    pub manifest: serde_json::Value,
    /// Every method, and whether it can run here (a graph, an LLM).
    pub methods: Vec<MethodAvailability>,
    /// The entities most passages mention (at most 12), where the index has a graph.
    pub top_entities: Vec<EntityCount>,
    /// The server's data set, when it was given one (`hoprag serve --dataset`).
    pub dataset: Option<DatasetSummary>,
    pub limits: Limits,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EntityCount {
    pub id: u32,
    pub label: String,
    /// Passages that mention it.
    pub passages: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MethodAvailability {
    pub name: String,
    pub available: bool,
    /// Why it cannot run, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub capabilities: Capabilities,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Limits {
    pub max_k: usize,
    pub default_k: usize,
    pub max_eval_questions: usize,
}

/// What the served index is: its store, generation, manifest and methods.
#[utoipa::path(get, path = "/v1/index", params(NamespaceParam),
    responses((status = 200, body = IndexInfo), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn index_info(
    State(inspect): Shared,
    Extension(scope): Token,
    uri: Uri,
) -> Result<Json<IndexInfo>, ApiError> {
    let engine = inspect.app.served(&scope, namespace_param(&uri)?.as_deref(), Access::Read).await?.engine();
    let manifest = serde_json::to_value(&engine.index.manifest).map_err(|e| ApiError::internal(e.to_string()))?;
    let graph_kind =
        serde_json::to_value(engine.graph_kind()).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
    let top_entities = match engine.graph_kind() {
        GraphKind::None => Vec::new(),
        _ => {
            let ctx = graph_of(&engine)?;
            inspect.app.on_worker(move |_| Ok(most_mentioned(ctx.graph(), 12))).await?
        }
    };
    let s = &inspect.app.settings;
    Ok(Json(IndexInfo {
        location: engine.store.location().to_string(),
        store: if engine.store.folder().is_some() { "folder" } else { "postgres" }.into(),
        generation: generation_name(&engine),
        passages: engine.index.len(),
        graph_kind,
        manifest,
        methods: METHODS.iter().map(|m| availability(&engine, m)).collect(),
        top_entities,
        dataset: inspect.dataset.as_ref().map(|d| d.summary()),
        limits: Limits { max_k: s.max_k, default_k: s.default_k, max_eval_questions: s.max_eval_questions },
    }))
}

/// The `n` entities the most passages mention, most first.
fn most_mentioned(g: &hoprag::graph::EntityGraph, n: usize) -> Vec<EntityCount> {
    let mut counts = vec![0usize; g.entities.len()];
    for entities in &g.passage_entities {
        for &e in entities {
            counts[e as usize] += 1;
        }
    }
    let mut order: Vec<usize> = (0..counts.len()).filter(|&e| counts[e] > 0).collect();
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
    order
        .into_iter()
        .take(n)
        .map(|e| EntityCount { id: e as u32, label: g.labels[e].clone(), passages: counts[e] })
        .collect()
}

/// Whether `name` can run on this engine, checked without building it: building a
/// GEAR method would build its triple index, which can take a while.
fn availability(engine: &Engine, method: &MethodSpec) -> MethodAvailability {
    let reason = if !method.runs_on(engine.graph_kind()) {
        Some("needs an entity graph (hoprag graph)".to_string())
    } else if engine.uses_llm(method.name) {
        match (engine.llm(), engine.llm_source().check()) {
            (None, _) => Some("needs an LLM".to_string()),
            (Some(_), Err(e)) => Some(format!("needs the LLM: {e}")),
            (Some(_), Ok(_)) => None,
        }
    } else {
        None
    };
    let capabilities = Capabilities::of(method, engine);
    MethodAvailability { name: method.name.to_string(), available: reason.is_none(), reason, capabilities }
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LookupParams {
    /// Passage ids, comma-separated.
    pub ids: Option<String>,
    /// Passage positions in the index (as traces name them), comma-separated.
    pub idx: Option<String>,
    /// The namespace (the default one when left out).
    #[param(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PassageList {
    pub passages: Vec<IndexedPassage>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct IndexedPassage {
    /// Position in the index: traces name passages by it.
    pub idx: u32,
    pub id: String,
    pub title: String,
    pub text: String,
}

/// Passages by id or by position, in the order asked (ids first). At most 100.
#[utoipa::path(get, path = "/v1/passages", params(LookupParams),
    responses((status = 200, body = PassageList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn lookup_passages(
    State(inspect): Shared,
    Extension(scope): Token,
    uri: Uri,
) -> Result<Json<PassageList>, ApiError> {
    let mut query = query_params(&uri)?;
    let params =
        LookupParams { ids: query.remove("ids"), idx: query.remove("idx"), namespace: query.remove("namespace") };
    let engine = inspect.app.served(&scope, params.namespace.as_deref(), Access::Read).await?.engine();
    let split = |s: &Option<String>| -> Vec<String> {
        s.as_deref().unwrap_or("").split(',').map(str::trim).filter(|x| !x.is_empty()).map(String::from).collect()
    };
    let (ids, idx) = (split(&params.ids), split(&params.idx));
    if ids.len() + idx.len() > MAX_LOOKUP {
        return Err(ApiError::bad_request(
            "limit_exceeded",
            format!("{} passages asked for; the limit is {MAX_LOOKUP}", ids.len() + idx.len()),
        ));
    }
    let mut found = Vec::new();
    if !ids.is_empty() {
        let by_id: HashMap<&str, usize> =
            engine.index.passages().iter().enumerate().map(|(i, p)| (p.id.as_str(), i)).collect();
        for id in &ids {
            let i = *by_id
                .get(id.as_str())
                .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("ids: no passage {id:?}")))?;
            found.push(i);
        }
    }
    for x in &idx {
        let i: usize = x
            .parse()
            .map_err(|_| ApiError::bad_request("invalid_request", format!("idx: {x:?} is not a passage position")))?;
        if i >= engine.index.len() {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("idx: {i} is past the last passage ({})", engine.index.len().saturating_sub(1)),
            ));
        }
        found.push(i);
    }
    let passages = found
        .into_iter()
        .map(|i| {
            let p = engine.index.passage(i as u32);
            IndexedPassage { idx: i as u32, id: p.id.clone(), title: p.title.clone(), text: p.text.clone() }
        })
        .collect();
    Ok(Json(PassageList { passages }))
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EntityParams {
    /// The entity's name (matched after normalisation: case, punctuation), or part of it;
    /// it must hold a letter or digit.
    #[param(pattern = r"\w")]
    pub name: String,
    /// Most neighbours returned (default 30, at most 200).
    pub limit: Option<usize>,
    /// The namespace (the default one when left out).
    #[param(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

/// An entity of the graph, its neighbours, the triples that name it and the passages
/// that mention it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EntityNeighbourhood {
    pub entity: EntityRef,
    pub neighbours: Vec<Neighbour>,
    /// Distinct statements that name it (at most 50), each with one passage stating it.
    pub triples: Vec<TripleRef>,
    pub passages: Vec<PassageRef>,
    /// Passages that mention it in all (the lists above are cut).
    pub passage_count: usize,
    /// Other entities whose name contains the one asked for.
    pub candidates: Vec<EntityRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EntityRef {
    pub id: u32,
    pub label: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Neighbour {
    pub id: u32,
    pub label: String,
    /// `relation` (from triples) or `synonym` (similar embeddings).
    pub kind: String,
    pub weight: f32,
    /// Predicates of the triples between the two, as stated (at most 3).
    pub predicates: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TripleRef {
    pub subject: String,
    pub predicate: String,
    pub object: String,
    /// Id of the passage that states it.
    pub passage: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PassageRef {
    pub id: String,
    pub title: String,
}

/// An entity's neighbourhood in the entity graph. The name is matched exactly after
/// normalisation, else as part of an entity's name (the shortest such name wins).
#[utoipa::path(get, path = "/v1/graph/entity", params(EntityParams),
    responses((status = 200, body = EntityNeighbourhood), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn entity(
    State(inspect): Shared,
    Extension(scope): Token,
    uri: Uri,
) -> Result<Json<EntityNeighbourhood>, ApiError> {
    let mut query = query_params(&uri)?;
    let namespace = query.remove("namespace");
    let limit = match query.remove("limit") {
        Some(text) => Some(
            text.parse()
                .map_err(|_| ApiError::bad_request("invalid_request", format!("limit: {text:?} is not a number")))?,
        ),
        None => None,
    };
    let name = query.remove("name").ok_or_else(|| ApiError::bad_request("invalid_request", "name: missing"))?;
    let params = EntityParams { name, limit, namespace };
    let wanted = normalize_entity(&params.name);
    if wanted.is_empty() {
        return Err(ApiError::bad_request("invalid_request", "name: empty (after normalisation)"));
    }
    let limit = params.limit.unwrap_or(30).clamp(1, 200);
    let engine = inspect.app.served(&scope, params.namespace.as_deref(), Access::Read).await?.engine();
    let ctx = graph_of(&engine)?;
    // A scan of every name: cheap next to a query's walk, and off the async threads.
    inspect.app.on_worker(move |_| neighbourhood(&engine, &ctx, &wanted, limit)).await.map(Json)
}

fn neighbourhood(
    engine: &Engine,
    ctx: &GraphContext,
    wanted: &str,
    limit: usize,
) -> Result<EntityNeighbourhood, ApiError> {
    let g = ctx.graph();
    let passage = |p: u32| engine.index.passage(p);
    let mut candidates: Vec<u32> =
        (0..g.entities.len() as u32).filter(|&e| g.entities[e as usize].contains(wanted)).collect();
    candidates.sort_by_key(|&e| (g.entities[e as usize].len(), e));
    let found = g.entity_id(wanted).or_else(|| candidates.first().copied()).ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("name: no entity named or containing {wanted:?}"))
    })?;
    let entity_ref = |e: u32| EntityRef { id: e, label: g.labels[e as usize].clone() };
    let mut predicates: HashMap<u32, Vec<String>> = HashMap::new();
    let mut triples = Vec::new();
    // One statement made in many passages is listed once.
    let mut stated = HashSet::new();
    for (t, ends) in g.triple_entities.iter().enumerate() {
        let Some((s, o)) = *ends else { continue };
        if s != found && o != found {
            continue;
        }
        let triple = &g.triples[t];
        let list = predicates.entry(if s == found { o } else { s }).or_default();
        if list.len() < 3 && !list.iter().any(|p| p == triple.predicate.as_str()) {
            list.push(triple.predicate.to_string());
        }
        if triples.len() < 50 && stated.insert(triple.text().to_lowercase()) {
            triples.push(TripleRef {
                subject: triple.subject.to_string(),
                predicate: triple.predicate.to_string(),
                object: triple.object.to_string(),
                passage: passage(triple.passage).id.clone(),
            });
        }
    }
    let mut neighbours: Vec<Neighbour> = g
        .edges
        .iter()
        .filter(|e| e.a == found || e.b == found)
        .map(|e| {
            let other = if e.a == found { e.b } else { e.a };
            Neighbour {
                id: other,
                label: g.labels[other as usize].clone(),
                kind: edge_kind(e.kind).into(),
                weight: e.weight,
                predicates: predicates.get(&other).cloned().unwrap_or_default(),
            }
        })
        .collect();
    neighbours.sort_by(|a, b| hoprag::rank::desc(a.weight, b.weight).then(a.id.cmp(&b.id)));
    neighbours.truncate(limit);
    let mentioning: Vec<usize> =
        g.passage_entities.iter().enumerate().filter(|(_, es)| es.contains(&found)).map(|(p, _)| p).collect();
    let passages = mentioning
        .iter()
        .take(20)
        .map(|&p| PassageRef { id: passage(p as u32).id.clone(), title: passage(p as u32).title.clone() })
        .collect();
    Ok(EntityNeighbourhood {
        entity: entity_ref(found),
        neighbours,
        triples,
        passages,
        passage_count: mentioning.len(),
        candidates: candidates.into_iter().filter(|&e| e != found).take(10).map(entity_ref).collect(),
    })
}

fn edge_kind(kind: EdgeKind) -> &'static str {
    match kind {
        EdgeKind::Relation => "relation",
        EdgeKind::Synonym => "synonym",
    }
}

/// The engine's graph, or a 400 saying the index has none.
fn graph_of(engine: &Engine) -> Result<Arc<GraphContext>, ApiError> {
    engine.graph().map_err(|e| ApiError::bad_request("method_unavailable", e.to_string()))
}

/// A question whose graph walk to draw.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WalkRequest {
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
    pub query: String,
    /// `ppr`, `phasegraph`, or `auto` / `auto_llm` when they choose a graph method
    /// (default `ppr`): whose linking and walk parameters to use.
    pub method: Option<String>,
    /// Most nodes drawn, the question's included (default 40, between 2 and 60).
    #[schema(minimum = 2, maximum = 60)]
    pub nodes: Option<usize>,
    /// Passage ids to draw whatever their mass (at most 20), e.g. the gold passages and
    /// the method's result: where a hop was lost shows as a passage the walk left light.
    #[serde(default)]
    pub include: Vec<String>,
    /// The namespace (the default one when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$")]
    pub namespace: Option<String>,
}

/// The walk a graph method makes for a question: the entities the question links to,
/// the facts nearest to it, and the nodes (entities and passages) that end up with the
/// most mass, with the edges between them.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WalkResponse {
    pub query: String,
    /// The method whose parameters were used (`ppr` or `phasegraph`).
    pub method: String,
    /// What was asked for, when it resolved to another method (`auto`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The entity seeds, heaviest first, as the method's trace step "link entities"
    /// gives them.
    #[schema(value_type = Vec<Object>)]
    pub seeds: Vec<LinkedEntity>,
    pub facts: Vec<WalkFact>,
    pub nodes: Vec<WalkNode>,
    pub edges: Vec<WalkEdge>,
    /// Iterations and residual of the walk whose masses are drawn (0 without a walk).
    pub iterations: usize,
    pub residual: f64,
    /// How the method ranked the passages: `{"walk": "split", proven, pushes, residual,
    /// bound, top}` (estimates within `bound` of the full walk's; the masses drawn are
    /// then the full walk's from the same seeds) or `{"walk": "full", iterations,
    /// residual, ranked}` (the masses drawn are the method's own); absent when no entity
    /// was linked (the method answered with dense retrieval).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub ranking: Option<RankedBy>,
    /// Entity and passage nodes with mass, before the cut to `nodes`.
    pub reached: Reached,
    /// Time of each step of the method's trace, and of the selection, in microseconds.
    pub micros: BTreeMap<String, u64>,
    /// What to know to read the drawing (whose masses they are, or why there is none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WalkFact {
    pub text: String,
    /// Node keys of its subject and object (`e12`), where they are entities.
    pub subject: Option<String>,
    pub object: Option<String>,
    /// Min-max normalised over all facts, as the seeds weigh it.
    pub score: f64,
    pub similarity: f32,
    /// Id of the passage that states it.
    pub passage: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WalkNode {
    /// `q`, `e{entity}` or `p{passage position}`.
    pub key: String,
    /// `query`, `entity` or `passage`.
    pub kind: String,
    pub label: String,
    /// PPR mass (the stationary probability).
    pub mass: f64,
    /// Rank by mass among nodes of its kind (1 = heaviest).
    pub rank: usize,
    /// Seed weight, for entities the question links to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<f64>,
    /// For passages: the passage id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passage_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WalkEdge {
    pub a: String,
    pub b: String,
    /// `seed` (question to entity), `fact` (a matched fact), `relation`, `synonym`, or
    /// `mention` (passage to entity).
    pub kind: String,
    pub weight: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Reached {
    pub entities: usize,
    pub passages: usize,
}

/// The walk of a graph method for a question, cut to its heaviest nodes: what to draw.
/// It runs the method itself (through the engine, so `auto` chooses as it does for a
/// query) and draws the explanation the method returns; after the split walk, which
/// computes no node's mass but the ranked passages', that explanation holds the full
/// walk's from the same seeds, so it costs more than the query.
#[utoipa::path(post, path = "/v1/graph/walk", request_body = WalkRequest,
    responses((status = 200, body = WalkResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn walk(
    State(inspect): Shared,
    Extension(scope): Token,
    ApiJson(request): ApiJson<WalkRequest>,
) -> Result<Json<WalkResponse>, ApiError> {
    let s = &inspect.app.settings;
    if request.query.trim().is_empty() {
        return Err(ApiError::bad_request("invalid_request", "query: empty"));
    }
    let chars = request.query.chars().count();
    if chars > s.max_query_chars {
        return Err(ApiError::bad_request(
            "limit_exceeded",
            format!("query: {chars} characters; the limit is {} (serve.max_query_chars)", s.max_query_chars),
        ));
    }
    let nodes = request.nodes.unwrap_or(DEFAULT_WALK_NODES);
    if !(2..=MAX_WALK_NODES).contains(&nodes) {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("nodes: {nodes}; between 2 and {MAX_WALK_NODES}"),
        ));
    }
    if request.include.len() > 20 {
        return Err(ApiError::bad_request(
            "limit_exceeded",
            format!("include: {} passages; the limit is 20", request.include.len()),
        ));
    }
    let asked = request.method.clone().unwrap_or_else(|| hoprag::retrieve::ppr::SPEC.name.into());
    let engine = inspect.app.served(&scope, request.namespace.as_deref(), Access::Read).await?.engine();
    let include = {
        let by_id: HashMap<&str, usize> =
            engine.index.passages().iter().enumerate().map(|(i, p)| (p.id.as_str(), i)).collect();
        request
            .include
            .iter()
            .enumerate()
            .map(|(i, id)| {
                by_id.get(id.as_str()).copied().ok_or_else(|| {
                    ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("include[{i}]: no passage {id:?}"))
                })
            })
            .collect::<Result<Vec<usize>, _>>()?
    };
    let ctx = graph_of(&engine)?;
    let retriever = walk_method(&engine, &asked)?;
    let (query, k) = (request.query, s.default_k);
    let work = inspect.app.on_worker(move |_| {
        let (retrieval, explanation) = retriever
            .explain(&Query::new(query.as_str()), k)
            .map_err(|e| ApiError::internal(format!("{asked} failed: {e}")))?
            .ok_or_else(|| {
                ApiError::bad_request(
                    "method_unavailable",
                    format!("method: {asked} walks no entity graph on this index; use ppr, phasegraph or auto"),
                )
            })?;
        let mut micros: BTreeMap<String, u64> = BTreeMap::new();
        for step in &retrieval.trace.steps {
            *micros.entry(step.name.clone()).or_default() += step.micros;
        }
        let t = Instant::now();
        let mut out = draw_walk(&engine, &ctx, &query, explanation, nodes, &include);
        micros.insert("select".into(), t.elapsed().as_micros() as u64);
        out.micros = micros;
        out.via = (asked != out.method).then_some(asked);
        Ok(out)
    });
    let limit = inspect.app.settings.timeout();
    tokio::time::timeout(limit, work)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                format!("the walk took longer than {} ms (serve.timeout_ms)", limit.as_millis()),
            )
        })?
        .map(Json)
}

/// The method `asked` names, built as the engine builds it for a query.
fn walk_method(engine: &Engine, asked: &str) -> Result<Box<dyn Retriever>, ApiError> {
    let Some(method) = registry::find(asked) else {
        let walking: Vec<&str> =
            METHODS.iter().filter(|m| matches!(m.trace, TraceKind::Walk | TraceKind::Choice)).map(|m| m.name).collect();
        return Err(ApiError::bad_request(
            "unknown_method",
            format!("method: {asked:?} is no method; use {}", walking.join(", ")),
        ));
    };
    engine.retriever(method.name).map_err(|e| ApiError::bad_request("method_unavailable", format!("method: {e}")))
}

/// The drawing of a method's explanation: its seeds, its facts and its walk cut to the
/// heaviest `cap` nodes, with the passages at positions `include` among them.
fn draw_walk(
    engine: &Engine,
    ctx: &GraphContext,
    query: &str,
    explanation: WalkExplanation,
    cap: usize,
    include: &[usize],
) -> WalkResponse {
    let WalkExplanation { method, linked: seeds, facts, walk } = explanation;
    let g = ctx.graph();
    let e = g.entities.len();
    let key = |node: usize| if node < e { format!("e{node}") } else { format!("p{}", node - e) };
    let query_node = WalkNode {
        key: "q".into(),
        kind: "query".into(),
        label: query.to_string(),
        mass: 0.0,
        rank: 0,
        seed: None,
        passage_id: None,
    };
    let mut edges: Vec<WalkEdge> = seeds
        .iter()
        .map(|s| WalkEdge {
            a: "q".into(),
            b: key(s.entity as usize),
            kind: "seed".into(),
            weight: s.weight as f32,
            label: Some(format!("{}: {}", s.via, s.evidence)),
        })
        .collect();
    let Some(walk) = walk else {
        let note = "No entity linked: the method answered with dense retrieval.".to_string();
        let walk_facts = facts.iter().map(|f| walk_fact(engine, g, f, &key)).collect();
        return WalkResponse {
            query: query.to_string(),
            method,
            via: None,
            seeds,
            facts: walk_facts,
            nodes: vec![query_node],
            edges,
            iterations: 0,
            residual: 0.0,
            ranking: None,
            reached: Reached { entities: 0, passages: 0 },
            micros: BTreeMap::new(),
            note: Some(note),
        };
    };
    let (entities, passages) = (walk.heaviest_entities(), walk.heaviest_passages());
    let reached = Reached { entities: entities.len(), passages: passages.len() };
    let shown = shown_nodes(g, &seeds, &facts, include, &entities, &passages, cap - 1);
    let set: HashSet<usize> = shown.iter().copied().collect();

    let rank_of = |heaviest: &[(usize, f64)]| -> HashMap<usize, usize> {
        heaviest.iter().enumerate().map(|(i, x)| (x.0, i + 1)).collect()
    };
    let (entity_rank, passage_rank) = (rank_of(&entities), rank_of(&passages));
    let seed_weight: HashMap<usize, f64> = seeds.iter().map(|s| (s.entity as usize, s.weight)).collect();
    let mut nodes = vec![query_node];
    for &node in &shown {
        let (kind, label, rank, passage_id) = if node < e {
            ("entity", g.labels[node].clone(), entity_rank.get(&node).copied().unwrap_or(0), None)
        } else {
            let p = engine.index.passage((node - e) as u32);
            ("passage", p.title.clone(), passage_rank.get(&node).copied().unwrap_or(0), Some(p.id.clone()))
        };
        nodes.push(WalkNode {
            key: key(node),
            kind: kind.into(),
            label,
            mass: walk.mass.scores[node],
            rank,
            seed: seed_weight.get(&node).copied(),
            passage_id,
        });
    }

    // A matched fact between two drawn entities is drawn as their edge.
    let mut fact_pairs = HashSet::new();
    for f in &facts {
        let ends = g.triple_entities[f.triple as usize];
        if let Some((a, b)) = ends.filter(|(a, b)| set.contains(&(*a as usize)) && set.contains(&(*b as usize))) {
            if fact_pairs.insert((a.min(b), a.max(b))) {
                edges.push(WalkEdge {
                    a: key(a as usize),
                    b: key(b as usize),
                    kind: "fact".into(),
                    weight: f.score as f32,
                    label: Some(g.triples[f.triple as usize].predicate.to_string()),
                });
            }
        }
    }
    edges.extend(graph_edges(g, &shown, &set, &fact_pairs, &key));
    let walk_facts = facts.iter().map(|f| walk_fact(engine, g, f, &key)).collect();
    let note = (!walk.mass.from_method).then(|| {
        "The method ranked by the split walk, which computes no node's mass but the ranked passages' estimates: \
         the masses drawn are the full walk's from the same seeds."
            .to_string()
    });
    WalkResponse {
        query: query.to_string(),
        method,
        via: None,
        seeds,
        facts: walk_facts,
        nodes,
        edges,
        iterations: walk.mass.iterations,
        residual: walk.mass.residual,
        ranking: Some(walk.ranking),
        reached,
        micros: BTreeMap::new(),
        note,
    }
}

/// The nodes to draw, in at most `places`: the seeds, the matched facts' ends and the
/// passages asked for come first, then three entities for every two passages, heaviest
/// first.
fn shown_nodes(
    g: &EntityGraph,
    seeds: &[LinkedEntity],
    facts: &[FactMatch],
    include: &[usize],
    entities: &[(usize, f64)],
    passages: &[(usize, f64)],
    places: usize,
) -> Vec<usize> {
    let (e, graph_passages) = (g.entities.len(), g.passage_entities.len());
    let mut shown: Vec<usize> = Vec::new();
    let show = |node: usize, shown: &mut Vec<usize>| {
        if shown.len() < places && !shown.contains(&node) {
            shown.push(node);
        }
    };
    for s in seeds {
        show(s.entity as usize, &mut shown);
    }
    for f in facts {
        if let Some((a, b)) = g.triple_entities[f.triple as usize] {
            show(a as usize, &mut shown);
            show(b as usize, &mut shown);
        }
    }
    // Passages outside the graph (added since it was built) have no node.
    for &p in include.iter().filter(|&&p| p < graph_passages) {
        show(e + p, &mut shown);
    }
    let passage_places = (places.saturating_sub(shown.len()) * 2 / 5).max(places.min(3));
    let entity_places = places.saturating_sub(passage_places);
    for &(node, _) in entities {
        if shown.len() >= entity_places {
            break;
        }
        show(node, &mut shown);
    }
    for &(node, _) in passages {
        show(node, &mut shown);
    }
    shown
}

/// The graph's edges between drawn nodes: relation and synonym edges (but where a fact
/// edge is drawn), each labelled with the predicate of a triple between its ends, and
/// the drawn passages' mentions.
fn graph_edges(
    g: &EntityGraph,
    shown: &[usize],
    set: &HashSet<usize>,
    fact_pairs: &HashSet<(u32, u32)>,
    key: &dyn Fn(usize) -> String,
) -> Vec<WalkEdge> {
    let e = g.entities.len();
    let mut edges = Vec::new();
    // A predicate to label each relation edge with (the first triple's).
    let mut predicate: HashMap<(u32, u32), &str> = HashMap::new();
    for (t, ends) in g.triple_entities.iter().enumerate() {
        if let Some((a, b)) = *ends {
            if set.contains(&(a as usize)) && set.contains(&(b as usize)) {
                predicate.entry((a.min(b), a.max(b))).or_insert(g.triples[t].predicate.as_str());
            }
        }
    }
    for edge in &g.edges {
        let pair = (edge.a.min(edge.b), edge.a.max(edge.b));
        if set.contains(&(edge.a as usize)) && set.contains(&(edge.b as usize)) && !fact_pairs.contains(&pair) {
            edges.push(WalkEdge {
                a: key(edge.a as usize),
                b: key(edge.b as usize),
                kind: edge_kind(edge.kind).into(),
                weight: edge.weight,
                label: predicate.get(&pair).map(|p| p.to_string()),
            });
        }
    }
    for &node in shown.iter().filter(|&&n| n >= e) {
        for &x in &g.passage_entities[node - e] {
            if set.contains(&(x as usize)) {
                edges.push(WalkEdge {
                    a: key(node),
                    b: key(x as usize),
                    kind: "mention".into(),
                    weight: 1.0,
                    label: None,
                });
            }
        }
    }
    edges
}

fn walk_fact(engine: &Engine, g: &EntityGraph, f: &FactMatch, key: &dyn Fn(usize) -> String) -> WalkFact {
    let t = &g.triples[f.triple as usize];
    let ends = g.triple_entities[f.triple as usize];
    WalkFact {
        text: t.text(),
        subject: ends.map(|(a, _)| key(a as usize)),
        object: ends.map(|(_, b)| key(b as usize)),
        score: f.score,
        similarity: f.similarity,
        passage: engine.index.passage(t.passage).id.clone(),
    }
}
