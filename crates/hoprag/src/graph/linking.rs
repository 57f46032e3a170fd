//! Query entity linking: which graph entities a question is about, as weighted PPR seeds.
//!
//! HippoRAG 2's seeds come from facts: every triple is scored against the query
//! embedding, the scores are min-max normalised over all triples, and the subject and
//! object of the best few distinct facts become seeds weighted by their fact's score and
//! divided by the number of passages that mention them. Beside them (HippoRAG 1's way,
//! on by default) the query's mentions, from the surface extractor or an LLM's query
//! NER, link to entities by exact normalised match, then by embedding nearest neighbour
//! above a threshold; a mention seed weighs its similarity divided by the same count.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{normalize_entity, EntityGraph};
use crate::embed::{Embedder, TextKind};
use crate::error::Result;
use crate::index::{ExactIndex, Screen, VectorIndex};
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
    /// Also link the names the query mentions (HippoRAG 1's query entities; HippoRAG 2
    /// seeds from facts only). On by default: with a small embedder (MiniLM) the five
    /// nearest facts often miss the entity the question names, and an exact name match
    /// costs no model call; on the musique-train tune split this took `ppr` R@5 from
    /// 65.9 to 70.6 (GPT-3.5 triples) and from 63.5 to 72.2 (heuristic triples).
    pub mentions: bool,
    /// How mentions are found in the query text (`llm` links mentions even when
    /// `mentions` is off).
    pub ner: NerMode,
    /// Seed the entities of the facts (triples) nearest to the query (HippoRAG 2).
    pub facts: bool,
    /// Link a heuristic mention without an exact match to its nearest entity by
    /// embedding (at or above `mention_threshold`; always on for LLM mentions). Off by
    /// default: it costs a second embedder call per
    /// query, and on the musique-train tune split it linked nothing the exact match had
    /// not (ppr R@5 unchanged with either graph).
    pub embed_mentions: bool,
    /// A mention without an exact match links to its nearest entity at or above this
    /// cosine (with `embed_mentions`).
    pub mention_threshold: f32,
    /// Distinct facts whose entities are seeded (HippoRAG 2's linking_top_k, 5).
    pub fact_top_k: usize,
    /// Seeds kept, the heaviest (HippoRAG 2 keeps the top linking_top_k = 5 phrase
    /// weights); 0 keeps all.
    pub top_seeds: usize,
    /// Divide each seed's weight by the number of passages mentioning the entity
    /// (HippoRAG's node specificity), so that hub entities do not dominate the walk.
    pub specificity: bool,
}

impl LinkParams {
    /// Whether query mentions are linked: when asked for, and whenever the LLM is to
    /// find them (asking for LLM query NER is asking for mentions).
    pub fn links_mentions(&self) -> bool {
        self.mentions || self.ner == NerMode::Llm
    }

    /// Whether unmatched mentions are linked by embedding: when asked for, and for an
    /// LLM's mentions, which need not spell a name the way the passages do (HippoRAG 1
    /// links them by embedding only).
    pub fn embeds_mentions(&self) -> bool {
        self.embed_mentions || self.ner == NerMode::Llm
    }
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            mentions: true,
            ner: NerMode::Heuristic,
            facts: true,
            embed_mentions: false,
            mention_threshold: 0.8,
            fact_top_k: 5,
            top_seeds: 5,
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

/// A fact (triple) matched to a query.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FactMatch {
    pub triple: u32,
    /// Cosine min-max normalised over all facts.
    pub score: f64,
    pub similarity: f32,
}

/// Search structures over a graph's entity and triple embeddings, built once per engine,
/// and the LLM that finds query mentions under [`NerMode::Llm`].
pub struct Linker {
    pub graph: Arc<EntityGraph>,
    entities: ExactIndex,
    /// For each fact, the first fact with the same text lowercased: a statement counts
    /// once whatever its case, as in HippoRAG 2's fact store.
    distinct: Vec<u32>,
    /// The hash of each fact's lowercased text, which an edit's linker copies.
    lowered: Vec<u64>,
    /// The fact vectors in int8, so that matching a query reads a quarter of the bytes
    /// (the scan is bound by memory bandwidth); results are exact (index::Screen).
    facts: Screen,
    passages_per_entity: Vec<usize>,
    llm: Option<Arc<dyn Llm>>,
}

impl Linker {
    pub fn new(graph: Arc<EntityGraph>) -> Self {
        Self::after(graph, None)
    }

    /// [`Linker::new`] for `graph`, an edit's result of `previous`'s graph: what is a
    /// function of a fact's text or vector alone (its lowercased text's hash, its int8
    /// codes) is copied for every fact `previous` holds ([`super::Lineage`]).
    pub fn after(graph: Arc<EntityGraph>, previous: Option<&Linker>) -> Self {
        // The graph's matrices are shared, not copied: they can be large.
        let entities = ExactIndex::new(graph.entity_vectors.clone());
        let lineage = previous.and_then(|p| graph.lineage_from(&p.graph).map(|l| (p, l)));
        let lowered: Vec<u64> = (0..graph.fact_count() as u32)
            .map(|f| match lineage.and_then(|(p, l)| l.facts.get(f as usize).copied().flatten().map(|o| (p, o))) {
                Some((p, o)) => p.lowered[o as usize],
                None => super::text_hash(lowered_text(&graph, f).bytes()),
            })
            .collect();
        let distinct = first_of_same_text(&graph, &lowered);
        let passages_per_entity = graph.entity_passages().iter().map(|p| p.len().max(1)).collect();
        let facts = match previous {
            Some(p) => {
                Screen::after(&graph.fact_vectors, &p.facts, &p.graph.fact_vectors, lineage.map(|(_, l)| &l.facts[..]))
            }
            None => Screen::new(&graph.fact_vectors),
        };
        Linker { graph, entities, lowered, distinct, facts, passages_per_entity, llm: None }
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
        self.link_with_facts(query, query_embedding, mentions, embedder, params).map(|(linked, _)| linked)
    }

    /// [`Linker::link`], with the facts it matched (best first; none when `params.facts`
    /// is off or the graph has no triple), for explanations.
    pub fn link_with_facts(
        &self,
        query: &str,
        query_embedding: &[f32],
        mentions: Option<&[String]>,
        embedder: &dyn Embedder,
        params: &LinkParams,
    ) -> Result<(Vec<LinkedEntity>, Vec<FactMatch>)> {
        let g = &self.graph;
        let mut out: Vec<LinkedEntity> = Vec::new();
        if params.links_mentions() {
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
            if params.embeds_mentions() && !unmatched.is_empty() && !g.entities.is_empty() {
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
        let mut facts = Vec::new();
        if params.facts && !g.triples.is_empty() {
            facts = self.facts(query_embedding, params.fact_top_k);
            for fact in &facts {
                let t = &g.triples[fact.triple as usize];
                let text = t.text();
                let ends = match g.triple_entities[fact.triple as usize] {
                    Some((s, o)) => vec![s, o],
                    // A triple whose ends are one entity, or one end empty, still names it.
                    None => [&t.subject, &t.object].iter().filter_map(|x| g.entity_id(&normalize_entity(x))).collect(),
                };
                for e in ends {
                    out.push(self.linked(e, fact.score, "fact", text.clone(), fact.similarity, params));
                }
            }
        }
        // One seed per entity, keeping the strongest evidence.
        out.sort_by(|a, b| a.entity.cmp(&b.entity).then(crate::rank::desc(a.weight, b.weight)));
        out.dedup_by_key(|l| l.entity);
        out.sort_by(|a, b| crate::rank::desc(a.weight, b.weight).then(a.entity.cmp(&b.entity)));
        if params.top_seeds > 0 {
            out.truncate(params.top_seeds);
        }
        Ok((out, facts))
    }

    /// The `n` distinct facts most similar to the query, each as its first triple, with
    /// their scores min-max normalised over all facts (HippoRAG 2's query-to-fact
    /// scores), best first.
    pub fn facts(&self, query_embedding: &[f32], n: usize) -> Vec<FactMatch> {
        // Only the head is needed, and case variants of a fact are skipped: a short prefix
        // first (the fewer rows asked for, the more the screen rules out), a longer one in
        // the rare case that it holds too few distinct facts. The ranking is a total order,
        // so a shorter head is a prefix of a longer one.
        if n == 0 {
            return Vec::new();
        }
        let mut head = 2 * n;
        loop {
            let found = self.facts.extremes(&self.graph.fact_vectors, query_embedding, head);
            let (min, max) = (found.min.unwrap_or(0.0), found.max.unwrap_or(0.0));
            let exhausted = found.top.len() < head;
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::new();
            for (f, s) in found.top {
                if out.len() == n {
                    break;
                }
                if seen.insert(self.distinct[f as usize]) {
                    let score = if max > min { ((s - min) / (max - min)) as f64 } else { 1.0 };
                    out.push(FactMatch { triple: self.graph.fact_triple(f), score, similarity: s });
                }
            }
            if out.len() == n || exhausted {
                return out;
            }
            head *= 8;
        }
    }

    fn linked(&self, e: u32, w: f64, via: &'static str, evidence: String, sim: f32, p: &LinkParams) -> LinkedEntity {
        let weight = if p.specificity { w / self.passages_per_entity[e as usize] as f64 } else { w };
        LinkedEntity { entity: e, label: self.graph.labels[e as usize].clone(), weight, via, evidence, similarity: sim }
    }
}

/// Fact `f`'s text lowercased: facts that differ only in case are one statement.
fn lowered_text(graph: &EntityGraph, f: u32) -> String {
    graph.triples[graph.fact_triple(f) as usize].text().to_lowercase()
}

/// For each fact, the first fact whose lowercased text is the same, found by the texts'
/// hashes (`lowered`) and confirmed by comparing the texts: only facts that share a hash
/// build their texts.
fn first_of_same_text(graph: &EntityGraph, lowered: &[u64]) -> Vec<u32> {
    let mut first: rustc_hash::FxHashMap<u64, u32> = Default::default();
    first.reserve(lowered.len());
    // Facts whose hash an earlier fact of another text has, by their text.
    let mut collided: std::collections::HashMap<String, u32> = Default::default();
    (0..lowered.len() as u32)
        .map(|f| match first.get(&lowered[f as usize]) {
            None => {
                first.insert(lowered[f as usize], f);
                f
            }
            Some(&r) => {
                let text = lowered_text(graph, f);
                if lowered_text(graph, r) == text {
                    r
                } else {
                    *collided.entry(text).or_insert(f)
                }
            }
        })
        .collect()
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
