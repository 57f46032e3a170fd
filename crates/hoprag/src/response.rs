//! What a retrieval returns to a caller: the passages, best first, with the method's
//! trace. One document for every front end: the server's `POST /v1/retrieve`, `hoprag
//! query --json` and the Python `Index.retrieve`. (With the `openapi` feature the types
//! also describe themselves for the server's OpenAPI document.)

use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::retrieve::{Retrieval, Trace};

/// The passages a method returned, best first, with its trace. `hoprag query --json`
/// prints the same document.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetrieveResponse {
    pub query: String,
    pub method: String,
    pub k: usize,
    pub passages: Vec<RankedPassage>,
    /// The method's steps, with their timings and details.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub trace: Trace,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RankedPassage {
    /// 1 for the best passage.
    pub rank: usize,
    pub id: String,
    pub title: String,
    pub text: String,
    pub score: f32,
    /// The document the passage belongs to; left out when the passage is a document of
    /// its own (its id names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    /// The passage's metadata as it was written (source, url, date, ...); left out when
    /// it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub meta: Option<crate::corpus::Meta>,
}

impl RetrieveResponse {
    pub fn new(engine: &Engine, query: String, method: String, k: usize, retrieval: Retrieval) -> Self {
        let passages = retrieval
            .hits
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let p = engine.index.passage(h.passage);
                RankedPassage {
                    rank: i + 1,
                    id: p.id.clone(),
                    title: p.title.clone(),
                    text: p.text.clone(),
                    score: h.score,
                    doc: p.doc.clone(),
                    meta: p.meta.clone(),
                }
            })
            .collect();
        RetrieveResponse { query, method, k, passages, trace: retrieval.trace }
    }
}
