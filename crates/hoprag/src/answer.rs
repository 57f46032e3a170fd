//! Short answers from retrieved passages: the QA step the multi-hop papers score with
//! exact match and F1 (GEAR Table 3 answers from the top 5 passages). The prompt asks
//! for a short, definitive answer, as theirs does; its wording and the demonstration
//! (invented passages) are hoprag's own.
//!
//! The model's reply is untrusted text: the answer is its first non-empty line, with an
//! "Answer:" label, quotes and a final full stop removed, and cut to [`MAX_ANSWER_CHARS`].

use serde::{Deserialize, Serialize};

use crate::corpus::Passage;
use crate::error::Result;
use crate::llm::{ChatRequest, Llm};

/// Longer replies are cut here (an answer is a few words; a rambling model's reply
/// would otherwise dilute F1 without bound).
pub const MAX_ANSWER_CHARS: usize = 200;

/// Cap on a reply's tokens: room for a reasoning model's preamble, not for an essay.
pub const MAX_TOKENS: u32 = 256;

const INSTRUCTIONS: &str = "\
You answer questions from the passages you are given. Read them carefully, work out the \
answer (it may need facts from several passages), and reply with the answer alone: a name, \
date, number or short phrase of at most six words, with no explanation.";

const DEMO_USER: &str = "\
Passages:
[1] Harrowgate Lighthouse
Harrowgate Lighthouse is a granite tower on Velloria Island, designed by the engineer \
Tomas Brekke and first lit in 1872.
[2] Tomas Brekke
Tomas Brekke (1831–1904) was a civil engineer born in Skarvik.

Question: Where was the designer of Harrowgate Lighthouse born?";

const DEMO_ANSWER: &str = "Skarvik";

/// The request for an answer to `question` from `passages`, best first.
pub fn answer_request(question: &str, passages: &[&Passage], max_tokens: u32) -> ChatRequest {
    let mut user = String::from("Passages:\n");
    for (i, p) in passages.iter().enumerate() {
        user.push_str(&format!("[{}] {}\n{}\n", i + 1, p.title, p.text));
    }
    user.push_str(&format!("\nQuestion: {question}"));
    ChatRequest { max_tokens: Some(max_tokens), ..ChatRequest::one_shot(INSTRUCTIONS, DEMO_USER, DEMO_ANSWER, user) }
}

/// A generated answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub text: String,
    /// The model's reply as it came.
    pub raw: String,
}

/// Asks `llm` for a short answer to `question` from `passages`.
pub fn answer(llm: &dyn Llm, question: &str, passages: &[&Passage], max_tokens: u32) -> Result<Answer> {
    let reply = llm.chat(&answer_request(question, passages, max_tokens))?;
    Ok(Answer { text: clean_answer(&reply.text), raw: reply.text })
}

/// The answer in a reply: the first non-empty line after any reasoning preamble, label,
/// quotes and trailing full stop removed.
pub fn clean_answer(reply: &str) -> String {
    let body = reply.rsplit("</think>").next().unwrap_or(reply);
    let line = body.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let unlabelled = ["answer:", "a:"]
        .iter()
        .find_map(|label| {
            line.get(..label.len()).filter(|h| h.eq_ignore_ascii_case(label)).map(|_| &line[label.len()..])
        })
        .unwrap_or(line);
    let quote = |c: char| matches!(c, '"' | '\'' | '*' | '`');
    let trimmed = unlabelled.trim().trim_start_matches(quote).trim_end_matches(|c| quote(c) || c == '.').trim();
    trimmed.chars().take(MAX_ANSWER_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_cleaned_of_labels_quotes_and_prose_after_them() {
        assert_eq!(clean_answer("Skarvik"), "Skarvik");
        assert_eq!(clean_answer("\n  Answer: \"Kestrel Bay\".\nBecause the passage says so."), "Kestrel Bay");
        assert_eq!(clean_answer("<think>hmm, the mill</think>\nA: 1791"), "1791");
        assert_eq!(clean_answer("**Oona Farrell**"), "Oona Farrell");
        assert_eq!(clean_answer(""), "");
        assert_eq!(clean_answer(&"x".repeat(500)).len(), MAX_ANSWER_CHARS);
    }
}
