//! BridgeRAG's parameters, with the paper's defaults.

use serde::{Deserialize, Serialize};

use super::Condition;

/// BridgeRAG (Bacellar 2026, §4–5): hop-1 dense search, SVO and dual-entity expansion
/// into one pool, a batched LLM judge, PIT fusion of judge and SVO scores.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct BridgeRagParams {
    /// Hop-1 depth K1 (5); the top-1 passage is the bridge.
    pub k1: usize,
    /// Hop-2 queries in subject-verb-object form asked of the LLM, N (3).
    pub svo_queries: usize,
    /// Depth of each SVO search, k2 (10).
    pub svo_k: usize,
    /// Passages kept from the SVO searches after the union by maximum cosine (SVO-15).
    pub svo_keep: usize,
    /// Depth of each of the two entity searches (5).
    pub entity_k: usize,
    /// Pool size: the best of SVO-15 ∪ e1-top-5 ∪ e2-top-5 by their best search score (20).
    pub pool: usize,
    /// Weight α of the SVO similarity in f(c) = (1 − α)·PIT(judge) + α·PIT(svo) (0.1; the
    /// paper's tune split chose 0.10 on MuSiQue and 2Wiki, 0.15 on HotpotQA).
    pub alpha: f64,
    /// The judge scores from 0 to this (10).
    pub judge_max: u32,
    /// The bridge passage is cut to this many characters in the prompts (about 4 per
    /// token), with a warning in the trace. The paper sets no limit; this one keeps a very
    /// long bridge from crowding the judge's candidates out of a small context window.
    pub bridge_max_chars: usize,
    /// Each candidate is cut to this many characters in the judge prompt: 20 of them
    /// share one prompt (the paper's §9 notes long pools may overflow the context).
    pub candidate_max_chars: usize,
    /// Ablation condition (§5.4), all on the same pool: `a` ranks by SVO similarity
    /// alone, `b` asks the 2-way judge s(q, c), `c` the bridge-conditioned s(q, b, c).
    pub condition: Condition,
    /// Answer-length caps of the three calls, against a model that never stops.
    pub svo_max_tokens: u32,
    pub entity_max_tokens: u32,
    pub judge_max_tokens: u32,
    /// Refuse a judge answer that gives bare scores, without candidate ids, for more or
    /// fewer candidates than the pool holds: which score is whose is then a guess (the
    /// prompt asks for an id and a score per candidate). The refusal is counted and the
    /// query falls back to the dense ranking.
    pub judge_aligned_scores: bool,
}

impl Default for BridgeRagParams {
    fn default() -> Self {
        BridgeRagParams {
            k1: 5,
            svo_queries: 3,
            svo_k: 10,
            svo_keep: 15,
            entity_k: 5,
            pool: 20,
            alpha: 0.1,
            judge_max: 10,
            bridge_max_chars: 2000,
            candidate_max_chars: 1000,
            condition: Condition::C,
            svo_max_tokens: 256,
            entity_max_tokens: 48,
            judge_max_tokens: 640,
            judge_aligned_scores: true,
        }
    }
}
