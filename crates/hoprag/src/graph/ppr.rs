//! Personalized PageRank by sparse power iteration.
//!
//! Written here rather than taken from a crate: the graph crates on crates.io (petgraph,
//! graphrs) offer global PageRank on their own graph types but not a personalized one
//! over a compressed adjacency, which is what query-time PPR needs to be fast.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{EdgeKind, EntityGraph};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct PprParams {
    /// Probability of following an edge rather than jumping back to a seed (HippoRAG
    /// uses 0.5).
    pub damping: f64,
    /// Stop when the L1 change of the score vector falls below this.
    pub tolerance: f64,
    pub max_iterations: usize,
}

impl Default for PprParams {
    fn default() -> Self {
        PprParams { damping: 0.5, tolerance: 1e-7, max_iterations: 100 }
    }
}

/// An undirected weighted graph in compressed form, stored for gathering: row `j` lists
/// the nodes `i` linked to `j` with the transition probability `w_ij / deg_i`.
#[derive(Debug, Clone)]
pub struct PprGraph {
    offsets: Vec<usize>,
    sources: Vec<u32>,
    probs: Vec<f32>,
    /// Nodes with no edges: their mass returns to the seeds.
    dangling: Vec<u32>,
}

#[derive(Debug, Clone)]
pub struct PprResult {
    pub scores: Vec<f64>,
    pub iterations: usize,
    pub residual: f64,
}

impl PprGraph {
    /// Builds the graph from undirected weighted edges over `n` nodes. Parallel edges add
    /// up; self-loops are ignored.
    pub fn from_edges(n: usize, edges: &[(u32, u32, f32)]) -> PprGraph {
        let mut degree = vec![0f64; n];
        let mut count = vec![0usize; n + 1];
        for &(a, b, w) in edges {
            if a == b || w <= 0.0 {
                continue;
            }
            degree[a as usize] += w as f64;
            degree[b as usize] += w as f64;
            count[a as usize + 1] += 1;
            count[b as usize + 1] += 1;
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let offsets = count.clone();
        let mut fill = count;
        let mut sources = vec![0u32; offsets[n]];
        let mut probs = vec![0f32; offsets[n]];
        for &(a, b, w) in edges {
            if a == b || w <= 0.0 {
                continue;
            }
            // Row b gathers from a, row a gathers from b.
            for (to, from) in [(b, a), (a, b)] {
                let slot = fill[to as usize];
                sources[slot] = from;
                probs[slot] = (w as f64 / degree[from as usize]) as f32;
                fill[to as usize] += 1;
            }
        }
        let dangling = (0..n as u32).filter(|&i| degree[i as usize] == 0.0).collect();
        PprGraph { offsets, sources, probs, dangling }
    }

    /// The entity graph as nodes `0..E` (entities) and `E..E+P` (passages): relation and
    /// synonym edges between entities (synonyms weighted by their cosine), and an edge of
    /// weight 1 between each passage and each entity it mentions.
    pub fn from_entity_graph(g: &EntityGraph) -> PprGraph {
        let e = g.entities.len() as u32;
        let mut edges: Vec<(u32, u32, f32)> = g
            .edges
            .iter()
            .map(|x| (x.a, x.b, if x.kind == EdgeKind::Synonym { x.weight } else { x.weight.max(1.0) }))
            .collect();
        for (p, ents) in g.passage_entities.iter().enumerate() {
            edges.extend(ents.iter().map(|&x| (e + p as u32, x, 1.0)));
        }
        Self::from_edges(g.entities.len() + g.passage_entities.len(), &edges)
    }

    pub fn nodes(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn edges(&self) -> usize {
        self.sources.len() / 2
    }

    /// PPR from weighted seed nodes (weights are normalised to sum to one).
    pub fn personalized_pagerank(&self, seeds: &[(u32, f64)], params: &PprParams) -> PprResult {
        let n = self.nodes();
        let total: f64 = seeds.iter().map(|s| s.1.max(0.0)).sum();
        let mut reset = vec![0f64; n];
        if total <= 0.0 {
            return PprResult { scores: reset, iterations: 0, residual: 0.0 };
        }
        for &(s, w) in seeds {
            reset[s as usize] += w.max(0.0) / total;
        }
        let d = params.damping;
        let mut scores = reset.clone();
        let mut next = vec![0f64; n];
        let (mut iterations, mut residual) = (0, f64::INFINITY);
        // Small graphs are faster on one thread than with rayon's scheduling.
        let parallel = self.sources.len() > 200_000;
        while iterations < params.max_iterations && residual > params.tolerance {
            let lost: f64 = self.dangling.iter().map(|&i| scores[i as usize]).sum();
            let row = |j: usize| {
                let (lo, hi) = (self.offsets[j], self.offsets[j + 1]);
                let mut acc = 0.0;
                for (&from, &p) in self.sources[lo..hi].iter().zip(&self.probs[lo..hi]) {
                    acc += scores[from as usize] * p as f64;
                }
                (1.0 - d) * reset[j] + d * (acc + lost * reset[j])
            };
            if parallel {
                next.par_iter_mut().enumerate().with_min_len(4096).for_each(|(j, out)| *out = row(j));
                residual = scores.iter().zip(&next).map(|(a, b)| (a - b).abs()).sum();
            } else {
                // One pass: the residual is summed in the same order as above, so the
                // iteration count (and every score) is the same as computing it apart.
                residual = 0.0;
                for (j, out) in next.iter_mut().enumerate() {
                    let x = row(j);
                    residual += (scores[j] - x).abs();
                    *out = x;
                }
            }
            std::mem::swap(&mut scores, &mut next);
            iterations += 1;
        }
        PprResult { scores, iterations, residual }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_closed_form_on_a_path() {
        // 0 - 1 - 2, seed 0, damping 0.5; p = 0.5 r + 0.5 P^T p gives
        // p0 = 0.5 + p1/4, p2 = p1/4, p1 = (p0 + p2)/2, hence p1 = 1/3.
        let g = PprGraph::from_edges(3, &[(0, 1, 1.0), (1, 2, 1.0)]);
        let r = g.personalized_pagerank(&[(0, 1.0)], &PprParams { tolerance: 1e-12, ..Default::default() });
        let expected = [0.5 + 1.0 / 12.0, 1.0 / 3.0, 1.0 / 12.0];
        for (a, b) in r.scores.iter().zip(expected) {
            assert!((a - b).abs() < 1e-9, "{:?}", r.scores);
        }
        assert!((r.scores.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn dangling_mass_returns_to_seeds_and_no_seed_gives_zeros() {
        let g = PprGraph::from_edges(4, &[(0, 1, 2.0)]);
        let r = g.personalized_pagerank(&[(0, 1.0), (3, 1.0)], &PprParams::default());
        assert!((r.scores.iter().sum::<f64>() - 1.0).abs() < 1e-6);
        assert_eq!(r.scores[2], 0.0);
        assert!(r.scores[3] > r.scores[1]);
        assert!(g.personalized_pagerank(&[], &PprParams::default()).scores.iter().all(|&x| x == 0.0));
    }

    #[test]
    fn weights_steer_the_walk() {
        // From 0, the heavier edge to 1 gets more mass than the light edge to 2.
        let g = PprGraph::from_edges(3, &[(0, 1, 3.0), (0, 2, 1.0)]);
        let r = g.personalized_pagerank(&[(0, 1.0)], &PprParams::default());
        assert!(r.scores[1] > 2.5 * r.scores[2]);
    }
}
