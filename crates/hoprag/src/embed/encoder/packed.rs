//! `x · W` for a few rows of `x` (a question's tokens), over weights packed once at load
//! as half floats.
//!
//! Why not `gemm` here: for a product with ~20 rows, `gemm` spends more time packing the
//! weights into its panels than multiplying (43% against 32% of the encoder's samples on
//! one question at a time), and it packs them anew on every call. Packed once, as f16,
//! MiniLM's layers take 21 MB instead of 42: half the bytes a question reads. They stay
//! cached from one question to the next only where the process gets most of a 32 MB L3
//! (a shared VM may get 12–16 MiB of it: `hoprag bench host`).
//!
//! The layout: the output columns in panels of [`PANEL`]; a panel is its `inputs` rows of
//! `PANEL` halves, in order. A product runs panel by panel, [`MAX_ROWS`] rows of `x` at a
//! time, each output summed over the inputs in order (one fused multiply-add chain), so a
//! row's result does not depend on the rows it is computed with.

use rayon::prelude::*;

use super::kernels::{Epilogue, SharedMut};

/// Output columns per panel: two AVX registers of f32.
pub const PANEL: usize = 16;

/// Rows of `x` per inner block: 2 × MAX_ROWS accumulators and two weight registers fit
/// the sixteen AVX registers.
pub const MAX_ROWS: usize = 6;

/// Rows of `x` per outer tile: its inputs (at most 1536 wide here, 6 KB a row) stay in the
/// L2 cache while every panel passes over them.
const TILE_ROWS: usize = 48;

/// The `[inputs, outputs]` weight of a linear layer, packed in f16 panels.
pub struct PackedWeight {
    inputs: usize,
    outputs: usize,
    /// `outputs.div_ceil(PANEL)` panels of `inputs` rows (columns past `outputs` are
    /// zero).
    rows: Vec<PanelRow>,
}

/// One input's weights for a panel's columns, as f16 bits; aligned so that the kernel
/// reads it as two vector registers, with no unaligned-load helper (whose precondition
/// checks in debug builds cost more than the product).
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct PanelRow([u16; PANEL]);

impl PackedWeight {
    /// Packs `weight`, stored `[outputs, inputs]` (one output's weights contiguous, as in
    /// the checkpoint); `None` when a weight does not fit in f16 (|w| > 65504).
    pub fn pack(weight: &[f32], inputs: usize, outputs: usize) -> Option<PackedWeight> {
        assert_eq!(weight.len(), inputs * outputs, "weight is outputs × inputs");
        if weight.iter().any(|w| !half::f16::from_f32(*w).is_finite()) {
            return None;
        }
        let panels = outputs.div_ceil(PANEL);
        let mut rows = vec![PanelRow::default(); panels * inputs];
        for (panel, out) in rows.chunks_exact_mut(inputs).enumerate() {
            for (i, row) in out.iter_mut().enumerate() {
                for (c, h) in row.0.iter_mut().enumerate() {
                    let o = panel * PANEL + c;
                    if o < outputs {
                        *h = half::f16::from_f32(weight[o * inputs + i]).to_bits();
                    }
                }
            }
        }
        Some(PackedWeight { inputs, outputs, rows })
    }

    /// `dst[rows × outputs] = epilogue(x[rows × inputs] · W)`, the panels split across
    /// `threads`.
    pub fn product(&self, x: &[f32], dst: &mut [f32], threads: usize, epilogue: Epilogue) {
        let rows = x.len() / self.inputs;
        assert!(x.len() == rows * self.inputs && dst.len() >= rows * self.outputs, "buffers match the weight");
        let panels = self.outputs.div_ceil(PANEL);
        let dst = SharedMut(dst.as_mut_ptr());
        let bands = if threads > 1 && rows * self.inputs * self.outputs >= 1 << 20 { threads.min(panels) } else { 1 };
        let per_band = panels.div_ceil(bands);
        let band = |b: usize| {
            for tile in (0..rows).step_by(TILE_ROWS) {
                let tile_rows = TILE_ROWS.min(rows - tile);
                // Blocks as even as they can be (20 rows: 5 + 5 + 5 + 5, not 6 + 6 + 6 + 2):
                // a short block loads the panel for few multiply-adds.
                let blocks = tile_rows.div_ceil(MAX_ROWS);
                let band_panels = b * per_band..((b + 1) * per_band).min(panels);
                for panel in band_panels.clone() {
                    let mut block = tile;
                    for i in 0..blocks {
                        let n = tile_rows / blocks + usize::from(i < tile_rows % blocks);
                        // The next panel is fetched during the second block (the first
                        // reads this one's weights), so that the weights, 21 MB for
                        // MiniLM, stream from memory while the blocks after the first
                        // compute from cache (MiniLM's 24 products for a 19-token
                        // question, two threads, in one process against no prefetch:
                        // 5–12% less time, weights cached or first evicted).
                        let ahead = (i == 1.min(blocks - 1) && band_panels.contains(&(panel + 1))).then_some(panel + 1);
                        // SAFETY: rows block..block + n of `x` exist; this band alone writes
                        // these panels' columns of `dst`, which holds `rows × outputs`.
                        unsafe {
                            self.block(
                                &x[block * self.inputs..(block + n) * self.inputs],
                                n,
                                panel,
                                ahead,
                                dst,
                                block,
                                epilogue,
                            )
                        };
                        block += n;
                    }
                }
            }
        };
        if bands == 1 {
            band(0)
        } else {
            (0..bands).into_par_iter().for_each(band);
        }
    }

    /// Rows `first..first + n` of the product, columns of `panel`.
    ///
    /// # Safety
    /// `dst` must hold at least `(first + n) × outputs` elements, written by no one else
    /// in this panel's columns meanwhile.
    #[allow(clippy::too_many_arguments)]
    unsafe fn block(
        &self,
        x: &[f32],
        n: usize,
        panel: usize,
        ahead: Option<usize>,
        dst: SharedMut,
        first: usize,
        epilogue: Epilogue,
    ) {
        let w = &self.rows[panel * self.inputs..][..self.inputs];
        let ahead = ahead.map(|p| &self.rows[p * self.inputs..][..self.inputs]);
        let mut out = [[0f32; PANEL]; MAX_ROWS];
        dispatch(x, self.inputs, n, w, ahead, &mut out);
        let cols = PANEL.min(self.outputs - panel * PANEL);
        match cols {
            PANEL => epilogue.apply(out[..n].as_flattened_mut(), panel * PANEL, PANEL),
            _ => out[..n].iter_mut().for_each(|row| epilogue.apply(&mut row[..cols], panel * PANEL, cols)),
        }
        for (r, row) in out.iter().take(n).enumerate() {
            let at = dst.get().add((first + r) * self.outputs + panel * PANEL);
            std::ptr::copy_nonoverlapping(row.as_ptr(), at, cols);
        }
    }
}

/// `out[r] = x[r] · panel` for the first `n` rows (`n ≤ MAX_ROWS`), on the best kernel the
/// CPU has, fetching the panel `ahead` into L2 meanwhile, if given.
fn dispatch(
    x: &[f32],
    inputs: usize,
    n: usize,
    w: &[PanelRow],
    ahead: Option<&[PanelRow]>,
    out: &mut [[f32; PANEL]; MAX_ROWS],
) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx2_fma() && std::arch::is_x86_feature_detected!("f16c") {
        let next = ahead.filter(|a| a.len() >= inputs).map_or(std::ptr::null(), |a| a.as_ptr());
        macro_rules! rows {
            ($($r:literal)*) => {
                match (n, !next.is_null()) {
                    $(($r, false) => avx2::block::<$r, false>(x, inputs, w, next, out),
                      ($r, true) => avx2::block::<$r, true>(x, inputs, w, next, out),)*
                    (_, false) => avx2::block::<6, false>(x, inputs, w, next, out),
                    (_, true) => avx2::block::<6, true>(x, inputs, w, next, out),
                }
            };
        }
        // SAFETY: the CPU has AVX2, FMA and F16C; `x` holds `n` rows of `inputs`, `w` a
        // panel of `inputs × PANEL`, and `next`, when not null, another.
        unsafe { rows!(1 2 3 4 5) };
        return;
    }
    portable(x, inputs, n, w, out)
}

/// The same sums in the same order, one multiply-add at a time.
fn portable(x: &[f32], inputs: usize, n: usize, w: &[PanelRow], out: &mut [[f32; PANEL]; MAX_ROWS]) {
    for (r, acc) in out.iter_mut().take(n).enumerate() {
        *acc = [0.0; PANEL];
        let row = &x[r * inputs..][..inputs];
        for (&xi, ws) in row.iter().zip(w) {
            for (a, &h) in acc.iter_mut().zip(&ws.0) {
                *a = xi.mul_add(half::f16::from_bits(h).to_f32(), *a);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{PanelRow, MAX_ROWS, PANEL};
    use std::arch::x86_64::*;

    /// `R` rows against one panel: per input, the panel's 16 halves widen to two f32
    /// registers, and each row's value is broadcast into two multiply-adds.
    ///
    /// The rows' pointers are set before the loop: an index `r · inputs + i` in it is an
    /// overflow-checked add per row and input in the dev build that benchmarks run on
    /// (7% of the products' time, measured in one process against this loop).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn block<const R: usize, const AHEAD: bool>(
        x: &[f32],
        inputs: usize,
        w: &[PanelRow],
        ahead: *const PanelRow,
        out: &mut [[f32; PANEL]; MAX_ROWS],
    ) {
        debug_assert!(x.len() >= R * inputs && w.len() >= inputs);
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        let rows: [*const f32; R] = std::array::from_fn(|r| x.as_ptr().add(r * inputs));
        let wp = w.as_ptr() as *const [__m128i; 2];
        for i in 0..inputs {
            if AHEAD && i % 2 == 0 {
                // SAFETY: a prefetch reads nothing; `ahead` is the next panel, as long.
                _mm_prefetch::<_MM_HINT_T1>(ahead.add(i) as *const i8);
            }
            // SAFETY: a PanelRow is 32 aligned bytes, two 16-byte vectors.
            let [lo, hi] = *wp.add(i);
            let (lo, hi) = (_mm256_cvtph_ps(lo), _mm256_cvtph_ps(hi));
            for (a, row) in acc.iter_mut().zip(rows) {
                let v = _mm256_broadcast_ss(&*row.add(i));
                a[0] = _mm256_fmadd_ps(v, lo, a[0]);
                a[1] = _mm256_fmadd_ps(v, hi, a[1]);
            }
        }
        for (a, o) in acc.iter().zip(out.iter_mut()) {
            _mm256_storeu_ps(o.as_mut_ptr(), a[0]);
            _mm256_storeu_ps(o.as_mut_ptr().add(8), a[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn products_equal_the_f64_product_of_the_rounded_weights() {
        // Outputs not a multiple of the panel, rows across several blocks and tiles.
        for (rows, inputs, outputs) in [(1, 8, 16), (5, 37, 21), (20, 384, 1152), (53, 64, 40)] {
            let x = values(rows * inputs, 1);
            let w = values(inputs * outputs, 2);
            let packed = PackedWeight::pack(&w, inputs, outputs).unwrap();
            for threads in [1, 2] {
                let mut got = vec![f32::NAN; rows * outputs];
                packed.product(&x, &mut got, threads, Epilogue::None);
                for r in 0..rows {
                    for o in 0..outputs {
                        let want: f64 = (0..inputs)
                            .map(|i| x[r * inputs + i] as f64 * half::f16::from_f32(w[o * inputs + i]).to_f64())
                            .sum();
                        let g = got[r * outputs + o] as f64;
                        assert!(
                            (g - want).abs() < 1e-5 * inputs as f64,
                            "{rows}x{inputs}x{outputs} [{r},{o}]: {g} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_row_gives_the_same_result_alone_or_in_a_batch() {
        let (inputs, outputs) = (96, 48);
        let x = values(13 * inputs, 3);
        let w = values(inputs * outputs, 4);
        let packed = PackedWeight::pack(&w, inputs, outputs).unwrap();
        let mut batch = vec![0.0; 13 * outputs];
        packed.product(&x, &mut batch, 2, Epilogue::None);
        for r in 0..13 {
            let mut alone = vec![0.0; outputs];
            packed.product(&x[r * inputs..(r + 1) * inputs], &mut alone, 1, Epilogue::None);
            assert_eq!(alone, batch[r * outputs..(r + 1) * outputs], "row {r}");
        }
        // The portable kernel sums in the same order with the same fused multiply-adds.
        let w0 = &packed.rows[..inputs];
        let mut simd = [[0f32; PANEL]; MAX_ROWS];
        let mut plain = [[0f32; PANEL]; MAX_ROWS];
        dispatch(&x, inputs, 5, w0, None, &mut simd);
        portable(&x, inputs, 5, w0, &mut plain);
        assert_eq!(simd[..5], plain[..5]);
    }

    #[test]
    fn an_epilogue_gives_what_its_own_pass_after_the_product_gives() {
        // 40 outputs: two whole panels and a ragged one.
        let (rows, inputs, outputs) = (7, 48, 40);
        let x = values(rows * inputs, 5);
        let packed = PackedWeight::pack(&values(inputs * outputs, 6), inputs, outputs).unwrap();
        let bias = values(outputs, 7);
        let mut plain = vec![0.0; rows * outputs];
        packed.product(&x, &mut plain, 1, Epilogue::None);
        for (epilogue, pass) in [
            (Epilogue::Bias(&bias), super::super::kernels::add_bias as fn(&mut [f32], &[f32])),
            (Epilogue::BiasGelu(&bias), super::super::kernels::bias_gelu),
        ] {
            let mut want = plain.clone();
            pass(&mut want, &bias);
            for threads in [1, 2] {
                let mut got = vec![0.0; rows * outputs];
                packed.product(&x, &mut got, threads, epilogue);
                assert_eq!(got, want, "{threads} threads");
            }
        }
    }

    #[test]
    fn weights_past_the_half_range_are_not_packed() {
        assert!(PackedWeight::pack(&[1.0, 70000.0], 2, 1).is_none());
        assert!(PackedWeight::pack(&[1.0, -65504.0], 2, 1).is_some());
    }
}
