//! Surface-text entity spotting, with no model: runs of capitalised words (with inner
//! connectors such as "of" or "de"), numbers, and dates. Shared by the heuristic triple
//! extractor, query entity linking and the RegimeRouter features.
//!
//! Limits, by design: it finds names by capitalisation only, so lowercase entities
//! ("insulin"), pronouns and descriptions ("the actor") are missed; a capitalised
//! sentence-initial word that is not a known function word ("Paris is ...") counts as a
//! name, and adjacent names without a connector ("Paris France") merge into one span.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    /// A capitalised name, possibly with numbers inside ("Apollo 11", "July 1970").
    Name,
    /// A number, year or quantity standing alone.
    Number,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntitySpan {
    pub text: String,
    /// Byte offsets in the input.
    pub start: usize,
    pub end: usize,
    pub kind: SpanKind,
    /// The span starts at the first word of the text (where capitalisation says little).
    pub sentence_initial: bool,
}

/// Lowercase words allowed inside a name when a capitalised word follows
/// ("Journal of Mathematical Physics", "Leonardo da Vinci").
const CONNECTORS: &[&str] =
    &["of", "the", "de", "da", "di", "del", "von", "van", "der", "la", "le", "du", "y", "for", "on"];

/// Capitalised words that open sentences and questions without naming anything.
const FUNCTION_WORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "in",
    "on",
    "at",
    "for",
    "to",
    "from",
    "by",
    "of",
    "with",
    "after",
    "before",
    "during",
    "when",
    "while",
    "however",
    "although",
    "as",
    "it",
    "its",
    "he",
    "she",
    "his",
    "her",
    "they",
    "their",
    "this",
    "that",
    "these",
    "those",
    "there",
    "here",
    "who",
    "whom",
    "whose",
    "what",
    "which",
    "where",
    "how",
    "why",
    "is",
    "was",
    "are",
    "were",
    "did",
    "does",
    "do",
    "has",
    "have",
    "had",
    "can",
    "could",
    "will",
    "would",
    "in",
    "since",
    "also",
    "both",
    "but",
    "and",
    "or",
    "if",
    "then",
    "than",
    "one",
    "some",
    "many",
    "most",
    "all",
    "each",
    "other",
    "between",
    "among",
    "through",
    "until",
    "upon",
    "despite",
    "following",
    "according",
    "unlike",
    "like",
    "not",
];

struct Word<'a> {
    text: &'a str,
    start: usize,
    end: usize,
}

/// Words with their byte offsets, surrounding punctuation stripped (inner punctuation
/// such as in "O'Neil", "U.S." or "1,200" kept), a trailing possessive removed.
fn words(text: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut pos = 0;
    for raw in text.split_inclusive(char::is_whitespace) {
        let raw_start = pos;
        pos += raw.len();
        let trimmed = raw.trim_end();
        let lead = trimmed.len() - trimmed.trim_start_matches(|c: char| !c.is_alphanumeric()).len();
        let mut w = trimmed.trim_matches(|c: char| !c.is_alphanumeric());
        for suffix in ["'s", "’s"] {
            if let Some(stripped) = w.strip_suffix(suffix) {
                w = stripped;
            }
        }
        if !w.is_empty() {
            let start = raw_start + lead;
            out.push(Word { text: w, start, end: start + w.len() });
        }
    }
    out
}

fn is_capitalised(w: &str) -> bool {
    w.chars().next().is_some_and(char::is_uppercase)
}

fn is_number(w: &str) -> bool {
    w.chars().next().is_some_and(|c| c.is_ascii_digit())
}

fn is_function_word(w: &str) -> bool {
    FUNCTION_WORDS.contains(&w.to_lowercase().as_str())
}

/// Finds entity spans in one sentence (or a question), left to right.
pub fn surface_entities(text: &str) -> Vec<EntitySpan> {
    let words = words(text);
    let mut spans = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        let starts_name = is_capitalised(w.text) && !(is_function_word(w.text) && (i == 0 || w.text.len() <= 3));
        if starts_name {
            // Extend over capitalised words, numbers, and connectors followed by a name.
            let mut j = i + 1;
            while j < words.len() {
                let next = words[j].text;
                let connector_then_name = CONNECTORS.contains(&next)
                    && words.get(j + 1).is_some_and(|n| is_capitalised(n.text) && !is_function_word(n.text));
                if (is_capitalised(next) && !is_function_word(next)) || is_number(next) || connector_then_name {
                    j += if connector_then_name { 2 } else { 1 };
                } else {
                    break;
                }
            }
            // Punctuation between two words ends the name: "Paris, France" is two spans.
            let mut end = j;
            for k in i..j - 1 {
                if text[words[k].end..words[k + 1].start].contains([',', ';', ':', '(', ')', '"', '“', '”']) {
                    end = k + 1;
                    break;
                }
            }
            push(&mut spans, text, &words[i..end], SpanKind::Name, i == 0);
            i = end;
        } else if is_number(w.text) {
            // A day-month-year date reads as one span: "30 July 1970".
            let mut j = i + 1;
            while j < words.len() && (is_number(words[j].text) || is_month(words[j].text)) && j - i < 3 {
                j += 1;
            }
            let kind = if j - i > 1 { SpanKind::Name } else { SpanKind::Number };
            push(&mut spans, text, &words[i..j], kind, i == 0);
            i = j;
        } else {
            i += 1;
        }
    }
    spans
}

fn is_month(w: &str) -> bool {
    const MONTHS: &[&str] = &[
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    MONTHS.contains(&w)
}

fn push(spans: &mut Vec<EntitySpan>, text: &str, run: &[Word], kind: SpanKind, sentence_initial: bool) {
    let (Some(first), Some(last)) = (run.first(), run.last()) else { return };
    spans.push(EntitySpan {
        text: text[first.start..last.end].to_string(),
        start: first.start,
        end: last.end,
        kind,
        sentence_initial,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<String> {
        surface_entities(s).into_iter().map(|e| e.text).collect()
    }

    #[test]
    fn names_with_connectors_numbers_and_dates() {
        assert_eq!(
            texts("The Journal of Mathematical Physics was first published in January 1960 by the American Institute of Physics."),
            vec!["Journal of Mathematical Physics", "January 1960", "American Institute of Physics"]
        );
        assert_eq!(
            texts("Christopher Nolan was born on 30 July 1970 in London."),
            vec!["Christopher Nolan", "30 July 1970", "London"]
        );
        assert_eq!(texts("It employed 3,000 workers."), vec!["3,000"]);
    }

    #[test]
    fn questions_and_sentence_starts() {
        assert_eq!(texts("Who is the spouse of the actor who played the Terminator?"), vec!["Terminator"]);
        assert_eq!(
            texts("Are Christopher Nolan and Sathish Kalathil both film directors?"),
            vec!["Christopher Nolan", "Sathish Kalathil"]
        );
        let spans = surface_entities("Paris is the capital of France.");
        assert!(spans[0].sentence_initial && spans[0].text == "Paris");
        assert!(!spans[1].sentence_initial);
    }

    #[test]
    fn commas_split_runs_and_possessives_are_dropped() {
        assert_eq!(texts("He moved to Paris, France in 1901."), vec!["Paris", "France", "1901"]);
        assert_eq!(texts("Tessany's capital is Quillfort."), vec!["Tessany", "Quillfort"]);
    }

    #[test]
    fn offsets_point_into_the_text() {
        let s = "Visit \"Varn Island\" now.";
        let spans = surface_entities(s);
        assert_eq!(spans.iter().map(|e| &s[e.start..e.end]).collect::<Vec<_>>(), vec!["Visit", "Varn Island"]);
        assert!(spans[0].sentence_initial);
    }
}
