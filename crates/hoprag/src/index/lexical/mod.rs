//! Lexical retrieval: the [`LexicalIndex`] seam and its tantivy BM25 implementation;
//! BM25 in parts that an edit extends ([`PartedBm25`]).

mod parts;

pub use parts::PartedBm25;
#[cfg(feature = "postgres")]
pub(crate) use parts::{Part as LexicalPart, IDS as PARTS_IDS};

use std::path::Path;

use tantivy::collector::TopDocs;
use tantivy::columnar::Column;
use tantivy::directory::{Directory, RamDirectory};
use tantivy::indexer::NoMergePolicy;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, StopWordFilter, TextAnalyzer,
};
use tantivy::{doc, IndexReader, IndexWriter, ReloadPolicy, Searcher, Term};

use crate::corpus::PassageIdx;
use crate::error::{Error, Result};

/// Scores passages against a text query by term statistics.
pub trait LexicalIndex: Send + Sync {
    /// The best `k` passages with their scores, best first.
    fn search(&self, query: &str, k: usize) -> Result<Vec<(PassageIdx, f32)>>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The collection in parts, where the index is one: an edit then indexes only the
    /// texts it brings ([`PartedBm25::after`]).
    fn as_parted(&self) -> Option<&PartedBm25> {
        None
    }
}

const TOKENIZER: &str = "hoprag_en";
/// Hits fetched past the k-th, to see the ties at its score (see `search`).
const TIE_MARGIN: usize = 16;
/// tantivy's list of an index's segments.
const META_FILE: &str = "meta.json";
/// Writer heap for index builds: tantivy's minimum is 15 MB; more only postpones segment
/// flushes.
const WRITER_HEAP: usize = 128 << 20;
/// In-memory indexes are over short texts (triples): a small heap (the segments stay in
/// memory anyway, and one segment searches fastest).
const RAM_WRITER_HEAP: usize = 32 << 20;
/// Texts up to which a part on disk is built in memory first (see `build_in_dir`).
const SMALL_IN_RAM: usize = 1024;

/// BM25 over `title + newline + text` with tantivy (k1 = 1.2, b = 0.75). Analysis:
/// split on non-alphanumerics, drop tokens over 40 bytes, lowercase, fold accents,
/// remove English stop words (as bm25s and Pyserini do for these benchmarks).
pub struct TantivyBm25 {
    searcher: Searcher,
    // Kept so the searcher's segments stay open.
    _reader: IndexReader,
    index: tantivy::Index,
    text: Field,
    /// Passage index of each document, per segment (a fast-field column).
    pids: Vec<Column<u64>>,
    len: usize,
}

fn schema() -> (Schema, Field, Field) {
    let mut b = Schema::builder();
    let pid = b.add_u64_field("pid", FAST);
    let indexing = TextFieldIndexing::default().set_tokenizer(TOKENIZER).set_index_option(IndexRecordOption::WithFreqs);
    let text = b.add_text_field("text", TextOptions::default().set_indexing_options(indexing));
    (b.build(), pid, text)
}

/// The analysis of every lexical index: one definition, so that the folder store's
/// tantivy index and the PostgreSQL store's postings cannot drift apart.
pub fn analyzer() -> Result<TextAnalyzer> {
    let stop = StopWordFilter::new(Language::English)
        .ok_or_else(|| Error::Other("tantivy has no English stop-word list".into()))?;
    Ok(TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(stop)
        .build())
}

/// The terms BM25 indexes for `text` with an [`analyzer`], in order, repeats kept
/// (their count is the document length tantivy records).
pub fn analyze(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut stream = analyzer.token_stream(text);
    let mut terms = Vec::new();
    while stream.advance() {
        terms.push(stream.token().text.clone());
    }
    terms
}

/// An index held in memory only, over `texts` (document `i` is `texts[i]`, its `pid`
/// field `i`).
fn build_in_ram(texts: &[&str], progress: &dyn Fn(usize)) -> Result<(tantivy::Index, RamDirectory)> {
    let ram = RamDirectory::create();
    let index = tantivy::Index::create(ram.clone(), schema().0, tantivy::IndexSettings::default())
        .map_err(|e| Error::Other(format!("lexical index: {e}")))?;
    register_tokenizer(&index)?;
    TantivyBm25::append(&index, Path::new(""), 0, texts, progress)?;
    Ok((index, ram))
}

/// The files of `index`'s searchable segments, by name (a segment lists its optional
/// files, deletes and positions, whether or not they were written).
fn segment_files(index: &tantivy::Index, dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let metas = index.searchable_segment_metas().map_err(tantivy_err(dir))?;
    let mut names: Vec<std::path::PathBuf> = metas.iter().flat_map(|m| m.list_files()).collect();
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

/// An index in the new folder `dir` over `texts` (document `i` is `texts[i]`, its `pid`
/// field `i`).
fn build_in_dir(dir: &Path, texts: &[&str], progress: &dyn Fn(usize)) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    if texts.len() <= SMALL_IN_RAM {
        // An edit's few texts: built in memory and each file written once (through
        // tantivy's own folder, a commit of one passage took 90-150 ms here).
        let (index, ram) = build_in_ram(texts, progress)?;
        // Read from the folder itself: the index's view of it takes each file's footer off.
        for name in segment_files(&index, dir)?.iter().filter(|n| ram.exists(n).unwrap_or(false)) {
            let err = |e: String| Error::index(dir, format!("lexical index: {}: {e}", name.display()));
            let file = ram.open_read(name).map_err(|e| err(e.to_string()))?;
            let bytes = file.read_bytes().map_err(|e| err(e.to_string()))?;
            crate::files::write_file(&dir.join(name), bytes.as_slice(), false)?;
        }
        let meta =
            ram.atomic_read(Path::new(META_FILE)).map_err(|e| Error::index(dir, format!("lexical index: {e}")))?;
        return crate::files::write_file(&dir.join(META_FILE), &meta, false);
    }
    let (schema, _, _) = schema();
    let index = tantivy::Index::create_in_dir(dir, schema).map_err(tantivy_err(dir))?;
    register_tokenizer(&index)?;
    TantivyBm25::append(&index, dir, 0, texts, progress)
}

fn register_tokenizer(index: &tantivy::Index) -> Result<()> {
    index.tokenizers().register(TOKENIZER, analyzer()?);
    Ok(())
}

fn tantivy_err(dir: &Path) -> impl Fn(tantivy::TantivyError) -> Error + '_ {
    move |e| Error::index(dir, format!("lexical index: {e}"))
}

impl TantivyBm25 {
    /// Creates the index in `dir` with the given texts; passage `i` is `texts[i]`.
    pub fn create(dir: &Path, texts: &[String], progress: &dyn Fn(usize)) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let (schema, _, _) = schema();
        let index = tantivy::Index::create_in_dir(dir, schema).map_err(tantivy_err(dir))?;
        register_tokenizer(&index)?;
        Self::append(&index, dir, 0, texts, progress)
    }

    /// Adds texts as passages `first, first + 1, ..` to the index in `dir`.
    pub fn add(dir: &Path, first: PassageIdx, texts: &[String], progress: &dyn Fn(usize)) -> Result<()> {
        let index = tantivy::Index::open_in_dir(dir).map_err(tantivy_err(dir))?;
        register_tokenizer(&index)?;
        Self::append(&index, dir, first, texts, progress)
    }

    fn append<S: AsRef<str>>(
        index: &tantivy::Index,
        dir: &Path,
        first: PassageIdx,
        texts: &[S],
        progress: &dyn Fn(usize),
    ) -> Result<()> {
        let (_, pid, text) = schema();
        // One indexing thread and no merges, so that which documents share a segment, in
        // what order, follows from the texts alone: BM25 sums a document's term scores in
        // an order that depends on its segment, and two builds of the same passages must
        // score them with the same bits. (Several threads take documents as they race for
        // them; merges start as segments arrive, and order those of one size by their
        // random ids.)
        let heap = if dir.as_os_str().is_empty() { RAM_WRITER_HEAP } else { WRITER_HEAP };
        let mut writer: IndexWriter = index.writer_with_num_threads(1, heap).map_err(tantivy_err(dir))?;
        writer.set_merge_policy(Box::new(NoMergePolicy));
        for (i, t) in texts.iter().enumerate() {
            writer.add_document(doc!(pid => first as u64 + i as u64, text => t.as_ref())).map_err(tantivy_err(dir))?;
            if i % 1024 == 1023 {
                progress(1024);
            }
        }
        progress(texts.len() % 1024);
        writer.commit().map_err(tantivy_err(dir))?;
        writer.wait_merging_threads().map_err(tantivy_err(dir))?;
        Ok(())
    }

    pub fn open(dir: &Path) -> Result<Self> {
        let index = tantivy::Index::open_in_dir(dir).map_err(tantivy_err(dir))?;
        register_tokenizer(&index)?;
        Self::from_index(index, dir)
    }

    /// The files of the index in `dir` that a reader needs, as `(name, bytes)`:
    /// `meta.json` first, then every file of its searchable segments, by name. Segment
    /// files never change once written (their names carry the segment's id), so a store
    /// that keeps them needs to copy only the names it does not hold yet.
    pub fn files(dir: &Path) -> Result<Vec<(String, u64)>> {
        let index = tantivy::Index::open_in_dir(dir).map_err(tantivy_err(dir))?;
        let mut names: Vec<String> =
            segment_files(&index, dir)?.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        names.insert(0, META_FILE.to_string());
        names
            .into_iter()
            // A segment lists its optional files (deletes, positions) whether or not
            // they were written: only those that exist are part of the index.
            .filter_map(|name| match std::fs::metadata(dir.join(&name)) {
                Ok(m) => Some(Ok((name, m.len()))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && name != META_FILE => None,
                Err(e) => Some(Err(Error::io(dir.join(&name), e))),
            })
            .collect()
    }

    /// An index held in memory, from the files [`TantivyBm25::files`] listed (`meta.json`
    /// among them); `location` names where they came from, for messages.
    pub fn from_files(location: &str, files: Vec<(String, Vec<u8>)>) -> Result<Self> {
        let here = Path::new(location);
        let dir = RamDirectory::create();
        for (name, bytes) in &files {
            dir.atomic_write(Path::new(name), bytes).map_err(|e| Error::index(location, format!("{name}: {e}")))?;
        }
        let index = tantivy::Index::open(dir).map_err(tantivy_err(here))?;
        register_tokenizer(&index)?;
        Self::from_index(index, here)
    }

    /// Copies `files` (as [`TantivyBm25::files`] returns them) into the folder `dir`, so
    /// that [`TantivyBm25::add`] can append to an index kept elsewhere.
    pub fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        for (name, bytes) in files {
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(|e| Error::io(&path, e))?;
        }
        Ok(())
    }

    fn from_index(index: tantivy::Index, dir: &Path) -> Result<Self> {
        let err = tantivy_err(dir);
        let text = index.schema().get_field("text").map_err(&err)?;
        let reader: IndexReader =
            index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into().map_err(&err)?;
        let searcher = reader.searcher();
        let pids = searcher
            .segment_readers()
            .iter()
            .map(|s| s.fast_fields().u64("pid"))
            .collect::<tantivy::Result<Vec<_>>>()
            .map_err(&err)?;
        let len = searcher.num_docs() as usize;
        Ok(TantivyBm25 { searcher, _reader: reader, index, text, pids, len })
    }

    /// The analysed, de-duplicated query terms.
    fn terms(&self, query: &str) -> Result<Vec<Term>> {
        let mut analyzer =
            self.index.tokenizer_for_field(self.text).map_err(|e| Error::Other(format!("lexical index: {e}")))?;
        let mut stream = analyzer.token_stream(query);
        let mut terms: Vec<Term> = Vec::new();
        while stream.advance() {
            let term = Term::from_field_text(self.text, &stream.token().text);
            if !terms.contains(&term) {
                terms.push(term);
            }
        }
        Ok(terms)
    }
}

impl LexicalIndex for TantivyBm25 {
    fn search(&self, query: &str, k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        let terms = self.terms(query)?;
        if terms.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        // A disjunction of term queries is exactly BM25: the sum of each term's score.
        let clauses: Vec<(Occur, Box<dyn Query>)> = terms
            .into_iter()
            .map(|t| (Occur::Should, Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs)) as Box<dyn Query>))
            .collect();
        let query = BooleanQuery::new(clauses);
        // Ties go to the lower passage index, whatever the segments: tantivy orders them
        // by document address, which depends on how the documents fell into segments (and
        // segments are listed by random id), and two indexes of the same passages must
        // rank alike. So fetch past the k-th score's ties, and sort.
        let mut limit = k.saturating_add(TIE_MARGIN);
        loop {
            let top = self
                .searcher
                .search(&query, &TopDocs::with_limit(limit))
                .map_err(|e| Error::Other(format!("lexical search: {e}")))?;
            let complete = top.len() < limit || top.get(k.saturating_sub(1)).map(|x| x.0) != top.last().map(|x| x.0);
            if complete || limit >= self.len {
                let mut hits = top
                    .into_iter()
                    .map(|(score, addr)| {
                        let pid = self.pids[addr.segment_ord as usize]
                            .first(addr.doc_id)
                            .ok_or_else(|| Error::Other("lexical index document without a passage id".into()))?;
                        Ok((pid as PassageIdx, score))
                    })
                    .collect::<Result<Vec<_>>>()?;
                hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                hits.truncate(k);
                return Ok(hits);
            }
            limit = limit.saturating_mul(2);
        }
    }

    fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_bm25_and_maps_passage_ids() {
        let dir = tempfile::tempdir().unwrap();
        let texts: Vec<String> = [
            "Varn River\nThe Varn river flows east.",
            "Quillfort\nA port city on the bay.",
            "Skell\nThe Skell is a tributary of the Orlane river.",
        ]
        .map(String::from)
        .to_vec();
        TantivyBm25::create(dir.path(), &texts, &|_| {}).unwrap();
        TantivyBm25::add(dir.path(), 3, &["Émile\nA river pilot.".to_string()], &|_| {}).unwrap();
        let idx = TantivyBm25::open(dir.path()).unwrap();
        assert_eq!(idx.len(), 4);
        let hits = idx.search("Which port city is on the bay?", 5).unwrap();
        assert_eq!(hits[0].0, 1);
        let hits = idx.search("emile", 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 3, "accents are folded");
        let hits = idx.search("river", 5).unwrap();
        assert_eq!(hits.len(), 3);
        assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
        assert!(idx.search("the of a", 5).unwrap().is_empty(), "stop words only");

        // The same index from its files, in memory, and appended to elsewhere.
        let files: Vec<(String, Vec<u8>)> = TantivyBm25::files(dir.path())
            .unwrap()
            .into_iter()
            .map(|(name, len)| {
                let bytes = std::fs::read(dir.path().join(&name)).unwrap();
                assert_eq!(bytes.len() as u64, len, "{name}");
                (name, bytes)
            })
            .collect();
        assert_eq!(files[0].0, "meta.json");
        assert!(files.len() > 1);
        let copy = TantivyBm25::from_files("memory", files.clone()).unwrap();
        assert_eq!(copy.len(), 4);
        for q in ["river", "emile", "Which port city is on the bay?"] {
            assert_eq!(copy.search(q, 5).unwrap(), idx.search(q, 5).unwrap(), "{q}");
        }
        let elsewhere = tempfile::tempdir().unwrap();
        TantivyBm25::write_files(elsewhere.path(), &files).unwrap();
        TantivyBm25::add(elsewhere.path(), 4, &["Orlane\nA river of the west.".to_string()], &|_| {}).unwrap();
        let grown = TantivyBm25::files(elsewhere.path()).unwrap();
        let old: Vec<&String> = files.iter().map(|f| &f.0).collect();
        assert!(grown.iter().any(|(n, _)| !old.contains(&n)), "the append wrote a segment of its own");
        let grown = TantivyBm25::open(elsewhere.path()).unwrap();
        assert_eq!(grown.len(), 5);
        assert_eq!(grown.search("orlane", 5).unwrap().len(), 2);

        let ram = super::PartedBm25::new(&texts).unwrap();
        assert_eq!(ram.len(), 3);
        assert_eq!(ram.search("Which port city is on the bay?", 5).unwrap()[0].0, 1);
        let river: Vec<PassageIdx> = ram.search("river", 5).unwrap().iter().map(|h| h.0).collect();
        assert_eq!(river.len(), 2);
        assert!(river.contains(&0) && river.contains(&2));
    }

    /// Two builds of the same texts hold the same documents in the same segments, so BM25
    /// gives every passage the same score to the bit (tantivy sums a document's term
    /// scores in an order that depends on its segment).
    #[test]
    fn two_builds_of_the_same_texts_score_alike() {
        let words: Vec<String> = (0..300).map(|i| format!("w{}", i * 7919 % 1000)).collect();
        let mut seed = 17u64;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % n
        };
        let texts: Vec<String> = (0..3000)
            .map(|i| {
                let len = 5 + next(80);
                let body: Vec<&str> = (0..len).map(|_| words[next(words.len())].as_str()).collect();
                format!("Passage {i}\n{}", body.join(" "))
            })
            .collect();
        let build = || {
            let dir = tempfile::tempdir().unwrap();
            TantivyBm25::create(dir.path(), &texts, &|_| {}).unwrap();
            let index = tantivy::Index::open_in_dir(dir.path()).unwrap();
            let mut segments: Vec<u32> =
                index.searchable_segment_metas().unwrap().iter().map(|m| m.max_doc()).collect();
            segments.sort_unstable();
            (dir, segments)
        };
        let (a, segments_a) = build();
        let (b, segments_b) = build();
        assert_eq!(segments_a, segments_b);
        let (a, b) = (TantivyBm25::open(a.path()).unwrap(), TantivyBm25::open(b.path()).unwrap());
        let bits = |hits: Vec<(PassageIdx, f32)>| hits.into_iter().map(|(p, s)| (p, s.to_bits())).collect::<Vec<_>>();
        for q in ["w0 w7 w14", "w919 w838 w757 w676 passage", "w3 w5 w8 w13 w21 w34 w55 w89"] {
            assert_eq!(bits(a.search(q, 100).unwrap()), bits(b.search(q, 100).unwrap()), "{q}");
        }
    }
}
