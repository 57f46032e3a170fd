//! The transformer weights of a GGUF file, one variant per architecture candle's quantized
//! models cover.

use std::io::Cursor;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_gemma3, quantized_llama};

use crate::error::{Error, Result};

/// Loaded weights. Cloning shares the tensors (reference-counted) and copies only the
/// per-layer KV caches, so a clone is a fresh, independent conversation.
#[derive(Clone)]
pub enum Weights {
    /// `general.architecture = llama` (SmolLM2, Llama, Mistral-style models).
    Llama(quantized_llama::ModelWeights),
    /// `general.architecture = gemma3`.
    Gemma3(quantized_gemma3::ModelWeights),
}

impl Weights {
    /// Builds the weights the metadata's architecture names. Returns them with the
    /// longest sequence (prompt and answer) they can run.
    pub fn load<R: std::io::Read + std::io::Seek>(
        content: Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<(Weights, usize)> {
        if content.tensor_infos.values().any(|t| slow_on_cpu(t.ggml_dtype)) {
            let (content, bytes) = requantize(content, reader, device)?;
            return Self::build(content, &mut Cursor::new(bytes), device);
        }
        Self::build(content, reader, device)
    }

    fn build<R: std::io::Read + std::io::Seek>(
        content: Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<(Weights, usize)> {
        let arch = match content.metadata.get("general.architecture") {
            Some(Value::String(a)) => a.clone(),
            _ => return Err(Error::Model("GGUF metadata general.architecture: missing".into())),
        };
        let trained = content
            .metadata
            .get(&format!("{arch}.context_length"))
            .and_then(|v| v.to_u32().ok().map(|n| n as usize).or_else(|| v.to_u64().ok().map(|n| n as usize)));
        // candle precomputes rotary tables up to a fixed length per architecture.
        let (weights, table) = match arch.as_str() {
            "llama" => (
                Weights::Llama(quantized_llama::ModelWeights::from_gguf(content, reader, device)?),
                quantized_llama::MAX_SEQ_LEN,
            ),
            "gemma3" => (
                Weights::Gemma3(quantized_gemma3::ModelWeights::from_gguf(content, reader, device)?),
                quantized_gemma3::MAX_SEQ_LEN,
            ),
            other => {
                return Err(Error::Model(format!(
                    "GGUF architecture {other:?} is not supported by the local runtime (supported: llama, gemma3)"
                )))
            }
        };
        Ok((weights, trained.unwrap_or(table).min(table)))
    }

    /// Whether a prompt can be run in two parts (a prefix, then the rest from the
    /// prefix's KV cache). candle 0.11's Gemma 3 masks out the whole cache when more
    /// than one token follows it, so Gemma prompts run in one part.
    pub fn continues_prefill(&self) -> bool {
        matches!(self, Weights::Llama(_))
    }

    /// Logits of the token after `input` (`[1, n]` ids at positions `pos..pos + n`),
    /// extending the KV cache; `pos = 0` starts a new sequence.
    pub fn forward(&mut self, input: &Tensor, pos: usize) -> Result<Tensor> {
        Ok(match self {
            Weights::Llama(m) => m.forward(input, pos)?,
            Weights::Gemma3(m) => m.forward(input, pos)?,
        })
    }
}

/// Types candle has only scalar dot products for (its AVX2 and NEON kernels cover
/// Q4_0, Q8_0 and the K-quants): SmolLM2's Q4_1 file ran at about 3 tokens/s on one
/// core with them. Each block of 32 such weights is exactly representable before
/// rounding, and Q8_0's 255 levels per block are much finer than these types' 16 or
/// 32, so the conversion changes the weights by less than their own quantisation step.
fn slow_on_cpu(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

/// The model's tensors with the [`slow_on_cpu`] ones re-quantised to Q8_0, as an
/// in-memory GGUF (with the metadata the model builders read) and its parsed header.
fn requantize<R: std::io::Read + std::io::Seek>(
    content: Content,
    reader: &mut R,
    device: &Device,
) -> Result<(Content, Vec<u8>)> {
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    // In file order, so the reads are sequential.
    names.sort_by_key(|n| content.tensor_infos[*n].offset);
    let mut tensors: Vec<(&str, QTensor)> = Vec::with_capacity(names.len());
    let mut converted = 0;
    for name in names {
        let tensor = content.tensor(reader, name, device)?;
        let tensor = if slow_on_cpu(tensor.dtype()) && tensor.shape().dims().last().is_some_and(|d| d % 32 == 0) {
            converted += 1;
            QTensor::quantize(&tensor.dequantize(device)?, GgmlDType::Q8_0)?
        } else {
            tensor
        };
        tensors.push((name, tensor));
    }
    // The tokenizer was read already; the alignment is the writer's own.
    let metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .filter(|(k, _)| !k.starts_with("tokenizer.") && k.as_str() != "general.alignment")
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let mut bytes = Cursor::new(Vec::new());
    gguf_file::write(&mut bytes, &metadata, &refs)?;
    log::info!("re-quantised {converted} tensors to Q8_0 for the CPU kernels");
    let bytes = bytes.into_inner();
    let header = Content::read(&mut Cursor::new(&bytes))?;
    Ok((header, bytes))
}
