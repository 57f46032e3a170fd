//! The encoder's numeric kernels: matrix products on the `gemm` crate, and element-wise
//! passes fused so that each touches a row of activations once (bias + GELU; bias +
//! residual + layer norm; scale + softmax).
//!
//! The element-wise kernels are written as plain loops that LLVM vectorises; the exp and
//! erf they need are branch-free polynomial approximations (relative error ~1e-7, far
//! below what moves a sentence vector) because libm's scalar calls do not vectorise.
//! Each hot kernel is compiled twice, for the baseline target and for AVX2 + FMA, and
//! picked at run time.

use rayon::prelude::*;

use crate::simd::multiversion;

/// A matrix product below this many multiply-adds runs on the calling thread: splitting
/// it costs more than it saves.
const PARALLEL_MIN_FLOPS: usize = 1 << 20;

/// Microkernel tiles (16 columns) per column band at least: with bands of more than 128
/// columns, a product of two rows or more stays off `gemm`'s paths for small products
/// (rows × columns ≤ 256, and both ≤ 64), which block the depth differently.
const MIN_BAND_TILES: usize = 9;

/// A row-major matrix view with explicit strides (in elements), so that one head's
/// queries inside the fused QKV buffer, or a transposed view, need no copy.
#[derive(Clone, Copy)]
pub struct View {
    pub ptr: *const f32,
    pub row_stride: isize,
    pub col_stride: isize,
}

// SAFETY: a read-only view; `gemm`'s contract keeps what it points at alive and unwritten
// while the product runs.
unsafe impl Send for View {}
unsafe impl Sync for View {}

impl View {
    pub fn rows(data: &[f32], row_stride: usize) -> View {
        View { ptr: data.as_ptr(), row_stride: row_stride as isize, col_stride: 1 }
    }

    /// The same matrix read transposed.
    pub fn t(self) -> View {
        View { ptr: self.ptr, row_stride: self.col_stride, col_stride: self.row_stride }
    }

    pub fn offset(self, rows: usize, cols: usize) -> View {
        // SAFETY: callers only offset within the buffer the view was made from.
        let ptr = unsafe { self.ptr.offset(rows as isize * self.row_stride + cols as isize * self.col_stride) };
        View { ptr, ..self }
    }
}

/// `dst[m×n] (row stride dst_stride) = alpha · a[m×k] · b[k×n]`.
///
/// With several threads each computes a band of `dst`'s columns on its own: `gemm`'s
/// own threading splits rows, which for a query's few rows costs more than it saves
/// (measured at 25 × 384 × 1152: 23 GFLOP/s on two threads against 56 on one).
///
/// For `n` > 128, each row of `dst` has the same bits whatever `m` and `threads` are:
/// `gemm` sums every element over `k` in the same blocks and order on its general path,
/// and the two ways off it are kept off (one row, which `gemm` runs as a matrix-vector
/// product, is run as two; bands are never narrower than [`MIN_BAND_TILES`]). A text's
/// vector then does not depend on the texts it is embedded with.
///
/// # Safety
/// `a` and `b` must be valid for the shapes and strides given, `dst` for `m` rows of
/// `dst_stride` elements with `n` used, and `dst` must not overlap `a` or `b`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    dst_stride: usize,
    a: View,
    b: View,
    alpha: f32,
    threads: usize,
) {
    if m == 1 && k > 0 {
        // The row and a zero row, into a two-row buffer of its own.
        let mut rows = vec![0.0f32; 2 * k];
        for (p, x) in rows[..k].iter_mut().enumerate() {
            *x = *a.ptr.offset(p as isize * a.col_stride);
        }
        let mut out = vec![0.0f32; 2 * n];
        gemm(2, n, k, out.as_mut_ptr(), n, View::rows(&rows, k), b, alpha, threads);
        std::ptr::copy_nonoverlapping(out.as_ptr(), dst, n);
        return;
    }
    // One product on the calling thread, over `n` columns of `dst` and `b`.
    let product = |n: usize, dst: *mut f32, b: View| {
        // The whole view (Sync), not its raw-pointer field, is what the closure captures.
        let a: View = a;
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_stride as isize,
            false,
            a.ptr,
            a.col_stride,
            a.row_stride,
            b.ptr,
            b.col_stride,
            b.row_stride,
            1.0,
            alpha,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    };
    let tiles = n.div_ceil(16);
    let bands = threads.min(tiles / MIN_BAND_TILES);
    if bands < 2 || m * n * k < PARALLEL_MIN_FLOPS {
        return product(n, dst, b);
    }
    // Whole tiles shared out as evenly as they go, so that only the last band is ragged
    // (and it has MIN_BAND_TILES tiles or more, the last one partial).
    let dst = SharedMut(dst);
    (0..bands).into_par_iter().for_each(|i| {
        let first = 16 * (i * tiles / bands);
        let end = (16 * ((i + 1) * tiles / bands)).min(n);
        // SAFETY: band `i` is columns first..end of `dst`, written by this job only;
        // `b`'s offset view stays inside `b`.
        product(end - first, dst.get().add(first), b.offset(0, first))
    });
}

/// A raw pointer that may cross threads, for jobs that each write their own disjoint
/// block of one buffer.
#[derive(Clone, Copy)]
pub struct SharedMut(pub *mut f32);
// SAFETY: only used for disjoint writes, joined before the buffer is read.
unsafe impl Send for SharedMut {}
unsafe impl Sync for SharedMut {}

impl SharedMut {
    pub fn get(self) -> *mut f32 {
        self.0
    }
}

/// What a projection applies to its outputs after the product: nothing, its bias, or
/// its bias and GELU. The packed product applies it to each block as it stores it, on the
/// thread that computed the block, instead of in a pass of its own on one thread.
#[derive(Clone, Copy)]
pub enum Epilogue<'a> {
    None,
    Bias(&'a [f32]),
    BiasGelu(&'a [f32]),
}

impl Epilogue<'_> {
    /// Applies to `x`, rows of `width` outputs starting at output column `first`.
    pub fn apply(self, x: &mut [f32], first: usize, width: usize) {
        match self {
            Epilogue::None => {}
            Epilogue::Bias(bias) => add_bias(x, &bias[first..first + width]),
            Epilogue::BiasGelu(bias) => bias_gelu(x, &bias[first..first + width]),
        }
    }
}

multiversion! {
    /// `x = gelu(x + bias)` for every row of `x` (exact, erf-based GELU, as BERT's "gelu").
    pub fn bias_gelu(x: &mut [f32], bias: &[f32]) {
        for row in x.chunks_exact_mut(bias.len()) {
            for (v, b) in row.iter_mut().zip(bias) {
                let y = *v + b;
                *v = 0.5 * y * (1.0 + erf(y * std::f32::consts::FRAC_1_SQRT_2));
            }
        }
    }
}

multiversion! {
    /// `x = layer_norm(x + y + bias)` row by row: the residual, the projection's bias and
    /// the normalisation in one pass.
    pub fn add_bias_layer_norm(x: &mut [f32], y: &[f32], bias: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
        let n = bias.len();
        for (row, add) in x.chunks_exact_mut(n).zip(y.chunks_exact(n)) {
            for ((v, a), b) in row.iter_mut().zip(add).zip(bias) {
                *v += a + b;
            }
            normalize_row(row, gamma, beta, eps);
        }
    }
}

multiversion! {
    /// `x = layer_norm(x)` row by row.
    pub fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
        for row in x.chunks_exact_mut(gamma.len()) {
            normalize_row(row, gamma, beta, eps);
        }
    }
}

#[inline(always)]
fn normalize_row(row: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = reduce(row, 0.0, |a, v| a + v, |a, b| a + b) / n;
    let var = reduce(row, 0.0, |a, v| a + (v - mean) * (v - mean), |a, b| a + b) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mean) * inv * g + b;
    }
}

multiversion! {
    /// Softmax of each row of `x` (`cols` wide, rows `stride` apart), in place.
    pub fn softmax_rows(x: &mut [f32], cols: usize, stride: usize) {
        for row in x.chunks_mut(stride) {
            let row = &mut row[..cols];
            let max = reduce(row, f32::NEG_INFINITY, |m, v| if v > m { v } else { m }, f32::max);
            row.iter_mut().for_each(|v| *v = exp(*v - max));
            let inv = 1.0 / reduce(row, 0.0, |a, v| a + v, |a, b| a + b);
            row.iter_mut().for_each(|v| *v *= inv);
        }
    }
}

multiversion! {
    /// `y[j] += bias[j]` for every row of `y`.
    pub fn add_bias(y: &mut [f32], bias: &[f32]) {
        for row in y.chunks_exact_mut(bias.len()) {
            row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
        }
    }
}

multiversion! {
    /// `out = x / rms(x) · scale` row by row, `scale` already holding Gemma's `1 + w`
    /// (RMSNorm without a mean or a bias; the rows are as wide as `scale`).
    pub fn rms_norm(x: &[f32], out: &mut [f32], scale: &[f32], eps: f32) {
        let n = scale.len();
        for (row, dst) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
            let inv = inverse_rms(row, eps);
            for ((d, v), s) in dst.iter_mut().zip(row).zip(scale) {
                *d = v * inv * s;
            }
        }
    }
}

multiversion! {
    /// `x += rms_norm(y) · scale` row by row: a Gemma sub-layer's output normalised and
    /// added to the residual stream in one pass.
    pub fn add_rms_norm(x: &mut [f32], y: &[f32], scale: &[f32], eps: f32) {
        let n = scale.len();
        for (row, add) in x.chunks_exact_mut(n).zip(y.chunks_exact(n)) {
            let inv = inverse_rms(add, eps);
            for ((v, a), s) in row.iter_mut().zip(add).zip(scale) {
                *v += a * inv * s;
            }
        }
    }
}

#[inline(always)]
fn inverse_rms(row: &[f32], eps: f32) -> f32 {
    let mean_square = reduce(row, 0.0, |a, v| a + v * v, |a, b| a + b) / row.len() as f32;
    1.0 / (mean_square + eps).sqrt()
}

multiversion! {
    /// `out = gelu_tanh(gate) · up` for rows of `gate_up` that hold `gate` then `up`
    /// (each `width` wide, as a row of `out`): the gated feed-forward's activation.
    pub fn gelu_tanh_mul(gate_up: &[f32], out: &mut [f32], width: usize) {
        for (row, dst) in gate_up.chunks_exact(2 * width).zip(out.chunks_exact_mut(width)) {
            let (gate, up) = row.split_at(width);
            for ((d, &g), &u) in dst.iter_mut().zip(gate).zip(up) {
                *d = gelu_tanh(g) * u;
            }
        }
    }
}

/// GELU's tanh approximation (PyTorch's `gelu(approximate="tanh")`, Gemma's activation),
/// tanh(u) written as 1 − 2/(e^{2u} + 1) on the vectorising [`exp`].
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let u = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
    let tanh = 1.0 - 2.0 / (exp(2.0 * u) + 1.0);
    0.5 * x * (1.0 + tanh)
}

/// Folds `x` in eight independent lanes, then combines them: a float reduction in one
/// accumulator is a dependency chain the compiler may not reorder, so it would not
/// vectorise.
#[inline(always)]
fn reduce(x: &[f32], init: f32, step: impl Fn(f32, f32) -> f32, combine: impl Fn(f32, f32) -> f32) -> f32 {
    let mut lanes = [init; 8];
    let mut chunks = x.chunks_exact(8);
    for chunk in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            *l = step(*l, v);
        }
    }
    let tail = chunks.remainder().iter().fold(init, |a, &v| step(a, v));
    lanes.into_iter().fold(tail, combine)
}

/// e^x: x = n·ln 2 + r with |r| ≤ ln 2 / 2, e^r by its Taylor polynomial to degree 6
/// (relative error < 2e-7), 2^n built in the exponent bits. Branch-free so it
/// vectorises; inputs below −87 give 0 (softmax only ever passes x ≤ 0).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5 · 2^23: adding it rounds to an integer
    let x = x.clamp(-87.0, 88.0);
    let t = x * std::f32::consts::LOG2_E + ROUND;
    let n = t - ROUND;
    let bits = t.to_bits().wrapping_sub(ROUND.to_bits()); // n as a two's-complement int
                                                          // ln 2 split in two so that n·ln2 is exact to f32 precision.
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(bits.wrapping_add(127).wrapping_shl(23))
}

/// erf(x) by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7), odd-extended.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t * (0.254_829_6 + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_erf_match_the_standard_library() {
        let mut worst_exp = 0.0f32;
        let mut worst_erf = 0.0f64;
        for i in -2000..=2000 {
            let x = i as f32 * 0.01;
            let rel = ((exp(x) - x.exp()) / x.exp()).abs();
            worst_exp = worst_exp.max(rel);
            worst_erf = worst_erf.max((erf(x) as f64 - erf_reference(x as f64)).abs());
        }
        assert!(worst_exp < 1e-6, "exp relative error {worst_exp}");
        assert!(worst_erf < 5e-7, "erf absolute error {worst_erf}");
        assert_eq!(exp(-200.0), exp(-87.0), "clamped, not NaN");
        assert!(exp(-87.0) < 1e-37);
    }

    /// erf by its Maclaurin series (|x| < 3) or asymptotic complement, in f64.
    fn erf_reference(x: f64) -> f64 {
        if x.abs() > 5.0 {
            return x.signum();
        }
        let mut term = x;
        let mut sum = x;
        for n in 1..200 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn fused_passes_compute_what_they_say() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        let y = vec![0.5, 0.5, -1.0, 0.0];
        add_bias_layer_norm(&mut x, &y, &[0.5, -0.5], &[1.0, 2.0], &[0.0, 1.0], 1e-12);
        // rows: [2.0, 2.0] -> [0, 0]*g + b = [0, 1] (eps keeps a constant row finite);
        // [2.5, 3.5] -> [-1, 1] -> [-1, 3]
        let want = [0.0, 1.0, -1.0, 3.0];
        assert!(x.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5), "{x:?}");

        let mut s = vec![0.0, (2.0f32).ln(), 9.0, 0.0, 0.0, 9.0];
        softmax_rows(&mut s, 2, 3);
        assert!((s[0] - 1.0 / 3.0).abs() < 1e-6 && (s[1] - 2.0 / 3.0).abs() < 1e-6);
        assert_eq!(s[2], 9.0, "past `cols` untouched");
        assert!((s[3] - 0.5).abs() < 1e-6 && (s[4] - 0.5).abs() < 1e-6);
        assert_eq!(s[5], 9.0);

        let mut g = vec![0.0, 1.0];
        bias_gelu(&mut g, &[0.0, 0.0]);
        assert_eq!(g[0], 0.0);
        assert!((g[1] - 0.841_344_7).abs() < 1e-6, "{}", g[1]);
    }

    #[test]
    fn gemma_passes_compute_what_they_say() {
        // rms([3, 4]) = sqrt(12.5); scale (1 + w) = [1, 2].
        let x = [3.0, 4.0, 0.0, 0.0];
        let mut out = [0.0; 4];
        rms_norm(&x, &mut out, &[1.0, 2.0], 1e-6);
        let r = 12.5f32.sqrt();
        assert!((out[0] - 3.0 / r).abs() < 1e-6 && (out[1] - 8.0 / r).abs() < 1e-6, "{out:?}");
        assert_eq!(&out[2..], &[0.0, 0.0], "eps keeps a zero row finite");
        let mut acc = [1.0, 1.0];
        add_rms_norm(&mut acc, &[3.0, 4.0], &[1.0, 2.0], 0.0);
        assert!((acc[0] - (1.0 + 3.0 / r)).abs() < 1e-6 && (acc[1] - (1.0 + 8.0 / r)).abs() < 1e-6);

        for x in [-6.0f32, -1.5, -0.3, 0.0, 0.2, 1.0, 2.5, 9.0] {
            let x64 = x as f64;
            let want =
                0.5 * x64 * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x64 + 0.044715 * x64.powi(3))).tanh());
            assert!((gelu_tanh(x) as f64 - want).abs() < 2e-6, "gelu_tanh({x})");
        }
        // Rows of [gate, gate, up, up] -> [gelu(gate) · up].
        let mut act = [0.0; 4];
        gelu_tanh_mul(&[1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 1.0, 1.0], &mut act, 2);
        assert!((act[0] - gelu_tanh(1.0) * 3.0).abs() < 1e-6 && (act[1] - gelu_tanh(2.0) * 4.0).abs() < 1e-6);
        assert!((act[2] - gelu_tanh(-1.0)).abs() < 1e-6 && act[3] == 0.0);
    }

    #[test]
    fn gemm_on_strided_views() {
        // a = [[1, 2], [3, 4]]; b^T read from b = [[5, 6], [7, 8]] (so a · bᵀ).
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [5.0, 6.0, 7.0, 8.0];
        let mut c = [0.0f32; 6];
        unsafe { gemm(2, 2, 2, c.as_mut_ptr(), 3, View::rows(&a, 2), View::rows(&b, 2).t(), 2.0, 1) };
        assert_eq!(c, [34.0, 46.0, 0.0, 78.0, 106.0, 0.0]);
    }

    /// A projection's row has the same bits whatever rows it is computed with and on how
    /// many threads: one row alone (which `gemm` would run as a matrix-vector product),
    /// two or three (its small-product kernels, were the column bands narrow), or many.
    #[test]
    fn gemm_rows_do_not_depend_on_the_rows_beside_them() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut random = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect()
        };
        let rows = 70;
        // (inputs, outputs) of MiniLM's and EmbeddingGemma's projections: depths under
        // and over gemm's depth block, widths of 24 to 144 tiles.
        for (k, n) in [(384, 1152), (1536, 384), (768, 2304), (3072, 768)] {
            let x = random(rows * k);
            let w = random(n * k);
            let product = |first: usize, m: usize, threads: usize| {
                let mut out = vec![0.0f32; m * n];
                let a = View::rows(&x[first * k..(first + m) * k], k);
                unsafe { gemm(m, n, k, out.as_mut_ptr(), n, a, View::rows(&w, k).t(), 1.0, threads) };
                out
            };
            let all = product(0, rows, 1);
            for threads in [1, 2, 8] {
                for group in [1, 2, 3, 7, 64, rows] {
                    for first in (0..rows).step_by(group) {
                        let m = group.min(rows - first);
                        let got = product(first, m, threads);
                        let want = &all[first * n..(first + m) * n];
                        assert!(
                            got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{k}x{n}: rows {first}..{} on {threads} threads differ from all {rows} rows on one",
                            first + m
                        );
                    }
                }
            }
        }
    }
}
