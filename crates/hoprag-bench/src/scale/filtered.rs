//! Filtered query latency: each timed method under metadata filters that admit about
//! 10 % and 1 % of the passages (by the `year` every generated passage carries, uniform
//! over a century), beside the same method unfiltered, question by question in one pass
//! so that the machine's noise falls on all three alike. The filter is parsed and its
//! passages selected inside each timed query (the meta columns are built before, once).

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::json;

use hoprag::graph::walk::WALK_STEP;
use hoprag::retrieve::{Query, Retrieval, Retriever};
use hoprag::Engine;

use super::super::{percentiles, Percentiles};
use crate::Context;

/// The first year of the century a passage's `year` falls in.
pub(super) const FIRST_YEAR: u64 = 1900;
pub(super) const YEARS: u64 = 100;

/// A generated passage's `meta`: a year drawn from its number.
pub(super) fn meta(j: usize) -> hoprag::corpus::Meta {
    // splitmix64: years independent of the passage's place and text.
    let mut z = (j as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let year = FIRST_YEAR + z % YEARS;
    json!({"year": year}).as_object().expect("an object").clone()
}

#[derive(Clone, Serialize, Deserialize)]
pub(super) struct FilteredLatency {
    pub method: String,
    /// "10 %" or "1 %".
    pub share: String,
    /// Passages the filter admits.
    pub matching: usize,
    pub unfiltered_ms: Percentiles,
    pub filtered_ms: Percentiles,
    /// Filtered p50 over unfiltered p50.
    pub p50_ratio: f64,
    /// Queries that returned k passages (every one should: k match).
    pub full_answers: usize,
    /// How the filtered queries' walks ranked, for the methods that walk: proven by the
    /// split walk, by its estimates (past its budget), or by the full walk.
    #[serde(default)]
    pub walks: Walks,
}

/// Filtered queries by how their walk ranked the passages.
#[derive(Clone, Copy, Default, Serialize, Deserialize)]
pub(super) struct Walks {
    pub split_proven: usize,
    pub split_estimated: usize,
    pub full: usize,
}

impl Walks {
    /// Counts `r`'s walk (its trace's `ppr` step), if it walked.
    fn count(&mut self, r: &Retrieval) {
        let Some(walk) = r.trace.steps.iter().find(|s| s.name == WALK_STEP) else { return };
        match (walk.detail["split"].as_bool(), walk.detail["proven"].as_bool()) {
            (Some(true), Some(true)) => self.split_proven += 1,
            (Some(true), _) => self.split_estimated += 1,
            _ => self.full += 1,
        }
    }

    pub fn any(&self) -> bool {
        self.split_proven + self.split_estimated + self.full > 0
    }
}

/// Times `methods` unfiltered and under each filter, over `queries`, `repeat` passes
/// after a warm-up.
pub(super) fn measure(
    ctx: &Context,
    engine: &Engine,
    methods: &[(String, Box<dyn Retriever>)],
    queries: &[Query],
    k: usize,
    repeat: usize,
) -> anyhow::Result<Vec<FilteredLatency>> {
    let filters = [
        ("10 %", json!({"year": {"$gte": FIRST_YEAR + 50, "$lt": FIRST_YEAR + 60}})),
        ("1 %", json!({"year": {"$gte": FIRST_YEAR + 50, "$lt": FIRST_YEAR + 51}})),
    ];
    engine.index.meta_columns();
    let mut out = Vec::new();
    ctx.progress.start("filtered queries", (methods.len() * queries.len() * (repeat + 1) * 3) as u64);
    for (name, method) in methods {
        let mut plain = Vec::new();
        let mut filtered: Vec<(Vec<f64>, usize, usize, Walks)> =
            vec![(Vec::new(), 0, 0, Walks::default()); filters.len()];
        for pass in 0..=repeat {
            for q in queries {
                let start = Instant::now();
                method.retrieve(q, k)?;
                let plain_ms = start.elapsed().as_secs_f64() * 1e3;
                for ((_, filter), row) in filters.iter().zip(filtered.iter_mut()) {
                    let start = Instant::now();
                    let selection = engine.select(filter)?;
                    let matching = selection.count();
                    let r = method.retrieve(&Query { filter: Some(selection), ..q.clone() }, k)?;
                    let ms = start.elapsed().as_secs_f64() * 1e3;
                    if pass > 0 {
                        row.0.push(ms);
                        row.1 = matching;
                        row.2 += usize::from(r.hits.len() == k.min(matching));
                        row.3.count(&r);
                    }
                }
                if pass > 0 {
                    plain.push(plain_ms);
                }
                ctx.progress.advance(3);
            }
        }
        let unfiltered_ms = percentiles(plain);
        for ((share, _), (ms, matching, full, walks)) in filters.iter().zip(filtered) {
            let filtered_ms = percentiles(ms);
            out.push(FilteredLatency {
                method: name.clone(),
                share: share.to_string(),
                matching,
                p50_ratio: filtered_ms.p50 / unfiltered_ms.p50.max(1e-9),
                unfiltered_ms,
                filtered_ms,
                full_answers: full,
                walks,
            });
        }
    }
    ctx.progress.finish();
    Ok(out)
}
