//! BridgeRAG's judge measured against the gold: how often its verdict on a pool
//! candidate agrees with whether the candidate is a gold passage of the question, with
//! the binarisation the simulated judge uses (relevant: a score of at least half the
//! scale), so that a real model's accuracy can be placed on the curve of
//! [`super::SimulatedJudge`] runs.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::report::PerQuery;
use super::SimulatedJudge;
use crate::dataset::ResolvedDataset;
use crate::engine::Engine;
use crate::retrieve::Trace;

/// Agreement of a judge's verdicts with the gold, over every candidate it judged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct JudgeAgreement {
    /// Judge calls made (queries whose pool was judged).
    pub calls: usize,
    /// Candidates judged that are gold passages, and how many of them the judge called
    /// relevant.
    pub gold: usize,
    pub gold_agree: usize,
    /// Candidates judged that are not, and how many of them it called irrelevant.
    pub other: usize,
    pub other_agree: usize,
    /// Candidates the answer gave no score for (they score 0, "irrelevant", as the
    /// method ranks them); included above.
    pub missing: usize,
    /// Pools whose verdicts were "the first candidate relevant, no other": the judge
    /// prompt's example, which small models copy whatever the candidates.
    #[serde(default)]
    pub first_only_pools: usize,
    /// The agreement of a judge that always gives that verdict, on the same pools (a
    /// position, not a reading: the first candidate is the one the pool ranks first).
    #[serde(default)]
    pub first_only_gold_agree: usize,
    #[serde(default)]
    pub first_only_other_agree: usize,
}

impl JudgeAgreement {
    /// The share of verdicts that agree with the gold (what the simulated judge's p is).
    pub fn accuracy(&self) -> Option<f64> {
        let n = self.gold + self.other;
        (n > 0).then(|| (self.gold_agree + self.other_agree) as f64 / n as f64)
    }

    /// The mean of the accuracies on gold and on other candidates: a judge that calls
    /// everything irrelevant scores 0.5 here, however few gold candidates the pools hold.
    pub fn balanced(&self) -> Option<f64> {
        (self.gold > 0 && self.other > 0)
            .then(|| 0.5 * (self.gold_agree as f64 / self.gold as f64 + self.other_agree as f64 / self.other as f64))
    }

    /// [`JudgeAgreement::balanced`] of the judge that calls the first candidate of every
    /// pool relevant and no other: what a judge's balanced accuracy owes to position.
    pub fn first_only_balanced(&self) -> Option<f64> {
        (self.gold > 0 && self.other > 0).then(|| {
            0.5 * (self.first_only_gold_agree as f64 / self.gold as f64
                + self.first_only_other_agree as f64 / self.other as f64)
        })
    }

    /// From the decision records in the traces of a BridgeRAG method (`None` when no
    /// query's pool was judged), with the judge's scale topping at `max`.
    pub fn of(per_query: &[PerQuery], traces: &[Trace], max: f64) -> Option<Self> {
        let mut a = JudgeAgreement::default();
        for (q, trace) in per_query.iter().zip(traces) {
            let gold: HashSet<&str> = q.gold.iter().map(String::as_str).collect();
            let detail = |name: &str| trace.steps.iter().find(|s| s.name == name).map(|s| &s.detail);
            let Some(pool) = detail("decision record").and_then(|d| d.get("pool")).and_then(Value::as_array) else {
                continue;
            };
            let scores: Vec<(&str, f64)> =
                pool.iter().filter_map(|c| Some((c.get("id")?.as_str()?, c.get("judge")?.as_f64()?))).collect();
            if scores.is_empty() {
                continue;
            }
            a.calls += 1;
            a.missing += detail("judge").and_then(|d| d.get("missing")).and_then(Value::as_u64).unwrap_or(0) as usize;
            // The pool is listed in the order the prompt shows it.
            let relevant: Vec<bool> = scores.iter().map(|&(_, score)| 2.0 * score >= max).collect();
            a.first_only_pools += usize::from(relevant.iter().enumerate().all(|(i, &r)| r == (i == 0)));
            for (i, ((id, _), relevant)) in scores.iter().zip(relevant).enumerate() {
                if gold.contains(id) {
                    a.gold += 1;
                    a.gold_agree += usize::from(relevant);
                    a.first_only_gold_agree += usize::from(i == 0);
                } else {
                    a.other += 1;
                    a.other_agree += usize::from(!relevant);
                    a.first_only_other_agree += usize::from(i != 0);
                }
            }
        }
        (a.calls > 0).then_some(a)
    }
}

/// The simulated judge of accuracy `p` for the questions of `data` on `engine`'s index,
/// its other requests passed to the recorded reader when `llm.recorded` is set (and to
/// nothing else: the stages neither serves take their LLM-free fallback).
pub fn simulated_judge(engine: &Engine, data: &ResolvedDataset, p: f64) -> crate::Result<SimulatedJudge> {
    let gold = data.questions.iter().map(|q| {
        let passages = q
            .gold
            .iter()
            .map(|&i| {
                let passage = engine.index.passage(i);
                (passage.title.clone(), passage.text.clone())
            })
            .collect();
        (q.text.clone(), passages)
    });
    let rest = if engine.config.llm.recorded.as_os_str().is_empty() { None } else { engine.llm().cloned() };
    SimulatedJudge::new(p, super::SIMULATED_JUDGE_SEED, gold, rest)
}

/// What answered in place of a model in an evaluation on `engine`, for the report's
/// header ([`super::EvalOptions::simulated`]): the recorded reader where `llm.recorded`
/// is set, then `judge`, the header of what stands in for BridgeRAG's judge
/// ([`SimulatedJudge::header`], [`super::JudgeOnly::header`]); `None` when a model (or
/// nothing) answered as configured.
pub fn simulation_note(engine: &Engine, judge: Option<String>) -> Option<String> {
    let recorded = &engine.config.llm.recorded;
    let reader = (!recorded.as_os_str().is_empty()).then(|| {
        format!(
            "RECORDED reader: triple-reading stages answered from {} (other LLM stages fail and fall back)",
            recorded.display()
        )
    });
    let notes: Vec<String> = reader.into_iter().chain(judge).collect();
    (!notes.is_empty()).then(|| notes.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A question with gold `gold` whose pool `pool` (in prompt order) got `judged`.
    fn judged(gold: &str, pool: &[&str], judged: &[f64]) -> (PerQuery, Trace) {
        let q = json!({"id": "q", "type": null, "gold": [gold], "retrieved": [], "scores": [], "recall": {},
                       "full": {}, "last_hop": {}, "latency_ms": 0.0});
        let record: Vec<Value> = pool.iter().zip(judged).map(|(id, s)| json!({"id": id, "judge": s})).collect();
        let trace = json!({"steps": [{"name": "decision record", "micros": 0, "detail": {"pool": record}}]});
        (serde_json::from_value(q).unwrap(), serde_json::from_value(trace).unwrap())
    }

    #[test]
    fn agreement_counts_verdicts_and_what_position_alone_would_give() {
        let (q1, t1) = judged("a", &["a", "b", "c"], &[10.0, 0.0, 0.0]);
        let (q2, t2) = judged("e", &["d", "e", "f"], &[0.0, 10.0, 10.0]);
        let a = JudgeAgreement::of(&[q1, q2], &[t1, t2], 10.0).unwrap();
        assert_eq!((a.calls, a.gold, a.gold_agree, a.other, a.other_agree), (2, 2, 2, 4, 3));
        // Only the first pool's verdicts are "first candidate only".
        assert_eq!(a.first_only_pools, 1);
        assert_eq!((a.first_only_gold_agree, a.first_only_other_agree), (1, 3));
        assert_eq!(a.balanced(), Some(0.5 * (1.0 + 0.75)));
        assert_eq!(a.first_only_balanced(), Some(0.5 * (0.5 + 0.75)));
    }
}
