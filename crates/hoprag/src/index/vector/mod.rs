//! Vector retrieval: the [`VectorIndex`] seam, the contiguous vector matrix, exact search
//! and HNSW.

mod exact;
mod hnsw;
mod screen;
mod slots;

pub use exact::ExactIndex;
pub use hnsw::{breadth_for as hnsw_breadth, HnswIndex, HnswParams, HnswUpdate, Quantization, REBUILD_AFTER};
pub use screen::{Extremes, Screen, Screened};
pub use slots::Slots;

use serde::{Deserialize, Serialize};

use super::layers::{Pieces, Source};
use crate::corpus::PassageIdx;
use crate::error::Result;

/// Nearest neighbours by inner product (cosine, as vectors are unit length).
pub trait VectorIndex: Send + Sync {
    /// The `k` passages most similar to `query`, best first, with cosine scores.
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(PassageIdx, f32)>>;
    /// Several searches, one list per query, each as [`search`](VectorIndex::search)
    /// returns it. Exact search reads the matrix once for all of them (BridgeRAG's five
    /// expansion searches), other indexes search one by one.
    fn search_many(&self, queries: &[&[f32]], k: usize) -> Result<Vec<Vec<(PassageIdx, f32)>>> {
        queries.iter().map(|q| self.search(q, k)).collect()
    }
    /// [`search`](VectorIndex::search) with a given search breadth (an HNSW graph's ef:
    /// candidates kept while searching); exact indexes ignore it.
    fn search_with_breadth(&self, query: &[f32], k: usize, breadth: usize) -> Result<Vec<(PassageIdx, f32)>> {
        let _ = breadth;
        self.search(query, k)
    }
    /// The breadth [`search`](VectorIndex::search) uses for `k` results (`k` for exact
    /// indexes).
    fn search_breadth(&self, k: usize) -> usize {
        k
    }
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `exact` or `hnsw`, for traces and reports.
    fn kind(&self) -> VectorIndexKind;
    /// Whether the scores are approximate (a quantized copy of the vectors): such an
    /// index is searched through [`Rescored`], which scores its candidates exactly.
    fn approximate_scores(&self) -> bool {
        false
    }
    /// A copy of this index brought up to date for an edit, in memory: `vectors` are the
    /// new passages', `kept` each one's row here (`None`: new to the index). This index is
    /// left as it was (queries may still read it). `None` for an index that is not held
    /// in memory: the store builds the new one where the edit's generation is read.
    fn edited(&self, vectors: &Matrix, kept: &[Option<PassageIdx>]) -> Option<Result<std::sync::Arc<dyn VectorIndex>>> {
        let _ = (vectors, kept);
        None
    }
}

/// An approximate index whose candidates are re-scored on the f32 vectors: the search
/// keeps `breadth` candidates anyway, so asking for all of them and ranking them by their
/// exact inner product costs `breadth` dot products (0.1 ms at 600 x 384) and gives exact
/// scores, in the order exact search would give them among the candidates.
pub struct Rescored {
    inner: std::sync::Arc<dyn VectorIndex>,
    vectors: std::sync::Arc<Matrix>,
}

impl Rescored {
    /// `inner` as it is when its scores are exact, else re-scored on `vectors`.
    pub fn wrap(
        inner: std::sync::Arc<dyn VectorIndex>,
        vectors: std::sync::Arc<Matrix>,
    ) -> std::sync::Arc<dyn VectorIndex> {
        if inner.approximate_scores() {
            std::sync::Arc::new(Rescored { inner, vectors })
        } else {
            inner
        }
    }
}

impl VectorIndex for Rescored {
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        let breadth = self.inner.search_breadth(k);
        self.search_with_breadth(query, k, breadth)
    }

    fn search_with_breadth(&self, query: &[f32], k: usize, breadth: usize) -> Result<Vec<(PassageIdx, f32)>> {
        let candidates = self.inner.search_with_breadth(query, k.max(breadth), breadth)?;
        let mut scored: Vec<(PassageIdx, f32)> =
            candidates.into_iter().map(|(p, _)| (p, exact::dot(self.vectors.row(p), query))).collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        Ok(scored)
    }

    fn search_breadth(&self, k: usize) -> usize {
        self.inner.search_breadth(k)
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn kind(&self) -> VectorIndexKind {
        self.inner.kind()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum VectorIndexKind {
    /// Exact below [`HNSW_THRESHOLD`] passages, HNSW from there on.
    #[default]
    Auto,
    Exact,
    Hnsw,
}

/// Corpus size from which `auto` builds an HNSW graph: exact search over 50,000
/// 384-d vectors reads 77 MB per query (about 10 ms on two cores), past which the
/// approximate index pays for its build time and recall loss.
pub const HNSW_THRESHOLD: usize = 50_000;

impl VectorIndexKind {
    pub fn resolve(self, n: usize) -> VectorIndexKind {
        match self {
            VectorIndexKind::Auto if n >= HNSW_THRESHOLD => VectorIndexKind::Hnsw,
            VectorIndexKind::Auto => VectorIndexKind::Exact,
            k => k,
        }
    }
}

impl VectorIndexKind {
    const NAMES: [(VectorIndexKind, &'static str); 3] =
        [(VectorIndexKind::Auto, "auto"), (VectorIndexKind::Exact, "exact"), (VectorIndexKind::Hnsw, "hnsw")];
}

impl std::str::FromStr for VectorIndexKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::NAMES
            .iter()
            .find(|(_, name)| *name == s)
            .map(|(kind, _)| *kind)
            .ok_or_else(|| format!("unknown vector index {s:?}: expected auto, exact or hnsw"))
    }
}

impl std::fmt::Display for VectorIndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = Self::NAMES.iter().find(|(kind, _)| kind == self).map_or("?", |(_, name)| name);
        f.write_str(name)
    }
}

/// Row-major `n x dim` matrix of unit vectors, one row per passage.
#[derive(Debug, Clone, Default)]
pub struct Matrix {
    dim: usize,
    data: Rows,
}

/// Asks for huge pages over the 2 MiB-aligned part of `v`'s allocation, before it is
/// written (a hint: nothing changes where the kernel does not give them).
fn advise_huge_pages(v: &Vec<f32>) {
    const HUGE: usize = 2 << 20;
    let bytes = v.capacity() * std::mem::size_of::<f32>();
    if bytes < 8 * HUGE || !cfg!(target_os = "linux") {
        return;
    }
    let start = (v.as_ptr() as usize).next_multiple_of(HUGE);
    let end = (v.as_ptr() as usize + bytes) / HUGE * HUGE;
    if end > start {
        #[cfg(target_os = "linux")]
        // SAFETY: the range lies within `v`'s allocation, which outlives the call;
        // MADV_HUGEPAGE changes how pages are backed, never their contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// Values in memory. A large buffer is handed, once dropped, to the next large matrix
/// made ([`Buffer::with_capacity`]): an edit fills its graph's vectors (hundreds of MB)
/// as the one before last lets go of the same amount, and a buffer whose pages are
/// already there spares faulting in and zeroing each page again (as much time as the copy
/// itself).
#[derive(Debug, Clone, Default)]
struct Buffer(Vec<f32>);

/// Buffers of at least [`Buffer::POOLED_FROM`] bytes kept for reuse, at most
/// [`Buffer::POOL_BYTES`] in all.
static POOL: std::sync::Mutex<Vec<Vec<f32>>> = std::sync::Mutex::new(Vec::new());

impl Buffer {
    const POOLED_FROM: usize = 32 << 20;
    const POOL_BYTES: usize = 1 << 30;

    fn with_capacity(floats: usize) -> Self {
        if floats * 4 >= Self::POOLED_FROM {
            let mut pool = POOL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let best = pool.iter().enumerate().filter(|(_, v)| Self::fits(v, floats)).min_by_key(|(_, v)| v.capacity());
            if let Some((i, _)) = best {
                let mut v = pool.swap_remove(i);
                v.clear();
                return Buffer(v);
            }
        }
        let v = Vec::with_capacity(floats);
        advise_huge_pages(&v);
        Buffer(v)
    }

    /// Whether a matrix of `floats` values takes `v`: it holds them and wastes at most a
    /// quarter.
    fn fits(v: &Vec<f32>, floats: usize) -> bool {
        v.capacity() >= floats && v.capacity() - floats <= v.capacity() / 4
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let bytes = self.0.capacity() * 4;
        if bytes < Self::POOLED_FROM {
            return;
        }
        let mut pool = POOL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let held: usize = pool.iter().map(|v| v.capacity() * 4).sum();
        if held + bytes <= Self::POOL_BYTES {
            pool.push(std::mem::take(&mut self.0));
        }
    }
}

/// A matrix's values: in memory, or mapped from a store's vector file.
#[derive(Debug, Clone)]
enum Rows {
    Owned(Buffer),
    /// A read-only map of a file of little-endian f32 values. The query paths read the
    /// rows of a few hundred candidates (their int8 screens rule out the rest), so the
    /// kernel keeps resident only those pages, and a full pass (building a screen) can
    /// hand its pages back ([`Matrix::release_pages`]): at a million passages the f32
    /// vectors of passages and facts are 3 GB a process need not hold.
    /// Of the map, the first `floats` values are the matrix's (a file that later
    /// generations append to holds more).
    Mapped {
        map: std::sync::Arc<memmap2::Mmap>,
        floats: usize,
    },
    /// A generation layered on a full one ([`crate::index::layers`]): the base's
    /// matrix, shared with every generation on it, and the generation's own rows.
    Layered(std::sync::Arc<LayeredRows>),
}

struct LayeredRows {
    base: std::sync::Arc<Matrix>,
    added: Matrix,
    pieces: Pieces,
    /// Every row in one block, made where a caller asks for one ([`Matrix::as_flat`]).
    flat: crate::lazy::Lazy<Vec<f32>>,
}

impl std::fmt::Debug for LayeredRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayeredRows")
            .field("base_rows", &self.base.rows())
            .field("added_rows", &self.added.rows())
            .field("runs", &self.pieces.run_count())
            .finish_non_exhaustive()
    }
}

impl Default for Rows {
    fn default() -> Self {
        Rows::Owned(Buffer::default())
    }
}

impl Matrix {
    pub fn new(dim: usize) -> Self {
        Matrix { dim, data: Rows::Owned(Buffer::default()) }
    }

    /// An empty matrix with room for `rows` rows. A large one is backed by huge pages
    /// where the kernel has them on request (Linux's transparent huge pages in `madvise`
    /// mode): an edit fills hundreds of MB of graph vectors, and faulting them in 4 KiB
    /// at a time cost more than copying them.
    pub fn with_capacity(dim: usize, rows: usize) -> Self {
        Matrix { dim, data: Rows::Owned(Buffer::with_capacity(dim * rows)) }
    }

    pub fn from_flat(dim: usize, data: Vec<f32>) -> Self {
        assert!(dim > 0 && data.len().is_multiple_of(dim), "matrix data is not a whole number of rows");
        Matrix { dim, data: Rows::Owned(Buffer(data)) }
    }

    /// The matrix stored in `path` (little-endian f32, [`Matrix::to_le_bytes`]), mapped
    /// rather than read where the platform's floats are little-endian. The store never
    /// changes a generation's files once written (a change writes a new generation), so
    /// the map stays valid. `Ok(None)`: not a whole number of rows of `dim`.
    pub fn open(path: &std::path::Path, dim: usize) -> std::io::Result<Option<Matrix>> {
        let len = std::fs::metadata(path)?.len() as usize;
        if dim == 0 || !len.is_multiple_of(4 * dim) {
            return Ok(None);
        }
        Self::open_rows(path, dim, len / (4 * dim))
    }

    /// The first `rows` rows of the matrix stored in `path`, which may hold more (rows a
    /// later generation appended; [`Matrix::open`] otherwise). The bytes of those rows
    /// are never written again while mapped: a file is only ever appended to.
    /// `Ok(None)`: the file holds fewer.
    pub fn open_rows(path: &std::path::Path, dim: usize, rows: usize) -> std::io::Result<Option<Matrix>> {
        let floats = rows * dim;
        if cfg!(target_endian = "big") {
            let bytes = std::fs::read(path)?;
            return Ok(bytes.get(..floats * 4).and_then(|b| Self::from_le_bytes(dim, b)));
        }
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len() as usize;
        if dim == 0 || len < floats * 4 {
            return Ok(None);
        }
        if floats == 0 {
            return Ok(Some(Matrix::new(dim)));
        }
        // SAFETY: the rows mapped are never written again (above).
        let map = unsafe { memmap2::MmapOptions::new().len(floats * 4).map(&file)? };
        // f32 reads need 4-byte alignment: a map starts on a page.
        assert!((map.as_ptr() as usize).is_multiple_of(std::mem::align_of::<f32>()));
        Ok(Some(Matrix { dim, data: Rows::Mapped { map: std::sync::Arc::new(map), floats } }))
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Rows `pieces` says, of `base` (a matrix held whole, shared) and `added`: a
    /// generation's vectors layered on its full generation's, without a copy of them.
    pub fn layered(base: std::sync::Arc<Matrix>, pieces: Pieces, added: Matrix) -> Matrix {
        assert!(base.dim == added.dim && !matches!(base.data, Rows::Layered(_)), "a layered matrix on a whole one");
        let dim = base.dim;
        Matrix {
            dim,
            data: Rows::Layered(std::sync::Arc::new(LayeredRows { base, added, pieces, flat: Default::default() })),
        }
    }

    /// Rows `0..of.len()`: row `of[i]` of `from` where given, else the next row of
    /// `fresh` (one per `None`, in order). Layered on `from`'s base where that shares
    /// most of it: an edit's graph keeps nearly every entity and fact vector of the graph
    /// before, and copying them made each edit's graph a new 1.5 GB of fact vectors at a
    /// million passages. Rows of `from`'s own added layer are copied (they are few: what
    /// the edits since its base brought).
    pub fn reusing(from: &std::sync::Arc<Matrix>, of: &[Option<u32>], fresh: &Matrix) -> Matrix {
        let dim = from.dim;
        assert_eq!(dim, fresh.dim, "reused and fresh rows of one dimension");
        let (base, from_added, from_pieces) = match from.layers() {
            Some((base, added, pieces)) => (base.clone(), Some(added), Some(pieces)),
            None => (from.clone(), None, None),
        };
        let mut pieces = Pieces::default();
        let mut added = Matrix::with_capacity(dim, of.iter().filter(|o| o.is_none()).count());
        let mut next_fresh = 0;
        for &o in of {
            let at = o.map(|r| from_pieces.map_or((Source::Base, r as usize), |p| p.locate(r as usize)));
            match at {
                Some((Source::Base, r)) => pieces.push(Source::Base, r as u32, 1),
                Some((Source::Added, r)) => {
                    pieces.push(Source::Added, added.rows() as u32, 1);
                    added.push(from_added.expect("an added row of a layered matrix").row(r as PassageIdx));
                }
                None => {
                    pieces.push(Source::Added, added.rows() as u32, 1);
                    added.push(fresh.row(next_fresh));
                    next_fresh += 1;
                }
            }
        }
        assert_eq!(next_fresh as usize, fresh.rows(), "one fresh row per row not reused");
        // Scattered reuse (another order, mostly new rows) would read slower through its
        // runs than one copy costs.
        let scattered = pieces.scattered() || added.rows() > of.len() / 4;
        let layered = Matrix::layered(base, pieces, added);
        if !scattered {
            return layered;
        }
        let mut flat = Matrix::with_capacity(dim, of.len());
        for (_, block) in layered.blocks() {
            block.chunks_exact(dim).for_each(|row| flat.push(row));
        }
        flat
    }

    /// The base, the added rows and where each row lives, where the matrix is layered.
    pub fn layers(&self) -> Option<(&std::sync::Arc<Matrix>, &Matrix, &Pieces)> {
        match &self.data {
            Rows::Layered(l) => Some((&l.base, &l.added, &l.pieces)),
            _ => None,
        }
    }

    pub fn rows(&self) -> usize {
        match &self.data {
            Rows::Layered(l) => l.pieces.len(),
            _ => self.as_flat().len().checked_div(self.dim).unwrap_or(0),
        }
    }

    pub fn row(&self, i: PassageIdx) -> &[f32] {
        if let Rows::Layered(l) = &self.data {
            return match l.pieces.locate(i as usize) {
                (Source::Base, r) => l.base.row(r as PassageIdx),
                (Source::Added, r) => l.added.row(r as PassageIdx),
            };
        }
        let i = i as usize;
        &self.as_flat()[i * self.dim..(i + 1) * self.dim]
    }

    /// The rows as blocks of consecutive rows held together, in order, each with its
    /// first row: one block unless the matrix is layered.
    pub fn blocks(&self) -> Vec<(usize, &[f32])> {
        match &self.data {
            Rows::Layered(l) => l
                .pieces
                .runs()
                .map(|(rows, run)| {
                    let layer = if run.source == Source::Base { l.base.as_flat() } else { l.added.as_flat() };
                    let (start, end) = (run.start as usize * self.dim, (run.start + run.len) as usize * self.dim);
                    (rows.start, &layer[start..end])
                })
                .collect(),
            _ => vec![(0, self.as_flat())],
        }
    }

    pub fn push(&mut self, v: &[f32]) {
        assert_eq!(v.len(), self.dim, "vector dimension");
        if let Rows::Mapped { .. } | Rows::Layered(_) = self.data {
            self.data = Rows::Owned(Buffer(self.as_flat().to_vec()));
        }
        let Rows::Owned(Buffer(data)) = &mut self.data else { unreachable!("made owned above") };
        data.extend_from_slice(v);
    }

    /// The inner product of every row with `query`, in row order (one parallel pass;
    /// for methods that need every score, e.g. min-max normalisation over all rows).
    pub fn dots(&self, query: &[f32]) -> Vec<f32> {
        use rayon::prelude::*;
        assert_eq!(query.len(), self.dim, "query dimension");
        let mut out = vec![0f32; self.rows()];
        if out.is_empty() {
            return out;
        }
        let step = exact::ROWS_PER_TASK;
        for (first, block) in self.blocks() {
            let scores = &mut out[first..first + block.len() / self.dim];
            scores.par_chunks_mut(step).zip(block.par_chunks(step * self.dim)).for_each(|(scores, rows)| {
                for (s, row) in scores.iter_mut().zip(rows.chunks_exact(self.dim)) {
                    *s = exact::dot(row, query);
                }
            });
        }
        out
    }

    /// The rows as one block. A layered matrix copies its rows into one on the first
    /// call and keeps it: for passes over every row that have no block-wise form.
    pub fn as_flat(&self) -> &[f32] {
        match &self.data {
            Rows::Layered(l) => l.flat.get_or_compute(|| {
                log::debug!("a layered matrix of {} rows copied into one block", l.pieces.len());
                let mut flat = Vec::with_capacity(l.pieces.len() * self.dim);
                for (_, block) in self.blocks() {
                    flat.extend_from_slice(block);
                }
                flat
            }),
            Rows::Owned(v) => &v.0,
            Rows::Mapped { map, floats } => {
                // SAFETY: aligned (checked in `open_rows`), `floats` values long (the map's
                // length), and every bit pattern is an f32.
                unsafe { std::slice::from_raw_parts(map.as_ptr().cast::<f32>(), *floats) }
            }
        }
    }

    /// Hands a mapped matrix's resident pages back to the kernel after a pass over every
    /// row (the values stay in the file and the page cache; later reads fault in what they
    /// touch); nothing for a matrix in memory.
    pub fn release_pages(&self) {
        if let Rows::Layered(l) = &self.data {
            l.base.release_pages();
        }
        if let Rows::Mapped { map, .. } = &self.data {
            // SAFETY: a read-only file map: dropped pages read back the file's bytes.
            if let Err(e) = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) } {
                log::debug!("madvise(DONTNEED) on a vector map: {e}");
            }
        }
    }

    /// Where the values are held: equal for two matrices only while they hold the same
    /// values (a clone of a mapped or layered matrix shares them), for keying what is
    /// computed from them without copying a layered matrix into one block.
    pub fn address(&self) -> usize {
        match &self.data {
            Rows::Layered(l) => std::sync::Arc::as_ptr(l) as usize,
            Rows::Mapped { map, .. } => map.as_ptr() as usize,
            Rows::Owned(v) => v.0.as_ptr() as usize,
        }
    }

    /// Whether the values are mapped from a file rather than held in memory.
    pub fn is_mapped(&self) -> bool {
        matches!(self.data, Rows::Mapped { .. })
    }

    /// The row-major data, taken.
    pub fn into_flat(self) -> Vec<f32> {
        match self.data {
            Rows::Owned(mut v) => std::mem::take(&mut v.0),
            Rows::Mapped { .. } | Rows::Layered(_) => self.blocks().into_iter().flat_map(|(_, b)| b).copied().collect(),
        }
    }

    /// Little-endian bytes, the on-disk format.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.rows() * self.dim * 4);
        for x in self.blocks().into_iter().flat_map(|(_, b)| b) {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Writes [`Matrix::to_le_bytes`] to `w` a block at a time, without a copy of the
    /// whole matrix (hundreds of MB for a graph's fact vectors).
    pub fn write_le(&self, w: &mut impl std::io::Write) -> std::io::Result<()> {
        for (_, flat) in self.blocks() {
            if cfg!(target_endian = "little") {
                // SAFETY: f32 has no padding, every byte of the slice is initialised, and
                // on a little-endian platform a value's bytes in memory are its
                // little-endian bytes.
                let bytes =
                    unsafe { std::slice::from_raw_parts(flat.as_ptr().cast::<u8>(), std::mem::size_of_val(flat)) };
                w.write_all(bytes)?;
                continue;
            }
            let mut block = Vec::with_capacity(1 << 16);
            for chunk in flat.chunks(1 << 14) {
                block.clear();
                for x in chunk {
                    block.extend_from_slice(&x.to_le_bytes());
                }
                w.write_all(&block)?;
            }
        }
        Ok(())
    }

    pub fn from_le_bytes(dim: usize, bytes: &[u8]) -> Option<Self> {
        if dim == 0 || !bytes.len().is_multiple_of(4 * dim) {
            return None;
        }
        let data = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        Some(Matrix { dim, data: Rows::Owned(Buffer(data)) })
    }
}

/// Values uniform in [-0.5, 0.5) from a seeded xorshift64 stream, for the vector tests.
#[cfg(test)]
pub(crate) fn uniform_stream(seed: u64) -> impl FnMut() -> f32 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Unit vectors from a fixed xorshift stream, some of them near-duplicates (close
    /// scores are where an i8 copy misorders).
    fn vectors(n: usize, dim: usize) -> Matrix {
        let mut next = uniform_stream(0x9e37_79b9_7f4a_7c15);
        let mut m = Matrix::new(dim);
        let mut last: Vec<f32> = Vec::new();
        for i in 0..n {
            let mut v: Vec<f32> = (0..dim).map(|_| next()).collect();
            if i % 10 == 1 {
                v = last.iter().map(|x| x + 0.01 * next()).collect();
            }
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            m.push(&v);
            last = v;
        }
        m
    }

    /// A chain of edits that keep most rows, move some and bring new ones: each matrix
    /// reads as the one copied row by row, shares its first base, and an exact scan over
    /// its runs ranks as over the copy.
    #[test]
    fn reused_rows_read_as_a_copy_and_share_the_first_base() {
        let dim = 16;
        let first = Arc::new(vectors(5000, dim));
        let mut fresh_source = vectors(1000, dim).as_flat().to_vec().into_iter();
        let mut fresh_rows = |n: usize| Matrix::from_flat(dim, fresh_source.by_ref().take(n * dim).collect());
        let (mut current, mut copy) = (first.clone(), first.as_flat().to_vec());
        for step in 0..6u32 {
            let rows = current.rows() as u32;
            // Drop every 997th row, move row 10 + step to the end, add 20 rows in two places.
            let mut of: Vec<Option<u32>> = (0..rows).filter(|r| r % 997 != step && *r != 10 + step).map(Some).collect();
            of.splice(100..100, std::iter::repeat_n(None, 12));
            of.splice(3000..3000, std::iter::repeat_n(None, 8));
            of.push(Some(10 + step));
            let fresh = fresh_rows(20);
            let next = Arc::new(Matrix::reusing(&current, &of, &fresh));
            let (mut want, mut k) = (Vec::new(), 0);
            for o in &of {
                match o {
                    Some(r) => want.extend_from_slice(&copy[*r as usize * dim..(*r as usize + 1) * dim]),
                    None => {
                        want.extend_from_slice(fresh.row(k));
                        k += 1;
                    }
                }
            }
            let (base, added, pieces) = next.layers().expect("most rows reused: layered");
            assert!(Arc::ptr_eq(base, &first), "step {step}: layered on the first base");
            assert!(
                added.rows() <= 20 * (step as usize + 1) + 1 + step as usize,
                "step {step}: {} added",
                added.rows()
            );
            assert!(pieces.run_count() < 200);
            for r in 0..of.len() {
                assert_eq!(next.row(r as u32), &want[r * dim..(r + 1) * dim], "step {step} row {r}");
            }
            let (exact, whole) =
                (ExactIndex::new(next.clone()), ExactIndex::new(Arc::new(Matrix::from_flat(dim, want.clone()))));
            let query = fresh.row(3).to_vec();
            assert_eq!(exact.search(&query, 25).unwrap(), whole.search(&query, 25).unwrap());
            assert_eq!(
                exact.search_many(&[&query, next.row(7)], 9).unwrap(),
                whole.search_many(&[&query, next.row(7)], 9).unwrap()
            );
            (current, copy) = (next, want);
        }
        // Mostly new rows: a copy, not layers.
        let of: Vec<Option<u32>> = (0..1000).map(|r| (r % 2 == 0).then_some(r)).collect();
        let fresh = fresh_rows(500);
        assert!(Matrix::reusing(&current, &of, &fresh).layers().is_none());
    }

    #[test]
    fn an_i8_graph_re_scored_gives_exact_scores_in_exact_order() {
        let m = Arc::new(vectors(3000, 64));
        let params = HnswParams { quantization: Quantization::I8, ..Default::default() };
        let hnsw: Arc<dyn VectorIndex> = Arc::new(HnswIndex::build(&m, params).unwrap());
        assert!(hnsw.approximate_scores());
        let rescored = Rescored::wrap(hnsw, m.clone());
        assert!(!rescored.approximate_scores());
        let exact = ExactIndex::new(m.clone());
        let (mut found, mut wanted) = (0, 0);
        for q in (0..3000u32).step_by(97) {
            let query = m.row(q);
            let got = rescored.search(query, 10).unwrap();
            assert_eq!(got.len(), 10);
            for w in got.windows(2) {
                assert!(w[0].1 >= w[1].1, "best first");
            }
            for &(p, s) in &got {
                assert_eq!(s, exact::dot(m.row(p), query), "the f32 score of passage {p}");
            }
            let truth: Vec<PassageIdx> = exact.search(query, 10).unwrap().into_iter().map(|(p, _)| p).collect();
            wanted += truth.len();
            found += got.iter().filter(|(p, _)| truth.contains(p)).count();
        }
        assert!(found as f64 >= 0.95 * wanted as f64, "recall {found} of {wanted}");
    }

    #[test]
    fn an_f32_graph_is_searched_as_it_is() {
        let m = Arc::new(vectors(200, 16));
        let params = HnswParams { quantization: Quantization::F32, ..Default::default() };
        let hnsw: Arc<dyn VectorIndex> = Arc::new(HnswIndex::build(&m, params).unwrap());
        assert!(!hnsw.approximate_scores());
        let wrapped = Rescored::wrap(hnsw.clone(), m);
        assert!(Arc::ptr_eq(&wrapped, &hnsw), "not wrapped");
    }

    #[test]
    fn a_mapped_matrix_reads_as_the_one_written() {
        let m = vectors(50, 8);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.f32");
        std::fs::write(&path, m.to_le_bytes()).unwrap();
        let mut mapped = Matrix::open(&path, 8).unwrap().expect("whole rows");
        assert!(mapped.is_mapped() || cfg!(target_endian = "big"));
        assert_eq!(mapped.as_flat(), m.as_flat());
        assert_eq!((mapped.rows(), mapped.row(7)), (50, m.row(7)));
        mapped.release_pages();
        assert_eq!(mapped.as_flat(), m.as_flat(), "the same values after its pages are handed back");
        let q = m.row(3).to_vec();
        assert_eq!(mapped.dots(&q), m.dots(&q));
        mapped.push(m.row(0));
        assert!(!mapped.is_mapped() && mapped.rows() == 51 && mapped.row(50) == m.row(0), "a push copies it first");
        assert!(Matrix::open(&path, 7).unwrap().is_none(), "not whole rows of 7");
        std::fs::write(&path, b"").unwrap();
        assert_eq!(Matrix::open(&path, 8).unwrap().unwrap().rows(), 0);
    }

    #[test]
    fn manifests_without_a_quantization_read_as_f32() {
        let p: HnswParams =
            serde_json::from_str(r#"{"connectivity":16,"expansion_add":128,"expansion_search":128}"#).unwrap();
        assert_eq!(p.quantization, Quantization::F32);
        assert_eq!(HnswParams::default().quantization, Quantization::I8);
    }
}
