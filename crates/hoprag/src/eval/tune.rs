//! Parameter tuning with an honest protocol: split the questions into tune and test by
//! MD5 of the question id, grid-search on tune by one metric, then evaluate the chosen
//! setting once on test (the PhaseGraph and BridgeRAG papers' protocol).

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::runner::{evaluate_queries, EvalOptions};
use super::EvalReport;
use crate::config::{resolve_param, with_settings};
use crate::dataset::ResolvedDataset;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::progress::Progress;

/// A metric at a cutoff, written `recall@5`, `full@10`, `any@2` or `last_hop@10`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    pub k: usize,
}

impl std::str::FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, k) = s.split_once('@').ok_or_else(|| format!("metric {s:?}: expected NAME@K, e.g. recall@5"))?;
        let name = match name.to_ascii_lowercase().replace('-', "_").as_str() {
            "recall" | "r" => "recall",
            "full" => "full",
            "any" => "any",
            "last_hop" | "lasthop" => "last_hop",
            other => return Err(format!("unknown metric {other:?}: expected recall, full, any or last_hop")),
        }
        .to_string();
        let k = k.parse().map_err(|_| format!("metric {s:?}: the cutoff must be a number"))?;
        Ok(Metric { name, k })
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}@{}", self.name, self.k)
    }
}

impl Metric {
    pub fn read(&self, report: &EvalReport, method: &str) -> Option<f64> {
        let m = report.methods.get(method)?;
        let by_k = match self.name.as_str() {
            "recall" => &m.recall,
            "full" => &m.full,
            "any" => &m.any,
            _ => &m.last_hop,
        };
        by_k.get(&self.k.to_string()).copied()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneOptions {
    pub method: String,
    /// Parameter (dotted config path, or a name unique within the method's section)
    /// and the values to try.
    pub grid: Vec<(String, Vec<Value>)>,
    pub metric: Metric,
    pub ks: Vec<usize>,
    pub baseline: Option<String>,
    /// Share of questions (by id hash) that go to the tune split.
    pub tune_share: f64,
    pub dataset: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GridPoint {
    pub setting: Vec<(String, Value)>,
    pub tune_score: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneReport {
    pub method: String,
    pub metric: Metric,
    pub tune_n: usize,
    pub test_n: usize,
    pub grid: Vec<GridPoint>,
    pub best: Vec<(String, Value)>,
    pub best_tune_score: f64,
    /// The chosen setting (and the baseline) evaluated once on the test split.
    pub test: EvalReport,
    pub test_score: f64,
    pub baseline_test_score: Option<f64>,
}

/// True if the question belongs to the tune split: the first four bytes of MD5(id), as a
/// fraction of 2^32, fall below `tune_share`.
pub fn in_tune_split(id: &str, tune_share: f64) -> bool {
    let d = Md5::digest(id.as_bytes());
    let x = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as f64 / (u32::MAX as f64 + 1.0);
    x < tune_share
}

/// Grid search on the tune split, then one evaluation on the test split.
pub fn tune(
    engine: &Engine,
    data: &ResolvedDataset,
    options: &TuneOptions,
    progress: &dyn Progress,
) -> Result<TuneReport> {
    let tune_set = data.subset(|q| in_tune_split(&q.id, options.tune_share));
    let test_set = data.subset(|q| !in_tune_split(&q.id, options.tune_share));
    if tune_set.questions.is_empty() || test_set.questions.is_empty() {
        return Err(Error::Config(format!(
            "the split left {} tune and {} test questions; both need some",
            tune_set.questions.len(),
            test_set.questions.len()
        )));
    }
    let base_config = serde_json::to_value(&engine.config).map_err(|e| Error::Config(e.to_string()))?;
    let mut axes = Vec::new();
    for (name, values) in &options.grid {
        if values.is_empty() {
            return Err(Error::Config(format!("no values given for {name}")));
        }
        axes.push((resolve_param(&base_config, &options.method, name)?, values.clone()));
    }
    let texts = |d: &ResolvedDataset| d.questions.iter().map(|q| q.text.clone()).collect::<Vec<_>>();
    let tune_queries = engine.embed_queries(&texts(&tune_set), progress)?;
    let test_queries = engine.embed_queries(&texts(&test_set), progress)?;

    let mut ks = options.ks.clone();
    if !ks.contains(&options.metric.k) {
        ks.push(options.metric.k);
    }
    let eval_options = |name: &str| EvalOptions::new(ks.clone(), options.baseline.clone(), name);
    let methods = vec![options.method.clone()];
    let mut grid = Vec::new();
    for setting in cartesian(&axes) {
        let engine = engine.with_config(with_settings(&engine.config, &setting)?);
        let r = evaluate_queries(&engine, &tune_set, &tune_queries, &methods, &eval_options("tune"), progress)?;
        let tune_score = options.metric.read(&r, &options.method).unwrap_or(f64::NAN);
        grid.push(GridPoint { setting, tune_score });
    }
    // The first best setting in grid order wins ties, so the choice is reproducible.
    let best = grid
        .iter()
        .filter(|g| !g.tune_score.is_nan())
        .fold(None::<&GridPoint>, |best, g| match best {
            Some(b) if b.tune_score >= g.tune_score => Some(b),
            _ => Some(g),
        })
        .ok_or_else(|| Error::Config(format!("{} is undefined on the tune split", options.metric)))?
        .clone();
    let chosen = engine.with_config(with_settings(&engine.config, &best.setting)?);
    let test =
        evaluate_queries(&chosen, &test_set, &test_queries, &methods, &eval_options(&options.dataset), progress)?;
    let test_score = options.metric.read(&test, &options.method).unwrap_or(f64::NAN);
    let baseline_test_score = options.baseline.as_ref().and_then(|b| options.metric.read(&test, b));
    Ok(TuneReport {
        method: options.method.clone(),
        metric: options.metric.clone(),
        tune_n: tune_set.questions.len(),
        test_n: test_set.questions.len(),
        best: best.setting,
        best_tune_score: best.tune_score,
        grid,
        test,
        test_score,
        baseline_test_score,
    })
}

fn cartesian(axes: &[(String, Vec<Value>)]) -> Vec<Vec<(String, Value)>> {
    axes.iter().fold(vec![Vec::new()], |acc, (name, values)| {
        acc.into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push((name.clone(), v.clone()));
                    next
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieve::bridge_rag::SPEC_B as BRIDGE_RAG_B;
    use crate::retrieve::gear::NAIVE_GE;
    use crate::retrieve::phasegraph::SPEC as PHASEGRAPH;
    use crate::Config;

    #[test]
    fn split_is_stable_and_roughly_balanced() {
        let ids: Vec<String> = (0..1000).map(|i| format!("q{i}")).collect();
        let tune = ids.iter().filter(|id| in_tune_split(id, 0.5)).count();
        assert!((400..600).contains(&tune), "{tune}");
        assert_eq!(in_tune_split("q1", 0.5), in_tune_split("q1", 0.5));
        assert!(ids.iter().all(|id| !in_tune_split(id, 0.0)));
    }

    #[test]
    fn parameters_resolve_and_apply() {
        let config = Config::default();
        let v = serde_json::to_value(&config).unwrap();
        let (phasegraph, naive_ge, bridge_rag_b) = (PHASEGRAPH.name, NAIVE_GE.name, BRIDGE_RAG_B.name);
        assert_eq!(resolve_param(&v, phasegraph, "alpha").unwrap(), "phasegraph.fusion.alpha");
        assert_eq!(resolve_param(&v, phasegraph, "dk").unwrap(), "phasegraph.dk");
        assert!(resolve_param(&v, phasegraph, "nope").unwrap_err().to_string().contains("alpha"));
        // Methods that share a section find its parameters.
        assert_eq!(resolve_param(&v, naive_ge, "base").unwrap(), "gear.base");
        assert_eq!(resolve_param(&v, bridge_rag_b, "alpha").unwrap(), "bridge_rag.alpha");
        // A dotted name: a full path, or one under the method's section.
        assert_eq!(resolve_param(&v, phasegraph, "phasegraph.fusion.alpha").unwrap(), "phasegraph.fusion.alpha");
        assert_eq!(resolve_param(&v, phasegraph, "fusion.alpha").unwrap(), "phasegraph.fusion.alpha");
        assert!(resolve_param(&v, phasegraph, "fusion.nope").is_err());
        let c = with_settings(
            &config,
            &[
                ("phasegraph.fusion.alpha".into(), Value::from(0.4)),
                ("phasegraph.fusion.normalization".into(), Value::from("min_max")),
            ],
        )
        .unwrap();
        assert_eq!(c.methods.phasegraph.fusion.alpha, 0.4);
        assert_eq!(c.methods.phasegraph.fusion.normalization, crate::fusion::Normalization::MinMax);
        assert!(with_settings(&config, &[("phasegraph.fusion.alpha".into(), Value::from("x"))]).is_err());
        let mut keyed = config.clone();
        keyed.llm.api_key = Some("sk-llm".into());
        keyed.embedder.openai.api_key = Some("sk-embed".into());
        let c = with_settings(&keyed, &[("llm.local".into(), Value::from("gemma3-270m"))]).unwrap();
        assert_eq!(c.llm.local, "gemma3-270m");
        assert_eq!(
            (c.llm.api_key.as_deref(), c.embedder.openai.api_key.as_deref()),
            (Some("sk-llm"), Some("sk-embed"))
        );
        assert_eq!(cartesian(&[("a".into(), vec![1.into(), 2.into()]), ("b".into(), vec![3.into()])]).len(), 2);
    }

    #[test]
    fn metrics_parse() {
        assert_eq!("last_hop@10".parse::<Metric>().unwrap(), Metric { name: "last_hop".into(), k: 10 });
        assert_eq!("R@5".parse::<Metric>().unwrap().name, "recall");
        assert!("recall".parse::<Metric>().is_err());
    }
}
