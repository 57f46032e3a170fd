//! Exact scans of a large matrix at a quarter of the memory traffic: an 8-bit copy of the
//! rows screens every row with a proven error bound, and only the rows the bound cannot
//! rule out are scored again in full precision.
//!
//! Scoring a query against every triple of a graph (HippoRAG 2's fact matching) reads the
//! whole f32 matrix, 194 MB on the 2wiki graph, and is bound by memory bandwidth. The
//! int8 codes are a quarter of that. Row `r` is stored as `scale_r · code_r` with
//! `scale_r = max|row_r| / 127`, so each coordinate is off by at most `scale_r / 2` and
//! the screened score by at most `|query|₁ · scale_r / 2` (plus float rounding, covered
//! by a margin). A row whose upper bound is below the lower bound of `n` other rows
//! cannot be among the best `n`; the rest are scored exactly, so the result is the one
//! an exact scan gives, to the bit.

use rayon::prelude::*;

use super::{exact, Matrix};

/// Slack for float rounding in either score (|error| of a 384-term f32 dot of unit
/// vectors is below 1e-5); generous, as it only widens the set rescored.
const ROUNDING: f32 = 1e-4;

/// The int8 copy of a matrix's rows.
#[derive(Debug, Clone, Default)]
pub struct Screen {
    dim: usize,
    codes: Vec<i8>,
    scales: Vec<f32>,
}

/// The rows an exact scan would find, scored exactly.
#[derive(Debug, Clone, PartialEq)]
pub struct Extremes {
    /// The `n` highest scores, best first, ties by row.
    pub top: Vec<(u32, f32)>,
    /// The lowest score of all rows (NaN-free rows; `None` for an empty matrix).
    pub min: Option<f32>,
    /// The highest score of all rows.
    pub max: Option<f32>,
    /// Rows scored exactly after screening (for traces).
    pub rescored: usize,
}

impl Screen {
    pub fn new(m: &Matrix) -> Screen {
        let dim = m.dim();
        let mut codes = vec![0i8; m.as_flat().len()];
        let mut scales = vec![0f32; m.rows()];
        codes.par_chunks_mut(dim.max(1)).zip(m.as_flat().par_chunks(dim.max(1))).zip(scales.par_iter_mut()).for_each(
            |((code, row), scale)| {
                let max = row.iter().fold(0f32, |a, &x| a.max(x.abs()));
                *scale = if max > 0.0 && max.is_finite() { max / 127.0 } else { 0.0 };
                for (c, &x) in code.iter_mut().zip(row) {
                    *c = if *scale > 0.0 { (x / *scale).round().clamp(-127.0, 127.0) as i8 } else { 0 };
                }
            },
        );
        Screen { dim, codes, scales }
    }

    pub fn rows(&self) -> usize {
        self.scales.len()
    }

    /// The best `n` rows of `m` (the matrix this screen was made from) by inner product
    /// with `query`, and the lowest and highest inner products over all rows: exactly
    /// what scoring every row in f32 gives.
    pub fn extremes(&self, m: &Matrix, query: &[f32], n: usize) -> Extremes {
        assert_eq!(m.rows(), self.rows(), "the screen belongs to another matrix");
        let rows = self.rows();
        let exact_score = |r: usize| exact::dot(m.row(r as u32), query);
        // Rows that are not finite cannot be bounded: score them exactly.
        let l1: f32 = query.iter().map(|x| x.abs()).sum();
        if rows == 0 || !l1.is_finite() {
            let all = m.dots(query);
            return Extremes::from_exact((0..rows as u32).zip(all).collect(), n, rows);
        }
        let approx = self.dots(query);
        let bound = |r: usize| l1 * self.scales[r] * 0.5 * (1.0 + 1e-3) + ROUNDING;
        let unbounded = |r: usize| !self.scales[r].is_finite() || !approx[r].is_finite();
        // A row is a candidate for the top when its upper bound reaches the n-th best
        // lower bound, and for the minimum when its lower bound reaches under the
        // smallest upper bound.
        let lower: Vec<f32> = (0..rows).map(|r| approx[r] - bound(r)).collect();
        let nth_lower = if n == 0 || n >= rows {
            f32::NEG_INFINITY
        } else {
            let mut l = lower.clone();
            let (_, nth, _) = l.select_nth_unstable_by(n - 1, |a, b| b.total_cmp(a));
            *nth
        };
        let min_upper = (0..rows).map(|r| approx[r] + bound(r)).fold(f32::INFINITY, f32::min);
        let candidates: Vec<u32> = (0..rows)
            .filter(|&r| unbounded(r) || approx[r] + bound(r) >= nth_lower || lower[r] <= min_upper)
            .map(|r| r as u32)
            .collect();
        let scored = candidates.iter().map(|&r| (r, exact_score(r as usize))).collect();
        Extremes::from_exact(scored, n, candidates.len())
    }

    /// Screened inner products, in row order.
    fn dots(&self, query: &[f32]) -> Vec<f32> {
        let mut out = vec![0f32; self.rows()];
        let dim = self.dim;
        out.par_chunks_mut(exact::ROWS_PER_TASK)
            .zip(self.codes.par_chunks(exact::ROWS_PER_TASK * dim))
            .enumerate()
            .for_each(|(chunk, (scores, codes))| {
                let base = chunk * exact::ROWS_PER_TASK;
                for (i, (s, code)) in scores.iter_mut().zip(codes.chunks_exact(dim)).enumerate() {
                    *s = dot_i8(code, query) * self.scales[base + i];
                }
            });
        out
    }
}

impl Extremes {
    /// From exactly scored rows that include every row of the top `n` and the minimum.
    fn from_exact(mut scored: Vec<(u32, f32)>, n: usize, rescored: usize) -> Extremes {
        scored.retain(|s| !s.1.is_nan());
        let min = scored.iter().map(|s| s.1).reduce(f32::min);
        let max = scored.iter().map(|s| s.1).reduce(f32::max);
        crate::rank::sort_hits(&mut scored);
        scored.truncate(n);
        Extremes { top: scored, min, max, rescored }
    }
}

/// `Σ code[i] · query[i]`.
fn dot_i8(code: &[i8], query: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { dot_i8_avx2(code, query) };
    }
    code.iter().zip(query).map(|(&c, &q)| c as f32 * q).sum()
}

/// Sixteen codes a step, widened to f32 in two registers. Written with intrinsics: the
/// compiler leaves the i8 → f32 conversion of the plain loop scalar.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_i8_avx2(code: &[i8], query: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = code.len().min(query.len());
    let whole = n / 16 * 16;
    let (mut lo_acc, mut hi_acc) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let (c, q) = (code.as_ptr(), query.as_ptr());
    for i in (0..whole).step_by(16) {
        let bytes = _mm_loadu_si128(c.add(i) as *const __m128i);
        let lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
        let hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(bytes)));
        lo_acc = _mm256_fmadd_ps(lo, _mm256_loadu_ps(q.add(i)), lo_acc);
        hi_acc = _mm256_fmadd_ps(hi, _mm256_loadu_ps(q.add(i + 8)), hi_acc);
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_add_ps(lo_acc, hi_acc));
    let tail: f32 = code[whole..n].iter().zip(&query[whole..n]).map(|(&c, &q)| c as f32 * q).sum();
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pseudo-random unit rows (xorshift), some exact duplicates to make ties.
    fn unit_rows(n: usize, dim: usize, seed: u64) -> Matrix {
        let mut state = seed;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f32 / (1u64 << 53) as f32 - 0.5
        };
        let mut m = Matrix::new(dim);
        for i in 0..n {
            let mut v: Vec<f32> = (0..dim).map(|_| next()).collect();
            if i % 50 == 7 {
                v = m.row(i as u32 - 1).to_vec();
            }
            crate::embed::l2_normalize(&mut v);
            m.push(&v);
        }
        m
    }

    #[test]
    fn screening_finds_exactly_what_a_full_scan_finds() {
        let m = unit_rows(5000, 64, 42);
        let screen = Screen::new(&m);
        for q in 0..20u32 {
            // Queries near a row (a clear winner) and mixtures (a crowded top).
            let mut query = m.row(q * 97).to_vec();
            if q % 2 == 1 {
                query.iter_mut().zip(m.row(q * 31 + 5)).for_each(|(a, b)| *a += b);
                crate::embed::l2_normalize(&mut query);
            }
            for n in [1, 5, 64] {
                let all = m.dots(&query);
                let want = crate::rank::top(&all, n);
                let got = screen.extremes(&m, &query, n);
                assert_eq!(got.top, want, "query {q}, n {n}");
                assert_eq!(got.min, all.iter().copied().reduce(f32::min));
                assert_eq!(got.max, all.iter().copied().reduce(f32::max));
                assert!(got.rescored < 5000 / 4, "the screen should rule out most rows: {}", got.rescored);
            }
        }
    }

    #[test]
    fn empty_zero_and_oversized_requests() {
        let m = Matrix::new(8);
        let got = Screen::new(&m).extremes(&m, &[0.0; 8], 5);
        assert!(got.top.is_empty() && got.min.is_none());
        let mut m = Matrix::new(2);
        m.push(&[0.0, 0.0]);
        m.push(&[0.6, 0.8]);
        let got = Screen::new(&m).extremes(&m, &[1.0, 0.0], 10);
        assert_eq!(got.top, vec![(1, 0.6), (0, 0.0)]);
        assert_eq!((got.min, got.max), (Some(0.0), Some(0.6)));
    }
}
