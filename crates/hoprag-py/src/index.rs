//! `Index`: an opened index and its engine, and `Result`, one retrieved passage.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use hoprag::corpus::{load_corpus, load_entries, CorpusOptions, IngestReport, LoadedCorpus};
use hoprag::embed::{load_embedder, EmbedderSpec, TextKind};
use hoprag::progress::Silent;
use hoprag::response::{RankedPassage, RetrieveResponse};
use hoprag::retrieve::{Query, Retrieval};
use hoprag::store::{self, BuildOptions, Store};
use hoprag::{Config, Engine};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use rayon::prelude::*;
use serde_json::Value;

use crate::convert::{self, type_name};
use crate::error::{to_py, UnsupportedError};

/// An index folder opened with its embedder, ready to retrieve from.
#[pyclass(name = "Index", module = "hoprag._hoprag", frozen)]
pub struct PyIndex {
    path: PathBuf,
    /// Replaced by `add`, which publishes a new generation of the folder.
    engine: RwLock<Arc<Engine>>,
    /// How the passages of the last `build` or `add` were read.
    ingest: RwLock<Option<IngestReport>>,
    /// The entity graph `build` made: its triple source, what could not be used, its size.
    graph_report: Option<Value>,
}

/// One retrieved passage.
#[pyclass(name = "Result", module = "hoprag._hoprag", frozen, get_all)]
pub struct RetrievedPassage {
    /// The passage's id in the index.
    id: String,
    title: String,
    text: String,
    score: f32,
    /// 1 for the best passage.
    rank: usize,
    /// The method's decision record: its steps, with timings and details (`auto` names
    /// the pipeline it chose).
    trace: Py<PyAny>,
    /// The method that ran.
    method: String,
    /// The document the passage belongs to; None when it is a document of its own (its
    /// id names it).
    doc: Option<String>,
    /// The passage's metadata (a dict), or None.
    meta: Py<PyAny>,
}

#[pymethods]
impl RetrievedPassage {
    fn __repr__(&self) -> String {
        let title: String = self.title.chars().take(40).collect();
        format!("Result(rank={}, id={:?}, title={:?}, score={:.4})", self.rank, self.id, title, self.score)
    }
}

/// The engine's configuration for the index at `path`: defaults, the environment's
/// endpoints (as the CLI), then `settings` (dotted paths, as `--set`).
fn config(settings: Option<&Bound<'_, PyDict>>) -> PyResult<Config> {
    let mut config = Config::default();
    config.embedder.openai = config.embedder.openai.with_env();
    config.llm = config.llm.with_env();
    let Some(settings) = settings else { return Ok(config) };
    let mut paths = Vec::new();
    for (k, v) in settings.iter() {
        let key: String = k.extract().map_err(|_| PyTypeError::new_err("settings: keys must be dotted paths (str)"))?;
        paths.push((key.clone(), convert::to_json(&v, &format!("settings[{key:?}]"))?));
    }
    hoprag::config::with_settings(&config, &paths).map_err(to_py)
}

/// Passages as the engine reads them: a corpus file or folder (any format `hoprag index`
/// accepts), or a list of str or of dicts `{title, text, id?}`.
fn load_passages(py: Python<'_>, passages: &Bound<'_, PyAny>) -> PyResult<LoadedCorpus> {
    if passages.is_instance_of::<PyString>() || passages.hasattr("__fspath__")? {
        let path: PathBuf = passages.extract()?;
        return py.detach(|| load_corpus(&path, &CorpusOptions::default())).map_err(to_py);
    }
    if !passages.is_instance_of::<PyList>() && !passages.is_instance_of::<pyo3::types::PyTuple>() {
        return Err(PyTypeError::new_err(format!(
            "passages: expected a path to a corpus, or a list of str or of dicts {{title, text, id?}}; found {}",
            type_name(passages)
        )));
    }
    let mut entries = Vec::new();
    for (i, item) in passages.try_iter()?.enumerate() {
        let item = item?;
        let entry = if let Ok(text) = item.cast::<PyString>() {
            serde_json::json!({ "text": text.to_cow()? })
        } else if item.is_instance_of::<PyDict>() {
            convert::to_json(&item, &format!("passages[{i}]"))?
        } else {
            return Err(PyTypeError::new_err(format!(
                "passages[{i}]: expected str or dict {{title, text, id?}}, found {}",
                type_name(&item)
            )));
        };
        entries.push(entry);
    }
    load_entries("passages", &entries, &CorpusOptions::default()).map_err(to_py)
}

/// Tells Python about entries that were not ingested as written (nothing is dropped
/// silently); the full list is `Index.ingest_report`.
fn warn_ingest(py: Python<'_>, report: &IngestReport, kept: usize) -> PyResult<()> {
    if report.skipped.is_empty() && report.duplicates.is_empty() && report.warnings.is_empty() {
        return Ok(());
    }
    let mut message = report.summary(kept);
    for s in report.skipped.iter().chain(&report.duplicates).chain(&report.warnings).take(3) {
        message.push_str(&format!("; {}: {}", s.location, s.reason));
    }
    message.push_str(" (Index.ingest_report lists them all)");
    let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
    PyErr::warn(py, &category, &std::ffi::CString::new(message).unwrap_or_default(), 1)
}

/// The namespace a Python call names (the default one for `None`), checked.
fn namespace_of(name: Option<&str>) -> PyResult<store::Namespace> {
    name.map_or_else(|| Ok(store::Namespace::default()), store::Namespace::new).map_err(to_py)
}

/// Where `Index.build` writes: the folder `path`, or the PostgreSQL database that
/// `store` names (`postgres://USER@HOST:PORT/DB?schema=NAME`).
fn store_spec(path: &Path, store: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    let Some(store) = store.filter(|s| !s.is_none()) else { return Ok(path.to_string_lossy().into_owned()) };
    match store.extract::<String>() {
        Ok(s) if s == "folder" => Ok(path.to_string_lossy().into_owned()),
        Ok(s) if s.starts_with("postgres://") || s.starts_with("postgresql://") => Ok(s),
        _ => Err(UnsupportedError::new_err(format!(
            "store={}: expected \"folder\" (the index in `path`) or a PostgreSQL URL \
             postgres://USER@HOST:PORT/DB?schema=NAME",
            store.repr().map(|r| r.to_string()).unwrap_or_default()
        ))),
    }
}

/// The entity graph `hoprag index` builds by default: from an OpenIE file when given,
/// else the LLM-free heuristic extractor. Returns what `hoprag index --json` reports of it
/// (source, extraction report, graph statistics).
fn attach_graph(store: &dyn Store, triples: Option<&Path>, config: &Config) -> hoprag::Result<Value> {
    let index = store.load()?;
    let triples = store::triples_without_llm(&index, triples)?;
    let embedder = store::graph_embedder(&index, None, &config.embedder)?;
    let built = store::build_graph(store, &index, triples, embedder.as_ref(), &config.graph, &Silent)?;
    Ok(serde_json::json!({"source": built.source, "extraction": built.extraction, "stats": built.stats}))
}

/// Tells Python about triples, entities and OpenIE documents the graph could not use
/// (counted, never dropped silently); the full report is `Index.graph_report`.
fn warn_graph(py: Python<'_>, report: &Value) -> PyResult<()> {
    let e = &report["extraction"];
    let count = |key: &str| e[key].as_u64().or_else(|| e[key].as_array().map(|a| a.len() as u64)).unwrap_or(0);
    let (triples, entities, docs) = (count("malformed_triples"), count("malformed_entities"), count("unmatched_docs"));
    if triples + entities + docs == 0 {
        return Ok(());
    }
    let mut message = format!(
        "{}: {triples} malformed triples and {entities} malformed entities skipped; {docs} documents matched no passage",
        report["source"].as_str().unwrap_or("graph")
    );
    let examples = e["unmatched_docs"].as_array().into_iter().chain(e["malformed_examples"].as_array()).flatten();
    for example in examples.filter_map(Value::as_str).take(3) {
        message.push_str(&format!("; {example}"));
    }
    message.push_str(" (Index.graph_report lists them all)");
    let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
    PyErr::warn(py, &category, &std::ffi::CString::new(message).unwrap_or_default(), 1)
}

impl PyIndex {
    fn engine(&self) -> Arc<Engine> {
        self.engine.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Applies an edit without the GIL and serves the generation it published.
    fn apply(
        &self,
        py: Python<'_>,
        request: &store::edit::Request,
        source: &str,
        dry_run: bool,
    ) -> PyResult<store::edit::EditReport> {
        let engine = self.engine();
        let options = store::edit::EditOptions { dry_run, source: source.into(), ..Default::default() };
        let (report, next) = py
            .detach(|| -> hoprag::Result<_> {
                let report = engine.edit(request, &options, &Silent)?;
                let next = if report.generation.is_some() { Some(engine.reload_after(&report)?) } else { None };
                Ok((report, next))
            })
            .map_err(to_py)?;
        if let Some(next) = next {
            *self.engine.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        }
        Ok(report)
    }

    /// `path` is the store's location: the folder, or the database URL without its
    /// password.
    fn new(engine: Engine, ingest: Option<IngestReport>, graph_report: Option<Value>) -> Self {
        let path = PathBuf::from(engine.store.location());
        PyIndex { path, engine: RwLock::new(Arc::new(engine)), ingest: RwLock::new(ingest), graph_report }
    }
}

/// Passages for an edit: as `load_passages`, but all or nothing, since a skipped entry of
/// a sync would delete its document: an entry the loader skips raises `InputError`.
fn edit_passages(py: Python<'_>, passages: &Bound<'_, PyAny>) -> PyResult<LoadedCorpus> {
    let corpus = load_passages(py, passages)?;
    if let Some(s) = corpus.report.skipped.first() {
        let more = corpus.report.skipped.len() - 1;
        let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
        return Err(crate::error::InputError::new_err(format!(
            "{}: {}{more}; nothing was changed",
            s.location, s.reason
        )));
    }
    Ok(corpus)
}

/// What `upsert`, `delete` and `sync` return: the counts, flat, with whether a generation
/// was published.
fn edit_summary(report: &store::edit::EditReport) -> Value {
    let mut out = serde_json::to_value(&report.counts).unwrap_or_else(|_| Value::Object(Default::default()));
    if let Value::Object(map) = &mut out {
        map.insert("changed".into(), Value::Bool(report.generation.is_some()));
        map.insert("generation".into(), report.generation.clone().map_or(Value::Null, Value::String));
        map.insert("dry_run".into(), Value::Bool(report.dry_run));
    }
    out
}

/// A query, or a list of them: which one decides the shape of `retrieve`'s answer.
enum Queries {
    One(String),
    Many(Vec<String>),
}

fn queries(q: &Bound<'_, PyAny>) -> PyResult<Queries> {
    if let Ok(s) = q.cast::<PyString>() {
        return Ok(Queries::One(s.to_cow()?.into_owned()));
    }
    if q.is_instance_of::<PyList>() || q.is_instance_of::<pyo3::types::PyTuple>() {
        let mut out = Vec::new();
        for (i, item) in q.try_iter()?.enumerate() {
            let item = item?;
            let s = item
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err(format!("query[{i}]: expected str, found {}", type_name(&item))))?;
            out.push(s.to_cow()?.into_owned());
        }
        return Ok(Queries::Many(out));
    }
    Err(PyTypeError::new_err(format!("query: expected str or a list of str, found {}", type_name(q))))
}

fn results(py: Python<'_>, method: &str, passages: Vec<RankedPassage>, trace: &Value) -> PyResult<Py<PyList>> {
    let trace = convert::to_py(py, trace)?.unbind();
    let items: Vec<RetrievedPassage> = passages
        .into_iter()
        .map(|p| {
            Ok(RetrievedPassage {
                meta: convert::to_py(py, &p.meta)?.unbind(),
                id: p.id,
                title: p.title,
                text: p.text,
                score: p.score,
                rank: p.rank,
                trace: trace.clone_ref(py),
                method: method.to_string(),
                doc: p.doc,
            })
        })
        .collect::<PyResult<_>>()?;
    Ok(PyList::new(py, items.into_iter().map(|r| Bound::new(py, r)).collect::<PyResult<Vec<_>>>()?)?.unbind())
}

#[pymethods]
impl PyIndex {
    /// Builds an index in the folder `path` from `passages` (see `hoprag.Index.build`).
    #[staticmethod]
    #[pyo3(signature = (passages, path, embedder = "minilm", triples = None, store = None, graph = true, overwrite = false, settings = None, namespace = None))]
    #[allow(clippy::too_many_arguments)]
    fn build(
        py: Python<'_>,
        passages: &Bound<'_, PyAny>,
        path: PathBuf,
        embedder: &str,
        triples: Option<PathBuf>,
        store: Option<&Bound<'_, PyAny>>,
        graph: bool,
        overwrite: bool,
        settings: Option<&Bound<'_, PyDict>>,
        namespace: Option<&str>,
    ) -> PyResult<PyIndex> {
        let spec_of_store = store_spec(&path, store)?;
        let namespace = namespace_of(namespace)?;
        let config = config(settings)?;
        let spec: EmbedderSpec = embedder.parse().map_err(to_py)?;
        let corpus = load_passages(py, passages)?;
        let source = match passages.extract::<PathBuf>() {
            Ok(p) if !passages.is_instance_of::<PyList>() => p.display().to_string(),
            _ => "python".to_string(),
        };
        let (engine, graph_report) = py
            .detach(|| -> hoprag::Result<(Engine, Option<Value>)> {
                // A new index names the composed embedder's word table, as `hoprag index` does.
                let embedder = load_embedder(&spec.pinned()?, &config.embedder)?;
                let options = BuildOptions { overwrite, ..Default::default() };
                let store = store::open_in(&spec_of_store, &namespace, store::Open::OrCreate)?;
                store::build_index(store.as_ref(), &corpus, vec![source], embedder.as_ref(), &options, &Silent)?;
                let graph_report = if graph || triples.is_some() {
                    Some(attach_graph(store.as_ref(), triples.as_deref(), &config)?)
                } else {
                    None
                };
                Ok((Engine::new(store, embedder, config)?, graph_report))
            })
            .map_err(to_py)?;
        warn_ingest(py, &corpus.report, corpus.passages.len())?;
        if let Some(report) = &graph_report {
            warn_graph(py, report)?;
        }
        Ok(PyIndex::new(engine, Some(corpus.report), graph_report))
    }

    /// Opens the index in the folder `path` with the embedder it was built with (or
    /// `embedder`, which must be the same model).
    #[staticmethod]
    #[pyo3(signature = (path, embedder = None, settings = None, namespace = None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        embedder: Option<&str>,
        settings: Option<&Bound<'_, PyDict>>,
        namespace: Option<&str>,
    ) -> PyResult<PyIndex> {
        let namespace = namespace_of(namespace)?;
        if let Some(scheme) = ["http://", "https://"].iter().find(|s| path.to_string_lossy().starts_with(*s)) {
            return Err(UnsupportedError::new_err(format!(
                "{}: opening an index by URL ({scheme}) is not implemented; an index is a local folder (a \
                 running `hoprag serve` answers over HTTP itself)",
                path.display()
            )));
        }
        let config = config(settings)?;
        let spec = embedder.map(str::parse::<EmbedderSpec>).transpose().map_err(to_py)?;
        let engine = py
            .detach(|| {
                let store = store::open_in(&path.to_string_lossy(), &namespace, store::Open::Existing)?;
                match spec {
                    None => Engine::open(store, config),
                    Some(spec) => Engine::new(store, load_embedder(&spec, &config.embedder)?, config),
                }
            })
            .map_err(to_py)?;
        Ok(PyIndex::new(engine, None, None))
    }

    /// Upserts passages (as `hoprag add`): a passage with a `doc` replaces that document's
    /// passages, one with the id of an existing passage replaces it; the entity graph
    /// follows. Returns the counts of what changed (see `upsert`).
    #[pyo3(signature = (passages, dry_run = false))]
    fn add<'py>(&self, py: Python<'py>, passages: &Bound<'py, PyAny>, dry_run: bool) -> PyResult<Bound<'py, PyAny>> {
        self.upsert(py, passages, dry_run)
    }

    /// Upserts documents and passages (dicts `{id?, doc?, title?, text, meta?}`, str, or a
    /// corpus path): a passage with a `doc` replaces all of that document's passages; one
    /// without, whose id names an existing passage, replaces it in place; any other is a
    /// new document. All or nothing: an unusable entry raises `InputError` naming it.
    /// Returns a dict of counts (`documents_added`, `documents_replaced`,
    /// `documents_deleted`, `documents_unchanged`, `passages_added`, `passages_removed`,
    /// `passages_total`) with `changed`, `generation` and `dry_run`.
    #[pyo3(signature = (passages, dry_run = false))]
    fn upsert<'py>(&self, py: Python<'py>, passages: &Bound<'py, PyAny>, dry_run: bool) -> PyResult<Bound<'py, PyAny>> {
        let corpus = edit_passages(py, passages)?;
        let request = store::edit::Request::Upsert(corpus.passages.clone());
        let report = self.apply(py, &request, "python upsert", dry_run)?;
        warn_ingest(py, &corpus.report, corpus.passages.len())?;
        *self.ingest.write().unwrap_or_else(|e| e.into_inner()) = Some(corpus.report);
        convert::to_py(py, &edit_summary(&report))
    }

    /// Deletes documents (all their passages) or single passages by id. An unknown id
    /// raises `ConfigError` naming it, and nothing changes. Returns the counts, as `upsert`.
    #[pyo3(signature = (ids, dry_run = false))]
    fn delete<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>, dry_run: bool) -> PyResult<Bound<'py, PyAny>> {
        let ids = match queries(ids) {
            Ok(Queries::One(id)) => vec![id],
            Ok(Queries::Many(ids)) => ids,
            Err(_) => {
                return Err(PyTypeError::new_err(format!("ids: expected a list of str, found {}", type_name(ids))))
            }
        };
        let report = self.apply(py, &store::edit::Request::Delete(ids), "python delete", dry_run)?;
        convert::to_py(py, &edit_summary(&report))
    }

    /// Makes the index hold exactly `passages` (as `hoprag sync`): new documents added,
    /// changed ones replaced, missing ones deleted, unchanged ones kept (nothing embedded
    /// again). An empty `passages` raises `ConfigError` unless `allow_empty=True`.
    /// Returns the counts, as `upsert`.
    #[pyo3(signature = (passages, allow_empty = false, dry_run = false))]
    fn sync<'py>(
        &self,
        py: Python<'py>,
        passages: &Bound<'py, PyAny>,
        allow_empty: bool,
        dry_run: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let corpus = edit_passages(py, passages)?;
        let request = store::edit::Request::Sync { passages: corpus.passages.clone(), allow_empty };
        let report = self.apply(py, &request, "python sync", dry_run)?;
        warn_ingest(py, &corpus.report, corpus.passages.len())?;
        *self.ingest.write().unwrap_or_else(|e| e.into_inner()) = Some(corpus.report);
        convert::to_py(py, &edit_summary(&report))
    }

    /// Retrieves the top `k` passages for a query (a list of `Result`s), or for each of a
    /// list of queries (a list of lists), with `method` and its parameters.
    #[pyo3(signature = (query, method = hoprag::retrieve::DEFAULT_METHOD, k = 5, filter = None, **params))]
    fn retrieve(
        &self,
        py: Python<'_>,
        query: &Bound<'_, PyAny>,
        method: &str,
        k: usize,
        filter: Option<&Bound<'_, PyAny>>,
        params: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let queries = queries(query)?;
        let filter = filter.filter(|f| !f.is_none()).map(|f| convert::to_json(f, "filter")).transpose()?;
        let mut settings = Vec::new();
        if let Some(params) = params {
            for (key, value) in params.iter() {
                let key: String = key.extract()?;
                let value = convert::to_json(&value, &key)?;
                settings.push((key, value));
            }
        }
        let engine = self.engine();
        let method = method.to_string();
        let texts = match &queries {
            Queries::One(q) => vec![q.clone()],
            Queries::Many(qs) => qs.clone(),
        };
        let responses = py
            .detach(|| -> hoprag::Result<Vec<RetrieveResponse>> {
                let settings: Vec<(&str, Value)> = settings.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
                let retriever = engine.retriever_with(&method, &settings)?;
                let selection = filter.as_ref().map(|f| engine.select(f)).transpose()?;
                // A single query is embedded by the method, as `hoprag query` does; a batch
                // is embedded in batches first, then retrieved across rayon's threads.
                let retrieved: Vec<Retrieval> = if texts.len() == 1 {
                    let query = Query { filter: selection.clone(), ..Query::new(texts[0].clone()) };
                    vec![retriever.retrieve(&query, k)?]
                } else {
                    let embedded = engine.embed_queries(&texts, &Silent)?;
                    let embedded: Vec<Query> =
                        embedded.into_iter().map(|q| Query { filter: selection.clone(), ..q }).collect();
                    embedded.par_iter().map(|q| retriever.retrieve(q, k)).collect::<hoprag::Result<_>>()?
                };
                Ok(texts
                    .iter()
                    .zip(retrieved)
                    .map(|(t, r)| RetrieveResponse::new(&engine, t.clone(), method.clone(), k, r))
                    .collect())
            })
            .map_err(to_py)?;
        let mut lists = Vec::with_capacity(responses.len());
        for r in responses {
            let trace = serde_json::to_value(&r.trace).unwrap_or(Value::Null);
            lists.push(results(py, &r.method, r.passages, &trace)?);
        }
        Ok(match queries {
            Queries::One(_) => {
                lists.pop().map(|l| l.into_any()).unwrap_or_else(|| PyList::empty(py).into_any().unbind())
            }
            Queries::Many(_) => PyList::new(py, lists)?.into_any().unbind(),
        })
    }

    /// Embeds texts with the index's embedder: a NumPy float32 array of shape
    /// (len(texts), dim), rows L2-normalised. `kind` is "passage" or "query" (some models
    /// embed them differently).
    #[pyo3(signature = (texts, kind = "passage"))]
    fn embed<'py>(&self, py: Python<'py>, texts: &Bound<'py, PyAny>, kind: &str) -> PyResult<Bound<'py, PyAny>> {
        let kind = match kind {
            "passage" => TextKind::Passage,
            "query" => TextKind::Query,
            other => {
                return Err(crate::error::ConfigError::new_err(format!(
                    "kind={other:?}: expected \"passage\" or \"query\""
                )))
            }
        };
        let texts = match queries(texts) {
            Ok(Queries::One(t)) => vec![t],
            Ok(Queries::Many(ts)) => ts,
            Err(_) => {
                return Err(PyTypeError::new_err(format!("texts: expected a list of str, found {}", type_name(texts))))
            }
        };
        let engine = self.engine();
        let dim = engine.embedder.dim();
        let flat = py
            .detach(|| -> hoprag::Result<Vec<f32>> {
                let vectors = hoprag::embed::embed_all(engine.embedder.as_ref(), &texts, kind, 64, &|_| {})?;
                Ok(vectors.into_iter().flatten().collect())
            })
            .map_err(to_py)?;
        // NumPy reads the float32 bytes (one copy) through its Python API: the `numpy`
        // crate's ndarray dependency turns on num-traits' `std` feature, which would change
        // the feature set, and so the build, of gemm, half and tantivy for the whole
        // workspace.
        let rows = flat.len() / dim.max(1);
        let bytes: Vec<u8> = flat.iter().flat_map(|x| x.to_le_bytes()).collect();
        let array = py.import("numpy")?.call_method1("frombuffer", (PyBytes::new(py, &bytes), "<f4"))?;
        array.call_method1("reshape", ((rows, dim),))?.call_method1("astype", ("float32",))
    }

    /// The index folder.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The embedder the index was built with (its id, e.g. `minilm`).
    #[getter]
    fn embedder(&self) -> String {
        self.engine().index.manifest.embedder.id.clone()
    }

    /// Dimensions of the index's vectors.
    #[getter]
    fn dim(&self) -> usize {
        self.engine().embedder.dim()
    }

    /// The index manifest (embedder, counts, graph, sources) as a dict.
    #[getter]
    fn manifest<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::to_py(py, &self.engine().index.manifest)
    }

    /// How the passages of the last `build` or `add` were read: entries, and every
    /// skipped, duplicate or renamed one with its location; None after `open`.
    #[getter]
    fn ingest_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::to_py(py, &*self.ingest.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The entity graph `build` made: `source` (heuristic or the OpenIE file), `extraction`
    /// (malformed triples and entities, OpenIE documents that matched no passage) and
    /// `stats`; None after `open` or a build without a graph.
    #[getter]
    fn graph_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::to_py(py, &self.graph_report)
    }

    fn __len__(&self) -> usize {
        self.engine().index.len()
    }

    fn __repr__(&self) -> String {
        let engine = self.engine();
        format!(
            "Index({:?}, passages={}, embedder={:?}, graph={})",
            self.path.display().to_string(),
            engine.index.len(),
            engine.index.manifest.embedder.id,
            engine.index.manifest.graph.is_some()
        )
    }
}

impl PyIndex {
    /// The engine, for `evaluate`.
    pub fn current_engine(&self) -> Arc<Engine> {
        self.engine()
    }
}
