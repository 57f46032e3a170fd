//! Edits: documents and passages upserted, deleted, or synced with a corpus, in any
//! store, with every derived structure (vectors, lexical statistics, the entity graph
//! and its walk) brought up to date in the same new generation.
//!
//! The promise: after any sequence of edits, the index is the one a fresh build of the
//! resulting passages makes, so every method ranks exactly as on that build. Three things
//! make it hold:
//! - every generation keeps its passages in canonical order (by id, bytewise; a fresh
//!   build sorts them the same way), so nothing depends on the order passages arrived in;
//! - a generation is derived from the passages by the same code whether built fresh or
//!   edited ([`derive`]); an edit only skips computing what the old generation already
//!   holds for the same text;
//! - the work is computed without the store's lock and committed under it only if no
//!   other writer published meanwhile; otherwise it is computed again on the newer
//!   generation (reusing every vector already computed), so concurrent writers never
//!   lose each other's edits and no lock is held while the encoder works.

mod derive;
mod plan;

pub(crate) use derive::{delta_graph, delta_walk};
pub use derive::{kept_passages, EditWork, WalkUpdate};
pub use plan::{plan, EditCounts, Plan, Request};

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::build::unix_now;
use super::delta::{delta_limit, of_base_after, Delta};
use super::{Change, PassagesPart, Store, StoredGraph};
use crate::embed::{load_embedder, Embedder, EmbedderSettings, EmbedderSpec};
use crate::error::{Error, Result};
use crate::graph::split_ppr::Solved;
use crate::graph::EntityGraph;
use crate::index::{DeltaInfo, GraphInfo, Index, Manifest, Passages};
use crate::progress::{Progress, Silent};

/// How many times an edit is computed again when other writers keep publishing first.
const ATTEMPTS: usize = 8;

/// The embedders an edit needs: the index's, and the graph's (the same one unless the
/// graph was built with `--graph-embedder`).
#[derive(Clone)]
pub struct Embedders {
    pub passages: Arc<dyn Embedder>,
    pub graph: Arc<dyn Embedder>,
}

impl Embedders {
    /// Loads the embedders `manifest` records.
    pub fn for_manifest(manifest: &Manifest, settings: &EmbedderSettings) -> Result<Embedders> {
        let passages = load_embedder(&EmbedderSpec::from_id(&manifest.embedder.id)?, settings)?;
        let graph_info = manifest.graph_embedder();
        let graph = if *graph_info == manifest.embedder {
            passages.clone()
        } else {
            load_embedder(&EmbedderSpec::from_id(&graph_info.id)?, settings)?
        };
        Ok(Embedders { passages, graph })
    }
}

#[derive(Debug, Clone)]
pub struct EditOptions {
    /// Count what would change; write nothing.
    pub dry_run: bool,
    pub walk: WalkUpdate,
    /// Recorded among the manifest's sources (`add FILE`, `delete`, `sync DIR`, `http`).
    pub source: String,
}

impl Default for EditOptions {
    fn default() -> Self {
        EditOptions { dry_run: false, walk: WalkUpdate::Solve, source: "edit".into() }
    }
}

/// What an edit changed and what it cost.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EditReport {
    pub counts: EditCounts,
    pub work: EditWork,
    /// The generation the edit published; `None` for a dry run or an edit that changed
    /// nothing.
    pub generation: Option<String>,
    pub dry_run: bool,
    /// Times the edit was computed again because another writer published first.
    pub retries: usize,
    /// The published generation's graph, as it was stored, for [`crate::Engine::reload_after`]
    /// to serve without reading it back from the store.
    #[serde(skip)]
    pub published: Option<Published>,
}

/// What an edit published, kept in memory.
#[derive(Clone)]
pub struct Published {
    pub generation: String,
    pub graph: Option<Arc<EntityGraph>>,
    /// The query structures over `graph`, where the editor built them while the
    /// generation was written ([`crate::Engine::edit`]).
    pub context: Option<Arc<crate::graph::GraphContext>>,
    /// The generation itself, assembled in memory from the one the edit started from
    /// ([`edit_from`] with a base, where the store wrote a delta and opens the
    /// generation's live parts: [`Store::open_live`]); `None`: read it from the store.
    pub index: Option<Arc<Index>>,
}

impl std::fmt::Debug for Published {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Published").field("generation", &self.generation).finish_non_exhaustive()
    }
}

/// A generation already in memory (a server's served one) that an edit may start from
/// instead of loading it from the store again.
pub struct Base {
    pub index: Arc<Index>,
    /// Its entity graph, where the index has one and it is loaded.
    pub graph: Option<Arc<EntityGraph>>,
}

/// Applies `request` to the index in `store`.
pub fn edit(
    store: &dyn Store,
    request: &Request,
    embedders: &Embedders,
    options: &EditOptions,
    progress: &dyn Progress,
) -> Result<EditReport> {
    edit_from(store, None, request, embedders, options, &|_| {}, progress)
}

/// As [`edit`], starting from `base` when it is still the store's live generation, or
/// holds what it holds ([`super::is_live`]), so a server's edit reads nothing from the
/// store; otherwise, and on a retry, from the store's live generation. `on_graph` is
/// given the new graph as soon as it is derived, before the generation is written (on a
/// retry, each attempt's).
pub fn edit_from(
    store: &dyn Store,
    mut base: Option<Base>,
    request: &Request,
    embedders: &Embedders,
    options: &EditOptions,
    on_graph: &(dyn Fn(&Arc<EntityGraph>) + Sync),
    progress: &dyn Progress,
) -> Result<EditReport> {
    let started = Instant::now();
    let fresh = derive::Fresh::default();
    let mut report = EditReport { dry_run: options.dry_run, ..Default::default() };
    // A caller with the generation in memory serves the edit's next: it is assembled
    // from what the edit computed rather than read back from the store.
    let serving = base.is_some();
    for attempt in 0..ATTEMPTS {
        report.retries = attempt;
        let t = Instant::now();
        let (old, loaded_graph) = match base.take() {
            Some(b) if super::is_live(store, &b.index)? => (b.index, b.graph),
            _ => (Arc::new(store.load()?), None),
        };
        old.check_embedder(embedders.passages.as_ref())?;
        let plan = plan::plan(old.passages(), request)?;
        report.counts = plan.counts.clone();
        report.work.plan_secs += t.elapsed().as_secs_f64();
        if options.dry_run || plan.counts.is_noop() {
            report.work.total_secs = started.elapsed().as_secs_f64();
            return Ok(report);
        }
        let kept = derive::kept_passages(old.passages(), &plan.passages);
        let vectors = derive::vectors(
            &old,
            &plan.passages,
            &kept,
            embedders.passages.as_ref(),
            &fresh,
            &mut report.work,
            progress,
        )?;
        // Where the store keeps deltas and this one stays small, the generation is the
        // delta on the full generation `old` is (or is a delta on): its graph is derived
        // by its readers, so none is loaded or derived here unless it is in memory
        // already (a server's, which it serves next).
        let (delta, of_base) = match store.keeps_deltas() {
            true => delta_of(&old, &plan.passages, &vectors).unzip(),
            false => (None, None),
        };
        let old_graph = match loaded_graph {
            Some(graph) => Some(graph),
            None if old.manifest.graph.is_some() && delta.is_none() => {
                store.load_graph(&old, Some(embedders.graph.as_ref()))?.map(Arc::new)
            }
            None => None,
        };
        // The passages' part of the generation is written (where the store can, ahead of
        // its lock) while the graph is derived: neither reads what the other makes.
        let part = PassagesPart {
            manifest: &old.manifest,
            passages: &plan.passages,
            vectors: &vectors,
            kept: &kept,
            delta: delta.as_ref(),
        };
        // `rayon::join`, not a thread of its own: the staging's work (the lexical index,
        // an HNSW graph's inserts) stays in the caller's pool, so a one-thread pool builds
        // the same HNSW graph as the store that stages nothing.
        let (graph, staged) = rayon::join(
            || {
                old_graph
                    .as_deref()
                    .map(|old_graph| {
                        derive::graph(
                            &old.passages().contiguous(),
                            old_graph,
                            old.manifest.graph.as_ref().map(|g| g.source.as_str()),
                            &plan.passages.contiguous(),
                            &kept,
                            &vectors,
                            embedders.graph.as_ref(),
                            options.walk,
                            &fresh,
                            &mut report.work,
                            progress,
                        )
                    })
                    .transpose()
            },
            || Ok::<_, Error>((store.stage(&old, part)?, plan.passages.checksum())),
        );
        let ((staged, corpus_checksum), graph) = (staged?, graph?);
        drop(old_graph);
        if let Some((graph, _)) = &graph {
            // Before the writer's lock is taken: what the caller starts here runs while the
            // generation is written.
            on_graph(graph);
        }

        let writer = store.writer()?;
        // Under the lock: nobody can publish in between. A generation published since
        // this edit read its base would be lost if this one replaced it (one that only
        // stored the base's walk holds nothing to lose).
        let unchanged = store.generation()?.as_deref() == Some(old.generation())
            || writer.base().is_some_and(|live| super::same_manifest(live, &old.manifest));
        if !unchanged {
            log::info!("{}: another writer published during the edit; computing it again", store.location());
            continue;
        }
        let manifest = manifest_after(&old, &plan, corpus_checksum, graph.as_ref(), delta.as_ref(), options)?;
        // Kept only where the next generation is assembled from it.
        let old = (serving && delta.is_some()).then_some(old);
        let (graph, _) = graph.unzip();
        let times = writer.commit(
            Change::Replace {
                manifest: &manifest,
                passages: &plan.passages,
                vectors: &vectors,
                graph: graph.as_deref(),
                walk: graph.as_ref().and_then(|g| g.walk.as_deref()),
                kept: Some(&kept),
                staged,
                delta: delta.as_ref(),
            },
            progress,
        )?;
        report.work.lexical_secs += times.lexical_secs;
        report.work.write_secs += times.write_secs + times.vector_secs;
        report.generation = store.generation()?;
        let index = match (old, of_base, &report.generation) {
            (Some(old), Some(of_base), Some(generation)) => {
                let t = Instant::now();
                // The edit is published: where its generation cannot be assembled, the
                // caller reads it from the store.
                let next =
                    assembled(store, &old, generation, plan.passages, vectors, &kept, of_base).unwrap_or_else(|e| {
                        log::warn!("{}: the edited generation is read back: {e}", store.location());
                        None
                    });
                report.work.assemble_secs = Some(t.elapsed().as_secs_f64());
                next.map(Arc::new)
            }
            _ => None,
        };
        report.published =
            report.generation.clone().map(|generation| Published { generation, graph, context: None, index });
        report.work.total_secs = started.elapsed().as_secs_f64();
        return Ok(report);
    }
    Err(Error::index(
        store.location(),
        format!("other writers published {ATTEMPTS} times while this edit was computed; try again"),
    ))
}

/// Stores `walk`, solved for generation `index`'s graph after an edit that deferred it,
/// as a new generation of the same passages and graph, if `index` is still the live
/// generation; says whether it did (a newer generation leaves it unstored: it has a walk
/// of its own to solve).
pub fn store_walk(store: &dyn Store, index: &Index, graph: &EntityGraph, walk: &Solved) -> Result<bool> {
    let writer = store.writer()?;
    if store.generation()?.as_deref() != Some(index.generation()) {
        return Ok(false);
    }
    writer.commit(Change::Graph { manifest: &index.manifest, graph, walk: Some(walk) }, &Silent)?;
    Ok(true)
}

fn manifest_after(
    old: &Index,
    plan: &Plan,
    corpus_checksum: String,
    graph: Option<&(Arc<EntityGraph>, String)>,
    delta: Option<&Delta>,
    options: &EditOptions,
) -> Result<Manifest> {
    let mut m = old.manifest.clone();
    m.corpus_checksum = corpus_checksum;
    m.counts.passages = plan.passages.len();
    m.sources.push(options.source.clone());
    m.updated_at = unix_now();
    m.delta = delta.map(|d| DeltaInfo {
        base_passages: old.derived().map_or(old.len(), |b| b.base_passages.len()),
        removed: d.removed.len(),
        added: d.added.len(),
    });
    m.graph = match (&old.manifest.graph, graph) {
        // A delta generation's graph is derived by its readers: its statistics stay its
        // full generation's until it is compacted.
        (Some(info), _) if delta.is_some() => Some(GraphInfo { passages: plan.passages.len(), ..info.clone() }),
        (Some(info), Some((graph, source))) => Some(GraphInfo {
            source: source.clone(),
            passages: plan.passages.len(),
            stats: graph.stats.clone(),
            embedder: info.embedder.clone(),
        }),
        (None, None) => None,
        _ => return Err(Error::index(old.location(), "the graph went missing during the edit")),
    };
    Ok(m)
}

/// The change from `old` to `passages` as a delta on the full generation `old` is, or is
/// a delta on, while it stays within [`delta_limit`], with each passage's row of that
/// generation; `None` past it (the edit writes a full generation: the compaction).
/// Passages layered on that generation in memory are the delta already.
fn delta_of(
    old: &Index,
    passages: &Passages,
    vectors: &crate::index::Matrix,
) -> Option<(Delta, Vec<Option<crate::corpus::PassageIdx>>)> {
    let derived = old.derived();
    let base = derived.map_or_else(|| old.passages().base(), |d| d.base_passages.clone());
    let base_len = base.len();
    let (delta, of_base) = match (passages.pieces(), vectors.layers()) {
        (Some(pieces), Some((_, added, _))) if passages.same_base(&base) => {
            let delta =
                Delta { removed: pieces.removed(base_len), added: passages.added().to_vec(), vectors: added.clone() };
            (delta, pieces.of_base())
        }
        _ => {
            let (old_passages, passages) = (old.passages().contiguous(), passages.contiguous());
            let of_base = of_base_after(&old_passages, derived.map(|d| &d.of_base[..]), &passages);
            (Delta::between(base_len, &of_base, &passages, vectors), of_base)
        }
    };
    (delta.len() <= delta_limit(base_len)).then_some((delta, of_base))
}

/// Delta generation `generation`, which an edit of `old` published, as the store would
/// read it but from memory: the edit's `passages` and `vectors`, `old`'s approximate index
/// brought up to date (`kept`: each passage's row of `old`), the full generation's
/// passages shared with `old`, and from the store only what it opens of a live
/// generation (the lexical index). `None` where the store cannot (another generation is
/// live already, or the store has no such path): the caller reads it.
fn assembled(
    store: &dyn Store,
    old: &Index,
    generation: &str,
    passages: Passages,
    vectors: crate::index::Matrix,
    kept: &[Option<crate::corpus::PassageIdx>],
    of_base: Vec<Option<crate::corpus::PassageIdx>>,
) -> Result<Option<Index>> {
    let Some(live) = store.open_live(generation)? else { return Ok(None) };
    let ann = match old.ann().map(|ann| ann.edited(&vectors, kept)) {
        Some(Some(edited)) => Some(edited?),
        Some(None) => return Ok(None),
        None => None,
    };
    let base_passages = old.derived().map_or_else(|| old.passages().base(), |d| d.base_passages.clone());
    let index = Index::from_parts(
        store.location(),
        generation.to_string(),
        live.manifest,
        passages,
        vectors,
        live.lexical,
        ann,
    )?;
    Ok(Some(index.derived_from(crate::index::Derived { base_passages, of_base }).holding(live.hold)))
}

/// What a compaction wrote.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Compacted {
    /// The generation written whole; `None` where the live one was whole already.
    pub generation: Option<String>,
    /// The delta it folded in: passages removed from and added to its full generation.
    pub removed: usize,
    pub added: usize,
    /// The graph read or derived, its walk solved.
    pub graph_secs: f64,
    pub write_secs: f64,
    pub total_secs: f64,
}

/// Writes the live generation whole where it is a delta ([`super::delta`]): the same
/// passages, vectors and lexical index, the graph derived from the full generation's and
/// its walk solved from scratch, so the files are the ones a fresh build of its passages
/// writes. Nothing where it is whole already. Retried as an edit is when another writer
/// publishes meanwhile.
pub fn compact(store: &dyn Store, embedders: &Embedders, progress: &dyn Progress) -> Result<Compacted> {
    let started = Instant::now();
    for _ in 0..ATTEMPTS {
        let old = store.load()?;
        let Some(info) = old.manifest.delta.clone() else {
            return Ok(Compacted { total_secs: started.elapsed().as_secs_f64(), ..Default::default() });
        };
        let mut done = Compacted { removed: info.removed, added: info.added, ..Default::default() };
        // The graph derived with its walk solved, as a fresh build solves it (a repair
        // would be thrown away); a graph stored with the generation has its walk solved
        // again.
        let t = Instant::now();
        let graph = match store.stored_graph(&old)? {
            Some(StoredGraph::Own(mut g)) => {
                g.walk = derive::solved(&g, old.vectors());
                Some(g)
            }
            Some(base) => Some(base.into_graph(&old, Some(embedders.graph.as_ref()), WalkUpdate::Solve)?),
            None => None,
        };
        done.graph_secs = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let kept: Vec<Option<crate::corpus::PassageIdx>> = (0..old.len() as u32).map(Some).collect();
        let part = PassagesPart {
            manifest: &old.manifest,
            passages: old.passages(),
            vectors: old.vectors(),
            kept: &kept,
            delta: None,
        };
        let staged = store.stage(&old, part)?;
        let writer = store.writer()?;
        if store.generation()?.as_deref() != Some(old.generation()) {
            continue;
        }
        let mut manifest = old.manifest.clone();
        manifest.delta = None;
        if let (Some(info), Some(graph)) = (manifest.graph.as_mut(), graph.as_ref()) {
            info.stats = graph.stats.clone();
            info.source = derive::source_after(&info.source, done.added > 0);
        }
        manifest.sources.push("compact".into());
        manifest.updated_at = unix_now();
        writer.commit(
            Change::Replace {
                manifest: &manifest,
                passages: old.passages(),
                vectors: old.vectors(),
                graph: graph.as_ref(),
                walk: graph.as_ref().and_then(|g| g.walk.as_deref()),
                kept: Some(&kept),
                staged,
                delta: None,
            },
            progress,
        )?;
        done.write_secs = t.elapsed().as_secs_f64();
        done.generation = store.generation()?;
        done.total_secs = started.elapsed().as_secs_f64();
        return Ok(done);
    }
    Err(Error::index(
        store.location(),
        format!("other writers published {ATTEMPTS} times during the compaction; try again"),
    ))
}
