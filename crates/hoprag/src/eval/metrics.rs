//! Per-query metrics at a cutoff k, as the papers in `shared/papers` define them.

use serde::{Deserialize, Serialize};

use crate::corpus::PassageIdx;
use crate::dataset::EvalQuestion;

/// Metrics of one ranked list for one question at one cutoff.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RankMetrics {
    /// |gold ∩ top-k| / |gold| (unmatched gold counts in |gold|).
    pub recall: f64,
    /// Every gold passage is in the top-k.
    pub full: bool,
    /// At least one gold passage is in the top-k.
    pub any: bool,
    /// The last hop's gold passage is in the top-k; `None` where the dataset gives no
    /// hop order. A last hop the index does not hold is never found.
    pub last_hop: Option<bool>,
}

pub fn rank_metrics(q: &EvalQuestion, ranked: &[PassageIdx], k: usize) -> RankMetrics {
    let top = &ranked[..k.min(ranked.len())];
    let found = q.gold.iter().filter(|g| top.contains(g)).count();
    let total = q.gold_total.max(1);
    RankMetrics {
        recall: found as f64 / total as f64,
        full: found == q.gold_total && q.gold_total > 0,
        any: found > 0,
        last_hop: q.hop_ordered.then(|| q.last_hop.is_some_and(|l| top.contains(&l))),
    }
}

/// Metrics of one question at every cutoff of an evaluation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryMetrics {
    pub at: Vec<(usize, RankMetrics)>,
}

impl QueryMetrics {
    pub fn compute(q: &EvalQuestion, ranked: &[PassageIdx], ks: &[usize]) -> Self {
        QueryMetrics { at: ks.iter().map(|&k| (k, rank_metrics(q, ranked, k))).collect() }
    }

    pub fn get(&self, k: usize) -> Option<&RankMetrics> {
        self.at.iter().find(|(kk, _)| *kk == k).map(|(_, m)| m)
    }
}

/// An answer in the form the QA metrics compare (SQuAD's, which HotpotQA, MuSiQue and
/// the GEAR and HippoRAG papers use): lower case, punctuation removed, the articles
/// "a", "an", "the" removed, whitespace collapsed.
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower.chars().filter(|c| !c.is_ascii_punctuation()).collect();
    no_punct.split_whitespace().filter(|w| !matches!(*w, "a" | "an" | "the")).collect::<Vec<_>>().join(" ")
}

/// Exact match: the normalised prediction equals some normalised reference.
pub fn exact_match(prediction: &str, references: &[String]) -> bool {
    let p = normalize_answer(prediction);
    references.iter().any(|r| normalize_answer(r) == p)
}

/// Token F1 against the best-matching reference (0 without references), with HotpotQA's
/// rule for yes/no answers: where either side normalises to `yes`, `no` or `noanswer`,
/// anything but an exact match scores 0 ("yes, it is" against "yes" is wrong, not half
/// right).
pub fn answer_f1(prediction: &str, references: &[String]) -> f64 {
    let p = normalize_answer(prediction);
    let pred: Vec<&str> = p.split_whitespace().collect();
    let special = |s: &str| matches!(s, "yes" | "no" | "noanswer");
    references
        .iter()
        .map(|r| {
            let r = normalize_answer(r);
            if (special(&p) || special(&r)) && p != r {
                return 0.0;
            }
            let gold: Vec<&str> = r.split_whitespace().collect();
            let mut left: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
            for t in &gold {
                *left.entry(t).or_default() += 1;
            }
            let common = pred
                .iter()
                .filter(|t| match left.get_mut(*t) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        true
                    }
                    _ => false,
                })
                .count();
            if common == 0 {
                return 0.0;
            }
            let precision = common as f64 / pred.len() as f64;
            let recall = common as f64 / gold.len() as f64;
            2.0 * precision * recall / (precision + recall)
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qa_metrics_by_hand() {
        assert_eq!(normalize_answer("  The Brisk-River, (1791)! "), "briskriver 1791");
        let refs = vec!["Kestrel Bay".to_string(), "Kestrel".to_string()];
        assert!(exact_match("kestrel bay.", &refs));
        assert!(exact_match("The Kestrel", &refs));
        assert!(!exact_match("Kestrel Bay village", &refs));
        // "in kestrel bay village" vs "kestrel bay": 2 common, P = 2/4, R = 2/2, F1 = 2/3.
        assert!((answer_f1("in Kestrel Bay village", &refs) - 2.0 / 3.0).abs() < 1e-12);
        // Repeated tokens count once per reference occurrence: "bay bay" vs "kestrel bay":
        // 1 common, P = 1/2, R = 1/2.
        assert!((answer_f1("bay bay", &refs[..1]) - 0.5).abs() < 1e-12);
        assert_eq!(answer_f1("Oslo", &refs), 0.0);
        assert_eq!(answer_f1("Oslo", &[]), 0.0);
    }

    #[test]
    fn yes_no_answers_score_only_when_exact() {
        let yes = vec!["yes".to_string()];
        assert_eq!(answer_f1("Yes.", &yes), 1.0);
        assert!(exact_match("Yes.", &yes));
        // Token F1 would give 2/3; the yes/no rule gives 0.
        assert_eq!(answer_f1("yes it is", &yes), 0.0);
        assert_eq!(answer_f1("no", &yes), 0.0);
        // A prediction of "no" against a non-yes/no reference that contains "no".
        assert_eq!(answer_f1("no", &["no man's land".to_string()]), 0.0);
        assert!((answer_f1("no mans", &["no man's land".to_string()]) - 0.8).abs() < 1e-12);
    }

    fn q(gold: Vec<PassageIdx>, total: usize, last: Option<PassageIdx>) -> EvalQuestion {
        EvalQuestion {
            id: "q".into(),
            text: String::new(),
            gold,
            gold_total: total,
            hop_ordered: last.is_some(),
            last_hop: last,
            qtype: None,
            answers: vec![],
        }
    }

    #[test]
    fn metrics_by_hand() {
        let question = q(vec![7, 3], 2, Some(3));
        let ranked = [1, 7, 9, 3];
        let m2 = rank_metrics(&question, &ranked, 2);
        assert_eq!(m2, RankMetrics { recall: 0.5, full: false, any: true, last_hop: Some(false) });
        let m5 = rank_metrics(&question, &ranked, 5);
        assert_eq!(m5, RankMetrics { recall: 1.0, full: true, any: true, last_hop: Some(true) });
    }

    #[test]
    fn unmatched_gold_stays_in_the_denominator() {
        let question = q(vec![7], 2, None);
        let m = rank_metrics(&question, &[7], 5);
        assert_eq!(m.recall, 0.5);
        assert!(!m.full);
        assert_eq!(m.last_hop, None);
    }

    #[test]
    fn a_last_hop_missing_from_the_index_counts_as_missed() {
        let question = EvalQuestion { hop_ordered: true, ..q(vec![7], 2, None) };
        assert_eq!(rank_metrics(&question, &[7], 5).last_hop, Some(false));
    }
}
