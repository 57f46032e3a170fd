//! The engine: an opened index, its embedder, and the methods that run on them.

use std::sync::Arc;

use crate::config::Config;
use crate::embed::{load_embedder, Embedder, EmbedderSpec, TextKind};
use crate::error::{Error, Result};
use crate::index::{Index, VectorIndex};
use crate::retrieve::{Bm25, Dense, Hybrid, Query, Retriever};

pub struct Engine {
    pub index: Arc<Index>,
    pub embedder: Arc<dyn Embedder>,
    pub config: Config,
}

/// Methods and a one-line description each, for `--help`, `hoprag methods` and errors.
pub const METHODS: &[(&str, &str)] = &[
    ("bm25", "BM25 over title + text (tantivy)"),
    ("dense", "nearest passages to the query embedding"),
    ("hybrid", "reciprocal rank fusion (k = 60) of bm25 and dense"),
];

impl Engine {
    /// Opens an index with the embedder its manifest names.
    pub fn open(dir: &std::path::Path, config: Config) -> Result<Engine> {
        let index = Index::open(dir)?;
        let spec = EmbedderSpec::from_id(&index.manifest.embedder.id)?;
        let embedder = load_embedder(&spec, &config.embedder)?;
        Self::new(Arc::new(index), embedder, config)
    }

    pub fn new(index: Arc<Index>, embedder: Arc<dyn Embedder>, config: Config) -> Result<Engine> {
        index.check_embedder(embedder.as_ref())?;
        Ok(Engine { index, embedder, config })
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
        Ok(match name {
            "bm25" => Box::new(Bm25::new(index)),
            "dense" => Box::new(Dense::new(self.vectors(), embedder)),
            "hybrid" => Box::new(Hybrid::new(index, self.vectors(), embedder, self.config.hybrid)),
            other => {
                let known: Vec<_> = METHODS.iter().map(|m| m.0).collect();
                return Err(Error::Config(format!("unknown method {other:?}; known: {}", known.join(", "))));
            }
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
