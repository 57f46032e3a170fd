//! BM25 on PostgreSQL through tantivy: a build's tantivy index is kept in the database
//! (`lexical_files`, schema version 3) and loaded into memory by every process that
//! opens the generation, so both stores search the same index with the same engine.
//!
//! Generations written since are collections in parts ([`PartedBm25`]), as on the
//! folder store: an edit stores only its new part and the collection's ids, and lists
//! the parts it keeps where they are, under the builds that stored them (a build stays
//! while a kept generation lists one of its parts). A process keeps the parts it opened,
//! so reading an edited generation reads its new part only.
//!
//! Why not SQL: BM25 over a postings table aggregates every posting of every query
//! term (627 ms a query at a million passages, docs/scale.md), where tantivy's
//! block-max WAND skips most of them. What a server holds is the index's files, a
//! small fraction of the passages' text and vectors it loads anyway.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use postgres::{Client, GenericClient};
use serde::{Deserialize, Serialize};

use super::parts;
use crate::error::{Error, Result};
use crate::index::{LexicalIndex, LexicalPart, PartedBm25, TantivyBm25, PARTS_IDS};
use crate::progress::Progress;

/// What a generation row records of its tantivy index: one index (`meta` and `files`,
/// generations written before parts), or a collection in parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LexicalFiles {
    /// tantivy's `meta.json`: the generation's segments.
    #[serde(default)]
    pub meta: String,
    /// The build's stored files the segments consist of.
    #[serde(default)]
    pub files: Vec<StoredFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parted: Option<StoredParts>,
}

/// A collection in parts: its parts in order, each with the build that stores its files
/// (named `PART/FILE`), and its ids, stored by the generation's own build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredParts {
    pub parts: Vec<StoredPart>,
    pub ids: StoredFile,
    pub texts: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredPart {
    pub build: i64,
    pub name: String,
    pub files: Vec<StoredFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredFile {
    pub name: String,
    pub bytes: u64,
}

impl LexicalFiles {
    /// Bytes the generation's lexical index takes.
    pub fn bytes(&self) -> u64 {
        let parted = self
            .parted
            .as_ref()
            .map_or(0, |p| p.ids.bytes + p.parts.iter().flat_map(|part| &part.files).map(|f| f.bytes).sum::<u64>());
        self.meta.len() as u64 + self.files.iter().map(|f| f.bytes).sum::<u64>() + parted
    }
}

/// Parts a process has opened, by build and name, while any index holds them: an
/// edited generation shares all but its new part with the one before.
#[derive(Default)]
pub(crate) struct OpenParts(Mutex<HashMap<(i64, String), Weak<LexicalPart>>>);

/// Builds the collection of build `build`'s passages (`texts`, their index texts in
/// order) in one part, stores its files, and returns what the generation row records.
pub(crate) fn write(
    client: &mut Client,
    build: i64,
    texts: &[String],
    progress: &dyn Progress,
    location: &str,
) -> Result<LexicalFiles> {
    let tmp = temp_dir()?;
    progress.start("lexical index", texts.len() as u64);
    PartedBm25::create(tmp.path(), texts, &|n: usize| progress.advance(n as u64))?;
    progress.finish();
    store_collection(client, build, tmp.path(), &[], location)
}

/// Stores the collection staged in `dir` after an edit of the generation whose lexical
/// files are `before` (staged by [`PartedBm25::stage_after`]: its layout, ids and new
/// part) as build `build`'s; the parts it keeps are listed where they are. `None` where
/// `before` is not a collection in parts.
pub(crate) fn write_after(
    client: &mut Client,
    build: i64,
    dir: &Path,
    before: &LexicalFiles,
    location: &str,
) -> Result<Option<LexicalFiles>> {
    let Some(before) = &before.parted else { return Ok(None) };
    Ok(Some(store_collection(client, build, dir, &before.parts, location)?))
}

fn temp_dir() -> Result<tempfile::TempDir> {
    tempfile::tempdir().map_err(|e| Error::Other(format!("a temporary folder for the lexical index: {e}")))
}

/// Stores the collection in folder `dir`: the parts it holds there and its ids under
/// `build`; the parts it names that are not there are among `kept`, listed as they are.
fn store_collection(
    client: &mut Client,
    build: i64,
    dir: &Path,
    kept: &[StoredPart],
    location: &str,
) -> Result<LexicalFiles> {
    let layout = PartedBm25::layout(dir)?;
    let mut parts = Vec::with_capacity(layout.parts.len());
    let mut w = parts::LEXICAL.writer(client, location)?;
    for name in &layout.parts {
        let folder = dir.join(name);
        if folder.is_dir() {
            let mut files = Vec::new();
            for (file, bytes) in folder_files(&folder)? {
                w.put(&[&build, &format!("{name}/{file}")], &bytes)?;
                files.push(StoredFile { name: file, bytes: bytes.len() as u64 });
            }
            parts.push(StoredPart { build, name: name.clone(), files });
            continue;
        }
        let Some(old) = kept.iter().find(|p| &p.name == name) else {
            return Err(Error::index(
                location,
                format!("the edited lexical index names a part {name} it does not hold"),
            ));
        };
        parts.push(old.clone());
    }
    let ids = std::fs::read(dir.join(PARTS_IDS)).map_err(|e| Error::io(dir.join(PARTS_IDS), e))?;
    w.put(&[&build, &PARTS_IDS], &ids)?;
    w.finish()?;
    Ok(LexicalFiles {
        meta: String::new(),
        files: Vec::new(),
        parted: Some(StoredParts {
            parts,
            ids: StoredFile { name: PARTS_IDS.into(), bytes: ids.len() as u64 },
            texts: layout.texts,
        }),
    })
}

/// The files of a part's folder, by name (a part's folder holds files only), but
/// tantivy's locks.
fn folder_files(folder: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(folder).map_err(|e| Error::io(folder, e))? {
        let path = entry.map_err(|e| Error::io(folder, e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).map(str::to_string);
        let Some(name) = name.filter(|_| path.is_file()) else {
            return Err(Error::index(&path, "a lexical part holds only files"));
        };
        // tantivy's lock files: a reader of the stored part would find them held.
        if name.starts_with(".tantivy-") {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        out.push((name, bytes));
    }
    out.sort();
    Ok(out)
}

/// The generation's lexical index, in memory; parts `open` holds already are not read
/// again.
pub(crate) fn open(
    client: &mut impl GenericClient,
    build: i64,
    files: &LexicalFiles,
    open: &OpenParts,
    location: &str,
) -> Result<Arc<dyn LexicalIndex>> {
    let Some(stored) = &files.parted else {
        return Ok(Arc::new(TantivyBm25::from_files(location, read(client, build, files, location)?)?));
    };
    let mut parts = Vec::with_capacity(stored.parts.len());
    for p in &stored.parts {
        let key = (p.build, p.name.clone());
        let held = open.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key).and_then(Weak::upgrade);
        let part = match held {
            Some(part) => part,
            None => {
                let mut read = Vec::with_capacity(p.files.len());
                for f in &p.files {
                    let what = format!("lexical file {}/{} of build {}", p.name, f.name, p.build);
                    let name = format!("{}/{}", p.name, f.name);
                    let bytes =
                        parts::LEXICAL.read_required(client, &[&p.build, &name], &what, Some(f.bytes), location)?;
                    read.push((f.name.clone(), bytes));
                }
                let part = LexicalPart::from_files(&p.name, read).map_err(|e| Error::index(location, e.to_string()))?;
                let mut held = open.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                held.retain(|_, weak| weak.strong_count() > 0);
                held.insert(key, Arc::downgrade(&part));
                part
            }
        };
        parts.push(part);
    }
    let what = format!("lexical ids of build {build}");
    let ids =
        parts::LEXICAL.read_required(client, &[&build, &stored.ids.name], &what, Some(stored.ids.bytes), location)?;
    let collection =
        PartedBm25::of_stored(parts, &ids, stored.texts).map_err(|e| Error::index(location, e.to_string()))?;
    Ok(Arc::new(collection))
}

/// `meta.json` and every file the generation lists, checked complete.
fn read(
    client: &mut impl GenericClient,
    build: i64,
    files: &LexicalFiles,
    location: &str,
) -> Result<Vec<(String, Vec<u8>)>> {
    let mut read: Vec<(String, Vec<u8>)> = Vec::with_capacity(files.files.len() + 1);
    read.push(("meta.json".to_string(), files.meta.clone().into_bytes()));
    for f in &files.files {
        let what = format!("lexical file {} of build {build}", f.name);
        let bytes = parts::LEXICAL.read_required(client, &[&build, &f.name], &what, Some(f.bytes), location)?;
        read.push((f.name.clone(), bytes));
    }
    Ok(read)
}
