//! Parameters of every method, with the defaults of the papers they come from, in one
//! place. Later issues add their methods' sections here.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::embed::EmbedderSettings;
use crate::error::{Error, Result};
use crate::fusion::RRF_K;
use crate::graph::beam::BeamParams;
use crate::graph::GraphOptions;
use crate::index::SearchKind;
use crate::llm::OpenAiChatConfig;
use crate::retrieve::{AutoLlmParams, AutoParams, Condition, PhaseGraphParams, PprMethodParams, RegimeRouterParams};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub embedder: EmbedderSettings,
    pub auto: AutoParams,
    /// What `auto_llm` runs: the best pipeline measured with an LLM.
    pub auto_llm: AutoLlmParams,
    pub hybrid: HybridParams,
    pub dense: DenseParams,
    pub graph: GraphOptions,
    pub ppr: PprMethodParams,
    pub phasegraph: PhaseGraphParams,
    pub regime_router: RegimeRouterParams,
    pub bridge_rag: BridgeRagParams,
    /// GEAR: `naive_ge`, `sync_ge` and the `gear` agent.
    pub gear: GearParams,
    /// The chat model of the LLM stages (query NER, BridgeRAG, GEAR): the
    /// OpenAI-compatible endpoint when `model` is set, else the in-process GGUF model
    /// `local` (Qwen2.5-Coder 0.5B by default). The CLI fills it from `HOPRAG_LLM_BASE_URL`,
    /// `HOPRAG_LLM_MODEL`, `HOPRAG_LLM_API_KEY` and `HOPRAG_LLM_LOCAL`.
    pub llm: OpenAiChatConfig,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct HybridParams {
    /// RRF constant (k = 60, Cormack et al. 2009).
    pub rrf_k: f32,
    /// How deep each list is read before fusion.
    pub depth: usize,
}

impl Default for HybridParams {
    fn default() -> Self {
        HybridParams { rrf_k: RRF_K, depth: 100 }
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DenseParams {
    /// Scan every vector even where the index has an HNSW graph.
    pub exact: bool,
}

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

/// How GEAR's score(q, T) embeds a sequence of triples T.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SequenceScoring {
    /// The normalised token-weighted sum of the triples' stored embeddings: no model
    /// call, the same passages as `encode` on musique-train (see the README's GEAR
    /// section for the measured agreement).
    Pooled,
    /// The embedder run on the concatenated triple texts, as the paper does: hundreds
    /// of texts per query (seconds per query with MiniLM on a CPU).
    Encode,
}

/// Which ends of a triple the LLM read must be named, as written, in the passages it
/// read (or the facts it was given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Grounding {
    /// Subject and object: the read prompt's own contract ("names, dates, places or
    /// amounts written as in the passages"). A triple with one end from elsewhere was not
    /// read from these passages, however true it is.
    Both,
    /// Subject or object: tolerates a model that paraphrases one end, at the price of
    /// accepting facts about something the passages only mention.
    Either,
}

/// GEAR (graph expansion by diverse triple beam search, and the multi-step agent), with
/// the paper's defaults (appendix B.1, B.2).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct GearParams {
    /// The base retriever h_base: `bm25`, `dense` or `hybrid` (the paper's best). The
    /// same kind searches the triple index in tripleLink and passageLink.
    pub base: SearchKind,
    /// Passages the base retriever returns in `naive_ge` and `sync_ge`; 0 = as many as
    /// the caller asks for (the paper: the evaluated k, so evaluate one cutoff per run
    /// to reproduce its tables).
    pub base_k: usize,
    /// Beam width b (10).
    pub beam_size: usize,
    /// Maximum triple sequence length l (2).
    pub length: usize,
    /// Neighbours of a beam's last triple considered per step, the most query-similar
    /// (100).
    pub neighbours: usize,
    /// γ of the diversity weight exp(−min(n, γ)/γ); unset = 2b.
    pub gamma: Option<f32>,
    /// Diverse beam search; off = plain beam search (the paper's Table 4 ablation).
    pub diversity: bool,
    pub scoring: SequenceScoring,
    /// RRF constant of Eq. 3, 9 and 10.
    pub rrf_k: f32,
    /// Maximum iterations of the `gear` agent: 4 is the paper's setting for MuSiQue
    /// (up to 4 hops); it uses 2 for HotpotQA and 2WikiMultiHopQA.
    pub max_steps: usize,
    /// Passages the agent's base retriever returns per iteration, and passages read
    /// into the gist memory per iteration (10, matching IRCoT).
    pub round_passages: usize,
    /// Cap on the length of each LLM answer.
    pub max_tokens: u32,
    /// Which ends of a read triple must be named in the passages read (or the gist
    /// memory); the others are dropped and counted as `ungrounded`.
    pub grounding: Grounding,
    /// Refuse a rewritten query none of whose names occurs in the question, the gist
    /// memory or the stated gap (the rewrite prompt's only inputs): it asks about
    /// something the agent never read, so its round would serve another question. The
    /// refusal is counted and the agent stops, as with no next query.
    pub ground_rewrites: bool,
}

impl Default for GearParams {
    fn default() -> Self {
        GearParams {
            base: SearchKind::Hybrid,
            base_k: 0,
            beam_size: 10,
            length: 2,
            neighbours: 100,
            gamma: None,
            diversity: true,
            scoring: SequenceScoring::Pooled,
            rrf_k: RRF_K,
            max_steps: 4,
            round_passages: 10,
            max_tokens: 512,
            grounding: Grounding::Both,
            ground_rewrites: true,
        }
    }
}

impl GearParams {
    pub fn beam(&self) -> BeamParams {
        BeamParams {
            beam_size: self.beam_size,
            length: self.length,
            neighbours: self.neighbours,
            gamma: self.gamma.unwrap_or(2.0 * self.beam_size as f32),
            diversity: self.diversity,
        }
    }
}

/// A copy of `value` with the dotted paths (e.g. `phasegraph.fusion.alpha`) set: the
/// mechanism behind `--set` and per-request options. A path that names no existing
/// field is an error naming it. Fields that are not serialised (API keys) come back at
/// their defaults; [`with_settings`] restores them
/// for a [`Config`].
pub fn set_paths<T: Serialize + DeserializeOwned>(value: &T, settings: &[(String, Value)]) -> Result<T> {
    let mut v = serde_json::to_value(value).map_err(|e| Error::Config(e.to_string()))?;
    for (path, value) in settings {
        let (parent, key) = path.rsplit_once('.').unwrap_or(("", path));
        let slot =
            if parent.is_empty() { Some(&mut v) } else { parent.split('.').try_fold(&mut v, |v, k| v.get_mut(k)) };
        match slot.and_then(Value::as_object_mut) {
            Some(obj) if obj.contains_key(key) => {
                obj.insert(key.to_string(), value.clone());
            }
            _ => return Err(Error::Config(format!("no setting {path:?}"))),
        }
        // Checked one at a time so that the error names the path with the bad value.
        if let Err(e) = T::deserialize(&v) {
            return Err(Error::Config(format!("invalid value {value} for {path}: {e}")));
        }
    }
    serde_json::from_value(v).map_err(|e| Error::Config(format!("invalid setting: {e}")))
}

/// The configuration section holding a method's parameters (methods that share a
/// paper share its section).
pub fn config_section(method: &str) -> &str {
    match method {
        "naive_ge" | "sync_ge" | "gear" => "gear",
        "bridge_rag_a" | "bridge_rag_b" => "bridge_rag",
        other => other,
    }
}

/// Resolves a parameter name to a dotted path in the configuration: a full path is kept,
/// a dotted path under the method's section (`link.facts` for `ppr`, as the parameter
/// list in errors names them) gets the section in front, and a bare name must match
/// exactly one leaf under the section.
pub fn resolve_param(config: &Value, method: &str, name: &str) -> Result<String> {
    let method = config_section(method);
    if name.contains('.') {
        return [name.to_string(), format!("{method}.{name}")]
            .into_iter()
            .find(|path| get(config, path).is_some())
            .ok_or_else(|| Error::Config(format!("no setting {name:?}")));
    }
    let mut found = Vec::new();
    if let Some(section) = config.get(method) {
        leaves(section, method.to_string(), &mut found);
    }
    let matches: Vec<&String> = found.iter().filter(|p| p.rsplit('.').next() == Some(name)).collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(Error::Config(format!(
            "method {method} has no parameter {name:?}; its parameters: {}",
            found.iter().map(|p| p.trim_start_matches(&format!("{method}."))).collect::<Vec<_>>().join(", ")
        ))),
        many => Err(Error::Config(format!(
            "parameter {name:?} is ambiguous: {}",
            many.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

fn leaves(v: &Value, prefix: String, out: &mut Vec<String>) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, x) in map {
                leaves(x, format!("{prefix}.{k}"), out);
            }
        }
        _ => out.push(prefix),
    }
}

fn get<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, key| v.get(key))
}

/// A copy of `config` with the dotted paths set to the values, validated
/// ([`Config::validate`]).
pub fn with_settings(config: &Config, setting: &[(String, Value)]) -> Result<Config> {
    let mut out: Config = crate::config::set_paths(config, setting)?;
    // API keys are never serialised, so the round trip drops them: carry them over.
    out.llm.api_key = config.llm.api_key.clone();
    out.embedder.openai.api_key = config.embedder.openai.api_key.clone();
    out.validate()?;
    Ok(out)
}

/// Counts and sizes that must be at least 1: 0 would make a method return nothing, or
/// index past the end of a list.
const AT_LEAST_ONE: &[&str] = &[
    "hybrid.depth",
    "gear.beam_size",
    "gear.length",
    "gear.neighbours",
    "gear.max_steps",
    "gear.round_passages",
    "bridge_rag.k1",
    "bridge_rag.svo_queries",
    "bridge_rag.svo_k",
    "bridge_rag.svo_keep",
    "bridge_rag.entity_k",
    "bridge_rag.pool",
    "llm.max_concurrency",
    "llm.timeout_secs",
];

/// Fusion weights, in [0, 1].
const UNIT_INTERVAL: &[&str] = &["bridge_rag.alpha"];

/// Constants that must be positive.
const POSITIVE: &[&str] = &["hybrid.rrf_k", "gear.rrf_k"];

impl Config {
    /// Checks every value, with an error naming the key: numbers that are not finite
    /// (anywhere in the configuration), and the counts, weights and constants listed
    /// above. Run on every configuration built from a file, the environment or `--set`.
    pub fn validate(&self) -> Result<()> {
        let v = serde_json::to_value(self).map_err(|e| Error::Config(e.to_string()))?;
        let defaults = serde_json::to_value(Config::default()).map_err(|e| Error::Config(e.to_string()))?;
        // serde_json writes NaN and infinities as null: a null where the default holds
        // a number is one of them.
        let mut numbers = Vec::new();
        number_paths(&defaults, String::new(), &mut numbers);
        for path in &numbers {
            if get(&v, path).is_some_and(Value::is_null) {
                return Err(Error::Config(format!("{path}: must be a finite number")));
            }
        }
        let num = |path: &str| get(&v, path).and_then(Value::as_f64);
        for &path in AT_LEAST_ONE {
            if num(path).is_some_and(|x| x < 1.0) {
                return Err(Error::Config(format!("{path}: must be at least 1, got {}", get(&v, path).unwrap())));
            }
        }
        for &path in UNIT_INTERVAL {
            if num(path).is_some_and(|x| !(0.0..=1.0).contains(&x)) {
                return Err(Error::Config(format!("{path}: must be between 0 and 1, got {}", get(&v, path).unwrap())));
            }
        }
        for &path in POSITIVE {
            if num(path).is_some_and(|x| x <= 0.0) {
                return Err(Error::Config(format!("{path}: must be positive, got {}", get(&v, path).unwrap())));
            }
        }
        if let Some(gamma) = self.gear.gamma {
            if !(gamma.is_finite() && gamma > 0.0) {
                return Err(Error::Config(format!("gear.gamma: must be positive, got {gamma}")));
            }
        }
        Ok(())
    }
}

fn number_paths(v: &Value, prefix: String, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                number_paths(x, path, out);
            }
        }
        Value::Number(_) => out.push(prefix),
        _ => {}
    }
}

#[cfg(test)]
mod validation_tests {
    use super::*;

    #[test]
    fn every_rule_names_a_real_key() {
        let v = serde_json::to_value(Config::default()).unwrap();
        for path in AT_LEAST_ONE.iter().chain(UNIT_INTERVAL).chain(POSITIVE) {
            assert!(get(&v, path).is_some_and(Value::is_number), "{path}");
        }
        Config::default().validate().unwrap();
    }

    #[test]
    fn bad_values_are_rejected_naming_the_key() {
        let err = |path: &str, value: Value| {
            with_settings(&Config::default(), &[(path.to_string(), value)]).unwrap_err().to_string()
        };
        assert!(err("gear.neighbours", 0.into()).contains("gear.neighbours: must be at least 1"));
        assert!(err("bridge_rag.alpha", 1.5.into()).contains("bridge_rag.alpha"));
        assert!(err("hybrid.rrf_k", 0.into()).contains("hybrid.rrf_k"));
        let mut config = Config::default();
        config.hybrid.rrf_k = f32::NAN;
        assert!(config.validate().unwrap_err().to_string().contains("hybrid.rrf_k: must be a finite number"));
    }
}
