//! Building, extending and annotating an index in any store: what is embedded and
//! recorded is the same whichever store keeps it.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{Change, Store, WriteTimes};
use crate::corpus::{Dedup, LoadedCorpus, Passage};
use crate::embed::{embed_passages, Embedder};
use crate::error::{Error, Result};
use crate::graph::split_ppr::Solved;
use crate::graph::EntityGraph;
use crate::index::{
    checksum, Counts, EmbedderInfo, GraphInfo, HnswParams, Index, Manifest, Matrix, VectorIndexKind, FORMAT_VERSION,
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
    let texts: Vec<String> = corpus.passages.iter().map(Passage::index_text).collect();
    let vectors = timed(&mut stats.embed_secs, || {
        embed_passages(embedder, &texts, options.embed_batch, "embedding passages", progress)
    })?;
    let vectors = Matrix::from_flat(embedder.dim(), vectors);
    let now = unix_now();
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        hoprag_version: env!("CARGO_PKG_VERSION").to_string(),
        embedder: EmbedderInfo { id: embedder.id().to_string(), dim: embedder.dim() },
        corpus_checksum: checksum(&corpus.passages),
        counts: Counts {
            passages: corpus.passages.len(),
            skipped: corpus.report.skipped.len(),
            duplicates: corpus.report.duplicates.len(),
        },
        vector_index: options.vector_index.resolve(vectors.rows()),
        hnsw: options.hnsw,
        sources,
        graph: None,
        created_at: now,
        updated_at: now,
    };
    let times = writer
        .commit(Change::Replace { manifest: &manifest, passages: &corpus.passages, vectors: &vectors }, progress)?;
    stats.add_times(times);
    stats.passages_added = corpus.passages.len();
    stats.passages_total = corpus.passages.len();
    stats.total_secs = started.elapsed().as_secs_f64();
    stats.bytes_on_disk = store.size_bytes()?;
    Ok(stats)
}

/// Adds passages to the index in `store` without re-embedding what is there. Passages
/// the index already has (same content) are skipped and reported in `new.report`;
/// clashing ids are renamed. Concurrent additions run one after the other, each
/// de-duplicated against what the other added.
pub fn add_passages(
    store: &dyn Store,
    new: &mut LoadedCorpus,
    source: String,
    embedder: &dyn Embedder,
    progress: &dyn Progress,
) -> Result<BuildStats> {
    let started = Instant::now();
    // Embedded before the store's writer lock is taken, so that no lock is held while
    // the encoder's threads work; what another writer published meanwhile is checked
    // again under the lock below.
    let seen_index = store.load()?;
    seen_index.check_embedder(embedder)?;
    let incoming = dedup_against(&seen_index, std::mem::take(&mut new.passages), &source, new);
    let mut stats = BuildStats::default();
    let texts: Vec<String> = incoming.iter().map(Passage::index_text).collect();
    let vectors = if texts.is_empty() {
        Vec::new()
    } else {
        timed(&mut stats.embed_secs, || embed_passages(embedder, &texts, 256, "embedding passages", progress))?
    };
    let dim = embedder.dim();

    let writer = store.writer()?;
    if writer.base().is_none() {
        return Err(super::no_index(store.location()));
    }
    // Read under the lock: nobody can publish in between.
    let old = store.load()?;
    old.check_embedder(embedder)?;
    let (passages, added) = if old.generation() == seen_index.generation() {
        (incoming, vectors)
    } else {
        // Another writer published while these were embedded: keep only what is still
        // new, with its vectors.
        let mut seen = Dedup::with_existing(old.passages());
        let mut kept = (Vec::new(), Vec::new());
        for (p, row) in incoming.into_iter().zip(vectors.chunks_exact(dim)) {
            let mut one = LoadedCorpus::default();
            let location = format!("{source} passage {:?}", p.id);
            one.push(&mut seen, p, location);
            new.report.merge(one.report);
            for p in one.passages {
                kept.0.push(p);
                kept.1.extend_from_slice(row);
            }
        }
        kept
    };
    drop(seen_index);
    new.passages = passages;
    stats.passages_added = new.passages.len();
    if new.passages.is_empty() {
        stats.passages_total = old.len();
        stats.total_secs = started.elapsed().as_secs_f64();
        return Ok(stats);
    }
    let added = Matrix::from_flat(dim, added);

    let mut all = old.passages().to_vec();
    all.extend(new.passages.iter().cloned());
    let mut manifest = old.manifest.clone();
    manifest.corpus_checksum = checksum(&all);
    manifest.counts.passages = all.len();
    manifest.counts.skipped += new.report.skipped.len();
    manifest.counts.duplicates += new.report.duplicates.len();
    manifest.sources.push(source);
    manifest.updated_at = unix_now();
    drop(old);
    let times =
        writer.commit(Change::Append { manifest: &manifest, passages: &new.passages, vectors: &added }, progress)?;
    stats.add_times(times);
    stats.passages_total = all.len();
    stats.total_secs = started.elapsed().as_secs_f64();
    stats.bytes_on_disk = store.size_bytes()?;
    Ok(stats)
}

/// `passages` less those `index` has already (reported in `report`), ids made unique.
fn dedup_against(index: &Index, passages: Vec<Passage>, source: &str, report: &mut LoadedCorpus) -> Vec<Passage> {
    let mut seen = Dedup::with_existing(index.passages());
    let mut kept = LoadedCorpus::default();
    for (i, p) in passages.into_iter().enumerate() {
        kept.push(&mut seen, p, format!("{source} passage {i}"));
    }
    report.report.merge(kept.report);
    kept.passages
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

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs()
}
