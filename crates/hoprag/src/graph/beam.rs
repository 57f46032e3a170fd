//! Diverse Triple Beam Search (GEAR, Algorithm 1): grow the `b` best sequences of linked
//! triples from initial triples, scoring each sequence against the query, and down-weight
//! the lower-ranked extensions of every beam so that the beams kept do not all continue
//! one prefix.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::triple_index::TripleGraph;
use crate::corpus::PassageIdx;
use crate::embed::{Embedder, TextKind};
use crate::error::{Error, Result};

/// Algorithm 1's inputs besides the query and the initial triples, with the paper's
/// defaults (appendix B.2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BeamParams {
    /// Beams kept after every step, b (10).
    pub beam_size: usize,
    /// Maximum sequence length, l (2).
    pub length: usize,
    /// Neighbours of a beam's last triple considered, the most query-similar (100).
    pub neighbours: usize,
    /// γ of the weight exp(−min(n, γ)/γ) on the n-th extension of a beam (2b).
    pub gamma: f32,
    /// Off: plain beam search (every weight 1), the paper's Table 4 ablation.
    pub diversity: bool,
}

impl Default for BeamParams {
    fn default() -> Self {
        BeamParams { beam_size: 10, length: 2, neighbours: 100, gamma: 20.0, diversity: true }
    }
}

/// A sequence of triples and its accumulated score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Beam {
    pub score: f32,
    pub triples: Vec<u32>,
}

/// score(q, T): how well a sequence of triples matches the query.
pub trait SequenceScorer {
    /// One score per sequence, in order. Given all candidates of a step at once, so an
    /// implementation that runs a model can batch them.
    fn score(&self, sequences: &[Vec<u32>]) -> Result<Vec<f32>>;
}

/// What a search did, for traces.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BeamStats {
    /// Distinct initial triples.
    pub initial: usize,
    /// Expansion steps run (at most l − 1).
    pub steps: usize,
    /// Sequences scored, initial ones included.
    pub scored: usize,
    /// Neighbours skipped because a beam of the previous step holds them.
    pub skipped_visited: usize,
    /// Neighbours beyond the per-beam cap.
    pub capped: usize,
    /// A step that could extend no beam ends the search with the beams before it.
    pub stopped_early: bool,
}

/// Algorithm 1. `query` ranks each beam's neighbours to keep the most similar
/// `neighbours` of them; `scorer` is score(q, ·). Initial triples are taken once each,
/// in their first position. Returns B_{l−1}, best first.
///
/// Where the box is silent: a step that extends no beam at all (no last triple has an
/// unvisited neighbour) would leave B_i empty and lose every sequence; the search stops
/// there and returns the previous beams instead. Ties are broken by triple ids, so
/// results are deterministic.
pub fn diverse_triple_beam_search(
    graph: &TripleGraph,
    query: &[f32],
    initial: &[u32],
    scorer: &dyn SequenceScorer,
    p: &BeamParams,
) -> Result<(Vec<Beam>, BeamStats)> {
    if p.beam_size == 0 || p.length == 0 {
        return Err(Error::Config("beam search needs a beam size and a length of at least 1".into()));
    }
    if p.diversity && (p.gamma.is_nan() || p.gamma <= 0.0) {
        return Err(Error::Config(format!("beam search: gamma must be positive, not {}", p.gamma)));
    }
    let mut stats = BeamStats::default();

    // Lines 1–5: score every initial triple as a sequence of one; keep the top b.
    let mut seen = HashSet::new();
    let starts: Vec<Vec<u32>> = initial.iter().filter(|&&t| seen.insert(t)).map(|&t| vec![t]).collect();
    stats.initial = starts.len();
    stats.scored += starts.len();
    let scores = scorer.score(&starts)?;
    let mut beams = top(starts.into_iter().zip(scores).map(|(triples, score)| Beam { score, triples }).collect(), p);

    // Lines 6–20.
    let mut neighbours = Vec::new();
    for _ in 1..p.length {
        // exists(t, B_{i−1}): any triple of any beam of the previous step.
        let visited: HashSet<u32> = beams.iter().flat_map(|b| b.triples.iter().copied()).collect();
        let mut candidates: Vec<(usize, Vec<u32>)> = Vec::new();
        for (i, beam) in beams.iter().enumerate() {
            let last = *beam.triples.last().expect("beams are never empty");
            graph.neighbours(last, &mut neighbours);
            if neighbours.len() > p.neighbours {
                stats.capped += neighbours.len() - p.neighbours;
                most_similar(graph, query, &mut neighbours, p.neighbours);
            }
            for &t in &neighbours {
                if visited.contains(&t) {
                    stats.skipped_visited += 1;
                    continue;
                }
                let mut seq = beam.triples.clone();
                seq.push(t); // T ∘ t
                candidates.push((i, seq));
            }
        }
        if candidates.is_empty() {
            stats.stopped_early = true;
            break;
        }
        stats.steps += 1;
        let sequences: Vec<Vec<u32>> = candidates.iter().map(|(_, s)| s.clone()).collect();
        stats.scored += sequences.len();
        let scores = scorer.score(&sequences)?;
        // V of each beam: s' = s + score(q, T ∘ t).
        let mut per_beam: Vec<Vec<Beam>> = vec![Vec::new(); beams.len()];
        for ((i, triples), s) in candidates.into_iter().zip(scores) {
            per_beam[i].push(Beam { score: beams[i].score + s, triples });
        }
        let mut next = Vec::new();
        for mut v in per_beam {
            sort(&mut v);
            for (n, mut beam) in v.into_iter().enumerate() {
                beam.score *= diversity_weight(n, p);
                next.push(beam);
            }
        }
        beams = top(next, p);
    }
    Ok((beams, stats))
}

/// exp(−min(n, γ)/γ) for the n-th (from 0) extension of a beam, or 1 without diversity.
pub fn diversity_weight(n: usize, p: &BeamParams) -> f32 {
    if !p.diversity {
        return 1.0;
    }
    (-(n as f32).min(p.gamma) / p.gamma).exp()
}

/// Best first; equal scores by triple ids.
fn sort(beams: &mut [Beam]) {
    beams.sort_by(|a, b| crate::rank::desc(a.score, b.score).then_with(|| a.triples.cmp(&b.triples)));
}

fn top(mut beams: Vec<Beam>, p: &BeamParams) -> Vec<Beam> {
    sort(&mut beams);
    beams.truncate(p.beam_size);
    beams
}

/// Keeps the `n` triples of `list` most similar to the query (by their own embeddings),
/// in id order.
fn most_similar(graph: &TripleGraph, query: &[f32], list: &mut Vec<u32>, n: usize) {
    if n == 0 {
        // `gear.neighbours = 0` is rejected by config validation; a caller that builds
        // the parameters by hand gets no extension rather than a panic.
        list.clear();
        return;
    }
    let mut scored: Vec<(f32, u32)> = list.iter().map(|&t| (dot(query, graph.vector(t)), t)).collect();
    scored.select_nth_unstable_by(n - 1, |a, b| crate::rank::desc(a.0, b.0).then(a.1.cmp(&b.1)));
    list.clear();
    list.extend(scored[..n].iter().map(|x| x.1));
    list.sort_unstable();
}

/// The returned beams read breadth-first: every beam's first triple (best beam first),
/// then every second triple, and so on.
pub fn flatten_breadth_first(beams: &[Beam]) -> Vec<u32> {
    let longest = beams.iter().map(|b| b.triples.len()).max().unwrap_or(0);
    (0..longest).flat_map(|depth| beams.iter().filter_map(move |b| b.triples.get(depth).copied())).collect()
}

/// The source passages of triples, in order, each once (C̃_q).
pub fn triples_to_passages(graph: &TripleGraph, triples: &[u32]) -> Vec<PassageIdx> {
    let mut seen = HashSet::new();
    triples.iter().map(|&t| graph.passage(t)).filter(|&p| seen.insert(p)).collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// score(q, T) without running a model: the sequence's embedding is taken to be the
/// normalised sum of its triples' cached embeddings, each weighted by its token count.
/// That is what mean pooling over the concatenated text would give if no token attended
/// across a triple boundary; the cosine with the query is then exact arithmetic on
/// stored vectors.
pub struct PooledScorer<'a> {
    pub graph: &'a TripleGraph,
    pub query: &'a [f32],
}

impl SequenceScorer for PooledScorer<'_> {
    fn score(&self, sequences: &[Vec<u32>]) -> Result<Vec<f32>> {
        let mut sum = vec![0.0f32; self.query.len()];
        Ok(sequences
            .iter()
            .map(|seq| {
                if let [t] = seq[..] {
                    return dot(self.query, self.graph.vector(t));
                }
                sum.iter_mut().for_each(|x| *x = 0.0);
                for &t in seq {
                    let w = self.graph.weight(t);
                    sum.iter_mut().zip(self.graph.vector(t)).for_each(|(s, v)| *s += w * v);
                }
                let norm = dot(&sum, &sum).sqrt();
                if norm > 0.0 {
                    dot(self.query, &sum) / norm
                } else {
                    0.0
                }
            })
            .collect())
    }
}

/// score(q, T) as the paper computes it: the embedder runs on the concatenated triple
/// texts (joined by `"; "`), all candidates of a step in one batch. A single triple's
/// text is the one the graph build embedded, so its stored vector is used.
pub struct EncodeScorer<'a> {
    pub graph: &'a TripleGraph,
    pub text: &'a dyn Fn(u32) -> String,
    pub embedder: &'a dyn Embedder,
    pub query: &'a [f32],
}

/// Joins triple texts in an encoded sequence.
pub const SEQUENCE_SEPARATOR: &str = "; ";

impl SequenceScorer for EncodeScorer<'_> {
    fn score(&self, sequences: &[Vec<u32>]) -> Result<Vec<f32>> {
        let mut out = vec![0.0f32; sequences.len()];
        let mut texts = Vec::new();
        let mut at = Vec::new();
        for (i, seq) in sequences.iter().enumerate() {
            match seq[..] {
                [t] => out[i] = dot(self.query, self.graph.vector(t)),
                _ => {
                    texts.push(seq.iter().map(|&t| (self.text)(t)).collect::<Vec<_>>().join(SEQUENCE_SEPARATOR));
                    at.push(i);
                }
            }
        }
        if !texts.is_empty() {
            let vectors = self.embedder.embed(&texts, TextKind::Passage)?;
            for (i, v) in at.into_iter().zip(vectors) {
                out[i] = dot(self.query, &v);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;
    use crate::index::Matrix;

    /// Scores from a table; asking for a sequence not in it is an error, so a test fails
    /// if the search scores anything it should have skipped.
    struct Table(HashMap<Vec<u32>, f32>);

    impl SequenceScorer for Table {
        fn score(&self, sequences: &[Vec<u32>]) -> Result<Vec<f32>> {
            sequences
                .iter()
                .map(|s| self.0.get(s).copied().ok_or_else(|| Error::Other(format!("scored {s:?}"))))
                .collect()
        }
    }

    /// Entities A=0, B=1, C=2, E=3, F=4, G=5, H=6, X=7, Y=8.
    /// t0 (A,B) t1 (C,A) t2 (B,E) t3 (B,F) t4 (A,G) t5 (C,H) t6 (X,Y); one passage each.
    /// Neighbours: t0 → {t1, t2, t3, t4}; t1 → {t0, t4, t5}; t6 → {}.
    fn hand_graph(vectors: Vec<f32>) -> TripleGraph {
        let e = |a: u32, b: u32| [Some(a), Some(b)];
        let ends = vec![e(0, 1), e(2, 0), e(1, 3), e(1, 4), e(0, 5), e(2, 6), e(7, 8)];
        let dim = vectors.len() / 7;
        let vectors = Arc::new(Matrix::from_flat(dim, vectors));
        TripleGraph::new((0..7).collect(), ends, 9, 7, vectors, (0..7).collect(), vec![1.0; 7]).unwrap()
    }

    /// score(q, [t]) for the initial triples and score(q, T∘t) for every allowed
    /// extension; the extensions into the other initial beam ([0,1], [1,0]) are absent.
    fn hand_scores() -> Table {
        let rows: [(&[u32], f32); 8] = [
            (&[0], 0.9),
            (&[1], 0.5),
            (&[6], 0.1),
            (&[0, 2], 0.8),
            (&[0, 3], 0.7),
            (&[0, 4], 0.6),
            (&[1, 4], 0.45),
            (&[1, 5], 0.3),
        ];
        Table(rows.iter().map(|(s, x)| (s.to_vec(), *x)).collect())
    }

    fn run(p: BeamParams) -> Vec<(Vec<u32>, f32)> {
        let g = hand_graph(vec![1.0; 7]);
        let (beams, stats) = diverse_triple_beam_search(&g, &[1.0], &[0, 1, 6, 0], &hand_scores(), &p).unwrap();
        assert_eq!(stats.initial, 3, "the repeated initial triple is taken once");
        beams.into_iter().map(|b| (b.triples, b.score)).collect()
    }

    fn assert_beams(got: &[(Vec<u32>, f32)], expected: &[(&[u32], f32)]) {
        assert_eq!(got.len(), expected.len(), "{got:?}");
        for ((triples, score), (want, want_score)) in got.iter().zip(expected) {
            assert_eq!(triples.as_slice(), *want, "{got:?}");
            assert!((score - want_score).abs() < 1e-5, "{triples:?}: {score} vs {want_score}");
        }
    }

    #[test]
    fn diversity_lets_a_second_prefix_in() {
        // b = 2: B0 = [t0 0.9, t1 0.5]. Extensions s' = s + score: t0: 1.7, 1.6, 1.5;
        // t1: 0.95, 0.8. Plain beam search keeps t0's two best.
        let plain = BeamParams { beam_size: 2, length: 2, neighbours: 100, gamma: 1.0, diversity: false };
        assert_beams(&run(plain), &[(&[0, 2], 1.7), (&[0, 3], 1.6)]);
        // γ = 1: weights 1, e^-1, e^-1 (n capped at γ). t0: 1.7, 1.6/e = 0.5886,
        // 1.5/e = 0.5518; t1: 0.95, 0.8/e = 0.2943. t1's best now beats t0's second.
        let diverse = BeamParams { diversity: true, ..plain };
        assert_beams(&run(diverse), &[(&[0, 2], 1.7), (&[1, 4], 0.95)]);
    }

    #[test]
    fn diversity_weights_follow_the_rank_within_each_beam() {
        // b = 3, γ = 3: weights 1, e^(-1/3) = 0.71653, e^(-2/3) = 0.51342.
        // t0: 1.7, 1.6 × 0.71653 = 1.14645, 1.5 × 0.51342 = 0.77013; t1: 0.95, 0.57323.
        let diverse = BeamParams { beam_size: 3, length: 2, neighbours: 100, gamma: 3.0, diversity: true };
        assert_beams(&run(diverse), &[(&[0, 2], 1.7), (&[0, 3], 1.146_45), (&[1, 4], 0.95)]);
        let plain = BeamParams { diversity: false, ..diverse };
        assert_beams(&run(plain), &[(&[0, 2], 1.7), (&[0, 3], 1.6), (&[0, 4], 1.5)]);
        assert!((diversity_weight(0, &diverse) - 1.0).abs() < 1e-7);
        assert_eq!(diversity_weight(3, &diverse), diversity_weight(30, &diverse), "n is capped at γ");
    }

    #[test]
    fn length_one_returns_the_best_initial_triples() {
        let p = BeamParams { beam_size: 2, length: 1, neighbours: 100, gamma: 4.0, diversity: true };
        assert_beams(&run(p), &[(&[0], 0.9), (&[1], 0.5)]);
    }

    #[test]
    fn the_neighbour_cap_keeps_the_most_query_similar_before_skipping_visited() {
        // Query [1, 0]; similarity of t0 0.95, t1 1.0, t2 0.1, t3 0.5, t4 0.9, t5 0.3.
        let sims = [0.95, 1.0, 0.1, 0.5, 0.9, 0.3, 0.0];
        let vectors: Vec<f32> = sims.iter().flat_map(|&s: &f32| [s, (1.0 - s * s).sqrt()]).collect();
        let g = hand_graph(vectors);
        let p = BeamParams { beam_size: 5, length: 2, neighbours: 2, gamma: 10.0, diversity: false };
        // Only t0 starts: its 2 most similar neighbours are t1 and t4, both extensions.
        let mut table = hand_scores();
        table.0.insert(vec![0, 1], 0.2);
        let (beams, stats) = diverse_triple_beam_search(&g, &[1.0, 0.0], &[0], &table, &p).unwrap();
        assert_beams(&pairs(&beams), &[(&[0, 4], 1.5), (&[0, 1], 1.1)]);
        assert_eq!(stats.capped, 2, "t2 and t3");
        // t0 and t1 start: the cap still picks {t1, t4} for t0 and {t0, t4} for t1, and
        // the visited t1 and t0 are skipped after it, so each beam has one extension
        // (not the next most similar neighbour in their place).
        let (beams, stats) = diverse_triple_beam_search(&g, &[1.0, 0.0], &[0, 1], &hand_scores(), &p).unwrap();
        assert_beams(&pairs(&beams), &[(&[0, 4], 1.5), (&[1, 4], 0.95)]);
        assert_eq!((stats.capped, stats.skipped_visited), (3, 2));
    }

    fn pairs(beams: &[Beam]) -> Vec<(Vec<u32>, f32)> {
        beams.iter().map(|b| (b.triples.clone(), b.score)).collect()
    }

    #[test]
    fn a_step_with_no_extension_keeps_the_previous_beams() {
        let g = hand_graph(vec![1.0; 7]);
        let p = BeamParams { beam_size: 2, length: 3, neighbours: 100, gamma: 4.0, diversity: true };
        let (beams, stats) = diverse_triple_beam_search(&g, &[1.0], &[6], &hand_scores(), &p).unwrap();
        assert_eq!(beams, [Beam { score: 0.1, triples: vec![6] }]);
        assert!(stats.stopped_early);
        assert_eq!(stats.steps, 0);
    }

    #[test]
    fn flattening_is_breadth_first_and_passages_are_deduplicated() {
        let g = hand_graph(vec![1.0; 7]);
        let beams = [Beam { score: 2.0, triples: vec![0, 2] }, Beam { score: 1.0, triples: vec![1, 4] }];
        assert_eq!(flatten_breadth_first(&beams), [0, 1, 2, 4]);
        assert_eq!(triples_to_passages(&g, &[0, 1, 0, 4]), [0, 1, 4]);
    }

    #[test]
    fn pooled_scores_weight_cached_vectors_by_tokens() {
        // t0 = [1, 0] with 3 tokens, t1 = [0, 1] with 1 token; query [1, 0].
        let v = Arc::new(Matrix::from_flat(2, vec![1.0, 0.0, 0.0, 1.0]));
        let g = TripleGraph::new(vec![0, 0], vec![[Some(0), Some(1)]; 2], 2, 1, v, vec![0, 1], vec![3.0, 1.0]).unwrap();
        let s = PooledScorer { graph: &g, query: &[1.0, 0.0] };
        let got = s.score(&[vec![0], vec![1], vec![0, 1], vec![1, 0]]).unwrap();
        let want = 3.0 / 10f32.sqrt();
        assert!((got[0] - 1.0).abs() < 1e-6 && got[1].abs() < 1e-6);
        assert!((got[2] - want).abs() < 1e-6 && (got[3] - want).abs() < 1e-6, "{got:?}");
    }
}
