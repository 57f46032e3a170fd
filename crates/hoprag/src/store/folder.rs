//! The folder store: an index as files on this machine, the embedded default.
//!
//! Layout of an index folder `DIR`:
//! ```text
//! DIR/CURRENT            name of the live generation, replaced atomically
//! DIR/LOCK               held by a writer (an OS file lock), empty
//! DIR/g000001/           one generation: never modified once CURRENT points at it
//!     manifest.json      format version, embedder, checksum, counts
//!     passages.jsonl     one passage per line, in index order
//!     vectors.f32        n x dim little-endian f32, row i = passage i
//!     lexical/           tantivy BM25 index
//!     hnsw.usearch       HNSW graph (when built), keyed by slot
//!     hnsw.slots         its slot → row table, once an edit updated the graph (none:
//!                        slot = row)
//!     graph/             the entity graph (when attached)
//!     readers.lock       held (shared) by every reader of the generation, empty
//! DIR/g000002/           a delta generation (an edit: [`super::delta`]): its manifest
//!     manifest.json      says so; it holds its own lexical index, and for the rest
//!     lexical/
//!     base/              hard links to a full generation's manifest, passages,
//!                        vectors, HNSW files and graph
//!     delta/             removed.u32 (the base's rows it no longer holds), passages.jsonl
//!                        and vectors.f32 (those it adds)
//!     graph/             its own graph, once one was stored for it (the walk solved
//!                        after an edit); else derived from the base's when read
//! ```
//! A writer fills a hidden temporary folder, renames it into place and then swaps
//! `CURRENT`: an interrupted write never leaves a broken index, and a reader always sees
//! a complete one. Files a new generation shares with the old one (tantivy segments,
//! which tantivy never modifies, and the graph) are hard links. A reader holds a shared
//! lock on its generation's `readers.lock` for as long as its index is open, and a writer
//! removes an old generation only when it can lock that file exclusively: the graph is
//! read on first use, so a generation in use must outlive any number of newer ones.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::delta::Delta;
use super::{Change, LiveParts, PassagesPart, Staged, Store, StoreWriter, StoredGraph, WriteTimes};
use crate::corpus::Passage;
use crate::error::{Error, Result};
use crate::files::{link_tree, write_file};
use crate::graph::EntityGraph;
use crate::index::{
    Derived, HnswIndex, Index, LexicalIndex, Manifest, Matrix, PartedBm25, Passages, Slots, TantivyBm25, VectorIndex,
    VectorIndexKind,
};
use crate::progress::{Progress, Silent};

const CURRENT: &str = "CURRENT";
const LOCK: &str = "LOCK";
const MANIFEST: &str = "manifest.json";
const PASSAGES: &str = "passages.jsonl";
const VECTORS: &str = "vectors.f32";
const LEXICAL: &str = "lexical";
const HNSW: &str = "hnsw.usearch";
const SLOTS: &str = "hnsw.slots";
const GRAPH: &str = "graph";
const READERS: &str = "readers.lock";
/// A delta generation's links to its full generation, and its delta.
const BASE: &str = "base";
const DELTA: &str = "delta";
const REMOVED: &str = "removed.u32";
/// The prefix of a generation staged ahead of its commit ([`Store::stage`]); its
/// `readers.lock` is held exclusively by the stager until it is published or dropped.
const STAGE: &str = ".stage-";

pub struct FolderStore {
    root: PathBuf,
    location: String,
}

impl FolderStore {
    pub fn new(root: &Path) -> FolderStore {
        FolderStore { root: root.to_path_buf(), location: root.display().to_string() }
    }

    fn current(&self) -> Result<Option<PathBuf>> {
        let current = self.root.join(CURRENT);
        let name = match fs::read_to_string(&current) {
            Ok(name) => name,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&current, e)),
        };
        let name = name.trim();
        if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
            return Err(Error::index(&self.root, format!("CURRENT names an invalid generation {name:?}")));
        }
        Ok(Some(self.root.join(name)))
    }

    /// The live generation with a shared lock on it: a writer may publish newer ones
    /// meanwhile, but removes this one only once the lock is gone. A generation removed
    /// between reading `CURRENT` and taking the lock is retried under the newer `CURRENT`.
    fn hold_live(&self) -> Result<(PathBuf, fs::File)> {
        loop {
            let generation = self.live()?;
            let path = generation.join(READERS);
            let file = match fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && self.current()? != Some(generation.clone()) => {
                    continue
                }
                Err(e) => return Err(Error::io(&path, e)),
            };
            file.lock_shared().map_err(|e| Error::io(&path, e))?;
            // A writer that removed the generation held the exclusive lock until it was
            // gone: the shared lock is then on a file no longer in place.
            if generation.join(MANIFEST).is_file() {
                return Ok((generation, file));
            }
        }
    }

    fn read_vectors(&self, path: &Path, dim: usize) -> Result<Matrix> {
        Matrix::open(path, dim)
            .map_err(|e| Error::io(path, e))?
            .ok_or_else(|| Error::index(path, format!("{VECTORS} is not a whole number of vectors of dimension {dim}")))
    }

    /// A delta generation's passages, vectors and HNSW graph: its base's with its delta
    /// applied ([`Delta::apply`]; the HNSW graph updated in memory as an edit updates it).
    #[allow(clippy::type_complexity)]
    fn read_delta(
        &self,
        generation: &Path,
        manifest: &Manifest,
    ) -> Result<(Passages, Matrix, Option<Arc<dyn VectorIndex>>, Derived)> {
        let base = generation.join(BASE);
        let base_manifest: Manifest = read_json(&base.join(MANIFEST))?;
        let dim = manifest.embedder.dim;
        if base_manifest.embedder != manifest.embedder || base_manifest.delta.is_some() {
            return Err(Error::index(&base, "the base of this delta generation is not a full generation of the index"));
        }
        let base_passages = Passages::whole(read_passages(&base.join(PASSAGES))?);
        let base_vectors = Arc::new(self.read_vectors(&base.join(VECTORS), dim)?);
        let dir = generation.join(DELTA);
        let delta = Delta {
            removed: read_rows(&dir.join(REMOVED))?,
            added: read_passages(&dir.join(PASSAGES))?,
            vectors: self.read_vectors(&dir.join(VECTORS), dim)?,
        };
        let location = generation.display().to_string();
        let (passages, vectors, of_base) = delta.apply(&base_passages, base_vectors, &location)?;
        let ann: Option<Arc<dyn VectorIndex>> = match manifest.vector_index {
            VectorIndexKind::Hnsw => Some(Arc::new(hnsw_after(&base, &base_manifest, &vectors, Some(&of_base))?.0)),
            _ => None,
        };
        Ok((passages, vectors, ann, Derived { base_passages, of_base }))
    }

    fn live(&self) -> Result<PathBuf> {
        self.current()?
            .ok_or_else(|| Error::index(&self.root, "no index here (no CURRENT file); build one with `hoprag index`"))
    }
}

impl Store for FolderStore {
    fn location(&self) -> &str {
        &self.location
    }

    fn generation(&self) -> Result<Option<String>> {
        Ok(self.current()?.and_then(|g| g.file_name().map(|n| n.to_string_lossy().into_owned())))
    }

    fn manifest(&self) -> Result<Option<Manifest>> {
        self.current()?.map(|g| read_json(&g.join(MANIFEST))).transpose()
    }

    fn load(&self) -> Result<Index> {
        let (generation, readers) = self.hold_live()?;
        let manifest: Manifest = read_json(&generation.join(MANIFEST))?;
        let id = generation.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let lexical = open_lexical(&generation)?;
        if manifest.delta.is_some() {
            let (passages, vectors, ann, derived) = self.read_delta(&generation, &manifest)?;
            let index = Index::from_parts(&self.location, id, manifest, passages, vectors, lexical, ann)?;
            return Ok(index.derived_from(derived).holding(readers));
        }
        let passages = read_passages(&generation.join(PASSAGES))?;
        let vectors = self.read_vectors(&generation.join(VECTORS), manifest.embedder.dim)?;
        let ann: Option<Arc<dyn VectorIndex>> = match manifest.vector_index {
            VectorIndexKind::Hnsw => Some(Arc::new(load_hnsw(&generation, &manifest, Some(passages.len()))?)),
            _ => None,
        };
        Ok(Index::from_parts(&self.location, id, manifest, passages, vectors, lexical, ann)?.holding(readers))
    }

    fn open_live(&self, generation: &str) -> Result<Option<LiveParts>> {
        let (dir, readers) = self.hold_live()?;
        if dir.file_name().is_none_or(|n| n != generation) {
            return Ok(None);
        }
        let manifest = read_json(&dir.join(MANIFEST))?;
        Ok(Some(LiveParts { manifest, lexical: open_lexical(&dir)?, hold: Box::new(readers) }))
    }

    fn stored_graph(&self, index: &Index) -> Result<Option<StoredGraph>> {
        if index.manifest.graph.is_none() {
            return Ok(None);
        }
        let generation = self.root.join(index.generation());
        let dim = index.manifest.graph_embedder().dim;
        let own = generation.join(GRAPH);
        Ok(Some(match index.derived() {
            // A delta generation whose graph was not stored: derived from its base's.
            Some(_) if !own.is_dir() => StoredGraph::Base(EntityGraph::load(&generation.join(BASE).join(GRAPH), dim)?),
            _ => StoredGraph::Own(EntityGraph::load(&own, dim)?),
        }))
    }

    fn keeps_deltas(&self) -> bool {
        true
    }

    fn writer(&self) -> Result<Box<dyn StoreWriter + '_>> {
        fs::create_dir_all(&self.root).map_err(|e| Error::io(&self.root, e))?;
        let path = self.root.join(LOCK);
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        lock.lock().map_err(|e| Error::io(&path, e))?;
        // A writer killed mid-write leaves its temporary folder: only the lock's holder
        // writes one, so any left now is such a remnant.
        // A staged generation is written without the lock: it is a remnant only when
        // nobody holds its `readers.lock` (one without it yet is being created).
        for entry in fs::read_dir(&self.root).map_err(|e| Error::io(&self.root, e))?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let remnant = name.starts_with(".tmp-")
                || (name.starts_with(STAGE)
                    && entry.path().join(READERS).is_file()
                    && matches!(unused(&entry.path()), Ok(Some(_))));
            if remnant {
                if let Err(e) = fs::remove_dir_all(entry.path()) {
                    log::warn!("could not remove {}: {e}", entry.path().display());
                }
            }
        }
        let base = match self.current()? {
            Some(g) => Some((read_json(&g.join(MANIFEST))?, g)),
            None => None,
        };
        Ok(Box::new(FolderWriter { store: self, base, _lock: lock }))
    }

    fn stage(&self, base_index: &Index, part: PassagesPart<'_>) -> Result<Option<Staged>> {
        let base = self.root.join(base_index.generation());
        if base.file_name().is_none_or(|n| n.to_string_lossy().starts_with('.')) || !base.join(MANIFEST).is_file() {
            // Not a generation of this folder: written at the commit, from the writer's base.
            return Ok(None);
        }
        let tmp =
            tempfile::Builder::new().prefix(STAGE).tempdir_in(&self.root).map_err(|e| Error::io(&self.root, e))?;
        let path = tmp.path().join(READERS);
        let lock = fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
        lock.lock().map_err(|e| Error::io(&path, e))?;
        let mut times = WriteTimes::default();
        let PassagesPart { manifest, passages, vectors, kept, delta } = part;
        // A whole generation written from a delta one updates the HNSW graph of the
        // delta's full generation.
        let full = base.join(BASE);
        let composed: Option<Vec<Option<crate::corpus::PassageIdx>>> = match (base_index.derived(), delta) {
            (Some(derived), None) => Some(kept.iter().map(|k| k.and_then(|j| derived.of_base[j as usize])).collect()),
            _ => None,
        };
        let hnsw_from = composed.as_deref().map(|rows| (full.as_path(), rows));
        let written = Written { passages, vectors, kept: Some(kept), delta, hnsw_from };
        write_passages_part(tmp.path(), Some(&base), manifest, &written, &Silent, &mut times)?;
        Ok(Some(Staged { dir: tmp, lock: Some(lock), times }))
    }

    fn size_bytes(&self) -> Result<u64> {
        Ok(dir_size(&self.live()?))
    }

    fn folder(&self) -> Option<&Path> {
        Some(&self.root)
    }
}

struct FolderWriter<'a> {
    store: &'a FolderStore,
    base: Option<(Manifest, PathBuf)>,
    /// Unlocked when closed, on drop or when the process dies.
    _lock: fs::File,
}

impl StoreWriter for FolderWriter<'_> {
    fn base(&self) -> Option<&Manifest> {
        self.base.as_ref().map(|(m, _)| m)
    }

    fn commit(self: Box<Self>, change: Change<'_>, progress: &dyn Progress) -> Result<WriteTimes> {
        let root = &self.store.root;
        let mut times = WriteTimes::default();
        let base = self.base.as_ref().map(|(_, g)| g.as_path());
        let base_dir = || base.ok_or_else(|| super::no_index(&self.store.location));
        let manifest = change.manifest().clone();
        let mut staged_lock = None;
        let tmp = match change {
            Change::Replace { staged: Some(staged), graph, walk, delta, .. } => {
                // The passages' part is written: the graph's files join it (a delta
                // generation's readers derive its graph).
                let Staged { dir: tmp, lock, times: staged_times } = staged;
                times = staged_times;
                staged_lock = lock;
                if delta.is_none() {
                    timed(&mut times.write_secs, || write_graph_part(tmp.path(), base, graph, walk))?;
                }
                tmp
            }
            Change::Replace { manifest, passages, vectors, graph, walk, kept, staged: None, delta } => {
                let tmp = temporary(root)?;
                let dir = tmp.path();
                let graph = graph.filter(|_| delta.is_none());
                std::thread::scope(|scope| {
                    // The graph's files (hundreds of MB of vectors) are written while the
                    // lexical index is built: one is mostly copying, the other computing.
                    let graph_files =
                        graph.map(|graph| scope.spawn(move || write_graph_part(dir, base, Some(graph), walk)));
                    let written = Written { passages, vectors, kept, delta, hnsw_from: None };
                    write_passages_part(dir, base, manifest, &written, progress, &mut times)?;
                    timed(&mut times.write_secs, || match graph_files.map(|h| h.join()) {
                        Some(Ok(written)) => written,
                        Some(Err(_)) => Err(Error::Other("writing the graph's files panicked".into())),
                        None => Ok(()),
                    })
                })?;
                tmp
            }
            Change::Graph { graph, walk, .. } => {
                let tmp = temporary(root)?;
                let dir = tmp.path();
                let old = base_dir()?;
                timed(&mut times.write_secs, || {
                    for entry in fs::read_dir(old).map_err(|e| Error::io(old, e))? {
                        let name = entry.map_err(|e| Error::io(old, e))?.file_name();
                        // Each generation has readers of its own.
                        if name == GRAPH || name == MANIFEST || name == READERS {
                            continue;
                        }
                        let (src, dst) = (old.join(&name), dir.join(&name));
                        if src.is_dir() {
                            link_tree(&src, &dst)?;
                        } else if fs::hard_link(&src, &dst).is_err() {
                            fs::copy(&src, &dst).map_err(|e| Error::io(&dst, e))?;
                        }
                    }
                    graph.save(&dir.join(GRAPH))?;
                    walk.map_or(Ok(()), |w| EntityGraph::save_walk(&dir.join(GRAPH), w))
                })?;
                tmp
            }
        };
        timed(&mut times.write_secs, || {
            write_json(&tmp.path().join(MANIFEST), &manifest)?;
            publish(root, tmp)
        })?;
        // Readers of the new generation waited on its lock only until now.
        drop(staged_lock);
        Ok(times)
    }
}

fn temporary(root: &Path) -> Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix(".tmp-").tempdir_in(root).map_err(|e| Error::io(root, e))
}

/// What a generation's passages' part is written from.
struct Written<'a> {
    passages: &'a Passages,
    vectors: &'a Matrix,
    /// For each passage, the base's passage of the same indexed text, where known (an edit).
    kept: Option<&'a [Option<crate::corpus::PassageIdx>]>,
    /// Written as this delta on the base's full generation.
    delta: Option<&'a Delta>,
    /// The generation whose HNSW graph is updated, and `kept` as its rows, where that is
    /// not the base (a delta generation's is its full generation's).
    hnsw_from: Option<(&'a Path, &'a [Option<crate::corpus::PassageIdx>])>,
}

/// Writes the passages' part of a generation into `dir`: the lexical index (an edit's
/// indexes only the passages it brings, linking its base's parts), then either the delta
/// with links to its full generation, or the approximate vector index where the manifest
/// keeps one, the passages and their vectors.
fn write_passages_part(
    dir: &Path,
    base: Option<&Path>,
    manifest: &Manifest,
    written: &Written<'_>,
    progress: &dyn Progress,
    times: &mut WriteTimes,
) -> Result<()> {
    let Written { passages, vectors, kept, delta, hnsw_from } = *written;
    timed(&mut times.lexical_secs, || {
        let base = base.map(|b| b.join(LEXICAL)).filter(|b| PartedBm25::is_in(b));
        let advance = |n: usize| progress.advance(n as u64);
        let r = match (base, kept) {
            (Some(base), Some(kept)) => {
                progress.start("lexical index", 0);
                let text = |i: usize| std::borrow::Cow::Owned(passages[i].index_text());
                PartedBm25::create_after(&dir.join(LEXICAL), &base, &text, kept, &advance)
            }
            _ => {
                let texts: Vec<String> = passages.iter().map(Passage::index_text).collect();
                progress.start("lexical index", texts.len() as u64);
                PartedBm25::create(&dir.join(LEXICAL), &texts, &advance)
            }
        };
        progress.finish();
        r
    })?;
    if let Some(delta) = delta {
        let base = base.ok_or_else(|| Error::index(dir, "a delta generation needs a base"))?;
        return timed(&mut times.write_secs, || write_delta(dir, base, delta));
    }
    if manifest.vector_index == VectorIndexKind::Hnsw {
        timed(&mut times.vector_secs, || {
            progress.start("hnsw graph", 0);
            let r = match hnsw_from {
                Some((from, kept)) => write_hnsw(dir, Some(from), manifest, vectors, Some(kept)),
                None => write_hnsw(dir, base, manifest, vectors, kept),
            };
            progress.finish();
            r
        })?;
    }
    timed(&mut times.write_secs, || {
        write_passages(&dir.join(PASSAGES), passages)?;
        write_file(&dir.join(VECTORS), &vectors.to_le_bytes(), false)
    })
}

/// Writes `delta` into `dir` with links to the full generation of `base` (the base
/// itself, or the one a delta generation links).
fn write_delta(dir: &Path, base: &Path, delta: &Delta) -> Result<()> {
    let full = base.join(BASE);
    if full.is_dir() {
        link_tree(&full, &dir.join(BASE))?;
    } else {
        let to = dir.join(BASE);
        fs::create_dir_all(&to).map_err(|e| Error::io(&to, e))?;
        for name in [MANIFEST, PASSAGES, VECTORS, HNSW, SLOTS, GRAPH] {
            let (src, dst) = (base.join(name), to.join(name));
            if src.is_dir() {
                link_tree(&src, &dst)?;
            } else if src.is_file() && fs::hard_link(&src, &dst).is_err() {
                fs::copy(&src, &dst).map_err(|e| Error::io(&dst, e))?;
            }
        }
    }
    let to = dir.join(DELTA);
    fs::create_dir_all(&to).map_err(|e| Error::io(&to, e))?;
    let removed: Vec<u8> = delta.removed.iter().flat_map(|r| r.to_le_bytes()).collect();
    write_file(&to.join(REMOVED), &removed, false)?;
    write_passages(&to.join(PASSAGES), &delta.added)?;
    write_file(&to.join(VECTORS), &delta.vectors.to_le_bytes(), false)
}

fn read_rows(path: &Path) -> Result<Vec<crate::corpus::PassageIdx>> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    if bytes.len() % 4 != 0 {
        return Err(Error::index(path, format!("{} bytes is not a list of rows", bytes.len())));
    }
    Ok(bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
}

/// Writes the HNSW graph of `vectors` into `dir`: an edit's is its base's graph updated
/// ([`HnswIndex::after_edit`]), read into memory (the base's files stay as they are).
fn write_hnsw(
    dir: &Path,
    base: Option<&Path>,
    manifest: &Manifest,
    vectors: &Matrix,
    kept: Option<&[Option<crate::corpus::PassageIdx>]>,
) -> Result<()> {
    let t = Instant::now();
    let (graph, update) = match base {
        Some(base) if base.join(HNSW).is_file() => hnsw_after(base, manifest, vectors, kept)?,
        _ => (HnswIndex::build(vectors, manifest.hnsw)?, None),
    };
    graph.save(&dir.join(HNSW))?;
    if let Some(bytes) = graph.slots_bytes() {
        write_file(&dir.join(SLOTS), &bytes, false)?;
    }
    if let Some(u) = update {
        let how = if u.rebuilt { "rebuilt" } else { "updated" };
        let secs = t.elapsed().as_secs_f64();
        log::info!("hnsw: {how} and written in {secs:.2}s ({} removed, {} inserted)", u.removed, u.inserted);
    }
    Ok(())
}

/// The HNSW graph of `vectors`: the one of generation `base` (a folder holding its HNSW
/// files) updated for the rows `kept` maps to it, or built where `kept` is unknown.
/// A generation's lexical index: kept in parts, or (indexes written before BM25 was) one
/// tantivy index.
fn open_lexical(generation: &Path) -> Result<Arc<dyn LexicalIndex>> {
    let dir = generation.join(LEXICAL);
    Ok(if PartedBm25::is_in(&dir) { Arc::new(PartedBm25::open(&dir)?) } else { Arc::new(TantivyBm25::open(&dir)?) })
}

fn hnsw_after(
    base: &Path,
    manifest: &Manifest,
    vectors: &Matrix,
    kept: Option<&[Option<crate::corpus::PassageIdx>]>,
) -> Result<(HnswIndex, Option<crate::index::HnswUpdate>)> {
    match kept {
        Some(kept) if base.join(HNSW).is_file() => {
            let (graph, update) = load_hnsw(base, manifest, None)?.after_edit(vectors, kept)?;
            Ok((graph, Some(update)))
        }
        _ => Ok((HnswIndex::build(vectors, manifest.hnsw)?, None)),
    }
}

/// A generation's HNSW graph with its slot table, where it has one (a graph built from
/// scratch, or written before slots existed, has slot = row), checked against the
/// generation's `passages` where known.
fn load_hnsw(generation: &Path, manifest: &Manifest, passages: Option<usize>) -> Result<HnswIndex> {
    let graph = HnswIndex::load(&generation.join(HNSW), manifest.embedder.dim, manifest.hnsw)?;
    let path = generation.join(SLOTS);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(graph),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let passages = passages.unwrap_or(graph.len());
    let slots = Slots::from_bytes(&bytes, passages).map_err(|m| Error::index(&path, m))?;
    graph.with_slots(slots).map_err(|m| Error::index(&path, m))
}

/// Writes the graph's files into `dir`: an edit's graph extends its base's vector files.
fn write_graph_part(
    dir: &Path,
    base: Option<&Path>,
    graph: Option<&EntityGraph>,
    walk: Option<&crate::graph::split_ppr::Solved>,
) -> Result<()> {
    let Some(graph) = graph else { return Ok(()) };
    let graph_dir = dir.join(GRAPH);
    match base.map(|b| b.join(GRAPH)).filter(|b| b.is_dir()) {
        Some(b) => graph.save_after(&graph_dir, &b)?,
        None => graph.save(&graph_dir)?,
    }
    walk.map_or(Ok(()), |w| EntityGraph::save_walk(&graph_dir, w))
}

fn timed<T>(acc: &mut f64, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    *acc += t.elapsed().as_secs_f64();
    r
}

fn generation_number(name: &str) -> Option<u64> {
    name.strip_prefix('g').and_then(|n| n.parse().ok())
}

/// Moves a finished temporary generation into place, points CURRENT at it and removes
/// generations older than the previous one that no reader holds (the previous one is
/// kept for readers about to open it; one in use goes at a later write).
fn publish(root: &Path, tmp: tempfile::TempDir) -> Result<()> {
    let mut numbers: Vec<u64> = fs::read_dir(root)
        .map_err(|e| Error::io(root, e))?
        .filter_map(|e| e.ok()?.file_name().to_str().and_then(generation_number))
        .collect();
    numbers.sort_unstable();
    let next = numbers.last().map_or(1, |n| n + 1);
    let name = format!("g{next:06}");
    let dest = root.join(&name);
    let tmp_path = tmp.keep();
    fs::rename(&tmp_path, &dest).map_err(|e| Error::io(&dest, e))?;
    write_file(&root.join(CURRENT), format!("{name}\n").as_bytes(), true)?;
    let keep_from = numbers.last().copied().unwrap_or(0);
    for n in numbers.into_iter().filter(|&n| n < keep_from) {
        let old = root.join(format!("g{n:06}"));
        match unused(&old) {
            Ok(Some(_exclusive)) => {
                if let Err(e) = fs::remove_dir_all(&old) {
                    log::warn!("could not remove old generation {}: {e}", old.display());
                }
            }
            Ok(None) => log::debug!("kept old generation {}: a reader has it open", old.display()),
            Err(e) => log::warn!("could not check old generation {}: {e}", old.display()),
        }
    }
    Ok(())
}

/// An exclusive lock on the generation's readers file, held while it is removed; None
/// when a reader holds it.
fn unused(generation: &Path) -> std::io::Result<Option<fs::File>> {
    let file = fs::OpenOptions::new().create(true).truncate(false).write(true).open(generation.join(READERS))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Other(e.to_string()))?;
    write_file(path, &bytes, false)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::input(path, format!("invalid: {e}")))
}

fn write_passages<'a>(path: &Path, passages: impl IntoIterator<Item = &'a Passage>) -> Result<()> {
    let file = fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut w = std::io::BufWriter::new(file);
    for p in passages {
        serde_json::to_writer(&mut w, p).map_err(|e| Error::Other(e.to_string()))?;
        w.write_all(b"\n").map_err(|e| Error::io(path, e))?;
    }
    w.into_inner().map_err(|e| Error::io(path, e.into_error()))?.sync_all().map_err(|e| Error::io(path, e))
}

fn read_passages(path: &Path) -> Result<Vec<Passage>> {
    let file = fs::File::open(path).map_err(|e| Error::io(path, e))?;
    BufReader::new(file)
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let line = line.map_err(|e| Error::io(path, e))?;
            serde_json::from_str(&line).map_err(|e| Error::input(path, format!("line {}: {e}", i + 1)))
        })
        .collect()
}

pub fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(path) else { return 0 };
    entries
        .filter_map(Result::ok)
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                dir_size(&p)
            } else {
                e.metadata().map(|m| m.len()).unwrap_or(0)
            }
        })
        .sum()
}
