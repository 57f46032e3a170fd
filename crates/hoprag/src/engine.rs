//! The engine: an opened index, its embedder, and the methods that run on them.

use std::sync::{Arc, OnceLock};

use crate::config::Config;
use crate::embed::{load_embedder, Embedder, EmbedderSpec, TextKind};
use crate::error::{Error, Result};
use crate::graph::linking::{NerMode, NO_LLM_FOR_NER};
use crate::graph::GraphContext;
use crate::index::{Index, VectorIndex};
use crate::llm::{self, Llm, LlmSource};
use crate::retrieve::{Bm25, Dense, Hybrid, PhaseGraph, Ppr, Query, Retriever};

pub struct Engine {
    pub index: Arc<Index>,
    pub embedder: Arc<dyn Embedder>,
    pub config: Config,
    /// The chat model of the LLM stages (see [`Engine::llm`]).
    llm: Option<Arc<dyn Llm>>,
    llm_source: LlmSource,
    /// The index's entity graph with its query-time structures, loaded on first use.
    graph: OnceLock<Option<Arc<GraphContext>>>,
}

/// Methods and a one-line description each, for `--help`, `hoprag methods` and errors.
pub const METHODS: &[(&str, &str)] = &[
    ("bm25", "BM25 over title + text (tantivy)"),
    ("dense", "nearest passages to the query embedding"),
    ("hybrid", "reciprocal rank fusion (k = 60) of bm25 and dense"),
    ("ppr", "HippoRAG-style Personalized PageRank from the query's linked entities (needs a graph)"),
    ("phasegraph", "PhaseGraph: calibrated (PIT + Boltzmann) fusion of dense and capped PPR lists (needs a graph)"),
];

impl Engine {
    /// Opens an index with the embedder its manifest names.
    pub fn open(dir: &std::path::Path, config: Config) -> Result<Engine> {
        let index = Index::open(dir)?;
        let spec = EmbedderSpec::from_id(&index.manifest.embedder.id)?;
        let embedder = load_embedder(&spec, &config.embedder)?;
        Self::new(Arc::new(index), embedder, config)
    }

    /// Also sets up the LLM of `config.llm` (see [`llm::from_config`]): its endpoint if
    /// it names one, else the local GGUF model. No server is contacted and no model is
    /// loaded until a method asks the LLM something.
    pub fn new(index: Arc<Index>, embedder: Arc<dyn Embedder>, config: Config) -> Result<Engine> {
        index.check_embedder(embedder.as_ref())?;
        let (llm, llm_source) = llm::from_config(&config.llm)?;
        Ok(Engine { index, embedder, config, llm: Some(llm), llm_source, graph: OnceLock::new() })
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
        self.link_params(name).is_some_and(|l| l.mentions && l.ner == NerMode::Llm)
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
        self.llm = Some(llm);
        // A graph loaded already has the previous model in its linker: rebuild its
        // query-time structures (from memory) around the new one.
        if let Some(Some(loaded)) = self.graph.take() {
            let mut context = GraphContext::new(loaded.linker.graph.clone());
            context.linker.set_llm(self.llm.clone());
            let _ = self.graph.set(Some(Arc::new(context)));
        }
        self
    }

    /// The same index, embedder, LLM and loaded graph under another configuration (for
    /// tuning: nothing is reloaded, and `config.llm` is not read again).
    pub fn with_config(&self, config: Config) -> Engine {
        let graph = OnceLock::new();
        if let Some(g) = self.graph.get() {
            let _ = graph.set(g.clone());
        }
        Engine {
            index: self.index.clone(),
            embedder: self.embedder.clone(),
            config,
            llm: self.llm.clone(),
            llm_source: self.llm_source.clone(),
            graph,
        }
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

    /// The retrieval method called `name`.
    pub fn retriever(&self, name: &str) -> Result<Box<dyn Retriever>> {
        let (index, embedder) = (self.index.clone(), self.embedder.clone());
        // Checked here, so that a run fails before its first question rather than on it
        // (a local model that is not installed is found without loading it).
        if self.uses_llm(name) {
            if self.llm.is_none() {
                return Err(Error::Config(format!("method {name}: {}", NO_LLM_FOR_NER)));
            }
            self.llm_source.check().map_err(|e| Error::Config(format!("method {name} needs the LLM: {e}")))?;
        }
        Ok(match name {
            "bm25" => Box::new(Bm25::new(index)),
            "dense" => Box::new(Dense::new(self.vectors(), embedder)),
            "hybrid" => Box::new(Hybrid::new(index, self.vectors(), embedder, self.config.hybrid)),
            "ppr" => Box::new(Ppr::new(self.graph()?, self.vectors(), embedder, self.config.ppr)),
            "phasegraph" => Box::new(PhaseGraph::new(self.graph()?, self.vectors(), embedder, self.config.phasegraph)),
            other => {
                let known: Vec<_> = METHODS.iter().map(|m| m.0).collect();
                return Err(Error::Config(format!("unknown method {other:?}; known: {}", known.join(", "))));
            }
        })
    }

    /// The index's graph, or an error saying how to build one.
    pub fn graph(&self) -> Result<Arc<GraphContext>> {
        let loaded = self.graph.get_or_init(|| match self.index.graph() {
            Ok(Some(g)) => {
                let mut context = GraphContext::new(Arc::new(g));
                context.linker.set_llm(self.llm.clone());
                Some(Arc::new(context))
            }
            Ok(None) => None,
            Err(e) => {
                log::error!("{e}");
                None
            }
        });
        loaded.clone().ok_or_else(|| {
            Error::index(
                self.index.root(),
                "this method needs an entity graph; add one with `hoprag graph --index DIR --triples OPENIE.json` \
                 or `--extract heuristic|llm`",
            )
        })
    }

    /// Queries with their embeddings computed in batches.
    pub fn embed_queries(&self, texts: &[String], progress: &dyn crate::progress::Progress) -> Result<Vec<Query>> {
        progress.start("embedding questions", texts.len() as u64);
        let vectors = crate::embed::embed_all(self.embedder.as_ref(), texts, TextKind::Query, 64, &|n| {
            progress.advance(n as u64)
        });
        progress.finish();
        Ok(texts.iter().zip(vectors?).map(|(t, v)| Query { text: t.clone(), embedding: Some(Arc::new(v)) }).collect())
    }
}
