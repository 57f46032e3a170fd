//! GEAR's triple index T (§3): every triple of the entity graph as a retrievable item
//! aligned to its one source passage, searchable by BM25, dense or hybrid, with the
//! head/tail adjacency that diverse triple beam search expands along.
//!
//! The dense side reuses the triple embeddings the graph build stored (MiniLM of
//! [`Triple::text`]); the BM25 side is built in memory when the index is first needed
//! (about a second for musique-train's 17k triples: cheaper than a second on-disk index
//! to keep in step with the graph).

use std::sync::Arc;

use rustc_hash::FxHashMap;
use std::time::Instant;

use super::EntityGraph;
use crate::corpus::PassageIdx;
use crate::embed::{Embedder, TextKind};
use crate::error::{Error, Result};
use crate::fusion::rrf;
use crate::index::{ExactIndex, Matrix, PartedBm25, SearchKind, VectorIndex};

/// Marks a triple side that normalises to no entity.
const NO_ENTITY: u32 = u32::MAX;

/// Triples as the nodes of a graph: what diverse triple beam search reads. Two triples
/// are neighbours when they share an entity, head or tail (after normalisation), in any
/// position: `(A, p, B)` neighbours `(B, q, C)`, `(C, r, A)` and `(A, s, D)`.
pub struct TripleGraph {
    passages: Vec<PassageIdx>,
    /// Head and tail entity of each triple ([`NO_ENTITY`] where a side names none).
    ends: Vec<[u32; 2]>,
    /// Entity → incident triples, as compressed rows: the neighbourhood of a triple is
    /// the union of its two entities' rows, a lookup rather than a stored list per
    /// triple (which grows with the square of a hub's degree).
    entity_offsets: Vec<usize>,
    entity_triples: Vec<u32>,
    /// Passage → its triples, as compressed rows (NaiveGE's initial triples).
    passage_offsets: Vec<usize>,
    passage_triples: Vec<u32>,
    /// The fact vectors, and the fact (row) of each triple.
    vectors: Arc<Matrix>,
    facts: Vec<u32>,
    /// Weight of each triple's vector in a pooled sequence embedding: its token count.
    weights: Vec<f32>,
}

impl TripleGraph {
    /// `passages[t]`, `ends[t]` (entity ids below `entities`, `None` for a side without
    /// one), `vectors.row(facts[t])` and `weights[t]` describe triple `t`; `n_passages`
    /// bounds the passage ids.
    pub fn new(
        passages: Vec<PassageIdx>,
        ends: Vec<[Option<u32>; 2]>,
        entities: usize,
        n_passages: usize,
        vectors: Arc<Matrix>,
        facts: Vec<u32>,
        weights: Vec<f32>,
    ) -> Result<TripleGraph> {
        let n = passages.len();
        if ends.len() != n || facts.len() != n || weights.len() != n {
            return Err(Error::Other(format!(
                "triple graph: {n} passages, {} entity pairs, {} facts and {} weights; one each per triple",
                ends.len(),
                facts.len(),
                weights.len()
            )));
        }
        if let Some(f) = facts.iter().find(|&&f| f as usize >= vectors.rows()) {
            return Err(Error::Other(format!("triple graph: fact {f} out of range ({} vectors)", vectors.rows())));
        }
        if let Some(e) = ends.iter().flatten().flatten().find(|&&e| e as usize >= entities) {
            return Err(Error::Other(format!("triple graph: entity {e} out of range ({entities} entities)")));
        }
        if let Some(p) = passages.iter().find(|&&p| p as usize >= n_passages) {
            return Err(Error::Other(format!("triple graph: passage {p} out of range ({n_passages} passages)")));
        }
        let ends: Vec<[u32; 2]> = ends.iter().map(|e| e.map(|x| x.unwrap_or(NO_ENTITY))).collect();
        // A triple whose head and tail are one entity is listed once in that row.
        let (entity_offsets, entity_triples) = rows(
            entities,
            ends.iter().enumerate().flat_map(|(t, &[h, o])| {
                let tail = (o != h).then_some(o);
                [Some(h), tail].into_iter().flatten().filter(|&e| e != NO_ENTITY).map(move |e| (e, t as u32))
            }),
        );
        let (passage_offsets, passage_triples) =
            rows(n_passages, passages.iter().enumerate().map(|(t, &p)| (p, t as u32)));
        Ok(TripleGraph {
            passages,
            ends,
            entity_offsets,
            entity_triples,
            passage_offsets,
            passage_triples,
            vectors,
            facts,
            weights,
        })
    }

    /// The triples of an entity graph, linked through its normalised entities, with
    /// each triple weighted by `token_counts` (the embedder's, where it can count) or
    /// else by its word count plus the two special tokens, WordPiece's usual floor.
    pub fn from_entity_graph(graph: &EntityGraph, token_counts: Option<Vec<usize>>) -> Result<TripleGraph> {
        // Each name looked up once (names are interned, and repeat across triples): where
        // the graph was read back rather than built, by normalising it.
        let mut entity_of: rustc_hash::FxHashMap<u32, Option<u32>> = Default::default();
        let mut id = |n: super::Name| *entity_of.entry(n.id()).or_insert_with(|| graph.entity_of_name(n));
        let ends = graph.triples.iter().map(|t| [id(t.subject), id(t.object)]).collect();
        let weights = match token_counts {
            Some(c) if c.len() == graph.triples.len() => c.into_iter().map(|n| n.max(1) as f32).collect(),
            _ => graph.triples.iter().map(|t| (t.text().split_whitespace().count() + 2) as f32).collect(),
        };
        TripleGraph::new(
            graph.triples.iter().map(|t| t.passage).collect(),
            ends,
            graph.entities.len(),
            graph.passage_entities.len(),
            graph.fact_vectors.clone(),
            graph.triple_facts.clone(),
            weights,
        )
    }

    pub fn len(&self) -> usize {
        self.passages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.passages.is_empty()
    }

    /// The passage triple `t` was extracted from.
    pub fn passage(&self, t: u32) -> PassageIdx {
        self.passages[t as usize]
    }

    /// The cached (unit) embedding of triple `t`'s text.
    pub fn vector(&self, t: u32) -> &[f32] {
        self.vectors.row(self.facts[t as usize])
    }

    /// The fact vectors: a row per distinct triple text, not per triple.
    pub fn vectors(&self) -> &Arc<Matrix> {
        &self.vectors
    }

    pub fn weight(&self, t: u32) -> f32 {
        self.weights[t as usize]
    }

    /// The triples extracted from passage `p`, in extraction order.
    pub fn passage_triples(&self, p: PassageIdx) -> &[u32] {
        let p = p as usize;
        if p + 1 >= self.passage_offsets.len() {
            return &[];
        }
        &self.passage_triples[self.passage_offsets[p]..self.passage_offsets[p + 1]]
    }

    fn entity_row(&self, e: u32) -> &[u32] {
        if e == NO_ENTITY {
            return &[];
        }
        let e = e as usize;
        &self.entity_triples[self.entity_offsets[e]..self.entity_offsets[e + 1]]
    }

    /// Puts into `out` (cleared first) the triples sharing a head or tail entity with
    /// `t`, each once, in id order, `t` itself left out.
    pub fn neighbours(&self, t: u32, out: &mut Vec<u32>) {
        out.clear();
        let [h, o] = self.ends[t as usize];
        out.extend(self.entity_row(h).iter().copied().filter(|&x| x != t));
        if o != h {
            out.extend(self.entity_row(o).iter().copied().filter(|&x| x != t));
            // Both rows are sorted: merge-sort and drop triples that share both ends.
            out.sort_unstable();
            out.dedup();
        }
    }
}

/// Compressed rows of `(row, item)` pairs: items of each row in the order given.
fn rows(n: usize, pairs: impl Iterator<Item = (u32, u32)> + Clone) -> (Vec<usize>, Vec<u32>) {
    let mut offsets = vec![0usize; n + 1];
    for (r, _) in pairs.clone() {
        offsets[r as usize + 1] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut fill = offsets.clone();
    let mut items = vec![0u32; offsets[n]];
    for (r, x) in pairs {
        items[fill[r as usize]] = x;
        fill[r as usize] += 1;
    }
    (offsets, items)
}

/// A triple's interned names: equal names spell an equal text.
type FactKey = (u32, u32, u32);

fn key_of(t: &super::Triple) -> FactKey {
    (t.subject.id(), t.predicate.id(), t.object.id())
}

/// The embedder's token count of each text, those `previous` (the index of any graph
/// before: facts are matched by their names) holds taken from it (its weights are those
/// counts), the others counted now; `None` if the embedder cannot count.
fn token_counts_after(
    graph: &EntityGraph,
    texts: &[String],
    embedder: &dyn Embedder,
    previous: &TripleIndex,
) -> Option<Vec<usize>> {
    let known = |t: &super::Triple| {
        let f = *previous.fact_keys.get(&key_of(t))? as usize;
        let first = previous.fact_triples[previous.fact_offsets[f]];
        Some(previous.graph.weights[first as usize] as usize)
    };
    let count: Vec<Option<usize>> = graph.triples.iter().map(known).collect();
    let missing: Vec<String> = texts.iter().zip(&count).filter(|(_, c)| c.is_none()).map(|(t, _)| t.clone()).collect();
    let mut counted = embedder.token_counts(&missing)?.into_iter();
    count.into_iter().map(|c| c.or_else(|| counted.next())).collect()
}

/// The triple index of an entity graph: the [`TripleGraph`] plus BM25 and dense search
/// over the triple texts.
pub struct TripleIndex {
    pub graph: TripleGraph,
    texts: Vec<String>,
    /// Exact search over the fact vectors; fact → its triples, as compressed rows.
    dense: ExactIndex,
    fact_offsets: Vec<usize>,
    fact_triples: Vec<u32>,
    /// The fact of each triple text, by its names: what the index of a later graph
    /// takes from this one (token counts, BM25 documents) without this graph.
    fact_keys: FxHashMap<FactKey, u32>,
    lexical: PartedBm25,
    /// Whether the weights are the embedder's token counts (not the word-count fallback).
    counted: bool,
    /// Where the build time went, for benches.
    pub build: TripleIndexBuild,
}

/// Milliseconds spent on each part of a [`TripleIndex`] build.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct TripleIndexBuild {
    pub token_counts_ms: f64,
    pub adjacency_ms: f64,
    pub bm25_ms: f64,
}

impl TripleIndexBuild {
    pub fn total_ms(&self) -> f64 {
        self.token_counts_ms + self.adjacency_ms + self.bm25_ms
    }
}

impl TripleIndex {
    pub fn build(graph: &EntityGraph, embedder: &dyn Embedder) -> Result<TripleIndex> {
        Self::build_after(graph, embedder, None)
    }

    /// [`TripleIndex::build`], taking the token count of every text `previous` (the
    /// index of the graph before an edit, and that graph) holds from it instead of
    /// tokenizing it again: a count is a function of the text, so the index is the same.
    pub fn build_after(
        graph: &EntityGraph,
        embedder: &dyn Embedder,
        previous: Option<&TripleIndex>,
    ) -> Result<TripleIndex> {
        let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
        let mut build = TripleIndexBuild::default();
        let texts: Vec<String> = graph.triples.iter().map(|t| t.text()).collect();
        let t = Instant::now();
        let fact_keys = graph.facts_by_names().into_owned();
        let counts = match previous.filter(|p| p.counted) {
            Some(p) => token_counts_after(graph, &texts, embedder, p),
            None => embedder.token_counts(&texts),
        };
        build.token_counts_ms = ms(t);
        let t = Instant::now();
        let counted = counts.as_ref().is_some_and(|c| c.len() == texts.len());
        let triples = TripleGraph::from_entity_graph(graph, counts)?;
        build.adjacency_ms = ms(t);
        let t = Instant::now();
        let (fact_offsets, fact_triples) =
            rows(graph.fact_count(), graph.triple_facts.iter().enumerate().map(|(t, &f)| (f, t as u32)));
        let lexical = match previous {
            Some(p) => PartedBm25::after(&p.lexical, &texts, &documents_after(graph, p))?,
            None => PartedBm25::new(&texts)?,
        };
        build.bm25_ms = ms(t);
        Ok(TripleIndex {
            dense: ExactIndex::new(graph.fact_vectors.clone()),
            fact_offsets,
            fact_triples,
            fact_keys,
            graph: triples,
            texts,
            lexical,
            counted,
            build,
        })
    }

    /// The text triple `t` is searched and embedded by, "subject predicate object".
    pub fn text(&self, t: u32) -> &str {
        &self.texts[t as usize]
    }

    /// The `k` triples best matching a text, best first: by BM25, by the cosine of
    /// `embedding` (the text's, computed by the caller) or by the RRF of both lists read
    /// `depth` deep.
    pub fn search(
        &self,
        kind: SearchKind,
        text: &str,
        embedding: &[f32],
        k: usize,
        rrf_k: f32,
        depth: usize,
    ) -> Result<Vec<(u32, f32)>> {
        Ok(match kind {
            SearchKind::Bm25 => self.lexical.search(text, k)?,
            SearchKind::Dense => self.dense_search(embedding, k)?,
            SearchKind::Hybrid => {
                let depth = depth.max(k);
                let lexical = self.lexical.search(text, depth)?;
                let dense = self.dense_search(embedding, depth)?;
                let mut fused = rrf(&[&lexical, &dense], rrf_k);
                fused.truncate(k);
                fused
            }
        })
    }

    /// The `k` triples nearest `embedding`: the nearest facts, each as its triples in id
    /// order (a fact has at least one, so `k` facts are enough).
    fn dense_search(&self, embedding: &[f32], k: usize) -> Result<Vec<(u32, f32)>> {
        let mut out = Vec::with_capacity(k);
        for (f, s) in self.dense.search(embedding, k)? {
            let f = f as usize;
            let triples = &self.fact_triples[self.fact_offsets[f]..self.fact_offsets[f + 1]];
            out.extend(triples.iter().take(k - out.len()).map(|&t| (t, s)));
            if out.len() == k {
                break;
            }
        }
        Ok(out)
    }

    /// Embeddings of texts to search the triples with, for the kinds that need one
    /// (none are computed for BM25).
    pub fn embed_queries(&self, kind: SearchKind, texts: &[String], embedder: &dyn Embedder) -> Result<Vec<Vec<f32>>> {
        match kind {
            SearchKind::Bm25 => Ok(vec![Vec::new(); texts.len()]),
            _ if texts.is_empty() => Ok(Vec::new()),
            _ => embedder.embed(texts, TextKind::Query),
        }
    }
}

/// For each triple of `graph`, a triple of the index `previous` with the same text, each
/// used once: the triples of the fact of the same names there, in order.
fn documents_after(graph: &EntityGraph, previous: &TripleIndex) -> Vec<Option<u32>> {
    let mut taken: Vec<u32> = vec![0; previous.fact_offsets.len().saturating_sub(1)];
    graph
        .triples
        .iter()
        .map(|t| {
            let o = *previous.fact_keys.get(&key_of(t))? as usize;
            let (start, end) = (*previous.fact_offsets.get(o)?, *previous.fact_offsets.get(o + 1)?);
            let next = start + taken[o] as usize;
            (next < end).then(|| {
                taken[o] += 1;
                previous.fact_triples[next]
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(ends: &[[Option<u32>; 2]], passages: &[PassageIdx]) -> TripleGraph {
        let n = ends.len();
        let vectors = Arc::new(Matrix::from_flat(1, vec![1.0; n]));
        TripleGraph::new(passages.to_vec(), ends.to_vec(), 5, 3, vectors, (0..n as u32).collect(), vec![1.0; n])
            .unwrap()
    }

    #[test]
    fn neighbours_share_a_head_or_tail_in_any_position() {
        // 0: A-B, 1: B-C, 2: C-A, 3: A-B again, 4: D-D, 5: no head, E tail, 6: A-D
        let (a, b, c, d, e) = (Some(0), Some(1), Some(2), Some(3), Some(4));
        let g = graph(&[[a, b], [b, c], [c, a], [a, b], [d, d], [None, e], [a, d]], &[0, 0, 1, 1, 2, 2, 2]);
        let mut out = Vec::new();
        g.neighbours(0, &mut out);
        assert_eq!(out, [1, 2, 3, 6], "via A and via B, the shared-both triple 3 once");
        g.neighbours(4, &mut out);
        assert_eq!(out, [6], "a self-loop triple through its one entity");
        g.neighbours(5, &mut out);
        assert!(out.is_empty(), "nothing else mentions E, and no head links nothing");
        assert_eq!(g.passage_triples(1), [2, 3]);
        assert_eq!(g.passage_triples(2), [4, 5, 6]);
        assert_eq!(g.passage(6), 2);
    }

    #[test]
    fn inconsistent_parts_are_refused() {
        let v = Arc::new(Matrix::from_flat(1, vec![1.0; 2]));
        let two = vec![[Some(0), Some(1)]; 2];
        assert!(TripleGraph::new(vec![0], two.clone(), 2, 1, v.clone(), vec![0, 1], vec![1.0; 2]).is_err());
        let err = TripleGraph::new(vec![0, 0], two.clone(), 2, 1, v.clone(), vec![0, 2], vec![1.0; 2]).err().unwrap();
        assert!(err.to_string().contains("fact 2 out of range"), "{err}");
        let err = TripleGraph::new(vec![0, 0], two, 1, 1, v, vec![0, 1], vec![1.0; 2]).err().unwrap().to_string();
        assert!(err.contains("entity 1 out of range"), "{err}");
    }
}
