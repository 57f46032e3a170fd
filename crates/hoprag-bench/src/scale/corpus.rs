//! The scale benchmark's corpus: any number of passages recombined from the sentences
//! of a real corpus (2WikiMultiHopQA's), deterministic from a seed.
//!
//! Passage j (id `scale-j`) takes the title of a source passage A drawn at random and
//! 2 to 5 sentences: A's first sentence (which names the title's entity, as in an
//! encyclopedia), then sentences each drawn with even odds from A's other sentences or
//! from another random source passage, in random order. No sentence repeats within a
//! passage. A composition whose title and text equal an earlier passage's is drawn again
//! (the index keeps one copy of identical passages), and the redraws are counted.

use std::collections::HashSet;

use hoprag::corpus::{IngestReport, LoadedCorpus, Passage};
use hoprag::text::sentences;

use crate::Rng;

/// Sentences in a passage, at least and at most.
const MIN_SENTENCES: usize = 2;
const MAX_SENTENCES: usize = 5;
/// Redraws of a composition that duplicates an earlier one before it is dropped.
const MAX_REDRAWS: usize = 100;

/// The source passages, split into sentences.
pub struct Sources {
    titles: Vec<String>,
    sentences: Vec<Vec<String>>,
    /// Source passages with no sentence (not used).
    pub empty: usize,
}

impl Sources {
    pub fn new(passages: &[Passage]) -> Self {
        let (mut titles, mut split, mut empty) = (Vec::new(), Vec::new(), 0);
        for p in passages {
            let s: Vec<String> = sentences(&p.text).into_iter().map(str::to_string).collect();
            if s.is_empty() {
                empty += 1;
                continue;
            }
            titles.push(p.title.clone());
            split.push(s);
        }
        Sources { titles, sentences: split, empty }
    }

    pub fn len(&self) -> usize {
        self.titles.len()
    }

    pub fn sentence_count(&self) -> usize {
        self.sentences.iter().map(Vec::len).sum()
    }

    /// One composition: the title and the sentences, as (source, sentence) positions.
    fn compose(&self, rng: &mut Rng) -> (usize, Vec<(usize, usize)>) {
        let a = rng.below(self.len()) as usize;
        let want = MIN_SENTENCES + rng.below(MAX_SENTENCES - MIN_SENTENCES + 1) as usize;
        let mut picked = vec![(a, 0)];
        // A few tries per slot; a passage with fewer sentences than wanted is fine.
        for _ in 0..want * 4 {
            if picked.len() == want {
                break;
            }
            let from_a = self.sentences[a].len() > 1 && rng.below(2) == 0;
            let p = if from_a { a } else { rng.below(self.len()) as usize };
            let s = rng.below(self.sentences[p].len()) as usize;
            if !picked.contains(&(p, s)) {
                picked.push((p, s));
            }
        }
        // Fisher–Yates over all but the first sentence.
        for i in (2..picked.len()).rev() {
            let j = 1 + rng.below(i) as usize;
            picked.swap(i, j);
        }
        (a, picked)
    }

    fn text(&self, picked: &[(usize, usize)]) -> String {
        let parts: Vec<&str> = picked.iter().map(|&(p, s)| self.sentences[p][s].as_str()).collect();
        parts.join(" ")
    }
}

/// What the generator made.
pub struct Generated {
    pub corpus: LoadedCorpus,
    /// Compositions drawn again because they equalled an earlier passage.
    pub redrawn: usize,
    /// Passages given up after [`MAX_REDRAWS`] duplicates (so fewer than asked).
    pub dropped: usize,
}

/// `n` distinct passages from `sources`, the same for the same seed.
pub fn generate(sources: &Sources, n: usize, seed: u64) -> Generated {
    assert!(sources.len() > 0, "no source sentences");
    // xorshift must not start at 0.
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut seen: HashSet<String> = HashSet::with_capacity(n);
    let mut passages = Vec::with_capacity(n);
    let (mut redrawn, mut dropped) = (0, 0);
    for j in 0..n {
        let mut tries = 0;
        loop {
            let (a, picked) = sources.compose(&mut rng);
            let title = &sources.titles[a];
            let text = sources.text(&picked);
            // The index's notion of identical: same title and text.
            if seen.insert(Passage::content_id(title, &text)) {
                let passage = Passage::new(format!("scale-{j}"), title.clone(), text);
                passages.push(Passage { meta: Some(super::filtered::meta(j)), ..passage });
                break;
            }
            tries += 1;
            if tries > MAX_REDRAWS {
                dropped += 1;
                break;
            }
            redrawn += 1;
        }
    }
    let report = IngestReport { entries: n, ..Default::default() };
    Generated { corpus: LoadedCorpus { passages, report }, redrawn, dropped }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Sources {
        let p = |t: &str, text: &str| Passage::new(t, t, text);
        Sources::new(&[
            p("Varn", "Varn is a river. It rises in the hills. It flows east. It ends in a lake."),
            p("Ostrel", "Ostrel is a town on the Varn. It has a bridge."),
            p("Maud Corrigan", "Maud Corrigan was an engineer. She built the Ostrel bridge in 1911."),
            p("Empty", "   "),
        ])
    }

    #[test]
    fn the_same_seed_gives_the_same_corpus() {
        let s = source();
        let a = generate(&s, 40, 7).corpus.passages;
        assert_eq!(a, generate(&s, 40, 7).corpus.passages);
        assert_ne!(a, generate(&s, 40, 8).corpus.passages);
        assert_eq!(s.empty, 1);
    }

    #[test]
    fn passages_are_distinct_and_made_of_source_sentences() {
        let s = source();
        let g = generate(&s, 60, 1);
        assert_eq!(g.corpus.passages.len() + g.dropped, 60);
        assert_eq!(g.dropped, 0, "60 of the many compositions of 9 sentences");
        let known: HashSet<&str> = s.sentences.iter().flatten().map(String::as_str).collect();
        let mut contents = HashSet::new();
        for (j, p) in g.corpus.passages.iter().enumerate() {
            assert_eq!(p.id, format!("scale-{j}"));
            assert!(contents.insert((p.title.clone(), p.text.clone())), "duplicate {p:?}");
            let parts = sentences(&p.text);
            assert!((1..=MAX_SENTENCES).contains(&parts.len()), "{p:?}");
            assert!(parts.iter().all(|x| known.contains(x)), "{p:?}");
            // The first sentence is the title passage's first.
            let a = s.titles.iter().position(|t| *t == p.title).unwrap();
            assert_eq!(parts[0], s.sentences[a][0]);
            let unique: HashSet<&&str> = parts.iter().collect();
            assert_eq!(unique.len(), parts.len(), "a sentence repeats in {p:?}");
        }
        // Sentences from other passages do appear.
        assert!(g.corpus.passages.iter().any(|p| sentences(&p.text)
            .iter()
            .any(|x| !s.sentences[s.titles.iter().position(|t| *t == p.title).unwrap()].iter().any(|y| y == x))));
    }

    #[test]
    fn a_source_too_small_for_distinct_passages_drops_and_counts() {
        let p = Passage::new("x", "X", "One sentence only.");
        let s = Sources::new(&[p]);
        // Only one composition exists: "One sentence only." under title X.
        let g = generate(&s, 3, 1);
        assert_eq!(g.corpus.passages.len(), 1);
        assert_eq!(g.dropped, 2);
        assert_eq!(g.redrawn, 2 * MAX_REDRAWS);
    }
}
