//! Evaluation: the papers' retrieval metrics, significance tests against a baseline,
//! breakdowns by question type, and report formats (table, JSON, TREC run).

pub mod flips;
mod judge;
mod judge_only;
mod metrics;
pub mod protocol;
mod report;
mod runner;
mod simulated_judge;
pub mod stats;
mod trec;
pub mod tune;

pub use flips::{flips, FlipReport, FlipRow};
pub use judge::{simulated_judge, simulation_note, JudgeAgreement};
pub use judge_only::JudgeOnly;
pub use metrics::{answer_f1, exact_match, normalize_answer, QueryMetrics, RankMetrics};
pub use report::{
    EvalReport, Latency, LlmCost, McNemar, MethodReport, Paired, PerQuery, QaReport, QaScore, StageReport, TypeReport,
    VsBaseline,
};
pub use runner::{evaluate, evaluate_queries, EvalOptions};
pub use simulated_judge::{SimulatedJudge, DEFAULT_SEED as SIMULATED_JUDGE_SEED};
pub use trec::{run_tag, unmatched_doc, write_qrels, write_run, write_runs};
