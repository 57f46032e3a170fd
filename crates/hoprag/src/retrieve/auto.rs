//! `auto` and `auto_llm`: the pipeline that measured best on the shared dev data (see
//! the README's "Choosing auto"), without and with an LLM, picked per index: a graph
//! method where the index has an entity graph, a graph-free one otherwise. Which two is
//! configuration, so that `hoprag tune --method auto --grid with_graph=...` can re-check
//! the choice on new data (or with another LLM).

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Query, Retrieval, Retriever, TraceStep};
use crate::error::Result;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AutoParams {
    /// Method for indexes with an entity graph.
    pub with_graph: String,
    /// Method for indexes without one.
    pub without_graph: String,
}

impl AutoParams {
    /// The method for an index with or without an entity graph.
    pub fn choice(&self, has_graph: bool) -> &str {
        if has_graph {
            &self.with_graph
        } else {
            &self.without_graph
        }
    }
}

impl Default for AutoParams {
    fn default() -> Self {
        AutoParams { with_graph: "phasegraph".into(), without_graph: "dense".into() }
    }
}

/// The `auto_llm` section: [`AutoParams`] with the choices measured with an LLM.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AutoLlmParams(pub AutoParams);

impl Default for AutoLlmParams {
    fn default() -> Self {
        AutoLlmParams(AutoParams { with_graph: "phasegraph".into(), without_graph: "dense".into() })
    }
}

pub struct Auto {
    name: &'static str,
    inner: Box<dyn Retriever>,
    reason: &'static str,
}

impl Auto {
    /// `name`: `auto` or `auto_llm`.
    pub fn new(name: &'static str, inner: Box<dyn Retriever>, has_graph: bool) -> Self {
        let reason = if has_graph { "the index has an entity graph" } else { "the index has no entity graph" };
        Auto { name, inner, reason }
    }
}

impl Retriever for Auto {
    fn name(&self) -> &str {
        self.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let mut r = self.inner.retrieve(query, k)?;
        let choice = TraceStep {
            name: self.name.into(),
            micros: 0,
            detail: json!({"method": self.inner.name(), "because": self.reason}),
            llm: None,
        };
        r.trace.steps.insert(0, choice);
        Ok(r)
    }

    fn concurrency(&self) -> Option<usize> {
        self.inner.concurrency()
    }
}
