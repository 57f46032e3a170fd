//! Matching gold references to index passages.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{EvalQuestion, GoldRef, Question};
use crate::corpus::{Passage, PassageIdx};
use crate::text::normalize_whitespace;

/// A gold passage that could not be matched (or matched only loosely).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GoldIssue {
    pub question_id: String,
    pub gold: String,
    pub problem: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResolvedDataset {
    pub questions: Vec<EvalQuestion>,
    /// Gold passages not found in the index: they stay in each question's recall
    /// denominator and count as missed.
    pub unmatched: Vec<GoldIssue>,
    /// Gold matched by title where the title names several passages and no text was
    /// given to choose: the first passage with that title is used.
    pub ambiguous: Vec<GoldIssue>,
}

/// Matches each question's gold to passages: ids exactly; titles with text by (title,
/// text), then by text with whitespace normalised, then by title if unique; titles
/// alone by title.
pub fn resolve_gold(questions: &[Question], passages: &[Passage]) -> ResolvedDataset {
    let mut by_id = HashMap::new();
    let mut by_title: HashMap<&str, Vec<PassageIdx>> = HashMap::new();
    let mut by_text: HashMap<String, Vec<PassageIdx>> = HashMap::new();
    for (i, p) in passages.iter().enumerate() {
        let i = i as PassageIdx;
        by_id.insert(p.id.as_str(), i);
        by_title.entry(p.title.as_str()).or_default().push(i);
        by_text.entry(normalize_whitespace(&p.text)).or_default().push(i);
    }
    let mut out = ResolvedDataset::default();
    for q in questions {
        let mut gold = Vec::new();
        let mut last_matched = false;
        for (n, g) in q.gold.iter().enumerate() {
            let issue = |problem: &str| GoldIssue {
                question_id: q.id.clone(),
                gold: g.describe(),
                problem: problem.to_string(),
            };
            let found = match g {
                GoldRef::Id(id) => by_id.get(id.as_str()).copied(),
                GoldRef::Title { title, text } => {
                    let same_title = by_title.get(title.as_str()).map(Vec::as_slice).unwrap_or(&[]);
                    let by_body = text.as_ref().map(|t| {
                        let t = normalize_whitespace(t);
                        let candidates = by_text.get(&t).map(Vec::as_slice).unwrap_or(&[]);
                        (candidates.iter().copied().find(|i| same_title.contains(i)), candidates.first().copied())
                    });
                    match (by_body, same_title) {
                        (Some((Some(i), _)), _) => Some(i),
                        (Some((None, Some(i))), _) => Some(i),
                        (_, [only]) => Some(*only),
                        (_, [first, ..]) => {
                            out.ambiguous.push(issue(&format!(
                                "title names {} passages; text does not pick one, using the first",
                                same_title.len()
                            )));
                            Some(*first)
                        }
                        (_, []) => None,
                    }
                }
            };
            match found {
                Some(i) if !gold.contains(&i) => {
                    gold.push(i);
                    last_matched = n + 1 == q.gold.len();
                }
                Some(_) => out.ambiguous.push(issue("matches the same passage as another gold entry")),
                None => out.unmatched.push(issue("no passage in the index matches")),
            }
        }
        let last_hop = if q.hop_ordered && last_matched { gold.last().copied() } else { None };
        out.questions.push(EvalQuestion {
            id: q.id.clone(),
            text: q.text.clone(),
            gold,
            gold_total: q.gold.len(),
            last_hop,
            qtype: q.qtype.clone(),
            answers: q.answers.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, title: &str, text: &str) -> Passage {
        Passage { id: id.into(), title: title.into(), text: text.into() }
    }

    #[test]
    fn matches_repeated_titles_by_text_and_reports_misses() {
        let passages = vec![p("0", "T", "first text"), p("1", "T", "second  text"), p("2", "U", "u")];
        let q = Question {
            id: "q".into(),
            text: "?".into(),
            gold: vec![
                GoldRef::Title { title: "T".into(), text: Some("second text".into()) },
                GoldRef::Title { title: "U".into(), text: None },
                GoldRef::Title { title: "Missing".into(), text: None },
            ],
            hop_ordered: true,
            qtype: None,
            answers: vec![],
        };
        let r = resolve_gold(&[q], &passages);
        assert_eq!(r.questions[0].gold, vec![1, 2]);
        assert_eq!(r.questions[0].gold_total, 3);
        // The last hop was not matched, so it is unknown rather than wrong.
        assert_eq!(r.questions[0].last_hop, None);
        assert_eq!(r.unmatched.len(), 1);
        assert_eq!(r.unmatched[0].question_id, "q");
    }

    #[test]
    fn ambiguous_title_without_text_is_reported() {
        let passages = vec![p("0", "T", "a"), p("1", "T", "b")];
        let q = Question {
            id: "q".into(),
            text: "?".into(),
            gold: vec![GoldRef::Title { title: "T".into(), text: None }],
            hop_ordered: true,
            qtype: None,
            answers: vec![],
        };
        let r = resolve_gold(&[q], &passages);
        assert_eq!(r.questions[0].gold, vec![0]);
        assert_eq!(r.questions[0].last_hop, Some(0));
        assert_eq!(r.ambiguous.len(), 1);
    }
}
