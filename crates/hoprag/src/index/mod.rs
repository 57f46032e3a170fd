//! The on-disk index: everything needed to answer queries without re-embedding.
//!
//! Layout of an index directory `DIR`:
//! ```text
//! DIR/CURRENT            name of the live generation, replaced atomically
//! DIR/g000001/           one generation: never modified once CURRENT points at it
//!     manifest.json      format version, embedder, checksum, counts
//!     passages.jsonl     one passage per line, in index order
//!     vectors.f32        n x dim little-endian f32, row i = passage i
//!     lexical/           tantivy BM25 index
//!     hnsw.usearch       HNSW graph (when built)
//! ```
//! Builds and additions write a new generation in a hidden temporary folder, rename it
//! into place and then swap `CURRENT`, so an interrupted write never leaves a broken
//! index and a reader always sees a complete one.

mod lexical;
mod manifest;
pub mod vector;

pub use lexical::{LexicalIndex, TantivyBm25};
pub use manifest::{Counts, EmbedderInfo, GraphInfo, GraphStats, Manifest, FORMAT_VERSION};
pub use vector::{ExactIndex, Extremes, HnswIndex, HnswParams, Matrix, Screen, VectorIndex, VectorIndexKind};

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::corpus::{Dedup, LoadedCorpus, Passage};
use crate::embed::{embed_all, Embedder, TextKind};
use crate::error::{Error, Result};
use crate::progress::Progress;

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

impl SearchKind {
    /// The name of the method that searches passages this way.
    pub fn method(self) -> &'static str {
        match self {
            SearchKind::Bm25 => "bm25",
            SearchKind::Dense => "dense",
            SearchKind::Hybrid => "hybrid",
        }
    }
}

const CURRENT: &str = "CURRENT";
const MANIFEST: &str = "manifest.json";
const PASSAGES: &str = "passages.jsonl";
const VECTORS: &str = "vectors.f32";
const LEXICAL: &str = "lexical";
const HNSW: &str = "hnsw.usearch";
const GRAPH: &str = "graph";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildOptions {
    pub vector_index: VectorIndexKind,
    pub hnsw: HnswParams,
    /// Passages per embedder call.
    pub embed_batch: usize,
    /// Replace an existing index at the output path.
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
    pub lexical_secs: f64,
    pub vector_secs: f64,
    /// Passages, vectors and manifest written, generation swapped.
    pub write_secs: f64,
    pub total_secs: f64,
    pub bytes_on_disk: u64,
}

/// An opened index: passages, vectors, the lexical index and the vector index.
pub struct Index {
    root: PathBuf,
    generation: PathBuf,
    pub manifest: Manifest,
    passages: Vec<Passage>,
    vectors: Arc<Matrix>,
    lexical: TantivyBm25,
    vector: Arc<dyn VectorIndex>,
}

impl Index {
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn generation_dir(&self) -> &Path {
        &self.generation
    }

    pub fn passages(&self) -> &[Passage] {
        &self.passages
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

    pub fn lexical(&self) -> &dyn LexicalIndex {
        &self.lexical
    }

    /// The vector index the manifest chose (exact or HNSW).
    pub fn vector_index(&self) -> Arc<dyn VectorIndex> {
        self.vector.clone()
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
                &self.root,
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

    /// Opens the live generation of the index at `root`.
    pub fn open(root: &Path) -> Result<Index> {
        let generation = current_generation(root)?;
        let manifest: Manifest = read_json(&generation.join(MANIFEST))?;
        if manifest.format_version != FORMAT_VERSION {
            return Err(Error::index(
                root,
                format!(
                    "index format version {} is not supported by this hoprag (expects {FORMAT_VERSION}); rebuild it",
                    manifest.format_version
                ),
            ));
        }
        let passages = read_passages(&generation.join(PASSAGES))?;
        let vpath = generation.join(VECTORS);
        let bytes = fs::read(&vpath).map_err(|e| Error::io(&vpath, e))?;
        let dim = manifest.embedder.dim;
        let vectors = Matrix::from_le_bytes(dim, &bytes).filter(|m| m.rows() == passages.len()).ok_or_else(|| {
            Error::index(root, format!("{VECTORS} does not hold {} vectors of dimension {dim}", passages.len()))
        })?;
        let vectors = Arc::new(vectors);
        let lexical = TantivyBm25::open(&generation.join(LEXICAL))?;
        if lexical.len() != passages.len() {
            return Err(Error::index(root, "lexical index and passages disagree in size"));
        }
        let vector: Arc<dyn VectorIndex> = match manifest.vector_index {
            VectorIndexKind::Hnsw => Arc::new(HnswIndex::load(&generation.join(HNSW), dim, manifest.hnsw)?),
            _ => Arc::new(ExactIndex::new(vectors.clone())),
        };
        Ok(Index { root: root.to_path_buf(), generation, manifest, passages, vectors, lexical, vector })
    }

    /// Builds a new index at `root` from a loaded corpus.
    pub fn build(
        root: &Path,
        corpus: &LoadedCorpus,
        sources: Vec<String>,
        embedder: &dyn Embedder,
        options: &BuildOptions,
        progress: &dyn Progress,
    ) -> Result<BuildStats> {
        if current_generation(root).is_ok() && !options.overwrite {
            return Err(Error::index(
                root,
                "an index already exists here; pass --force to replace it or use `hoprag add`",
            ));
        }
        if corpus.passages.is_empty() {
            return Err(Error::index(root, "the corpus has no usable passages; nothing to index"));
        }
        fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        let started = Instant::now();
        let mut stats = BuildStats::default();
        let tmp = tempfile::Builder::new().prefix(".tmp-").tempdir_in(root).map_err(|e| Error::io(root, e))?;
        let dir = &tmp.path().to_path_buf();

        let texts: Vec<String> = corpus.passages.iter().map(Passage::index_text).collect();
        let vectors = timed(&mut stats.embed_secs, || {
            embed_passages(embedder, &texts, options.embed_batch, "embedding passages", progress)
        })?;
        let vectors = Matrix::from_flat(embedder.dim(), vectors);

        timed(&mut stats.lexical_secs, || {
            progress.start("lexical index", texts.len() as u64);
            let r = TantivyBm25::create(&dir.join(LEXICAL), &texts, &|n| progress.advance(n as u64));
            progress.finish();
            r
        })?;

        let kind = options.vector_index.resolve(vectors.rows());
        if kind == VectorIndexKind::Hnsw {
            timed(&mut stats.vector_secs, || {
                progress.start("hnsw graph", 0);
                let r = HnswIndex::build(&vectors, options.hnsw)?.save(&dir.join(HNSW));
                progress.finish();
                r
            })?;
        }

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
            vector_index: kind,
            hnsw: options.hnsw,
            sources,
            graph: None,
            created_at: now,
            updated_at: now,
        };
        timed(&mut stats.write_secs, || {
            write_passages(&dir.join(PASSAGES), &corpus.passages, false)?;
            write_file(&dir.join(VECTORS), &vectors.to_le_bytes(), false)?;
            write_json(&dir.join(MANIFEST), &manifest)?;
            publish(root, tmp)
        })?;
        stats.passages_added = corpus.passages.len();
        stats.passages_total = corpus.passages.len();
        stats.total_secs = started.elapsed().as_secs_f64();
        stats.bytes_on_disk = dir_size(&current_generation(root)?);
        Ok(stats)
    }

    /// Adds passages to the index at `root` without re-embedding what is there: a new
    /// generation shares the unchanged lexical segments (hard links) and extends the
    /// passages, vectors and HNSW graph. Passages already present are skipped and
    /// reported in `corpus.report`.
    pub fn add(
        root: &Path,
        new: &mut LoadedCorpus,
        source: String,
        embedder: &dyn Embedder,
        progress: &dyn Progress,
    ) -> Result<BuildStats> {
        let started = Instant::now();
        let old = Index::open(root)?;
        old.check_embedder(embedder)?;
        // Drop passages the index already has (same content) or rename clashing ids.
        let mut seen = Dedup::with_existing(&old.passages);
        let incoming = std::mem::take(&mut new.passages);
        let mut kept = LoadedCorpus::default();
        for (i, p) in incoming.into_iter().enumerate() {
            kept.push(&mut seen, p, format!("{source} passage {i}"));
        }
        new.passages = kept.passages;
        new.report.merge(kept.report);
        let mut stats = BuildStats { passages_added: new.passages.len(), ..Default::default() };
        if new.passages.is_empty() {
            stats.passages_total = old.len();
            stats.total_secs = started.elapsed().as_secs_f64();
            return Ok(stats);
        }

        let tmp = tempfile::Builder::new().prefix(".tmp-").tempdir_in(root).map_err(|e| Error::io(root, e))?;
        let dir = &tmp.path().to_path_buf();
        let first = old.len() as crate::PassageIdx;
        let texts: Vec<String> = new.passages.iter().map(Passage::index_text).collect();
        let added =
            timed(&mut stats.embed_secs, || embed_passages(embedder, &texts, 256, "embedding passages", progress))?;

        timed(&mut stats.lexical_secs, || {
            link_tree(&old.generation.join(LEXICAL), &dir.join(LEXICAL))?;
            progress.start("lexical index", texts.len() as u64);
            let r = TantivyBm25::add(&dir.join(LEXICAL), first, &texts, &|n| progress.advance(n as u64));
            progress.finish();
            r
        })?;

        let mut vectors = (*old.vectors).clone();
        for v in added.chunks_exact(vectors.dim()) {
            vectors.push(v);
        }
        if old.manifest.vector_index == VectorIndexKind::Hnsw {
            timed(&mut stats.vector_secs, || {
                let h = HnswIndex::load(&old.generation.join(HNSW), vectors.dim(), old.manifest.hnsw)?;
                h.add(&vectors, first)?;
                h.save(&dir.join(HNSW))
            })?;
        }

        if old.manifest.graph.is_some() {
            // The graph still describes the old passages; the new ones join it when it
            // is rebuilt (`hoprag graph`).
            link_tree(&old.generation.join(GRAPH), &dir.join(GRAPH))?;
        }
        let mut all = old.passages.clone();
        all.extend(new.passages.iter().cloned());
        let mut manifest = old.manifest.clone();
        manifest.corpus_checksum = checksum(&all);
        manifest.counts.passages = all.len();
        manifest.counts.skipped += new.report.skipped.len();
        manifest.counts.duplicates += new.report.duplicates.len();
        manifest.sources.push(source);
        manifest.updated_at = unix_now();
        timed(&mut stats.write_secs, || {
            fs::copy(old.generation.join(PASSAGES), dir.join(PASSAGES)).map_err(|e| Error::io(dir, e))?;
            write_passages(&dir.join(PASSAGES), &new.passages, true)?;
            write_file(&dir.join(VECTORS), &vectors.to_le_bytes(), false)?;
            write_json(&dir.join(MANIFEST), &manifest)?;
            publish(root, tmp)
        })?;
        stats.passages_total = all.len();
        stats.total_secs = started.elapsed().as_secs_f64();
        stats.bytes_on_disk = dir_size(&current_generation(root)?);
        Ok(stats)
    }
}

impl Index {
    /// The folder of the entity graph stored with this generation, if one is attached
    /// (read by [`crate::graph::EntityGraph::of_index`]).
    pub fn graph_dir(&self) -> Option<PathBuf> {
        self.manifest.graph.as_ref().map(|_| self.generation.join(GRAPH))
    }

    /// Publishes a new generation whose graph folder is written by `save` and recorded as
    /// `source` with `stats`: every other file is shared with the current generation (hard
    /// links), and the switch is atomic.
    pub fn publish_graph(
        root: &Path,
        source: String,
        stats: GraphStats,
        save: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<()> {
        let old = Index::open(root)?;
        let tmp = tempfile::Builder::new().prefix(".tmp-").tempdir_in(root).map_err(|e| Error::io(root, e))?;
        let dir = tmp.path().to_path_buf();
        for entry in fs::read_dir(&old.generation).map_err(|e| Error::io(&old.generation, e))? {
            let name = entry.map_err(|e| Error::io(&old.generation, e))?.file_name();
            if name == GRAPH || name == MANIFEST {
                continue;
            }
            let (src, dst) = (old.generation.join(&name), dir.join(&name));
            if src.is_dir() {
                link_tree(&src, &dst)?;
            } else if fs::hard_link(&src, &dst).is_err() {
                fs::copy(&src, &dst).map_err(|e| Error::io(&dst, e))?;
            }
        }
        save(&dir.join(GRAPH))?;
        let mut manifest = old.manifest.clone();
        manifest.graph = Some(GraphInfo { source, passages: old.len(), stats });
        manifest.updated_at = unix_now();
        write_json(&dir.join(MANIFEST), &manifest)?;
        publish(root, tmp)
    }
}

fn timed<T>(acc: &mut f64, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    *acc += t.elapsed().as_secs_f64();
    r
}

/// Embeds texts as passages into one flat row-major buffer, checking every vector's
/// dimension; shared by index builds and graph builds.
pub(crate) fn embed_passages(
    embedder: &dyn Embedder,
    texts: &[String],
    batch: usize,
    step: &str,
    progress: &dyn Progress,
) -> Result<Vec<f32>> {
    progress.start(step, texts.len() as u64);
    let vectors = embed_all(embedder, texts, TextKind::Passage, batch, &|n| progress.advance(n as u64));
    progress.finish();
    let vectors = vectors?;
    let dim = embedder.dim();
    if let Some((i, v)) = vectors.iter().enumerate().find(|(_, v)| v.len() != dim) {
        return Err(Error::Embedding(format!("vector {i} has {} dimensions, expected {dim}", v.len())));
    }
    Ok(vectors.into_iter().flatten().collect())
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs()
}

/// SHA-256 over id, title and text of every passage, in order.
pub fn checksum(passages: &[Passage]) -> String {
    let mut h = Sha256::new();
    for p in passages {
        for field in [&p.id, &p.title, &p.text] {
            h.update((field.len() as u64).to_le_bytes());
            h.update(field.as_bytes());
        }
    }
    hex::encode(h.finalize())
}

fn current_generation(root: &Path) -> Result<PathBuf> {
    let current = root.join(CURRENT);
    let name = fs::read_to_string(&current).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::index(root, "no index here (no CURRENT file); build one with `hoprag index`")
        } else {
            Error::io(&current, e)
        }
    })?;
    let name = name.trim();
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(Error::index(root, format!("CURRENT names an invalid generation {name:?}")));
    }
    Ok(root.join(name))
}

fn generation_number(name: &str) -> Option<u64> {
    name.strip_prefix('g').and_then(|n| n.parse().ok())
}

/// Moves a finished temporary generation into place, points CURRENT at it and removes
/// generations older than the previous one (the previous one is kept for readers that
/// opened it a moment ago).
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
        if let Err(e) = fs::remove_dir_all(&old) {
            log::warn!("could not remove old generation {}: {e}", old.display());
        }
    }
    Ok(())
}

/// Writes a file; `atomic` writes a sibling temporary and renames it over the target.
fn write_file(path: &Path, bytes: &[u8], atomic: bool) -> Result<()> {
    let target = if atomic { path.with_extension("tmp") } else { path.to_path_buf() };
    let mut f = fs::File::create(&target).map_err(|e| Error::io(&target, e))?;
    f.write_all(bytes).map_err(|e| Error::io(&target, e))?;
    f.sync_all().map_err(|e| Error::io(&target, e))?;
    if atomic {
        fs::rename(&target, path).map_err(|e| Error::io(path, e))?;
    }
    Ok(())
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Other(e.to_string()))?;
    write_file(path, &bytes, false)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::input(path, format!("invalid: {e}")))
}

fn write_passages(path: &Path, passages: &[Passage], append: bool) -> Result<()> {
    let file = fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
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

/// Recreates a folder tree with hard links to the files (copies where linking fails);
/// tantivy never modifies a segment file, so sharing them is safe.
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
    for entry in fs::read_dir(from).map_err(|e| Error::io(from, e))? {
        let entry = entry.map_err(|e| Error::io(from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            link_tree(&src, &dst)?;
        } else if entry.file_name().to_string_lossy().ends_with(".lock") {
            continue;
        } else if fs::hard_link(&src, &dst).is_err() {
            fs::copy(&src, &dst).map_err(|e| Error::io(&dst, e))?;
        }
    }
    Ok(())
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
