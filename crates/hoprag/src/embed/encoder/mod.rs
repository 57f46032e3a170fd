//! A CPU forward pass for BERT-family sentence encoders (BERT, MPNet) and for Gemma 3 as
//! an encoder (EmbeddingGemma, [`gemma`]), written for throughput on a few cores.
//!
//! Why not a general tensor library: a sentence encoder is six to twelve identical
//! layers of four matrix products and a handful of element-wise steps. Run op by op, each
//! step is a pass over memory with an allocation of its own, and padded batches spend
//! compute on padding. Here:
//! - texts are *packed*: the tokens of every text in a batch are rows of one matrix, so
//!   the projections and the feed-forward layer run as large products with no padding,
//!   and only attention looks at text boundaries;
//! - the query, key and value projections are one product; bias + GELU, and bias +
//!   residual + layer norm, are single fused passes ([`kernels`]);
//! - attention runs per (text, head) as two small products on strided views of the
//!   fused QKV matrix, spread over the threads;
//! - the products run on `gemm` (the kernels candle uses), on a thread pool of
//!   [`crate::threads::get`] threads owned by the encoder; a question's few rows run
//!   instead on weights packed once at load, in half precision ([`packed`]), which
//!   `gemm` would otherwise repack on every call.
//!
//! A passage's vector depends on its text alone, not on the texts it is embedded with
//! (so an index edited text by text has the bits of one built at once): passages run on
//! `gemm` only, whose rows do not depend on the others in the product
//! ([`kernels::gemm`]). The packed kernel sums in another order, so a text's vector
//! would change in its last bits with the size of the batch it landed in.

pub mod gemma;
pub mod kernels;
mod packed;
mod weights;

use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;

use self::kernels::{Epilogue, SharedMut, View};
pub use self::weights::{Arch, EncoderConfig};
use self::weights::{Layer, Linear, Weights};
use crate::embed::TextKind;
use crate::error::{Error, Result};

/// Tokens per forward pass: large enough that the products keep both cores busy, small
/// enough that the feed-forward activations (tokens × intermediate) stay in the tens of MB.
const BATCH_TOKENS: usize = 4096;

/// Query products with at most this many rows (a question or two) run on the packed half
/// weights ([`packed`]); larger ones on `gemm`, whose packing then pays for itself.
const PACKED_MAX_ROWS: usize = 64;

/// Below this many tokens the element-wise passes run on one thread (the products still
/// split their columns, and attention its heads).
const PARALLEL_MIN_ROWS: usize = 128;

pub struct Encoder {
    config: EncoderConfig,
    weights: Weights,
    threads: usize,
    pool: rayon::ThreadPool,
}

impl Encoder {
    /// Loads `config.json` and `model.safetensors`.
    pub fn load(config: &Path, weights: &Path) -> Result<Self> {
        let config = EncoderConfig::read(config)?;
        let weights = Weights::read(weights, &config)?;
        let (threads, pool) = thread_pool()?;
        Ok(Encoder { config, weights, threads, pool })
    }

    pub fn config(&self) -> &EncoderConfig {
        &self.config
    }

    pub fn dim(&self) -> usize {
        self.config.hidden
    }

    /// Mean-pooled, L2-normalised vectors of token sequences (special tokens included,
    /// already truncated to [`EncoderConfig::max_tokens`]), one per sequence, in order.
    /// A passage's vector has the same bits whatever it is embedded with; a query's may
    /// differ from it in the last bits ([`project`]).
    pub fn embed(&self, sequences: &[&[u32]], kind: TextKind) -> Result<Vec<Vec<f32>>> {
        check_sequences(sequences, self.config.max_tokens(), self.weights.vocab)?;
        Ok(embed_batched(&self.pool, self.threads, sequences, |range, threads| {
            let batch = &sequences[range];
            let whole: Vec<Vec<Range<usize>>> = batch.iter().map(|s| std::iter::once(0..s.len()).collect()).collect();
            self.forward(batch, &whole, threads, kind).into_iter().flatten().collect()
        }))
    }

    /// As [`Encoder::embed`], but each sequence's vectors are the mean-pooled,
    /// L2-normalised token states of its `spans` (token ranges; an empty one gives a
    /// zero vector): a phrase's vector in the context of the text around it, from the
    /// text's one forward pass. A span `0..len` is the sequence's own vector, to the bit.
    pub fn embed_spans(
        &self,
        sequences: &[&[u32]],
        spans: &[Vec<Range<usize>>],
        kind: TextKind,
    ) -> Result<Vec<Vec<Vec<f32>>>> {
        check_sequences(sequences, self.config.max_tokens(), self.weights.vocab)?;
        if spans.len() != sequences.len() || sequences.iter().zip(spans).any(|(s, r)| r.iter().any(|r| r.end > s.len()))
        {
            return Err(Error::Embedding("a span reaches past its sequence".into()));
        }
        Ok(embed_batched(&self.pool, self.threads, sequences, |range, threads| {
            self.forward(&sequences[range.clone()], &spans[range], threads, kind)
        }))
    }

    /// One packed batch through the whole model, then mean pooling over each sequence's
    /// `pools` (token ranges).
    fn forward(
        &self,
        sequences: &[&[u32]],
        pools: &[Vec<Range<usize>>],
        threads: usize,
        kind: TextKind,
    ) -> Vec<Vec<Vec<f32>>> {
        let h = self.config.hidden;
        let starts = starts(sequences);
        let total: usize = sequences.iter().map(|s| s.len()).sum();
        let mut x = self.embeddings(sequences, total, threads);
        let mut scratch = Scratch::new(total, &self.config);
        for layer in &self.weights.layers {
            self.layer(layer, &mut x, &mut scratch, sequences, &starts, threads, kind);
        }
        pools
            .iter()
            .zip(&starts)
            .map(|(ranges, &at)| {
                ranges
                    .iter()
                    .map(|r| {
                        let mut v = vec![0.0f32; h];
                        for row in x[(at + r.start) * h..(at + r.end) * h].chunks_exact(h) {
                            v.iter_mut().zip(row).for_each(|(a, b)| *a += b);
                        }
                        // Mean then L2: the mean's 1/n cancels in the normalisation, but
                        // keeps the intermediate values in the model's range.
                        let n = r.len().max(1) as f32;
                        v.iter_mut().for_each(|a| *a /= n);
                        super::l2_normalize(&mut v);
                        v
                    })
                    .collect()
            })
            .collect()
    }

    fn embeddings(&self, sequences: &[&[u32]], total: usize, threads: usize) -> Vec<f32> {
        let h = self.config.hidden;
        let w = &self.weights;
        let mut x = Vec::with_capacity(total * h);
        for s in sequences {
            for (pos, &id) in s.iter().enumerate() {
                let word = &w.word[id as usize * h..][..h];
                let position = &w.position[(pos + self.config.position_offset) * h..][..h];
                match &w.token_type {
                    Some(tt) => x.extend(word.iter().zip(position).zip(tt).map(|((a, b), c)| a + b + c)),
                    None => x.extend(word.iter().zip(position).map(|(a, b)| a + b)),
                }
            }
        }
        let eps = self.config.layer_norm_eps;
        let norm = &w.embedding_norm;
        rows_par(threads, &mut x, h, |chunk| kernels::layer_norm(chunk, &norm.gamma, &norm.beta, eps));
        x
    }

    #[allow(clippy::too_many_arguments)]
    fn layer(
        &self,
        layer: &Layer,
        x: &mut [f32],
        s: &mut Scratch,
        sequences: &[&[u32]],
        starts: &[usize],
        threads: usize,
        kind: TextKind,
    ) {
        let c = &self.config;
        let (h, eps) = (c.hidden, c.layer_norm_eps);
        project(x, &layer.qkv, &mut s.qkv, threads, kind, Epilogue::Bias(&layer.qkv.bias));
        self.attention(&s.qkv, &mut s.context, sequences, starts, threads);
        project(&s.context, &layer.attention_out, &mut s.projected, threads, kind, Epilogue::None);
        let norm = &layer.attention_norm;
        rows_par2(threads, x, &s.projected, h, |xc, yc| {
            kernels::add_bias_layer_norm(xc, yc, &layer.attention_out.bias, &norm.gamma, &norm.beta, eps)
        });
        project(x, &layer.ffn_in, &mut s.intermediate, threads, kind, Epilogue::BiasGelu(&layer.ffn_in.bias));
        project(&s.intermediate, &layer.ffn_out, &mut s.projected, threads, kind, Epilogue::None);
        let norm = &layer.output_norm;
        rows_par2(threads, x, &s.projected, h, |xc, yc| {
            kernels::add_bias_layer_norm(xc, yc, &layer.ffn_out.bias, &norm.gamma, &norm.beta, eps)
        });
    }

    /// softmax(Q·Kᵀ/√d + bias)·V for every text and head, into `context` (`t × hidden`).
    fn attention(&self, qkv: &[f32], context: &mut [f32], sequences: &[&[u32]], starts: &[usize], threads: usize) {
        let c = &self.config;
        let (h, heads, d) = (c.hidden, c.heads, c.head_dim());
        let scale = 1.0 / (d as f32).sqrt();
        let out = SharedMut(context.as_mut_ptr());
        // Job `j` is text `j / heads`, head `j % heads`.
        let jobs = 0..sequences.len() * heads;
        let run = |scores: &mut Vec<f32>, job: usize| {
            let (i, head) = (job / heads, job % heads);
            let (len, at) = (sequences[i].len(), starts[i]);
            scores.clear();
            scores.resize(len * len, 0.0);
            let q = View::rows(qkv, 3 * h).offset(at, head * d);
            let k = View::rows(qkv, 3 * h).offset(at, h + head * d);
            let v = View::rows(qkv, 3 * h).offset(at, 2 * h + head * d);
            // SAFETY: the views stay inside this text's rows of `qkv`; `scores` is
            // len × len; the output block (this text's rows, this head's columns) is
            // written by this job only.
            unsafe {
                kernels::gemm(len, len, d, scores.as_mut_ptr(), len, q, k.t(), scale, 1);
            }
            if let Some(table) = &self.weights.relative_bias {
                add_relative_bias(scores, len, table, heads, head, c.arch);
            }
            kernels::softmax_rows(scores, len, len);
            unsafe {
                let dst = out.get().add(at * h + head * d);
                kernels::gemm(len, d, len, dst, h, View::rows(scores, len), v, 1.0, 1);
            }
        };
        for_each_head(threads, jobs, run);
    }
}

/// Runs attention's (text, head) jobs, each with a reusable scores buffer. The heads
/// spread over the threads even for a question's few rows: its 24 small products a layer
/// on one thread cost more than the hand-off (a 19-token question's embedding: 3.5% less
/// time, both ways in one process).
fn for_each_head(threads: usize, jobs: std::ops::Range<usize>, run: impl Fn(&mut Vec<f32>, usize) + Sync + Send) {
    if threads > 1 {
        jobs.into_par_iter().for_each_init(Vec::new, run);
    } else {
        let mut scores = Vec::new();
        jobs.for_each(|job| run(&mut scores, job));
    }
}

/// The encoder's own pool of [`crate::threads::get`] threads, and their number.
fn thread_pool() -> Result<(usize, rayon::ThreadPool)> {
    let threads = crate::threads::get();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("hoprag-encoder-{i}"))
        .build()
        .map_err(|e| Error::Model(format!("encoder thread pool: {e}")))?;
    Ok((threads, pool))
}

/// Refuses a sequence longer than the model reads or with a token outside its vocabulary.
fn check_sequences(sequences: &[&[u32]], max: usize, vocab: usize) -> Result<()> {
    for (i, s) in sequences.iter().enumerate() {
        if s.len() > max {
            return Err(Error::Embedding(format!("text {i}: {} tokens, the model reads at most {max}", s.len())));
        }
        if let Some(&id) = s.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::Embedding(format!("text {i}: token id {id} outside the vocabulary ({vocab})")));
        }
    }
    Ok(())
}

/// Where each sequence's rows start in a packed batch.
fn starts(sequences: &[&[u32]]) -> Vec<usize> {
    sequences
        .iter()
        .scan(0, |acc, s| {
            let at = *acc;
            *acc += s.len();
            Some(at)
        })
        .collect()
}

/// `epilogue(x · W)` into `dst`, for `x` of rows `w.inputs` wide (a bias the epilogue
/// does not add is left to the fused pass that follows). A query's few rows run on the
/// packed weights, for its latency; everything else on `gemm`, whose every row is the
/// same whatever the rows beside it.
fn project(x: &[f32], w: &Linear, dst: &mut [f32], threads: usize, kind: TextKind, epilogue: Epilogue) {
    let rows = x.len() / w.inputs;
    assert!(x.len() == rows * w.inputs && dst.len() >= rows * w.outputs, "activation buffers match the weights");
    let packed = w.packed.as_ref().filter(|_| kind == TextKind::Query && rows <= PACKED_MAX_ROWS);
    if let Some(packed) = packed {
        return packed.product(x, &mut dst[..rows * w.outputs], threads, epilogue);
    }
    // SAFETY: `x` holds `rows × inputs`, `dst` at least `rows × outputs`, `w.view()` is
    // the `[inputs, outputs]` weight; `dst` is a buffer of its own.
    unsafe {
        kernels::gemm(
            rows,
            w.outputs,
            w.inputs,
            dst.as_mut_ptr(),
            w.outputs,
            View::rows(x, w.inputs),
            w.view(),
            1.0,
            threads,
        )
    };
    // No pass (and no hand-off between threads) for an epilogue that does nothing.
    if !matches!(epilogue, Epilogue::None) {
        rows_par(threads, &mut dst[..rows * w.outputs], w.outputs, |chunk| epilogue.apply(chunk, 0, w.outputs));
    }
}

/// Elements per chunk when a row-wise pass over `len` elements (rows of `width`) is
/// split across `threads`; `None` when it is cheaper to run it whole.
fn chunk_len(threads: usize, len: usize, width: usize) -> Option<usize> {
    (threads > 1 && len >= PARALLEL_MIN_ROWS * width).then(|| (len / width).div_ceil(threads) * width)
}

/// Runs a row-wise pass over `x` (rows of `width`) split across `threads`.
fn rows_par(threads: usize, x: &mut [f32], width: usize, f: impl Fn(&mut [f32]) + Sync) {
    match chunk_len(threads, x.len(), width) {
        Some(chunk) => x.par_chunks_mut(chunk).for_each(&f),
        None => f(x),
    }
}

/// [`rows_par`] over `x` with the matching rows of `y`.
fn rows_par2(threads: usize, x: &mut [f32], y: &[f32], width: usize, f: impl Fn(&mut [f32], &[f32]) + Sync) {
    match chunk_len(threads, x.len(), width) {
        Some(chunk) => x.par_chunks_mut(chunk).zip(y.par_chunks(chunk)).for_each(|(a, b)| f(a, b)),
        None => f(x, y),
    }
}

/// Splits the sequences, in order, into batches of about `1/threads` of all the tokens
/// each (so every thread gets one), but never more than [`BATCH_TOKENS`] (so the
/// activations stay small) or fewer than [`PARALLEL_MIN_ROWS`] unless that is all.
/// `forward` over the packed batches of `sequences` on `pool` (each batch a range of
/// them), one output per sequence in input order. Enough batches for every thread: each
/// runs whole on one thread, with no hand-off inside the model. Fewer: the threads share
/// each batch's products.
fn embed_batched<T: Send>(
    pool: &rayon::ThreadPool,
    threads: usize,
    sequences: &[&[u32]],
    forward: impl Fn(Range<usize>, usize) -> Vec<T> + Sync,
) -> Vec<T> {
    let batches = plan_batches(sequences, threads);
    let threads_per_batch = if batches.len() >= threads { 1 } else { threads };
    let outputs: Vec<Vec<T>> =
        pool.install(|| batches.par_iter().map(|range| forward(range.clone(), threads_per_batch)).collect());
    outputs.into_iter().flatten().collect()
}

fn plan_batches(sequences: &[&[u32]], threads: usize) -> Vec<std::ops::Range<usize>> {
    let total: usize = sequences.iter().map(|s| s.len()).sum();
    let target = total.div_ceil(threads.max(1)).clamp(PARALLEL_MIN_ROWS, BATCH_TOKENS);
    let mut batches = Vec::new();
    let mut start = 0;
    let mut tokens = 0;
    for (i, s) in sequences.iter().enumerate() {
        if i > start && tokens + s.len() > BATCH_TOKENS {
            batches.push(start..i);
            (start, tokens) = (i, 0);
        }
        tokens += s.len();
        if tokens >= target {
            batches.push(start..i + 1);
            (start, tokens) = (i + 1, 0);
        }
    }
    if start < sequences.len() {
        batches.push(start..sequences.len());
    }
    batches
}

/// Activations of one forward pass, reused by every layer.
struct Scratch {
    qkv: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    intermediate: Vec<f32>,
}

impl Scratch {
    fn new(tokens: usize, c: &EncoderConfig) -> Scratch {
        Scratch {
            qkv: vec![0.0; tokens * 3 * c.hidden],
            context: vec![0.0; tokens * c.hidden],
            projected: vec![0.0; tokens * c.hidden],
            intermediate: vec![0.0; tokens * c.intermediate],
        }
    }
}

/// MPNet: adds the learned bias of each (relative-position bucket, head) to the scores.
fn add_relative_bias(scores: &mut [f32], len: usize, table: &[f32], heads: usize, head: usize, arch: Arch) {
    let Arch::MpNet { buckets } = arch else { return };
    // One value per distance k − q in −(len−1)..=len−1.
    let by_distance: Vec<f32> =
        (0..2 * len - 1).map(|i| table[relative_bucket(i as i64 - (len as i64 - 1), buckets) * heads + head]).collect();
    for (q, row) in scores.chunks_exact_mut(len).enumerate() {
        let diag = &by_distance[len - 1 - q..][..len];
        row.iter_mut().zip(diag).for_each(|(s, b)| *s += b);
    }
}

/// T5/MPNet bidirectional bucketing of a relative position (key − query): half the
/// buckets per direction, exact below a quarter of them, logarithmic up to distance 128.
/// Computed in f32 as the reference implementation does, so boundaries fall alike.
fn relative_bucket(relative: i64, buckets: usize) -> usize {
    const MAX_DISTANCE: f32 = 128.0;
    let half = (buckets / 2) as i64;
    let n = -relative;
    let mut bucket = if n < 0 { half } else { 0 };
    let n = n.abs();
    let exact = half / 2;
    bucket += if n < exact {
        n
    } else {
        let log = (n as f32 / exact as f32).ln() / (MAX_DISTANCE / exact as f32).ln() * (half - exact) as f32;
        (exact + log as i64).min(half - 1)
    };
    bucket as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_buckets_follow_the_t5_scheme() {
        // 32 buckets: 16 per direction, distances 0..8 exact, then logarithmic to 128.
        assert_eq!(relative_bucket(0, 32), 0);
        assert_eq!(relative_bucket(-1, 32), 1, "key before the query");
        assert_eq!(relative_bucket(1, 32), 17, "key after the query");
        assert_eq!(relative_bucket(-7, 32), 7);
        assert_eq!(relative_bucket(-8, 32), 8);
        assert_eq!(relative_bucket(-16, 32), 10);
        assert_eq!(relative_bucket(-127, 32), 15);
        assert_eq!(relative_bucket(-1000, 32), 15, "capped");
        assert_eq!(relative_bucket(1000, 32), 31);
    }

    #[test]
    fn batches_cover_every_sequence_in_order_and_share_the_tokens() {
        let lens = |ls: &[usize]| ls.iter().map(|&n| vec![0u32; n]).collect::<Vec<_>>();
        let plan = |ls: &[Vec<u32>], threads| {
            let seqs: Vec<&[u32]> = ls.iter().map(Vec::as_slice).collect();
            plan_batches(&seqs, threads)
        };
        // 32 passages of 85 tokens on 2 threads: two batches of about half the tokens.
        let passages = lens(&[85; 32]);
        assert_eq!(plan(&passages, 2), vec![0..16, 16..32]);
        assert_eq!(plan(&passages, 1), vec![0..32]);
        // One query: one batch, whatever the threads.
        assert_eq!(plan(&lens(&[12]), 2), vec![0..1]);
        // Few tokens stay together rather than split below PARALLEL_MIN_ROWS.
        assert_eq!(plan(&lens(&[20, 20, 20]), 2), vec![0..3]);
        // No batch passes BATCH_TOKENS unless one sequence alone does.
        let big = lens(&[3000, 3000, 5000, 10]);
        let batches = plan(&big, 1);
        assert_eq!(batches, vec![0..1, 1..2, 2..3, 3..4]);
        let long = lens(&[100; 100]);
        let batches = plan(&long, 1);
        assert!(batches.iter().all(|b| b.len() * 100 <= BATCH_TOKENS));
        assert_eq!(batches.first().unwrap().start, 0);
        assert!(batches.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!(batches.last().unwrap().end, 100);
    }
}
