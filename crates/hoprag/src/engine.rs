//! The engine: an opened index, its embedder, and the methods that run on them.

use std::sync::Arc;

use crate::config::Config;
use crate::embed::{load_embedder, Embedder, EmbedderSpec, TextKind};
use crate::error::{Error, Result};
use crate::graph::linking::NO_LLM_FOR_NER;
use crate::graph::{EntityGraph, GraphContext};
use crate::index::{Index, VectorIndex};
use crate::lazy::Lazy;
use crate::llm::{Llm, LlmSource};
use crate::retrieve::registry::{self, MethodSections, Resources};
use crate::retrieve::{GraphKind, Query, Retriever};
use crate::store::Store;

pub use crate::retrieve::registry::{parse_method_spec, DEFAULT_METHOD};

/// What engines over several stores share (a server's namespaces): the embedder, the
/// configuration and the LLM ([`Engine::shared`]); it holds no index, so keeping it keeps
/// no namespace in memory.
#[derive(Clone)]
pub struct Shared {
    embedder: Arc<dyn Embedder>,
    config: Config,
    llm: Option<Arc<dyn Llm>>,
    llm_source: LlmSource,
}

impl Shared {
    /// An engine over the live generation of `store` with these parts, and the embedder
    /// when that index was embedded with it (else the one its manifest names, loaded now).
    pub fn open(&self, store: Arc<dyn Store>) -> Result<Engine> {
        let index = Arc::new(store.load()?);
        let embedder = if index.manifest.embedder.id == self.embedder.id() {
            self.embedder.clone()
        } else {
            load_embedder(&EmbedderSpec::from_id(&index.manifest.embedder.id)?, &self.config.embedder)?
        };
        index.check_embedder(embedder.as_ref())?;
        Ok(Engine {
            store,
            index,
            embedder,
            config: self.config.clone(),
            llm: self.llm.clone(),
            llm_source: self.llm_source.clone(),
            graph: Lazy::new(),
            graph_embedder: Lazy::new(),
        })
    }
}

pub struct Engine {
    /// Where the index is kept: the graph is loaded from it on first use, and newer
    /// generations with [`Engine::reload`].
    pub store: Arc<dyn Store>,
    /// The generation being served.
    pub index: Arc<Index>,
    pub embedder: Arc<dyn Embedder>,
    pub config: Config,
    /// The chat model of the LLM stages (see [`Engine::llm`]).
    llm: Option<Arc<dyn Llm>>,
    llm_source: LlmSource,
    /// The index's entity graph with its query-time structures, loaded on first use.
    graph: Lazy<std::result::Result<Option<Arc<GraphContext>>, String>>,
    /// The graph's own embedder (`--graph-embedder`), loaded on first use and kept by
    /// the engines of later generations with the same one: an edit asks for it whether
    /// or not the graph is loaded.
    graph_embedder: Lazy<Option<Arc<dyn Embedder>>>,
}

/// What a method that asks an LLM says when none is configured.
const NO_LLM: &str = "needs an LLM, and none is configured: set HOPRAG_LLM_BASE_URL and HOPRAG_LLM_MODEL (or \
     llm.base_url and llm.model in the configuration)";

impl Engine {
    /// Opens the live generation of the index in `store` with the embedder its manifest
    /// names.
    pub fn open(store: Arc<dyn Store>, config: Config) -> Result<Engine> {
        let index = store.load()?;
        let spec = EmbedderSpec::from_id(&index.manifest.embedder.id)?;
        let embedder = load_embedder(&spec, &config.embedder)?;
        Self::with_index(store, Arc::new(index), embedder, config)
    }

    /// Opens the live generation of the index in `store`, queried through `embedder`.
    /// Also sets up the LLM of `config.llm` (see [`llm::from_config`]): its endpoint if
    /// it names one, else the local GGUF model. No server is contacted and no model is
    /// loaded until a method asks the LLM something.
    pub fn new(store: Arc<dyn Store>, embedder: Arc<dyn Embedder>, config: Config) -> Result<Engine> {
        let index = Arc::new(store.load()?);
        Self::with_index(store, index, embedder, config)
    }

    /// As [`Engine::new`], over a generation of `store` loaded already.
    pub fn with_index(
        store: Arc<dyn Store>,
        index: Arc<Index>,
        embedder: Arc<dyn Embedder>,
        config: Config,
    ) -> Result<Engine> {
        index.check_embedder(embedder.as_ref())?;
        config.validate()?;
        let (llm, llm_source) = crate::retrieve::gear::llm_from_config(&config.llm)?;
        Ok(Engine {
            store,
            index,
            embedder,
            config,
            llm: Some(llm),
            llm_source,
            graph: Lazy::new(),
            graph_embedder: Lazy::new(),
        })
    }

    /// The chat model of the LLM stages: the one [`Engine::with_llm`] gave, else the
    /// one `config.llm` selects, behind the response cache.
    pub fn llm(&self) -> Option<&Arc<dyn Llm>> {
        self.llm.as_ref()
    }

    /// Where the LLM's answers come from, for notes like `LLM: local smollm2 (PATH)`.
    pub fn llm_source(&self) -> &LlmSource {
        &self.llm_source
    }

    /// Whether method `name`, as configured, asks the LLM anything (false for names
    /// that are no method).
    pub fn uses_llm(&self, name: &str) -> bool {
        registry::find(name).is_some_and(|m| m.uses_llm(&self.config.methods, self.graph_kind()))
    }

    /// What kind of entity graph the index has (none, heuristic triples, an LLM's).
    pub fn graph_kind(&self) -> GraphKind {
        GraphKind::of_source(self.index.manifest.graph.as_ref().map(|g| g.source.as_str()))
    }

    /// Queries an LLM method should run at once: the endpoint client's limit, or 1 for
    /// the local model, which generates one answer at a time (more would only queue).
    fn llm_concurrency(&self) -> usize {
        match self.llm_source {
            LlmSource::Local(_) => 1,
            _ => self.config.llm.max_concurrency.max(1),
        }
    }

    /// The same engine with `llm` as its chat model.
    pub fn with_llm(mut self, llm: Arc<dyn Llm>) -> Engine {
        self.llm_source = LlmSource::Given(llm.id().to_string());
        self.set_llm(llm)
    }

    /// The same engine with its chat model wrapped by `wrap` (a meter, say): the model
    /// answering, and so [`Engine::llm_source`] and its checks, stay the same.
    pub fn wrap_llm(self, wrap: impl FnOnce(Arc<dyn Llm>) -> Arc<dyn Llm>) -> Engine {
        match self.llm.clone() {
            Some(llm) => {
                let wrapped = wrap(llm);
                self.set_llm(wrapped)
            }
            None => self,
        }
    }

    fn set_llm(mut self, llm: Arc<dyn Llm>) -> Engine {
        self.llm = Some(llm);
        // A graph loaded already has the previous model in its linker: rebuild its
        // query-time structures (from memory) around the new one.
        if let Some(Ok(Some(loaded))) = self.graph.take() {
            let mut context = GraphContext::new(loaded.linker.graph.clone());
            context.linker.set_llm(self.llm.clone());
            self.graph = Lazy::with_value(Ok(Some(Arc::new(context))));
        }
        self
    }

    /// The same index, embedder, LLM and loaded graph under another configuration (for
    /// tuning: nothing is reloaded, and `config.llm` is not read again).
    pub fn with_config(&self, config: Config) -> Engine {
        let graph = self.graph.get().map_or_else(Lazy::new, |g| Lazy::with_value(g.clone()));
        Engine {
            store: self.store.clone(),
            index: self.index.clone(),
            embedder: self.embedder.clone(),
            config,
            llm: self.llm.clone(),
            llm_source: self.llm_source.clone(),
            graph,
            graph_embedder: self.graph_embedder_kept(),
        }
    }

    /// What an engine over another store (a namespace beside this one's) shares with
    /// this one: embedder, configuration and LLM, and nothing of the index.
    pub fn shared(&self) -> Shared {
        Shared {
            embedder: self.embedder.clone(),
            config: self.config.clone(),
            llm: self.llm.clone(),
            llm_source: self.llm_source.clone(),
        }
    }

    /// The same embedder, configuration and LLM over the store's live generation (a
    /// newer one after passages were added, here or by another process). The graph is
    /// loaded again on first use, from the new generation.
    pub fn reload(&self) -> Result<Engine> {
        self.over(Arc::new(self.store.load()?))
    }

    /// The same embedder, configuration and LLM over `index`, a generation of this
    /// engine's store; its graph loaded on first use.
    fn over(&self, index: Arc<Index>) -> Result<Engine> {
        index.check_embedder(self.embedder.as_ref())?;
        let same = index.manifest.graph_embedder() == self.index.manifest.graph_embedder();
        let graph_embedder = if same { self.graph_embedder_kept() } else { Lazy::new() };
        Ok(Engine {
            store: self.store.clone(),
            index,
            embedder: self.embedder.clone(),
            config: self.config.clone(),
            llm: self.llm.clone(),
            llm_source: self.llm_source.clone(),
            graph: Lazy::new(),
            graph_embedder,
        })
    }

    /// The graph's own embedder as this engine holds it, for an engine of the same index.
    fn graph_embedder_kept(&self) -> Lazy<Option<Arc<dyn Embedder>>> {
        self.graph_embedder.get().map_or_else(Lazy::new, |e| Lazy::with_value(e.clone()))
    }

    /// [`Engine::reload`] after this engine's own edit: where the live generation is the
    /// one the edit published, it is the edit's, in memory, where the edit assembled it
    /// there ([`crate::store::edit::Published::index`]), and its graph is the edit's, not
    /// read back from the store; the query structures over it are built from this
    /// engine's where they depend on a text alone ([`GraphContext::after`]).
    pub fn reload_after(&self, edit: &crate::store::edit::EditReport) -> Result<Engine> {
        let next = match edit.published.as_ref().and_then(|p| p.index.clone()) {
            Some(index) => self.over(index)?,
            None => self.reload()?,
        };
        let Some(published) = &edit.published else { return Ok(next) };
        let (Some(graph), true) = (&published.graph, published.generation == next.index.generation()) else {
            return Ok(next);
        };
        let previous = self.loaded_graph();
        let context = match published.context.as_ref().filter(|c| Arc::ptr_eq(&c.linker.graph, graph)) {
            Some(context) => context.clone(),
            None => {
                let context =
                    edited_context(graph.clone(), previous.as_deref(), next.graph_embedder()?, next.llm.clone());
                served_after(Arc::new(context), previous.clone(), &next.embedder)
            }
        };
        // What the walk is deferred from while it is solved ([`Engine::prepare_walk_in_background`]).
        if let Some(previous) = previous.filter(|p| !Arc::ptr_eq(p, &context)) {
            context.edited_from(previous, self.index.clone());
        }
        Ok(Engine { graph: Lazy::with_value(Ok(Some(context))), ..next })
    }

    /// The passages a metadata filter (JSON, [`crate::filter`]) admits, for
    /// [`Query::filter`]. A malformed filter, or one on a field no passage has, is an
    /// [`Error::Filter`] naming the place.
    pub fn select(&self, filter: &serde_json::Value) -> Result<Arc<crate::filter::Selection>> {
        let filter = crate::filter::Filter::parse(filter).map_err(|e| Error::Filter(e.to_string()))?;
        let columns = self.index.meta_columns();
        if let Some(field) = filter.fields().find(|f| !columns.has_field(f)) {
            return Err(Error::Filter(format!(
                "filter: no passage of the index has the field {field:?} in its meta (a misspelt field would \
                 otherwise match nothing, or everything under $ne)"
            )));
        }
        Ok(Arc::new(filter.select(&columns)))
    }

    /// The vector index methods search: the index's own, or an exact scan when the
    /// configuration asks for one.
    pub fn vectors(&self) -> Arc<dyn VectorIndex> {
        if self.config.methods.dense.exact {
            Arc::new(self.index.exact_index())
        } else {
            self.index.vector_index()
        }
    }

    /// The retrieval method `spec` names: a method name, optionally with parameters of
    /// its own section, `name[param=value,...]` (see [`parse_method_spec`]).
    /// Its ranking is total and takes a query's metadata filter
    /// ([`crate::retrieve::ordered`]).
    pub fn retriever(&self, spec: &str) -> Result<Box<dyn Retriever>> {
        Ok(self.ordered(self.bare_retriever(spec)?))
    }

    /// [`Engine::retriever`] as the method itself ranks, for methods built of others.
    fn bare_retriever(&self, spec: &str) -> Result<Box<dyn Retriever>> {
        let (name, settings) = parse_method_spec(spec)?;
        self.bare_retriever_with(name, &settings)
    }

    fn ordered(&self, method: Box<dyn Retriever>) -> Box<dyn Retriever> {
        Box::new(crate::retrieve::ordered::Ordered::new(method, self.index.len()))
    }

    /// The method `name` with `settings` for this retriever only: each a parameter of the
    /// method's own section (`alpha`) or a dotted path (`phasegraph.fusion.alpha`), as in
    /// a spec's brackets (the Python API's keyword arguments).
    pub fn retriever_with(&self, name: &str, settings: &[(&str, serde_json::Value)]) -> Result<Box<dyn Retriever>> {
        Ok(self.ordered(self.bare_retriever_with(name, settings)?))
    }

    fn bare_retriever_with(&self, name: &str, settings: &[(&str, serde_json::Value)]) -> Result<Box<dyn Retriever>> {
        if settings.is_empty() {
            return self.method(name);
        }
        let config = serde_json::to_value(&self.config).map_err(|e| Error::Other(e.to_string()))?;
        let mut paths = Vec::new();
        for (key, value) in settings {
            paths.push((crate::config::resolve_param(&config, name, key)?, value.clone()));
        }
        let config = crate::config::with_settings(&self.config, &paths)?;
        self.with_config(config).method(name)
    }

    fn method(&self, name: &str) -> Result<Box<dyn Retriever>> {
        let spec = registry::lookup(name)?;
        // Checked here, so that a run fails before its first question rather than on it
        // (a local model that is not installed is found without loading it).
        if spec.uses_llm(&self.config.methods, self.graph_kind()) {
            let name = spec.name;
            if self.llm.is_none() {
                return Err(Error::Config(format!("method {name}: {}", NO_LLM_FOR_NER)));
            }
            self.llm_source.check().map_err(|e| {
                Error::Config(format!(
                    "method {name} needs the LLM: {e} (or use an endpoint: set HOPRAG_LLM_BASE_URL and \
                     HOPRAG_LLM_MODEL)"
                ))
            })?;
        }
        (spec.build)(&self.config.methods, self)
    }

    /// Builds now what the graph methods otherwise build in their first query (the split
    /// walk's passage response, GEAR's triple index), so that timing a batch of queries
    /// (a benchmark) starts in the steady state, and a server that switches to a new
    /// generation does not make that generation's first queries pay for it. Nothing
    /// without a graph.
    pub fn prepare(&self) -> Result<()> {
        if let Some(context) = self.loaded_graph() {
            context.forget_edited_from();
        }
        let Some(graph) = self.prepare_walk()? else { return Ok(()) };
        graph.triple_index(graph.embedder.as_deref().unwrap_or(self.embedder.as_ref()))?;
        Ok(())
    }

    /// [`Engine::prepare`] for the walk alone (ppr, auto, phasegraph), not GEAR's triple
    /// index (gigabytes at a million passages): the graph loaded and the passage seeds'
    /// walk ready. The loaded graph, if the index has one.
    pub fn prepare_walk(&self) -> Result<Option<Arc<GraphContext>>> {
        if self.graph_kind() == GraphKind::None {
            return Ok(None);
        }
        let graph = self.graph()?;
        let ppr = &self.config.methods.ppr.ppr;
        if ppr.split {
            graph.passage_response(self.index.vectors(), ppr.damping);
        }
        Ok(Some(graph))
    }

    /// As [`Engine::prepare`], for a generation an edit just published without its walk
    /// ([`crate::store::edit::WalkUpdate::Defer`]), so that it is served at once: the
    /// graph is loaded now, GEAR's triple index is left to the edit, which builds it
    /// behind the generation ([`GraphContext::index_triples_after`]), or to the first GEAR
    /// query; the passage seeds' walk is solved on
    /// a thread of its own, graph queries meanwhile running the full walk (the same
    /// rankings, slower), and then stored with the generation (see
    /// [`crate::store::edit::store_walk`]), so that the next process to open it reads it.
    pub fn prepare_walk_in_background(&self) -> Result<()> {
        if self.graph_kind() == GraphKind::None {
            return Ok(());
        }
        let graph = self.graph()?;
        // GEAR's triple index is not built before the walk is solved: an edit's is built
        // behind the served generation where the one before had one finished, and
        // otherwise by the first GEAR query, which waits for it rather than every query
        // for the edit (building it here held an edit's visibility for 9 s at 100,000
        // passages). A graph whose walk is solved already is prepared as at opening.
        let ppr = &self.config.methods.ppr.ppr;
        if !ppr.split || graph.graph().walk.as_ref().is_some_and(|w| w.damping() == ppr.damping) {
            graph.forget_edited_from();
            return self.prepare();
        }
        graph.walk_in_background.store(true, std::sync::atomic::Ordering::Release);
        graph.deferring.store(true, std::sync::atomic::Ordering::Release);
        let (index, store, damping) = (self.index.clone(), self.store.clone(), ppr.damping);
        let solve = move || {
            // First the walk deferred from the generation before (at the queries' priority:
            // they run the full walk until it is ready), then the solve, behind it.
            let t = std::time::Instant::now();
            match graph.defer_walk(&index, damping, &crate::store::edit::kept_passages) {
                Ok(stats) => log::debug!(
                    "deferred walk served after {:.0} ms: {} of {} entities' residuals pending ({} changed)",
                    t.elapsed().as_secs_f64() * 1e3,
                    stats.changed,
                    stats.entities,
                    stats.touched
                ),
                Err(why) => log::debug!("no deferred walk ({why}): the full walk until the walk is solved"),
            }
            graph.deferring.store(false, std::sync::atomic::Ordering::Release);
            let solved = crate::threads::in_background(|| graph.solve_walk(index.vectors(), damping));
            let Some(solved) = solved else { return };
            // Stored only at the damping a fresh build solves it at: the generation is
            // then the one a fresh build of its passages makes.
            if damping != crate::graph::ppr::PprParams::default().damping {
                return;
            }
            match crate::store::edit::store_walk(store.as_ref(), &index, graph.graph(), &solved) {
                Ok(true) => log::info!("{}: the edited graph's walk is stored", store.location()),
                Ok(false) => log::info!("{}: a newer generation was published; walk not stored", store.location()),
                Err(e) => log::warn!("{}: storing the edited graph's walk: {e}", store.location()),
            }
        };
        std::thread::Builder::new()
            .name("hoprag-walk".into())
            .spawn(solve)
            .map_err(|e| Error::Config(format!("the OS refused a thread for the graph's walk: {e}")))?;
        Ok(())
    }

    /// The graph's query structures, where they are loaded.
    fn loaded_graph(&self) -> Option<Arc<GraphContext>> {
        match self.graph.get() {
            Some(Ok(Some(context))) => Some(context.clone()),
            _ => None,
        }
    }

    /// Marks this engine as replaced by a newer generation's: a walk it solves in the
    /// background stops, since nobody would read or store it.
    pub fn supersede(&self) {
        if let Some(context) = self.loaded_graph() {
            context.supersede();
        }
    }

    /// The index's graph, or an error saying how to build one.
    pub fn graph(&self) -> Result<Arc<GraphContext>> {
        // A graph that is there but cannot be read is damaged, not missing: the error
        // names the file and says how to rebuild it.
        let loaded = self.graph.get_or_compute(|| {
            let own = self.graph_embedder().map_err(|e| e.to_string())?;
            // A delta generation derives its graph with the graph's embedder.
            let embedder = own.as_deref().unwrap_or(self.embedder.as_ref());
            match self.store.load_graph(&self.index, Some(embedder)) {
                Ok(Some(g)) => {
                    let mut context = GraphContext::new(Arc::new(g));
                    context.linker.set_llm(self.llm.clone());
                    context.embedder = own;
                    Ok(Some(Arc::new(context)))
                }
                Ok(None) => Ok(None),
                Err(e) => Err(format!(
                "the entity graph is damaged ({e}); rebuild it with `hoprag graph --index {} --triples OPENIE.json` \
                 or `--extract heuristic|llm`",
                self.index.location()
            )),
            }
        });
        match loaded {
            Ok(Some(g)) => Ok(g.clone()),
            Ok(None) => Err(Error::index(
                self.index.location(),
                "this method needs an entity graph; add one with `hoprag graph --index DIR --triples OPENIE.json` \
                 or `--extract heuristic|llm`",
            )),
            Err(message) => Err(Error::index(self.index.location(), message.clone())),
        }
    }

    /// Applies an edit to the index this engine serves (a new generation in its store;
    /// this engine keeps serving the old one: [`Engine::reload`] serves the new one).
    /// The graph's embedder is the one already loaded for queries, or the index's.
    pub fn edit(
        &self,
        request: &crate::store::edit::Request,
        options: &crate::store::edit::EditOptions,
        progress: &dyn crate::progress::Progress,
    ) -> Result<crate::store::edit::EditReport> {
        // The graph is not loaded for its embedder: an edit of a generation whose graph
        // no query has loaded writes a delta, its graph derived where it is read.
        let graph = match self.loaded_graph() {
            Some(context) => context.embedder.clone(),
            None => self.graph_embedder()?,
        };
        let embedders = crate::store::edit::Embedders {
            passages: self.embedder.clone(),
            graph: graph.unwrap_or_else(|| self.embedder.clone()),
        };
        // The served generation and its loaded graph are the edit's base: nothing is read
        // from the store again unless another writer published meanwhile.
        let previous = self.loaded_graph();
        let base = crate::store::edit::Base {
            index: self.index.clone(),
            graph: previous.as_ref().map(|c| c.linker.graph.clone()),
        };
        // The new graph's query structures are built on a thread of their own while the
        // generation is written (no lock of ours is held while waiting for them), and
        // handed to `reload_after` with the graph.
        type Building = std::thread::JoinHandle<GraphContext>;
        let building: std::sync::Mutex<Option<(Arc<EntityGraph>, Building)>> = Default::default();
        let on_graph = |graph: &Arc<EntityGraph>| {
            if previous.is_none() {
                return;
            }
            let (graph, previous, llm) = (graph.clone(), previous.clone(), self.llm.clone());
            let build = {
                let graph = graph.clone();
                move || {
                    let own = previous.as_ref().and_then(|p| p.embedder.clone());
                    edited_context(graph, previous.as_deref(), own, llm)
                }
            };
            match std::thread::Builder::new().name("hoprag-edit-context".into()).spawn(build) {
                Ok(handle) => *building.lock().unwrap_or_else(|e| e.into_inner()) = Some((graph, handle)),
                Err(e) => log::warn!("no thread for the edited graph's structures ({e}); built when served"),
            }
        };
        let mut report = crate::store::edit::edit_from(
            self.store.as_ref(),
            Some(base),
            request,
            &embedders,
            options,
            &on_graph,
            progress,
        )?;
        let built = building.into_inner().unwrap_or_else(|e| e.into_inner());
        if let (Some(published), Some((graph, handle))) = (report.published.as_mut(), built) {
            match handle.join() {
                Ok(context) if published.graph.as_ref().is_some_and(|g| Arc::ptr_eq(g, &graph)) => {
                    published.context = Some(served_after(Arc::new(context), previous, &self.embedder));
                }
                Ok(_) => {}
                Err(_) => log::warn!("building the edited graph's structures panicked; built when served"),
            }
        }
        Ok(report)
    }

    /// The embedder of the graph's vectors where the graph has one of its own
    /// (`--graph-embedder`), loaded once; `None` without one.
    fn graph_embedder(&self) -> Result<Option<Arc<dyn Embedder>>> {
        self.graph_embedder.get_or_try_compute(|| self.load_graph_embedder()).cloned()
    }

    fn load_graph_embedder(&self) -> Result<Option<Arc<dyn Embedder>>> {
        let own = self.index.manifest.graph_embedder();
        if *own == self.index.manifest.embedder {
            return Ok(None);
        }
        let embedder = load_embedder(&EmbedderSpec::from_id(&own.id)?, &self.config.embedder)?;
        if embedder.dim() != own.dim {
            return Err(Error::index(
                self.index.location(),
                format!(
                    "the graph was embedded by {} in {} dimensions, the model gives {}",
                    own.id,
                    own.dim,
                    embedder.dim()
                ),
            ));
        }
        Ok(Some(embedder))
    }

    /// Queries with their embeddings computed in batches: in the passages' space and,
    /// where the graph has an embedder of its own, in the graph's.
    pub fn embed_queries(&self, texts: &[String], progress: &dyn crate::progress::Progress) -> Result<Vec<Query>> {
        // The graph is loaded (it holds the graph embedder) only when it has its own.
        let manifest = &self.index.manifest;
        let graph_embedder =
            if *manifest.graph_embedder() == manifest.embedder { None } else { self.graph()?.embedder.clone() };
        let embed = |embedder: &dyn Embedder| -> Result<Vec<Vec<f32>>> {
            progress.start(&format!("embedding questions ({})", embedder.id()), texts.len() as u64);
            let vectors =
                crate::embed::embed_all(embedder, texts, TextKind::Query, 64, &|n| progress.advance(n as u64));
            progress.finish();
            vectors
        };
        let vectors = embed(self.embedder.as_ref())?;
        let graph_vectors = match &graph_embedder {
            Some(g) => embed(g.as_ref())?.into_iter().map(|v| Some(Arc::new(v))).collect(),
            None => vec![None; texts.len()],
        };
        Ok(texts
            .iter()
            .zip(vectors)
            .zip(graph_vectors)
            .map(|((t, v), g)| Query { graph_embedding: g, ..Query::with_embedding(t.clone(), v) })
            .collect())
    }
}

/// What the methods are built from (the registry's [`Resources`]).
impl Resources for Engine {
    fn index(&self) -> Arc<Index> {
        self.index.clone()
    }

    fn vectors(&self) -> Arc<dyn VectorIndex> {
        Engine::vectors(self)
    }

    fn embedder(&self) -> Arc<dyn Embedder> {
        self.embedder.clone()
    }

    fn graph(&self) -> Result<Arc<GraphContext>> {
        Engine::graph(self)
    }

    fn graph_kind(&self) -> GraphKind {
        Engine::graph_kind(self)
    }

    fn llm(&self, method: &str) -> Result<Arc<dyn Llm>> {
        self.llm.clone().ok_or_else(|| Error::Config(format!("method {method} {NO_LLM}")))
    }

    fn llm_concurrency(&self) -> usize {
        Engine::llm_concurrency(self)
    }

    fn folder(&self) -> Option<&std::path::Path> {
        self.store.folder()
    }

    fn method(&self, spec: &str) -> Result<Box<dyn Retriever>> {
        self.bare_retriever(spec)
    }

    fn method_with(&self, spec: &str, sections: &MethodSections) -> Result<Box<dyn Retriever>> {
        let config = Config { methods: sections.clone(), ..self.config.clone() };
        self.with_config(config).bare_retriever(spec)
    }
}

/// The query structures of an edited graph as [`Engine::graph`] sets them up, built from
/// `previous`'s ([`GraphContext::after`]): the engine's LLM, and the graph's own embedder
/// (`None`: the index's).
fn edited_context(
    graph: Arc<EntityGraph>,
    previous: Option<&GraphContext>,
    own_embedder: Option<Arc<dyn Embedder>>,
    llm: Option<Arc<dyn Llm>>,
) -> GraphContext {
    let mut context = GraphContext::after(graph, previous);
    context.linker.set_llm(llm);
    context.embedder = own_embedder;
    context
}

/// `context`, served from now on, with GEAR's triple index built behind it from
/// `previous`'s ([`GraphContext::index_triples_after`]) by the embedder that counts its
/// tokens: the graph's own, else the index's.
fn served_after(
    context: Arc<GraphContext>,
    previous: Option<Arc<GraphContext>>,
    index_embedder: &Arc<dyn Embedder>,
) -> Arc<GraphContext> {
    if let Some(previous) = previous {
        let embedder = context.embedder.clone().unwrap_or_else(|| index_embedder.clone());
        context.index_triples_after(previous, embedder);
    }
    context
}
