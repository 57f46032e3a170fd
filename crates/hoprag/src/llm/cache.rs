//! An on-disk cache of chat answers, so that re-running an index build or an evaluation
//! makes no calls and gets the very same answers.
//!
//! One file per request, `DIR/ab/abcdef….json`, named by the SHA-256 of the request (see
//! [`cache_key`]) and written to a temporary file first and then renamed into place: a
//! reader sees a whole entry or none, whatever concurrent writers or an interruption do.
//! An entry that cannot be read is a miss, never an error; the next answer replaces it.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{ChatRequest, ChatResponse, Llm, Message, Usage};
use crate::error::{Error, Result};

/// Bumped when the key or the entry layout changes, which orphans (never misreads) older
/// entries.
const FORMAT: u32 = 1;

/// `cache_dir()/llm`: `$HOPRAG_CACHE/llm`, else `~/.cache/hoprag/llm`.
pub fn default_cache_dir() -> PathBuf {
    crate::models::cache_dir().join("llm")
}

/// The cache key of `request` to model `model_id`: the SHA-256 (hex) of a canonical
/// JSON of the model id and every request field.
pub fn cache_key(model_id: &str, request: &ChatRequest) -> String {
    // Destructured so that a field added to `ChatRequest` fails to compile here until
    // it is part of the key.
    let ChatRequest { messages, temperature, max_tokens, stop, json, seed, schema } = request;

    // A struct, not a `json!` map, so the field order (and hence the hash) does not
    // depend on serde_json's map features.
    #[derive(Serialize)]
    struct Canonical<'a> {
        format: u32,
        model: &'a str,
        messages: &'a [Message],
        temperature: f32,
        max_tokens: Option<u32>,
        stop: &'a [String],
        json: bool,
        seed: Option<u64>,
        // Left out when unset, so that the keys of requests without one stay as they were.
        #[serde(skip_serializing_if = "Option::is_none")]
        schema: Option<&'a str>,
    }
    let canonical = Canonical {
        format: FORMAT,
        model: model_id,
        messages,
        // -0.0 asks for the same sampling as 0.0 but would print differently.
        temperature: if *temperature == 0.0 { 0.0 } else { *temperature },
        max_tokens: *max_tokens,
        stop,
        json: *json,
        seed: *seed,
        schema: schema.as_deref(),
    };
    let bytes = serde_json::to_vec(&canonical).expect("strings and numbers always serialise");
    hex::encode(Sha256::digest(bytes))
}

/// A stored answer, with its request so entries can be audited by hand.
#[derive(Serialize, Deserialize)]
struct Entry {
    format: u32,
    key: String,
    model: String,
    request: ChatRequest,
    text: String,
    usage: Usage,
}

/// Wraps an [`Llm`] and answers repeated requests from disk. Cached answers come back
/// with `cached: true` and the usage they originally cost.
pub struct CachedLlm<L> {
    inner: L,
    dir: PathBuf,
}

impl<L: Llm> CachedLlm<L> {
    /// Caches under `dir`, creating it if needed.
    pub fn new(inner: L, dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(CachedLlm { inner, dir })
    }

    /// Caches under [`default_cache_dir`].
    pub fn in_default_dir(inner: L) -> Result<Self> {
        Self::new(inner, default_cache_dir())
    }

    pub fn inner(&self) -> &L {
        &self.inner
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the answer to the request with this key is (or would be) stored.
    pub fn entry_path(&self, key: &str) -> PathBuf {
        self.shard(key).join(format!("{key}.json"))
    }

    /// Two hex characters of fan-out keep folders small on runs with millions of calls.
    fn shard(&self, key: &str) -> PathBuf {
        self.dir.join(key.get(..2).unwrap_or("00"))
    }

    fn lookup(&self, path: &Path, key: &str) -> Option<Entry> {
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return None,
            Err(e) => {
                log::warn!("{}: unreadable LLM cache entry, asking the model instead: {e}", path.display());
                return None;
            }
        };
        match serde_json::from_slice::<Entry>(&bytes) {
            Ok(entry) if entry.format == FORMAT && entry.key == key => Some(entry),
            Ok(_) => {
                log::warn!("{}: LLM cache entry is for another request, ignoring it", path.display());
                None
            }
            Err(e) => {
                log::warn!("{}: corrupt LLM cache entry ({e}), asking the model instead", path.display());
                None
            }
        }
    }

    fn store(&self, entry: &Entry) -> Result<()> {
        let shard = self.shard(&entry.key);
        let path = self.entry_path(&entry.key);
        fs::create_dir_all(&shard).map_err(|e| Error::io(&shard, e))?;
        let bytes = serde_json::to_vec_pretty(entry).map_err(|e| Error::Other(format!("LLM cache entry: {e}")))?;
        // Same folder as the entry, so the rename cannot cross filesystems. No fsync:
        // an entry lost or torn by a power cut reads as a miss and is asked again.
        let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(&shard).map_err(|e| Error::io(&shard, e))?;
        tmp.write_all(&bytes).map_err(|e| Error::io(tmp.path(), e))?;
        tmp.persist(&path).map_err(|e| Error::io(&path, e.error))?;
        Ok(())
    }
}

impl<L: Llm> Llm for CachedLlm<L> {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn reject(&self, request: &ChatRequest) {
        let path = self.entry_path(&cache_key(self.inner.id(), request));
        match fs::remove_file(&path) {
            Ok(()) => log::debug!("{}: rejected answer dropped from the LLM cache", path.display()),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => log::warn!("{}: could not drop a rejected LLM answer: {e}", path.display()),
        }
        self.inner.reject(request);
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let start = Instant::now();
        let key = cache_key(self.inner.id(), request);
        if let Some(entry) = self.lookup(&self.entry_path(&key), &key) {
            let latency_ms = start.elapsed().as_secs_f64() * 1000.0;
            return Ok(ChatResponse { text: entry.text, usage: entry.usage, cached: true, retries: 0, latency_ms });
        }
        let response = self.inner.chat(request)?;
        // An empty answer, or one without JSON where JSON was asked for, is returned
        // (the caller counts the failure) but never kept: a re-run asks again.
        if response.text.trim().is_empty() || (request.json && super::parse_lenient(&response.text).is_err()) {
            return Ok(response);
        }
        let entry = Entry {
            format: FORMAT,
            key,
            model: self.inner.id().to_string(),
            request: request.clone(),
            text: response.text.clone(),
            usage: response.usage,
        };
        // The answer is paid for: return it even if it cannot be kept.
        if let Err(e) = self.store(&entry) {
            log::warn!("could not cache an LLM answer: {e}");
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Echoes the last message and counts the calls that reach it; "fail" fails.
    #[derive(Default)]
    struct Echo {
        calls: AtomicUsize,
    }

    impl Llm for Echo {
        fn id(&self) -> &str {
            "echo"
        }
        fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let last = &request.messages.last().expect("a message").content;
            if last == "fail" {
                return Err(Error::Other("echo failure".into()));
            }
            Ok(ChatResponse {
                text: format!("echo: {last}"),
                usage: Usage { prompt_tokens: 7, completion_tokens: 3 },
                cached: false,
                retries: 0,
                latency_ms: 5.0,
            })
        }
    }

    fn calls(llm: &CachedLlm<Echo>) -> usize {
        llm.inner().calls.load(Ordering::SeqCst)
    }

    #[test]
    fn key_is_stable_and_covers_every_field() {
        let base = ChatRequest::user("q");
        let key = cache_key("m", &base);
        assert_eq!(key.len(), 64);
        assert!(key.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(key, cache_key("m", &ChatRequest::user("q")), "equal requests, equal keys");
        assert_eq!(key, cache_key("m", &ChatRequest { temperature: -0.0, ..base.clone() }));

        let variants = [
            cache_key("other-model", &base),
            cache_key("m", &ChatRequest::user("q2")),
            cache_key("m", &ChatRequest::new(vec![Message::system("q")])),
            cache_key("m", &ChatRequest { temperature: 0.3, ..base.clone() }),
            cache_key("m", &ChatRequest { max_tokens: Some(5), ..base.clone() }),
            cache_key("m", &ChatRequest { stop: vec!["x".into()], ..base.clone() }),
            cache_key("m", &ChatRequest { json: true, ..base.clone() }),
            cache_key("m", &ChatRequest { seed: Some(1), ..base.clone() }),
            cache_key("m", &base.clone().with_schema(r#"{"type": "object"}"#)),
        ];
        for (i, v) in variants.iter().enumerate() {
            assert_ne!(&key, v, "variant {i} shares the base key");
        }
    }

    #[test]
    fn second_run_is_served_from_disk_with_the_original_usage() {
        let dir = tempfile::tempdir().unwrap();
        let request = ChatRequest::user("hello");
        let first = CachedLlm::new(Echo::default(), dir.path()).unwrap();
        let fresh = first.chat(&request).unwrap();
        assert!(!fresh.cached);
        let key = cache_key("echo", &request);
        assert!(dir.path().join(&key[..2]).join(format!("{key}.json")).is_file(), "sharded entry");

        // A new instance over the same folder stands for a re-run.
        let rerun = CachedLlm::new(Echo::default(), dir.path()).unwrap();
        let hit = rerun.chat(&request).unwrap();
        assert_eq!(calls(&rerun), 0);
        assert!(hit.cached);
        assert_eq!((hit.text.as_str(), hit.usage), (fresh.text.as_str(), fresh.usage));
        rerun.chat(&ChatRequest::user("other")).unwrap();
        assert_eq!(calls(&rerun), 1, "a different request misses");
    }

    #[test]
    fn unusable_entries_are_misses_and_get_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let llm = CachedLlm::new(Echo::default(), dir.path()).unwrap();
        let request = ChatRequest::user("hello");
        let path = llm.entry_path(&cache_key("echo", &request));
        for junk in [&b"{\"format\": 1, \"key\": \"tru"[..], b"", b"\xff\xfe not utf-8"] {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, junk).unwrap();
            let before = calls(&llm);
            assert!(!llm.chat(&request).unwrap().cached);
            assert_eq!(calls(&llm), before + 1);
            assert!(llm.chat(&request).unwrap().cached, "the fresh answer replaced the bad entry");
        }
        // A well-formed entry under the wrong name (copied by hand, say) is not trusted.
        let other = llm.entry_path(&cache_key("echo", &ChatRequest::user("other")));
        fs::create_dir_all(other.parent().unwrap()).unwrap();
        fs::copy(&path, &other).unwrap();
        assert_eq!(llm.chat(&ChatRequest::user("other")).unwrap().text, "echo: other");
    }

    #[test]
    fn failures_are_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let llm = CachedLlm::new(Echo::default(), dir.path()).unwrap();
        assert!(llm.chat(&ChatRequest::user("fail")).is_err());
        assert!(llm.chat(&ChatRequest::user("fail")).is_err());
        assert_eq!(calls(&llm), 2);
    }

    #[test]
    fn bad_answers_are_never_kept() {
        let dir = tempfile::tempdir().unwrap();
        let llm = CachedLlm::new(Echo::default(), dir.path()).unwrap();
        // Echo answers "echo: ...", which holds no JSON: fine as text, not as JSON.
        let json = ChatRequest { json: true, ..ChatRequest::user("prose, no JSON") };
        llm.chat(&json).unwrap();
        llm.chat(&json).unwrap();
        assert_eq!(calls(&llm), 2, "an answer without JSON to a JSON request is asked again");
        let text = ChatRequest::user("prose");
        llm.chat(&text).unwrap();
        assert!(llm.chat(&text).unwrap().cached);
        // A caller that finds the shape wrong rejects it; the next call asks again.
        llm.reject(&text);
        assert!(!llm.chat(&text).unwrap().cached);
        llm.reject(&ChatRequest::user("never asked")); // nothing to drop: no error
    }

    #[test]
    fn concurrent_writers_leave_one_whole_entry() {
        let dir = tempfile::tempdir().unwrap();
        let llm = CachedLlm::new(Echo::default(), dir.path()).unwrap();
        let request = ChatRequest::user("race");
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| assert_eq!(llm.chat(&request).unwrap().text, "echo: race"));
            }
        });
        let key = cache_key("echo", &request);
        let shard: Vec<_> = fs::read_dir(dir.path().join(&key[..2])).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(shard, vec![std::ffi::OsString::from(format!("{key}.json"))], "no temporary files left");
        let before = calls(&llm);
        assert!(llm.chat(&request).unwrap().cached);
        assert_eq!(calls(&llm), before);
    }
}
