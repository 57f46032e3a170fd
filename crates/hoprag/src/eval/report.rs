//! The evaluation report: one serialisable structure for the table, the JSON output and
//! the TREC run.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::dataset::{GoldIssue, GoldMatchCounts};
use crate::llm::LlmStatsSnapshot;
use crate::retrieve::Trace;

/// Metric values keyed by cutoff, as strings so the JSON reads `{"5": 0.598}`.
pub type ByK = BTreeMap<String, f64>;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalReport {
    pub dataset: String,
    /// Questions evaluated.
    pub n: usize,
    pub ks: Vec<usize>,
    pub index: String,
    /// How the dataset's gold passages were matched to the index.
    #[serde(default)]
    pub gold_matching: GoldMatchCounts,
    /// Gold passages the index does not hold (counted as missed), by question id.
    pub unmatched_gold: Vec<GoldIssue>,
    /// Gold passages matched only by a fallback (text alone, title alone), by question id.
    #[serde(default)]
    pub fallback_gold: Vec<GoldIssue>,
    pub baseline: Option<String>,
    /// Keyed by method name, in the order asked for (a BTreeMap would sort them).
    pub methods: IndexMap<String, MethodReport>,
    /// Top-1 flips between pairs of methods, when asked for (see [`super::flips`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flips: Vec<super::FlipReport>,
    /// What answered in place of a model, when something did (a simulated judge that
    /// knows the gold, a recorded reader): reports made so say it in their header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MethodReport {
    pub recall: ByK,
    pub full: ByK,
    pub any: ByK,
    pub last_hop: ByK,
    /// Questions whose dataset gives hop order (LastHop's denominator; LastHop is
    /// absent, "n/a", where this is 0).
    pub last_hop_n: usize,
    pub by_type: BTreeMap<String, TypeReport>,
    pub latency_ms: Latency,
    /// Queries the method answered with its LLM-free fallback ranking because its LLM
    /// stages failed (see [`crate::retrieve::fallback`]); their ids are in `per_query`.
    #[serde(default)]
    pub fallbacks: usize,
    /// What the method's LLM calls cost, for methods that made any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmCost>,
    /// Time and LLM cost per query of each step of the method's trace.
    #[serde(default)]
    pub stages: IndexMap<String, StageReport>,
    /// Exact match and F1 of answers generated from the method's passages, when asked
    /// for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qa: Option<QaReport>,
    pub per_query: Vec<PerQuery>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_baseline: Option<VsBaseline>,
    /// How often BridgeRAG's judge agreed with the gold (methods that judged a pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_agreement: Option<super::JudgeAgreement>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TypeReport {
    pub n: usize,
    pub recall: ByK,
    pub full: ByK,
    pub any: ByK,
    pub last_hop: ByK,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PerQuery {
    pub id: String,
    #[serde(rename = "type")]
    pub qtype: Option<String>,
    pub gold: Vec<String>,
    /// Gold passages the dataset names that matched nothing in the index (missed by
    /// every method; the qrels hold them as placeholders).
    #[serde(default)]
    pub unmatched_gold: usize,
    /// Passage ids, best first, down to the largest cutoff.
    pub retrieved: Vec<String>,
    pub scores: Vec<f32>,
    pub recall: ByK,
    pub full: BTreeMap<String, bool>,
    pub last_hop: BTreeMap<String, bool>,
    pub latency_ms: f64,
    /// Answered with the method's fallback ranking (its LLM stages failed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fell_back: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmStatsSnapshot>,
    /// The method's trace, when the run was asked to keep them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
    /// The generated answer and its scores, when answers were asked for and the
    /// question has references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<QaScore>,
}

/// One question's generated answer, scored against its references.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QaScore {
    pub answer: String,
    pub em: bool,
    pub f1: f64,
    /// Why no answer could be generated (the call failed after its retries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Answer quality of a method (the papers' QA metrics), over the questions with
/// reference answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QaReport {
    /// Passages the answers were generated from.
    pub k: usize,
    pub answered: usize,
    pub em: f64,
    pub f1: f64,
    /// Questions whose answer call failed (scored 0).
    pub failed: usize,
    /// What the answer calls cost.
    pub llm: LlmStatsSnapshot,
}

/// Mean LLM cost per query of a method. Tokens count cache hits at their original cost,
/// so the figures are the same on a cold and a warm cache.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LlmCost {
    pub calls_per_query: f64,
    pub prompt_tokens_per_query: f64,
    pub completion_tokens_per_query: f64,
    /// Wall time spent in LLM calls per query (a cache hit costs next to nothing).
    pub llm_ms_per_query: f64,
    /// Totals over the run.
    pub cache_hits: u64,
    pub errors: u64,
    pub parse_failures: u64,
}

impl LlmCost {
    /// The mean over `traces`, or none when no query called an LLM.
    pub fn of(traces: &[Trace]) -> Option<LlmCost> {
        let costs: Vec<LlmStatsSnapshot> = traces.iter().filter_map(Trace::llm_cost).collect();
        if costs.is_empty() {
            return None;
        }
        let n = traces.len() as f64;
        let total = costs.into_iter().reduce(|a, b| a + b).unwrap_or_default();
        let tokens = total.tokens();
        Some(LlmCost {
            calls_per_query: total.calls as f64 / n,
            prompt_tokens_per_query: tokens.prompt_tokens as f64 / n,
            completion_tokens_per_query: tokens.completion_tokens as f64 / n,
            llm_ms_per_query: total.latency_ms / n,
            cache_hits: total.cache_hits,
            errors: total.errors,
            parse_failures: total.parse_failures,
        })
    }
}

/// One named step of a method, averaged over the queries of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StageReport {
    /// How often the step ran per query (multi-step methods run some more than once).
    pub runs_per_query: f64,
    pub ms_per_query: f64,
    pub llm_calls_per_query: f64,
    pub prompt_tokens_per_query: f64,
    pub completion_tokens_per_query: f64,
}

/// Paired comparison with the baseline method on the same questions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VsBaseline {
    pub baseline: String,
    /// The cutoff of the wins, losses and ties (R@k).
    pub k: usize,
    #[serde(flatten)]
    pub all: Paired,
    /// The two-sided sign-test p adjusted by Holm–Bonferroni over every method compared
    /// with this baseline in the run.
    pub sign_p_holm: f64,
    /// The same comparison within each question type (unadjusted).
    pub by_type: BTreeMap<String, Paired>,
}

/// Paired tests of a method against the baseline over a set of questions.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Paired {
    pub n: usize,
    /// Questions where the method's R@k is higher / lower / equal.
    pub wins: u64,
    pub losses: u64,
    pub ties: u64,
    /// Exact sign test on wins and losses, two-sided.
    pub sign_p: f64,
    /// The one-sided exact sign test for "the method is better" (P(≥ wins)).
    pub sign_p_greater: f64,
    /// LastHop@k at every cutoff: questions whose last hop only the method finds
    /// (GraphWin when the baseline is the vector-only method), only the baseline finds
    /// (GraphLoss), and the exact McNemar test on them. Empty where no question has hop
    /// order (LastHop is not defined: "n/a").
    pub last_hop: BTreeMap<String, McNemar>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct McNemar {
    pub only_method: u64,
    pub only_baseline: u64,
    /// Exact McNemar test, two-sided.
    pub p: f64,
    /// Holm–Bonferroni-adjusted over the methods compared with the baseline, at this
    /// cutoff (overall only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_holm: Option<f64>,
}
