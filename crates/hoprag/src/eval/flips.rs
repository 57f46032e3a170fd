//! Flip analysis between two methods run on the same questions (BridgeRAG's Exp. H, with
//! B → C): a flip is a question whose top-1 passage changes; a flip is productive when
//! R@k rises from the first method to the second and harmful when it falls. Per question
//! type and overall, from the per-query results of one evaluation (so, behind the LLM
//! response cache, at no extra cost).
//!
//! The top-1 is the first passage each method returned. For BridgeRAG that is the judge's
//! top candidate with ties broken by the fused SVO term: integer judge scores tie often,
//! and the fused order is the one the method acts on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{EvalReport, PerQuery};
use crate::error::{Error, Result};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlipReport {
    pub from: String,
    pub to: String,
    /// The cutoff of the recall compared.
    pub k: usize,
    pub all: FlipRow,
    pub by_type: BTreeMap<String, FlipRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlipRow {
    pub n: usize,
    /// Questions whose top-1 changed.
    pub flips: usize,
    pub flip_rate: f64,
    /// Flips where R@k rose / fell.
    pub productive: usize,
    pub harmful: usize,
    /// Productive flips as a share of flips (0 without flips).
    pub productivity: f64,
    /// Mean R@k of `to` minus that of `from`, over all questions of the row.
    pub recall_delta: f64,
}

/// Flips from method `from` to method `to` in `report`, comparing R@`k`.
pub fn flips(report: &EvalReport, from: &str, to: &str, k: usize) -> Result<FlipReport> {
    let method = |name: &str| {
        report.methods.get(name).ok_or_else(|| {
            let known: Vec<&str> = report.methods.keys().map(String::as_str).collect();
            Error::Config(format!("flips: method {name:?} is not in the report ({})", known.join(", ")))
        })
    };
    let (a, b) = (&method(from)?.per_query, &method(to)?.per_query);
    let key = k.to_string();
    if !report.ks.contains(&k) {
        return Err(Error::Config(format!("flips: R@{k} was not computed (cutoffs: {:?})", report.ks)));
    }
    let mut all = Tally::default();
    let mut by_type: BTreeMap<String, Tally> = BTreeMap::new();
    for (x, y) in a.iter().zip(b) {
        if x.id != y.id {
            return Err(Error::Other(format!("flips: question order differs ({} vs {})", x.id, y.id)));
        }
        let qtype = x.qtype.clone().unwrap_or_else(|| "untyped".into());
        for t in [&mut all, by_type.entry(qtype).or_default()] {
            t.add(x, y, &key);
        }
    }
    Ok(FlipReport {
        from: from.to_string(),
        to: to.to_string(),
        k,
        all: all.row(),
        by_type: by_type.into_iter().map(|(t, x)| (t, x.row())).collect(),
    })
}

#[derive(Default)]
struct Tally {
    n: usize,
    flips: usize,
    productive: usize,
    harmful: usize,
    delta: f64,
}

impl Tally {
    fn add(&mut self, from: &PerQuery, to: &PerQuery, key: &str) {
        let recall = |q: &PerQuery| q.recall.get(key).copied().unwrap_or(0.0);
        let delta = recall(to) - recall(from);
        self.n += 1;
        self.delta += delta;
        if from.retrieved.first() != to.retrieved.first() {
            self.flips += 1;
            self.productive += usize::from(delta > 0.0);
            self.harmful += usize::from(delta < 0.0);
        }
    }

    fn row(&self) -> FlipRow {
        let share = |x: usize, of: usize| if of == 0 { 0.0 } else { x as f64 / of as f64 };
        FlipRow {
            n: self.n,
            flips: self.flips,
            flip_rate: share(self.flips, self.n),
            productive: self.productive,
            harmful: self.harmful,
            productivity: share(self.productive, self.flips),
            recall_delta: if self.n == 0 { 0.0 } else { self.delta / self.n as f64 },
        }
    }
}

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;

    use super::*;
    use crate::eval::{Latency, MethodReport};

    fn query(id: &str, qtype: &str, top: &str, recall: f64) -> PerQuery {
        PerQuery {
            id: id.into(),
            qtype: Some(qtype.into()),
            gold: vec![],
            unmatched_gold: 0,
            retrieved: vec![top.into(), "z".into()],
            scores: vec![],
            recall: [("5".to_string(), recall)].into(),
            full: Default::default(),
            last_hop: Default::default(),
            latency_ms: 0.0,
            fell_back: false,
            llm: None,
            trace: None,
            answer: None,
        }
    }

    fn method(per_query: Vec<PerQuery>) -> MethodReport {
        MethodReport {
            recall: Default::default(),
            full: Default::default(),
            any: Default::default(),
            last_hop: Default::default(),
            last_hop_n: 0,
            by_type: Default::default(),
            latency_ms: Latency::default(),
            fallbacks: 0,
            llm: None,
            stages: Default::default(),
            per_query,
            vs_baseline: None,
            qa: None,
            judge_agreement: None,
        }
    }

    #[test]
    fn flips_by_hand() {
        let b = vec![
            query("1", "bridge", "a", 0.5),
            query("2", "bridge", "a", 0.5),
            query("3", "bridge", "a", 1.0),
            query("4", "comparison", "a", 0.5),
            query("5", "comparison", "a", 0.5),
        ];
        let c = vec![
            query("1", "bridge", "b", 1.0),     // productive flip
            query("2", "bridge", "b", 0.5),     // neutral flip
            query("3", "bridge", "a", 1.0),     // no flip
            query("4", "comparison", "c", 0.0), // harmful flip
            query("5", "comparison", "a", 1.0), // gain without a flip
        ];
        let mut methods = IndexMap::new();
        methods.insert("b".to_string(), method(b));
        methods.insert("c".to_string(), method(c));
        let report = EvalReport {
            dataset: "x".into(),
            n: 5,
            ks: vec![5],
            index: String::new(),
            gold_matching: Default::default(),
            unmatched_gold: vec![],
            fallback_gold: vec![],
            baseline: None,
            methods,
            flips: vec![],
            simulated: None,
        };
        let f = flips(&report, "b", "c", 5).unwrap();
        assert_eq!((f.all.n, f.all.flips, f.all.productive, f.all.harmful), (5, 3, 1, 1));
        assert!((f.all.flip_rate - 0.6).abs() < 1e-12 && (f.all.productivity - 1.0 / 3.0).abs() < 1e-12);
        assert!((f.all.recall_delta - 0.5 / 5.0).abs() < 1e-12, "(+0.5 + 0 + 0 − 0.5 + 0.5) / 5");
        let bridge = &f.by_type["bridge"];
        assert_eq!((bridge.n, bridge.flips, bridge.productive, bridge.harmful), (3, 2, 1, 0));
        assert!((bridge.productivity - 0.5).abs() < 1e-12);
        let comparison = &f.by_type["comparison"];
        assert_eq!((comparison.flips, comparison.productive, comparison.harmful), (1, 0, 1));
        assert!(flips(&report, "b", "nope", 5).unwrap_err().to_string().contains("nope"));
        assert!(flips(&report, "b", "c", 10).is_err());
    }
}
