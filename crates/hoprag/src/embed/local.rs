//! Sentence embedders run in-process on the [`encoder`](super::encoder): all-MiniLM-L6-v2
//! (the default) and all-mpnet-base-v2, each with the sentence-transformers recipe of its
//! model card: mean pooling over every token (special tokens included), L2-normalised,
//! inputs truncated to the model's `max_seq_length`.

use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use super::encoder::Encoder;
use super::{Embedder, ReadText, TextKind};
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

    fn embed_spans(&self, texts: &[String], spans: &[Vec<Range<usize>>]) -> Option<Result<Vec<ReadText>>> {
        Some(self.read_spans(texts, spans))
    }
}

impl LocalEmbedder {
    /// [`Embedder::embed_spans`]: each text's tokens with their byte offsets, one forward
    /// pass pooling the whole text and each span.
    fn read_spans(&self, texts: &[String], spans: &[Vec<Range<usize>>]) -> Result<Vec<ReadText>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Embedding(format!("tokenizer: {e}")))?;
        // Each byte span's tokens: the text's own tokens (not [CLS] or [SEP]) whose
        // bytes overlap it. The first pool is the whole sequence: the text's vector.
        let tokens: Vec<Vec<Option<Range<usize>>>> = encodings
            .iter()
            .zip(spans)
            .map(|(e, spans)| spans.iter().map(|span| token_range(e, span)).collect())
            .collect();
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let pools: Vec<Vec<Range<usize>>> = ids
            .iter()
            .zip(&tokens)
            .map(|(ids, t)| std::iter::once(0..ids.len()).chain(t.iter().map(|r| r.clone().unwrap_or(0..0))).collect())
            .collect();
        let vectors = self.encoder.embed_spans(&ids, &pools, TextKind::Passage)?;
        Ok(vectors
            .into_iter()
            .zip(tokens)
            .map(|(v, t)| {
                let mut v = v.into_iter();
                let vector = v.next().expect("the whole text's pool");
                ReadText { vector, spans: v.zip(t).map(|(v, t)| t.map(|_| v)).collect() }
            })
            .collect())
    }
}

/// The tokens of `e` whose byte offsets overlap `span`, special tokens left out; `None`
/// when there are none (the span is past the truncation, or empty).
fn token_range(e: &Encoding, span: &Range<usize>) -> Option<Range<usize>> {
    let special = e.get_special_tokens_mask();
    let mut inside = e
        .get_offsets()
        .iter()
        .enumerate()
        .filter(|&(i, &(start, end))| special[i] == 0 && start < span.end && end > span.start)
        .map(|(i, _)| i);
    let first = inside.next()?;
    let last = inside.next_back().unwrap_or(first);
    Some(first..last + 1)
}
