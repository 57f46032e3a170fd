//! Query entity linking: which graph entities a question is about, as weighted PPR seeds.
//!
//! Mentions come from the surface extractor (or an LLM's query NER) and link to graph
//! entities by exact normalised match, then by embedding nearest neighbour above a
//! threshold. HippoRAG 2's fact retrieval adds the entities of the triples nearest to the
//! query embedding.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{normalize_entity, EntityGraph};
use crate::embed::{Embedder, TextKind};
use crate::error::Result;
use crate::index::{ExactIndex, VectorIndex};
use crate::llm::Llm;
use crate::text::surface_entities;

/// Where the query's mentions come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NerMode {
    /// Surface spans: capitalised runs, numbers, dates. No model, no cost.
    #[default]
    Heuristic,
    /// The named entities an LLM finds in the question (HippoRAG's query NER); needs
    /// the engine's LLM.
    Llm,
}

/// Why a method set to LLM query NER cannot run, and how to fix it.
pub(crate) const NO_LLM_FOR_NER: &str = "LLM query NER (link.ner = \"llm\") needs an LLM, and this linker has none: \
     build it through an Engine (which uses the endpoint of llm.base_url and llm.model, or the local model llm.local), \
     or use link.ner = \"heuristic\"";

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkParams {
    /// Link mentions found in the query text.
    pub mentions: bool,
    /// How mentions are found in the query text.
    pub ner: NerMode,
    /// Seed the entities of the nearest triples (HippoRAG 2 fact retrieval).
    pub facts: bool,
    /// A mention without an exact match links to its nearest entity at or above this
    /// cosine.
    pub mention_threshold: f32,
    /// Triples retrieved for fact seeding.
    pub fact_top_k: usize,
    /// Divide each seed's weight by the number of passages mentioning the entity
    /// (HippoRAG's node specificity), so that hub entities do not dominate the walk.
    pub specificity: bool,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            mentions: true,
            ner: NerMode::Heuristic,
            facts: true,
            mention_threshold: 0.8,
            fact_top_k: 5,
            specificity: true,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkedEntity {
    pub entity: u32,
    pub label: String,
    pub weight: f64,
    /// `exact`, `embedding` or `fact`.
    pub via: &'static str,
    /// The query mention or triple text that led here.
    pub evidence: String,
    pub similarity: f32,
}

/// Search structures over a graph's entity and triple embeddings, built once per engine,
/// and the LLM that finds query mentions under [`NerMode::Llm`].
pub struct Linker {
    pub graph: Arc<EntityGraph>,
    entities: ExactIndex,
    triples: ExactIndex,
    passages_per_entity: Vec<usize>,
    llm: Option<Arc<dyn Llm>>,
}

impl Linker {
    pub fn new(graph: Arc<EntityGraph>) -> Self {
        // The graph's matrices are shared, not copied: they can be large.
        let entities = ExactIndex::new(graph.entity_vectors.clone());
        let triples = ExactIndex::new(graph.triple_vectors.clone());
        let passages_per_entity = graph.entity_passages().iter().map(|p| p.len().max(1)).collect();
        Linker { graph, entities, triples, passages_per_entity, llm: None }
    }

    /// The model for [`NerMode::Llm`]. It lives here, beside the graph, because every
    /// graph method links through this linker (the engine sets it when it loads the
    /// graph).
    pub fn set_llm(&mut self, llm: Option<Arc<dyn Llm>>) {
        self.llm = llm;
    }

    pub fn llm(&self) -> Option<&Arc<dyn Llm>> {
        self.llm.as_ref()
    }

    /// Links mentions (given, or found in `query` by the surface extractor) and facts.
    pub fn link(
        &self,
        query: &str,
        query_embedding: &[f32],
        mentions: Option<&[String]>,
        embedder: &dyn Embedder,
        params: &LinkParams,
    ) -> Result<Vec<LinkedEntity>> {
        let g = &self.graph;
        let mut out: Vec<LinkedEntity> = Vec::new();
        if params.mentions {
            let found: Vec<String> = match mentions {
                Some(m) => m.to_vec(),
                None => surface_entities(query).into_iter().map(|s| s.text).collect(),
            };
            let mut unmatched = Vec::new();
            for m in found {
                match g.entity_id(&normalize_entity(&m)) {
                    Some(e) => out.push(self.linked(e, 1.0, "exact", m, 1.0, params)),
                    None => unmatched.push(m),
                }
            }
            if !unmatched.is_empty() && !g.entities.is_empty() {
                let vectors = embedder.embed(&unmatched, TextKind::Query)?;
                for (m, v) in unmatched.into_iter().zip(vectors) {
                    if let Some(&(e, sim)) = self.entities.search(&v, 1)?.first() {
                        if sim >= params.mention_threshold {
                            out.push(self.linked(e, sim as f64, "embedding", m, sim, params));
                        }
                    }
                }
            }
        }
        if params.facts && !g.triples.is_empty() {
            for (t, sim) in self.triples.search(query_embedding, params.fact_top_k)? {
                if let Some((s, o)) = g.triple_entities[t as usize] {
                    let text = g.triples[t as usize].text();
                    for e in [s, o] {
                        out.push(self.linked(e, sim.max(0.0) as f64, "fact", text.clone(), sim, params));
                    }
                }
            }
        }
        // One seed per entity, keeping the strongest evidence.
        out.sort_by(|a, b| a.entity.cmp(&b.entity).then(b.weight.total_cmp(&a.weight)));
        out.dedup_by_key(|l| l.entity);
        out.sort_by(|a, b| b.weight.total_cmp(&a.weight));
        Ok(out)
    }

    fn linked(&self, e: u32, w: f64, via: &'static str, evidence: String, sim: f32, p: &LinkParams) -> LinkedEntity {
        let weight = if p.specificity { w / self.passages_per_entity[e as usize] as f64 } else { w };
        LinkedEntity { entity: e, label: self.graph.labels[e as usize].clone(), weight, via, evidence, similarity: sim }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ner_mode_is_heuristic_unless_set() {
        let default: LinkParams = serde_json::from_str("{}").unwrap();
        assert_eq!(default.ner, NerMode::Heuristic);
        let llm: LinkParams = serde_json::from_str(r#"{"ner": "llm"}"#).unwrap();
        assert_eq!(llm.ner, NerMode::Llm);
        assert_eq!(serde_json::to_value(llm).unwrap()["ner"], "llm");
    }
}
