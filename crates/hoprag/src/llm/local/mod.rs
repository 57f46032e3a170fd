//! A GGUF chat model run in-process on the CPU, behind the [`Llm`] trait, so that every
//! LLM stage works offline.
//!
//! Weights run on candle's quantized llama and Gemma 3 models (pure Rust: no C++ build);
//! the tokenizer comes from the file's own metadata ([`tokenizer`]); the chat template
//! is chosen by the control tokens the vocabulary has ([`template`]).
//!
//! Decoding is greedy at temperature 0, so an answer depends only on the request;
//! above 0 it samples with the request's seed (0 when none is given). Generation stops
//! at the end-of-turn or end-of-sequence token, at a `stop` string (left out of the
//! text, as OpenAI servers do) or at `max_tokens` ([`DEFAULT_MAX_TOKENS`] when unset).
//! A request with `json` set gets its answer started with `{` (the `{` is part of the
//! returned text); nothing constrains the rest, and answers are parsed leniently by
//! their callers like any model's.
//!
//! One generation runs at a time per model (a mutex): candle already spreads a forward
//! pass over every core, so a second generation would only halve the speed of each.
//! Each call clones the weights (reference-counted tensors) and so has a KV cache of
//! its own. The state after a prompt's shared prefix (the turns before its last
//! message: a stage's instructions and demonstrations) is kept for the next calls, so
//! an extraction over a corpus runs its 400-token instructions once, not per passage.

mod model;
pub mod template;
pub mod tokenizer;

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use sha2::{Digest, Sha256};

use self::model::Weights;
use self::template::{ChatTemplate, Piece};
use self::tokenizer::{GgufTokenizer, GgufVocab};
use super::{ChatRequest, ChatResponse, Llm, Usage};
use crate::error::{Error, Result};
use crate::models::{self, ModelKind};

/// The answer cap of a request that sets no `max_tokens`: a small model can otherwise
/// repeat itself up to the end of its context, for minutes.
pub const DEFAULT_MAX_TOKENS: usize = 1024;

/// Shared prompt prefixes (in tokens) whose model state is kept: shorter ones cost
/// little to run again, and each kept token costs memory (46 kB for SmolLM2).
const MIN_PREFIX: usize = 32;
const MAX_PREFIX: usize = 2048;
/// Prefix states kept per model: the stages that exist send one or two distinct
/// prefixes (extraction, query NER).
const KEPT_PREFIXES: usize = 4;

/// The local model used when `llm.local` is not set.
pub const DEFAULT_LOCAL_MODEL: &str = "smollm2";

/// Threads the quantized matrix products run on: `CANDLE_NUM_THREADS`, else
/// `RAYON_NUM_THREADS`, else the physical cores (read once per process). The `hoprag`
/// binary sets `CANDLE_NUM_THREADS=1` when neither is set; see its `main`.
pub fn threads() -> usize {
    candle_core::utils::barrier_pool().n_workers() + 1
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
            return Ok(LocalModel { label: setting.to_string(), path: dir.join(file), known_digest });
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
        Ok(LocalModel { label: setting.to_string(), path, known_digest: None })
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

/// A loaded GGUF chat model.
pub struct LocalLlm {
    id: String,
    model: LocalModel,
    weights: Weights,
    tokenizer: GgufTokenizer,
    template: ChatTemplate,
    /// Ids that end a turn: the template's end-of-turn and the metadata's EOS/EOT.
    stop_ids: Vec<u32>,
    /// The longest sequence, prompt and answer, the model runs.
    context: usize,
    device: Device,
    /// One generation at a time.
    turn: Mutex<()>,
    /// Model states after recent shared prefixes, least recently used first.
    prefixes: Mutex<Vec<(Vec<u32>, Weights)>>,
}

impl LocalLlm {
    /// Loads weights and tokenizer from the file.
    pub fn load(model: &LocalModel) -> Result<LocalLlm> {
        let start = Instant::now();
        let id = model.id()?;
        let path = &model.path;
        let mut reader = BufReader::new(File::open(path).map_err(|e| Error::io(path, e))?);
        let content = gguf_file::Content::read(&mut reader).map_err(|e| Error::input(path, format!("GGUF: {e}")))?;
        let tokenizer = GgufVocab::from_metadata(&content.metadata, path)?.build()?;
        let template =
            ChatTemplate::detect(|t| tokenizer.control(t).is_some()).map_err(|e| Error::input(path, e.to_string()))?;
        let device = Device::Cpu;
        let (weights, context) =
            Weights::load(content, &mut reader, &device).map_err(|e| Error::input(path, e.to_string()))?;
        let mut stop_ids = tokenizer.stop_ids().to_vec();
        stop_ids.extend(tokenizer.control(template.end_of_turn()));
        stop_ids.sort_unstable();
        stop_ids.dedup();
        log::info!(
            "loaded {} ({}, {} template, {} tokens, context {context}) in {:.1}s",
            model.label,
            path.display(),
            template.name(),
            tokenizer.vocab_size(),
            start.elapsed().as_secs_f64()
        );
        Ok(LocalLlm {
            id,
            model: model.clone(),
            weights,
            tokenizer,
            template,
            stop_ids,
            context,
            device,
            turn: Mutex::new(()),
            prefixes: Mutex::new(Vec::new()),
        })
    }

    pub fn model(&self) -> &LocalModel {
        &self.model
    }

    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.tokenizer
    }

    pub fn template(&self) -> ChatTemplate {
        self.template
    }

    pub fn context(&self) -> usize {
        self.context
    }

    /// The prompt ids of a request: BOS where the model wants one, the rendered
    /// conversation, and the open assistant turn (with `{` for a JSON request).
    pub fn prompt(&self, request: &ChatRequest) -> Result<Vec<u32>> {
        Ok(self.prompt_and_prefix(request)?.0)
    }

    /// The prompt ids and how many of them form the shared prefix that is run (and its
    /// state kept) on its own: the turns before the last message, where the model can
    /// continue a prefill and the prefix is long enough to be worth it; else 0.
    fn prompt_and_prefix(&self, request: &ChatRequest) -> Result<(Vec<u32>, usize)> {
        let pieces = self.template.render(&request.messages, prefill(request));
        let shared = self.template.shared_prefix(&pieces);
        let mut ids: Vec<u32> = self.tokenizer.bos.into_iter().collect();
        let mut prefix = ids.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            match piece {
                Piece::Control(name) => ids.push(self.tokenizer.control(name).ok_or_else(|| {
                    Error::Model(format!("{}: the vocabulary has no {name} token", self.model.label))
                })?),
                Piece::Text(text) => ids.extend(self.tokenizer.encode(&text)?),
            }
            if i + 1 == shared {
                prefix = ids.len();
            }
        }
        let worth_it = self.weights.continues_prefill() && (MIN_PREFIX..=MAX_PREFIX).contains(&prefix);
        Ok((ids, if worth_it { prefix } else { 0 }))
    }

    /// Runs the model on a request's prompt and decodes until a stop.
    pub fn generate(&self, request: &ChatRequest) -> Result<Generation> {
        self.run(request, false)
    }

    /// Decodes exactly `max_tokens` tokens, past any end of turn (for speed
    /// measurements: every run does the same work).
    pub fn generate_exactly(&self, request: &ChatRequest) -> Result<Generation> {
        self.run(request, true)
    }

    fn run(&self, request: &ChatRequest, ignore_end: bool) -> Result<Generation> {
        let (prompt, prefix) = self.prompt_and_prefix(request)?;
        if prompt.len() >= self.context {
            return Err(Error::Model(format!(
                "{}: the prompt has {} tokens, more than the {} the model can take",
                self.model.label,
                prompt.len(),
                self.context
            )));
        }
        let wanted = request.max_tokens.map_or(DEFAULT_MAX_TOKENS, |n| n as usize);
        let budget = wanted.min(self.context - prompt.len());

        let _turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
        // On a thread of its own: a caller on a rayon worker (extract_llm's pool) would
        // otherwise, while it waits for candle's pool inside the lock, steal another of
        // its pool's jobs, which asks for the lock again and deadlocks. A spawned thread
        // waits without stealing; the spawn costs microseconds against seconds of
        // generation.
        let work = || self.device.with_context(|| self.decode(request, &prompt, prefix, budget, ignore_end));
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("hoprag-local-llm".into())
                .spawn_scoped(s, work)
                .map_err(|e| Error::Other(format!("cannot start the generation thread: {e}")))?
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Prefill (the shared prefix from its kept state where there is one), then one
    /// token at a time until a stop, on a KV cache of the call's own.
    fn decode(
        &self,
        request: &ChatRequest,
        prompt: &[u32],
        prefix: usize,
        budget: usize,
        ignore_end: bool,
    ) -> Result<Generation> {
        let mut sampler = (request.temperature > 0.0)
            .then(|| LogitsProcessor::new(request.seed.unwrap_or(0), Some(f64::from(request.temperature)), None));
        let start = Instant::now();
        // The prefix is always run on its own, kept state or not, so that an answer is
        // the same whether its prefix was kept: the very same operations run either way.
        let (mut weights, reused) =
            if prefix > 0 { self.after_prefix(&prompt[..prefix])? } else { (self.weights.clone(), false) };
        let input = Tensor::new(&prompt[prefix..], &self.device)?.unsqueeze(0)?;
        let mut logits = weights.forward(&input, prefix)?;
        let prefill_secs = start.elapsed().as_secs_f64();

        let mut out: Vec<u32> = Vec::new();
        let mut produced = 0usize;
        let mut cut = None;
        let finish = loop {
            if produced >= budget {
                break Finish::Length;
            }
            let logits_1d = logits.squeeze(0)?;
            let next = match sampler.as_mut() {
                Some(s) => s.sample(&logits_1d)?,
                None => argmax(&logits_1d.to_vec1::<f32>()?),
            };
            produced += 1;
            if !ignore_end && self.stop_ids.contains(&next) {
                break Finish::EndOfTurn;
            }
            out.push(next);
            if !ignore_end && !request.stop.is_empty() {
                let text = self.tokenizer.decode(&out)?;
                if let Some(at) = first_stop(&text, &request.stop) {
                    cut = Some(at);
                    break Finish::Stop;
                }
            }
            if produced >= budget {
                break Finish::Length;
            }
            let input = Tensor::new(&[next], &self.device)?.unsqueeze(0)?;
            logits = weights.forward(&input, prompt.len() + out.len() - 1)?;
        };
        let decode_secs = start.elapsed().as_secs_f64() - prefill_secs;
        let mut text = self.tokenizer.decode(&out)?;
        if let Some(at) = cut {
            text.truncate(at);
        }
        Ok(Generation {
            text: format!("{}{text}", prefill(request)),
            prompt_tokens: prompt.len(),
            reused_prompt_tokens: if reused { prefix } else { 0 },
            completion_tokens: produced,
            finish,
            prefill_secs,
            decode_secs,
        })
    }
}

impl LocalLlm {
    /// The model's state after `prefix`: a kept one, or a fresh run that is then kept.
    /// Returns whether it was kept. Clones share the KV tensors, and the forward passes
    /// that follow make new ones, so the kept state never changes.
    fn after_prefix(&self, prefix: &[u32]) -> Result<(Weights, bool)> {
        let mut kept = self.prefixes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = kept.iter().position(|(ids, _)| ids == prefix) {
            let entry = kept.remove(i);
            let weights = entry.1.clone();
            kept.push(entry); // most recently used last
            return Ok((weights, true));
        }
        let mut weights = self.weights.clone();
        weights.forward(&Tensor::new(prefix, &self.device)?.unsqueeze(0)?, 0)?;
        if kept.len() == KEPT_PREFIXES {
            kept.remove(0);
        }
        kept.push((prefix.to_vec(), weights.clone()));
        Ok((weights, false))
    }
}

/// What the answer is started with: `{` for JSON requests.
fn prefill(request: &ChatRequest) -> &'static str {
    if request.json {
        "{"
    } else {
        ""
    }
}

/// The index of the largest value; the first of equal ones, so ties are deterministic.
fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in values.iter().enumerate() {
        if *v > values[best] {
            best = i;
        }
    }
    best as u32
}

/// Where the earliest stop string starts in `text`.
fn first_stop(text: &str, stops: &[String]) -> Option<usize> {
    stops.iter().filter(|s| !s.is_empty()).filter_map(|s| text.find(s.as_str())).min()
}

impl Llm for LocalLlm {
    fn id(&self) -> &str {
        &self.id
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let g = self.generate(request)?;
        Ok(ChatResponse {
            text: g.text,
            usage: Usage { prompt_tokens: g.prompt_tokens as u64, completion_tokens: g.completion_tokens as u64 },
            cached: false,
            retries: 0,
            latency_ms: (g.prefill_secs + g.decode_secs) * 1000.0,
        })
    }
}

/// The local model of a configuration, loaded on its first call: building one costs
/// nothing, so methods that never ask the LLM anything never load it.
pub struct LazyLocalLlm {
    setting: String,
    model: std::result::Result<LocalModel, String>,
    id: OnceLock<String>,
    loaded: OnceLock<std::result::Result<LocalLlm, String>>,
}

impl LazyLocalLlm {
    /// `setting`: `smollm2`, `gemma3-270m`, a `.gguf` path, or empty for the default.
    /// A model that cannot be resolved is reported by [`check`](Self::check) and by
    /// every call, not here.
    pub fn new(setting: &str) -> LazyLocalLlm {
        LazyLocalLlm {
            setting: setting.to_string(),
            model: LocalModel::resolve(setting).map_err(|e| e.to_string()),
            id: OnceLock::new(),
            loaded: OnceLock::new(),
        }
    }

    /// Whether the model file is there (without loading it).
    pub fn check(&self) -> Result<&LocalModel> {
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
    pub fn get(&self) -> Result<&LocalLlm> {
        let model = self.check()?;
        self.loaded
            .get_or_init(|| LocalLlm::load(model).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Model(e.clone()))
    }
}

impl Llm for LazyLocalLlm {
    fn id(&self) -> &str {
        self.id.get_or_init(|| match &self.model {
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
    fn argmax_takes_the_first_of_equals() {
        assert_eq!(argmax(&[0.1, 0.5, 0.5, -1.0]), 1);
        assert_eq!(argmax(&[f32::NEG_INFINITY, -3.0]), 1);
    }

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
