//! Matching gold references to index passages.
//!
//! Titles repeat (MuSiQue has several passages per article), so a gold passage given
//! with its text is matched on title and text together, both with whitespace
//! normalised. Where that finds nothing, two fallbacks remain, each reported by question
//! id and counted: the text alone when exactly one passage has it (a retitled passage),
//! and the title alone when exactly one passage has it (a re-worded passage). Anything
//! else is unmatched: it stays in the recall denominator and counts as missed. A title
//! that names several passages is never resolved by guessing.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{EvalQuestion, GoldRef, Question};
use crate::corpus::{Passage, PassageIdx};
use crate::text::normalize_whitespace;

/// A gold passage that could not be matched, or matched only by a fallback.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GoldIssue {
    pub question_id: String,
    pub gold: String,
    pub problem: String,
}

/// How the gold passages of a dataset were matched, in counts of gold references.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoldMatchCounts {
    /// Gold references the dataset names.
    pub gold: usize,
    pub by_id: usize,
    /// Title and text both match (the rule).
    pub by_title_and_text: usize,
    /// Fallback: the text matches one passage whose title differs.
    pub by_text_only: usize,
    /// Fallback: the text matches nothing but the title names exactly one passage.
    pub by_title_only: usize,
    /// Matched by a title alone because the dataset gives no text.
    pub by_title_without_text: usize,
    /// Not matched: counted as missed.
    pub unmatched: usize,
    /// Matched a passage another gold reference of the same question had matched.
    pub duplicate: usize,
    /// Questions whose dataset gives hop order, and of those whose last hop is in the
    /// index (the others count LastHop as missed).
    pub hop_ordered_questions: usize,
    pub last_hop_matched: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResolvedDataset {
    pub questions: Vec<EvalQuestion>,
    /// Gold passages not found in the index: they stay in each question's recall
    /// denominator and count as missed.
    pub unmatched: Vec<GoldIssue>,
    /// Gold matched by a fallback (text alone, title alone, no text given) or twice.
    pub fallback: Vec<GoldIssue>,
    pub counts: GoldMatchCounts,
}

/// Matches each question's gold to passages; see the module documentation.
pub fn resolve_gold<'a>(questions: &[Question], passages: impl IntoIterator<Item = &'a Passage>) -> ResolvedDataset {
    let mut by_id = HashMap::new();
    let mut by_title: HashMap<String, Vec<PassageIdx>> = HashMap::new();
    let mut by_text: HashMap<String, Vec<PassageIdx>> = HashMap::new();
    for (i, p) in passages.into_iter().enumerate() {
        let i = i as PassageIdx;
        by_id.insert(p.id.as_str(), i);
        by_title.entry(normalize_whitespace(&p.title)).or_default().push(i);
        by_text.entry(normalize_whitespace(&p.text)).or_default().push(i);
    }
    let mut out = ResolvedDataset::default();
    for q in questions {
        let mut gold = Vec::new();
        let mut last_hop = None;
        for (n, g) in q.gold.iter().enumerate() {
            let issue = |problem: &str| GoldIssue {
                question_id: q.id.clone(),
                gold: g.describe(),
                problem: problem.to_string(),
            };
            out.counts.gold += 1;
            let c = &mut out.counts;
            let found = match g {
                GoldRef::Id(id) => by_id.get(id.as_str()).copied().inspect(|_| c.by_id += 1),
                GoldRef::Title { title, text } => {
                    let title = normalize_whitespace(title);
                    let same_title = by_title.get(&title).map(Vec::as_slice).unwrap_or(&[]);
                    match text {
                        Some(text) => {
                            let same_text = by_text.get(&normalize_whitespace(text)).map(Vec::as_slice).unwrap_or(&[]);
                            if let Some(i) = same_text.iter().copied().find(|i| same_title.contains(i)) {
                                c.by_title_and_text += 1;
                                Some(i)
                            } else if let [only] = same_text {
                                c.by_text_only += 1;
                                out.fallback
                                    .push(issue("matched by text alone: the passage with this text has another title"));
                                Some(*only)
                            } else if let [only] = same_title {
                                c.by_title_only += 1;
                                out.fallback.push(issue(
                                    "matched by title alone: no passage has this text, one has this title",
                                ));
                                Some(*only)
                            } else {
                                None
                            }
                        }
                        None => match same_title {
                            [only] => {
                                c.by_title_without_text += 1;
                                Some(*only)
                            }
                            [] => None,
                            several => {
                                out.unmatched.push(issue(&format!(
                                    "title names {} passages and the dataset gives no text to choose one",
                                    several.len()
                                )));
                                c.unmatched += 1;
                                continue;
                            }
                        },
                    }
                }
            };
            let c = &mut out.counts;
            match found {
                Some(i) if !gold.contains(&i) => {
                    gold.push(i);
                    if n + 1 == q.gold.len() {
                        last_hop = Some(i);
                    }
                }
                Some(_) => {
                    c.duplicate += 1;
                    out.fallback.push(issue("matches the same passage as another gold entry"));
                }
                None => {
                    c.unmatched += 1;
                    out.unmatched.push(issue("no passage in the index matches"));
                }
            }
        }
        // Without hop order there is no last hop; with it, a last hop the index does not
        // hold stays defined and is never found.
        let last_hop = if q.hop_ordered { last_hop } else { None };
        if q.hop_ordered {
            out.counts.hop_ordered_questions += 1;
            out.counts.last_hop_matched += usize::from(last_hop.is_some());
        }
        out.questions.push(EvalQuestion {
            id: q.id.clone(),
            text: q.text.clone(),
            gold,
            gold_total: q.gold.len(),
            hop_ordered: q.hop_ordered,
            last_hop,
            qtype: q.qtype.clone(),
            answers: q.answers.clone(),
        });
    }
    out
}

impl ResolvedDataset {
    /// The questions `keep` selects, with the dataset's matching report.
    pub fn subset(&self, keep: impl Fn(&EvalQuestion) -> bool) -> ResolvedDataset {
        ResolvedDataset {
            questions: self.questions.iter().filter(|q| keep(q)).cloned().collect(),
            unmatched: self.unmatched.clone(),
            fallback: self.fallback.clone(),
            counts: self.counts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, title: &str, text: &str) -> Passage {
        Passage::new(id, title, text)
    }

    fn question(gold: Vec<GoldRef>, hop_ordered: bool) -> Question {
        Question { id: "q".into(), text: "?".into(), gold, hop_ordered, qtype: None, answers: vec![] }
    }

    fn titled(title: &str, text: Option<&str>) -> GoldRef {
        GoldRef::Title { title: title.into(), text: text.map(str::to_string) }
    }

    #[test]
    fn matches_repeated_titles_by_text_and_reports_misses() {
        let passages = vec![p("0", "T", "first text"), p("1", "T", "second  text"), p("2", "U", "u")];
        let q = question(vec![titled("T", Some("second text")), titled("U", None), titled("Missing", None)], true);
        let r = resolve_gold(&[q], &passages);
        assert_eq!(r.questions[0].gold, vec![1, 2]);
        assert_eq!(r.questions[0].gold_total, 3);
        // The last hop is defined (hop order is given) but not in the index: never found.
        assert!(r.questions[0].hop_ordered);
        assert_eq!(r.questions[0].last_hop, None);
        assert_eq!(r.unmatched.len(), 1);
        assert_eq!(r.unmatched[0].question_id, "q");
        assert_eq!(
            (r.counts.by_title_and_text, r.counts.by_title_without_text, r.counts.unmatched, r.counts.last_hop_matched),
            (1, 1, 1, 0)
        );
    }

    #[test]
    fn a_repeated_title_is_never_resolved_by_guessing() {
        let passages = vec![p("0", "T", "a"), p("1", "T", "b")];
        let r = resolve_gold(&[question(vec![titled("T", None)], true)], &passages);
        assert!(r.questions[0].gold.is_empty());
        assert_eq!(r.unmatched.len(), 1);
        assert!(r.unmatched[0].problem.contains("2 passages"), "{:?}", r.unmatched);
        // With text that matches neither, still unmatched (the old code took the first).
        let r = resolve_gold(&[question(vec![titled("T", Some("c"))], true)], &passages);
        assert!(r.questions[0].gold.is_empty());
        assert_eq!(r.counts.unmatched, 1);
    }

    #[test]
    fn fallbacks_are_counted_and_reported() {
        let passages = vec![p("0", "T", "a"), p("1", "Renamed", "b"), p("2", "V", "v")];
        let q = question(vec![titled("T", Some("a changed")), titled("Old", Some("b")), titled("V", Some("v"))], false);
        let r = resolve_gold(&[q], &passages);
        assert_eq!(r.questions[0].gold, vec![0, 1, 2]);
        assert_eq!((r.counts.by_title_only, r.counts.by_text_only, r.counts.by_title_and_text), (1, 1, 1));
        assert_eq!(r.fallback.len(), 2);
        assert!(r.fallback.iter().all(|f| f.question_id == "q"));
        // No hop order: no last hop.
        assert!(!r.questions[0].hop_ordered);
        assert_eq!(r.questions[0].last_hop, None);
        assert_eq!(r.counts.hop_ordered_questions, 0);
    }
}
