//! TREC run and qrels files, for trec_eval, pytrec_eval, ranx and friends.
//!
//! trec_eval reads one run per file and ranks by score, breaking ties by document id;
//! a file with several methods, a (query, document) pair listed twice, or tied scores
//! would be read differently from what hoprag scored. So each method gets its own file
//! and run tag, each pair appears once, and the score column is derived from hoprag's
//! rank (`depth − rank + 1`), strictly decreasing, so every tool reads hoprag's order
//! (the methods' own scores tie, e.g. integer LLM judgements, and are in the JSON).

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::EvalReport;
use crate::error::{Error, Result};

/// TREC fields are whitespace-separated, so whitespace inside ids becomes `_`.
fn field(id: &str) -> String {
    id.split_whitespace().collect::<Vec<_>>().join("_")
}

/// A method name as a file name and run tag: `regime_router[router=oracle]` becomes
/// `regime_router_router_oracle_`.
pub fn run_tag(method: &str) -> String {
    method.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '.') { c } else { '_' }).collect()
}

/// The placeholder document id of a question's `n`-th gold passage that matched nothing
/// in the index: in the qrels, never in a run, so recall counts it as missed.
pub fn unmatched_doc(question: &str, n: usize) -> String {
    format!("hoprag-unmatched-gold-{}-{n}", field(question))
}

/// Writes `DIR/METHOD.trec` for every method of the report (run tag = file stem) and
/// `DIR/qrels.txt`; returns the files written, runs first.
pub fn write_runs(report: &EvalReport, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut written = Vec::new();
    let mut tags = HashSet::new();
    for (method, _) in &report.methods {
        let mut tag = run_tag(method);
        // Two specs that differ only in punctuation still get a file each.
        let base = tag.clone();
        let mut n = 1;
        while !tags.insert(tag.clone()) {
            n += 1;
            tag = format!("{base}-{n}");
        }
        let path = dir.join(format!("{tag}.trec"));
        write_run(report, method, &tag, &path)?;
        written.push(path);
    }
    let qrels = dir.join("qrels.txt");
    write_qrels(report, &qrels)?;
    written.push(qrels);
    Ok(written)
}

/// One method's run: `qid Q0 docid rank score tag`, one line per retrieved passage.
pub fn write_run(report: &EvalReport, method: &str, tag: &str, path: &Path) -> Result<()> {
    let m = report.methods.get(method).ok_or_else(|| Error::Config(format!("no method {method:?} in the report")))?;
    let mut out = Vec::new();
    for q in &m.per_query {
        let qid = field(&q.id);
        let mut seen = HashSet::new();
        let docs: Vec<String> = q.retrieved.iter().map(|d| field(d)).filter(|d| seen.insert(d.clone())).collect();
        let depth = docs.len();
        for (rank, doc) in docs.iter().enumerate() {
            writeln!(out, "{qid} Q0 {doc} {} {} {}", rank + 1, depth - rank, field(tag)).expect("write to memory");
        }
    }
    std::fs::write(path, out).map_err(|e| Error::io(path, e))
}

/// The gold passages as qrels, `qid 0 docid 1`, every question of the report included;
/// gold passages that matched nothing in the index are listed under placeholder ids
/// ([`unmatched_doc`]) so that recall counts them as missed, as hoprag does.
pub fn write_qrels(report: &EvalReport, path: &Path) -> Result<()> {
    let mut out = Vec::new();
    if let Some((_, m)) = report.methods.first() {
        for q in &m.per_query {
            let qid = field(&q.id);
            let mut seen = HashSet::new();
            for doc in q.gold.iter().map(|d| field(d)).filter(|d| seen.insert(d.clone())) {
                writeln!(out, "{qid} 0 {doc} 1").expect("write to memory");
            }
            for n in 0..q.unmatched_gold {
                writeln!(out, "{qid} 0 {} 1", unmatched_doc(&q.id, n)).expect("write to memory");
            }
        }
    }
    std::fs::write(path, out).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_tags_are_file_names() {
        assert_eq!(run_tag("regime_router[router=oracle,alpha=0.5]"), "regime_router_router_oracle_alpha_0.5_");
        assert_eq!(run_tag("plain_name"), "plain_name");
    }
}
