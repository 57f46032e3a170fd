//! llama.cpp (through `llama-cpp-2`, which builds the vendored library from source):
//! one process-wide backend, each model file loaded once per process and shared by every
//! caller, and one context per model whose KV cache keeps the state after recent shared
//! prompt prefixes.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::llama::backend;
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::{first_stop, grammar, Finish, Generation, LocalModel, DEFAULT_MAX_TOKENS};
use crate::error::{Error, Result};
use crate::lazy::LazyMap;
use crate::llm::{ChatRequest, ChatResponse, Llm, Role, Usage};

/// Shared prompt prefixes (in tokens) whose state is kept: shorter ones cost little to
/// run again.
const MIN_PREFIX: usize = 32;
/// Prefix states kept per model, each in a KV sequence of its own: the stages send one
/// or two distinct prefixes each (extraction, query NER, a method's read or judge).
const KEPT_PREFIXES: usize = 4;
/// The KV cache, in tokens, shared by the kept prefixes and the running generation
/// (the models' own limits are far larger; the stages' prompts are 1–3k tokens).
const CONTEXT: u32 = 8192;
/// Tokens per `llama_decode` call during a prefill.
const BATCH: usize = 2048;
/// The KV sequence a generation runs in; kept prefixes live in 1..=KEPT_PREFIXES.
const WORK: i32 = 0;
/// Private-use characters that delimit a message's place in a rendered template.
const MARK_OPEN: char = '\u{E000}';
const MARK_CLOSE: char = '\u{E001}';

/// A loaded GGUF chat model.
pub struct LocalLlm {
    id: String,
    model: LocalModel,
    llama: &'static LlamaModel,
    template: LlamaChatTemplate,
    threads: usize,
    load_secs: f64,
    /// One generation at a time: llama.cpp already spreads a forward pass over the
    /// threads, so a second generation would only halve the speed of each.
    state: Mutex<State>,
}

struct State {
    ctx: LlamaContext<'static>,
    /// Kept prefixes by KV sequence (index + 1), least recently used first.
    kept: Vec<Kept>,
    clock: u64,
}

struct Kept {
    seq: i32,
    tokens: Vec<LlamaToken>,
    used: u64,
}

impl LocalLlm {
    /// The model at `model.path`, loaded on the first call of the process and shared
    /// after that: weights and the context are hundreds of megabytes, and every engine,
    /// method and stage that asks for the same file gets the same one. Its thread count
    /// is [`crate::threads::get`] at that first load.
    pub fn load(model: &LocalModel) -> Result<Arc<LocalLlm>> {
        static LOADED: OnceLock<LazyMap<PathBuf, Arc<LocalLlm>>> = OnceLock::new();
        let key = model.path.canonicalize().unwrap_or_else(|_| model.path.clone());
        // Two threads never load one file twice; a failed load is tried again next time.
        LOADED.get_or_init(LazyMap::new).get_or_try_compute(key, || LocalLlm::load_uncached(model).map(Arc::new))
    }

    fn load_uncached(model: &LocalModel) -> Result<LocalLlm> {
        let start = Instant::now();
        let backend = backend()?;
        let id = model.id()?;
        let path = &model.path;
        let llama = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|e| Error::input(path, format!("llama.cpp cannot load it: {e}")))?;
        // Loaded once per process and file (see `load`), so leaking it costs nothing
        // and lets the context borrow it for the life of the process.
        let llama: &'static LlamaModel = Box::leak(Box::new(llama));
        let template = match (llama.chat_template(None), model.fallback_template) {
            (Ok(template), _) => template,
            (Err(_), Some(name)) => LlamaChatTemplate::new(name)
                .map_err(|e| Error::Model(format!("{}: template {name:?}: {e}", model.label)))?,
            (Err(e), None) => {
                return Err(Error::input(
                    path,
                    format!("no chat template in the GGUF metadata ({e}); hoprag needs a chat model"),
                ))
            }
        };
        let threads = crate::threads::get();
        let n_threads = i32::try_from(threads).unwrap_or(i32::MAX);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(CONTEXT.min(llama.n_ctx_train().max(512))))
            .with_n_batch(BATCH as u32)
            .with_n_ubatch(BATCH as u32)
            .with_n_seq_max(KEPT_PREFIXES as u32 + 1)
            .with_kv_unified(true)
            .with_n_threads(n_threads)
            .with_n_threads_batch(n_threads);
        let ctx = llama
            .new_context(backend, params)
            .map_err(|e| Error::Model(format!("{}: llama.cpp context: {e}", model.label)))?;
        let load_secs = start.elapsed().as_secs_f64();
        log::info!("loaded {} ({}) with {threads} threads in {load_secs:.1}s", model.label, path.display());
        Ok(LocalLlm {
            id,
            model: model.clone(),
            llama,
            template,
            threads,
            load_secs,
            state: Mutex::new(State { ctx, kept: Vec::new(), clock: 0 }),
        })
    }

    pub fn model(&self) -> &LocalModel {
        &self.model
    }

    /// Threads a forward pass runs on.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Seconds the first load took.
    pub fn load_secs(&self) -> f64 {
        self.load_secs
    }

    /// The longest sequence, prompt and answer, a generation can run.
    pub fn context(&self) -> usize {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).ctx.n_ctx() as usize
    }

    /// The model's text for `ids` (special tokens written out).
    pub fn detokenize(&self, ids: &[u32]) -> String {
        let tokens: Vec<LlamaToken> = ids.iter().map(|&i| LlamaToken(i as i32)).collect();
        String::from_utf8_lossy(&self.llama.vocab().detokenize(&tokens, false, true)).into_owned()
    }

    /// Token ids of plain text (control texts such as `<|im_end|>` stay text).
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.llama.vocab().tokenize(text.as_bytes(), false, false).into_iter().map(|t| t.0 as u32).collect()
    }

    /// A request's conversation in the model's own chat template (from the GGUF), with
    /// the assistant turn opened.
    pub fn render(&self, request: &ChatRequest) -> Result<String> {
        self.apply_template(&request.messages, true)
    }

    fn apply_template(&self, messages: &[crate::llm::Message], open_turn: bool) -> Result<String> {
        let contents: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        self.apply_template_to(messages, &contents, open_turn)
    }

    fn apply_template_to(
        &self,
        messages: &[crate::llm::Message],
        contents: &[&str],
        open_turn: bool,
    ) -> Result<String> {
        let chat = messages
            .iter()
            .zip(contents)
            .map(|(m, content)| {
                let role = match m.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                LlamaChatMessage::new(role.into(), content.to_string())
                    .map_err(|e| Error::Model(format!("a message holds a NUL byte: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        self.llama
            .apply_chat_template(&self.template, &chat, open_turn)
            .map_err(|e| Error::Model(format!("{}: chat template: {e}", self.model.label)))
    }

    /// The prompt ids of a request.
    pub fn prompt(&self, request: &ChatRequest) -> Result<Vec<u32>> {
        Ok(self.prompt_and_prefix(request)?.0.iter().map(|t| t.0 as u32).collect())
    }

    /// The prompt tokens and how many of them form the shared prefix (the turns before
    /// the last message: a stage's instructions and demonstrations), which is run, and
    /// its state kept, on its own; 0 when there is none worth keeping. The prefix is
    /// tokenized apart from the rest, so its tokens never depend on what follows.
    ///
    /// The template is rendered with a marker in place of each message, so that only
    /// the template's own text is read for control tokens: a message that contains
    /// `<|im_end|>` stays text and cannot close its turn.
    fn prompt_and_prefix(&self, request: &ChatRequest) -> Result<(Vec<LlamaToken>, usize)> {
        let messages = &request.messages;
        let markers: Vec<String> = (0..messages.len()).map(|i| format!("{MARK_OPEN}{i}{MARK_CLOSE}")).collect();
        let markers: Vec<&str> = markers.iter().map(String::as_str).collect();
        let full = self.apply_template_to(messages, &markers, true)?;
        let add_bos = self.llama.vocab().should_add_bos();
        if messages.len() > 1 {
            let n = messages.len() - 1;
            let head = self.apply_template_to(&messages[..n], &markers[..n], false)?;
            if let Some(rest) = full.strip_prefix(&head) {
                let mut tokens = self.tokenize_marked(&head, messages, add_bos)?;
                let prefix = tokens.len();
                tokens.extend(self.tokenize_marked(rest, messages, false)?);
                return Ok((tokens, if prefix >= MIN_PREFIX { prefix } else { 0 }));
            }
        }
        Ok((self.tokenize_marked(&full, messages, add_bos)?, 0))
    }

    /// Tokens of a rendered template whose messages are markers: the template's text
    /// with its control tokens, each message's content as plain text.
    fn tokenize_marked(&self, rendered: &str, messages: &[crate::llm::Message], bos: bool) -> Result<Vec<LlamaToken>> {
        let vocab = self.llama.vocab();
        let mut tokens = Vec::new();
        let mut first = bos;
        let mut push = |text: &str, special: bool, tokens: &mut Vec<LlamaToken>| {
            if !text.is_empty() || first {
                tokens.extend(vocab.tokenize(text.as_bytes(), first, special));
                first = false;
            }
        };
        let mut rest = rendered;
        while let Some(open) = rest.find(MARK_OPEN) {
            push(&rest[..open], true, &mut tokens);
            let after = &rest[open + MARK_OPEN.len_utf8()..];
            let close = after
                .find(MARK_CLOSE)
                .ok_or_else(|| Error::Model(format!("{}: the chat template cut a message", self.model.label)))?;
            let i: usize = after[..close]
                .parse()
                .map_err(|_| Error::Model(format!("{}: the chat template changed a message", self.model.label)))?;
            let message = messages
                .get(i)
                .ok_or_else(|| Error::Model(format!("{}: the chat template changed a message", self.model.label)))?;
            push(&message.content, false, &mut tokens);
            rest = &after[close + MARK_CLOSE.len_utf8()..];
        }
        push(rest, true, &mut tokens);
        Ok(tokens)
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
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let context = state.ctx.n_ctx() as usize;
        if prompt.len() >= context {
            return Err(Error::Model(format!(
                "{}: the prompt has {} tokens, more than the {context} the model runs",
                self.model.label,
                prompt.len(),
            )));
        }
        let wanted = request.max_tokens.map_or(DEFAULT_MAX_TOKENS, |n| n as usize);
        let budget = wanted.min(context - prompt.len());
        let mut attempt = || {
            let result = self.sampler(request, ignore_end).and_then(|mut sampler| {
                self.decode(&mut state, request, &prompt, prefix, budget, ignore_end, &mut sampler)
            });
            // The generation's cells go back to the cache whatever happened.
            state.ctx.clear_kv_cache_seq(Some(WORK as u32), None, None).ok();
            let had_kept = !state.kept.is_empty();
            if result.is_err() {
                // A failed decode may leave a kept prefix half written; and the kept
                // prefixes may be what filled the cache.
                state.ctx.clear_kv_cache();
                state.kept.clear();
            }
            (result, had_kept)
        };
        match attempt() {
            (Err(e), true) => {
                log::debug!("{}: retrying without kept prefixes after: {e}", self.model.label);
                attempt().0
            }
            (result, _) => result,
        }
    }

    /// Greedy at temperature 0, else sampling with the request's seed; under the
    /// grammar of the request's schema, or the JSON object grammar for a JSON request
    /// without one.
    fn sampler(&self, request: &ChatRequest, ignore_end: bool) -> Result<LlamaSampler> {
        let mut chain = Vec::new();
        // Speed runs decode past the end of turn, where a finished grammar allows nothing.
        let constraint = match (&request.schema, request.json) {
            _ if ignore_end => None,
            (Some(schema), _) => Some(grammar::from_schema(schema)?),
            (None, true) => Some(grammar::JSON_OBJECT.to_string()),
            (None, false) => None,
        };
        if let Some(gbnf) = constraint {
            chain.push(
                LlamaSampler::grammar(self.llama, &gbnf, "root")
                    .map_err(|e| Error::Model(format!("llama.cpp rejects the answer's grammar ({e}): {gbnf}")))?,
            );
        }
        if request.temperature > 0.0 {
            chain.push(LlamaSampler::temp(request.temperature));
            chain.push(LlamaSampler::dist(request.seed.unwrap_or(0) as u32));
        } else {
            chain.push(LlamaSampler::greedy());
        }
        Ok(LlamaSampler::chain_simple(chain))
    }

    #[allow(clippy::too_many_arguments)]
    fn decode(
        &self,
        state: &mut State,
        request: &ChatRequest,
        prompt: &[LlamaToken],
        prefix: usize,
        budget: usize,
        ignore_end: bool,
        sampler: &mut LlamaSampler,
    ) -> Result<Generation> {
        let start = Instant::now();
        let vocab = self.llama.vocab();
        // The prefix is always run in a sequence of its own and copied into the
        // generation's, kept state or not, so that an answer is the same either way:
        // the very same operations run.
        let reused = if prefix > 0 {
            let (seq, reused) = self.after_prefix(state, &prompt[..prefix])?;
            state
                .ctx
                .copy_kv_cache_seq(seq, WORK, None, None)
                .map_err(|e| Error::Model(format!("llama.cpp KV copy: {e}")))?;
            reused
        } else {
            false
        };
        let mut last = eval(&mut state.ctx, &prompt[prefix..], prefix, WORK, true)?;
        let prefill_secs = start.elapsed().as_secs_f64();

        let mut out: Vec<LlamaToken> = Vec::new();
        let mut bytes: Vec<u8> = Vec::new();
        let mut produced = 0usize;
        let mut cut = None;
        let finish = loop {
            if produced >= budget {
                break Finish::Length;
            }
            let next = sampler.sample(&state.ctx, last);
            produced += 1;
            if !ignore_end && vocab.is_eog(next) {
                break Finish::EndOfTurn;
            }
            out.push(next);
            bytes.extend(vocab.token_to_piece(next, false, None));
            if !ignore_end && !request.stop.is_empty() {
                let text = String::from_utf8_lossy(&bytes);
                if let Some(at) = first_stop(&text, &request.stop) {
                    cut = Some(at);
                    break Finish::Stop;
                }
            }
            if produced >= budget {
                break Finish::Length;
            }
            last = eval(&mut state.ctx, &[next], prompt.len() + out.len() - 1, WORK, true)?;
        };
        let decode_secs = start.elapsed().as_secs_f64() - prefill_secs;
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if let Some(at) = cut {
            text.truncate(at);
        }
        if (request.json || request.schema.is_some()) && !ignore_end && finish == Finish::Length {
            // Cut short inside the grammar: keep what was complete, so that the answer
            // still parses (its finish says it was cut).
            if let Some(closed) = grammar::close_cut_json(&text) {
                text = closed;
            }
        }
        Ok(Generation {
            text,
            prompt_tokens: prompt.len(),
            reused_prompt_tokens: if reused { prefix } else { 0 },
            completion_tokens: produced,
            finish,
            prefill_secs,
            decode_secs,
        })
    }

    /// The KV sequence holding the state after `prefix`: a kept one, or a fresh run in
    /// the least recently used slot. Returns whether it was kept.
    fn after_prefix(&self, state: &mut State, prefix: &[LlamaToken]) -> Result<(i32, bool)> {
        state.clock += 1;
        let now = state.clock;
        if let Some(kept) = state.kept.iter_mut().find(|k| k.tokens == prefix) {
            kept.used = now;
            return Ok((kept.seq, true));
        }
        let seq = if state.kept.len() < KEPT_PREFIXES {
            state.kept.len() as i32 + 1
        } else {
            let (i, _) = state.kept.iter().enumerate().min_by_key(|(_, k)| k.used).expect("kept is full");
            state.kept.remove(i).seq
        };
        state.ctx.clear_kv_cache_seq(Some(seq as u32), None, None).ok();
        eval(&mut state.ctx, prefix, 0, seq, false)?;
        state.kept.push(Kept { seq, tokens: prefix.to_vec(), used: now });
        Ok((seq, false))
    }
}

/// Runs `tokens` at positions `start..` of sequence `seq`, in batches; with `logits`,
/// the last token's logits are kept, and its index in the last batch is returned.
fn eval(ctx: &mut LlamaContext<'static>, tokens: &[LlamaToken], start: usize, seq: i32, logits: bool) -> Result<i32> {
    let mut batch = LlamaBatch::new(BATCH, 1);
    let mut last = 0;
    for (c, chunk) in tokens.chunks(BATCH).enumerate() {
        batch.clear();
        let final_chunk = (c + 1) * BATCH >= tokens.len();
        for (i, &t) in chunk.iter().enumerate() {
            let pos = (start + c * BATCH + i) as i32;
            let want = logits && final_chunk && i + 1 == chunk.len();
            batch.add(t, pos, &[seq], want).map_err(|e| Error::Model(format!("llama.cpp batch: {e}")))?;
        }
        ctx.decode(&mut batch).map_err(|e| Error::Model(format!("llama.cpp decode: {e}")))?;
        last = chunk.len() as i32 - 1;
    }
    Ok(last)
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
