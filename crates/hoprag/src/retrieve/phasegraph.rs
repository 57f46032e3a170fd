//! PhaseGraph: calibrated fusion of the dense list with a capped PPR list (the paper's
//! §3 and §7.2). Percentile-rank each list, weight by Boltzmann probabilities with an
//! automatic temperature, mix with α, and add β for passages both lists found.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::dense::{dense_search, query_embedding};
use super::ppr::{link_entities, PprMethodParams};
use super::registry::{GraphUse, LlmUse, MethodSpec, TraceKind};
use super::{backfill, hits, list_detail, Query, Retrieval, Retriever, Trace};
use crate::corpus::PassageIdx;
use crate::embed::Embedder;
use crate::error::Result;
use crate::fusion::{fuse_two, FusionParams, Normalization, Operator, Temperature};
use crate::graph::ppr::PprParams;
use crate::graph::walk::{WalkExplanation, WalkInput};
use crate::graph::GraphContext;
use crate::index::{Matrix, VectorIndex};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct PhaseGraphParams {
    /// Vector list length N_v (10 in the paper). Part of the method: it does not grow
    /// with the k asked for; past the fused list, passages come from dense retrieval.
    pub n_v: usize,
    /// Cap on the graph list ("divergent top-k"; the paper tunes it per corpus: 30 on
    /// its MuSiQue full corpus, 20 on 2Wiki).
    pub dk: usize,
    pub fusion: FusionParams,
    /// The graph retriever. Its passage seeds default to 0: the graph list is the walk
    /// from the query's entities alone, the graph's own evidence. With HippoRAG 2's
    /// dense passage seeds (0.05) the walk's top 30 held the whole dense top 10 on
    /// nearly every question, so the consensus bonus β lifted all ten alike and the
    /// fusion returned the dense ranking unchanged (docs/seed-methods.md, §2).
    pub graph: PprMethodParams,
}

impl Default for PhaseGraphParams {
    fn default() -> Self {
        // α and dk chosen on the tune halves (MD5 split) of musique-train, musique-dev,
        // 2wiki-dev and 2wiki-hipporag: best pooled LastHop@5 among the settings that
        // trail dense on no tune half (grid α 0.3, 0.5, 0.7 × dk 5, 10, 20, 30 × passage
        // seeds 0, 0.05); the paper's own α (0.4–0.7) and dk (20–50) were chosen the
        // same way on its corpora and encoder.
        PhaseGraphParams {
            n_v: 10,
            dk: 10,
            fusion: FusionParams {
                normalization: Normalization::Pit,
                operator: Operator::Boltzmann,
                temperature: Temperature::Auto,
                alpha: 0.3,
                beta: 1.0,
            },
            graph: PprMethodParams {
                passage_node_weight: 0.0,
                ppr: PprParams { split_budget: PHASEGRAPH_SPLIT_BUDGET, ..PprParams::default() },
                ..PprMethodParams::default()
            },
        }
    }
}

/// The graph list's push budget: 2^19 edge steps, against `ppr`'s 2^22. Without passage
/// seeds the walk's head is the passages of a few entities, near-tied, and at a million
/// passages no push proves its order within 2^22 steps (190–210 ms); ranked by the
/// estimates and the push's next step, 2^19 steps (about 20 ms) gave the full walk's
/// fused top 10 on 20 questions of 20 (2^18: 18 of 20, overlap 1.000; 2^17: 13, 0.990;
/// docs/scale.md). On the real sets' graphs a push that has not proven its order within
/// it hands over to the full walk (cheaper there than the budget), exact; 2^18 left
/// 2wiki-corpus's graph, which has more entries, one swapped pair in 341 questions.
pub const PHASEGRAPH_SPLIT_BUDGET: usize = 1 << 19;

pub const SPEC: MethodSpec = MethodSpec {
    name: "phasegraph",
    section: Some("phasegraph"),
    summary: "PhaseGraph: calibrated (percentile rank + Boltzmann) fusion of the dense list and a capped \
              Personalized PageRank list",
    graph: GraphUse::Required,
    llm: LlmUse::ForMentions(|s| &s.phasegraph.graph.link),
    trace: TraceKind::Walk,
    build: |s, r| {
        let graph = r.graph()?;
        Ok(Box::new(PhaseGraph::new(graph, r.index().vectors().clone(), r.vectors(), r.embedder(), s.phasegraph)))
    },
};

pub struct PhaseGraph {
    graph: Arc<GraphContext>,
    passages: Arc<Matrix>,
    vectors: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    params: PhaseGraphParams,
}

impl PhaseGraph {
    pub fn new(
        graph: Arc<GraphContext>,
        passages: Arc<Matrix>,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        params: PhaseGraphParams,
    ) -> Self {
        PhaseGraph { graph, passages, vectors, embedder, params }
    }
}

impl PhaseGraph {
    /// The paper's pipeline: the vector list (dense top N_v) and the graph list (the
    /// walk's top dk from the query's entities), fused by calibrated scores; past the
    /// fused list, dense retrieval. The walk's explanation when `explain`.
    fn run(&self, query: &Query, k: usize, explain: bool) -> Result<(Retrieval, WalkExplanation)> {
        let p = &self.params;
        let mut trace = Trace::default();
        let q = query_embedding(self.embedder.as_ref(), query, &mut trace)?;
        // One search serves both the vector list (its first N_v) and the backfill.
        let dense = dense_search(self.vectors.as_ref(), &q, p.n_v.max(k), &mut trace)?;
        let vector = &dense[..p.n_v.min(dense.len())];
        let linked = link_entities(&self.graph, self.embedder.as_ref(), query, &q, &p.graph.link, &mut trace)?;
        let walked = match linked.entity_seeds() {
            Some(entity_seeds) => {
                let walker = self.graph.walker(&self.passages, p.graph.walk());
                let input = WalkInput {
                    entity_seeds,
                    query: &q,
                    dense: None,
                    entity_products: None,
                    depth: p.dk,
                    within: None,
                    explain,
                };
                Some(walker.rank(input, &mut trace)?)
            }
            None => None,
        };
        let (graph, walk) = walked.map_or((Vec::new(), None), |w| (w.passages, w.detail));
        let fused = trace.step("calibrated fusion", || {
            let f = fuse_two(vector, &graph, &p.fusion);
            let both = vector.iter().filter(|v| graph.iter().any(|g| g.0 == v.0)).count();
            // What the graph changes in the top 5, with and without calibration: the
            // measure of whether the fusion does anything at all (issue 35 found it
            // equal to dense everywhere).
            let raw = FusionParams { normalization: Normalization::None, operator: Operator::Linear, ..p.fusion };
            let uncalibrated = top5_effect(vector, &fuse_two(vector, &graph, &raw));
            let d = json!({"params": p.fusion, "vector": vector.len(), "graph": graph.len(), "in_both": both,
                           "top5": top5_effect(vector, &f), "top5_uncalibrated": uncalibrated,
                           "top": list_detail(&f)});
            Ok((f, d))
        })?;
        let fused = backfill(fused, &dense, k);
        Ok((Retrieval { hits: hits(fused), trace }, linked.explain(self.name(), walk)))
    }
}

impl Retriever for PhaseGraph {
    fn name(&self) -> &str {
        SPEC.name
    }

    fn retrieve(&self, query: &Query, k: usize) -> Result<Retrieval> {
        self.run(query, k, false).map(|(retrieval, _)| retrieval)
    }

    fn explain(&self, query: &Query, k: usize) -> Result<Option<(Retrieval, WalkExplanation)>> {
        self.run(query, k, true).map(Some)
    }
}

/// How a fused top 5 differs from the vector list's: passages that only the graph
/// brought in, and vector passages it moved into (or out of) the top 5.
fn top5_effect(vector: &[(PassageIdx, f32)], fused: &[(PassageIdx, f32)]) -> serde_json::Value {
    let v5: Vec<PassageIdx> = vector.iter().take(5).map(|x| x.0).collect();
    let f5: Vec<PassageIdx> = fused.iter().take(5).map(|x| x.0).collect();
    let graph_only = f5.iter().filter(|p| !vector.iter().any(|v| v.0 == **p)).count();
    let promoted = f5.iter().filter(|p| !v5.contains(p) && vector.iter().any(|v| v.0 == **p)).count();
    json!({"graph_only": graph_only, "promoted_from_vector": promoted, "changed": f5 != v5})
}
