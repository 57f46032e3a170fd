//! `auto` and `auto_llm`: the pipeline that measured best on the shared dev data (see
//! the README's "Choosing auto"), without and with an LLM, picked per index by what the
//! index holds: no entity graph, a graph from the LLM-free heuristic triples, or one
//! from an LLM's triples (imported OpenIE or `--extract llm`). Which method each case
//! runs is configuration, so that `hoprag tune --method auto --grid with_graph=...` can
//! re-check the choice on new data (or with another LLM).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::registry::{self, GraphKind, GraphUse, LlmUse, MethodSections, MethodSpec, Resources, TraceKind};
use super::{dense, ppr, Query, Retrieval, Retriever, TraceStep};
use crate::error::{Error, Result};
use crate::filter::Selection;
use crate::fusion::DenseGuard;
use crate::graph::walk::WalkExplanation;

/// The best LLM-free pipeline measured for the index at hand.
pub const AUTO: MethodSpec = MethodSpec {
    name: "auto",
    section: Some("auto"),
    summary: "the best LLM-free pipeline measured for the kind of index: ppr behind a dense guard on an index \
              with an entity graph, dense without one (section auto)",
    graph: GraphUse::IfPresent,
    llm: LlmUse::AsChosen(|s, graph| s.auto.choice(graph)),
    trace: TraceKind::Choice,
    build: |s, r| build(&AUTO, &s.auto, s, r),
};

/// The best pipeline measured with an LLM; `auto`'s choice until one beats it.
pub const AUTO_LLM: MethodSpec = MethodSpec {
    name: "auto_llm",
    section: Some("auto_llm"),
    summary: "the best pipeline measured with an LLM (section auto_llm; re-choose with `hoprag tune --method \
              auto_llm` on your endpoint)",
    graph: GraphUse::IfPresent,
    llm: LlmUse::AsChosen(|s, graph| s.auto_llm.choice(graph)),
    trace: TraceKind::Choice,
    build: |s, r| build(&AUTO_LLM, &s.auto_llm, s, r),
};

/// `params`' choice for the index's kind of graph, run with its dense guard.
fn build(
    spec: &'static MethodSpec,
    params: &AutoParams,
    sections: &MethodSections,
    r: &dyn Resources,
) -> Result<Box<dyn Retriever>> {
    let graph = r.graph_kind();
    let choice = params.choice(graph);
    let (chosen, _) = registry::parse_method_spec(choice)?;
    if registry::find(chosen).is_some_and(|m| matches!(m.llm, LlmUse::AsChosen(_))) {
        return Err(Error::Config(format!("{} cannot choose itself or another auto method ({choice})", spec.name)));
    }
    // The choice runs with auto's dense guard (it only affects ppr).
    let mut sections = sections.clone();
    sections.ppr.dense_guard = params.dense_guard_for(&r.index().manifest.embedder.id);
    // The graph loads here, not in the engine made for the choice, so that the two
    // share it and what it computes on first use.
    if graph != GraphKind::None {
        r.graph()?;
    }
    Ok(Box::new(Auto::new(spec.name, r.method_with(choice, &sections)?, graph)))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AutoParams {
    /// Method for indexes whose entity graph comes from an LLM's triples.
    pub with_graph: String,
    /// Method for indexes whose entity graph comes from the heuristic extractor.
    pub with_heuristic_graph: String,
    /// Method for indexes without a graph.
    pub without_graph: String,
    /// The dense guard `auto` runs `ppr` with (`ppr.dense_guard`, off in `ppr` itself):
    /// up to `max` (2) dense passages whose score is within `gap` (0.5) of the best,
    /// on the scale of the dense top `depth` (50), go before the walk's ranking. Chosen
    /// on the tune halves of all six shared sets (grid max 1, 2, 3, 5 × gap 0.1, 0.25,
    /// 0.5): the setting whose worst set is furthest above both dense and `ppr` at R@5
    /// (it must lose to neither, being made of them), ties by mean R@5. The previous
    /// choice (max 5, gap 0.25, from two 21–25-question tune halves) fell 1.2 below
    /// `ppr` on hotpotqa-dev's tune half. Evidence in docs/seed-methods.md.
    pub dense_guard: DenseGuard,
    /// The dense guard for indexes whose embedder id is a key here or starts with the key
    /// and `:` (its settings), in place of `dense_guard`: how much of the top the dense
    /// list earns depends on how good it is. `embeddinggemma`: max 5, gap 0.25, chosen
    /// on the tune halves of all six shared sets as `dense_guard` was
    /// (docs/embeddinggemma.md, "auto for EmbeddingGemma").
    pub dense_guard_by_embedder: BTreeMap<String, DenseGuard>,
}

impl AutoParams {
    /// The dense guard for an index embedded by `embedder` (its id).
    pub fn dense_guard_for(&self, embedder: &str) -> DenseGuard {
        let applies = |key: &str| embedder == key || embedder.strip_prefix(key).is_some_and(|s| s.starts_with(':'));
        self.dense_guard_by_embedder.iter().find(|(key, _)| applies(key)).map_or(self.dense_guard, |(_, guard)| *guard)
    }

    /// The method for an index with this kind of graph.
    pub fn choice(&self, graph: GraphKind) -> &str {
        match graph {
            GraphKind::Llm => &self.with_graph,
            GraphKind::Heuristic => &self.with_heuristic_graph,
            GraphKind::None => &self.without_graph,
        }
    }
}

impl Default for AutoParams {
    fn default() -> Self {
        AutoParams {
            with_graph: ppr::SPEC.name.into(),
            with_heuristic_graph: ppr::SPEC.name.into(),
            without_graph: dense::SPEC.name.into(),
            dense_guard: DenseGuard { max: 2, gap: 0.5, depth: 50 },
            dense_guard_by_embedder: BTreeMap::from([(
                "embeddinggemma".to_string(),
                DenseGuard { max: 5, gap: 0.25, depth: 50 },
            )]),
        }
    }
}

/// Why `auto` chose as it did, for its trace.
fn because(graph: GraphKind) -> &'static str {
    match graph {
        GraphKind::None => "the index has no entity graph",
        GraphKind::Heuristic => "the index has an entity graph from heuristic (LLM-free) triples",
        GraphKind::Llm => "the index has an entity graph from an LLM's triples",
    }
}

pub struct Auto {
    name: &'static str,
    inner: Box<dyn Retriever>,
    reason: &'static str,
}

impl Auto {
    /// `name`: `auto` or `auto_llm`.
    pub fn new(name: &'static str, inner: Box<dyn Retriever>, graph: GraphKind) -> Self {
        Auto { name, inner, reason: because(graph) }
    }
}

impl Auto {
    /// The choice, as the first step of the trace.
    fn record_choice(&self, r: &mut Retrieval) {
        let choice = TraceStep {
            name: self.name.into(),
            micros: 0,
            detail: json!({"method": self.inner.name(), "because": self.reason}),
            llm: None,
        };
        r.trace.steps.insert(0, choice);
    }
}

impl Retriever for Auto {
    fn name(&self) -> &str {
        self.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let mut r = self.inner.retrieve(query, k)?;
        self.record_choice(&mut r);
        Ok(r)
    }

    fn retrieve_within(&self, query: &Query, k: usize, selection: &Selection) -> Option<Result<Retrieval>> {
        let within = self.inner.retrieve_within(query, k, selection)?;
        Some(within.map(|mut r| {
            self.record_choice(&mut r);
            r
        }))
    }

    /// The chosen method's explanation: the walk `auto` made is its choice's.
    fn explain(&self, query: &Query, k: usize) -> Result<Option<(Retrieval, WalkExplanation)>> {
        let explained = self.inner.explain(query, k)?;
        Ok(explained.map(|(mut r, explanation)| {
            self.record_choice(&mut r);
            (r, explanation)
        }))
    }

    fn concurrency(&self) -> Option<usize> {
        self.inner.concurrency()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_follows_the_embedder_and_its_settings() {
        let p = AutoParams::default();
        assert_eq!(p.dense_guard_for("minilm"), p.dense_guard);
        let gemma = p.dense_guard_by_embedder["embeddinggemma"];
        assert_ne!(gemma, p.dense_guard);
        assert_eq!(p.dense_guard_for("embeddinggemma"), gemma);
        assert_eq!(p.dense_guard_for("embeddinggemma:query=retrieval,dim=256"), gemma);
        // A longer name that merely starts like a key is another model.
        assert_eq!(p.dense_guard_for("embeddinggemmax"), p.dense_guard);
    }
}
