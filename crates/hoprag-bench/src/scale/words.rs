//! The scale benchmark's embedder: any text's vector is composed from cached MiniLM
//! vectors of its words, so that a million passages (and their entities, triples and the
//! questions) embed in seconds and the benchmark times the engine, not the model.
//!
//! A text's vector is the L2-normalised, IDF-weighted sum of the centred vectors of its
//! words (lowercased runs of letters and digits). Each word's vector is what MiniLM gives
//! for the word alone, computed once for the vocabulary (every word of the source corpus
//! and of the question files) and cached on disk. MiniLM's single-word vectors share a
//! large common component, and function words are in every passage: a plain sum puts
//! every passage near one direction (random pairs of 2wiki passages at cosine 0.89 on
//! average, against 0.07 with MiniLM's own vectors). Subtracting the vocabulary's mean
//! vector and weighting by IDF (smoothed, over the source passages) brings that to 0.24
//! and shares more of MiniLM's own nearest neighbours (docs/scale.md). These are
//! bag-of-words compositions of real MiniLM vectors, not MiniLM's passage vectors, with
//! their own id so that no real index is ever queried with them.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;
use hoprag::embed::{embed_passages, l2_normalize, load_embedder, Embedder, EmbedderSpec, LocalModel, TextKind};
use hoprag::index::Matrix;
use hoprag::progress::Progress;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// The embedder id recorded in the benchmark's index manifests.
pub const COMPOSED_ID: &str = "composed-minilm-words-centred-idf-v1";

/// Lowercased words of a text: runs of letters and digits.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// The words to embed and how many source passages contain each.
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

    /// A name for the cache files that changes with the words and the model.
    fn key(&self, model: &str) -> String {
        let mut text = String::with_capacity(self.words.len() * 8);
        for (w, d) in self.words.iter().zip(&self.df) {
            text.push_str(w);
            text.push(' ');
            text.push_str(&d.to_string());
            text.push('\n');
        }
        hoprag::corpus::Passage::content_id(model, &format!("{}\n{text}", self.documents))
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
    /// From unit word vectors (row-major, `dim` wide, one per vocabulary word).
    pub fn new(vocabulary: &Vocabulary, dim: usize, mut vectors: Vec<f32>) -> anyhow::Result<Self> {
        anyhow::ensure!(
            dim > 0 && vectors.len() == vocabulary.words.len() * dim,
            "{} word vectors of dimension {dim} expected, got {} floats",
            vocabulary.words.len(),
            vectors.len()
        );
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
            dim,
            index,
            vectors,
            texts: AtomicU64::new(0),
            words: AtomicU64::new(0),
            unknown: AtomicU64::new(0),
            empty: AtomicU64::new(0),
        })
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
        COMPOSED_ID
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[String], _kind: TextKind) -> hoprag::Result<Vec<Vec<f32>>> {
        Ok(texts.par_iter().map(|t| self.compose(t)).collect())
    }
}

/// The cache folder of the scale benchmark: `<hoprag cache>/scale`.
pub fn cache_dir() -> PathBuf {
    hoprag::models::cache_dir().join("scale")
}

#[derive(Serialize, Deserialize)]
struct CacheMeta {
    model: String,
    dim: usize,
    vocabulary: Vocabulary,
}

/// The MiniLM vector of every vocabulary word, from `dir` when cached there, else
/// embedded now (one word per text) and cached. Returns the vectors and whether they came
/// from the cache.
pub fn word_vectors(
    vocabulary: &Vocabulary,
    dir: &Path,
    settings: &hoprag::embed::EmbedderSettings,
    progress: &dyn Progress,
) -> anyhow::Result<(usize, Vec<f32>, bool)> {
    let model = LocalModel::MiniLm.id();
    let key = vocabulary.key(model);
    let (meta_path, data_path) = (dir.join(format!("words-{key}.json")), dir.join(format!("words-{key}.f32")));
    if let (Ok(meta), Ok(bytes)) = (std::fs::read(&meta_path), std::fs::read(&data_path)) {
        let meta: CacheMeta =
            serde_json::from_slice(&meta).with_context(|| format!("reading {}", meta_path.display()))?;
        let matrix = Matrix::from_le_bytes(meta.dim, &bytes);
        if let Some(m) = matrix.filter(|m| meta.vocabulary == *vocabulary && m.rows() == vocabulary.words.len()) {
            return Ok((meta.dim, m.into_flat(), true));
        }
        log::warn!("{} does not match the vocabulary; embedding the words again", data_path.display());
    }
    let embedder = load_embedder(&EmbedderSpec::Local(LocalModel::MiniLm), settings)?;
    let dim = embedder.dim();
    let matrix = Matrix::from_flat(
        dim,
        embed_passages(embedder.as_ref(), &vocabulary.words, 256, "embedding words (once)", progress)?,
    );
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Data first, then the description that makes it valid: an interrupted write is
    // redone next time rather than read.
    std::fs::write(&data_path, matrix.to_le_bytes()).with_context(|| format!("writing {}", data_path.display()))?;
    let meta = CacheMeta { model: model.to_string(), dim, vocabulary: vocabulary.clone() };
    std::fs::write(&meta_path, serde_json::to_vec(&meta)?)
        .with_context(|| format!("writing {}", meta_path.display()))?;
    Ok((dim, matrix.into_flat(), false))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_cache_key_follows_the_words() {
        let a = Vocabulary::new(["alpha beta"], []);
        let b = Vocabulary::new(["alpha gamma"], []);
        assert_ne!(a.key("m"), b.key("m"));
        assert_ne!(a.key("m"), a.key("n"));
        assert_eq!(a.key("m"), Vocabulary::new(["beta alpha"], []).key("m"));
    }

    #[test]
    fn cached_vectors_are_read_back_without_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let vocab = Vocabulary::new(["alpha beta"], []);
        let key = vocab.key(LocalModel::MiniLm.id());
        let floats = vec![0.5f32, 0.5, 1.0, 0.0];
        let meta = CacheMeta { model: "minilm".into(), dim: 2, vocabulary: vocab.clone() };
        std::fs::write(dir.path().join(format!("words-{key}.json")), serde_json::to_vec(&meta).unwrap()).unwrap();
        let bytes: Vec<u8> = floats.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(dir.path().join(format!("words-{key}.f32")), bytes).unwrap();
        let settings = hoprag::embed::EmbedderSettings {
            minilm_dir: Some(dir.path().join("no-model-here")),
            ..Default::default()
        };
        let (dim, read, cached) = word_vectors(&vocab, dir.path(), &settings, &hoprag::progress::Silent).unwrap();
        assert!(cached);
        assert_eq!((dim, read), (2, floats));
    }
}
