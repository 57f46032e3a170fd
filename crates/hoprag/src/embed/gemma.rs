//! EmbeddingGemma-300M in-process ([`GemmaEncoder`]), with the prompts the model was
//! trained with and its Matryoshka dimensions.
//!
//! The model embeds a query and a document differently, through a text prefix (its
//! `config_sentence_transformers.json` and model card):
//! - a question: `task: question answering | query: {question}` (the card's prompt for
//!   question answering, the default here) or `task: search result | query: {question}`
//!   (the `query` prompt sentence-transformers' `encode_query` uses: `query=retrieval`);
//! - a passage: `title: {title} | text: {text}`, `{title}` `none` when there is none (the
//!   `document` prompt is the `none` form). hoprag hands an embedder a passage as its
//!   [`index_text`](crate::corpus::Passage::index_text), title, newline, text: the first
//!   line goes into the title slot when the text has more than one line. `title=none`
//!   puts the whole text, title line included, after `title: none | text: ` (what
//!   `encode_document` does with hoprag's text).
//!
//! The settings are part of the embedder id stored in an index's manifest
//! (`embeddinggemma:query=retrieval,dim=256,title=none`; plain `embeddinggemma` for the
//! defaults), so an index and the questions asked of it always use the same prompts and
//! dimensions.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokenizers::{Tokenizer, TruncationParams};

use super::encoder::gemma::GemmaEncoder;
use super::{Embedder, TextKind};
use crate::error::{Error, Result};

/// The model's name in [`crate::models`] and the id's prefix.
pub const NAME: &str = "embeddinggemma";

/// The query prompt the model card gives for question answering (not among the prompts
/// of `config_sentence_transformers.json`).
const QA_PROMPT: &str = "task: question answering | query: ";

/// The model's `query` prompt in `config_sentence_transformers.json` (which the loader
/// reads; this copy is for the benchmark's peer).
const RETRIEVAL_PROMPT: &str = "task: search result | query: ";

/// The Matryoshka dimensions the model was trained for.
pub const DIMS: [usize; 4] = [768, 512, 256, 128];

/// Which prompt a query gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueryPrompt {
    /// `task: question answering | query: `.
    Qa,
    /// `task: search result | query: `, the model's `query` prompt.
    Retrieval,
}

/// EmbeddingGemma's settings, as written after `embeddinggemma:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GemmaOptions {
    pub query: QueryPrompt,
    /// Whether a passage's first line goes into the prompt's title slot.
    pub title: bool,
    /// Matryoshka dimension: the first `dim` of the 768, normalised again.
    pub dim: usize,
}

impl Default for GemmaOptions {
    fn default() -> Self {
        GemmaOptions { query: QueryPrompt::Qa, title: true, dim: 768 }
    }
}

impl GemmaOptions {
    /// Reads `embeddinggemma` or `embeddinggemma:KEY=VALUE,…` (`query=qa|retrieval`,
    /// `title=passage|none`, `dim=768|512|256|128`); `None` when `s` names another embedder.
    pub fn parse(s: &str) -> Option<Result<GemmaOptions>> {
        let rest = s.strip_prefix(NAME)?;
        let settings = match rest.strip_prefix(':') {
            Some(settings) => settings,
            None if rest.is_empty() => "",
            None => return None,
        };
        let mut options = GemmaOptions::default();
        let bad = |what: String| {
            Err(Error::Config(format!(
                "embedder {s:?}: {what}; expected {NAME}[:query=qa|retrieval][,title=passage|none][,dim=768|512|256|128]"
            )))
        };
        for setting in settings.split(',').filter(|x| !x.is_empty()) {
            match setting.split_once('=') {
                Some(("query", "qa")) => options.query = QueryPrompt::Qa,
                Some(("query", "retrieval")) => options.query = QueryPrompt::Retrieval,
                Some(("title", "passage")) => options.title = true,
                Some(("title", "none")) => options.title = false,
                Some(("dim", d)) => match d.parse::<usize>() {
                    Ok(d) if DIMS.contains(&d) => options.dim = d,
                    _ => return Some(bad(format!("dim {d:?} is not one the model was trained for"))),
                },
                _ => return Some(bad(format!("unknown setting {setting:?}"))),
            }
        }
        Some(Ok(options))
    }

    /// The id stored in manifests: the name, then the settings that differ from the
    /// defaults, in a fixed order (so one choice has one id).
    pub fn id(&self) -> String {
        let default = GemmaOptions::default();
        let mut settings = Vec::new();
        if self.query != default.query {
            settings.push(format!("query={}", if self.query == QueryPrompt::Qa { "qa" } else { "retrieval" }));
        }
        if self.title != default.title {
            settings.push(format!("title={}", if self.title { "passage" } else { "none" }));
        }
        if self.dim != default.dim {
            settings.push(format!("dim={}", self.dim));
        }
        if settings.is_empty() {
            NAME.to_string()
        } else {
            format!("{NAME}:{}", settings.join(","))
        }
    }
}

/// The files sentence-transformers reads, beyond the transformer's own.
#[derive(Deserialize)]
struct Prompts {
    prompts: std::collections::HashMap<String, String>,
}

#[derive(Deserialize)]
struct Module {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct SentenceConfig {
    max_seq_length: usize,
}

pub struct GemmaEmbedder {
    options: GemmaOptions,
    id: String,
    tokenizer: Tokenizer,
    encoder: GemmaEncoder,
    query_prompt: String,
    /// The `document` prompt's text before and after its title (`title: `, ` | text: `).
    title_prefix: String,
    title_suffix: String,
}

impl GemmaEmbedder {
    /// Loads a sentence-transformers folder of EmbeddingGemma (the files
    /// `hoprag models fetch embeddinggemma` installs).
    pub fn load(dir: &Path, options: GemmaOptions) -> Result<Self> {
        let read = |name: &str| -> Result<Vec<u8>> {
            let p = dir.join(name);
            std::fs::read(&p).map_err(|e| {
                Error::Model(format!(
                    "{}: {e}; run `hoprag models fetch {NAME}` or point HOPRAG_EMBEDDINGGEMMA_DIR at a folder \
                     with the model files",
                    p.display()
                ))
            })
        };
        let json_err = |name: &str, e: serde_json::Error| Error::Model(format!("{}: {e}", dir.join(name).display()));
        let modules: Vec<Module> =
            serde_json::from_slice(&read("modules.json")?).map_err(|e| json_err("modules.json", e))?;
        let kinds: Vec<&str> = modules.iter().map(|m| m.kind.rsplit('.').next().unwrap_or_default()).collect();
        let dense: Vec<PathBuf> =
            modules.iter().filter(|m| m.kind.ends_with(".Dense")).map(|m| PathBuf::from(&m.path)).collect();
        // The pipeline this embedder computes; any other is refused, not approximated.
        let expected = ["Transformer", "Pooling", "Dense", "Dense", "Normalize"];
        if kinds != expected {
            return Err(Error::Model(format!(
                "{}: modules {kinds:?}; only {expected:?} is supported",
                dir.join("modules.json").display()
            )));
        }
        let pooling: serde_json::Value = serde_json::from_slice(&read(&format!("{}/config.json", modules[1].path))?)
            .map_err(|e| json_err("pooling config", e))?;
        if pooling["pooling_mode_mean_tokens"] != true || pooling["include_prompt"] == false {
            return Err(Error::Model(format!(
                "{}: only mean pooling over every token (prompt included) is supported",
                dir.join(&modules[1].path).display()
            )));
        }
        let prompts: Prompts = serde_json::from_slice(&read("config_sentence_transformers.json")?)
            .map_err(|e| json_err("config_sentence_transformers.json", e))?;
        let prompt = |name: &str| {
            prompts.prompts.get(name).cloned().ok_or_else(|| {
                Error::Model(format!("{}: no {name:?} prompt", dir.join("config_sentence_transformers.json").display()))
            })
        };
        let query_prompt = match options.query {
            QueryPrompt::Retrieval => prompt("query")?,
            QueryPrompt::Qa => QA_PROMPT.to_string(),
        };
        let document = prompt("document")?;
        let Some((title_prefix, title_suffix)) = document.split_once("none") else {
            return Err(Error::Model(format!("document prompt {document:?} has no title slot (`none`)")));
        };
        let sentence: SentenceConfig = serde_json::from_slice(&read("sentence_bert_config.json")?)
            .map_err(|e| json_err("sentence_bert_config.json", e))?;

        let encoder = GemmaEncoder::load(dir, &dense)?;
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| Error::Model(format!("{}: {e}", tokenizer_path.display())))?;
        let max_length = sentence.max_seq_length.min(encoder.config().max_positions);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length, ..Default::default() }))
            .map_err(|e| Error::Model(format!("{}: {e}", tokenizer_path.display())))?;
        tokenizer.with_padding(None);
        Ok(GemmaEmbedder {
            id: options.id(),
            options,
            tokenizer,
            encoder,
            query_prompt,
            title_prefix: title_prefix.to_string(),
            title_suffix: title_suffix.to_string(),
        })
    }

    /// The text a query prompt puts before the question (the retrieval one as the model
    /// files give it).
    pub fn prompt_of(query: QueryPrompt) -> &'static str {
        match query {
            QueryPrompt::Qa => QA_PROMPT,
            QueryPrompt::Retrieval => RETRIEVAL_PROMPT,
        }
    }

    pub fn options(&self) -> GemmaOptions {
        self.options
    }

    /// The text the model reads: the prompt, then the text (for a passage, its first line
    /// in the title slot when `title` is on and there is more than one line).
    pub fn prompted(&self, text: &str, kind: TextKind) -> String {
        match kind {
            TextKind::Query => format!("{}{text}", self.query_prompt),
            TextKind::Passage => {
                let (title, body) = match text.split_once('\n') {
                    Some((title, body)) if self.options.title && !title.trim().is_empty() => (title.trim(), body),
                    _ => ("none", text),
                };
                format!("{}{title}{}{body}", self.title_prefix, self.title_suffix)
            }
        }
    }

    /// The token ids the model reads for each text: its prompted form, `<bos>` … `<eos>`,
    /// truncated to `max_seq_length`.
    pub fn token_ids(&self, texts: &[String], kind: TextKind) -> Result<Vec<Vec<u32>>> {
        let prompted: Vec<String> = texts.iter().map(|t| self.prompted(t, kind)).collect();
        let encodings = self
            .tokenizer
            .encode_batch_fast(prompted, true)
            .map_err(|e| Error::Embedding(format!("tokenizer: {e}")))?;
        Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }
}

impl Embedder for GemmaEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.options.dim
    }

    fn token_counts(&self, texts: &[String]) -> Option<Vec<usize>> {
        Some(self.token_ids(texts, TextKind::Passage).ok()?.iter().map(Vec::len).collect())
    }

    fn embed(&self, texts: &[String], kind: TextKind) -> Result<Vec<Vec<f32>>> {
        let ids = self.token_ids(texts, kind)?;
        let sequences: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        let mut vectors = self.encoder.embed(&sequences, kind)?;
        if self.options.dim < self.encoder.dim() {
            for v in &mut vectors {
                v.truncate(self.options.dim);
                super::l2_normalize(v);
            }
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_print_one_canonical_id() {
        assert_eq!(GemmaOptions::parse(NAME).unwrap().unwrap(), GemmaOptions::default());
        assert!(GemmaOptions::parse("minilm").is_none());
        assert!(GemmaOptions::parse("embeddinggemmax").is_none());
        let o = GemmaOptions::parse("embeddinggemma:dim=256,query=retrieval").unwrap().unwrap();
        assert_eq!(o, GemmaOptions { query: QueryPrompt::Retrieval, title: true, dim: 256 });
        assert_eq!(o.id(), "embeddinggemma:query=retrieval,dim=256");
        assert_eq!(GemmaOptions::parse(&o.id()).unwrap().unwrap(), o);
        let none = GemmaOptions::parse("embeddinggemma:title=none,query=qa").unwrap().unwrap();
        assert_eq!(none.id(), "embeddinggemma:title=none");
        assert_eq!(GemmaOptions::parse("embeddinggemma:dim=768,query=qa,title=passage").unwrap().unwrap().id(), NAME);
        let err = GemmaOptions::parse("embeddinggemma:dim=300").unwrap().unwrap_err().to_string();
        assert!(err.contains("trained for"), "{err}");
        let err = GemmaOptions::parse("embeddinggemma:prompt=x").unwrap().unwrap_err().to_string();
        assert!(err.contains("unknown setting"), "{err}");
    }
}
