//! BM25 on PostgreSQL through tantivy: a build's tantivy index is kept in the database
//! (`lexical_files`, schema version 3) and loaded into memory by every process that
//! opens the generation, so both stores search the same index with the same engine.
//!
//! Why not SQL: BM25 over a postings table aggregates every posting of every query
//! term (627 ms a query at a million passages, docs/scale.md), where tantivy's
//! block-max WAND skips most of them. What a server holds is the index's files, a
//! small fraction of the passages' text and vectors it loads anyway.

use postgres::{Client, GenericClient};
use serde::{Deserialize, Serialize};

use super::parts;
use crate::error::{Error, Result};
use crate::index::TantivyBm25;
use crate::progress::Progress;

/// What a generation row records of its tantivy index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LexicalFiles {
    /// tantivy's `meta.json`: the generation's segments.
    pub meta: String,
    /// The build's stored files the segments consist of.
    pub files: Vec<StoredFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredFile {
    pub name: String,
    pub bytes: u64,
}

/// Builds the tantivy index of build `build`'s passages (`texts`, their index texts in
/// order), stores its files, and returns what the generation row records.
pub(crate) fn write(
    client: &mut Client,
    build: i64,
    texts: &[String],
    progress: &dyn Progress,
    location: &str,
) -> Result<LexicalFiles> {
    let tmp =
        tempfile::tempdir().map_err(|e| Error::Other(format!("a temporary folder for the lexical index: {e}")))?;
    let dir = tmp.path();
    progress.start("lexical index", texts.len() as u64);
    TantivyBm25::create(dir, texts, &|n: usize| progress.advance(n as u64))?;
    progress.finish();
    let listed = TantivyBm25::files(dir)?;
    let (meta_name, _) = listed.first().expect("files() lists meta.json first");
    let meta_path = dir.join(meta_name);
    let meta = std::fs::read_to_string(&meta_path).map_err(|e| Error::io(&meta_path, e))?;
    let files: Vec<StoredFile> =
        listed[1..].iter().map(|(name, bytes)| StoredFile { name: name.clone(), bytes: *bytes }).collect();
    store(client, build, dir, &files, location)?;
    Ok(LexicalFiles { meta, files })
}

/// Copies the build's files, in parts, with binary COPY.
fn store(client: &mut Client, build: i64, dir: &std::path::Path, files: &[StoredFile], location: &str) -> Result<()> {
    let mut w = parts::LEXICAL.writer(client, location)?;
    for f in files {
        let path = dir.join(&f.name);
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        w.put(&[&build, &f.name], &bytes)?;
    }
    w.finish()
}

/// The generation's tantivy index, in memory.
pub(crate) fn open(
    client: &mut impl GenericClient,
    build: i64,
    files: &LexicalFiles,
    location: &str,
) -> Result<TantivyBm25> {
    TantivyBm25::from_files(location, read(client, build, files, location)?)
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
