//! RegimeRouter (the paper's Algorithm 1): per query, choose between ranking the dense
//! pool by the question alone (Q) and by the question plus the bridge's relation-bearing
//! sentence (Union), from surface-text features and no LLM.
//!
//! 1. bridge b = top-1 dense passage; pool = dense top-50;
//! 2. B_rel = the sentence of b the selector picks;
//! 3. P(Union) from the router's five features;
//! 4. Union if P ≥ τ: score(c) = (1 − α)·cos(q, c) + α·cos(B_rel, c), else cos(q, c).

pub mod model;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::embed::{Embedder, TextKind};
use crate::error::{Error, Result};
use crate::index::{Index, VectorIndex};
use crate::retrieve::dense::{dense_search, query_embedding};
use crate::retrieve::registry::{GraphUse, LlmUse, MethodSpec, TraceKind};
use crate::retrieve::{hits, list_detail, Query, Retrieval, Retriever, Trace};
use model::{next_hop, rank_of, union_ranking, RegimeModel, RouterFeatures};

/// Who decides between Q and Union.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterMode {
    /// The trained router (P(Union) ≥ threshold).
    Model,
    /// Union for every query ("always Union" in the paper's gap analysis).
    Always,
    /// Q for every query: the dense ranking of the pool.
    Never,
    /// The action that ranks the passage after the bridge better (evaluation only: reads
    /// gold).
    Oracle,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RegimeRouterParams {
    /// Dense candidate pool the method re-ranks (50, the paper's question-built pool).
    pub pool: usize,
    /// Weight of B_rel in Union (0.25, the paper's frozen deployment value).
    pub alpha: f32,
    /// α = clip(P(Union) · 0.5, 0.1, 0.5) instead of the fixed value (paper's ablation).
    pub p_weighted_alpha: bool,
    /// τ: route to Union when P(Union) ≥ τ (0.5, the paper's), unless
    /// `model_threshold` applies.
    pub threshold: f64,
    /// Use the threshold the model chose from its out-of-fold outcomes instead of
    /// `threshold` (true): routing only where cross-fitting saw Union win more top-5
    /// places than it lost, and nowhere (dense) when it never did. Models without a
    /// choice use `threshold`.
    pub model_threshold: bool,
    /// Route with the built-in model (trained on 2Wiki) on any corpus. Off by default:
    /// zero-shot, the 2Wiki router lost to dense on HotpotQA and did not beat it on
    /// MuSiQue (docs/seed-methods.md), so without a model trained on the index's own
    /// corpus (`hoprag train-router` writes one beside the index, or `--router`) the
    /// method keeps the dense ranking. On reproduces the paper's zero-shot transfer.
    pub zero_shot: bool,
    pub router: RouterMode,
    /// Router model file; none = the index's `router.json`, else the built-in model.
    pub model: Option<std::path::PathBuf>,
}

impl Default for RegimeRouterParams {
    fn default() -> Self {
        RegimeRouterParams {
            pool: 50,
            alpha: 0.25,
            p_weighted_alpha: false,
            threshold: 0.5,
            model_threshold: true,
            zero_shot: false,
            router: RouterMode::Model,
            model: None,
        }
    }
}

impl RegimeRouterParams {
    /// The α of a query routed to Union with probability `p`.
    pub fn alpha_for(&self, p: f64) -> f32 {
        if self.p_weighted_alpha {
            (p * 0.5).clamp(0.1, 0.5) as f32
        } else {
            self.alpha
        }
    }
}

pub const SPEC: MethodSpec = MethodSpec {
    name: "regime_router",
    section: Some("regime_router"),
    summary: "RegimeRouter: per query, dense alone or dense plus the bridge passage's relation sentence, \
              chosen by a logistic router on surface-text features (no LLM)",
    graph: GraphUse::No,
    llm: LlmUse::Never,
    trace: TraceKind::Router,
    build: |s, r| {
        let params = s.regime_router.clone();
        let model = RegimeModel::resolve(params.model.as_deref(), r.folder())?;
        Ok(Box::new(RegimeRouter::new(r.index(), r.vectors(), r.embedder(), Arc::new(model), params)))
    },
};

pub struct RegimeRouter {
    index: Arc<Index>,
    vectors: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    model: Arc<RegimeModel>,
    params: RegimeRouterParams,
}

impl RegimeRouter {
    pub fn new(
        index: Arc<Index>,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        model: Arc<RegimeModel>,
        params: RegimeRouterParams,
    ) -> Self {
        RegimeRouter { index, vectors, embedder, model, params }
    }
}

impl RegimeRouter {
    /// τ for the trained router: above any probability for the built-in model unless
    /// `zero_shot`; the model's no-regret choice where asked for and made (above any
    /// probability when it chose to route nothing); else the configured one.
    fn threshold(&self) -> f64 {
        if self.model.built_in && !self.params.zero_shot {
            return f64::INFINITY;
        }
        let r = &self.model.report;
        match (self.params.model_threshold, r.out_of_fold_by_threshold.is_empty()) {
            (true, false) => r.selected_threshold.unwrap_or(f64::INFINITY),
            _ => self.params.threshold,
        }
    }
}

impl Retriever for RegimeRouter {
    fn name(&self) -> &str {
        SPEC.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let p = &self.params;
        let mut trace = Trace::default();
        let q = query_embedding(self.embedder.as_ref(), query, &mut trace)?;
        let pool = dense_search(self.vectors.as_ref(), &q, p.pool.max(k), &mut trace)?;
        let Some(&(bridge, _)) = pool.first() else {
            return Ok(Retrieval { hits: Vec::new(), trace });
        };
        let bridge_text = &self.index.passage(bridge).text;

        let (selection, probability, source) = trace.step("route", || {
            let chosen = self.model.for_question(&query.text);
            let selection = chosen.classifiers.select(&query.text, bridge_text);
            let b_rel = selection.as_ref().map_or("", |s| s.sentence.as_str());
            let features = RouterFeatures::compute(&query.text, b_rel, bridge_text);
            let probability = chosen.classifiers.route(&features);
            let detail = json!({"bridge": self.index.passage(bridge).id, "b_rel": selection, "features": features,
                                "p_union": probability, "model": chosen.source});
            Ok(((selection, probability, chosen.source), detail))
        })?;
        // An empty bridge has no sentence to add: Q is the only action.
        let Some(selection) = selection else {
            let mut list = pool;
            list.truncate(k);
            return Ok(Retrieval { hits: hits(list), trace });
        };

        let threshold = self.threshold();
        let decided = match p.router {
            RouterMode::Model => Some(probability >= threshold),
            RouterMode::Always => Some(true),
            RouterMode::Never => Some(false),
            RouterMode::Oracle => None,
        };
        let alpha = p.alpha_for(probability);
        let union = if decided == Some(false) {
            None
        } else {
            let b = trace.step("embed B_rel", || {
                let v = self.embedder.embed_one(&selection.sentence, TextKind::Query)?;
                Ok((v, json!({"sentence": selection.sentence})))
            })?;
            Some(union_ranking(&pool, &b, alpha, self.index.vectors()))
        };
        let use_union = match decided {
            Some(d) => d,
            None => {
                let gold = query.gold.as_ref().ok_or_else(|| {
                    Error::Config("the oracle router reads gold passages: only evaluation can run it".into())
                })?;
                // The passage after the bridge, or the first gold passage when the bridge is
                // not gold (as under `--hop1-correct`, where hop 2 is the only gold).
                let target = match gold.passages.contains(&bridge) {
                    true => next_hop(&gold.passages, gold.ordered, bridge),
                    false => gold.passages.first().copied(),
                };
                target.is_some_and(|t| rank_of(union.as_deref().unwrap_or(&[]), t) < rank_of(&pool, t))
            }
        };
        let mut list = trace.step("rank", || {
            let action = if use_union { "union" } else { "q" };
            let list = if use_union { union.unwrap_or_default() } else { pool };
            let d = json!({"action": action, "router": p.router, "alpha": if use_union { Some(alpha) } else { None },
                           "threshold": threshold, "model": source, "top": list_detail(&list)});
            Ok((list, d))
        })?;
        list.truncate(k);
        Ok(Retrieval { hits: hits(list), trace })
    }
}
