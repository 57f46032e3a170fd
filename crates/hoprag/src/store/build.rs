//! Building, extending and annotating an index in any store: what is embedded and
//! recorded is the same whichever store keeps it.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{Change, Store, WriteTimes};
use crate::corpus::{LoadedCorpus, Passage};
use crate::embed::{embed_passages, Embedder};
use crate::error::{Error, Result};
use crate::graph::split_ppr::Solved;
use crate::graph::EntityGraph;
use crate::index::{
    Counts, EmbedderInfo, GraphInfo, HnswParams, Manifest, Matrix, Passages, VectorIndexKind, FORMAT_VERSION,
};
use crate::progress::Progress;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildOptions {
    pub vector_index: VectorIndexKind,
    pub hnsw: HnswParams,
    /// Passages per embedder call.
    pub embed_batch: usize,
    /// Replace an existing index.
    pub overwrite: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            vector_index: VectorIndexKind::Auto,
            hnsw: HnswParams::default(),
            embed_batch: 256,
            overwrite: false,
        }
    }
}

/// Where the time of a build or an addition went.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BuildStats {
    pub passages_added: usize,
    pub passages_total: usize,
    pub embed_secs: f64,
    /// The store's lexical statistics (tantivy segments, or postings rows).
    pub lexical_secs: f64,
    /// The approximate vector index (HNSW), when the manifest asks for one.
    pub vector_secs: f64,
    /// Passages, vectors, graph and manifest written, generation switched.
    pub write_secs: f64,
    pub total_secs: f64,
    pub bytes_on_disk: u64,
}

/// Builds a new index in `store` from a loaded corpus.
pub fn build_index(
    store: &dyn Store,
    corpus: &LoadedCorpus,
    sources: Vec<String>,
    embedder: &dyn Embedder,
    options: &BuildOptions,
    progress: &dyn Progress,
) -> Result<BuildStats> {
    let started = Instant::now();
    let writer = store.writer()?;
    if writer.base().is_some() && !options.overwrite {
        return Err(Error::index(
            store.location(),
            "an index already exists here; pass --force to replace it or use `hoprag add`",
        ));
    }
    if corpus.passages.is_empty() {
        return Err(Error::index(store.location(), "the corpus has no usable passages; nothing to index"));
    }
    let mut stats = BuildStats::default();
    // Canonical order: the index is the same whatever order the corpus listed its
    // passages in, and the same as any edited index holding the same passages.
    let mut passages = corpus.passages.clone();
    crate::corpus::canonical_order(&mut passages);
    let texts: Vec<String> = passages.iter().map(Passage::index_text).collect();
    let vectors = timed(&mut stats.embed_secs, || {
        embed_passages(embedder, &texts, options.embed_batch, "embedding passages", progress)
    })?;
    let vectors = Matrix::from_flat(embedder.dim(), vectors);
    let passages = Passages::whole(passages);
    let now = unix_now();
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        hoprag_version: env!("CARGO_PKG_VERSION").to_string(),
        embedder: EmbedderInfo { id: embedder.id().to_string(), dim: embedder.dim() },
        corpus_checksum: passages.checksum(),
        counts: Counts {
            passages: corpus.passages.len(),
            skipped: corpus.report.skipped.len(),
            duplicates: corpus.report.duplicates.len(),
        },
        vector_index: options.vector_index.resolve(vectors.rows()),
        hnsw: options.hnsw,
        sources,
        graph: None,
        delta: None,
        created_at: now,
        updated_at: now,
    };
    let times = writer.commit(Change::passages(&manifest, &passages, &vectors), progress)?;
    stats.add_times(times);
    stats.passages_added = corpus.passages.len();
    stats.passages_total = corpus.passages.len();
    stats.total_secs = started.elapsed().as_secs_f64();
    stats.bytes_on_disk = store.size_bytes()?;
    Ok(stats)
}

/// What attaching a graph computed besides writing it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GraphAttached {
    /// Seconds solving the passage seeds' walk, and its iterations; `None` where the
    /// graph is not one the split walk covers (it then runs the full walk).
    pub walk_secs: Option<f64>,
    pub walk_iterations: Option<usize>,
}

/// Attaches `graph` (built from the store's live generation) to a new generation,
/// recorded as built from `source`. The passage seeds' walk is solved here on that
/// generation's passage vectors, with the default damping, and stored with the graph
/// ([`crate::graph::split_ppr::Solved`]), so that no process that opens the index pays
/// for it (minutes at a million passages: docs/scale.md).
pub fn attach_graph(store: &dyn Store, graph: &EntityGraph, source: String) -> Result<GraphAttached> {
    let index = store.load()?;
    let walk = {
        let ppr = crate::graph::ppr::PprGraph::from_entity_graph(graph);
        let damping = crate::graph::ppr::PprParams::default().damping;
        Solved::solve(&ppr, graph.entities.len(), index.vectors(), damping)
    };
    drop(index);
    let attached = GraphAttached {
        walk_secs: walk.as_ref().map(Solved::secs),
        walk_iterations: walk.as_ref().map(Solved::iterations),
    };
    let writer = store.writer()?;
    let Some(base) = writer.base() else { return Err(super::no_index(store.location())) };
    if graph.passage_entities.len() > base.counts.passages {
        return Err(Error::index(
            store.location(),
            format!(
                "the graph covers {} passages, the index holds {}",
                graph.passage_entities.len(),
                base.counts.passages
            ),
        ));
    }
    let mut manifest = base.clone();
    // A graph embedded by the index's own embedder records none of its own.
    let embedder = graph.embedder.clone().filter(|e| *e != base.embedder);
    manifest.graph =
        Some(GraphInfo { source, passages: graph.passage_entities.len(), stats: graph.stats.clone(), embedder });
    manifest.updated_at = unix_now();
    writer.commit(Change::Graph { manifest: &manifest, graph, walk: walk.as_ref() }, &crate::progress::Silent)?;
    Ok(attached)
}

impl BuildStats {
    fn add_times(&mut self, t: WriteTimes) {
        self.lexical_secs += t.lexical_secs;
        self.vector_secs += t.vector_secs;
        self.write_secs += t.write_secs;
    }
}

fn timed<T>(acc: &mut f64, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    *acc += t.elapsed().as_secs_f64();
    r
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs()
}
