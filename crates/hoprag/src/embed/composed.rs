//! The composed embedder of the scale benchmark (docs/scale.md): a text's vector is the
//! L2-normalised, IDF-weighted sum of the centred MiniLM vectors of its words
//! (lowercased runs of letters and digits), read from a word table. Words not in the
//! table are skipped; a text with none of its words gets a fixed unit vector.
//!
//! `hoprag bench scale` makes the table (it embeds every word of its vocabulary with
//! MiniLM, once) and writes it to [`table_dir`] as `words-<key>.json` (a [`TableMeta`]:
//! the words, their document frequencies) and `words-<key>.f32` (the unit word vectors,
//! little-endian, one row per word), the key hashing the vocabulary and the model. This
//! module applies a table, so that every command opens the benchmark's indexes.
//!
//! The id names the table, `composed-minilm-words-centred-idf-v1:<key>`, so that no
//! other vocabulary is ever used silently. Indexes built before the id named it record
//! the bare [`ID`]; they open while the cache holds exactly one table.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{l2_normalize, Embedder, LocalModel, TextKind};
use crate::error::{Error, Result};

/// The embedder's id without the table's key: what indexes built before it named the
/// table record.
pub const ID: &str = "composed-minilm-words-centred-idf-v1";

/// How to make a table, for the errors that find none.
const MAKE: &str = "`hoprag bench scale --passages 1000 --data DIR` makes it (DIR: the shared data folder), or \
                    set HOPRAG_CACHE to the cache folder that holds it";

/// Lowercased words of a text: runs of letters and digits.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// The words of a table and how many source passages contain each.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Vocabulary {
    /// Sorted, distinct.
    pub words: Vec<String>,
    /// Source passages containing the word (0 for words only the questions use).
    pub df: Vec<u32>,
    /// Source passages counted.
    pub documents: u32,
}

impl Vocabulary {
    /// The words of `passages` (counted for IDF) and of `extra` texts (questions).
    pub fn new<'a>(passages: impl IntoIterator<Item = &'a str>, extra: impl IntoIterator<Item = &'a str>) -> Self {
        let mut df: BTreeMap<String, u32> = BTreeMap::new();
        let mut documents = 0u32;
        for p in passages {
            documents += 1;
            let mut seen: Vec<String> = words(p).collect();
            seen.sort_unstable();
            seen.dedup();
            for w in seen {
                *df.entry(w).or_default() += 1;
            }
        }
        for t in extra {
            for w in words(t) {
                df.entry(w).or_default();
            }
        }
        let (words, df) = df.into_iter().unzip();
        Vocabulary { words, df, documents }
    }

    /// Smoothed IDF: ln((1 + documents) / (1 + df)) + 1, always positive.
    fn idf(&self) -> Vec<f32> {
        let n = self.documents as f64;
        self.df.iter().map(|&d| (((1.0 + n) / (1.0 + d as f64)).ln() + 1.0) as f32).collect()
    }

    /// The table's key, which names its files and ends the embedder's id: it changes with
    /// the words, their counts and the model.
    pub fn key(&self, model: &str) -> String {
        let mut text = String::with_capacity(self.words.len() * 8);
        for (w, d) in self.words.iter().zip(&self.df) {
            text.push_str(w);
            text.push(' ');
            text.push_str(&d.to_string());
            text.push('\n');
        }
        crate::corpus::Passage::content_id(model, &format!("{}\n{text}", self.documents))
    }
}

/// A table's `words-<key>.json`.
#[derive(Debug, Serialize, Deserialize)]
pub struct TableMeta {
    /// The model of the word vectors (`minilm`).
    pub model: String,
    pub dim: usize,
    pub vocabulary: Vocabulary,
}

/// Where the tables are kept: `<hoprag cache>/scale` (`HOPRAG_CACHE` moves the cache).
pub fn table_dir() -> PathBuf {
    crate::models::cache_dir().join("scale")
}

/// The two files of the table `key` in `dir`: its [`TableMeta`] and its vectors.
pub fn table_files(dir: &Path, key: &str) -> (PathBuf, PathBuf) {
    (dir.join(format!("words-{key}.json")), dir.join(format!("words-{key}.f32")))
}

/// The table `key` of `dir`, checked against its key: its description and its unit word
/// vectors (row-major).
pub fn read_table(dir: &Path, key: &str) -> Result<(TableMeta, Vec<f32>)> {
    let (meta_path, data_path) = table_files(dir, key);
    let missing = |path: &Path| Error::input(path, format!("not found: the word table of embedder {ID}:{key}; {MAKE}"));
    let meta = std::fs::read(&meta_path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => missing(&meta_path),
        _ => Error::io(&meta_path, e),
    })?;
    let meta: TableMeta = serde_json::from_slice(&meta).map_err(|e| Error::input(&meta_path, e.to_string()))?;
    let minilm = LocalModel::MiniLm.id();
    if meta.model != minilm {
        return Err(Error::input(
            &meta_path,
            format!("model {:?}: this embedder composes {minilm:?} vectors", meta.model),
        ));
    }
    // The key is a hash of the description: a renamed or edited table is refused rather
    // than applied under another table's name.
    let actual = meta.vocabulary.key(&meta.model);
    if actual != key {
        return Err(Error::input(
            &meta_path,
            format!("describes the table {actual}, not {key} (renamed or changed since it was made); {MAKE}"),
        ));
    }
    let bytes = std::fs::read(&data_path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => missing(&data_path),
        _ => Error::io(&data_path, e),
    })?;
    let rows = meta.vocabulary.words.len();
    if meta.dim == 0 || bytes.len() != rows * meta.dim * 4 {
        return Err(Error::input(
            &data_path,
            format!("{} bytes: {rows} words of {} dimensions (4 bytes each) expected", bytes.len(), meta.dim),
        ));
    }
    let vectors = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Ok((meta, vectors))
}

/// The keys of the tables in `dir` (those with a `words-<key>.json`), sorted.
pub fn table_keys(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut keys = Vec::new();
    for entry in entries {
        let name = entry.map_err(|e| Error::io(dir, e))?.file_name();
        let key = name.to_str().and_then(|n| n.strip_prefix("words-")?.strip_suffix(".json"));
        if let Some(key) = key.filter(|k| valid_key(k)) {
            keys.push(key.to_string());
        }
    }
    keys.sort_unstable();
    Ok(keys)
}

/// A key is a file name's part: nothing that could leave the table folder.
fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Reads an embedder id or spec: `Some(Ok(key))` for this embedder's (`None` for the
/// bare [`ID`]), `None` for another embedder's.
pub(super) fn parse(s: &str) -> Option<Result<Option<String>>> {
    let rest = s.strip_prefix(ID)?;
    if rest.is_empty() {
        return Some(Ok(None));
    }
    let key = rest.strip_prefix(':')?;
    Some(match valid_key(key) {
        true => Ok(Some(key.to_string())),
        false => Err(Error::Config(format!(
            "embedder {s:?}: {key:?} is no word table key (letters, digits, `-` and `_`); expected {ID}[:KEY]"
        ))),
    })
}

/// The key of the one table in `dir`, for the bare id.
pub(super) fn only_key(dir: &Path) -> Result<String> {
    let mut keys = table_keys(dir)?;
    match keys.len() {
        1 => Ok(keys.pop().expect("one key")),
        0 => Err(Error::input(dir, format!("no word table (words-<key>.json and .f32) for embedder {ID}; {MAKE}"))),
        n => Err(Error::input(
            dir,
            format!(
                "{n} word tables ({}) and embedder {ID} names none of them (an index built before ids named \
                 their table): keep only the one that made the index here, or point HOPRAG_CACHE at a cache \
                 whose scale/ holds only it",
                keys.iter().map(|k| format!("words-{k}.json")).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// Texts whose words the embedder knew, and the words it did not know.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Coverage {
    pub texts: u64,
    pub words: u64,
    pub unknown_words: u64,
    /// Texts with no known word at all (given a fixed unit vector).
    pub empty_texts: u64,
}

pub struct ComposedEmbedder {
    id: String,
    dim: usize,
    index: HashMap<String, u32>,
    /// Word vectors, row-major, each already centred and scaled by its IDF.
    vectors: Vec<f32>,
    texts: AtomicU64,
    words: AtomicU64,
    unknown: AtomicU64,
    empty: AtomicU64,
}

impl ComposedEmbedder {
    /// From unit MiniLM word vectors (row-major, `dim` wide, one per vocabulary word);
    /// its id names the table's key.
    pub fn new(vocabulary: &Vocabulary, dim: usize, mut vectors: Vec<f32>) -> Result<Self> {
        if dim == 0 || vectors.len() != vocabulary.words.len() * dim {
            return Err(Error::Embedding(format!(
                "{} word vectors of dimension {dim} expected, got {} floats",
                vocabulary.words.len(),
                vectors.len()
            )));
        }
        let mut mean = vec![0f64; dim];
        for row in vectors.chunks_exact(dim) {
            mean.iter_mut().zip(row).for_each(|(m, &x)| *m += x as f64);
        }
        let rows = vocabulary.words.len().max(1) as f64;
        let mean: Vec<f32> = mean.into_iter().map(|m| (m / rows) as f32).collect();
        for (row, w) in vectors.chunks_exact_mut(dim).zip(vocabulary.idf()) {
            row.iter_mut().zip(&mean).for_each(|(x, m)| *x = (*x - m) * w);
        }
        let index = vocabulary.words.iter().enumerate().map(|(i, w)| (w.clone(), i as u32)).collect();
        Ok(ComposedEmbedder {
            id: format!("{ID}:{}", vocabulary.key(LocalModel::MiniLm.id())),
            dim,
            index,
            vectors,
            texts: AtomicU64::new(0),
            words: AtomicU64::new(0),
            unknown: AtomicU64::new(0),
            empty: AtomicU64::new(0),
        })
    }

    /// The table `key` of `dir`, or with `None` the only table there, under the id that
    /// names it that way (an index's manifest must match it to the letter).
    pub fn open(dir: &Path, key: Option<&str>) -> Result<Self> {
        let (meta, vectors) = match key {
            Some(key) => read_table(dir, key)?,
            None => read_table(dir, &only_key(dir)?)?,
        };
        let embedder = ComposedEmbedder::new(&meta.vocabulary, meta.dim, vectors)?;
        Ok(if key.is_some() { embedder } else { embedder.with_bare_id() })
    }

    /// The same embedder answering to the bare [`ID`], as indexes built before the id
    /// named the table record it.
    pub fn with_bare_id(self) -> Self {
        ComposedEmbedder { id: ID.to_string(), ..self }
    }

    pub fn coverage(&self) -> Coverage {
        Coverage {
            texts: self.texts.load(Ordering::Relaxed),
            words: self.words.load(Ordering::Relaxed),
            unknown_words: self.unknown.load(Ordering::Relaxed),
            empty_texts: self.empty.load(Ordering::Relaxed),
        }
    }

    fn compose(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dim];
        let (mut known, mut unknown) = (0u64, 0u64);
        for w in words(text) {
            match self.index.get(&w) {
                Some(&i) => {
                    let row = &self.vectors[i as usize * self.dim..(i as usize + 1) * self.dim];
                    v.iter_mut().zip(row).for_each(|(a, b)| *a += b);
                    known += 1;
                }
                None => unknown += 1,
            }
        }
        self.texts.fetch_add(1, Ordering::Relaxed);
        self.words.fetch_add(known + unknown, Ordering::Relaxed);
        self.unknown.fetch_add(unknown, Ordering::Relaxed);
        if known == 0 || v.iter().all(|&x| x == 0.0) {
            // A zero vector has no direction (and no cosine); every such text gets the
            // same fixed one, counted.
            self.empty.fetch_add(1, Ordering::Relaxed);
            v.iter_mut().for_each(|x| *x = 0.0);
            v[0] = 1.0;
        }
        l2_normalize(&mut v);
        v
    }
}

impl Embedder for ComposedEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[String], _kind: TextKind) -> Result<Vec<Vec<f32>>> {
        Ok(texts.par_iter().map(|t| self.compose(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::EmbedderSpec;

    fn tiny() -> ComposedEmbedder {
        let vocab = Vocabulary::new(["Alpha beta.", "beta gamma"], ["Delta?"]);
        assert_eq!(vocab.words, ["alpha", "beta", "delta", "gamma"]);
        assert_eq!(vocab.df, [1, 2, 0, 1]);
        ComposedEmbedder::new(&vocab, 4, basis()).unwrap()
    }

    /// Orthogonal unit vectors, one per word: their mean is 0.25 everywhere.
    fn basis() -> Vec<f32> {
        let mut v = vec![0f32; 16];
        for i in 0..4 {
            v[i * 4 + i] = 1.0;
        }
        v
    }

    fn unit(v: Vec<f32>) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5)
    }

    /// Writes a table into `dir` as `hoprag bench scale` does; returns its key.
    fn write_table(dir: &Path, vocabulary: &Vocabulary, dim: usize, vectors: &[f32]) -> String {
        let key = vocabulary.key(LocalModel::MiniLm.id());
        let (meta, data) = table_files(dir, &key);
        let bytes: Vec<u8> = vectors.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(data, bytes).unwrap();
        let m = TableMeta { model: "minilm".into(), dim, vocabulary: vocabulary.clone() };
        std::fs::write(meta, serde_json::to_vec(&m).unwrap()).unwrap();
        key
    }

    fn tiny_table(dir: &Path) -> String {
        write_table(dir, &Vocabulary::new(["Alpha beta.", "beta gamma"], ["Delta?"]), 4, &basis())
    }

    #[test]
    fn vectors_are_unit_length_and_deterministic() {
        let e = tiny();
        let texts: Vec<String> = ["Alpha, BETA and gamma!", "delta", "beta beta alpha"].map(String::from).to_vec();
        let a = e.embed(&texts, TextKind::Passage).unwrap();
        let b = e.embed(&texts, TextKind::Query).unwrap();
        assert_eq!(a, b);
        for v in &a {
            let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "{v:?}");
        }
        // One word: its own vector minus the vocabulary's mean.
        assert!(close(&a[1], &unit(vec![-0.25, -0.25, 0.75, -0.25])), "{:?}", a[1]);
        // Two words: the centred vectors weighted by IDF, alpha (df 1) above beta (df 2).
        let idf = |df: f32| ((1.0f32 + 2.0) / (1.0 + df)).ln() + 1.0;
        let (wa, wb) = (idf(1.0), idf(2.0));
        let want = unit(
            (0..4).map(|i| wa * ([1.0, 0.0, 0.0, 0.0][i] - 0.25) + wb * ([0.0, 1.0, 0.0, 0.0][i] - 0.25)).collect(),
        );
        let ab = e.embed_one("alpha beta", TextKind::Passage).unwrap();
        assert!(close(&ab, &want), "{ab:?} vs {want:?}");
        assert!(ab[0] > ab[1], "{ab:?}");
    }

    #[test]
    fn unknown_words_are_skipped_and_counted() {
        let e = tiny();
        let v = e.embed_one("alpha zeta eta", TextKind::Passage).unwrap();
        assert!(close(&v, &e.embed_one("alpha", TextKind::Passage).unwrap()), "only alpha counts: {v:?}");
        let empty = e.embed_one("zeta", TextKind::Passage).unwrap();
        assert_eq!(empty, [1.0, 0.0, 0.0, 0.0]);
        let c = e.coverage();
        assert_eq!((c.texts, c.words, c.unknown_words, c.empty_texts), (3, 5, 3, 1));
    }

    #[test]
    fn the_key_follows_the_words() {
        let a = Vocabulary::new(["alpha beta"], []);
        let b = Vocabulary::new(["alpha gamma"], []);
        assert_ne!(a.key("m"), b.key("m"));
        assert_ne!(a.key("m"), a.key("n"));
        assert_eq!(a.key("m"), Vocabulary::new(["beta alpha"], []).key("m"));
    }

    /// The bits the benchmark's own composed embedder (crates/hoprag-bench, before it
    /// moved here) gave for these texts on this table: the scale indexes' vectors are
    /// these, and must not change.
    #[test]
    fn vectors_are_the_bits_the_benchmark_gave() {
        let words: Vec<String> =
            ["alpha", "beta", "delta", "epsilon", "eta", "gamma", "iota", "kappa", "lambda", "mu", "theta", "zeta"]
                .map(String::from)
                .to_vec();
        let dim = 6;
        let mut x: u64 = 42;
        let mut vectors = Vec::new();
        for _ in 0..words.len() {
            let mut row: Vec<f32> = (0..dim)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
                })
                .collect();
            l2_normalize(&mut row);
            vectors.extend(row);
        }
        let vocabulary = Vocabulary { words, df: vec![3, 1, 5, 2, 1, 0, 4, 1, 1, 6, 0, 2], documents: 8 };
        let e = ComposedEmbedder::new(&vocabulary, dim, vectors).unwrap();
        let texts: Vec<String> = [
            "Alpha beta gamma",
            "delta, delta! epsilon",
            "unknown words only",
            "",
            "Zeta eta THETA iota kappa lambda mu alpha",
            "mu",
        ]
        .map(String::from)
        .to_vec();
        let want: [[u32; 6]; 6] = [
            [0x3f1fef9b, 0xbeb08b3a, 0xbef909bd, 0xbebc52bd, 0xbeaf21dc, 0x3d331f31],
            [0x3eddbbdf, 0x3e97702e, 0x3c3ca0ec, 0xbe987711, 0x3eee1ed2, 0xbf25e0ee],
            [0x3f800000, 0, 0, 0, 0, 0],
            [0x3f800000, 0, 0, 0, 0, 0],
            [0xbe940ded, 0xbf00b470, 0x3ed444fd, 0x3f296851, 0x3cf2dc98, 0x3e6ba025],
            [0xbf2cd064, 0xbd2132ec, 0xbe9fafb8, 0x3ec32e99, 0xbefadf48, 0xbe7af886],
        ];
        let got: Vec<Vec<u32>> = e
            .embed(&texts, TextKind::Passage)
            .unwrap()
            .iter()
            .map(|v| v.iter().map(|x| x.to_bits()).collect())
            .collect();
        assert_eq!(got, want.map(|r| r.to_vec()).to_vec());
    }

    #[test]
    fn ids_parse_with_and_without_the_key() {
        assert_eq!(EmbedderSpec::from_id(ID).unwrap(), EmbedderSpec::Composed { key: None });
        assert_eq!(
            EmbedderSpec::from_id(&format!("{ID}:0f97b7611f2a6852")).unwrap(),
            EmbedderSpec::Composed { key: Some("0f97b7611f2a6852".into()) }
        );
        let err = EmbedderSpec::from_id(&format!("{ID}:../models")).unwrap_err().to_string();
        assert!(err.contains("\"../models\" is no word table key"), "{err}");
        // Another name that merely starts like it is no composed embedder.
        let err = EmbedderSpec::from_id(&format!("{ID}-v2")).unwrap_err().to_string();
        assert!(err.starts_with("configuration: unknown embedder"), "{err}");
        assert_eq!(parse("minilm").map(|r| r.is_ok()), None);
    }

    #[test]
    fn a_table_opens_by_its_key_and_alone_by_the_bare_id() {
        let dir = tempfile::tempdir().unwrap();
        let key = tiny_table(dir.path());
        let keyed = ComposedEmbedder::open(dir.path(), Some(&key)).unwrap();
        assert_eq!(keyed.id(), format!("{ID}:{key}"));
        assert_eq!(keyed.id(), tiny().id(), "made and read back: the same id");
        let bare = ComposedEmbedder::open(dir.path(), None).unwrap();
        assert_eq!((bare.id(), bare.dim()), (ID, 4));
        let texts = ["alpha beta".to_string(), "gamma delta zeta".to_string()];
        let want = tiny().embed(&texts, TextKind::Passage).unwrap();
        assert_eq!(keyed.embed(&texts, TextKind::Query).unwrap(), want);
        assert_eq!(bare.embed(&texts, TextKind::Query).unwrap(), want);
    }

    #[test]
    fn the_bare_id_with_two_tables_is_an_error_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let a = tiny_table(dir.path());
        let b = write_table(dir.path(), &Vocabulary::new(["one two"], []), 2, &[1.0, 0.0, 0.0, 1.0]);
        let err = ComposedEmbedder::open(dir.path(), None).err().unwrap().to_string();
        assert!(err.starts_with(&dir.path().display().to_string()), "{err}");
        assert!(err.contains("2 word tables") && err.contains(&format!("words-{a}.json")), "{err}");
        assert!(err.contains(&format!("words-{b}.json")), "{err}");
        // Each still opens by its key.
        assert_eq!(ComposedEmbedder::open(dir.path(), Some(&b)).unwrap().dim(), 2);
    }

    #[test]
    fn a_missing_table_is_an_error_naming_its_file_and_how_to_make_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = ComposedEmbedder::open(dir.path(), Some("0f97b7611f2a6852")).err().unwrap().to_string();
        let file = dir.path().join("words-0f97b7611f2a6852.json");
        assert!(err.starts_with(&format!("{}: not found", file.display())), "{err}");
        assert!(err.contains("hoprag bench scale"), "{err}");
        // No table at all for the bare id: the folder is named.
        let err = ComposedEmbedder::open(dir.path(), None).err().unwrap().to_string();
        assert!(err.starts_with(&format!("{}: no word table", dir.path().display())), "{err}");
        assert!(err.contains("hoprag bench scale"), "{err}");
        // The description without its vectors: the vectors' file is named.
        let key = tiny_table(dir.path());
        let (_, data) = table_files(dir.path(), &key);
        std::fs::remove_file(&data).unwrap();
        let err = ComposedEmbedder::open(dir.path(), Some(&key)).err().unwrap().to_string();
        assert!(err.starts_with(&format!("{}: not found", data.display())), "{err}");
    }

    #[test]
    fn a_renamed_or_truncated_table_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let key = tiny_table(dir.path());
        let (meta, data) = table_files(dir.path(), &key);
        let (other_meta, other_data) = table_files(dir.path(), "0000000000000000");
        std::fs::rename(&meta, &other_meta).unwrap();
        std::fs::rename(&data, &other_data).unwrap();
        let err = ComposedEmbedder::open(dir.path(), Some("0000000000000000")).err().unwrap().to_string();
        assert!(err.contains(&format!("describes the table {key}, not 0000000000000000")), "{err}");
        std::fs::rename(&other_meta, &meta).unwrap();
        std::fs::write(&other_data, [0u8; 12]).unwrap();
        std::fs::rename(&other_data, &data).unwrap();
        let err = ComposedEmbedder::open(dir.path(), Some(&key)).err().unwrap().to_string();
        assert!(err.starts_with(&format!("{}: 12 bytes: 4 words of 4 dimensions", data.display())), "{err}");
    }
}
