//! Test helpers: a deterministic embedder, paths to shared data, a fixture server and
//! the faults it can inject.
#![allow(dead_code)]

pub mod faults;
pub mod fixture;
#[cfg(feature = "postgres")]
pub mod pg;

use std::path::{Path, PathBuf};

use hoprag::embed::{l2_normalize, Embedder, TextKind};
use hoprag::Result;

/// Bag-of-words feature hashing: deterministic, instant, and similar texts get similar
/// vectors, which is all index tests need.
pub struct HashEmbedder {
    pub id: String,
    pub dim: usize,
}

impl HashEmbedder {
    pub fn new() -> Self {
        HashEmbedder { id: "minilm".into(), dim: 64 }
    }
}

impl Embedder for HashEmbedder {
    fn id(&self) -> &str {
        &self.id
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[String], _: TextKind) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; self.dim];
                for w in t.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2) {
                    let h = w
                        .to_lowercase()
                        .bytes()
                        .fold(1469598103934665603u64, |h, b| (h ^ b as u64).wrapping_mul(1099511628211));
                    v[(h % self.dim as u64) as usize] += 1.0;
                }
                v[0] += 0.01; // never the zero vector
                l2_normalize(&mut v);
                v
            })
            .collect())
    }

    /// A span read in its text: its words with half the weight of the text's first
    /// line (the title), so the same statement in two passages gets two vectors, as a
    /// model's token states would; spans past 2,000 bytes are not read.
    fn embed_spans(
        &self,
        texts: &[String],
        spans: &[Vec<std::ops::Range<usize>>],
    ) -> Option<Result<Vec<hoprag::embed::ReadText>>> {
        let read = |text: &String, spans: &Vec<std::ops::Range<usize>>| -> Result<hoprag::embed::ReadText> {
            let vector = self.embed(std::slice::from_ref(text), TextKind::Passage)?.remove(0);
            let title = text.lines().next().unwrap_or("");
            let context = self.embed(&[title.to_string()], TextKind::Passage)?.remove(0);
            let spans = spans
                .iter()
                .map(|span| {
                    let words = text.get(span.clone()).filter(|_| span.end <= 2000 && !span.is_empty())?;
                    let mut v = self.embed(&[words.to_string()], TextKind::Passage).ok()?.remove(0);
                    v.iter_mut().zip(&context).for_each(|(a, b)| *a += 0.5 * b);
                    l2_normalize(&mut v);
                    Some(v)
                })
                .collect();
            Ok(hoprag::embed::ReadText { vector, spans })
        };
        Some(texts.iter().zip(spans).map(|(t, s)| read(t, s)).collect())
    }
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `../shared/data` beside the checkout, if present.
pub fn shared_data() -> Option<PathBuf> {
    let p = repo_root().join("../shared/data");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("skipping: {} not found", p.display());
        None
    }
}

pub fn demo() -> PathBuf {
    repo_root().join("demo")
}

/// Builds a folder index of `corpus` at `dir` with the [`HashEmbedder`] and the default
/// options, and returns its store.
#[allow(dead_code)] // not every test binary builds one
pub fn hash_index(
    dir: &std::path::Path,
    corpus: &hoprag::corpus::LoadedCorpus,
) -> std::sync::Arc<dyn hoprag::store::Store> {
    let store = hoprag::store::folder(dir);
    hoprag::store::build_index(
        store.as_ref(),
        corpus,
        vec![],
        &HashEmbedder::new(),
        &hoprag::store::BuildOptions::default(),
        &hoprag::progress::Silent,
    )
    .unwrap();
    store
}

/// Copies a folder tree (an index, to damage or change a copy of it).
#[allow(dead_code)]
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// MiniLM from the model cache, or the feature-hashing embedder where it is not installed
/// (a failure instead when `HOPRAG_REQUIRE_MODELS` or `CI` is set).
#[allow(dead_code)]
pub fn minilm_or_hashing() -> std::sync::Arc<dyn Embedder> {
    use hoprag::embed::{EmbedderSettings, EmbedderSpec};
    let required = std::env::var_os("HOPRAG_REQUIRE_MODELS").is_some() || std::env::var_os("CI").is_some();
    match hoprag::embed::load_embedder(&EmbedderSpec::from_id("minilm").unwrap(), &EmbedderSettings::default()) {
        Ok(e) => e,
        Err(e) if required => panic!("the tests install minilm: {e}"),
        Err(e) => {
            eprintln!("minilm not installed ({e}); using the feature-hashing embedder");
            std::sync::Arc::new(HashEmbedder::new())
        }
    }
}

/// A fresh index of `passages` at `dir`, as `hoprag index` builds one: passages, vectors
/// and lexical statistics, then the heuristic graph with its walk solved.
pub fn fresh_index(
    dir: &Path,
    passages: Vec<hoprag::corpus::Passage>,
    embedder: &dyn Embedder,
) -> std::sync::Arc<dyn hoprag::store::Store> {
    use hoprag::progress::Silent;
    use hoprag::store;
    let store = store::folder(dir);
    let corpus = hoprag::corpus::LoadedCorpus { passages, ..Default::default() };
    store::build_index(
        store.as_ref(),
        &corpus,
        vec!["fresh".into()],
        embedder,
        &store::BuildOptions::default(),
        &Silent,
    )
    .unwrap();
    let index = store.load().unwrap();
    let triples = store::triples_without_llm(&index, None).unwrap();
    let options = hoprag::graph::GraphOptions::default();
    store::build_graph(store.as_ref(), &index, triples, embedder, &options, &Silent).unwrap();
    store
}
