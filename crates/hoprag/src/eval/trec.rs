//! TREC run and qrels files, for trec_eval, ranx and friends.

use std::io::Write;
use std::path::Path;

use super::EvalReport;
use crate::error::{Error, Result};

/// TREC fields are whitespace-separated, so whitespace inside ids becomes `_`.
fn field(id: &str) -> String {
    id.split_whitespace().collect::<Vec<_>>().join("_")
}

/// One line per retrieved passage: `qid Q0 docid rank score run`, every method as its
/// own run name.
pub fn write_run(report: &EvalReport, path: &Path) -> Result<()> {
    let mut out = Vec::new();
    for (method, m) in &report.methods {
        for q in &m.per_query {
            for (rank, (doc, score)) in q.retrieved.iter().zip(&q.scores).enumerate() {
                writeln!(out, "{} Q0 {} {} {} {}", field(&q.id), field(doc), rank + 1, score, field(method))
                    .expect("write to memory");
            }
        }
    }
    std::fs::write(path, out).map_err(|e| Error::io(path, e))
}

/// The gold passages as qrels: `qid 0 docid 1`.
pub fn write_qrels(report: &EvalReport, path: &Path) -> Result<()> {
    let mut out = Vec::new();
    if let Some((_, m)) = report.methods.first() {
        for q in &m.per_query {
            for doc in &q.gold {
                writeln!(out, "{} 0 {} 1", field(&q.id), field(doc)).expect("write to memory");
            }
        }
    }
    std::fs::write(path, out).map_err(|e| Error::io(path, e))
}
