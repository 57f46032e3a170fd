//! The engine: an opened index, its embedder, and the methods that run on them.

use std::sync::Arc;

use crate::config::Config;
use crate::embed::{load_embedder, Embedder, EmbedderSpec, TextKind};
use crate::error::{Error, Result};
use crate::graph::linking::{NerMode, NO_LLM_FOR_NER};
use crate::graph::GraphContext;
use crate::index::{Index, VectorIndex};
use crate::lazy::Lazy;
use crate::llm::{self, Llm, LlmSource};
use crate::regime::RegimeModel;
use crate::retrieve::gear::Expansion;
use crate::retrieve::{
    Auto, Bm25, BridgeRag, Condition, Dense, Gear, GraphKind, Hybrid, NaiveGe, PhaseGraph, Ppr, Query, RegimeRouter,
    Retriever, SyncGe, WithFallback,
};
use crate::store::Store;

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
}

/// Methods and a one-line description each, for `--help`, `hoprag methods` and errors.
pub const METHODS: &[(&str, &str)] = &[
    (
        "auto",
        "the best LLM-free pipeline measured for the index at hand (section auto; docs/seed-methods.md §4): ppr \
         (HippoRAG 2 facts plus the entities the question names) behind a dense guard (up to 2 dense passages \
         whose score is within half of the dense top 50's score range of the best go first; with EmbeddingGemma \
         up to 5 within a quarter, auto.dense_guard_by_embedder) on a graph from heuristic or LLM triples; dense \
         without a graph. Evidence, R@5 on the test halves (MD5 split; guards chosen on the tune halves of all \
         six shared sets): musique-dev dense 54.4, auto 59.6; 2wiki-hipporag dense 61.4, auto 76.1; with \
         EmbeddingGemma musique-dev dense 61.2, auto 69.0",
    ),
    (
        "auto_llm",
        "the best pipeline measured with an LLM (section auto_llm): with the local SmolLM2 none beat auto's \
         choice, which it defaults to; re-choose with `tune --method auto_llm` on your endpoint",
    ),
    ("bm25", "BM25 over title + text (tantivy)"),
    ("dense", "nearest passages to the query embedding"),
    ("hybrid", "reciprocal rank fusion (k = 60) of bm25 and dense"),
    (
        "ppr",
        "HippoRAG 2: PPR seeded by the query's top facts (phrases) and every passage's dense score (weight 0.05), \
         damping 0.5; dense when no fact matches (needs a graph)",
    ),
    ("phasegraph", "PhaseGraph: calibrated (PIT + Boltzmann) fusion of dense and capped PPR lists (needs a graph)"),
    ("regime_router", "RegimeRouter: per query, dense alone or dense + the bridge's relation sentence (no LLM)"),
    (
        "bridge_rag",
        "BridgeRAG: bridge passage, SVO and dual-entity expansion into one pool, bridge-conditioned LLM judge, \
         PIT fusion (needs an LLM; condition from bridge_rag.condition, default c)",
    ),
    ("bridge_rag_a", "BridgeRAG ablation A: the same pool ranked by SVO similarity alone (needs an LLM)"),
    ("bridge_rag_b", "BridgeRAG ablation B: the same pool ranked by the 2-way judge s(q, c) (needs an LLM)"),
    (
        "naive_ge",
        "GEAR NaiveGE: diverse triple beam search from the base passages' triples, RRF with them (needs a graph)",
    ),
    ("sync_ge", "GEAR SyncGE: an LLM reads the base passages into triples that seed the beam search (graph + LLM)"),
    ("gear", "GEAR agent: SyncGE per step, gist memory, reason/rewrite loop, passageLink and RRF (graph + LLM)"),
];

/// Splits a method spec `name[param=value,...]` into the method and its settings:
/// variants of one method side by side in one evaluation, e.g.
/// `regime_router[router=oracle]` next to `regime_router`. Values are JSON, or text.
pub fn parse_method_spec(spec: &str) -> Result<(&str, Vec<(&str, serde_json::Value)>)> {
    let Some((name, rest)) = spec.split_once('[') else {
        return Ok((spec.trim(), Vec::new()));
    };
    let inner = rest
        .strip_suffix(']')
        .ok_or_else(|| Error::Config(format!("method {spec:?}: expected name[param=value,...]")))?;
    let mut settings = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| Error::Config(format!("method {spec:?}: {part:?} is not param=value")))?;
        let value =
            serde_json::from_str(value.trim()).unwrap_or_else(|_| serde_json::Value::String(value.trim().to_string()));
        settings.push((key.trim(), value));
    }
    Ok((name.trim(), settings))
}

/// The configuration section that holds a method's parameters: its own name, except
/// for methods that are variants of one algorithm.
pub use crate::config::config_section;

/// What a method that asks an LLM says when none is configured.
const NO_LLM: &str = "needs an LLM, and none is configured: set HOPRAG_LLM_BASE_URL and HOPRAG_LLM_MODEL (or \
     llm.base_url and llm.model in the configuration)";

/// The method `query` and `serve` use when none is named: the best LLM-free pipeline
/// measured (README, "Choosing auto").
pub const DEFAULT_METHOD: &str = "auto";

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
        let (llm, llm_source) = llm::from_config(&config.llm)?;
        Ok(Engine { store, index, embedder, config, llm: Some(llm), llm_source, graph: Lazy::new() })
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

    /// Whether method `name`, as configured, asks the LLM anything.
    pub fn uses_llm(&self, name: &str) -> bool {
        if let Some(choice) = self.auto_choice(name) {
            return parse_method_spec(choice)
                .is_ok_and(|(chosen, _)| !chosen.starts_with("auto") && self.uses_llm(chosen));
        }
        matches!(name, "sync_ge" | "gear" | "bridge_rag" | "bridge_rag_a" | "bridge_rag_b")
            || self.link_params(name).is_some_and(|l| l.links_mentions() && l.ner == NerMode::Llm)
    }

    /// The method `auto` or `auto_llm` runs on this index; None for other names.
    fn auto_choice(&self, name: &str) -> Option<&str> {
        let graph = self.graph_kind();
        match name {
            "auto" => Some(self.config.auto.choice(graph)),
            "auto_llm" | "auto-llm" => Some(self.config.auto_llm.0.choice(graph)),
            _ => None,
        }
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

    fn link_params(&self, name: &str) -> Option<&crate::graph::linking::LinkParams> {
        match name {
            "ppr" => Some(&self.config.ppr.link),
            "phasegraph" => Some(&self.config.phasegraph.graph.link),
            _ => None,
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
        }
    }

    /// The same embedder, configuration and LLM over the store's live generation (a
    /// newer one after passages were added, here or by another process). The graph is
    /// loaded again on first use, from the new generation.
    pub fn reload(&self) -> Result<Engine> {
        let index = Arc::new(self.store.load()?);
        index.check_embedder(self.embedder.as_ref())?;
        Ok(Engine {
            store: self.store.clone(),
            index,
            embedder: self.embedder.clone(),
            config: self.config.clone(),
            llm: self.llm.clone(),
            llm_source: self.llm_source.clone(),
            graph: Lazy::new(),
        })
    }

    /// The vector index methods search: the index's own, or an exact scan when the
    /// configuration asks for one.
    pub fn vectors(&self) -> Arc<dyn VectorIndex> {
        if self.config.dense.exact {
            Arc::new(self.index.exact_index())
        } else {
            self.index.vector_index()
        }
    }

    /// The retrieval method `spec` names: a method name, optionally with parameters of
    /// its own section, `name[param=value,...]` (see [`parse_method_spec`]).
    pub fn retriever(&self, spec: &str) -> Result<Box<dyn Retriever>> {
        let (name, settings) = parse_method_spec(spec)?;
        self.retriever_with(name, &settings)
    }

    /// The method `name` with `settings` for this retriever only: each a parameter of the
    /// method's own section (`alpha`) or a dotted path (`phasegraph.fusion.alpha`), as in
    /// a spec's brackets (the Python API's keyword arguments).
    pub fn retriever_with(&self, name: &str, settings: &[(&str, serde_json::Value)]) -> Result<Box<dyn Retriever>> {
        // `auto-llm` is `auto_llm`: method names take either separator.
        let name = name.replace('-', "_");
        let name = name.as_str();
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
        let (index, embedder) = (self.index.clone(), self.embedder.clone());
        // Checked here, so that a run fails before its first question rather than on it
        // (a local model that is not installed is found without loading it).
        if self.uses_llm(name) {
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
        Ok(match name {
            "bm25" => Box::new(Bm25::new(index)),
            "dense" => Box::new(Dense::new(self.vectors(), embedder)),
            "hybrid" => Box::new(Hybrid::new(index, self.vectors(), embedder, self.config.hybrid)),
            "ppr" => Box::new(Ppr::new(
                self.graph()?,
                self.index.vectors().clone(),
                self.vectors(),
                embedder,
                self.config.ppr,
            )),
            "phasegraph" => Box::new(PhaseGraph::new(
                self.graph()?,
                self.index.vectors().clone(),
                self.vectors(),
                embedder,
                self.config.phasegraph,
            )),
            "auto" | "auto_llm" => {
                let name = if name == "auto" { "auto" } else { "auto_llm" };
                let choice = self.auto_choice(name).expect("an auto method");
                if matches!(parse_method_spec(choice)?.0, "auto" | "auto_llm") {
                    return Err(Error::Config(format!(
                        "{name} cannot choose itself or another auto method ({choice})"
                    )));
                }
                // The choice runs with auto's dense guard (it only affects ppr).
                let mut config = self.config.clone();
                let params = if name == "auto" { &self.config.auto } else { &self.config.auto_llm.0 };
                config.ppr.dense_guard = params.dense_guard_for(&self.index.manifest.embedder.id);
                // The graph loads here, not in the engine made for the choice, so that the
                // two share it and what it computes on first use.
                if self.graph_kind() != GraphKind::None {
                    self.graph()?;
                }
                Box::new(Auto::new(name, self.with_config(config).retriever(choice)?, self.graph_kind()))
            }
            "regime_router" => {
                let params = self.config.regime_router.clone();
                let model = RegimeModel::resolve(params.model.as_deref(), self.store.folder())?;
                Box::new(RegimeRouter::new(index, self.vectors(), embedder, Arc::new(model), params))
            }
            "bridge_rag" | "bridge_rag_a" | "bridge_rag_b" => {
                let llm = self.llm.clone().ok_or_else(|| Error::Config(format!("method {name} {NO_LLM}")))?;
                let mut params = self.config.bridge_rag;
                params.condition = match name {
                    "bridge_rag_a" => Condition::A,
                    "bridge_rag_b" => Condition::B,
                    _ => params.condition,
                };
                let concurrency = self.llm_concurrency();
                let dense = Box::new(Dense::new(self.vectors(), embedder.clone()));
                let bridge = BridgeRag::new(index, self.vectors(), embedder, llm, params, name, concurrency);
                Box::new(WithFallback::new(Box::new(bridge), dense))
            }
            "naive_ge" => Box::new(NaiveGe::new(self.gear_expansion()?)),
            "sync_ge" | "gear" => {
                let llm = self.llm.clone().ok_or_else(|| Error::Config(format!("method {name} {NO_LLM}")))?;
                let concurrency = self.llm_concurrency();
                let base = self.retriever(self.config.gear.base.method())?;
                let method: Box<dyn Retriever> = if name == "gear" {
                    Box::new(Gear::new(self.gear_expansion()?, llm, concurrency))
                } else {
                    Box::new(SyncGe::new(self.gear_expansion()?, llm, concurrency))
                };
                Box::new(WithFallback::new(method, base))
            }
            other => {
                let known: Vec<_> = METHODS.iter().map(|m| m.0).collect();
                return Err(Error::Config(format!("unknown method {other:?}; known: {}", known.join(", "))));
            }
        })
    }

    /// What the GEAR methods share: the base retriever of `gear.base`, the triple index
    /// (built on first use) and the parameters.
    fn gear_expansion(&self) -> Result<Expansion> {
        let p = self.config.gear;
        if p.beam_size == 0 || p.length == 0 || p.max_steps == 0 || p.round_passages == 0 {
            return Err(Error::Config(
                "gear.beam_size, gear.length, gear.max_steps and gear.round_passages must be at least 1".into(),
            ));
        }
        let graph = self.graph()?;
        let triples = graph.triple_index(graph.embedder.as_deref().unwrap_or(self.embedder.as_ref()))?;
        let base = self.retriever(p.base.method())?;
        Ok(Expansion::new(base, triples, self.index.clone(), self.embedder.clone(), p, self.config.hybrid)
            .with_graph_embedder(graph.embedder.clone()))
    }

    /// Builds now what the graph methods otherwise build in their first query (the split
    /// walk's passage response, GEAR's triple index), so that timing a batch of queries
    /// (a benchmark) starts in the steady state, and a server that switches to a new
    /// generation does not make that generation's first queries pay for it. Nothing
    /// without a graph.
    pub fn prepare(&self) -> Result<()> {
        if self.graph_kind() == GraphKind::None {
            return Ok(());
        }
        let graph = self.graph()?;
        if self.config.ppr.ppr.split {
            graph.passage_response(self.index.vectors(), self.config.ppr.ppr.damping);
        }
        graph.triple_index(graph.embedder.as_deref().unwrap_or(self.embedder.as_ref()))?;
        Ok(())
    }

    /// The index's graph, or an error saying how to build one.
    pub fn graph(&self) -> Result<Arc<GraphContext>> {
        // A graph that is there but cannot be read is damaged, not missing: the error
        // names the file and says how to rebuild it.
        let loaded = self.graph.get_or_compute(|| match self.store.load_graph(&self.index) {
            Ok(Some(g)) => {
                let mut context = GraphContext::new(Arc::new(g));
                context.linker.set_llm(self.llm.clone());
                context.embedder = self.graph_embedder().map_err(|e| e.to_string())?;
                Ok(Some(Arc::new(context)))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(format!(
                "the entity graph is damaged ({e}); rebuild it with `hoprag graph --index {} --triples OPENIE.json` \
                 or `--extract heuristic|llm`",
                self.index.location()
            )),
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

    /// The embedder of the graph's vectors where the graph has one of its own
    /// (`--graph-embedder`), loaded once with the graph; `None` without one.
    fn graph_embedder(&self) -> Result<Option<Arc<dyn Embedder>>> {
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
