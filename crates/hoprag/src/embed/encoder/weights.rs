//! An encoder's configuration and weights, read from a Hugging Face `config.json` and
//! `model.safetensors`: BERT (all-MiniLM-L6-v2) and MPNet (all-mpnet-base-v2).
//!
//! Linear weights keep the checkpoint's `[out, in]` layout, at half precision (see
//! [`Linear`]); the query, key and value projections are concatenated into one layer of
//! `3·hidden` outputs (one product, not three).

use super::kernels::View;
use super::packed::PackedWeight;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::error::{Error, Result};

/// Which family the checkpoint is: they differ in their embeddings and in MPNet's
/// relative position bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Absolute positions from 0, token type embeddings.
    Bert,
    /// Positions from `pad_token_id + 1`, no token types, a learned bias per head and
    /// relative-position bucket added to the attention scores.
    MpNet { buckets: usize },
}

#[derive(Debug, Clone)]
pub struct EncoderConfig {
    pub arch: Arch,
    pub hidden: usize,
    pub heads: usize,
    pub layers: usize,
    pub intermediate: usize,
    pub layer_norm_eps: f32,
    pub max_positions: usize,
    /// The first position id (MPNet counts from `pad_token_id + 1`).
    pub position_offset: usize,
}

impl EncoderConfig {
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// The longest input the position table allows.
    pub fn max_tokens(&self) -> usize {
        self.max_positions - self.position_offset
    }
}

#[derive(Deserialize)]
struct HfConfig {
    model_type: String,
    hidden_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    intermediate_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f32,
    max_position_embeddings: usize,
    #[serde(default)]
    hidden_act: Option<String>,
    #[serde(default)]
    pad_token_id: Option<usize>,
    #[serde(default)]
    relative_attention_num_buckets: Option<usize>,
}

fn default_eps() -> f32 {
    1e-12
}

/// A model's `config.json`, parsed as `T`; errors name the file.
pub(super) fn read_config<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Model(format!("{}: {e}", path.display())))
}

impl EncoderConfig {
    pub fn read(path: &Path) -> Result<Self> {
        let hf: HfConfig = read_config(path)?;
        let bad = |what: String| Error::Model(format!("{}: {what}", path.display()));
        if let Some(act) = hf.hidden_act.as_deref().filter(|a| *a != "gelu") {
            return Err(bad(format!("hidden_act {act:?} is not supported (only \"gelu\")")));
        }
        if hf.num_attention_heads == 0 || !hf.hidden_size.is_multiple_of(hf.num_attention_heads) {
            return Err(bad(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                hf.hidden_size, hf.num_attention_heads
            )));
        }
        let (arch, position_offset) = match hf.model_type.as_str() {
            "bert" => (Arch::Bert, 0),
            "mpnet" => (
                Arch::MpNet { buckets: hf.relative_attention_num_buckets.unwrap_or(32) },
                hf.pad_token_id.unwrap_or(1) + 1,
            ),
            other => return Err(bad(format!("model_type {other:?} is not supported (bert or mpnet)"))),
        };
        Ok(EncoderConfig {
            arch,
            hidden: hf.hidden_size,
            heads: hf.num_attention_heads,
            layers: hf.num_hidden_layers,
            intermediate: hf.intermediate_size,
            layer_norm_eps: hf.layer_norm_eps,
            max_positions: hf.max_position_embeddings,
            position_offset,
        })
    }
}

/// A linear layer, weight `[out, in]` as stored: each output's weights are contiguous, so
/// a product with a query's few rows streams them from memory in order (with `[in, out]`
/// the same product ran at 20 instead of 31 GFLOP/s when the weights are not in cache).
///
/// The weights are kept at half precision, twice: packed for products with a few rows
/// ([`PackedWeight`]), and widened back to f32 for `gemm`. Both kernels then multiply by
/// the same numbers: a text's vector as a query (packed) and as a passage (`gemm`) differ
/// only by the order of their sums, in the last bits.
pub struct Linear {
    pub weight: Vec<f32>,
    pub packed: Option<PackedWeight>,
    pub bias: Vec<f32>,
    pub inputs: usize,
    pub outputs: usize,
}

pub struct LayerNorm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

pub struct Layer {
    /// Query, key and value projections side by side: `[hidden, 3·hidden]`.
    pub qkv: Linear,
    pub attention_out: Linear,
    pub attention_norm: LayerNorm,
    pub ffn_in: Linear,
    pub ffn_out: Linear,
    pub output_norm: LayerNorm,
}

pub struct Weights {
    pub word: Vec<f32>,
    pub vocab: usize,
    pub position: Vec<f32>,
    /// Token type 0's embedding (BERT; single-segment inputs only use type 0).
    pub token_type: Option<Vec<f32>>,
    pub embedding_norm: LayerNorm,
    pub layers: Vec<Layer>,
    /// MPNet: `[buckets, heads]`.
    pub relative_bias: Option<Vec<f32>>,
}

impl Weights {
    pub fn read(path: &Path, config: &EncoderConfig) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let mut file = Tensors::parse(&bytes, path)?;
        file.prefix = prefix(&file.tensors, path)?;
        let h = config.hidden;
        let names = Names::of(config.arch);
        let layers = (0..config.layers)
            .map(|i| {
                let name = |suffix: &str| format!("encoder.layer.{i}.{suffix}");
                Ok(Layer {
                    qkv: file.linear(&[&name(names.query), &name(names.key), &name(names.value)], h, h)?,
                    attention_out: file.linear(&[&name(names.attention_out)], h, h)?,
                    attention_norm: file.layer_norm(&name(names.attention_norm), h)?,
                    ffn_in: file.linear(&[&name("intermediate.dense")], h, config.intermediate)?,
                    ffn_out: file.linear(&[&name("output.dense")], config.intermediate, h)?,
                    output_norm: file.layer_norm(&name("output.LayerNorm"), h)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let word = file.tensor("embeddings.word_embeddings.weight", None)?;
        let vocab = word.len() / h;
        Ok(Weights {
            vocab,
            word,
            position: file.tensor("embeddings.position_embeddings.weight", Some(&[config.max_positions, h]))?,
            token_type: match config.arch {
                Arch::Bert => {
                    let table = file.tensor("embeddings.token_type_embeddings.weight", None)?;
                    Some(table[..h].to_vec())
                }
                Arch::MpNet { .. } => None,
            },
            embedding_norm: file.layer_norm("embeddings.LayerNorm", h)?,
            layers,
            relative_bias: match config.arch {
                Arch::Bert => None,
                Arch::MpNet { buckets } => {
                    Some(file.tensor("encoder.relative_attention_bias.weight", Some(&[buckets, config.heads]))?)
                }
            },
        })
    }
}

/// Where the two families keep the attention weights of a layer.
struct Names {
    query: &'static str,
    key: &'static str,
    value: &'static str,
    attention_out: &'static str,
    attention_norm: &'static str,
}

impl Names {
    fn of(arch: Arch) -> Names {
        match arch {
            Arch::Bert => Names {
                query: "attention.self.query",
                key: "attention.self.key",
                value: "attention.self.value",
                attention_out: "attention.output.dense",
                attention_norm: "attention.output.LayerNorm",
            },
            Arch::MpNet { .. } => Names {
                query: "attention.attn.q",
                key: "attention.attn.k",
                value: "attention.attn.v",
                attention_out: "attention.attn.o",
                attention_norm: "attention.LayerNorm",
            },
        }
    }
}

/// Checkpoints saved from a task model name their tensors `bert.…` / `mpnet.…`.
fn prefix(tensors: &SafeTensors, path: &Path) -> Result<String> {
    let names = tensors.names();
    for p in ["", "bert.", "mpnet.", "model."] {
        if names.contains(&format!("{p}embeddings.word_embeddings.weight").as_str()) {
            return Ok(p.to_string());
        }
    }
    Err(Error::Model(format!(
        "{}: no embeddings.word_embeddings.weight tensor: not a BERT or MPNet checkpoint",
        path.display()
    )))
}

/// The tensors of one safetensors file, by name (after `prefix`).
pub(super) struct Tensors<'a> {
    pub(super) tensors: SafeTensors<'a>,
    pub(super) path: &'a Path,
    pub(super) prefix: String,
}

impl<'a> Tensors<'a> {
    /// Parses the file's header (`bytes` is the whole file).
    pub(super) fn parse(bytes: &'a [u8], path: &'a Path) -> Result<Self> {
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| Error::Model(format!("{}: {e}", path.display())))?;
        Ok(Tensors { tensors, path, prefix: String::new() })
    }
}

impl Tensors<'_> {
    pub(super) fn tensor(&self, name: &str, shape: Option<&[usize]>) -> Result<Vec<f32>> {
        let full = format!("{}{name}", self.prefix);
        let bad = |what: String| Error::Model(format!("{}: tensor {full}: {what}", self.path.display()));
        let view = self.tensors.tensor(&full).map_err(|_| bad("missing".into()))?;
        if let Some(shape) = shape {
            if view.shape() != shape {
                return Err(bad(format!("shape {:?}, expected {shape:?}", view.shape())));
            }
        }
        let data = view.data();
        match view.dtype() {
            Dtype::F32 => Ok(data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()),
            Dtype::F16 => Ok(data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect()),
            Dtype::BF16 => Ok(data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect()),
            other => Err(bad(format!("dtype {other:?} is not supported (f32, f16, bf16)"))),
        }
    }

    /// The layers `names`, each `inputs → outputs`, side by side as one layer: one
    /// product computes all their outputs.
    fn linear(&self, names: &[&str], inputs: usize, outputs: usize) -> Result<Linear> {
        let (mut weight, mut bias) = (Vec::new(), Vec::new());
        for name in names {
            weight.extend(self.tensor(&format!("{name}.weight"), Some(&[outputs, inputs]))?);
            bias.extend(self.tensor(&format!("{name}.bias"), Some(&[outputs]))?);
        }
        Ok(Linear::new(weight, bias, inputs, outputs * names.len()))
    }

    /// Bias-free layers `(name, outputs)`, each reading `inputs`, side by side as one.
    pub(super) fn linear_without_bias(&self, names: &[(&str, usize)], inputs: usize) -> Result<Linear> {
        let mut weight = Vec::new();
        for &(name, outputs) in names {
            weight.extend(self.tensor(&format!("{name}.weight"), Some(&[outputs, inputs]))?);
        }
        let outputs = names.iter().map(|(_, o)| o).sum();
        Ok(Linear::new(weight, Vec::new(), inputs, outputs))
    }

    fn layer_norm(&self, name: &str, size: usize) -> Result<LayerNorm> {
        Ok(LayerNorm {
            gamma: self.tensor(&format!("{name}.weight"), Some(&[size]))?,
            beta: self.tensor(&format!("{name}.bias"), Some(&[size]))?,
        })
    }
}

impl Linear {
    /// Rounds `weight` (`[outputs, inputs]`) to half precision and packs it; a layer with
    /// a weight past the half range keeps full precision and runs on `gemm` alone.
    pub(super) fn new(mut weight: Vec<f32>, bias: Vec<f32>, inputs: usize, outputs: usize) -> Linear {
        let packed = PackedWeight::pack(&weight, inputs, outputs);
        if packed.is_some() {
            weight.iter_mut().for_each(|w| *w = half::f16::from_f32(*w).to_f32());
        }
        Linear { weight, packed, bias, inputs, outputs }
    }

    /// The weight as the `[in, out]` matrix a product `x · W` reads.
    pub fn view(&self) -> View {
        View::rows(&self.weight, self.inputs).t()
    }
}
