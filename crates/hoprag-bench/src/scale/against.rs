//! `--against DIR`: how the composed vectors compare with MiniLM's own, on the passages
//! of a MiniLM index of real text (e.g. the 2wiki corpus): the spread of random pairs'
//! cosines (a composition that puts everything near one direction would be an easy and
//! unrealistic test for HNSW) and how many of each passage's nearest neighbours the two
//! agree on.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use hoprag::corpus::Passage;
use hoprag::embed::{dot, ComposedEmbedder, Embedder, TextKind};
use hoprag::index::{ExactIndex, Matrix, VectorIndex};
use serde::Serialize;

use crate::Rng;

const PAIRS: usize = 20_000;
const PROBES: usize = 1_000;
const K: usize = 10;

#[derive(Serialize)]
pub struct Comparison {
    pub passages: usize,
    pub pairs: usize,
    pub minilm_pair_cosine: Spread,
    pub composed_pair_cosine: Spread,
    pub probes: usize,
    /// Mean share of a passage's MiniLM top-10 neighbours that are also in its composed top-10.
    pub shared_top10: f64,
}

#[derive(Serialize)]
pub struct Spread {
    pub mean: f64,
    pub p99: f64,
}

fn spread(xs: Vec<f64>) -> Spread {
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    Spread { mean, p99: crate::percentiles(xs).p99 }
}

pub fn compare(dir: &Path, embedder: &ComposedEmbedder) -> anyhow::Result<Comparison> {
    let index = hoprag::store::folder(dir).load().with_context(|| format!("opening {}", dir.display()))?;
    anyhow::ensure!(
        index.manifest.embedder.id == "minilm",
        "{}: built with {}, the comparison needs a MiniLM index",
        dir.display(),
        index.manifest.embedder.id
    );
    let n = index.len();
    anyhow::ensure!(n > K + 1, "{}: {n} passages, too few to compare neighbours", dir.display());
    let texts: Vec<String> = index.passages().iter().map(Passage::index_text).collect();
    let composed = Arc::new(Matrix::from_flat(
        embedder.dim(),
        embedder.embed(&texts, TextKind::Passage)?.into_iter().flatten().collect(),
    ));
    let minilm = index.vectors().clone();
    let mut rng = Rng(0x5ca1e);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..PAIRS {
        let (i, j) = (rng.below(n), rng.below(n));
        a.push(dot(minilm.row(i), minilm.row(j)) as f64);
        b.push(dot(composed.row(i), composed.row(j)) as f64);
    }
    let (exact_m, exact_c) = (ExactIndex::new(minilm.clone()), ExactIndex::new(composed.clone()));
    let probes = PROBES.min(n);
    let mut shared = 0.0;
    for p in 0..probes {
        let i = (p * n / probes) as u32;
        let top = |x: &ExactIndex, m: &Matrix| -> anyhow::Result<Vec<u32>> {
            Ok(x.search(m.row(i), K + 1)?.into_iter().map(|h| h.0).filter(|&j| j != i).take(K).collect())
        };
        let (tm, tc) = (top(&exact_m, &minilm)?, top(&exact_c, &composed)?);
        shared += tm.iter().filter(|j| tc.contains(j)).count() as f64 / K as f64;
    }
    Ok(Comparison {
        passages: n,
        pairs: PAIRS,
        minilm_pair_cosine: spread(a),
        composed_pair_cosine: spread(b),
        probes,
        shared_top10: shared / probes as f64,
    })
}
