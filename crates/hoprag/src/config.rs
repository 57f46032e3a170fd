//! Parameters of every method, with the defaults of the papers they come from, in one
//! place. Later issues add their methods' sections here.

use serde::{Deserialize, Serialize};

use crate::embed::EmbedderSettings;
use crate::fusion::RRF_K;
use crate::graph::GraphOptions;
use crate::llm::OpenAiChatConfig;
use crate::retrieve::{PhaseGraphParams, PprMethodParams};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub embedder: EmbedderSettings,
    pub hybrid: HybridParams,
    pub dense: DenseParams,
    pub graph: GraphOptions,
    pub ppr: PprMethodParams,
    pub phasegraph: PhaseGraphParams,
    /// The chat model of the LLM stages (query NER): the OpenAI-compatible endpoint
    /// when `model` is set, else the in-process GGUF model `local` (SmolLM2 by default).
    /// The CLI fills it from `HOPRAG_LLM_BASE_URL`, `HOPRAG_LLM_MODEL`,
    /// `HOPRAG_LLM_API_KEY` and `HOPRAG_LLM_LOCAL`.
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
