//! Approximate search with an HNSW graph (usearch), for corpora where a full scan per
//! query is too slow.

use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use super::slots::{SlotEdit, Slots};
use super::{Matrix, VectorIndex, VectorIndexKind};
use crate::corpus::PassageIdx;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct HnswParams {
    /// Graph degree (M).
    pub connectivity: usize,
    /// Candidate list size while inserting (efConstruction).
    pub expansion_add: usize,
    /// Candidate list size while searching (ef); raised to k when k is larger.
    pub expansion_search: usize,
    /// How the graph stores its copy of the vectors. Indexes written before this field
    /// existed hold f32.
    #[serde(default = "Quantization::f32")]
    pub quantization: Quantization,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams { connectivity: 16, expansion_add: 128, expansion_search: 128, quantization: Quantization::I8 }
    }
}

/// The scalar type of the graph's own copy of the vectors (usearch keeps one beside the
/// index's f32 matrix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantization {
    /// The vectors as they are: scores exact, 4 bytes a dimension.
    F32,
    /// One byte a dimension (usearch scales each unit vector by 127): a quarter of the
    /// memory and memory traffic, so a faster build and search. Its scores are
    /// approximate, so searches re-score their candidates on the f32 matrix
    /// ([`super::Rescored`]): only the graph's walk is approximate, as with f32.
    I8,
}

impl Quantization {
    fn f32() -> Self {
        Quantization::F32
    }
}

impl std::str::FromStr for Quantization {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "f32" => Ok(Quantization::F32),
            "i8" => Ok(Quantization::I8),
            _ => Err(format!("unknown HNSW quantization {s:?}: expected f32 or i8")),
        }
    }
}

/// The search breadth (ef) for a graph of `n` vectors built with `params`: the configured
/// `expansion_search` up to [`BREADTH_FROM`] vectors, then grown with the square root of
/// `n` (see [`breadth_for`]).
pub fn breadth_for(params: &HnswParams, n: usize) -> usize {
    let scale = (n as f64 / BREADTH_FROM as f64).max(1.0).sqrt();
    ((params.expansion_search as f64 * scale).ceil() as usize).min(MAX_BREADTH)
}

/// Below this many vectors the configured breadth holds its recall (0.97 at 20,000
/// passages in the scale benchmark, 0.93 at 100,000, 0.86 at 1,000,000 with 128:
/// docs/scale.md); past it the breadth grows as `√(n / BREADTH_FROM)`.
pub const BREADTH_FROM: usize = 50_000;

/// pgvector's largest hnsw.ef_search, and a cap for in-process searches too.
pub const MAX_BREADTH: usize = 1000;

/// An edit rebuilds the graph from scratch, instead of updating it, once the passages
/// removed from it since its last build (changed ones included) reach this share of its
/// passages. usearch keeps a removed passage's node as a tombstone that searches still
/// walk through and that the next insert reuses, relinked; the graph's recall against
/// exact search drifts with that churn (docs/scale.md, "Edits and the HNSW graph").
pub const REBUILD_AFTER: f64 = 0.25;

/// An updated graph is searched wider than a fresh one, by this much per unit of churn
/// (passages removed since the last build over passages held): at 100,000 passages a
/// tenth deleted and re-added cost 0.010 of recall@10 at the default breadth, a fifth
/// 0.016, and 1.25 and 1.5 times the breadth gave them back and more (docs/scale.md).
/// With [`REBUILD_AFTER`] the breadth grows to at most 1.6 times.
pub const WIDEN_PER_CHURN: f64 = 2.5;

pub struct HnswIndex {
    /// Shared by the generations a server's edits derive from one another in memory
    /// ([`VectorIndex::edited`]): each inserts its new passages under keys no other uses
    /// and reads only the keys its own table maps.
    index: Arc<Index>,
    params: HnswParams,
    /// The passage row of each key.
    slots: Slots,
    /// Passages of the generation: the rows its table may map (an identity table maps
    /// every key below it).
    passages: usize,
    shared: Arc<Shared>,
}

/// What the generations sharing one usearch graph share besides it.
#[derive(Default)]
struct Shared {
    /// Whether any generation inserted into the graph after another was derived from it:
    /// then a search skips the keys its table does not map (another generation's nodes,
    /// and its own removed passages', left in place for the generations still reading
    /// them), where otherwise such a key would mean a damaged table.
    forked: std::sync::atomic::AtomicBool,
    /// What the generations' inserts have claimed (two edits may insert at once).
    claims: std::sync::Mutex<Claims>,
}

#[derive(Default)]
struct Claims {
    /// The next key no generation has used.
    next_key: u64,
    /// Nodes the graph holds once every claimed insert has landed.
    nodes: usize,
}

/// Spare capacity reserved when a graph is copied for an edit, so that the edits after it
/// insert into the copy they share (a reservation cannot run beside searches): 1 % of
/// the passages and at least 1,000, as many as a delta holds before it is compacted
/// (`store::delta::delta_limit`).
/// usearch thread contexts of a graph an edit copied (it will be shared): each search and
/// insert running at once holds one.
const SHARED_CONTEXTS: usize = 64;

fn spare_capacity(passages: usize) -> usize {
    (passages / 100).max(1000)
}

/// How an edit brought the graph up to date.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HnswUpdate {
    /// Built from scratch ([`REBUILD_AFTER`]) rather than updated.
    pub rebuilt: bool,
    /// Passages removed from the graph and inserted into it.
    pub removed: usize,
    pub inserted: usize,
}

fn err(e: impl std::fmt::Display) -> Error {
    Error::Other(format!("hnsw: {e}"))
}

impl HnswIndex {
    fn empty(dim: usize, params: HnswParams) -> Result<Self> {
        // Cosine for i8: usearch's i8 inner product is an integer dot in its own scale,
        // its i8 cosine a true cosine (equal to the inner product on unit vectors).
        let (metric, quantization) = match params.quantization {
            Quantization::F32 => (MetricKind::IP, ScalarKind::F32),
            Quantization::I8 => (MetricKind::Cos, ScalarKind::I8),
        };
        let options = IndexOptions {
            dimensions: dim,
            metric,
            quantization,
            connectivity: params.connectivity,
            expansion_add: params.expansion_add,
            expansion_search: params.expansion_search,
            multi: false,
        };
        Ok(HnswIndex {
            index: Arc::new(Index::new(&options).map_err(err)?),
            params,
            slots: Slots::identity(),
            passages: 0,
            shared: Arc::default(),
        })
    }

    /// Builds the graph over every row of the matrix, inserting in parallel.
    pub fn build(matrix: &Matrix, params: HnswParams) -> Result<Self> {
        let h = Self::empty(matrix.dim(), params)?;
        h.add(matrix, 0)?;
        Ok(HnswIndex { passages: matrix.rows(), ..h })
    }

    /// Inserts rows `first..` of the matrix (rows before are already in the graph).
    fn add(&self, matrix: &Matrix, first: PassageIdx) -> Result<()> {
        let n = matrix.rows();
        self.index.reserve_capacity_and_threads(n, rayon::current_num_threads()).map_err(err)?;
        (first as usize..n)
            .into_par_iter()
            .try_for_each(|i| self.index.add(i as u64, matrix.row(i as PassageIdx)).map_err(err))
    }

    /// The graph of an edit's passages, derived from `self`, the base's graph (a copy in
    /// memory: the base's stored graph is never touched): `vectors` are the new
    /// generation's, `kept` each new passage's base row. [`update`](Self::update)d, or
    /// built from scratch once the passages removed since the last build reach
    /// [`REBUILD_AFTER`] of the new count.
    pub fn after_edit(self, vectors: &Matrix, kept: &[Option<PassageIdx>]) -> Result<(HnswIndex, HnswUpdate)> {
        let removed = self.index.size().saturating_sub(kept.iter().flatten().count());
        let churn = self.slots.removed() + removed as u64;
        if churn as f64 >= REBUILD_AFTER * vectors.rows() as f64 {
            let update = HnswUpdate { rebuilt: true, removed: self.index.size(), inserted: vectors.rows() };
            return Ok((HnswIndex::build(vectors, self.params)?, update));
        }
        self.update(vectors, kept)
    }

    /// The base's graph (`self`) updated in place for an edit: the removed passages'
    /// slots removed, the passages the base lacks (`kept` `None`) inserted under free
    /// slots, in parallel; the kept passages' slots now name their new rows.
    pub fn update(self, vectors: &Matrix, kept: &[Option<PassageIdx>]) -> Result<(HnswIndex, HnswUpdate)> {
        if vectors.rows() != kept.len() || vectors.dim() != self.index.dimensions() {
            return Err(err(format!(
                "{} new passages of {} dimensions for {} kept and a graph of {}",
                vectors.rows(),
                vectors.dim(),
                kept.len(),
                self.index.dimensions()
            )));
        }
        let base = self.index.size();
        let SlotEdit { slots, remove, add } = self.slots.after_edit(base, kept).map_err(err)?;
        for &slot in &remove {
            if self.index.remove(slot).map_err(err)? != 1 {
                return Err(err(format!("slot {slot} of a removed passage is not in the graph")));
            }
        }
        // usearch reuses removed nodes for the inserts first, as the table reuses dead
        // slots: the table's length is the graph's node count.
        let capacity = slots.table_len().unwrap_or(base).max(self.index.capacity());
        let contexts = rayon::current_num_threads().max(SHARED_CONTEXTS);
        self.index.reserve_capacity_and_threads(capacity, contexts).map_err(err)?;
        add.par_iter().try_for_each(|&(slot, row)| self.index.add(slot, vectors.row(row)).map_err(err))?;
        let update = HnswUpdate { rebuilt: false, removed: remove.len(), inserted: add.len() };
        Ok((HnswIndex { slots, passages: vectors.rows(), ..self }, update))
    }

    /// [`VectorIndex::edited`] without a copy, where the graph has room for the edit's
    /// passages: they are inserted under new keys into the graph this generation shares,
    /// and the new table leaves the removed passages' keys dead (their nodes stay for
    /// the generations still reading them, as a removal's tombstone would). `None` where
    /// there is no room.
    fn edited_in_place(&self, vectors: &Matrix, kept: &[Option<PassageIdx>]) -> Option<Result<HnswIndex>> {
        use std::sync::atomic::Ordering;
        if vectors.dim() != self.index.dimensions() {
            return None;
        }
        let first = self.claim(kept.iter().filter(|k| k.is_none()).count())?;
        let result = (|| {
            let SlotEdit { slots, add, .. } =
                self.slots.after_edit_appending(self.passages, kept, first).map_err(err)?;
            self.shared.forked.store(true, Ordering::Release);
            add.par_iter().try_for_each(|&(slot, row)| self.index.add(slot, vectors.row(row)).map_err(err))?;
            Ok(HnswIndex {
                index: self.index.clone(),
                params: self.params,
                slots,
                passages: vectors.rows(),
                shared: self.shared.clone(),
            })
        })();
        Some(result)
    }

    /// The first of `inserts` keys past every key in use (this generation's table's, and
    /// those other generations sharing the graph claimed), where the graph has room for
    /// them; the claim holds until the graph is dropped.
    fn claim(&self, inserts: usize) -> Option<u64> {
        let mut claims = self.shared.claims.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let nodes = claims.nodes.max(self.index.size());
        if nodes + inserts > self.index.capacity() {
            return None;
        }
        let first = claims.next_key.max(self.slots.table_len().unwrap_or(self.passages) as u64);
        *claims = Claims { next_key: first + inserts as u64, nodes: nodes + inserts };
        Some(first)
    }

    /// A copy of the graph, through its bytes (usearch copies no other way), with room
    /// for [`spare_capacity`] more passages.
    fn copy(&self) -> Result<HnswIndex> {
        let copy = HnswIndex::from_bytes(&self.to_bytes()?, self.index.dimensions(), self.params).map_err(err)?;
        // The nodes of keys this generation does not map (other generations', and its own
        // removed passages' left in place while shared) go, as a removal takes them.
        let claimed = self.shared.claims.lock().unwrap_or_else(std::sync::PoisonError::into_inner).next_key;
        let end = claimed.max(self.slots.table_len().unwrap_or(self.passages) as u64);
        for key in (0..end).filter(|&key| self.row(key).is_none()) {
            if copy.index.contains(key) {
                copy.index.remove(key).map_err(err)?;
            }
        }
        let capacity = copy.index.size() + spare_capacity(self.passages);
        // A shared graph takes an edit's inserts while queries search it: usearch serves
        // one call per thread context, so there are contexts for both.
        copy.index.reserve_capacity_and_threads(capacity, SHARED_CONTEXTS).map_err(err)?;
        Ok(HnswIndex { slots: self.slots.clone(), passages: self.passages, ..copy })
    }

    /// The row `key` stands for in this generation, if any.
    fn row(&self, key: u64) -> Option<PassageIdx> {
        self.slots.row(key).filter(|&r| (r as usize) < self.passages)
    }

    /// The key → row table; [`Slots::identity`] for a graph built from scratch.
    pub fn slots(&self) -> &Slots {
        &self.slots
    }

    /// The graph with the slot table stored beside it; an error says what does not
    /// match, for the caller to name the table's file.
    pub fn with_slots(self, slots: Slots) -> std::result::Result<Self, String> {
        match slots.live() {
            Some(live) if live != self.index.size() => {
                Err(format!("the slot table holds {live} passages, the HNSW graph {}", self.index.size()))
            }
            _ => Ok(HnswIndex { passages: slots.live().unwrap_or(self.passages), slots, ..self }),
        }
    }

    /// The slot table to store beside the graph; `None` where slot = row (a graph built
    /// from scratch stores none, as before slots existed).
    pub fn slots_bytes(&self) -> Option<Vec<u8>> {
        (!self.slots.is_identity()).then(|| self.slots.to_bytes(self.index.size()))
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let s = path.to_str().ok_or_else(|| Error::index(path, "path is not UTF-8"))?;
        self.index.save(s).map_err(|e| Error::index(path, format!("hnsw save: {e}")))
    }

    pub fn load(path: &Path, dim: usize, params: HnswParams) -> Result<Self> {
        let h = Self::empty(dim, params)?;
        let s = path.to_str().ok_or_else(|| Error::index(path, "path is not UTF-8"))?;
        h.index.load(s).map_err(|e| Error::index(path, format!("hnsw load: {e}")))?;
        h.check_dim(dim).map_err(|m| Error::index(path, m))?;
        HnswIndex { passages: h.index.size(), ..h }.with_room().map_err(|m| Error::index(path, m))
    }

    /// The graph with room for [`spare_capacity`] more passages, and thread contexts for
    /// searches beside inserts, reserved before anyone searches it (a reservation
    /// cannot run beside searches): a server's first edit then inserts into the graph it
    /// opened instead of a copy (3.5 s at a million passages). Reserving grows the node
    /// tables (16 bytes a node), not the nodes.
    fn with_room(self) -> std::result::Result<Self, String> {
        let capacity = self.index.size() + spare_capacity(self.index.size());
        let contexts = rayon::current_num_threads().max(SHARED_CONTEXTS);
        self.index.reserve_capacity_and_threads(capacity, contexts).map_err(|e| format!("hnsw reserve: {e}"))?;
        Ok(self)
    }

    /// The graph as [`save`](Self::save) writes it to a file.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; self.index.serialized_length()];
        self.index.save_to_buffer(&mut bytes).map_err(err)?;
        Ok(bytes)
    }

    /// A graph from [`to_bytes`](Self::to_bytes) (or a saved file's bytes); the error
    /// says what is wrong, for the caller to name where the bytes came from.
    pub fn from_bytes(bytes: &[u8], dim: usize, params: HnswParams) -> std::result::Result<Self, String> {
        let h = Self::empty(dim, params).map_err(|e| e.to_string())?;
        h.index.load_from_buffer(bytes).map_err(|e| format!("not a usearch index: {e}"))?;
        h.check_dim(dim)?;
        HnswIndex { passages: h.index.size(), ..h }.with_room()
    }

    /// usearch takes the dimension from the serialized header: one that differs from
    /// the manifest's would fail every query.
    fn check_dim(&self, dim: usize) -> std::result::Result<(), String> {
        match self.index.dimensions() {
            d if d == dim => Ok(()),
            d => Err(format!("the HNSW graph has {d} dimensions, the manifest {dim}")),
        }
    }
}

impl VectorIndex for HnswIndex {
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        self.search_with_breadth(query, k, self.search_breadth(k))
    }

    fn search_breadth(&self, k: usize) -> usize {
        let n = self.passages;
        let breadth = breadth_for(&self.params, n);
        if self.slots.removed() == 0 {
            return breadth.max(k);
        }
        let churn = self.slots.removed() as f64 / n.max(1) as f64;
        ((breadth as f64 * (1.0 + WIDEN_PER_CHURN * churn)).ceil() as usize).min(MAX_BREADTH).max(k)
    }

    fn search_with_breadth(&self, query: &[f32], k: usize, breadth: usize) -> Result<Vec<(PassageIdx, f32)>> {
        if query.len() != self.index.dimensions() {
            return Err(Error::Embedding(format!(
                "query has {} dimensions, index has {}",
                query.len(),
                self.index.dimensions()
            )));
        }
        // usearch searches with max(expansion_search, count) candidates: asking for
        // `breadth` results sets the breadth of this search alone (changing the index's
        // expansion would change it for searches running beside it).
        let m = if self.shared.forked.load(std::sync::atomic::Ordering::Acquire) {
            self.index.filtered_search(query, k.max(breadth), |key| self.row(key).is_some())
        } else {
            self.index.search(query, k.max(breadth))
        };
        let m = m.map_err(err)?;
        // usearch's inner-product and cosine distances are 1 - similarity.
        m.keys
            .iter()
            .zip(&m.distances)
            .take(k)
            .map(|(&key, &d)| match self.row(key) {
                Some(row) => Ok((row, 1.0 - d)),
                None => Err(err(format!("the graph returned slot {key}, which holds no passage"))),
            })
            .collect()
    }

    fn len(&self) -> usize {
        self.passages
    }

    fn kind(&self) -> VectorIndexKind {
        VectorIndexKind::Hnsw
    }

    fn approximate_scores(&self) -> bool {
        self.params.quantization != Quantization::F32
    }

    /// The edit's passages inserted into the graph this generation shares, where it has
    /// room; otherwise into a copy (through the graph's bytes, 0.5 GB at a million
    /// passages) with room for the edits after it, updated as [`HnswIndex::after_edit`]
    /// updates a stored one.
    fn edited(&self, vectors: &Matrix, kept: &[Option<PassageIdx>]) -> Option<Result<std::sync::Arc<dyn VectorIndex>>> {
        let edited = match self.edited_in_place(vectors, kept) {
            Some(shared) => shared,
            None => self.copy().and_then(|copy| Ok(copy.after_edit(vectors, kept)?.0)),
        };
        Some(edited.map(|h| std::sync::Arc::new(h) as std::sync::Arc<dyn VectorIndex>))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` unit vectors of a fixed stream, none alike.
    fn unit_vectors(seed: u64, n: usize, dim: usize) -> Vec<Vec<f32>> {
        let mut next = super::super::uniform_stream(seed);
        (0..n)
            .map(|_| {
                let v: Vec<f32> = (0..dim).map(|_| next()).collect();
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.into_iter().map(|x| x / norm).collect()
            })
            .collect()
    }

    fn matrix(rows: &[Vec<f32>]) -> Matrix {
        let mut m = Matrix::new(rows[0].len());
        rows.iter().for_each(|r| m.push(r));
        m
    }

    /// Every row's own vector, searched: each answer is the row the table maps it to (its
    /// score is that row's product with the query), and nearly every row finds
    /// itself first. Not every row: the graph is approximate, and its parallel inserts
    /// make it differ from run to run.
    fn each_row_finds_itself(graph: &HnswIndex, m: &Matrix, what: &str) {
        assert_eq!(graph.len(), m.rows(), "{what}");
        // i8 codes score within about a hundredth; another row's product is far off.
        let tolerance = if graph.approximate_scores() { 0.02 } else { 1e-4 };
        let mut found = 0;
        for r in 0..m.rows() as PassageIdx {
            let q = m.row(r);
            let top = graph.search(q, 3).unwrap();
            for &(row, score) in &top {
                let exact: f32 = m.row(row).iter().zip(q).map(|(a, b)| a * b).sum();
                assert!(
                    (score - exact).abs() < tolerance,
                    "{what}: row {r} found {row} scored {score}, its product {exact}"
                );
            }
            found += usize::from(top[0].0 == r);
        }
        assert!(found * 100 >= m.rows() * 97, "{what}: {found} of {} rows found themselves first", m.rows());
    }

    /// An edit in the middle of the canonical order: rows removed and inserted before,
    /// between and after kept ones, twice over, the graph updated (not rebuilt) each time
    /// and read back from its bytes and slot table.
    #[test]
    fn an_updated_graph_maps_its_slots_to_the_new_rows() {
        let params = HnswParams { quantization: Quantization::F32, ..Default::default() };
        let mut rows = unit_vectors(7, 400, 24);
        let graph = HnswIndex::build(&matrix(&rows), params).unwrap();
        assert!(graph.slots_bytes().is_none(), "a fresh graph stores no table");
        let mut extra = unit_vectors(11, 60, 24).into_iter();
        let mut graph = graph;
        for round in 0..2 {
            // Remove every 9th row and rows 100..110, insert one before row 0, one after
            // every 37th and two at the end.
            let mut next: Vec<Vec<f32>> = Vec::new();
            let mut kept: Vec<Option<PassageIdx>> = Vec::new();
            let mut removed: Vec<Vec<f32>> = Vec::new();
            next.push(extra.next().unwrap());
            kept.push(None);
            for (i, v) in rows.iter().enumerate() {
                if i % 9 == 4 || (100..110).contains(&i) {
                    removed.push(v.clone());
                    continue;
                }
                next.push(v.clone());
                kept.push(Some(i as PassageIdx));
                if i % 37 == 0 {
                    next.push(extra.next().unwrap());
                    kept.push(None);
                }
            }
            next.extend([extra.next().unwrap(), extra.next().unwrap()]);
            kept.extend([None, None]);
            let m = matrix(&next);
            let (updated, update) = graph.update(&m, &kept).unwrap();
            assert!(!update.rebuilt);
            assert_eq!(update.removed, rows.len() - kept.iter().flatten().count());
            assert_eq!(update.inserted, kept.iter().filter(|k| k.is_none()).count());
            assert!(updated.slots().removed() > 0 && !updated.slots().is_identity());
            each_row_finds_itself(&updated, &m, &format!("round {round}"));
            for v in &removed {
                let top = updated.search(v, 1).unwrap()[0];
                assert!(top.1 < 0.999, "round {round}: a removed vector is still found: {top:?}");
            }
            // As stored: the graph's bytes and its table.
            let table = Slots::from_bytes(&updated.slots_bytes().unwrap(), m.rows()).unwrap();
            let read =
                HnswIndex::from_bytes(&updated.to_bytes().unwrap(), 24, params).unwrap().with_slots(table).unwrap();
            each_row_finds_itself(&read, &m, &format!("round {round}, read back"));
            graph = read;
            rows = next;
        }
        // Without its table the graph's keys are slots, not rows: the table matters.
        let bare = HnswIndex::from_bytes(&graph.to_bytes().unwrap(), 24, params).unwrap();
        let m = matrix(&rows);
        // (A key past the passages is refused as a damaged table.)
        let wrong = (0..m.rows() as PassageIdx).filter(|&r| bare.search(m.row(r), 1).map_or(true, |t| t[0].0 != r));
        assert!(wrong.count() > 100, "rows shifted by the edits");
    }

    type Rows = Vec<Vec<f32>>;

    /// The rows after removing every `step`th row (from `offset`) and inserting a new one
    /// after every 29th: the rows, each one's old row, and the vectors removed.
    fn edited_rows(
        rows: &[Vec<f32>],
        extra: &mut impl Iterator<Item = Vec<f32>>,
        step: usize,
        offset: usize,
    ) -> (Rows, Vec<Option<PassageIdx>>, Rows) {
        let (mut next, mut kept, mut removed) = (Vec::new(), Vec::new(), Vec::new());
        for (i, v) in rows.iter().enumerate() {
            if i % step == offset {
                removed.push(v.clone());
                continue;
            }
            next.push(v.clone());
            kept.push(Some(i as PassageIdx));
            if i % 29 == 0 {
                next.push(extra.next().unwrap());
                kept.push(None);
            }
        }
        (next, kept, removed)
    }

    /// A server's edits in memory: the first copies the graph (with room for more), the
    /// next ones insert into the copy they share; each generation finds its own rows and
    /// none of the others', whichever inserted last.
    #[test]
    fn generations_edited_in_memory_share_the_graph_and_keep_to_their_rows() {
        let params = HnswParams { quantization: Quantization::F32, ..Default::default() };
        let rows = unit_vectors(21, 500, 24);
        let mut extra = unit_vectors(22, 200, 24).into_iter();
        let g0 = HnswIndex::build(&matrix(&rows), params).unwrap();
        let (rows1, kept1, _) = edited_rows(&rows, &mut extra, 11, 3);
        assert!(g0.edited_in_place(&matrix(&rows1), &kept1).is_none(), "a built graph has no room");
        let g1 = g0.copy().unwrap().after_edit(&matrix(&rows1), &kept1).unwrap().0;
        let (rows2, kept2, removed2) = edited_rows(&rows1, &mut extra, 13, 5);
        let g2 = g1.edited_in_place(&matrix(&rows2), &kept2).expect("room for the edit").unwrap();
        assert!(Arc::ptr_eq(&g1.index, &g2.index), "shared, not copied");
        let (rows3, kept3, removed3) = edited_rows(&rows2, &mut extra, 17, 2);
        let g3 = g2.edited_in_place(&matrix(&rows3), &kept3).expect("room for the edit").unwrap();
        for (graph, rows, what) in [(&g1, &rows1, "first"), (&g2, &rows2, "second"), (&g3, &rows3, "third")] {
            assert_eq!(graph.len(), rows.len(), "{what}");
            each_row_finds_itself(graph, &matrix(rows), what);
        }
        // The second generation's removed passages are gone from it and from the third,
        // still there for the first, which holds them.
        for v in &removed2 {
            assert!(g2.search(v, 1).unwrap()[0].1 < 0.999 && g3.search(v, 1).unwrap()[0].1 < 0.999);
            let top = g1.search(v, 1).unwrap()[0];
            assert!(top.1 > 0.999 && rows1[top.0 as usize] == *v, "the first generation still finds it");
        }
        for v in &removed3 {
            assert!(g3.search(v, 1).unwrap()[0].1 < 0.999);
        }
        // Through the trait: a copy once the shared graph is full, the same rows.
        let full = HnswIndex { shared: Arc::default(), ..g3.copy().unwrap() };
        let edited = full.edited(&matrix(&rows3), &kept3.iter().map(|_| None).collect::<Vec<_>>());
        assert!(edited.is_some());
        // A copy drops the nodes its generation does not map.
        let copy = g2.copy().unwrap();
        assert_eq!(copy.index.size(), rows2.len(), "only the second generation's nodes");
        each_row_finds_itself(&copy, &matrix(&rows2), "copy of the second");
    }

    #[test]
    fn enough_churn_rebuilds_the_graph() {
        let params = HnswParams::default();
        let rows = unit_vectors(3, 200, 16);
        let graph = HnswIndex::build(&matrix(&rows), params).unwrap();
        // 20 of 200 removed: updated.
        let kept: Vec<_> = (0..200).map(|i| (i >= 20).then_some(i as PassageIdx)).collect();
        let (graph, update) = graph.after_edit(&matrix(&rows), &kept).unwrap();
        assert!(!update.rebuilt && graph.slots().removed() == 20);
        // 40 more: 60 removed since the build, past a quarter of 200: rebuilt, slot = row.
        let kept: Vec<_> = (0..200).map(|i| (i >= 40).then_some(i as PassageIdx)).collect();
        let (graph, update) = graph.after_edit(&matrix(&rows), &kept).unwrap();
        assert!(update.rebuilt && graph.slots().is_identity() && graph.slots_bytes().is_none());
        each_row_finds_itself(&graph, &matrix(&rows), "rebuilt");
    }

    #[test]
    fn a_table_that_does_not_fit_the_graph_is_refused() {
        let rows = unit_vectors(5, 50, 8);
        let graph = HnswIndex::build(&matrix(&rows), HnswParams::default()).unwrap();
        let kept: Vec<_> = (0..49).map(|i| Some(i as PassageIdx)).collect();
        let (smaller, _) = graph.update(&matrix(&rows[..49]), &kept).unwrap();
        let bytes = HnswIndex::build(&matrix(&rows), HnswParams::default()).unwrap().to_bytes().unwrap();
        let table = smaller.slots().clone();
        let err = HnswIndex::from_bytes(&bytes, 8, HnswParams::default()).unwrap().with_slots(table).err().unwrap();
        assert!(err.contains("49 passages, the HNSW graph 50"), "{err}");
    }
}
