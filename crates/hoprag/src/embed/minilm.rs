//! all-MiniLM-L6-v2 run in-process with candle: BERT, mean pooling over the attention
//! mask, 256 tokens, L2-normalised (the sentence-transformers recipe for this model).

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use super::{Embedder, TextKind};
use crate::error::{Error, Result};

pub struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    dim: usize,
    device: Device,
}

impl MiniLm {
    pub const ID: &'static str = "minilm";
    /// sentence-transformers' `max_seq_length` for this model (the bundled
    /// tokenizer.json says 128; the published vectors use 256).
    pub const MAX_TOKENS: usize = 256;
    /// Tokens per forward pass (texts x longest text): batches of short texts (entity
    /// names, triples) hold many more texts than batches of passages, which keeps the
    /// matrix products large enough to use both cores well.
    const BATCH_TOKENS: usize = 8192;
    const MAX_BATCH: usize = 32;

    /// Loads the model from a folder with `config.json`, `tokenizer.json` and
    /// `model.safetensors`.
    pub fn load(dir: &Path) -> Result<Self> {
        let file = |name: &str| {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(Error::Model(format!(
                    "{} is missing; run `hoprag models fetch minilm` or point --model-dir / \
                     HOPRAG_MINILM_DIR at a folder with the model files",
                    p.display()
                )))
            }
        };
        let config_path = file("config.json")?;
        let config: Config =
            serde_json::from_slice(&std::fs::read(&config_path).map_err(|e| Error::io(&config_path, e))?)
                .map_err(|e| Error::Model(format!("{}: {e}", config_path.display())))?;
        let mut tokenizer =
            Tokenizer::from_file(file("tokenizer.json")?).map_err(|e| Error::Model(format!("tokenizer.json: {e}")))?;
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: Self::MAX_TOKENS, ..Default::default() }))
            .map_err(|e| Error::Model(format!("tokenizer: {e}")))?;
        // The bundled tokenizer.json pads every text to 128 tokens; `forward` pads each
        // batch to its own longest text instead, so short texts (queries, entity names,
        // triples) cost their length, not 128 tokens.
        tokenizer.with_padding(None);
        let device = Device::Cpu;
        // SAFETY: the weights file is memory-mapped read-only; hoprag never writes it,
        // and the model cache is not modified while an index is in use.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[file("model.safetensors")?], DType::F32, &device)? };
        let model = BertModel::load(vb, &config)?;
        Ok(MiniLm { model, tokenizer, dim: config.hidden_size, device })
    }

    /// One forward pass over encodings of similar length, padded here to the longest.
    fn forward(&self, encodings: &[&Encoding]) -> Result<Vec<Vec<f32>>> {
        let n = encodings.len();
        let len = encodings.iter().map(|e| e.len()).max().unwrap_or(0);
        let padded = |f: &dyn Fn(&Encoding) -> &[u32]| -> Vec<u32> {
            let mut out = Vec::with_capacity(n * len);
            for e in encodings {
                let row = f(e);
                out.extend_from_slice(row);
                out.resize(out.len() + len - row.len(), 0);
            }
            out
        };
        let ids = Tensor::from_vec(padded(&|e| e.get_ids()), (n, len), &self.device)?;
        let type_ids = Tensor::from_vec(padded(&|e| e.get_type_ids()), (n, len), &self.device)?;
        let mask = Tensor::from_vec(padded(&|e| e.get_attention_mask()), (n, len), &self.device)?;
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?; // (n, len, dim)
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (n, dim)
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?; // (n, 1)
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        Ok(mean.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}

impl Embedder for MiniLm {
    fn id(&self) -> &str {
        Self::ID
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn token_counts(&self, texts: &[String]) -> Option<Vec<usize>> {
        // Without offsets: counting needs none, and tracking them is most of the cost.
        let encodings = self.tokenizer.encode_batch_fast(texts.to_vec(), true).ok()?;
        Some(encodings.iter().map(Encoding::len).collect())
    }

    fn embed(&self, texts: &[String], _kind: TextKind) -> Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Embedding(format!("tokenizer: {e}")))?;
        // Batch texts of similar token length together so little compute goes to
        // padding, then restore the caller's order.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        let mut start = 0;
        while start < order.len() {
            let mut end = start + 1;
            while end < order.len()
                && end - start < Self::MAX_BATCH
                && (end - start + 1) * encodings[order[end]].len() <= Self::BATCH_TOKENS
            {
                end += 1;
            }
            let batch: Vec<&Encoding> = order[start..end].iter().map(|&i| &encodings[i]).collect();
            for (&i, v) in order[start..end].iter().zip(self.forward(&batch)?) {
                out[i] = v;
            }
            start = end;
        }
        Ok(out)
    }
}
