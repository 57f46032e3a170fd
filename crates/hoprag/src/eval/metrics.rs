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
    /// The last hop's gold passage is in the top-k; `None` where hop order is unknown.
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
        last_hop: q.last_hop.map(|l| top.contains(&l)),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn q(gold: Vec<PassageIdx>, total: usize, last: Option<PassageIdx>) -> EvalQuestion {
        EvalQuestion {
            id: "q".into(),
            text: String::new(),
            gold,
            gold_total: total,
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
}
