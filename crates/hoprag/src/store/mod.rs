//! Where an index lives: the [`Store`] seam, with a folder on this machine (the embedded
//! default) and a PostgreSQL database (feature `postgres`).
//!
//! A store holds generations. A generation is everything a query reads: the manifest,
//! the passages, their vectors, the lexical statistics, the approximate vector index
//! when the manifest asks for one, and the entity graph when one is attached. Writers
//! never change a generation that readers may see: each write makes a new one and
//! switches to it atomically, so a reader sees the old generation or the new one,
//! never a mix, and a writer killed half-way leaves the old one live. Writers take the
//! store's lock, so two writers run one after the other: both land.
//!
//! The store sits above [`crate::index`] and [`crate::graph`]: it persists both, and
//! neither knows where it is kept. The [`crate::engine::Engine`] holds the store to load
//! the graph on first use and to notice new generations.

mod build;
mod build_graph;
pub mod delta;
pub mod edit;
mod folder;
mod namespace;
#[cfg(feature = "postgres")]
pub mod postgres;

pub use build::{attach_graph, build_index, BuildOptions, BuildStats, GraphAttached};
pub use build_graph::{build_graph, graph_embedder, triples_without_llm, GraphBuilt};
pub use folder::{dir_size, FolderStore};
pub use namespace::{not_found as namespace_not_found, Namespace, NAMESPACES_DIR};

use std::path::Path;
use std::sync::Arc;

use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::graph::EntityGraph;
use crate::index::{Index, Manifest, Matrix, Passages};
use crate::progress::Progress;

/// Whether `index` is the live generation of `store`, or one with the same manifest: a
/// generation published only to store the walk solved for the same graph
/// ([`edit::store_walk`]) holds the same passages, vectors and graph under another name,
/// so a server serving `index` need not load it, and an edit from `index` stays valid.
pub fn is_live(store: &dyn Store, index: &Index) -> Result<bool> {
    if store.generation()?.as_deref() == Some(index.generation()) {
        return Ok(true);
    }
    Ok(store.manifest()?.is_some_and(|live| same_manifest(&live, &index.manifest)))
}

/// The entity graph of generation `index` of `store`, if it has one: where a delta
/// generation derives it ([`delta`]), with the graph's embedder its manifest records,
/// loaded with `settings` (nothing is loaded for any other generation).
pub fn load_graph_of(
    store: &dyn Store,
    index: &Index,
    settings: &crate::embed::EmbedderSettings,
) -> Result<Option<EntityGraph>> {
    if index.derived().is_none() || index.manifest.graph.is_none() {
        return store.load_graph(index, None);
    }
    let embedders = edit::Embedders::for_manifest(&index.manifest, settings)?;
    store.load_graph(index, Some(embedders.graph.as_ref()))
}

/// Manifests equal field for field (compared through their JSON, which every field has).
pub(crate) fn same_manifest(a: &Manifest, b: &Manifest) -> bool {
    match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// A place that holds an index's generations.
pub trait Store: Send + Sync {
    /// The folder, or the database URL without its password: for messages.
    fn location(&self) -> &str;

    /// The id of the live generation, or `None` when the store holds no index. Cheap:
    /// servers ask it to notice that another process published a generation.
    fn generation(&self) -> Result<Option<String>>;

    /// The live generation's manifest, or `None` when the store holds no index; reads
    /// nothing else.
    fn manifest(&self) -> Result<Option<Manifest>>;

    /// Loads the live generation for querying.
    fn load(&self) -> Result<Index>;

    /// The entity graph generation `index` stores, or, for a delta generation ([`delta`])
    /// that stores none of its own, its base's; `None` where the index has no graph.
    /// Read as stored: [`Store::load_graph`] checks and derives.
    fn stored_graph(&self, index: &Index) -> Result<Option<StoredGraph>>;

    /// The entity graph of generation `index` (loaded from this store), if it has one.
    /// Checked against the index: its references fall inside it. A delta generation
    /// derives it from its base's, as an edit does ([`edit::delta_graph`]), with
    /// `embedder` (the graph's) for the texts its base's graph has no vector for; without
    /// one, that is an error.
    fn load_graph(&self, index: &Index, embedder: Option<&dyn Embedder>) -> Result<Option<EntityGraph>> {
        let walk = edit::delta_walk(index);
        self.stored_graph(index)?.map(|stored| stored.into_graph(index, embedder, walk)).transpose()
    }

    /// What an index assembled in memory needs of generation `generation` from the
    /// store, if it is the live one: its manifest, its lexical index, and the hold that
    /// keeps it in place while the index is open. A server's edit serves its generation so
    /// ([`edit::edit_from`] with a base): the passages, vectors and approximate index are
    /// the edit's own, in memory. `None` where another generation is live now (the
    /// caller loads that one) or the store has no such path.
    fn open_live(&self, generation: &str) -> Result<Option<LiveParts>> {
        let _ = generation;
        Ok(None)
    }

    /// Whether the store writes an edit as a delta on a full generation ([`delta`])
    /// rather than whole ([`Change::Replace`]'s `delta`).
    fn keeps_deltas(&self) -> bool {
        false
    }

    /// Takes the writer's lock; other writers wait until the returned writer commits
    /// or is dropped (a dropped writer changes nothing).
    fn writer(&self) -> Result<Box<dyn StoreWriter + '_>>;

    /// Writes the passages' part of an edit's [`Change::Replace`] of generation `base`
    /// (passages, vectors, lexical index, approximate vector index) ahead of the writer's
    /// lock, while the caller derives the rest (the entity graph); `None` where the store
    /// writes everything in its commit (a database, in one transaction). What is staged
    /// stays private until a commit of the same change publishes it, and is removed when
    /// dropped unpublished (another writer published first: the edit is computed again).
    fn stage(&self, base: &Index, part: PassagesPart<'_>) -> Result<Option<Staged>> {
        let _ = (base, part);
        Ok(None)
    }

    /// Bytes the live generation takes in the store.
    fn size_bytes(&self) -> Result<u64>;

    /// The folder of a folder store (where a trained router model may sit beside the
    /// index); `None` for a database.
    fn folder(&self) -> Option<&Path> {
        None
    }
}

/// What [`Store::open_live`] opens of a live generation.
pub struct LiveParts {
    pub manifest: Manifest,
    pub lexical: Arc<dyn crate::index::LexicalIndex>,
    /// Keeps the generation in place while an index over it is open.
    pub hold: Box<dyn std::any::Any + Send + Sync>,
}

/// A generation's entity graph as its store holds it ([`Store::stored_graph`]).
pub enum StoredGraph {
    /// The generation's own.
    Own(EntityGraph),
    /// A delta generation's base's, which the generation's is derived from.
    Base(EntityGraph),
}

impl StoredGraph {
    /// The graph of `index`, checked against it: its own, or derived from its base's
    /// with `embedder`, the walk updated as `walk` says.
    pub fn into_graph(
        self,
        index: &Index,
        embedder: Option<&dyn Embedder>,
        walk: edit::WalkUpdate,
    ) -> Result<EntityGraph> {
        let err = |m: String| Error::index(index.location(), format!("generation {}: {m}", index.generation()));
        let graph = match self {
            StoredGraph::Own(graph) => graph,
            StoredGraph::Base(base) => {
                let derived = index.derived().ok_or_else(|| err("a base's graph for an index read whole".into()))?;
                base.check(derived.base_passages.len())
                    .map_err(|m| err(format!("{m}: the graph does not belong to this delta's base")))?;
                let embedder = embedder.ok_or_else(|| {
                    err("this delta generation's graph is derived with the graph's embedder; none was given".into())
                })?;
                edit::delta_graph(index, &base, embedder, walk)?
            }
        };
        graph.check(index.len()).map_err(|m| err(format!("{m}: the graph does not belong to this index")))?;
        Ok(graph)
    }
}

/// A writer holding the store's lock.
pub trait StoreWriter {
    /// The manifest of the live generation as it was when the lock was taken.
    fn base(&self) -> Option<&Manifest>;

    /// Writes `change` as a new generation and makes it the live one, atomically.
    fn commit(self: Box<Self>, change: Change<'_>, progress: &dyn Progress) -> Result<WriteTimes>;
}

/// Where a commit's time went, in seconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTimes {
    pub lexical_secs: f64,
    pub vector_secs: f64,
    /// Everything else: rows or files written, the switch of generation.
    pub write_secs: f64,
}

/// The passages' part of a [`Change::Replace`], as [`Store::stage`] writes it.
#[derive(Clone, Copy)]
pub struct PassagesPart<'a> {
    /// The base's manifest: which vector index the generation keeps, and its settings.
    pub manifest: &'a Manifest,
    pub passages: &'a Passages,
    pub vectors: &'a Matrix,
    pub kept: &'a [Option<crate::corpus::PassageIdx>],
    /// Where the generation is written as a delta on its base's full generation.
    pub delta: Option<&'a delta::Delta>,
}

/// A generation's files written ahead of its commit ([`Store::stage`]), with that work's
/// times.
pub struct Staged {
    pub(crate) dir: tempfile::TempDir,
    /// Held while the staged generation is unpublished (the folder store's own lock).
    pub(crate) lock: Option<std::fs::File>,
    pub times: WriteTimes,
}

/// What a new generation changes relative to the writer's base.
pub enum Change<'a> {
    /// A whole generation, replacing whatever the store held: a new index, or the one an
    /// edit derived from the base ([`edit`]). Passages in canonical order (by id), with
    /// the entity graph built over them, and its passage seeds' walk where one was solved.
    Replace {
        manifest: &'a Manifest,
        passages: &'a Passages,
        vectors: &'a Matrix,
        graph: Option<&'a EntityGraph>,
        walk: Option<&'a crate::graph::split_ppr::Solved>,
        /// For each passage, the base's passage of the same indexed text, where the change
        /// knows it (an edit): an index kept in parts indexes only the others.
        kept: Option<&'a [Option<crate::corpus::PassageIdx>]>,
        /// The passages' part, already written by [`Store::stage`] from this change's
        /// passages, vectors and `kept`.
        staged: Option<Staged>,
        /// Where the store keeps deltas ([`Store::keeps_deltas`]): the change as a delta
        /// on the full generation the base is (or is a delta on); the generation is then
        /// written as that delta, with no graph or walk of its own (its readers derive
        /// them).
        delta: Option<&'a delta::Delta>,
    },
    /// The base's passages with this entity graph attached, replacing any other.
    /// The graph, with its passage seeds' walk where one was solved.
    Graph { manifest: &'a Manifest, graph: &'a EntityGraph, walk: Option<&'a crate::graph::split_ppr::Solved> },
}

impl<'a> Change<'a> {
    /// A [`Change::Replace`] of passages and their vectors alone, with nothing carried
    /// from the base (a fresh build).
    pub fn passages(manifest: &'a Manifest, passages: &'a Passages, vectors: &'a Matrix) -> Self {
        Change::Replace { manifest, passages, vectors, graph: None, walk: None, kept: None, staged: None, delta: None }
    }

    /// The manifest of the generation the change makes.
    pub fn manifest(&self) -> &Manifest {
        match self {
            Change::Replace { manifest, .. } | Change::Graph { manifest, .. } => manifest,
        }
    }
}

/// The store a `--store` or `--index` value names: a PostgreSQL URL
/// (`postgres://USER@HOST:PORT/DB?schema=NAME`) or a folder; its default namespace.
pub fn open(spec: &str) -> Result<Arc<dyn Store>> {
    open_in(spec, &Namespace::default(), Open::OrCreate)
}

/// Whether opening a namespace may create it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// A namespace the store does not hold is an [`Error::NoNamespace`] (readers, and
    /// requests that must not make namespaces appear). The default namespace always
    /// opens, as a store without an index when it has none.
    Existing,
    /// A namespace the store does not hold is made on the first write (builders).
    OrCreate,
}

/// Namespace `namespace` of the store `spec` names (see [`open`]).
pub fn open_in(spec: &str, namespace: &Namespace, mode: Open) -> Result<Arc<dyn Store>> {
    if is_database(spec) {
        #[cfg(feature = "postgres")]
        return Ok(Arc::new(postgres::PgStore::connect_in(spec, namespace, mode)?));
        #[cfg(not(feature = "postgres"))]
        return Err(no_postgres(spec));
    }
    let root = Path::new(spec);
    let dir = namespace.folder_in(root);
    if mode == Open::Existing && !namespace.is_default() && !dir.join("CURRENT").is_file() {
        return Err(namespace::not_found(&root.display().to_string(), namespace));
    }
    Ok(folder(&dir))
}

/// The namespaces of the store `spec` names that hold an index, the default first when
/// it holds one, the others by name.
pub fn namespaces(spec: &str) -> Result<Vec<Namespace>> {
    if is_database(spec) {
        #[cfg(feature = "postgres")]
        return postgres::PgStore::namespaces(spec);
        #[cfg(not(feature = "postgres"))]
        return Err(no_postgres(spec));
    }
    namespace::in_folder(Path::new(spec))
}

fn is_database(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

#[cfg(not(feature = "postgres"))]
fn no_postgres(spec: &str) -> Error {
    Error::Config(format!("{}: this hoprag was built without PostgreSQL support (feature `postgres`)", redact(spec)))
}

/// The folder store at `path`.
pub fn folder(path: &Path) -> Arc<dyn Store> {
    Arc::new(FolderStore::new(path))
}

/// A URL with its password replaced by `***`, fit for messages and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let Some((userinfo, host)) = rest.split_once('@') else { return url.to_string() };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

fn no_index(location: &str) -> Error {
    Error::index(location, "no index here; build one with `hoprag index`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redact("postgres://u:secret@h:5432/db?schema=s"), "postgres://u:***@h:5432/db?schema=s");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("/tmp/idx"), "/tmp/idx");
    }
}
