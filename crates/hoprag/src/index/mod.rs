//! An opened index: one generation's passages, vectors, lexical index and vector index,
//! everything needed to answer queries without re-embedding. Where it is kept, and how
//! it is built and extended, is [`crate::store`]'s business.

mod layers;
mod lexical;
mod manifest;
pub mod vector;

pub use layers::{passage_digest, Passages, Pieces, Run, Source};
pub use lexical::{analyze, analyzer, LexicalIndex, PartedBm25, TantivyBm25};
#[cfg(feature = "postgres")]
pub(crate) use lexical::{LexicalPart, PARTS_IDS};
pub use manifest::{
    Counts, DeltaInfo, EmbedWork, EmbedderInfo, GraphBuildTimes, GraphInfo, GraphStats, Manifest, FORMAT_VERSION,
};
pub use vector::{
    hnsw_breadth, ExactIndex, Extremes, HnswIndex, HnswParams, HnswUpdate, Matrix, Quantization, Rescored, Screen,
    Screened, Slots, VectorIndex, VectorIndexKind, REBUILD_AFTER,
};

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::corpus::Passage;
use crate::embed::Embedder;
use crate::error::{Error, Result};

/// Which side of an index a search reads: GEAR's base retriever h_base, over passages or
/// over triples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchKind {
    Bm25,
    Dense,
    /// Reciprocal rank fusion of the other two.
    Hybrid,
}

/// An opened generation of an index.
pub struct Index {
    location: String,
    generation: String,
    pub manifest: Manifest,
    /// Shared: a generation layered on this one's passages (a delta read from the
    /// store, or served after an edit) holds them without copying them.
    passages: Passages,
    vectors: Arc<Matrix>,
    lexical: Arc<dyn LexicalIndex>,
    vector: Arc<dyn VectorIndex>,
    /// The approximate index as the store gave it (before re-scoring), which an edit
    /// served from memory brings up to date ([`VectorIndex::edited`]).
    ann: Option<Arc<dyn VectorIndex>>,
    /// Exact search over the vectors, screened: the vector index itself where the
    /// manifest chose exact search, and filtered dense queries' scan behind HNSW too.
    exact: Arc<ExactIndex>,
    /// The passages' `meta` as typed columns, for metadata filters: built on the first
    /// filtered query.
    meta: crate::lazy::Lazy<Arc<crate::filter::MetaColumns>>,
    /// Where the generation was derived from a full one and a delta
    /// ([`crate::store::delta`]): what its graph and the next edit's delta start from.
    derived: Option<Arc<Derived>>,
    /// What keeps the generation's files in place while this index is open (the folder
    /// store's shared lock on it): parts such as the graph are read on first use.
    _hold: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Index {
    /// Assembles a generation a store has read, checking that its parts agree with the
    /// manifest and with each other. `ann` is the store's approximate index, required
    /// when the manifest names one; otherwise searches are exact.
    pub fn from_parts(
        location: &str,
        generation: String,
        manifest: Manifest,
        passages: impl Into<Passages>,
        vectors: Matrix,
        lexical: Arc<dyn LexicalIndex>,
        ann: Option<Arc<dyn VectorIndex>>,
    ) -> Result<Index> {
        let passages = passages.into();
        let err = |m: String| Error::index(Path::new(location), m);
        if manifest.format_version != FORMAT_VERSION {
            return Err(err(format!(
                "index format version {} is not supported by this hoprag (expects {FORMAT_VERSION}); rebuild it",
                manifest.format_version
            )));
        }
        let dim = manifest.embedder.dim;
        if vectors.dim() != dim || vectors.rows() != passages.len() {
            return Err(err(format!(
                "the store holds {} vectors of dimension {} for {} passages; the manifest says dimension {dim}",
                vectors.rows(),
                vectors.dim(),
                passages.len()
            )));
        }
        if lexical.len() != passages.len() {
            return Err(err(format!(
                "lexical index and passages disagree in size ({} vs {})",
                lexical.len(),
                passages.len()
            )));
        }
        let vectors = Arc::new(vectors);
        let exact = Arc::new(ExactIndex::screened(vectors.clone()));
        let vector: Arc<dyn VectorIndex> = match (manifest.vector_index, &ann) {
            (VectorIndexKind::Hnsw, Some(ann)) => Rescored::wrap(ann.clone(), vectors.clone()),
            (VectorIndexKind::Hnsw, None) => {
                return Err(err("the manifest names an HNSW index the store lacks".into()))
            }
            _ => exact.clone(),
        };
        Ok(Index {
            location: location.to_string(),
            generation,
            manifest,
            passages,
            vectors,
            lexical,
            vector,
            ann,
            exact,
            meta: crate::lazy::Lazy::new(),
            derived: None,
            _hold: None,
        })
    }

    /// The same index, derived from a full generation and a delta as `derived` says.
    pub fn derived_from(mut self, derived: Derived) -> Index {
        self.derived = Some(Arc::new(derived));
        self
    }

    /// Where the generation is a delta on a full one: that generation's passages, and
    /// each passage's identical row among them.
    pub fn derived(&self) -> Option<&Arc<Derived>> {
        self.derived.as_ref()
    }

    /// The passages' metadata as columns ([`crate::filter`]), built once per generation.
    pub fn meta_columns(&self) -> Arc<crate::filter::MetaColumns> {
        self.meta
            .get_or_compute(|| {
                Arc::new(crate::filter::MetaColumns::build(self.passages.iter().map(|p| p.meta.as_ref())))
            })
            .clone()
    }

    /// The store's folder or URL (without password), for messages.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The id of this generation in its store.
    pub fn generation(&self) -> &str {
        &self.generation
    }

    pub fn passages(&self) -> &Passages {
        &self.passages
    }

    /// The approximate index as the store gave it, where the manifest names one.
    pub fn ann(&self) -> Option<&Arc<dyn VectorIndex>> {
        self.ann.as_ref()
    }

    pub fn passage(&self, i: crate::PassageIdx) -> &Passage {
        &self.passages[i as usize]
    }

    pub fn len(&self) -> usize {
        self.passages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.passages.is_empty()
    }

    pub fn vectors(&self) -> &Arc<Matrix> {
        &self.vectors
    }

    /// The same index, keeping `hold` until it is dropped: what the store needs held
    /// for the generation's files to stay while the index may still read them.
    pub fn holding(mut self, hold: impl std::any::Any + Send + Sync) -> Index {
        self._hold = Some(Box::new(hold));
        self
    }

    pub fn lexical(&self) -> &dyn LexicalIndex {
        self.lexical.as_ref()
    }

    /// The vector index the manifest chose (exact or HNSW).
    pub fn vector_index(&self) -> Arc<dyn VectorIndex> {
        self.vector.clone()
    }

    /// The screened exact index over the stored vectors, whatever the manifest chose
    /// (its int8 screen made on first use and kept).
    pub fn screened_exact(&self) -> Arc<ExactIndex> {
        self.exact.clone()
    }

    /// An exact index over the stored vectors, whatever the manifest chose.
    pub fn exact_index(&self) -> ExactIndex {
        ExactIndex::new(self.vectors.clone())
    }

    /// Fails with a clear message unless `embedder` is the one the index was built with.
    pub fn check_embedder(&self, embedder: &dyn Embedder) -> Result<()> {
        let built = &self.manifest.embedder;
        if built.id != embedder.id() || built.dim != embedder.dim() {
            return Err(Error::index(
                Path::new(&self.location),
                format!(
                    "built with embedder {} ({} dimensions) but queries would be embedded with {} \
                     ({} dimensions); use --embedder {} or rebuild the index",
                    built.id,
                    built.dim,
                    embedder.id(),
                    embedder.dim(),
                    built.id
                ),
            ));
        }
        Ok(())
    }
}

/// A generation read as a delta on a full one ([`crate::store::delta`]).
pub struct Derived {
    /// The full generation's passages (its graph's, where it has one), in its order.
    pub base_passages: Passages,
    /// For each passage of the generation, its identical row of the base; `None` for a
    /// passage the delta added.
    pub of_base: Vec<Option<crate::corpus::PassageIdx>>,
}

/// SHA-256 over every passage's [`passage_digest`], in order: the corpus checksum a
/// manifest records ([`Passages::checksum`] computes the same from digests it keeps).
pub fn checksum<'a>(passages: impl IntoIterator<Item = &'a Passage>) -> String {
    let mut h = Sha256::new();
    for p in passages {
        h.update(passage_digest(p));
    }
    hex::encode(h.finalize())
}
