//! `auto`: the LLM-free pipeline that measured best on the shared dev data (see the
//! README's "Choosing auto"), picked per index: a graph method where the index has an
//! entity graph, a graph-free one otherwise. Which two is configuration, so that
//! `hoprag tune --method auto --grid with_graph=...` can re-check the choice on new data.

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

impl Default for AutoParams {
    fn default() -> Self {
        AutoParams { with_graph: "phasegraph".into(), without_graph: "dense".into() }
    }
}

pub struct Auto {
    inner: Box<dyn Retriever>,
    reason: &'static str,
}

impl Auto {
    pub fn new(inner: Box<dyn Retriever>, has_graph: bool) -> Self {
        let reason = if has_graph { "the index has an entity graph" } else { "the index has no entity graph" };
        Auto { inner, reason }
    }
}

impl Retriever for Auto {
    fn name(&self) -> &str {
        "auto"
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let mut r = self.inner.retrieve(query, k)?;
        let choice = TraceStep {
            name: "auto".into(),
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
