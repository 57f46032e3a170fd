//! Sentence embedders run in-process on the [`encoder`](super::encoder): all-MiniLM-L6-v2
//! (the default) and all-mpnet-base-v2, each with the sentence-transformers recipe of its
//! model card: mean pooling over every token (special tokens included), L2-normalised,
//! inputs truncated to the model's `max_seq_length`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use super::encoder::Encoder;
use super::{Embedder, TextKind};
use crate::error::{Error, Result};

/// The sentence embedders hoprag runs itself; each name is also its model's name in
/// [`crate::models`] and the embedder id stored in an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LocalModel {
    /// all-MiniLM-L6-v2: 6 layers, 384 dimensions.
    MiniLm,
    /// all-mpnet-base-v2: 12 layers, 768 dimensions; stronger and about 8x the compute.
    MpNet,
}

impl LocalModel {
    pub const ALL: [LocalModel; 2] = [LocalModel::MiniLm, LocalModel::MpNet];

    pub fn id(self) -> &'static str {
        match self {
            LocalModel::MiniLm => "minilm",
            LocalModel::MpNet => "mpnet",
        }
    }

    /// sentence-transformers' `max_seq_length` for the model (the tokenizer files that
    /// ship with them say 128; the published vectors use these).
    pub fn max_tokens(self) -> usize {
        match self {
            LocalModel::MiniLm => 256,
            LocalModel::MpNet => 384,
        }
    }

    pub fn from_id(id: &str) -> Option<LocalModel> {
        Self::ALL.into_iter().find(|m| m.id() == id)
    }
}

pub struct LocalEmbedder {
    model: LocalModel,
    tokenizer: Tokenizer,
    encoder: Encoder,
}

impl LocalEmbedder {
    /// Loads a model from a folder with `config.json`, `tokenizer.json` and
    /// `model.safetensors`.
    pub fn load(model: LocalModel, dir: &Path) -> Result<Self> {
        let file = |name: &str| {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(Error::Model(format!(
                    "{} is missing; run `hoprag models fetch {id}` or point --model-dir / HOPRAG_{ID}_DIR at a \
                     folder with the model files",
                    p.display(),
                    id = model.id(),
                    ID = model.id().to_uppercase(),
                )))
            }
        };
        let encoder = Encoder::load(&file("config.json")?, &file("model.safetensors")?)?;
        let tokenizer_path = file("tokenizer.json")?;
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| Error::Model(format!("{}: {e}", tokenizer_path.display())))?;
        let max_length = model.max_tokens().min(encoder.config().max_tokens());
        tokenizer
            .with_truncation(Some(TruncationParams { max_length, ..Default::default() }))
            .map_err(|e| Error::Model(format!("{}: {e}", tokenizer_path.display())))?;
        // The files pad every text to 128 tokens; the encoder packs texts unpadded.
        tokenizer.with_padding(None);
        Ok(LocalEmbedder { model, tokenizer, encoder })
    }

    pub fn model(&self) -> LocalModel {
        self.model
    }

    fn encode(&self, texts: &[String]) -> Result<Vec<Encoding>> {
        // Without offsets: the encoder needs ids only, and offsets are most of the cost.
        self.tokenizer.encode_batch_fast(texts.to_vec(), true).map_err(|e| Error::Embedding(format!("tokenizer: {e}")))
    }
}

impl Embedder for LocalEmbedder {
    fn id(&self) -> &str {
        self.model.id()
    }

    fn dim(&self) -> usize {
        self.encoder.dim()
    }

    fn token_counts(&self, texts: &[String]) -> Option<Vec<usize>> {
        Some(self.encode(texts).ok()?.iter().map(Encoding::len).collect())
    }

    fn embed(&self, texts: &[String], kind: TextKind) -> Result<Vec<Vec<f32>>> {
        let encodings = self.encode(texts)?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        self.encoder.embed(&ids, kind)
    }
}
