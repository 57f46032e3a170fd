//! The LLM-free triple extractor behind the embedded default.
//!
//! Entities: the passage title plus the surface spans of [`surface_entities`] (capitalised
//! runs, numbers, dates). Triples: within each sentence, one triple per ordered pair of
//! entities, with the words between them as the predicate; a sentence that does not name
//! the title gets the title as implicit subject of its first entity (encyclopedic text
//! says "It was founded by X" about its title).
//!
//! Limits: predicates are raw text, not normalised relations; pronouns are not resolved
//! beyond the title rule; lowercase entities are missed; long sentences produce many
//! loosely related pairs (capped at eight words apart; two bare numbers are not paired).

use super::{Extraction, Name, Triple};
use crate::corpus::{Passage, PassageIdx};
use crate::text::{sentences, surface_entities, SpanKind};

/// Pairs further apart than this many words are not related by a triple: past a clause
/// or two the words between them rarely state a relation between the two.
const MAX_GAP_WORDS: usize = 8;

pub fn extract_heuristic(passages: &[Passage]) -> Extraction {
    let mut out = Extraction::new(passages.len());
    for (i, p) in passages.iter().enumerate() {
        let passage = i as PassageIdx;
        let title = p.title.trim();
        if !title.is_empty() {
            out.entities[i].push(Name::new(title));
        }
        for sentence in sentences(&p.text) {
            let spans = surface_entities(sentence);
            out.entities[i].extend(spans.iter().map(|s| Name::new(&s.text)));
            let names_title = spans.iter().any(|s| s.text.eq_ignore_ascii_case(title));
            if !title.is_empty() && !names_title {
                if let Some(first) = spans.first() {
                    let predicate = gap(sentence, 0, first.start);
                    if !predicate.is_empty() && predicate.split_whitespace().count() <= MAX_GAP_WORDS {
                        out.triples.push(triple(passage, title, &predicate, &first.text));
                    }
                }
            }
            for (a, left) in spans.iter().enumerate() {
                for right in &spans[a + 1..] {
                    let predicate = gap(sentence, left.end, right.start);
                    if predicate.split_whitespace().count() > MAX_GAP_WORDS {
                        break;
                    }
                    // Two bare numbers ("1,200 ... 1947") rarely relate to each other.
                    if left.kind == SpanKind::Number && right.kind == SpanKind::Number {
                        continue;
                    }
                    // Adjacent spans ("Paris, France") are related by their juxtaposition.
                    let predicate = if predicate.is_empty() { "with".to_string() } else { predicate };
                    out.triples.push(triple(passage, &left.text, &predicate, &right.text));
                }
            }
        }
        // The same statement twice in a passage adds nothing.
        let first = out.triples.partition_point(|t| t.passage < passage);
        let mut seen = std::collections::HashSet::new();
        let mut kept = out.triples.split_off(first);
        kept.retain(|t| seen.insert((t.subject, t.predicate, t.object)));
        out.triples.extend(kept);
    }
    out
}

fn gap(sentence: &str, from: usize, to: usize) -> String {
    sentence[from..to].trim_matches(|c: char| !c.is_alphanumeric()).split_whitespace().collect::<Vec<_>>().join(" ")
}

fn triple(passage: PassageIdx, s: &str, p: &str, o: &str) -> Triple {
    Triple { passage, subject: s.into(), predicate: p.into(), object: o.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_entities_within_sentences_and_uses_the_title() {
        let p = Passage {
            id: "x".into(),
            title: "Ardent Ironworks".into(),
            text: "Ardent Ironworks was founded in Dunhaven by Maud Corrigan. It was nationalised in 1947.".into(),
            ..Default::default()
        };
        let x = extract_heuristic(&[p]);
        let t: Vec<(String, String, String)> =
            x.triples.iter().map(|t| (t.subject.to_string(), t.predicate.to_string(), t.object.to_string())).collect();
        assert!(t.contains(&("Ardent Ironworks".into(), "was founded in".into(), "Dunhaven".into())));
        assert!(t.contains(&("Dunhaven".into(), "by".into(), "Maud Corrigan".into())));
        assert!(t.contains(&("Ardent Ironworks".into(), "It was nationalised in".into(), "1947".into())));
        assert!(x.entities[0].contains(&Name::new("Maud Corrigan")));
        assert!(x.triples.iter().all(|t| t.passage == 0));
    }
}
