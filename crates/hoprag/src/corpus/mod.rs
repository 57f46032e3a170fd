//! Passages and corpus ingestion.
//!
//! A passage is the unit of retrieval. Whatever the source format, every loader yields
//! [`Passage`]s with a stable id plus an [`IngestReport`] that lists everything skipped or
//! merged, so that nothing is lost silently.

mod load;
mod split;

pub use load::{load_corpus, load_entries, CorpusFormat, CorpusOptions};
pub use split::{split_document, SplitOptions};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Position of a passage in an index: the row of its vector and its lexical doc key.
pub type PassageIdx = u32;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passage {
    /// Stable id: the source's own id where it has one, otherwise derived from content
    /// (or file path and chunk number for folders), so re-ingesting the same data gives
    /// the same ids.
    pub id: String,
    pub title: String,
    pub text: String,
}

impl Passage {
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
    /// Exact duplicates (same title and text) of an earlier passage; only the first is
    /// kept.
    pub duplicates: Vec<Skipped>,
    /// Entries kept with a caveat (e.g. ids rewritten to stay unique).
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
    /// Adds a passage unless it duplicates one already present; ids are kept unique by
    /// suffixing, which is reported. `seen` holds the passages present so far (e.g.
    /// [`Dedup::with_existing`] of an index's, to add to it); `location` names the entry
    /// in the report (`corpus.jsonl:17`, `passages[3]`).
    pub fn push(&mut self, seen: &mut Dedup, passage: Passage, location: String) {
        match seen.check(&passage) {
            Verdict::Duplicate(first) => {
                self.report.duplicates.push(Skipped { location, reason: format!("exact duplicate of passage {first}") })
            }
            Verdict::IdClash => {
                let mut n = 2;
                let id = loop {
                    let candidate = format!("{}~{n}", passage.id);
                    if !seen.ids.contains_key(&candidate) {
                        break candidate;
                    }
                    n += 1;
                };
                self.report.warnings.push(Skipped {
                    location,
                    reason: format!("id {:?} already used by another passage; renamed to {id:?}", passage.id),
                });
                let passage = Passage { id, ..passage };
                seen.insert(&passage);
                self.passages.push(passage);
            }
            Verdict::New => {
                seen.insert(&passage);
                self.passages.push(passage);
            }
        }
    }
}

/// Tracks ids and contents seen so far, to detect duplicates and id clashes across
/// sources (and against an existing index when passages are added).
#[derive(Debug, Default)]
pub struct Dedup {
    ids: std::collections::HashMap<String, ()>,
    contents: std::collections::HashMap<[u8; 32], String>,
}

pub(crate) enum Verdict {
    New,
    Duplicate(String),
    IdClash,
}

impl Dedup {
    pub fn with_existing<'a>(passages: impl IntoIterator<Item = &'a Passage>) -> Self {
        let mut d = Dedup::default();
        for p in passages {
            d.insert(p);
        }
        d
    }

    fn key(p: &Passage) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(p.title.as_bytes());
        h.update([0u8]);
        h.update(p.text.as_bytes());
        h.finalize().into()
    }

    pub(crate) fn check(&self, p: &Passage) -> Verdict {
        if let Some(first) = self.contents.get(&Self::key(p)) {
            return Verdict::Duplicate(first.clone());
        }
        if self.ids.contains_key(&p.id) {
            return Verdict::IdClash;
        }
        Verdict::New
    }

    pub(crate) fn insert(&mut self, p: &Passage) {
        self.ids.insert(p.id.clone(), ());
        self.contents.entry(Self::key(p)).or_insert_with(|| p.id.clone());
    }
}
