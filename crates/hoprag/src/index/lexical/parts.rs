//! BM25 over documents kept in immutable parts, so that an edit indexes only the texts
//! it brings: [`PartedBm25`].

use std::sync::Arc;

use rustc_hash::FxHashMap;
use tantivy::postings::Postings;
use tantivy::query::Bm25Weight;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, Searcher, Term, TERMINATED};

use std::borrow::Cow;
use std::path::Path;

use super::{analyze, analyzer, build_in_dir, build_in_ram, register_tokenizer, LexicalIndex};
use crate::corpus::PassageIdx;
use crate::error::{Error, Result};
use crate::files::{link_tree, write_file};

/// A document id that names no document of the collection (its text left it).
const DEAD: u32 = u32::MAX;
/// Past this many parts an edit folds every part but the first into one.
const MAX_PARTS: usize = 8;
/// In a collection's folder: its parts' names and sizes, in order.
const LAYOUT: &str = "parts.json";
/// In a collection's folder: for each part in order, the id of each of its documents.
pub(crate) const IDS: &str = "ids.u32";
/// In a part's folder: the analysed length of each of its texts.
const LENGTHS: &str = "lengths.u32";

/// Where new parts go: a collection's folder, and who hears of the texts indexed.
#[derive(Clone, Copy)]
struct Place<'a> {
    dir: &'a Path,
    progress: &'a dyn Fn(usize),
}

/// A collection's parts, by name, and how many texts it holds.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Layout {
    pub parts: Vec<String>,
    pub texts: usize,
}

/// BM25 (tantivy's k1 = 1.2, b = 0.75 and analysis) over a collection of texts
/// `0..len`, held as tantivy indexes that are never changed once built ("parts"). An
/// edit's collection ([`PartedBm25::after`]) shares the parts of the one before, marks
/// the documents whose text left as dead, and indexes only the new texts, in a part of
/// their own.
///
/// Scores are those of a fresh index of the live texts, to the bit: the statistics (the
/// number of documents, each term's document frequency, the average length) count live
/// documents only, and a document's score is summed term after term in the query's
/// order, whatever part holds it (tantivy's own disjunction adds a document's term
/// scores in an order that depends on how documents fall into segments). Ties go to the
/// lower id.
pub struct PartedBm25 {
    parts: Vec<Arc<Part>>,
    /// For each part, the id each document holds in this collection, or [`DEAD`].
    ids: Vec<Vec<u32>>,
    len: usize,
    /// Analysed tokens over the live documents.
    tokens: u64,
    analyzer: tantivy::tokenizer::TextAnalyzer,
}

/// One immutable tantivy index and what scoring its documents needs.
pub(crate) struct Part {
    /// Its folder's name within the collection's folder, for a part on disk.
    name: Option<String>,
    searcher: Searcher,
    _reader: tantivy::IndexReader,
    text: Field,
    /// For each segment, each document's position among the part's texts.
    positions: Vec<Vec<u32>>,
    /// The analysed length of each of the part's texts.
    lengths: Vec<u32>,
}

impl Part {
    /// A part of `texts`, in memory or, given a collection's folder, in a new folder of
    /// its own there.
    fn build(texts: &[&str], place: Option<Place>) -> Result<Arc<Part>> {
        let Some(Place { dir, progress }) = place else {
            return Self::of_index(build_in_ram(texts, &|_| {})?.0, None, count_tokens(texts)?);
        };
        let name = format!("part-{:016x}", unique());
        let path = dir.join(&name);
        build_in_dir(&path, texts, progress)?;
        let lengths = count_tokens(texts)?;
        write_u32s(&path.join(LENGTHS), &lengths)?;
        let index =
            tantivy::Index::open_in_dir(&path).map_err(|e| Error::index(&path, format!("lexical index: {e}")))?;
        Self::of_index(index, Some(name), lengths)
    }

    /// Part `name` from its folder's files (`name` within, bytes), as a store that keeps
    /// them elsewhere reads them.
    #[cfg(feature = "postgres")]
    pub(crate) fn from_files(name: &str, files: Vec<(String, Vec<u8>)>) -> Result<Arc<Part>> {
        let err = |m: String| Error::Other(format!("lexical part {name}: {m}"));
        let dir = tantivy::directory::RamDirectory::create();
        let mut lengths = None;
        for (file, bytes) in files {
            if file == LENGTHS {
                lengths = Some(u32s(&bytes).ok_or_else(|| err(format!("{LENGTHS} is not 32-bit values")))?);
                continue;
            }
            use tantivy::Directory as _;
            dir.atomic_write(Path::new(&file), &bytes).map_err(|e| err(format!("{file}: {e}")))?;
        }
        let lengths = lengths.ok_or_else(|| err(format!("no {LENGTHS}")))?;
        let index = tantivy::Index::open(dir).map_err(|e| err(e.to_string()))?;
        Self::of_index(index, Some(name.to_string()), lengths)
    }

    /// The part `name` of the collection in folder `dir`.
    fn open(dir: &Path, name: &str) -> Result<Arc<Part>> {
        let path = dir.join(name);
        let index =
            tantivy::Index::open_in_dir(&path).map_err(|e| Error::index(&path, format!("lexical index: {e}")))?;
        let lpath = path.join(LENGTHS);
        Self::of_index(index, Some(name.to_string()), read_u32s(&lpath)?)
    }

    fn of_index(index: tantivy::Index, name: Option<String>, lengths: Vec<u32>) -> Result<Arc<Part>> {
        register_tokenizer(&index)?;
        let err = |e: tantivy::TantivyError| Error::Other(format!("lexical index: {e}"));
        let text = index.schema().get_field("text").map_err(err)?;
        let reader: tantivy::IndexReader =
            index.reader_builder().reload_policy(tantivy::ReloadPolicy::Manual).try_into().map_err(err)?;
        let searcher = reader.searcher();
        let mut positions = Vec::new();
        let mut tokens_indexed = 0u64;
        for segment in searcher.segment_readers() {
            let pids = segment.fast_fields().u64("pid").map_err(err)?;
            let mut of_doc = vec![DEAD; segment.max_doc() as usize];
            for (doc, slot) in of_doc.iter_mut().enumerate() {
                *slot = pids.first(doc as u32).map_or(DEAD, |p| p as u32);
            }
            positions.push(of_doc);
            tokens_indexed += segment.inverted_index(text).map_err(err)?.total_num_tokens();
        }
        // The average length is computed from these counts: they must be tantivy's.
        let counted: u64 = lengths.iter().map(|&n| n as u64).sum();
        if counted != tokens_indexed {
            return Err(Error::Other(format!(
                "lexical index: {counted} tokens counted for {tokens_indexed} indexed; the analysis is not the index's"
            )));
        }
        if lengths.len() != positions.iter().flatten().filter(|&&p| p != DEAD).count() {
            return Err(Error::Other(format!("lexical index: {} lengths for its documents", lengths.len())));
        }
        Ok(Arc::new(Part { name, searcher, _reader: reader, text, positions, lengths }))
    }

    fn docs(&self) -> usize {
        self.lengths.len()
    }
}

impl PartedBm25 {
    /// The collection of `texts`, text `i` as document `i`, in one part.
    pub fn new(texts: &[String]) -> Result<Self> {
        Self::new_in(&texts.iter().map(String::as_str).collect::<Vec<_>>(), None)
    }

    fn new_in(texts: &[&str], place: Option<Place>) -> Result<Self> {
        Self::of_parts(vec![Part::build(texts, place)?], vec![(0..texts.len() as u32).collect()], texts.len())
    }

    /// Writes the collection of `texts` to the new folder `dir`, in one part; `progress`
    /// is told of the texts as they are indexed.
    pub fn create(dir: &Path, texts: &[String], progress: &dyn Fn(usize)) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let all: Vec<&str> = texts.iter().map(String::as_str).collect();
        Self::new_in(&all, Some(Place { dir, progress }))?.save_layout(dir)
    }

    /// Writes to the new folder `dir` the collection of `texts` after an edit of the one
    /// in folder `base` ([`PartedBm25::after`]): the parts it keeps are linked from there
    /// (they never change), and only the new texts are indexed. `text(i)` is document
    /// `i`'s text, asked for only where it is indexed: an edit's few.
    pub fn create_after<'t>(
        dir: &Path,
        base: &Path,
        text: &dyn Fn(usize) -> Cow<'t, str>,
        from: &[Option<u32>],
        progress: &dyn Fn(usize),
    ) -> Result<()> {
        Self::stage_after(dir, &Self::open(base)?, text, from, progress)?;
        for name in Self::layout(dir)?.parts {
            if !dir.join(&name).exists() {
                link_tree(&base.join(&name), &dir.join(&name))?;
            }
        }
        Ok(())
    }

    /// Writes to the new folder `dir` the collection after an edit of `previous`
    /// ([`PartedBm25::after`]) as [`create_after`](Self::create_after) does, but only its
    /// layout, its ids and its new part: a store that keeps parts elsewhere keeps the
    /// others where they are.
    pub fn stage_after<'t>(
        dir: &Path,
        previous: &PartedBm25,
        text: &dyn Fn(usize) -> Cow<'t, str>,
        from: &[Option<u32>],
        progress: &dyn Fn(usize),
    ) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        Self::after_in(previous, text, from, Some(Place { dir, progress }))?.save_layout(dir)
    }

    /// The layout of the collection in folder `dir`.
    pub(crate) fn layout(dir: &Path) -> Result<Layout> {
        let lpath = dir.join(LAYOUT);
        let bytes = std::fs::read(&lpath).map_err(|e| Error::io(&lpath, e))?;
        serde_json::from_slice(&bytes).map_err(|e| Error::index(&lpath, e.to_string()))
    }

    /// The collection of `parts` in order, `ids` each of their documents' id in turn (as
    /// the folder's [`IDS`] holds them), over `texts` texts: as a store that keeps parts
    /// apart reads it.
    #[cfg(feature = "postgres")]
    pub(crate) fn of_stored(parts: Vec<Arc<Part>>, ids: &[u8], texts: usize) -> Result<Self> {
        let flat = u32s(ids).ok_or_else(|| Error::Other(format!("lexical index: {IDS} is not 32-bit values")))?;
        let split = split_ids(&parts, &flat).map_err(|m| Error::Other(format!("lexical index: {m}")))?;
        Self::of_parts(parts, split, texts)
    }

    /// Whether folder `dir` holds a collection in parts.
    pub fn is_in(dir: &Path) -> bool {
        dir.join(LAYOUT).is_file()
    }

    /// The collection in folder `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        let layout = Self::layout(dir)?;
        let parts = layout.parts.iter().map(|name| Part::open(dir, name)).collect::<Result<Vec<_>>>()?;
        let ids = split_ids(&parts, &read_u32s(&dir.join(IDS))?).map_err(|m| Error::index(dir.join(IDS), m))?;
        Self::of_parts(parts, ids, layout.texts)
    }

    fn save_layout(&self, dir: &Path) -> Result<()> {
        write_u32s(&dir.join(IDS), &self.ids.concat())?;
        let parts = self.parts.iter().map(|p| p.name.clone().expect("parts on disk are named")).collect();
        let bytes = serde_json::to_vec(&Layout { parts, texts: self.len }).map_err(|e| Error::Other(e.to_string()))?;
        write_file(&dir.join(LAYOUT), &bytes, false)
    }

    /// The collection of `texts` (document `i` is `texts[i]`) after an edit of
    /// `previous`: `from[i]` is the document of `previous` with the same text as `texts[i]`,
    /// where there is one. Documents of `previous` no text comes from are dead; the
    /// others are indexed in a new part. When dead documents are over a quarter of all, or
    /// the parts too many, parts are built again from the texts (the scores are the same
    /// either way).
    pub fn after(previous: &PartedBm25, texts: &[String], from: &[Option<u32>]) -> Result<Self> {
        if from.len() != texts.len() {
            return Err(Error::Other(format!("{} origins for {} texts", from.len(), texts.len())));
        }
        Self::after_in(previous, &|i| Cow::Borrowed(texts[i].as_str()), from, None)
    }

    /// [`PartedBm25::after`], with document `i`'s text `text(i)` (as many as `from`).
    fn after_in<'t>(
        previous: &PartedBm25,
        text: &dyn Fn(usize) -> Cow<'t, str>,
        from: &[Option<u32>],
        place: Option<Place>,
    ) -> Result<Self> {
        let count = from.len();
        let mut at: Vec<(u32, u32)> = vec![(DEAD, DEAD); previous.len];
        for (p, ids) in previous.ids.iter().enumerate() {
            for (d, &id) in ids.iter().enumerate() {
                if id != DEAD {
                    at[id as usize] = (p as u32, d as u32);
                }
            }
        }
        let mut ids: Vec<Vec<u32>> = previous.ids.iter().map(|d| vec![DEAD; d.len()]).collect();
        let mut new: Vec<u32> = Vec::new();
        for (i, o) in from.iter().enumerate() {
            match o.and_then(|o| at.get(o as usize).copied()).filter(|&(p, _)| p != DEAD) {
                Some((p, d)) if ids[p as usize][d as usize] == DEAD => ids[p as usize][d as usize] = i as u32,
                // No document, or one already taken: indexed anew.
                _ => new.push(i as u32),
            }
        }
        let held: usize = previous.parts.iter().map(|p| p.docs()).sum::<usize>() + new.len();
        if 4 * (held - count) > held {
            let texts: Vec<Cow<str>> = (0..count).map(text).collect();
            let all: Vec<&str> = texts.iter().map(|t| t.as_ref()).collect();
            return Self::new_in(&all, place);
        }
        let mut parts = previous.parts.clone();
        if parts.len() >= MAX_PARTS {
            // Every part but the first folded into the new one.
            for (p, part_ids) in ids.drain(1..).enumerate() {
                debug_assert_eq!(part_ids.len(), parts[p + 1].docs());
                new.extend(part_ids.into_iter().filter(|&id| id != DEAD));
            }
            parts.truncate(1);
            new.sort_unstable();
        }
        if !new.is_empty() {
            let texts: Vec<Cow<str>> = new.iter().map(|&i| text(i as usize)).collect();
            let part_texts: Vec<&str> = texts.iter().map(|t| t.as_ref()).collect();
            parts.push(Part::build(&part_texts, place)?);
            ids.push(new);
        }
        Self::of_parts(parts, ids, count)
    }

    fn of_parts(parts: Vec<Arc<Part>>, ids: Vec<Vec<u32>>, len: usize) -> Result<Self> {
        let mut tokens = 0u64;
        let mut live = 0usize;
        for (part, ids) in parts.iter().zip(&ids) {
            for (d, &id) in ids.iter().enumerate() {
                if id != DEAD {
                    tokens += part.lengths[d] as u64;
                    live += 1;
                }
            }
        }
        if live != len {
            return Err(Error::Other(format!("lexical index: {live} live documents for {len} texts")));
        }
        let mut seen = vec![false; len];
        for &id in ids.iter().flatten().filter(|&&id| id != DEAD) {
            if id as usize >= len || std::mem::replace(&mut seen[id as usize], true) {
                return Err(Error::Other(format!("lexical index: document id {id} repeated or out of range")));
            }
        }
        Ok(PartedBm25 { parts, ids, len, tokens, analyzer: analyzer()? })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Each document's analysed length, by id: what its statistics are made of (checks
    /// compare it across builds whose parts differ).
    pub fn lengths(&self) -> Vec<u32> {
        let mut out = vec![0; self.len];
        for (part, ids) in self.parts.iter().zip(&self.ids) {
            for (d, &id) in ids.iter().enumerate().filter(|(_, &id)| id != DEAD) {
                out[id as usize] = part.lengths[d];
            }
        }
        out
    }

    /// Documents held, dead ones included, and parts: for reports.
    pub fn held(&self) -> (usize, usize) {
        (self.ids.iter().map(Vec::len).sum(), self.parts.len())
    }

    /// The `k` best documents for `query` by BM25, best first, ties to the lower id.
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<(u32, f32)>> {
        let terms = self.terms(query);
        if terms.is_empty() || k == 0 || self.len == 0 {
            return Ok(Vec::new());
        }
        let err = |e: std::io::Error| Error::Other(format!("lexical index: {e}"));
        let average = self.tokens as f32 / self.len as f32;
        let mut scores: FxHashMap<u32, f32> = FxHashMap::default();
        let mut hits: Vec<(u32, u32, u8)> = Vec::new();
        for term in &terms {
            hits.clear();
            for (part, ids) in self.parts.iter().zip(&self.ids) {
                let key = Term::from_field_text(part.text, term);
                for (segment, positions) in part.searcher.segment_readers().iter().zip(&part.positions) {
                    let index =
                        segment.inverted_index(part.text).map_err(|e| Error::Other(format!("lexical index: {e}")))?;
                    let Some(mut postings) = index.read_postings(&key, IndexRecordOption::WithFreqs).map_err(err)?
                    else {
                        continue;
                    };
                    let norms = segment
                        .get_fieldnorms_reader(part.text)
                        .map_err(|e| Error::Other(format!("lexical index: {e}")))?;
                    let mut doc = postings.doc();
                    while doc != TERMINATED {
                        let id = ids[positions[doc as usize] as usize];
                        if id != DEAD {
                            hits.push((id, postings.term_freq(), norms.fieldnorm_id(doc)));
                        }
                        doc = postings.advance();
                    }
                }
            }
            if hits.is_empty() {
                continue;
            }
            let weight = Bm25Weight::for_one_term(hits.len() as u64, self.len as u64, average);
            for &(id, tf, norm) in &hits {
                *scores.entry(id).or_insert(0.0) += weight.score(norm, tf);
            }
        }
        let mut ranked: Vec<(u32, f32)> = scores.into_iter().collect();
        let by_rank = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if ranked.len() > k {
            ranked.select_nth_unstable_by(k - 1, by_rank);
            ranked.truncate(k);
        }
        ranked.sort_unstable_by(by_rank);
        Ok(ranked)
    }

    /// The analysed, de-duplicated query terms, in the query's order.
    fn terms(&self, query: &str) -> Vec<String> {
        let mut terms = analyze(&mut self.analyzer.clone(), query);
        let mut seen = std::collections::HashSet::new();
        terms.retain(|t| seen.insert(t.clone()));
        terms
    }
}

impl LexicalIndex for PartedBm25 {
    fn search(&self, query: &str, k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        PartedBm25::search(self, query, k)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn as_parted(&self) -> Option<&PartedBm25> {
        Some(self)
    }
}

/// The analysed length of each text, as tantivy counts it for BM25.
fn count_tokens(texts: &[&str]) -> Result<Vec<u32>> {
    let mut analyzer = analyzer()?;
    Ok(texts
        .iter()
        .map(|t| {
            let mut stream = analyzer.token_stream(t);
            let mut n = 0u32;
            while stream.advance() {
                n += 1;
            }
            n
        })
        .collect())
}

/// A number no other part of this process or of others has drawn (time, process and a
/// counter), to name a part's folder.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    now ^ ((std::process::id() as u64) << 40) ^ n.rotate_left(20)
}

fn write_u32s(path: &Path, values: &[u32]) -> Result<()> {
    write_file(path, &values.iter().flat_map(|n| n.to_le_bytes()).collect::<Vec<u8>>(), false)
}

/// The collection's ids (each part's documents' in turn) split by part.
fn split_ids(parts: &[Arc<Part>], flat: &[u32]) -> std::result::Result<Vec<Vec<u32>>, String> {
    let held: usize = parts.iter().map(|p| p.docs()).sum();
    if flat.len() != held {
        return Err(format!("{} ids for {held} documents", flat.len()));
    }
    let mut rest = flat;
    let mut ids = Vec::with_capacity(parts.len());
    for part in parts {
        let (these, more) = rest.split_at(part.docs());
        ids.push(these.to_vec());
        rest = more;
    }
    Ok(ids)
}

fn read_u32s(path: &Path) -> Result<Vec<u32>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    u32s(&bytes).ok_or_else(|| Error::index(path, "not a whole number of 32-bit values"))
}

fn u32s(bytes: &[u8]) -> Option<Vec<u32>> {
    bytes
        .len()
        .is_multiple_of(4)
        .then(|| bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::TantivyBm25;

    const WORDS: [&str; 24] = [
        "bronze", "statue", "foundry", "marquis", "river", "castle", "founded", "cast", "bell", "tower", "north",
        "harbour", "king", "queen", "painter", "city", "bridge", "stone", "village", "mill", "abbey", "duke", "glass",
        "road",
    ];

    /// Text `seed`: a few words drawn by a small generator (lengths vary, words repeat).
    fn text(seed: u64) -> String {
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as usize
        };
        let n = 2 + next() % 12;
        (0..n).map(|_| WORDS[next() % WORDS.len()]).collect::<Vec<_>>().join(" ")
    }

    fn from(before: &[String], after: &[String]) -> Vec<Option<u32>> {
        let mut of: std::collections::HashMap<&str, Vec<u32>> = Default::default();
        for (i, t) in before.iter().enumerate().rev() {
            of.entry(t.as_str()).or_default().push(i as u32);
        }
        after.iter().map(|t| of.get_mut(t.as_str()).and_then(Vec::pop)).collect()
    }

    fn same_rankings(a: &PartedBm25, b: &PartedBm25) {
        for q in 0..30u64 {
            let query = text(1000 + q);
            for k in [1, 10, 1000] {
                let (x, y) = (a.search(&query, k).unwrap(), b.search(&query, k).unwrap());
                let bits = |v: &[(u32, f32)]| v.iter().map(|&(i, s)| (i, s.to_bits())).collect::<Vec<_>>();
                assert_eq!(bits(&x), bits(&y), "query {query:?}, k {k}");
            }
        }
    }

    /// Edit after edit (deletes, updates, additions), each collection ranks as a fresh
    /// one of its texts, to the bit; parts are folded and rebuilt along the way.
    #[test]
    fn an_edited_collection_ranks_as_a_fresh_one() {
        let mut texts: Vec<String> = (0..300).map(text).collect();
        let mut index = PartedBm25::new(&texts).unwrap();
        let (mut folded, mut rebuilt) = (false, false);
        for edit in 0..40u64 {
            let before = texts.clone();
            texts.retain(|t| !(t.len() + edit as usize).is_multiple_of(29));
            if let Some(t) = texts.get_mut((edit as usize * 7) % 250) {
                *t = text(5000 + edit);
            }
            texts.extend((0..3).map(|i| text(10_000 + edit * 10 + i)));
            if edit % 13 == 12 {
                texts.drain(..texts.len() / 2);
            }
            let (_, parts_before) = index.held();
            index = PartedBm25::after(&index, &texts, &from(&before, &texts)).unwrap();
            let (held, parts) = index.held();
            folded |= parts < parts_before && parts > 1;
            rebuilt |= parts == 1 && held == texts.len();
            assert!(parts <= MAX_PARTS && 4 * (held - texts.len()) <= held);
            same_rankings(&index, &PartedBm25::new(&texts).unwrap());
        }
        assert!(folded && rebuilt);
    }

    /// On disk: a collection written after an edit of another (its parts linked) opens
    /// and ranks as a fresh one; one-term scores are tantivy's own.
    #[test]
    fn collections_on_disk_rank_as_fresh_ones() {
        let dir = tempfile::tempdir().unwrap();
        let texts: Vec<String> = (0..200).map(text).collect();
        PartedBm25::create(&dir.path().join("a"), &texts, &|_| {}).unwrap();
        let mut edited: Vec<String> = texts[20..].to_vec();
        edited.push(text(777));
        let kept = from(&texts, &edited);
        let text = |i: usize| Cow::Borrowed(edited[i].as_str());
        PartedBm25::create_after(&dir.path().join("b"), &dir.path().join("a"), &text, &kept, &|_| {}).unwrap();
        let (a, b) =
            (PartedBm25::open(&dir.path().join("a")).unwrap(), PartedBm25::open(&dir.path().join("b")).unwrap());
        assert_eq!(b.held(), (201, 2));
        same_rankings(&a, &PartedBm25::new(&texts).unwrap());
        same_rankings(&b, &PartedBm25::new(&edited).unwrap());
        TantivyBm25::create(&dir.path().join("t"), &texts, &|_| {}).unwrap();
        let tantivy = TantivyBm25::open(&dir.path().join("t")).unwrap();
        for w in WORDS {
            let bits = |v: Vec<(u32, f32)>| v.into_iter().map(|(i, s)| (i, s.to_bits())).collect::<Vec<_>>();
            assert_eq!(bits(a.search(w, 50).unwrap()), bits(tantivy.search(w, 50).unwrap()), "{w}");
        }
    }
}
