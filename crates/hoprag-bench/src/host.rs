//! `hoprag bench host`: what one core of this machine gives now, so that a latency
//! measured on a shared or virtual host can be read beside the host's own state: f32
//! multiply-adds (AVX2 FMA, what the query encoder runs on), i16 multiply-adds
//! (`vpmaddwd`, what a fixed-point encoder would run on), and the speed of re-reading a
//! buffer, by its size, which shows how much of the cache this process really gets.
//!
//! The README's eighth latency round used it: while the query path slowed, the FMA units
//! mostly kept their full rate, and past 12–16 MiB (it changed from hour to hour) a
//! buffer re-read at little more than memory speed, though the CPU reports a 32 MB L3.

use std::hint::black_box;
use std::time::Instant;

use clap::Args;
use serde::Serialize;

use super::quantile;
use crate::Context;

#[derive(Args)]
pub struct HostBench {
    /// Timed windows per arithmetic probe, about 5 ms each.
    #[arg(long, default_value_t = 20)]
    windows: usize,
    /// Buffer sizes to re-read, in MiB.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,10,12,14,16,24,64")]
    sizes: Vec<usize>,
}

#[derive(Serialize)]
struct Report {
    /// Billions of f32 multiply-adds a second, one core (`None` without AVX2 and FMA).
    fma_gmacs: Option<Spread>,
    /// Billions of i16 multiply-adds a second, one core (`None` without AVX2).
    madd_i16_gmacs: Option<Spread>,
    /// Re-reading a buffer over and over, one core.
    reread: Vec<Reread>,
}

/// The 10th, 50th and 90th percentiles over the timed windows.
#[derive(Serialize)]
struct Spread {
    p10: f64,
    p50: f64,
    p90: f64,
}

#[derive(Serialize)]
struct Reread {
    mib: usize,
    /// Median over the passes after the first.
    gb_per_s: f64,
}

pub fn run(ctx: &Context, args: HostBench) -> anyhow::Result<()> {
    if args.windows == 0 {
        anyhow::bail!("--windows must be at least 1");
    }
    if let Some(bad) = args.sizes.iter().find(|&&s| s == 0 || s > 4096) {
        anyhow::bail!("--sizes: {bad} MiB is not between 1 and 4096");
    }
    let report = Report {
        fma_gmacs: probes::fma().map(|kernel| spread(args.windows, kernel)),
        madd_i16_gmacs: probes::madd_i16().map(|kernel| spread(args.windows, kernel)),
        reread: args.sizes.iter().map(|&mib| Reread { mib, gb_per_s: reread(mib) }).collect(),
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("one core, now (billions of multiply-adds a second, p10 / p50 / p90 over {} windows):", args.windows);
    for (name, s) in [("f32 FMA", &report.fma_gmacs), ("i16 vpmaddwd", &report.madd_i16_gmacs)] {
        match s {
            Some(s) => println!("  {name:<14} {:>7.1} {:>7.1} {:>7.1}", s.p10, s.p50, s.p90),
            None => println!("  {name:<14} not measured: this CPU lacks the instructions"),
        }
    }
    println!("re-reading a buffer, one core (GB/s, median of the passes):");
    for r in &report.reread {
        println!("  {:>5} MiB {:>7.1}", r.mib, r.gb_per_s);
    }
    Ok(())
}

/// Runs `kernel` (which does `steps` rounds and returns the multiply-adds done) in
/// windows of about 5 ms and spreads their rates.
fn spread(windows: usize, kernel: fn(usize) -> f64) -> Spread {
    // Calibrate the window's length on a short run.
    let start = Instant::now();
    kernel(10_000);
    let per_step = start.elapsed().as_secs_f64() / 10_000.0;
    let steps = ((5e-3 / per_step.max(1e-12)) as usize).clamp(1_000, 100_000_000);
    let mut rates: Vec<f64> = (0..windows)
        .map(|_| {
            let start = Instant::now();
            let macs = kernel(steps);
            macs / start.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    Spread { p10: quantile(&rates, 0.1), p50: quantile(&rates, 0.5), p90: quantile(&rates, 0.9) }
}

/// GB/s of summing a buffer of `mib` MiB, median over at least 10 passes and 50 ms after
/// a first pass that faults the pages in and warms the caches.
fn reread(mib: usize) -> f64 {
    let buf: Vec<f32> = (0..mib << 18).map(|i| (i % 7) as f32).collect();
    black_box(probes::sum(&buf));
    let bytes = (buf.len() * 4) as f64;
    let begun = Instant::now();
    let mut rates = Vec::new();
    while rates.len() < 10 || begun.elapsed().as_secs_f64() < 0.05 {
        let start = Instant::now();
        black_box(probes::sum(black_box(&buf)));
        rates.push(bytes / start.elapsed().as_secs_f64() / 1e9);
    }
    rates.sort_by(f64::total_cmp);
    quantile(&rates, 0.5)
}

/// The kernels: independent chains, so that the units' throughput is measured, not an
/// instruction's latency.
mod probes {
    /// Rounds of ten chains of FMAs, eight multiply-adds each, if the CPU has them.
    pub fn fma() -> Option<fn(usize) -> f64> {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA.
            return Some(|steps| unsafe { x86::fma(steps) });
        }
        None
    }

    /// Rounds of ten chains of `vpmaddwd`, sixteen multiply-adds each, if the CPU has it.
    pub fn madd_i16() -> Option<fn(usize) -> f64> {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return Some(|steps| unsafe { x86::madd_i16(steps) });
        }
        None
    }

    /// The sum of `x`, in 32 independent lanes (so that loads, not additions, set the
    /// pace).
    pub fn sum(x: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { x86::sum(x) };
        }
        lanes(x)
    }

    #[inline(always)]
    fn lanes(x: &[f32]) -> f32 {
        let mut acc = [0f32; 32];
        let chunks = x.chunks_exact(32);
        let rest: f32 = chunks.remainder().iter().sum();
        for c in chunks {
            acc.iter_mut().zip(c).for_each(|(a, v)| *a += v);
        }
        acc.iter().sum::<f32>() + rest
    }

    #[cfg(target_arch = "x86_64")]
    mod x86 {
        use std::arch::x86_64::*;
        use std::hint::black_box;

        const CHAINS: usize = 10;

        /// `steps` rounds of `step` on each of ten chains from `start`, kept from being
        /// optimised away; inlined, so `step` compiles with its caller's features.
        #[inline(always)]
        fn chains<V: Copy>(steps: usize, start: V, step: impl Fn(V) -> V) {
            let mut acc = [start; CHAINS];
            for _ in 0..steps {
                for a in acc.iter_mut() {
                    *a = step(*a);
                }
            }
            black_box(acc);
        }

        #[target_feature(enable = "avx2,fma")]
        pub unsafe fn fma(steps: usize) -> f64 {
            // a ← 0.999 a + 0.001 stays near 1: no overflow, no subnormals.
            let (g, h) = (_mm256_set1_ps(black_box(0.999)), _mm256_set1_ps(black_box(0.001)));
            chains(steps, _mm256_set1_ps(1.0), |a| _mm256_fmadd_ps(a, g, h));
            (steps * CHAINS * 8) as f64
        }

        #[target_feature(enable = "avx2")]
        pub unsafe fn madd_i16(steps: usize) -> f64 {
            let b = _mm256_set1_epi16(black_box(1));
            chains(steps, _mm256_set1_epi16(1), |a| _mm256_madd_epi16(a, b));
            (steps * CHAINS * 16) as f64
        }

        #[target_feature(enable = "avx2")]
        pub unsafe fn sum(x: &[f32]) -> f32 {
            super::lanes(x)
        }
    }
}
