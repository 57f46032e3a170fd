//! Small text utilities shared by loaders, splitters and (later) entity extraction.

mod entities;

pub use entities::{surface_entities, EntitySpan, SpanKind};

use unicode_segmentation::UnicodeSegmentation;

/// Splits text into sentences on Unicode sentence boundaries (UAX #29), trimmed, empty
/// pieces dropped.
pub fn sentences(text: &str) -> Vec<&str> {
    text.split_sentence_bounds().map(str::trim).filter(|s| !s.is_empty()).collect()
}

/// Number of whitespace-separated words.
pub fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Collapses runs of whitespace to one space and trims; used to compare texts that
/// differ only in layout.
pub fn normalize_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Joins sentence fragments as HotpotQA stores them: fragments usually carry their own
/// leading space, and a space is inserted only where neither side has one.
pub fn join_sentences<S: AsRef<str>>(parts: &[S]) -> String {
    let mut out = String::new();
    for part in parts {
        let part = part.as_ref();
        let needs_space =
            !out.is_empty() && !out.ends_with(char::is_whitespace) && !part.starts_with(char::is_whitespace);
        if needs_space {
            out.push(' ');
        }
        out.push_str(part);
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_sentences() {
        let s = sentences("The river rises in Varn. It flows east! Does it end? Yes.");
        assert_eq!(s, vec!["The river rises in Varn.", "It flows east!", "Does it end?", "Yes."]);
    }

    #[test]
    fn joins_hotpot_fragments() {
        assert_eq!(join_sentences(&["A b.", " C d.", "E f."]), "A b. C d. E f.");
    }

    #[test]
    fn normalizes_whitespace() {
        assert_eq!(normalize_whitespace("  a \n b\tc "), "a b c");
    }
}
