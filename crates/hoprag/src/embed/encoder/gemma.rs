//! Gemma 3 as a bidirectional sentence encoder (EmbeddingGemma-300M), on the same packed
//! batches, thread pool and kernels as the BERT-family [`Encoder`](super::Encoder).
//!
//! What differs from BERT, as `transformers`' `Gemma3TextModel` computes it (with
//! `use_bidirectional_attention`, which EmbeddingGemma's `config.json` sets):
//! - token embeddings scaled by √hidden, no position table: rotary positions (RoPE) on
//!   the queries and keys instead, with base `rope_theta` on the full-attention layers and
//!   `rope_local_base_freq` on the sliding ones (`layer_types`);
//! - RMSNorm (`x / rms(x) · (1 + w)`, no mean, no bias) before *and* after each
//!   sub-layer, and on each head's queries and keys (`q_norm`, `k_norm`);
//! - grouped attention: several query heads read one key/value head, scaled by
//!   `query_pre_attn_scalar^-½`; a sliding layer's token sees only the tokens less than
//!   `window` away on either side (`|i − j| < window`, the bidirectional overlay
//!   `transformers` builds for this model), where `window` is *not* the config's
//!   `sliding_window` (512) but `sliding_window / 2 + 1` (257): `Gemma3TextConfig` halves
//!   it when `use_bidirectional_attention` is set, so that a token sees 256 on each side;
//! - a gated feed-forward, `down(gelu_tanh(gate(x)) · up(x))`, without biases;
//! - a final RMSNorm; then sentence-transformers' modules: mean pooling over every token,
//!   two bias-free dense layers (768 → 3072 → 768, identity activation) and L2
//!   normalisation.
//!
//! The query/key/value projections are one product (their outputs side by side), and so
//! are the gate and up projections; weights are rounded to half precision as the BERT
//! encoder's are (see [`Linear`]).

use std::path::Path;

use rayon::prelude::*;
use serde::Deserialize;

use super::kernels::{self, Epilogue, SharedMut, View};
use super::weights::{read_config, Linear, Tensors};
use super::{embed_batched, for_each_head, project, rows_par2};
use crate::embed::TextKind;
use crate::error::{Error, Result};

/// A Gemma 3 text model's shape, from its `config.json`.
#[derive(Debug, Clone)]
pub struct GemmaConfig {
    pub hidden: usize,
    pub intermediate: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub eps: f32,
    pub max_positions: usize,
    /// Per layer: whether it is a sliding-window layer.
    pub sliding: Vec<bool>,
    /// A sliding layer's token sees the tokens less than this far away.
    pub sliding_window: usize,
    pub rope_theta: f32,
    pub rope_local_theta: f32,
    pub attention_scale: f32,
}

#[derive(Deserialize)]
struct HfGemmaConfig {
    model_type: String,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: usize,
    head_dim: usize,
    rms_norm_eps: f32,
    max_position_embeddings: usize,
    layer_types: Vec<String>,
    sliding_window: usize,
    rope_theta: f32,
    rope_local_base_freq: f32,
    query_pre_attn_scalar: f32,
    hidden_activation: String,
    #[serde(default)]
    use_bidirectional_attention: bool,
    #[serde(default)]
    attn_logit_softcapping: Option<f32>,
    #[serde(default)]
    rope_scaling: Option<serde_json::Value>,
}

impl GemmaConfig {
    pub fn read(path: &Path) -> Result<Self> {
        let hf: HfGemmaConfig = read_config(path)?;
        let bad = |what: String| Error::Model(format!("{}: {what}", path.display()));
        if hf.model_type != "gemma3_text" {
            return Err(bad(format!("model_type {:?} is not gemma3_text", hf.model_type)));
        }
        // Each of these would change the vectors; refuse rather than compute another model.
        if !hf.use_bidirectional_attention {
            return Err(bad("a causal Gemma 3 is a language model, not a sentence encoder".into()));
        }
        if hf.hidden_activation != "gelu_pytorch_tanh" {
            return Err(bad(format!("hidden_activation {:?} is not supported", hf.hidden_activation)));
        }
        if hf.attn_logit_softcapping.is_some() || hf.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
            return Err(bad("attention soft-capping and RoPE scaling are not supported".into()));
        }
        if hf.layer_types.len() != hf.num_hidden_layers {
            return Err(bad(format!("{} layer_types for {} layers", hf.layer_types.len(), hf.num_hidden_layers)));
        }
        let sliding = hf
            .layer_types
            .iter()
            .map(|t| match t.as_str() {
                "sliding_attention" => Ok(true),
                "full_attention" => Ok(false),
                other => Err(bad(format!("layer type {other:?} is not supported"))),
            })
            .collect::<Result<Vec<_>>>()?;
        if hf.num_key_value_heads == 0
            || !hf.num_attention_heads.is_multiple_of(hf.num_key_value_heads)
            || !hf.head_dim.is_multiple_of(2)
        {
            return Err(bad("heads are not a multiple of the key/value heads, or head_dim is odd".into()));
        }
        Ok(GemmaConfig {
            hidden: hf.hidden_size,
            intermediate: hf.intermediate_size,
            layers: hf.num_hidden_layers,
            heads: hf.num_attention_heads,
            kv_heads: hf.num_key_value_heads,
            head_dim: hf.head_dim,
            eps: hf.rms_norm_eps,
            max_positions: hf.max_position_embeddings,
            sliding,
            // As `Gemma3TextConfig` sets it for bidirectional attention (checked against
            // sentence-transformers on a 1,163-token text: cosine 0.9887 with 512, 1.0 with
            // this).
            sliding_window: hf.sliding_window / 2 + 1,
            rope_theta: hf.rope_theta,
            rope_local_theta: hf.rope_local_base_freq,
            attention_scale: 1.0 / hf.query_pre_attn_scalar.sqrt(),
        })
    }

    /// Width of the fused query/key/value rows: the query heads, then the key heads, then
    /// the value heads.
    fn qkv_width(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }
}

struct GemmaLayer {
    input_norm: Vec<f32>,
    qkv: Linear,
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    attention_out: Linear,
    post_attention_norm: Vec<f32>,
    pre_ffn_norm: Vec<f32>,
    /// Gate and up projections side by side: `[hidden, 2·intermediate]`.
    gate_up: Linear,
    down: Linear,
    post_ffn_norm: Vec<f32>,
}

/// The cosines and sines of one rotary base, `[position][head_dim / 2]` each.
struct Rope {
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Rope {
    /// As `transformers` computes them, in f32: frequency `1 / θ^(2i/d)`, angle
    /// `position · frequency`.
    fn new(theta: f32, head_dim: usize, positions: usize) -> Rope {
        let half = head_dim / 2;
        let freq: Vec<f32> = (0..half).map(|i| 1.0 / theta.powf((2 * i) as f32 / head_dim as f32)).collect();
        let (mut cos, mut sin) = (Vec::with_capacity(positions * half), Vec::with_capacity(positions * half));
        for p in 0..positions {
            for f in &freq {
                let angle = (p as f32 * f) as f64;
                cos.push(angle.cos() as f32);
                sin.push(angle.sin() as f32);
            }
        }
        Rope { cos, sin }
    }

    /// Rotates one head's vector at `position`: the two halves as the real and imaginary
    /// parts (`transformers`' `rotate_half` layout).
    #[inline]
    fn apply(&self, x: &mut [f32], position: usize) {
        let half = x.len() / 2;
        let cos = &self.cos[position * half..][..half];
        let sin = &self.sin[position * half..][..half];
        let (a, b) = x.split_at_mut(half);
        for (((a, b), c), s) in a.iter_mut().zip(b.iter_mut()).zip(cos).zip(sin) {
            let (x1, x2) = (*a, *b);
            *a = x1 * c - x2 * s;
            *b = x2 * c + x1 * s;
        }
    }
}

/// EmbeddingGemma: the Gemma 3 encoder and sentence-transformers' head.
pub struct GemmaEncoder {
    config: GemmaConfig,
    /// `[vocab, hidden]` as half-float bits, √hidden not yet applied (half the memory of
    /// f32: 400 MB).
    embeddings: Vec<u16>,
    vocab: usize,
    layers: Vec<GemmaLayer>,
    final_norm: Vec<f32>,
    /// sentence-transformers' dense layers after the pooling.
    dense: Vec<Linear>,
    rope_global: Rope,
    rope_local: Rope,
    threads: usize,
    pool: rayon::ThreadPool,
}

impl GemmaEncoder {
    /// Loads a sentence-transformers folder: `config.json`, `model.safetensors` and the
    /// dense layers `dense` names (relative to `dir`, in order).
    pub fn load(dir: &Path, dense: &[std::path::PathBuf]) -> Result<Self> {
        let config = GemmaConfig::read(&dir.join("config.json"))?;
        let path = dir.join("model.safetensors");
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let file = Tensors::parse(&bytes, &path)?;
        let (h, d) = (config.hidden, config.head_dim);
        // RMSNorm multiplies by 1 + w: added once here.
        let norm = |name: &str, size: usize| -> Result<Vec<f32>> {
            Ok(file.tensor(&format!("{name}.weight"), Some(&[size]))?.into_iter().map(|w| 1.0 + w).collect())
        };
        let layers = (0..config.layers)
            .map(|i| {
                let name = |suffix: &str| format!("layers.{i}.{suffix}");
                Ok(GemmaLayer {
                    input_norm: norm(&name("input_layernorm"), h)?,
                    qkv: file.linear_without_bias(
                        &[
                            (&name("self_attn.q_proj"), config.heads * d),
                            (&name("self_attn.k_proj"), config.kv_heads * d),
                            (&name("self_attn.v_proj"), config.kv_heads * d),
                        ],
                        h,
                    )?,
                    q_norm: norm(&name("self_attn.q_norm"), d)?,
                    k_norm: norm(&name("self_attn.k_norm"), d)?,
                    attention_out: file.linear_without_bias(&[(&name("self_attn.o_proj"), h)], config.heads * d)?,
                    post_attention_norm: norm(&name("post_attention_layernorm"), h)?,
                    pre_ffn_norm: norm(&name("pre_feedforward_layernorm"), h)?,
                    gate_up: file.linear_without_bias(
                        &[(&name("mlp.gate_proj"), config.intermediate), (&name("mlp.up_proj"), config.intermediate)],
                        h,
                    )?,
                    down: file.linear_without_bias(&[(&name("mlp.down_proj"), h)], config.intermediate)?,
                    post_ffn_norm: norm(&name("post_feedforward_layernorm"), h)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let final_norm = norm("norm", h)?;
        let table = file.tensor("embed_tokens.weight", None)?;
        let vocab = table.len() / h;
        let embeddings = table.into_iter().map(|w| half::f16::from_f32(w).to_bits()).collect();
        drop(bytes);

        let mut dense_layers = Vec::new();
        let mut width = h;
        for folder in dense {
            let layer = read_dense(&dir.join(folder), width)?;
            width = layer.outputs;
            dense_layers.push(layer);
        }
        if width != h {
            return Err(Error::Model(format!(
                "{}: the dense layers end at {width} dimensions, not the model's {h}",
                dir.display()
            )));
        }
        let positions = config.max_positions;
        let rope_global = Rope::new(config.rope_theta, d, positions);
        let rope_local = Rope::new(config.rope_local_theta, d, positions);
        let (threads, pool) = super::thread_pool()?;
        Ok(GemmaEncoder {
            config,
            embeddings,
            vocab,
            layers,
            final_norm,
            dense: dense_layers,
            rope_global,
            rope_local,
            threads,
            pool,
        })
    }

    pub fn config(&self) -> &GemmaConfig {
        &self.config
    }

    pub fn dim(&self) -> usize {
        self.config.hidden
    }

    /// L2-normalised sentence vectors of token sequences (special tokens included, at most
    /// `max_positions` long), one per sequence, in order; a passage's with the same bits
    /// whatever it is embedded with (see [`super::Encoder::embed`]).
    pub fn embed(&self, sequences: &[&[u32]], kind: TextKind) -> Result<Vec<Vec<f32>>> {
        super::check_sequences(sequences, self.config.max_positions, self.vocab)?;
        Ok(embed_batched(&self.pool, self.threads, sequences, |range, threads| {
            self.forward(&sequences[range], threads, kind)
        }))
    }

    fn forward(&self, sequences: &[&[u32]], threads: usize, kind: TextKind) -> Vec<Vec<f32>> {
        let c = &self.config;
        let h = c.hidden;
        let starts = super::starts(sequences);
        let total: usize = sequences.iter().map(|s| s.len()).sum();
        let scale = (h as f32).sqrt();
        let mut x = Vec::with_capacity(total * h);
        for &id in sequences.iter().flat_map(|s| s.iter()) {
            let row = &self.embeddings[id as usize * h..][..h];
            x.extend(row.iter().map(|&b| half::f16::from_bits(b).to_f32() * scale));
        }
        let mut s = GemmaScratch::new(total, c);
        for (i, layer) in self.layers.iter().enumerate() {
            self.layer(i, layer, &mut x, &mut s, sequences, &starts, threads, kind);
        }
        let eps = c.eps;
        rows_par2(threads, &mut s.normed, &x, h, |out, xc| kernels::rms_norm(xc, out, &self.final_norm, eps));

        // Mean pooling over every token, then the dense layers on the pooled rows (one row
        // per text: for a lone passage `kernels::gemm` keeps it on the path of many).
        let mut pooled = vec![0.0f32; sequences.len() * h];
        for ((seq, &at), v) in sequences.iter().zip(&starts).zip(pooled.chunks_exact_mut(h)) {
            for row in s.normed[at * h..(at + seq.len()) * h].chunks_exact(h) {
                v.iter_mut().zip(row).for_each(|(a, b)| *a += b);
            }
            let n = seq.len().max(1) as f32;
            v.iter_mut().for_each(|a| *a /= n);
        }
        for layer in &self.dense {
            let mut out = vec![0.0f32; sequences.len() * layer.outputs];
            project(&pooled, layer, &mut out, threads, kind, Epilogue::None);
            pooled = out;
        }
        pooled
            .chunks_exact(h)
            .map(|v| {
                let mut v = v.to_vec();
                crate::embed::l2_normalize(&mut v);
                v
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn layer(
        &self,
        index: usize,
        layer: &GemmaLayer,
        x: &mut [f32],
        s: &mut GemmaScratch,
        sequences: &[&[u32]],
        starts: &[usize],
        threads: usize,
        kind: TextKind,
    ) {
        let c = &self.config;
        let (h, eps) = (c.hidden, c.eps);
        rows_par2(threads, &mut s.normed, x, h, |out, xc| kernels::rms_norm(xc, out, &layer.input_norm, eps));
        project(&s.normed, &layer.qkv, &mut s.qkv, threads, kind, Epilogue::None);
        let sliding = c.sliding[index];
        self.norm_and_rotate(layer, &mut s.qkv, sequences, starts, sliding, threads);
        self.attention(&s.qkv, &mut s.context, sequences, starts, sliding, threads);
        project(&s.context, &layer.attention_out, &mut s.projected, threads, kind, Epilogue::None);
        rows_par2(threads, x, &s.projected, h, |xc, yc| kernels::add_rms_norm(xc, yc, &layer.post_attention_norm, eps));

        rows_par2(threads, &mut s.normed, x, h, |out, xc| kernels::rms_norm(xc, out, &layer.pre_ffn_norm, eps));
        project(&s.normed, &layer.gate_up, &mut s.gate_up, threads, kind, Epilogue::None);
        let inter = c.intermediate;
        // Rows of `gate_up` are twice as wide as those of `intermediate`: chunked apart.
        match super::chunk_len(threads, s.intermediate.len(), inter) {
            Some(chunk) => s
                .intermediate
                .par_chunks_mut(chunk)
                .zip(s.gate_up.par_chunks(2 * chunk))
                .for_each(|(out, gu)| kernels::gelu_tanh_mul(gu, out, inter)),
            None => kernels::gelu_tanh_mul(&s.gate_up, &mut s.intermediate, inter),
        }
        project(&s.intermediate, &layer.down, &mut s.projected, threads, kind, Epilogue::None);
        rows_par2(threads, x, &s.projected, h, |xc, yc| kernels::add_rms_norm(xc, yc, &layer.post_ffn_norm, eps));
    }

    /// `q_norm` / `k_norm` on every query and key head, then the rotary positions (each
    /// token's position counted within its own text).
    fn norm_and_rotate(
        &self,
        layer: &GemmaLayer,
        qkv: &mut [f32],
        sequences: &[&[u32]],
        starts: &[usize],
        sliding: bool,
        threads: usize,
    ) {
        let c = &self.config;
        let (d, width) = (c.head_dim, c.qkv_width());
        let rope = if sliding { &self.rope_local } else { &self.rope_global };
        // The token's position within its text, by its row in the batch.
        let mut position = Vec::with_capacity(qkv.len() / width);
        for s in sequences {
            position.extend(0..s.len());
        }
        debug_assert_eq!(starts.len(), sequences.len());
        let rotated = (c.heads + c.kv_heads) * d;
        let run = |rows: &mut [f32], first: usize| {
            let mut normed = vec![0.0f32; d];
            for (r, row) in rows.chunks_exact_mut(width).enumerate() {
                let pos = position[first + r];
                for (head, x) in row[..rotated].chunks_exact_mut(d).enumerate() {
                    let scale = if head < c.heads { &layer.q_norm } else { &layer.k_norm };
                    kernels::rms_norm(x, &mut normed, scale, c.eps);
                    x.copy_from_slice(&normed);
                    rope.apply(x, pos);
                }
            }
        };
        match super::chunk_len(threads, qkv.len(), width) {
            Some(chunk) => qkv.par_chunks_mut(chunk).enumerate().for_each(|(i, rows)| run(rows, i * chunk / width)),
            None => run(qkv, 0),
        }
    }

    /// softmax(Q·Kᵀ·scale)·V for every text and query head (each reading its group's key
    /// and value head), into `context` (`t × heads·head_dim`).
    fn attention(
        &self,
        qkv: &[f32],
        context: &mut [f32],
        sequences: &[&[u32]],
        starts: &[usize],
        sliding: bool,
        threads: usize,
    ) {
        let c = &self.config;
        let (heads, d, width) = (c.heads, c.head_dim, c.qkv_width());
        let out_width = heads * d;
        let group = heads / c.kv_heads;
        let window = if sliding { c.sliding_window } else { usize::MAX };
        let out = SharedMut(context.as_mut_ptr());
        let jobs = 0..sequences.len() * heads;
        let run = |scores: &mut Vec<f32>, job: usize| {
            let (i, head) = (job / heads, job % heads);
            let (len, at) = (sequences[i].len(), starts[i]);
            let kv = head / group;
            scores.clear();
            scores.resize(len * len, 0.0);
            let q = View::rows(qkv, width).offset(at, head * d);
            let k = View::rows(qkv, width).offset(at, (heads + kv) * d);
            let v = View::rows(qkv, width).offset(at, (heads + c.kv_heads + kv) * d);
            // SAFETY: the views stay inside this text's rows of `qkv`; `scores` is
            // len × len; the output block (this text's rows, this head's columns) is
            // written by this job only.
            unsafe {
                kernels::gemm(len, len, d, scores.as_mut_ptr(), len, q, k.t(), c.attention_scale, 1);
            }
            if len > window {
                // Outside the window: a score whose exp is 0 (the softmax clamps it).
                for (qi, row) in scores.chunks_exact_mut(len).enumerate() {
                    for (kj, s) in row.iter_mut().enumerate() {
                        if qi.abs_diff(kj) >= window {
                            *s = f32::NEG_INFINITY;
                        }
                    }
                }
            }
            kernels::softmax_rows(scores, len, len);
            unsafe {
                let dst = out.get().add(at * out_width + head * d);
                kernels::gemm(len, d, len, dst, out_width, View::rows(scores, len), v, 1.0, 1);
            }
        };
        for_each_head(threads, jobs, run);
    }
}

/// A sentence-transformers `Dense` folder: `config.json` (bias-free, identity activation
/// only) and `model.safetensors` with `linear.weight`.
fn read_dense(dir: &Path, inputs: usize) -> Result<Linear> {
    #[derive(Deserialize)]
    struct DenseConfig {
        in_features: usize,
        out_features: usize,
        #[serde(default)]
        bias: bool,
        #[serde(default)]
        activation_function: String,
    }
    let path = dir.join("config.json");
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let config: DenseConfig =
        serde_json::from_slice(&bytes).map_err(|e| Error::Model(format!("{}: {e}", path.display())))?;
    let identity = config.activation_function.is_empty() || config.activation_function.ends_with("Identity");
    if config.bias || !identity || config.in_features != inputs {
        return Err(Error::Model(format!(
            "{}: only a bias-free dense layer with the identity activation, reading {inputs} inputs, is supported",
            path.display()
        )));
    }
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    Tensors::parse(&bytes, &path)?.linear_without_bias(&[("linear", config.out_features)], inputs)
}

/// Activations of one forward pass, reused by every layer.
struct GemmaScratch {
    normed: Vec<f32>,
    qkv: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    gate_up: Vec<f32>,
    intermediate: Vec<f32>,
}

impl GemmaScratch {
    fn new(tokens: usize, c: &GemmaConfig) -> GemmaScratch {
        GemmaScratch {
            normed: vec![0.0; tokens * c.hidden],
            qkv: vec![0.0; tokens * c.qkv_width()],
            context: vec![0.0; tokens * c.heads * c.head_dim],
            projected: vec![0.0; tokens * c.hidden],
            gate_up: vec![0.0; tokens * 2 * c.intermediate],
            intermediate: vec![0.0; tokens * c.intermediate],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_rotates_the_two_halves_by_the_position_angle() {
        let rope = Rope::new(10_000.0, 4, 3);
        // Frequencies 1 and 1/100; at position 2: angles 2 and 0.02.
        let mut x = [1.0, 1.0, 0.0, 0.0];
        rope.apply(&mut x, 2);
        assert!((x[0] - 2.0f32.cos()).abs() < 1e-6 && (x[2] - 2.0f32.sin()).abs() < 1e-6, "{x:?}");
        assert!((x[1] - 0.02f32.cos()).abs() < 1e-6 && (x[3] - 0.02f32.sin()).abs() < 1e-6, "{x:?}");
        let mut y = [0.3, -0.2, 0.5, 0.9];
        rope.apply(&mut y, 0);
        assert_eq!(y, [0.3, -0.2, 0.5, 0.9], "position 0 is the identity");
    }
}
