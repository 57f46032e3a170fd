//! Passages and corpus ingestion.
//!
//! A passage is the unit of retrieval. Whatever the source format, every loader yields
//! [`Passage`]s with a stable id plus an [`IngestReport`] that lists everything skipped or
//! merged, so that nothing is lost silently.

mod load;
mod split;

pub use load::{load_corpus, load_entries, CorpusFormat, CorpusOptions};
pub use split::{split_document, SplitOptions};

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Position of a passage in an index: the row of its vector and its lexical doc key.
pub type PassageIdx = u32;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passage {
    /// Stable id: the source's own id where it has one, otherwise derived from content
    /// (or file path and chunk number for folders), so re-ingesting the same data gives
    /// the same ids.
    pub id: String,
    pub title: String,
    pub text: String,
    /// The document the passage belongs to (a folder corpus's file, a JSONL row's `doc`);
    /// `None`: the passage is a document of its own, named by its id. Documents and
    /// passages share one id space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    /// Anything the source says about the passage (source, url, date, ...), returned with
    /// it and never indexed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A passage's metadata: a JSON object.
pub type Meta = serde_json::Map<String, serde_json::Value>;

impl Passage {
    /// A passage that is a document of its own, with no metadata.
    pub fn new(id: impl Into<String>, title: impl Into<String>, text: impl Into<String>) -> Passage {
        Passage { id: id.into(), title: title.into(), text: text.into(), doc: None, meta: None }
    }

    /// The id of the document the passage belongs to.
    pub fn document(&self) -> &str {
        self.doc.as_deref().unwrap_or(&self.id)
    }

    /// The text that is embedded and lexically indexed: title, newline, text (the
    /// convention of the HippoRAG evaluations the reference figures come from).
    pub fn index_text(&self) -> String {
        if self.title.is_empty() {
            self.text.clone()
        } else {
            format!("{}\n{}", self.title, self.text)
        }
    }

    /// A content-derived id: the first 16 hex digits of SHA-256(title, newline, text).
    pub fn content_id(title: &str, text: &str) -> String {
        let mut h = Sha256::new();
        h.update(title.as_bytes());
        h.update(b"\n");
        h.update(text.as_bytes());
        hex::encode(&h.finalize()[..8])
    }
}

/// Sorts passages into the canonical order every index generation keeps them in: by id,
/// bytewise. Whatever order a corpus lists its passages in, and whatever edits made an
/// index, the same passages are then the same index.
pub fn canonical_order(passages: &mut [Passage]) {
    passages.sort_unstable_by(|a, b| a.id.cmp(&b.id));
}

/// The pairs of rows `(i, j)` where `a[i]` and `b[j]` have the same id, both lists in
/// canonical order (a merge: no id is hashed).
pub fn same_ids<'a>(a: &'a [Passage], b: &'a [Passage]) -> impl Iterator<Item = (usize, usize)> + 'a {
    let (mut i, mut j) = (0, 0);
    std::iter::from_fn(move || {
        while i < a.len() && j < b.len() {
            match a[i].id.cmp(&b[j].id) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    let pair = (i, j);
                    (i, j) = (i + 1, j + 1);
                    return Some(pair);
                }
            }
        }
        None
    })
}

/// Something that was not ingested, or ingested differently from how it was written,
/// with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// File and entry, e.g. `corpus.jsonl:17` or `corpus.json[42]`.
    pub location: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IngestReport {
    /// Entries read from the source(s), before skipping.
    pub entries: usize,
    /// Entries that could not be used at all.
    pub skipped: Vec<Skipped>,
    /// Entries that repeat an earlier one exactly (same id and content); kept once.
    pub duplicates: Vec<Skipped>,
    /// Entries kept with a caveat.
    pub warnings: Vec<Skipped>,
}

impl IngestReport {
    pub fn merge(&mut self, other: IngestReport) {
        self.entries += other.entries;
        self.skipped.extend(other.skipped);
        self.duplicates.extend(other.duplicates);
        self.warnings.extend(other.warnings);
    }

    /// One line for a terminal: counts only; the details are in the structured report.
    pub fn summary(&self, kept: usize) -> String {
        format!(
            "{} entries read, {} passages kept, {} skipped, {} exact duplicates dropped, {} warnings",
            self.entries,
            kept,
            self.skipped.len(),
            self.duplicates.len(),
            self.warnings.len()
        )
    }
}

/// Passages plus the report of how they were read.
#[derive(Debug, Clone, Default)]
pub struct LoadedCorpus {
    pub passages: Vec<Passage>,
    pub report: IngestReport,
}

impl LoadedCorpus {
    /// Adds a passage. The same passage twice (same id, same content) is kept once and
    /// reported; the same id for two different passages is an error naming both entries,
    /// because which one was meant cannot be guessed and a fresh build of the same input
    /// must fail the same way. The same text under two ids is two passages. `location`
    /// names the entry (`corpus.jsonl:17`, `passages[3]`).
    pub fn push(&mut self, seen: &mut Dedup, passage: Passage, location: String) -> Result<()> {
        match seen.ids.entry(passage.id.clone()) {
            Entry::Occupied(first) => {
                let (first_location, key) = first.get();
                if *key == Dedup::key(&passage) {
                    self.report.duplicates.push(Skipped {
                        location,
                        reason: format!("the same passage as {first_location} (id {:?})", passage.id),
                    });
                    Ok(())
                } else {
                    Err(Error::Input {
                        path: location.into(),
                        message: format!(
                            "id {:?} is already used by a different passage at {first_location}; ids must be \
                             unique within one input",
                            passage.id
                        ),
                    })
                }
            }
            Entry::Vacant(slot) => {
                slot.insert((location, Dedup::key(&passage)));
                self.passages.push(passage);
                Ok(())
            }
        }
    }
}

/// The ids seen so far in one input, with where each was read and a hash of its content.
#[derive(Debug, Default)]
pub struct Dedup {
    ids: HashMap<String, (String, [u8; 32])>,
}

impl Dedup {
    fn key(p: &Passage) -> [u8; 32] {
        let mut h = Sha256::new();
        for field in [&p.title, &p.text, p.doc.as_ref().unwrap_or(&String::new())] {
            h.update((field.len() as u64).to_le_bytes());
            h.update(field.as_bytes());
        }
        h.update(p.meta.as_ref().map(|m| serde_json::to_vec(m).unwrap_or_default()).unwrap_or_default());
        h.finalize().into()
    }
}
