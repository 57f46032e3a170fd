//! How a graph's fact vectors are made ([`FactVectors`]), and which of them a build
//! takes from the graph it follows instead of making them again.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::{EntityGraph, GraphOptions, Name, Triple};
use crate::corpus::PassageIdx;
use crate::embed::{embed_passages, Embedder};
use crate::error::Result;
use crate::index::{EmbedWork, Matrix};
use crate::progress::Progress;
use std::sync::Arc;
use std::time::Instant;

/// How a fact's vector ("subject predicate object") is made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FactVectors {
    /// One forward pass of the embedder per distinct fact text. Facts are 83% of the
    /// tokens such a graph embeds and about three times the passages' tokens. The
    /// default before [`FactVectors::Contextual`], and what graphs that record no mode
    /// were built with.
    Embedded,
    /// Composed from the vectors of its parts' texts, each weighted by its number of
    /// tokens (the share of the fact text's mean pooling it would hold) and the sum
    /// normalised. The parts are the subject's and object's names, whose vectors the
    /// graph has anyway as entity labels, and the predicate's words, of which there are
    /// few: no forward pass per fact. A function of the fact's text alone, as an
    /// embedded one is, so edits give the same vectors in any order.
    Composed,
    /// Read in its passage: the span stating it pooled from the passage's own forward
    /// pass ([`super::contextual`]); facts without a span are embedded. The default: no
    /// forward pass per fact, and better R@5 than embedded facts for the graph methods
    /// on the shared sets (docs/performance.md, "The graph's fact vectors").
    #[default]
    Contextual,
}

impl FactVectors {
    pub(super) fn recorded_before() -> Self {
        FactVectors::Embedded
    }
}

/// For each fact (its first triple `first[f]` of `triples`), the fact of `previous` with
/// the same names, so the same text and vector, where `previous` made its fact vectors the
/// way `options` asks.
pub(super) fn known_facts(
    previous: Option<&EntityGraph>,
    same_passage: Option<&[Option<PassageIdx>]>,
    options: &GraphOptions,
    triples: &[Triple],
    first: &[u32],
) -> Vec<Option<u32>> {
    match previous {
        Some(p) if p.options.fact_vectors == options.fact_vectors => {
            let key = |t: &Triple| (t.subject.id(), t.predicate.id(), t.object.id());
            let stated = p.facts_by_names();
            let contextual = options.fact_vectors == FactVectors::Contextual;
            first
                .iter()
                .map(|&t| {
                    let t = &triples[t as usize];
                    let f = stated.get(&key(t)).copied()?;
                    // A contextual vector is a function of the text of the passage that
                    // states the fact first, too: the same passage, or read again.
                    if !contextual {
                        return Some(f);
                    }
                    let was = p.triples[p.fact_triple(f) as usize].passage;
                    let now = same_passage.and_then(|same| same.get(t.passage as usize).copied().flatten());
                    (now == Some(was)).then_some(f)
                })
                .collect()
        }
        _ => vec![None; first.len()],
    }
}

/// The vectors of texts `0..known.len()` (`text(i)`): row `known[i]` of `from` where
/// given (a stored vector of the same text), the others embedded; and that work.
pub(super) fn vectors_of(
    text: &dyn Fn(usize) -> String,
    known: &[Option<u32>],
    from: Option<&Arc<Matrix>>,
    embedder: &dyn Embedder,
    step: &str,
    progress: &dyn Progress,
) -> Result<(Matrix, EmbedWork)> {
    let started = Instant::now();
    let dim = embedder.dim();
    // Rows of another dimension (another embedder) are no use.
    let from = from.filter(|m| m.dim() == dim);
    let stored = |i: usize| from.zip(known[i]);
    let missing: Vec<String> = (0..known.len()).filter(|&i| stored(i).is_none()).map(text).collect();
    let embedded = embed_passages(embedder, &missing, 256, step, progress)?;
    let m = assembled(known, from, Matrix::from_flat(dim, embedded));
    let work =
        EmbedWork { texts: missing.len(), reused: known.len() - missing.len(), secs: started.elapsed().as_secs_f64() };
    Ok((m, work))
}

/// [`FactVectors::Composed`]: the vectors of facts `0..known.len()` (`parts(i)`: subject,
/// predicate, object), row `known[i]` of `from` where given, the others composed from
/// their parts' vectors. A part whose text is an entity's label takes that entity's
/// vector (a vector is a function of its text); the other parts (the predicates' words,
/// and names whose entity another surface form labels) are embedded, each distinct text
/// once. The work counts the part texts embedded.
pub(super) fn composed_vectors_of(
    parts: &dyn Fn(usize) -> [Name; 3],
    known: &[Option<u32>],
    from: Option<&Arc<Matrix>>,
    (labels, label_vectors): (&[String], &Matrix),
    embedder: &dyn Embedder,
    progress: &dyn Progress,
) -> Result<(Matrix, EmbedWork)> {
    let started = Instant::now();
    let dim = embedder.dim();
    let from = from.filter(|m| m.dim() == dim);
    let stored = |i: usize| from.zip(known[i]);
    let missing: Vec<usize> = (0..known.len()).filter(|&i| stored(i).is_none()).collect();
    // Each distinct part text once, in order of first use: the subject's and object's
    // names whole (interned: one id per text), the predicate word by word. The
    // heuristic extractor's predicate is the text between two entities, nearly unique
    // per fact (22,369 distinct among 34,306 triples on musique-train), so embedding
    // predicates whole would cost most of what embedding the facts does; their words
    // are few.
    let label_of: FxHashMap<&str, u32> = labels.iter().enumerate().map(|(e, l)| (l.as_str(), e as u32)).rev().collect();
    let mut part_of_name: FxHashMap<u32, u32> = FxHashMap::default();
    let mut part_of_word: FxHashMap<&'static str, u32> = FxHashMap::default();
    let mut texts: Vec<&'static str> = Vec::new();
    let mut parts_of: Vec<Vec<u32>> = Vec::with_capacity(missing.len());
    for &f in &missing {
        let [subject, predicate, object] = parts(f);
        let mut part = |text: &'static str| {
            let next = texts.len() as u32;
            *part_of_word.entry(text).or_insert_with(|| {
                texts.push(text);
                next
            })
        };
        let mut of = Vec::with_capacity(4);
        for name in [subject, object] {
            of.push(*part_of_name.entry(name.id()).or_insert_with(|| part(name.as_str())));
        }
        of.extend(predicate.as_str().split_whitespace().map(&mut part));
        parts_of.push(of);
    }
    let to_embed: Vec<String> = texts.iter().filter(|t| !label_of.contains_key(*t)).map(|t| t.to_string()).collect();
    let embedded = embed_passages(embedder, &to_embed, 256, "embedding fact parts", progress)?;
    let mut embedded = embedded.chunks_exact(dim);
    let mut part_vectors = Matrix::with_capacity(dim, texts.len());
    for t in &texts {
        match label_of.get(t) {
            Some(&e) => part_vectors.push(label_vectors.row(e)),
            None => part_vectors.push(embedded.next().expect("one vector per part text not a label")),
        }
    }
    let weights = part_weights(embedder, &texts);
    let mut composed = Matrix::with_capacity(dim, parts_of.len());
    for parts in &parts_of {
        let mut v = vec![0f32; dim];
        for &p in parts.iter() {
            let w = weights[p as usize];
            for (x, y) in v.iter_mut().zip(part_vectors.row(p)) {
                *x += w * y;
            }
        }
        crate::embed::l2_normalize(&mut v);
        composed.push(&v);
    }
    let m = assembled(known, from, composed);
    let work = EmbedWork {
        texts: to_embed.len(),
        reused: known.len() - missing.len() + texts.len() - to_embed.len(),
        secs: started.elapsed().as_secs_f64(),
    };
    Ok((m, work))
}

/// Rows `0..known.len()`: row `known[i]` of `from` where given (`from` of this
/// dimension), else the next row of `fresh`, which holds one per row not known, in order.
/// Layered on `from` ([`Matrix::reusing`]): an edit's graph shares the vectors it kept.
pub(super) fn assembled(known: &[Option<u32>], from: Option<&Arc<Matrix>>, fresh: Matrix) -> Matrix {
    match from {
        Some(from) if known.iter().any(Option::is_some) => Matrix::reusing(from, known, &fresh),
        _ => fresh,
    }
}

/// Each part text's weight in a composed fact: the tokens it adds to the fact text (its
/// own count without the two special tokens every embedded text has, which the fact
/// text has once), else its words where the embedder cannot count tokens; at least 1.
pub(super) fn part_weights(embedder: &dyn Embedder, texts: &[&str]) -> Vec<f32> {
    let owned: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
    match embedder.token_counts(&owned) {
        Some(counts) => counts.iter().map(|&n| n.saturating_sub(2).max(1) as f32).collect(),
        None => texts.iter().map(|t| t.split_whitespace().count().max(1) as f32).collect(),
    }
}
