//! Retrieval methods: the [`Retriever`] seam and one file per method.

mod bm25;
mod dense;
mod hybrid;
mod phasegraph;
mod ppr;

pub use bm25::Bm25;
pub use dense::Dense;
pub use hybrid::Hybrid;
pub use phasegraph::{PhaseGraph, PhaseGraphParams};
pub use ppr::{PassageScoring, Ppr, PprMethodParams};

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::corpus::PassageIdx;
use crate::error::Result;

/// A question to answer, with its embedding when the caller has already computed it
/// (evaluation embeds all questions in one batch).
#[derive(Debug, Clone)]
pub struct Query {
    pub text: String,
    pub embedding: Option<Arc<Vec<f32>>>,
}

impl Query {
    pub fn new(text: impl Into<String>) -> Self {
        Query { text: text.into(), embedding: None }
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
    #[serde(skip_serializing_if = "Value::is_null")]
    pub detail: Value,
}

impl Trace {
    /// Runs `f` as a named step, recording its duration and the detail it returns.
    pub fn step<T>(&mut self, name: &str, f: impl FnOnce() -> Result<(T, Value)>) -> Result<T> {
        let t = Instant::now();
        let (out, detail) = f()?;
        self.steps.push(TraceStep { name: name.to_string(), micros: t.elapsed().as_micros() as u64, detail });
        Ok(out)
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
}

pub(crate) fn hits(list: Vec<(PassageIdx, f32)>) -> Vec<Hit> {
    list.into_iter().map(|(passage, score)| Hit { passage, score }).collect()
}

/// Trace detail for a ranked list: the first few passage indices and scores.
pub(crate) fn list_detail(list: &[(PassageIdx, f32)]) -> Value {
    serde_json::json!(list.iter().take(10).map(|(p, s)| serde_json::json!([p, s])).collect::<Vec<_>>())
}
