//! Exact scans of a large matrix at a quarter of the memory traffic: an 8-bit copy of the
//! rows screens every row with a proven error bound, and only the rows the bound cannot
//! rule out are scored again in full precision.
//!
//! Scoring a query against every triple of a graph (HippoRAG 2's fact matching) reads the
//! whole f32 matrix, 194 MB on the 2wiki graph, and is bound by memory bandwidth. The
//! int8 codes are a quarter of that, and multiply as integers (32 products per AVX2
//! instruction). Row `r` is stored as `s_r · c_r` with `s_r = max|row_r| / 127`, the query
//! as `s_q · c_q` the same way; each coordinate is off by at most half its scale, so the
//! screened score `s_r s_q (c_r · c_q)` is within `(|q|₁ s_r + |s_r c_r|₁ s_q) / 2` of the
//! exact one (plus float rounding, covered by a margin). A row whose upper bound is below
//! the lower bound of `n` other rows cannot be among the best `n`; the rest are scored
//! exactly, so the result is the one an exact scan gives, to the bit.

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
    /// `|s_r c_r|₁`, for the query's share of the error bound.
    l1: Vec<f32>,
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
    /// Rows scored exactly after screening: how much the screen ruled out.
    pub rescored: usize,
}

impl Screen {
    pub fn new(m: &Matrix) -> Screen {
        let dim = m.dim().max(1);
        let mut codes = vec![0i8; m.as_flat().len()];
        let mut scales = vec![0f32; m.rows()];
        codes
            .par_chunks_mut(dim)
            .zip(m.as_flat().par_chunks(dim))
            .zip(scales.par_iter_mut())
            .for_each(|((code, row), scale)| *scale = quantize(row, code));
        let l1 = codes
            .par_chunks(dim)
            .zip(&scales)
            .map(|(c, s)| s * c.iter().map(|&x| x.unsigned_abs() as f32).sum::<f32>())
            .collect();
        Screen { dim, codes, scales, l1 }
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
        // A query that is not finite cannot be bounded: score every row exactly.
        let l1: f32 = query.iter().map(|x| x.abs()).sum();
        if rows == 0 || !l1.is_finite() {
            let all = m.dots(query);
            return Extremes::from_exact((0..rows as u32).zip(all).collect(), n, rows);
        }
        let mut query_codes = vec![0i8; query.len()];
        let query_scale = quantize(query, &mut query_codes);
        let approx = self.dots(&query_codes, query_scale);
        let bound = |r: usize| (l1 * self.scales[r] + self.l1[r] * query_scale) * 0.5 * (1.0 + 1e-3) + ROUNDING;
        // Each row's exact score lies in [lower, upper]. Rows that are not finite cannot be
        // bounded: they get the widest interval, so they are scored exactly and vouch for
        // no threshold.
        let (lower, upper): (Vec<f32>, Vec<f32>) = (0..rows)
            .map(|r| match approx[r].is_finite() {
                true => (approx[r] - bound(r), approx[r] + bound(r)),
                false => (f32::NEG_INFINITY, f32::INFINITY),
            })
            .unzip();
        // A row is a candidate for the top when its upper bound reaches the n-th best
        // lower bound (at least the best row, whose exact score is the maximum), and for
        // the minimum when its lower bound reaches under the smallest upper bound.
        let head = n.max(1);
        let nth_lower = if head >= rows {
            f32::NEG_INFINITY
        } else {
            let mut l = lower.clone();
            let (_, nth, _) = l.select_nth_unstable_by(head - 1, |a, b| b.total_cmp(a));
            *nth
        };
        let min_upper = upper.iter().copied().fold(f32::INFINITY, f32::min);
        let candidates: Vec<u32> =
            (0..rows).filter(|&r| upper[r] >= nth_lower || lower[r] <= min_upper).map(|r| r as u32).collect();
        let scored = candidates.iter().map(|&r| (r, exact_score(r as usize))).collect();
        Extremes::from_exact(scored, n, candidates.len())
    }

    /// Screened inner products with the quantised query, in row order.
    fn dots(&self, query_codes: &[i8], query_scale: f32) -> Vec<f32> {
        let mut out = vec![0f32; self.rows()];
        let dim = self.dim;
        out.par_chunks_mut(exact::ROWS_PER_TASK)
            .zip(self.codes.par_chunks(exact::ROWS_PER_TASK * dim))
            .enumerate()
            .for_each(|(chunk, (scores, codes))| {
                let base = chunk * exact::ROWS_PER_TASK;
                for (i, (s, code)) in scores.iter_mut().zip(codes.chunks_exact(dim)).enumerate() {
                    *s = dot_i8(code, query_codes) as f32 * self.scales[base + i] * query_scale;
                }
            });
        out
    }
}

/// `v ≈ scale · codes` with `scale = max|v| / 127`; returns the scale: 0 for a zero
/// vector, NaN for one with a value that is not finite (codes 0 for both).
fn quantize(v: &[f32], codes: &mut [i8]) -> f32 {
    if v.iter().any(|x| !x.is_finite()) {
        codes.fill(0);
        return f32::NAN;
    }
    let max = v.iter().fold(0f32, |a, &x| a.max(x.abs()));
    if max == 0.0 {
        codes.fill(0);
        return 0.0;
    }
    let scale = max / 127.0;
    for (c, &x) in codes.iter_mut().zip(v) {
        *c = (x / scale).round().clamp(-127.0, 127.0) as i8;
    }
    scale
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

/// `Σ a[i] · b[i]` in exact integer arithmetic (|codes| ≤ 127, so 384 products fit an
/// i32 many times over).
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx2_fma() {
        // SAFETY: the CPU has AVX2.
        return unsafe { dot_i8_avx2(a, b) };
    }
    a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
}

/// Thirty-two products a step: `maddubs` multiplies unsigned by signed bytes, so `a`'s
/// sign moves onto `b` first (|a| · sign(a)·b = a·b); pairs of products (at most
/// 2 · 127², no saturation) are summed to i16, then to i32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let whole = n / 32 * 32;
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_si256();
    for i in (0..whole).step_by(32) {
        let x = _mm256_loadu_si256(a.as_ptr().add(i) as *const __m256i);
        let y = _mm256_loadu_si256(b.as_ptr().add(i) as *const __m256i);
        let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
    }
    let mut lanes = [0i32; 8];
    _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, acc);
    let tail: i32 = a[whole..n].iter().zip(&b[whole..n]).map(|(&x, &y)| x as i32 * y as i32).sum();
    lanes.iter().sum::<i32>() + tail
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
    fn integer_dot_is_exact_at_the_extremes() {
        for len in [0, 5, 32, 77, 384] {
            let a: Vec<i8> = (0..len).map(|i| if i % 3 == 0 { 127 } else { ((i * 37) % 255 - 127) as i8 }).collect();
            let b: Vec<i8> = (0..len).map(|i| if i % 2 == 0 { -127 } else { 127 }).collect();
            let want: i32 = a.iter().zip(&b).map(|(&x, &y)| x as i32 * y as i32).sum();
            assert_eq!(dot_i8(&a, &b), want, "length {len}");
        }
    }

    #[test]
    fn rows_that_are_not_finite_are_scored_exactly_and_never_displace_others() {
        let mut m = Matrix::new(2);
        m.push(&[f32::NAN, 1.0]);
        m.push(&[0.6, 0.8]);
        m.push(&[f32::INFINITY, 0.0]);
        m.push(&[0.8, 0.6]);
        let got = Screen::new(&m).extremes(&m, &[1.0, 0.0], 1);
        assert_eq!(got.top, vec![(2, f32::INFINITY)]);
        let got = Screen::new(&m).extremes(&m, &[0.0, 1.0], 2);
        assert_eq!(got.top, vec![(1, 0.8), (3, 0.6)], "NaN scores are left out, as by an exact scan");
        assert_eq!(got.min, Some(0.6));
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
