//! Retrieval methods: the [`Retriever`] seam, one file (or folder) per method, and the
//! [`registry`] that lists them.

pub mod auto;
pub mod bm25;
pub mod bridge_rag;
pub mod dense;
pub mod fallback;
pub mod gear;
pub mod hybrid;
pub mod ordered;
pub mod phasegraph;
pub mod ppr;
pub mod regime_router;
pub mod registry;

pub use auto::{Auto, AutoParams};
pub use bm25::Bm25;
pub use bridge_rag::{BridgeRag, BridgeRagParams, Condition, DecisionRecord};
pub use dense::{Dense, DenseParams};
pub use fallback::{WithFallback, FALLBACK_STEP};
pub use gear::{Gear, GearParams, NaiveGe, SyncGe};
pub use hybrid::{Hybrid, HybridParams};
pub use phasegraph::{PhaseGraph, PhaseGraphParams};
pub use ppr::{PassageScoring, Ppr, PprMethodParams};
pub use regime_router::{RegimeRouter, RegimeRouterParams, RouterMode};
pub use registry::{GraphKind, GraphUse, MethodSpec};

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::corpus::PassageIdx;
use crate::error::Result;
use crate::graph::walk::WalkExplanation;
use crate::llm::{Llm, LlmStatsSnapshot, Meter};

/// The method `query` and `serve` use when none is named: the best LLM-free pipeline
/// measured (docs/results.md, "Choosing auto").
pub const DEFAULT_METHOD: &str = auto::AUTO.name;

/// Every method, in the order `hoprag methods` lists them: the registry's table.
pub static METHODS: &[&MethodSpec] = &[
    &auto::AUTO,
    &auto::AUTO_LLM,
    &bm25::SPEC,
    &dense::SPEC,
    &hybrid::SPEC,
    &ppr::SPEC,
    &phasegraph::SPEC,
    &regime_router::SPEC,
    &bridge_rag::SPEC,
    &bridge_rag::SPEC_A,
    &bridge_rag::SPEC_B,
    &gear::NAIVE_GE,
    &gear::SYNC_GE,
    &gear::GEAR,
];

/// The parameters of every method, one section each, as the configuration file and
/// `--set` name them (`[hybrid]`, `ppr.link.facts`); composed into the configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MethodSections {
    pub auto: AutoParams,
    /// What `auto_llm` runs: the best pipeline measured with an LLM.
    pub auto_llm: AutoParams,
    pub hybrid: HybridParams,
    pub dense: DenseParams,
    pub ppr: PprMethodParams,
    pub phasegraph: PhaseGraphParams,
    pub regime_router: RegimeRouterParams,
    pub bridge_rag: BridgeRagParams,
    /// GEAR: `naive_ge`, `sync_ge` and the `gear` agent.
    pub gear: GearParams,
}

/// A question to answer, with its embedding when the caller has already computed it
/// (evaluation embeds all questions in one batch).
#[derive(Debug, Clone)]
pub struct Query {
    pub text: String,
    pub embedding: Option<Arc<Vec<f32>>>,
    /// The question's vector in the graph's space, where the graph has an embedder of its
    /// own (computed when needed if absent; see [`dense::graph_query_embedding`]).
    pub graph_embedding: Option<Arc<Vec<f32>>>,
    /// The question's gold passages, which evaluation attaches for oracle analyses
    /// (e.g. RegimeRouter's oracle router). No other method may read them.
    pub gold: Option<Arc<Gold>>,
    /// The passages the answer may hold (a metadata filter's); all when `None`. Only
    /// [`ordered::Ordered`], around every method, reads it: the methods themselves rank
    /// the whole index.
    pub filter: Option<Arc<crate::filter::Selection>>,
}

/// Gold passages of an evaluation question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gold {
    pub passages: Vec<PassageIdx>,
    /// Whether `passages` are in hop order.
    pub ordered: bool,
}

impl Query {
    pub fn new(text: impl Into<String>) -> Self {
        Query { text: text.into(), embedding: None, graph_embedding: None, gold: None, filter: None }
    }

    pub fn with_embedding(text: impl Into<String>, embedding: Vec<f32>) -> Self {
        Query { embedding: Some(Arc::new(embedding)), ..Query::new(text) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub passage: PassageIdx,
    pub score: f32,
}

/// Why a method returned what it returned: named steps with their details and timings.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Trace {
    pub steps: Vec<TraceStep>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceStep {
    pub name: String,
    pub micros: u64,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub detail: Value,
    /// What the step's LLM calls cost, for steps that made any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmStatsSnapshot>,
}

impl Trace {
    /// Runs `f` as a named step, recording its duration and the detail it returns.
    pub fn step<T>(&mut self, name: &str, f: impl FnOnce() -> Result<(T, Value)>) -> Result<T> {
        let t = Instant::now();
        let (out, detail) = f()?;
        self.steps.push(TraceStep {
            name: name.to_string(),
            micros: t.elapsed().as_micros() as u64,
            detail,
            llm: None,
        });
        Ok(out)
    }

    /// Like [`Trace::step`], for a step that asks `llm` something: `f` gets a meter over
    /// it, and the step records what the calls made through that meter cost.
    pub fn llm_step<T>(
        &mut self,
        name: &str,
        llm: &dyn Llm,
        f: impl FnOnce(&Meter) -> Result<(T, Value)>,
    ) -> Result<T> {
        let t = Instant::now();
        let meter = Meter::new(llm);
        let (out, detail) = f(&meter)?;
        let micros = t.elapsed().as_micros() as u64;
        self.steps.push(TraceStep { name: name.to_string(), micros, detail, llm: Some(meter.snapshot()) });
        Ok(out)
    }

    /// What every LLM call of the query cost, or none if it made none.
    pub fn llm_cost(&self) -> Option<LlmStatsSnapshot> {
        self.steps.iter().filter_map(|s| s.llm.clone()).reduce(|a, b| a + b)
    }

    /// The query was answered by the method's LLM-free fallback ranking.
    pub fn fell_back(&self) -> bool {
        self.steps.iter().any(|s| s.name == FALLBACK_STEP)
    }

    pub fn total_micros(&self) -> u64 {
        self.steps.iter().map(|s| s.micros).sum()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Retrieval {
    pub hits: Vec<Hit>,
    pub trace: Trace,
}

/// A retrieval method: query in, ranked passages and a trace out.
pub trait Retriever: Send + Sync {
    fn name(&self) -> &str;
    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval>;

    /// [`Retriever::retrieve`], with the explanation of the graph walk behind the ranking;
    /// `None` (without retrieving) for a method that walks no graph. Normal queries go
    /// through `retrieve` and pay nothing for it.
    fn explain(&self, _query: &Query, _k: usize) -> Result<Option<(Retrieval, WalkExplanation)>> {
        Ok(None)
    }

    /// The first `k` passages of this method's order that `selection` admits, where the
    /// method finds them more directly than by ranking deeper and filtering
    /// ([`ordered::Ordered`] asks here first); `None` for the general way.
    fn retrieve_within(
        &self,
        _query: &Query,
        _k: usize,
        _selection: &crate::filter::Selection,
    ) -> Option<Result<Retrieval>> {
        None
    }

    /// Queries worth running at once: a method that waits on an LLM server gains from
    /// more than one per core, one on the in-process model from just one (evaluation
    /// runs this many; `None` = one per core).
    fn concurrency(&self) -> Option<usize> {
        None
    }
}

pub(crate) fn hits(list: Vec<(PassageIdx, f32)>) -> Vec<Hit> {
    list.into_iter().map(|(passage, score)| Hit { passage, score }).collect()
}

/// `list` filled up to `k` passages from `fallback` (best first, skipping passages
/// already in `list`), for methods that can return fewer than asked.
pub(crate) fn backfill(
    mut list: Vec<(PassageIdx, f32)>,
    fallback: &[(PassageIdx, f32)],
    k: usize,
) -> Vec<(PassageIdx, f32)> {
    if list.len() >= k {
        list.truncate(k);
        return list;
    }
    let have: std::collections::HashSet<PassageIdx> = list.iter().map(|x| x.0).collect();
    // Below the list's last score, so that scores stay in rank order.
    let floor = list.last().map_or(f32::INFINITY, |x| x.1);
    let extra: Vec<PassageIdx> =
        fallback.iter().map(|x| x.0).filter(|p| !have.contains(p)).take(k - list.len()).collect();
    let n = extra.len();
    for (i, p) in extra.into_iter().enumerate() {
        let score = match floor {
            f if !f.is_finite() => (n - i) as f32,
            f if f > 0.0 => f * (n - i) as f32 / (n + 1) as f32,
            f => f - (i + 1) as f32,
        };
        list.push((p, score));
    }
    list
}

/// Trace detail for a ranked list: the first few passage indices and scores.
pub(crate) fn list_detail(list: &[(PassageIdx, f32)]) -> Value {
    serde_json::json!(list.iter().take(10).map(|(p, s)| serde_json::json!([p, s])).collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ChatRequest, ChatResponse, Usage};

    struct Fixed;

    impl Llm for Fixed {
        fn id(&self) -> &str {
            "fixed"
        }
        fn chat(&self, _: &ChatRequest) -> Result<ChatResponse> {
            let usage = Usage { prompt_tokens: 7, completion_tokens: 3 };
            Ok(ChatResponse { text: "{}".into(), usage, cached: false, retries: 0, latency_ms: 2.0 })
        }
    }

    #[test]
    fn backfill_fills_to_k_from_the_fallback_in_its_order() {
        let walked = vec![(7, 0.5), (3, 0.2)];
        let dense = [(3, 0.9), (1, 0.8), (7, 0.7), (4, 0.6), (9, 0.5)];
        let out = backfill(walked.clone(), &dense, 4);
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), vec![7, 3, 1, 4]);
        assert!(out.windows(2).all(|w| w[0].1 > w[1].1), "{out:?}");
        assert_eq!(backfill(walked.clone(), &dense, 1), vec![(7, 0.5)]);
        assert_eq!(backfill(walked, &dense, 10).len(), 5, "no more than there is");
    }

    #[test]
    fn llm_steps_record_their_own_calls_and_the_trace_adds_them_up() {
        let mut trace = Trace::default();
        trace.step("plain", || Ok(((), Value::Null))).unwrap();
        assert!(trace.llm_cost().is_none(), "no LLM step yet");
        trace
            .llm_step("one call", &Fixed, |llm| {
                llm.chat(&ChatRequest::user("a"))?;
                Ok(((), Value::Null))
            })
            .unwrap();
        trace
            .llm_step("two calls", &Fixed, |llm| {
                llm.chat(&ChatRequest::user("b"))?;
                llm.chat(&ChatRequest::user("c"))?;
                Ok(((), Value::Null))
            })
            .unwrap();
        assert!(trace.steps[0].llm.is_none());
        assert_eq!(trace.steps[1].llm.as_ref().unwrap().calls, 1);
        assert_eq!(trace.steps[2].llm.as_ref().unwrap().calls, 2);
        let total = trace.llm_cost().unwrap();
        assert_eq!(total.calls, 3);
        assert_eq!(total.tokens(), Usage { prompt_tokens: 21, completion_tokens: 9 });
        assert!((total.latency_ms - 6.0).abs() < 1e-9);
    }
}
