//! Text embedders: the [`Embedder`] seam, the in-process sentence encoders (MiniLM, the
//! default, MPNet and EmbeddingGemma), any OpenAI-compatible `/v1/embeddings` endpoint,
//! and the scale benchmark's composed word vectors.

mod coalesce;
pub mod composed;
pub mod encoder;
pub mod gemma;
mod local;
mod openai;

/// The model registry used to live here; kept as an alias for existing callers.
pub use crate::models;

use self::coalesce::Coalescing;
pub use composed::ComposedEmbedder;
pub use gemma::{GemmaEmbedder, GemmaOptions, QueryPrompt};
pub use local::{LocalEmbedder, LocalModel};
pub use openai::{OpenAiEmbedder, OpenAiEmbedderConfig};

use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Whether a text is a query or a passage: some models embed them differently
/// (instruction prefixes for NV-Embed-v2, E5, BGE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    Query,
    Passage,
}

/// Turns texts into L2-normalised vectors, so that a dot product is a cosine.
pub trait Embedder: Send + Sync {
    /// Identifies the model (and anything else that changes the vectors); stored in the
    /// index manifest so that queries are never embedded by a different model.
    fn id(&self) -> &str;
    fn dim(&self) -> usize;
    /// Embeds a batch; the output has one vector per input, in order.
    fn embed(&self, texts: &[String], kind: TextKind) -> Result<Vec<Vec<f32>>>;

    /// The number of tokens the model reads for each text (special tokens included),
    /// where the embedder can tell without running the model; `None` otherwise. GEAR's
    /// pooled sequence scoring weights cached triple vectors by it.
    fn token_counts(&self, _texts: &[String]) -> Option<Vec<usize>> {
        None
    }

    /// Each passage text read once: its own vector (as [`Embedder::embed`] gives it, to
    /// the bit) and the vectors of its byte `spans`, read in the context of the whole
    /// text (its tokens' states pooled over each span); `None` where the embedder cannot
    /// (a remote model). A span the model does not read (past its token limit, or
    /// empty) has no vector.
    fn embed_spans(&self, _texts: &[String], _spans: &[Vec<Range<usize>>]) -> Option<Result<Vec<ReadText>>> {
        None
    }

    fn embed_one(&self, text: &str, kind: TextKind) -> Result<Vec<f32>> {
        let mut v = self.embed(&[text.to_string()], kind)?;
        v.pop().ok_or_else(|| Error::Embedding("embedder returned no vector".into()))
    }
}

/// A passage text read by [`Embedder::embed_spans`].
#[derive(Debug, Clone, PartialEq)]
pub struct ReadText {
    pub vector: Vec<f32>,
    pub spans: Vec<Option<Vec<f32>>>,
}

/// Which embedder to use, as written on the command line and in manifests:
/// `minilm`, `mpnet`, `embeddinggemma[:SETTINGS]`, `openai:MODEL` or
/// `composed-minilm-words-centred-idf-v1[:KEY]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EmbedderSpec {
    Local(LocalModel),
    /// EmbeddingGemma-300M with its prompt and dimension settings ([`gemma`]).
    Gemma(GemmaOptions),
    OpenAi {
        model: String,
    },
    /// The scale benchmark's composed MiniLM word vectors ([`composed`]), from the word
    /// table `key` names; `None` (indexes built before the id named it): the only table.
    Composed {
        key: Option<String>,
    },
}

impl std::str::FromStr for EmbedderSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        if let Some(model) = LocalModel::from_id(s) {
            return Ok(EmbedderSpec::Local(model));
        }
        if let Some(options) = GemmaOptions::parse(s) {
            return Ok(EmbedderSpec::Gemma(options?));
        }
        if let Some(key) = composed::parse(s) {
            return Ok(EmbedderSpec::Composed { key: key? });
        }
        match s.split_once(':') {
            Some(("openai", model)) if !model.is_empty() => Ok(EmbedderSpec::OpenAi { model: model.to_string() }),
            _ => Err(Error::Config(format!(
                "unknown embedder {s:?}: expected `minilm`, `mpnet`, `embeddinggemma[:SETTINGS]`, `openai:MODEL` or \
                 `{}[:KEY]`",
                composed::ID
            ))),
        }
    }
}

impl EmbedderSpec {
    /// Recovers the spec from an embedder id stored in a manifest.
    pub fn from_id(id: &str) -> Result<Self> {
        id.parse()
    }

    /// The spec a new index records: the composed embedder's table named by its key (the
    /// only table, for the bare id), so that no other table is ever used for it; any other
    /// spec as it is.
    pub fn pinned(self) -> Result<Self> {
        match self {
            EmbedderSpec::Composed { key: None } => {
                Ok(EmbedderSpec::Composed { key: Some(composed::only_key(&composed::table_dir())?) })
            }
            other => Ok(other),
        }
    }

    /// The embedder of an entity graph's entity and fact vectors beside this one, unless
    /// asked otherwise: MiniLM beside EmbeddingGemma, whose ~10x cost per token would
    /// multiply the graph's build time for a measured difference of a point or so
    /// (docs/embeddinggemma.md, "The graph's own vectors"); else this embedder itself.
    pub fn default_graph_embedder(&self) -> EmbedderSpec {
        match self {
            EmbedderSpec::Gemma(_) => EmbedderSpec::Local(LocalModel::MiniLm),
            other => other.clone(),
        }
    }
}

/// Settings needed to construct an embedder; see [`crate::Config`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EmbedderSettings {
    /// Folder holding MiniLM's `model.safetensors`, `tokenizer.json`, `config.json`;
    /// defaults to the model cache. (MPNet's: `HOPRAG_MPNET_DIR`, else the cache.)
    pub minilm_dir: Option<std::path::PathBuf>,
    pub openai: OpenAiEmbedderConfig,
}

/// Builds the embedder a spec names.
pub fn load_embedder(spec: &EmbedderSpec, settings: &EmbedderSettings) -> Result<Arc<dyn Embedder>> {
    Ok(match spec {
        EmbedderSpec::Local(model) => {
            let dir = match (&settings.minilm_dir, model) {
                (Some(d), LocalModel::MiniLm) => d.clone(),
                _ => models::require(model.id())?,
            };
            // Concurrent queries (the server) share forward passes.
            Arc::new(Coalescing::new(LocalEmbedder::load(*model, &dir)?))
        }
        EmbedderSpec::Gemma(options) => {
            let dir = models::require(gemma::NAME)?;
            Arc::new(Coalescing::new(GemmaEmbedder::load(&dir, *options)?))
        }
        EmbedderSpec::OpenAi { model } => {
            let mut cfg = settings.openai.clone();
            cfg.model = model.clone();
            Arc::new(OpenAiEmbedder::new(cfg)?)
        }
        EmbedderSpec::Composed { key } => Arc::new(ComposedEmbedder::open(&composed::table_dir(), key.as_deref())?),
    })
}

/// Embeds many texts in batches, calling `progress` with the number done after each.
pub fn embed_all(
    embedder: &dyn Embedder,
    texts: &[String],
    kind: TextKind,
    batch: usize,
    progress: &dyn Fn(usize),
) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(batch.max(1)) {
        out.extend(embedder.embed(chunk, kind)?);
        progress(chunk.len());
    }
    Ok(out)
}

/// Embeds texts as passages into one flat row-major buffer, checking every vector's
/// dimension, with `step` on the progress bar; shared by index and graph builds.
pub fn embed_passages(
    embedder: &dyn Embedder,
    texts: &[String],
    batch: usize,
    step: &str,
    progress: &dyn crate::progress::Progress,
) -> Result<Vec<f32>> {
    progress.start(step, texts.len() as u64);
    let vectors = embed_all(embedder, texts, TextKind::Passage, batch, &|n| progress.advance(n as u64));
    progress.finish();
    let vectors = vectors?;
    let dim = embedder.dim();
    if let Some((i, v)) = vectors.iter().enumerate().find(|(_, v)| v.len() != dim) {
        return Err(Error::Embedding(format!("vector {i} has {} dimensions, expected {dim}", v.len())));
    }
    let mut flat = Vec::with_capacity(vectors.len() * dim);
    for v in vectors {
        flat.extend_from_slice(&v);
    }
    Ok(flat)
}

/// Scales a vector to unit length (left as is if zero).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
