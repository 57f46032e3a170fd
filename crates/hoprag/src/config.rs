//! Parameters of every method, with the defaults of the papers they come from, in one
//! place. Later issues add their methods' sections here.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::embed::EmbedderSettings;
use crate::error::{Error, Result};
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
    /// The chat model of the LLM stages (query NER). None is used while `model` is
    /// empty; the CLI fills it from `HOPRAG_LLM_BASE_URL`, `HOPRAG_LLM_MODEL` and
    /// `HOPRAG_LLM_API_KEY`.
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

/// A copy of `value` with the dotted paths (e.g. `phasegraph.fusion.alpha`) set: the
/// mechanism behind `--set` and per-request options. A path that names no existing
/// field is an error naming it. Fields that are not serialised (API keys) come back at
/// their defaults; [`with_settings`](crate::eval::tune::with_settings) restores them
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
