//! RegimeRouter's evaluation protocol (its Table 2): keep the questions whose hop-1 gold
//! passage is in the dense top-5, and score only the hop-2 gold passage.

use serde::{Deserialize, Serialize};

use crate::dataset::{EvalQuestion, ResolvedDataset};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::retrieve::Query;

/// Dense depth within which the hop-1 gold must be found.
pub const HOP1_DEPTH: usize = 5;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Hop1Report {
    pub questions: usize,
    pub kept: usize,
    /// No gold passage in the dense top-5 (or, with hop order, not the first one).
    pub hop1_missed: usize,
    /// Fewer than two matched gold passages: there is no hop 2 to score.
    pub single_gold: usize,
}

/// The questions of `data` that pass the hop-1 filter, each with its hop-2 passage as
/// its only gold (and last hop, so LastHop@k and McNemar read it). With hop order, hop 1
/// and hop 2 are the first two gold passages; without it, hop 1 is the best-ranked gold
/// passage in the dense top-5 and hop 2 the first other one. Returns the kept questions
/// with their queries.
pub fn hop1_correct(
    engine: &Engine,
    data: &ResolvedDataset,
    queries: &[Query],
) -> Result<(ResolvedDataset, Vec<Query>, Hop1Report)> {
    let vectors = engine.vectors();
    let mut report = Hop1Report { questions: data.questions.len(), ..Hop1Report::default() };
    let (mut kept, mut kept_queries) = (Vec::new(), Vec::new());
    for (q, query) in data.questions.iter().zip(queries) {
        if q.gold.len() < 2 {
            report.single_gold += 1;
            continue;
        }
        let embedding = query.embedding.as_ref().ok_or_else(|| Error::Other("queries need embeddings".into()))?;
        let top: Vec<_> = vectors.search(embedding, HOP1_DEPTH)?.into_iter().map(|(p, _)| p).collect();
        let hops = if q.hop_ordered && q.last_hop.is_some() {
            top.contains(&q.gold[0]).then(|| (q.gold[0], q.gold[1]))
        } else {
            top.iter()
                .find(|p| q.gold.contains(p))
                .map(|&h1| (h1, q.gold.iter().copied().find(|&g| g != h1).unwrap_or(h1)))
        };
        let Some((_, hop2)) = hops else {
            report.hop1_missed += 1;
            continue;
        };
        kept.push(EvalQuestion {
            gold: vec![hop2],
            gold_total: 1,
            hop_ordered: true,
            last_hop: Some(hop2),
            ..q.clone()
        });
        kept_queries.push(query.clone());
    }
    report.kept = kept.len();
    let data = ResolvedDataset { questions: kept, ..data.subset(|_| false) };
    Ok((data, kept_queries, report))
}
