//! Splitting long documents into passages on sentence boundaries.

use serde::{Deserialize, Serialize};

use crate::text::{sentences, word_count};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SplitOptions {
    /// Target passage size in words (MiniLM reads 256 word pieces, about 180 words).
    pub max_words: usize,
    /// Words of context repeated from the end of one passage at the start of the next,
    /// rounded to whole sentences.
    pub overlap_words: usize,
}

impl Default for SplitOptions {
    fn default() -> Self {
        SplitOptions { max_words: 150, overlap_words: 30 }
    }
}

/// Packs whole sentences into passages of at most `max_words` words (a single longer
/// sentence becomes a passage of its own), each starting with up to `overlap_words`
/// words of the previous passage's last sentences.
pub fn split_document(text: &str, options: &SplitOptions) -> Vec<String> {
    let sents = sentences(text);
    let lens: Vec<usize> = sents.iter().map(|s| word_count(s)).collect();
    let mut out = Vec::new();
    let mut start = 0;
    while start < sents.len() {
        let mut end = start;
        let mut words = 0;
        while end < sents.len() && (end == start || words + lens[end] <= options.max_words) {
            words += lens[end];
            end += 1;
        }
        out.push(sents[start..end].join(" "));
        if end == sents.len() {
            break;
        }
        // Step back over whole sentences for the overlap, but always make progress.
        let mut next = end;
        let mut overlap = 0;
        while next > start + 1 && overlap + lens[next - 1] <= options.overlap_words {
            overlap += lens[next - 1];
            next -= 1;
        }
        start = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_sentences_with_overlap() {
        let text = "One two three. Four five six. Seven eight nine. Ten eleven twelve.";
        let opts = SplitOptions { max_words: 6, overlap_words: 3 };
        assert_eq!(
            split_document(text, &opts),
            vec![
                "One two three. Four five six.",
                "Four five six. Seven eight nine.",
                "Seven eight nine. Ten eleven twelve."
            ]
        );
    }

    #[test]
    fn long_sentence_is_its_own_passage_and_no_overlap_terminates() {
        let text = "A b c d e f g h. I j.";
        let opts = SplitOptions { max_words: 3, overlap_words: 0 };
        assert_eq!(split_document(text, &opts), vec!["A b c d e f g h.", "I j."]);
    }

    #[test]
    fn empty_text_gives_nothing() {
        assert!(split_document("  \n ", &SplitOptions::default()).is_empty());
    }
}
