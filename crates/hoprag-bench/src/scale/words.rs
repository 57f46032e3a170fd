//! The scale benchmark's word table: the MiniLM vector of every word of its vocabulary
//! (every word of the source corpus and of the question files), computed once and
//! cached, so that a million passages (and their entities, triples and the questions)
//! embed in seconds through the composed embedder and the benchmark times the engine,
//! not the model.
//!
//! Applying a table (composing a text's vector from its words' vectors) is the library's
//! [`hoprag::embed::composed`], so that every command opens the benchmark's indexes;
//! this module makes the table that it reads.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use hoprag::embed::composed::{self, TableMeta, Vocabulary};
use hoprag::embed::{embed_passages, load_embedder, EmbedderSpec, LocalModel};
use hoprag::index::Matrix;
use hoprag::progress::Progress;

/// The cache folder of the scale benchmark, where the word tables are read from:
/// `<hoprag cache>/scale`.
pub fn cache_dir() -> PathBuf {
    composed::table_dir()
}

/// Whether the index in `spec` records the composed embedder's bare id, as indexes built
/// before the id named the word table do: the benchmark's embedder then answers to it,
/// so that their queries (`--index`) and an added graph (`--add-graph`, which must
/// record the index's own embedder) keep matching the manifest.
pub fn records_bare_id(spec: &str) -> anyhow::Result<bool> {
    let store = hoprag::store::open(spec)?;
    let manifest = store.manifest().with_context(|| format!("reading the index in {}", store.location()))?;
    Ok(manifest.is_some_and(|m| m.embedder.id == composed::ID))
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
    let (meta_path, data_path) = composed::table_files(dir, &key);
    if meta_path.exists() {
        match composed::read_table(dir, &key) {
            Ok((meta, vectors)) if meta.vocabulary == *vocabulary => return Ok((meta.dim, vectors, true)),
            Ok(_) => log::warn!("{} does not match the vocabulary; embedding the words again", meta_path.display()),
            Err(e) => log::warn!("{e}; embedding the words again"),
        }
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
    let meta = TableMeta { model: model.to_string(), dim, vocabulary: vocabulary.clone() };
    std::fs::write(&meta_path, serde_json::to_vec(&meta)?)
        .with_context(|| format!("writing {}", meta_path.display()))?;
    Ok((dim, matrix.into_flat(), false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoprag::embed::{ComposedEmbedder, Embedder};

    #[test]
    fn cached_vectors_are_read_back_without_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let vocab = Vocabulary::new(["alpha beta"], []);
        let key = vocab.key(LocalModel::MiniLm.id());
        let floats = vec![0.5f32, 0.5, 1.0, 0.0];
        let meta = TableMeta { model: "minilm".into(), dim: 2, vocabulary: vocab.clone() };
        std::fs::write(dir.path().join(format!("words-{key}.json")), serde_json::to_vec(&meta).unwrap()).unwrap();
        let bytes: Vec<u8> = floats.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(dir.path().join(format!("words-{key}.f32")), bytes).unwrap();
        let settings = hoprag::embed::EmbedderSettings {
            minilm_dir: Some(dir.path().join("no-model-here")),
            ..Default::default()
        };
        let (dim, read, cached) = word_vectors(&vocab, dir.path(), &settings, &hoprag::progress::Silent).unwrap();
        assert!(cached);
        assert_eq!((dim, read.clone()), (2, floats));
        // What the benchmark builds with is what every command opens by the id it records.
        let made = ComposedEmbedder::new(&vocab, dim, read).unwrap();
        let opened = ComposedEmbedder::open(dir.path(), Some(&key)).unwrap();
        assert_eq!(made.id(), format!("{}:{key}", composed::ID));
        assert_eq!(opened.id(), made.id());
    }
}
