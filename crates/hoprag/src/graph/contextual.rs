//! [`FactVectors::Contextual`](super::FactVectors::Contextual): a fact's vector read in
//! its passage. The span of the passage that states it (from its subject to its object)
//! is pooled from the token states of the passage's own forward pass through the
//! graph's embedder ([`Embedder::embed_spans`]), so no forward pass is spent on the fact
//! alone, and the statement is read with what the passage says around it (who "he" is,
//! which film, which year).
//!
//! A fact stated in many passages takes the span of its first triple (triples are in
//! passage order, and passages in canonical order), so its vector is a function of that
//! passage's text and the fact: the same in a fresh build and after any edit. Facts
//! with no span (the passage's title as implicit subject of a sentence that does not
//! name it; a subject and object further apart than the statement), or a span past the
//! model's token limit, or an embedder that cannot pool spans (a remote model), are
//! embedded from their text as [`FactVectors::Embedded`](super::FactVectors::Embedded)
//! does.

use std::ops::Range;
use std::time::Instant;

use std::sync::Mutex;

use rustc_hash::FxHashMap;
use sha2::Digest;

use super::Triple;
use crate::corpus::{Passage, PassageIdx};
use crate::embed::{embed_passages, Embedder, ReadText, TextKind};
use crate::error::Result;
use crate::index::{EmbedWork, Matrix};
use crate::progress::Progress;

/// Passages per [`Embedder::embed_spans`] call: the unit of progress.
const BATCH: usize = 256;

/// The byte span of `text` (a passage's indexed text) stating triple `t`: the nearest
/// occurrence of its subject before an occurrence of its object, if it is at most twice
/// as long as the triple's own text (plus a little for punctuation).
pub fn fact_span(text: &str, t: &Triple) -> Option<Range<usize>> {
    let (subject, object) = (t.subject.as_str(), t.object.as_str());
    if subject.is_empty() || object.is_empty() {
        return None;
    }
    let mut best: Option<Range<usize>> = None;
    for (at, _) in text.match_indices(object) {
        if let Some(from) = text[..at].rfind(subject) {
            let span = from..at + object.len();
            if best.as_ref().is_none_or(|b| span.len() < b.len()) {
                best = Some(span);
            }
        }
    }
    let limit = 2 * (subject.len() + t.predicate.as_str().len() + object.len() + 2) + 16;
    best.filter(|span| span.len() <= limit)
}

/// The vectors of facts `0..known.len()`, fact `f` first stated by triple
/// `first[f]` of `triples`: row `known[f]` of `from` where given (the same statement in
/// the same passage text), the others pooled from their passages' passes, or embedded
/// from their text where they have no span; and that work (texts: the facts made).
pub(super) fn vectors_of(
    first: &[u32],
    triples: &[Triple],
    passages: &[Passage],
    known: &[Option<u32>],
    from: Option<&std::sync::Arc<Matrix>>,
    embedder: &dyn Embedder,
    progress: &dyn Progress,
) -> Result<(Matrix, EmbedWork)> {
    let started = Instant::now();
    let dim = embedder.dim();
    let from = from.filter(|m| m.dim() == dim);
    let stored = |f: usize| from.zip(known[f]);
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; known.len()];
    // The facts to pool, by the passage that states them first. Texts and spans are made
    // a batch at a time: an embedder that cannot read spans (a remote model, the scale
    // benchmark's composed vectors) then costs one batch's, not a million passages' texts.
    let mut asked: Vec<(PassageIdx, usize)> =
        (0..known.len()).filter(|&f| stored(f).is_none()).map(|f| (triples[first[f] as usize].passage, f)).collect();
    asked.sort_unstable();
    let by_passage: Vec<&[(PassageIdx, usize)]> = asked.chunk_by(|a, b| a.0 == b.0).collect();
    let mut read = 0;
    if !by_passage.is_empty() {
        progress.start("reading facts in their passages", by_passage.len() as u64);
        for batch in by_passage.chunks(BATCH) {
            // Each passage's facts with a span, and those spans; passages with none are
            // not read.
            let mut texts = Vec::with_capacity(batch.len());
            let mut facts: Vec<Vec<usize>> = Vec::with_capacity(batch.len());
            let mut spans: Vec<Vec<Range<usize>>> = Vec::with_capacity(batch.len());
            for group in batch {
                let text = passages[group[0].0 as usize].index_text();
                let (f, s): (Vec<usize>, Vec<Range<usize>>) = group
                    .iter()
                    .filter_map(|&(_, f)| Some((f, fact_span(&text, &triples[first[f] as usize])?)))
                    .unzip();
                if !s.is_empty() {
                    texts.push(text);
                    facts.push(f);
                    spans.push(s);
                }
            }
            let Some(pooled) = embedder.embed_spans(&texts, &spans) else { break };
            for (facts, read) in facts.iter().zip(pooled?) {
                for (&f, v) in facts.iter().zip(read.spans) {
                    vectors[f] = v;
                }
            }
            read += texts.len();
            progress.advance(batch.len() as u64);
        }
        progress.finish();
    }
    let alone: Vec<usize> = (0..known.len()).filter(|&f| stored(f).is_none() && vectors[f].is_none()).collect();
    let alone_texts: Vec<String> = alone.iter().map(|&f| triples[first[f] as usize].text()).collect();
    let embedded = embed_passages(embedder, &alone_texts, 256, "embedding facts", progress)?;
    for (&f, v) in alone.iter().zip(embedded.chunks_exact(dim)) {
        vectors[f] = Some(v.to_vec());
    }
    let mut fresh = Matrix::with_capacity(dim, vectors.iter().flatten().count());
    for (f, v) in vectors.iter().enumerate() {
        match (stored(f), v) {
            (Some(_), _) => {}
            (None, Some(v)) => fresh.push(v),
            (None, None) => unreachable!("every fact not stored is pooled or embedded"),
        }
    }
    let m = super::fact_vectors::assembled(known, from, fresh);
    let reused = (0..known.len()).filter(|&f| stored(f).is_some()).count();
    log::debug!(
        "contextual facts: {} read in {read} passages, {} embedded alone, {reused} reused",
        known.len() - reused - alone.len(),
        alone.len()
    );
    let work = EmbedWork { texts: known.len() - reused, reused, secs: started.elapsed().as_secs_f64() };
    Ok((m, work))
}

/// The graph embedder of an index build that reads each passage once for the passage
/// vectors and the contextual fact vectors alike: when the index's passages are
/// embedded ([`Embedder::embed`]), it reads the spans of `passages`' triples with them
/// ([`Embedder::embed_spans`]) and keeps their vectors, which the graph's build then
/// asks for. Spans it was not given, or past its `budget` of kept vectors, are read
/// again when asked for; what it answers is what `inner` answers, to the bit.
pub struct ReadOnce<'a> {
    inner: &'a dyn Embedder,
    /// The spans to read with each passage text (its hash).
    asked: FxHashMap<u128, Vec<Range<usize>>>,
    kept: Mutex<Kept>,
    budget: usize,
}

/// The vectors read with the passages: each text's own, and its spans'.
#[derive(Default)]
struct Kept {
    texts: FxHashMap<u128, Vec<f32>>,
    spans: FxHashMap<(u128, usize, usize), Vec<f32>>,
}

impl Kept {
    fn len(&self) -> usize {
        self.texts.len() + self.spans.len()
    }
}

impl<'a> ReadOnce<'a> {
    /// `budget_bytes` bounds the vectors kept between the passages' pass and the
    /// graph's (a million passages' facts would not fit).
    pub fn new(inner: &'a dyn Embedder, passages: &[Passage], triples: &[Triple], budget_bytes: usize) -> Self {
        let mut texts: Vec<Option<(u128, String)>> = vec![None; passages.len()];
        let mut asked: FxHashMap<u128, Vec<Range<usize>>> = FxHashMap::default();
        for t in triples {
            let (hash, text) = texts[t.passage as usize].get_or_insert_with(|| {
                let text = passages[t.passage as usize].index_text();
                (text_hash(&text), text)
            });
            if let Some(span) = fact_span(text, t) {
                asked.entry(*hash).or_default().push(span);
            }
        }
        let budget = budget_bytes / (4 * inner.dim().max(1));
        ReadOnce { inner, asked, kept: Mutex::new(Kept::default()), budget }
    }
}

/// A passage text's key: 128 bits of its SHA-256, so that two texts never share one.
fn text_hash(text: &str) -> u128 {
    let digest = sha2::Sha256::digest(text.as_bytes());
    u128::from_le_bytes(digest[..16].try_into().expect("16 bytes"))
}

impl Embedder for ReadOnce<'_> {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn token_counts(&self, texts: &[String]) -> Option<Vec<usize>> {
        self.inner.token_counts(texts)
    }

    fn embed(&self, texts: &[String], kind: TextKind) -> Result<Vec<Vec<f32>>> {
        let room = self.budget.saturating_sub(self.kept.lock().expect("no panics under the lock").len());
        if kind != TextKind::Passage || room == 0 {
            return self.inner.embed(texts, kind);
        }
        let hashes: Vec<u128> = texts.iter().map(|t| text_hash(t)).collect();
        let spans: Vec<Vec<Range<usize>>> =
            hashes.iter().map(|h| self.asked.get(h).cloned().unwrap_or_default()).collect();
        let Some(read) = self.inner.embed_spans(texts, &spans) else { return self.inner.embed(texts, kind) };
        let read = read?;
        // Kept without the lock held while reading: the encoder's threads did the work.
        let mut kept = self.kept.lock().expect("no panics under the lock");
        let mut vectors = Vec::with_capacity(read.len());
        for ((hash, spans), read) in hashes.iter().zip(&spans).zip(read) {
            if !spans.is_empty() && kept.len() + spans.len() < self.budget {
                kept.texts.insert(*hash, read.vector.clone());
                for (span, v) in spans.iter().zip(read.spans) {
                    if let Some(v) = v {
                        kept.spans.insert((*hash, span.start, span.end), v);
                    }
                }
            }
            vectors.push(read.vector);
        }
        Ok(vectors)
    }

    fn embed_spans(&self, texts: &[String], spans: &[Vec<Range<usize>>]) -> Option<Result<Vec<ReadText>>> {
        let hashes: Vec<u128> = texts.iter().map(|t| text_hash(t)).collect();
        // Held when every text was read with the passages and every span asked is one of
        // its triples' (a kept text has all of those: one without a vector was past the
        // token limit). Otherwise read again, the lock released first.
        let held = {
            let kept = self.kept.lock().expect("no panics under the lock");
            let asked = |h: &u128, s: &Range<usize>| self.asked.get(h).is_some_and(|a| a.contains(s));
            hashes
                .iter()
                .zip(spans)
                .all(|(h, spans)| kept.texts.contains_key(h) && spans.iter().all(|s| asked(h, s)))
                .then(|| {
                    hashes
                        .iter()
                        .zip(spans)
                        .map(|(h, spans)| ReadText {
                            vector: kept.texts[h].clone(),
                            spans: spans.iter().map(|s| kept.spans.get(&(*h, s.start, s.end)).cloned()).collect(),
                        })
                        .collect()
                })
        };
        match held {
            Some(read) => Some(Ok(read)),
            None => self.inner.embed_spans(texts, spans),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triple(s: &str, p: &str, o: &str) -> Triple {
        Triple { passage: 0, subject: s.into(), predicate: p.into(), object: o.into() }
    }

    #[test]
    fn a_span_runs_from_the_nearest_subject_to_its_object() {
        let text = "Alpha Film\nAlpha Film is a 1999 film. It was directed by Bo Lee, not by Alpha Film's star.";
        let span = fact_span(text, &triple("Alpha Film", "is a", "1999")).unwrap();
        assert_eq!(&text[span], "Alpha Film is a 1999");
        // The title as implicit subject, far from its object: no span.
        let far = "Alpha Film\nShot over many long months in the mountains of the north, it was directed by Bo Lee.";
        assert_eq!(fact_span(far, &triple("Alpha Film", "was directed by", "Bo Lee")), None);
        assert_eq!(fact_span(text, &triple("Bo Lee", "with", "Nobody")), None);
        assert_eq!(fact_span(text, &triple("", "with", "Bo Lee")), None);
    }
}
