//! The configuration: the sections of the embedder, the graph build, the LLM and every
//! method (each method's parameters, with its paper's defaults, live beside the method;
//! [`MethodSections`] gathers them), and the mechanism behind `--set`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::embed::EmbedderSettings;
use crate::error::{Error, Result};
use crate::graph::GraphOptions;
use crate::llm::OpenAiChatConfig;
use crate::retrieve::registry::{self, MethodSections};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub embedder: EmbedderSettings,
    /// Every method's section (`[hybrid]`, `[ppr]`, ...), at the top level of the file.
    #[serde(flatten)]
    pub methods: MethodSections,
    pub graph: GraphOptions,
    /// The chat model of the LLM stages (query NER, BridgeRAG, GEAR): the
    /// OpenAI-compatible endpoint when `model` is set, else the in-process GGUF model
    /// `local` (Qwen2.5-Coder 0.5B by default). The CLI fills it from `HOPRAG_LLM_BASE_URL`,
    /// `HOPRAG_LLM_MODEL`, `HOPRAG_LLM_API_KEY` and `HOPRAG_LLM_LOCAL`.
    pub llm: OpenAiChatConfig,
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

/// Resolves a parameter name to a dotted path in the configuration: a full path is kept,
/// a dotted path under the method's section (`link.facts` for `ppr`, as the parameter
/// list in errors names them) gets the section in front, and a bare name must match
/// exactly one leaf under the section.
pub fn resolve_param(config: &Value, method: &str, name: &str) -> Result<String> {
    let method = registry::find(method).and_then(|m| m.section).unwrap_or(method);
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
        // Everywhere but an evaluation, which takes it out of the settings first.
        self.llm.refuse_simulated_judge()?;
        if let Some(gamma) = self.methods.gear.gamma {
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
        config.methods.hybrid.rrf_k = f32::NAN;
        assert!(config.validate().unwrap_err().to_string().contains("hybrid.rrf_k: must be a finite number"));
    }
}
