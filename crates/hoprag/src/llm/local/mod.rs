//! A GGUF chat model run in-process on the CPU, behind the [`Llm`] trait, so that every
//! LLM stage works offline.
//!
//! The runtime is llama.cpp ([`runtime`]): tokenizer and chat template come from the
//! file's own metadata, so any GGUF chat model llama.cpp knows runs without code of its
//! own here.
//!
//! Decoding is greedy at temperature 0, so an answer depends only on the request;
//! above 0 it samples with the request's seed (0 when none is given). Generation stops
//! at an end-of-generation token, at a `stop` string (left out of the text, as OpenAI
//! servers do) or at `max_tokens` ([`DEFAULT_MAX_TOKENS`] when unset). A request with
//! `json` set is decoded under a JSON grammar ([`grammar`]): its answer is a JSON
//! object unless `max_tokens` cuts it short.
//!
//! One generation runs at a time per model (a mutex): llama.cpp already spreads a
//! forward pass over the threads ([`crate::threads`]). The state after a prompt's shared
//! prefix (the turns before its last message: a stage's instructions and
//! demonstrations) is kept in the KV cache for the next calls, so an extraction over a
//! corpus runs its instructions once, not per passage.

pub mod grammar;
#[cfg(feature = "local-llm")]
mod runtime;
#[cfg(not(feature = "local-llm"))]
#[path = "not_built.rs"]
mod runtime;

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

pub use self::runtime::LocalLlm;
use super::{ChatRequest, ChatResponse, Llm};
use crate::error::{Error, Result};
use crate::lazy::Lazy;
use crate::models::{self, ModelKind};

/// The answer cap of a request that sets no `max_tokens`: a small model can otherwise
/// repeat itself up to the end of its context, for minutes.
pub const DEFAULT_MAX_TOKENS: usize = 1024;

/// The local model used when `llm.local` is not set: the smallest one whose triples,
/// entities and judgements carry signal (README, "Local models"); SmolLM2 and Gemma 3
/// 270M are faster but answer with the prompt's own example.
pub const DEFAULT_LOCAL_MODEL: &str = "qwen2.5-0.5b";

/// Threads the local model runs on: the process-wide setting ([`crate::threads::get`]).
pub fn threads() -> usize {
    crate::threads::get()
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// The model closed its turn (end-of-turn or end-of-sequence token).
    EndOfTurn,
    /// A stop string appeared.
    Stop,
    /// `max_tokens` (or the end of the context) was reached.
    Length,
}

/// One generation, with its timings.
#[derive(Debug, Clone)]
pub struct Generation {
    pub text: String,
    pub prompt_tokens: usize,
    /// Prompt tokens whose model state was kept from an earlier call with the same
    /// shared prefix (instructions and demonstrations), and so not run again.
    pub reused_prompt_tokens: usize,
    /// Tokens the model produced, the closing end-of-turn token included.
    pub completion_tokens: usize,
    pub finish: Finish,
    /// Time to run the prompt through the model (up to the first new token's logits).
    pub prefill_secs: f64,
    /// Time to produce the completion tokens after the first.
    pub decode_secs: f64,
}

/// A GGUF chat model, as the configuration names it: a registry model (`smollm2`,
/// `gemma3-270m`) or a path to a `.gguf` file.
#[derive(Debug, Clone)]
pub struct LocalModel {
    /// The name it was configured by: registry name or path.
    pub label: String,
    pub path: PathBuf,
    /// The registry's SHA-256 of the file, which spares hashing it.
    known_digest: Option<&'static str>,
    /// The registry's llama.cpp template for a file that carries none.
    #[cfg_attr(not(feature = "local-llm"), allow(dead_code))] // read by the runtime
    fallback_template: Option<&'static str>,
}

impl LocalModel {
    /// Resolves `setting`; a registry model that is not installed is an error naming the
    /// command that installs it.
    pub fn resolve(setting: &str) -> Result<LocalModel> {
        let setting = setting.trim();
        let setting = if setting.is_empty() { DEFAULT_LOCAL_MODEL } else { setting };
        if let Some(spec) = models::MODELS.iter().find(|m| m.name == setting) {
            if spec.kind != ModelKind::Chat {
                return Err(Error::Config(format!("llm.local = {setting:?} is an embedder, not a chat model")));
            }
            let dir = models::require(spec.name)?;
            let file = spec.main_file();
            let known_digest = spec.checksums.iter().find(|c| c.file == file).map(|c| c.sha256);
            return Ok(LocalModel {
                label: setting.to_string(),
                path: dir.join(file),
                known_digest,
                fallback_template: spec.fallback_template,
            });
        }
        let path = PathBuf::from(setting);
        let looks_like_path = path.extension().is_some_and(|x| x.eq_ignore_ascii_case("gguf"))
            || setting.contains(std::path::MAIN_SEPARATOR)
            || setting.contains('/');
        if !looks_like_path {
            let known: Vec<_> = models::MODELS.iter().filter(|m| m.kind == ModelKind::Chat).map(|m| m.name).collect();
            return Err(Error::Config(format!(
                "llm.local = {setting:?}: not a known local model ({}) nor a path to a .gguf file",
                known.join(", ")
            )));
        }
        if !path.is_file() {
            return Err(Error::Config(format!("llm.local = {setting:?}: no such file")));
        }
        Ok(LocalModel { label: setting.to_string(), path, known_digest: None, fallback_template: None })
    }

    /// `local:NAME:DIGEST`, where DIGEST starts the file's SHA-256, so that the response
    /// cache never serves one model's answers for another's. A file given by path is
    /// hashed once per process (a few seconds for 250 MB on a slow core).
    pub fn id(&self) -> Result<String> {
        let name = self.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let digest = match self.known_digest {
            Some(d) => d.to_string(),
            None => sha256_file(&self.path)?,
        };
        Ok(format!("local:{name}:{}", &digest[..12]))
    }
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path).map_err(|e| Error::io(path, e))?);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Where the earliest stop string starts in `text`.
#[cfg_attr(not(feature = "local-llm"), allow(dead_code))] // called by the runtime
fn first_stop(text: &str, stops: &[String]) -> Option<usize> {
    stops.iter().filter(|s| !s.is_empty()).filter_map(|s| text.find(s.as_str())).min()
}

/// The local model of a configuration, loaded on its first call: building one costs
/// nothing, so methods that never ask the LLM anything never load it.
pub struct LazyLocalLlm {
    setting: String,
    model: std::result::Result<LocalModel, String>,
    id: Lazy<String>,
    loaded: Lazy<std::result::Result<Arc<LocalLlm>, String>>,
}

impl LazyLocalLlm {
    /// `setting`: a registry name (`smollm2`, `qwen2.5-0.5b`, ...), a `.gguf` path, or
    /// empty for the default.
    /// A model that cannot be resolved is reported by [`check`](Self::check) and by
    /// every call, not here.
    pub fn new(setting: &str) -> LazyLocalLlm {
        LazyLocalLlm {
            setting: setting.to_string(),
            model: LocalModel::resolve(setting).map_err(|e| e.to_string()),
            id: Lazy::new(),
            loaded: Lazy::new(),
        }
    }

    /// Whether this build runs local models and the model file is there (without
    /// loading it).
    pub fn check(&self) -> Result<&LocalModel> {
        if !crate::llama::BUILT {
            return Err(crate::llama::not_built(&format!("the local chat model {}", self.setting_or_default())));
        }
        self.model.as_ref().map_err(|e| Error::Model(e.clone()))
    }

    /// `local smollm2 (/path/to/file.gguf)`, for notes on which model answered.
    pub fn describe(&self) -> String {
        match &self.model {
            Ok(m) if m.label == m.path.to_string_lossy() => format!("local {}", m.label),
            Ok(m) => format!("local {} ({})", m.label, m.path.display()),
            Err(_) => format!("local {} (not installed)", self.setting_or_default()),
        }
    }

    fn setting_or_default(&self) -> &str {
        if self.setting.trim().is_empty() {
            DEFAULT_LOCAL_MODEL
        } else {
            self.setting.trim()
        }
    }

    /// The loaded model, loading it on first use.
    pub fn get(&self) -> Result<&Arc<LocalLlm>> {
        let model = self.check()?;
        self.loaded
            .get_or_compute(|| LocalLlm::load(model).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Model(e.clone()))
    }
}

impl Llm for LazyLocalLlm {
    fn id(&self) -> &str {
        self.id.get_or_compute(|| match &self.model {
            Ok(m) => m.id().unwrap_or_else(|e| {
                log::warn!("{e}");
                format!("local:{}:unreadable", m.label)
            }),
            Err(_) => format!("local:{}:missing", self.setting_or_default()),
        })
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        self.get()?.chat(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_stop_wins() {
        let stops = vec!["\n\n".to_string(), "END".to_string(), String::new()];
        assert_eq!(first_stop("abc END x\n\n", &stops), Some(4));
        assert_eq!(first_stop("abc", &stops), None);
    }

    #[test]
    fn settings_resolve_to_registry_models_or_paths() {
        let unknown = LocalModel::resolve("llama-70b").unwrap_err().to_string();
        assert!(unknown.contains("smollm2") && unknown.contains("gemma3-270m"), "{unknown}");
        assert!(LocalModel::resolve("minilm").unwrap_err().to_string().contains("embedder"));
        assert!(LocalModel::resolve("/no/such/model.gguf").unwrap_err().to_string().contains("no such file"));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        std::fs::write(&path, b"GGUF").unwrap();
        let model = LocalModel::resolve(path.to_str().unwrap()).unwrap();
        // The id names the file and starts its digest.
        let expected = &hex::encode(Sha256::digest(b"GGUF"))[..12];
        assert_eq!(model.id().unwrap(), format!("local:tiny:{expected}"));
        let lazy = LazyLocalLlm::new(path.to_str().unwrap());
        assert_eq!(lazy.describe(), format!("local {}", path.display()));
        assert!(lazy.chat(&ChatRequest::user("hi")).unwrap_err().to_string().contains("tiny.gguf"));
    }
}
