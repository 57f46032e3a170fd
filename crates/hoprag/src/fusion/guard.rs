//! Dense guard: the passages the query embedding itself points to, nearly as strongly as
//! to its best match, go first; a graph ranking fills the rest.
//!
//! Why: PPR spreads a seed's mass over every passage that mentions it, so a passage that
//! is *about* a query entity (the dense top hit) can fall below passages that merely
//! mention several seeds. That costs most where the graph adds nothing, e.g. HotpotQA
//! comparison questions, whose gold passages are the two entities' own pages, both near
//! the top of the dense list. Where the dense list is flat (no passage stands out), few
//! passages are close to its best and the graph ranking is kept.
//!
//! "Close" is calibrated per query: the dense scores are min-max normalised over the
//! dense top `depth`, so the gap does not depend on the embedder's cosine scale.

use serde::{Deserialize, Serialize};

use crate::corpus::PassageIdx;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DenseGuard {
    /// At most this many dense passages go first; 0 turns the guard off.
    pub max: usize,
    /// A dense passage is guarded when its score is within `gap` × (best − the
    /// `depth`-th best) of the best dense score.
    pub gap: f64,
    /// Depth of the dense list the scores are normalised over.
    pub depth: usize,
}

impl Default for DenseGuard {
    /// Off: `ppr` is HippoRAG 2 as published; `auto` sets its own (see `AutoParams`).
    fn default() -> Self {
        DenseGuard { max: 0, gap: 0.25, depth: 50 }
    }
}

impl DenseGuard {
    pub fn is_on(&self) -> bool {
        self.max > 0
    }

    /// The leading passages of `dense` (best first, at least `depth` long where the
    /// corpus allows) that the guard puts first.
    pub fn guarded(&self, dense: &[(PassageIdx, f32)]) -> Vec<(PassageIdx, f32)> {
        let Some((best, spread)) = self.range(dense) else { return Vec::new() };
        if !self.is_on() {
            return Vec::new();
        }
        dense
            .iter()
            .take(self.max)
            .take_while(|x| !x.1.is_nan() && (best as f64 - x.1 as f64) <= self.gap * spread)
            .copied()
            .collect()
    }

    /// The best dense score and its distance to the worst (non-NaN) score in the top
    /// `depth`; None for an empty list or a NaN best.
    fn range(&self, dense: &[(PassageIdx, f32)]) -> Option<(f32, f64)> {
        let best = dense.first().map(|x| x.1).filter(|s| !s.is_nan())?;
        let head = &dense[..self.depth.clamp(1, dense.len())];
        let last = head.iter().rev().map(|x| x.1).find(|s| !s.is_nan()).unwrap_or(best);
        Some((best, best as f64 - last as f64))
    }
}

/// `graph` (best first) behind the guarded passages of `dense`. Guarded passages score
/// 1 + their normalised closeness to the best dense score, in (1, 2]; graph passages
/// their score over the graph list's best, at most 1; so scores stay in rank order.
pub fn guard(graph: &[(PassageIdx, f32)], dense: &[(PassageIdx, f32)], params: &DenseGuard) -> Vec<(PassageIdx, f32)> {
    let first = params.guarded(dense);
    if first.is_empty() {
        return graph.to_vec();
    }
    let (best, spread) = params.range(dense).expect("a guarded passage");
    let mut out: Vec<(PassageIdx, f32)> = first
        .iter()
        .map(|&(p, s)| (p, 1.0 + if spread > 0.0 { (1.0 - (best as f64 - s as f64) / spread) as f32 } else { 1.0 }))
        .collect();
    // Ties among guarded passages (a flat dense head) would make their order depend on
    // the float rounding above; nudge them into their dense order instead.
    for i in 1..out.len() {
        if out[i].1 >= out[i - 1].1 {
            out[i].1 = f32::from_bits(out[i - 1].1.to_bits() - 1);
        }
    }
    let top = graph.first().map_or(1.0, |x| x.1);
    let scale = if top > 0.0 && top.is_finite() { top } else { 1.0 };
    out.extend(graph.iter().filter(|g| !first.iter().any(|f| f.0 == g.0)).map(|&(p, s)| (p, (s / scale).min(1.0))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(l: &[(PassageIdx, f32)]) -> Vec<PassageIdx> {
        l.iter().map(|x| x.0).collect()
    }

    #[test]
    fn passages_near_the_dense_best_go_first_the_graph_fills_the_rest() {
        // Dense spread over the top 4 is 1.0 - 0.2 = 0.8; gap 0.25 keeps scores >= 0.8.
        let dense = [(10, 1.0), (11, 0.85), (12, 0.5), (13, 0.2)];
        let graph = [(20, 0.4), (11, 0.3), (21, 0.1)];
        let p = DenseGuard { max: 5, gap: 0.25, depth: 4 };
        let out = guard(&graph, &dense, &p);
        assert_eq!(ids(&out), vec![10, 11, 20, 21]);
        assert!(out.windows(2).all(|w| w[0].1 > w[1].1), "{out:?}");
        // The cap bounds the guarded head.
        let one = guard(&graph, &dense, &DenseGuard { max: 1, ..p });
        assert_eq!(ids(&one), vec![10, 20, 11, 21]);
        // Off, or a wider normalisation depth that makes the head relatively flatter.
        assert_eq!(ids(&guard(&graph, &dense, &DenseGuard { max: 0, ..p })), ids(&graph));
        let wide = guard(&graph, &dense, &DenseGuard { gap: 0.1, ..p });
        assert_eq!(ids(&wide), vec![10, 20, 11, 21]);
    }

    #[test]
    fn a_flat_dense_head_keeps_its_order_and_nan_is_never_guarded() {
        let dense = [(3, 0.5), (1, 0.5), (2, 0.5)];
        let out = guard(&[(9, 0.2)], &dense, &DenseGuard { max: 5, gap: 0.25, depth: 50 });
        assert_eq!(ids(&out), vec![3, 1, 2, 9]);
        assert!(out.windows(2).all(|w| w[0].1 > w[1].1), "{out:?}");
        let nan = [(3, 0.5), (4, f32::NAN)];
        assert_eq!(ids(&guard(&[], &nan, &DenseGuard { max: 5, gap: 1.0, depth: 2 })), vec![3]);
        assert!(guard(&[(1, 0.3)], &[], &DenseGuard { max: 5, ..Default::default() }).len() == 1);
    }
}
