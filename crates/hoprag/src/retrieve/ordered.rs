//! Every method's one total order of the passages, and metadata filters on it.
//!
//! A method ranks the passages it finds (BM25 those sharing a term with the question; the
//! others every passage, backfilled as each states). A method's ranking for `k` is the
//! first `k` of its ranking for any deeper `k` (the methods fix their candidate depths for
//! this), so its order does not depend on `k`; made total, passages the method does not
//! rank follow in index order (by passage id, the canonical order). [`Ordered`] wraps
//! every method the registry builds.
//!
//! A filtered query (a [`Selection`] on the [`Query`]) returns the first `k` passages of
//! that total order the selection admits, or all of them when fewer match. A method that
//! finds them directly answers through [`Retriever::retrieve_within`] (dense scans the
//! admitted rows; the graph walk ranks only the admitted passages); otherwise the method
//! is asked for a ranking deep enough to hold `k` of them (from the share of passages that
//! match, deeper again if that was not enough), which is then filtered. The walk and the
//! fusion still run over the whole index: the graph is knowledge; the filter decides only
//! what is returned.

use std::time::Instant;

use serde_json::json;

use super::{backfill, Query, Retrieval, Retriever, TraceStep};
use crate::error::Result;
use crate::filter::Selection;
use crate::graph::walk::WalkExplanation;

/// How much deeper than the expected depth the first try asks for, against the chance
/// that the matching passages cluster at the end of the order.
const SLACK: f64 = 1.5;
/// How much deeper each further try asks for.
const GROWTH: usize = 4;

/// A method's ranking made total and filterable (see the module documentation).
pub struct Ordered {
    inner: Box<dyn Retriever>,
    /// Passages in the index.
    passages: usize,
}

impl Ordered {
    pub fn new(inner: Box<dyn Retriever>, passages: usize) -> Ordered {
        Ordered { inner, passages }
    }

    /// The first `k` of the order the selection admits, with `run` the method asked for
    /// a ranking of a given depth.
    fn run<T>(
        &self,
        query: &Query,
        k: usize,
        mut run: impl FnMut(usize) -> Result<(Retrieval, T)>,
    ) -> Result<(Retrieval, T)> {
        let n = self.passages;
        let Some(selection) = query.filter.as_deref() else {
            let (retrieval, extra) = run(k)?;
            return Ok((self.complete(retrieval, k, k, None), extra));
        };
        let started = Instant::now();
        let matching = selection.count();
        let want = k.min(matching);
        // Where the k-th match is expected if matches spread evenly over the order.
        let expected = (k as f64 * n as f64 / matching.max(1) as f64 * SLACK).ceil() as usize;
        let mut depth = expected.clamp(k, n.max(k));
        let mut tries = 0;
        loop {
            tries += 1;
            let (retrieval, extra) = run(depth)?;
            let exhausted = retrieval.hits.len() < depth || depth >= n;
            let found = retrieval.hits.iter().filter(|h| selection.contains(h.passage as usize)).take(want).count();
            if found >= want || exhausted {
                let mut retrieval = self.complete(retrieval, k, depth, Some(selection));
                retrieval.trace.steps.push(TraceStep {
                    name: "filter".into(),
                    micros: started.elapsed().as_micros() as u64,
                    detail: json!({"matching": matching, "of": n, "depth": depth, "tries": tries,
                                   "returned": retrieval.hits.len()}),
                    llm: None,
                });
                return Ok((retrieval, extra));
            }
            depth = (depth * GROWTH).min(n);
        }
    }

    /// `retrieval` (the method asked for `asked` passages) kept to what `selection`
    /// admits and cut to `k`; when the method ranked fewer than asked (it ranks no more),
    /// the passages it did not rank follow in index order.
    fn complete(&self, mut retrieval: Retrieval, k: usize, asked: usize, selection: Option<&Selection>) -> Retrieval {
        let ranked = retrieval.hits.len();
        let admits = |p: u32| selection.is_none_or(|s| s.contains(p as usize));
        let mut list: Vec<(u32, f32)> =
            retrieval.hits.iter().filter(|h| admits(h.passage)).map(|h| (h.passage, h.score)).collect();
        // Only under a filter: unfiltered, a method that ranks fewer than k returns them
        // as they are (BM25 with few matching passages), as it always has; padding with
        // passages in index order would add arbitrary ones to its answer and its recall.
        if selection.is_some() && list.len() < k && ranked < asked && ranked < self.passages {
            let seen: std::collections::HashSet<u32> = retrieval.hits.iter().map(|h| h.passage).collect();
            let rest: Vec<(u32, f32)> = (0..self.passages as u32)
                .filter(|p| admits(*p) && !seen.contains(p))
                .take(k - list.len())
                .map(|p| (p, 0.0))
                .collect();
            list = backfill(list, &rest, k);
        }
        list.truncate(k);
        retrieval.hits = super::hits(list);
        retrieval
    }
}

impl Retriever for Ordered {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        let whole = unfiltered(query);
        if let Some(selection) = query.filter.as_deref() {
            let started = Instant::now();
            if let Some(direct) = self.inner.retrieve_within(&whole, k, selection) {
                return direct.map(|mut retrieval| {
                    retrieval.trace.steps.push(TraceStep {
                        name: "filter".into(),
                        micros: started.elapsed().as_micros() as u64,
                        detail: json!({"matching": selection.count(), "of": self.passages, "within": true,
                                       "returned": retrieval.hits.len()}),
                        llm: None,
                    });
                    retrieval
                });
            }
        }
        self.run(query, k, |depth| Ok((self.inner.retrieve(&whole, depth)?, ()))).map(|(r, ())| r)
    }

    fn explain(&self, query: &Query, k: usize) -> Result<Option<(Retrieval, WalkExplanation)>> {
        let mut none = false;
        let whole = unfiltered(query);
        let (retrieval, explanation) = self.run(query, k, |depth| match self.inner.explain(&whole, depth)? {
            Some((r, e)) => Ok((r, Some(e))),
            None => {
                none = true;
                Ok((Retrieval::default(), None))
            }
        })?;
        Ok(if none { None } else { explanation.map(|e| (retrieval, e)) })
    }

    fn concurrency(&self) -> Option<usize> {
        self.inner.concurrency()
    }
}

/// The query the method sees: the whole index (a method built of others, such as
/// `auto`, must not filter its inner rankings).
fn unfiltered(query: &Query) -> Query {
    Query { filter: None, ..query.clone() }
}
