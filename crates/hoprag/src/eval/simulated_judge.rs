//! A judge of known accuracy for BridgeRAG, for evaluation only: it knows the gold
//! passages of the questions being evaluated and answers each judge call as a model that
//! is right about each candidate with probability `p` would.
//!
//! For each (question, candidate) it draws u uniform in [0, 1) from a hash of the seed,
//! the question and the candidate as the prompt shows it, so the draws do not depend on
//! `p`, on the order of calls or on threads: the run at p = 0.8 differs from the run at
//! p = 0.7 exactly on the pairs with 0.7 ≤ u < 0.8, and curves over p compare like with
//! like. When u < p the verdict is the gold-consistent one on the judge's own scale (the
//! top score for a gold passage, 0 otherwise), else the opposite; p = 0.5 is a coin.
//!
//! It answers nothing but BridgeRAG's judge prompts: every other request fails (counted
//! by the meter like any failed call) and is passed to `rest` when one is given (the
//! recorded reader, [`crate::retrieve::gear::RecordedReader`]), so the stages neither serves take their
//! LLM-free fallback. Its answers are computed, not generated, so it never goes behind
//! the response cache. Knowing the gold, it must never answer a real query: the setting
//! `llm.simulated_judge` is refused by every configuration check
//! ([`crate::Config::validate`]) and taken out of the settings only by `hoprag eval` and
//! Python's `evaluate`, which build it from the evaluation's gold.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::json;

use crate::error::{Error, Result};
use crate::llm::{ChatRequest, ChatResponse, Llm, Usage};
use crate::retrieve::bridge_rag::prompts::{parse_judge_request, prompt_form};

/// The seed of the draws unless one is given: fixed, so reports repeat.
pub const DEFAULT_SEED: u64 = 53;

pub struct SimulatedJudge {
    p: f64,
    seed: u64,
    id: String,
    /// Question text (trimmed) → its gold passages as the prompt would show them, uncut.
    gold: HashMap<String, Vec<String>>,
    rest: Option<Arc<dyn Llm>>,
    judged: AtomicU64,
    refused: AtomicU64,
}

impl SimulatedJudge {
    /// A judge right with probability `p` about each candidate, for the questions of
    /// `gold`: (question text, its gold passages' titles and texts). Requests other than
    /// BridgeRAG's judge go to `rest`, or fail.
    pub fn new(
        p: f64,
        seed: u64,
        gold: impl IntoIterator<Item = (String, Vec<(String, String)>)>,
        rest: Option<Arc<dyn Llm>>,
    ) -> Result<Self> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::Config(format!("llm.simulated_judge: must be between 0 and 1, got {p}")));
        }
        let mut map: HashMap<String, Vec<String>> = HashMap::new();
        for (question, passages) in gold {
            let forms = passages.iter().map(|(title, text)| prompt_form(title, text.trim()));
            map.entry(question.trim().to_string()).or_default().extend(forms);
        }
        let rest_id = rest.as_ref().map(|r| format!(", else {}", r.id())).unwrap_or_default();
        let id = format!("simulated-judge(p={p}, seed={seed}{rest_id})");
        Ok(SimulatedJudge { p, seed, id, gold: map, rest, judged: AtomicU64::new(0), refused: AtomicU64::new(0) })
    }

    /// What a report made with this judge says in its header.
    pub fn header(&self) -> String {
        format!(
            "SIMULATED judge, accuracy {p}: BridgeRAG's judge knows the gold passages and is right about each \
             candidate with probability {p} ({}); not a model",
            self.id,
            p = self.p
        )
    }

    /// Candidates judged so far, and requests that were no judge call.
    pub fn counts(&self) -> (u64, u64) {
        (self.judged.load(Ordering::Relaxed), self.refused.load(Ordering::Relaxed))
    }

    /// The uniform draw of one (question, candidate) pair.
    pub fn draw(&self, question: &str, candidate: &str) -> f64 {
        let h = fnv1a(&[&self.seed.to_le_bytes(), question.trim().as_bytes(), &[0xff], candidate.as_bytes()]);
        // The top 53 bits of a mixed hash, as a double in [0, 1).
        (splitmix64(h) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Whether `candidate`, a passage as the judge prompt shows it (cut at a word with "…"
/// where long), is one of `gold` (uncut).
fn is_gold(candidate: &str, gold: &[String]) -> bool {
    let head = candidate.strip_suffix('…').map(str::trim_end);
    gold.iter().any(|g| g == candidate || head.is_some_and(|h| !h.is_empty() && g.starts_with(h)))
}

impl Llm for SimulatedJudge {
    fn id(&self) -> &str {
        &self.id
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let Some(call) = parse_judge_request(request) else {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return match &self.rest {
                Some(rest) => rest.chat(request),
                None => Err(Error::Other("the simulated judge answers BridgeRAG's judge only".into())),
            };
        };
        // A question outside the evaluation has no gold: refuse rather than call every
        // candidate irrelevant.
        let gold = self
            .gold
            .get(call.question.trim())
            .ok_or_else(|| Error::Other("the simulated judge knows no gold for this question".into()))?;
        let scores: Vec<_> = call
            .candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let relevant = is_gold(c, gold) == (self.draw(&call.question, c) < self.p);
                json!({"id": i + 1, "score": if relevant { call.max } else { 0 }})
            })
            .collect();
        self.judged.fetch_add(call.candidates.len() as u64, Ordering::Relaxed);
        Ok(ChatResponse {
            text: serde_json::Value::Array(scores).to_string(),
            usage: Usage::default(),
            cached: false,
            retries: 0,
            latency_ms: 0.0,
        })
    }
}

/// FNV-1a over the parts: stable across platforms and Rust versions, unlike the
/// standard library's hasher, so the draws of a seed never change.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64's finaliser: spreads FNV's weak low bits over the whole word.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieve::bridge_rag::prompts::{judge_request, JudgeContext, PromptPassage};

    fn candidates(n: usize) -> Vec<PromptPassage> {
        (0..n).map(|i| PromptPassage { title: format!("T{i}"), text: format!("text of passage {i}") }).collect()
    }

    fn judge(p: f64) -> SimulatedJudge {
        let gold = vec![("Q?".to_string(), vec![("T0".to_string(), "text of passage 0".to_string())])];
        SimulatedJudge::new(p, DEFAULT_SEED, gold, None).unwrap()
    }

    fn scores(j: &SimulatedJudge, n: usize) -> Vec<u64> {
        let request = judge_request("Q?", JudgeContext::QuestionOnly, &candidates(n), 10, 100);
        let text = j.chat(&request).unwrap().text;
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v.as_array().unwrap().iter().map(|x| x["score"].as_u64().unwrap()).collect()
    }

    #[test]
    fn p_one_is_the_gold_and_p_zero_its_opposite() {
        assert_eq!(scores(&judge(1.0), 4), [10, 0, 0, 0]);
        assert_eq!(scores(&judge(0.0), 4), [0, 10, 10, 10]);
    }

    #[test]
    fn accuracy_follows_p_and_draws_are_shared_across_p() {
        let n = 400;
        let (lo, hi) = (scores(&judge(0.6), n), scores(&judge(0.8), n));
        let correct = |s: &[u64]| s.iter().enumerate().filter(|&(i, &x)| (i == 0) == (x == 10)).count();
        let (c_lo, c_hi) = (correct(&lo), correct(&hi));
        // Binomial(400, p): four standard deviations is under 40.
        assert!((c_lo as f64 - 240.0).abs() < 40.0, "{c_lo}");
        assert!((c_hi as f64 - 320.0).abs() < 40.0, "{c_hi}");
        // Every verdict right at 0.6 is right at 0.8: the same draws.
        let right = |s: &[u64], i: usize| (i == 0) == (s[i] == 10);
        assert!((0..n).all(|i| !right(&lo, i) || right(&hi, i)));
    }

    #[test]
    fn other_prompts_and_unknown_questions_fail() {
        let j = judge(1.0);
        assert!(j.chat(&ChatRequest::user("hello")).is_err());
        let request = judge_request("Another?", JudgeContext::QuestionOnly, &candidates(2), 10, 100);
        assert!(j.chat(&request).is_err());
        assert!(SimulatedJudge::new(1.5, 1, Vec::new(), None).is_err());
    }

    #[test]
    fn cut_candidates_still_match_their_gold() {
        let gold = vec!["Title: a long text that goes on".to_string()];
        assert!(is_gold("Title: a long text…", &gold));
        assert!(!is_gold("Title: a long story…", &gold));
        assert!(!is_gold("Other: a long text that goes on", &gold));
    }
}
