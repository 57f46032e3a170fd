//! The tokenizer of a GGUF chat model, built from the file's own `tokenizer.ggml.*`
//! metadata into a `tokenizers::Tokenizer`, so that nothing is downloaded at run time.
//!
//! Two vocabulary kinds are supported, as llama.cpp reads them:
//! - `gpt2`: byte-level BPE with an explicit merge list (SmolLM2, Qwen-style ChatML
//!   models). The `tokenizer.ggml.pre` name picks the pre-tokenizer split.
//! - `llama`: SentencePiece BPE (Gemma, Llama 2). The file holds scores but no merges:
//!   SentencePiece merges the adjacent pair whose union is the highest-scoring vocabulary
//!   piece, so every split of a piece into two pieces is a merge, ranked by the piece's
//!   score. Characters outside the vocabulary fall back to `<0xNN>` byte pieces.
//!
//! Control tokens (`<|im_start|>`, `<end_of_turn>`, ...) are kept out of the text
//! matcher: chat templates insert them by id, so a passage that happens to contain
//! `<|im_end|>` cannot end a turn. User-defined tokens (Gemma's runs of newlines and
//! spaces, HTML tags) are matched in the raw text before BPE, as llama.cpp does.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::{Prepend, Replace};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence as PreSequence;
use tokenizers::{AddedToken, DecoderWrapper, NormalizerWrapper, PreTokenizerWrapper, Tokenizer};

use crate::error::{Error, Result};

/// SentencePiece's visible space.
const SPACE: char = '\u{2581}';

/// GGUF token types (llama.cpp's `llama_token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    fn from_code(code: i64) -> Option<TokenType> {
        Some(match code {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => return None,
        })
    }
}

/// The `tokenizer.ggml.*` metadata of a GGUF file.
#[derive(Debug, Clone)]
pub struct GgufVocab {
    /// `gpt2` or `llama`.
    pub model: String,
    /// The pre-tokenizer name (`tokenizer.ggml.pre`), `default` when absent.
    pub pre: String,
    pub tokens: Vec<String>,
    pub types: Vec<TokenType>,
    /// SentencePiece scores; empty for `gpt2`.
    pub scores: Vec<f32>,
    /// `left right` pairs, highest priority first; empty for `llama`.
    pub merges: Vec<String>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    /// End of turn, where the file names one apart from EOS.
    pub eot: Option<u32>,
    pub add_bos: bool,
    pub add_space_prefix: bool,
}

impl GgufVocab {
    /// Reads the vocabulary from GGUF metadata; `path` is only for error messages.
    pub fn from_metadata(metadata: &HashMap<String, Value>, path: &Path) -> Result<GgufVocab> {
        let field_error = |key: &str, what: &str| Error::input(path, format!("GGUF metadata {key}: {what}"));
        let get = |key: &str| metadata.get(key);
        let string = |key: &str| -> Result<Option<String>> {
            match get(key) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(v) => Err(field_error(key, &format!("expected a string, found {:?}", v.value_type()))),
            }
        };
        let array = |key: &str| -> Result<Option<&Vec<Value>>> {
            match get(key) {
                None => Ok(None),
                Some(Value::Array(items)) => Ok(Some(items)),
                Some(v) => Err(field_error(key, &format!("expected an array, found {:?}", v.value_type()))),
            }
        };
        let id = |key: &str| -> Result<Option<u32>> {
            match get(key) {
                None => Ok(None),
                Some(v) => integer(v).map(|i| Some(i as u32)).ok_or_else(|| field_error(key, "expected a token id")),
            }
        };
        let flag = |key: &str, default: bool| -> Result<bool> {
            match get(key) {
                None => Ok(default),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(field_error(key, "expected a boolean")),
            }
        };

        let model = string("tokenizer.ggml.model")?
            .ok_or_else(|| field_error("tokenizer.ggml.model", "missing: the file carries no tokenizer"))?;
        let tokens: Vec<String> = array("tokenizer.ggml.tokens")?
            .ok_or_else(|| field_error("tokenizer.ggml.tokens", "missing"))?
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                _ => Err(field_error("tokenizer.ggml.tokens", &format!("entry {i} is not a string"))),
            })
            .collect::<Result<_>>()?;
        let types = match array("tokenizer.ggml.token_type")? {
            None => vec![TokenType::Normal; tokens.len()],
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    integer(v).and_then(TokenType::from_code).ok_or_else(|| {
                        field_error("tokenizer.ggml.token_type", &format!("entry {i} is not a token type ({v:?})"))
                    })
                })
                .collect::<Result<_>>()?,
        };
        let scores = match array("tokenizer.ggml.scores")? {
            None => Vec::new(),
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::F32(x) => Ok(*x),
                    Value::F64(x) => Ok(*x as f32),
                    _ => Err(field_error("tokenizer.ggml.scores", &format!("entry {i} is not a number"))),
                })
                .collect::<Result<_>>()?,
        };
        let merges = match array("tokenizer.ggml.merges")? {
            None => Vec::new(),
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(field_error("tokenizer.ggml.merges", &format!("entry {i} is not a string"))),
                })
                .collect::<Result<_>>()?,
        };
        let vocab = GgufVocab {
            add_bos: flag("tokenizer.ggml.add_bos_token", model == "llama")?,
            add_space_prefix: flag("tokenizer.ggml.add_space_prefix", false)?,
            pre: string("tokenizer.ggml.pre")?.unwrap_or_else(|| "default".into()),
            bos: id("tokenizer.ggml.bos_token_id")?,
            eos: id("tokenizer.ggml.eos_token_id")?,
            eot: id("tokenizer.ggml.eot_token_id")?,
            model,
            tokens,
            types,
            scores,
            merges,
        };
        vocab.check().map_err(|message| Error::input(path, message))?;
        Ok(vocab)
    }

    fn check(&self) -> std::result::Result<(), String> {
        let n = self.tokens.len();
        if n == 0 {
            return Err("GGUF metadata tokenizer.ggml.tokens: empty".into());
        }
        if self.types.len() != n {
            return Err(format!(
                "GGUF metadata tokenizer.ggml.token_type: {} entries for {n} tokens",
                self.types.len()
            ));
        }
        if !self.scores.is_empty() && self.scores.len() != n {
            return Err(format!("GGUF metadata tokenizer.ggml.scores: {} entries for {n} tokens", self.scores.len()));
        }
        for (key, id) in [("bos", self.bos), ("eos", self.eos), ("eot", self.eot)] {
            if id.is_some_and(|id| id as usize >= n) {
                return Err(format!("GGUF metadata tokenizer.ggml.{key}_token_id: {id:?} is outside the {n} tokens"));
            }
        }
        Ok(())
    }

    /// Builds the tokenizer.
    pub fn build(&self) -> Result<GgufTokenizer> {
        let mut vocab = Vocab::default();
        let mut duplicates = 0usize;
        for (id, token) in self.tokens.iter().enumerate() {
            if vocab.contains_key(token) {
                // Two ids share a text (unused slots in some files): the first one is
                // the one text maps to; both still decode.
                duplicates += 1;
            } else {
                vocab.insert(token.clone(), id as u32);
            }
        }
        if duplicates > 0 {
            log::debug!("GGUF vocabulary: {duplicates} token texts repeat an earlier one");
        }
        let mut tokenizer = match self.model.as_str() {
            "gpt2" => self.byte_level(vocab)?,
            "llama" => self.sentencepiece(vocab)?,
            other => {
                return Err(Error::Model(format!(
                    "GGUF metadata tokenizer.ggml.model = {other:?} is not supported (supported: gpt2, llama)"
                )))
            }
        };
        let mut control = HashMap::new();
        let mut user_defined = Vec::new();
        for (id, (token, kind)) in self.tokens.iter().zip(&self.types).enumerate() {
            match kind {
                TokenType::Control => {
                    control.entry(token.clone()).or_insert(id as u32);
                }
                // Byte-level vocabularies store texts in byte-level form, which raw
                // text never matches; their BPE handles them like any piece.
                TokenType::UserDefined if self.model == "llama" => {
                    user_defined.push(AddedToken::from(token.clone(), false).normalized(false))
                }
                _ => {}
            }
        }
        tokenizer.add_tokens(&user_defined);
        let mut stop: Vec<u32> = self.eos.into_iter().chain(self.eot).collect();
        stop.dedup();
        Ok(GgufTokenizer { inner: tokenizer, control, bos: self.bos.filter(|_| self.add_bos), stop })
    }

    fn byte_level(&self, vocab: Vocab) -> Result<Tokenizer> {
        let digits_apart = match self.pre.as_str() {
            "gpt2" | "default" | "mpt" | "olmo" => false,
            "smollm" | "starcoder" | "refact" | "codeshell" => true,
            other => {
                return Err(Error::Model(format!(
                    "GGUF metadata tokenizer.ggml.pre = {other:?}: this pre-tokenizer is not supported (supported: \
                     smollm, starcoder, refact, codeshell, gpt2, mpt, olmo)"
                )))
            }
        };
        let mut merges = Vec::with_capacity(self.merges.len());
        for (i, merge) in self.merges.iter().enumerate() {
            let (left, right) = merge
                .split_once(' ')
                .filter(|(l, r)| !l.is_empty() && !r.is_empty() && !r.contains(' '))
                .ok_or_else(|| Error::Model(format!("GGUF metadata tokenizer.ggml.merges: entry {i} {merge:?}")))?;
            merges.push((left.to_string(), right.to_string()));
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| Error::Model(format!("byte-level BPE from GGUF metadata: {e}")))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let byte_level = ByteLevel::new(false, true, true);
        let pre: PreTokenizerWrapper = if digits_apart {
            // Each digit on its own, then GPT-2's split.
            PreSequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
        } else {
            byte_level.into()
        };
        tokenizer.with_pre_tokenizer(Some(pre));
        tokenizer.with_decoder(Some(DecoderWrapper::ByteLevel(byte_level)));
        Ok(tokenizer)
    }

    fn sentencepiece(&self, vocab: Vocab) -> Result<Tokenizer> {
        if self.scores.is_empty() {
            return Err(Error::Model(
                "GGUF metadata tokenizer.ggml.scores: missing for a SentencePiece vocabulary".into(),
            ));
        }
        let merges = self.score_merges(&vocab);
        let unk = self.types.iter().position(|t| *t == TokenType::Unknown).map(|i| self.tokens[i].clone());
        let mut builder = BPE::builder().vocab_and_merges(vocab, merges).byte_fallback(true).fuse_unk(true);
        if let Some(unk) = unk {
            builder = builder.unk_token(unk);
        }
        let bpe = builder.build().map_err(|e| Error::Model(format!("SentencePiece BPE from GGUF metadata: {e}")))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let space =
            Replace::new(" ", SPACE.to_string()).map_err(|e| Error::Model(format!("SentencePiece normaliser: {e}")))?;
        let mut decoders: Vec<DecoderWrapper> = vec![
            Replace::new(SPACE.to_string(), " ").map_err(|e| Error::Model(e.to_string()))?.into(),
            ByteFallback::new().into(),
            Fuse::new().into(),
        ];
        if self.add_space_prefix {
            let normalizers: Vec<NormalizerWrapper> = vec![Prepend::new(SPACE.to_string()).into(), space.into()];
            tokenizer.with_normalizer(Some(tokenizers::normalizers::Sequence::new(normalizers)));
            decoders.push(Strip::new(' ', 1, 0).into());
        } else {
            tokenizer.with_normalizer(Some(space));
        }
        tokenizer.with_decoder(Some(DecoderSequence::new(decoders)));
        Ok(tokenizer)
    }

    /// SentencePiece BPE as a ranked merge list: every split of a normal piece into two
    /// normal pieces, the highest-scoring union first (ties: lower id, then the
    /// leftmost split).
    fn score_merges(&self, vocab: &Vocab) -> Vec<(String, String)> {
        let normal = |text: &str| vocab.get(text).is_some_and(|&id| self.types[id as usize] == TokenType::Normal);
        let mut ranked: Vec<(f32, u32, usize, String, String)> = Vec::new();
        for (id, piece) in self.tokens.iter().enumerate() {
            if self.types[id] != TokenType::Normal || vocab.get(piece) != Some(&(id as u32)) {
                continue;
            }
            for (at, _) in piece.char_indices().skip(1) {
                let (left, right) = piece.split_at(at);
                if normal(left) && normal(right) {
                    ranked.push((self.scores[id], id as u32, at, left.to_string(), right.to_string()));
                }
            }
        }
        ranked.sort_by(|a, b| crate::rank::desc(a.0, b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        ranked.into_iter().map(|(_, _, _, l, r)| (l, r)).collect()
    }
}

fn integer(v: &Value) -> Option<i64> {
    Some(match v {
        Value::U8(x) => i64::from(*x),
        Value::I8(x) => i64::from(*x),
        Value::U16(x) => i64::from(*x),
        Value::I16(x) => i64::from(*x),
        Value::U32(x) => i64::from(*x),
        Value::I32(x) => i64::from(*x),
        Value::U64(x) => i64::try_from(*x).ok()?,
        Value::I64(x) => *x,
        _ => return None,
    })
}

/// A GGUF model's tokenizer: text in and out, and the control tokens by name.
pub struct GgufTokenizer {
    inner: Tokenizer,
    control: HashMap<String, u32>,
    /// The id to start every prompt with, where the model wants one.
    pub bos: Option<u32>,
    /// End of sequence / end of turn ids from the metadata.
    stop: Vec<u32>,
}

impl GgufTokenizer {
    /// The ids of `text`, control-token texts in it treated as plain text.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let encoding = self.inner.encode_fast(text, false).map_err(|e| Error::Model(format!("tokenizer: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The text of `ids`, control tokens left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let plain: Vec<u32> = ids.iter().copied().filter(|id| !self.is_control(*id)).collect();
        self.inner.decode(&plain, false).map_err(|e| Error::Model(format!("tokenizer: {e}")))
    }

    /// The id of a control token (`<|im_start|>`, `<end_of_turn>`, ...).
    pub fn control(&self, text: &str) -> Option<u32> {
        self.control.get(text).copied()
    }

    fn is_control(&self, id: u32) -> bool {
        self.control.get(self.inner.id_to_token(id).as_deref().unwrap_or("")) == Some(&id)
    }

    /// End-of-sequence and end-of-turn ids the metadata names.
    pub fn stop_ids(&self) -> &[u32] {
        &self.stop
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Value {
        Value::Array(items.iter().map(|s| Value::String(s.to_string())).collect())
    }

    fn ints(items: &[i32]) -> Value {
        Value::Array(items.iter().map(|&i| Value::I32(i)).collect())
    }

    /// A byte-level vocabulary: the bytes of "a", "b", "c", "1", "2", " " ("Ġ"), "<", "|",
    /// ">", their merges into "ab", "Ġab", "abc", "12", and two control tokens.
    fn byte_level_metadata(pre: &str) -> HashMap<String, Value> {
        let tokens = ["<|ab|>", "<|c|>", "a", "b", "c", "1", "2", "Ġ", "ab", "Ġa", "Ġab", "abc", "12", "<", "|", ">"];
        let types = [3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1];
        HashMap::from([
            ("tokenizer.ggml.model".to_string(), Value::String("gpt2".into())),
            ("tokenizer.ggml.pre".to_string(), Value::String(pre.into())),
            ("tokenizer.ggml.tokens".to_string(), strings(&tokens)),
            ("tokenizer.ggml.token_type".to_string(), ints(&types)),
            ("tokenizer.ggml.merges".to_string(), strings(&["a b", "Ġ ab", "ab c", "1 2"])),
            ("tokenizer.ggml.eos_token_id".to_string(), Value::U32(1)),
        ])
    }

    fn ids(t: &GgufTokenizer, text: &str) -> Vec<u32> {
        t.encode(text).unwrap()
    }

    #[test]
    fn byte_level_bpe_follows_the_merge_list() {
        let vocab = GgufVocab::from_metadata(&byte_level_metadata("gpt2"), Path::new("x.gguf")).unwrap();
        let t = vocab.build().unwrap();
        assert_eq!(ids(&t, "abc ab"), [11, 10], "abc, then Ġ+ab");
        assert_eq!(ids(&t, " a"), [7, 2], "no merge Ġ+a in the list, though Ġa is a token");
        assert_eq!(ids(&t, "ba"), [3, 2], "no merge b+a");
        // Without the digit split, "12" is one word and merges.
        assert_eq!(ids(&t, "12"), [12]);
        assert_eq!(t.decode(&[11, 10]).unwrap(), "abc ab");
        assert_eq!(t.stop_ids(), [1]);
        assert_eq!(t.bos, None, "byte-level files add no BOS unless they say so");
        // Control texts in the input are plain text, never the control ids.
        assert_eq!(ids(&t, "<|ab|>"), [13, 14, 8, 14, 15]);
        assert_eq!(t.control("<|ab|>"), Some(0));
        assert_eq!(t.decode(&[0, 2, 1]).unwrap(), "a", "control ids are left out of decoded text");
    }

    #[test]
    fn smollm_pre_tokenizer_splits_digits() {
        let vocab = GgufVocab::from_metadata(&byte_level_metadata("smollm"), Path::new("x.gguf")).unwrap();
        assert_eq!(ids(&vocab.build().unwrap(), "12"), [5, 6]);
        let unknown = GgufVocab::from_metadata(&byte_level_metadata("llama-bpe"), Path::new("x.gguf")).unwrap();
        assert!(unknown.build().err().unwrap().to_string().contains("llama-bpe"));
    }

    /// A SentencePiece vocabulary with scores: "▁the" is the best piece, "he" beats "th".
    fn sentencepiece_metadata() -> HashMap<String, Value> {
        let tokens = [
            "<pad>",
            "<eos>",
            "<bos>",
            "<unk>",
            "<start_of_turn>",
            "\n\n",
            "<0x41>",
            "<0xC3>",
            "<0xA9>",
            "▁",
            "t",
            "h",
            "e",
            "th",
            "he",
            "▁t",
            "▁the",
            "the",
            "x",
        ];
        let types = [3, 3, 3, 2, 3, 4, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1];
        let scores = [
            0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -9.0, -10.0, -10.0, -10.0, -5.0, -4.0, -3.0, -1.0, -2.0, -10.0,
        ];
        HashMap::from([
            ("tokenizer.ggml.model".to_string(), Value::String("llama".into())),
            ("tokenizer.ggml.tokens".to_string(), strings(&tokens)),
            ("tokenizer.ggml.token_type".to_string(), ints(&types)),
            ("tokenizer.ggml.scores".to_string(), Value::Array(scores.iter().map(|&s| Value::F32(s)).collect())),
            ("tokenizer.ggml.bos_token_id".to_string(), Value::U32(2)),
            ("tokenizer.ggml.eos_token_id".to_string(), Value::U32(1)),
            ("tokenizer.ggml.add_bos_token".to_string(), Value::Bool(true)),
            ("tokenizer.ggml.add_space_prefix".to_string(), Value::Bool(false)),
        ])
    }

    #[test]
    fn sentencepiece_merges_follow_scores() {
        let vocab = GgufVocab::from_metadata(&sentencepiece_metadata(), Path::new("x.gguf")).unwrap();
        let merges: Vec<_> =
            vocab.score_merges(&vocab.tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect());
        let pairs: Vec<String> = merges.iter().map(|(l, r)| format!("{l}+{r}")).collect();
        // ▁the (-1) from ▁+the, ▁t+he; the (-2) from t+he, th+e; ▁t (-3); he (-4); th (-5).
        assert_eq!(pairs, ["▁+the", "▁t+he", "t+he", "th+e", "▁+t", "h+e", "t+h"]);

        let t = vocab.build().unwrap();
        // " the": ▁+t (-3) first, then h+e (-4), then ▁t+he; "the": h+e beats t+h.
        assert_eq!(ids(&t, " the"), [16]);
        assert_eq!(ids(&t, "the"), [17]);
        assert_eq!(ids(&t, "tx"), [10, 18]);
        // User-defined pieces match in the raw text; unknown characters fall back to bytes.
        assert_eq!(ids(&t, "x\n\nx"), [18, 5, 18]);
        assert_eq!(ids(&t, "A"), [6], "A is only a byte piece");
        assert_eq!(ids(&t, "é"), [7, 8], "two UTF-8 bytes");
        assert_eq!(t.decode(&[7, 8, 16, 5]).unwrap(), "é the\n\n");
        assert!(!ids(&t, "<start_of_turn>").contains(&4), "control text is not the control id");
        assert_eq!(t.bos, Some(2));
        assert_eq!(t.control("<start_of_turn>"), Some(4));
    }

    #[test]
    fn bad_metadata_names_the_field() {
        let mut md = sentencepiece_metadata();
        md.insert("tokenizer.ggml.token_type".into(), ints(&[1, 1]));
        let err = GgufVocab::from_metadata(&md, Path::new("m.gguf")).unwrap_err().to_string();
        assert!(err.contains("m.gguf") && err.contains("token_type"), "{err}");
        md.remove("tokenizer.ggml.model");
        let err = GgufVocab::from_metadata(&md, Path::new("m.gguf")).unwrap_err().to_string();
        assert!(err.contains("tokenizer.ggml.model"), "{err}");
        let mut md = sentencepiece_metadata();
        md.insert("tokenizer.ggml.eos_token_id".into(), Value::U32(999));
        assert!(GgufVocab::from_metadata(&md, Path::new("m.gguf")).unwrap_err().to_string().contains("eos"));
        let mut md = byte_level_metadata("gpt2");
        md.insert("tokenizer.ggml.merges".into(), strings(&["a b", "abc"]));
        let vocab = GgufVocab::from_metadata(&md, Path::new("m.gguf")).unwrap();
        assert!(vocab.build().err().unwrap().to_string().contains("entry 1"));
    }
}
